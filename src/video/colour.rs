//! A decoded picture's 4:2:0 planes to interleaved RGB, as FFmpeg's swscale converts video that
//! does not say otherwise (what torchcodec and PyAV give): BT.601 coefficients, limited range
//! (luma 16-235, chroma 16-240; values outside taken as they are), each chroma sample covering
//! its 2x2 luma block, and swscale's arithmetic: 16-bit fixed point, the luma term and each
//! chroma term floored on its own, then summed and clamped. Bit-exact with libswscale 9.5
//! (FFmpeg 8, as PyAV 18 bundles it) on the test clips and over a grid of (y, u, v).
//!
//! Each pair of rows computes its chroma terms once; each pixel is then one luma product and
//! three adds. (`yuvutils-rs` is faster but clamps luma below 16 before converting, 19 levels
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

/// [`to_rgb`] for the pixels of the half-open rectangle `(x0, y0, x1, y1)` only (what the
/// clips' windows read, [`crate::augment::Resampler::footprint`]): `out` is sized for the whole
/// frame, and the pixels outside the rectangle keep whatever it held. The rectangle is clipped
/// to the frame and widened to an even left column (a chroma sample's pair).
pub fn to_rgb_region(p: &Picture<'_>, out: &mut Vec<u8>, region: (usize, usize, usize, usize)) {
    let (w, h) = (p.width, p.height);
    out.resize(w * h * 3, 0);
    let (x1, y1) = (region.2.min(w), region.3.min(h));
    let (x0, y0) = (region.0.min(x1) & !1, region.1.min(y1));
    if x0 >= x1 {
        return;
    }
    let (c0, c1) = (x0 / 2, x1.div_ceil(2));
    // Per chroma sample of the rectangle's columns: the red, green and blue offsets.
    let mut terms = vec![[0i32; 3]; c1 - c0];
    for row in y0..y1 {
        if row == y0 || row % 2 == 0 {
            let c = (row / 2) * p.uv_stride;
            let (u, v) = (&p.u[c + c0..c + c1], &p.v[c + c0..c + c1]);
            for ((t, &cb), &cr) in terms.iter_mut().zip(u).zip(v) {
                *t = chroma(cb, cr);
            }
        }
        let line = &mut out[(row * w + x0) * 3..(row * w + x1) * 3];
        let y = &p.y[row * p.y_stride + x0..row * p.y_stride + x1];
        for ((pair, ys), t) in line.chunks_mut(6).zip(y.chunks(2)).zip(&terms) {
            for (px, &luma) in pair.chunks_exact_mut(3).zip(ys) {
                let l = ((i32::from(luma) - 16) * Y) >> 16;
                px[0] = clamp(l + t[0]);
                px[1] = clamp(l + t[1]);
                px[2] = clamp(l + t[2]);
            }
        }
    }
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
