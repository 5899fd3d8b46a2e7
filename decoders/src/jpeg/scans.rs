//! JPEGs whose image comes in several scans: progressive ones (each scan a band of coefficients
//! or one more bit of them) and sequential ones whose components come in scans of their own.
//! Their coefficients are gathered whole (the quantized values, in natural order, every block
//! of every component), then the blocks a decode keeps are dequantized and inverse-transformed
//! into the same planes a baseline decode fills, so everything after (upsampling, colour, the
//! region's placement, resampling) is shared and gives libjpeg-turbo's pixels: the coefficients
//! are exact integers, whoever decodes them.
//!
//! The host's decoder takes these; the media engine, like the hardware it stands for, takes
//! only baseline JPEGs.

use super::header::{Coding, Header, Scan, ScanTables};
use super::huffman::{BitReader, HuffmanTable, Unstuffed};
use super::idct::{self, Idct};
use super::{arith, block, McuWindow, ZIGZAG};
use crate::{DecodeError, ImageFormat};

fn corrupt(msg: &'static str) -> DecodeError {
    DecodeError::corrupt(ImageFormat::Jpeg, msg)
}

/// Every block's quantized coefficients, per component, reused from one image to the next.
#[derive(Debug, Default)]
pub(super) struct Coefficients {
    data: Vec<i16>,
    /// Per component: where its blocks start in `data` and how many there are across (the
    /// MCU-padded count: an interleaved scan codes the padding blocks too).
    start: [usize; 4],
    across: [usize; 4],
}

/// Above this, the buffer is released after the image rather than kept for the next one.
const KEEP_BYTES: usize = 64 << 20;

impl Coefficients {
    /// Zeroed room for `h`'s blocks.
    fn reset(&mut self, h: &Header) {
        let mut total = 0;
        for (i, c) in h.components.iter().enumerate() {
            self.start[i] = total;
            self.across[i] = h.mcus_x() * c.h;
            total += self.across[i] * h.mcus_y() * c.v * 64;
        }
        self.data.clear();
        self.data.resize(total, 0);
    }

    pub(super) fn block(&mut self, comp: usize, bx: usize, by: usize) -> &mut [i16; 64] {
        let at = self.start[comp] + (by * self.across[comp] + bx) * 64;
        (&mut self.data[at..at + 64])
            .try_into()
            .expect("64 coefficients")
    }

    fn release_if_large(&mut self) {
        if self.data.capacity() * 2 > KEEP_BYTES {
            self.data = Vec::new();
        }
    }
}

/// Blocks across and down that component `c` really has: a scan of that component alone codes
/// only these, not the MCU padding.
fn component_blocks(h: &Header, c: usize) -> (usize, usize) {
    let comp = &h.components[c];
    let w = (h.width as usize * comp.h).div_ceil(h.hmax);
    let hh = (h.height as usize * comp.v).div_ceil(h.vmax);
    (w.div_ceil(8), hh.div_ceil(8))
}

/// What decodes a scan's blocks, by Huffman codes or arithmetic coding.
pub(super) trait BlockDecoder {
    /// At the start of every restart interval but the first: moves on to its data (checking
    /// the marker) and resets what the interval resets (predictions, runs, statistics).
    fn restart(&mut self) -> Result<(), DecodeError>;
    /// Decodes the next block of the scan's `i`-th component into `blk`.
    fn block(&mut self, i: usize, blk: &mut [i16; 64]) -> Result<(), DecodeError>;
    /// After the scan's last block: whether its data sufficed.
    fn finish(&self) -> Result<(), DecodeError>;
}

/// A Huffman-coded scan: its bits and its state.
struct HuffmanScan<'a, 't> {
    br: BitReader<'a>,
    next_restart: u8,
    state: ScanState<'t>,
}

impl BlockDecoder for HuffmanScan<'_, '_> {
    fn restart(&mut self) -> Result<(), DecodeError> {
        self.br = self.br.restart(self.next_restart)?;
        self.next_restart = (self.next_restart + 1) & 7;
        self.state.pred = [0; 4];
        self.state.eob_run = 0;
        Ok(())
    }

    #[inline]
    fn block(&mut self, i: usize, blk: &mut [i16; 64]) -> Result<(), DecodeError> {
        self.state.block(&mut self.br, i, blk)
    }

    fn finish(&self) -> Result<(), DecodeError> {
        if self.br.ends_early() {
            return Err(DecodeError::Truncated {
                format: ImageFormat::Jpeg,
                detail: "entropy-coded data ends early",
            });
        }
        Ok(())
    }
}

/// What one scan does to each block it codes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Pass {
    /// Sequential: the whole block.
    Whole,
    /// Progressive: the DC coefficient's first bits, or one more bit of it.
    DcFirst,
    DcRefine,
    /// Progressive: a band's first bits, or one more bit of it.
    AcFirst,
    AcRefine,
}

impl Pass {
    /// What `scan` of a JPEG coded as `coding` does, by its spectral selection and successive
    /// approximation; the same for Huffman and arithmetic coding.
    pub(super) fn of(coding: Coding, scan: &Scan) -> Self {
        match (coding, scan.ss, scan.ah) {
            (Coding::Progressive, 0, 0) => Self::DcFirst,
            (Coding::Progressive, 0, _) => Self::DcRefine,
            (Coding::Progressive, _, 0) => Self::AcFirst,
            (Coding::Progressive, _, _) => Self::AcRefine,
            _ => Self::Whole,
        }
    }
}

/// A scan's decoding state: predictions, the end-of-band run, the tables.
struct ScanState<'t> {
    pass: Pass,
    scan: Scan,
    pred: [i32; 4],
    eob_run: u32,
    /// A sequential block's values as the baseline decoder writes them (zero between blocks).
    coef: [i32; 64],
    dc: [&'t HuffmanTable; 4],
    ac: [&'t HuffmanTable; 4],
}

impl ScanState<'_> {
    /// Decodes the `i`-th of the scan's components' next block into `blk`.
    #[inline]
    fn block(
        &mut self,
        br: &mut BitReader<'_>,
        i: usize,
        blk: &mut [i16; 64],
    ) -> Result<(), DecodeError> {
        let Scan { ss, se, al, .. } = self.scan;
        match self.pass {
            Pass::Whole => {
                let coef = &mut self.coef;
                let last =
                    block::<true>(br, self.dc[i], self.ac[i], &ONES, &mut self.pred[i], coef)?;
                for k in 0..=last {
                    // Quantized values of an 8-bit JPEG fit; libjpeg keeps them as 16 bits too.
                    blk[ZIGZAG[k]] = coef[ZIGZAG[k]] as i16;
                }
                idct::clear_written(coef, last);
            }
            Pass::DcFirst => {
                br.refill();
                let s = u32::from(br.decode(self.dc[i])?);
                if s > 15 {
                    return Err(corrupt("DC difference of more than 15 bits"));
                }
                self.pred[i] = self.pred[i].wrapping_add(br.receive_extend(s));
                blk[0] = self.pred[i].wrapping_shl(al) as i16;
            }
            Pass::DcRefine => {
                br.ensure();
                if br.bits(1) == 1 {
                    blk[0] |= 1 << al;
                }
            }
            Pass::AcFirst => {
                if self.eob_run > 0 {
                    self.eob_run -= 1;
                    return Ok(());
                }
                let mut k = ss;
                while k <= se {
                    br.ensure();
                    let rs = br.decode(self.ac[i])?;
                    let (r, s) = (u32::from(rs >> 4), u32::from(rs & 15));
                    if s == 0 {
                        if r < 15 {
                            // An end-of-band run: this block and 2^r - 1 + (r bits) more.
                            self.eob_run = (1 << r) + br.bits(r) - 1;
                            break;
                        }
                        k += 16;
                        continue;
                    }
                    k += r as usize;
                    if k > 63 {
                        return Err(corrupt("AC run past the end of the block"));
                    }
                    blk[ZIGZAG[k]] = br.receive_extend(s).wrapping_shl(al) as i16;
                    k += 1;
                }
            }
            Pass::AcRefine => self.ac_refine(br, i, blk)?,
        }
        Ok(())
    }

    /// One more bit of a band's coefficients: those already non-zero get a correction bit
    /// each, and a run of zeros (counted over the still-zero ones) ends at a newly non-zero one
    /// of magnitude `1 << al`.
    fn ac_refine(
        &mut self,
        br: &mut BitReader<'_>,
        i: usize,
        blk: &mut [i16; 64],
    ) -> Result<(), DecodeError> {
        let Scan { ss, se, al, .. } = self.scan;
        let (plus, minus) = (1i16 << al, (-1i16) << al);
        // A correction bit for a non-zero coefficient: away from zero by `1 << al` if set and
        // that bit is not set yet.
        let correct = |br: &mut BitReader<'_>, c: &mut i16| {
            br.ensure();
            if br.bits(1) == 1 && *c & plus == 0 {
                *c += if *c >= 0 { plus } else { minus };
            }
        };
        let mut k = ss;
        if self.eob_run == 0 {
            while k <= se {
                br.ensure();
                let rs = br.decode(self.ac[i])?;
                let (mut r, s) = (i32::from(rs >> 4), rs & 15);
                let mut value = 0;
                if s != 0 {
                    // Only magnitude 1 is possible here; libjpeg warns and reads on otherwise.
                    br.ensure();
                    value = if br.bits(1) == 1 { plus } else { minus };
                } else if r != 15 {
                    self.eob_run = (1 << r) + br.bits(r as u32);
                    break;
                }
                // Past the non-zero coefficients (correcting each) and `r` zero ones.
                while k <= se {
                    let c = &mut blk[ZIGZAG[k]];
                    if *c != 0 {
                        correct(br, c);
                    } else {
                        if r == 0 {
                            break;
                        }
                        r -= 1;
                    }
                    k += 1;
                }
                if value != 0 {
                    if k > se {
                        return Err(corrupt("AC run past the end of the band"));
                    }
                    blk[ZIGZAG[k]] = value;
                }
                k += 1;
            }
        }
        if self.eob_run > 0 {
            // Inside an end-of-band run: only the corrections of the non-zero coefficients.
            for k in k..=se {
                let c = &mut blk[ZIGZAG[k]];
                if *c != 0 {
                    correct(br, c);
                }
            }
            self.eob_run -= 1;
        }
        Ok(())
    }
}

/// Unit quantization: [`block`] then gives the quantized values themselves.
const ONES: [u16; 64] = [1; 64];

/// Decodes every scan of a multi-scan JPEG (up to MCU row `window.3`, the last a decode keeps),
/// then the kept blocks into `planes` (laid out as a baseline decode lays them out).
#[allow(clippy::too_many_arguments)]
pub(super) fn decode(
    bytes: &[u8],
    h: &Header,
    (c0, c1, r0, r1): McuWindow,
    n: usize,
    coefs: &mut Coefficients,
    arith_stats: &mut arith::Statistics,
    unstuffed: &mut Unstuffed,
    dc_tables: &mut [HuffmanTable; 4],
    ac_tables: &mut [HuffmanTable; 4],
    idct: &Idct,
    planes: &mut [Vec<u8>; 4],
) -> Result<(), DecodeError> {
    coefs.reset(h);
    let ncomp = h.components.len();
    let mut tables = ScanTables::new(h);
    // Each component's quantization table, as it was at the component's first scan; and, for a
    // progressive JPEG, how many low bits of each coefficient are still to come (-1: none yet).
    let mut latched: [Option<[u16; 64]>; 4] = [None; 4];
    let mut bits_left = [[-1i8; 64]; 4];
    let mut scan = h.first_scan;
    loop {
        for &ci in scan.components() {
            latched[ci].get_or_insert(tables.qt[h.components[ci].tq]);
        }
        let pass = Pass::of(h.coding, &scan);
        if h.coding == Coding::Progressive {
            for &ci in scan.components() {
                let left = &mut bits_left[ci];
                if scan.ss > 0 && left[0] < 0 {
                    return Err(corrupt("progressive AC scan before its component's DC"));
                }
                for k in scan.ss..=scan.se {
                    let expected = left[k].max(0) as u32;
                    if scan.ah != expected {
                        return Err(corrupt("progressive scan out of order"));
                    }
                    left[k] = scan.al as i8;
                }
            }
        }
        for i in (0..scan.count).filter(|_| !h.arithmetic) {
            if !matches!(pass, Pass::DcRefine | Pass::AcFirst | Pass::AcRefine) {
                let spec = tables.dc[scan.dc[i]]
                    .as_ref()
                    .expect("checked by check_scan");
                dc_tables[scan.dc[i]].build(spec, false);
            }
            if !matches!(pass, Pass::DcFirst | Pass::DcRefine) {
                let spec = tables.ac[scan.ac[i]]
                    .as_ref()
                    .expect("checked by check_scan");
                // The combined AC table reads baseline's codes only.
                ac_tables[scan.ac[i]].build(spec, matches!(pass, Pass::Whole));
            }
        }
        unstuffed.fill(bytes, scan.start);
        if h.arithmetic {
            let mut dec =
                arith::ArithScan::new(unstuffed, &scan, pass, &tables.conditioning, arith_stats)?;
            decode_scan(h, &scan, &mut dec, tables.restart_interval, r1, coefs)?;
        } else {
            let mut dec = HuffmanScan {
                br: unstuffed.reader(),
                next_restart: 0,
                state: ScanState {
                    pass,
                    scan,
                    pred: [0; 4],
                    eob_run: 0,
                    coef: [0; 64],
                    dc: std::array::from_fn(|i| &dc_tables[scan.dc[i.min(scan.count - 1)]]),
                    ac: std::array::from_fn(|i| &ac_tables[scan.ac[i.min(scan.count - 1)]]),
                },
            };
            decode_scan(h, &scan, &mut dec, tables.restart_interval, r1, coefs)?;
        }
        let Some(next) = tables.next_scan(bytes, unstuffed.stop(), h)? else {
            break;
        };
        scan = next;
    }
    if (0..ncomp).any(|ci| latched[ci].is_none()) {
        return Err(corrupt("a component is in no scan"));
    }
    if h.coding == Coding::Progressive
        && bits_left[..ncomp]
            .iter()
            .any(|left| left[0] < 0 || left[1..10].iter().any(|&b| b != 0))
    {
        // libjpeg smooths the blocks of such an image (its "block smoothing" for partial
        // progressive images), which this decoder does not.
        return Err(super::header::unsupported(
            "progressive JPEG whose scans leave low coefficients incomplete",
        ));
    }
    let mut coef = [0i32; 64];
    for (ci, c) in h.components.iter().enumerate() {
        let q = latched[ci].as_ref().expect("checked above");
        // The table in natural order, and each position's zigzag index (the IDCT's `last`).
        let mut natural_q = [0i32; 64];
        let mut zigzag_of = [0usize; 64];
        for (k, &n) in ZIGZAG.iter().enumerate() {
            natural_q[n] = i32::from(q[k]);
            zigzag_of[n] = k;
        }
        let stride = (c1 - c0) * c.h * n;
        let len = stride * (r1 - r0) * c.v * n;
        if planes[ci].len() < len {
            planes[ci].resize(len, 0);
        }
        for by in r0 * c.v..r1 * c.v {
            for bx in c0 * c.h..c1 * c.h {
                let blk = coefs.block(ci, bx, by);
                let mut last = 0;
                // Most rows of a block are zero: a row's eight values are compared at once.
                for (r, row) in blk.chunks_exact(8).enumerate() {
                    if row == [0; 8] {
                        continue;
                    }
                    for (j, &v) in row.iter().enumerate() {
                        if v != 0 {
                            let at = 8 * r + j;
                            coef[at] = i32::from(v) * natural_q[at];
                            last = last.max(zigzag_of[at]);
                        }
                    }
                }
                let (px, py) = ((bx - c0 * c.h) * n, (by - r0 * c.v) * n);
                idct.block(&coef, last, n, &mut planes[ci][py * stride + px..], stride);
                idct::clear_written(&mut coef, last);
            }
        }
    }
    coefs.release_if_large();
    Ok(())
}

/// Decodes one scan's blocks into `coefs` with `dec`, up to MCU row `rows` of the image (a
/// scan of one component, the rows of its blocks that those hold).
fn decode_scan(
    h: &Header,
    scan: &Scan,
    dec: &mut impl BlockDecoder,
    restart_interval: usize,
    rows: usize,
    coefs: &mut Coefficients,
) -> Result<(), DecodeError> {
    let mut done = 0usize;
    let mut next_mcu = |dec: &mut _| -> Result<(), DecodeError> {
        if restart_interval > 0 && done > 0 && done.is_multiple_of(restart_interval) {
            BlockDecoder::restart(dec)?;
        }
        done += 1;
        Ok(())
    };
    let whole;
    if scan.count == 1 {
        // One block per MCU, over the component's own blocks.
        let ci = scan.comps[0];
        let (across, down) = component_blocks(h, ci);
        let down_needed = (rows * h.components[ci].v).min(down);
        whole = down_needed == down;
        for by in 0..down_needed {
            for bx in 0..across {
                next_mcu(dec)?;
                dec.block(0, coefs.block(ci, bx, by))?;
            }
        }
    } else {
        whole = rows == h.mcus_y();
        for my in 0..rows {
            for mx in 0..h.mcus_x() {
                next_mcu(dec)?;
                for (i, &ci) in scan.components().iter().enumerate() {
                    let c = &h.components[ci];
                    for by in 0..c.v {
                        for bx in 0..c.h {
                            dec.block(i, coefs.block(ci, mx * c.h + bx, my * c.v + by))?;
                        }
                    }
                }
            }
        }
    }
    if whole {
        dec.finish()?;
    }
    Ok(())
}
