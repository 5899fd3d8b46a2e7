//! A decoded picture's 4:2:0 planes to interleaved RGB, as FFmpeg's swscale converts them for
//! torchcodec, PyAV and decord: the coefficients of the matrix and range the video declares
//! ([`Conversion`]: BT.601 limited range for video that does not say otherwise; BT.709,
//! full range and the others where its SPS or container says so), each chroma sample
//! covering its 2x2 luma block, and swscale's arithmetic: 16-bit fixed point, the luma term
//! and each chroma term floored on its own, then summed and clamped. Bit-exact with
//! libswscale (FFmpeg 5.1 and 8) over every (y, u, v) for every matrix and range it has.
//!
//! Sixteen pixels at a time in AVX2 where the CPU has it; the rest compute each chroma sample's
//! terms once for its two pixels, and each pixel is then one luma product and three adds. (`yuvutils-rs` is faster but clamps luma below 16 before converting, 19 levels
//! off FFmpeg for the darkest pixels.)

use super::Picture;

/// How a video's samples turn into RGB: swscale's fixed-point (16 fractional bits) terms
/// for its matrix and range. The chroma coefficients are the ones swscale's arithmetic
/// amounts to, measured over every (y, u, v) against libswscale (a few differ by a few units
/// from its table's: the vector code rounds them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conversion {
    /// The luma offset (16 in limited range, 0 in full).
    pub luma_offset: i32,
    /// The luma gain (255/219, rounded up, in limited range; 1 in full).
    pub luma: i32,
    /// Red from Cr.
    pub rv: i32,
    /// Blue from Cb.
    pub bu: i32,
    /// Green from Cb (subtracted).
    pub gu: i32,
    /// Green from Cr (subtracted).
    pub gv: i32,
}

impl Conversion {
    /// BT.601, limited range: video that does not say otherwise.
    pub const DEFAULT: Self = Self::of(2, false);

    /// The conversion swscale applies to a video declaring `matrix` (H.273's
    /// `matrix_coefficients`, FFmpeg's `AVColorSpace`) and `full_range`, as torchcodec asks
    /// for it (`sws_getCoefficients`: BT.709, FCC, SMPTE 240M and BT.2020 have their own
    /// coefficients, every other value BT.601's; FFmpeg before 8 took 0, identity, as BT.709).
    pub const fn of(matrix: u8, full_range: bool) -> Self {
        // (red from Cr, blue from Cb, green from Cb, green from Cr), limited then full range.
        let ([rv, bu, gu, gv], [frv, fbu, fgu, fgv]) = match matrix {
            1 => (
                [117_489, 138_438, 13_975, 34_925],
                [103_207, 121_608, 12_276, 30_679],
            ),
            4 => (
                [104_448, 132_798, 24_759, 53_109],
                [91_751, 116_655, 21_749, 46_652],
            ),
            7 => (
                [117_579, 136_230, 16_907, 35_559],
                [103_285, 119_668, 14_851, 31_236],
            ),
            9 | 10 => (
                [110_013, 140_360, 12_277, 42_625],
                [96_638, 123_296, 10_784, 37_444],
            ),
            _ => (
                [104_597, 132_201, 25_673, 53_279],
                [91_881, 116_129, 22_553, 46_801],
            ),
        };
        if full_range {
            Self {
                luma_offset: 0,
                luma: 1 << 16,
                rv: frv,
                bu: fbu,
                gu: fgu,
                gv: fgv,
            }
        } else {
            Self {
                luma_offset: 16,
                luma: 76_310,
                rv,
                bu,
                gu,
                gv,
            }
        }
    }

    /// The conversion of `index`'s video, as FFmpeg tags its frames: an H.264 video's
    /// matrix and range from its SPS's video signal type, each from the container's `colr`
    /// box where the SPS says nothing, BT.601 and limited where neither does; MPEG-4 Part 2
    /// video as video that says nothing.
    pub fn of_video(index: &super::VideoIndex) -> Self {
        if index.codec != super::Codec::H264 {
            return Self::DEFAULT;
        }
        let Ok(avc) = super::AvcConfig::parse(&index.config) else {
            return Self::DEFAULT; // refused by the decoder, with the reason
        };
        let signal = super::sps::signal(&avc.sps).or(index.colour_tags);
        Self::of(
            signal.matrix.unwrap_or(2),
            signal.full_range.unwrap_or(false),
        )
    }

    /// The red, green and blue offsets of one chroma sample, each floored.
    fn chroma(&self, cb: u8, cr: u8) -> [i32; 3] {
        let (cb, cr) = (i32::from(cb) - 128, i32::from(cr) - 128);
        [
            (self.rv * cr) >> 16,
            ((-self.gu * cb) >> 16) + ((-self.gv * cr) >> 16),
            (self.bu * cb) >> 16,
        ]
    }

    /// The luma term of one sample, floored.
    fn luma(&self, y: u8) -> i32 {
        ((i32::from(y) - self.luma_offset) * self.luma) >> 16
    }
}

impl Default for Conversion {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Writes `p` as `height * width * 3` bytes of RGB into `out` (resized to fit), by `c`.
pub fn to_rgb(p: &Picture<'_>, c: &Conversion, out: &mut Vec<u8>) {
    to_rgb_region(p, c, out, (0, 0, p.width, p.height));
}

/// [`to_rgb`] for the pixels of the half-open rectangle `(x0, y0, x1, y1)` only: `out` is sized
/// for the whole frame, and the pixels outside the rectangle keep whatever it held.
pub fn to_rgb_region(
    p: &Picture<'_>,
    c: &Conversion,
    out: &mut Vec<u8>,
    region: (usize, usize, usize, usize),
) {
    to_rgb_rows(p, c, out, (region.0, region.2), region.1..region.3);
}

/// [`to_rgb`] for the columns `x0..x1` of the given rows only (what the clips' windows read,
/// [`crate::augment::Resampler::footprint`] and [`crate::augment::Resampler::rows_read`]):
/// `out` is sized for the whole frame, and the other pixels keep whatever it held. The columns
/// are clipped to the frame and widened to an even left column (a chroma sample's pair); rows
/// past the frame are ignored.
pub fn to_rgb_rows(
    p: &Picture<'_>,
    conversion: &Conversion,
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
        let done = rows_avx2(y, u, v, conversion, line);
        let (line, y) = (&mut line[done * 3..], &y[done..]);
        let chroma_pairs = u[done / 2..].iter().zip(&v[done / 2..]);
        for ((pair, ys), (&cb, &cr)) in line.chunks_mut(6).zip(y.chunks(2)).zip(chroma_pairs) {
            let t = conversion.chroma(cb, cr);
            for (px, &luma) in pair.chunks_exact_mut(3).zip(ys) {
                let l = conversion.luma(luma);
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
fn rows_avx2(y: &[u8], u: &[u8], v: &[u8], c: &Conversion, line: &mut [u8]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        let steps = y.len() / 16;
        let terms = Terms::of(c);
        for k in 0..steps {
            let (at, c) = (16 * k, 8 * k);
            // SAFETY: AVX2 was detected just above.
            unsafe {
                rgb16_avx2(
                    &terms,
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
    let _ = (y, u, v, c, line);
    0
}

/// A constant `k` of [`Conversion`] as 16-bit lanes take it: `(a * k) >> 16` is
/// `a * whole + mulhi(a, part)` for `k = whole * 2^16 + part` with `part` an i16, since the
/// product's multiple of 2^16 passes through the floor whole; `mulhi` floors as `>>` does.
#[derive(Clone, Copy)]
struct Split {
    whole: i16,
    part: i16,
}

impl Split {
    fn of(k: i32) -> Self {
        let part = (k & 0xffff) as u16 as i16;
        Self {
            whole: ((k - i32::from(part)) >> 16) as i16,
            part,
        }
    }
}

/// A [`Conversion`]'s constants split for 16-bit lanes.
struct Terms {
    offset: i16,
    luma: Split,
    rv: Split,
    bu: Split,
    gu: Split,
    gv: Split,
}

impl Terms {
    fn of(c: &Conversion) -> Self {
        Self {
            offset: c.luma_offset as i16,
            luma: Split::of(c.luma),
            rv: Split::of(c.rv),
            bu: Split::of(c.bu),
            gu: Split::of(-c.gu),
            gv: Split::of(-c.gv),
        }
    }
}

/// Sixteen pixels (eight chroma samples, each used twice) of [`to_rgb`]'s arithmetic in 16-bit
/// lanes, the same integers: each `(a * k) >> 16` as [`Split`] says. The sums fit an i16
/// before the saturating pack to bytes (the clamp) and the interleave, the JPEG decoder's
/// (`hpuload_decoders::jpeg::store_rgb16`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn rgb16_avx2(t: &Terms, y: &[u8; 16], u: &[u8; 8], v: &[u8; 8], out: &mut [u8; 48]) {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm256_add_epi16, _mm256_cvtepu8_epi16, _mm256_mulhi_epi16,
        _mm256_mullo_epi16, _mm256_set1_epi16, _mm256_sub_epi16, _mm_loadl_epi64, _mm_loadu_si128,
        _mm_unpacklo_epi8,
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
    let term = |a: __m256i, s: Split| {
        _mm256_add_epi16(
            _mm256_mullo_epi16(a, k(s.whole)),
            _mm256_mulhi_epi16(a, k(s.part)),
        )
    };
    // Each chroma sample twice, for its two pixels of the row.
    let cb = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(uv, uv)), k(128));
    let cr = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(vv, vv)), k(128));
    let l = term(
        _mm256_sub_epi16(_mm256_cvtepu8_epi16(yv), k(t.offset)),
        t.luma,
    );
    let (r, g, b) = (
        _mm256_add_epi16(l, term(cr, t.rv)),
        _mm256_add_epi16(l, _mm256_add_epi16(term(cb, t.gu), term(cr, t.gv))),
        _mm256_add_epi16(l, term(cb, t.bu)),
    );
    hpuload_decoders::jpeg::store_rgb16(r, g, b, out);
}

/// [`to_rgb`] written out pixel by pixel, the reference the tests hold it to.
pub fn to_rgb_exact(p: &Picture<'_>, conversion: &Conversion, out: &mut Vec<u8>) {
    let (w, h) = (p.width, p.height);
    out.resize(w * h * 3, 0);
    for (row, line) in out.chunks_exact_mut(w * 3).enumerate() {
        let c = (row / 2) * p.uv_stride;
        for (x, px) in line.chunks_exact_mut(3).enumerate() {
            let l = conversion.luma(p.y[row * p.y_stride + x]);
            let t = conversion.chroma(p.u[c + x / 2], p.v[c + x / 2]);
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

    /// Every matrix swscale has its own coefficients for, in each range.
    fn every_conversion() -> Vec<Conversion> {
        [2u8, 1, 4, 7, 9]
            .iter()
            .flat_map(|&m| [Conversion::of(m, false), Conversion::of(m, true)])
            .collect()
    }

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
            to_rgb(&picture(&y, &u, &v, 2, 2), &Conversion::DEFAULT, &mut out);
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
        for c in every_conversion() {
            let (mut fast, mut exact) = (Vec::new(), Vec::new());
            to_rgb(&p, &c, &mut fast);
            to_rgb_exact(&p, &c, &mut exact);
            assert_eq!(fast.len(), w * h * 3);
            assert!(fast == exact, "{c:?}");
        }
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
            for c in every_conversion() {
                let (mut fast, mut exact) = (Vec::new(), Vec::new());
                to_rgb(&p, &c, &mut fast);
                to_rgb_exact(&p, &c, &mut exact);
                assert!(fast == exact, "a pixel differs: {c:?}");
            }
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
        to_rgb(&p, &Conversion::DEFAULT, &mut whole);
        for (x0, y0, x1, y1) in [
            (0, 0, 37, 19),
            (3, 5, 20, 6),
            (1, 1, 2, 2),
            (36, 18, 40, 30),
            (10, 7, 37, 19),
        ] {
            let mut part = vec![0xA5u8; w * h * 3];
            to_rgb_region(&p, &Conversion::DEFAULT, &mut part, (x0, y0, x1, y1));
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
        to_rgb(&picture(&y, &u, &v, 3, 3), &Conversion::DEFAULT, &mut out);
        let px = |x: usize, r: usize| &out[(r * 3 + x) * 3..(r * 3 + x) * 3 + 3];
        assert_eq!(px(0, 0), px(1, 1));
        assert_eq!(px(2, 0), px(2, 1));
        assert!(px(2, 0)[2] > px(0, 0)[2], "blue from u = 200");
        assert!(px(0, 2)[0] < px(0, 0)[0], "less red from v = 60");
    }
}
