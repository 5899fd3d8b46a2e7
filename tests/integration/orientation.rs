//! A pipeline with `exif_orientation` turns each image upright by the EXIF orientation it
//! carries before anything else: the loader gives, byte for byte, what it gives for the same
//! images stored already turned (lossless PNGs of the turned pixels), on either backend.

use std::path::{Path, PathBuf};

use crate::common::{self, epoch_bytes, TempDir};
use hpuload::decoders::orientation::Orientation;
use hpuload::decoders::{CpuDecoder, Decode};
use hpuload::{Backend, Dtype, ExifReader, ImageFolder, Layout, Loader, Pipeline, Source};

/// Exif data (`Exif\0\0`, a little-endian TIFF header, one directory) whose one entry is the
/// Orientation `value`, as an APP1 segment.
fn exif_segment(value: u16) -> Vec<u8> {
    let mut body = b"Exif\0\0II\x2a\x00".to_vec();
    body.extend(8u32.to_le_bytes());
    body.extend(1u16.to_le_bytes());
    body.extend(0x0112u16.to_le_bytes());
    body.extend(3u16.to_le_bytes()); // SHORT
    body.extend(1u32.to_le_bytes());
    body.extend(value.to_le_bytes());
    body.extend([0, 0, 0, 0, 0, 0]);
    let mut segment = vec![0xFF, 0xE1];
    segment.extend(((body.len() + 2) as u16).to_be_bytes());
    segment.extend(body);
    segment
}

/// The JPEGs of `dir`, in the loader's order.
fn jpegs(dir: &Path) -> Vec<PathBuf> {
    ImageFolder::open(dir)
        .unwrap()
        .entries()
        .iter()
        .map(|e| e.path.clone())
        .collect()
}

/// A folder of 16 JPEGs, file `k` carrying orientation `k % 8 + 1`, and a folder of the same
/// images decoded, turned upright and stored as PNGs (the same names, so the same order).
fn oriented_and_turned() -> (TempDir, TempDir) {
    let oriented = common::dataset("orient", 16);
    let turned = TempDir::new("turned");
    let mut decoder = CpuDecoder::default();
    for (k, path) in jpegs(oriented.path()).iter().enumerate() {
        let bytes = std::fs::read(path).unwrap();
        let value = (k % 8 + 1) as u16;
        let mut tagged = bytes[..2].to_vec();
        tagged.extend(exif_segment(value));
        tagged.extend(&bytes[2..]);
        std::fs::write(path, &tagged).unwrap();

        let mut rgb = Vec::new();
        let info = decoder.decode(&bytes, &mut rgb).unwrap();
        let turn = Orientation::from_tag(value.into());
        let (w, h) = turn.turned_size(info.width, info.height);
        let mut upright = vec![0; rgb.len()];
        turn.turn(
            &rgb,
            info.width as usize,
            info.height as usize,
            3,
            &mut upright,
        );
        let rel = path
            .strip_prefix(oriented.path())
            .unwrap()
            .with_extension("png");
        let out = turned.path().join(rel);
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        image::RgbImage::from_raw(w, h, upright)
            .unwrap()
            .save(&out)
            .unwrap();
    }
    (oriented, turned)
}

fn run(dir: &Path, exif: bool, backend: Backend) -> (Vec<common::HostBatch>, hpuload::Report) {
    let pipeline = Pipeline {
        exif_orientation: exif,
        ..common::train_at(48)
    };
    run_pipeline(dir, pipeline, backend)
}

fn run_pipeline(
    dir: &Path,
    pipeline: Pipeline,
    backend: Backend,
) -> (Vec<common::HostBatch>, hpuload::Report) {
    let mut l = Loader::builder(ImageFolder::open(dir).unwrap())
        .batch_size(4)
        .shuffle(5)
        .workers(2)
        .backend(backend)
        .pipeline(pipeline)
        .output(Dtype::F32, Layout::Nchw)
        .build()
        .unwrap();
    let batches = [epoch_bytes(&mut l, 0), epoch_bytes(&mut l, 1)].concat();
    (batches, l.report())
}

/// f32 values in [0, 1] (or normalized: any f32) as bytes, for a PSNR.
fn pixels(f32s: &[u8]) -> Vec<u8> {
    f32s.chunks(4)
        .map(|c| (f32::from_ne_bytes(c.try_into().unwrap()) * 60.0 + 128.0).clamp(0.0, 255.0) as u8)
        .collect()
}

#[test]
fn images_are_turned_by_their_exif_orientation_before_the_crop_on_both_backends() {
    let (oriented, turned) = oriented_and_turned();
    let (want, _) = run(turned.path(), false, Backend::Cpu);
    let (cpu, _) = run(oriented.path(), true, Backend::Cpu);
    assert!(cpu == want, "the CPU path's turned samples differ");
    // The media engine decodes each crop's window of the image as stored (at its DCT scale,
    // resampled in YCbCr) and turns what it resampled: within its usual distance of the CPU
    // path's samples of the turned images, whichever the orientation, and on the engine alone.
    for backend in [Backend::Auto, Backend::Hw] {
        let (engine, report) = run(oriented.path(), true, backend);
        let sample = 3 * 48 * 48 * 4;
        for (a, w) in engine.iter().zip(&want) {
            assert_eq!(a.2, w.2);
            for ((k, x), y) in a.2.iter().zip(a.0.chunks(sample)).zip(w.0.chunks(sample)) {
                let db = hpuload::decoders::testing::psnr(&pixels(x), &pixels(y));
                assert!(
                    db > 30.0,
                    "{backend:?}, sample {k} (orientation {}): {db:.1} dB",
                    k % 8 + 1
                );
            }
        }
        assert!(report.fallbacks.is_empty(), "{:?}", report.fallbacks);
        assert_eq!(report.hw_samples, 32, "{backend:?}");
    }
    // Without the setting, the same files are read as stored.
    let (stored, _) = run(oriented.path(), false, Backend::Cpu);
    assert!(stored != want);
}

#[test]
fn a_state_saved_without_turning_images_does_not_resume_a_loader_that_turns_them() {
    let (oriented, _turned) = oriented_and_turned();
    let build = |exif: bool| {
        Loader::builder(ImageFolder::open(oriented.path()).unwrap())
            .batch_size(4)
            .pipeline(Pipeline {
                exif_orientation: exif,
                ..common::train_at(48)
            })
            .output(Dtype::F32, Layout::Nchw)
    };
    let mut plain = build(false).build().unwrap();
    plain.epoch(0).next().unwrap().unwrap();
    let state = plain.state();
    assert!(build(false).resume(state.clone()).build().is_ok());
    let Err(err) = build(true).resume(state).build() else {
        panic!("a loader that turns images resumed a state of one that does not");
    };
    assert!(err.to_string().contains("fingerprint"), "{err}");
}

#[test]
fn exif_orientation_is_refused_where_it_cannot_hold() {
    let (oriented, _turned) = oriented_and_turned();
    let turned = Pipeline {
        exif_orientation: true,
        ..common::train_at(48)
    };
    let Err(err) = Loader::builder(ImageFolder::open(oriented.path()).unwrap())
        .batch_size(4)
        .pipeline(turned)
        .views(vec![common::train_at(32)])
        .build()
    else {
        panic!("a view that does not turn was taken");
    };
    assert!(err.to_string().contains("exif_orientation"), "{err}");
}

#[test]
fn torchvisions_reading_turns_by_the_first_app1_segment_only() {
    let (oriented, turned) = oriented_and_turned();
    let reading = |reader| Pipeline {
        exif_orientation: true,
        exif_reader: reader,
        ..common::train_at(48)
    };
    let (want, _) = run(turned.path(), false, Backend::Cpu);
    let (stored, _) = run(oriented.path(), false, Backend::Cpu);
    // An Exif segment first: both readings turn by it.
    let (tv, _) = run_pipeline(
        oriented.path(),
        reading(ExifReader::Torchvision),
        Backend::Cpu,
    );
    assert!(
        tv == want,
        "torchvision's reading of a plain Exif segment differs from Pillow's"
    );
    // A short APP1 segment before it: torchvision reads that one alone (and finds nothing),
    // Pillow reads on to the Exif segment.
    for path in jpegs(oriented.path()) {
        let bytes = std::fs::read(&path).unwrap();
        let mut shadowed = bytes[..2].to_vec();
        shadowed.extend([0xFF, 0xE1, 0x00, 0x06, b'E', b'x', b'i', b'f']);
        shadowed.extend(&bytes[2..]);
        std::fs::write(&path, shadowed).unwrap();
    }
    let (tv, _) = run_pipeline(
        oriented.path(),
        reading(ExifReader::Torchvision),
        Backend::Cpu,
    );
    assert!(
        tv == stored,
        "torchvision's reading turned images by a later segment"
    );
    let (pillow, _) = run_pipeline(oriented.path(), reading(ExifReader::Pillow), Backend::Cpu);
    assert!(
        pillow == want,
        "Pillow's reading stopped at the short segment"
    );
    // A state saved by one reading does not resume a loader of the other.
    let build = |reader| {
        Loader::builder(ImageFolder::open(oriented.path()).unwrap())
            .batch_size(4)
            .pipeline(reading(reader))
            .output(Dtype::F32, Layout::Nchw)
    };
    let mut first = build(ExifReader::Pillow).build().unwrap();
    first.epoch(0).next().unwrap().unwrap();
    assert!(build(ExifReader::Torchvision)
        .resume(first.state())
        .build()
        .is_err());
}
