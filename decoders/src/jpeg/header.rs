//! JPEG header parsing: everything up to the start of the first scan, with the engine's
//! supported set enforced (one interleaved baseline scan), or, for the host's decoder, also the
//! JPEGs whose image comes in several scans (progressive, or sequential with the components in
//! scans of their own), and the markers between those scans ([`next_scan`]).

use crate::{DecodeError, ImageFormat, Limits};

use super::huffman::HuffmanSpec;

/// The engine's reason for refusing a JPEG, stable for counting fallbacks.
pub(crate) fn unsupported(reason: &'static str) -> DecodeError {
    DecodeError::Unsupported {
        format: ImageFormat::Jpeg,
        reason,
    }
}

fn corrupt(msg: &'static str) -> DecodeError {
    DecodeError::corrupt(ImageFormat::Jpeg, msg)
}

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Component {
    pub id: u8,
    /// Horizontal and vertical sampling factors.
    pub h: usize,
    pub v: usize,
    pub tq: usize,
    pub td: usize,
    pub ta: usize,
}

#[derive(Clone, Debug)]
pub(crate) struct Header {
    pub width: u32,
    pub height: u32,
    pub components: Vec<Component>,
    /// Quantization tables in zigzag order, and which slots the headers defined.
    pub qt: [[u16; 64]; 4],
    pub qt_set: [bool; 4],
    pub dc: [Option<HuffmanSpec>; 4],
    pub ac: [Option<HuffmanSpec>; 4],
    pub restart_interval: usize,
    /// Offset of the first byte of entropy-coded data.
    pub scan_start: usize,
    pub hmax: usize,
    pub vmax: usize,
    /// How the image's coefficients are coded.
    pub coding: Coding,
    /// Arithmetic coding (SOF9, SOF10) instead of Huffman codes, with the conditioning (DAC)
    /// in force at the first scan.
    pub arithmetic: bool,
    pub conditioning: Conditioning,
    /// The colour space of the components, as libjpeg infers it.
    pub colour: Colour,
    /// Whether the output needs the general stage (`general.rs`): sampling factors, colour
    /// spaces or sizes outside what the fast path's upsampling and conversion compute as
    /// libjpeg does. Only the host's decoder takes such files.
    pub general: bool,
    /// The first scan (for [`Coding::Baseline`], the only one).
    pub first_scan: Scan,
}

/// The colour space of a JPEG's components, as libjpeg infers it from the markers and the
/// component ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Colour {
    Grey,
    YCbCr,
    /// Three components stored as R, G, B (Adobe's transform 0, or ids 'R', 'G', 'B').
    Rgb,
    /// Four components: CMYK as stored (no Adobe marker, or transform 0) ...
    Cmyk,
    /// ... or YCbCr and K (Adobe's transform 2, which libjpeg also assumes for any other).
    Ycck,
}

/// An arithmetic-coded JPEG's conditioning per table slot (the DAC marker): the DC bounds L
/// and U and the AC threshold Kx, each with the standard's default until a DAC sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Conditioning {
    pub dc_l: [u8; 4],
    pub dc_u: [u8; 4],
    pub ac_k: [u8; 4],
}

impl Default for Conditioning {
    fn default() -> Self {
        Self {
            dc_l: [0; 4],
            dc_u: [1; 4],
            ac_k: [5; 4],
        }
    }
}

/// How a JPEG's coefficients are coded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Coding {
    /// Sequential, in one scan interleaving every component: decoded block by block as read.
    Baseline,
    /// Sequential, in several scans (a component or a few in each): the media engine refuses it.
    Sequential,
    /// Progressive (spectral selection and successive approximation): the engine refuses it.
    Progressive,
}

/// A scan's header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Scan {
    /// How many components the scan holds.
    pub count: usize,
    /// The components, as indexes into [`Header::components`].
    pub comps: [usize; 4],
    /// Each one's DC and AC table slots.
    pub dc: [usize; 4],
    pub ac: [usize; 4],
    /// Spectral selection (zigzag indexes) and successive approximation (bit positions).
    pub ss: usize,
    pub se: usize,
    pub ah: u32,
    pub al: u32,
    /// Offset of the scan's first entropy-coded byte.
    pub start: usize,
}

impl Scan {
    /// The scan's component indexes.
    pub fn components(&self) -> &[usize] {
        &self.comps[..self.count]
    }
}

impl Header {
    /// MCU size in pixels.
    pub fn mcu_w(&self) -> usize {
        8 * self.hmax
    }
    pub fn mcu_h(&self) -> usize {
        8 * self.vmax
    }
    pub fn mcus_x(&self) -> usize {
        (self.width as usize).div_ceil(self.mcu_w())
    }
    /// Valid chroma samples across and down in the image scaled to `n/8` (beyond them is MCU
    /// padding), for chroma components with sampling factors 1: libjpeg's
    /// `ceil(size * n / (8 * max factor))`.
    pub fn chroma_size(&self, n: usize) -> (usize, usize) {
        (
            (self.width as usize * n).div_ceil(self.hmax * 8),
            (self.height as usize * n).div_ceil(self.vmax * 8),
        )
    }
    pub fn mcus_y(&self) -> usize {
        (self.height as usize).div_ceil(self.mcu_h())
    }
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn u8(&mut self) -> Result<u8, DecodeError> {
        let b = *self.data.get(self.pos).ok_or(DecodeError::Truncated {
            format: ImageFormat::Jpeg,
            detail: "headers end early",
        })?;
        self.pos += 1;
        Ok(b)
    }
    /// The next marker's code (fill bytes before it skipped).
    fn marker(&mut self) -> Result<u8, DecodeError> {
        if self.u8()? != 0xFF {
            return Err(corrupt("expected a marker"));
        }
        let mut code = self.u8()?;
        while code == 0xFF {
            code = self.u8()?;
        }
        Ok(code)
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from(self.u8()?) << 8 | u16::from(self.u8()?))
    }
    fn segment(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = usize::from(self.u16()?);
        if len < 2 {
            return Err(corrupt("segment length below 2"));
        }
        let seg = self
            .data
            .get(self.pos..self.pos + len - 2)
            .ok_or(DecodeError::Truncated {
                format: ImageFormat::Jpeg,
                detail: "a header segment runs past the end",
            })?;
        self.pos += len - 2;
        Ok(seg)
    }
}

/// Parses the headers of `data` up to the first scan. Rejects, with a reason, everything
/// outside the engine's capability set; with `host`, JPEGs in several scans are taken too.
pub(crate) fn parse(data: &[u8], limits: &Limits, host: bool) -> Result<Header, DecodeError> {
    if !data.starts_with(&[0xFF, 0xD8]) {
        return Err(corrupt("no start-of-image marker"));
    }
    let mut r = Reader { data, pos: 2 };
    let mut qt = [[0u16; 64]; 4];
    let mut qt_set = [false; 4];
    let mut dc: [Option<HuffmanSpec>; 4] = Default::default();
    let mut ac: [Option<HuffmanSpec>; 4] = Default::default();
    let mut frame: Option<(u32, u32, Vec<Component>)> = None;
    let mut progressive = false;
    let mut arithmetic = false;
    let mut conditioning = Conditioning::default();
    let mut restart_interval = 0;
    let mut adobe_transform = None;
    let mut jfif = false;
    loop {
        let code = r.marker()?;
        match code {
            0xD8 => return Err(corrupt("second start-of-image marker")),
            0xD9 => return Err(corrupt("end of image before any scan")),
            0x01 | 0xD0..=0xD7 => {}
            0xC0 | 0xC1 => {
                if frame.is_some() {
                    return Err(corrupt("two frame headers"));
                }
                let seg = r.segment()?;
                frame = Some(parse_frame(seg, limits, host)?);
            }
            0xC2 | 0xC9 | 0xCA if host => {
                if frame.is_some() {
                    return Err(corrupt("two frame headers"));
                }
                let seg = r.segment()?;
                frame = Some(parse_frame(seg, limits, host)?);
                progressive = code != 0xC9;
                arithmetic = code != 0xC2;
            }
            0xCC if host => read_conditioning(r.segment()?, &mut conditioning)?,
            0xC2 | 0xC6 | 0xCA | 0xCE => return Err(unsupported("progressive JPEG")),
            0xC3 | 0xC7 | 0xCB | 0xCF => return Err(unsupported("lossless JPEG")),
            0xC5 => return Err(unsupported("hierarchical JPEG")),
            0xC9 | 0xCD => return Err(unsupported("arithmetic coding")),
            0xCC => return Err(unsupported("arithmetic coding")),
            0xC4 => read_huffman_tables(r.segment()?, &mut dc, &mut ac)?,
            0xDB => read_quantization_tables(r.segment()?, &mut qt, &mut qt_set)?,
            0xDD => restart_interval = read_restart_interval(r.segment()?)?,
            0xEE => {
                let seg = r.segment()?;
                if seg.len() >= 12 && seg.starts_with(b"Adobe") {
                    adobe_transform = Some(seg[11]);
                }
            }
            0xE0 => {
                let seg = r.segment()?;
                jfif |= seg.len() >= 14 && seg.starts_with(b"JFIF\0");
            }
            0xDA => {
                let (width, height, mut components) =
                    frame.ok_or(corrupt("scan before the frame header"))?;
                let first_scan = read_scan(r.segment()?, &components, r.pos)?;
                let coding = if progressive {
                    Coding::Progressive
                } else if first_scan.count == components.len() {
                    Coding::Baseline
                } else if host {
                    Coding::Sequential
                } else {
                    return Err(unsupported("non-interleaved (multi-scan) baseline JPEG"));
                };
                check_scan(&first_scan, coding, arithmetic, &dc, &ac)?;
                for &ci in first_scan.components() {
                    if !qt_set[components[ci].tq] {
                        return Err(corrupt("frame uses an undefined quantization table"));
                    }
                }
                if coding == Coding::Baseline {
                    for (i, &ci) in first_scan.components().iter().enumerate() {
                        components[ci].td = first_scan.dc[i];
                        components[ci].ta = first_scan.ac[i];
                    }
                }
                let colour = colour_space(&components, jfif, adobe_transform);
                if !host && (colour == Colour::Rgb || adobe_transform == Some(0)) {
                    return Err(unsupported("RGB colour space (Adobe, no transform)"));
                }
                let hmax = components
                    .iter()
                    .map(|c| c.h)
                    .max()
                    .expect("1, 3 or 4 components");
                let vmax = components
                    .iter()
                    .map(|c| c.v)
                    .max()
                    .expect("1, 3 or 4 components");
                let general = host && needs_general_output(&components, colour, width, hmax, vmax);
                if components.len() == 1 {
                    // A lone component is coded in 8x8 units whatever its factors say.
                    components[0].h = 1;
                    components[0].v = 1;
                }
                let (hmax, vmax) = if components.len() == 1 {
                    (1, 1)
                } else {
                    (hmax, vmax)
                };
                return Ok(Header {
                    width,
                    height,
                    components,
                    qt,
                    qt_set,
                    dc,
                    ac,
                    restart_interval,
                    scan_start: r.pos,
                    hmax,
                    vmax,
                    coding,
                    arithmetic,
                    conditioning,
                    first_scan,
                    colour,
                    general,
                });
            }
            0xE0..=0xEF | 0xFE => {
                r.segment()?;
            }
            _ => return Err(corrupt("unknown marker")),
        }
    }
}

/// Reads a DHT segment's tables into their slots.
fn read_huffman_tables(
    mut seg: &[u8],
    dc: &mut [Option<HuffmanSpec>; 4],
    ac: &mut [Option<HuffmanSpec>; 4],
) -> Result<(), DecodeError> {
    while !seg.is_empty() {
        let tc_th = seg[0];
        let (class, id) = (tc_th >> 4, usize::from(tc_th & 15));
        if class > 1 || id > 3 {
            return Err(corrupt("bad Huffman table class or id"));
        }
        let counts: [u8; 16] = seg
            .get(1..17)
            .ok_or(corrupt("short Huffman table"))?
            .try_into()
            .expect("16 bytes");
        let n: usize = counts.iter().map(|&c| usize::from(c)).sum();
        let values = seg.get(17..17 + n).ok_or(corrupt("short Huffman table"))?;
        let table = HuffmanSpec::new(&counts, values)?;
        if class == 0 {
            dc[id] = Some(table);
        } else {
            ac[id] = Some(table);
        }
        seg = &seg[17 + n..];
    }
    Ok(())
}

/// Reads a DQT segment's tables (zigzag order) into their slots.
fn read_quantization_tables(
    mut seg: &[u8],
    qt: &mut [[u16; 64]; 4],
    qt_set: &mut [bool; 4],
) -> Result<(), DecodeError> {
    while !seg.is_empty() {
        let (pq, id) = (seg[0] >> 4, usize::from(seg[0] & 15));
        if id > 3 || pq > 1 {
            return Err(corrupt("bad quantization table precision or id"));
        }
        let n = if pq == 0 { 64 } else { 128 };
        let body = seg
            .get(1..1 + n)
            .ok_or(corrupt("short quantization table"))?;
        for (k, q) in qt[id].iter_mut().enumerate() {
            *q = if pq == 0 {
                u16::from(body[k])
            } else {
                u16::from(body[2 * k]) << 8 | u16::from(body[2 * k + 1])
            };
        }
        qt_set[id] = true;
        seg = &seg[1 + n..];
    }
    Ok(())
}

/// Reads a DAC segment's conditioning values into their slots.
fn read_conditioning(seg: &[u8], c: &mut Conditioning) -> Result<(), DecodeError> {
    if !seg.len().is_multiple_of(2) {
        return Err(corrupt(
            "arithmetic conditioning segment of the wrong length",
        ));
    }
    for pair in seg.chunks_exact(2) {
        let (class, slot, value) = (pair[0] >> 4, usize::from(pair[0] & 15), pair[1]);
        if slot > 3 {
            return Err(corrupt("bad arithmetic conditioning table"));
        }
        match class {
            0 if value & 15 <= value >> 4 => {
                c.dc_l[slot] = value & 15;
                c.dc_u[slot] = value >> 4;
            }
            1 if (1..=63).contains(&value) => c.ac_k[slot] = value,
            _ => return Err(corrupt("bad arithmetic conditioning value")),
        }
    }
    Ok(())
}

fn read_restart_interval(seg: &[u8]) -> Result<usize, DecodeError> {
    if seg.len() != 2 {
        return Err(corrupt("restart interval segment of the wrong length"));
    }
    Ok(usize::from(u16::from_be_bytes([seg[0], seg[1]])))
}

/// A scan header's fields; `start` is where its entropy-coded data begins.
fn read_scan(seg: &[u8], components: &[Component], start: usize) -> Result<Scan, DecodeError> {
    let ns = usize::from(*seg.first().ok_or(corrupt("empty scan header"))?);
    if !(1..=components.len()).contains(&ns) {
        return Err(corrupt("scan with no components or more than the frame's"));
    }
    if seg.len() != 1 + 2 * ns + 3 {
        return Err(corrupt("scan header of the wrong length"));
    }
    let mut scan = Scan {
        count: ns,
        start,
        ..Scan::default()
    };
    for i in 0..ns {
        let (cid, tables) = (seg[1 + 2 * i], seg[2 + 2 * i]);
        let ci = components
            .iter()
            .position(|c| c.id == cid)
            .ok_or(corrupt("scan names an unknown component"))?;
        if scan.components()[..i].contains(&ci) {
            return Err(corrupt("scan names a component twice"));
        }
        scan.comps[i] = ci;
        scan.dc[i] = usize::from(tables >> 4);
        scan.ac[i] = usize::from(tables & 15);
    }
    let tail = &seg[1 + 2 * ns..];
    scan.ss = usize::from(tail[0]);
    scan.se = usize::from(tail[1]);
    scan.ah = u32::from(tail[2] >> 4);
    scan.al = u32::from(tail[2] & 15);
    Ok(scan)
}

/// Checks a scan's parameters for the frame's coding (as libjpeg does before decoding one) and
/// that the Huffman tables it decodes with are defined.
fn check_scan(
    scan: &Scan,
    coding: Coding,
    arithmetic: bool,
    dc: &[Option<HuffmanSpec>; 4],
    ac: &[Option<HuffmanSpec>; 4],
) -> Result<(), DecodeError> {
    let (needs_dc, needs_ac) = match coding {
        Coding::Baseline | Coding::Sequential => {
            if (scan.ss, scan.se, scan.ah, scan.al) != (0, 63, 0, 0) {
                return Err(corrupt("sequential scan with spectral selection"));
            }
            (true, true)
        }
        Coding::Progressive => {
            let dc_band = scan.ss == 0;
            let bad = if dc_band {
                scan.se != 0
            } else {
                scan.ss > scan.se || scan.se > 63 || scan.count != 1
            };
            if bad || (scan.ah != 0 && scan.al + 1 != scan.ah) || scan.al > 13 {
                return Err(corrupt("progressive scan with impossible parameters"));
            }
            // A DC refinement reads bare bits; an AC scan needs only its AC table.
            (dc_band && scan.ah == 0, !dc_band)
        }
    };
    // Arithmetic coding's statistics need no table, only a slot.
    let (needs_dc, needs_ac) = (needs_dc && !arithmetic, needs_ac && !arithmetic);
    for i in 0..scan.count {
        let (d, a) = (scan.dc[i], scan.ac[i]);
        if d > 3 || a > 3 || (needs_dc && dc[d].is_none()) || (needs_ac && ac[a].is_none()) {
            return Err(corrupt("scan uses an undefined Huffman table"));
        }
    }
    Ok(())
}

/// The tables a multi-scan decode carries from one scan to the next: markers between scans may
/// redefine Huffman tables, the restart interval and quantization tables (a component keeps the
/// table it had at its first scan, as libjpeg latches it).
#[derive(Clone, Debug)]
pub(crate) struct ScanTables {
    pub dc: [Option<HuffmanSpec>; 4],
    pub ac: [Option<HuffmanSpec>; 4],
    pub restart_interval: usize,
    pub qt: [[u16; 64]; 4],
    qt_set: [bool; 4],
    pub conditioning: Conditioning,
}

impl ScanTables {
    /// The tables in force at `h`'s first scan.
    pub fn new(h: &Header) -> Self {
        Self {
            dc: h.dc,
            ac: h.ac,
            restart_interval: h.restart_interval,
            qt: h.qt,
            qt_set: h.qt_set,
            conditioning: h.conditioning,
        }
    }

    /// Reads the markers from `pos` (just after a scan's data) to the next scan's header, which
    /// it returns checked, or to the end of the image (`None`).
    pub fn next_scan(
        &mut self,
        data: &[u8],
        pos: usize,
        h: &Header,
    ) -> Result<Option<Scan>, DecodeError> {
        let mut r = Reader { data, pos };
        loop {
            match r.marker()? {
                0xD9 => return Ok(None),
                0x01 | 0xD0..=0xD7 => {}
                0xC4 => read_huffman_tables(r.segment()?, &mut self.dc, &mut self.ac)?,
                0xDB => read_quantization_tables(r.segment()?, &mut self.qt, &mut self.qt_set)?,
                0xDD => self.restart_interval = read_restart_interval(r.segment()?)?,
                0xCC if h.arithmetic => read_conditioning(r.segment()?, &mut self.conditioning)?,
                0xDC => return Err(unsupported("height defined later by a DNL marker")),
                0xDA => {
                    let scan = read_scan(r.segment()?, &h.components, r.pos)?;
                    check_scan(&scan, h.coding, h.arithmetic, &self.dc, &self.ac)?;
                    for &ci in scan.components() {
                        if !self.qt_set[h.components[ci].tq] {
                            return Err(corrupt("frame uses an undefined quantization table"));
                        }
                    }
                    return Ok(Some(scan));
                }
                0xE0..=0xEF | 0xFE => {
                    r.segment()?;
                }
                _ => return Err(corrupt("unexpected marker between scans")),
            }
        }
    }
}

/// libjpeg's colour space for the frame's components (`default_decompress_parms`): a JFIF
/// marker means YCbCr; else an Adobe marker's transform decides; else three components with ids
/// 'R', 'G', 'B' are RGB; four components are CMYK without an Adobe marker.
fn colour_space(components: &[Component], jfif: bool, adobe: Option<u8>) -> Colour {
    match components.len() {
        1 => Colour::Grey,
        3 if jfif => Colour::YCbCr,
        3 => match adobe {
            Some(0) => Colour::Rgb,
            Some(_) => Colour::YCbCr,
            None if components.iter().map(|c| c.id).eq(*b"RGB") => Colour::Rgb,
            None => Colour::YCbCr,
        },
        _ => match adobe {
            None | Some(0) => Colour::Cmyk,
            Some(_) => Colour::Ycck,
        },
    }
}

/// Whether the fast output stage (`upsample.rs`, `colour.rs`) cannot give libjpeg's pixels:
/// it takes grey, and YCbCr with chroma at 1x1 and luma at 1x1, 2x1, 1x2 or 2x2, where libjpeg
/// upsamples by its "fancy" filters; those it replaces by plain replication when the chroma is
/// at most 2 samples wide.
fn needs_general_output(
    components: &[Component],
    colour: Colour,
    width: u32,
    hmax: usize,
    vmax: usize,
) -> bool {
    match colour {
        Colour::Grey => false,
        Colour::YCbCr => {
            let chroma_at_one = components[1..].iter().all(|c| (c.h, c.v) == (1, 1));
            let luma = (components[0].h, components[0].v);
            let narrow = hmax == 2 && (width as usize).div_ceil(2) <= 2;
            !chroma_at_one
                || !matches!(luma, (1, 1) | (2, 1) | (1, 2) | (2, 2))
                || narrow
                || (hmax, vmax) != luma
        }
        Colour::Rgb | Colour::Cmyk | Colour::Ycck => true,
    }
}

fn parse_frame(
    seg: &[u8],
    limits: &Limits,
    host: bool,
) -> Result<(u32, u32, Vec<Component>), DecodeError> {
    if seg.len() < 6 {
        return Err(corrupt("short frame header"));
    }
    if seg[0] != 8 {
        return Err(unsupported("sample precision other than 8 bits"));
    }
    let height = u32::from(u16::from_be_bytes([seg[1], seg[2]]));
    let width = u32::from(u16::from_be_bytes([seg[3], seg[4]]));
    if height == 0 {
        return Err(unsupported("height defined later by a DNL marker"));
    }
    limits.check(ImageFormat::Jpeg, width, height)?;
    let n = usize::from(seg[5]);
    match n {
        1 | 3 => {}
        4 if host => {}
        4 => return Err(unsupported("CMYK or YCCK colour")),
        _ => return Err(unsupported("component count other than 1 or 3")),
    }
    if seg.len() != 6 + 3 * n {
        return Err(corrupt("frame header of the wrong length"));
    }
    let components: Vec<Component> = (0..n)
        .map(|i| {
            let c = &seg[6 + 3 * i..9 + 3 * i];
            Component {
                id: c[0],
                h: usize::from(c[1] >> 4),
                v: usize::from(c[1] & 15),
                tq: usize::from(c[2]),
                ..Component::default()
            }
        })
        .collect();
    if components
        .iter()
        .any(|c| c.tq > 3 || !(1..=4).contains(&c.h) || !(1..=4).contains(&c.v))
    {
        return Err(corrupt("bad component parameters"));
    }
    if host && n > 1 {
        // libjpeg upsamples any whole ratio of sampling factors, and refuses the others.
        let hmax = components.iter().map(|c| c.h).max().expect("components");
        let vmax = components.iter().map(|c| c.v).max().expect("components");
        if components
            .iter()
            .any(|c| hmax % c.h != 0 || vmax % c.v != 0)
        {
            return Err(unsupported("sampling factors that are not whole ratios"));
        }
    } else if n == 3 {
        let (y, cb, cr) = (components[0], components[1], components[2]);
        let chroma_ok = (cb.h, cb.v, cr.h, cr.v) == (1, 1, 1, 1);
        if !chroma_ok || !matches!((y.h, y.v), (1, 1) | (2, 1) | (1, 2) | (2, 2)) {
            return Err(unsupported(
                "chroma subsampling other than 4:4:4, 4:2:2, 4:2:0 or 4:4:0",
            ));
        }
    }
    Ok((width, height, components))
}
