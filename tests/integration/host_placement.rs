//! `Placement::Host`: batches left in the pinned buffer they were assembled in, lent to the
//! consumer (what the Python binding hands to torch without a copy).

use crate::common::{dataset, host, small_train};
use hpuload::{Backend, Dtype, ImageFolder, Layout, Loader, Placement, Source, Tensor};

fn loader(dir: &std::path::Path, backend: Backend, placement: Placement) -> Loader {
    Loader::builder(ImageFolder::open(dir).unwrap())
        .batch_size(8)
        .shuffle(3)
        .workers(2)
        .prefetch(2)
        .pipeline(small_train())
        .output(Dtype::F32, Layout::Nchw)
        .backend(backend)
        .placement(placement)
        .build()
        .unwrap()
}

#[test]
fn host_batches_hold_the_same_bytes_as_device_batches_on_every_backend() {
    let data = dataset("host-same", 21);
    for backend in [Backend::Cpu, Backend::Auto, Backend::Hw] {
        let mut on_device = loader(data.path(), backend, Placement::Device);
        let mut on_host = loader(data.path(), backend, Placement::Host);
        let want: Vec<_> = on_device.epoch(1).map(|b| host(&b.unwrap())).collect();
        let got: Vec<_> = on_host
            .epoch(1)
            .map(|b| {
                let b = b.unwrap();
                assert!(matches!(b.images, Tensor::Host(_)), "{backend:?}");
                assert!(matches!(b.labels, Tensor::Host(_)), "{backend:?}");
                host(&b)
            })
            .collect();
        assert_eq!(got.len(), 3);
        assert!(want == got, "{backend:?}: host and device batches differ");
    }
}

#[test]
fn a_consumer_holding_every_batch_gets_new_buffers_instead_of_a_deadlock() {
    let data = dataset("host-hold", 40);
    let mut l = loader(data.path(), Backend::Auto, Placement::Host);
    // Five batches kept alive at once, more than the pool's prefetch + 2 buffers.
    let held: Vec<_> = l.epoch(0).map(Result::unwrap).collect();
    assert_eq!(held.len(), 5);
    let report = l.report();
    assert!(report.extra_buffers >= 1, "{report:?}");
    let first = held[0].images.to_host().unwrap();
    let last = held[4].images.to_host().unwrap();
    assert_ne!(first, last, "each held batch has a buffer of its own");
}

#[test]
fn host_tensors_stay_readable_after_the_loader_is_dropped() {
    let data = dataset("host-outlive", 16);
    let mut l = loader(data.path(), Backend::Auto, Placement::Host);
    let batch = l.epoch(0).next().unwrap().unwrap();
    let before = batch.images.to_host().unwrap();
    drop(l);
    let images = batch.images.as_host().expect("a host tensor");
    assert_eq!(images.as_bytes(), &before[..]);
    assert_eq!(images.shape(), &[8, 3, 32, 32]);
    assert!(
        images.as_bytes().chunks(4).any(|c| c != [0; 4]),
        "the batch holds decoded pixels"
    );
}

#[test]
fn steady_iteration_with_one_batch_held_needs_no_extra_buffers() {
    let data = dataset("host-steady", 48);
    let mut l = loader(data.path(), Backend::Auto, Placement::Host);
    for epoch in 0..3 {
        // A training loop keeps the previous batch while it asks for the next one.
        let mut previous = None;
        for b in l.epoch(epoch) {
            previous = Some(b.unwrap());
        }
        drop(previous);
    }
    assert_eq!(l.report().extra_buffers, 0);
}

#[test]
fn an_owned_epoch_gives_its_loader_back_with_the_state_after_the_last_batch() {
    let data = dataset("host-owned", 24);
    let l = loader(data.path(), Backend::Auto, Placement::Host);
    let mut epoch = l.into_epoch(0);
    let first = epoch.next().unwrap().unwrap();
    assert_eq!(first.step, 0);
    let l = epoch.into_loader();
    assert_eq!((l.state().epoch, l.state().step), (0, 1));
}

#[test]
fn a_stop_request_while_waiting_ends_the_epoch_with_interrupted() {
    let data = dataset("host-stop", 16);
    let l = loader(data.path(), Backend::Cpu, Placement::Host);
    let mut epoch = l.into_epoch(0);
    let r = epoch.next_or_stop(|| true);
    // Either the batch was ready before the first check, or the wait was interrupted.
    match r {
        Some(Ok(b)) => assert_eq!(b.step, 0),
        Some(Err(hpuload::Error::Interrupted)) => {
            assert!(epoch.next().is_none(), "an interrupted epoch is over");
            let l = epoch.into_loader();
            assert_eq!(l.state().step, 0, "nothing was consumed");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn host_batches_match_device_batches_when_bad_files_are_replaced() {
    let data = dataset("host-damaged", 24);
    let mut files: Vec<_> = ImageFolder::open(data.path())
        .unwrap()
        .entries()
        .iter()
        .map(|e| e.path.clone())
        .collect();
    files.sort();
    // A truncated JPEG (the engine accepts its header), random bytes, an empty file.
    let bytes = std::fs::read(&files[2]).unwrap();
    std::fs::write(&files[2], &bytes[..bytes.len() / 2]).unwrap();
    std::fs::write(&files[9], b"not an image at all").unwrap();
    std::fs::write(&files[17], b"").unwrap();
    for backend in [Backend::Cpu, Backend::Auto] {
        let build = |placement| {
            Loader::builder(ImageFolder::open(data.path()).unwrap())
                .batch_size(8)
                .shuffle(5)
                .workers(2)
                .pipeline(small_train())
                .output(Dtype::F32, Layout::Nchw)
                .backend(backend)
                .error_budget(0.5)
                .placement(placement)
                .build()
                .unwrap()
        };
        let (mut on_device, mut on_host) = (build(Placement::Device), build(Placement::Host));
        let want: Vec<_> = on_device.epoch(0).map(|b| host(&b.unwrap())).collect();
        let got: Vec<_> = on_host.epoch(0).map(|b| host(&b.unwrap())).collect();
        assert!(want == got, "{backend:?}: host and device batches differ");
        assert_eq!(on_host.report().skipped, 3, "{backend:?}");
    }
}
