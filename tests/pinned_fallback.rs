//! The pageable-memory fallback, exercised for real: page-locking is made to fail the way it
//! does for a non-root user (RLIMIT_MEMLOCK lowered, CAP_IPC_LOCK dropped from this thread),
//! in a test binary of its own because the limit is process-wide.

mod common;

use hpuload::{pipelines, Hpu, HpuConfig, ImageFolder, Loader, Op, Size};

#[test]
fn when_page_locking_is_refused_batches_still_arrive_and_pinned_is_false() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct; setrlimit only reads it.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max.min(64 << 10);
        assert_eq!(libc::setrlimit(libc::RLIMIT_MEMLOCK, &limit), 0);
    }
    // Even root is then held to RLIMIT_MEMLOCK.
    common::drop_capabilities(&[common::CAP_IPC_LOCK]);
    let data = common::dataset("pageable", 8);
    let hpu = Hpu::emulated(HpuConfig::default()).unwrap();
    let mut p = pipelines::resnet50_train();
    p.ops[0] = Op::RandomResizedCrop(hpuload::augment::RandomResizedCrop {
        size: Size::Square(64),
        scale: [0.08, 1.0],
        ratio: [0.75, 4.0 / 3.0],
        interpolation: Default::default(),
    });
    let mut loader = Loader::builder(ImageFolder::open(data.path()).unwrap())
        .batch_size(4)
        .pipeline(p)
        .device(&hpu)
        .build()
        .unwrap();
    assert!(!loader.is_pinned());
    assert!(!loader.report().pinned);
    let batches: Vec<_> = loader.epoch(0).map(Result::unwrap).collect();
    assert_eq!(batches.len(), 2);
    let images = batches[0].images.to_host().unwrap();
    assert!(images.iter().any(|&b| b != 0), "real pixels arrived");
    assert!(
        hpu.dma_stats().staged_bytes >= 2 * 4 * 64 * 64 * 3 * 2,
        "pageable batches go through the staging buffer"
    );
}
