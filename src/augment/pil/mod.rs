//! Pillow's arithmetic for the ops timm's auto-augment policies run on PIL images: the
//! `ImageEnhance` blends (brightness, colour, contrast, sharpness), `Image.transform(AFFINE)`
//! with its bilinear and bicubic filters, `ImageOps.autocontrast`, and timm's `solarize_add`.
//! Each reproduces Pillow's result byte for byte (the same float widths, the same truncations):
//! `python/tests/test_recipes.py` runs timm's own op functions (Pillow underneath) with the
//! loader's drawn parameters and compares every byte.
//!
//! Solarize, posterize, equalize and invert give the same bytes in Pillow and torchvision, so
//! timm's policies use the kernels of `colour.rs` for those.

use serde::{Deserialize, Serialize};

use super::error::PipelineError;
use super::pixel::PixelOp;
use super::spec::{coin, probability, OpKind, OpSpec};
use crate::rng::CounterRng;

pub use super::pixel::{PilEnhance as Enhance, PilFilter as Filter};

mod affine;
mod blend;
mod hsv;
pub(crate) mod resample;

pub(crate) use affine::{affine, nearest_affine, rotate_matrix, rotate_matrix_about, Affine};
use blend::Degenerate;
pub(crate) use hsv::adjust_hue;

/// Pillow's grey with probability `p`: `img.convert("L")` back in three channels, what
/// torchvision's `Grayscale(3)` does to a PIL image and DeiT III's and DINO's own grey
/// classes call (torchvision's tensor kernel rounds otherwise: `random_grayscale`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PilGrayscale {
    /// Probability. Default 1.
    #[serde(default = "super::spec::one")]
    pub p: f64,
}

impl OpSpec for PilGrayscale {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "pil_grayscale")
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            // `ImageEnhance.Color` at 0 is its degenerate: the `L` conversion, in RGB.
            out.push(PixelOp::PilEnhance {
                kind: Enhance::Color,
                factor: 0.0,
            });
        }
    }
}

/// Pillow's `img.filter(ImageFilter.GaussianBlur(radius))` with probability `p`, the radius
/// drawn uniformly from `radius` (DeiT III's and DINO's `GaussianBlur` classes: `p`, then
/// `random.uniform(radius_min, radius_max)`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PilGaussianBlur {
    /// `[min, max]` of the radius.
    pub radius: [f64; 2],
    /// Probability. Default 1.
    #[serde(default = "super::spec::one")]
    pub p: f64,
}

impl OpSpec for PilGaussianBlur {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "pil_gaussian_blur")?;
        let [lo, hi] = self.radius;
        if !(lo.is_finite() && hi.is_finite() && 0.0 <= lo && lo <= hi) {
            return Err(PipelineError::Parameter(format!(
                "pil_gaussian_blur radius {:?} must be [min, max] with 0 <= min <= max",
                self.radius
            )));
        }
        Ok(())
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            // Python's `random.uniform`, in f64.
            out.push(PixelOp::PilGaussianBlur(
                rng.uniform_in(self.radius[0], self.radius[1]),
            ));
        }
    }
}

/// Pillow's `L` conversion: ITU-R 601-2 luma in 16-bit fixed point, rounded.
#[inline]
fn luma(p: &[u8]) -> u8 {
    let l = u32::from(p[0]) * 19595 + u32::from(p[1]) * 38470 + u32::from(p[2]) * 7471 + 0x8000;
    (l >> 16) as u8
}

/// `Image.blend(image, other, alpha)` into `image` (timm's blended AugMix, per chain).
pub(crate) fn blend_into(image: &mut [u8], other: &[u8], alpha: f32) {
    blend::from(image, other, alpha);
}

/// `Image.blend(original, image, alpha)` into `image` (timm's AugMix's last step).
pub(crate) fn blend_images(original: &[u8], image: &mut [u8], alpha: f32) {
    blend::toward(image, Degenerate::Image(original), alpha);
}

/// `ImageEnhance.<kind>(image).enhance(factor)` on the `h`x`w` RGB8 image, in place. `scratch`
/// holds the degenerate image: the grey one for colour, the smoothed one for sharpness.
pub(crate) fn enhance(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    kind: Enhance,
    factor: f64,
    scratch: &mut Vec<u8>,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F (detected just above).
        return unsafe { enhance_avx512(rgb, h, w, kind, factor, scratch) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (detected just above).
        return unsafe { enhance_avx2(rgb, h, w, kind, factor, scratch) };
    }
    enhance_any(rgb, h, w, kind, factor, scratch);
}

/// [`enhance`] compiled for AVX-512: the colour and contrast blends sixteen lanes wide.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn enhance_avx512(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    kind: Enhance,
    factor: f64,
    scratch: &mut Vec<u8>,
) {
    enhance_any(rgb, h, w, kind, factor, scratch);
}

/// [`enhance`] compiled for AVX2: Pillow's smoothing filter runs eight f32 lanes wide (no FMA:
/// the same bytes); the blends dispatch for themselves.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn enhance_avx2(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    kind: Enhance,
    factor: f64,
    scratch: &mut Vec<u8>,
) {
    enhance_any(rgb, h, w, kind, factor, scratch);
}

#[inline(always)]
fn enhance_any(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    kind: Enhance,
    factor: f64,
    scratch: &mut Vec<u8>,
) {
    let alpha = factor as f32;
    match kind {
        Enhance::Brightness => blend::toward(rgb, Degenerate::Value(0), alpha),
        Enhance::Color => {
            // Each pixel toward its own grey, a block of pixels at a time as planes (lanes).
            for block in rgb.chunks_mut(3 * LANES) {
                let mut planes = planes_of(block);
                let grey = lumas(&planes);
                for plane in &mut planes {
                    for (x, &d) in plane.iter_mut().zip(&grey) {
                        *x = blend::blend_lane(d, *x, alpha);
                    }
                }
                interleave(&planes, block);
            }
        }
        Enhance::Contrast => {
            // `int(ImageStat.Stat(image.convert("L")).mean[0] + 0.5)`.
            let sum: u64 = rgb.chunks_exact(3).map(|p| u64::from(luma(p))).sum();
            let pixels = (rgb.len() / 3).max(1);
            let mean = (sum as f64 / pixels as f64 + 0.5) as u8;
            blend::toward(rgb, Degenerate::Value(mean), alpha);
        }
        Enhance::Sharpness => {
            smooth(rgb, h, w, scratch);
            blend::toward(rgb, Degenerate::Image(scratch), alpha);
        }
    }
}

/// Pixels a block of planes holds.
const LANES: usize = 64;

/// The pixels of `block` (at most [`LANES`] of them, interleaved RGB) as three planes, black
/// past its end.
#[inline(always)]
fn planes_of(block: &[u8]) -> [[u8; LANES]; 3] {
    let mut planes = [[0u8; LANES]; 3];
    for (k, p) in block.chunks_exact(3).enumerate() {
        planes[0][k] = p[0];
        planes[1][k] = p[1];
        planes[2][k] = p[2];
    }
    planes
}

/// The planes back into `block`'s pixels.
#[inline(always)]
fn interleave(planes: &[[u8; LANES]; 3], block: &mut [u8]) {
    for (k, p) in block.chunks_exact_mut(3).enumerate() {
        p.copy_from_slice(&[planes[0][k], planes[1][k], planes[2][k]]);
    }
}

/// [`luma`] of each pixel of the planes.
#[inline(always)]
fn lumas([r, g, b]: &[[u8; LANES]; 3]) -> [u8; LANES] {
    std::array::from_fn(|k| {
        let l = u32::from(r[k]) * 19595 + u32::from(g[k]) * 38470 + u32::from(b[k]) * 7471;
        ((l + 0x8000) >> 16) as u8
    })
}

/// `image.filter(ImageFilter.SMOOTH)` into `out`: the kernel `[1 1 1; 1 5 1; 1 1 1] / 13` in
/// f32, summed row below, row, row above as Pillow's 3x3 filter does, rounded half up; the
/// outermost rows and columns are copied.
#[inline(always)]
fn smooth(rgb: &[u8], h: usize, w: usize, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(rgb);
    if h < 3 || w < 3 {
        return;
    }
    let (k0, k1) = (1.0f32 / 13.0, 5.0f32 / 13.0);
    let row = w * 3;
    for y in 1..h - 1 {
        let (above, this, below) = (
            &rgb[(y - 1) * row..y * row],
            &rgb[y * row..(y + 1) * row],
            &rgb[(y + 1) * row..(y + 2) * row],
        );
        for i in 3..row - 3 {
            let three = |r: &[u8], mid: f32| {
                f32::from(r[i - 3]) * k0 + f32::from(r[i]) * mid + f32::from(r[i + 3]) * k0
            };
            let mut s = three(below, k0);
            s += three(this, k1);
            s += three(above, k0);
            out[y * row + i] = if s <= 0.0 {
                0
            } else if s >= 255.0 {
                255
            } else {
                (s + 0.5) as u8
            };
        }
    }
}

/// `ImageOps.autocontrast(image)` (no cutoff): each channel's darkest value to 0 and brightest
/// to 255 by a table built in f64 and truncated; a channel of one value is left alone.
pub(crate) fn autocontrast(rgb: &mut [u8]) {
    // Each channel's extremes: sixteen pixels at a time in 48 byte lanes (lane `i` holds
    // channel `i % 3`), then the lanes of each channel together.
    let (mut lo, mut hi) = ([255u8; 48], [0u8; 48]);
    for block in rgb.chunks(48) {
        for ((l, h), &v) in lo.iter_mut().zip(hi.iter_mut()).zip(block) {
            *l = (*l).min(v);
            *h = (*h).max(v);
        }
    }
    let mut lut = [[0u8; 256]; 3];
    for (c, table) in lut.iter_mut().enumerate() {
        let lo = (c..48).step_by(3).map(|i| lo[i]).min().unwrap_or(255);
        let hi = (c..48).step_by(3).map(|i| hi[i]).max().unwrap_or(0);
        for (i, t) in table.iter_mut().enumerate() {
            *t = if hi <= lo {
                i as u8
            } else {
                let scale = 255.0 / f64::from(hi - lo);
                let offset = -f64::from(lo) * scale;
                (i as f64 * scale + offset).clamp(0.0, 255.0) as u8
            };
        }
    }
    for p in rgb.chunks_exact_mut(3) {
        for (c, v) in p.iter_mut().enumerate() {
            *v = lut[c][usize::from(*v)];
        }
    }
}

/// timm's `solarize_add(add, thresh)`: values below `threshold` get `add` added (saturating).
pub(crate) fn solarize_add(rgb: &mut [u8], add: u8, threshold: u8) {
    for v in rgb {
        if *v < threshold {
            *v = v.saturating_add(add);
        }
    }
}

/// Pillow's `image.filter(ImageFilter.GaussianBlur(radius))` on the `h`x`w` RGB8 image, in
/// place: three box blurs per axis, each of a fractional radius chosen so that the three
/// together have the Gaussian's variance (Gwosdek et al., "Theoretical foundations of Gaussian
/// convolution by extended box filtering"), in Pillow's fixed-point arithmetic, bit for bit:
/// `radius` as the C `float` Pillow takes, the box radius from it in float, weights in 24-bit
/// fixed point, edges clamped to the border pixel. `scratch` holds a line and the transposed
/// image.
pub(crate) fn gaussian_blur(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    radius: f64,
    scratch: &mut Vec<u8>,
) {
    const PASSES: u32 = 3;
    let r = radius as f32;
    if r == 0.0 || h == 0 || w == 0 {
        return; // Pillow copies the image for (0, 0)
    }
    let box_radius = box_radius(r, PASSES);
    if box_radius == 0.0 {
        return;
    }
    // Pillow's horizontal passes run along the rows: here along the columns of the transposed
    // image, then its vertical passes along the columns of the image, so that each step of a
    // pass updates a whole row of running sums at once (vector lanes), with Pillow's per-line
    // arithmetic unchanged.
    let n = rgb.len();
    scratch.clear();
    scratch.resize(2 * n, 0);
    let (transposed, spare) = scratch.split_at_mut(n);
    let mut sums = vec![0u32; w.max(h) * 3];
    transpose(rgb, transposed, h, w);
    for _ in 0..PASSES {
        box_blur_columns(transposed, spare, &mut sums, h * 3, box_radius);
    }
    transpose(transposed, rgb, w, h);
    for _ in 0..PASSES {
        box_blur_columns(rgb, spare, &mut sums, w * 3, box_radius);
    }
}

/// Pillow's `_gaussian_blur_radius`: the fractional box radius of one of `passes` box blurs
/// that together blur as a Gaussian of standard deviation `radius`, in Pillow's mix of float
/// and double arithmetic.
fn box_radius(radius: f32, passes: u32) -> f32 {
    let sigma2: f32 = radius * radius / passes as f32;
    let big_l: f32 = (12.0 * f64::from(sigma2) + 1.0).sqrt() as f32;
    let l: f32 = ((f64::from(big_l) - 1.0) / 2.0).floor() as f32;
    let mut a: f32 = (2.0 * l + 1.0) * (l * (l + 1.0) - 3.0 * sigma2);
    a /= 6.0 * (sigma2 - (l + 1.0) * (l + 1.0));
    l + a
}

/// `src` (`h` rows of `w` RGB pixels) transposed into `dst` (`w` rows of `h`).
fn transpose(src: &[u8], dst: &mut [u8], h: usize, w: usize) {
    for y in 0..h {
        for x in 0..w {
            let (s, d) = ((y * w + x) * 3, (x * h + y) * 3);
            dst[d..d + 3].copy_from_slice(&src[s..s + 3]);
        }
    }
}

/// One pass of Pillow's `ImagingLineBoxBlur` along every column of `image` (rows of `len`
/// bytes; each column of bytes is one line of one channel), in place (`out`: as large as
/// `image`; `sums`: at least `len`): each pixel the mean of the `2 * radius + 1` around it
/// plus the fractional weight of the two just beyond, the line's ends repeated outward, in u32
/// arithmetic that wraps as Pillow's does, rounded from 24 fractional bits.
fn box_blur_columns(image: &mut [u8], out: &mut [u8], sums: &mut [u32], len: usize, radius: f32) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        unsafe { box_blur_columns_avx2(image, out, sums, len, radius) };
        return;
    }
    box_blur_columns_any(image, out, sums, len, radius);
}

/// [`box_blur_columns`] built for AVX2 (eight u32 lanes, `vpmulld`); the same operations.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn box_blur_columns_avx2(
    image: &mut [u8],
    out: &mut [u8],
    sums: &mut [u32],
    len: usize,
    radius: f32,
) {
    box_blur_columns_any(image, out, sums, len, radius);
}

#[inline(always)]
fn box_blur_columns_any(
    image: &mut [u8],
    out: &mut [u8],
    sums: &mut [u32],
    len: usize,
    radius_f: f32,
) {
    let n = (image.len() / len) as i64;
    let (image, out, sums) = (
        &mut image[..n as usize * len],
        &mut out[..n as usize * len],
        &mut sums[..len],
    );
    let radius = radius_f as i64;
    let ww = (16_777_216.0f32 / (radius_f * 2.0 + 1.0)) as u32;
    let fw = (16_777_216u32.wrapping_sub(((radius * 2 + 1) as u32).wrapping_mul(ww))) / 2;
    let last = n - 1;
    let edge_a = (radius + 1).min(n);
    let edge_b = (n - radius - 1).max(0);
    let row = |i: i64| i as usize * len..(i as usize + 1) * len;
    for (s, &p) in sums.iter_mut().zip(&image[row(0)]) {
        *s = u32::from(p).wrapping_mul((radius + 1) as u32);
    }
    for x in 0..edge_a - 1 {
        for (s, &p) in sums.iter_mut().zip(&image[row(x)]) {
            *s = s.wrapping_add(u32::from(p));
        }
    }
    let times = (radius - edge_a + 1) as u32;
    for (s, &p) in sums.iter_mut().zip(&image[row(last)]) {
        *s = s.wrapping_add(u32::from(p).wrapping_mul(times));
    }
    for x in 0..n {
        // The line's positions that leave and enter the window, and the two just beyond it.
        let (sub, add, left, right) = if edge_a <= edge_b {
            if x < edge_a {
                (0, x + radius, 0, x + radius + 1)
            } else if x < edge_b {
                (x - radius - 1, x + radius, x - radius - 1, x + radius + 1)
            } else {
                (x - radius - 1, last, x - radius - 1, last)
            }
        } else if x < edge_b {
            (0, x + radius, 0, x + radius + 1)
        } else if x < edge_a {
            (0, last, 0, last)
        } else {
            (x - radius - 1, last, x - radius - 1, last)
        };
        let (sub, add) = (&image[row(sub)], &image[row(add)]);
        let (left, right) = (&image[row(left)], &image[row(right)]);
        let dst = &mut out[row(x)];
        for i in 0..len {
            let s = sums[i]
                .wrapping_add(u32::from(add[i]))
                .wrapping_sub(u32::from(sub[i]));
            sums[i] = s;
            let bulk = s
                .wrapping_mul(ww)
                .wrapping_add((u32::from(left[i]) + u32::from(right[i])).wrapping_mul(fw));
            dst[i] = (bulk.wrapping_add(1 << 23) >> 24) as u8;
        }
    }
    image.copy_from_slice(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pillow's `ImagingLineBoxBlur` on one line of RGB pixels, one channel at a time (the
    /// line-by-line form the column form must equal), in place (`out` is a line of
    /// scratch): each pixel the mean of the `2 * radius + 1` around it plus the fractional weight
    /// of the two just beyond, the line's ends repeated outward, in u32 arithmetic that wraps as
    /// Pillow's does, rounded from 24 fractional bits.
    fn box_blur_line(line: &mut [u8], out: &mut [u8], radius_f: f32) {
        let n = line.len() / 3;
        let radius = radius_f as i64;
        let ww = (16_777_216.0f32 / (radius_f * 2.0 + 1.0)) as u32;
        let fw = (16_777_216u32.wrapping_sub(((radius * 2 + 1) as u32).wrapping_mul(ww))) / 2;
        let last = n as i64 - 1;
        let edge_a = (radius + 1).min(n as i64);
        let edge_b = (n as i64 - radius - 1).max(0);
        for c in 0..3 {
            let px = |i: i64| u32::from(line[i as usize * 3 + c]);
            let mut acc: u32 = px(0).wrapping_mul((radius + 1) as u32);
            for x in 0..edge_a - 1 {
                acc = acc.wrapping_add(px(x));
            }
            acc = acc.wrapping_add(px(last).wrapping_mul((radius - edge_a + 1) as u32));
            let mut step = |x: i64, sub: i64, add: i64, left: i64, right: i64| {
                acc = acc.wrapping_add(px(add)).wrapping_sub(px(sub));
                let bulk = acc
                    .wrapping_mul(ww)
                    .wrapping_add((px(left) + px(right)).wrapping_mul(fw));
                out[x as usize * 3 + c] = (bulk.wrapping_add(1 << 23) >> 24) as u8;
            };
            if edge_a <= edge_b {
                for x in 0..edge_a {
                    step(x, 0, x + radius, 0, x + radius + 1);
                }
                for x in edge_a..edge_b {
                    step(
                        x,
                        x - radius - 1,
                        x + radius,
                        x - radius - 1,
                        x + radius + 1,
                    );
                }
                for x in edge_b..=last {
                    step(x, x - radius - 1, last, x - radius - 1, last);
                }
            } else {
                for x in 0..edge_b {
                    step(x, 0, x + radius, 0, x + radius + 1);
                }
                for x in edge_b..edge_a {
                    step(x, 0, last, 0, last);
                }
                for x in edge_a..=last {
                    step(x, x - radius - 1, last, x - radius - 1, last);
                }
            }
        }
        line.copy_from_slice(out);
    }

    /// Pillow's blur line by line: rows, then the transposed image's rows.
    fn blur_by_lines(rgb: &mut [u8], h: usize, w: usize, radius: f32) {
        let mut line = vec![0u8; w.max(h) * 3];
        for _ in 0..3 {
            for row in rgb.chunks_exact_mut(w * 3) {
                box_blur_line(row, &mut line[..w * 3], radius);
            }
        }
        let mut t = vec![0u8; rgb.len()];
        transpose(rgb, &mut t, h, w);
        for _ in 0..3 {
            for column in t.chunks_exact_mut(h * 3) {
                box_blur_line(column, &mut line[..h * 3], radius);
            }
        }
        transpose(&t, rgb, w, h);
    }

    #[test]
    fn column_box_blur_equals_pillows_line_by_line_blur() {
        let mut scratch = Vec::new();
        for (h, w) in [(1, 1), (2, 9), (7, 3), (24, 31), (96, 96)] {
            let img: Vec<u8> = (0..h * w * 3)
                .map(|i| ((i * 7919 + i / 5 * 31) % 256) as u8)
                .collect();
            for radius in [0.1f64, 0.4, 1.0, 1.7, 2.0, 5.5, 40.0] {
                let mut want = img.clone();
                let r = box_radius(radius as f32, 3);
                if r > 0.0 {
                    blur_by_lines(&mut want, h, w, r);
                }
                let mut got = img.clone();
                gaussian_blur(&mut got, h, w, radius, &mut scratch);
                assert_eq!(got, want, "{h}x{w} radius {radius}");
            }
        }
    }

    #[test]
    fn luma_is_pillows_fixed_point_rounding() {
        assert_eq!(luma(&[255, 255, 255]), 255);
        assert_eq!(luma(&[0, 0, 0]), 0);
        // 0.299 * 100 + 0.587 * 50 + 0.114 * 200 = 82.15
        assert_eq!(luma(&[100, 50, 200]), 82);
    }

    #[test]
    fn enhance_at_one_is_identity_and_brightness_zero_is_black() {
        let img: Vec<u8> = (0..5 * 7 * 3).map(|i| (i * 37 % 256) as u8).collect();
        let mut s = Vec::new();
        for kind in [
            Enhance::Brightness,
            Enhance::Color,
            Enhance::Contrast,
            Enhance::Sharpness,
        ] {
            let mut x = img.clone();
            enhance(&mut x, 5, 7, kind, 1.0, &mut s);
            assert_eq!(x, img, "{kind:?}");
        }
        let mut x = img.clone();
        enhance(&mut x, 5, 7, Enhance::Brightness, 0.0, &mut s);
        assert!(x.iter().all(|&v| v == 0));
    }

    #[test]
    fn autocontrast_stretches_each_channel_and_solarize_add_saturates() {
        let mut x = vec![10, 7, 0, 20, 7, 255, 30, 7, 128];
        autocontrast(&mut x);
        assert_eq!(x, vec![0, 7, 0, 127, 7, 255, 255, 7, 128]);
        let mut y = vec![0, 100, 127, 128, 200, 255];
        solarize_add(&mut y, 110, 128);
        assert_eq!(y, vec![110, 210, 237, 128, 200, 255]);
    }
}
