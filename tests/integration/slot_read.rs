//! Bitstreams for the media engine are read straight into their slots of the pinned batch
//! buffer when they fit there (no copy from a buffer). Whether a sample is read in place or
//! into a buffer (the same source wrapped so that it implements only `read`, as a user's own
//! source might, which in-place reads must never bypass), or does not fit its slot,
//! the batches, the skips and the bytes read are the same: on both placements, for folders and
//! for local shards, with a file the engine cannot take (a PNG) and a damaged one.

use crate::common::{dataset, epoch_bytes, make_shards, train_at, HostBatch, TempDir};

use hpuload::source::Listing;
use hpuload::source::SampleBytes;
use hpuload::{
    Backend, ImageFolder, Loader, OnError, Placement, ReadMode, Report, Source, WebDataset,
};

/// A source as it is, except that it implements only `read`, as a user's own source might:
/// `read_into`'s default does not read in place, so every sample goes through `read`.
struct Buffered<S>(S);

impl<S: Source> Source for Buffered<S> {
    fn listing(&self) -> &Listing {
        self.0.listing()
    }
    fn read<'a>(
        &self,
        index: usize,
        mode: ReadMode,
        buf: &'a mut Vec<u8>,
    ) -> std::io::Result<SampleBytes<'a>> {
        self.0.read(index, mode, buf)
    }
    /// Not in place: every read goes through `read` above.
    fn read_into(
        &self,
        _index: usize,
        _mode: ReadMode,
        _dst: &mut [u8],
    ) -> std::io::Result<Option<usize>> {
        Ok(None)
    }
}

/// Output 112x112 in bf16: 75,264-byte slots, so some of the synthetic JPEGs (9 to 150 KB)
/// fit their slots and some do not.
const SIDE: u32 = 112;

fn run(source: impl Source + 'static, placement: Placement) -> (Vec<HostBatch>, Report) {
    let mut loader = Loader::builder(source)
        .batch_size(5)
        .workers(2)
        .shuffle(11)
        .backend(Backend::Auto)
        .on_error(OnError::Skip)
        .error_budget(0.5)
        .placement(placement)
        .pipeline(train_at(SIDE))
        .build()
        .unwrap();
    let (dtype, _, size) = loader.output();
    assert_eq!(dtype.size() * 3 * size.max_pixels() as usize, 75_264);
    let batches = epoch_bytes(&mut loader, 1);
    (batches, loader.report())
}

/// 18 synthetic JPEGs, a PNG (the engine's probe refuses it: the CPU path decodes it) and a
/// JPEG cut short (skipped, with a replacement drawn).
fn mixed_folder() -> TempDir {
    let data = dataset("slot-read", 18);
    let png = image::RgbImage::from_fn(40, 30, |x, y| image::Rgb([x as u8 * 6, y as u8 * 8, 90]));
    png.save(data.path().join("class_00/extra.png")).unwrap();
    let jpeg = std::fs::read(data.path().join("class_01/img_000001.jpg")).unwrap();
    std::fs::write(
        data.path().join("class_01/cut.jpg"),
        &jpeg[..jpeg.len() / 2],
    )
    .unwrap();
    data
}

fn assert_same(a: &(Vec<HostBatch>, Report), b: &(Vec<HostBatch>, Report), what: &str) {
    // Not `assert_eq!`: a failure would print megabytes of pixels.
    assert!(a.0 == b.0, "{what}: batches differ");
    let (x, y) = (&a.1, &b.1);
    assert_eq!(x.bytes_read, y.bytes_read, "{what}: bytes read");
    assert_eq!(x.skipped, y.skipped, "{what}: skips");
    assert_eq!(x.hw_samples, y.hw_samples, "{what}: engine samples");
    assert_eq!(x.fallbacks, y.fallbacks, "{what}: fallbacks");
}

#[test]
fn reading_bitstreams_into_their_slots_changes_no_batch_skip_or_count() {
    let data = mixed_folder();
    let slot = 75_264;
    let sizes: Vec<u64> = ImageFolder::open(data.path())
        .unwrap()
        .entries()
        .iter()
        .map(|e| std::fs::metadata(&e.path).unwrap().len())
        .collect();
    assert!(
        sizes.iter().any(|&s| s < slot) && sizes.iter().any(|&s| s >= slot),
        "some files fit their slots and some do not: {sizes:?}"
    );
    for placement in [Placement::Host, Placement::Device] {
        let folder = || ImageFolder::open(data.path()).unwrap();
        let in_slot = run(folder(), placement);
        let buffered = run(Buffered(folder()), placement);
        assert_same(&in_slot, &buffered, &format!("folder on {placement:?}"));
        let report = &in_slot.1;
        assert_eq!(report.skipped, 1, "the cut JPEG: {report:?}");
        assert!(report.hw_samples > 0 && report.fallbacks.values().sum::<u64>() >= 1);
        let images: usize = in_slot.0.iter().map(|b| b.3).sum();
        assert_eq!(images, sizes.len(), "every slot filled");
    }
}

#[test]
fn shard_members_read_into_their_slots_give_the_batches_a_buffered_read_gives() {
    let data = mixed_folder();
    let (_out, pattern) = make_shards(data.path(), "300KB");
    let shards = || WebDataset::open(&pattern).unwrap();
    for placement in [Placement::Host, Placement::Device] {
        let in_slot = run(shards(), placement);
        let buffered = run(Buffered(shards()), placement);
        assert_same(&in_slot, &buffered, &format!("shards on {placement:?}"));
        assert_eq!(in_slot.1.skipped, 1, "the cut JPEG: {:?}", in_slot.1);
    }
}
