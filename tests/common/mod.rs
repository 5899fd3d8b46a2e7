//! Helpers shared by the integration tests.
#![allow(dead_code, missing_docs)]

pub mod http;

use std::path::{Path, PathBuf};

use hpuload::{pipelines, Batch, Loader, Op, Pipeline, Size};

/// The ResNet-50 train ops at a small output size, to keep the tests fast.
pub fn small_train() -> Pipeline {
    train_at(32)
}

/// The ResNet-50 train ops with an output of `side` x `side`.
pub fn train_at(side: u32) -> Pipeline {
    let mut p = pipelines::resnet50_train();
    p.ops[0] = Op::RandomResizedCrop(hpuload::augment::RandomResizedCrop {
        size: Size::Square(side),
        scale: [0.08, 1.0],
        ratio: [0.75, 4.0 / 3.0],
        interpolation: Default::default(),
    });
    p
}

/// A fresh temporary folder, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("hpuload-test-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A synthetic ImageFolder of `n` real JPEGs (10 classes).
pub fn dataset(tag: &str, n: usize) -> TempDir {
    let dir = TempDir::new(tag);
    hpuload::dataset::make_dataset(dir.path(), n, 7).unwrap();
    dir
}

/// `make-shards` of a fresh 30-image folder into shards of about 200 KB: (folder, shards, pattern).
pub fn sharded(tag: &str) -> (TempDir, TempDir, String) {
    let data = dataset(tag, 30);
    let (out, pattern) = make_shards(data.path(), "200KB");
    let shards = pattern_shards(&pattern);
    assert!(shards >= 4, "several shards: {shards}");
    (data, out, pattern)
}

/// `make-shards` of the folder `data` into shards of about `size`: (shards, pattern).
pub fn make_shards(data: &Path, size: &str) -> (TempDir, String) {
    let out = TempDir::new("shards");
    let run = hpuload_ok([
        "make-shards".as_ref(),
        "--data".as_ref(),
        data.as_os_str(),
        "--out".as_ref(),
        out.path().as_os_str(),
        "--shard-size".as_ref(),
        size.as_ref(),
    ]);
    let shards = std::fs::read_dir(out.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "tar")
        })
        .count();
    let pattern = format!(
        "{}/shard-{{000000..{:06}}}.tar",
        out.path().display(),
        shards - 1
    );
    assert!(String::from_utf8_lossy(&run.stdout).contains(&pattern));
    (out, pattern)
}

/// Runs the `hpuload` binary with `args` and checks that it succeeded (printing its stderr
/// when not).
pub fn hpuload_ok<'a>(args: impl IntoIterator<Item = &'a std::ffi::OsStr>) -> std::process::Output {
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_hpuload"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    run
}

/// How many shards a `{000000..N}` pattern names.
fn pattern_shards(pattern: &str) -> usize {
    let last = pattern.rsplit("..").next().unwrap();
    last[..6].parse::<usize>().unwrap() + 1
}

/// A batch read back to the host: (images bytes, labels, indices, valid).
pub type HostBatch = (Vec<u8>, Vec<i64>, Vec<usize>, usize);

/// Every batch of an epoch, read back to the host.
pub fn epoch_bytes(loader: &mut Loader, epoch: u64) -> Vec<HostBatch> {
    loader
        .epoch(epoch)
        .map(|b| host(&b.expect("batch")))
        .collect()
}

pub fn host(b: &Batch) -> HostBatch {
    let labels = b
        .labels
        .to_host()
        .unwrap()
        .chunks(8)
        .map(|c| i64::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    (
        b.images.to_host().unwrap(),
        labels,
        b.indices.clone(),
        b.valid,
    )
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Bypasses file read permission checks (root has it).
pub const CAP_DAC_OVERRIDE: u32 = 1;
/// Bypasses file read and directory search permission checks.
pub const CAP_DAC_READ_SEARCH: u32 = 2;
/// Allows page-locking beyond RLIMIT_MEMLOCK.
pub const CAP_IPC_LOCK: u32 = 14;

/// Drops `caps` from the calling thread's effective set. Capabilities are per thread and
/// inherited by threads it spawns afterwards, so a loader built after this call has workers
/// held to the rules a non-root user is held to, while other tests' threads are unaffected.
pub fn drop_capabilities(caps: &[u32]) {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget/capset read and write exactly the two structs passed, whose layout is the
    // kernel's _LINUX_CAPABILITY_VERSION_3 ABI.
    unsafe {
        assert_eq!(
            libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()),
            0
        );
        for cap in caps {
            data[0].effective &= !(1 << cap);
        }
        assert_eq!(libc::syscall(libc::SYS_capset, &header, data.as_ptr()), 0);
    }
}

/// Threads of this process whose name starts with `prefix`.
pub fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

/// An image folder whose reads go through `read` (never in place), each calling the hook
/// with the sample's index first: a fault inside a worker, a slow read, a record of reads.
pub struct HookedSource<F>(pub hpuload::ImageFolder, pub F);

impl<F: Fn(usize) + Send + Sync + 'static> hpuload::Source for HookedSource<F> {
    fn listing(&self) -> &hpuload::source::Listing {
        self.0.listing()
    }
    fn read<'a>(
        &self,
        index: usize,
        mode: hpuload::ReadMode,
        buf: &'a mut Vec<u8>,
    ) -> std::io::Result<hpuload::SampleBytes<'a>> {
        (self.1)(index);
        hpuload::source::read_file(&self.entries()[index].path, mode, buf)
    }
    /// Not in place: every read goes through `read` above.
    fn read_into(
        &self,
        _index: usize,
        _mode: hpuload::ReadMode,
        _dst: &mut [u8],
    ) -> std::io::Result<Option<usize>> {
        Ok(None)
    }
}

/// A source whose read of sample `victim` panics (a fault inside a worker).
#[allow(dead_code)] // not every test binary uses it
pub fn panicking_source(
    folder: hpuload::ImageFolder,
    victim: usize,
) -> HookedSource<impl Fn(usize) + Send + Sync + 'static> {
    HookedSource(folder, move |index| {
        assert_ne!(index, victim, "injected panic")
    })
}

/// Runs epoch 0 on every rank of `world` (rank `r`'s loader from `build(r)`, with the `Pad`
/// last-batch policy) and checks that the ranks yield the same number of batches and that
/// their valid slots hold samples `0..n`, each once.
#[allow(dead_code)] // not every test binary uses it
pub fn assert_ranks_cover(n: usize, world: usize, build: impl Fn(usize) -> hpuload::LoaderBuilder) {
    let (mut counts, mut seen) = (Vec::new(), Vec::new());
    for rank in 0..world {
        let mut l = build(rank)
            .shard(rank, world)
            .last_batch(hpuload::LastBatch::Pad)
            .build()
            .unwrap();
        let batches: Vec<_> = l.epoch(0).map(Result::unwrap).collect();
        counts.push(batches.len());
        for b in batches {
            seen.extend_from_slice(&b.indices[..b.valid]);
        }
    }
    assert!(counts.iter().all(|&c| c == counts[0]), "{counts:?}");
    seen.sort_unstable();
    assert_eq!(seen, (0..n).collect::<Vec<_>>(), "{world} ranks");
}

/// An epoch stopped after two batches on each of 2 ranks and resumed (from one rank's state)
/// on 3 ranks visits every one of the `n` samples once, counting the batches before the stop.
pub fn assert_elastic_resume(
    n: usize,
    epoch: u64,
    build: impl Fn(usize) -> hpuload::LoaderBuilder,
) {
    let on = |rank, world| {
        build(rank)
            .shard(rank, world)
            .last_batch(hpuload::LastBatch::Pad)
    };
    let (mut seen, mut state) = (Vec::new(), None);
    for rank in 0..2 {
        let mut l = on(rank, 2).build().unwrap();
        let mut run = l.epoch(epoch);
        for _ in 0..2 {
            let b = run.next().unwrap().unwrap();
            seen.extend_from_slice(&b.indices[..b.valid]);
        }
        state = Some(run.state());
    }
    let state = state.unwrap();
    for rank in 0..3 {
        let mut l = on(rank, 3).resume(state.clone()).build().unwrap();
        for b in l.epoch(epoch) {
            let b = b.unwrap();
            seen.extend_from_slice(&b.indices[..b.valid]);
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..n).collect::<Vec<_>>(), "every sample once");
}
