//! The media engine's fallback: a JPEG whose headers the engine accepts but whose entropy-coded
//! data it cannot decode goes to the CPU path with the bytes already read (the file is not read
//! again), and the result lands where the engine's would have: straight into a host batch's
//! pinned slot, or through the DMA engine into a device batch.

use crate::common::{dataset, host, small_train, HostBatch};
use hpuload::{Backend, ImageFolder, Loader, OnError, Placement, Report, Source};

/// Overwrites the middle third of the scan of the first JPEG in `dir` with runs of stuffed
/// 0xFF bytes (all one bits: no Huffman code), keeping its headers and its end marker.
fn corrupt_scan(dir: &std::path::Path) -> std::path::PathBuf {
    let folder = ImageFolder::open(dir).unwrap();
    let victim = folder.entries()[0].path.clone();
    let mut bytes = std::fs::read(&victim).unwrap();
    let sos = bytes.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
    let start = sos + 2 + usize::from(u16::from_be_bytes([bytes[sos + 2], bytes[sos + 3]]));
    let end = bytes.len() - 2;
    let mut i = start + (end - start) / 3;
    while i + 1 < start + 2 * (end - start) / 3 {
        bytes[i] = 0xFF;
        bytes[i + 1] = 0x00;
        i += 2;
    }
    std::fs::write(&victim, &bytes).unwrap();
    victim
}

fn run(dir: &std::path::Path, backend: Backend, placement: Placement) -> (Vec<HostBatch>, Report) {
    let mut loader = Loader::builder(ImageFolder::open(dir).unwrap())
        .batch_size(4)
        .workers(2)
        .shuffle(3)
        .backend(backend)
        .on_error(OnError::Fail)
        .placement(placement)
        .pipeline(small_train())
        .build()
        .unwrap();
    let batches = loader.epoch(0).map(|b| host(&b.unwrap())).collect();
    (batches, loader.report())
}

/// The bytes of sample `index` in an epoch's batches.
fn sample_of(batches: &[HostBatch], index: usize) -> Vec<u8> {
    for (images, _, indices, _) in batches {
        if let Some(slot) = indices.iter().position(|&i| i == index) {
            let per = images.len() / indices.len();
            return images[slot * per..(slot + 1) * per].to_vec();
        }
    }
    panic!("sample {index} is in the epoch")
}

#[test]
fn an_engine_decode_failure_is_redone_on_the_cpu_from_the_bytes_in_hand_on_both_placements() {
    let data = dataset("engine-fallback", 8);
    corrupt_scan(data.path());
    let files: u64 = ImageFolder::open(data.path())
        .unwrap()
        .entries()
        .iter()
        .map(|e| std::fs::metadata(&e.path).unwrap().len())
        .sum();
    let (device, on_device) = run(data.path(), Backend::Auto, Placement::Device);
    let (host_batches, on_host) = run(data.path(), Backend::Auto, Placement::Host);
    let (cpu, _) = run(data.path(), Backend::Cpu, Placement::Device);
    for report in [&on_device, &on_host] {
        assert_eq!(
            report.fallbacks.get("engine decode error"),
            Some(&1),
            "{report:?}"
        );
        assert_eq!(
            report.skipped, 0,
            "the CPU decodes what the engine could not"
        );
        assert_eq!(
            report.bytes_read, files,
            "every file read once: the fallback reads nothing"
        );
    }
    assert_eq!(device, host_batches, "the same batches on both placements");
    assert_eq!(
        sample_of(&device, 0),
        sample_of(&cpu, 0),
        "the CPU path's sample"
    );
    // A device batch gets the fallback's sample and label through the DMA engine; a host batch
    // sends only bitstreams (no labels) to the device.
    let sample_bytes = 32 * 32 * 3 * 2;
    assert_eq!(
        on_device.bytes_dma,
        on_host.bytes_dma + 8 * 8 + sample_bytes + 8,
        "labels, then the fallback's sample and label"
    );
}

#[test]
fn with_only_the_engine_a_decode_failure_fails_naming_the_file_instead_of_falling_back() {
    let data = dataset("engine-fallback-hw", 8);
    let victim = corrupt_scan(data.path());
    for policy in [OnError::Skip, OnError::Fail] {
        let err = engine_only_error(data.path(), policy, small_train());
        assert!(err.contains(&victim.display().to_string()), "{err}");
    }
}

/// The first error of an epoch over `data` with only the engine and `policy`, after checking
/// that no sample went to the CPU.
fn engine_only_error(
    data: &std::path::Path,
    policy: OnError,
    pipeline: hpuload::Pipeline,
) -> String {
    let mut loader = Loader::builder(ImageFolder::open(data).unwrap())
        .batch_size(4)
        .workers(2)
        .backend(Backend::Hw)
        .on_error(policy)
        .pipeline(pipeline)
        .build()
        .unwrap();
    let err = loader
        .epoch(0)
        .find_map(Result::err)
        .expect("a batch fails")
        .to_string();
    assert!(
        loader.report().fallbacks.is_empty(),
        "nothing went to the CPU"
    );
    err
}

#[test]
fn with_only_the_engine_a_step_it_does_not_run_fails_naming_the_file_and_the_step() {
    // Pillow's nearest resize (of a PIL image) runs on the CPU path only. Under the skip
    // policy each replacement was refused for the same reason and the error named only how
    // many were tried.
    let data = dataset("engine-refuses-step", 8);
    let text = r#"
        name = "pil-nearest"
        [[ops]]
        op = "resize"
        size = [48, 48]
        interpolation = "pil_nearest"
    "#;
    for policy in [OnError::Skip, OnError::Fail] {
        let pipeline = hpuload::Pipeline::from_toml(text, "test").unwrap();
        let err = engine_only_error(data.path(), policy, pipeline);
        assert!(err.contains(".jpg"), "{err}");
        assert!(err.contains("Pillow's nearest resize"), "{policy:?}: {err}");
    }
}

/// A device batch crosses in parts, and an engine fallback sends its sample and label on their
/// own once the engine has failed. When the CPU cannot decode the file either, the fallback's
/// label is its replacement's: it must not be overwritten by a later part's copy of the labels
/// the router wrote (the replaced file's), as the labels crossing whole with the last part
/// could: parts cross as they fill, so the first part's fallbacks run while the workers
/// still fill the last. Here such a file sits early in a batch of 96 (three parts); every
/// slot's label must be the class of the sample the batch names there, in every epoch.
#[test]
fn a_sample_replaced_after_the_engine_failed_carries_its_replacements_label() {
    let data = dataset("engine-fallback-label", 96);
    let folder = ImageFolder::open(data.path()).unwrap();
    let victim = folder.entries()[1].path.clone();
    // A table marker (DHT) early in the scan: the router's probe reads the headers alone and
    // accepts the file; the engine and the CPU decoder both refuse the scan, whatever the crop
    // (the eval pipeline's centre crop reaches far below the marker).
    let mut bytes = std::fs::read(&victim).unwrap();
    let sos = bytes.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
    let start = sos + 2 + usize::from(u16::from_be_bytes([bytes[sos + 2], bytes[sos + 3]]));
    let early = start + (bytes.len() - 2 - start) / 8;
    bytes[early..early + 2].copy_from_slice(&[0xFF, 0xC4]);
    std::fs::write(&victim, &bytes).unwrap();
    let classes: Vec<i64> = folder.entries().iter().map(|e| e.label).collect();
    assert!(
        classes.iter().any(|&c| c != classes[1]),
        "a replacement can come from another class"
    );
    let mut loader = Loader::builder(ImageFolder::open(data.path()).unwrap())
        .batch_size(96)
        .workers(2)
        .backend(Backend::Auto)
        .error_budget(0.5)
        .pipeline(hpuload::pipelines::resnet50_eval())
        .build()
        .unwrap();
    let mut other_class = 0;
    for epoch in 0..8 {
        let batches: Vec<_> = loader.epoch(epoch).map(|b| host(&b.unwrap())).collect();
        let (_, labels, indices, _) = &batches[0];
        // Unshuffled: the damaged file's slot is 1, its replacement there.
        assert_ne!(
            indices[1], 1,
            "epoch {epoch}: the damaged file was replaced"
        );
        other_class += usize::from(classes[indices[1]] != classes[1]);
        let want: Vec<i64> = indices.iter().map(|&i| classes[i]).collect();
        assert_eq!(
            labels, &want,
            "epoch {epoch}: each slot's label is its sample's"
        );
    }
    assert!(other_class > 0, "some replacement came from another class");
    let report = loader.report();
    assert_eq!(report.skipped, 8);
    assert_eq!(
        report.fallbacks.get("engine decode error"),
        Some(&8),
        "the engine took the file and failed on it: {report:?}"
    );
}
