//! The frame indexes of a dataset's videos, built once and kept in one file.
//!
//! A video loader indexes every video when it is built, on [`index_threads`] threads, and
//! keeps the result in an index file (by default `.hpuload-video.idx` in the dataset's
//! folder, as tar shards keep theirs beside them). A later run, or another rank on a shared
//! file system, reads that file instead of each video's tables: one read for the whole
//! dataset. Each video's entry
//! holds the file's size and modification time when it was indexed; a video that has changed
//! since is indexed again, and the file rewritten. Writing is best effort (a read-only dataset
//! folder indexes again next run) and atomic (a temporary file renamed over the old one), so
//! ranks that write at once leave one whole file.
//!
//! Each index is kept packed, in the file and in the loader's memory: timestamps, durations
//! and byte ranges as varint deltas from the frame before, about 8 bytes a frame where the
//! plain [`Frame`] takes 40 (Kinetics-400's 240,000 ten-second clips: about 0.6 GB instead of
//! 3). A worker unpacks a video's index when it loads the video, in microseconds.
//!
//! The file is read as untrusted bytes. It ends with a checksum of what it holds, so a damaged
//! file is refused as a whole; an entry that does not parse, or a frame outside its video's
//! bytes, makes that entry (or the whole file) a miss: the video is indexed again, never given
//! a wrong index.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use super::mp4::{Codec, Container, Frame, VideoFailure, VideoIndex, MAX_FRAME_BYTES};
use super::sps::Signal;
use super::Display;

/// The file name of the index file kept in a dataset's folder.
pub const INDEX_FILE: &str = ".hpuload-video.idx";

/// The first bytes of an index file (the version is its last byte: 2 added each video's
/// display, 3 applies every edit of an edit list, so files of an older version are indexed
/// again).
pub const INDEX_MAGIC: &[u8; 8] = b"HPUVIDX3";
const MAGIC: &[u8; 8] = INDEX_MAGIC;

/// The largest `avcC` record taken from the file (real ones are tens of bytes).
const MAX_CONFIG_BYTES: usize = 1 << 16;

/// The fewest bytes a packed frame takes (five one-byte varints).
const MIN_FRAME_BYTES: usize = 5;

/// Where a video loader keeps its videos' frame indexes between runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum IndexCache {
    /// In [`INDEX_FILE`] in the dataset's folder, when the dataset is a folder of files.
    #[default]
    Beside,
    /// In this file (for example on storage every node shares, when the dataset's folder is
    /// read-only).
    At(PathBuf),
    /// Nowhere: every loader indexes its videos again.
    Off,
}

impl IndexCache {
    /// The index file for a dataset from `origin`, if any: in the folder, or for a dataset
    /// listed in a file (a CSV) beside that file, named after it (`.train.csv` +
    /// [`INDEX_FILE`]), so that two lists in one folder keep their own.
    pub fn file(&self, origin: &Path) -> Option<PathBuf> {
        match self {
            Self::Beside if origin.is_dir() => Some(origin.join(INDEX_FILE)),
            Self::Beside if origin.is_file() => {
                let name = origin.file_name()?.to_string_lossy();
                Some(origin.with_file_name(format!(".{name}{INDEX_FILE}")))
            }
            Self::Beside | Self::Off => None,
            Self::At(path) => Some(path.clone()),
        }
    }
}

/// Threads a loader indexes its videos on: reading a video's tables mostly waits on storage
/// (a few small reads at places far apart), so more than the cores, at least 16.
pub fn index_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .max(16)
}

/// What [`index_videos`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IndexStats {
    /// Videos asked for.
    pub videos: usize,
    /// Read from the index file.
    pub cached: usize,
    /// Indexed from their own tables.
    pub built: usize,
    /// That could not be indexed (each is named when the loader reaches it).
    pub failed: usize,
    /// Wall-clock seconds, reading and writing the index file included.
    pub seconds: f64,
    /// The index file written, when one was (nothing changed: none).
    pub saved: Option<PathBuf>,
    /// Bytes of the packed indexes held.
    pub packed_bytes: usize,
}

/// A file's identity when it was indexed: its size and modification time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime: i64,
    mtime_ns: u32,
}

impl Stamp {
    fn of(path: &Path) -> Option<Self> {
        let meta = std::fs::metadata(path).ok()?;
        Some(Self {
            size: meta.len(),
            mtime: meta.mtime(),
            mtime_ns: u32::try_from(meta.mtime_nsec()).ok()?,
        })
    }
}

/// One video's frame index, packed (see the module's notes): what a video loader keeps per
/// video between uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackedIndex {
    path: PathBuf,
    bytes: Box<[u8]>,
}

impl PackedIndex {
    /// Packs `index`.
    pub fn pack(index: &VideoIndex) -> Self {
        let mut b = Vec::with_capacity(64 + 8 * index.frames.len());
        // Codes 1 and 2 are the kinds hpuload knew first (index files keep them).
        b.push(match (index.container, index.codec) {
            (Container::Mp4, Codec::H264) => 1,
            (Container::Avi, Codec::Mpeg4) => 2,
            (Container::Mp4, Codec::Mpeg4) => 3,
            (Container::Avi, Codec::H264) => 4,
        });
        b.push(index.display.turns | u8::from(index.display.matrix) << 2);
        let tags = index.colour_tags;
        b.push(
            u8::from(tags.full_range.is_some())
                | u8::from(tags.full_range == Some(true)) << 1
                | u8::from(tags.matrix.is_some()) << 2,
        );
        b.push(tags.matrix.unwrap_or(0));
        put(&mut b, index.config.len() as u64);
        b.extend_from_slice(&index.config);
        put(&mut b, u64::from(index.size.0));
        put(&mut b, u64::from(index.size.1));
        put(&mut b, index.timescale);
        put(&mut b, index.frames.len() as u64);
        let (mut dts, mut duration, mut end) = (0i64, 0u32, 0u64);
        for f in &index.frames {
            // Each field as its change from what the frame before predicts: the next decode
            // time, the same duration, bytes right after the last frame's.
            put(
                &mut b,
                zigzag(f.dts.wrapping_sub(dts.wrapping_add(i64::from(duration)))),
            );
            put(&mut b, zigzag(f.pts.wrapping_sub(f.dts)));
            put(
                &mut b,
                zigzag(i64::from(f.duration.wrapping_sub(duration) as i32)),
            );
            put(
                &mut b,
                zigzag(f.offset.wrapping_sub(end) as i64) << 3
                    | u64::from(f.edit_start) << 2
                    | u64::from(f.shown) << 1
                    | u64::from(f.keyframe),
            );
            put(&mut b, u64::from(f.len));
            (dts, duration, end) = (f.dts, f.duration, f.offset.wrapping_add(u64::from(f.len)));
        }
        Self {
            path: index.path.clone(),
            bytes: b.into_boxed_slice(),
        }
    }

    /// The video's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes held.
    pub fn packed_len(&self) -> usize {
        self.bytes.len()
    }

    /// The index.
    pub fn unpack(&self) -> VideoIndex {
        unpack(&self.bytes, self.path.clone()).expect("packed by `pack` or checked when read")
    }
}

/// Unpacks bytes `PackedIndex::pack` wrote; `None` for any that it did not.
fn unpack(bytes: &[u8], path: PathBuf) -> Option<VideoIndex> {
    let mut r = Reader(bytes);
    let (container, codec) = match r.take(1)?[0] {
        1 => (Container::Mp4, Codec::H264),
        2 => (Container::Avi, Codec::Mpeg4),
        3 => (Container::Mp4, Codec::Mpeg4),
        4 => (Container::Avi, Codec::H264),
        _ => return None,
    };
    let display = match r.take(1)?[0] {
        d @ 0..=7 => Display {
            turns: d & 3,
            matrix: d & 4 != 0,
        },
        _ => return None,
    };
    let (tags, matrix) = (r.take(1)?[0], r.take(1)?[0]);
    if tags > 7 {
        return None;
    }
    let colour_tags = Signal {
        full_range: (tags & 1 != 0).then_some(tags & 2 != 0),
        matrix: (tags & 4 != 0).then_some(matrix),
    };
    let config_len = usize::try_from(r.varint()?).ok()?;
    if config_len > MAX_CONFIG_BYTES {
        return None;
    }
    let config = r.take(config_len)?.to_vec();
    let size = (
        u32::try_from(r.varint()?).ok()?,
        u32::try_from(r.varint()?).ok()?,
    );
    let timescale = r.varint()?;
    let count = usize::try_from(r.varint()?).ok()?;
    // Checked against what is left before anything is reserved.
    if timescale == 0 || count.checked_mul(MIN_FRAME_BYTES)? > r.0.len() {
        return None;
    }
    let mut frames = Vec::with_capacity(count);
    let (mut dts, mut duration, mut end) = (0i64, 0u32, 0u64);
    for _ in 0..count {
        let f_dts = dts
            .wrapping_add(i64::from(duration))
            .wrapping_add(unzigzag(r.varint()?));
        let pts = f_dts.wrapping_add(unzigzag(r.varint()?));
        let f_duration = duration.wrapping_add(i32::try_from(unzigzag(r.varint()?)).ok()? as u32);
        let at = r.varint()?;
        let offset = end.wrapping_add(unzigzag(at >> 3) as u64);
        let len = u32::try_from(r.varint()?).ok()?;
        frames.push(Frame {
            pts,
            dts: f_dts,
            duration: f_duration,
            keyframe: at & 1 == 1,
            offset,
            len,
            shown: at & 2 != 0,
            edit_start: at & 4 != 0,
        });
        (dts, duration, end) = (f_dts, f_duration, offset.wrapping_add(u64::from(len)));
    }
    r.0.is_empty().then_some(VideoIndex {
        path,
        container,
        codec,
        config,
        size,
        display,
        colour_tags,
        timescale,
        frames,
    })
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

/// Appends `v` as a LEB128 varint.
fn put(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push(v as u8 | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

/// Every frame of `index` inside a file of `file_len` bytes and of a length a frame can have.
fn fits(index: &VideoIndex, file_len: u64) -> bool {
    index.frames.iter().all(|f| {
        u64::from(f.len) < MAX_FRAME_BYTES
            && f.offset
                .checked_add(u64::from(f.len))
                .is_some_and(|end| end <= file_len)
    })
}

/// A video to index: its name (the index's `path`, and its entry's name in the index file)
/// and where its bytes lie.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VideoAt {
    /// The video's name: its file, or for a member of a tar shard `shard.tar/member`.
    pub name: PathBuf,
    /// The local file that holds it.
    pub file: PathBuf,
    /// Its first byte in `file`.
    pub offset: u64,
    /// Its length (`None`: to the file's end).
    pub len: Option<u64>,
}

impl VideoAt {
    /// A video that is a whole file.
    pub fn whole(path: &Path) -> Self {
        Self {
            name: path.to_path_buf(),
            file: path.to_path_buf(),
            offset: 0,
            len: None,
        }
    }

    /// Indexes the video from its tables.
    ///
    /// # Errors
    /// As [`VideoIndex::open_typed`].
    pub fn index(&self) -> Result<VideoIndex, VideoFailure> {
        match self.len {
            None if self.offset == 0 && self.name == self.file => {
                VideoIndex::open_typed(&self.file)
            }
            len => {
                let file = std::fs::File::open(&self.file)?;
                let len = match len {
                    Some(len) => len,
                    None => file.metadata()?.len().saturating_sub(self.offset),
                };
                VideoIndex::open_span(self.name.clone(), &file, self.offset, len)
            }
        }
    }
}

/// Indexes the videos `videos`: each from the index file `cache` where its entry still
/// matches the file that holds it (size and modification time), from its own tables
/// otherwise, on `threads` threads. When anything was indexed anew, `cache` is rewritten with
/// every video indexed (best effort). A video that cannot be indexed is `None`.
pub fn index_videos(
    videos: &[VideoAt],
    cache: Option<&Path>,
    threads: usize,
) -> (Vec<Option<PackedIndex>>, IndexStats) {
    let start = Instant::now();
    let base = cache.and_then(Path::parent).unwrap_or(Path::new(""));
    let mut kept = cache.map_or_else(HashMap::new, |c| read_file(c).unwrap_or_default());
    let stamps: Vec<Option<Stamp>> = videos.iter().map(|v| Stamp::of(&v.file)).collect();
    let mut out: Vec<Option<PackedIndex>> = Vec::with_capacity(videos.len());
    let mut todo = Vec::new();
    for (k, video) in videos.iter().enumerate() {
        let hit = stamps[k].and_then(|stamp| {
            let (at, bytes) = kept.remove(key(&video.name, base).as_os_str().as_bytes())?;
            let len = video.len.unwrap_or(stamp.size.saturating_sub(video.offset));
            // Unpacked once to check it: a damaged entry is a miss.
            let index =
                unpack(&bytes, video.name.clone()).filter(|i| at == stamp && fits(i, len))?;
            Some(PackedIndex {
                path: index.path,
                bytes,
            })
        });
        if hit.is_none() {
            todo.push(k);
        }
        out.push(hit);
    }
    let cached = videos.len() - todo.len();
    let built = build(videos, &todo, threads);
    let mut failed = 0;
    for (k, index) in todo.iter().zip(built) {
        failed += usize::from(index.is_none());
        out[*k] = index;
    }
    let mut stats = IndexStats {
        videos: videos.len(),
        cached,
        built: todo.len() - failed,
        failed,
        packed_bytes: out.iter().flatten().map(PackedIndex::packed_len).sum(),
        ..IndexStats::default()
    };
    if let Some(cache) = cache.filter(|_| stats.built > 0) {
        match write_file(cache, base, &stamps, &out) {
            Ok(()) => stats.saved = Some(cache.to_path_buf()),
            Err(e) => tracing::debug!("could not save the video index {}: {e}", cache.display()),
        }
    }
    stats.seconds = start.elapsed().as_secs_f64();
    (out, stats)
}

/// Indexes `videos[k]` for each `k` of `todo`, on up to `threads` threads, in `todo`'s order.
fn build(videos: &[VideoAt], todo: &[usize], threads: usize) -> Vec<Option<PackedIndex>> {
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<PackedIndex>>> = Mutex::new(vec![None; todo.len()]);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(&k) = todo.get(i) else { break };
        // A failure is named later, when the loader reaches the video and tries again.
        let index = match videos[k].index() {
            Ok(index) => Some(PackedIndex::pack(&index)),
            Err(VideoFailure::Io(_) | VideoFailure::Video(_)) => None,
        };
        done.lock().expect("no panic while held")[i] = index;
    };
    std::thread::scope(|s| {
        for _ in 1..threads.clamp(1, todo.len().max(1)) {
            s.spawn(work);
        }
        work();
    });
    done.into_inner().expect("no panic while held")
}

/// A video's name in the index file: relative to the file's folder when inside it, so a
/// dataset folder that moves keeps its index.
fn key(path: &Path, base: &Path) -> PathBuf {
    path.strip_prefix(base).unwrap_or(path).to_path_buf()
}

fn write_file(
    cache: &Path,
    base: &Path,
    stamps: &[Option<Stamp>],
    indexes: &[Option<PackedIndex>],
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    buf.extend_from_slice(MAGIC);
    let kept: Vec<_> = stamps
        .iter()
        .zip(indexes)
        .filter_map(|(s, i)| Some(((*s)?, i.as_ref()?)))
        .collect();
    put(&mut buf, kept.len() as u64);
    for (stamp, index) in kept {
        let name = key(&index.path, base);
        let name = name.as_os_str().as_bytes();
        put(&mut buf, name.len() as u64);
        buf.extend_from_slice(name);
        put(&mut buf, stamp.size);
        put(&mut buf, zigzag(stamp.mtime));
        put(&mut buf, u64::from(stamp.mtime_ns));
        put(&mut buf, index.bytes.len() as u64);
        buf.extend_from_slice(&index.bytes);
    }
    let sum = checksum(&buf[MAGIC.len()..]);
    buf.extend_from_slice(&sum.to_le_bytes());
    let mut tmp = cache.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    std::fs::write(&tmp, &buf)?;
    std::fs::rename(&tmp, cache).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// An index file's entries: by name, the file's stamp and the packed index.
type Entries = HashMap<Vec<u8>, (Stamp, Box<[u8]>)>;

/// The entries of the index file at `path`, by name; `None` when it is missing or does not
/// parse as a whole.
fn read_file(path: &Path) -> Option<Entries> {
    let bytes = std::fs::read(path).ok()?;
    let parsed = parse(&bytes);
    if parsed.is_none() && bytes.starts_with(&MAGIC[..7]) {
        tracing::info!(
            "{}: an older hpuload's video index; indexing again",
            path.display()
        );
    } else if parsed.is_none() {
        tracing::warn!("{}: not a video index file; indexing again", path.display());
    }
    parsed
}

/// FNV-1a, 64 bits: catches a damaged file (not a forged one, which needs write access to
/// the dataset anyway).
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Checks an index file's bytes as [`index_videos`] reads them (magic, checksum, entries,
/// each entry's packed index) and counts the entries that unpack; `None` for a file it would
/// not use. For the fuzz target.
#[doc(hidden)]
pub fn parse_index_file(bytes: &[u8]) -> Option<usize> {
    let entries = parse(bytes)?;
    Some(
        entries
            .values()
            .filter(|(_, packed)| unpack(packed, PathBuf::new()).is_some())
            .count(),
    )
}

/// Parses an index file's bytes into its entries: name, stamp, packed index (not yet checked).
fn parse(bytes: &[u8]) -> Option<Entries> {
    let body = bytes.strip_prefix(MAGIC)?;
    let (body, sum) = body.split_at_checked(body.len().checked_sub(8)?)?;
    if checksum(body).to_le_bytes() != sum {
        return None;
    }
    let mut r = Reader(body);
    let count = r.varint()?;
    let mut entries = HashMap::new();
    for _ in 0..count {
        let name_len = usize::try_from(r.varint()?).ok()?;
        let name = r.take(name_len)?.to_vec();
        let stamp = Stamp {
            size: r.varint()?,
            mtime: unzigzag(r.varint()?),
            mtime_ns: u32::try_from(r.varint()?).ok()?,
        };
        let len = usize::try_from(r.varint()?).ok()?;
        let packed = r.take(len)?.into();
        entries.insert(name, (stamp, packed));
    }
    r.0.is_empty().then_some(entries)
}

/// Reads from a byte slice, each `None` past its end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    /// A LEB128 varint of at most ten bytes.
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Some(v);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/video")
            .join(name)
    }

    fn files(paths: &[PathBuf]) -> Vec<VideoAt> {
        paths.iter().map(|p| VideoAt::whole(p)).collect()
    }

    /// A dataset folder holding copies of the test videos, and a file that is not a video.
    fn folder(tag: &str) -> (PathBuf, Vec<PathBuf>) {
        let dir = std::env::temp_dir().join(format!("hpuload-vidx-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("a")).unwrap();
        let mut paths = Vec::new();
        for name in [
            "high_bframes.mp4",
            "main_cabac.mp4",
            "baseline.mp4",
            "vfr.mp4",
        ] {
            let to = dir.join("a").join(name);
            std::fs::copy(fixture(name), &to).unwrap();
            paths.push(to);
        }
        let bad = dir.join("a/not_a_video.mp4");
        std::fs::write(&bad, b"not a video at all").unwrap();
        paths.push(bad);
        (dir, paths)
    }

    #[test]
    fn a_second_indexing_reads_every_video_from_the_file_and_gives_the_same_index() {
        let (dir, paths) = folder("again");
        let file = IndexCache::Beside.file(&dir).unwrap();
        let (first, stats) = index_videos(&files(&paths), Some(&file), 2);
        assert_eq!((stats.cached, stats.built, stats.failed), (0, 4, 1));
        assert_eq!(stats.saved.as_deref(), Some(file.as_path()));
        let (second, stats) = index_videos(&files(&paths), Some(&file), 2);
        // The unreadable one is tried again (it is named when the loader reaches it).
        assert_eq!((stats.cached, stats.built, stats.failed), (4, 0, 1));
        assert_eq!(stats.saved, None, "nothing new: the file is not rewritten");
        assert_eq!(first, second);
        for (path, index) in paths.iter().zip(&second).take(4) {
            assert_eq!(
                index.as_ref().unwrap().unpack(),
                VideoIndex::open(path).unwrap()
            );
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_video_changed_since_it_was_indexed_is_indexed_again() {
        let (dir, paths) = folder("changed");
        let file = IndexCache::Beside.file(&dir).unwrap();
        index_videos(&files(&paths), Some(&file), 1);
        // Another video under the same name: a different size.
        std::fs::copy(fixture("vfr.mp4"), &paths[0]).unwrap();
        let (indexes, stats) = index_videos(&files(&paths), Some(&file), 1);
        assert_eq!((stats.cached, stats.built), (3, 1));
        assert_eq!(
            indexes[0].as_ref().unwrap().unpack(),
            VideoIndex::open(&paths[0]).unwrap()
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_damaged_index_file_is_a_miss_never_a_wrong_index() {
        let (dir, paths) = folder("damaged");
        let file = IndexCache::Beside.file(&dir).unwrap();
        index_videos(&files(&paths), Some(&file), 1);
        let whole = std::fs::read(&file).unwrap();
        assert!(parse(&whole).is_some());
        // Every cut, and every changed byte, is refused as a whole.
        for cut in (0..whole.len()).step_by(97) {
            assert!(parse(&whole[..cut]).is_none(), "cut at {cut}");
            let mut flipped = whole.clone();
            flipped[cut] ^= 0x10;
            assert!(parse(&flipped).is_none(), "byte {cut} changed");
        }
        // An entry that does not unpack, or whose frames lie past the end of its file (in a
        // file whose checksum is right): that video is indexed again.
        let stamps: Vec<_> = paths.iter().map(|p| Stamp::of(p)).collect();
        let (good, _) = index_videos(&files(&paths), None, 1);
        let mut past_the_end = good[3].as_ref().unwrap().unpack();
        past_the_end.frames[2].offset = stamps[3].unwrap().size;
        let mut cut = good[3].clone().unwrap();
        cut.bytes = cut.bytes[..cut.bytes.len() - 1].into();
        for damaged in [PackedIndex::pack(&past_the_end), cut] {
            let mut indexes = good.clone();
            indexes[3] = Some(damaged);
            write_file(&file, &dir, &stamps, &indexes).unwrap();
            let (again, stats) = index_videos(&files(&paths), Some(&file), 1);
            assert_eq!((stats.cached, stats.built), (3, 1));
            assert_eq!(again, good);
        }
        // Garbage: every video is indexed again, and the file replaced.
        std::fs::write(&file, b"HPUVIDX3 and then nonsense").unwrap();
        let (_, stats) = index_videos(&files(&paths), Some(&file), 1);
        assert_eq!((stats.cached, stats.built), (0, 4));
        assert!(parse(&std::fs::read(&file).unwrap()).is_some());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn packing_keeps_every_field_of_every_frame_in_under_a_quarter_of_the_plain_frames() {
        for name in [
            "high_bframes.mp4",
            "main_cabac.mp4",
            "baseline.mp4",
            "vfr.mp4",
            "xvid.avi",
            "divx_bframes.avi",
            "mp4v_bframes.mp4",
            "turned_cw.mp4",
            "turned_movie.mp4",
            "colr_only.mp4",
            "cut.mp4",
        ] {
            let index = VideoIndex::open(fixture(name)).unwrap();
            let packed = PackedIndex::pack(&index);
            // (The container and codec too: MPEG-4 Part 2 comes in AVI files and in MP4; how
            // the frames are shown, the colours the container declares, the frames an edit
            // list cuts.)
            assert_eq!(packed.unpack(), index, "{name}");
            // The frames' part, past the codec, the display and colour tags, the `avcC` record
            // and the sizes.
            let frames = packed.packed_len() - index.config.len() - 19;
            let plain = index.frames.len() * std::mem::size_of::<Frame>();
            assert!(frames * 4 < plain, "{name}: {frames} of {plain}");
        }
        // Extremes round-trip too: crafted files can hold any values.
        let mut index = VideoIndex::open(fixture("vfr.mp4")).unwrap();
        index.frames[0] = Frame {
            pts: i64::MIN,
            dts: i64::MAX,
            duration: u32::MAX,
            keyframe: true,
            offset: u64::MAX,
            len: u32::MAX,
            shown: false,
            edit_start: true,
        };
        index.frames[1].pts = i64::MAX;
        assert_eq!(PackedIndex::pack(&index).unpack(), index);
    }

    #[test]
    fn a_moved_dataset_folder_keeps_its_index() {
        let (dir, paths) = folder("moved");
        let file = IndexCache::Beside.file(&dir).unwrap();
        index_videos(&files(&paths), Some(&file), 1);
        let moved = dir.with_extension("moved");
        let _ = std::fs::remove_dir_all(&moved);
        std::fs::rename(&dir, &moved).unwrap();
        let paths: Vec<_> = paths
            .iter()
            .map(|p| moved.join(p.strip_prefix(&dir).unwrap()))
            .collect();
        let (indexes, stats) = index_videos(&files(&paths), Some(&moved.join(INDEX_FILE)), 1);
        assert_eq!(stats.cached, 4);
        assert_eq!(indexes[1].as_ref().unwrap().unpack().path, paths[1]);
        std::fs::remove_dir_all(moved).unwrap();
    }
}
