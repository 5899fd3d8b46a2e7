//! Batch ops: torchvision v2's `MixUp` and `CutMix` pixel arithmetic on a whole f32 batch,
//! each in one pass from the batch into a new one. Sample `i` is paired with sample `i - 1`
//! (the last for the first), as torchvision's `roll(1, 0)` pairs them. The parameters (`lam`,
//! the box) are drawn by the caller: in the Python drop-in, by torchvision's own transform.
//!
//! Values are bit-identical to torchvision's: MixUp rounds each product to f32 and then the sum
//! (`x.roll(1, 0).mul_(1 - lam).add_(x.mul(lam))`, with `lam` and `1 - lam` computed in f64 and
//! rounded to f32, as torch does with a Python scalar); CutMix copies.

/// MixUp of the batch `src` (`n` samples of `sample_len` values, back to back) into `dst`:
/// sample `i` is `src[i - 1] * (1 - lam) + src[i] * lam`.
///
/// # Panics
/// `src` or `dst` is not `n * sample_len` long.
pub fn mixup(dst: &mut [f32], src: &[f32], sample_len: usize, lam: f64) {
    assert_eq!(src.len(), dst.len());
    if sample_len == 0 {
        return;
    }
    assert_eq!(src.len() % sample_len, 0);
    let n = src.len() / sample_len;
    let (keep, other) = (lam as f32, (1.0 - lam) as f32);
    for (i, out) in dst.chunks_exact_mut(sample_len).enumerate() {
        let prev = if i == 0 { n - 1 } else { i - 1 };
        let x = &src[i * sample_len..][..sample_len];
        let p = &src[prev * sample_len..][..sample_len];
        for ((o, &x), &p) in out.iter_mut().zip(x).zip(p) {
            // Two roundings, then the sum's: no fused multiply-add.
            *o = p * other + x * keep;
        }
    }
}

/// The box `[x1, y1, x2, y2)` (in pixels, within `h` x `w`) that CutMix pastes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CutBox {
    /// First column inside.
    pub x1: usize,
    /// First row inside.
    pub y1: usize,
    /// First column past the box.
    pub x2: usize,
    /// First row past the box.
    pub y2: usize,
}

/// CutMix of the NCHW batch `src` (`[n, c, h, w]`) into `dst`: a copy whose `cut` in sample `i`
/// comes from sample `i - 1`.
///
/// # Panics
/// A length disagrees with `shape`, or the box leaves the image.
pub fn cutmix(dst: &mut [f32], src: &[f32], [n, c, h, w]: [usize; 4], cut: CutBox) {
    let sample_len = c * h * w;
    assert!(src.len() == n * sample_len && dst.len() == src.len());
    assert!(cut.x1 <= cut.x2 && cut.x2 <= w && cut.y1 <= cut.y2 && cut.y2 <= h);
    if sample_len == 0 {
        return;
    }
    for (i, out) in dst.chunks_exact_mut(sample_len).enumerate() {
        let prev = if i == 0 { n - 1 } else { i - 1 };
        out.copy_from_slice(&src[i * sample_len..][..sample_len]);
        let p = &src[prev * sample_len..][..sample_len];
        for plane in 0..c {
            for y in cut.y1..cut.y2 {
                let row = (plane * h + y) * w;
                out[row + cut.x1..row + cut.x2].copy_from_slice(&p[row + cut.x1..row + cut.x2]);
            }
        }
    }
}

/// How one output sample of timm's `FastCollateMixup` is made from a uint8 batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum U8Mix {
    /// Sample `from` as it is.
    Copy {
        /// The sample.
        from: usize,
    },
    /// `round(a * wa + b * wb)` per value, in f32 (each product rounded, then the sum, then
    /// rounded half to even), as `mixed.float() * lam + other.float() * (1 - lam)` then
    /// `torch.round` give it.
    Blend {
        /// The first sample.
        a: usize,
        /// The second sample.
        b: usize,
        /// Its weight.
        wa: f32,
        /// The second's weight.
        wb: f32,
    },
    /// Sample `from` with the box `cut` taken from sample `other`, in every channel.
    Cut {
        /// The sample.
        from: usize,
        /// The sample the box comes from.
        other: usize,
        /// The box.
        cut: CutBox,
    },
}

/// Adds to output sample `row` of `dst` (wrapping, as uint8 tensors add) the sample `how` makes
/// from the uint8 NCHW batch `src` (`[n, c, h, w]`), for each `(row, how)` in `jobs`: timm's
/// `output[i] += mixed` into its zeroed output. `dst` holds whole samples of the same size.
///
/// # Panics
/// A length disagrees with `shape`, a sample index is past the batch or the output, or a box
/// leaves the image.
pub fn mix_u8(dst: &mut [u8], src: &[u8], [n, c, h, w]: [usize; 4], jobs: &[(usize, U8Mix)]) {
    let len = c * h * w;
    assert!(src.len() == n * len && dst.len().is_multiple_of(len.max(1)));
    if len == 0 {
        return;
    }
    let sample = |i: usize| &src[i * len..][..len];
    for &(row, how) in jobs {
        let out = &mut dst[row * len..][..len];
        let add = |out: &mut [u8], from: &[u8]| {
            for (o, &v) in out.iter_mut().zip(from) {
                *o = o.wrapping_add(v);
            }
        };
        match how {
            U8Mix::Copy { from } => add(out, sample(from)),
            U8Mix::Blend { a, b, wa, wb } => {
                for ((o, &x), &y) in out.iter_mut().zip(sample(a)).zip(sample(b)) {
                    // Two roundings, then the sum's: no fused multiply-add.
                    let mixed = (f32::from(x) * wa + f32::from(y) * wb).round_ties_even() as u8;
                    *o = o.wrapping_add(mixed);
                }
            }
            U8Mix::Cut { from, other, cut } => {
                assert!(cut.x1 <= cut.x2 && cut.x2 <= w && cut.y1 <= cut.y2 && cut.y2 <= h);
                let (s, p) = (sample(from), sample(other));
                for plane in 0..c {
                    for y in 0..h {
                        let at = (plane * h + y) * w;
                        let (o, s, p) = (&mut out[at..at + w], &s[at..at + w], &p[at..at + w]);
                        if (cut.y1..cut.y2).contains(&y) {
                            add(&mut o[..cut.x1], &s[..cut.x1]);
                            add(&mut o[cut.x1..cut.x2], &p[cut.x1..cut.x2]);
                            add(&mut o[cut.x2..], &s[cut.x2..]);
                        } else {
                            add(o, s);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixup_pairs_each_sample_with_the_one_before_and_the_first_with_the_last() {
        let src = [1.0, 2.0, 10.0, 20.0, 100.0, 200.0];
        let mut dst = [0.0; 6];
        mixup(&mut dst, &src, 2, 0.25);
        assert_eq!(dst, [75.25, 150.5, 3.25, 6.5, 32.5, 65.0]);
    }

    #[test]
    fn mixup_rounds_each_product_then_the_sum_like_torch() {
        // 0.1 is not exact in f32: (1 - 0.1) in f64, rounded, differs from 1 - f32(0.1).
        let lam = 0.1;
        let src = [0.3f32, 0.7];
        let mut dst = [0.0; 2];
        mixup(&mut dst, &src, 1, lam);
        let (keep, other) = (lam as f32, (1.0 - lam) as f32);
        assert_eq!(dst[0].to_bits(), (0.7f32 * other + 0.3f32 * keep).to_bits());
        assert_eq!(dst[1].to_bits(), (0.3f32 * other + 0.7f32 * keep).to_bits());
    }

    #[test]
    fn cutmix_pastes_the_box_of_the_sample_before_in_every_channel() {
        let (n, c, h, w) = (3, 2, 3, 4);
        let src: Vec<f32> = (0..n * c * h * w).map(|v| v as f32).collect();
        let mut dst = vec![0.0; src.len()];
        let cut = CutBox {
            x1: 1,
            y1: 1,
            x2: 3,
            y2: 3,
        };
        cutmix(&mut dst, &src, [n, c, h, w], cut);
        let at = |s: usize, ch: usize, y: usize, x: usize| ((s * c + ch) * h + y) * w + x;
        for s in 0..n {
            let prev = (s + n - 1) % n;
            for ch in 0..c {
                for y in 0..h {
                    for x in 0..w {
                        let inside = (1..3).contains(&x) && (1..3).contains(&y);
                        let from = if inside { prev } else { s };
                        assert_eq!(dst[at(s, ch, y, x)], src[at(from, ch, y, x)]);
                    }
                }
            }
        }
    }

    #[test]
    fn a_uint8_blend_rounds_the_f32_sum_half_to_even_and_a_cut_takes_the_box() {
        let (n, c, h, w) = (2, 1, 2, 3);
        let src: Vec<u8> = vec![0, 1, 2, 3, 4, 255, 10, 20, 30, 40, 50, 0];
        let mut dst = vec![0u8; 3 * c * h * w];
        dst[12] = 1; // added to, as timm's `+=`
        let cut = CutBox {
            x1: 1,
            y1: 0,
            x2: 3,
            y2: 1,
        };
        let jobs = [
            (
                0,
                U8Mix::Blend {
                    a: 0,
                    b: 1,
                    wa: 0.5,
                    wb: 0.5,
                },
            ),
            (
                1,
                U8Mix::Cut {
                    from: 1,
                    other: 0,
                    cut,
                },
            ),
            (2, U8Mix::Copy { from: 0 }),
        ];
        mix_u8(&mut dst, &src, [n, c, h, w], &jobs);
        // (0 + 10) / 2 = 5, (1 + 20) / 2 = 10.5 -> 10, (2 + 30) / 2 = 16, 21.5 -> 22, 27, 127.5 -> 128.
        assert_eq!(dst[..6], [5, 10, 16, 22, 27, 128]);
        assert_eq!(dst[6..12], [10, 1, 2, 40, 50, 0]);
        assert_eq!(dst[12..], [1, 1, 2, 3, 4, 255]);
    }
}
