//! A pipeline with `grey_read` reads each image grey, as OpenCV's `IMREAD_GRAYSCALE` reads it:
//! on the CPU path the loader gives, byte for byte, what it gives for the JPEGs' lumas stored
//! as grey PNGs; the media engine decodes and resamples the luma alone, within its floor of
//! them; a file a grey read does not take is named on either path.

use std::path::Path;

use crate::common::{self, epoch_bytes, TempDir};
use hpuload::decoders::{CpuDecoder, Decode};
use hpuload::{Backend, Dtype, ImageFolder, Layout, Loader, OnError, Pipeline, Source};

/// A folder of 12 JPEGs and a folder of their lumas (as libjpeg decodes them to grey) stored
/// as grey PNGs under the same names.
fn jpegs_and_their_lumas() -> (TempDir, TempDir) {
    let jpegs = common::dataset("grey-read", 12);
    let lumas = TempDir::new("lumas");
    let mut decoder = CpuDecoder::default();
    decoder.set_luma(true);
    for entry in ImageFolder::open(jpegs.path()).unwrap().entries() {
        let mut rgb = Vec::new();
        let info = decoder
            .decode(&std::fs::read(&entry.path).unwrap(), &mut rgb)
            .unwrap();
        let grey: Vec<u8> = rgb.chunks_exact(3).map(|px| px[0]).collect();
        let rel = entry.path.strip_prefix(jpegs.path()).unwrap();
        let out = lumas.path().join(rel).with_extension("png");
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        image::GrayImage::from_raw(info.width, info.height, grey)
            .unwrap()
            .save(&out)
            .unwrap();
    }
    (jpegs, lumas)
}

fn loader(dir: &Path, grey_read: bool, backend: Backend, policy: OnError) -> Loader {
    // The training crop and flip, as bytes.
    let mut pipeline = common::train_at(40);
    pipeline.ops.retain(|op| op.name() != "normalize");
    Loader::builder(ImageFolder::open(dir).unwrap())
        .batch_size(4)
        .shuffle(3)
        .workers(2)
        .backend(backend)
        .on_error(policy)
        .pipeline(Pipeline {
            grey_read,
            ..pipeline
        })
        .output(Dtype::U8, Layout::Nhwc)
        .build()
        .unwrap()
}

#[test]
fn a_grey_read_gives_each_jpegs_luma_byte_for_byte_on_the_cpu_path() {
    let (jpegs, lumas) = jpegs_and_their_lumas();
    let want = epoch_bytes(
        &mut loader(lumas.path(), false, Backend::Cpu, OnError::Fail),
        0,
    );
    let mut l = loader(jpegs.path(), true, Backend::Cpu, OnError::Fail);
    assert!(
        epoch_bytes(&mut l, 0) == want,
        "the grey reads differ from the lumas"
    );
    // Three equal channels in every pixel, and not the colour decode.
    let colour = epoch_bytes(
        &mut loader(jpegs.path(), false, Backend::Cpu, OnError::Fail),
        0,
    );
    assert!(colour != want);
    assert!(want.iter().all(|b| b
        .0
        .chunks_exact(3)
        .all(|px| px[0] == px[1] && px[1] == px[2])));
}

#[test]
fn a_grey_read_runs_on_the_media_engine_within_its_floor_of_the_lumas() {
    let (jpegs, lumas) = jpegs_and_their_lumas();
    let want = epoch_bytes(
        &mut loader(lumas.path(), false, Backend::Cpu, OnError::Fail),
        0,
    );
    for backend in [Backend::Hw, Backend::Auto] {
        let mut l = loader(jpegs.path(), true, backend, OnError::Fail);
        let got = epoch_bytes(&mut l, 0);
        let report = l.report();
        assert_eq!(
            report.hw_samples, 12,
            "{backend:?}: every sample on the engine"
        );
        assert!(report.fallbacks.is_empty(), "{:?}", report.fallbacks);
        let mut worst = f64::INFINITY;
        for (g, w) in got.iter().zip(&want) {
            assert_eq!((&g.1, &g.2), (&w.1, &w.2), "same labels and samples");
            assert!(g
                .0
                .chunks_exact(3)
                .all(|px| px[0] == px[1] && px[1] == px[2]));
            for (a, b) in g.0.chunks(40 * 40 * 3).zip(w.0.chunks(40 * 40 * 3)) {
                worst = worst.min(hpuload::decoders::testing::psnr(a, b));
            }
        }
        assert!(worst >= 40.0, "{backend:?}: worst sample {worst:.1} dB");
    }
}

#[test]
fn a_file_a_grey_read_does_not_take_is_named_on_either_path() {
    let (jpegs, _) = jpegs_and_their_lumas();
    // A colour PNG among the JPEGs: named, with why, and replaced by the skip policy; the
    // engine's backend routes it to the CPU path, which names it.
    let victim = ImageFolder::open(jpegs.path()).unwrap().entries()[5]
        .path
        .clone();
    image::RgbImage::from_pixel(30, 20, image::Rgb([200, 10, 10]))
        .save_with_format(&victim, image::ImageFormat::Png)
        .unwrap();
    for backend in [Backend::Cpu, Backend::Auto] {
        let mut l = loader(jpegs.path(), true, backend, OnError::Fail);
        let err = l.epoch(0).find_map(Result::err).expect("named").to_string();
        assert!(err.contains(&victim.display().to_string()), "{err}");
        assert!(err.contains("a grey read of a colour PNG"), "{err}");
        let mut l = loader(jpegs.path(), true, backend, OnError::Skip);
        let samples: usize = epoch_bytes(&mut l, 0).iter().map(|b| b.1.len()).sum();
        assert_eq!((samples, l.report().skipped), (12, 1), "{backend:?}");
    }
}

/// A pipeline of grey images (`grey` is `"grey_read = true"` or a first `pil_grayscale` op):
/// the training crop and flip, then ImageNet's normalization and random erasing for a float
/// dtype; handed out as one channel when `single_channel`.
fn grey_pipeline(grey: &str, single_channel: bool, dtype: Dtype) -> Pipeline {
    let (read, first) = match grey {
        "read" => ("grey_read = true\n", ""),
        _ => ("", "[[ops]]\nop = 'pil_grayscale'\n"),
    };
    let floats = match dtype {
        Dtype::U8 => "",
        _ => {
            "[[ops]]\nop = 'normalize'\nmean = [0.485, 0.456, 0.406]\nstd = [0.229, 0.224, 0.225]\n\
             [[ops]]\nop = 'random_erasing'\np = 0.5\nvalue = 'random'\n"
        }
    };
    let text = format!(
        "name = 'g'\nsingle_channel = {single_channel}\n{read}{first}\
         [[ops]]\nop = 'random_resized_crop'\nsize = 40\n\
         [[ops]]\nop = 'random_horizontal_flip'\n{floats}"
    );
    Pipeline::from_toml(&text, "g.toml").unwrap()
}

/// Each image's first channel of a batch of three-channel images (`size`-byte values, `pixels`
/// a channel) in `layout`.
fn first_channels(three: &[u8], layout: Layout, pixels: usize, size: usize) -> Vec<u8> {
    match layout {
        Layout::Nchw => three
            .chunks_exact(3 * pixels * size)
            .flat_map(|image| &image[..pixels * size])
            .copied()
            .collect(),
        Layout::Nhwc => three
            .chunks_exact(3 * size)
            .flat_map(|pixel| &pixel[..size])
            .copied()
            .collect(),
    }
}

#[test]
fn a_one_channel_batch_holds_the_first_channel_of_the_three_in_one_plane_per_image() {
    let (jpegs, _) = jpegs_and_their_lumas();
    let build = |grey: &str, single: bool, backend, dtype, layout| {
        Loader::builder(ImageFolder::open(jpegs.path()).unwrap())
            .batch_size(5)
            .shuffle(3)
            .workers(2)
            .backend(backend)
            .pipeline(grey_pipeline(grey, single, dtype))
            .output(dtype, layout)
            .build()
            .unwrap()
    };
    for grey in ["read", "pil"] {
        for backend in [Backend::Cpu, Backend::Auto] {
            for (dtype, layout) in [
                (Dtype::U8, Layout::Nhwc),
                (Dtype::U8, Layout::Nchw),
                (Dtype::F32, Layout::Nchw),
                (Dtype::F32, Layout::Nhwc),
                (Dtype::Bf16, Layout::Nchw),
                (Dtype::F16, Layout::Nhwc),
            ] {
                let case = format!("{grey} {backend:?} {dtype:?} {layout:?}");
                let mut one = build(grey, true, backend, dtype, layout);
                assert_eq!(one.channels(), 1, "{case}");
                let shapes: Vec<Vec<usize>> = one
                    .epoch(0)
                    .map(|b| b.unwrap().images.shape().to_vec())
                    .collect();
                let want = match layout {
                    Layout::Nchw => vec![5, 1, 40, 40],
                    Layout::Nhwc => vec![5, 40, 40, 1],
                };
                assert_eq!(shapes[0], want, "{case}");
                let got = epoch_bytes(&mut one, 1);
                let three = epoch_bytes(&mut build(grey, false, backend, dtype, layout), 1);
                assert_eq!(got.len(), three.len());
                for (g, t) in got.iter().zip(&three) {
                    assert_eq!((&g.1, &g.2), (&t.1, &t.2), "{case}: same samples");
                    let first = first_channels(&t.0, layout, 40 * 40, dtype.size());
                    assert!(g.0 == first, "{case}: not the first channel");
                }
                if backend == Backend::Auto {
                    // Both epochs' samples.
                    let samples: usize = got.iter().map(|b| b.1.len()).sum();
                    assert_eq!(
                        one.report().hw_samples,
                        2 * samples as u64,
                        "{case}: on the engine"
                    );
                }
            }
        }
    }
}

#[test]
fn grey_arrays_may_be_handed_out_as_one_channel_and_colour_ones_may_not() {
    let grey: Vec<u8> = (0..2 * 6 * 8).map(|v| (v * 7 % 251) as u8).collect();
    let array = |channels: u32, pixels: Vec<u8>| {
        hpuload::ImageArray::new("mnist", pixels, (6, 8, channels), vec![3, 4], vec![]).unwrap()
    };
    let pipeline = Pipeline::from_toml(
        "name = 'g'\nsingle_channel = true\n[[ops]]\nop = 'center_crop'\nsize = [4, 6]\n",
        "g.toml",
    )
    .unwrap();
    let mut l = Loader::builder(array(1, grey.clone()))
        .batch_size(2)
        .pipeline(pipeline.clone())
        .output(Dtype::U8, Layout::Nchw)
        .build()
        .unwrap();
    let batch = l.epoch(0).next().unwrap().unwrap();
    assert_eq!(batch.images.shape(), &[2, 1, 4, 6]);
    // The centre 4x6 of each 6x8 image, as stored.
    let want: Vec<u8> = grey
        .chunks_exact(48)
        .flat_map(|image| image.chunks_exact(8).skip(1).take(4).flat_map(|r| &r[1..7]))
        .copied()
        .collect();
    assert_eq!(batch.images.to_host().unwrap(), want);
    let colour = Loader::builder(array(3, [grey.clone(), grey.clone(), grey].concat()))
        .batch_size(2)
        .pipeline(pipeline)
        .build();
    let err = match colour {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a colour array handed out as one channel"),
    };
    assert!(err.contains("single_channel needs grey images"), "{err}");
}
