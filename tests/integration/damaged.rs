//! The damaged-input suite: each kind of bad file goes through every backend under both error
//! policies. With `Skip` it is skipped with the right reason and its path, the batch shape
//! holds, and every other slot of the epoch is byte-identical to a clean run; with `Fail` the
//! epoch ends with an error that names the file. Nothing panics, hangs or aborts.

use crate::common;
use std::path::{Path, PathBuf};

use crate::common::{dataset, host, small_train, HostBatch, TempDir};
use hpuload::{Backend, Entry, Error, ImageFolder, Listing, Loader, OnError, Report, Source};

const IMAGES: usize = 14;
const BATCH: usize = 4;
const VICTIM: usize = 5;
const BACKENDS: [Backend; 3] = [Backend::Cpu, Backend::Auto, Backend::Hw];

/// A copy of `from` (class folders of files) in a new temporary folder.
fn copy_dataset(from: &Path, tag: &str) -> TempDir {
    let to = TempDir::new(tag);
    for class in std::fs::read_dir(from).unwrap() {
        let class = class.unwrap().path();
        let dst = to.path().join(class.file_name().unwrap());
        std::fs::create_dir_all(&dst).unwrap();
        for f in std::fs::read_dir(&class).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, dst.join(f.file_name().unwrap())).unwrap();
        }
    }
    to
}

/// Every entry of `dir` (absolute paths), listed as a manifest would list them.
fn run(
    source: impl Source + 'static,
    backend: Backend,
    on_error: OnError,
) -> (Vec<Result<HostBatch, Error>>, Report) {
    let mut l = Loader::builder(source)
        .batch_size(BATCH)
        .shuffle(3)
        .workers(2)
        .backend(backend)
        .on_error(on_error)
        .error_budget(0.25)
        .pipeline(small_train())
        .build()
        .unwrap();
    let batches = l
        .epoch(0)
        .map(|b| {
            b.map(|b| {
                assert_eq!(
                    b.images.shape(),
                    &[BATCH, 3, 32, 32],
                    "the batch shape holds"
                );
                host(&b)
            })
        })
        .collect();
    (batches, l.report())
}

/// How one kind of damage is made, and the skip reasons it may be reported with.
struct Damage {
    name: &'static str,
    reasons: &'static [&'static str],
    /// Damages the victim file after the source was listed.
    apply: fn(&Path),
}

/// A valid JPEG whose frame header claims 60000 x 60000 pixels.
fn bomb(path: &Path) {
    let mut jpeg = std::fs::read(path).unwrap();
    let sof = jpeg
        .windows(2)
        .position(|w| w == [0xFF, 0xC0])
        .expect("a baseline frame header");
    // FFC0, length (2), precision (1), height (2), width (2).
    jpeg[sof + 5..sof + 9].copy_from_slice(&[0xEA, 0x60, 0xEA, 0x60]);
    std::fs::write(path, jpeg).unwrap();
}

fn damages() -> Vec<Damage> {
    vec![
        Damage {
            name: "zero-byte file",
            reasons: &["empty"],
            apply: |p| std::fs::write(p, b"").unwrap(),
        },
        Damage {
            name: "random bytes named .jpg",
            reasons: &["unknown-format"],
            apply: |p| {
                let mut x = 0x1234_5678_u32;
                let noise: Vec<u8> = (0..5000)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        (x >> 8) as u8 & 0x7F
                    })
                    .collect();
                std::fs::write(p, noise).unwrap()
            },
        },
        Damage {
            name: "header claims 60000x60000",
            reasons: &["too-large"],
            apply: bomb,
        },
        Damage {
            name: "deleted after listing",
            reasons: &["read"],
            apply: |p| std::fs::remove_file(p).unwrap(),
        },
        Damage {
            name: "directory where the file was listed",
            reasons: &["read"],
            apply: |p| {
                std::fs::remove_file(p).unwrap();
                std::fs::create_dir(p).unwrap();
            },
        },
    ]
}

/// A copy of the clean dataset, listed before it is damaged.
struct Prepared {
    dir: TempDir,
    entries: Vec<Entry>,
    victim: PathBuf,
}

fn prepare(clean: &Path) -> Prepared {
    let dir = copy_dataset(clean, "damaged");
    let entries = ImageFolder::open(dir.path()).unwrap().entries().to_vec();
    let victim = entries[VICTIM].path.clone();
    Prepared {
        dir,
        entries,
        victim,
    }
}

impl Prepared {
    fn source(&self) -> Listing {
        Listing::of_files(self.dir.path(), self.entries.clone(), Vec::new())
    }
}

/// The clean run on each backend of [`BACKENDS`] (the engine's output differs slightly from the
/// CPU path's, so each backend is compared with itself).
fn clean_runs(dir: &Path) -> Vec<Vec<HostBatch>> {
    BACKENDS
        .iter()
        .map(|&backend| {
            let (batches, report) = run(ImageFolder::open(dir).unwrap(), backend, OnError::Fail);
            assert_eq!(report.skipped, 0);
            let batches: Vec<HostBatch> = batches.into_iter().map(Result::unwrap).collect();
            assert!(batches.iter().any(|b| b.2.contains(&VICTIM)));
            batches
        })
        .collect()
}

/// Runs the damaged copy on every backend under both policies and checks it against the clean
/// runs.
fn check(clean: &[Vec<HostBatch>], p: &Prepared, reasons: &[&str], what: &str) {
    let victim = &p.victim;
    for (backend, clean) in BACKENDS.into_iter().zip(clean) {
        let ctx = format!("{what}, {backend:?}");
        // Skip: named, counted by reason, replaced; everything else unchanged.
        let (batches, report) = run(p.source(), backend, OnError::Skip);
        let batches: Vec<HostBatch> = batches
            .into_iter()
            .map(|b| b.unwrap_or_else(|e| panic!("{ctx}: {e}")))
            .collect();
        assert_eq!(batches.len(), clean.len(), "{ctx}");
        let skip = report
            .skips
            .iter()
            .find(|s| &s.path == victim)
            .unwrap_or_else(|| panic!("{ctx}: not reported: {:?}", report.skips));
        assert!(
            reasons.contains(&skip.reason),
            "{ctx}: reason {} ({})",
            skip.reason,
            skip.message
        );
        assert!(
            skip.message.contains(&*victim.to_string_lossy()),
            "{ctx}: {}",
            skip.message
        );
        // The victim is skipped each time the epoch holds it (padding may repeat it).
        let held: usize = clean
            .iter()
            .map(|b| b.2.iter().filter(|&&i| i == VICTIM).count())
            .sum();
        let named = report.skips.iter().filter(|s| &s.path == victim).count();
        assert!(named >= held, "{ctx}: skipped {named} times, held {held}");
        for (b, (good, got)) in clean.iter().zip(&batches).enumerate() {
            let sample = good.0.len() / BATCH;
            for slot in 0..BATCH {
                if good.2[slot] == VICTIM {
                    assert_ne!(got.2[slot], VICTIM, "{ctx}: a replacement fills the slot");
                } else {
                    assert_eq!(got.2[slot], good.2[slot], "{ctx}: batch {b} slot {slot}");
                    assert!(
                        got.0[slot * sample..(slot + 1) * sample]
                            == good.0[slot * sample..(slot + 1) * sample],
                        "{ctx}: batch {b} slot {slot} changed"
                    );
                }
            }
        }
        // Fail: the epoch ends with an error that names the file.
        let (batches, _) = run(p.source(), backend, OnError::Fail);
        let err = batches
            .into_iter()
            .find_map(Result::err)
            .unwrap_or_else(|| panic!("{ctx}: the Fail policy gave no error"));
        match &err {
            Error::Sample(e) => assert_eq!(&e.path, victim, "{ctx}"),
            other => panic!("{ctx}: {other}"),
        }
        assert!(
            err.to_string().contains(&*victim.to_string_lossy()),
            "{ctx}: {err}"
        );
    }
}

#[test]
fn each_kind_of_damaged_file_is_skipped_or_fails_naming_it_on_every_backend() {
    let clean_dir = dataset("damaged-clean", IMAGES);
    let clean = clean_runs(clean_dir.path());
    for damage in damages() {
        let p = prepare(clean_dir.path());
        (damage.apply)(&p.victim);
        check(&clean, &p, damage.reasons, damage.name);
    }
}

#[test]
fn a_jpeg_truncated_at_any_offset_is_skipped_or_fails_naming_it() {
    let clean_dir = dataset("truncated-clean", IMAGES);
    let clean = clean_runs(clean_dir.path());
    let len =
        std::fs::metadata(&ImageFolder::open(clean_dir.path()).unwrap().entries()[VICTIM].path)
            .unwrap()
            .len() as usize;
    for cut in [
        1,
        2,
        3,
        20,
        100,
        400,
        len / 4,
        len / 2,
        len - 100,
        len - 2,
        len - 1,
    ] {
        let p = prepare(clean_dir.path());
        let jpeg = std::fs::read(&p.victim).unwrap();
        std::fs::write(&p.victim, &jpeg[..cut]).unwrap();
        check(
            &clean,
            &p,
            &["truncated"],
            &format!("truncated at {cut} of {len}"),
        );
    }
}

#[test]
fn an_unreadable_file_is_skipped_or_fails_naming_it() {
    // Root reads anything; drop the capabilities that let it, from this thread and the loader
    // threads it starts.
    common::drop_capabilities(&[common::CAP_DAC_OVERRIDE, common::CAP_DAC_READ_SEARCH]);
    let clean_dir = dataset("unreadable-clean", IMAGES);
    let clean = clean_runs(clean_dir.path());
    let p = prepare(clean_dir.path());
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p.victim, std::fs::Permissions::from_mode(0o000)).unwrap();
    assert!(
        std::fs::read(&p.victim).is_err(),
        "the file is unreadable here"
    );
    check(&clean, &p, &["read"], "unreadable");
}

#[test]
fn a_png_named_jpg_is_decoded_by_content_and_refused_only_by_the_engine_only_backend() {
    let clean_dir = dataset("png-clean", IMAGES);
    let p = prepare(clean_dir.path());
    let rgb = image::load_from_memory(&std::fs::read(&p.victim).unwrap()).unwrap();
    rgb.save_with_format(&p.victim, image::ImageFormat::Png)
        .unwrap();
    for backend in [Backend::Cpu, Backend::Auto] {
        let (batches, report) = run(p.source(), backend, OnError::Fail);
        assert!(batches.iter().all(Result::is_ok), "{backend:?}");
        assert_eq!(report.skipped, 0);
        if backend == Backend::Auto {
            assert_eq!(
                report.fallbacks.values().sum::<u64>(),
                1,
                "{:?}",
                report.fallbacks
            );
        }
    }
    // The engine takes only JPEG: with `Hw`, the file is an error naming it, whatever the policy.
    for policy in [OnError::Skip, OnError::Fail] {
        let (batches, _) = run(p.source(), Backend::Hw, policy);
        let err = batches.into_iter().find_map(Result::err).expect("an error");
        assert!(
            err.to_string().contains(&*p.victim.to_string_lossy()),
            "{err}"
        );
        assert!(
            err.to_string().contains("PNG") || err.to_string().contains("png"),
            "{err}"
        );
    }
}

#[test]
fn non_utf8_file_names_load_and_are_named_when_damaged() {
    use std::os::unix::ffi::OsStrExt;
    let clean_dir = dataset("non-utf8", IMAGES);
    let entries = ImageFolder::open(clean_dir.path())
        .unwrap()
        .entries()
        .to_vec();
    let odd = entries[VICTIM]
        .path
        .with_file_name(std::ffi::OsStr::from_bytes(b"caf\xe9-\xff.jpg"));
    std::fs::rename(&entries[VICTIM].path, &odd).unwrap();
    let folder = ImageFolder::open(clean_dir.path()).unwrap();
    assert!(folder.entries().iter().any(|e| e.path == odd), "listed");
    for backend in BACKENDS {
        let (batches, report) = run(folder.clone(), backend, OnError::Fail);
        assert!(batches.iter().all(Result::is_ok), "{backend:?}: loads");
        assert_eq!(report.images as usize, IMAGES);
    }
    std::fs::write(&odd, b"").unwrap();
    let (_, report) = run(folder.clone(), Backend::Auto, OnError::Skip);
    assert!(!report.skips.is_empty());
    assert!(
        report.skips.iter().all(|s| s.path == odd),
        "the exact (non-UTF-8) path is reported"
    );
    let (batches, _) = run(folder, Backend::Auto, OnError::Fail);
    let err = batches.into_iter().find_map(Result::err).expect("an error");
    assert!(err.to_string().contains("caf"), "{err}");
}

#[test]
fn a_directory_named_like_an_image_is_not_a_sample() {
    let clean_dir = dataset("dir-named-jpg", IMAGES);
    let before = ImageFolder::open(clean_dir.path())
        .unwrap()
        .entries()
        .to_vec();
    let class = before[0].path.parent().unwrap().to_path_buf();
    std::fs::create_dir(class.join("looks_like.jpg")).unwrap();
    let after = ImageFolder::open(clean_dir.path())
        .unwrap()
        .entries()
        .to_vec();
    assert_eq!(before, after);
}

#[test]
fn a_symlink_loop_in_the_folder_is_listed_once_without_hanging() {
    let clean_dir = dataset("symlink-loop", IMAGES);
    let before = ImageFolder::open(clean_dir.path()).unwrap().entries().len();
    let class = ImageFolder::open(clean_dir.path()).unwrap().entries()[0]
        .path
        .parent()
        .unwrap()
        .to_path_buf();
    std::os::unix::fs::symlink(&class, class.join("loop")).unwrap();
    assert_eq!(
        ImageFolder::open(clean_dir.path()).unwrap().entries().len(),
        before
    );
}

#[test]
fn a_failed_sample_is_never_drawn_again_as_its_own_replacement() {
    // Eight images, one gone: under the default budget (one failure per epoch here) every seed
    // replaces it with a readable sample, so it fails once and the epoch completes. A
    // replacement drawn over all eight would be the missing file itself for about one seed in
    // eight, failing twice.
    let dir = dataset("replacement-excludes", 8);
    let p = prepare(dir.path());
    std::fs::remove_file(&p.victim).unwrap();
    for seed in 0..48 {
        let mut l = Loader::builder(p.source())
            .batch_size(8)
            .workers(1)
            .backend(Backend::Cpu)
            .shuffle(seed)
            .pipeline(small_train())
            .build()
            .unwrap();
        let batches: Vec<_> = l.epoch(0).collect();
        assert_eq!(batches.len(), 1, "seed {seed}");
        let batch = batches
            .into_iter()
            .next()
            .unwrap()
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(batch.skipped.len(), 1, "seed {seed}");
        assert!(!batch.indices.contains(&VICTIM), "seed {seed}");
    }
}
