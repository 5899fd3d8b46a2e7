//! Huffman tables and the entropy-coded bit stream.

use crate::{DecodeError, ImageFormat};

/// Codes up to this many bits are decoded with one table lookup.
const FAST_BITS: u32 = 11;

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
    /// For AC tables: `fast_ac[peek]` decodes the next one or two coefficients (see
    /// [`AcPair`]) when their codes and magnitude bits fit in FAST_BITS (0 otherwise).
    fast_ac: [AcPair; 1 << FAST_BITS],
    /// The spec the tables were built from, and whether `fast_ac` was.
    built: Option<(HuffmanSpec, bool)>,
}

impl Default for HuffmanTable {
    fn default() -> Self {
        Self {
            fast: [0; 1 << FAST_BITS],
            maxcode: [-1; 18],
            valptr: [0; 17],
            fast_ac: [AcPair(0); 1 << FAST_BITS],
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
            let single: [AcPair; 1 << FAST_BITS] = std::array::from_fn(|i| self.single_ac(i));
            for (i, slot) in self.fast_ac.iter_mut().enumerate() {
                let first = single[i];
                *slot = first;
                if !first.found() || first.run() == EOB_RUN as usize {
                    // Nothing after an end of block belongs to this block.
                    continue;
                }
                // The next code, if its bits are all within the peek.
                let used = first.bits();
                let next = single[(i << used) & ((1 << FAST_BITS) - 1)];
                if next.0 != 0 && used + next.bits() <= FAST_BITS {
                    *slot = AcPair::pair(first, next);
                }
            }
        }
        self.built = Some((*spec, ac));
    }
}

impl HuffmanTable {
    /// The one-coefficient entry for peek `i` (0 when the code and its magnitude bits do not
    /// fit the peek, or the code is a zero run).
    fn single_ac(&self, i: usize) -> AcPair {
        let entry = self.fast[i];
        if entry == 0 {
            return AcPair(0);
        }
        let (len, rs) = (u32::from(entry >> 8), entry as u8);
        let (run, size) = (u32::from(rs >> 4), u32::from(rs & 15));
        if rs == 0 {
            return AcPair::single(len, EOB_RUN, 0);
        }
        // Zero runs (ZRL) take the table-free path.
        if size == 0 || len + size > FAST_BITS {
            return AcPair(0);
        }
        let bits = ((i as u32) >> (FAST_BITS - len - size)) & ((1 << size) - 1);
        let value = if bits < 1 << (size - 1) {
            bits as i32 - (1 << size) + 1
        } else {
            bits as i32
        };
        AcPair::single(len + size, run, value)
    }
}

/// One lookup's worth of AC coefficients: one, or two when the second's code and magnitude
/// bits also fit in the peek (short codes are the common ones, so on photos many lookups
/// decode two). Packed in a `u64`, 0 meaning "not in the table":
///
/// | bits   | field |
/// |--------|-------|
/// | 0..8   | bits consumed by both |
/// | 8..16  | bits consumed by the first alone |
/// | 16..24 | zero run before the first ([`EOB_RUN`] for the end of the block) |
/// | 24..32 | zigzag steps from the first to the second: `1 + run`, [`EOB_RUN`] when the second is the end of the block, 0 when there is no second (the first is then written twice) |
/// | 32..48 | first value (i16) |
/// | 48..64 | second value (i16) |
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AcPair(u64);

impl AcPair {
    fn single(bits: u32, run: u32, value: i32) -> Self {
        let v = u64::from(value as i16 as u16);
        Self(u64::from(bits) | u64::from(bits) << 8 | u64::from(run) << 16 | v << 32 | v << 48)
    }

    fn pair(first: Self, next: Self) -> Self {
        let gap = if next.run() == EOB_RUN as usize {
            u64::from(EOB_RUN)
        } else {
            next.run() as u64 + 1
        };
        Self(
            u64::from(first.bits() + next.bits())
                | (first.0 & 0x0000_FFFF_00FF_FF00)
                | gap << 24
                | (next.0 >> 32 & 0xFFFF) << 48,
        )
    }

    /// In the table (else decode the symbol without it).
    #[inline(always)]
    pub fn found(self) -> bool {
        self.0 != 0
    }
    /// Bits taken by all the entry decodes.
    #[inline(always)]
    pub fn bits(self) -> u32 {
        self.0 as u32 & 0xFF
    }
    /// Bits taken by the first coefficient alone.
    #[inline(always)]
    pub fn first_bits(self) -> u32 {
        (self.0 >> 8) as u32 & 0xFF
    }
    /// Zero run before the first coefficient, [`EOB_RUN`] for the end of the block.
    #[inline(always)]
    pub fn run(self) -> usize {
        (self.0 >> 16) as usize & 0xFF
    }
    /// Zigzag steps from the first coefficient to the second (see the table above).
    #[inline(always)]
    pub fn gap(self) -> usize {
        (self.0 >> 24) as usize & 0xFF
    }
    #[inline(always)]
    pub fn first(self) -> i32 {
        i32::from((self.0 >> 32) as i16)
    }
    #[inline(always)]
    pub fn second(self) -> i32 {
        i32::from((self.0 >> 48) as i16)
    }
}

/// A scan's entropy-coded data with the byte stuffing taken out, split into its restart
/// intervals, and followed by zero bytes so that the bit reader can always load 8 bytes.
///
/// Taking the stuffing out once (a `memchr` for each 0xFF, about one byte in 256 of
/// compressed data) leaves the bit reader a plain byte array: it refills without looking at
/// the bytes and without a branch.
#[derive(Debug, Default)]
pub(crate) struct Unstuffed {
    bytes: Vec<u8>,
    intervals: Vec<Interval>,
    /// Offset in the file of the marker that ended the scan (the file's length if none did).
    stop: usize,
}

/// Where a restart interval's data ends in [`Unstuffed::bytes`], and what came after it.
#[derive(Clone, Copy, Debug)]
struct Interval {
    end: usize,
    next: Terminator,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Terminator {
    /// Restart marker RSTn.
    Restart(u8),
    /// Any other marker: the scan is over.
    Marker,
    /// The file ends without a marker.
    EndOfData,
}

/// Zero bytes after the data: 8 for a load at the last allowed position, which is 8 bytes
/// past the data so that a reader held there has consumed past it (see [`BitReader::refill`]).
const PADDING: usize = 16;

impl Unstuffed {
    /// Takes the entropy-coded data starting at `data[start..]` up to the marker that ends the
    /// scan, removing stuffed zero bytes and fill bytes and noting each restart marker.
    pub fn fill(&mut self, data: &[u8], start: usize) {
        self.bytes.clear();
        self.intervals.clear();
        self.stop = data.len();
        let mut pos = start.min(data.len());
        loop {
            let Some(ff) = memchr::memchr(0xFF, &data[pos..]) else {
                self.bytes.extend_from_slice(&data[pos..]);
                self.end_interval(Terminator::EndOfData);
                break;
            };
            self.bytes.extend_from_slice(&data[pos..pos + ff]);
            pos += ff;
            match data.get(pos + 1) {
                Some(0x00) => {
                    self.bytes.push(0xFF);
                    pos += 2;
                }
                // A fill byte before a marker.
                Some(0xFF) => pos += 1,
                Some(&m @ 0xD0..=0xD7) => {
                    self.end_interval(Terminator::Restart(m - 0xD0));
                    pos += 2;
                }
                Some(_) => {
                    self.end_interval(Terminator::Marker);
                    self.stop = pos;
                    break;
                }
                None => {
                    self.end_interval(Terminator::EndOfData);
                    break;
                }
            }
        }
        self.bytes.resize(self.bytes.len() + PADDING, 0);
    }

    fn end_interval(&mut self, next: Terminator) {
        self.intervals.push(Interval {
            end: self.bytes.len(),
            next,
        });
    }

    /// Where the marker that ended the scan starts in the file (its length if none did): where
    /// the next markers are read from.
    pub fn stop(&self) -> usize {
        self.stop
    }

    /// Restart interval `i`'s bytes (unstuffed, without the padding) and the number of the
    /// restart marker that ended it (`None`: another marker or the file's end did); `None` past
    /// the last interval. For decoders that read bytes rather than bits (arithmetic coding).
    pub fn interval(&self, i: usize) -> Option<(&[u8], Option<u8>)> {
        let here = self.intervals.get(i)?;
        let start = if i == 0 { 0 } else { self.intervals[i - 1].end };
        let restart = match here.next {
            Terminator::Restart(n) => Some(n),
            Terminator::Marker | Terminator::EndOfData => None,
        };
        Some((&self.bytes[start..here.end], restart))
    }

    /// A reader at the start of the scan's first restart interval.
    pub fn reader(&self) -> BitReader<'_> {
        BitReader {
            data: &self.bytes,
            intervals: &self.intervals,
            pos: 0,
            bits: 0,
            count: 0,
            interval: 0,
        }
    }
}

/// Reads bits from a scan's unstuffed data (see [`Unstuffed`]). Past the end of a restart
/// interval it reads on (the next interval's bytes, then zeros); decoding checks at each
/// interval's end that it consumed no bits beyond it, so a short interval is an error, never
/// a silent misread.
///
/// Bits are kept MSB-first in a 64-bit buffer. [`Self::refill`] tops it up to at least 56 valid
/// bits without a branch. The block decoder calls [`Self::ensure`] before a symbol it decodes
/// without the lookup table, which refills when fewer than 32 are left (any one symbol takes
/// at most 31: a code of at most 16 bits and at most 15 magnitude bits), and
/// [`Self::ensure_peek`] before each AC lookup, which refills only when fewer than a lookup's
/// [`FAST_BITS`] are left: from 56 bits, about six lookups pass between refills instead of
/// three, so fewer of the mispredicted branches to them (cachegrind's simulation: the
/// decoder's mispredictions -18%). Refilling
/// unconditionally before every symbol measured 8% slower (and 3% on a Zen 3): the load then
/// sits on the symbol-to-symbol dependency chain. Everything on the per-symbol path is
/// inlined, and a reader whose address never escapes stays in registers.
#[derive(Clone, Copy)]
pub(crate) struct BitReader<'a> {
    data: &'a [u8],
    intervals: &'a [Interval],
    /// The next byte to load.
    pos: usize,
    bits: u64,
    /// Valid bits at the top of `bits` (below them are zeros or the stream's next bits).
    count: u32,
    /// The restart interval being read.
    interval: usize,
}

impl<'a> BitReader<'a> {
    /// Makes sure of at least 32 valid bits, enough for any one symbol.
    #[inline(always)]
    pub fn ensure(&mut self) {
        if self.count < 32 {
            self.refill();
        }
    }

    /// Makes sure of at least [`FAST_BITS`] valid bits, enough for a table entry's one or two
    /// coefficients ([`Self::peek_ac`]).
    #[inline(always)]
    pub fn ensure_peek(&mut self) {
        if self.count < FAST_BITS {
            self.refill();
        }
    }

    /// Tops the buffer up to 56..=63 valid bits.
    #[inline(always)]
    pub fn refill(&mut self) {
        // `fill` padded the data, and `pos` never passes `len - 8`, so the load is in bounds
        // (the compiler cannot see that; the check it keeps is never taken).
        let word = u64::from_be_bytes(
            self.data[self.pos..self.pos + 8]
                .try_into()
                .expect("8 bytes"),
        );
        self.bits |= word >> self.count;
        // Whole bytes taken in; the partial byte after them is loaded again next time. A reader
        // within the data moves at most 7 bytes, so it is held at `len - 8` (8 bytes into the
        // padding) only once it has consumed past the data, and then it counts at least one
        // bit consumed past it whatever `count` is: the overrun is reported.
        self.pos = (self.pos + ((63 - self.count) >> 3) as usize).min(self.data.len() - 8);
        self.count |= 56;
    }

    /// Drops `n` bits (that many valid).
    #[inline(always)]
    pub fn consume(&mut self, n: u32) {
        self.bits <<= n;
        self.count -= n;
    }

    /// Decodes one Huffman symbol (at least 16 valid bits needed: refill first).
    #[inline(always)]
    pub fn decode(&mut self, t: &HuffmanTable) -> Result<u8, DecodeError> {
        let entry = t.fast[(self.bits >> (64 - FAST_BITS)) as usize];
        if entry != 0 {
            self.consume(u32::from(entry >> 8));
            return Ok(entry as u8);
        }
        let (len, value) = long_code(self.bits, t)?;
        self.consume(len);
        Ok(value)
    }

    /// The table entry for the next one or two AC coefficients (see [`AcPair`]), without
    /// consuming anything. Refill first.
    #[inline(always)]
    pub fn peek_ac(&self, t: &HuffmanTable) -> AcPair {
        t.fast_ac[(self.bits >> (64 - FAST_BITS)) as usize]
    }

    /// Reads `s` bits (s <= 15, and that many valid) and sign-extends them as JPEG's EXTEND
    /// procedure, without a branch: whether a difference is negative is as good as random,
    /// and the DC difference of every block comes this way (cachegrind: about one in twelve
    /// mispredicted).
    #[inline(always)]
    pub fn receive_extend(&mut self, s: u32) -> i32 {
        // The top `s` bits, none when `s` is 0 (in two shifts: one by 64 would overflow).
        let v = ((self.bits >> 1) >> (63 - s)) as i32;
        self.consume(s);
        // EXTEND: with its top bit clear the value is negative, `v - (2^s - 1)`. For `s` = 0,
        // `v` is 0 and so is the correction.
        let top = (v >> (s.wrapping_sub(1) & 31)) & 1;
        v + ((top - 1) & (1 - (1 << s)))
    }

    /// Reads `n` bits (n <= 16, and that many valid) as an unsigned number.
    #[inline(always)]
    pub fn bits(&mut self, n: u32) -> u32 {
        // In two shifts, so that `n` = 0 reads nothing.
        let v = ((self.bits >> 1) >> (63 - n)) as u32;
        self.consume(n);
        v
    }

    /// Bits consumed beyond the current restart interval's data.
    fn overrun(&self) -> usize {
        // Every bit before `pos` was taken in, and `count` of them are still unread.
        (self.pos * 8)
            .saturating_sub(self.count as usize)
            .saturating_sub(self.intervals[self.interval].end * 8)
    }

    /// The current restart interval's data ran out before its last MCU.
    pub fn ends_early(&self) -> bool {
        self.overrun() > 0
    }

    /// At a restart interval's end: checks that the interval's data sufficed and that marker
    /// RSTn (`n` = `expected`) ended it, and returns the reader at the next interval's start
    /// (any bytes of this interval left unread are ignored, as encoders may pad).
    #[inline(never)]
    pub fn restart(self, expected: u8) -> Result<Self, DecodeError> {
        if self.ends_early() {
            return Err(DecodeError::corrupt(
                ImageFormat::Jpeg,
                "restart interval's data ends early",
            ));
        }
        let here = self.intervals[self.interval];
        match here.next {
            Terminator::Restart(n) if n == expected => Ok(Self {
                pos: here.end,
                bits: 0,
                count: 0,
                interval: self.interval + 1,
                ..self
            }),
            Terminator::Restart(_) | Terminator::Marker => Err(DecodeError::corrupt(
                ImageFormat::Jpeg,
                "missing or out-of-order restart marker",
            )),
            Terminator::EndOfData => Err(DecodeError::Truncated {
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

    fn unstuffed(bytes: &[u8]) -> Unstuffed {
        let mut u = Unstuffed::default();
        u.fill(bytes, 0);
        u
    }

    /// Decodes one AC coefficient the way the block decoder does: the table first.
    fn ac(bytes: &[u8], t: &HuffmanTable) -> (usize, i32) {
        // (EOB_RUN, 0) is the end of the block.
        let scan = unstuffed(bytes);
        let mut br = scan.reader();
        br.refill();
        let e = br.peek_ac(t);
        if e.found() {
            return (e.run(), e.first());
        }
        let rs = br.decode(t).unwrap();
        (usize::from(rs >> 4), br.receive_extend(u32::from(rs & 15)))
    }

    /// Reads `n` bits (n <= 16) as a number.
    fn bits(br: &mut BitReader<'_>, n: u32) -> u32 {
        br.ensure();
        let v = (br.bits >> (64 - n)) as u32;
        br.consume(n);
        v
    }

    #[test]
    fn unstuffing_drops_stuffed_zeros_and_fill_bytes_and_splits_at_restart_markers() {
        // 12 FF00 34 | RST0 | 56 | fill, RST1 | 78 | EOI, then bytes after the scan.
        let data = [
            0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD0, 0x56, 0xFF, 0xFF, 0xD1, 0x78, 0xFF, 0xD9, 0x99,
        ];
        let scan = unstuffed(&data);
        assert_eq!(&scan.bytes[..5], &[0x12, 0xFF, 0x34, 0x56, 0x78]);
        assert!(scan.bytes[5..].iter().all(|&b| b == 0));
        let ends: Vec<_> = scan.intervals.iter().map(|i| (i.end, i.next)).collect();
        assert_eq!(
            ends,
            [
                (3, Terminator::Restart(0)),
                (4, Terminator::Restart(1)),
                (5, Terminator::Marker)
            ]
        );

        let mut br = scan.reader();
        assert_eq!(bits(&mut br, 16), 0x12FF);
        // 4 of the interval's 8 remaining bits left unread: ignored, as encoders pad.
        assert_eq!(bits(&mut br, 4), 0x3);
        let mut br = br.restart(0).unwrap();
        assert_eq!(bits(&mut br, 8), 0x56);
        let mut br = br.restart(1).unwrap();
        assert_eq!(bits(&mut br, 8), 0x78);
        assert!(!br.ends_early());
        // One bit more than the last interval holds.
        bits(&mut br, 1);
        assert!(br.ends_early());
    }

    #[test]
    fn a_short_interval_or_a_wrong_restart_marker_is_an_error() {
        let scan = unstuffed(&[0x12, 0xFF, 0xD0, 0x56, 0xFF, 0xD5, 0x78]);
        let mut br = scan.reader();
        // Reading 9 bits of a one-byte interval runs into the next interval's data.
        bits(&mut br, 9);
        assert!(br.restart(0).is_err());
        // RST5 where RST1 is due.
        let mut br = scan.reader();
        bits(&mut br, 8);
        let br = br.restart(0).unwrap();
        assert!(br.restart(1).is_err());
        // The data ends where a restart marker is due.
        let scan = unstuffed(&[0x12, 0x34]);
        assert!(matches!(
            scan.reader().restart(0),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn end_of_block_and_coefficient_pairs_come_from_the_table_and_zero_runs_do_not() {
        // "0": end of block; "10": zero run of 16 (ZRL); "11": (run 0, size 1).
        let mut counts = [0u8; 16];
        counts[0] = 1;
        counts[1] = 2;
        let t = HuffmanTable::new(&counts, &[0x00, 0xF0, 0x01]).unwrap();
        let scan = unstuffed(&[0b0111_1100, 0, 0, 0]);
        let mut br = scan.reader();
        br.refill();
        // Nothing is paired with an end of block: what follows it is the next block's.
        let e = br.peek_ac(&t);
        assert_eq!(
            (e.run(), e.first(), e.gap(), e.bits()),
            (EOB_RUN as usize, 0, 0, 1)
        );
        br.consume(e.bits());
        // Then "11" + "1": +1 and "11" + "0": -1 in one lookup, then "0": end of block.
        let e = br.peek_ac(&t);
        assert_eq!((e.run(), e.first(), e.gap(), e.second()), (0, 1, 1, -1));
        assert_eq!((e.bits(), e.first_bits()), (6, 3));
        br.consume(e.bits());
        assert_eq!(br.peek_ac(&t).run(), EOB_RUN as usize);
        let scan = unstuffed(&[0b1000_0000, 0, 0, 0]);
        let mut br = scan.reader();
        br.refill();
        assert!(!br.peek_ac(&t).found());
        assert_eq!(br.decode(&t).unwrap(), 0xF0);
    }

    #[test]
    fn receive_extend_follows_the_standards_extend_for_every_size_and_value() {
        for s in 0..=15u32 {
            for v in 0..1u32 << s {
                // The `s` bits of `v`, then ones, which must not leak into the value.
                let scan = unstuffed(&[]);
                let mut br = scan.reader();
                br.bits = u64::from(v).checked_shl(64 - s).unwrap_or(0) | (u64::MAX >> s);
                br.count = 56;
                let expected = if s == 0 {
                    0
                } else if v < 1 << (s - 1) {
                    v as i32 - (1 << s) + 1
                } else {
                    v as i32
                };
                assert_eq!(br.receive_extend(s), expected, "s = {s}, v = {v}");
                assert_eq!(br.count, 56 - s, "s = {s}");
            }
        }
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
