//! Where samples come from: a list of `(path, label)` entries, and how to read a file's bytes.

mod arrays;
pub mod arrow;
pub mod coco;
mod folder;
pub mod frames;
pub mod hf;
mod manifest;
pub mod parquet;
pub mod pattern;
pub mod remote;
pub mod shards;
mod video_manifest;

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::Error;

pub use arrays::ImageArray;
pub use arrow::{ArrowDataset, HfOptions};
pub use coco::{CocoDataset, CocoOptions, Objects};
pub use folder::{ImageFolder, VideoFolder, IMAGE_EXTENSIONS, VIDEO_EXTENSIONS};
pub use frames::{FrameFolder, FrameNames, Frames};
pub use manifest::Manifest;
pub use parquet::{ParquetDataset, ParquetOptions};
pub use remote::{is_remote, CacheOptions, RemoteOptions, StorageReport};
pub use shards::{Media, ShardOptions, WebDataset};
pub use video_manifest::VideoManifest;

/// One sample of a dataset: an encoded image file and its class label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The image file.
    pub path: PathBuf,
    /// The class label.
    pub label: i64,
}

/// Where a sample's bytes lie in a local file ([`Source::span`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSpan {
    /// The file.
    pub file: PathBuf,
    /// The sample's first byte in it.
    pub offset: u64,
    /// The sample's length; `None`: to the file's end.
    pub len: Option<u64>,
}

/// What every dataset lists, whatever holds its bytes: its entries in order, its class names,
/// where it came from, and whether each entry's path is the sample's own file.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    /// The entries, in dataset order.
    pub entries: Vec<Entry>,
    /// Class names by label, where the source knows them (empty otherwise).
    pub classes: Vec<String>,
    /// The folder or file the dataset came from, for messages.
    pub origin: PathBuf,
    /// Each entry's path is a local file holding exactly the sample's bytes, so
    /// [`Source::read`] and [`Source::read_into`] read it as they are. False for a source whose
    /// paths name records inside something else (a tar member, a table row, an object store
    /// key): that source overrides `read`, and `read_into` does not read in place unless it
    /// overrides that too.
    pub files: bool,
}

impl Listing {
    /// A dataset of one local file per sample.
    pub fn of_files(origin: impl Into<PathBuf>, entries: Vec<Entry>, classes: Vec<String>) -> Self {
        Self {
            entries,
            classes,
            origin: origin.into(),
            files: true,
        }
    }

    /// A dataset whose samples are records inside something else (its `read` says how).
    pub fn of_records(
        origin: impl Into<PathBuf>,
        entries: Vec<Entry>,
        classes: Vec<String>,
    ) -> Self {
        Self {
            files: false,
            ..Self::of_files(origin, entries, classes)
        }
    }
}

/// A listing of files is a dataset as it is (torchvision's `ImageFolder.samples` given from
/// Python, a list built by hand): each entry's file is read.
impl Source for Listing {
    fn listing(&self) -> &Listing {
        self
    }
}

/// A dataset: a fixed, ordered list of entries. Index `i` always names the same entry.
pub trait Source: Send + Sync {
    /// What the dataset lists (entries, classes, origin); the getters below read it.
    fn listing(&self) -> &Listing;
    /// The entries, in dataset order.
    fn entries(&self) -> &[Entry] {
        &self.listing().entries
    }
    /// Class names by label, where the source knows them (empty otherwise).
    fn classes(&self) -> &[String] {
        &self.listing().classes
    }
    /// The folder or file the dataset came from, for messages.
    fn origin(&self) -> &Path {
        &self.listing().origin
    }
    /// A hint that samples `indices` will be read soon (the loader gives each batch's indices
    /// when it schedules the batch, `prefetch` batches ahead): a source on object storage
    /// starts their requests now, so that many are in flight. The default does nothing.
    fn prefetch(&self, indices: &[usize]) {
        let _ = indices;
    }
    /// The order of a shuffled epoch, for a source that reads some orders much faster than a
    /// global permutation (Parquet, whose rows are read a row group at a time): a permutation
    /// of every index that is a pure function of `(seed, epoch)`. `None` (the default): the
    /// loader's uniform shuffle.
    fn shuffled_order(&self, seed: u64, epoch: u64) -> Option<Vec<u32>> {
        let _ = (seed, epoch);
        None
    }
    /// Before an epoch: the samples this rank will read in it, in order (from a resumed
    /// epoch's start). A source that decodes blocks of samples keeps each block until its last
    /// read. The default does nothing.
    fn plan_reads(&self, indices: &mut dyn Iterator<Item = usize>) {
        let _ = indices;
    }
    /// Sample `index`'s objects (boxes and their labels), for a detection dataset (`None`, the
    /// default: a classification dataset, whose label is the entry's).
    fn objects(&self, index: usize) -> Option<Objects<'_>> {
        let _ = index;
        None
    }
    /// Whether every image has one channel (an array of grey images): a pipeline may then
    /// hand them out as one ([`crate::Pipeline::single_channel`]) without making them grey.
    fn grey(&self) -> bool {
        false
    }
    /// What object storage has done for this dataset so far (`None` for local data).
    fn storage(&self) -> Option<StorageReport> {
        None
    }
    /// A video's segment, `[start, end)` in seconds, that its clips are drawn from (`None`,
    /// the default: the whole video).
    fn segment(&self, index: usize) -> Option<(f64, f64)> {
        let _ = index;
        None
    }
    /// Sample `index` as a video stored as a folder of frames (one JPEG file each): its
    /// frames and their rate. `None` (the default): the sample is one file or record.
    fn frames(&self, index: usize) -> Option<Frames<'_>> {
        let _ = index;
        None
    }
    /// Where sample `index`'s bytes lie as one stretch of a local file, for a reader that reads
    /// parts of a sample by offset (a video's tables, then only the frames its clips need).
    /// The default: the entry's file, for a listing of files; `None` for a source whose
    /// samples are read whole through [`read`](Source::read).
    ///
    /// # Errors
    /// Where the sample would be is known to be unreadable (a shard's sample without its
    /// member): the same error `read` gives.
    fn span(&self, index: usize) -> std::io::Result<Option<FileSpan>> {
        Ok(self.listing().files.then(|| FileSpan {
            file: self.entries()[index].path.clone(),
            offset: 0,
            len: None,
        }))
    }
    /// Reads sample `index`'s encoded bytes, reusing `buf`. The default reads the entry's
    /// file by `mode`; sources that are not one file per sample override it (and list their
    /// entries with [`Listing::of_records`]).
    ///
    /// # Errors
    /// The bytes cannot be read; the loader reports the entry's path with the error.
    fn read<'a>(
        &self,
        index: usize,
        mode: ReadMode,
        buf: &'a mut Vec<u8>,
    ) -> std::io::Result<SampleBytes<'a>> {
        read_file(&self.entries()[index].path, mode, buf)
    }
    /// Reads sample `index`'s encoded bytes straight into `dst` when they fit there, and
    /// returns their length; `Ok(None)` when they do not fit, or this source does not read
    /// in place (the caller then uses [`read`](Source::read)). The loader reads each bitstream
    /// for the media engine into its slot of the pinned batch buffer this way, so the bytes are
    /// not copied there from a buffer. The default reads the entry's file when the listing is
    /// of files and `mode` is [`ReadMode::Read`], and does not read in place otherwise, so a
    /// source of records that overrides only `read` stays correct; one that overrides this must
    /// give exactly the bytes `read` gives, and the same errors.
    ///
    /// # Errors
    /// As [`read`](Source::read): the same failures give the same errors.
    fn read_into(
        &self,
        index: usize,
        mode: ReadMode,
        dst: &mut [u8],
    ) -> std::io::Result<Option<usize>> {
        if self.listing().files {
            read_entry_into(self, index, mode, dst)
        } else {
            Ok(None)
        }
    }
}

/// What [`Source::read_into`] does for a listing of files (and what a source that overrides it
/// does for its samples that are files): the entry's file read straight into `dst` when
/// `mode` is [`ReadMode::Read`] and it fits.
///
/// # Errors
/// As [`read_file`].
pub fn read_entry_into(
    source: &(impl Source + ?Sized),
    index: usize,
    mode: ReadMode,
    dst: &mut [u8],
) -> std::io::Result<Option<usize>> {
    match mode {
        ReadMode::Read => read_file_into(&source.entries()[index].path, dst),
        ReadMode::Mmap => Ok(None),
    }
}

/// How sample files are read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadMode {
    /// `read(2)` into a buffer each worker reuses. The default: faster than mapping for
    /// ImageNet-sized files (see BENCHMARKS.md), and no page-table churn.
    #[default]
    Read,
    /// Map the file with `mmap(2)` (memmap2) and decode from the mapping.
    Mmap,
}

/// A sample's encoded bytes, either in a reused buffer or memory-mapped.
pub enum SampleBytes<'a> {
    /// Bytes in a caller-owned buffer.
    Buffer(&'a [u8]),
    /// A read-only mapping of the file.
    Mapped(memmap2::Mmap),
}

impl std::ops::Deref for SampleBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Self::Buffer(b) => b,
            Self::Mapped(m) => m,
        }
    }
}

/// Reads `path` by `mode`; `buf` is reused across calls and only grows.
///
/// # Errors
/// The file cannot be opened or read, or is not a regular file.
pub fn read_file<'a>(
    path: &Path,
    mode: ReadMode,
    buf: &'a mut Vec<u8>,
) -> std::io::Result<SampleBytes<'a>> {
    let (mut file, meta) = open_regular(path)?;
    match mode {
        ReadMode::Read => {
            buf.clear();
            buf.reserve(meta.len() as usize);
            file.read_to_end(buf)?;
            Ok(SampleBytes::Buffer(buf))
        }
        ReadMode::Mmap if meta.len() == 0 => Ok(SampleBytes::Buffer(&[])),
        ReadMode::Mmap => {
            // SAFETY: the mapping is read-only and private to this call; if another process
            // truncates the file while we decode, reads past the new end raise SIGBUS. Dataset
            // files are not modified during training; `ReadMode::Read` avoids the risk entirely.
            let map = unsafe { memmap2::Mmap::map(&file)? };
            Ok(SampleBytes::Mapped(map))
        }
    }
}

/// Reads the file at `path` into `dst` when it is shorter than `dst`, and returns its length;
/// `Ok(None)` when it is not (a file that grew while it was read included).
///
/// # Errors
/// As [`read_file`].
pub fn read_file_into(path: &Path, dst: &mut [u8]) -> std::io::Result<Option<usize>> {
    let (mut file, meta) = open_regular(path)?;
    if meta.len() >= dst.len() as u64 {
        return Ok(None);
    }
    fault_in(&mut dst[..meta.len() as usize]);
    // Read to the end, as `read_file` does, not just the length the metadata gave.
    let mut filled = 0;
    while filled < dst.len() {
        match file.read(&mut dst[filled..]) {
            Ok(0) => return Ok(Some(filled)),
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// Writes a byte of each page of `dst`, so that pages not in memory yet (a batch buffer's, in
/// the first batch) fault in here, in user mode, and not inside `read(2)`: a fault the kernel's
/// own copy takes holds the process's memory-map lock, which queues behind every allocator
/// call that maps or protects memory (the other threads' first allocations), while a fault in
/// user mode takes only its mapping's lock. About a nanosecond a page once the pages are in.
fn fault_in(dst: &mut [u8]) {
    for byte in dst.iter_mut().step_by(crate::pinned::page_size()) {
        *byte = 0;
    }
    std::hint::black_box(dst);
}

fn open_regular(path: &Path) -> std::io::Result<(File, std::fs::Metadata)> {
    let file = File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok((file, meta))
}

/// The paths in `dir` (not below it) that `keep` accepts, in Python's sorted order.
///
/// # Errors
/// The folder cannot be listed (naming it).
pub(crate) fn files_in(dir: &Path, keep: impl Fn(&Path) -> bool) -> Result<Vec<PathBuf>, Error> {
    let read = std::fs::read_dir(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files: Vec<PathBuf> = read
        .flatten()
        .map(|e| e.path())
        .filter(|p| keep(p))
        .collect();
    sort_like_python(&mut files);
    Ok(files)
}

/// Sorts paths by their raw bytes, which is Python's `sorted()` order for UTF-8 names
/// (torchvision sorts class folders and files that way).
pub(crate) fn sort_like_python(paths: &mut [PathBuf]) {
    paths.sort_by(|a, b| {
        a.as_os_str()
            .as_encoded_bytes()
            .cmp(b.as_os_str().as_encoded_bytes())
    });
}

/// How [`open`] reads what it is given.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// Shards (and object storage).
    pub shards: ShardOptions,
    /// A `datasets` table's columns, for Arrow and Parquet.
    pub columns: hf::ColumnChoice,
    /// Parquet's shuffle window (0: the default).
    pub window_rows: usize,
}

/// What kind of dataset a `--data` argument names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataKind {
    /// A folder of class folders of images.
    ImageFolder,
    /// WebDataset tar shards: a file, a brace pattern, a URL, or a folder of `.tar` files.
    Shards,
    /// Arrow IPC files of a `datasets` table (a `save_to_disk` folder, the cache's files).
    Arrow,
    /// Parquet files: a file, a pattern, or a folder of them.
    Parquet,
}

/// Tells what `spec` names, by its extension (after brace expansion) or, for a folder, by what
/// it holds: a `save_to_disk` folder or `.arrow` files, `.tar` files, `.parquet` files (in the
/// folder or under its `data/`), else an ImageFolder. Only those places are listed, so an
/// ImageFolder's tree is not walked twice.
pub fn data_kind(spec: &str) -> DataKind {
    let first = pattern::expand_braces(spec)
        .ok()
        .and_then(|n| n.into_iter().next())
        .unwrap_or_else(|| spec.to_string());
    let path = Path::new(&first);
    let ext = |e: &str| path.extension().is_some_and(|x| x == e);
    if ext("parquet") {
        DataKind::Parquet
    } else if ext("arrow") {
        DataKind::Arrow
    } else if ext("tar") || is_remote(spec) {
        DataKind::Shards
    } else if !path.is_dir() {
        DataKind::ImageFolder
    } else if arrow::is_arrow_spec(&first) {
        DataKind::Arrow
    } else if shards::tar_files(path).is_ok_and(|t| !t.is_empty()) {
        DataKind::Shards
    } else if parquet::is_parquet_spec(&first) {
        DataKind::Parquet
    } else {
        DataKind::ImageFolder
    }
}

/// Opens whatever `spec` names (see [`data_kind`]).
///
/// # Errors
/// Those of the source it names.
pub fn open(spec: &str, options: &OpenOptions) -> Result<Box<dyn Source>, Error> {
    let hf = HfOptions {
        columns: options.columns.clone(),
        rows: None,
    };
    Ok(match data_kind(spec) {
        DataKind::ImageFolder => Box::new(ImageFolder::open(Path::new(spec))?),
        DataKind::Shards if Path::new(spec).is_dir() => {
            Box::new(WebDataset::open_folder(Path::new(spec), &options.shards)?)
        }
        DataKind::Shards => Box::new(WebDataset::open_with(spec, &options.shards)?),
        DataKind::Arrow => Box::new(ArrowDataset::open(spec, &hf)?),
        DataKind::Parquet => {
            let defaults = ParquetOptions::default();
            Box::new(ParquetDataset::open(
                spec,
                &ParquetOptions {
                    columns: options.columns.clone(),
                    window_rows: match options.window_rows {
                        0 => defaults.window_rows,
                        n => n,
                    },
                    remote: options.shards.remote.clone(),
                },
            )?)
        }
    })
}

/// Opens the videos `spec` names: tar shards whose samples hold `.mp4` (`.mov`, `.m4v`)
/// members (a file, a brace pattern, a URL, or a folder of `.tar` files, as [`data_kind`]
/// tells shards), a CSV list of videos ([`VideoManifest`]), class folders of folders of JPEG
/// frames ([`FrameFolder`], at `fps` frames per second), or else class folders of videos
/// ([`VideoFolder`]).
///
/// # Errors
/// Those of the source it names.
pub fn open_videos(spec: &str, options: &OpenOptions, fps: f64) -> Result<Box<dyn Source>, Error> {
    let path = Path::new(spec);
    let shards = ShardOptions {
        media: Media::Videos,
        ..options.shards.clone()
    };
    Ok(match data_kind(spec) {
        DataKind::Shards if path.is_dir() => Box::new(WebDataset::open_folder(path, &shards)?),
        DataKind::Shards => Box::new(WebDataset::open_with(spec, &shards)?),
        _ if path
            .extension()
            .is_some_and(|x| x.eq_ignore_ascii_case("csv")) =>
        {
            Box::new(VideoManifest::open(path, None)?)
        }
        _ if frames::holds_frame_folders(path) => Box::new(FrameFolder::open(path, fps)?),
        _ => Box::new(VideoFolder::open(path)?),
    })
}
