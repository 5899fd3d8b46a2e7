//! The router: which samples the media engine takes. One `match` on the backend; the engine's
//! own probe decides what it can decode, and the crop (drawn here, from the image's size)
//! decides the region and DCT scale it decodes at.

use std::sync::atomic::Ordering;

use hpuload_decoders::jpeg::{choose_scale, Filter, Parsed, Region, Scale, Window};
use hpuload_decoders::orientation::Orientation;
use hpuload_decoders::{DecodeError, JpegDecoder};

use super::replace::At;
use super::{lock, Backend, Shared};
use crate::augment::{AugmentError, CanvasJob, Interpolation, PixelOp, SampleBoxes, SamplePlan};
use crate::cpu_time::CpuClock;
use crate::hpu::{DeviceBuffer, Hpu, HpuError};
use crate::stage::Stage;
use crate::video::{ClipsJob, FramesJob};
use crate::SampleErrorKind;
use std::sync::Arc;

/// Where a sample goes. Lives for one call on the stack, so the engine's slot is not boxed.
#[allow(clippy::large_enum_variant)]
pub(super) enum Route {
    /// To the media engine: its bitstream is in the slot (or a device buffer of its own).
    Engine(HwSlot),
    /// To the CPU path, with the sample's plan when the router drew it (the engine's probe
    /// read the image's size), so the CPU path runs that plan instead of drawing it again.
    Cpu(Option<SamplePlan>),
}

/// Where a sample's encoded bytes are when it is routed.
pub(super) enum Bitstream<'a> {
    /// Read straight into the start of the sample's slot, where the engine takes them from.
    InSlot(&'a [u8]),
    /// In a buffer: for the engine they are copied into `slot` (or uploaded, when larger).
    Buffered { bytes: &'a [u8], slot: &'a mut [u8] },
}

/// Routes sample `index`: for the engine, the crop is decided and the bitstream is in its slot
/// (or uploaded, when larger than a slot); the CPU path gets files the engine cannot take
/// (under `Backend::Auto`), and reports corrupt ones so that the reasons are the same on both
/// paths.
pub(super) fn route(
    shared: &Shared,
    probe: &mut JpegDecoder,
    hpu: &Hpu,
    index: usize,
    at: At,
    bitstream: Bitstream<'_>,
) -> Result<Route, SampleErrorKind> {
    let only_engine = match shared.backend {
        Backend::Cpu => return Ok(Route::Cpu(None)),
        Backend::Auto => false,
        Backend::Hw => true,
    };
    let c = &shared.counters;
    let t1 = CpuClock::now();
    let bytes = match &bitstream {
        Bitstream::InSlot(bytes) | Bitstream::Buffered { bytes, .. } => *bytes,
    };
    // An image shown turned by its EXIF orientation: the plan is drawn for it turned, the
    // engine decodes the crop's window of the image as stored and turns what it resampled.
    let turn = shared
        .plan
        .exif_orientation
        .map_or(Orientation::Upright, |reader| reader.read(bytes));
    match probe.probe_parsed(bytes) {
        Ok((info, parsed)) => {
            let objects = shared.source.objects(index).map(SampleBoxes::from);
            let shown = turn.turned_size(info.width, info.height);
            let mut plan = shared
                .plan
                .sample(shared.draws, at.epoch, at.key(index), shown, objects)
                .map_err(SampleErrorKind::Augment)?;
            super::cpu::fits(shared, &plan, shown)?;
            let (oh, ow) = plan.pixels.resampled();
            // The resize's output as stored: turned, it is the plan's.
            let (oh, ow) = if turn.swaps_axes() {
                (ow, oh)
            } else {
                (oh, ow)
            };
            if !only_engine
                && plan
                    .pixels
                    .ops
                    .iter()
                    .any(PixelOp::amplifies_level_differences)
            {
                c.add(Stage::Route, t1.elapsed());
                count_fallback(shared, LEVELS_REMAPPED);
                return Ok(Route::Cpu(Some(plan)));
            }
            let filter = plan.interpolation.filter();
            let canvas = match canvas_job(&plan, info.width, info.height, turn) {
                Ok(canvas) => canvas,
                Err(reason) if only_engine => {
                    return Err(SampleErrorKind::Augment(AugmentError::NotOnEngine(reason)));
                }
                Err(reason) => {
                    c.add(Stage::Route, t1.elapsed());
                    count_fallback(shared, reason);
                    return Ok(Route::Cpu(Some(plan)));
                }
            };
            let (canvas, region) = match canvas {
                Some((job, region)) => (Some(job), region),
                None => (
                    None,
                    plan.crop
                        .stored(turn, info.width, info.height)
                        .covering_region(info.width, info.height, ow, filter),
                ),
            };
            // Nearest picks source pixels, which a DCT-scaled decode no longer has. A canvas
            // job's scale is the window's, which may reach past the image.
            let scale = match &canvas {
                _ if filter == Filter::Nearest => Scale::FULL,
                Some(job) => choose_scale(
                    Region::full(job.window[2] as u32, job.window[3] as u32),
                    ow,
                    oh,
                ),
                None => choose_scale(region, ow, oh),
            };
            let own = match bitstream {
                Bitstream::InSlot(_) => Ok(None),
                Bitstream::Buffered { bytes, slot } if bytes.len() <= slot.len() => {
                    slot[..bytes.len()].copy_from_slice(bytes);
                    Ok(None)
                }
                Bitstream::Buffered { bytes, .. } => upload(hpu, bytes).map(Some),
            };
            c.add(Stage::Route, t1.elapsed());
            match own {
                Ok(own) => {
                    // Only now: a sample the CPU path takes keeps its grey before the resize.
                    grey_after_resize(&mut plan);
                    c.samples.fetch_add(1, Ordering::Relaxed);
                    c.hw_samples.fetch_add(1, Ordering::Relaxed);
                    if !scale.is_full() {
                        c.hw_scaled.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Route::Engine(HwSlot {
                        slot: 0,
                        index,
                        len: bytes.len(),
                        own,
                        work: HwWork::Jpeg {
                            region,
                            scale,
                            window: plan.crop.stored(turn, info.width, info.height).window(),
                            turn,
                            plan,
                            parsed: Some(parsed),
                            canvas: canvas.map(Box::new),
                        },
                    }))
                }
                Err(HpuError::OutOfMemory { .. }) if !only_engine => {
                    count_fallback(shared, "no device memory for the bitstream");
                    Ok(Route::Cpu(Some(plan)))
                }
                // A device fault, not a property of the file: `fill` fails the batch.
                Err(e) => Err(SampleErrorKind::Device(e)),
            }
        }
        Err(e @ DecodeError::Unsupported { .. }) if only_engine => Err(SampleErrorKind::Decode(e)),
        Err(DecodeError::Unsupported { reason, .. }) => {
            c.add(Stage::Route, t1.elapsed());
            count_fallback(shared, reason);
            Ok(Route::Cpu(None))
        }
        // Not an image, corrupt or truncated: the CPU decoder reports it, so the reasons are
        // the same on both paths.
        Err(_) => {
            c.add(Stage::Route, t1.elapsed());
            Ok(Route::Cpu(None))
        }
    }
}

/// A classification sample made grey before its geometry (`Image.convert("L")`, a first
/// `Grayscale()`) and nothing else there: for the engine, made grey after its resize instead,
/// first of the pixel ops there (a weighted sum of the channels commutes with the resize's
/// weighted sums of pixels but for rounding, well within the engine's floor).
fn grey_after_resize(plan: &mut SamplePlan) {
    if plan.detect.is_none() && !plan.pre.is_empty() {
        debug_assert!(
            plan.pre.iter().all(PixelOp::makes_grey),
            "checked by canvas_job"
        );
        let pre = std::mem::take(&mut plan.pre);
        plan.pixels.ops.splice(0..0, pre);
    }
}

/// The report's reason for a sample whose pixel ops remap its levels by the image's own
/// ([`PixelOp::amplifies_level_differences`]); a backend of the engine alone runs them there.
const LEVELS_REMAPPED: &str =
    "equalize, autocontrast, posterize and solarize (which can turn a level's \
     difference into many) run on the CPU path";

/// A detection sample's steps before the resize for the engine: `None` when its window is a
/// region of the image and nothing runs before the geometry (the engine's plain decode); a
/// [`CanvasJob`] for photometric steps on the image or a window that shows the zoom-out's fill
/// (with a copy of the plan's `pre`: the plan stays whole, for a fallback), with the region to decode (the whole image when a step needs
/// it or the window shows none of the image, else the window's part of it); the reason when
/// the CPU path must take it (pixel ops the engine does not run before the geometry).
fn canvas_job(
    plan: &SamplePlan,
    width: u32,
    height: u32,
    turn: Orientation,
) -> Result<Option<(CanvasJob, Region)>, &'static str> {
    if plan.interpolation.no_antialias() {
        return Err("a resize without antialiasing runs on the CPU path");
    }
    if plan.interpolation == Interpolation::PilNearest {
        // The engine's nearest is torch's (`floor(i * scale)`); Pillow's samples under each
        // output pixel's centre, another source pixel in about half the rows and columns.
        return Err("Pillow's nearest resize (of a PIL image) runs on the CPU path");
    }
    if plan.interpolation.pillow_only() {
        return Err(
            "Pillow's Lanczos, box or Hamming resize (of a PIL image) runs on the CPU path",
        );
    }
    if plan.padding.is_some() {
        return Err("a crop padded past the image runs on the CPU path");
    }
    if plan.pixels.warped.is_some() {
        return Err("a warp before the crop runs on the CPU path");
    }
    if plan.pixels.cut.is_some() {
        return Err("pixel ops between a resize and its crop run on the CPU path");
    }
    if plan.float_values {
        return Err("a resize of float values (ToTensor first) runs on the CPU path");
    }
    if turn != Orientation::Upright && (plan.detect.is_some() || plan.pixels.placed.is_some()) {
        // Pipelines that turn images have neither (`Pipeline::validate`); kept off the engine's
        // turn, which knows the plain resize alone.
        return Err("an image turned by its EXIF orientation with a canvas runs on the CPU path");
    }
    let Some(d) = &plan.detect else {
        // Grey conversions alone the engine runs after its resize (`grey_after_resize`).
        if !plan.pre.iter().all(PixelOp::makes_grey) {
            return Err("pixel ops before the crop or resize run on the CPU path");
        }
        return Ok(None);
    };
    if plan.pre.is_empty() && d.window_inside_image(width, height) {
        return Ok(None);
    }
    if d.fixed.is_some_and(|f| f.cropped) {
        return Err("detection: a fixed-size crop of a canvas runs on the CPU path");
    }
    if !plan.pre.iter().all(PixelOp::engine_runs_before_geometry) {
        return Err(
            "detection: pixel ops before the geometry other than colour steps run on the CPU path",
        );
    }
    // A window of only fill (rare: a zoom-out, then a crop no box constrains) still decodes
    // the image, so that a damaged file fails as on the CPU path.
    let region = match d.image_part(width, height) {
        Some([x, y, w, h]) if !plan.pre.iter().any(PixelOp::needs_whole_image) => Region {
            x,
            y,
            width: w,
            height: h,
        },
        _ => Region::full(width, height),
    };
    let [wl, wt, ww, wh] = d.window.map(i64::from);
    let (il, it) = (i64::from(d.image_at.0), i64::from(d.image_at.1));
    let job = CanvasJob {
        image: (width, height),
        pre: plan.pre.clone(),
        window: [wl - il, wt - it, ww, wh],
        fill: d.fill,
        interpolation: plan.interpolation,
    };
    Ok(Some((job, region)))
}

/// A sample routed to the media engine. Its bitstream rides in its own slot of the batch buffer
/// when it fits there (one DMA for the whole batch); a larger one was copied to a device buffer
/// of its own (`own`).
pub(super) struct HwSlot {
    pub slot: usize,
    pub index: usize,
    pub len: usize,
    pub own: Option<DeviceBuffer>,
    /// What the engine makes of the bitstream.
    pub work: HwWork,
}

/// What the media engine makes of a sample's bitstream.
#[allow(clippy::large_enum_variant)] // one per engine sample, moved, never stored in bulk
pub(super) enum HwWork {
    /// A JPEG image.
    Jpeg {
        region: Region,
        /// The DCT-domain scale of the decode.
        scale: Scale,
        /// The crop's window in the image as stored.
        window: Window,
        /// How the resized image is turned upright (its EXIF orientation): the plan was drawn
        /// for the turned image, the decode reads the stored one.
        turn: Orientation,
        /// The sample's plan (crop, filter, pixel ops, erase boxes), drawn by the router.
        plan: SamplePlan,
        /// The headers the router's probe parsed, handed to the engine so it does not parse
        /// them again.
        parsed: Option<Parsed>,
        /// A detection sample's steps before the resize, when the engine runs them
        /// (photometric steps on the image, the zoom-out's fill).
        canvas: Option<Box<CanvasJob>>,
    },
    /// A video sample's clips, drawn by the worker; the bitstream is the runs' spans.
    Video(Arc<ClipsJob>),
    /// A folder of frames' clips, drawn by the worker; the bitstream is the kept frames' JPEG
    /// files, one after the other.
    Frames(Arc<FramesJob>),
}

impl HwSlot {
    /// A detection sample's plan (its boxes), for the label slot.
    pub fn detect(&self) -> Option<&crate::augment::DetectPlan> {
        match &self.work {
            HwWork::Jpeg { plan, .. } => plan.detect.as_ref(),
            HwWork::Video(_) | HwWork::Frames(_) => None,
        }
    }
}

pub(super) fn count_fallback(shared: &Shared, reason: &'static str) {
    *lock(&shared.counters.fallbacks).entry(reason).or_default() += 1;
}

/// Copies a bitstream too large for its batch slot to a device buffer of its own (through a
/// host buffer of its own: the rare path, for files larger than a decoded sample).
pub(super) fn upload(hpu: &Hpu, bytes: &[u8]) -> Result<DeviceBuffer, HpuError> {
    let device = hpu.alloc(bytes.len())?;
    let mut host = crate::pinned::PinnedBuffer::new(bytes.len())
        .map_err(|e| HpuError::Dma(format!("host buffer for a bitstream: {e}")))?;
    host.as_mut_slice().copy_from_slice(bytes);
    hpu.copy_to_device(host, &device).wait()?;
    Ok(device)
}
