//! Parquet files of a Hugging Face dataset (the hub's `data/train-00000-of-00294.parquet`),
//! read with the `parquet` crate.
//!
//! Parquet pages may be compressed, so one row cannot be read alone: the unit of reading is a
//! row group's image column chunk, decoded by parquet's column readers from a map of the file
//! (or one ranged request for a remote file not cached yet). Values of uncompressed pages,
//! which is how `datasets` writes images, stay slices of the map. Opening reads each file's
//! footer and its label column (small), so every row's label is known up front.
//!
//! **Order.** A shuffled epoch visits row groups, not rows, at random: the groups are put in a
//! seeded random order, cut into windows of at least [`ParquetOptions::window_rows`] rows, and
//! the rows of each window are shuffled among themselves (both from the counter-based
//! generator keyed by `(seed, epoch)`). The order is the same on every rank, so sharding,
//! exact and elastic resume work as for any source. Each rank reads every row group of the
//! windows it visits (ranks take strided positions of the one global order).
//!
//! **Reads.** Before an epoch the loader tells the source which samples this rank will read
//! ([`Source::plan_reads`]); a decoded row group is kept until its last planned read, then
//! dropped, so each group is read and decoded once per epoch, and memory holds only the groups
//! of the windows in flight. A replacement for a skipped sample (not in the plan) may decode its
//! group again.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaDataReader;

mod group;
mod pages;

use group::{
    chunk_range, footer_error, read_group, read_images, Decoded, GroupCache, GroupError, Span,
    MAX_GROUP_ROWS,
};

use super::hf::{self, ColumnChoice, HfColumns, ImageCell, TableError};
use super::pattern::{expand_braces, glob_files};
use super::remote::{self, CacheBudget, CachedShard, Remote, RemoteOptions, StorageReport};
use super::{Entry, Listing, ReadMode, SampleBytes, Source};
use crate::rng::{CounterRng, Stream};
use crate::Error;

/// How Parquet files are opened and read.
#[derive(Clone, Debug)]
pub struct ParquetOptions {
    /// Which columns hold the image and the label.
    pub columns: ColumnChoice,
    /// A shuffled epoch shuffles rows within windows of row groups holding at least this many
    /// rows (default 2048); larger windows mix better and hold more decoded groups in memory.
    pub window_rows: usize,
    /// How files named by URL are read (requests, retries, the local cache of whole files).
    pub remote: RemoteOptions,
}

impl Default for ParquetOptions {
    fn default() -> Self {
        Self {
            columns: ColumnChoice::default(),
            window_rows: 2048,
            remote: RemoteOptions::default(),
        }
    }
}

/// A dataset of Parquet files, read by row group.
pub struct ParquetDataset {
    listing: Listing,
    /// Each sample's row group (an index into `groups`) and row in it.
    rows: Vec<(u32, u32)>,
    groups: Vec<Group>,
    files: Vec<ParquetFile>,
    columns: HfColumns,
    /// Samples without a usable label, and why.
    unlabelled: HashMap<usize, TableError>,
    window_rows: usize,
    cache: GroupCache,
    decoded: std::sync::atomic::AtomicU64,
    store: Option<Store>,
}

/// Object storage for files named by URL, and the local cache of whole files.
struct Store {
    remote: Remote,
    cache: Option<(PathBuf, Arc<CacheBudget>)>,
}

struct ParquetFile {
    /// The file, or its URL.
    path: PathBuf,
    /// Its footer (set once read).
    metadata: Option<ArrowReaderMetadata>,
    /// The local file (or the cached copy of a remote one), mapped on first use.
    map: OnceLock<Result<Bytes, GroupError>>,
    remote: Option<RemoteFile>,
}

/// A Parquet file on object storage.
struct RemoteFile {
    object: object_store::path::Path,
    size: u64,
    cached: Option<Arc<CachedShard>>,
}

/// One row group: its file, number in the file, the byte range of its image and label column
/// chunks, and its first sample.
#[derive(Clone, Debug)]
struct Group {
    file: u32,
    number: usize,
    range: (u64, u64),
    first: usize,
    rows: usize,
}

impl std::fmt::Debug for ParquetDataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetDataset")
            .field("origin", &self.listing.origin)
            .field("files", &self.files.len())
            .field("row_groups", &self.groups.len())
            .field("rows", &self.listing.entries.len())
            .finish_non_exhaustive()
    }
}

impl ParquetDataset {
    /// Opens the Parquet files `spec` names: a file, a brace pattern
    /// (`data/train-{00000..00293}-of-00294.parquet`), a glob (`data/train-*.parquet`), or a
    /// folder (every `*.parquet` file under it, sorted).
    ///
    /// # Errors
    /// No files, a file that cannot be read or whose footer is damaged (naming it), files whose
    /// columns differ, no image or label column, or no rows.
    pub fn open(spec: &str, options: &ParquetOptions) -> Result<Self, Error> {
        let (names, store) = if remote::is_remote(spec) {
            let names = expand_braces(spec)
                .map_err(|reason| Error::config("data", format!("pattern {spec:?}: {reason}")))?;
            let (remote, _) = Remote::connect(&names[0], &options.remote)?;
            let cache = options.remote.cache.as_ref().and_then(|c| {
                std::fs::create_dir_all(&c.dir)
                    .map(|()| (c.dir.clone(), Arc::new(CacheBudget::new(c))))
                    .map_err(|e| tracing::warn!("cache {} unusable ({e})", c.dir.display()))
                    .ok()
            });
            let names: Vec<PathBuf> = names.into_iter().map(PathBuf::from).collect();
            (names, Some(Store { remote, cache }))
        } else {
            (parquet_files(spec)?, None)
        };
        if u32::try_from(names.len()).is_err() {
            return Err(Error::config("data", "more than 2^32 Parquet files"));
        }
        let mut files = Vec::with_capacity(names.len());
        let mut columns: Option<HfColumns> = None;
        let (mut entries, mut rows, mut groups) = (Vec::new(), Vec::new(), Vec::new());
        let mut unlabelled = HashMap::new();
        for (f, path) in names.into_iter().enumerate() {
            let io = |source| Error::Io {
                path: path.clone(),
                source,
            };
            let bad = |e: &dyn std::fmt::Display| Error::Format {
                path: path.clone(),
                reason: e.to_string(),
            };
            let mut file = ParquetFile::new(path.clone(), store.as_ref()).map_err(io)?;
            let metadata =
                hf::guarded(|| file.footer(store.as_ref()).map_err(|e| footer_error(&e)))
                    .map_err(|e| bad(&e))?;
            let found =
                hf::find_columns(metadata.schema(), &options.columns).map_err(|why| bad(&why))?;
            let label = found
                .label
                .ok_or_else(|| bad(&"a Parquet table is read with its labels"))?;
            match &columns {
                None => columns = Some(found.clone()),
                Some(c) if *c == found => {}
                Some(_) => {
                    return Err(Error::config(
                        "data",
                        format!(
                            "{}: its columns or class names differ from those of the first file",
                            path.display()
                        ),
                    ))
                }
            }
            let meta = Arc::clone(metadata.metadata());
            for (g, group) in meta.row_groups().iter().enumerate() {
                let n = usize::try_from(group.num_rows())
                    .ok()
                    .filter(|&n| n <= MAX_GROUP_ROWS)
                    .ok_or_else(|| {
                        bad(&format!(
                            "row group {g} claims {} rows (at most {MAX_GROUP_ROWS} are read)",
                            group.num_rows()
                        ))
                    })?;
                let range = chunk_range(&meta, g, &[found.image, label])
                    .map_err(|why| bad(&why.in_group(g)))?;
                let first = entries.len();
                let labels = chunk_range(&meta, g, &[label])
                    .and_then(|range| file.span(range, store.as_ref()))
                    .and_then(|span| hf::guarded(|| read_group(span, &metadata, g, label)))
                    .map(|batch| hf::labels(&batch, 0))
                    .map_err(|why| bad(&why.in_group(g)))?;
                let row0: usize = meta.row_groups()[..g]
                    .iter()
                    .map(|r| usize::try_from(r.num_rows()).unwrap_or(0))
                    .sum();
                for (r, label) in labels.into_iter().enumerate() {
                    let label = label.unwrap_or_else(|why| {
                        // Fails when the sample is read, naming the row.
                        unlabelled.insert(entries.len(), why);
                        -1
                    });
                    entries.push(Entry {
                        path: path.join(format!("row {}", row0 + r)),
                        label,
                    });
                    rows.push((groups.len() as u32, r as u32));
                }
                groups.push(Group {
                    file: f as u32,
                    number: g,
                    range,
                    first,
                    rows: n,
                });
            }
            file.metadata = Some(metadata);
            files.push(file);
        }
        let origin = files.first().map(|f| f.path.clone()).unwrap_or_default();
        let Some(columns) = columns.filter(|_| !entries.is_empty()) else {
            return Err(Error::EmptyDataset {
                path: origin,
                what: "rows in the Parquet files",
            });
        };
        Ok(Self {
            listing: Listing::of_records(origin, entries, columns.classes.clone()),
            rows,
            groups,
            files,
            columns,
            unlabelled,
            window_rows: options.window_rows.max(1),
            cache: GroupCache::default(),
            decoded: Default::default(),
            store,
        })
    }

    /// The Parquet files, in order.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|f| f.path.as_path())
    }

    /// The number of row groups.
    pub fn row_groups(&self) -> usize {
        self.groups.len()
    }

    /// Row groups read and decoded so far (each is read once per epoch when the loader plans
    /// its reads).
    pub fn groups_decoded(&self) -> u64 {
        self.decoded.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Row group `g`'s image column, decoded (from the cache when it is there).
    fn group(&self, g: u32) -> Result<Arc<Decoded>, GroupError> {
        let slot = self.cache.slot(g);
        let decoded = slot
            .get_or_init(|| self.decode(&self.groups[g as usize]).map(Arc::new))
            .clone();
        self.cache.read_one(g);
        decoded
    }

    fn decode(&self, group: &Group) -> Result<Decoded, GroupError> {
        self.decoded
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let file = &self.files[group.file as usize];
        let span = file
            .span(group.range, self.store.as_ref())
            .map_err(|e| e.in_group(group.number))?;
        let metadata = file.metadata.as_ref().expect("read when opened");
        hf::guarded(|| read_images(span, metadata.metadata(), group.number, self.columns.image))
            .map_err(|e| e.in_group(group.number))
    }
}

impl ParquetFile {
    fn new(path: PathBuf, store: Option<&Store>) -> std::io::Result<Self> {
        let remote = match store {
            None => {
                File::open(&path)?;
                None
            }
            Some(store) => {
                let url = path.to_string_lossy();
                let object = store
                    .remote
                    .object_path(&url)
                    .map_err(std::io::Error::other)?;
                let size = store.remote.size(&object).map_err(|e| match e {
                    object_store::Error::NotFound { .. } => std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("{url} is not in the store"),
                    ),
                    e => std::io::Error::other(e),
                })?;
                let cached = store.cache.as_ref().map(|(dir, _)| {
                    Arc::new(CachedShard::new(remote::cache_file(dir, &url), size))
                });
                Some(RemoteFile {
                    object,
                    size,
                    cached,
                })
            }
        };
        Ok(Self {
            path,
            metadata: None,
            map: OnceLock::new(),
            remote,
        })
    }

    /// The file's footer: read from the file's end (one request for a remote file when the
    /// footer fits in its last 64 KiB, else two).
    fn footer(&self, store: Option<&Store>) -> Result<ArrowReaderMetadata, ParquetError> {
        let size = self.len();
        let mut want = size.min(64 << 10);
        let metadata = loop {
            let span = self
                .span((size - want, size), store)
                .map_err(|e| ParquetError::General(e.to_string()))?;
            let mut reader = ParquetMetaDataReader::new();
            match reader.try_parse_sized(&span, size) {
                Ok(()) => break reader.finish()?,
                Err(ParquetError::NeedMoreData(n)) if (n as u64) > want && (n as u64) <= size => {
                    want = n as u64;
                }
                Err(e) => return Err(e),
            }
        };
        ArrowReaderMetadata::try_new(Arc::new(metadata), ArrowReaderOptions::new())
    }

    fn len(&self) -> u64 {
        match &self.remote {
            Some(r) => r.size,
            None => std::fs::metadata(&self.path).map_or(0, |m| m.len()),
        }
    }

    /// Bytes `start..end` of the file: a slice of its map (a local file, or the cached copy
    /// of a remote one), or one ranged request (starting the file's download into the cache).
    fn span(&self, (start, end): (u64, u64), store: Option<&Store>) -> Result<Span, GroupError> {
        let local = match (&self.remote, store) {
            (None, _) => true,
            (Some(r), Some(store)) => {
                let cached = r.cached.as_ref().is_some_and(|c| c.is_cached());
                if !cached {
                    if let (Some(c), Some((_, budget))) = (&r.cached, &store.cache) {
                        store
                            .remote
                            .cache_in_background(c, budget, &r.object, r.size);
                    }
                    let mut buf = Vec::new();
                    store
                        .remote
                        .read_range(&r.object, start..end, &mut buf)
                        .map_err(|e| GroupError::Io(e.to_string()))?;
                    if (buf.len() as u64) < end - start {
                        return Err(GroupError::Io(format!(
                            "the file is truncated: bytes {start}..{end} asked, {} given",
                            buf.len()
                        )));
                    }
                    return Ok(Span {
                        start,
                        bytes: Bytes::from(buf),
                    });
                }
                store.remote.count_cache_hit();
                true
            }
            (Some(_), None) => false,
        };
        if !local {
            return Err(GroupError::Io("no store for a remote file".into()));
        }
        let data = self.mapped()?;
        if end > data.len() as u64 || start > end {
            return Err(GroupError::Io(format!(
                "the file is truncated: bytes {start}..{end} asked, the file has {}",
                data.len()
            )));
        }
        Ok(Span {
            start,
            bytes: data.slice(start as usize..end as usize),
        })
    }

    /// The whole file, mapped read-only on first use and kept: a row group's column chunks
    /// are then decoded from the page cache without a copy into a buffer first.
    fn mapped(&self) -> Result<Bytes, GroupError> {
        self.map
            .get_or_init(|| {
                let local = match &self.remote {
                    Some(r) => r.cached.as_ref().map_or(&self.path, |c| &c.file),
                    None => &self.path,
                };
                let file = File::open(local)?;
                if file.metadata()?.len() == 0 {
                    return Err(GroupError::Io("the file is empty".into()));
                }
                // SAFETY: a read-only private map of a dataset file. If another process
                // truncates the file while it is mapped, touching the lost pages raises
                // SIGBUS (as for `ReadMode::Mmap`); dataset files are not rewritten during
                // training, and a file already short when opened fails on its footer or here.
                let map = unsafe { memmap2::Mmap::map(&file) }?;
                Ok(Bytes::from_owner(map))
            })
            .clone()
    }
}

/// The Parquet files `spec` names.
fn parquet_files(spec: &str) -> Result<Vec<PathBuf>, Error> {
    let dir = Path::new(spec);
    if dir.is_dir() {
        let mut files = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            let read = std::fs::read_dir(&d).map_err(|source| Error::Io {
                path: d.clone(),
                source,
            })?;
            for e in read.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "parquet") {
                    files.push(p);
                }
            }
        }
        super::sort_like_python(&mut files);
        if files.is_empty() {
            return Err(Error::EmptyDataset {
                path: dir.to_path_buf(),
                what: "Parquet files (*.parquet)",
            });
        }
        return Ok(files);
    }
    let names = expand_braces(spec)
        .map_err(|reason| Error::config("data", format!("pattern {spec:?}: {reason}")))?;
    let mut files = Vec::new();
    for name in names {
        if name.contains(['*', '?']) {
            let mut found = glob_files(&name)?;
            if found.is_empty() {
                return Err(Error::EmptyDataset {
                    path: PathBuf::from(&name),
                    what: "files matching the pattern",
                });
            }
            files.append(&mut found);
        } else {
            files.push(PathBuf::from(name));
        }
    }
    Ok(files)
}

/// The block-shuffled order over `groups` (each `(first sample, rows)`): groups in a seeded
/// random order, cut into windows of at least `window_rows` rows, rows shuffled within each.
pub fn block_order(
    groups: &[(usize, usize)],
    window_rows: usize,
    seed: u64,
    epoch: u64,
) -> Vec<u32> {
    let mut perm: Vec<usize> = (0..groups.len()).collect();
    let mut rng = CounterRng::new(seed, epoch, u64::MAX, Stream::Blocks);
    for i in (1..perm.len()).rev() {
        perm.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let total: usize = groups.iter().map(|g| g.1).sum();
    let mut order = Vec::with_capacity(total);
    let (mut window, mut start) = (0u64, 0usize);
    for (k, &g) in perm.iter().enumerate() {
        let (first, rows) = groups[g];
        order.extend((first..first + rows).map(|i| i as u32));
        if order.len() - start >= window_rows || k + 1 == perm.len() {
            let mut rng = CounterRng::new(seed, epoch, window, Stream::Blocks);
            let w = &mut order[start..];
            for i in (1..w.len()).rev() {
                w.swap(i, rng.below(i as u64 + 1) as usize);
            }
            start = order.len();
            window += 1;
        }
    }
    order
}

impl Source for ParquetDataset {
    fn listing(&self) -> &Listing {
        &self.listing
    }

    fn shuffled_order(&self, seed: u64, epoch: u64) -> Option<Vec<u32>> {
        let groups: Vec<(usize, usize)> = self.groups.iter().map(|g| (g.first, g.rows)).collect();
        Some(block_order(&groups, self.window_rows, seed, epoch))
    }

    fn storage(&self) -> Option<StorageReport> {
        self.store.as_ref().map(|s| s.remote.report())
    }

    fn plan_reads(&self, indices: &mut dyn Iterator<Item = usize>) {
        let mut left: HashMap<u32, usize> = HashMap::new();
        for i in indices {
            if let Some(&(g, _)) = self.rows.get(i) {
                *left.entry(g).or_default() += 1;
            }
        }
        self.cache.plan(left);
    }

    fn read<'a>(
        &self,
        index: usize,
        _mode: ReadMode,
        buf: &'a mut Vec<u8>,
    ) -> std::io::Result<SampleBytes<'a>> {
        let (g, r) = self.rows[index];
        fn invalid(why: impl Into<GroupError>) -> std::io::Error {
            std::io::Error::new(std::io::ErrorKind::InvalidData, why.into())
        }
        if let Some(why) = self.unlabelled.get(&index) {
            return Err(invalid(why.clone()));
        }
        let group = self.group(g).map_err(invalid)?;
        match group.cell(r as usize).map_err(invalid)? {
            ImageCell::Bytes(b) => {
                buf.clear();
                buf.extend_from_slice(b);
                Ok(SampleBytes::Buffer(buf))
            }
            ImageCell::Path(p) => {
                let folder = self.files[self.groups[g as usize].file as usize]
                    .path
                    .parent()
                    .unwrap_or(Path::new(""));
                super::read_file(&folder.join(p), ReadMode::Read, buf)
            }
            ImageCell::Null => Err(invalid(TableError::NullImage)),
        }
    }
}

/// Whether `spec` names Parquet files (for `--data`).
///
/// A folder counts when it holds `.parquet` files itself or in a `data/` subfolder (the hub's
/// layout), so telling an ImageFolder apart never walks its whole tree.
pub fn is_parquet_spec(spec: &str) -> bool {
    let path = Path::new(spec);
    if path.is_dir() {
        let has = |dir: &Path| {
            std::fs::read_dir(dir).is_ok_and(|mut d| {
                d.any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == "parquet")))
            })
        };
        let data = path.join("data");
        return has(path) || (data.is_dir() && parquet_files(&data.to_string_lossy()).is_ok());
    }
    spec.ends_with(".parquet")
}
