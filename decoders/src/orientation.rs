//! The EXIF orientation of an image, as Pillow reads it (`Image.getexif()`'s tag 0x0112,
//! what `ImageOps.exif_transpose` turns an image by), and the turn itself.
//!
//! Where Pillow finds the Exif data:
//! - JPEG: the APP1 segments that start `Exif\0\0` (a second one's bytes appended to the
//!   first's); else the orientation in the last XMP packet (an APP1 segment that starts with
//!   Adobe's namespace);
//! - PNG: the `eXIf` chunk (or a `tEXt` chunk keyed `exif`: the last of the two), else the
//!   hex dump ImageMagick writes in a `tEXt` or `zTXt` chunk keyed `Raw profile type exif`;
//!   else the orientation in the last `iTXt` chunk keyed `XML:com.adobe.xmp` (compressed or
//!   not). Chunks after the image data count too (`datasets` loads the image before it asks);
//! - WebP: the first `EXIF` chunk, else the first `XMP ` chunk.
//!
//! In the Exif data (a TIFF header and its first directory), the first Orientation entry
//! Pillow keeps gives its first value (a number Python finds equal to 2-8 turns the image,
//! `6.0` and the rational `6/1` included); an entry of another type, or another value,
//! is an orientation that turns nothing (and, being there, keeps the XMP one from counting, as
//! in Pillow). Damaged data reads as no orientation: this never fails.
//!
//! torchvision's readers read orientations elsewhere and otherwise:
//! [`torchvision_orientation`].

use crate::jpeg::Window;
use crate::ImageFormat;

/// How a stored image is turned to be seen upright: the EXIF orientation tag's eight values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Orientation {
    /// 1: as stored (also what an image without an orientation, or with a value outside 1-8,
    /// reads as).
    #[default]
    Upright,
    /// 2: mirrored left to right.
    FlipHorizontal,
    /// 3: turned half a turn.
    Rotate180,
    /// 4: mirrored top to bottom.
    FlipVertical,
    /// 5: mirrored along the main diagonal (rows become columns).
    Transpose,
    /// 6: stored a quarter turn anticlockwise; shown turned a quarter turn clockwise
    /// (Pillow's `ROTATE_270`).
    RotateClockwise,
    /// 7: mirrored along the other diagonal.
    Transverse,
    /// 8: stored a quarter turn clockwise; shown turned anticlockwise (Pillow's `ROTATE_90`).
    RotateAnticlockwise,
}

impl Orientation {
    /// The orientation of a tag value; `Upright` for anything outside 1-8.
    pub fn from_tag(value: u64) -> Self {
        match value {
            2 => Self::FlipHorizontal,
            3 => Self::Rotate180,
            4 => Self::FlipVertical,
            5 => Self::Transpose,
            6 => Self::RotateClockwise,
            7 => Self::Transverse,
            8 => Self::RotateAnticlockwise,
            _ => Self::Upright,
        }
    }

    /// The tag value, 1-8.
    pub fn tag(self) -> u8 {
        self as u8 + 1
    }

    /// Whether the turned image's width is the stored one's height.
    pub fn swaps_axes(self) -> bool {
        matches!(
            self,
            Self::Transpose | Self::RotateClockwise | Self::Transverse | Self::RotateAnticlockwise
        )
    }

    /// The `(width, height)` of a stored `width`x`height` image once turned.
    pub fn turned_size(self, width: u32, height: u32) -> (u32, u32) {
        if self.swaps_axes() {
            (height, width)
        } else {
            (width, height)
        }
    }

    /// The window of the stored `width`x`height` image that shows as `window` of the turned
    /// one: the same pixels, so that a resize of it turned by `self` is the resize of
    /// `window` of the turned image (a resampling filter is symmetric, and each output pixel's
    /// centre maps to the mirrored one's).
    pub fn stored_window(self, window: Window, width: u32, height: u32) -> Window {
        let Window {
            left,
            top,
            width: w,
            height: h,
        } = window;
        // The stored axes' spans, before mirroring: columns come from the turned rows where
        // the axes swap.
        let ((x, sw), (y, sh)) = if self.swaps_axes() {
            ((top, h), (left, w))
        } else {
            ((left, w), (top, h))
        };
        let mirrors_x = matches!(
            self,
            Self::FlipHorizontal | Self::Rotate180 | Self::Transverse | Self::RotateAnticlockwise
        );
        let mirrors_y = matches!(
            self,
            Self::Rotate180 | Self::FlipVertical | Self::RotateClockwise | Self::Transverse
        );
        Window {
            left: if mirrors_x {
                f64::from(width) - x - sw
            } else {
                x
            },
            top: if mirrors_y {
                f64::from(height) - y - sh
            } else {
                y
            },
            width: sw,
            height: sh,
        }
    }

    /// Writes the stored `width`x`height` image `src` (`channels` interleaved bytes a pixel)
    /// turned upright into `dst`, laid out at [`Orientation::turned_size`]: the pixels
    /// Pillow's `transpose` gives.
    ///
    /// # Panics
    /// If `src` or `dst` is shorter than `width * height * channels` bytes.
    pub fn turn(self, src: &[u8], width: usize, height: usize, channels: usize, dst: &mut [u8]) {
        let (tw, th) = self.turned_size(width as u32, height as u32);
        let whole = [0, 0, tw as usize, th as usize];
        self.turn_part(src, width, height, channels, whole, dst);
    }

    /// [`Orientation::turn`] of only the turned image's pixels in `part` (`[x0, y0, x1, y1]`,
    /// in the turned image): `dst` is laid out as the whole turned image, and nothing outside
    /// `part` is written nor anything read from `src` but the pixels it shows (the stored
    /// window [`Orientation::stored_window`] gives).
    ///
    /// # Panics
    /// If `src` or `dst` is shorter than `width * height * channels` bytes, or `part` reaches
    /// past the turned image.
    pub fn turn_part(
        self,
        src: &[u8],
        width: usize,
        height: usize,
        channels: usize,
        part: [usize; 4],
        dst: &mut [u8],
    ) {
        let (w, h, c) = (width, height, channels);
        let len = w * h * c;
        let (src, dst) = (&src[..len], &mut dst[..len]);
        let (out_w, out_h) = if self.swaps_axes() { (h, w) } else { (w, h) };
        let [x0, y0, x1, y1] = part;
        assert!(
            x0 <= x1 && x1 <= out_w && y0 <= y1 && y1 <= out_h,
            "{part:?}"
        );
        // The stored pixel each output pixel (x, y) comes from, as (column, row).
        let from: fn(usize, usize, usize, usize) -> (usize, usize) = match self {
            Self::Upright => |x, y, _, _| (x, y),
            Self::FlipHorizontal => |x, y, w, _| (w - 1 - x, y),
            Self::Rotate180 => |x, y, w, h| (w - 1 - x, h - 1 - y),
            Self::FlipVertical => |x, y, _, h| (x, h - 1 - y),
            Self::Transpose => |x, y, _, _| (y, x),
            Self::RotateClockwise => |x, y, _, h| (y, h - 1 - x),
            Self::Transverse => |x, y, w, h| (w - 1 - y, h - 1 - x),
            Self::RotateAnticlockwise => |x, y, w, _| (w - 1 - y, x),
        };
        if x0 == x1 {
            return;
        }
        // Along an output row the stored pixel moves by a fixed step: walk it.
        let at = |x: usize, y: usize| {
            let (sx, sy) = from(x, y, w, h);
            (sy * w + sx) as isize
        };
        for y in y0..y1 {
            let row = &mut dst[(y * out_w + x0) * c..(y * out_w + x1) * c];
            let start = at(x0, y);
            if self == Self::Upright {
                let at = start as usize * c;
                row.copy_from_slice(&src[at..at + row.len()]);
                continue;
            }
            let step = if x1 - x0 > 1 {
                at(x0 + 1, y) - start
            } else {
                0
            };
            if c == 3 {
                walk::<3>(src, row, start, step);
            } else {
                for (x, px) in row.chunks_exact_mut(c).enumerate() {
                    let k = (start + step * x as isize) as usize * c;
                    px.copy_from_slice(&src[k..k + c]);
                }
            }
        }
    }
}

/// Copies `C`-byte pixels of `src` into `row`, the `x`-th from pixel `start + step * x`.
fn walk<const C: usize>(src: &[u8], row: &mut [u8], start: isize, step: isize) {
    let mut k = start;
    for px in row.chunks_exact_mut(C) {
        let at = k as usize * C;
        px.copy_from_slice(&src[at..at + C]);
        k += step;
    }
}

/// The orientation `bytes` (a whole image file) carries, as Pillow reads it; `Upright` for a
/// format without one, for none, and for damaged metadata.
pub fn orientation(bytes: &[u8]) -> Orientation {
    let found = match ImageFormat::sniff(bytes) {
        Some(ImageFormat::Jpeg) => jpeg(bytes),
        Some(ImageFormat::Png) => png(bytes),
        Some(ImageFormat::WebP) => webp(bytes),
        _ => Found::default(),
    };
    found.orientation()
}

/// What an image's metadata holds for its orientation.
#[derive(Default)]
struct Found {
    /// The Exif data (a TIFF header and its directories), with any `Exif\0\0` still before.
    exif: Option<Vec<u8>>,
    /// ImageMagick's hex dump of the Exif data (PNG), used when there is no `exif`.
    raw_profile: Option<Vec<u8>>,
    /// The XMP packet.
    xmp: Option<Vec<u8>>,
}

impl Found {
    fn orientation(&self) -> Orientation {
        let exif = match (&self.exif, &self.raw_profile) {
            (Some(exif), _) => Some(exif.clone()),
            (None, Some(dump)) => raw_profile(dump),
            (None, None) => None,
        };
        match exif.as_deref().map(tiff_orientation) {
            Some(Tag::Value(v)) => Orientation::from_tag(v),
            Some(Tag::Other) => Orientation::Upright,
            Some(Tag::Absent) | None => self
                .xmp
                .as_deref()
                .map_or(Orientation::Upright, xmp_orientation),
        }
    }
}

/// The Orientation entry of Exif data.
#[derive(Debug, PartialEq, Eq)]
enum Tag {
    /// No entry (XMP may then say).
    Absent,
    /// An entry that is no integer (or holds none): it turns nothing.
    Other,
    /// An integer entry's first value.
    Value(u64),
}

/// The Orientation entry (0x0112) of Exif data's first directory, as Pillow's
/// `ImageFileDirectory_v2` loads it: a leading `Exif\0\0` (once or twice) skipped, the
/// entries read until the directory is cut short or an entry's values lie past the data's
/// end, the first entry for the tag that Pillow keeps (one of a type it knows, with a value)
/// giving its first value.
fn tiff_orientation(data: &[u8]) -> Tag {
    let mut tiff = data;
    for _ in 0..2 {
        tiff = tiff.strip_prefix(b"Exif\0\0").unwrap_or(tiff);
    }
    let big = match tiff.get(..4) {
        Some(b"II\x2a\x00") | Some(b"II\x00\x2a") => false,
        Some(b"MM\x00\x2a") | Some(b"MM\x2a\x00") => true,
        _ => return Tag::Absent,
    };
    let u16_at = |at: usize| -> Option<u64> {
        let b = tiff.get(at..at.checked_add(2)?)?;
        Some(u64::from(if big {
            u16::from_be_bytes([b[0], b[1]])
        } else {
            u16::from_le_bytes([b[0], b[1]])
        }))
    };
    let u32_at = |at: usize| -> Option<u64> {
        let b: [u8; 4] = tiff.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(u64::from(if big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }))
    };
    let Some(first) = u32_at(4).and_then(|v| usize::try_from(v).ok()) else {
        return Tag::Absent;
    };
    let Some(count) = u16_at(first) else {
        return Tag::Absent;
    };
    // Bytes of the values held by offset so far: Pillow skips an entry that takes the sum
    // past the data's length, and stops at one whose values lie past its end.
    let mut held: u64 = 0;
    for k in 0..count as usize {
        let e = first + 2 + 12 * k;
        if e + 12 > tiff.len() {
            break; // the directory is cut short: the entries before count
        }
        let (Some(tag), Some(kind), Some(n)) = (u16_at(e), u16_at(e + 2), u32_at(e + 4)) else {
            break;
        };
        // TIFF's types Pillow reads, by unit size; it skips an entry of any other.
        let unit: u64 = match kind {
            1 | 2 | 6 | 7 => 1,
            3 | 8 => 2,
            4 | 9 | 11 | 13 => 4,
            5 | 10 | 12 | 16 => 8,
            _ => continue,
        };
        let size = n * unit;
        let at = if size > 4 {
            held += size;
            if held > tiff.len() as u64 {
                continue;
            }
            match u32_at(e + 8).and_then(|o| usize::try_from(o).ok()) {
                Some(o) if o as u64 + size <= tiff.len() as u64 => o,
                _ => break, // a read past the end: Pillow keeps the entries before
            }
        } else {
            e + 8
        };
        if tag != 0x0112 || size == 0 {
            continue; // another tag, or no value (Pillow keeps no entry)
        }
        // The first value, as Python compares it with the orientations' integer keys.
        let bytes = |len: usize| -> u64 {
            let b = &tiff[at..at + len];
            let mut v = 0u64;
            for i in 0..len {
                let byte = if big { b[i] } else { b[len - 1 - i] };
                v = v << 8 | u64::from(byte);
            }
            v
        };
        let value = match kind {
            3 | 4 | 13 | 16 => Some(bytes(unit as usize)),
            6 | 8 | 9 => {
                let bits = unit * 8;
                let v = bytes(unit as usize);
                (v >> (bits - 1) & 1 == 0).then_some(v)
            }
            11 => exact(f64::from(f32::from_bits(bytes(4) as u32))),
            12 => exact(f64::from_bits(bytes(8))),
            5 | 10 => {
                let (num, den) = (bytes(4) as u32, u32_at(at + 4).unwrap_or(0) as u32);
                let (num, den) = if kind == 10 {
                    (f64::from(num as i32), f64::from(den as i32))
                } else {
                    (f64::from(num), f64::from(den))
                };
                if den == 0.0 {
                    None
                } else {
                    exact(num / den)
                }
            }
            // BYTE, ASCII and UNDEFINED values are bytes or text: no key matches them.
            _ => None,
        };
        return value.map_or(Tag::Other, Tag::Value);
    }
    Tag::Absent
}

/// A float that is a whole number from 0 to 2^32, as an integer (Python's `6.0 == 6`).
fn exact(v: f64) -> Option<u64> {
    (v.fract() == 0.0 && (0.0..=4_294_967_296.0).contains(&v)).then_some(v as u64)
}

/// Pillow's reading of an XMP packet's orientation: the first `tiff:Orientation="N` or
/// `tiff:Orientation>N` with one digit N.
fn xmp_orientation(xmp: &[u8]) -> Orientation {
    const KEY: &[u8] = b"tiff:Orientation";
    let mut from = 0;
    while let Some(k) = memchr::memmem::find(&xmp[from..], KEY) {
        let after = &xmp[from + k + KEY.len()..];
        let digit = match after {
            [b'=', b'"', d, ..] | [b'>', d, ..] if d.is_ascii_digit() => Some(d - b'0'),
            _ => None,
        };
        if let Some(d) = digit {
            return Orientation::from_tag(u64::from(d));
        }
        from += k + 1;
    }
    Orientation::Upright
}

/// ImageMagick's `Raw profile type exif` text: three lines (an empty one, `exif`, the length),
/// then hex digits over any number of lines. `None` when the digits do not make bytes (Pillow
/// raises there).
fn raw_profile(text: &[u8]) -> Option<Vec<u8>> {
    let mut lines = text.split(|&b| b == b'\n');
    for _ in 0..3 {
        lines.next()?;
    }
    let digits: Vec<u8> = lines
        .flatten()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    let hex = |d: u8| (d as char).to_digit(16).map(|v| v as u8);
    digits
        .chunks_exact(2)
        .map(|p| Some(hex(p[0])? << 4 | hex(p[1])?))
        .collect()
}

/// The Exif and XMP APP1 segments of a JPEG's headers (up to the first scan).
fn jpeg(bytes: &[u8]) -> Found {
    const XMP: &[u8] = b"http://ns.adobe.com/xap/1.0/\0";
    let mut found = Found::default();
    let mut pos = 2;
    loop {
        while bytes.get(pos) == Some(&0xFF) && bytes.get(pos + 1) == Some(&0xFF) {
            pos += 1; // fill bytes
        }
        let (Some(&0xFF), Some(&code)) = (bytes.get(pos), bytes.get(pos + 1)) else {
            return found;
        };
        pos += 2;
        match code {
            0x01 | 0xD0..=0xD7 => continue,
            0xD8..=0xDA => return found,
            _ => {}
        }
        let Some(len) = bytes.get(pos..pos + 2) else {
            return found;
        };
        let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
        if len < 2 {
            return found;
        }
        // Pillow reads a segment cut short by the file's end as far as it goes.
        let segment = &bytes[(pos + 2).min(bytes.len())..(pos + len).min(bytes.len())];
        if code == 0xE1 {
            if let Some(tiff) = segment.strip_prefix(b"Exif\0\0") {
                match &mut found.exif {
                    Some(exif) => exif.extend_from_slice(tiff),
                    None => found.exif = Some(segment.to_vec()),
                }
            } else if segment.starts_with(XMP) {
                let packet = &segment[XMP.len()..];
                found.xmp = Some(packet.to_vec());
            }
        }
        pos += len;
    }
}

/// A PNG's chunks, to the end (`IEND`), for Exif, ImageMagick's Exif dump and XMP.
fn png(bytes: &[u8]) -> Found {
    let mut found = Found::default();
    let mut pos = 8;
    while let Some(head) = bytes.get(pos..pos + 8) {
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let kind = &head[4..8];
        let Some(data) = bytes.get(pos + 8..(pos + 8).saturating_add(len)) else {
            return found; // cut short
        };
        let text = || {
            let split = memchr::memchr(0, data)?;
            Some((&data[..split], &data[split + 1..]))
        };
        match kind {
            b"IEND" => return found,
            b"eXIf" => found.exif = Some([&b"Exif\0\0"[..], data].concat()),
            b"tEXt" => match text() {
                Some((b"exif", value)) => found.exif = Some(value.to_vec()),
                Some((b"Raw profile type exif", value)) => {
                    found.raw_profile = Some(value.to_vec());
                }
                None if data == b"exif" => found.exif = Some(Vec::new()),
                _ => {}
            },
            b"zTXt" => {
                if let Some((b"Raw profile type exif", value)) = text() {
                    // Pillow: method 0 or an error; a stream that does not inflate is empty.
                    found.raw_profile = match value.split_first() {
                        Some((0, stream)) => Some(inflate(stream).unwrap_or_default()),
                        Some(_) => return Found::default(),
                        None => Some(Vec::new()),
                    };
                }
            }
            b"iTXt" => {
                if let Some(packet) = text().and_then(|(key, rest)| itxt_xmp(key, rest)) {
                    found.xmp = Some(packet);
                }
            }
            _ => {}
        }
        pos = pos + 12 + len;
    }
    found
}

/// An `iTXt` chunk's text when its key is XMP's (`XML:com.adobe.xmp`), inflated where the
/// chunk says so (`rest`: the flags, language and translated key, then the text).
fn itxt_xmp(key: &[u8], rest: &[u8]) -> Option<Vec<u8>> {
    if key != b"XML:com.adobe.xmp" {
        return None;
    }
    let &[compressed, method, ref rest @ ..] = rest else {
        return None;
    };
    let lang_end = memchr::memchr(0, rest)?;
    let rest = &rest[lang_end + 1..];
    let key_end = memchr::memchr(0, rest)?;
    let text = &rest[key_end + 1..];
    match (compressed, method) {
        (0, _) => Some(text.to_vec()),
        (_, 0) => inflate(text),
        _ => None,
    }
}

/// A zlib stream inflated, up to 64 MiB (Pillow's limit on a text chunk's text).
fn inflate(stream: &[u8]) -> Option<Vec<u8>> {
    miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(stream, 64 << 20).ok()
}

/// A WebP's first `EXIF` and first `XMP ` chunks.
fn webp(bytes: &[u8]) -> Found {
    let mut found = Found::default();
    let mut pos = 12;
    while let Some(head) = bytes.get(pos..pos + 8) {
        let len = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
        let data =
            &bytes[(pos + 8).min(bytes.len())..(pos + 8).saturating_add(len).min(bytes.len())];
        match &head[..4] {
            b"EXIF" if found.exif.is_none() => found.exif = Some(data.to_vec()),
            b"XMP " if found.xmp.is_none() => found.xmp = Some(data.to_vec()),
            _ => {}
        }
        // Chunks are padded to an even length.
        pos = (pos + 8).saturating_add(len).saturating_add(len & 1);
    }
    found
}

/// The orientation `bytes` carries as torchvision's readers read it
/// (`decode_image(..., apply_exif_orientation=True)`), which is not where Pillow reads it:
/// - JPEG: the first APP1 segment before the first scan, whatever it holds, its bytes from
///   the seventh on taken for a TIFF header (an XMP segment first hides a later Exif one; an
///   appended Exif segment, XMP and any other format are not read);
/// - PNG: the first `eXIf` chunk before the image data whose byte order is `II` or `MM` and
///   whose CRC holds (as libpng keeps it); text chunks are not read;
/// - any other format: none.
///
/// In the TIFF data, the first directory's entries are read in turn for tag 0x0112, whose
/// two bytes at the entry's value field give the orientation whatever the entry's type
/// (values outside 1-8 turn nothing). Offsets wrap at 32 bits, as torchvision's do; a read
/// past the data's end gives 0xFFFF, which as a tag ends the walk.
pub fn torchvision_orientation(bytes: &[u8]) -> Orientation {
    let exif = match ImageFormat::sniff(bytes) {
        Some(ImageFormat::Jpeg) if bytes.get(2) == Some(&0xFF) => {
            first_app1(bytes).and_then(|s| s.get(6..))
        }
        Some(ImageFormat::Png) => png_exif_chunk(bytes),
        _ => None,
    };
    exif.map_or(Orientation::Upright, torchvision_tiff_orientation)
}

/// The first APP1 segment's data (cut at the file's end) among the markers libjpeg reads
/// before the first scan; `None` where there is none, or libjpeg would stop with an error
/// before it (a marker it does not know, a length under 2, a second SOI).
fn first_app1(bytes: &[u8]) -> Option<&[u8]> {
    let mut pos = 2;
    loop {
        // libjpeg's search for the next marker: bytes other than 0xFF are skipped, then the
        // fill bytes; 0xFF 0x00 is skipped as well.
        let code = loop {
            pos += memchr::memchr(0xFF, bytes.get(pos..)?)?;
            while bytes.get(pos) == Some(&0xFF) {
                pos += 1;
            }
            let code = *bytes.get(pos)?;
            pos += 1;
            if code != 0 {
                break code;
            }
        };
        match code {
            0x01 | 0xD0..=0xD7 => continue,
            0xC0..=0xCF | 0xDB..=0xDF | 0xE0..=0xEF | 0xFE => {}
            _ => return None, // SOS, EOI, a second SOI, or a marker libjpeg rejects
        }
        let len = bytes.get(pos..pos + 2)?;
        let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
        if len < 2 {
            return None;
        }
        if code == 0xE1 {
            return Some(&bytes[pos + 2..(pos + len).min(bytes.len())]);
        }
        pos += len;
    }
}

/// The data of the first `eXIf` chunk libpng keeps before the image data.
fn png_exif_chunk(bytes: &[u8]) -> Option<&[u8]> {
    let mut pos = 8;
    loop {
        let head = bytes.get(pos..pos + 8)?;
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let kind = &head[4..8];
        let end = (pos + 8).checked_add(len)?;
        match kind {
            b"IDAT" | b"IEND" => return None,
            b"eXIf" => {
                let data = bytes.get(pos + 8..end)?;
                let crc = bytes.get(end..end + 4)?;
                let sound = crc32fast::hash(&bytes[pos + 4..end])
                    == u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]);
                if sound && data.len() >= 2 && data[0] == data[1] && matches!(data[0], b'I' | b'M')
                {
                    return Some(data);
                }
            }
            _ => {}
        }
        pos = end + 4;
    }
}

/// torchvision's walk of Exif data's first directory for the orientation (see
/// [`torchvision_orientation`]).
fn torchvision_tiff_orientation(data: &[u8]) -> Orientation {
    // Little-endian only for `II` (or a lone `I`); anything else reads big-endian.
    let little = data.first() == Some(&b'I') && (data.len() == 1 || data[1] == b'I');
    let u16_at = |at: u64| -> u16 {
        match usize::try_from(at)
            .ok()
            .and_then(|at| data.get(at..at.checked_add(2)?))
        {
            Some(b) if little => u16::from_le_bytes([b[0], b[1]]),
            Some(b) => u16::from_be_bytes([b[0], b[1]]),
            None => 0xFFFF,
        }
    };
    let u32_at = |at: u64| -> u32 {
        match usize::try_from(at)
            .ok()
            .and_then(|at| data.get(at..at.checked_add(4)?))
        {
            Some(b) if little => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            Some(b) => u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            None => 0xFFFF,
        }
    };
    if u16_at(2) != 0x2A {
        return Orientation::Upright;
    }
    let mut offset = u32_at(4);
    let entries = u16_at(u64::from(offset));
    offset = offset.wrapping_add(2);
    for _ in 0..entries {
        match u16_at(u64::from(offset)) {
            0xFFFF => break,
            0x0112 => {
                return Orientation::from_tag(u64::from(u16_at(u64::from(offset.wrapping_add(8)))))
            }
            _ => offset = offset.wrapping_add(12),
        }
    }
    Orientation::Upright
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exif data with an Orientation entry of `kind` holding `value`, in either byte order.
    fn exif(big: bool, kind: u16, value: u32) -> Vec<u8> {
        let u16b = |v: u16| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let u32b = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut t = if big {
            b"MM\x00\x2a".to_vec()
        } else {
            b"II\x2a\x00".to_vec()
        };
        t.extend(u32b(8));
        t.extend(u16b(1));
        t.extend(u16b(0x0112));
        t.extend(u16b(kind));
        t.extend(u32b(1));
        match kind {
            3 => {
                t.extend(u16b(value as u16));
                t.extend([0, 0]);
            }
            _ => t.extend(u32b(value)),
        }
        t.extend(u32b(0));
        t
    }

    fn jpeg_with(segments: &[(u8, Vec<u8>)]) -> Vec<u8> {
        let mut j = vec![0xFF, 0xD8];
        for (code, body) in segments {
            j.extend([0xFF, *code]);
            j.extend(((body.len() + 2) as u16).to_be_bytes());
            j.extend(body);
        }
        j.extend([0xFF, 0xDA, 0, 2]);
        j
    }

    #[test]
    fn a_window_of_the_turned_image_is_its_stored_window_turned() {
        // A 7x4 image of distinct pixels; every integer window of its turned image, under
        // each turn, against the stored window's pixels turned.
        let (w, h) = (7usize, 4usize);
        let src: Vec<u8> = (0..(w * h) as u8).collect();
        let cut = |img: &[u8], iw: usize, win: Window| -> Vec<u8> {
            let (l, t) = (win.left as usize, win.top as usize);
            let (cw, ch) = (win.width as usize, win.height as usize);
            (t..t + ch)
                .flat_map(|y| img[y * iw + l..y * iw + l + cw].to_vec())
                .collect()
        };
        for tag in 1..=8 {
            let o = Orientation::from_tag(tag);
            let (tw, th) = o.turned_size(w as u32, h as u32);
            let mut turned = vec![0; w * h];
            o.turn(&src, w, h, 1, &mut turned);
            for (l, t) in (0..tw).flat_map(|l| (0..th).map(move |t| (l, t))) {
                for (cw, ch) in (1..=tw - l).flat_map(|cw| (1..=th - t).map(move |ch| (cw, ch))) {
                    let window = Window {
                        left: l.into(),
                        top: t.into(),
                        width: cw.into(),
                        height: ch.into(),
                    };
                    let stored = o.stored_window(window, w as u32, h as u32);
                    let part = cut(&src, w, stored);
                    let (sw, sh) = (stored.width as usize, stored.height as usize);
                    let mut part_turned = vec![0; part.len()];
                    o.turn(&part, sw, sh, 1, &mut part_turned);
                    assert_eq!(
                        part_turned,
                        cut(&turned, tw as usize, window),
                        "orientation {tag}, window {window:?} -> {stored:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_part_of_the_turn_is_the_whole_turns_pixels_there_and_reads_only_its_stored_window() {
        let (w, h) = (9usize, 5usize);
        let src: Vec<u8> = (0..(w * h * 3) as u32)
            .map(|v| (v * 7 % 251) as u8)
            .collect();
        for tag in 1..=8 {
            let o = Orientation::from_tag(tag);
            let (tw, th) = o.turned_size(w as u32, h as u32);
            let mut whole = vec![0; src.len()];
            o.turn(&src, w, h, 3, &mut whole);
            for part in [
                [0, 0, 1, 1],
                [2, 1, 5, 4],
                [1, 0, tw as usize, 3],
                [0, 2, 3, th as usize],
            ] {
                // Only the stored window's pixels kept; the rest scrambled.
                let window = Window {
                    left: part[0] as f64,
                    top: part[1] as f64,
                    width: (part[2] - part[0]) as f64,
                    height: (part[3] - part[1]) as f64,
                };
                let s = o.stored_window(window, w as u32, h as u32);
                let inside = |x: usize, y: usize| {
                    (s.left as usize..(s.left + s.width) as usize).contains(&x)
                        && (s.top as usize..(s.top + s.height) as usize).contains(&y)
                };
                let mut masked = src.clone();
                for (k, px) in masked.chunks_exact_mut(3).enumerate() {
                    if !inside(k % w, k / w) {
                        px.copy_from_slice(&[1, 2, 3]);
                    }
                }
                let mut dst = vec![9; src.len()];
                o.turn_part(&masked, w, h, 3, part, &mut dst);
                for (k, (got, want)) in dst.chunks(3).zip(whole.chunks(3)).enumerate() {
                    let (x, y) = (k % tw as usize, k / tw as usize);
                    if (part[0]..part[2]).contains(&x) && (part[1]..part[3]).contains(&y) {
                        assert_eq!(got, want, "orientation {tag}, {part:?}, ({x}, {y})");
                    } else {
                        assert_eq!(got, [9, 9, 9], "orientation {tag}, {part:?}, ({x}, {y})");
                    }
                }
            }
        }
    }

    #[test]
    fn each_turn_moves_a_pixel_where_pillow_puts_it() {
        // A 3x2 image whose pixels are their own indices.
        let src: Vec<u8> = (0..6).collect();
        let turned = |o: Orientation| {
            let mut dst = vec![0; 6];
            o.turn(&src, 3, 2, 1, &mut dst);
            dst
        };
        // Stored:   0 1 2
        //           3 4 5
        assert_eq!(turned(Orientation::Upright), [0, 1, 2, 3, 4, 5]);
        assert_eq!(turned(Orientation::FlipHorizontal), [2, 1, 0, 5, 4, 3]);
        assert_eq!(turned(Orientation::Rotate180), [5, 4, 3, 2, 1, 0]);
        assert_eq!(turned(Orientation::FlipVertical), [3, 4, 5, 0, 1, 2]);
        // 2 wide, 3 high from here.
        assert_eq!(turned(Orientation::Transpose), [0, 3, 1, 4, 2, 5]);
        assert_eq!(turned(Orientation::RotateClockwise), [3, 0, 4, 1, 5, 2]);
        assert_eq!(turned(Orientation::Transverse), [5, 2, 4, 1, 3, 0]);
        assert_eq!(turned(Orientation::RotateAnticlockwise), [2, 5, 1, 4, 0, 3]);
        for v in 1..=8 {
            assert_eq!(Orientation::from_tag(v).tag() as u64, v);
        }
        // Three channels move together, and an image one pixel wide or high turns too.
        for (w, h) in [(3, 2), (1, 3), (3, 1), (5, 4)] {
            let grey: Vec<u8> = (0..w * h).map(|i| i as u8).collect();
            let rgb: Vec<u8> = grey.iter().flat_map(|&v| [v, v + 100, v + 200]).collect();
            for v in 1..=8 {
                let o = Orientation::from_tag(v);
                let (mut one, mut three) = (vec![0; w * h], vec![0; w * h * 3]);
                o.turn(&grey, w, h, 1, &mut one);
                o.turn(&rgb, w, h, 3, &mut three);
                let want: Vec<u8> = one.iter().flat_map(|&v| [v, v + 100, v + 200]).collect();
                assert_eq!(three, want, "{w}x{h} orientation {v}");
                let mut sorted = one.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, grey, "{w}x{h} orientation {v}: every pixel once");
            }
        }
    }

    #[test]
    fn a_jpeg_exif_orientation_is_read_in_either_byte_order_and_integer_type() {
        for big in [false, true] {
            for v in 1..=8 {
                for kind in [3, 4] {
                    let mut body = b"Exif\0\0".to_vec();
                    body.extend(exif(big, kind, v));
                    let j = jpeg_with(&[(0xE0, b"JFIF\0".to_vec()), (0xE1, body)]);
                    assert_eq!(
                        orientation(&j),
                        Orientation::from_tag(v.into()),
                        "{big} {kind} {v}"
                    );
                }
            }
        }
    }

    #[test]
    fn xmp_counts_only_without_an_exif_entry() {
        let xmp = |o: &str| {
            let mut b = b"http://ns.adobe.com/xap/1.0/\0".to_vec();
            b.extend(format!("<x:xmpmeta><rdf:Description tiff:Orientation=\"{o}\"/>").bytes());
            b
        };
        let j = jpeg_with(&[(0xE1, xmp("6"))]);
        assert_eq!(orientation(&j), Orientation::RotateClockwise);
        let element = jpeg_with(&[(
            0xE1,
            [
                &b"http://ns.adobe.com/xap/1.0/\0"[..],
                b"<tiff:Orientation>8</tiff:Orientation>",
            ]
            .concat(),
        )]);
        assert_eq!(orientation(&element), Orientation::RotateAnticlockwise);
        // An Exif entry of 1 wins over XMP's 6; an Exif block without the entry does not.
        let mut upright = b"Exif\0\0".to_vec();
        upright.extend(exif(false, 3, 1));
        assert_eq!(
            orientation(&jpeg_with(&[(0xE1, upright), (0xE1, xmp("6"))])),
            Orientation::Upright
        );
        let mut other = b"Exif\0\0".to_vec();
        let mut no_entry = exif(false, 3, 1);
        no_entry[10] = 0x13; // another tag
        other.extend(no_entry);
        assert_eq!(
            orientation(&jpeg_with(&[(0xE1, other), (0xE1, xmp("3"))])),
            Orientation::Rotate180
        );
    }

    #[test]
    fn png_and_webp_chunks_carry_orientations() {
        let chunk = |kind: &[u8], data: &[u8]| {
            let mut c = (data.len() as u32).to_be_bytes().to_vec();
            c.extend(kind);
            c.extend(data);
            c.extend([0; 4]); // the CRC, which is not checked here
            c
        };
        let png_of = |chunks: &[Vec<u8>]| {
            let mut p = b"\x89PNG\r\n\x1a\n".to_vec();
            p.extend(chunk(b"IHDR", &[0; 13]));
            p.extend(chunk(b"IDAT", &[1, 2, 3]));
            for c in chunks {
                p.extend(c);
            }
            p.extend(chunk(b"IEND", &[]));
            p
        };
        let e = exif(true, 3, 8);
        assert_eq!(
            orientation(&png_of(&[chunk(b"eXIf", &e)])),
            Orientation::RotateAnticlockwise
        );
        let hex: String = e.iter().map(|b| format!("{b:02x}")).collect();
        let dump = format!("\nexif\n{:8}\n{}\n{}\n", e.len(), &hex[..20], &hex[20..]);
        let text = [&b"Raw profile type exif\0"[..], dump.as_bytes()].concat();
        assert_eq!(
            orientation(&png_of(&[chunk(b"tEXt", &text)])),
            Orientation::RotateAnticlockwise
        );
        let packed = miniz_oxide::deflate::compress_to_vec_zlib(dump.as_bytes(), 6);
        let z = [&b"Raw profile type exif\0\0"[..], &packed].concat();
        assert_eq!(
            orientation(&png_of(&[chunk(b"zTXt", &z)])),
            Orientation::RotateAnticlockwise
        );
        let xmp = b"<tiff:Orientation>5</tiff:Orientation>";
        let plain = [&b"XML:com.adobe.xmp\0\0\0\0\0"[..], xmp].concat();
        assert_eq!(
            orientation(&png_of(&[chunk(b"iTXt", &plain)])),
            Orientation::Transpose
        );
        let packed = miniz_oxide::deflate::compress_to_vec_zlib(xmp, 6);
        let inflated = [&b"XML:com.adobe.xmp\0\x01\0\0\0"[..], &packed].concat();
        assert_eq!(
            orientation(&png_of(&[chunk(b"iTXt", &inflated)])),
            Orientation::Transpose
        );

        let mut w = b"RIFF\0\0\0\0WEBP".to_vec();
        w.extend(b"VP8X");
        w.extend(10u32.to_le_bytes());
        w.extend([0; 10]);
        let e = exif(false, 3, 7);
        w.extend(b"EXIF");
        w.extend((e.len() as u32).to_le_bytes());
        w.extend(&e);
        assert_eq!(orientation(&w), Orientation::Transverse);
    }

    #[test]
    fn damaged_metadata_reads_as_upright_or_its_readable_part_without_panicking() {
        let mut body = b"Exif\0\0".to_vec();
        body.extend(exif(false, 3, 6));
        let j = jpeg_with(&[(0xE1, body)]);
        for cut in 0..j.len() {
            let _ = orientation(&j[..cut]);
        }
        for at in 0..j.len() {
            for v in [0, 0xFF, 0x80] {
                let mut m = j.clone();
                m[at] = v;
                let _ = orientation(&m);
            }
        }
        // Unknown values and types turn nothing.
        assert_eq!(tiff_orientation(&exif(false, 3, 9)), Tag::Value(9));
        assert_eq!(Orientation::from_tag(9), Orientation::Upright);
        assert_eq!(tiff_orientation(&exif(false, 2, 6)), Tag::Other);
        assert_eq!(tiff_orientation(b"garbage"), Tag::Absent);
    }

    #[test]
    fn torchvisions_walk_wraps_its_offsets_at_32_bits_and_reads_any_type_as_two_bytes() {
        // The directory offset 0xFFFFFFFF: its entry count reads past the end (0xFFFF
        // entries), and the first entry's offset wraps to 1, from where entries are read
        // every 12 bytes: the one at 13 is the orientation.
        let mut data = b"MM\x00\x2a\xff\xff\xff\xff".to_vec();
        data.resize(32, 0x20);
        data[13..15].copy_from_slice(&0x0112u16.to_be_bytes());
        data[21..23].copy_from_slice(&6u16.to_be_bytes());
        assert_eq!(
            torchvision_tiff_orientation(&data),
            Orientation::RotateClockwise
        );
        // A LONG 6 little-endian reads 6 from its first two bytes, big-endian 0.
        let le = exif(false, 4, 6);
        let be = exif(true, 4, 6);
        assert_eq!(
            torchvision_tiff_orientation(&le),
            Orientation::RotateClockwise
        );
        assert_eq!(torchvision_tiff_orientation(&be), Orientation::Upright);
        // A lone `I` reads little-endian; `IM` big-endian.
        assert_eq!(torchvision_tiff_orientation(b"I"), Orientation::Upright);
        let mut mixed = le.clone();
        mixed[1] = b'M';
        assert_eq!(torchvision_tiff_orientation(&mixed), Orientation::Upright);
    }
}
