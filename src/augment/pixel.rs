//! A sample's resolved pixel ops: [`PixelOp`] and what it carries ([`Warp`], [`AugMixPlan`],
//! Pillow's enhancers and filters), its properties as exhaustive matches (so whoever adds a
//! variant places it), and the [`Scratch`] memory the kernels share. A leaf of `augment/`:
//! the family files draw `PixelOp`s and `run.rs` runs them.

use serde::Serialize;

use super::albu::Cv2Border;
use super::albu_clahe::ClaheScratch;
use super::albu_distort::GridMap;
use super::albu_filter::{MotionKernel, Noise};
use super::albu_jpeg::JpegScratch;
use super::albu_tone::EqualizeMode;

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
    /// `adjust_hue(factor)` as torchvision v1 computes it on a tensor (its HSV conversion
    /// divides where v2 multiplies by a reciprocal).
    HueV1(f64),
    /// torchvision's `adjust_hue(factor)` of a PIL image: through Pillow's byte HSV.
    PilHue(f64),
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
    /// `autocontrast` as torchvision v1 computes it on a tensor: `(x - min) * (255 / (max -
    /// min))` (v2 divides by `(max - min) / 255`: a level apart in about 2% of values).
    AutoContrastV1,
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
        /// v1's kernel rather than v2's.
        v1: bool,
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
    /// Pillow's `filter(ImageFilter.GaussianBlur(radius))` (timm's `GaussianBlur` ops):
    /// three extended box blurs per axis.
    PilGaussianBlur(f64),
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
    /// albumentations' `Transpose`: `image.transpose(1, 0, 2)` of a square image.
    Transpose,
    /// `np.rot90(image, k)` of a square image: `k` counter-clockwise quarter turns (1-3).
    Rot90(u8),
    /// albumentations' `RandomBrightnessContrast`: `x * alpha + beta` through albucore's
    /// float32 lookup table.
    MultiplyAdd {
        /// The factor (1 + the contrast drawn).
        alpha: f64,
        /// The shift, in levels (255 times the brightness drawn).
        beta: f64,
    },
    /// albumentations' `RandomGamma`: its table of `x ** gamma`, truncated.
    Gamma(f64),
    /// albumentations' `RGBShift`: each channel's whole levels added, saturating.
    ChannelShift([i16; 3]),
    /// albumentations' `ToGray` (`weighted_average`): OpenCV's `COLOR_RGB2GRAY` of 8-bit
    /// pixels, in each channel.
    Cv2Gray,
    /// albumentations' `ColorJitter` contrast: the table of `x * factor + mean * (1 -
    /// factor)` around the mean of OpenCV's grey.
    Cv2Contrast(f64),
    /// albumentations' `ColorJitter` saturation: OpenCV's `addWeighted` of the image and its
    /// grey.
    Cv2Saturation(f64),
    /// `cv2.filter2D` with a 3x3 float32 kernel, row-major (albumentations' `Sharpen` and
    /// `Emboss`).
    Filter3x3([f32; 9]),
    /// `cv2.blur` with a `k` x `k` kernel (albumentations' `Blur`).
    BoxBlur(u8),
    /// `cv2.medianBlur` with a `k` x `k` kernel (albumentations' `MedianBlur`).
    MedianBlur(u8),
    /// albumentations' `MotionBlur`: its line kernel through `cv2.filter2D`.
    MotionBlur(Box<MotionKernel>),
    /// albumentations' `GaussianBlur`: its kernel of `size` and `sigma` through
    /// `cv2.sepFilter2D`.
    SepGaussian {
        /// The kernel's side (odd).
        size: u8,
        /// Its sigma.
        sigma: f64,
    },
    /// albumentations' `GaussNoise`: normal values, truncated, added with saturation.
    GaussNoise(Noise),
    /// OpenCV's `warpAffine` with `INTER_LINEAR` (albumentations' `Affine`).
    Cv2Affine {
        /// Output pixel to source point, float32 `(m0, m1, m2, m3, m4, m5)`.
        inverse: [f32; 6],
        /// The same map in double, as OpenCV's fixed-point `warpAffine` of other arrays than
        /// uint8, uint16 and float32 takes it (a segmentation mask of int32 or float64 values
        /// moving with the image).
        inverse_f64: [f64; 6],
        /// What is read outside the image.
        border: Cv2Border,
        /// The constant border's colour.
        fill: [u8; 3],
    },
    /// albumentations' `ChannelDropout`: the channels marked set to `fill`.
    DropChannels {
        /// Which channels.
        drop: [bool; 3],
        /// Their value.
        fill: u8,
    },
    /// albumentations' `Equalize`: each channel through OpenCV's `equalizeHist` or
    /// albumentations' Pillow-like table.
    AlbuEqualize(EqualizeMode),
    /// albumentations' `Downscale` by this scale, nearest both ways.
    Downscale(f64),
    /// albumentations' `ImageCompression`: OpenCV's JPEG encoding at this quality and back.
    JpegRoundTrip(u8),
    /// albumentations' `CLAHE`: L of OpenCV's 8-bit Lab equalized by OpenCV's CLAHE.
    Clahe {
        /// The drawn clip limit.
        clip_limit: f64,
        /// The grid: tiles across, tiles down.
        tiles: [u16; 2],
    },
    /// albumentations' `GridDistortion`: its grid's map through OpenCV's `remap`.
    GridDistortion(Box<GridMap>),
    /// albumentations' `OpticalDistortion` (camera): OpenCV's undistortion map through
    /// `remap`.
    OpticalDistortion {
        /// The distortion coefficient (`k1 = k2 = k`, as float32).
        k: f64,
        /// What is read outside the image.
        border: Cv2Border,
        /// The constant border's colour.
        fill: [u8; 3],
    },
    /// albumentations' `HueSaturationValue`: shifts in OpenCV's byte HSV.
    HsvShift {
        /// Added to the hue (180 a turn), modulo 180.
        hue: f64,
        /// Its whole part added to the saturation.
        sat: f64,
        /// Its whole part added to the value.
        val: f64,
    },
}

/// How a pixel op's result depends on the image around each pixel, which decides where it may
/// run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Each output pixel from the same input pixel alone.
    Pointwise,
    /// Each output pixel from that pixel and a statistic of the whole image (contrast's mean
    /// grey, autocontrast's extremes, equalize's histogram).
    WholeImage,
    /// Each output pixel from a neighbourhood (blur, sharpness) or another place (flips,
    /// warps).
    Neighbourhood,
}

impl PixelOp {
    /// Whether the op gives the same result before or after a horizontal flip (then the flip
    /// can move into the output writer).
    pub(crate) fn commutes_with_hflip(&self) -> bool {
        match self {
            Self::Warp(_)
            | Self::PilAffine { .. }
            | Self::Transpose
            | Self::Rot90(_)
            | Self::Cv2Affine { .. }
            | Self::GridDistortion(_)
            | Self::Downscale(_)
            | Self::OpticalDistortion { .. }
            // 8x8 blocks from the left edge, chroma rounded by column parity.
            | Self::JpegRoundTrip(_)
            // Tiles from the left edge, the border extended on the right.
            | Self::Clahe { .. }
            // A line at an angle; noise tied to each place.
            | Self::MotionBlur(_)
            | Self::Filter3x3(_)
            | Self::GaussNoise(_) => false,
            // OpenCV computes a row's last `w % 32` pixels otherwise than the rest.
            Self::HsvShift { .. } => false,
            Self::AugMix(m) => m.chains.iter().flatten().all(Self::commutes_with_hflip),
            // Mirror-symmetric: kernels and statistics are the same mirrored.
            Self::Hflip
            | Self::Vflip
            | Self::Brightness(_)
            | Self::Contrast(_)
            | Self::Saturation(_)
            | Self::Hue(_)
            | Self::HueV1(_)
            | Self::PilHue(_)
            | Self::Grayscale
            | Self::PermuteChannels(_)
            | Self::Solarize(_)
            | Self::Posterize(_)
            | Self::AutoContrast
            | Self::AutoContrastV1
            | Self::Equalize
            | Self::AlbuEqualize(_)
            | Self::DropChannels { .. }
            | Self::Invert
            | Self::Sharpness(_)
            | Self::GaussianBlur { .. }
            | Self::PilEnhance { .. }
            | Self::PilAutoContrast
            | Self::PilGaussianBlur(_)
            | Self::SolarizeAdd { .. }
            | Self::MultiplyAdd { .. }
            | Self::ChannelShift(_)
            | Self::Gamma(_)
            | Self::Cv2Gray
            | Self::Cv2Contrast(_)
            | Self::Cv2Saturation(_)
            | Self::BoxBlur(_)
            | Self::MedianBlur(_) => true,
            // Symmetric, but the scalar rest of each row is computed otherwise.
            Self::SepGaussian { .. } => false,
        }
    }

    /// What the op reads around each pixel.
    pub(crate) fn reach(&self) -> Reach {
        match self {
            Self::Brightness(_)
            | Self::Saturation(_)
            | Self::Hue(_)
            | Self::HueV1(_)
            | Self::PilHue(_)
            | Self::Grayscale
            | Self::PermuteChannels(_)
            | Self::Solarize(_)
            | Self::Posterize(_)
            | Self::Invert
            | Self::SolarizeAdd { .. }
            | Self::MultiplyAdd { .. }
            | Self::ChannelShift(_)
            | Self::Gamma(_)
            | Self::Cv2Gray
            | Self::DropChannels { .. }
            | Self::Cv2Saturation(_) => Reach::Pointwise,
            Self::Contrast(_)
            | Self::Cv2Contrast(_)
            | Self::AutoContrast
            | Self::AutoContrastV1
            | Self::Equalize
            | Self::AlbuEqualize(_)
            // Tiles' histograms laid over the whole image.
            | Self::Clahe { .. }
            | Self::PilAutoContrast => Reach::WholeImage,
            // Pillow's enhancers: `Contrast` needs the mean, `Sharpness` a neighbourhood.
            Self::PilEnhance { kind, .. } => match kind {
                PilEnhance::Color | PilEnhance::Brightness => Reach::Pointwise,
                PilEnhance::Contrast => Reach::WholeImage,
                PilEnhance::Sharpness => Reach::Neighbourhood,
            },
            Self::Hflip
            | Self::Vflip
            | Self::Sharpness(_)
            | Self::GaussianBlur { .. }
            | Self::Warp(_)
            | Self::AugMix(_)
            | Self::PilGaussianBlur(_)
            | Self::PilAffine { .. }
            | Self::Transpose
            | Self::Rot90(_)
            | Self::Cv2Affine { .. }
            | Self::GridDistortion(_)
            | Self::Downscale(_)
            | Self::OpticalDistortion { .. }
            | Self::JpegRoundTrip(_)
            | Self::BoxBlur(_)
            | Self::MedianBlur(_)
            | Self::MotionBlur(_)
            | Self::Filter3x3(_)
            | Self::SepGaussian { .. }
            // Pointwise but for its place in the row (OpenCV's vector blocks and the rest, the
            // noise generator's sequence).
            | Self::HsvShift { .. }
            | Self::GaussNoise(_) => Reach::Neighbourhood,
        }
    }

    /// Whether the media engine runs the op on a decoded region before the geometry (a
    /// detection sample's steps on the image): the ops its colour unit has. The others run on
    /// the CPU path.
    pub(crate) fn engine_runs_before_geometry(&self) -> bool {
        match self {
            Self::Brightness(_)
            | Self::Contrast(_)
            | Self::Saturation(_)
            | Self::Hue(_)
            | Self::HueV1(_)
            | Self::PilHue(_)
            | Self::PermuteChannels(_)
            | Self::Grayscale
            | Self::Invert
            | Self::Solarize(_)
            | Self::Posterize(_) => true,
            Self::Hflip
            | Self::Vflip
            | Self::AutoContrast
            | Self::AutoContrastV1
            | Self::Equalize
            | Self::AlbuEqualize(_)
            | Self::DropChannels { .. }
            | Self::Sharpness(_)
            | Self::GaussianBlur { .. }
            | Self::Warp(_)
            | Self::AugMix(_)
            | Self::PilEnhance { .. }
            | Self::PilAutoContrast
            | Self::PilGaussianBlur(_)
            | Self::SolarizeAdd { .. }
            | Self::PilAffine { .. }
            | Self::Transpose
            | Self::Rot90(_)
            | Self::Cv2Affine { .. }
            | Self::GridDistortion(_)
            | Self::Downscale(_)
            | Self::OpticalDistortion { .. }
            | Self::JpegRoundTrip(_)
            | Self::Clahe { .. }
            | Self::MultiplyAdd { .. }
            | Self::ChannelShift(_)
            | Self::Gamma(_)
            | Self::Cv2Gray
            | Self::Cv2Contrast(_)
            | Self::Cv2Saturation(_)
            | Self::BoxBlur(_)
            | Self::MedianBlur(_)
            | Self::MotionBlur(_)
            | Self::Filter3x3(_)
            | Self::SepGaussian { .. }
            | Self::GaussNoise(_)
            | Self::HsvShift { .. } => false,
        }
    }

    /// Whether the op maps levels by the image's own statistics or by thresholds
    /// (equalization, CLAHE, autocontrast, posterize, solarize; in an AugMix chain too), so
    /// that a level's difference in its input can come out as many: the media engine's
    /// resize, within its PSNR floor of the CPU path's, is not within it after one (on corpus
    /// cuts an equalization took 42 dB to 25). The router gives such samples to the CPU path.
    pub(crate) fn amplifies_level_differences(&self) -> bool {
        match self {
            Self::AugMix(plan) => plan
                .chains
                .iter()
                .flatten()
                .any(Self::amplifies_level_differences),
            op => matches!(
                op,
                Self::Equalize
                    | Self::AlbuEqualize(_)
                    | Self::Clahe { .. }
                    | Self::AutoContrast
                    | Self::AutoContrastV1
                    | Self::PilAutoContrast
                    | Self::Posterize(_)
                    | Self::Solarize(_)
                    | Self::SolarizeAdd { .. }
            ),
        }
    }

    /// Whether the op, run before the geometry, needs the whole image decoded rather than the
    /// window's part of it (its result depends on a statistic of the whole image).
    pub(crate) fn needs_whole_image(&self) -> bool {
        self.reach() == Reach::WholeImage
    }

    /// Whether the op makes each pixel its grey (Pillow's `L` conversion, torchvision's
    /// tensor grey): a weighted sum of its channels whose weights add up to one, which a
    /// resize's weighted sums of pixels commute with, but for rounding (the media engine
    /// runs it after its resize: `route.rs`).
    pub(crate) fn makes_grey(&self) -> bool {
        match self {
            Self::Grayscale => true,
            Self::PilEnhance { kind, factor } => *kind == PilEnhance::Color && *factor == 0.0,
            _ => false,
        }
    }
}

//END

/// Reused memory for the pixel ops (one per worker and per engine).
#[derive(Default)]
pub struct Scratch {
    pub(super) bytes: Vec<u8>,
    pub(super) floats: Vec<f32>,
    pub(super) original: Vec<u8>,
    pub(super) chain: Vec<u8>,
    pub(super) mix: Vec<f32>,
    pub(super) sums: Vec<u32>,
    pub(super) jpeg: JpegScratch,
    pub(super) clahe: ClaheScratch,
}

/// A resolved affine warp with torchvision's parameters: `affine(angle, translate, scale,
/// shear, center)` or `rotate(angle, center)` (which warps by `-angle` and takes exact
/// shortcuts for multiples of 90 degrees), sampled by nearest or bilinear interpolation, with
/// `fill` outside the image (`None`: zeros, without torchvision's mask blending).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Warp {
    /// `rotate` (true) or `affine` (false).
    pub rotate: bool,
    /// Degrees (counter-clockwise for `rotate`, clockwise for `affine`, as torchvision).
    pub angle: f64,
    /// Pixels, `[x, y]`.
    pub translate: [f64; 2],
    /// Zoom factor.
    pub scale: f64,
    /// Degrees, `[x, y]`.
    pub shear: [f64; 2],
    /// The centre in pixels; `None`: the image's centre.
    pub center: Option<[f64; 2]>,
    /// Nearest (true) or bilinear.
    pub nearest: bool,
    /// Per-channel fill outside the image.
    pub fill: Option<[f32; 3]>,
    /// The image is a PIL image: torchvision hands the warp to Pillow (`Image.rotate`,
    /// `Image.transform`), whose sampling differs from its tensor kernels' at the edges
    /// (Pillow's bilinear clamps there; a nearest position truncates in f64 or fixed point).
    pub pil: bool,
}

/// One sample's AugMix: the original image weighted by `original`, plus each chain's result
/// (the chain's ops applied to the original) weighted by `weights[i]`, in f32, clamped and
/// truncated to bytes; with `blend` (timm's AugMix), that mixture is then blended with the
/// original by Pillow's `Image.blend(original, mixture, blend)`. `blended` (timm's
/// `augmix-...-b1`) mixes in bytes instead: starting from the original, each chain's result
/// is blended into the image by Pillow's `Image.blend(image, chain, weights[i])` in turn.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AugMixPlan {
    /// The original image's weight.
    pub original: f32,
    /// Each chain's weight.
    pub weights: Vec<f32>,
    /// Each chain's ops.
    pub chains: Vec<Vec<PixelOp>>,
    /// timm's final blend weight of the mixture against the original.
    pub blend: Option<f32>,
    /// timm's blended form: `weights` are the blends, applied in turn.
    pub blended: bool,
}

/// `ImageEnhance`'s four enhancers: each blends the image with a degenerate version of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PilEnhance {
    /// Blend with black.
    Brightness,
    /// Blend with the image's greys (`convert("L")`).
    Color,
    /// Blend with the mean grey, rounded to an integer.
    Contrast,
    /// Blend with the image smoothed by Pillow's `SMOOTH` 3x3 kernel (edges kept).
    Sharpness,
}

/// How `Image.transform` samples the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PilFilter {
    /// Two taps each way, edge-clamped.
    Bilinear,
    /// Four taps each way (Pillow's transform cubic, `a = -1`), edge-clamped.
    Bicubic,
}
