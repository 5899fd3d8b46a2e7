//! `RandomErasing` (torchvision's, and timm's with several boxes): boxes drawn per sample and
//! written into the output slot after normalize and cast, as torchvision erases the normalized
//! tensor.

use serde::{Deserialize, Serialize};

use super::albu::CoarseDropout;
use super::error::PipelineError;
use super::geometry::round_half_even;
use super::pixel::PixelOp;
use super::spec::{half, probability, OpKind, OpSpec};
use crate::dtype::Dtype;
use crate::rng::CounterRng;

/// What an erased box is filled with.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EraseValue {
    /// One value per channel (torchvision's `value=0` or a tuple; timm's `mode='const'`), in
    /// the output's units (after normalize).
    Constant([f32; 3]),
    /// Random values.
    Random(RandomFill),
}

/// Random fills.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RandomFill {
    /// A standard normal value per pixel and channel (torchvision's `value="random"`, timm's
    /// `mode='pixel'`).
    Random,
    /// A standard normal value per channel for the whole box (timm's `mode='rand'`).
    RandomPerChannel,
}

/// One box of one sample, resolved.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct EraseBox {
    /// Top row.
    pub top: u32,
    /// Left column.
    pub left: u32,
    /// Rows.
    pub height: u32,
    /// Columns.
    pub width: u32,
    /// The fill: constant per channel, or per pixel from `noise`'s generator.
    pub value: [f32; 3],
    /// For per-pixel noise: the key of the generator (values are standard normal).
    #[serde(skip)]
    pub noise: Option<u64>,
}

/// `RandomErasing(p, scale, ratio, value)` after normalize (timm's with `count` boxes).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomErasing {
    /// Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
    /// Area range as a fraction of the image. Default `[0.02, 0.33]`.
    #[serde(default = "erase_scale")]
    pub scale: [f64; 2],
    /// Aspect ratio range (height / width). Default `[0.3, 3.3]`.
    #[serde(default = "erase_ratio")]
    pub ratio: [f64; 2],
    /// Default 0 in every channel.
    #[serde(default = "erase_zero")]
    pub value: EraseValue,
    /// Number of boxes, uniform in `[min, max]`, splitting the drawn area (timm's
    /// `min_count`, `max_count`: each box gets `1 / count` of the drawn area). Default
    /// `[1, 1]`.
    #[serde(default = "one_box")]
    pub count: [u32; 2],
    /// Draw the probability as timm does (`random() > p` skips) rather than torchvision
    /// (`rand() >= p`); the distributions are the same.
    #[serde(default)]
    pub timm: bool,
}

fn erase_scale() -> [f64; 2] {
    [0.02, 0.33]
}
fn erase_ratio() -> [f64; 2] {
    [0.3, 3.3]
}
fn erase_zero() -> EraseValue {
    EraseValue::Constant([0.0; 3])
}
fn one_box() -> [u32; 2] {
    [1, 1]
}

impl Default for RandomErasing {
    /// torchvision's defaults.
    fn default() -> Self {
        Self {
            p: half(),
            scale: erase_scale(),
            ratio: erase_ratio(),
            value: erase_zero(),
            count: one_box(),
            timm: false,
        }
    }
}

impl OpSpec for RandomErasing {
    fn kind(&self) -> OpKind {
        OpKind::Erase
    }
    fn check(&self) -> Result<(), PipelineError> {
        let Self {
            p,
            scale,
            ratio,
            count,
            ..
        } = *self;
        probability(p, "random_erasing")?;
        if !(0.0 <= scale[0] && scale[0] <= scale[1] && scale[1] <= 1.0) {
            return Err(PipelineError::Parameter(format!(
                "random_erasing scale {scale:?} must satisfy 0 <= min <= max <= 1"
            )));
        }
        if !(0.0 < ratio[0] && ratio[0] <= ratio[1]) {
            return Err(PipelineError::Parameter(format!(
                "random_erasing ratio {ratio:?} must satisfy 0 < min <= max"
            )));
        }
        if !(1 <= count[0] && count[0] <= count[1]) {
            return Err(PipelineError::Parameter(format!(
                "random_erasing count {count:?} must satisfy 1 <= min <= max"
            )));
        }
        Ok(())
    }
    /// Erasing: the plan draws the boxes at the output ([`RandomErasing::draw_boxes`]).
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

/// A standard normal draw (Box-Muller).
pub(crate) fn normal(rng: &mut CounterRng) -> f64 {
    let u1 = 1.0 - rng.uniform(); // (0, 1]
    let u2 = rng.uniform();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Standard normal draws for noise fills, both of each Box-Muller pair (one logarithm, square
/// root and sine-cosine per two values).
struct Normals {
    rng: CounterRng,
    spare: Option<f32>,
}

impl Normals {
    fn new(rng: CounterRng) -> Self {
        Self { rng, spare: None }
    }

    fn next_f32(&mut self) -> f32 {
        if let Some(v) = self.spare.take() {
            return v;
        }
        let u1 = 1.0 - self.rng.uniform(); // (0, 1]
        let u2 = self.rng.uniform();
        let r = (-2.0 * u1.ln()).sqrt();
        let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
        self.spare = Some((r * s) as f32);
        (r * c) as f32
    }
}

/// A step that erases boxes of the written output: torchvision's (and timm's) random erasing,
/// or albumentations' coarse dropout.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Eraser {
    /// `random_erasing`.
    Boxes(RandomErasing),
    /// `coarse_dropout`.
    Holes(CoarseDropout),
}

impl Eraser {
    /// Whether the boxes get random values (which a u8 output cannot hold).
    pub(crate) fn fills_randomly(&self) -> bool {
        matches!(self, Self::Boxes(e) if e.fills_randomly())
    }

    /// Draws the step's boxes for an `h`x`w` output into `out`.
    pub(crate) fn draw_boxes(&self, rng: &mut CounterRng, h: u32, w: u32, out: &mut Vec<EraseBox>) {
        match self {
            Self::Boxes(e) => e.draw_boxes(rng, h, w, out),
            Self::Holes(d) => d.draw_boxes(rng, h, w, out),
        }
    }
}

impl RandomErasing {
    /// Whether the boxes get random values (which a u8 output cannot hold).
    pub(crate) fn fills_randomly(&self) -> bool {
        matches!(self.value, EraseValue::Random(_))
    }

    /// Draws this step's boxes for an `h`x`w` output into `out`, with torchvision's
    /// `RandomErasing.get_params` (10 tries per box, `h = round(sqrt(area * ratio))`, `w =
    /// round(sqrt(area / ratio))`, strictly inside the image; no box when all tries fail).
    pub(crate) fn draw_boxes(&self, rng: &mut CounterRng, h: u32, w: u32, out: &mut Vec<EraseBox>) {
        let skip = if self.timm {
            rng.uniform() > self.p
        } else {
            rng.uniform() >= self.p
        };
        if skip {
            return;
        }
        let count = if self.count[0] == self.count[1] {
            self.count[0]
        } else {
            self.count[0] + rng.below(u64::from(self.count[1] - self.count[0]) + 1) as u32
        };
        let area = f64::from(h) * f64::from(w);
        let (log_lo, log_hi) = (self.ratio[0].ln(), self.ratio[1].ln());
        for _ in 0..count {
            for _ in 0..10 {
                let target = area * rng.uniform_in(self.scale[0], self.scale[1]) / f64::from(count);
                let aspect = rng.uniform_in(log_lo, log_hi).exp();
                let bh = round_half_even((target * aspect).sqrt());
                let bw = round_half_even((target / aspect).sqrt());
                if !(bh < f64::from(h) && bw < f64::from(w)) {
                    continue;
                }
                let (bh, bw) = (bh as u32, bw as u32);
                let (value, noise) = match self.value {
                    EraseValue::Constant(v) => (v, None),
                    EraseValue::Random(RandomFill::RandomPerChannel) => {
                        (std::array::from_fn(|_| normal(rng) as f32), None)
                    }
                    EraseValue::Random(RandomFill::Random) => ([0.0; 3], Some(rng.next_u64())),
                };
                let top = rng.below(u64::from(h - bh) + 1) as u32;
                let left = rng.below(u64::from(w - bw) + 1) as u32;
                out.push(EraseBox {
                    top,
                    left,
                    height: bh,
                    width: bw,
                    value,
                    noise,
                });
                break;
            }
        }
    }
}

/// How an output slot holds its image's channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotLayout {
    /// Three planes (NCHW).
    Planar,
    /// Three values per pixel (NHWC).
    Interleaved,
    /// One plane: a grey image's single channel.
    Grey,
}

impl SlotLayout {
    fn channels(self) -> usize {
        match self {
            Self::Grey => 1,
            Self::Planar | Self::Interleaved => 3,
        }
    }
}

/// Writes `b` into an output slot of `h`x`w` pixels in `dtype` and `layout`.
pub(crate) fn erase(
    slot: &mut [u8],
    dtype: Dtype,
    layout: SlotLayout,
    h: usize,
    w: usize,
    b: &EraseBox,
) {
    match dtype {
        Dtype::F32 => fill_typed::<u32>(slot, layout, h, w, b, f32::to_bits),
        Dtype::F16 => {
            fill_typed::<u16>(slot, layout, h, w, b, |x| half::f16::from_f32(x).to_bits())
        }
        Dtype::Bf16 => {
            fill_typed::<u16>(slot, layout, h, w, b, |x| half::bf16::from_f32(x).to_bits())
        }
        // Assigning floats into a uint8 tensor truncates them.
        Dtype::U8 => fill_typed::<u8>(slot, layout, h, w, b, |x| x.clamp(0.0, 255.0) as u8),
        Dtype::I64 => unreachable!("i64 is a label type, not an image dtype"),
    }
}

fn fill_typed<T: bytemuck::Pod>(
    slot: &mut [u8],
    layout: SlotLayout,
    h: usize,
    w: usize,
    b: &EraseBox,
    cast: impl Fn(f32) -> T,
) {
    let out: &mut [T] = bytemuck::cast_slice_mut(slot);
    let mut noise = b.noise.map(|key| Normals::new(CounterRng::from_key(key)));
    let (top, left) = (b.top as usize, b.left as usize);
    let (bh, bw) = (b.height as usize, b.width as usize);
    // Channel-major, as torchvision draws its `[c, h, w]` noise.
    for c in 0..layout.channels() {
        let constant = cast(b.value[c]);
        for y in top..top + bh {
            for x in left..left + bw {
                let v = match &mut noise {
                    Some(normals) => cast(normals.next_f32()),
                    None => constant,
                };
                let at = match layout {
                    SlotLayout::Planar | SlotLayout::Grey => (c * h + y) * w + x,
                    SlotLayout::Interleaved => (y * w + x) * 3 + c,
                };
                out[at] = v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    #[test]
    fn noise_fill_draws_are_standard_normal() {
        let mut n = Normals::new(CounterRng::new(7, 0, 0, Stream::Crop));
        let xs: Vec<f64> = (0..100_000).map(|_| f64::from(n.next_f32())).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        let within_one = xs.iter().filter(|x| x.abs() < 1.0).count() as f64 / xs.len() as f64;
        assert!(
            mean.abs() < 0.01 && (var - 1.0).abs() < 0.02,
            "{mean} {var}"
        );
        assert!((within_one - 0.6827).abs() < 0.005, "{within_one}");
    }

    #[test]
    fn boxes_stay_strictly_inside_and_follow_p() {
        let spec = RandomErasing::default();
        let mut erased = 0;
        for i in 0..4000 {
            let mut rng = CounterRng::new(3, 0, i, Stream::Crop);
            let mut boxes = Vec::new();
            spec.draw_boxes(&mut rng, 176, 176, &mut boxes);
            for b in &boxes {
                assert!(b.top + b.height <= 176 && b.left + b.width <= 176);
                assert!(b.height < 176 && b.width < 176);
            }
            erased += boxes.len();
        }
        assert!((1800..2200).contains(&erased), "{erased}");
    }

    #[test]
    fn erase_writes_the_value_in_both_layouts() {
        let b = EraseBox {
            top: 1,
            left: 2,
            height: 1,
            width: 1,
            value: [1.0, 2.0, 3.0],
            noise: None,
        };
        let mut slot = vec![0u8; 4 * 4 * 3 * 4];
        erase(&mut slot, Dtype::F32, SlotLayout::Planar, 4, 4, &b);
        let f: &[f32] = bytemuck::cast_slice(&slot);
        assert_eq!((f[6], f[16 + 6], f[32 + 6]), (1.0, 2.0, 3.0));
        assert_eq!(f.iter().filter(|&&v| v != 0.0).count(), 3);
        let mut slot = vec![0u8; 4 * 4 * 3 * 4];
        erase(&mut slot, Dtype::F32, SlotLayout::Interleaved, 4, 4, &b);
        let f: &[f32] = bytemuck::cast_slice(&slot);
        assert_eq!(&f[18..21], &[1.0, 2.0, 3.0]);
    }

    #[test]
    fn normal_draws_have_unit_variance() {
        let mut rng = CounterRng::new(1, 2, 3, Stream::Crop);
        let xs: Vec<f64> = (0..100_000).map(|_| normal(&mut rng)).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!(
            mean.abs() < 0.02 && (var - 1.0).abs() < 0.02,
            "{mean} {var}"
        );
    }
}
