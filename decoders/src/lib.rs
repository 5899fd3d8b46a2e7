//! Image decoders for hpuload.
//!
//! Every decoder implements [`Decode`], a two-step contract in the style of the `image` crate:
//! first [`Decode::probe`] reads only the headers and says what the image is (format, size and
//! therefore the number of bytes the decoded image needs), then [`Decode::decode_into`] writes the
//! whole image as interleaved 8-bit RGB into a buffer that the caller owns (a pinned batch
//! buffer's scratch, a device buffer). This crate knows nothing of pinned memory or devices.
//!
//! ```
//! use hpuload_decoders::{CpuDecoder, Decode};
//! # fn main() -> Result<(), hpuload_decoders::DecodeError> {
//! # let bytes = hpuload_decoders::testing::tiny_jpeg();
//! let mut decoder = CpuDecoder::default();
//! let info = decoder.probe(&bytes)?;
//! let mut rgb = vec![0u8; info.rgb_len()];
//! decoder.decode_into(&bytes, &info, &mut rgb)?;
//! # Ok(())
//! # }
//! ```
//!
//! Untrusted bytes never panic a decoder: every failure is a [`DecodeError`] that says what is
//! wrong with the data (empty, truncated, too large, corrupt, unknown format).

mod cpu;
mod error;
pub mod jpeg;
pub mod jpeg_markers;
mod netpbm;
pub mod orientation;
#[doc(hidden)]
pub mod testing;

pub use cpu::CpuDecoder;
pub use error::DecodeError;
pub use jpeg::JpegDecoder;

/// A container format this crate can identify from the first bytes of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ImageFormat {
    /// JPEG / JFIF (the CPU decoder takes every process Pillow reads).
    Jpeg,
    /// PNG, any bit depth and colour type.
    Png,
    /// WebP, lossy or lossless.
    WebP,
    /// Windows bitmap (BMP).
    Bmp,
    /// Netpbm: PBM, PGM and PPM, binary or plain.
    Pnm,
}

impl ImageFormat {
    /// Identifies the format of a file's bytes.
    ///
    /// # Errors
    /// [`DecodeError::Empty`] for no bytes, [`DecodeError::UnknownFormat`] for unknown magic.
    pub fn identify(bytes: &[u8]) -> Result<Self, DecodeError> {
        if bytes.is_empty() {
            return Err(DecodeError::Empty);
        }
        Self::sniff(bytes).ok_or_else(|| DecodeError::UnknownFormat {
            magic: bytes[..bytes.len().min(8)].to_vec(),
        })
    }

    /// Identifies the format from the magic bytes at the start of `bytes`.
    pub fn sniff(bytes: &[u8]) -> Option<Self> {
        // A file shorter than a signature that it starts like is that format, truncated: the
        // decoder then says "truncated", not "unknown format".
        let signature =
            |sig: &[u8]| bytes.starts_with(sig) || (!bytes.is_empty() && sig.starts_with(bytes));
        if signature(&[0xFF, 0xD8, 0xFF]) {
            Some(Self::Jpeg)
        } else if signature(b"\x89PNG\r\n\x1a\n") {
            Some(Self::Png)
        } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
            Some(Self::WebP)
        } else if bytes.starts_with(b"BM") {
            Some(Self::Bmp)
        } else if bytes.len() >= 3
            && bytes[0] == b'P'
            && (b'1'..=b'6').contains(&bytes[1])
            && bytes[2].is_ascii_whitespace()
        {
            Some(Self::Pnm)
        } else {
            None
        }
    }
}

impl std::fmt::Display for ImageFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Jpeg => "JPEG",
            Self::Png => "PNG",
            Self::WebP => "WebP",
            Self::Bmp => "BMP",
            Self::Pnm => "PNM",
        })
    }
}

/// What [`Decode::probe`] learns from the headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageInfo {
    /// The container format.
    pub format: ImageFormat,
    /// Width in pixels (never 0).
    pub width: u32,
    /// Height in pixels (never 0).
    pub height: u32,
}

impl ImageInfo {
    /// Bytes needed for the decoded image as interleaved 8-bit RGB.
    pub fn rgb_len(&self) -> usize {
        self.width as usize * self.height as usize * 3
    }
}

/// Resource limits that guard against decompression bombs.
///
/// A header can claim any size; `probe` rejects images over these limits with
/// [`DecodeError::TooLarge`] before any pixel memory is reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest accepted `width * height`. Default: 100 million pixels (a 12-megapixel photo
    /// passes with room to spare; a 60000x60000 header does not).
    pub max_pixels: u64,
    /// Largest accepted width or height. Default: 32768.
    pub max_dimension: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_pixels: 100_000_000,
            max_dimension: 32_768,
        }
    }
}

impl Limits {
    /// Checks a claimed size against the limits.
    ///
    /// # Errors
    /// [`DecodeError::TooLarge`] when the size exceeds a limit; [`DecodeError::Corrupt`] for a
    /// zero width or height.
    pub fn check(&self, format: ImageFormat, width: u32, height: u32) -> Result<(), DecodeError> {
        if width == 0 || height == 0 {
            return Err(DecodeError::corrupt(
                format,
                format!("image claims size {width}x{height}"),
            ));
        }
        let pixels = u64::from(width) * u64::from(height);
        if width > self.max_dimension || height > self.max_dimension || pixels > self.max_pixels {
            return Err(DecodeError::TooLarge {
                width,
                height,
                limits: *self,
            });
        }
        Ok(())
    }
}

/// The decoder contract: describe, then fill.
///
/// Call [`probe`](Decode::probe) first; it reads only headers and is cheap. Then call
/// [`decode_into`](Decode::decode_into) with the same bytes, the probed info and a buffer of
/// exactly [`ImageInfo::rgb_len`] bytes. Decoders keep reusable scratch memory in `self`, so
/// one decoder per thread decodes any number of images without growing.
pub trait Decode {
    /// Reads the headers of `bytes` and returns what the image is.
    ///
    /// # Errors
    /// Unknown format, empty input, corrupt headers, or a size beyond the decoder's [`Limits`].
    fn probe(&mut self, bytes: &[u8]) -> Result<ImageInfo, DecodeError>;

    /// Decodes the whole image as interleaved 8-bit RGB (grayscale and CMYK are converted,
    /// alpha is dropped) into `out`, which must be exactly `info.rgb_len()` bytes.
    ///
    /// # Errors
    /// Corrupt or truncated data, or an `out` of the wrong length. On error, `out` holds
    /// unspecified bytes.
    fn decode_into(
        &mut self,
        bytes: &[u8],
        info: &ImageInfo,
        out: &mut [u8],
    ) -> Result<(), DecodeError>;

    /// Probes and decodes in one call into the first [`rgb_len`](ImageInfo::rgb_len) bytes of
    /// `out`, which grows when it is shorter and is never shrunk (a reused `Vec` stops
    /// allocating, and is not cleared, once it has grown). Decoders that can parse the headers
    /// only once here; the pixels equal [`probe`](Decode::probe) then
    /// [`decode_into`](Decode::decode_into).
    ///
    /// # Errors
    /// What either step reports. On error, `out` holds unspecified bytes.
    fn decode(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<ImageInfo, DecodeError> {
        let info = self.probe(bytes)?;
        self.decode_into(bytes, &info, rgb_prefix(out, &info))?;
        Ok(info)
    }
}

/// The first `info.rgb_len()` bytes of `out`, which grows to them when it is shorter (and is
/// never shrunk or cleared): where [`Decode::decode`] writes.
fn rgb_prefix<'a>(out: &'a mut Vec<u8>, info: &ImageInfo) -> &'a mut [u8] {
    let len = info.rgb_len();
    if out.len() < len {
        out.resize(len, 0);
    }
    &mut out[..len]
}
