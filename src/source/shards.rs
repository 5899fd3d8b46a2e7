//! WebDataset shards: POSIX tar files whose consecutive members with the same key (the member's
//! path up to the first dot of its file name) form one sample; the rest of the name is the
//! field (`jpg`, `cls`, ...). A sidecar index per shard (`<shard>.idx`) records where each
//! sample's image lies, so samples are read by random access (one positioned read each) and the
//! global order stays a pure function of `(seed, epoch)`, exactly as for a folder.
//!
//! The index is written by `hpuload make-shards`, and built on the fly (then saved next to the
//! shard when the folder is writable) for shards that have none or whose index no longer
//! matches the shard's size.
//!
//! Shards named by URL (`s3://`, `gs://`, `az://`, `http(s)://`) are read from object storage
//! (see [`super::remote`]): their indexes are fetched (or, when missing, the shard is
//! downloaded and indexed locally), each sample is one ranged request, and whole shards are
//! downloaded in the background into a local cache that later reads use.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use super::remote::{self, CacheBudget, CachedShard, Remote, RemoteOptions, StorageReport};
use super::{Entry, Listing, ReadMode, SampleBytes, Source};
use crate::Error;

/// Fields that hold the image, in order of preference.
pub const IMAGE_FIELDS: &[&str] = &["jpg", "jpeg", "png", "webp"];

/// The first line of an index file, before the shard's size and the label field.
const INDEX_MAGIC: &str = "hpuload-shard-index 1";

/// How a sample's failure begins when its shard ends inside it.
const TRUNCATED: &str = "the shard is truncated";

/// A dataset of WebDataset tar shards, on the local filesystem or on object storage.
#[derive(Debug)]
pub struct WebDataset {
    listing: Listing,
    locations: Vec<Location>,
    shards: Vec<PathBuf>,
    remote: Option<RemoteShards>,
}

/// How shards are opened.
#[derive(Clone, Debug)]
pub struct ShardOptions {
    /// The field whose member holds the label (a decimal integer, as WebDataset's `.cls`).
    /// Empty: the samples have no labels (every label is -1), as for a detection dataset's
    /// images, whose targets come from elsewhere.
    pub label_field: String,
    /// How shards named by URL are read.
    pub remote: RemoteOptions,
}

impl Default for ShardOptions {
    fn default() -> Self {
        Self {
            label_field: "cls".into(),
            remote: RemoteOptions::default(),
        }
    }
}

/// The shards of a dataset on object storage.
#[derive(Debug)]
struct RemoteShards {
    remote: Remote,
    objects: Vec<object_store::path::Path>,
    /// The shards' sizes when indexed.
    sizes: Vec<u64>,
    cache: Option<ShardCache>,
    /// Reads started by [`Source::prefetch`], by sample index, until a worker collects them.
    pending: std::sync::Mutex<std::collections::HashMap<usize, remote::PendingRead>>,
    read_ahead: usize,
}

struct ShardCache {
    shards: Vec<Arc<CachedShard>>,
    budget: Arc<CacheBudget>,
}

impl std::fmt::Debug for ShardCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardCache")
            .field("shards", &self.shards.len())
            .finish()
    }
}

/// Where a sample's image lies, or why it has none.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Location {
    Member { shard: u32, offset: u64, len: u64 },
    Missing(String),
}

/// One sample of a shard's index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexedSample {
    /// The sample's key (member path up to the first dot of the file name).
    pub key: String,
    /// The image member's name.
    pub member: String,
    /// Offset of the image member's data in the shard.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
    /// The label, or why there is none usable (no label member, not an integer, no image).
    pub label: Result<i64, String>,
}

impl WebDataset {
    /// Opens the shards named by `spec`: one tar file, or a brace pattern such as
    /// `train-{000000..000146}.tar` (numeric ranges keep their zero padding; `{a,b}` lists
    /// work too). Labels come from the `cls` field.
    ///
    /// # Errors
    /// A malformed pattern, a shard that cannot be opened or is not a tar file (naming it), or
    /// no samples at all.
    pub fn open(spec: &str) -> Result<Self, Error> {
        Self::open_with_label(spec, "cls")
    }

    /// Like [`WebDataset::open`], with labels read from the member whose field is
    /// `label_field` (its content: a decimal integer, as WebDataset's `.cls`).
    ///
    /// # Errors
    /// As [`WebDataset::open`].
    pub fn open_with_label(spec: &str, label_field: &str) -> Result<Self, Error> {
        Self::open_with(
            spec,
            &ShardOptions {
                label_field: label_field.into(),
                ..ShardOptions::default()
            },
        )
    }

    /// Like [`WebDataset::open`], with every setting given. `spec` may be a URL
    /// (`s3://bucket/train-{000000..000146}.tar`, `gs://`, `az://`, `http(s)://`): the shards
    /// are then read from object storage as `options.remote` says.
    ///
    /// # Errors
    /// As [`WebDataset::open`]; for URLs also a store that cannot be configured, and an index
    /// or shard that cannot be fetched (naming its URL).
    pub fn open_with(spec: &str, options: &ShardOptions) -> Result<Self, Error> {
        let names = expand_braces(spec)
            .map_err(|reason| Error::config("shards", format!("pattern {spec:?}: {reason}")))?;
        Self::open_names(names, remote::is_remote(spec), options)
    }

    /// The `.tar` files directly in `dir`, sorted, as shards.
    ///
    /// # Errors
    /// As [`WebDataset::open`]; a folder without `.tar` files is an empty dataset.
    pub fn open_folder(dir: &Path, options: &ShardOptions) -> Result<Self, Error> {
        let names = tar_files(dir)?;
        if names.is_empty() {
            return Err(Error::EmptyDataset {
                path: dir.to_path_buf(),
                what: "tar shards (*.tar)",
            });
        }
        let names = names
            .into_iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        Self::open_names(names, false, options)
    }

    fn open_names(names: Vec<String>, remote: bool, options: &ShardOptions) -> Result<Self, Error> {
        if u32::try_from(names.len()).is_err() {
            return Err(Error::config("shards", "more than 2^32 shards".to_string()));
        }
        let label_field = options.label_field.as_str();
        let (indexes, remote) = if remote {
            let (indexes, remote) = RemoteShards::open(&names, options)?;
            (indexes, Some(remote))
        } else {
            let indexes = names
                .iter()
                .map(|name| load_or_build_index(Path::new(name), label_field))
                .collect::<Result<Vec<_>, _>>()?;
            (indexes, None)
        };
        let shards: Vec<PathBuf> = names.into_iter().map(PathBuf::from).collect();
        let (mut entries, mut locations) = (Vec::new(), Vec::new());
        for (i, (shard, samples)) in shards.iter().zip(indexes).enumerate() {
            let shard_id = i as u32; // checked above
            for s in samples {
                let path = shard.join(if s.member.is_empty() {
                    &s.key
                } else {
                    &s.member
                });
                let (label, location) = match (s.label, s.len) {
                    (Ok(label), len) if !s.member.is_empty() => (
                        label,
                        Location::Member {
                            shard: shard_id,
                            offset: s.offset,
                            len,
                        },
                    ),
                    (Ok(label), _) => (
                        label,
                        Location::Missing("the sample has no image member".into()),
                    ),
                    (Err(why), _) => (-1, Location::Missing(why)),
                };
                entries.push(Entry { path, label });
                locations.push(location);
            }
        }
        let origin = shards.first().cloned().unwrap_or_default();
        if entries.is_empty() {
            return Err(Error::EmptyDataset {
                path: origin,
                what: "samples in the shards",
            });
        }
        Ok(Self {
            listing: Listing::of_records(origin, entries, Vec::new()),
            locations,
            shards,
            remote,
        })
    }

    /// The shard files (or URLs), in order.
    pub fn shards(&self) -> &[PathBuf] {
        &self.shards
    }

    /// Each sample with an image member: its index and the member's path inside its shard.
    pub(crate) fn image_members(&self) -> impl Iterator<Item = (usize, &Path)> {
        self.locations
            .iter()
            .zip(&self.listing.entries)
            .enumerate()
            .filter_map(|(i, (location, entry))| match location {
                Location::Member { shard, .. } => entry
                    .path
                    .strip_prefix(&self.shards[*shard as usize])
                    .ok()
                    .map(|member| (i, member)),
                Location::Missing(_) => None,
            })
    }
}

impl RemoteShards {
    /// Connects to the store, and fetches (or builds) every shard's index.
    fn open(
        urls: &[String],
        options: &ShardOptions,
    ) -> Result<(Vec<Vec<IndexedSample>>, Self), Error> {
        let label_field = options.label_field.as_str();
        let (remote, _) = Remote::connect(&urls[0], &options.remote)?;
        let objects = urls
            .iter()
            .map(|u| remote.object_path(u))
            .collect::<Result<Vec<_>, _>>()?;
        let index_objects = urls
            .iter()
            .map(|u| remote.object_path(&format!("{u}.idx")))
            .collect::<Result<Vec<_>, _>>()?;
        let cache_dir =
            options
                .remote
                .cache
                .as_ref()
                .and_then(|c| match std::fs::create_dir_all(&c.dir) {
                    Ok(()) => Some(c),
                    Err(e) => {
                        tracing::warn!(
                            "shard cache {} unusable ({e}): reading every sample from the store",
                            c.dir.display()
                        );
                        None
                    }
                });
        let fetched = remote.get_optional(&index_objects);
        let (mut indexes, mut sizes) = (Vec::new(), Vec::new());
        for ((url, object), index) in urls.iter().zip(&objects).zip(fetched) {
            let fetched = index.map_err(|e| Error::Io {
                path: PathBuf::from(format!("{url}.idx")),
                source: std::io::Error::other(e),
            })?;
            let local_index = cache_dir.map(|c| index_path(&remote::cache_file(&c.dir, url)));
            let parsed = fetched
                .and_then(|bytes| parse_index(&bytes[..], label_field))
                .or_else(|| {
                    local_index
                        .as_deref()
                        .and_then(|p| read_index(p, label_field))
                });
            let (size, samples) = match parsed {
                Some(found) => found,
                None => build_remote_index(&remote, url, object, label_field, cache_dir)?,
            };
            indexes.push(samples);
            sizes.push(size);
        }
        let cache = cache_dir.map(|c| {
            let shards: Vec<Arc<CachedShard>> = urls
                .iter()
                .zip(&sizes)
                .map(|(url, &size)| {
                    Arc::new(CachedShard::new(remote::cache_file(&c.dir, url), size))
                })
                .collect();
            remote.count_cached_shards(shards.iter().filter(|s| s.is_cached()).count() as u64);
            ShardCache {
                shards,
                budget: Arc::new(CacheBudget::new(c)),
            }
        });
        Ok((
            indexes,
            Self {
                remote,
                objects,
                sizes,
                cache,
                pending: std::sync::Mutex::default(),
                read_ahead: options.remote.read_ahead,
            },
        ))
    }

    /// Reads one member straight into `dst` when its shard is in the cache (a read-ahead
    /// request for it is dropped unsent or cancelled); `Ok(None)` otherwise, for `read`.
    fn read_cached_into(
        &self,
        index: usize,
        (shard, offset, len): (u32, u64, u64),
        dst: &mut [u8],
    ) -> std::io::Result<Option<usize>> {
        let Some(cache) = &self.cache else {
            return Ok(None);
        };
        let cached = &cache.shards[shard as usize];
        match usize::try_from(len) {
            Ok(n) if n <= dst.len() && cached.is_cached() => {
                self.pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&index);
                cached.read_at(offset, &mut dst[..n])?;
                self.remote.count_cache_hit();
                Ok(Some(n))
            }
            _ => Ok(None),
        }
    }

    /// Reads one member: from the cached copy of its shard when there is one; otherwise by a
    /// ranged request, after starting the shard's download into the cache.
    fn read(
        &self,
        index: usize,
        (shard, offset, len): (u32, u64, u64),
        url: &Path,
        buf: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        let shard = shard as usize;
        let range = offset..offset + len;
        let pending = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&index);
        if let Some(cache) = &self.cache {
            let cached = &cache.shards[shard];
            if cached.is_cached() {
                cached.read(range, buf)?;
                self.remote.count_cache_hit();
                return Ok(());
            }
            self.start_download(cache, shard);
        }
        let fetched = match pending.map(|p| self.remote.finish_read(p, buf)) {
            Some(Ok(true)) => Ok(()),
            // Not sent: the shard landed in the cache while the read waited for its turn.
            Some(Ok(false)) => {
                let cache = self.cache.as_ref().expect("only cached shards skip reads");
                cache.shards[shard].read(range, buf)?;
                self.remote.count_cache_hit();
                return Ok(());
            }
            Some(Err(e)) => Err(e),
            None => self.remote.read_range(&self.objects[shard], range, buf),
        };
        let truncated = |size: u64| {
            std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "the shard is truncated: the member's {len} bytes at offset {offset} end past \
                     the {size} bytes of {}",
                    url.display()
                ),
            )
        };
        match fetched {
            Ok(()) if buf.len() as u64 == len => Ok(()),
            Ok(()) => Err(truncated(offset + buf.len() as u64)),
            Err(object_store::Error::NotFound { .. }) => Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} is not in the store", url.display()),
            )),
            // Past the object's end (416, or a short answer): say so, as for a local shard.
            Err(e) => match self.remote.size(&self.objects[shard]) {
                Ok(size) if size < offset + len => Err(truncated(size)),
                _ => Err(std::io::Error::other(e)),
            },
        }
    }

    /// Starts the requests of the samples in `locations` (by sample index) whose shards are
    /// not cached, up to `read_ahead` waiting at once.
    fn prefetch(&self, locations: impl Iterator<Item = (usize, (u32, u64, u64))>) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        for (index, (shard, offset, len)) in locations {
            if pending.len() >= self.read_ahead {
                break;
            }
            let shard = shard as usize;
            if let Some(cache) = &self.cache {
                if cache.shards[shard].is_cached() {
                    continue;
                }
                self.start_download(cache, shard);
            }
            let cached = self.cache.as_ref().map(|c| Arc::clone(&c.shards[shard]));
            pending.entry(index).or_insert_with(|| {
                self.remote
                    .start_read(&self.objects[shard], offset..offset + len, cached)
            });
        }
    }

    fn start_download(&self, cache: &ShardCache, shard: usize) {
        self.remote.cache_in_background(
            &cache.shards[shard],
            &cache.budget,
            &self.objects[shard],
            self.sizes[shard],
        );
    }
}

/// Indexes a shard that has no usable index in the store: downloads it (into the cache when
/// there is one, else a temporary file), indexes the local copy, and keeps the index in the
/// cache.
fn build_remote_index(
    remote: &Remote,
    url: &str,
    object: &object_store::path::Path,
    label_field: &str,
    cache: Option<&remote::CacheOptions>,
) -> Result<(u64, Vec<IndexedSample>), Error> {
    tracing::info!("{url} has no index: downloading it to build one");
    let local = match cache {
        Some(c) => remote::cache_file(&c.dir, url),
        None => std::env::temp_dir().join(format!(
            "hpuload-index-{}-{}",
            std::process::id(),
            url.rsplit('/').next().unwrap_or("shard")
        )),
    };
    let size = remote
        .download(object, &local)
        .map_err(|source| Error::Io {
            path: PathBuf::from(url),
            source,
        })?;
    let built = build_index(&local, label_field).map_err(|e| match e {
        Error::Io { source, .. } => Error::Io {
            path: PathBuf::from(url),
            source,
        },
        other => other,
    });
    if cache.is_some() {
        if let Ok(samples) = &built {
            if let Err(e) = write_index(&index_path(&local), size, label_field, samples) {
                tracing::debug!("could not keep the index of {url}: {e}");
            }
        }
    } else {
        let _ = std::fs::remove_file(&local);
    }
    Ok((size, built?))
}

impl Source for WebDataset {
    fn listing(&self) -> &Listing {
        &self.listing
    }

    fn prefetch(&self, indices: &[usize]) {
        if let Some(remote) = &self.remote {
            remote.prefetch(indices.iter().filter_map(|&i| match self.locations.get(i) {
                Some(&Location::Member { shard, offset, len }) => Some((i, (shard, offset, len))),
                _ => None,
            }));
        }
    }

    fn storage(&self) -> Option<StorageReport> {
        self.remote.as_ref().map(|r| r.remote.report())
    }

    fn read<'a>(
        &self,
        index: usize,
        _mode: ReadMode,
        buf: &'a mut Vec<u8>,
    ) -> std::io::Result<SampleBytes<'a>> {
        let (shard, offset, len) = self.member(index)?;
        let path = &self.shards[shard as usize];
        if let Some(remote) = &self.remote {
            remote.read(index, (shard, offset, len), path, buf)?;
            return Ok(SampleBytes::Buffer(buf));
        }
        let n = usize::try_from(len).map_err(std::io::Error::other)?;
        buf.clear();
        buf.resize(n, 0);
        read_member(path, offset, buf, "shard")?;
        Ok(SampleBytes::Buffer(buf))
    }

    /// A member that fits is read straight into `dst` (one `pread`) from a local shard, or from
    /// the cached copy of a remote one; bytes that come over the network arrive in buffers of
    /// their own, so those go through `read`.
    fn read_into(
        &self,
        index: usize,
        _mode: ReadMode,
        dst: &mut [u8],
    ) -> std::io::Result<Option<usize>> {
        let (shard, offset, len) = self.member(index)?;
        if let Some(remote) = &self.remote {
            return remote.read_cached_into(index, (shard, offset, len), dst);
        }
        match usize::try_from(len) {
            Ok(n) if n <= dst.len() => {
                read_member(&self.shards[shard as usize], offset, &mut dst[..n], "shard")?;
                Ok(Some(n))
            }
            _ => Ok(None),
        }
    }
}

impl WebDataset {
    /// Where sample `index` lies: its shard, offset and length, or why it has none.
    fn member(&self, index: usize) -> std::io::Result<(u32, u64, u64)> {
        match &self.locations[index] {
            Location::Member { shard, offset, len } => Ok((*shard, *offset, *len)),
            Location::Missing(why) => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                why.clone(),
            )),
        }
    }
}

/// Reads `dst.len()` bytes of the local file at `path` from `offset`; a file that ends before
/// them is reported as truncated, naming it as `what` (a shard, an Arrow file).
pub(super) fn read_member(
    path: &Path,
    offset: u64,
    dst: &mut [u8],
    what: &str,
) -> std::io::Result<()> {
    let file = File::open(path)?;
    match file.read_exact_at(dst, offset) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            let len = dst.len();
            let size = file.metadata().map_or(0, |m| m.len());
            Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "the {what} is truncated: the member's {len} bytes at offset {offset} end \
                     past its {size} bytes"
                ),
            ))
        }
        Err(e) => Err(e),
    }
}

/// The `.tar` files directly in `dir`, sorted (empty when there are none).
///
/// # Errors
/// The folder cannot be listed.
pub fn tar_files(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    super::files_in(dir, |p| {
        p.is_file() && p.extension().is_some_and(|x| x == "tar")
    })
}

/// The index file that belongs to `shard`.
pub fn index_path(shard: &Path) -> PathBuf {
    let mut name = shard.as_os_str().to_owned();
    name.push(".idx");
    PathBuf::from(name)
}

fn load_or_build_index(shard: &Path, label_field: &str) -> Result<Vec<IndexedSample>, Error> {
    let io = |source| Error::Io {
        path: shard.to_path_buf(),
        source,
    };
    let size = std::fs::metadata(shard).map_err(io)?.len();
    match read_index(&index_path(shard), label_field) {
        Some((indexed, samples)) if indexed == size => return Ok(samples),
        // Shorter than when it was indexed, and still the same shard where it begins: cut
        // short. Keep the index, so each sample past the cut fails by name when read instead
        // of vanishing from the dataset.
        Some((indexed, samples)) if indexed > size && starts_as_indexed(shard, &samples) => {
            tracing::warn!(
                "{} is {size} bytes, {indexed} when indexed: truncated; its samples past the cut \
                 will fail when read",
                shard.display()
            );
            return Ok(samples);
        }
        _ => {}
    }
    let samples = build_index(shard, label_field)?;
    // Best effort: a read-only dataset folder still works, it only indexes again next time.
    if let Err(e) = write_index(&index_path(shard), size, label_field, &samples) {
        tracing::debug!("could not save the index of {}: {e}", shard.display());
    }
    Ok(samples)
}

/// Scans a shard's tar headers (the data is skipped by seeking) and groups members into samples.
///
/// # Errors
/// The shard cannot be read or is not a valid tar file.
pub fn build_index(shard: &Path, label_field: &str) -> Result<Vec<IndexedSample>, Error> {
    let bad = |reason: String| Error::Format {
        path: shard.to_path_buf(),
        reason,
    };
    let file = File::open(shard).map_err(|source| Error::Io {
        path: shard.to_path_buf(),
        source,
    })?;
    let shard_len = file
        .metadata()
        .map_err(|source| Error::Io {
            path: shard.to_path_buf(),
            source,
        })?
        .len();
    let mut archive = tar::Archive::new(BufReader::new(file));
    let entries = archive
        .entries_with_seek()
        .map_err(|e| bad(format!("not a tar file: {e}")))?;
    let mut samples: Vec<IndexedSample> = Vec::new();
    let mut label_text: Option<Vec<u8>> = None;
    for entry in entries {
        let mut entry = match entry {
            Ok(entry) => entry,
            // Nothing readable at all: not a tar file. Past some samples: a damaged tail,
            // which fails the sample it cuts through, not the whole dataset.
            Err(e) if samples.is_empty() => return Err(bad(format!("not a valid tar file: {e}"))),
            Err(e) => {
                tracing::warn!(
                    "{}: unreadable after {} samples: {e}",
                    shard.display(),
                    samples.len()
                );
                break;
            }
        };
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let end = entry.raw_file_position().saturating_add(entry.size());
        if end > shard_len {
            let (key, _) = split_key(&name);
            if samples.last().is_none_or(|s| s.key != key) {
                samples.push(IndexedSample {
                    key: key.to_string(),
                    member: String::new(),
                    offset: 0,
                    len: 0,
                    label: Ok(-1),
                });
            }
            let last = samples.last_mut().expect("pushed above");
            last.label = Err(format!(
                "{TRUNCATED}: member {name} ends at byte {end}, past the shard's \
                 {shard_len} bytes"
            ));
            label_text = None;
            break;
        }
        let (key, field) = split_key(&name);
        if samples.last().is_none_or(|s| s.key != key) {
            if let Some(last) = samples.last_mut() {
                finish_label(last, label_text.take(), label_field);
            }
            samples.push(IndexedSample {
                key: key.to_string(),
                member: String::new(),
                offset: 0,
                len: 0,
                label: if label_field.is_empty() {
                    Ok(-1)
                } else {
                    Err(format!("the sample has no .{label_field} member"))
                },
            });
        }
        let sample = samples.last_mut().expect("pushed above");
        let field = field.to_ascii_lowercase();
        if !label_field.is_empty() && field == label_field {
            let mut text = Vec::new();
            std::io::Read::read_to_end(&mut std::io::Read::take(&mut entry, 64), &mut text)
                .map_err(|e| bad(format!("reading {name}: {e}")))?;
            label_text = Some(text);
        } else if IMAGE_FIELDS.contains(&field.as_str()) && sample.member.is_empty() {
            sample.member = name.clone();
            sample.offset = entry.raw_file_position();
            sample.len = entry.size();
        }
    }
    if let Some(last) = samples.last_mut() {
        if last
            .label
            .as_ref()
            .is_err_and(|why| why.starts_with(TRUNCATED))
        {
            return Ok(samples);
        }
        finish_label(last, label_text.take(), label_field);
    }
    Ok(samples)
}

fn finish_label(sample: &mut IndexedSample, text: Option<Vec<u8>>, label_field: &str) {
    if let Some(text) = text {
        let text = String::from_utf8_lossy(&text);
        sample.label = text.trim().parse::<i64>().map_err(|_| {
            format!(
                "the .{label_field} member is not an integer: {:?}",
                text.trim()
            )
        });
    }
}

/// Whether a member named `name` is a sample's image: its field (what follows the first dot
/// of its file name) is one of [`IMAGE_FIELDS`], in any case.
pub fn is_image_member(name: &str) -> bool {
    let field = split_key(name).1.to_ascii_lowercase();
    IMAGE_FIELDS.contains(&field.as_str())
}

/// `dir/abc.seg.jpg` -> (`dir/abc`, `seg.jpg`): the key ends at the first dot of the file name.
fn split_key(name: &str) -> (&str, &str) {
    let base = name.rfind('/').map_or(0, |i| i + 1);
    match name[base..].find('.') {
        Some(dot) => (&name[..base + dot], &name[base + dot + 1..]),
        None => (name, ""),
    }
}

/// Whether the shard's first indexed member is still where the index says (its tar header,
/// just before its data, names it).
fn starts_as_indexed(shard: &Path, samples: &[IndexedSample]) -> bool {
    let Some(first) = samples.iter().find(|s| !s.member.is_empty()) else {
        return false;
    };
    let mut header = [0u8; 100];
    let Some(at) = first.offset.checked_sub(512) else {
        return false;
    };
    let read = File::open(shard).and_then(|f| f.read_exact_at(&mut header, at));
    let name = first
        .member
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .as_bytes();
    // An empty name (a member "dir/") or one longer than the header's name field cannot be
    // checked this way: then the index is not trusted.
    read.is_ok()
        && (1..=header.len()).contains(&name.len())
        && header.windows(name.len()).any(|w| w == name)
}

/// The shard size an index was made for, and its samples.
fn read_index(path: &Path, label_field: &str) -> Option<(u64, Vec<IndexedSample>)> {
    parse_index(BufReader::new(File::open(path).ok()?), label_field)
}

/// [`read_index`] from the index's bytes; `None` for a damaged index or another label field.
/// Without a label field (samples without labels) any index serves, its labels dropped.
fn parse_index(text: impl BufRead, label_field: &str) -> Option<(u64, Vec<IndexedSample>)> {
    let mut lines = text.lines();
    let header = lines.next()?.ok()?;
    let rest = header.strip_prefix(INDEX_MAGIC)?.trim_start();
    let (size, field) = rest.split_once(' ')?;
    let unlabelled = label_field.is_empty();
    if field != label_field && !unlabelled {
        return None;
    }
    let shard_size: u64 = size.parse().ok()?;
    let mut samples = Vec::new();
    for line in lines {
        let line = line.ok()?;
        let mut f = line.splitn(5, '\t');
        let (key, member, offset, len, label) =
            (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
        let label = match label.strip_prefix('!') {
            Some(why) => Err(unescape(why)?),
            None => Ok(label.parse().ok()?),
        };
        // Only a cut shard's failure is the image's; label failures are not.
        let label = match label {
            Err(why) if unlabelled && !why.starts_with(TRUNCATED) => Ok(-1),
            Ok(_) if unlabelled => Ok(-1),
            label => label,
        };
        let (offset, len): (u64, u64) = (offset.parse().ok()?, len.parse().ok()?);
        // An entry outside the shard it was made for is a damaged index: rebuild it (and never
        // size a read by it).
        if offset.checked_add(len)? > shard_size {
            return None;
        }
        samples.push(IndexedSample {
            key: unescape(key)?,
            member: unescape(member)?,
            offset,
            len,
            label,
        });
    }
    Some((shard_size, samples))
}

/// Writes `samples` as the index of a shard of `shard_size` bytes (atomically: a temporary
/// file renamed into place).
///
/// # Errors
/// The file cannot be written.
pub fn write_index(
    path: &Path,
    shard_size: u64,
    label_field: &str,
    samples: &[IndexedSample],
) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let mut out = std::io::BufWriter::new(File::create(&tmp)?);
    writeln!(out, "{INDEX_MAGIC} {shard_size} {label_field}")?;
    for s in samples {
        let label = match &s.label {
            Ok(l) => l.to_string(),
            Err(why) => format!("!{}", escape(why)),
        };
        writeln!(
            out,
            "{}\t{}\t{}\t{}\t{label}",
            escape(&s.key),
            escape(&s.member),
            s.offset,
            s.len
        )?;
    }
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// A name as one field of an index line: `%`, tab, newline and carriage return as `%XX`, so
/// any member name (tar allows them all) comes back unchanged.
fn escape(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains(['%', '\t', '\n', '\r']) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '\t' => out.push_str("%09"),
            '\n' => out.push_str("%0A"),
            '\r' => out.push_str("%0D"),
            c => out.push(c),
        }
    }
    out.into()
}

/// The inverse of [`escape`]; `None` for an escape it never writes (a damaged index).
fn unescape(field: &str) -> Option<String> {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 3)?;
        out.push(match code {
            "25" => '%',
            "09" => '\t',
            "0A" => '\n',
            "0D" => '\r',
            _ => return None,
        });
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// Expands brace patterns: `a-{00..03}.tar` -> `a-00.tar` .. `a-03.tar` (zero padding kept,
/// as wide as the first bound), `{x,y}` -> both; several braces multiply out, left to right.
///
/// # Errors
/// An unclosed brace or a range that is not two non-negative integers in increasing order.
pub fn expand_braces(pattern: &str) -> Result<Vec<String>, String> {
    let Some(open) = pattern.find('{') else {
        return Ok(vec![pattern.to_string()]);
    };
    let close = pattern[open..]
        .find('}')
        .map(|i| open + i)
        .ok_or_else(|| "an unclosed '{'".to_string())?;
    let (head, body, tail) = (
        &pattern[..open],
        &pattern[open + 1..close],
        &pattern[close + 1..],
    );
    let choices: Vec<String> = if let Some((a, b)) = body.split_once("..") {
        let (lo, hi) = (
            a.parse::<u64>()
                .map_err(|_| format!("range start {a:?} is not a number"))?,
            b.parse::<u64>()
                .map_err(|_| format!("range end {b:?} is not a number"))?,
        );
        if lo > hi {
            return Err(format!("range {a}..{b} runs backwards"));
        }
        if hi - lo > 10_000_000 {
            return Err(format!("range {a}..{b} names more than 10 million shards"));
        }
        let width = a.len();
        (lo..=hi).map(|n| format!("{n:0width$}")).collect()
    } else {
        body.split(',').map(str::to_string).collect()
    };
    let rest = expand_braces(tail)?;
    Ok(choices
        .iter()
        .flat_map(|c| rest.iter().map(move |r| format!("{head}{c}{r}")))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces_expand_ranges_with_padding_and_lists() {
        assert_eq!(expand_braces("a.tar").unwrap(), ["a.tar"]);
        assert_eq!(
            expand_braces("s-{008..011}.tar").unwrap(),
            ["s-008.tar", "s-009.tar", "s-010.tar", "s-011.tar"]
        );
        assert_eq!(
            expand_braces("{a,b}/x-{1..2}").unwrap(),
            ["a/x-1", "a/x-2", "b/x-1", "b/x-2"]
        );
        assert!(expand_braces("x-{1..").is_err());
        assert!(expand_braces("x-{3..1}").is_err());
        assert!(expand_braces("x-{a..b}").is_err());
    }

    #[test]
    fn an_index_whose_first_member_has_an_empty_name_is_not_trusted() {
        // Found by the `shards` fuzz target (crash-32b357ec...): a member named "x/" made the
        // header check search for an empty name, which panicked.
        let dir = std::env::temp_dir().join(format!("hpuload-empty-member-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let shard = dir.join("s.tar");
        std::fs::write(&shard, vec![0u8; 2048]).unwrap();
        let sample = IndexedSample {
            key: "x/".into(),
            member: "x/".into(),
            offset: 1024,
            len: 1,
            label: Ok(0),
        };
        assert!(!starts_as_indexed(&shard, &[sample]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn names_with_tabs_newlines_and_percents_round_trip_through_the_index() {
        // Found by the `shards` fuzz target (crash-d3f70011...): a tab in a member name was
        // written as a space, so the reopened shard named the sample differently.
        for name in [
            "plain.jpg",
            "a\tb.jpg",
            "line\nbreak%25.jpg",
            "100%.jpg",
            "\r%0A",
        ] {
            let escaped = escape(name);
            assert!(!escaped.contains(['\t', '\n', '\r']), "{escaped:?}");
            assert_eq!(unescape(&escaped).as_deref(), Some(name));
        }
        assert_eq!(unescape("bad%zz"), None);
        assert_eq!(unescape("cut%0"), None);
    }

    #[test]
    fn keys_end_at_the_first_dot_of_the_file_name() {
        assert_eq!(split_key("dir.v2/abc.seg.jpg"), ("dir.v2/abc", "seg.jpg"));
        assert_eq!(split_key("abc.cls"), ("abc", "cls"));
        assert_eq!(split_key("noext"), ("noext", ""));
        assert!(is_image_member("train2017/0009.JPG") && is_image_member("dir.v2/a.webp"));
        assert!(!is_image_member("a.v2.jpg") && !is_image_member("a.cls") && !is_image_member("a"));
    }
}
