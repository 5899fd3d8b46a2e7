//! Fragmented MP4: the frames of a track described outside `moov`, in each movie fragment's
//! (`moof`) track fragment runs (`trun`), with defaults from the track fragment header (`tfhd`)
//! and from `moov`'s track extends box (`trex`), as DASH packagers, live recorders and
//! `ffmpeg -movflags frag_keyframe` write them (ISO/IEC 14496-12, 8.8).
//!
//! Parsed here from the boxes' bytes: `mp4parse` reads the movie box but not fragments. Every
//! count is checked against the bytes that hold it before anything is reserved, and every
//! timestamp and offset is computed checked.

use super::mp4::{Frame, VideoError, MAX_FRAME_BYTES};

/// The most frames a video's fragments may describe (as for sample tables).
const MAX_FRAMES: usize = 1 << 28;

/// A track's sample defaults, from `trex` and then `tfhd`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Defaults {
    duration: u32,
    size: u32,
    flags: u32,
}

/// A box's type and body.
type Child<'a> = ([u8; 4], &'a [u8]);

/// The boxes in `bytes`, in order.
pub(super) fn children(mut bytes: &[u8]) -> Result<Vec<Child<'_>>, VideoError> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let bad = |what: &str| VideoError::Fragment(format!("a box header {what}"));
        let head = bytes.get(..8).ok_or_else(|| bad("is cut off"))?;
        let small = u32::from_be_bytes(head[..4].try_into().expect("4 bytes"));
        let kind: [u8; 4] = head[4..8].try_into().expect("4 bytes");
        let (header, size) = match small {
            0 => (8, bytes.len() as u64),
            1 => {
                let large = bytes.get(8..16).ok_or_else(|| bad("is cut off"))?;
                (16, u64::from_be_bytes(large.try_into().expect("8 bytes")))
            }
            n => (8, u64::from(n)),
        };
        if size < header || size > bytes.len() as u64 {
            return Err(VideoError::Fragment(format!(
                "box `{}` claims {size} bytes where {} remain",
                String::from_utf8_lossy(&kind),
                bytes.len()
            )));
        }
        out.push((kind, &bytes[header as usize..size as usize]));
        bytes = &bytes[size as usize..];
    }
    Ok(out)
}

/// Big-endian fields of a full box's body, each an error past its end.
struct Fields<'a> {
    bytes: &'a [u8],
    what: &'static str,
}

impl<'a> Fields<'a> {
    fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Self { bytes, what }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], VideoError> {
        let (head, rest) = self
            .bytes
            .split_first_chunk::<N>()
            .ok_or_else(|| VideoError::Fragment(format!("`{}` is cut off", self.what)))?;
        self.bytes = rest;
        Ok(*head)
    }

    fn u32(&mut self) -> Result<u32, VideoError> {
        self.take::<4>().map(u32::from_be_bytes)
    }

    fn u64(&mut self) -> Result<u64, VideoError> {
        self.take::<8>().map(u64::from_be_bytes)
    }

    /// A full box's version and flags.
    fn version_flags(&mut self) -> Result<(u8, u32), VideoError> {
        let v = self.u32()?;
        Ok(((v >> 24) as u8, v & 0x00ff_ffff))
    }
}

/// Track `track`'s defaults in the movie `head` (`ftyp` and `moov` boxes): its `trex` in
/// `moov/mvex`, if any.
pub(super) fn track_defaults(head: &[u8], track: u32) -> Result<Defaults, VideoError> {
    for (kind, moov) in children(head)? {
        if &kind != b"moov" {
            continue;
        }
        for (kind, mvex) in children(moov)? {
            if &kind != b"mvex" {
                continue;
            }
            for (kind, trex) in children(mvex)? {
                if &kind != b"trex" {
                    continue;
                }
                let mut f = Fields::new(trex, "trex");
                f.version_flags()?;
                if f.u32()? != track {
                    continue;
                }
                let _description = f.u32()?;
                return Ok(Defaults {
                    duration: f.u32()?,
                    size: f.u32()?,
                    flags: f.u32()?,
                });
            }
        }
    }
    Ok(Defaults::default())
}

/// Where the frames of the fragments read so far leave off.
#[derive(Clone, Debug)]
pub(super) struct Fragments {
    track: u32,
    defaults: Defaults,
    /// Subtracted from decode time plus composition offset (the edit list's media time).
    shift: i64,
    /// The most negative composition offset read so far (0 when none is).
    most_negative: i64,
    /// The next frame's decode time when a fragment does not give its own (`tfdt`).
    next_dts: i64,
    /// The file's size: every frame lies inside it.
    file_len: u64,
    /// The frames, in decode order.
    pub(super) frames: Vec<Frame>,
}

impl Fragments {
    /// Before the first fragment of track `track`, in a file of `file_len` bytes; a fragment
    /// without its own decode time (`tfdt`) starts at `start` (where the movie's own frames
    /// leave off).
    pub(super) fn new(
        track: u32,
        defaults: Defaults,
        shift: i64,
        start: i64,
        file_len: u64,
    ) -> Self {
        Self {
            track,
            defaults,
            shift,
            most_negative: 0,
            file_len,
            next_dts: start,
            frames: Vec::new(),
        }
    }

    /// The fragments' frames, in decode order, each presentation time moved on by the
    /// largest negative composition offset of the track (these and `before`, the movie's own
    /// frames' most negative), as FFmpeg's reader moves a fragment's: it adds that shift to
    /// every packet's decode time plus composition offset.
    pub(super) fn finish(mut self, before: i64) -> Vec<Frame> {
        let shift = self.most_negative.min(before).min(0).saturating_neg();
        for f in &mut self.frames {
            f.pts = f.pts.saturating_add(shift);
        }
        self.frames
    }

    /// Adds the frames of the movie fragment whose body is `moof`, and whose header starts
    /// at byte `at` of the file (what its data offsets count from).
    pub(super) fn add(&mut self, moof: &[u8], at: u64) -> Result<(), VideoError> {
        // Without a base offset of its own, a track fragment's data follows the one before's.
        let mut previous_end = None;
        for (kind, traf) in children(moof)? {
            if &kind == b"traf" {
                previous_end = Some(self.add_track_fragment(traf, at, previous_end)?);
            }
        }
        Ok(())
    }

    /// One `traf`: returns where its data ends.
    fn add_track_fragment(
        &mut self,
        traf: &[u8],
        moof_at: u64,
        previous_end: Option<u64>,
    ) -> Result<u64, VideoError> {
        let boxes = children(traf)?;
        let tfhd = boxes
            .iter()
            .find(|(k, _)| k == b"tfhd")
            .ok_or_else(|| VideoError::Fragment("a track fragment has no `tfhd`".into()))?;
        let mut f = Fields::new(tfhd.1, "tfhd");
        let (_, flags) = f.version_flags()?;
        let track = f.u32()?;
        let base = if flags & 0x01 != 0 {
            Some(f.u64()?)
        } else {
            None
        };
        if flags & 0x02 != 0 {
            let _description = f.u32()?;
        }
        let mut defaults = self.defaults;
        if flags & 0x08 != 0 {
            defaults.duration = f.u32()?;
        }
        if flags & 0x10 != 0 {
            defaults.size = f.u32()?;
        }
        if flags & 0x20 != 0 {
            defaults.flags = f.u32()?;
        }
        // `default-base-is-moof`, or the first track fragment: offsets count from the `moof`.
        let base = match (base, previous_end) {
            (Some(base), _) => base,
            (None, Some(end)) if flags & 0x2_0000 == 0 => end,
            (None, _) => moof_at,
        };
        let ours = track == self.track;
        let mut dts = self.next_dts;
        if let Some((_, tfdt)) = boxes.iter().find(|(k, _)| k == b"tfdt") {
            let mut f = Fields::new(tfdt, "tfdt");
            let decode = match f.version_flags()?.0 {
                1 => f.u64()?,
                _ => u64::from(f.u32()?),
            };
            dts = i64::try_from(decode).map_err(|_| overflow())?;
        }
        let mut end = base;
        for (_, trun) in boxes.iter().filter(|(k, _)| k == b"trun") {
            end = self.add_run(trun, base, end, defaults, &mut dts, ours)?;
        }
        if ours {
            self.next_dts = dts;
        }
        Ok(end)
    }

    /// One `trun`: its frames (kept when `ours`), from `dts` on; returns where its data ends.
    fn add_run(
        &mut self,
        trun: &[u8],
        base: u64,
        previous_end: u64,
        defaults: Defaults,
        dts: &mut i64,
        ours: bool,
    ) -> Result<u64, VideoError> {
        let mut f = Fields::new(trun, "trun");
        let (version, flags) = f.version_flags()?;
        let count = f.u32()? as usize;
        let mut at = if flags & 0x01 != 0 {
            let offset = i64::from(f.u32()? as i32);
            base.checked_add_signed(offset).ok_or_else(overflow)?
        } else {
            previous_end
        };
        let first_flags = if flags & 0x04 != 0 {
            Some(f.u32()?)
        } else {
            None
        };
        let fields = [0x100, 0x200, 0x400, 0x800]
            .iter()
            .filter(|&&bit| flags & bit != 0)
            .count();
        // Checked against the bytes that hold them before anything is reserved. A run whose
        // samples all take the defaults holds no bytes per sample: its frames are bounded by
        // the file instead (each at least one byte, inside it), checked frame by frame, so
        // memory grows only with frames that are really there.
        if count.saturating_mul(4 * fields) > f.bytes.len()
            || self.frames.len().saturating_add(count) > MAX_FRAMES
            || count as u64 > self.file_len
        {
            return Err(VideoError::Fragment(format!(
                "a run claims {count} frames in {} bytes",
                f.bytes.len()
            )));
        }
        if ours {
            self.frames.reserve(count.min(1 << 16));
        }
        for k in 0..count {
            let duration = if flags & 0x100 != 0 {
                f.u32()?
            } else {
                defaults.duration
            };
            let len = if flags & 0x200 != 0 {
                f.u32()?
            } else {
                defaults.size
            };
            let sample_flags = if flags & 0x400 != 0 {
                f.u32()?
            } else {
                first_flags.filter(|_| k == 0).unwrap_or(defaults.flags)
            };
            let offset = if flags & 0x800 == 0 {
                0
            } else if version == 0 {
                i64::from(f.u32()?)
            } else {
                i64::from(f.u32()? as i32)
            };
            if u64::from(len) >= MAX_FRAME_BYTES {
                return Err(VideoError::FrameTooLarge {
                    frame: self.frames.len(),
                    len: u64::from(len),
                });
            }
            if len == 0 {
                return Err(VideoError::Sample {
                    frame: self.frames.len(),
                    reason: "its fragment gives it no bytes",
                });
            }
            if at.saturating_add(u64::from(len)) > self.file_len {
                return Err(VideoError::PastTheEnd {
                    frame: self.frames.len(),
                    size: self.file_len,
                });
            }
            if ours {
                self.most_negative = self.most_negative.min(offset);
                let pts = dts
                    .checked_add(offset)
                    .and_then(|t| t.checked_sub(self.shift))
                    .ok_or_else(overflow)?;
                self.frames.push(Frame {
                    pts,
                    dts: *dts,
                    duration,
                    // `sample_is_non_sync_sample`.
                    keyframe: sample_flags & 0x1_0000 == 0,
                    offset: at,
                    len,
                    shown: true,
                    edit_start: false,
                });
            }
            at = at.checked_add(u64::from(len)).ok_or_else(overflow)?;
            *dts = dts.checked_add(i64::from(duration)).ok_or_else(overflow)?;
        }
        Ok(at)
    }
}

fn overflow() -> VideoError {
    VideoError::Fragment("a timestamp or offset overflows".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxed(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
        let mut b = (8 + body.len() as u32).to_be_bytes().to_vec();
        b.extend_from_slice(kind);
        b.extend_from_slice(body);
        b
    }

    fn full(kind: &[u8; 4], version: u8, flags: u32, fields: &[u32]) -> Vec<u8> {
        let mut body = (u32::from(version) << 24 | flags).to_be_bytes().to_vec();
        for f in fields {
            body.extend_from_slice(&f.to_be_bytes());
        }
        boxed(kind, &body)
    }

    #[test]
    fn a_track_fragment_without_a_base_offset_follows_the_data_of_the_one_before() {
        // Track 2's fragment first (two samples of 100 and 50 bytes from byte 1000), then
        // track 1's with neither a base offset nor default-base-is-moof: its data starts at
        // byte 1150. Durations from `trex` (40), sizes and flags per sample, composition
        // offsets signed (version 1).
        let other = boxed(
            b"traf",
            &[
                full(b"tfhd", 0, 0x01, &[2, 0, 1000]),
                full(b"trun", 0, 0x200, &[2, 100, 50]),
            ]
            .concat(),
        );
        let ours = boxed(
            b"traf",
            &[
                full(b"tfhd", 0, 0, &[1]),
                full(b"tfdt", 0, 0, &[4000]),
                full(
                    b"trun",
                    1,
                    0x200 | 0x400 | 0x800,
                    &[
                        3,
                        10,
                        0x0200_0000,
                        80,
                        20,
                        0x0101_0000,
                        (-40i32) as u32,
                        30,
                        0x0101_0000,
                        40,
                    ],
                ),
            ]
            .concat(),
        );
        let defaults = Defaults {
            duration: 40,
            size: 0,
            flags: 0x0101_0000,
        };
        let mut fragments = Fragments::new(1, defaults, 80, 0, 1 << 20);
        fragments.add(&[other, ours].concat(), 500).unwrap();
        let got: Vec<_> = fragments
            .frames
            .iter()
            .map(|f| (f.pts, f.dts, f.duration, f.keyframe, f.offset, f.len))
            .collect();
        assert_eq!(
            got,
            [
                (4000, 4000, 40, true, 1150, 10),
                (3920, 4040, 40, false, 1160, 20),
                (4040, 4080, 40, false, 1180, 30),
            ]
        );
        // A fragment without `tfdt` continues from where the last one ended.
        let next = boxed(
            b"traf",
            &[
                full(b"tfhd", 0, 0x2_0000 | 0x10, &[1, 7]),
                full(b"trun", 0, 0x01, &[1, 16]),
            ]
            .concat(),
        );
        fragments.add(&next, 9000).unwrap();
        let last = fragments.frames.last().unwrap();
        assert_eq!((last.dts, last.offset, last.len), (4120, 9016, 7));
        // The negative composition offset (-40) moves every presentation time on by 40, as
        // FFmpeg's reader moves a fragment's; a more negative one among the movie's own
        // frames, by that.
        let pts = |f: Vec<Frame>| f.iter().map(|f| f.pts).collect::<Vec<_>>();
        assert_eq!(pts(fragments.clone().finish(0)), [4040, 3960, 4080, 4080]);
        assert_eq!(pts(fragments.finish(-100)), [4100, 4020, 4140, 4140]);
    }

    #[test]
    fn a_run_claiming_more_frames_than_its_bytes_hold_is_refused_before_reserving() {
        let traf = boxed(
            b"traf",
            &[
                full(b"tfhd", 0, 0, &[1]),
                full(b"trun", 0, 0x200, &[u32::MAX, 5]),
            ]
            .concat(),
        );
        let mut fragments = Fragments::new(1, Defaults::default(), 0, 0, 1 << 20);
        let err = fragments.add(&traf, 0).unwrap_err();
        assert!(
            err.to_string().contains("claims 4294967295 frames"),
            "{err}"
        );
        // A run of default-sized samples holds no bytes per sample: bounded by the file, and
        // each frame inside it (found by the `video_index` fuzz target reserving 6.7 GB).
        let defaults = Defaults {
            duration: 1,
            size: 100,
            flags: 0,
        };
        let run = |count| {
            boxed(
                b"traf",
                &[full(b"tfhd", 0, 0, &[1]), full(b"trun", 0, 0, &[count])].concat(),
            )
        };
        let mut fragments = Fragments::new(1, defaults, 0, 0, 1000);
        let err = fragments.add(&run(1 << 27), 0).unwrap_err();
        assert!(err.to_string().contains("claims 134217728 frames"), "{err}");
        let err = fragments.add(&run(11), 0).unwrap_err();
        assert!(err.to_string().contains("past the end"), "{err}");
        let mut empty = Fragments::new(1, Defaults::default(), 0, 0, 1000);
        let err = empty.add(&run(3), 0).unwrap_err();
        assert!(err.to_string().contains("no bytes"), "{err}");
        let cut = boxed(b"traf", &full(b"tfhd", 0, 0x01, &[1])); // base offset missing
        assert!(fragments.add(&cut, 0).is_err());
        assert!(
            fragments.add(b"\0\0\0\x20traf", 0).is_err(),
            "a box past its bytes"
        );
    }
}
