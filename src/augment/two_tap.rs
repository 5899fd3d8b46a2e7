//! torch's `interpolate(mode="bilinear", align_corners=False, antialias=False)`, the resize of
//! torchvision's video reference: each output pixel weighs the two source pixels around its
//! centre on each axis, in f32 (the two horizontal sums, then the vertical one), and is rounded
//! once at the end, half to even, as `torch.round` rounds a uint8 clip's resized values
//! (torchvision's tensor resize of uint8, `VideoClassification`'s). torch's CPU kernel weighs
//! the four pixels by the products of the axes' weights with fused multiply-adds, so its float
//! can differ from this one in the last bit: exact halves (a shrink by two) round alike, a
//! value within a bit of a half may round the other way (one level, a pixel in a hundred or
//! so where the scale makes such values).
//!
//! It runs as two passes over the rows it reads: each source row the output needs is summed
//! horizontally once into an f32 row (kept while the next output row reads it too), then each
//! output row is the vertical sum of its two. The arithmetic is the same as summing each output
//! pixel's four taps directly; only the order of the loops differs. On x86_64 both passes run
//! four lanes at a time in SSE2 (the baseline), or eight with AVX2 where the CPU has it (two
//! output pixels a step across, eight values a step down), whose multiplies and adds round as
//! the scalar ones do (no fused multiply-add).

/// The two source positions and the weight of the second for each of `out` output pixels of a
/// window `len` long from `start` on an axis `limit` pixels long, as torch places them (a
/// `view` is cut out first, so its edge pixels repeat instead of the image's).
pub(super) fn taps(
    out: u32,
    start: f64,
    len: f64,
    limit: u32,
    view: bool,
) -> Vec<(usize, usize, f32)> {
    let scale = len / f64::from(out);
    let last = if view {
        (start + len) as usize - 1
    } else {
        limit as usize - 1
    };
    (0..out)
        .map(|i| {
            let centre = (f64::from(i) + 0.5) * scale - 0.5;
            let at = if view {
                start + centre.max(0.0)
            } else {
                (start + centre).max(0.0)
            };
            let x0 = (at.floor() as usize).min(last);
            let lambda = (at - at.floor()) as f32;
            (x0, (x0 + 1).min(last), lambda)
        })
        .collect()
}

/// One output column's taps: the byte offsets of its two source pixels in a row, and their
/// weights (`1 - lambda`, `lambda`).
#[derive(Clone, Copy, Debug)]
struct Column {
    left: usize,
    right: usize,
    w0: f32,
    w1: f32,
}

/// The two passes' buffers, kept between images.
pub(super) struct TwoTap {
    columns: Vec<Column>,
    /// The horizontal sums of two source rows (`out_w * 3` values each, and two spares for the
    /// vector stores' lanes past the last pixel), and which rows they hold.
    upper: (Option<usize>, Vec<f32>),
    lower: (Option<usize>, Vec<f32>),
    /// Whether the CPU has AVX2.
    avx2: bool,
}

impl Default for TwoTap {
    fn default() -> Self {
        #[cfg(target_arch = "x86_64")]
        let avx2 = std::arch::is_x86_feature_detected!("avx2");
        #[cfg(not(target_arch = "x86_64"))]
        let avx2 = false;
        Self {
            columns: Vec::new(),
            upper: (None, Vec::new()),
            lower: (None, Vec::new()),
            avx2,
        }
    }
}

impl TwoTap {
    /// Resizes the RGB8 rows of `src` (`stride` bytes apart) at the taps `xs` (columns) and
    /// `ys` (rows) into `out` (`ys.len()` rows of `xs.len()` RGB8 pixels). Every tap must lie
    /// inside `src`.
    pub fn run(
        &mut self,
        src: &[u8],
        stride: usize,
        xs: &[(usize, usize, f32)],
        ys: &[(usize, usize, f32)],
        out: &mut [u8],
    ) {
        self.columns.clear();
        self.columns.extend(xs.iter().map(|&(x0, x1, lx)| Column {
            left: x0 * 3,
            right: x1 * 3,
            w0: 1.0 - lx,
            w1: lx,
        }));
        let values = xs.len() * 3;
        for rows in [&mut self.upper, &mut self.lower] {
            rows.0 = None;
            rows.1.resize(values + 2, 0.0);
        }
        for (line, &(y0, y1, ly)) in out.chunks_exact_mut(values).zip(ys) {
            // The lower row of the previous output row is often this one's upper.
            if self.upper.0 != Some(y0) && self.lower.0 == Some(y0) {
                std::mem::swap(&mut self.upper, &mut self.lower);
            }
            for (rows, y) in [(&mut self.upper, y0), (&mut self.lower, y1)] {
                if rows.0 != Some(y) {
                    let row = &src[y * stride..][..stride];
                    #[cfg(target_arch = "x86_64")]
                    if self.avx2 {
                        // SAFETY: AVX2 support was detected when `self` was made.
                        unsafe { horizontal_avx2(row, &self.columns, &mut rows.1) };
                        rows.0 = Some(y);
                        continue;
                    }
                    horizontal(row, &self.columns, &mut rows.1);
                    rows.0 = Some(y);
                }
            }
            let (w0, w1) = (1.0 - ly, ly);
            #[cfg(target_arch = "x86_64")]
            if self.avx2 {
                // SAFETY: as above.
                unsafe { vertical_avx2(&self.upper.1, &self.lower.1, w0, w1, line) };
                continue;
            }
            vertical(&self.upper.1, &self.lower.1, w0, w1, line);
        }
    }
}

/// [`horizontal`] two columns a step in 256-bit vectors, then the SSE2 and scalar loops for
/// what is left: the same products and sums per value, so the same values. Safe: only calling
/// it needs AVX2 (`unsafe` at the call, where the CPU was checked).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn horizontal_avx2(row: &[u8], columns: &[Column], sums: &mut [f32]) {
    use std::arch::x86_64::{
        _mm256_add_ps, _mm256_cvtepi32_ps, _mm256_cvtepu8_epi32, _mm256_mul_ps,
        _mm256_permutevar8x32_ps, _mm256_set_m128, _mm256_setr_epi32, _mm256_storeu_ps,
        _mm_cvtsi32_si128, _mm_insert_epi32, _mm_set1_ps,
    };
    let fits = |c: &Column| c.left.max(c.right) + 4 <= row.len();
    // The two pixels' values, [r g b _ r g b _], gathered to [r g b r g b _ _].
    let gather = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7);
    let mut done = 0;
    for (k, pair) in columns.chunks_exact(2).enumerate() {
        let (a, b) = (&pair[0], &pair[1]);
        if !fits(a) || !fits(b) {
            break;
        }
        // SAFETY: AVX2 is enabled in this function. The loads read 4 bytes at each column's
        // `left` and `right`, inside `row` (`fits`); the store writes 8 f32s at `6k`, and
        // `6k + 8 <= 3 * columns.len() + 2 <= sums.len()` (`k` is at most
        // `columns.len() / 2 - 1`).
        unsafe {
            let read = |at: usize| row.as_ptr().add(at).cast::<i32>().read_unaligned();
            let lanes = |first: usize, second: usize| {
                let bytes = _mm_insert_epi32::<1>(_mm_cvtsi32_si128(read(first)), read(second));
                _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes))
            };
            let w0 = _mm256_set_m128(_mm_set1_ps(b.w0), _mm_set1_ps(a.w0));
            let w1 = _mm256_set_m128(_mm_set1_ps(b.w1), _mm_set1_ps(a.w1));
            let sum = _mm256_add_ps(
                _mm256_mul_ps(w0, lanes(a.left, b.left)),
                _mm256_mul_ps(w1, lanes(a.right, b.right)),
            );
            _mm256_storeu_ps(
                sums.as_mut_ptr().add(6 * k),
                _mm256_permutevar8x32_ps(sum, gather),
            );
        }
        done = 2 * (k + 1);
    }
    horizontal_from(row, columns, sums, done);
}

/// `sums[3i + c] = w0 * row[left + c] + w1 * row[right + c]` for each column `i`.
fn horizontal(row: &[u8], columns: &[Column], sums: &mut [f32]) {
    horizontal_from(row, columns, sums, 0);
}

/// [`horizontal`] for the columns from `start` on.
#[inline(always)]
fn horizontal_from(row: &[u8], columns: &[Column], sums: &mut [f32], start: usize) {
    #[cfg(not(target_arch = "x86_64"))]
    let done = start;
    #[cfg(target_arch = "x86_64")]
    let done = {
        use std::arch::x86_64::{
            _mm_add_ps, _mm_cvtepi32_ps, _mm_cvtsi32_si128, _mm_mul_ps, _mm_set1_ps,
            _mm_setzero_si128, _mm_storeu_ps, _mm_unpacklo_epi16, _mm_unpacklo_epi8,
        };
        // A pixel's three bytes and the next one as four f32 lanes: the load reads four bytes,
        // so it stops one pixel short of the row's end. Each store writes four lanes, the
        // fourth overwritten by the next column (`sums` has spares at the end).
        let fits = |c: &Column| c.left.max(c.right) + 4 <= row.len();
        let mut done = start;
        for (i, c) in columns
            .iter()
            .enumerate()
            .skip(start)
            .take_while(|(_, c)| fits(c))
        {
            // SAFETY: SSE2 is part of x86_64's baseline. The loads read 4 bytes at `left` and
            // `right`, inside `row` (`fits`); the store writes 4 f32s at `3i`, and
            // `3i + 4 <= 3 * columns.len() + 1 <= sums.len()`.
            unsafe {
                let zero = _mm_setzero_si128();
                let lanes = |at: usize| {
                    let bytes = row.as_ptr().add(at).cast::<i32>().read_unaligned();
                    let v = _mm_unpacklo_epi8(_mm_cvtsi32_si128(bytes), zero);
                    _mm_cvtepi32_ps(_mm_unpacklo_epi16(v, zero))
                };
                let a = _mm_mul_ps(_mm_set1_ps(c.w0), lanes(c.left));
                let b = _mm_mul_ps(_mm_set1_ps(c.w1), lanes(c.right));
                _mm_storeu_ps(sums.as_mut_ptr().add(3 * i), _mm_add_ps(a, b));
            }
            done = i + 1;
        }
        done
    };
    for (c, sum) in columns[done..]
        .iter()
        .zip(sums[3 * done..].chunks_exact_mut(3))
    {
        for (k, s) in sum.iter_mut().enumerate() {
            *s = c.w0 * f32::from(row[c.left + k]) + c.w1 * f32::from(row[c.right + k]);
        }
    }
}

/// [`vertical`] eight values a step in 256-bit vectors, then its loops for the rest: the same
/// operations per value, so the same bytes. Safe: only calling it needs AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn vertical_avx2(upper: &[f32], lower: &[f32], w0: f32, w1: f32, out: &mut [u8]) {
    use std::arch::x86_64::{
        _mm256_add_ps, _mm256_castsi256_si128, _mm256_cvtps_epi32, _mm256_extracti128_si256,
        _mm256_loadu_ps, _mm256_max_ps, _mm256_min_ps, _mm256_mul_ps, _mm256_set1_ps,
        _mm256_setzero_ps, _mm_packs_epi32, _mm_packus_epi16, _mm_storel_epi64,
    };
    let whole = out.len() / 8 * 8;
    for (k, eight) in out[..whole].chunks_exact_mut(8).enumerate() {
        // SAFETY: AVX2 is enabled in this function; the loads read 8 f32s at `8k`, and
        // `8k + 8 <= out.len() <= upper.len(), lower.len()`; the store writes `eight`'s 8 bytes.
        unsafe {
            let (u, l) = (
                _mm256_loadu_ps(upper.as_ptr().add(8 * k)),
                _mm256_loadu_ps(lower.as_ptr().add(8 * k)),
            );
            let v = _mm256_add_ps(
                _mm256_mul_ps(_mm256_set1_ps(w0), u),
                _mm256_mul_ps(_mm256_set1_ps(w1), l),
            );
            let v = _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(255.0));
            // Round to nearest, ties to even, as below.
            let i = _mm256_cvtps_epi32(v);
            let words =
                _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256::<1>(i));
            _mm_storel_epi64(eight.as_mut_ptr().cast(), _mm_packus_epi16(words, words));
        }
    }
    vertical(&upper[whole..], &lower[whole..], w0, w1, &mut out[whole..]);
}

/// `out[j] = round(w0 * upper[j] + w1 * lower[j])`, clamped to a byte, rounding half to even
/// (`torch.round`'s rule, and the vector conversion's in the default rounding mode).
fn vertical(upper: &[f32], lower: &[f32], w0: f32, w1: f32, out: &mut [u8]) {
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    #[cfg(target_arch = "x86_64")]
    let done = {
        use std::arch::x86_64::{
            _mm_add_ps, _mm_cvtps_epi32, _mm_cvtsi128_si32, _mm_loadu_ps, _mm_max_ps, _mm_min_ps,
            _mm_mul_ps, _mm_packs_epi32, _mm_packus_epi16, _mm_set1_ps, _mm_setzero_ps,
        };
        for (k, quad) in out.chunks_exact_mut(4).enumerate() {
            // SAFETY: SSE2 is part of x86_64's baseline; the loads read 4 f32s at `4k`, and
            // `4k + 4 <= out.len() <= upper.len(), lower.len()`.
            unsafe {
                let (u, l) = (
                    _mm_loadu_ps(upper.as_ptr().add(4 * k)),
                    _mm_loadu_ps(lower.as_ptr().add(4 * k)),
                );
                let v = _mm_add_ps(
                    _mm_mul_ps(_mm_set1_ps(w0), u),
                    _mm_mul_ps(_mm_set1_ps(w1), l),
                );
                let v = _mm_min_ps(_mm_max_ps(v, _mm_setzero_ps()), _mm_set1_ps(255.0));
                // Round to nearest, ties to even: the MXCSR's default, which Rust leaves set.
                let i = _mm_cvtps_epi32(v);
                let words = _mm_packs_epi32(i, i);
                let bytes = _mm_packus_epi16(words, words);
                quad.copy_from_slice(&_mm_cvtsi128_si32(bytes).to_le_bytes());
            }
        }
        out.len() / 4 * 4
    };
    for ((o, &u), &l) in out[done..]
        .iter_mut()
        .zip(&upper[done..])
        .zip(&lower[done..])
    {
        let v = w0 * u + w1 * l;
        *o = v.clamp(0.0, 255.0).round_ties_even() as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The passes (SSE2, and AVX2 where the CPU has it) against each output pixel's four taps
    /// summed directly, horizontal sums first, for shrinking and enlarging the whole image, a window resized in place and a
    /// window cut out first, at widths whose vector loops leave every remainder.
    #[test]
    fn the_two_passes_give_every_pixel_of_the_four_tap_sum() {
        let (width, height) = (37usize, 23usize);
        let src: Vec<u8> = (0..width * height * 3)
            .map(|i| ((i * 7919) % 251) as u8)
            .collect();
        let stride = width * 3;
        // Both builds of the passes (the second is the first where the CPU lacks AVX2).
        let mut baseline = TwoTap {
            avx2: false,
            ..TwoTap::default()
        };
        let mut wide = TwoTap::default();
        let windows = [
            (0.0, 0.0, width as f64, height as f64, false),
            (5.25, 3.5, 20.0, 11.75, false),
            (4.0, 2.0, 30.0, 21.0, true),
        ];
        let sizes = [(5u32, 4u32), (13, 9), (37, 23), (61, 50), (1, 1), (2, 47)];
        for ((left, top, w, h, view), (out_w, out_h)) in windows
            .into_iter()
            .flat_map(|window| sizes.map(|size| (window, size)))
        {
            let xs = taps(out_w, left, w, width as u32, view);
            let ys = taps(out_h, top, h, height as u32, view);
            let mut out = vec![0; out_w as usize * out_h as usize * 3];
            baseline.run(&src, stride, &xs, &ys, &mut out);
            let mut out_wide = vec![0; out.len()];
            wide.run(&src, stride, &xs, &ys, &mut out_wide);
            assert_eq!(out, out_wide, "{out_w}x{out_h}: the AVX2 passes differ");
            for (r, &(y0, y1, ly)) in ys.iter().enumerate() {
                for (i, &(x0, x1, lx)) in xs.iter().enumerate() {
                    for c in 0..3 {
                        let p = |y: usize, x: usize| f32::from(src[y * stride + x * 3 + c]);
                        let upper = (1.0 - lx) * p(y0, x0) + lx * p(y0, x1);
                        let lower = (1.0 - lx) * p(y1, x0) + lx * p(y1, x1);
                        let v = (1.0 - ly) * upper + ly * lower;
                        let want = v.clamp(0.0, 255.0).round_ties_even() as u8;
                        let got = out[(r * out_w as usize + i) * 3 + c];
                        assert_eq!(got, want, "{out_w}x{out_h}: row {r} column {i} channel {c}");
                    }
                }
            }
        }
    }

    /// A resized value halfway between two levels goes to the even one, as `torch.round`
    /// rounds torchvision's uint8 resize (half up would give 1, 3, 5, 7 and 9): on the vector
    /// path and on the scalar one for the row's remainder.
    #[test]
    fn a_value_halfway_between_two_levels_rounds_to_even_as_torch_rounds() {
        let levels = [0u8, 1, 2, 3, 4, 5, 6, 7, 8, 9];
        let src: Vec<u8> = levels.iter().flat_map(|&v| [v, v, v]).collect();
        let xs = taps(5, 0.0, 10.0, 10, false);
        let ys = taps(1, 0.0, 1.0, 1, false);
        let mut out = vec![0; 5 * 3];
        TwoTap::default().run(&src, src.len(), &xs, &ys, &mut out);
        let want: Vec<u8> = [0u8, 2, 4, 6, 8].iter().flat_map(|&v| [v, v, v]).collect();
        assert_eq!(out, want);
    }
}
