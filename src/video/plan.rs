//! The decode plan: which compressed frames to decode so that the frames a sampler asked for
//! come out, each decoded once.
//!
//! A frame can be decoded only after the keyframe before it and every frame between the two
//! in decode order (its references are among them). So each wanted frame needs the span of
//! decode order from its keyframe to itself, and the plan is the union of those spans: runs of
//! consecutive frames, each starting at a keyframe. Wanted frames whose spans overlap or touch
//! share one run (the clips of one video that overlap decode once); a gap of at least one
//! keyframe starts a new run, since jumping ahead to that keyframe is cheaper than decoding
//! through.

use super::VideoIndex;

/// A stretch of the file decoded without a jump: from a keyframe to the last frame any wanted
/// frame needs, in decode order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// The first frame decoded (a keyframe), in decode order.
    pub first: usize,
    /// The last frame decoded, inclusive.
    pub last: usize,
    /// The frames of the run that are kept, ascending, each once.
    pub keep: Vec<usize>,
}

/// The runs that decode a set of wanted frames.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecodePlan {
    /// The runs, in file order, not overlapping.
    pub runs: Vec<Run>,
}

impl DecodePlan {
    /// The plan for the frames `wanted` (decode-order indices into `index.frames`; repeats and
    /// any order allowed). Frames past the index's end are ignored.
    ///
    /// A frame presented before its keyframe (a leading picture of an open GOP, which may
    /// refer to the previous GOP) starts its span at the keyframe before that one.
    pub fn new(index: &VideoIndex, wanted: &[usize]) -> Self {
        let n = index.frames.len();
        let mut wanted: Vec<usize> = wanted.iter().copied().filter(|&f| f < n).collect();
        wanted.sort_unstable();
        wanted.dedup();
        // Each wanted frame's span, by where it starts: a leading picture's starts before its
        // own keyframe, so a frame later in decode order may start earlier.
        let mut spans: Vec<(usize, usize)> = wanted
            .into_iter()
            .map(|frame| (span_start(index, frame), frame))
            .collect();
        spans.sort_unstable();
        let mut runs: Vec<Run> = Vec::new();
        for (first, frame) in spans {
            match runs.last_mut() {
                // Overlapping or adjacent spans decode as one run.
                Some(run) if first <= run.last + 1 => {
                    run.last = run.last.max(frame);
                    run.keep.push(frame);
                }
                _ => runs.push(Run {
                    first,
                    last: frame,
                    keep: vec![frame],
                }),
            }
        }
        for run in &mut runs {
            run.keep.sort_unstable();
        }
        Self { runs }
    }

    /// How many frames the plan decodes.
    pub fn decoded(&self) -> usize {
        self.runs.iter().map(|r| r.last + 1 - r.first).sum()
    }

    /// How many of the decoded frames are kept.
    pub fn kept(&self) -> usize {
        self.runs.iter().map(|r| r.keep.len()).sum()
    }

    /// The bytes of the file each run reads, `[start, end)`, in run order: one read covering
    /// the run's frames (a track's samples are mostly contiguous; another track's samples
    /// interleaved between them are read and skipped).
    pub fn spans(&self, index: &VideoIndex) -> Vec<(u64, u64)> {
        self.runs
            .iter()
            .map(|run| byte_span(index, run.first, run.last))
            .collect()
    }
}

/// The bytes of the file frames `first..=last` (decode order) lie in, `[start, end)`.
pub(crate) fn byte_span(index: &VideoIndex, first: usize, last: usize) -> (u64, u64) {
    let frames = &index.frames[first..=last];
    let start = frames.iter().map(|f| f.offset).min().unwrap_or(0);
    let end = frames
        .iter()
        .map(|f| f.offset + u64::from(f.len))
        .max()
        .unwrap_or(0);
    (start, end)
}

/// Where decoding `frame` must start: its keyframe, or an earlier one for a leading picture;
/// never before the first frame of its edit (`Frame::edit_start`: an edit list's later edits
/// play frames again, and FFmpeg decodes each edit's after the last's). No keyframe in its
/// edit at or before it (a file whose first frame is not marked sync): the edit's first
/// frame, and the decoder says whether that works.
fn span_start(index: &VideoIndex, frame: usize) -> usize {
    let frames = &index.frames;
    let pts = frames[frame].pts;
    let mut k = frame;
    loop {
        let f = &frames[k];
        if f.edit_start || k == 0 || (f.keyframe && f.pts <= pts) {
            return k;
        }
        k -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::video::{Codec, Container, Frame};

    /// An index with keyframes at the given decode positions, presentation = decode order
    /// unless `pts` says otherwise.
    fn index(keys: &[usize], n: usize, pts: Option<&[i64]>) -> VideoIndex {
        let frames = (0..n)
            .map(|i| Frame {
                pts: pts.map_or(i as i64, |p| p[i]),
                dts: i as i64,
                duration: 1,
                keyframe: keys.contains(&i),
                offset: 100 * i as u64,
                len: 10,
                shown: true,
                edit_start: false,
            })
            .collect();
        VideoIndex {
            path: "v.mp4".into(),
            container: Container::Mp4,
            codec: Codec::H264,
            config: Vec::new(),
            size: (16, 16),
            display: super::super::Display::default(),
            colour_tags: super::super::sps::Signal::default(),
            timescale: 1,
            frames,
        }
    }

    #[test]
    fn a_frame_decodes_from_its_keyframe() {
        let v = index(&[0, 10, 20], 30, None);
        let plan = DecodePlan::new(&v, &[13]);
        assert_eq!(
            plan.runs,
            vec![Run {
                first: 10,
                last: 13,
                keep: vec![13]
            }]
        );
        assert_eq!((plan.decoded(), plan.kept()), (4, 1));
    }

    #[test]
    fn clips_in_one_gop_share_a_run_and_repeated_frames_decode_once() {
        let v = index(&[0, 10, 20], 30, None);
        let plan = DecodePlan::new(&v, &[15, 12, 12, 17, 11]);
        assert_eq!(plan.runs.len(), 1);
        assert_eq!(plan.runs[0].keep, vec![11, 12, 15, 17]);
        assert_eq!((plan.runs[0].first, plan.runs[0].last), (10, 17));
    }

    #[test]
    fn a_clip_across_a_keyframe_decodes_through_it_and_a_gap_starts_a_new_run() {
        let v = index(&[0, 10, 20], 30, None);
        let plan = DecodePlan::new(&v, &[8, 9, 10, 11, 25]);
        assert_eq!(
            plan.runs,
            vec![
                Run {
                    first: 0,
                    last: 11,
                    keep: vec![8, 9, 10, 11]
                },
                Run {
                    first: 20,
                    last: 25,
                    keep: vec![25]
                }
            ]
        );
        assert_eq!(plan.decoded(), 18);
    }

    #[test]
    fn a_leading_picture_of_an_open_gop_starts_at_the_keyframe_before() {
        // Decode order I0 P1 P2 I3 B4 B5 P6: B4 and B5 are shown before I3 (open GOP).
        let v = index(&[0, 3], 7, Some(&[0, 3, 6, 9, 7, 8, 12]));
        let plan = DecodePlan::new(&v, &[4]);
        assert_eq!(plan.runs[0].first, 0);
        let plan = DecodePlan::new(&v, &[6]);
        assert_eq!(plan.runs[0].first, 3);
    }

    #[test]
    fn a_leading_picture_wanted_with_its_keyframe_moves_the_runs_start_back() {
        // The keyframe I3 comes first in decode order, but B4 (shown before it) needs the GOP
        // before: one run from I0 keeps both.
        let v = index(&[0, 3], 7, Some(&[0, 3, 6, 9, 7, 8, 12]));
        let plan = DecodePlan::new(&v, &[3, 4, 6]);
        assert_eq!(
            plan.runs,
            vec![Run {
                first: 0,
                last: 6,
                keep: vec![3, 4, 6]
            }]
        );
    }

    #[test]
    fn frames_past_the_end_are_ignored() {
        let v = index(&[0], 5, None);
        assert_eq!(DecodePlan::new(&v, &[7]).runs, vec![]);
    }
}
