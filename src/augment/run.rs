//! Runs a sample's resolved pixel ops: [`apply`] on an RGB8 image (a run of colour
//! adjustments fused into one kernel call), and the [`PixelStage`] both paths run after the
//! decode: the [`PixelPlan`]'s ops, then flip + normalize + cast + layout into the slot, then
//! the erase boxes.

use serde::Serialize;

use super::albu::Cv2Border;
use super::albu_tone::EqualizeMode;
use super::erase::{self, EraseBox};
use super::kernel::{Normalize, OutputWriter};
use super::pixel::{AugMixPlan, PixelOp, Scratch};
use super::{
    albu, albu_clahe, albu_distort, albu_filter, albu_jpeg, albu_tone, blur, colour, geometry, pil,
};
use crate::dtype::{Dtype, Layout};
use hpuload_decoders::jpeg::Planes;

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
    /// Where the resampled image goes when it is smaller than `size` (a `FixedSizeCrop`'s
    /// padding); `None`: it is the whole output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placed: Option<Placed>,
    /// The resize is warped whole before the output is cut from it (albumentations'
    /// `ShiftScaleRotate` between `SmallestMaxSize` and the crop); `None`: it is the output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warped: Option<Warped>,
    /// Pixel ops run on the whole resize before the output is cut from it (torchvision's
    /// `Resize(256), RandomRotation(15), CenterCrop(224)`); `None`: the resize is the output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<Cut>,
}

impl PixelPlan {
    /// The `(height, width)` the resize gives: the output's, or the placed or warped image's.
    pub fn resampled(&self) -> (u32, u32) {
        match (self.placed, self.warped, &self.cut) {
            (Some(p), _, _) => p.content,
            (None, Some(w), _) => w.content,
            (None, None, Some(c)) => c.content,
            (None, None, None) => self.size,
        }
    }

    /// The output-sized image made from the resampled one (`resampled()` in size) into `out`,
    /// when it is placed on a canvas, or warped or changed by pixel ops before its crop (which
    /// run in place on `resampled`); `false`, touching nothing, when the resampled image is
    /// already the output.
    pub fn reshape(
        &self,
        resampled: &mut [u8],
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
        ops: &mut Scratch,
    ) -> bool {
        if let Some(placed) = &self.placed {
            placed.place(resampled, self.size, out);
        } else if let Some(warped) = &self.warped {
            warped.warp(resampled, self.size, out, scratch);
        } else if let Some(cut) = &self.cut {
            cut.cut(resampled, self.size, out, ops);
        } else {
            return false;
        }
        true
    }
}

/// A resized image of `content` `(height, width)` warped whole by OpenCV's `warpAffine` (at
/// its own size, `inverse` mapping output to source), of which the output is the part at
/// `at` `(top, left)`: only that part is computed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Warped {
    /// The resized image's `(height, width)`.
    pub content: (u32, u32),
    /// The output's `(top, left)` in the warped image.
    pub at: (u32, u32),
    /// The warp's output-to-source map (float32, as OpenCV's kernel takes it).
    pub inverse: [f32; 6],
    /// What the warp reads past the image.
    pub border: albu::Cv2Border,
    /// The constant border's colour.
    pub fill: [u8; 3],
}

impl Warped {
    /// The `size` `(height, width)` output of the `content`-sized RGB8 image `rgb`, into `out`.
    pub fn warp(&self, rgb: &[u8], size: (u32, u32), out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
        let (h, w) = (self.content.0 as usize, self.content.1 as usize);
        let size = (size.0 as usize, size.1 as usize);
        out.clear();
        out.resize(size.0 * size.1 * 3, 0);
        let at = (self.at.0 as usize, self.at.1 as usize);
        albu::warp_affine_crop(
            rgb,
            (h, w),
            &self.inverse,
            self.border,
            self.fill,
            at,
            size,
            out,
            scratch,
        );
    }
}

/// A resized image of `content` `(height, width)` changed whole by pixel ops (drawn for its
/// size), of which the output is the part at `at` `(top, left)`: what torchvision does with
/// a rotation, blur or colour change between a resize and its crop.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cut {
    /// The resized image's `(height, width)`.
    pub content: (u32, u32),
    /// The output's `(top, left)` in it.
    pub at: (u32, u32),
    /// The ops run on the whole resized image, in order.
    pub ops: Vec<PixelOp>,
}

impl Cut {
    /// Runs the ops on the `content`-sized RGB8 image `rgb` in place, then copies the `size`
    /// `(height, width)` output at `at` into `out`.
    ///
    /// # Panics
    /// `rgb` is shorter than `content`, or the output at `at` reaches past `content`.
    pub fn cut(&self, rgb: &mut [u8], size: (u32, u32), out: &mut Vec<u8>, s: &mut Scratch) {
        let (ch, cw) = (self.content.0 as usize, self.content.1 as usize);
        let (top, left) = (self.at.0 as usize, self.at.1 as usize);
        let (h, w) = (size.0 as usize, size.1 as usize);
        assert!(
            top + h <= ch && left + w <= cw,
            "{size:?} at {:?} cut from {:?}",
            self.at,
            self.content
        );
        apply(&self.ops, rgb, ch, cw, s);
        out.clear();
        out.reserve(h * w * 3);
        for row in rgb[top * cw * 3..(top + h) * cw * 3].chunks_exact(cw * 3) {
            out.extend_from_slice(&row[left * 3..(left + w) * 3]);
        }
    }
}

/// A resampled image of `content` `(height, width)` at `at` `(top, left)` in the output,
/// `fill` around it (torchvision's constant padding after a crop, at the top-left corner;
/// albumentations' `PadIfNeeded`, centred).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Placed {
    /// The resampled image's `(height, width)`.
    pub content: (u32, u32),
    /// Its `(top, left)` corner in the output.
    pub at: (u32, u32),
    /// The colour around it.
    pub fill: [u8; 3],
    /// What is around it: the fill, or its edge pixels replicated or mirrored (OpenCV's
    /// `copyMakeBorder`, albumentations' `PadIfNeeded` with a `border_mode`).
    pub border: Cv2Border,
    /// The image is mirrored left to right as it is placed (a flip drawn before a padding it
    /// does not move: [`crate::augment::RandomCrop::pad_end`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hflip: bool,
    /// Likewise top to bottom.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub vflip: bool,
}

impl Placed {
    /// The `content`-sized RGB8 image `rgb` placed on a `size` canvas of the fill, in `out`.
    ///
    /// # Panics
    /// `rgb` is shorter than `content`, or `content` at `at` reaches past `size`.
    pub fn place(&self, rgb: &[u8], size: (u32, u32), out: &mut Vec<u8>) {
        let (ch, cw) = (self.content.0 as usize, self.content.1 as usize);
        let (top, left) = (self.at.0 as usize, self.at.1 as usize);
        let (h, w) = (size.0 as usize, size.1 as usize);
        assert!(
            top + ch <= h && left + cw <= w,
            "{:?} at {:?} placed in {size:?}",
            self.content,
            self.at
        );
        if self.border != Cv2Border::Constant {
            if self.hflip || self.vflip {
                let mut flipped = rgb[..ch * cw * 3].to_vec();
                if self.hflip {
                    geometry::hflip(&mut flipped, ch, cw);
                }
                if self.vflip {
                    geometry::vflip(&mut flipped, ch, cw);
                }
                let unflipped = Placed {
                    hflip: false,
                    vflip: false,
                    ..*self
                };
                return unflipped.mirror(&flipped, (h, w), out);
            }
            return self.mirror(rgb, (h, w), out);
        }
        // One row of the fill, copied whole where it shows (not a pixel at a time).
        let fill = self.fill.repeat(w);
        out.clear();
        out.reserve(h * w * 3);
        for _ in 0..top {
            out.extend_from_slice(&fill);
        }
        let rows = rgb[..ch * cw * 3].chunks_exact(cw * 3);
        let rows: Box<dyn Iterator<Item = &[u8]>> = if self.vflip {
            Box::new(rows.rev())
        } else {
            Box::new(rows)
        };
        for row in rows {
            out.extend_from_slice(&fill[..left * 3]);
            if self.hflip {
                let at = out.len();
                out.extend_from_slice(row);
                geometry::hflip(&mut out[at..], 1, cw);
            } else {
                out.extend_from_slice(row);
            }
            out.extend_from_slice(&fill[..(w - cw - left) * 3]);
        }
        for _ in top + ch..h {
            out.extend_from_slice(&fill);
        }
    }

    /// [`Placed::place`] with the edge pixels replicated or mirrored around the image.
    fn mirror(&self, rgb: &[u8], (h, w): (usize, usize), out: &mut Vec<u8>) {
        let (ch, cw) = (self.content.0 as usize, self.content.1 as usize);
        let (top, left) = (i64::from(self.at.0), i64::from(self.at.1));
        let at = |p: usize, before: i64, n: usize| {
            // Not `Constant`: every position has a source pixel.
            self.border.place(p as i64 - before, n).unwrap_or(0)
        };
        let columns: Vec<usize> = (0..w).map(|x| at(x, left, cw) * 3).collect();
        out.clear();
        out.reserve(h * w * 3);
        for y in 0..h {
            let row = &rgb[at(y, top, ch) * cw * 3..][..cw * 3];
            for &x in &columns {
                out.extend_from_slice(&row[x..x + 3]);
            }
        }
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
            | PixelOp::HueV1(_)
            | PixelOp::PermuteChannels(_) => {
                let run: Vec<colour::Adjust> = std::iter::once(op)
                    .chain(rest)
                    .map_while(adjustment)
                    .collect();
                rest = &rest[run.len().saturating_sub(1)..];
                colour::adjust(rgb, &run);
            }
            PixelOp::Hflip => geometry::hflip(rgb, h, w),
            PixelOp::Vflip => geometry::vflip(rgb, h, w),
            PixelOp::Grayscale => colour::grayscale(rgb),
            PixelOp::Solarize(t) => colour::solarize(rgb, *t),
            PixelOp::Posterize(b) => colour::posterize(rgb, *b),
            PixelOp::AutoContrast => colour::autocontrast(rgb, false),
            PixelOp::AutoContrastV1 => colour::autocontrast(rgb, true),
            PixelOp::Equalize => colour::equalize(rgb),
            PixelOp::DropChannels { drop, fill } => albu::drop_channels(rgb, *drop, *fill),
            PixelOp::AlbuEqualize(EqualizeMode::Cv) => {
                colour::equalize_by(rgb, albu_tone::cv2_table)
            }
            PixelOp::AlbuEqualize(EqualizeMode::Pil) => {
                colour::equalize_by(rgb, |h, pixels| colour::pil_table(h, pixels, true))
            }
            PixelOp::Invert => colour::invert(rgb),
            PixelOp::Sharpness(f) => blur::sharpness(rgb, h, w, *f, s),
            PixelOp::GaussianBlur { kernel, sigma, v1 } => {
                blur::gaussian_blur(rgb, h, w, *kernel, *sigma, *v1, s)
            }
            PixelOp::Warp(warp) => geometry::warp(rgb, h, w, warp, s),
            PixelOp::AugMix(plan) => aug_mix(plan, rgb, h, w, s),
            PixelOp::PilEnhance { kind, factor } => {
                pil::enhance(rgb, h, w, *kind, *factor, &mut s.bytes)
            }
            PixelOp::PilAutoContrast => pil::autocontrast(rgb),
            PixelOp::PilHue(factor) => pil::adjust_hue(rgb, *factor),
            PixelOp::PilGaussianBlur(radius) => {
                pil::gaussian_blur(rgb, h, w, *radius, &mut s.bytes)
            }
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
            PixelOp::Transpose => albu::transpose(rgb, w),
            PixelOp::Rot90(k) => geometry::rot90_in_place(rgb, w, u32::from(*k), &mut s.bytes),
            PixelOp::Cv2Affine {
                inverse,
                border,
                fill,
                ..
            } => albu::warp_affine(rgb, h, w, inverse, *border, *fill, &mut s.bytes),
            PixelOp::GridDistortion(grid) => {
                albu_distort::grid_distortion(rgb, (h, w), grid, &mut s.floats, &mut s.bytes)
            }
            PixelOp::Downscale(scale) => albu_distort::downscale(rgb, h, w, *scale, &mut s.bytes),
            PixelOp::JpegRoundTrip(quality) => {
                albu_jpeg::round_trip(rgb, h, w, *quality, &mut s.jpeg)
            }
            PixelOp::Clahe { clip_limit, tiles } => {
                albu_clahe::clahe(rgb, h, w, *clip_limit, *tiles, &mut s.clahe)
            }
            PixelOp::OpticalDistortion { k, border, fill } => {
                let drawn = (*k, *border, *fill);
                albu_distort::optical_distortion(rgb, (h, w), drawn, &mut s.floats, &mut s.bytes)
            }
            PixelOp::MultiplyAdd { alpha, beta } => albu::multiply_add(rgb, *alpha, *beta),
            PixelOp::ChannelShift(shift) => albu::shift_channels(rgb, *shift),
            PixelOp::Cv2Gray => albu::cv2_gray(rgb),
            PixelOp::Cv2Contrast(factor) => albu::cv2_contrast(rgb, *factor),
            PixelOp::Cv2Saturation(factor) => albu::cv2_saturation(rgb, *factor),
            PixelOp::Gamma(g) => albu::gamma(rgb, *g),
            PixelOp::BoxBlur(k) => albu_filter::box_blur(rgb, h, w, usize::from(*k), &mut s.sums),
            PixelOp::MedianBlur(k) => {
                albu_filter::median_blur(rgb, h, w, usize::from(*k), &mut s.bytes)
            }
            PixelOp::MotionBlur(kernel) => {
                albu_filter::motion_blur(rgb, h, w, kernel, &mut s.bytes)
            }
            PixelOp::Filter3x3(kernel) => albu_filter::filter3x3(rgb, h, w, kernel, &mut s.bytes),
            PixelOp::SepGaussian { size, sigma } => {
                albu_filter::sep_gaussian(rgb, h, w, usize::from(*size), *sigma, s)
            }
            PixelOp::GaussNoise(noise) => albu_filter::gauss_noise(rgb, noise),
            PixelOp::HsvShift { hue, sat, val } => albu::hsv_shift(rgb, w, *hue, *sat, *val),
        }
    }
}

/// AugMix's mixture: `original * m0 + sum(weight_i * chain_i(original))` in f32, truncated
/// to bytes as torchvision's `.to(torch.uint8)`.
fn aug_mix(plan: &AugMixPlan, rgb: &mut [u8], h: usize, w: usize, s: &mut Scratch) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (detected just above).
        return unsafe { aug_mix_avx2(plan, rgb, h, w, s) };
    }
    aug_mix_any(plan, rgb, h, w, s);
}

/// [`aug_mix`] compiled for AVX2: its mixing loops run eight f32 lanes wide (no FMA: the same
/// bytes); the chains' ops dispatch for themselves.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn aug_mix_avx2(plan: &AugMixPlan, rgb: &mut [u8], h: usize, w: usize, s: &mut Scratch) {
    aug_mix_any(plan, rgb, h, w, s);
}

#[inline(always)]
fn aug_mix_any(plan: &AugMixPlan, rgb: &mut [u8], h: usize, w: usize, s: &mut Scratch) {
    let mut original = std::mem::take(&mut s.original);
    let mut chain = std::mem::take(&mut s.chain);
    let mut mix = std::mem::take(&mut s.mix);
    original.clear();
    original.extend_from_slice(rgb);
    if plan.blended {
        // timm's `_apply_blended`: `rgb` starts as the original; each chain's result is
        // blended into it in bytes.
        for (ops, &weight) in plan.chains.iter().zip(&plan.weights) {
            chain.clear();
            chain.extend_from_slice(&original);
            apply(ops, &mut chain, h, w, s);
            pil::blend_into(rgb, &chain, weight);
        }
        (s.original, s.chain, s.mix) = (original, chain, mix);
        return;
    }
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
    pub fn new(dtype: Dtype, layout: Layout, normalize: Option<Normalize>) -> Self {
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

    /// This stage for grey images handed out as one channel
    /// ([`OutputWriter::one_channel`]).
    pub fn one_channel(self) -> Self {
        Self {
            writer: self.writer.one_channel(),
            ..self
        }
    }

    /// The channels of each output pixel: 3, or 1 ([`PixelStage::one_channel`]).
    pub fn channels(&self) -> usize {
        self.writer.channels()
    }

    /// The bytes the output of `plan` takes at the start of its slot.
    pub fn bytes(&self, plan: &PixelPlan) -> usize {
        plan.size.0 as usize * plan.size.1 as usize * self.channels() * self.dtype.size()
    }

    /// `plan`'s boxes erased in the output `slot` holds.
    fn erase(&self, slot: &mut [u8], plan: &PixelPlan) {
        let (h, w) = (plan.size.0 as usize, plan.size.1 as usize);
        let layout = match self.channels() {
            1 => erase::SlotLayout::Grey,
            _ => match self.layout {
                Layout::Nchw => erase::SlotLayout::Planar,
                Layout::Nhwc => erase::SlotLayout::Interleaved,
            },
        };
        for b in &plan.erase {
            erase::erase(slot, self.dtype, layout, h, w, b);
        }
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
        self.erase(slot, plan);
    }

    /// The float each byte becomes before a resize of float values
    /// ([`OutputWriter::byte_values`]).
    pub fn byte_values(&self) -> [[f32; 256]; 3] {
        self.writer.byte_values()
    }

    /// [`PixelStage::write`] of an image of float values (a float resize's unrounded output,
    /// `ToTensor()` before the resize): `plan`'s flips (its only pixel ops then:
    /// `Pipeline::validate`) run on them, then they are normalized and cast into the slot,
    /// and the boxes erased.
    ///
    /// # Panics
    /// As [`PixelStage::write`]; `plan` has a pixel op other than a flip.
    pub fn write_values(&self, values: &mut [f32], plan: &PixelPlan, slot: &mut [u8]) {
        let (h, w) = (plan.size.0 as usize, plan.size.1 as usize);
        for op in &plan.ops {
            match op {
                PixelOp::Hflip => {
                    for row in values.chunks_exact_mut(w * 3) {
                        mirror(row);
                    }
                }
                PixelOp::Vflip => mirror_rows(&mut values[..h * w * 3], w * 3),
                other => panic!("{other:?} on float values (only flips run there)"),
            }
        }
        let slot = &mut slot[..self.bytes(plan)];
        self.writer.write_values(values, (h, w), plan.flip, slot);
        self.erase(slot, plan);
    }

    /// [`PixelStage::write`] of an image given as a JPEG decode's resampled planes before
    /// their colour conversion, in one pass ([`OutputWriter::write_resampled`]), when that
    /// gives the same bytes: `plan` has no pixel ops and no placement, and the writer has
    /// such a pass. `false`, writing nothing, otherwise (convert the planes to RGB and
    /// [`PixelStage::run`] instead).
    ///
    /// # Panics
    /// As [`PixelStage::write`]; a plane smaller than the plan's size.
    pub fn write_resampled(&self, planes: Planes<'_>, plan: &PixelPlan, slot: &mut [u8]) -> bool {
        if !plan.ops.is_empty() || plan.placed.is_some() {
            return false;
        }
        let (h, w) = (plan.size.0 as usize, plan.size.1 as usize);
        let slot = &mut slot[..self.bytes(plan)];
        if !self.writer.write_resampled(planes, h, w, plan.flip, slot) {
            return false;
        }
        self.erase(slot, plan);
        true
    }

    /// [`PixelStage::write`] into three channel planes that need not be adjacent (a frame of a
    /// `[C, T, H, W]` clip); `false`, writing nothing, when the stage cannot (an interleaved
    /// layout, one channel, or boxes to erase, which [`PixelStage::write`] erases in a whole
    /// image).
    ///
    /// # Panics
    /// A plane is not a third of [`PixelStage::bytes`].
    pub fn write_planes(&self, rgb: &[u8], plan: &PixelPlan, planes: [&mut [u8]; 3]) -> bool {
        if self.layout != Layout::Nchw || !plan.erase.is_empty() || self.channels() == 1 {
            return false;
        }
        let (h, w) = (plan.size.0 as usize, plan.size.1 as usize);
        self.writer.write_planes(rgb, h, w, plan.flip, planes);
        true
    }

    /// [`PixelStage::ops`] then [`PixelStage::write`].
    pub fn run(&self, rgb: &mut [u8], plan: &PixelPlan, scratch: &mut Scratch, slot: &mut [u8]) {
        self.ops(rgb, plan, scratch);
        self.write(rgb, plan, slot);
    }
}

/// A row of RGB values mirrored, pixel by pixel.
fn mirror(row: &mut [f32]) {
    let pixels: &mut [[f32; 3]] = bytemuck::cast_slice_mut(row);
    pixels.reverse();
}

/// An image's rows (`len` values each) in reverse order.
fn mirror_rows(values: &mut [f32], len: usize) {
    let rows = values.len() / len;
    for i in 0..rows / 2 {
        let (top, bottom) = values.split_at_mut((rows - 1 - i) * len);
        top[i * len..][..len].swap_with_slice(&mut bottom[..len]);
    }
}

/// The op as a colour adjustment, for the fused kernel.
fn adjustment(op: &PixelOp) -> Option<colour::Adjust> {
    match *op {
        PixelOp::Brightness(f) => Some(colour::Adjust::Brightness(f)),
        PixelOp::Contrast(f) => Some(colour::Adjust::Contrast(f)),
        PixelOp::Saturation(f) => Some(colour::Adjust::Saturation(f)),
        PixelOp::Hue(f) => Some(colour::Adjust::Hue(f)),
        PixelOp::HueV1(f) => Some(colour::Adjust::HueV1(f)),
        PixelOp::PermuteChannels(p) => Some(colour::Adjust::Permute(p)),
        PixelOp::Hflip
        | PixelOp::Vflip
        | PixelOp::Grayscale
        | PixelOp::Solarize(_)
        | PixelOp::Posterize(_)
        | PixelOp::AutoContrast
        | PixelOp::AutoContrastV1
        | PixelOp::Equalize
        | PixelOp::AlbuEqualize(_)
        | PixelOp::DropChannels { .. }
        | PixelOp::Invert
        | PixelOp::Sharpness(_)
        | PixelOp::GaussianBlur { .. }
        | PixelOp::Warp(_)
        | PixelOp::AugMix(_)
        | PixelOp::PilEnhance { .. }
        | PixelOp::PilHue(_)
        | PixelOp::PilAutoContrast
        | PixelOp::PilGaussianBlur(_)
        | PixelOp::SolarizeAdd { .. }
        | PixelOp::PilAffine { .. }
        | PixelOp::Transpose
        | PixelOp::Rot90(_)
        | PixelOp::Cv2Affine { .. }
        | PixelOp::GridDistortion(_)
        | PixelOp::Downscale(_)
        | PixelOp::OpticalDistortion { .. }
        | PixelOp::JpegRoundTrip(_)
        | PixelOp::Clahe { .. }
        | PixelOp::MultiplyAdd { .. }
        | PixelOp::ChannelShift(_)
        | PixelOp::Cv2Gray
        | PixelOp::Cv2Contrast(_)
        | PixelOp::Cv2Saturation(_)
        | PixelOp::Gamma(_)
        | PixelOp::BoxBlur(_)
        | PixelOp::MedianBlur(_)
        | PixelOp::MotionBlur(_)
        | PixelOp::Filter3x3(_)
        | PixelOp::SepGaussian { .. }
        | PixelOp::GaussNoise(_)
        | PixelOp::HsvShift { .. } => None,
    }
}

#[cfg(test)]
mod placed_tests {
    use super::{Cv2Border, Placed};

    #[test]
    fn a_placed_image_mirrored_past_its_own_width_reflects_again_as_opencv() {
        // One row of three pixels 1, 2, 3 (grey) placed at column 4 of 10, reflect-101 and
        // reflect: OpenCV's `borderInterpolate` folds positions back as often as it takes.
        let rgb: Vec<u8> = [1u8, 2, 3].iter().flat_map(|&v| [v; 3]).collect();
        let row = |border| {
            let placed = Placed {
                content: (1, 3),
                at: (0, 4),
                fill: [9; 3],
                border,
                hflip: false,
                vflip: false,
            };
            let mut out = Vec::new();
            placed.place(&rgb, (1, 10), &mut out);
            out.chunks_exact(3).map(|p| p[0]).collect::<Vec<u8>>()
        };
        assert_eq!(row(Cv2Border::Reflect101), [1, 2, 3, 2, 1, 2, 3, 2, 1, 2]);
        assert_eq!(row(Cv2Border::Reflect), [3, 3, 2, 1, 1, 2, 3, 3, 2, 1]);
        assert_eq!(row(Cv2Border::Replicate), [1, 1, 1, 1, 1, 2, 3, 3, 3, 3]);
        assert_eq!(row(Cv2Border::Constant), [9, 9, 9, 9, 1, 2, 3, 9, 9, 9]);
    }

    #[test]
    fn a_placed_image_sits_at_the_top_left_with_the_fill_below_and_right() {
        let placed = Placed {
            content: (2, 1),
            at: (0, 0),
            fill: [9, 8, 7],
            border: Cv2Border::Constant,
            hflip: false,
            vflip: false,
        };
        let mut out = Vec::new();
        placed.place(&[1, 1, 1, 2, 2, 2], (3, 2), &mut out);
        assert_eq!(out, [1, 1, 1, 9, 8, 7, 2, 2, 2, 9, 8, 7, 9, 8, 7, 9, 8, 7]);
    }

    #[test]
    fn a_placed_image_flipped_as_it_is_placed_leaves_the_fill_where_it_was() {
        // A 2x3 image (values 1..6) at the top-left of 3x4, mirrored each way.
        let rgb: Vec<u8> = (1..=6u8).flat_map(|v| [v; 3]).collect();
        let grid = |hflip, vflip, border| {
            let placed = Placed {
                content: (2, 3),
                at: (0, 0),
                fill: [9; 3],
                border,
                hflip,
                vflip,
            };
            let mut out = Vec::new();
            placed.place(&rgb, (3, 4), &mut out);
            out.chunks_exact(3).map(|p| p[0]).collect::<Vec<u8>>()
        };
        let c = Cv2Border::Constant;
        assert_eq!(grid(false, false, c), [1, 2, 3, 9, 4, 5, 6, 9, 9, 9, 9, 9]);
        assert_eq!(grid(true, false, c), [3, 2, 1, 9, 6, 5, 4, 9, 9, 9, 9, 9]);
        assert_eq!(grid(false, true, c), [4, 5, 6, 9, 1, 2, 3, 9, 9, 9, 9, 9]);
        assert_eq!(grid(true, true, c), [6, 5, 4, 9, 3, 2, 1, 9, 9, 9, 9, 9]);
        // With a replicated border the edges replicated are the mirrored image's.
        let r = Cv2Border::Replicate;
        assert_eq!(grid(true, false, r), [3, 2, 1, 1, 6, 5, 4, 4, 6, 5, 4, 4]);
    }

    #[test]
    fn a_placed_image_sits_at_its_corner_with_the_fill_around_it() {
        let placed = Placed {
            content: (1, 2),
            at: (1, 1),
            fill: [9, 8, 7],
            border: Cv2Border::Constant,
            hflip: false,
            vflip: false,
        };
        let mut out = Vec::new();
        placed.place(&[1, 1, 1, 2, 2, 2], (3, 4), &mut out);
        let f = [9, 8, 7];
        let want: Vec<u8> = [f; 5]
            .into_iter()
            .chain([[1, 1, 1], [2, 2, 2]])
            .chain([f; 5])
            .flatten()
            .collect();
        assert_eq!(out, want);
    }
}

#[cfg(test)]
mod float_tests {
    use super::{PixelOp, PixelPlan, PixelStage};
    use crate::augment::kernel::Normalize;
    use crate::dtype::{Dtype, Layout};

    /// A 2x3 image of float values, each distinct: `r, g, b = 10 * pixel + (0, 1, 2)`, over
    /// 100.
    fn image() -> Vec<f32> {
        (0..6)
            .flat_map(|p| (0..3).map(move |c| (10 * p + c) as f32 / 100.0))
            .collect()
    }

    #[test]
    fn float_values_are_flipped_normalized_as_torch_does_and_laid_out_in_planes() {
        let n = Normalize::new([0.5, 0.25, 0.125], [2.0, 0.5, 0.25]);
        let stage = PixelStage::new(Dtype::F32, Layout::Nchw, Some(n));
        let plan = PixelPlan {
            size: (2, 3),
            ops: vec![PixelOp::Vflip],
            flip: true,
            ..PixelPlan::default()
        };
        let mut values = image();
        let mut slot = vec![0u8; 2 * 3 * 3 * 4];
        stage.write_values(&mut values, &plan, &mut slot);
        let out: &[f32] = bytemuck::cast_slice(&slot);
        let source = image();
        for c in 0..3 {
            for y in 0..2 {
                for x in 0..3 {
                    // Upside down and mirrored: output (y, x) is source (1 - y, 2 - x).
                    let v = source[((1 - y) * 3 + (2 - x)) * 3 + c];
                    let want = (v - n.mean[c]) / n.std[c];
                    assert_eq!(out[c * 6 + y * 3 + x].to_bits(), want.to_bits());
                }
            }
        }
    }

    #[test]
    fn a_one_channel_stage_writes_the_first_channels_values_in_one_plane_in_either_layout() {
        let n = Normalize::new([0.5, 0.25, 0.125], [2.0, 0.5, 0.25]);
        for layout in [Layout::Nchw, Layout::Nhwc] {
            let stage = PixelStage::new(Dtype::F32, layout, Some(n)).one_channel();
            let plan = PixelPlan {
                size: (2, 3),
                flip: true,
                ..PixelPlan::default()
            };
            assert_eq!(stage.bytes(&plan), 2 * 3 * 4);
            let mut values = image();
            let mut slot = vec![0u8; 2 * 3 * 4];
            stage.write_values(&mut values, &plan, &mut slot);
            let out: &[f32] = bytemuck::cast_slice(&slot);
            let source = image();
            for y in 0..2 {
                for x in 0..3 {
                    let want = (source[(y * 3 + (2 - x)) * 3] - n.mean[0]) / n.std[0];
                    assert_eq!(out[y * 3 + x].to_bits(), want.to_bits(), "{layout:?}");
                }
            }
        }
    }

    #[test]
    fn floats_normalized_before_their_resize_are_written_as_they_are_and_tabled_normalized() {
        let n = Normalize {
            before_resize: true,
            ..Normalize::new([0.5, 0.25, 0.125], [2.0, 0.5, 0.25])
        };
        let stage = PixelStage::new(Dtype::F32, Layout::Nhwc, Some(n));
        let tables = stage.byte_values();
        for (c, table) in tables.iter().enumerate() {
            let want = (51.0f32 / 255.0 - n.mean[c]) / n.std[c];
            assert_eq!(table[51].to_bits(), want.to_bits());
        }
        let plan = PixelPlan {
            size: (2, 3),
            ..PixelPlan::default()
        };
        let mut values = image();
        let mut slot = vec![0u8; 2 * 3 * 3 * 4];
        stage.write_values(&mut values, &plan, &mut slot);
        assert_eq!(bytemuck::cast_slice::<u8, f32>(&slot), &image()[..]);
    }

    #[test]
    fn float_values_without_normalize_are_written_as_they_are_interleaved_in_bf16() {
        let stage = PixelStage::new(Dtype::Bf16, Layout::Nhwc, None);
        let plan = PixelPlan {
            size: (2, 3),
            ops: vec![PixelOp::Hflip],
            ..PixelPlan::default()
        };
        let mut values = image();
        let mut slot = vec![0u8; 2 * 3 * 3 * 2];
        stage.write_values(&mut values, &plan, &mut slot);
        let out: &[u16] = bytemuck::cast_slice(&slot);
        let source = image();
        for y in 0..2 {
            for x in 0..3 {
                for c in 0..3 {
                    let v = source[(y * 3 + (2 - x)) * 3 + c];
                    assert_eq!(out[(y * 3 + x) * 3 + c], half::bf16::from_f32(v).to_bits());
                }
            }
        }
    }
}
