//! albumentations' tone ops on a uint8 RGB image, as albumentations 2 draws and computes them:
//!
//! - `Solarize(threshold_range, p)`: a threshold drawn uniformly, every value `i >= threshold
//!   * 255` (compared in f64) inverted: the same as inverting from the first whole level at or
//!   above it, which is what the op carries (`PixelOp::Solarize`, exact in f32);
//! - `Posterize(num_bits, p)`: the bits kept drawn as `randint(lo, hi)`, the rest cleared
//!   (`PixelOp::Posterize`);
//! - `Equalize(mode, by_channels=True, p)`: each channel equalized, by OpenCV's
//!   `equalizeHist` (`cv`: from its first non-empty bin, `cumulative * (255 / rest)` in
//!   float32, rounded half to even) or by albumentations' own Pillow-like table (`pil`, which
//!   counts each value's own bin, where Pillow counts those below it).

use serde::{Deserialize, Serialize};

use super::albu::ranges;
use super::error::PipelineError;
use super::pixel::PixelOp;
use super::spec::{coin, half, probability, OpKind, OpSpec};
use crate::rng::CounterRng;

/// albumentations' `Solarize(threshold_range, p)` of a uint8 image.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuSolarize {
    /// The threshold's range, fractions of 255 in `[0, 1]`. Default `[0.5, 0.5]`.
    #[serde(default = "halves")]
    pub threshold_range: [f64; 2],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn halves() -> [f64; 2] {
    [0.5, 0.5]
}

impl OpSpec for AlbuSolarize {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_solarize")?;
        ranges(
            "albu_solarize",
            &[("threshold_range", self.threshold_range)],
        )?;
        let [lo, hi] = self.threshold_range;
        if lo < 0.0 || hi > 1.0 {
            return Err(PipelineError::Parameter(format!(
                "albu_solarize threshold_range {:?} must lie in [0, 1]",
                self.threshold_range
            )));
        }
        Ok(())
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if !coin(rng, self.p) {
            return;
        }
        let [lo, hi] = self.threshold_range;
        out.push(PixelOp::Solarize(first_level_at(rng.uniform_in(lo, hi))));
    }
}

/// The first whole level `i` with `i >= threshold * 255` (in f64): inverting from it inverts
/// what albumentations' table inverts.
fn first_level_at(threshold: f64) -> f64 {
    (threshold * 255.0).ceil()
}

/// albumentations' `Posterize(num_bits, p)` with one range for every channel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuPosterize {
    /// The range of the bits kept (inclusive), 0 to 8. Default `[4, 4]`.
    #[serde(default = "four_bits")]
    pub num_bits: [u8; 2],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn four_bits() -> [u8; 2] {
    [4, 4]
}

impl OpSpec for AlbuPosterize {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_posterize")?;
        let [lo, hi] = self.num_bits;
        if lo > hi || hi > 8 {
            return Err(PipelineError::Parameter(format!(
                "albu_posterize num_bits {:?} must be a range within 0..=8",
                self.num_bits
            )));
        }
        Ok(())
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if !coin(rng, self.p) {
            return;
        }
        let [lo, hi] = self.num_bits;
        let bits = rng.int_in(i64::from(lo), i64::from(hi)) as u8;
        out.push(PixelOp::Posterize(bits));
    }
}

/// How [`AlbuEqualize`] builds each channel's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EqualizeMode {
    /// OpenCV's `equalizeHist`.
    Cv,
    /// albumentations' Pillow-like table.
    Pil,
}

fn cv() -> EqualizeMode {
    EqualizeMode::Cv
}

/// albumentations' `Equalize(mode, by_channels=True, p)` without a mask.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuEqualize {
    /// Default `cv`.
    #[serde(default = "cv")]
    pub mode: EqualizeMode,
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

impl OpSpec for AlbuEqualize {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_equalize")
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            out.push(PixelOp::AlbuEqualize(self.mode));
        }
    }
}

/// OpenCV's `equalizeHist` table of a channel's histogram `h` over `pixels`: values from the
/// first non-empty bin on map to `round(cumulative above it * 255 / (pixels - its count))` in
/// float32 (half to even); a channel of one value becomes that value (the table is then the
/// identity wherever there are pixels).
pub(crate) fn cv2_table(h: &[u32; 256], pixels: u32) -> Option<[u8; 256]> {
    let first = h.iter().position(|&n| n > 0)?;
    if h[first] == pixels {
        return None;
    }
    let scale = 255.0f32 / (pixels - h[first]) as f32;
    let mut lut = [0u8; 256];
    let mut sum = 0u32;
    for v in first + 1..256 {
        sum += h[v];
        // `saturate_cast<uchar>`: rounded half to even, within [0, 255].
        lut[v] = (sum as f32 * scale).round_ties_even().clamp(0.0, 255.0) as u8;
    }
    Some(lut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solarize_inverts_from_the_first_level_at_the_threshold() {
        // 0.5 * 255 = 127.5: 128 on; a threshold on a level includes it.
        assert_eq!(first_level_at(0.5), 128.0);
        assert_eq!(first_level_at(100.0 / 255.0), 100.0);
        assert_eq!(first_level_at(0.0), 0.0);
        assert_eq!(first_level_at(1.0), 255.0);
    }

    #[test]
    fn opencvs_equalization_starts_at_the_first_bin_and_rounds_half_to_even() {
        // Two values, 10 (3 pixels) and 20 (1 pixel): 20 maps to 1 * 255 / 1.
        let mut h = [0u32; 256];
        h[10] = 3;
        h[20] = 1;
        let t = cv2_table(&h, 4).unwrap();
        assert_eq!((t[10], t[20]), (0, 255));
        // Three values over 6 pixels, 2 at the first: 1 * 255 / 4 = 63.75 -> 64, then 255.
        let mut h = [0u32; 256];
        (h[0], h[1], h[2]) = (2, 1, 3);
        let t = cv2_table(&h, 6).unwrap();
        assert_eq!((t[0], t[1], t[2]), (0, 64, 255));
        // One value: left as it is.
        let mut h = [0u32; 256];
        h[77] = 9;
        assert_eq!(cv2_table(&h, 9), None);
    }

    #[test]
    fn tone_ops_refuse_ranges_outside_theirs() {
        for bad in [[-0.1, 0.5], [0.6, 0.5], [0.5, 1.2]] {
            let op = AlbuSolarize {
                threshold_range: bad,
                p: 1.0,
            };
            assert!(op.check().is_err(), "{bad:?}");
        }
        for bad in [[5, 4], [2, 9]] {
            let op = AlbuPosterize {
                num_bits: bad,
                p: 1.0,
            };
            assert!(op.check().is_err(), "{bad:?}");
        }
        let mut out = Vec::new();
        let op = AlbuPosterize {
            num_bits: [2, 5],
            p: 1.0,
        };
        for i in 0..400 {
            op.draw(&mut CounterRng::from_key(i), (4, 4), &mut out);
        }
        let mut seen = [false; 9];
        for o in &out {
            let PixelOp::Posterize(b) = o else {
                panic!("{o:?}")
            };
            seen[usize::from(*b)] = true;
        }
        assert_eq!(
            seen,
            [false, false, true, true, true, true, false, false, false]
        );
    }
}
