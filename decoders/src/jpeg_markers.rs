//! A minimal walk over a JPEG's marker segments.
//!
//! zune-jpeg decodes a truncated file without complaint and fills the missing rows with grey,
//! which would feed half-images to training. [`check_complete`] finds the first start-of-scan
//! and requires an end-of-image marker after it. Inside entropy-coded data every `0xFF` byte is
//! followed by `0x00` or a restart marker, so a `FF D9` after the first scan can only be the real
//! end of the image (or the end of a later progressive scan sequence).

/// Why a JPEG's marker structure is incomplete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerError {
    /// No start-of-image marker at offset 0.
    NoSoi,
    /// The headers end before a start-of-scan marker.
    NoScan,
    /// A segment's length runs past the end of the data.
    SegmentOverrun,
    /// No end-of-image marker after the first scan.
    NoEoi,
}

impl From<MarkerError> for crate::DecodeError {
    /// An incomplete marker structure is a truncated JPEG.
    fn from(e: MarkerError) -> Self {
        Self::Truncated {
            format: crate::ImageFormat::Jpeg,
            detail: e.detail(),
        }
    }
}

impl MarkerError {
    /// A short description.
    pub fn detail(self) -> &'static str {
        match self {
            Self::NoSoi => "no start-of-image marker",
            Self::NoScan => "headers end before the first scan",
            Self::SegmentOverrun => "a header segment runs past the end of the file",
            Self::NoEoi => "no end-of-image marker after the image data",
        }
    }
}

/// Returns the offset of the first byte after the first SOS segment's header.
///
/// # Errors
/// The marker structure ends or breaks before a start-of-scan.
pub fn first_scan_offset(bytes: &[u8]) -> Result<usize, MarkerError> {
    if !bytes.starts_with(&[0xFF, 0xD8]) {
        return Err(MarkerError::NoSoi);
    }
    let mut pos = 2;
    loop {
        // Skip fill bytes; a marker is 0xFF followed by a non-0xFF code.
        while pos < bytes.len() && bytes[pos] == 0xFF {
            pos += 1;
        }
        if pos >= bytes.len() {
            return Err(MarkerError::NoScan);
        }
        if bytes[pos - 1] != 0xFF {
            // Garbage between segments: not a marker where one must be.
            return Err(MarkerError::NoScan);
        }
        let code = bytes[pos];
        pos += 1;
        match code {
            // Standalone markers carry no length.
            0x01 | 0xD0..=0xD7 => continue,
            0xD8 | 0xD9 => return Err(MarkerError::NoScan),
            _ => {}
        }
        let len_bytes = bytes.get(pos..pos + 2).ok_or(MarkerError::SegmentOverrun)?;
        let len = usize::from(u16::from_be_bytes([len_bytes[0], len_bytes[1]]));
        if len < 2 {
            return Err(MarkerError::SegmentOverrun);
        }
        let end = pos.checked_add(len).ok_or(MarkerError::SegmentOverrun)?;
        if end > bytes.len() {
            return Err(MarkerError::SegmentOverrun);
        }
        pos = end;
        if code == 0xDA {
            return Ok(pos);
        }
    }
}

/// Checks that `bytes` holds a whole JPEG: a start-of-scan and, after it, an end-of-image.
///
/// # Errors
/// The first structural problem found.
pub fn check_complete(bytes: &[u8]) -> Result<(), MarkerError> {
    check_end_after(bytes, first_scan_offset(bytes)?)
}

/// Checks that an end-of-image marker follows the scan data that starts at offset `scan` (what
/// [`first_scan_offset`] returns, or what a header parser that walked the same markers found):
/// [`check_complete`] without walking the headers again.
///
/// # Errors
/// [`MarkerError::NoEoi`], also for a `scan` past the end of `bytes`.
pub fn check_end_after(bytes: &[u8], scan: usize) -> Result<(), MarkerError> {
    // The EOI is almost always the last two bytes; scan backwards so trailing garbage is cheap.
    let tail = bytes.get(scan..).unwrap_or_default();
    if tail.windows(2).rev().any(|w| w == [0xFF, 0xD9]) {
        Ok(())
    } else {
        Err(MarkerError::NoEoi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_jpeg_passes_and_every_truncation_fails() {
        let jpeg = crate::testing::tiny_jpeg();
        assert_eq!(check_complete(&jpeg), Ok(()));
        for cut in 0..jpeg.len() - 1 {
            assert!(
                check_complete(&jpeg[..cut]).is_err(),
                "truncated at {cut} passed"
            );
        }
    }

    #[test]
    fn the_end_check_from_a_known_scan_offset_agrees_with_the_whole_walk() {
        let jpeg = crate::testing::tiny_jpeg();
        let scan = first_scan_offset(&jpeg).unwrap();
        for cut in scan..=jpeg.len() {
            assert_eq!(
                check_end_after(&jpeg[..cut], scan),
                check_complete(&jpeg[..cut]),
                "cut at {cut}"
            );
        }
        assert_eq!(
            check_end_after(&jpeg, jpeg.len() + 5),
            Err(MarkerError::NoEoi)
        );
    }

    #[test]
    fn non_jpeg_has_no_soi() {
        assert_eq!(check_complete(b"\x89PNG\r\n"), Err(MarkerError::NoSoi));
        assert_eq!(check_complete(b""), Err(MarkerError::NoSoi));
    }

    #[test]
    fn segment_length_past_end_is_an_overrun() {
        assert_eq!(
            first_scan_offset(&[0xFF, 0xD8, 0xFF, 0xE0, 0x40, 0x00, 1, 2]),
            Err(MarkerError::SegmentOverrun)
        );
    }
}
