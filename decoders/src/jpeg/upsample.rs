//! libjpeg-exact "fancy" chroma upsampling for the full-resolution region decode: the scalar
//! rule and its AVX2 kernel side by side.

/// libjpeg's "fancy" chroma upsampling, one output row at a time.
///
/// Vertically, `colsum = 3 * near + far` (or `4 * near` without vertical subsampling);
/// horizontally, `out = (3 * colsum[c] + colsum[neighbour] + bias) >> 4` (or
/// `(4 * colsum[c] + bias) >> 4`). The biases reproduce libjpeg's rounding in every mode:
/// h2v2 (8, 7), h2v1 (4, 8), h1v2 (4 on even rows, 8 on odd), h1v1 exact. At the image's
/// edges the neighbour is the sample itself, as in libjpeg.
pub(super) struct Upsample {
    pub hmax: usize,
    pub vmax: usize,
    pub y_odd: bool,
    /// AVX2 was detected at run time.
    pub avx2: bool,
}

impl Upsample {
    /// Fills `out` with chroma for scaled-image columns `x0..x0 + out.len()`. `near` and `far`
    /// are chroma plane rows whose first sample is column `cx0`; `cw` is the number of valid
    /// chroma columns in the image.
    #[allow(clippy::too_many_arguments)]
    pub fn row(
        &self,
        near: &[u8],
        far: &[u8],
        cx0: usize,
        cw: usize,
        x0: usize,
        colsum: &mut Vec<i16>,
        out: &mut [u8],
    ) {
        let w = out.len();
        if self.hmax == 1 && self.vmax == 1 {
            out.copy_from_slice(&near[x0 - cx0..x0 - cx0 + w]);
            return;
        }
        // Column sums for chroma columns first..=last, padded with one neighbour on each side
        // (the real one, or the edge sample replicated at the image's edges).
        let first = x0 / self.hmax;
        let last = (x0 + w - 1) / self.hmax;
        let lo = first.saturating_sub(1);
        let hi = (last + 1).min(cw - 1);
        colsum.clear();
        if first == 0 {
            colsum.push(0); // replaced below by the replicated edge
        }
        let (n, f) = (&near[lo - cx0..=hi - cx0], &far[lo - cx0..=hi - cx0]);
        if self.vmax == 2 {
            colsum.extend(
                n.iter()
                    .zip(f)
                    .map(|(&a, &b)| 3 * i16::from(a) + i16::from(b)),
            );
        } else {
            colsum.extend(n.iter().map(|&a| 4 * i16::from(a)));
        }
        if first == 0 {
            colsum[0] = colsum[1];
        }
        if last + 1 > hi {
            colsum.push(*colsum.last().expect("at least one column"));
        }
        // Now colsum[k] is column first - 1 + k.
        if self.hmax == 1 {
            let bias = if self.y_odd { 8 } else { 4 };
            for (o, &c) in out.iter_mut().zip(&colsum[1..]) {
                *o = ((4 * c + bias) >> 4) as u8;
            }
            return;
        }
        let (be, bo) = if self.vmax == 2 { (8, 7) } else { (4, 8) };
        let (mut i, mut k) = (0, 1);
        if x0 % 2 == 1 {
            out[0] = ((3 * colsum[1] + colsum[2] + bo) >> 4) as u8;
            i = 1;
            k = 2;
        }
        let pairs = (w - i) / 2;
        h2_pairs(
            self.avx2,
            &colsum[k - 1..k + pairs + 1],
            be,
            bo,
            &mut out[i..i + 2 * pairs],
        );
        if i + 2 * pairs < w {
            let k = k + pairs;
            out[w - 1] = ((3 * colsum[k] + colsum[k - 1] + be) >> 4) as u8;
        }
    }
}

/// Horizontal 2x fancy upsampling of column sums: for `cs[p + 1]`, the output pair
/// `(3 * cs[p + 1] + cs[p] + be) >> 4` and `(3 * cs[p + 1] + cs[p + 2] + bo) >> 4`.
/// `cs` holds `out.len() / 2 + 2` sums.
fn h2_pairs(avx2: bool, cs: &[i16], be: i16, bo: i16, out: &mut [u8]) {
    assert!(cs.len() >= out.len() / 2 + 2 && out.len().is_multiple_of(2));
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        // SAFETY: AVX2 support was detected at run time (`avx2` is only set then); the lengths
        // were checked above.
        done = unsafe { h2_pairs_avx2(cs, be, bo, out) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = avx2;
    for (p, pair) in out.chunks_exact_mut(2).enumerate().skip(done) {
        let (l, c, r) = (cs[p], cs[p + 1], cs[p + 2]);
        pair[0] = ((3 * c + l + be) >> 4) as u8;
        pair[1] = ((3 * c + r + bo) >> 4) as u8;
    }
}

/// [`h2_pairs`] for the first multiple of 16 pairs; returns how many pairs it wrote. Each
/// 16-bit lane computes both outputs of a pair and stores them as its low and high byte,
/// which is their order in memory, so no shuffle is needed.
///
/// # Safety
/// The CPU must support AVX2; `cs.len() >= out.len() / 2 + 2`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn h2_pairs_avx2(cs: &[i16], be: i16, bo: i16, out: &mut [u8]) -> usize {
    use std::arch::x86_64::{
        __m256i, _mm256_add_epi16, _mm256_loadu_si256, _mm256_or_si256, _mm256_set1_epi16,
        _mm256_slli_epi16, _mm256_srli_epi16, _mm256_storeu_si256,
    };
    let full = out.len() / 32;
    let (vbe, vbo) = (_mm256_set1_epi16(be), _mm256_set1_epi16(bo));
    for blk in 0..full {
        let p = blk * 16;
        // SAFETY: the loads read `cs[p..p + 18]`, inside `cs` as `p + 16 <= out.len() / 2`;
        // the store writes `out[2p..2p + 32]`, inside `out`. Unaligned accesses are allowed.
        // Sums are at most 4 * 1020 + 8, so 16-bit lanes do not overflow.
        unsafe {
            let at = |d: usize| _mm256_loadu_si256(cs.as_ptr().add(p + d).cast::<__m256i>());
            let (l, c, r) = (at(0), at(1), at(2));
            let c3 = _mm256_add_epi16(c, _mm256_add_epi16(c, c));
            let even = _mm256_srli_epi16(_mm256_add_epi16(_mm256_add_epi16(c3, l), vbe), 4);
            let odd = _mm256_srli_epi16(_mm256_add_epi16(_mm256_add_epi16(c3, r), vbo), 4);
            let pair = _mm256_or_si256(even, _mm256_slli_epi16(odd, 8));
            _mm256_storeu_si256(out.as_mut_ptr().add(2 * p).cast::<__m256i>(), pair);
        }
    }
    full * 16
}
