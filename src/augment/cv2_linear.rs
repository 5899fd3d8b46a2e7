//! OpenCV's `cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR)` of an 8-bit image (what
//! albumentations' `Resize`, `RandomResizedCrop` and the other resizes run by default), byte
//! for byte.
//!
//! OpenCV places output pixel `i` of an axis at `(i + 0.5) * scale - 0.5` (the scale in f64,
//! the position rounded to f32), reads the two source pixels around it and weighs them with
//! 11-bit fixed-point weights (`(1 - f) * 2048` and `f * 2048`, each rounded half to even).
//! Across a row a position left of the first pixel or right of the last reads that pixel
//! alone; down the columns the weights stay as computed and the two rows are clipped to the
//! image (so the first and last output rows of an enlargement weigh one row twice, with the
//! rounding that gives). The pass across keeps the 32-bit sums; the pass down takes each sum
//! shifted down by 4, multiplies it by its weight keeping the high 16 bits, adds the two
//! with 2 and shifts by 2 more (OpenCV's vector arithmetic, which its scalar tail matches).
//! An exact halving on both axes is the same as OpenCV's 2x2 average, which it runs instead.

/// One output pixel's taps on an axis: the two source positions and their 11-bit weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Tap {
    pub lo: usize,
    pub hi: usize,
    pub w0: i32,
    pub w1: i32,
}

/// OpenCV's `saturate_cast<short>(float)`: rounded half to even.
fn weight(v: f32) -> i32 {
    v.round_ties_even() as i32
}

/// The taps of `out` output pixels of a window `len` long from `start` on an axis `limit`
/// pixels long. A `view` window is cut out first (albumentations crops, then resizes the
/// crop), so its own edges bound the taps; otherwise the window is part of a resize of the
/// whole axis (a resize, then a crop of it), whose size and the window's offset in it are
/// recovered from the window. `across` selects the rule of the pass along rows (positions
/// outside the source clamped to the edge pixel with its whole weight) rather than the pass
/// down the columns (the weights kept, the rows clipped).
pub(super) fn taps(
    out: u32,
    start: f64,
    len: f64,
    limit: u32,
    view: bool,
    across: bool,
) -> Vec<Tap> {
    // The source the resize reads (`first`, `size` pixels), its output's size, and where the
    // window's first output pixel is in that output.
    let (first, size, full, offset) = if view {
        (start as usize, len as usize, out as usize, 0)
    } else {
        let full = (f64::from(limit) * f64::from(out) / len).round();
        let offset = (start * full / f64::from(limit)).round() as usize;
        (0, limit as usize, full as usize, offset)
    };
    let scale = 1.0 / (full as f64 / size as f64);
    let last = size.saturating_sub(1) as isize;
    (0..out as usize)
        .map(|i| {
            let f = (((i + offset) as f64 + 0.5) * scale - 0.5) as f32;
            let mut s = f.floor() as isize;
            let mut f = f - s as f32;
            if across {
                if s < 0 {
                    (s, f) = (0, 0.0);
                }
                if s >= last {
                    (s, f) = (last, 0.0);
                }
            }
            let w0 = weight((1.0 - f) * 2048.0);
            let w1 = weight(f * 2048.0);
            let clip = |v: isize| first + v.clamp(0, last) as usize;
            Tap {
                lo: clip(s),
                hi: clip(s + 1),
                w0,
                w1,
            }
        })
        .collect()
}

/// The pass across's sums of the rows the pass down reads, kept between output rows (each
/// source row is summed once however many output rows read it) and between images.
#[derive(Default)]
pub(super) struct Cv2Linear {
    rows: [(Option<usize>, Vec<i32>); 2],
}

impl Cv2Linear {
    /// Resamples `src` (RGB8 rows of `stride` bytes) with the taps `xs` across and `ys` down
    /// into `out` (`ys.len()` rows of `xs.len()` pixels).
    pub fn run(&mut self, src: &[u8], stride: usize, xs: &[Tap], ys: &[Tap], out: &mut [u8]) {
        let width = xs.len() * 3;
        for slot in &mut self.rows {
            slot.0 = None;
            slot.1.resize(width, 0);
        }
        for (y, line) in ys.iter().zip(out.chunks_exact_mut(width)) {
            let lo = self.summed(src, stride, xs, y.lo, y.hi);
            let hi = self.summed(src, stride, xs, y.hi, y.lo);
            let (a, b) = (&self.rows[lo].1[..width], &self.rows[hi].1[..width]);
            let (w0, w1) = (y.w0, y.w1);
            for ((o, &s0), &s1) in line.iter_mut().zip(a).zip(b) {
                let v = ((w0 * (s0 >> 4)) >> 16) + ((w1 * (s1 >> 4)) >> 16) + 2;
                *o = (v >> 2).clamp(0, 255) as u8;
            }
        }
    }

    /// Which of the two kept rows holds the pass across's sums of source row `row`, summing
    /// it into the one that does not hold `keep` (the other row the output row reads).
    fn summed(&mut self, src: &[u8], stride: usize, xs: &[Tap], row: usize, keep: usize) -> usize {
        if let Some(k) = self.rows.iter().position(|r| r.0 == Some(row)) {
            return k;
        }
        let k = usize::from(self.rows[0].0 == Some(keep) && keep != row);
        let line = &src[row * stride..(row + 1) * stride];
        let sums = &mut self.rows[k].1;
        for (tap, px) in xs.iter().zip(sums.chunks_exact_mut(3)) {
            let (a, b) = (
                &line[tap.lo * 3..tap.lo * 3 + 3],
                &line[tap.hi * 3..tap.hi * 3 + 3],
            );
            let (w0, w1) = (tap.w0, tap.w1);
            px[0] = i32::from(a[0]) * w0 + i32::from(b[0]) * w1;
            px[1] = i32::from(a[1]) * w0 + i32::from(b[1]) * w1;
            px[2] = i32::from(a[2]) * w0 + i32::from(b[2]) * w1;
        }
        self.rows[k].0 = Some(row);
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_halving_weighs_each_pair_equally_and_rounds_their_mean_half_up() {
        let xs = taps(2, 0.0, 4.0, 4, true, true);
        assert_eq!(
            xs,
            [
                Tap {
                    lo: 0,
                    hi: 1,
                    w0: 1024,
                    w1: 1024
                },
                Tap {
                    lo: 2,
                    hi: 3,
                    w0: 1024,
                    w1: 1024
                }
            ]
        );
        // A 4x2 image of one channel's values (the same in each channel) to 2x1: each output
        // is the 2x2 block's mean, rounded half up.
        let values = [10u8, 11, 200, 201, 12, 12, 0, 1];
        let src: Vec<u8> = values.iter().flat_map(|&v| [v; 3]).collect();
        let ys = taps(1, 0.0, 2.0, 2, true, false);
        let mut out = vec![0; 6];
        Cv2Linear::default().run(&src, 12, &xs, &ys, &mut out);
        assert_eq!(out, [11, 11, 11, 101, 101, 101]);
    }

    #[test]
    fn an_enlargement_clamps_across_and_clips_rows_down() {
        // Two pixels to four: the first and last positions fall outside the source.
        let xs = taps(4, 0.0, 2.0, 2, true, true);
        assert_eq!(
            xs[0],
            Tap {
                lo: 0,
                hi: 1,
                w0: 2048,
                w1: 0
            }
        );
        assert_eq!(
            xs[3],
            Tap {
                lo: 1,
                hi: 1,
                w0: 2048,
                w1: 0
            }
        );
        let ys = taps(4, 0.0, 2.0, 2, true, false);
        // Down, the first row sits at -0.25: rows -1 and 0 (both row 0) weighed 512 and 1536.
        assert_eq!(
            ys[0],
            Tap {
                lo: 0,
                hi: 0,
                w0: 512,
                w1: 1536
            }
        );
        assert_eq!(
            ys[3],
            Tap {
                lo: 1,
                hi: 1,
                w0: 1536,
                w1: 512
            }
        );
    }

    #[test]
    fn a_window_of_a_whole_resize_takes_that_resizes_positions() {
        // A resize of 100 pixels to 50, then a crop of 20 from the 10th: the window is 40
        // source pixels from the 20th.
        let whole = taps(50, 0.0, 100.0, 100, false, true);
        let window = taps(20, 20.0, 40.0, 100, false, true);
        assert_eq!(window, whole[10..30]);
    }
}
