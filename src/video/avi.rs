//! The frame index of an AVI file's first video stream: the stream headers in `hdrl`, then
//! every chunk of the `movi` lists (and of an OpenDML file's `AVIX` extensions), walked by
//! their headers. AVI carries no timestamps: frame `k` of the stream is shown at `k` times the
//! stream header's `dwScale / dwRate`, in the order MPEG-4's B-frames imply.
//!
//! UCF101 and HMDB51, the two most used small video benchmarks (and the only files
//! torchvision's `UCF101` and `HMDB51` datasets list), are AVI files of MPEG-4 Part 2 video
//! (Xvid, DivX), which is the codec read here. The file's own `idx1` index is not used: its
//! keyframe flags are whatever the writer claimed, so each frame's type is read from its VOP
//! header instead (the first bytes of the frame, read with the chunk's header), and the frames
//! are where the walk finds them.
//!
//! Many of those files (DivX's, Xvid's "packed" mode) store B-frames in a "packed bitstream",
//! made for Video for Windows, which passed a decoder one chunk for each picture shown: a
//! reference and the first B-frame after it (in decoding order) share a chunk, and an N-VOP (a
//! placeholder of a few bytes) holds the place where the reference is shown. The index takes
//! such chunks apart as FFmpeg's `mpeg4_unpack_bframes` filter does, so the decoder is given
//! one picture at a time in standard decoding order. A dropped frame (an empty chunk, or an
//! N-VOP with no packed B-frame to place) is no picture: the time it held is a gap in the
//! timeline, as FFmpeg's reader leaves it.

use super::mp4::{Codec, Frame, Parsed, Reader, VideoError, VideoFailure, MAX_FRAME_BYTES};
use super::mpeg4::{self, Vop, VopType};

/// The most bytes of the `hdrl` list read (a real one is a few KiB).
const MAX_HEADER_BYTES: u32 = 1 << 20;

/// The bytes of a frame read with its chunk header: a VOP header comes within its first few
/// dozen bytes (after a keyframe's VOL header and the encoder's user data).
const PEEK: u64 = 512;

/// The most bytes of a frame searched for its VOP header when the first [`PEEK`] do not hold
/// it.
const MAX_SEARCH: u64 = 64 << 10;

/// Whether the file's first 12 bytes are an AVI file's.
pub(super) fn is_avi(head: &[u8]) -> bool {
    head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"AVI "
}

/// The first video stream's index from the AVI file of `size` bytes that `read` reads.
pub(super) fn index(read: &Reader<'_>, size: u64) -> Result<Parsed, VideoFailure> {
    let mut walk = Walk {
        read,
        size,
        stream: None,
        increment_bits: None,
        chunks: Vec::new(),
    };
    // `RIFF AVI `, then any `RIFF AVIX` extensions (OpenDML files over 1 GiB).
    let mut at = 0u64;
    while size.saturating_sub(at) >= 12 {
        let mut head = [0u8; 12];
        read(at, &mut head)?;
        if &head[..4] != b"RIFF" || (at > 0 && &head[8..12] != b"AVIX") {
            break;
        }
        let end = chunk_end(at, le32(&head[4..8])).min(size);
        walk.list(at + 12, end)?;
        at = end;
    }
    walk.finish()
}

/// The video stream's headers.
struct Stream {
    /// Its number: its chunks are `NNdc` (or `NNdb`).
    number: [u8; 2],
    scale: u32,
    rate: u32,
    width: u32,
    height: u32,
    /// The bytes after `strf`'s `BITMAPINFOHEADER`: some writers put the VOL header there.
    extradata: Vec<u8>,
}

struct Walk<'r, 'a> {
    read: &'r Reader<'a>,
    size: u64,
    stream: Option<Stream>,
    /// From the stream's VOL header, once found.
    increment_bits: Option<u32>,
    /// The video stream's chunks, in the file's order.
    chunks: Vec<Chunk>,
}

/// A chunk of the video stream as the walk finds it.
struct Chunk {
    offset: u64,
    len: u32,
    /// Its first VOP's header; `None` for an empty chunk (a dropped frame).
    vop: Option<Vop>,
}

/// A picture for the decoder: a chunk, or one of the two VOPs of a packed chunk.
#[derive(Clone, Copy)]
struct Picture {
    /// The chunk (the stream's tick) whose place it takes in decoding order.
    slot: usize,
    offset: u64,
    len: u32,
    kind: VopType,
}

impl Walk<'_, '_> {
    /// Walks the chunks of a `RIFF` or `LIST` body from `at` to `end`.
    fn list(&mut self, mut at: u64, end: u64) -> Result<(), VideoFailure> {
        while end.saturating_sub(at) >= 8 {
            let mut head = [0u8; 8];
            (self.read)(at, &mut head)?;
            let id: [u8; 4] = head[..4].try_into().expect("4 bytes");
            let len = le32(&head[4..8]);
            let body = at + 8;
            let next = chunk_end(at, len);
            if &id == b"LIST" && end.saturating_sub(body) >= 4 {
                let mut kind = [0u8; 4];
                (self.read)(body, &mut kind)?;
                match &kind {
                    b"hdrl" if self.stream.is_none() => self.headers(body + 4, next.min(end))?,
                    b"movi" => self.movi(body + 4, next.min(end))?,
                    _ => {}
                }
            }
            at = next;
        }
        Ok(())
    }

    /// Reads the stream headers (`hdrl`) for the first video stream.
    fn headers(&mut self, at: u64, end: u64) -> Result<(), VideoFailure> {
        // A list shorter than its own kind ends before `at`: it holds nothing.
        let claimed = end.saturating_sub(at);
        let len = u32::try_from(claimed)
            .ok()
            .filter(|&l| l <= MAX_HEADER_BYTES)
            .ok_or_else(|| bad(format!("the `hdrl` list claims {claimed} bytes")))?;
        let mut hdrl = vec![0u8; len as usize];
        (self.read)(at, &mut hdrl)?;
        let mut number = 0u32;
        for (id, strl) in chunks(&hdrl) {
            if id != *b"LIST" || strl.get(..4) != Some(b"strl") {
                continue;
            }
            let (mut strh, mut strf) = (None, None);
            for (id, body) in chunks(&strl[4..]) {
                match &id {
                    b"strh" => strh = Some(body),
                    b"strf" => strf = Some(body),
                    _ => {}
                }
            }
            if let (Some(strh), Some(strf)) = (strh, strf) {
                if strh.get(..4) == Some(b"vids") {
                    self.stream = Some(stream(number, strh, strf)?);
                    return Ok(());
                }
            }
            number += 1;
        }
        Err(VideoError::NoVideoTrack.into())
    }

    /// Walks a `movi` list, taking the video stream's chunks as its frames.
    fn movi(&mut self, mut at: u64, end: u64) -> Result<(), VideoFailure> {
        let Some(number) = self.stream.as_ref().map(|s| s.number) else {
            return Err(bad("the `movi` list comes before the stream headers".into()).into());
        };
        let mut peek = vec![0u8; (8 + PEEK) as usize];
        while end.saturating_sub(at) >= 8 {
            let want = (end - at).min(8 + PEEK) as usize;
            (self.read)(at, &mut peek[..want])?;
            let id: [u8; 4] = peek[..4].try_into().expect("4 bytes");
            let len = le32(&peek[4..8]);
            // A `rec ` list groups chunks: its chunks are walked in place.
            if &id == b"LIST" {
                at += 12;
                continue;
            }
            if id[..2] == number && matches!(&id[2..], b"dc" | b"db") {
                let body = &peek[8..want.min(8 + len as usize)];
                self.chunk(at + 8, len, body)?;
            }
            at = chunk_end(at, len);
        }
        Ok(())
    }

    /// Takes the chunk at `offset` of `len` bytes, whose first bytes are `first`, as the
    /// stream's next.
    fn chunk(&mut self, offset: u64, len: u32, first: &[u8]) -> Result<(), VideoFailure> {
        let k = self.chunks.len();
        if u64::from(len) >= MAX_FRAME_BYTES {
            return Err(VideoError::FrameTooLarge {
                frame: k,
                len: len.into(),
            }
            .into());
        }
        if len == 0 {
            self.chunks.push(Chunk {
                offset,
                len,
                vop: None,
            });
            return Ok(());
        }
        let mut longer = Vec::new();
        let mut bytes = first;
        let vop = loop {
            if self.increment_bits.is_none() {
                let stream = self.stream.as_ref().expect("checked by `movi`");
                self.increment_bits = match mpeg4::time_increment_bits(&stream.extradata) {
                    Ok(Some(bits)) => Some(bits),
                    _ => mpeg4::time_increment_bits(bytes).map_err(|e| bad(e.into()))?,
                };
            }
            let found = self.increment_bits.and_then(|bits| mpeg4::vop(bytes, bits));
            let whole = u64::from(len)
                .min(MAX_SEARCH)
                .min(self.size - offset.min(self.size));
            match found {
                Some(vop) => break vop,
                None if (bytes.len() as u64) < whole => {
                    longer.resize(whole as usize, 0);
                    (self.read)(offset, &mut longer)?;
                    bytes = &longer;
                }
                None if self.increment_bits.is_none() => {
                    return Err(bad(format!(
                        "frame {k} comes before any video object layer header"
                    ))
                    .into())
                }
                None => {
                    return Err(VideoError::Sample {
                        frame: k,
                        reason: "no MPEG-4 picture (VOP) header",
                    }
                    .into())
                }
            }
        };
        self.chunks.push(Chunk {
            offset,
            len,
            vop: Some(vop),
        });
        Ok(())
    }

    /// The pictures in decoding order: packed chunks taken apart (a chunk holding two VOPs
    /// gives its first now and its second, a B-frame, in the place of the next chunk, whose
    /// own picture moves on in turn, until an N-VOP's place takes the last), dropped frames
    /// left out.
    fn pictures(&self) -> Result<Vec<Picture>, VideoFailure> {
        // Only a packed stream has N-VOPs to hold its references' places: only then are the
        // references' chunks read whole for a second VOP.
        let packed = self.chunks.iter().any(|c| c.vop.is_some_and(|v| !v.coded));
        let mut bytes = Vec::new();
        let mut out = Vec::with_capacity(self.chunks.len());
        let mut waiting: Option<Picture> = None;
        for (slot, chunk) in self.chunks.iter().enumerate() {
            let Some(vop) = chunk.vop else { continue };
            let whole = Picture {
                slot,
                offset: chunk.offset,
                len: chunk.len,
                kind: vop.kind,
            };
            let mut second = None;
            if packed && vop.coded && vop.kind != VopType::B {
                bytes.resize(chunk.len as usize, 0);
                (self.read)(chunk.offset, &mut bytes)?;
                second = mpeg4::second_vop(&bytes);
            }
            if let Some((at, kind)) = second {
                let at = at as u32; // within the chunk, whose length is a u32
                out.push(Picture { len: at, ..whole });
                // A B-frame still waiting when the next is packed (its N-VOP is missing: a cut
                // or edited stream) is dropped here, replaced by the new one, as FFmpeg's
                // `mpeg4_unpack_bframes` drops it ("Missing one N-VOP packet, discarding one
                // B-frame"): nothing refers to a B-frame, so every other picture decodes as it
                // would. (FFmpeg's decoder, unpacking by itself, would decode the B-frame in
                // the next reference's place instead, losing that reference and damaging what
                // refers to it.)
                waiting = Some(Picture {
                    offset: chunk.offset + u64::from(at),
                    len: chunk.len - at,
                    kind,
                    ..whole
                });
            } else if let Some(b) = waiting.take() {
                out.push(Picture { slot, ..b });
                if vop.coded {
                    waiting = Some(whole);
                }
            } else if vop.coded {
                out.push(whole);
            }
            // An N-VOP with nothing to place is a dropped frame.
        }
        if let Some(last) = waiting {
            out.push(Picture {
                slot: self.chunks.len(),
                ..last
            });
        }
        Ok(out)
    }

    /// The index, with each frame's presentation time from the order B-frames imply.
    fn finish(self) -> Result<Parsed, VideoFailure> {
        let pictures = self.pictures()?;
        let stream = self.stream.ok_or(VideoError::NoVideoTrack)?;
        let scale = i64::from(stream.scale);
        let mut frames: Vec<Frame> = pictures
            .iter()
            .map(|p| Frame {
                pts: 0,
                dts: p.slot as i64 * scale,
                duration: stream.scale,
                keyframe: p.kind == VopType::I,
                offset: p.offset,
                len: p.len,
                shown: true,
                edit_start: false,
            })
            .collect();
        // A B-frame is shown as it is decoded; a reference (I, P, S) when the next reference
        // comes, after the B-frames between the two. The n-th picture shown takes the n-th
        // picture's decoding time; with B-frames FFmpeg counts from 1, the one frame of delay
        // they bring.
        let delay = i64::from(pictures.iter().any(|p| p.kind == VopType::B));
        let mut shown = pictures.iter().map(|p| (p.slot as i64 + delay) * scale);
        let mut held: Option<usize> = None;
        let mut show = |frame: &mut Frame| frame.pts = shown.next().expect("one time a frame");
        for k in 0..frames.len() {
            if pictures[k].kind == VopType::B {
                show(&mut frames[k]);
            } else if let Some(h) = held.replace(k) {
                show(&mut frames[h]);
            }
        }
        if let Some(h) = held {
            show(&mut frames[h]);
        }
        // Kept only when it holds a VOL header (what goes before each run's keyframe).
        let config = match mpeg4::time_increment_bits(&stream.extradata) {
            Ok(Some(_)) => stream.extradata,
            _ => Vec::new(),
        };
        Ok((
            Codec::Mpeg4,
            config,
            (stream.width, stream.height),
            u64::from(stream.rate),
            frames,
        ))
    }
}

/// The video stream's headers from its `strh` and `strf` chunks.
fn stream(number: u32, strh: &[u8], strf: &[u8]) -> Result<Stream, VideoError> {
    if strh.len() < 36 || strf.len() < 40 {
        return Err(bad("the video stream's headers are cut off".into()));
    }
    let number = u8::try_from(number)
        .ok()
        .filter(|&n| n < 100)
        .ok_or_else(|| bad("the video stream is past stream 99".into()))?;
    let fourcc: [u8; 4] = strf[16..20].try_into().expect("4 bytes");
    codec(fourcc)?;
    let (scale, rate) = (le32(&strh[20..24]), le32(&strh[24..28]));
    if scale == 0 || rate == 0 {
        return Err(bad(format!(
            "the video stream's frame rate is {rate}/{scale}"
        )));
    }
    Ok(Stream {
        number: [b'0' + number / 10, b'0' + number % 10],
        scale,
        rate,
        width: le32(&strf[4..8]),
        // Negative for a top-down bitmap; the picture's size is the same.
        height: (le32(&strf[8..12]) as i32).unsigned_abs(),
        extradata: strf[40..].to_vec(),
    })
}

/// Whether `fourcc` (`strf`'s `biCompression`) is MPEG-4 Part 2; the codec's name when not.
fn codec(fourcc: [u8; 4]) -> Result<(), VideoError> {
    let upper = fourcc.map(|b| b.to_ascii_uppercase());
    match &upper {
        // The tags Xvid, DivX 4-6, FFmpeg and other MPEG-4 Part 2 encoders write.
        b"XVID" | b"DIVX" | b"DX50" | b"FMP4" | b"MP4V" | b"MP4S" | b"M4S2" | b"3IV2" | b"DIV1"
        | b"DIVF" => Ok(()),
        b"H264" | b"X264" | b"AVC1" | b"DAVC" => Err(VideoError::Codec("H.264 in AVI")),
        b"HEVC" | b"H265" | b"HVC1" => Err(VideoError::Codec("HEVC")),
        b"MJPG" | b"AVRN" | b"LJPG" => Err(VideoError::Codec("Motion JPEG")),
        b"DIV3" | b"DIV4" | b"MP43" | b"MP42" | b"MPG4" => {
            Err(VideoError::Codec("Microsoft MPEG-4 (DivX 3)"))
        }
        b"VP80" | b"VP90" | b"AV01" => Err(VideoError::Codec("VP8, VP9 or AV1 in AVI")),
        [0, 0, 0, 0] | b"RGB " | b"I420" | b"YV12" => Err(VideoError::Codec("uncompressed")),
        _ => Err(bad(format!(
            "the video's codec is {:?}, which hpuload does not decode",
            String::from_utf8_lossy(&fourcc)
        ))),
    }
}

/// The chunks of a list body held in memory: `(id, body)`, the body cut at the list's end.
fn chunks(mut bytes: &[u8]) -> impl Iterator<Item = ([u8; 4], &[u8])> {
    std::iter::from_fn(move || {
        let id: [u8; 4] = bytes.get(..4)?.try_into().expect("4 bytes");
        let len = le32(bytes.get(4..8)?) as usize;
        let body = &bytes[8..];
        let body = &body[..len.min(body.len())];
        let next = (8 + len + (len & 1)).min(bytes.len());
        bytes = &bytes[next..];
        Some((id, body))
    })
}

/// Where the chunk at `at` with a body of `len` bytes ends: bodies are padded to an even length.
fn chunk_end(at: u64, len: u32) -> u64 {
    at + 8 + u64::from(len) + u64::from(len & 1)
}

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b[..4].try_into().expect("4 bytes"))
}

fn bad(reason: String) -> VideoError {
    VideoError::Avi(reason)
}
