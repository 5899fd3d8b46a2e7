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
    (degrees.rem_euclid(360.0) != 0.0)
        .then(|| rotate_matrix_about(degrees, [w as f64 / 2.0, h as f64 / 2.0]))
}

/// The matrix `Image.rotate(degrees, center=center)` hands to `transform` (`degrees` taken
/// modulo 360 first, as Pillow does).
pub(crate) fn rotate_matrix_about(degrees: f64, [cx, cy]: [f64; 2]) -> [f64; 6] {
    let angle = -degrees.rem_euclid(360.0).to_radians();
    let r15 = |v: f64| format!("{v:.15}").parse::<f64>().unwrap_or(v);
    let (c, s) = (r15(angle.cos()), r15(angle.sin()));
    let mut m = [c, s, 0.0, r15(-angle.sin()), c, 0.0];
    m[2] += m[0] * -cx + m[1] * -cy;
    m[5] += m[3] * -cx + m[4] * -cy;
    m[2] += cx;
    m[5] += cy;
    m
}

/// `image.transform(size, Image.AFFINE, matrix, Image.NEAREST, fillcolor=fill)` on the `h`x`w`
/// RGB8 image, in place, by Pillow's own three routes (`ImagingTransformAffine`): a matrix
/// that only scales and shifts steps a position along each axis in f64; one whose corners
/// map within 32768 pixels steps in 16.16 fixed point; any other steps in f64 along rows. A
/// position truncates to its pixel (below zero: none), and a pixel outside the source keeps
/// `fill`. Where the routes differ (a rounding in the fixed point's last bit, a sum that
/// drifts) Pillow's bytes differ, so each is followed exactly.
pub(crate) fn nearest_affine(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    m: &[f64; 6],
    fill: [u8; 3],
    src: &mut Vec<u8>,
) {
    src.clear();
    src.extend_from_slice(&rgb[..h * w * 3]);
    let stride = w * 3;
    // `COORD`: `(int)v`, and -1 for any negative position.
    let coord = |v: f64| if v < 0.0 { -1 } else { v as i64 };
    let inside = |i: i64, n: usize| (0..n as i64).contains(&i).then_some(i as usize);
    let mut put = |x: usize, y: usize, from: Option<(usize, usize)>| {
        let out = &mut rgb[y * stride + x * 3..][..3];
        match from {
            Some((xin, yin)) => out.copy_from_slice(&src[yin * stride + xin * 3..][..3]),
            None => out.copy_from_slice(&fill),
        }
    };
    if m[1] == 0.0 && m[3] == 0.0 {
        // `ImagingScaleAffine`: the columns tabulated once, each position the sum of steps.
        let mut xo = m[2] + m[0] * 0.5;
        let columns: Vec<Option<usize>> = (0..w)
            .map(|_| {
                let x = inside(coord(xo), w);
                xo += m[0];
                x
            })
            .collect();
        let mut yo = m[5] + m[4] * 0.5;
        for y in 0..h {
            let row = inside(coord(yo), h);
            yo += m[4];
            for (x, &column) in columns.iter().enumerate() {
                put(x, y, column.zip(row));
            }
        }
        return;
    }
    let fits = |x: f64, y: f64| {
        (x * m[0] + y * m[1] + m[2]).abs() < 32768.0 && (x * m[3] + y * m[4] + m[5]).abs() < 32768.0
    };
    let (wf, hf) = (w as f64, h as f64);
    if fits(0.0, 0.0) && fits(wf, hf) && fits(0.0, hf) && fits(wf, 0.0) {
        // `affine_fixed`: 16.16 fixed point, `FIX(v) = FLOOR(v * 65536 + 0.5)`.
        let fix = |v: f64| {
            let v = v * 65536.0 + 0.5;
            (if v < 0.0 { v.floor() } else { v }) as i32
        };
        let (a0, a1, a3, a4) = (fix(m[0]), fix(m[1]), fix(m[3]), fix(m[4]));
        let mut a2 = fix(m[2] + m[0] * 0.5 + m[1] * 0.5);
        let mut a5 = fix(m[5] + m[3] * 0.5 + m[4] * 0.5);
        for y in 0..h {
            let (mut xx, mut yy) = (a2, a5);
            for x in 0..w {
                let from = inside(i64::from(xx >> 16), w).zip(inside(i64::from(yy >> 16), h));
                put(x, y, from);
                xx = xx.wrapping_add(a0);
                yy = yy.wrapping_add(a3);
            }
            a2 = a2.wrapping_add(a1);
            a5 = a5.wrapping_add(a4);
        }
        return;
    }
    let mut xo = m[2] + m[1] * 0.5 + m[0] * 0.5;
    let mut yo = m[5] + m[4] * 0.5 + m[3] * 0.5;
    for y in 0..h {
        let (mut xx, mut yy) = (xo, yo);
        for x in 0..w {
            put(x, y, inside(coord(xx), w).zip(inside(coord(yy), h)));
            xx += m[0];
            yy += m[3];
        }
        xo += m[1];
        yo += m[4];
    }
}

/// [`affine_any`]'s arithmetic on four output pixels at once, in AVX2's f64 lanes: the same
/// operations in the same order on each pixel (no FMA), so the same bytes.
///
/// Each lane's taps of one source row are one 16-byte load (its pixels one by one where the
/// edge clamps them), and the four loads are transposed into byte quads, so that byte `b` of
/// every lane's taps becomes one vector. Only the taps that can weigh anything are read: a
/// shear or translation along x keeps every sample on a pixel row (`dy` exactly 0), one along y
/// on a pixel column. The parts of the filters that are sums of whole pixel values (`b - a`;
/// the cubic's coefficients) are exact in integer lanes, so only the products with the
/// fractional offsets run in f64.
#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    use super::{Affine, Filter};

    /// Bytes read past the image: one lane's 16-byte load of its last taps.
    const PAD: usize = 16;

    /// Whether the lanes' i32 byte offsets reach every pixel of an `h`x`w` RGB8 image.
    pub(super) fn fits(h: usize, w: usize) -> bool {
        h > 0 && w > 0 && h.saturating_mul(w).saturating_mul(3) < i32::MAX as usize - PAD
    }

    /// [`super::affine`] on a CPU with AVX2, for an image that [`fits`].
    #[target_feature(enable = "avx2")]
    pub(super) fn affine(rgb: &mut [u8], h: usize, w: usize, t: &Affine, src: &mut Vec<u8>) {
        src.clear();
        src.extend_from_slice(rgb);
        src.resize(rgb.len() + PAD, 0);
        let m = &t.matrix;
        // `(1 * xo + 0 * yo) + 0` is `xo` exactly, so the sample's `dx` is 0 everywhere; the same
        // for `yo` and `dy`.
        let along_x = !(m[0] == 1.0 && m[1] == 0.0 && m[2] == 0.0);
        let along_y = !(m[3] == 0.0 && m[4] == 1.0 && m[5] == 0.0);
        let k = Kernel { h, w, t, src };
        match (t.filter, along_x, along_y) {
            (Filter::Bilinear, true, true) => k.run::<false, true, true>(rgb),
            (Filter::Bilinear, true, false) => k.run::<false, true, false>(rgb),
            (Filter::Bilinear, false, true) => k.run::<false, false, true>(rgb),
            (Filter::Bilinear, false, false) => k.run::<false, false, false>(rgb),
            (Filter::Bicubic, true, true) => k.run::<true, true, true>(rgb),
            (Filter::Bicubic, true, false) => k.run::<true, true, false>(rgb),
            (Filter::Bicubic, false, true) => k.run::<true, false, true>(rgb),
            (Filter::Bicubic, false, false) => k.run::<true, false, false>(rgb),
        }
    }

    /// One transform over one source image (the image and [`PAD`] bytes).
    struct Kernel<'a> {
        h: usize,
        w: usize,
        t: &'a Affine,
        src: &'a [u8],
    }

    /// Four lanes' values of each channel.
    type Channels = [__m256d; 3];

    impl Kernel<'_> {
        /// Every output pixel: `CUBIC` picks the filter, `ALONG_X` / `ALONG_Y` whether its
        /// taps left and right / above and below can weigh anything.
        #[target_feature(enable = "avx2")]
        fn run<const CUBIC: bool, const ALONG_X: bool, const ALONG_Y: bool>(&self, rgb: &mut [u8]) {
            let (h, w, m) = (self.h, self.w, &self.t.matrix);
            let stride = w * 3;
            let (m0, m2) = (_mm256_set1_pd(m[0]), _mm256_set1_pd(m[2]));
            let (m3, m5) = (_mm256_set1_pd(m[3]), _mm256_set1_pd(m[5]));
            let zero = _mm256_setzero_pd();
            let half = _mm256_set1_pd(0.5);
            let steps = _mm256_setr_pd(0.5, 1.5, 2.5, 3.5);
            let (wf, hf) = (_mm256_set1_pd(w as f64), _mm256_set1_pd(h as f64));
            let [r, g, b] = self.t.fill;
            let fill = _mm_set1_epi32(i32::from_le_bytes([r, g, b, 0]));
            let low = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
            let pack = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
            // The taps: how many per row and from which column and row, relative to the
            // sample's.
            let (taps, first_x) = match (ALONG_X, CUBIC) {
                (false, _) => (1, 0),
                (true, false) => (2, 0),
                (true, true) => (4, -1),
            };
            let (rows, first_y): (usize, i64) = match (ALONG_Y, CUBIC) {
                (false, _) => (1, 0),
                (true, false) => (2, 0),
                (true, true) => (4, -1),
            };
            let base = self.src.as_ptr().cast::<i32>();
            for (y, out_row) in rgb.chunks_exact_mut(stride).enumerate() {
                let yo = y as f64 + 0.5;
                let by = _mm256_set1_pd(m[1] * yo);
                let ey = _mm256_set1_pd(m[4] * yo);
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
                    // Lanes outside the image convert to anything (`i32::MIN` for NaN); their
                    // loads are clamped into it and their bytes replaced by `fill`.
                    let [x0, x1, x2, x3] = lanes_i32(_mm256_cvttpd_epi32(fx));
                    let ix = [
                        i64::from(x0) + first_x,
                        i64::from(x1) + first_x,
                        i64::from(x2) + first_x,
                        i64::from(x3) + first_x,
                    ];
                    let iy = lanes_i32(_mm256_cvttpd_epi32(fy));
                    let clamped_x = _mm_min_epi32(
                        _mm_max_epi32(_mm256_cvttpd_epi32(fx), _mm_setzero_si128()),
                        _mm_set1_epi32(w as i32 - 1),
                    );
                    // One source row's taps filtered across (a macro: inlined whatever the
                    // size of the kernel).
                    macro_rules! across {
                        ($k:expr) => {{
                            let k = first_y + $k;
                            let row = [
                                row_at(iy[0], k, h, stride),
                                row_at(iy[1], k, h, stride),
                                row_at(iy[2], k, h, stride),
                                row_at(iy[3], k, h, stride),
                            ];
                            if !ALONG_X {
                                // One tap per lane: one gather.
                                let at = _mm_add_epi32(
                                    _mm_setr_epi32(
                                        row[0] as i32,
                                        row[1] as i32,
                                        row[2] as i32,
                                        row[3] as i32,
                                    ),
                                    _mm_mullo_epi32(clamped_x, _mm_set1_epi32(3)),
                                );
                                // SAFETY: each lane's offset is a pixel of the image (its row
                                // and column clamped into it), whose four bytes `src` holds
                                // (`PAD` bytes follow the image).
                                let v = unsafe { _mm_i32gather_epi32::<1>(base, at) };
                                let ff = _mm_set1_epi32(0xFF);
                                [
                                    _mm256_cvtepi32_pd(_mm_and_si128(v, ff)),
                                    _mm256_cvtepi32_pd(_mm_and_si128(_mm_srli_epi32::<8>(v), ff)),
                                    _mm256_cvtepi32_pd(_mm_and_si128(_mm_srli_epi32::<16>(v), ff)),
                                ]
                            } else {
                                self.across::<CUBIC>(taps, row, ix, dx)
                            }
                        }};
                    }
                    let v: Channels = match rows {
                        1 => across!(0),
                        2 => {
                            let (a, b) = (across!(0), across!(1));
                            std::array::from_fn(|c| lerp(a[c], b[c], dy))
                        }
                        _ => {
                            let t = [across!(0), across!(1), across!(2), across!(3)];
                            std::array::from_fn(|c| cubic(t[0][c], t[1][c], t[2][c], t[3][c], dy))
                        }
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
                    let px = _mm_blendv_epi8(fill, px, _mm256_castsi256_si128(keep));
                    let bytes = bytes16(_mm_shuffle_epi8(px, pack));
                    if let Ok(out) = <&mut [u8; 12]>::try_from(&mut *out) {
                        out.copy_from_slice(&bytes[..12]);
                    } else {
                        out.copy_from_slice(&bytes[..out.len()]);
                    }
                }
            }
        }
    }

    impl Kernel<'_> {
        /// One source row's taps (at byte offsets `row`, from columns `first`) filtered across
        /// at `dx`, lane by lane.
        #[inline]
        #[target_feature(enable = "avx2")]
        fn across<const CUBIC: bool>(
            &self,
            taps: usize,
            row: [usize; 4],
            first: [i64; 4],
            dx: __m256d,
        ) -> Channels {
            let q = fetch(self.src, self.w, taps, row, first);
            if CUBIC {
                [
                    cubic_row([tap::<0>(&q), tap::<3>(&q), tap::<6>(&q), tap::<9>(&q)], dx),
                    cubic_row(
                        [tap::<1>(&q), tap::<4>(&q), tap::<7>(&q), tap::<10>(&q)],
                        dx,
                    ),
                    cubic_row(
                        [tap::<2>(&q), tap::<5>(&q), tap::<8>(&q), tap::<11>(&q)],
                        dx,
                    ),
                ]
            } else {
                [
                    lerp_row(tap::<0>(&q), tap::<3>(&q), dx),
                    lerp_row(tap::<1>(&q), tap::<4>(&q), dx),
                    lerp_row(tap::<2>(&q), tap::<5>(&q), dx),
                ]
            }
        }
    }

    /// The four lanes' taps of one source row, transposed: lane `l` reads `taps` pixels from
    /// column `first[l]` of the row at byte `row[l]` of `src` (a `w`-pixel-wide image and
    /// [`PAD`] bytes), each column clamped into the image; quad `b` of the result holds byte
    /// `b` of each lane's taps (`b < 12`). SSE2 only: every x86-64 CPU.
    #[inline(always)]
    fn fetch(src: &[u8], w: usize, taps: usize, row: [usize; 4], first: [i64; 4]) -> [__m128i; 3] {
        let w = w as i64;
        let a = lane(src, w, taps, row[0], first[0]);
        let b = lane(src, w, taps, row[1], first[1]);
        let c = lane(src, w, taps, row[2], first[2]);
        let d = lane(src, w, taps, row[3], first[3]);
        // SAFETY: SSE2 instructions, which every x86-64 CPU has.
        unsafe {
            let (ab, cd) = (_mm_unpacklo_epi8(a, b), _mm_unpacklo_epi8(c, d));
            [
                _mm_unpacklo_epi16(ab, cd),
                _mm_unpackhi_epi16(ab, cd),
                _mm_unpacklo_epi16(_mm_unpackhi_epi8(a, b), _mm_unpackhi_epi8(c, d)),
            ]
        }
    }

    /// The byte offset of row `i + k` of the image, clamped into it.
    #[inline(always)]
    fn row_at(i: i32, k: i64, h: usize, stride: usize) -> usize {
        (i64::from(i) + k).clamp(0, h as i64 - 1) as usize * stride
    }

    /// One lane's taps for [`Kernel::fetch`]: `taps` pixels from column `x0` of the row at
    /// byte `row` of `src` (a `w`-pixel-wide image and [`PAD`] bytes), each column clamped.
    #[inline(always)]
    fn lane(src: &[u8], w: i64, taps: usize, row: usize, x0: i64) -> __m128i {
        if 0 <= x0 && x0 + taps as i64 <= w {
            // `PAD` bytes follow the image: the 16 bytes from any pixel are there.
            let at = &src[row + x0 as usize * 3..][..16];
            // SAFETY: an unaligned load of the 16 bytes of `at` (SSE2: every x86-64 CPU).
            return unsafe { _mm_loadu_si128(at.as_ptr().cast()) };
        }
        let mut bytes = [0u8; 16];
        for j in 0..taps {
            let x = (x0 + j as i64).clamp(0, w - 1) as usize;
            bytes[3 * j..3 * j + 3].copy_from_slice(&src[row + 3 * x..][..3]);
        }
        // SAFETY: an unaligned load of a 16-byte array (SSE2: every x86-64 CPU).
        unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
    }

    /// The four lanes' byte `B` of their taps (see [`fetch`]) as i32 lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn tap<const B: usize>(q: &[__m128i; 3]) -> __m128i {
        let k = (4 * (B % 4)) as i8;
        let pick = _mm_setr_epi8(
            k,
            -1,
            -1,
            -1,
            k + 1,
            -1,
            -1,
            -1,
            k + 2,
            -1,
            -1,
            -1,
            k + 3,
            -1,
            -1,
            -1,
        );
        _mm_shuffle_epi8(q[B / 4], pick)
    }

    /// `a + (b - a) * d` of two whole pixel values: `b - a` is exact in i32 (as in f64).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn lerp_row(a: __m128i, b: __m128i, d: __m256d) -> __m256d {
        let diff = _mm256_cvtepi32_pd(_mm_sub_epi32(b, a));
        _mm256_add_pd(_mm256_cvtepi32_pd(a), _mm256_mul_pd(diff, d))
    }

    /// [`super::cubic`] of four whole pixel values: its coefficients `p2`, `p3`, `p4` are sums
    /// of them, exact in i32 (as in f64), and only the polynomial in `d` runs in f64.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn cubic_row([v1, v2, v3, v4]: [__m128i; 4], d: __m256d) -> __m256d {
        let p2 = _mm_sub_epi32(v3, v1);
        let p3 = _mm_sub_epi32(
            _mm_add_epi32(_mm_slli_epi32::<1>(_mm_sub_epi32(v1, v2)), v3),
            v4,
        );
        let p4 = _mm_add_epi32(_mm_sub_epi32(_mm_sub_epi32(v2, v1), v3), v4);
        let (p1, p2) = (_mm256_cvtepi32_pd(v2), _mm256_cvtepi32_pd(p2));
        let (p3, p4) = (_mm256_cvtepi32_pd(p3), _mm256_cvtepi32_pd(p4));
        let inner = _mm256_add_pd(p3, _mm256_mul_pd(d, p4));
        _mm256_add_pd(
            p1,
            _mm256_mul_pd(d, _mm256_add_pd(p2, _mm256_mul_pd(d, inner))),
        )
    }

    /// A vector's four i32 lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn lanes_i32(v: __m128i) -> [i32; 4] {
        let mut out = [0i32; 4];
        // SAFETY: an unaligned 16-byte store into a 16-byte array.
        unsafe { _mm_storeu_si128(out.as_mut_ptr().cast(), v) };
        out
    }

    /// A vector's sixteen bytes.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn bytes16(v: __m128i) -> [u8; 16] {
        let mut out = [0u8; 16];
        // SAFETY: an unaligned 16-byte store into a 16-byte array.
        unsafe { _mm_storeu_si128(out.as_mut_ptr().cast(), v) };
        out
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
    fn nearest_takes_the_pixel_under_each_centre_by_every_route() {
        let img: Vec<u8> = (0..5 * 4 * 3).map(|i| (i * 7 % 256) as u8).collect();
        let px = |v: &[u8], x: usize, y: usize| v[(y * 5 + x) * 3..][..3].to_vec();
        let mut s = Vec::new();
        // Scale only (Pillow's `ImagingScaleAffine`): a shift by one pixel to the left.
        let mut x = img.clone();
        nearest_affine(
            &mut x,
            4,
            5,
            &[1.0, 0.0, 1.0, 0.0, 1.0, 0.0],
            [9; 3],
            &mut s,
        );
        assert_eq!(px(&x, 0, 2), px(&img, 1, 2));
        assert_eq!(px(&x, 4, 2), vec![9; 3], "past the right edge: the fill");
        // A quarter turn of a 4x4 image (16.16 fixed point): output pixel (x, y) samples
        // (y + 0.5, 3.5 - x), so it reads source pixel (y, 3 - x).
        let sq: Vec<u8> = (0..4 * 4 * 3).map(|i| i as u8).collect();
        let at = |v: &[u8], x: usize, y: usize| v[(y * 4 + x) * 3];
        let mut r = sq.clone();
        nearest_affine(
            &mut r,
            4,
            4,
            &[0.0, 1.0, 0.0, -1.0, 0.0, 4.0],
            [9; 3],
            &mut s,
        );
        for (ox, oy) in [(0, 0), (3, 1), (2, 3)] {
            assert_eq!(at(&r, ox, oy), at(&sq, oy, 3 - ox));
        }
        // Corners mapped beyond 32768 pixels take the f64 route: everything is fill.
        let mut far = img.clone();
        nearest_affine(
            &mut far,
            4,
            5,
            &[1.0, 0.5, 40000.0, 0.0, 1.0, 0.0],
            [9; 3],
            &mut s,
        );
        assert!(far.iter().all(|&v| v == 9));
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
