//! Pillow's `Image.transform(size, Image.AFFINE, matrix, resample, fillcolor)` with its
//! bilinear and bicubic filters, byte for byte, and the matrix of `Image.rotate`. timm's
//! rotate, shear and translate ops are this call; AugMix runs a few of them on every image, so
//! on AVX2 the same f64 arithmetic runs on four output pixels at once ([`simd`]).

use super::Filter;

/// An `Image.transform(size, Image.AFFINE, matrix, resample, fillcolor)` call.
pub(crate) struct Affine {
    /// Output pixel centre to source point, Pillow's `(a, b, c, d, e, f)`.
    pub matrix: [f64; 6],
    pub filter: Filter,
    pub fill: [u8; 3],
}

/// `image.transform(size, Image.AFFINE, matrix, resample, fillcolor=fill)` on the `h`x`w` RGB8
/// image, in place: output pixel `(x, y)` samples the source at `(a0 (x + .5) + a1 (y + .5) +
/// a2, a3 (x + .5) + a4 (y + .5) + a5)` in f64; a point outside the source keeps `fill`; the
/// filter reads edge-clamped neighbours and its result is clamped and truncated.
pub(crate) fn affine(rgb: &mut [u8], h: usize, w: usize, t: &Affine, src: &mut Vec<u8>) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && simd::fits(h, w) {
        // SAFETY: the CPU has AVX2 (detected just above).
        return unsafe { simd::affine(rgb, h, w, t, src) };
    }
    affine_any(rgb, h, w, t, src);
}

/// [`affine`] one output pixel at a time: the portable form, and the reference the vector form
/// must equal byte for byte.
fn affine_any(rgb: &mut [u8], h: usize, w: usize, t: &Affine, src: &mut Vec<u8>) {
    let (m, filter, fill) = (&t.matrix, t.filter, t.fill);
    src.clear();
    src.extend_from_slice(rgb);
    let stride = w * 3;
    let (wf, hf) = (w as f64, h as f64);
    let cx = |i: i64| i.clamp(0, w as i64 - 1) as usize * 3;
    let row = |i: i64| &src[i.clamp(0, h as i64 - 1) as usize * stride..][..stride];
    let lerp = |a: u8, b: u8, d: f64| f64::from(a) + (f64::from(b) - f64::from(a)) * d;
    for (y, out_row) in rgb.chunks_exact_mut(stride).enumerate() {
        let yo = y as f64 + 0.5;
        for (x, out) in out_row.chunks_exact_mut(3).enumerate() {
            let xo = x as f64 + 0.5;
            let xin = m[0] * xo + m[1] * yo + m[2];
            let yin = m[3] * xo + m[4] * yo + m[5];
            if !(0.0..wf).contains(&xin) || !(0.0..hf).contains(&yin) {
                out.copy_from_slice(&fill);
                continue;
            }
            let (xin, yin) = (xin - 0.5, yin - 0.5);
            let ((ix, fx), (iy, fy)) = (floor(xin), floor(yin));
            let (dx, dy) = (xin - fx, yin - fy);
            // Shears and translations keep one coordinate on the pixel grid (`dx` or `dy` is
            // exactly 0 along it): the filter's taps that way then weigh 0 and 1 exactly, so
            // reading the one row or column gives Pillow's bytes with a quarter (bicubic) or
            // half (bilinear) of the taps.
            let byte = |v: f64| v.clamp(0.0, 255.0) as u8;
            match filter {
                Filter::Bilinear => {
                    let (x0, x1) = (cx(ix), cx(ix + 1));
                    let r0 = row(iy);
                    // Past the bottom edge the second row is the first (Pillow's clamp).
                    let r1 = if iy + 1 >= 0 && iy + 1 < h as i64 {
                        row(iy + 1)
                    } else {
                        r0
                    };
                    for (c, o) in out.iter_mut().enumerate() {
                        *o = if dy == 0.0 {
                            byte(lerp(r0[x0 + c], r0[x1 + c], dx))
                        } else if dx == 0.0 {
                            byte(lerp(r0[x0 + c], r1[x0 + c], dy))
                        } else {
                            let v1 = lerp(r0[x0 + c], r0[x1 + c], dx);
                            let v2 = lerp(r1[x0 + c], r1[x1 + c], dx);
                            byte(v1 + (v2 - v1) * dy)
                        };
                    }
                }
                Filter::Bicubic => {
                    let xs = [cx(ix - 1), cx(ix), cx(ix + 1), cx(ix + 2)];
                    let at = |r: &[u8], x: usize| f64::from(r[x]);
                    if dy == 0.0 {
                        let r = row(iy);
                        for (c, o) in out.iter_mut().enumerate() {
                            let v = cubic(
                                at(r, xs[0] + c),
                                at(r, xs[1] + c),
                                at(r, xs[2] + c),
                                at(r, xs[3] + c),
                                dx,
                            );
                            *o = byte(v);
                        }
                        continue;
                    }
                    // Lane `3 k + c`: row `iy - 1 + k`, channel `c`; all twelve rows-by-channels
                    // share `dx`, so the cubic runs lane-wise (the same operations per lane,
                    // vectorized, the same bytes).
                    let mut taps = [[0f64; 12]; 4];
                    for k in 0..4 {
                        let r = row(iy - 1 + k as i64);
                        for (j, t) in taps.iter_mut().enumerate() {
                            let p = &r[xs[j]..][..3];
                            for c in 0..3 {
                                t[3 * k + c] = f64::from(p[c]);
                            }
                        }
                    }
                    let across = if dx == 0.0 {
                        taps[1]
                    } else {
                        lanes(&taps[0], &taps[1], &taps[2], &taps[3], dx)
                    };
                    let down = |k: usize| [across[3 * k], across[3 * k + 1], across[3 * k + 2]];
                    let v = lanes(&down(0), &down(1), &down(2), &down(3), dy);
                    for (o, v) in out.iter_mut().zip(v) {
                        *o = byte(v);
                    }
                }
            }
        }
    }
}

/// [`cubic`] lane by lane.
#[inline(always)]
fn lanes<const N: usize>(
    v1: &[f64; N],
    v2: &[f64; N],
    v3: &[f64; N],
    v4: &[f64; N],
    d: f64,
) -> [f64; N] {
    std::array::from_fn(|i| cubic(v1[i], v2[i], v3[i], v4[i], d))
}

/// `x.floor()` as an integer and a float, without the libm call that the baseline x86-64
/// target makes of `floor` (exact: `x` is a pixel coordinate, far inside `i64`).
#[inline(always)]
fn floor(x: f64) -> (i64, f64) {
    let t = x as i64;
    let i = if (t as f64) > x { t - 1 } else { t };
    (i, i as f64)
}

/// Pillow's transform cubic through four samples at offset `d` from the second.
#[inline]
fn cubic(v1: f64, v2: f64, v3: f64, v4: f64, d: f64) -> f64 {
    let p1 = v2;
    let p2 = -v1 + v3;
    let p3 = 2.0 * (v1 - v2) + v3 - v4;
    let p4 = -v1 + v2 - v3 + v4;
    p1 + d * (p2 + d * (p3 + d * p4))
}

/// The matrix `Image.rotate(degrees)` hands to `transform` for a `w`x`h` image: about the
/// centre `(w / 2, h / 2)`, with the sines and cosines rounded to 15 decimals as Pillow does.
/// `None` where Pillow copies instead (a multiple of 360 degrees).
pub(crate) fn rotate_matrix(degrees: f64, w: usize, h: usize) -> Option<[f64; 6]> {
    let degrees = degrees.rem_euclid(360.0);
    if degrees == 0.0 {
        return None;
    }
    let angle = -degrees.to_radians();
    let r15 = |v: f64| format!("{v:.15}").parse::<f64>().unwrap_or(v);
    let (c, s) = (r15(angle.cos()), r15(angle.sin()));
    let mut m = [c, s, 0.0, r15(-angle.sin()), c, 0.0];
    let (cx, cy) = (w as f64 / 2.0, h as f64 / 2.0);
    m[2] += m[0] * -cx + m[1] * -cy;
    m[5] += m[3] * -cx + m[4] * -cy;
    m[2] += cx;
    m[5] += cy;
    Some(m)
}

/// [`affine_any`]'s arithmetic on four output pixels at once, in AVX2's f64 lanes: the same
/// operations in the same order on each pixel (no FMA), so the same bytes. The filter's taps are
/// gathered as four bytes per pixel (its three channels and one byte beyond), and only the taps
/// that can weigh anything are read: a shear or translation along x keeps every sample on a
/// pixel row (`dy` exactly 0), one along y on a pixel column.
#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    use super::{Affine, Filter};

    /// Whether the gathers' i32 byte offsets reach every byte of an `h`x`w` RGB8 image and the
    /// one past it.
    pub(super) fn fits(h: usize, w: usize) -> bool {
        h > 0 && w > 0 && h.saturating_mul(w).saturating_mul(3) < i32::MAX as usize
    }

    /// [`super::affine`] on a CPU with AVX2, for an image that [`fits`].
    #[target_feature(enable = "avx2")]
    pub(super) fn affine(rgb: &mut [u8], h: usize, w: usize, t: &Affine, src: &mut Vec<u8>) {
        src.clear();
        src.extend_from_slice(rgb);
        // The last pixel's four-byte load reads one byte past the image.
        src.push(0);
        let m = &t.matrix;
        // `(1 * xo + 0 * yo) + 0` is `xo` exactly, so the sample's `dx` is 0 everywhere; the same
        // for `yo` and `dy`.
        let along_x = !(m[0] == 1.0 && m[1] == 0.0 && m[2] == 0.0);
        let along_y = !(m[3] == 0.0 && m[4] == 1.0 && m[5] == 0.0);
        let k = Kernel::new(h, w, t);
        match (t.filter, along_x, along_y) {
            (Filter::Bilinear, true, true) => k.run::<false, true, true>(rgb, src),
            (Filter::Bilinear, true, false) => k.run::<false, true, false>(rgb, src),
            (Filter::Bilinear, false, true) => k.run::<false, false, true>(rgb, src),
            (Filter::Bilinear, false, false) => k.run::<false, false, false>(rgb, src),
            (Filter::Bicubic, true, true) => k.run::<true, true, true>(rgb, src),
            (Filter::Bicubic, true, false) => k.run::<true, true, false>(rgb, src),
            (Filter::Bicubic, false, true) => k.run::<true, false, true>(rgb, src),
            (Filter::Bicubic, false, false) => k.run::<true, false, false>(rgb, src),
        }
    }

    /// The transform's constants, broadcast to the lanes.
    struct Kernel {
        h: usize,
        w: usize,
        /// The matrix, and each of its entries in every lane.
        matrix: [f64; 6],
        m: [__m256d; 6],
        fill: __m128i,
    }

    /// Four pixels' values of one channel, one tap.
    type Taps = [__m256d; 3];

    impl Kernel {
        #[target_feature(enable = "avx2")]
        fn new(h: usize, w: usize, t: &Affine) -> Self {
            let m = &t.matrix;
            let [r, g, b] = t.fill;
            Self {
                h,
                w,
                matrix: *m,
                m: [
                    _mm256_set1_pd(m[0]),
                    _mm256_set1_pd(m[1]),
                    _mm256_set1_pd(m[2]),
                    _mm256_set1_pd(m[3]),
                    _mm256_set1_pd(m[4]),
                    _mm256_set1_pd(m[5]),
                ],
                fill: _mm_set1_epi32(i32::from_le_bytes([r, g, b, 0])),
            }
        }

        /// Every output pixel: `CUBIC` picks the filter, `ALONG_X` / `ALONG_Y` whether its
        /// taps left and right / above and below can weigh anything.
        #[target_feature(enable = "avx2")]
        fn run<const CUBIC: bool, const ALONG_X: bool, const ALONG_Y: bool>(
            &self,
            rgb: &mut [u8],
            src: &[u8],
        ) {
            let (h, w) = (self.h, self.w);
            let stride = w * 3;
            debug_assert!(src.len() > h * stride);
            let [m0, _, m2, m3, _, m5] = self.m;
            let zero = _mm256_setzero_pd();
            let half = _mm256_set1_pd(0.5);
            let steps = _mm256_setr_pd(0.5, 1.5, 2.5, 3.5);
            let (wf, hf) = (_mm256_set1_pd(w as f64), _mm256_set1_pd(h as f64));
            let (wmax, hmax) = (_mm_set1_epi32(w as i32 - 1), _mm_set1_epi32(h as i32 - 1));
            let (three, rows) = (_mm_set1_epi32(3), _mm_set1_epi32(stride as i32));
            let low = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
            let pack = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
            // The clamped column (times 3) and row (times the stride) `j` taps from `i`.
            let clamp = |i: __m128i, j: i32, max: __m128i, scale: __m128i| {
                let at = _mm_add_epi32(i, _mm_set1_epi32(j));
                _mm_mullo_epi32(
                    _mm_min_epi32(_mm_max_epi32(at, _mm_setzero_si128()), max),
                    scale,
                )
            };
            let base = src.as_ptr().cast::<i32>();
            for (y, out_row) in rgb.chunks_exact_mut(stride).enumerate() {
                let yo = y as f64 + 0.5;
                let by = _mm256_set1_pd(self.matrix[1] * yo);
                let ey = _mm256_set1_pd(self.matrix[4] * yo);
                for (group, out) in out_row.chunks_mut(12).enumerate() {
                    let xo = _mm256_add_pd(_mm256_set1_pd((group * 4) as f64), steps);
                    let xin = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(m0, xo), by), m2);
                    let yin = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(m3, xo), ey), m5);
                    let inside = _mm256_and_pd(
                        _mm256_and_pd(
                            _mm256_cmp_pd::<_CMP_GE_OQ>(xin, zero),
                            _mm256_cmp_pd::<_CMP_LT_OQ>(xin, wf),
                        ),
                        _mm256_and_pd(
                            _mm256_cmp_pd::<_CMP_GE_OQ>(yin, zero),
                            _mm256_cmp_pd::<_CMP_LT_OQ>(yin, hf),
                        ),
                    );
                    let (xs, ys) = (_mm256_sub_pd(xin, half), _mm256_sub_pd(yin, half));
                    let (fx, fy) = (_mm256_floor_pd(xs), _mm256_floor_pd(ys));
                    let (dx, dy) = (_mm256_sub_pd(xs, fx), _mm256_sub_pd(ys, fy));
                    // Lanes outside the image convert to anything (`i32::MIN` for NaN); the
                    // clamps keep their loads inside it and their bytes are replaced by `fill`.
                    let (ix, iy) = (_mm256_cvttpd_epi32(fx), _mm256_cvttpd_epi32(fy));
                    let gather = |row: __m128i, j: i32| -> Taps {
                        let at = _mm_add_epi32(row, clamp(ix, j, wmax, three));
                        // SAFETY: `at` is a clamped row times the stride plus a clamped column
                        // times 3, so each lane's four bytes start at a pixel of the image and
                        // end at most one byte past it, which `src` holds.
                        let v = unsafe { _mm_i32gather_epi32::<1>(base, at) };
                        let ff = _mm_set1_epi32(0xFF);
                        [
                            _mm256_cvtepi32_pd(_mm_and_si128(v, ff)),
                            _mm256_cvtepi32_pd(_mm_and_si128(_mm_srli_epi32::<8>(v), ff)),
                            _mm256_cvtepi32_pd(_mm_and_si128(_mm_srli_epi32::<16>(v), ff)),
                        ]
                    };
                    // One row's taps filtered across.
                    let across = |k: i32| -> Taps {
                        let row = clamp(iy, k, hmax, rows);
                        if !ALONG_X {
                            gather(row, 0)
                        } else if CUBIC {
                            let t = [
                                gather(row, -1),
                                gather(row, 0),
                                gather(row, 1),
                                gather(row, 2),
                            ];
                            std::array::from_fn(|c| cubic(t[0][c], t[1][c], t[2][c], t[3][c], dx))
                        } else {
                            let (a, b) = (gather(row, 0), gather(row, 1));
                            std::array::from_fn(|c| lerp(a[c], b[c], dx))
                        }
                    };
                    let v: Taps = if !ALONG_Y {
                        across(0)
                    } else if CUBIC {
                        let t = [across(-1), across(0), across(1), across(2)];
                        std::array::from_fn(|c| cubic(t[0][c], t[1][c], t[2][c], t[3][c], dy))
                    } else {
                        let (a, b) = (across(0), across(1));
                        std::array::from_fn(|c| lerp(a[c], b[c], dy))
                    };
                    let byte = |v: __m256d| {
                        let v = _mm256_min_pd(_mm256_max_pd(v, zero), _mm256_set1_pd(255.0));
                        _mm256_cvttpd_epi32(v)
                    };
                    let px = _mm_or_si128(
                        _mm_or_si128(byte(v[0]), _mm_slli_epi32::<8>(byte(v[1]))),
                        _mm_slli_epi32::<16>(byte(v[2])),
                    );
                    let keep = _mm256_permutevar8x32_epi32(_mm256_castpd_si256(inside), low);
                    let px = _mm_blendv_epi8(self.fill, px, _mm256_castsi256_si128(keep));
                    let mut bytes = [0u8; 16];
                    // SAFETY: an unaligned 16-byte store into a 16-byte array.
                    unsafe {
                        _mm_storeu_si128(bytes.as_mut_ptr().cast(), _mm_shuffle_epi8(px, pack))
                    };
                    out.copy_from_slice(&bytes[..out.len()]);
                }
            }
        }
    }

    /// `a + (b - a) * d`, lane-wise.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn lerp(a: __m256d, b: __m256d, d: __m256d) -> __m256d {
        _mm256_add_pd(a, _mm256_mul_pd(_mm256_sub_pd(b, a), d))
    }

    /// [`super::cubic`], lane-wise, with its operations in its order.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn cubic(v1: __m256d, v2: __m256d, v3: __m256d, v4: __m256d, d: __m256d) -> __m256d {
        let p2 = _mm256_sub_pd(v3, v1);
        let two = _mm256_set1_pd(2.0);
        let p3 = _mm256_sub_pd(
            _mm256_add_pd(_mm256_mul_pd(two, _mm256_sub_pd(v1, v2)), v3),
            v4,
        );
        let p4 = _mm256_add_pd(_mm256_sub_pd(_mm256_sub_pd(v2, v1), v3), v4);
        let inner = _mm256_add_pd(p3, _mm256_mul_pd(d, p4));
        _mm256_add_pd(
            v2,
            _mm256_mul_pd(d, _mm256_add_pd(p2, _mm256_mul_pd(d, inner))),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_matrix_copies_and_a_full_shift_fills() {
        let with = |filter, matrix| Affine {
            matrix,
            filter,
            fill: [1, 2, 3],
        };
        let img: Vec<u8> = (0..6 * 4 * 3).map(|i| (i * 11 % 256) as u8).collect();
        let mut s = Vec::new();
        for filter in [Filter::Bilinear, Filter::Bicubic] {
            let mut x = img.clone();
            affine(
                &mut x,
                4,
                6,
                &with(filter, [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]),
                &mut s,
            );
            assert_eq!(x, img);
            affine(
                &mut x,
                4,
                6,
                &with(filter, [1.0, 0.0, 6.0, 0.0, 1.0, 0.0]),
                &mut s,
            );
            assert!(x.chunks(3).all(|p| p == [1, 2, 3]));
        }
    }

    #[test]
    fn affine_gives_the_same_bytes_on_every_instruction_set() {
        // Rotations, timm's shears and translations (fractional, both ways, past the edge),
        // a zoom and a matrix of every entry, on sizes that are and are not whole lane groups.
        let matrices = |w: usize, h: usize| {
            let mut all = vec![
                rotate_matrix(17.3, w, h).unwrap(),
                rotate_matrix(-29.9, w, h).unwrap(),
                rotate_matrix(90.0, w, h).unwrap(),
                [1.0, 0.23, 0.0, 0.0, 1.0, 0.0],
                [1.0, -0.3, 0.0, 0.0, 1.0, 0.0],
                [1.0, 0.0, 0.0, 0.17, 1.0, 0.0],
                [1.0, 0.0, 0.0, -0.29, 1.0, 0.0],
                [1.0, 0.0, 7.37, 0.0, 1.0, 0.0],
                [1.0, 0.0, -3.1, 0.0, 1.0, 0.0],
                [1.0, 0.0, 0.0, 0.0, 1.0, 4.62],
                [1.0, 0.0, 0.0, 0.0, 1.0, -0.5],
                [1.0, 0.0, w as f64 + 2.0, 0.0, 1.0, 0.0],
                [0.7, 0.1, 1.3, -0.2, 1.4, -2.2],
            ];
            all.push([1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
            all
        };
        let mut s = Vec::new();
        for (h, w) in [(29, 41), (16, 16), (7, 3), (1, 5), (33, 1)] {
            let img: Vec<u8> = (0..h * w * 3).map(|i| (i * 97 % 251) as u8).collect();
            for (i, m) in matrices(w, h).into_iter().enumerate() {
                for filter in [Filter::Bilinear, Filter::Bicubic] {
                    let t = Affine {
                        matrix: m,
                        filter,
                        fill: [9, 8, 7],
                    };
                    let mut portable = img.clone();
                    affine_any(&mut portable, h, w, &t, &mut s);
                    let mut dispatched = img.clone();
                    affine(&mut dispatched, h, w, &t, &mut s);
                    assert_eq!(portable, dispatched, "{h}x{w}, matrix {i}, {filter:?}");
                    if i == 0 && h * w > 20 {
                        assert_ne!(portable, img);
                    }
                }
            }
        }
    }

    #[test]
    fn rotation_by_whole_turns_is_a_copy_and_a_quarter_turn_maps_corners() {
        assert_eq!(rotate_matrix(0.0, 8, 8), None);
        assert_eq!(rotate_matrix(-360.0, 8, 8), None);
        let m = rotate_matrix(90.0, 8, 8).unwrap();
        // Output (0.5, 0.5) samples the source near its top-right corner (counter-clockwise).
        let (x, y) = (
            m[0] * 0.5 + m[1] * 0.5 + m[2],
            m[3] * 0.5 + m[4] * 0.5 + m[5],
        );
        assert!((x - 7.5).abs() < 1e-9 && (y - 0.5).abs() < 1e-9, "{x} {y}");
    }
}
