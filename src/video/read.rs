//! A video's frames decoded to RGB, by presentation position: what `preview` shows, and what
//! Python code (tests of parity with torchvision among them) reads with
//! `hpuload.read_video_frames`.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use super::{
    colour, ClipError, DecodePlan, Display, VideoDecoder, VideoError, VideoFailure, VideoIndex,
};

/// Frames of one video, RGB, `height x width x 3` each, in the order they were asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frames {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The frames' pixels, one after the other.
    pub rgb: Vec<u8>,
}

/// What a reader of a video's frames learns without decoding: its frame count, torchcodec's
/// `average_fps` (frames over the stream's span), how its frames are shown, and whether its
/// edit list cuts frames (which FFmpeg decodes but does not show) or shows some twice.
///
/// # Errors
/// The file's I/O, or an index failure.
pub fn outline(path: &Path) -> Result<(usize, Option<f64>, Display, bool), VideoFailure> {
    let index = VideoIndex::open_typed(path)?;
    let timeline = super::Timeline::of(&index);
    let mut offsets: Vec<u64> = index.frames.iter().map(|f| f.offset).collect();
    offsets.sort_unstable();
    let repeated = offsets.windows(2).any(|w| w[0] == w[1]);
    let cut = repeated || index.frames.iter().any(|f| !f.shown);
    Ok((timeline.len(), timeline.average_fps(), index.display, cut))
}

/// Each frame's presentation time and duration in seconds (its `stts` delta), in
/// presentation order, from the tables: what FFmpeg gives a decoded frame as its `pts` and
/// `duration` (torchcodec's `pts_seconds` and `duration_seconds`).
///
/// # Errors
/// The file's I/O, or an index failure.
pub fn frame_times(path: &Path) -> Result<(Vec<f64>, Vec<f64>), VideoFailure> {
    let index = VideoIndex::open_typed(path)?;
    let scale = index.timescale.max(1) as f64;
    Ok(index
        .presentation_order()
        .iter()
        .map(|&i| {
            let frame = &index.frames[i];
            (frame.pts as f64 / scale, f64::from(frame.duration) / scale)
        })
        .unzip())
}

/// Decodes the frames at presentation `positions` of the video at `path` (each decoded once,
/// from the keyframe before it; a position may repeat), shown upright: a video with a display
/// matrix turned as torchcodec turns it ([`Display`]).
///
/// # Errors
/// The file's I/O, an index or decode failure, or a position past the last frame.
pub fn read_frames(path: &Path, positions: &[usize]) -> Result<Frames, VideoFailure> {
    let index = VideoIndex::open_typed(path)?;
    let order = index.presentation_order();
    let wanted = positions
        .iter()
        .map(|&p| {
            order.get(p).copied().ok_or_else(|| {
                VideoError::Clips(ClipError::Range(format!(
                    "frame {p} is past the video's {} frames",
                    order.len()
                )))
            })
        })
        .collect::<Result<Vec<usize>, VideoError>>()?;
    let mut frames: HashMap<usize, Vec<u8>> = HashMap::new();
    if !wanted.is_empty() {
        let plan = DecodePlan::new(&index, &wanted);
        let file = File::open(path)?;
        let mut decoder = VideoDecoder::new_typed(&index)?;
        let turns = index.display.turns;
        let conversion = colour::Conversion::of_video(&index);
        let mut coded = Vec::new();
        decoder.decode_typed(&file, &index, &plan, &mut |p| {
            let mut rgb = Vec::new();
            if turns == 0 {
                colour::to_rgb(&p, &conversion, &mut rgb);
            } else {
                colour::to_rgb(&p, &conversion, &mut coded);
                super::turn(&coded, (p.width, p.height), turns, &mut rgb);
            }
            frames.insert(p.frame, rgb);
        })?;
    }
    let (width, height) = index.display_size();
    let mut rgb = Vec::with_capacity(wanted.len() * width as usize * height as usize * 3);
    for w in &wanted {
        let frame = frames.get(w).ok_or(VideoError::Missing {
            wanted: wanted.len(),
            got: frames.len(),
        })?;
        rgb.extend_from_slice(frame);
    }
    Ok(Frames { width, height, rgb })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/video")
            .join(name)
    }

    #[test]
    fn frames_come_back_in_the_order_asked_and_a_repeat_is_the_same_frame() {
        let path = fixture("high_bframes.mp4");
        let all = read_frames(&path, &[0, 1, 2, 3]).unwrap();
        let (w, h) = (all.width as usize, all.height as usize);
        let frame = w * h * 3;
        let some = read_frames(&path, &[3, 1, 3]).unwrap();
        assert_eq!(&some.rgb[..frame], &all.rgb[3 * frame..4 * frame]);
        assert_eq!(&some.rgb[frame..2 * frame], &all.rgb[frame..2 * frame]);
        assert_eq!(&some.rgb[2 * frame..], &some.rgb[..frame]);
    }

    #[test]
    fn a_position_past_the_last_frame_is_refused_naming_the_count() {
        let err = read_frames(&fixture("baseline.mp4"), &[16]).unwrap_err();
        assert!(
            err.to_string().contains("past the video's 16 frames"),
            "{err}"
        );
    }
}
