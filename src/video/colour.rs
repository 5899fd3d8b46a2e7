//! A decoded picture's 4:2:0 planes to interleaved RGB, as FFmpeg's swscale converts video that
//! does not say otherwise (what torchcodec and PyAV give): BT.601 coefficients, limited range
//! (luma 16-235, chroma 16-240; values outside taken as they are), each chroma sample covering
//! its 2x2 luma block, and swscale's arithmetic: 16-bit fixed point, the luma term and each
//! chroma term floored on its own, then summed and clamped. Bit-exact with libswscale 9.5
//! (FFmpeg 8, as PyAV 18 bundles it) on the test clips and over a grid of (y, u, v).
//!
//! Sixteen pixels at a time in AVX2 where the CPU has it; the rest compute each chroma sample's
//! terms once for its two pixels, and each pixel is then one luma product and three adds. (`yuvutils-rs` is faster but clamps luma below 16 before converting, 19 levels
//! off FFmpeg for the darkest pixels.)

use super::Picture;

/// Fixed-point (16 fractional bits) BT.601 limited-range coefficients, as swscale's tables
/// hold them (the luma gain 255/219 rounded up, so multiples of 219 land on whole levels).
const Y: i32 = 76_310;
const RV: i32 = 104_597; // 1.402 * 255 / 224
const GU: i32 = 25_675; // 0.344136 * 255 / 224
const GV: i32 = 53_279; // 0.714136 * 255 / 224
const BU: i32 = 132_201; // 1.772 * 255 / 224

/// The red, green and blue offsets of one chroma sample, each floored.
fn chroma(cb: u8, cr: u8) -> [i32; 3] {
    let (cb, cr) = (i32::from(cb) - 128, i32::from(cr) - 128);
    [
        (RV * cr) >> 16,
        ((-GU * cb) >> 16) + ((-GV * cr) >> 16),
        (BU * cb) >> 16,
    ]
}

/// Writes `p` as `height * width * 3` bytes of RGB into `out` (resized to fit).
pub fn to_rgb(p: &Picture<'_>, out: &mut Vec<u8>) {
    to_rgb_region(p, out, (0, 0, p.width, p.height));
}

/// [`to_rgb`] for the pixels of the half-open rectangle `(x0, y0, x1, y1)` only: `out` is sized
/// for the whole frame, and the pixels outside the rectangle keep whatever it held.
pub fn to_rgb_region(p: &Picture<'_>, out: &mut Vec<u8>, region: (usize, usize, usize, usize)) {
    to_rgb_rows(p, out, (region.0, region.2), region.1..region.3);
}

/// [`to_rgb`] for the columns `x0..x1` of the given rows only (what the clips' windows read,
/// [`crate::augment::Resampler::footprint`] and [`crate::augment::Resampler::rows_read`]):
/// `out` is sized for the whole frame, and the other pixels keep whatever it held. The columns
/// are clipped to the frame and widened to an even left column (a chroma sample's pair); rows
/// past the frame are ignored.
pub fn to_rgb_rows(
    p: &Picture<'_>,
    out: &mut Vec<u8>,
    (x0, x1): (usize, usize),
    rows: impl IntoIterator<Item = usize>,
) {
    let (w, h) = (p.width, p.height);
    out.resize(w * h * 3, 0);
    let x1 = x1.min(w);
    let x0 = x0.min(x1) & !1;
    if x0 >= x1 {
        return;
    }
    let (c0, c1) = (x0 / 2, x1.div_ceil(2));
    for row in rows.into_iter().filter(|&row| row < h) {
        let c = (row / 2) * p.uv_stride;
        let (u, v) = (&p.u[c + c0..c + c1], &p.v[c + c0..c + c1]);
        let line = &mut out[(row * w + x0) * 3..(row * w + x1) * 3];
        let y = &p.y[row * p.y_stride + x0..row * p.y_stride + x1];
        // The row's first pixels in 16-pixel steps where AVX2 is there; the rest here, each
        // chroma sample's terms for its two pixels.
        let done = rows_avx2(y, u, v, line);
        let (line, y) = (&mut line[done * 3..], &y[done..]);
        let chroma_pairs = u[done / 2..].iter().zip(&v[done / 2..]);
        for ((pair, ys), (&cb, &cr)) in line.chunks_mut(6).zip(y.chunks(2)).zip(chroma_pairs) {
            let t = chroma(cb, cr);
            for (px, &luma) in pair.chunks_exact_mut(3).zip(ys) {
                let l = ((i32::from(luma) - 16) * Y) >> 16;
                px[0] = clamp(l + t[0]);
                px[1] = clamp(l + t[1]);
                px[2] = clamp(l + t[2]);
            }
        }
    }
}

/// Converts the first pixels of a row in steps of 16 with AVX2 (chosen at run time), the same
/// bytes as the scalar loop, and returns how many it converted (0 without AVX2). `u` and `v`
/// start at the chroma sample of the row's first (even) pixel.
fn rows_avx2(y: &[u8], u: &[u8], v: &[u8], line: &mut [u8]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        let steps = y.len() / 16;
        for k in 0..steps {
            let (at, c) = (16 * k, 8 * k);
            // SAFETY: AVX2 was detected just above.
            unsafe {
                rgb16_avx2(
                    y[at..at + 16].try_into().expect("16 pixels"),
                    u[c..c + 8].try_into().expect("8 samples"),
                    v[c..c + 8].try_into().expect("8 samples"),
                    (&mut line[3 * at..3 * at + 48])
                        .try_into()
                        .expect("48 bytes"),
                );
            }
        }
        return steps * 16;
    }
    let _ = (y, u, v, line);
    0
}

/// Sixteen pixels (eight chroma samples, each used twice) of [`to_rgb`]'s arithmetic in 16-bit
/// lanes, the same integers: `(a * k) >> 16` for a constant `k` that does not fit an i16 is
/// `a * q + mulhi(a, k - q * 2^16)` for the whole multiple `q` (`76310 = 2^16 + 10774`,
/// `104597 = 2^17 - 26475`, `-53279 = -2^16 + 12257`, `132201 = 2^17 + 1129`), since the
/// product's multiple of 2^16 passes through the floor whole; `mulhi` floors as `>>` does.
/// The sums fit an i16 before the saturating pack to bytes (the clamp) and the interleave,
/// the JPEG decoder's (`hpuload_decoders::jpeg::store_rgb16`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn rgb16_avx2(y: &[u8; 16], u: &[u8; 8], v: &[u8; 8], out: &mut [u8; 48]) {
    use std::arch::x86_64::{
        __m128i, _mm256_add_epi16, _mm256_cvtepu8_epi16, _mm256_mulhi_epi16, _mm256_set1_epi16,
        _mm256_sub_epi16, _mm_loadl_epi64, _mm_loadu_si128, _mm_unpacklo_epi8,
    };
    // SAFETY: a 16-byte load of a 16-byte array and 8-byte loads of 8-byte arrays (unaligned
    // loads are allowed).
    let (yv, uv, vv) = unsafe {
        (
            _mm_loadu_si128(y.as_ptr().cast::<__m128i>()),
            _mm_loadl_epi64(u.as_ptr().cast::<__m128i>()),
            _mm_loadl_epi64(v.as_ptr().cast::<__m128i>()),
        )
    };
    let k = _mm256_set1_epi16;
    // Each chroma sample twice, for its two pixels of the row.
    let cb = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(uv, uv)), k(128));
    let cr = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(vv, vv)), k(128));
    let a = _mm256_sub_epi16(_mm256_cvtepu8_epi16(yv), k(16));
    let l = _mm256_add_epi16(a, _mm256_mulhi_epi16(a, k(10_774)));
    let twice = |c| _mm256_add_epi16(c, c);
    let tr = _mm256_add_epi16(twice(cr), _mm256_mulhi_epi16(cr, k(-26_475)));
    let tg = _mm256_add_epi16(
        _mm256_mulhi_epi16(cb, k(-25_675)),
        _mm256_sub_epi16(_mm256_mulhi_epi16(cr, k(12_257)), cr),
    );
    let tb = _mm256_add_epi16(twice(cb), _mm256_mulhi_epi16(cb, k(1_129)));
    let (r, g, b) = (
        _mm256_add_epi16(l, tr),
        _mm256_add_epi16(l, tg),
        _mm256_add_epi16(l, tb),
    );
    hpuload_decoders::jpeg::store_rgb16(r, g, b, out);
}

/// [`to_rgb`] written out pixel by pixel, the reference the tests hold it to.
pub fn to_rgb_exact(p: &Picture<'_>, out: &mut Vec<u8>) {
    let (w, h) = (p.width, p.height);
    out.resize(w * h * 3, 0);
    for (row, line) in out.chunks_exact_mut(w * 3).enumerate() {
        let c = (row / 2) * p.uv_stride;
        for (x, px) in line.chunks_exact_mut(3).enumerate() {
            let l = ((i32::from(p.y[row * p.y_stride + x]) - 16) * Y) >> 16;
            let t = chroma(p.u[c + x / 2], p.v[c + x / 2]);
            for k in 0..3 {
                px[k] = clamp(l + t[k]);
            }
        }
    }
}

fn clamp(v: i32) -> u8 {
    v.clamp(0, 255) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picture<'a>(y: &'a [u8], u: &'a [u8], v: &'a [u8], w: usize, h: usize) -> Picture<'a> {
        Picture {
            frame: 0,
            width: w,
            height: h,
            y,
            u,
            v,
            y_stride: w,
            uv_stride: w.div_ceil(2),
        }
    }

    #[test]
    fn limited_range_black_white_and_primaries_convert_to_their_rgb() {
        let mut out = Vec::new();
        for (yuv, rgb) in [
            ([16, 128, 128], [0, 0, 0]),
            ([235, 128, 128], [255, 255, 255]),
            ([126, 128, 128], [128, 128, 128]),
            // BT.601 red, green and blue at 75%... full: (81, 90, 240) is red.
            ([81, 90, 240], [255, 0, 0]),
            ([145, 54, 34], [0, 255, 0]),
            ([41, 240, 110], [0, 0, 255]),
        ] {
            let (y, u, v) = ([yuv[0]; 4], [yuv[1]], [yuv[2]]);
            to_rgb(&picture(&y, &u, &v, 2, 2), &mut out);
            for px in out.chunks(3) {
                for k in 0..3 {
                    assert!(
                        // Two floored terms: up to two levels under the real value.
                        (i32::from(px[k]) - rgb[k]).abs() <= 2,
                        "{yuv:?} gave {px:?}, not {rgb:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_fast_conversion_gives_the_exact_arithmetics_bytes_at_any_size_and_stride() {
        // Every (y, u, v) corner and a sweep between, odd sizes, a stride wider than the row.
        let (w, h, stride) = (37usize, 19usize, 48usize);
        let mut y = vec![0u8; stride * h];
        let mut u = vec![0u8; stride * h.div_ceil(2)];
        let mut v = vec![0u8; stride * h.div_ceil(2)];
        for (i, b) in y.iter_mut().enumerate() {
            *b = (i * 7 % 256) as u8;
        }
        for (i, (a, b)) in u.iter_mut().zip(v.iter_mut()).enumerate() {
            *a = (i * 13 % 256) as u8;
            *b = (255 - i * 5 % 256) as u8;
        }
        let p = Picture {
            frame: 0,
            width: w,
            height: h,
            y: &y,
            u: &u,
            v: &v,
            y_stride: stride,
            uv_stride: stride,
        };
        let (mut fast, mut exact) = (Vec::new(), Vec::new());
        to_rgb(&p, &mut fast);
        to_rgb_exact(&p, &mut exact);
        assert_eq!(fast.len(), w * h * 3);
        let worst = fast
            .iter()
            .zip(&exact)
            .map(|(a, b)| (i32::from(*a) - i32::from(*b)).abs())
            .max();
        assert_eq!(worst, Some(0));
    }

    #[test]
    fn every_luma_with_every_chroma_value_converts_as_the_exact_arithmetic() {
        // 512 columns (luma 0..=255, each twice, so one chroma sample per level) by 256 rows:
        // row r has Cb = r and a Cr that walks every value along the row, then the other way.
        let (w, h) = (512usize, 256usize);
        let y: Vec<u8> = (0..w * h).map(|i| ((i % w) / 2) as u8).collect();
        let walk: Vec<u8> = (0..256 * 128)
            .map(|i| ((i % 256) * 7 + (i / 256) * 3) as u8)
            .collect();
        let rows: Vec<u8> = (0..256 * 128).map(|i| (i / 256) as u8 * 2).collect();
        for (u, v) in [(&rows, &walk), (&walk, &rows)] {
            let p = Picture {
                frame: 0,
                width: w,
                height: h,
                y: &y,
                u,
                v,
                y_stride: w,
                uv_stride: 256,
            };
            let (mut fast, mut exact) = (Vec::new(), Vec::new());
            to_rgb(&p, &mut fast);
            to_rgb_exact(&p, &mut exact);
            assert!(fast == exact, "a pixel differs");
        }
    }

    #[test]
    fn a_region_converts_to_the_whole_frames_bytes_inside_it_and_leaves_the_rest() {
        let (w, h) = (37usize, 19usize);
        let y: Vec<u8> = (0..w * h).map(|i| (i * 7 % 256) as u8).collect();
        let u: Vec<u8> = (0..19 * 10).map(|i| (i * 13 % 256) as u8).collect();
        let v: Vec<u8> = (0..19 * 10).map(|i| (255 - i * 5 % 256) as u8).collect();
        let p = picture(&y, &u, &v, w, h);
        let mut whole = Vec::new();
        to_rgb(&p, &mut whole);
        for (x0, y0, x1, y1) in [
            (0, 0, 37, 19),
            (3, 5, 20, 6),
            (1, 1, 2, 2),
            (36, 18, 40, 30),
            (10, 7, 37, 19),
        ] {
            let mut part = vec![0xA5u8; w * h * 3];
            to_rgb_region(&p, &mut part, (x0, y0, x1, y1));
            for row in 0..h {
                for x in 0..w {
                    let at = (row * w + x) * 3;
                    let inside = (x0..x1).contains(&x) && (y0..y1).contains(&row);
                    if inside {
                        assert_eq!(
                            part[at..at + 3],
                            whole[at..at + 3],
                            "({x}, {row}) in {x0},{y0},{x1},{y1}"
                        );
                    } else if x + 1 != x0 || x0 % 2 == 0 {
                        assert_eq!(
                            part[at..at + 3],
                            [0xA5; 3],
                            "({x}, {row}) outside {x0},{y0},{x1},{y1}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn each_chroma_sample_covers_its_two_by_two_block_odd_sizes_included() {
        // 3x3 luma, 2x2 chroma: the last column and row use the last chroma sample.
        let y = [128u8; 9];
        let (u, v) = ([128u8, 200, 128, 128], [128u8, 128, 60, 128]);
        let mut out = Vec::new();
        to_rgb(&picture(&y, &u, &v, 3, 3), &mut out);
        let px = |x: usize, r: usize| &out[(r * 3 + x) * 3..(r * 3 + x) * 3 + 3];
        assert_eq!(px(0, 0), px(1, 1));
        assert_eq!(px(2, 0), px(2, 1));
        assert!(px(2, 0)[2] > px(0, 0)[2], "blue from u = 200");
        assert!(px(0, 2)[0] < px(0, 0)[0], "less red from v = 60");
    }
}
