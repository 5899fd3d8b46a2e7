//! The engine's output stage: each decoded plane (Y, and Cb and Cr at their subsampled
//! resolution) is resampled straight to the output size, and colour is converted once, at
//! output resolution. Chroma is never upsampled to the crop's size and no RGB image of the
//! crop exists; a media engine works in YCbCr for the same reason.
//!
//! Resampling is antialiased bilinear with Pillow's (and torchvision's) filter: a triangle
//! widened by the downscale factor, normalized per output sample. Every plane maps the same
//! window of the image: a chroma plane subsampled by `s` sees it divided by `s` (JPEG's
//! centred chroma siting makes that exact in continuous coordinates), and each filter reads
//! only samples inside the decoded region.
//!
//! Both axes are filtered down columns, where sixteen adjacent samples share their weights and
//! so fill a vector: rows are filtered into a 16-bit intermediate (7 fractional bits, so
//! nothing is rounded to 8 bits between the passes), which is transposed, filtered again to
//! bytes and transposed back. On planar data that beats filtering along rows, where each
//! output sample would need its own gather.

use super::{Filter, Scale};
use crate::DecodeError;

/// A window of the image in full-resolution pixels; edges may be fractional.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    /// Left edge.
    pub left: f64,
    /// Top edge.
    pub top: f64,
    /// Width (positive).
    pub width: f64,
    /// Height (positive).
    pub height: f64,
}

/// How one axis of a decoded plane maps onto the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Axis {
    /// The decode's scale.
    pub scale: Scale,
    /// 2 where the plane is subsampled along this axis (chroma), else 1.
    pub factor: usize,
    /// Valid luma samples along the axis at the decode scale (beyond them is MCU padding).
    pub luma_valid: usize,
    /// The plane sample the buffer starts at.
    pub origin: usize,
    /// Samples the buffer holds along the axis.
    pub held: usize,
}

/// What the output stage makes of the decoded planes: `window` resampled to `out` (width,
/// height) with filters clipped to `region`, both in full-resolution pixels.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    pub region: super::Region,
    pub window: Window,
    pub out: (usize, usize),
    pub filter: Filter,
}

/// One decoded plane as the entropy decoder left it: rows of `stride` samples.
pub(crate) struct PlaneGeometry {
    pub stride: usize,
    pub across: Axis,
    pub down: Axis,
}

/// Fixed-point weights (Q15, as `pmulhrsw` takes them): each output sample's weights sum to
/// exactly `UNIT`, one less than 1.0, which fits an `i16` even when a single weight is all.
const UNIT: i32 = (1 << 15) - 1;

/// Fractional bits of the intermediate between the two passes.
const FRACTION: u32 = 7;

/// Level 128 with `FRACTION` bits: each pass's sum starts at `-MID` and gets it back at the
/// end (saturating), so its partial sums run centred on zero. Bicubic's positive weights come
/// before its negative lobes subtract, and their partial sums reach about 1.3 times a sample:
/// from zero, for levels near 255, that left the `i16` range and saturated, so bright
/// textured areas came out up to 12 levels dark; centred, they stay within it. The products
/// are the same, so every sum that never saturated is the same.
const MID: i16 = 128 << FRACTION;

/// The filter taps of one axis: for output sample `i`, source samples
/// `start[i]..start[i] + len[i]` (counted from `covering.0`) with weights
/// `weights[i * width..][..len[i]]`.
#[derive(Default)]
struct Taps {
    /// What the taps were computed for (`compute`'s arguments), when they are valid.
    key: Option<TapsKey>,
    /// The plane samples `[first, end)` the taps read.
    covering: (usize, usize),
    start: Vec<usize>,
    len: Vec<usize>,
    width: usize,
    weights: Vec<i16>,
    /// Scratch for `compute` on a subsampled axis: each output sample's weights on the
    /// plane's samples before rounding.
    plane: Vec<f64>,
    /// The output samples with a weight past Q15's range (bicubic enlargements near an edge,
    /// where the taps dropped past it leave the nearest sample a weight above 1.0), each with
    /// its weights unrounded (`width` of them, in `beyond_weights`): the passes compute
    /// those samples again from these ([`Taps::beyond`]).
    beyond: Vec<usize>,
    beyond_weights: Vec<f64>,
}

/// Zeros before each output sample's luma weights in [`LumaWeights::luma`]: the chroma filter
/// reads up to 4 luma samples before its first.
const PAD: usize = 4;

/// The filter over luma samples of one axis, before it is written as weights on a plane's
/// samples: the part of [`Taps::compute`] that is the same for the full-resolution plane and
/// the subsampled ones, computed once for both. Per output sample: the luma samples
/// `[first, end)` its filter reads, its weights on them (rows of `row` slots: `PAD` zeros,
/// `width` weights, zeros past its own), and their sum.
#[derive(Default)]
struct LumaWeights {
    key: Option<LumaKey>,
    width: usize,
    row: usize,
    span: Vec<(usize, usize)>,
    luma: Vec<f64>,
    sums: Vec<f64>,
}

/// [`LumaWeights::compute`]'s arguments, compared bit for bit.
#[derive(Clone, Copy, PartialEq, Eq)]
struct LumaKey {
    scale: Scale,
    luma_valid: usize,
    window: (u64, u64),
    region: (u32, u32),
    out: usize,
    filter: Filter,
}

/// What one axis of a plane is resampled to: the window of it (start and length, in
/// full-resolution pixels) mapped onto `out` samples by `filter`, whose taps are clipped to
/// `region` (the same, integers).
#[derive(Clone, Copy)]
struct AxisMap {
    window: (f64, f64),
    region: (u32, u32),
    out: usize,
    filter: Filter,
}

/// `Taps::compute`'s arguments, compared bit for bit: the taps are a function of them alone.
#[derive(Clone, Copy, PartialEq, Eq)]
struct TapsKey {
    axis: Axis,
    window: (u64, u64),
    region: (u32, u32),
    out: usize,
    filter: Filter,
}

impl Taps {
    /// Taps that map `map.window` (start and length, full-resolution pixels) of an axis onto
    /// `map.out` samples, with filters clipped to `map.region` (the same, integers).
    ///
    /// The filter is the one a decoder that upsampled chroma to full size would apply to
    /// the crop, written as weights on this plane's own samples. Over luma samples it is
    /// Pillow's antialiased bilinear: a triangle whose half-width is the scale factor (at
    /// least one sample), normalized. On a subsampled axis each luma sample's weight is then
    /// spread over the two chroma samples libjpeg's "fancy" upsampling would have mixed for it
    /// (3/4 nearer, 1/4 farther, the edge sample repeated at the image's edges), so the
    /// result is that decoder's, upsampling and all, in one pass at chroma resolution.
    ///
    /// Taps that already hold what these arguments give are kept: images of one width or
    /// height map that axis the same way, so a whole-image resize's taps are computed once
    /// for all the images of a size. The filter over luma samples is `luma`'s, which the
    /// axis's other kind of plane shares (computed there unless it already holds it).
    fn compute(
        &mut self,
        axis: &Axis,
        map: &AxisMap,
        luma: &mut LumaWeights,
    ) -> Result<(), DecodeError> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 support was just detected.
            return unsafe { self.compute_avx2(axis, map, luma) };
        }
        self.compute_here(axis, map, luma)
    }

    /// [`Taps::compute`] compiled for AVX2: its passes over all the output samples vectorize
    /// four doubles wide instead of two. The same operations in the same order on each value
    /// (no fused multiply-add: the compiler never contracts), so the same taps.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn compute_avx2(
        &mut self,
        axis: &Axis,
        map: &AxisMap,
        luma: &mut LumaWeights,
    ) -> Result<(), DecodeError> {
        self.compute_here(axis, map, luma)
    }

    /// The body of [`Taps::compute`], inlined into each build of it.
    #[inline(always)]
    fn compute_here(
        &mut self,
        axis: &Axis,
        map: &AxisMap,
        luma: &mut LumaWeights,
    ) -> Result<(), DecodeError> {
        let (window, region, out) = (map.window, map.region, map.out);
        let key = TapsKey {
            axis: *axis,
            window: (window.0.to_bits(), window.1.to_bits()),
            region,
            out,
            filter: map.filter,
        };
        if self.key == Some(key) {
            return Ok(());
        }
        self.key = None;
        self.beyond.clear();
        self.beyond_weights.clear();
        let s = axis.scale;
        let len = s.of(window.1);
        // The region's luma samples at the decode scale, and the plane samples covering them
        // (with the neighbours fancy upsampling reads on a subsampled axis).
        let b0 = s.floor(region.0 as usize);
        let b1 = s
            .ceil(region.0 as usize + region.1 as usize)
            .min(axis.luma_valid);
        let sub = axis.factor == 2;
        let valid = axis.luma_valid.div_ceil(axis.factor);
        self.covering = if sub {
            ((b0 / 2).saturating_sub(1), (b1.div_ceil(2) + 1).min(valid))
        } else {
            (b0, b1)
        };
        let (c0, c1) = self.covering;
        if b0 >= b1 || c0 < axis.origin || c1 > axis.origin + axis.held || len <= 0.0 {
            return Err(DecodeError::Parameter("region outside the decoded planes"));
        }
        luma.compute(axis, map, (b0, b1));
        let luma_width = luma.width;
        self.width = if sub { luma_width / 2 + 3 } else { luma_width };
        let luma_row = luma.row;
        // On a subsampled axis, the weights on the plane's samples. Chroma sample j is nearest
        // to luma samples 2j and 2j + 1 and next-nearest to 2j - 1 and 2j + 2; at the image's
        // edges it also stands in for its missing neighbour.
        self.start.clear();
        self.len.clear();
        if sub {
            // Every value is written below: resizing only zeroes what the vector grows by.
            self.plane.resize(out * self.width, 0.0);
            for ((&(first, end), row), plane) in luma
                .span
                .iter()
                .zip(luma.luma.chunks_exact(luma_row))
                .zip(self.plane.chunks_exact_mut(self.width))
            {
                let at = |p: usize| row[p + PAD - first];
                let lo_j = (first / 2).saturating_sub(1);
                let hi_j = ((end - 1) / 2 + 1).min(valid - 1);
                let end = (hi_j + 1) as f64;
                let weight = |j: usize| {
                    let mut v = 0.75 * (at(2 * j) + at(2 * j + 1)) + 0.25 * at(2 * j + 2);
                    if j > 0 {
                        v += 0.25 * at(2 * j - 1);
                    } else {
                        v += 0.25 * at(0);
                    }
                    if j == valid - 1 {
                        v += 0.25 * at(2 * j + 1);
                    }
                    zero_past(j as f64, end, v)
                };
                // Away from the image's edges, `weight` without its branches, over the four
                // slots `at(2j - 1)..=at(2j + 2)` of each j (`lo_j >= 1`, or `first <= 3` when it
                // is 0, keeps the first slot in the row); then the two edge samples again.
                let slots = &row[2 * lo_j + PAD - first - 1..][..2 * plane.len() + 2];
                let mut j = lo_j as f64;
                for (v_out, q) in plane.iter_mut().zip(slots.windows(4).step_by(2)) {
                    let mut v = 0.75 * (q[1] + q[2]) + 0.25 * q[3];
                    v += 0.25 * q[0];
                    *v_out = zero_past(j, end, v);
                    j += 1.0;
                }
                if lo_j == 0 {
                    plane[0] = weight(0);
                }
                if let Some(v_out) = plane.get_mut((valid - 1).wrapping_sub(lo_j)) {
                    *v_out = weight(valid - 1);
                }
                self.start.push(lo_j - c0);
                self.len.push(hi_j - lo_j + 1);
            }
        } else {
            for &(first, end) in &luma.span {
                self.start.push(first - c0);
                self.len.push((end - first).min(luma_width));
            }
        }
        // Rounded to Q15 so that each sample's weights sum to `UNIT`.
        // Every weight is written below (as for `plane` above).
        self.weights.resize(self.width * out, 0);
        let (width, plane, sums, luma) = (self.width, &self.plane, &luma.sums, &luma.luma);
        for (i, (row, &sum)) in self.weights.chunks_exact_mut(width).zip(sums).enumerate() {
            let unrounded = if sub {
                &plane[i * width..][..width]
            } else {
                &luma[i * luma_row + PAD..][..width]
            };
            let unit = f64::from(UNIT) / sum;
            // Bicubic's lobes are negative: round to nearest either way.
            // Saturating: bicubic's largest weight can exceed the range; such samples are
            // kept in `beyond` and computed again from their unrounded weights.
            for (q, &wk) in row.iter_mut().zip(unrounded) {
                *q = round_i16(wk * unit);
            }
            if unrounded
                .iter()
                .any(|&wk| !(f64::from(i16::MIN)..=f64::from(i16::MAX)).contains(&(wk * unit)))
            {
                self.beyond.push(i);
                self.beyond_weights
                    .extend(unrounded.iter().map(|&wk| wk / sum));
            }
        }
        for row in self.weights.chunks_exact_mut(width) {
            let (mut total, mut big, mut big_q) = (0i32, 0, 0);
            for (k, &q) in row.iter().enumerate() {
                total += i32::from(q);
                if q > big_q {
                    (big, big_q) = (k, q);
                }
            }
            // Rounding may leave the sum a little off: give the difference to the largest
            // weight, so flat areas stay exactly flat (bicubic's largest weight can sit at the
            // top of the range already: it stays there, and `beyond` has the sample).
            row[big] = (i32::from(row[big]) + UNIT - total).clamp(0, i32::from(i16::MAX)) as i16;
        }
        self.key = Some(key);
        Ok(())
    }
}

impl Taps {
    /// The output samples whose weights Q15 cannot hold (see `beyond`), each as its index,
    /// its first tap (counted from `covering.0`) and its unrounded weights.
    fn beyond(&self) -> impl Iterator<Item = (usize, usize, &[f64])> {
        let width = self.width;
        self.beyond
            .iter()
            .zip(self.beyond_weights.chunks_exact(width))
            .map(move |(&i, w)| (i, self.start[i], &w[..self.len[i].min(width)]))
    }

    /// What output sample `i` of a pass reads, for `width` samples side by side: the plane's
    /// rows (or columns) from its first tap's on (`src`'s lines `stride` apart), checked to
    /// hold every sample its weights read, and those weights.
    ///
    /// # Panics
    /// When `src` is too short for them (a bug in the taps' covering region).
    fn source<'a, T>(
        &self,
        i: usize,
        src: &'a [T],
        stride: usize,
        width: usize,
    ) -> (&'a [T], &[i16]) {
        let (first, n) = (self.start[i], self.len[i]);
        let rows = &src[first * stride..];
        assert!(
            rows.len() >= (n - 1) * stride + width,
            "filter reads past the plane"
        );
        (rows, &self.weights[i * self.width..][..n])
    }
}

impl LumaWeights {
    /// The filter over luma samples that maps `map.window` of an axis onto `map.out` samples,
    /// clipped to the region's luma samples `[b0, b1)` at the decode scale (`b0 < b1`), for
    /// `axis`'s scale and valid samples; kept when the arguments are those of the last call.
    /// Inlined into each build of [`Taps::compute`].
    #[inline(always)]
    fn compute(&mut self, axis: &Axis, map: &AxisMap, (b0, b1): (usize, usize)) {
        let AxisMap {
            window,
            region,
            out,
            filter,
        } = *map;
        let key = LumaKey {
            scale: axis.scale,
            luma_valid: axis.luma_valid,
            window: (window.0.to_bits(), window.1.to_bits()),
            region,
            out,
            filter,
        };
        if self.key == Some(key) {
            return;
        }
        self.key = None;
        let s = axis.scale;
        let (lo, len) = (s.of(window.0), s.of(window.1));
        let scale = len / out as f64;
        // Pillow's scheme: the filter is stretched by the downscale factor (at least 1).
        let filter_scale = scale.max(1.0);
        let support = filter_scale
            * match filter {
                Filter::Bicubic => 2.0,
                Filter::Bilinear | Filter::Nearest => 1.0,
            };
        let inv_scale = 1.0 / filter_scale;
        let luma_width = (support.ceil() as usize) * 2 + 1;
        self.width = luma_width;
        // Here and in `Taps::compute` the work is done pass by pass over all the output
        // samples: within a pass, samples are independent, so the core overlaps their long
        // chains of float operations (each sample's alone is latency-bound), and every loop
        // runs a fixed number of times per sample whatever its taps (weights past them are
        // zero), so no branch depends on them. Each weight is computed by the same operations
        // in the same order as one sample at a time would.
        //
        // First, the luma samples each output sample's filter reads.
        // torch's nearest: `floor(i * scale)` with the scale in f32 (at the decode scale).
        let nearest_scale = (window.1 as f32) / out as f32;
        self.span.clear();
        self.span.extend((0..out).map(|i| {
            if filter == Filter::Nearest {
                // An integer window is cut first; a fractional one is a resize then a cut, indexed
                // as torch indexes the resized image (its offset in resized pixels, whole).
                let at = if window.0.fract() == 0.0 {
                    window.0 + f64::from((i as f32 * nearest_scale).floor())
                } else {
                    let offset = (window.0 / (window.1 / out as f64)).round() as f32;
                    f64::from(((i as f32 + offset) * nearest_scale).floor())
                };
                let at = (floor(s.of(at)).max(0) as usize).clamp(b0, b1 - 1);
                (at, at + 1)
            } else {
                let centre = lo + (i as f64 + 0.5) * scale;
                let first = (floor(centre - support).max(0) as usize).clamp(b0, b1 - 1);
                (
                    first,
                    (floor(centre + support) as usize + 1).clamp(first + 1, b1),
                )
            }
        }));
        // Their weights and sums. A row's slots past its weights stay zero: the chroma filter
        // reads up to `luma_width + 6` slots from the row's first weight.
        let luma_row = PAD + luma_width + 8;
        self.row = luma_row;
        // The rows' weights are all written below and only their slots around them must be
        // zero, so those are zeroed row by row rather than the whole buffer (a per-image
        // `memset` of tens of kilobytes).
        self.luma.resize(out * luma_row, 0.0);
        self.sums.clear();
        for (i, (&(first, end), row)) in self
            .span
            .iter()
            .zip(self.luma.chunks_exact_mut(luma_row))
            .enumerate()
        {
            let centre = lo + (i as f64 + 0.5) * scale;
            let n = (end - first).min(luma_width);
            row[..PAD].copy_from_slice(&[0.0; PAD]);
            row[PAD + luma_width..].copy_from_slice(&[0.0; 8]);
            let row = &mut row[PAD..PAD + luma_width];
            let last = (first + n) as f64;
            let mut sum = 0.0;
            for (k, wk) in row.iter_mut().enumerate() {
                let at = (first + k) as f64;
                let x = (at + 0.5 - centre) * inv_scale;
                let w = match filter {
                    Filter::Nearest => 1.0,
                    Filter::Bilinear => (1.0 - x.abs()).max(0.0),
                    Filter::Bicubic => bicubic(x),
                };
                // Adding the zeros past the taps leaves the sum as it was.
                *wk = zero_past(at, last, w);
                sum += *wk;
            }
            if sum <= 0.0 {
                row.fill(0.0);
                row[0] = 1.0;
                sum = 1.0;
            }
            self.sums.push(sum);
        }
        self.key = Some(key);
    }
}

/// Pillow's bicubic kernel with `a = -0.5` (Catmull-Rom).
fn bicubic(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

/// `v.round() as i16` (halves away from zero, then saturated) for any `v` but NaN (which gives
/// an unspecified value; no weight is NaN), in steps that vectorize: no conversion
/// instruction and no branch. Clamping first gives the same (the range's ends are integers
/// and rounding is monotonic). Adding `1.5 * 2^52` to a value that small rounds it to an
/// integer, half to even, and leaves that integer in the low bits of the sum's mantissa, in
/// two's complement; the difference from the value, exact, then tells a tie that went
/// towards zero, which rounding away from zero takes the other way.
#[inline(always)]
fn round_i16(v: f64) -> i16 {
    const SHIFTER: f64 = 6_755_399_441_055_744.0;
    let c = if v > f64::from(i16::MAX) {
        f64::from(i16::MAX)
    } else if v < f64::from(i16::MIN) {
        f64::from(i16::MIN)
    } else {
        v
    };
    let y = c + SHIFTER;
    let even = y.to_bits() as i32;
    let d = c - (y - SHIFTER);
    let up = i32::from(d == 0.5 && c > 0.0);
    let down = i32::from(d == -0.5 && c < 0.0);
    (even + up - down) as i16
}

/// `v` where `at < end`, else zero, without a branch: whether the sample is past the end
/// changes from one output sample to the next in a way no predictor learns. The comparison
/// is of floats on purpose (exact: both are integers far below 2^53): the compiler selects
/// between floats after an integer comparison with a branch, after a float comparison with a
/// mask.
#[inline(always)]
fn zero_past(at: f64, end: f64, v: f64) -> f64 {
    if at < end {
        v
    } else {
        0.0
    }
}

/// `v.floor()` as an integer, without a call into libm on targets whose baseline has no
/// rounding instruction.
fn floor(v: f64) -> isize {
    let t = v as isize;
    if (t as f64) > v {
        t - 1
    } else {
        t
    }
}

/// The resampler of one engine: reused buffers, so nothing is allocated per image once warm.
#[derive(Default)]
pub(crate) struct PlaneResampler {
    /// Taps down and across, for full-resolution planes (`[0]`) and subsampled ones (`[1]`):
    /// kept apart so that each stays valid for the next image's plane of its kind.
    rows: [Taps; 2],
    cols: [Taps; 2],
    /// The filter over luma samples across and down, shared by both kinds of plane.
    luma: [LumaWeights; 2],
    /// The taps across laid out for [`across_avx512`], for each kind of plane.
    lanes: [Lanes; 2],
    /// The first pass's output, the same transposed, and the second pass's output.
    rows_out: Vec<i16>,
    transposed: Vec<i16>,
    cols_out: Vec<u8>,
    out: [Vec<u8>; 3],
    avx2: bool,
    /// AVX-512 with its 16-bit lanes (BW) and its 256-bit forms (VL): the second pass then
    /// runs along the first's rows (see [`across_avx512`]).
    avx512: bool,
}

impl PlaneResampler {
    pub fn new() -> Self {
        #[cfg(target_arch = "x86_64")]
        let (avx2, avx512) = (
            std::arch::is_x86_feature_detected!("avx2"),
            std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vl"),
        );
        #[cfg(not(target_arch = "x86_64"))]
        let (avx2, avx512) = (false, false);
        Self {
            avx2,
            avx512,
            ..Self::default()
        }
    }

    /// Resamples `plane` (whose buffer is laid out as `g` says) as `target` asks into output
    /// plane `k`. With `same_taps`, reuses the taps of the previous call (the second chroma
    /// plane).
    pub fn plane(
        &mut self,
        k: usize,
        plane: &[u8],
        g: &PlaneGeometry,
        target: &Target,
        same_taps: bool,
    ) -> Result<(), DecodeError> {
        let Target {
            region,
            window,
            out: (out_w, out_h),
            filter,
        } = *target;
        let (across, down) = (
            usize::from(g.across.factor == 2),
            usize::from(g.down.factor == 2),
        );
        if !same_taps {
            let (x, y) = ((window.left, window.width), (window.top, window.height));
            let [luma_across, luma_down] = &mut self.luma;
            let across_map = AxisMap {
                window: x,
                region: (region.x, region.width),
                out: out_w,
                filter,
            };
            let down_map = AxisMap {
                window: y,
                region: (region.y, region.height),
                out: out_h,
                filter,
            };
            self.cols[across].compute(&g.across, &across_map, luma_across)?;
            self.rows[down].compute(&g.down, &down_map, luma_down)?;
        }
        let (cols, rows_taps) = (&self.cols[across], &self.rows[down]);
        let (x0, x1) = cols.covering;
        let y0 = rows_taps.covering.0;
        let vw = x1 - x0;
        let origin = (y0 - g.down.origin) * g.stride + (x0 - g.across.origin);
        if g.stride * g.down.held > plane.len() || g.across.held > g.stride {
            return Err(DecodeError::Parameter("plane buffer too short"));
        }
        let src = &plane[origin..];
        let avx2 = self.avx2;
        let (rows, wide, tall) = (&mut self.rows_out, &mut self.transposed, &mut self.cols_out);
        // Rows: out_h x vw, 16-bit (and room for the loads of `across_avx512`).
        let rows = at_least(rows, out_h * vw + Lanes::READ_PAST);
        #[cfg(target_arch = "x86_64")]
        let wide_rows = self.avx512 && vw >= 32;
        #[cfg(not(target_arch = "x86_64"))]
        let wide_rows = false;
        if wide_rows {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: AVX-512 BW was detected at run time (`avx512` is only set then).
            unsafe {
                down_avx512(src, g.stride, rows_taps, vw, &mut rows[..out_h * vw]);
            }
        } else {
            filter_columns::<BytesToWide>(
                avx2,
                src,
                g.stride,
                rows_taps,
                vw,
                &mut rows[..out_h * vw],
            );
        }
        // The rows whose weights Q15 cannot hold, again, from their unrounded weights.
        for (i, first, weights) in rows_taps.beyond() {
            for (x, v) in rows[i * vw..][..vw].iter_mut().enumerate() {
                let mut sum = 0.0;
                for (k, w) in weights.iter().enumerate() {
                    sum += w * f64::from(src[(first + k) * g.stride + x]);
                }
                *v = round_i16(sum * f64::from(1u32 << FRACTION));
            }
        }
        if filter == Filter::Bicubic {
            // Bicubic's negative lobes overshoot at sharp edges; Pillow rounds and clips its
            // first pass to bytes, and the second reads the clipped values.
            clip_to_levels(&mut rows[..out_h * vw]);
        }
        #[cfg(target_arch = "x86_64")]
        if self.avx512 {
            let lanes = &mut self.lanes[across];
            if lanes.key != cols.key {
                lanes.lay_out(cols, out_w);
            }
            if lanes.fits {
                let out = &mut self.out[k];
                out.resize(out_w * out_h, 0);
                // SAFETY: AVX-512 BW and VL were detected at run time (`avx512` is only set
                // then).
                unsafe { across_avx512(rows, vw, out_h, lanes, out_w, out) };
                redo_columns(cols, rows, vw, out_w, out);
                return Ok(());
            }
        }
        // Transposed: vw x out_h.
        let wide = at_least(wide, vw * out_h);
        transpose(avx2, rows, out_h, vw, wide);
        // Columns, as rows of the transposed image: out_w x out_h, bytes.
        let tall = at_least(tall, out_w * out_h);
        filter_columns::<WideToBytes>(avx2, wide, out_h, cols, out_h, tall);
        let out = &mut self.out[k];
        out.resize(out_w * out_h, 0);
        transpose(avx2, tall, out_w, out_h, out);
        redo_columns(cols, rows, vw, out_w, out);
        Ok(())
    }

    /// Output plane `k` of the last [`PlaneResampler::plane`] call for it.
    pub fn out(&self, k: usize) -> &[u8] {
        &self.out[k]
    }
}

/// The output columns whose weights Q15 cannot hold, again, from their unrounded weights
/// over the first pass's `rows` (`vw` samples each), into `out` (rows of `out_w` bytes).
fn redo_columns(cols: &Taps, rows: &[i16], vw: usize, out_w: usize, out: &mut [u8]) {
    for (j, first, weights) in cols.beyond() {
        for (row, o) in rows.chunks_exact(vw).zip(out.chunks_exact_mut(out_w)) {
            let mut sum = 0.0;
            for (k, w) in weights.iter().enumerate() {
                sum += w * f64::from(row[first + k]);
            }
            let level = (sum / f64::from(1u32 << FRACTION) + 0.5).floor();
            o[j] = level.clamp(0.0, 255.0) as u8;
        }
    }
}

/// The first pass's sums clipped to the range of bytes (`0..=255` with `FRACTION` bits).
fn clip_to_levels(rows: &mut [i16]) {
    const TOP: i16 = 255 << FRACTION;
    for v in rows {
        *v = (*v).clamp(0, TOP);
    }
}

/// `v`'s first `n` elements, `v` grown (never shrunk) to hold them. The passes overwrite all
/// they use, so a buffer that held a larger plane serves a smaller one as it is: resizing it
/// to each plane's size zeroed the difference again whenever a chroma plane was followed by
/// the next image's luma.
fn at_least<T: Copy + Default>(v: &mut Vec<T>, n: usize) -> &mut [T] {
    if v.len() < n {
        v.resize(n, T::default());
    }
    &mut v[..n]
}

/// One filter pass's arithmetic, portable and vector; both give the same results.
trait Pass {
    type In: Copy;
    type Out: Copy;
    /// Output sample `x` of one row: the weighted sum of column `x` of `rows` (`stride`
    /// apart).
    fn sample(rows: &[Self::In], stride: usize, weights: &[i16], x: usize) -> Self::Out;
    /// The same for the whole blocks of sixteen samples in `out`.
    ///
    /// # Safety
    /// The CPU must support AVX2; `rows` must hold `(weights.len() - 1) * stride +
    /// out.len()` samples.
    #[cfg(target_arch = "x86_64")]
    unsafe fn blocks(rows: &[Self::In], stride: usize, weights: &[i16], out: &mut [Self::Out]);
}

/// `pmulhrsw`: the rounded high half of a Q15 product.
#[inline(always)]
fn mulhrs(a: i16, b: i16) -> i16 {
    ((i32::from(a) * i32::from(b) + (1 << 14)) >> 15) as i16
}

/// First pass: bytes in, the weighted sum with `FRACTION` fractional bits out, accumulated
/// from `-MID` (see [`MID`]). A bilinear sum leaves the `i16` range only by rounding
/// accumulated over hundreds of taps (enormous downscales), a bicubic one by overshooting
/// white; the last addition saturates, so a white area stays white.
struct BytesToWide;

impl Pass for BytesToWide {
    type In = u8;
    type Out = i16;
    #[inline]
    fn sample(rows: &[u8], stride: usize, weights: &[i16], x: usize) -> i16 {
        weights
            .iter()
            .enumerate()
            .fold(-MID, |acc, (k, &w)| {
                acc.saturating_add(mulhrs(i16::from(rows[k * stride + x]) << FRACTION, w))
            })
            .saturating_add(MID)
    }
    /// # Safety
    /// [`Pass::blocks`]'s: the CPU supports AVX2 and `rows` holds every sample read.
    #[cfg(target_arch = "x86_64")]
    unsafe fn blocks(rows: &[u8], stride: usize, weights: &[i16], out: &mut [i16]) {
        // SAFETY: the caller's contract is this function's.
        unsafe { rows_u8_avx2(rows, stride, weights, out) }
    }
}

/// Second pass: the intermediate in, rounded and clamped bytes out.
struct WideToBytes;

impl Pass for WideToBytes {
    type In = i16;
    type Out = u8;
    #[inline]
    fn sample(rows: &[i16], stride: usize, weights: &[i16], x: usize) -> u8 {
        let bias = (1i16 << (FRACTION - 1)) - MID;
        let acc = weights.iter().enumerate().fold(bias, |acc, (k, &w)| {
            acc.saturating_add(mulhrs(rows[k * stride + x], w))
        });
        (acc.saturating_add(MID) >> FRACTION).clamp(0, 255) as u8
    }
    /// # Safety
    /// [`Pass::blocks`]'s: the CPU supports AVX2 and `rows` holds every sample read.
    #[cfg(target_arch = "x86_64")]
    unsafe fn blocks(rows: &[i16], stride: usize, weights: &[i16], out: &mut [u8]) {
        // SAFETY: the caller's contract is this function's.
        unsafe { rows_i16_avx2(rows, stride, weights, out) }
    }
}

/// `dst` row `i` (`width` samples) = the weighted sum of `src` rows `taps.start[i]..` (rows
/// `stride` apart), by pass `P`.
fn filter_columns<P: Pass>(
    avx2: bool,
    src: &[P::In],
    stride: usize,
    taps: &Taps,
    width: usize,
    dst: &mut [P::Out],
) {
    for (i, out) in dst.chunks_exact_mut(width).enumerate() {
        let (rows, weights) = taps.source(i, src, stride, width);
        #[cfg(target_arch = "x86_64")]
        if avx2 && width >= 16 {
            // SAFETY: AVX2 support was detected at run time (`avx2` is only set then);
            // `Taps::source` checked that `rows` holds every row the weights read, `width`
            // samples long. The last block overlaps the one before it and writes the same values.
            unsafe {
                P::blocks(rows, stride, weights, out);
                let tail = width - 16;
                P::blocks(&rows[tail..], stride, weights, &mut out[tail..]);
            }
            continue;
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = avx2;
        for (x, o) in out.iter_mut().enumerate() {
            *o = P::sample(rows, stride, weights, x);
        }
    }
}

/// [`BytesToWide`], sixteen samples at a time, as far as whole blocks of sixteen go.
///
/// # Safety
/// The CPU must support AVX2; `rows` must hold `(weights.len() - 1) * stride + out.len()`
/// bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn rows_u8_avx2(rows: &[u8], stride: usize, weights: &[i16], out: &mut [i16]) {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm256_adds_epi16, _mm256_cvtepu8_epi16, _mm256_mulhrs_epi16,
        _mm256_set1_epi16, _mm256_slli_epi16, _mm256_storeu_si256, _mm_loadu_si128,
    };
    for x in (0..out.len() / 16).map(|b| b * 16) {
        // SAFETY: each load reads 16 bytes at `k * stride + x` for `k < weights.len()`,
        // inside `rows` by the contract as `x + 16 <= out.len()`; the store writes
        // `out[x..x + 16]`. Unaligned accesses are allowed.
        unsafe {
            let mut acc = _mm256_set1_epi16(-MID);
            for (k, &w) in weights.iter().enumerate() {
                let v = _mm_loadu_si128(rows.as_ptr().add(k * stride + x).cast::<__m128i>());
                let v = _mm256_slli_epi16(_mm256_cvtepu8_epi16(v), FRACTION as i32);
                acc = _mm256_adds_epi16(acc, _mm256_mulhrs_epi16(v, _mm256_set1_epi16(w)));
            }
            let acc = _mm256_adds_epi16(acc, _mm256_set1_epi16(MID));
            _mm256_storeu_si256(out.as_mut_ptr().add(x).cast::<__m256i>(), acc);
        }
    }
}

/// The first pass ([`filter_columns`] of [`BytesToWide`]) with AVX-512 BW: 32 samples a step
/// in 16-bit lanes, the same operations as [`rows_u8_avx2`] on twice the lanes, so the same
/// results; a row's last step overlaps the one before it and writes the same values. Safe:
/// only calling it needs AVX-512 BW (`unsafe` at the call, where the CPU was checked); its
/// loads are bounded by `Taps::source`'s check of each row's source.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw")]
fn down_avx512(src: &[u8], stride: usize, taps: &Taps, width: usize, dst: &mut [i16]) {
    use std::arch::x86_64::{
        __m256i, __m512i, _mm256_loadu_si256, _mm512_adds_epi16, _mm512_cvtepu8_epi16,
        _mm512_mulhrs_epi16, _mm512_set1_epi16, _mm512_slli_epi16, _mm512_storeu_si512,
    };
    assert!(width >= 32, "a row narrower than a step");
    for (i, out) in dst.chunks_exact_mut(width).enumerate() {
        let (rows, weights) = taps.source(i, src, stride, width);
        let steps = (0..width / 32).map(|b| b * 32);
        for x in steps.chain((!width.is_multiple_of(32)).then_some(width - 32)) {
            let mut acc = _mm512_set1_epi16(-MID);
            for (k, &w) in weights.iter().enumerate() {
                // SAFETY: reads 32 bytes at `k * stride + x` with `k < weights.len()` and
                // `x + 32 <= width`: inside `rows`, as `Taps::source` checked.
                let v = unsafe {
                    _mm256_loadu_si256(rows.as_ptr().add(k * stride + x).cast::<__m256i>())
                };
                let v = _mm512_slli_epi16::<FRACTION>(_mm512_cvtepu8_epi16(v));
                acc = _mm512_adds_epi16(acc, _mm512_mulhrs_epi16(v, _mm512_set1_epi16(w)));
            }
            let acc = _mm512_adds_epi16(acc, _mm512_set1_epi16(MID));
            // SAFETY: writes `out[x..x + 32]`, inside the row (`x + 32 <= width`).
            unsafe { _mm512_storeu_si512(out.as_mut_ptr().add(x).cast::<__m512i>(), acc) };
        }
    }
}

/// [`WideToBytes`], sixteen samples at a time, as far as whole blocks of sixteen go.
///
/// # Safety
/// The CPU must support AVX2; `rows` must hold `(weights.len() - 1) * stride + out.len()`
/// samples.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn rows_i16_avx2(rows: &[i16], stride: usize, weights: &[i16], out: &mut [u8]) {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm256_adds_epi16, _mm256_castsi256_si128, _mm256_loadu_si256,
        _mm256_mulhrs_epi16, _mm256_packus_epi16, _mm256_permute4x64_epi64, _mm256_set1_epi16,
        _mm256_srai_epi16, _mm_storeu_si128,
    };
    for x in (0..out.len() / 16).map(|b| b * 16) {
        // SAFETY: each load reads 16 samples at `k * stride + x` for `k < weights.len()`,
        // inside `rows` by the contract as `x + 16 <= out.len()`; the store writes
        // `out[x..x + 16]`. Unaligned accesses are allowed.
        unsafe {
            let mut acc = _mm256_set1_epi16((1 << (FRACTION - 1)) - MID);
            for (k, &w) in weights.iter().enumerate() {
                let v = _mm256_loadu_si256(rows.as_ptr().add(k * stride + x).cast::<__m256i>());
                acc = _mm256_adds_epi16(acc, _mm256_mulhrs_epi16(v, _mm256_set1_epi16(w)));
            }
            let acc = _mm256_adds_epi16(acc, _mm256_set1_epi16(MID));
            let v = _mm256_srai_epi16(acc, FRACTION as i32);
            // Packing works within 128-bit lanes; gather the two low quarters.
            let bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(v, v), 0b00_00_10_00);
            _mm_storeu_si128(
                out.as_mut_ptr().add(x).cast::<__m128i>(),
                _mm256_castsi256_si128(bytes),
            );
        }
    }
}

/// The taps across one kind of plane laid out for [`across_avx512`]: the output samples in
/// groups of 32, one per 16-bit lane of a 512-bit register, each group's taps reading within
/// 64 consecutive samples of a row (two registers) from `base[group]`. For each group and
/// tap `k`, 32 offsets from `base` (output sample `x`'s `k`-th sample) and 32 weights; past a
/// sample's taps the weight is 0 and the offset 0.
#[derive(Default)]
struct Lanes {
    /// The key of the taps laid out (None before the first).
    key: Option<TapsKey>,
    /// Whether every group's taps read within 64 samples (else the transposing passes run).
    fits: bool,
    /// Taps per sample, the most any sample has.
    taps: usize,
    base: Vec<usize>,
    offset: Vec<i16>,
    weight: Vec<i16>,
}

impl Lanes {
    /// Samples a row's loads may read past the row: the last group's two registers.
    const READ_PAST: usize = 64;

    fn lay_out(&mut self, taps: &Taps, out: usize) {
        self.key = taps.key;
        self.taps = taps.width;
        self.fits = false;
        self.base.clear();
        for x0 in (0..out).step_by(32) {
            let group = x0..(x0 + 32).min(out);
            let base = group.clone().map(|x| taps.start[x]).min().unwrap_or(0);
            let end = group.map(|x| taps.start[x] + taps.len[x]).max();
            if end.unwrap_or(base) - base > 64 {
                return;
            }
            self.base.push(base);
        }
        let size = self.base.len() * self.taps * 32;
        self.offset.clear();
        self.offset.resize(size, 0);
        self.weight.clear();
        self.weight.resize(size, 0);
        for x in 0..out {
            let (g, lane) = (x / 32, x % 32);
            let weights = &taps.weights[x * taps.width..][..taps.len[x]];
            for (k, &w) in weights.iter().enumerate() {
                let at = (g * self.taps + k) * 32 + lane;
                self.offset[at] = (taps.start[x] + k - self.base[g]) as i16;
                self.weight[at] = w;
            }
        }
        self.fits = true;
    }
}

/// The second pass ([`WideToBytes`]) along the rows of the first pass's output (`height` rows
/// of `width` samples in `rows`) into `out` (`height` rows of `out_w` bytes), for CPUs with
/// AVX-512 BW: 32 output samples at a time, each tap's samples picked out of two registers
/// of the row by one permute (`vpermi2w`). The transposing passes need two transposes to run
/// the same filter down columns; this needs none. The sums are the same, tap by tap in the
/// same order (a tap past a sample's own adds zero), so the bytes are too.
///
/// # Safety
/// The CPU must support AVX-512 BW and VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn across_avx512(
    rows: &[i16],
    width: usize,
    height: usize,
    lanes: &Lanes,
    out_w: usize,
    out: &mut [u8],
) {
    let groups = lanes.base.len();
    assert_eq!(
        groups,
        out_w.div_ceil(32),
        "lanes laid out for another width"
    );
    assert!(
        lanes.offset.len() == groups * lanes.taps * 32 && lanes.weight.len() == lanes.offset.len()
    );
    assert!(
        lanes.base.iter().all(|&b| b < width),
        "a group starts past the row"
    );
    assert!(rows.len() >= height * width + Lanes::READ_PAST - 1 && out.len() >= height * out_w);
    // A group's offsets and weights stay in registers down all the rows when the taps are
    // few: in the downscales this pass takes (under about 2: a group's taps must read within
    // 64 samples, wider ones take the transposing passes), bilinear has at most 5 and
    // bicubic 9.
    for g in 0..groups {
        // SAFETY: the caller's promise, and the asserts above for `group`'s.
        unsafe {
            match lanes.taps {
                1 => group::<1>(rows, width, height, lanes, g, out_w, out),
                2 => group::<2>(rows, width, height, lanes, g, out_w, out),
                3 => group::<3>(rows, width, height, lanes, g, out_w, out),
                4 => group::<4>(rows, width, height, lanes, g, out_w, out),
                5 => group::<5>(rows, width, height, lanes, g, out_w, out),
                6 => group::<6>(rows, width, height, lanes, g, out_w, out),
                7 => group::<7>(rows, width, height, lanes, g, out_w, out),
                8 => group::<8>(rows, width, height, lanes, g, out_w, out),
                9 => group::<9>(rows, width, height, lanes, g, out_w, out),
                _ => group::<0>(rows, width, height, lanes, g, out_w, out),
            }
        }
    }
}

/// Group `g` of [`across_avx512`] down every row: with `T` taps held in registers, or (`T` 0)
/// any number loaded tap by tap.
///
/// # Safety
/// [`across_avx512`]'s, and its asserts.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
#[inline]
unsafe fn group<const T: usize>(
    rows: &[i16],
    width: usize,
    height: usize,
    lanes: &Lanes,
    g: usize,
    out_w: usize,
    out: &mut [u8],
) {
    use std::arch::x86_64::{
        __m512i, _mm256_mask_storeu_epi8, _mm512_adds_epi16, _mm512_cvtusepi16_epi8,
        _mm512_loadu_si512, _mm512_max_epi16, _mm512_mulhrs_epi16, _mm512_permutex2var_epi16,
        _mm512_set1_epi16, _mm512_setzero_si512, _mm512_srai_epi16,
    };
    let (taps, base, x0) = (lanes.taps, lanes.base[g], g * 32);
    let n = (out_w - x0).min(32);
    let mask = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
    // Tap `k`'s 32 offsets or weights of group `g` (`k < taps`: `T` is 0 or `taps`).
    let vector = |v: &[i16], k: usize| {
        // SAFETY: the 32 values at `(g * taps + k) * 32` are inside both vectors, which hold
        // `groups * taps * 32` (asserted by `across_avx512`); AVX-512 F is the caller's
        // promise. Unaligned loads are allowed.
        unsafe { _mm512_loadu_si512(v.as_ptr().add((g * taps + k) * 32).cast()) }
    };
    let held: [(__m512i, __m512i); T] =
        std::array::from_fn(|k| (vector(&lanes.offset, k), vector(&lanes.weight, k)));
    for y in 0..height {
        // SAFETY: the loads of the row read 64 samples from `y * width + base`, which ends
        // before `(y + 1) * width + READ_PAST - 1 <= rows.len()` as `base < width`; the store
        // writes the group's `n` samples of output row `y`, none past `out_w`, inside `out`
        // (all asserted by `across_avx512`). AVX-512 BW and VL are the caller's promise.
        // Unaligned accesses are allowed.
        unsafe {
            let row = rows.as_ptr().add(y * width + base);
            let (lo, hi) = (
                _mm512_loadu_si512(row.cast()),
                _mm512_loadu_si512(row.add(32).cast()),
            );
            let mut acc = _mm512_set1_epi16((1 << (FRACTION - 1)) - MID);
            let mut add = |(offset, weight): (__m512i, __m512i)| {
                let v = _mm512_permutex2var_epi16(lo, offset, hi);
                acc = _mm512_adds_epi16(acc, _mm512_mulhrs_epi16(v, weight));
            };
            if T == 0 {
                for k in 0..taps {
                    add((vector(&lanes.offset, k), vector(&lanes.weight, k)));
                }
            } else {
                for &tap in &held {
                    add(tap);
                }
            }
            // `((acc + MID) >> FRACTION).clamp(0, 255)`: negatives to 0, then the narrowing
            // saturates above.
            let acc = _mm512_adds_epi16(acc, _mm512_set1_epi16(MID));
            let v = _mm512_max_epi16(
                _mm512_srai_epi16::<{ FRACTION }>(acc),
                _mm512_setzero_si512(),
            );
            _mm256_mask_storeu_epi8(
                out.as_mut_ptr().add(y * out_w + x0).cast(),
                mask,
                _mm512_cvtusepi16_epi8(v),
            );
        }
    }
}

/// `dst` (`cols` x `rows`) = the transpose of `src` (`rows` x `cols`), for 1- or 2-byte
/// samples: square tiles of 16-byte rows through vector registers (with AVX2, two tiles one
/// above the other at once, one per 128-bit lane). Where a side is not a whole number of
/// tiles, its last tile overlaps the one before it and writes the same values again; only a
/// matrix narrower or shorter than one tile goes sample by sample.
fn transpose<T: Copy>(avx2: bool, src: &[T], rows: usize, cols: usize, dst: &mut [T]) {
    assert!(src.len() >= rows * cols && dst.len() >= rows * cols);
    let size = std::mem::size_of::<T>();
    assert!(size == 1 || size == 2, "bytes or 16-bit samples");
    let t = 16 / size;
    #[cfg(target_arch = "x86_64")]
    if rows >= t && cols >= t {
        let (from, to) = (src.as_ptr().cast::<u8>(), dst.as_mut_ptr().cast::<u8>());
        if avx2 && rows >= 2 * t {
            // SAFETY: AVX2 support was detected at run time (`avx2` is only set then); the
            // tiles lie inside both matrices, whose sizes were asserted above.
            unsafe {
                if t == 16 {
                    transpose_pairs_avx2::<16>(from, (rows, cols, size), to);
                } else {
                    transpose_pairs_avx2::<8>(from, (rows, cols, size), to);
                }
            }
            return;
        }
        for r0 in tile_starts(rows, t) {
            for c0 in tile_starts(cols, t) {
                // SAFETY: SSE2 is part of x86_64; the tile's rows `r0..r0 + t` and columns
                // `c0..c0 + t` (of `16 / t`-byte samples) lie inside both matrices, whose
                // sizes were asserted above.
                unsafe {
                    let from = from.add((r0 * cols + c0) * size);
                    let to = to.add((c0 * rows + r0) * size);
                    if t == 16 {
                        transpose_tile::<16>(from, cols, to, rows);
                    } else {
                        transpose_tile::<8>(from, cols * 2, to, rows * 2);
                    }
                }
            }
        }
        return;
    }
    let _ = (avx2, t);
    for r in 0..rows {
        for c in 0..cols {
            dst[c * rows + r] = src[r * cols + c];
        }
    }
}

/// Where the tiles of `t` samples along a side of `n >= t` start: the whole tiles, then one
/// ending at the side's end when `n` is not a multiple of `t` (overlapping the one before).
#[cfg(target_arch = "x86_64")]
fn tile_starts(n: usize, t: usize) -> impl Iterator<Item = usize> {
    (0..n / t)
        .map(move |i| i * t)
        .chain((!n.is_multiple_of(t)).then_some(n - t))
}

/// Row `i`'s position with its index bits reversed, for `n` (16 or 8) rows: the order in
/// which [`unpack_rounds`] wants a tile's rows.
#[cfg(target_arch = "x86_64")]
fn reversed(n: usize, i: usize) -> usize {
    const REVERSED_16: [usize; 16] = [0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15];
    const REVERSED_8: [usize; 8] = [0, 4, 2, 6, 1, 5, 3, 7];
    if n == 16 {
        REVERSED_16[i]
    } else {
        REVERSED_8[i]
    }
}

/// Transposes the `N`x`N` tiles of `16 / N`-byte samples (16 bytes a row) in each 128-bit
/// lane of `N` registers. Each round interleaves register `i` with `i + N/2` at the sample
/// width (`unpack(bytes, high, a, b)`: the low or high halves of each lane of `a` and `b`,
/// `bytes` at a time), then twice that, up to 8 bytes; after the last, register `j` holds
/// column `j` with the rows in bit-reversed order, so the rows go in bit-reversed
/// ([`reversed`]) to come out in order. Every round is written out with constant widths, so
/// the tile stays in registers (a loop over the widths kept it on the stack: the transposes
/// were then a quarter of the engine's resampling time).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn unpack_rounds<const N: usize, V: Copy>(
    a: [V; N],
    unpack: impl Fn(usize, bool, V, V) -> V,
) -> [V; N] {
    /// One round: registers `i` and `i + N/2` interleaved into `2i` and `2i + 1`.
    #[inline(always)]
    fn round<const N: usize, V: Copy>(
        b: [V; N],
        bytes: usize,
        unpack: &impl Fn(usize, bool, V, V) -> V,
    ) -> [V; N] {
        let mut a = b;
        for i in 0..N / 2 {
            a[2 * i] = unpack(bytes, false, b[i], b[i + N / 2]);
            a[2 * i + 1] = unpack(bytes, true, b[i], b[i + N / 2]);
        }
        a
    }
    let mut a = a;
    if N == 16 {
        a = round(a, 1, &unpack);
    }
    a = round(a, 2, &unpack);
    a = round(a, 4, &unpack);
    round(a, 8, &unpack)
}

/// Transposes an `N`x`N` tile of `16 / N`-byte samples (16 bytes a row) at `src` (rows
/// `src_stride` bytes apart) into `dst` (rows `dst_stride` bytes apart), through SSE2
/// registers ([`unpack_rounds`]).
///
/// # Safety
/// Both tiles must lie inside their buffers.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose_tile<const N: usize>(
    src: *const u8,
    src_stride: usize,
    dst: *mut u8,
    dst_stride: usize,
) {
    use std::arch::x86_64::{
        __m128i, _mm_loadu_si128, _mm_storeu_si128, _mm_unpackhi_epi16, _mm_unpackhi_epi32,
        _mm_unpackhi_epi64, _mm_unpackhi_epi8, _mm_unpacklo_epi16, _mm_unpacklo_epi32,
        _mm_unpacklo_epi64, _mm_unpacklo_epi8,
    };
    // SAFETY: the caller guarantees the N rows of 16 bytes at `src` and `dst` are in bounds;
    // the unpacks are SSE2, part of x86_64's baseline.
    unsafe {
        let a: [__m128i; N] = std::array::from_fn(|i| {
            _mm_loadu_si128(src.add(reversed(N, i) * src_stride).cast::<__m128i>())
        });
        let a = unpack_rounds(a, |bytes, high, x, y| match (bytes, high) {
            (1, false) => _mm_unpacklo_epi8(x, y),
            (1, true) => _mm_unpackhi_epi8(x, y),
            (2, false) => _mm_unpacklo_epi16(x, y),
            (2, true) => _mm_unpackhi_epi16(x, y),
            (4, false) => _mm_unpacklo_epi32(x, y),
            (4, true) => _mm_unpackhi_epi32(x, y),
            (_, false) => _mm_unpacklo_epi64(x, y),
            (_, true) => _mm_unpackhi_epi64(x, y),
        });
        for (j, v) in a.iter().enumerate() {
            _mm_storeu_si128(dst.add(j * dst_stride).cast::<__m128i>(), *v);
        }
    }
}

/// [`transpose`] (`rows >= 2N`, `cols >= N` of `size` = `16 / N` bytes) by pairs of tiles with
/// AVX2: the tile at rows `r0..r0 + N` in the low lane of each register, the one below it in
/// the high lane, so that each transposed column of the pair is 32 consecutive bytes of `dst`.
/// The same rounds as [`transpose_tile`] on twice the width, so half the instructions per
/// tile. The last pair down and the last column of tiles across overlap the ones before them
/// where a side is not a whole number of them.
///
/// # Safety
/// The CPU must support AVX2; `src` must hold `rows` rows of `cols` samples and `dst` `cols`
/// rows of `rows` samples.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose_pairs_avx2<const N: usize>(
    src: *const u8,
    (rows, cols, size): (usize, usize, usize),
    dst: *mut u8,
) {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm256_castsi128_si256, _mm256_inserti128_si256, _mm256_storeu_si256,
        _mm256_unpackhi_epi16, _mm256_unpackhi_epi32, _mm256_unpackhi_epi64, _mm256_unpackhi_epi8,
        _mm256_unpacklo_epi16, _mm256_unpacklo_epi32, _mm256_unpacklo_epi64, _mm256_unpacklo_epi8,
        _mm_loadu_si128,
    };
    let (src_stride, dst_stride) = (cols * size, rows * size);
    for r0 in tile_starts(rows, 2 * N) {
        for c0 in tile_starts(cols, N) {
            // SAFETY: rows `r0..r0 + 2N`, columns `c0..c0 + N` of `src` and rows
            // `c0..c0 + N`, columns `r0..r0 + 2N` of `dst` lie inside them by the caller's
            // promise; AVX2 is too. Unaligned accesses are allowed.
            unsafe {
                let from = src.add(r0 * src_stride + c0 * size);
                let to = dst.add(c0 * dst_stride + r0 * size);
                let a: [__m256i; N] = std::array::from_fn(|i| {
                    let row = from.add(reversed(N, i) * src_stride);
                    let upper = _mm_loadu_si128(row.cast::<__m128i>());
                    let lower = _mm_loadu_si128(row.add(N * src_stride).cast::<__m128i>());
                    _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(upper), lower)
                });
                let a = unpack_rounds(a, |bytes, high, x, y| match (bytes, high) {
                    (1, false) => _mm256_unpacklo_epi8(x, y),
                    (1, true) => _mm256_unpackhi_epi8(x, y),
                    (2, false) => _mm256_unpacklo_epi16(x, y),
                    (2, true) => _mm256_unpackhi_epi16(x, y),
                    (4, false) => _mm256_unpacklo_epi32(x, y),
                    (4, true) => _mm256_unpackhi_epi32(x, y),
                    (_, false) => _mm256_unpacklo_epi64(x, y),
                    (_, true) => _mm256_unpackhi_epi64(x, y),
                });
                for (j, v) in a.iter().enumerate() {
                    _mm256_storeu_si256(to.add(j * dst_stride).cast::<__m256i>(), *v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_sum_to_one_and_stay_inside_the_covering_samples() {
        let mut t = Taps::default();
        // (axis length in pixels, scale in eighths, factor, window, region, out)
        for (size, eighths, factor, window, region, out) in [
            (300, 8, 1, (0.0, 300.0), (0, 300), 224),
            (300, 8, 2, (0.0, 300.0), (0, 300), 224),
            (301, 8, 2, (7.0, 250.0), (7, 250), 224),
            (120, 8, 1, (13.5, 90.25), (10, 97), 224),
            (120, 8, 2, (13.5, 90.25), (10, 97), 33),
            (999, 4, 2, (100.0, 800.0), (100, 800), 112),
            (999, 6, 2, (100.0, 800.0), (100, 800), 224),
            (333, 5, 1, (10.5, 300.25), (10, 301), 150),
            (333, 7, 2, (10.5, 300.25), (10, 301), 224),
            (50, 8, 2, (0.0, 50.0), (0, 50), 7),
            (1, 8, 1, (0.0, 1.0), (0, 1), 16),
            (1, 8, 2, (0.0, 1.0), (0, 1), 16),
        ] {
            let scale = Scale::eighths(eighths).unwrap();
            let luma_valid = scale.ceil(size);
            let axis = Axis {
                scale,
                factor,
                luma_valid,
                origin: 0,
                held: luma_valid.div_ceil(factor),
            };
            t.compute(
                &axis,
                &AxisMap {
                    window,
                    region,
                    out,
                    filter: Filter::Bilinear,
                },
                &mut LumaWeights::default(),
            )
            .unwrap();
            let (c0, c1) = t.covering;
            for i in 0..out {
                let w = &t.weights[i * t.width..][..t.len[i]];
                assert_eq!(w.iter().map(|&q| i32::from(q)).sum::<i32>(), UNIT);
                assert!(w.iter().all(|&q| q >= 0));
                assert!(c0 + t.start[i] + t.len[i] <= c1, "{size} {factor} {i}");
            }
        }
    }

    #[test]
    fn a_subsampled_axis_gets_the_weights_of_upsampling_then_resampling() {
        // Chroma of a 4:2:0 image at its own size: each luma pixel's weight is linear
        // interpolation between its two nearest chroma samples, 3/4 and 1/4 (libjpeg's fancy
        // upsampling), and at the image's edges the edge sample stands in for its neighbour.
        let axis = Axis {
            scale: Scale::FULL,
            factor: 2,
            luma_valid: 8,
            origin: 0,
            held: 4,
        };
        let mut t = Taps::default();
        t.compute(
            &axis,
            &AxisMap {
                window: (0.0, 8.0),
                region: (0, 8),
                out: 8,
                filter: Filter::Bilinear,
            },
            &mut LumaWeights::default(),
        )
        .unwrap();
        let unit = f64::from(UNIT);
        let weights = |i: usize| -> Vec<f64> {
            let mut w = vec![0.0; 4];
            for (k, &q) in t.weights[i * t.width..][..t.len[i]].iter().enumerate() {
                w[t.start[i] + k] = f64::from(q) / unit;
            }
            w
        };
        for (i, expected) in [
            (0, [1.0, 0.0, 0.0, 0.0]),
            (1, [0.75, 0.25, 0.0, 0.0]),
            (2, [0.25, 0.75, 0.0, 0.0]),
            (7, [0.0, 0.0, 0.0, 1.0]),
        ] {
            let got = weights(i);
            assert!(
                got.iter().zip(expected).all(|(g, e)| (g - e).abs() < 1e-4),
                "sample {i}: {got:?}"
            );
        }
    }

    #[test]
    fn vector_and_portable_filters_agree() {
        let mut x = 3u32;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        };
        let avx2 = PlaneResampler::new().avx2;
        let (w, h) = (75, 61);
        let src: Vec<u8> = (0..w * h).map(|_| next()).collect();
        let mut t = Taps::default();
        for (out, factor) in [(17, 1), (40, 2), (61, 1), (130, 2)] {
            let axis = Axis {
                scale: Scale::FULL,
                factor,
                luma_valid: h * factor,
                origin: 0,
                held: h,
            };
            t.compute(
                &axis,
                &AxisMap {
                    window: (2.5, 117.0),
                    region: (2, 118),
                    out,
                    filter: Filter::Bilinear,
                },
                &mut LumaWeights::default(),
            )
            .unwrap();
            let (mut fast, mut portable) = (vec![0; out * w], vec![0; out * w]);
            filter_columns::<BytesToWide>(avx2, &src, w, &t, w, &mut fast);
            filter_columns::<BytesToWide>(false, &src, w, &t, w, &mut portable);
            assert_eq!(fast, portable, "{out} rows, first pass");
            // The second pass reads the first's 16-bit rows.
            let mut t2 = Taps::default();
            let axis2 = Axis {
                factor: 1,
                luma_valid: out,
                held: out,
                ..axis
            };
            t2.compute(
                &axis2,
                &AxisMap {
                    window: (0.5, out as f64 - 1.0),
                    region: (0, out as u32),
                    out: 23,
                    filter: Filter::Bilinear,
                },
                &mut LumaWeights::default(),
            )
            .unwrap();
            let (mut fast2, mut portable2) = (vec![0u8; 23 * w], vec![0u8; 23 * w]);
            filter_columns::<WideToBytes>(avx2, &fast, w, &t2, w, &mut fast2);
            filter_columns::<WideToBytes>(false, &fast, w, &t2, w, &mut portable2);
            assert_eq!(fast2, portable2, "{out} rows, second pass");
        }
    }

    /// A full-resolution, unsubsampled `w`x`h` plane held whole.
    fn whole_plane(w: usize, h: usize) -> PlaneGeometry {
        let axis = |n: usize| Axis {
            scale: Scale::FULL,
            factor: 1,
            luma_valid: n,
            origin: 0,
            held: n,
        };
        PlaneGeometry {
            stride: w,
            across: axis(w),
            down: axis(h),
        }
    }

    /// A resize of the whole of a `w`x`h` plane to `out` by `filter`.
    fn whole_target(w: usize, h: usize, out: (usize, usize), filter: Filter) -> Target {
        Target {
            region: super::super::Region::full(w as u32, h as u32),
            window: Window {
                left: 0.0,
                top: 0.0,
                width: w as f64,
                height: h as f64,
            },
            out,
            filter,
        }
    }

    #[test]
    fn flat_planes_stay_flat_through_both_passes() {
        let (w, h) = (40, 30);
        let mut r = PlaneResampler::new();
        for v in [0u8, 1, 127, 128, 254, 255] {
            let plane = vec![v; w * h];
            let g = whole_plane(w, h);
            for out in [(24, 24), (53, 11)] {
                let target = Target {
                    region: super::super::Region::full(w as u32, h as u32),
                    window: Window {
                        left: 1.5,
                        top: 0.25,
                        width: 37.0,
                        height: 29.0,
                    },
                    out,
                    filter: Filter::Bilinear,
                };
                r.plane(0, &plane, &g, &target, false).unwrap();
                assert!(r.out(0).iter().all(|&o| o == v), "{v} to {out:?}");
            }
        }
    }

    #[test]
    fn rounding_without_libm_is_f64_round_saturated_to_i16() {
        let halfish = [
            0.5,
            0.49999999999999994,
            0.5000000000000001,
            1.5,
            2.5,
            1e-300,
        ];
        let mut values: Vec<f64> = halfish.iter().flat_map(|&v| [v, -v]).collect();
        values.extend((0..20_000).map(|i| (i as f64 - 10_000.0) * 0.37 + 0.001 * i as f64));
        values.extend([
            0.0,
            -0.0,
            32766.5,
            -32766.5,
            32767.0,
            32767.4,
            32767.5,
            -32768.4,
            -32768.5,
            1e15 + 0.5,
            -(1e15 + 0.5),
            f64::INFINITY,
            f64::NEG_INFINITY,
        ]);
        for v in values {
            assert_eq!(round_i16(v), v.round() as i16, "{v:e}");
        }
    }

    #[test]
    fn bicubic_weights_beyond_the_range_saturate_instead_of_wrapping() {
        // Upscaling: bicubic's centre weight is close to the whole and its lobes negative, so
        // before the sum is corrected the largest weight can round above `i16::MAX`.
        let mut t = Taps::default();
        for (size, out) in [(50usize, 224usize), (7, 200), (120, 121), (31, 64)] {
            let axis = Axis {
                scale: Scale::FULL,
                factor: 1,
                luma_valid: size,
                origin: 0,
                held: size,
            };
            t.compute(
                &axis,
                &AxisMap {
                    window: (0.0, size as f64),
                    region: (0, size as u32),
                    out,
                    filter: Filter::Bicubic,
                },
                &mut LumaWeights::default(),
            )
            .unwrap();
            for i in 0..out {
                let row = &t.weights[i * t.width..][..t.len[i]];
                // Bicubic's lobes are at most a tenth of the whole below zero; a wrapped weight
                // would be far below.
                assert!(
                    row.iter().all(|&w| w > -(UNIT as i16) / 4),
                    "{size} to {out}, sample {i}: {row:?}"
                );
            }
        }
    }

    /// A `w`x`h` image's plane held whole (subsampled by `factor` on both axes), and a target
    /// that resamples the image from column `left` on to `out` with `filter`.
    fn whole_image(
        w: usize,
        h: usize,
        factor: usize,
        left: f64,
        out: (usize, usize),
        filter: Filter,
    ) -> (PlaneGeometry, Target) {
        let axis = |n: usize| Axis {
            scale: Scale::FULL,
            factor,
            luma_valid: n,
            origin: 0,
            held: n.div_ceil(factor),
        };
        let g = PlaneGeometry {
            stride: w.div_ceil(factor),
            across: axis(w),
            down: axis(h),
        };
        let target = Target {
            region: super::super::Region::full(w as u32, h as u32),
            window: Window {
                left,
                top: 0.0,
                width: w as f64 - left,
                height: h as f64,
            },
            out,
            filter,
        };
        (g, target)
    }

    #[test]
    fn taps_kept_from_an_earlier_image_give_what_fresh_ones_give() {
        // Images of alternating sizes and kinds of plane through one resampler, each against a
        // resampler that has seen nothing before it.
        let mut kept = PlaneResampler::new();
        let plane: Vec<u8> = (0..200 * 150).map(|i| (i * 37 % 251) as u8).collect();
        let cases: [(usize, usize, usize, f64); 6] = [
            (200, 150, 1, 0.0),
            (120, 90, 2, 0.0),
            (200, 150, 1, 0.0),
            (200, 150, 1, 3.5),
            (200, 90, 2, 0.0),
            (120, 150, 1, 0.0),
        ];
        for (round, &(w, h, factor, left)) in cases.iter().chain(cases.iter()).enumerate() {
            let (g, target) = whole_image(w, h, factor, left, (56, 48), Filter::Bilinear);
            let mut fresh = PlaneResampler::new();
            kept.plane(0, &plane, &g, &target, false).unwrap();
            fresh.plane(0, &plane, &g, &target, false).unwrap();
            assert_eq!(kept.out(0), fresh.out(0), "case {round}");
        }
    }

    #[test]
    fn the_avx512_pass_along_rows_gives_the_transposing_passes_bytes() {
        let mut along = PlaneResampler::new();
        if !along.avx512 {
            eprintln!("no AVX-512 BW/VL on this CPU: nothing to compare");
            return;
        }
        let mut transposing = PlaneResampler::new();
        transposing.avx512 = false;
        let mut x = 7u32;
        let plane: Vec<u8> = (0..300 * 240)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        // Widths in and out around multiples of 32, down- and upscales, a downscale whose taps
        // span more than 64 samples a group (the transposing passes then run), both kinds of
        // plane and every filter; one resampler each, so taps and lanes are also reused.
        let cases: [(usize, usize, usize, usize, usize, f64); 8] = [
            (300, 240, 1, 224, 224, 2.5),
            (300, 240, 2, 224, 224, 0.0),
            (250, 200, 1, 161, 97, 1.25),
            (90, 70, 2, 224, 160, 0.0),
            (64, 64, 1, 33, 31, 0.5),
            (300, 240, 1, 40, 30, 0.0),
            (300, 240, 1, 224, 224, 2.5),
            (33, 20, 1, 1, 1, 0.0),
        ];
        for filter in [Filter::Bilinear, Filter::Bicubic, Filter::Nearest] {
            for &(w, h, factor, out_w, out_h, left) in &cases {
                let (g, target) = whole_image(w, h, factor, left, (out_w, out_h), filter);
                along.plane(0, &plane, &g, &target, false).unwrap();
                transposing.plane(0, &plane, &g, &target, false).unwrap();
                let case = format!("{filter:?} {w}x{h}/{factor} to {out_w}x{out_h}");
                assert_eq!(along.out(0), transposing.out(0), "{case}");
                if !along.lanes[usize::from(factor == 2)].fits {
                    eprintln!("{case}: taps too wide for the lanes");
                }
            }
        }
        assert!(
            along.lanes.iter().any(|l| l.key.is_some()),
            "the pass along rows never ran"
        );
    }

    /// One axis of Pillow's resize in f64: output sample `i`'s taps and weights (the filter
    /// centred at `(i + 0.5) * n / out`, its taps past the edges dropped and the rest
    /// normalized).
    fn pillow_taps(n: usize, out: usize, filter: Filter) -> Vec<(usize, Vec<f64>)> {
        let scale = n as f64 / out as f64;
        let fs = scale.max(1.0);
        let support = fs * if filter == Filter::Bicubic { 2.0 } else { 1.0 };
        (0..out)
            .map(|i| {
                let centre = (i as f64 + 0.5) * scale;
                let lo = ((centre - support + 0.5).floor().max(0.0)) as usize;
                let hi = ((centre + support + 0.5).floor() as usize).min(n);
                let w: Vec<f64> = (lo..hi)
                    .map(|x| {
                        let t = (x as f64 + 0.5 - centre) / fs;
                        match filter {
                            Filter::Bicubic => bicubic(t),
                            _ => (1.0 - t.abs()).max(0.0),
                        }
                    })
                    .collect();
                let sum: f64 = w.iter().sum();
                (lo, w.into_iter().map(|v| v / sum).collect())
            })
            .collect()
    }

    #[test]
    fn a_bicubic_enlargement_gives_its_edge_samples_their_whole_weight() {
        // Enlarging, the taps dropped past an edge leave the nearest sample a weight above 1.0,
        // which Q15 cannot hold: those samples are computed again from the unrounded weights.
        // A smooth plane (no overshoot to clip), every output within a level of Pillow's
        // arithmetic in f64; saturated, the edges were 8% dark.
        let (w, h) = (23, 17);
        let plane: Vec<u8> = (0..w * h)
            .map(|i| (60 + (i % w) * 4 + (i / w) * 3) as u8)
            .collect();
        for (out_w, out_h) in [(46, 34), (200, 150), (23, 60)] {
            let (g, target) = whole_image(w, h, 1, 0.0, (out_w, out_h), Filter::Bicubic);
            let mut r = PlaneResampler::new();
            for avx512 in [false, r.avx512] {
                r.avx512 = avx512;
                r.plane(0, &plane, &g, &target, false).unwrap();
                let (across, down) = (
                    pillow_taps(w, out_w, Filter::Bicubic),
                    pillow_taps(h, out_h, Filter::Bicubic),
                );
                for (y, (y0, wy)) in down.iter().enumerate() {
                    for (x, (x0, wx)) in across.iter().enumerate() {
                        let mut v = 0.0;
                        for (j, a) in wy.iter().enumerate() {
                            for (k, b) in wx.iter().enumerate() {
                                v += a * b * f64::from(plane[(y0 + j) * w + x0 + k]);
                            }
                        }
                        let got = f64::from(r.out(0)[y * out_w + x]);
                        assert!(
                            (got - v).abs() <= 1.0,
                            "{out_w}x{out_h}, ({x}, {y}): {got} against {v:.2}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_white_plane_stays_white_under_an_enormous_downscale() {
        // 2000 columns to one: two thousand taps, whose rounding could overflow 16 bits (16
        // rows, so that the second pass runs the vector kernel).
        let (w, h) = (2000, 16);
        let plane = vec![255u8; w * h];
        let target = whole_target(w, h, (1, 16), Filter::Bilinear);
        let mut r = PlaneResampler::new();
        r.plane(0, &plane, &whole_plane(w, h), &target, false)
            .unwrap();
        assert_eq!(r.out(0), [255; 16]);
    }

    #[test]
    fn a_bright_plane_keeps_its_level_under_a_bicubic_downscale() {
        // Bicubic's weights reach past 1.0 before its negative lobes subtract: summed from
        // zero, a flat plane at 250 saturated the 16-bit sums and came out at 243. Both
        // passes shrink (and the second runs along rows on AVX-512, across the transposed
        // plane elsewhere).
        let (w, h) = (303, 240);
        for level in [128u8, 200, 243, 250, 255] {
            let plane = vec![level; w * h];
            let target = whole_target(w, h, (224, 200), Filter::Bicubic);
            let mut r = PlaneResampler::new();
            r.plane(0, &plane, &whole_plane(w, h), &target, false)
                .unwrap();
            assert!(
                r.out(0).iter().all(|&v| v == level),
                "level {level}: {:?}",
                &r.out(0)[..8]
            );
        }
    }

    #[test]
    fn transpose_swaps_rows_and_columns_with_and_without_tile_pairs() {
        let avx2 = cfg!(target_arch = "x86_64") && std::arch::is_x86_feature_detected!("avx2");
        // Sizes with pairs of tiles (the last pair overlapping), heights between one and two
        // tiles, overlapping last tiles, and sides shorter than a tile.
        for (r, c) in [
            (13, 21),
            (16, 16),
            (37, 50),
            (50, 37),
            (40, 24),
            (5, 40),
            (40, 5),
            (224, 285),
        ] {
            let src: Vec<u8> = (0..r * c).map(|i| (i * 7 + i / 251) as u8).collect();
            let wide: Vec<i16> = src.iter().map(|&v| i16::from(v) * 127 - 7).collect();
            for paired in [false, avx2] {
                let mut dst = vec![0; r * c];
                transpose(paired, &src, r, c, &mut dst);
                let mut wide_t = vec![0i16; r * c];
                transpose(paired, &wide, r, c, &mut wide_t);
                for i in 0..r {
                    for j in 0..c {
                        assert_eq!(dst[j * r + i], src[i * c + j], "{r}x{c} at {i},{j}");
                        assert_eq!(wide_t[j * r + i], wide[i * c + j], "16-bit {r}x{c}");
                    }
                }
            }
        }
    }
}
