//! The CPU path: decode on the host, crop and resize (Pillow-exact), the sample's pixel ops, then
//! flip, normalize, cast and erase into the slot of the pinned batch buffer.

use hpuload_decoders::jpeg::{Region, Window};
use hpuload_decoders::orientation::Orientation;
use hpuload_decoders::{CpuDecoder, Decode, DecodeError, ImageInfo, JpegDecoder};

use super::replace::At;
use super::Shared;
use crate::augment::compose_padded;
use crate::augment::detect::compose_window;
use crate::augment::{self, AugmentError, DetectPlan, Resampler, SampleBoxes, SamplePlan};
use crate::cpu_time::CpuClock;
use crate::stage::Stage;
use crate::SampleErrorKind;

/// A worker's reusable memory: nothing is allocated per sample once these have grown.
pub(super) struct Scratch {
    /// The sample's encoded bytes.
    pub file: Vec<u8>,
    /// The router's probe (the media engine's parser).
    pub engine_probe: JpegDecoder,
    /// The CPU path's own.
    pub cpu: CpuScratch,
    /// The video path's own.
    pub video: crate::video::ClipsScratch,
}

/// What the CPU path reuses: the decoder, the decoded image, the resampler, the pixel ops'
/// memory.
pub(super) struct CpuScratch {
    rgb: Vec<u8>,
    /// An image turned upright by its EXIF orientation, before it takes `rgb`'s place.
    turned: Vec<u8>,
    decoder: CpuDecoder,
    resampler: Resampler,
    ops: augment::Scratch,
    /// A detection sample's window of the canvas, when the fill shows in it.
    window: Vec<u8>,
    /// A resampled image placed on the output's fill (a `FixedSizeCrop`'s padding), or warped
    /// before its crop.
    placed: Vec<u8>,
}

impl Scratch {
    pub fn new(shared: &Shared) -> Self {
        let (h, w) = shared.plan.fixed_out().unwrap_or((0, 0));
        let mut decoder = CpuDecoder::with_limits(shared.limits);
        decoder.set_luma(shared.plan.grey_read);
        decoder.set_png_grey(shared.plan.grey_png_weights);
        // A grey read's probe refuses what the luma alone does not give (the CPU decoder
        // then names it).
        let mut engine_probe = JpegDecoder::with_limits(shared.limits);
        engine_probe.set_luma(shared.plan.grey_read);
        Self {
            file: Vec::new(),
            engine_probe,
            cpu: CpuScratch {
                rgb: Vec::new(),
                turned: Vec::new(),
                decoder,
                resampler: Resampler::new(h, w),
                ops: augment::Scratch::default(),
                window: Vec::new(),
                placed: Vec::new(),
            },
            video: crate::video::ClipsScratch::default(),
        }
    }
}

/// Whether `plan`'s output (for an image of `(width, height)`) fits the batch slots: an
/// output at its own size may not, when the image is larger than its annotation says.
pub(super) fn fits(
    shared: &Shared,
    plan: &SamplePlan,
    (width, height): (u32, u32),
) -> Result<(), SampleErrorKind> {
    if shared.stage.bytes(&plan.pixels) <= shared.layout.sample_bytes {
        return Ok(());
    }
    let (h, w) = plan.pixels.size;
    Err(SampleErrorKind::Augment(AugmentError::LargerThanSlot {
        width,
        height,
        out_width: w,
        out_height: h,
    }))
}

/// Decodes `bytes` (sample `index`) on the CPU and writes the augmented sample into `slot`,
/// running `plan` when the router (or the engine) drew it, else the plan drawn here from the
/// image's size (see `decode_image`); returns a detection sample's plan (its boxes).
pub(super) fn decode_into(
    shared: &Shared,
    s: &mut CpuScratch,
    index: usize,
    at: At,
    bytes: &[u8],
    plan: Option<SamplePlan>,
    slot: &mut [u8],
) -> Result<Option<DetectPlan>, SampleErrorKind> {
    let c = &shared.counters;
    let t1 = CpuClock::now();
    let (info, mut plan) = decode_image(shared, s, index, at, bytes, plan)?;
    let len = info.rgb_len();
    let t2 = CpuClock::now();
    c.add(Stage::DecodeCpu, t2 - t1);
    let (w, h) = (info.width as usize, info.height as usize);
    augment::apply(&plan.pre, &mut s.rgb[..len], h, w, &mut s.ops);
    let mut crop = plan.crop;
    // Whether the resize reads the decoded image itself (not one composed on a fill).
    let mut decoded = false;
    let (source, sw, sh) = match (&plan.detect, &plan.padding) {
        (Some(d), _) if !d.window_inside_image(info.width, info.height) => {
            compose_window(d, &s.rgb[..len], info.width, info.height, &mut s.window);
            (&s.window[..], d.window[2], d.window[3])
        }
        (None, Some(padding)) => {
            crop = compose_padded(
                &crop,
                padding,
                &s.rgb[..len],
                info.width,
                info.height,
                &mut s.window,
            );
            (&s.window[..], crop.width as u32, crop.height as u32)
        }
        _ => {
            decoded = true;
            (&s.rgb[..len], info.width, info.height)
        }
    };
    // A grey read's decode is grey until a step before the geometry or a padding's fill
    // could colour it.
    (s.resampler).set_grey(shared.plan.grey_read && plan.pre.is_empty() && decoded);
    let floats = if plan.float_values {
        let values = shared.stage.byte_values();
        s.resampler
            .run_values(source, (sw, sh), &values, &crop, plan.interpolation)
            .map_err(SampleErrorKind::Augment)?
    } else {
        None
    };
    if let Some(values) = floats {
        // `ToTensor()` before the resize: its floats, unrounded, into the slot.
        let t3 = CpuClock::now();
        c.add(Stage::Augment, t3 - t2);
        shared.stage.write_values(values, &plan.pixels, slot);
        c.add(Stage::Collate, t3.elapsed());
    } else {
        let mut resized = s
            .resampler
            .run_with(source, sw, sh, &crop, plan.interpolation)
            .map_err(SampleErrorKind::Augment)?;
        if plan
            .pixels
            .reshape(resized, &mut s.placed, &mut s.window, &mut s.ops)
        {
            resized = &mut s.placed[..];
        }
        shared.stage.ops(resized, &plan.pixels, &mut s.ops);
        let t3 = CpuClock::now();
        c.add(Stage::Augment, t3 - t2);
        shared.stage.write(resized, &plan.pixels, slot);
        c.add(Stage::Collate, t3.elapsed());
    }
    if !shared.views.is_empty() {
        let t4 = CpuClock::now();
        let size = (info.width, info.height);
        for view in &shared.views {
            view.render(
                at.epoch,
                index,
                &s.rgb[..len],
                size,
                &mut s.resampler,
                &mut s.ops,
                slot,
            )
            .map_err(SampleErrorKind::Augment)?;
        }
        c.add(Stage::Augment, t4.elapsed());
    }
    c.samples.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(plan.detect.take())
}

/// The sample's plan: the one the router (or the engine) drew, else drawn here for an image
/// of `size`.
fn plan_for(
    shared: &Shared,
    index: usize,
    at: At,
    size: (u32, u32),
    plan: Option<SamplePlan>,
) -> Result<SamplePlan, SampleErrorKind> {
    if let Some(plan) = plan {
        return Ok(plan);
    }
    let objects = shared.source.objects(index).map(SampleBoxes::from);
    let plan = (shared.plan)
        .sample(shared.draws, at.epoch, at.key(index), size, objects)
        .map_err(SampleErrorKind::Augment)?;
    fits(shared, &plan, size)?;
    Ok(plan)
}

/// Decodes `bytes` into `s.rgb` (laid out as the whole image, turned upright when the pipeline
/// turns images by their EXIF orientation) and returns the image's size as shown and the
/// sample's plan, the resampler set to its output size.
///
/// A baseline JPEG (libjpeg-turbo's pixels, see [`CpuDecoder`]) is decoded only over the
/// pixels the plan's crop reads when nothing else reads the image (no ops before the
/// geometry, no detection canvas, no extra views): the rows after the crop's last are never
/// entropy-decoded and the blocks beside it never transformed. For an image shown turned,
/// that is the crop's window of the image as stored, and only those pixels are turned. Every
/// other file is decoded whole (and turned whole).
fn decode_image(
    shared: &Shared,
    s: &mut CpuScratch,
    index: usize,
    at: At,
    bytes: &[u8],
    plan: Option<SamplePlan>,
) -> Result<(ImageInfo, SamplePlan), SampleErrorKind> {
    let turn = shared
        .plan
        .exif_orientation
        .map_or(Orientation::Upright, |reader| reader.read(bytes));
    if let Some((stored, parsed)) = s.decoder.probe_region(bytes) {
        let shown = turn.turned_size(stored.width, stored.height);
        let plan = plan_for(shared, index, at, shown, plan)?;
        let (oh, ow) = plan.pixels.resampled();
        s.resampler.set_size(oh, ow);
        let part = if plan.pre.is_empty() && plan.detect.is_none() && shared.views.is_empty() {
            s.resampler
                .footprint(shown.0, shown.1, &plan.crop, plan.interpolation)
        } else {
            (0, 0, shown.0, shown.1)
        };
        let window = Window {
            left: part.0.into(),
            top: part.1.into(),
            width: (part.2 - part.0).into(),
            height: (part.3 - part.1).into(),
        };
        let w = turn.stored_window(window, stored.width, stored.height);
        let region = Region {
            x: w.left as u32,
            y: w.top as u32,
            width: w.width as u32,
            height: w.height as u32,
        };
        let len = stored.rgb_len();
        if s.rgb.len() < len {
            s.rgb.resize(len, 0);
        }
        let image = &mut s.rgb[..len];
        let mut part = [part.0, part.1, part.2, part.3].map(|v| v as usize);
        if (s.decoder)
            .decode_region_in_place(bytes, &parsed, region, image)
            .is_err()
        {
            // Damaged data: zune-jpeg, more lenient, decides (and names the damage if it
            // cannot decode either).
            if decode_whole(s, bytes)? != stored {
                return Err(SampleErrorKind::Decode(DecodeError::corrupt(
                    stored.format,
                    "image differs from the probed one",
                )));
            }
            part = [0, 0, shown.0 as usize, shown.1 as usize];
        }
        return Ok((turned(s, stored, turn, part), plan));
    }
    let stored = decode_whole(s, bytes)?;
    let (width, height) = turn.turned_size(stored.width, stored.height);
    let info = turned(s, stored, turn, [0, 0, width as usize, height as usize]);
    let plan = plan_for(shared, index, at, (width, height), plan)?;
    let (oh, ow) = plan.pixels.resampled();
    s.resampler.set_size(oh, ow);
    Ok((info, plan))
}

/// The `stored` image decoded in `s.rgb`, turned upright by `turn` over `part` of the turned
/// image (`[x0, y0, x1, y1]`: the pixels decoded), in `s.rgb`; its size as shown.
fn turned(s: &mut CpuScratch, stored: ImageInfo, turn: Orientation, part: [usize; 4]) -> ImageInfo {
    if turn == Orientation::Upright {
        return stored;
    }
    let len = stored.rgb_len();
    if s.turned.len() < len {
        s.turned.resize(len, 0);
    }
    let (w, h) = (stored.width as usize, stored.height as usize);
    turn.turn_part(&s.rgb, w, h, 3, part, &mut s.turned);
    std::mem::swap(&mut s.rgb, &mut s.turned);
    let (width, height) = turn.turned_size(stored.width, stored.height);
    ImageInfo {
        width,
        height,
        ..stored
    }
}

/// The whole image by the CPU decoder. One call: the headers are parsed once, limits and
/// completeness checked before the decode.
fn decode_whole(s: &mut CpuScratch, bytes: &[u8]) -> Result<ImageInfo, SampleErrorKind> {
    s.decoder
        .decode(bytes, &mut s.rgb)
        .map_err(SampleErrorKind::Decode)
}
