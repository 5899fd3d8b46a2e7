use crate::{ImageFormat, Limits};

/// Why a decoder could not produce an image. Every variant blames the data, not the caller,
/// except [`DecodeError::BufferSize`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input has no bytes at all.
    #[error("empty file")]
    Empty,
    /// The first bytes match no format this crate decodes.
    #[error("not a JPEG, PNG or WebP image (starts with {magic:02x?})")]
    UnknownFormat {
        /// Up to the first 8 bytes of the input.
        magic: Vec<u8>,
    },
    /// The data ends before the image does.
    #[error("truncated {format} data: {detail}")]
    Truncated {
        /// The format being decoded.
        format: ImageFormat,
        /// What was missing.
        detail: &'static str,
    },
    /// The header claims a size beyond the decoder's limits (a decompression-bomb guard).
    #[error("{width}x{height} exceeds the decoder limits ({} pixels, {} per side)", limits.max_pixels, limits.max_dimension)]
    TooLarge {
        /// Claimed width.
        width: u32,
        /// Claimed height.
        height: u32,
        /// The limits that rejected it.
        limits: Limits,
    },
    /// The data is malformed.
    #[error("corrupt {format} data: {source}")]
    Corrupt {
        /// The format being decoded.
        format: ImageFormat,
        /// The underlying decoder's description.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The data is valid but outside what this decoder supports (the media engine's fixed
    /// capability set); another decoder may handle it.
    #[error("unsupported {format}: {reason}")]
    Unsupported {
        /// The format.
        format: ImageFormat,
        /// What is not supported, stable for counting by reason.
        reason: &'static str,
    },
    /// A caller-supplied parameter is invalid.
    #[error("invalid parameter: {0}")]
    Parameter(&'static str),
    /// The caller passed an output buffer of the wrong length.
    #[error("output buffer holds {got} bytes, the image needs {expected}")]
    BufferSize {
        /// Bytes the image needs.
        expected: usize,
        /// Bytes the caller provided.
        got: usize,
    },
}

impl DecodeError {
    /// Corrupt `format` data, for the reason `source` gives.
    pub fn corrupt(
        format: ImageFormat,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        Self::Corrupt {
            format,
            source: source.into(),
        }
    }

    /// A short stable name for the kind of failure, for counting failures by reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::UnknownFormat { .. } => "unknown-format",
            Self::Truncated { .. } => "truncated",
            Self::TooLarge { .. } => "too-large",
            Self::Corrupt { .. } => "corrupt",
            Self::Unsupported { .. } => "unsupported",
            Self::Parameter(_) => "parameter",
            Self::BufferSize { .. } => "buffer-size",
        }
    }
}
