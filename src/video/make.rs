//! The built-in video dataset (`hpuload make-dataset --video`, and `hpuload bench --video`
//! without `--data`): H.264 clips in MP4 files, in class folders, made here with no file from
//! anywhere else.
//!
//! Each clip is a camera moving over one of the built-in set's photo-like pictures: panning
//! and zooming from one window to another along an eased path, with a disc crossing the scene
//! on its own path, so that the encoder has global and local motion to predict, as in real
//! footage. Frames are resampled bilinearly from the picture, converted to 4:2:0 YUV with
//! BT.601 limited-range coefficients (what the decoder side assumes for untagged video, and
//! what the stream's VUI says), encoded by OpenH264 (Constrained Baseline, a keyframe every
//! `gop` frames) and written by [`Mp4Writer`]. The same `(spec, seed)` always gives the same
//! files.

use std::path::{Path, PathBuf};

use openh264::encoder::{
    Encoder, EncoderConfig, FrameRate, FrameType, IntraFramePeriod, QpRange, RateControlMode,
    VuiConfig,
};
use openh264::formats::YUVBuffer;
use openh264::OpenH264API;

use super::write::Mp4Writer;
#[cfg(test)]
use super::write::WriteError;
use crate::dataset::{made_once, synth_jpeg, write_class_folders, CLASSES};
use crate::Error;

/// What the built-in video set holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VideoSetSpec {
    /// Clips in all (labels cycle over the classes).
    pub videos: usize,
    /// Frame width and height, in pixels (even).
    pub size: (u16, u16),
    /// Frames per clip.
    pub frames: usize,
    /// Frames per second.
    pub fps: u32,
    /// Frames from one keyframe to the next.
    pub gop: u32,
}

impl Default for VideoSetSpec {
    /// 40 clips of 96 frames (4 s at 24 fps), 640x360, a keyframe every 2 s: about 4,000
    /// frames, a few seconds to decode on one core.
    fn default() -> Self {
        Self {
            videos: 40,
            size: (640, 360),
            frames: 96,
            fps: 24,
            gop: 48,
        }
    }
}

/// Writes `spec.videos` clips into `out/class_NN/clip_NNNNNN.mp4`, on all cores.
///
/// # Errors
/// A file cannot be written, or the encoder fails.
pub fn make_video_dataset(out: &Path, spec: VideoSetSpec, seed: u64) -> Result<(), Error> {
    let even = |n: u16| n.is_multiple_of(2) && n >= 16;
    if !even(spec.size.0) || !even(spec.size.1) {
        return Err(Error::config(
            "size",
            "a video's width and height must be even and at least 16",
        ));
    }
    let folders = CLASSES.min(spec.videos.max(1));
    write_class_folders(out, folders, spec.videos, "clip", "mp4", |i, path| {
        synth_video(spec, seed, i as u64).map_err(|reason| Error::Format {
            path: path.to_path_buf(),
            reason,
        })
    })
}

/// The built-in video set, made on first use in the cache folder (as the image set is).
///
/// # Errors
/// The cache folder cannot be written, or the encoder fails.
pub fn default_video_dataset() -> Result<PathBuf, Error> {
    let spec = VideoSetSpec::default();
    made_once(&format!("synthetic-video-v1-{}", spec.videos), |dir| {
        make_video_dataset(dir, spec, 0)
    })
}

/// A small deterministic generator for the camera and disc paths.
struct Draw(u64);

impl Draw {
    fn f(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// A camera window over the picture: centre and height, in the picture's pixels.
#[derive(Clone, Copy)]
struct Window {
    cx: f32,
    cy: f32,
    h: f32,
}

/// One clip's picture and paths: renders frame `t` of `frames`.
struct Scene {
    picture: image::RgbImage,
    size: (usize, usize),
    frames: usize,
    from: Window,
    to: Window,
    /// The disc: start and end (fractions of the frame), radius (of its height), colour.
    disc: ([f32; 2], [f32; 2], f32, [f32; 3]),
}

impl Scene {
    fn new(spec: VideoSetSpec, seed: u64, index: u64) -> Result<Self, String> {
        let picture = image::load_from_memory(&synth_jpeg(seed, index))
            .map_err(|e| format!("the clip's picture does not decode: {e}"))?
            .to_rgb8();
        let (pw, ph) = (picture.width() as f32, picture.height() as f32);
        let size = (usize::from(spec.size.0), usize::from(spec.size.1));
        let aspect = size.0 as f32 / size.1 as f32;
        let mut draw = Draw(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5EED);
        // The largest window of the frame's aspect that fits, and two views inside it.
        let full_h = ph.min(pw / aspect);
        let view = |draw: &mut Draw| {
            let h = full_h * (0.55 + 0.45 * draw.f());
            let (half_w, half_h) = (h * aspect / 2.0, h / 2.0);
            Window {
                cx: half_w + (pw - 2.0 * half_w) * draw.f(),
                cy: half_h + (ph - 2.0 * half_h) * draw.f(),
                h,
            }
        };
        let (from, to) = (view(&mut draw), view(&mut draw));
        let disc = (
            [draw.f(), draw.f()],
            [draw.f(), draw.f()],
            0.06 + 0.06 * draw.f(),
            [255.0 * draw.f(), 255.0 * draw.f(), 255.0 * draw.f()],
        );
        Ok(Self {
            picture,
            size,
            frames: spec.frames,
            from,
            to,
            disc,
        })
    }

    /// Frame `t` as RGB, `w * h * 3` bytes.
    fn render(&self, t: usize, rgb: &mut [u8]) {
        let (w, h) = self.size;
        let s = t as f32 / (self.frames.max(2) - 1) as f32;
        let eased = s * s * (3.0 - 2.0 * s);
        let (from, to) = (self.from, self.to);
        let at = Window {
            cx: from.cx + (to.cx - from.cx) * eased,
            cy: from.cy + (to.cy - from.cy) * eased,
            h: from.h + (to.h - from.h) * eased,
        };
        render(&self.picture, at, self.size, rgb);
        let (start, end, radius, colour) = self.disc;
        let centre = [
            (start[0] + (end[0] - start[0]) * s) * w as f32,
            (start[1] + (end[1] - start[1]) * s) * h as f32,
        ];
        paint_disc(rgb, self.size, centre, radius * h as f32, colour);
    }
}

/// One clip's file bytes.
fn synth_video(spec: VideoSetSpec, seed: u64, index: u64) -> Result<Vec<u8>, String> {
    let scene = Scene::new(spec, seed, index)?;
    let (w, h) = scene.size;
    let config = EncoderConfig::new()
        .max_frame_rate(FrameRate::from_hz(spec.fps as f32))
        // A fixed quantiser (rate control needs frame skipping, and every frame is kept).
        .rate_control_mode(RateControlMode::Off)
        .qp(QpRange::new(24, 24))
        .intra_frame_period(IntraFramePeriod::from_num_frames(spec.gop))
        .skip_frames(false)
        .scene_change_detect(false)
        .vui(VuiConfig::bt601());
    let mut encoder = Encoder::with_api_config(OpenH264API::from_source(), config)
        .map_err(|e| format!("the H.264 encoder could not start: {e}"))?;
    let mut mp4 = Mp4Writer::new(spec.size.0, spec.size.1, spec.fps);
    let mut rgb = vec![0u8; w * h * 3];
    let mut yuv = vec![0u8; w * h * 3 / 2];
    for t in 0..spec.frames {
        scene.render(t, &mut rgb);
        to_i420(&rgb, (w, h), &mut yuv);
        let frame = YUVBuffer::from_vec(yuv.clone(), w, h);
        let encoded = encoder
            .encode(&frame)
            .map_err(|e| format!("frame {t} does not encode: {e}"))?;
        let keyframe = matches!(encoded.frame_type(), FrameType::IDR | FrameType::I);
        mp4.push(&encoded.to_vec(), keyframe)
            .map_err(|e| e.to_string())?;
    }
    mp4.finish().map_err(|e| e.to_string())
}

/// Resamples the picture's `window` (bilinear, pixel centres) into a `w` x `h` RGB frame.
fn render(picture: &image::RgbImage, window: Window, (w, h): (usize, usize), out: &mut [u8]) {
    let (pw, ph) = (picture.width() as usize, picture.height() as usize);
    let aspect = w as f32 / h as f32;
    let src = picture.as_raw();
    let scale = window.h / h as f32;
    let (x0, y0) = (
        window.cx - window.h * aspect / 2.0,
        window.cy - window.h / 2.0,
    );
    for y in 0..h {
        let sy = (y0 + (y as f32 + 0.5) * scale - 0.5).clamp(0.0, (ph - 1) as f32);
        let (y_lo, fy) = (sy.floor() as usize, sy.fract());
        let y_hi = (y_lo + 1).min(ph - 1);
        for x in 0..w {
            let sx = (x0 + (x as f32 + 0.5) * scale - 0.5).clamp(0.0, (pw - 1) as f32);
            let (x_lo, fx) = (sx.floor() as usize, sx.fract());
            let x_hi = (x_lo + 1).min(pw - 1);
            for c in 0..3 {
                let p = |yy: usize, xx: usize| f32::from(src[(yy * pw + xx) * 3 + c]);
                let top = p(y_lo, x_lo) + (p(y_lo, x_hi) - p(y_lo, x_lo)) * fx;
                let bottom = p(y_hi, x_lo) + (p(y_hi, x_hi) - p(y_hi, x_lo)) * fx;
                out[(y * w + x) * 3 + c] = (top + (bottom - top) * fy).round() as u8;
            }
        }
    }
}

/// Paints a disc with a soft edge over the frame.
fn paint_disc(
    rgb: &mut [u8],
    (w, h): (usize, usize),
    centre: [f32; 2],
    radius: f32,
    colour: [f32; 3],
) {
    let (x_lo, x_hi) = (
        (centre[0] - radius - 1.0).max(0.0) as usize,
        ((centre[0] + radius + 1.0) as usize).min(w),
    );
    let (y_lo, y_hi) = (
        (centre[1] - radius - 1.0).max(0.0) as usize,
        ((centre[1] + radius + 1.0) as usize).min(h),
    );
    for y in y_lo..y_hi {
        for x in x_lo..x_hi {
            let d = ((x as f32 + 0.5 - centre[0]).powi(2) + (y as f32 + 0.5 - centre[1]).powi(2))
                .sqrt();
            let a = (radius - d + 0.5).clamp(0.0, 1.0);
            if a > 0.0 {
                let px = &mut rgb[(y * w + x) * 3..][..3];
                for c in 0..3 {
                    px[c] = (f32::from(px[c]) * (1.0 - a) + colour[c] * a).round() as u8;
                }
            }
        }
    }
}

/// RGB to 4:2:0 YUV (planar Y, U, V), BT.601 limited range; chroma of each 2x2 block's mean.
fn to_i420(rgb: &[u8], (w, h): (usize, usize), out: &mut [u8]) {
    let (luma, chroma) = out.split_at_mut(w * h);
    let (u_plane, v_plane) = chroma.split_at_mut(w * h / 4);
    for (i, px) in rgb.chunks_exact(3).enumerate() {
        let [r, g, b] = [px[0], px[1], px[2]].map(f32::from);
        luma[i] = (16.0 + (65.481 * r + 128.553 * g + 24.966 * b) / 255.0).round() as u8;
    }
    for y in 0..h / 2 {
        for x in 0..w / 2 {
            let mut sum = [0f32; 3];
            for (dy, dx) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                let px = &rgb[((2 * y + dy) * w + 2 * x + dx) * 3..][..3];
                for c in 0..3 {
                    sum[c] += f32::from(px[c]) / 4.0;
                }
            }
            let [r, g, b] = sum;
            let at = y * (w / 2) + x;
            u_plane[at] = (128.0 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255.0).round() as u8;
            v_plane[at] = (128.0 + (112.0 * r - 93.786 * g - 18.214 * b) / 255.0).round() as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::video::{colour, DecodePlan, VideoDecoder, VideoIndex};

    fn psnr(a: &[u8], b: &[u8]) -> f64 {
        let mse = a
            .iter()
            .zip(b)
            .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
            .sum::<f64>()
            / a.len() as f64;
        10.0 * (255.0 * 255.0 / mse.max(1e-9)).log10()
    }

    #[test]
    fn a_made_clip_indexes_and_decodes_to_the_frames_it_was_made_from() {
        let spec = VideoSetSpec {
            videos: 2,
            size: (96, 64),
            frames: 12,
            fps: 24,
            gop: 6,
        };
        let dir = std::env::temp_dir().join(format!("hpuload-make-video-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        make_video_dataset(&dir, spec, 7).unwrap();
        let path = dir.join("class_01/clip_000001.mp4");
        let index = VideoIndex::open(&path).unwrap();
        assert_eq!(index.size, (96, 64));
        assert_eq!(index.frames.len(), 12);
        let keys: Vec<usize> = (0..12).filter(|&i| index.frames[i].keyframe).collect();
        assert_eq!(keys, [0, 6]);
        assert!((index.duration_seconds() - 0.5).abs() < 1e-9);
        // Every frame decodes, in order, to the frame rendered for it, within what the
        // encoder loses; and no frame is its neighbour (the camera moves).
        let scene = Scene::new(spec, 7, 1).unwrap();
        let plan = DecodePlan::new(&index, &(0..12).collect::<Vec<_>>());
        let mut decoder = VideoDecoder::new(&index).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let (mut rendered, mut rgb) = (vec![0; 96 * 64 * 3], Vec::new());
        let mut seen = Vec::new();
        let mut first: Option<Vec<u8>> = None;
        decoder
            .decode(&file, &index, &plan, &mut |p| {
                scene.render(p.frame, &mut rendered);
                colour::to_rgb(&p, &colour::Conversion::DEFAULT, &mut rgb);
                let db = psnr(&rgb, &rendered);
                assert!(db > 30.0, "frame {}: {db:.1} dB", p.frame);
                match &first {
                    None => first = Some(rgb.clone()),
                    Some(first) if p.frame == 11 => {
                        assert!(psnr(first, &rgb) < 20.0, "the camera does not move");
                    }
                    Some(_) => {}
                }
                seen.push(p.frame);
            })
            .unwrap();
        assert_eq!(seen, (0..12).collect::<Vec<_>>());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_muxer_refuses_slices_before_parameter_sets_and_an_empty_track() {
        let mut mp4 = Mp4Writer::new(16, 16, 24);
        assert_eq!(
            mp4.push(&[0, 0, 0, 1, 0x65, 0x88], true),
            Err(WriteError::NoParameterSets)
        );
        assert_eq!(
            Mp4Writer::new(16, 16, 24).finish(),
            Err(WriteError::NoParameterSets)
        );
    }
}
