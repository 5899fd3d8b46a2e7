//! Criterion benches, one per stage and end to end, named `stage/backend/...` (backend `cpu`
//! for the host path, `engine`/`hw` for the emulated media engine) and reported in images
//! (elements) per second.
//!
//! Input: the folder in `HPULOAD_BENCH_DATA` (e.g. the reference corpus built by
//! `../shared/corpus/build.sh`), else the built-in synthetic dataset.
#![allow(missing_docs)]

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use hpuload::augment::{
    apply, CropBox, Cv2Border, Interpolation, MotionKernel, Noise, Normalize, OutputWriter,
    PilEnhance, PilFilter, PixelOp, Resampler, Scratch, Warp,
};
use hpuload::decoders::jpeg::{choose_scale, scaled_region, Filter, Region, ResizeRequest, Window};
use hpuload::decoders::{CpuDecoder, Decode, JpegDecoder};
use hpuload::pinned::PinnedBuffer;
use hpuload::{pipelines, Backend, Dtype, Hpu, HpuConfig, ImageFolder, Layout, Loader, Source};

const FILES: usize = 64;

fn data_dir() -> std::path::PathBuf {
    std::env::var_os("HPULOAD_BENCH_DATA")
        .map(Into::into)
        .unwrap_or_else(|| hpuload::dataset::default_dataset().expect("default dataset"))
}

/// The first FILES files of the dataset, in memory, and their decoded RGB.
fn inputs() -> Vec<(Vec<u8>, u32, u32, Vec<u8>)> {
    let folder = ImageFolder::open(data_dir()).expect("dataset");
    let step = (folder.entries().len() / FILES).max(1);
    let mut d = CpuDecoder::default();
    folder
        .entries()
        .iter()
        .step_by(step)
        .take(FILES)
        .map(|e| {
            let bytes = std::fs::read(&e.path).unwrap();
            let info = d.probe(&bytes).unwrap();
            let mut rgb = vec![0; info.rgb_len()];
            d.decode_into(&bytes, &info, &mut rgb).unwrap();
            (bytes, info.width, info.height, rgb)
        })
        .collect()
}

fn stages(c: &mut Criterion) {
    let inputs = inputs();
    let mut g = c.benchmark_group("stage");
    g.throughput(Throughput::Elements(inputs.len() as u64))
        .measurement_time(Duration::from_secs(8));
    let mut d = CpuDecoder::default();
    let mut out = vec![0u8; inputs.iter().map(|i| i.3.len()).max().unwrap()];
    g.bench_function("decode/cpu/full", |b| {
        b.iter(|| {
            for (bytes, _, _, rgb) in &inputs {
                let info = d.probe(bytes).unwrap();
                d.decode_into(bytes, &info, &mut out[..rgb.len()]).unwrap();
            }
        })
    });
    // The media engine's decoder on the same files (all baseline JPEG in the corpus).
    let mut e = JpegDecoder::default();
    g.bench_function("decode/engine/full", |b| {
        b.iter(|| {
            for (bytes, _, _, rgb) in &inputs {
                let info = e.probe(bytes).unwrap();
                e.decode_into(bytes, &info, &mut out[..rgb.len()]).unwrap();
            }
        })
    });
    // Region of interest: a centred window of 40% of the area (RandomResizedCrop's mean is
    // 54%), at the DCT scale a 224x224 output allows.
    let centre = |w: u32, h: u32| {
        let (cw, ch) = ((w as f64 * 0.63) as u32, (h as f64 * 0.63) as u32);
        Region {
            x: (w - cw) / 2,
            y: (h - ch) / 2,
            width: cw,
            height: ch,
        }
    };
    g.bench_function("decode/engine/roi_40pct_for_224", |b| {
        b.iter(|| {
            for (bytes, w, h, _) in &inputs {
                let info = e.probe(bytes).unwrap();
                let r = centre(*w, *h);
                let scale = choose_scale(r, 224, 224);
                let sr = scaled_region(&info, r, scale);
                e.decode_region(
                    bytes,
                    r,
                    scale,
                    &mut out[..(sr.width * sr.height * 3) as usize],
                )
                .unwrap();
            }
        })
    });
    // The floor of both: only the entropy decoding to the region's last MCU row.
    g.bench_function("decode/engine/roi_40pct_entropy_only", |b| {
        b.iter(|| {
            for (bytes, w, h, _) in &inputs {
                e.entropy_decode_only(bytes, centre(*w, *h)).unwrap();
            }
        })
    });
    // What an engine job runs: the same region decoded and resampled to 224x224 in YCbCr.
    let mut resized = vec![0u8; 224 * 224 * 3];
    g.bench_function("decode/engine/roi_40pct_resized_to_224", |b| {
        b.iter(|| {
            for (bytes, w, h, _) in &inputs {
                e.probe(bytes).unwrap();
                let r = centre(*w, *h);
                let window = Window {
                    left: r.x.into(),
                    top: r.y.into(),
                    width: r.width.into(),
                    height: r.height.into(),
                };
                let scale = choose_scale(r, 224, 224);
                e.decode_resized(
                    bytes,
                    &ResizeRequest {
                        filter: Filter::Bilinear,
                        region: r,
                        scale,
                        window,
                        out_w: 224,
                        out_h: 224,
                    },
                    &mut resized,
                )
                .unwrap();
            }
        })
    });
    let mut r = Resampler::new(224, 224);
    g.bench_function("crop_resize/cpu/center_crop_to_224", |b| {
        b.iter(|| {
            for (_, w, h, rgb) in &inputs {
                let side = (*w).min(*h);
                r.run(
                    rgb,
                    *w,
                    *h,
                    &CropBox::rect((w - side) / 2, (h - side) / 2, side, side),
                )
                .unwrap();
            }
        })
    });
    // A PIL image's resize (Pillow's own) and v1's of a tensor (torch's float kernel).
    for (name, interpolation) in [
        ("pillow", Interpolation::PilBilinear),
        ("float", Interpolation::FloatBilinear),
    ] {
        g.bench_function(format!("crop_resize/cpu/center_crop_to_224_{name}"), |b| {
            b.iter(|| {
                for (_, w, h, rgb) in &inputs {
                    let side = (*w).min(*h);
                    let window = CropBox::rect((w - side) / 2, (h - side) / 2, side, side);
                    r.run_with(rgb, *w, *h, &window, interpolation).unwrap();
                }
            })
        });
    }
    // The video reference's `Resize((128, 171), antialias=False)` of each frame: torch's
    // two-tap bilinear, here on the photos as frames.
    let mut small = Resampler::new(128, 171);
    g.bench_function("crop_resize/cpu/two_tap_to_171x128", |b| {
        b.iter(|| {
            for (_, w, h, rgb) in &inputs {
                small
                    .run_with(
                        rgb,
                        *w,
                        *h,
                        &CropBox::full(*w, *h),
                        Interpolation::BilinearNoAntialias,
                    )
                    .unwrap();
            }
        })
    });
    // The eval transform on a tensor, `Resize(256)` then `CenterCrop(224)`: a window of the
    // whole resize, in the source's coordinates.
    g.bench_function("crop_resize/cpu/resize_256_center_crop_224", |b| {
        b.iter(|| {
            for (_, w, h, rgb) in &inputs {
                let (w, h) = (f64::from(*w), f64::from(*h));
                let scale = 256.0 / w.min(h);
                let (rw, rh) = (
                    (w * scale).floor().max(256.0),
                    (h * scale).floor().max(256.0),
                );
                let (left, top) = (((rw - 224.0) / 2.0).round(), ((rh - 224.0) / 2.0).round());
                let window = CropBox {
                    left: left * w / rw,
                    top: top * h / rh,
                    width: 224.0 * w / rw,
                    height: 224.0 * h / rh,
                    view: false,
                };
                r.run_with(rgb, w as u32, h as u32, &window, Interpolation::Bilinear)
                    .unwrap();
            }
        })
    });
    let resized = r
        .run(
            &inputs[0].3,
            inputs[0].1,
            inputs[0].2,
            &CropBox::full(inputs[0].1, inputs[0].2),
        )
        .unwrap()
        .to_vec();
    for (dtype, name) in [(Dtype::Bf16, "bf16"), (Dtype::F32, "f32")] {
        let writer = OutputWriter::new(dtype, Layout::Nchw, Some(Normalize::imagenet()));
        let mut slot = PinnedBuffer::new(224 * 224 * 3 * dtype.size()).unwrap();
        g.bench_function(format!("collate/cpu/flip_normalize_{name}_nchw"), |b| {
            b.iter(|| {
                for i in 0..inputs.len() {
                    writer.write(&resized, 224, 224, i % 2 == 0, slot.as_mut_slice());
                }
            })
        });
    }
    // ColorJitter(0.4, 0.4, 0.4, 0.1)'s four ops with typical factors, on the 224x224 images.
    let jitter = [
        PixelOp::Contrast(1.21),
        PixelOp::Hue(-0.04),
        PixelOp::Brightness(0.83),
        PixelOp::Saturation(1.3),
    ];
    let mut scratch = Scratch::default();
    let mut rgb = resized.clone();
    // torchvision's RandomRotation(20) of a tensor (`grid_sample`) or a PIL image (Pillow).
    let rotate = |pil: bool, nearest: bool| {
        PixelOp::Warp(Warp {
            rotate: true,
            angle: 20.0,
            translate: [0.0; 2],
            scale: 1.0,
            shear: [0.0; 2],
            center: None,
            nearest,
            fill: Some([124.0, 116.0, 104.0]),
            pil,
        })
    };
    g.bench_function("pixel_ops/cpu/color_jitter_224", |b| {
        b.iter(|| {
            for _ in 0..inputs.len() {
                rgb.copy_from_slice(&resized);
                apply(&jitter, &mut rgb, 224, 224, &mut scratch);
            }
        })
    });
    for (name, op) in [
        ("brightness", PixelOp::Brightness(0.83)),
        ("contrast", PixelOp::Contrast(1.21)),
        ("saturation", PixelOp::Saturation(1.3)),
        ("hue", PixelOp::Hue(-0.04)),
        ("pil_hue", PixelOp::PilHue(-0.04)),
        (
            "pil_color",
            PixelOp::PilEnhance {
                kind: PilEnhance::Color,
                factor: 1.3,
            },
        ),
        (
            "pil_contrast",
            PixelOp::PilEnhance {
                kind: PilEnhance::Contrast,
                factor: 0.7,
            },
        ),
        ("warp_rotate_nearest", rotate(false, true)),
        ("warp_rotate_bilinear", rotate(false, false)),
        ("pil_warp_rotate_nearest", rotate(true, true)),
        ("pil_warp_rotate_bilinear", rotate(true, false)),
        (
            "pil_affine_bilinear",
            PixelOp::PilAffine {
                matrix: [1.0, 0.21, 0.0, 0.0, 1.0, 0.0],
                filter: PilFilter::Bilinear,
                fill: [124, 116, 104],
            },
        ),
        (
            "pil_affine_bicubic",
            PixelOp::PilAffine {
                matrix: [0.95, -0.3, 40.0, 0.3, 0.95, -30.0],
                filter: PilFilter::Bicubic,
                fill: [124, 116, 104],
            },
        ),
        (
            // timm's Rotate(20) as `Image.rotate` hands it to the transform.
            "pil_rotate_bicubic",
            PixelOp::PilAffine {
                matrix: [
                    0.939692620785908,
                    -0.342020143325669,
                    45.06068252445323,
                    0.342020143325669,
                    0.939692620785908,
                    -31.551829580496616,
                ],
                filter: PilFilter::Bicubic,
                fill: [124, 116, 104],
            },
        ),
        (
            "pil_translate_y_bicubic",
            PixelOp::PilAffine {
                matrix: [1.0, 0.0, 0.0, 0.0, 1.0, 31.7],
                filter: PilFilter::Bicubic,
                fill: [124, 116, 104],
            },
        ),
        (
            "pil_sharpness",
            PixelOp::PilEnhance {
                kind: PilEnhance::Sharpness,
                factor: 1.6,
            },
        ),
        ("equalize", PixelOp::Equalize),
        // torchvision's GaussianBlur: 5 taps, and SimCLR's 23 at 224.
        (
            "gaussian_blur_5",
            PixelOp::GaussianBlur {
                kernel: [5, 5],
                sigma: [1.3, 1.3],
                v1: true,
            },
        ),
        (
            "gaussian_blur_23",
            PixelOp::GaussianBlur {
                kernel: [23, 23],
                sigma: [1.7, 1.7],
                v1: false,
            },
        ),
        ("pil_auto_contrast", PixelOp::PilAutoContrast),
        ("solarize", PixelOp::Solarize(100.0)),
        (
            // albumentations' ShiftScaleRotate: 1.05 and 0.95, 27 degrees, shifted (5, -8).
            "cv2_affine",
            PixelOp::Cv2Affine {
                inverse: [0.847, -0.432, 52.9, 0.406, 0.934, -29.6],
                inverse_f64: [0.847, -0.432, 52.9, 0.406, 0.934, -29.6],
                border: Cv2Border::Constant,
                fill: [0, 0, 0],
            },
        ),
        (
            "hsv_shift",
            PixelOp::HsvShift {
                hue: 7.3,
                sat: -12.6,
                val: 9.1,
            },
        ),
        (
            "multiply_add",
            PixelOp::MultiplyAdd {
                alpha: 1.1,
                beta: -12.3,
            },
        ),
        ("transpose", PixelOp::Transpose),
        // albumentations' ImageCompression: OpenCV's JPEG encoding and decoding.
        ("jpeg_round_trip_q80", PixelOp::JpegRoundTrip(80)),
        // albumentations' CLAHE: OpenCV's Lab both ways and its CLAHE of L.
        (
            "clahe_clip4",
            PixelOp::Clahe {
                clip_limit: 4.0,
                tiles: [8, 8],
            },
        ),
        // albumentations' blurs and noise (the melanoma-style OneOf's sizes).
        ("box_blur_5", PixelOp::BoxBlur(5)),
        ("median_blur_5", PixelOp::MedianBlur(5)),
        (
            "motion_blur_5",
            PixelOp::MotionBlur(Box::new(MotionKernel {
                size: 5,
                angle: 30.0,
                direction: 0.0,
                shift: [0.0; 2],
                points: vec![[1, 0], [1, 1], [2, 2], [3, 3], [3, 4]],
            })),
        ),
        (
            "sep_gaussian_7",
            PixelOp::SepGaussian {
                size: 7,
                sigma: 1.5,
            },
        ),
        (
            "gauss_noise",
            PixelOp::GaussNoise(Noise {
                key: 11,
                mean: 0.0,
                std: 0.06,
                per_channel: true,
            }),
        ),
    ] {
        g.bench_function(format!("pixel_ops/cpu/{name}_224"), |b| {
            b.iter(|| {
                for _ in 0..inputs.len() {
                    rgb.copy_from_slice(&resized);
                    apply(std::slice::from_ref(&op), &mut rgb, 224, 224, &mut scratch);
                }
            })
        });
    }
    g.finish();

    let hpu = Hpu::emulated(HpuConfig::default()).unwrap();
    let batch_bytes = 256 * 3 * 224 * 224 * 2;
    let dst = hpu.alloc(batch_bytes).unwrap();
    let mut g = c.benchmark_group("dma");
    g.throughput(Throughput::Elements(256))
        .measurement_time(Duration::from_secs(5));
    let mut src = Some(PinnedBuffer::new(batch_bytes).unwrap());
    g.bench_function("host_to_device/pinned/bf16_batch_256", |b| {
        b.iter(|| {
            src = Some(
                hpu.copy_to_device(src.take().unwrap(), &dst)
                    .wait()
                    .unwrap(),
            );
        })
    });
    g.finish();
}

fn end_to_end(c: &mut Criterion) {
    let mut g = c.benchmark_group("end_to_end");
    g.sample_size(10).measurement_time(Duration::from_secs(30));
    for (name, pipeline, backend) in [
        (
            "cpu/resnet50_train",
            pipelines::resnet50_train(),
            Backend::Cpu,
        ),
        (
            "hw/resnet50_train",
            pipelines::resnet50_train(),
            Backend::Auto,
        ),
        (
            "cpu/resnet50_eval",
            pipelines::resnet50_eval(),
            Backend::Cpu,
        ),
        (
            "hw/resnet50_eval",
            pipelines::resnet50_eval(),
            Backend::Auto,
        ),
    ] {
        let mut loader = Loader::builder(ImageFolder::open(data_dir()).unwrap())
            .backend(backend)
            .batch_size(256)
            .shuffle(0)
            .workers(2)
            .pipeline(pipeline)
            .output(Dtype::Bf16, Layout::Nchw)
            .build()
            .unwrap();
        let images = (loader.batches_per_epoch() * 256) as u64;
        g.throughput(Throughput::Elements(images));
        let mut epoch = 0;
        g.bench_function(format!("{name}/bf16_nchw_batch256_workers2"), |b| {
            b.iter_batched(
                || {
                    epoch += 1;
                    epoch
                },
                |e| {
                    // Each batch is yielded only after its DMA completed: the device has the data.
                    loader.epoch(e).map(|b| b.unwrap().valid).sum::<usize>()
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, stages, end_to_end);
criterion_main!(benches);
