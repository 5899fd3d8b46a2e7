//! What a pipeline file says: a named list of [`Op`]s. Each op is a thin variant around its
//! family's spec struct (`geometry.rs`, `colour.rs`, `blur.rs`, `autoaugment.rs`, `timm.rs`,
//! `pil/`, `detect.rs`, `erase.rs`, `kernel.rs`), which owns the op's fields and defaults, its check,
//! its [`OpKind`] and its draw ([`OpSpec`]). The list below is the only place an op is named:
//! the `ops!` macro makes the enum, its serde names and the one dispatch to the spec from it,
//! so a new op is one line here and one spec struct that implements [`OpSpec`].
//!
//! The wrappers (`random_apply`, `random_choice`, `random_order`) hold ops of their own and
//! live here.

use std::path::Path;

use hpuload_decoders::orientation::{orientation, torchvision_orientation, Orientation};
use serde::{Deserialize, Serialize};

use super::albu::{
    AlbuAffine, AlbuBrightnessContrast, AlbuChannelDropout, AlbuChannelShuffle, AlbuColorJitter,
    AlbuHueSaturationValue, AlbuLongestMaxSize, AlbuPadIfNeeded, AlbuRandomGamma,
    AlbuRandomRotate90, AlbuRgbShift, AlbuSmallestMaxSize, AlbuToGray, AlbuTranspose,
    CoarseDropout, PermuteChannels,
};
use super::albu_clahe::AlbuClahe;
use super::albu_distort::{AlbuDownscale, AlbuGridDistortion, AlbuOpticalDistortion};
use super::albu_filter::{
    AlbuBlur, AlbuEmboss, AlbuGaussNoise, AlbuGaussianBlur, AlbuMedianBlur, AlbuMotionBlur,
    AlbuSharpen,
};
use super::albu_jpeg::AlbuImageCompression;
use super::albu_tone::{AlbuEqualize, AlbuPosterize, AlbuSolarize};
use super::autoaugment::{AugMix, AutoAugment, RandAugment, TrivialAugmentWide};
use super::blur::{GaussianBlur, RandomAdjustSharpness};
use super::colour::{
    ColorJitter, RandomAutocontrast, RandomEqualize, RandomGrayscale, RandomInvert,
    RandomPhotometricDistort, RandomPosterize, RandomSolarize,
};
use super::detect::{
    ClampBoundingBoxes, FixedSizeCrop, RandomIoUCrop, RandomShortestSize, RandomZoomOut,
    SanitizeBoundingBoxes, ScaleJitter,
};
use super::erase::RandomErasing;
use super::error::PipelineError;
use super::geometry::{
    CenterCrop, CenterSquare, RandomAffine, RandomCrop, RandomHorizontalFlip, RandomResize,
    RandomResizedCrop, RandomRotation, RandomVerticalFlip, Resize,
};
use super::kernel::Normalize;
use super::pil::{PilGaussianBlur, PilGrayscale};
use super::pixel::PixelOp;
use super::spec::{coin, half, probability, shuffle, OpKind, OpSpec};
use super::timm::{TimmAugMix, TimmAutoAugment, TimmRandAugment};
use crate::rng::CounterRng;
use crate::Error;

macro_rules! ops {
    ($( $(#[$doc:meta])* $variant:ident($spec:ty) = $name:literal, )*) => {
        /// One augmentation step, with torchvision's semantics (the v2 tensor kernels on uint8
        /// images are the reference), as pipeline files spell it: `op = "<name>"` and the
        /// spec's fields. Geometry (a crop and/or resize) comes first; then pixel ops on the
        /// RGB8 image at the output size; then `normalize`; then `random_erasing`. Detection
        /// pipelines put their box-aware ops (and a photometric distortion) before the resize.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "op")]
        #[non_exhaustive]
        pub enum Op {
            $( $(#[$doc])* #[serde(rename = $name)] $variant($spec), )*
        }

        impl Op {
            /// The op's name as the pipeline files spell it.
            pub fn name(&self) -> &'static str {
                match self {
                    $( Op::$variant(_) => $name, )*
                }
            }

            /// The op's spec, which says what it is, checks and draws it.
            pub(crate) fn spec(&self) -> &dyn OpSpec {
                match self {
                    $( Op::$variant(spec) => spec, )*
                }
            }
        }

        $(
            impl From<$spec> for Op {
                fn from(spec: $spec) -> Self {
                    Op::$variant(spec)
                }
            }
        )*
    };
}

ops! {
    /// `RandomResizedCrop(size, scale, ratio, interpolation)`.
    RandomResizedCrop(RandomResizedCrop) = "random_resized_crop",
    /// `Resize(size)`.
    Resize(Resize) = "resize",
    /// torchvision v2's `RandomResize(min_size, max_size)`: the shorter side drawn.
    RandomResize(RandomResize) = "random_resize",
    /// `CenterCrop(size)`.
    CenterCrop(CenterCrop) = "center_crop",
    /// `RandomCrop(size)` (no padding).
    RandomCrop(RandomCrop) = "random_crop",
    /// The centre square of the image's shorter side (a Dataset's own crop of its array),
    /// then a `resize`.
    CenterSquare(CenterSquare) = "center_square",
    /// `RandomHorizontalFlip(p)`.
    RandomHorizontalFlip(RandomHorizontalFlip) = "random_horizontal_flip",
    /// `RandomVerticalFlip(p)`.
    RandomVerticalFlip(RandomVerticalFlip) = "random_vertical_flip",
    /// `ColorJitter(brightness, contrast, saturation, hue)`.
    ColorJitter(ColorJitter) = "color_jitter",
    /// `RandomGrayscale(p)` (`Grayscale(3)` is `p = 1`).
    RandomGrayscale(RandomGrayscale) = "random_grayscale",
    /// `GaussianBlur(kernel_size, sigma)`.
    GaussianBlur(GaussianBlur) = "gaussian_blur",
    /// `RandomSolarize(threshold, p)`.
    RandomSolarize(RandomSolarize) = "random_solarize",
    /// `RandomPosterize(bits, p)`.
    RandomPosterize(RandomPosterize) = "random_posterize",
    /// `RandomAutocontrast(p)`.
    RandomAutocontrast(RandomAutocontrast) = "random_autocontrast",
    /// `RandomEqualize(p)`.
    RandomEqualize(RandomEqualize) = "random_equalize",
    /// `RandomAdjustSharpness(sharpness_factor, p)`.
    RandomAdjustSharpness(RandomAdjustSharpness) = "random_adjust_sharpness",
    /// `RandomInvert(p)`.
    RandomInvert(RandomInvert) = "random_invert",
    /// `RandomRotation(degrees, interpolation, fill, center)`.
    RandomRotation(RandomRotation) = "random_rotation",
    /// `RandomAffine(degrees, translate, scale, shear, interpolation, fill, center)`.
    RandomAffine(RandomAffine) = "random_affine",
    /// `AutoAugment(policy, interpolation, fill)`.
    AutoAugment(AutoAugment) = "auto_augment",
    /// `RandAugment(num_ops, magnitude, num_magnitude_bins, interpolation, fill)`.
    RandAugment(RandAugment) = "rand_augment",
    /// `TrivialAugmentWide(num_magnitude_bins, interpolation, fill)`.
    TrivialAugmentWide(TrivialAugmentWide) = "trivial_augment_wide",
    /// `AugMix(severity, mixture_width, chain_depth, alpha, all_ops, interpolation, fill)`.
    AugMix(AugMix) = "aug_mix",
    /// timm's own `RandAugment` (`rand-m9-mstd0.5-inc1` and the other `rand-*` strings).
    TimmRandAugment(TimmRandAugment) = "timm_rand_augment",
    /// timm's own `AutoAugment` (`original-mstd0.5`, `v0`, `v0r`, `originalr`).
    TimmAutoAugment(TimmAutoAugment) = "timm_auto_augment",
    /// timm's own AugMix (`augmix-m5-w4-d2`, blended or not).
    TimmAugMix(TimmAugMix) = "timm_aug_mix",
    /// Pillow's grey (`convert("L")`, back to RGB) with probability `p`.
    PilGrayscale(PilGrayscale) = "pil_grayscale",
    /// Pillow's `ImageFilter.GaussianBlur` of a radius drawn from `radius`, with probability `p`.
    PilGaussianBlur(PilGaussianBlur) = "pil_gaussian_blur",
    /// `RandomApply(ops, p)`.
    RandomApply(RandomApply) = "random_apply",
    /// `RandomChoice(ops, p)`.
    RandomChoice(RandomChoice) = "random_choice",
    /// `RandomOrder(ops)`.
    RandomOrder(RandomOrder) = "random_order",
    /// `RandomPhotometricDistort(brightness, contrast, saturation, hue, p)`.
    RandomPhotometricDistort(RandomPhotometricDistort) = "random_photometric_distort",
    /// `RandomZoomOut(fill, side_range, p)`.
    RandomZoomOut(RandomZoomOut) = "random_zoom_out",
    /// `RandomIoUCrop(min_scale, max_scale, min_aspect_ratio, max_aspect_ratio,
    /// sampler_options, trials)`.
    RandomIoUCrop(RandomIoUCrop) = "random_iou_crop",
    /// `RandomShortestSize(min_size, max_size, interpolation)`: detection's multiscale resize.
    RandomShortestSize(RandomShortestSize) = "random_shortest_size",
    /// `ScaleJitter(target_size, scale_range, interpolation)`: large-scale jitter.
    ScaleJitter(ScaleJitter) = "scale_jitter",
    /// The detection reference's `FixedSizeCrop(size, fill)`: crop, then pad to `size`.
    FixedSizeCrop(FixedSizeCrop) = "fixed_size_crop",
    /// `SanitizeBoundingBoxes(min_size, min_area)`.
    SanitizeBoundingBoxes(SanitizeBoundingBoxes) = "sanitize_bounding_boxes",
    /// `ClampBoundingBoxes()`: boxes clamped to the canvas where it stands.
    ClampBoundingBoxes(ClampBoundingBoxes) = "clamp_bounding_boxes",
    /// `ToTensor()` then `Normalize(mean, std)`.
    Normalize(Normalize) = "normalize",
    /// `RandomErasing(p, scale, ratio, value)` after normalize (timm's with `count` boxes).
    RandomErasing(RandomErasing) = "random_erasing",
    /// albumentations' `SmallestMaxSize(max_size)`, before a crop.
    AlbuSmallestMaxSize(AlbuSmallestMaxSize) = "albu_smallest_max_size",
    /// albumentations' `LongestMaxSize(max_size)`, before `albu_pad_if_needed`.
    AlbuLongestMaxSize(AlbuLongestMaxSize) = "albu_longest_max_size",
    /// albumentations' `PadIfNeeded(min_height, min_width)` (centred, a constant fill) after
    /// `albu_longest_max_size`.
    AlbuPadIfNeeded(AlbuPadIfNeeded) = "albu_pad_if_needed",
    /// albumentations' `Transpose(p)` of a square output.
    AlbuTranspose(AlbuTranspose) = "albu_transpose",
    /// albumentations' `RandomRotate90(p)` of a square output.
    AlbuRandomRotate90(AlbuRandomRotate90) = "albu_random_rotate90",
    /// albumentations' `Affine` and `ShiftScaleRotate` with `INTER_LINEAR`.
    AlbuAffine(AlbuAffine) = "albu_affine",
    /// albumentations' `RandomBrightnessContrast(brightness_limit, contrast_limit, p)`.
    AlbuBrightnessContrast(AlbuBrightnessContrast) = "albu_brightness_contrast",
    /// albumentations' `RGBShift(r_shift_limit, g_shift_limit, b_shift_limit, p)`.
    AlbuRgbShift(AlbuRgbShift) = "albu_rgb_shift",
    /// albumentations' `RandomGamma(gamma_limit, p)`.
    AlbuRandomGamma(AlbuRandomGamma) = "albu_random_gamma",
    /// albumentations' `ChannelShuffle(p)`.
    AlbuChannelShuffle(AlbuChannelShuffle) = "albu_channel_shuffle",
    /// The three channels in a fixed order (BGR arrays given on as they are).
    PermuteChannels(PermuteChannels) = "permute_channels",
    /// albumentations' `ChannelDropout(channel_drop_range, fill, p)`.
    AlbuChannelDropout(AlbuChannelDropout) = "albu_channel_dropout",
    /// albumentations' `ToGray(p)` (three channels, `weighted_average`).
    AlbuToGray(AlbuToGray) = "albu_to_gray",
    /// albumentations' `HueSaturationValue(hue_shift_limit, sat_shift_limit,
    /// val_shift_limit, p)`.
    AlbuHueSaturationValue(AlbuHueSaturationValue) = "albu_hue_saturation_value",
    /// albumentations' `ColorJitter(brightness, contrast, saturation, hue, p)` of a uint8
    /// image.
    AlbuColorJitter(AlbuColorJitter) = "albu_color_jitter",
    /// albumentations' `Blur(blur_limit, p)`: `cv2.blur`.
    AlbuBlur(AlbuBlur) = "albu_blur",
    /// albumentations' `MedianBlur(blur_limit, p)`: `cv2.medianBlur`.
    AlbuMedianBlur(AlbuMedianBlur) = "albu_median_blur",
    /// albumentations' `MotionBlur(blur_limit, allow_shifted, angle_range, direction_range,
    /// p)`: its line kernel through `cv2.filter2D`.
    AlbuMotionBlur(AlbuMotionBlur) = "albu_motion_blur",
    /// albumentations' `GaussianBlur(blur_limit, sigma_limit, p)`: its kernel through
    /// `cv2.sepFilter2D`.
    AlbuGaussianBlur(AlbuGaussianBlur) = "albu_gaussian_blur",
    /// albumentations' `Sharpen(alpha, lightness, method="kernel", p)`: its 3x3 kernel
    /// through `cv2.filter2D`.
    AlbuSharpen(AlbuSharpen) = "albu_sharpen",
    /// albumentations' `Emboss(alpha, strength, p)`: its 3x3 kernel through `cv2.filter2D`.
    AlbuEmboss(AlbuEmboss) = "albu_emboss",
    /// albumentations' `GridDistortion(num_steps, distort_limit, normalized, border_mode,
    /// fill, p)` with `INTER_LINEAR`: its grid's map through OpenCV's `remap`.
    AlbuGridDistortion(AlbuGridDistortion) = "albu_grid_distortion",
    /// albumentations' `OpticalDistortion(distort_limit, mode="camera", border_mode, fill,
    /// p)` with `INTER_LINEAR`: OpenCV's undistortion map of its camera through `remap`.
    AlbuOpticalDistortion(AlbuOpticalDistortion) = "albu_optical_distortion",
    /// albumentations' `Downscale(scale_range, p)` with `INTER_NEAREST` both ways.
    AlbuDownscale(AlbuDownscale) = "albu_downscale",
    /// albumentations' `Solarize(threshold_range, p)` of a uint8 image.
    AlbuSolarize(AlbuSolarize) = "albu_solarize",
    /// albumentations' `Posterize(num_bits, p)` with one range for every channel.
    AlbuPosterize(AlbuPosterize) = "albu_posterize",
    /// albumentations' `ImageCompression(compression_type="jpeg", quality_range, p)`.
    AlbuImageCompression(AlbuImageCompression) = "albu_image_compression",
    /// albumentations' `CLAHE(clip_limit, tile_grid_size, p)` of an RGB image: L of OpenCV's
    /// Lab through OpenCV's CLAHE.
    AlbuClahe(AlbuClahe) = "albu_clahe",
    /// albumentations' `Equalize(mode, by_channels=True, p)` without a mask.
    AlbuEqualize(AlbuEqualize) = "albu_equalize",
    /// albumentations' `GaussNoise(std_range, mean_range, per_channel, p)`.
    AlbuGaussNoise(AlbuGaussNoise) = "albu_gauss_noise",
    /// albumentations' `CoarseDropout(num_holes_range, hole_height_range, hole_width_range,
    /// fill, p)`, erased in the output as `random_erasing` is.
    CoarseDropout(CoarseDropout) = "coarse_dropout",
}

impl Op {
    /// The op's kind, looking inside `random_apply`, `random_choice`, `random_order` and the
    /// policies: a wrapper is the kind of what it may run (a pixel op that moves pixels when
    /// any op inside does).
    pub fn kind(&self) -> OpKind {
        self.spec().kind()
    }

    /// The part of this op that moves pixels, named for a message (`random_apply >
    /// random_rotation`, `timm_rand_augment > Rotate`), or `None` when it moves none.
    pub fn moving_part(&self) -> Option<String> {
        if self.kind() != OpKind::MovingPixel {
            return None;
        }
        Some(match self.spec().moving_inner() {
            Some(inner) => format!("{} > {inner}", self.name()),
            None => self.name().to_string(),
        })
    }

    /// Checks the op's parameters (see [`OpSpec::check`]).
    pub(crate) fn check(&self) -> Result<(), PipelineError> {
        self.spec().check()
    }

    /// Whether the op needs a square image (see [`OpSpec::needs_square`]).
    pub(crate) fn needs_square(&self) -> bool {
        self.spec().needs_square()
    }

    /// Whether the op is a random horizontal or vertical flip.
    pub(crate) fn is_flip(&self) -> bool {
        matches!(
            self,
            Op::RandomHorizontalFlip(_) | Op::RandomVerticalFlip(_)
        )
    }

    /// Draws a pixel op's choices (see [`OpSpec::draw`]).
    pub(crate) fn draw(&self, rng: &mut CounterRng, size: (u32, u32), out: &mut Vec<PixelOp>) {
        self.spec().draw(rng, size, out)
    }
}

/// A named, ordered list of ops. Load one from a TOML file (see `pipelines/`) or build it in
/// code.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pipeline {
    /// A name for messages and reports.
    pub name: String,
    /// The ops, applied in order.
    pub ops: Vec<Op>,
    /// Turn each image upright by the EXIF orientation it carries before the ops, as Pillow's
    /// `ImageOps.exif_transpose` does (what Hugging Face `datasets` does as it decodes an
    /// image). Off by default: torchvision's loaders show images as stored. Images only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exif_orientation: bool,
    /// Whose reading of the orientation `exif_orientation` turns by: Pillow's (the default)
    /// or torchvision's (`decode_image(..., apply_exif_orientation=True)`), which read it
    /// from other places in the file.
    #[serde(default, skip_serializing_if = "ExifReader::is_pillow")]
    pub exif_reader: ExifReader,
    /// The user's transform gives grey images of one channel (torchvision's
    /// `Grayscale(num_output_channels=1)`, a `pil_grayscale` op at the top level, always
    /// applied; a grey read; a source of one channel, such as an array of grey images): the
    /// images are made as three equal channels and the batch holds the first alone,
    /// `[N, 1, H, W]` (or `[N, H, W, 1]`), normalized by the first mean and std. The ops after
    /// the grey conversion must treat channels alike (the Python package checks). Images only,
    /// one view.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub single_channel: bool,
    /// Each image is read grey, as OpenCV's `cv2.imread(path, cv2.IMREAD_GRAYSCALE)` reads
    /// it: a JPEG's luma as libjpeg decodes it to grey (its Y samples, the chroma unused), a
    /// grey PNG as stored; any other file (an RGB-coded, CMYK or YCCK JPEG, a colour or
    /// 16-bit PNG, another format) is refused, named. Three equal channels, as after a
    /// `pil_grayscale` (with `single_channel`, the first alone). Images
    /// only. The media engine decodes and resamples the luma alone (within its floor of the
    /// CPU path's exact grey); what its probe refuses (not a JPEG, or one whose grey is not its
    /// luma) takes the CPU path.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub grey_read: bool,
    /// With `grey_read`, the weights of the grey of a colour PNG (8-bit RGB or RGBA, no
    /// gamma, chromaticities or transparent colour), as libpng's `png_set_rgb_to_gray` makes it
    /// without gamma: `(r * w[0] + g * w[1] + b * w[2]) >> 15`, the weights adding up to
    /// 32768 (OpenCV's `[9797, 19234, 3737]`, torchvision's reader's `[9794, 19234, 3740]`;
    /// the Python package finds which the installed reader uses). Without them a grey read
    /// refuses colour PNGs, named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grey_png_weights: Option<[u16; 3]>,
    /// The image is made floats before its geometry (torchvision's `ToTensor()` then a
    /// `Resize` or `RandomResizedCrop`): the resize runs torch's float kernel
    /// (`float_bilinear`, `float_bicubic`) on the floats the bytes become (`x / 255`, or the
    /// `to_float` of `normalize`) and its values stay unrounded into the output, bit for bit
    /// torch's. The only pixel ops after the geometry are flips, the output dtype is a float
    /// one, a constant padding fills with zero. Images only, on the CPU path.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resize_floats: bool,
}

/// Whose reading of an image's EXIF orientation a pipeline turns it by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExifReader {
    /// Pillow's (`ImageOps.exif_transpose`, Hugging Face `datasets`):
    /// [`orientation`](hpuload_decoders::orientation::orientation).
    #[default]
    Pillow,
    /// torchvision's readers':
    /// [`torchvision_orientation`](hpuload_decoders::orientation::torchvision_orientation).
    Torchvision,
}

impl ExifReader {
    /// The orientation `bytes` (a whole image file) carries, read this way.
    pub fn read(self, bytes: &[u8]) -> Orientation {
        match self {
            Self::Pillow => orientation(bytes),
            Self::Torchvision => torchvision_orientation(bytes),
        }
    }

    fn is_pillow(&self) -> bool {
        *self == Self::Pillow
    }
}

impl Pipeline {
    /// An empty pipeline named `name`; add ops with [`Pipeline::then`].
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ops: Vec::new(),
            exif_orientation: false,
            exif_reader: ExifReader::Pillow,
            single_channel: false,
            grey_read: false,
            grey_png_weights: None,
            resize_floats: false,
        }
    }

    /// Appends `op`.
    #[must_use]
    pub fn then(mut self, op: impl Into<Op>) -> Self {
        self.ops.push(op.into());
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
                reason: PipelineError::Syntax(format!("{}{at}", e.message().trim_end())),
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
}

/// `RandomApply(ops, p)`: all of `ops`, in order, with probability `p`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomApply {
    /// Pixel ops.
    pub ops: Vec<Op>,
    /// Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

/// `RandomChoice(ops, p)`: one of `ops`, with weights `p` (default equal).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomChoice {
    /// Pixel ops.
    pub ops: Vec<Op>,
    /// Weights.
    #[serde(default)]
    pub p: Option<Vec<f64>>,
}

/// `RandomOrder(ops)`: all of `ops` in a random order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomOrder {
    /// Pixel ops.
    pub ops: Vec<Op>,
}

/// The kind of a wrapper: the first op inside that is not a plain pixel op decides
/// (validation refuses a wrapper of anything but pixel ops).
fn wrapped_kind(ops: &[Op]) -> OpKind {
    ops.iter()
        .map(Op::kind)
        .find(|&k| k != OpKind::Pixel)
        .unwrap_or(OpKind::Pixel)
}

/// The first op inside a wrapper that moves pixels, named with its own inner part.
fn wrapped_mover(ops: &[Op]) -> Option<String> {
    ops.iter().find_map(Op::moving_part)
}

/// Only pixel ops can be wrapped.
fn check_wrapped(ops: &[Op]) -> Result<(), PipelineError> {
    for op in ops {
        if !op.kind().is_pixel() {
            return Err(PipelineError::Parameter(format!(
                "{} inside random_apply/random_choice/random_order (only pixel ops can be)",
                op.name()
            )));
        }
        op.check()?;
    }
    Ok(())
}

impl OpSpec for RandomApply {
    fn kind(&self) -> OpKind {
        wrapped_kind(&self.ops)
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "random_apply")?;
        check_wrapped(&self.ops)
    }
    fn draw(&self, rng: &mut CounterRng, size: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            for op in &self.ops {
                op.draw(rng, size, out);
            }
        }
    }
    fn moving_inner(&self) -> Option<String> {
        wrapped_mover(&self.ops)
    }
    fn needs_square(&self) -> bool {
        self.ops.iter().any(Op::needs_square)
    }
}

impl OpSpec for RandomChoice {
    fn kind(&self) -> OpKind {
        wrapped_kind(&self.ops)
    }
    fn check(&self) -> Result<(), PipelineError> {
        if self.ops.is_empty() {
            return Err(PipelineError::Parameter("random_choice of no ops".into()));
        }
        if let Some(w) = &self.p {
            if w.len() != self.ops.len()
                || w.iter().any(|&x| x.is_nan() || x < 0.0)
                || w.iter().sum::<f64>() <= 0.0
            {
                return Err(PipelineError::Parameter(format!(
                    "random_choice weights {w:?} must be one non-negative weight per op"
                )));
            }
        }
        check_wrapped(&self.ops)
    }
    fn draw(&self, rng: &mut CounterRng, size: (u32, u32), out: &mut Vec<PixelOp>) {
        let k = match &self.p {
            None => rng.below(self.ops.len() as u64) as usize,
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
        self.ops[k].draw(rng, size, out);
    }
    fn moving_inner(&self) -> Option<String> {
        wrapped_mover(&self.ops)
    }
    fn needs_square(&self) -> bool {
        self.ops.iter().any(Op::needs_square)
    }
}

impl OpSpec for RandomOrder {
    fn kind(&self) -> OpKind {
        wrapped_kind(&self.ops)
    }
    fn check(&self) -> Result<(), PipelineError> {
        check_wrapped(&self.ops)
    }
    fn draw(&self, rng: &mut CounterRng, size: (u32, u32), out: &mut Vec<PixelOp>) {
        let mut order: Vec<usize> = (0..self.ops.len()).collect();
        shuffle(rng, &mut order);
        for k in order {
            self.ops[k].draw(rng, size, out);
        }
    }
    fn moving_inner(&self) -> Option<String> {
        wrapped_mover(&self.ops)
    }
    fn needs_square(&self) -> bool {
        self.ops.iter().any(Op::needs_square)
    }
}

//END
