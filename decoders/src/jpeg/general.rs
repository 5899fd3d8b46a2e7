//! The output stage for the JPEGs the fast one does not cover, at full scale: any whole ratio
//! of sampling factors (4:1:1, chroma factors of their own, luma at 4), chroma at most two
//! samples wide, and RGB, CMYK and YCCK colour, each as libjpeg-turbo and Pillow compute it.
//! Such files are rare (ImageNet holds a few dozen CMYK JPEGs), so this stage is written for
//! clarity, a row at a time.
//!
//! Upsampling follows libjpeg's choice per component (`jinit_upsampler`): the "fancy" triangle
//! filters for a factor of 2 across (when the component is more than 2 samples wide), down, or
//! both, and plain replication for every other whole ratio. Colour: YCbCr by the fast path's
//! conversion; RGB as stored; CMYK and YCCK as Pillow reads them: libjpeg gives CMYK (YCCK
//! converted through the YCbCr tables), Pillow inverts it (Adobe's convention, which it assumes
//! for every CMYK JPEG) and converts to RGB in 8-bit fixed point.

use super::colour::YccTables;
use super::header::{Colour, Header};
use super::Region;

/// The rows the stage works in, kept between images.
#[derive(Debug, Default)]
pub(super) struct Rows {
    /// Each component's samples for the output row, upsampled.
    comps: [Vec<u8>; 4],
    /// Column sums of a row of a component subsampled across.
    sums: Vec<i32>,
    /// YCCK's YCbCr converted to RGB.
    rgb: Vec<u8>,
}

/// How a component is brought to the image's resolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Upsampling {
    Full,
    /// libjpeg's h2v1, h1v2 and h2v2 "fancy" filters.
    Across,
    Down,
    Both,
    /// Each sample repeated `h` times across and `v` times down.
    Replicate(usize, usize),
}

/// A component's plane as the multi-scan decode wrote it: whole MCU rows from `first_row`.
struct Plane<'a> {
    samples: &'a [u8],
    stride: usize,
    first_row: usize,
    /// The component's real size in samples (beyond is MCU padding).
    width: usize,
    height: usize,
    upsampling: Upsampling,
}

impl Plane<'_> {
    fn row(&self, y: usize) -> &[u8] {
        let at = (y - self.first_row) * self.stride;
        &self.samples[at..at + self.width]
    }

    /// Its samples for image row `y`, columns `x0..x0 + out.len()`.
    fn upsample(&self, y: usize, x0: usize, sums: &mut Vec<i32>, out: &mut [u8]) {
        match self.upsampling {
            Upsampling::Full => out.copy_from_slice(&self.row(y)[x0..x0 + out.len()]),
            Upsampling::Replicate(h, v) => {
                let row = self.row(y / v);
                // Runs of `h` copies of a sample, the first run cut where the region starts.
                let mut x = x0;
                let mut rest = &mut out[..];
                while !rest.is_empty() {
                    let run = (h - x % h).min(rest.len());
                    let (now, later) = rest.split_at_mut(run);
                    now.fill(row[x / h]);
                    rest = later;
                    x += run;
                }
            }
            Upsampling::Down => {
                let (near, far, bias) = self.rows_down(y);
                for (i, o) in out.iter_mut().enumerate() {
                    let x = x0 + i;
                    *o = ((3 * i32::from(near[x]) + i32::from(far[x]) + bias) >> 2) as u8;
                }
            }
            Upsampling::Across => {
                sums.clear();
                sums.extend(self.row(y).iter().map(|&s| i32::from(s)));
                across(sums, x0, (1, 2), 2, out);
            }
            Upsampling::Both => {
                let (near, far, _) = self.rows_down(y);
                sums.clear();
                sums.extend(
                    near.iter()
                        .zip(far)
                        .map(|(&n, &f)| 3 * i32::from(n) + i32::from(f)),
                );
                across(sums, x0, (8, 7), 4, out);
            }
        }
    }

    /// For a component subsampled down by 2: the nearer and the further of its rows for image
    /// row `y` (the edge row repeated at the top and bottom), and libjpeg's rounding bias.
    fn rows_down(&self, y: usize) -> (&[u8], &[u8], i32) {
        let cy = y / 2;
        if y.is_multiple_of(2) {
            (self.row(cy), self.row(cy.saturating_sub(1)), 1)
        } else {
            (self.row(cy), self.row((cy + 1).min(self.height - 1)), 2)
        }
    }
}

/// The horizontal step of the fancy filters over a row of column sums: output column `x` is
/// `(3 * sums[x / 2] + sums[x / 2 -+ 1] + bias) >> shift`, the neighbour on the left for even
/// columns (bias `biases.0`) and on the right for odd ones (`biases.1`), the edge sum itself
/// beyond the edges.
fn across(sums: &[i32], x0: usize, (even, odd): (i32, i32), shift: u32, out: &mut [u8]) {
    let last = sums.len() - 1;
    for (i, o) in out.iter_mut().enumerate() {
        let x = x0 + i;
        let c = x / 2;
        let (neighbour, bias) = if x.is_multiple_of(2) {
            (sums[c.saturating_sub(1)], even)
        } else {
            (sums[(c + 1).min(last)], odd)
        };
        *o = ((3 * sums[c] + neighbour + bias) >> shift) as u8;
    }
}

/// Pillow's RGB of a CMYK JPEG's samples as libjpeg gives them: inverted (`CMYK;I`), then
/// `cmyk2rgb`: each of R, G, B is `(255 - k) - (255 - k) * ink / 255` in its fixed point.
fn pillow_cmyk_to_rgb(cmy: [u8; 3], k: u8) -> [u8; 3] {
    // After the inversion, the black ink is `255 - k`, so what is left of white is `k`.
    let white = i32::from(k);
    cmy.map(|c| {
        let ink = 255 - i32::from(c);
        let t = ink * white + 128;
        (white - (((t >> 8) + t) >> 8)).clamp(0, 255) as u8
    })
}

/// Writes the RGB8 pixels of `sr` (full scale) into rows of `out`, `out_stride` bytes apart,
/// from the planes a multi-scan decode of whole MCU rows from `r0` wrote (`mcus_across` MCUs
/// a row). `luma`: the first component's samples alone, in all three channels (a grey read
/// of a YCbCr JPEG whose luma is at full resolution, `JpegDecoder::set_luma`).
#[allow(clippy::too_many_arguments)]
pub(super) fn convert(
    h: &Header,
    luma: bool,
    planes: &[Vec<u8>; 4],
    (mcus_across, r0): (usize, usize),
    sr: &Region,
    ycc: &YccTables,
    rows: &mut Rows,
    out: &mut [u8],
    out_stride: usize,
) {
    let (w, x0) = (sr.width as usize, sr.x as usize);
    let planes: Vec<Plane<'_>> = h
        .components
        .iter()
        .zip(planes)
        .map(|(c, samples)| {
            let (across, down) = (h.hmax / c.h, h.vmax / c.v);
            let width = (h.width as usize * c.h).div_ceil(h.hmax);
            let upsampling = match (across, down) {
                (1, 1) => Upsampling::Full,
                (2, 1) if width > 2 => Upsampling::Across,
                (1, 2) => Upsampling::Down,
                (2, 2) if width > 2 => Upsampling::Both,
                (a, d) => Upsampling::Replicate(a, d),
            };
            Plane {
                samples,
                stride: mcus_across * c.h * 8,
                first_row: r0 * c.v * 8,
                width,
                height: (h.height as usize * c.v).div_ceil(h.vmax),
                upsampling,
            }
        })
        .collect();
    for row in &mut rows.comps {
        row.resize(w, 0);
    }
    rows.rgb.resize(3 * w, 0);
    for j in 0..sr.height as usize {
        let y = sr.y as usize + j;
        let used = if luma { 1 } else { planes.len() };
        for (plane, row) in planes[..used].iter().zip(&mut rows.comps) {
            plane.upsample(y, x0, &mut rows.sums, &mut row[..w]);
        }
        let out_row = &mut out[j * out_stride..][..w * 3];
        let [a, b, c, k] = &rows.comps;
        let (a, b, c, k) = (&a[..w], &b[..w], &c[..w], &k[..w]);
        let colour = if luma { Colour::Grey } else { h.colour };
        match colour {
            Colour::Grey => {
                for (px, &v) in out_row.chunks_exact_mut(3).zip(a) {
                    px.fill(v);
                }
            }
            Colour::YCbCr => ycc.convert(a, b, c, out_row),
            Colour::Rgb => {
                for (i, px) in out_row.chunks_exact_mut(3).enumerate() {
                    px.copy_from_slice(&[a[i], b[i], c[i]]);
                }
            }
            Colour::Cmyk => {
                for (i, px) in out_row.chunks_exact_mut(3).enumerate() {
                    px.copy_from_slice(&pillow_cmyk_to_rgb([a[i], b[i], c[i]], k[i]));
                }
            }
            Colour::Ycck => {
                // libjpeg's YCCK to CMYK: C, M, Y are 255 minus the YCbCr conversion's R, G, B.
                let rgb = &mut rows.rgb[..w * 3];
                ycc.convert(a, b, c, rgb);
                for (i, px) in out_row.chunks_exact_mut(3).enumerate() {
                    let cmy = [255 - rgb[3 * i], 255 - rgb[3 * i + 1], 255 - rgb[3 * i + 2]];
                    px.copy_from_slice(&pillow_cmyk_to_rgb(cmy, k[i]));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pillow 13's `Image.frombytes("CMYK", ...).convert("RGB")` of inverted samples, checked
    /// against Pillow over every (ink, black) pair by hand; three values pinned here.
    #[test]
    fn cmyk_converts_as_pillow_reads_a_cmyk_jpeg() {
        // No ink and no black (stored inverted: 255s) is white; full black is black.
        assert_eq!(pillow_cmyk_to_rgb([255, 255, 255], 255), [255, 255, 255]);
        assert_eq!(pillow_cmyk_to_rgb([255, 255, 255], 0), [0, 0, 0]);
        // Half cyan (stored 127: ink 128), no black: 255 - 255 * 128 / 255 rounded = 127.
        assert_eq!(pillow_cmyk_to_rgb([127, 255, 255], 255), [127, 255, 255]);
    }

    #[test]
    fn fancy_filters_round_and_repeat_edges_as_libjpeg() {
        let sums = [10, 20, 40];
        let mut out = [0u8; 6];
        across(&sums, 0, (1, 2), 2, &mut out);
        // Inside, (3 near + far + bias) >> 2, the bias 1 towards the left and 2 towards the
        // right: (30 + 20 + 2) >> 2 = 13, (60 + 10 + 1) >> 2 = 17, (60 + 40 + 2) >> 2 = 25,
        // (120 + 20 + 1) >> 2 = 35; the edge columns repeat the edge samples.
        assert_eq!(out, [10, 13, 17, 25, 35, 40]);
    }
}
