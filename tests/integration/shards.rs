//! WebDataset tar shards: written by `hpuload make-shards`, read by random access through their
//! sidecar indexes, with the loader's guarantees (determinism, exact resume, equal batches per
//! rank, bad members named by shard and member).

use crate::common;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::common::{dataset, host, sharded, small_train, TempDir};
use hpuload::source::shards::index_path;
use hpuload::{ImageFolder, Loader, OnError, ReadMode, Source, WebDataset};

fn bytes_of(source: &dyn Source, index: usize) -> Vec<u8> {
    let mut buf = Vec::new();
    source
        .read(index, ReadMode::Read, &mut buf)
        .unwrap()
        .to_vec()
}

fn loader(source: impl Source + 'static, workers: usize) -> hpuload::LoaderBuilder {
    Loader::builder(source)
        .batch_size(4)
        .shuffle(9)
        .workers(workers)
        .pipeline(small_train())
}

#[test]
fn make_shards_then_reading_them_gives_every_file_once_with_its_label() {
    let (data, _out, pattern) = sharded("shards-roundtrip");
    let folder = ImageFolder::open(data.path()).unwrap();
    let want: HashMap<Vec<u8>, i64> = (0..folder.entries().len())
        .map(|i| (bytes_of(&folder, i), folder.entries()[i].label))
        .collect();
    let shards = WebDataset::open(&pattern).unwrap();
    assert_eq!(shards.entries().len(), 30);
    let got: HashMap<Vec<u8>, i64> = (0..30)
        .map(|i| (bytes_of(&shards, i), shards.entries()[i].label))
        .collect();
    assert!(got == want, "the same files with the same labels");
    let name = shards.entries()[0].path.to_string_lossy().into_owned();
    assert!(
        name.contains("shard-000000.tar/") && name.ends_with(".jpg"),
        "{name}"
    );
}

#[test]
fn a_missing_index_is_built_and_saved_and_a_stale_one_is_rebuilt() {
    let (_data, _out, pattern) = sharded("shards-index");
    let first = WebDataset::open(&pattern).unwrap();
    let shard = first.shards()[1].clone();
    let idx = index_path(&shard);
    let saved = std::fs::read_to_string(&idx).unwrap();
    std::fs::remove_file(&idx).unwrap();
    let rebuilt = WebDataset::open(&pattern).unwrap();
    assert_eq!(
        std::fs::read_to_string(&idx).unwrap(),
        saved,
        "rebuilt and saved alike"
    );
    assert_eq!(rebuilt.entries(), first.entries());
    // An index made for a smaller shard (the shard was rewritten since) is not trusted.
    let size = std::fs::metadata(&shard).unwrap().len();
    let stale = saved.replacen(&format!(" {size} "), &format!(" {} ", size / 2), 1);
    assert_ne!(stale, saved);
    std::fs::write(&idx, stale).unwrap();
    let again = WebDataset::open(&pattern).unwrap();
    assert_eq!(again.entries(), first.entries());
    assert_eq!(std::fs::read_to_string(&idx).unwrap(), saved);
}

#[test]
fn batches_from_shards_do_not_depend_on_worker_count_and_resume_exactly() {
    let (_data, _out, pattern) = sharded("shards-determinism");
    let mut one = loader(WebDataset::open(&pattern).unwrap(), 1)
        .build()
        .unwrap();
    let mut three = loader(WebDataset::open(&pattern).unwrap(), 3)
        .build()
        .unwrap();
    let a: Vec<_> = one.epoch(2).map(|b| host(&b.unwrap())).collect();
    let b: Vec<_> = three.epoch(2).map(|b| host(&b.unwrap())).collect();
    assert_eq!(a.len(), 8);
    assert!(a == b, "the same bytes with 1 and 3 workers");

    let mut stopped = loader(WebDataset::open(&pattern).unwrap(), 2)
        .build()
        .unwrap();
    let mut epoch = stopped.epoch(2);
    for _ in 0..3 {
        epoch.next().unwrap().unwrap();
    }
    let state = epoch.state();
    drop(epoch);
    let mut resumed = loader(WebDataset::open(&pattern).unwrap(), 2)
        .resume(state)
        .build()
        .unwrap();
    let rest: Vec<_> = resumed.epoch(2).map(|b| host(&b.unwrap())).collect();
    assert!(
        rest == a[3..],
        "resumed mid-epoch: the uninterrupted run's remaining batches"
    );
}

#[test]
fn ranks_get_equal_batch_counts_and_cover_every_sample_when_shards_do_not_divide() {
    let (_data, _out, pattern) = sharded("shards-ranks");
    let shards = WebDataset::open(&pattern).unwrap().shards().len();
    let world = if !shards.is_multiple_of(3) { 3 } else { 4 };
    assert_ne!(
        shards % world,
        0,
        "the shard count ({shards}) does not divide by {world}"
    );
    common::assert_ranks_cover(30, world, |_| {
        loader(WebDataset::open(&pattern).unwrap(), 2)
    });
}

/// The shard file and the data offset of sample `index`'s image, from the source's entries and
/// the shard's index.
fn member_location(pattern: &str, index: usize) -> (PathBuf, u64, u64) {
    let source = WebDataset::open(pattern).unwrap();
    let path = source.entries()[index].path.clone();
    let shard = path.parent().unwrap().to_path_buf();
    let member = path.file_name().unwrap().to_str().unwrap().to_string();
    let idx = std::fs::read_to_string(index_path(&shard)).unwrap();
    let line = idx
        .lines()
        .find(|l| l.split('\t').nth(1) == Some(&member))
        .unwrap();
    let f: Vec<_> = line.split('\t').collect();
    (shard, f[2].parse().unwrap(), f[3].parse().unwrap())
}

#[test]
fn a_corrupt_member_is_named_by_shard_and_member_and_skipped_within_the_budget() {
    let (_data, _out, pattern) = sharded("shards-corrupt");
    let victim = WebDataset::open(&pattern).unwrap().entries()[7]
        .path
        .clone();
    let (shard, offset, len) = member_location(&pattern, 7);
    let mut bytes = std::fs::read(&shard).unwrap();
    for b in &mut bytes[offset as usize..(offset + len) as usize] {
        *b = 0x5a;
    }
    std::fs::write(&shard, bytes).unwrap();

    let mut failing = loader(WebDataset::open(&pattern).unwrap(), 2)
        .on_error(OnError::Fail)
        .build()
        .unwrap();
    let err = failing
        .epoch(0)
        .find_map(Result::err)
        .expect("the corrupt member fails");
    assert!(err.to_string().contains(victim.to_str().unwrap()), "{err}");

    let mut skipping = loader(WebDataset::open(&pattern).unwrap(), 2)
        .error_budget(0.1)
        .build()
        .unwrap();
    assert_eq!(skipping.epoch(0).filter(|b| b.is_ok()).count(), 8);
    let report = skipping.report();
    assert_eq!(report.skipped, 1);
    assert_eq!(report.skips[0].path, victim);
}

#[test]
fn a_truncated_shard_fails_only_the_samples_past_the_cut_and_names_them() {
    let (_data, _out, pattern) = sharded("shards-truncated");
    let source = WebDataset::open(&pattern).unwrap();
    let last_shard = source.shards().last().unwrap().clone();
    let in_last: Vec<usize> = (0..30)
        .filter(|&i| source.entries()[i].path.starts_with(&last_shard))
        .collect();
    let (_, offset, _) = member_location(&pattern, in_last[0]);
    // Cut inside the first sample's image: every sample of the shard is now incomplete.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&last_shard)
        .unwrap();
    file.set_len(offset + 10).unwrap();
    drop(file);
    let reopened = WebDataset::open(&pattern).expect("a damaged shard does not stop the others");
    let mut buf = Vec::new();
    let err = reopened
        .read(in_last[0], ReadMode::Read, &mut buf)
        .map(|_| ())
        .unwrap_err();
    assert!(err.to_string().contains("truncated"), "{err}");
    let mut l = loader(reopened, 2).error_budget(0.5).build().unwrap();
    assert_eq!(l.epoch(0).filter(|b| b.is_ok()).count(), 8);
    assert_eq!(l.report().skipped as usize, in_last.len());

    // Without its index the shard is scanned anew: the sample the cut runs through is kept
    // and fails by name; the other shards are untouched.
    std::fs::remove_file(index_path(&last_shard)).unwrap();
    let rescanned = WebDataset::open(&pattern).unwrap();
    let cut = rescanned
        .entries()
        .iter()
        .position(|e| e.path.starts_with(&last_shard))
        .expect("the cut sample is listed");
    let err = rescanned
        .read(cut, ReadMode::Read, &mut buf)
        .map(|_| ())
        .unwrap_err();
    assert!(err.to_string().contains("truncated"), "{err}");
    assert_eq!(rescanned.entries().len(), 30 - in_last.len() + 1);
}

#[test]
fn a_missing_shard_is_an_error_naming_it() {
    let (_data, out, _pattern) = sharded("shards-missing");
    let pattern = format!("{}/shard-{{000000..000099}}.tar", out.path().display());
    let err = WebDataset::open(&pattern).unwrap_err().to_string();
    assert!(
        err.contains("shard-0000") && err.contains("No such file"),
        "{err}"
    );
}

fn tar_with(dir: &Path, members: &[(&str, &[u8])]) -> PathBuf {
    let path = dir.join("hand.tar");
    let mut b = tar::Builder::new(std::fs::File::create(&path).unwrap());
    for (name, data) in members {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap();
    path
}

#[test]
fn samples_without_an_image_or_an_integer_label_fail_by_name_and_the_rest_load() {
    let dir = TempDir::new("shards-hand");
    let data = dataset("shards-hand-src", 1);
    let jpeg = bytes_of(&ImageFolder::open(data.path()).unwrap(), 0);
    let shard = tar_with(
        dir.path(),
        &[
            ("a/one.jpg", &jpeg),
            ("a/one.cls", b"3\n"),
            ("a/two.json", b"{}"),
            ("a/two.cls", b"1"),
            ("a/three.seg.png", b"x"),
            ("a/three.jpg", &jpeg),
            ("a/three.cls", b"cat"),
            ("a/four.jpg", &jpeg),
            ("a/four.cls", b"7"),
        ],
    );
    let source = WebDataset::open(shard.to_str().unwrap()).unwrap();
    let e = source.entries();
    assert_eq!(e.len(), 4);
    assert_eq!((e[0].label, e[3].label), (3, 7));
    assert!(e[0].path.ends_with("hand.tar/a/one.jpg"));
    let mut buf = Vec::new();
    let no_image = source
        .read(1, ReadMode::Read, &mut buf)
        .map(|_| ())
        .unwrap_err();
    assert!(
        no_image.to_string().contains("no image member"),
        "{no_image}"
    );
    let bad_label = source
        .read(2, ReadMode::Read, &mut buf)
        .map(|_| ())
        .unwrap_err();
    assert!(
        bad_label.to_string().contains("not an integer"),
        "{bad_label}"
    );
    assert_eq!(bytes_of(&source, 3), jpeg);
}
