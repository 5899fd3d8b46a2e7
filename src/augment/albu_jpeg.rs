//! albumentations' `ImageCompression` (JPEG) of a uint8 RGB image: a quality drawn as
//! `randint(lo, hi)`, then the image through `cv2.imencode(".jpg")` and `cv2.imdecode`.
//!
//! OpenCV hands the image to libjpeg-turbo as BGR, with libjpeg's defaults (YCbCr at 4:2:0,
//! the accurate integer DCT "islow", the standard tables scaled by the quality, no smoothing),
//! and decodes it back to BGR with libjpeg-turbo's defaults. albumentations passes its RGB
//! array unchanged, so the first channel is encoded as blue and comes back in its place. The
//! round trip is reproduced here to the bit:
//!
//! - [`encode`] computes libjpeg's quantized coefficients: its colour conversion (16-bit
//!   fixed point, the chroma offsets rounded down by one), its edge handling (columns repeated
//!   to a whole number of chroma blocks before subsampling, an odd last row repeated, then each
//!   plane's last row repeated to the MCU), its 2x2 subsampling (sums biased 1, 2, 1, 2 along a
//!   row), the "islow" forward DCT, and its quantization by reciprocal multiplication. It
//!   writes them as a baseline JPEG whose Huffman tables are fixed-length codes: the entropy
//!   coding is lossless, so only the coefficients matter.
//! - The bytes are then decoded by hpuload's host JPEG decoder, whose pixels are
//!   libjpeg-turbo's ("islow" inverse DCT, fancy upsampling, its colour tables).
//!
//! Tested against `cv2.imencode`/`cv2.imdecode` (a fixture here, and albumentations' own
//! `apply` over random images, sizes and qualities in the Python suite).

use serde::{Deserialize, Serialize};

use hpuload_decoders::jpeg::{Region, Scale, ZIGZAG};
use hpuload_decoders::{JpegDecoder, Limits};

use super::error::PipelineError;
use super::pixel::PixelOp;
use super::spec::{half, probability, OpKind, OpSpec};
use crate::rng::CounterRng;

/// albumentations' `ImageCompression(compression_type="jpeg", quality_range, p)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuImageCompression {
    /// The quality's range (inclusive), 1 to 100. Default `[99, 100]`.
    #[serde(default = "near_lossless")]
    pub quality_range: [u8; 2],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn near_lossless() -> [u8; 2] {
    [99, 100]
}

impl OpSpec for AlbuImageCompression {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_image_compression")?;
        let [lo, hi] = self.quality_range;
        if lo < 1 || lo > hi || hi > 100 {
            return Err(PipelineError::Parameter(format!(
                "albu_image_compression quality_range {:?} must be a range within 1..=100",
                self.quality_range
            )));
        }
        Ok(())
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if !super::spec::coin(rng, self.p) {
            return;
        }
        let [lo, hi] = self.quality_range;
        let quality = rng.int_in(i64::from(lo), i64::from(hi)) as u8;
        out.push(PixelOp::JpegRoundTrip(quality));
    }
}

/// The largest side libjpeg (and so OpenCV) encodes.
const MAX_SIDE: usize = 65_500;

/// What the round trip keeps between images: the encoded bytes, the planes, the decoder.
#[derive(Default)]
pub struct JpegScratch {
    planes: Planes,
    bytes: Vec<u8>,
    /// Boxed and made on first use: its tables make it large.
    decoder: Option<Box<JpegDecoder>>,
}

/// Sends the `h`x`w` RGB8 image through OpenCV's JPEG encoding at `quality` and back, in place.
/// An image larger than JPEG allows (65,500 a side, where `cv2.imencode` fails) is left as it
/// is, with a warning.
pub fn round_trip(rgb: &mut [u8], h: usize, w: usize, quality: u8, s: &mut JpegScratch) {
    if h == 0 || w == 0 {
        return;
    }
    if h > MAX_SIDE || w > MAX_SIDE {
        tracing::warn!("image_compression: a {w}x{h} image is larger than JPEG allows; left as is");
        return;
    }
    s.bytes.clear();
    encode(rgb, h, w, quality, &mut s.planes, &mut s.bytes);
    // Limits that take whatever `encode` writes: the image was decoded already.
    let mut limits = Limits::default();
    limits.max_pixels = u64::MAX;
    limits.max_dimension = MAX_SIDE as u32;
    let decoder = s
        .decoder
        .get_or_insert_with(|| Box::new(JpegDecoder::for_host(limits)));
    let region = Region::full(w as u32, h as u32);
    decoder
        .decode_region(&s.bytes, region, Scale::FULL, rgb)
        .expect("a JPEG written by `encode` decodes");
    // Decoded as RGB, it holds what was encoded as blue first: put channels back.
    for px in rgb.chunks_exact_mut(3) {
        px.swap(0, 2);
    }
}

/// The image's planes at libjpeg's padded sizes.
#[derive(Default)]
struct Planes {
    y: Vec<u8>,
    cb: Vec<u8>,
    cr: Vec<u8>,
    /// Full-resolution chroma of a pair of rows, before subsampling.
    row_cb: Vec<u8>,
    row_cr: Vec<u8>,
}

/// libjpeg's `FIX(x)` at 16 bits.
const fn fix16(x: f64) -> i32 {
    (x * 65536.0 + 0.5) as i32
}

/// libjpeg's colour conversion of one pixel (`r`, `g`, `b` as libjpeg names them).
#[inline(always)]
fn ycc(r: i32, g: i32, b: i32) -> (u8, u8, u8) {
    const HALF: i32 = 1 << 15;
    const OFFSET: i32 = 128 << 16;
    let y = (fix16(0.299) * r + fix16(0.587) * g + fix16(0.114) * b + HALF) >> 16;
    let cb = (-fix16(0.16874) * r - fix16(0.33126) * g + fix16(0.5) * b + OFFSET + HALF - 1) >> 16;
    let cr = (fix16(0.5) * r - fix16(0.41869) * g - fix16(0.08131) * b + OFFSET + HALF - 1) >> 16;
    (y as u8, cb as u8, cr as u8)
}

/// Fills `p` with the image's planes as libjpeg prepares them for 4:2:0: luma `wp`x`hp`,
/// chroma `wp/2`x`hp/2`, where `wp` and `hp` are the sizes rounded up to 16 (the MCU).
/// Channel 0 of each pixel is encoded as blue, channel 2 as red (OpenCV's BGR).
#[inline(always)]
fn prepare(rgb: &[u8], h: usize, w: usize, p: &mut Planes) -> (usize, usize) {
    let (wp, hp) = (w.div_ceil(16) * 16, h.div_ceil(16) * 16);
    // Rows converted: the image's, its last repeated once to make the row pairs even.
    let h2 = h.div_ceil(2) * 2;
    p.y.resize(wp * hp, 0);
    p.cb.resize(wp / 2 * hp / 2, 0);
    p.cr.resize(wp / 2 * hp / 2, 0);
    p.row_cb.resize(2 * wp, 0);
    p.row_cr.resize(2 * wp, 0);
    for pair in 0..h2 / 2 {
        for dy in 0..2 {
            let y = (2 * pair + dy).min(h - 1);
            let src = &rgb[y * w * 3..][..w * 3];
            let luma = &mut p.y[(2 * pair + dy) * wp..][..wp];
            let (cbs, crs) = (
                &mut p.row_cb[dy * wp..][..wp],
                &mut p.row_cr[dy * wp..][..wp],
            );
            for (((px, l), cb), cr) in src
                .chunks_exact(3)
                .zip(luma.iter_mut())
                .zip(cbs.iter_mut())
                .zip(crs.iter_mut())
            {
                (*l, *cb, *cr) = ycc(i32::from(px[2]), i32::from(px[1]), i32::from(px[0]));
            }
            // Columns past the image repeat its last (libjpeg's `expand_right_edge`), and so
            // do their values.
            for plane in [luma, cbs, crs] {
                let last = plane[w - 1];
                plane[w..].fill(last);
            }
        }
        let at = pair * wp / 2;
        for (rows, out) in [(&p.row_cb, &mut p.cb), (&p.row_cr, &mut p.cr)] {
            let (top, bottom) = rows.split_at(wp);
            for (cx, o) in out[at..at + wp / 2].iter_mut().enumerate() {
                let bias = 1 + (cx & 1) as u32;
                let sum = u32::from(top[2 * cx])
                    + u32::from(top[2 * cx + 1])
                    + u32::from(bottom[2 * cx])
                    + u32::from(bottom[2 * cx + 1]);
                *o = ((sum + bias) >> 2) as u8;
            }
        }
    }
    // Each plane's last row repeated to the MCU's height (libjpeg's `expand_bottom_edge`).
    repeat_last_row(&mut p.y, wp, h2, hp);
    repeat_last_row(&mut p.cb, wp / 2, h2 / 2, hp / 2);
    repeat_last_row(&mut p.cr, wp / 2, h2 / 2, hp / 2);
    (wp, hp)
}

fn repeat_last_row(plane: &mut [u8], width: usize, rows: usize, to: usize) {
    let (filled, rest) = plane.split_at_mut(rows * width);
    let last = &filled[(rows - 1) * width..];
    for row in rest[..(to - rows) * width].chunks_exact_mut(width) {
        row.copy_from_slice(last);
    }
}

/// The standard tables of the JPEG standard's Annex K, natural order: luminance, chrominance.
const BASE_TABLES: [[u8; 64]; 2] = [
    [
        16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69,
        56, 14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81,
        104, 113, 92, 49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99,
    ],
    [
        17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99, 24, 26, 56, 99, 99, 99, 99,
        99, 47, 66, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
        99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    ],
];

/// libjpeg's `jpeg_set_quality(quality, force_baseline=TRUE)`: a table scaled by the quality.
fn scaled_table(base: &[u8; 64], quality: u8) -> [u8; 64] {
    let q = u32::from(quality.clamp(1, 100));
    let scale = if q < 50 { 5000 / q } else { 200 - 2 * q };
    base.map(|b| ((u32::from(b) * scale + 50) / 100).clamp(1, 255) as u8)
}

/// libjpeg-turbo's quantization of one coefficient position: a division by `divisor`
/// (rounded half away from zero) done as a multiplication by a reciprocal.
#[derive(Clone, Copy, Default)]
struct Reciprocal {
    multiplier: u32,
    correction: u32,
    shift: u32,
}

impl Reciprocal {
    fn of(divisor: u32) -> Self {
        let b = 31 - divisor.leading_zeros();
        let mut r = 16 + b;
        let mut multiplier = (1u64 << r) / u64::from(divisor);
        let rest = (1u64 << r) % u64::from(divisor);
        let mut correction = divisor / 2;
        if rest == 0 {
            multiplier >>= 1;
            r -= 1;
        } else if rest <= u64::from(divisor / 2) {
            correction += 1;
        } else {
            multiplier += 1;
        }
        Self {
            multiplier: multiplier as u32,
            correction,
            shift: r,
        }
    }

    /// `x` quantized. `|x| + correction` stays under 2^16 (8-bit samples' coefficients are
    /// under 2^14, the correction under 2^11) and the multiplier is at most 2^16, so the
    /// product fits 32 bits, as in libjpeg-turbo's 16-bit lanes.
    #[inline(always)]
    fn quantize(self, x: i32) -> i32 {
        let q = ((x.unsigned_abs() + self.correction) * self.multiplier) >> self.shift;
        let sign = x >> 31;
        (q as i32 ^ sign) - sign
    }
}

/// A table's [`Reciprocal`]s by field, so that quantizing a block vectorizes.
struct Quantizer {
    multiplier: [u32; 64],
    correction: [u32; 64],
    shift: [u32; 64],
}

impl Quantizer {
    /// For a quantization table (natural order): libjpeg-turbo divides the DCT's output,
    /// scaled up by 8, by eight times each entry.
    fn new(table: &[u8; 64]) -> Self {
        let r = table.map(|q| Reciprocal::of(u32::from(q) * 8));
        Self {
            multiplier: r.map(|r| r.multiplier),
            correction: r.map(|r| r.correction),
            shift: r.map(|r| r.shift),
        }
    }

    #[inline(always)]
    fn quantize(&self, coefficients: &[i32; 64]) -> [i32; 64] {
        std::array::from_fn(|i| {
            Reciprocal {
                multiplier: self.multiplier[i],
                correction: self.correction[i],
                shift: self.shift[i],
            }
            .quantize(coefficients[i])
        })
    }
}

/// Transforms, quantizes and entropy codes blocks in scan order.
struct BlockCoder<'a, 'b> {
    bits: Bits<'b>,
    /// Each component's last DC.
    pred: [i32; 3],
    ac_code: &'a [u8; 256],
}

impl BlockCoder<'_, '_> {
    /// The block whose top-left sample is `plane[0]` (rows `stride` apart), of component `c`.
    #[inline(always)]
    fn code(&mut self, plane: &[u8], stride: usize, c: usize, quantizer: &Quantizer) {
        let mut columns = [[0i32; 8]; 8];
        for r in 0..8 {
            for (k, &sample) in plane[r * stride..][..8].iter().enumerate() {
                columns[k][r] = i32::from(sample) - 128;
            }
        }
        let coefficients = forward_dct(&columns);
        let q = quantizer.quantize(coefficients.as_flattened().try_into().expect("64"));
        code_block(&mut self.bits, &q, &mut self.pred[c], self.ac_code);
    }
}

/// libjpeg's accurate integer forward DCT ("islow", `jfdctint.c`'s arithmetic) of a block
/// given by columns (`block[k][r]`: row `r`, column `k`, less 128): the coefficients scaled up
/// by 8, `out[v][u]` for vertical frequency `v`, horizontal `u` (natural order `v * 8 + u`).
/// Each pass runs its eight 1-D transforms side by side, one per lane (rows, then columns), so
/// the compiler vectorizes them.
#[inline(always)]
fn forward_dct(block: &[[i32; 8]; 8]) -> [[i32; 8]; 8] {
    let rows = dct_pass::<true>(block);
    // The first pass's output by columns is its transpose: the second pass's input by lanes.
    let by_rows: [[i32; 8]; 8] = std::array::from_fn(|k| std::array::from_fn(|c| rows[c][k]));
    dct_pass::<false>(&by_rows)
}

/// One pass of [`forward_dct`]: `out[k][l]` is output `k` of lane `l`'s transform of
/// `v[0..8][l]`. The first pass scales the even outputs up by `PASS1_BITS`; the second brings
/// every output back down.
#[inline(always)]
fn dct_pass<const FIRST: bool>(v: &[[i32; 8]; 8]) -> [[i32; 8]; 8] {
    const CONST_BITS: u32 = 13;
    const PASS1_BITS: u32 = 2;
    const fn fix13(x: f64) -> i32 {
        (x * 8192.0 + 0.5) as i32
    }
    #[inline(always)]
    fn descale(x: i32, n: u32) -> i32 {
        (x + (1 << (n - 1))) >> n
    }
    let odd_shift = if FIRST {
        CONST_BITS - PASS1_BITS
    } else {
        CONST_BITS + PASS1_BITS
    };
    let mut out = [[0i32; 8]; 8];
    for l in 0..8 {
        let (tmp0, tmp7) = (v[0][l] + v[7][l], v[0][l] - v[7][l]);
        let (tmp1, tmp6) = (v[1][l] + v[6][l], v[1][l] - v[6][l]);
        let (tmp2, tmp5) = (v[2][l] + v[5][l], v[2][l] - v[5][l]);
        let (tmp3, tmp4) = (v[3][l] + v[4][l], v[3][l] - v[4][l]);
        let (tmp10, tmp13) = (tmp0 + tmp3, tmp0 - tmp3);
        let (tmp11, tmp12) = (tmp1 + tmp2, tmp1 - tmp2);
        let even = |x: i32| {
            if FIRST {
                x << PASS1_BITS
            } else {
                descale(x, PASS1_BITS)
            }
        };
        out[0][l] = even(tmp10 + tmp11);
        out[4][l] = even(tmp10 - tmp11);
        let z1 = (tmp12 + tmp13) * fix13(0.541196100);
        out[2][l] = descale(z1 + tmp13 * fix13(0.765366865), odd_shift);
        out[6][l] = descale(z1 - tmp12 * fix13(1.847759065), odd_shift);
        // The odd part.
        let (z1, z2) = (tmp4 + tmp7, tmp5 + tmp6);
        let (z3, z4) = (tmp4 + tmp6, tmp5 + tmp7);
        let z5 = (z3 + z4) * fix13(1.175875602);
        let t4 = tmp4 * fix13(0.298631336);
        let t5 = tmp5 * fix13(2.053119869);
        let t6 = tmp6 * fix13(3.072711026);
        let t7 = tmp7 * fix13(1.501321110);
        let z1 = -z1 * fix13(0.899976223);
        let z2 = -z2 * fix13(2.562915447);
        let z3 = -z3 * fix13(1.961570560) + z5;
        let z4 = -z4 * fix13(0.390180644) + z5;
        out[7][l] = descale(t4 + z1 + z3, odd_shift);
        out[5][l] = descale(t5 + z2 + z4, odd_shift);
        out[3][l] = descale(t6 + z2 + z3, odd_shift);
        out[1][l] = descale(t7 + z1 + z4, odd_shift);
    }
    out
}

/// Writes bits MSB first, a zero byte after each 0xFF (JPEG's byte stuffing).
struct Bits<'a> {
    out: &'a mut Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits<'_> {
    #[inline(always)]
    fn put(&mut self, value: u32, len: u32) {
        self.acc = (self.acc << len) | u64::from(value & ((1 << len) - 1));
        self.n += len;
        while self.n >= 8 {
            self.n -= 8;
            let byte = (self.acc >> self.n) as u8;
            self.out.push(byte);
            if byte == 0xFF {
                self.out.push(0);
            }
        }
    }

    /// Pads the last byte with ones.
    fn finish(mut self) {
        if self.n > 0 {
            let pad = 8 - self.n;
            self.put((1 << pad) - 1, pad);
        }
    }
}

/// The magnitude category of `v` and its bits as JPEG codes them.
#[inline(always)]
fn category(v: i32) -> (u32, u32) {
    let size = 32 - v.unsigned_abs().leading_zeros();
    let bits = if v < 0 { v - 1 } else { v } as u32;
    (size, bits)
}

/// The AC symbols' code: each run/size byte that can occur, in increasing order, coded by its
/// position in 8 bits (160 run/size pairs, end of block, sixteen zeros). Sizes stop at 10, as
/// baseline JPEG's do: the AC coefficients of 8-bit samples stay under 1024 in magnitude (about
/// 930 at most, even at quality 100, where every divisor is 1).
fn ac_symbols() -> Vec<u8> {
    let mut symbols = vec![0x00, 0xF0];
    for run in 0..16u8 {
        for size in 1..=10u8 {
            symbols.push(run << 4 | size);
        }
    }
    symbols.sort_unstable();
    symbols
}

/// Entropy codes one block's quantized coefficients (natural order) after the previous DC.
#[inline(always)]
fn code_block(bits: &mut Bits<'_>, q: &[i32; 64], pred: &mut i32, ac_code: &[u8; 256]) {
    let (size, v) = category(q[0] - *pred);
    *pred = q[0];
    bits.put(size, 4);
    if size > 0 {
        bits.put(v, size);
    }
    let zigzag: [i32; 64] = std::array::from_fn(|k| q[ZIGZAG[k]]);
    let mut nonzero = zigzag
        .iter()
        .enumerate()
        .skip(1)
        .fold(0u64, |m, (k, &c)| m | (u64::from(c != 0) << k));
    let mut next = 1;
    while nonzero != 0 {
        let k = nonzero.trailing_zeros() as usize;
        nonzero &= nonzero - 1;
        let mut run = k - next;
        while run >= 16 {
            bits.put(u32::from(ac_code[0xF0]), 8);
            run -= 16;
        }
        let (size, v) = category(zigzag[k]);
        bits.put(u32::from(ac_code[run << 4 | size as usize]), 8);
        bits.put(v, size);
        next = k + 1;
    }
    if next < 64 {
        bits.put(u32::from(ac_code[0x00]), 8);
    }
}

/// Encodes the `h`x`w` RGB8 image (channel 0 as blue) as OpenCV's `imencode(".jpg")` at
/// `quality` would quantize it, appending a baseline JPEG to `out`.
fn encode(rgb: &[u8], h: usize, w: usize, quality: u8, p: &mut Planes, out: &mut Vec<u8>) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 support was just detected.
        return unsafe { encode_avx2(rgb, h, w, quality, p, out) };
    }
    encode_here(rgb, h, w, quality, p, out)
}

/// [`encode`] compiled for AVX2: the colour conversion, both DCT passes and the quantization
/// vectorize eight lanes wide. The same integer operations, so the same bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn encode_avx2(rgb: &[u8], h: usize, w: usize, quality: u8, p: &mut Planes, out: &mut Vec<u8>) {
    encode_here(rgb, h, w, quality, p, out)
}

/// The body of [`encode`], inlined into each build of it.
#[inline(always)]
fn encode_here(rgb: &[u8], h: usize, w: usize, quality: u8, p: &mut Planes, out: &mut Vec<u8>) {
    let (wp, hp) = prepare(rgb, h, w, p);
    let tables = BASE_TABLES.map(|t| scaled_table(&t, quality));
    let divisors = tables.map(|t| Quantizer::new(&t));
    let symbols = ac_symbols();
    let mut ac_code = [0u8; 256];
    for (i, &s) in symbols.iter().enumerate() {
        ac_code[usize::from(s)] = i as u8;
    }

    out.extend_from_slice(&[0xFF, 0xD8]);
    out.extend_from_slice(&[
        0xFF, 0xE0, 0, 16, b'J', b'F', b'I', b'F', 0, 1, 1, 0, 0, 1, 0, 1, 0, 0,
    ]);
    for (id, table) in tables.iter().enumerate() {
        out.extend_from_slice(&[0xFF, 0xDB, 0, 67, id as u8]);
        out.extend(ZIGZAG.iter().map(|&n| table[n]));
    }
    let (hb, wb) = (h as u16, w as u16);
    out.extend_from_slice(&[0xFF, 0xC0, 0, 17, 8]);
    out.extend_from_slice(&hb.to_be_bytes());
    out.extend_from_slice(&wb.to_be_bytes());
    out.extend_from_slice(&[3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
    // DC: the twelve categories in four bits each; AC: `ac_symbols` in eight.
    let mut dht = vec![0x00];
    dht.extend((1..=16).map(|len| if len == 4 { 12 } else { 0 }));
    dht.extend(0..12u8);
    dht.push(0x10);
    dht.extend((1..=16).map(|len| if len == 8 { symbols.len() as u8 } else { 0 }));
    dht.extend_from_slice(&symbols);
    out.extend_from_slice(&[0xFF, 0xC4]);
    out.extend_from_slice(&((dht.len() + 2) as u16).to_be_bytes());
    out.extend_from_slice(&dht);
    out.extend_from_slice(&[0xFF, 0xDA, 0, 12, 3, 1, 0x00, 2, 0x00, 3, 0x00, 0, 63, 0]);

    let bits = Bits {
        out: &mut *out,
        acc: 0,
        n: 0,
    };
    let mut blocks = BlockCoder {
        bits,
        pred: [0; 3],
        ac_code: &ac_code,
    };
    for my in 0..hp / 16 {
        for mx in 0..wp / 16 {
            for (by, bx) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                let at = (my * 16 + by * 8) * wp + mx * 16 + bx * 8;
                blocks.code(&p.y[at..], wp, 0, &divisors[0]);
            }
            let at = my * 8 * (wp / 2) + mx * 8;
            blocks.code(&p.cb[at..], wp / 2, 1, &divisors[1]);
            blocks.code(&p.cr[at..], wp / 2, 2, &divisors[1]);
        }
    }
    let bits = blocks.bits;
    bits.finish();
    out.extend_from_slice(&[0xFF, 0xD9]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reciprocal_quantization_rounds_half_away_from_zero_like_a_division() {
        for divisor in [8u32, 16, 24, 88, 800, 2040] {
            let r = Reciprocal::of(divisor);
            for x in -16384i32..=16384 {
                let d = divisor as i32;
                let expected = if x < 0 {
                    -((-x + d / 2) / d)
                } else {
                    (x + d / 2) / d
                };
                assert_eq!(r.quantize(x), expected, "{x} / {divisor}");
            }
        }
    }

    /// A 7x5 image (odd both ways: the edges' padding shows), OpenCV 5.0's round trip of it.
    fn image() -> Vec<u8> {
        let mut rgb = Vec::new();
        for y in 0..5u32 {
            for x in 0..7u32 {
                rgb.push(((x * 37 + y * 11) % 256) as u8);
                rgb.push(((x * x * 5 + y * 23) % 256) as u8);
                rgb.push(((255 + 256 - x * 19 - y * 29) % 256) as u8);
            }
        }
        rgb
    }

    /// `cv2.imdecode(cv2.imencode('.jpg', image, (cv2.IMWRITE_JPEG_QUALITY, 75))[1], cv2.IMREAD_UNCHANGED)`
    const OPENCV_Q75: [u8; 105] = [
        20, 20, 210, 27, 12, 193, 83, 39, 200, 121, 60, 178, 157, 90, 145, 199, 139, 140, 226, 179,
        141, 39, 39, 215, 47, 36, 200, 73, 33, 175, 119, 65, 162, 163, 104, 135, 202, 149, 129,
        235, 198, 142, 29, 33, 181, 65, 58, 192, 89, 59, 162, 142, 97, 153, 174, 130, 117, 197,
        160, 98, 230, 209, 117, 50, 62, 170, 76, 77, 168, 100, 78, 137, 137, 104, 118, 177, 146,
        95, 218, 194, 106, 223, 210, 112, 65, 87, 145, 72, 84, 126, 119, 109, 121, 151, 131, 100,
        191, 170, 89, 198, 180, 85, 62, 49, 0,
    ];
    /// `cv2.imdecode(cv2.imencode('.jpg', image, (cv2.IMWRITE_JPEG_QUALITY, 12))[1], cv2.IMREAD_UNCHANGED)`
    const OPENCV_Q12: [u8; 105] = [
        75, 0, 217, 91, 23, 210, 108, 59, 187, 124, 93, 156, 139, 121, 120, 157, 149, 102, 182,
        174, 104, 91, 19, 226, 96, 31, 210, 103, 55, 175, 114, 82, 139, 135, 119, 112, 167, 160,
        110, 206, 199, 126, 106, 38, 227, 100, 42, 201, 98, 55, 158, 109, 82, 125, 135, 123, 105,
        173, 169, 111, 212, 208, 130, 104, 43, 207, 100, 48, 185, 107, 70, 150, 122, 102, 125, 147,
        140, 107, 163, 164, 96, 170, 169, 88, 93, 40, 173, 99, 55, 162, 119, 90, 145, 148, 134,
        135, 165, 164, 113, 147, 153, 72, 102, 106, 17,
    ];

    #[test]
    fn the_round_trip_gives_opencvs_pixels_at_a_high_and_a_low_quality() {
        let mut s = JpegScratch::default();
        for (quality, want) in [(75, OPENCV_Q75), (12, OPENCV_Q12)] {
            let mut rgb = image();
            round_trip(&mut rgb, 5, 7, quality, &mut s);
            assert_eq!(rgb, want, "quality {quality}");
        }
    }

    #[test]
    fn a_one_pixel_image_a_one_row_ramp_and_a_row_past_the_decoders_limit_come_back() {
        let mut s = JpegScratch::default();
        let mut one = vec![200, 30, 90];
        round_trip(&mut one, 1, 1, 95, &mut s);
        assert!(
            one.iter()
                .zip([200, 30, 90])
                .all(|(&a, b)| a.abs_diff(b) <= 3),
            "{one:?}"
        );
        let mut wide: Vec<u8> = (0..3 * 333).map(|i| (i / 3 * 255 / 332) as u8).collect();
        let before = wide.clone();
        round_trip(&mut wide, 1, 333, 100, &mut s);
        let worst = wide.iter().zip(&before).map(|(a, b)| a.abs_diff(*b)).max();
        assert!(worst.unwrap() <= 4, "{worst:?}");
        // Wider than the decoders' default limit (32768), which a whole image before the
        // resize may be: within JPEG's, so it comes back.
        let mut long = vec![77u8; 3 * 33_000];
        round_trip(&mut long, 1, 33_000, 90, &mut s);
        assert!(long.iter().all(|&v| v.abs_diff(77) <= 1));
    }

    #[test]
    fn the_quality_is_drawn_as_randint_over_the_range_and_p_gates_it() {
        let op = AlbuImageCompression {
            quality_range: [40, 43],
            p: 1.0,
        };
        op.check().unwrap();
        let mut seen = [0usize; 101];
        for i in 0..400 {
            let mut rng = CounterRng::from_key(i);
            let mut out = Vec::new();
            op.draw(&mut rng, (8, 8), &mut out);
            let [PixelOp::JpegRoundTrip(q)] = out[..] else {
                panic!("{out:?}")
            };
            seen[usize::from(q)] += 1;
        }
        assert!(
            seen[40..=43].iter().all(|&n| n > 60),
            "{:?}",
            &seen[40..=43]
        );
        assert_eq!(
            seen.iter().sum::<usize>(),
            seen[40..=43].iter().sum::<usize>()
        );
        let never = AlbuImageCompression { p: 0.0, ..op };
        let mut out = Vec::new();
        never.draw(&mut CounterRng::from_key(0), (8, 8), &mut out);
        assert!(out.is_empty());
        for bad in [[0, 10], [50, 40], [90, 101]] {
            assert!(AlbuImageCompression {
                quality_range: bad,
                p: 0.5
            }
            .check()
            .is_err());
        }
    }
}
