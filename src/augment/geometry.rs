//! Geometry: the crop and resize ops that set the output size (`RandomResizedCrop`, `Resize`,
//! `CenterCrop`), the flips, and the warps (`RandomRotation`, `RandomAffine`), with
//! torchvision's exact arithmetic (Python's round-half-to-even included).

use serde::{Deserialize, Serialize};

use super::error::AugmentError;
use super::error::PipelineError;
use super::pil;
use super::pixel::{PixelOp, Scratch, Warp};
use super::spec::{coin, coin_op, half, linspace_f32, probability, torch_uniform, OpKind, OpSpec};
use crate::rng::CounterRng;

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

    /// `(height, width)`, neither zero.
    fn nonzero(self) -> Result<(u32, u32), PipelineError> {
        match self.hw() {
            (0, _) | (_, 0) => Err(PipelineError::Parameter(format!(
                "size {self:?} has a zero side"
            ))),
            hw => Ok(hw),
        }
    }
}

/// How a resize or a warp samples the source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Interpolation {
    /// Nearest neighbour (torch's `nearest`: source index `floor(i * in / out)`).
    Nearest,
    /// Pillow's nearest neighbour (`Image.resize(size, NEAREST)`, what torchvision's resizes
    /// do to a PIL image): the source pixel under the output pixel's centre. Resizes only.
    PilNearest,
    /// Antialiased bilinear (Pillow's filter, which torchvision's antialiased tensor resize
    /// reproduces).
    #[default]
    Bilinear,
    /// Antialiased bicubic (Pillow's, `a = -0.5`).
    Bicubic,
    /// Pillow's bilinear with its own 22-bit weights (`Image.resize(size, BILINEAR)`, what
    /// torchvision's resizes do to a PIL image), byte for byte; the engine takes it as
    /// bilinear. Resizes only.
    PilBilinear,
    /// Pillow's bicubic likewise (`BICUBIC`).
    PilBicubic,
    /// Pillow's Lanczos likewise (`LANCZOS`, diffusers' scripts' default resize). The CPU
    /// path only: the engine has no Lanczos filter.
    PilLanczos,
    /// Pillow's box filter likewise (`BOX`: each output pixel the mean of the source pixels
    /// it covers). The CPU path only.
    PilBox,
    /// Pillow's Hamming-windowed sinc likewise (`HAMMING`, support 1). The CPU path only.
    PilHamming,
    /// Antialiased bilinear as torch computes it on a float image, then rounded (what
    /// torchvision's v1 resizes do to a uint8 tensor: cast to float, interpolate, round),
    /// byte for byte; the engine takes it as bilinear. Resizes only.
    FloatBilinear,
    /// Antialiased bicubic likewise (clamped to `[0, 255]` before the rounding).
    FloatBicubic,
    /// Bilinear or bicubic with equal probability, per sample (timm's `'random'`).
    Random,
    /// Bilinear from the two nearest source pixels on each axis, without antialiasing when
    /// shrinking (torch's `interpolate(..., antialias=False)`, what torchvision's video
    /// reference resizes with). The CPU path only.
    BilinearNoAntialias,
    /// Bilinear without antialiasing as torch's uint8 kernel computes it (torchvision v2's
    /// `Resize(antialias=False)` of a uint8 tensor): the same two taps in 16-bit fixed
    /// point, the pass across rounded to bytes before the pass down, byte for byte. The CPU
    /// path only.
    TorchBilinearNoAntialias,
    /// OpenCV's `cv2.resize(..., interpolation=cv2.INTER_LINEAR)` of an 8-bit image (what
    /// albumentations' resizes run by default): two taps per axis with 11-bit weights, no
    /// antialiasing, byte for byte (the resampler's `cv2_linear` kernel). The CPU path only.
    Cv2Linear,
    /// OpenCV's `cv2.INTER_NEAREST` of an 8-bit image: source pixel `floor(i * in / out)`,
    /// the scale in f64, byte for byte. The CPU path only.
    Cv2Nearest,
    /// OpenCV's `cv2.INTER_AREA` of an 8-bit image: each output pixel the mean of the source
    /// cell it covers where both axes shrink (`cv2_area`), OpenCV's two-tap area rule where
    /// either enlarges (`cv2_linear`), byte for byte. The CPU path only.
    Cv2Area,
    /// OpenCV's `cv2.INTER_CUBIC` of an 8-bit image: Keys' cubic (`a = -0.75`), four taps
    /// per axis, no antialiasing, as opencv-python's wheels compute it (through Intel IPP)
    /// within one level (`cv2_cubic`). The CPU path only.
    Cv2Cubic,
}

impl Interpolation {
    /// Whether the resize does not antialias (the engine's filters all do: the CPU path
    /// runs it).
    pub fn no_antialias(self) -> bool {
        matches!(
            self,
            Self::BilinearNoAntialias
                | Self::TorchBilinearNoAntialias
                | Self::Cv2Linear
                | Self::Cv2Nearest
                | Self::Cv2Area
                | Self::Cv2Cubic
        )
    }

    /// Whether the filter is one only Pillow has (Lanczos, box, Hamming): the engine has
    /// none of them, so such a resize runs on the CPU path.
    pub fn pillow_only(self) -> bool {
        matches!(self, Self::PilLanczos | Self::PilBox | Self::PilHamming)
    }

    /// The media engine's filter for a drawn interpolation (`Random` is never drawn).
    pub fn filter(self) -> hpuload_decoders::jpeg::Filter {
        use hpuload_decoders::jpeg::Filter;
        match self {
            Self::Nearest | Self::PilNearest | Self::Cv2Nearest => Filter::Nearest,
            Self::PilBilinear | Self::FloatBilinear => Filter::Bilinear,
            Self::PilBicubic | Self::FloatBicubic | Self::PilLanczos => Filter::Bicubic,
            Self::PilBox | Self::PilHamming => Filter::Bilinear,
            Self::Bicubic | Self::Cv2Cubic => Filter::Bicubic,
            Self::Bilinear
            | Self::Random
            | Self::BilinearNoAntialias
            | Self::TorchBilinearNoAntialias
            | Self::Cv2Linear
            | Self::Cv2Area => Filter::Bilinear,
        }
    }
}

pub(super) fn nearest() -> Interpolation {
    Interpolation::Nearest
}

/// Warps interpolate with nearest or bilinear, as torchvision's tensor warps.
pub(super) fn warp_interpolation(i: Interpolation, what: &str) -> Result<(), PipelineError> {
    match i {
        Interpolation::Nearest | Interpolation::Bilinear => Ok(()),
        _ => Err(PipelineError::Parameter(format!(
            "{what} interpolates with nearest or bilinear (as torchvision's tensor warps), not {i:?}"
        ))),
    }
}

/// `RandomResizedCrop(size, scale, ratio, interpolation)`: a random window of `scale` times
/// the area and aspect ratio in `ratio` (log-uniform), resized to `size`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomResizedCrop {
    /// Output size.
    pub size: Size,
    /// Range of the window's area as a fraction of the image. Default `[0.08, 1.0]`.
    #[serde(default = "default_scale")]
    pub scale: [f64; 2],
    /// Range of the window's aspect ratio (width / height). Default `[3/4, 4/3]`.
    #[serde(default = "default_ratio")]
    pub ratio: [f64; 2],
    /// Default bilinear.
    #[serde(default)]
    pub interpolation: Interpolation,
}

impl RandomResizedCrop {
    /// torchvision's defaults (scale `[0.08, 1]`, ratio `[3/4, 4/3]`, bilinear) at `size`.
    pub fn new(size: Size) -> Self {
        Self {
            size,
            scale: default_scale(),
            ratio: default_ratio(),
            interpolation: Interpolation::Bilinear,
        }
    }
}

fn default_scale() -> [f64; 2] {
    [0.08, 1.0]
}
fn default_ratio() -> [f64; 2] {
    [3.0 / 4.0, 4.0 / 3.0]
}

impl OpSpec for RandomResizedCrop {
    fn kind(&self) -> OpKind {
        OpKind::Geometry
    }
    fn check(&self) -> Result<(), PipelineError> {
        let Self { scale, ratio, .. } = *self;
        self.size.nonzero()?;
        if !(0.0 < scale[0] && scale[0] <= scale[1] && scale[1] <= 1.0) {
            return Err(PipelineError::Parameter(format!(
                "random_resized_crop scale {scale:?} must satisfy 0 < min <= max <= 1"
            )));
        }
        if !(0.0 < ratio[0] && ratio[0] <= ratio[1]) {
            return Err(PipelineError::Parameter(format!(
                "random_resized_crop ratio {ratio:?} must satisfy 0 < min <= max"
            )));
        }
        Ok(())
    }
    /// Geometry: the plan draws the window.
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

/// `Resize(size)`: a single number resizes the shorter side to it (keeping the aspect ratio,
/// the longer side truncated as torchvision does); `[h, w]` resizes to exactly that.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resize {
    /// Target size.
    pub size: Size,
    /// Default bilinear.
    #[serde(default)]
    pub interpolation: Interpolation,
}

impl OpSpec for Resize {
    fn kind(&self) -> OpKind {
        OpKind::Geometry
    }
    fn check(&self) -> Result<(), PipelineError> {
        self.size.nonzero().map(drop)
    }
    /// Geometry: the plan computes the window.
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

/// torchvision v2's `RandomResize(min_size, max_size)`: the shorter side to a size drawn
/// uniformly from `min_size..max_size` (the maximum excluded, as `torch.randint` draws it), the
/// other side in proportion; the short-side scale jitter of video recipes (VideoMAE's 256 to
/// 320). A `center_crop` or `random_crop` must follow (batch shapes are static).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomResize {
    /// The smallest shorter side drawn.
    pub min_size: u32,
    /// One past the largest.
    pub max_size: u32,
    /// Default bilinear.
    #[serde(default)]
    pub interpolation: Interpolation,
}

impl OpSpec for RandomResize {
    fn kind(&self) -> OpKind {
        OpKind::Geometry
    }
    fn check(&self) -> Result<(), PipelineError> {
        if self.min_size == 0 || self.min_size >= self.max_size {
            return Err(PipelineError::Parameter(format!(
                "random_resize needs 0 < min_size < max_size, got {} and {}",
                self.min_size, self.max_size
            )));
        }
        Ok(())
    }
    /// Geometry: the plan draws the size.
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

/// `CenterCrop(size)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CenterCrop {
    /// Output size.
    pub size: Size,
    /// An image narrower or shorter than the crop is padded with black first, centred, as
    /// torchvision's `CenterCrop` pads it (a crop without a resize before it). Default false:
    /// such an image is that sample's error.
    #[serde(default)]
    pub pad: bool,
    /// The offset is `(size - crop) // 2` on each axis (albumentations' `CenterCrop`) instead
    /// of torchvision's `round((size - crop) / 2)` (rounded half to even). Default false.
    #[serde(default)]
    pub floor: bool,
}

impl OpSpec for CenterCrop {
    fn kind(&self) -> OpKind {
        OpKind::Geometry
    }
    fn check(&self) -> Result<(), PipelineError> {
        self.size.nonzero().map(drop)
    }
    /// Geometry: the plan computes the window.
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

/// The centre square of the image's shorter side, at `(side - short) // 2` on the longer axis:
/// the cut `img[(h - m) // 2:(h + m) // 2, (w - m) // 2:(w + m) // 2]` with `m = min(h, w)`
/// that latent diffusion's and diffusers' textual inversion Datasets make of an image's array
/// before resizing it. Its size is each image's own, so a `resize` to one size must follow
/// it (the crop is cut out first and then resampled, `Geometry::CropThenResize`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CenterSquare {}

impl OpSpec for CenterSquare {
    fn kind(&self) -> OpKind {
        OpKind::Geometry
    }
    fn check(&self) -> Result<(), PipelineError> {
        Ok(())
    }
    /// Geometry: the plan computes the window.
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

/// `RandomCrop(size, padding, pad_if_needed, fill, padding_mode)`: a window of `size` at a
/// uniformly drawn integer offset of the image (or of its resize, after a `resize`), padded
/// first as torchvision pads it (padding only without a resize before it). An image still
/// smaller than the crop is that sample's error.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomCrop {
    /// Output size.
    pub size: Size,
    /// Padding on each side, `[left, top, right, bottom]`. Default none.
    #[serde(default)]
    pub padding: Option<[u32; 4]>,
    /// A side still shorter than the crop after `padding` grows on both ends by the
    /// difference. Default false.
    #[serde(default)]
    pub pad_if_needed: bool,
    /// The padding's colour (with `padding_mode` constant). Default black.
    #[serde(default)]
    pub fill: [u8; 3],
    /// What the padding shows. Default constant (`fill`).
    #[serde(default)]
    pub padding_mode: PaddingMode,
    /// `padding` and what `pad_if_needed` adds are padded in one step, as torchvision v2 does
    /// (a mirror of the image); default false: v1's two steps, the second mirroring the
    /// padded image.
    #[serde(default)]
    pub pad_at_once: bool,
    /// A side shorter than the crop (of the image, or of its resize after a `resize` or
    /// `random_resize`) is padded at its end (below, to the right) with `fill` up to the
    /// crop before the offset is drawn: the segmentation reference's `pad_if_smaller` then
    /// `RandomCrop`. Flips between the resize and the crop mirror the image, not the
    /// padding. Excludes `padding` and `pad_if_needed`. Default false.
    #[serde(default)]
    pub pad_end: bool,
    /// albumentations' `PadIfNeeded(min_height, min_width)` before the crop, `[h, w]` (or
    /// its `RandomCrop(pad_if_needed=True)`, to the crop): a side of the image shorter than
    /// this is padded on both ends to it, `(min - side) // 2` before, with `fill`
    /// (`padding_mode` constant) or the image's edge repeated or mirrored (`edge`, `reflect`
    /// and `symmetric` as OpenCV's `BORDER_REPLICATE`, `BORDER_REFLECT_101` and
    /// `BORDER_REFLECT`; then no larger than the crop), before the offset is drawn. At
    /// least the crop; no resize before it. Excludes `padding`, `pad_if_needed` and
    /// `pad_end`. Default none.
    #[serde(default)]
    pub pad_centred_to: Option<Size>,
}

impl RandomCrop {
    /// The padding it asks for, if any.
    pub(crate) fn pad(&self) -> Option<Pad> {
        (self.padding.is_some() || self.pad_if_needed).then(|| Pad {
            sides: self.padding.unwrap_or_default(),
            if_needed: self.pad_if_needed,
            fill: self.fill,
            mode: self.padding_mode,
            at_once: self.pad_at_once,
        })
    }
}

/// What padding shows past an image's edge (torchvision's `padding_mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaddingMode {
    /// The fill colour.
    #[default]
    Constant,
    /// The nearest edge pixel, repeated.
    Edge,
    /// The image mirrored about its edge pixel (which is not repeated): `2 1 | 0 1 2 3 | 2 1`.
    Reflect,
    /// The image mirrored about its edge (the edge pixel repeated): `1 0 | 0 1 2 3 | 3 2`.
    Symmetric,
}

impl PaddingMode {
    /// OpenCV's border that pads as this mode does.
    pub(crate) fn cv2(self) -> super::albu::Cv2Border {
        use super::albu::Cv2Border;
        match self {
            Self::Constant => Cv2Border::Constant,
            Self::Edge => Cv2Border::Replicate,
            Self::Reflect => Cv2Border::Reflect101,
            Self::Symmetric => Cv2Border::Reflect,
        }
    }

    /// The pixel that position `i` of an axis of `len` pixels padded this way shows (NumPy's
    /// `np.pad`, which torchvision pads PIL images with: periodic past one mirror image); `i`
    /// itself inside the axis. Constant padding shows no pixel: it is not asked.
    fn source(self, i: i64, len: i64) -> i64 {
        match self {
            Self::Constant | Self::Edge => i.clamp(0, len - 1),
            Self::Reflect if len == 1 => 0,
            Self::Reflect => {
                let m = i.rem_euclid(2 * (len - 1));
                if m < len {
                    m
                } else {
                    2 * (len - 1) - m
                }
            }
            Self::Symmetric => {
                let m = i.rem_euclid(2 * len);
                if m < len {
                    m
                } else {
                    2 * len - 1 - m
                }
            }
        }
    }
}

/// How an image is padded before a crop, as torchvision pads it: `sides` `[left, top, right,
/// bottom]` first, then, with `if_needed`, a side still shorter than the crop grows on both
/// ends by the difference (`RandomCrop`, padding the padded image again in `mode`); a
/// `CenterCrop` pads what it lacks with black, half before.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pad {
    pub sides: [u32; 4],
    pub if_needed: bool,
    pub fill: [u8; 3],
    pub mode: PaddingMode,
    /// `sides` and `if_needed`'s padding in one step (torchvision v2).
    pub at_once: bool,
}

/// What a sample's padded window shows past the image (its plan carries it when the window
/// reaches past the image).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Padding {
    /// The colour, with [`PaddingMode::Constant`].
    pub fill: [u8; 3],
    /// What the padding shows.
    pub mode: PaddingMode,
    /// The padding asked for, `[left, top, right, bottom]`, before `pad_if_needed` pads the
    /// padded image again (in `mode`: a mirror of the padded image, not of the image); `[0;
    /// 4]` when the two are padded in one step (torchvision v2).
    pub sides: [u32; 4],
}

impl Padding {
    /// The image's pixel that position `i` of the padded window's axis shows, for a mode that
    /// is not constant (`i` in the image's pixels, `len` of them, `before`/`after` the first
    /// padding of that axis). Past the first padding (what `pad_if_needed` added), the pixel
    /// of that padded image it mirrors, then the image's pixel that one shows.
    fn mirrored(&self, i: i64, len: i64, (before, after): (u32, u32)) -> usize {
        let (before, after) = (i64::from(before), i64::from(after));
        let padded = self.mode.source(i + before, before + len + after);
        self.mode.source(padded - before, len) as usize
    }
}

impl OpSpec for RandomCrop {
    fn kind(&self) -> OpKind {
        OpKind::Geometry
    }
    fn check(&self) -> Result<(), PipelineError> {
        if self.pad_end && (self.padding.is_some() || self.pad_if_needed) {
            return Err(PipelineError::Parameter(
                "random_crop: pad_end excludes padding and pad_if_needed".into(),
            ));
        }
        if self.pad_end && self.padding_mode != PaddingMode::Constant {
            return Err(PipelineError::Parameter(
                "random_crop: pad_end pads with the fill (padding_mode constant)".into(),
            ));
        }
        if let Some(to) = self.pad_centred_to {
            if self.pad_end || self.padding.is_some() || self.pad_if_needed {
                return Err(PipelineError::Parameter(
                    "random_crop: pad_centred_to excludes padding, pad_if_needed and pad_end"
                        .into(),
                ));
            }
            let (out, to) = (self.size.hw(), to.hw());
            if to.0 < out.0 || to.1 < out.1 {
                return Err(PipelineError::Parameter(format!(
                    "random_crop: pad_centred_to {to:?} is smaller than the crop {out:?}"
                )));
            }
            if to.0 >= 2 * out.0 || to.1 >= 2 * out.1 {
                // Past that, a crop of a small image could show none of it.
                return Err(PipelineError::Parameter(format!(
                    "random_crop: pad_centred_to {to:?} is twice the crop {out:?} or more"
                )));
            }
            if self.padding_mode != PaddingMode::Constant && to != out {
                return Err(PipelineError::Parameter(format!(
                    "random_crop: pad_centred_to {to:?} larger than the crop {out:?} pads with the fill only"
                )));
            }
        }
        self.size.nonzero().map(drop)
    }
    /// Geometry: the plan draws the offset.
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

coin_op!(
    /// `RandomHorizontalFlip(p)`. In a detection pipeline, before the resize, it moves the
    /// boxes too. Default p 0.5.
    RandomHorizontalFlip = "random_horizontal_flip", p = "half", MovingPixel, PixelOp::Hflip
);
coin_op!(
    /// `RandomVerticalFlip(p)`. Default p 0.5.
    RandomVerticalFlip = "random_vertical_flip", p = "half", MovingPixel, PixelOp::Vflip
);

fn check_degrees(degrees: [f64; 2], what: &str) -> Result<(), PipelineError> {
    if degrees[0] > degrees[1] || degrees.iter().any(|d| d.is_nan()) {
        return Err(PipelineError::Parameter(format!(
            "{what} degrees {degrees:?} must be [min, max]"
        )));
    }
    Ok(())
}

/// `RandomRotation(degrees, interpolation, fill, center)` (no `expand`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomRotation {
    /// Angle range in degrees.
    pub degrees: [f64; 2],
    /// Nearest (default) or bilinear.
    #[serde(default = "nearest")]
    pub interpolation: Interpolation,
    /// Per-channel fill outside the image (0..=255); none: zeros.
    #[serde(default)]
    pub fill: Option<[f32; 3]>,
    /// Centre in pixels; none: the image's centre.
    #[serde(default)]
    pub center: Option<[f64; 2]>,
    /// The image is a PIL image (torchvision then warps with Pillow). Default false: the
    /// tensor kernels.
    #[serde(default)]
    pub pil: bool,
}

impl OpSpec for RandomRotation {
    fn kind(&self) -> OpKind {
        OpKind::MovingPixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        check_degrees(self.degrees, "random_rotation")?;
        warp_interpolation(self.interpolation, "random_rotation")
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        out.push(PixelOp::Warp(Warp {
            rotate: true,
            angle: torch_uniform(rng, self.degrees),
            translate: [0.0; 2],
            scale: 1.0,
            shear: [0.0; 2],
            center: self.center,
            nearest: self.interpolation == Interpolation::Nearest,
            fill: self.fill,
            pil: self.pil,
        }));
    }
}

/// `RandomAffine(degrees, translate, scale, shear, interpolation, fill, center)`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomAffine {
    /// Angle range in degrees.
    pub degrees: [f64; 2],
    /// Largest translation as fractions of width and height.
    #[serde(default)]
    pub translate: Option<[f64; 2]>,
    /// Zoom range.
    #[serde(default)]
    pub scale: Option<[f64; 2]>,
    /// Shear ranges in degrees: `[x_min, x_max, y_min, y_max]` (y `[0, 0]` for none).
    #[serde(default)]
    pub shear: Option<[f64; 4]>,
    /// Nearest (default) or bilinear.
    #[serde(default = "nearest")]
    pub interpolation: Interpolation,
    /// Per-channel fill (0..=255); none: zeros.
    #[serde(default)]
    pub fill: Option<[f32; 3]>,
    /// Centre in pixels; none: the image's centre.
    #[serde(default)]
    pub center: Option<[f64; 2]>,
    /// The image is a PIL image (torchvision then warps with Pillow). Default false: the
    /// tensor kernels.
    #[serde(default)]
    pub pil: bool,
}

impl OpSpec for RandomAffine {
    fn kind(&self) -> OpKind {
        OpKind::MovingPixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        let name = "random_affine";
        check_degrees(self.degrees, name)?;
        if let Some(t) = self.translate {
            if !t.iter().all(|v| (0.0..=1.0).contains(v)) {
                return Err(PipelineError::Parameter(format!(
                    "{name} translate {t:?} must lie in [0, 1]"
                )));
            }
        }
        if let Some(s) = self.scale {
            if !(0.0 < s[0] && s[0] <= s[1]) {
                return Err(PipelineError::Parameter(format!(
                    "{name} scale {s:?} must satisfy 0 < min <= max"
                )));
            }
        }
        if let Some(s) = self.shear {
            if !(s[0] <= s[1] && s[2] <= s[3]) {
                return Err(PipelineError::Parameter(format!(
                    "{name} shear {s:?} must be [min, max] pairs"
                )));
            }
        }
        warp_interpolation(self.interpolation, name)
    }
    fn draw(&self, rng: &mut CounterRng, size: (u32, u32), out: &mut Vec<PixelOp>) {
        let angle = torch_uniform(rng, self.degrees);
        let translate = self.translate.map_or([0.0; 2], |[fx, fy]| {
            let (mx, my) = (fx * f64::from(size.1), fy * f64::from(size.0));
            let tx = round_half_even(torch_uniform(rng, [-mx, mx]));
            let ty = round_half_even(torch_uniform(rng, [-my, my]));
            [tx, ty]
        });
        let scale = self.scale.map_or(1.0, |s| torch_uniform(rng, s));
        let shear = self.shear.map_or([0.0; 2], |s| {
            let x = torch_uniform(rng, [s[0], s[1]]);
            let y = if s[2] == 0.0 && s[3] == 0.0 {
                0.0
            } else {
                torch_uniform(rng, [s[2], s[3]])
            };
            [x, y]
        });
        out.push(PixelOp::Warp(Warp {
            rotate: false,
            angle,
            translate,
            scale,
            shear,
            center: self.center,
            nearest: self.interpolation == Interpolation::Nearest,
            fill: self.fill,
            pil: self.pil,
        }));
    }
}

/// A window of the decoded image to resample to the output size, in source pixels.
///
/// `view == true`: the window is an integer rectangle cut out first, so resampling sees only
/// pixels inside it (torchvision's crop-then-resize, RandomResizedCrop). `view == false`: the
/// window is fractional and resampling may read pixels around it, which is exactly a resize of
/// the whole image followed by a crop (torchvision's Resize then CenterCrop).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CropBox {
    /// Left edge, in source pixels.
    pub left: f64,
    /// Top edge, in source pixels.
    pub top: f64,
    /// Width, in source pixels.
    pub width: f64,
    /// Height, in source pixels.
    pub height: f64,
    /// Whether the window is cut out before resampling (integer box) or resampled in place.
    pub view: bool,
}

impl CropBox {
    /// The media engine's name for the same window (the decoders' geometry vocabulary).
    pub fn window(&self) -> hpuload_decoders::jpeg::Window {
        hpuload_decoders::jpeg::Window {
            left: self.left,
            top: self.top,
            width: self.width,
            height: self.height,
        }
    }

    /// The same window in the `width` x `height` image as stored, for an image shown turned by
    /// `turn` (the crop was drawn on the turned image).
    pub fn stored(
        &self,
        turn: hpuload_decoders::orientation::Orientation,
        width: u32,
        height: u32,
    ) -> Self {
        let w = turn.stored_window(self.window(), width, height);
        Self {
            left: w.left,
            top: w.top,
            width: w.width,
            height: w.height,
            view: self.view,
        }
    }

    /// The integer region of a `width` x `height` image that the engine must decode for this
    /// crop at `out_w` output columns with `filter`: the crop itself for an integer window;
    /// for a fractional window (resize-then-crop), the window plus the resampling filter's
    /// reach on each side (twice as far for bicubic), so edge pixels see the same neighbours
    /// as a full decode.
    pub fn covering_region(
        &self,
        width: u32,
        height: u32,
        out_w: u32,
        filter: hpuload_decoders::jpeg::Filter,
    ) -> hpuload_decoders::jpeg::Region {
        let reach = match filter {
            hpuload_decoders::jpeg::Filter::Bicubic => 2.0,
            _ => 1.0,
        };
        let margin = if self.view {
            0.0
        } else {
            ((self.width / f64::from(out_w)).max(1.0) * reach).ceil() + 1.0
        };
        let x0 = (self.left - margin).floor().max(0.0) as u32;
        let y0 = (self.top - margin).floor().max(0.0) as u32;
        let x1 = ((self.left + self.width + margin).ceil() as u32)
            .min(width)
            .max(x0 + 1);
        let y1 = ((self.top + self.height + margin).ceil() as u32)
            .min(height)
            .max(y0 + 1);
        hpuload_decoders::jpeg::Region {
            x: x0,
            y: y0,
            width: x1 - x0,
            height: y1 - y0,
        }
    }

    /// The whole `width`x`height` image.
    pub fn full(width: u32, height: u32) -> Self {
        Self {
            left: 0.0,
            top: 0.0,
            width: width.into(),
            height: height.into(),
            view: true,
        }
    }

    /// Whether the window lies within a `width`x`height` image (a padded crop's may not).
    pub fn inside(&self, width: u32, height: u32) -> bool {
        self.left >= 0.0
            && self.top >= 0.0
            && self.left + self.width <= f64::from(width) + 1e-6
            && self.top + self.height <= f64::from(height) + 1e-6
    }

    /// An integer rectangle, cut out before resampling.
    pub fn rect(left: u32, top: u32, width: u32, height: u32) -> Self {
        Self {
            left: left.into(),
            top: top.into(),
            width: width.into(),
            height: height.into(),
            view: true,
        }
    }
}

/// Python 3's `round()`: halves go to the even neighbour.
pub(crate) fn round_half_even(x: f64) -> f64 {
    x.round_ties_even()
}

/// `torchvision.transforms.RandomResizedCrop.get_params`: up to 10 random tries, then the
/// central-crop fallback clamped to the ratio range.
pub(crate) fn random_resized_crop(
    width: u32,
    height: u32,
    scale: [f64; 2],
    ratio: [f64; 2],
    rng: &mut CounterRng,
) -> CropBox {
    let (wf, hf) = (f64::from(width), f64::from(height));
    let area = wf * hf;
    let (log_lo, log_hi) = (ratio[0].ln(), ratio[1].ln());
    for _ in 0..10 {
        let target_area = area * rng.uniform_in(scale[0], scale[1]);
        let aspect = rng.uniform_in(log_lo, log_hi).exp();
        let w = round_half_even((target_area * aspect).sqrt());
        let h = round_half_even((target_area / aspect).sqrt());
        if 0.0 < w && w <= wf && 0.0 < h && h <= hf {
            let (w, h) = (w as u32, h as u32);
            let top = rng.below(u64::from(height - h) + 1) as u32;
            let left = rng.below(u64::from(width - w) + 1) as u32;
            return CropBox::rect(left, top, w, h);
        }
    }
    let in_ratio = wf / hf;
    let (w, h) = if in_ratio < ratio[0] {
        (
            width,
            (round_half_even(wf / ratio[0]) as u32).clamp(1, height),
        )
    } else if in_ratio > ratio[1] {
        (
            (round_half_even(hf * ratio[1]) as u32).clamp(1, width),
            height,
        )
    } else {
        (width, height)
    };
    CropBox::rect((width - w) / 2, (height - h) / 2, w, h)
}

/// torchvision's `Resize(short)` output size: the shorter side becomes `short`, the longer side
/// `int(short * long / short_side)` (truncated).
pub(crate) fn resized_size(width: u32, height: u32, short: u32) -> (u32, u32) {
    let (w, h) = (u64::from(width), u64::from(height));
    let s = u64::from(short);
    if w <= h {
        (short, ((s * h) / w).max(1) as u32)
    } else {
        (((s * w) / h).max(1) as u32, short)
    }
}

/// albumentations' `SmallestMaxSize(max_size)` output size: both sides scaled by
/// `max_size / shorter side` (in f64) and rounded half to even, at least 1.
pub(crate) fn albu_smallest_size(width: u32, height: u32, max_size: u32) -> (u32, u32) {
    albu_scaled(
        width,
        height,
        f64::from(max_size) / f64::from(width.min(height)),
    )
}

/// albumentations' `LongestMaxSize(max_size)` output size: both sides scaled by
/// `max_size / longer side` (in f64) and rounded half to even, at least 1.
pub(crate) fn albu_longest_size(width: u32, height: u32, max_size: u32) -> (u32, u32) {
    albu_scaled(
        width,
        height,
        f64::from(max_size) / f64::from(width.max(height)),
    )
}

/// Both sides times `scale`, rounded half to even, at least 1 (`max(1, round(side * scale))`).
fn albu_scaled(width: u32, height: u32, scale: f64) -> (u32, u32) {
    let side = |v: u32| (f64::from(v) * scale).round_ties_even().max(1.0) as u32;
    (side(width), side(height))
}

/// The resize before a center crop: torchvision's `Resize(short)` (the shorter side to `short`,
/// the other in proportion) or `Resize((h, w))` (both sides given).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Prescale {
    /// The shorter side to this many pixels.
    Short(u32),
    /// The shorter side to this many pixels, the other rounded (albumentations'
    /// `SmallestMaxSize`).
    ShortRounded(u32),
    /// The longer side to this many pixels, the other rounded (albumentations'
    /// `LongestMaxSize`): only before `albu_pad_if_needed`.
    LongRounded(u32),
    /// The shorter side to a size drawn from `min..max` (`RandomResize`).
    ShortIn(u32, u32),
    /// Exactly `(height, width)`.
    Exact(u32, u32),
}

/// Flips of the resized image before its crop: the crop at `(top, left)` of the flipped
/// image is the crop at the mirrored offset of the image itself, flipped after (so the crop
/// is cut there, and the flips run on its output).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Mirror {
    pub horizontal: bool,
    pub vertical: bool,
}

/// `out` cut from the image padded as `pad` says (no resize before it): the window in the
/// image's pixels, reaching past its edges where it shows the padding (`CropBox::inside`
/// tells; the sample's plan then carries the fill). Centred (`CenterCrop`: the padding is
/// what the crop lacks, half of it before, and the crop is centred in the padded image) or at
/// a drawn offset of the padded image (`RandomCrop`).
pub(crate) fn padded_crop(
    width: u32,
    height: u32,
    out: (u32, u32),
    pad: Pad,
    random_offset: bool,
    rng: &mut CounterRng,
) -> Result<CropBox, AugmentError> {
    let (oh, ow) = out;
    let [l, t, r, b] = pad.sides;
    // Each axis: the padding before the image and the padded length.
    let axis = |len: u32, before: u32, after: u32, crop: u32| -> (u32, u32) {
        let (mut before, mut padded) = (before, before + len + after);
        if random_offset && pad.if_needed && padded < crop {
            // `F.pad(img, [crop - padded, 0])`: both ends grow by the difference.
            before += crop - padded;
            padded += 2 * (crop - padded);
        }
        if !random_offset && padded < crop {
            // `center_crop`: `(crop - len) // 2` before, the rest after.
            before += (crop - padded) / 2;
            padded = crop;
        }
        (before, padded)
    };
    let (px, pw) = axis(width, l, r, ow);
    let (py, ph) = axis(height, t, b, oh);
    holds((pw, ph), out)?;
    let (top, left) = if random_offset {
        let top = rng.below(u64::from(ph - oh) + 1) as u32;
        let left = rng.below(u64::from(pw - ow) + 1) as u32;
        (top, left)
    } else {
        let centre =
            |padded: u32, crop: u32| round_half_even(f64::from(padded - crop) / 2.0) as u32;
        (centre(ph, oh), centre(pw, ow))
    };
    Ok(CropBox {
        left: f64::from(left) - f64::from(px),
        top: f64::from(top) - f64::from(py),
        width: f64::from(ow),
        height: f64::from(oh),
        view: true,
    })
}

/// Refuses a `(width, height)` image (padded or resized) smaller than the crop `(h, w)`.
fn holds((width, height): (u32, u32), (oh, ow): (u32, u32)) -> Result<(), AugmentError> {
    if ow > width || oh > height {
        return Err(AugmentError::SmallerThanCrop {
            width,
            height,
            crop_width: ow,
            crop_height: oh,
        });
    }
    Ok(())
}

/// The padded crop `crop` (integer, reaching past the `width`x`height` RGB8 image) composed
/// into `out`: the padding as `padding` says where the window shows it, the image's pixels
/// elsewhere. Returns the window as the whole of `out`, for the resampler.
pub(crate) fn compose_padded(
    crop: &CropBox,
    padding: &Padding,
    rgb: &[u8],
    width: u32,
    height: u32,
    out: &mut Vec<u8>,
) -> CropBox {
    let (left, top) = (crop.left as i64, crop.top as i64);
    let (cw, ch) = (crop.width as usize, crop.height as usize);
    out.clear();
    out.reserve(cw * ch * 3);
    if padding.mode != PaddingMode::Constant {
        // Each output column's and row's source in the image, then the pixels.
        let [l, t, r, b] = padding.sides;
        let xs: Vec<usize> = (0..cw as i64)
            .map(|x| padding.mirrored(left + x, i64::from(width), (l, r)))
            .collect();
        for y in 0..ch as i64 {
            let row = padding.mirrored(top + y, i64::from(height), (t, b)) * width as usize;
            for &sx in &xs {
                out.extend_from_slice(&rgb[(row + sx) * 3..(row + sx) * 3 + 3]);
            }
        }
        return CropBox::full(cw as u32, ch as u32);
    }
    for _ in 0..cw * ch {
        out.extend_from_slice(&padding.fill);
    }
    // The image's part of the window, in the image's pixels.
    let (x0, x1) = (left.max(0), (left + cw as i64).min(i64::from(width)));
    let (y0, y1) = (top.max(0), (top + ch as i64).min(i64::from(height)));
    if x0 < x1 {
        let n = (x1 - x0) as usize * 3;
        for y in y0..y1 {
            let from = (y as usize * width as usize + x0 as usize) * 3;
            let to = ((y - top) as usize * cw + (x0 - left) as usize) * 3;
            out[to..to + n].copy_from_slice(&rgb[from..from + n]);
        }
    }
    CropBox::full(cw as u32, ch as u32)
}

/// Where a crop's window sits in the (resized) image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Offset {
    /// torchvision's centre: `round((size - crop) / 2)`, half to even.
    Centred,
    /// albumentations' centre: `(size - crop) // 2`.
    Floor,
    /// Drawn uniformly over every offset that keeps the window inside.
    Drawn,
}

/// A resize (optional) then a crop of `out` (`CenterCrop` or `RandomCrop`), as a window of
/// the original image: centred as torchvision or albumentations centre it, or at an offset
/// drawn as torchvision's `RandomCrop.get_params` draws it (`randint(0, h - th + 1)` for the
/// top, then the left), from `rng`; mirrored in the resize as `mirror` says (the resize was
/// flipped before the crop). A random resize's size is drawn first, from the same `rng`.
pub(crate) fn resize_crop(
    width: u32,
    height: u32,
    resize: Option<Prescale>,
    out: (u32, u32),
    offset: Offset,
    mirror: Mirror,
    rng: &mut CounterRng,
) -> Result<CropBox, AugmentError> {
    let CropOfResize {
        resized: (rw, rh),
        at: (top, left),
    } = crop_of_resize(width, height, resize, out, offset, rng)?;
    let (oh, ow) = out;
    // `holds` checked that the crop fits: the margins are not negative.
    let top = if mirror.vertical { rh - oh - top } else { top };
    let left = if mirror.horizontal {
        rw - ow - left
    } else {
        left
    };
    if resize.is_none() {
        return Ok(CropBox::rect(left, top, ow, oh));
    }
    Ok(window_of_resize(
        (width, height),
        (rh, rw),
        (top, left),
        out,
    ))
}

/// Where a crop is cut from the resized image.
pub(crate) struct CropOfResize {
    /// The `(width, height)` the image is resized to (its own without a resize).
    pub resized: (u32, u32),
    /// The crop's `(top, left)` in it.
    pub at: (u32, u32),
}

/// Where the `out` crop is cut from the image resized as `resize` says. A random resize's
/// size is drawn first, from `rng`.
pub(crate) fn crop_of_resize(
    width: u32,
    height: u32,
    resize: Option<Prescale>,
    out: (u32, u32),
    offset: Offset,
    rng: &mut CounterRng,
) -> Result<CropOfResize, AugmentError> {
    let (rw, rh) = resized_by(width, height, resize, rng);
    holds((rw, rh), out)?;
    let (oh, ow) = out;
    let (top, left) = match offset {
        Offset::Centred => (
            round_half_even(f64::from(rh - oh) / 2.0),
            round_half_even(f64::from(rw - ow) / 2.0),
        ),
        Offset::Floor => (f64::from((rh - oh) / 2), f64::from((rw - ow) / 2)),
        Offset::Drawn => {
            let top = rng.below(u64::from(rh - oh) + 1);
            let left = rng.below(u64::from(rw - ow) + 1);
            (top as f64, left as f64)
        }
    };
    Ok(CropOfResize {
        resized: (rw, rh),
        at: (top as u32, left as u32),
    })
}

/// A crop of `out` from the image resized as `resize` says, its sides shorter than the crop
/// padded at their ends first ([`RandomCrop::pad_end`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct EndPadded {
    /// The window of the image that is resampled: the part of the crop the image shows.
    pub window: CropBox,
    /// That part's `(height, width)`, at the output's top-left corner (the padding beyond).
    pub content: (u32, u32),
    /// The resize's `(height, width)`.
    pub resized: (u32, u32),
    /// The crop's `(top, left)` in the mirrored, padded resize, as drawn.
    pub at: (u32, u32),
    /// The content's `(top, left)` in the output (`(0, 0)` when padded at the ends).
    pub placed_at: (u32, u32),
    /// The padding before the resize on each axis, `(top, left)` (`(0, 0)` at the ends).
    pub before: (u32, u32),
}

/// [`EndPadded`] for a `width`x`height` image: the random resize's size drawn first from
/// `rng`, then the offset in the padded resize as `RandomCrop.get_params` draws it (the top,
/// then the left), mirrored in the resize as `mirror` says.
pub(crate) fn end_padded_crop(
    width: u32,
    height: u32,
    resize: Option<Prescale>,
    out: (u32, u32),
    mirror: Mirror,
    rng: &mut CounterRng,
) -> EndPadded {
    let (rw, rh) = resized_by(width, height, resize, rng);
    let (oh, ow) = out;
    // A padded side is as long as the crop: its offset is 0 and the image shows whole.
    let top = rng.below(u64::from(rh.max(oh) - oh) + 1) as u32;
    let left = rng.below(u64::from(rw.max(ow) - ow) + 1) as u32;
    let drawn = (top, left);
    let content = (oh.min(rh), ow.min(rw));
    let top = if mirror.vertical {
        rh - content.0 - top
    } else {
        top
    };
    let left = if mirror.horizontal {
        rw - content.1 - left
    } else {
        left
    };
    let window = match resize {
        Some(_) => window_of_resize((width, height), (rh, rw), (top, left), content),
        None => CropBox::rect(left, top, content.1, content.0),
    };
    EndPadded {
        window,
        content,
        resized: (rh, rw),
        at: drawn,
        placed_at: (0, 0),
        before: (0, 0),
    }
}

/// [`EndPadded`] for a `width`x`height` image padded centred to at least `to` `(height,
/// width)` first ([`RandomCrop::pad_centred_to`]: albumentations' `PadIfNeeded` then
/// `RandomCrop`): the offset drawn from `rng` uniformly over the padded image (the top, then
/// the left), and the part of the crop the image shows.
pub(crate) fn centred_padded_crop(
    width: u32,
    height: u32,
    to: (u32, u32),
    out: (u32, u32),
    rng: &mut CounterRng,
) -> EndPadded {
    // One axis: the padding before the image, the drawn offset in the padded axis, and the
    // image's part of the crop (its first pixel, how many, where in the output).
    let axis = |side: u32, to: u32, out: u32, rng: &mut CounterRng| {
        let before = to.saturating_sub(side) / 2;
        let padded = side.max(to);
        let at = rng.below(u64::from(padded - out) + 1) as u32;
        let first = at.max(before);
        let last = (at + out).min(before + side);
        (
            before,
            at,
            first - before,
            last.saturating_sub(first),
            first - at,
        )
    };
    let (top_pad, top, y, h, y_out) = axis(height, to.0, out.0, rng);
    let (left_pad, left, x, w, x_out) = axis(width, to.1, out.1, rng);
    EndPadded {
        window: CropBox::rect(x, y, w, h),
        content: (h, w),
        resized: (height, width),
        at: (top, left),
        placed_at: (y_out, x_out),
        before: (top_pad, left_pad),
    }
}

/// The `(width, height)` a `width`x`height` image is resized to, a random size drawn from
/// `rng`.
fn resized_by(
    width: u32,
    height: u32,
    resize: Option<Prescale>,
    rng: &mut CounterRng,
) -> (u32, u32) {
    match resize {
        Some(Prescale::Short(s)) => resized_size(width, height, s),
        Some(Prescale::ShortRounded(s)) => albu_smallest_size(width, height, s),
        Some(Prescale::LongRounded(s)) => albu_longest_size(width, height, s),
        Some(Prescale::ShortIn(lo, hi)) => {
            let s = lo + rng.below(u64::from(hi - lo)) as u32;
            resized_size(width, height, s)
        }
        Some(Prescale::Exact(h, w)) => (w, h),
        None => (width, height),
    }
}

/// The `out` `(height, width)` cut at `(top, left)` of a `(width, height)` image resized to
/// `resized` `(height, width)`, as a window of the image resampled in place.
pub(crate) fn window_of_resize(
    (width, height): (u32, u32),
    (rh, rw): (u32, u32),
    (top, left): (u32, u32),
    (oh, ow): (u32, u32),
) -> CropBox {
    // The window's edges on the resized grid, in source pixels: multiplied before dividing, an
    // edge at the resized image's edge is exactly the source's (`left * sx + ow * sx` can
    // pass it by a rounding, which the resampler refuses as a window outside the image).
    let edge =
        |at: u32, size: u32, resized: u32| f64::from(size) * f64::from(at) / f64::from(resized);
    let (x0, x1) = (edge(left, width, rw), edge(left + ow, width, rw));
    let (y0, y1) = (edge(top, height, rh), edge(top + oh, height, rh));
    CropBox {
        left: x0,
        top: y0,
        width: x1 - x0,
        height: y1 - y0,
        view: false,
    }
}

/// torchvision's `_get_inverse_affine_matrix` (output pixel -> input pixel, centred
/// coordinates).
fn inverse_affine(
    center: [f64; 2],
    angle: f64,
    translate: [f64; 2],
    scale: f64,
    shear: [f64; 2],
) -> [f64; 6] {
    let rot = angle.to_radians();
    let (sx, sy) = (shear[0].to_radians(), shear[1].to_radians());
    let [cx, cy] = center;
    let [tx, ty] = translate;
    let a = (rot - sy).cos() / sy.cos();
    let b = -(rot - sy).cos() * sx.tan() / sy.cos() - rot.sin();
    let c = (rot - sy).sin() / sy.cos();
    let d = -(rot - sy).sin() * sx.tan() / sy.cos() + rot.cos();
    let mut m = [d, -b, 0.0, -c, a, 0.0].map(|x| x / scale);
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
    m[2] += cx;
    m[5] += cy;
    m
}

/// torchvision's warp of a PIL image (after the quarter turns, which Pillow transposes as
/// the tensor kernels do): `Image.rotate(angle, center=...)`, or `Image.transform(AFFINE)`
/// with the inverse matrix torchvision computes about the centre in pixels (`(w / 2, h / 2)`
/// by default), the fill truncated to whole values as torchvision's `_parse_fill` does.
fn pil_warp(rgb: &mut [u8], h: usize, w: usize, warp: &Warp, scratch: &mut Vec<u8>) {
    let (wf, hf) = (w as f64, h as f64);
    let center = warp.center.unwrap_or([wf * 0.5, hf * 0.5]);
    let matrix = if warp.rotate {
        pil::rotate_matrix_about(warp.angle, center)
    } else {
        inverse_affine(center, warp.angle, warp.translate, warp.scale, warp.shear)
    };
    let fill = warp
        .fill
        .map_or([0; 3], |f| f.map(|v| v.trunc().clamp(0.0, 255.0) as u8));
    if warp.nearest {
        pil::nearest_affine(rgb, h, w, &matrix, fill, scratch);
    } else {
        let t = pil::Affine {
            matrix,
            filter: pil::Filter::Bilinear,
            fill,
        };
        pil::affine(rgb, h, w, &t, scratch);
    }
}

/// torchvision's sampling grid of a warp of an `h`x`w` tensor (`affine_grid` then
/// `grid_sample`'s unnormalizing, align_corners=False): the inverse matrix in f64 about the
/// centre, then f32 throughout.
struct TensorGrid {
    /// Columns of the rescaled, transposed theta: `(ax, bx, cx, ay, by, cy)`.
    theta: [f32; 6],
    /// The base grid's x of each output column, y of each output row.
    xs: Vec<f32>,
    ys: Vec<f32>,
    /// `(w, h)` in f32.
    size: (f32, f32),
}

impl TensorGrid {
    fn new(h: usize, w: usize, warp: &Warp) -> Self {
        let (wf, hf) = (w as f64, h as f64);
        let center = warp
            .center
            .map_or([0.0, 0.0], |[cx, cy]| [cx - wf * 0.5, cy - hf * 0.5]);
        let m = if warp.rotate {
            inverse_affine(center, -warp.angle, [0.0, 0.0], 1.0, [0.0, 0.0])
        } else {
            inverse_affine(center, warp.angle, warp.translate, warp.scale, warp.shear)
        };
        let t = m.map(|v| v as f32);
        let (half_w, half_h) = ((0.5 * wf) as f32, (0.5 * hf) as f32);
        Self {
            theta: [
                t[0] / half_w,
                t[1] / half_w,
                t[2] / half_w,
                t[3] / half_h,
                t[4] / half_h,
                t[5] / half_h,
            ],
            xs: linspace_f32((1.0 - wf) * 0.5, (wf - 1.0) * 0.5, w).collect(),
            ys: linspace_f32((1.0 - hf) * 0.5, (hf - 1.0) * 0.5, h).collect(),
            size: (w as f32, h as f32),
        }
    }

    /// The source point `(x, y)` in pixels of the output pixel at base grid `(gx, gy)`.
    #[inline(always)]
    fn source(&self, gx: f32, gy: f32) -> (f32, f32) {
        let [ax, bx, cx, ay, by, cy] = self.theta;
        let x = gx * ax + gy * bx + cx;
        let y = gx * ay + gy * by + cy;
        (
            ((x + 1.0) * self.size.0 - 1.0) / 2.0,
            ((y + 1.0) * self.size.1 - 1.0) / 2.0,
        )
    }
}

/// Where torchvision's nearest warp of an `h`x`w` tensor reads each output pixel (its
/// `rotate` / `affine` of a `tv_tensors.Mask`, which it always samples nearest:
/// `grid_sample(mode="nearest")`): the source pixel's index, or `None` where the point falls
/// outside (the fill shows). The arithmetic of [`warp`]'s tensor kernel, its exact half and
/// quarter turns included (a Unit test holds the two together).
pub(crate) fn nearest_warp_sources(h: usize, w: usize, warp: &Warp) -> Vec<Option<usize>> {
    let n = h * w;
    if warp.rotate && warp.center.is_none() {
        let angle = warp.angle.rem_euclid(360.0);
        match [0.0, 90.0, 180.0, 270.0].iter().position(|&q| angle == q) {
            Some(0) => return (0..n).map(Some).collect(),
            Some(2) => return (0..n).map(|i| Some(n - 1 - i)).collect(),
            Some(k) if h == w => {
                // `rot90`'s reads.
                let at = |y: usize, x: usize| {
                    if k == 1 {
                        (x, w - 1 - y)
                    } else {
                        (w - 1 - x, y)
                    }
                };
                return (0..n)
                    .map(|i| {
                        let (sy, sx) = at(i / w, i % w);
                        Some(sy * w + sx)
                    })
                    .collect();
            }
            _ => {}
        }
    }
    let grid = TensorGrid::new(h, w, warp);
    let mut sources = Vec::with_capacity(n);
    for &gy in &grid.ys {
        for &gx in &grid.xs {
            let (ix, iy) = grid.source(gx, gy);
            let (nx, ny) = (ix.round_ties_even() as isize, iy.round_ties_even() as isize);
            let inside = nx >= 0 && ny >= 0 && (nx as usize) < w && (ny as usize) < h;
            sources.push(inside.then(|| ny as usize * w + nx as usize));
        }
    }
    sources
}

/// Mirrors an `h`x`w` RGB8 image left to right.
pub(crate) fn hflip(rgb: &mut [u8], h: usize, w: usize) {
    for row in rgb.chunks_exact_mut(w * 3).take(h) {
        let px: &mut [[u8; 3]] = bytemuck::cast_slice_mut(row);
        px.reverse();
    }
}

/// Mirrors an `h`x`w` RGB8 image top to bottom.
pub(crate) fn vflip(rgb: &mut [u8], h: usize, w: usize) {
    let stride = w * 3;
    for y in 0..h / 2 {
        let (top, bottom) = rgb.split_at_mut((h - 1 - y) * stride);
        top[y * stride..][..stride].swap_with_slice(&mut bottom[..stride]);
    }
}

/// `torch.rot90(image, k)` (counter-clockwise quarter turns) of a square image, into `out`.
fn rot90(src: &[u8], n: usize, k: u32, out: &mut [u8]) {
    for y in 0..n {
        for x in 0..n {
            let (sy, sx) = match k % 4 {
                1 => (x, n - 1 - y),
                2 => (n - 1 - y, n - 1 - x),
                3 => (n - 1 - x, y),
                _ => (y, x),
            };
            out[(y * n + x) * 3..][..3].copy_from_slice(&src[(sy * n + sx) * 3..][..3]);
        }
    }
}

/// [`rot90`] of the square RGB8 image `rgb` (`n`x`n`) in place, through `scratch`
/// (`np.rot90`'s turns are `torch.rot90`'s).
pub(crate) fn rot90_in_place(rgb: &mut [u8], n: usize, k: u32, scratch: &mut Vec<u8>) {
    scratch.clear();
    scratch.extend_from_slice(&rgb[..n * n * 3]);
    rot90(scratch, n, k, rgb);
}

/// Applies `warp` to the `h`x`w` RGB8 image in place, as torchvision's tensor kernels do: the
/// inverse matrix in f64, the sampling grid and `grid_sample` (align_corners=False, zero
/// padding) in f32, then the fill, rounding half to even.
pub(crate) fn warp(rgb: &mut [u8], h: usize, w: usize, warp: &Warp, s: &mut Scratch) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (detected just above).
        return unsafe { warp_avx2(rgb, h, w, warp, s) };
    }
    warp_any(rgb, h, w, warp, s);
}

/// [`warp`] built for AVX2 (which brings SSE4.1's rounding instructions): the baseline build
/// calls libm's `floorf` and `rintf` for every pixel, which took a quarter of the warp's time.
/// No FMA is enabled, so the bytes are the baseline's.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn warp_avx2(rgb: &mut [u8], h: usize, w: usize, warp: &Warp, s: &mut Scratch) {
    warp_any(rgb, h, w, warp, s);
}

#[inline(always)]
fn warp_any(rgb: &mut [u8], h: usize, w: usize, warp: &Warp, s: &mut Scratch) {
    let src = &mut s.bytes;
    src.clear();
    src.extend_from_slice(&rgb[..h * w * 3]);
    if warp.rotate && warp.center.is_none() {
        let angle = warp.angle.rem_euclid(360.0);
        let quarter = [0.0, 90.0, 180.0, 270.0].iter().position(|&q| angle == q);
        match quarter {
            Some(0) => return,
            Some(2) => {
                // Half a turn: both mirrors (any shape).
                hflip(rgb, h, w);
                return vflip(rgb, h, w);
            }
            Some(k) if h == w => return rot90(src, w, k as u32, rgb),
            _ => {}
        }
    }
    if warp.pil {
        return pil_warp(rgb, h, w, warp, src);
    }
    let grid = TensorGrid::new(h, w, warp);
    let fill = warp.fill;
    let px = |x: isize, y: isize| -> Option<&[u8]> {
        (x >= 0 && y >= 0 && (x as usize) < w && (y as usize) < h)
            .then(|| &src[(y as usize * w + x as usize) * 3..][..3])
    };
    for (oy, &gy_base) in grid.ys.iter().enumerate() {
        for (ox, &gx_base) in grid.xs.iter().enumerate() {
            let (ix, iy) = grid.source(gx_base, gy_base);
            let mut value = [0f32; 3];
            let mask;
            if warp.nearest {
                let (nx, ny) = (ix.round_ties_even() as isize, iy.round_ties_even() as isize);
                match px(nx, ny) {
                    Some(p) => {
                        value = [p[0], p[1], p[2]].map(f32::from);
                        mask = 1.0;
                    }
                    None => mask = 0.0,
                }
                if let (Some(f), true) = (fill, mask < 0.5) {
                    value = f;
                }
            } else {
                let (x0, y0) = (ix.floor(), iy.floor());
                let (x1, y1) = (x0 + 1.0, y0 + 1.0);
                let corners = [
                    (x0, y0, (x1 - ix) * (y1 - iy)),
                    (x1, y0, (ix - x0) * (y1 - iy)),
                    (x0, y1, (x1 - ix) * (iy - y0)),
                    (x1, y1, (ix - x0) * (iy - y0)),
                ];
                let mut m = 0f32;
                for (x, y, wgt) in corners {
                    if let Some(p) = px(x as isize, y as isize) {
                        for c in 0..3 {
                            value[c] += f32::from(p[c]) * wgt;
                        }
                        m += wgt;
                    }
                }
                mask = m;
                if let Some(f) = fill {
                    for c in 0..3 {
                        value[c] = (value[c] - f[c]) * mask + f[c];
                    }
                }
            }
            let out = &mut rgb[(oy * w + ox) * 3..][..3];
            for c in 0..3 {
                out[c] = value[c].round_ties_even().clamp(0.0, 255.0) as u8;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_masks_nearest_warp_reads_where_the_tensor_kernel_reads() {
        // Every pixel its own colour: the kernel's nearest output names the pixel it read.
        for (h, w) in [(17, 23), (12, 12), (9, 31)] {
            let image: Vec<u8> = (0..h * w)
                .flat_map(|i| [(i % 251) as u8 + 1, (i / 251) as u8 + 1, 7])
                .collect();
            let warps = [
                (true, 33.0, [0.0, 0.0], 1.0, [0.0, 0.0]),
                (true, -90.0, [0.0, 0.0], 1.0, [0.0, 0.0]),
                (true, 180.0, [0.0, 0.0], 1.0, [0.0, 0.0]),
                (true, 270.0, [0.0, 0.0], 1.0, [0.0, 0.0]),
                (false, 12.5, [2.0, -3.0], 1.2, [4.0, -2.0]),
                (false, -40.0, [0.0, 1.0], 0.8, [0.0, 0.0]),
            ];
            for (rotate, angle, translate, scale, shear) in warps {
                let warp = Warp {
                    rotate,
                    angle,
                    translate,
                    scale,
                    shear,
                    center: None,
                    nearest: true,
                    fill: None,
                    pil: false,
                };
                let mut out = image.clone();
                super::warp(&mut out, h, w, &warp, &mut Scratch::default());
                let sources = nearest_warp_sources(h, w, &warp);
                for (i, source) in sources.iter().enumerate() {
                    let want = source.map_or([0, 0, 0], |s| {
                        [image[s * 3], image[s * 3 + 1], image[s * 3 + 2]]
                    });
                    assert_eq!(out[i * 3..i * 3 + 3], want, "{h}x{w} {warp:?} pixel {i}");
                }
            }
        }
    }

    #[test]
    fn an_affines_pinned_draws_are_torchs_float32_values() {
        // torchvision draws with `torch.empty(1).uniform_(a, a)`: `a` rounded to f32.
        let spec: RandomAffine = serde_json::from_str(
            r#"{"degrees": [0.3, 0.3], "scale": [1.1, 1.1], "shear": [2.2, 2.2, 0, 0]}"#,
        )
        .unwrap();
        let mut ops = Vec::new();
        spec.draw(
            &mut CounterRng::new(0, 0, 0, crate::rng::Stream::Crop),
            (64, 64),
            &mut ops,
        );
        let [PixelOp::Warp(w)] = ops.as_slice() else {
            panic!("one warp: {ops:?}")
        };
        assert_eq!(w.scale, f64::from(1.1f32));
        assert_eq!(w.angle, f64::from(0.3f32));
        assert_eq!(w.shear, [f64::from(2.2f32), 0.0]);
    }

    #[test]
    fn a_center_crop_larger_than_the_image_pads_half_before_as_torchvision() {
        let mut rng = CounterRng::new(0, 0, 0, crate::rng::Stream::Crop);
        let pad = Pad::default();
        // 20x10 into 16x16: the width is cropped (round((20 - 16) / 2) = 2), the height
        // padded by (16 - 10) // 2 = 3 above and 3 below.
        let b = padded_crop(20, 10, (16, 16), pad, false, &mut rng).unwrap();
        assert_eq!((b.left, b.top, b.width, b.height), (2.0, -3.0, 16.0, 16.0));
        assert!(!b.inside(20, 10) && b.view);
        // An odd shortfall puts the extra row after: 7 rows into 10, 1 above.
        let b = padded_crop(10, 7, (10, 10), pad, false, &mut rng).unwrap();
        assert_eq!((b.left, b.top), (0.0, -1.0));
    }

    #[test]
    fn a_random_crop_with_padding_draws_every_offset_of_the_padded_image() {
        let pad = Pad {
            sides: [4, 4, 4, 4],
            ..Pad::default()
        };
        let mut lefts = std::collections::BTreeSet::new();
        for i in 0..400 {
            let mut rng = CounterRng::new(1, 0, i, crate::rng::Stream::Crop);
            let b = padded_crop(32, 32, (32, 32), pad, true, &mut rng).unwrap();
            assert!((-4.0..=4.0).contains(&b.left) && (-4.0..=4.0).contains(&b.top));
            lefts.insert(b.left as i64);
        }
        assert_eq!(lefts.len(), 9, "offsets 0..=8 of the 40-pixel padded side");
        // `pad_if_needed`: a side still short grows on both ends by the difference.
        let pad = Pad {
            if_needed: true,
            ..Pad::default()
        };
        for i in 0..50 {
            let mut rng = CounterRng::new(1, 0, i, crate::rng::Stream::Crop);
            let b = padded_crop(20, 40, (30, 30), pad, true, &mut rng).unwrap();
            assert!((-10.0..=0.0).contains(&b.left) && (0.0..=10.0).contains(&b.top));
        }
        let mut rng = CounterRng::new(1, 0, 0, crate::rng::Stream::Crop);
        let short = Pad {
            if_needed: false,
            ..pad
        };
        assert!(padded_crop(20, 40, (30, 30), short, true, &mut rng).is_err());
    }

    #[test]
    fn a_padded_window_shows_the_fill_around_the_image() {
        // A 2x2 image, a 4x3 window from (-1, -1).
        let rgb: Vec<u8> = (1..=4u8).flat_map(|v| [v, v, v]).collect();
        let crop = CropBox {
            left: -1.0,
            top: -1.0,
            width: 4.0,
            height: 3.0,
            view: true,
        };
        let mut out = Vec::new();
        let padding = Padding {
            fill: [9; 3],
            mode: PaddingMode::Constant,
            sides: [1; 4],
        };
        let whole = compose_padded(&crop, &padding, &rgb, 2, 2, &mut out);
        assert_eq!((whole.width, whole.height), (4.0, 3.0));
        let grey: Vec<u8> = out.chunks(3).map(|p| p[0]).collect();
        assert_eq!(grey, [9, 9, 9, 9, 9, 1, 2, 9, 9, 3, 4, 9]);
        // Mirrored: the 2x2 image reflected about its edge pixels (`1 2 | 1 2 1 2`).
        let padding = Padding {
            mode: PaddingMode::Reflect,
            ..padding
        };
        compose_padded(&crop, &padding, &rgb, 2, 2, &mut out);
        let grey: Vec<u8> = out.chunks(3).map(|p| p[0]).collect();
        assert_eq!(grey, [4, 3, 4, 3, 2, 1, 2, 1, 4, 3, 4, 3]);
    }

    #[test]
    fn each_padding_mode_shows_the_pixels_numpys_pad_gives() {
        // `np.pad(np.arange(4), 3, mode)`, `np.pad(np.arange(3), 7, mode)` (past one mirror
        // image) and `np.pad(np.pad(np.arange(3), (2, 1), mode), 4, mode)` (`pad_if_needed`
        // padding the padded image again), as NumPy 2 gives them.
        let cases: [(PaddingMode, [&[i64]; 3]); 3] = [
            (
                PaddingMode::Reflect,
                [
                    &[3, 2, 1, 0, 1, 2, 3, 2, 1, 0],
                    &[1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1],
                    &[2, 1, 0, 1, 2, 1, 0, 1, 2, 1, 2, 1, 0, 1],
                ],
            ),
            (
                PaddingMode::Symmetric,
                [
                    &[2, 1, 0, 0, 1, 2, 3, 3, 2, 1],
                    &[0, 0, 1, 2, 2, 1, 0, 0, 1, 2, 2, 1, 0, 0, 1, 2, 2],
                    &[1, 0, 0, 1, 1, 0, 0, 1, 2, 2, 2, 2, 1, 0],
                ],
            ),
            (
                PaddingMode::Edge,
                [
                    &[0, 0, 0, 0, 1, 2, 3, 3, 3, 3],
                    &[0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 2, 2, 2, 2, 2, 2],
                    &[0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 2, 2, 2, 2],
                ],
            ),
        ];
        for (mode, [short, long, twice]) in cases {
            let padding = |before, after| Padding {
                fill: [0; 3],
                mode,
                sides: [before, 0, after, 0],
            };
            let axis = |len: i64, (before, after): (u32, u32), from: i64, n: usize| {
                (from..from + n as i64)
                    .map(|i| padding(before, after).mirrored(i, len, (before, after)) as i64)
                    .collect::<Vec<_>>()
            };
            assert_eq!(axis(4, (3, 3), -3, 10), short, "{mode:?}");
            assert_eq!(axis(3, (7, 7), -7, 17), long, "{mode:?}");
            assert_eq!(axis(3, (2, 1), -6, 14), twice, "{mode:?}");
        }
    }
    use crate::rng::Stream;

    #[test]
    fn the_avx2_warp_gives_the_baselines_bytes() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let (h, w) = (41, 29);
        let img: Vec<u8> = (0..h * w * 3)
            .map(|i: usize| (i.wrapping_mul(2_654_435_761) >> 9) as u8)
            .collect();
        let mut s = crate::augment::Scratch::default();
        for nearest in [false, true] {
            let warp = Warp {
                rotate: false,
                angle: 17.5,
                translate: [3.0, -2.0],
                scale: 1.1,
                shear: [12.0, -4.0],
                center: None,
                nearest,
                fill: Some([128.0, 7.0, 250.0]),
                pil: false,
            };
            let (mut a, mut b) = (img.clone(), img.clone());
            warp_any(&mut a, h, w, &warp, &mut s);
            // SAFETY: AVX2 was detected above.
            unsafe { warp_avx2(&mut b, h, w, &warp, &mut s) };
            assert_eq!(a, b, "nearest: {nearest}");
        }
    }

    #[test]
    fn quarter_turns_and_flips_move_pixels_exactly() {
        // 2x2: a b / c d.
        let img: Vec<u8> = [1u8, 2, 3, 4].iter().flat_map(|&v| [v, v, v]).collect();
        let get = |v: &[u8]| v.chunks(3).map(|p| p[0]).collect::<Vec<_>>();
        let mut s = crate::augment::Scratch::default();
        let turn = |angle: f64| Warp {
            rotate: true,
            angle,
            translate: [0.0; 2],
            scale: 1.0,
            shear: [0.0; 2],
            center: None,
            nearest: true,
            fill: None,
            pil: false,
        };
        let mut a = img.clone();
        warp(&mut a, 2, 2, &turn(90.0), &mut s);
        assert_eq!(get(&a), [2, 4, 1, 3], "counter-clockwise, as torch.rot90");
        let mut b = img.clone();
        warp(&mut b, 2, 2, &turn(180.0), &mut s);
        assert_eq!(get(&b), [4, 3, 2, 1]);
        let mut c = img.clone();
        warp(&mut c, 2, 2, &turn(-90.0), &mut s);
        assert_eq!(get(&c), [3, 1, 4, 2]);
        // A translation by whole pixels moves pixels and fills with zeros.
        let shift = Warp {
            rotate: false,
            angle: 0.0,
            translate: [1.0, 0.0],
            ..turn(0.0)
        };
        let mut d = img.clone();
        warp(&mut d, 2, 2, &shift, &mut s);
        assert_eq!(get(&d), [0, 1, 0, 3]);
        let mut e = img.clone();
        hflip(&mut e, 2, 2);
        assert_eq!(get(&e), [2, 1, 4, 3]);
        vflip(&mut e, 2, 2);
        assert_eq!(get(&e), [4, 3, 2, 1]);
    }

    #[test]
    fn round_half_even_matches_python() {
        for (x, want) in [
            (0.5, 0.0),
            (1.5, 2.0),
            (2.5, 2.0),
            (3.5, 4.0),
            (2.4, 2.0),
            (2.6, 3.0),
            (-0.5, 0.0),
            (7.0, 7.0),
        ] {
            assert_eq!(round_half_even(x), want, "round({x})");
        }
    }

    #[test]
    fn rrc_fallback_clamps_extreme_aspect_ratios_like_torchvision() {
        // Scale range impossible to satisfy in 10 tries -> fallback. 1000x100: in_ratio 10 > 4/3,
        // so h = 100, w = round(100 * 4/3) = 133, centered: left = (1000 - 133) // 2 = 433.
        let mut rng = CounterRng::new(0, 0, 0, Stream::Crop);
        let b = random_resized_crop(1000, 100, [1.0, 1.0], [3.0 / 4.0, 4.0 / 3.0], &mut rng);
        assert_eq!(
            (b.left, b.top, b.width, b.height),
            (433.0, 0.0, 133.0, 100.0)
        );
        // 100x1000: in_ratio 0.1 < 3/4: w = 100, h = round(100 / 0.75) = 133, top = 433.
        let b = random_resized_crop(100, 1000, [1.0, 1.0], [3.0 / 4.0, 4.0 / 3.0], &mut rng);
        assert_eq!(
            (b.left, b.top, b.width, b.height),
            (0.0, 433.0, 100.0, 133.0)
        );
    }

    #[test]
    fn rrc_windows_respect_scale_ratio_and_bounds() {
        for i in 0..2000u64 {
            let mut rng = CounterRng::new(9, 0, i, Stream::Crop);
            let (w, h) = (200 + (i as u32 * 37) % 400, 150 + (i as u32 * 53) % 400);
            let b = random_resized_crop(w, h, [0.08, 1.0], [0.75, 4.0 / 3.0], &mut rng);
            assert!(
                b.view
                    && b.left + b.width <= w as f64
                    && b.top + b.height <= h as f64
                    && b.width >= 1.0
                    && b.height >= 1.0
            );
            let frac = b.width * b.height / (w as f64 * h as f64);
            assert!((0.07..=1.0).contains(&frac), "area fraction {frac}");
        }
    }

    #[test]
    fn resize_then_center_crop_is_a_window_of_the_original() {
        // 500x375 -> Resize(256) -> 341x256 (int(256*500/375) = 341) -> CenterCrop 224:
        // left = round((341-224)/2) = round(58.5) = 58 (half to even), top = round(16) = 16.
        assert_eq!(resized_size(500, 375, 256), (341, 256));
        let mut rng = CounterRng::new(0, 0, 0, Stream::Crop);
        let b = resize_crop(
            500,
            375,
            Some(Prescale::Short(256)),
            (224, 224),
            Offset::Centred,
            Mirror::default(),
            &mut rng,
        )
        .unwrap();
        let (sx, sy) = (500.0 / 341.0, 375.0 / 256.0);
        assert!(!b.view);
        assert_eq!(
            (b.left, b.top, b.width, b.height),
            (58.0 * sx, 16.0 * sy, 224.0 * sx, 224.0 * sy)
        );
        assert!(resize_crop(
            100,
            100,
            None,
            (224, 224),
            Offset::Centred,
            Mirror::default(),
            &mut rng
        )
        .is_err());
    }

    #[test]
    fn albumentations_smallest_max_size_rounds_the_longer_side_and_its_centre_is_floored() {
        // 500x375 -> SmallestMaxSize(256): 500 * 256/375 = 341.33 -> 341; 400x300 -> 160:
        // 213.33 -> 213; 499x300 -> 160: 266.13 -> 266 (torchvision: 266); 301x200 -> 160:
        // 240.8 -> 241 (torchvision truncates: 240).
        assert_eq!(albu_smallest_size(500, 375, 256), (341, 256));
        assert_eq!(albu_smallest_size(300, 400, 160), (160, 213));
        assert_eq!(albu_smallest_size(301, 200, 160), (241, 160));
        assert_eq!(resized_size(301, 200, 160), (240, 160));
        assert_eq!(albu_smallest_size(4000, 3, 1), (1333, 1));
        // 241x160 cropped to 128: (241 - 128) / 2 = 56.5 and (160 - 128) / 2 = 16; to 127
        // high and 125 wide: 16.5 (16 floored and to even) and 58.
        let crop = |out: (u32, u32), floor: bool| {
            let mut rng = CounterRng::new(0, 0, 0, Stream::Crop);
            let resize = Some(Prescale::ShortRounded(160));
            let offset = if floor {
                Offset::Floor
            } else {
                Offset::Centred
            };
            let b =
                resize_crop(301, 200, resize, out, offset, Mirror::default(), &mut rng).unwrap();
            // The window's corner on the 241x160 grid.
            (
                (b.left * 241.0 / 301.0).round() as u32,
                (b.top * 160.0 / 200.0).round() as u32,
            )
        };
        assert_eq!(crop((128, 128), true), (56, 16));
        assert_eq!(crop((127, 125), true), (58, 16));
        assert_eq!(crop((127, 125), false), (58, 16));
        // 33 wide: (241 - 33) / 2 = 104 either way; 35 high: (160 - 35) / 2 = 62.5, 62 by
        // both; 37 high: 61.5, floored 61, to even 62.
        assert_eq!(crop((37, 33), true), (104, 61));
        assert_eq!(crop((37, 33), false), (104, 62));
    }

    #[test]
    fn random_resize_draws_each_shorter_side_of_its_range_equally_often_then_crops_inside() {
        // 400x300 image, shorter side drawn from 256..320 (64 sizes), then a 224 crop: the
        // window's height in source pixels is 224 * 300 / side, so it names the side drawn.
        let mut counts = [0u32; 64];
        for i in 0..12_800u64 {
            let mut rng = CounterRng::new(5, 1, i, Stream::Crop);
            let b = resize_crop(
                400,
                300,
                Some(Prescale::ShortIn(256, 320)),
                (224, 224),
                Offset::Drawn,
                Mirror::default(),
                &mut rng,
            )
            .unwrap();
            let side = (224.0 * 300.0 / b.height).round() as u32;
            assert!((256..320).contains(&side), "{side}");
            let (rw, _) = resized_size(400, 300, side);
            // Inside the image, and on the resized image's integer grid.
            assert!(b.left >= 0.0 && b.top >= 0.0);
            assert!(b.left + b.width <= 400.0 + 1e-9 && b.top + b.height <= 300.0 + 1e-9);
            let left = b.left * f64::from(rw) / 400.0;
            assert!((left - left.round()).abs() < 1e-6, "{left}");
            counts[(side - 256) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&n| (130..270).contains(&n)),
            "{counts:?}"
        );
    }

    /// A crop at the last offset of a resized image ends exactly at the source's edge, for every
    /// source size: the resampler refuses a window past the image by any rounding (a 488x333
    /// image resized to 300x250 and cropped 180x200 at the bottom was replaced).
    #[test]
    fn a_crop_at_the_far_edge_of_a_resized_image_ends_inside_the_source() {
        for width in 180..700u32 {
            for height in [201, 250, 333, 377, 480, 511] {
                for seed in 0..4 {
                    let mut rng = CounterRng::new(seed, 0, u64::from(width), Stream::Crop);
                    let resize = Some(Prescale::Exact(250, 300));
                    let b = resize_crop(
                        width,
                        height,
                        resize,
                        (200, 180),
                        Offset::Drawn,
                        Mirror::default(),
                        &mut rng,
                    )
                    .unwrap();
                    assert!(
                        b.left >= 0.0 && b.left + b.width <= f64::from(width),
                        "{width}x{height}: {b:?}"
                    );
                    assert!(
                        b.top >= 0.0 && b.top + b.height <= f64::from(height),
                        "{width}x{height}: {b:?}"
                    );
                }
                // The last offset itself: the window reaches the edge exactly.
                let mut b = None;
                for i in 0..400 {
                    let mut rng = CounterRng::new(9, 0, i, Stream::Crop);
                    let got = resize_crop(
                        width,
                        height,
                        Some(Prescale::Exact(250, 300)),
                        (200, 180),
                        Offset::Drawn,
                        Mirror::default(),
                        &mut rng,
                    )
                    .unwrap();
                    if got.top + got.height == f64::from(height) {
                        b = Some(got);
                        break;
                    }
                }
                assert!(
                    b.is_some(),
                    "{width}x{height}: no draw reached the bottom edge exactly"
                );
            }
        }
    }

    #[test]
    fn random_crop_offsets_are_uniform_integers_over_every_fitting_position() {
        // 40x30 image, 32x24 crop: tops 0..=6, lefts 0..=8, each about equally often.
        let mut tops = [0u32; 7];
        let mut lefts = [0u32; 9];
        for i in 0..6300u64 {
            let mut rng = CounterRng::new(3, 0, i, Stream::Crop);
            let b = resize_crop(
                40,
                30,
                None,
                (24, 32),
                Offset::Drawn,
                Mirror::default(),
                &mut rng,
            )
            .unwrap();
            assert!(b.view && b.width == 32.0 && b.height == 24.0);
            assert_eq!((b.left.fract(), b.top.fract()), (0.0, 0.0));
            tops[b.top as usize] += 1;
            lefts[b.left as usize] += 1;
        }
        assert!(tops.iter().all(|&n| (750..1050).contains(&n)), "{tops:?}");
        assert!(lefts.iter().all(|&n| (550..850).contains(&n)), "{lefts:?}");
        // After a resize to [h, w], the window is the resized image's, in source pixels.
        let mut rng = CounterRng::new(3, 0, 0, Stream::Crop);
        let b = resize_crop(
            200,
            100,
            Some(Prescale::Exact(50, 100)),
            (40, 80),
            Offset::Drawn,
            Mirror::default(),
            &mut rng,
        )
        .unwrap();
        assert!(!b.view && b.width == 160.0 && b.height == 80.0);
        assert!(b.left <= 40.0 && b.top <= 20.0);
        let mut rng = CounterRng::new(3, 0, 0, Stream::Crop);
        assert!(resize_crop(
            20,
            20,
            None,
            (24, 32),
            Offset::Drawn,
            Mirror::default(),
            &mut rng
        )
        .is_err());
    }
}
