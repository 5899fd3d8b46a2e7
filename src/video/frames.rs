//! A video sample whose frames are JPEG files (a folder of frames), once its clips are drawn
//! ([`FramesJob`]): each kept frame decoded and written into the sample's slot through its
//! clip's plan. On the host the CPU decoder decodes the whole frame and the clip's window is
//! resampled from it, as for an image on the CPU path; on the media engine the engine's JPEG
//! decoder decodes only the window's region, at the DCT scale the output allows, resampled
//! straight to the output size, as for an image on the engine. Frame `t` of clip `k` goes
//! where [`ClipsJob`](super::ClipsJob)'s would.

use std::ops::Range;
use std::path::PathBuf;

use hpuload_decoders::jpeg::{choose_scale, Filter, ResizeRequest, Scale};
use hpuload_decoders::{CpuDecoder, Decode, JpegDecoder, Limits};

use super::render::Placement;
use super::{ClipsError, VideoError, VideoFailure};
use crate::augment::{self, PixelStage, Resampler, SamplePlan, Scratch};

/// A frame-folder sample's clips, drawn: the frames' bytes ride in one buffer (the sample's
/// bitstream), each frame once however many clips keep it.
#[derive(Debug)]
pub struct FramesJob {
    /// Each distinct frame kept: its file (for messages) and its bytes in the bitstream.
    pub files: Vec<(PathBuf, Range<usize>)>,
    /// Each clip's frames, as indices into `files`.
    pub clips: Vec<Vec<usize>>,
    /// Each clip's drawn plan, applied to every frame of the clip.
    pub drawn: Vec<SamplePlan>,
    /// The frames' size (width, height): the first kept frame's, which every frame must have.
    pub size: (u32, u32),
    /// Frames in the slot: clips times frames per clip.
    pub frames: usize,
    /// Each clip is `[C, T, H, W]` instead of `[T, C, H, W]`.
    pub channels_first: bool,
}

/// The buffers of one thread's frame-folder samples (a worker's or an engine's).
#[derive(Default)]
pub struct FramesScratch {
    decoder: Option<CpuDecoder>,
    rgb: Vec<u8>,
    out: Vec<u8>,
    planes: Vec<u8>,
    resampler: Option<Resampler>,
    ops: Scratch,
}

impl FramesScratch {
    /// The size (width, height) of the JPEG `bytes`, from its headers.
    ///
    /// # Errors
    /// Not a JPEG the CPU decoder reads, or beyond `limits`.
    pub fn probe(
        &mut self,
        bytes: &[u8],
        limits: Limits,
    ) -> Result<(u32, u32), hpuload_decoders::DecodeError> {
        let decoder = self
            .decoder
            .get_or_insert_with(|| CpuDecoder::with_limits(limits));
        decoder.probe(bytes).map(|i| (i.width, i.height))
    }
}

impl FramesJob {
    /// Whether the media engine runs every clip's plan: `Err` names what it does not (steps
    /// before the geometry, a resize without antialiasing), for the CPU path to take.
    ///
    /// # Errors
    /// The reason the sample goes to the CPU path.
    pub fn on_engine(&self) -> Result<(), &'static str> {
        for plan in &self.drawn {
            if !plan.pre.is_empty() {
                return Err("pixel ops before the geometry run on the CPU path");
            }
            if plan.interpolation.no_antialias() {
                return Err("a resize without antialiasing runs on the CPU path");
            }
            if plan.interpolation.pillow_only() {
                return Err("Pillow's Lanczos, box or Hamming resize runs on the CPU path");
            }
        }
        Ok(())
    }

    /// The bytes the frames' files hold in `bitstream`, one after the other.
    pub fn bitstream_len(&self) -> usize {
        self.files.last().map_or(0, |(_, r)| r.end)
    }

    /// Decodes every kept frame on the host (the CPU decoder) and writes the clips into
    /// `slot` through `stage`.
    ///
    /// # Errors
    /// A frame that does not decode or is not the first frame's size (named), or a window the
    /// resampler refuses.
    pub fn write_host(
        &self,
        bitstream: &[u8],
        stage: &PixelStage,
        limits: Limits,
        s: &mut FramesScratch,
        slot: &mut [u8],
    ) -> Result<(), ClipsError> {
        let place = self.placement(slot.len());
        let decoder = s
            .decoder
            .get_or_insert_with(|| CpuDecoder::with_limits(limits));
        let (w, h) = self.size;
        for (k, (clip, drawn)) in self.clips.iter().zip(&self.drawn).enumerate() {
            let (oh, ow) = drawn.pixels.size;
            let resampler = s.resampler.get_or_insert_with(|| Resampler::new(oh, ow));
            resampler.set_size(oh, ow);
            for (t, &f) in clip.iter().enumerate() {
                let (file, range) = &self.files[f];
                let info = decoder
                    .decode(&bitstream[range.clone()], &mut s.rgb)
                    .map_err(|e| frame_error(file, e.to_string()))?;
                self.check_size(file, (info.width, info.height))?;
                let rgb = &mut s.rgb[..info.rgb_len()];
                augment::apply(&drawn.pre, rgb, h as usize, w as usize, &mut s.ops);
                let resized = resampler.run_with(rgb, w, h, &drawn.crop, drawn.interpolation)?;
                stage.ops(resized, &drawn.pixels, &mut s.ops);
                place.put(stage, resized, &drawn.pixels, (k, t), slot, &mut s.planes);
            }
        }
        Ok(())
    }

    /// Decodes every kept frame with the media engine's JPEG decoder (the clip window's region
    /// at its DCT scale, resampled to the output size) and writes the clips into `slot`
    /// through `stage`. Only for a job [`on_engine`](FramesJob::on_engine) accepts.
    ///
    /// # Errors
    /// As [`write_host`](FramesJob::write_host).
    pub fn write_engine(
        &self,
        bitstream: &[u8],
        stage: &PixelStage,
        decoder: &mut JpegDecoder,
        s: &mut FramesScratch,
        slot: &mut [u8],
    ) -> Result<(), ClipsError> {
        let place = self.placement(slot.len());
        let (w, h) = self.size;
        for (k, (clip, drawn)) in self.clips.iter().zip(&self.drawn).enumerate() {
            let (oh, ow) = drawn.pixels.size;
            let filter = drawn.interpolation.filter();
            let region = drawn.crop.covering_region(w, h, ow, filter);
            let request = ResizeRequest {
                region,
                // Nearest picks source pixels, which a DCT-scaled decode no longer has.
                scale: if filter == Filter::Nearest {
                    Scale::FULL
                } else {
                    choose_scale(region, ow, oh)
                },
                window: drawn.crop.window(),
                out_w: ow,
                out_h: oh,
                filter,
            };
            s.out.resize(ow as usize * oh as usize * 3, 0);
            for (t, &f) in clip.iter().enumerate() {
                let (file, range) = &self.files[f];
                let bytes = &bitstream[range.clone()];
                // Headers parsed once: the size check and the decode share the parse.
                let (info, parsed) = decoder
                    .probe_parsed(bytes)
                    .map_err(|e| frame_error(file, e.to_string()))?;
                self.check_size(file, (info.width, info.height))?;
                decoder
                    .decode_resized_parsed(bytes, &parsed, &request, &mut s.out)
                    .map_err(|e| frame_error(file, e.to_string()))?;
                stage.ops(&mut s.out, &drawn.pixels, &mut s.ops);
                place.put(stage, &s.out, &drawn.pixels, (k, t), slot, &mut s.planes);
            }
        }
        Ok(())
    }

    fn placement(&self, slot_len: usize) -> Placement {
        Placement {
            per_clip: self.clips.first().map_or(1, Vec::len),
            frame_bytes: slot_len / self.frames.max(1),
            channels_first: self.channels_first,
        }
    }

    fn check_size(&self, file: &std::path::Path, size: (u32, u32)) -> Result<(), ClipsError> {
        if size == self.size {
            return Ok(());
        }
        Err(frame_error(
            file,
            format!(
                "{}x{}, where the video's first kept frame is {}x{}",
                size.0, size.1, self.size.0, self.size.1
            ),
        ))
    }
}

/// A frame's failure, naming its file.
pub(crate) fn frame_error(file: &std::path::Path, reason: String) -> ClipsError {
    ClipsError::Video(VideoFailure::Video(VideoError::Frame {
        file: file.display().to_string(),
        reason,
    }))
}
