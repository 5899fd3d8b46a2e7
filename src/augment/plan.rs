//! A pipeline validated into a [`Plan`]: each op's own check, then the phase rules (geometry
//! first, pixel ops at the output size, `normalize`, then `random_erasing`; a detection
//! pipeline's box-aware ops before its resize, and no op after it that would move pixels
//! without their boxes, however deeply nested). [`Plan::sample`] then draws each sample's
//! [`SamplePlan`] once, from the counter-based generator keyed by `(seed, epoch, index)`.

use serde::Serialize;

use super::albu::{
    AlbuAffine, AlbuLongestMaxSize, AlbuPadIfNeeded, AlbuSmallestMaxSize, Cv2Border,
};
use super::detect::{
    self, DetectPlan, DrawnResize, FixedSizeCrop, RandomIoUCrop, RandomZoomOut, SampleBoxes,
    SanitizeSpec,
};
use super::erase::Eraser;
use super::error::{AugmentError, PipelineError};
use super::geometry::{
    self, CenterCrop, CropBox, Interpolation, Mirror, Offset, Pad, Padding, PaddingMode, Prescale,
    RandomCrop, RandomResize, RandomResizedCrop, Resize, Size,
};
use super::kernel::{Normalize, ToFloat};
use super::op::{ExifReader, Op, Pipeline};
use super::pixel::PixelOp;
use super::run::{Cut, PixelPlan, Placed, Warped};
use super::spec::OpSpec;
use crate::dtype::Dtype;
use crate::rng::{CounterRng, Stream};
use crate::Error;

/// A detection pipeline's box-aware part, validated: the ops before the resize, each with its
/// position in the pipeline (its random stream).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct DetectSpec {
    /// Pixel ops on the whole decoded image, before the geometry (the SSD preset's
    /// `RandomPhotometricDistort`).
    pub pre: Vec<(usize, Op)>,
    pub zoom: Option<(usize, RandomZoomOut)>,
    pub iou: Option<(usize, RandomIoUCrop)>,
    /// A horizontal flip, and its probability: before the resize, or after a
    /// `random_shortest_size`, `scale_jitter` or `fixed_size_crop` where `flip_after_resize`.
    pub flip: Option<(usize, f64)>,
    pub flip_after_resize: bool,
    /// A resize to a size drawn per sample (the multiscale augmentation's shorter side, or
    /// large-scale jitter).
    pub resize: Option<(usize, DrawnResize)>,
    /// A `fixed_size_crop` after the resize: every output its size.
    pub fixed: Option<(usize, FixedSizeCrop)>,
    pub sanitize: Option<SanitizeSpec>,
    /// `ClampBoundingBoxes`, and whether it stands before the resize.
    pub clamp_before_resize: Option<bool>,
}

impl DetectSpec {
    /// Whether an op that only detection has is there.
    pub fn is_detection(&self) -> bool {
        self.zoom.is_some()
            || self.iou.is_some()
            || self.resize.is_some()
            || self.fixed.is_some()
            || self.sanitize.is_some()
            || self.clamp_before_resize.is_some()
    }
}

/// The geometric part of a pipeline, resolved.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Geometry {
    RandomResizedCrop {
        out: (u32, u32),
        scale: [f64; 2],
        ratio: [f64; 2],
    },
    /// An optional resize, then a center crop of `out` (no larger than the resize), at
    /// albumentations' offset when `floor`.
    CenterCrop {
        resize: Option<Prescale>,
        out: (u32, u32),
        floor: bool,
    },
    /// An optional resize, then a crop of `out` at a drawn offset (no larger than the resize,
    /// unless `padded` says how a shorter side is padded first).
    RandomCrop {
        resize: Option<Prescale>,
        out: (u32, u32),
        padded: Option<CropPad>,
    },
    Resize {
        out: (u32, u32),
    },
    /// A crop of the image itself (`crop`, centred as `floor` says, or at a drawn offset when
    /// `random`), then a resize of it to `out` (torchvision's `CenterCrop(148), Resize(64)`):
    /// the crop is cut out first, so the resize sees only its pixels. `crop` None: the square
    /// of each image's shorter side (`center_square`).
    CropThenResize {
        crop: Option<(u32, u32)>,
        out: (u32, u32),
        random: bool,
        floor: bool,
    },
    /// albumentations' `LongestMaxSize(max_size)` then `PadIfNeeded` to `out`: the resize
    /// centred on a canvas of `fill`.
    Letterbox {
        max_size: u32,
        out: (u32, u32),
        fill: [u8; 3],
        border: Cv2Border,
    },
    /// No crop or resize (a detection pipeline): each output is its sample's window at its
    /// own size.
    Window,
}

/// How a `random_crop` pads a side of the image (or its resize) shorter than the crop before
/// its offset is drawn: at its end to the crop ([`RandomCrop::pad_end`]), or on both ends to
/// `centred_to` ([`RandomCrop::pad_centred_to`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct CropPad {
    pub fill: [u8; 3],
    /// The fill, or the edge repeated or mirrored.
    pub border: Cv2Border,
    /// Centred, to at least this `(height, width)`; None: at the ends, to the crop.
    pub centred_to: Option<(u32, u32)>,
}

/// A validated pipeline: what every sample goes through.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Plan {
    pub geometry: Geometry,
    pub interpolation: Interpolation,
    /// The geometric op's position in the pipeline (its random stream).
    geometry_at: usize,
    /// Pixel ops with their positions in the pipeline.
    pixel: Vec<(usize, Op)>,
    /// A classification pipeline's pixel ops before its geometry, on the whole decoded image.
    pre: Vec<(usize, Op)>,
    /// Flips of the resized image before its crop (torchvision's `Resize(256),
    /// RandomHorizontalFlip(), CenterCrop(224)`): each sample's crop is cut at the offset
    /// mirrored as they fell, and they run on the crop, first of the pixel ops.
    crop_flips: Vec<(usize, Op)>,
    /// Pixel ops between a resize and its crop that are not flips (torchvision's
    /// `Resize(256), RandomRotation(15), CenterCrop(224)`): each sample's whole resize is made,
    /// they run on it (the flips read before them too), and the crop is cut from it.
    mid: Vec<(usize, Op)>,
    /// A warp of the whole resize before its crop, with its position (albumentations'
    /// `ShiftScaleRotate` between `SmallestMaxSize` and the crop).
    pre_crop: Option<(usize, AlbuAffine)>,
    pub normalize: Option<Normalize>,
    erase: Vec<(usize, Eraser)>,
    /// The padding before a crop without a resize (torchvision's `RandomCrop(padding=...)`,
    /// `pad_if_needed`, a `CenterCrop` larger than the image).
    pad: Option<Pad>,
    /// A detection pipeline's box-aware geometry (`None`: classification).
    pub detect: Option<DetectSpec>,
    /// Images are turned upright by their EXIF orientation, read this way, before anything
    /// else ([`Pipeline::exif_orientation`]).
    pub exif_orientation: Option<ExifReader>,
    /// The resize runs on float values, unrounded ([`Pipeline::resize_floats`]).
    pub resize_floats: bool,
    /// Images are read grey, as OpenCV reads them ([`Pipeline::grey_read`]).
    pub grey_read: bool,
    /// The weights of a grey read's colour PNGs ([`Pipeline::grey_png_weights`]).
    pub grey_png_weights: Option<[u16; 3]>,
    /// Images are grey and handed out as one channel ([`Pipeline::single_channel`]).
    pub single_channel: bool,
}

impl Plan {
    /// The channels of each output pixel: 1 for grey images handed out as one
    /// ([`Plan::single_channel`]), else 3.
    pub fn channels(&self) -> usize {
        if self.single_channel {
            1
        } else {
            3
        }
    }
}

/// What [`Pipeline::plan_over`] knows of a dataset's images.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Over {
    /// They have boxes (a detection dataset).
    pub boxes: bool,
    /// They have one channel (an array of grey images).
    pub grey: bool,
}

/// Every random choice for one sample: a pure function of `(seed, epoch, index)` and the
/// image's size. Drawn once, by whichever path first knows the image's size, and carried
/// whole to the path that runs it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SamplePlan {
    /// The window of the decoded image resampled to the output size.
    pub crop: CropBox,
    /// The resampling filter (never `Random`: drawn).
    pub interpolation: Interpolation,
    /// The rest.
    #[serde(flatten)]
    pub pixels: PixelPlan,
    /// Pixel ops on the whole decoded image before the geometry (a detection pipeline's
    /// photometric steps, a classification pipeline's steps before its crop or resize).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pre: Vec<PixelOp>,
    /// A detection pipeline's canvas, window and boxes. When the window shows the canvas's
    /// fill, `crop` is the whole window, composed first on the CPU path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detect: Option<DetectPlan>,
    /// A padded crop's padding, when its window reaches past the image (`crop` is then in
    /// the image's pixels, partly outside it; the CPU path composes it first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub padding: Option<Padding>,
    /// The resize runs torch's float kernel on the floats the bytes become and its values
    /// are written unrounded ([`Pipeline::resize_floats`], with a float filter): the CPU path
    /// only.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub float_values: bool,
    /// A padded `random_crop`'s drawn resize and crop, or an unpadded `random_crop`'s or
    /// `center_crop`'s of the resize, in integers, for what follows the image through them (a
    /// segmentation mask).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resized_crop: Option<ResizedCrop>,
}

/// Where a sample's crop after its resize was drawn ([`SamplePlan::resized_crop`]): the image
/// resized to `resized`, flipped as `hflip` and `vflip` say, padded (`before` it on each
/// axis, the rest at its ends) to at least the crop, then cut at `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ResizedCrop {
    /// The resize's `(height, width)`.
    pub resized: (u32, u32),
    /// The crop's `(top, left)` in the flipped, padded resize.
    pub at: (u32, u32),
    /// Mirrored left to right before the padding.
    pub hflip: bool,
    /// Mirrored top to bottom before the padding.
    pub vflip: bool,
    /// The padding above and to the left of the resize, `(top, left)` (albumentations'
    /// centred `PadIfNeeded`); `(0, 0)` where it is padded at its ends only.
    pub before: (u32, u32),
}

/// The phase rules' state while the ops are read in order.
#[derive(Default)]
struct Phases {
    geometry: Option<(Geometry, Interpolation, usize)>,
    /// A resize of the shorter side (fixed, or drawn by `random_resize`) waiting for its crop.
    resize_short: Option<(Prescale, Interpolation)>,
    /// A `center_square` read (its position) waiting for its resize.
    square: Option<usize>,
    /// A warp read between `albu_smallest_max_size` and its crop.
    pre_crop: Option<(usize, AlbuAffine)>,
    pixel: Vec<(usize, Op)>,
    /// Flips read between a resize and its crop.
    crop_flips: Vec<(usize, Op)>,
    /// Pixel ops read between a resize and its crop, from the first that is not a flip on.
    mid: Vec<(usize, Op)>,
    /// Pixel ops read before any crop, resize or box-moving op: a classification pipeline
    /// runs them on the whole decoded image (albumentations' steps before its resize).
    before: Vec<(usize, Op)>,
    normalize: Option<Normalize>,
    erase: Vec<(usize, Eraser)>,
    pad: Option<Pad>,
    det: DetectSpec,
}

impl Phases {
    /// Whether the op may still come: nothing it must precede has been read.
    fn late(&self, what: &str) -> Result<(), PipelineError> {
        if !self.erase.is_empty() {
            Err(PipelineError::Order(format!(
                "{what} after random_erasing (erasing comes last)"
            )))
        } else if self.normalize.is_some() {
            Err(PipelineError::Order(format!(
                "{what} after normalize (hpuload runs pixel ops on the image before it)"
            )))
        } else {
            Ok(())
        }
    }

    /// Whether the output size is settled: a crop or resize read, a drawn size or a
    /// fixed-size crop.
    fn geometry_done(&self) -> bool {
        self.geometry.is_some()
            || self.square.is_some()
            || self.det.resize.is_some()
            || self.det.fixed.is_some()
    }

    fn boxes_moved(&self) -> bool {
        self.det.zoom.is_some()
            || self.det.iou.is_some()
            || self.det.flip.is_some()
            || self.det.resize.is_some()
            || self.det.fixed.is_some()
    }

    /// Reads the op at position `at`.
    fn read(&mut self, at: usize, op: &Op) -> Result<(), PipelineError> {
        match op {
            Op::CenterSquare(_)
                if !self.geometry_done()
                    && self.resize_short.is_none()
                    && self.pixel.is_empty() =>
            {
                self.late("center_square")?;
                self.square = Some(at);
            }
            // The square's resize: one size for every image, from the square cut out first.
            &Op::Resize(Resize {
                size,
                interpolation,
            }) if self.square.is_some() && self.pixel.is_empty() => {
                self.late("resize")?;
                self.square = None;
                let geometry = Geometry::CropThenResize {
                    crop: None,
                    out: size.hw(),
                    random: false,
                    floor: true,
                };
                self.geometry = Some((geometry, interpolation, at));
            }
            Op::CenterSquare(_) => {
                return Err(PipelineError::Order(
                    "center_square comes first, before any other crop, resize or pixel op".into(),
                ));
            }
            &Op::RandomResizedCrop(RandomResizedCrop {
                size,
                scale,
                ratio,
                interpolation,
            }) => {
                if self.geometry_done() || self.resize_short.is_some() || !self.pixel.is_empty() {
                    return Err(PipelineError::Order(
                        "random_resized_crop must be the only geometric op, first".into(),
                    ));
                }
                self.late("random_resized_crop")?;
                let out = size.hw();
                self.geometry = Some((
                    Geometry::RandomResizedCrop { out, scale, ratio },
                    interpolation,
                    at,
                ));
            }
            &Op::Resize(Resize {
                size: Size::Square(s),
                interpolation,
            }) if !self.geometry_done() && self.resize_short.is_none() && self.pixel.is_empty() => {
                self.late("resize")?;
                self.resize_short = Some((Prescale::Short(s), interpolation));
            }
            &Op::AlbuSmallestMaxSize(AlbuSmallestMaxSize {
                max_size,
                interpolation,
            }) if !self.geometry_done() && self.resize_short.is_none() && self.pixel.is_empty() => {
                self.late("albu_smallest_max_size")?;
                self.resize_short = Some((Prescale::ShortRounded(max_size), interpolation));
            }
            &Op::AlbuLongestMaxSize(AlbuLongestMaxSize {
                max_size,
                interpolation,
            }) if !self.geometry_done() && self.resize_short.is_none() && self.pixel.is_empty() => {
                self.late("albu_longest_max_size")?;
                self.resize_short = Some((Prescale::LongRounded(max_size), interpolation));
            }
            &Op::AlbuPadIfNeeded(AlbuPadIfNeeded {
                min_height,
                min_width,
                fill,
                border,
            }) => {
                let Some((Prescale::LongRounded(s), interpolation)) = self.resize_short else {
                    return Err(PipelineError::Order(
                        "albu_pad_if_needed follows albu_longest_max_size (one size for every image)"
                            .into(),
                    ));
                };
                if min_height < s || min_width < s {
                    return Err(PipelineError::Shape(format!(
                        "albu_pad_if_needed to {min_height}x{min_width} leaves images whose longer side albu_longest_max_size made {s} larger (batch shapes must be static)"
                    )));
                }
                self.late("albu_pad_if_needed")?;
                self.resize_short = None;
                let geometry = Geometry::Letterbox {
                    max_size: s,
                    out: (min_height, min_width),
                    fill,
                    border,
                };
                self.geometry = Some((geometry, interpolation, at));
            }
            &Op::RandomResize(RandomResize {
                min_size,
                max_size,
                interpolation,
            }) if !self.geometry_done() && self.resize_short.is_none() && self.pixel.is_empty() => {
                self.late("random_resize")?;
                self.resize_short = Some((Prescale::ShortIn(min_size, max_size), interpolation));
            }
            &Op::Resize(Resize {
                size: size @ Size::HeightWidth(_),
                interpolation,
            }) if !self.geometry_done() && self.resize_short.is_none() && self.pixel.is_empty() => {
                self.late("resize")?;
                let out = size.hw();
                self.geometry = Some((Geometry::Resize { out }, interpolation, at));
            }
            &(Op::CenterCrop(CenterCrop { size, .. })
            | Op::RandomCrop(RandomCrop { size, .. }))
                if !self.geometry_done() && self.pixel.is_empty() =>
            {
                let name = op.name();
                self.late(name)?;
                if let Some((Prescale::LongRounded(_), _)) = self.resize_short {
                    return Err(PipelineError::Order(format!(
                        "{name} after albu_longest_max_size (albu_pad_if_needed follows it)"
                    )));
                }
                self.pad = match op {
                    Op::RandomCrop(c) => c.pad(),
                    Op::CenterCrop(c) if c.pad => Some(Pad::default()),
                    _ => None,
                };
                if self.pad.is_some()
                    && self.resize_short.is_some()
                    && matches!(op, Op::RandomCrop(_))
                {
                    return Err(padding_after_resize(name));
                }
                let pad_end = matches!(op, Op::RandomCrop(c) if c.pad_end);
                if matches!(op, Op::RandomCrop(c) if c.pad_centred_to.is_some())
                    && self.resize_short.is_some()
                {
                    return Err(padding_after_resize(name));
                }
                let out = size.hw();
                if let Some((
                    Prescale::Short(s) | Prescale::ShortRounded(s) | Prescale::ShortIn(s, _),
                    _,
                )) = self.resize_short.filter(|_| !pad_end)
                {
                    if out.0 > s || out.1 > s {
                        return Err(PipelineError::Shape(format!(
                            "{name} {out:?} is larger than the resized shorter side {s}"
                        )));
                    }
                }
                let (resize, interpolation) = match self.resize_short.take() {
                    Some((s, i)) => (Some(s), i),
                    None => (None, Interpolation::Bilinear),
                };
                self.geometry = Some((crop_geometry(op, resize, out), interpolation, at));
            }
            // torchvision's `Resize((h, w))` then `CenterCrop(c)` (what the Hugging Face image
            // processors' sizes give): a window of the resized image.
            &(Op::CenterCrop(CenterCrop { size, .. })
            | Op::RandomCrop(RandomCrop { size, .. }))
                if matches!(self.geometry, Some((Geometry::Resize { .. }, _, _))) =>
            {
                let name = op.name();
                self.late(name)?;
                if matches!(op, Op::RandomCrop(c) if c.pad().is_some() || c.pad_end || c.pad_centred_to.is_some())
                {
                    return Err(padding_after_resize(name));
                }
                let Some((Geometry::Resize { out: (h, w) }, interpolation, resize_at)) =
                    self.geometry
                else {
                    unreachable!("matched above")
                };
                let out = size.hw();
                if out.0 > h || out.1 > w {
                    return Err(PipelineError::Shape(format!(
                        "{name} {out:?} is larger than the resize to {:?} (torchvision would pad the image; hpuload does not)",
                        (h, w)
                    )));
                }
                if out != (h, w) {
                    // Flips read since the resize come before the crop; other pixel ops run
                    // on the whole resize, then the crop is cut.
                    if self.pixel.iter().all(|(_, op)| op.is_flip()) {
                        self.crop_flips = std::mem::take(&mut self.pixel);
                    } else {
                        self.mid = std::mem::take(&mut self.pixel);
                        if let Some((_, op)) = self.mid.iter().find(|(_, op)| op.needs_square()) {
                            return Err(between_resize_and_crop(op.name()));
                        }
                    }
                    let resize = Some(Prescale::Exact(h, w));
                    let geometry = crop_geometry(op, resize, out);
                    // The crop's random stream is its own position in the pipeline.
                    let at = if matches!(op, Op::RandomCrop(_)) {
                        at
                    } else {
                        resize_at
                    };
                    self.geometry = Some((geometry, interpolation, at));
                }
            }
            &Op::Resize(Resize {
                size,
                interpolation,
            }) if self.pixel.is_empty()
                && matches!(
                    self.geometry,
                    Some((
                        Geometry::CenterCrop { resize: None, .. }
                            | Geometry::RandomCrop {
                                resize: None,
                                padded: None,
                                ..
                            },
                        _,
                        _
                    ))
                ) =>
            {
                self.late("resize")?;
                let (crop, random, floor) = match self.geometry {
                    Some((Geometry::CenterCrop { out, floor, .. }, _, _)) => (out, false, floor),
                    Some((Geometry::RandomCrop { out, .. }, _, _)) => (out, true, false),
                    _ => unreachable!("matched above"),
                };
                let out = match size {
                    Size::Square(s) => {
                        let (w, h) = geometry::resized_size(crop.1, crop.0, s);
                        (h, w)
                    }
                    Size::HeightWidth(_) => size.hw(),
                };
                let geometry = Geometry::CropThenResize {
                    crop: Some(crop),
                    out,
                    random,
                    floor,
                };
                self.geometry = Some((geometry, interpolation, at));
            }
            Op::Resize(_)
            | Op::RandomResize(_)
            | Op::AlbuSmallestMaxSize(_)
            | Op::AlbuLongestMaxSize(_)
            | Op::CenterCrop(_)
            | Op::RandomCrop(_) => {
                return Err(PipelineError::Order("supported geometry: random_resized_crop, or resize, random_resize or albu_smallest_max_size then center_crop or random_crop (albu_affine may come between albu_smallest_max_size and its crop), or resize to [h, w] (then a center_crop or random_crop), before any pixel op".into()));
            }
            Op::Normalize(n) => {
                self.late("normalize")?;
                self.normalize = Some(*n);
            }
            Op::RandomErasing(e) => self.erase.push((at, Eraser::Boxes(*e))),
            Op::CoarseDropout(d) => self.erase.push((at, Eraser::Holes(*d))),
            Op::RandomZoomOut(z) => {
                if self.geometry_done()
                    || self.det.iou.is_some()
                    || self.det.flip.is_some()
                    || self.det.clamp_before_resize.is_some()
                {
                    return Err(PipelineError::Order(
                        "random_zoom_out comes before random_iou_crop, the flip, clamp_bounding_boxes and the resize"
                            .into(),
                    ));
                }
                self.det.zoom = Some((at, *z));
            }
            Op::RandomIoUCrop(c) => {
                if self.geometry_done()
                    || self.det.flip.is_some()
                    || self.det.clamp_before_resize.is_some()
                {
                    return Err(PipelineError::Order(
                        "random_iou_crop comes before the flip, clamp_bounding_boxes and the resize"
                            .into(),
                    ));
                }
                self.det.iou = Some((at, c.clone()));
            }
            Op::RandomShortestSize(_) | Op::ScaleJitter(_) => {
                let name = op.name();
                // After the IoU crop the window could be a sliver, and its resize unbounded.
                if self.geometry_done() || self.det.iou.is_some() || !self.pixel.is_empty() {
                    return Err(PipelineError::Order(format!(
                        "{name} is the one resize, before any pixel op and not after random_iou_crop"
                    )));
                }
                self.late(name)?;
                let resize = match op {
                    Op::RandomShortestSize(r) => DrawnResize::Shortest(r.clone()),
                    Op::ScaleJitter(j) => DrawnResize::Jitter(j.clone()),
                    _ => unreachable!("matched above"),
                };
                self.det.resize = Some((at, resize));
            }
            &Op::FixedSizeCrop(f) => {
                // The flip must follow it: the padding is mirrored with the image.
                if self.geometry.is_some()
                    || self.det.fixed.is_some()
                    || self.det.flip.is_some()
                    || !self.pixel.is_empty()
                {
                    return Err(PipelineError::Order(
                        "fixed_size_crop follows the resize (random_shortest_size or scale_jitter, if any) and comes before the flip and any pixel op".into(),
                    ));
                }
                self.late("fixed_size_crop")?;
                self.det.fixed = Some((at, f));
            }
            Op::ClampBoundingBoxes(_) => {
                if self.det.sanitize.is_some() || self.det.clamp_before_resize.is_some() {
                    return Err(PipelineError::Order(
                        "clamp_bounding_boxes comes once, before sanitize_bounding_boxes".into(),
                    ));
                }
                self.det.clamp_before_resize = Some(!self.geometry_done());
            }
            &Op::SanitizeBoundingBoxes(spec) => {
                self.det.sanitize = Some(SanitizeSpec {
                    spec,
                    before_resize: !self.geometry_done(),
                });
            }
            // A flip of the resized image before its crop: the crop is mirrored.
            Op::RandomHorizontalFlip(_) | Op::RandomVerticalFlip(_)
                if self.resize_short.is_some() && self.pre_crop.is_none() =>
            {
                self.late(op.name())?;
                match self.mid.is_empty() {
                    true => self.crop_flips.push((at, op.clone())),
                    false => self.mid.push((at, op.clone())),
                }
            }
            Op::RandomHorizontalFlip(f) if !self.geometry_done() && self.pixel.is_empty() => {
                self.det.flip = Some((at, f.p));
            }
            // The multiscale and lsj augmentations' flip, after the resize (and the fixed-size
            // crop): the boxes are mirrored in the output's width, as torchvision does there.
            Op::RandomHorizontalFlip(f)
                if (self.det.resize.is_some() || self.det.fixed.is_some())
                    && self.det.flip.is_none()
                    && self.geometry.is_none()
                    && self.pixel.is_empty() =>
            {
                self.det.flip = Some((at, f.p));
                self.det.flip_after_resize = true;
            }
            // albumentations warps the whole `SmallestMaxSize` output before its crop.
            Op::AlbuAffine(affine)
                if matches!(self.resize_short, Some((Prescale::ShortRounded(_), _)))
                    && self.pre_crop.is_none()
                    && self.crop_flips.is_empty()
                    && self.mid.is_empty() =>
            {
                self.late("albu_affine")?;
                self.pre_crop = Some((at, *affine));
            }
            Op::RandomPhotometricDistort(_) if !self.geometry_done() && !self.boxes_moved() => {
                self.det.pre.push((at, op.clone()));
            }
            pixel_op => {
                debug_assert!(pixel_op.kind().is_pixel(), "{pixel_op:?}");
                // Before the geometry: on the whole decoded image (a classification
                // pipeline's), unless it turns rows into columns (a shape per image). Between
                // a resize of the shorter side and its crop, on the whole resize.
                if !self.geometry_done() && !self.boxes_moved() {
                    if self.resize_short.is_some() {
                        let name = pixel_op.name();
                        if self.pre_crop.is_some() {
                            return Err(PipelineError::Order(format!(
                                "{name} between albu_affine and its crop (hpuload warps the resize, then cuts the crop)"
                            )));
                        }
                        self.late(name)?;
                        if pixel_op.needs_square() {
                            return Err(between_resize_and_crop(name));
                        }
                        // The flips read before it run on the whole resize too, in order.
                        self.mid.append(&mut self.crop_flips);
                        self.mid.push((at, pixel_op.clone()));
                        return Ok(());
                    }
                    // Not after `normalize` or erasing: hpuload runs them last.
                    self.late(pixel_op.name())?;
                    if pixel_op.needs_square() {
                        return Err(PipelineError::Shape(format!(
                            "{} before the crop or resize turns rows into columns: each image would get its own shape; put it after",
                            pixel_op.name()
                        )));
                    }
                    self.before.push((at, pixel_op.clone()));
                    return Ok(());
                }
                // A detection pipeline without a resize runs its pixel ops on the window.
                self.late(pixel_op.name())?;
                self.pixel.push((at, pixel_op.clone()));
            }
        }
        Ok(())
    }
}

/// The error for an op between a resize and its crop that turns rows into columns.
fn between_resize_and_crop(name: &str) -> PipelineError {
    PipelineError::Shape(format!(
        "{name} between a resize and its crop turns rows into columns: each image would get its own shape; put it after the crop"
    ))
}

/// The geometry of a `center_crop` or `random_crop` (`op`) of `out` after `resize`.
fn crop_geometry(op: &Op, resize: Option<Prescale>, out: (u32, u32)) -> Geometry {
    match op {
        Op::CenterCrop(c) => Geometry::CenterCrop {
            resize,
            out,
            floor: c.floor,
        },
        Op::RandomCrop(c) => Geometry::RandomCrop {
            resize,
            out,
            padded: (c.pad_end || c.pad_centred_to.is_some()).then(|| CropPad {
                fill: c.fill,
                border: c.padding_mode.cv2(),
                centred_to: c.pad_centred_to.map(|to| to.hw()),
            }),
        },
        _ => unreachable!("crop_geometry of a crop"),
    }
}

/// A crop that pads after a resize: hpuload pads the decoded image only.
fn padding_after_resize(name: &str) -> PipelineError {
    PipelineError::Shape(format!(
        "{name} with padding after a resize (hpuload pads the image itself only)"
    ))
}

impl Pipeline {
    /// Validates the ops and resolves them into a per-sample plan for `dtype`.
    pub(crate) fn plan(&self, dtype: Dtype) -> Result<Plan, Error> {
        self.plan_over(dtype, Over::default())
    }

    /// [`Pipeline::plan`] for the images of a dataset `over` describes: with boxes, the plan
    /// is a detection one whatever its ops, so that a resize or flip moves the boxes too (a
    /// crop that would not is refused); grey ones may be handed out as one channel without a
    /// grey conversion.
    pub(crate) fn plan_over(&self, dtype: Dtype, over: Over) -> Result<Plan, Error> {
        self.validate(dtype, over)
            .map_err(|reason| Error::Pipeline {
                name: self.name.clone(),
                reason,
            })
    }

    fn validate(&self, dtype: Dtype, Over { boxes, grey }: Over) -> Result<Plan, PipelineError> {
        if self.single_channel
            && !grey
            && !self.grey_read
            && !self
                .ops
                .iter()
                .any(|op| matches!(op, Op::PilGrayscale(g) if g.p >= 1.0))
        {
            return Err(PipelineError::Shape(
                "single_channel needs grey images: grey_read, a pil_grayscale op with p = 1 or a source of one channel".into(),
            ));
        }
        match self.grey_png_weights {
            Some(_) if !self.grey_read => {
                return Err(PipelineError::Shape(
                    "grey_png_weights are for a grey read (grey_read)".into(),
                ))
            }
            Some(w) if w.iter().map(|&w| u32::from(w)).sum::<u32>() != 32768 => {
                return Err(PipelineError::Shape(format!(
                    "grey_png_weights {w:?} must add up to 32768 (libpng's fixed point)"
                )))
            }
            _ => {}
        }
        let mut phases = Phases::default();
        for (at, op) in self.ops.iter().enumerate() {
            op.check()?;
            phases.read(at, op)?;
        }
        let Phases {
            geometry,
            resize_short,
            square,
            pre_crop,
            pixel,
            crop_flips,
            mid,
            mut before,
            normalize,
            erase,
            pad,
            mut det,
        } = phases;
        if square.is_some() {
            return Err(PipelineError::Shape("center_square alone gives a different shape per image; add a resize right after it (batch shapes must be static)".into()));
        }
        match resize_short {
            Some((Prescale::LongRounded(_), _)) => return Err(PipelineError::Shape("albu_longest_max_size alone gives a different shape per image; add albu_pad_if_needed (batch shapes must be static)".into())),
            Some(_) => return Err(PipelineError::Shape("resize of the shorter side alone gives a different shape per image; add center_crop (batch shapes must be static)".into())),
            None => {}
        }
        // No crop or resize: each image keeps its (detection) window's size, or the size
        // drawn for it.
        let geometry = geometry.unwrap_or(match &det.resize {
            Some((at, r)) => (Geometry::Window, r.interpolation(), *at),
            None => (Geometry::Window, Interpolation::Bilinear, 0),
        });
        let natural = geometry.0 == Geometry::Window;
        let detect = if det.is_detection() || natural || boxes {
            if !matches!(geometry.0, Geometry::Resize { .. } | Geometry::Window) {
                return Err(PipelineError::Shape("a detection pipeline ends its geometry with resize [h, w] (one size per batch), or has no resize (each image keeps its window's size)".into()));
            }
            // Ops that move pixels would leave the boxes behind, however deeply they are
            // nested.
            if let Some(mover) = pixel
                .iter()
                .chain(&before)
                .find_map(|(_, op)| op.moving_part())
            {
                return Err(PipelineError::MovesPixelsWithoutBoxes { mover });
            }
            // Pixel ops before the geometry run on the whole decoded image, in their order
            // among the photometric distortions there (a detection dataset's; a pipeline
            // without a crop or resize for images alone keeps its refusal).
            if let Some((_, op)) = before.first().filter(|_| !det.is_detection() && !boxes) {
                return Err(PipelineError::Order(format!(
                    "{} must follow the crop or resize that sets the output size",
                    op.name()
                )));
            }
            det.pre.append(&mut before);
            det.pre.sort_by_key(|(at, _)| *at);
            if self.grey_read {
                return Err(PipelineError::Shape(
                    "grey_read is for classification pipelines (images read grey as OpenCV reads them)".into(),
                ));
            }
            if self.exif_orientation {
                return Err(PipelineError::Shape(
                    if natural && !det.is_detection() && !boxes {
                        "a pipeline without a crop or resize gives each image its own size (a detection pipeline's), and exif_orientation is for classification pipelines: add a crop or resize".into()
                    } else {
                        "exif_orientation turns images, which would leave a detection dataset's boxes (given for the images as stored) behind".into()
                    },
                ));
            }
            Some(det)
        } else if det.flip.is_some() || !det.pre.is_empty() {
            return Err(PipelineError::Order("ops before the crop or resize are for detection pipelines (with random_zoom_out, random_iou_crop or sanitize_bounding_boxes); put them after it".into()));
        } else {
            None
        };
        let (geometry, interpolation, geometry_at) = geometry;
        if dtype == Dtype::I64 {
            return Err(PipelineError::Dtype(
                "i64 is a label type; choose u8, f16, bf16 or f32 for images".into(),
            ));
        }
        if dtype == Dtype::U8 && normalize.is_some() {
            return Err(PipelineError::Dtype("u8 output cannot hold normalized values: remove normalize or choose f32, f16 or bf16".into()));
        }
        if dtype == Dtype::U8 && erase.iter().any(|(_, e)| e.fills_randomly()) {
            return Err(PipelineError::Dtype(
                "random_erasing with random values needs a float output dtype".into(),
            ));
        }
        if matches!(
            geometry,
            Geometry::RandomCrop {
                padded: Some(_),
                ..
            }
        ) && (!mid.is_empty() || pre_crop.is_some())
        {
            return Err(PipelineError::Order(
                "random_crop with padding: only flips may come between the resize and its crop"
                    .into(),
            ));
        }
        // Padding applies to a crop of the image itself (no resize before it).
        let pad = pad.filter(|_| {
            matches!(
                geometry,
                Geometry::CenterCrop { resize: None, .. }
                    | Geometry::RandomCrop { resize: None, .. }
                    | Geometry::CropThenResize { .. }
            )
        });
        let plan = Plan {
            geometry,
            interpolation,
            geometry_at,
            pixel,
            pre: before,
            crop_flips,
            mid,
            pre_crop,
            normalize,
            erase,
            pad,
            detect,
            exif_orientation: self.exif_orientation.then_some(self.exif_reader),
            resize_floats: self.resize_floats,
            grey_read: self.grey_read,
            grey_png_weights: self.grey_png_weights,
            single_channel: self.single_channel,
        };
        if self.resize_floats {
            plan.check_resize_floats(dtype)?;
        } else if plan.normalize.is_some_and(|n| n.before_resize) {
            return Err(PipelineError::Order(
                "normalize's before_resize is for a resize of float values (resize_floats)".into(),
            ));
        }
        // A transpose or quarter turn of a non-square image changes its shape per sample.
        if let Some((_, op)) = plan.pixel.iter().find(|(_, op)| op.needs_square()) {
            if !matches!(plan.fixed_out(), Some((h, w)) if h == w) {
                return Err(PipelineError::Shape(format!(
                    "{} turns rows into columns: the output must be square (batch shapes must be static)",
                    op.name()
                )));
            }
        }
        Ok(plan)
    }
}

impl Plan {
    /// Refuses what a resize of float values ([`Pipeline::resize_floats`]) cannot hold: a
    /// detection pipeline, a filter that is not torch's float kernel (or nearest, which
    /// copies), pixel ops after the geometry other than flips (torch's float kernels do not
    /// round; hpuload's pixel ops are byte ones), a byte output, a padding filled with
    /// another value than zero (torch pads the floats with the fill as it is).
    fn check_resize_floats(&self, dtype: Dtype) -> Result<(), PipelineError> {
        let refuse = |what: &str| Err(PipelineError::Shape(format!("resize_floats: {what}")));
        let crops_only = matches!(
            self.geometry,
            Geometry::CenterCrop { resize: None, .. } | Geometry::RandomCrop { resize: None, .. }
        );
        if self.detect.is_some() {
            return refuse("detection pipelines resize bytes");
        }
        if !crops_only
            && !matches!(
                self.interpolation,
                Interpolation::FloatBilinear | Interpolation::FloatBicubic | Interpolation::Nearest
            )
        {
            return refuse(
                "the resize's interpolation must be float_bilinear, float_bicubic or nearest",
            );
        }
        if let Some((_, op)) = self
            .pixel
            .iter()
            .chain(&self.mid)
            .find(|(_, op)| !op.is_flip())
        {
            return refuse(&format!(
                "{} after the resize of float values (only flips run there)",
                op.name()
            ));
        }
        if self.pre_crop.is_some() {
            return refuse("a warp before the crop runs on bytes");
        }
        if dtype == Dtype::U8 {
            return refuse("the output dtype must be a float one");
        }
        if self
            .normalize
            .is_some_and(|n| n.to_float == ToFloat::ScaledStats)
        {
            return refuse("normalize's scaled_stats starts from the bytes");
        }
        if self
            .normalize
            .is_some_and(|n| matches!(n.to_float, ToFloat::Table(_)))
        {
            return refuse("normalize's table gives the bytes' values");
        }
        if self
            .pad
            .is_some_and(|p| p.mode == PaddingMode::Constant && p.fill != [0; 3])
        {
            return refuse("a padding filled with another value than zero");
        }
        Ok(())
    }

    /// Whether a classification pipeline has pixel ops before its geometry (run on the whole
    /// decoded image).
    pub fn has_pre_ops(&self) -> bool {
        !self.pre.is_empty()
    }

    /// Output `(height, width)`, the same for every sample; `None` when each sample keeps its
    /// window's size.
    pub fn fixed_out(&self) -> Option<(u32, u32)> {
        match self.geometry {
            Geometry::RandomResizedCrop { out, .. }
            | Geometry::CenterCrop { out, .. }
            | Geometry::RandomCrop { out, .. }
            | Geometry::Letterbox { out, .. }
            | Geometry::CropThenResize { out, .. }
            | Geometry::Resize { out } => Some(out),
            Geometry::Window => self
                .detect
                .as_ref()
                .and_then(|d| d.fixed.as_ref())
                .map(|(_, f)| (f.size[0], f.size[1])),
        }
    }

    /// Whether the resize is reshaped into the output: warped whole before its crop
    /// ([`Warped`]), changed whole by pixel ops before its crop ([`Cut`]) or placed on a
    /// canvas ([`Placed`], albumentations' `PadIfNeeded`). The
    /// image paths do it; the video paths resample each frame to the output directly.
    pub fn reshapes_resize(&self) -> bool {
        self.pre_crop.is_some()
            || !self.mid.is_empty()
            || matches!(
                self.geometry,
                Geometry::Letterbox { .. }
                    | Geometry::RandomCrop {
                        padded: Some(_),
                        ..
                    }
            )
    }

    /// The most pixels an output can have for a `width`x`height` image.
    pub fn max_pixels(&self, width: u32, height: u32) -> u64 {
        let (h, w) = match self.fixed_out() {
            Some(out) => out,
            None => {
                let detect = self.detect.as_ref();
                let zoom = detect.and_then(|d| d.zoom.as_ref());
                let (w, h) = detect::largest_canvas(zoom.map(|(_, z)| z), width, height);
                match detect.and_then(|d| d.resize.as_ref()) {
                    Some((_, r)) if zoom.is_some() => r.largest(width, height, true),
                    Some((_, r)) => r.largest(w, h, false),
                    None => (h, w),
                }
            }
        };
        u64::from(h) * u64::from(w)
    }

    /// albumentations' warp of the whole resize before its crop, when the pipeline has one
    /// and it comes up: the window that resamples the whole resize of a `width`x`height`
    /// image, and the warp (drawn on the resize's size, as albumentations draws it on the image
    /// its step is given) with the crop's place in it.
    fn warp_then_crop(
        &self,
        seed: u64,
        epoch: u64,
        index: usize,
        (width, height): (u32, u32),
    ) -> Result<Option<(CropBox, Warped)>, AugmentError> {
        let Some((at, affine)) = &self.pre_crop else {
            return Ok(None);
        };
        let Some(geometry::CropOfResize {
            resized: (rw, rh),
            at: corner,
        }) = self.crop_of_resize(seed, epoch, index, (width, height))?
        else {
            return Ok(None);
        };
        let mut drawn = Vec::new();
        let mut rng = CounterRng::for_op(seed, epoch, index as u64, *at);
        affine.draw(&mut rng, (rh, rw), &mut drawn);
        let Some(PixelOp::Cv2Affine {
            inverse,
            border,
            fill,
            ..
        }) = drawn.pop()
        else {
            return Ok(None);
        };
        let whole = geometry::window_of_resize((width, height), (rh, rw), (0, 0), (rh, rw));
        let warped = Warped {
            content: (rh, rw),
            at: corner,
            inverse,
            border,
            fill,
        };
        Ok(Some((whole, warped)))
    }

    /// Where the crop after a resize is cut for a `width`x`height` image, drawn from the
    /// crop's stream; `None` when the geometry is no crop of a resize.
    fn crop_of_resize(
        &self,
        seed: u64,
        epoch: u64,
        index: usize,
        (width, height): (u32, u32),
    ) -> Result<Option<geometry::CropOfResize>, AugmentError> {
        let (resize, out, offset) = match self.geometry {
            Geometry::CenterCrop { resize, out, floor } => (
                resize,
                out,
                if floor {
                    Offset::Floor
                } else {
                    Offset::Centred
                },
            ),
            Geometry::RandomCrop { resize, out, .. } => (resize, out, Offset::Drawn),
            _ => return Ok(None),
        };
        let mut rng = CounterRng::new(seed, epoch, index as u64, Stream::Crop);
        geometry::crop_of_resize(width, height, resize, out, offset, &mut rng).map(Some)
    }

    /// The pixel ops between a resize and its crop, when the pipeline has them: the window
    /// that resamples the whole resize of a `width`x`height` image, and the ops (drawn by
    /// `draw` on the resize's size, as torchvision draws them on the image their step is
    /// given) with the crop's place in the resize.
    fn ops_then_crop(
        &self,
        seed: u64,
        epoch: u64,
        index: usize,
        (width, height): (u32, u32),
        mut draw: impl FnMut(usize, &Op, (u32, u32), &mut Vec<PixelOp>),
    ) -> Result<Option<(CropBox, Cut)>, AugmentError> {
        if self.mid.is_empty() {
            return Ok(None);
        }
        let Some(geometry::CropOfResize {
            resized: (rw, rh),
            at,
        }) = self.crop_of_resize(seed, epoch, index, (width, height))?
        else {
            return Ok(None);
        };
        let mut ops = Vec::new();
        for (op_at, op) in &self.mid {
            draw(*op_at, op, (rh, rw), &mut ops);
        }
        let whole = geometry::window_of_resize((width, height), (rh, rw), (0, 0), (rh, rw));
        let content = (rh, rw);
        Ok(Some((whole, Cut { content, at, ops })))
    }

    /// The window of a crop of `out` (of the image resized as `resize` says), at its offset:
    /// in the image padded as the pipeline pads it, when it does.
    fn cut_window(
        &self,
        (width, height): (u32, u32),
        resize: Option<Prescale>,
        out: (u32, u32),
        offset: Offset,
        mirror: Mirror,
        rng: &mut CounterRng,
    ) -> Result<CropBox, AugmentError> {
        match self.pad {
            Some(pad) => {
                let drawn = offset == Offset::Drawn;
                geometry::padded_crop(width, height, out, pad, drawn, rng)
            }
            None => geometry::resize_crop(width, height, resize, out, offset, mirror, rng),
        }
    }

    /// Draws the sample's plan for a `width`x`height` image, and its boxes (`objects`) when
    /// the pipeline is a detection one.
    ///
    /// # Errors
    /// The image is too small for the geometry (a center crop of a resize to nothing).
    pub fn sample(
        &self,
        seed: u64,
        epoch: u64,
        index: usize,
        (width, height): (u32, u32),
        objects: Option<SampleBoxes<'_>>,
    ) -> Result<SamplePlan, AugmentError> {
        let mut pre = Vec::new();
        for (at, op) in &self.pre {
            let mut rng = CounterRng::for_op(seed, epoch, index as u64, *at);
            op.draw(&mut rng, (height, width), &mut pre);
        }
        let mut detected = None;
        if let Some(d) = &self.detect {
            let rng = |at: usize| CounterRng::for_op(seed, epoch, index as u64, at);
            for (at, op) in &d.pre {
                op.draw(&mut rng(*at), (height, width), &mut pre);
            }
            let boxes = objects.unwrap_or_default();
            let zoom = d
                .zoom
                .as_ref()
                .and_then(|(at, z)| detect::zoom_out(z, width, height, &mut rng(*at)));
            let ((cw, ch), on_canvas) = detect::on_canvas(boxes.boxes, zoom, width, height);
            let crop = d
                .iou
                .as_ref()
                .and_then(|(at, spec)| detect::iou_crop(spec, cw, ch, &on_canvas, &mut rng(*at)));
            let drop_outside = d.iou.as_ref().is_some_and(|(_, spec)| spec.drop_outside);
            let flip = d.flip.is_some_and(|(at, p)| rng(at).uniform() < p);
            let fill = d.zoom.as_ref().map_or([0; 3], |(_, z)| z.fill);
            // The size is drawn for the window, which is the canvas (no IoU crop comes before
            // a drawn resize).
            let out = match (&d.resize, &self.geometry) {
                (Some((at, r)), _) => Some(r.draw_size(cw, ch, &mut rng(*at))),
                (None, Geometry::Resize { out }) => Some(*out),
                (None, _) => None,
            };
            let fixed = d.fixed.as_ref().map(|(at, f)| {
                let window = crop.map_or((ch, cw), |[_, _, w, h]| (h, w));
                detect::fixed_crop(f, out.unwrap_or(window), &mut rng(*at))
            });
            detected = Some(detect::transform_boxes(
                &detect::Drawn {
                    zoom,
                    crop,
                    flip,
                    flip_after_resize: d.flip_after_resize,
                    drop_outside,
                    fixed,
                },
                fill,
                width,
                height,
                boxes,
                out,
                detect::BoxSteps {
                    clamp_before_resize: d.clamp_before_resize,
                    sanitize: d.sanitize,
                },
            ));
        }
        let mut first_flip = true;
        let mut draw = |at: usize, op: &Op, size, ops: &mut Vec<PixelOp>| {
            // The first horizontal flip keeps the stream it has always had, so pipelines
            // without other ops give the batches they gave before.
            let mut rng = if first_flip && matches!(op, Op::RandomHorizontalFlip(_)) {
                first_flip = false;
                CounterRng::new(seed, epoch, index as u64, Stream::Flip)
            } else {
                CounterRng::for_op(seed, epoch, index as u64, at)
            };
            op.draw(&mut rng, size, ops);
        };
        // Flips before the crop come first of the pixel ops; the crop mirrors as they fell.
        let mut ops = Vec::new();
        for (at, op) in &self.crop_flips {
            draw(*at, op, (height, width), &mut ops);
        }
        let crop_flips = ops.len();
        let odd = |flip: PixelOp| ops.iter().filter(|o| **o == flip).count() % 2 == 1;
        let mirror = Mirror {
            horizontal: odd(PixelOp::Hflip),
            vertical: odd(PixelOp::Vflip),
        };
        let warp = self.warp_then_crop(seed, epoch, index, (width, height))?;
        let cut = self.ops_then_crop(seed, epoch, index, (width, height), &mut draw)?;
        let whole = warp
            .as_ref()
            .map(|(w, _)| *w)
            .or(cut.as_ref().map(|(w, _)| *w));
        let mut letterbox = None;
        let mut end_padded = None;
        let mut resized_crop = None;
        let crop_rng = || CounterRng::new(seed, epoch, index as u64, Stream::Crop);
        let centre = |floor| {
            if floor {
                Offset::Floor
            } else {
                Offset::Centred
            }
        };
        let crop = match (&detected, &self.geometry, &whole) {
            (_, _, Some(whole)) => *whole,
            (Some(d), _, None) => {
                let [wl, wt, ww, wh] = d.window;
                // The window's corner in what is resampled: the image, or the window composed
                // on the fill (the CPU path composes it first when the fill shows).
                let (x, y) = match d.window_inside_image(width, height) {
                    true => (wl - d.image_at.0, wt - d.image_at.1),
                    false => (0, 0),
                };
                match &d.fixed {
                    Some(f) if f.cropped => {
                        let ((top, left), (h, w)) = (f.at, f.content);
                        if f.before == (wh, ww) {
                            CropBox::rect(x + left, y + top, w, h)
                        } else {
                            // The cut of the resized window, in the window's pixels.
                            let mut b =
                                geometry::window_of_resize((ww, wh), f.before, (top, left), (h, w));
                            b.left += f64::from(x);
                            b.top += f64::from(y);
                            b
                        }
                    }
                    _ => CropBox::rect(x, y, ww, wh),
                }
            }
            (None, geometry, None) => match *geometry {
                Geometry::RandomResizedCrop { scale, ratio, .. } => {
                    let mut rng = CounterRng::new(seed, epoch, index as u64, Stream::Crop);
                    geometry::random_resized_crop(width, height, scale, ratio, &mut rng)
                }
                Geometry::CenterCrop { resize, out, floor } => {
                    let offset = centre(floor);
                    self.cut_window(
                        (width, height),
                        resize,
                        out,
                        offset,
                        mirror,
                        &mut crop_rng(),
                    )?
                }
                Geometry::RandomCrop {
                    resize,
                    out,
                    padded: Some(pad),
                } => {
                    let cut = match pad.centred_to {
                        // No resize before it, so no flips before the crop either.
                        Some(to) => {
                            geometry::centred_padded_crop(width, height, to, out, &mut crop_rng())
                        }
                        None => geometry::end_padded_crop(
                            width,
                            height,
                            resize,
                            out,
                            mirror,
                            &mut crop_rng(),
                        ),
                    };
                    resized_crop = Some(ResizedCrop {
                        resized: cut.resized,
                        at: cut.at,
                        hflip: mirror.horizontal,
                        vflip: mirror.vertical,
                        before: cut.before,
                    });
                    if cut.content != out {
                        // The flips before the crop mirror the image, not the padding.
                        ops.drain(..crop_flips);
                        end_padded = Some(Placed {
                            content: cut.content,
                            at: cut.placed_at,
                            fill: pad.fill,
                            border: pad.border,
                            hflip: mirror.horizontal,
                            vflip: mirror.vertical,
                        });
                    }
                    cut.window
                }
                Geometry::RandomCrop { resize, out, .. } => self.cut_window(
                    (width, height),
                    resize,
                    out,
                    Offset::Drawn,
                    mirror,
                    &mut crop_rng(),
                )?,
                Geometry::CropThenResize {
                    crop,
                    random,
                    floor,
                    ..
                } => {
                    // Cut from the image itself: no resize before it, nothing mirrored.
                    let offset = if random { Offset::Drawn } else { centre(floor) };
                    let short = width.min(height);
                    let crop = crop.unwrap_or((short, short));
                    let none = Mirror::default();
                    self.cut_window((width, height), None, crop, offset, none, &mut crop_rng())?
                }
                Geometry::Letterbox {
                    max_size,
                    out: (oh, ow),
                    fill,
                    border,
                } => {
                    // PadIfNeeded's `int((min - size) / 2.0)` before the image on each axis.
                    let (rw, rh) = geometry::albu_longest_size(width, height, max_size);
                    letterbox = Some(Placed {
                        content: (rh, rw),
                        at: ((oh - rh) / 2, (ow - rw) / 2),
                        fill,
                        border,
                        hflip: false,
                        vflip: false,
                    });
                    geometry::window_of_resize((width, height), (rh, rw), (0, 0), (rh, rw))
                }
                Geometry::Resize { .. } | Geometry::Window => CropBox::full(width, height),
            },
        };
        if resized_crop.is_none() && self.pad.is_none() && detected.is_none() && whole.is_none() {
            // An unpadded crop of the resize (or of the image): where it was cut, for a mask
            // to follow, from the same draws.
            if let Some(cut) = self.crop_of_resize(seed, epoch, index, (width, height))? {
                resized_crop = Some(ResizedCrop {
                    resized: (cut.resized.1, cut.resized.0),
                    at: cut.at,
                    hflip: mirror.horizontal,
                    vflip: mirror.vertical,
                    before: (0, 0),
                });
            }
        }
        let interpolation = match self.interpolation {
            Interpolation::Random => {
                let mut rng = CounterRng::for_op(seed, epoch, index as u64, self.geometry_at);
                if rng.below(2) == 0 {
                    Interpolation::Bilinear
                } else {
                    Interpolation::Bicubic
                }
            }
            fixed => fixed,
        };
        let size = match (&detected, self.fixed_out()) {
            (_, Some(out)) => out,
            (Some(d), None) => d.size,
            (None, None) => (height, width),
        };
        for (at, op) in &self.pixel {
            draw(*at, op, size, &mut ops);
        }
        if detected.as_ref().is_some_and(|d| d.flip) {
            ops.insert(0, PixelOp::Hflip);
        }
        let mut flip = false;
        while let Some(k) = ops.iter().rposition(|o| *o == PixelOp::Hflip) {
            if !ops[k + 1..].iter().all(PixelOp::commutes_with_hflip) {
                break;
            }
            ops.remove(k);
            flip = !flip;
        }
        let mut erase = Vec::new();
        for (at, spec) in &self.erase {
            let mut rng = CounterRng::for_op(seed, epoch, index as u64, *at);
            spec.draw_boxes(&mut rng, size.0, size.1, &mut erase);
        }
        Ok(SamplePlan {
            crop,
            interpolation,
            pixels: PixelPlan {
                size,
                ops,
                flip,
                erase,
                placed: detected
                    .as_ref()
                    .and_then(|d| d.fixed)
                    .filter(|f| f.content != f.size)
                    .map(|f| Placed {
                        content: f.content,
                        at: (0, 0),
                        fill: f.fill,
                        border: Cv2Border::Constant,
                        hflip: false,
                        vflip: false,
                    })
                    .or(letterbox)
                    .or(end_padded),
                warped: warp.map(|(_, w)| w),
                cut: cut.map(|(_, c)| c),
            },
            pre,
            detect: detected,
            padding: self
                .pad
                .filter(|_| !crop.inside(width, height))
                .map(|p| Padding {
                    fill: p.fill,
                    mode: p.mode,
                    // In one step, every position past the image mirrors the image itself.
                    sides: if p.at_once { [0; 4] } else { p.sides },
                }),
            float_values: self.resize_floats
                && matches!(
                    interpolation,
                    Interpolation::FloatBilinear | Interpolation::FloatBicubic
                ),
            resized_crop,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::augment::{
        CenterCrop, CenterSquare, Normalize, RandomHorizontalFlip, RandomResizedCrop, Resize,
    };

    #[test]
    fn builtin_style_pipelines_validate() {
        let train = Pipeline::new("t")
            .then(Op::RandomResizedCrop(RandomResizedCrop::new(Size::Square(
                224,
            ))))
            .then(Op::RandomHorizontalFlip(RandomHorizontalFlip { p: 0.5 }))
            .then(Op::Normalize(Normalize::imagenet()));
        assert_eq!(
            train.plan(Dtype::Bf16).unwrap().fixed_out(),
            Some((224, 224))
        );
        let eval = Pipeline::new("e")
            .then(Op::Resize(Resize {
                size: Size::Square(256),
                interpolation: Interpolation::Bilinear,
            }))
            .then(Op::CenterCrop(CenterCrop {
                size: Size::Square(224),
                pad: false,
                floor: false,
            }));
        assert_eq!(
            eval.plan(Dtype::U8).unwrap().geometry,
            Geometry::CenterCrop {
                resize: Some(Prescale::Short(256)),
                out: (224, 224),
                floor: false
            }
        );
    }

    #[test]
    fn multiscale_draws_each_samples_size_within_the_rows_bound_and_flips_after_it() {
        let shortest = crate::augment::RandomShortestSize {
            min_size: vec![480, 640, 800],
            max_size: Some(1333),
            interpolation: Interpolation::PilBilinear,
            as_resize: false,
        };
        let multiscale = Pipeline::new("m")
            .then(Op::RandomShortestSize(shortest.clone()))
            .then(Op::RandomHorizontalFlip(RandomHorizontalFlip { p: 0.5 }))
            .then(Op::Normalize(Normalize::imagenet()));
        let plan = multiscale.plan(Dtype::F32).unwrap();
        assert_eq!(plan.fixed_out(), None);
        assert_eq!(plan.interpolation, Interpolation::PilBilinear);
        let boxes = [[10.0f32, 20.0, 110.0, 220.0]];
        let (mut sizes, mut flips) = (std::collections::BTreeSet::new(), 0);
        for index in 0..64 {
            let s = plan
                .sample(1, 0, index, (500, 375), Some(SampleBoxes::floats(&boxes)))
                .unwrap();
            let d = s.detect.as_ref().unwrap();
            assert_eq!(s.pixels.size, d.size);
            let (h, w) = d.size;
            assert!(u64::from(h) * u64::from(w) <= plan.max_pixels(500, 375));
            // Scaled by the drawn size, then mirrored in its width when flipped.
            let rx = (f64::from(w) / 500.0) as f32;
            let x = if d.flip {
                w as f32 - 110.0 * rx
            } else {
                10.0 * rx
            };
            assert_eq!(d.boxes[0][0], x);
            sizes.insert(h.min(w));
            flips += usize::from(d.flip);
        }
        assert_eq!(sizes.len(), 3, "{sizes:?}");
        assert!(0 < flips && flips < 64);
        // After the IoU crop the window's resize would be unbounded: refused.
        let after_crop = Pipeline::new("c")
            .then(Op::RandomIoUCrop(crate::augment::RandomIoUCrop::default()))
            .then(Op::RandomShortestSize(shortest));
        assert!(after_crop.plan(Dtype::F32).is_err());
    }

    /// The segmentation reference's training geometry: `RandomResize(lo, hi)`, a flip, then
    /// `RandomCrop(out)` after `pad_if_smaller`.
    fn end_padded(lo: u32, hi: u32, out: u32, fill: [u8; 3]) -> Pipeline {
        Pipeline::new("seg")
            .then(Op::RandomResize(crate::augment::RandomResize {
                min_size: lo,
                max_size: hi + 1,
                interpolation: Interpolation::PilBilinear,
            }))
            .then(Op::RandomHorizontalFlip(RandomHorizontalFlip { p: 0.5 }))
            .then(Op::RandomCrop(crate::augment::RandomCrop {
                size: Size::Square(out),
                padding: None,
                pad_if_needed: false,
                fill,
                padding_mode: crate::augment::PaddingMode::Constant,
                pad_at_once: false,
                pad_end: true,
                pad_centred_to: None,
            }))
    }

    #[test]
    fn a_crop_padded_at_its_ends_shows_the_part_of_the_resize_it_covers_at_the_top_left() {
        let plan = end_padded(20, 80, 48, [7, 8, 9]).plan(Dtype::U8).unwrap();
        assert_eq!(plan.fixed_out(), Some((48, 48)));
        let (w, h) = (90u32, 60u32);
        let (mut padded, mut cut, mut flipped_padded, mut sizes) =
            (0, 0, 0, std::collections::BTreeSet::new());
        for index in 0..400 {
            let s = plan.sample(3, 1, index, (w, h), None).unwrap();
            let r = s.resized_crop.expect("drawn");
            let (rh, rw) = r.resized;
            // The short side drawn in [20, 80], the long one in proportion, truncated.
            assert!((20..=80).contains(&rh), "{rh}");
            assert_eq!(rw, rh * w / h);
            sizes.insert(rh);
            let content = (rh.min(48), rw.min(48));
            // The offset lies in the padded resize; a padded side shows from its start.
            assert!(r.at.0 + 48 <= rh.max(48) && r.at.1 + 48 <= rw.max(48));
            assert_eq!(s.pixels.size, (48, 48));
            assert_eq!(s.pixels.resampled(), content);
            // The window is the content's part of the resize, mirrored when flipped.
            let left = if r.hflip {
                rw - content.1 - r.at.1
            } else {
                r.at.1
            };
            let sx = f64::from(w) / f64::from(rw);
            let sy = f64::from(h) / f64::from(rh);
            assert!((s.crop.left - f64::from(left) * sx).abs() < 1e-9);
            assert!((s.crop.top - f64::from(r.at.0) * sy).abs() < 1e-9);
            assert!((s.crop.width - f64::from(content.1) * sx).abs() < 1e-9);
            assert!((s.crop.height - f64::from(content.0) * sy).abs() < 1e-9);
            match s.pixels.placed {
                Some(p) => {
                    padded += 1;
                    assert_eq!((p.content, p.at, p.fill), (content, (0, 0), [7, 8, 9]));
                    // The flip mirrors the image as it is placed, not the padded output.
                    assert_eq!(p.hflip, r.hflip);
                    assert!(!s.pixels.flip && !s.pixels.ops.contains(&PixelOp::Hflip));
                    flipped_padded += usize::from(r.hflip);
                }
                None => {
                    cut += 1;
                    assert_eq!(content, (48, 48));
                    assert_eq!(s.pixels.flip, r.hflip);
                }
            }
        }
        assert!(
            padded > 100 && cut > 100 && flipped_padded > 30,
            "{padded} {cut} {flipped_padded}"
        );
        assert!(sizes.len() > 50, "{}", sizes.len());
        // Without a resize the image itself is padded at its ends.
        let p = Pipeline::new("p").then(Op::RandomCrop(crate::augment::RandomCrop {
            size: Size::HeightWidth([64, 32]),
            padding: None,
            pad_if_needed: false,
            fill: [0; 3],
            padding_mode: crate::augment::PaddingMode::Constant,
            pad_at_once: false,
            pad_end: true,
            pad_centred_to: None,
        }));
        let s = p
            .plan(Dtype::U8)
            .unwrap()
            .sample(0, 0, 5, (50, 40), None)
            .unwrap();
        let placed = s.pixels.placed.unwrap();
        assert_eq!((placed.content, s.pixels.size), ((40, 32), (64, 32)));
        assert_eq!((s.crop.top, s.crop.height, s.crop.width), (0.0, 40.0, 32.0));
    }

    /// albumentations' `PadIfNeeded(to)` then `RandomCrop(out)`.
    fn centred(to: [u32; 2], out: [u32; 2], mode: crate::augment::PaddingMode) -> Pipeline {
        Pipeline::new("albu").then(Op::RandomCrop(crate::augment::RandomCrop {
            size: Size::HeightWidth(out),
            padding: None,
            pad_if_needed: false,
            fill: [255; 3],
            padding_mode: mode,
            pad_at_once: false,
            pad_end: false,
            pad_centred_to: Some(Size::HeightWidth(to)),
        }))
    }

    #[test]
    fn an_unpadded_crop_of_a_resize_carries_its_offset_in_the_resize_and_the_flips_before_it() {
        // Resize 160x120 (wxh) to 80x60, a flip between, a random 40x30 crop: the crop's
        // window in the image is the offset doubled, mirrored where the flip fell.
        let toml = "name = 'c'\n\
            [[ops]]\nop = 'resize'\nsize = [60, 80]\ninterpolation = 'cv2_linear'\n\
            [[ops]]\nop = 'random_horizontal_flip'\np = 0.5\n\
            [[ops]]\nop = 'random_crop'\nsize = [30, 40]\n";
        let plan = Pipeline::from_toml(toml, "c.toml")
            .unwrap()
            .plan(Dtype::U8)
            .unwrap();
        let mut flipped = [0, 0];
        for index in 0..64 {
            let s = plan.sample(3, 0, index, (160, 120), None).unwrap();
            let r = s.resized_crop.expect("an unpadded crop is carried too");
            assert_eq!((r.resized, r.before, r.vflip), ((60, 80), (0, 0), false));
            let (top, left) = r.at;
            assert!(top <= 30 && left <= 40);
            let left = if r.hflip { 80 - 40 - left } else { left };
            assert_eq!(
                (s.crop.left, s.crop.top),
                (f64::from(2 * left), f64::from(2 * top))
            );
            flipped[usize::from(r.hflip)] += 1;
        }
        assert!(flipped[0] > 0 && flipped[1] > 0);
    }

    #[test]
    fn a_crop_padded_centred_shows_the_image_where_albumentations_places_it() {
        use crate::augment::PaddingMode;
        let plan = centred([40, 40], [32, 32], PaddingMode::Constant)
            .plan(Dtype::U8)
            .unwrap();
        // A 30x20 (wxh) image: padded 5 left, 10 above, to 40x40; the crop's offset uniform
        // over 0..=8 on each axis.
        let mut offsets = std::collections::BTreeSet::new();
        for index in 0..1500 {
            let s = plan.sample(1, 0, index, (30, 20), None).unwrap();
            let r = s.resized_crop.expect("drawn");
            assert_eq!((r.resized, r.before), ((20, 30), (10, 5)));
            let (top, left) = r.at;
            offsets.insert(r.at);
            let placed = s.pixels.placed.expect("the padding shows");
            // The image's rows 10..30 and columns 5..35 of the padded image, in the crop.
            let rows = (top.max(10), (top + 32).min(30));
            let cols = (left.max(5), (left + 32).min(35));
            assert_eq!(placed.at, (rows.0 - top, cols.0 - left));
            assert_eq!(placed.content, (rows.1 - rows.0, cols.1 - cols.0));
            assert_eq!(
                (s.crop.top, s.crop.left),
                (f64::from(rows.0 - 10), f64::from(cols.0 - 5))
            );
            assert_eq!(placed.fill, [255; 3]);
        }
        assert_eq!(offsets.len(), 81);
        // An image larger than the crop on both axes: no padding, a plain crop.
        let s = plan.sample(1, 0, 3, (64, 48), None).unwrap();
        assert!(s.pixels.placed.is_none());
        assert_eq!(s.resized_crop.unwrap().before, (0, 0));
        // A mirrored border pads only to the crop itself; twice the crop could miss the image.
        let e = centred([40, 40], [32, 32], PaddingMode::Reflect)
            .plan(Dtype::U8)
            .unwrap_err()
            .to_string();
        assert!(e.contains("fill only"), "{e}");
        let e = centred([64, 40], [32, 32], PaddingMode::Constant)
            .plan(Dtype::U8)
            .unwrap_err()
            .to_string();
        assert!(e.contains("twice"), "{e}");
        let s = centred([32, 32], [32, 32], PaddingMode::Reflect)
            .plan(Dtype::U8)
            .unwrap()
            .sample(1, 0, 3, (30, 20), None)
            .unwrap();
        let placed = s.pixels.placed.unwrap();
        assert_eq!((placed.at, placed.content), ((6, 1), (20, 30)));
        assert_eq!(placed.border, crate::augment::albu::Cv2Border::Reflect101);
    }

    #[test]
    fn a_crop_padded_at_its_ends_refuses_ops_between_its_resize_and_it_and_other_padding() {
        let mut p = end_padded(20, 80, 48, [0; 3]);
        p.ops.insert(
            2,
            Op::ColorJitter(crate::augment::ColorJitter {
                brightness: Some([0.5, 1.5]),
                ..Default::default()
            }),
        );
        let e = p.plan(Dtype::U8).unwrap_err().to_string();
        assert!(e.contains("only flips"), "{e}");
        let mut p = end_padded(20, 80, 48, [0; 3]);
        if let Some(Op::RandomCrop(c)) = p.ops.last_mut() {
            c.pad_if_needed = true;
        }
        let e = p.plan(Dtype::U8).unwrap_err().to_string();
        assert!(e.contains("pad_end excludes"), "{e}");
    }

    #[test]
    fn lsj_gives_every_sample_the_fixed_size_with_its_cut_of_the_jittered_image_placed_on_the_fill()
    {
        let jitter = crate::augment::ScaleJitter {
            target_size: [200, 200],
            scale_range: [0.1, 2.0],
            interpolation: Interpolation::PilBilinear,
        };
        let crop = crate::augment::FixedSizeCrop {
            size: [200, 200],
            fill: [123, 117, 104],
        };
        let flip = Op::RandomHorizontalFlip(RandomHorizontalFlip { p: 0.5 });
        let lsj = Pipeline::new("lsj")
            .then(Op::ScaleJitter(jitter.clone()))
            .then(Op::FixedSizeCrop(crop))
            .then(flip.clone());
        let plan = lsj.plan(Dtype::F32).unwrap();
        assert_eq!(plan.fixed_out(), Some((200, 200)));
        let boxes = [[10.0f32, 20.0, 110.0, 220.0]];
        let (mut cut, mut padded, mut flips) = (0, 0, 0);
        for index in 0..200 {
            let s = plan
                .sample(1, 0, index, (500, 375), Some(SampleBoxes::floats(&boxes)))
                .unwrap();
            let d = s.detect.as_ref().unwrap();
            let f = d.fixed.unwrap();
            assert_eq!((s.pixels.size, d.size), ((200, 200), (200, 200)));
            assert_eq!(s.pixels.resampled(), f.content);
            assert_eq!(s.pixels.placed.is_some(), f.content != (200, 200));
            // The cut lies in the image, a window of its resize unless nothing was cut.
            let b = s.crop;
            assert!(b.left >= 0.0 && b.top >= 0.0);
            assert!(b.left + b.width <= 500.0 + 1e-9 && b.top + b.height <= 375.0 + 1e-9);
            assert_eq!(b.view, !f.cropped);
            cut += usize::from(f.cropped);
            padded += usize::from(s.pixels.placed.is_some());
            flips += usize::from(d.flip);
        }
        assert!(
            cut > 20 && padded > 20 && flips > 20,
            "{cut} {padded} {flips}"
        );
        // The flip before the crop would mirror the cut, not the padded output: refused.
        let flip_first = Pipeline::new("f")
            .then(Op::ScaleJitter(jitter))
            .then(flip)
            .then(Op::FixedSizeCrop(crop));
        assert!(flip_first.plan(Dtype::F32).is_err());
    }

    #[test]
    fn a_fixed_resize_then_a_center_crop_is_a_window_of_the_resize_and_one_of_its_size_a_no_op() {
        let resize_then = |crop: Size| {
            Pipeline::new("hf_eval")
                .then(Op::Resize(Resize {
                    size: Size::HeightWidth([256, 240]),
                    interpolation: Interpolation::Bicubic,
                }))
                .then(Op::CenterCrop(CenterCrop {
                    size: crop,
                    pad: false,
                    floor: false,
                }))
                .plan(Dtype::F32)
        };
        let p = resize_then(Size::Square(224)).unwrap();
        assert_eq!(
            p.geometry,
            Geometry::CenterCrop {
                resize: Some(Prescale::Exact(256, 240)),
                out: (224, 224),
                floor: false
            }
        );
        assert_eq!(p.interpolation, Interpolation::Bicubic);
        // 500x400 resized to 240x256 (w x h), crop 224 from (8, 16): in source pixels, each
        // edge scaled back on its own.
        let s = p.sample(0, 0, 0, (500, 400), None).unwrap();
        let (left, right) = (500.0 * 8.0 / 240.0, 500.0 * 232.0 / 240.0);
        let (top, bottom) = (400.0 * 16.0 / 256.0, 400.0 * 240.0 / 256.0);
        assert!(!s.crop.view);
        assert_eq!(
            (s.crop.left, s.crop.top, s.crop.width, s.crop.height),
            (left, top, right - left, bottom - top)
        );
        assert_eq!(
            resize_then(Size::HeightWidth([256, 240])).unwrap().geometry,
            Geometry::Resize { out: (256, 240) }
        );
        let e = resize_then(Size::Square(250)).unwrap_err().to_string();
        assert!(e.contains("larger than the resize to (256, 240)"), "{e}");
    }

    #[test]
    fn a_center_square_then_a_resize_cuts_each_images_shorter_side_square_at_floor_offsets() {
        let square = |then: Option<Op>| {
            let p = Pipeline::new("textual_inversion").then(Op::CenterSquare(CenterSquare {}));
            match then {
                Some(op) => p.then(op),
                None => p,
            }
            .plan(Dtype::F32)
        };
        let resize = Op::Resize(Resize {
            size: Size::Square(64),
            interpolation: Interpolation::PilBicubic,
        });
        let p = square(Some(resize)).unwrap();
        assert_eq!(
            p.geometry,
            Geometry::CropThenResize {
                crop: None,
                out: (64, 64),
                random: false,
                floor: true
            }
        );
        // `img[(h - m) // 2:(h + m) // 2, (w - m) // 2:(w + m) // 2]`: floor offsets, cut out.
        for ((w, h), (left, top, side)) in [
            ((7, 4), (1.0, 0.0, 4.0)),
            ((4, 9), (0.0, 2.0, 4.0)),
            ((500, 333), (83.0, 0.0, 333.0)),
            ((6, 6), (0.0, 0.0, 6.0)),
        ] {
            let s = p.sample(0, 0, 0, (w, h), None).unwrap();
            assert!(s.crop.view, "{w}x{h}");
            assert_eq!(
                (s.crop.left, s.crop.top, s.crop.width, s.crop.height),
                (left, top, side, side),
                "{w}x{h}"
            );
        }
        let alone = square(None).unwrap_err().to_string();
        assert!(alone.contains("center_square alone"), "{alone}");
        let flip = Op::RandomHorizontalFlip(RandomHorizontalFlip { p: 0.5 });
        let after_flip = Pipeline::new("late")
            .then(Op::Resize(Resize {
                size: Size::Square(64),
                interpolation: Interpolation::Bilinear,
            }))
            .then(flip)
            .then(Op::CenterSquare(CenterSquare {}))
            .plan(Dtype::F32)
            .unwrap_err()
            .to_string();
        assert!(
            after_flip.contains("center_square comes first"),
            "{after_flip}"
        );
    }

    #[test]
    fn random_resize_then_a_crop_is_a_geometry_and_alone_or_smaller_than_the_crop_is_refused() {
        let jitter = |crop: Option<u32>| {
            let p = Pipeline::new("videomae").then(Op::RandomResize(RandomResize {
                min_size: 256,
                max_size: 320,
                interpolation: Interpolation::Bilinear,
            }));
            match crop {
                Some(c) => p.then(Op::RandomCrop(RandomCrop {
                    size: Size::Square(c),
                    padding: None,
                    pad_if_needed: false,
                    fill: [0; 3],
                    padding_mode: Default::default(),
                    pad_at_once: false,
                    pad_end: false,
                    pad_centred_to: None,
                })),
                None => p,
            }
            .plan(Dtype::F32)
        };
        assert_eq!(
            jitter(Some(224)).unwrap().geometry,
            Geometry::RandomCrop {
                resize: Some(Prescale::ShortIn(256, 320)),
                out: (224, 224),
                padded: None,
            }
        );
        let e = jitter(None).unwrap_err().to_string();
        assert!(e.contains("add center_crop"), "{e}");
        let e = jitter(Some(300)).unwrap_err().to_string();
        assert!(
            e.contains("larger than the resized shorter side 256"),
            "{e}"
        );
        let e = Pipeline::new("x")
            .then(Op::RandomResize(RandomResize {
                min_size: 320,
                max_size: 320,
                interpolation: Interpolation::Bilinear,
            }))
            .plan(Dtype::F32)
            .unwrap_err()
            .to_string();
        assert!(e.contains("0 < min_size < max_size"), "{e}");
    }

    #[test]
    fn shapes_that_would_vary_are_rejected() {
        let e = Pipeline::new("x")
            .then(Op::Resize(Resize {
                size: Size::Square(256),
                interpolation: Interpolation::Bilinear,
            }))
            .plan(Dtype::F32)
            .unwrap_err();
        assert!(e.to_string().contains("static"), "{e}");
        // No crop or resize: each image keeps its own size, which the loader takes only from
        // a dataset that gives the sizes (detection).
        let p = Pipeline::new("x")
            .then(Op::RandomHorizontalFlip(RandomHorizontalFlip { p: 0.5 }))
            .plan(Dtype::F32)
            .unwrap();
        assert_eq!(p.fixed_out(), None);
    }

    #[test]
    fn u8_output_with_normalize_is_rejected() {
        let p = Pipeline::new("x")
            .then(Op::CenterCrop(CenterCrop {
                size: Size::Square(8),
                pad: false,
                floor: false,
            }))
            .then(Op::Normalize(Normalize::imagenet()));
        assert!(p.plan(Dtype::U8).is_err());
        assert!(p.plan(Dtype::F16).is_ok());
    }

    #[test]
    fn toml_with_unknown_field_or_op_is_rejected_with_the_name() {
        let e = Pipeline::from_toml(
            "name='a'\n[[ops]]\nop='center_crop'\nsize=4\ncolour=1\n",
            "f.toml",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("f.toml") && e.to_string().contains("colour"),
            "{e}"
        );
        let e = Pipeline::from_toml("name='a'\n[[ops]]\nop='rotate'\n", "f.toml").unwrap_err();
        assert!(e.to_string().contains("rotate"), "{e}");
    }

    #[test]
    fn flip_probability_is_respected() {
        let p = Pipeline::new("x")
            .then(Op::CenterCrop(CenterCrop {
                size: Size::Square(8),
                pad: false,
                floor: false,
            }))
            .then(Op::RandomHorizontalFlip(RandomHorizontalFlip { p: 0.5 }))
            .plan(Dtype::U8)
            .unwrap();
        let flips = (0..10_000)
            .filter(|&i| p.sample(1, 0, i, (10, 10), None).unwrap().pixels.flip)
            .count();
        assert!((4_700..5_300).contains(&flips), "{flips}");
        let never = Pipeline::new("x")
            .then(Op::CenterCrop(CenterCrop {
                size: Size::Square(8),
                pad: false,
                floor: false,
            }))
            .then(Op::RandomHorizontalFlip(RandomHorizontalFlip { p: 0.0 }))
            .plan(Dtype::U8)
            .unwrap();
        assert!((0..100).all(|i| !never.sample(1, 0, i, (10, 10), None).unwrap().pixels.flip));
    }

    #[test]
    fn a_flip_between_the_resize_and_its_crop_cuts_the_crop_at_the_mirrored_offset() {
        // torchvision flips the resize, then crops it: for an odd margin the centre crop of
        // the flipped image is not the flipped centre crop (round(4.5) = 4 from either side).
        let plan = |resize: &str, flip: &str, p: f64, crop: &str| {
            let size = if resize.starts_with('[') {
                "[32, 40]"
            } else {
                "[32, 34]"
            };
            let text = format!(
                "name = 'f'\n[[ops]]\nop = 'resize'\nsize = {resize}\n\
                 [[ops]]\nop = '{flip}'\np = {p}\n[[ops]]\nop = '{crop}'\nsize = {size}\n"
            );
            Pipeline::from_toml(&text, "f.toml")
                .unwrap()
                .plan(Dtype::U8)
                .unwrap()
        };
        // 49x36 resized to its own size (shorter side 36): a 15-column margin, 8 before the
        // centre crop (half to even), 7 before that of the flipped image.
        let s = plan("36", "random_horizontal_flip", 1.0, "center_crop")
            .sample(0, 0, 0, (49, 36), None)
            .unwrap();
        assert_eq!((s.crop.left, s.crop.top), (7.0, 2.0));
        assert!(s.pixels.flip && s.pixels.ops.is_empty());
        let s = plan("36", "random_horizontal_flip", 0.0, "center_crop")
            .sample(0, 0, 0, (49, 36), None)
            .unwrap();
        assert_eq!((s.crop.left, s.crop.top), (8.0, 2.0));
        assert!(!s.pixels.flip);
        // A resize to [h, w], a vertical flip: the 5-row margin mirrors (2 before, then 3),
        // the columns stay.
        let s = plan("[37, 48]", "random_vertical_flip", 1.0, "center_crop")
            .sample(0, 0, 0, (48, 37), None)
            .unwrap();
        assert_eq!((s.crop.left, s.crop.top), (4.0, 3.0));
        assert_eq!(s.pixels.ops, [PixelOp::Vflip]);
        // A random crop: the flipped samples' offsets mirror the unflipped draw.
        let (flipped, kept) = (
            plan("36", "random_horizontal_flip", 1.0, "random_crop"),
            plan("36", "random_horizontal_flip", 0.0, "random_crop"),
        );
        for i in 0..50 {
            let a = flipped.sample(3, 0, i, (49, 36), None).unwrap().crop;
            let b = kept.sample(3, 0, i, (49, 36), None).unwrap().crop;
            assert_eq!((a.left, a.top), (15.0 - b.left, b.top));
        }
    }

    #[test]
    fn pixel_ops_between_the_resize_and_its_crop_run_on_the_whole_resize_then_it_is_cut() {
        let plan = |text: &str| Pipeline::from_toml(text, "m.toml").unwrap().plan(Dtype::U8);
        // A flip, a rotation drawn on the 49x36 resize, another flip, then the centre crop:
        // all on the whole resize, in order; the crop at the unmirrored centre (8 columns).
        let text = "name = 'm'\n[[ops]]\nop = 'resize'\nsize = 36\n\
            [[ops]]\nop = 'random_vertical_flip'\np = 1.0\n\
            [[ops]]\nop = 'random_rotation'\ndegrees = [10.0, 10.0]\n\
            [[ops]]\nop = 'random_horizontal_flip'\np = 1.0\n\
            [[ops]]\nop = 'center_crop'\nsize = [32, 34]\n";
        let p = plan(text).unwrap();
        assert!(p.reshapes_resize());
        let s = p.sample(0, 0, 0, (49, 36), None).unwrap();
        let c = s.crop;
        assert_eq!((c.left, c.top, c.width, c.height), (0.0, 0.0, 49.0, 36.0));
        let cut = s.pixels.cut.as_ref().unwrap();
        assert_eq!(
            (cut.content, cut.at, s.pixels.resampled()),
            ((36, 49), (2, 8), (36, 49))
        );
        let [PixelOp::Vflip, PixelOp::Warp(_), PixelOp::Hflip] = &cut.ops[..] else {
            panic!("{:?}", cut.ops)
        };
        assert!(s.pixels.ops.is_empty() && !s.pixels.flip && s.pixels.size == (32, 34));
        // A resize to [h, w] and a blur before a random crop: the offsets are the crop's
        // draws, as without the blur.
        let blurred = "name = 'b'\n[[ops]]\nop = 'resize'\nsize = [40, 50]\n\
            [[ops]]\nop = 'gaussian_blur'\nkernel_size = [3, 3]\n\
            [[ops]]\nop = 'random_crop'\nsize = [32, 32]\n";
        let plain = blurred.replace("[[ops]]\nop = 'gaussian_blur'\nkernel_size = [3, 3]\n", "");
        let (blurred, plain) = (plan(blurred).unwrap(), plan(&plain).unwrap());
        for i in 0..20 {
            let s = blurred.sample(5, 1, i, (80, 60), None).unwrap();
            let c = plain.sample(5, 1, i, (80, 60), None).unwrap().crop;
            let cut = s.pixels.cut.unwrap();
            assert_eq!(cut.content, (40, 50));
            let at = (f64::from(cut.at.0), f64::from(cut.at.1));
            let window = geometry::window_of_resize((80, 60), (40, 50), cut.at, (32, 32));
            assert_eq!((window.top, window.left), (c.top, c.left), "{at:?}");
            assert!(matches!(cut.ops[..], [PixelOp::GaussianBlur { .. }]));
        }
        // A quarter turn there would give each image its own shape.
        let turned = text.replace(
            "op = 'random_rotation'\ndegrees = [10.0, 10.0]",
            "op = 'albu_transpose'\np = 1.0",
        );
        let err = plan(&turned).unwrap_err().to_string();
        assert!(err.contains("between a resize and its crop"), "{err}");
    }

    #[test]
    fn a_resize_of_floats_takes_float_filters_flips_and_a_float_dtype_only() {
        let text = |interp: &str, after: &str| {
            format!(
                "name = 'f'\nresize_floats = true\n[[ops]]\nop = 'resize'\nsize = 40\ninterpolation = '{interp}'\n\
                 [[ops]]\nop = 'random_horizontal_flip'\n[[ops]]\nop = 'center_crop'\nsize = [32, 32]\n{after}"
            )
        };
        let plan = |t: &str, dtype| Pipeline::from_toml(t, "f.toml").unwrap().plan(dtype);
        let p = plan(&text("float_bicubic", ""), Dtype::F32).unwrap();
        assert!(p.sample(0, 0, 0, (60, 50), None).unwrap().float_values);
        // Nearest copies pixels: the bytes' floats are torch's, on either path.
        let p = plan(&text("nearest", ""), Dtype::F32).unwrap();
        assert!(!p.sample(0, 0, 0, (60, 50), None).unwrap().float_values);
        for (interp, after, dtype, refused) in [
            ("bilinear", "", Dtype::F32, "interpolation"),
            ("float_bilinear", "", Dtype::U8, "dtype"),
            (
                "float_bilinear",
                "[[ops]]\nop = 'color_jitter'\nbrightness = [0.5, 0.5]\n",
                Dtype::F32,
                "color_jitter",
            ),
        ] {
            let err = plan(&text(interp, after), dtype).unwrap_err().to_string();
            assert!(
                err.contains("resize_floats") && err.contains(refused),
                "{err}"
            );
        }
        // A normalization before the resize belongs to a resize of floats.
        let early = "[[ops]]\nop = 'normalize'\nmean = [0.5, 0.5, 0.5]\nstd = [0.5, 0.5, 0.5]\nbefore_resize = true\n";
        assert!(plan(&text("float_bilinear", early), Dtype::F32).is_ok());
        let bytes = text("float_bilinear", early).replace("resize_floats = true\n", "");
        let err = plan(&bytes, Dtype::F32).unwrap_err().to_string();
        assert!(err.contains("before_resize"), "{err}");
    }

    #[test]
    fn a_single_channel_pipeline_must_make_its_images_grey() {
        let text = |grey: &str| {
            format!(
                "name = 'g'\nsingle_channel = true\n[[ops]]\nop = 'resize'\nsize = [8, 8]\n{grey}"
            )
        };
        let plan = |t: &str| Pipeline::from_toml(t, "g.toml").unwrap().plan(Dtype::U8);
        assert!(plan(&text("[[ops]]\nop = 'pil_grayscale'\n")).is_ok());
        for refused in ["", "[[ops]]\nop = 'pil_grayscale'\np = 0.5\n"] {
            let err = plan(&text(refused)).unwrap_err().to_string();
            assert!(err.contains("single_channel"), "{err}");
        }
        // Images read grey are grey from the start, as are a source's of one channel; a
        // detection pipeline's are not read so.
        assert!(plan(&format!("grey_read = true\n{}", text(""))).is_ok());
        let grey = Over {
            boxes: false,
            grey: true,
        };
        let over = Pipeline::from_toml(&text(""), "g.toml")
            .unwrap()
            .plan_over(Dtype::U8, grey);
        assert!(over.is_ok());
        let detection = "name = 'd'\ngrey_read = true\n[[ops]]\nop = 'random_horizontal_flip'\n\
            [[ops]]\nop = 'sanitize_bounding_boxes'\n";
        let err = plan(detection).unwrap_err().to_string();
        assert!(err.contains("grey_read is for classification"), "{err}");
    }

    #[test]
    fn pixel_ops_before_the_resize_are_drawn_on_the_whole_image_and_turns_there_are_refused() {
        let text = "name = 'before'\n\
            [[ops]]\nop = 'albu_image_compression'\nquality_range = [30, 30]\np = 1.0\n\
            [[ops]]\nop = 'albu_affine'\nrotate = [10.0, 20.0]\np = 1.0\n\
            [[ops]]\nop = 'resize'\nsize = [40, 48]\ninterpolation = 'cv2_linear'\n\
            [[ops]]\nop = 'albu_posterize'\nnum_bits = [3, 3]\np = 1.0\n";
        let plan = Pipeline::from_toml(text, "b.toml")
            .unwrap()
            .plan(Dtype::U8)
            .unwrap();
        assert!(plan.has_pre_ops() && plan.detect.is_none());
        let s = plan.sample(1, 0, 3, (500, 375), None).unwrap();
        // In pipeline order, on the 500x375 image: the warp turns about its centre.
        let [PixelOp::JpegRoundTrip(30), PixelOp::Cv2Affine { inverse: m, .. }] = &s.pre[..] else {
            panic!("{:?}", s.pre)
        };
        let (cx, cy) = (500.0f32 / 2.0 - 0.5, 375.0f32 / 2.0 - 0.5);
        assert!((m[0] * cx + m[1] * cy + m[2] - cx).abs() < 1e-3);
        assert_eq!(s.pixels.ops, [PixelOp::Posterize(3)]);
        assert_eq!(s.pixels.size, (40, 48));
        // A turn before the resize would give each image its own shape; with no crop or
        // resize at all, pixel ops are still refused (such a pipeline is a detection one).
        let turned = text.replace(
            "'albu_image_compression'\nquality_range = [30, 30]",
            "'albu_transpose'",
        );
        let err = Pipeline::from_toml(&turned, "t.toml")
            .unwrap()
            .plan(Dtype::U8);
        let err = err.unwrap_err().to_string();
        assert!(
            err.contains("albu_transpose before the crop or resize"),
            "{err}"
        );
        // Written after `normalize`, it cannot run before it: refused, not reordered.
        let normalized_first = text.replace(
            "name = 'before'\n",
            "name = 'before'\n[[ops]]\nop = 'normalize'\nmean = [0.5, 0.5, 0.5]\nstd = [0.5, 0.5, 0.5]\n",
        );
        let err = Pipeline::from_toml(&normalized_first, "n.toml")
            .unwrap()
            .plan(Dtype::F32);
        let err = err.unwrap_err().to_string();
        assert!(
            err.contains("albu_image_compression after normalize"),
            "{err}"
        );
        let alone = "name = 'a'\n[[ops]]\nop = 'albu_posterize'\nnum_bits = [3, 3]\n";
        let err = Pipeline::from_toml(alone, "a.toml")
            .unwrap()
            .plan(Dtype::U8);
        let err = err.unwrap_err().to_string();
        assert!(
            err.contains("albu_posterize must follow the crop or resize"),
            "{err}"
        );
    }

    #[test]
    fn albumentations_warp_before_its_crop_and_its_letterbox_reshape_the_whole_resize() {
        let text = "name = 'albu'\n\
            [[ops]]\nop = 'albu_smallest_max_size'\nmax_size = 160\ninterpolation = 'cv2_linear'\n\
            [[ops]]\nop = 'albu_affine'\nrotate = [10.0, 20.0]\np = 1.0\n\
            [[ops]]\nop = 'random_crop'\nsize = 128\n";
        let plan = Pipeline::from_toml(text, "a.toml")
            .unwrap()
            .plan(Dtype::U8)
            .unwrap();
        assert!(plan.reshapes_resize());
        for index in 0..50 {
            // 500x375 resized to 213x160: the whole resize is resampled, then warped, and the
            // output is the warp's 128x128 part at the drawn offset.
            let s = plan.sample(1, 0, index, (500, 375), None).unwrap();
            let w = s.pixels.warped.unwrap();
            assert_eq!((w.content, s.pixels.size), ((160, 213), (128, 128)));
            assert!(w.at.0 <= 160 - 128 && w.at.1 <= 213 - 128);
            assert_eq!(
                (s.crop.left, s.crop.top, s.crop.width, s.crop.height),
                (0.0, 0.0, 500.0, 375.0)
            );
            assert_eq!(s.pixels.resampled(), (160, 213));
            // It turns about the resize's centre.
            let m = w.inverse;
            let (cx, cy) = (213.0f32 / 2.0 - 0.5, 160.0f32 / 2.0 - 0.5);
            assert!((m[0] * cx + m[1] * cy + m[2] - cx).abs() < 1e-3);
            assert!((m[3] * cx + m[4] * cy + m[5] - cy).abs() < 1e-3);
        }
        // LongestMaxSize then PadIfNeeded: the resize on a canvas of the fill.
        let letterbox = "name = 'l'\n\
            [[ops]]\nop = 'albu_longest_max_size'\nmax_size = 160\n\
            [[ops]]\nop = 'albu_pad_if_needed'\nmin_height = 161\nmin_width = 170\nfill = [1, 2, 3]\n";
        let plan = Pipeline::from_toml(letterbox, "l.toml")
            .unwrap()
            .plan(Dtype::U8)
            .unwrap();
        assert!(plan.reshapes_resize());
        // 500x375 -> 160x120, centred on 170x161: int(41 / 2) = 20 above, int(10 / 2) = 5 left.
        let s = plan.sample(1, 0, 0, (500, 375), None).unwrap();
        let placed = s.pixels.placed.unwrap();
        assert_eq!(
            (placed.content, placed.at, placed.fill),
            ((120, 160), (20, 5), [1, 2, 3])
        );
        assert_eq!(
            (s.pixels.size, s.pixels.resampled()),
            ((161, 170), (120, 160))
        );
        let smaller = letterbox.replace("min_height = 161", "min_height = 150");
        assert!(Pipeline::from_toml(&smaller, "s.toml")
            .unwrap()
            .plan(Dtype::U8)
            .is_err());
        // After torchvision's resize the warp is one of the pixel ops run on the whole
        // resize before the cut (the whole warp computed, not only the crop's part).
        let after_resize = text.replace(
            "albu_smallest_max_size'\nmax_size = 160",
            "resize'\nsize = 160",
        );
        let plan = Pipeline::from_toml(&after_resize, "b.toml")
            .unwrap()
            .plan(Dtype::U8)
            .unwrap();
        let s = plan.sample(1, 0, 0, (500, 375), None).unwrap();
        assert!(s.pixels.warped.is_none());
        let cut = s.pixels.cut.unwrap();
        assert_eq!(cut.content, (160, 213));
        assert!(matches!(cut.ops[..], [PixelOp::Cv2Affine { .. }] | []));
    }
}

#[cfg(test)]
mod kind_tests {
    use super::*;
    use crate::augment::{OpKind, RandomApply, RandomInvert, RandomRotation};

    fn detection(op: &str) -> Result<Plan, Error> {
        let text = format!(
            "name = 'd'\n[[ops]]\nop = 'random_iou_crop'\n[[ops]]\nop = 'resize'\nsize = [300, 300]\n{op}"
        );
        Pipeline::from_toml(&text, "d.toml")?.plan(Dtype::U8)
    }

    #[test]
    fn detection_refuses_pixel_movers_nested_any_way_naming_them() {
        let cases = [
            (
                "[[ops]]\nop = 'random_apply'\nops = [{ op = 'random_rotation', degrees = [-10.0, 10.0] }]\n",
                "random_apply > random_rotation",
            ),
            (
                "[[ops]]\nop = 'random_choice'\nops = [{ op = 'color_jitter' }, { op = 'random_order', ops = [{ op = 'random_invert' }, { op = 'random_affine', degrees = [0.0, 0.0], translate = [0.1, 0.1] }] }]\n",
                "random_choice > random_order > random_affine",
            ),
            (
                "[[ops]]\nop = 'random_apply'\nops = [{ op = 'random_vertical_flip' }]\n",
                "random_apply > random_vertical_flip",
            ),
            (
                "[[ops]]\nop = 'timm_rand_augment'\nops = ['Equalize', 'Rotate']\nmagnitude = 9.0\n",
                "timm_rand_augment > Rotate",
            ),
            (
                "[[ops]]\nop = 'timm_aug_mix'\nops = ['ShearX']\n",
                "timm_aug_mix > ShearX",
            ),
            (
                "[[ops]]\nop = 'timm_auto_augment'\npolicy = [[{ op = 'Color', prob = 0.5, magnitude = 3.0 }], [{ op = 'TranslateYRel', prob = 0.5, magnitude = 3.0 }]]\n",
                "timm_auto_augment > TranslateYRel",
            ),
            ("[[ops]]\nop = 'trivial_augment_wide'\n", "trivial_augment_wide"),
            ("[[ops]]\nop = 'random_rotation'\ndegrees = [-5.0, 5.0]\n", "random_rotation"),
        ];
        for (op, named) in cases {
            match detection(op).expect_err(op) {
                Error::Pipeline {
                    reason: PipelineError::MovesPixelsWithoutBoxes { mover },
                    ..
                } => assert_eq!(mover, named, "{op}"),
                other => panic!("{op}: {other}"),
            }
        }
    }

    #[test]
    fn detection_takes_pixel_ops_that_leave_pixels_in_place_nested() {
        for op in [
            "[[ops]]\nop = 'random_apply'\nops = [{ op = 'color_jitter', brightness = [0.5, 1.5] }, { op = 'random_grayscale' }]\n",
            "[[ops]]\nop = 'timm_rand_augment'\nops = ['Equalize', 'Color', 'SolarizeAdd']\nmagnitude = 9.0\n",
        ] {
            detection(op).unwrap_or_else(|e| panic!("{op}: {e}"));
        }
    }

    #[test]
    fn detection_pixel_ops_before_the_geometry_run_first_in_their_order_and_movers_are_refused() {
        let text = "name = 'd'\n\
            [[ops]]\nop = 'random_invert'\np = 1.0\n\
            [[ops]]\nop = 'random_photometric_distort'\np = 0.0\n\
            [[ops]]\nop = 'random_posterize'\nbits = 3\np = 1.0\n\
            [[ops]]\nop = 'random_iou_crop'\n[[ops]]\nop = 'resize'\nsize = [300, 300]\n";
        let plan = Pipeline::from_toml(text, "d.toml")
            .unwrap()
            .plan(Dtype::U8)
            .unwrap();
        assert!(
            plan.pre.is_empty(),
            "a detection plan draws them with its own"
        );
        let det = plan.detect.as_ref().expect("a detection plan");
        let order: Vec<_> = det.pre.iter().map(|(at, op)| (*at, op.name())).collect();
        assert_eq!(
            order,
            [
                (0, "random_invert"),
                (1, "random_photometric_distort"),
                (2, "random_posterize")
            ]
        );
        let moved = text.replace(
            "op = 'random_invert'\np = 1.0",
            "op = 'random_rotation'\ndegrees = [-5.0, 5.0]",
        );
        match Pipeline::from_toml(&moved, "m.toml")
            .unwrap()
            .plan(Dtype::U8)
        {
            Err(Error::Pipeline {
                reason: PipelineError::MovesPixelsWithoutBoxes { mover },
                ..
            }) => assert_eq!(mover, "random_rotation"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn clamp_bounding_boxes_stands_after_the_zoom_out_and_crop_and_before_sanitizing() {
        let plan = |ops: &str| {
            Pipeline::from_toml(&format!("name = 'd'\n{ops}"), "d.toml")
                .unwrap()
                .plan(Dtype::U8)
        };
        let clamp = "[[ops]]\nop = 'clamp_bounding_boxes'\n";
        let iou = "[[ops]]\nop = 'random_iou_crop'\n";
        let resize = "[[ops]]\nop = 'resize'\nsize = [30, 30]\n";
        let sanitize = "[[ops]]\nop = 'sanitize_bounding_boxes'\n";
        let p = plan(&format!("{iou}{clamp}{resize}{sanitize}")).unwrap();
        assert_eq!(p.detect.as_ref().unwrap().clamp_before_resize, Some(true));
        let p = plan(&format!("{iou}{resize}{clamp}{sanitize}")).unwrap();
        assert_eq!(p.detect.as_ref().unwrap().clamp_before_resize, Some(false));
        for refused in [
            format!("{clamp}{iou}{resize}"),
            format!("{sanitize}{clamp}{resize}"),
            format!("{clamp}{clamp}{resize}"),
        ] {
            let err = plan(&refused).unwrap_err().to_string();
            assert!(err.contains("clamp_bounding_boxes"), "{err}");
        }
    }

    #[test]
    fn wrapper_kind_is_the_kind_of_what_it_may_run() {
        let rotate = Op::RandomRotation(RandomRotation {
            degrees: [0.0, 1.0],
            interpolation: Interpolation::Nearest,
            fill: None,
            center: None,
            pil: false,
        });
        let invert = Op::RandomInvert(RandomInvert { p: 0.5 });
        let apply = |ops: Vec<Op>| Op::RandomApply(RandomApply { ops, p: 0.5 });
        assert_eq!(apply(vec![invert.clone()]).kind(), OpKind::Pixel);
        assert_eq!(
            apply(vec![invert.clone(), apply(vec![rotate.clone()])]).kind(),
            OpKind::MovingPixel
        );
        assert_eq!(
            apply(vec![invert, apply(vec![rotate])])
                .moving_part()
                .as_deref(),
            Some("random_apply > random_apply > random_rotation")
        );
    }
}
