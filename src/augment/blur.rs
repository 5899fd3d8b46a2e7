//! Convolutions: `GaussianBlur` and `RandomAdjustSharpness`, their specs and their kernels on an
//! interleaved RGB8 image, with torchvision's tensor kernels' arithmetic (f32, rounded half to
//! even, then truncated to bytes). The blur gives torch's bytes exactly: its kernel is built as
//! v1's or v2's code builds it in torch's f32 ([`super::torch_f32`]), and each value is
//! the 2D convolution torch runs on the CPU (oneDNN's depthwise kernel: row by row, tap by tap,
//! one fused multiply-add each), computed that way wherever the fast separable pass lands too
//! near a half to tell the rounding.

use serde::{Deserialize, Serialize};

use super::error::PipelineError;
use super::pixel::{PilEnhance, PixelOp, Scratch};
use super::spec::{coin, half, linspace_f32, probability, torch_uniform, OpKind, OpSpec};
use super::torch_f32;
use crate::rng::CounterRng;

/// `GaussianBlur(kernel_size, sigma)`: sigma drawn uniformly from the range per sample.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GaussianBlur {
    /// `[x, y]`, odd.
    pub kernel_size: [u32; 2],
    /// Sigma range. Default `[0.1, 2.0]`.
    #[serde(default = "default_sigma")]
    pub sigma: [f64; 2],
    /// torchvision v1's kernel (`transforms.GaussianBlur`: `exp(-x^2 / 2 sigma^2)` over its sum)
    /// rather than v2's (a softmax over a rescaled range); equal in exact arithmetic, an ulp
    /// apart in f32. Default false.
    #[serde(default)]
    pub v1: bool,
}

fn default_sigma() -> [f64; 2] {
    [0.1, 2.0]
}

impl OpSpec for GaussianBlur {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        let Self {
            kernel_size, sigma, ..
        } = *self;
        if kernel_size.iter().any(|&k| k == 0 || k % 2 == 0 || k > 255) {
            return Err(PipelineError::Parameter(format!(
                "gaussian_blur kernel_size {kernel_size:?} must be odd and positive"
            )));
        }
        if !(0.0 < sigma[0] && sigma[0] <= sigma[1] && sigma[1].is_finite()) {
            return Err(PipelineError::Parameter(format!(
                "gaussian_blur sigma {sigma:?} must satisfy 0 < min <= max"
            )));
        }
        Ok(())
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        let s = torch_uniform(rng, self.sigma);
        out.push(PixelOp::GaussianBlur {
            kernel: self.kernel_size,
            sigma: [s, s],
            v1: self.v1,
        });
    }
}

/// `RandomAdjustSharpness(sharpness_factor, p)`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomAdjustSharpness {
    /// The factor (0 blurs, 1 keeps, 2 sharpens).
    pub sharpness_factor: f64,
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
    /// The image is a PIL image: Pillow's `ImageEnhance.Sharpness` (torch's arithmetic is a
    /// level off in rare values). Default false.
    #[serde(default)]
    pub pil: bool,
}

impl OpSpec for RandomAdjustSharpness {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "random_adjust_sharpness")?;
        let f = self.sharpness_factor;
        if !(f >= 0.0 && f.is_finite()) {
            return Err(PipelineError::Parameter(format!(
                "random_adjust_sharpness factor {f} must be non-negative"
            )));
        }
        Ok(())
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            out.push(if self.pil {
                PixelOp::PilEnhance {
                    kind: PilEnhance::Sharpness,
                    factor: self.sharpness_factor,
                }
            } else {
                PixelOp::Sharpness(self.sharpness_factor)
            });
        }
    }
}

/// torchvision's Gaussian kernel of `size` taps for `sigma`, as torch computes it in f32 on
/// `x = linspace(-r, r, size)`: v1's `exp(-0.5 (x / sigma)^2)` over its `sum()` (`r = (size -
/// 1) / 2`; torch's `exp` there is MKL's, correctly rounded but for about one value in a
/// hundred, which it rounds the other way: this takes the correctly rounded one), or v2's
/// `softmax(-(x / sigma)^2)` (`r = (size - 1) / (2 sqrt 2)`).
fn gaussian_kernel(size: usize, sigma: f64, v1: bool, out: &mut Vec<f32>) {
    let sigma = sigma as f32;
    out.clear();
    if v1 {
        let r = (size as f64 - 1.0) * 0.5;
        out.extend(linspace_f32(-r, r, size).map(|x| {
            let t = x / sigma;
            -0.5 * (t * t)
        }));
        torch_f32::torch_exp(out);
        let sum = torch_f32::tensor_sum(out);
        for v in out.iter_mut() {
            *v /= sum;
        }
    } else {
        let r = (size as f64 - 1.0) / (2.0 * std::f64::consts::SQRT_2);
        out.extend(linspace_f32(-r, r, size).map(|x| {
            let t = x / sigma;
            -(t * t)
        }));
        let max = out.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        for v in out.iter_mut() {
            *v = torch_f32::vector_expf(*v - max);
        }
        let inverse = 1.0 / torch_f32::softmax_sum(out, torch_f32::vector_lanes());
        for v in out.iter_mut() {
            *v *= inverse;
        }
    }
}

/// Python's reflect padding index (`torch.nn.functional.pad(mode="reflect")`), for offsets
/// up to a few widths out.
fn reflect(i: isize, n: usize) -> usize {
    let n = n as isize;
    if n == 1 {
        return 0;
    }
    let period = 2 * (n - 1);
    let m = i.rem_euclid(period);
    (if m < n { m } else { period - m }) as usize
}

/// `gaussian_blur(kernel_size=[kx, ky], sigma=[sx, sy])`, reflect-padded, with v1's kernel
/// or v2's.
pub(crate) fn gaussian_blur(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    kernel: [u32; 2],
    sigma: [f64; 2],
    v1: bool,
    s: &mut Scratch,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA (detected just above).
        return unsafe { gaussian_blur_avx2(rgb, h, w, kernel, sigma, v1, s) };
    }
    gaussian_blur_any(rgb, h, w, kernel, sigma, v1, s);
}

/// [`gaussian_blur`] built for AVX2 and FMA: rounding inline (SSE4.1) instead of a libm call
/// per value, wider vectors, and the exact pass's fused multiply-adds one instruction each
/// (Rust fuses only where the code asks, so the bytes are the baseline's).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn gaussian_blur_avx2(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    kernel: [u32; 2],
    sigma: [f64; 2],
    v1: bool,
    s: &mut Scratch,
) {
    gaussian_blur_any(rgb, h, w, kernel, sigma, v1, s);
}

#[inline(always)]
fn gaussian_blur_any(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    kernel: [u32; 2],
    sigma: [f64; 2],
    v1: bool,
    s: &mut Scratch,
) {
    let (kx, ky) = (kernel[0] as usize, kernel[1] as usize);
    let (mut wx, mut wy) = (Vec::new(), Vec::new());
    gaussian_kernel(kx, sigma[0], v1, &mut wx);
    gaussian_kernel(ky, sigma[1], v1, &mut wy);
    // torch's 2D kernel, `mm(wy[:, None], wx[None, :])`: one f32 product per tap.
    let taps: Vec<f32> = wy
        .iter()
        .flat_map(|&a| wx.iter().map(move |&b| a * b))
        .collect();
    let row_len = w * 3;
    let Scratch {
        floats: rows,
        bytes: source,
        ..
    } = s;
    source.clear();
    source.extend_from_slice(rgb);
    // Rows first: each reflect-padded into f32, every value a sum of kx taps three apart.
    let rx = kx / 2;
    let mut padded = Vec::with_capacity((w + 2 * rx) * 3);
    rows.clear();
    rows.resize(h * row_len, 0.0);
    for (src, out) in source
        .chunks_exact(row_len)
        .zip(rows.chunks_exact_mut(row_len))
    {
        padded.clear();
        for i in 0..w + 2 * rx {
            let sx = reflect(i as isize - rx as isize, w);
            padded.extend(src[sx * 3..][..3].iter().map(|&b| f32::from(b)));
        }
        for (k, &wk) in wx.iter().enumerate() {
            for (o, &p) in out.iter_mut().zip(&padded[k * 3..][..row_len]) {
                *o += wk * p;
            }
        }
    }
    // Then columns, rounded to bytes; a value whose separable sum lies too near a half to
    // tell which way torch's rounds is computed as torch computes it.
    let ry = (ky / 2) as isize;
    let mut acc = vec![0f32; row_len];
    for y in 0..h {
        acc.fill(0.0);
        for (k, &wk) in wy.iter().enumerate() {
            let sy = reflect(y as isize + k as isize - ry, h);
            for (a, &r) in acc.iter_mut().zip(&rows[sy * row_len..][..row_len]) {
                *a += wk * r;
            }
        }
        for (i, &v) in acc.iter().enumerate() {
            let v = if (v - v.floor() - 0.5).abs() <= margin(v, kx, ky) {
                torch_value(source, (h, w), (y, i / 3, i % 3), (kx, ky), &taps)
            } else {
                v
            };
            rgb[y * row_len + i] = v.round_ties_even().clamp(0.0, 255.0) as u8;
        }
    }
}

/// How far the separable value `v` can be from torch's for the same pixel. Every f32 rounding
/// moves a sum by at most half an ulp of its result: torch makes `kx ky` of them, each on a
/// partial sum no larger than its final value (the taps and pixels are non-negative, so the
/// sums only grow), and the separable passes `2 (kx + ky)` on sums under 256; rounding the 2D
/// taps moves the exact value by under 2^-15.
#[inline(always)]
fn margin(v: f32, kx: usize, ky: usize) -> f32 {
    // Half an ulp of any f32 below the power of two above v (and at least 1).
    let half_ulp =
        f32::from_bits((v.max(1.0).to_bits() & 0x7f80_0000) + (1 << 23)) * 2f32.powi(-24);
    (kx * ky) as f32 * half_ulp + (2 * (kx + ky) + 4) as f32 * 2f32.powi(-17) + 2f32.powi(-15)
}

/// One blurred value as torch's CPU convolution computes it (oneDNN's depthwise kernel over
/// the reflect-padded image): the taps row by row, left to right, each one fused
/// multiply-add into an f32 sum from zero.
#[inline(always)]
fn torch_value(
    source: &[u8],
    (h, w): (usize, usize),
    (y, x, c): (usize, usize, usize),
    (kx, ky): (usize, usize),
    taps: &[f32],
) -> f32 {
    let (rx, ry) = ((kx / 2) as isize, (ky / 2) as isize);
    let mut columns = [0usize; 256];
    for (j, at) in columns[..kx].iter_mut().enumerate() {
        *at = reflect(x as isize + j as isize - rx, w) * 3 + c;
    }
    let mut acc = 0f32;
    for (i, row_taps) in taps.chunks_exact(kx).enumerate() {
        let row = &source[reflect(y as isize + i as isize - ry, h) * w * 3..][..w * 3];
        for (&at, &tap) in columns[..kx].iter().zip(row_taps) {
            acc = f32::from(row[at]).mul_add(tap, acc);
        }
    }
    acc
}

/// `adjust_sharpness(factor)`: blend with a 3x3 smoothing (1s around a 5, over 13) of the
/// interior; the one-pixel border is kept.
pub(crate) fn sharpness(rgb: &mut [u8], h: usize, w: usize, factor: f64, s: &mut Scratch) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (detected just above).
        return unsafe { sharpness_avx2(rgb, h, w, factor, s) };
    }
    sharpness_any(rgb, h, w, factor, s);
}

/// [`sharpness`] built for AVX2 (see [`gaussian_blur_avx2`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sharpness_avx2(rgb: &mut [u8], h: usize, w: usize, factor: f64, s: &mut Scratch) {
    sharpness_any(rgb, h, w, factor, s);
}

#[inline(always)]
fn sharpness_any(rgb: &mut [u8], h: usize, w: usize, factor: f64, s: &mut Scratch) {
    if h <= 2 || w <= 2 {
        return;
    }
    let (a, b) = ((1.0f64 / 13.0) as f32, (5.0f64 / 13.0) as f32);
    let alpha = (1.0 - factor) as f32;
    let src = &mut s.bytes;
    src.clear();
    src.extend_from_slice(&rgb[..h * w * 3]);
    let at = |y: usize, x: usize, c: usize| f32::from(src[(y * w + x) * 3 + c]);
    for y in 1..h - 1 {
        for x in 1..w - 1 {
            for c in 0..3 {
                let mut sum = 0.0f32;
                for dy in 0..3 {
                    for dx in 0..3 {
                        let k = if dy == 1 && dx == 1 { b } else { a };
                        sum += k * at(y + dy - 1, x + dx - 1, c);
                    }
                }
                let v = at(y, x, c);
                let blurred = sum.round_ties_even();
                let out = v + alpha * (blurred - v);
                rgb[(y * w + x) * 3 + c] = out.clamp(0.0, 255.0) as u8;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflect_padding_mirrors_without_repeating_the_edge() {
        let got: Vec<usize> = (-3..8).map(|i| reflect(i, 5)).collect();
        assert_eq!(got, [3, 2, 1, 0, 1, 2, 3, 4, 3, 2, 1]);
    }

    #[test]
    fn the_avx2_builds_give_the_baselines_bytes() {
        if !std::arch::is_x86_feature_detected!("avx2")
            || !std::arch::is_x86_feature_detected!("fma")
        {
            return;
        }
        let (h, w) = (37, 53);
        let img: Vec<u8> = (0..h * w * 3)
            .map(|i: usize| (i.wrapping_mul(2_654_435_761) >> 7) as u8)
            .collect();
        let mut s = Scratch::default();
        for v1 in [false, true] {
            let (mut a, mut b) = (img.clone(), img.clone());
            gaussian_blur_any(&mut a, h, w, [5, 3], [1.3, 0.7], v1, &mut s);
            // SAFETY: AVX2 and FMA were detected above.
            unsafe { gaussian_blur_avx2(&mut b, h, w, [5, 3], [1.3, 0.7], v1, &mut s) };
            assert_eq!(a, b);
        }
        for factor in [0.1, 1.7] {
            let (mut a, mut b) = (img.clone(), img.clone());
            sharpness_any(&mut a, h, w, factor, &mut s);
            // SAFETY: AVX2 was detected above.
            unsafe { sharpness_avx2(&mut b, h, w, factor, &mut s) };
            assert_eq!(a, b);
        }
    }

    #[test]
    fn a_blur_gives_torchs_bytes_where_the_separable_sums_round_the_other_way() {
        // Noise from an LCG, blurred by torchvision 0.29 (torch 2.15): `gaussian_blur(img, [5,
        // 5], [0.5, 0.5])` of the HWC bytes, v1's and v2's functions alike, hashed (FNV-1a).
        // A separable f32 pass with the same kernel rounds these four values the other way.
        let (h, w) = (97, 131);
        let img: Vec<u8> = (0..h * w * 3u64)
            .map(|i| ((i * 1_103_515_245 + 12_345) >> 16) as u8)
            .collect();
        let mut s = Scratch::default();
        for v1 in [false, true] {
            let mut out = img.clone();
            gaussian_blur(
                &mut out,
                h as usize,
                w as usize,
                [5, 5],
                [0.5, 0.5],
                v1,
                &mut s,
            );
            let at = |y: usize, x: usize, c: usize| out[(y * w as usize + x) * 3 + c];
            assert_eq!([at(0, 9, 2), at(0, 125, 0), at(96, 28, 0)], [137, 143, 101]);
            let fnv = out.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
            assert_eq!(fnv, 0x5283_cfaa_3689_9f3f, "v1 {v1}");
        }
    }

    #[test]
    fn blur_and_sharpness_keep_a_flat_image_flat() {
        let mut s = Scratch::default();
        let mut img = vec![93u8; 9 * 7 * 3];
        gaussian_blur(&mut img, 7, 9, [5, 3], [1.3, 0.7], false, &mut s);
        assert!(img.iter().all(|&v| v == 93));
        sharpness(&mut img, 7, 9, 1.9, &mut s);
        assert!(img.iter().all(|&v| v == 93));
    }

    #[test]
    fn gaussian_kernel_is_normalised_and_symmetric() {
        let mut k = Vec::new();
        for v1 in [false, true] {
            gaussian_kernel(7, 1.5, v1, &mut k);
            assert!((k.iter().sum::<f32>() - 1.0).abs() < 1e-6);
            assert_eq!(k[0], k[6]);
            assert!(k[3] > k[2] && k[2] > k[1]);
        }
    }
}
