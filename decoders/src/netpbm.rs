//! Netpbm images (PBM, PGM and PPM, binary and plain) and 16-bit BMPs, read as Pillow reads
//! them: the `image` crate decodes both formats, but scales their samples otherwise than Pillow
//! (a PGM whose maxval is not 255, a 16-bit PPM, a 16-bit BMP were a level off in many values).
//!
//! Pillow's rules (checked against Pillow 13 by the sweep in BENCHMARKS.md, session 51): a
//! sample `v` of maxval `m` becomes `round(v / m * 255)` (Python's `round`, half to even), but a
//! grey image of maxval above 255 is kept as 32-bit integers scaled to 65535 and clipped at 255
//! on the way to RGB; PBM's 1 is black; a 16-bit BMP's 5- and 6-bit channels become
//! `c * 255 / 31` and `c * 255 / 63`, rounded down.

use crate::{DecodeError, ImageFormat};

fn corrupt(msg: &'static str) -> DecodeError {
    DecodeError::corrupt(ImageFormat::Pnm, msg)
}

fn truncated() -> DecodeError {
    DecodeError::Truncated {
        format: ImageFormat::Pnm,
        detail: "the samples end early",
    }
}

/// A Netpbm header: the kind (the digit of `P1`..`P6`), the size, the maxval (1 for PBM) and
/// where the samples start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    kind: u8,
    pub width: u32,
    pub height: u32,
    maxval: u32,
    data: usize,
}

/// The next whitespace-separated number from `pos` (comments, `#` to the end of the line,
/// skipped), and the position just after it.
fn number(bytes: &[u8], mut pos: usize) -> Result<(u32, usize), DecodeError> {
    loop {
        match bytes.get(pos) {
            None => return Err(truncated()),
            Some(b'#') => {
                while bytes.get(pos).is_some_and(|&b| b != b'\n' && b != b'\r') {
                    pos += 1;
                }
            }
            Some(b) if b.is_ascii_whitespace() => pos += 1,
            Some(b) if b.is_ascii_digit() => break,
            Some(_) => return Err(corrupt("a field that is not a number")),
        }
    }
    let mut value: u32 = 0;
    while let Some(&b) = bytes.get(pos).filter(|b| b.is_ascii_digit()) {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u32::from(b - b'0')))
            .ok_or(corrupt("a number too large"))?;
        pos += 1;
    }
    Ok((value, pos))
}

/// Parses the header of `bytes`, which [`ImageFormat::sniff`] found to start `P1`..`P6`.
pub(crate) fn header(bytes: &[u8]) -> Result<Header, DecodeError> {
    let kind = bytes.get(1).map(|b| b.wrapping_sub(b'0')).unwrap_or(0);
    if !(1..=6).contains(&kind) {
        return Err(corrupt("not a PBM, PGM or PPM"));
    }
    let (width, pos) = number(bytes, 2)?;
    let (height, mut pos) = number(bytes, pos)?;
    let mut maxval = 1;
    if kind != 1 && kind != 4 {
        (maxval, pos) = number(bytes, pos)?;
        if !(1..=65535).contains(&maxval) {
            return Err(corrupt("maxval outside 1..=65535"));
        }
    }
    // One whitespace byte ends the header.
    if !bytes.get(pos).is_some_and(|b| b.is_ascii_whitespace()) {
        return Err(truncated());
    }
    Ok(Header {
        kind,
        width,
        height,
        maxval,
        data: pos + 1,
    })
}

/// Python's `round(v / maxval * top)` in f64, as Pillow computes it.
fn scaled(v: u32, maxval: u32, top: f64) -> f64 {
    (f64::from(v.min(maxval)) / f64::from(maxval) * top).round_ties_even()
}

/// Decodes the samples `h` describes into interleaved RGB8 `out` (`width * height * 3`).
pub(crate) fn decode(bytes: &[u8], h: &Header, out: &mut [u8]) -> Result<(), DecodeError> {
    let (w, rows) = (h.width as usize, h.height as usize);
    let colour = h.kind == 3 || h.kind == 6;
    let channels = if colour { 3 } else { 1 };
    let count = w * rows * channels;
    let data = &bytes[h.data.min(bytes.len())..];
    // Every sample to its 8-bit value as Pillow's conversion to RGB gives it.
    let to_u8 = |v: u32| -> u8 {
        match (h.kind, h.maxval) {
            (1 | 4, _) => {
                if v == 0 {
                    255
                } else {
                    0
                }
            }
            (_, 255) => v as u8,
            (2 | 5, m) if m > 255 => scaled(v, m, 65535.0).min(255.0) as u8,
            (_, m) => scaled(v, m, 255.0) as u8,
        }
    };
    let mut put = |i: usize, v: u32| {
        let v = to_u8(v);
        if colour {
            out[i] = v;
        } else {
            out[3 * i..3 * i + 3].fill(v);
        }
    };
    // Binary 8-bit samples (what an array of pixels served as a file is) are the output's
    // bytes as they are: copied, a grey replicated to three channels.
    if matches!(h.kind, 5 | 6) && h.maxval == 255 {
        let data = data.get(..count).ok_or_else(truncated)?;
        if colour {
            out[..count].copy_from_slice(data);
        } else {
            for (px, &v) in out.chunks_exact_mut(3).zip(data) {
                px.fill(v);
            }
        }
        return Ok(());
    }
    match h.kind {
        4 => {
            let stride = w.div_ceil(8);
            if data.len() < stride * rows {
                return Err(truncated());
            }
            for y in 0..rows {
                for x in 0..w {
                    put(
                        y * w + x,
                        u32::from(data[y * stride + x / 8] >> (7 - x % 8) & 1),
                    );
                }
            }
        }
        5 | 6 => {
            let wide = h.maxval > 255;
            let size = if wide { 2 } else { 1 };
            if data.len() < count * size {
                return Err(truncated());
            }
            for i in 0..count {
                let v = if wide {
                    u32::from(u16::from_be_bytes([data[2 * i], data[2 * i + 1]]))
                } else {
                    u32::from(data[i])
                };
                put(i, v);
            }
        }
        _ => {
            // Plain: decimal numbers separated by whitespace (PBM's digits need none).
            let mut pos = 0;
            for i in 0..count {
                let v = if h.kind == 1 {
                    loop {
                        match data.get(pos) {
                            None => return Err(truncated()),
                            Some(b'0') | Some(b'1') => break u32::from(data[pos] - b'0'),
                            Some(b) if b.is_ascii_whitespace() => pos += 1,
                            Some(b'#') => {
                                while data.get(pos).is_some_and(|&b| b != b'\n') {
                                    pos += 1;
                                }
                            }
                            Some(_) => return Err(corrupt("a PBM sample that is not 0 or 1")),
                        }
                    }
                } else {
                    let (v, next) = number(data, pos)?;
                    pos = next - 1;
                    v
                };
                pos += 1;
                put(i, v);
            }
        }
    }
    Ok(())
}

/// Pillow's RGB of a 16-bit BMP (`None` for any other BMP, which the `image` crate decodes as
/// Pillow does): BI_RGB is 5-5-5, BI_BITFIELDS Pillow takes with masks 5-6-5 or 5-5-5 only.
pub(crate) fn bmp16(bytes: &[u8], out: &mut [u8]) -> Option<Result<(), DecodeError>> {
    let u16_at = |at: usize| {
        bytes
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u32_at = |at: usize| {
        bytes
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    if u16_at(28)? != 16 {
        return None;
    }
    let bad = |msg| Some(Err(DecodeError::corrupt(ImageFormat::Bmp, msg)));
    let (Some(offset), Some(width), Some(height), Some(compression)) =
        (u32_at(10), u32_at(18), u32_at(22), u32_at(30))
    else {
        return bad("a header that ends early");
    };
    let (width, height) = (width as i32, height as i32);
    let masks = match compression {
        0 => [0x7C00, 0x03E0, 0x001F],
        3 => match (u32_at(54), u32_at(58), u32_at(62)) {
            (Some(r), Some(g), Some(b)) => [r, g, b],
            _ => return bad("bit field masks missing"),
        },
        _ => return bad("a 16-bit compression Pillow does not read"),
    };
    // (shift, maximum) of each channel.
    let fields = match masks {
        [0xF800, 0x07E0, 0x001F] => [(11, 31), (5, 63), (0, 31)],
        [0x7C00, 0x03E0, 0x001F] => [(10, 31), (5, 31), (0, 31)],
        _ => return bad("16-bit bit fields Pillow does not read"),
    };
    let (w, rows) = (
        width.unsigned_abs() as usize,
        height.unsigned_abs() as usize,
    );
    let stride = (w * 2).div_ceil(4) * 4;
    let Some(data) = bytes.get(offset as usize..) else {
        return bad("pixel data outside the file");
    };
    if data.len() < stride * rows.saturating_sub(1) + w * 2 || out.len() < w * rows * 3 {
        return Some(Err(DecodeError::Truncated {
            format: ImageFormat::Bmp,
            detail: "the pixel rows end early",
        }));
    }
    for y in 0..rows {
        // Rows are stored bottom-up unless the height is negative.
        let src = if height < 0 { y } else { rows - 1 - y };
        for x in 0..w {
            let at = src * stride + 2 * x;
            let pixel = u32::from(u16::from_le_bytes([data[at], data[at + 1]]));
            for (c, &(shift, max)) in fields.iter().enumerate() {
                out[(y * w + x) * 3 + c] = ((pixel >> shift & max) * 255 / max) as u8;
            }
        }
    }
    Some(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rgb(bytes: &[u8]) -> Result<Vec<u8>, DecodeError> {
        let h = header(bytes)?;
        let mut out = vec![0; h.width as usize * h.height as usize * 3];
        decode(bytes, &h, &mut out)?;
        Ok(out)
    }

    fn grey(out: &[u8]) -> Vec<u8> {
        out.chunks(3).map(|p| p[0]).collect()
    }

    /// The values Pillow 13 gives for these samples (checked by hand).
    #[test]
    fn samples_scale_as_pillow_scales_them() {
        // maxval 100: round(v / 100 * 255), half to even: 2.55 -> 3, 5.1 -> 5, 127.5 -> 128.
        let pgm = [b"P5 4 1 100\n".as_slice(), &[0, 1, 2, 50]].concat();
        assert_eq!(grey(&rgb(&pgm).unwrap()), [0, 3, 5, 128]);
        // Grey above 255: scaled to 65535, then clipped at 255 (1 -> 65.5 -> 66).
        let wide = [b"P5 3 1 1000\n".as_slice(), &[0, 1, 0, 4, 3, 232]].concat();
        assert_eq!(grey(&rgb(&wide).unwrap()), [66, 255, 255]);
        // Colour above 255: round(v / maxval * 255) like any other maxval.
        let ppm = [b"P6 1 1 1000\n".as_slice(), &[0, 1, 1, 244, 3, 232]].concat();
        assert_eq!(rgb(&ppm).unwrap(), [0, 128, 255]);
        // Plain formats, comments anywhere in the header, 1 black in PBM.
        assert_eq!(
            grey(&rgb(b"P2\n# made by hand\n2 1\n# max\n3\n1 3\n").unwrap()),
            [85, 255]
        );
        assert_eq!(grey(&rgb(b"P1\n3 1\n101\n").unwrap()), [0, 255, 0]);
        // Binary PBM: rows padded to whole bytes.
        assert_eq!(
            grey(&rgb(b"P4\n9 1\n\x80\x80").unwrap()),
            [0, 255, 255, 255, 255, 255, 255, 255, 0]
        );
    }

    #[test]
    fn short_or_malformed_files_are_errors_not_panics() {
        for bad in [
            b"P5 4 1 100\n\x00\x01".as_slice(),
            b"P6 2 2 0\n",
            b"P3 1 1 255\n1 2",
            b"P5 4 1 100",
            b"P2 1 1 x\n",
            b"P1 2 1\n12",
            b"P5 99999999999 1 255\n",
        ] {
            assert!(rgb(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    /// 16-bit BMP channels: `c * 255 / max`, rounded down (Pillow's `BGR;15` and `BGR;16`).
    #[test]
    fn sixteen_bit_bmp_channels_scale_down_as_pillows() {
        let bmp = |compression: u32, masks: &[u32], pixel: u16| {
            let mut b = b"BM".to_vec();
            let offset = 54 + 4 * masks.len() as u32;
            b.extend_from_slice(&(offset + 4).to_le_bytes());
            b.extend_from_slice(&[0; 4]);
            b.extend_from_slice(&offset.to_le_bytes());
            b.extend_from_slice(&40u32.to_le_bytes());
            b.extend_from_slice(&1i32.to_le_bytes());
            b.extend_from_slice(&1i32.to_le_bytes());
            b.extend_from_slice(&1u16.to_le_bytes());
            b.extend_from_slice(&16u16.to_le_bytes());
            b.extend_from_slice(&compression.to_le_bytes());
            b.extend_from_slice(&[0; 20]);
            for m in masks {
                b.extend_from_slice(&m.to_le_bytes());
            }
            b.extend_from_slice(&pixel.to_le_bytes());
            b.extend_from_slice(&[0, 0]);
            b
        };
        let mut out = [0u8; 3];
        // 5-6-5: red 3 -> 24 (24.7 down), green 33 -> 133, blue 31 -> 255.
        let file = bmp(3, &[0xF800, 0x07E0, 0x001F], 3 << 11 | 33 << 5 | 31);
        bmp16(&file, &mut out).unwrap().unwrap();
        assert_eq!(out, [24, 133, 255]);
        // BI_RGB: 5-5-5.
        let file = bmp(0, &[], 1 << 10 | 16 << 5);
        bmp16(&file, &mut out).unwrap().unwrap();
        assert_eq!(out, [8, 131, 0]);
        // Masks Pillow does not read are refused; other depths are not this function's.
        assert!(bmp16(&bmp(3, &[0xF00, 0xF0, 0xF], 0), &mut out)
            .unwrap()
            .is_err());
        let mut deeper = bmp(0, &[], 0);
        deeper[28] = 24;
        assert!(bmp16(&deeper, &mut out).is_none());
    }
}
