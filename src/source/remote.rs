//! Shards on object storage (S3 and S3-compatible stores, GCS, Azure, plain HTTP), read through
//! the `object_store` crate: ranged GETs of single samples, a bounded number of requests in
//! flight, retries with backoff (object_store's, for connection errors, 5xx and stalled
//! bodies), and a local shard cache so that later epochs read from disk.
//!
//! The loader's worker threads are synchronous; they block on a small private tokio runtime
//! for each request. Credentials come from each store's usual environment variables
//! (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL`, `GOOGLE_APPLICATION_CREDENTIALS`,
//! `AZURE_STORAGE_ACCOUNT_NAME`, ...) through object_store's `from_env` builders, and are never
//! printed: this module's `Debug` shows the store's URL only.

use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, ObjectStoreScheme};
use url::Url;

use crate::Error;

/// How shards on object storage are read.
#[derive(Clone, Debug)]
pub struct RemoteOptions {
    /// Most sample requests in flight at once (shard downloads for the cache come on top, at
    /// most [`RemoteOptions::downloads`]).
    pub max_requests: usize,
    /// Shards downloaded into the cache at once.
    pub downloads: usize,
    /// Time limit of one request, body included: a stalled server fails the attempt, which is
    /// then retried.
    pub timeout: Duration,
    /// Time limit for opening a connection.
    pub connect_timeout: Duration,
    /// Retries of a failed request (connection errors, 5xx, timeouts, a body cut short), with
    /// exponential backoff from 100 ms; errors such as 404 or 403 are not retried.
    pub retries: usize,
    /// Most samples requested ahead of the workers (the loader names each batch's samples
    /// when it schedules it); their bytes wait in memory until read, so this bounds memory.
    pub read_ahead: usize,
    /// Where whole shards are kept once downloaded, or `None` to read every sample from the
    /// store.
    pub cache: Option<CacheOptions>,
}

/// The local shard cache.
#[derive(Clone, Debug)]
pub struct CacheOptions {
    /// The cache folder; one file per shard (and its index), named by a hash of its URL.
    pub dir: PathBuf,
    /// Most bytes of shards this dataset may add to the cache; `None`: half the free space of
    /// the cache's filesystem when the dataset is opened. Past it, shards are not cached and
    /// their samples keep being read by ranged requests.
    pub limit: Option<u64>,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        Self {
            max_requests: 64,
            downloads: 2,
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            retries: 5,
            read_ahead: 1024,
            cache: Some(CacheOptions {
                dir: crate::dataset::cache_root().join("shards"),
                limit: None,
            }),
        }
    }
}

/// What storage did for a dataset, summed since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StorageReport {
    /// Requests sent (sample ranges, indexes, shard downloads; not counting object_store's
    /// retries of a request).
    pub requests: u64,
    /// Bytes received from the store (samples, indexes and shard downloads).
    pub bytes_fetched: u64,
    /// Samples read from the local shard cache instead of the store.
    pub cache_hits: u64,
    /// Shards in the local cache.
    pub shards_cached: u64,
    /// Shard downloads that failed (their samples were read by ranged requests instead).
    pub download_failures: u64,
    /// Wall time the loader's workers spent waiting for sample requests, summed over workers
    /// (`wait_sec` in JSON).
    #[serde(rename = "wait_sec", serialize_with = "seconds")]
    pub wait: Duration,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl StorageReport {
    /// `self - earlier`, field by field (what an interval did).
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            requests: self.requests - earlier.requests,
            bytes_fetched: self.bytes_fetched - earlier.bytes_fetched,
            cache_hits: self.cache_hits - earlier.cache_hits,
            shards_cached: self.shards_cached - earlier.shards_cached,
            download_failures: self.download_failures - earlier.download_failures,
            wait: self.wait.saturating_sub(earlier.wait),
        }
    }
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    bytes: AtomicU64,
    cache_hits: AtomicU64,
    shards_cached: AtomicU64,
    download_failures: AtomicU64,
    wait_ns: AtomicU64,
}

/// A connection to one store (one bucket, container or HTTP origin).
pub(crate) struct Remote {
    store: Arc<dyn ObjectStore>,
    base: String,
    // Dropped after every task that borrows `store`: the runtime goes last (field order).
    requests: Arc<tokio::sync::Semaphore>,
    downloads: Arc<tokio::sync::Semaphore>,
    counters: Arc<Counters>,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the store itself: its configuration may hold credentials.
        f.debug_struct("Remote").field("base", &self.base).finish()
    }
}

/// Whether `spec` names object storage (`scheme://...`) rather than local files.
pub fn is_remote(spec: &str) -> bool {
    spec.split_once("://")
        .is_some_and(|(scheme, _)| scheme.chars().all(|c| c.is_ascii_alphanumeric()))
}

impl Remote {
    /// Connects to the store that holds `url` and returns the object path of `url` in it.
    pub(crate) fn connect(url: &str, options: &RemoteOptions) -> Result<(Self, Url), Error> {
        let bad = |reason: String| Error::config("shards", format!("{url}: {reason}"));
        let parsed = Url::parse(url).map_err(|e| bad(format!("not a URL: {e}")))?;
        let (scheme, _) = ObjectStoreScheme::parse(&parsed)
            .map_err(|e| bad(format!("not an object store URL: {e}")))?;
        let retry = object_store::RetryConfig {
            backoff: object_store::BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(5),
                base: 2.0,
            },
            max_retries: options.retries,
            retry_timeout: options.timeout * (options.retries as u32 + 1),
        };
        let client = object_store::ClientOptions::new()
            .with_timeout(options.timeout)
            .with_connect_timeout(options.connect_timeout)
            // http:// endpoints are allowed (a loopback S3 server, an HTTP mirror); https
            // stays https.
            .with_allow_http(true);
        let base = format!("{}://{}", parsed.scheme(), parsed.authority());
        let built: Result<Arc<dyn ObjectStore>, object_store::Error> = match scheme {
            ObjectStoreScheme::AmazonS3 => object_store::aws::AmazonS3Builder::from_env()
                .with_url(url)
                .with_retry(retry)
                .with_client_options(client)
                .build()
                .map(|s| Arc::new(s) as _),
            ObjectStoreScheme::GoogleCloudStorage => {
                object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_url(url)
                    .with_retry(retry)
                    .with_client_options(client)
                    .build()
                    .map(|s| Arc::new(s) as _)
            }
            ObjectStoreScheme::MicrosoftAzure => {
                object_store::azure::MicrosoftAzureBuilder::from_env()
                    .with_url(url)
                    .with_retry(retry)
                    .with_client_options(client)
                    .build()
                    .map(|s| Arc::new(s) as _)
            }
            ObjectStoreScheme::Http => object_store::http::HttpBuilder::new()
                .with_url(base.as_str())
                .with_retry(retry)
                .with_client_options(client)
                .build()
                .map(|s| Arc::new(s) as _),
            other => {
                return Err(bad(format!(
                    "{other:?} URLs are not read as object storage; give a local path instead"
                )))
            }
        };
        let store = built.map_err(|e| bad(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("hpuload-storage")
            .enable_all()
            .build()
            .map_err(|source| Error::ThreadStart {
                what: "storage",
                source,
            })?;
        Ok((
            Self {
                store,
                base,
                requests: Arc::new(tokio::sync::Semaphore::new(options.max_requests.max(1))),
                downloads: Arc::new(tokio::sync::Semaphore::new(options.downloads.max(1))),
                counters: Arc::default(),
                runtime,
            },
            parsed,
        ))
    }

    /// The object path of `url` in this store.
    pub(crate) fn object_path(&self, url: &str) -> Result<ObjectPath, Error> {
        let bad = |reason: String| Error::config("shards", format!("{url}: {reason}"));
        let parsed = Url::parse(url).map_err(|e| bad(format!("not a URL: {e}")))?;
        if format!("{}://{}", parsed.scheme(), parsed.authority()) != self.base {
            return Err(bad(format!(
                "all shards must be in one store, and the first is in {}",
                self.base
            )));
        }
        let (_, path) = ObjectStoreScheme::parse(&parsed).map_err(|e| bad(e.to_string()))?;
        ObjectPath::from_url_path(path).map_err(|e| bad(e.to_string()))
    }

    /// Starts reading `range` of `path` in the background (one request, counted as waited
    /// for only when [`Remote::finish_read`] blocks on it). When its turn comes (a request slot
    /// is free) and `cached` has meanwhile landed in the cache, nothing is sent.
    pub(crate) fn start_read(
        &self,
        path: &ObjectPath,
        range: Range<u64>,
        cached: Option<Arc<CachedShard>>,
    ) -> PendingRead {
        let path = path.clone();
        self.spawn_request(cached, move |store| async move {
            store.get_range(&path, range).await
        })
    }

    /// Starts reading the whole object `path` in the background (one request, as
    /// [`Remote::start_read`]).
    pub(crate) fn start_get(&self, path: &ObjectPath) -> PendingRead {
        let path = path.clone();
        self.spawn_request(None, move |store| async move {
            store.get(&path).await?.bytes().await
        })
    }

    /// Runs `request` on the store once a request slot is free, counting it, unless `cached`
    /// has landed in the cache by then.
    fn spawn_request<F, Fut>(&self, cached: Option<Arc<CachedShard>>, request: F) -> PendingRead
    where
        F: FnOnce(Arc<dyn ObjectStore>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = object_store::Result<bytes::Bytes>> + Send,
    {
        let (store, requests, counters) = (
            Arc::clone(&self.store),
            Arc::clone(&self.requests),
            Arc::clone(&self.counters),
        );
        PendingRead(self.runtime.spawn(async move {
            let _permit = requests.acquire().await.expect("never closed");
            if cached.is_some_and(|c| c.is_cached()) {
                return Ok(None);
            }
            counters.requests.fetch_add(1, Ordering::Relaxed);
            request(store).await.map(Some)
        }))
    }

    /// Waits for a read started by [`Remote::start_read`] and puts its bytes in `buf`; `false`
    /// when it was not sent because its shard is cached now.
    pub(crate) fn finish_read(
        &self,
        mut pending: PendingRead,
        buf: &mut Vec<u8>,
    ) -> Result<bool, object_store::Error> {
        let start = std::time::Instant::now();
        let bytes = self.runtime.block_on(&mut pending.0);
        self.counters.wait_ns.fetch_add(
            u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        let bytes = bytes.map_err(|e| object_store::Error::Generic {
            store: "hpuload",
            source: Box::new(e),
        })??;
        let Some(bytes) = bytes else {
            return Ok(false);
        };
        self.counters
            .bytes
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        buf.clear();
        buf.extend_from_slice(&bytes);
        Ok(true)
    }

    /// Reads `range` of `path` (one request, retried by object_store), into `buf`.
    pub(crate) fn read_range(
        &self,
        path: &ObjectPath,
        range: Range<u64>,
        buf: &mut Vec<u8>,
    ) -> Result<(), object_store::Error> {
        self.finish_read(self.start_read(path, range, None), buf)
            .map(drop)
    }

    /// The size of `path` now (one HEAD request).
    pub(crate) fn size(&self, path: &ObjectPath) -> Result<u64, object_store::Error> {
        self.runtime.block_on(async {
            let _permit = self.requests.acquire().await.expect("never closed");
            self.counters.requests.fetch_add(1, Ordering::Relaxed);
            self.store.head(path).await.map(|meta| meta.size)
        })
    }

    /// Fetches whole objects (indexes), `max_requests` at a time: `None` for those not found.
    pub(crate) fn get_optional(
        &self,
        paths: &[ObjectPath],
    ) -> Vec<Result<Option<bytes::Bytes>, object_store::Error>> {
        self.runtime.block_on(
            futures::stream::iter(paths)
                .map(|path| async move {
                    let _permit = self.requests.acquire().await.expect("never closed");
                    self.counters.requests.fetch_add(1, Ordering::Relaxed);
                    let got = match self.store.get(path).await {
                        Ok(got) => got.bytes().await,
                        Err(e) => Err(e),
                    };
                    match got {
                        Ok(bytes) => {
                            self.counters
                                .bytes
                                .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                            Ok(Some(bytes))
                        }
                        Err(object_store::Error::NotFound { .. }) => Ok(None),
                        Err(e) => Err(e),
                    }
                })
                .buffered(64)
                .collect(),
        )
    }

    /// Downloads `path` into `dest` (through a temporary file renamed into place) and returns
    /// its size; blocks.
    pub(crate) fn download(&self, path: &ObjectPath, dest: &Path) -> std::io::Result<u64> {
        self.runtime.block_on(download(
            Arc::clone(&self.store),
            Arc::clone(&self.downloads),
            Arc::clone(&self.counters),
            path.clone(),
            dest.to_path_buf(),
        ))
    }

    /// Starts downloading `path` into `dest` in the background; `done` gets the outcome and
    /// says whether the file is kept (counted as a cached shard) or was refused.
    pub(crate) fn spawn_download(
        &self,
        path: ObjectPath,
        dest: PathBuf,
        done: impl FnOnce(std::io::Result<u64>) -> bool + Send + 'static,
    ) {
        let counters = Arc::clone(&self.counters);
        let task = download(
            Arc::clone(&self.store),
            Arc::clone(&self.downloads),
            Arc::clone(&self.counters),
            path,
            dest,
        );
        self.runtime.spawn(async move {
            let counter = if done(task.await) {
                &counters.shards_cached
            } else {
                &counters.download_failures
            };
            counter.fetch_add(1, Ordering::Relaxed);
        });
    }

    /// Starts downloading `object` (`size` bytes when indexed) into its place in the cache,
    /// once, when the budget has room; otherwise its reads stay remote. A copy of another size
    /// than the indexed one is removed and not used.
    pub(crate) fn cache_in_background(
        &self,
        cached: &Arc<CachedShard>,
        budget: &Arc<CacheBudget>,
        object: &ObjectPath,
        size: u64,
    ) {
        if !cached.claim() {
            return;
        }
        if !budget.take(size) {
            tracing::debug!("cache full: {} stays remote", cached.file.display());
            cached.finish(false);
            return;
        }
        let (state, budget) = (Arc::clone(cached), Arc::clone(budget));
        let dest = cached.file.clone();
        self.spawn_download(object.clone(), dest, move |outcome| {
            let kept = match outcome {
                Ok(got) if got == size => true,
                Ok(got) => {
                    tracing::warn!(
                        "{}: {got} bytes in the store, {size} when indexed; its samples stay remote",
                        state.file.display()
                    );
                    let _ = std::fs::remove_file(&state.file);
                    false
                }
                Err(e) => {
                    tracing::warn!("caching {} failed: {e}", state.file.display());
                    false
                }
            };
            if !kept {
                budget.give_back(size);
            }
            state.finish(kept);
            kept
        });
    }

    pub(crate) fn count_cache_hit(&self) {
        self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts shards found in the cache when the dataset was opened.
    pub(crate) fn count_cached_shards(&self, n: u64) {
        self.counters.shards_cached.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn report(&self) -> StorageReport {
        let c = &self.counters;
        StorageReport {
            requests: c.requests.load(Ordering::Relaxed),
            bytes_fetched: c.bytes.load(Ordering::Relaxed),
            cache_hits: c.cache_hits.load(Ordering::Relaxed),
            shards_cached: c.shards_cached.load(Ordering::Relaxed),
            download_failures: c.download_failures.load(Ordering::Relaxed),
            wait: Duration::from_nanos(c.wait_ns.load(Ordering::Relaxed)),
        }
    }
}

/// Files stored one object each under a prefix (COCO images in a bucket), read whole: the
/// loader's prefetch hint starts their requests, at most `read_ahead` waiting at once.
pub(crate) struct RemoteFiles {
    remote: Remote,
    /// Per file, its object.
    objects: Vec<ObjectPath>,
    pending: std::sync::Mutex<std::collections::HashMap<usize, PendingRead>>,
    read_ahead: usize,
}

impl std::fmt::Debug for RemoteFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteFiles")
            .field("remote", &self.remote)
            .field("files", &self.objects.len())
            .finish()
    }
}

impl RemoteFiles {
    /// Connects to the store of the folder URL `base`; file `k` is `names[k]` (a relative
    /// path, `/`-separated) under it. Returns the files' URLs too, for messages.
    pub(crate) fn connect<'a>(
        base: &str,
        names: impl Iterator<Item = &'a str>,
        options: &RemoteOptions,
    ) -> Result<(Self, Vec<String>), Error> {
        let base = base.trim_end_matches('/');
        let (remote, _) = Remote::connect(base, options)?;
        // The folder's own path: an empty path for a store's root.
        let folder = remote.object_path(&format!("{base}/"))?;
        let (mut objects, mut urls) = (Vec::new(), Vec::new());
        for name in names {
            let parts = name.split('/').filter(|p| !p.is_empty());
            objects.push(parts.fold(folder.clone(), |path, part| path.join(part)));
            urls.push(format!("{base}/{name}"));
        }
        let files = Self {
            remote,
            objects,
            pending: Default::default(),
            read_ahead: options.read_ahead.max(1),
        };
        Ok((files, urls))
    }

    /// Starts the requests of files `indices`, up to `read_ahead` waiting at once.
    pub(crate) fn prefetch(&self, indices: &[usize]) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        for &index in indices {
            if pending.len() >= self.read_ahead {
                break;
            }
            pending
                .entry(index)
                .or_insert_with(|| self.remote.start_get(&self.objects[index]));
        }
    }

    /// File `index`'s bytes, into `buf` (the request started by `prefetch`, or a new one);
    /// `url` names it in errors.
    pub(crate) fn read(&self, index: usize, url: &str, buf: &mut Vec<u8>) -> std::io::Result<()> {
        let pending = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&index)
            .unwrap_or_else(|| self.remote.start_get(&self.objects[index]));
        match self.remote.finish_read(pending, buf) {
            Ok(_) => Ok(()),
            Err(object_store::Error::NotFound { .. }) => Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{url} is not in the store"),
            )),
            Err(e) => Err(std::io::Error::other(e)),
        }
    }

    /// What the store has done so far.
    pub(crate) fn report(&self) -> StorageReport {
        self.remote.report()
    }
}

/// A ranged read in flight.
#[derive(Debug)]
pub(crate) struct PendingRead(tokio::task::JoinHandle<object_store::Result<Option<bytes::Bytes>>>);

impl Drop for PendingRead {
    fn drop(&mut self) {
        // A read nobody will collect (its epoch was dropped) stops using a request slot.
        self.0.abort();
    }
}

/// Removes a partly written download when the task ends any way but success (an error, or
/// the runtime shutting down with the dataset).
struct PartFile(Option<PathBuf>);

impl Drop for PartFile {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

async fn download(
    store: Arc<dyn ObjectStore>,
    slots: Arc<tokio::sync::Semaphore>,
    counters: Arc<Counters>,
    path: ObjectPath,
    dest: PathBuf,
) -> std::io::Result<u64> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let _permit = slots.acquire().await.expect("never closed");
    let mut part = dest.as_os_str().to_owned();
    part.push(format!(
        ".part-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let part = PartFile(Some(PathBuf::from(part)));
    let part_path = part.0.clone().expect("set above");
    let mut file = std::io::BufWriter::with_capacity(1 << 20, File::create(&part_path)?);
    counters.requests.fetch_add(1, Ordering::Relaxed);
    let got = store.get(&path).await.map_err(std::io::Error::other)?;
    let expected = got.meta.size;
    let mut stream = got.into_stream();
    let mut written = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(std::io::Error::other)?;
        counters
            .bytes
            .fetch_add(chunk.len() as u64, Ordering::Relaxed);
        written += chunk.len() as u64;
        // Page-cache writes of 1 MiB: short enough not to hold up the runtime's threads.
        file.write_all(&chunk)?;
    }
    if written != expected {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("received {written} of {expected} bytes"),
        ));
    }
    file.into_inner().map_err(|e| e.into_error())?;
    std::fs::rename(&part_path, &dest)?;
    let mut part = part;
    part.0 = None;
    Ok(written)
}

/// Where shard `url` is cached: `<dir>/<hash of the URL>-<file name>`.
pub(crate) fn cache_file(dir: &Path, url: &str) -> PathBuf {
    // FNV-1a: stable across runs and builds (std's hasher is not).
    let hash = url.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let name = url.rsplit('/').next().unwrap_or("shard");
    dir.join(format!("{hash:016x}-{name}"))
}

/// Free bytes on the filesystem that holds `dir` (0 when unknown).
pub(crate) fn free_space(dir: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return 0;
    };
    // SAFETY: an all-zero `statvfs` is a valid value of the plain C struct, and
    // `c_path` is a NUL-terminated string that outlives the call, which only writes `stat`.
    unsafe {
        let mut stat: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c_path.as_ptr(), &mut stat) != 0 {
            return 0;
        }
        #[allow(clippy::useless_conversion)] // u32 on some targets
        u64::from(stat.f_bavail).saturating_mul(u64::from(stat.f_frsize))
    }
}

/// A shard's place in the local cache.
pub(crate) struct CachedShard {
    pub file: PathBuf,
    state: AtomicU8,
}

const ABSENT: u8 = 0;
const DOWNLOADING: u8 = 1;
const CACHED: u8 = 2;
const NOT_CACHED: u8 = 3;

impl CachedShard {
    /// A shard whose cache copy is `file`; cached already when it has the indexed size.
    pub(crate) fn new(file: PathBuf, size: u64) -> Self {
        let present = std::fs::metadata(&file).is_ok_and(|m| m.len() == size);
        Self {
            file,
            state: AtomicU8::new(if present { CACHED } else { ABSENT }),
        }
    }

    pub(crate) fn is_cached(&self) -> bool {
        self.state.load(Ordering::Acquire) == CACHED
    }

    /// Claims the download (true once per shard, while it is neither cached nor given up on).
    pub(crate) fn claim(&self) -> bool {
        self.state
            .compare_exchange(ABSENT, DOWNLOADING, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Records a download's outcome: cached, or read by ranges from now on.
    pub(crate) fn finish(&self, cached: bool) {
        self.state
            .store(if cached { CACHED } else { NOT_CACHED }, Ordering::Release);
    }

    /// Reads `range` of the cached copy into `buf`.
    pub(crate) fn read(&self, range: Range<u64>, buf: &mut Vec<u8>) -> std::io::Result<()> {
        let len = usize::try_from(range.end - range.start).map_err(std::io::Error::other)?;
        buf.clear();
        buf.resize(len, 0);
        self.read_at(range.start, buf)
    }

    /// Reads `dst.len()` bytes of the cached copy from `offset` into `dst`.
    pub(crate) fn read_at(&self, offset: u64, dst: &mut [u8]) -> std::io::Result<()> {
        File::open(&self.file)?.read_exact_at(dst, offset)
    }
}

/// Bytes the cache may still take, shared by a dataset's download tasks.
pub(crate) struct CacheBudget(AtomicU64);

impl CacheBudget {
    pub(crate) fn new(options: &CacheOptions) -> Self {
        Self(AtomicU64::new(
            options
                .limit
                .unwrap_or_else(|| free_space(&options.dir) / 2),
        ))
    }

    /// Takes `bytes` from the budget, or nothing and `false` when there is not enough left.
    pub(crate) fn take(&self, bytes: u64) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |left| {
                left.checked_sub(bytes)
            })
            .is_ok()
    }

    /// Gives back what a failed download took.
    pub(crate) fn give_back(&self, bytes: u64) {
        self.0.fetch_add(bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_remote_and_paths_are_not() {
        assert!(is_remote("s3://bucket/train-{0..9}.tar"));
        assert!(is_remote("http://127.0.0.1:9000/a.tar"));
        assert!(!is_remote("/data/train-{0..9}.tar"));
        assert!(!is_remote("relative/a.tar"));
        assert!(!is_remote("odd dir/x://y.tar"));
    }

    #[test]
    fn cache_files_are_named_by_url_and_keep_the_file_name() {
        let a = cache_file(Path::new("/c"), "s3://b/x/shard-000.tar");
        let b = cache_file(Path::new("/c"), "s3://other/x/shard-000.tar");
        assert_ne!(a, b);
        assert!(a.to_string_lossy().ends_with("-shard-000.tar"));
        assert_eq!(a, cache_file(Path::new("/c"), "s3://b/x/shard-000.tar"));
    }

    #[test]
    fn the_cache_budget_refuses_what_does_not_fit_and_takes_back_failures() {
        let budget = CacheBudget::new(&CacheOptions {
            dir: PathBuf::from("/"),
            limit: Some(100),
        });
        assert!(budget.take(60));
        assert!(!budget.take(60));
        budget.give_back(60);
        assert!(budget.take(100));
        assert!(!budget.take(1));
    }
}
