//! Huffman tables and the entropy-coded bit stream.

use crate::{DecodeError, ImageFormat};

/// Codes up to this many bits are decoded with one table lookup.
const FAST_BITS: u32 = 10;

/// The run [`BitReader::decode_ac_fast`] gives for the end of a block: more than any block has
/// left.
pub(crate) const EOB_RUN: u32 = 64;

/// A Huffman table as a DHT segment defines it: code counts per length and the values in
/// code order. Checked when parsed; the lookup tables are built from it only when a scan is
/// decoded (a probe needs none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HuffmanSpec {
    counts: [u8; 16],
    values: [u8; 256],
    len: u16,
}

impl HuffmanSpec {
    /// Checks that the counts describe a canonical code (no length has more codes than fit).
    pub fn new(counts: &[u8; 16], values: &[u8]) -> Result<Self, DecodeError> {
        let total: usize = counts.iter().map(|&c| usize::from(c)).sum();
        if values.len() != total || total > 256 {
            return Err(DecodeError::corrupt(
                ImageFormat::Jpeg,
                "Huffman table has too many codes",
            ));
        }
        let mut code: u32 = 0;
        for (i, &n) in counts.iter().enumerate() {
            code += u32::from(n);
            if code > 1 << (i + 1) {
                return Err(DecodeError::corrupt(
                    ImageFormat::Jpeg,
                    "Huffman table has too many codes",
                ));
            }
            code <<= 1;
        }
        let mut spec = Self {
            counts: *counts,
            values: [0; 256],
            len: total as u16,
        };
        spec.values[..total].copy_from_slice(values);
        Ok(spec)
    }

    fn values(&self) -> &[u8] {
        &self.values[..usize::from(self.len)]
    }
}

#[derive(Clone, Debug)]
pub(crate) struct HuffmanTable {
    /// `fast[peek]`: `(length << 8) | value` for codes of at most FAST_BITS bits, 0 otherwise.
    fast: [u16; 1 << FAST_BITS],
    /// For lengths 1..=16: largest code of that length (-1 if none), and the index offset.
    maxcode: [i32; 18],
    valptr: [i32; 17],
    /// For AC tables: `fast_ac[peek]` = `value << 16 | run << 8 | total_bits` when the code and
    /// its magnitude bits fit in FAST_BITS (0 otherwise): one lookup per coefficient. The end
    /// of block is in it too, as value 0 with run [`EOB_RUN`].
    fast_ac: [i32; 1 << FAST_BITS],
    /// The spec the tables were built from, and whether `fast_ac` was.
    built: Option<(HuffmanSpec, bool)>,
}

impl Default for HuffmanTable {
    fn default() -> Self {
        Self {
            fast: [0; 1 << FAST_BITS],
            maxcode: [-1; 18],
            valptr: [0; 17],
            fast_ac: [0; 1 << FAST_BITS],
            built: None,
        }
    }
}

impl HuffmanTable {
    /// A table for the code `counts`/`values`, with the combined AC table.
    #[cfg(test)]
    pub fn new(counts: &[u8; 16], values: &[u8]) -> Result<Self, DecodeError> {
        let mut t = Self::default();
        t.build(&HuffmanSpec::new(counts, values)?, true);
        Ok(t)
    }

    /// Makes this the table for `spec` (with the combined AC table when `ac`), reusing its
    /// memory; nothing is done when it already is.
    pub fn build(&mut self, spec: &HuffmanSpec, ac: bool) {
        if self.built.as_ref() == Some(&(*spec, ac)) {
            return;
        }
        self.fast.fill(0);
        self.maxcode = [-1; 18];
        self.valptr = [0; 17];
        let values = spec.values();
        let mut code: u32 = 0;
        let mut k = 0usize;
        for len in 1..=16u32 {
            let n = usize::from(spec.counts[len as usize - 1]);
            self.valptr[len as usize] = k as i32 - code as i32;
            if n > 0 {
                // `HuffmanSpec::new` checked that the codes fit.
                for _ in 0..n {
                    if len <= FAST_BITS {
                        let shift = FAST_BITS - len;
                        let entry = ((len as u16) << 8) | u16::from(values[k]);
                        let first = (code << shift) as usize;
                        self.fast[first..first + (1 << shift)].fill(entry);
                    }
                    code += 1;
                    k += 1;
                }
                self.maxcode[len as usize] = code as i32 - 1;
            }
            code <<= 1;
        }
        self.maxcode[17] = i32::MAX;
        if ac {
            for (i, slot) in self.fast_ac.iter_mut().enumerate() {
                *slot = 0;
                let entry = self.fast[i];
                if entry == 0 {
                    continue;
                }
                let (len, rs) = (u32::from(entry >> 8), entry as u8);
                let (run, size) = (u32::from(rs >> 4), u32::from(rs & 15));
                if rs == 0 {
                    // End of block: a run past any block's end, so the block decoder learns of
                    // it only on its (rare) overrun check.
                    *slot = (EOB_RUN << 8) as i32 | len as i32;
                    continue;
                }
                // Zero runs (ZRL) take the table-free path.
                if size == 0 || len + size > FAST_BITS {
                    continue;
                }
                let bits = ((i as u32) >> (FAST_BITS - len - size)) & ((1 << size) - 1);
                let value = if bits < 1 << (size - 1) {
                    bits as i32 - (1 << size) + 1
                } else {
                    bits as i32
                };
                *slot = (value << 16) | (run << 8) as i32 | (len + size) as i32;
            }
        }
        self.built = Some((*spec, ac));
    }
}

/// Reads bits from entropy-coded data, removing stuffed zero bytes. At a marker it stops and
/// supplies zero bits, remembering that it hit one.
///
/// Everything on the per-symbol path is inlined, and the rare paths (a refill near a marker or
/// the end, a code longer than the lookup table, a restart) take the reader by value: a reader
/// whose address never escapes stays in registers in the decoding loop instead of being stored
/// to the stack after every symbol.
#[derive(Clone, Copy)]
pub(crate) struct BitReader<'a> {
    data: &'a [u8],
    pos: usize,
    bits: u64,
    count: u32,
    /// A marker (or the end of the data) was reached; the bits after it are padding.
    pub at_marker: bool,
    /// Zero bytes supplied past the data (or the current restart interval's data).
    overrun: u32,
}

impl<'a> BitReader<'a> {
    pub fn new(data: &'a [u8], pos: usize) -> Self {
        Self {
            data,
            pos,
            bits: 0,
            count: 0,
            at_marker: false,
            overrun: 0,
        }
    }

    #[inline(always)]
    fn refill(&mut self) {
        // Fast path: 8 bytes without any 0xFF (so no stuffing and no marker) go in at once.
        if !self.at_marker {
            if let Some(chunk) = self.data.get(self.pos..self.pos + 8) {
                let word = u64::from_be_bytes(chunk.try_into().expect("8 bytes"));
                let inv = !word;
                let has_ff = inv.wrapping_sub(0x0101_0101_0101_0101) & !inv & 0x8080_8080_8080_8080;
                if has_ff == 0 {
                    let nbytes = (64 - self.count) / 8;
                    let take = word >> (64 - 8 * nbytes);
                    self.bits |= take << (64 - self.count - 8 * nbytes);
                    self.count += 8 * nbytes;
                    self.pos += nbytes as usize;
                    return;
                }
            }
        }
        *self = Self::refill_bytewise(*self);
    }

    /// Refills byte by byte, handling stuffing, markers and the end of the data.
    #[cold]
    #[inline(never)]
    fn refill_bytewise(mut self) -> Self {
        while self.count <= 56 {
            let byte = if self.at_marker {
                self.overrun += 1;
                0
            } else {
                match self.data.get(self.pos) {
                    None => {
                        self.at_marker = true;
                        self.overrun += 1;
                        0
                    }
                    Some(&0xFF) => match self.data.get(self.pos + 1) {
                        Some(0x00) => {
                            self.pos += 2;
                            0xFF
                        }
                        _ => {
                            self.at_marker = true;
                            self.overrun += 1;
                            0
                        }
                    },
                    Some(&b) => {
                        self.pos += 1;
                        b
                    }
                }
            };
            self.bits |= u64::from(byte) << (56 - self.count);
            self.count += 8;
        }
        self
    }

    #[inline(always)]
    fn peek(&mut self, n: u32) -> u32 {
        if self.count < n {
            self.refill();
        }
        (self.bits >> (64 - n)) as u32
    }

    #[inline(always)]
    fn consume(&mut self, n: u32) {
        self.bits <<= n;
        self.count -= n;
    }

    /// Decodes one Huffman symbol.
    #[inline(always)]
    pub fn decode(&mut self, t: &HuffmanTable) -> Result<u8, DecodeError> {
        if self.count < 16 {
            self.refill();
        }
        let entry = t.fast[(self.bits >> (64 - FAST_BITS)) as usize];
        if entry != 0 {
            self.consume(u32::from(entry >> 8));
            return Ok(entry as u8);
        }
        let (len, value) = long_code(self.bits, t)?;
        self.consume(len);
        Ok(value)
    }

    /// Decodes one AC coefficient with the combined table: `Some((run, value))`, where
    /// `(EOB_RUN, 0)` is the end of the block, or `None` when the code is not in it (then use
    /// [`Self::decode`]).
    #[inline(always)]
    pub fn decode_ac_fast(&mut self, t: &HuffmanTable) -> Option<(usize, i32)> {
        if self.count < 16 {
            self.refill();
        }
        let f = t.fast_ac[(self.bits >> (64 - FAST_BITS)) as usize];
        if f == 0 {
            return None;
        }
        self.consume(f as u32 & 0xFF);
        Some((((f as u32 >> 8) & 0xFF) as usize, f >> 16))
    }

    /// Reads `s` bits (s <= 16) and sign-extends them as JPEG's EXTEND procedure.
    #[inline(always)]
    pub fn receive_extend(&mut self, s: u32) -> i32 {
        if s == 0 {
            return 0;
        }
        let v = self.peek(s) as i32;
        self.consume(s);
        if v < 1 << (s - 1) {
            v - (1 << s) + 1
        } else {
            v
        }
    }

    /// Skips `s` bits.
    #[inline(always)]
    pub fn skip(&mut self, s: u32) {
        if s > 0 {
            self.peek(s);
            self.consume(s);
        }
    }

    /// Padding bits actually consumed: decoding needed more data than there was.
    pub fn padding_consumed(&self) -> u32 {
        (self.overrun * 8).saturating_sub(self.count)
    }

    /// At a restart interval's end: drops the partial byte and expects marker RSTn. Returns
    /// the reader positioned after the marker.
    #[inline(never)]
    pub fn restart(mut self, expected: u8) -> Result<Self, DecodeError> {
        if self.padding_consumed() > 0 {
            return Err(DecodeError::corrupt(
                ImageFormat::Jpeg,
                "restart interval's data ends early",
            ));
        }
        self.overrun = 0;
        self.bits = 0;
        self.count = 0;
        // Skip any remaining stuffed data up to the marker (tolerates encoders' padding).
        while self.pos + 1 < self.data.len()
            && !(self.data[self.pos] == 0xFF
                && self.data[self.pos + 1] != 0x00
                && self.data[self.pos + 1] != 0xFF)
        {
            self.pos += 1;
        }
        match self.data.get(self.pos..self.pos + 2) {
            Some([0xFF, m]) if *m == 0xD0 + expected => {
                self.pos += 2;
                self.at_marker = false;
                Ok(self)
            }
            Some(_) => Err(DecodeError::corrupt(
                ImageFormat::Jpeg,
                "missing or out-of-order restart marker",
            )),
            None => Err(DecodeError::Truncated {
                format: ImageFormat::Jpeg,
                detail: "data ends before a restart marker",
            }),
        }
    }
}

/// A code longer than the lookup table: its length and value, found from the canonical
/// code's per-length limits. `bits` holds at least 16 valid bits at the top.
#[cold]
#[inline(never)]
fn long_code(bits: u64, t: &HuffmanTable) -> Result<(u32, u8), DecodeError> {
    for len in FAST_BITS + 1..=16 {
        let code = (bits >> (64 - len)) as i32;
        if code <= t.maxcode[len as usize] {
            let idx = (t.valptr[len as usize] + code) as usize;
            return match t.built {
                Some((spec, _)) if idx < usize::from(spec.len) => Ok((len, spec.values[idx])),
                _ => Err(DecodeError::corrupt(ImageFormat::Jpeg, "bad Huffman code")),
            };
        }
    }
    Err(DecodeError::corrupt(ImageFormat::Jpeg, "bad Huffman code"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes one AC coefficient the way the block decoder does: the combined table first.
    fn ac(bytes: &[u8], t: &HuffmanTable) -> (usize, i32) {
        // (EOB_RUN, 0) is the end of the block.
        let mut br = BitReader::new(bytes, 0);
        if let Some(rv) = br.decode_ac_fast(t) {
            return rv;
        }
        let rs = br.decode(t).unwrap();
        (usize::from(rs >> 4), br.receive_extend(u32::from(rs & 15)))
    }

    #[test]
    fn end_of_block_comes_from_the_combined_table_and_zero_runs_do_not() {
        // "0": end of block; "10": zero run of 16 (ZRL); "11": (run 0, size 1).
        let mut counts = [0u8; 16];
        counts[0] = 1;
        counts[1] = 2;
        let t = HuffmanTable::new(&counts, &[0x00, 0xF0, 0x01]).unwrap();
        let mut br = BitReader::new(&[0b0111_1100, 0, 0, 0], 0);
        assert_eq!(br.decode_ac_fast(&t), Some((EOB_RUN as usize, 0)));
        // Then "11" + "1": +1; then "11" + "0": -1; then "0": end of block.
        assert_eq!(br.decode_ac_fast(&t), Some((0, 1)));
        assert_eq!(br.decode_ac_fast(&t), Some((0, -1)));
        assert_eq!(br.decode_ac_fast(&t), Some((EOB_RUN as usize, 0)));
        let mut br = BitReader::new(&[0b1000_0000, 0, 0, 0], 0);
        assert_eq!(br.decode_ac_fast(&t), None);
        assert_eq!(br.decode(&t).unwrap(), 0xF0);
    }

    #[test]
    fn large_ac_values_with_short_codes_decode_exactly() {
        // One 1-bit code for (run 0, size 8), one 2-bit code for (run 2, size 7).
        let mut counts = [0u8; 16];
        counts[0] = 1;
        counts[1] = 1;
        let t = HuffmanTable::new(&counts, &[0x08, 0x27]).unwrap();
        // "0" then 8 magnitude bits 11111111: +255, which does not fit the combined entry's byte.
        assert_eq!(ac(&[0b0111_1111, 0b1000_0000, 0, 0], &t), (0, 255));
        // "0" then 00000000: -255.
        assert_eq!(ac(&[0b0000_0000, 0b0000_0000, 0, 0], &t), (0, -255));
        // "10" then 1000000: +64 after a run of 2.
        assert_eq!(ac(&[0b1010_0000, 0b0000_0000, 0, 0], &t), (2, 64));
    }
}
