//! A walk over the page headers of a Parquet column chunk, before parquet's own readers see
//! them. parquet allocates what a page header claims (the page's decompressed size, a
//! dictionary's value count) before it reads the page, so one damaged header can ask for
//! gigabytes: the `hf_tables` fuzz target found both. Page headers are Thrift compact-protocol
//! structs; this reads the few fields the checks need and skips every other field.

/// The largest decompressed page accepted. Writers cut pages at about 1 MiB (pyarrow's
/// `data_page_size`), or hold one value in a page when the value is larger, so a page this
/// large would hold a single image of 256 MiB.
pub(super) const MAX_PAGE_BYTES: u64 = 256 << 20;

/// Deepest nesting of structs, lists and maps accepted in a header (a real one nests 3 deep).
const MAX_DEPTH: u32 = 16;

/// Why a column chunk's pages are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum PageError {
    /// A header does not parse.
    #[error("page {page}'s header: {why}")]
    Header { page: usize, why: HeaderError },
    #[error("page {page}'s header gives a negative size")]
    NegativeSize { page: usize },
    #[error("page {page} claims {bytes} bytes decompressed, more than the {} MiB accepted", MAX_PAGE_BYTES >> 20)]
    TooLarge { page: usize, bytes: i64 },
    #[error("dictionary page {page} claims {values} values in {bytes} bytes")]
    Dictionary {
        page: usize,
        values: i64,
        bytes: i64,
    },
    #[error("page {page} ({bytes} bytes) runs past its column chunk")]
    PastChunk { page: usize, bytes: i64 },
}

/// Why a page header does not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(super) enum HeaderError {
    #[error("it ends early")]
    EndsEarly,
    #[error("a varint overflows 64 bits")]
    VarintOverflow,
    #[error("it nests too deeply")]
    TooDeep,
    #[error("unknown field type {0}")]
    UnknownType(u8),
    #[error("it gives no page sizes")]
    NoSizes,
}

/// What a page header says that the checks use.
#[derive(Debug, Default, PartialEq, Eq)]
struct PageHeader {
    uncompressed: i64,
    compressed: i64,
    /// A dictionary page's value count.
    dictionary_values: Option<i64>,
}

/// Checks every page of the column chunk `chunk` (its bytes, from its first page to its end):
/// each header parses, each page lies inside the chunk, no page decompresses to more than
/// [`MAX_PAGE_BYTES`], and a dictionary page's values fit its decompressed size at
/// `value_width` bytes each at least (0 when a value may take no bytes).
pub(super) fn check_chunk(chunk: &[u8], value_width: u64) -> Result<(), PageError> {
    let mut at = 0usize;
    let mut page = 0usize;
    while at < chunk.len() {
        let mut input = Input {
            bytes: &chunk[at..],
            at: 0,
        };
        let header = read_header(&mut input).map_err(|why| PageError::Header { page, why })?;
        if header.compressed < 0 || header.uncompressed < 0 {
            return Err(PageError::NegativeSize { page });
        }
        if header.uncompressed as u64 > MAX_PAGE_BYTES {
            return Err(PageError::TooLarge {
                page,
                bytes: header.uncompressed,
            });
        }
        if let Some(values) = header.dictionary_values {
            // A negative count is as wrong as one too large for the page.
            let need = u64::try_from(values)
                .unwrap_or(u64::MAX)
                .saturating_mul(value_width);
            if need > header.uncompressed as u64 || values < 0 {
                return Err(PageError::Dictionary {
                    page,
                    values,
                    bytes: header.uncompressed,
                });
            }
        }
        let end = (at + input.at)
            .checked_add(header.compressed as usize)
            .filter(|&end| end <= chunk.len())
            .ok_or(PageError::PastChunk {
                page,
                bytes: header.compressed,
            })?;
        at = end;
        page += 1;
    }
    Ok(())
}

struct Input<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> Result<u8, HeaderError> {
        let b = *self.bytes.get(self.at).ok_or(HeaderError::EndsEarly)?;
        self.at += 1;
        Ok(b)
    }

    fn skip(&mut self, n: u64) -> Result<(), HeaderError> {
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.at.checked_add(n))
            .filter(|&end| end <= self.bytes.len())
            .ok_or(HeaderError::EndsEarly)?;
        self.at = end;
        Ok(())
    }

    fn varint(&mut self) -> Result<u64, HeaderError> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                return Err(HeaderError::VarintOverflow);
            }
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(HeaderError::VarintOverflow)
    }

    /// A zigzag-encoded integer.
    fn int(&mut self) -> Result<i64, HeaderError> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }
}

// The compact protocol's type codes.
const TRUE: u8 = 1;
const FALSE: u8 = 2;
const BYTE: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;

/// The next field's `(id, type)` in a struct, `None` at its end.
fn field(input: &mut Input<'_>, last: &mut i64) -> Result<Option<(i64, u8)>, HeaderError> {
    let b = input.byte()?;
    if b == 0 {
        return Ok(None);
    }
    let (delta, kind) = (b >> 4, b & 0x0f);
    *last = if delta == 0 {
        input.int()?
    } else {
        *last + i64::from(delta)
    };
    Ok(Some((*last, kind)))
}

/// Skips one value of type `kind` (`in_list`: a boolean is a byte of its own).
fn skip_value(
    input: &mut Input<'_>,
    kind: u8,
    in_list: bool,
    depth: u32,
) -> Result<(), HeaderError> {
    if depth > MAX_DEPTH {
        return Err(HeaderError::TooDeep);
    }
    match kind {
        TRUE | FALSE if !in_list => Ok(()),
        TRUE | FALSE | BYTE => input.skip(1),
        I16 | I32 | I64 => input.varint().map(drop),
        DOUBLE => input.skip(8),
        BINARY => {
            let n = input.varint()?;
            input.skip(n)
        }
        LIST | SET => {
            let b = input.byte()?;
            let (short, element) = (b >> 4, b & 0x0f);
            let n = if short == 15 {
                input.varint()?
            } else {
                u64::from(short)
            };
            for _ in 0..n {
                skip_value(input, element, true, depth + 1)?;
            }
            Ok(())
        }
        MAP => {
            let n = input.varint()?;
            if n > 0 {
                let kinds = input.byte()?;
                for _ in 0..n {
                    skip_value(input, kinds >> 4, true, depth + 1)?;
                    skip_value(input, kinds & 0x0f, true, depth + 1)?;
                }
            }
            Ok(())
        }
        STRUCT => {
            let mut last = 0;
            while let Some((_, kind)) = field(input, &mut last)? {
                skip_value(input, kind, false, depth + 1)?;
            }
            Ok(())
        }
        other => Err(HeaderError::UnknownType(other)),
    }
}

fn read_header(input: &mut Input<'_>) -> Result<PageHeader, HeaderError> {
    let mut header = PageHeader::default();
    let (mut seen_sizes, mut last) = (0, 0);
    while let Some((id, kind)) = field(input, &mut last)? {
        match (id, kind) {
            (2, I32) => {
                header.uncompressed = input.int()?;
                seen_sizes |= 1;
            }
            (3, I32) => {
                header.compressed = input.int()?;
                seen_sizes |= 2;
            }
            (7, STRUCT) => {
                let mut last = 0;
                while let Some((id, kind)) = field(input, &mut last)? {
                    if (id, kind) == (1, I32) {
                        header.dictionary_values = Some(input.int()?);
                    } else {
                        skip_value(input, kind, false, 1)?;
                    }
                }
            }
            _ => skip_value(input, kind, false, 0)?,
        }
    }
    if seen_sizes != 3 {
        return Err(HeaderError::NoSizes);
    }
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header as the compact protocol writes it: type, sizes, then a dictionary page
    /// header when `dictionary` is given.
    fn header(uncompressed: i32, compressed: i32, dictionary: Option<i32>) -> Vec<u8> {
        fn zigzag(v: i32, out: &mut Vec<u8>) {
            let mut z = ((v << 1) ^ (v >> 31)) as u32;
            while z >= 0x80 {
                out.push((z as u8) | 0x80);
                z >>= 7;
            }
            out.push(z as u8);
        }
        let mut out = vec![0x15];
        zigzag(if dictionary.is_some() { 2 } else { 0 }, &mut out);
        out.push(0x15);
        zigzag(uncompressed, &mut out);
        out.push(0x15);
        zigzag(compressed, &mut out);
        if let Some(n) = dictionary {
            out.push(0x4c); // field 7 (delta 4 from 3), a struct
            out.push(0x15);
            zigzag(n, &mut out);
            out.push(0x15);
            zigzag(0, &mut out);
            out.push(0x11); // is_sorted = true, a boolean in its type nibble
            out.push(0);
        }
        out.push(0);
        out
    }

    #[test]
    fn pages_that_fit_their_chunk_pass() {
        let mut chunk = header(40, 40, Some(10));
        chunk.extend([0; 40]);
        chunk.extend(header(100, 7, None));
        chunk.extend([0; 7]);
        check_chunk(&chunk, 4).unwrap();
    }

    #[test]
    fn a_page_claiming_gigabytes_is_refused_before_anything_allocates() {
        let mut chunk = header(2_013_265_920, 5, None);
        chunk.extend([0; 5]);
        let e = check_chunk(&chunk, 4).unwrap_err();
        assert_eq!(
            e,
            PageError::TooLarge {
                page: 0,
                bytes: 2_013_265_920
            }
        );
        assert!(
            e.to_string().contains("page 0 claims 2013265920 bytes"),
            "{e}"
        );
    }

    #[test]
    fn a_dictionary_claiming_more_values_than_its_bytes_is_refused() {
        let mut chunk = header(40, 40, Some(1 << 30));
        chunk.extend([0; 40]);
        let e = check_chunk(&chunk, 4).unwrap_err();
        assert_eq!(
            e,
            PageError::Dictionary {
                page: 0,
                values: 1 << 30,
                bytes: 40
            }
        );
    }

    #[test]
    fn a_page_past_the_chunk_end_or_a_cut_header_is_named() {
        let mut chunk = header(40, 40, None);
        chunk.extend([0; 39]);
        assert_eq!(
            check_chunk(&chunk, 4).unwrap_err(),
            PageError::PastChunk { page: 0, bytes: 40 }
        );
        let cut = &header(40, 40, None)[..3];
        let e = check_chunk(cut, 4).unwrap_err();
        assert_eq!(
            e,
            PageError::Header {
                page: 0,
                why: HeaderError::EndsEarly
            }
        );
        assert_eq!(e.to_string(), "page 0's header: it ends early");
    }
}
