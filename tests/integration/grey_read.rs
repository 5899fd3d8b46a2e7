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
