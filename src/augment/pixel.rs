//! What runs on a sample's pixels once its plan is drawn: the resolved [`PixelOp`]s (their
//! properties are exhaustive matches, so a new variant is placed by whoever adds it), [`apply`]
//! which runs them on an RGB8 image, and the [`PixelStage`] both paths run after the decode
//! (pixel ops, then flip + normalize + cast + layout into the slot, then the erase boxes).

use serde::Serialize;

use super::autoaugment::AugMixPlan;
use super::erase::{self, EraseBox};
use super::geometry::{self, Warp};
use super::kernel::OutputWriter;
use super::pil::{self, Enhance as PilEnhance, Filter as PilFilter};
use super::{blur, colour};
use crate::dtype::{Dtype, Layout};

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
    /// The op as a colour adjustment, for the fused kernel.
    pub(crate) fn adjustment(&self) -> Option<colour::Adjust> {
        match *self {
            Self::Brightness(f) => Some(colour::Adjust::Brightness(f)),
            Self::Contrast(f) => Some(colour::Adjust::Contrast(f)),
            Self::Saturation(f) => Some(colour::Adjust::Saturation(f)),
            Self::Hue(f) => Some(colour::Adjust::Hue(f)),
            Self::PermuteChannels(p) => Some(colour::Adjust::Permute(p)),
            Self::Hflip
            | Self::Vflip
            | Self::Grayscale
            | Self::Solarize(_)
            | Self::Posterize(_)
            | Self::AutoContrast
            | Self::Equalize
            | Self::Invert
            | Self::Sharpness(_)
            | Self::GaussianBlur { .. }
            | Self::Warp(_)
            | Self::AugMix(_)
            | Self::PilEnhance { .. }
            | Self::PilAutoContrast
            | Self::SolarizeAdd { .. }
            | Self::PilAffine { .. } => None,
        }
    }

    /// Whether the op gives the same result before or after a horizontal flip (then the flip
    /// can move into the output writer).
    pub(crate) fn commutes_with_hflip(&self) -> bool {
        match self {
            Self::Warp(_) | Self::PilAffine { .. } => false,
            Self::AugMix(m) => m.chains.iter().flatten().all(Self::commutes_with_hflip),
            // Mirror-symmetric: kernels and statistics are the same mirrored.
            Self::Hflip
            | Self::Vflip
            | Self::Brightness(_)
            | Self::Contrast(_)
            | Self::Saturation(_)
            | Self::Hue(_)
            | Self::Grayscale
            | Self::PermuteChannels(_)
            | Self::Solarize(_)
            | Self::Posterize(_)
            | Self::AutoContrast
            | Self::Equalize
            | Self::Invert
            | Self::Sharpness(_)
            | Self::GaussianBlur { .. }
            | Self::PilEnhance { .. }
            | Self::PilAutoContrast
            | Self::SolarizeAdd { .. } => true,
        }
    }

    /// What the op reads around each pixel.
    pub(crate) fn reach(&self) -> Reach {
        match self {
            Self::Brightness(_)
            | Self::Saturation(_)
            | Self::Hue(_)
            | Self::Grayscale
            | Self::PermuteChannels(_)
            | Self::Solarize(_)
            | Self::Posterize(_)
            | Self::Invert
            | Self::SolarizeAdd { .. } => Reach::Pointwise,
            Self::Contrast(_) | Self::AutoContrast | Self::Equalize | Self::PilAutoContrast => {
                Reach::WholeImage
            }
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
            | Self::PilAffine { .. } => Reach::Neighbourhood,
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
            | Self::PermuteChannels(_)
            | Self::Grayscale
            | Self::Invert
            | Self::Solarize(_)
            | Self::Posterize(_) => true,
            Self::Hflip
            | Self::Vflip
            | Self::AutoContrast
            | Self::Equalize
            | Self::Sharpness(_)
            | Self::GaussianBlur { .. }
            | Self::Warp(_)
            | Self::AugMix(_)
            | Self::PilEnhance { .. }
            | Self::PilAutoContrast
            | Self::SolarizeAdd { .. }
            | Self::PilAffine { .. } => false,
        }
    }

    /// Whether the op, run before the geometry, needs the whole image decoded rather than the
    /// window's part of it (its result depends on a statistic of the whole image).
    pub(crate) fn needs_whole_image(&self) -> bool {
        self.reach() == Reach::WholeImage
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

/// Reused memory for the pixel ops (one per worker and per engine).
#[derive(Default)]
pub struct Scratch {
    pub(super) bytes: Vec<u8>,
    pub(super) floats: Vec<f32>,
    original: Vec<u8>,
    chain: Vec<u8>,
    mix: Vec<f32>,
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
