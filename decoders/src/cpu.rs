//! The CPU decoder: JPEGs by our own decoder at full scale (baseline, progressive,
//! arithmetic-coded, RGB, CMYK, YCCK, any sampling: libjpeg-turbo's and Pillow's pixels, see
//! [`crate::jpeg`]), the rest by zune-jpeg (the decoder inside the `image` crate, called
//! directly so the input is borrowed and the headers parsed once), PNG and WebP by the `image`
//! crate.

use std::io::Cursor;

use image::ImageDecoder;
use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;

use crate::jpeg::{JpegDecoder, Parsed, Region};
use crate::{jpeg_markers, netpbm};
use crate::{rgb_prefix, Decode, DecodeError, ImageFormat, ImageInfo, Limits};

/// Decodes JPEG, PNG and WebP on the host into interleaved RGB8.
///
/// A JPEG [`JpegDecoder::for_host`] takes (all Pillow reads but progressive ones whose scans
/// stop short) decodes to exactly the bytes Pillow gives, and
/// [`CpuDecoder::probe_region`] with [`CpuDecoder::decode_region_in_place`] decode only the part
/// of it a consumer reads. A JPEG that decoder refuses or finds damaged goes to zune-jpeg,
/// which is more lenient and whose IDCT rounds differently from libjpeg's.
///
/// Grayscale is replicated to three channels, CMYK/YCCK JPEGs are converted to RGB, alpha is
/// dropped and 16-bit PNGs are brought to 8 bits, as `PIL.Image.convert("RGB")` does. EXIF orientation is ignored, as torchvision's
/// default loader ignores it. Truncated JPEGs are rejected (see [`jpeg_markers`]).
#[derive(Debug)]
pub struct CpuDecoder {
    limits: Limits,
    /// Baseline JPEGs. Boxed: its tables make it 170 KB, too much to move around on the
    /// stacks of the threads that make a decoder.
    exact: Box<JpegDecoder>,
    /// Grey reads ([`CpuDecoder::set_luma`]).
    luma: bool,
    /// The weights of a grey read's colour PNGs ([`CpuDecoder::set_png_grey`]).
    png_grey: Option<[u16; 3]>,
}

impl Default for CpuDecoder {
    fn default() -> Self {
        Self::with_limits(Limits::default())
    }
}

impl CpuDecoder {
    /// A decoder with the given limits.
    pub fn with_limits(limits: Limits) -> Self {
        Self {
            limits,
            exact: Box::new(JpegDecoder::for_host(limits)),
            luma: false,
            png_grey: None,
        }
    }

    /// A grey read's colour PNG (8-bit RGB, or RGBA whose alpha is dropped) made grey as
    /// libpng's `png_set_rgb_to_gray` makes it when no gamma is known: `(r * weights[0] + g *
    /// weights[1] + b * weights[2]) >> 15` (the weights add up to 32768; OpenCV's are
    /// `[9797, 19234, 3737]`, torchvision's reader's `[9794, 19234, 3740]`). A PNG that
    /// carries a gamma (`gAMA`, `sRGB`, `iCCP`), chromaticities (`cHRM`) or a transparent
    /// colour (`tRNS`), with which libpng computes otherwise, is still refused, as is every
    /// colour PNG without weights (`None`, the default).
    pub fn set_png_grey(&mut self, weights: Option<[u16; 3]>) {
        self.png_grey = weights;
    }

    /// Reads every image grey, as OpenCV's `cv2.imread(path, cv2.IMREAD_GRAYSCALE)` reads
    /// it, each pixel's grey in all three channels: a JPEG's luma ([`JpegDecoder::set_luma`];
    /// a damaged one's by zune-jpeg, as for colour), a grey PNG (8 bits a sample at most, with
    /// or without alpha) as stored, a colour PNG by the weights [`CpuDecoder::set_png_grey`]
    /// gives. Any other file is refused ([`DecodeError::Unsupported`], naming why).
    pub fn set_luma(&mut self, luma: bool) {
        self.luma = luma;
        self.exact.set_luma(luma);
    }

    /// A JPEG's size and headers, parsed (completeness and limits checked) by the exact decoder for
    /// [`CpuDecoder::decode_region_in_place`]; `None` for every other file, which
    /// [`Decode::decode`] decodes whole.
    pub fn probe_region(&mut self, bytes: &[u8]) -> Option<(ImageInfo, Parsed)> {
        self.exact.probe_parsed(bytes).ok()
    }

    /// Decodes `region` of a JPEG [`CpuDecoder::probe_region`] took into its place in `image`,
    /// laid out as the whole image: see [`JpegDecoder::decode_region_in_place`]. On an error
    /// (damaged data), [`Decode::decode`] gives zune-jpeg's decode or names the damage.
    ///
    /// # Errors
    /// As [`JpegDecoder::decode_region_in_place`].
    pub fn decode_region_in_place(
        &mut self,
        bytes: &[u8],
        parsed: &Parsed,
        region: Region,
        image: &mut [u8],
    ) -> Result<(), DecodeError> {
        self.exact
            .decode_region_in_place(bytes, parsed, region, image)
    }

    /// A JPEG decoded whole by the exact decoder into `out`, sized by `out_for`;
    /// `None` when that decoder refuses the file or finds it damaged (zune-jpeg decides then).
    fn decode_exact<'a>(
        &mut self,
        bytes: &[u8],
        out_for: impl FnOnce(&ImageInfo) -> Option<&'a mut [u8]>,
    ) -> Option<ImageInfo> {
        let (info, parsed) = self.probe_region(bytes)?;
        let image = out_for(&info)?;
        let whole = Region::full(info.width, info.height);
        self.exact
            .decode_region_in_place(bytes, &parsed, whole, image)
            .ok()?;
        Some(info)
    }

    fn zune_options(&self) -> DecoderOptions {
        DecoderOptions::default()
            .set_strict_mode(false)
            .set_max_width(self.limits.max_dimension as usize)
            .set_max_height(self.limits.max_dimension as usize)
    }
}

fn jpeg_err(e: zune_jpeg::errors::DecodeErrors) -> DecodeError {
    DecodeError::corrupt(ImageFormat::Jpeg, e.to_string())
}

fn image_err(format: ImageFormat, e: image::ImageError) -> DecodeError {
    match e {
        image::ImageError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            DecodeError::Truncated {
                format,
                detail: "data ends early",
            }
        }
        other => DecodeError::corrupt(format, other),
    }
}

impl Decode for CpuDecoder {
    /// The exact decoder's parse for a JPEG it takes (so that probe and decode agree on which
    /// files decode), zune-jpeg's or the `image` crate's for everything else.
    fn probe(&mut self, bytes: &[u8]) -> Result<ImageInfo, DecodeError> {
        if let Some((info, _)) = self.probe_region(bytes) {
            return Ok(info);
        }
        Ok(self.open(bytes)?.info())
    }

    fn decode_into(
        &mut self,
        bytes: &[u8],
        info: &ImageInfo,
        out: &mut [u8],
    ) -> Result<(), DecodeError> {
        if out.len() != info.rgb_len() {
            return Err(DecodeError::BufferSize {
                expected: info.rgb_len(),
                got: out.len(),
            });
        }
        if self
            .decode_exact(bytes, |got| (got == info).then_some(&mut *out))
            .is_some()
        {
            return Ok(());
        }
        let opened = self.open(bytes)?;
        if opened.info() != *info {
            return Err(DecodeError::corrupt(
                info.format,
                "image differs from the probed one",
            ));
        }
        self.finish(opened, out)
    }

    /// Parses the headers once: the size is checked against the limits (and a JPEG's marker
    /// structure for completeness) between the header parse and the decode.
    fn decode(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<ImageInfo, DecodeError> {
        if let Some(info) = self.decode_exact(bytes, |info| Some(rgb_prefix(out, info))) {
            return Ok(info);
        }
        let opened = self.open(bytes)?;
        let info = opened.info();
        self.finish(opened, rgb_prefix(out, &info))?;
        Ok(info)
    }
}

/// A decoder whose headers are parsed and whose size passed the limits: what
/// [`CpuDecoder::open`] hands to [`CpuDecoder::finish`].
// zune's decoder is about 29 KB, held on the stack for one decode, as before this enum; boxing
// it would allocate per image.
#[allow(clippy::large_enum_variant)]
enum Opened<'a> {
    Jpeg(zune_jpeg::JpegDecoder<ZCursor<&'a [u8]>>, ImageInfo),
    /// With whether the PNG is 16-bit grey (see [`pil_rgb_of_16_bit`]).
    Png(
        image::codecs::png::PngDecoder<Cursor<&'a [u8]>>,
        ImageInfo,
        bool,
    ),
    WebP(
        image::codecs::webp::WebPDecoder<Cursor<&'a [u8]>>,
        ImageInfo,
    ),
    /// With the file's bytes, for a 16-bit BMP (see [`netpbm::bmp16`]).
    Bmp(
        image::codecs::bmp::BmpDecoder<Cursor<&'a [u8]>>,
        ImageInfo,
        &'a [u8],
    ),
    Pnm(netpbm::Header, ImageInfo, &'a [u8]),
}

impl Opened<'_> {
    fn info(&self) -> ImageInfo {
        match self {
            Self::Jpeg(_, info)
            | Self::Png(_, info, _)
            | Self::WebP(_, info)
            | Self::Bmp(_, info, _)
            | Self::Pnm(_, info, _) => *info,
        }
    }
}

impl CpuDecoder {
    /// Identifies `bytes`, parses their headers and checks the size against the limits (and,
    /// for a JPEG, that its marker structure is complete), before any pixel memory is touched.
    fn open<'a>(&mut self, bytes: &'a [u8]) -> Result<Opened<'a>, DecodeError> {
        let format = ImageFormat::identify(bytes)?;
        if self.luma {
            self.check_grey_read(format, bytes)?;
        }
        let info = |(width, height)| ImageInfo {
            format,
            width,
            height,
        };
        let opened = match format {
            ImageFormat::Jpeg => {
                let mut d = zune_jpeg::JpegDecoder::new_with_options(
                    ZCursor::new(bytes),
                    // The size limit is ours, checked below with a clear error.
                    DecoderOptions::default()
                        .set_strict_mode(false)
                        .set_max_width(usize::MAX)
                        .set_max_height(usize::MAX),
                );
                d.decode_headers()
                    .map_err(|e| match jpeg_markers::check_complete(bytes) {
                        // Headers that break where the file ends: report the cause, not the symptom.
                        Err(m) => m.into(),
                        Ok(()) => jpeg_err(e),
                    })?;
                let (w, h) = d
                    .dimensions()
                    .ok_or_else(|| DecodeError::corrupt(format, "no frame header"))?;
                Opened::Jpeg(d, info((w as u32, h as u32)))
            }
            ImageFormat::Png => {
                let d = image::codecs::png::PngDecoder::new(Cursor::new(bytes))
                    .map_err(|e| image_err(format, e))?;
                let size = d.dimensions();
                // IHDR, the first chunk, holds the bit depth and colour type at 24 and 25.
                let grey16 =
                    bytes.get(12..16) == Some(b"IHDR") && bytes.get(24..26) == Some(&[16, 0]);
                Opened::Png(d, info(size), grey16)
            }
            ImageFormat::WebP => {
                let d = image::codecs::webp::WebPDecoder::new(Cursor::new(bytes))
                    .map_err(|e| image_err(format, e))?;
                let size = d.dimensions();
                Opened::WebP(d, info(size))
            }
            ImageFormat::Bmp => {
                let d = image::codecs::bmp::BmpDecoder::new(Cursor::new(bytes))
                    .map_err(|e| image_err(format, e))?;
                let size = d.dimensions();
                Opened::Bmp(d, info(size), bytes)
            }
            ImageFormat::Pnm => {
                let h = netpbm::header(bytes)?;
                Opened::Pnm(h, info((h.width, h.height)), bytes)
            }
        };
        let info = opened.info();
        self.limits.check(format, info.width, info.height)?;
        if format == ImageFormat::Jpeg {
            jpeg_markers::check_complete(bytes)?;
        }
        Ok(opened)
    }

    /// Refuses, for a grey read, a file whose grey [`CpuDecoder::set_luma`] does not give. A
    /// JPEG the exact decoder refuses for it is refused; one it cannot parse (damaged) goes
    /// on to zune-jpeg's luma.
    fn check_grey_read(&mut self, format: ImageFormat, bytes: &[u8]) -> Result<(), DecodeError> {
        let refuse = |reason| Err(DecodeError::Unsupported { format, reason });
        match format {
            ImageFormat::Jpeg => match self.exact.probe_parsed(bytes) {
                Err(e @ DecodeError::Unsupported { .. }) => Err(e),
                _ => Ok(()),
            },
            ImageFormat::Png => {
                // IHDR, the first chunk, holds the bit depth and colour type at 24 and 25.
                match (bytes.get(24), bytes.get(25)) {
                    (Some(&depth), Some(0 | 4)) if depth <= 8 => Ok(()),
                    (Some(_), Some(0 | 4)) => {
                        refuse("a grey read of a 16-bit PNG (OpenCV scales it to 8 bits otherwise)")
                    }
                    (Some(8), Some(2 | 6)) if self.png_grey.is_some() => {
                        match png_chunk_before_data(bytes, &[*b"gAMA", *b"sRGB", *b"iCCP", *b"cHRM", *b"tRNS"]) {
                            Some(b"tRNS") => refuse(
                                "a grey read of a colour PNG with a transparent colour (libpng's grey of it is not made here)",
                            ),
                            Some(_) => refuse(
                                "a grey read of a colour PNG that carries a gamma or chromaticities (libpng makes its grey in linear light)",
                            ),
                            None => Ok(()),
                        }
                    }
                    _ => refuse(
                        "a grey read of a colour PNG (OpenCV makes its grey with libpng's weights)",
                    ),
                }
            }
            _ => refuse("a grey read of a file other than a JPEG or PNG"),
        }
    }

    /// Decodes an opened image into `out`, exactly its `rgb_len()` bytes.
    fn finish(&self, opened: Opened<'_>, out: &mut [u8]) -> Result<(), DecodeError> {
        match opened {
            Opened::Jpeg(d, info) => self.decode_jpeg(d, &info, out),
            Opened::Png(d, info, grey16) => {
                let colour = d.color_type().has_color();
                decode_with_image(d, &info, out, grey16)?;
                if let (true, true, Some(weights)) = (self.luma, colour, self.png_grey) {
                    libpng_grey(out, weights);
                }
                Ok(())
            }
            Opened::WebP(d, info) => decode_with_image(d, &info, out, false),
            Opened::Bmp(d, info, bytes) => match netpbm::bmp16(bytes, out) {
                Some(done) => done,
                None => decode_with_image(d, &info, out, false),
            },
            Opened::Pnm(h, _, bytes) => netpbm::decode(bytes, &h, out),
        }
    }

    fn decode_jpeg(
        &self,
        mut d: zune_jpeg::JpegDecoder<ZCursor<&[u8]>>,
        info: &ImageInfo,
        out: &mut [u8],
    ) -> Result<(), DecodeError> {
        let pixels = info.width as usize * info.height as usize;
        let input = d.input_colorspace();
        if matches!(input, Some(ColorSpace::Luma | ColorSpace::LumaA)) {
            d.set_options(
                self.zune_options()
                    .jpeg_set_out_colorspace(ColorSpace::Luma),
            );
            d.decode_into(&mut out[..pixels]).map_err(jpeg_err)?;
            expand_gray_in_place(out, pixels);
        } else if self.luma {
            // The luma of a colour JPEG: decoded as YCbCr (zune-jpeg's own grey output of a
            // colour JPEG panics on some damaged files), each pixel's Y then copied over its
            // chroma.
            if input != Some(ColorSpace::YCbCr) {
                return Err(DecodeError::Unsupported {
                    format: ImageFormat::Jpeg,
                    reason: "a grey read of a JPEG coded in neither YCbCr nor grey",
                });
            }
            d.set_options(
                self.zune_options()
                    .jpeg_set_out_colorspace(ColorSpace::YCbCr),
            );
            d.decode_into(out).map_err(jpeg_err)?;
            for px in out.chunks_exact_mut(3) {
                px[1] = px[0];
                px[2] = px[0];
            }
        } else {
            d.set_options(self.zune_options().jpeg_set_out_colorspace(ColorSpace::RGB));
            d.decode_into(out).map_err(jpeg_err)?;
        }
        Ok(())
    }
}

/// Replicates `pixels` gray bytes at the start of `buf` to RGB triplets, back to front so no
/// byte is overwritten before it is read.
fn expand_gray_in_place(buf: &mut [u8], pixels: usize) {
    for i in (0..pixels).rev() {
        let v = buf[i];
        buf[3 * i..3 * i + 3].fill(v);
    }
}

fn decode_with_image(
    decoder: impl ImageDecoder,
    info: &ImageInfo,
    out: &mut [u8],
    grey16: bool,
) -> Result<(), DecodeError> {
    if decoder.color_type() == image::ColorType::Rgb8 {
        return decoder
            .read_image(out)
            .map_err(|e| image_err(info.format, e));
    }
    // Other colour types (gray, alpha, 16-bit) are rare in training sets: convert.
    let img = image::DynamicImage::from_decoder(decoder).map_err(|e| image_err(info.format, e))?;
    if !pil_rgb_of_16_bit(&img, grey16, out) {
        out.copy_from_slice(img.to_rgb8().as_raw());
    }
    Ok(())
}

/// The chunk among `names` a PNG carries before its first `IDAT` (where the chunks that change
/// how libpng computes a grey stand), if any; `None` too for a PNG too short to tell, which its
/// decode names.
fn png_chunk_before_data<'a>(bytes: &[u8], names: &'a [[u8; 4]]) -> Option<&'a [u8; 4]> {
    let mut at = 8; // the signature
    while let Some(head) = bytes.get(at..at + 8) {
        let len = u32::from_be_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        let name = &head[4..8];
        if name == b"IDAT" {
            return None;
        }
        if let Some(found) = names.iter().find(|n| n[..] == *name) {
            return Some(found);
        }
        at = at.checked_add(12)?.checked_add(len)?;
    }
    None
}

/// An RGB image made grey in place as libpng's `png_do_rgb_to_gray` makes it without gamma
/// (`(r * w[0] + g * w[1] + b * w[2]) >> 15`, truncated: with weights adding up to 32768 a
/// pixel whose channels are equal keeps its value, as libpng keeps it), the grey in all
/// three channels.
fn libpng_grey(rgb: &mut [u8], [wr, wg, wb]: [u16; 3]) {
    let (wr, wg, wb) = (u32::from(wr), u32::from(wg), u32::from(wb));
    for px in rgb.chunks_exact_mut(3) {
        let sum = u32::from(px[0]) * wr + u32::from(px[1]) * wg + u32::from(px[2]) * wb;
        px.fill((sum >> 15) as u8);
    }
}

/// `PIL.Image.open(f).convert("RGB")` of a 16-bit PNG, which is not a scaling: Pillow keeps a
/// 16-bit grey PNG as mode `I;16` and clips its values to 255 on the way to RGB (a depth map
/// stays mostly white), and takes the high byte of every other 16-bit PNG (`RGB;16B` and the
/// like). `grey16` says the file is 16-bit grey (a transparent colour makes it grey and alpha
/// here, still grey to Pillow). Writes `out` and returns true for a 16-bit image; false for any
/// other, which the `image` crate's conversion gives as Pillow does (checked by the tests).
fn pil_rgb_of_16_bit(img: &image::DynamicImage, grey16: bool, out: &mut [u8]) -> bool {
    use image::DynamicImage as D;
    let (samples, channels): (&[u16], usize) = match img {
        D::ImageLuma16(i) => (i.as_raw(), 1),
        D::ImageLumaA16(i) => (i.as_raw(), 2),
        D::ImageRgb16(i) => (i.as_raw(), 3),
        D::ImageRgba16(i) => (i.as_raw(), 4),
        _ => return false,
    };
    for (px, s) in out.chunks_exact_mut(3).zip(samples.chunks_exact(channels)) {
        if channels <= 2 {
            let v = if grey16 { s[0].min(255) } else { s[0] >> 8 };
            px.fill(v as u8);
        } else {
            for (o, &v) in px.iter_mut().zip(s) {
                *o = (v >> 8) as u8;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn decode(bytes: &[u8]) -> Result<(ImageInfo, Vec<u8>), DecodeError> {
        let mut d = CpuDecoder::default();
        let info = d.probe(bytes)?;
        let mut out = vec![0; info.rgb_len()];
        d.decode_into(bytes, &info, &mut out)?;
        Ok((info, out))
    }

    fn png(pixels: &[u8], width: u32, colour: image::ExtendedColorType) -> Vec<u8> {
        let mut out = Vec::new();
        let height = pixels.len() as u32 / width / u32::from(colour.bits_per_pixel() / 8);
        image::ImageEncoder::write_image(
            image::codecs::png::PngEncoder::new(&mut out),
            pixels,
            width,
            height,
            colour,
        )
        .unwrap();
        out
    }

    #[test]
    fn a_grey_read_of_a_damaged_colour_jpeg_gives_its_luma_or_an_error_never_a_panic() {
        // A fuzz find: zune-jpeg's own grey output of this damaged JPEG indexes past a row.
        let bytes = include_bytes!("../tests/fixtures/damaged/s420_luma_panic.jpg");
        let mut colour = CpuDecoder::default();
        let mut grey = CpuDecoder::default();
        grey.set_luma(true);
        let (mut rgb, mut luma) = (Vec::new(), Vec::new());
        let got = (
            colour.decode(bytes, &mut rgb),
            grey.decode(bytes, &mut luma),
        );
        match got {
            (Ok(a), Ok(b)) => {
                assert_eq!(a, b);
                assert!(luma.chunks_exact(3).all(|p| p[0] == p[1] && p[1] == p[2]));
            }
            (Err(a), Err(b)) => assert_eq!(a.reason(), b.reason(), "{a} / {b}"),
            other => panic!("the colour and grey reads disagree: {other:?}"),
        }
    }

    #[test]
    fn a_grey_read_takes_grey_pngs_as_stored_and_refuses_colour_pngs_and_other_formats() {
        let mut d = CpuDecoder::default();
        d.set_luma(true);
        let mut read = |bytes: &[u8]| {
            let mut out = Vec::new();
            d.decode(bytes, &mut out).map(|_| out)
        };
        let grey = read(&png(&[0, 90, 200, 255], 2, image::ExtendedColorType::L8)).unwrap();
        assert_eq!(grey, [0, 0, 0, 90, 90, 90, 200, 200, 200, 255, 255, 255]);
        let with_alpha = png(&[7, 0, 9, 255], 2, image::ExtendedColorType::La8);
        assert_eq!(read(&with_alpha).unwrap(), [7, 7, 7, 9, 9, 9]);
        let refusals = [
            (
                png(&[1, 2, 3, 4, 5, 6], 2, image::ExtendedColorType::Rgb8),
                "colour PNG",
            ),
            (
                png(&[1, 0, 2, 0], 2, image::ExtendedColorType::L16),
                "16-bit PNG",
            ),
            (b"P5 1 1 255 \x07".to_vec(), "other than a JPEG or PNG"),
        ];
        for (bytes, why) in refusals {
            match read(&bytes) {
                Err(DecodeError::Unsupported { reason, .. }) => {
                    assert!(reason.contains(why), "{reason}")
                }
                other => panic!("{why}: {other:?}"),
            }
        }
    }

    /// `bytes` (a PNG) with a chunk `name` of `data` inserted after its `IHDR`.
    fn with_chunk(bytes: &[u8], name: &[u8; 4], data: &[u8]) -> Vec<u8> {
        let crc = |b: &[u8]| {
            let mut c = !0u32;
            for &x in b {
                c ^= u32::from(x);
                for _ in 0..8 {
                    c = (c >> 1) ^ (0xEDB8_8320 & (c & 1).wrapping_neg());
                }
            }
            !c
        };
        let body = [&name[..], data].concat();
        let chunk = [
            &(data.len() as u32).to_be_bytes()[..],
            &body,
            &crc(&body).to_be_bytes(),
        ]
        .concat();
        [&bytes[..33], &chunk, &bytes[33..]].concat()
    }

    #[test]
    fn a_grey_read_makes_a_colour_pngs_grey_by_the_weights_it_is_given_where_libpng_would() {
        const OPENCV: [u16; 3] = [9797, 19234, 3737];
        let rgb = [200, 10, 30, 7, 7, 7, 0, 255, 128, 255, 255, 254];
        let grey: Vec<u8> = rgb
            .chunks_exact(3)
            .map(|p| {
                let sum = 9797 * u32::from(p[0]) + 19234 * u32::from(p[1]) + 3737 * u32::from(p[2]);
                (sum >> 15) as u8
            })
            .collect();
        assert_eq!(grey, [69, 7, 164, 254]);
        let rgba: Vec<u8> = rgb
            .chunks_exact(3)
            .flat_map(|p| [p[0], p[1], p[2], 99])
            .collect();
        let files = [
            png(&rgb, 2, image::ExtendedColorType::Rgb8),
            png(&rgba, 2, image::ExtendedColorType::Rgba8),
        ];
        let mut d = CpuDecoder::default();
        d.set_luma(true);
        d.set_png_grey(Some(OPENCV));
        for file in &files {
            let mut out = Vec::new();
            d.decode(file, &mut out).unwrap();
            let want: Vec<u8> = grey.iter().flat_map(|&g| [g; 3]).collect();
            assert_eq!(out, want);
            // Chunks libpng computes the grey otherwise with are refused, named; others not.
            for (name, data, why) in [
                (b"gAMA", &45455u32.to_be_bytes()[..], "gamma"),
                (b"sRGB", &[0][..], "gamma"),
                (b"tRNS", &[0, 7, 0, 7, 0, 7][..], "transparent colour"),
            ] {
                match d.decode(&with_chunk(file, name, data), &mut out) {
                    Err(DecodeError::Unsupported { reason, .. }) => {
                        assert!(reason.contains(why), "{reason}")
                    }
                    other => panic!("{name:?}: {other:?}"),
                }
            }
            let physical = with_chunk(file, b"pHYs", &[0, 0, 11, 19, 0, 0, 11, 19, 1]);
            assert!(d.decode(&physical, &mut out).is_ok());
        }
        // A colour read is unchanged by the weights.
        let mut colour = CpuDecoder::default();
        colour.set_png_grey(Some(OPENCV));
        let mut out = Vec::new();
        colour.decode(&files[0], &mut out).unwrap();
        assert_eq!(out, rgb);
    }

    fn encode(img: image::DynamicImage, format: image::ImageFormat) -> Vec<u8> {
        let mut buf = Cursor::new(Vec::new());
        img.write_to(&mut buf, format).unwrap();
        buf.into_inner()
    }

    #[test]
    fn jpeg_decodes_close_to_its_source() {
        let (info, rgb) = decode(&testing::gradient_jpeg(40, 24, 95)).unwrap();
        assert_eq!(
            (info.format, info.width, info.height),
            (ImageFormat::Jpeg, 40, 24)
        );
        let src = testing::gradient_rgb(40, 24);
        let mad: f64 = rgb
            .iter()
            .zip(&src)
            .map(|(a, b)| (*a as f64 - *b as f64).abs())
            .sum::<f64>()
            / src.len() as f64;
        assert!(mad < 4.0, "mean abs diff {mad}");
    }

    #[test]
    fn png_rgba_and_gray_become_rgb() {
        let rgb = image::RgbImage::from_raw(5, 3, testing::gradient_rgb(5, 3)).unwrap();
        let rgba = image::DynamicImage::ImageRgb8(rgb.clone()).to_rgba8();
        let (_, out) = decode(&encode(rgba.into(), image::ImageFormat::Png)).unwrap();
        assert_eq!(
            out,
            rgb.as_raw().as_slice(),
            "alpha must be dropped, colours kept exactly"
        );
        let gray = image::DynamicImage::ImageRgb8(rgb).to_luma8();
        let (_, out) = decode(&encode(gray.clone().into(), image::ImageFormat::Png)).unwrap();
        for (i, px) in out.chunks(3).enumerate() {
            assert_eq!(px, [gray.as_raw()[i]; 3]);
        }
    }

    /// Pillow's `convert("RGB")` of 16-bit PNGs (checked against Pillow 13 by hand): grey is
    /// clipped at 255, colour and grey with alpha keep the high byte.
    #[test]
    fn a_16_bit_png_becomes_rgb_as_pillow_converts_it() {
        let values: [u16; 4] = [0x0042, 0x0180, 0x12FF, 0xFFFF];
        let grey = image::ImageBuffer::<image::Luma<u16>, _>::from_raw(4, 1, values.to_vec());
        let (_, out) = decode(&encode(grey.unwrap().into(), image::ImageFormat::Png)).unwrap();
        assert_eq!(
            out,
            [0x42, 0x42, 0x42, 255, 255, 255, 255, 255, 255, 255, 255, 255]
        );
        let rgb: Vec<u16> = values
            .iter()
            .flat_map(|&v| [v, v / 2, 0xFFFF - v])
            .collect();
        let rgb = image::ImageBuffer::<image::Rgb<u16>, _>::from_raw(4, 1, rgb.clone());
        let (_, out) = decode(&encode(rgb.unwrap().into(), image::ImageFormat::Png)).unwrap();
        let high: Vec<u8> = values
            .iter()
            .flat_map(|&v| [v >> 8, (v / 2) >> 8, (0xFFFF - v) >> 8].map(|b| b as u8))
            .collect();
        assert_eq!(out, high);
        let la: Vec<u16> = values.iter().flat_map(|&v| [v, 7]).collect();
        let la = image::ImageBuffer::<image::LumaA<u16>, _>::from_raw(4, 1, la);
        let (_, out) = decode(&encode(la.unwrap().into(), image::ImageFormat::Png)).unwrap();
        assert_eq!(out, [0, 0, 0, 1, 1, 1, 0x12, 0x12, 0x12, 255, 255, 255]);
    }

    #[test]
    fn grayscale_jpeg_is_replicated_to_three_channels() {
        let gray = image::DynamicImage::ImageRgb8(
            image::RgbImage::from_raw(16, 16, testing::gradient_rgb(16, 16)).unwrap(),
        )
        .to_luma8();
        let (_, out) = decode(&encode(gray.into(), image::ImageFormat::Jpeg)).unwrap();
        assert!(out.chunks(3).all(|p| p[0] == p[1] && p[1] == p[2]));
    }

    #[test]
    fn webp_lossless_round_trips() {
        let rgb = image::RgbImage::from_raw(7, 5, testing::gradient_rgb(7, 5)).unwrap();
        let (info, out) = decode(&encode(rgb.clone().into(), image::ImageFormat::WebP)).unwrap();
        assert_eq!(info.format, ImageFormat::WebP);
        assert_eq!(out, rgb.into_raw());
    }

    #[test]
    fn one_call_decode_equals_probe_then_decode_into() {
        let rgb = image::RgbImage::from_raw(9, 6, testing::gradient_rgb(9, 6)).unwrap();
        let gray = image::DynamicImage::ImageRgb8(rgb.clone()).to_luma8();
        let files = [
            testing::gradient_jpeg(40, 24, 95),
            encode(gray.into(), image::ImageFormat::Jpeg),
            encode(rgb.clone().into(), image::ImageFormat::Png),
            encode(rgb.into(), image::ImageFormat::WebP),
        ];
        // A reused buffer longer than any of these images: it keeps its length, and the image
        // is its first `rgb_len()` bytes.
        let mut out = vec![7u8; 10_000];
        let mut d = CpuDecoder::default();
        for file in &files {
            let (info, two_step) = decode(file).unwrap();
            assert_eq!(d.decode(file, &mut out).unwrap(), info);
            assert_eq!(out.len(), 10_000);
            assert_eq!(&out[..info.rgb_len()], &two_step[..]);
        }
        // A buffer that is too short grows to exactly the image.
        let mut short = Vec::new();
        let info = d.decode(&files[0], &mut short).unwrap();
        assert_eq!(short.len(), info.rgb_len());
    }

    #[test]
    fn one_call_decode_reports_what_probe_reports() {
        let jpeg = testing::gradient_jpeg(64, 64, 90);
        let mut huge = testing::gradient_jpeg(8, 8, 90);
        let sof = huge.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
        huge[sof + 5..sof + 9].copy_from_slice(&[0xEA, 0x60, 0xEA, 0x60]);
        let cases: [&[u8]; 4] = [&jpeg[..jpeg.len() - 2], &huge, b"", b"hello world"];
        for bytes in cases {
            let probed = CpuDecoder::default().probe(bytes).unwrap_err();
            let decoded = CpuDecoder::default()
                .decode(bytes, &mut Vec::new())
                .unwrap_err();
            assert_eq!(decoded.reason(), probed.reason(), "{decoded} / {probed}");
        }
    }

    #[test]
    fn truncated_jpeg_is_an_error_not_a_grey_image() {
        let jpeg = testing::gradient_jpeg(64, 64, 90);
        let err = decode(&jpeg[..jpeg.len() * 2 / 3]).unwrap_err();
        assert_eq!(err.reason(), "truncated", "{err}");
    }

    #[test]
    fn empty_and_unknown_inputs_are_named() {
        assert_eq!(decode(b"").unwrap_err().reason(), "empty");
        assert_eq!(
            decode(b"hello world").unwrap_err().reason(),
            "unknown-format"
        );
    }

    #[test]
    fn huge_claimed_size_is_rejected_before_decoding() {
        // A real JPEG header whose frame size is patched to 60000x60000.
        let mut jpeg = testing::gradient_jpeg(8, 8, 90);
        let sof = jpeg.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
        jpeg[sof + 5..sof + 9].copy_from_slice(&[0xEA, 0x60, 0xEA, 0x60]);
        let err = CpuDecoder::default().probe(&jpeg).unwrap_err();
        assert_eq!(err.reason(), "too-large", "{err}");
    }

    #[test]
    fn every_prefix_of_a_jpeg_fails_cleanly() {
        let jpeg = testing::gradient_jpeg(33, 17, 80);
        for cut in 0..jpeg.len() - 1 {
            assert!(
                decode(&jpeg[..cut]).is_err(),
                "prefix of {cut} bytes decoded"
            );
        }
    }
}
