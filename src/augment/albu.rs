//! albumentations' own ops, as albumentations 2 draws them and computes them on a uint8 RGB
//! image (what a Kaggle-style Dataset's `A.Compose` gives its steps):
//!
//! - `Transpose(p)` and `RandomRotate90(p)` (`np.rot90` by a factor drawn from 0-3) of a square
//!   image;
//! - `Affine` and `ShiftScaleRotate` with `INTER_LINEAR`: albumentations' matrix (composed about
//!   the centre in f64), inverted as OpenCV inverts it, and OpenCV 5.0's float `warpAffine`
//!   kernel as its x86-64 wheels run it (`fma(m0, x, y * m1 + m2)` in each row's blocks of 16,
//!   `fma(x, m0, y * m1) + m2` after them, three fused interpolations, rounded half to even;
//!   blocks of 8 whose neighbours are all inside run in AVX2 lanes here);
//! - `RandomBrightnessContrast(brightness_limit, contrast_limit, p)`: `x * alpha + beta * 255`
//!   through albucore's float32 lookup table, clipped and truncated to bytes;
//! - `RGBShift(r_shift_limit, g_shift_limit, b_shift_limit, p)`: a shift per channel, truncated
//!   to whole levels and added with saturation (albucore's tables);
//! - `HueSaturationValue(hue_shift_limit, sat_shift_limit, val_shift_limit, p)`: OpenCV's byte
//!   HSV (`COLOR_RGB2HSV`, hue in `[0, 180)`), the hue shifted modulo 180, saturation and value
//!   shifted by whole levels with saturation (grey pixels kept grey), and back with
//!   `COLOR_HSV2RGB` as the x86-64 opencv-python wheels run it (their AVX2 kernel on each
//!   row's blocks of 32 pixels, with fused multiply-adds and truncation, and the scalar code
//!   on the rest of the row, which rounds);
//! - `CoarseDropout(num_holes_range, hole_height_range, hole_width_range, fill, p)`: holes
//!   drawn as albumentations draws them, erased in the written output as `random_erasing`'s
//!   boxes are.
//!
//! - `SmallestMaxSize(max_size)`: the shorter side to `max_size`, the other scaled by the same
//!   factor and rounded (half to even), before a `center_crop` (with `floor`, albumentations'
//!   centre) or a `random_crop`: a window of that resize, resampled as `cv2.resize` resamples
//!   the whole image.
//!
//! Every draw is the same distribution as albumentations', from hpuload's counter-based
//! generator (so runs repeat and resume); the pixels are albumentations' for the same
//! parameters, byte for byte (tested against a fixture it wrote, `tests/fixtures/albu`).

use serde::{Deserialize, Serialize};

use super::erase::EraseBox;
use super::error::PipelineError;
use super::geometry::Interpolation;
use super::pixel::PixelOp;
use super::spec::{coin, half, probability, shuffle, OpKind, OpSpec};
use crate::rng::CounterRng;

/// albumentations' `SmallestMaxSize(max_size, interpolation)`: the shorter side becomes
/// `max_size`, the longer one `round(long * max_size / short)` (half to even; torchvision's
/// `Resize(short)` truncates it instead). A `center_crop` or `random_crop` must follow (batch
/// shapes are static).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuSmallestMaxSize {
    /// The shorter side's length after the resize.
    pub max_size: u32,
    /// Default bilinear (albumentations' own is `cv2_linear`).
    #[serde(default)]
    pub interpolation: Interpolation,
}

impl OpSpec for AlbuSmallestMaxSize {
    fn kind(&self) -> OpKind {
        OpKind::Geometry
    }
    fn check(&self) -> Result<(), PipelineError> {
        if self.max_size == 0 {
            return Err(PipelineError::Parameter(
                "albu_smallest_max_size max_size must be at least 1".into(),
            ));
        }
        Ok(())
    }
    /// Geometry: the plan computes the window.
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

/// albumentations' `LongestMaxSize(max_size, interpolation)`: the longer side becomes
/// `max_size`, the shorter one `round(short * max_size / long)` (half to even). An
/// `albu_pad_if_needed` to at least `max_size` on both sides must follow (batch shapes are
/// static).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuLongestMaxSize {
    /// The longer side's length after the resize.
    pub max_size: u32,
    /// Default bilinear (albumentations' own is `cv2_linear`).
    #[serde(default)]
    pub interpolation: Interpolation,
}

impl OpSpec for AlbuLongestMaxSize {
    fn kind(&self) -> OpKind {
        OpKind::Geometry
    }
    fn check(&self) -> Result<(), PipelineError> {
        if self.max_size == 0 {
            return Err(PipelineError::Parameter(
                "albu_longest_max_size max_size must be at least 1".into(),
            ));
        }
        Ok(())
    }
    /// Geometry: the plan computes the window.
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

/// albumentations' `PadIfNeeded(min_height, min_width, position="center",
/// border_mode=BORDER_CONSTANT, fill)` after `albu_longest_max_size`: the resized image
/// centred (`int((min - size) / 2)` before it on each axis) on a `min_height`x`min_width`
/// canvas of `fill`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuPadIfNeeded {
    /// The output's height.
    pub min_height: u32,
    /// The output's width.
    pub min_width: u32,
    /// The padding's colour. Default black.
    #[serde(default)]
    pub fill: [u8; 3],
    /// What the padding is: the fill (the default), or the image's edge pixels replicated or
    /// mirrored as OpenCV's `copyMakeBorder` mirrors them.
    #[serde(default)]
    pub border: Cv2Border,
}

impl OpSpec for AlbuPadIfNeeded {
    fn kind(&self) -> OpKind {
        OpKind::Geometry
    }
    fn check(&self) -> Result<(), PipelineError> {
        if self.min_height == 0 || self.min_width == 0 {
            return Err(PipelineError::Parameter(
                "albu_pad_if_needed min_height and min_width must be at least 1".into(),
            ));
        }
        Ok(())
    }
    /// Geometry: the plan computes the window and the placement.
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

/// albumentations' `Transpose(p)`: rows become columns, of a square output. Default p 0.5.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuTranspose {
    /// Probability.
    #[serde(default = "half")]
    pub p: f64,
}

impl OpSpec for AlbuTranspose {
    fn kind(&self) -> OpKind {
        OpKind::MovingPixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_transpose")
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            out.push(PixelOp::Transpose);
        }
    }
    fn needs_square(&self) -> bool {
        true
    }
}

/// albumentations' `RandomRotate90(p)`: `np.rot90(image, k)` (counter-clockwise quarter
/// turns), `k` uniform in 0-3, of a square output. Default p 0.5.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuRandomRotate90 {
    /// Probability.
    #[serde(default = "half")]
    pub p: f64,
}

impl OpSpec for AlbuRandomRotate90 {
    fn kind(&self) -> OpKind {
        OpKind::MovingPixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_random_rotate90")
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            let k = rng.below(4) as u8;
            if k != 0 {
                out.push(PixelOp::Rot90(k));
            }
        }
    }
    fn needs_square(&self) -> bool {
        true
    }
}

/// albumentations' `RandomBrightnessContrast(brightness_limit, contrast_limit,
/// brightness_by_max=True, ensure_safe_range=False, p)`: `alpha = 1 + U(contrast_limit)`,
/// `beta = 255 * U(brightness_limit)`, each byte `x` becoming `x * alpha + beta` in float32,
/// clipped to `[0, 255]` and truncated.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuBrightnessContrast {
    /// The brightness shift's range, as a fraction of 255. Default `[-0.2, 0.2]`.
    #[serde(default = "fifth")]
    pub brightness_limit: [f64; 2],
    /// The contrast factor's range, less 1. Default `[-0.2, 0.2]`.
    #[serde(default = "fifth")]
    pub contrast_limit: [f64; 2],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn fifth() -> [f64; 2] {
    [-0.2, 0.2]
}

impl OpSpec for AlbuBrightnessContrast {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_brightness_contrast")?;
        ranges(
            "albu_brightness_contrast",
            &[
                ("brightness_limit", self.brightness_limit),
                ("contrast_limit", self.contrast_limit),
            ],
        )
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            let [c0, c1] = self.contrast_limit;
            let [b0, b1] = self.brightness_limit;
            let alpha = 1.0 + rng.uniform_in(c0, c1);
            let beta = rng.uniform_in(b0, b1) * 255.0;
            out.push(PixelOp::MultiplyAdd { alpha, beta });
        }
    }
}

/// albumentations' `RGBShift(r_shift_limit, g_shift_limit, b_shift_limit, p)`: a shift drawn
/// per channel uniformly from its range (in levels: albumentations' ranges, in fractions of
/// 255, times 255), truncated toward zero and added with saturation (albucore's table).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuRgbShift {
    /// Each channel's range, in levels.
    pub ranges: [[f64; 2]; 3],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

impl OpSpec for AlbuRgbShift {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_rgb_shift")?;
        ranges(
            "albu_rgb_shift",
            &[
                ("r", self.ranges[0]),
                ("g", self.ranges[1]),
                ("b", self.ranges[2]),
            ],
        )
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if !coin(rng, self.p) {
            return;
        }
        let shift = self.ranges.map(|[lo, hi]| {
            // Past a whole image's range it saturates the same.
            rng.uniform_in(lo, hi).trunc().clamp(-256.0, 256.0) as i16
        });
        if shift != [0; 3] {
            out.push(PixelOp::ChannelShift(shift));
        }
    }
}

/// albumentations' `RandomGamma(gamma_limit, p)`: a gamma of `U(gamma_limit) / 100` through
/// its table `trunc((i * (1 / 255)) ** gamma * 255)` (numpy's arange and power, in f64).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuRandomGamma {
    /// The gamma's range, in hundredths. Default `[80, 120]`.
    #[serde(default = "eighty_to_120")]
    pub gamma_limit: [f64; 2],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn eighty_to_120() -> [f64; 2] {
    [80.0, 120.0]
}

impl OpSpec for AlbuRandomGamma {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_random_gamma")?;
        ranges("albu_random_gamma", &[("gamma_limit", self.gamma_limit)])?;
        if self.gamma_limit[0] <= 0.0 {
            return Err(PipelineError::Parameter(format!(
                "albu_random_gamma gamma_limit {:?} must be positive",
                self.gamma_limit
            )));
        }
        Ok(())
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            let [lo, hi] = self.gamma_limit;
            out.push(PixelOp::Gamma(rng.uniform_in(lo, hi) / 100.0));
        }
    }
}

/// albumentations' `ChannelShuffle(p)`: the three channels in an order drawn uniformly (the
/// same order possibly).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuChannelShuffle {
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

impl OpSpec for AlbuChannelShuffle {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_channel_shuffle")
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            let mut order = [0u8, 1, 2];
            shuffle(rng, &mut order);
            out.push(PixelOp::PermuteChannels(order));
        }
    }
}

/// The three channels in a fixed order (`order[c]`: the channel that becomes channel `c`):
/// `[2, 1, 0]` is what `cv2.imread` gives a Dataset that does not convert its BGR arrays, so
/// that every step after it computes on the channels as albumentations does on those arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermuteChannels {
    /// A permutation of `[0, 1, 2]`.
    pub order: [u8; 3],
}

impl OpSpec for PermuteChannels {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        let mut sorted = self.order;
        sorted.sort_unstable();
        if sorted != [0, 1, 2] {
            return Err(PipelineError::Parameter(format!(
                "permute_channels order {:?} is no permutation of [0, 1, 2]",
                self.order
            )));
        }
        Ok(())
    }
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        out.push(PixelOp::PermuteChannels(self.order));
    }
}

/// albumentations' `ChannelDropout(channel_drop_range, fill, p)` of an RGB image: `randint`
/// channels (from the range, fewer than three) drawn without repeats, each set to `fill`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuChannelDropout {
    /// How many channels are dropped (inclusive), at most 2. Default `[1, 1]`.
    #[serde(default = "one_one")]
    pub channel_drop_range: [u8; 2],
    /// The dropped channels' value. Default 0.
    #[serde(default)]
    pub fill: u8,
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn one_one() -> [u8; 2] {
    [1, 1]
}

impl OpSpec for AlbuChannelDropout {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_channel_dropout")?;
        let [lo, hi] = self.channel_drop_range;
        if lo > hi || hi > 2 {
            return Err(PipelineError::Parameter(format!(
                "albu_channel_dropout channel_drop_range {:?} must be a range within 0..=2 (not every channel)",
                self.channel_drop_range
            )));
        }
        Ok(())
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if !coin(rng, self.p) {
            return;
        }
        let [lo, hi] = self.channel_drop_range;
        let count = rng.int_in(i64::from(lo), i64::from(hi)) as u8;
        // `random.sample(range(3), k)`: the first `k` of a uniform order.
        let mut order = [0usize, 1, 2];
        shuffle(rng, &mut order);
        let mut drop = [false; 3];
        for &c in &order[..usize::from(count)] {
            drop[c] = true;
        }
        if count > 0 {
            out.push(PixelOp::DropChannels {
                drop,
                fill: self.fill,
            });
        }
    }
}

/// The channels `drop` marks set to `fill` in every pixel of `rgb`.
pub(crate) fn drop_channels(rgb: &mut [u8], drop: [bool; 3], fill: u8) {
    for px in rgb.chunks_exact_mut(3) {
        for (v, &d) in px.iter_mut().zip(&drop) {
            if d {
                *v = fill;
            }
        }
    }
}

/// albumentations' `ToGray(num_output_channels=3, method="weighted_average", p)`: OpenCV's
/// grey in each channel, with probability `p`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuToGray {
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

impl OpSpec for AlbuToGray {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_to_gray")
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            out.push(PixelOp::Cv2Gray);
        }
    }
}

/// albumentations' `HueSaturationValue(hue_shift_limit, sat_shift_limit, val_shift_limit,
/// p)`: each shift drawn uniform in its range, applied in OpenCV's byte HSV (see the module).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuHueSaturationValue {
    /// Hue shift range, in OpenCV's hue units (180 a turn). Default `[-20, 20]`.
    #[serde(default = "twenty")]
    pub hue_shift_limit: [f64; 2],
    /// Saturation shift range, in levels. Default `[-30, 30]`.
    #[serde(default = "thirty")]
    pub sat_shift_limit: [f64; 2],
    /// Value shift range, in levels. Default `[-20, 20]`.
    #[serde(default = "twenty")]
    pub val_shift_limit: [f64; 2],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn twenty() -> [f64; 2] {
    [-20.0, 20.0]
}

fn thirty() -> [f64; 2] {
    [-30.0, 30.0]
}

impl OpSpec for AlbuHueSaturationValue {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_hue_saturation_value")?;
        ranges(
            "albu_hue_saturation_value",
            &[
                ("hue_shift_limit", self.hue_shift_limit),
                ("sat_shift_limit", self.sat_shift_limit),
                ("val_shift_limit", self.val_shift_limit),
            ],
        )
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            let mut shift = |[lo, hi]: [f64; 2]| rng.uniform_in(lo, hi);
            let hue = shift(self.hue_shift_limit);
            let sat = shift(self.sat_shift_limit);
            let val = shift(self.val_shift_limit);
            // albumentations returns the image untouched when no shift is drawn.
            if hue != 0.0 || sat != 0.0 || val != 0.0 {
                out.push(PixelOp::HsvShift { hue, sat, val });
            }
        }
    }
}

/// albumentations' `ColorJitter(brightness, contrast, saturation, hue, p)` of a uint8 image:
/// with probability `p`, four factors drawn uniform in their ranges (in this order), then
/// applied in an order drawn uniformly: brightness as albucore's table of `x * factor`
/// (`multiply_add` with no shift), contrast as that table of `x * factor + mean * (1 -
/// factor)` around the mean of OpenCV's grey, saturation as OpenCV's `addWeighted` of the
/// image and its grey, hue as a shift of `180 * factor` in OpenCV's byte HSV (the table
/// `HueSaturationValue` uses; none for a factor of 0).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuColorJitter {
    /// Brightness factor's range. Default `[0.8, 1.2]`.
    #[serde(default = "jitter_range")]
    pub brightness: [f64; 2],
    /// Contrast factor's range. Default `[0.8, 1.2]`.
    #[serde(default = "jitter_range")]
    pub contrast: [f64; 2],
    /// Saturation factor's range. Default `[0.8, 1.2]`.
    #[serde(default = "jitter_range")]
    pub saturation: [f64; 2],
    /// Hue shift's range, in turns, within `[-0.5, 0.5]`. Default `[-0.5, 0.5]`.
    #[serde(default = "half_turn")]
    pub hue: [f64; 2],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn jitter_range() -> [f64; 2] {
    [0.8, 1.2]
}

fn half_turn() -> [f64; 2] {
    [-0.5, 0.5]
}

impl OpSpec for AlbuColorJitter {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        const OP: &str = "albu_color_jitter";
        probability(self.p, OP)?;
        ranges(
            OP,
            &[
                ("brightness", self.brightness),
                ("contrast", self.contrast),
                ("saturation", self.saturation),
                ("hue", self.hue),
            ],
        )?;
        for (name, [lo, _]) in [
            ("brightness", self.brightness),
            ("contrast", self.contrast),
            ("saturation", self.saturation),
        ] {
            if lo < 0.0 {
                return Err(PipelineError::Parameter(format!(
                    "{OP} {name} must not be negative"
                )));
            }
        }
        let [lo, hi] = self.hue;
        if lo < -0.5 || hi > 0.5 {
            return Err(PipelineError::Parameter(format!(
                "{OP} hue [{lo}, {hi}] must lie within [-0.5, 0.5]"
            )));
        }
        Ok(())
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            let mut factor = |[lo, hi]: [f64; 2]| rng.uniform_in(lo, hi);
            let brightness = factor(self.brightness);
            let contrast = factor(self.contrast);
            let saturation = factor(self.saturation);
            let hue = factor(self.hue);
            let mut order = [0u8, 1, 2, 3];
            shuffle(rng, &mut order);
            for step in order {
                let op = match step {
                    0 => PixelOp::MultiplyAdd {
                        alpha: brightness,
                        beta: 0.0,
                    },
                    1 => PixelOp::Cv2Contrast(contrast),
                    2 => PixelOp::Cv2Saturation(saturation),
                    // albumentations leaves the image as it is (no trip through HSV).
                    _ if hue == 0.0 => continue,
                    _ => PixelOp::HsvShift {
                        hue: 180.0 * hue,
                        sat: 0.0,
                        val: 0.0,
                    },
                };
                out.push(op);
            }
        }
    }
}

/// Every range `[lo, hi]` finite and ordered.
pub(super) fn ranges(op: &str, named: &[(&str, [f64; 2])]) -> Result<(), PipelineError> {
    for (name, [lo, hi]) in named {
        if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
            return Err(PipelineError::Parameter(format!(
                "{op} {name} [{lo}, {hi}] must be finite with min <= max"
            )));
        }
    }
    Ok(())
}

/// albumentations' `CoarseDropout(num_holes_range, hole_height_range, hole_width_range, fill,
/// p)` with a constant fill: `randint(num_holes_range)` holes, each of a height drawn as
/// `int(H * U(hole_height_range))` (fractions) or `randint(lo, min(hi, H))` (pixels, when the
/// range's top is 1 or more), a width likewise, and a top-left corner uniform over the places
/// it fits. Erased in the written output, as `random_erasing`'s boxes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoarseDropout {
    /// Fewest and most holes. Default `[1, 2]`.
    #[serde(default = "one_two")]
    pub num_holes_range: [u32; 2],
    /// Hole height range: fractions of the height, or pixels when its top is 1 or more.
    /// Default `[0.1, 0.2]`.
    #[serde(default = "tenth_fifth")]
    pub hole_height_range: [f64; 2],
    /// Hole width range, read as `hole_height_range` says. Default `[0.1, 0.2]`.
    #[serde(default = "tenth_fifth")]
    pub hole_width_range: [f64; 2],
    /// The holes' value per channel, in the output's units (after normalize). Default 0.
    #[serde(default)]
    pub fill: [f32; 3],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn one_two() -> [u32; 2] {
    [1, 2]
}

fn tenth_fifth() -> [f64; 2] {
    [0.1, 0.2]
}

impl OpSpec for CoarseDropout {
    fn kind(&self) -> OpKind {
        OpKind::Erase
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "coarse_dropout")?;
        let [n0, n1] = self.num_holes_range;
        if !(1 <= n0 && n0 <= n1) {
            return Err(PipelineError::Parameter(format!(
                "coarse_dropout num_holes_range [{n0}, {n1}] must satisfy 1 <= min <= max"
            )));
        }
        ranges(
            "coarse_dropout",
            &[
                ("hole_height_range", self.hole_height_range),
                ("hole_width_range", self.hole_width_range),
            ],
        )?;
        if self.hole_height_range[0] < 0.0 || self.hole_width_range[0] < 0.0 {
            return Err(PipelineError::Parameter(
                "coarse_dropout hole sizes must not be negative".into(),
            ));
        }
        Ok(())
    }
    /// Erasing: the plan draws the holes at the output ([`CoarseDropout::draw_boxes`]).
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

impl CoarseDropout {
    /// Draws this step's holes for an `h`x`w` output into `out`.
    pub(crate) fn draw_boxes(&self, rng: &mut CounterRng, h: u32, w: u32, out: &mut Vec<EraseBox>) {
        if !coin(rng, self.p) {
            return;
        }
        let [n0, n1] = self.num_holes_range;
        let count = n0 + rng.below(u64::from(n1 - n0) + 1) as u32;
        // albumentations reads both ranges as pixels when the height range's top is 1 or more.
        let pixels = self.hole_height_range[1] >= 1.0;
        let mut side = |range: [f64; 2], full: u32| -> u32 {
            if pixels {
                // `integers(int(lo), int(min(hi, full)) + 1)`.
                let lo = range[0] as u32;
                let hi = range[1].min(f64::from(full)) as u32;
                if hi < lo {
                    return lo.min(full);
                }
                rng.int_in(i64::from(lo), i64::from(hi)) as u32
            } else {
                // `int(full * U(lo, hi))`.
                (f64::from(full) * rng.uniform_in(range[0], range[1])) as u32
            }
        };
        let sizes: Vec<(u32, u32)> = (0..count)
            .map(|_| {
                (
                    side(self.hole_height_range, h).min(h),
                    side(self.hole_width_range, w).min(w),
                )
            })
            .collect();
        for (bh, bw) in sizes {
            let top = rng.below(u64::from(h - bh) + 1) as u32;
            let left = rng.below(u64::from(w - bw) + 1) as u32;
            out.push(EraseBox {
                top,
                left,
                height: bh,
                width: bw,
                value: self.fill,
                noise: None,
            });
        }
    }
}

/// What OpenCV's `warpAffine` (or `copyMakeBorder`) reads where the source point falls
/// outside the image.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cv2Border {
    /// `BORDER_CONSTANT`: the fill.
    #[default]
    Constant,
    /// `BORDER_REPLICATE`: the nearest edge pixel.
    Replicate,
    /// `BORDER_REFLECT`: mirrored, the edge repeated (`fedcba|abcdef`).
    Reflect,
    /// `BORDER_REFLECT_101`: mirrored about the edge pixel (`gfedcb|abcdef`).
    Reflect101,
}

impl Cv2Border {
    /// The source index OpenCV's `borderInterpolate` reads for position `p` on an axis of
    /// `n` pixels (mirrored again as often as it takes), or `None` for the fill.
    pub(crate) fn place(self, p: i64, n: usize) -> Option<usize> {
        let n = n as i64;
        if (0..n).contains(&p) {
            return Some(p as usize);
        }
        match self {
            Cv2Border::Constant => None,
            Cv2Border::Replicate => Some(p.clamp(0, n - 1) as usize),
            Cv2Border::Reflect | Cv2Border::Reflect101 => {
                if n == 1 {
                    return Some(0);
                }
                let delta = i64::from(self == Cv2Border::Reflect101);
                let mut p = p;
                while !(0..n).contains(&p) {
                    p = if p < 0 {
                        -p - 1 + delta
                    } else {
                        n - 1 - (p - n) - delta
                    };
                }
                Some(p as usize)
            }
        }
    }
}

/// albumentations' `Affine` (and `ShiftScaleRotate`, which is one) with `INTER_LINEAR`:
/// a scale per axis, a translation (a fraction of the size, truncated to whole pixels, or
/// pixels), a rotation in degrees and a shear, about the image's centre, composed as
/// albumentations composes them and warped by OpenCV's `warpAffine` (OpenCV 5.0's float
/// kernel; see the module).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuAffine {
    /// The scale ranges of `x` and `y`. Default `[[1, 1], [1, 1]]`.
    #[serde(default = "unit_scale")]
    pub scale: [[f64; 2]; 2],
    /// `y`'s scale is `x`'s. Default false.
    #[serde(default)]
    pub keep_ratio: bool,
    /// The translation ranges of `x` and `y` as fractions of the width and height (the
    /// pixels truncated toward zero), or `None`.
    #[serde(default)]
    pub translate_percent: Option<[[f64; 2]; 2]>,
    /// The translation ranges in pixels (inclusive), when `translate_percent` is `None`.
    #[serde(default)]
    pub translate_px: Option<[[i64; 2]; 2]>,
    /// The rotation range, degrees. Default `[0, 0]`.
    #[serde(default)]
    pub rotate: [f64; 2],
    /// The shear ranges of `x` and `y`, degrees. Default `[[0, 0], [0, 0]]`.
    #[serde(default)]
    pub shear: [[f64; 2]; 2],
    /// Default `constant`.
    #[serde(default = "constant")]
    pub border: Cv2Border,
    /// The constant border's colour. Default black.
    #[serde(default)]
    pub fill: [u8; 3],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn unit_scale() -> [[f64; 2]; 2] {
    [[1.0, 1.0]; 2]
}

pub(super) fn constant() -> Cv2Border {
    Cv2Border::Constant
}

impl OpSpec for AlbuAffine {
    fn kind(&self) -> OpKind {
        OpKind::MovingPixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_affine")?;
        let [sx, sy] = self.scale;
        let [hx, hy] = self.shear;
        let mut named = vec![
            ("scale x", sx),
            ("scale y", sy),
            ("rotate", self.rotate),
            ("shear x", hx),
            ("shear y", hy),
        ];
        if let Some([tx, ty]) = self.translate_percent {
            named.extend([("translate_percent x", tx), ("translate_percent y", ty)]);
        }
        ranges("albu_affine", &named)?;
        if let Some(px) = self.translate_px {
            if px.iter().any(|[lo, hi]| lo > hi) {
                return Err(PipelineError::Parameter(format!(
                    "albu_affine translate_px {px:?} must have min <= max"
                )));
            }
        }
        if sx[0] <= 0.0 || sy[0] <= 0.0 {
            return Err(PipelineError::Parameter(
                "albu_affine scales must be positive".into(),
            ));
        }
        Ok(())
    }
    fn draw(&self, rng: &mut CounterRng, (h, w): (u32, u32), out: &mut Vec<PixelOp>) {
        if !coin(rng, self.p) {
            return;
        }
        let mut uniform = |[lo, hi]: [f64; 2]| rng.uniform_in(lo, hi);
        let (tx, ty) = match (self.translate_percent, self.translate_px) {
            // `int(U * size)`: truncated toward zero.
            (Some([x, y]), _) => (
                (uniform(x) * f64::from(w)).trunc(),
                (uniform(y) * f64::from(h)).trunc(),
            ),
            (None, Some(px)) => {
                let mut pick = |[lo, hi]: [i64; 2]| rng.int_in(lo, hi) as f64;
                (pick(px[0]), pick(px[1]))
            }
            (None, None) => (0.0, 0.0),
        };
        let mut uniform = |[lo, hi]: [f64; 2]| rng.uniform_in(lo, hi);
        let shear = [-uniform(self.shear[0]), -uniform(self.shear[1])];
        let sx = uniform(self.scale[0]);
        let sy = if self.keep_ratio {
            sx
        } else {
            uniform(self.scale[1])
        };
        let angle = uniform(self.rotate);
        let centre = [f64::from(w) / 2.0 - 0.5, f64::from(h) / 2.0 - 0.5];
        let m = albumentations_affine([tx, ty], shear, [sx, sy], angle, centre);
        if is_identity(&m) {
            return; // albumentations returns the image as it is
        }
        out.push(PixelOp::Cv2Affine {
            inverse: opencv_inverse(&m),
            inverse_f64: opencv_inverse_f64(&m),
            border: self.border,
            fill: self.fill,
        });
    }
}

type Mat3 = [[f64; 3]; 3];

fn matmul(a: &Mat3, b: &Mat3) -> Mat3 {
    std::array::from_fn(|i| {
        std::array::from_fn(|j| a[i][0] * b[0][j] + a[i][1] * b[1][j] + a[i][2] * b[2][j])
    })
}

/// albumentations' `create_affine_transformation_matrix`: about `centre`, scale, then
/// rotate (`rotate % 360` degrees), shear, translate, composed left to right as its
/// `m_shift_center @ m_translate @ m_shear @ m_rotate @ m_scale @ m_shift_topleft`.
fn albumentations_affine(
    t: [f64; 2],
    shear: [f64; 2],
    scale: [f64; 2],
    angle: f64,
    centre: [f64; 2],
) -> Mat3 {
    let r = angle.rem_euclid(360.0).to_radians();
    let (sin, cos) = (r.sin(), r.cos());
    let steps: [Mat3; 6] = [
        [
            [1.0, 0.0, centre[0]],
            [0.0, 1.0, centre[1]],
            [0.0, 0.0, 1.0],
        ],
        [[1.0, 0.0, t[0]], [0.0, 1.0, t[1]], [0.0, 0.0, 1.0]],
        [
            [1.0, shear[0].to_radians().tan(), 0.0],
            [shear[1].to_radians().tan(), 1.0, 0.0],
            [0.0, 0.0, 1.0],
        ],
        [[cos, sin, 0.0], [-sin, cos, 0.0], [0.0, 0.0, 1.0]],
        [[scale[0], 0.0, 0.0], [0.0, scale[1], 0.0], [0.0, 0.0, 1.0]],
        [
            [1.0, 0.0, -centre[0]],
            [0.0, 1.0, -centre[1]],
            [0.0, 0.0, 1.0],
        ],
    ];
    let mut m = steps[0];
    for s in &steps[1..] {
        m = matmul(&m, s);
    }
    m[2] = [0.0, 0.0, 1.0];
    m
}

/// `np.allclose(m, np.eye(3))`.
fn is_identity(m: &Mat3) -> bool {
    (0..3).all(|i| {
        (0..3).all(|j| {
            let eye = f64::from(u8::from(i == j));
            (m[i][j] - eye).abs() <= 1e-8 + 1e-5 * eye.abs()
        })
    })
}

/// The output-to-source map `warpAffine` computes from the forward matrix `m` (its inversion,
/// in double), as the float32 values its kernel uses.
fn opencv_inverse(m: &Mat3) -> [f32; 6] {
    opencv_inverse_f64(m).map(|v| v as f32)
}

/// The output-to-source map `warpAffine` computes from the forward matrix `m`, in double (what
/// its fixed-point kernels of other types than uint8, uint16 and float32 take).
fn opencv_inverse_f64(m: &Mat3) -> [f64; 6] {
    let [a, b, c] = m[0];
    let [d, e, f] = m[1];
    let det = a * e - b * d;
    let det = if det != 0.0 { 1.0 / det } else { 0.0 };
    let (a2, b2, d2, e2) = (e * det, b * -det, d * -det, a * det);
    let c2 = -a2 * c - b2 * f;
    let f2 = -d2 * c - e2 * f;
    [a2, b2, c2, d2, e2, f2]
}

/// Where OpenCV's `warpAffine` kernel starts each row's scalar code: its AVX2 build takes
/// blocks of 16 pixels.
const WARP_BLOCK: usize = 16;

/// OpenCV's `warpAffine(..., INTER_LINEAR)` of an `h`x`w` RGB8 image in place, as its
/// x86-64 wheels (5.0) compute it, `inverse` mapping output to source in float32: each
/// output pixel's source point (`fma(m0, x, y * m1 + m2)` in its vector blocks of 16, `fma(x,
/// m0, y * m1) + m2` after them), its four neighbours (outside the image: `border`), two
/// fused interpolations across and one down, rounded half to even.
pub(crate) fn warp_affine(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    inverse: &[f32; 6],
    border: Cv2Border,
    fill: [u8; 3],
    scratch: &mut Vec<u8>,
) {
    copy_with_slack(&rgb[..h * w * 3], scratch);
    let warp = Warp {
        src: scratch,
        w,
        h,
        map: WarpMap::Affine(inverse),
        border,
        fill,
    };
    warp.run((0, 0), (h, w), rgb);
}

/// [`warp_affine`] of the `h`x`w` RGB8 image `src` (at its own size, as albumentations warps)
/// computed only over its `out` `(height, width)` part at `at` `(top, left)`, written to
/// `out_rgb`: the same bytes as the warp then that crop (each output pixel at its place in the
/// whole warp, so in the same vector block or scalar rest of its row).
#[allow(clippy::too_many_arguments)]
pub(crate) fn warp_affine_crop(
    src: &[u8],
    (h, w): (usize, usize),
    inverse: &[f32; 6],
    border: Cv2Border,
    fill: [u8; 3],
    at: (usize, usize),
    out: (usize, usize),
    out_rgb: &mut [u8],
    scratch: &mut Vec<u8>,
) {
    assert!(
        at.0 + out.0 <= h && at.1 + out.1 <= w,
        "{out:?} at {at:?} of {h}x{w}"
    );
    copy_with_slack(&src[..h * w * 3], scratch);
    let warp = Warp {
        src: scratch,
        w,
        h,
        map: WarpMap::Affine(inverse),
        border,
        fill,
    };
    warp.run(at, out, out_rgb);
}

/// OpenCV's `remap(..., INTER_LINEAR)` of an `h`x`w` RGB8 image in place by `map` (a
/// separable or a whole float32 map, not the matrix), as its x86-64 wheels (5.0) compute it:
/// each output pixel's source point, its four neighbours (outside the image: `border`), two
/// fused interpolations across and one down, rounded half to even, as [`warp_affine`] does
/// from the points its matrix gives.
///
/// # Panics
/// When the map is not of the image's size.
pub(crate) fn remap(
    rgb: &mut [u8],
    (h, w): (usize, usize),
    map: WarpMap<'_>,
    border: Cv2Border,
    fill: [u8; 3],
    scratch: &mut Vec<u8>,
) {
    let fits = match map {
        WarpMap::Affine(_) => false,
        WarpMap::Separable { xs, ys } => xs.len() == w && ys.len() == h,
        WarpMap::Whole { xs, ys } => xs.len() == h * w && ys.len() == h * w,
    };
    assert!(fits, "a remap's map of another size than {w}x{h}");
    copy_with_slack(&rgb[..h * w * 3], scratch);
    let warp = Warp {
        src: scratch,
        w,
        h,
        map,
        border,
        fill,
    };
    warp.run((0, 0), (h, w), rgb);
}

/// `src` copied into `scratch` with one byte more, for the four-byte reads of `interp8_inside`.
fn copy_with_slack(src: &[u8], scratch: &mut Vec<u8>) {
    scratch.clear();
    scratch.extend_from_slice(src);
    scratch.push(0);
}

/// Where each output pixel reads the source.
#[derive(Clone, Copy)]
pub(crate) enum WarpMap<'a> {
    /// `warpAffine`'s output-to-source matrix, float32 `(m0, m1, m2, m3, m4, m5)`.
    Affine(&'a [f32; 6]),
    /// `remap`'s map of a grid: column `x` reads `xs[x]`, row `y` reads `ys[y]`.
    Separable { xs: &'a [f32], ys: &'a [f32] },
    /// `remap`'s map of each pixel, row by row: pixel `(x, y)` reads `(xs[i], ys[i])`, `i =
    /// y * w + x`.
    Whole { xs: &'a [f32], ys: &'a [f32] },
}

/// One warp: its `h`x`w` source (with one byte of slack), map, border and fill.
struct Warp<'a> {
    src: &'a [u8],
    w: usize,
    h: usize,
    map: WarpMap<'a>,
    border: Cv2Border,
    fill: [u8; 3],
}

impl Warp<'_> {
    /// The output's `size` `(height, width)` part at `at` `(top, left)`, into `out`.
    fn run(&self, at: (usize, usize), size: (usize, usize), out: &mut [u8]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx2")
        {
            // SAFETY: the CPU has FMA and AVX2 (detected just above).
            return unsafe { self.run_fma(at, size, out) };
        }
        self.run_any(at, size, out, false);
    }

    /// [`Warp::run`] built with FMA and AVX2, so each `mul_add` is one instruction and each
    /// rounding another (not libm's calls; the same values).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn run_fma(&self, at: (usize, usize), size: (usize, usize), out: &mut [u8]) {
        self.run_any(at, size, out, true);
    }

    #[inline(always)]
    fn run_any(
        &self,
        (y0, x0): (usize, usize),
        (oh, ow): (usize, usize),
        out: &mut [u8],
        avx2: bool,
    ) {
        let Warp {
            src,
            w,
            h,
            map,
            border,
            fill,
        } = *self;
        let fill = fill.map(f32::from);
        // The source index along an axis of `n` pixels, or `None` for the fill.
        let place = |p: i64, n: usize| border.place(p, n);
        // Each neighbour as four lanes (the fourth unused), so a pixel's three channels
        // interpolate together.
        let fill = [fill[0], fill[1], fill[2], 0.0];
        let tap = |y: i64, x: i64| -> [f32; 4] {
            match (place(y, h), place(x, w)) {
                (Some(y), Some(x)) => {
                    let at = (y * w + x) * 3;
                    [
                        f32::from(src[at]),
                        f32::from(src[at + 1]),
                        f32::from(src[at + 2]),
                        0.0,
                    ]
                }
                _ => fill,
            }
        };
        let vector = w - w % WARP_BLOCK;
        let (w1, h1) = (w as i64 - 1, h as i64 - 1);
        for (y, row) in out.chunks_exact_mut(ow * 3).take(oh).enumerate() {
            // `y` and `x` are the pixel's place in the whole warp; `row` holds `x0..x0 + ow`.
            let y = y0 + y;
            let yf = y as f32;
            // The row's terms of the matrix's points, or the map's row.
            let (ym1, ym4, row_x, row_y) = match map {
                WarpMap::Affine(m) => {
                    let (ym1, ym4) = (yf * m[1], yf * m[4]);
                    (ym1, ym4, ym1 + m[2], ym4 + m[5])
                }
                WarpMap::Separable { ys, .. } => (0.0, 0.0, 0.0, ys[y]),
                WarpMap::Whole { .. } => (0.0, 0.0, 0.0, 0.0),
            };
            let mut x = x0;
            while x < x0 + ow {
                // Eight pixels at a time in vector lanes, where all their neighbours are inside.
                #[cfg(target_arch = "x86_64")]
                if avx2 && x + 8 <= vector && x + 8 <= x0 + ow && w >= 2 && h >= 2 {
                    let out = &mut row[(x - x0) * 3..(x - x0 + 8) * 3];
                    // SAFETY: AVX2 and FMA are present (`avx2` is set only then); `src` holds the
                    // image and one byte more; `out` holds the eight pixels (and `xs` the map's
                    // eight columns from `x`, `x + 8 <= w`).
                    let done = unsafe {
                        match map {
                            WarpMap::Affine(m) => {
                                warp8_inside(src, w, h, m, [row_x, row_y], x, out)
                            }
                            WarpMap::Separable { xs, .. } => {
                                remap8_inside(src, w, h, &xs[x..x + 8], &[row_y; 8], out)
                            }
                            WarpMap::Whole { xs, ys } => {
                                let at = y * w + x;
                                remap8_inside(src, w, h, &xs[at..at + 8], &ys[at..at + 8], out)
                            }
                        }
                    };
                    if done {
                        x += 8;
                        continue;
                    }
                }
                let px = &mut row[(x - x0) * 3..(x - x0) * 3 + 3];
                let xf = x as f32;
                let (sx, sy) = match map {
                    WarpMap::Affine(m) if x < vector => {
                        (m[0].mul_add(xf, row_x), m[3].mul_add(xf, row_y))
                    }
                    WarpMap::Affine(m) => {
                        (xf.mul_add(m[0], ym1) + m[2], xf.mul_add(m[3], ym4) + m[5])
                    }
                    WarpMap::Separable { xs, .. } => (xs[x], row_y),
                    WarpMap::Whole { xs, ys } => (xs[y * w + x], ys[y * w + x]),
                };
                // Far outside: any index there reads the border.
                let (fx, fy) = (sx.floor().clamp(-1e9, 1e9), sy.floor().clamp(-1e9, 1e9));
                let (ax, ay) = (sx - fx, sy - fy);
                let (ix, iy) = (fx as i64, fy as i64);
                let (p00, p01, p10, p11) = if ix >= 0 && iy >= 0 && ix < w1 && iy < h1 {
                    // All four inside (most pixels): read them directly.
                    let at = (iy as usize * w + ix as usize) * 3;
                    let read = |k: usize| {
                        let p = &src[k..k + 3];
                        [f32::from(p[0]), f32::from(p[1]), f32::from(p[2]), 0.0]
                    };
                    (
                        read(at),
                        read(at + 3),
                        read(at + w * 3),
                        read(at + w * 3 + 3),
                    )
                } else {
                    (
                        tap(iy, ix),
                        tap(iy, ix + 1),
                        tap(iy + 1, ix),
                        tap(iy + 1, ix + 1),
                    )
                };
                let mut v = [0f32; 4];
                for c in 0..4 {
                    let top = ax.mul_add(p01[c] - p00[c], p00[c]);
                    let bottom = ax.mul_add(p11[c] - p10[c], p10[c]);
                    v[c] = ay.mul_add(bottom - top, top).round_ties_even();
                }
                // `as` saturates to [0, 255], as OpenCV's pack does.
                px.copy_from_slice(&[v[0] as u8, v[1] as u8, v[2] as u8]);
                x += 1;
            }
        }
    }
}

/// The output pixels `x..x + 8` of a row whose source points start from `row` (`y * m1 + m2`,
/// `y * m4 + m5`), in AVX2 lanes with OpenCV's arithmetic (its vector formula), written to
/// `out`; `false`, writing nothing, unless every one's four neighbours lie inside the image.
///
/// # Safety
/// The CPU has AVX2 and FMA; `src` holds the `h`x`w` RGB8 image and at least one byte more
/// (each neighbour is read as four bytes).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn warp8_inside(
    src: &[u8],
    w: usize,
    h: usize,
    m: &[f32; 6],
    row: [f32; 2],
    x: usize,
    out: &mut [u8],
) -> bool {
    use std::arch::x86_64::*;
    debug_assert!(src.len() > h * w * 3 && out.len() >= 24);
    let xs = _mm256_add_ps(
        _mm256_set1_ps(x as f32),
        _mm256_setr_ps(0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0),
    );
    let sx = _mm256_fmadd_ps(_mm256_set1_ps(m[0]), xs, _mm256_set1_ps(row[0]));
    let sy = _mm256_fmadd_ps(_mm256_set1_ps(m[3]), xs, _mm256_set1_ps(row[1]));
    // SAFETY: as this function's own contract.
    unsafe { interp8_inside(src, w, h, sx, sy, out) }
}

/// Eight output pixels of a [`remap`] whose source points are `(xs[k], ys[k])`, in AVX2 lanes
/// as [`interp8_inside`] computes them; `false`, writing nothing, unless every one's four
/// neighbours lie inside the image.
///
/// # Safety
/// As [`warp8_inside`]'s.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn remap8_inside(
    src: &[u8],
    w: usize,
    h: usize,
    xs: &[f32],
    ys: &[f32],
    out: &mut [u8],
) -> bool {
    use std::arch::x86_64::*;
    assert!(xs.len() >= 8 && ys.len() >= 8);
    // SAFETY: `xs` and `ys` hold eight floats each (asserted), read unaligned.
    let (sx, sy) = unsafe { (_mm256_loadu_ps(xs.as_ptr()), _mm256_loadu_ps(ys.as_ptr())) };
    // SAFETY: as this function's own contract.
    unsafe { interp8_inside(src, w, h, sx, sy, out) }
}

/// Eight output pixels from their source points `(sx, sy)`, with OpenCV's arithmetic (its
/// vector formula), written to `out`; `false`, writing nothing, unless every one's four
/// neighbours lie inside the image.
///
/// # Safety
/// As [`warp8_inside`]'s.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn interp8_inside(
    src: &[u8],
    w: usize,
    h: usize,
    sx: std::arch::x86_64::__m256,
    sy: std::arch::x86_64::__m256,
    out: &mut [u8],
) -> bool {
    use std::arch::x86_64::*;
    debug_assert!(src.len() > h * w * 3 && out.len() >= 24);
    let (fx, fy) = (_mm256_floor_ps(sx), _mm256_floor_ps(sy));
    // 0 <= floor < side - 1 on both axes (NaN compares false), exact in f32 for any image.
    let zero = _mm256_setzero_ps();
    let inside = _mm256_and_ps(
        _mm256_and_ps(
            _mm256_cmp_ps::<_CMP_GE_OQ>(fx, zero),
            _mm256_cmp_ps::<_CMP_LT_OQ>(fx, _mm256_set1_ps((w - 1) as f32)),
        ),
        _mm256_and_ps(
            _mm256_cmp_ps::<_CMP_GE_OQ>(fy, zero),
            _mm256_cmp_ps::<_CMP_LT_OQ>(fy, _mm256_set1_ps((h - 1) as f32)),
        ),
    );
    if _mm256_movemask_ps(inside) != 0xff {
        return false;
    }
    let (ax, ay) = (_mm256_sub_ps(sx, fx), _mm256_sub_ps(sy, fy));
    let stride = (w * 3) as i32;
    let at = _mm256_add_epi32(
        _mm256_mullo_epi32(_mm256_cvttps_epi32(fy), _mm256_set1_epi32(stride)),
        _mm256_mullo_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(3)),
    );
    let base = src.as_ptr() as *const i32;
    let gather = |offset: i32| {
        // SAFETY: each lane's neighbour starts at most at the image's last pixel (its top-left
        // is inside, below and left of the last row and column), so its four bytes end within
        // `src`, which holds one byte past the image.
        unsafe {
            _mm256_i32gather_epi32::<1>(base, _mm256_add_epi32(at, _mm256_set1_epi32(offset)))
        }
    };
    let (p00, p01, p10, p11) = (gather(0), gather(3), gather(stride), gather(stride + 3));
    let byte = _mm256_set1_epi32(0xff);
    let mut packed = _mm256_setzero_si256();
    for c in 0..3 {
        let channel = |p: __m256i| {
            let shifted = match c {
                0 => p,
                1 => _mm256_srli_epi32::<8>(p),
                _ => _mm256_srli_epi32::<16>(p),
            };
            _mm256_cvtepi32_ps(_mm256_and_si256(shifted, byte))
        };
        let (q00, q01, q10, q11) = (channel(p00), channel(p01), channel(p10), channel(p11));
        let top = _mm256_fmadd_ps(ax, _mm256_sub_ps(q01, q00), q00);
        let bottom = _mm256_fmadd_ps(ax, _mm256_sub_ps(q11, q10), q10);
        let v = _mm256_fmadd_ps(ay, _mm256_sub_ps(bottom, top), top);
        // Rounded half to even (the default rounding), within [0, 255].
        let v = _mm256_cvtps_epi32(v);
        let v = match c {
            0 => v,
            1 => _mm256_slli_epi32::<8>(v),
            _ => _mm256_slli_epi32::<16>(v),
        };
        packed = _mm256_or_si256(packed, v);
    }
    let mut lanes = [0u32; 8];
    // SAFETY: `lanes` is 32 bytes, written unaligned.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, packed) };
    for (px, lane) in out.chunks_exact_mut(3).zip(lanes) {
        px.copy_from_slice(&lane.to_le_bytes()[..3]);
    }
    true
}

/// `image.transpose(1, 0, 2)` of an `n`x`n` RGB8 image, in place.
pub(crate) fn transpose(rgb: &mut [u8], n: usize) {
    for y in 0..n {
        for x in y + 1..n {
            for c in 0..3 {
                rgb.swap((y * n + x) * 3 + c, (x * n + y) * 3 + c);
            }
        }
    }
}

/// albucore's `add_vector` of whole levels to a uint8 RGB image (one lookup table per
/// channel): each value plus its channel's shift, clipped to `[0, 255]`.
pub(crate) fn shift_channels(rgb: &mut [u8], shift: [i16; 3]) {
    let luts: [[u8; 256]; 3] =
        shift.map(|d| std::array::from_fn(|v| (v as i32 + i32::from(d)).clamp(0, 255) as u8));
    for px in rgb.chunks_exact_mut(3) {
        for (c, v) in px.iter_mut().enumerate() {
            *v = luts[c][usize::from(*v)];
        }
    }
}

/// OpenCV 5's `cvtColor(img, COLOR_RGB2GRAY)` of 8-bit pixels, with its 15-bit fixed-point
/// weights (`(9798 r + 19235 g + 3735 b + 16384) >> 15`: equal to `cv2.cvtColor` for every
/// 24-bit colour, checked), written to all three channels (albumentations' `ToGray` with
/// three output channels).
pub(crate) fn cv2_gray(rgb: &mut [u8]) {
    for px in rgb.chunks_exact_mut(3) {
        px.fill(cv2_grey_of(px));
    }
}

/// OpenCV 5's `COLOR_RGB2GRAY` of one 8-bit pixel (`px`: its R, G and B).
#[inline(always)]
fn cv2_grey_of(px: &[u8]) -> u8 {
    let [r, g, b] = [px[0], px[1], px[2]].map(u32::from);
    ((9798 * r + 19235 * g + 3735 * b + 16384) >> 15) as u8
}

/// albumentations' `gamma_transform` of a uint8 image: the table `(i * (1 / 255)) ** gamma *
/// 255` truncated to bytes (numpy's `arange(0, 256 / 255, 1 / 255)` is `i` times its step).
pub(crate) fn gamma(rgb: &mut [u8], gamma: f64) {
    let step = 1.0 / 255.0;
    let table: Vec<u8> = (0..256)
        .map(|i| ((f64::from(i) * step).powf(gamma) * 255.0) as u8)
        .collect();
    for v in rgb {
        *v = table[usize::from(*v)];
    }
}

/// albucore's `multiply_add` of a uint8 image: the lookup table `clip(arange(256, float32) *
/// float32(alpha) + float32(beta), 0, 255)` truncated to bytes.
pub(crate) fn multiply_add(rgb: &mut [u8], alpha: f64, beta: f64) {
    let (a, b) = (alpha as f32, beta as f32);
    let lut: [u8; 256] = std::array::from_fn(|v| (v as f32 * a + b).clamp(0.0, 255.0) as u8);
    for x in rgb.iter_mut() {
        *x = lut[*x as usize];
    }
}

/// The mean of OpenCV's grey of 8-bit RGB pixels ([`cv2_gray`]'s value for each), as numpy
/// computes `mean()` of that image: the exact sum over the count, in f64.
fn cv2_gray_mean(rgb: &[u8]) -> f64 {
    let n = rgb.len() / 3;
    if n == 0 {
        return 0.0;
    }
    let sum: u64 = rgb
        .chunks_exact(3)
        .map(|px| u64::from(cv2_grey_of(px)))
        .sum();
    sum as f64 / n as f64
}

/// albumentations' `adjust_contrast_torchvision` of a uint8 RGB image: around the mean of
/// OpenCV's grey, `multiply_add(img, factor, mean * (1 - factor))` through albucore's float32
/// table, or for a factor of 0 the mean rounded half up in every byte.
pub(crate) fn cv2_contrast(rgb: &mut [u8], factor: f64) {
    if factor == 1.0 {
        return;
    }
    let mean = cv2_gray_mean(rgb);
    if factor == 0.0 {
        rgb.fill((mean + 0.5) as u8);
        return;
    }
    multiply_add(rgb, factor, mean * (1.0 - factor));
}

/// albumentations' `adjust_saturation_torchvision` of a uint8 RGB image: OpenCV's
/// `addWeighted(img, factor, grey, 1 - factor, 0)` with the grey of [`cv2_gray`], each byte
/// `saturate_cast<uchar>(fma(x, alpha, grey * beta))` in float32 (OpenCV's AVX2 kernel fuses
/// the multiply-adds, its scalar rest as well; checked against it for every byte pair), rounded
/// half to even.
pub(crate) fn cv2_saturation(rgb: &mut [u8], factor: f64) {
    if factor == 1.0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has FMA and AVX2 (detected just above).
        return unsafe { cv2_saturation_fma(rgb, factor) };
    }
    cv2_saturation_any(rgb, factor);
}

/// [`cv2_saturation`] built with FMA and AVX2: each `mul_add` one instruction, in lanes,
/// where without FMA it is a call into libm per byte (the same values).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn cv2_saturation_fma(rgb: &mut [u8], factor: f64) {
    cv2_saturation_any(rgb, factor);
}

#[inline(always)]
fn cv2_saturation_any(rgb: &mut [u8], factor: f64) {
    let (alpha, beta) = (factor as f32, (1.0 - factor) as f32);
    // In blocks of 64 pixels: each pixel's grey times beta, once for each of its bytes, then
    // one loop over the bytes that runs in vector lanes.
    let mut grey = [0f32; 192];
    for block in rgb.chunks_mut(192) {
        for (px, g) in block.chunks_exact(3).zip(grey.chunks_exact_mut(3)) {
            g.copy_from_slice(&[f32::from(cv2_grey_of(px)) * beta; 3]);
        }
        for (v, &g) in block.iter_mut().zip(&grey) {
            *v = super::albu_filter::round_byte(f32::from(*v).mul_add(alpha, g));
        }
    }
}

/// OpenCV's `(255 << 12) / v` and `(180 << 12) / (6 * d)` tables of its byte RGB to HSV,
/// rounded as `saturate_cast<int>` rounds (half to even).
struct HsvTables {
    sdiv: [i32; 256],
    hdiv: [i32; 256],
}

fn hsv_tables() -> &'static HsvTables {
    static TABLES: std::sync::OnceLock<HsvTables> = std::sync::OnceLock::new();
    TABLES.get_or_init(|| {
        let mut t = HsvTables {
            sdiv: [0; 256],
            hdiv: [0; 256],
        };
        for i in 1..256 {
            t.sdiv[i] = (f64::from(255 << HSV_SHIFT) / i as f64).round_ties_even() as i32;
            t.hdiv[i] = (f64::from(180 << HSV_SHIFT) / (6.0 * i as f64)).round_ties_even() as i32;
        }
        t
    })
}

const HSV_SHIFT: u32 = 12;

/// OpenCV's `COLOR_RGB2HSV` of one 8-bit pixel: `(h in [0, 180), s, v)`.
fn rgb_to_hsv(t: &HsvTables, [r, g, b]: [u8; 3]) -> [u8; 3] {
    let (r, g, b) = (i32::from(r), i32::from(g), i32::from(b));
    let v = r.max(g).max(b);
    let diff = v - r.min(g).min(b);
    let round = 1 << (HSV_SHIFT - 1);
    let s = (diff * t.sdiv[v as usize] + round) >> HSV_SHIFT;
    let h = if v == r {
        g - b
    } else if v == g {
        b - r + 2 * diff
    } else {
        r - g + 4 * diff
    };
    let mut h = (h * t.hdiv[diff as usize] + round) >> HSV_SHIFT;
    if h < 0 {
        h += 180;
    }
    [h as u8, s as u8, v as u8]
}

/// [`rgb_to_hsv`] of `LANES` pixels (`px`: their RGB bytes) and the lookups in `luts` (hue,
/// saturation, value, as floats) in AVX2's eight i32 lanes: each lane computed as
/// [`rgb_to_hsv`] computes one pixel, its branches as blends, its tables read by gathers.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn shifted_avx2(t: &HsvTables, luts: &[[f32; 256]; 3], px: &[u8]) -> [[f32; LANES]; 3] {
    use std::arch::x86_64::*;
    let px = &px[..LANES * 3];
    let channel = |c: usize| {
        let at = |i: usize| i32::from(px[3 * i + c]);
        _mm256_setr_epi32(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7))
    };
    let (r, g, b) = (channel(0), channel(1), channel(2));
    let byte = _mm256_set1_epi32(255);
    let round = _mm256_set1_epi32(1 << (HSV_SHIFT - 1));
    let v = _mm256_max_epi32(_mm256_max_epi32(r, g), b);
    let diff = _mm256_sub_epi32(v, _mm256_min_epi32(_mm256_min_epi32(r, g), b));
    // Every gather's index is masked to 0..=255 (the values lie there already).
    // SAFETY: the indices lie inside the 256-entry tables read.
    let (sdiv, hdiv) = unsafe {
        (
            _mm256_i32gather_epi32::<4>(t.sdiv.as_ptr(), _mm256_and_si256(v, byte)),
            _mm256_i32gather_epi32::<4>(t.hdiv.as_ptr(), _mm256_and_si256(diff, byte)),
        )
    };
    let s = _mm256_srai_epi32::<{ HSV_SHIFT as i32 }>(_mm256_add_epi32(
        _mm256_mullo_epi32(diff, sdiv),
        round,
    ));
    let two = _mm256_add_epi32(diff, diff);
    let from_r = _mm256_sub_epi32(g, b);
    let from_g = _mm256_add_epi32(_mm256_sub_epi32(b, r), two);
    let from_b = _mm256_add_epi32(_mm256_sub_epi32(r, g), _mm256_add_epi32(two, two));
    // `v == r` first, then `v == g`, else blue's.
    let h = _mm256_blendv_epi8(
        _mm256_blendv_epi8(from_b, from_g, _mm256_cmpeq_epi32(v, g)),
        from_r,
        _mm256_cmpeq_epi32(v, r),
    );
    let h = _mm256_srai_epi32::<{ HSV_SHIFT as i32 }>(_mm256_add_epi32(
        _mm256_mullo_epi32(h, hdiv),
        round,
    ));
    let negative = _mm256_cmpgt_epi32(_mm256_setzero_si256(), h);
    let h = _mm256_add_epi32(h, _mm256_and_si256(negative, _mm256_set1_epi32(180)));
    let mut out = [[0f32; LANES]; 3];
    for (c, idx) in [h, s, v].into_iter().enumerate() {
        // SAFETY: the masked indices lie inside the 256-entry table; the store writes the 8
        // floats of `out[c]`.
        unsafe {
            let x = _mm256_i32gather_ps::<4>(luts[c].as_ptr(), _mm256_and_si256(idx, byte));
            _mm256_storeu_ps(out[c].as_mut_ptr(), x);
        }
    }
    out
}

/// The pixels of each row that OpenCV's vector `COLOR_HSV2RGB` takes (blocks of 32); the
/// rest of the row goes through its scalar code.
const HSV_BLOCK: usize = 32;

/// The float32 RGB (in `[0, 1]`) of an HSV byte pixel as OpenCV's scalar code
/// (`HSV2RGB_native`) computes it, for the pixels after a row's last block.
#[inline(always)]
fn hsv_to_rgb_scalar(hsv: [u8; 3]) -> [f32; 3] {
    let inv = 1.0f32 / 255.0;
    let (s, v) = (f32::from(hsv[1]) * inv, f32::from(hsv[2]) * inv);
    if s == 0.0 {
        return [v; 3];
    }
    let scaled = (f32::from(hsv[0]) * (6.0f32 / 180.0)) % 6.0;
    let floor = scaled.floor();
    let (sector, h) = if (0.0..6.0).contains(&floor) {
        (floor as usize, scaled - floor)
    } else {
        (0, 0.0)
    };
    sectors(sector, h, s, v)
}

/// `(r, g, b)` from the four values OpenCV's HSV to RGB picks among by sector (its
/// `sector_data`), the two products with `h` fused as its AVX2 build fuses them.
#[inline(always)]
fn sectors(sector: usize, h: f32, s: f32, v: f32) -> [f32; 3] {
    let tab = [
        v,
        v * (1.0 - s),
        v * (-s).mul_add(h, 1.0),
        v * (-s).mul_add(1.0 - h, 1.0),
    ];
    // (b, g, r) indices per sector.
    const SECTOR: [[usize; 3]; 6] = [
        [1, 3, 0],
        [1, 0, 2],
        [3, 0, 1],
        [0, 2, 1],
        [0, 1, 3],
        [2, 1, 0],
    ];
    let [b, g, r] = SECTOR[sector % 6];
    [tab[r], tab[g], tab[b]]
}

/// albumentations' `shift_hsv` of an `h`x`w` RGB8 image (see the module): `hue` added modulo
/// 180 (then truncated), `sat` and `val` truncated to whole levels and added with
/// saturation, pixels without saturation kept so.
pub(crate) fn hsv_shift(rgb: &mut [u8], w: usize, hue: f64, sat: f64, val: f64) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has FMA and AVX2 (detected just above).
        return unsafe { hsv_shift_fma(rgb, w, hue, sat, val) };
    }
    hsv_shift_any(rgb, w, hue, sat, val);
}

/// [`hsv_shift`] built with FMA and AVX2, so each `mul_add` is one instruction and each
/// rounding another (not libm's calls; the same values).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn hsv_shift_fma(rgb: &mut [u8], w: usize, hue: f64, sat: f64, val: f64) {
    hsv_shift_any(rgb, w, hue, sat, val);
}

#[inline(always)]
fn hsv_shift_any(rgb: &mut [u8], w: usize, hue: f64, sat: f64, val: f64) {
    let tables = hsv_tables();
    // numpy's `mod(arange(256) + hue, 180)` (fmod, then + 180 when negative), as uint8.
    let hue_lut: [u8; 256] = std::array::from_fn(|x| {
        if hue == 0.0 {
            return x as u8;
        }
        let mut m = (x as f64 + hue) % 180.0;
        if m < 0.0 {
            m += 180.0;
        }
        m as u8
    });
    // albucore's `add_constant` of a uint8 channel: `int(shift)` added, clipped.
    let add = |shift: f64| -> [u8; 256] {
        let k = shift.trunc() as i32;
        std::array::from_fn(|x| (x as i32 + k).clamp(0, 255) as u8)
    };
    let (sat_lut, val_lut) = (add(sat), add(val));
    let vector = w - w % HSV_BLOCK;
    let shifted = |px: &[u8]| -> [u8; 3] {
        let [h0, s0, v0] = rgb_to_hsv(tables, [px[0], px[1], px[2]]);
        let s1 = if s0 == 0 { 0 } else { sat_lut[s0 as usize] };
        [hue_lut[h0 as usize], s1, val_lut[v0 as usize]]
    };
    // The three tables as floats for the vector blocks, saturation's 0 kept 0 as `shifted`
    // keeps it: the lookups gather floats in lanes.
    let mut luts = [hue_lut, sat_lut, val_lut].map(|t| t.map(f32::from));
    luts[1][0] = 0.0;
    #[cfg(target_arch = "x86_64")]
    let avx2 = std::arch::is_x86_feature_detected!("avx2");
    // Each of `LANES` pixels' shifted H, S and V (`px`: their RGB bytes), as floats.
    let shifted_lanes = |px: &[u8]| -> [[f32; LANES]; 3] {
        #[cfg(target_arch = "x86_64")]
        if avx2 {
            // SAFETY: AVX2 was detected above.
            return unsafe { shifted_avx2(tables, &luts, px) };
        }
        let mut hsv = [[0f32; LANES]; 3];
        for (i, p) in px[..LANES * 3].chunks_exact(3).enumerate() {
            for (c, v) in shifted(p).into_iter().enumerate() {
                hsv[c][i] = f32::from(v);
            }
        }
        hsv
    };
    for row in rgb.chunks_exact_mut(w * 3) {
        let (blocks, rest) = row.split_at_mut(vector * 3);
        // OpenCV's vector code, 8 pixels at a time in lanes.
        for block in blocks.chunks_exact_mut(LANES * 3) {
            let hsv = shifted_lanes(block);
            let rgb8 = hsv_to_rgb_lanes(&hsv);
            for (i, px) in block.chunks_exact_mut(3).enumerate() {
                px.copy_from_slice(&[rgb8[0][i], rgb8[1][i], rgb8[2][i]]);
            }
        }
        for px in rest.chunks_exact_mut(3) {
            let f = hsv_to_rgb_scalar(shifted(px));
            for c in 0..3 {
                // `saturate_cast<uchar>`: rounded half to even.
                px[c] = (f[c] * 255.0).round_ties_even().clamp(0.0, 255.0) as u8;
            }
        }
    }
}

/// The pixels [`hsv_to_rgb_lanes`] converts at once.
const LANES: usize = 8;

/// OpenCV's vector `COLOR_HSV2RGB` of `LANES` pixels (`[h, s, v]` planes of byte values):
/// its selects by sector, fused products and `v_trunc` of each value times 255.
#[inline(always)]
fn hsv_to_rgb_lanes(hsv: &[[f32; LANES]; 3]) -> [[u8; LANES]; 3] {
    let mut out = [[0u8; LANES]; 3];
    for i in 0..LANES {
        let inv = 1.0f32 / 255.0;
        let (s, v) = (hsv[1][i] * inv, hsv[2][i] * inv);
        let scaled = hsv[0][i] * (6.0f32 / 180.0);
        let pre = scaled.trunc();
        let h = scaled - pre;
        let sector = pre - (pre * (1.0 / 6.0)).trunc() * 6.0;
        let t0 = v;
        let t1 = v * (1.0 - s);
        let t2 = v * (-s).mul_add(h, 1.0);
        let t3 = v * (-s).mul_add(1.0 - h, 1.0);
        // OpenCV's masks: (b, g, r) per sector 0-5 are (1,3,0) (1,0,2) (3,0,1) (0,2,1)
        // (0,1,3) (2,1,0) of the four values.
        let b = if sector < 2.0 {
            t1
        } else if sector == 2.0 {
            t3
        } else if sector <= 4.0 {
            t0
        } else {
            t2
        };
        let g = if sector < 1.0 {
            t3
        } else if sector <= 2.0 {
            t0
        } else if sector == 3.0 {
            t2
        } else {
            t1
        };
        let r = if !(1.0..=4.0).contains(&sector) {
            t0
        } else if sector == 1.0 {
            t2
        } else if sector <= 3.0 {
            t1
        } else {
            t3
        };
        for (c, x) in [r, g, b].into_iter().enumerate() {
            // `v_trunc` of x * 255, then packed with unsigned saturation (a whole number
            // after `trunc`, which `round_byte` clamps and keeps, in lanes).
            out[c][i] = super::albu_filter::round_byte((x * 255.0).trunc());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opencvs_grey_weighs_with_its_fixed_point_weights_and_rounds_half_up() {
        // 255s stay 255 (9798 + 19235 + 3735 = 32768); red alone: 9798 * 255 / 32768 = 76.2;
        // 4899/9617/1868 >> 14 (OpenCV 4's weights) gives another grey for 186 of 65,536
        // random colours.
        let mut rgb = vec![255, 255, 255, 255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30];
        cv2_gray(&mut rgb);
        // 10, 20, 30: (97980 + 384700 + 112050 + 16384) >> 15 = 18.65 -> 18.
        assert_eq!(
            rgb,
            [255, 255, 255, 76, 76, 76, 150, 150, 150, 29, 29, 29, 18, 18, 18]
        );
    }

    #[test]
    fn an_rgb_shift_adds_each_channels_levels_saturating() {
        let mut rgb = vec![0, 128, 255, 10, 250, 3];
        shift_channels(&mut rgb, [-5, 7, 256]);
        assert_eq!(rgb, [0, 135, 255, 5, 255, 255]);
        // Drawn shifts are truncated toward zero: draws in (-0.9, -0.5) and (0.2, 0.7) add
        // nothing.
        let spec = AlbuRgbShift {
            ranges: [[-0.9, -0.5], [0.2, 0.7], [3.0, 3.5]],
            p: 1.0,
        };
        let mut out = Vec::new();
        spec.draw(&mut CounterRng::for_op(1, 0, 0, 0), (8, 8), &mut out);
        assert_eq!(out, [PixelOp::ChannelShift([0, 0, 3])]);
    }

    #[test]
    fn a_warp_computed_over_a_crop_is_that_crop_of_the_whole_warp() {
        // A 37x70 image (its rows' vector blocks end at 64), every border, a rotation that
        // reads past the edges; crops straddling the blocks' end, at odd offsets, whole.
        let (h, w) = (37, 70);
        let src: Vec<u8> = (0..h * w * 3).map(|i| (i * 7 % 251) as u8).collect();
        let m = albumentations_affine([3.0, -2.0], [4.0, 0.0], [1.1, 0.9], 17.0, [34.5, 18.0]);
        let inverse = opencv_inverse(&m);
        let mut scratch = Vec::new();
        for border in [
            Cv2Border::Constant,
            Cv2Border::Replicate,
            Cv2Border::Reflect,
            Cv2Border::Reflect101,
        ] {
            let mut whole = src.clone();
            warp_affine(&mut whole, h, w, &inverse, border, [9, 8, 7], &mut scratch);
            for (at, size) in [
                ((0, 0), (h, w)),
                ((3, 5), (20, 61)),
                ((1, 59), (30, 11)),
                ((17, 0), (20, 9)),
            ] {
                let mut got = vec![0; size.0 * size.1 * 3];
                let crop = (at, size, &mut got[..]);
                warp_affine_crop(
                    &src,
                    (h, w),
                    &inverse,
                    border,
                    [9, 8, 7],
                    crop.0,
                    crop.1,
                    crop.2,
                    &mut scratch,
                );
                let want: Vec<u8> = whole
                    .chunks(w * 3)
                    .skip(at.0)
                    .take(size.0)
                    .flat_map(|row| &row[at.1 * 3..(at.1 + size.1) * 3])
                    .copied()
                    .collect();
                assert!(got == want, "{border:?}, {size:?} at {at:?}");
            }
        }
    }

    /// albumentations' own bytes for the fixture's cases (`tests/fixtures/albu`).
    #[test]
    fn albu_ops_give_albumentations_bytes() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/albu");
        let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
        let cases: serde_json::Value = serde_json::from_slice(&read("cases.json")).unwrap();
        let (src, expected) = (read("src.rgb"), read("expected.rgb"));
        let dim = |k: &str| cases[k].as_u64().unwrap() as usize;
        let (w, h) = (dim("width"), dim("height"));
        let all = cases["cases"].as_array().unwrap();
        assert_eq!(all.len(), 25);
        let mut scratch = Vec::new();
        for case in all {
            let p: Vec<f64> = case["params"]
                .as_array()
                .map(|a| a.iter().map(|v| v.as_f64().unwrap()).collect())
                .unwrap_or_default();
            let start = case["offset"].as_u64().unwrap() as usize;
            let want = &expected[start..start + case["len"].as_u64().unwrap() as usize];
            // The square cases take the image's first `h` columns.
            let square: Vec<u8> = src
                .chunks(w * 3)
                .flat_map(|row| &row[..h * 3])
                .copied()
                .collect();
            let mut got = src.clone();
            match case["op"].as_str().unwrap() {
                "hsv" => hsv_shift(&mut got, w, p[0], p[1], p[2]),
                "hsv_fused" => {
                    got = read("fused.rgb");
                    hsv_shift(&mut got, 64, p[0], p[1], p[2]);
                }
                "multiply_add" => multiply_add(&mut got, p[0], p[1]),
                "transpose" => {
                    got = square;
                    transpose(&mut got, h);
                }
                "rot90" => {
                    got = square;
                    super::super::geometry::rot90_in_place(&mut got, h, p[0] as u32, &mut scratch);
                }
                "affine" => {
                    let q = &case["params"];
                    let m: Mat3 = std::array::from_fn(|i| {
                        std::array::from_fn(|j| q["matrix"][i][j].as_f64().unwrap())
                    });
                    let border = match q["border"].as_u64().unwrap() {
                        0 => Cv2Border::Constant,
                        1 => Cv2Border::Replicate,
                        2 => Cv2Border::Reflect,
                        4 => Cv2Border::Reflect101,
                        b => panic!("border {b}"),
                    };
                    let fill = std::array::from_fn(|c| q["fill"][c].as_u64().unwrap() as u8);
                    warp_affine(
                        &mut got,
                        h,
                        w,
                        &opencv_inverse(&m),
                        border,
                        fill,
                        &mut scratch,
                    );
                }
                other => panic!("unknown case {other}"),
            }
            let wrong = got.iter().zip(want).filter(|(a, b)| a != b).count();
            assert_eq!(wrong, 0, "{case}: {wrong} bytes differ");
        }
    }

    /// albumentations' matrix for given translation, shear, scale and rotation: the same
    /// float32 map after OpenCV's inversion (the doubles within rounding of numpy's products).
    #[test]
    fn affine_matrix_is_composed_as_albumentations_composes_it() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/albu");
        let cases: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("cases.json")).unwrap()).unwrap();
        let (w, h) = (
            cases["width"].as_f64().unwrap(),
            cases["height"].as_f64().unwrap(),
        );
        let all = cases["compose"].as_array().unwrap();
        assert_eq!(all.len(), 3);
        for case in all {
            let pair = |k: &str| [case[k][0].as_f64().unwrap(), case[k][1].as_f64().unwrap()];
            let want: Mat3 = std::array::from_fn(|i| {
                std::array::from_fn(|j| case["matrix"][i][j].as_f64().unwrap())
            });
            let got = albumentations_affine(
                pair("translate"),
                pair("shear"),
                pair("scale"),
                case["rotate"].as_f64().unwrap(),
                [w / 2.0 - 0.5, h / 2.0 - 0.5],
            );
            for i in 0..3 {
                for j in 0..3 {
                    assert!(
                        (got[i][j] - want[i][j]).abs() <= 1e-12 * want[i][j].abs().max(1.0),
                        "{case}"
                    );
                }
            }
            assert_eq!(opencv_inverse(&got), opencv_inverse(&want), "{case}");
        }
    }

    /// Every RGB colour through `shift_hsv` under three shifts, against albumentations' bytes
    /// written by `tests/fixtures/albu/make_fixture.py --exhaustive DIR` (150 MB, not kept):
    /// `HPULOAD_HSV_TABLES=DIR cargo test --release -- --ignored`.
    #[test]
    #[ignore = "needs the exhaustive tables written by make_fixture.py --exhaustive"]
    fn hsv_shift_gives_albumentations_bytes_for_every_colour() {
        let dir = std::path::PathBuf::from(std::env::var("HPULOAD_HSV_TABLES").unwrap());
        let every: Vec<u8> = (0u32..1 << 24)
            .flat_map(|c| [(c >> 16) as u8, (c >> 8) as u8, c as u8])
            .collect();
        let shifts = [(7.3, 12.6, -3.4), (-150.2, -40.0, 60.0), (0.2, 0.0, 0.0)];
        for (k, (hue, sat, val)) in shifts.into_iter().enumerate() {
            let want = std::fs::read(dir.join(format!("shift{k}.rgb"))).unwrap();
            let mut got = every.clone();
            hsv_shift(&mut got, 256, hue, sat, val);
            let wrong = got
                .chunks(3)
                .zip(want.chunks(3))
                .filter(|(a, b)| a != b)
                .count();
            assert_eq!(wrong, 0, "shift {k}: {wrong} colours differ");
        }
        let want = std::fs::read(dir.join("narrow.rgb")).unwrap();
        let mut got = every[..want.len()].to_vec();
        hsv_shift(&mut got, 250, 7.3, 12.6, -3.4);
        let wrong = got
            .chunks(3)
            .zip(want.chunks(3))
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(wrong, 0, "250 wide: {wrong} colours differ");
    }

    #[test]
    fn channel_dropout_sets_the_drawn_channels_and_never_all_three() {
        let mut px = vec![10u8, 20, 30, 40, 50, 60];
        drop_channels(&mut px, [true, false, true], 7);
        assert_eq!(px, [7, 20, 7, 7, 50, 7]);
        let op = AlbuChannelDropout {
            channel_drop_range: [1, 2],
            fill: 0,
            p: 1.0,
        };
        op.check().unwrap();
        let mut counts = [0usize; 4];
        for i in 0..300 {
            let mut out = Vec::new();
            op.draw(&mut CounterRng::from_key(i), (4, 4), &mut out);
            let [PixelOp::DropChannels { drop, .. }] = out.as_slice() else {
                panic!("{out:?}")
            };
            counts[drop.iter().filter(|&&d| d).count()] += 1;
        }
        assert!(counts[0] == 0 && counts[3] == 0 && counts[1] > 100 && counts[2] > 100);
        let all = AlbuChannelDropout {
            channel_drop_range: [1, 3],
            ..op
        };
        assert!(all.check().is_err());
    }

    #[test]
    fn transpose_swaps_rows_and_columns() {
        // 2x2: (0,0)=1 (0,1)=2 / (1,0)=3 (1,1)=4, each pixel's channels equal.
        let mut rgb: Vec<u8> = [1u8, 2, 3, 4].iter().flat_map(|&v| [v; 3]).collect();
        transpose(&mut rgb, 2);
        let got: Vec<u8> = rgb.chunks(3).map(|p| p[0]).collect();
        assert_eq!(got, [1, 3, 2, 4]);
    }

    #[test]
    fn multiply_add_truncates_and_clips_as_albucores_table() {
        let mut rgb = [0u8, 10, 100, 200, 255, 128];
        multiply_add(&mut rgb, 1.1, -12.75);
        // 10 * 1.1 - 12.75 < 0 -> 0; 100 * 1.1 - 12.75 = 97.25 -> 97; 200 -> 207.25 -> 207.
        assert_eq!(rgb, [0, 0, 97, 207, 255, 128]);
    }

    #[test]
    fn rgb_to_hsv_gives_opencvs_bytes_for_primaries_and_greys() {
        let t = hsv_tables();
        assert_eq!(rgb_to_hsv(t, [255, 0, 0]), [0, 255, 255]);
        assert_eq!(rgb_to_hsv(t, [0, 255, 0]), [60, 255, 255]);
        assert_eq!(rgb_to_hsv(t, [0, 0, 255]), [120, 255, 255]);
        assert_eq!(rgb_to_hsv(t, [77, 77, 77]), [0, 0, 77]);
    }

    #[test]
    fn color_jitter_refuses_negative_factors_and_hue_past_half_a_turn_and_draws_four_steps() {
        let spec = AlbuColorJitter {
            brightness: [0.5, 1.5],
            contrast: [0.8, 1.2],
            saturation: [0.0, 2.0],
            hue: [-0.1, 0.2],
            p: 1.0,
        };
        assert!(spec.check().is_ok());
        let bad = [
            AlbuColorJitter {
                contrast: [-0.1, 1.0],
                ..spec
            },
            AlbuColorJitter {
                hue: [-0.6, 0.1],
                ..spec
            },
            AlbuColorJitter {
                saturation: [1.2, 0.8],
                ..spec
            },
        ];
        assert!(bad.iter().all(|b| b.check().is_err()));
        let mut firsts = [0usize; 4];
        for i in 0..400 {
            let mut ops = Vec::new();
            spec.draw(&mut CounterRng::for_op(1, 0, i, 0), (8, 8), &mut ops);
            assert_eq!(ops.len(), 4, "{ops:?}");
            let step = |op: &PixelOp| match op {
                PixelOp::MultiplyAdd { alpha, beta } => {
                    assert!((0.5..1.5).contains(alpha) && *beta == 0.0);
                    0
                }
                PixelOp::Cv2Contrast(c) => {
                    assert!((0.8..1.2).contains(c));
                    1
                }
                PixelOp::Cv2Saturation(s) => {
                    assert!((0.0..2.0).contains(s));
                    2
                }
                PixelOp::HsvShift { hue, sat, val } => {
                    assert!((-18.0..36.0).contains(hue) && *sat == 0.0 && *val == 0.0);
                    3
                }
                other => panic!("{other:?}"),
            };
            let mut order: Vec<usize> = ops.iter().map(step).collect();
            firsts[order[0]] += 1;
            order.sort_unstable();
            assert_eq!(order, [0, 1, 2, 3]);
        }
        assert!(firsts.iter().all(|&n| n > 60), "{firsts:?}");
    }

    #[test]
    fn contrast_at_zero_fills_the_mean_grey_rounded_and_saturation_at_zero_is_the_grey() {
        // Greys 50 and 101 (OpenCV's weights): mean 75.5, rounded half up to 76.
        let mut rgb = vec![50, 50, 50, 101, 101, 101];
        cv2_contrast(&mut rgb, 0.0);
        assert_eq!(rgb, [76; 6]);
        let mut rgb = vec![200, 10, 30, 0, 255, 0];
        let mut grey = rgb.clone();
        cv2_gray(&mut grey);
        cv2_saturation(&mut rgb, 0.0);
        assert_eq!(rgb, grey);
    }

    #[test]
    fn coarse_dropout_draws_holes_inside_the_image_in_the_ranges() {
        let spec = CoarseDropout {
            num_holes_range: [2, 4],
            hole_height_range: [0.1, 0.3],
            hole_width_range: [0.2, 0.25],
            fill: [0.5; 3],
            p: 1.0,
        };
        let mut counts = [0usize; 5];
        for i in 0..400 {
            let mut rng = CounterRng::for_op(3, 0, i, 0);
            let mut boxes = Vec::new();
            spec.draw_boxes(&mut rng, 100, 50, &mut boxes);
            counts[boxes.len()] += 1;
            for b in &boxes {
                assert!((10..30).contains(&b.height), "{b:?}");
                assert!((10..=12).contains(&b.width), "{b:?}");
                assert!(b.top + b.height <= 100 && b.left + b.width <= 50, "{b:?}");
            }
        }
        assert_eq!(counts[0] + counts[1], 0);
        assert!(counts[2..].iter().all(|&c| c > 100), "{counts:?}");
    }

    #[test]
    fn coarse_dropout_reads_sizes_as_pixels_when_the_range_reaches_one() {
        let spec = CoarseDropout {
            num_holes_range: [1, 1],
            hole_height_range: [3.0, 5.0],
            hole_width_range: [2.0, 90.0],
            fill: [0.0; 3],
            p: 1.0,
        };
        for i in 0..200 {
            let mut rng = CounterRng::for_op(1, 0, i, 0);
            let mut boxes = Vec::new();
            spec.draw_boxes(&mut rng, 40, 30, &mut boxes);
            let b = boxes[0];
            assert!(
                (3..=5).contains(&b.height) && (2..=30).contains(&b.width),
                "{b:?}"
            );
        }
    }
}
