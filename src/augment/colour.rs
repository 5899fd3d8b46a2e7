//! Colour ops: their specs (`ColorJitter`, `RandomPhotometricDistort`, grayscale, solarize,
//! posterize, autocontrast, equalize, invert) and their kernels on an interleaved RGB8 image, with the arithmetic of torchvision's v2 tensor
//! kernels on uint8: products in f32, clamped to `[0, 255]` and truncated back to bytes, as
//! `tensor.to(torch.uint8)` truncates.

use serde::{Deserialize, Serialize};

use super::error::PipelineError;
use super::pixel::{PilEnhance, PixelOp};
use super::spec::{coin, coin_op, half, probability, shuffle, torch_uniform, OpKind, OpSpec};
use crate::rng::CounterRng;

/// `ColorJitter`: factors drawn uniformly from each range, applied in a random order. `None`
/// leaves that adjustment out (torchvision's 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColorJitter {
    /// Brightness factor range, e.g. `[0.6, 1.4]` for `brightness=0.4`.
    #[serde(default)]
    pub brightness: Option<[f64; 2]>,
    /// Contrast factor range.
    #[serde(default)]
    pub contrast: Option<[f64; 2]>,
    /// Saturation factor range.
    #[serde(default)]
    pub saturation: Option<[f64; 2]>,
    /// Hue shift range, within `[-0.5, 0.5]`.
    #[serde(default)]
    pub hue: Option<[f64; 2]>,
    /// The image is a PIL image: torchvision adjusts its contrast and saturation with
    /// Pillow's `ImageEnhance` and shifts its hue through Pillow's byte HSV
    /// ([`PixelOp::PilHue`]). Default false: a tensor's arithmetic.
    #[serde(default)]
    pub pil: bool,
    /// The image is a tensor under torchvision v1, whose hue arithmetic differs from v2's
    /// ([`PixelOp::HueV1`]). Default false.
    #[serde(default)]
    pub v1: bool,
}

fn check_factor(r: Option<[f64; 2]>, what: &str) -> Result<(), PipelineError> {
    match r {
        Some([lo, hi]) if !(0.0 <= lo && lo <= hi && hi.is_finite()) => {
            Err(PipelineError::Parameter(format!(
                "{what} range [{lo}, {hi}] must satisfy 0 <= min <= max"
            )))
        }
        _ => Ok(()),
    }
}

fn check_hue([lo, hi]: [f64; 2], what: &str) -> Result<(), PipelineError> {
    if !(-0.5 <= lo && lo <= hi && hi <= 0.5) {
        return Err(PipelineError::Parameter(format!(
            "{what} range [{lo}, {hi}] must lie in [-0.5, 0.5]"
        )));
    }
    Ok(())
}

impl OpSpec for ColorJitter {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        check_factor(self.brightness, "color_jitter brightness")?;
        check_factor(self.contrast, "color_jitter contrast")?;
        check_factor(self.saturation, "color_jitter saturation")?;
        self.hue
            .map_or(Ok(()), |h| check_hue(h, "color_jitter hue"))
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        let mut order = [0usize, 1, 2, 3];
        shuffle(rng, &mut order);
        let b = self.brightness.map(|r| torch_uniform(rng, r));
        let c = self.contrast.map(|r| torch_uniform(rng, r));
        let s = self.saturation.map(|r| torch_uniform(rng, r));
        let h = self.hue.map(|r| torch_uniform(rng, r));
        let ops = Adjustments::new(self.pil, self.v1);
        for k in order {
            out.extend(match k {
                0 => b.map(PixelOp::Brightness),
                1 => c.map(ops.contrast),
                2 => s.map(ops.saturation),
                _ => h.map(ops.hue),
            });
        }
    }
}

/// The ops of a colour adjustment by its factor, as torchvision computes them on what the
/// image is: a tensor's are torch's arithmetic (fused into one or two passes, [`adjust`]); a
/// PIL image's contrast and saturation are Pillow's `ImageEnhance` (torch's arithmetic is a
/// level off in about a sixth of the values) and its hue Pillow's byte HSV. Brightness is the
/// same either way.
struct Adjustments {
    contrast: fn(f64) -> PixelOp,
    saturation: fn(f64) -> PixelOp,
    hue: fn(f64) -> PixelOp,
}

impl Adjustments {
    fn new(pil: bool, v1: bool) -> Self {
        if pil {
            Self {
                contrast: |factor| PixelOp::PilEnhance {
                    kind: PilEnhance::Contrast,
                    factor,
                },
                saturation: |factor| PixelOp::PilEnhance {
                    kind: PilEnhance::Color,
                    factor,
                },
                hue: PixelOp::PilHue,
            }
        } else {
            Self {
                contrast: PixelOp::Contrast,
                saturation: PixelOp::Saturation,
                hue: if v1 { PixelOp::HueV1 } else { PixelOp::Hue },
            }
        }
    }
}

/// `RandomPhotometricDistort(brightness, contrast, saturation, hue, p)` (torchvision v2):
/// each adjustment with probability `p`, the contrast before or after saturation and hue at
/// random, then a random channel permutation with probability `p`. In a detection pipeline it
/// may come before the geometry, where torchvision's SSD preset puts it: it then runs on the
/// whole decoded image.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomPhotometricDistort {
    /// Brightness factor range. Default `[0.875, 1.125]`.
    #[serde(default = "distort_brightness")]
    pub brightness: [f64; 2],
    /// Contrast factor range. Default `[0.5, 1.5]`.
    #[serde(default = "distort_factor")]
    pub contrast: [f64; 2],
    /// Saturation factor range. Default `[0.5, 1.5]`.
    #[serde(default = "distort_factor")]
    pub saturation: [f64; 2],
    /// Hue shift range. Default `[-0.05, 0.05]`.
    #[serde(default = "distort_hue")]
    pub hue: [f64; 2],
    /// Probability of each step. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
    /// The image is a PIL image: the contrast and saturation by Pillow's `ImageEnhance`, the
    /// hue through its byte HSV ([`PixelOp::PilHue`]). Default false.
    #[serde(default)]
    pub pil: bool,
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

impl Default for RandomPhotometricDistort {
    /// torchvision's defaults.
    fn default() -> Self {
        Self {
            brightness: distort_brightness(),
            contrast: distort_factor(),
            saturation: distort_factor(),
            hue: distort_hue(),
            p: half(),
            pil: false,
        }
    }
}

impl OpSpec for RandomPhotometricDistort {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        let name = "random_photometric_distort";
        probability(self.p, name)?;
        check_factor(Some(self.brightness), &format!("{name} brightness"))?;
        check_factor(Some(self.contrast), &format!("{name} contrast"))?;
        check_factor(Some(self.saturation), &format!("{name} saturation"))?;
        check_hue(self.hue, &format!("{name} hue"))
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        // torchvision v2's draws, in its order: a coin and a factor for each adjustment, the
        // contrast's place, then a coin and a permutation.
        let p = self.p;
        let mut factor = |r: [f64; 2]| coin(rng, p).then(|| torch_uniform(rng, r));
        let b = factor(self.brightness);
        let c = factor(self.contrast);
        let s = factor(self.saturation);
        let h = factor(self.hue);
        let contrast_before = coin(rng, 0.5);
        let ops = Adjustments::new(self.pil, false);
        out.extend(b.map(PixelOp::Brightness));
        if contrast_before {
            out.extend(c.map(ops.contrast));
        }
        out.extend(s.map(ops.saturation));
        out.extend(h.map(ops.hue));
        if !contrast_before {
            out.extend(c.map(ops.contrast));
        }
        if coin(rng, p) {
            let mut order = [0u8, 1, 2];
            shuffle(rng, &mut order);
            out.push(PixelOp::PermuteChannels(order));
        }
    }
}

coin_op!(
    /// `RandomGrayscale(p)` (`Grayscale(3)` is `p = 1`). Default p 0.1.
    RandomGrayscale = "random_grayscale", p = "gray_p", Pixel, PixelOp::Grayscale
);
/// `RandomAutocontrast(p)`. Default p 0.5.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomAutocontrast {
    /// Probability.
    #[serde(default = "half")]
    pub p: f64,
    /// The image is a PIL image: Pillow's `ImageOps.autocontrast` (torch's arithmetic is a
    /// level off in a few values). Default false.
    #[serde(default)]
    pub pil: bool,
    /// The image is a tensor under torchvision v1, whose arithmetic differs from v2's in
    /// about 2% of values. Default false.
    #[serde(default)]
    pub v1: bool,
}

impl OpSpec for RandomAutocontrast {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "random_autocontrast")
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            out.push(if self.pil {
                PixelOp::PilAutoContrast
            } else if self.v1 {
                PixelOp::AutoContrastV1
            } else {
                PixelOp::AutoContrast
            });
        }
    }
}
coin_op!(
    /// `RandomEqualize(p)`. Default p 0.5.
    RandomEqualize = "random_equalize", p = "half", Pixel, PixelOp::Equalize
);
coin_op!(
    /// `RandomInvert(p)`. Default p 0.5.
    RandomInvert = "random_invert", p = "half", Pixel, PixelOp::Invert
);

fn gray_p() -> f64 {
    0.1
}

/// `RandomSolarize(threshold, p)`: invert values `>= threshold` (0..=255).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomSolarize {
    /// Threshold on the 0..=255 scale.
    pub threshold: f64,
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

impl OpSpec for RandomSolarize {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "random_solarize")?;
        if !(0.0..=255.0).contains(&self.threshold) {
            return Err(PipelineError::Parameter(format!(
                "random_solarize threshold {} must lie in [0, 255]",
                self.threshold
            )));
        }
        Ok(())
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            out.push(PixelOp::Solarize(self.threshold));
        }
    }
}

/// `RandomPosterize(bits, p)`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomPosterize {
    /// Bits kept, 0..=8.
    pub bits: u8,
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

impl OpSpec for RandomPosterize {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "random_posterize")?;
        if self.bits > 8 {
            return Err(PipelineError::Parameter(format!(
                "random_posterize bits {} must be 0..=8",
                self.bits
            )));
        }
        Ok(())
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            out.push(PixelOp::Posterize(self.bits));
        }
    }
}

/// `gray = floor(0.2989 r + 0.587 g + 0.114 b)` in f32, torchvision's `rgb_to_grayscale`
/// (the same value whether the caller keeps it as a float or converts it to a byte).
#[inline]
fn luma(p: &[u8]) -> f32 {
    let l = f32::from(p[0]) * 0.2989 + f32::from(p[1]) * 0.587 + f32::from(p[2]) * 0.114;
    l.floor()
}

/// torchvision's `.clamp_(0, 255).to(torch.uint8)`.
#[inline]
fn to_u8(x: f32) -> u8 {
    x.clamp(0.0, 255.0) as u8
}

fn weights(ratio: f64) -> (f32, f32) {
    (ratio as f32, (1.0 - ratio) as f32)
}

/// One of ColorJitter's adjustments (also the auto-augment policies' brightness, contrast and
/// colour ops), run by [`adjust`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Adjust {
    /// `adjust_brightness(factor)`: `x * factor`.
    Brightness(f64),
    /// `adjust_contrast(factor)`: blend with the mean grey of the whole image.
    Contrast(f64),
    /// `adjust_saturation(factor)`: blend with the pixel's own grey.
    Saturation(f64),
    /// `adjust_hue(factor)`: rotate the hue by `factor` turns (`factor` in `[-0.5, 0.5]`).
    Hue(f64),
    /// The same with torchvision v1's arithmetic.
    HueV1(f64),
    /// `permute_channels(p)`: output channel `c` is input channel `p[c]` (free in the fused
    /// pass: the planes change places).
    Permute([u8; 3]),
}

/// Pixels per block: the image is run through the adjustments a block at a time, as three f32
/// planes that stay in the cache.
const BLOCK: usize = 64;

/// Runs `ops` in order on the RGB8 image `rgb`, in place, with torchvision's arithmetic: each
/// op's result is clamped and truncated to bytes before the next, as on a uint8 tensor.
///
/// The ops are fused: one pass over the image runs every op up to the next contrast (whose
/// mean grey depends on all the ops before it), summing the greys of its result on the way, so
/// ColorJitter's four ops take at most two passes. Each op is branch-free f32 arithmetic on
/// planes, vectorized for the widest of AVX-512, AVX2 or the portable baseline that the CPU
/// runs (no fused multiply-add, so every width gives the same bytes).
pub(crate) fn adjust(rgb: &mut [u8], ops: &[Adjust]) {
    if rgb.len() < 3 || ops.is_empty() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F (detected just above).
        return unsafe { adjust_avx512(rgb, ops) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (detected just above).
        return unsafe { adjust_avx2(rgb, ops) };
    }
    adjust_any(rgb, ops);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn adjust_avx512(rgb: &mut [u8], ops: &[Adjust]) {
    adjust_any(rgb, ops);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn adjust_avx2(rgb: &mut [u8], ops: &[Adjust]) {
    adjust_any(rgb, ops);
}

#[inline(always)]
fn adjust_any(rgb: &mut [u8], ops: &[Adjust]) {
    let pixels = (rgb.len() / 3) as f32;
    let is_contrast = |op: &Adjust| matches!(op, Adjust::Contrast(_));
    let mut mean = 0.0;
    if is_contrast(&ops[0]) {
        mean = pass(rgb, &[], 0.0, true) as f32 / pixels;
    }
    let mut start = 0;
    while start < ops.len() {
        let end = ops[start + 1..]
            .iter()
            .position(is_contrast)
            .map_or(ops.len(), |p| start + 1 + p);
        let sum = pass(rgb, &ops[start..end], mean, end < ops.len());
        // Exact: torch sums the integer greys in f32, exact below 2^24.
        mean = sum as f32 / pixels;
        start = end;
    }
}

/// One pass: `ops` (a contrast only first, with the mean grey `mean`) on each block; returns
/// the sum of the result's greys when `sum_greys`. With no ops it only sums.
#[inline(always)]
fn pass(rgb: &mut [u8], ops: &[Adjust], mean: f32, sum_greys: bool) -> u64 {
    let mut blocks = rgb.chunks_exact_mut(BLOCK * 3);
    let mut total = 0;
    for block in &mut blocks {
        let block: &mut [u8; BLOCK * 3] = block.try_into().expect("chunks are BLOCK pixels");
        total += run_block(block, BLOCK, ops, mean, sum_greys);
    }
    let tail = blocks.into_remainder();
    if !tail.is_empty() {
        let mut block = [0u8; BLOCK * 3];
        block[..tail.len()].copy_from_slice(tail);
        total += run_block(&mut block, tail.len() / 3, ops, mean, sum_greys);
        tail.copy_from_slice(&block[..tail.len()]);
    }
    total
}

/// [`pass`] on one block whose first `n` pixels are the image's. Every loop has a constant
/// length, so each compiles to whole vectors.
#[inline(always)]
fn run_block(
    block: &mut [u8; BLOCK * 3],
    n: usize,
    ops: &[Adjust],
    mean: f32,
    sum_greys: bool,
) -> u64 {
    let mut pixels = [0f32; BLOCK * 3];
    for (x, &v) in pixels.iter_mut().zip(block.iter()) {
        *x = f32::from(v);
    }
    let (mut r, mut g, mut b) = ([0f32; BLOCK], [0f32; BLOCK], [0f32; BLOCK]);
    for i in 0..BLOCK {
        (r[i], g[i], b[i]) = (pixels[3 * i], pixels[3 * i + 1], pixels[3 * i + 2]);
    }
    for op in ops {
        match *op {
            Adjust::Brightness(f) => {
                let f = f as f32;
                for plane in [&mut r, &mut g, &mut b] {
                    for x in plane.iter_mut() {
                        *x = to_byte(*x * f);
                    }
                }
            }
            Adjust::Contrast(f) => {
                let (ratio, rest) = weights(f);
                let other = mean * rest;
                for plane in [&mut r, &mut g, &mut b] {
                    for x in plane.iter_mut() {
                        *x = to_byte(*x * ratio + other);
                    }
                }
            }
            Adjust::Saturation(f) => {
                let (ratio, rest) = weights(f);
                for i in 0..BLOCK {
                    let other = grey(r[i], g[i], b[i]) * rest;
                    r[i] = to_byte(r[i] * ratio + other);
                    g[i] = to_byte(g[i] * ratio + other);
                    b[i] = to_byte(b[i] * ratio + other);
                }
            }
            Adjust::Hue(f) => hue::<false>(&mut r, &mut g, &mut b, f as f32),
            Adjust::HueV1(f) => hue::<true>(&mut r, &mut g, &mut b, f as f32),
            Adjust::Permute(p) => {
                let planes = [r, g, b];
                let pick = |c: u8| planes[usize::from(c).min(2)];
                (r, g, b) = (pick(p[0]), pick(p[1]), pick(p[2]));
            }
        }
    }
    let mut total = 0;
    if sum_greys {
        let mut greys = [0u32; BLOCK];
        for (i, v) in greys.iter_mut().enumerate() {
            *v = if i < n {
                whole_to_u32(grey(r[i], g[i], b[i]))
            } else {
                0
            };
        }
        total = u64::from(greys.iter().sum::<u32>());
    }
    if !ops.is_empty() {
        for i in 0..BLOCK {
            (pixels[3 * i], pixels[3 * i + 1], pixels[3 * i + 2]) = (r[i], g[i], b[i]);
        }
        for (v, &x) in block.iter_mut().zip(pixels.iter()) {
            *v = whole_to_u8(x);
        }
    }
    total
}

/// A whole number in `[0, 255]` held as f32, as a byte: its bits once added to 2^23 (where the
/// low mantissa bits are the number). `x as u8` would do, but its saturating conversion does
/// not vectorize.
#[inline(always)]
fn whole_to_u8(x: f32) -> u8 {
    whole_to_u32(x) as u8
}

/// A whole number in `[0, 2^23)` held as f32, as an integer (see [`whole_to_u8`]).
#[inline(always)]
fn whole_to_u32(x: f32) -> u32 {
    const TWO_TO_23: f32 = 8_388_608.0;
    (x + TWO_TO_23).to_bits() - TWO_TO_23.to_bits()
}

/// `.clamp_(0, 255)` then the truncation of `.to(torch.uint8)`, kept in f32.
#[inline(always)]
fn to_byte(x: f32) -> f32 {
    let x = if x < 0.0 { 0.0 } else { x };
    let x = if x > 255.0 { 255.0 } else { x };
    x.floor()
}

/// torchvision's grey of one pixel, floored: `0.2989 r + 0.587 g + 0.114 b` in f32.
#[inline(always)]
fn grey(r: f32, g: f32, b: f32) -> f32 {
    (r * 0.2989 + g * 0.587 + b * 0.114).floor()
}

#[inline(always)]
fn max(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

#[inline(always)]
fn min(a: f32, b: f32) -> f32 {
    if a < b {
        a
    } else {
        b
    }
}

/// `adjust_hue(factor)` on bytes held as f32, torchvision's arithmetic to the bit: to `[0, 1]`
/// (v2 multiplies by `1 / 255`, v1 divides by 255), `_rgb_to_hsv` (v1's `_rgb2hsv` divides the
/// hue sum by 6 where v2 multiplies by `1 / 6`), the shift and `remainder(1)`, `_hsv_to_rgb`
/// (v1's `t` is `v (1 - s (1 - f))`, v2's `(s f + 1 - s) v`), then `x * 255.999` truncated.
/// Written without branches, so that each step runs in vector lanes.
#[inline(always)]
fn hue<const V1: bool>(
    r: &mut [f32; BLOCK],
    g: &mut [f32; BLOCK],
    b: &mut [f32; BLOCK],
    shift: f32,
) {
    const TO_UNIT: f32 = 1.0 / 255.0;
    const SIXTH: f32 = 1.0 / 6.0;
    const TO_BYTE: f32 = 255.999;
    let unit = |x: f32| if V1 { x / 255.0 } else { x * TO_UNIT };
    let clamp = |x: f32| min(max(x, 0.0), 1.0);
    for i in 0..BLOCK {
        let (x, y, z) = (unit(r[i]), unit(g[i]), unit(b[i]));
        let hi = max(max(x, y), z);
        let lo = min(min(x, y), z);
        let grey = hi == lo;
        let range = hi - lo;
        let s = range / if grey { 1.0 } else { hi };
        let div = if grey { 1.0 } else { range };
        let (rc, gc, bc) = ((hi - x) / div, (hi - y) / div, (hi - z) / div);
        // torchvision's priority: red's formula when red is largest, then green's, then blue's.
        let h = if hi == x {
            bc - gc
        } else if hi == y {
            (rc + 2.0) - bc
        } else {
            (gc + 4.0) - rc
        };
        let h = if V1 { h / 6.0 } else { h * SIXTH } + 1.0;
        // `fmod(h, 1)` for h in [5/6, 11/6], then `remainder(h + shift, 1)`: exact here.
        let h = if h >= 1.0 { h - 1.0 } else { h };
        let h = h + shift;
        let h = if h >= 1.0 {
            h - 1.0
        } else if h < 0.0 {
            h + 1.0
        } else {
            h
        };
        let h6 = h * 6.0;
        let sector = h6.floor();
        let f = h6 - sector;
        let sector = if sector >= 6.0 { sector - 6.0 } else { sector };
        let (sxf, rest) = (s * f, 1.0 - s);
        let p = clamp(rest * hi);
        let q = clamp((1.0 - sxf) * hi);
        let t = clamp(if V1 {
            hi * (1.0 - s * (1.0 - f))
        } else {
            (sxf + rest) * hi
        });
        // The six sectors' (r, g, b): (v t p) (q v p) (p v t) (p q v) (t p v) (v p q).
        let is = |k: f32| sector == k;
        let out_r = if is(0.0) || is(5.0) {
            hi
        } else if is(1.0) {
            q
        } else if is(4.0) {
            t
        } else {
            p
        };
        let out_g = if is(1.0) || is(2.0) {
            hi
        } else if is(0.0) {
            t
        } else if is(3.0) {
            q
        } else {
            p
        };
        let out_b = if is(3.0) || is(4.0) {
            hi
        } else if is(2.0) {
            t
        } else if is(5.0) {
            q
        } else {
            p
        };
        r[i] = (out_r * TO_BYTE).floor();
        g[i] = (out_g * TO_BYTE).floor();
        b[i] = (out_b * TO_BYTE).floor();
    }
}

/// `rgb_to_grayscale(num_output_channels=3)`: every channel becomes the floored grey.
pub(crate) fn grayscale(rgb: &mut [u8]) {
    for p in rgb.chunks_exact_mut(3) {
        let g = luma(p) as u8;
        p.fill(g);
    }
}

/// `invert`: `255 - x`.
pub(crate) fn invert(rgb: &mut [u8]) {
    for v in rgb {
        *v = !*v;
    }
}

/// `posterize(bits)`: keep the top `bits` bits.
pub(crate) fn posterize(rgb: &mut [u8], bits: u8) {
    if bits >= 8 {
        return;
    }
    let mask = !(0xFFu8 >> bits);
    for v in rgb {
        *v &= mask;
    }
}

/// `solarize(threshold)`: invert every value `>= threshold` (compared in f32, as torch
/// compares a uint8 tensor with a float).
pub(crate) fn solarize(rgb: &mut [u8], threshold: f64) {
    let threshold = threshold as f32;
    for v in rgb {
        if f32::from(*v) >= threshold {
            *v = !*v;
        }
    }
}

/// `autocontrast`: stretch each channel from its own `[min, max]` to `[0, 255]` (a channel with
/// one value is left as it is).
pub(crate) fn autocontrast(rgb: &mut [u8], v1: bool) {
    let (mut lo, mut hi) = ([255u8; 3], [0u8; 3]);
    for p in rgb.chunks_exact(3) {
        for c in 0..3 {
            lo[c] = lo[c].min(p[c]);
            hi[c] = hi[c].max(p[c]);
        }
    }
    let tables: [[u8; 256]; 3] = std::array::from_fn(|c| {
        let (min, max) = (f32::from(lo[c]), f32::from(hi[c]));
        if min == max {
            return std::array::from_fn(|v| v as u8);
        }
        // v1: `(x - min) * (255 / (max - min))`, where torch divides a number by a tensor as
        // the tensor's reciprocal times the number; v2: `(x - min) / ((max - min) * (1 / 255))`.
        let (scale, inv_scale) = ((1.0 / (max - min)) * 255.0, (max - min) * (1.0 / 255.0));
        std::array::from_fn(|v| {
            let x = v as f32 - min;
            to_u8(if v1 { x * scale } else { x / inv_scale })
        })
    });
    for p in rgb.chunks_exact_mut(3) {
        for c in 0..3 {
            p[c] = tables[c][usize::from(p[c])];
        }
    }
}

/// `equalize`: per-channel histogram equalization with Pillow's lookup table (which
/// torchvision's tensor kernel reproduces); a channel whose non-maximal pixels are fewer than
/// 255 is left as it is.
pub(crate) fn equalize(rgb: &mut [u8]) {
    equalize_by(rgb, |h, pixels| pil_table(h, pixels, false));
}

/// Pillow's equalization table of a channel's histogram `h` over `pixels`: the last non-empty
/// bin's pixels aside, a step of a 255th of the rest, each value mapped to the pixels below it
/// (`inclusive`: below and at it, as albumentations' own `pil` mode counts) over the step,
/// rounded. None (the channel left as it is) when the step is zero.
pub(crate) fn pil_table(h: &[u32; 256], pixels: u32, inclusive: bool) -> Option<[u8; 256]> {
    // The last non-empty bin holds the channel's largest value.
    let last = h.iter().rposition(|&n| n > 0)?;
    let step = (pixels - h[last]) / 255;
    if step == 0 {
        return None;
    }
    let mut lut = [0u8; 256];
    let mut cum = 0u32;
    for v in 0..256 {
        if inclusive {
            cum += h[v];
        } else if v > 0 {
            cum += h[v - 1];
        }
        lut[v] = ((cum + step / 2) / step).min(255) as u8;
    }
    Some(lut)
}

/// Each channel of `rgb` through the table `table` makes of its histogram and pixel count (a
/// channel without one is left as it is).
pub(crate) fn equalize_by(rgb: &mut [u8], table: impl Fn(&[u32; 256], u32) -> Option<[u8; 256]>) {
    let mut hist = [[0u32; 256]; 3];
    for p in rgb.chunks_exact(3) {
        for c in 0..3 {
            hist[c][usize::from(p[c])] += 1;
        }
    }
    let pixels = (rgb.len() / 3) as u32;
    let tables: [Option<[u8; 256]>; 3] = std::array::from_fn(|c| table(&hist[c], pixels));
    for p in rgb.chunks_exact_mut(3) {
        for (c, table) in tables.iter().enumerate() {
            if let Some(t) = table {
                p[c] = t[usize::from(p[c])];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // torchvision's kernels op by op, as first written here: the references `adjust` is
    // tested against.
    /// `_blend(image, other, ratio)`: `image * ratio + other * (1 - ratio)`, the weights as f32.
    #[inline]
    fn blend(x: u8, other: f32, ratio: f32, rest: f32) -> u8 {
        to_u8(f32::from(x) * ratio + other * rest)
    }

    /// `adjust_brightness(factor)`: `x * factor`.
    fn brightness(rgb: &mut [u8], factor: f64) {
        let f = factor as f32;
        let table: [u8; 256] = std::array::from_fn(|v| to_u8(v as f32 * f));
        for v in rgb {
            *v = table[usize::from(*v)];
        }
    }

    /// `adjust_saturation(factor)`: blend with the pixel's own grey.
    fn saturation(rgb: &mut [u8], factor: f64) {
        let (r, rest) = weights(factor);
        for p in rgb.chunks_exact_mut(3) {
            let g = luma(p);
            for v in p {
                *v = blend(*v, g, r, rest);
            }
        }
    }

    /// `adjust_contrast(factor)`: blend with the mean grey of the whole image.
    fn contrast(rgb: &mut [u8], factor: f64) {
        let pixels = rgb.len() / 3;
        if pixels == 0 {
            return;
        }
        // Exact integer sum (torch sums the floored greys in f32, exact below 2^24).
        let sum: u64 = rgb.chunks_exact(3).map(|p| luma(p) as u64).sum();
        let mean = sum as f32 / pixels as f32;
        let (r, rest) = weights(factor);
        let other = mean * rest;
        let table: [u8; 256] = std::array::from_fn(|v| to_u8(v as f32 * r + other));
        for v in rgb {
            *v = table[usize::from(*v)];
        }
    }

    /// `adjust_hue(factor)`: rotate the hue by `factor` turns, through torchvision's HSV
    /// conversion in f32 (`factor` in `[-0.5, 0.5]`), v1's or v2's, written as torchvision
    /// writes it, pixel by pixel.
    fn hue(rgb: &mut [u8], factor: f64, v1: bool) {
        let shift = factor as f32;
        for p in rgb.chunks_exact_mut(3) {
            // `to_dtype(float32, scale=True)` (v2), `convert_image_dtype` (v1).
            let [r, g, b] = [p[0], p[1], p[2]].map(|v| {
                if v1 {
                    f32::from(v) / 255.0
                } else {
                    f32::from(v) * (1.0 / 255.0)
                }
            });
            let out = hsv_to_rgb(rgb_to_hsv(r, g, b, shift, v1), v1);
            for (v, x) in p.iter_mut().zip(out) {
                // `x * (255 + 1 - 1e-3)`, truncated.
                *v = (x * 255.999) as u8;
            }
        }
    }

    /// torchvision's `_rgb_to_hsv` (v1: `_rgb2hsv`), with the hue shifted by `shift` (mod 1)
    /// at the end.
    fn rgb_to_hsv(r: f32, g: f32, b: f32, shift: f32, v1: bool) -> [f32; 3] {
        let maxc = r.max(g).max(b);
        let minc = r.min(g).min(b);
        let eqc = maxc == minc;
        let range = maxc - minc;
        let s = range / if eqc { 1.0 } else { maxc };
        let div = if eqc { 1.0 } else { range };
        let (rc, gc, bc) = ((maxc - r) / div, (maxc - g) / div, (maxc - b) / div);
        let neq_r = maxc != r;
        let eq_g = maxc == g;
        let hg = if eq_g && neq_r { rc + 2.0 - bc } else { 0.0 };
        let hr = if neq_r { 0.0 } else { bc - gc };
        let hb = if neq_r && !eq_g { gc + 4.0 - rc } else { 0.0 };
        let sum = hr + hg + hb;
        // `fmod(x, 1)` for x in [5/6, 11/6]: subtracting 1 is exact there (no libm call).
        let h = if v1 { sum / 6.0 } else { sum * (1.0 / 6.0) } + 1.0;
        let h = if h >= 1.0 { h - 1.0 } else { h };
        // `remainder(h + factor, 1.0)`: torch's remainder (fmod, plus 1 when negative) for
        // values in [-0.5, 1.5).
        let y = h + shift;
        let h = if y >= 1.0 {
            y - 1.0
        } else if y < 0.0 {
            y + 1.0
        } else {
            y
        };
        [h, s, maxc]
    }

    /// torchvision's `_hsv_to_rgb` (v1: `_hsv2rgb`).
    fn hsv_to_rgb([h, s, v]: [f32; 3], v1: bool) -> [f32; 3] {
        let h6 = h * 6.0;
        // h6 is in [0, 6]: truncation is the floor.
        let i = h6 as i32;
        let f = h6 - i as f32;
        let i = i % 6;
        let sxf = s * f;
        let one_minus_s = 1.0 - s;
        let q = ((1.0 - sxf) * v).clamp(0.0, 1.0);
        let t = if v1 {
            (v * (1.0 - s * (1.0 - f))).clamp(0.0, 1.0)
        } else {
            ((sxf + one_minus_s) * v).clamp(0.0, 1.0)
        };
        let p = (one_minus_s * v).clamp(0.0, 1.0);
        match i {
            0 => [v, t, p],
            1 => [q, v, p],
            2 => [p, v, t],
            3 => [p, q, v],
            4 => [t, p, v],
            _ => [v, p, q],
        }
    }

    /// Runs `ops` one at a time through the references.
    fn reference(rgb: &mut [u8], ops: &[Adjust]) {
        for op in ops {
            match *op {
                Adjust::Brightness(f) => brightness(rgb, f),
                Adjust::Contrast(f) => contrast(rgb, f),
                Adjust::Saturation(f) => saturation(rgb, f),
                Adjust::Hue(f) => hue(rgb, f, false),
                Adjust::HueV1(f) => hue(rgb, f, true),
                Adjust::Permute(p) => {
                    for px in rgb.chunks_exact_mut(3) {
                        let v = [px[0], px[1], px[2]];
                        px.copy_from_slice(&p.map(|c| v[usize::from(c)]));
                    }
                }
            }
        }
    }

    /// A deterministic photo-like test image: smooth gradients plus a little noise.
    fn image(pixels: usize, seed: u64) -> Vec<u8> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..pixels * 3)
            .map(|i| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let base = (i / 3 * 7 + (i % 3) * 50) % 256;
                (base as u64 + state % 9) as u8
            })
            .collect()
    }

    #[test]
    fn fused_brightness_contrast_saturation_and_permutation_equal_the_op_by_op_kernels_exactly() {
        use Adjust::*;
        let orders: [&[Adjust]; 8] = [
            &[Brightness(1.3), Contrast(0.7), Saturation(1.4)],
            &[Contrast(1.35), Saturation(0.6), Brightness(0.65)],
            &[Saturation(0.0), Contrast(0.0)],
            &[Contrast(1.2), Contrast(0.8), Brightness(1.1), Contrast(1.4)],
            &[Brightness(0.0)],
            &[Saturation(1.7)],
            &[Brightness(1.2), Contrast(1.3), Hue(0.1), Permute([2, 0, 1])],
            &[Saturation(0.8), Permute([1, 2, 0]), Contrast(0.6)],
        ];
        // Sizes below, at and across the block size, and a 224x224 image.
        for (k, pixels) in [1usize, 63, 64, 65, 1000, 224 * 224]
            .into_iter()
            .enumerate()
        {
            for (j, ops) in orders.iter().enumerate() {
                let input = image(pixels, (k * 10 + j) as u64);
                let (mut fused, mut expected) = (input.clone(), input);
                adjust(&mut fused, ops);
                reference(&mut expected, ops);
                assert_eq!(fused, expected, "{pixels} pixels, {ops:?}");
            }
        }
    }

    #[test]
    fn every_instruction_set_gives_the_same_bytes() {
        use Adjust::*;
        let ops = [Contrast(1.3), Hue(-0.21), Brightness(0.8), Saturation(1.6)];
        let input = image(224 * 224 + 5, 17);
        let mut portable = input.clone();
        adjust_any(&mut portable, &ops);
        #[cfg(target_arch = "x86_64")]
        for (feature, detected) in [
            ("avx2", std::arch::is_x86_feature_detected!("avx2")),
            ("avx512f", std::arch::is_x86_feature_detected!("avx512f")),
        ] {
            if !detected {
                continue;
            }
            let mut wide = input.clone();
            // SAFETY: the CPU has the feature (detected above).
            unsafe {
                match feature {
                    "avx2" => adjust_avx2(&mut wide, &ops),
                    _ => adjust_avx512(&mut wide, &ops),
                }
            }
            assert_eq!(wide, portable, "{feature}");
        }
    }

    #[test]
    fn fused_hue_is_torchvisions_hsv_round_trip_exactly() {
        // A grid of colours (86 x 52 x 37) and a photo-like image, against the op-by-op
        // reference.
        let grid: Vec<u8> = (0..=255u16)
            .step_by(3)
            .flat_map(|r| (0..=255u16).step_by(5).map(move |g| (r, g)))
            .flat_map(|(r, g)| (0..=255u16).step_by(7).flat_map(move |b| [r, g, b]))
            .map(|v| v as u8)
            .collect();
        let photo = image(50_000, 3);
        for input in [grid, photo] {
            for shift in [-0.5, -0.37, -0.1, -0.013, 0.0, 0.05, 0.25, 1.0 / 3.0, 0.5] {
                for v1 in [false, true] {
                    let op = if v1 {
                        Adjust::HueV1(shift)
                    } else {
                        Adjust::Hue(shift)
                    };
                    let (mut fused, mut expected) = (input.clone(), input.clone());
                    adjust(&mut fused, &[op]);
                    hue(&mut expected, shift, v1);
                    assert!(fused == expected, "{op:?}");
                }
            }
        }
    }

    #[test]
    fn hue_gives_torchvisions_v1_and_v2_bytes() {
        // torchvision 0.29's `adjust_hue` of a uint8 tensor of these pixels (v1, v2): values
        // within a hair of a whole level, where the two versions' arithmetic parts.
        let pixels = [
            [215u8, 125, 47],
            [227, 146, 54],
            [208, 211, 204],
            [199, 218, 222],
            [10, 200, 30],
            [255, 0, 128],
            [7, 7, 7],
        ];
        let input: Vec<u8> = pixels.concat();
        type Pixels = [[u8; 3]; 7];
        let cases: [(f64, Pixels, Pixels); 2] = [
            (
                0.1,
                [
                    [205, 215, 47],
                    [205, 227, 54],
                    [204, 211, 204],
                    [199, 204, 222],
                    [10, 200, 144],
                    [255, 25, 0],
                    [7, 7, 7],
                ],
                [
                    [205, 215, 47],
                    [205, 227, 54],
                    [204, 211, 205],
                    [199, 205, 222],
                    [10, 200, 144],
                    [255, 25, 0],
                    [7, 7, 7],
                ],
            ),
            (
                -0.37,
                [
                    [88, 47, 215],
                    [108, 54, 227],
                    [211, 204, 210],
                    [222, 221, 199],
                    [200, 10, 31],
                    [0, 184, 255],
                    [7, 7, 7],
                ],
                [
                    [88, 47, 215],
                    [108, 54, 227],
                    [211, 204, 210],
                    [222, 221, 199],
                    [200, 10, 31],
                    [0, 184, 255],
                    [7, 7, 7],
                ],
            ),
        ];
        for (shift, v1, v2) in cases {
            for (op, want) in [(Adjust::HueV1(shift), v1), (Adjust::Hue(shift), v2)] {
                let mut got = input.clone();
                adjust(&mut got, &[op]);
                assert_eq!(got, want.concat(), "{op:?}");
            }
        }
    }

    #[test]
    fn brightness_and_contrast_of_one_are_identity_and_zero_is_black_or_grey() {
        let img: Vec<u8> = (0..=255u8).flat_map(|v| [v, 255 - v, v / 2]).collect();
        let mut a = img.clone();
        adjust(&mut a, &[Adjust::Brightness(1.0)]);
        assert_eq!(a, img);
        adjust(&mut a, &[Adjust::Brightness(0.0)]);
        assert!(a.iter().all(|&v| v == 0));
        let mut c = img.clone();
        adjust(&mut c, &[Adjust::Contrast(1.0)]);
        assert_eq!(c, img);
        adjust(&mut c, &[Adjust::Contrast(0.0)]);
        assert!(c.windows(2).all(|w| w[0] == w[1]), "a flat grey image");
    }

    #[test]
    fn hue_shift_by_a_third_turn_rotates_primaries() {
        let mut red = vec![255u8, 0, 0];
        adjust(&mut red, &[Adjust::Hue(1.0 / 3.0)]);
        assert_eq!(red, [0, 255, 0]);
        let mut grey = vec![77u8, 77, 77];
        adjust(&mut grey, &[Adjust::Hue(0.25)]);
        assert_eq!(grey, [77, 77, 77]);
    }

    #[test]
    fn equalize_spreads_a_two_value_image_and_leaves_a_flat_one() {
        let mut flat = vec![9u8; 300];
        equalize(&mut flat);
        assert!(flat.iter().all(|&v| v == 9));
        let mut two: Vec<u8> = (0..3600).map(|i| if i < 1800 { 10 } else { 20 }).collect();
        equalize(&mut two);
        assert_eq!((two[0], two[3599]), (0, 255));
    }

    #[test]
    fn solarize_posterize_invert_autocontrast_do_what_they_say() {
        let mut v = vec![10u8, 128, 200];
        solarize(&mut v, 128.0);
        assert_eq!(v, [10, 127, 55]);
        posterize(&mut v, 2);
        assert_eq!(v, [0, 64, 0]);
        invert(&mut v);
        assert_eq!(v, [255, 191, 255]);
        let mut s: Vec<u8> = [50u8, 60, 70, 150, 160, 170].to_vec();
        autocontrast(&mut s, false);
        // torchvision gives 254 too: 100 / (100 * (1/255)) is 254.99998 in f32, truncated.
        assert_eq!(s, [0, 0, 0, 254, 254, 254]);
        // torchvision 0.29's values (v1, then v2): 71 of [0, 71] is 254 both ways, 230 of
        // [6, 230] is 255 under v1 (the reciprocal of 224 times 255, 255.00002 in f32) and 254
        // under v2 (254.99998), truncated.
        let mut s: Vec<u8> = [0u8, 6, 0, 71, 230, 0].to_vec();
        autocontrast(&mut s, true);
        assert_eq!(s, [0, 0, 0, 254, 255, 0]);
        let mut s: Vec<u8> = [0u8, 6, 0, 71, 230, 0].to_vec();
        autocontrast(&mut s, false);
        assert_eq!(s, [0, 0, 0, 254, 254, 0]);
    }
}
