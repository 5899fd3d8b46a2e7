//! The detection reference's copy-paste (`SimpleCopyPaste`, its `--use-copypaste` collate):
//! objects of one image (the donor, the one before it in the batch) laid over another of the
//! same size, with their masks. The caller draws which of the donor's objects go (torch's RNG, in
//! the Python drop-in) and keeps the boxes and labels; this does the per-pixel work, each piece
//! in one pass where the reference makes several full-size tensors:
//!
//! - the paste mask ([`paste_mask`]): the pixels any chosen donor mask covers, and with blending
//!   every pixel within two of one. The reference blurs the union as a bool tensor (a 5x5
//!   Gaussian of sigma 2 with mirrored edges) and casts the blur back to bool, so a pixel is set
//!   exactly when a covered pixel lies in its 5x5 window: a dilation by a 5x5 square, which at
//!   the edges the mirroring does not change (the mirrored pixels are inside the window already);
//! - the image ([`paste_pixels`]): the donor's value under the paste mask, the image's elsewhere
//!   (`image * ~mask + donor * mask` in f32 gives exactly these values for finite ones);
//! - the image's own masks ([`clear_masks`]): zero under the paste mask, with what the
//!   reference then asks of each (`sum`, and `masks_to_boxes`'s box of its non-zero pixels).

/// What [`clear_masks`] and [`mask_sums`] report of one mask.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MaskSummary {
    /// The sum of its values (the reference's `masks.sum((-1, -2))`).
    pub sum: u64,
    /// The box `[x_min, y_min, x_max, y_max]` of its non-zero pixels (inclusive, as
    /// `masks_to_boxes` gives it); `None` for an empty mask.
    pub bounds: Option<[usize; 4]>,
}

/// Writes the paste mask of the planes of `h` x `w` bytes `planes` gives into `out` (`h * w`
/// bytes of 0 or 1): 1 where any plane is non-zero, and with `blend` also within two pixels of
/// such a pixel on both axes.
///
/// # Panics
/// A plane or `out` is not `h * w` bytes.
pub fn paste_mask<'a>(
    planes: impl IntoIterator<Item = &'a [u8]>,
    (h, w): (usize, usize),
    blend: bool,
    out: &mut [u8],
) {
    let plane = h * w;
    assert_eq!(out.len(), plane);
    out.fill(0);
    if plane == 0 {
        return;
    }
    for m in planes {
        assert_eq!(m.len(), plane);
        for (o, &v) in out.iter_mut().zip(m) {
            *o |= u8::from(v != 0);
        }
    }
    if blend {
        dilate(out, h, w);
    }
}

/// Dilates the 0/1 plane `mask` (`h` x `w`) by a 5x5 square, clipped to the plane: along each
/// row, then down each column, each value the maximum of the five around it.
fn dilate(mask: &mut [u8], h: usize, w: usize) {
    let mut row = vec![0u8; w + 4];
    for line in mask.chunks_exact_mut(w) {
        if !line.contains(&1) {
            continue;
        }
        row[2..w + 2].copy_from_slice(line);
        for (x, o) in line.iter_mut().enumerate() {
            *o = row[x] | row[x + 1] | row[x + 2] | row[x + 3] | row[x + 4];
        }
    }
    // Down the columns: each output row the OR of the (up to) five input rows around it.
    let across = mask.to_vec();
    for y in 0..h {
        let (lo, hi) = (y.saturating_sub(2), (y + 3).min(h));
        let out = &mut mask[y * w..(y + 1) * w];
        out.copy_from_slice(&across[lo * w..(lo + 1) * w]);
        for r in lo + 1..hi {
            for (o, &v) in out.iter_mut().zip(&across[r * w..(r + 1) * w]) {
                *o |= v;
            }
        }
    }
}

/// How a row of the paste mask reads: nothing pasted, all of it, or some.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Row {
    Clear,
    Full,
    Mixed,
}

/// Each row of the 0/1 plane `mask` (`w` wide) as [`Row`]s. Whole-row tests are OR and AND
/// folds, which compile to vector code; most rows of a paste mask are clear.
fn rows(mask: &[u8], w: usize) -> Vec<Row> {
    mask.chunks_exact(w)
        .map(|r| {
            if !any(r) {
                Row::Clear
            } else if r.iter().fold(1u8, |a, &v| a & v) == 1 {
                Row::Full
            } else {
                Row::Mixed
            }
        })
        .collect()
}

/// Whether any byte of `row` is non-zero.
fn any(row: &[u8]) -> bool {
    row.iter().fold(0u8, |a, &v| a | v) != 0
}

/// Writes into `out` each value of `image` where `mask` (a 0/1 plane `w` wide) is 0 and of
/// `donor` where it is 1, for every plane (`image`, `donor` and `out` are planes of
/// `mask.len()` values).
///
/// # Panics
/// The lengths disagree.
pub fn paste_pixels(out: &mut [f32], image: &[f32], donor: &[f32], mask: &[u8], w: usize) {
    assert!(image.len() == out.len() && donor.len() == out.len());
    let plane = mask.len();
    assert!(plane == 0 || (out.len().is_multiple_of(plane) && plane.is_multiple_of(w)));
    if plane == 0 {
        return;
    }
    let kinds = rows(mask, w);
    for ((o, i), d) in out
        .chunks_exact_mut(plane)
        .zip(image.chunks_exact(plane))
        .zip(donor.chunks_exact(plane))
    {
        for ((((o, i), d), m), kind) in o
            .chunks_exact_mut(w)
            .zip(i.chunks_exact(w))
            .zip(d.chunks_exact(w))
            .zip(mask.chunks_exact(w))
            .zip(&kinds)
        {
            match kind {
                Row::Clear => o.copy_from_slice(i),
                Row::Full => o.copy_from_slice(d),
                Row::Mixed => {
                    for (((o, &i), &d), &m) in o.iter_mut().zip(i).zip(d).zip(m) {
                        // A select on the bits, which vectorizes: all ones where pasted.
                        let take = 0u32.wrapping_sub(u32::from(m));
                        *o = f32::from_bits((d.to_bits() & take) | (i.to_bits() & !take));
                    }
                }
            }
        }
    }
}

/// Writes the planes of `masks` (planes of `h` x `w` bytes) that keep a non-zero pixel once the
/// pixels under `paste` (a 0/1 plane) are set to 0 into `out`, one after the other, and returns
/// each one's index in `masks` and summary. `out` has room for every plane.
///
/// # Panics
/// The lengths disagree.
pub fn clear_masks(
    out: &mut [u8],
    masks: &[u8],
    paste: &[u8],
    (h, w): (usize, usize),
) -> Vec<(usize, MaskSummary)> {
    let plane = h * w;
    assert!(paste.len() == plane && out.len() >= masks.len());
    if plane == 0 {
        return Vec::new();
    }
    assert!(masks.len().is_multiple_of(plane));
    let kinds = rows(paste, w);
    let mut kept = Vec::new();
    for (index, m) in masks.chunks_exact(plane).enumerate() {
        // The next free plane: an emptied mask leaves it for the next one.
        let o = &mut out[kept.len() * plane..][..plane];
        let mut summary = MaskSummary::default();
        for (y, (((o, m), p), kind)) in o
            .chunks_exact_mut(w)
            .zip(m.chunks_exact(w))
            .zip(paste.chunks_exact(w))
            .zip(&kinds)
            .enumerate()
        {
            if *kind == Row::Full || !any(m) {
                o.fill(0);
                continue;
            }
            if *kind == Row::Clear {
                o.copy_from_slice(m);
            } else {
                for ((o, &v), &p) in o.iter_mut().zip(m).zip(p) {
                    *o = v & p.wrapping_sub(1);
                }
            }
            add_row(&mut summary, o, y);
        }
        if summary.sum > 0 {
            kept.push((index, summary));
        }
    }
    kept
}

/// Each plane's summary, for planes of `h` x `w` bytes (the donor's chosen masks, whose areas
/// the reference sums too).
///
/// # Panics
/// `masks` is not whole planes.
pub fn mask_sums(masks: &[u8], (h, w): (usize, usize)) -> Vec<MaskSummary> {
    let plane = h * w;
    if plane == 0 {
        return Vec::new();
    }
    assert!(masks.len().is_multiple_of(plane));
    masks
        .chunks_exact(plane)
        .map(|m| {
            let mut summary = MaskSummary::default();
            for (y, row) in m.chunks_exact(w).enumerate() {
                if any(row) {
                    add_row(&mut summary, row, y);
                }
            }
            summary
        })
        .collect()
}

/// The donor of a copy-paste: its pixels (the image's planes), its masks (planes of the image's
/// size) and which of them go, in order.
pub struct Donor<'a> {
    /// f32 planes, as many and as large as the image's.
    pub pixels: &'a [f32],
    /// Its masks, planes of `h` x `w` bytes.
    pub masks: &'a [u8],
    /// The indices of the masks pasted (the reference's `unique` of its draw).
    pub chosen: &'a [usize],
}

/// What [`copy_paste`] wrote of the masks.
#[derive(Debug, PartialEq, Eq)]
pub struct Pasted {
    /// The image's masks that kept a pixel: their indices and summaries (the first planes of
    /// the output masks).
    pub kept: Vec<(usize, MaskSummary)>,
    /// The pasted masks' summaries (the planes after those).
    pub pasted: Vec<MaskSummary>,
}

/// One image of the reference's copy-paste: `out` gets `image` (f32 planes of `h` x `w`) with
/// the donor's pixels under the paste mask of its chosen masks (grown by two pixels with
/// `blend`); `out_masks` (room for `masks`' planes and the chosen ones) gets the image's masks
/// that keep a pixel once cleared under the paste mask, then the chosen donor masks.
///
/// # Panics
/// A length disagrees with `(h, w)`, or a chosen index is past the donor's masks.
pub fn copy_paste(
    image: &[f32],
    masks: &[u8],
    donor: &Donor,
    (h, w): (usize, usize),
    blend: bool,
    out: &mut [f32],
    out_masks: &mut [u8],
) -> Pasted {
    let plane = h * w;
    if plane == 0 {
        return Pasted {
            kept: Vec::new(),
            pasted: vec![MaskSummary::default(); donor.chosen.len()],
        };
    }
    let donor_plane = |i: usize| &donor.masks[i * plane..][..plane];
    let mut paste = vec![0u8; plane];
    paste_mask(
        donor.chosen.iter().map(|&i| donor_plane(i)),
        (h, w),
        blend,
        &mut paste,
    );
    paste_pixels(out, image, donor.pixels, &paste, w);
    assert!(out_masks.len() >= masks.len() + donor.chosen.len() * plane);
    let kept = clear_masks(out_masks, masks, &paste, (h, w));
    let pasted = donor
        .chosen
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let o = &mut out_masks[(kept.len() + k) * plane..][..plane];
            o.copy_from_slice(donor_plane(i));
            mask_sums(o, (h, w))[0]
        })
        .collect();
    Pasted { kept, pasted }
}

/// Adds row `y` of a plane to its summary: the sum of its values and the columns of its first
/// and last non-zero ones.
fn add_row(summary: &mut MaskSummary, row: &[u8], y: usize) {
    let Some(first) = row.iter().position(|&v| v != 0) else {
        return;
    };
    let last = row.iter().rposition(|&v| v != 0).unwrap_or(first);
    // Sums of up to 257 bytes fit a u16 lane: the widening stays in vector registers.
    summary.sum += row[first..=last]
        .chunks(257)
        .map(|c| u64::from(c.iter().map(|&v| u16::from(v)).sum::<u16>()))
        .sum::<u64>();
    summary.bounds = Some(match summary.bounds {
        None => [first, y, last, y],
        Some([x0, y0, x1, _]) => [x0.min(first), y0, x1.max(last), y],
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 5x5 dilation written the slow way: a pixel is set when any pixel of its window is.
    fn dilated_by_hand(mask: &[u8], h: usize, w: usize) -> Vec<u8> {
        let mut out = vec![0u8; h * w];
        for y in 0..h {
            for x in 0..w {
                let near = (y.saturating_sub(2)..(y + 3).min(h))
                    .any(|r| (x.saturating_sub(2)..(x + 3).min(w)).any(|c| mask[r * w + c] != 0));
                out[y * w + x] = u8::from(near);
            }
        }
        out
    }

    #[test]
    fn the_blended_paste_mask_is_the_union_grown_by_two_pixels_clipped_to_the_image() {
        let (h, w) = (9, 11);
        let mut a = vec![0u8; h * w];
        let mut b = vec![0u8; h * w];
        a[0] = 1; // a corner
        a[4 * w + 5] = 1; // the middle
        b[8 * w + 10] = 3; // the far corner, a value other than 1
        b[2 * w + 9] = 1;
        let masks = [a.clone(), b.clone()].concat();
        let union: Vec<u8> = a
            .iter()
            .zip(&b)
            .map(|(&x, &y)| u8::from(x | y != 0))
            .collect();
        let mut out = vec![7u8; h * w];
        paste_mask([&a[..], &b[..]], (h, w), false, &mut out);
        assert_eq!(out, union);
        paste_mask(masks.chunks_exact(h * w), (h, w), true, &mut out);
        assert_eq!(out, dilated_by_hand(&union, h, w));
        assert_eq!(out[2 * w + 2], 1);
        assert_eq!(out[3 * w + 3], 1, "two from the middle pixel on both axes");
        assert_eq!(
            out[7 * w + 1],
            0,
            "three or more from every set pixel on one axis"
        );
    }

    #[test]
    fn pasting_takes_the_donor_under_the_mask_in_every_plane() {
        // Rows of 2: clear, mixed, full.
        let mask = [0u8, 0, 0, 1, 1, 1];
        let image: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let donor: Vec<f32> = (0..12).map(|v| -(v as f32) - 0.5).collect();
        let mut out = vec![0.0; 12];
        paste_pixels(&mut out, &image, &donor, &mask, 2);
        let want: Vec<f32> = (0..12)
            .map(|v| if mask[v % 6] == 1 { donor[v] } else { image[v] })
            .collect();
        assert_eq!(out, want);
        assert_eq!(out[..6], [0.0, 1.0, 2.0, -3.5, -4.5, -5.5]);
    }

    #[test]
    fn copy_paste_keeps_the_masks_left_with_a_pixel_then_the_pasted_ones() {
        let (h, w) = (4, 5);
        #[rustfmt::skip]
        let masks = [
            // wholly under the paste mask: dropped
            0, 0, 0, 0, 0,
            0, 0, 1, 0, 0,
            0, 0, 0, 0, 0,
            0, 0, 0, 0, 0,
            // left after clearing: (1, 1) and (3, 2), the box [1, 1, 3, 2]
            0, 0, 0, 0, 0,
            0, 1, 1, 0, 0,
            0, 0, 0, 2, 0,
            0, 0, 0, 0, 0,
        ];
        // The donor's second mask alone is pasted: one pixel, at (2, 1).
        let mut donor_masks = vec![1u8; h * w];
        donor_masks.extend(std::iter::repeat_n(0, h * w));
        donor_masks[h * w + w + 2] = 1;
        let image = vec![0.5f32; 2 * h * w];
        let donor = Donor {
            pixels: &vec![-1.0f32; 2 * h * w],
            masks: &donor_masks,
            chosen: &[1],
        };
        let mut out = vec![0.0; 2 * h * w];
        let mut out_masks = vec![9u8; 3 * h * w];
        let got = copy_paste(
            &image,
            &masks,
            &donor,
            (h, w),
            false,
            &mut out,
            &mut out_masks,
        );
        let kept = MaskSummary {
            sum: 3,
            bounds: Some([1, 1, 3, 2]),
        };
        let pasted = MaskSummary {
            sum: 1,
            bounds: Some([2, 1, 2, 1]),
        };
        assert_eq!(
            got,
            Pasted {
                kept: vec![(1, kept)],
                pasted: vec![pasted],
            }
        );
        let plane = h * w;
        assert_eq!(out_masks[w + 2], 0, "cleared under the paste mask");
        assert_eq!(out_masks[w + 1], 1);
        assert_eq!(out_masks[plane..2 * plane], donor_masks[plane..]);
        for p in 0..2 {
            assert_eq!(out[p * plane + w + 2], -1.0);
            assert_eq!(out[p * plane + w + 1], 0.5);
        }
    }
}
