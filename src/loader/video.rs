//! The loader's video path: a sample is a video, and its slot holds `clips x frames` frames.
//!
//! Per sample: the video's frame index (built once per loader and kept, so later epochs read
//! no tables), the clips drawn by the [`ClipSampler`] from `(seed, epoch, index)`, one decode
//! plan for all their frames (each decoded once, from the keyframe before it), then for each
//! clip one [`SamplePlan`] drawn from the video's size and applied to every frame of the clip:
//! the same crop, flip, colour jitter and erasing on each, as torchvision v2 applies a
//! transform to a video tensor. Frame `t` of clip `c` is written at frame position
//! `c * frames_per_clip + t` of the slot, so a batch is `[B, T, C, H, W]` (`[B, T, H, W, C]`
//! with the NHWC layout), or `[B, clips, T, ...]` with several clips.

use std::collections::HashMap;
use std::fs::File;
use std::sync::OnceLock;

use super::replace::Filled;
use super::Shared;
use crate::augment::{self, Resampler, SamplePlan};
use crate::cpu_time::CpuClock;
use crate::stage::Stage;
use crate::video::{
    colour, index_threads, index_videos, ClipError, ClipSampler, DecodePlan, H264Decoder,
    IndexCache, IndexStats, PackedIndex, Timeline, VideoError, VideoFailure, VideoIndex,
};
use crate::{SampleError, SampleErrorKind, Source};

/// What makes a loader a video loader: how each video's clips are drawn.
#[derive(Clone, Debug, PartialEq)]
pub struct VideoSpec {
    /// The clips of each sample.
    pub sampler: ClipSampler,
    /// Channels before time: each clip `[C, T, H, W]` (the layout of torchvision's video
    /// models, and of its video reference after its permute), instead of `[T, C, H, W]`.
    /// Needs the NCHW layout.
    pub channels_first: bool,
}

impl VideoSpec {
    /// Clips in each sample (batches need a fixed count).
    ///
    /// # Errors
    /// A message for a sampler whose clip count depends on each video's length.
    pub fn clips(&self) -> Result<usize, String> {
        match &self.sampler {
            ClipSampler::RandomIndices(p) | ClipSampler::RegularIndices(p) => Ok(p.num_clips),
            ClipSampler::RandomTimestamps(p) => Ok(p.num_clips),
            ClipSampler::Windows(_) => Ok(1),
            ClipSampler::RegularTimestamps { .. } => Err(
                "clips at regular timestamps give as many clips as each video's length allows; \
                 a batch needs the same count for every video (use clips at regular indices, \
                 or random timestamps)"
                    .into(),
            ),
        }
    }

    /// Frames in each sample: clips times frames per clip.
    pub fn frames(&self) -> Result<usize, String> {
        Ok(self.clips()? * self.sampler.frames_per_clip())
    }

    /// A sample's shape for frames of `frame` (`[C, H, W]` or `[H, W, C]`): `[T, ...frame]`
    /// or `[C, T, H, W]`, after a clips axis when there are several.
    pub(super) fn sample_shape(&self, frame: &[usize]) -> Vec<usize> {
        let clips = self.clips().unwrap_or(1);
        let t = self.sampler.frames_per_clip();
        let mut shape = if clips > 1 { vec![clips] } else { Vec::new() };
        if self.channels_first {
            shape.push(frame[0]);
            shape.push(t);
            shape.extend_from_slice(&frame[1..]);
        } else {
            shape.push(t);
            shape.extend_from_slice(frame);
        }
        shape
    }
}

/// A video's index, unpacked for one sample, and what the samplers read from it.
struct Indexed {
    index: VideoIndex,
    timeline: Timeline,
    /// Presentation position -> decode-order frame.
    order: Vec<usize>,
}

/// The video path's state shared by the workers: the spec and every video's index, packed,
/// built (or read from the index file) when the loader is built.
pub(super) struct VideoShared {
    spec: VideoSpec,
    frames: usize,
    /// Each video's index, packed (about 8 bytes a frame).
    indexes: Vec<OnceLock<PackedIndex>>,
    /// How the indexes were had when the loader was built.
    pub(super) stats: IndexStats,
    /// With [`ClipSampler::Windows`], where each video's clips lie among the samples.
    windows: Option<Windows>,
}

/// torchvision's `VideoClips` laid out as samples: clip `c` of video `v` is sample
/// `ends[v - 1] + c`, and video `v`'s frame count and rate give its clips' frames.
struct Windows {
    spec: crate::video::WindowClips,
    /// Each video's (frames, fps).
    videos: Vec<(usize, f64)>,
    /// Each video's first sample after its clips (torchvision's `cumulative_sizes`).
    ends: Vec<usize>,
}

impl Windows {
    /// `sample` as (video, clip).
    fn locate(&self, sample: usize) -> (usize, usize) {
        let video = self.ends.partition_point(|&end| end <= sample);
        let first = if video == 0 { 0 } else { self.ends[video - 1] };
        (video, sample - first)
    }
}

impl VideoShared {
    /// Indexes every video of a source of local files now, on [`index_threads`], through the
    /// index file `cache` names (a source of records indexes each video when it is first read).
    ///
    /// # Errors
    /// With [`ClipSampler::Windows`]: a source that is not local files, or a video whose frame
    /// count differs from the one the user's metadata gives (named).
    pub(super) fn new(
        spec: VideoSpec,
        frames: usize,
        source: &dyn Source,
        cache: &IndexCache,
    ) -> Result<Self, crate::Error> {
        let entries = source.entries();
        let indexes: Vec<OnceLock<PackedIndex>> =
            (0..entries.len()).map(|_| OnceLock::new()).collect();
        let mut stats = IndexStats::default();
        if source.listing().files {
            let paths: Vec<_> = entries.iter().map(|e| e.path.clone()).collect();
            let file = cache.file(source.origin());
            let built;
            (built, stats) = index_videos(&paths, file.as_deref(), index_threads());
            for (slot, index) in indexes.iter().zip(built) {
                if let Some(index) = index {
                    let _ = slot.set(index);
                }
            }
        }
        let windows = match &spec.sampler {
            ClipSampler::Windows(w) => Some(windows(w, source, &indexes)?),
            _ => None,
        };
        Ok(Self {
            spec,
            frames,
            indexes,
            stats,
            windows,
        })
    }

    /// Samples in an epoch: one per video, or with [`ClipSampler::Windows`] one per clip.
    pub(super) fn samples(&self) -> usize {
        match &self.windows {
            Some(w) => w.ends.last().copied().unwrap_or(0),
            None => self.indexes.len(),
        }
    }

    /// The video (dataset entry) sample `sample` is from.
    pub(super) fn video_of(&self, sample: usize) -> usize {
        self.windows.as_ref().map_or(sample, |w| w.locate(sample).0)
    }

    /// Video `index`'s index, unpacked; built now (and kept, packed) if it was not indexed
    /// when the loader was built. A failure is not kept: the next use tries again (a read
    /// error may pass).
    fn indexed(&self, shared: &Shared, index: usize) -> Result<Indexed, SampleErrorKind> {
        if let Some(done) = self.indexes[index].get() {
            return Ok(Indexed::from(done.unpack()));
        }
        let path = &shared.source.entries()[index].path;
        let video = VideoIndex::open_typed(path).map_err(|e| match e {
            VideoFailure::Io(e) => SampleErrorKind::Read(e),
            VideoFailure::Video(e) => SampleErrorKind::Video(e),
        })?;
        let _ = self.indexes[index].set(PackedIndex::pack(&video));
        Ok(Indexed::from(video))
    }
}

/// Lays out torchvision's `VideoClips` over the indexed videos: each video's frame count and
/// rate from the user's metadata (checked against the index) or from the index.
fn windows(
    spec: &crate::video::WindowClips,
    source: &dyn Source,
    indexes: &[OnceLock<PackedIndex>],
) -> Result<Windows, crate::Error> {
    let what = "video";
    if !source.listing().files {
        return Err(crate::Error::config(
            what,
            "torchvision's VideoClips count every video's clips up front, which needs video files",
        ));
    }
    let entries = source.entries();
    if let Some(m) = &spec.metadata {
        if m.len() != entries.len() {
            return Err(crate::Error::config(
                what,
                format!(
                    "the clip metadata has {} videos, the dataset {}",
                    m.len(),
                    entries.len()
                ),
            ));
        }
    }
    let mut videos = Vec::with_capacity(entries.len());
    for (k, slot) in indexes.iter().enumerate() {
        let indexed = slot.get().map(|p| Indexed::from(p.unpack()));
        let counted = indexed.as_ref().map(|v| v.timeline.len());
        let given = spec.metadata.as_ref().map(|m| m[k]);
        let path = entries[k].path.display();
        let video = match (given, counted) {
            // A video the user's reader found nothing in gives no clip, whatever hpuload reads.
            (Some((0, fps)), _) => (0, fps),
            (Some((n, fps)), Some(ours)) if n == ours => (n, fps),
            (Some((n, _)), Some(ours)) => {
                return Err(crate::Error::config(
                    what,
                    format!(
                        "{path}: the dataset's metadata counts {n} frames, the file's tables {ours}"
                    ),
                ))
            }
            (Some(_), None) => {
                return Err(crate::Error::config(
                    what,
                    format!("{path}: hpuload cannot read this video (see its index error)"),
                ))
            }
            (None, Some(n)) => (
                n,
                indexed
                    .as_ref()
                    .and_then(|v| v.timeline.average_fps())
                    .unwrap_or(1.0),
            ),
            (None, None) => (0, 1.0),
        };
        videos.push(video);
    }
    let mut ends = Vec::with_capacity(videos.len());
    let mut total = 0usize;
    for &(n, fps) in &videos {
        total += spec.count(n, fps);
        ends.push(total);
    }
    Ok(Windows {
        spec: spec.clone(),
        videos,
        ends,
    })
}

impl From<VideoIndex> for Indexed {
    fn from(index: VideoIndex) -> Self {
        Self {
            timeline: Timeline::of(&index),
            order: index.presentation_order(),
            index,
        }
    }
}

/// A worker's reusable memory for videos.
#[derive(Default)]
pub(super) struct VideoScratch {
    /// The decoder and the `avcC` record it was started with: reused while videos share it.
    decoder: Option<(Vec<u8>, H264Decoder)>,
    /// Decoded frames (decode-order index -> RGB), and spare buffers.
    frames: HashMap<usize, Vec<u8>>,
    spare: Vec<Vec<u8>>,
    /// A frame's copy when the plan runs ops on the whole frame first.
    whole: Vec<u8>,
    /// One output frame, before its channel planes go to their places (channels first).
    planes: Vec<u8>,
    resampler: Option<Resampler>,
    ops: augment::Scratch,
}

/// Loads video `index` into `slot`: its clips, decoded and augmented on the host.
pub(super) fn load(
    shared: &Shared,
    video: &VideoShared,
    s: &mut VideoScratch,
    index: usize,
    epoch: u64,
    slot: &mut [u8],
) -> Result<Filled, SampleError> {
    let entry = &shared.source.entries()[video.video_of(index)];
    let err = |kind| SampleError {
        index,
        path: entry.path.clone(),
        kind,
    };
    fill(shared, video, s, index, epoch, slot).map_err(err)?;
    Ok(Filled::Cpu {
        index,
        label: entry.label,
        detect: None,
    })
}

fn fill(
    shared: &Shared,
    video: &VideoShared,
    s: &mut VideoScratch,
    index: usize,
    epoch: u64,
    slot: &mut [u8],
) -> Result<(), SampleErrorKind> {
    let c = &shared.counters;
    let t0 = CpuClock::now();
    let v = video.indexed(shared, video.video_of(index))?;
    let clips = match &video.windows {
        Some(w) => {
            let (at, clip) = w.locate(index);
            let (frames, fps) = w.videos[at];
            let frames = w.spec.clip(frames, fps, clip).ok_or_else(|| {
                SampleErrorKind::Video(VideoError::Clips(ClipError::Range(format!(
                    "clip {clip} is past the video's last"
                ))))
            })?;
            vec![frames]
        }
        None => video
            .spec
            .sampler
            .sample(&v.timeline, shared.seed, epoch, index as u64)
            .map_err(|e| SampleErrorKind::Video(VideoError::Clips(e)))?,
    };
    let wanted: Vec<usize> = clips.iter().flatten().map(|&p| v.order[p]).collect();
    let plan = DecodePlan::new(&v.index, &wanted);
    let file = File::open(&v.index.path).map_err(SampleErrorKind::Read)?;
    let t1 = CpuClock::now();
    c.add(Stage::Demux, t1 - t0);

    // The decoder (its configuration and buffers; OpenH264 itself starts afresh for each run)
    // is kept while videos share their parameter sets (one encoder's output).
    let decoder = match &mut s.decoder {
        Some((config, d)) if *config == v.index.config => d,
        slot_decoder => {
            let d = H264Decoder::new_typed(&v.index).map_err(SampleErrorKind::Video)?;
            &mut slot_decoder.insert((v.index.config.clone(), d)).1
        }
    };
    let (frames, spare) = (&mut s.frames, &mut s.spare);
    spare.extend(frames.drain().map(|(_, b)| b));
    let decoded = decoder.decode_typed(&file, &v.index, &plan, &mut |p| {
        let mut rgb = spare.pop().unwrap_or_default();
        colour::to_rgb(&p, &mut rgb);
        frames.insert(p.frame, rgb);
    });
    // After a failure the next decode starts a fresh OpenH264 anyway (see `H264Decoder`).
    let counts = decoded.map_err(|e| match e {
        VideoFailure::Io(e) => SampleErrorKind::Read(e),
        VideoFailure::Video(e) => SampleErrorKind::Video(e),
    })?;
    let relaxed = std::sync::atomic::Ordering::Relaxed;
    c.frames_decoded.fetch_add(counts.decoded as u64, relaxed);
    c.frames_discarded
        .fetch_add(counts.discarded as u64, relaxed);
    c.frames_skipped.fetch_add(counts.skipped as u64, relaxed);
    c.bytes_read.fetch_add(counts.bytes, relaxed);
    let t2 = CpuClock::now();
    c.add(Stage::DecodeVideo, t2 - t1);

    let (w, h) = v.index.size;
    let per_clip = video.spec.sampler.frames_per_clip();
    let frame_bytes = slot.len() / video.frames;
    for (k, clip) in clips.iter().enumerate() {
        // Clip k of sample `index` draws as sample `index + k * len`: its own plan, the same
        // for every frame of the clip.
        let key = index + k * video.samples();
        let drawn: SamplePlan = shared
            .plan
            .sample(shared.seed, epoch, key, (w, h), None)
            .map_err(SampleErrorKind::Augment)?;
        super::cpu::fits(shared, &drawn, (w, h))?;
        let (oh, ow) = drawn.pixels.size;
        let resampler = s.resampler.get_or_insert_with(|| Resampler::new(oh, ow));
        resampler.set_size(oh, ow);
        for (t, &position) in clip.iter().enumerate() {
            let rgb = s
                .frames
                .get(&v.order[position])
                .ok_or(SampleErrorKind::Video(VideoError::Missing {
                    wanted: wanted.len(),
                    got: s.frames.len(),
                }))?;
            let source: &[u8] = if drawn.pre.is_empty() {
                rgb
            } else {
                s.whole.clear();
                s.whole.extend_from_slice(rgb);
                augment::apply(&drawn.pre, &mut s.whole, h as usize, w as usize, &mut s.ops);
                &s.whole
            };
            let resized = resampler
                .run_with(source, w, h, &drawn.crop, drawn.interpolation)
                .map_err(SampleErrorKind::Augment)?;
            shared.stage.ops(resized, &drawn.pixels, &mut s.ops);
            if video.spec.channels_first {
                // Plane c of frame t of clip k: at ((k * C + c) * T + t) planes.
                s.planes.resize(frame_bytes, 0);
                shared.stage.write(resized, &drawn.pixels, &mut s.planes);
                let plane = frame_bytes / 3;
                for (c, bytes) in s.planes.chunks_exact(plane).enumerate() {
                    let at = ((k * 3 + c) * per_clip + t) * plane;
                    slot[at..at + plane].copy_from_slice(bytes);
                }
            } else {
                let at = (k * per_clip + t) * frame_bytes;
                shared
                    .stage
                    .write(resized, &drawn.pixels, &mut slot[at..at + frame_bytes]);
            }
        }
    }
    c.add(Stage::Augment, t2.elapsed());
    c.samples.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}
