//! YCbCr -> RGB conversion (libjpeg's 16-bit fixed point): the portable code and the AVX2,
//! AVX-512 VBMI and SSSE3 kernels side by side, chosen at run time.

/// libjpeg's YCbCr -> RGB in 16-bit fixed point: R, G and B are computed as planes in chunks
/// (vectorized; an AVX2 or AVX-512 VBMI kernel is chosen at run time) and then interleaved.
pub(super) struct YccTables {
    /// AVX2 was detected at run time.
    pub avx2: bool,
    /// AVX-512 VBMI (and BW) too: [`ycc_vbmi`]'s byte permutations.
    vbmi: bool,
}

impl YccTables {
    pub fn new() -> Self {
        #[cfg(target_arch = "x86_64")]
        let (avx2, vbmi) = (
            std::arch::is_x86_feature_detected!("avx2"),
            std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vbmi"),
        );
        #[cfg(not(target_arch = "x86_64"))]
        let (avx2, vbmi) = (false, false);
        Self { avx2, vbmi }
    }

    pub fn convert(&self, y: &[u8], cb: &[u8], cr: &[u8], out: &mut [u8]) {
        #[cfg(target_arch = "x86_64")]
        if self.vbmi {
            // SAFETY: AVX-512 BW and VBMI support was detected at run time in `new`.
            unsafe { ycc_vbmi(y, cb, cr, out) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: AVX2 support was detected at run time in `YccTables::new`.
            unsafe { ycc_avx2(y, cb, cr, out) };
            return;
        }
        ycc_generic(y, cb, cr, out);
    }
}

/// [`ycc_generic`]'s result with AVX2: 16 pixels at a time in 16-bit lanes by [`ycc16_avx2`],
/// the last `len % 16` by the chunked code compiled for AVX2. Safe: only calling it needs AVX2
/// (`unsafe` at the call, where the CPU was checked).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn ycc_avx2(y: &[u8], cb: &[u8], cr: &[u8], out: &mut [u8]) {
    let n = y.len().min(cb.len()).min(cr.len()).min(out.len() / 3);
    let whole = n / 16 * 16;
    for i in (0..whole).step_by(16) {
        ycc16_avx2(
            y[i..i + 16].try_into().expect("16 pixels"),
            cb[i..i + 16].try_into().expect("16 pixels"),
            cr[i..i + 16].try_into().expect("16 pixels"),
            (&mut out[3 * i..3 * i + 48]).try_into().expect("48 bytes"),
        );
    }
    ycc_chunks::<true>(
        &y[whole..n],
        &cb[whole..n],
        &cr[whole..n],
        &mut out[3 * whole..],
    );
}

/// Sixteen pixels of libjpeg's conversion, the same integers as [`ycc_chunks`]: each product
/// whose constant does not fit an i16 is split into a multiple of 2^16, which passes through
/// the shift whole, and a remainder that does (`91881 = 2^16 + 26345`,
/// `-46802 = -2^16 + 18734`, `116130 = 2^17 - 14942`), so every term is one `pmaddwd` of
/// interleaved i16 pairs. The sums fit an i16 before the saturating pack to bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn ycc16_avx2(y: &[u8; 16], cb: &[u8; 16], cr: &[u8; 16], out: &mut [u8; 48]) {
    let [r, g, b] = ycc16_planes(y, cb, cr);
    store_rgb16(r, g, b, out);
}

/// [`ycc16_avx2`]'s arithmetic: the 16 pixels' R, G and B in i16 lanes, in order.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn ycc16_planes(y: &[u8; 16], cb: &[u8; 16], cr: &[u8; 16]) -> [std::arch::x86_64::__m256i; 3] {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128};
    // SAFETY: 16-byte loads of 16-byte arrays; unaligned loads are allowed.
    let load = |p: &[u8; 16]| unsafe { _mm_loadu_si128(p.as_ptr().cast::<__m128i>()) };
    ycc16(load(y), load(cb), load(cr))
}

/// libjpeg's conversion of the 16 pixels whose Y, Cb and Cr bytes are `y`, `cb` and `cr`
/// (lane `i` of each): their R, G and B in i16 lanes, in order and not yet saturated (a
/// saturating pack to bytes, or a clamp to 0..=255, gives the decoders' bytes).
///
/// # Safety
/// Safe to call from code compiled for AVX2; anywhere else the CPU must support AVX2, which
/// the caller checks first.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub fn ycc16(
    y: std::arch::x86_64::__m128i,
    cb: std::arch::x86_64::__m128i,
    cr: std::arch::x86_64::__m128i,
) -> [std::arch::x86_64::__m256i; 3] {
    ycc_lanes!(x16, y, cb, cr)
}

/// [`ycc16`] for 32 pixels at once, in AVX-512's 32 i16 lanes: the same integers.
///
/// # Safety
/// Safe to call from code compiled for AVX-512 BW; anywhere else the CPU must support it,
/// which the caller checks first.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw")]
#[inline]
pub fn ycc32(
    y: std::arch::x86_64::__m256i,
    cb: std::arch::x86_64::__m256i,
    cr: std::arch::x86_64::__m256i,
) -> [std::arch::x86_64::__m512i; 3] {
    ycc_lanes!(x32, y, cb, cr)
}

/// The 16-bit lane operations of the conversion under one set of names, for AVX2's 16 lanes
/// (`x16`) and AVX-512's 32 (`x32`), so that [`ycc_lanes`] writes its arithmetic once.
#[cfg(target_arch = "x86_64")]
mod lanes {
    pub mod x16 {
        pub use std::arch::x86_64::{
            _mm256_add_epi16 as add16, _mm256_add_epi32 as add32, _mm256_cvtepu8_epi16 as widen,
            _mm256_madd_epi16 as madd, _mm256_packs_epi32 as packs32, _mm256_set1_epi16 as splat16,
            _mm256_set1_epi32 as splat32, _mm256_srai_epi32 as srai32, _mm256_sub_epi16 as sub16,
            _mm256_unpackhi_epi16 as unpackhi16, _mm256_unpacklo_epi16 as unpacklo16,
        };
    }
    pub mod x32 {
        pub use std::arch::x86_64::{
            _mm512_add_epi16 as add16, _mm512_add_epi32 as add32, _mm512_cvtepu8_epi16 as widen,
            _mm512_madd_epi16 as madd, _mm512_packs_epi32 as packs32, _mm512_set1_epi16 as splat16,
            _mm512_set1_epi32 as splat32, _mm512_srai_epi32 as srai32, _mm512_sub_epi16 as sub16,
            _mm512_unpackhi_epi16 as unpackhi16, _mm512_unpacklo_epi16 as unpacklo16,
        };
    }
}

/// The body of [`ycc16`] and [`ycc32`] over the lanes of `lanes::$l`, for functions compiled
/// with that width's features: each product whose constant does not fit an i16 is split into
/// a multiple of 2^16, which passes through the shift whole, and a remainder that does
/// (`91881 = 2^16 + 26345`, `-46802 = -2^16 + 18734`, `116130 = 2^17 - 14942`), so every term
/// is one multiply-add of interleaved i16 pairs.
#[cfg(target_arch = "x86_64")]
macro_rules! ycc_lanes {
    ($l:ident, $y:expr, $cb:expr, $cr:expr) => {{
        use lanes::$l as l;
        let pair = |a: i16, b: i16| l::splat32((i32::from(b) << 16) | i32::from(a as u16));
        let mid = l::splat16(128);
        let yv = l::widen($y);
        let cbv = l::sub16(l::widen($cb), mid);
        let crv = l::sub16(l::widen($cr), mid);
        // `(a * wa + b * wb) >> 16` for the lanes of `a` and `b`: unpacking and packing both
        // work within 128-bit lanes, so the values come back in order.
        let term = |a, b, wa: i16, wb: i16| {
            let w = pair(wa, wb);
            let lo = l::srai32::<16>(l::madd(l::unpacklo16(a, b), w));
            let hi = l::srai32::<16>(l::madd(l::unpackhi16(a, b), w));
            l::packs32(lo, hi)
        };
        // The rounding half, 2^15, rides in as the weight of a lane of minus ones (an i16
        // holds -2^15 but not 2^15); Cb and Cr fill both lanes of green's pair, so its half
        // is added.
        let minus_ones = l::splat16(-1);
        let r = l::add16(l::add16(yv, crv), term(crv, minus_ones, 26_345, i16::MIN));
        let g = {
            let (w, half) = (pair(-22_554, 18_734), l::splat32(1 << 15));
            let lo = l::madd(l::unpacklo16(cbv, crv), w);
            let hi = l::madd(l::unpackhi16(cbv, crv), w);
            let lo = l::srai32::<16>(l::add32(lo, half));
            let hi = l::srai32::<16>(l::add32(hi, half));
            l::add16(l::sub16(yv, crv), l::packs32(lo, hi))
        };
        let b = l::add16(
            l::add16(yv, l::add16(cbv, cbv)),
            term(cbv, minus_ones, -14_942, i16::MIN),
        );
        [r, g, b]
    }};
}
#[cfg(target_arch = "x86_64")]
use ycc_lanes;

/// [`ycc_avx2`] with AVX-512 VBMI: 32 pixels a step, their R, G and B computed as
/// [`ycc16_planes`] computes them, 16 at a time, then saturated to bytes and interleaved by two
/// byte permutations across two vectors (`vpermt2b`) instead of eighteen shuffles; the rest
/// by [`ycc_avx2`]. (With [`ycc32`]'s 512-bit lanes instead the CPU path ran 1.5% slower in
/// paired runs, presumably as its unpacks and packs all wait on the one port that shuffles
/// 512 bits.) Safe: only calling it needs AVX-512 BW and VBMI (`unsafe` at the call,
/// where the CPU was checked).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw,avx512vbmi")]
fn ycc_vbmi(y: &[u8], cb: &[u8], cr: &[u8], out: &mut [u8]) {
    use std::arch::x86_64::{
        __m256i, __m512i, _mm256_packus_epi16, _mm256_storeu_si256, _mm512_castsi256_si512,
        _mm512_castsi512_si256, _mm512_inserti64x4, _mm512_loadu_si512, _mm512_permutex2var_epi8,
        _mm512_storeu_si512,
    };
    let n = y.len().min(cb.len()).min(cr.len()).min(out.len() / 3);
    let whole = n / 32 * 32;
    // SAFETY: 64 bytes, read unaligned.
    let indices = |idx: &[u8; 64]| unsafe { _mm512_loadu_si512(idx.as_ptr().cast::<__m512i>()) };
    let (first, last) = (indices(&RGB32[0]), indices(&RGB32[1]));
    for i in (0..whole).step_by(32) {
        let half = |at: usize| {
            ycc16_planes(
                y[at..at + 16].try_into().expect("16 pixels"),
                cb[at..at + 16].try_into().expect("16 pixels"),
                cr[at..at + 16].try_into().expect("16 pixels"),
            )
        };
        let ([r0, g0, b0], [r1, g1, b1]) = (half(i), half(i + 16));
        // As [`RGB32`] describes: red and green in one vector, blue in another.
        let rg = _mm512_inserti64x4::<1>(
            _mm512_castsi256_si512(_mm256_packus_epi16(r0, g0)),
            _mm256_packus_epi16(r1, g1),
        );
        let bb = _mm512_castsi256_si512(_mm256_packus_epi16(b0, b1));
        let px = &mut out[3 * i..3 * i + 96];
        // SAFETY: a 64-byte and a 32-byte store inside the 96 bytes of `px`.
        unsafe {
            _mm512_storeu_si512(
                px.as_mut_ptr().cast::<__m512i>(),
                _mm512_permutex2var_epi8(rg, first, bb),
            );
            _mm256_storeu_si256(
                px.as_mut_ptr().add(64).cast::<__m256i>(),
                _mm512_castsi512_si256(_mm512_permutex2var_epi8(rg, last, bb)),
            );
        }
    }
    ycc_avx2(
        &y[whole..n],
        &cb[whole..n],
        &cr[whole..n],
        &mut out[3 * whole..],
    );
}

/// The `vpermt2b` indices of [`ycc_vbmi`]: byte `j` of 32 pixels' 96 interleaved RGB bytes
/// (`RGB32[j / 64][j % 64]`), from two tables. The first holds red and green, packed from the
/// pixels' two halves of 16 (in 16-byte lanes: red then green of pixels 0-7, of 8-15, of 16-23,
/// of 24-31); the second (indices from 64) blue, packed from the two halves at once (pixels
/// 0-7, 16-23, 8-15, 24-31).
#[cfg(target_arch = "x86_64")]
const RGB32: [[u8; 64]; 2] = {
    let mut idx = [[0u8; 64]; 2];
    let mut j = 0;
    while j < 96 {
        let (p, c) = (j / 3, j % 3);
        let (eighth, at) = (p / 8, p % 8);
        idx[j / 64][j % 64] = match c {
            0 => 16 * eighth + at,
            1 => 16 * eighth + 8 + at,
            _ => 64 + [0, 16, 8, 24][eighth] + at,
        } as u8;
        j += 1;
    }
    idx
};

/// Saturates 16 pixels' R, G and B (i16 lanes, in order) to bytes and interleaves them into 48
/// RGB bytes: the last step of the JPEG and the video colour conversions.
///
/// # Safety
/// Safe to call from code compiled for AVX2 (as both callers are); anywhere else the CPU must
/// support AVX2, which the caller checks first.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub fn store_rgb16(
    r: std::arch::x86_64::__m256i,
    g: std::arch::x86_64::__m256i,
    b: std::arch::x86_64::__m256i,
    out: &mut [u8; 48],
) {
    use std::arch::x86_64::{
        _mm256_castsi256_si128, _mm256_extracti128_si256, _mm256_packus_epi16,
        _mm256_permute4x64_epi64,
    };
    // Saturate to bytes: [r0-7 g0-7 | r8-15 g8-15] -> [r0-15 | g0-15], and b likewise.
    let rg = _mm256_permute4x64_epi64::<0xD8>(_mm256_packus_epi16(r, g));
    let bb = _mm256_permute4x64_epi64::<0xD8>(_mm256_packus_epi16(b, b));
    let planes = [
        _mm256_castsi256_si128(rg),
        _mm256_extracti128_si256::<1>(rg),
        _mm256_castsi256_si128(bb),
    ];
    // SAFETY: AVX2 (and with it SSSE3) is enabled here; `out` holds 48 bytes.
    unsafe { interleave16(planes, out) };
}

pub(super) fn ycc_generic(y: &[u8], cb: &[u8], cr: &[u8], out: &mut [u8]) {
    ycc_chunks::<false>(y, cb, cr, out);
}

/// `PLANAR_TO_RGB[k][c]`: the byte shuffle that puts channel `c` of 16 pixels into its places
/// in the `k`-th 16 bytes of their 48 interleaved RGB bytes (0x80: leave zero).
#[cfg(target_arch = "x86_64")]
const PLANAR_TO_RGB: [[[u8; 16]; 3]; 3] = {
    let mut m = [[[0x80u8; 16]; 3]; 3];
    let mut byte = 0;
    while byte < 48 {
        m[byte / 16][byte % 3][byte % 16] = (byte / 3) as u8;
        byte += 1;
    }
    m
};

/// Interleaves the first `n` pixels of planar R, G and B into `out`, 16 pixels per three
/// byte shuffles per output vector.
///
/// # Safety
/// The CPU must support SSSE3 (implied by AVX2, which the only caller has checked).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn interleave_x86(r: &[u8; 64], g: &[u8; 64], b: &[u8; 64], n: usize, out: &mut [u8]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128};
    let full = n / 16;
    for blk in 0..full {
        let dst: &mut [u8; 48] = (&mut out[blk * 48..blk * 48 + 48])
            .try_into()
            .expect("48 bytes");
        // SAFETY: each load reads 16 bytes at `blk * 16 <= 48` of a 64-byte array (unaligned
        // loads are allowed); the caller promises SSSE3.
        unsafe {
            let at = |p: &[u8; 64]| _mm_loadu_si128(p.as_ptr().add(blk * 16).cast::<__m128i>());
            interleave16([at(r), at(g), at(b)], dst);
        }
    }
    for i in full * 16..n {
        out[3 * i] = r[i];
        out[3 * i + 1] = g[i];
        out[3 * i + 2] = b[i];
    }
}

/// Interleaves 16 pixels of planar R, G and B (one vector each) into 48 RGB bytes, three byte
/// shuffles per output vector.
///
/// # Safety
/// The CPU must support SSSE3.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn interleave16(planes: [std::arch::x86_64::__m128i; 3], out: &mut [u8; 48]) {
    use std::arch::x86_64::{
        __m128i, _mm_loadu_si128, _mm_or_si128, _mm_shuffle_epi8, _mm_storeu_si128,
    };
    for k in 0..3 {
        // SAFETY: the caller promises SSSE3; the masks are 16-byte arrays, and the store writes
        // bytes 16k..16k + 16 of the 48-byte array (unaligned accesses are allowed).
        unsafe {
            let mask = |c: usize| _mm_loadu_si128(PLANAR_TO_RGB[k][c].as_ptr().cast::<__m128i>());
            let v = _mm_or_si128(
                _mm_or_si128(
                    _mm_shuffle_epi8(planes[0], mask(0)),
                    _mm_shuffle_epi8(planes[1], mask(1)),
                ),
                _mm_shuffle_epi8(planes[2], mask(2)),
            );
            _mm_storeu_si128(out.as_mut_ptr().add(16 * k).cast::<__m128i>(), v);
        }
    }
}

#[inline(always)]
fn ycc_chunks<const X86_SIMD: bool>(y: &[u8], cb: &[u8], cr: &[u8], out: &mut [u8]) {
    const CHUNK: usize = 64;
    const HALF: i32 = 1 << 15;
    for (((y, cb), cr), out) in y
        .chunks(CHUNK)
        .zip(cb.chunks(CHUNK))
        .zip(cr.chunks(CHUNK))
        .zip(out.chunks_mut(3 * CHUNK))
    {
        let n = y.len();
        // Whole chunks only (a short one is padded): a constant trip count vectorizes with no
        // scalar remainder loop, which a row width that is not a multiple of 32 would need.
        let (mut ys, mut cbs, mut crs) = ([0u8; CHUNK], [128u8; CHUNK], [128u8; CHUNK]);
        ys[..n].copy_from_slice(y);
        cbs[..n].copy_from_slice(cb);
        crs[..n].copy_from_slice(cr);
        let (mut r, mut g, mut b) = ([0u8; CHUNK], [0u8; CHUNK], [0u8; CHUNK]);
        for i in 0..CHUNK {
            let (yv, cbv, crv) = (
                i32::from(ys[i]),
                i32::from(cbs[i]) - 128,
                i32::from(crs[i]) - 128,
            );
            r[i] = (yv + ((91_881 * crv + HALF) >> 16)).clamp(0, 255) as u8;
            g[i] = (yv + ((-22_554 * cbv - 46_802 * crv + HALF) >> 16)).clamp(0, 255) as u8;
            b[i] = (yv + ((116_130 * cbv + HALF) >> 16)).clamp(0, 255) as u8;
        }
        #[cfg(target_arch = "x86_64")]
        if X86_SIMD {
            // SAFETY: `X86_SIMD` is true only in `ycc_avx2`, called after AVX2 was detected.
            unsafe { interleave_x86(&r, &g, &b, n, out) };
            continue;
        }
        for (i, px) in out.chunks_exact_mut(3).enumerate() {
            px[0] = r[i];
            px[1] = g[i];
            px[2] = b[i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simd_and_portable_colour_conversion_agree_at_every_row_width() {
        let mut x = 7u32;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        };
        let tables = YccTables::new();
        for w in [
            1, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 95, 96, 100, 224, 501,
        ] {
            let planes: Vec<Vec<u8>> = (0..3).map(|_| (0..w).map(|_| next()).collect()).collect();
            let (mut fast, mut portable) = (vec![0u8; 3 * w], vec![0u8; 3 * w]);
            tables.convert(&planes[0], &planes[1], &planes[2], &mut fast);
            ycc_generic(&planes[0], &planes[1], &planes[2], &mut portable);
            assert_eq!(fast, portable, "width {w}");
            // Mid-grey chroma leaves luma unchanged.
            let grey = vec![128u8; w];
            tables.convert(&planes[0], &grey, &grey, &mut fast);
            assert!(fast
                .chunks(3)
                .zip(&planes[0])
                .all(|(px, &y)| px == [y, y, y]));
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn ycc32_gives_ycc16s_values_for_every_chroma_pair() {
        use std::arch::x86_64::{__m256i, __m512i};
        if !(std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("avx512bw"))
        {
            return;
        }
        let lanes = |v: __m512i| -> [i16; 32] {
            // SAFETY: both are 64 bytes of plain data.
            unsafe { std::mem::transmute(v) }
        };
        let halves = |v: [__m256i; 2]| -> [i16; 32] {
            // SAFETY: both are 64 bytes of plain data.
            unsafe { std::mem::transmute(v) }
        };
        for luma in [0u8, 1, 100, 128, 254, 255] {
            for cb in 0..=255u8 {
                // 32 pixels: this Cb with every Cr in eight steps, lumas around `luma`.
                for step in 0..8u8 {
                    let y: [u8; 32] = std::array::from_fn(|i| luma.wrapping_add(i as u8 % 3));
                    let cr: [u8; 32] = std::array::from_fn(|i| step * 32 + i as u8);
                    let cb = [cb; 32];
                    // SAFETY: AVX2 and AVX-512 BW were detected above; the loads read the
                    // arrays' own bytes.
                    let (wide, narrow) = unsafe {
                        use std::arch::x86_64::{_mm256_loadu_si256, _mm_loadu_si128};
                        let load32 = |p: &[u8; 32]| _mm256_loadu_si256(p.as_ptr().cast());
                        let load16 = |p: &[u8]| _mm_loadu_si128(p.as_ptr().cast());
                        let wide = ycc32(load32(&y), load32(&cb), load32(&cr));
                        let half = |at: usize| {
                            ycc16(
                                load16(&y[at..at + 16]),
                                load16(&cb[at..at + 16]),
                                load16(&cr[at..at + 16]),
                            )
                        };
                        (wide, [half(0), half(16)])
                    };
                    for c in 0..3 {
                        assert_eq!(
                            lanes(wide[c]),
                            halves([narrow[0][c], narrow[1][c]]),
                            "luma {luma} cb {cb:?} step {step} channel {c}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn simd_conversion_matches_libjpeg_integers_for_every_chroma_pair() {
        // Every (Cb, Cr) pair, with lumas at both ends of the range (where the clamps act) and
        // in between.
        let tables = YccTables::new();
        let (cb, cr): (Vec<u8>, Vec<u8>) = (0..=255u8)
            .flat_map(|b| (0..=255u8).map(move |r| (b, r)))
            .unzip();
        for luma in [0u8, 1, 2, 64, 127, 128, 200, 253, 254, 255] {
            let y: Vec<u8> = (0..cb.len())
                .map(|i| luma.wrapping_add((i % 3) as u8))
                .collect();
            let (mut fast, mut portable) = (vec![0u8; 3 * y.len()], vec![0u8; 3 * y.len()]);
            tables.convert(&y, &cb, &cr, &mut fast);
            ycc_generic(&y, &cb, &cr, &mut portable);
            assert!(fast == portable, "luma {luma}");
        }
    }
}
