//! Pillow's antialiased resize of an RGB image (`Image.resize` with `BILINEAR`, `BICUBIC`,
//! `LANCZOS`, `BOX` or `HAMMING`, what torchvision's `Resize`, `RandomResizedCrop` and `RandomResize` do to a PIL
//! image),
//! byte for byte: each output pixel's taps and weights computed as Pillow's
//! `precompute_coeffs` does (in f64, normalised, then rounded to 22-bit fixed point), a pass
//! across the rows the second pass reads, rounded to bytes, then a pass down the columns.
//! fast_image_resize's 16-bit weights (torch's tensor kernel's) give Pillow's bytes but for
//! one level in up to a few percent of values.
//!
//! The pass across runs on a transposed copy of the rows it reads, so that both passes sum
//! whole contiguous lines with one weight per line (eight lanes at a time where the compiler
//! has AVX2); the sums are exact integers, so the order of summation changes nothing.

use std::sync::atomic::{AtomicBool, Ordering};

use super::super::error::AugmentError;
use super::super::geometry::CropBox;

/// Pillow's `PRECISION_BITS` for 8-bit images.
const BITS: u32 = 22;

/// Pillow's antialiasing filters torchvision uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// `bilinear_filter`: a triangle of support 1.
    Bilinear,
    /// `bicubic_filter`: Keys' cubic with `a = -0.5`, support 2.
    Bicubic,
    /// `lanczos_filter`: the sinc windowed by a sinc three times as wide, support 3 (Pillow's
    /// only; torch's tensor resizes have no Lanczos).
    Lanczos,
    /// `box_filter`: 1 over `(-0.5, 0.5]`, support 0.5 (each output pixel the mean of the
    /// source pixels it covers, when shrinking; Pillow's only).
    Box,
    /// `hamming_filter`: the sinc windowed by a Hamming window, support 1 (Pillow's only).
    Hamming,
}

/// Whose fixed-point weights a resize takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Weights {
    /// Pillow's: 22 bits, its passes in the installed Pillow's order ([`set_pass_order`]).
    Pillow,
    /// torch's uint8 kernel's (torchvision v2's resize of a uint8 tensor): 16-bit weights
    /// with as many fraction bits (at most 22) as keep the whole resize's largest weight under
    /// 2^15 (the window's own largest may be smaller), the pass across first.
    Torch,
    /// torch's uint8 kernel without antialiasing (v2's `Resize(antialias=False)` of a uint8
    /// tensor, bilinear only): two taps around each output pixel's centre, never widened,
    /// the precision and passes as [`Weights::Torch`].
    TorchTwoTap,
}

impl Kernel {
    /// The filter's reach at scale 1, in source pixels (half torch's `interp_size`).
    pub(crate) fn support(self) -> f64 {
        match self {
            Self::Bilinear => 1.0,
            Self::Bicubic => 2.0,
            Self::Lanczos => 3.0,
            Self::Box => 0.5,
            Self::Hamming => 1.0,
        }
    }

    /// The filter at `x`, written as `weights`' owner writes it (the cubic's outer lobe in
    /// two groupings that can differ in the last bit).
    fn weight(self, weights: Weights, x: f64) -> f64 {
        const A: f64 = -0.5;
        if self == Self::Lanczos {
            // Pillow's window is `[-3, 3)`, asymmetric at its ends, where the sine of a
            // multiple of pi is not quite 0 in f64.
            return if (-3.0..3.0).contains(&x) {
                sinc(x) * sinc(x / 3.0)
            } else {
                0.0
            };
        }
        if self == Self::Box {
            return if x > -0.5 && x <= 0.5 { 1.0 } else { 0.0 };
        }
        let x = x.abs();
        match self {
            Self::Bilinear if x < 1.0 => 1.0 - x,
            Self::Bicubic if x < 1.0 => ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0,
            Self::Bicubic if x < 2.0 => match weights {
                Weights::Pillow => (((x - 5.0) * x + 8.0) * x - 4.0) * A,
                Weights::Torch | Weights::TorchTwoTap => {
                    ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A
                }
            },
            // Pillow's window constants are C floats (`0.54f`, `0.46f`), widened.
            Self::Hamming if x == 0.0 => 1.0,
            Self::Hamming if x < 1.0 => {
                let x = x * std::f64::consts::PI;
                x.sin() / x * (f64::from(0.54f32) + f64::from(0.46f32) * x.cos())
            }
            _ => 0.0,
        }
    }
}

/// Pillow's `sinc_filter`: `sin(pi x) / (pi x)`, 1 at 0.
fn sinc(x: f64) -> f64 {
    if x == 0.0 {
        return 1.0;
    }
    let x = x * std::f64::consts::PI;
    x.sin() / x
}

/// One axis's taps: for each output position, its first source position and its weights
/// (`ksize` slots, the unused ones zero), `bits` fraction bits.
#[derive(Debug, Default, PartialEq)]
struct Axis {
    first: Vec<usize>,
    count: Vec<usize>,
    ksize: usize,
    weights: Vec<i32>,
    bits: u32,
}

impl Axis {
    /// Pillow's `precompute_coeffs` and `normalize_coeffs_8bpc` (or torch's
    /// `_compute_index_ranges_int16_weights`, which computes the same f64 weights) for output
    /// positions `offset..offset + out` of a resize of `len` source positions to `full` (a
    /// window of a resized image is those positions of the whole resize, as both compute them).
    #[cfg(test)]
    fn new(kernel: Kernel, len: usize, full: usize, offset: usize, out: usize) -> Self {
        let mut axis = Self::default();
        axis.fill(
            (kernel, Weights::Pillow),
            (len, full, offset, out),
            &mut Vec::new(),
        );
        axis
    }

    /// [`Axis::new`] with either owner's weights into `self`, its buffers (and `k`, the f64
    /// weights of one position) kept between samples.
    fn fill(
        &mut self,
        (kernel, owner): (Kernel, Weights),
        (len, full, offset, out): (usize, usize, usize, usize),
        k: &mut Vec<f64>,
    ) {
        let scale = len as f64 / full as f64;
        let filterscale = scale.max(1.0);
        let support = kernel.support() * filterscale;
        let two_tap = owner == Weights::TorchTwoTap;
        let ksize = if two_tap {
            2
        } else {
            support.ceil() as usize * 2 + 1
        };
        k.resize(ksize, 0.0);
        // Output position `i`'s first tap and tap count, its normalised weights in `k`.
        let position = |i: usize, k: &mut [f64]| {
            if two_tap {
                // The centre `(i + 0.5) * scale - 0.5`, at least 0; the pixel at or before it
                // and the next, the last pixel alone past the image's end.
                let centre = ((i as f64 + 0.5) * scale - 0.5).max(0.0);
                let first = (centre.floor() as usize).min(len - 1);
                if first == len - 1 {
                    k[0] = 1.0;
                    return (first, 1);
                }
                let lambda = centre - first as f64;
                (k[0], k[1]) = (1.0 - lambda, lambda);
                return (first, 2);
            }
            let center = (i as f64 + 0.5) * scale;
            let ss = 1.0 / filterscale;
            // C's `(int)` casts: truncation toward zero, then clamped to the image.
            let xmin = ((center - support + 0.5) as i64).max(0);
            let xmax = ((center + support + 0.5) as i64).min(len as i64) - xmin;
            let n = (xmax.max(0) as usize).min(ksize);
            let mut ww = 0.0;
            for (x, w) in k[..n].iter_mut().enumerate() {
                *w = kernel.weight(owner, ((x as i64 + xmin) as f64 - center + 0.5) * ss);
                ww += *w;
            }
            if ww != 0.0 {
                k[..n].iter_mut().for_each(|w| *w /= ww);
            }
            (xmin as usize, n)
        };
        self.bits = match owner {
            Weights::Pillow => BITS,
            Weights::Torch | Weights::TorchTwoTap => {
                // The largest weight of the whole resize sets the precision.
                let mut largest = 0.0f64;
                for i in 0..full {
                    let (_, n) = position(i, k);
                    largest = k[..n].iter().fold(largest, |m, &w| m.max(w));
                }
                (0..BITS)
                    .find(|b| (0.5 + largest * f64::from(1u32 << (b + 1))) as i32 >= 1 << 15)
                    .unwrap_or(BITS)
            }
        };
        self.ksize = ksize;
        self.first.clear();
        self.count.clear();
        self.weights.clear();
        self.weights.resize(out * ksize, 0);
        for (i, slots) in self.weights.chunks_exact_mut(ksize).enumerate() {
            let (xmin, n) = position(offset + i, k);
            for (w, slot) in k[..n].iter().zip(slots.iter_mut()) {
                let scaled = w * f64::from(1u32 << self.bits);
                *slot = if *w < 0.0 {
                    (-0.5 + scaled) as i32
                } else {
                    (0.5 + scaled) as i32
                };
            }
            self.first.push(xmin);
            self.count.push(n);
        }
    }

    /// The source positions the taps read: `start..end`.
    fn span(&self) -> (usize, usize) {
        taps_span(&self.first, &self.count)
    }
}

/// How one axis of a window maps to a resize: `(len, full, offset, base)` (see [`axis_of`]).
pub(crate) type AxisMap = (usize, usize, usize, usize);

/// How one axis of a window maps to a resize: `(len, full, offset, base)`: a resize of `len`
/// source positions starting at `base` to `full`, of which the window is positions
/// `offset..offset + out`. A view is cut out first (its own edges bound the taps); any other
/// window is a part of the whole image's resize, whose size and the window's offset in it
/// (whole numbers) are recovered from the window, or `None` when they do not reproduce it.
pub(crate) fn axis_of(view: bool, start: f64, len: f64, out: u32, limit: u32) -> Option<AxisMap> {
    if view {
        return Some((len as usize, out as usize, 0, start as usize));
    }
    let full = (f64::from(limit) * f64::from(out) / len).round();
    let offset = (start * full / f64::from(limit)).round();
    let scale = f64::from(limit) / full;
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * f64::from(limit).max(1.0);
    (full >= 1.0 && close(offset * scale, start) && close(f64::from(out) * scale, len)).then_some((
        limit as usize,
        full as usize,
        offset as usize,
        0,
    ))
}

/// Both axes of a window as [`axis_of`] maps them, `(x, y)`, once `src` (a `width`x`height`
/// RGB image) and the output (`out_len` values for `out_w`x`out_h`) are checked long enough and the resize's source
/// span inside the image; `None` for a window that is no part of a resize of the whole image.
///
/// # Errors
/// `src` or `out` is short, or the window reaches outside the image.
pub(crate) fn window_axes(
    src: &[u8],
    (width, height): (u32, u32),
    crop: &CropBox,
    (out_w, out_h): (u32, u32),
    out_len: usize,
) -> Result<Option<(AxisMap, AxisMap)>, AugmentError> {
    let (ow, oh) = (out_w as usize, out_h as usize);
    if src.len() < width as usize * height as usize * 3 || out_len < ow * oh * 3 {
        return Err(AugmentError::CropOutside);
    }
    let (Some(xs), Some(ys)) = (
        axis_of(crop.view, crop.left, crop.width, out_w, width),
        axis_of(crop.view, crop.top, crop.height, out_h, height),
    ) else {
        return Ok(None);
    };
    if xs.3 + xs.0 > width as usize || ys.3 + ys.0 > height as usize {
        return Err(AugmentError::CropOutside);
    }
    Ok(Some((xs, ys)))
}

/// The source positions taps read, `start..end`, from each output position's first tap and
/// tap count.
pub(crate) fn taps_span(first: &[usize], count: &[usize]) -> (usize, usize) {
    let start = first.iter().copied().min().unwrap_or(0);
    let end = first
        .iter()
        .zip(count)
        .map(|(f, c)| f + c)
        .max()
        .unwrap_or(0);
    (start, end.max(start))
}

/// Which pass Pillow runs first when both axes change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassOrder {
    /// Across the rows first, always (Pillow up to 12).
    AcrossFirst,
    /// Down the columns first when the height shrinks by more than twice as many pixels as
    /// the width (`in_h - out_h > 2 * (in_w - out_w)`), else across first (Pillow 13).
    DownFirstWhenTaller,
}

/// The installed Pillow's pass order (set once by the Python package, which resizes a probe
/// image with it; Pillow 13's by default).
static DOWN_FIRST_WHEN_TALLER: AtomicBool = AtomicBool::new(true);

/// Makes Pillow's resizes (`Interpolation::PilBilinear`, `PilBicubic`, `PilLanczos`) run their passes in
/// `order`, the installed Pillow's.
pub fn set_pass_order(order: PassOrder) {
    DOWN_FIRST_WHEN_TALLER.store(order == PassOrder::DownFirstWhenTaller, Ordering::Relaxed);
}

/// Pillow's resize (or torch's uint8 one: `owner`) of `crop` of the `width`x`height` RGB image
/// `src` to `out_w`x`out_h` into `out`; `scratch` holds the passes' lines. `None` when the
/// window is not one such a resize gives (a fractional window that is not a part of a resize
/// of the whole image).
///
/// # Errors
/// `src` is shorter than the image, or the window reaches outside it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn resize(
    src: &[u8],
    width: u32,
    height: u32,
    crop: &CropBox,
    (out_w, out_h): (u32, u32),
    (kernel, owner): (Kernel, Weights),
    scratch: &mut Scratch,
    out: &mut [u8],
) -> Result<Option<()>, AugmentError> {
    let (ow, oh) = (out_w as usize, out_h as usize);
    let Some((xs, ys)) = window_axes(src, (width, height), crop, (out_w, out_h), out.len())? else {
        return Ok(None);
    };
    let Scratch {
        across: (across, swept),
        down: (down, lines),
        transposed,
        sums,
        weights,
    } = scratch;
    across.fill((kernel, owner), (xs.0, xs.1, xs.2, ow), weights);
    down.fill((kernel, owner), (ys.0, ys.1, ys.2, oh), weights);
    let (across, down) = (&*across, &*down);
    // The rows and columns of the image the taps read.
    let (y0, y1) = down.span();
    let (x0, x1) = across.span();
    let (rows, cols) = (y1 - y0, x1 - x0);
    let stride = width as usize * 3;
    let region = (ys.3 + y0) * stride + (xs.3 + x0) * 3;
    // Pillow 13 decides on the whole resize's sizes (the image's, the resize's).
    let shrink_y = ys.0 as i64 - ys.1 as i64;
    let shrink_x = xs.0 as i64 - xs.1 as i64;
    let down_first = owner == Weights::Pillow
        && DOWN_FIRST_WHEN_TALLER.load(Ordering::Relaxed)
        && shrink_y > 0
        && shrink_y > 2 * shrink_x;
    if down_first {
        // Down the region's columns into `oh` lines of `cols` pixels, then across them.
        let d = sized(lines, oh * cols * 3);
        let region_rows = Lines {
            bytes: &src[region..],
            stride,
            len: cols * 3,
        };
        sum_lines(region_rows, down, y0, d.chunks_exact_mut(cols * 3), sums);
        let d = Lines {
            bytes: lines,
            stride: cols * 3,
            len: cols * 3,
        };
        across_lines(
            d,
            oh,
            across,
            x0,
            (transposed, swept, sums),
            &mut out[..oh * ow * 3],
        );
    } else {
        // Across the rows the pass down reads into `rows` lines of `ow` pixels, then down.
        let region_rows = Lines {
            bytes: &src[region..],
            stride,
            len: cols * 3,
        };
        let a = sized(lines, rows * ow * 3);
        across_lines(region_rows, rows, across, x0, (transposed, swept, sums), a);
        let a = Lines {
            bytes: lines,
            stride: ow * 3,
            len: ow * 3,
        };
        sum_lines(
            a,
            down,
            y0,
            out[..oh * ow * 3].chunks_exact_mut(ow * 3),
            sums,
        );
    }
    Ok(Some(()))
}

/// The pass across `n` lines of RGB pixels (from `base` on) into `to` (`n` lines of the axis's
/// output count): on a transposed copy, so that it sums whole lines, transposed back.
fn across_lines(
    from: Lines<'_>,
    n: usize,
    across: &Axis,
    base: usize,
    (transposed, swept, sums): (&mut Vec<u8>, &mut Vec<u8>, &mut Vec<i32>),
    to: &mut [u8],
) {
    let cols = from.len / 3;
    let out = across.first.len();
    transpose(from, n, cols, sized(transposed, cols * n * 3));
    let columns = Lines {
        bytes: transposed,
        stride: n * 3,
        len: n * 3,
    };
    let swept = sized(swept, out * n * 3);
    sum_lines(columns, across, base, swept.chunks_exact_mut(n * 3), sums);
    transpose(
        Lines {
            bytes: swept,
            stride: n * 3,
            len: n * 3,
        },
        out,
        n,
        to,
    );
}

/// `buf` holding `len` bytes (their values left to the caller to overwrite).
fn sized(buf: &mut Vec<u8>, len: usize) -> &mut [u8] {
    buf.resize(len, 0);
    &mut buf[..len]
}

/// `n` lines of `px` RGB pixels, as `px` lines of `n` pixels in `to`: each line of `to`
/// written in order, reading down `from` (strided reads cost less than strided writes).
fn transpose(from: Lines<'_>, n: usize, px: usize, to: &mut [u8]) {
    for (x, line) in to.chunks_exact_mut(n * 3).take(px).enumerate() {
        for (i, p) in line.chunks_exact_mut(3).enumerate() {
            p.copy_from_slice(&from.bytes[i * from.stride + x * 3..][..3]);
        }
    }
}

/// Lines of `len` bytes, `stride` bytes apart.
#[derive(Clone, Copy)]
struct Lines<'a> {
    bytes: &'a [u8],
    stride: usize,
    len: usize,
}

/// Each output line `j` of `outs`: `sum_k weights[j][k] * lines[first[j] - base + k]`, with
/// Pillow's rounding (half added, shifted, clamped to a byte).
fn sum_lines<'a>(
    lines: Lines<'_>,
    axis: &Axis,
    base: usize,
    outs: impl Iterator<Item = &'a mut [u8]>,
    sums: &mut Vec<i32>,
) {
    sums.clear();
    sums.resize(lines.len, 0);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (detected just above).
        return unsafe { sum_lines_avx2(lines, axis, base, outs, sums) };
    }
    sum_lines_any(lines, axis, base, outs, sums);
}

/// [`sum_lines`] compiled for AVX2 (eight 32-bit lanes).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sum_lines_avx2<'a>(
    lines: Lines<'_>,
    axis: &Axis,
    base: usize,
    outs: impl Iterator<Item = &'a mut [u8]>,
    sums: &mut [i32],
) {
    sum_lines_any(lines, axis, base, outs, sums);
}

#[inline(always)]
fn sum_lines_any<'a>(
    lines: Lines<'_>,
    axis: &Axis,
    base: usize,
    outs: impl Iterator<Item = &'a mut [u8]>,
    sums: &mut [i32],
) {
    for (j, out) in outs.enumerate() {
        let weights = &axis.weights[j * axis.ksize..][..axis.count[j]];
        accumulate_any(lines, (axis.first[j] - base, axis.bits), weights, sums, out);
    }
}

#[inline(always)]
fn accumulate_any(
    lines: Lines<'_>,
    (first, bits): (usize, u32),
    weights: &[i32],
    sums: &mut [i32],
    out: &mut [u8],
) {
    sums.fill(1 << (bits - 1));
    for (k, &w) in weights.iter().enumerate() {
        let line = &lines.bytes[(first + k) * lines.stride..][..lines.len];
        for (s, &v) in sums.iter_mut().zip(line) {
            *s += i32::from(v) * w;
        }
    }
    for (o, &s) in out.iter_mut().zip(sums.iter()) {
        *o = (s >> bits).clamp(0, 255) as u8;
    }
}

/// The passes' taps and lines, kept between samples: each axis with the lines its pass
/// writes, the transposed copy the pass across reads, the sums of a line, one position's f64
/// weights.
#[derive(Default)]
pub(crate) struct Scratch {
    across: (Axis, Vec<u8>),
    down: (Axis, Vec<u8>),
    transposed: Vec<u8>,
    sums: Vec<i32>,
    weights: Vec<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torchs_two_taps_sit_around_each_centre_and_the_last_pixel_stands_alone() {
        // 5 to 3: centres 1/3, 2 and 11/3 (`(i + 0.5) * 5/3 - 0.5`); a weight of 1 makes 14
        // fraction bits. 3 to 5: the last centre, 2.2, is past the last pixel.
        let mut a = Axis::default();
        a.fill(
            (Kernel::Bilinear, Weights::TorchTwoTap),
            (5, 3, 0, 3),
            &mut Vec::new(),
        );
        assert_eq!((a.bits, a.ksize), (14, 2));
        assert_eq!(
            (a.first.as_slice(), a.count.as_slice()),
            (&[0, 2, 3][..], &[2, 2, 2][..])
        );
        assert_eq!(a.weights, [10923, 5461, 16384, 0, 5461, 10923]);
        a.fill(
            (Kernel::Bilinear, Weights::TorchTwoTap),
            (3, 5, 0, 5),
            &mut Vec::new(),
        );
        assert_eq!(a.first, [0, 0, 1, 1, 2]);
        assert_eq!(a.count, [2, 2, 2, 2, 1]);
        assert_eq!(&a.weights[8..], [16384, 0]);
    }

    #[test]
    fn weights_sum_to_one_in_fixed_point_and_a_same_size_axis_is_the_identity() {
        for kernel in [Kernel::Bilinear, Kernel::Bicubic, Kernel::Lanczos] {
            for (len, full) in [(500, 224), (224, 500), (37, 37), (3, 1)] {
                let a = Axis::new(kernel, len, full, 0, full);
                for j in 0..full {
                    let w = &a.weights[j * a.ksize..][..a.count[j]];
                    let sum: i32 = w.iter().sum();
                    assert!(
                        (sum - (1 << BITS)).abs() <= a.count[j] as i32,
                        "{kernel:?} {len}->{full} at {j}: {sum}"
                    );
                    assert!(a.first[j] + a.count[j] <= len);
                }
            }
            let same = Axis::new(kernel, 9, 9, 0, 9);
            for j in 0..9 {
                let w = &same.weights[j * same.ksize..][..same.count[j]];
                let one = w
                    .iter()
                    .position(|&v| v == 1 << BITS)
                    .expect("a tap of weight one");
                assert_eq!(same.first[j] + one, j);
                assert_eq!(w.iter().filter(|&&v| v != 0).count(), 1);
            }
        }
    }

    #[test]
    fn lanczos_weights_are_pillows_windowed_sinc_over_three_pixels_each_side() {
        // Enlarging 4 to 8: output 3's centre is source 1.75 (`(3 + 0.5) / 2`), its taps the
        // sources whose centres lie within 3 of it, weighted by sinc(d) sinc(d / 3).
        let a = Axis::new(Kernel::Lanczos, 4, 8, 0, 8);
        assert_eq!((a.first[3], a.count[3]), (0, 4));
        let raw: Vec<f64> = (0..4)
            .map(|x| Kernel::Lanczos.weight(Weights::Pillow, f64::from(x) - 1.75 + 0.5))
            .collect();
        let sum: f64 = raw.iter().sum();
        for (x, w) in raw.iter().enumerate() {
            let fixed = w / sum * f64::from(1u32 << BITS);
            let want = if fixed < 0.0 {
                fixed - 0.5
            } else {
                fixed + 0.5
            } as i32;
            assert_eq!(a.weights[3 * a.ksize + x], want, "tap {x}");
        }
        assert!(a.weights[3 * a.ksize] < 0, "the sinc's negative lobe");
        assert_eq!(Kernel::Lanczos.weight(Weights::Pillow, 3.0), 0.0);
        assert_ne!(Kernel::Lanczos.weight(Weights::Pillow, -3.0), 0.0); // Pillow's [-3, 3)
    }

    #[test]
    fn a_box_shrink_by_two_averages_each_pair_and_its_window_is_open_on_the_left() {
        let a = Axis::new(Kernel::Box, 8, 4, 0, 4);
        let half = 1 << (BITS - 1);
        for i in 0..4 {
            assert_eq!((a.first[i], a.count[i]), (2 * i, 2), "output {i}");
            assert_eq!(a.weights[i * a.ksize..i * a.ksize + 2], [half, half]);
        }
        assert_eq!(Kernel::Box.weight(Weights::Pillow, 0.5), 1.0); // Pillow's (-0.5, 0.5]
        assert_eq!(Kernel::Box.weight(Weights::Pillow, -0.5), 0.0);
    }

    #[test]
    fn hamming_weights_are_pillows_windowed_sinc_with_its_float_constants() {
        let w = |x| Kernel::Hamming.weight(Weights::Pillow, x);
        assert_eq!((w(0.0), w(1.0), w(-1.0)), (1.0, 0.0, 0.0));
        assert_eq!(w(0.3), w(-0.3));
        let x = 0.3 * std::f64::consts::PI;
        // `0.54f + 0.46f * cos(x)`: C floats widened, not the decimal constants.
        let window = f64::from(0.54f32) + f64::from(0.46f32) * x.cos();
        assert_eq!(w(0.3), x.sin() / x * window);
        assert_ne!(w(0.3), x.sin() / x * (0.54 + 0.46 * x.cos()));
    }

    #[test]
    fn a_window_of_a_resize_is_those_positions_of_the_whole_resize() {
        // 300 resized to 256, positions 16..240: the same taps as the whole resize's.
        let whole = Axis::new(Kernel::Bilinear, 300, 256, 0, 256);
        let part = Axis::new(Kernel::Bilinear, 300, 256, 16, 224);
        assert_eq!(part.first[..], whole.first[16..240]);
        let k = whole.ksize;
        assert_eq!(part.weights[..], whole.weights[16 * k..240 * k]);
        let (len, full, offset, base) =
            axis_of(false, 16.0 * 300.0 / 256.0, 224.0 * 300.0 / 256.0, 224, 300).unwrap();
        assert_eq!((len, full, offset, base), (300, 256, 16, 0));
        assert_eq!(axis_of(false, 0.3, 100.0, 224, 300), None);
    }

    #[test]
    fn torchs_weights_take_the_whole_resizes_precision_in_a_window() {
        // 97 resized to 64 (a shorter side), then its centre 48: the window's weights are
        // quantised at the whole resize's precision, whatever the window's own largest.
        let mut whole = Axis::default();
        let mut part = Axis::default();
        let k = &mut Vec::new();
        for kernel in [Kernel::Bilinear, Kernel::Bicubic] {
            whole.fill((kernel, Weights::Torch), (97, 64, 0, 64), k);
            part.fill((kernel, Weights::Torch), (97, 64, 8, 48), k);
            assert!(whole.bits < BITS && whole.bits >= 14, "{}", whole.bits);
            assert_eq!(part.bits, whole.bits);
            assert_eq!(part.first[..], whole.first[8..56]);
            assert_eq!(
                part.weights[..],
                whole.weights[8 * whole.ksize..56 * whole.ksize]
            );
            let largest = whole.weights.iter().copied().max().unwrap();
            assert!((1 << 14..1 << 15).contains(&largest), "{largest}");
        }
    }

    #[test]
    fn an_image_resized_to_its_own_size_is_itself() {
        let (w, h) = (13u32, 7u32);
        let src: Vec<u8> = (0..w * h * 3).map(|v| (v * 37 % 251) as u8).collect();
        let mut out = vec![0; src.len()];
        for kernel in [Kernel::Bilinear, Kernel::Bicubic, Kernel::Lanczos] {
            let done = resize(
                &src,
                w,
                h,
                &CropBox::full(w, h),
                (w, h),
                (kernel, Weights::Pillow),
                &mut Scratch::default(),
                &mut out,
            )
            .unwrap();
            assert!(done.is_some());
            assert_eq!(out, src);
        }
    }

    #[test]
    fn the_probe_image_gives_each_pillows_bytes_in_its_pass_order() {
        // The 5x12 image `_transforms._pillow_pass_order` resizes to 3x2 with Pillow's
        // bilinear; Pillow 13 gave the first bytes (its pass down first), the second are the
        // pass across first (Pillow 12 and earlier).
        let src: Vec<u8> = (0..180u32).map(|i| (i * 97 % 256) as u8).collect();
        let down_first = [
            111, 123, 142, 120, 117, 125, 134, 144, 131, 137, 137, 134, 126, 125, 129, 120, 124,
            121,
        ];
        let across_first = [
            111, 123, 142, 120, 118, 125, 133, 144, 131, 137, 137, 133, 126, 125, 129, 120, 124,
            121,
        ];
        let mut out = vec![0; 18];
        for (order, want) in [
            (PassOrder::AcrossFirst, across_first),
            (PassOrder::DownFirstWhenTaller, down_first),
        ] {
            set_pass_order(order);
            let crop = CropBox::full(5, 12);
            resize(
                &src,
                5,
                12,
                &crop,
                (3, 2),
                (Kernel::Bilinear, Weights::Pillow),
                &mut Scratch::default(),
                &mut out,
            )
            .unwrap();
            assert_eq!(out, want, "{order:?}");
        }
    }
}
