//! Arithmetic-coded JPEGs (SOF9 sequential, SOF10 progressive): the QM coder of ITU T.81
//! Annex D decoding the binary decisions, with the statistical models of Annex F (sequential)
//! and Annex G (progressive) choosing each decision's context. Their coefficients go where a
//! Huffman-coded multi-scan JPEG's go (`scans.rs`), so everything after is shared. Pillow reads
//! these files (its libjpeg-turbo has arithmetic decoding built in), zune-jpeg does not.

use super::header::{Conditioning, Scan};
use super::huffman::Unstuffed;
use super::scans::{BlockDecoder, Pass};
use super::ZIGZAG;
use crate::{DecodeError, ImageFormat};

fn corrupt(msg: &'static str) -> DecodeError {
    DecodeError::corrupt(ImageFormat::Jpeg, msg)
}

/// The probability estimation state machine (T.81 Table D.3; the same as JBIG's QM coder):
/// per state, the LPS probability estimate Qe, the next state after an LPS and after an MPS,
/// and whether an LPS there exchanges the sense of the MPS. State 113 is the fixed estimate
/// of one half that never moves (the sign and refinement decisions of the progressive models).
const STATES: [(u16, u8, u8, bool); 114] = {
    const T: [(u16, u8, u8, u8); 114] = [
        (0x5a1d, 1, 1, 1),
        (0x2586, 14, 2, 0),
        (0x1114, 16, 3, 0),
        (0x080b, 18, 4, 0),
        (0x03d8, 20, 5, 0),
        (0x01da, 23, 6, 0),
        (0x00e5, 25, 7, 0),
        (0x006f, 28, 8, 0),
        (0x0036, 30, 9, 0),
        (0x001a, 33, 10, 0),
        (0x000d, 35, 11, 0),
        (0x0006, 9, 12, 0),
        (0x0003, 10, 13, 0),
        (0x0001, 12, 13, 0),
        (0x5a7f, 15, 15, 1),
        (0x3f25, 36, 16, 0),
        (0x2cf2, 38, 17, 0),
        (0x207c, 39, 18, 0),
        (0x17b9, 40, 19, 0),
        (0x1182, 42, 20, 0),
        (0x0cef, 43, 21, 0),
        (0x09a1, 45, 22, 0),
        (0x072f, 46, 23, 0),
        (0x055c, 48, 24, 0),
        (0x0406, 49, 25, 0),
        (0x0303, 51, 26, 0),
        (0x0240, 52, 27, 0),
        (0x01b1, 54, 28, 0),
        (0x0144, 56, 29, 0),
        (0x00f5, 57, 30, 0),
        (0x00b7, 59, 31, 0),
        (0x008a, 60, 32, 0),
        (0x0068, 62, 33, 0),
        (0x004e, 63, 34, 0),
        (0x003b, 32, 35, 0),
        (0x002c, 33, 9, 0),
        (0x5ae1, 37, 37, 1),
        (0x484c, 64, 38, 0),
        (0x3a0d, 65, 39, 0),
        (0x2ef1, 67, 40, 0),
        (0x261f, 68, 41, 0),
        (0x1f33, 69, 42, 0),
        (0x19a8, 70, 43, 0),
        (0x1518, 72, 44, 0),
        (0x1177, 73, 45, 0),
        (0x0e74, 74, 46, 0),
        (0x0bfb, 75, 47, 0),
        (0x09f8, 77, 48, 0),
        (0x0861, 78, 49, 0),
        (0x0706, 79, 50, 0),
        (0x05cd, 48, 51, 0),
        (0x04de, 50, 52, 0),
        (0x040f, 50, 53, 0),
        (0x0363, 51, 54, 0),
        (0x02d4, 52, 55, 0),
        (0x025c, 53, 56, 0),
        (0x01f8, 54, 57, 0),
        (0x01a4, 55, 58, 0),
        (0x0160, 56, 59, 0),
        (0x0125, 57, 60, 0),
        (0x00f6, 58, 61, 0),
        (0x00cb, 59, 62, 0),
        (0x00ab, 61, 63, 0),
        (0x008f, 61, 32, 0),
        (0x5b12, 65, 65, 1),
        (0x4d04, 80, 66, 0),
        (0x412c, 81, 67, 0),
        (0x37d8, 82, 68, 0),
        (0x2fe8, 83, 69, 0),
        (0x293c, 84, 70, 0),
        (0x2379, 86, 71, 0),
        (0x1edf, 87, 72, 0),
        (0x1aa9, 87, 73, 0),
        (0x174e, 72, 74, 0),
        (0x1424, 72, 75, 0),
        (0x119c, 74, 76, 0),
        (0x0f6b, 74, 77, 0),
        (0x0d51, 75, 78, 0),
        (0x0bb6, 77, 79, 0),
        (0x0a40, 77, 48, 0),
        (0x5832, 80, 81, 1),
        (0x4d1c, 88, 82, 0),
        (0x438e, 89, 83, 0),
        (0x3bdd, 90, 84, 0),
        (0x34ee, 91, 85, 0),
        (0x2eae, 92, 86, 0),
        (0x299a, 93, 87, 0),
        (0x2516, 86, 71, 0),
        (0x5570, 88, 89, 1),
        (0x4ca9, 95, 90, 0),
        (0x44d9, 96, 91, 0),
        (0x3e22, 97, 92, 0),
        (0x3824, 99, 93, 0),
        (0x32b4, 99, 94, 0),
        (0x2e17, 93, 86, 0),
        (0x56a8, 95, 96, 1),
        (0x4f46, 101, 97, 0),
        (0x47e5, 102, 98, 0),
        (0x41cf, 103, 99, 0),
        (0x3c3d, 104, 100, 0),
        (0x375e, 99, 93, 0),
        (0x5231, 105, 102, 0),
        (0x4c0f, 106, 103, 0),
        (0x4639, 107, 104, 0),
        (0x415e, 103, 99, 0),
        (0x5627, 105, 106, 1),
        (0x50e7, 108, 107, 0),
        (0x4b85, 109, 103, 0),
        (0x5597, 110, 109, 0),
        (0x504f, 111, 107, 0),
        (0x5a10, 110, 111, 1),
        (0x5522, 112, 109, 0),
        (0x59eb, 112, 111, 1),
        (0x5a1d, 113, 113, 0),
    ];
    let mut out = [(0u16, 0u8, 0u8, false); 114];
    let mut i = 0;
    while i < 114 {
        out[i] = (T[i].0, T[i].1, T[i].2, T[i].3 == 1);
        i += 1;
    }
    out
};

/// A context: its state in the low 7 bits, the sense of its more probable symbol in the top
/// one. Zero is the state every context starts a scan (and a restart interval) in.
type Context = u8;

/// The fixed one-half context.
const FIXED: Context = 113;

/// The QM decoder of T.81 Annex D over one restart interval's bytes (stuffing removed), with
/// zeros supplied past their end as the standard asks. `c` holds the code register with its
/// 16 bits compared against the interval `a` at bits 16..32; `ct` counts the bits of the last
/// byte taken in that are still below them.
struct Qm<'a> {
    bytes: &'a [u8],
    pos: usize,
    c: u64,
    a: u32,
    ct: u32,
}

impl<'a> Qm<'a> {
    /// INITDEC: two bytes into the compared part of the register.
    fn new(bytes: &'a [u8]) -> Self {
        let mut qm = Self {
            bytes,
            pos: 0,
            c: 0,
            a: 0x10000,
            ct: 0,
        };
        qm.byte_in();
        qm.c <<= 8;
        qm.byte_in();
        qm.c <<= 8;
        qm.ct = 0;
        qm
    }

    fn byte_in(&mut self) {
        let byte = self.bytes.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        self.c += u64::from(byte) << 8;
        self.ct = 8;
    }

    /// DECODE: one binary decision in context `cx`, whose state it then moves on.
    #[inline]
    fn decode(&mut self, cx: &mut Context) -> bool {
        let (qe, next_lps, next_mps, switch) = STATES[usize::from(*cx & 0x7F)];
        let qe = u32::from(qe);
        let mps = *cx >> 7;
        self.a -= qe;
        // After a less probable symbol the state moves to `next_lps` (and the sense of the MPS
        // flips where the state says so); after a more probable one (which renormalizes), to
        // `next_mps`.
        let after_lps = ((mps ^ u8::from(switch)) << 7) | next_lps;
        let after_mps = (mps << 7) | next_mps;
        let bit = if (self.c >> 16) < u64::from(self.a) {
            if self.a >= 0x8000 {
                return mps == 1;
            }
            // The MPS's subinterval, unless the exchange makes it the LPS's.
            if self.a < qe {
                *cx = after_lps;
                mps ^ 1
            } else {
                *cx = after_mps;
                mps
            }
        } else {
            self.c -= u64::from(self.a) << 16;
            let bit = if self.a < qe {
                *cx = after_mps;
                mps
            } else {
                *cx = after_lps;
                mps ^ 1
            };
            self.a = qe;
            bit
        };
        // RENORM_D
        loop {
            if self.ct == 0 {
                self.byte_in();
            }
            self.a <<= 1;
            self.c <<= 1;
            self.ct -= 1;
            if self.a >= 0x8000 {
                break;
            }
        }
        bit == 1
    }

    /// The magnitude of a non-zero value whose category decisions started at context `first`
    /// of `bins` (`first + 1` and on for larger categories, each a decision), continued at
    /// `larger` once the first says more than one (AC's X2 and on; DC's X1 and on) and with its
    /// bits below the top one at `larger + k + 14` (T.81 Figures F.23 and F.24): the value
    /// minus one is `m | bits`, `m` its top bit.
    fn magnitude(
        &mut self,
        bins: &mut [Context],
        first: usize,
        larger: usize,
        ac: bool,
    ) -> Result<i32, DecodeError> {
        let mut st = first;
        let mut m = i32::from(self.decode(&mut bins[st]));
        if m != 0 && (!ac || self.decode(&mut bins[st])) {
            if ac {
                m <<= 1;
            }
            st = larger;
            while self.decode(&mut bins[st]) {
                m <<= 1;
                if m == 0x8000 {
                    return Err(corrupt("arithmetic-coded magnitude too large"));
                }
                st += 1;
            }
        }
        let mut v = m;
        let mut bit = m >> 1;
        while bit != 0 {
            if self.decode(&mut bins[st + 14]) {
                v |= bit;
            }
            bit >>= 1;
        }
        Ok(v + 1)
    }
}

/// The statistics areas of the four DC and four AC table slots: 64 DC contexts (Table F.4's
/// layout: five conditioning classes of four, then the magnitude contexts) and 256 AC ones
/// (three per coefficient position, then the magnitude contexts below and above Kx).
#[derive(Debug)]
pub(super) struct Statistics {
    dc: [[Context; 64]; 4],
    ac: [[Context; 256]; 4],
}

impl Default for Statistics {
    fn default() -> Self {
        Self {
            dc: [[0; 64]; 4],
            ac: [[0; 256]; 4],
        }
    }
}

/// An arithmetic-coded scan being decoded.
pub(super) struct ArithScan<'a> {
    unstuffed: &'a Unstuffed,
    interval: usize,
    qm: Qm<'a>,
    scan: Scan,
    pass: Pass,
    conditioning: Conditioning,
    stats: &'a mut Statistics,
    /// Per scan component: the DC prediction and its conditioning class (0, 4, 8, 12 or 16).
    pred: [i32; 4],
    dc_context: [usize; 4],
    fixed: Context,
}

impl<'a> ArithScan<'a> {
    /// Starts `scan`, whose blocks `pass` decodes, over `unstuffed`'s data.
    pub fn new(
        unstuffed: &'a Unstuffed,
        scan: &Scan,
        pass: Pass,
        conditioning: &Conditioning,
        stats: &'a mut Statistics,
    ) -> Result<Self, DecodeError> {
        let (bytes, _) = unstuffed.interval(0).ok_or(corrupt("scan without data"))?;
        let mut s = Self {
            unstuffed,
            interval: 0,
            qm: Qm::new(bytes),
            scan: *scan,
            pass,
            conditioning: *conditioning,
            stats,
            pred: [0; 4],
            dc_context: [0; 4],
            fixed: FIXED,
        };
        s.reset_statistics();
        Ok(s)
    }

    /// What a scan's start and each restart reset: the statistics of the tables the scan
    /// decodes with, the predictions and their classes.
    fn reset_statistics(&mut self) {
        let uses_dc = matches!(self.pass, Pass::Whole | Pass::DcFirst);
        let uses_ac = matches!(self.pass, Pass::Whole | Pass::AcFirst | Pass::AcRefine);
        for i in 0..self.scan.count {
            if uses_dc {
                self.stats.dc[self.scan.dc[i]] = [0; 64];
            }
            if uses_ac {
                self.stats.ac[self.scan.ac[i]] = [0; 256];
            }
        }
        self.pred = [0; 4];
        self.dc_context = [0; 4];
    }

    /// The DC difference of the `i`-th component's next block (T.81 F.1.4.4.1).
    fn dc_difference(&mut self, i: usize) -> Result<i32, DecodeError> {
        let slot = self.scan.dc[i];
        let bins = &mut self.stats.dc[slot];
        let s0 = self.dc_context[i];
        if !self.qm.decode(&mut bins[s0]) {
            self.dc_context[i] = 0;
            return Ok(0);
        }
        let negative = self.qm.decode(&mut bins[s0 + 1]);
        let first = s0 + 2 + usize::from(negative);
        let v = self.qm.magnitude(bins, first, 20, false)?;
        // The class the next difference is decoded in, by this one's magnitude category.
        let m = v - 1; // below the value's top bit is what the category bounds compare
        let top = if m == 0 {
            0
        } else {
            1 << (31 - m.leading_zeros())
        };
        let (l, u) = (self.conditioning.dc_l[slot], self.conditioning.dc_u[slot]);
        let sign = 4 * usize::from(negative);
        self.dc_context[i] = if top < (1 << l) >> 1 {
            0
        } else if top > (1 << u) >> 1 {
            12 + sign
        } else {
            4 + sign
        };
        Ok(if negative { -v } else { v })
    }

    /// Coefficients `ss..=se` of a block, first pass (or the whole sequential band): per
    /// position an end-of-block decision, zero-or-not decisions, then sign and magnitude.
    fn ac_first(&mut self, i: usize, blk: &mut [i16; 64], shift: u32) -> Result<(), DecodeError> {
        let (ss, se) = if self.pass == Pass::Whole {
            (1, 63)
        } else {
            (self.scan.ss, self.scan.se)
        };
        let slot = self.scan.ac[i];
        let kx = usize::from(self.conditioning.ac_k[slot]);
        let bins = &mut self.stats.ac[slot];
        let mut k = ss;
        while k <= se {
            let mut st = 3 * (k - 1);
            if self.qm.decode(&mut bins[st]) {
                break; // end of block
            }
            while !self.qm.decode(&mut bins[st + 1]) {
                st += 3;
                k += 1;
                if k > se {
                    return Err(corrupt("arithmetic-coded run past the end of the band"));
                }
            }
            let negative = self.qm.decode(&mut self.fixed);
            let larger = if k <= kx { 189 } else { 217 };
            let v = self.qm.magnitude(bins, st + 2, larger, true)?;
            let v = if negative { -v } else { v };
            blk[ZIGZAG[k]] = v.wrapping_shl(shift) as i16;
            k += 1;
        }
        Ok(())
    }

    /// One more bit of coefficients `ss..=se` (T.81 G.1.3.3): past the last position the
    /// earlier passes reached, an end-of-block decision; a correction for each non-zero one;
    /// and zero-or-not decisions for the rest, a new one getting a sign and the bit's weight.
    fn ac_refine(&mut self, i: usize, blk: &mut [i16; 64]) -> Result<(), DecodeError> {
        let (ss, se, al) = (self.scan.ss, self.scan.se, self.scan.al);
        let (plus, minus) = (1i16 << al, (-1i16) << al);
        let bins = &mut self.stats.ac[self.scan.ac[i]];
        let last_before = (1..=se).rev().find(|&k| blk[ZIGZAG[k]] != 0).unwrap_or(0);
        let mut k = ss;
        while k <= se {
            let mut st = 3 * (k - 1);
            if k > last_before && self.qm.decode(&mut bins[st]) {
                break;
            }
            loop {
                let c = &mut blk[ZIGZAG[k]];
                if *c != 0 {
                    if self.qm.decode(&mut bins[st + 2]) {
                        *c = c.wrapping_add(if *c < 0 { minus } else { plus });
                    }
                    break;
                }
                if self.qm.decode(&mut bins[st + 1]) {
                    *c = if self.qm.decode(&mut self.fixed) {
                        minus
                    } else {
                        plus
                    };
                    break;
                }
                st += 3;
                k += 1;
                if k > se {
                    return Err(corrupt("arithmetic-coded run past the end of the band"));
                }
            }
            k += 1;
        }
        Ok(())
    }
}

impl BlockDecoder for ArithScan<'_> {
    fn restart(&mut self) -> Result<(), DecodeError> {
        let expected = (self.interval & 7) as u8;
        match self.unstuffed.interval(self.interval) {
            Some((_, Some(n))) if n == expected => {}
            _ => return Err(corrupt("missing or out-of-order restart marker")),
        }
        self.interval += 1;
        let (bytes, _) = self
            .unstuffed
            .interval(self.interval)
            .ok_or(corrupt("restart marker without data"))?;
        self.qm = Qm::new(bytes);
        self.reset_statistics();
        Ok(())
    }

    fn block(&mut self, i: usize, blk: &mut [i16; 64]) -> Result<(), DecodeError> {
        match self.pass {
            Pass::Whole => {
                self.pred[i] = self.pred[i].wrapping_add(self.dc_difference(i)?);
                blk[0] = self.pred[i] as i16;
                self.ac_first(i, blk, 0)
            }
            Pass::DcFirst => {
                self.pred[i] = self.pred[i].wrapping_add(self.dc_difference(i)?);
                blk[0] = self.pred[i].wrapping_shl(self.scan.al) as i16;
                Ok(())
            }
            Pass::DcRefine => {
                if self.qm.decode(&mut self.fixed) {
                    blk[0] |= 1 << self.scan.al;
                }
                Ok(())
            }
            Pass::AcFirst => self.ac_first(i, blk, self.scan.al),
            Pass::AcRefine => self.ac_refine(i, blk),
        }
    }

    /// Arithmetic coding reads zeros past its data, as the standard asks: nothing to check.
    fn finish(&self) -> Result<(), DecodeError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_leads_to_a_state_and_the_fixed_one_stays_put() {
        for (i, &(qe, lps, mps, _)) in STATES.iter().enumerate() {
            assert!(qe > 0 && qe < 0x8000, "state {i}");
            assert!(usize::from(lps) < STATES.len() && usize::from(mps) < STATES.len());
        }
        assert_eq!(STATES[113], (0x5a1d, 113, 113, false));
    }
}
