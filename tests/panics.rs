//! A panic in any of the loader's three kinds of thread (worker, DMA engine, media engine)
//! becomes an `Err` for its batch and then the end of the epoch: no hang (every wait here is
//! bounded), the thread survives for the next epoch, and dropping everything joins every
//! thread. In its own test binary so the thread counts see no other test's threads.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::{dataset, panicking_source, small_train, threads_named};
use hpuload::{Backend, Hpu, HpuConfig, ImageFolder, Loader, Source};

/// Waits up to 5 s for no thread named `prefix*` to be left; returns how many are.
fn joined(prefix: &str) -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let n = threads_named(prefix);
        if n == 0 || std::time::Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs epochs 0 and 1 on another thread, with a bound on the wait: (epoch 0's results as
/// Ok/Err strings, epoch 1's batch count).
fn run_bounded(
    config: HpuConfig,
    source: impl Source + 'static,
    panic_in_epoch0_only: bool,
) -> (Vec<Result<usize, String>>, usize) {
    let (tx, rx) = mpsc::channel();
    let runner = std::thread::spawn(move || {
        let hpu = Hpu::emulated(config).unwrap();
        let mut loader = Loader::builder(source)
            .batch_size(4)
            .workers(2)
            .pipeline(small_train())
            .backend(Backend::Auto)
            .device(&hpu)
            .build()
            .unwrap();
        let first: Vec<_> = loader
            .epoch(0)
            .map(|b| b.map(|b| b.step).map_err(|e| e.to_string()))
            .collect();
        let second = if panic_in_epoch0_only {
            loader.epoch(1).filter(|b| b.is_ok()).count()
        } else {
            0
        };
        drop(loader);
        drop(hpu);
        tx.send((first, second)).unwrap();
    });
    let out = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the epoch ended (no hang)");
    runner.join().unwrap();
    out
}

/// The epoch yielded batches in order until exactly one error, and then ended; the error.
fn only_error_is_last(results: &[Result<usize, String>]) -> &str {
    let (last, before) = results.split_last().expect("the epoch yielded something");
    for (step, r) in before.iter().enumerate() {
        assert_eq!(r, &Ok(step), "batches before the error are in order");
    }
    assert!(results.len() < 4, "the epoch ended at the error");
    last.as_ref().expect_err("the epoch ends with the error")
}

fn assert_all_joined() {
    for prefix in ["hpuload-worker", "hpu-dma", "hpu-media"] {
        assert_eq!(joined(prefix), 0, "{prefix} threads joined");
    }
}

#[test]
fn a_panic_in_each_kind_of_thread_ends_the_epoch_with_an_error_and_joins_every_thread() {
    let data = dataset("panics", 16);
    let folder = || ImageFolder::open(data.path()).unwrap();

    // Worker: the read of sample 5 panics, every epoch.
    let victim = folder().entries()[5].path.clone();
    let (first, _) = run_bounded(HpuConfig::default(), panicking_source(folder(), 5), false);
    let err = only_error_is_last(&first);
    assert!(
        err.contains("panicked") && err.contains(victim.to_str().unwrap()),
        "{err}"
    );
    assert_all_joined();

    // DMA engine: its second transfer panics; the engine survives for the next epoch.
    let (first, second) = run_bounded(HpuConfig::default().panic_dma_at(Some(2)), folder(), true);
    let err = only_error_is_last(&first);
    assert!(err.contains("DMA engine panicked"), "{err}");
    assert_eq!(
        second, 4,
        "the DMA thread survived: the next epoch is whole"
    );
    assert_all_joined();

    // Media engine: its sixth job panics (one engine, so the jobs run in order).
    let (first, second) = run_bounded(
        HpuConfig::default()
            .media_engines(1)
            .panic_media_at(Some(6)),
        folder(),
        true,
    );
    let err = only_error_is_last(&first);
    assert!(
        err.contains("media engine's job for this sample did not finish"),
        "{err}"
    );
    assert_eq!(second, 4, "the engine survived: the next epoch is whole");
    assert_all_joined();
}
