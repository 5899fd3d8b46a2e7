//! Augmentation: a declarative [`Pipeline`] of ops with torchvision's semantics, validated into
//! a `Plan`. For each sample the plan draws a [`SamplePlan`] once, from the counter-based
//! generator keyed by `(seed, epoch, index)`: the crop window and interpolation, then the pixel
//! ops (flips, colour, auto-augment, blur, warps) with their magnitudes and order, and the
//! erase boxes. Both paths execute that same plan: crop + resize to an RGB8 image, the pixel
//! ops on it ([`apply`]), then flip + normalize + cast + layout into the batch slot
//! ([`OutputWriter`]) and the erase boxes on the written slot.
//!
//! Files by family: `geometry.rs` (crop windows, flips, affine warps), `colour.rs`, `blur.rs`
//! (Gaussian blur, sharpness), `autoaugment.rs` (the policies), `erase.rs`, `kernel.rs` (the
//! resampler and the output writer), `mix.rs` (MixUp and CutMix, on whole batches).

mod autoaugment;
mod blur;
mod colour;
pub(crate) mod detect;
mod erase;
mod geometry;
mod kernel;
pub mod mix;
mod pil;
mod timm;

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use autoaugment::{AugMixPlan, AutoAugmentPolicy};
pub use detect::{CanvasJob, DetectPlan};
pub use erase::{EraseBox, EraseValue, RandomFill};
pub use geometry::{CropBox, Warp};
pub use kernel::{OutputWriter, Resampler};
pub use pil::{Enhance as PilEnhance, Filter as PilFilter};
pub use timm::{Hparams as TimmHparams, PolicyOp as TimmPolicyOp, TimmOp};

use crate::hpu::{Dtype, Layout};
use crate::rng::{CounterRng, Stream};
use crate::Error;
use erase::EraseSpec;

/// An output size: one number for a square, or `[height, width]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Size {
    /// `size x size`.
    Square(u32),
    /// `[height, width]`.
    HeightWidth([u32; 2]),
}

impl Size {
    /// `(height, width)`.
    pub fn hw(self) -> (u32, u32) {
        match self {
            Self::Square(s) => (s, s),
            Self::HeightWidth([h, w]) => (h, w),
        }
    }
}

/// How a resize or a warp samples the source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Interpolation {
    /// Nearest neighbour (torch's `nearest`: source index `floor(i * in / out)`).
    Nearest,
    /// Antialiased bilinear (Pillow's filter, which torchvision's antialiased tensor resize
    /// reproduces).
    #[default]
    Bilinear,
    /// Antialiased bicubic (Pillow's, `a = -0.5`).
    Bicubic,
    /// Bilinear or bicubic with equal probability, per sample (timm's `'random'`).
    Random,
}

impl Interpolation {
    /// The media engine's filter for a drawn interpolation (`Random` is never drawn).
    pub fn filter(self) -> hpuload_decoders::jpeg::Filter {
        use hpuload_decoders::jpeg::Filter;
        match self {
            Self::Nearest => Filter::Nearest,
            Self::Bicubic => Filter::Bicubic,
            Self::Bilinear | Self::Random => Filter::Bilinear,
        }
    }
}

/// One augmentation step, with torchvision's semantics (the v2 tensor kernels on uint8 images
/// are the reference). Geometry (a crop and/or resize) comes first; then pixel ops on the
/// RGB8 image at the output size; then `normalize`; then `random_erasing`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum Op {
    /// `RandomResizedCrop(size, scale, ratio, interpolation)`: a random window of `scale`
    /// times the area and aspect ratio in `ratio` (log-uniform), resized to `size`.
    RandomResizedCrop {
        /// Output size.
        size: Size,
        /// Range of the window's area as a fraction of the image. Default `[0.08, 1.0]`.
        #[serde(default = "default_scale")]
        scale: [f64; 2],
        /// Range of the window's aspect ratio (width / height). Default `[3/4, 4/3]`.
        #[serde(default = "default_ratio")]
        ratio: [f64; 2],
        /// Default bilinear.
        #[serde(default)]
        interpolation: Interpolation,
    },
    /// `Resize(size)`: a single number resizes the shorter side to it (keeping the aspect
    /// ratio, the longer side truncated as torchvision does); `[h, w]` resizes to exactly that.
    Resize {
        /// Target size.
        size: Size,
        /// Default bilinear.
        #[serde(default)]
        interpolation: Interpolation,
    },
    /// `CenterCrop(size)`.
    CenterCrop {
        /// Output size.
        size: Size,
    },
    /// `RandomHorizontalFlip(p)`.
    RandomHorizontalFlip {
        /// Probability of flipping. Default 0.5.
        #[serde(default = "default_p")]
        p: f64,
    },
    /// `RandomVerticalFlip(p)`.
    RandomVerticalFlip {
        /// Probability of flipping. Default 0.5.
        #[serde(default = "default_p")]
        p: f64,
    },
    /// `ColorJitter`: factors drawn uniformly from each range, applied in a random order.
    /// `None` leaves that adjustment out (torchvision's 0).
    ColorJitter {
        /// Brightness factor range, e.g. `[0.6, 1.4]` for `brightness=0.4`.
        #[serde(default)]
        brightness: Option<[f64; 2]>,
        /// Contrast factor range.
        #[serde(default)]
        contrast: Option<[f64; 2]>,
        /// Saturation factor range.
        #[serde(default)]
        saturation: Option<[f64; 2]>,
        /// Hue shift range, within `[-0.5, 0.5]`.
        #[serde(default)]
        hue: Option<[f64; 2]>,
    },
    /// `RandomGrayscale(p)` (`Grayscale(3)` is `p = 1`).
    RandomGrayscale {
        /// Probability. Default 0.1.
        #[serde(default = "default_gray_p")]
        p: f64,
    },
    /// `GaussianBlur(kernel_size, sigma)`: sigma drawn uniformly from the range per sample.
    GaussianBlur {
        /// `[x, y]`, odd.
        kernel_size: [u32; 2],
        /// Sigma range. Default `[0.1, 2.0]`.
        #[serde(default = "default_sigma")]
        sigma: [f64; 2],
    },
    /// `RandomSolarize(threshold, p)`: invert values `>= threshold` (0..=255).
    RandomSolarize {
        /// Threshold on the 0..=255 scale.
        threshold: f64,
        /// Probability. Default 0.5.
        #[serde(default = "default_p")]
        p: f64,
    },
    /// `RandomPosterize(bits, p)`.
    RandomPosterize {
        /// Bits kept, 0..=8.
        bits: u8,
        /// Probability. Default 0.5.
        #[serde(default = "default_p")]
        p: f64,
    },
    /// `RandomAutocontrast(p)`.
    RandomAutocontrast {
        /// Probability. Default 0.5.
        #[serde(default = "default_p")]
        p: f64,
    },
    /// `RandomEqualize(p)`.
    RandomEqualize {
        /// Probability. Default 0.5.
        #[serde(default = "default_p")]
        p: f64,
    },
    /// `RandomAdjustSharpness(sharpness_factor, p)`.
    RandomAdjustSharpness {
        /// The factor (0 blurs, 1 keeps, 2 sharpens).
        sharpness_factor: f64,
        /// Probability. Default 0.5.
        #[serde(default = "default_p")]
        p: f64,
    },
    /// `RandomInvert(p)`.
    RandomInvert {
        /// Probability. Default 0.5.
        #[serde(default = "default_p")]
        p: f64,
    },
    /// `RandomRotation(degrees, interpolation, fill, center)` (no `expand`).
    RandomRotation {
        /// Angle range in degrees.
        degrees: [f64; 2],
        /// Nearest (default) or bilinear.
        #[serde(default = "nearest")]
        interpolation: Interpolation,
        /// Per-channel fill outside the image (0..=255); none: zeros.
        #[serde(default)]
        fill: Option<[f32; 3]>,
        /// Centre in pixels; none: the image's centre.
        #[serde(default)]
        center: Option<[f64; 2]>,
    },
    /// `RandomAffine(degrees, translate, scale, shear, interpolation, fill, center)`.
    RandomAffine {
        /// Angle range in degrees.
        degrees: [f64; 2],
        /// Largest translation as fractions of width and height.
        #[serde(default)]
        translate: Option<[f64; 2]>,
        /// Zoom range.
        #[serde(default)]
        scale: Option<[f64; 2]>,
        /// Shear ranges in degrees: `[x_min, x_max, y_min, y_max]` (y `[0, 0]` for none).
        #[serde(default)]
        shear: Option<[f64; 4]>,
        /// Nearest (default) or bilinear.
        #[serde(default = "nearest")]
        interpolation: Interpolation,
        /// Per-channel fill (0..=255); none: zeros.
        #[serde(default)]
        fill: Option<[f32; 3]>,
        /// Centre in pixels; none: the image's centre.
        #[serde(default)]
        center: Option<[f64; 2]>,
    },
    /// `AutoAugment(policy, interpolation, fill)`.
    AutoAugment {
        /// Default ImageNet.
        #[serde(default = "imagenet")]
        policy: AutoAugmentPolicy,
        /// Nearest (default) or bilinear, for the warps.
        #[serde(default = "nearest")]
        interpolation: Interpolation,
        /// Fill for the warps.
        #[serde(default)]
        fill: Option<[f32; 3]>,
    },
    /// `RandAugment(num_ops, magnitude, num_magnitude_bins, interpolation, fill)`.
    RandAugment {
        /// Default 2.
        #[serde(default = "two")]
        num_ops: u32,
        /// Default 9.
        #[serde(default = "nine")]
        magnitude: u32,
        /// Default 31.
        #[serde(default = "bins")]
        num_magnitude_bins: u32,
        /// Nearest (default) or bilinear, for the warps.
        #[serde(default = "nearest")]
        interpolation: Interpolation,
        /// Fill for the warps.
        #[serde(default)]
        fill: Option<[f32; 3]>,
    },
    /// `TrivialAugmentWide(num_magnitude_bins, interpolation, fill)`.
    TrivialAugmentWide {
        /// Default 31.
        #[serde(default = "bins")]
        num_magnitude_bins: u32,
        /// Nearest (default) or bilinear, for the warps.
        #[serde(default = "nearest")]
        interpolation: Interpolation,
        /// Fill for the warps.
        #[serde(default)]
        fill: Option<[f32; 3]>,
    },
    /// `AugMix(severity, mixture_width, chain_depth, alpha, all_ops, interpolation, fill)`.
    AugMix {
        /// 1..=10, default 3.
        #[serde(default = "three")]
        severity: u32,
        /// Default 3.
        #[serde(default = "three")]
        mixture_width: u32,
        /// Ops per chain; -1 (default): 1 to 3 at random.
        #[serde(default = "minus_one")]
        chain_depth: i32,
        /// Dirichlet/Beta concentration. Default 1.
        #[serde(default = "one")]
        alpha: f64,
        /// Include brightness, colour, contrast and sharpness. Default true.
        #[serde(default = "yes")]
        all_ops: bool,
        /// Bilinear (default) or nearest, for the warps.
        #[serde(default)]
        interpolation: Interpolation,
        /// Fill for the warps.
        #[serde(default)]
        fill: Option<[f32; 3]>,
    },
    /// timm's own `RandAugment` (`rand_augment_transform("rand-m9-mstd0.5-inc1")` and the other
    /// `rand-*` strings), with timm's sampling and Pillow's arithmetic: `num_layers` of `ops`
    /// (with replacement, or by `weights` without), each applied with probability `prob` at a
    /// magnitude around `magnitude`.
    TimmRandAugment {
        /// timm's op names (`_RAND_TRANSFORMS`, `_RAND_INCREASING_TRANSFORMS` or a subset).
        ops: Vec<TimmOp>,
        /// Ops per image. Default 2.
        #[serde(default = "two")]
        num_layers: u32,
        /// Choice weights (one per op; drawn without replacement), or none: uniform.
        #[serde(default)]
        weights: Option<Vec<f64>>,
        /// Probability of applying each drawn op. Default 0.5.
        #[serde(default = "default_p")]
        prob: f64,
        /// timm's `m`, in `[0, magnitude_max]` (default max 10).
        magnitude: f64,
        /// The settings the ops share (magnitude noise and clamp, warp fill and filters,
        /// translations), as timm's `hparams`.
        #[serde(default)]
        hparams: TimmHparams,
    },
    /// timm's own `AutoAugment` (`auto_augment_transform("original-mstd0.5")`, `v0`, `v0r`,
    /// `originalr`): one sub-policy drawn uniformly, its ops run in order, each with its own
    /// probability and magnitude, with timm's sampling and Pillow's arithmetic.
    TimmAutoAugment {
        /// The sub-policies.
        policy: Vec<Vec<TimmPolicyOp>>,
        /// The settings the ops share (magnitude noise and clamp, warp fill and filters,
        /// translations), as timm's `hparams`.
        #[serde(default)]
        hparams: TimmHparams,
    },
    /// timm's own AugMix (`augment_and_mix_transform("augmix-m5-w4-d2")`, not blended):
    /// Dirichlet(`alpha`) weights over `width` chains of `depth` ops (or 1 to 3) drawn from
    /// `ops` at `magnitude`, mixed in f32, then blended with the original by a Beta(`alpha`,
    /// `alpha`) weight, with Pillow's arithmetic.
    TimmAugMix {
        /// timm's op names (`_AUGMIX_TRANSFORMS` or a subset).
        ops: Vec<TimmOp>,
        /// timm's `m` (severity). Default 3.
        #[serde(default = "three_f")]
        magnitude: f64,
        /// Chains. Default 3.
        #[serde(default = "three")]
        width: u32,
        /// Ops per chain; -1 (default): 1 to 3 at random.
        #[serde(default = "minus_one")]
        depth: i32,
        /// Dirichlet and Beta concentration. Default 1.
        #[serde(default = "one")]
        alpha: f64,
        /// The settings the ops share (magnitude noise and clamp, warp fill and filters,
        /// translations), as timm's `hparams`.
        #[serde(default)]
        hparams: TimmHparams,
    },
    /// `RandomApply(ops, p)`: all of `ops`, in order, with probability `p`.
    RandomApply {
        /// Pixel ops.
        ops: Vec<Op>,
        /// Default 0.5.
        #[serde(default = "default_p")]
        p: f64,
    },
    /// `RandomChoice(ops, p)`: one of `ops`, with weights `p` (default equal).
    RandomChoice {
        /// Pixel ops.
        ops: Vec<Op>,
        /// Weights.
        #[serde(default)]
        p: Option<Vec<f64>>,
    },
    /// `RandomOrder(ops)`: all of `ops` in a random order.
    RandomOrder {
        /// Pixel ops.
        ops: Vec<Op>,
    },
    /// `RandomPhotometricDistort(brightness, contrast, saturation, hue, p)` (torchvision v2):
    /// each adjustment with probability `p`, the contrast before or after saturation and hue
    /// at random, then a random channel permutation with probability `p`. In a detection
    /// pipeline it may come before the geometry, where torchvision's SSD preset puts it: it
    /// then runs on the whole decoded image.
    RandomPhotometricDistort {
        /// Brightness factor range. Default `[0.875, 1.125]`.
        #[serde(default = "distort_brightness")]
        brightness: [f64; 2],
        /// Contrast factor range. Default `[0.5, 1.5]`.
        #[serde(default = "distort_factor")]
        contrast: [f64; 2],
        /// Saturation factor range. Default `[0.5, 1.5]`.
        #[serde(default = "distort_factor")]
        saturation: [f64; 2],
        /// Hue shift range. Default `[-0.05, 0.05]`.
        #[serde(default = "distort_hue")]
        hue: [f64; 2],
        /// Probability of each step. Default 0.5.
        #[serde(default = "default_p")]
        p: f64,
    },
    /// `RandomZoomOut(fill, side_range, p)`: the image placed at a random spot of a canvas
    /// `r` times its size (`r` uniform in `side_range`) filled with `fill`. Detection
    /// pipelines, before the resize.
    RandomZoomOut {
        /// The canvas colour. Default black.
        #[serde(default)]
        fill: [u8; 3],
        /// Range of the canvas's side over the image's. Default `[1, 4]`.
        #[serde(default = "zoom_range")]
        side_range: [f64; 2],
        /// Probability. Default 0.5.
        #[serde(default = "default_p")]
        p: f64,
    },
    /// `RandomIoUCrop(min_scale, max_scale, min_aspect_ratio, max_aspect_ratio,
    /// sampler_options, trials)`: SSD's crop, holding the centre of a box and overlapping one
    /// at the drawn minimum IoU. Boxes whose centre it leaves out are dropped by
    /// `sanitize_bounding_boxes`. Detection pipelines, before the resize.
    #[serde(rename = "random_iou_crop")]
    RandomIoUCrop {
        /// Default 0.3.
        #[serde(default = "iou_min_scale")]
        min_scale: f64,
        /// Default 1.
        #[serde(default = "one")]
        max_scale: f64,
        /// Default 0.5.
        #[serde(default = "iou_min_ratio")]
        min_aspect_ratio: f64,
        /// Default 2.
        #[serde(default = "iou_max_ratio")]
        max_aspect_ratio: f64,
        /// Minimum IoUs to draw from (1 or more: no crop). Default
        /// `[0, 0.1, 0.3, 0.5, 0.7, 0.9, 1]`.
        #[serde(default = "iou_options")]
        sampler_options: Vec<f64>,
        /// Crops tried per drawn option. Default 40.
        #[serde(default = "iou_trials")]
        trials: u32,
    },
    /// `SanitizeBoundingBoxes(min_size, min_area)`: drops boxes smaller than `min_size` on a
    /// side or `min_area` in area, or reaching outside the image, with their labels.
    SanitizeBoundingBoxes {
        /// Default 1.
        #[serde(default = "one")]
        min_size: f64,
        /// Default 1.
        #[serde(default = "one")]
        min_area: f64,
    },
    /// `ToTensor()` then `Normalize(mean, std)`: `(x / 255 - mean) / std` per channel.
    Normalize {
        /// Per-channel mean (RGB).
        mean: [f32; 3],
        /// Per-channel standard deviation (RGB).
        std: [f32; 3],
    },
    /// `RandomErasing(p, scale, ratio, value)` after normalize (timm's with `count` boxes).
    RandomErasing {
        /// Default 0.5.
        #[serde(default = "default_p")]
        p: f64,
        /// Area range as a fraction of the image. Default `[0.02, 0.33]`.
        #[serde(default = "erase_scale")]
        scale: [f64; 2],
        /// Aspect ratio range (height / width). Default `[0.3, 3.3]`.
        #[serde(default = "erase_ratio")]
        ratio: [f64; 2],
        /// Default 0 in every channel.
        #[serde(default = "erase_zero")]
        value: EraseValue,
        /// Number of boxes, uniform in `[min, max]`, splitting the drawn area (timm). Default
        /// `[1, 1]`.
        #[serde(default = "one_box")]
        count: [u32; 2],
        /// Draw the probability as timm does (`random() > p` skips) rather than torchvision
        /// (`rand() >= p`); the distributions are the same.
        #[serde(default)]
        timm: bool,
    },
}

fn default_scale() -> [f64; 2] {
    [0.08, 1.0]
}
fn default_ratio() -> [f64; 2] {
    [3.0 / 4.0, 4.0 / 3.0]
}
fn distort_brightness() -> [f64; 2] {
    [0.875, 1.125]
}
fn distort_factor() -> [f64; 2] {
    [0.5, 1.5]
}
fn distort_hue() -> [f64; 2] {
    [-0.05, 0.05]
}
fn zoom_range() -> [f64; 2] {
    [1.0, 4.0]
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
fn default_p() -> f64 {
    0.5
}
fn default_gray_p() -> f64 {
    0.1
}
fn default_sigma() -> [f64; 2] {
    [0.1, 2.0]
}
fn nearest() -> Interpolation {
    Interpolation::Nearest
}
fn imagenet() -> AutoAugmentPolicy {
    AutoAugmentPolicy::Imagenet
}
fn two() -> u32 {
    2
}
fn three() -> u32 {
    3
}
fn nine() -> u32 {
    9
}
fn bins() -> u32 {
    31
}
fn minus_one() -> i32 {
    -1
}
fn one() -> f64 {
    1.0
}
fn yes() -> bool {
    true
}
fn three_f() -> f64 {
    3.0
}
fn erase_scale() -> [f64; 2] {
    [0.02, 0.33]
}
fn erase_ratio() -> [f64; 2] {
    [0.3, 3.3]
}
fn erase_zero() -> EraseValue {
    EraseValue::Constant([0.0; 3])
}
fn one_box() -> [u32; 2] {
    [1, 1]
}

/// `torch.linspace(start, end, steps)` in f32, with torch's arithmetic (from both ends).
pub(crate) fn linspace_f32(start: f64, end: f64, steps: usize) -> impl Iterator<Item = f32> {
    let (a, b) = (start as f32, end as f32);
    let step = if steps > 1 {
        (b - a) / (steps - 1) as f32
    } else {
        0.0
    };
    let half = steps / 2;
    (0..steps).map(move |i| {
        if i < half {
            a + step * i as f32
        } else {
            b - step * (steps - i - 1) as f32
        }
    })
}

/// ImageNet's per-channel mean, as torchvision's reference scripts use.
pub const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
/// ImageNet's per-channel standard deviation.
pub const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

/// A named, ordered list of ops. Load one from a TOML file (see `pipelines/`) or build it in code.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pipeline {
    /// A name for messages and reports.
    pub name: String,
    /// The ops, applied in order.
    pub ops: Vec<Op>,
}

impl Pipeline {
    /// An empty pipeline named `name`; add ops with [`Pipeline::then`].
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ops: Vec::new(),
        }
    }

    /// Appends `op`.
    #[must_use]
    pub fn then(mut self, op: Op) -> Self {
        self.ops.push(op);
        self
    }

    /// Parses a pipeline from TOML text (`name = "..."` and an `[[ops]]` table per op).
    ///
    /// # Errors
    /// [`Error::Pipeline`] for malformed TOML, an unknown op or an unknown field.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, Error> {
        toml::from_str(text).map_err(|e: toml::de::Error| {
            // One line: the message and where, without the source snippet toml would draw.
            let at = e.span().map_or(String::new(), |span| {
                let before = &text.as_bytes()[..span.start.min(text.len())];
                let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
                format!(" (line {line})")
            });
            Error::Pipeline {
                name: origin.to_string(),
                reason: format!("{}{at}", e.message().trim_end()),
            }
        })
    }

    /// Reads a pipeline file.
    ///
    /// # Errors
    /// The file cannot be read or does not parse.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml(&text, &path.display().to_string())
    }

    /// Validates the ops and resolves them into a per-sample plan for `dtype`.
    pub(crate) fn plan(&self, dtype: Dtype) -> Result<Plan, Error> {
        let err = |reason: String| Error::Pipeline {
            name: self.name.clone(),
            reason,
        };
        let mut geometry = None;
        let mut resize_short: Option<(u32, Interpolation)> = None;
        let mut pixel = Vec::new();
        let mut normalize = None;
        let mut erase = Vec::new();
        let mut det = detect::DetectSpec::default();
        for (at, op) in self.ops.iter().enumerate() {
            let geometry_done = geometry.is_some();
            let late = |what: &str| {
                if !erase.is_empty() {
                    Err(err(format!(
                        "{what} after random_erasing (erasing comes last)"
                    )))
                } else if normalize.is_some() {
                    Err(err(format!(
                        "{what} after normalize (hpuload runs pixel ops on the image before it)"
                    )))
                } else {
                    Ok(())
                }
            };
            match op {
                &Op::RandomResizedCrop {
                    size,
                    scale,
                    ratio,
                    interpolation,
                } => {
                    if geometry_done || resize_short.is_some() || !pixel.is_empty() {
                        return Err(err(
                            "random_resized_crop must be the only geometric op, first".into(),
                        ));
                    }
                    late("random_resized_crop")?;
                    if !(0.0 < scale[0] && scale[0] <= scale[1] && scale[1] <= 1.0) {
                        return Err(err(format!(
                            "random_resized_crop scale {scale:?} must satisfy 0 < min <= max <= 1"
                        )));
                    }
                    if !(0.0 < ratio[0] && ratio[0] <= ratio[1]) {
                        return Err(err(format!(
                            "random_resized_crop ratio {ratio:?} must satisfy 0 < min <= max"
                        )));
                    }
                    geometry = Some((
                        Geometry::RandomResizedCrop {
                            out: nonzero(size, &err)?,
                            scale,
                            ratio,
                        },
                        interpolation,
                        at,
                    ));
                }
                &Op::Resize {
                    size: Size::Square(s),
                    interpolation,
                } if !geometry_done && resize_short.is_none() && pixel.is_empty() => {
                    late("resize")?;
                    resize_short = Some((nonzero(Size::Square(s), &err)?.0, interpolation));
                }
                &Op::Resize {
                    size: size @ Size::HeightWidth(_),
                    interpolation,
                } if !geometry_done && resize_short.is_none() && pixel.is_empty() => {
                    late("resize")?;
                    geometry = Some((
                        Geometry::Resize {
                            out: nonzero(size, &err)?,
                        },
                        interpolation,
                        at,
                    ));
                }
                &Op::CenterCrop { size } if !geometry_done && pixel.is_empty() => {
                    late("center_crop")?;
                    let out = nonzero(size, &err)?;
                    if let Some((s, _)) = resize_short {
                        if out.0 > s || out.1 > s {
                            return Err(err(format!(
                                "center_crop {out:?} is larger than the resized shorter side {s}"
                            )));
                        }
                    }
                    let (short, interpolation) = match resize_short.take() {
                        Some((s, i)) => (Some(s), i),
                        None => (None, Interpolation::Bilinear),
                    };
                    geometry = Some((
                        Geometry::CenterCrop {
                            resize_short: short,
                            out,
                        },
                        interpolation,
                        at,
                    ));
                }
                Op::Resize { .. } | Op::CenterCrop { .. } => {
                    return Err(err("supported geometry: random_resized_crop, or resize then center_crop, or resize to [h, w], before any pixel op".into()));
                }
                Op::Normalize { mean, std } => {
                    late("normalize")?;
                    if std.iter().any(|&s| !(s.is_finite() && s > 0.0))
                        || mean.iter().any(|m| !m.is_finite())
                    {
                        return Err(err(format!(
                            "normalize std {std:?} must be positive and mean {mean:?} finite"
                        )));
                    }
                    normalize = Some((*mean, *std));
                }
                &Op::RandomErasing {
                    p,
                    scale,
                    ratio,
                    value,
                    count,
                    timm,
                } => {
                    probability(p, "random_erasing", &err)?;
                    if !(0.0 <= scale[0] && scale[0] <= scale[1] && scale[1] <= 1.0) {
                        return Err(err(format!(
                            "random_erasing scale {scale:?} must satisfy 0 <= min <= max <= 1"
                        )));
                    }
                    if !(0.0 < ratio[0] && ratio[0] <= ratio[1]) {
                        return Err(err(format!(
                            "random_erasing ratio {ratio:?} must satisfy 0 < min <= max"
                        )));
                    }
                    if !(1 <= count[0] && count[0] <= count[1]) {
                        return Err(err(format!(
                            "random_erasing count {count:?} must satisfy 1 <= min <= max"
                        )));
                    }
                    if dtype == Dtype::U8 && matches!(value, EraseValue::Random(_)) {
                        return Err(err(
                            "random_erasing with random values needs a float output dtype".into(),
                        ));
                    }
                    erase.push((
                        at,
                        EraseSpec {
                            p,
                            scale,
                            ratio,
                            value,
                            count,
                            timm,
                        },
                    ));
                }
                Op::RandomZoomOut {
                    fill,
                    side_range,
                    p,
                } => {
                    if geometry_done || det.iou.is_some() || det.flip.is_some() {
                        return Err(err(
                            "random_zoom_out comes before random_iou_crop, the flip and the resize"
                                .into(),
                        ));
                    }
                    probability(*p, "random_zoom_out", &err)?;
                    let [lo, hi] = *side_range;
                    if !(1.0 <= lo && lo <= hi && hi.is_finite()) {
                        return Err(err(format!(
                            "random_zoom_out side_range {side_range:?} must satisfy 1 <= min <= max"
                        )));
                    }
                    det.zoom = Some((
                        at,
                        detect::ZoomOutSpec {
                            fill: *fill,
                            side_range: *side_range,
                            p: *p,
                        },
                    ));
                }
                Op::RandomIoUCrop {
                    min_scale,
                    max_scale,
                    min_aspect_ratio,
                    max_aspect_ratio,
                    sampler_options,
                    trials,
                } => {
                    if geometry_done || det.flip.is_some() {
                        return Err(err(
                            "random_iou_crop comes before the flip and the resize".into()
                        ));
                    }
                    let ranges = 0.0 < *min_scale
                        && min_scale <= max_scale
                        && *max_scale <= 1.0
                        && 0.0 < *min_aspect_ratio
                        && min_aspect_ratio <= max_aspect_ratio;
                    if !ranges
                        || sampler_options.is_empty()
                        || sampler_options.iter().any(|o| !o.is_finite())
                        || *trials == 0
                    {
                        return Err(err(format!("random_iou_crop needs 0 < min_scale <= max_scale <= 1, 0 < min_aspect_ratio <= max_aspect_ratio, finite sampler_options and trials >= 1 (got {op:?})")));
                    }
                    det.iou = Some((
                        at,
                        detect::IouCropSpec {
                            min_scale: *min_scale,
                            max_scale: *max_scale,
                            min_aspect_ratio: *min_aspect_ratio,
                            max_aspect_ratio: *max_aspect_ratio,
                            options: sampler_options.clone(),
                            trials: *trials,
                        },
                    ));
                }
                &Op::SanitizeBoundingBoxes { min_size, min_area } => {
                    if !(min_size >= 0.0
                        && min_area >= 0.0
                        && min_size.is_finite()
                        && min_area.is_finite())
                    {
                        return Err(err(format!("sanitize_bounding_boxes min_size {min_size} and min_area {min_area} must be finite and >= 0")));
                    }
                    det.sanitize = Some(detect::SanitizeSpec {
                        min_size,
                        min_area,
                        before_resize: !geometry_done,
                    });
                }
                &Op::RandomHorizontalFlip { p } if !geometry_done && pixel.is_empty() => {
                    probability(p, "random_horizontal_flip", &err)?;
                    det.flip = Some((at, p));
                }
                Op::RandomPhotometricDistort { .. }
                    if !geometry_done
                        && det.zoom.is_none()
                        && det.iou.is_none()
                        && det.flip.is_none() =>
                {
                    check_pixel_op(op, &err)?;
                    det.pre.push((at, op.clone()));
                }
                pixel_op => {
                    // A detection pipeline without a resize runs its pixel ops on the window.
                    let after_boxes = det.zoom.is_some() || det.iou.is_some() || det.flip.is_some();
                    if !geometry_done && !after_boxes {
                        return Err(err(format!(
                            "{} must follow the crop or resize that sets the output size",
                            op_name(pixel_op)
                        )));
                    }
                    late(op_name(pixel_op))?;
                    check_pixel_op(pixel_op, &err)?;
                    pixel.push((at, pixel_op.clone()));
                }
            }
        }
        if resize_short.is_some() {
            return Err(err("resize of the shorter side alone gives a different shape per image; add center_crop (batch shapes must be static)".into()));
        }
        // No crop or resize: each image keeps its (detection) window's size.
        let geometry = geometry.unwrap_or((Geometry::Window, Interpolation::Bilinear, 0));
        let natural = geometry.0 == Geometry::Window;
        let detect = if det.is_detection() || natural {
            if !matches!(geometry.0, Geometry::Resize { .. } | Geometry::Window) {
                return Err(err("a detection pipeline ends its geometry with resize [h, w] (one size per batch), or has no resize (each image keeps its window's size)".into()));
            }
            // Ops that move pixels after the resize would leave the boxes behind.
            const MOVING: [&str; 8] = [
                "random_horizontal_flip",
                "random_vertical_flip",
                "random_rotation",
                "random_affine",
                "auto_augment",
                "rand_augment",
                "trivial_augment_wide",
                "aug_mix",
            ];
            if let Some((_, op)) = pixel.iter().find(|(_, op)| MOVING.contains(&op_name(op))) {
                return Err(err(format!(
                    "{} after the geometry of a detection pipeline would not move the boxes (put a horizontal flip before the resize; the others are not box-aware yet)",
                    op_name(op)
                )));
            }
            Some(det)
        } else if det.flip.is_some() || !det.pre.is_empty() {
            return Err(err("ops before the crop or resize are for detection pipelines (with random_zoom_out, random_iou_crop or sanitize_bounding_boxes); put them after it".into()));
        } else {
            None
        };
        let (geometry, interpolation, geometry_at) = geometry;
        if dtype == Dtype::I64 {
            return Err(err(
                "i64 is a label type; choose u8, f16, bf16 or f32 for images".into(),
            ));
        }
        if dtype == Dtype::U8 && normalize.is_some() {
            return Err(err("u8 output cannot hold normalized values: remove normalize or choose f32, f16 or bf16".into()));
        }
        Ok(Plan {
            geometry,
            interpolation,
            geometry_at,
            pixel,
            normalize,
            erase,
            detect,
        })
    }
}

/// The op's name as the pipeline files spell it.
fn op_name(op: &Op) -> &'static str {
    match op {
        Op::RandomResizedCrop { .. } => "random_resized_crop",
        Op::Resize { .. } => "resize",
        Op::CenterCrop { .. } => "center_crop",
        Op::RandomHorizontalFlip { .. } => "random_horizontal_flip",
        Op::RandomVerticalFlip { .. } => "random_vertical_flip",
        Op::ColorJitter { .. } => "color_jitter",
        Op::RandomGrayscale { .. } => "random_grayscale",
        Op::GaussianBlur { .. } => "gaussian_blur",
        Op::RandomSolarize { .. } => "random_solarize",
        Op::RandomPosterize { .. } => "random_posterize",
        Op::RandomAutocontrast { .. } => "random_autocontrast",
        Op::RandomEqualize { .. } => "random_equalize",
        Op::RandomAdjustSharpness { .. } => "random_adjust_sharpness",
        Op::RandomInvert { .. } => "random_invert",
        Op::RandomRotation { .. } => "random_rotation",
        Op::RandomAffine { .. } => "random_affine",
        Op::AutoAugment { .. } => "auto_augment",
        Op::RandAugment { .. } => "rand_augment",
        Op::TrivialAugmentWide { .. } => "trivial_augment_wide",
        Op::AugMix { .. } => "aug_mix",
        Op::TimmRandAugment { .. } => "timm_rand_augment",
        Op::TimmAutoAugment { .. } => "timm_auto_augment",
        Op::TimmAugMix { .. } => "timm_aug_mix",
        Op::RandomApply { .. } => "random_apply",
        Op::RandomChoice { .. } => "random_choice",
        Op::RandomOrder { .. } => "random_order",
        Op::Normalize { .. } => "normalize",
        Op::RandomErasing { .. } => "random_erasing",
        Op::RandomPhotometricDistort { .. } => "random_photometric_distort",
        Op::RandomZoomOut { .. } => "random_zoom_out",
        Op::RandomIoUCrop { .. } => "random_iou_crop",
        Op::SanitizeBoundingBoxes { .. } => "sanitize_bounding_boxes",
    }
}

fn probability(p: f64, what: &str, err: &impl Fn(String) -> Error) -> Result<(), Error> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(err(format!("{what} p={p} is not a probability")))
    }
}

fn warp_interpolation(
    i: Interpolation,
    what: &str,
    err: &impl Fn(String) -> Error,
) -> Result<(), Error> {
    match i {
        Interpolation::Nearest | Interpolation::Bilinear => Ok(()),
        _ => Err(err(format!(
            "{what} interpolates with nearest or bilinear (as torchvision's tensor warps), not {i:?}"
        ))),
    }
}

/// Checks a pixel op's parameters (ranges torchvision itself enforces).
fn check_pixel_op(op: &Op, err: &impl Fn(String) -> Error) -> Result<(), Error> {
    let name = op_name(op);
    let nonneg = |r: Option<[f64; 2]>, what: &str| match r {
        Some([lo, hi]) if !(0.0 <= lo && lo <= hi && hi.is_finite()) => Err(err(format!(
            "color_jitter {what} range [{lo}, {hi}] must satisfy 0 <= min <= max"
        ))),
        _ => Ok(()),
    };
    match op {
        Op::RandomHorizontalFlip { p }
        | Op::RandomVerticalFlip { p }
        | Op::RandomGrayscale { p }
        | Op::RandomAutocontrast { p }
        | Op::RandomEqualize { p }
        | Op::RandomInvert { p } => probability(*p, name, err),
        Op::ColorJitter {
            brightness,
            contrast,
            saturation,
            hue,
        } => {
            nonneg(*brightness, "brightness")?;
            nonneg(*contrast, "contrast")?;
            nonneg(*saturation, "saturation")?;
            match hue {
                Some([lo, hi]) if !(-0.5 <= *lo && lo <= hi && *hi <= 0.5) => Err(err(format!(
                    "color_jitter hue range [{lo}, {hi}] must lie in [-0.5, 0.5]"
                ))),
                _ => Ok(()),
            }
        }
        Op::GaussianBlur { kernel_size, sigma } => {
            if kernel_size.iter().any(|&k| k == 0 || k % 2 == 0 || k > 255) {
                return Err(err(format!(
                    "gaussian_blur kernel_size {kernel_size:?} must be odd and positive"
                )));
            }
            if !(0.0 < sigma[0] && sigma[0] <= sigma[1] && sigma[1].is_finite()) {
                return Err(err(format!(
                    "gaussian_blur sigma {sigma:?} must satisfy 0 < min <= max"
                )));
            }
            Ok(())
        }
        Op::RandomSolarize { threshold, p } => {
            probability(*p, name, err)?;
            if !(0.0..=255.0).contains(threshold) {
                return Err(err(format!(
                    "random_solarize threshold {threshold} must lie in [0, 255]"
                )));
            }
            Ok(())
        }
        Op::RandomPosterize { bits, p } => {
            probability(*p, name, err)?;
            if *bits > 8 {
                return Err(err(format!("random_posterize bits {bits} must be 0..=8")));
            }
            Ok(())
        }
        Op::RandomAdjustSharpness {
            sharpness_factor,
            p,
        } => {
            probability(*p, name, err)?;
            if !(*sharpness_factor >= 0.0 && sharpness_factor.is_finite()) {
                return Err(err(format!(
                    "random_adjust_sharpness factor {sharpness_factor} must be non-negative"
                )));
            }
            Ok(())
        }
        Op::RandomRotation {
            degrees,
            interpolation,
            ..
        } => {
            if degrees[0] > degrees[1] || degrees.iter().any(|d| d.is_nan()) {
                return Err(err(format!(
                    "{name} degrees {degrees:?} must be [min, max]"
                )));
            }
            warp_interpolation(*interpolation, name, err)
        }
        Op::RandomAffine {
            degrees,
            translate,
            scale,
            shear,
            interpolation,
            ..
        } => {
            if degrees[0] > degrees[1] || degrees.iter().any(|d| d.is_nan()) {
                return Err(err(format!(
                    "{name} degrees {degrees:?} must be [min, max]"
                )));
            }
            if let Some(t) = translate {
                if !t.iter().all(|v| (0.0..=1.0).contains(v)) {
                    return Err(err(format!("{name} translate {t:?} must lie in [0, 1]")));
                }
            }
            if let Some(s) = scale {
                if !(0.0 < s[0] && s[0] <= s[1]) {
                    return Err(err(format!(
                        "{name} scale {s:?} must satisfy 0 < min <= max"
                    )));
                }
            }
            if let Some(s) = shear {
                if !(s[0] <= s[1] && s[2] <= s[3]) {
                    return Err(err(format!("{name} shear {s:?} must be [min, max] pairs")));
                }
            }
            warp_interpolation(*interpolation, name, err)
        }
        Op::AutoAugment { interpolation, .. } | Op::TrivialAugmentWide { interpolation, .. } => {
            warp_interpolation(*interpolation, name, err)
        }
        Op::RandAugment {
            magnitude,
            num_magnitude_bins,
            interpolation,
            ..
        } => {
            if magnitude >= num_magnitude_bins {
                return Err(err(format!(
                    "rand_augment magnitude {magnitude} must be below num_magnitude_bins {num_magnitude_bins}"
                )));
            }
            warp_interpolation(*interpolation, name, err)
        }
        Op::AugMix {
            severity,
            mixture_width,
            alpha,
            interpolation,
            ..
        } => {
            if !(1..=10).contains(severity)
                || *mixture_width == 0
                || alpha.is_nan()
                || *alpha <= 0.0
            {
                return Err(err(
                    "aug_mix needs severity in 1..=10, mixture_width >= 1 and alpha > 0".into(),
                ));
            }
            warp_interpolation(*interpolation, name, err)
        }
        Op::TimmRandAugment {
            ops,
            num_layers,
            weights,
            prob,
            magnitude,
            hparams,
            ..
        } => {
            probability(*prob, name, err)?;
            if ops.is_empty() || *num_layers == 0 {
                return Err(err(format!("{name} needs at least one op and one layer")));
            }
            if let Some(w) = weights {
                if w.len() != ops.len() || w.iter().any(|&x| !(x >= 0.0 && x.is_finite())) {
                    return Err(err(format!(
                        "{name} weights must be one non-negative number per op"
                    )));
                }
                if w.iter().filter(|&&x| x > 0.0).count() < (*num_layers as usize).min(w.len()) {
                    return Err(err(format!(
                        "{name} draws {num_layers} ops without replacement but only {} have weight",
                        w.iter().filter(|&&x| x > 0.0).count()
                    )));
                }
            }
            if !magnitude.is_finite() {
                return Err(err(format!("{name} magnitude must be finite")));
            }
            hparams.check().map_err(|e| err(format!("{name} {e}")))
        }
        Op::TimmAutoAugment {
            policy, hparams, ..
        } => {
            if policy.is_empty() || policy.iter().any(Vec::is_empty) {
                return Err(err(format!("{name} needs sub-policies of at least one op")));
            }
            for p in policy.iter().flatten() {
                probability(p.prob, name, err)?;
                if !p.magnitude.is_finite() {
                    return Err(err(format!(
                        "{name} magnitude {} must be finite",
                        p.magnitude
                    )));
                }
            }
            hparams.check().map_err(|e| err(format!("{name} {e}")))
        }
        Op::TimmAugMix {
            ops,
            magnitude,
            width,
            alpha,
            hparams,
            ..
        } => {
            if ops.is_empty() || *width == 0 || !(alpha.is_finite() && *alpha > 0.0) {
                return Err(err(format!(
                    "{name} needs ops, width >= 1 and a finite alpha > 0"
                )));
            }
            if !magnitude.is_finite() {
                return Err(err(format!("{name} magnitude must be finite")));
            }
            hparams.check().map_err(|e| err(format!("{name} {e}")))
        }
        Op::RandomApply { ops, p } => {
            probability(*p, name, err)?;
            check_nested(ops, err)
        }
        Op::RandomChoice { ops, p } => {
            if ops.is_empty() {
                return Err(err("random_choice of no ops".into()));
            }
            if let Some(w) = p {
                if w.len() != ops.len()
                    || w.iter().any(|&x| x.is_nan() || x < 0.0)
                    || w.iter().sum::<f64>() <= 0.0
                {
                    return Err(err(format!(
                        "random_choice weights {w:?} must be one non-negative weight per op"
                    )));
                }
            }
            check_nested(ops, err)
        }
        Op::RandomOrder { ops } => check_nested(ops, err),
        Op::RandomPhotometricDistort {
            brightness,
            contrast,
            saturation,
            hue,
            p,
        } => {
            probability(*p, name, err)?;
            nonneg(Some(*brightness), "brightness")?;
            nonneg(Some(*contrast), "contrast")?;
            nonneg(Some(*saturation), "saturation")?;
            let [lo, hi] = *hue;
            if !(-0.5 <= lo && lo <= hi && hi <= 0.5) {
                return Err(err(format!(
                    "{name} hue range [{lo}, {hi}] must lie in [-0.5, 0.5]"
                )));
            }
            Ok(())
        }
        other => Err(err(format!("{} is not a pixel op", op_name(other)))),
    }
}

fn check_nested(ops: &[Op], err: &impl Fn(String) -> Error) -> Result<(), Error> {
    for op in ops {
        match op {
            Op::RandomResizedCrop { .. }
            | Op::Resize { .. }
            | Op::CenterCrop { .. }
            | Op::Normalize { .. }
            | Op::RandomErasing { .. }
            | Op::RandomZoomOut { .. }
            | Op::RandomIoUCrop { .. }
            | Op::SanitizeBoundingBoxes { .. } => {
                return Err(err(format!(
                    "{} inside random_apply/random_choice/random_order (only pixel ops can be)",
                    op_name(op)
                )))
            }
            _ => check_pixel_op(op, err)?,
        }
    }
    Ok(())
}

fn nonzero(size: Size, err: &impl Fn(String) -> Error) -> Result<(u32, u32), Error> {
    match size.hw() {
        (0, _) | (_, 0) => Err(err(format!("size {size:?} has a zero side"))),
        hw => Ok(hw),
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
    /// Optional shorter-side resize, then a center crop of `out`.
    CenterCrop {
        resize_short: Option<u32>,
        out: (u32, u32),
    },
    Resize {
        out: (u32, u32),
    },
    /// No crop or resize (a detection pipeline): each output is its sample's window at its
    /// own size.
    Window,
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
    pub normalize: Option<([f32; 3], [f32; 3])>,
    erase: Vec<(usize, EraseSpec)>,
    /// A detection pipeline's box-aware geometry (`None`: classification).
    pub detect: Option<detect::DetectSpec>,
}

/// One resolved pixel op of one sample, on the RGB8 image at the output size.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "op", content = "arg", rename_all = "snake_case")]
pub enum PixelOp {
    /// Mirror left to right.
    Hflip,
    /// Mirror top to bottom.
    Vflip,
    /// `adjust_brightness(factor)`.
    Brightness(f64),
    /// `adjust_contrast(factor)`.
    Contrast(f64),
    /// `adjust_saturation(factor)`.
    Saturation(f64),
    /// `adjust_hue(factor)`.
    Hue(f64),
    /// `rgb_to_grayscale(num_output_channels=3)`.
    Grayscale,
    /// `permute_channels(permutation)`: output channel `c` is input channel `p[c]`.
    PermuteChannels([u8; 3]),
    /// `solarize(threshold)`.
    Solarize(f64),
    /// `posterize(bits)`.
    Posterize(u8),
    /// `autocontrast`.
    AutoContrast,
    /// `equalize`.
    Equalize,
    /// `invert`.
    Invert,
    /// `adjust_sharpness(factor)`.
    Sharpness(f64),
    /// `gaussian_blur(kernel_size, sigma)`.
    GaussianBlur {
        /// `[x, y]`.
        kernel: [u32; 2],
        /// `[x, y]`.
        sigma: [f64; 2],
    },
    /// `affine` or `rotate`.
    Warp(Warp),
    /// AugMix's mixture of chains.
    AugMix(Box<AugMixPlan>),
    /// Pillow's `ImageEnhance.<kind>(image).enhance(factor)` (timm's policies).
    PilEnhance {
        /// Which enhancer.
        kind: PilEnhance,
        /// Its factor (1: the image unchanged).
        factor: f64,
    },
    /// Pillow's `ImageOps.autocontrast` (timm's policies).
    PilAutoContrast,
    /// timm's `solarize_add`: `add` added to values below `threshold`.
    SolarizeAdd {
        /// Added, saturating at 255.
        add: u8,
        /// Values at or above it are kept.
        threshold: u8,
    },
    /// Pillow's `Image.transform(AFFINE, matrix, resample, fillcolor)` (timm's warps).
    PilAffine {
        /// Output pixel centre to source point, Pillow's `(a, b, c, d, e, f)`.
        matrix: [f64; 6],
        /// Bilinear or bicubic.
        filter: PilFilter,
        /// Where the source point falls outside the image.
        fill: [u8; 3],
    },
}

impl PixelOp {
    /// The op as a colour adjustment, for the fused kernel.
    fn adjustment(&self) -> Option<colour::Adjust> {
        match *self {
            PixelOp::Brightness(f) => Some(colour::Adjust::Brightness(f)),
            PixelOp::Contrast(f) => Some(colour::Adjust::Contrast(f)),
            PixelOp::Saturation(f) => Some(colour::Adjust::Saturation(f)),
            PixelOp::Hue(f) => Some(colour::Adjust::Hue(f)),
            PixelOp::PermuteChannels(p) => Some(colour::Adjust::Permute(p)),
            _ => None,
        }
    }

    /// Whether the op gives the same result before or after a horizontal flip.
    fn commutes_with_hflip(&self) -> bool {
        match self {
            Self::Warp(_) | Self::PilAffine { .. } => false,
            Self::AugMix(m) => m.chains.iter().flatten().all(Self::commutes_with_hflip),
            _ => true,
        }
    }
}

/// What a sample's pixels go through after the decode: the pixel ops on the RGB8 image, the
/// horizontal flip fused into the output writer, and the erase boxes on the written slot.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PixelPlan {
    /// The image's `(height, width)` at the output (the slot holds exactly this many pixels).
    pub size: (u32, u32),
    /// Pixel ops, in order.
    pub ops: Vec<PixelOp>,
    /// Mirror when writing the slot (a flip that commutes with every later op is moved here).
    pub flip: bool,
    /// Boxes erased in the written slot, in order.
    pub erase: Vec<EraseBox>,
}

/// Every random choice for one sample: a pure function of `(seed, epoch, index)` and the
/// image's size. Both paths execute it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SamplePlan {
    /// The window of the decoded image resampled to the output size.
    pub crop: CropBox,
    /// The resampling filter (never `Random`: drawn).
    pub interpolation: Interpolation,
    /// The rest.
    #[serde(flatten)]
    pub pixels: PixelPlan,
    /// Pixel ops on the whole decoded image before the geometry (detection pipelines).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pre: Vec<PixelOp>,
    /// A detection pipeline's canvas, window and boxes. When the window shows the canvas's
    /// fill, `crop` is the whole window, composed first on the CPU path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detect: Option<DetectPlan>,
}

/// Reused memory for the pixel ops (one per worker and per engine).
#[derive(Default)]
pub struct Scratch {
    bytes: Vec<u8>,
    floats: Vec<f32>,
    original: Vec<u8>,
    chain: Vec<u8>,
    mix: Vec<f32>,
}

impl Plan {
    /// Output `(height, width)`, the same for every sample; `None` when each sample keeps its
    /// window's size.
    pub fn fixed_out(&self) -> Option<(u32, u32)> {
        match self.geometry {
            Geometry::RandomResizedCrop { out, .. }
            | Geometry::CenterCrop { out, .. }
            | Geometry::Resize { out } => Some(out),
            Geometry::Window => None,
        }
    }

    /// The most pixels an output can have for a `width`x`height` image.
    pub fn max_pixels(&self, width: u32, height: u32) -> u64 {
        let (h, w) = match self.fixed_out() {
            Some(out) => out,
            None => {
                let zoom = self.detect.as_ref().and_then(|d| d.zoom.as_ref());
                let (w, h) = detect::largest_canvas(zoom.map(|(_, z)| z), width, height);
                (h, w)
            }
        };
        u64::from(h) * u64::from(w)
    }

    /// Draws the sample's plan for a `width`x`height` image, and its boxes (`objects`) when
    /// the pipeline is a detection one.
    pub fn sample(
        &self,
        seed: u64,
        epoch: u64,
        index: usize,
        (width, height): (u32, u32),
        objects: Option<&[[f32; 4]]>,
    ) -> Result<SamplePlan, String> {
        let mut pre = Vec::new();
        let mut detected = None;
        if let Some(d) = &self.detect {
            let rng = |at: usize| CounterRng::for_op(seed, epoch, index as u64, at);
            for (at, op) in &d.pre {
                draw(op, &mut rng(*at), (height, width), &mut pre);
            }
            let boxes = objects.unwrap_or(&[]);
            let zoom = d
                .zoom
                .as_ref()
                .and_then(|(at, z)| detect::zoom_out(z, width, height, &mut rng(*at)));
            let ((cw, ch), on_canvas) = detect::on_canvas(boxes, zoom, width, height);
            let crop = d
                .iou
                .as_ref()
                .and_then(|(at, spec)| detect::iou_crop(spec, cw, ch, &on_canvas, &mut rng(*at)));
            let flip = d.flip.is_some_and(|(at, p)| rng(at).uniform() < p);
            let fill = d.zoom.as_ref().map_or([0; 3], |(_, z)| z.fill);
            detected = Some(detect::transform_boxes(
                &detect::Drawn { zoom, crop, flip },
                fill,
                width,
                height,
                boxes,
                self.fixed_out(),
                d.sanitize,
            ));
        }
        let crop = match (&detected, &self.geometry) {
            (Some(d), _) => {
                let [wl, wt, ww, wh] = d.window;
                if d.window_inside_image(width, height) {
                    CropBox::rect(wl - d.image_at.0, wt - d.image_at.1, ww, wh)
                } else {
                    CropBox::full(ww, wh)
                }
            }
            (None, geometry) => match *geometry {
                Geometry::RandomResizedCrop { scale, ratio, .. } => {
                    let mut rng = CounterRng::new(seed, epoch, index as u64, Stream::Crop);
                    geometry::random_resized_crop(width, height, scale, ratio, &mut rng)
                }
                Geometry::CenterCrop { resize_short, out } => {
                    geometry::resize_center_crop(width, height, resize_short, out)?
                }
                Geometry::Resize { .. } | Geometry::Window => CropBox::full(width, height),
            },
        };
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
        let mut ops = Vec::new();
        let mut first_flip = true;
        for (at, op) in &self.pixel {
            // The first horizontal flip keeps the stream it has always had, so pipelines
            // without other ops give the batches they gave before.
            let mut rng = if first_flip && matches!(op, Op::RandomHorizontalFlip { .. }) {
                first_flip = false;
                CounterRng::new(seed, epoch, index as u64, Stream::Flip)
            } else {
                CounterRng::for_op(seed, epoch, index as u64, *at)
            };
            draw(op, &mut rng, size, &mut ops);
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
            spec.draw(&mut rng, size.0, size.1, &mut erase);
        }
        Ok(SamplePlan {
            crop,
            interpolation,
            pixels: PixelPlan {
                size,
                ops,
                flip,
                erase,
            },
            pre,
            detect: detected,
        })
    }
}

/// Draws one pipeline op's choices for an image of `size` (height, width) into `out`.
fn draw(op: &Op, rng: &mut CounterRng, size: (u32, u32), out: &mut Vec<PixelOp>) {
    let coin = |rng: &mut CounterRng, p: f64| rng.uniform() < p;
    let range = |rng: &mut CounterRng, r: [f64; 2]| rng.uniform_in(r[0], r[1]);
    match *op {
        Op::RandomHorizontalFlip { p } => {
            if coin(rng, p) {
                out.push(PixelOp::Hflip);
            }
        }
        Op::RandomVerticalFlip { p } => {
            if coin(rng, p) {
                out.push(PixelOp::Vflip);
            }
        }
        Op::ColorJitter {
            brightness,
            contrast,
            saturation,
            hue,
        } => {
            let mut order = [0usize, 1, 2, 3];
            shuffle(rng, &mut order);
            let b = brightness.map(|r| range(rng, r));
            let c = contrast.map(|r| range(rng, r));
            let s = saturation.map(|r| range(rng, r));
            let h = hue.map(|r| range(rng, r));
            for k in order {
                out.extend(match k {
                    0 => b.map(PixelOp::Brightness),
                    1 => c.map(PixelOp::Contrast),
                    2 => s.map(PixelOp::Saturation),
                    _ => h.map(PixelOp::Hue),
                });
            }
        }
        Op::RandomGrayscale { p } => {
            if coin(rng, p) {
                out.push(PixelOp::Grayscale);
            }
        }
        Op::GaussianBlur { kernel_size, sigma } => {
            let s = range(rng, sigma);
            out.push(PixelOp::GaussianBlur {
                kernel: kernel_size,
                sigma: [s, s],
            });
        }
        Op::RandomSolarize { threshold, p } => {
            if coin(rng, p) {
                out.push(PixelOp::Solarize(threshold));
            }
        }
        Op::RandomPosterize { bits, p } => {
            if coin(rng, p) {
                out.push(PixelOp::Posterize(bits));
            }
        }
        Op::RandomAutocontrast { p } => {
            if coin(rng, p) {
                out.push(PixelOp::AutoContrast);
            }
        }
        Op::RandomEqualize { p } => {
            if coin(rng, p) {
                out.push(PixelOp::Equalize);
            }
        }
        Op::RandomAdjustSharpness {
            sharpness_factor,
            p,
        } => {
            if coin(rng, p) {
                out.push(PixelOp::Sharpness(sharpness_factor));
            }
        }
        Op::RandomInvert { p } => {
            if coin(rng, p) {
                out.push(PixelOp::Invert);
            }
        }
        Op::RandomRotation {
            degrees,
            interpolation,
            fill,
            center,
        } => out.push(PixelOp::Warp(Warp {
            rotate: true,
            angle: range(rng, degrees),
            translate: [0.0; 2],
            scale: 1.0,
            shear: [0.0; 2],
            center,
            nearest: interpolation == Interpolation::Nearest,
            fill,
        })),
        Op::RandomAffine {
            degrees,
            translate,
            scale,
            shear,
            interpolation,
            fill,
            center,
        } => {
            let angle = range(rng, degrees);
            let translate = translate.map_or([0.0; 2], |[fx, fy]| {
                let (mx, my) = (fx * f64::from(size.1), fy * f64::from(size.0));
                let tx = geometry::round_half_even(rng.uniform_in(-mx, mx));
                let ty = geometry::round_half_even(rng.uniform_in(-my, my));
                [tx, ty]
            });
            let scale = scale.map_or(1.0, |s| range(rng, s));
            let shear = shear.map_or([0.0; 2], |s| {
                let x = range(rng, [s[0], s[1]]);
                let y = if s[2] == 0.0 && s[3] == 0.0 {
                    0.0
                } else {
                    range(rng, [s[2], s[3]])
                };
                [x, y]
            });
            out.push(PixelOp::Warp(Warp {
                rotate: false,
                angle,
                translate,
                scale,
                shear,
                center,
                nearest: interpolation == Interpolation::Nearest,
                fill,
            }));
        }
        Op::AutoAugment {
            policy,
            interpolation,
            fill,
        } => autoaugment::auto_augment(rng, policy, size, interpolation, fill, out),
        Op::RandAugment {
            num_ops,
            magnitude,
            num_magnitude_bins,
            interpolation,
            fill,
        } => autoaugment::rand_augment(
            rng,
            num_ops,
            magnitude,
            num_magnitude_bins,
            size,
            interpolation,
            fill,
            out,
        ),
        Op::TrivialAugmentWide {
            num_magnitude_bins,
            interpolation,
            fill,
        } => autoaugment::trivial_augment_wide(
            rng,
            num_magnitude_bins,
            size,
            interpolation,
            fill,
            out,
        ),
        Op::AugMix {
            severity,
            mixture_width,
            chain_depth,
            alpha,
            all_ops,
            interpolation,
            fill,
        } => {
            let spec = autoaugment::AugMixSpec {
                severity,
                mixture_width,
                chain_depth,
                alpha,
                all_ops,
            };
            let plan = autoaugment::aug_mix(rng, &spec, size, interpolation, fill);
            out.push(PixelOp::AugMix(Box::new(plan)));
        }
        Op::TimmRandAugment {
            ref ops,
            num_layers,
            ref weights,
            prob,
            magnitude,
            ref hparams,
        } => {
            let spec = timm::RandAugmentSpec {
                ops,
                num_layers,
                weights: weights.as_deref(),
                prob,
                magnitude,
                hparams,
            };
            timm::rand_augment(rng, &spec, size, out);
        }
        Op::TimmAutoAugment {
            ref policy,
            ref hparams,
        } => timm::auto_augment(rng, policy, hparams, size, out),
        Op::TimmAugMix {
            ref ops,
            magnitude,
            width,
            depth,
            alpha,
            ref hparams,
        } => {
            let spec = timm::AugMixSpec {
                ops,
                magnitude,
                width,
                depth,
                alpha,
            };
            let plan = timm::aug_mix(rng, &spec, hparams, size);
            out.push(PixelOp::AugMix(Box::new(plan)));
        }
        Op::RandomApply { ref ops, p } => {
            if coin(rng, p) {
                for op in ops {
                    draw(op, rng, size, out);
                }
            }
        }
        Op::RandomChoice { ref ops, ref p } => {
            let k = match p {
                None => rng.below(ops.len() as u64) as usize,
                Some(w) => {
                    let total: f64 = w.iter().sum();
                    let mut u = rng.uniform() * total;
                    let mut pick = w.len() - 1;
                    for (i, &wi) in w.iter().enumerate() {
                        if u < wi {
                            pick = i;
                            break;
                        }
                        u -= wi;
                    }
                    pick
                }
            };
            draw(&ops[k], rng, size, out);
        }
        Op::RandomOrder { ref ops } => {
            let mut order: Vec<usize> = (0..ops.len()).collect();
            shuffle(rng, &mut order);
            for k in order {
                draw(&ops[k], rng, size, out);
            }
        }
        Op::RandomPhotometricDistort {
            brightness,
            contrast,
            saturation,
            hue,
            p,
        } => {
            // torchvision v2's draws, in its order: a coin and a factor for each adjustment,
            // the contrast's place, then a coin and a permutation.
            let mut factor = |r: [f64; 2]| coin(rng, p).then(|| range(rng, r));
            let b = factor(brightness);
            let c = factor(contrast);
            let s = factor(saturation);
            let h = factor(hue);
            let contrast_before = coin(rng, 0.5);
            out.extend(b.map(PixelOp::Brightness));
            if contrast_before {
                out.extend(c.map(PixelOp::Contrast));
            }
            out.extend(s.map(PixelOp::Saturation));
            out.extend(h.map(PixelOp::Hue));
            if !contrast_before {
                out.extend(c.map(PixelOp::Contrast));
            }
            if coin(rng, p) {
                let mut order = [0u8, 1, 2];
                shuffle(rng, &mut order);
                out.push(PixelOp::PermuteChannels(order));
            }
        }
        // Validated away: geometry, normalize, erasing and the box ops are not pixel ops.
        Op::RandomResizedCrop { .. }
        | Op::Resize { .. }
        | Op::CenterCrop { .. }
        | Op::Normalize { .. }
        | Op::RandomErasing { .. }
        | Op::RandomZoomOut { .. }
        | Op::RandomIoUCrop { .. }
        | Op::SanitizeBoundingBoxes { .. } => {}
    }
}

/// `torch.randperm`-like: a uniform permutation (Fisher–Yates).
fn shuffle<T>(rng: &mut CounterRng, v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

/// Runs `ops` on the `h`x`w` RGB8 image `rgb` in place.
pub fn apply(ops: &[PixelOp], rgb: &mut [u8], h: usize, w: usize, s: &mut Scratch) {
    let rgb = &mut rgb[..h * w * 3];
    let mut rest = ops;
    while let Some((op, tail)) = rest.split_first() {
        rest = tail;
        match op {
            // A run of colour adjustments (ColorJitter's four, a channel permutation) runs
            // fused, in one or two passes.
            PixelOp::Brightness(_)
            | PixelOp::Contrast(_)
            | PixelOp::Saturation(_)
            | PixelOp::Hue(_)
            | PixelOp::PermuteChannels(_) => {
                let run: Vec<colour::Adjust> = std::iter::once(op)
                    .chain(rest)
                    .map_while(PixelOp::adjustment)
                    .collect();
                rest = &rest[run.len().saturating_sub(1)..];
                colour::adjust(rgb, &run);
            }
            PixelOp::Hflip => geometry::hflip(rgb, h, w),
            PixelOp::Vflip => geometry::vflip(rgb, h, w),
            PixelOp::Grayscale => colour::grayscale(rgb),
            PixelOp::Solarize(t) => colour::solarize(rgb, *t),
            PixelOp::Posterize(b) => colour::posterize(rgb, *b),
            PixelOp::AutoContrast => colour::autocontrast(rgb),
            PixelOp::Equalize => colour::equalize(rgb),
            PixelOp::Invert => colour::invert(rgb),
            PixelOp::Sharpness(f) => blur::sharpness(rgb, h, w, *f, s),
            PixelOp::GaussianBlur { kernel, sigma } => {
                blur::gaussian_blur(rgb, h, w, *kernel, *sigma, s)
            }
            PixelOp::Warp(warp) => geometry::warp(rgb, h, w, warp, s),
            PixelOp::AugMix(plan) => aug_mix(plan, rgb, h, w, s),
            PixelOp::PilEnhance { kind, factor } => {
                pil::enhance(rgb, h, w, *kind, *factor, &mut s.bytes)
            }
            PixelOp::PilAutoContrast => pil::autocontrast(rgb),
            PixelOp::SolarizeAdd { add, threshold } => pil::solarize_add(rgb, *add, *threshold),
            PixelOp::PilAffine {
                matrix,
                filter,
                fill,
            } => {
                let t = pil::Affine {
                    matrix: *matrix,
                    filter: *filter,
                    fill: *fill,
                };
                pil::affine(rgb, h, w, &t, &mut s.bytes)
            }
        }
    }
}

/// AugMix's mixture: `original * m0 + sum(weight_i * chain_i(original))` in f32, truncated
/// to bytes as torchvision's `.to(torch.uint8)`.
fn aug_mix(plan: &AugMixPlan, rgb: &mut [u8], h: usize, w: usize, s: &mut Scratch) {
    let mut original = std::mem::take(&mut s.original);
    let mut chain = std::mem::take(&mut s.chain);
    let mut mix = std::mem::take(&mut s.mix);
    original.clear();
    original.extend_from_slice(rgb);
    mix.clear();
    mix.extend(original.iter().map(|&v| plan.original * f32::from(v)));
    for (ops, &weight) in plan.chains.iter().zip(&plan.weights) {
        chain.clear();
        chain.extend_from_slice(&original);
        apply(ops, &mut chain, h, w, s);
        for (m, &v) in mix.iter_mut().zip(&chain) {
            *m += weight * f32::from(v);
        }
    }
    for (out, &m) in rgb.iter_mut().zip(&mix) {
        *out = m.clamp(0.0, 255.0) as u8;
    }
    if let Some(m) = plan.blend {
        pil::blend_images(&original, rgb, m);
    }
    (s.original, s.chain, s.mix) = (original, chain, mix);
}

/// What runs on a sample's decoded RGB8 image at the output size, on either path: the pixel
/// ops, then flip + normalize + cast + layout into the slot, then the erase boxes. The CPU path
/// runs it on the host; the media engine runs it as its device ops.
#[derive(Clone, Debug)]
pub struct PixelStage {
    writer: OutputWriter,
    dtype: Dtype,
    layout: Layout,
}

impl PixelStage {
    /// The stage for images written as `dtype` in `layout`, normalized with `(mean, std)`
    /// when given.
    pub fn new(dtype: Dtype, layout: Layout, normalize: Option<([f32; 3], [f32; 3])>) -> Self {
        Self {
            writer: OutputWriter::new(dtype, layout, normalize),
            dtype,
            layout,
        }
    }

    /// The pixel ops of `plan` on `rgb` (at the plan's size), in place.
    pub fn ops(&self, rgb: &mut [u8], plan: &PixelPlan, scratch: &mut Scratch) {
        if !plan.ops.is_empty() {
            let (h, w) = plan.size;
            apply(&plan.ops, rgb, h as usize, w as usize, scratch);
        }
    }

    /// The bytes the output of `plan` takes at the start of its slot.
    pub fn bytes(&self, plan: &PixelPlan) -> usize {
        plan.size.0 as usize * plan.size.1 as usize * 3 * self.dtype.size()
    }

    /// Writes `rgb` into the start of `slot` (flipped as `plan` says), then erases `plan`'s
    /// boxes there.
    ///
    /// # Panics
    /// `slot` is shorter than [`PixelStage::bytes`].
    pub fn write(&self, rgb: &[u8], plan: &PixelPlan, slot: &mut [u8]) {
        let (h, w) = (plan.size.0 as usize, plan.size.1 as usize);
        let slot = &mut slot[..self.bytes(plan)];
        self.writer.write(rgb, h, w, plan.flip, slot);
        for b in &plan.erase {
            erase::erase(slot, self.dtype, self.layout, h, w, b);
        }
    }

    /// [`PixelStage::ops`] then [`PixelStage::write`].
    pub fn run(&self, rgb: &mut [u8], plan: &PixelPlan, scratch: &mut Scratch, slot: &mut [u8]) {
        self.ops(rgb, plan, scratch);
        self.write(rgb, plan, slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_style_pipelines_validate() {
        let train = Pipeline::new("t")
            .then(Op::RandomResizedCrop {
                size: Size::Square(224),
                scale: default_scale(),
                ratio: default_ratio(),
                interpolation: Interpolation::Bilinear,
            })
            .then(Op::RandomHorizontalFlip { p: 0.5 })
            .then(Op::Normalize {
                mean: IMAGENET_MEAN,
                std: IMAGENET_STD,
            });
        assert_eq!(
            train.plan(Dtype::Bf16).unwrap().fixed_out(),
            Some((224, 224))
        );
        let eval = Pipeline::new("e")
            .then(Op::Resize {
                size: Size::Square(256),
                interpolation: Interpolation::Bilinear,
            })
            .then(Op::CenterCrop {
                size: Size::Square(224),
            });
        assert_eq!(
            eval.plan(Dtype::U8).unwrap().geometry,
            Geometry::CenterCrop {
                resize_short: Some(256),
                out: (224, 224)
            }
        );
    }

    #[test]
    fn shapes_that_would_vary_are_rejected() {
        let e = Pipeline::new("x")
            .then(Op::Resize {
                size: Size::Square(256),
                interpolation: Interpolation::Bilinear,
            })
            .plan(Dtype::F32)
            .unwrap_err();
        assert!(e.to_string().contains("static"), "{e}");
        // No crop or resize: each image keeps its own size, which the loader takes only from
        // a dataset that gives the sizes (detection).
        let p = Pipeline::new("x")
            .then(Op::RandomHorizontalFlip { p: 0.5 })
            .plan(Dtype::F32)
            .unwrap();
        assert_eq!(p.fixed_out(), None);
    }

    #[test]
    fn u8_output_with_normalize_is_rejected() {
        let p = Pipeline::new("x")
            .then(Op::CenterCrop {
                size: Size::Square(8),
            })
            .then(Op::Normalize {
                mean: IMAGENET_MEAN,
                std: IMAGENET_STD,
            });
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
            .then(Op::CenterCrop {
                size: Size::Square(8),
            })
            .then(Op::RandomHorizontalFlip { p: 0.5 })
            .plan(Dtype::U8)
            .unwrap();
        let flips = (0..10_000)
            .filter(|&i| p.sample(1, 0, i, (10, 10), None).unwrap().pixels.flip)
            .count();
        assert!((4_700..5_300).contains(&flips), "{flips}");
        let never = Pipeline::new("x")
            .then(Op::CenterCrop {
                size: Size::Square(8),
            })
            .then(Op::RandomHorizontalFlip { p: 0.0 })
            .plan(Dtype::U8)
            .unwrap();
        assert!((0..100).all(|i| !never.sample(1, 0, i, (10, 10), None).unwrap().pixels.flip));
    }
}
