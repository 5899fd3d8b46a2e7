//! OpenCV's `cv2.resize(img, (w, h), interpolation=...)` of an 8-bit image by two-tap rules
//! (what albumentations' `Resize`, `RandomResizedCrop` and the other resizes run), byte for
//! byte: `INTER_LINEAR` (their default), `INTER_NEAREST`, and `INTER_AREA` where it enlarges
//! either axis (where it shrinks both, `cv2_area` computes it).
//!
//! For `INTER_LINEAR` OpenCV places output pixel `i` of an axis at `(i + 0.5) * scale - 0.5`
//! (the scale in f64, the position rounded to f32), reads the two source pixels around it and
//! weighs them with 11-bit fixed-point weights (`(1 - f) * 2048` and `f * 2048`, each rounded
//! half to even). `INTER_AREA` that enlarges reads source pixel `floor(i * scale)` and the next,
//! the second weighed by the fraction of the output pixel's cell past the source pixel's end
//! (`(i + 1) - (s + 1) / scale`, 0 where negative, its fractional part otherwise).
//! `INTER_NEAREST` reads `floor(i * scale)` alone, which the same arithmetic with weights 2048
//! and 0 copies. Across a row a position left of the first pixel or right of the last reads
//! that pixel alone; down the columns the weights stay as computed and the two rows are
//! clipped to the image (so the first and last output rows of an enlargement weigh one row
//! twice, with the rounding that gives). The pass across keeps the 32-bit sums; the pass down
//! takes each sum shifted down by 4, multiplies it by its weight keeping the high 16 bits,
//! adds the two with 2 and shifts by 2 more (OpenCV's vector arithmetic, which its scalar tail
//! matches). An exact halving on both axes is the same as OpenCV's 2x2 average, which it runs
//! instead.

/// Which of OpenCV's rules places an axis's taps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Rule {
    Linear,
    Nearest,
    /// `INTER_AREA` where it enlarges an axis (both axes take this rule then).
    AreaEnlarging,
}

/// An axis of a resize as OpenCV sees it: the source it reads (`size` pixels from `first`),
/// its whole output's size (`full`), and where the window's first output pixel is in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Axis {
    pub first: usize,
    pub size: usize,
    pub full: usize,
    pub offset: usize,
}

impl Axis {
    /// The axis of `out` output pixels of a window `len` long from `start` on an axis `limit`
    /// pixels long. A `view` window is cut out first (albumentations crops, then resizes the
    /// crop), so its own edges bound the source; otherwise the window is part of a resize of
    /// the whole axis (a resize, then a crop of it), whose size and the window's offset in
    /// it are recovered from the window.
    pub fn of(out: u32, start: f64, len: f64, limit: u32, view: bool) -> Self {
        if view {
            return Self {
                first: start as usize,
                size: len as usize,
                full: out as usize,
                offset: 0,
            };
        }
        let full = (f64::from(limit) * f64::from(out) / len).round();
        let offset = (start * full / f64::from(limit)).round() as usize;
        Self {
            first: 0,
            size: limit as usize,
            full: full as usize,
            offset,
        }
    }

    /// OpenCV's `inv_scale` (output over source, in f64) and `scale` (its reciprocal).
    pub fn scales(&self) -> (f64, f64) {
        let inv = self.full as f64 / self.size as f64;
        (inv, 1.0 / inv)
    }
}

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

/// The linear taps of `out` output pixels of a window `len` long from `start` on an axis
/// `limit` pixels long (`Axis::of`). `across` selects the rule of the pass along rows
/// (positions outside the source clamped to the edge pixel with its whole weight) rather than
/// the pass down the columns (the weights kept, the rows clipped).
#[cfg(test)]
pub(super) fn taps(
    out: u32,
    start: f64,
    len: f64,
    limit: u32,
    view: bool,
    across: bool,
) -> Vec<Tap> {
    taps_by(
        Rule::Linear,
        &Axis::of(out, start, len, limit, view),
        out,
        across,
    )
}

/// The taps of the window's `out` output pixels on `axis` by `rule`.
pub(super) fn taps_by(rule: Rule, axis: &Axis, out: u32, across: bool) -> Vec<Tap> {
    let (inv, scale) = axis.scales();
    let last = axis.size.saturating_sub(1) as isize;
    (0..out as usize)
        .map(|i| {
            let i = i + axis.offset;
            let (mut s, mut f) = match rule {
                Rule::Linear => {
                    let f = ((i as f64 + 0.5) * scale - 0.5) as f32;
                    let s = f.floor();
                    (s as isize, f - s)
                }
                Rule::Nearest => (((i as f64) * scale).floor() as isize, 0.0),
                Rule::AreaEnlarging => {
                    let s = ((i as f64) * scale).floor() as isize;
                    let f = ((i + 1) as f64 - (s + 1) as f64 * inv) as f32;
                    (s, if f <= 0.0 { 0.0 } else { f - f.floor() })
                }
            };
            if rule == Rule::Nearest {
                s = s.min(last);
            }
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
            let clip = |v: isize| axis.first + v.clamp(0, last) as usize;
            let hi = if rule == Rule::Nearest { s } else { s + 1 };
            Tap {
                lo: clip(s),
                hi: clip(hi),
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
    /// A grey image's output row, one value a pixel, before it is written to three channels.
    grey_row: Vec<u8>,
}

impl Cv2Linear {
    /// Resamples `src` (RGB8 rows of `stride` bytes) with the taps `xs` across and `ys` down
    /// into `out` (`ys.len()` rows of `xs.len()` pixels). With `grey` (every pixel of `src`
    /// has three equal channels) the first channel alone is computed and written to all three:
    /// the same bytes, a third of the arithmetic.
    pub fn run(
        &mut self,
        src: &[u8],
        stride: usize,
        (xs, ys): (&[Tap], &[Tap]),
        grey: bool,
        out: &mut [u8],
    ) {
        if grey {
            return self.run_grey(src, stride, (xs, ys), out);
        }
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
                *o = down(w0, w1, s0, s1);
            }
        }
    }

    /// [`Cv2Linear::run`] of a grey image: its first channel's sums alone.
    fn run_grey(&mut self, src: &[u8], stride: usize, (xs, ys): (&[Tap], &[Tap]), out: &mut [u8]) {
        let width = xs.len();
        for slot in &mut self.rows {
            slot.0 = None;
            slot.1.resize(width, 0);
        }
        self.grey_row.resize(width, 0);
        for (y, line) in ys.iter().zip(out.chunks_exact_mut(width * 3)) {
            let lo = self.summed_grey(src, stride, xs, y.lo, y.hi);
            let hi = self.summed_grey(src, stride, xs, y.hi, y.lo);
            let (a, b) = (&self.rows[lo].1[..width], &self.rows[hi].1[..width]);
            let (w0, w1) = (y.w0, y.w1);
            // One value a pixel (a vector loop), then each to the pixel's three channels.
            for ((o, &s0), &s1) in self.grey_row.iter_mut().zip(a).zip(b) {
                *o = down(w0, w1, s0, s1);
            }
            for (px, &v) in line.chunks_exact_mut(3).zip(&self.grey_row) {
                px.copy_from_slice(&[v; 3]);
            }
        }
    }

    /// The kept row to sum source row `row` into, and whether it holds that row's sums
    /// already: the one that does not hold `keep` (the other row the output row reads).
    fn row_for(&self, row: usize, keep: usize) -> (usize, bool) {
        match self.rows.iter().position(|r| r.0 == Some(row)) {
            Some(k) => (k, true),
            None => (
                usize::from(self.rows[0].0 == Some(keep) && keep != row),
                false,
            ),
        }
    }

    /// Which of the two kept rows holds the pass across's sums of source row `row`, summing
    /// it into the one that does not hold `keep` (the other row the output row reads).
    fn summed(&mut self, src: &[u8], stride: usize, xs: &[Tap], row: usize, keep: usize) -> usize {
        let (k, held) = self.row_for(row, keep);
        if held {
            return k;
        }
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

    /// [`Cv2Linear::summed`] of a grey image's row: its first channel's sums alone.
    fn summed_grey(
        &mut self,
        src: &[u8],
        stride: usize,
        xs: &[Tap],
        row: usize,
        keep: usize,
    ) -> usize {
        let (k, held) = self.row_for(row, keep);
        if held {
            return k;
        }
        let line = &src[row * stride..(row + 1) * stride];
        for (tap, sum) in xs.iter().zip(self.rows[k].1.iter_mut()) {
            *sum = i32::from(line[tap.lo * 3]) * tap.w0 + i32::from(line[tap.hi * 3]) * tap.w1;
        }
        self.rows[k].0 = Some(row);
        k
    }
}

/// The pass down of one value: the two rows' sums shifted down by 4, each times its weight
/// keeping the high 16 bits, added with 2 and shifted by 2 more.
#[inline(always)]
fn down(w0: i32, w1: i32, s0: i32, s1: i32) -> u8 {
    let v = ((w0 * (s0 >> 4)) >> 16) + ((w1 * (s1 >> 4)) >> 16) + 2;
    (v >> 2).clamp(0, 255) as u8
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
        Cv2Linear::default().run(&src, 12, (&xs, &ys), false, &mut out);
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
    fn nearest_reads_the_pixel_at_the_floor_of_the_scaled_position_alone() {
        // 5 pixels to 3: positions 0, 5/3 and 10/3 read pixels 0, 1 and 3.
        let axis = Axis::of(3, 0.0, 5.0, 5, true);
        let got: Vec<(usize, usize, i32, i32)> = taps_by(Rule::Nearest, &axis, 3, true)
            .iter()
            .map(|t| (t.lo, t.hi, t.w0, t.w1))
            .collect();
        assert_eq!(got, [(0, 0, 2048, 0), (1, 1, 2048, 0), (3, 3, 2048, 0)]);
    }

    #[test]
    fn an_enlarging_area_resize_weighs_the_next_pixel_by_the_cells_part_past_the_first() {
        // 2 pixels to 3 (scale 2/3): output 0 reads pixel 0 alone ((0 + 1) - (0 + 1) * 1.5
        // is negative), output 1 weighs pixels 0 and 1 by half each ((1 + 1) - (0 + 1) * 1.5
        // = 0.5), output 2 reads the last pixel alone (clamped across).
        let axis = Axis::of(3, 0.0, 2.0, 2, true);
        let across = taps_by(Rule::AreaEnlarging, &axis, 3, true);
        let got: Vec<(usize, usize, i32, i32)> =
            across.iter().map(|t| (t.lo, t.hi, t.w0, t.w1)).collect();
        assert_eq!(got, [(0, 1, 2048, 0), (0, 1, 1024, 1024), (1, 1, 2048, 0)]);
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
