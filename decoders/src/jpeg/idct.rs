//! Inverse DCTs that produce an `n`x`n` block (n = 1..=8) from the top-left `n`x`n`
//! coefficients of an 8x8 block: DCT-domain downscaling to `n/8`.
//!
//! With JPEG's orthonormal 1-D scaling, the `n`-point inverse that keeps the block's mean is
//! `f(x) = sum_{u<n} C(u)/2 * F(u) * cos((2x+1) u pi / 2n)`, the 8-point formula with the
//! cosine's period shrunk; the 2-D transform is separable.
//!
//! A full-size block (n = 8) with any AC coefficient takes libjpeg's accurate integer transform
//! in 16-bit lanes ([`dense8`]: SSE2 in two halves of four lanes, or each pass over all eight
//! lanes at once with AVX2 or AVX-512 BW, or a portable copy, all giving the same bytes,
//! which are libjpeg-turbo's), within one level of the exact transform. The reduced sizes are
//! float products that visit only the rows and columns holding non-zero coefficients,
//! compiled a second time for AVX2 and chosen at run time; both give identical results (no
//! fused multiply-add is emitted). A block of only a DC coefficient is flat at every size.

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

/// Zeroes the coefficients a block decode wrote into `coef`, `last` being the zigzag index of
/// the last one (what it returned): the whole rows of their span, so a block of a few
/// low-frequency coefficients is cleared with a store or two.
#[inline(always)]
pub(crate) fn clear_written(coef: &mut [i32; 64], last: usize) {
    let rows = usize::from(SPAN[last].0);
    for row in 0..rows {
        // A copy of a constant length is stores in line, where `fill` is a call to `memset`.
        coef[row * 8..][..8].copy_from_slice(&[0; 8]);
    }
}

/// `T[n - 1][x][u] = C(u)/2 * cos((2x+1) u pi / 2n)` for the eight sizes, and its transpose.
struct Tables {
    t: [[[f32; 8]; 8]; 8],
    tt: [[[f32; 8]; 8]; 8],
}

impl Tables {
    /// Computed once per process: each decoder used to compute its own (a few hundred `cos`
    /// calls, about 0.2 ms, where the fuzz target makes a decoder per input).
    fn get() -> &'static Tables {
        static TABLES: std::sync::OnceLock<Tables> = std::sync::OnceLock::new();
        TABLES.get_or_init(|| {
            let mut t = [[[0f32; 8]; 8]; 8];
            let mut tt = [[[0f32; 8]; 8]; 8];
            for n in 1..=8usize {
                for x in 0..n {
                    for u in 0..n {
                        let c = if u == 0 {
                            std::f64::consts::FRAC_1_SQRT_2
                        } else {
                            1.0
                        };
                        let angle =
                            ((2 * x + 1) * u) as f64 * std::f64::consts::PI / (2 * n) as f64;
                        let v = (0.5 * c * angle.cos()) as f32;
                        t[n - 1][x][u] = v;
                        tt[n - 1][u][x] = v;
                    }
                }
            }
            Tables { t, tt }
        })
    }
}

/// The block transforms, with the CPU's features detected once.
pub(crate) struct Idct {
    t: &'static [[[f32; 8]; 8]; 8],
    tt: &'static [[[f32; 8]; 8]; 8],
    avx2: bool,
    /// AVX-512 BW and VL, which [`dense8_avx512`] takes.
    avx512: bool,
}

impl Idct {
    pub fn new() -> Self {
        let Tables { t, tt } = Tables::get();
        #[cfg(target_arch = "x86_64")]
        let (avx2, avx512) = (
            std::arch::is_x86_feature_detected!("avx2"),
            std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vl"),
        );
        #[cfg(not(target_arch = "x86_64"))]
        let (avx2, avx512) = (false, false);
        Self {
            t,
            tt,
            avx2,
            avx512,
        }
    }

    /// Writes the `n`x`n` block for dequantized coefficients `coef` (natural order) into `out`
    /// at rows of `stride` bytes. `last` is the zigzag index of the last non-zero coefficient.
    #[inline]
    pub fn block(&self, coef: &[i32; 64], last: usize, n: usize, out: &mut [u8], stride: usize) {
        if last == 0 || n == 1 {
            // libjpeg's rounding of a flat block: half up, `(F0 + 4) >> 3`.
            let v = ((i64::from(coef[0]) + 4) >> 3).clamp(-128, 127) as i32 + 128;
            let v = v as u8;
            if n == 8 {
                // Rows of a known length: a store each, where a fill of `n` bytes is a call.
                for y in 0..8 {
                    out[y * stride..][..8].copy_from_slice(&[v; 8]);
                }
                return;
            }
            for y in 0..n {
                out[y * stride..y * stride + n].fill(v);
            }
            return;
        }
        if n == 8 {
            // Even a block of a few coefficients is cheaper this way than as a float product
            // restricted to its span (measured: the whole decode 15% faster than with the
            // product for spans of up to 12 coefficients).
            return dense8(self.avx2, self.avx512, coef, out, stride);
        }
        let (rows, cols) = SPAN[last];
        let (rows, cols) = (usize::from(rows).min(n), usize::from(cols).min(n));
        let i = n - 1;
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: AVX2 support was detected at run time in `Idct::new`.
            unsafe { block_avx2(&self.t[i], &self.tt[i], coef, rows, cols, n, out, stride) };
            return;
        }
        block_generic(&self.t[i], &self.tt[i], coef, rows, cols, n, out, stride);
    }
}

/// [`block_generic`] compiled for AVX2 (the sparse products vectorize wider). Safe: only
/// calling it needs AVX2 (`unsafe` at the call, where the CPU was checked).
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
    block_generic(t, tt, coef, rows, cols, n, out, stride);
}

/// Fraction bits of the dense transform's constants: libjpeg's accurate integer transform
/// ("islow"), whose results decoders built on libjpeg-turbo (Pillow, torchvision) give.
const CONST_BITS: i32 = 13;
/// Fraction bits the columns' results keep for the rows' pass (libjpeg's). The transform is
/// scaled by `sqrt(8)` per axis against the orthonormal one (the rows' shift takes the 8 back
/// out), so a column's results for a block of samples within 0..=255 stay below 4096 with
/// these 2 fraction bits: an i16 holds them with 8x headroom for quantization's overshoot;
/// beyond it (corrupt data) values saturate.
const PASS1_BITS: i32 = 2;
/// The shifts that end each pass, and what is added before them (a half, to round; in the
/// second pass also the 128 that level-shifts the samples back).
const SHIFT1: i32 = CONST_BITS - PASS1_BITS;
const SHIFT2: i32 = CONST_BITS + PASS1_BITS + 3;
const BIAS1: i32 = 1 << (SHIFT1 - 1);
const BIAS2: i32 = (1 << (SHIFT2 - 1)) + (128 << SHIFT2);

/// The twelve rotation constants of the Loeffler-Ligtenberg-Moschytz flowgraph libjpeg's
/// accurate transform evaluates, each `round(c * 2^13)`: `K[0]` is 0.298631336, then
/// 0.390180644, 0.541196100, 0.765366865, 0.899976223, 1.175875602, 1.501321110,
/// 1.847759065, 1.961570560, 2.053119869, 2.562915447, 3.072711026.
const K: [i32; 12] = [
    2446, 3196, 4433, 6270, 7373, 9633, 12299, 15137, 16069, 16819, 20995, 25172,
];

/// The flowgraph's odd half for inputs `(F1, F3, F5, F7)`: the odd parts of outputs 0, 1, 2,
/// 3 (output `7 - k` takes the same with the opposite sign). Integer and linear, so
/// evaluating it on the four unit inputs gives the exact weights of each input, and a
/// weighted sum with them computes the flowgraph's very integers in any order.
const fn odd_flowgraph(f: [i32; 4]) -> [i32; 4] {
    let [x1, x3, x5, x7] = f;
    let z5 = (x1 + x3 + x5 + x7) * K[5];
    let z1 = -(x7 + x1) * K[4];
    let z2 = -(x5 + x3) * K[10];
    let z3 = -(x7 + x3) * K[8] + z5;
    let z4 = -(x5 + x1) * K[1] + z5;
    [
        x1 * K[6] + z1 + z4,
        x3 * K[11] + z2 + z3,
        x5 * K[9] + z2 + z4,
        x7 * K[0] + z1 + z3,
    ]
}

/// The 8-point inverse's weights, as pairs of i16 that one multiply-add applies to two inputs:
/// `EVEN[0]` and `EVEN[1]` make `a0`, `a1` from `(F0, F4)`, `EVEN[2]` and `EVEN[3]` make `b0`,
/// `b1` from `(F2, F6)` (the flowgraph's even half: one rotation by `K[2]`, `K[3]`, `K[7]`);
/// `ODD[k]` makes the odd part of outputs `k` and `7 - k` from `(F1, F3)` and `(F5, F7)`.
const EVEN: [[i16; 2]; 4] = {
    let one = 1 << CONST_BITS;
    let (c2, c6) = (K[2] + K[3], K[2]);
    [
        [one as i16, one as i16],
        [one as i16, -one as i16],
        [c2 as i16, c6 as i16],
        [c6 as i16, (K[2] - K[7]) as i16],
    ]
};
const ODD: [[i16; 4]; 4] = {
    let mut m = [[0i16; 4]; 4];
    let mut j = 0;
    while j < 4 {
        let mut unit = [0i32; 4];
        unit[j] = 1;
        let column = odd_flowgraph(unit);
        let mut k = 0;
        while k < 4 {
            m[k][j] = column[k] as i16;
            k += 1;
        }
        j += 1;
    }
    m
};

/// A dense full-size block in 16-bit fixed point: the columns' 1-D inverses (inputs are the
/// coefficients saturated to i16, results kept with [`PASS1_BITS`] fraction bits and saturated
/// to i16), then the rows', rounded to bytes with saturation. Each 1-D inverse is split into
/// an even half (F0, F2, F4, F6) and an odd half (F1, F3, F5, F7) whose products are summed in
/// i32 pairwise, as `pmaddwd` sums them. Within one level of the exact transform on image data
/// (tested); [`dense8_sse2`] computes exactly this with 8-lane vectors.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn dense8_portable(coef: &[i32; 64], out: &mut [u8], stride: usize) {
    let sat = |v: i32| v.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16;
    // One 1-D inverse of eight inputs, as i32 before the final shift.
    let inverse = |f: [i16; 8], bias: i32, shift: i32| -> [i32; 8] {
        let madd = |a: i16, b: i16, w: [i16; 2]| {
            (i32::from(a) * i32::from(w[0])).wrapping_add(i32::from(b) * i32::from(w[1]))
        };
        let a0 = madd(f[0], f[4], EVEN[0]).wrapping_add(bias);
        let a1 = madd(f[0], f[4], EVEN[1]).wrapping_add(bias);
        let b0 = madd(f[2], f[6], EVEN[2]);
        let b1 = madd(f[2], f[6], EVEN[3]);
        let even = [
            a0.wrapping_add(b0),
            a1.wrapping_add(b1),
            a1.wrapping_sub(b1),
            a0.wrapping_sub(b0),
        ];
        let mut x = [0i32; 8];
        for k in 0..4 {
            let o = ODD[k];
            let odd = madd(f[1], f[3], [o[0], o[1]]).wrapping_add(madd(f[5], f[7], [o[2], o[3]]));
            x[k] = even[k].wrapping_add(odd) >> shift;
            x[7 - k] = even[k].wrapping_sub(odd) >> shift;
        }
        x
    };
    // Columns: g[y][u] from the coefficients f[v][u].
    let mut g = [[0i16; 8]; 8];
    for u in 0..8 {
        let f = std::array::from_fn(|v| sat(coef[v * 8 + u]));
        for (y, v) in inverse(f, BIAS1, SHIFT1).into_iter().enumerate() {
            g[y][u] = sat(v);
        }
    }
    // Rows: px[y][x] from g[y][u].
    for (y, row) in g.iter().enumerate() {
        let px = inverse(*row, BIAS2, SHIFT2);
        for (o, v) in out[y * stride..y * stride + 8].iter_mut().zip(px) {
            *o = sat(v).clamp(0, 255) as u8;
        }
    }
}

/// [`dense8_portable`] with SSE2 (every x86-64 CPU has it): the coefficients' rows as eight
/// vectors of i16 lanes, each 1-D pass a set of `pmaddwd` on interleaved pairs, and two 8x8
/// transposes. The same operations on the same integers, so the result is identical. Not
/// inlined into the entropy decoder's loop (measured slower there).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
#[inline(never)]
fn dense8_sse2(coef: &[i32; 64], out: &mut [u8], stride: usize) {
    use std::arch::x86_64::{
        __m128i, _mm_loadu_si128, _mm_packs_epi32, _mm_packus_epi16, _mm_srli_si128,
        _mm_storel_epi64,
    };
    assert!(out.len() >= 7 * stride + 8, "block runs past the plane");
    let p = coef.as_ptr().cast::<__m128i>();
    // SAFETY: SSE2 is enabled in this function; reads coef[8v..8v + 8] as two unaligned
    // 16-byte loads per row, inside the array.
    let rows = std::array::from_fn(|v| unsafe {
        _mm_packs_epi32(
            _mm_loadu_si128(p.add(2 * v)),
            _mm_loadu_si128(p.add(2 * v + 1)),
        )
    });
    // SAFETY: SSE2 is enabled in this function.
    let px = unsafe {
        let g = pass_sse2::<SHIFT1>(rows, BIAS1);
        transpose8_i16(pass_sse2::<SHIFT2>(transpose8_i16(g), BIAS2))
    };
    for y in (0..8).step_by(2) {
        // SAFETY: SSE2 is enabled in this function; writes out[y * stride..][..8] and
        // out[(y + 1) * stride..][..8], inside `out` by the assert above.
        unsafe {
            let bytes = _mm_packus_epi16(px[y], px[y + 1]);
            _mm_storel_epi64(out.as_mut_ptr().add(y * stride).cast::<__m128i>(), bytes);
            _mm_storel_epi64(
                out.as_mut_ptr().add((y + 1) * stride).cast::<__m128i>(),
                _mm_srli_si128::<8>(bytes),
            );
        }
    }
}

/// Coefficient rows `v` and `w` (each below 8) as i16 pairs `(F_v, F_w)`, saturated, in i32
/// lane `u` = column `u`: the input pairs a 256-bit pass over the columns takes.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn coefficient_pairs(coef: &[i32; 64], v: usize, w: usize) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::{
        __m256i, _mm256_loadu_si256, _mm256_packs_epi32, _mm256_setr_epi8, _mm256_shuffle_epi8,
    };
    assert!(v < 8 && w < 8, "a block has eight rows");
    let p = coef.as_ptr().cast::<__m256i>();
    // SAFETY: the caller promises AVX2; reads coef[8v..8v + 8] and coef[8w..8w + 8], inside
    // the array.
    unsafe {
        // Within each 128-bit lane, words 0-3 interleaved with words 4-7.
        let interleave = _mm256_setr_epi8(
            0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15, 0, 1, 8, 9, 2, 3, 10, 11, 4, 5,
            12, 13, 6, 7, 14, 15,
        );
        _mm256_shuffle_epi8(
            _mm256_packs_epi32(_mm256_loadu_si256(p.add(v)), _mm256_loadu_si256(p.add(w))),
            interleave,
        )
    }
}

/// [`dense8_portable`] with AVX2, on the same integers in the same operations, so with the
/// same result: each 1-D pass works on all eight columns (rows) at once in 256-bit lanes, as
/// [`dense8_avx512`] does, where SSE2 takes two halves of four. Without AVX-512's word
/// permutations, the transposes are unpacks within 128-bit lanes and one exchange of lanes:
/// the columns' results are packed two rows a vector, their halves exchanged so that columns
/// `u` and `u + 4` of a row share a lane, and three rounds of unpacks (words, dwords, qwords)
/// leave, in i32 lane `i`, the pairs of row `i` the rows' pass takes; their odd inputs are
/// paired as `(F1, F5)` and `(F3, F7)` (see [`butterflies`]). The pixels come back to rows by
/// two packs, a byte shuffle per 4x4 tile and one round of dword unpacks.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline(never)]
fn dense8_avx2(coef: &[i32; 64], out: &mut [u8], stride: usize) {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm256_castsi256_si128, _mm256_extracti128_si256, _mm256_packs_epi32,
        _mm256_packus_epi16, _mm256_permute2x128_si256, _mm256_setr_epi8, _mm256_shuffle_epi8,
        _mm256_unpackhi_epi16, _mm256_unpackhi_epi32, _mm256_unpackhi_epi64, _mm256_unpacklo_epi16,
        _mm256_unpacklo_epi32, _mm256_unpacklo_epi64, _mm_castsi128_pd, _mm_storeh_pd,
        _mm_storel_epi64,
    };
    assert!(out.len() >= 7 * stride + 8, "block runs past the plane");
    // SAFETY: AVX2 is enabled in this function.
    let pair = |v: usize, w: usize| unsafe { coefficient_pairs(coef, v, w) };
    // SAFETY: AVX2 is enabled in this function.
    let g = unsafe {
        butterflies::<_, SHIFT1, true>(pair(0, 4), pair(2, 6), pair(1, 5), pair(3, 7), BIAS1)
    };
    // Rows 2m and 2m + 1, saturated to words: columns 0-3 of each in the low lane, 4-7 in the
    // high one.
    let packed: [__m256i; 4] = std::array::from_fn(|m| _mm256_packs_epi32(g[2 * m], g[2 * m + 1]));
    // Columns 0-3 of rows (0, 1 | 4, 5), then their columns 4-7; the same for rows 2, 3, 6, 7.
    let low01 = _mm256_permute2x128_si256::<0x20>(packed[0], packed[2]);
    let high01 = _mm256_permute2x128_si256::<0x31>(packed[0], packed[2]);
    let low23 = _mm256_permute2x128_si256::<0x20>(packed[1], packed[3]);
    let high23 = _mm256_permute2x128_si256::<0x31>(packed[1], packed[3]);
    // Each dword lane j of a lane's row: the pair (column j, column j + 4). Rows (0 | 4),
    // (1 | 5), (2 | 6), (3 | 7).
    let r0 = _mm256_unpacklo_epi16(low01, high01);
    let r1 = _mm256_unpackhi_epi16(low01, high01);
    let r2 = _mm256_unpacklo_epi16(low23, high23);
    let r3 = _mm256_unpackhi_epi16(low23, high23);
    // Rows 0 and 1 (4 and 5): pairs (0, 4) and (1, 5) of each, then (2, 6) and (3, 7).
    let q0 = _mm256_unpacklo_epi32(r0, r1);
    let q1 = _mm256_unpackhi_epi32(r0, r1);
    let q2 = _mm256_unpacklo_epi32(r2, r3);
    let q3 = _mm256_unpackhi_epi32(r2, r3);
    // SAFETY: AVX2 is enabled in this function.
    let px = unsafe {
        butterflies::<_, SHIFT2, true>(
            _mm256_unpacklo_epi64(q0, q2),
            _mm256_unpacklo_epi64(q1, q3),
            _mm256_unpackhi_epi64(q0, q2),
            _mm256_unpackhi_epi64(q1, q3),
            BIAS2,
        )
    };
    // Pixel column x in px[x], rows 0-3 in the low lane and 4-7 in the high one: as bytes, a
    // lane holds four columns of four rows each, which the shuffle turns into four rows.
    let tile = _mm256_setr_epi8(
        0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10,
        14, 3, 7, 11, 15,
    );
    let columns = |x: usize| {
        _mm256_shuffle_epi8(
            _mm256_packus_epi16(
                _mm256_packs_epi32(px[x], px[x + 1]),
                _mm256_packs_epi32(px[x + 2], px[x + 3]),
            ),
            tile,
        )
    };
    let (left, right) = (columns(0), columns(4));
    // Rows (0, 1 | 4, 5) and (2, 3 | 6, 7), eight bytes each.
    let rows = [
        _mm256_unpacklo_epi32(left, right),
        _mm256_unpackhi_epi32(left, right),
    ];
    for (h, pair) in rows.into_iter().enumerate() {
        let lanes: [__m128i; 2] = [
            _mm256_castsi256_si128(pair),
            _mm256_extracti128_si256::<1>(pair),
        ];
        for (l, lane) in lanes.into_iter().enumerate() {
            let y = 4 * l + 2 * h;
            // SAFETY: writes out[y * stride..][..8] and out[(y + 1) * stride..][..8] for
            // y + 1 <= 7, inside `out` by the assert above.
            unsafe {
                let row = out.as_mut_ptr().add(y * stride);
                _mm_storel_epi64(row.cast(), lane);
                _mm_storeh_pd(row.add(stride).cast(), _mm_castsi128_pd(lane));
            }
        }
    }
}

/// Where in two 512-bit vectors of i16 (64 words, the first vector's then the second's)
/// [`dense8_avx512`] finds value `(i, j)` of an 8x8 matrix whose rows it packed from i32 lanes:
/// rows `2m` and `2m + 1` by one `vpackssdw` of 256 bits (columns 0-3 of each, then columns 4-7
/// of each), two such results a 512-bit vector.
#[cfg(target_arch = "x86_64")]
const fn packed_at(i: usize, j: usize) -> usize {
    32 * (i / 4) + 16 * ((i / 2) % 2) + 8 * (j / 4) + 4 * (i % 2) + j % 4
}

/// `vpermt2w` indices that gather, from an 8x8 matrix packed as [`packed_at`] places it, the
/// pairs a 1-D pass over its columns takes: for each row `i` (an i32 lane of 256 bits), its
/// values in the two columns of `pairs[0]` in the low 256 bits, in those of `pairs[1]` in the
/// high 256 bits.
#[cfg(target_arch = "x86_64")]
const fn pair_indices(pairs: [[usize; 2]; 2]) -> [i16; 32] {
    let mut idx = [0i16; 32];
    let mut h = 0;
    while h < 2 {
        let mut i = 0;
        while i < 8 {
            idx[16 * h + 2 * i] = packed_at(i, pairs[h][0]) as i16;
            idx[16 * h + 2 * i + 1] = packed_at(i, pairs[h][1]) as i16;
            i += 1;
        }
        h += 1;
    }
    idx
}

/// `vpermt2w` indices that put the pixels of the rows `2m + odd` of a block, whose columns were
/// packed as [`packed_at`] places rows (so row `x` there is pixel column `x`), in 128-bit
/// lane `m` in order: a `vpackuswb` of the two gathers then holds rows `2m` and `2m + 1` in
/// lane `m`, as bytes.
#[cfg(target_arch = "x86_64")]
const fn row_indices(odd: usize) -> [i16; 32] {
    let mut idx = [0i16; 32];
    let mut m = 0;
    while m < 4 {
        let mut x = 0;
        while x < 8 {
            idx[8 * m + x] = packed_at(x, 2 * m + odd) as i16;
            x += 1;
        }
        m += 1;
    }
    idx
}

#[cfg(target_arch = "x86_64")]
const PAIRS_EVEN: [i16; 32] = pair_indices([[0, 4], [2, 6]]);
#[cfg(target_arch = "x86_64")]
const PAIRS_ODD: [i16; 32] = pair_indices([[1, 3], [5, 7]]);
#[cfg(target_arch = "x86_64")]
const ROWS_EVEN: [i16; 32] = row_indices(0);
#[cfg(target_arch = "x86_64")]
const ROWS_ODD: [i16; 32] = row_indices(1);

/// [`dense8_portable`] with AVX-512 BW, on the same integers in the same operations, so with
/// the same result: each 1-D pass works on all eight columns (rows) at once in 256-bit
/// lanes (SSE2 takes two halves of four), and each transpose, with the pairing of inputs a
/// pass takes, is two word permutations across two 512-bit vectors (`vpermt2w`) instead of
/// 32 unpacks. Built with AVX-512 VL too, so that its 256-bit operations have 32 registers:
/// with 16, the passes' constants spilled to the stack and were loaded again.
///
/// Two blocks at once (512-bit passes, block pairs held back in the entropy decoder) measured
/// slower on Zen 4, which runs a 512-bit operation as two 256-bit halves, so a pair costs
/// nearly two blocks' arithmetic, and holding blocks back cost the entropy decoder's loop. On
/// Intel's Sapphire Rapids, which runs them whole, a pair took 20 ns a block against 27.5 ns
/// alone, yet the engine path did not gain (paired runs, 0.98-1.00): the transform's work
/// overlaps the Huffman decoding around it, which sets the pace (BENCHMARKS.md, session 59).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw,avx512vl")]
#[inline(never)]
fn dense8_avx512(coef: &[i32; 64], out: &mut [u8], stride: usize) {
    use std::arch::x86_64::{
        __m256i, __m512i, _mm256_packs_epi32, _mm512_castsi256_si512, _mm512_castsi512_si128,
        _mm512_castsi512_si256, _mm512_extracti32x4_epi32, _mm512_extracti64x4_epi64,
        _mm512_inserti64x4, _mm512_loadu_si512, _mm512_packus_epi16, _mm512_permutex2var_epi16,
        _mm_castsi128_pd, _mm_storeh_pd, _mm_storel_epi64,
    };
    assert!(out.len() >= 7 * stride + 8, "block runs past the plane");
    // SAFETY: AVX2 is enabled in this function.
    let pair = |v: usize, w: usize| unsafe { coefficient_pairs(coef, v, w) };
    // Eight rows of i32 lanes as 64 words, saturated, placed as `packed_at` says.
    let pack = |r: [__m256i; 8]| -> [__m512i; 2] {
        let two = |a: __m256i, b: __m256i| _mm512_inserti64x4::<1>(_mm512_castsi256_si512(a), b);
        [
            two(
                _mm256_packs_epi32(r[0], r[1]),
                _mm256_packs_epi32(r[2], r[3]),
            ),
            two(
                _mm256_packs_epi32(r[4], r[5]),
                _mm256_packs_epi32(r[6], r[7]),
            ),
        ]
    };
    // SAFETY: the indices are 64 bytes of i16, read unaligned.
    let indices = |idx: &[i16; 32]| unsafe { _mm512_loadu_si512(idx.as_ptr().cast()) };
    // SAFETY: AVX-512 BW and VL, and with them AVX2, are enabled in this function.
    let g = unsafe {
        butterflies::<_, SHIFT1, false>(pair(0, 4), pair(2, 6), pair(1, 3), pair(5, 7), BIAS1)
    };
    let [lo, hi] = pack(g);
    let even = _mm512_permutex2var_epi16(lo, indices(&PAIRS_EVEN), hi);
    let odd = _mm512_permutex2var_epi16(lo, indices(&PAIRS_ODD), hi);
    // SAFETY: as above.
    let px = unsafe {
        butterflies::<_, SHIFT2, false>(
            _mm512_castsi512_si256(even),
            _mm512_extracti64x4_epi64::<1>(even),
            _mm512_castsi512_si256(odd),
            _mm512_extracti64x4_epi64::<1>(odd),
            BIAS2,
        )
    };
    let [lo, hi] = pack(px);
    let bytes = _mm512_packus_epi16(
        _mm512_permutex2var_epi16(lo, indices(&ROWS_EVEN), hi),
        _mm512_permutex2var_epi16(lo, indices(&ROWS_ODD), hi),
    );
    let lanes = [
        _mm512_castsi512_si128(bytes),
        _mm512_extracti32x4_epi32::<1>(bytes),
        _mm512_extracti32x4_epi32::<2>(bytes),
        _mm512_extracti32x4_epi32::<3>(bytes),
    ];
    for (m, lane) in lanes.into_iter().enumerate() {
        // SAFETY: writes out[2m * stride..][..8] and out[(2m + 1) * stride..][..8], inside
        // `out` by the assert above.
        unsafe {
            let row = out.as_mut_ptr().add(2 * m * stride);
            _mm_storel_epi64(row.cast(), lane);
            _mm_storeh_pd(row.add(stride).cast(), _mm_castsi128_pd(lane));
        }
    }
}

/// One 1-D pass over eight vectors (inputs `f[0..8]`, lanes independent): the results
/// `(even ± odd + bias) >> SHIFT`, saturated to i16.
///
/// # Safety
/// The CPU must have SSE2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn pass_sse2<const SHIFT: i32>(
    f: [std::arch::x86_64::__m128i; 8],
    bias: i32,
) -> [std::arch::x86_64::__m128i; 8] {
    use std::arch::x86_64::{_mm_packs_epi32, _mm_unpackhi_epi16, _mm_unpacklo_epi16};
    // SAFETY: the caller promises SSE2, all these intrinsics need.
    unsafe {
        // Each half of the lanes (four, widened to i32) from its interleaved input pairs.
        let lo = butterflies::<_, SHIFT, false>(
            _mm_unpacklo_epi16(f[0], f[4]),
            _mm_unpacklo_epi16(f[2], f[6]),
            _mm_unpacklo_epi16(f[1], f[3]),
            _mm_unpacklo_epi16(f[5], f[7]),
            bias,
        );
        let hi = butterflies::<_, SHIFT, false>(
            _mm_unpackhi_epi16(f[0], f[4]),
            _mm_unpackhi_epi16(f[2], f[6]),
            _mm_unpackhi_epi16(f[1], f[3]),
            _mm_unpackhi_epi16(f[5], f[7]),
            bias,
        );
        std::array::from_fn(|k| _mm_packs_epi32(lo[k], hi[k]))
    }
}

/// The i32-lane operations a 1-D pass takes, for SSE2's 128-bit vectors and AVX2's 256-bit
/// ones (four or eight lanes at a time).
#[cfg(target_arch = "x86_64")]
trait I32Lanes: Copy {
    /// # Safety
    /// The CPU must have the vector's instruction set (SSE2 or AVX2); so for all below.
    unsafe fn splat(v: i32) -> Self;
    /// `pmaddwd`: each i32 lane the sum of its two i16 products.
    unsafe fn madd(a: Self, b: Self) -> Self;
    unsafe fn add(a: Self, b: Self) -> Self;
    unsafe fn sub(a: Self, b: Self) -> Self;
    unsafe fn shift_right<const SHIFT: i32>(a: Self) -> Self;
}

#[cfg(target_arch = "x86_64")]
impl I32Lanes for std::arch::x86_64::__m128i {
    #[inline(always)]
    unsafe fn splat(v: i32) -> Self {
        // SAFETY: the caller promises SSE2; so for the others.
        unsafe { std::arch::x86_64::_mm_set1_epi32(v) }
    }
    #[inline(always)]
    unsafe fn madd(a: Self, b: Self) -> Self {
        // SAFETY: as above.
        unsafe { std::arch::x86_64::_mm_madd_epi16(a, b) }
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        // SAFETY: as above.
        unsafe { std::arch::x86_64::_mm_add_epi32(a, b) }
    }
    #[inline(always)]
    unsafe fn sub(a: Self, b: Self) -> Self {
        // SAFETY: as above.
        unsafe { std::arch::x86_64::_mm_sub_epi32(a, b) }
    }
    #[inline(always)]
    unsafe fn shift_right<const SHIFT: i32>(a: Self) -> Self {
        // SAFETY: as above.
        unsafe { std::arch::x86_64::_mm_srai_epi32::<SHIFT>(a) }
    }
}

#[cfg(target_arch = "x86_64")]
impl I32Lanes for std::arch::x86_64::__m256i {
    #[inline(always)]
    unsafe fn splat(v: i32) -> Self {
        // SAFETY: the caller promises AVX2; so for the others.
        unsafe { std::arch::x86_64::_mm256_set1_epi32(v) }
    }
    #[inline(always)]
    unsafe fn madd(a: Self, b: Self) -> Self {
        // SAFETY: as above.
        unsafe { std::arch::x86_64::_mm256_madd_epi16(a, b) }
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        // SAFETY: as above.
        unsafe { std::arch::x86_64::_mm256_add_epi32(a, b) }
    }
    #[inline(always)]
    unsafe fn sub(a: Self, b: Self) -> Self {
        // SAFETY: as above.
        unsafe { std::arch::x86_64::_mm256_sub_epi32(a, b) }
    }
    #[inline(always)]
    unsafe fn shift_right<const SHIFT: i32>(a: Self) -> Self {
        // SAFETY: as above.
        unsafe { std::arch::x86_64::_mm256_srai_epi32::<SHIFT>(a) }
    }
}

/// The arithmetic of one 1-D pass on lanes of interleaved input pairs (each i32 lane holds
/// `(F0, F4)` in `p04`, and so on): outputs `k` and `7 - k` as `(even ± odd + bias) >> SHIFT`,
/// in i32 lanes. [`dense8_portable`]'s `inverse`, lane by lane. The odd inputs come as
/// `(F1, F3)` and `(F5, F7)`, or with `PAIRED15` as `(F1, F5)` and `(F3, F7)`: each odd part is
/// then the same four exact products (`pmaddwd` cannot overflow with these weights) summed in
/// another grouping, so the same i32 either way.
///
/// # Safety
/// The CPU must have `V`'s instruction set.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn butterflies<V: I32Lanes, const SHIFT: i32, const PAIRED15: bool>(
    p04: V,
    p26: V,
    odd_a: V,
    odd_b: V,
    bias: i32,
) -> [V; 8] {
    // SAFETY: the caller promises `V`'s instruction set, all these operations need.
    unsafe {
        let pair = |w: [i16; 2]| V::splat((i32::from(w[1]) << 16) | i32::from(w[0] as u16));
        let bias = V::splat(bias);
        let a0 = V::add(V::madd(p04, pair(EVEN[0])), bias);
        let a1 = V::add(V::madd(p04, pair(EVEN[1])), bias);
        let b0 = V::madd(p26, pair(EVEN[2]));
        let b1 = V::madd(p26, pair(EVEN[3]));
        let even = [
            V::add(a0, b0),
            V::add(a1, b1),
            V::sub(a1, b1),
            V::sub(a0, b0),
        ];
        let mut x = [bias; 8];
        for k in 0..4 {
            // The weights of (F1, F3, F5, F7) for output k, in the inputs' pairing.
            let [w1, w3, w5, w7] = ODD[k];
            let (wa, wb) = if PAIRED15 {
                ([w1, w5], [w3, w7])
            } else {
                ([w1, w3], [w5, w7])
            };
            let odd = V::add(V::madd(odd_a, pair(wa)), V::madd(odd_b, pair(wb)));
            x[k] = V::shift_right::<SHIFT>(V::add(even[k], odd));
            x[7 - k] = V::shift_right::<SHIFT>(V::sub(even[k], odd));
        }
        x
    }
}

/// Transposes an 8x8 matrix of i16 held as eight row vectors.
///
/// # Safety
/// The CPU must have SSE2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose8_i16(r: [std::arch::x86_64::__m128i; 8]) -> [std::arch::x86_64::__m128i; 8] {
    use std::arch::x86_64::{
        _mm_unpackhi_epi16, _mm_unpackhi_epi32, _mm_unpackhi_epi64, _mm_unpacklo_epi16,
        _mm_unpacklo_epi32, _mm_unpacklo_epi64,
    };
    // SAFETY: the caller promises SSE2, all these intrinsics need.
    unsafe {
        // Pairs of rows interleaved, then pairs of pairs, then halves: column j ends in vector j.
        let t = [
            _mm_unpacklo_epi16(r[0], r[1]),
            _mm_unpackhi_epi16(r[0], r[1]),
            _mm_unpacklo_epi16(r[2], r[3]),
            _mm_unpackhi_epi16(r[2], r[3]),
            _mm_unpacklo_epi16(r[4], r[5]),
            _mm_unpackhi_epi16(r[4], r[5]),
            _mm_unpacklo_epi16(r[6], r[7]),
            _mm_unpackhi_epi16(r[6], r[7]),
        ];
        let u = [
            _mm_unpacklo_epi32(t[0], t[2]),
            _mm_unpackhi_epi32(t[0], t[2]),
            _mm_unpacklo_epi32(t[1], t[3]),
            _mm_unpackhi_epi32(t[1], t[3]),
            _mm_unpacklo_epi32(t[4], t[6]),
            _mm_unpackhi_epi32(t[4], t[6]),
            _mm_unpacklo_epi32(t[5], t[7]),
            _mm_unpackhi_epi32(t[5], t[7]),
        ];
        [
            _mm_unpacklo_epi64(u[0], u[4]),
            _mm_unpackhi_epi64(u[0], u[4]),
            _mm_unpacklo_epi64(u[1], u[5]),
            _mm_unpackhi_epi64(u[1], u[5]),
            _mm_unpacklo_epi64(u[2], u[6]),
            _mm_unpackhi_epi64(u[2], u[6]),
            _mm_unpacklo_epi64(u[3], u[7]),
            _mm_unpackhi_epi64(u[3], u[7]),
        ]
    }
}

/// A dense full-size block: [`dense8_avx512`], [`dense8_avx2`] or [`dense8_sse2`] on x86-64,
/// [`dense8_portable`] elsewhere (the same result).
#[inline(always)]
fn dense8(avx2: bool, avx512: bool, coef: &[i32; 64], out: &mut [u8], stride: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512 {
            // SAFETY: AVX-512 BW and VL support was detected at run time in `Idct::new`.
            return unsafe { dense8_avx512(coef, out, stride) };
        }
        if avx2 {
            // SAFETY: AVX2 support was detected at run time in `Idct::new`.
            return unsafe { dense8_avx2(coef, out, stride) };
        }
        // SAFETY: SSE2 is part of the x86-64 baseline: every CPU this build runs on has it.
        unsafe { dense8_sse2(coef, out, stride) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (avx2, avx512);
        dense8_portable(coef, out, stride)
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
        for (d, &a) in out[y * stride..y * stride + n].iter_mut().zip(&acc) {
            *d = clamp(a);
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
        for n in 1..=8 {
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
        for n in 2..8 {
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

    /// A pseudo-random block shaped like a photo's: a DC anywhere in range, AC coefficients
    /// that shrink with frequency (`spread` scales them).
    fn photo_like_block(state: &mut u32, spread: i32) -> [i32; 64] {
        let mut coef = [0i32; 64];
        for (i, c) in coef.iter_mut().enumerate() {
            *state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let r = (*state >> 8) as i32;
            let (v, u) = ((i / 8) as i32, (i % 8) as i32);
            let range = if i == 0 { 1024 } else { spread / (1 + u + v) };
            *c = r % (2 * range + 1) - range;
        }
        coef
    }

    /// The exact 2-D inverse in f64, rounded to bytes.
    fn exact_block(coef: &[i32; 64]) -> [u8; 64] {
        let t = |x: usize, u: usize| {
            let c = if u == 0 {
                std::f64::consts::FRAC_1_SQRT_2
            } else {
                1.0
            };
            0.5 * c * (((2 * x + 1) * u) as f64 * std::f64::consts::PI / 16.0).cos()
        };
        std::array::from_fn(|i| {
            let (y, x) = (i / 8, i % 8);
            let mut acc = 128.0;
            for v in 0..8 {
                for u in 0..8 {
                    acc += t(y, v) * t(x, u) * f64::from(coef[v * 8 + u]);
                }
            }
            acc.round().clamp(0.0, 255.0) as u8
        })
    }

    #[test]
    fn fixed_point_dense_block_is_within_one_level_of_the_exact_transform() {
        let idct = Idct::new();
        let mut state = 7u32;
        let (mut off, mut total) = (0usize, 0usize);
        for round in 0..3000 {
            let coef = photo_like_block(&mut state, [64, 400, 1500][round % 3]);
            let mut got = [0u8; 64];
            idct.block(&coef, 63, 8, &mut got, 8);
            let want = exact_block(&coef);
            for (&g, &w) in got.iter().zip(&want) {
                let d = (i32::from(g) - i32::from(w)).abs();
                assert!(d <= 1, "{coef:?}: {g} against {w}");
                off += usize::from(d != 0);
                total += 1;
            }
        }
        // Off by one only where the exact value sits near a half (0.9% of samples here).
        assert!(off * 50 < total, "{off} of {total} samples off by one");
    }

    /// libjpeg's accurate 1-D inverse as its flowgraph runs it (rotations, then butterflies),
    /// on i64, before the final shift.
    fn flowgraph(x: [i64; 8]) -> [i64; 8] {
        let k = K.map(i64::from);
        let rot = (x[2] + x[6]) * k[2];
        let (even_a, even_b) = (rot + x[2] * k[3], rot - x[6] * k[7]);
        let (sum, diff) = ((x[0] + x[4]) << 13, (x[0] - x[4]) << 13);
        let e = [sum + even_a, diff + even_b, diff - even_b, sum - even_a];
        let z5 = (x[7] + x[3] + x[5] + x[1]) * k[5];
        let (z1, z2) = (-(x[7] + x[1]) * k[4], -(x[5] + x[3]) * k[10]);
        let (z3, z4) = (-(x[7] + x[3]) * k[8] + z5, -(x[5] + x[1]) * k[1] + z5);
        let o = [
            x[1] * k[6] + z1 + z4,
            x[3] * k[11] + z2 + z3,
            x[5] * k[9] + z2 + z4,
            x[7] * k[0] + z1 + z3,
        ];
        std::array::from_fn(|i| {
            if i < 4 {
                e[i] + o[i]
            } else {
                e[7 - i] - o[7 - i]
            }
        })
    }

    #[test]
    fn dense_block_equals_libjpegs_flowgraph_evaluated_directly() {
        let idct = Idct::new();
        let mut state = 3u32;
        for round in 0..3000 {
            let coef = photo_like_block(&mut state, [64, 400, 1500][round % 3]);
            let mut cols = [[0i64; 8]; 8];
            for u in 0..8 {
                let r = flowgraph(std::array::from_fn(|v| i64::from(coef[v * 8 + u])));
                for y in 0..8 {
                    cols[y][u] = (r[y] + (1 << 10)) >> 11;
                }
            }
            let want: [u8; 64] = std::array::from_fn(|i| {
                let r = flowgraph(cols[i / 8]);
                (((r[i % 8] + (1 << 17)) >> 18) + 128).clamp(0, 255) as u8
            });
            let mut got = [0u8; 64];
            idct.block(&coef, 63, 8, &mut got, 8);
            assert_eq!(got, want, "{coef:?}");
        }
        // A flat block rounds half up, as libjpeg's shortcut for it does.
        for dc in [-1028, -1027, -4, -3, 4, 12, 1020] {
            let mut coef = [0i32; 64];
            coef[0] = dc;
            let mut got = [0u8; 64];
            idct.block(&coef, 0, 8, &mut got, 8);
            assert_eq!(
                i32::from(got[0]),
                (((dc + 4) >> 3) + 128).clamp(0, 255),
                "{dc}"
            );
        }
    }

    /// Asserts that `transform` writes the bytes of [`dense8_portable`] for 4000 photo-like
    /// blocks, every seventh with corrupt-stream extremes (inputs and columns saturate), and
    /// leaves the bytes between its rows alone.
    fn agrees_with_portable(seed: u32, transform: impl Fn(&[i32; 64], &mut [u8], usize)) {
        let mut state = seed;
        for round in 0..4000 {
            let mut coef = photo_like_block(&mut state, [400, 1500, 8000][round % 3]);
            if round % 7 == 0 {
                for c in coef.iter_mut().step_by(3) {
                    *c = if *c > 0 { i32::MAX / 3 } else { i32::MIN / 5 };
                }
            }
            // Rows 10 bytes apart, each followed by bytes the block must leave alone.
            let (mut a, mut b) = ([7u8; 80], [7u8; 80]);
            dense8_portable(&coef, &mut a, 10);
            transform(&coef, &mut b, 10);
            assert_eq!(a, b, "{coef:?}");
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn sse2_and_portable_dense_blocks_agree_exactly_even_when_saturating() {
        // SAFETY: every x86-64 CPU has SSE2.
        agrees_with_portable(12345, |c, o, s| unsafe { dense8_sse2(c, o, s) });
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn avx2_and_portable_dense_blocks_agree_exactly_even_when_saturating() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("no AVX2 on this CPU: nothing to compare");
            return;
        }
        // SAFETY: the CPU has AVX2 (checked above).
        agrees_with_portable(777, |c, o, s| unsafe { dense8_avx2(c, o, s) });
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn avx512_and_portable_dense_blocks_agree_exactly_even_when_saturating() {
        if !(std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl"))
        {
            eprintln!("no AVX-512 BW and VL on this CPU: nothing to compare");
            return;
        }
        // SAFETY: the CPU has AVX-512 BW and VL (checked above).
        agrees_with_portable(54321, |c, o, s| unsafe { dense8_avx512(c, o, s) });
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_packed_matrix_layout_places_each_value_once() {
        let mut seen = [false; 64];
        for i in 0..8 {
            for j in 0..8 {
                assert!(!std::mem::replace(&mut seen[packed_at(i, j)], true));
            }
        }
    }

    #[test]
    fn avx2_and_generic_builds_agree_exactly() {
        let idct = Idct::new();
        let mut coef = [0i32; 64];
        for (i, c) in coef.iter_mut().enumerate() {
            *c = ((i as i32 * 37) % 91 - 45) * 3;
        }
        for n in 2..=8 {
            let i = n - 1;
            let (mut a, mut b) = ([0u8; 64], [0u8; 64]);
            if n == 8 {
                dense8_portable(&coef, &mut a, 8);
            } else {
                block_generic(&idct.t[i], &idct.tt[i], &coef, n, n, n, &mut a, 8);
            }
            idct.block(&coef, 63, n, &mut b, 8);
            assert_eq!(a, b, "n={n}");
        }
    }
}
