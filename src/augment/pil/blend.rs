//! `Image.blend` and the `ImageEnhance` blends built on it: `d + alpha * (x - d)` in f32 per
//! byte, clamped to `[0, 255]` and truncated, Pillow's arithmetic. timm's AugMix blends whole
//! images several times per sample, so on AVX2 eight bytes go through the same f32 operations
//! at once (no FMA: the same bytes).

/// One byte of `Image.blend(degenerate, image, alpha)`.
#[inline]
pub(super) fn blend(d: u8, x: u8, alpha: f32) -> u8 {
    let t = f32::from(d) + alpha * (f32::from(x) - f32::from(d));
    t.clamp(0.0, 255.0) as u8
}

/// [`blend`] in a form compilers vectorize: the clamped value's truncation read from the bits
/// of its sum with 2^23 (Rust's `as` saturates, which they turn into a scalar conversion per
/// lane). The same byte for every input.
#[inline(always)]
pub(super) fn blend_lane(d: u8, x: u8, alpha: f32) -> u8 {
    const TWO_23: f32 = 8_388_608.0;
    let t = f32::from(d) + alpha * (f32::from(x) - f32::from(d));
    (t.clamp(0.0, 255.0).trunc() + TWO_23).to_bits() as u8
}

/// The first image of a blend: one value for every byte, or an image.
#[derive(Clone, Copy)]
pub(super) enum Degenerate<'a> {
    /// Every byte blends from this value (brightness: 0, contrast: the mean grey).
    Value(u8),
    /// Byte `i` blends from byte `i` of this image.
    Image(&'a [u8]),
}

/// `image[i] = blend(d[i], image[i], alpha)`, in place.
pub(super) fn toward(image: &mut [u8], d: Degenerate<'_>, alpha: f32) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (detected just above).
        return unsafe { simd::toward(image, d, alpha) };
    }
    match d {
        Degenerate::Value(d) => image.iter_mut().for_each(|x| *x = blend(d, *x, alpha)),
        Degenerate::Image(d) => {
            for (x, &d) in image.iter_mut().zip(d) {
                *x = blend(d, *x, alpha);
            }
        }
    }
}

/// `image[i] = blend(image[i], other[i], alpha)`: `Image.blend(image, other, alpha)` into
/// `image`.
pub(super) fn from(image: &mut [u8], other: &[u8], alpha: f32) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (detected just above).
        return unsafe { simd::from(image, other, alpha) };
    }
    for (d, &x) in image.iter_mut().zip(other) {
        *d = blend(*d, x, alpha);
    }
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    use super::{blend, Degenerate};

    /// Eight bytes as f32 lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn lanes(bytes: &[u8]) -> __m256 {
        let eight = u64::from_le_bytes(bytes[..8].try_into().expect("eight bytes"));
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(eight as i64)))
    }

    /// [`blend`] on eight lanes, the results as eight bytes.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn blend8(d: __m256, x: __m256, alpha: __m256) -> [u8; 8] {
        let t = _mm256_add_ps(d, _mm256_mul_ps(alpha, _mm256_sub_ps(x, d)));
        let t = _mm256_min_ps(_mm256_max_ps(t, _mm256_setzero_ps()), _mm256_set1_ps(255.0));
        let i = _mm256_cvttps_epi32(t);
        let words = _mm_packus_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
        (_mm_cvtsi128_si64(_mm_packus_epi16(words, words)) as u64).to_le_bytes()
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn toward(image: &mut [u8], d: Degenerate<'_>, alpha: f32) {
        let a = _mm256_set1_ps(alpha);
        let n = image.len() / 8 * 8;
        match d {
            Degenerate::Value(v) => {
                let dv = _mm256_set1_ps(f32::from(v));
                for x in image[..n].chunks_exact_mut(8) {
                    let out = blend8(dv, lanes(x), a);
                    x.copy_from_slice(&out);
                }
                image[n..].iter_mut().for_each(|x| *x = blend(v, *x, alpha));
            }
            Degenerate::Image(d) => {
                let d = &d[..image.len()];
                for (x, d) in image[..n].chunks_exact_mut(8).zip(d.chunks_exact(8)) {
                    let out = blend8(lanes(d), lanes(x), a);
                    x.copy_from_slice(&out);
                }
                for (x, &d) in image[n..].iter_mut().zip(&d[n..]) {
                    *x = blend(d, *x, alpha);
                }
            }
        }
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn from(image: &mut [u8], other: &[u8], alpha: f32) {
        let a = _mm256_set1_ps(alpha);
        let other = &other[..image.len()];
        let n = image.len() / 8 * 8;
        for (d, x) in image[..n].chunks_exact_mut(8).zip(other.chunks_exact(8)) {
            let out = blend8(lanes(d), lanes(x), a);
            d.copy_from_slice(&out);
        }
        for (d, &x) in image[n..].iter_mut().zip(&other[n..]) {
            *d = blend(*d, x, alpha);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lane_form_gives_the_blend_of_every_pair_of_bytes() {
        for alpha in [0.0f32, 0.37, 0.6, 1.0, 1.4, 1.9, -0.6, 3.3] {
            for d in 0..=255u8 {
                for x in 0..=255u8 {
                    assert_eq!(
                        blend_lane(d, x, alpha),
                        blend(d, x, alpha),
                        "{d} {x} {alpha}"
                    );
                }
            }
        }
    }

    #[test]
    fn every_blend_gives_the_bytes_of_the_one_at_a_time_form() {
        // Lengths with and without a tail of fewer than eight bytes; factors that shrink,
        // extrapolate past both ends, and zero.
        for len in [0, 5, 8, 61, 224 * 3] {
            let x: Vec<u8> = (0..len).map(|i| (i * 37 % 256) as u8).collect();
            let d: Vec<u8> = (0..len).map(|i| (i * 101 % 253) as u8).collect();
            for alpha in [0.0f32, 0.37, 1.0, 1.9, -0.6, 3.3] {
                let mut v = x.clone();
                toward(&mut v, Degenerate::Value(117), alpha);
                let want: Vec<u8> = x.iter().map(|&x| blend(117, x, alpha)).collect();
                assert_eq!(v, want, "value, {len}, {alpha}");
                let mut v = x.clone();
                toward(&mut v, Degenerate::Image(&d), alpha);
                let want: Vec<u8> = x
                    .iter()
                    .zip(&d)
                    .map(|(&x, &d)| blend(d, x, alpha))
                    .collect();
                assert_eq!(v, want, "image, {len}, {alpha}");
                let mut v = d.clone();
                from(&mut v, &x, alpha);
                assert_eq!(v, want, "from, {len}, {alpha}");
                let lanes: Vec<u8> = x
                    .iter()
                    .zip(&d)
                    .map(|(&x, &d)| blend_lane(d, x, alpha))
                    .collect();
                assert_eq!(lanes, want, "lanes, {len}, {alpha}");
            }
        }
    }
}
