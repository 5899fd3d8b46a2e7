//! OpenCV's `cv2.resize(img, (w, h), interpolation=cv2.INTER_CUBIC)` of an 8-bit image (what
//! albumentations' resizes run when given that flag), as opencv-python's wheels compute it.
//!
//! Output pixel `i` of an axis sits at `(i + 0.5) * scale - 0.5` in the source; the four
//! source pixels from the one before its floor weigh by Keys' cubic with `a = -0.75` at their
//! distances (no widening when shrinking: OpenCV's cubic never antialiases), positions
//! outside the source reading the edge pixel. The wheels route an 8-bit cubic resize through
//! Intel IPP (their "custom HAL"), whose arithmetic is its own: measured against it over
//! random images and sizes (`cv2.resize` with IPP on, OpenCV 5.0), the continuous filter
//! evaluated in floating point and rounded once, half up, gives its bytes in 99.9% of
//! values and is one level off in the rest (sums within a few hundredths of a half, and
//! pixels whose taps reach past an edge); OpenCV's own 11-bit arithmetic, which it runs with
//! IPP off, is itself one level off IPP's in 4% of values. So this kernel computes the
//! continuous filter (in f32: its rounding error is far below what separates it from IPP's)
//! and its parity is stated as one level.

use super::cv2_linear::Axis;

/// One output pixel's four source positions (absolute, clamped to the axis) and weights.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Tap {
    pub at: [usize; 4],
    pub w: [f32; 4],
}

/// Keys' cubic convolution weights with `a = -0.75` (OpenCV's `interpolateCubic`) for a
/// position `t` in `[0, 1)` past the second of the four source pixels.
fn weights(t: f64) -> [f64; 4] {
    const A: f64 = -0.75;
    let near = |x: f64| ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let far = |x: f64| ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
    let (w0, w1, w2) = (far(t + 1.0), near(t), near(1.0 - t));
    [w0, w1, w2, 1.0 - w0 - w1 - w2]
}

/// The cubic taps of the window's `out` output pixels on `axis` (`Axis::of`: a view is cut
/// out first and resized whole; otherwise the window is part of a resize of the whole axis).
pub(super) fn taps(axis: &Axis, out: u32) -> Vec<Tap> {
    let scale = axis.scales().1;
    let last = axis.size.saturating_sub(1) as isize;
    (0..out as usize)
        .map(|i| {
            let f = (i + axis.offset) as f64 + 0.5;
            let f = f * scale - 0.5;
            let s = f.floor();
            let w = weights(f - s);
            let s = s as isize;
            Tap {
                at: std::array::from_fn(|k| {
                    axis.first + (s - 1 + k as isize).clamp(0, last) as usize
                }),
                w: w.map(|v| v as f32),
            }
        })
        .collect()
}

/// The pass across's rows (f32, unrounded), kept between images.
#[derive(Default)]
pub(super) struct Cv2Cubic {
    /// Source row -> its index in `rows`, for the rows the pass down reads.
    slot: Vec<usize>,
    rows: Vec<f32>,
    /// The source row being filtered, as floats.
    line: Vec<f32>,
}

impl Cv2Cubic {
    /// Resamples `src` (RGB8 rows of `stride` bytes) with the taps `xs` across and `ys` down
    /// into `out` (`ys.len()` rows of `xs.len()` pixels): each source row the pass down reads
    /// filtered across once, then the four rows of each output row summed down and rounded.
    /// With `grey` (every pixel of `src` has three equal channels) the first channel alone is
    /// computed and written to all three.
    pub fn run(
        &mut self,
        src: &[u8],
        stride: usize,
        (xs, ys): (&[Tap], &[Tap]),
        grey: bool,
        out: &mut [u8],
    ) {
        let channels = if grey { 1 } else { 3 };
        let width = xs.len() * channels;
        let rows = ys.iter().flat_map(|t| t.at);
        let (Some(lo), Some(hi)) = (rows.clone().min(), rows.max()) else {
            return; // no output rows
        };
        // The rows read, each once: a shrink by more than four passes over the others.
        const UNREAD: usize = usize::MAX;
        self.slot.clear();
        self.slot.resize(hi - lo + 1, UNREAD);
        let mut n = 0;
        for r in ys.iter().flat_map(|t| t.at) {
            if self.slot[r - lo] == UNREAD {
                self.slot[r - lo] = n;
                n += 1;
            }
        }
        self.rows.resize(n * width, 0.0);
        for (r, &k) in self.slot.iter().enumerate() {
            if k == UNREAD {
                continue;
            }
            // The row as floats once (a vector loop), then each output pixel's four taps.
            let line = &src[(lo + r) * stride..][..stride];
            self.line.clear();
            let across = &mut self.rows[k * width..][..width];
            if grey {
                self.line
                    .extend(line.iter().step_by(3).map(|&v| f32::from(v)));
                for (tap, o) in xs.iter().zip(across.iter_mut()) {
                    let p = |k: usize| self.line[tap.at[k]];
                    let [w0, w1, w2, w3] = tap.w;
                    *o = p(0) * w0 + p(1) * w1 + p(2) * w2 + p(3) * w3;
                }
                continue;
            }
            self.line.extend(line.iter().map(|&v| f32::from(v)));
            for (tap, px) in xs.iter().zip(across.chunks_exact_mut(3)) {
                let p = |k: usize| -> &[f32; 3] {
                    self.line[tap.at[k] * 3..][..3]
                        .try_into()
                        .expect("three values")
                };
                let (a, b, c, d) = (p(0), p(1), p(2), p(3));
                let [w0, w1, w2, w3] = tap.w;
                for ch in 0..3 {
                    px[ch] = a[ch] * w0 + b[ch] * w1 + c[ch] * w2 + d[ch] * w3;
                }
            }
        }
        for (tap, line) in ys.iter().zip(out.chunks_exact_mut(xs.len() * 3)) {
            let row = |k: usize| &self.rows[self.slot[tap.at[k] - lo] * width..][..width];
            let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
            let [w0, w1, w2, w3] = tap.w;
            // Half up, saturated: clamped first, the cast's truncation is the floor (and
            // compiles to vector code, where `floor` is a call per value without SSE4.1).
            let level = |i: usize| {
                let v = r0[i] * w0 + r1[i] * w1 + r2[i] * w2 + r3[i] * w3;
                (v + 0.5).clamp(0.0, 255.0) as u8
            };
            if grey {
                for (i, px) in line.chunks_exact_mut(3).enumerate() {
                    px.fill(level(i));
                }
            } else {
                for (i, o) in line.iter_mut().enumerate() {
                    *o = level(i);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resize(src: &[u8], (w, h): (usize, usize), (ow, oh): (u32, u32)) -> Vec<u8> {
        let x = Axis::of(ow, 0.0, w as f64, w as u32, false);
        let y = Axis::of(oh, 0.0, h as f64, h as u32, false);
        let mut out = vec![0; ow as usize * oh as usize * 3];
        Cv2Cubic::default().run(src, w * 3, (&taps(&x, ow), &taps(&y, oh)), false, &mut out);
        out
    }

    #[test]
    fn weights_are_keys_cubic_and_sum_to_one() {
        // At a whole position the pixel itself has all the weight.
        assert_eq!(weights(0.0), [0.0, 1.0, 0.0, 0.0]);
        // Half way: the near pair 19/32 each, the far pair a/8 each.
        let half = weights(0.5);
        assert!((half[0] - (-0.75 / 8.0 * 1.0)).abs() < 1e-12, "{half:?}");
        assert!((half[1] - 0.59375).abs() < 1e-12 && (half[2] - 0.59375).abs() < 1e-12);
        for t in [0.1, 0.25, 0.7, 0.99] {
            let w = weights(t);
            assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            assert!(w[0] <= 0.0 && w[3] <= 0.0, "negative lobes outside: {w:?}");
        }
    }

    #[test]
    fn a_flat_image_stays_flat_shrunk_or_enlarged() {
        let src = vec![77u8; 31 * 17 * 3];
        for size in [(5, 4), (31, 17), (64, 50), (13, 40)] {
            assert!(resize(&src, (31, 17), size).iter().all(|&v| v == 77));
        }
    }

    #[test]
    fn taps_past_an_edge_read_the_edge_pixel_and_shrinking_keeps_four_taps() {
        let axis = Axis::of(4, 0.0, 16.0, 16, false);
        let t = taps(&axis, 4);
        // Scale 4: output 0 sits at 1.5, reading 0..=3; output 3 at 13.5, reading 12..=15.
        assert_eq!(t[0].at, [0, 1, 2, 3]);
        assert_eq!(t[3].at, [12, 13, 14, 15]);
        let up = taps(&Axis::of(8, 0.0, 2.0, 2, false), 8);
        // Enlarged 4x: output 0 sits at -0.375, before the first pixel.
        assert_eq!(up[0].at, [0, 0, 0, 1]);
        assert_eq!(up[7].at, [0, 1, 1, 1]);
    }

    #[test]
    fn a_window_of_a_whole_resize_takes_that_resizes_pixels() {
        let (w, h) = (23usize, 19usize);
        let src: Vec<u8> = (0..w * h * 3).map(|i| (i * 37 % 251) as u8).collect();
        let whole = resize(&src, (w, h), (46, 38));
        // The window of output pixels 10..30 x 5..25 of that resize.
        let x = Axis::of(20, 10.0 * 0.5, 20.0 * 0.5, w as u32, false);
        let y = Axis::of(20, 5.0 * 0.5, 20.0 * 0.5, h as u32, false);
        let mut part = vec![0; 20 * 20 * 3];
        Cv2Cubic::default().run(
            &src,
            w * 3,
            (&taps(&x, 20), &taps(&y, 20)),
            false,
            &mut part,
        );
        for r in 0..20 {
            assert_eq!(
                &part[r * 60..][..60],
                &whole[((r + 5) * 46 + 10) * 3..][..60],
                "row {r}"
            );
        }
    }

    #[test]
    fn ringing_below_black_and_above_white_saturates() {
        // A step from 0 to 255 at pixel 4, enlarged 4x: the cubic's negative lobes ring
        // below 0 just before it (outputs 10-13) and above 255 just after (18-21).
        let mut src = vec![0u8; 8 * 3];
        src[12..].fill(255);
        let out = resize(&src, (8, 1), (32, 1));
        assert!(out.chunks(3).all(|p| p[0] == p[1] && p[1] == p[2]));
        let grey: Vec<u8> = out.chunks(3).map(|p| p[0]).collect();
        assert_eq!(grey[10..14], [0; 4]);
        assert_eq!(grey[18..22], [255; 4]);
        assert!(grey[14] > 0 && grey[17] < 255);
    }
}
