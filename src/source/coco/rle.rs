//! COCO's run-length masks: the compressed `counts` string pycocotools writes (`rleToString`:
//! each count in 5-bit groups, low first, offset by 48 into printable bytes, `0x20` marking
//! another group, `0x10` in the last group the sign; from the third count on, each is stored
//! as its difference from the count two before), decoded straight into a row-major mask.
//! Runs alternate, zeros first, over the pixels in column-major order. The detection
//! reference's `ConvertCocoPolysToMask` takes the union of an object's polygons' masks; so
//! does [`union_into`], without decoding to column-major first and transposing.

use std::fmt;

/// Why a `counts` string is not a mask of the given size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RleError {
    /// A count's groups run past the end of the string.
    Truncated,
    /// A count is negative or too large.
    BadCount(i64),
    /// The runs cover more pixels than the mask has.
    TooLong {
        /// Pixels the runs cover.
        covered: u64,
        /// Pixels the mask has.
        pixels: u64,
    },
}

impl fmt::Display for RleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated => write!(f, "the RLE counts string ends inside a count"),
            Self::BadCount(c) => write!(f, "the RLE counts string holds the count {c}"),
            Self::TooLong { covered, pixels } => write!(
                f,
                "the RLE runs cover {covered} pixels of a {pixels}-pixel mask"
            ),
        }
    }
}

impl std::error::Error for RleError {}

/// The counts of a compressed `counts` string.
pub fn counts(s: &[u8]) -> Result<Vec<u64>, RleError> {
    let mut out: Vec<u64> = Vec::with_capacity(s.len() / 2);
    let mut p = 0;
    while p < s.len() {
        let (mut x, mut k) = (0i64, 0u32);
        loop {
            let Some(&byte) = s.get(p) else {
                return Err(RleError::Truncated);
            };
            let c = i64::from(byte) - 48;
            if k >= 12 {
                return Err(RleError::BadCount(x));
            }
            x |= (c & 0x1f) << (5 * k);
            p += 1;
            k += 1;
            if c & 0x20 == 0 {
                if c & 0x10 != 0 {
                    x |= -1i64 << (5 * k);
                }
                break;
            }
        }
        let m = out.len();
        if m > 2 {
            x = x.saturating_add(out[m - 2] as i64);
        }
        if x < 0 || x > u32::MAX as i64 {
            return Err(RleError::BadCount(x));
        }
        out.push(x as u64);
    }
    Ok(out)
}

/// Calls `one` with the row-major index (mirrored left to right when `flip`) of every pixel
/// the runs of ones of `counts` cover in a `height` x `width` mask, in the runs' column-major
/// order.
///
/// # Errors
/// The runs cover more pixels than the mask has.
pub fn for_each_one(
    counts: &[u64],
    height: usize,
    width: usize,
    flip: bool,
    mut one: impl FnMut(usize),
) -> Result<(), RleError> {
    let pixels = (height * width) as u64;
    let covered: u64 = counts.iter().sum();
    if covered > pixels {
        return Err(RleError::TooLong { covered, pixels });
    }
    let mut at = 0usize;
    for (k, &n) in counts.iter().enumerate() {
        let n = n as usize;
        if k % 2 == 1 {
            // Column-major positions at..at + n: column at / height, rows from at % height.
            for p in at..at + n {
                let (column, row) = (p / height, p % height);
                let column = if flip { width - 1 - column } else { column };
                one(row * width + column);
            }
        }
        at += n;
    }
    Ok(())
}

/// Sets to 1 every pixel of `mask` (row-major, `height` x `width`; mirrored left to right
/// when `flip`) that the runs of ones of `counts` cover; pixels already 1 stay 1 (the union
/// of several masks).
pub fn union_into(
    counts: &[u64],
    height: usize,
    width: usize,
    flip: bool,
    mask: &mut [u8],
) -> Result<(), RleError> {
    if mask.len() < height * width {
        let covered = counts.iter().sum();
        let pixels = mask.len() as u64;
        return Err(RleError::TooLong { covered, pixels });
    }
    for_each_one(counts, height, width, flip, |i| mask[i] = 1)
}

/// A mask's way through a resize, a cut of it and its padding (the detection reference's
/// `ScaleJitter` then `FixedSizeCrop`), all `(height, width)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The resize's size.
    pub resized: (usize, usize),
    /// The cut's `(top, left)` on the resized mask.
    pub at: (usize, usize),
    /// The cut's size, placed at the output's top-left corner.
    pub content: (usize, usize),
    /// The output's size (0 beyond the cut).
    pub size: (usize, usize),
}

/// `mask` (row-major, `height` x `width`) resized to `placement.resized` as torchvision
/// resizes masks with `InterpolationMode.NEAREST` (torch's `interpolate(mode="nearest")`:
/// output pixel `i` of an axis reads source pixel `floor(i * (in / out))`, the scale and the
/// product in f32, at most `in - 1`), its `content` at `at` cut out and placed at the top-left
/// corner of the `size` output `out`, which holds zeros (only the cut's nonzero rows are
/// written), the output mirrored left to right when `flip`: what the reference's nearest
/// resize, crop, zero padding and flip of a mask give, without the resized mask in between.
///
/// # Panics
/// The cut reaches past the resized mask, the content past the output, or `out` is not the
/// output's size.
pub fn resize_cut_place(
    mask: &[u8],
    (height, width): (usize, usize),
    p: &Placement,
    flip: bool,
    out: &mut [u8],
) {
    let ((rh, rw), (top, left), (ch, cw), (oh, ow)) = (p.resized, p.at, p.content, p.size);
    assert!(top + ch <= rh && left + cw <= rw && ch <= oh && cw <= ow && out.len() == oh * ow);
    // The source index of each of the cut's pixels along an axis.
    let index = |from: usize, n: usize, resized: usize, len: usize| -> Vec<usize> {
        let scale = len as f32 / resized as f32;
        (from..from + n)
            .map(|k| ((k as f32 * scale).floor() as usize).min(len - 1))
            .collect()
    };
    let xs = index(left, cw, rw, width);
    let ys = index(top, ch, rh, height);
    // The source columns the cut reads (the indices rise).
    let span = match (xs.first(), xs.last()) {
        (Some(&a), Some(&b)) => a..b + 1,
        _ => 0..0,
    };
    // The last row gathered and its source row: an enlarged mask repeats rows, copied whole.
    let mut last: Option<(usize, usize)> = None;
    for (r, &y) in ys.iter().enumerate() {
        if let Some((from, y0)) = last.filter(|&(_, y0)| y0 == y) {
            out.copy_within(from * ow..(from + 1) * ow, r * ow);
            last = Some((r, y0));
            continue;
        }
        let row = &mut out[r * ow..(r + 1) * ow];
        let line = &mask[y * width..][..width];
        // Most rows of an object's mask are empty: they stay zeros.
        if line[span.clone()].iter().any(|&v| v != 0) {
            if flip {
                for (px, &x) in row.iter_mut().rev().zip(&xs) {
                    *px = line[x];
                }
            } else {
                for (px, &x) in row.iter_mut().zip(&xs) {
                    *px = line[x];
                }
            }
        }
        last = Some((r, y));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_resize_reads_torchs_source_pixels_and_mirrors_after() {
        // 3 wide to 7: floor(i * 3/7) = 0 0 0 1 1 2 2; 4 high to 2: rows 0 and 2.
        let mask: Vec<u8> = (0..12).collect();
        let whole = Placement {
            resized: (2, 7),
            at: (0, 0),
            content: (2, 7),
            size: (2, 7),
        };
        let mut out = vec![0; 14];
        resize_cut_place(&mask, (4, 3), &whole, false, &mut out);
        assert_eq!(out, [0, 0, 0, 1, 1, 2, 2, 6, 6, 6, 7, 7, 8, 8]);
        resize_cut_place(&mask, (4, 3), &whole, true, &mut out);
        assert_eq!(out, [2, 2, 1, 1, 0, 0, 0, 8, 8, 7, 7, 6, 6, 6]);
        // Enlarged: repeated rows are copies.
        let tall = Placement {
            resized: (8, 3),
            content: (8, 3),
            size: (8, 3),
            ..whole
        };
        let mut out = vec![0; 24];
        resize_cut_place(&mask, (4, 3), &tall, false, &mut out);
        assert_eq!(
            out,
            [0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7, 8, 6, 7, 8, 9, 10, 11, 9, 10, 11]
        );
    }

    #[test]
    fn a_cut_of_the_resize_is_placed_on_zeros_then_mirrored() {
        // 3 wide to 7 (columns 0 0 0 1 1 2 2), 4 high to 2 (rows 0 and 2); the cut at row 1,
        // columns 2 to 5, placed on a 3x6 output.
        let mask: Vec<u8> = (1..=12).collect();
        let place = Placement {
            resized: (2, 7),
            at: (1, 2),
            content: (1, 4),
            size: (3, 6),
        };
        let mut out = vec![0; 18];
        resize_cut_place(&mask, (4, 3), &place, false, &mut out);
        assert_eq!(out, [7, 8, 8, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        out.fill(0);
        resize_cut_place(&mask, (4, 3), &place, true, &mut out);
        assert_eq!(out, [0, 0, 9, 8, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    }

    /// pycocotools' compression of `counts`, written from its description.
    fn compress(counts: &[i64]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, &c) in counts.iter().enumerate() {
            let mut x = if i > 2 { c - counts[i - 2] } else { c };
            loop {
                let mut group = x & 0x1f;
                x >>= 5;
                let more = if group & 0x10 != 0 { x != -1 } else { x != 0 };
                if more {
                    group |= 0x20;
                }
                out.push((group + 48) as u8);
                if !more {
                    break;
                }
            }
        }
        out
    }

    #[test]
    fn counts_round_trip_through_pycocotools_compression() {
        let runs = [0, 5, 3, 200, 1, 0, 70_000, 2, 17];
        assert_eq!(counts(&compress(&runs)).unwrap(), runs.map(|r| r as u64));
        // pycocotools' own string for a 4x4 mask with a 2x2 block at rows 1-2, columns 1-2.
        let block = counts(b"52203").unwrap();
        assert_eq!(block, [5, 2, 2, 2, 5]);
        let mut mask = vec![0u8; 16];
        union_into(&block, 4, 4, false, &mut mask).unwrap();
        assert_eq!(mask, [0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn the_union_keeps_earlier_ones_and_bad_strings_are_errors() {
        let mut mask = vec![0u8; 6]; // 2 rows, 3 columns
        union_into(&[0, 1], 2, 3, false, &mut mask).unwrap(); // (0, 0)
        union_into(&[5, 1], 2, 3, false, &mut mask).unwrap(); // (1, 2)
        assert_eq!(mask, [1, 0, 0, 0, 0, 1]);
        let mut mirrored = vec![0u8; 6];
        union_into(&[0, 1], 2, 3, true, &mut mirrored).unwrap();
        union_into(&[5, 1], 2, 3, true, &mut mirrored).unwrap();
        assert_eq!(mirrored, [0, 0, 1, 1, 0, 0]);
        assert_eq!(
            union_into(&[4, 3], 2, 3, false, &mut mask),
            Err(RleError::TooLong {
                covered: 7,
                pixels: 6
            })
        );
        assert_eq!(counts(b"5U"), Err(RleError::Truncated));
        assert!(matches!(counts(b"@"), Err(RleError::BadCount(_))));
    }
}
