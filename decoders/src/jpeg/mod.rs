//! The media engine's fixed-function JPEG decoder: baseline sequential Huffman, 8-bit, 1 or 3
//! components, 4:4:4 / 4:2:2 / 4:2:0 / 4:4:0, restart markers. Like hardware decoders it can
//! decode only a region of interest (entropy decoding stops after the region's last MCU row;
//! only blocks that intersect the region are dequantized, inverse-transformed and colour
//! converted) and can downscale in the DCT domain to any `n/8` of the image's size (reduced
//! inverse DCTs, [`Scale`]).
//! Everything else is refused by [`Decode::probe`] with [`DecodeError::Unsupported`], except
//! that the host's decoder ([`JpegDecoder::for_host`]) also takes JPEGs in several scans
//! (progressive, or sequential with components in scans of their own) and arithmetic-coded
//! ones, whose coefficients are gathered first, then transformed as a baseline decode's are,
//! and RGB, CMYK and YCCK JPEGs and any whole ratio of sampling factors (at full scale), whose
//! output stage is `general.rs`.
//!
//! At full scale every step computes libjpeg's integers: the accurate integer inverse DCT
//! ("islow"), the "fancy" triangle filter for chroma with its rounding, and its fixed-point
//! colour conversion. A full-scale decode is therefore byte-identical to libjpeg-turbo's with
//! its default settings (Pillow's, and so torchvision's), which is why the CPU path uses this
//! decoder for the JPEGs it takes too.

// Block transforms and planar loops read most clearly with explicit indices.
#![allow(clippy::needless_range_loop)]

mod arith;
mod colour;
mod general;
mod header;
mod huffman;
mod idct;
mod resample;
mod scale;
mod scans;
mod upsample;

use crate::jpeg_markers;
use crate::{Decode, DecodeError, ImageFormat, ImageInfo, Limits};
use colour::YccTables;
#[cfg(target_arch = "x86_64")]
pub use colour::{store_rgb16, ycc16, ycc32};
use header::{Coding, Header};
use huffman::{BitReader, HuffmanTable, Unstuffed, EOB_RUN};
use idct::Idct;
pub use resample::Window;
use resample::{Axis, PlaneGeometry, PlaneResampler, Target};
pub use scale::Scale;
use upsample::Upsample;

/// Natural-order index of the `k`-th zigzag coefficient.
pub const ZIGZAG: [usize; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20,
    13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59,
    52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];

/// A rectangle in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Left column.
    pub x: u32,
    /// Top row.
    pub y: u32,
    /// Width (at least 1).
    pub width: u32,
    /// Height (at least 1).
    pub height: u32,
}

impl Region {
    /// The whole `width`x`height` image.
    pub fn full(width: u32, height: u32) -> Self {
        Self {
            x: 0,
            y: 0,
            width,
            height,
        }
    }
}

/// A JPEG's parsed headers ([`JpegDecoder::probe_parsed`]), for a decode of the same bytes
/// that does not parse them again.
#[derive(Clone, Debug)]
pub struct Parsed {
    header: Box<Header>,
    /// The length of the bytes they were parsed from (a cheap guard against a mix-up).
    len: usize,
}

impl Parsed {
    /// Refuses `bytes` that are not the ones these headers were parsed from (by length).
    fn check_of(&self, bytes: &[u8]) -> Result<(), DecodeError> {
        if self.len != bytes.len() {
            return Err(DecodeError::Parameter(
                "the parsed headers are of other bytes",
            ));
        }
        Ok(())
    }
}

/// The engine's resampling filter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Filter {
    /// torch's `nearest`: output sample `i` takes source sample `left + floor(i * scale)`
    /// (meant for a full-scale decode).
    Nearest,
    /// Pillow's antialiased bilinear (a triangle), as torchvision's antialiased resize.
    #[default]
    Bilinear,
    /// Pillow's antialiased bicubic (`a = -0.5`).
    Bicubic,
}

/// What [`JpegDecoder::decode_resized`] does: decode `region` at `scale`, and resample
/// `window` (in full-size source pixels, inside `region`) to `out_w` x `out_h` with `filter`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ResizeRequest {
    /// The region to decode (whole MCUs around it are entropy-decoded).
    pub region: Region,
    /// The DCT-domain scale of the decode.
    pub scale: Scale,
    /// The crop window, fractional, in source pixels.
    pub window: Window,
    /// Output width.
    pub out_w: u32,
    /// Output height.
    pub out_h: u32,
    /// The resampling filter.
    pub filter: Filter,
}

/// A resampled decode's output before its colour conversion ([`JpegDecoder::decode_planned_planes`]):
/// each plane `out_w` x `out_h` bytes, row after row.
#[derive(Clone, Copy, Debug)]
pub enum Planes<'a> {
    /// A colour JPEG's Y, Cb and Cr, to be converted as libjpeg converts them ([`ycc_to_rgb`]).
    Ycc([&'a [u8]; 3]),
    /// A greyscale JPEG's one plane: R, G and B are each its value.
    Grey(&'a [u8]),
}

impl<'a> Planes<'a> {
    /// Writes the planes as interleaved RGB8 into `out` (three bytes per pixel, its first
    /// `3 * pixels` bytes): the conversion [`JpegDecoder::decode_resized`] ends with.
    pub fn to_rgb(&self, out: &mut [u8]) {
        match *self {
            Planes::Grey(y) => {
                for (px, &v) in out.chunks_exact_mut(3).zip(y) {
                    px.copy_from_slice(&[v; 3]);
                }
            }
            Planes::Ycc([y, cb, cr]) => ycc_to_rgb(y, cb, cr, out),
        }
    }

    /// The same samples `range` of each plane (a row, or part of one).
    pub fn slice(&self, range: std::ops::Range<usize>) -> Planes<'a> {
        match *self {
            Planes::Grey(y) => Planes::Grey(&y[range]),
            Planes::Ycc(p) => Planes::Ycc(p.map(|p| &p[range.clone()])),
        }
    }
}

/// Converts Y, Cb and Cr samples to interleaved RGB8 with libjpeg's fixed-point arithmetic,
/// as the decoders do (`min(len)` pixels of the three, into `out`'s first bytes).
pub fn ycc_to_rgb(y: &[u8], cb: &[u8], cr: &[u8], out: &mut [u8]) {
    YccTables::new().convert(y, cb, cr, out);
}

/// One bitstream's decode on the media engine, as whoever routed it planned it: the request,
/// the headers already parsed (if any) and the limits. The engine runs it with
/// [`JpegDecoder::decode_planned`] without looking inside.
#[derive(Clone, Debug)]
pub struct DecodePlan {
    /// Region, scale, window, output size and filter.
    pub request: ResizeRequest,
    /// The headers, when the router parsed them already.
    pub parsed: Option<Parsed>,
    /// The decoder's limits for this bitstream.
    pub limits: Limits,
    /// Decode the luma alone (a grey read, [`JpegDecoder::set_luma`]).
    pub luma: bool,
}

/// The scales [`choose_scale`] picks from: `1/8`, `1/4`, `1/2` and the full size.
///
/// The sizes between (`3/8`, `5/8`, `6/8`, `7/8`) would bring a crop of up to twice the
/// output (most of a RandomResizedCrop's) to within `8/7` of it before the resize, but they do
/// not pay: over the reference corpus's ResNet-50 crops the whole decode ran 10% more
/// instructions with them (cachegrind), because their float transforms cost more per block
/// than the full-size integer one, while the resize's cost barely moved (it follows the
/// output's size and the taps, not the input's).
pub const CHOSEN_SCALES: [Scale; 4] = Scale::POWERS_OF_TWO;

/// How many times the output's size a DCT-scaled decode must still be along each axis: the
/// resize after it then does most of the shrinking, with the antialiasing filter torchvision's
/// resize applies.
///
/// A reduced DCT scale is a sharper low-pass than that filter (it keeps every frequency up to
/// the reduced size's limit), so a decode left at 1-2x the output gives a sharper, more
/// aliased image than the resize a user's loader runs: on real photographs resized to 64-128
/// pixels, as low as 28 dB from torchvision's bytes at a gap of 1 (the smallest scale with at
/// least the output's size), 38.5 dB at 2, and at least 41.2 dB at 3, where the DCT-scaled
/// samples are no further from torchvision than the full-scale ones (BENCHMARKS.md, session
/// 87). Pillow documents the same gap for its own draft-then-resize as indistinguishable from
/// a full resize in most cases. Throughput on the reference corpus did not move: the Huffman
/// scan, which every scale pays in full, bounds these decodes.
pub const REDUCING_GAP: usize = 3;

/// Picks the smallest decode of [`CHOSEN_SCALES`] that still gives at least [`REDUCING_GAP`]
/// times `out_w`x`out_h` pixels for `region` (the full scale when none does), so the final
/// resize always shrinks, by at least that much from a reduced scale.
pub fn choose_scale(region: Region, out_w: u32, out_h: u32) -> Scale {
    let fits = |s: &Scale, size: u32, out: u32| {
        s.is_full() || s.floor(size as usize) >= REDUCING_GAP * out as usize
    };
    CHOSEN_SCALES
        .into_iter()
        .find(|s| fits(s, region.width, out_w) && fits(s, region.height, out_h))
        .unwrap_or(Scale::FULL)
}

/// The rectangle of the image at `scale` that covers `region`: what
/// [`JpegDecoder::decode_region`] writes.
pub fn scaled_region(info: &ImageInfo, region: Region, scale: Scale) -> Region {
    // Sizes in `usize`: a full-size coordinate times 8 fits it wherever `u32` does not.
    let at = |v: u32| v as usize;
    let back = |v: usize| v as u32;
    let (sw, sh) = (scale.ceil(at(info.width)), scale.ceil(at(info.height)));
    let x0 = scale.floor(at(region.x)).min(sw - 1);
    let y0 = scale.floor(at(region.y)).min(sh - 1);
    let x1 = scale
        .ceil(at(region.x.saturating_add(region.width)))
        .clamp(x0 + 1, sw);
    let y1 = scale
        .ceil(at(region.y.saturating_add(region.height)))
        .clamp(y0 + 1, sh);
    Region {
        x: back(x0),
        y: back(y0),
        width: back(x1 - x0),
        height: back(y1 - y0),
    }
}

/// MCU columns and rows `[c0, c1) x [r0, r1)` as `(c0, c1, r0, r1)`: the blocks a decode keeps.
type McuWindow = (usize, usize, usize, usize);

/// The engine's JPEG decoder. Keeps its planes between calls, so a long run allocates nothing
/// per image once they have grown.
pub struct JpegDecoder {
    limits: Limits,
    idct: Idct,
    planes: [Vec<u8>; 4],
    chroma_rows: [Vec<u8>; 2],
    colsum: Vec<i16>,
    ycc: YccTables,
    /// Lookup tables for the DC and AC table slots, rebuilt only when a file's tables differ
    /// from the last ones built in that slot (most files of a dataset share theirs).
    dc_tables: [HuffmanTable; 4],
    ac_tables: [HuffmanTable; 4],
    /// The scan being decoded, unstuffed.
    scan: Unstuffed,
    /// Output stage of [`JpegDecoder::decode_resized`].
    resampler: PlaneResampler,
    /// Whether the host's JPEGs are taken too ([`JpegDecoder::for_host`]), or only what the
    /// media engine takes.
    host: bool,
    /// A multi-scan JPEG's coefficients, gathered before any block is transformed.
    coefs: scans::Coefficients,
    /// The general output stage's rows (`general.rs`).
    general_rows: general::Rows,
    /// An arithmetic-coded scan's statistics.
    arith_stats: Box<arith::Statistics>,
    /// Whether the CPU has BMI1 and BMI2, for the scans' builds that use them.
    #[cfg(target_arch = "x86_64")]
    bmi2: bool,
    /// Decode the luma alone ([`JpegDecoder::set_luma`]).
    luma: bool,
}

impl Default for JpegDecoder {
    fn default() -> Self {
        Self::with_limits(Limits::default())
    }
}

impl std::fmt::Debug for JpegDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JpegDecoder")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl JpegDecoder {
    /// Replaces the decoder's limits (the media engine takes each job's).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// A decoder with the given limits.
    pub fn with_limits(limits: Limits) -> Self {
        Self {
            limits,
            idct: Idct::new(),
            planes: Default::default(),
            chroma_rows: Default::default(),
            colsum: Vec::new(),
            ycc: YccTables::new(),
            dc_tables: Default::default(),
            ac_tables: Default::default(),
            scan: Unstuffed::default(),
            resampler: PlaneResampler::new(),
            host: false,
            coefs: scans::Coefficients::default(),
            general_rows: general::Rows::default(),
            arith_stats: Box::default(),
            #[cfg(target_arch = "x86_64")]
            bmi2: std::arch::is_x86_feature_detected!("bmi1")
                && std::arch::is_x86_feature_detected!("bmi2"),
            luma: false,
        }
    }

    /// Decode each JPEG's luma alone, written to all three channels of each pixel: what
    /// libjpeg gives when asked for grey output of a YCbCr or grey JPEG (`JCS_GRAYSCALE`: the
    /// Y samples as its inverse DCT makes them, the chroma never used), which is how OpenCV's
    /// `cv2.imread(path, cv2.IMREAD_GRAYSCALE)` and torchvision's `ImageReadMode.GRAY` read
    /// a JPEG. [`JpegDecoder::probe_parsed`] then refuses JPEGs whose grey libjpeg computes
    /// otherwise: RGB, CMYK and YCCK ones (a conversion of colours), and those whose luma is
    /// sampled below another component (luma upsampled). The chroma is entropy-decoded (the
    /// scan interleaves it) but never transformed. The resampling decodes
    /// ([`JpegDecoder::decode_resized`], [`JpegDecoder::decode_planned`], whose plan says it
    /// with [`DecodePlan::luma`]) resample the luma alone: [`Planes::Grey`].
    pub fn set_luma(&mut self, luma: bool) {
        self.luma = luma;
    }

    /// The host's decoder: also takes what the media engine refuses and libjpeg-turbo decodes
    /// (JPEGs in several scans, arithmetic coding, RGB, CMYK and YCCK colour, any whole ratio
    /// of sampling factors), with the same pixels as libjpeg-turbo's (and Pillow's for CMYK).
    pub fn for_host(limits: Limits) -> Self {
        Self {
            host: true,
            ..Self::with_limits(limits)
        }
    }

    /// Decodes the part of the image at `scale` that covers `region` (see [`scaled_region`])
    /// into `out` as RGB8, and returns that scaled rectangle. `out` must hold exactly its
    /// `width * height * 3` bytes.
    ///
    /// # Errors
    /// Unsupported or corrupt data, a region outside the image, a reduced scale of a JPEG
    /// whose output stage is the general one, or an `out` of the wrong length.
    pub fn decode_region(
        &mut self,
        bytes: &[u8],
        region: Region,
        scale: Scale,
        out: &mut [u8],
    ) -> Result<Region, DecodeError> {
        let (h, sr) = self.prepare(bytes, region, scale)?;
        let expected = sr.width as usize * sr.height as usize * 3;
        if out.len() != expected {
            return Err(DecodeError::BufferSize {
                expected,
                got: out.len(),
            });
        }
        let window = self.entropy_decode(bytes, &h, &sr, scale.block())?;
        self.color_convert(&h, &sr, window, scale, out, sr.width as usize * 3);
        Ok(sr)
    }

    /// Decodes `region` at full scale into its place in `image`, an RGB8 buffer laid out as
    /// the whole image (`width * height * 3` bytes, rows of `width * 3`), from the headers
    /// [`JpegDecoder::probe_parsed`] read from these `bytes`. Pixels outside the region are
    /// left as they were. The pixels written are exactly those of a full decode (which is
    /// libjpeg-turbo's with its default, accurate settings: the "islow" inverse DCT, fancy
    /// upsampling), so a consumer that reads only inside the region sees the full decode.
    ///
    /// # Errors
    /// As [`JpegDecoder::decode_region`]; also a [`Parsed`] made from other bytes, or an
    /// `image` of the wrong length.
    pub fn decode_region_in_place(
        &mut self,
        bytes: &[u8],
        parsed: &Parsed,
        region: Region,
        image: &mut [u8],
    ) -> Result<(), DecodeError> {
        parsed.check_of(bytes)?;
        let h = &parsed.header;
        if self.luma {
            Self::check_luma(h)?;
        }
        let sr = Self::check_request(h, region, Scale::FULL)?;
        let stride = h.width as usize * 3;
        let expected = stride * h.height as usize;
        if image.len() != expected {
            return Err(DecodeError::BufferSize {
                expected,
                got: image.len(),
            });
        }
        let window = self.entropy_decode(bytes, h, &sr, 8)?;
        let at = sr.y as usize * stride + sr.x as usize * 3;
        self.color_convert(h, &sr, window, Scale::FULL, &mut image[at..], stride);
        Ok(())
    }

    /// Only the entropy decoding a decode of `region` needs, and nothing after it: every block
    /// of every MCU row up to the region's last is Huffman-decoded (the DC prediction kept) and
    /// its coefficients discarded; nothing is dequantized, transformed or written. This is the
    /// floor of any baseline-JPEG decode of that region (the bits before its last row cannot be
    /// skipped), what the engine path's throughput is measured against.
    ///
    /// # Errors
    /// Unsupported or corrupt data, or a region outside the image.
    pub fn entropy_decode_only(&mut self, bytes: &[u8], region: Region) -> Result<(), DecodeError> {
        let h = header::parse(bytes, &self.limits, self.host)?;
        if h.coding != Coding::Baseline || h.arithmetic {
            return Err(header::unsupported(
                "JPEG in several scans or arithmetic-coded",
            ));
        }
        let sr = Self::check_request(&h, region, Scale::FULL)?;
        let (_, _, _, r1) = Self::mcu_window(&h, &sr, 8);
        for c in &h.components {
            self.dc_tables[c.td].build(h.dc[c.td].as_ref().expect("checked by parse"), false);
            self.ac_tables[c.ta].build(h.ac[c.ta].as_ref().expect("checked by parse"), true);
        }
        self.scan.fill(bytes, h.scan_start);
        #[cfg(target_arch = "x86_64")]
        if self.bmi2 {
            // SAFETY: BMI2 support was detected when the decoder was made.
            return unsafe { self.skip_scan_bmi2(&h, r1) };
        }
        self.skip_scan(&h, r1)
    }

    /// Entropy decodes the filled scan's MCU rows `0..r1`, keeping nothing:
    /// [`Self::entropy_decode_only`]'s loop, inlined into each build of it.
    #[inline(always)]
    fn skip_scan(&mut self, h: &Header, r1: usize) -> Result<(), DecodeError> {
        let mut br = self.scan.reader();
        let (mut pred, mut coef) = ([0i32; 3], [0i32; 64]);
        let (mut mcus, mut next_rst) = (0usize, 0u8);
        for _ in 0..r1 {
            for _ in 0..h.mcus_x() {
                if h.restart_interval > 0 && mcus > 0 && mcus.is_multiple_of(h.restart_interval) {
                    br = br.restart(next_rst)?;
                    next_rst = (next_rst + 1) & 7;
                    pred = [0; 3];
                }
                mcus += 1;
                for (ci, c) in h.components.iter().enumerate() {
                    let (dc, ac) = (&self.dc_tables[c.td], &self.ac_tables[c.ta]);
                    for _ in 0..c.v * c.h {
                        block::<false>(&mut br, dc, ac, &h.qt[c.tq], &mut pred[ci], &mut coef)?;
                    }
                }
            }
        }
        if br.ends_early() {
            return Err(DecodeError::Truncated {
                format: ImageFormat::Jpeg,
                detail: "entropy-coded data ends early",
            });
        }
        Ok(())
    }

    /// [`Self::skip_scan`] compiled for BMI2: the bit reader's shifts by a count held in a
    /// register become `shlx`/`shrx`, one micro-op each with no flags to merge (a shift by
    /// `cl` is several on Intel's cores), on the chain every Huffman symbol waits on. The same
    /// operations otherwise, so the same results.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "bmi1,bmi2")]
    fn skip_scan_bmi2(&mut self, h: &Header, r1: usize) -> Result<(), DecodeError> {
        self.skip_scan(h, r1)
    }

    /// What a media engine does per image: decodes `region` at its scale (see
    /// [`JpegDecoder::decode_region`]), resamples `window` of it to `out_w`x`out_h`
    /// (with the request's filter, reading only pixels inside `region`) and writes RGB8 into
    /// `out`. Each plane is resampled at its own resolution and colour is converted at the
    /// output's, so chroma is never upsampled to the crop's size.
    ///
    /// # Errors
    /// As [`JpegDecoder::decode_region`]; also a window outside `region` or an `out` that does
    /// not hold exactly `out_w * out_h * 3` bytes.
    pub fn decode_resized(
        &mut self,
        bytes: &[u8],
        request: &ResizeRequest,
        out: &mut [u8],
    ) -> Result<(), DecodeError> {
        let h = header::parse(bytes, &self.limits, self.host)?;
        self.resized(bytes, &h, request, out)
    }

    /// [`JpegDecoder::decode_resized`] with the headers [`JpegDecoder::probe_parsed`] read from
    /// these same `bytes`, so they are not parsed again (the media engine gets them with its
    /// job from the router's probe).
    ///
    /// # Errors
    /// As [`JpegDecoder::decode_resized`]; also a [`Parsed`] made from other bytes (another
    /// length).
    pub fn decode_resized_parsed(
        &mut self,
        bytes: &[u8],
        parsed: &Parsed,
        request: &ResizeRequest,
        out: &mut [u8],
    ) -> Result<(), DecodeError> {
        parsed.check_of(bytes)?;
        self.resized(bytes, &parsed.header, request, out)
    }

    /// What a media engine runs for a job: [`JpegDecoder::decode_resized_parsed`] with the
    /// plan's headers when it has them (else [`JpegDecoder::decode_resized`]), under the plan's
    /// limits.
    ///
    /// # Errors
    /// As those.
    pub fn decode_planned(
        &mut self,
        bytes: &[u8],
        plan: &DecodePlan,
        out: &mut [u8],
    ) -> Result<(), DecodeError> {
        let expected = plan.request.out_w as usize * plan.request.out_h as usize * 3;
        if out.len() != expected {
            return Err(DecodeError::BufferSize {
                expected,
                got: out.len(),
            });
        }
        self.decode_planned_planes(bytes, plan)?.to_rgb(out);
        Ok(())
    }

    /// [`JpegDecoder::decode_planned`] up to its last step: the output's planes, resampled to
    /// the output size but not yet converted to RGB, for a consumer that converts them as it
    /// writes them elsewhere (the media engine's device op, into a batch slot). They are the
    /// decoder's own and stay valid until its next decode.
    ///
    /// # Errors
    /// As [`JpegDecoder::decode_planned`] (but for an output buffer's size: there is none).
    pub fn decode_planned_planes(
        &mut self,
        bytes: &[u8],
        plan: &DecodePlan,
    ) -> Result<Planes<'_>, DecodeError> {
        self.set_limits(plan.limits);
        self.luma = plan.luma;
        let components = match &plan.parsed {
            Some(parsed) => {
                parsed.check_of(bytes)?;
                self.resample(bytes, &parsed.header, &plan.request)?;
                parsed.header.components.len()
            }
            None => {
                let h = header::parse(bytes, &self.limits, self.host)?;
                self.resample(bytes, &h, &plan.request)?;
                h.components.len()
            }
        };
        Ok(self.planes_out(components))
    }

    /// Like [`Decode::probe`], and keeps the parsed headers for
    /// [`JpegDecoder::decode_resized_parsed`].
    ///
    /// # Errors
    /// As [`Decode::probe`].
    pub fn probe_parsed(&mut self, bytes: &[u8]) -> Result<(ImageInfo, Parsed), DecodeError> {
        let (info, h) = self.parse_checked(bytes)?;
        if self.luma {
            Self::check_luma(&h)?;
        }
        let parsed = Parsed {
            header: Box::new(h),
            len: bytes.len(),
        };
        Ok((info, parsed))
    }

    /// The header of a JPEG that is complete (ends where its markers say), within the limits.
    fn parse_checked(&self, bytes: &[u8]) -> Result<(ImageInfo, Header), DecodeError> {
        match ImageFormat::identify(bytes)? {
            ImageFormat::Jpeg => {}
            other => {
                return Err(DecodeError::Unsupported {
                    format: other,
                    reason: "not a JPEG",
                })
            }
        }
        let h = header::parse(bytes, &self.limits, self.host)?;
        // The parse walked the markers up to the scan, as `check_complete` would (it accepts a
        // subset of what that walk accepts), so only the end is left to check.
        debug_assert_eq!(jpeg_markers::first_scan_offset(bytes), Ok(h.scan_start));
        jpeg_markers::check_end_after(bytes, h.scan_start)?;
        let info = ImageInfo {
            format: ImageFormat::Jpeg,
            width: h.width,
            height: h.height,
        };
        Ok((info, h))
    }

    fn resized(
        &mut self,
        bytes: &[u8],
        h: &Header,
        request: &ResizeRequest,
        out: &mut [u8],
    ) -> Result<(), DecodeError> {
        let expected = request.out_w as usize * request.out_h as usize * 3;
        if out.len() != expected {
            return Err(DecodeError::BufferSize {
                expected,
                got: out.len(),
            });
        }
        self.resample(bytes, h, request)?;
        self.planes_out(h.components.len()).to_rgb(out);
        Ok(())
    }

    /// [`Self::resized`] up to the colour conversion: the output planes are left in the
    /// resampler.
    fn resample(
        &mut self,
        bytes: &[u8],
        h: &Header,
        request: &ResizeRequest,
    ) -> Result<(), DecodeError> {
        let ResizeRequest {
            region,
            scale,
            window,
            out_w,
            out_h,
            filter,
        } = *request;
        if h.general {
            return Err(header::unsupported(
                "a resized decode of this sampling or colour space",
            ));
        }
        if self.luma {
            Self::check_luma(h)?;
        }
        let sr = Self::check_request(h, region, scale)?;
        if out_w == 0 || out_h == 0 {
            return Err(DecodeError::Parameter("output size must be at least 1x1"));
        }
        let inside = |lo: f64, len: f64, r0: u32, rlen: u32| {
            // A little slack for windows computed in floating point from integer ones.
            len > 0.0 && lo >= f64::from(r0) - 1e-6 && lo + len <= f64::from(r0 + rlen) + 1e-6
        };
        if !inside(window.left, window.width, region.x, region.width)
            || !inside(window.top, window.height, region.y, region.height)
        {
            return Err(DecodeError::Parameter("window outside the region"));
        }
        let target = Target {
            region,
            window,
            out: (out_w as usize, out_h as usize),
            filter,
        };
        let n = scale.block();
        let (c0, c1, r0, r1) = self.entropy_decode(bytes, h, &sr, n)?;
        // A grey read resamples the luma alone (its one output plane, see `planes_out`).
        let planes = if self.luma { 1 } else { h.components.len() };
        for (k, c) in h.components.iter().enumerate().take(planes) {
            // `size`: the image's along the axis; `blocks`: the component's per MCU.
            let axis = |factor: usize, size: u32, mcu_lo: usize, mcus: usize, blocks| Axis {
                scale,
                factor,
                luma_valid: scale.ceil(size as usize),
                origin: mcu_lo * blocks * n,
                held: mcus * blocks * n,
            };
            let g = PlaneGeometry {
                stride: (c1 - c0) * c.h * n,
                across: axis(h.hmax / c.h, h.width, c0, c1 - c0, c.h),
                down: axis(h.vmax / c.v, h.height, r0, r1 - r0, c.v),
            };
            self.resampler
                .plane(k, &self.planes[k], &g, &target, k == 2)?;
        }
        Ok(())
    }

    /// The resampler's output planes after a resampled decode of an image of `components`
    /// (its luma alone for a grey read).
    fn planes_out(&self, components: usize) -> Planes<'_> {
        let y = self.resampler.out(0);
        if components == 1 || self.luma {
            Planes::Grey(y)
        } else {
            Planes::Ycc([y, self.resampler.out(1), self.resampler.out(2)])
        }
    }

    /// Parses the header and checks a decode's parameters; returns the header and the scaled
    /// region to decode.
    fn prepare(
        &self,
        bytes: &[u8],
        region: Region,
        scale: Scale,
    ) -> Result<(Header, Region), DecodeError> {
        let h = header::parse(bytes, &self.limits, self.host)?;
        if self.luma {
            Self::check_luma(&h)?;
        }
        let sr = Self::check_request(&h, region, scale)?;
        Ok((h, sr))
    }

    /// Refuses, for a decode of the luma alone, a JPEG whose grey libjpeg does not take from
    /// its first component's samples as they are (see [`JpegDecoder::set_luma`]).
    fn check_luma(h: &Header) -> Result<(), DecodeError> {
        if !matches!(h.colour, header::Colour::Grey | header::Colour::YCbCr) {
            return Err(header::unsupported(
                "a grey read of an RGB, CMYK or YCCK JPEG (libjpeg converts its colours to grey)",
            ));
        }
        let luma = &h.components[0];
        if (luma.h, luma.v) != (h.hmax, h.vmax) {
            return Err(header::unsupported(
                "a grey read of a JPEG whose luma is sampled below another component",
            ));
        }
        Ok(())
    }

    /// Checks a decode's region and scale against the header; returns the scaled region.
    fn check_request(h: &Header, region: Region, scale: Scale) -> Result<Region, DecodeError> {
        let info = ImageInfo {
            format: ImageFormat::Jpeg,
            width: h.width,
            height: h.height,
        };
        if h.general && !scale.is_full() {
            return Err(header::unsupported(
                "a reduced-scale decode of this sampling or colour space",
            ));
        }
        let ends_inside = |start: u32, len: u32, size: u32| {
            len > 0 && start.checked_add(len).is_some_and(|end| end <= size)
        };
        if !ends_inside(region.x, region.width, h.width)
            || !ends_inside(region.y, region.height, h.height)
        {
            return Err(DecodeError::Parameter(
                "region is empty or outside the image",
            ));
        }
        Ok(scaled_region(&info, region, scale))
    }

    /// MCU columns and rows `[c0, c1) x [r0, r1)` whose blocks are kept: those covering the
    /// scaled region and, when chroma is subsampled, those holding the chroma samples the
    /// upsampling filter reads next to the region's (one on each side, clamped at the image's
    /// edges). That is usually no extra MCU at all, and never more than one on a side.
    fn mcu_window(h: &Header, sr: &Region, n: usize) -> McuWindow {
        let (mw, mh) = (h.hmax * n, h.vmax * n);
        if h.general {
            // Whole rows, and an MCU row more on each side: any component's upsampling reads
            // at most one of its sample rows beyond the region's.
            let (y0, y1) = (sr.y as usize, (sr.y + sr.height) as usize);
            let r0 = (y0 / mh).saturating_sub(1);
            let r1 = (y1.div_ceil(mh) + 1).min(h.mcus_y());
            return (0, h.mcus_x(), r0, r1);
        }
        let (x0, x1) = (sr.x as usize, (sr.x + sr.width) as usize);
        let (y0, y1) = (sr.y as usize, (sr.y + sr.height) as usize);
        let (mut c0, mut c1) = (x0 / mw, x1.div_ceil(mw));
        let (mut r0, mut r1) = (y0 / mh, y1.div_ceil(mh));
        if h.components.len() > 1 && (h.hmax > 1 || h.vmax > 1) {
            // Chroma planes have one block per MCU, n samples a side at this scale.
            let (cw, ch) = h.chroma_size(n);
            let lo = (x0 / h.hmax).saturating_sub(1);
            let hi = ((x1 - 1) / h.hmax + 1).min(cw - 1);
            c0 = c0.min(lo / n);
            c1 = c1.max(hi / n + 1);
            if h.vmax > 1 {
                let top = (y0 / h.vmax).saturating_sub(1);
                let bottom = ((y1 - 1) / h.vmax + 1).min(ch - 1);
                r0 = r0.min(top / n);
                r1 = r1.max(bottom / n + 1);
            }
        }
        (c0, c1.min(h.mcus_x()), r0, r1.min(h.mcus_y()))
    }

    /// Decodes the scan into the planes, keeping the blocks of [`Self::mcu_window`], which it
    /// returns.
    fn entropy_decode(
        &mut self,
        bytes: &[u8],
        h: &Header,
        sr: &Region,
        n: usize,
    ) -> Result<McuWindow, DecodeError> {
        let (c0, c1, r0, r1) = Self::mcu_window(h, sr, n);
        if h.coding != Coding::Baseline || h.general || h.arithmetic {
            scans::decode(
                bytes,
                h,
                (c0, c1, r0, r1),
                n,
                &mut self.coefs,
                &mut self.arith_stats,
                &mut self.scan,
                &mut self.dc_tables,
                &mut self.ac_tables,
                &self.idct,
                &mut self.planes,
            )?;
            return Ok((c0, c1, r0, r1));
        }
        let mut strides = [0usize; 3];
        for (i, c) in h.components.iter().enumerate() {
            strides[i] = (c1 - c0) * c.h * n;
            let len = strides[i] * (r1 - r0) * c.v * n;
            if self.planes[i].len() < len {
                self.planes[i].resize(len, 0);
            }
        }
        for c in &h.components {
            self.dc_tables[c.td].build(h.dc[c.td].as_ref().expect("checked by parse"), false);
            self.ac_tables[c.ta].build(h.ac[c.ta].as_ref().expect("checked by parse"), true);
        }
        self.scan.fill(bytes, h.scan_start);
        #[cfg(target_arch = "x86_64")]
        if self.bmi2 {
            // SAFETY: BMI2 support was detected when the decoder was made.
            unsafe { self.baseline_scan_bmi2(h, (c0, c1, r0, r1), n, &strides) }?;
            return Ok((c0, c1, r0, r1));
        }
        self.baseline_scan(h, (c0, c1, r0, r1), n, &strides)?;
        Ok((c0, c1, r0, r1))
    }

    /// Entropy decodes the filled scan of a baseline JPEG, inverse-transforming the blocks of
    /// the MCU window `(c0, c1, r0, r1)` into the planes (`strides` apart) at `n`x`n` per
    /// block: [`Self::entropy_decode`]'s loop, inlined into each build of it.
    #[inline(always)]
    fn baseline_scan(
        &mut self,
        h: &Header,
        (c0, c1, r0, r1): McuWindow,
        n: usize,
        strides: &[usize; 3],
    ) -> Result<(), DecodeError> {
        let tables: [(&HuffmanTable, &HuffmanTable, &[u16; 64]); 3] = std::array::from_fn(|i| {
            let c = h.components.get(i).unwrap_or(&h.components[0]);
            (&self.dc_tables[c.td], &self.ac_tables[c.ta], &h.qt[c.tq])
        });
        let mut br = self.scan.reader();
        let mut pred = [0i32; 3];
        let mut coef = [0i32; 64];
        let mut mcus = 0usize;
        let mut next_rst = 0u8;
        let mcus_x = h.mcus_x();
        for my in 0..r1 {
            for mx in 0..mcus_x {
                if h.restart_interval > 0 && mcus > 0 && mcus.is_multiple_of(h.restart_interval) {
                    br = br.restart(next_rst)?;
                    next_rst = (next_rst + 1) & 7;
                    pred = [0; 3];
                }
                mcus += 1;
                let keep = my >= r0 && (c0..c1).contains(&mx);
                for (ci, c) in h.components.iter().enumerate() {
                    let (dc, ac, q) = tables[ci];
                    // A grey read uses the luma alone: the chroma is only entropy-decoded.
                    let keep = keep && (ci == 0 || !self.luma);
                    for by in 0..c.v {
                        for bx in 0..c.h {
                            if keep {
                                let last =
                                    block::<true>(&mut br, dc, ac, q, &mut pred[ci], &mut coef)?;
                                let px = ((mx - c0) * c.h + bx) * n;
                                let py = ((my - r0) * c.v + by) * n;
                                let stride = strides[ci];
                                self.idct.block(
                                    &coef,
                                    last,
                                    n,
                                    &mut self.planes[ci][py * stride + px..],
                                    stride,
                                );
                                idct::clear_written(&mut coef, last);
                            } else {
                                block::<false>(&mut br, dc, ac, q, &mut pred[ci], &mut coef)?;
                            }
                        }
                    }
                }
            }
        }
        if br.ends_early() {
            return Err(DecodeError::Truncated {
                format: ImageFormat::Jpeg,
                detail: "entropy-coded data ends early",
            });
        }
        Ok(())
    }

    /// [`Self::baseline_scan`] compiled for BMI2 (see [`Self::skip_scan_bmi2`]).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "bmi1,bmi2")]
    fn baseline_scan_bmi2(
        &mut self,
        h: &Header,
        window: McuWindow,
        n: usize,
        strides: &[usize; 3],
    ) -> Result<(), DecodeError> {
        self.baseline_scan(h, window, n, strides)
    }

    /// Upsamples chroma and converts the decoded planes' pixels of `sr` (at `scale`) to RGB8
    /// rows of `out`, `out_stride` bytes apart.
    fn color_convert(
        &mut self,
        h: &Header,
        sr: &Region,
        (c0, c1, r0, _): McuWindow,
        scale: Scale,
        out: &mut [u8],
        out_stride: usize,
    ) {
        if h.general {
            debug_assert!(scale.is_full(), "refused by check_request");
            general::convert(
                h,
                self.luma,
                &self.planes,
                (c1 - c0, r0),
                sr,
                &self.ycc,
                &mut self.general_rows,
                out,
                out_stride,
            );
            return;
        }
        let n = scale.block();
        let w = sr.width as usize;
        let luma = &h.components[0];
        let luma_stride = (c1 - c0) * luma.h * n;
        let (lx0, ly0) = (c0 * luma.h * n, r0 * luma.v * n);
        let (hmax, vmax) = (h.hmax, h.vmax);
        let chroma_stride = (c1 - c0) * n;
        let (cx0, cy0) = (c0 * n, r0 * n);
        // Valid chroma samples in the scaled image (beyond them is MCU padding).
        let (cw, ch) = h.chroma_size(n);
        for row in &mut self.chroma_rows {
            if row.len() < w {
                row.resize(w, 0);
            }
        }
        for j in 0..sr.height as usize {
            let out_row = &mut out[j * out_stride..][..w * 3];
            let y = sr.y as usize + j;
            let yrow = &self.planes[0][(y - ly0) * luma_stride + (sr.x as usize - lx0)..][..w];
            if h.components.len() == 1 || self.luma {
                for (px, &v) in out_row.chunks_exact_mut(3).zip(yrow) {
                    px.copy_from_slice(&[v; 3]);
                }
                continue;
            }
            let cy = y / vmax;
            let far_y = match (vmax, y % 2) {
                (2, 0) => cy.saturating_sub(1),
                (2, _) => (cy + 1).min(ch - 1),
                _ => cy,
            };
            let mode = Upsample {
                hmax,
                vmax,
                y_odd: y % 2 == 1,
                avx2: self.ycc.avx2,
            };
            for (k, crow) in self.chroma_rows.iter_mut().enumerate() {
                let plane = &self.planes[k + 1];
                let near = &plane[(cy - cy0) * chroma_stride..][..chroma_stride];
                let far = &plane[(far_y - cy0) * chroma_stride..][..chroma_stride];
                mode.row(
                    near,
                    far,
                    cx0,
                    cw,
                    sr.x as usize,
                    &mut self.colsum,
                    &mut crow[..w],
                );
            }
            self.ycc.convert(
                yrow,
                &self.chroma_rows[0][..w],
                &self.chroma_rows[1][..w],
                out_row,
            );
        }
    }
}

fn bad(msg: &'static str) -> DecodeError {
    DecodeError::corrupt(ImageFormat::Jpeg, msg)
}

/// Decodes one block. With `STORE`, writes its dequantized coefficients into `coef` (natural
/// order), which must hold zeros, and returns the zigzag index of the last one written; without,
/// only advances the bit stream and the DC prediction (blocks outside the region of interest).
/// The caller zeroes what a stored block wrote once it has used it ([`idct::clear_written`]):
/// a sparse block then costs a few stores instead of a whole block's.
#[inline(always)]
fn block<const STORE: bool>(
    br: &mut BitReader<'_>,
    dc: &HuffmanTable,
    ac: &HuffmanTable,
    q: &[u16; 64],
    pred: &mut i32,
    coef: &mut [i32; 64],
) -> Result<usize, DecodeError> {
    // Unconditionally: once per block, where whether 32 bits are left is a coin toss (a
    // branch on it was mispredicted four times in ten in cachegrind's simulation).
    br.refill();
    let s = u32::from(br.decode(dc)?);
    if s > 15 {
        return Err(bad("DC difference of more than 15 bits"));
    }
    *pred = pred.wrapping_add(br.receive_extend(s));
    if STORE {
        coef[0] = pred.saturating_mul(i32::from(q[0]));
    }
    let mut k = 1;
    while k < 64 {
        br.ensure_peek();
        let e = br.peek_ac(ac);
        if e.found() {
            // One or two coefficients (a lone one is written twice, see `AcPair`).
            let before = *br;
            br.consume(e.bits());
            k += e.run();
            if k > 63 {
                if e.run() == EOB_RUN as usize {
                    k -= e.run();
                    break;
                }
                return Err(bad("AC run past the end of the block"));
            }
            if STORE {
                coef[ZIGZAG[k]] = e.first() * i32::from(q[k]);
            }
            let k2 = k + e.gap();
            if k2 > 63 {
                if k == 63 {
                    // The block is full: what followed in the peek is the next block's.
                    *br = before;
                    br.consume(e.first_bits());
                } else if e.gap() != EOB_RUN as usize {
                    return Err(bad("AC run past the end of the block"));
                }
                k += 1;
                break;
            }
            if STORE {
                coef[ZIGZAG[k2]] = e.second() * i32::from(q[k2]);
            }
            k = k2 + 1;
            continue;
        }
        br.ensure();
        let rs = br.decode(ac)?;
        let (run, s) = (usize::from(rs >> 4), u32::from(rs & 15));
        if s == 0 {
            if run == 15 {
                k += 16;
                continue;
            }
            break;
        }
        k += run;
        if k > 63 {
            return Err(bad("AC run past the end of the block"));
        }
        if STORE {
            coef[ZIGZAG[k]] = br.receive_extend(s) * i32::from(q[k]);
        } else {
            br.consume(s);
        }
        k += 1;
    }
    // The last coefficient written is at `k - 1`, unless a zero run (ZRL) came after it: then
    // this is past it, which only costs the IDCT a few zero coefficients.
    Ok((k - 1).min(63))
}

impl Decode for JpegDecoder {
    fn probe(&mut self, bytes: &[u8]) -> Result<ImageInfo, DecodeError> {
        self.parse_checked(bytes).map(|(info, _)| info)
    }

    fn decode_into(
        &mut self,
        bytes: &[u8],
        info: &ImageInfo,
        out: &mut [u8],
    ) -> Result<(), DecodeError> {
        self.decode_region(
            bytes,
            Region::full(info.width, info.height),
            Scale::FULL,
            out,
        )
        .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entropy_decoding_alone_takes_what_a_region_decode_takes_and_refuses_what_it_refuses() {
        let bytes = crate::testing::gradient_jpeg(96, 64, 90);
        let mut d = JpegDecoder::default();
        let region = Region {
            x: 8,
            y: 8,
            width: 40,
            height: 24,
        };
        d.entropy_decode_only(&bytes, region).unwrap();
        let mut out = vec![0; 40 * 24 * 3];
        // Cut inside the rows the region needs: both fail alike (truncated).
        let cut = &bytes[..bytes.len() * 2 / 3];
        let alone = d
            .entropy_decode_only(cut, Region::full(96, 64))
            .unwrap_err();
        let whole = d
            .decode_region(
                cut,
                Region::full(96, 64),
                Scale::FULL,
                &mut vec![0; 96 * 64 * 3],
            )
            .unwrap_err();
        assert_eq!(
            std::mem::discriminant(&alone),
            std::mem::discriminant(&whole)
        );
        d.decode_region(&bytes, region, Scale::FULL, &mut out)
            .unwrap();
        let outside = Region {
            x: 90,
            y: 0,
            width: 10,
            height: 10,
        };
        assert!(d.entropy_decode_only(&bytes, outside).is_err());
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_scans_bmi2_build_gives_the_plain_builds_pixels_and_errors() {
        let bytes = crate::testing::gradient_jpeg(200, 120, 85);
        let cut = &bytes[..bytes.len() * 3 / 4];
        let region = Region {
            x: 24,
            y: 16,
            width: 150,
            height: 90,
        };
        let run = |bmi2: bool| {
            let mut d = JpegDecoder::default();
            // Where the CPU lacks BMI2 both sides run the plain build.
            d.bmi2 &= bmi2;
            let mut outputs = Vec::new();
            for scale in [Scale::FULL, Scale::eighths(6).unwrap()] {
                let sr = scaled_region(&d.probe(&bytes).unwrap(), region, scale);
                let mut out = vec![0; (sr.width * sr.height * 3) as usize];
                d.decode_region(&bytes, region, scale, &mut out).unwrap();
                outputs.push(out);
            }
            d.entropy_decode_only(&bytes, region).unwrap();
            let errors = (
                d.entropy_decode_only(cut, Region::full(200, 120))
                    .unwrap_err()
                    .to_string(),
                d.decode_region(
                    cut,
                    Region::full(200, 120),
                    Scale::FULL,
                    &mut vec![0; 200 * 120 * 3],
                )
                .unwrap_err()
                .to_string(),
            );
            (outputs, errors)
        };
        assert_eq!(run(true), run(false));
    }

    /// Packs a string of '0'/'1' into bytes, padded with 1-bits as encoders do.
    fn pack(bits: &str) -> Vec<u8> {
        let mut bytes = vec![0xFFu8; bits.len().div_ceil(8)];
        for (i, b) in bits.bytes().enumerate() {
            if b == b'0' {
                bytes[i / 8] &= !(0x80 >> (i % 8));
            }
        }
        bytes
    }

    #[test]
    fn a_block_that_ends_at_its_last_coefficient_leaves_the_next_blocks_bits_alone() {
        // DC: "0" = difference of 0 bits. AC: "0" = (run 0, size 1), "10" = end of block.
        let mut counts = [0u8; 16];
        counts[0] = 1;
        let mut dc = HuffmanTable::default();
        dc.build(&huffman::HuffmanSpec::new(&counts, &[0x00]).unwrap(), false);
        counts[1] = 1;
        let mut ac = HuffmanTable::default();
        ac.build(
            &huffman::HuffmanSpec::new(&counts, &[0x01, 0x00]).unwrap(),
            true,
        );
        // Block 1: DC, then 63 times +1 ("0" + "1"), no end of block. Block 2: DC, end of block.
        // At the 63rd coefficient the peek also holds block 2's "0" + "1" of a would-be pair.
        let stream = pack(&format!("0{}010", "01".repeat(63)));
        let mut scan = Unstuffed::default();
        scan.fill(&stream, 0);
        let mut br = scan.reader();
        let q = [2u16; 64];
        let (mut pred, mut coef) = (0, [0i32; 64]);
        assert_eq!(
            block::<true>(&mut br, &dc, &ac, &q, &mut pred, &mut coef).unwrap(),
            63
        );
        assert_eq!(coef[0], 0);
        assert!(coef[1..].iter().all(|&c| c == 2));
        idct::clear_written(&mut coef, 63);
        assert_eq!(
            block::<true>(&mut br, &dc, &ac, &q, &mut pred, &mut coef).unwrap(),
            0
        );
        assert!(coef.iter().all(|&c| c == 0));
        assert!(!br.ends_early());
    }
}
