//! The frame index of an MP4/MOV file's first video track, from its sample tables.
//!
//! Only the top-level box headers are read to find the boxes that describe the media (`ftyp`,
//! `moov`, and in a fragmented file each `moof`); the media data (`mdat`, most of the file) is
//! never read, so indexing a video costs a few small reads whatever its length. The tables are
//! parsed by Mozilla's `mp4parse` (the parser Firefox uses on untrusted files), run behind a
//! panic guard like the other third-party parsers of untrusted bytes here; movie fragments by
//! `fragments.rs`.

use std::fs::File;
use std::io::Cursor;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use mp4parse::unstable::{create_sample_table, CheckedInteger};
use mp4parse::{CodecType, SampleEntry, TrackType, VideoCodecSpecific};

use super::display::{self, Display};
use super::fragments::{self, track_defaults, Fragments};
use super::sps::Signal;
use super::{avi, mpeg4};
use crate::Error;

/// The most bytes of `moov` read (a two-hour 60 fps video's tables are a few MiB).
const MAX_MOOV_BYTES: u64 = 256 << 20;

/// A frame's length must be below this (a real one is at most a few MiB).
pub(crate) const MAX_FRAME_BYTES: u64 = 1 << 30;

/// The video codecs the index accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// H.264 / AVC (`avc1`, `avc3`), with its `avcC` decoder configuration.
    H264,
    /// MPEG-4 Part 2 (Xvid, DivX, FFmpeg's `mpeg4`) in an AVI file or in MP4 (`mp4v`), its
    /// headers in the stream or in the configuration (an AVI stream format's extra bytes, an
    /// MP4 `esds` descriptor's decoder-specific information). Decoded by FFmpeg's libavcodec
    /// only.
    Mpeg4,
}

impl Codec {
    /// The codec's name, in words.
    pub fn name(self) -> &'static str {
        match self {
            Self::H264 => "H.264",
            Self::Mpeg4 => "MPEG-4 Part 2",
        }
    }
}

/// The kind of file a video is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    /// ISO BMFF: MP4, MOV, M4V (fragmented or not).
    Mp4,
    /// RIFF AVI (UCF101's and HMDB51's files).
    Avi,
}

/// One frame of the index, in decode order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Presentation time, in the track's timescale, edit list applied as FFmpeg applies it.
    pub pts: i64,
    /// Decode time, in the track's timescale.
    pub dts: i64,
    /// How long it is shown, in the track's timescale (its `stts` delta).
    pub duration: u32,
    /// A sync sample: decoding can start here.
    pub keyframe: bool,
    /// The compressed sample's first byte in the file.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u32,
    /// Shown: false for a frame the edit list cuts (before its start or past its end), which
    /// FFmpeg decodes only where later frames refer to it and never hands over.
    pub shown: bool,
    /// The first frame of an edit after the first: FFmpeg's reader plays each edit's frames
    /// after the last edit's, so decoding a frame never reaches back before its edit's start.
    pub edit_start: bool,
}

/// Why a file has no usable frame index.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum VideoError {
    /// The top-level boxes do not parse (not an MP4/MOV file, or truncated).
    #[error("not an MP4/MOV file: {0}")]
    NotMp4(String),
    /// No `moov` box before the end of the file.
    #[error("no `moov` box (the file is truncated, or was not finished when written)")]
    NoMoov,
    /// The movie box is larger than any real one.
    #[error("the `moov` box claims {0} bytes, more than the {max} MiB read", max = MAX_MOOV_BYTES >> 20)]
    MoovTooLarge(u64),
    /// `mp4parse` refused the movie box.
    #[error("the movie box does not parse: {0}")]
    Moov(String),
    /// No track is video.
    #[error("no video track")]
    NoVideoTrack,
    /// A video codec other than H.264 or MPEG-4 Part 2.
    #[error("the video is {0}; hpuload decodes H.264 (AVC) and MPEG-4 Part 2 video")]
    Codec(&'static str),
    /// An AVI file's headers or chunks are malformed, or hold what hpuload does not index.
    #[error("AVI: {0}")]
    Avi(String),
    /// A movie fragment (`moof`) is malformed.
    #[error("a movie fragment (`moof`) is malformed: {0}")]
    Fragment(String),
    /// The sample tables are missing or inconsistent.
    #[error("the video track's sample tables are missing or inconsistent")]
    Tables,
    /// A sample larger than any real frame.
    #[error("frame {frame} claims {len} bytes")]
    FrameTooLarge {
        /// The frame, in decode order.
        frame: usize,
        /// Its claimed length.
        len: u64,
    },
    /// A frame's bytes lie past the end of the file (a truncated download).
    #[error("frame {frame}'s bytes lie past the end of the file's {size} bytes (truncated?)")]
    PastTheEnd {
        /// The first such frame, in decode order.
        frame: usize,
        /// The file's size.
        size: u64,
    },
    /// The parser gave up on malformed bytes.
    #[error("malformed data: the parser gave up ({0})")]
    Panicked(String),
    /// H.264 sampled otherwise than 8-bit 4:2:0 (4:4:4 or 4:2:2 chroma, grey, or more bits),
    /// which FFmpeg decodes to other pixel formats than the one hpuload converts.
    #[error("the video is H.264 with {0}; hpuload decodes 8-bit 4:2:0 H.264")]
    Sampling(String),
    /// The `avcC` decoder configuration record is malformed.
    #[error("the H.264 configuration record (`avcC`) is malformed: {0}")]
    Config(&'static str),
    /// The decoder could not be created.
    #[error("the H.264 decoder could not start: {0}")]
    Decoder(String),
    /// A frame of a folder of frames (a JPEG file) does not decode, or differs in size.
    #[error("frame {file}: {reason}")]
    Frame {
        /// The frame's file.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// A frame's NAL units do not fit in its bytes.
    #[error("frame {frame} is malformed: {reason}")]
    Sample {
        /// The frame, in decode order.
        frame: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// The decoder rejected a frame (or, with no frame, the parameter sets).
    #[error("{} does not decode (OpenH264 state {state:#x}: {})",
        frame.map_or("the parameter sets".to_string(), |f| format!("frame {f}")),
        decode_state(*state))]
    Decode {
        /// The frame, in decode order.
        frame: Option<usize>,
        /// OpenH264's `DECODING_STATE` bits.
        state: i32,
    },
    /// FFmpeg's decoder rejected a frame (or, with no frame, the parameter sets or the end of
    /// the stream).
    #[error("{} does not decode (libavcodec: {reason})",
        frame.map_or("the stream".to_string(), |f| format!("frame {f}")))]
    Libav {
        /// The frame, in decode order.
        frame: Option<usize>,
        /// FFmpeg's words.
        reason: String,
    },
    /// The video has no clip for the sampler's parameters.
    #[error("no clip: {0}")]
    Clips(#[from] super::ClipError),
    /// The decoder gave fewer of the wanted frames than asked for.
    #[error("the decoder gave {got} of the {wanted} wanted frames")]
    Missing {
        /// Frames asked for.
        wanted: usize,
        /// Frames that came out.
        got: usize,
    },
}

/// What OpenH264's decoding-state bits say, in words.
fn decode_state(state: i32) -> String {
    const BITS: [(i32, &str); 11] = [
        (0x01, "frame pending"),
        (0x02, "reference lost"),
        (0x04, "bitstream error"),
        (0x08, "dependency lost"),
        (0x10, "no parameter sets"),
        (0x20, "concealed"),
        (0x40, "reference list null"),
        (0x1000, "invalid argument"),
        (0x2000, "not initialised"),
        (0x4000, "out of memory"),
        (0x8000, "picture buffer too small"),
    ];
    let words: Vec<&str> = BITS
        .iter()
        .filter(|(bit, _)| state & bit != 0)
        .map(|(_, w)| *w)
        .collect();
    if words.is_empty() {
        "unknown".into()
    } else {
        words.join(", ")
    }
}

/// Why a video could not be indexed or decoded, typed: the file's I/O, or its content.
#[derive(Debug, thiserror::Error)]
pub enum VideoFailure {
    /// The file could not be read.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// What it holds is not an indexable video.
    #[error(transparent)]
    Video(#[from] VideoError),
}

/// A video file's frame index: the first video track's frames in decode order, with what a
/// decoder needs to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VideoIndex {
    /// The file.
    pub path: PathBuf,
    /// The kind of file.
    pub container: Container,
    /// The codec.
    pub codec: Codec,
    /// The decoder configuration: H.264's record (`avcC`: profile, SPS and PPS); MPEG-4
    /// Part 2's headers up to its VOL header (empty when the stream carries them).
    pub config: Vec<u8>,
    /// Width and height from the sample entry, in pixels: the coded frame's.
    pub size: (u32, u32),
    /// How the frames are shown (turned by the track's display matrix).
    pub display: Display,
    /// The colours the container declares (an MP4 sample entry's `colr` box), which FFmpeg
    /// takes where the stream's own headers are silent.
    pub colour_tags: Signal,
    /// Ticks per second of `pts` and `dts`.
    pub timescale: u64,
    /// The frames, in decode order.
    pub frames: Vec<Frame>,
}

/// A top-level box: its type and where its body lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TopBox {
    kind: [u8; 4],
    /// Its header's length: the box starts at `start - header`.
    header: u64,
    start: u64,
    len: u64,
}

impl VideoIndex {
    /// Indexes the video at `path` from its tables (its media data is not read).
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be read; [`Error::Format`] naming the file and a
    /// [`VideoError`] for anything else.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        Self::open_typed(path).map_err(|e| match e {
            VideoFailure::Io(source) => Error::Io {
                path: path.to_path_buf(),
                source,
            },
            VideoFailure::Video(e) => Error::Format {
                path: path.to_path_buf(),
                reason: e.to_string(),
            },
        })
    }

    /// [`VideoIndex::open`], with the failure typed.
    ///
    /// # Errors
    /// [`VideoFailure::Io`] when the file cannot be read, [`VideoFailure::Video`] for the rest.
    pub fn open_typed(path: impl AsRef<Path>) -> Result<Self, VideoFailure> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path)?;
        let size = file.metadata()?.len();
        Self::read_with(path, size, &|at, buf| file.read_exact_at(buf, at))
    }

    /// Indexes the video held in `len` bytes of `file` from `offset` (a member of a tar
    /// shard), named `name` in messages. Frame offsets count from the video's first byte.
    ///
    /// # Errors
    /// As [`VideoIndex::open_typed`].
    pub fn open_span(
        name: impl Into<PathBuf>,
        file: &File,
        offset: u64,
        len: u64,
    ) -> Result<Self, VideoFailure> {
        let read = |at: u64, buf: &mut [u8]| {
            let end = at.checked_add(buf.len() as u64).filter(|&end| end <= len);
            match end.and_then(|_| offset.checked_add(at)) {
                Some(at) => file.read_exact_at(buf, at),
                None => Err(std::io::ErrorKind::UnexpectedEof.into()),
            }
        };
        Self::read_with(name.into(), len, &read)
    }

    /// Indexes the video whose bytes are `bytes` (read whole: a member of a shard on object
    /// storage), named `name` in messages.
    ///
    /// # Errors
    /// As [`VideoIndex::open_typed`].
    pub fn from_bytes(name: impl Into<PathBuf>, bytes: &[u8]) -> Result<Self, VideoFailure> {
        let read = |at: u64, buf: &mut [u8]| {
            let from = usize::try_from(at).ok();
            match from.and_then(|from| bytes.get(from..from.checked_add(buf.len())?)) {
                Some(part) => {
                    buf.copy_from_slice(part);
                    Ok(())
                }
                None => Err(std::io::ErrorKind::UnexpectedEof.into()),
            }
        };
        Self::read_with(name.into(), bytes.len() as u64, &read)
    }

    /// The index of a video of `size` bytes that `read(offset, buffer)` reads.
    fn read_with(path: PathBuf, size: u64, read: &Reader<'_>) -> Result<Self, VideoFailure> {
        let mut head = [0u8; 12];
        if size >= 12 {
            read(0, &mut head)?;
        }
        let container = if avi::is_avi(&head) {
            Container::Avi
        } else {
            Container::Mp4
        };
        let ((codec, config, frame_size, timescale, frames), (display, colour_tags)) =
            match container {
                Container::Avi => (avi::index(read, size)?, Default::default()),
                Container::Mp4 => Self::movie(read, size)?,
            };
        if let Some(frame) = frames
            .iter()
            .position(|f| f.offset.saturating_add(u64::from(f.len)) > size)
        {
            return Err(VideoError::PastTheEnd { frame, size }.into());
        }
        Ok(Self {
            path,
            container,
            codec,
            config,
            size: frame_size,
            display,
            colour_tags,
            timescale,
            frames,
        })
    }

    /// The frames' width and height as shown: turned by the display matrix.
    pub fn display_size(&self) -> (u32, u32) {
        self.display.size(self.size)
    }

    /// An MP4/MOV file's index, from its boxes, how its frames are shown and the colours it
    /// declares.
    fn movie(read: &Reader<'_>, size: u64) -> Result<(Parsed, (Display, Signal)), VideoFailure> {
        let boxes = top_level_boxes(read, size).map_err(|e| match e {
            Scan::Io(source) => VideoFailure::Io(source),
            Scan::Bad(e) => VideoFailure::Video(e),
        })?;
        // `mp4parse` reads a stream of boxes: give it `ftyp` and `moov`, header and body,
        // and none of the media data.
        let mut head = Vec::new();
        let mut moov = false;
        for b in boxes
            .iter()
            .filter(|b| &b.kind == b"ftyp" || &b.kind == b"moov")
        {
            moov |= &b.kind == b"moov";
            if b.len > MAX_MOOV_BYTES {
                return Err(VideoError::MoovTooLarge(b.len).into());
            }
            let at = head.len();
            head.resize(at + 8 + b.len as usize, 0);
            head[at..at + 4].copy_from_slice(&((8 + b.len) as u32).to_be_bytes());
            head[at + 4..at + 8].copy_from_slice(&b.kind);
            read(b.start, &mut head[at + 8..])?;
        }
        if !moov {
            return Err(VideoError::NoMoov.into());
        }
        check_tables(&mut head)?;
        // Fragmented MP4: the frames are in each `moof`, read whole (they are small).
        let mut moofs = Vec::new();
        let mut moof_bytes = 0u64;
        for b in boxes.iter().filter(|b| &b.kind == b"moof") {
            moof_bytes += b.len;
            if moof_bytes > MAX_MOOV_BYTES {
                return Err(VideoError::MoovTooLarge(moof_bytes).into());
            }
            let mut body = vec![0; b.len as usize];
            read(b.start, &mut body)?;
            // Data offsets count from the box's header.
            moofs.push((b.start - b.header, body));
        }
        let (mut parsed, display) = guarded(|| from_movie(&head, &moofs, size))?;
        if let Some(config) = in_band_parameter_sets(&parsed, read, size)? {
            check_sampling(&config)?;
            parsed.1 = config;
        }
        Ok((parsed, (display, super::sps::container_signal(&head))))
    }

    /// The shown frames' indices in presentation order.
    pub fn presentation_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.frames.len())
            .filter(|&i| self.frames[i].shown)
            .collect();
        order.sort_by_key(|&i| (self.frames[i].pts, i));
        order
    }

    /// The last keyframe at or before frame `frame` (decode order): where decoding it starts.
    pub fn keyframe_before(&self, frame: usize) -> Option<usize> {
        (0..=frame.min(self.frames.len().checked_sub(1)?))
            .rev()
            .find(|&i| self.frames[i].keyframe)
    }

    /// Seconds from the first presented frame to the end of the last, from the timestamps.
    pub fn duration_seconds(&self) -> f64 {
        let order = self.presentation_order();
        match (order.first(), order.last()) {
            (Some(&a), Some(&b)) if self.timescale > 0 => {
                // In f64: crafted timestamps may be far apart.
                let span = self.frames[b].pts as f64 - self.frames[a].pts as f64;
                let step = if order.len() > 1 {
                    span / (order.len() - 1) as f64
                } else {
                    0.0
                };
                (span + step) / self.timescale as f64
            }
            _ => 0.0,
        }
    }
}

enum Scan {
    Io(std::io::Error),
    Bad(VideoError),
}

/// Reads a video's bytes: `read(offset, buffer)` fills `buffer` from `offset`.
pub(super) type Reader<'a> = dyn Fn(u64, &mut [u8]) -> std::io::Result<()> + 'a;

/// The top-level boxes of a file of `size` bytes, from their headers alone.
fn top_level_boxes(read: &Reader<'_>, size: u64) -> Result<Vec<TopBox>, Scan> {
    let mut boxes = Vec::new();
    let mut at = 0u64;
    while at < size {
        let mut header = [0u8; 16];
        let want = (size - at).min(16) as usize;
        if want < 8 {
            return Err(Scan::Bad(VideoError::NotMp4(format!(
                "{want} stray bytes at the end"
            ))));
        }
        read(at, &mut header[..want]).map_err(Scan::Io)?;
        let kind: [u8; 4] = header[4..8].try_into().expect("4 bytes");
        if at == 0
            && !matches!(
                &kind,
                b"ftyp" | b"moov" | b"free" | b"skip" | b"wide" | b"mdat"
            )
        {
            return Err(Scan::Bad(VideoError::NotMp4(format!(
                "the first box is {:?}",
                String::from_utf8_lossy(&kind)
            ))));
        }
        let small = u64::from(u32::from_be_bytes(header[..4].try_into().expect("4 bytes")));
        let (header_len, total) = match small {
            0 => (8, size - at),
            1 if want == 16 => (16, u64::from_be_bytes(header[8..16].try_into().expect("8"))),
            1 => {
                return Err(Scan::Bad(VideoError::NotMp4(
                    "a box's 64-bit size is cut off".into(),
                )))
            }
            n => (8, n),
        };
        // A cut-off download ends inside its media data: the frames past the cut are named
        // when the index is checked against the file's size.
        let total = if &kind == b"mdat" && total > size - at {
            size - at
        } else {
            total
        };
        if total < header_len || total > size - at {
            return Err(Scan::Bad(VideoError::NotMp4(format!(
                "box {:?} at byte {at} claims {total} bytes, past the file's {size}",
                String::from_utf8_lossy(&kind)
            ))));
        }
        boxes.push(TopBox {
            kind,
            header: header_len,
            start: at + header_len,
            len: total - header_len,
        });
        at += total;
    }
    Ok(boxes)
}

/// The smallest entry of each table whose entries `mp4parse` reserves room for from the
/// count the table claims: `(box type, offset of the count in the body, entry bytes)`.
const TABLES: &[(&[u8; 4], usize, u64)] = &[
    (b"dref", 4, 8),
    (b"stts", 4, 8),
    (b"ctts", 4, 8),
    (b"stss", 4, 4),
    (b"stsc", 4, 12),
    (b"stco", 4, 4),
    (b"co64", 4, 8),
    (b"elst", 4, 12),
];

/// Boxes that hold boxes, with the bytes before their first child.
const CONTAINERS: &[(&[u8; 4], usize)] = &[
    (b"moov", 0),
    (b"trak", 0),
    (b"edts", 0),
    (b"mdia", 0),
    (b"minf", 0),
    (b"dinf", 0),
    (b"stbl", 0),
    (b"mvex", 0),
    (b"stsd", 8),
    (b"avc1", 78),
    (b"avc3", 78),
    (b"hvc1", 78),
    (b"hev1", 78),
    (b"vp09", 78),
    (b"av01", 78),
    (b"mp4v", 78),
    (b"encv", 78),
];

/// Refuses, before `mp4parse` reserves memory for what they claim, a box whose size runs
/// past the box that holds it and a table whose entry count claims more entries than its box
/// holds (the `video_index` fuzz target found a sample description claiming a billion
/// entries, and a handler box claiming 4 GiB inside a movie of a few hundred bytes). The
/// user data and metadata boxes (`udta`, `meta`: titles, tags, cover art), which hpuload does
/// not read and whose items mp4parse reserves memory for as they claim (the `video_decode`
/// target found a tag claiming 4 GiB), become `free` boxes, which it skips.
fn check_tables(boxes: &mut [u8]) -> Result<(), VideoError> {
    walk(boxes, 0)
}

fn walk(mut boxes: &mut [u8], depth: u32) -> Result<(), VideoError> {
    if depth > 16 {
        return Err(VideoError::Moov("boxes nest too deeply".into()));
    }
    while boxes.len() >= 8 {
        let small = u32::from_be_bytes(boxes[..4].try_into().expect("4 bytes"));
        let kind: [u8; 4] = boxes[4..8].try_into().expect("4 bytes");
        let kind = &kind;
        let (header, size) = match small {
            0 => (8, boxes.len() as u64),
            1 if boxes.len() >= 16 => (
                16,
                u64::from_be_bytes(boxes[8..16].try_into().expect("8 bytes")),
            ),
            n => (8, u64::from(n)),
        };
        if size < header || size > boxes.len() as u64 {
            return Err(VideoError::Moov(format!(
                "box `{}` claims {size} bytes where {} remain",
                String::from_utf8_lossy(kind),
                boxes.len()
            )));
        }
        let size = size as usize;
        let (this, rest) = std::mem::take(&mut boxes).split_at_mut(size);
        boxes = rest;
        if matches!(kind, b"udta" | b"meta") {
            this[4..8].copy_from_slice(b"free");
            continue;
        }
        let body = &mut this[header as usize..];
        if let Some(&(_, skip)) = CONTAINERS.iter().find(|(k, _)| *k == kind) {
            if kind == b"stsd" {
                check_count(kind, body, 4, 8)?;
            }
            if let Some(children) = body.get_mut(skip..) {
                walk(children, depth + 1)?;
            }
        } else if let Some(&(_, at, entry)) = TABLES.iter().find(|(k, _, _)| *k == kind) {
            let entry = if kind == b"elst" && body.first() == Some(&1) {
                20
            } else {
                entry
            };
            check_count(kind, body, at, entry)?;
        } else if kind == b"stsz" && body.len() >= 12 && body[4..8] == [0; 4] {
            check_count(kind, body, 8, 4)?;
        }
    }
    Ok(())
}

fn check_count(kind: &[u8; 4], body: &[u8], at: usize, entry: u64) -> Result<(), VideoError> {
    let Some(count) = body.get(at..at + 4) else {
        return Ok(());
    };
    let count = u64::from(u32::from_be_bytes(count.try_into().expect("4 bytes")));
    let room = (body.len() - at - 4) as u64;
    if count.saturating_mul(entry) > room {
        return Err(VideoError::Moov(format!(
            "`{}` claims {count} entries in {room} bytes",
            String::from_utf8_lossy(kind)
        )));
    }
    Ok(())
}

/// What a container's tables give: the codec, its configuration, the picture size, the
/// timescale and the frames in decode order.
pub(super) type Parsed = (Codec, Vec<u8>, (u32, u32), u64, Vec<Frame>);

/// The first video track of the movie `head` (`ftyp` and `moov` boxes) as an index; its
/// frames from the movie fragments `moofs` (where each starts in the file, its body) when
/// there are any (each inside the file's `file_len` bytes).
fn from_movie(
    head: &[u8],
    moofs: &[(u64, Vec<u8>)],
    file_len: u64,
) -> Result<(Parsed, Display), VideoError> {
    // A sample entry mp4parse does not know may fail its parse: name the codec then.
    let context = mp4parse::read_mp4(&mut Cursor::new(head)).map_err(|e| {
        other_codec(head).map_or_else(|| VideoError::Moov(format!("{e:?}")), VideoError::Codec)
    })?;
    let track = context
        .tracks
        .iter()
        .find(|t| t.track_type == TrackType::Video)
        .ok_or(VideoError::NoVideoTrack)?;
    let entry = track
        .stsd
        .as_ref()
        .and_then(|d| d.descriptions.first())
        .ok_or(VideoError::Tables)?;
    // A track whose frames use another sample description than the first (a codec
    // configuration changed midway, as a concatenation can leave it) would be decoded with the
    // wrong one: refused, naming it.
    if let Some(run) = track.stsc.as_ref().and_then(|stsc| {
        stsc.samples
            .iter()
            .find(|run| run.sample_description_index != 1)
    }) {
        return Err(VideoError::Moov(format!(
            "the video track's frames use sample description {} of several (its codec \
             configuration changes midway); hpuload reads a track with one",
            run.sample_description_index
        )));
    }
    let (codec, config, size) = match entry {
        SampleEntry::Video(v) => match (&v.codec_type, &v.codec_specific) {
            (CodecType::H264, VideoCodecSpecific::AVCConfig(avcc)) => (
                Codec::H264,
                avcc.to_vec(),
                (u32::from(v.width), u32::from(v.height)),
            ),
            // The `esds` descriptor's decoder-specific information: the headers up to the VOL
            // (FFmpeg's muxer puts them there and nowhere else), kept when they hold one.
            (CodecType::MP4V, VideoCodecSpecific::ESDSConfig(info)) => {
                if let Some(other) = mp4v_object_type(head).and_then(other_visual_object) {
                    return Err(VideoError::Codec(other));
                }
                let config = match mpeg4::time_increment_bits(info) {
                    Ok(Some(_)) => info.to_vec(),
                    Ok(None) => Vec::new(),
                    Err(reason) => return Err(VideoError::Moov(format!("`esds`: {reason}"))),
                };
                let size = (u32::from(v.width), u32::from(v.height));
                (Codec::Mpeg4, config, size)
            }
            (CodecType::VP9, _) => return Err(VideoError::Codec("VP9")),
            (CodecType::VP8, _) => return Err(VideoError::Codec("VP8")),
            (CodecType::AV1, _) => return Err(VideoError::Codec("AV1")),
            (CodecType::H263, _) => return Err(VideoError::Codec("H.263")),
            (CodecType::EncryptedVideo, _) => return Err(VideoError::Codec("encrypted video")),
            _ => return Err(unknown_codec(head)),
        },
        _ => return Err(unknown_codec(head)),
    };
    if codec == Codec::H264 {
        check_sampling(&config)?;
    }
    let timescale = track
        .timescale
        .map(|t| t.0)
        .filter(|&t| t > 0)
        .ok_or(VideoError::Tables)?;
    let display = match &track.tkhd {
        Some(tkhd) => {
            let m = tkhd.matrix;
            let track = [m.a, m.b, m.u, m.c, m.d, m.v, m.x, m.y, m.w];
            Display::from_matrices(track, display::movie_matrix(head)?)
        }
        None => Display::default(),
    };
    let id = track.track_id.ok_or(VideoError::Tables)?;
    let edits = edit_list(head, id)?;
    let movie_scale = context.timescale.map_or(0, |t| t.0);
    // The frames the movie's own tables list (all of them, or those before the first
    // fragment), their edit list applied as FFmpeg's reader applies it.
    let listed = track
        .stts
        .as_ref()
        .is_some_and(|t| t.samples.iter().any(|s| s.sample_count > 0));
    let mut frames = if listed || moofs.is_empty() {
        table_frames(track)?
    } else {
        Vec::new()
    };
    // Checked before the edit list repeats anything.
    if let Some(frame) = frames
        .iter()
        .position(|f| f.offset.saturating_add(u64::from(f.len)) > file_len)
    {
        return Err(VideoError::PastTheEnd {
            frame,
            size: file_len,
        });
    }
    let moov_end = frames
        .last()
        .map_or(0, |f| f.dts.saturating_add(i64::from(f.duration)));
    let most_negative = frames
        .iter()
        .map(|f| f.pts.saturating_sub(f.dts))
        .min()
        .unwrap_or(0);
    if !edits.is_empty() && !frames.is_empty() {
        let scales = (timescale, movie_scale);
        frames = apply_edits(&frames, &edits, scales, track.ctts.is_some())?;
    }
    if !moofs.is_empty() {
        // A fragment's frames follow: the edit list only moves their times, as FFmpeg's
        // reader moves them (back by its first edit's media time, on by an empty edit
        // before it), and negative composition offsets move them on by the largest.
        let offset = fragment_offset(&edits, timescale, movie_scale);
        let defaults = track_defaults(head, id)?;
        let mut fragments = Fragments::new(id, defaults, offset, moov_end, file_len);
        for (at, moof) in moofs {
            fragments.add(moof, *at)?;
        }
        frames.extend(fragments.finish(most_negative));
    }
    Ok(((codec, config, size, timescale, frames), display))
}

/// The most bytes of a video's first keyframe read for its parameter sets.
const MAX_PARAMETER_FRAME: u32 = 4 << 20;

/// For an H.264 video whose configuration record holds no parameter sets (an `avc3` entry:
/// they travel in the stream), a record holding those of its first keyframe, read through
/// `read` (a file of `size` bytes), so that the decoders are primed and the SPS read as for
/// any other video; `None` for any other video, or a keyframe without them (the decoder then
/// refuses the record, naming it).
fn in_band_parameter_sets(
    parsed: &Parsed,
    read: &Reader<'_>,
    size: u64,
) -> Result<Option<Vec<u8>>, VideoFailure> {
    let (codec, config, _, _, frames) = parsed;
    let (Codec::H264, [1, _, _, _, lengths, ..]) = (*codec, config.as_slice()) else {
        return Ok(None);
    };
    if super::AvcConfig::parse(config).is_ok() {
        return Ok(None);
    }
    let nal_length = usize::from(lengths & 3) + 1;
    let Some(key) = frames.iter().find(|f| f.keyframe) else {
        return Ok(None);
    };
    if key.offset.saturating_add(u64::from(key.len)) > size {
        return Ok(None); // named by the check of every frame against the file's size
    }
    let mut sample = vec![0; key.len.min(MAX_PARAMETER_FRAME) as usize];
    read(key.offset, &mut sample)?;
    let (mut sps, mut pps) = (Vec::new(), Vec::new());
    let mut at = 0;
    while at + nal_length <= sample.len() {
        let len = sample[at..at + nal_length]
            .iter()
            .fold(0usize, |v, &b| v << 8 | usize::from(b));
        at += nal_length;
        let Some(nal) = sample.get(at..at.saturating_add(len)) else {
            break;
        };
        at += len;
        match nal.first().map(|h| h & 0x1f) {
            Some(7) if (4..=0xffff).contains(&nal.len()) && sps.len() < 31 => sps.push(nal),
            Some(8) if (1..=0xffff).contains(&nal.len()) && pps.len() < 255 => pps.push(nal),
            _ => {}
        }
    }
    let (Some(first), false) = (sps.first(), pps.is_empty()) else {
        return Ok(None);
    };
    let mut record = vec![1, first[1], first[2], first[3], 0xfc | lengths & 3];
    record.push(0xe0 | sps.len() as u8);
    for nal in &sps {
        record.extend_from_slice(&(nal.len() as u16).to_be_bytes());
        record.extend_from_slice(nal);
    }
    record.push(pps.len() as u8);
    for nal in &pps {
        record.extend_from_slice(&(nal.len() as u16).to_be_bytes());
        record.extend_from_slice(nal);
    }
    Ok(Some(record))
}

/// Refuses H.264 whose configuration's SPS samples its pictures otherwise than 8-bit 4:2:0
/// (a video made from RGB images by x264 is 4:4:4 unless told otherwise): named when the
/// video is indexed, not when its first frame fails to convert. A configuration that does not
/// parse is the decoder's to refuse, with its reason.
fn check_sampling(config: &[u8]) -> Result<(), VideoError> {
    let Some(sampling) = super::AvcConfig::parse(config)
        .ok()
        .and_then(|avc| super::sps::sampling(&avc.sps))
    else {
        return Ok(());
    };
    let chroma = match sampling.0 {
        0 => "grey (4:0:0) pictures",
        1 => "4:2:0 chroma",
        2 => "4:2:2 chroma",
        _ => "4:4:4 chroma",
    };
    match sampling {
        (1, 8, 8) => Ok(()),
        (_, 8, 8) => Err(VideoError::Sampling(chroma.into())),
        (_, luma, _) => Err(VideoError::Sampling(format!("{luma}-bit {chroma}"))),
    }
}

/// The frames a track's sample tables list, in decode order: each one's decode and
/// composition time as the tables give them, its duration (its `stts` delta), keyframe flag
/// and byte range.
fn table_frames(track: &mp4parse::Track) -> Result<Vec<Frame>, VideoError> {
    // The sample count `stsc` implies is reserved before anything is checked (the fuzz target
    // found a chunk claiming billions of samples): it must be the count `stsz` lists.
    let (Some(stsc), Some(stco), Some(stsz)) = (&track.stsc, &track.stco, &track.stsz) else {
        return Err(VideoError::Tables);
    };
    let implied = samples_in_chunks(&stsc.samples, stco.offsets.len());
    let listed = stsz.sample_sizes.len() as u64;
    if (stsz.sample_size == 0 && implied > listed) || implied > 1 << 28 {
        return Err(VideoError::Tables);
    }
    // Composition times as the tables give them: the edit list is applied below.
    let table = create_sample_table(track, CheckedInteger(0)).ok_or(VideoError::Tables)?;
    let mut frames = Vec::with_capacity(table.len());
    for (k, s) in table.iter().enumerate() {
        let (start, end) = (s.start_offset.0, s.end_offset.0);
        let len = end.checked_sub(start).ok_or(VideoError::Tables)?;
        let len = u32::try_from(len)
            .ok()
            .filter(|&l| u64::from(l) < MAX_FRAME_BYTES)
            .ok_or(VideoError::FrameTooLarge { frame: k, len })?;
        frames.push(Frame {
            pts: s.start_composition.0,
            dts: s.start_decode.0,
            duration: 0,
            keyframe: s.sync,
            offset: start,
            len,
            shown: true,
            edit_start: false,
        });
    }
    // Each frame's duration is its `stts` delta, as FFmpeg gives a packet's: the step to the
    // next decode time. The last frame's is the step after the last decode time, which the
    // last-presented frame's composition end shows when it is also the last decoded (and
    // `stts` repeats its last delta otherwise, so the step before it is the same).
    let n = frames.len();
    let last_delta = table
        .iter()
        .enumerate()
        .max_by_key(|(_, s)| s.start_composition.0)
        .filter(|&(k, _)| k + 1 == n)
        .and_then(|(_, s)| s.end_composition.0.checked_sub(s.start_composition.0));
    for k in 0..n {
        let delta = match frames.get(k + 1) {
            Some(next) => next.dts.checked_sub(frames[k].dts),
            None if n > 1 => last_delta.or(frames[k].dts.checked_sub(frames[k - 1].dts)),
            None => last_delta,
        };
        frames[k].duration = delta.and_then(|d| u32::try_from(d).ok()).unwrap_or(0);
    }
    Ok(frames)
}

/// `a * b / c` rounded to the nearest (FFmpeg's `av_rescale`), saturated; 0 for `c` 0.
fn rescale(a: u64, b: u64, c: u64) -> u64 {
    if c == 0 {
        return 0;
    }
    let v = (u128::from(a) * u128::from(b) + u128::from(c) / 2) / u128::from(c);
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// One entry of a track's edit list (`elst`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Edit {
    /// How long it lasts on the movie's timeline, in the movie's timescale.
    duration: u64,
    /// Where in the track's media it starts, in the track's timescale; -1 for an empty edit
    /// (a stretch of the movie in which the track shows nothing: a start delay).
    media_time: i64,
}

/// The edits of track `id`'s edit list in `head` (its `ftyp` and `moov`), in order; none when
/// the track has none. Of two `elst` boxes the last counts, and one without entries is none,
/// as FFmpeg reads them. (`mp4parse` keeps only an empty edit and the edit after it.)
fn edit_list(head: &[u8], id: u32) -> Result<Vec<Edit>, VideoError> {
    let mut edits = Vec::new();
    for (kind, moov) in fragments::children(head)? {
        if &kind != b"moov" {
            continue;
        }
        for (kind, trak) in fragments::children(moov)? {
            if &kind != b"trak" {
                continue;
            }
            let boxes = fragments::children(trak)?;
            let track_id = boxes.iter().find(|(k, _)| k == b"tkhd").and_then(|(_, b)| {
                let at = if b.first() == Some(&1) { 20 } else { 12 };
                Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
            });
            if track_id != Some(id) {
                continue;
            }
            for (_, edts) in boxes.iter().filter(|(k, _)| k == b"edts") {
                for (_, elst) in fragments::children(edts)?
                    .iter()
                    .filter(|(k, _)| k == b"elst")
                {
                    let read = read_elst(elst);
                    if !read.is_empty() {
                        edits = read;
                    }
                }
            }
        }
    }
    Ok(edits)
}

/// The entries of an `elst` box's body, as many as it holds whole (its count was checked
/// against its size before `mp4parse` read it).
fn read_elst(body: &[u8]) -> Vec<Edit> {
    let wide = body.first() == Some(&1);
    let count = body
        .get(4..8)
        .map_or(0, |c| u32::from_be_bytes(c.try_into().expect("4 bytes")));
    let entries = body.get(8..).unwrap_or_default();
    let size = if wide { 20 } else { 12 };
    entries
        .chunks_exact(size)
        .take(count as usize)
        .map(|e| {
            let int = |at: usize, n: usize| {
                let b = &e[at..at + n];
                match n {
                    8 => i64::from_be_bytes(b.try_into().expect("8 bytes")),
                    _ => i64::from(i32::from_be_bytes(b.try_into().expect("4 bytes"))),
                }
            };
            let (duration, media_time) = if wide {
                (int(0, 8) as u64, int(8, 8))
            } else {
                (int(0, 4) as u32 as u64, int(4, 4))
            };
            Edit {
                duration,
                media_time,
            }
        })
        .collect()
}

/// How far a fragmented track's times move back under its edit list `edits` (`timescale`
/// the track's, `movie_scale` the movie's): by the media time of its first edit that shows
/// media (the first, or the second after an empty one), less the empty edit's length.
fn fragment_offset(edits: &[Edit], timescale: u64, movie_scale: u64) -> i64 {
    let (delay, shown) = match edits {
        [empty, rest @ ..] if empty.media_time == -1 => {
            let delay = rescale(empty.duration, timescale, movie_scale);
            (i64::try_from(delay).unwrap_or(i64::MAX), rest.first())
        }
        _ => (0, edits.first()),
    };
    let start = shown.map_or(0, |e| e.media_time.max(0));
    start.saturating_sub(delay)
}

/// The most frames an edit list may make of a track's (or twice the track's own, when that is
/// more): FFmpeg repeats a frame each time an edit shows it again, and a list that would make
/// more is refused as damaged.
const MAX_EDITED_FRAMES: usize = 1 << 20;

/// The frames FFmpeg's MP4 reader makes of `frames` (decode order, times as the tables give
/// them) under the edit list `edits`, with the track's and the movie's timescales; `ctts`:
/// the track has composition offsets.
///
/// Each edit in turn: its frames from the last keyframe at or before its start (in decode and
/// composition time) up to the second keyframe whose span reaches its end (the first without
/// composition offsets), each frame a new entry however often edits show it; a frame whose
/// composition time lies outside the edit is decoded but not shown (`Frame::shown`). Times run
/// on from the edits before (an empty edit first delays the track by its length): a frame's
/// decode time is the edit's start on the movie's timeline, advanced by each frame's step from
/// the edit's first shown frame on, its presentation time that plus its composition offset.
/// Then, when the earliest shown frame is later than the delay, every time moves back by the
/// difference.
fn apply_edits(
    frames: &[Frame],
    edits: &[Edit],
    scales: (u64, u64),
    ctts: bool,
) -> Result<Vec<Frame>, VideoError> {
    // Twice the track's frames however long it is; more only up to the bound (the
    // `video_index` fuzz target found an 804-byte file whose edits made 4 million).
    let limit = frames.len().saturating_mul(2).max(MAX_EDITED_FRAMES);
    apply_edits_within(frames, edits, scales, ctts, limit)
}

/// [`apply_edits`], refusing a list that makes more than `limit` frames.
fn apply_edits_within(
    frames: &[Frame],
    edits: &[Edit],
    (track_scale, movie_scale): (u64, u64),
    ctts: bool,
    limit: usize,
) -> Result<Vec<Frame>, VideoError> {
    let composition_offset = |f: &Frame| f.pts.saturating_sub(f.dts);
    // Negative composition offsets: every decode time moves back by the largest, as FFmpeg's
    // (composition times, which the edits are compared with, stay where they are).
    let shift = frames
        .iter()
        .map(composition_offset)
        .min()
        .map_or(0, |m| m.min(0).saturating_neg());
    let mut out: Vec<Frame> = Vec::new();
    let mut edit_end = shift.saturating_neg();
    let (mut delay, mut shown_edit) = (0i64, false);
    let mut earliest: Option<i64> = None;
    for edit in edits {
        if movie_scale == 0 {
            break;
        }
        let media_time = edit.media_time;
        let mut duration =
            i64::try_from(rescale(edit.duration, track_scale, movie_scale)).unwrap_or(i64::MAX);
        if media_time > 0 && duration.checked_add(media_time).is_none() {
            duration = 0;
        }
        let mut at = edit_end;
        edit_end = edit_end.saturating_add(duration);
        if !shown_edit && media_time == -1 {
            delay = delay.saturating_add(duration);
            continue;
        }
        shown_edit = true;
        let end = i128::from(media_time) + i128::from(duration);
        let first = frames
            .iter()
            .rposition(|f| f.keyframe && f.dts <= media_time && (!ctts || f.pts <= media_time))
            .unwrap_or(0);
        let (mut started, mut past_end) = (false, false);
        for (k, f) in frames.iter().enumerate().skip(first) {
            let step = frames
                .get(k + 1)
                .map_or(duration, |n| n.dts.saturating_sub(f.dts));
            let cts = f.pts;
            let shown = cts >= media_time && i128::from(cts) < end;
            let pts = at
                .saturating_add(composition_offset(f))
                .saturating_add(shift);
            if shown {
                earliest = Some(earliest.map_or(pts, |e| e.min(pts)));
                started = true;
            }
            if out.len() == limit {
                return Err(VideoError::Moov(format!(
                    "the edit list shows more than {limit} frames"
                )));
            }
            out.push(Frame {
                pts,
                dts: at,
                shown,
                edit_start: k == first && !out.is_empty(),
                ..*f
            });
            if started {
                at = at.saturating_add(step);
            }
            if f.keyframe && i128::from(cts) + i128::from(step) >= end {
                // With composition offsets, one keyframe more: B-frames after the first may
                // still belong to the edit.
                if ctts && !past_end {
                    past_end = true;
                    continue;
                }
                break;
            }
        }
    }
    let later = earliest.unwrap_or(-1).saturating_sub(delay);
    if later > 0 {
        for f in &mut out {
            f.pts = f.pts.saturating_sub(later);
            f.dts = f.dts.saturating_sub(later);
        }
    }
    Ok(out)
}

/// How many samples `mp4parse`'s `create_sample_table` reserves room for, counted the way its
/// chunk iterator walks `stsc`: runs with the same first chunk are skipped, the last run covers
/// every chunk left, and the walk ends at an empty or reversed run or when the runs claim more
/// chunks than `stco` holds. (Counting runs by their own first chunks instead let a lone run
/// starting past the last chunk claim two billion samples: the `video_index` fuzz target.)
fn samples_in_chunks(runs: &[mp4parse::SampleToChunk], chunks: usize) -> u64 {
    let mut remain = u32::try_from(chunks).unwrap_or(u32::MAX);
    let mut total = 0u64;
    let mut k = 0;
    while let Some(run) = runs.get(k) {
        k += 1;
        let len = match runs.get(k) {
            Some(peek) if peek.first_chunk == run.first_chunk => continue,
            Some(peek) if run.first_chunk > 0 && peek.first_chunk > 0 => {
                peek.first_chunk.saturating_sub(run.first_chunk)
            }
            None if run.first_chunk > 0 && run.first_chunk.checked_add(remain).is_some() => remain,
            _ => 0,
        };
        match remain.checked_sub(len) {
            Some(left) if len > 0 => remain = left,
            _ => break,
        }
        total = total.saturating_add(u64::from(len) * u64::from(run.samples_per_chunk));
    }
    total
}

/// The name of a video sample entry `mp4parse` does not know, by its four-character code.
fn other_codec(head: &[u8]) -> Option<&'static str> {
    let has = |code: &[u8]| head.windows(4).any(|w| w == code);
    if has(b"hvc1") || has(b"hev1") {
        Some("HEVC (H.265)")
    } else if has(b"vvc1") || has(b"vvi1") {
        Some("VVC (H.266)")
    } else if has(b"mjpa") || has(b"mjp2") {
        Some("Motion JPEG")
    } else if has(b"apcn") || has(b"apch") || has(b"apcs") || has(b"apco") || has(b"ap4h") {
        Some("Apple ProRes")
    } else {
        mp4v_object_type(head).and_then(other_visual_object)
    }
}

/// The object type an `mp4v` sample entry's `esds` descriptor declares (ISO 14496-1's
/// `objectTypeIndication`: 0x20 for MPEG-4 Part 2; the same entry carries MPEG-1 and MPEG-2
/// video, and Motion JPEG, under other values), read from the first `mp4v` entry of `head`;
/// `None` when there is none or its descriptor does not parse (mp4parse has checked it, and
/// keeps only its decoder-specific bytes).
fn mp4v_object_type(head: &[u8]) -> Option<u8> {
    let kind = head.windows(4).position(|w| w == b"mp4v")?;
    let size = u32::from_be_bytes(head.get(kind.checked_sub(4)?..kind)?.try_into().ok()?);
    let entry = head.get(kind + 4..(kind - 4).checked_add(size as usize)?)?;
    let esds = entry.windows(4).position(|w| w == b"esds")?;
    // The full box's version and flags, then the ES descriptor (tag 3).
    let mut at = esds + 8;
    let mut byte = || {
        let b = *entry.get(at)?;
        at += 1;
        Some(b)
    };
    // A descriptor: its tag, then its length in 7-bit groups (high bit: more follow).
    let descriptor = |tag: u8, byte: &mut dyn FnMut() -> Option<u8>| -> Option<()> {
        (byte()? == tag).then_some(())?;
        for _ in 0..4 {
            if byte()? & 0x80 == 0 {
                break;
            }
        }
        Some(())
    };
    descriptor(3, &mut byte)?;
    let _es_id = (byte()?, byte()?);
    let flags = byte()?;
    if flags & 0x80 != 0 {
        let _depends_on = (byte()?, byte()?);
    }
    if flags & 0x40 != 0 {
        for _ in 0..byte()? {
            byte()?;
        }
    }
    if flags & 0x20 != 0 {
        let _ocr_stream = (byte()?, byte()?);
    }
    descriptor(4, &mut byte)?;
    byte()
}

/// The codec an `mp4v` entry's object type names when it is not MPEG-4 Part 2 (0x20) (ISO
/// 14496-1's table of object types, as the MP4 registration authority keeps it).
fn other_visual_object(object_type: u8) -> Option<&'static str> {
    match object_type {
        0x20 => None,
        0x21 => Some("H.264 in an `mp4v` entry"),
        0x23 => Some("HEVC (H.265)"),
        0x60..=0x65 => Some("MPEG-2 video"),
        0x6a => Some("MPEG-1 video"),
        0x6c => Some("Motion JPEG"),
        0x6e => Some("JPEG 2000"),
        _ => Some("an `mp4v` object type hpuload does not know"),
    }
}

fn unknown_codec(head: &[u8]) -> VideoError {
    VideoError::Codec(other_codec(head).unwrap_or("a codec hpuload does not know"))
}

/// Runs the parser and turns a panic inside it into an error (`mp4parse` adds timestamps
/// unchecked on some malformed tables).
fn guarded<T>(f: impl FnOnce() -> Result<T, VideoError>) -> Result<T, VideoError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        Err(VideoError::Panicked(crate::hpu::panic_message(
            panic.as_ref(),
        )))
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A box: size, type, body.
    fn boxed(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
        let mut out = ((8 + body.len()) as u32).to_be_bytes().to_vec();
        out.extend_from_slice(kind);
        out.extend_from_slice(body);
        out
    }

    fn full(kind: &[u8; 4], version: u8, body: &[u8]) -> Vec<u8> {
        let mut b = vec![version, 0, 0, 0];
        b.extend_from_slice(body);
        boxed(kind, &b)
    }

    fn u32s(values: &[u32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_be_bytes()).collect()
    }

    /// A minimal MP4 of one H.264 track: `frames` sample sizes, `delta` ticks each at
    /// `timescale`, composition offsets `ctts` (one per frame, or none), keyframes `sync`
    /// (1-based; empty: no `stss`, every frame a keyframe), an edit list starting at
    /// `media_time` when given, and a sample entry of type `entry`.
    pub(crate) struct Movie<'a> {
        pub sizes: &'a [u32],
        pub delta: u32,
        pub timescale: u32,
        pub ctts: &'a [u32],
        pub sync: &'a [u32],
        pub media_time: Option<u32>,
        pub entry: &'a [u8; 4],
        /// Two sample descriptions (the entry twice), the frames' chunk using the second.
        pub two_descriptions: bool,
    }

    impl Movie<'_> {
        pub(crate) fn h264(sizes: &[u32]) -> Movie<'_> {
            Movie {
                sizes,
                delta: 512,
                timescale: 12800,
                ctts: &[],
                sync: &[1],
                media_time: None,
                entry: b"avc1",
                two_descriptions: false,
            }
        }

        /// The file's bytes: `ftyp`, `moov`, then `mdat` with each frame's bytes (its index,
        /// repeated).
        pub(crate) fn bytes(&self) -> Vec<u8> {
            let ftyp = boxed(b"ftyp", b"isom\0\0\x02\0isomiso2avc1mp41");
            let mdat_body: Vec<u8> = self
                .sizes
                .iter()
                .enumerate()
                .flat_map(|(i, &n)| std::iter::repeat_n(i as u8, n as usize))
                .collect();
            // The moov box's size does not depend on the chunk offset's value, so build it
            // once to learn where the media data will start.
            let first = ftyp.len() as u32 + self.moov(0).len() as u32 + 8;
            let mut out = ftyp;
            out.extend(self.moov(first));
            out.extend(boxed(b"mdat", &mdat_body));
            out
        }

        fn moov(&self, chunk_offset: u32) -> Vec<u8> {
            let n = self.sizes.len() as u32;
            let mut mvhd = u32s(&[0, 0, 1000, n * self.delta]);
            mvhd.extend_from_slice(&[0, 1, 0, 0, 1, 0, 0, 0]); // rate, volume, reserved
            mvhd.extend_from_slice(&[0; 8]); // reserved
            mvhd.extend(u32s(&[0x10000, 0, 0, 0, 0x10000, 0, 0, 0, 0x4000_0000]));
            mvhd.extend_from_slice(&[0; 24]);
            mvhd.extend(u32s(&[2]));
            let mut tkhd = u32s(&[0, 0, 1, 0, n * self.delta]);
            tkhd.extend_from_slice(&[0; 16]);
            tkhd.extend(u32s(&[0x10000, 0, 0, 0, 0x10000, 0, 0, 0, 0x4000_0000]));
            tkhd.extend(u32s(&[64 << 16, 48 << 16]));
            let mdhd = {
                let mut b = u32s(&[0, 0, self.timescale, n * self.delta]);
                b.extend_from_slice(&[0x55, 0xc4, 0, 0]);
                full(b"mdhd", 0, &b)
            };
            let hdlr = {
                let mut b = u32s(&[0]);
                b.extend_from_slice(b"vide");
                b.extend_from_slice(&[0; 12]);
                b.extend_from_slice(b"video\0");
                full(b"hdlr", 0, &b)
            };
            let avcc = boxed(
                b"avcC",
                &[
                    1, 0x42, 0xc0, 0x1e, 0xff, 0xe1, 0, 4, 0x67, 0x42, 0xc0, 0x1e, 1, 0, 2, 0x68,
                    0xce,
                ],
            );
            let mut entry = vec![0; 6];
            entry.extend_from_slice(&[0, 1]); // data reference index
            entry.extend_from_slice(&[0; 16]);
            entry.extend_from_slice(&64u16.to_be_bytes());
            entry.extend_from_slice(&48u16.to_be_bytes());
            entry.extend(u32s(&[0x0048_0000, 0x0048_0000, 0]));
            entry.extend_from_slice(&1u16.to_be_bytes());
            entry.extend_from_slice(&[0; 32]);
            entry.extend_from_slice(&0x18u16.to_be_bytes());
            entry.extend_from_slice(&0xffffu16.to_be_bytes());
            entry.extend(avcc);
            let descriptions = if self.two_descriptions { 2 } else { 1 };
            let stsd = {
                let mut b = u32s(&[descriptions]);
                for _ in 0..descriptions {
                    b.extend(boxed(self.entry, &entry));
                }
                full(b"stsd", 0, &b)
            };
            let stts = full(b"stts", 0, &u32s(&[1, n, self.delta]));
            let mut stbl = stsd;
            stbl.extend(stts);
            if !self.ctts.is_empty() {
                let mut b = u32s(&[self.ctts.len() as u32]);
                for &c in self.ctts {
                    b.extend(u32s(&[1, c]));
                }
                stbl.extend(full(b"ctts", 0, &b));
            }
            if !self.sync.is_empty() {
                let mut b = u32s(&[self.sync.len() as u32]);
                b.extend(u32s(self.sync));
                stbl.extend(full(b"stss", 0, &b));
            }
            stbl.extend(full(b"stsc", 0, &u32s(&[1, 1, n, descriptions])));
            let mut stsz = u32s(&[0, n]);
            stsz.extend(u32s(self.sizes));
            stbl.extend(full(b"stsz", 0, &stsz));
            stbl.extend(full(b"stco", 0, &u32s(&[1, chunk_offset])));
            let vmhd = full(b"vmhd", 0, &[0; 8]);
            let dinf = boxed(
                b"dinf",
                &full(
                    b"dref",
                    0,
                    &[&u32s(&[1])[..], &full(b"url ", 0, &[])[..]].concat(),
                ),
            );
            let minf = boxed(b"minf", &[vmhd, dinf, boxed(b"stbl", &stbl)].concat());
            let mdia = boxed(b"mdia", &[mdhd, hdlr, minf].concat());
            let mut trak = full(b"tkhd", 0, &tkhd);
            if let Some(t) = self.media_time {
                let elst = full(b"elst", 0, &u32s(&[1, n * self.delta, t, 0x10000]));
                trak.extend(boxed(b"edts", &elst));
            }
            trak.extend(mdia);
            let moov = [full(b"mvhd", 0, &mvhd), boxed(b"trak", &trak)].concat();
            boxed(b"moov", &moov)
        }
    }

    fn index_of(bytes: &[u8], name: &str) -> Result<VideoIndex, Error> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("hpuload-{name}-{}-{k}.mp4", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        let out = VideoIndex::open(&path);
        std::fs::remove_file(&path).ok();
        out
    }

    #[test]
    fn a_chunk_run_past_the_last_chunk_claiming_billions_of_samples_is_refused_unread() {
        // One `stsc` run starting at chunk 28 of a file with one chunk, two billion samples a
        // chunk: mp4parse's walk gives it the one chunk left and would reserve 93 GB for its
        // table (found by the `video_index` fuzz target).
        let mut bytes = Movie::h264(&[40, 20, 8, 8]).bytes();
        let at = bytes.windows(4).position(|w| w == b"stsc").unwrap() + 12;
        bytes[at..at + 8].copy_from_slice(&[0, 0, 0, 28, 0x73, 0x74, 0x73, 0x04]);
        let err = index_of(&bytes, "stsc-past").unwrap_err().to_string();
        assert!(err.contains("sample tables"), "{err}");
        // The count follows mp4parse's walk: duplicate runs skipped, the last run takes the
        // chunks left, a reversed run ends it.
        let run = |first_chunk, samples_per_chunk| mp4parse::SampleToChunk {
            first_chunk,
            samples_per_chunk,
            sample_description_index: 1,
        };
        assert_eq!(
            samples_in_chunks(&[run(1, 10), run(3, 5)], 5),
            2 * 10 + 3 * 5
        );
        assert_eq!(
            samples_in_chunks(&[run(1, 10), run(1, 7), run(2, 5)], 3),
            7 + 2 * 5
        );
        assert_eq!(samples_in_chunks(&[run(3, 10), run(2, 5)], 9), 0);
        assert_eq!(samples_in_chunks(&[run(28, 1 << 30)], 1), 1 << 30);
    }

    #[test]
    fn frames_come_from_the_tables_with_their_bytes_and_keyframes() {
        let sizes = [30, 10, 12, 11, 25, 9];
        let movie = Movie {
            sync: &[1, 5],
            ..Movie::h264(&sizes)
        };
        let bytes = movie.bytes();
        let index = index_of(&bytes, "plain").unwrap();
        assert_eq!(index.codec, Codec::H264);
        assert_eq!(index.size, (64, 48));
        assert_eq!(index.timescale, 12800);
        assert_eq!(index.config[1], 0x42, "the avcC record, profile byte");
        assert_eq!(index.frames.len(), sizes.len());
        for (i, f) in index.frames.iter().enumerate() {
            assert_eq!(f.len, sizes[i]);
            let data = &bytes[f.offset as usize..f.offset as usize + f.len as usize];
            assert!(data.iter().all(|&b| b == i as u8), "frame {i}'s bytes");
            assert_eq!(f.dts, i as i64 * 512);
            assert_eq!(f.pts, f.dts);
            assert_eq!(f.keyframe, i == 0 || i == 4);
        }
        assert_eq!(index.keyframe_before(3), Some(0));
        assert_eq!(index.keyframe_before(5), Some(4));
        assert!((index.duration_seconds() - 6.0 * 512.0 / 12800.0).abs() < 1e-9);
    }

    #[test]
    fn b_frames_reorder_presentation_and_the_edit_list_starts_it_at_zero() {
        // Displayed I0 B1 B2 P3 B4 P5, decoded I0 P3 B1 B2 P5 B4, composition offsets as
        // x264 writes them (everything shifted by one frame pair, which the edit list undoes).
        let sizes = [40, 20, 8, 8, 20, 8];
        let movie = Movie {
            ctts: &[1024, 2048, 512, 512, 1536, 512],
            media_time: Some(1024),
            ..Movie::h264(&sizes)
        };
        let index = index_of(&movie.bytes(), "bframes").unwrap();
        let pts: Vec<i64> = index.frames.iter().map(|f| f.pts).collect();
        assert_eq!(pts, [0, 1536, 512, 1024, 2560, 2048]);
        let order = index.presentation_order();
        assert_eq!(order, [0, 2, 3, 1, 5, 4]);
    }

    /// `n` keyframes 512 ticks apart (no composition offsets), each at byte `10 * k`.
    fn keyframes(n: usize) -> Vec<Frame> {
        (0..n)
            .map(|k| Frame {
                pts: 512 * k as i64,
                dts: 512 * k as i64,
                duration: 512,
                keyframe: true,
                offset: 10 * k as u64,
                len: 10,
                shown: true,
                edit_start: false,
            })
            .collect()
    }

    fn edit(duration: u64, media_time: i64) -> Edit {
        Edit {
            duration,
            media_time,
        }
    }

    #[test]
    fn an_empty_edit_first_delays_the_track_by_its_length() {
        // 0.1 s of nothing (movie timescale 1000), then the whole track: 1280 ticks at 12800.
        let frames = keyframes(4);
        let edits = [edit(100, -1), edit(160, 0)];
        let out = apply_edits(&frames, &edits, (12800, 1000), false).unwrap();
        let pts: Vec<i64> = out.iter().map(|f| f.pts).collect();
        assert_eq!(pts, [1280, 1792, 2304, 2816]);
        assert!(out.iter().all(|f| f.shown));
    }

    #[test]
    fn edits_showing_the_media_twice_repeat_its_frames_later_on_the_timeline() {
        // Frames 1-2, then frames 0-1: four frames shown, each edit's from its keyframe.
        let frames = keyframes(3);
        let edits = [edit(80, 512), edit(80, 0)];
        let out = apply_edits(&frames, &edits, (12800, 1000), false).unwrap();
        let shown: Vec<(u64, i64)> = out
            .iter()
            .filter(|f| f.shown)
            .map(|f| (f.offset, f.pts))
            .collect();
        assert_eq!(shown, [(10, 0), (20, 512), (0, 1024), (10, 1536)]);
    }

    #[test]
    fn an_edit_list_making_more_frames_than_the_limit_is_refused_naming_it() {
        let frames = keyframes(3);
        let edits = [edit(120, 0); 4];
        let e = apply_edits_within(&frames, &edits, (12800, 1000), false, 10).unwrap_err();
        assert!(
            e.to_string()
                .contains("the edit list shows more than 10 frames"),
            "{e}"
        );
        assert_eq!(
            apply_edits_within(&frames, &edits[..3], (12800, 1000), false, 10)
                .unwrap()
                .len(),
            9
        );
    }

    #[test]
    fn every_entry_of_an_elst_box_is_read_in_either_version() {
        let v0: Vec<u8> = [
            &[0u8, 0, 0, 0][..],
            &u32s(&[2, 200, u32::MAX, 0x10000, 400, 1024, 0x10000]),
        ]
        .concat();
        assert_eq!(read_elst(&v0), [edit(200, -1), edit(400, 1024)]);
        let mut v1 = vec![1, 0, 0, 0];
        v1.extend(u32s(&[1]));
        v1.extend((1u64 << 40).to_be_bytes());
        v1.extend(7i64.to_be_bytes());
        v1.extend(u32s(&[0x10000]));
        assert_eq!(read_elst(&v1), [edit(1 << 40, 7)]);
        // A count beyond the entries present reads those present.
        assert_eq!(read_elst(&v0[..20]), [edit(200, -1)]);
    }

    #[test]
    fn a_track_whose_frames_use_a_second_sample_description_is_refused_naming_it() {
        let movie = Movie {
            two_descriptions: true,
            ..Movie::h264(&[10, 10])
        };
        let e = index_of(&movie.bytes(), "descriptions")
            .unwrap_err()
            .to_string();
        assert!(e.contains("use sample description 2 of several"), "{e}");
        let one = Movie::h264(&[10, 10]);
        assert_eq!(
            index_of(&one.bytes(), "description").unwrap().frames.len(),
            2
        );
    }

    #[test]
    fn other_codecs_and_other_files_are_named() {
        let hevc = Movie {
            entry: b"hvc1",
            ..Movie::h264(&[10, 10])
        };
        let e = index_of(&hevc.bytes(), "hevc").unwrap_err().to_string();
        assert!(e.contains("HEVC (H.265); hpuload decodes H.264"), "{e}");
        let e = index_of(b"\xff\xd8\xff\xe0 a jpeg, not a video", "jpeg")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not an MP4/MOV file"), "{e}");
        let mut cut = Movie::h264(&[10, 10]).bytes();
        cut.truncate(60);
        let e = index_of(&cut, "cut").unwrap_err().to_string();
        assert!(e.contains("past the file's 60"), "{e}");
        let mut no_moov = boxed(b"ftyp", b"isom\0\0\x02\0isom");
        no_moov.extend(boxed(b"mdat", &[0; 32]));
        let e = index_of(&no_moov, "nomoov").unwrap_err().to_string();
        assert!(e.contains("no `moov` box"), "{e}");
    }

    #[test]
    fn mpeg_1_and_2_video_and_motion_jpeg_in_an_mp4v_entry_are_named_not_read_as_mpeg_4() {
        // FFmpeg's muxer writes MPEG-2 video (object type 0x61) under `mp4v`, as it writes
        // MPEG-4 Part 2 (0x20): only the `esds` descriptor tells them apart.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/video");
        let mpeg2 = std::fs::read(dir.join("mpeg2_in_mp4v.mp4")).unwrap();
        let e = VideoIndex::open(dir.join("mpeg2_in_mp4v.mp4"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mpeg2_in_mp4v.mp4") && e.contains("is MPEG-2 video"),
            "{e}"
        );
        let kind = mpeg2.windows(4).position(|w| w == b"mp4v").unwrap();
        let object = kind + mpeg2[kind..].windows(4).position(|w| w == b"esds").unwrap();
        // The DecoderConfigDescriptor's object type follows its tag (4) and length.
        let at = object + mpeg2[object..].iter().position(|&b| b == 4).unwrap() + 5;
        assert_eq!(mpeg2[at], 0x61, "the fixture's object type");
        for (value, named) in [(0x6a, "is MPEG-1 video"), (0x6c, "is Motion JPEG")] {
            let mut other = mpeg2.clone();
            other[at] = value;
            let e = index_of(&other, "mp4v").unwrap_err().to_string();
            assert!(e.contains(named), "{e}");
        }
        let mut mpeg4 = mpeg2.clone();
        mpeg4[at] = 0x20;
        let codec = index_of(&mpeg4, "mp4v").map(|i| i.codec);
        assert_eq!(
            codec.unwrap(),
            Codec::Mpeg4,
            "object type 0x20 is MPEG-4 Part 2"
        );
        let mp4v = VideoIndex::open(dir.join("mp4v_bframes.mp4")).unwrap();
        assert_eq!(mp4v.codec, Codec::Mpeg4);
    }

    #[test]
    fn a_table_claiming_more_entries_than_it_holds_is_refused_before_the_parser_reserves_them() {
        let mut bytes = Movie::h264(&[40, 20]).bytes();
        let at = bytes.windows(4).position(|w| w == b"stsd").unwrap() + 8;
        bytes[at..at + 4].copy_from_slice(&0x3c3c_3c3cu32.to_be_bytes());
        let e = index_of(&bytes, "stsd").unwrap_err().to_string();
        assert!(e.contains("`stsd` claims 1010580540 entries"), "{e}");
    }

    #[test]
    fn a_chunk_claiming_more_samples_than_the_sizes_list_is_refused() {
        let mut bytes = Movie::h264(&[40, 20]).bytes();
        // stsc: entry count, then (first chunk, samples per chunk, description).
        let at = bytes.windows(4).position(|w| w == b"stsc").unwrap() + 16;
        bytes[at..at + 4].copy_from_slice(&0x4000_0000u32.to_be_bytes());
        let e = index_of(&bytes, "stsc").unwrap_err().to_string();
        assert!(
            e.contains("sample tables are missing or inconsistent"),
            "{e}"
        );
    }

    #[test]
    fn a_truncated_download_is_named_at_the_first_frame_past_the_end() {
        let bytes = Movie::h264(&[40, 20, 8, 8]).bytes();
        let e = index_of(&bytes[..bytes.len() - 10], "short")
            .unwrap_err()
            .to_string();
        assert!(e.contains("frame 2's bytes lie past the end"), "{e}");
    }

    #[test]
    fn what_the_fuzz_target_found_is_refused_with_an_error() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/video_index");
        for name in [
            "stsd-claims-billions.mp4",
            "hdlr-claims-4gib.mp4",
            "stsc-claims-billions.mp4",
        ] {
            let bytes = std::fs::read(dir.join(name)).unwrap();
            assert!(index_of(&bytes, "found").is_err(), "{name}");
        }
        // 804 bytes whose edit list made 4 million frames (0.5 s, 250 MB) before the frames
        // were found past the file's end: refused before the edits now.
        let bytes = std::fs::read(dir.join("edits-make-millions.mp4")).unwrap();
        let e = index_of(&bytes, "found").unwrap_err().to_string();
        assert!(e.contains("past the end of the file's 804 bytes"), "{e}");
    }

    /// Writes the seed of the `video_index` fuzz target (run once, by hand).
    #[test]
    #[ignore]
    fn write_the_fuzz_seed() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/video_index");
        std::fs::create_dir_all(&dir).unwrap();
        let movie = Movie {
            ctts: &[1024, 2048, 512, 512],
            sync: &[1, 3],
            media_time: Some(1024),
            ..Movie::h264(&[40, 20, 8, 8])
        };
        std::fs::write(dir.join("bframes.mp4"), movie.bytes()).unwrap();
    }

    #[test]
    fn every_cut_of_a_video_is_an_error_or_an_index_never_a_panic() {
        let bytes = Movie {
            ctts: &[1024, 2048, 512, 512],
            sync: &[1, 3],
            media_time: Some(1024),
            ..Movie::h264(&[40, 20, 8, 8])
        }
        .bytes();
        let moov_end = bytes.len() - (8 + 76);
        for cut in (0..moov_end).step_by(7) {
            let mut damaged = bytes.clone();
            // Cut the movie box short, or flip a byte inside it.
            damaged[cut] ^= 0x5a;
            let _ = index_of(&damaged, "flip");
            let _ = index_of(&bytes[..cut], "cut");
        }
    }
}
