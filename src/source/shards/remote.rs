//! Shards on object storage: their indexes fetched (or built from a download), each sample one
//! ranged request, whole shards cached locally in the background for later reads.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::index::{build_index, index_path, parse_index, read_index, write_index, IndexedSample};
use super::{Fields, ShardOptions};
use crate::source::remote::{self, CacheBudget, CachedShard, Remote};
use crate::Error;

/// The shards of a dataset on object storage.
#[derive(Debug)]
pub(super) struct RemoteShards {
    pub(super) remote: Remote,
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

impl RemoteShards {
    /// Connects to the store, and fetches (or builds) every shard's index.
    pub(super) fn open(
        urls: &[String],
        options: &ShardOptions,
    ) -> Result<(Vec<Vec<IndexedSample>>, Self), Error> {
        let fields = options.fields();
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
                .and_then(|bytes| parse_index(&bytes[..], fields))
                .or_else(|| local_index.as_deref().and_then(|p| read_index(p, fields)));
            let (size, samples) = match parsed {
                Some(found) => found,
                None => build_remote_index(&remote, url, object, fields, cache_dir)?,
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
    pub(super) fn read_cached_into(
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
    pub(super) fn read(
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
    pub(super) fn prefetch(&self, locations: impl Iterator<Item = (usize, (u32, u64, u64))>) {
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
    fields: Fields<'_>,
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
    let built = build_index(&local, fields).map_err(|e| match e {
        Error::Io { source, .. } => Error::Io {
            path: PathBuf::from(url),
            source,
        },
        other => other,
    });
    if cache.is_some() {
        if let Ok(samples) = &built {
            if let Err(e) = write_index(&index_path(&local), size, fields, samples) {
                tracing::debug!("could not keep the index of {url}: {e}");
            }
        }
    } else {
        let _ = std::fs::remove_file(&local);
    }
    Ok((size, built?))
}
