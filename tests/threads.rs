//! Thread accounting, in its own test binary so no other test's threads are counted.

mod common;

use common::threads_named;
use hpuload::{pipelines, Hpu, HpuConfig, ImageFolder, Loader};

/// Waits up to 2 s for the count of threads named `prefix*` to become `want`; returns the count.
fn settle(prefix: &str, want: usize) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let n = threads_named(prefix);
        if n == want || std::time::Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn dropping_a_loader_mid_epoch_joins_every_thread() {
    let data = common::dataset("threads", 40);
    let hpu = Hpu::emulated(HpuConfig::default()).unwrap();
    assert_eq!(settle("hpu-dma", 1), 1);
    // Eight engines, on no more threads than the host has cores.
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let engine_threads = 8.min(cores);
    assert_eq!(hpu.media_engines(), 8);
    assert_eq!(
        settle("hpu-media", engine_threads),
        engine_threads,
        "the media engine's threads"
    );
    let mut loader = Loader::builder(ImageFolder::open(data.path()).unwrap())
        .batch_size(4)
        .workers(3)
        .prefetch(4)
        .pipeline(pipelines::resnet50_train())
        .device(&hpu)
        .build()
        .unwrap();
    assert_eq!(settle("hpuload-worker", 3), 3);
    let mut epoch = loader.epoch(0);
    let first = epoch.next().unwrap().unwrap();
    drop(epoch);
    drop(loader);
    assert_eq!(settle("hpuload-worker", 0), 0, "drop joins the workers");
    drop(first);
    drop(hpu);
    assert_eq!(
        settle("hpu-dma", 0),
        0,
        "the last device handle joins the DMA thread"
    );
    assert_eq!(settle("hpu-media", 0), 0, "and the media engine's threads");
}
