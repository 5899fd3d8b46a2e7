//! Detection geometry: the ops that move boxes with the image, with torchvision v2's
//! semantics (`RandomZoomOut`, `RandomIoUCrop`, `RandomHorizontalFlip`, `Resize` to a fixed
//! size, or no resize: each image keeps its window's size) and `SanitizeBoundingBoxes`. Boxes are `[x1, y1, x2, y2]` in `f32`, transformed in
//! torchvision's order with its `f32` arithmetic, so they agree with torchvision's to rounding.
//!
//! The image side is one window of a canvas: the canvas is the image placed at
//! `(image_left, image_top)` on a `fill`-coloured background (the zoom-out; the image itself
//! when there is none), the window is the IoU crop on it, and the window is resampled to the
//! output size, mirrored when flipped.

use hpuload_decoders::jpeg::Scale;
use serde::{Deserialize, Serialize};

use super::error::PipelineError;
use super::geometry::Interpolation;
use super::pixel::PixelOp;
use super::spec::{half, one, probability, OpKind, OpSpec};
use crate::rng::CounterRng;

/// Boxes shifted onto the zoom-out's canvas and clamped to it, as `pad_bounding_boxes` does;
/// with the canvas's size.
pub(crate) fn on_canvas(
    boxes: &[[f32; 4]],
    zoom: Option<((u32, u32), (u32, u32))>,
    width: u32,
    height: u32,
) -> ((u32, u32), Vec<[f32; 4]>) {
    let mut b = boxes.to_vec();
    match zoom {
        None => ((width, height), b),
        Some(((zw, zh), (left, top))) => {
            for x in &mut b {
                *x = [
                    x[0] + left as f32,
                    x[1] + top as f32,
                    x[2] + left as f32,
                    x[3] + top as f32,
                ];
                clamp(x, zw, zh);
            }
            ((zw, zh), b)
        }
    }
}

/// `RandomZoomOut(fill, side_range, p)`: the image placed at a random spot of a canvas `r`
/// times its size (`r` uniform in `side_range`) filled with `fill`. Detection pipelines,
/// before the resize.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomZoomOut {
    /// The canvas colour. Default black.
    #[serde(default)]
    pub fill: [u8; 3],
    /// Range of the canvas's side over the image's. Default `[1, 4]`.
    #[serde(default = "zoom_range")]
    pub side_range: [f64; 2],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn zoom_range() -> [f64; 2] {
    [1.0, 4.0]
}

impl OpSpec for RandomZoomOut {
    fn kind(&self) -> OpKind {
        OpKind::BoxAware
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "random_zoom_out")?;
        let [lo, hi] = self.side_range;
        if !(1.0 <= lo && lo <= hi && hi.is_finite()) {
            return Err(PipelineError::Parameter(format!(
                "random_zoom_out side_range {:?} must satisfy 1 <= min <= max",
                self.side_range
            )));
        }
        Ok(())
    }
    /// Box-aware: the plan draws the canvas.
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

/// `RandomIoUCrop(min_scale, max_scale, min_aspect_ratio, max_aspect_ratio, sampler_options,
/// trials)`: SSD's crop, holding the centre of a box and overlapping one at the drawn minimum
/// IoU. Boxes whose centre it leaves out are dropped by `sanitize_bounding_boxes`. Detection
/// pipelines, before the resize.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomIoUCrop {
    /// Default 0.3.
    #[serde(default = "iou_min_scale")]
    pub min_scale: f64,
    /// Default 1.
    #[serde(default = "one")]
    pub max_scale: f64,
    /// Default 0.5.
    #[serde(default = "iou_min_ratio")]
    pub min_aspect_ratio: f64,
    /// Default 2.
    #[serde(default = "iou_max_ratio")]
    pub max_aspect_ratio: f64,
    /// Minimum IoUs to draw from (1 or more: no crop). Default
    /// `[0, 0.1, 0.3, 0.5, 0.7, 0.9, 1]`.
    #[serde(default = "iou_options")]
    pub sampler_options: Vec<f64>,
    /// Crops tried per drawn option. Default 40.
    #[serde(default = "iou_trials")]
    pub trials: u32,
    /// Drop the boxes whose centre the crop leaves out at once, with their labels, as the
    /// detection reference's own v1 `RandomIoUCrop` does (no `sanitize_bounding_boxes`
    /// needed); false: torchvision v2's, which makes them zeros for a later
    /// `sanitize_bounding_boxes` to drop. Default false.
    #[serde(default)]
    pub drop_outside: bool,
}

fn iou_min_scale() -> f64 {
    0.3
}
fn iou_min_ratio() -> f64 {
    0.5
}
fn iou_max_ratio() -> f64 {
    2.0
}
fn iou_options() -> Vec<f64> {
    vec![0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0]
}
fn iou_trials() -> u32 {
    40
}

impl Default for RandomIoUCrop {
    /// torchvision's defaults.
    fn default() -> Self {
        Self {
            min_scale: iou_min_scale(),
            max_scale: one(),
            min_aspect_ratio: iou_min_ratio(),
            max_aspect_ratio: iou_max_ratio(),
            sampler_options: iou_options(),
            trials: iou_trials(),
            drop_outside: false,
        }
    }
}

impl OpSpec for RandomIoUCrop {
    fn kind(&self) -> OpKind {
        OpKind::BoxAware
    }
    fn check(&self) -> Result<(), PipelineError> {
        let ranges = 0.0 < self.min_scale
            && self.min_scale <= self.max_scale
            && self.max_scale <= 1.0
            && 0.0 < self.min_aspect_ratio
            && self.min_aspect_ratio <= self.max_aspect_ratio;
        if !ranges
            || self.sampler_options.is_empty()
            || self.sampler_options.iter().any(|o| !o.is_finite())
            || self.trials == 0
        {
            return Err(PipelineError::Parameter(format!("random_iou_crop needs 0 < min_scale <= max_scale <= 1, 0 < min_aspect_ratio <= max_aspect_ratio, finite sampler_options and trials >= 1 (got {self:?})")));
        }
        Ok(())
    }
    /// Box-aware: the plan draws the crop.
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

/// `RandomShortestSize(min_size, max_size, interpolation)`: the image (or the zoom-out's
/// canvas) resized so its shorter side is one of `min_size`, drawn uniformly, unless its
/// longer side would then pass `max_size` (the longer side is then `max_size`); each sample
/// keeps its own size, as torchvision v2's transform and the detection reference's v1 class of
/// that name give it (the reference's `multiscale` augmentation). Detection pipelines, after
/// any zoom-out and flip, as the one resize.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomShortestSize {
    /// The shorter sides to draw from.
    pub min_size: Vec<u32>,
    /// The most the longer side may become. Default none.
    #[serde(default)]
    pub max_size: Option<u32>,
    /// Default bilinear.
    #[serde(default)]
    pub interpolation: Interpolation,
    /// torchvision's `Resize(size, max_size)` arithmetic instead (one `min_size`): the
    /// shorter side to it and the longer in proportion, truncated; then, when the longer
    /// passes `max_size`, the longer to `max_size` and the shorter scaled from the first
    /// result, truncated. Default false.
    #[serde(default)]
    pub as_resize: bool,
}

impl OpSpec for RandomShortestSize {
    fn kind(&self) -> OpKind {
        OpKind::BoxAware
    }
    fn check(&self) -> Result<(), PipelineError> {
        if self.min_size.is_empty() || self.min_size.contains(&0) || self.max_size == Some(0) {
            return Err(PipelineError::Parameter(format!(
                "random_shortest_size needs one or more min_size above 0 and a max_size above 0 (got {:?} and {:?})",
                self.min_size, self.max_size
            )));
        }
        if self.interpolation == Interpolation::Random {
            return Err(PipelineError::Parameter(
                "random_shortest_size takes one interpolation, not random".into(),
            ));
        }
        if self.as_resize
            && (self.min_size.len() != 1 || self.max_size.is_some_and(|m| m <= self.min_size[0]))
        {
            return Err(PipelineError::Parameter(format!(
                "random_shortest_size with as_resize takes one min_size below max_size (got {:?} and {:?})",
                self.min_size, self.max_size
            )));
        }
        Ok(())
    }
    /// Box-aware: the plan draws the size.
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

/// torchvision's `_compute_resized_output_size` for `Resize(short, max_size)`: the output
/// `(height, width)` of a `width`x`height` image, in Python floats, each side truncated.
fn resize_output_size(short: u32, max_size: Option<u32>, width: u32, height: u32) -> (u32, u32) {
    let (lo, hi) = (width.min(height), width.max(height));
    let mut new_short = short;
    let mut new_long = (f64::from(short) * f64::from(hi) / f64::from(lo)) as u32;
    if let Some(max) = max_size.filter(|&m| new_long > m) {
        new_short = (f64::from(max) * f64::from(new_short) / f64::from(new_long)) as u32;
        new_long = max;
    }
    let (new_short, new_long) = (new_short.max(1), new_long.max(1));
    if width <= height {
        (new_long, new_short)
    } else {
        (new_short, new_long)
    }
}

impl RandomShortestSize {
    /// The output `(height, width)` for a `width`x`height` input and the drawn shorter side:
    /// torchvision's ratio in Python floats, each side truncated.
    fn size_for(&self, short: u32, width: u32, height: u32) -> (u32, u32) {
        if self.as_resize {
            return resize_output_size(short, self.max_size, width, height);
        }
        let (w, h) = (f64::from(width), f64::from(height));
        let mut r = f64::from(short) / w.min(h);
        if let Some(max) = self.max_size {
            r = r.min(f64::from(max) / w.max(h));
        }
        // Truncation as Python's `int()`; at least one pixel, as a resize needs one.
        let side = |s: f64| ((s * r) as u32).max(1);
        (side(h), side(w))
    }

    /// `make_params`: one of `min_size` drawn, then the size for it.
    pub(crate) fn draw_size(&self, width: u32, height: u32, rng: &mut CounterRng) -> (u32, u32) {
        let short = self.min_size[rng.below(self.min_size.len() as u64) as usize];
        self.size_for(short, width, height)
    }

    /// The largest `(height, width)` [`Self::draw_size`] can give for a `width`x`height`
    /// input: the ratio grows with the shorter side drawn.
    pub(crate) fn largest(&self, width: u32, height: u32) -> (u32, u32) {
        let short = self.min_size.iter().copied().max().unwrap_or(1);
        self.size_for(short, width, height)
    }

    /// A bound on [`Self::draw_size`]'s `(height, width)` (one of them the shorter side) for
    /// any zoom-out canvas of a `width`x`height` image: a canvas is the image scaled by 1 or
    /// more with each side truncated, so its longer side over its shorter is at most `long /
    /// (short - 1)` of the image's.
    pub(crate) fn largest_on_canvas(&self, width: u32, height: u32) -> (u32, u32) {
        let short = self.min_size.iter().copied().max().unwrap_or(1);
        let (s, l) = (width.min(height), width.max(height));
        let ratio = f64::from(l) / f64::from(s.saturating_sub(1).max(1));
        let mut long = (f64::from(short) * ratio).ceil() as u32 + 1;
        if let Some(max) = self.max_size {
            long = long.min(max);
        }
        (short.max(1), long)
    }
}

/// `ScaleJitter(target_size, scale_range, interpolation)`: large-scale jitter, the image (or
/// the zoom-out's canvas) resized by `min(target_size[1] / height, target_size[0] / width)`
/// times a scale drawn uniformly from `scale_range`, each side truncated; each sample keeps its
/// own size, as torchvision v2's transform and the detection reference's own class of that name
/// give it (the reference's `lsj` augmentation, before its `FixedSizeCrop`). Detection
/// pipelines, after any zoom-out, as the one resize.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleJitter {
    /// The base size, in torchvision's order: `target_size[0]` bounds the width and
    /// `target_size[1]` the height.
    pub target_size: [u32; 2],
    /// The range of the scale drawn. Default `[0.1, 2]`.
    #[serde(default = "jitter_range")]
    pub scale_range: [f64; 2],
    /// Default bilinear.
    #[serde(default)]
    pub interpolation: Interpolation,
}

fn jitter_range() -> [f64; 2] {
    [0.1, 2.0]
}

impl OpSpec for ScaleJitter {
    fn kind(&self) -> OpKind {
        OpKind::BoxAware
    }
    fn check(&self) -> Result<(), PipelineError> {
        let [lo, hi] = self.scale_range;
        if self.target_size.contains(&0) || !(0.0 < lo && lo <= hi && hi.is_finite()) {
            return Err(PipelineError::Parameter(format!(
                "scale_jitter needs a target_size above 0 and 0 < scale_range[0] <= scale_range[1] (got {:?} and {:?})",
                self.target_size, self.scale_range
            )));
        }
        if self.interpolation == Interpolation::Random {
            return Err(PipelineError::Parameter(
                "scale_jitter takes one interpolation, not random".into(),
            ));
        }
        Ok(())
    }
    /// Box-aware: the plan draws the size.
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

impl ScaleJitter {
    /// `make_params`: the output `(height, width)` for a `width`x`height` input. The scale is
    /// `scale_range[0] + torch.rand(1) * (scale_range[1] - scale_range[0])` in f32 (the
    /// difference in f64), the base ratio in Python floats, their product and each side in
    /// f32, truncated.
    pub(crate) fn draw_size(&self, width: u32, height: u32, rng: &mut CounterRng) -> (u32, u32) {
        let [lo, hi] = self.scale_range;
        let scale = lo as f32 + rand32(rng) * (hi - lo) as f32;
        self.size_for(scale, width, height)
    }

    /// The output `(height, width)` for a `width`x`height` input at the drawn `scale`.
    fn size_for(&self, scale: f32, width: u32, height: u32) -> (u32, u32) {
        let [tw, th] = self.target_size.map(f64::from);
        let base = (th / f64::from(height)).min(tw / f64::from(width));
        let r = base as f32 * scale;
        // At least one pixel, as a resize needs one (torchvision fails on a side of 0).
        let side = |s: u32| ((s as f32 * r) as u32).max(1);
        (side(height), side(width))
    }

    /// A bound on [`Self::draw_size`]'s `(height, width)` for any input: the base ratio makes
    /// the height at most `target_size[1]` and the width at most `target_size[0]` before the
    /// scale (the extra pixel covers f32 rounding).
    pub(crate) fn largest(&self) -> (u32, u32) {
        let hi = self.scale_range[1] as f32;
        let side = |t: u32| (t as f32 * hi).ceil() as u32 + 1;
        (side(self.target_size[1]), side(self.target_size[0]))
    }
}

/// A detection pipeline's resize to a size drawn per sample.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum DrawnResize {
    /// The multiscale augmentation's shorter side.
    Shortest(RandomShortestSize),
    /// Large-scale jitter.
    Jitter(ScaleJitter),
}

impl DrawnResize {
    pub fn interpolation(&self) -> Interpolation {
        match self {
            Self::Shortest(r) => r.interpolation,
            Self::Jitter(j) => j.interpolation,
        }
    }

    /// The sample's output `(height, width)` for a `width`x`height` window.
    pub fn draw_size(&self, width: u32, height: u32, rng: &mut CounterRng) -> (u32, u32) {
        match self {
            Self::Shortest(r) => r.draw_size(width, height, rng),
            Self::Jitter(j) => j.draw_size(width, height, rng),
        }
    }

    /// A bound on the output's `(height, width)` for a `width`x`height` image, on a zoom-out
    /// canvas of it when `canvas` (for [`RandomShortestSize`], one of the pair is the shorter
    /// side and the other the longer).
    pub fn largest(&self, width: u32, height: u32, canvas: bool) -> (u32, u32) {
        match self {
            Self::Shortest(r) if canvas => r.largest_on_canvas(width, height),
            Self::Shortest(r) => r.largest(width, height),
            Self::Jitter(j) => j.largest(),
        }
    }
}

/// `FixedSizeCrop(size, fill)`, the detection reference's own transform (its `lsj`
/// augmentation, after `ScaleJitter`): a crop of at most `size` at one drawn fraction of the
/// spare rows and columns, then padding with `fill` below and to the right up to `size`. Boxes
/// are shifted, clamped and those left empty dropped, with their labels, only when something
/// was cut. Every output is `size`. Detection pipelines, after the resize and before the flip.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedSizeCrop {
    /// The output's `[height, width]`.
    pub size: [u32; 2],
    /// The padding's colour. Default black.
    #[serde(default)]
    pub fill: [u8; 3],
}

impl OpSpec for FixedSizeCrop {
    fn kind(&self) -> OpKind {
        OpKind::BoxAware
    }
    fn check(&self) -> Result<(), PipelineError> {
        if self.size.contains(&0) {
            return Err(PipelineError::Parameter(format!(
                "fixed_size_crop needs a size above 0 (got {:?})",
                self.size
            )));
        }
        Ok(())
    }
    /// Box-aware: the plan draws the crop.
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

/// A sample's `FixedSizeCrop`, drawn: the part of the (resized) window kept, placed at the
/// output's top-left corner with the fill beyond it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FixedCrop {
    /// The `(height, width)` it cuts from: the resize's, or the window's without one.
    pub before: (u32, u32),
    /// The cut's `(top, left)` there.
    pub at: (u32, u32),
    /// The cut's `(height, width)`: `before` limited to the output's size.
    pub content: (u32, u32),
    /// Whether anything was cut (only then does the reference move and drop boxes).
    pub cropped: bool,
    /// The output's `(height, width)`.
    pub size: (u32, u32),
    /// The padding's colour.
    pub fill: [u8; 3],
}

/// The reference's `FixedSizeCrop.forward` on a `before` `(height, width)` image: one
/// `torch.rand(1)` for both offsets, each `int(spare * r)` in f32, drawn only when the image
/// is larger than `size` on a side.
pub(crate) fn fixed_crop(
    spec: &FixedSizeCrop,
    before: (u32, u32),
    rng: &mut CounterRng,
) -> FixedCrop {
    let [sh, sw] = spec.size;
    let (h, w) = before;
    let content = (h.min(sh), w.min(sw));
    let cropped = content != before;
    let at = if cropped {
        let r = rand32(rng);
        let offset = |spare: u32| (spare as f32 * r) as u32;
        (offset(h.saturating_sub(sh)), offset(w.saturating_sub(sw)))
    } else {
        (0, 0)
    };
    FixedCrop {
        before,
        at,
        content,
        cropped,
        size: (sh, sw),
        fill: spec.fill,
    }
}

/// A sample's boxes for its plan: `[x1, y1, x2, y2]` each, in the image's pixels, and whether
/// torchvision holds them as integers (the v2 wrapper's int64 boxes of an annotation file that
/// writes every box of the image as integers: its resize then truncates the scaled
/// coordinates; every other step keeps whole numbers whole in float32 too).
#[derive(Clone, Copy, Debug, Default)]
pub struct SampleBoxes<'a> {
    /// `[x1, y1, x2, y2]` per object.
    pub boxes: &'a [[f32; 4]],
    /// Held as int64.
    pub integer: bool,
}

impl<'a> SampleBoxes<'a> {
    /// Boxes held in float32.
    pub fn floats(boxes: &'a [[f32; 4]]) -> Self {
        Self {
            boxes,
            integer: false,
        }
    }
}

/// `SanitizeBoundingBoxes(min_size, min_area)`: drops boxes smaller than `min_size` on a side
/// or `min_area` in area, or reaching outside the image, with their labels.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SanitizeBoundingBoxes {
    /// Default 1.
    #[serde(default = "one")]
    pub min_size: f64,
    /// Default 1.
    #[serde(default = "one")]
    pub min_area: f64,
}

impl Default for SanitizeBoundingBoxes {
    /// torchvision's defaults.
    fn default() -> Self {
        Self {
            min_size: 1.0,
            min_area: 1.0,
        }
    }
}

impl OpSpec for SanitizeBoundingBoxes {
    fn kind(&self) -> OpKind {
        OpKind::BoxAware
    }
    fn check(&self) -> Result<(), PipelineError> {
        let Self { min_size, min_area } = *self;
        if !(min_size >= 0.0 && min_area >= 0.0 && min_size.is_finite() && min_area.is_finite()) {
            return Err(PipelineError::Parameter(format!("sanitize_bounding_boxes min_size {min_size} and min_area {min_area} must be finite and >= 0")));
        }
        Ok(())
    }
    /// Box-aware: the plan sanitizes the boxes.
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

/// `ClampBoundingBoxes()`: each box's corners clamped to the canvas where it stands (the
/// window before the resize, or the output after it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClampBoundingBoxes {}

impl OpSpec for ClampBoundingBoxes {
    fn kind(&self) -> OpKind {
        OpKind::BoxAware
    }
    fn check(&self) -> Result<(), PipelineError> {
        Ok(())
    }
    /// Box-aware: the plan clamps the boxes.
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

/// What a detection pipeline does to the boxes beyond moving them, where it stands.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct BoxSteps {
    /// `ClampBoundingBoxes`, and whether it stands before the resize (it comes before any
    /// `SanitizeBoundingBoxes`, and after the zoom-out and IoU crop).
    pub clamp_before_resize: Option<bool>,
    pub sanitize: Option<SanitizeSpec>,
}

/// `SanitizeBoundingBoxes` where it stands.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SanitizeSpec {
    pub spec: SanitizeBoundingBoxes,
    /// Placed before the resize: sizes and bounds are in the window's pixels, not the output's.
    pub before_resize: bool,
}

impl SanitizeSpec {
    /// Keeps the boxes (and their entries of `kept`) that torchvision's
    /// `SanitizeBoundingBoxes` keeps on a `width`x`height` canvas.
    fn retain(&self, boxes: &mut Vec<[f32; 4]>, kept: &mut Vec<u32>, width: u32, height: u32) {
        let (min_size, min_area) = (self.spec.min_size as f32, self.spec.min_area as f32);
        let (w_max, h_max) = (width as f32, height as f32);
        let valid = |x: &[f32; 4]| {
            let (w, h) = (x[2] - x[0], x[3] - x[1]);
            w >= min_size
                && h >= min_size
                && x.iter().all(|&v| v >= 0.0)
                && w * h >= min_area
                && x[0] <= w_max
                && x[2] <= w_max
                && x[1] <= h_max
                && x[3] <= h_max
        };
        retain_boxes(boxes, kept, valid);
    }
}

/// Keeps the boxes that pass `keep`, and their entries of `kept`.
fn retain_boxes(boxes: &mut Vec<[f32; 4]>, kept: &mut Vec<u32>, keep: impl Fn(&[f32; 4]) -> bool) {
    let mut k = 0;
    kept.retain(|_| {
        k += 1;
        keep(&boxes[k - 1])
    });
    boxes.retain(keep);
}

/// Draws of `RandomIoUCrop`'s outer loop (an option each) before it leaves the image as it
/// is. torchvision loops until it finds a crop or draws an option of 1 or more; with no box,
/// and no such option, it would loop forever.
const MAX_IOU_ROUNDS: u32 = 1000;

/// One sample's canvas, window, flip and boxes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DetectPlan {
    /// Canvas `(width, height)`.
    pub canvas: (u32, u32),
    /// Where the image's top-left corner lies on the canvas.
    pub image_at: (u32, u32),
    /// The canvas's colour around the image.
    pub fill: [u8; 3],
    /// The window of the canvas kept: `[left, top, width, height]`.
    pub window: [u32; 4],
    /// Mirrored left to right (after the window is cut out).
    pub flip: bool,
    /// The output's `(height, width)`: the resize's, or the window's without one.
    pub size: (u32, u32),
    /// The boxes kept, in the output's pixels.
    pub boxes: Vec<[f32; 4]>,
    /// For each kept box, its object's position in the image's objects.
    pub kept: Vec<u32>,
    /// A `FixedSizeCrop` of the resized window (its cut placed at the output's top-left
    /// corner, the fill beyond it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed: Option<FixedCrop>,
}

impl DetectPlan {
    /// The part of the window the image covers, in the image's pixels:
    /// `[left, top, width, height]`; `None` when the window shows only the fill.
    pub fn image_part(&self, width: u32, height: u32) -> Option<[u32; 4]> {
        let [wl, wt, ww, wh] = self.window;
        let (il, it) = self.image_at;
        let x0 = wl.max(il);
        let y0 = wt.max(it);
        let x1 = (wl + ww).min(il + width);
        let y1 = (wt + wh).min(it + height);
        (x0 < x1 && y0 < y1).then(|| [x0 - il, y0 - it, x1 - x0, y1 - y0])
    }

    /// Whether the window lies inside the image (no fill shows).
    pub fn window_inside_image(&self, width: u32, height: u32) -> bool {
        let [wl, wt, ww, wh] = self.window;
        let (il, it) = self.image_at;
        wl >= il && wt >= it && wl + ww <= il + width && wt + wh <= it + height
    }
}

/// A uniform `f32` in `[0, 1)` with 24 random bits, as `torch.rand` draws.
fn rand32(rng: &mut CounterRng) -> f32 {
    (rng.next_u64() >> 40) as f32 * (1.0 / (1u32 << 24) as f32)
}

/// torchvision's `RandomZoomOut.make_params` after its coin: the canvas size and where the
/// image lies on it.
pub(crate) fn zoom_out(
    spec: &RandomZoomOut,
    width: u32,
    height: u32,
    rng: &mut CounterRng,
) -> Option<((u32, u32), (u32, u32))> {
    // `if torch.rand(1) >= self.p: return inputs`
    if f64::from(rand32(rng)) >= spec.p {
        return None;
    }
    // `side_range[0] + torch.rand(1) * (side_range[1] - side_range[0])`: the difference in
    // f64, the rest in f32.
    let [lo, hi] = spec.side_range;
    let r = lo as f32 + rand32(rng) * (hi - lo) as f32;
    let canvas_w = (width as f32 * r) as u32;
    let canvas_h = (height as f32 * r) as u32;
    let (a, b) = (rand32(rng), rand32(rng));
    let left = ((canvas_w - width) as f32 * a) as u32;
    let top = ((canvas_h - height) as f32 * b) as u32;
    Some(((canvas_w, canvas_h), (left, top)))
}

/// The largest canvas [`zoom_out`] can draw for a `width`x`height` image (the image itself
/// without a zoom-out): a bound on every window's size.
pub(crate) fn largest_canvas(zoom: Option<&RandomZoomOut>, width: u32, height: u32) -> (u32, u32) {
    match zoom {
        None => (width, height),
        Some(z) => {
            // The drawn ratio is below `side_range[1]` but for f32 rounding, which the extra
            // pixel covers.
            let r = z.side_range[1] as f32;
            let side = |s: u32| (s as f32 * r).ceil() as u32 + 1;
            (side(width), side(height))
        }
    }
}

/// Intersection over union of two `[x1, y1, x2, y2]` boxes, as `box_iou` computes it in `f32`.
fn iou(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    let area = |x: &[f32; 4]| (x[2] - x[0]) * (x[3] - x[1]);
    let w = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let h = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = w * h;
    inter / (area(a) + area(b) - inter)
}

/// torchvision's `RandomIoUCrop.make_params`: a crop `[left, top, width, height]` of the
/// `width`x`height` canvas holding the centre of at least one box, and with at least one
/// such box at the IoU the drawn option asks; `None` leaves the canvas as it is.
pub(crate) fn iou_crop(
    spec: &RandomIoUCrop,
    width: u32,
    height: u32,
    boxes: &[[f32; 4]],
    rng: &mut CounterRng,
) -> Option<[u32; 4]> {
    let (min_scale, span) = (
        spec.min_scale as f32,
        (spec.max_scale - spec.min_scale) as f32,
    );
    for _ in 0..MAX_IOU_ROUNDS {
        let min_iou = spec.sampler_options[rng.below(spec.sampler_options.len() as u64) as usize];
        if min_iou >= 1.0 {
            return None;
        }
        for _ in 0..spec.trials {
            let (a, b) = (rand32(rng), rand32(rng));
            let new_w = (width as f32 * (min_scale + span * a)) as u32;
            let new_h = (height as f32 * (min_scale + span * b)) as u32;
            // Python's `new_w / new_h` (a float; a zero height gives +inf or NaN).
            let aspect = f64::from(new_w) / f64::from(new_h);
            if !(spec.min_aspect_ratio <= aspect && aspect <= spec.max_aspect_ratio) {
                continue;
            }
            let (a, b) = (rand32(rng), rand32(rng));
            let left = ((width - new_w) as f32 * a) as u32;
            let top = ((height - new_h) as f32 * b) as u32;
            let (right, bottom) = (left + new_w, top + new_h);
            if left == right || top == bottom {
                continue;
            }
            let window = [left as f32, top as f32, right as f32, bottom as f32];
            let mut any = false;
            let mut best = f32::NEG_INFINITY;
            for b in boxes {
                let cx = 0.5 * (b[0] + b[2]);
                let cy = 0.5 * (b[1] + b[3]);
                if window[0] < cx && cx < window[2] && window[1] < cy && cy < window[3] {
                    any = true;
                    best = best.max(iou(b, &window));
                }
            }
            // `ious.max() < min_jaccard_overlap` is false for NaN, as in torch.
            if !any || best < min_iou as f32 {
                continue;
            }
            return Some([left, top, new_w, new_h]);
        }
    }
    None
}

/// torchvision's box clamp: x into `[0, width]`, y into `[0, height]`.
fn clamp(b: &mut [f32; 4], width: u32, height: u32) {
    let (w, h) = (width as f32, height as f32);
    b[0] = b[0].clamp(0.0, w);
    b[2] = b[2].clamp(0.0, w);
    b[1] = b[1].clamp(0.0, h);
    b[3] = b[3].clamp(0.0, h);
}

/// What a sample's detection geometry is made of, drawn.
#[derive(Default)]
pub(crate) struct Drawn {
    pub zoom: Option<((u32, u32), (u32, u32))>,
    pub crop: Option<[u32; 4]>,
    pub flip: bool,
    /// The flip comes after the resize (as the multiscale augmentation puts it): boxes are
    /// mirrored in the output's width, as torchvision computes them there.
    pub flip_after_resize: bool,
    /// The crop drops the boxes whose centre it leaves out ([`RandomIoUCrop::drop_outside`]).
    pub drop_outside: bool,
    /// A `FixedSizeCrop` after the resize (before the flip, which then mirrors in its width).
    pub fixed: Option<FixedCrop>,
}

/// Moves `boxes` of a `width`x`height` image through the drawn geometry and the resize to
/// `out` (`(height, width)`; `None`: no resize, the output is the window), then sanitizes them
/// when asked; returns the plan.
pub(crate) fn transform_boxes(
    drawn: &Drawn,
    fill: [u8; 3],
    width: u32,
    height: u32,
    boxes: SampleBoxes<'_>,
    out: Option<(u32, u32)>,
    steps: BoxSteps,
) -> DetectPlan {
    let BoxSteps {
        clamp_before_resize,
        sanitize,
    } = steps;
    let ((cw, ch), mut b) = on_canvas(boxes.boxes, drawn.zoom, width, height);
    let image_at = drawn.zoom.map_or((0, 0), |(_, at)| at);
    let mut window = [0, 0, cw, ch];
    let mut kept: Vec<u32> = (0..b.len() as u32).collect();
    if let Some([left, top, w, h]) = drawn.crop {
        let (l, t) = (left as f32, top as f32);
        let (r, bt) = ((left + w) as f32, (top + h) as f32);
        let within = |x: &[f32; 4]| {
            let cx = 0.5 * (x[0] + x[2]);
            let cy = 0.5 * (x[1] + x[3]);
            l < cx && cx < r && t < cy && cy < bt
        };
        if drawn.drop_outside {
            retain_boxes(&mut b, &mut kept, within);
        }
        for x in &mut b {
            // Decided on the boxes before the crop: outside the window, a box becomes zeros
            // for SanitizeBoundingBoxes to drop (none is left when they were dropped).
            let outside = !within(x);
            *x = [x[0] - l, x[1] - t, x[2] - l, x[3] - t];
            clamp(x, w, h);
            if outside {
                *x = [0.0; 4];
            }
        }
        window = [left, top, w, h];
    }
    let (ww, wh) = (window[2], window[3]);
    let mirror = |b: &mut Vec<[f32; 4]>, w: u32| {
        let w = w as f32;
        for x in b {
            *x = [-(x[2] - w), x[1], -(x[0] - w), x[3]];
        }
    };
    if drawn.flip && !drawn.flip_after_resize {
        mirror(&mut b, ww);
    }
    // (A mirror keeps boxes inside the canvas inside: the clamp commutes with the flip.)
    if clamp_before_resize == Some(true) {
        b.iter_mut().for_each(|x| clamp(x, ww, wh));
    }
    if let Some(s) = sanitize.filter(|s| s.before_resize) {
        s.retain(&mut b, &mut kept, ww, wh);
    }
    let (oh, ow) = out.unwrap_or((wh, ww));
    if (oh, ow) != (wh, ww) {
        // Python floats, then a float32 tensor of the ratios.
        let rx = (f64::from(ow) / f64::from(ww)) as f32;
        let ry = (f64::from(oh) / f64::from(wh)) as f32;
        for x in &mut b {
            *x = [x[0] * rx, x[1] * ry, x[2] * rx, x[3] * ry];
            if boxes.integer {
                // int64 boxes: the float32 products cast back, toward zero.
                *x = x.map(f32::trunc);
            }
        }
    }
    let (oh, ow) = match &drawn.fixed {
        None => (oh, ow),
        Some(f) => {
            if f.cropped {
                // The reference's `_crop`: shifted, clamped to the cut, empty boxes dropped.
                let ((top, left), (ch, cw)) = (f.at, f.content);
                let (l, t) = (left as f32, top as f32);
                for x in &mut b {
                    *x = [x[0] - l, x[1] - t, x[2] - l, x[3] - t];
                    clamp(x, cw, ch);
                }
                retain_boxes(&mut b, &mut kept, |x| x[0] < x[2] && x[1] < x[3]);
            }
            // The padding goes below and to the right: boxes stay where they are.
            f.size
        }
    };
    if drawn.flip && drawn.flip_after_resize {
        mirror(&mut b, ow);
    }
    if clamp_before_resize == Some(false) {
        b.iter_mut().for_each(|x| clamp(x, ow, oh));
    }
    if let Some(s) = sanitize.filter(|s| !s.before_resize) {
        s.retain(&mut b, &mut kept, ow, oh);
    }
    DetectPlan {
        canvas: (cw, ch),
        image_at,
        fill,
        window,
        flip: drawn.flip,
        size: (oh, ow),
        boxes: b,
        kept,
        fixed: drawn.fixed,
    }
}

/// Cuts `plan`'s window out of the canvas around the `width`x`height` RGB8 image `rgb` into
/// `out` (resized to the window's size), the fill where the image does not reach.
pub(crate) fn compose_window(
    plan: &DetectPlan,
    rgb: &[u8],
    width: u32,
    height: u32,
    out: &mut Vec<u8>,
) {
    let [wl, wt, ww, wh] = plan.window;
    let (ww, wh) = (ww as usize, wh as usize);
    out.clear();
    out.reserve(ww * wh * 3);
    for _ in 0..ww * wh {
        out.extend_from_slice(&plan.fill);
    }
    if let Some([x, y, w, h]) = plan.image_part(width, height) {
        let (il, it) = plan.image_at;
        // The part's top-left corner in the window.
        let dx = (il + x - wl) as usize;
        let dy = (it + y - wt) as usize;
        let (x, w) = (x as usize, w as usize);
        for row in 0..h as usize {
            let src = ((y as usize + row) * width as usize + x) * 3;
            let dst = ((dy + row) * ww + dx) * 3;
            out[dst..dst + w * 3].copy_from_slice(&rgb[src..src + w * 3]);
        }
    }
}

/// A detection sample's steps before the resize on the media engine, for a sample whose
/// photometric steps run on the whole image or whose window shows the zoom-out's fill: the
/// engine decodes a region of the image at a DCT-domain scale (all of it when a step needs the whole
/// image's statistics, as a contrast's mean grey does), runs `pre` on it, and resamples the
/// window from it with the fill around the image ([`CanvasJob::run`]).
#[derive(Clone, Debug, PartialEq)]
pub struct CanvasJob {
    /// The image's `(width, height)`.
    pub image: (u32, u32),
    /// The pixel ops on the image before the geometry.
    pub pre: Vec<PixelOp>,
    /// The window in the image's full-size pixels, `[left, top, width, height]`: it reaches
    /// outside the image where the fill shows.
    pub window: [i64; 4],
    /// The canvas's colour around the image.
    pub fill: [u8; 3],
    /// The resize's filter.
    pub interpolation: Interpolation,
}

impl CanvasJob {
    /// Runs on `decoded`, the RGB8 rectangle `[x, y, width, height]` of the image at `scale`
    /// (what the engine's region decode gives): `pre` in place, then the window on the fill
    /// canvas (in `canvas`, at the decoded scale) resampled to `resampler`'s output size. At
    /// full scale the window is cut out whole, as the CPU path cuts it; scaled, it is
    /// resampled from its fractional place.
    ///
    /// # Errors
    /// `decoded` is short, or the resize fails.
    pub fn run<'a>(
        &self,
        decoded: &mut [u8],
        rect: [u32; 4],
        scale: Scale,
        canvas: &mut Vec<u8>,
        resampler: &'a mut super::kernel::Resampler,
        scratch: &mut super::pixel::Scratch,
    ) -> Result<&'a mut [u8], super::error::AugmentError> {
        let [rx, ry, rw, rh] = rect.map(|v| v as usize);
        if decoded.len() < rw * rh * 3 {
            return Err(super::error::AugmentError::ShortRegion);
        }
        super::run::apply(&self.pre, decoded, rh, rw, scratch);
        let [wl, wt, ww, wh] = self.window.map(|v| scale.of(v as f64));
        // The canvas covers the window's scaled pixels, whole.
        let (x0, y0) = (wl.floor() as i64, wt.floor() as i64);
        let (x1, y1) = ((wl + ww).ceil() as i64, (wt + wh).ceil() as i64);
        let (cw, ch) = ((x1 - x0) as usize, (y1 - y0) as usize);
        // The window at `(left, top)` of an image; integer at full scale, so cut out as the
        // CPU path cuts it.
        let window_at = |left: f64, top: f64| super::geometry::CropBox {
            left,
            top,
            width: ww,
            height: wh,
            view: scale.is_full(),
        };
        let inside =
            x0 >= rx as i64 && y0 >= ry as i64 && x1 <= (rx + rw) as i64 && y1 <= (ry + rh) as i64;
        if inside {
            // No fill shows: resample the window straight from the decoded rectangle.
            let crop = window_at(wl - rx as f64, wt - ry as f64);
            return resampler.run_with(decoded, rw as u32, rh as u32, &crop, self.interpolation);
        }
        canvas.clear();
        canvas.resize(cw * ch * 3, 0);
        for px in canvas.chunks_exact_mut(3) {
            px.copy_from_slice(&self.fill);
        }
        // The decoded rectangle's overlap with the canvas, in scaled image pixels.
        let (ox0, ox1) = (x0.max(rx as i64), x1.min((rx + rw) as i64));
        let (oy0, oy1) = (y0.max(ry as i64), y1.min((ry + rh) as i64));
        if ox0 < ox1 {
            let n = (ox1 - ox0) as usize * 3;
            for y in oy0..oy1 {
                let src = ((y as usize - ry) * rw + (ox0 as usize - rx)) * 3;
                let dst = ((y - y0) as usize * cw + (ox0 - x0) as usize) * 3;
                canvas[dst..dst + n].copy_from_slice(&decoded[src..src + n]);
            }
        }
        let crop = window_at(wl - x0 as f64, wt - y0 as f64);
        resampler.run_with(canvas, cw as u32, ch as u32, &crop, self.interpolation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::augment::{CropBox, Interpolation, PixelOp, Resampler, Scratch};
    use crate::rng::Stream;

    /// A `w`x`h` RGB8 test image with gradients in every channel.
    fn gradient(w: usize, h: usize) -> Vec<u8> {
        (0..w * h * 3)
            .map(|i| ((i / 3 % w) * 7 + (i / 3 / w) * 5 + (i % 3) * 60) as u8)
            .collect()
    }

    #[test]
    fn the_engines_canvas_at_full_scale_is_the_cpu_paths_window_then_resize() {
        let (w, h) = (120u32, 90u32);
        let image = gradient(w as usize, h as usize);
        let pre = vec![
            PixelOp::Brightness(1.2),
            PixelOp::PermuteChannels([2, 0, 1]),
        ];
        // Windows reaching past each edge, one inside, and one showing only the fill.
        for window in [
            [-30, -20, 100, 80],
            [50, 40, 110, 90],
            [10, 5, 60, 50],
            [130, 0, 40, 40],
        ] {
            let job = CanvasJob {
                image: (w, h),
                pre: pre.clone(),
                window,
                fill: [123, 117, 104],
                interpolation: Interpolation::Bilinear,
            };
            let mut resampler = Resampler::new(32, 48);
            let (mut canvas, mut scratch) = (Vec::new(), Scratch::default());
            let mut decoded = image.clone();
            let engine = job
                .run(
                    &mut decoded,
                    [0, 0, w, h],
                    Scale::FULL,
                    &mut canvas,
                    &mut resampler,
                    &mut scratch,
                )
                .unwrap()
                .to_vec();
            // The CPU path: ops on the image, the window cut out of the canvas, resized.
            let mut rgb = image.clone();
            crate::augment::apply(&pre, &mut rgb, h as usize, w as usize, &mut scratch);
            let [wl, wt, ww, wh] = window;
            let (il, it) = ((-wl.min(0)) as u32, (-wt.min(0)) as u32);
            let plan = DetectPlan {
                canvas: (il + w.max((wl + ww) as u32), it + h.max((wt + wh) as u32)),
                image_at: (il, it),
                fill: job.fill,
                window: [
                    (wl + il as i64) as u32,
                    (wt + it as i64) as u32,
                    ww as u32,
                    wh as u32,
                ],
                flip: false,
                size: (32, 48),
                boxes: Vec::new(),
                kept: Vec::new(),
                fixed: None,
            };
            let mut cut = Vec::new();
            compose_window(&plan, &rgb, w, h, &mut cut);
            let whole = CropBox {
                left: 0.0,
                top: 0.0,
                width: ww as f64,
                height: wh as f64,
                view: true,
            };
            let mut cpu = Resampler::new(32, 48);
            let cpu = cpu
                .run_with(&cut, ww as u32, wh as u32, &whole, Interpolation::Bilinear)
                .unwrap();
            assert_eq!(engine, cpu, "window {window:?}");
        }
    }

    fn no_sanitize(drawn: &Drawn, boxes: &[[f32; 4]], out: (u32, u32)) -> DetectPlan {
        transform_boxes(
            drawn,
            [0; 3],
            100,
            80,
            SampleBoxes::floats(boxes),
            Some(out),
            BoxSteps::default(),
        )
    }

    #[test]
    fn a_clamp_holds_boxes_to_the_canvas_where_it_stands() {
        let drawn = Drawn::default();
        let boxes = [[-10.0, 5.0, 120.0, 90.0]];
        let resized = |clamp_before_resize| {
            let steps = BoxSteps {
                clamp_before_resize,
                sanitize: None,
            };
            let floats = SampleBoxes::floats(&boxes);
            transform_boxes(&drawn, [0; 3], 100, 80, floats, Some((40, 50)), steps).boxes
        };
        // 100x80 to 40x50 (height, width): clamped to the image, then scaled by 0.5, or
        // scaled, then clamped to the output; not clamped.
        assert_eq!(resized(Some(true)), [[0.0, 2.5, 50.0, 40.0]]);
        assert_eq!(resized(Some(false)), [[0.0, 2.5, 50.0, 40.0]]);
        assert_eq!(resized(None), [[-5.0, 2.5, 60.0, 45.0]]);
    }

    #[test]
    fn integer_boxes_are_truncated_where_the_resize_scales_them_and_mirrored_after() {
        let drawn = Drawn {
            flip: true,
            flip_after_resize: true,
            ..Drawn::default()
        };
        let boxes = [[10.0, 21.0, 33.0, 47.0], [-7.0, -3.0, 5.0, 9.0]];
        let integer = SampleBoxes {
            boxes: &boxes,
            integer: true,
        };
        let p = transform_boxes(
            &drawn,
            [0; 3],
            100,
            80,
            integer,
            Some((37, 53)),
            BoxSteps::default(),
        );
        // x * 0.53, y * 0.4625 in float32, toward zero (int64's cast), then 53 - x.
        assert_eq!(p.boxes, [[36.0, 9.0, 48.0, 21.0], [51.0, -1.0, 56.0, 4.0]]);
        let floats = transform_boxes(
            &drawn,
            [0; 3],
            100,
            80,
            SampleBoxes::floats(&boxes),
            Some((37, 53)),
            BoxSteps::default(),
        );
        assert!(floats.boxes[0].iter().any(|v| v.fract() != 0.0));
    }

    #[test]
    fn zoom_out_shifts_boxes_and_places_the_image_on_the_canvas() {
        let drawn = Drawn {
            zoom: Some(((250, 200), (30, 40))),
            crop: None,
            flip: false,
            flip_after_resize: false,
            drop_outside: false,
            fixed: None,
        };
        let p = no_sanitize(&drawn, &[[10.0, 20.0, 50.0, 60.0]], (200, 250));
        assert_eq!(p.boxes, [[40.0, 60.0, 80.0, 100.0]]);
        assert_eq!(
            (p.canvas, p.image_at, p.window),
            ((250, 200), (30, 40), [0, 0, 250, 200])
        );
        assert_eq!(p.image_part(100, 80), Some([0, 0, 100, 80]));
        assert!(!p.window_inside_image(100, 80));
    }

    #[test]
    fn a_crop_clamps_boxes_and_zeroes_those_whose_centre_it_leaves_out() {
        let drawn = Drawn {
            zoom: None,
            crop: Some([20, 10, 50, 40]),
            flip: false,
            flip_after_resize: false,
            drop_outside: false,
            fixed: None,
        };
        let boxes = [[10.0, 5.0, 40.0, 30.0], [80.0, 60.0, 95.0, 75.0]];
        let p = no_sanitize(&drawn, &boxes, (40, 50));
        assert_eq!(p.boxes, [[0.0, 0.0, 20.0, 20.0], [0.0; 4]]);
        let sanitized = transform_boxes(
            &drawn,
            [0; 3],
            100,
            80,
            SampleBoxes::floats(&boxes),
            Some((40, 50)),
            BoxSteps {
                clamp_before_resize: None,
                sanitize: Some(SanitizeSpec {
                    spec: SanitizeBoundingBoxes::default(),
                    before_resize: false,
                }),
            },
        );
        assert_eq!(sanitized.kept, [0]);
        assert_eq!(sanitized.boxes, [[0.0, 0.0, 20.0, 20.0]]);
    }

    #[test]
    fn the_reference_v1_crop_drops_the_boxes_whose_centre_it_leaves_out() {
        let drawn = Drawn {
            zoom: None,
            crop: Some([20, 10, 50, 40]),
            flip: false,
            flip_after_resize: false,
            drop_outside: true,
            fixed: None,
        };
        let boxes = [
            [80.0, 60.0, 95.0, 75.0],
            [10.0, 5.0, 40.0, 30.0],
            [30.0, 20.0, 30.5, 20.5],
        ];
        let p = no_sanitize(&drawn, &boxes, (40, 50));
        // The third box is half a pixel wide: kept (v1 sanitizes nothing), in its order.
        assert_eq!(p.boxes, [[0.0, 0.0, 20.0, 20.0], [10.0, 10.0, 10.5, 10.5]]);
        assert_eq!(p.kept, [1, 2]);
    }

    #[test]
    fn sanitize_before_the_resize_measures_boxes_in_the_window() {
        let drawn = Drawn {
            zoom: None,
            crop: None,
            flip: false,
            flip_after_resize: false,
            drop_outside: false,
            fixed: None,
        };
        // 0.8 pixels wide in the 100-wide image, 2.4 wide at 300: kept only when sanitized
        // after the resize.
        let boxes = [[10.0, 10.0, 10.8, 40.0], [20.0, 20.0, 60.0, 60.0]];
        let spec = |before_resize| BoxSteps {
            clamp_before_resize: None,
            sanitize: Some(SanitizeSpec {
                spec: SanitizeBoundingBoxes::default(),
                before_resize,
            }),
        };
        let before = transform_boxes(
            &drawn,
            [0; 3],
            100,
            100,
            SampleBoxes::floats(&boxes),
            Some((300, 300)),
            spec(true),
        );
        let after = transform_boxes(
            &drawn,
            [0; 3],
            100,
            100,
            SampleBoxes::floats(&boxes),
            Some((300, 300)),
            spec(false),
        );
        assert_eq!(before.kept, [1]);
        assert_eq!(before.boxes, [[60.0, 60.0, 180.0, 180.0]]);
        assert_eq!(after.kept, [0, 1]);
    }

    #[test]
    fn flip_mirrors_in_the_window_and_resize_scales_each_axis() {
        let drawn = Drawn {
            zoom: None,
            crop: None,
            flip: true,
            flip_after_resize: false,
            drop_outside: false,
            fixed: None,
        };
        let p = no_sanitize(&drawn, &[[10.0, 20.0, 30.0, 60.0]], (40, 300));
        // Mirrored in width 100: [70, 20, 90, 60]; then x * 3, y * 0.5.
        assert_eq!(p.boxes, [[210.0, 10.0, 270.0, 30.0]]);
    }

    #[test]
    fn without_a_resize_the_output_is_the_window_and_boxes_stay_in_its_pixels() {
        let drawn = Drawn {
            zoom: Some(((250, 200), (30, 40))),
            crop: Some([20, 30, 120, 90]),
            flip: true,
            flip_after_resize: false,
            drop_outside: false,
            fixed: None,
        };
        let p = transform_boxes(
            &drawn,
            [0; 3],
            100,
            80,
            SampleBoxes::floats(&[[10.0, 20.0, 50.0, 60.0]]),
            None,
            BoxSteps::default(),
        );
        assert_eq!(p.size, (90, 120));
        // On the canvas [40, 60, 80, 100]; in the window [20, 30, 60, 70]; mirrored in 120.
        assert_eq!(p.boxes, [[60.0, 30.0, 100.0, 70.0]]);
        let zoom = RandomZoomOut {
            fill: [0; 3],
            side_range: [1.0, 4.0],
            p: 1.0,
        };
        assert_eq!(largest_canvas(Some(&zoom), 100, 80), (401, 321));
        for i in 0..200 {
            let mut rng = CounterRng::new(3, 0, i, Stream::Ops);
            if let Some(((w, h), _)) = zoom_out(&zoom, 100, 80, &mut rng) {
                assert!(w <= 401 && h <= 321);
            }
        }
    }

    #[test]
    fn the_iou_crop_keeps_a_box_centre_inside_and_meets_the_drawn_overlap() {
        let spec = RandomIoUCrop::default();
        let boxes = [[30.0, 20.0, 70.0, 60.0]];
        let (mut cropped, mut left_alone) = (0, 0);
        for i in 0..500 {
            let mut rng = CounterRng::new(1, 0, i, Stream::Ops);
            match iou_crop(&spec, 100, 80, &boxes, &mut rng) {
                Some([l, t, w, h]) => {
                    cropped += 1;
                    assert!(l + w <= 100 && t + h <= 80 && w >= 30 && h >= 24);
                    let aspect = f64::from(w) / f64::from(h);
                    assert!((0.5..=2.0).contains(&aspect));
                    assert!((l as f32) < 50.0 && 50.0 < (l + w) as f32);
                    assert!((t as f32) < 40.0 && 40.0 < (t + h) as f32);
                }
                None => left_alone += 1,
            }
        }
        // One option in seven leaves the image as it is (and a few draws find nothing).
        assert!((40..=110).contains(&left_alone), "{left_alone}");
        assert!(cropped > 350);
    }

    #[test]
    fn an_iou_crop_of_an_image_without_boxes_ends_instead_of_looping() {
        let spec = RandomIoUCrop {
            sampler_options: vec![0.5],
            trials: 4,
            ..RandomIoUCrop::default()
        };
        let mut rng = CounterRng::new(1, 0, 0, Stream::Ops);
        assert_eq!(iou_crop(&spec, 100, 80, &[], &mut rng), None);
    }

    #[test]
    fn the_window_shows_the_image_part_on_the_fill() {
        let plan = DetectPlan {
            canvas: (6, 4),
            image_at: (2, 1),
            fill: [9, 9, 9],
            window: [1, 0, 4, 3],
            flip: false,
            size: (3, 4),
            boxes: vec![],
            kept: vec![],
            fixed: None,
        };
        // A 3x2 image of values 1..=6 (grey).
        let rgb: Vec<u8> = (1..=6u8).flat_map(|v| [v; 3]).collect();
        let mut out = Vec::new();
        compose_window(&plan, &rgb, 3, 2, &mut out);
        let grey: Vec<u8> = out.chunks(3).map(|p| p[0]).collect();
        assert_eq!(grey, [9, 9, 9, 9, 9, 1, 2, 3, 9, 4, 5, 6]);
    }

    fn multiscale() -> RandomShortestSize {
        RandomShortestSize {
            min_size: (480..=800).step_by(32).collect(),
            max_size: Some(1333),
            interpolation: Interpolation::Bilinear,
            as_resize: false,
        }
    }

    #[test]
    fn as_resize_gives_torchvisions_resize_sizes_with_and_without_max_size() {
        // (height, width, size, max_size) -> torchvision 0.29's `_compute_resized_output_size`:
        // the cap scales the truncated first result, not the image.
        let cases = [
            ((375, 500, 800, Some(1333)), (800, 1066)),
            ((200, 1000, 800, Some(1333)), (266, 1333)),
            ((1000, 200, 800, Some(1333)), (1333, 266)),
            ((300, 300, 64, None), (64, 64)),
            ((427, 640, 800, Some(1333)), (800, 1199)),
            ((333, 1000, 512, Some(700)), (233, 700)),
            ((701, 467, 480, None), (720, 480)),
        ];
        for ((h, w, size, max_size), want) in cases {
            let r = RandomShortestSize {
                min_size: vec![size],
                max_size,
                interpolation: Interpolation::Bilinear,
                as_resize: true,
            };
            r.check().unwrap();
            let mut rng = CounterRng::new(1, 0, 0, crate::rng::Stream::Crop);
            assert_eq!(
                r.draw_size(w, h, &mut rng),
                want,
                "{h}x{w} to {size}, {max_size:?}"
            );
            let (lh, ll) = r.largest_on_canvas(w, h);
            assert!(want.0.min(want.1) <= lh && want.0.max(want.1) <= ll);
        }
    }

    #[test]
    fn shortest_size_gives_torchvisions_sizes_truncated_and_capped() {
        // (height, width, shorter side) -> torchvision 0.29's `make_params` size.
        let cases = [
            ((480, 640), 480, (480, 640)),
            ((480, 640), 800, (800, 1066)),
            ((427, 640), 480, (479, 719)),
            ((427, 640), 800, (800, 1199)),
            ((640, 359), 480, (855, 480)),
            ((640, 359), 800, (1333, 747)),
            ((200, 1000), 480, (266, 1333)),
            ((333, 500), 800, (800, 1201)),
            ((1, 7), 800, (190, 1333)),
        ];
        let r = multiscale();
        for ((h, w), short, want) in cases {
            assert_eq!(r.size_for(short, w, h), want, "{h}x{w} at {short}");
        }
    }

    #[test]
    fn shortest_size_draws_every_min_size_and_stays_within_its_bounds() {
        let r = multiscale();
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..2000 {
            let mut rng = CounterRng::for_op(7, 0, i, 3);
            let (h, w) = r.draw_size(640, 427, &mut rng);
            seen.insert(h.min(w));
            let (bh, bw) = r.largest(640, 427);
            assert!(h <= bh && w <= bw);
            // Any zoom-out canvas of the image: the bound covers it.
            for scale in [1.0f32, 1.37, 2.9, 3.999] {
                let (cw, ch) = ((427.0 * scale) as u32, (640.0 * scale) as u32);
                let (h, w) = r.draw_size(cw, ch, &mut rng);
                let (s, l) = r.largest_on_canvas(427, 640);
                assert!(
                    h.min(w) <= s && h.max(w) <= l,
                    "{cw}x{ch}: {h}x{w} over {s}x{l}"
                );
            }
        }
        // 479 for 480: the ratio's truncation, as torchvision's.
        assert_eq!(seen.len(), 11, "{seen:?}");
    }

    #[test]
    fn a_flip_after_the_resize_mirrors_boxes_in_the_output_width() {
        let drawn = Drawn {
            zoom: None,
            crop: None,
            flip: true,
            flip_after_resize: true,
            drop_outside: false,
            fixed: None,
        };
        let boxes = [[10.0, 20.0, 30.0, 50.0]];
        // 100x80 to 133x106: scaled by 1.33 and 1.325, then mirrored in 133.
        let p = no_sanitize(&drawn, &boxes, (106, 133));
        let (rx, ry) = ((133.0f64 / 100.0) as f32, (106.0f64 / 80.0) as f32);
        let want = [133.0 - 30.0 * rx, 20.0 * ry, 133.0 - 10.0 * rx, 50.0 * ry];
        assert_eq!(p.boxes, [want]);
        assert_eq!(p.size, (106, 133));
    }

    fn lsj() -> ScaleJitter {
        ScaleJitter {
            target_size: [1024, 1024],
            scale_range: jitter_range(),
            interpolation: Interpolation::Bilinear,
        }
    }

    #[test]
    fn scale_jitter_gives_torchvisions_sizes_for_a_drawn_scale() {
        // (height, width, scale as f32) -> torch 2.15's `make_params` size.
        let cases = [
            ((480, 640), 0.1, (76, 102)),
            ((480, 640), 0.7331, (563, 750)),
            ((480, 640), 1.9999, (1535, 2047)),
            ((427, 640), 1.0, (683, 1024)),
            ((640, 359), 0.7331, (750, 421)),
            ((333, 500), 0.7331, (499, 750)),
            ((1, 7), 0.1, (14, 102)),
        ];
        let j = lsj();
        for ((h, w), scale, want) in cases {
            assert_eq!(j.size_for(scale, w, h), want, "{h}x{w} at {scale}");
        }
        let bound = j.largest();
        for i in 0..2000 {
            let mut rng = CounterRng::for_op(2, 0, i, 1);
            let (h, w) = j.draw_size(427, 640, &mut rng);
            assert!(h <= bound.0 && w <= bound.1 && h >= 1 && w >= 1);
        }
    }

    #[test]
    fn a_fixed_size_crop_cuts_only_what_is_larger_and_draws_one_fraction_for_both_sides() {
        let spec = FixedSizeCrop {
            size: [100, 120],
            fill: [1, 2, 3],
        };
        let mut rng = CounterRng::for_op(1, 0, 0, 2);
        let small = fixed_crop(&spec, (80, 90), &mut rng);
        assert_eq!(
            (small.at, small.content, small.cropped),
            ((0, 0), (80, 90), false)
        );
        for i in 0..200 {
            let mut rng = CounterRng::for_op(1, 0, i, 2);
            let f = fixed_crop(&spec, (300, 150), &mut rng);
            assert_eq!(
                (f.content, f.size, f.cropped),
                ((100, 120), (100, 120), true)
            );
            // One fraction: the left is the top's share of 30 spare columns out of 200 rows.
            let r = f.at.0 as f32 / 200.0;
            assert!(f.at.0 < 200 && f.at.1 < 30);
            assert!((f.at.1 as f32 - 30.0 * r).abs() <= 1.0, "{:?}", f.at);
        }
    }

    #[test]
    fn the_fixed_size_crop_moves_clamps_and_drops_boxes_and_the_flip_mirrors_in_its_width() {
        let fixed = FixedCrop {
            before: (300, 150),
            at: (50, 20),
            content: (100, 120),
            cropped: true,
            size: (100, 200),
            fill: [0; 3],
        };
        let drawn = Drawn {
            zoom: None,
            crop: None,
            flip: true,
            flip_after_resize: true,
            drop_outside: false,
            fixed: Some(fixed),
        };
        // Already at the resized size (no resize): one box inside, one reaching past the cut
        // (clamped), one above it (empty after the clamp: dropped).
        let boxes = [
            [30.0, 60.0, 50.0, 80.0],
            [130.0, 140.0, 149.0, 170.0],
            [10.0, 5.0, 40.0, 45.0],
        ];
        let p = transform_boxes(
            &drawn,
            [0; 3],
            150,
            300,
            SampleBoxes::floats(&boxes),
            None,
            BoxSteps::default(),
        );
        assert_eq!(p.size, (100, 200));
        assert_eq!(p.kept, [0, 1]);
        // Cut: [10, 10, 30, 30] and [110, 90, 120, 100]; mirrored in the padded width 200.
        assert_eq!(
            p.boxes,
            [[170.0, 10.0, 190.0, 30.0], [80.0, 90.0, 90.0, 100.0]]
        );
        // Nothing cut: boxes neither clamped nor dropped, only padded around.
        let whole = FixedCrop {
            before: (80, 90),
            at: (0, 0),
            content: (80, 90),
            cropped: false,
            size: (100, 120),
            fill: [0; 3],
        };
        let drawn = Drawn {
            fixed: Some(whole),
            flip: false,
            ..drawn
        };
        let past = [[-1.0, 0.0, 0.0, 5.0]];
        let p = transform_boxes(
            &drawn,
            [0; 3],
            90,
            80,
            SampleBoxes::floats(&past),
            None,
            BoxSteps::default(),
        );
        assert_eq!((p.boxes.as_slice(), p.size), (&past[..], (100, 120)));
    }
}
