//! torch's antialiased `interpolate` of a float image (bilinear, bicubic), rounded to bytes:
//! what torchvision's v1 `Resize` and `RandomResizedCrop` do to a uint8 tensor (cast to f32,
//! interpolated, bicubic clamped to `[0, 255]`, rounded half to even, cast back), and what v2
//! does to one where torch has no uint8 kernel for the filter (bilinear on a CPU without AVX2).
//! torch's uint8 kernel (16-bit weights, rounded between the passes) differs from it by one
//! level in about a sixth of the values.
//!
//! Bit for bit the f32 values torch computes on x86-64 (checked against torch 2.15 over
//! photographs and random sizes, every value equal), which takes torch's arithmetic as its
//! compiled kernel does it:
//! - each tap's weight from the filter in f32, the cubic's terms with fused multiply-adds, the
//!   tap's distance from the centre computed in f64 and rounded once; weights normalised by
//!   their f32 sum;
//! - the pass across the rows first, then the pass down, in f32 with no rounding between;
//! - each output value the first tap's product, then taps four at a time with each product
//!   rounded before it is added, then the remaining ones (fewer than four) with fused
//!   multiply-adds: the order and rounding of torch's loop as its compiler built it.

use super::error::AugmentError;
use super::geometry::CropBox;
use super::pil::resample::{taps_span, window_axes, Kernel};

/// One axis's taps: for each output position its first source position and its f32 weights
/// (`ksize` slots, the unused ones zero).
#[derive(Debug, Default)]
struct Axis {
    first: Vec<usize>,
    count: Vec<usize>,
    ksize: usize,
    weights: Vec<f32>,
}

/// torch's `aa_filter` for `kernel` at `x`, in f32 (`a = -0.5` for the cubic).
fn filter(kernel: Kernel, x: f32) -> f32 {
    let x = x.abs();
    match kernel {
        Kernel::Bilinear if x < 1.0 => 1.0 - x,
        Kernel::Bicubic if x < 1.0 => (1.5f32.mul_add(x, -2.5) * x).mul_add(x, 1.0),
        Kernel::Bicubic if x < 2.0 => (-0.5f32).mul_add(x, 2.5).mul_add(x, -4.0).mul_add(x, 2.0),
        _ => 0.0,
    }
}

impl Axis {
    /// torch's `_compute_index_ranges_weights` for output positions `offset..offset + out`
    /// of a resize of `len` source positions to `full`.
    fn fill(&mut self, kernel: Kernel, (len, full, offset, out): (usize, usize, usize, usize)) {
        let scale = len as f32 / full as f32;
        // Widened when shrinking: the support by the scale, the distances by its inverse.
        let widen = f64::from(scale.max(1.0));
        let support = (kernel.support() * widen) as f32;
        let invscale = (1.0 / widen) as f32;
        let ksize = support.ceil() as usize * 2 + 1;
        self.ksize = ksize;
        self.first.clear();
        self.count.clear();
        self.weights.clear();
        self.weights.resize(out * ksize, 0.0);
        for (i, slots) in self.weights.chunks_exact_mut(ksize).enumerate() {
            let center = (f64::from(scale) * ((offset + i) as f64 + 0.5)) as f32;
            // C++'s casts to int64: truncation toward zero, then clamped to the axis.
            let xmin = ((f64::from(center - support) + 0.5) as i64).max(0);
            let xmax = ((f64::from(center + support) + 0.5) as i64).min(len as i64);
            let n = (xmax - xmin).clamp(0, ksize as i64) as usize;
            let mut total = 0.0f32;
            for (j, w) in slots[..n].iter_mut().enumerate() {
                let d = (xmin + j as i64) as f32 - center;
                *w = filter(kernel, ((f64::from(d) + 0.5) * f64::from(invscale)) as f32);
                total += *w;
            }
            if total != 0.0 {
                for w in &mut slots[..n] {
                    *w /= total;
                }
            }
            self.first.push(xmin as usize);
            self.count.push(n);
        }
    }

    /// The source positions the taps read: `start..end`.
    fn span(&self) -> (usize, usize) {
        taps_span(&self.first, &self.count)
    }
}

/// The taps of both axes and the f32 rows between the passes, kept between samples.
#[derive(Default)]
pub(crate) struct Scratch {
    across: Axis,
    down: Axis,
    buffers: Buffers,
}

/// The passes' f32 lines: the region transposed, the pass across in that layout and back in
/// rows, one output line.
#[derive(Default)]
struct Buffers {
    columns: Vec<f32>,
    swept: Vec<f32>,
    rows: Vec<f32>,
    line: Vec<f32>,
}

/// torch's float resize of `crop` of the `width`x`height` RGB image `src` to `out_w`x`out_h`,
/// rounded, into `out`. `None` when the window is no part of a resize of the whole image (a
/// view is resized by itself; any other window is positions of the whole image's resize).
///
/// # Errors
/// `src` or `out` is short, or the window reaches outside the image.
pub(crate) fn resize(
    src: &[u8],
    size: (u32, u32),
    crop: &CropBox,
    out_size: (u32, u32),
    kernel: Kernel,
    scratch: &mut Scratch,
    out: &mut [u8],
) -> Result<Option<()>, AugmentError> {
    let bytes = [std::array::from_fn(|v| v as f32); 3];
    let len = out.len();
    resize_into(
        (src, size, &bytes),
        crop,
        out_size,
        kernel,
        scratch,
        Out::Bytes(out),
        len,
    )
}

/// torch's float resize as [`resize`] computes it of `image`: `src`, its size, and `values`,
/// the float each byte of each channel stands for (`x / 255`, perhaps normalized: what
/// `ToTensor()` and `Normalize` made before the resize), unrounded, into `out`
/// (`out_w * out_h * 3` f32s): the values torch's kernel gives a float image tensor, bit for
/// bit.
///
/// # Errors
/// As [`resize`].
pub(crate) fn resize_values(
    image: (&[u8], (u32, u32), &[[f32; 256]; 3]),
    crop: &CropBox,
    out_size: (u32, u32),
    kernel: Kernel,
    scratch: &mut Scratch,
    out: &mut [f32],
) -> Result<Option<()>, AugmentError> {
    let len = out.len();
    resize_into(
        image,
        crop,
        out_size,
        kernel,
        scratch,
        Out::Floats(out),
        len,
    )
}

/// Where a resize's output lines go: rounded to bytes, or as they are.
enum Out<'a> {
    Bytes(&'a mut [u8]),
    Floats(&'a mut [f32]),
}

impl Out<'_> {
    /// Output line `j` (`line.len()` values) from the pass's f32 `line`.
    #[inline(always)]
    fn put(&mut self, j: usize, line: &[f32]) {
        let len = line.len();
        match self {
            Out::Bytes(out) => {
                for (o, &v) in out[j * len..][..len].iter_mut().zip(line) {
                    *o = round_to_byte(v);
                }
            }
            Out::Floats(out) => out[j * len..][..len].copy_from_slice(line),
        }
    }
}

/// [`resize`] and [`resize_values`]: `src` with its size and the float each byte stands for.
fn resize_into(
    (src, (width, height), values): (&[u8], (u32, u32), &[[f32; 256]; 3]),
    crop: &CropBox,
    (out_w, out_h): (u32, u32),
    kernel: Kernel,
    scratch: &mut Scratch,
    out: Out<'_>,
    out_len: usize,
) -> Result<Option<()>, AugmentError> {
    let (ow, oh) = (out_w as usize, out_h as usize);
    let Some((xs, ys)) = window_axes(src, (width, height), crop, (out_w, out_h), out_len)? else {
        return Ok(None);
    };
    let Scratch {
        across,
        down,
        buffers,
    } = scratch;
    across.fill(kernel, (xs.0, xs.1, xs.2, ow));
    down.fill(kernel, (ys.0, ys.1, ys.2, oh));
    let place = Place {
        src,
        values,
        stride: width as usize * 3,
        left: xs.3,
        top: ys.3,
    };
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has FMA (detected just above).
        unsafe { passes_fma(place, across, down, buffers, out) };
        return Ok(Some(()));
    }
    passes(place, across, down, buffers, out);
    Ok(Some(()))
}

/// Where the resized part of the image lies: rows `stride` bytes apart, the part starting at
/// column `left` of row `top` (the taps' positions count from there), and the float each
/// byte stands for.
#[derive(Clone, Copy)]
struct Place<'a> {
    src: &'a [u8],
    values: &'a [[f32; 256]; 3],
    stride: usize,
    left: usize,
    top: usize,
}

/// [`passes`] compiled with FMA, which `mul_add` then is (a library call without it).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn passes_fma(place: Place<'_>, across: &Axis, down: &Axis, buffers: &mut Buffers, out: Out<'_>) {
    passes(place, across, down, buffers, out);
}

/// The pass across the rows the pass down reads, into `rows`, then the pass down a whole
/// output line at a time (into `line`), into `out` (rounded there, for bytes). The pass across
/// runs on a
/// transposed copy of the region the taps read (`columns`: each line a column of it, as f32),
/// so that it too sums whole lines with one weight each, in vector lanes, into `swept`, which
/// is transposed back; each value's sum is the same sequence of operations either way.
#[inline(always)]
fn passes(place: Place<'_>, across: &Axis, down: &Axis, buffers: &mut Buffers, mut out: Out<'_>) {
    let Buffers {
        columns,
        swept,
        rows,
        line,
    } = buffers;
    let ow = across.first.len();
    let oh = down.first.len();
    let len = ow * 3;
    let (y0, y1) = down.span();
    let (x0, x1) = across.span();
    let (n, cols) = (y1 - y0, x1 - x0);
    let column = n * 3;
    let region = (place.top + y0) * place.stride + (place.left + x0) * 3;
    sized(columns, cols * column);
    for (x, to) in columns.chunks_exact_mut(column).enumerate() {
        for (i, px) in to.chunks_exact_mut(3).enumerate() {
            let from = &place.src[region + i * place.stride + x * 3..][..3];
            for ((v, &b), values) in px.iter_mut().zip(from).zip(place.values) {
                *v = values[usize::from(b)];
            }
        }
    }
    sized(swept, ow * column);
    for (j, to) in swept.chunks_exact_mut(column).enumerate() {
        let weights = &across.weights[j * across.ksize..][..across.count[j]];
        sum_down(columns, column, across.first[j] - x0, weights, to);
    }
    sized(rows, n * len);
    for (i, to) in rows.chunks_exact_mut(len).enumerate() {
        for (j, px) in to.chunks_exact_mut(3).enumerate() {
            px.copy_from_slice(&swept[j * column + i * 3..][..3]);
        }
    }
    sized(line, len);
    for j in 0..oh {
        let weights = &down.weights[j * down.ksize..][..down.count[j]];
        sum_down(rows, len, down.first[j] - y0, weights, line);
        out.put(j, line);
    }
}

/// `round(x).clamp(0, 255)` as a byte, rounding half to even (torch's `round`): adding 2^23
/// leaves the nearest whole number, ties to even, in the low mantissa bits (a form that runs
/// in vector lanes, where `as u8` does not).
#[inline(always)]
fn round_to_byte(x: f32) -> u8 {
    const TWO_TO_23: f32 = 8_388_608.0;
    let x = if x > 0.0 { x } else { 0.0 };
    let x = if x < 255.0 { x } else { 255.0 };
    ((x + TWO_TO_23).to_bits() - TWO_TO_23.to_bits()) as u8
}

/// `buf` holding `len` values (left to the caller to overwrite).
fn sized(buf: &mut Vec<f32>, len: usize) {
    buf.resize(len, 0.0);
    buf.truncate(len);
}

/// Where torch's loop stops rounding each product: after the first tap and as many whole
/// fours as follow it; the taps from there on are fused multiply-adds.
fn fused_from(taps: usize) -> usize {
    1 + taps.saturating_sub(1) / 4 * 4
}

/// One output line of a pass: line `first + k` of `rows` (lines of `len` values) weighted by
/// `weights[k]`, summed as torch's compiled loop sums each value: the first product, then
/// four taps at a time with each product rounded and added, then the rest fused.
#[inline(always)]
fn sum_down(rows: &[f32], len: usize, first: usize, weights: &[f32], out: &mut [f32]) {
    let line = |k: usize| &rows[(first + k) * len..][..len];
    let fused = fused_from(weights.len());
    let mut taps = weights.iter().enumerate();
    let Some((_, &w0)) = taps.next() else {
        out.fill(0.0);
        return;
    };
    for (o, &v) in out.iter_mut().zip(line(0)) {
        *o = v * w0;
    }
    for (t, &w) in taps {
        if t < fused {
            for (o, &v) in out.iter_mut().zip(line(t)) {
                *o += v * w;
            }
        } else {
            for (o, &v) in out.iter_mut().zip(line(t)) {
                *o = v.mul_add(w, *o);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Weights torch 2.15 gives, as bits (read off a resize of an identity matrix,
    /// `interpolate(eye(500)[None, None], size=(500, 332), mode=..., antialias=True)`): the
    /// first output position's four taps.
    #[test]
    fn the_first_positions_weights_are_torchs_to_the_bit() {
        let mut axis = Axis::default();
        axis.fill(Kernel::Bicubic, (500, 332, 0, 332));
        assert_eq!(axis.first[0], 0);
        let bits = |w: &[f32]| w.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&axis.weights[..axis.count[0]]),
            [0x3f2709f9, 0x3eca9c2a, 0xbd21159b, 0xbc11ad28]
        );
        axis.fill(Kernel::Bilinear, (500, 209, 0, 209));
        assert_eq!((axis.first[1], axis.count[1]), (1, 5));
        assert_eq!(
            bits(&axis.weights[axis.ksize..][..5]),
            [0x3d53e40b, 0x3e6352e6, 0x3ec8d665, 0x3e81184c, 0x3da7ad69]
        );
    }

    #[test]
    fn rounding_to_a_byte_is_half_to_even_and_clamped() {
        for (x, want) in [
            (0.5f32, 0),
            (1.5, 2),
            (2.5, 2),
            (254.5, 254),
            (-3.0, 0),
            (300.0, 255),
        ] {
            assert_eq!(round_to_byte(x), want, "{x}");
        }
        assert_eq!(round_to_byte(f32::NAN), 0);
    }

    #[test]
    fn an_image_resized_to_its_own_size_is_itself() {
        let (w, h) = (13u32, 7u32);
        let src: Vec<u8> = (0..w * h * 3).map(|v| (v * 37 % 251) as u8).collect();
        let mut out = vec![0; src.len()];
        for kernel in [Kernel::Bilinear, Kernel::Bicubic] {
            let done = resize(
                &src,
                (w, h),
                &CropBox::full(w, h),
                (w, h),
                kernel,
                &mut Scratch::default(),
                &mut out,
            )
            .unwrap();
            assert!(done.is_some());
            assert_eq!(out, src);
        }
    }

    #[test]
    fn the_unrounded_values_of_the_bytes_round_to_the_byte_resize_and_scale_with_their_table() {
        let (w, h) = (29u32, 17u32);
        let src: Vec<u8> = (0..w * h * 3).map(|v| (v * 53 % 256) as u8).collect();
        let crop = CropBox::full(w, h);
        let bytes = [std::array::from_fn(|v| v as f32); 3];
        let divided: [[f32; 256]; 3] = [std::array::from_fn(|v| v as f32 / 255.0); 3];
        let (ow, oh) = (11u32, 23u32);
        let n = (ow * oh * 3) as usize;
        for kernel in [Kernel::Bilinear, Kernel::Bicubic] {
            let mut s = Scratch::default();
            let mut rounded = vec![0u8; n];
            resize(&src, (w, h), &crop, (ow, oh), kernel, &mut s, &mut rounded).unwrap();
            let mut values = vec![0f32; n];
            resize_values(
                (&src, (w, h), &bytes),
                &crop,
                (ow, oh),
                kernel,
                &mut s,
                &mut values,
            )
            .unwrap();
            let again: Vec<u8> = values.iter().map(|&v| round_to_byte(v)).collect();
            assert_eq!(again, rounded);
            // Unrounded: some values fall between whole numbers (and bicubic's past the ends).
            assert!(values.iter().any(|v| v.fract() != 0.0));
            let mut scaled = vec![0f32; n];
            resize_values(
                (&src, (w, h), &divided),
                &crop,
                (ow, oh),
                kernel,
                &mut s,
                &mut scaled,
            )
            .unwrap();
            for (a, b) in scaled.iter().zip(&values) {
                assert!((a * 255.0 - b).abs() <= 1e-3, "{a} * 255 against {b}");
            }
        }
        // At its own size the values are the table's, exactly.
        let mut same = vec![0f32; src.len()];
        let mut s = Scratch::default();
        resize_values(
            (&src, (w, h), &divided),
            &crop,
            (w, h),
            Kernel::Bicubic,
            &mut s,
            &mut same,
        )
        .unwrap();
        assert!(same
            .iter()
            .zip(&src)
            .all(|(&v, &b)| v == divided[0][usize::from(b)]));
    }

    #[test]
    fn the_sum_rounds_four_taps_at_a_time_then_fuses_the_rest() {
        // Six taps: the first product, four rounded products added, one fused.
        let w = [0.1f32, 0.2, 0.3, 0.15, 0.15, 0.1];
        let v = [201.0f32, 37.0, 99.0, 13.0, 250.0, 77.0];
        let mut want = v[0] * w[0];
        for k in 1..5 {
            want += v[k] * w[k];
        }
        want = v[5].mul_add(w[5], want);
        let mut out = [0.0f32; 2];
        let rows: Vec<f32> = v.iter().flat_map(|&x| [x, x]).collect();
        sum_down(&rows, 2, 0, &w, &mut out);
        assert_eq!(out[0].to_bits(), want.to_bits());
    }
}
