//! Exact resume: a loader rebuilt from `Loader::state()` yields the same bytes as the
//! uninterrupted run, on both backends, shuffled, sharded, and with bad files being skipped;
//! resumed on another world size, the ranks now present share the rest of the epoch.

use std::path::Path;

use crate::common::{dataset, epoch_bytes, host, small_train, HostBatch, TempDir};
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
    builder_on(dir, backend, rank, 2, workers)
}

fn builder_on(
    dir: &Path,
    backend: Backend,
    rank: usize,
    world: usize,
    workers: usize,
) -> LoaderBuilder {
    Loader::builder(ImageFolder::open(dir).unwrap())
        .batch_size(3)
        .shuffle(11)
        .shard(rank, world)
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

/// The valid slots of a batch: (dataset index, the sample's bytes).
fn valid_samples(batch: &HostBatch) -> Vec<(usize, Vec<u8>)> {
    let (images, _, indices, valid) = batch;
    let per = images.len() / indices.len();
    (0..*valid)
        .map(|s| (indices[s], images[s * per..(s + 1) * per].to_vec()))
        .collect()
}

#[test]
fn resuming_on_three_ranks_after_two_shares_the_rest_of_the_epoch_with_the_same_pixels() {
    let dir = damaged_dataset();
    let dir = dir.path();
    let backend = Backend::Auto;
    // Epoch 0 uninterrupted on 2 ranks: every valid slot's sample and bytes.
    let mut reference: Vec<(usize, Vec<u8>)> = (0..2)
        .flat_map(|rank| uninterrupted(dir, backend, rank))
        .filter(|((epoch, _), _)| *epoch == 0)
        .flat_map(|(_, b)| valid_samples(&b))
        .collect();
    // Both ranks yield 2 batches; the job then restarts on 3 ranks from rank 0's checkpoint.
    let mut seen = Vec::new();
    let mut states = Vec::new();
    for rank in 0..2 {
        let mut l = builder(dir, backend, rank, 2).build().unwrap();
        let mut epoch = l.epoch(0);
        for _ in 0..2 {
            seen.extend(valid_samples(&host(&epoch.next().unwrap().unwrap())));
        }
        states.push(epoch.state());
    }
    let at = |s: &LoaderState| (s.epoch, s.start, s.step);
    assert_eq!(at(&states[0]), at(&states[1]), "the ranks stopped together");
    let json = serde_json::to_string(&states[0]).unwrap();
    let state: LoaderState = serde_json::from_str(&json).unwrap();
    let mut counts = Vec::new();
    for rank in 0..3 {
        let mut l = builder_on(dir, backend, rank, 3, 2)
            .resume(state.clone())
            .build()
            .unwrap();
        // 2 ranks x 2 batches x 3 samples seen: the rest of the epoch is planned from 12.
        assert_eq!(at(&l.state()), (0, 12, 0));
        let batches = epoch_bytes(&mut l, 0);
        counts.push(batches.len());
        seen.extend(batches.iter().flat_map(valid_samples));
        // From the next epoch on, exactly a 3-rank run.
        let mut fresh = builder_on(dir, backend, rank, 3, 2).build().unwrap();
        assert!(
            epoch_bytes(&mut l, 1) == epoch_bytes(&mut fresh, 1),
            "rank {rank}"
        );
    }
    assert!(counts.iter().all(|&c| c == counts[0]), "{counts:?}");
    // The same samples (and the same replacements of the damaged ones), each with the bytes
    // the uninterrupted run gave it: augmentation depends on the sample, not the rank.
    reference.sort();
    seen.sort();
    assert_eq!(seen.len(), reference.len());
    assert!(
        seen == reference,
        "the epoch's samples or their pixels differ"
    );
}
