//! Exact resume: a loader rebuilt from `Loader::state()` yields the same bytes as the
//! uninterrupted run, on both backends, shuffled, sharded, and with bad files being skipped.

mod common;

use std::path::Path;

use common::{dataset, host, small_train, HostBatch, TempDir};
use hpuload::{Backend, ImageFolder, Loader, LoaderBuilder, LoaderState, Source};
use proptest::prelude::*;

const EPOCHS: u64 = 2;

/// A 26-image folder in which two files are corrupt, so that some batches carry skips.
fn damaged_dataset() -> TempDir {
    let dir = dataset("resume", 26);
    let entries = ImageFolder::open(dir.path()).unwrap().entries().to_vec();
    let jpeg = std::fs::read(&entries[4].path).unwrap();
    std::fs::write(&entries[4].path, &jpeg[..jpeg.len() / 3]).unwrap();
    std::fs::write(&entries[17].path, b"not a jpeg").unwrap();
    dir
}

fn builder(dir: &Path, backend: Backend, rank: usize, workers: usize) -> LoaderBuilder {
    Loader::builder(ImageFolder::open(dir).unwrap())
        .batch_size(3)
        .shuffle(11)
        .shard(rank, 2)
        .workers(workers)
        .prefetch(2)
        .backend(backend)
        .error_budget(0.5)
        .pipeline(small_train())
}

/// Every batch of the run, tagged with its (epoch, step).
fn uninterrupted(dir: &Path, backend: Backend, rank: usize) -> Vec<((u64, usize), HostBatch)> {
    let mut l = builder(dir, backend, rank, 2).build().unwrap();
    let mut all = Vec::new();
    for epoch in 0..EPOCHS {
        for b in l.epoch(epoch) {
            let b = b.unwrap();
            all.push(((b.epoch, b.step), host(&b)));
        }
    }
    assert_eq!(
        l.state().epoch,
        EPOCHS,
        "after the last batch, the state points at the next epoch"
    );
    let report = l.report();
    assert!(report.skipped > 0, "the run skips the corrupt files");
    if backend == Backend::Auto {
        assert!(report.hw_samples > 0, "the run uses the media engine");
    }
    all
}

/// Runs `stop` batches, saves the state as JSON, drops the loader, then resumes in a new loader
/// (with a different worker count) and runs to the end. Returns every batch, in order.
fn interrupted(
    dir: &Path,
    backend: Backend,
    rank: usize,
    stop: usize,
) -> Vec<((u64, usize), HostBatch)> {
    let mut all = Vec::new();
    let saved = {
        let mut l = builder(dir, backend, rank, 2).build().unwrap();
        'run: for epoch in 0..EPOCHS {
            let mut batches = l.epoch(epoch);
            while all.len() < stop {
                let Some(b) = batches.next() else {
                    continue 'run;
                };
                let b = b.unwrap();
                all.push(((b.epoch, b.step), host(&b)));
            }
            let state = batches.state();
            drop(batches);
            assert_eq!(state, l.state(), "the epoch and the loader agree");
            break;
        }
        serde_json::to_string(&l.state()).unwrap()
    };
    let state: LoaderState = serde_json::from_str(&saved).unwrap();
    let mut l = builder(dir, backend, rank, 1)
        .resume(state.clone())
        .build()
        .unwrap();
    assert_eq!(
        l.state(),
        state,
        "a resumed loader reports the state it was given"
    );
    for epoch in l.state().epoch..EPOCHS {
        for b in l.epoch(epoch) {
            let b = b.unwrap();
            all.push(((b.epoch, b.step), host(&b)));
        }
    }
    all
}

fn check_resume(backend: Backend) {
    let dir = damaged_dataset();
    for rank in 0..2 {
        let reference = uninterrupted(dir.path(), backend, rank);
        let total = reference.len();
        // Every stopping point is checked in CI; property-based ones below add random ones.
        for stop in [0, 1, total / 2, total / EPOCHS as usize, total - 1, total] {
            let resumed = interrupted(dir.path(), backend, rank, stop);
            assert!(
                resumed == reference,
                "{backend:?} rank {rank}: resuming after {stop} of {total} batches changed the run"
            );
        }
    }
}

#[test]
fn resumed_run_is_byte_identical_on_the_cpu_path() {
    check_resume(Backend::Cpu);
}

#[test]
fn resumed_run_is_byte_identical_on_the_engine_path() {
    check_resume(Backend::Auto);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn resuming_at_a_random_batch_gives_the_uninterrupted_bytes(
        stop_fraction in 0.0f64..=1.0,
        rank in 0usize..2,
        engine in any::<bool>(),
    ) {
        let backend = if engine { Backend::Auto } else { Backend::Cpu };
        let dir = damaged_dataset();
        let reference = uninterrupted(dir.path(), backend, rank);
        let stop = (stop_fraction * reference.len() as f64).round() as usize;
        let resumed = interrupted(dir.path(), backend, rank, stop);
        prop_assert!(resumed == reference, "stop {} of {}", stop, reference.len());
    }
}

#[test]
fn resuming_with_another_batch_size_fails_at_build_naming_the_setting() {
    let dir = dataset("resume-mismatch", 8);
    let mut l = Loader::builder(ImageFolder::open(dir.path()).unwrap())
        .batch_size(2)
        .pipeline(small_train())
        .build()
        .unwrap();
    l.epoch(0).next().unwrap().unwrap();
    let state = l.state();
    assert_eq!((state.epoch, state.step), (0, 1));
    let err = Loader::builder(ImageFolder::open(dir.path()).unwrap())
        .batch_size(4)
        .pipeline(small_train())
        .resume(state)
        .build()
        .unwrap_err()
        .to_string();
    assert!(err.contains("batch_size"), "{err}");
}
