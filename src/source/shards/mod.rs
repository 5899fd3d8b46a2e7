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

mod index;
mod remote;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::pattern::expand_braces;
use super::remote::{RemoteOptions, StorageReport};
use super::{Entry, FileSpan, Listing, ReadMode, SampleBytes, Source};
use crate::Error;
use remote::RemoteShards;

use index::load_or_build_index;
pub use index::{build_index, index_path, is_image_member, write_index, IndexedSample};

/// Fields that hold the image, in order of preference.
pub const IMAGE_FIELDS: &[&str] = &["jpg", "jpeg", "png", "webp"];

/// Fields that hold the video of a shard of videos: those of a video folder's files.
pub const VIDEO_FIELDS: &[&str] = super::VIDEO_EXTENSIONS;

/// What a shard's samples are: which members hold each sample's media.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Media {
    /// Images: a member of one of [`IMAGE_FIELDS`].
    #[default]
    Images,
    /// Videos: a member of one of [`VIDEO_FIELDS`] (H.264 in MP4/MOV).
    Videos,
}

impl Media {
    /// The fields a sample's media member may have.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            Self::Images => IMAGE_FIELDS,
            Self::Videos => VIDEO_FIELDS,
        }
    }

    /// `image` or `video`, for messages.
    fn noun(self) -> &'static str {
        match self {
            Self::Images => "image",
            Self::Videos => "video",
        }
    }
}

/// The members an index picks from each sample: its media and its label.
#[derive(Clone, Copy, Debug)]
pub struct Fields<'a> {
    /// The label's field (`cls`); empty for samples without labels.
    pub label: &'a str,
    /// What the media member is.
    pub media: Media,
}

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
    /// Whether the samples are images or videos.
    pub media: Media,
    /// How shards named by URL are read.
    pub remote: RemoteOptions,
}

impl Default for ShardOptions {
    fn default() -> Self {
        Self {
            label_field: "cls".into(),
            media: Media::Images,
            remote: RemoteOptions::default(),
        }
    }
}

impl ShardOptions {
    /// The members each sample's index entry picks.
    pub fn fields(&self) -> Fields<'_> {
        Fields {
            label: &self.label_field,
            media: self.media,
        }
    }
}

/// Where a sample's image lies, or why it has none.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Location {
    Member { shard: u32, offset: u64, len: u64 },
    Missing(String),
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
        Self::open_names(names, super::is_remote(spec), options)
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
        let fields = options.fields();
        let (indexes, remote) = if remote {
            let (indexes, remote) = RemoteShards::open(&names, options)?;
            (indexes, Some(remote))
        } else {
            let indexes = names
                .iter()
                .map(|name| load_or_build_index(Path::new(name), fields))
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
                        Location::Missing(format!(
                            "the sample has no {} member ({})",
                            options.media.noun(),
                            options.media.fields().join(", ")
                        )),
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

    /// A local shard's member; `None` on object storage (read whole, through `read`).
    fn span(&self, index: usize) -> std::io::Result<Option<FileSpan>> {
        let (shard, offset, len) = self.member(index)?;
        Ok(self.remote.is_none().then(|| FileSpan {
            file: self.shards[shard as usize].clone(),
            offset,
            len: Some(len),
        }))
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
