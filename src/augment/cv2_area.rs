//! OpenCV's `cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA)` of an 8-bit RGB image
//! that shrinks both axes (what albumentations' resizes run with `interpolation=cv2.INTER_AREA`),
//! byte for byte. (Where it enlarges either axis OpenCV runs a two-tap rule: `cv2_linear`.)
//!
//! Each output pixel is the mean of the source cell it covers, `scale = 1 / (out / in)` pixels
//! on a side, partly covered source pixels weighed by the part covered. When both scales are
//! whole numbers (within f64's epsilon) OpenCV sums each cell's bytes as integers and divides:
//! `(sum + 2) >> 2` for a 2x2 cell (its vector path), else `sum * (1 / area)` in f32, rounded
//! half to even. Otherwise it accumulates in f32, in this order: each source row's pixels times
//! their weights across (`alpha`, per output column, in the order of the source pixels), then
//! the rows times theirs down (`beta`), and rounds each output row's sums half to even. The
//! weights are OpenCV's: a whole pixel weighs `1 / cell`, a part `part / cell`, where `cell`
//! is the scale, or what is left of the source at the last output pixel.

use super::cv2_linear::Axis;

/// One source pixel's part in an output pixel on an axis: output `dst` (in the window),
/// source `src` (in the image), weight `alpha`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Part {
    pub dst: usize,
    pub src: usize,
    pub alpha: f32,
}

/// The parts of the window's `out` output pixels on `axis`, in OpenCV's order.
pub(super) fn parts(axis: &Axis, out: usize) -> Vec<Part> {
    let (_, scale) = axis.scales();
    let size = axis.size as f64;
    let mut parts = Vec::new();
    for d in axis.offset..axis.offset + out {
        let mut push = |src: isize, alpha: f64| {
            parts.push(Part {
                dst: d - axis.offset,
                src: axis.first + src as usize,
                alpha: alpha as f32,
            });
        };
        let begin = d as f64 * scale;
        let end = begin + scale;
        let cell = scale.min(size - begin);
        let last = (end.floor() as isize).min(axis.size as isize - 1);
        let first = (begin.ceil() as isize).min(last);
        if first as f64 - begin > 1e-3 {
            push(first - 1, (first as f64 - begin) / cell);
        }
        for s in first..last {
            push(s, 1.0 / cell);
        }
        if end - last as f64 > 1e-3 {
            push(last, (end - last as f64).min(1.0).min(cell) / cell);
        }
    }
    parts
}

/// The whole-number scale of an axis, where OpenCV takes it as one (within f64's epsilon).
fn whole_scale(axis: &Axis) -> Option<usize> {
    let (_, scale) = axis.scales();
    let whole = scale.round();
    ((scale - whole).abs() < f64::EPSILON && whole >= 1.0).then_some(whole as usize)
}

/// Whether OpenCV's `INTER_AREA` averages cells on these axes (both shrink or keep their
/// size) rather than running its two-tap rule.
pub(super) fn averages(x: &Axis, y: &Axis) -> bool {
    x.scales().1 >= 1.0 && y.scales().1 >= 1.0
}

/// The f32 sums kept between images.
#[derive(Default)]
pub(super) struct Cv2Area {
    row: Vec<f32>,
    sums: Vec<f32>,
}

impl Cv2Area {
    /// Resamples `src` (RGB8 rows of `stride` bytes) on the axes `x` and `y` into `out`
    /// (`out_h` rows of `out_w` pixels). With `grey` (every pixel of `src` has three equal
    /// channels) the first channel alone is computed and written to all three.
    pub fn run(
        &mut self,
        src: &[u8],
        stride: usize,
        (x, out_w): (&Axis, usize),
        (y, out_h): (&Axis, usize),
        grey: bool,
        out: &mut [u8],
    ) {
        let channels = if grey { 1 } else { 3 };
        if let (Some(sx), Some(sy)) = (whole_scale(x), whole_scale(y)) {
            return cells(src, stride, (x, sx, out_w), (y, sy, out_h), channels, out);
        }
        let (xs, ys) = (parts(x, out_w), parts(y, out_h));
        let width = out_w * channels;
        let line_out = out_w * 3;
        self.row.resize(width, 0.0);
        self.sums.clear();
        self.sums.resize(width, 0.0);
        let Some(first) = ys.first() else { return };
        let mut current = first.dst;
        for part in &ys {
            let line = &src[part.src * stride..];
            self.row.fill(0.0);
            for p in &xs {
                let (px, acc) = (
                    &line[p.src * 3..p.src * 3 + channels],
                    &mut self.row[p.dst * channels..(p.dst + 1) * channels],
                );
                for (a, &v) in acc.iter_mut().zip(px) {
                    *a += f32::from(v) * p.alpha;
                }
            }
            let beta = part.alpha;
            if part.dst != current {
                let o = &mut out[current * line_out..(current + 1) * line_out];
                write_row(&self.sums, channels, o);
                for (s, &r) in self.sums.iter_mut().zip(&self.row) {
                    *s = beta * r;
                }
                current = part.dst;
            } else {
                for (s, &r) in self.sums.iter_mut().zip(&self.row) {
                    *s += beta * r;
                }
            }
        }
        let o = &mut out[current * line_out..(current + 1) * line_out];
        write_row(&self.sums, channels, o);
    }
}

/// OpenCV's `saturate_cast<uchar>(float)`: rounded half to even, clamped; a row's sums
/// (`channels` a pixel) into its RGB8 pixels, one channel's value written to all three.
fn write_row(sums: &[f32], channels: usize, out: &mut [u8]) {
    let level = |s: f32| s.round_ties_even().clamp(0.0, 255.0) as u8;
    if channels == 1 {
        for (px, &s) in out.chunks_exact_mut(3).zip(sums) {
            px.fill(level(s));
        }
    } else {
        for (o, &s) in out.iter_mut().zip(sums) {
            *o = level(s);
        }
    }
}

/// The whole-number cells: each `sx` x `sy` cell's bytes summed, then divided as OpenCV
/// divides them; the first `channels` of each pixel (one: written to all three).
fn cells(
    src: &[u8],
    stride: usize,
    (x, sx, out_w): (&Axis, usize, usize),
    (y, sy, out_h): (&Axis, usize, usize),
    channels: usize,
    out: &mut [u8],
) {
    let inverse = 1.0f32 / (sx * sy) as f32;
    for (j, line) in out.chunks_exact_mut(out_w * 3).take(out_h).enumerate() {
        let top = y.first + (j + y.offset) * sy;
        for (i, px) in line.chunks_exact_mut(3).enumerate() {
            let left = x.first + (i + x.offset) * sx;
            for c in 0..channels {
                let mut sum = 0u32;
                for r in top..top + sy {
                    let row = &src[r * stride..];
                    for k in left..left + sx {
                        sum += u32::from(row[k * 3 + c]);
                    }
                }
                px[c] = if sx == 2 && sy == 2 {
                    ((sum + 2) >> 2) as u8
                } else {
                    (sum as f32 * inverse).round_ties_even().clamp(0.0, 255.0) as u8
                };
            }
            if channels == 1 {
                (px[1], px[2]) = (px[0], px[0]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(size: usize, full: usize) -> Axis {
        Axis {
            first: 0,
            size,
            full,
            offset: 0,
        }
    }

    #[test]
    fn a_cell_of_one_and_a_half_pixels_weighs_the_half_pixel_by_its_part() {
        // 3 pixels to 2: cells [0, 1.5) and [1.5, 3).
        let p = parts(&axis(3, 2), 2);
        let want = [
            (0, 0, 1.0 / 1.5),
            (0, 1, 0.5 / 1.5),
            (1, 1, 0.5 / 1.5),
            (1, 2, 1.0 / 1.5),
        ];
        assert_eq!(p.len(), want.len());
        for (got, (d, s, a)) in p.iter().zip(want) {
            assert_eq!((got.dst, got.src), (d, s));
            assert_eq!(got.alpha, a as f32);
        }
    }

    #[test]
    fn whole_cells_are_summed_and_divided_and_a_2x2_rounds_half_up() {
        // A 4x2 image to 2x1: each 2x2 cell's mean, a half rounded up (OpenCV's vector path).
        let values = [10u8, 11, 200, 201, 12, 11, 0, 1];
        let src: Vec<u8> = values.iter().flat_map(|&v| [v; 3]).collect();
        let mut out = vec![0; 6];
        Cv2Area::default().run(
            &src,
            12,
            (&axis(4, 2), 2),
            (&axis(2, 1), 1),
            false,
            &mut out,
        );
        // (10 + 11 + 12 + 11) / 4 = 11; (200 + 201 + 0 + 1) / 4 = 100.5, up to 101.
        assert_eq!(out, [11, 11, 11, 101, 101, 101]);
        // A 3x1 cell of 1, 2, 2: 5 / 3 = 1.67, to 2; the mean is no halving's.
        let src: Vec<u8> = [1u8, 2, 2].iter().flat_map(|&v| [v; 3]).collect();
        let mut out = vec![0; 3];
        Cv2Area::default().run(&src, 9, (&axis(3, 1), 1), (&axis(1, 1), 1), false, &mut out);
        assert_eq!(out, [2, 2, 2]);
    }

    #[test]
    fn a_window_of_a_whole_resize_takes_that_resizes_cells() {
        let whole = parts(&axis(100, 30), 30);
        let window = parts(
            &Axis {
                offset: 10,
                ..axis(100, 30)
            },
            5,
        );
        let shifted: Vec<Part> = whole
            .iter()
            .filter(|p| (10..15).contains(&p.dst))
            .map(|p| Part {
                dst: p.dst - 10,
                ..*p
            })
            .collect();
        assert_eq!(window, shifted);
    }
}
