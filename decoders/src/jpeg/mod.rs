//! The media engine's fixed-function JPEG decoder: baseline sequential Huffman, 8-bit, 1 or 3
//! components, 4:4:4 / 4:2:2 / 4:2:0 / 4:4:0, restart markers. Like hardware decoders it can
//! decode only a region of interest (entropy decoding stops after the region's last MCU row;
//! only blocks that intersect the region are dequantized, inverse-transformed and colour
//! converted) and can downscale in the DCT domain by 1/2, 1/4 or 1/8 (reduced inverse DCTs).
//! Everything else is refused by [`Decode::probe`] with [`DecodeError::Unsupported`].
//!
//! Chroma is upsampled with libjpeg's "fancy" triangle filter and the same integer rounding,
//! and colour conversion uses libjpeg's fixed-point constants, so full decodes agree closely
//! with libjpeg-turbo and zune-jpeg.

mod header;
mod huffman;
mod idct;

use crate::jpeg_markers;
use crate::{Decode, DecodeError, ImageFormat, ImageInfo, Limits};
use header::Header;
use huffman::{BitReader, HuffmanTable};
use idct::Idct;

/// Natural-order index of the `k`-th zigzag coefficient.
const ZIGZAG: [usize; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20,
    13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59,
    52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];

/// A rectangle in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Left column.
    pub x: u32,
    /// Top row.
    pub y: u32,
    /// Width (at least 1).
    pub width: u32,
    /// Height (at least 1).
    pub height: u32,
}

impl Region {
    /// The whole `width`x`height` image.
    pub fn full(width: u32, height: u32) -> Self {
        Self {
            x: 0,
            y: 0,
            width,
            height,
        }
    }
}

/// The DCT-domain scale denominators the engine supports.
pub const SCALE_DENOMINATORS: [u32; 4] = [1, 2, 4, 8];

/// Picks the smallest decode (largest denominator) that still gives at least `out_w`x`out_h`
/// pixels for `region`, so the final resize only ever shrinks.
pub fn choose_scale(region: Region, out_w: u32, out_h: u32) -> u32 {
    SCALE_DENOMINATORS
        .iter()
        .rev()
        .copied()
        .find(|&d| region.width / d >= out_w && region.height / d >= out_h)
        .unwrap_or(1)
}

/// The rectangle of the image scaled by `1/denom` that covers `region`: what
/// [`JpegDecoder::decode_region`] writes.
pub fn scaled_region(info: &ImageInfo, region: Region, denom: u32) -> Region {
    let (sw, sh) = (info.width.div_ceil(denom), info.height.div_ceil(denom));
    let x0 = (region.x / denom).min(sw - 1);
    let y0 = (region.y / denom).min(sh - 1);
    let x1 = (region.x + region.width).div_ceil(denom).clamp(x0 + 1, sw);
    let y1 = (region.y + region.height).div_ceil(denom).clamp(y0 + 1, sh);
    Region {
        x: x0,
        y: y0,
        width: x1 - x0,
        height: y1 - y0,
    }
}

/// The engine's JPEG decoder. Keeps its planes between calls, so a long run allocates nothing
/// per image once they have grown.
pub struct JpegDecoder {
    limits: Limits,
    idct: Idct,
    planes: [Vec<u8>; 3],
    chroma_rows: [Vec<u8>; 2],
}

impl Default for JpegDecoder {
    fn default() -> Self {
        Self::with_limits(Limits::default())
    }
}

impl std::fmt::Debug for JpegDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JpegDecoder")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl JpegDecoder {
    /// A decoder with the given limits.
    pub fn with_limits(limits: Limits) -> Self {
        Self {
            limits,
            idct: Idct::new(),
            planes: Default::default(),
            chroma_rows: Default::default(),
        }
    }

    /// Decodes the part of the image scaled by `1/denom` that covers `region` (see
    /// [`scaled_region`]) into `out` as RGB8, and returns that scaled rectangle. `out` must hold
    /// exactly its `width * height * 3` bytes.
    ///
    /// # Errors
    /// Unsupported or corrupt data, a region outside the image, a denominator not in
    /// [`SCALE_DENOMINATORS`], or an `out` of the wrong length.
    pub fn decode_region(
        &mut self,
        bytes: &[u8],
        region: Region,
        denom: u32,
        out: &mut [u8],
    ) -> Result<Region, DecodeError> {
        let h = header::parse(bytes, &self.limits)?;
        let info = ImageInfo {
            format: ImageFormat::Jpeg,
            width: h.width,
            height: h.height,
        };
        if !SCALE_DENOMINATORS.contains(&denom) {
            return Err(DecodeError::Parameter(
                "scale denominator must be 1, 2, 4 or 8",
            ));
        }
        if region.width == 0
            || region.height == 0
            || region.x + region.width > h.width
            || region.y + region.height > h.height
        {
            return Err(DecodeError::Parameter(
                "region is empty or outside the image",
            ));
        }
        let sr = scaled_region(&info, region, denom);
        let expected = sr.width as usize * sr.height as usize * 3;
        if out.len() != expected {
            return Err(DecodeError::BufferSize {
                expected,
                got: out.len(),
            });
        }
        let n = 8 / denom as usize;
        self.entropy_decode(bytes, &h, &sr, n)?;
        self.color_convert(&h, &sr, n, denom as usize, out);
        Ok(sr)
    }

    /// MCU columns and rows `[c0, c1) x [r0, r1)` whose blocks are kept: those covering the
    /// scaled region, plus one MCU around it when chroma is subsampled (the upsampling filter
    /// reads one chroma sample beyond the region).
    fn mcu_window(h: &Header, sr: &Region, n: usize) -> (usize, usize, usize, usize) {
        let (mw, mh) = (h.hmax * n, h.vmax * n);
        let pad = usize::from(h.hmax > 1 || h.vmax > 1);
        let c0 = (sr.x as usize / mw).saturating_sub(pad);
        let c1 = ((sr.x + sr.width) as usize)
            .div_ceil(mw)
            .saturating_add(pad)
            .min(h.mcus_x());
        let r0 = (sr.y as usize / mh).saturating_sub(pad);
        let r1 = ((sr.y + sr.height) as usize)
            .div_ceil(mh)
            .saturating_add(pad)
            .min(h.mcus_y());
        (c0, c1, r0, r1)
    }

    fn entropy_decode(
        &mut self,
        bytes: &[u8],
        h: &Header,
        sr: &Region,
        n: usize,
    ) -> Result<(), DecodeError> {
        let (c0, c1, r0, r1) = Self::mcu_window(h, sr, n);
        let mut strides = [0usize; 3];
        for (i, c) in h.components.iter().enumerate() {
            strides[i] = (c1 - c0) * c.h * n;
            let len = strides[i] * (r1 - r0) * c.v * n;
            if self.planes[i].len() < len {
                self.planes[i].resize(len, 0);
            }
        }
        let tables: Vec<(&HuffmanTable, &HuffmanTable, &[u16; 64])> = h
            .components
            .iter()
            .map(|c| {
                (
                    h.dc[c.td].as_ref().expect("checked by parse"),
                    h.ac[c.ta].as_ref().expect("checked by parse"),
                    &h.qt[c.tq],
                )
            })
            .collect();
        let mut br = BitReader::new(bytes, h.scan_start);
        let mut pred = [0i32; 3];
        let mut coef = [0i32; 64];
        let mut mcus = 0usize;
        let mut next_rst = 0u8;
        let mcus_x = h.mcus_x();
        for my in 0..r1 {
            for mx in 0..mcus_x {
                if h.restart_interval > 0 && mcus > 0 && mcus % h.restart_interval == 0 {
                    br.restart(next_rst)?;
                    next_rst = (next_rst + 1) & 7;
                    pred = [0; 3];
                }
                mcus += 1;
                let keep = my >= r0 && (c0..c1).contains(&mx);
                for (ci, c) in h.components.iter().enumerate() {
                    let (dc, ac, q) = tables[ci];
                    for by in 0..c.v {
                        for bx in 0..c.h {
                            if keep {
                                let last =
                                    decode_block(&mut br, dc, ac, q, &mut pred[ci], &mut coef)?;
                                let px = ((mx - c0) * c.h + bx) * n;
                                let py = ((my - r0) * c.v + by) * n;
                                let stride = strides[ci];
                                self.idct.block(
                                    &coef,
                                    last,
                                    n,
                                    &mut self.planes[ci][py * stride + px..],
                                    stride,
                                );
                            } else {
                                skip_block(&mut br, dc, ac, &mut pred[ci])?;
                            }
                        }
                    }
                }
            }
        }
        if br.padding_consumed() > 0 {
            return Err(DecodeError::Truncated {
                format: ImageFormat::Jpeg,
                detail: "entropy-coded data ends early",
            });
        }
        Ok(())
    }

    fn color_convert(&mut self, h: &Header, sr: &Region, n: usize, denom: usize, out: &mut [u8]) {
        let (c0, _, r0, _) = Self::mcu_window(h, sr, n);
        let c1 = Self::mcu_window(h, sr, n).1;
        let w = sr.width as usize;
        let luma = &h.components[0];
        let luma_stride = (c1 - c0) * luma.h * n;
        let (lx0, ly0) = (c0 * luma.h * n, r0 * luma.v * n);
        let gray = h.components.len() == 1;
        let (hmax, vmax) = (h.hmax, h.vmax);
        let chroma_stride = (c1 - c0) * n;
        let (cx0, cy0) = (c0 * n, r0 * n);
        // Valid chroma samples in the scaled image (beyond them is MCU padding).
        let cw = (h.width as usize).div_ceil(hmax * denom);
        let ch = (h.height as usize).div_ceil(vmax * denom);
        for row in &mut self.chroma_rows {
            if row.len() < w {
                row.resize(w, 0);
            }
        }
        for (j, out_row) in out.chunks_exact_mut(w * 3).enumerate() {
            let y = sr.y as usize + j;
            let yrow = &self.planes[0][(y - ly0) * luma_stride + (sr.x as usize - lx0)..][..w];
            if gray {
                for (px, &v) in out_row.chunks_exact_mut(3).zip(yrow) {
                    px.fill(v);
                }
                continue;
            }
            let cy = y / vmax;
            let far_y = match (vmax, y % 2) {
                (2, 0) => cy.saturating_sub(1),
                (2, _) => (cy + 1).min(ch - 1),
                _ => cy,
            };
            // Rounding biases that reproduce libjpeg's fancy upsampling for each mode, with
            // colsum = 3 * near + far (vertical) or 4 * near, and out = (weights + bias) >> 4.
            let (bias_even, bias_odd) = match (hmax, vmax) {
                (2, 2) => (8, 7),
                (2, 1) => (4, 8),
                (1, 2) if y % 2 == 0 => (4, 4),
                (1, 2) => (8, 8),
                _ => (0, 0),
            };
            for (k, crow) in self.chroma_rows.iter_mut().enumerate() {
                let plane = &self.planes[k + 1];
                let near = &plane[(cy - cy0) * chroma_stride..][..chroma_stride];
                let far = &plane[(far_y - cy0) * chroma_stride..][..chroma_stride];
                let colsum = |cx: usize| -> i32 {
                    let i = cx - cx0;
                    if vmax == 2 {
                        3 * i32::from(near[i]) + i32::from(far[i])
                    } else {
                        4 * i32::from(near[i])
                    }
                };
                for (i, dst) in crow[..w].iter_mut().enumerate() {
                    let x = sr.x as usize + i;
                    let cx = x / hmax;
                    let v = if hmax == 2 {
                        let (nb, bias) = if x % 2 == 0 {
                            (cx.saturating_sub(1), bias_even)
                        } else {
                            ((cx + 1).min(cw - 1), bias_odd)
                        };
                        (3 * colsum(cx) + colsum(nb) + bias) >> 4
                    } else {
                        (4 * colsum(cx) + bias_even) >> 4
                    };
                    *dst = v as u8;
                }
            }
            ycc_to_rgb(
                yrow,
                &self.chroma_rows[0][..w],
                &self.chroma_rows[1][..w],
                out_row,
            );
        }
    }
}

/// libjpeg's YCbCr -> RGB in 16-bit fixed point.
fn ycc_to_rgb(y: &[u8], cb: &[u8], cr: &[u8], out: &mut [u8]) {
    const HALF: i32 = 1 << 15;
    for (((px, &y), &cb), &cr) in out.chunks_exact_mut(3).zip(y).zip(cb).zip(cr) {
        let (y, cb, cr) = (i32::from(y), i32::from(cb) - 128, i32::from(cr) - 128);
        let r = y + ((91_881 * cr + HALF) >> 16);
        let g = y + ((-22_554 * cb - 46_802 * cr + HALF) >> 16);
        let b = y + ((116_130 * cb + HALF) >> 16);
        px[0] = r.clamp(0, 255) as u8;
        px[1] = g.clamp(0, 255) as u8;
        px[2] = b.clamp(0, 255) as u8;
    }
}

fn bad(msg: &'static str) -> DecodeError {
    DecodeError::corrupt(ImageFormat::Jpeg, msg)
}

/// Decodes one block's coefficients, dequantized, into `coef` (natural order); returns the
/// zigzag index of the last coefficient written.
#[inline]
fn decode_block(
    br: &mut BitReader<'_>,
    dc: &HuffmanTable,
    ac: &HuffmanTable,
    q: &[u16; 64],
    pred: &mut i32,
    coef: &mut [i32; 64],
) -> Result<usize, DecodeError> {
    coef.fill(0);
    let s = u32::from(br.decode(dc)?);
    if s > 15 {
        return Err(bad("DC difference of more than 15 bits"));
    }
    *pred = pred.wrapping_add(br.receive_extend(s));
    coef[0] = pred.saturating_mul(i32::from(q[0]));
    let mut k = 1;
    let mut last = 0;
    while k < 64 {
        let rs = br.decode(ac)?;
        let (r, s) = (usize::from(rs >> 4), u32::from(rs & 15));
        if s == 0 {
            if r == 15 {
                k += 16;
                continue;
            }
            break;
        }
        k += r;
        if k > 63 {
            return Err(bad("AC run past the end of the block"));
        }
        coef[ZIGZAG[k]] = br.receive_extend(s) * i32::from(q[k]);
        last = k;
        k += 1;
    }
    Ok(last)
}

/// Advances past one block, keeping only the DC prediction.
#[inline]
fn skip_block(
    br: &mut BitReader<'_>,
    dc: &HuffmanTable,
    ac: &HuffmanTable,
    pred: &mut i32,
) -> Result<(), DecodeError> {
    let s = u32::from(br.decode(dc)?);
    if s > 15 {
        return Err(bad("DC difference of more than 15 bits"));
    }
    *pred = pred.wrapping_add(br.receive_extend(s));
    let mut k = 1;
    while k < 64 {
        let rs = br.decode(ac)?;
        let (r, s) = (usize::from(rs >> 4), u32::from(rs & 15));
        if s == 0 {
            if r == 15 {
                k += 16;
                continue;
            }
            break;
        }
        k += r + 1;
        br.skip(s);
    }
    if k > 64 {
        return Err(bad("AC run past the end of the block"));
    }
    Ok(())
}

impl Decode for JpegDecoder {
    fn probe(&mut self, bytes: &[u8]) -> Result<ImageInfo, DecodeError> {
        if bytes.is_empty() {
            return Err(DecodeError::Empty);
        }
        match ImageFormat::sniff(bytes) {
            Some(ImageFormat::Jpeg) => {}
            Some(other) => {
                return Err(DecodeError::Unsupported {
                    format: other,
                    reason: "not a JPEG",
                })
            }
            None => {
                return Err(DecodeError::UnknownFormat {
                    magic: bytes[..bytes.len().min(8)].to_vec(),
                })
            }
        }
        let h = header::parse(bytes, &self.limits)?;
        jpeg_markers::check_complete(bytes).map_err(|e| DecodeError::Truncated {
            format: ImageFormat::Jpeg,
            detail: e.detail(),
        })?;
        Ok(ImageInfo {
            format: ImageFormat::Jpeg,
            width: h.width,
            height: h.height,
        })
    }

    fn decode_into(
        &mut self,
        bytes: &[u8],
        info: &ImageInfo,
        out: &mut [u8],
    ) -> Result<(), DecodeError> {
        self.decode_region(bytes, Region::full(info.width, info.height), 1, out)
            .map(|_| ())
    }
}
