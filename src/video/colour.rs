//! A decoded picture's 4:2:0 planes to interleaved RGB, as FFmpeg's swscale converts video that
//! does not say otherwise (what torchcodec and PyAV give): BT.601 coefficients, limited range
//! (luma 16-235, chroma 16-240), each chroma sample covering its 2x2 luma block.

use super::Picture;

/// Fixed-point (16 fractional bits) BT.601 limited-range coefficients.
const Y: i32 = 76_309; // 255 / 219
const RV: i32 = 104_597; // 1.402 * 255 / 224
const GU: i32 = 25_675; // 0.344136 * 255 / 224
const GV: i32 = 53_279; // 0.714136 * 255 / 224
const BU: i32 = 132_201; // 1.772 * 255 / 224
const HALF: i32 = 1 << 15;

/// Writes `p` as `height * width * 3` bytes of RGB into `out` (resized to fit).
pub fn to_rgb(p: &Picture<'_>, out: &mut Vec<u8>) {
    let (w, h) = (p.width, p.height);
    out.resize(w * h * 3, 0);
    for (row, line) in out.chunks_exact_mut(w * 3).enumerate() {
        let y = &p.y[row * p.y_stride..row * p.y_stride + w];
        let c = (row / 2) * p.uv_stride;
        let (u, v) = (&p.u[c..], &p.v[c..]);
        for (x, px) in line.chunks_exact_mut(3).enumerate() {
            let l = (i32::from(y[x]) - 16) * Y + HALF;
            let cb = i32::from(u[x / 2]) - 128;
            let cr = i32::from(v[x / 2]) - 128;
            px[0] = clamp((l + RV * cr) >> 16);
            px[1] = clamp((l - GU * cb - GV * cr) >> 16);
            px[2] = clamp((l + BU * cb) >> 16);
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
                        (i32::from(px[k]) - rgb[k]).abs() <= 1,
                        "{yuv:?} gave {px:?}, not {rgb:?}"
                    );
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
