//! The media-engine (HW) path and the CPU path, one test body run on both, must agree: for the
//! same sample and crop, PSNR >= 40 dB, with DCT scaling or without.

use crate::common;
use crate::common::{epoch_bytes, TempDir};
use hpuload::decoders::testing::psnr;
use hpuload::{pipelines, Backend, Dtype, ImageFolder, Layout, Loader, Op, Pipeline, Size, Source};

/// NHWC batches of one epoch on `backend`, as u8 pixel values, with the report.
fn run(
    dir: &std::path::Path,
    pipeline: Pipeline,
    backend: Backend,
    dtype: Dtype,
) -> (Vec<common::HostBatch>, hpuload::Report) {
    let mut l = Loader::builder(ImageFolder::open(dir).unwrap())
        .batch_size(6)
        .shuffle(11)
        .workers(2)
        .backend(backend)
        .pipeline(pipeline)
        .output(dtype, Layout::Nhwc)
        .build()
        .unwrap();
    let mut batches = epoch_bytes(&mut l, 0);
    if dtype == Dtype::F32 {
        // f32 without normalize holds v / 255: back to pixel values for the comparison.
        for b in &mut batches {
            b.0 =
                b.0.chunks(4)
                    .map(|c| (f32::from_ne_bytes(c.try_into().unwrap()) * 255.0).round() as u8)
                    .collect();
        }
    }
    (batches, l.report())
}

/// Runs both backends and checks every sample's PSNR against `min_db`; returns the worst.
fn assert_backends_agree(
    dir: &std::path::Path,
    pipeline: Pipeline,
    dtype: Dtype,
    pixels: usize,
    min_db: f64,
) -> (f64, hpuload::Report) {
    let sample_bytes = pixels * 3;
    let (hw, hw_report) = run(dir, pipeline.clone(), Backend::Hw, dtype);
    let (cpu, cpu_report) = run(dir, pipeline, Backend::Cpu, dtype);
    assert_eq!(
        hw_report.hw_samples, hw_report.samples_loaded,
        "every sample went to the engine"
    );
    assert_eq!(cpu_report.hw_samples, 0);
    // Only bitstreams cross for engine samples: the files' bytes and the labels, however the
    // files' sizes compare with the outputs' (the CPU path's DMA).
    let labels = 8 * hw_report.samples_loaded;
    assert_eq!(
        hw_report.bytes_dma,
        hw_report.bytes_read + labels,
        "only bitstreams and labels cross for engine samples"
    );
    assert!(cpu_report.bytes_dma >= (pixels * 3) as u64 * cpu_report.samples_loaded);
    let mut worst = f64::INFINITY;
    for (h, c) in hw.iter().zip(&cpu) {
        assert_eq!((&h.1, &h.2), (&c.1, &c.2), "same labels and samples");
        for (a, b) in h.0.chunks(sample_bytes).zip(c.0.chunks(sample_bytes)) {
            worst = worst.min(psnr(a, b));
        }
    }
    assert!(
        worst >= min_db,
        "worst sample PSNR {worst:.1} dB < {min_db} dB"
    );
    (worst, hw_report)
}

fn flip_only(size: u32) -> Pipeline {
    Pipeline::new("rrc")
        .then(Op::RandomResizedCrop(hpuload::augment::RandomResizedCrop {
            size: Size::Square(size),
            scale: [0.08, 1.0],
            ratio: [0.75, 4.0 / 3.0],
            interpolation: Default::default(),
        }))
        .then(Op::RandomHorizontalFlip(
            hpuload::augment::RandomHorizontalFlip { p: 0.5 },
        ))
}

#[test]
fn engine_and_cpu_agree_without_dct_scaling() {
    // ImageNet-sized images and 224 outputs: crops are never twice the output, so scale 1.
    let dir = TempDir::new("agree1");
    hpuload::dataset::make_dataset(dir.path(), 24, 3).unwrap();
    let (_, report) = assert_backends_agree(dir.path(), flip_only(224), Dtype::U8, 224 * 224, 40.0);
    assert_eq!(
        report.hw_dct_scaled, 0,
        "test configuration must not use DCT scaling"
    );
    let eval = pipelines::resnet50_eval().ops[..2].to_vec();
    let (_, report) = assert_backends_agree(
        dir.path(),
        Pipeline {
            ops: eval,
            ..Pipeline::new("eval")
        },
        Dtype::U8,
        224 * 224,
        40.0,
    );
    assert_eq!(
        report.hw_dct_scaled, 0,
        "test configuration must not use DCT scaling"
    );
}

#[test]
fn engine_and_cpu_agree_with_dct_scaling() {
    // Large images with detail at many scales (stripes up to an eighth of a cycle per pixel,
    // blocks of grain, hard edges) to a 64x64 output: the engine decodes most crops at 1/2 or
    // 1/4 scale. A reduced DCT scale keeps every frequency up to its own limit, where the
    // resize's filter already damps them: left to shrink only a little after it (the smallest
    // scale with the output's size), these samples came out sharper than the CPU path's, down
    // to 28 dB; with the resize shrinking at least 3x (`REDUCING_GAP`) they hold the floor of
    // unscaled decodes. (Most bitstreams here are larger than their slots: they cross in
    // device buffers of their own.)
    let dir = TempDir::new("agree2");
    for c in 0..2 {
        std::fs::create_dir_all(dir.path().join(format!("c{c}"))).unwrap();
    }
    for i in 0..12u32 {
        let (w, h) = (900 + i * 37, 700 + i * 29);
        // An 8x8 block of grain each, from a linear congruential generator's high bits.
        let mut state = u64::from(i) + 1;
        let blocks: Vec<f32> = (0..(w / 8 + 1) * (h / 8 + 1))
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                (state >> 40) as f32 / (1u64 << 24) as f32 * 60.0 - 30.0
            })
            .collect();
        let img = image::RgbImage::from_fn(w, h, |x, y| {
            let (fx, fy) = (x as f32, y as f32);
            let cycles = 0.02 + 0.1 * fx / w as f32;
            let stripes = 128.0 + 90.0 * (std::f32::consts::TAU * cycles * fx + i as f32).sin();
            let shade = if (x / 37 + y / 29) % 2 == 0 { 0.6 } else { 1.0 };
            let grain = blocks[((y / 8) * (w / 8 + 1) + x / 8) as usize];
            let v = |a: f32| (a * shade).clamp(0.0, 255.0) as u8;
            image::Rgb([
                v(stripes),
                v(stripes + grain),
                v(255.0 - stripes * (fy / h as f32)),
            ])
        });
        img.save(dir.path().join(format!("c{}/{i}.jpg", i % 2)))
            .unwrap();
    }
    let (_, report) = assert_backends_agree(dir.path(), flip_only(64), Dtype::F32, 64 * 64, 40.0);
    assert!(
        report.hw_dct_scaled * 2 >= report.hw_samples,
        "most samples must be DCT-scaled: {} of {}",
        report.hw_dct_scaled,
        report.hw_samples
    );
}

/// The agreement check on a directory of real photographs (an ImageFolder), for both
/// built-in pipelines: `HPULOAD_AGREE_DIR=../shared/corpus/out cargo test --release --test
/// integration backends -- --ignored --nocapture`. A sample can only have been DCT-scaled when its image
/// is at least six times the output in both dimensions (half of it three times the output,
/// `REDUCING_GAP`). Every sample gets the 40 dB floor. Prints the worst and median PSNR of
/// each group.
#[test]
#[ignore = "needs HPULOAD_AGREE_DIR: a directory of real JPEGs"]
fn engine_and_cpu_agree_on_real_photographs() {
    use hpuload::Source;
    let dir = std::env::var_os("HPULOAD_AGREE_DIR").expect("set HPULOAD_AGREE_DIR");
    let dir = std::path::Path::new(&dir);
    let entries = ImageFolder::open(dir).unwrap().entries().to_vec();
    let eval = Pipeline {
        ops: pipelines::resnet50_eval().ops[..2].to_vec(),
        ..Pipeline::new("eval")
    };
    let pixels = 224 * 224 * 3;
    for pipeline in [flip_only(224), eval] {
        let name = pipeline.name.clone();
        let (hw, report) = run(dir, pipeline.clone(), Backend::Hw, Dtype::U8);
        let (cpu, _) = run(dir, pipeline, Backend::Cpu, Dtype::U8);
        let mut groups: [Vec<f64>; 2] = Default::default();
        for (h, c) in hw.iter().zip(&cpu) {
            assert_eq!((&h.1, &h.2), (&c.1, &c.2), "same labels and samples");
            let samples = h.0.chunks(pixels).zip(c.0.chunks(pixels)).take(h.3);
            for ((a, b), &index) in samples.zip(&h.2) {
                let (w, ht) = image::image_dimensions(&entries[index].path).unwrap();
                let may_scale = w >= 6 * 224 && ht >= 6 * 224;
                groups[usize::from(may_scale)].push(psnr(a, b));
            }
        }
        for (group, may_scale) in groups.iter_mut().zip([false, true]) {
            if group.is_empty() {
                continue;
            }
            group.sort_by(f64::total_cmp);
            let (worst, median) = (group[0], group[group.len() / 2]);
            println!(
                "{name}, images that {} be DCT-scaled: {} samples, worst PSNR {worst:.2} dB, \
                 median {median:.2} dB",
                if may_scale { "may" } else { "cannot" },
                group.len()
            );
            assert!(worst >= 40.0, "{name}: worst {worst:.2} dB < 40 dB");
        }
        println!("{name}: {} samples DCT-scaled", report.hw_dct_scaled);
    }
}

/// The per-sample plan (interpolation, pixel ops including timm's Pillow ops, erase boxes) runs on the engine as device
/// ops after the decode and on the CPU on the host: the same plan on both, so the outputs
/// differ only by decoder rounding, which some ops amplify (equalize, posterize, solarize near
/// their thresholds): the floor is lower than for crop and flip alone.
#[test]
fn engine_and_cpu_run_the_same_pixel_plan() {
    use hpuload::augment::{EraseValue, Interpolation};
    let dir = TempDir::new("agree-ops");
    hpuload::dataset::make_dataset(dir.path(), 24, 5).unwrap();
    let rrc = |interpolation| {
        Op::RandomResizedCrop(hpuload::augment::RandomResizedCrop {
            size: Size::Square(176),
            scale: [0.25, 1.0],
            ratio: [0.75, 4.0 / 3.0],
            interpolation,
        })
    };
    let colour = Pipeline::new("timm")
        .then(rrc(Interpolation::Random))
        .then(Op::RandomHorizontalFlip(
            hpuload::augment::RandomHorizontalFlip { p: 0.5 },
        ))
        .then(Op::ColorJitter(hpuload::augment::ColorJitter {
            brightness: Some([0.6, 1.4]),
            contrast: Some([0.6, 1.4]),
            saturation: Some([0.6, 1.4]),
            hue: Some([-0.1, 0.1]),
            pil: false,
            v1: false,
        }));
    let (worst, _) = assert_backends_agree(dir.path(), colour, Dtype::U8, 176 * 176, 35.0);
    println!("colour jitter, random interpolation: worst {worst:.1} dB");
    let trivial = Pipeline::new("ta")
        .then(rrc(Interpolation::Bilinear))
        .then(Op::RandomHorizontalFlip(
            hpuload::augment::RandomHorizontalFlip { p: 0.5 },
        ))
        .then(Op::TrivialAugmentWide(
            hpuload::augment::TrivialAugmentWide {
                num_magnitude_bins: 31,
                interpolation: Interpolation::Bilinear,
                fill: None,
                pil: false,
                v1: false,
            },
        ))
        .then(Op::RandomErasing(hpuload::augment::RandomErasing {
            p: 0.5,
            scale: [0.02, 0.33],
            ratio: [0.3, 3.3],
            value: EraseValue::Constant([0.0; 3]),
            count: [1, 1],
            timm: false,
        }));
    let (worst, _) = assert_backends_agree(dir.path(), trivial, Dtype::U8, 176 * 176, 25.0);
    println!("trivial augment + erasing: worst {worst:.1} dB");
    let timm: Pipeline = Pipeline::from_toml(
        r#"
        name = "timm_rand_augment"
        [[ops]]
        op = "random_resized_crop"
        size = 176
        scale = [0.25, 1.0]
        interpolation = "random"
        [[ops]]
        op = "timm_rand_augment"
        ops = ["AutoContrast", "Equalize", "Invert", "Rotate", "PosterizeIncreasing",
               "SolarizeIncreasing", "SolarizeAdd", "ColorIncreasing", "ContrastIncreasing",
               "BrightnessIncreasing", "SharpnessIncreasing", "ShearX", "ShearY",
               "TranslateXRel", "TranslateYRel"]
        magnitude = 9.0
        [ops.hparams]
        magnitude_std = 0.5
        fill = [124, 116, 104]
        "#,
        "timm",
    )
    .unwrap();
    let (worst, _) = assert_backends_agree(dir.path(), timm, Dtype::U8, 176 * 176, 25.0);
    println!("timm rand-m9-mstd0.5-inc1: worst {worst:.1} dB");
    let nearest = Pipeline::new("nearest").then(rrc(Interpolation::Nearest));
    let (worst, report) = assert_backends_agree(dir.path(), nearest, Dtype::U8, 176 * 176, 45.0);
    assert_eq!(report.hw_dct_scaled, 0, "nearest decodes at full scale");
    println!("nearest: worst {worst:.1} dB");
}

/// A device batch crosses to the device in parts of 32 engine samples, each part's engine jobs
/// started when it arrives. Batches of 36 (two parts, with samples decoded on the host among
/// them) must hold the bytes that batches of 4, each sent whole, hold.
#[test]
fn a_batch_sent_to_the_device_in_parts_holds_the_bytes_of_batches_sent_whole() {
    let data = common::dataset("parts", 72);
    // Every sixth image a PNG, which the engine does not take: host-decoded slots in each part.
    let folder = ImageFolder::open(data.path()).unwrap();
    for entry in folder.entries().iter().step_by(6) {
        image::open(&entry.path)
            .unwrap()
            .save(entry.path.with_extension("png"))
            .unwrap();
        std::fs::remove_file(&entry.path).unwrap();
    }
    let run = |batch: usize| {
        let mut l = Loader::builder(ImageFolder::open(data.path()).unwrap())
            .batch_size(batch)
            .shuffle(5)
            .workers(2)
            .backend(Backend::Auto)
            // Slots large enough for the bitstreams to ride in them.
            .pipeline(common::train_at(224))
            .build()
            .unwrap();
        let batches = epoch_bytes(&mut l, 0);
        let report = l.report();
        assert_eq!(report.samples_loaded, 72);
        assert_eq!(report.hw_samples, 60, "the JPEGs went to the engine");
        let samples: Vec<u8> = batches.iter().flat_map(|b| b.0.clone()).collect();
        let labels: Vec<i64> = batches.iter().flat_map(|b| b.1.clone()).collect();
        let indices: Vec<usize> = batches.iter().flat_map(|b| b.2.clone()).collect();
        (samples, labels, indices)
    };
    let (parts, whole) = (run(36), run(4));
    assert_eq!(parts.2, whole.2, "same samples in the same order");
    assert_eq!(parts.1, whole.1, "same labels");
    assert!(parts.0 == whole.0, "same bytes");
}

/// On the engine, bf16 and f32 NCHW batches are written from the decoder's resampled planes
/// in one pass, colour conversion and normalization together (where the CPU has AVX-512 BF16,
/// or F and BW, for each; the two-pass write elsewhere), and NHWC batches through an RGB image
/// then the tables. They must hold the same values: the f32 NCHW batch is the NHWC one with
/// its axes swapped, and each bf16 the f32 rounded, for colour and greyscale JPEGs, flipped
/// or not, in device and host batches.
#[test]
fn engine_nchw_batches_written_from_planes_hold_the_values_of_nhwc_batches() {
    use hpuload::Placement;
    let data = common::dataset("planes-nhwc", 20);
    let folder = ImageFolder::open(data.path()).unwrap();
    for entry in folder.entries().iter().step_by(4) {
        let grey = image::open(&entry.path).unwrap().to_luma8();
        grey.save(&entry.path).unwrap();
    }
    let run = |dtype: Dtype, layout: Layout, placement: Placement| {
        let mut l = Loader::builder(ImageFolder::open(data.path()).unwrap())
            .batch_size(5)
            .shuffle(9)
            .workers(2)
            .backend(Backend::Hw)
            .pipeline(common::train_at(224))
            .output(dtype, layout)
            .placement(placement)
            .build()
            .unwrap();
        let batches = epoch_bytes(&mut l, 0);
        assert_eq!(l.report().hw_samples, 20, "every image on the engine");
        batches
    };
    let floats = |bytes: &[u8]| -> Vec<f32> {
        bytes
            .chunks(4)
            .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    };
    let plane = 224 * 224;
    for placement in [Placement::Device, Placement::Host] {
        let nhwc = run(Dtype::F32, Layout::Nhwc, placement);
        let nchw = run(Dtype::F32, Layout::Nchw, placement);
        let narrow = run(Dtype::Bf16, Layout::Nchw, placement);
        assert_eq!((nhwc.len(), nchw.len()), (narrow.len(), narrow.len()));
        for ((hwc, chw), b) in nhwc.iter().zip(&nchw).zip(&narrow) {
            assert_eq!((&hwc.2, &chw.2), (&b.2, &b.2), "same samples");
            let (hwc, chw) = (floats(&hwc.0), floats(&chw.0));
            for (s, (hwc, chw)) in hwc.chunks(3 * plane).zip(chw.chunks(3 * plane)).enumerate() {
                let swapped: Vec<f32> = (0..3)
                    .flat_map(|c| hwc.iter().skip(c).step_by(3).copied())
                    .collect();
                assert!(
                    swapped
                        .iter()
                        .map(|v| v.to_bits())
                        .eq(chw.iter().map(|v| v.to_bits())),
                    "{placement:?}: sample {s}: f32 NCHW is not NHWC's values"
                );
            }
            let rounded: Vec<u16> = chw
                .iter()
                .map(|&v| half::bf16::from_f32(v).to_bits())
                .collect();
            let got: Vec<u16> =
                b.0.chunks(2)
                    .map(|c| u16::from_ne_bytes(c.try_into().unwrap()))
                    .collect();
            assert!(rounded == got, "{placement:?}: bf16 is not the f32 rounded");
        }
    }
}

/// A classification pipeline that makes each image grey before its geometry (Pillow's `L`,
/// torchvision's tensor grey): the engine takes it, making the image grey after its resize,
/// within its floor of the CPU path (which makes it grey first), every pixel grey.
#[test]
fn a_grey_conversion_before_the_geometry_runs_on_the_engine_after_its_resize() {
    let dir = TempDir::new("grey-first");
    hpuload::dataset::make_dataset(dir.path(), 18, 3).unwrap();
    for grey in ["pil_grayscale", "random_grayscale"] {
        let text = format!("name = 'grey'\n[[ops]]\nop = '{grey}'\np = 1.0\n");
        let mut pipeline = flip_only(96);
        let first = Pipeline::from_toml(&text, "grey").unwrap().ops;
        pipeline.ops.splice(0..0, first);
        let (hw, _) = run(dir.path(), pipeline.clone(), Backend::Hw, Dtype::U8);
        assert!(hw
            .iter()
            .all(|b| b.0.chunks_exact(3).all(|p| p[0] == p[1] && p[1] == p[2])));
        let (worst, report) = assert_backends_agree(dir.path(), pipeline, Dtype::U8, 96 * 96, 40.0);
        assert!(report.fallbacks.is_empty(), "{:?}", report.fallbacks);
        assert!(worst < f64::INFINITY, "the engine's own resize");
    }
    // With a step after that remaps levels (which would turn the rounding's difference into
    // many), the CPU path takes the sample as it is: grey first, byte for byte.
    let text =
        "name = 'grey'\n[[ops]]\nop = 'pil_grayscale'\n[[ops]]\nop = 'random_resized_crop'\n\
                size = 64\n[[ops]]\nop = 'random_equalize'\np = 1.0\n";
    let pipeline = Pipeline::from_toml(text, "grey").unwrap();
    let (auto, report) = run(dir.path(), pipeline.clone(), Backend::Auto, Dtype::U8);
    let (cpu, _) = run(dir.path(), pipeline, Backend::Cpu, Dtype::U8);
    assert_eq!(report.hw_samples, 0);
    assert!(auto == cpu, "the CPU path's grey first");
}
