//! Clip sampling: which frames of a video make each clip, with the semantics of the samplers
//! users already know.
//!
//! - torchcodec's four samplers ([`ClipSampler`]): clips starting at random or regularly
//!   spaced frame indices, or at random or regularly spaced timestamps; frames within a clip
//!   `between` indices or `seconds_between_frames` apart; a sampling range for clip starts; a
//!   [`Policy`] for clips that run past the end. The same validation and the same integer and
//!   floating-point steps as torchcodec 0.17 (`torchcodec/samplers`), so the same parameters
//!   give the same frames; the random draws come from hpuload's counter generator, keyed by
//!   `(seed, epoch, index)` like every other draw, so they are reproducible and resume exactly.
//! - torchvision's `VideoClips` ([`video_clips`]): every window of `frames_per_clip` frames,
//!   `step` apart, after resampling to `frame_rate`; its `RandomClipSampler` and
//!   `UniformClipSampler` pick among them.
//!
//! Frames are named by their position in presentation order (what torchcodec calls a frame's
//! index); [`Timeline`] holds what the samplers read from a [`VideoIndex`].

use super::VideoIndex;
use crate::rng::{CounterRng, Stream};

/// What to do with a clip's frames that would lie past the end of the video.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// Repeat the clip's last frame (torchcodec's default).
    #[default]
    RepeatLast,
    /// Start again from the clip's first frame.
    Wrap,
    /// Refuse the clip.
    Error,
}

/// A clip sampler, torchcodec's parameters and defaults.
#[derive(Clone, Debug, PartialEq)]
pub enum ClipSampler {
    /// `clips_at_random_indices`: clip starts drawn uniformly from the index range.
    RandomIndices(IndexClips),
    /// `clips_at_regular_indices`: clip starts equally spaced over the index range.
    RegularIndices(IndexClips),
    /// `clips_at_random_timestamps`: clip starts drawn uniformly from the time range.
    RandomTimestamps(TimeClips),
    /// `clips_at_regular_timestamps`: a clip every `seconds_between_clip_starts` (the count
    /// then depends on the video's length).
    RegularTimestamps {
        /// Seconds from one clip's start to the next.
        seconds_between_clip_starts: f64,
        /// The rest, `num_clips` unused.
        clips: TimeClips,
    },
    /// torchvision's `VideoClips`: every window of a video's frames is a clip of its own, and
    /// each sample of the loader is one clip (what a torchvision video dataset indexes, and its
    /// `RandomClipSampler` / `UniformClipSampler` pick from).
    Windows(WindowClips),
}

/// The parameters of torchvision's `VideoClips` ([`video_clips`]).
#[derive(Clone, Debug, PartialEq)]
pub struct WindowClips {
    /// Frames per clip (`clip_length_in_frames`).
    pub frames_per_clip: usize,
    /// Windows from one clip's start to the next (`frames_between_clips`).
    pub step: usize,
    /// The rate videos are resampled to first (`None`: not resampled).
    pub frame_rate: Option<f64>,
    /// Each video's frame count and frame rate as the user's dataset has them (torchvision's
    /// `len(video_pts[i])` and `video_fps[i]`), so that the clips are the dataset's own; a
    /// count that differs from the video's index is refused when the loader is built. `None`:
    /// both from hpuload's index (the frame count, and the average frame rate).
    pub metadata: Option<Vec<(usize, f64)>>,
    /// With `metadata`: a video the metadata counts frames in that hpuload cannot read as
    /// counted (its index fails, its tables count other frames, or its codec needs a
    /// libavcodec this process lacks) is left to the caller instead of refusing the loader:
    /// its clips' slots are left zero and [`crate::Loader::left_videos`] names each such video
    /// with the reason. (The Python package's drop-in has the user's own dataset make those
    /// clips.)
    pub leave_unreadable: bool,
}

impl WindowClips {
    /// The frame positions of clip `clip` of a video of `frames` frames at `fps`; `None` past
    /// its last clip.
    pub fn clip(&self, frames: usize, fps: f64, clip: usize) -> Option<Vec<usize>> {
        let resampled = resampled_positions(frames, fps, self.frame_rate);
        let start = clip.checked_mul(self.step)?;
        (clip < window_count(resampled.len(), self.frames_per_clip, self.step))
            .then(|| resampled[start..start + self.frames_per_clip].to_vec())
    }

    /// How many clips a video of `frames` frames at `fps` gives.
    pub fn count(&self, frames: usize, fps: f64) -> usize {
        let len = resampled_positions(frames, fps, self.frame_rate).len();
        window_count(len, self.frames_per_clip, self.step)
    }
}

/// The parameters of the index-based samplers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexClips {
    /// Clips per video.
    pub num_clips: usize,
    /// Frames per clip.
    pub frames_per_clip: usize,
    /// Indices from one frame of a clip to the next (1: consecutive frames).
    pub between: usize,
    /// The first index a clip may start at (negative: from the end).
    pub range_start: i64,
    /// One past the last index a clip may start at (negative: from the end); `None`: the last
    /// start whose clip fits in the video.
    pub range_end: Option<i64>,
    /// Frames past the end.
    pub policy: Policy,
}

impl Default for IndexClips {
    fn default() -> Self {
        Self {
            num_clips: 1,
            frames_per_clip: 1,
            between: 1,
            range_start: 0,
            range_end: None,
            policy: Policy::RepeatLast,
        }
    }
}

/// The parameters of the time-based samplers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TimeClips {
    /// Clips per video (random timestamps only).
    pub num_clips: usize,
    /// Frames per clip.
    pub frames_per_clip: usize,
    /// Seconds from one frame of a clip to the next; `None`: one average frame duration.
    pub seconds_between_frames: Option<f64>,
    /// The earliest time a clip may start; `None`: the stream's start.
    pub range_start: Option<f64>,
    /// The time clip starts stay before; `None`: the last start whose clip fits.
    pub range_end: Option<f64>,
    /// Frames past the end.
    pub policy: Policy,
}

/// Why a video gives no clips for a sampler.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClipError {
    /// The video has no frames.
    #[error("the video has no frames")]
    Empty,
    /// A parameter out of its range.
    #[error("{0}")]
    Parameter(String),
    /// The video is too short for one clip in the sampling range.
    #[error("{0}")]
    Range(String),
    /// A clip runs past the end and the policy is `Error`.
    #[error("a clip runs past the video's end and the policy is `error`")]
    PastTheEnd,
}

/// What the samplers read of a video: its frames' presentation times in seconds, in
/// presentation order, and the stream's span as torchcodec's exact scan computes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    /// Each frame's presentation time, ascending.
    pub pts: Vec<f64>,
    /// The first frame's time.
    pub begin: f64,
    /// The largest presentation time plus that frame's duration.
    pub end: f64,
}

impl Timeline {
    /// The timeline of an indexed video.
    pub fn of(index: &VideoIndex) -> Self {
        let scale = index.timescale.max(1) as f64;
        let order = index.presentation_order();
        let pts: Vec<f64> = order
            .iter()
            .map(|&i| index.frames[i].pts as f64 / scale)
            .collect();
        let begin = pts.first().copied().unwrap_or(0.0);
        let end = index
            .frames
            .iter()
            .filter(|f| f.shown)
            .map(|f| (f.pts + i64::from(f.duration)) as f64 / scale)
            .fold(begin, f64::max);
        Self { pts, begin, end }
    }

    /// `frames` frames at `fps` frames per second from time 0 (a folder of frames): frame `k`
    /// at `k / fps`, each lasting `1 / fps`.
    pub fn uniform(frames: usize, fps: f64) -> Self {
        let pts: Vec<f64> = (0..frames).map(|k| k as f64 / fps).collect();
        Self {
            pts,
            begin: 0.0,
            end: frames as f64 / fps,
        }
    }

    /// The frames presented in `[start, end)` seconds as a timeline of their own (the
    /// video cut to a segment: a Kinetics row's times), and the position of its first frame
    /// in this one.
    pub fn segment(&self, start: f64, end: f64) -> (Timeline, usize) {
        let first = self.pts.partition_point(|&p| p < start);
        let last = self.pts.partition_point(|&p| p < end).max(first);
        let pts = self.pts[first..last].to_vec();
        let begin = pts.first().copied().unwrap_or(start.max(self.begin));
        let cut = Timeline {
            pts,
            begin,
            end: end.min(self.end).max(begin),
        };
        (cut, first)
    }

    /// Frames in the video.
    pub fn len(&self) -> usize {
        self.pts.len()
    }

    /// Whether the video has no frames.
    pub fn is_empty(&self) -> bool {
        self.pts.is_empty()
    }

    /// Frames per second over the stream's span (torchcodec's `average_fps`), if it has one.
    pub fn average_fps(&self) -> Option<f64> {
        let span = self.end - self.begin;
        (span != 0.0 && !self.is_empty()).then(|| self.len() as f64 / span)
    }

    /// The frame shown at `seconds`: the first whose successor starts after it (the last
    /// frame is shown to the end).
    pub fn played_at(&self, seconds: f64) -> usize {
        let after = self.pts.partition_point(|&p| p <= seconds);
        after.saturating_sub(1).min(self.len().saturating_sub(1))
    }
}

impl ClipSampler {
    /// The clips of the video at dataset position `index`, for `(seed, epoch)`: each a list of
    /// `frames_per_clip` frame positions (presentation order).
    ///
    /// # Errors
    /// A [`ClipError`] naming what does not fit, with torchcodec's conditions.
    pub fn sample(
        &self,
        video: &Timeline,
        seed: u64,
        epoch: u64,
        index: u64,
    ) -> Result<Vec<Vec<usize>>, ClipError> {
        let mut rng = CounterRng::new(seed, epoch, index, Stream::Clips);
        match self {
            Self::RandomIndices(p) => index_clips(p, video.len(), Some(&mut rng)),
            Self::RegularIndices(p) => index_clips(p, video.len(), None),
            Self::RandomTimestamps(p) => time_clips(p, video, Starts::Random(&mut rng)),
            Self::RegularTimestamps {
                seconds_between_clip_starts,
                clips,
            } => time_clips(clips, video, Starts::Every(*seconds_between_clip_starts)),
            Self::Windows(_) => Err(ClipError::Parameter(
                "torchvision's VideoClips windows are samples of their own, not drawn per video"
                    .into(),
            )),
        }
    }

    /// Frames in each clip.
    pub fn frames_per_clip(&self) -> usize {
        match self {
            Self::RandomIndices(p) | Self::RegularIndices(p) => p.frames_per_clip,
            Self::RandomTimestamps(p) | Self::RegularTimestamps { clips: p, .. } => {
                p.frames_per_clip
            }
            Self::Windows(p) => p.frames_per_clip,
        }
    }
}

fn common(frames: usize, frames_per_clip: usize) -> Result<(), ClipError> {
    if frames == 0 {
        return Err(ClipError::Empty);
    }
    if frames_per_clip == 0 {
        return Err(ClipError::Parameter(
            "num_frames_per_clip (0) must be strictly positive".into(),
        ));
    }
    Ok(())
}

/// Fills a clip cut short by the end of the video to `len` frames.
fn apply_policy<T: Copy>(
    mut values: Vec<T>,
    len: usize,
    policy: Policy,
) -> Result<Vec<T>, ClipError> {
    if values.len() >= len {
        return Ok(values);
    }
    match policy {
        Policy::Error => Err(ClipError::PastTheEnd),
        // Never empty: a clip's first frame always lies in the video.
        Policy::RepeatLast => {
            let last = *values.last().ok_or(ClipError::PastTheEnd)?;
            values.resize(len, last);
            Ok(values)
        }
        Policy::Wrap => {
            let have = values.len();
            if have == 0 {
                return Err(ClipError::PastTheEnd);
            }
            Ok((0..len).map(|i| values[i % have]).collect())
        }
    }
}

/// torch's `linspace(start, end, steps)` cast to integers: computed in f64 from both ends, as
/// its CPU kernel does, then truncated.
fn linspace_int(start: i64, end: i64, steps: usize) -> Vec<i64> {
    if steps == 1 {
        return vec![start];
    }
    let step = (end - start) as f64 / (steps - 1) as f64;
    let half = steps / 2;
    (0..steps)
        .map(|i| {
            let v = if i < half {
                start as f64 + step * i as f64
            } else {
                end as f64 - step * (steps - 1 - i) as f64
            };
            v as i64
        })
        .collect()
}

fn index_clips(
    p: &IndexClips,
    frames: usize,
    rng: Option<&mut CounterRng>,
) -> Result<Vec<Vec<usize>>, ClipError> {
    common(frames, p.frames_per_clip)?;
    if p.num_clips == 0 {
        return Err(ClipError::Parameter("num_clips (0) must be > 0".into()));
    }
    if p.between == 0 {
        return Err(ClipError::Parameter(
            "num_indices_between_frames (0) must be strictly positive".into(),
        ));
    }
    let n = frames as i64;
    let start = if p.range_start < 0 {
        n + p.range_start
    } else {
        p.range_start
    };
    if start >= n || start < 0 {
        return Err(ClipError::Range(format!(
            "sampling_range_start ({start}) must be smaller than the number of frames ({n})"
        )));
    }
    let span = (p.between * (p.frames_per_clip - 1) + 1) as i64;
    let end = match p.range_end {
        None => {
            let end = (n - span + 1).max(1);
            if start >= end {
                return Err(ClipError::Range(format!(
                    "the video's {n} frames hold no clip of {span} frames starting at \
                     {start} or later"
                )));
            }
            end
        }
        Some(e) => {
            let end = if e < 0 { n + e } else { e }.min(n);
            if start >= end {
                return Err(ClipError::Range(format!(
                    "sampling_range_start ({start}) must be smaller than sampling_range_end \
                     ({end})"
                )));
            }
            end
        }
    };
    let starts: Vec<i64> = match rng {
        Some(rng) => (0..p.num_clips)
            .map(|_| start + rng.below((end - start) as u64) as i64)
            .collect(),
        None => linspace_int(start, end - 1, p.num_clips),
    };
    starts
        .into_iter()
        .map(|s| {
            let upper = (s + span).min(n);
            let clip: Vec<usize> = (s..upper).step_by(p.between).map(|i| i as usize).collect();
            apply_policy(clip, p.frames_per_clip, p.policy)
        })
        .collect()
}

enum Starts<'a> {
    Random(&'a mut CounterRng),
    Every(f64),
}

fn time_clips(
    p: &TimeClips,
    video: &Timeline,
    starts: Starts<'_>,
) -> Result<Vec<Vec<usize>>, ClipError> {
    Ok(clip_times(p, video, starts)?
        .into_iter()
        .map(|times| times.into_iter().map(|t| video.played_at(t)).collect())
        .collect())
}

/// The time-based samplers' clips, as the times each frame is shown at.
fn clip_times(
    p: &TimeClips,
    video: &Timeline,
    starts: Starts<'_>,
) -> Result<Vec<Vec<f64>>, ClipError> {
    common(video.len(), p.frames_per_clip)?;
    let fps = video.average_fps().ok_or_else(|| {
        ClipError::Parameter(
            "the video has no average frame rate (zero duration): use an index-based sampler"
                .into(),
        )
    })?;
    let between = match p.seconds_between_frames {
        None => 1.0 / fps,
        Some(s) if s > 0.0 => s,
        Some(s) => {
            return Err(ClipError::Parameter(format!(
                "seconds_between_frames ({s}) must be > 0"
            )))
        }
    };
    let (begin, end_stream) = (video.begin, video.end);
    let start = match p.range_start {
        None => begin,
        Some(s) if s < begin => {
            return Err(ClipError::Range(format!(
                "sampling_range_start ({s}) must be at least {begin}"
            )))
        }
        Some(s) if s >= end_stream => {
            return Err(ClipError::Range(format!(
                "sampling_range_start ({s}) must be smaller than {end_stream}"
            )))
        }
        Some(s) => s,
    };
    let end = match p.range_end {
        None => end_stream - (p.frames_per_clip - 1) as f64 * between,
        Some(e) if e <= begin => {
            return Err(ClipError::Range(format!(
                "sampling_range_end ({e}) must be at least {begin}"
            )))
        }
        Some(e) => e,
    };
    if start >= end {
        return Err(ClipError::Range(format!(
            "sampling_range_start ({start}) must be smaller than sampling_range_end ({end})"
        )));
    }
    let end = end.min(end_stream);
    let clip_starts: Vec<f64> = match starts {
        Starts::Random(rng) => {
            if p.num_clips == 0 {
                return Err(ClipError::Parameter("num_clips (0) must be > 0".into()));
            }
            (0..p.num_clips)
                .map(|_| rng.uniform() * (end - start) + start)
                .collect()
        }
        Starts::Every(every) => {
            if every.is_nan() || every <= 0.0 {
                return Err(ClipError::Parameter(format!(
                    "seconds_between_clip_starts ({every}) must be > 0"
                )));
            }
            // torch.arange in f64: ceil((end - start) / step) values `start + i * step`, any
            // that reach `end` by rounding dropped.
            let count = ((end - start) / every).ceil().max(0.0) as usize;
            (0..count)
                .map(|i| start + i as f64 * every)
                .filter(|&t| t < end)
                .collect()
        }
    };
    clip_starts
        .into_iter()
        .map(|s| {
            let times: Vec<f64> = (0..p.frames_per_clip)
                .map(|i| s + i as f64 * between)
                .filter(|&t| t < end_stream)
                .collect();
            apply_policy(times, p.frames_per_clip, p.policy)
        })
        .collect()
}

/// torchvision's `VideoClips.compute_clips_for_video`: every window of `frames_per_clip`
/// frame positions, `step` apart, of a video of `frames` frames at `fps` resampled to
/// `frame_rate` (`None`: not resampled). Empty when the video is too short for one window.
pub fn video_clips(
    frames: usize,
    fps: f64,
    frames_per_clip: usize,
    step: usize,
    frame_rate: Option<f64>,
) -> Vec<Vec<usize>> {
    let resampled = resampled_positions(frames, fps, frame_rate);
    (0..window_count(resampled.len(), frames_per_clip, step))
        .map(|w| resampled[w * step..w * step + frames_per_clip].to_vec())
        .collect()
}

/// The frame positions of a video of `frames` frames at `fps` after torchvision resamples it to
/// `frame_rate` (`VideoClips._resample_video_idx`).
fn resampled_positions(frames: usize, fps: f64, frame_rate: Option<f64>) -> Vec<usize> {
    let frame_rate = frame_rate.unwrap_or(fps);
    let ratio = fps / frame_rate;
    // An integral ratio is a slice `[::ratio]` over every frame; otherwise torchvision floors
    // `arange(floor(frames * frame_rate / fps)) * ratio` in f32.
    if ratio.fract() == 0.0 && ratio >= 1.0 {
        (0..frames).step_by(ratio as usize).collect()
    } else {
        let total = (frames as f64 * frame_rate / fps).floor() as usize;
        let r = ratio as f32;
        (0..total)
            .map(|i| (i as f32 * r).floor() as usize)
            .collect()
    }
}

/// torchvision's `unfold`: windows of `size` positions, `step` apart, in `len` positions.
fn window_count(len: usize, size: usize, step: usize) -> usize {
    if size == 0 || step == 0 || len < size {
        0
    } else {
        (len - size) / step + 1
    }
}

/// torchvision's `UniformClipSampler`: `per_video` clips equally spaced over each video's
/// clips (repeating when it has fewer), as indices into all videos' clips laid end to end;
/// videos with no clip are skipped.
pub fn uniform_clip_sampler(clips_per_video: &[usize], per_video: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut first = 0usize;
    for &len in clips_per_video {
        if len == 0 {
            continue;
        }
        // torch.linspace(s, s + len - 1, steps).floor(), in f32 (torch's default dtype).
        let (lo, hi) = (first as f32, (first + len - 1) as f32);
        if per_video == 1 {
            out.push(first);
        } else {
            let step = (hi - lo) / (per_video - 1) as f32;
            let half = per_video / 2;
            out.extend((0..per_video).map(|i| {
                let v = if i < half {
                    lo + step * i as f32
                } else {
                    hi - step * (per_video - 1 - i) as f32
                };
                v.floor() as usize
            }));
        }
        first += len;
    }
    out
}

/// torchvision's `RandomClipSampler`: up to `max_per_video` distinct clips drawn from each
/// video's clips, all shuffled together; deterministic from `(seed, epoch)`.
pub fn random_clip_sampler(
    clips_per_video: &[usize],
    max_per_video: usize,
    seed: u64,
    epoch: u64,
) -> Vec<usize> {
    let mut out = Vec::new();
    let mut first = 0usize;
    for (v, &len) in clips_per_video.iter().enumerate() {
        let mut rng = CounterRng::new(seed, epoch, v as u64, Stream::Clips);
        // A partial Fisher-Yates shuffle: the first `take` of a random permutation.
        let take = len.min(max_per_video);
        let mut perm: Vec<usize> = (0..len).collect();
        for i in 0..take {
            let j = i + rng.below((len - i) as u64) as usize;
            perm.swap(i, j);
        }
        out.extend(perm[..take].iter().map(|&c| first + c));
        first += len;
    }
    let mut rng = CounterRng::new(seed, epoch, u64::MAX, Stream::Clips);
    for i in (1..out.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        out.swap(i, j);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeline(n: usize, fps: f64) -> Timeline {
        let pts: Vec<f64> = (0..n).map(|i| i as f64 / fps).collect();
        Timeline {
            pts,
            begin: 0.0,
            end: n as f64 / fps,
        }
    }

    fn regular(p: IndexClips, n: usize) -> Result<Vec<Vec<usize>>, ClipError> {
        ClipSampler::RegularIndices(p).sample(&timeline(n, 25.0), 0, 0, 0)
    }

    #[test]
    fn the_policies_fill_a_clip_cut_by_the_end_as_torchcodec_documents() {
        // torchcodec's example: last index 99, a clip from 95 of 5 frames 2 apart.
        let p = IndexClips {
            frames_per_clip: 5,
            between: 2,
            range_start: 95,
            range_end: Some(96),
            ..IndexClips::default()
        };
        assert_eq!(
            regular(p.clone(), 100).unwrap(),
            vec![vec![95, 97, 99, 99, 99]]
        );
        let wrap = IndexClips {
            policy: Policy::Wrap,
            ..p.clone()
        };
        assert_eq!(regular(wrap, 100).unwrap(), vec![vec![95, 97, 99, 95, 97]]);
        let error = IndexClips {
            policy: Policy::Error,
            ..p
        };
        assert_eq!(regular(error, 100), Err(ClipError::PastTheEnd));
    }

    #[test]
    fn regular_starts_follow_torch_linspace_duplicates_included() {
        // torchcodec's note: linspace(0, 10, 20) as ints gives 0 0 1 1 ... 9 10.
        assert_eq!(
            linspace_int(0, 10, 20),
            vec![0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 10]
        );
        let p = IndexClips {
            num_clips: 3,
            frames_per_clip: 4,
            ..IndexClips::default()
        };
        // Default range end: 100 - 4 + 1 = 97, so starts linspace(0, 96, 3).
        let clips = regular(p, 100).unwrap();
        assert_eq!(clips[0], vec![0, 1, 2, 3]);
        assert_eq!(clips[1], vec![48, 49, 50, 51]);
        assert_eq!(clips[2], vec![96, 97, 98, 99]);
    }

    #[test]
    fn random_starts_are_uniform_over_the_range_and_reproducible() {
        let s = ClipSampler::RandomIndices(IndexClips {
            num_clips: 4,
            frames_per_clip: 8,
            between: 2,
            ..IndexClips::default()
        });
        let v = timeline(40, 25.0);
        assert_eq!(s.sample(&v, 1, 2, 3), s.sample(&v, 1, 2, 3));
        assert_ne!(s.sample(&v, 1, 2, 3), s.sample(&v, 1, 3, 3));
        let mut seen = [0u32; 40];
        for i in 0..5000 {
            for clip in s.sample(&v, 9, 0, i).unwrap() {
                assert_eq!(clip.len(), 8);
                assert!(clip.windows(2).all(|w| w[1] == w[0] + 2));
                seen[clip[0]] += 1;
            }
        }
        // Span 15: starts in [0, 26), each about 20000 / 26 times.
        assert!(
            seen[..26].iter().all(|&c| (620..920).contains(&c)),
            "{seen:?}"
        );
        assert!(seen[26..].iter().all(|&c| c == 0));
    }

    #[test]
    fn a_video_too_short_for_one_clip_is_refused() {
        let p = IndexClips {
            frames_per_clip: 16,
            range_start: 2,
            ..IndexClips::default()
        };
        assert!(matches!(regular(p, 10), Err(ClipError::Range(_))));
        assert_eq!(regular(IndexClips::default(), 0), Err(ClipError::Empty));
    }

    #[test]
    fn timestamps_pick_the_frame_shown_at_each_time() {
        // 10 fps, 20 frames: a clip at 0.25 s of 3 frames 0.1 s apart shows frames 2, 3, 4.
        let v = timeline(20, 10.0);
        let s = ClipSampler::RegularTimestamps {
            seconds_between_clip_starts: 0.8,
            clips: TimeClips {
                frames_per_clip: 3,
                range_start: Some(0.25),
                ..TimeClips::default()
            },
        };
        let clips = s.sample(&v, 0, 0, 0).unwrap();
        // Starts 0.25, 1.05 (end = 2.0 - 0.2 = 1.8).
        assert_eq!(clips, vec![vec![2, 3, 4], vec![10, 11, 12]]);
        assert_eq!(v.played_at(0.0999), 0);
        assert_eq!(v.played_at(0.1), 1);
        assert_eq!(v.played_at(5.0), 19);
    }

    #[test]
    fn video_clips_resample_and_window_as_torchvision_does() {
        // 30 fps to 15: a slice [::2], then windows of 4 every 3.
        let clips = video_clips(20, 30.0, 4, 3, Some(15.0));
        assert_eq!(
            clips,
            vec![vec![0, 2, 4, 6], vec![6, 8, 10, 12], vec![12, 14, 16, 18]]
        );
        // 25 fps to 15: floor(arange(12) * 5/3).
        let clips = video_clips(20, 25.0, 12, 1, Some(15.0));
        assert_eq!(clips, vec![vec![0, 1, 3, 5, 6, 8, 10, 11, 13, 15, 16, 18]]);
        assert!(video_clips(5, 25.0, 16, 1, None).is_empty());
    }

    #[test]
    fn window_clips_give_each_of_video_clips_windows_by_number_and_none_past_the_last() {
        for (frames, fps, rate, fpc, step) in [
            (20, 30.0, Some(15.0), 4, 3),
            (97, 24.0, Some(12.5), 16, 5),
            (97, 24.0, Some(30.0), 4, 1),
            (40, 25.0, None, 16, 2),
            (5, 25.0, None, 16, 1),
        ] {
            let all = video_clips(frames, fps, fpc, step, rate);
            let w = WindowClips {
                frames_per_clip: fpc,
                step,
                frame_rate: rate,
                metadata: None,
                leave_unreadable: false,
            };
            assert_eq!(w.count(frames, fps), all.len());
            for (k, clip) in all.iter().enumerate() {
                assert_eq!(w.clip(frames, fps, k).as_ref(), Some(clip));
            }
            assert_eq!(w.clip(frames, fps, all.len()), None);
        }
    }

    /// `tests/data/video/samplers.json`: torchcodec's and torchvision's own code over a grid
    /// of parameters (`make_sampler_reference.py`).
    fn reference() -> serde_json::Value {
        serde_json::from_str(include_str!("../../tests/data/video/samplers.json")).unwrap()
    }

    fn policy(name: &serde_json::Value) -> Policy {
        match name.as_str().unwrap() {
            "repeat_last" => Policy::RepeatLast,
            "wrap" => Policy::Wrap,
            _ => Policy::Error,
        }
    }

    #[test]
    fn regular_index_clips_match_torchcodec_over_a_grid_errors_included() {
        let r = reference();
        for case in r["indices"].as_array().unwrap() {
            let c = case.as_array().unwrap();
            let p = IndexClips {
                num_clips: c[1].as_u64().unwrap() as usize,
                frames_per_clip: c[2].as_u64().unwrap() as usize,
                between: c[3].as_u64().unwrap() as usize,
                range_start: c[4].as_i64().unwrap(),
                range_end: c[5].as_i64(),
                policy: policy(&c[6]),
            };
            let got = regular(p, c[0].as_u64().unwrap() as usize).ok();
            let want: Option<Vec<Vec<f64>>> = serde_json::from_value(c[7].clone()).unwrap();
            // A negative start reaching before the first frame passes torchcodec's checks and
            // asks its decoder for a negative index; hpuload refuses it instead.
            let want = want.filter(|clips| clips.iter().flatten().all(|&i| i >= 0.0));
            let want = want.map(|clips| {
                clips
                    .iter()
                    .map(|clip| clip.iter().map(|&i| i as usize).collect::<Vec<_>>())
                    .collect::<Vec<_>>()
            });
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn regular_timestamp_clips_match_torchcodec_over_a_grid_errors_included() {
        let r = reference();
        let fixtures: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/data/video/expected.json")).unwrap();
        for case in r["timestamps"].as_array().unwrap() {
            let c = case.as_array().unwrap();
            let v = &fixtures[c[0].as_str().unwrap()];
            let tb = v["time_base"][0].as_f64().unwrap() / v["time_base"][1].as_f64().unwrap();
            let frames = v["frames"].as_array().unwrap();
            let video = Timeline {
                pts: frames
                    .iter()
                    .map(|f| f["pts"].as_f64().unwrap() * tb)
                    .collect(),
                begin: v["begin_stream_pts"].as_f64().unwrap() * tb,
                end: v["end_stream_pts"].as_f64().unwrap() * tb,
            };
            let p = TimeClips {
                num_clips: 0,
                frames_per_clip: c[2].as_u64().unwrap() as usize,
                seconds_between_frames: c[3].as_f64(),
                range_start: c[4].as_f64(),
                range_end: c[5].as_f64(),
                policy: policy(&c[6]),
            };
            let got = clip_times(&p, &video, Starts::Every(c[1].as_f64().unwrap())).ok();
            let want: Option<Vec<Vec<f64>>> = serde_json::from_value(c[7].clone()).unwrap();
            // torch.arange's vector kernel rounds the last bit differently by CPU (it steps
            // from each vector's base), so times agree to within rounding, not to the bit.
            match (&got, &want) {
                (Some(g), Some(w)) => {
                    assert_eq!(g.len(), w.len(), "{case}");
                    for (a, b) in g.iter().flatten().zip(w.iter().flatten()) {
                        assert!((a - b).abs() < 1e-12, "{case}: {a} against {b}");
                    }
                    assert_eq!(
                        g.iter().map(Vec::len).collect::<Vec<_>>(),
                        w.iter().map(Vec::len).collect::<Vec<_>>()
                    );
                }
                _ => assert_eq!(got, want, "{case}"),
            }
        }
    }

    #[test]
    fn video_clips_and_the_uniform_sampler_match_torchvision_over_a_grid() {
        let r = reference();
        for case in r["video_clips"].as_array().unwrap() {
            let c = case.as_array().unwrap();
            let got = video_clips(
                c[0].as_u64().unwrap() as usize,
                c[1].as_f64().unwrap(),
                c[3].as_u64().unwrap() as usize,
                c[4].as_u64().unwrap() as usize,
                c[2].as_f64(),
            );
            let want: Vec<Vec<usize>> = serde_json::from_value(c[5].clone()).unwrap();
            assert_eq!(got, want, "{case}");
        }
        for case in r["uniform"].as_array().unwrap() {
            let c = case.as_array().unwrap();
            let lengths: Vec<usize> = serde_json::from_value(c[0].clone()).unwrap();
            let want: Vec<usize> = serde_json::from_value(c[2].clone()).unwrap();
            let got = uniform_clip_sampler(&lengths, c[1].as_u64().unwrap() as usize);
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn the_clip_samplers_of_torchvision_pick_per_video() {
        assert_eq!(uniform_clip_sampler(&[5, 0, 3], 2), vec![0, 4, 5, 7]);
        assert_eq!(uniform_clip_sampler(&[2], 4), vec![0, 0, 0, 1]);
        let picked = random_clip_sampler(&[5, 0, 3], 2, 7, 0);
        assert_eq!(picked.len(), 4);
        assert_eq!(picked.iter().filter(|&&c| c < 5).count(), 2);
        assert_eq!(picked.iter().filter(|&&c| c >= 5).count(), 2);
        assert_eq!(picked, random_clip_sampler(&[5, 0, 3], 2, 7, 0));
    }
}
