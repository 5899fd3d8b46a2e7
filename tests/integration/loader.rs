//! End-to-end behaviour of the loader through the public API, on real JPEG files.

use crate::common::{
    dataset, epoch_bytes, fixtures, host, panicking_source, small_train, train_at, HookedSource,
    TempDir,
};
use hpuload::{
    pipelines, Backend, Dtype, Error, Hpu, HpuConfig, ImageFolder, LastBatch, Layout, Loader,
    Manifest, OnError, Op, Pipeline, Size, Source,
};
use std::time::{Duration, Instant};

#[test]
fn train_pipeline_yields_static_bf16_nchw_batches_with_folder_labels() {
    let data = dataset("train", 30);
    let folder = ImageFolder::open(data.path()).unwrap();
    let entries = folder.entries().to_vec();
    assert_eq!(folder.classes().len(), 10);
    let hpu = Hpu::emulated(HpuConfig::default()).unwrap();
    let mut loader = Loader::builder(folder)
        .batch_size(8)
        .shuffle(1)
        .workers(2)
        .pipeline(pipelines::resnet50_train())
        .device(&hpu)
        .build()
        .unwrap();
    assert_eq!(loader.batches_per_epoch(), 4);
    let mut seen = Vec::new();
    for (step, batch) in loader.epoch(0).enumerate() {
        let batch = batch.unwrap();
        assert_eq!(batch.images.shape(), &[8, 3, 224, 224]);
        assert_eq!(batch.images.dtype(), Dtype::Bf16);
        assert_eq!(batch.labels.shape(), &[8]);
        assert_eq!(batch.step, step);
        let (_, labels, indices, valid) = host(&batch);
        for (label, index) in labels.iter().zip(&indices) {
            let class_dir = entries[*index]
                .path
                .parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_str()
                .unwrap();
            assert_eq!(*label, entries[*index].label);
            assert_eq!(
                class_dir,
                format!("class_{label:02}"),
                "label must be the folder's class"
            );
        }
        seen.extend_from_slice(&indices[..valid]);
    }
    seen.sort_unstable();
    assert_eq!(
        seen,
        (0..30).collect::<Vec<_>>(),
        "every sample exactly once per epoch"
    );
    assert_eq!(loader.report().images, 30);
    drop(loader);
    assert_eq!(
        hpu.memory_used(),
        0,
        "device memory is released with the batches"
    );
}

#[test]
fn batches_are_bit_identical_with_1_2_and_8_workers() {
    let data = dataset("determinism", 24);
    let run = |workers| {
        let mut l = Loader::builder(ImageFolder::open(data.path()).unwrap())
            .batch_size(5)
            .shuffle(42)
            .workers(workers)
            .prefetch(3)
            .pipeline(small_train())
            .build()
            .unwrap();
        (epoch_bytes(&mut l, 0), epoch_bytes(&mut l, 1))
    };
    let one = run(1);
    assert_ne!(one.0, one.1, "epochs differ (reshuffled, new crops)");
    assert_eq!(one, run(2));
    assert_eq!(one, run(8));
}

#[test]
fn last_batch_policies_give_documented_counts_and_shapes() {
    let data = dataset("policies", 21);
    for (policy, batches, last_len, last_valid) in [
        (LastBatch::Drop, 2, 8, 8),
        (LastBatch::Pad, 3, 8, 5),
        (LastBatch::Partial, 3, 5, 5),
    ] {
        let mut l = Loader::builder(ImageFolder::open(data.path()).unwrap())
            .batch_size(8)
            .last_batch(policy)
            .pipeline(small_train())
            .output(Dtype::F16, Layout::Nhwc)
            .build()
            .unwrap();
        let got: Vec<_> = l.epoch(0).map(Result::unwrap).collect();
        assert_eq!(got.len(), batches, "{policy:?}");
        let last = got.last().unwrap();
        assert_eq!(
            (last.images.shape(), last.valid),
            (&[last_len, 32, 32, 3][..], last_valid),
            "{policy:?}"
        );
    }
    // Two ranks: the same number of batches each, together every sample once.
    let mut all = Vec::new();
    for rank in 0..2 {
        let mut l = Loader::builder(ImageFolder::open(data.path()).unwrap())
            .batch_size(4)
            .shuffle(3)
            .shard(rank, 2)
            .pipeline(small_train())
            .build()
            .unwrap();
        assert_eq!(l.batches_per_epoch(), 3);
        for b in l.epoch(0) {
            let b = b.unwrap();
            all.extend_from_slice(&b.indices[..b.valid]);
        }
    }
    all.sort_unstable();
    assert_eq!(all, (0..21).collect::<Vec<_>>());
}

#[test]
fn eval_pipeline_matches_torchvision_within_one_level() {
    let dir = TempDir::new("eval");
    let manifest = dir.path().join("list.tsv");
    std::fs::write(
        &manifest,
        format!("{}\t0\n", fixtures().join("photo_160x120.png").display()),
    )
    .unwrap();
    let eval = Pipeline::new("eval64")
        .then(Op::Resize(hpuload::augment::Resize {
            size: Size::Square(64),
            interpolation: Default::default(),
        }))
        .then(Op::CenterCrop(hpuload::augment::CenterCrop {
            size: Size::Square(56),
            pad: false,
            floor: false,
        }));
    let mut l = Loader::builder(Manifest::open(&manifest).unwrap())
        .batch_size(1)
        .pipeline(eval.clone())
        .output(Dtype::U8, Layout::Nhwc)
        .build()
        .unwrap();
    let got = epoch_bytes(&mut l, 0).remove(0).0;
    let want = image::open(fixtures().join("eval_resize64_crop56.png"))
        .unwrap()
        .to_rgb8()
        .into_raw();
    let worst = got
        .iter()
        .zip(&want)
        .map(|(a, b)| a.abs_diff(*b))
        .max()
        .unwrap();
    assert!(
        worst <= 1,
        "u8 output differs from torchvision's by {worst}"
    );

    // Normalized f32 NCHW against torchvision's ToTensor + Normalize: within one u8 level.
    let norm = eval.then(Op::Normalize(hpuload::augment::Normalize::imagenet()));
    let mut l = Loader::builder(Manifest::open(&manifest).unwrap())
        .batch_size(1)
        .pipeline(norm)
        .output(Dtype::F32, Layout::Nchw)
        .build()
        .unwrap();
    let got = epoch_bytes(&mut l, 0).remove(0).0;
    let want = std::fs::read(fixtures().join("eval_resize64_crop56_f32.bin")).unwrap();
    let max_err = got
        .chunks(4)
        .zip(want.chunks(4))
        .map(|(a, b)| {
            (f32::from_ne_bytes(a.try_into().unwrap()) - f32::from_le_bytes(b.try_into().unwrap()))
                .abs()
        })
        .fold(0f32, f32::max);
    assert!(
        max_err <= 1.0 / 255.0 / 0.224 + 1e-5,
        "f32 output differs from torchvision's by {max_err}"
    );
}

#[test]
fn corrupt_files_are_skipped_named_and_leave_the_rest_of_the_epoch_unchanged() {
    let clean = dataset("clean", 20);
    let broken = dataset("broken", 20);
    let victims: Vec<_> = ImageFolder::open(broken.path()).unwrap().entries()[3..6]
        .iter()
        .map(|e| e.path.clone())
        .collect();
    let jpeg = std::fs::read(&victims[0]).unwrap();
    std::fs::write(&victims[0], &jpeg[..jpeg.len() / 2]).unwrap(); // truncated
    std::fs::write(&victims[1], b"").unwrap(); // empty
    std::fs::write(&victims[2], b"definitely not an image").unwrap();
    let run = |dir: &std::path::Path| {
        let mut l = Loader::builder(ImageFolder::open(dir).unwrap())
            .batch_size(6)
            .shuffle(5)
            .error_budget(0.2)
            .pipeline(small_train())
            .build()
            .unwrap();
        let batches: Vec<_> = l.epoch(0).map(|b| b.unwrap()).collect();
        (batches, l.report())
    };
    let (good, _) = run(clean.path());
    let (bad, report) = run(broken.path());
    // A replacement may itself be a bad file, so there are at least 3 skips, each with its reason.
    assert!(
        report.skipped >= 3 && report.skipped == report.skipped_by_reason.values().sum::<u64>()
    );
    for reason in ["truncated", "empty", "unknown-format"] {
        assert!(
            report
                .skipped_by_reason
                .get(reason)
                .is_some_and(|&n| n >= 1),
            "{reason}: {:?}",
            report.skipped_by_reason
        );
    }
    let mut named: Vec<_> = report.skips.iter().map(|s| s.path.clone()).collect();
    named.sort();
    named.dedup();
    assert_eq!(named, victims);
    let sample = 32 * 32 * 3 * 2;
    for (g, b) in good.iter().zip(&bad) {
        assert_eq!(b.images.shape(), g.images.shape(), "the batch shape holds");
        let (gi, bi) = (g.images.to_host().unwrap(), b.images.to_host().unwrap());
        for slot in 0..g.indices.len() {
            let replaced = b.skipped.iter().any(|s| s.index == g.indices[slot]);
            if !replaced {
                assert_eq!(b.indices[slot], g.indices[slot]);
                assert_eq!(
                    gi[slot * sample..(slot + 1) * sample],
                    bi[slot * sample..(slot + 1) * sample],
                    "slot {slot} changed"
                );
            } else {
                assert_ne!(
                    b.indices[slot], g.indices[slot],
                    "a replacement fills the slot"
                );
            }
        }
    }
}

#[test]
fn fail_policy_ends_the_epoch_with_an_error_naming_the_file() {
    let data = dataset("fail", 12);
    let victim = ImageFolder::open(data.path()).unwrap().entries()[7]
        .path
        .clone();
    std::fs::write(&victim, b"\xFF\xD8\xFF\xE0 truncated").unwrap();
    let mut l = Loader::builder(ImageFolder::open(data.path()).unwrap())
        .batch_size(4)
        .on_error(OnError::Fail)
        .pipeline(small_train())
        .build()
        .unwrap();
    let results: Vec<_> = l.epoch(0).collect();
    let err = results
        .iter()
        .find_map(|r| r.as_ref().err())
        .expect("an error");
    assert!(matches!(err, Error::Sample(_)));
    assert!(err.to_string().contains(victim.to_str().unwrap()), "{err}");
    assert!(
        results.last().unwrap().is_err(),
        "the epoch ends at the error"
    );
}

#[test]
fn too_many_bad_files_exhaust_the_error_budget() {
    let data = dataset("budget", 20);
    for e in &ImageFolder::open(data.path()).unwrap().entries()[..3] {
        std::fs::write(&e.path, b"").unwrap();
    }
    // Default budget: 1% of 20, rounded up = 1 skip allowed; the second fails the epoch.
    let mut l = Loader::builder(ImageFolder::open(data.path()).unwrap())
        .batch_size(4)
        .pipeline(small_train())
        .build()
        .unwrap();
    let err = l.epoch(0).find_map(Result::err).expect("budget error");
    assert!(matches!(err, Error::ErrorBudget { budget: 1, .. }), "{err}");
}

#[test]
fn device_too_small_for_the_in_flight_batches_fails_at_build() {
    let data = dataset("oom", 4);
    let hpu = Hpu::emulated(HpuConfig::default().memory_bytes(1 << 20)).unwrap();
    let err = Loader::builder(ImageFolder::open(data.path()).unwrap())
        .batch_size(4)
        .pipeline(pipelines::resnet50_train())
        .device(&hpu)
        .build()
        .unwrap_err();
    assert!(
        matches!(err, Error::Hpu(hpuload::HpuError::OutOfMemory { .. })),
        "{err}"
    );
}

#[test]
fn batch_buffers_larger_than_the_machine_fail_at_build_with_a_clear_error() {
    let data = dataset("huge", 4);
    let build = |batch| {
        Loader::builder(ImageFolder::open(data.path()).unwrap())
            .batch_size(batch)
            .pipeline(pipelines::resnet50_train())
            .build()
            .map(|_| ())
    };
    // 3 buffers of 100k bf16 224x224 samples: 90 GB, more than this machine's RAM.
    let err = build(100_000).unwrap_err().to_string();
    assert!(
        err.contains("RAM") || err.contains("HPU out of memory"),
        "{err}"
    );
    let err = build(usize::MAX / 4).unwrap_err().to_string();
    assert!(err.contains("does not fit"), "{err}");
}

#[test]
fn injected_dma_failure_reaches_the_caller_as_an_error() {
    let data = dataset("dma", 12);
    let hpu = Hpu::emulated(HpuConfig::default().fail_dma_after(Some(2))).unwrap();
    let mut l = Loader::builder(ImageFolder::open(data.path()).unwrap())
        .batch_size(4)
        // One worker fills the batches in order, so the second transfer is batch 1's (with
        // more, a starved machine can finish batches 1 and 2 before batch 0, and the failed
        // transfer then comes before any batch is yielded).
        .workers(1)
        // One DMA per batch on the CPU path (the engine path also uploads large bitstreams).
        .backend(Backend::Cpu)
        .pipeline(small_train())
        .device(&hpu)
        .build()
        .unwrap();
    let results: Vec<_> = l.epoch(0).collect();
    // The second transfer fails; the batch before it arrives whole.
    let (last, before) = results.split_last().unwrap();
    assert!(!before.is_empty() && before.iter().all(Result::is_ok));
    assert!(
        matches!(last, Err(Error::Hpu(hpuload::HpuError::Dma(_)))),
        "{:?}",
        last.as_ref().err()
    );
    assert!(results.len() <= 3, "the epoch ends at the error");
}

#[test]
fn an_epoch_dropped_mid_way_leaves_the_loader_ready_for_the_next() {
    let data = dataset("midway", 24);
    let mut l = Loader::builder(ImageFolder::open(data.path()).unwrap())
        .batch_size(4)
        .prefetch(3)
        .shuffle(1)
        .pipeline(small_train())
        .build()
        .unwrap();
    let full = epoch_bytes(&mut l, 1);
    {
        let mut e = l.epoch(0);
        e.next().unwrap().unwrap();
    }
    assert_eq!(
        epoch_bytes(&mut l, 1),
        full,
        "a later epoch is unaffected by the abandoned one"
    );
}

/// A source whose reads panic for one sample, to check that a panicking worker becomes an
/// error instead of a hang.
#[test]
fn a_panicking_worker_becomes_an_error_then_a_clean_end() {
    let data = dataset("panic", 12);
    let folder = ImageFolder::open(data.path()).unwrap();
    let victim = folder.entries()[5].path.clone();
    let source = panicking_source(folder, 5);
    let mut l = Loader::builder(source)
        .batch_size(4)
        .workers(2)
        .pipeline(small_train())
        .build()
        .unwrap();
    let results: Vec<_> = l.epoch(0).collect();
    assert!(results[0].is_ok());
    let err = results[1].as_ref().unwrap_err();
    assert!(
        err.to_string().contains("panicked") && err.to_string().contains(victim.to_str().unwrap()),
        "{err}"
    );
    assert_eq!(results.len(), 2);
    assert_eq!(l.live_workers(), 2, "workers survive a caught panic");
}

#[test]
fn configuration_errors_name_their_setting() {
    let data = dataset("config-errors", 4);
    let build = |b: hpuload::LoaderBuilder| b.pipeline(small_train()).build().unwrap_err();
    let folder = || ImageFolder::open(data.path()).unwrap();
    for (err, setting) in [
        (build(Loader::builder(folder()).batch_size(0)), "batch_size"),
        (build(Loader::builder(folder()).workers(0)), "workers"),
        (
            build(Loader::builder(folder()).error_budget(2.0)),
            "error_budget",
        ),
        (build(Loader::builder(folder()).shard(3, 2)), "shard"),
    ] {
        match err {
            Error::Config { setting: s, .. } => assert_eq!(s, setting),
            other => panic!("{setting}: {other}"),
        }
    }
}

#[test]
fn a_sample_whose_replacements_all_fail_is_a_typed_error_naming_it() {
    let dir = TempDir::new("all-bad");
    std::fs::create_dir_all(dir.path().join("c")).unwrap();
    for i in 0..3 {
        std::fs::write(dir.path().join(format!("c/{i}.jpg")), b"junk").unwrap();
    }
    let mut l = Loader::builder(ImageFolder::open(dir.path()).unwrap())
        .batch_size(3)
        .workers(1)
        .pipeline(small_train())
        .error_budget(1.0)
        .build()
        .unwrap();
    let err = l.epoch(0).next().unwrap().unwrap_err();
    match err {
        Error::Sample(e) => {
            assert!(matches!(
                e.kind,
                hpuload::SampleErrorKind::ReplacementsExhausted { tried: 16, .. }
            ));
            assert_eq!(e.reason(), "replacements-exhausted");
            assert!(e.path.starts_with(dir.path()));
            // The message says why, from the last replacement tried: its file and reason.
            let message = e.to_string();
            assert!(
                message.contains("replacements all failed; the last, sample ")
                    && message.matches(".jpg").count() == 2
                    && message.ends_with(&last_reason(&e)),
                "{message}"
            );
        }
        other => panic!("{other}"),
    }
}

/// The reason of the last replacement a `ReplacementsExhausted` error tried.
fn last_reason(e: &hpuload::SampleError) -> String {
    match &e.kind {
        hpuload::SampleErrorKind::ReplacementsExhausted { last, .. } => last.kind.to_string(),
        other => panic!("{other}"),
    }
}

/// A device batch of 40 engine samples crosses to the device in two parts; the second one's
/// transfer fails. The batch fails with the DMA's error (the first part's jobs ran, the second
/// part's never start), and the epoch ends instead of waiting for them.
#[test]
fn a_dma_failure_on_a_later_part_of_a_batch_fails_that_batch_and_ends_the_epoch() {
    let data = dataset("dma-part", 80);
    let hpu = Hpu::emulated(HpuConfig::default().fail_dma_after(Some(2))).unwrap();
    let mut l = Loader::builder(ImageFolder::open(data.path()).unwrap())
        .batch_size(40)
        .backend(Backend::Hw)
        // Slots large enough for every bitstream to ride in its slot, not cross on its own.
        .pipeline(train_at(224))
        .device(&hpu)
        .build()
        .unwrap();
    let results: Vec<_> = l.epoch(0).collect();
    assert_eq!(results.len(), 1, "the epoch ends at the failed batch");
    assert!(
        matches!(&results[0], Err(Error::Hpu(hpuload::HpuError::Dma(m))) if m.contains("transfer 2")),
        "{:?}",
        results[0].as_ref().err()
    );
    // The loader is not left waiting for the jobs that never ran: a new epoch starts (and
    // fails the same way, the device's transfers failing from the second on).
    assert!(l.epoch(1).next().unwrap().is_err());
}

/// A batch crosses to the device in parts of 32 slots, each as soon as its slots are filled:
/// the engines start on a batch while the workers still read its later samples. Here the read
/// of the batch's last sample waits until the first part has crossed (it would wait forever if
/// the batch crossed only once all its samples were read), and the batch holds the bytes and
/// labels of a loader whose reads never wait: device batches, and host batches, whose engine
/// jobs write their slots of the pinned buffer while the DMA engine reads a later part's.
#[test]
fn a_batchs_first_part_crosses_before_its_last_sample_is_read_on_both_placements() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let data = dataset("early-part", 64);
    let run = |source: Box<dyn Source>, hpu: &Hpu, placement: hpuload::Placement| {
        let mut l = Loader::builder_boxed(source)
            .batch_size(64)
            .workers(2)
            .backend(Backend::Hw)
            // Slots large enough for every bitstream to ride in its slot, not cross on its own.
            .pipeline(train_at(224))
            .placement(placement)
            .device(hpu)
            .build()
            .unwrap();
        let batch = l.epoch(0).next().unwrap().unwrap();
        host(&batch)
    };
    for placement in [hpuload::Placement::Device, hpuload::Placement::Host] {
        let hpu = Hpu::emulated(HpuConfig::default()).unwrap();
        let device = hpu.clone();
        let crossed_first = std::sync::Arc::new(AtomicBool::new(false));
        let seen = std::sync::Arc::clone(&crossed_first);
        let source = HookedSource(ImageFolder::open(data.path()).unwrap(), move |index| {
            if index == 63 {
                let deadline = Instant::now() + Duration::from_secs(10);
                while device.dma_stats().host_to_device_bytes == 0 && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(2));
                }
                seen.store(
                    device.dma_stats().host_to_device_bytes > 0,
                    Ordering::SeqCst,
                );
            }
        });
        let hooked = run(Box::new(source), &hpu, placement);
        assert!(
            crossed_first.load(Ordering::SeqCst),
            "{placement:?}: the first part was on the device before the last sample was read"
        );
        let plain = run(
            Box::new(ImageFolder::open(data.path()).unwrap()),
            &Hpu::emulated(HpuConfig::default()).unwrap(),
            placement,
        );
        assert_eq!(hooked.2, plain.2, "{placement:?}: same samples");
        assert_eq!(hooked.1, plain.1, "{placement:?}: same labels");
        assert!(hooked.0 == plain.0, "{placement:?}: same bytes");
    }
}

/// An epoch's first batch has the cores to itself: the batches after it start when it is
/// done (not while a worker is free because the other waits on the batch's slow last read),
/// and before it is handed over, so that the prefetch runs during the caller's first step.
#[test]
fn an_epochs_first_batch_runs_alone_and_the_prefetch_starts_before_it_is_handed_over() {
    let data = dataset("alone", 16);
    // When each read started; sample 3's (the first batch's last) takes 200 ms.
    let reads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&reads);
    let source = HookedSource(ImageFolder::open(data.path()).unwrap(), move |index| {
        let start = Instant::now();
        if index == 3 {
            std::thread::sleep(Duration::from_millis(200));
        }
        log.lock().unwrap().push((index, start));
    });
    let mut l = Loader::builder(source)
        .batch_size(4)
        .workers(2)
        .prefetch(2)
        .pipeline(small_train())
        .build()
        .unwrap();
    let mut epoch = l.epoch(0);
    let first = epoch.next().unwrap().unwrap();
    assert_eq!(first.indices, [0, 1, 2, 3]);
    // The caller's first step: batches 1 and 2 load meanwhile.
    let deadline = Instant::now() + Duration::from_secs(20);
    while reads.lock().unwrap().len() < 12 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let reads = reads.lock().unwrap().clone();
    let slow_end = reads.iter().find(|r| r.0 == 3).unwrap().1 + Duration::from_millis(200);
    let later: Vec<_> = reads.iter().filter(|r| r.0 >= 4).collect();
    assert_eq!(
        later.len(),
        8,
        "batches 1 and 2 were read before the next call"
    );
    assert!(
        later.iter().all(|r| r.1 >= slow_end),
        "no read of a later batch started before the first batch's last read ended"
    );
    drop(first);
    assert_eq!(epoch.count(), 3);
}
