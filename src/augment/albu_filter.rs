//! albumentations' blurs and Gaussian noise, as albumentations 2 draws them and as OpenCV 5
//! computes them on a uint8 RGB image:
//!
//! - `Blur(blur_limit, p)`: `cv2.blur` with an odd square kernel drawn from `blur_limit`
//!   (albumentations' `sample_odd_from_range`), the mean of the window rounded to the nearest
//!   level (an odd `k * k` never leaves a half), the image reflected at its edges without
//!   repeating the edge pixel (`BORDER_REFLECT_101`);
//! - `MedianBlur(blur_limit, p)`: `cv2.medianBlur`, the window's median, the edge pixel
//!   repeated outside the image (`BORDER_REPLICATE`);
//! - `MotionBlur(blur_limit, allow_shifted, angle_range, direction_range, p)`: albumentations'
//!   line kernel (`create_motion_kernel`: points along a line at the angle drawn, biased by
//!   the direction drawn, shifted, rounded half to even), each point weighted by the float32
//!   `1 / n`, run by `cv2.filter2D` as its AVX2 kernel runs it: a fused multiply-add per point
//!   in the order of the kernel's rows, and two roundings per point for a row's last `len % 4`
//!   values (its scalar code), the sum rounded half to even (reflect-101 edges);
//! - `GaussianBlur(blur_limit, sigma_limit, p)`: albumentations' own kernel (a sigma drawn
//!   uniform, a size drawn from `blur_limit` or, for 0, `int(3.5 sigma) * 2 + 1`; the Gaussian
//!   at whole offsets, divided by its numpy sum, then float32) through `cv2.sepFilter2D`, as
//!   OpenCV 5's AVX2 kernels run it: along rows a fused multiply-add per tap for each row's
//!   first `len - len % 32` values, then down columns the centre tap times its row and a fused
//!   multiply-add per pair of rows the same distance away for the first `len - len % 4`
//!   values; the rest of each row a product then a sum per tap (their scalar code), rounded
//!   half to even (reflect-101 edges);
//! - `GaussNoise(std_range, mean_range, per_channel, p)`: a standard deviation and mean drawn
//!   uniform in their ranges (fractions of 255), then a normal value for each pixel and channel
//!   (or each pixel, shared by its channels), truncated toward zero and added with saturation
//!   (albucore's `add`). albumentations takes its noise from OpenCV's generator; hpuload draws
//!   the same distribution from a generator keyed by the sample (so runs repeat and resume),
//!   not OpenCV's values.
//!
//! Box and median filtering are exact arithmetic (the same bytes from any OpenCV); the motion
//! and Gaussian blurs' bytes are OpenCV 5's x86-64 kernels' (checked against `cv2.filter2D`
//! and `cv2.sepFilter2D`).

use rand_distr::{Distribution, StandardNormal};
use rand_pcg::rand_core::SeedableRng;
use serde::{Deserialize, Serialize};

use super::albu::ranges;
use super::error::PipelineError;
use super::pixel::PixelOp;
use super::spec::{coin, half, probability, OpKind, OpSpec};
use crate::rng::CounterRng;

/// The largest motion kernel hpuload runs: OpenCV's `filter2D` takes another algorithm (a
/// DFT) for kernels of 11x11 and more.
pub const MOTION_MAX_KERNEL: u32 = 9;

fn three_seven() -> [u32; 2] {
    [3, 7]
}

fn full_turn() -> [f64; 2] {
    [0.0, 360.0]
}

fn both_ways() -> [f64; 2] {
    [-1.0, 1.0]
}

fn yes() -> bool {
    true
}

fn default_std() -> [f64; 2] {
    [0.2, 0.44]
}

/// `n`, or the next odd number when it is even (albumentations' kernel sizes).
fn odd(n: u32) -> u32 {
    n + u32::from(n.is_multiple_of(2))
}

/// albumentations' `sample_odd_from_range`: each bound made odd (an even one rounded up) and
/// at least 3, then an odd size uniform between them.
fn odd_kernel(rng: &mut CounterRng, [lo, hi]: [u32; 2]) -> u32 {
    let lo = odd(lo).max(3);
    let hi = odd(hi).max(3).max(lo);
    lo + 2 * rng.below(u64::from((hi - lo) / 2 + 1)) as u32
}

fn blur_limit(op: &str, [lo, hi]: [u32; 2], largest: u32) -> Result<(), PipelineError> {
    if lo > hi || hi > largest {
        return Err(PipelineError::Parameter(format!(
            "{op} blur_limit [{lo}, {hi}] must be ordered, at most {largest}"
        )));
    }
    Ok(())
}

/// An albumentations blur of a square kernel, its odd size drawn from `blur_limit`: its spec
/// struct and its draw of `$pixel(size)`.
macro_rules! square_blur {
    ($(#[$doc:meta])* $name:ident, $op:literal, $pixel:path) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            /// Smallest and largest kernel (made odd, at least 3). Default `[3, 7]`.
            #[serde(default = "three_seven")]
            pub blur_limit: [u32; 2],
            /// Probability. Default 0.5.
            #[serde(default = "half")]
            pub p: f64,
        }

        impl OpSpec for $name {
            fn kind(&self) -> OpKind {
                OpKind::Pixel
            }
            fn check(&self) -> Result<(), PipelineError> {
                probability(self.p, $op)?;
                // The median's histogram counts a window in u16 bins.
                blur_limit($op, self.blur_limit, 255)
            }
            fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
                if coin(rng, self.p) {
                    out.push($pixel(odd_kernel(rng, self.blur_limit) as u8));
                }
            }
        }
    };
}

square_blur!(
    /// albumentations' `Blur(blur_limit, p)`: `cv2.blur` with an odd kernel drawn from
    /// `blur_limit`.
    AlbuBlur,
    "albu_blur",
    PixelOp::BoxBlur
);

square_blur!(
    /// albumentations' `MedianBlur(blur_limit, p)`: `cv2.medianBlur` with an odd kernel drawn
    /// from `blur_limit`.
    AlbuMedianBlur,
    "albu_median_blur",
    PixelOp::MedianBlur
);

/// albumentations' `MotionBlur(blur_limit, allow_shifted, angle_range, direction_range, p)`:
/// a line kernel (see the module) run by OpenCV's `filter2D`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuMotionBlur {
    /// Smallest and largest kernel (made odd, at least 3; at most 9). Default `[3, 7]`.
    #[serde(default = "three_seven")]
    pub blur_limit: [u32; 2],
    /// Whether the line is shifted off the kernel's centre (by up to a quarter of its size
    /// each way). Default true.
    #[serde(default = "yes")]
    pub allow_shifted: bool,
    /// The line's angle range, degrees. Default `[0, 360]`.
    #[serde(default = "full_turn")]
    pub angle_range: [f64; 2],
    /// The direction's range: -1 the line behind the centre only, 0 both sides, 1 ahead only.
    /// Default `[-1, 1]`.
    #[serde(default = "both_ways")]
    pub direction_range: [f64; 2],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

impl OpSpec for AlbuMotionBlur {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        const OP: &str = "albu_motion_blur";
        probability(self.p, OP)?;
        blur_limit(OP, self.blur_limit, MOTION_MAX_KERNEL)?;
        ranges(
            OP,
            &[
                ("angle_range", self.angle_range),
                ("direction_range", self.direction_range),
            ],
        )
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if !coin(rng, self.p) {
            return;
        }
        let size = odd_kernel(rng, self.blur_limit) as u8;
        let [a0, a1] = self.angle_range;
        let angle = rng.uniform_in(a0, a1);
        let [d0, d1] = self.direction_range;
        let direction = rng.uniform_in(d0, d1);
        let shift = if self.allow_shifted {
            [rng.uniform_in(-1.0, 1.0), rng.uniform_in(-1.0, 1.0)]
        } else {
            [0.0; 2]
        };
        out.push(PixelOp::MotionBlur(Box::new(MotionKernel::new(
            size, angle, direction, shift,
        ))));
    }
}

/// albumentations' `GaussianBlur(blur_limit, sigma_limit, p)`: its own Gaussian kernel
/// through `cv2.sepFilter2D` (see the module).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuGaussianBlur {
    /// The size's range, drawn whole and inclusive: 0 sizes the kernel from the sigma, an even
    /// size is made odd. Default `[0, 0]`.
    #[serde(default)]
    pub blur_limit: [u32; 2],
    /// The sigma's range. Default `[0.5, 3.0]`.
    #[serde(default = "half_to_three")]
    pub sigma_limit: [f64; 2],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn half_to_three() -> [f64; 2] {
    [0.5, 3.0]
}

impl AlbuGaussianBlur {
    /// The largest kernel this op can draw.
    fn largest(&self) -> u32 {
        let from_sigma = (self.sigma_limit[1] * 3.5) as u32 * 2 + 1;
        let hi = self.blur_limit[1];
        odd(hi).max(from_sigma)
    }
}

impl OpSpec for AlbuGaussianBlur {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        const OP: &str = "albu_gaussian_blur";
        probability(self.p, OP)?;
        blur_limit(OP, self.blur_limit, 255)?;
        ranges(OP, &[("sigma_limit", self.sigma_limit)])?;
        if self.sigma_limit[0] <= 0.0 || self.largest() > 255 {
            return Err(PipelineError::Parameter(format!(
                "{OP} sigma_limit {:?} must be positive, its kernels at most 255 wide",
                self.sigma_limit
            )));
        }
        Ok(())
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if !coin(rng, self.p) {
            return;
        }
        let [s0, s1] = self.sigma_limit;
        let sigma = rng.uniform_in(s0, s1);
        let [lo, hi] = self.blur_limit;
        let drawn = lo + rng.below(u64::from(hi - lo + 1)) as u32;
        let size = if drawn == 0 {
            (sigma * 3.5) as u32 * 2 + 1
        } else {
            odd(drawn)
        };
        out.push(PixelOp::SepGaussian {
            size: size as u8,
            sigma,
        });
    }
}

/// albumentations' `GaussNoise(std_range, mean_range, per_channel, noise_scale_factor=1, p)`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuGaussNoise {
    /// The standard deviation's range, a fraction of 255. Default `[0.2, 0.44]`.
    #[serde(default = "default_std")]
    pub std_range: [f64; 2],
    /// The mean's range, a fraction of 255. Default `[0, 0]`.
    #[serde(default)]
    pub mean_range: [f64; 2],
    /// A value per channel (true) or one per pixel for all three. Default true.
    #[serde(default = "yes")]
    pub per_channel: bool,
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

impl OpSpec for AlbuGaussNoise {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        const OP: &str = "albu_gauss_noise";
        probability(self.p, OP)?;
        ranges(
            OP,
            &[
                ("std_range", self.std_range),
                ("mean_range", self.mean_range),
            ],
        )?;
        if self.std_range[0] < 0.0 {
            return Err(PipelineError::Parameter(format!(
                "{OP} std_range {:?} must not be negative",
                self.std_range
            )));
        }
        Ok(())
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if !coin(rng, self.p) {
            return;
        }
        let [s0, s1] = self.std_range;
        let std = rng.uniform_in(s0, s1);
        let [m0, m1] = self.mean_range;
        let mean = rng.uniform_in(m0, m1);
        out.push(PixelOp::GaussNoise(Noise {
            key: rng.next_u64(),
            mean,
            std,
            per_channel: self.per_channel,
        }));
    }
}

/// A drawn `MotionBlur` kernel: its parameters and the kernel's cells.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MotionKernel {
    /// The kernel's side (odd).
    pub size: u8,
    /// The line's angle, degrees.
    pub angle: f64,
    /// Its direction, -1 to 1.
    pub direction: f64,
    /// The two uniform draws in `[-1, 1]` that shift the line (x, then y), times a quarter of
    /// the size (zeros when not shifted).
    pub shift: [f64; 2],
    /// The kernel's cells set to one, `[row, column]`, in row-major order (the order
    /// `filter2D` sums them in).
    pub points: Vec<[u8; 2]>,
}

impl MotionKernel {
    /// albumentations' `create_motion_kernel(size, angle, direction, allow_shifted)`, with
    /// its shifts' uniform draws given.
    pub(crate) fn new(size: u8, angle: f64, direction: f64, shift: [f64; 2]) -> Self {
        let k = usize::from(size);
        let centre = (k / 2) as f64;
        let reach = (k / 2) as f64;
        let direction = direction.clamp(-1.0, 1.0);
        let (start, end) = if direction < 0.0 {
            (-reach, reach * (1.0 - direction.abs()))
        } else if direction > 0.0 {
            (-reach * (1.0 - direction), reach)
        } else {
            (-reach, reach)
        };
        // numpy's deg2rad: degrees times pi / 180.
        let rad = angle * (std::f64::consts::PI / 180.0);
        let (dx, dy) = (rad.cos(), rad.sin());
        let (sx, sy) = (shift[0] * reach / 2.0, shift[1] * reach / 2.0);
        let mut cells = vec![false; k * k];
        for t in linspace(start, end, k) {
            let cell = |d: f64, s: f64| {
                ((centre + d * t) + s)
                    .round_ties_even()
                    .clamp(0.0, (k - 1) as f64) as usize
            };
            cells[cell(dy, sy) * k + cell(dx, sx)] = true;
        }
        let points = (0..k * k)
            .filter(|&i| cells[i])
            .map(|i| [(i / k) as u8, (i % k) as u8])
            .collect();
        Self {
            size,
            angle,
            direction,
            shift,
            points,
        }
    }
}

/// numpy's `linspace(start, end, n)` in f64: `i * step + start`, the last exactly `end`.
fn linspace(start: f64, end: f64, n: usize) -> impl Iterator<Item = f64> {
    let step = (end - start) / (n - 1) as f64;
    (0..n).map(move |i| {
        if i + 1 == n {
            end
        } else if step == 0.0 {
            (i as f64 / (n - 1) as f64) * (end - start) + start
        } else {
            i as f64 * step + start
        }
    })
}

/// A drawn `GaussNoise`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Noise {
    /// The sample's noise generator's seed.
    pub key: u64,
    /// The mean, a fraction of 255.
    pub mean: f64,
    /// The standard deviation, a fraction of 255.
    pub std: f64,
    /// A value per channel, or one per pixel for its three channels.
    pub per_channel: bool,
}

/// A float32 in `[0, 255]` (clamped there) rounded half to even, as a byte: adding 1.5 * 2^23,
/// whose ulp is 1, rounds it to a whole number (ties to even) in the low bits, without the
/// checks of a saturating `as`, so loops of it run in vector lanes.
#[inline(always)]
pub(super) fn round_byte(x: f32) -> u8 {
    const WHOLE: f32 = 12_582_912.0;
    (x.clamp(0.0, 255.0) + WHOLE).to_bits() as u8
}

/// OpenCV's `BORDER_REPLICATE` index of `i` in `0..n`: the nearest edge.
fn replicate(i: isize, n: usize) -> usize {
    i.clamp(0, n as isize - 1) as usize
}

/// OpenCV's `BORDER_REFLECT_101` index of `i` in `0..n` (`-1` reads 1, `n` reads `n - 2`).
fn reflect101(mut i: isize, n: usize) -> usize {
    if n == 1 {
        return 0;
    }
    let last = n as isize - 1;
    loop {
        if i < 0 {
            i = -i;
        } else if i > last {
            i = 2 * last - i;
        } else {
            return i as usize;
        }
    }
}

/// `cv2.blur(rgb, (k, k))` in place: each value the mean of its `k` x `k` window (reflect-101
/// edges) rounded to the nearest level, summed along rows, then down columns.
pub(crate) fn box_blur(rgb: &mut [u8], h: usize, w: usize, k: usize, sums: &mut Vec<u32>) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (detected just above).
        return unsafe { box_blur_avx2(rgb, h, w, k, sums) };
    }
    box_blur_any(rgb, h, w, k, sums);
}

/// [`box_blur`] compiled for AVX2 (its sums eight lanes wide).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn box_blur_avx2(rgb: &mut [u8], h: usize, w: usize, k: usize, sums: &mut Vec<u32>) {
    box_blur_any(rgb, h, w, k, sums);
}

#[inline(always)]
fn box_blur_any(rgb: &mut [u8], h: usize, w: usize, k: usize, sums: &mut Vec<u32>) {
    let (r, row) = (k / 2, w * 3);
    let rows: Vec<usize> = (0..h + k - 1)
        .map(|i| reflect101(i as isize - r as isize, h))
        .collect();
    sums.clear();
    sums.resize(h * row + row, 0);
    let (across, down) = sums.split_at_mut(h * row);
    // Along each row: its reflected copy's `k` shifted slices summed.
    let mut line = Vec::with_capacity((w + k - 1) * 3);
    for (src, dst) in rgb.chunks_exact(row).zip(across.chunks_exact_mut(row)) {
        line.clear();
        for px in 0..w + k - 1 {
            let x = reflect101(px as isize - r as isize, w);
            line.extend_from_slice(&src[x * 3..][..3]);
        }
        for j in 0..k {
            for (d, &v) in dst.iter_mut().zip(&line[j * 3..][..row]) {
                *d += u32::from(v);
            }
        }
    }
    for &y in &rows[..k] {
        for (d, a) in down.iter_mut().zip(&across[y * row..][..row]) {
            *d += a;
        }
    }
    // round(s / area): an odd area never leaves a half, and s / area is a multiple of
    // 1 / area, at least 1 / (2 area) from one; up to 31x31 the float32 product (s under
    // 2^18) is within 2^-15 of it, beyond that integers divide.
    let area = (k * k) as u32;
    let inv = 1.0 / area as f32;
    for y in 0..h {
        let out = &mut rgb[y * row..][..row];
        if k <= 31 {
            for (out, &s) in out.iter_mut().zip(down.iter()) {
                *out = round_byte(s as f32 * inv);
            }
        } else {
            for (out, &s) in out.iter_mut().zip(down.iter()) {
                *out = ((2 * s + area) / (2 * area)) as u8;
            }
        }
        if y + 1 < h {
            let add = &across[rows[y + k] * row..][..row];
            let sub = &across[rows[y] * row..][..row];
            for ((d, a), s) in down.iter_mut().zip(add).zip(sub) {
                *d = *d + a - s;
            }
        }
    }
}

/// `cv2.medianBlur(rgb, k)` in place: each value the median of its `k` x `k` window, the
/// edge pixels repeated outside the image. Windows of up to 7x7 go through a selection
/// network, 32 values at a time in vector lanes; larger ones through a sliding histogram.
pub(crate) fn median_blur(rgb: &mut [u8], h: usize, w: usize, k: usize, copy: &mut Vec<u8>) {
    if k * k <= NETWORK_INPUTS {
        median_by_network(rgb, h, w, k, copy);
    } else {
        median_by_histogram(rgb, h, w, k, copy);
    }
}

/// The most values a median network takes (a 7x7 window's 49, padded).
const NETWORK_INPUTS: usize = 64;

/// Lanes of a median network's pass.
const LANES: usize = 32;

/// The compare-exchanges that leave the median of `n` values at index `n / 2`: Batcher's
/// odd-even merge sort of the next power of two (the inputs past `n` are 255s, which sort
/// last), kept only where they can reach that index.
fn median_network(n: usize) -> Vec<(u8, u8)> {
    debug_assert!(n <= NETWORK_INPUTS);
    let size = n.next_power_of_two();
    let mut pairs = Vec::new();
    let mut p = 1;
    while p < size {
        let mut k = p;
        while k >= 1 {
            let mut j = k % p;
            while j + k < size {
                for i in 0..k.min(size - j - k) {
                    if (i + j) / (2 * p) == (i + j + k) / (2 * p) {
                        pairs.push((i + j, i + j + k));
                    }
                }
                j += 2 * k;
            }
            k /= 2;
        }
        p *= 2;
    }
    // Backwards from the median's place: a compare-exchange matters when it writes a place
    // that a later kept one reads.
    let mut needed = vec![false; size];
    needed[n / 2] = true;
    let mut kept: Vec<(u8, u8)> = Vec::new();
    for &(a, b) in pairs.iter().rev() {
        if needed[a] || needed[b] {
            needed[a] = true;
            needed[b] = true;
            kept.push((a as u8, b as u8));
        }
    }
    kept.reverse();
    kept
}

/// The median network of a `k` x `k` window (3, 5 or 7), built once per process.
fn network_of(k: usize) -> &'static [(u8, u8)] {
    static NETWORKS: [std::sync::OnceLock<Vec<(u8, u8)>>; 3] =
        [const { std::sync::OnceLock::new() }; 3];
    NETWORKS[k / 2 - 1].get_or_init(|| median_network(k * k))
}

/// [`median_blur`] through [`median_network`]: each output row's `k * k` shifted rows of the
/// replicated image, 32 values at a time.
fn median_by_network(rgb: &mut [u8], h: usize, w: usize, k: usize, padded: &mut Vec<u8>) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (detected just above).
        return unsafe { median_by_network_avx2(rgb, h, w, k, padded) };
    }
    median_by_network_any(rgb, h, w, k, padded);
}

/// [`median_by_network`] compiled for AVX2: a compare-exchange of 32 lanes is two
/// instructions.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn median_by_network_avx2(rgb: &mut [u8], h: usize, w: usize, k: usize, padded: &mut Vec<u8>) {
    median_by_network_any(rgb, h, w, k, padded);
}

#[inline(always)]
fn median_by_network_any(rgb: &mut [u8], h: usize, w: usize, k: usize, padded: &mut Vec<u8>) {
    let n = k * k;
    let network = network_of(k);
    let r = k / 2;
    let (pw, row) = (w + 2 * r, w * 3);
    pad(rgb, h, w, r, replicate, padded);
    let taps: Vec<usize> = (0..n).map(|t| ((t / k) * pw + t % k) * 3).collect();
    let mut v = [[255u8; LANES]; NETWORK_INPUTS];
    for y in 0..h {
        let base = y * pw * 3;
        for start in (0..row).step_by(LANES) {
            let len = LANES.min(row - start);
            for (lanes, &t) in v.iter_mut().zip(&taps) {
                lanes[..len].copy_from_slice(&padded[base + t + start..][..len]);
            }
            for &(a, b) in network {
                let (lo, hi) = v.split_at_mut(usize::from(b));
                let (x, y) = (&mut lo[usize::from(a)], &mut hi[0]);
                for (x, y) in x.iter_mut().zip(y.iter_mut()) {
                    let (small, big) = ((*x).min(*y), (*x).max(*y));
                    *x = small;
                    *y = big;
                }
            }
            rgb[y * row + start..][..len].copy_from_slice(&v[n / 2][..len]);
        }
    }
}

/// [`median_blur`] for large windows: a histogram per row and channel slides along the row,
/// its median pointer moved by the values that enter and leave.
fn median_by_histogram(rgb: &mut [u8], h: usize, w: usize, k: usize, copy: &mut Vec<u8>) {
    copy.clear();
    copy.extend_from_slice(rgb);
    let r = (k / 2) as isize;
    let cols: Vec<usize> = (0..w + k - 1)
        .map(|i| replicate(i as isize - r, w))
        .collect();
    let rows: Vec<usize> = (0..h + k - 1)
        .map(|i| replicate(i as isize - r, h))
        .collect();
    let half = k * k / 2;
    for y in 0..h {
        let window = &rows[y..y + k];
        for c in 0..3 {
            let at = |sy: usize, x: usize| copy[(sy * w + x) * 3 + c];
            let mut hist = [0u16; 256];
            for &sy in window {
                for &x in &cols[..k] {
                    hist[usize::from(at(sy, x))] += 1;
                }
            }
            // `below`: how many values of the window are below `m`.
            let (mut m, mut below) = (0usize, 0usize);
            for x in 0..w {
                if x > 0 {
                    let (gone, new) = (cols[x - 1], cols[x + k - 1]);
                    for &sy in window {
                        let (g, n) = (usize::from(at(sy, gone)), usize::from(at(sy, new)));
                        hist[g] -= 1;
                        hist[n] += 1;
                        below = below + usize::from(n < m) - usize::from(g < m);
                    }
                }
                while below + usize::from(hist[m]) <= half {
                    below += usize::from(hist[m]);
                    m += 1;
                }
                while below > half {
                    m -= 1;
                    below -= usize::from(hist[m]);
                }
                rgb[(y * w + x) * 3 + c] = m as u8;
            }
        }
    }
}

/// `cv2.filter2D(rgb, -1, kernel)` in place for a motion kernel (its `points` each weighted
/// by the float32 `1 / n`), as OpenCV 5's AVX2 kernel computes it: the sum over the points
/// in order, fused multiply-adds for each row's first `len - len % 4` values and a product
/// then a sum for the rest, rounded half to even (reflect-101 edges).
pub(crate) fn motion_blur(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    kernel: &MotionKernel,
    padded: &mut Vec<u8>,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has FMA (detected just above).
        return unsafe { motion_blur_fma(rgb, h, w, kernel, padded) };
    }
    motion_blur_any(rgb, h, w, kernel, padded);
}

/// [`motion_blur`] compiled with FMA: `mul_add` is one instruction (the same result as
/// without, where it is a library call).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
fn motion_blur_fma(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    kernel: &MotionKernel,
    padded: &mut Vec<u8>,
) {
    motion_blur_any(rgb, h, w, kernel, padded);
}

#[inline(always)]
fn motion_blur_any(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    kernel: &MotionKernel,
    padded: &mut Vec<u8>,
) {
    let weight = 1.0f32 / kernel.points.len() as f32;
    let taps: Vec<([u8; 2], f32)> = kernel.points.iter().map(|&p| (p, weight)).collect();
    filter_points(rgb, h, w, usize::from(kernel.size), &taps, padded);
}

/// `cv2.filter2D(rgb, -1, kernel)` in place for a `k` x `k` float32 kernel given as its
/// non-zero cells (`[row, column]` and weight) in row-major order, as OpenCV 5's AVX2 kernel
/// computes it: the sum over the cells in that order, a fused multiply-add per cell for each
/// row's first `len - len % 4` values and a product then a sum for the rest, rounded half to
/// even (reflect-101 edges). Inlined into builds with FMA, where `mul_add` is one instruction.
#[inline(always)]
fn filter_points(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    k: usize,
    taps: &[([u8; 2], f32)],
    padded: &mut Vec<u8>,
) {
    let (pw, row) = (w + k - 1, w * 3);
    pad(rgb, h, w, k / 2, reflect101, padded);
    let taps: Vec<(usize, f32)> = taps
        .iter()
        .map(|&([dy, dx], weight)| ((usize::from(dy) * pw + usize::from(dx)) * 3, weight))
        .collect();
    let fused = row - row % 4;
    let mut sum = vec![0f32; row];
    for y in 0..h {
        sum.fill(0.0);
        let base = y * pw * 3;
        for &(o, weight) in &taps {
            let src = &padded[base + o..][..row];
            let (head, tail) = sum.split_at_mut(fused);
            for (s, &v) in head.iter_mut().zip(src) {
                *s = weight.mul_add(f32::from(v), *s);
            }
            for (s, &v) in tail.iter_mut().zip(&src[fused..]) {
                *s += weight * f32::from(v);
            }
        }
        for (out, s) in rgb[y * row..][..row].iter_mut().zip(&sum) {
            *out = round_byte(*s);
        }
    }
}

/// `cv2.filter2D(rgb, -1, kernel)` in place for a 3x3 float32 kernel (albumentations'
/// `Sharpen` and `Emboss`): its non-zero cells (the ones OpenCV sums) through
/// [`filter_points`].
pub(crate) fn filter3x3(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    kernel: &[f32; 9],
    padded: &mut Vec<u8>,
) {
    let taps: Vec<([u8; 2], f32)> = (0..9u8)
        .filter(|&i| kernel[usize::from(i)] != 0.0)
        .map(|i| ([i / 3, i % 3], kernel[usize::from(i)]))
        .collect();
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has FMA (detected just above).
        return unsafe { filter3x3_fma(rgb, h, w, &taps, padded) };
    }
    filter_points(rgb, h, w, 3, &taps, padded);
}

/// [`filter3x3`]'s sums compiled with FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
fn filter3x3_fma(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    taps: &[([u8; 2], f32)],
    padded: &mut Vec<u8>,
) {
    filter_points(rgb, h, w, 3, taps, padded);
}

/// albumentations' `Sharpen(alpha, lightness, method="kernel", p)`: `alpha` and `lightness`
/// drawn uniform, the kernel `(1 - alpha) * identity + alpha * [[-1, -1, -1], [-1, 8 +
/// lightness, -1], [-1, -1, -1]]` in float32 as numpy computes it, through `cv2.filter2D`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuSharpen {
    /// The effect's weight, within `[0, 1]`. Default `[0.2, 0.5]`.
    #[serde(default = "fifth_half")]
    pub alpha: [f64; 2],
    /// The centre's lightness. Default `[0.5, 1.0]`.
    #[serde(default = "half_one")]
    pub lightness: [f64; 2],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn fifth_half() -> [f64; 2] {
    [0.2, 0.5]
}

fn half_one() -> [f64; 2] {
    [0.5, 1.0]
}

/// albumentations' `Emboss(alpha, strength, p)`: `alpha` and `strength` drawn uniform, the
/// kernel `(1 - alpha) * identity + alpha * [[-1 - s, -s, 0], [-s, 1, s], [0, s, 1 + s]]` in
/// float32 as numpy computes it, through `cv2.filter2D`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuEmboss {
    /// The effect's weight, within `[0, 1]`. Default `[0.2, 0.5]`.
    #[serde(default = "fifth_half")]
    pub alpha: [f64; 2],
    /// The relief's strength. Default `[0.2, 0.7]`.
    #[serde(default = "fifth_seven_tenths")]
    pub strength: [f64; 2],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn fifth_seven_tenths() -> [f64; 2] {
    [0.2, 0.7]
}

/// `(1 - alpha) * identity + alpha * effect` in float32 as numpy computes it: both Python
/// floats taken to float32 first, each product and the sum rounded to float32.
fn blended_kernel(alpha: f64, effect: [f64; 9]) -> [f32; 9] {
    let (keep, a) = ((1.0 - alpha) as f32, alpha as f32);
    std::array::from_fn(|i| keep * if i == 4 { 1.0 } else { 0.0 } + a * effect[i] as f32)
}

/// The checks both 3x3 filters share: `alpha` within `[0, 1]`, the other range not negative.
fn check_filter3x3(
    op: &str,
    p: f64,
    alpha: [f64; 2],
    other: (&str, [f64; 2]),
) -> Result<(), PipelineError> {
    probability(p, op)?;
    ranges(op, &[("alpha", alpha), other])?;
    if alpha[0] < 0.0 || alpha[1] > 1.0 || other.1[0] < 0.0 {
        return Err(PipelineError::Parameter(format!(
            "{op} alpha must lie within [0, 1] and {} must not be negative",
            other.0
        )));
    }
    Ok(())
}

impl OpSpec for AlbuSharpen {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        check_filter3x3(
            "albu_sharpen",
            self.p,
            self.alpha,
            ("lightness", self.lightness),
        )
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            let alpha = rng.uniform_in(self.alpha[0], self.alpha[1]);
            let lightness = rng.uniform_in(self.lightness[0], self.lightness[1]);
            let mut effect = [-1.0; 9];
            effect[4] = 8.0 + lightness;
            out.push(PixelOp::Filter3x3(blended_kernel(alpha, effect)));
        }
    }
}

impl OpSpec for AlbuEmboss {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        check_filter3x3(
            "albu_emboss",
            self.p,
            self.alpha,
            ("strength", self.strength),
        )
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            let alpha = rng.uniform_in(self.alpha[0], self.alpha[1]);
            let s = rng.uniform_in(self.strength[0], self.strength[1]);
            let effect = [-1.0 - s, -s, 0.0, -s, 1.0, s, 0.0, s, 1.0 + s];
            out.push(PixelOp::Filter3x3(blended_kernel(alpha, effect)));
        }
    }
}

/// albumentations' `create_gaussian_kernel_1d(sigma, size)`: `exp(-0.5 (x / sigma)^2)` at
/// the whole offsets `x` of an odd `size`, divided by its sum as numpy sums it (pairwise in
/// eights), then float32 (`sepFilter2D`'s float kernel).
pub(crate) fn gaussian_kernel(size: usize, sigma: f64) -> Vec<f32> {
    let r = (size / 2) as i64;
    let k: Vec<f64> = (-r..=r)
        .map(|x| (-0.5 * (x as f64 / sigma).powi(2)).exp())
        .collect();
    let sum = numpy_sum(&k);
    k.iter().map(|v| (v / sum) as f32).collect()
}

/// numpy's sum of a short contiguous f64 array (its pairwise sum below 128 values): a plain
/// loop under 8 values, else eight running sums combined in pairs, then the rest.
fn numpy_sum(a: &[f64]) -> f64 {
    assert!(a.len() <= 128, "numpy sums longer arrays in blocks of 128");
    if a.len() < 8 {
        return a.iter().fold(-0.0, |s, v| s + v);
    }
    let mut r = [0.0; 8];
    r.copy_from_slice(&a[..8]);
    let whole = a.len() - a.len() % 8;
    for block in a[8..whole].chunks_exact(8) {
        for (s, v) in r.iter_mut().zip(block) {
            *s += v;
        }
    }
    let mut sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for v in &a[whole..] {
        sum += v;
    }
    sum
}

/// `cv2.sepFilter2D(rgb, -1, kernel, kernel)` in place for a symmetric float32 kernel, as
/// OpenCV 5's AVX2 kernels compute it (see the module): rows into float32 sums, then
/// columns, rounded half to even; reflect-101 edges.
pub(crate) fn sep_gaussian(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    size: usize,
    sigma: f64,
    s: &mut super::pixel::Scratch,
) {
    let kernel = gaussian_kernel(size, sigma);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has FMA (detected just above).
        return unsafe { sep_filter_fma(rgb, h, w, &kernel, &mut s.bytes, &mut s.floats) };
    }
    sep_filter_any(rgb, h, w, &kernel, &mut s.bytes, &mut s.floats);
}

/// [`sep_filter_any`] compiled with FMA (one instruction per `mul_add`, the same result).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
fn sep_filter_fma(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    kernel: &[f32],
    padded: &mut Vec<u8>,
    rows: &mut Vec<f32>,
) {
    sep_filter_any(rgb, h, w, kernel, padded, rows);
}

#[inline(always)]
fn sep_filter_any(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    kernel: &[f32],
    padded: &mut Vec<u8>,
    rows: &mut Vec<f32>,
) {
    let n = kernel.len();
    let r = n / 2;
    let (pw, row) = (w + n - 1, w * 3);
    pad(rgb, h, w, r, reflect101, padded);
    // Along rows: every padded row's `row` sums.
    rows.clear();
    rows.resize((h + n - 1) * row, 0.0);
    let fused = row - row % 32;
    for (src, sums) in padded.chunks_exact(pw * 3).zip(rows.chunks_exact_mut(row)) {
        let (head, tail) = sums.split_at_mut(fused);
        for (j, &k) in kernel.iter().enumerate() {
            let taps = &src[j * 3..][..row];
            for (s, &v) in head.iter_mut().zip(taps) {
                *s = k.mul_add(f32::from(v), *s);
            }
            for (s, &v) in tail.iter_mut().zip(&taps[fused..]) {
                *s = if j == 0 {
                    k * f32::from(v)
                } else {
                    *s + k * f32::from(v)
                };
            }
        }
    }
    // Down columns: the centre tap, then each pair of rows the same distance away.
    let fused = row - row % 4;
    let mut sum = vec![0f32; row];
    for y in 0..h {
        let at = |dy: usize| &rows[(y + dy) * row..][..row];
        for (s, &v) in sum.iter_mut().zip(at(r)) {
            *s = kernel[r] * v;
        }
        for m in 1..=r {
            let k = kernel[r + m];
            let (below, above) = (at(r + m), at(r - m));
            let (head, tail) = sum.split_at_mut(fused);
            for ((s, b), a) in head.iter_mut().zip(below).zip(above) {
                *s = k.mul_add(b + a, *s);
            }
            for ((s, b), a) in tail.iter_mut().zip(&below[fused..]).zip(&above[fused..]) {
                *s += k * (b + a);
            }
        }
        for (out, v) in rgb[y * row..][..row].iter_mut().zip(&sum) {
            *out = round_byte(*v);
        }
    }
}

/// `rgb` with `r` pixels of border on every side, each read where `edge` maps it, into
/// `padded`.
fn pad(
    rgb: &[u8],
    h: usize,
    w: usize,
    r: usize,
    edge: fn(isize, usize) -> usize,
    padded: &mut Vec<u8>,
) {
    padded.clear();
    for py in 0..h + 2 * r {
        let y = edge(py as isize - r as isize, h);
        for px in 0..w + 2 * r {
            let x = edge(px as isize - r as isize, w);
            padded.extend_from_slice(&rgb[(y * w + x) * 3..][..3]);
        }
    }
}

/// albumentations' `GaussNoise` of a drawn standard deviation and mean: for each value (or
/// each pixel, its three channels alike) `float32(mean + std * z) * 255` with `z` standard
/// normal, truncated toward zero and added with saturation.
pub(crate) fn gauss_noise(rgb: &mut [u8], noise: &Noise) {
    let mut g = rand_pcg::Pcg64Mcg::seed_from_u64(noise.key);
    let mut draw = || {
        let z: f64 = StandardNormal.sample(&mut g);
        ((noise.mean + noise.std * z) as f32 * 255.0).trunc()
    };
    let add = |v: &mut u8, n: f32| *v = (f32::from(*v) + n).clamp(0.0, 255.0) as u8;
    if noise.per_channel {
        for v in rgb.iter_mut() {
            add(v, draw());
        }
    } else {
        for px in rgb.chunks_exact_mut(3) {
            let n = draw();
            px.iter_mut().for_each(|v| add(v, n));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(h: usize, w: usize, seed: u64) -> Vec<u8> {
        let mut rng = CounterRng::from_key(seed);
        (0..h * w * 3).map(|_| rng.below(256) as u8).collect()
    }

    /// The window sums of `rgb` at every value, with `edge` mapping an index outside the
    /// image inside it, by brute force.
    fn windows(
        rgb: &[u8],
        h: usize,
        w: usize,
        k: usize,
        edge: fn(isize, usize) -> usize,
    ) -> Vec<Vec<u8>> {
        let r = (k / 2) as isize;
        let mut out = Vec::new();
        for y in 0..h as isize {
            for x in 0..w as isize {
                for c in 0..3 {
                    let mut v = Vec::new();
                    for dy in -r..=r {
                        for dx in -r..=r {
                            v.push(rgb[(edge(y + dy, h) * w + edge(x + dx, w)) * 3 + c]);
                        }
                    }
                    out.push(v);
                }
            }
        }
        out
    }

    #[test]
    fn a_box_blur_is_each_reflected_windows_mean_rounded() {
        for (h, w, k) in [(9, 13, 3), (20, 7, 5), (16, 16, 7), (5, 4, 3), (8, 11, 9)] {
            let rgb = image(h, w, (h * w * k) as u64);
            let mut ours = rgb.clone();
            box_blur(&mut ours, h, w, k, &mut Vec::new());
            let want: Vec<u8> = windows(&rgb, h, w, k, reflect101)
                .iter()
                .map(|v| {
                    let s: u32 = v.iter().map(|&x| u32::from(x)).sum();
                    (f64::from(s) / (k * k) as f64).round() as u8
                })
                .collect();
            assert_eq!(ours, want, "{h}x{w}, k {k}");
        }
    }

    #[test]
    fn the_median_networks_leave_the_median_in_the_middle() {
        for n in [9, 25, 49] {
            let network = median_network(n);
            let mut rng = CounterRng::from_key(n as u64);
            for _ in 0..2000 {
                let mut v = [255u8; NETWORK_INPUTS];
                for x in &mut v[..n] {
                    *x = rng.below(if n == 9 { 4 } else { 256 }) as u8;
                }
                let mut sorted = v[..n].to_vec();
                sorted.sort_unstable();
                for &(a, b) in &network {
                    let (a, b) = (usize::from(a), usize::from(b));
                    let (x, y) = (v[a].min(v[b]), v[a].max(v[b]));
                    v[a] = x;
                    v[b] = y;
                }
                assert_eq!(v[n / 2], sorted[n / 2], "{n}");
            }
        }
    }

    #[test]
    fn a_median_blur_is_each_replicated_windows_median() {
        for (h, w, k) in [
            (9, 13, 3),
            (20, 7, 5),
            (16, 16, 7),
            (3, 2, 5),
            (12, 30, 9),
            (40, 50, 5),
        ] {
            let mut rgb = image(h, w, (h + w + k) as u64);
            // Few levels too: many ties.
            rgb.iter_mut().skip(h * w).for_each(|v| *v %= 4);
            let mut ours = rgb.clone();
            median_blur(&mut ours, h, w, k, &mut Vec::new());
            let want: Vec<u8> = windows(&rgb, h, w, k, replicate)
                .into_iter()
                .map(|mut v| {
                    v.sort_unstable();
                    v[v.len() / 2]
                })
                .collect();
            assert_eq!(ours, want, "{h}x{w}, k {k}");
        }
    }

    #[test]
    fn albumentations_motion_kernels_have_its_cells() {
        // albumentations 2.0.8's create_motion_kernel for these parameters (its random shift
        // given as the two uniform draws).
        // (size, angle, direction, shift draws, albumentations' cells)
        type Case = (u8, f64, f64, [f64; 2], &'static [[u8; 2]]);
        let cases: [Case; 5] = [
            (3, 0.0, 0.0, [0.0, 0.0], &[[1, 0], [1, 1], [1, 2]]),
            (5, 90.0, 1.0, [0.0, 0.0], &[[2, 2], [3, 2], [4, 2]]),
            (
                5,
                45.0,
                -0.5,
                [0.5, -1.0],
                &[[0, 1], [0, 2], [1, 2], [1, 3], [2, 3]],
            ),
            (
                7,
                200.0,
                0.25,
                [-0.3, 0.8],
                &[[3, 0], [3, 1], [4, 1], [4, 2], [4, 3], [5, 4], [5, 5]],
            ),
            (
                9,
                33.3,
                0.7,
                [0.9, 0.2],
                &[[4, 5], [4, 6], [5, 6], [5, 7], [6, 8], [7, 8]],
            ),
        ];
        for (size, angle, direction, shift, points) in cases {
            let k = MotionKernel::new(size, angle, direction, shift);
            assert_eq!(k.points, points, "{size} {angle} {direction} {shift:?}");
        }
    }

    #[test]
    fn a_motion_blur_sums_fused_then_plain_at_each_rows_end_and_rounds_half_to_even() {
        // One point: the image itself (weight 1, exact). Two points: the mean of a pixel and
        // its right neighbour, a half rounded to even.
        let (h, w) = (3, 3);
        let rgb: Vec<u8> = (0..27).map(|i| (i * 7 % 256) as u8).collect();
        let one = MotionKernel {
            size: 3,
            angle: 0.0,
            direction: 0.0,
            shift: [0.0; 2],
            points: vec![[1, 1]],
        };
        let mut ours = rgb.clone();
        motion_blur(&mut ours, h, w, &one, &mut Vec::new());
        assert_eq!(ours, rgb);
        let two = MotionKernel {
            points: vec![[1, 1], [1, 2]],
            ..one
        };
        let mut row = vec![1, 2, 3, 4, 5, 6, 9, 9, 9];
        motion_blur(&mut row, 1, 3, &two, &mut Vec::new());
        // (1 + 4) / 2 = 2.5 -> 2, (2 + 5) / 2 = 3.5 -> 4, (3 + 6) / 2 = 4.5 -> 4; the last
        // pixel's right neighbour is the one before it (reflect-101): (9 + 4) / 2 = 6.5 -> 6.
        assert_eq!(row, [2, 4, 4, 6, 7, 8, 6, 7, 8]);
    }

    #[test]
    fn gaussian_kernels_are_albumentations_float32_kernels() {
        // albumentations 2.0.8's create_gaussian_kernel_1d(sigma, size).astype(float32), bits.
        let cases: [(usize, f64, &[u32]); 3] = [
            (
                5,
                1.3,
                &[0x3dca4a8a, 0x3e75b4b0, 0x3ea5260b, 0x3e75b4b0, 0x3dca4a8a],
            ),
            (
                15,
                2.2,
                &[
                    0x3a969cb7, 0x3b903a22, 0x3c60a9f4, 0x3d0e5160, 0x3d92a6b0, 0x3df5d107,
                    0x3e278ff6, 0x3e39cc59, 0x3e278ff6, 0x3df5d107, 0x3d92a6b0, 0x3d0e5160,
                    0x3c60a9f4, 0x3b903a22, 0x3a969cb7,
                ],
            ),
            (3, 0.5, &[0x3dda2055, 0x3f4977eb, 0x3dda2055]),
        ];
        for (size, sigma, bits) in cases {
            let k: Vec<u32> = gaussian_kernel(size, sigma)
                .iter()
                .map(|v| v.to_bits())
                .collect();
            assert_eq!(k, bits, "{size} {sigma}");
        }
    }

    #[test]
    fn a_separable_gaussian_of_a_flat_image_keeps_it_and_of_one_dot_spreads_its_kernel() {
        let mut s = super::super::pixel::Scratch::default();
        let (h, w) = (11, 40);
        let mut flat = vec![200u8; h * w * 3];
        sep_gaussian(&mut flat, h, w, 7, 1.5, &mut s);
        assert!(flat.iter().all(|&v| v == 200));
        // One bright pixel far from the edges: each output is 255 * k[dy] * k[dx], rounded.
        let mut dot = vec![0u8; h * w * 3];
        dot[(5 * w + 20) * 3] = 255;
        sep_gaussian(&mut dot, h, w, 5, 1.0, &mut s);
        let k = gaussian_kernel(5, 1.0);
        for dy in 0..5 {
            for dx in 0..5 {
                let want = (255.0 * k[dx] * k[dy]).round_ties_even();
                let got = dot[((3 + dy) * w + 18 + dx) * 3];
                assert!(
                    (f32::from(got) - want).abs() <= 1.0,
                    "{dy} {dx}: {got} {want}"
                );
            }
        }
        // Nothing outside the kernel's square.
        let inside = (0..25)
            .filter(|i| (255.0 * k[i / 5] * k[i % 5]).round_ties_even() > 0.0)
            .count();
        assert_eq!(dot.iter().filter(|&&v| v > 0).count(), inside);
    }

    #[test]
    fn gauss_noise_adds_truncated_normal_values_saturating() {
        let flat = vec![128u8; 3 * 4096];
        let noise = Noise {
            key: 7,
            mean: 0.1,
            std: 0.05,
            per_channel: true,
        };
        let mut ours = flat.clone();
        gauss_noise(&mut ours, &noise);
        let d: Vec<f64> = ours.iter().map(|&v| f64::from(v) - 128.0).collect();
        let mean = d.iter().sum::<f64>() / d.len() as f64;
        let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / d.len() as f64).sqrt();
        // trunc(N(25.5, 12.75)): mean about 25.0, spread about 12.8.
        assert!(
            (mean - 25.0).abs() < 0.6 && (sd - 12.76).abs() < 0.6,
            "{mean} {sd}"
        );
        assert!(d.iter().all(|x| x.fract() == 0.0));
        // Saturates at both ends; shared noise moves the three channels alike.
        for (mean, end) in [(2.0, 255), (-2.0, 0)] {
            let mut ends = vec![0u8, 255, 7, 128, 250, 3];
            gauss_noise(&mut ends, &Noise { mean, ..noise });
            assert_eq!(ends, [end; 6]);
        }
        let mut shared = flat.clone();
        gauss_noise(
            &mut shared,
            &Noise {
                per_channel: false,
                ..noise
            },
        );
        assert!(shared.chunks_exact(3).all(|p| p[0] == p[1] && p[1] == p[2]));
        assert!(shared.chunks_exact(3).any(|p| p[0] != 128));
        // The same key, the same noise.
        let mut again = flat;
        gauss_noise(&mut again, &noise);
        assert_eq!(again, ours);
    }
}
