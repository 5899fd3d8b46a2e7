//! Inverse DCTs that produce an `n`x`n` block (n = 8, 4, 2, 1) from the top-left `n`x`n`
//! coefficients of an 8x8 block: DCT-domain downscaling by 1, 1/2, 1/4 or 1/8.
//!
//! With JPEG's orthonormal 1-D scaling, the `n`-point inverse that keeps the block's mean is
//! `f(x) = sum_{u<n} C(u)/2 * F(u) * cos((2x+1) u pi / 2n)`, the 8-point formula with the
//! cosine's period shrunk; the 2-D transform is separable. Only the rows and columns that hold
//! non-zero coefficients are visited. The same code is compiled a second time for AVX2 and
//! chosen at run time; both give identical results (no fused multiply-add is emitted).

/// Natural-order row/column span of the coefficients up to each zigzag index:
/// `SPAN[k] = (rows, cols)` needed when `k` is the last non-zero zigzag index.
const SPAN: [(u8, u8); 64] = {
    const ZZ: [usize; 64] = super::ZIGZAG;
    let mut span = [(0u8, 0u8); 64];
    let (mut rows, mut cols) = (0u8, 0u8);
    let mut k = 0;
    while k < 64 {
        let (r, c) = ((ZZ[k] / 8) as u8 + 1, (ZZ[k] % 8) as u8 + 1);
        if r > rows {
            rows = r;
        }
        if c > cols {
            cols = c;
        }
        span[k] = (rows, cols);
        k += 1;
    }
    span
};

/// Above this many coefficients in the non-zero span, a full-size block takes the split
/// transform ([`block8_dense`]); sparser blocks are cheaper as a product restricted to the span.
const DENSE_AREA: usize = 12;

/// `T[n][x][u] = C(u)/2 * cos((2x+1) u pi / 2n)` for the four sizes, and its transpose.
pub(crate) struct Idct {
    t: [[[f32; 8]; 8]; 4],
    tt: [[[f32; 8]; 8]; 4],
    avx2: bool,
}

fn size_index(n: usize) -> usize {
    match n {
        8 => 0,
        4 => 1,
        2 => 2,
        _ => 3,
    }
}

impl Idct {
    pub fn new() -> Self {
        let mut t = [[[0f32; 8]; 8]; 4];
        let mut tt = [[[0f32; 8]; 8]; 4];
        for n in [8usize, 4, 2, 1] {
            for x in 0..n {
                for u in 0..n {
                    let c = if u == 0 {
                        std::f64::consts::FRAC_1_SQRT_2
                    } else {
                        1.0
                    };
                    let v = (0.5
                        * c
                        * (((2 * x + 1) * u) as f64 * std::f64::consts::PI / (2 * n) as f64).cos())
                        as f32;
                    t[size_index(n)][x][u] = v;
                    tt[size_index(n)][u][x] = v;
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        let avx2 = std::arch::is_x86_feature_detected!("avx2");
        #[cfg(not(target_arch = "x86_64"))]
        let avx2 = false;
        Self { t, tt, avx2 }
    }

    /// Writes the `n`x`n` block for dequantized coefficients `coef` (natural order) into `out`
    /// at rows of `stride` bytes. `last` is the zigzag index of the last non-zero coefficient.
    #[inline]
    pub fn block(&self, coef: &[i32; 64], last: usize, n: usize, out: &mut [u8], stride: usize) {
        if last == 0 || n == 1 {
            let v = clamp(coef[0] as f32 / 8.0 + 128.0);
            for y in 0..n {
                out[y * stride..y * stride + n].fill(v);
            }
            return;
        }
        let (rows, cols) = SPAN[last];
        let (rows, cols) = (usize::from(rows).min(n), usize::from(cols).min(n));
        let i = size_index(n);
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: AVX2 support was detected at run time in `Idct::new`.
            unsafe { block_avx2(&self.t[i], &self.tt[i], coef, rows, cols, n, out, stride) };
            return;
        }
        block_generic(&self.t[i], &self.tt[i], coef, rows, cols, n, out, stride);
    }
}

/// [`block_generic`], with the dense full-size case in AVX2 ([`block8_dense_avx2`]). Safe:
/// only calling it needs AVX2 (`unsafe` at the call, where the CPU was checked), and the
/// dense case bounds its stores by an assert.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
fn block_avx2(
    t: &[[f32; 8]; 8],
    tt: &[[f32; 8]; 8],
    coef: &[i32; 64],
    rows: usize,
    cols: usize,
    n: usize,
    out: &mut [u8],
    stride: usize,
) {
    if n == 8 && rows * cols > DENSE_AREA {
        assert!(out.len() >= 7 * stride + 8, "block runs past the plane");
        // SAFETY: AVX2 is enabled in this function; the assert bounds the stores.
        return unsafe { block8_dense_avx2(coef, out, stride) };
    }
    block_generic(t, tt, coef, rows, cols, n, out, stride);
}

/// [`block8_dense`] with its two transposes done in registers (unpack/shuffle/permute) rather
/// than element by element, and the rounding to bytes by `cvtps` and saturating packs. The
/// arithmetic is the same, so the result is identical.
///
/// # Safety
/// The CPU must support AVX2; `out` must hold `7 * stride + 8` bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn block8_dense_avx2(coef: &[i32; 64], out: &mut [u8], stride: usize) {
    use std::arch::x86_64::{
        __m128i, __m256, __m256i, _mm256_add_ps, _mm256_castsi256_si128, _mm256_cvtepi32_ps,
        _mm256_cvtps_epi32, _mm256_extracti128_si256, _mm256_loadu_si256, _mm256_max_ps,
        _mm256_min_ps, _mm256_set1_ps, _mm_packs_epi32, _mm_packus_epi16, _mm_storel_epi64,
    };
    let mut f = [_mm256_set1_ps(0.0); 8];
    for (v, row) in f.iter_mut().enumerate() {
        // SAFETY: reads coef[8v..8v + 8], inside the 64-entry array; unaligned loads are allowed.
        *row = _mm256_cvtepi32_ps(unsafe {
            _mm256_loadu_si256(coef.as_ptr().add(8 * v).cast::<__m256i>())
        });
    }
    // `[__m256; 8]` and `[[f32; 8]; 8]` have the same size and both are plain floats.
    let as_lanes = |m: [__m256; 8]| -> [Lanes; 8] {
        // SAFETY: see above; every bit pattern is a valid f32.
        unsafe { std::mem::transmute(m) }
    };
    let as_vectors = |l: [Lanes; 8]| -> [__m256; 8] {
        // SAFETY: as above.
        unsafe { std::mem::transmute(l) }
    };
    let cols = as_vectors(idct8_lanes(&as_lanes(f))); // cols[y] lanes u
    let rows = as_vectors(idct8_lanes(&as_lanes(transpose8(cols)))); // rows[x] lanes y
    let px = transpose8(rows); // px[y] lanes x
    let (lo, hi, mid) = (
        _mm256_set1_ps(0.0),
        _mm256_set1_ps(255.0),
        _mm256_set1_ps(128.0),
    );
    for (y, &row) in px.iter().enumerate() {
        // Same operations as `clamp`: add 128, clamp, round to nearest even.
        let v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(row, mid), lo), hi);
        let i = _mm256_cvtps_epi32(v);
        let words = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
        let bytes = _mm_packus_epi16(words, words);
        // SAFETY: writes out[y * stride..y * stride + 8], inside `out` by the caller's promise.
        unsafe { _mm_storel_epi64(out.as_mut_ptr().add(y * stride).cast::<__m128i>(), bytes) };
    }
}

/// Transposes an 8x8 matrix of f32 held as eight row vectors.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn transpose8(r: [std::arch::x86_64::__m256; 8]) -> [std::arch::x86_64::__m256; 8] {
    use std::arch::x86_64::{
        _mm256_permute2f128_ps, _mm256_shuffle_ps, _mm256_unpackhi_ps, _mm256_unpacklo_ps,
    };
    let t = [
        _mm256_unpacklo_ps(r[0], r[1]),
        _mm256_unpackhi_ps(r[0], r[1]),
        _mm256_unpacklo_ps(r[2], r[3]),
        _mm256_unpackhi_ps(r[2], r[3]),
        _mm256_unpacklo_ps(r[4], r[5]),
        _mm256_unpackhi_ps(r[4], r[5]),
        _mm256_unpacklo_ps(r[6], r[7]),
        _mm256_unpackhi_ps(r[6], r[7]),
    ];
    let u = [
        _mm256_shuffle_ps(t[0], t[2], 0x44),
        _mm256_shuffle_ps(t[0], t[2], 0xEE),
        _mm256_shuffle_ps(t[1], t[3], 0x44),
        _mm256_shuffle_ps(t[1], t[3], 0xEE),
        _mm256_shuffle_ps(t[4], t[6], 0x44),
        _mm256_shuffle_ps(t[4], t[6], 0xEE),
        _mm256_shuffle_ps(t[5], t[7], 0x44),
        _mm256_shuffle_ps(t[5], t[7], 0xEE),
    ];
    [
        _mm256_permute2f128_ps(u[0], u[4], 0x20),
        _mm256_permute2f128_ps(u[1], u[5], 0x20),
        _mm256_permute2f128_ps(u[2], u[6], 0x20),
        _mm256_permute2f128_ps(u[3], u[7], 0x20),
        _mm256_permute2f128_ps(u[0], u[4], 0x31),
        _mm256_permute2f128_ps(u[1], u[5], 0x31),
        _mm256_permute2f128_ps(u[2], u[6], 0x31),
        _mm256_permute2f128_ps(u[3], u[7], 0x31),
    ]
}

/// Eight lanes of one 1-D transform input or output.
type Lanes = [f32; 8];

/// `0.5 * cos(k * pi / 16)`.
const fn half_cos16(k: usize) -> f32 {
    // cos(k pi / 16) for k = 0..8, to f32 precision.
    const COS: [f32; 9] = [
        1.0,
        0.980_785_25,
        0.923_879_5,
        0.831_469_6,
        0.707_106_77,
        0.555_570_24,
        0.382_683_43,
        0.195_090_32,
        0.0,
    ];
    let k = k % 32;
    let (k, sign) = if k > 16 { (32 - k, 1.0) } else { (k, 1.0) };
    let (k, sign) = if k > 8 { (16 - k, -sign) } else { (k, sign) };
    0.5 * sign * COS[k]
}

/// The odd half of the 8-point inverse: `ODD[k][j] = 0.5 cos((2k+1)(2j+1) pi / 16)`.
const ODD: [[f32; 4]; 4] = {
    let mut m = [[0f32; 4]; 4];
    let mut k = 0;
    while k < 4 {
        let mut j = 0;
        while j < 4 {
            m[k][j] = half_cos16((2 * k + 1) * (2 * j + 1));
            j += 1;
        }
        k += 1;
    }
    m
};

/// Eight 8-point inverse DCTs at once, one per lane: `x[k] = sum_u C(u)/2 F[u] cos((2k+1) u
/// pi / 16)`, split into the even half (a 4-point transform of F0, F2, F4, F6, itself split
/// again) and the odd half (a 4x4 product), so that a dense block costs about a fifth of the
/// multiplications of the matrix product.
#[inline(always)]
fn idct8_lanes(f: &[Lanes; 8]) -> [Lanes; 8] {
    let k4 = half_cos16(4); // C(0)/2 = 0.5 cos(pi/4)
    let (k2, k6) = (half_cos16(2), half_cos16(6));
    let mut x = [[0f32; 8]; 8];
    for l in 0..8 {
        let a0 = k4 * (f[0][l] + f[4][l]);
        let a1 = k4 * (f[0][l] - f[4][l]);
        let b0 = k2 * f[2][l] + k6 * f[6][l];
        let b1 = k6 * f[2][l] - k2 * f[6][l];
        let even = [a0 + b0, a1 + b1, a1 - b1, a0 - b0];
        for k in 0..4 {
            let odd = ODD[k][0] * f[1][l]
                + ODD[k][1] * f[3][l]
                + ODD[k][2] * f[5][l]
                + ODD[k][3] * f[7][l];
            x[k][l] = even[k] + odd;
            x[7 - k][l] = even[k] - odd;
        }
    }
    x
}

/// A dense full-size block by the split transform: columns (lanes = horizontal frequency),
/// a transpose, rows (lanes = output row), and a transposed store.
#[inline(always)]
fn block8_dense(coef: &[i32; 64], out: &mut [u8], stride: usize) {
    // Plain loops, not `array::from_fn`: its closures are not always inlined into the AVX2
    // copy of this function.
    let mut f = [[0f32; 8]; 8];
    for (v, row) in f.iter_mut().enumerate() {
        for (u, x) in row.iter_mut().enumerate() {
            *x = coef[v * 8 + u] as f32;
        }
    }
    let cols = idct8_lanes(&f); // cols[y][u]
    let mut t = [[0f32; 8]; 8];
    for (y, row) in cols.iter().enumerate() {
        for (u, &x) in row.iter().enumerate() {
            t[u][y] = x;
        }
    }
    let rows = idct8_lanes(&t); // rows[x][y]
    for y in 0..8 {
        let mut px = [0u8; 8];
        for (x, p) in px.iter_mut().enumerate() {
            *p = clamp(rows[x][y] + 128.0);
        }
        out[y * stride..y * stride + 8].copy_from_slice(&px);
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn block_generic(
    t: &[[f32; 8]; 8],
    tt: &[[f32; 8]; 8],
    coef: &[i32; 64],
    rows: usize,
    cols: usize,
    n: usize,
    out: &mut [u8],
    stride: usize,
) {
    if n == 8 && rows * cols > DENSE_AREA {
        return block8_dense(coef, out, stride);
    }
    // Pass 1 (columns): tmp[y][u] = sum_{v < rows} T[y][v] * F[v][u].
    let mut tmp = [[0f32; 8]; 8];
    for v in 0..rows {
        let mut f = [0f32; 8];
        for (u, x) in f.iter_mut().enumerate() {
            *x = coef[v * 8 + u] as f32;
        }
        for (y, row) in tmp.iter_mut().enumerate().take(n) {
            let w = t[y][v];
            for u in 0..8 {
                row[u] += w * f[u];
            }
        }
    }
    // Pass 2 (rows): out[y][x] = 128 + sum_{u < cols} T[x][u] * tmp[y][u].
    for (y, row) in tmp.iter().enumerate().take(n) {
        let mut acc = [128f32; 8];
        for u in 0..cols {
            let s = row[u];
            for x in 0..8 {
                acc[x] += tt[u][x] * s;
            }
        }
        let dst = &mut out[y * stride..y * stride + n];
        if n == 8 {
            // Whole rows convert as one vector.
            let mut px = [0u8; 8];
            for (p, &a) in px.iter_mut().zip(&acc) {
                *p = clamp(a);
            }
            dst.copy_from_slice(&px);
        } else {
            for x in 0..n {
                dst[x] = clamp(acc[x]);
            }
        }
    }
}

#[inline(always)]
fn clamp(v: f32) -> u8 {
    // Round to nearest by the float adder: adding 2^23 to a value in [0, 255] leaves the
    // rounded integer in the low mantissa bits. Unlike `as i32` (a saturating, NaN-checking
    // scalar conversion), this vectorizes.
    (v.clamp(0.0, 255.0) + 8_388_608.0).to_bits() as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dc_only_block_is_flat_at_every_scale() {
        let idct = Idct::new();
        let mut coef = [0i32; 64];
        coef[0] = 80; // mean 10 above mid-grey
        for n in [8, 4, 2, 1] {
            let mut out = [0u8; 64];
            idct.block(&coef, 0, n, &mut out, 8);
            assert!(
                (0..n).all(|y| out[y * 8..y * 8 + n].iter().all(|&v| v == 138)),
                "n={n}"
            );
        }
    }

    #[test]
    fn reduced_idct_keeps_the_block_mean() {
        let idct = Idct::new();
        let mut coef = [0i32; 64];
        coef[0] = -160;
        coef[1] = 50;
        coef[8] = -30;
        coef[9] = 12;
        let mut full = [0u8; 64];
        idct.block(&coef, 5, 8, &mut full, 8);
        let mean8 = full.iter().map(|&v| v as f64).sum::<f64>() / 64.0;
        for n in [4, 2] {
            let mut out = [0u8; 64];
            idct.block(&coef, 5, n, &mut out, 8);
            let mean = (0..n)
                .flat_map(|y| out[y * 8..y * 8 + n].to_vec())
                .map(f64::from)
                .sum::<f64>()
                / (n * n) as f64;
            assert!((mean - mean8).abs() < 1.0, "n={n}: {mean} vs {mean8}");
        }
    }

    #[test]
    fn split_transform_matches_the_matrix_product() {
        let idct = Idct::new();
        let mut coef = [0i32; 64];
        for (i, c) in coef.iter_mut().enumerate() {
            *c = ((i as i32 * 53) % 97 - 48) * 4;
        }
        let (mut split, mut product) = ([0u8; 64], [0u8; 64]);
        block8_dense(&coef, &mut split, 8);
        // rows * cols = 8: below the dense threshold, so this is the matrix product.
        let (t, tt) = (&idct.t[0], &idct.tt[0]);
        let mut full = [[0f32; 8]; 8];
        for y in 0..8 {
            for x in 0..8 {
                let mut acc = 128.0f64;
                for v in 0..8 {
                    for u in 0..8 {
                        acc +=
                            f64::from(t[y][v]) * f64::from(tt[u][x]) * f64::from(coef[v * 8 + u]);
                    }
                }
                full[y][x] = acc as f32;
            }
        }
        for y in 0..8 {
            for x in 0..8 {
                product[y * 8 + x] = clamp(full[y][x]);
            }
        }
        let worst = split
            .iter()
            .zip(&product)
            .map(|(&a, &b)| (i32::from(a) - i32::from(b)).abs())
            .max()
            .unwrap();
        assert!(worst <= 1, "split and exact transforms differ by {worst}");
    }

    #[test]
    fn register_transposed_dense_block_matches_the_portable_one() {
        let idct = Idct::new();
        let mut state = 12345u32;
        for _ in 0..2000 {
            let mut coef = [0i32; 64];
            for c in &mut coef {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                // Wide enough to hit both clamps.
                *c = (state >> 16) as i32 % 1200 - 600;
            }
            let (mut a, mut b) = ([0u8; 80], [0u8; 80]);
            block8_dense(&coef, &mut a, 10);
            idct.block(&coef, 63, 8, &mut b, 10);
            assert_eq!(a, b);
        }
    }

    #[test]
    fn avx2_and_generic_builds_agree_exactly() {
        let idct = Idct::new();
        let mut coef = [0i32; 64];
        for (i, c) in coef.iter_mut().enumerate() {
            *c = ((i as i32 * 37) % 91 - 45) * 3;
        }
        for n in [8, 4, 2] {
            let i = size_index(n);
            let (mut a, mut b) = ([0u8; 64], [0u8; 64]);
            block_generic(&idct.t[i], &idct.tt[i], &coef, n, n, n, &mut a, 8);
            idct.block(&coef, 63, n, &mut b, 8);
            assert_eq!(a, b, "n={n}");
        }
    }
}
