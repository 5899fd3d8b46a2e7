//! A video sample's clips, once drawn ([`ClipsJob`]): decoded and written into the sample's
//! slot. The same code runs in a loader's worker (the host path, reading the file) and on the
//! media engine (the device path, from the runs' bytes in device memory), so the two paths give
//! the same output by construction.
//!
//! Frame `t` of clip `c` is written at frame position `c * per_clip + t` of the slot, or, with
//! channels first, plane `ch` of it at plane `(c * 3 + ch) * per_clip + t`.

use std::collections::HashMap;
use std::fs::File;
use std::time::Duration;

use super::{colour, Codec, DecodeCounts, DecodePlan, VideoDecoder, VideoFailure, VideoIndex};
use crate::augment::{self, AugmentError, PixelStage, Resampler, SamplePlan, Scratch};
use crate::cpu_time::CpuClock;

/// What a video sample's decode needs once its clips are drawn.
#[derive(Debug)]
pub struct ClipsJob {
    /// The video's frame index (its configuration, and where each frame's bytes lie).
    pub index: VideoIndex,
    /// The runs that decode every frame the clips keep, each once.
    pub plan: DecodePlan,
    /// Each clip's frames, as decode-order indices.
    pub clips: Vec<Vec<usize>>,
    /// Each clip's drawn plan (window, filter, pixel ops), applied to every frame of the clip.
    pub drawn: Vec<SamplePlan>,
    /// Frames in the slot: clips times frames per clip.
    pub frames: usize,
    /// Each clip is `[C, T, H, W]` instead of `[T, C, H, W]`.
    pub channels_first: bool,
}

/// Where a job's compressed bytes come from.
#[derive(Clone, Copy)]
pub enum Bitstream<'a> {
    /// The video in a local file from `offset` on: the whole file (offset 0) or a member of a
    /// tar shard (the host path).
    File {
        /// The file.
        file: &'a File,
        /// Where the video's first byte is in it.
        offset: u64,
        /// The video's length: reads past it fail, as past a file's end.
        len: u64,
    },
    /// The whole video in memory (a member of a shard on object storage).
    Whole(&'a [u8]),
    /// The runs' spans one after the other ([`DecodePlan::spans`]): what crosses to the device.
    Spans(&'a [u8]),
}

impl Bitstream<'_> {
    /// Reads `buf.len()` bytes of the video from `at` (a video offset, as the index gives).
    ///
    /// # Errors
    /// The file cannot be read, or the video ends before them; for [`Bitstream::Spans`],
    /// always (spans are read in order, by [`VideoDecoder::decode_spans`]).
    fn read_at(&self, at: u64, buf: &mut [u8]) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let short = || std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
        match *self {
            Self::File { file, offset, len } => {
                let end = at.checked_add(buf.len() as u64).filter(|&end| end <= len);
                let from = end.and_then(|_| offset.checked_add(at)).ok_or_else(short)?;
                file.read_exact_at(buf, from)
            }
            Self::Whole(bytes) => {
                let from = usize::try_from(at).map_err(|_| short())?;
                let part = from
                    .checked_add(buf.len())
                    .and_then(|end| bytes.get(from..end))
                    .ok_or_else(short)?;
                buf.copy_from_slice(part);
                Ok(())
            }
            Self::Spans(_) => Err(std::io::Error::other(
                "the runs' spans are not the video's bytes",
            )),
        }
    }
}

/// Why a job's clips could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ClipsError {
    /// Reading or decoding the video.
    #[error(transparent)]
    Video(#[from] VideoFailure),
    /// Resampling a frame.
    #[error(transparent)]
    Augment(#[from] AugmentError),
}

/// A decoder and the buffers of one thread's video samples (a worker's, or an engine's), kept
/// between samples.
#[derive(Default)]
pub struct ClipsScratch {
    /// The decoder and the `avcC` record it was started with: reused while videos share it.
    decoder: Option<((Codec, Vec<u8>), VideoDecoder)>,
    /// The frame just decoded, in RGB where its clips read it.
    rgb: Vec<u8>,
    /// The frame turned upright, for a video shown turned.
    turned: Vec<u8>,
    /// A frame's copy when the plan runs ops on the whole frame first.
    whole: Vec<u8>,
    /// One output frame, before its channel planes go to their places (channels first, with
    /// boxes to erase).
    planes: Vec<u8>,
    resampler: Option<Resampler>,
    ops: Scratch,
    /// A folder of frames' decoder and buffers.
    jpeg_frames: super::FramesScratch,
}

/// What [`ClipsJob::render`] did: the decoder's counts, and the thread's CPU time spent writing
/// frames (resampling, pixel ops and the output's layout) rather than decoding them.
#[derive(Debug)]
pub struct Rendered {
    /// The decoder's counts.
    pub counts: DecodeCounts,
    /// CPU time spent writing the frames.
    pub write: Duration,
}

impl ClipsScratch {
    /// The buffers of a folder of frames' samples.
    pub fn frames(&mut self) -> &mut super::FramesScratch {
        &mut self.jpeg_frames
    }
}

impl ClipsJob {
    /// How many bytes the device path ships: the plan's spans' lengths.
    pub fn spans_len(&self) -> usize {
        self.plan
            .spans(&self.index)
            .iter()
            .map(|&(start, end)| (end - start) as usize)
            .sum()
    }

    /// Reads the plan's spans of the video `from` one after the other into `out`
    /// ([`ClipsJob::spans_len`] bytes long): what crosses to the device.
    ///
    /// # Errors
    /// The file cannot be read.
    pub fn read_spans(&self, from: Bitstream<'_>, out: &mut [u8]) -> std::io::Result<()> {
        let mut at = 0;
        for (start, end) in self.plan.spans(&self.index) {
            let len = (end - start) as usize;
            from.read_at(start, &mut out[at..at + len])?;
            at += len;
        }
        Ok(())
    }

    /// Decodes every frame the clips keep (each once) and writes it into `slot` as soon as the
    /// decoder gives it, through the plan of each clip that keeps it: its ops on the whole
    /// frame, its window resampled, its pixel ops, then `stage`'s flip, normalize, cast and
    /// layout. Each frame is converted to RGB (only where its clips read it) and written while
    /// the decoder's picture is still in cache, and no decoded frame is held.
    ///
    /// # Errors
    /// [`VideoFailure`] naming the frame (the next decode starts a fresh OpenH264 anyway), or
    /// a window the resampler refuses.
    pub fn render(
        &self,
        bytes: Bitstream<'_>,
        stage: &PixelStage,
        s: &mut ClipsScratch,
        slot: &mut [u8],
    ) -> Result<Rendered, ClipsError> {
        let config = (self.index.codec, &self.index.config);
        // The decoder (its configuration and buffers; OpenH264 itself starts afresh for each
        // run) is kept while videos share their codec and parameter sets (one encoder's
        // output).
        let decoder = match &mut s.decoder {
            Some((kept, d)) if (kept.0, &kept.1) == config => d,
            slot => {
                let d = VideoDecoder::new_typed(&self.index).map_err(VideoFailure::from)?;
                &mut slot.insert(((config.0, config.1.clone()), d)).1
            }
        };
        let resampler = s.resampler.get_or_insert_with(|| Resampler::new(1, 1));
        let regions = self.regions(resampler);
        // Each kept frame's places: (clip, position in the clip).
        let mut places: HashMap<usize, Vec<(usize, usize)>> = HashMap::new();
        for (k, clip) in self.clips.iter().enumerate() {
            for (t, &frame) in clip.iter().enumerate() {
                places.entry(frame).or_default().push((k, t));
            }
        }
        let place = Placement {
            per_clip: self.clips.first().map_or(1, Vec::len),
            frame_bytes: slot.len() / self.frames,
            channels_first: self.channels_first,
        };
        let mut frame = FrameWriter {
            job: self,
            stage,
            place,
            resampler,
            whole: &mut s.whole,
            planes: &mut s.planes,
            ops: &mut s.ops,
            slot,
        };
        let (rgb, turned) = (&mut s.rgb, &mut s.turned);
        let (mut failed, mut write) = (None, Duration::ZERO);
        let turns = self.index.display.turns;
        let conversion = colour::Conversion::of_video(&self.index);
        let mut emit = |p: super::Picture<'_>| {
            if failed.is_some() {
                return;
            }
            match regions.get(&p.frame) {
                Some(r) => colour::to_rgb_rows(&p, &conversion, rgb, r.columns, r.rows()),
                None => colour::to_rgb(&p, &conversion, rgb),
            }
            let t0 = CpuClock::now();
            let rgb = if turns == 0 {
                &*rgb
            } else {
                super::turn(rgb, (p.width, p.height), turns, turned);
                &*turned
            };
            for &at in places.get(&p.frame).into_iter().flatten() {
                if let Err(e) = frame.write(rgb, at) {
                    failed = Some(e);
                    break;
                }
            }
            write += t0.elapsed();
        };
        let counts = match bytes {
            Bitstream::Spans(bytes) => {
                decoder.decode_spans(bytes, &self.index, &self.plan, &mut emit)
            }
            from => decoder.decode_from(
                &mut |at, buf| from.read_at(at, buf),
                &self.index,
                &self.plan,
                &mut emit,
            ),
        }?;
        match failed {
            Some(e) => Err(e),
            None => Ok(Rendered { counts, write }),
        }
    }

    /// The pixels of each kept frame (decode-order index) that its clips read: the union of
    /// their windows' footprints ([`Resampler::footprint`]), of those only the rows the filter
    /// reads ([`Resampler::rows_read`]), or the whole frame for a clip whose plan runs ops on
    /// the whole frame first. Only these are converted to RGB, which changes no output pixel:
    /// the resampler reads nothing else. A video shown turned is converted whole (and then
    /// turned).
    fn regions(&self, resampler: &mut Resampler) -> HashMap<usize, Region> {
        let (w, h) = self.index.size;
        let mut regions: HashMap<usize, Region> = HashMap::new();
        if self.index.display.turns != 0 {
            return regions;
        }
        for (clip, drawn) in self.clips.iter().zip(&self.drawn) {
            let ((x0, y0, x1, y1), rows) = if drawn.pre.is_empty() {
                let (oh, ow) = drawn.pixels.size;
                resampler.set_size(oh, ow);
                let footprint = resampler.footprint(w, h, &drawn.crop, drawn.interpolation);
                let rows = resampler.rows_read(h, &drawn.crop, drawn.interpolation);
                (footprint, rows)
            } else {
                ((0, 0, w, h), None)
            };
            for &frame in clip {
                let region = regions.entry(frame).or_insert_with(|| Region {
                    columns: (x0 as usize, x1 as usize),
                    rows: vec![false; h as usize],
                });
                region.columns = (
                    region.columns.0.min(x0 as usize),
                    region.columns.1.max(x1 as usize),
                );
                match &rows {
                    Some(rows) => rows.iter().for_each(|&r| region.rows[r] = true),
                    None => region.rows[y0 as usize..y1 as usize].fill(true),
                }
            }
        }
        regions
    }
}

/// Writes a job's decoded frames into its slot, each through the plan of its clip.
struct FrameWriter<'a> {
    job: &'a ClipsJob,
    stage: &'a PixelStage,
    place: Placement,
    resampler: &'a mut Resampler,
    whole: &'a mut Vec<u8>,
    planes: &'a mut Vec<u8>,
    ops: &'a mut Scratch,
    slot: &'a mut [u8],
}

impl FrameWriter<'_> {
    /// Writes the RGB frame `rgb` as frame `t` of clip `k`.
    ///
    /// # Errors
    /// A window the resampler refuses.
    fn write(&mut self, rgb: &[u8], (k, t): (usize, usize)) -> Result<(), ClipsError> {
        let (w, h) = self.job.index.display_size();
        let drawn = &self.job.drawn[k];
        let (oh, ow) = drawn.pixels.size;
        self.resampler.set_size(oh, ow);
        let source: &[u8] = if drawn.pre.is_empty() {
            rgb
        } else {
            self.whole.clear();
            self.whole.extend_from_slice(rgb);
            augment::apply(&drawn.pre, self.whole, h as usize, w as usize, self.ops);
            self.whole
        };
        let resized = self
            .resampler
            .run_with(source, w, h, &drawn.crop, drawn.interpolation)?;
        self.stage.ops(resized, &drawn.pixels, self.ops);
        self.place.put(
            self.stage,
            resized,
            &drawn.pixels,
            (k, t),
            self.slot,
            self.planes,
        );
        Ok(())
    }
}

/// The pixels of a kept frame that its clips read: columns `x0..x1` of the rows marked.
struct Region {
    columns: (usize, usize),
    rows: Vec<bool>,
}

impl Region {
    fn rows(&self) -> impl Iterator<Item = usize> + '_ {
        self.rows
            .iter()
            .enumerate()
            .filter(|(_, &read)| read)
            .map(|(row, _)| row)
    }
}

/// Where each output frame of a sample's clips goes in its slot: frame `t` of clip `k` at
/// frame position `k * per_clip + t`, or, channels first, plane `ch` of it at plane
/// `(k * 3 + ch) * per_clip + t`.
pub(super) struct Placement {
    /// Frames per clip.
    pub per_clip: usize,
    /// One output frame's bytes.
    pub frame_bytes: usize,
    /// Each clip is `[C, T, H, W]`.
    pub channels_first: bool,
}

impl Placement {
    /// Runs `stage`'s writer (flip, normalize, cast, layout) on the output frame `resized` of
    /// clip `k` at time `t`, into its place in `slot`; `planes` is scratch for channels first.
    pub fn put(
        &self,
        stage: &PixelStage,
        resized: &[u8],
        pixels: &augment::PixelPlan,
        (k, t): (usize, usize),
        slot: &mut [u8],
        planes: &mut Vec<u8>,
    ) {
        let (per_clip, frame_bytes) = (self.per_clip, self.frame_bytes);
        if self.channels_first {
            let plane = frame_bytes / 3;
            // Channel `c`'s plane starts at `at(c)`; they lie `per_clip` planes apart.
            let at = |c: usize| ((k * 3 + c) * per_clip + t) * plane;
            let (_, rest) = slot.split_at_mut(at(0));
            let (r, rest) = rest.split_at_mut(plane);
            let (_, rest) = rest.split_at_mut(at(1) - at(0) - plane);
            let (g, rest) = rest.split_at_mut(plane);
            let (_, rest) = rest.split_at_mut(at(2) - at(1) - plane);
            if stage.write_planes(resized, pixels, [r, g, &mut rest[..plane]]) {
                return;
            }
            planes.resize(frame_bytes, 0);
            stage.write(resized, pixels, planes);
            let plane = frame_bytes / 3;
            for (c, bytes) in planes.chunks_exact(plane).enumerate() {
                let at = ((k * 3 + c) * per_clip + t) * plane;
                slot[at..at + plane].copy_from_slice(bytes);
            }
        } else {
            let at = (k * per_clip + t) * frame_bytes;
            stage.write(resized, pixels, &mut slot[at..at + frame_bytes]);
        }
    }
}
