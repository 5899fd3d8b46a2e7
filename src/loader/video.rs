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

use std::fs::File;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use super::replace::Filled;
use super::route::{upload, HwSlot, HwWork};
use super::Shared;
use crate::augment::SamplePlan;
use crate::cpu_time::CpuClock;
use crate::hpu::Hpu;
use crate::source::{Frames, SampleBytes};
use crate::stage::Stage;
use crate::video::{
    frame_error, index_threads, index_videos, Bitstream, ClipError, ClipSampler, ClipsError,
    ClipsJob, ClipsScratch, Codec, Container, DecodeCounts, DecodePlan, FramesJob, IndexCache,
    IndexStats, PackedIndex, Timeline, VideoAt, VideoError, VideoFailure, VideoIndex,
};
use crate::{ReadMode, SampleError, SampleErrorKind, Source};

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
    /// Each video's (frames, fps): of its segment, for a source that cuts its videos.
    videos: Vec<(usize, f64)>,
    /// Each video's first frame (presentation position) of its segment (0: the whole video).
    offsets: Vec<usize>,
    /// Each video's first sample after its clips (torchvision's `cumulative_sizes`).
    ends: Vec<usize>,
    /// The videos (dataset entries) whose frames the user's reader gives otherwise than they
    /// are shown: MPEG-4 B-frames in AVI, which torchcodec 0.17 misreads.
    misread: Vec<usize>,
    /// The videos left to the caller (`WindowClips::leave_unreadable`), ascending, each with
    /// why hpuload cannot read it as the user's metadata counts it.
    left: Vec<(usize, String)>,
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
    /// Indexes every video of the source that lies in a local file (a file, or a member of a
    /// local tar shard) now, on [`index_threads`], through the index file `cache` names; a
    /// video read whole from object storage is indexed when it is first read.
    ///
    /// # Errors
    /// With [`ClipSampler::Windows`]: a source whose videos are not in local files, or a video
    /// whose frame count differs from the one the user's metadata gives (named).
    pub(super) fn new(
        spec: VideoSpec,
        frames: usize,
        source: &dyn Source,
        cache: &IndexCache,
    ) -> Result<Self, crate::Error> {
        let entries = source.entries();
        let indexes: Vec<OnceLock<PackedIndex>> =
            (0..entries.len()).map(|_| OnceLock::new()).collect();
        // A sample whose place is unreadable (a shard's sample without its video) is named
        // when a worker reaches it.
        let (at, videos): (Vec<usize>, Vec<VideoAt>) = (0..entries.len())
            .filter_map(|k| {
                let span = source.span(k).ok().flatten()?;
                Some((
                    k,
                    VideoAt {
                        name: entries[k].path.clone(),
                        file: span.file,
                        offset: span.offset,
                        len: span.len,
                    },
                ))
            })
            .unzip();
        let mut stats = IndexStats::default();
        if !videos.is_empty() {
            let file = cache.file(source.origin());
            let built;
            (built, stats) = index_videos(&videos, file.as_deref(), index_threads());
            for (k, index) in at.into_iter().zip(built) {
                if let Some(index) = index {
                    let _ = indexes[k].set(index);
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

    /// With torchvision's clip metadata, the videos (dataset entries) that torchvision's
    /// reader, torchcodec, gives other frames of than hpuload: MPEG-4 with B-frames in AVI,
    /// whose clips torchcodec 0.17 gives a frame early where they start between keyframes,
    /// or damaged or not at all when the B-frames are packed. hpuload gives the frames as they
    /// are shown (as PyAV's FFmpeg decodes them in order).
    pub(super) fn misread(&self) -> &[usize] {
        self.windows.as_ref().map_or(&[], |w| &w.misread)
    }

    /// The videos left to the caller ([`crate::video::WindowClips::leave_unreadable`]), each
    /// with why hpuload cannot read it as the user's metadata counts it.
    pub(super) fn left(&self) -> &[(usize, String)] {
        self.windows.as_ref().map_or(&[], |w| &w.left)
    }

    /// Whether video `video`'s clips are left to the caller.
    fn is_left(&self, video: usize) -> bool {
        self.left()
            .binary_search_by_key(&video, |&(k, _)| k)
            .is_ok()
    }

    /// The frames' size `(width, height)` when every video has the same, for a pipeline that
    /// keeps it; otherwise the message that says which differ, or that a video's size is not
    /// known before it is read (one read whole from object storage).
    pub(super) fn common_size(&self) -> Result<(u32, u32), String> {
        let mut first: Option<((u32, u32), usize)> = None;
        for (k, slot) in self.indexes.iter().enumerate() {
            if self.is_left(k) {
                continue; // made by the caller, at the size the caller's reader gives
            }
            let Some(index) = slot.get() else {
                return Err(format!(
                    "a video pipeline without a crop or resize keeps each video's size, and \
                     video {k}'s is not known before it is read (or it cannot be read): add a \
                     crop or resize"
                ));
            };
            let size = index.unpack().display_size();
            match first {
                None => first = Some((size, k)),
                Some((seen, j)) if seen != size => {
                    return Err(format!(
                        "a video pipeline without a crop or resize keeps each video's size, and \
                         video {j} is {}x{}, video {k} {}x{}: add a crop or resize",
                        seen.0, seen.1, size.0, size.1
                    ))
                }
                Some(_) => {}
            }
        }
        first
            .map(|(size, _)| size)
            .ok_or_else(|| "the dataset has no videos".to_string())
    }

    /// The video (dataset entry) sample `sample` is from.
    pub(super) fn video_of(&self, sample: usize) -> usize {
        self.windows.as_ref().map_or(sample, |w| w.locate(sample).0)
    }

    /// Video `index`'s index, unpacked; built now from `bytes` (and kept, packed) if it was
    /// not indexed when the loader was built. A failure is not kept: the next use tries again
    /// (a read error may pass).
    fn indexed(
        &self,
        shared: &Shared,
        index: usize,
        bytes: Bitstream<'_>,
    ) -> Result<Indexed, SampleErrorKind> {
        if let Some(done) = self.indexes[index].get() {
            return Ok(Indexed::from(done.unpack()));
        }
        let name = shared.source.entries()[index].path.clone();
        let video = match bytes {
            Bitstream::File { file, offset, len } => VideoIndex::open_span(name, file, offset, len),
            Bitstream::Whole(bytes) | Bitstream::Spans(bytes) => {
                VideoIndex::from_bytes(name, bytes)
            }
        }
        .map_err(failure)?;
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
    let entries = source.entries();
    if (0..entries.len()).any(|k| !matches!(source.span(k), Ok(Some(_)))) {
        return Err(crate::Error::config(
            what,
            "torchvision's VideoClips count every video's clips up front, which needs the videos \
             as files on local storage",
        ));
    }
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
    let mut offsets = vec![0; entries.len()];
    let mut misread = Vec::new();
    let mut left = Vec::new();
    for (k, slot) in indexes.iter().enumerate() {
        let path = entries[k].path.display();
        match window_counts(spec, source, k, slot, &mut offsets[k], &mut misread) {
            Ok(video) => videos.push(video),
            // The user's metadata counts its frames: the caller makes its clips.
            Err(Refusal::Unreadable(why)) if spec.leave_unreadable && spec.metadata.is_some() => {
                let given = spec.metadata.as_ref().map(|m| m[k]);
                videos.push(given.expect("the metadata is given"));
                if misread.last() == Some(&k) {
                    misread.pop(); // hpuload gives none of its frames
                }
                left.push((k, why));
            }
            Err(Refusal::Unreadable(why) | Refusal::Config(why)) => {
                return Err(crate::Error::config(what, format!("{path}: {why}")));
            }
        }
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
        offsets,
        ends,
        misread,
        left,
    })
}

/// Why a video's windows cannot be laid out.
enum Refusal {
    /// The settings contradict each other.
    Config(String),
    /// hpuload cannot read the video as the user's metadata counts it.
    Unreadable(String),
}

/// Video `k`'s (frames, fps) for its windows: the user's metadata, checked against the
/// video's index (`slot`), or the index's own; its segment's first frame put in `offset`, and
/// `k` in `misread` when torchcodec misreads it.
fn window_counts(
    spec: &crate::video::WindowClips,
    source: &dyn Source,
    k: usize,
    slot: &OnceLock<PackedIndex>,
    offset: &mut usize,
    misread: &mut Vec<usize>,
) -> Result<(usize, f64), Refusal> {
    let indexed = slot.get().map(|p| Indexed::from(p.unpack()));
    let given = spec.metadata.as_ref().map(|m| m[k]);
    let mut counted = indexed.as_ref().map(|v| v.timeline.len());
    // A manifest row's segment: its windows are laid over the segment's frames only (at the
    // whole video's rate).
    if let (Some((start, end)), Some(v)) = (source.segment(k), indexed.as_ref()) {
        if given.is_some() {
            return Err(Refusal::Config(
                "clip metadata and a segment of the video, both given".into(),
            ));
        }
        let (cut, first) = v.timeline.segment(start, end);
        *offset = first;
        counted = Some(cut.len());
    }
    // A video the user's reader found nothing in gives no clip, whatever hpuload reads.
    if let Some((0, fps)) = given {
        return Ok((0, fps));
    }
    // torchvision's reader decoded it: a codec this process cannot decode is not skipped.
    if let Some(v) = indexed.as_ref() {
        if crate::video::libavcodec().is_none() {
            if let Some(why) = crate::video::openh264_cannot(&v.index) {
                return Err(Refusal::Unreadable(why));
            }
        }
        // torchcodec misreads an AVI file with B-frames (its clips come a frame early, from a
        // packed bitstream damaged or not at all): hpuload gives the frames as shown, and
        // names the videos so that the user is told. (An MP4 file's times are its own
        // tables', which torchcodec reads as they are.)
        let reordered = v.index.container == Container::Avi
            && v.index.codec == Codec::Mpeg4
            && v.index.frames.iter().any(|f| f.pts != f.dts);
        if given.is_some() && reordered {
            misread.push(k);
        }
    }
    match (given, counted) {
        (Some((n, fps)), Some(ours)) if n == ours => Ok((n, fps)),
        (Some((n, _)), Some(ours)) => Err(Refusal::Unreadable(format!(
            "the dataset's metadata counts {n} frames, the file's tables {ours}"
        ))),
        (Some(_), None) => {
            // Indexed again for its reason (only on this path, once).
            let why = match source.span(k) {
                Ok(Some(span)) => VideoAt {
                    name: source.entries()[k].path.clone(),
                    file: span.file,
                    offset: span.offset,
                    len: span.len,
                }
                .index()
                .err()
                .map_or_else(|| "it could not be read".to_string(), |e| e.to_string()),
                _ => "it could not be read".to_string(),
            };
            Err(Refusal::Unreadable(format!(
                "hpuload cannot read this video: {why}"
            )))
        }
        (None, Some(n)) => Ok((
            n,
            indexed
                .as_ref()
                .and_then(|v| v.timeline.average_fps())
                .unwrap_or(1.0),
        )),
        (None, None) => Ok((0, 1.0)),
    }
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

/// Loads sample `index` into `slot`: its clips drawn here, then decoded and augmented on the
/// host, or, with `engine`, the runs' compressed bytes put in the slot (or a device buffer of
/// their own) for the media engine to decode, resize and crop on the device. A video in a
/// local file is read where the plan needs it; one on object storage is read whole into
/// `held` first.
#[allow(clippy::too_many_arguments)]
pub(super) fn load(
    shared: &Shared,
    video: &VideoShared,
    s: &mut ClipsScratch,
    held: &mut Vec<u8>,
    index: usize,
    epoch: u64,
    slot: &mut [u8],
    engine: Option<&Hpu>,
) -> Result<Filled, SampleError> {
    let at = video.video_of(index);
    let entry = &shared.source.entries()[at];
    let err = |kind| SampleError {
        index,
        path: entry.path.clone(),
        kind,
    };
    // A video left to the caller: its slot is the caller's to fill.
    if video.is_left(at) {
        slot.fill(0);
        return Ok(Filled::Cpu {
            index,
            label: entry.label,
            detect: None,
        });
    }
    let c = &shared.counters;
    let t0 = CpuClock::now();
    if let Some(frames) = shared.source.frames(at) {
        return load_frames(shared, video, s, held, (index, epoch), frames, slot, engine)
            .map_err(err);
    }
    let span = shared
        .source
        .span(at)
        .map_err(|e| err(SampleErrorKind::Read(e)))?;
    let file;
    let bytes = match span {
        Some(span) => {
            file = File::open(&span.file).map_err(|e| err(SampleErrorKind::Read(e)))?;
            let len = match span.len {
                Some(len) => len,
                None => file
                    .metadata()
                    .map_err(|e| err(SampleErrorKind::Read(e)))?
                    .len()
                    .saturating_sub(span.offset),
            };
            Bitstream::File {
                file: &file,
                offset: span.offset,
                len,
            }
        }
        None => {
            let read = shared
                .source
                .read(at, ReadMode::Read, held)
                .map_err(|e| err(SampleErrorKind::Read(e)))?;
            if let SampleBytes::Mapped(map) = read {
                held.clear();
                held.extend_from_slice(&map);
            }
            Bitstream::Whole(held)
        }
    };
    let job = video.job(shared, index, epoch, bytes).map_err(err)?;
    // Gaudi's video decoder takes H.264: any other codec decodes on the host.
    let engine = match engine {
        Some(_) if job.index.codec != Codec::H264 => {
            const REASON: &str = "video: not H.264 (the media engine decodes H.264 only)";
            if shared.backend == super::Backend::Hw {
                return Err(err(SampleErrorKind::Augment(
                    crate::augment::AugmentError::NotOnEngine(REASON),
                )));
            }
            super::route::count_fallback(shared, REASON);
            None
        }
        engine => engine,
    };
    if let Some(hpu) = engine {
        let routed = to_engine(shared, hpu, job, bytes, index, slot).map_err(err)?;
        c.add(Stage::Demux, t0.elapsed());
        return Ok(routed);
    }
    let t1 = CpuClock::now();
    c.add(Stage::Demux, t1 - t0);
    let rendered = job
        .render(bytes, &shared.stage, s, slot)
        .map_err(|e| err(clips_error(e)))?;
    count(shared, &rendered.counts, false);
    c.add(
        Stage::DecodeVideo,
        t1.elapsed().saturating_sub(rendered.write),
    );
    c.add(Stage::Augment, rendered.write);
    c.samples.fetch_add(1, Ordering::Relaxed);
    Ok(Filled::Cpu {
        index,
        label: entry.label,
        detect: None,
    })
}

/// Loads sample `index` of a folder of frames: its clips drawn over the frames at the folder's
/// rate, the kept frames' files read one after the other into `held`, then decoded and written
/// on the host, or for the media engine put in the slot (or a device buffer of their own) with
/// the drawn job, for the engine's JPEG decoder.
#[allow(clippy::too_many_arguments)]
fn load_frames(
    shared: &Shared,
    video: &VideoShared,
    s: &mut ClipsScratch,
    held: &mut Vec<u8>,
    (index, epoch): (usize, u64),
    frames: Frames<'_>,
    slot: &mut [u8],
    engine: Option<&Hpu>,
) -> Result<Filled, SampleErrorKind> {
    let c = &shared.counters;
    let t0 = CpuClock::now();
    let job = video.frames_job(shared, s, (index, epoch), frames, held)?;
    let kept = job.clips.iter().map(Vec::len).sum::<usize>() as u64;
    c.frames_decoded.fetch_add(kept, Ordering::Relaxed);
    c.bytes_read
        .fetch_add(job.bitstream_len() as u64, Ordering::Relaxed);
    let t1 = CpuClock::now();
    c.add(Stage::Read, t1 - t0);
    if let Some(hpu) = engine {
        match job.on_engine() {
            Ok(()) => {
                let len = job.bitstream_len();
                let own = if len <= slot.len() {
                    slot[..len].copy_from_slice(&held[..len]);
                    None
                } else {
                    Some(upload(hpu, &held[..len]).map_err(SampleErrorKind::Device)?)
                };
                c.hw_samples.fetch_add(1, Ordering::Relaxed);
                c.samples.fetch_add(1, Ordering::Relaxed);
                c.add(Stage::Route, t1.elapsed());
                return Ok(Filled::Hw(HwSlot {
                    slot: 0,
                    index,
                    len,
                    own,
                    work: HwWork::Frames(std::sync::Arc::new(job)),
                }));
            }
            Err(reason) if shared.backend == super::Backend::Hw => {
                return Err(SampleErrorKind::Augment(
                    crate::augment::AugmentError::NotOnEngine(reason),
                ));
            }
            Err(reason) => super::route::count_fallback(shared, reason),
        }
    }
    job.write_host(held, &shared.stage, shared.limits, s.frames(), slot)
        .map_err(clips_error)?;
    c.add(Stage::DecodeCpu, t1.elapsed());
    c.samples.fetch_add(1, Ordering::Relaxed);
    Ok(Filled::Cpu {
        index,
        label: shared.source.entries()[video.video_of(index)].label,
        detect: None,
    })
}

/// The sample for the media engine: the runs' bytes read into the start of its slot (or, when
/// larger, a device buffer of their own), the drawn job riding with it.
fn to_engine(
    shared: &Shared,
    hpu: &Hpu,
    job: ClipsJob,
    bytes: Bitstream<'_>,
    index: usize,
    slot: &mut [u8],
) -> Result<Filled, SampleErrorKind> {
    let len = job.spans_len();
    let own = if len <= slot.len() {
        job.read_spans(bytes, &mut slot[..len])
            .map_err(SampleErrorKind::Read)?;
        None
    } else {
        let mut spans = vec![0; len];
        job.read_spans(bytes, &mut spans)
            .map_err(SampleErrorKind::Read)?;
        Some(upload(hpu, &spans).map_err(SampleErrorKind::Device)?)
    };
    let c = &shared.counters;
    c.bytes_read.fetch_add(len as u64, Ordering::Relaxed);
    c.hw_samples.fetch_add(1, Ordering::Relaxed);
    c.samples.fetch_add(1, Ordering::Relaxed);
    Ok(Filled::Hw(HwSlot {
        slot: 0,
        index,
        len,
        own,
        work: HwWork::Video(std::sync::Arc::new(job)),
    }))
}

/// Counts a video sample's frames: decoded, decoded only to reach a kept one (and their
/// decoding's CPU time, on the media engine or the host), not decoded.
pub(super) fn count(shared: &Shared, counts: &DecodeCounts, on_engine: bool) {
    let c = &shared.counters;
    c.frames_decoded
        .fetch_add(counts.decoded as u64, Ordering::Relaxed);
    c.frames_discarded
        .fetch_add(counts.discarded as u64, Ordering::Relaxed);
    c.frames_discarded_ns[usize::from(on_engine)].fetch_add(
        u64::try_from(counts.discarded_time.as_nanos()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
    c.frames_skipped
        .fetch_add(counts.skipped as u64, Ordering::Relaxed);
    c.bytes_read.fetch_add(counts.bytes, Ordering::Relaxed);
}

fn failure(e: VideoFailure) -> SampleErrorKind {
    match e {
        VideoFailure::Io(e) => SampleErrorKind::Read(e),
        VideoFailure::Video(e) => SampleErrorKind::Video(e),
    }
}

fn clips_error(e: ClipsError) -> SampleErrorKind {
    match e {
        ClipsError::Video(e) => failure(e),
        ClipsError::Augment(e) => SampleErrorKind::Augment(e),
    }
}

impl VideoShared {
    /// Sample `index` of a folder of frames, drawn for `epoch`: its clips over the frames at
    /// the folder's rate, each kept frame's file read once into `held` (one after the other),
    /// each clip's plan drawn from the first kept frame's size.
    fn frames_job(
        &self,
        shared: &Shared,
        s: &mut ClipsScratch,
        (index, epoch): (usize, u64),
        frames: Frames<'_>,
        held: &mut Vec<u8>,
    ) -> Result<FramesJob, SampleErrorKind> {
        let timeline = Timeline::uniform(frames.len(), frames.fps);
        let clips = self
            .spec
            .sampler
            .sample(&timeline, shared.seed, epoch, index as u64)
            .map_err(|e| SampleErrorKind::Video(VideoError::Clips(e)))?;
        // Each distinct frame once, in presentation order.
        let mut kept: Vec<usize> = clips.iter().flatten().copied().collect();
        kept.sort_unstable();
        kept.dedup();
        held.clear();
        let mut files = Vec::with_capacity(kept.len());
        for &k in &kept {
            let path = frames.path(k);
            let start = held.len();
            let named = |e: std::io::Error| {
                std::io::Error::new(e.kind(), format!("frame {}: {e}", path.display()))
            };
            std::fs::File::open(&path)
                .and_then(|mut f| std::io::Read::read_to_end(&mut f, held))
                .map_err(|e| SampleErrorKind::Read(named(e)))?;
            files.push((path, start..held.len()));
        }
        let clips: Vec<Vec<usize>> = clips
            .iter()
            .map(|clip| {
                clip.iter()
                    .map(|p| kept.binary_search(p).expect("every kept frame is listed"))
                    .collect()
            })
            .collect();
        let (first, range) = files.first().ok_or_else(|| {
            SampleErrorKind::Video(VideoError::Clips(ClipError::Range("no frame".into())))
        })?;
        let size = s
            .frames()
            .probe(&held[range.clone()], shared.limits)
            .map_err(|e| clips_error(frame_error(first, e.to_string())))?;
        let drawn = self.draw(shared, (index, epoch), clips.len(), size)?;
        Ok(FramesJob {
            files,
            clips,
            drawn,
            size,
            frames: self.frames,
            channels_first: self.spec.channels_first,
        })
    }

    /// The plans of sample `index`'s `clips` clips of a `size` video (clip `k` draws as sample
    /// `index + k * samples`), each checked to fit the slot.
    fn draw(
        &self,
        shared: &Shared,
        (index, epoch): (usize, u64),
        clips: usize,
        size: (u32, u32),
    ) -> Result<Vec<SamplePlan>, SampleErrorKind> {
        (0..clips)
            .map(|k| {
                let drawn = shared
                    .plan
                    .sample(shared.seed, epoch, index + k * self.samples(), size, None)
                    .map_err(SampleErrorKind::Augment)?;
                super::cpu::fits(shared, &drawn, size)?;
                Ok(drawn)
            })
            .collect()
    }

    /// Sample `index`'s clips for `epoch`, drawn: the video's frames each clip keeps, the runs
    /// that decode them, and each clip's plan drawn from the video's size (clip `k` draws as
    /// sample `index + k * samples`).
    fn job(
        &self,
        shared: &Shared,
        index: usize,
        epoch: u64,
        bytes: Bitstream<'_>,
    ) -> Result<ClipsJob, SampleErrorKind> {
        let v = self.indexed(shared, self.video_of(index), bytes)?;
        let clips = match &self.windows {
            Some(w) => {
                let (at, clip) = w.locate(index);
                let (frames, fps) = w.videos[at];
                let mut frames = w.spec.clip(frames, fps, clip).ok_or_else(|| {
                    SampleErrorKind::Video(VideoError::Clips(ClipError::Range(format!(
                        "clip {clip} is past the video's last"
                    ))))
                })?;
                frames.iter_mut().for_each(|p| *p += w.offsets[at]);
                vec![frames]
            }
            None => {
                // A segment of the video (a manifest row's times): the samplers see its frames
                // only, and their positions are offset back into the video's.
                let cut;
                let (timeline, offset) = match shared.source.segment(self.video_of(index)) {
                    Some((start, end)) => {
                        cut = v.timeline.segment(start, end);
                        (&cut.0, cut.1)
                    }
                    None => (&v.timeline, 0),
                };
                let mut clips = self
                    .spec
                    .sampler
                    .sample(timeline, shared.seed, epoch, index as u64)
                    .map_err(|e| SampleErrorKind::Video(VideoError::Clips(e)))?;
                clips.iter_mut().flatten().for_each(|p| *p += offset);
                clips
            }
        };
        // Presentation positions to decode-order frames.
        let clips: Vec<Vec<usize>> = clips
            .iter()
            .map(|clip| clip.iter().map(|&p| v.order[p]).collect())
            .collect();
        let wanted: Vec<usize> = clips.iter().flatten().copied().collect();
        let plan = DecodePlan::new(&v.index, &wanted);
        let drawn = self.draw(shared, (index, epoch), clips.len(), v.index.display_size())?;
        Ok(ClipsJob {
            index: v.index,
            plan,
            clips,
            drawn,
            frames: self.frames,
            channels_first: self.spec.channels_first,
        })
    }
}
