//! timm's own `RandAugment` (what `rand_augment_transform("rand-m9-mstd0.5-inc1")` and the other
//! `rand-*` strings build, and `create_transform(auto_augment=...)` puts in a training
//! transform), with timm's sampling: `num_layers` ops drawn with replacement (or without, by
//! weight), each applied with probability `prob`, its magnitude optionally drawn from a normal
//! (or uniform) around `magnitude` and clamped, then mapped to the op's argument by timm's
//! level functions, with a random sign where timm negates. The ops run with Pillow's arithmetic
//! (`pil/`), as timm runs them on PIL images.

use serde::{Deserialize, Serialize};

use super::autoaugment::{dirichlet, gamma, minus_one, three, two};
use super::error::PipelineError;
use super::geometry::Interpolation;
use super::pil::{self, Enhance, Filter};
use super::pixel::{AugMixPlan, PixelOp};
use super::spec::{half, one, probability, OpKind, OpSpec};
use crate::rng::CounterRng;

/// An op of timm's auto-augment vocabulary (timm's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum TimmOp {
    AutoContrast,
    Equalize,
    Invert,
    Rotate,
    Posterize,
    PosterizeIncreasing,
    PosterizeOriginal,
    Solarize,
    SolarizeIncreasing,
    SolarizeAdd,
    Color,
    ColorIncreasing,
    Contrast,
    ContrastIncreasing,
    Brightness,
    BrightnessIncreasing,
    Sharpness,
    SharpnessIncreasing,
    ShearX,
    ShearY,
    TranslateX,
    TranslateY,
    TranslateXRel,
    TranslateYRel,
    /// Pillow's `ImageEnhance.Color` toward grey (the `3a` policy's).
    Desaturate,
    /// Pillow's Gaussian blur of a radius set by the magnitude.
    GaussianBlur,
    /// Pillow's Gaussian blur of a radius drawn up to one set by the magnitude (`3a`'s).
    GaussianBlurRand,
}

impl TimmOp {
    /// Whether the op moves pixels (a rotation, shear or translation), which boxes would have
    /// to follow. Exhaustive: a new op must say.
    pub fn moves_pixels(self) -> bool {
        match self {
            Self::Rotate
            | Self::ShearX
            | Self::ShearY
            | Self::TranslateX
            | Self::TranslateY
            | Self::TranslateXRel
            | Self::TranslateYRel => true,
            Self::AutoContrast
            | Self::Equalize
            | Self::Invert
            | Self::Posterize
            | Self::PosterizeIncreasing
            | Self::PosterizeOriginal
            | Self::Solarize
            | Self::SolarizeIncreasing
            | Self::SolarizeAdd
            | Self::Color
            | Self::ColorIncreasing
            | Self::Contrast
            | Self::ContrastIncreasing
            | Self::Brightness
            | Self::BrightnessIncreasing
            | Self::Sharpness
            | Self::SharpnessIncreasing
            | Self::Desaturate
            | Self::GaussianBlur
            | Self::GaussianBlurRand => false,
        }
    }
}

/// The settings timm's `AugmentOp`s share (its `hparams` and the ops' keyword arguments), the
/// `hparams` table of the `timm_*` ops.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Hparams {
    /// Standard deviation of the magnitude's normal noise (`mstd`). Default 0.
    pub magnitude_std: f64,
    /// The magnitude drawn uniformly from `[0, magnitude]` (`mstd` of infinity).
    pub magnitude_uniform: bool,
    /// Upper clamp of the magnitude (`mmax`). Default 10.
    pub magnitude_max: Option<f64>,
    /// The warps' fill (timm's `img_mean`). Default 128 grey.
    pub fill: [u8; 3],
    /// The warps' resampling, one drawn per warp. Default bilinear or bicubic.
    pub interpolation: Vec<Interpolation>,
    /// `TranslateXRel`/`YRel` at magnitude 10, as a fraction of the size. Default 0.45.
    pub translate_pct: f64,
    /// `TranslateX`/`Y` at magnitude 10, in pixels. Default 250.
    pub translate_const: f64,
}

impl Default for Hparams {
    fn default() -> Self {
        Self {
            magnitude_std: 0.0,
            magnitude_uniform: false,
            magnitude_max: None,
            fill: [128; 3],
            interpolation: vec![Interpolation::Bilinear, Interpolation::Bicubic],
            translate_pct: 0.45,
            translate_const: 250.0,
        }
    }
}

impl Hparams {
    /// Finite settings, a non-negative noise and clamp, and Pillow's warp filters.
    pub(crate) fn check(&self) -> Result<(), PipelineError> {
        let finite = [self.magnitude_std, self.translate_pct, self.translate_const];
        if finite.iter().any(|v| !v.is_finite()) || self.magnitude_std < 0.0 {
            return Err(PipelineError::Parameter(
                "magnitude_std (>= 0) and the translations must be finite".into(),
            ));
        }
        if self
            .magnitude_max
            .is_some_and(|m| !(m.is_finite() && m >= 0.0))
        {
            return Err(PipelineError::Parameter(
                "magnitude_max must be finite and >= 0".into(),
            ));
        }
        let pillow =
            |i: &Interpolation| matches!(i, Interpolation::Bilinear | Interpolation::Bicubic);
        if self.interpolation.is_empty() || !self.interpolation.iter().all(pillow) {
            return Err(PipelineError::Parameter(format!(
                "warps with bilinear or bicubic (Pillow's filters), not {:?}",
                self.interpolation
            )));
        }
        Ok(())
    }
}

/// A timm `RandAugment`: its ops, how many are drawn and how.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RandAugmentSpec<'a> {
    pub ops: &'a [TimmOp],
    pub num_layers: u32,
    /// Choice weights (then drawn without replacement), or uniform with replacement.
    pub weights: Option<&'a [f64]>,
    pub prob: f64,
    pub magnitude: f64,
    pub hparams: &'a Hparams,
}

/// One op of a timm `AutoAugment` sub-policy: the op, its probability and magnitude.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyOp {
    /// timm's op name.
    pub op: TimmOp,
    /// Probability of applying it.
    pub prob: f64,
    /// Its magnitude (timm's `M`, 0 to 10).
    pub magnitude: f64,
}

/// A timm `AugMixAugment`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AugMixSpec<'a> {
    pub ops: &'a [TimmOp],
    pub magnitude: f64,
    pub width: u32,
    /// Ops per chain; not positive: 1 to 3 at random per chain.
    pub depth: i32,
    pub alpha: f64,
    /// `_apply_blended` (`augmix-...-b1`) rather than `_apply_basic`.
    pub blended: bool,
}

/// timm's own `RandAugment` (`rand_augment_transform("rand-m9-mstd0.5-inc1")` and the other
/// `rand-*` strings), with timm's sampling and Pillow's arithmetic: `num_layers` of `ops`
/// (with replacement, or by `weights` without), each applied with probability `prob` at a
/// magnitude around `magnitude`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimmRandAugment {
    /// timm's op names (`_RAND_TRANSFORMS`, `_RAND_INCREASING_TRANSFORMS` or a subset).
    pub ops: Vec<TimmOp>,
    /// Ops per image. Default 2.
    #[serde(default = "two")]
    pub num_layers: u32,
    /// Choice weights (one per op; drawn without replacement), or none: uniform.
    #[serde(default)]
    pub weights: Option<Vec<f64>>,
    /// Probability of applying each drawn op. Default 0.5.
    #[serde(default = "half")]
    pub prob: f64,
    /// timm's `m`, in `[0, magnitude_max]` (default max 10).
    pub magnitude: f64,
    /// The settings the ops share (magnitude noise and clamp, warp fill and filters,
    /// translations), as timm's `hparams`.
    #[serde(default)]
    pub hparams: Hparams,
}

/// timm's own `AutoAugment` (`auto_augment_transform("original-mstd0.5")`, `v0`, `v0r`,
/// `originalr`): one sub-policy drawn uniformly, its ops run in order, each with its own
/// probability and magnitude, with timm's sampling and Pillow's arithmetic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimmAutoAugment {
    /// The sub-policies.
    pub policy: Vec<Vec<PolicyOp>>,
    /// The settings the ops share (magnitude noise and clamp, warp fill and filters,
    /// translations), as timm's `hparams`.
    #[serde(default)]
    pub hparams: Hparams,
}

/// timm's own AugMix (`augment_and_mix_transform("augmix-m5-w4-d2")`): Dirichlet(`alpha`)
/// weights over `width` chains of `depth` ops (or 1 to 3) drawn from `ops` at `magnitude`,
/// mixed in f32, then blended with the original by a Beta(`alpha`, `alpha`) weight, with
/// Pillow's arithmetic; or, `blended` (`augmix-...-b1`), each chain blended into the image in
/// turn by a weight derived from those two draws.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimmAugMix {
    /// timm's op names (`_AUGMIX_TRANSFORMS` or a subset).
    pub ops: Vec<TimmOp>,
    /// timm's `m` (severity). Default 3.
    #[serde(default = "three_f")]
    pub magnitude: f64,
    /// Chains. Default 3.
    #[serde(default = "three")]
    pub width: u32,
    /// Ops per chain; -1 (default): 1 to 3 at random.
    #[serde(default = "minus_one")]
    pub depth: i32,
    /// Dirichlet and Beta concentration. Default 1.
    #[serde(default = "one")]
    pub alpha: f64,
    /// timm's `blended=True` (the `b1` of `augmix-...-b1`): chains blended in bytes in turn.
    #[serde(default)]
    pub blended: bool,
    /// The settings the ops share (magnitude noise and clamp, warp fill and filters,
    /// translations), as timm's `hparams`.
    #[serde(default)]
    pub hparams: Hparams,
}

fn three_f() -> f64 {
    3.0
}

/// A pixel op that moves pixels when any of `ops` does.
fn kind_of(mut ops: impl Iterator<Item = TimmOp>) -> OpKind {
    if ops.any(TimmOp::moves_pixels) {
        OpKind::MovingPixel
    } else {
        OpKind::Pixel
    }
}

/// The first of `ops` that moves pixels, by timm's name.
fn mover(mut ops: impl Iterator<Item = TimmOp>) -> Option<String> {
    ops.find(|op| op.moves_pixels()).map(|op| format!("{op:?}"))
}

impl OpSpec for TimmRandAugment {
    fn kind(&self) -> OpKind {
        kind_of(self.ops.iter().copied())
    }
    fn check(&self) -> Result<(), PipelineError> {
        let name = "timm_rand_augment";
        probability(self.prob, name)?;
        if self.ops.is_empty() || self.num_layers == 0 {
            return Err(PipelineError::Parameter(format!(
                "{name} needs at least one op and one layer"
            )));
        }
        if let Some(w) = &self.weights {
            if w.len() != self.ops.len() || w.iter().any(|&x| !(x >= 0.0 && x.is_finite())) {
                return Err(PipelineError::Parameter(format!(
                    "{name} weights must be one non-negative number per op"
                )));
            }
            let weighted = w.iter().filter(|&&x| x > 0.0).count();
            if weighted < (self.num_layers as usize).min(w.len()) {
                return Err(PipelineError::Parameter(format!(
                    "{name} draws {} ops without replacement but only {weighted} have weight",
                    self.num_layers
                )));
            }
        }
        if !self.magnitude.is_finite() {
            return Err(PipelineError::Parameter(format!(
                "{name} magnitude must be finite"
            )));
        }
        self.hparams
            .check()
            .map_err(|e| PipelineError::Parameter(format!("{name} {e}")))
    }
    fn draw(&self, rng: &mut CounterRng, size: (u32, u32), out: &mut Vec<PixelOp>) {
        let spec = RandAugmentSpec {
            ops: &self.ops,
            num_layers: self.num_layers,
            weights: self.weights.as_deref(),
            prob: self.prob,
            magnitude: self.magnitude,
            hparams: &self.hparams,
        };
        rand_augment(rng, &spec, size, out);
    }
    fn moving_inner(&self) -> Option<String> {
        mover(self.ops.iter().copied())
    }
}

impl OpSpec for TimmAutoAugment {
    fn kind(&self) -> OpKind {
        kind_of(self.policy.iter().flatten().map(|p| p.op))
    }
    fn check(&self) -> Result<(), PipelineError> {
        let name = "timm_auto_augment";
        if self.policy.is_empty() || self.policy.iter().any(Vec::is_empty) {
            return Err(PipelineError::Parameter(format!(
                "{name} needs sub-policies of at least one op"
            )));
        }
        for p in self.policy.iter().flatten() {
            probability(p.prob, name)?;
            if !p.magnitude.is_finite() {
                return Err(PipelineError::Parameter(format!(
                    "{name} magnitude {} must be finite",
                    p.magnitude
                )));
            }
        }
        self.hparams
            .check()
            .map_err(|e| PipelineError::Parameter(format!("{name} {e}")))
    }
    fn draw(&self, rng: &mut CounterRng, size: (u32, u32), out: &mut Vec<PixelOp>) {
        auto_augment(rng, &self.policy, &self.hparams, size, out);
    }
    fn moving_inner(&self) -> Option<String> {
        mover(self.policy.iter().flatten().map(|p| p.op))
    }
}

impl OpSpec for TimmAugMix {
    fn kind(&self) -> OpKind {
        kind_of(self.ops.iter().copied())
    }
    fn check(&self) -> Result<(), PipelineError> {
        let name = "timm_aug_mix";
        if self.ops.is_empty() || self.width == 0 || !(self.alpha.is_finite() && self.alpha > 0.0) {
            return Err(PipelineError::Parameter(format!(
                "{name} needs ops, width >= 1 and a finite alpha > 0"
            )));
        }
        if !self.magnitude.is_finite() {
            return Err(PipelineError::Parameter(format!(
                "{name} magnitude must be finite"
            )));
        }
        self.hparams
            .check()
            .map_err(|e| PipelineError::Parameter(format!("{name} {e}")))
    }
    fn draw(&self, rng: &mut CounterRng, size: (u32, u32), out: &mut Vec<PixelOp>) {
        let spec = AugMixSpec {
            ops: &self.ops,
            magnitude: self.magnitude,
            width: self.width,
            depth: self.depth,
            alpha: self.alpha,
            blended: self.blended,
        };
        let plan = aug_mix(rng, &spec, &self.hparams, size);
        out.push(PixelOp::AugMix(Box::new(plan)));
    }
    fn moving_inner(&self) -> Option<String> {
        mover(self.ops.iter().copied())
    }
}

/// timm's `_LEVEL_DENOM`.
const LEVEL_DENOM: f64 = 10.0;

/// Draws one sample's ops of `spec` for an `h`x`w` image into `out`.
pub(crate) fn rand_augment(
    rng: &mut CounterRng,
    spec: &RandAugmentSpec,
    (h, w): (u32, u32),
    out: &mut Vec<PixelOp>,
) {
    let n = spec.num_layers as usize;
    let picks: Vec<TimmOp> = match spec.weights {
        None => (0..n)
            .map(|_| spec.ops[rng.below(spec.ops.len() as u64) as usize])
            .collect(),
        Some(weights) => {
            // numpy's choice(replace=False, p=...): successive draws, each proportional to
            // the weights not yet drawn.
            let mut left: Vec<(TimmOp, f64)> = spec
                .ops
                .iter()
                .copied()
                .zip(weights.iter().copied())
                .collect();
            let mut picks = Vec::with_capacity(n);
            for _ in 0..n.min(left.len()) {
                let total: f64 = left.iter().map(|&(_, p)| p).sum();
                let mut u = rng.uniform() * total;
                let mut k = left.len() - 1;
                for (i, &(_, p)) in left.iter().enumerate() {
                    if u < p {
                        k = i;
                        break;
                    }
                    u -= p;
                }
                picks.push(left.remove(k).0);
            }
            picks
        }
    };
    for op in picks {
        augment_op(
            rng,
            spec.hparams,
            op,
            spec.prob,
            spec.magnitude,
            (h, w),
            out,
        );
    }
}

/// timm's `AutoAugment`: one sub-policy of `policy` drawn uniformly, its ops run in order.
pub(crate) fn auto_augment(
    rng: &mut CounterRng,
    policy: &[Vec<PolicyOp>],
    hparams: &Hparams,
    size: (u32, u32),
    out: &mut Vec<PixelOp>,
) {
    let sub = &policy[rng.below(policy.len() as u64) as usize];
    for p in sub {
        augment_op(rng, hparams, p.op, p.prob, p.magnitude, size, out);
    }
}

/// timm's `AugMixAugment`: `float32(dirichlet([alpha] * width))` chain weights and a
/// `float32(beta(alpha, alpha))` blend; each chain `depth` ops (or 1 to 3) drawn with
/// replacement from `ops`, each always applied (timm's AugMix ops have probability 1). The
/// draws are the same in both forms; `_apply_blended` turns the two into one blend per chain
/// (`blended_weights`).
pub(crate) fn aug_mix(
    rng: &mut CounterRng,
    spec: &AugMixSpec,
    hparams: &Hparams,
    size: (u32, u32),
) -> AugMixPlan {
    let weights: Vec<f32> = dirichlet(rng, spec.alpha, spec.width as usize)
        .into_iter()
        .map(|w| w as f32)
        .collect();
    let (a, b) = (gamma(rng, spec.alpha), gamma(rng, spec.alpha));
    let blend = (a / (a + b)) as f32;
    let chains = (0..spec.width)
        .map(|_| {
            let depth = if spec.depth > 0 {
                spec.depth as u64
            } else {
                1 + rng.below(3)
            };
            let mut chain = Vec::new();
            for _ in 0..depth {
                let op = spec.ops[rng.below(spec.ops.len() as u64) as usize];
                augment_op(rng, hparams, op, 1.0, spec.magnitude, size, &mut chain);
            }
            chain
        })
        .collect();
    if spec.blended {
        return AugMixPlan {
            original: 0.0,
            weights: blended_weights(&weights, blend),
            chains,
            blend: None,
            blended: true,
        };
    }
    AugMixPlan {
        original: 0.0,
        weights,
        chains,
        blend: Some(blend),
        blended: false,
    }
}

/// timm's `_calc_blended_weights`: the Dirichlet weights scaled by the Beta draw, turned into
/// the weight each chain is blended into the running image with (the last chain's is its own
/// share; each earlier one's is its share of what the later ones leave), in float32 as NumPy 2
/// computes it (a Python float beside a float32 scalar is float32).
fn blended_weights(weights: &[f32], m: f32) -> Vec<f32> {
    let mut left = 1.0f32;
    let mut out: Vec<f32> = weights
        .iter()
        .rev()
        .map(|&w| {
            let alpha = (w * m) / left;
            left *= 1.0 - alpha;
            alpha
        })
        .collect();
    out.reverse();
    out
}

/// timm's `_minmax_level_to_arg` for a level already divided by 10.
fn minmax(level: f64, min: f64, max: f64) -> f64 {
    (min + (max - min) * level).clamp(min, max)
}

/// timm's `AugmentOp.__call__`: with probability `prob`, `op` at a magnitude drawn around
/// `magnitude`.
fn augment_op(
    rng: &mut CounterRng,
    hp: &Hparams,
    op: TimmOp,
    prob: f64,
    magnitude: f64,
    size: (u32, u32),
    out: &mut Vec<PixelOp>,
) {
    // `if self.prob < 1.0 and random.random() > self.prob: return img`.
    if prob < 1.0 && rng.uniform() > prob {
        return;
    }
    let mut m = magnitude;
    if hp.magnitude_uniform {
        m *= rng.uniform();
    } else if hp.magnitude_std > 0.0 {
        m += hp.magnitude_std * super::erase::normal(rng);
    }
    let m = m.min(hp.magnitude_max.unwrap_or(LEVEL_DENOM)).max(0.0);
    op_at(rng, hp, op, m, size, out);
}

/// timm's `_randomly_negate`: the value or its negation, with equal probability.
fn negate(rng: &mut CounterRng, v: f64) -> f64 {
    if rng.uniform() > 0.5 {
        -v
    } else {
        v
    }
}

/// The pixel op `op` at magnitude `m` (timm's level function, then its op).
fn op_at(
    rng: &mut CounterRng,
    spec: &Hparams,
    op: TimmOp,
    m: f64,
    (h, w): (u32, u32),
    out: &mut Vec<PixelOp>,
) {
    use TimmOp::*;
    let level = m / LEVEL_DENOM;
    let enhance = |rng: &mut CounterRng, kind, increasing| {
        let factor = if increasing {
            (1.0 + negate(rng, level * 0.9)).max(0.1)
        } else {
            level * 1.8 + 0.1
        };
        PixelOp::PilEnhance { kind, factor }
    };
    // `int((level / 10) * 4)` and friends: Python's int() truncates toward zero.
    let posterize_bits = (level * 4.0) as i64;
    let solarize_threshold = ((level * 256.0) as i64).min(256);
    let pixel = match op {
        AutoContrast => PixelOp::PilAutoContrast,
        Equalize => PixelOp::Equalize,
        Invert => PixelOp::Invert,
        Posterize | PosterizeIncreasing | PosterizeOriginal => {
            let bits = match op {
                Posterize => posterize_bits,
                PosterizeIncreasing => 4 - posterize_bits,
                _ => posterize_bits + 4,
            };
            if bits >= 8 {
                return;
            }
            // Bits 0 keeps nothing: black, as Pillow before 10 and torchvision give.
            PixelOp::Posterize(bits.max(0) as u8)
        }
        Solarize => PixelOp::Solarize(solarize_threshold as f64),
        SolarizeIncreasing => PixelOp::Solarize((256 - solarize_threshold) as f64),
        SolarizeAdd => PixelOp::SolarizeAdd {
            add: ((level * 110.0) as i64).min(128) as u8,
            threshold: 128,
        },
        Color => enhance(rng, Enhance::Color, false),
        ColorIncreasing => enhance(rng, Enhance::Color, true),
        Contrast => enhance(rng, Enhance::Contrast, false),
        ContrastIncreasing => enhance(rng, Enhance::Contrast, true),
        Brightness => enhance(rng, Enhance::Brightness, false),
        BrightnessIncreasing => enhance(rng, Enhance::Brightness, true),
        Sharpness => enhance(rng, Enhance::Sharpness, false),
        SharpnessIncreasing => enhance(rng, Enhance::Sharpness, true),
        // `_minmax_level_to_arg`: `min + (max - min) * level`, clamped to `[min, max]`.
        Desaturate => PixelOp::PilEnhance {
            kind: Enhance::Color,
            factor: (1.0 - minmax(level, 0.5, 1.0)).clamp(0.0, 1.0),
        },
        GaussianBlur => PixelOp::PilGaussianBlur(minmax(level, 0.1, 2.0)),
        // `random.uniform(0.1, 2.0 * factor)`: `a + (b - a) * random()`.
        GaussianBlurRand => {
            let top = 2.0 * minmax(level, 0.0, 1.0);
            PixelOp::PilGaussianBlur(0.1 + (top - 0.1) * rng.uniform())
        }
        Rotate | ShearX | ShearY | TranslateX | TranslateY | TranslateXRel | TranslateYRel => {
            let matrix = match op {
                Rotate => {
                    let degrees = negate(rng, level * 30.0);
                    match pil::rotate_matrix(degrees, w as usize, h as usize) {
                        Some(m) => m,
                        // Pillow copies the image for a whole turn (no resampling at all).
                        None => return,
                    }
                }
                ShearX => [1.0, negate(rng, level * 0.3), 0.0, 0.0, 1.0, 0.0],
                ShearY => [1.0, 0.0, 0.0, negate(rng, level * 0.3), 1.0, 0.0],
                TranslateX => [
                    1.0,
                    0.0,
                    negate(rng, level * spec.translate_const),
                    0.0,
                    1.0,
                    0.0,
                ],
                TranslateY => [
                    1.0,
                    0.0,
                    0.0,
                    0.0,
                    1.0,
                    negate(rng, level * spec.translate_const),
                ],
                TranslateXRel => {
                    let pct = negate(rng, level * spec.translate_pct);
                    [1.0, 0.0, pct * f64::from(w), 0.0, 1.0, 0.0]
                }
                _ => {
                    let pct = negate(rng, level * spec.translate_pct);
                    [1.0, 0.0, 0.0, 0.0, 1.0, pct * f64::from(h)]
                }
            };
            let interpolation = if spec.interpolation.len() == 1 {
                spec.interpolation[0]
            } else {
                spec.interpolation[rng.below(spec.interpolation.len() as u64) as usize]
            };
            PixelOp::PilAffine {
                matrix,
                filter: match interpolation {
                    Interpolation::Bicubic => Filter::Bicubic,
                    _ => Filter::Bilinear,
                },
                fill: spec.fill,
            }
        }
    };
    out.push(pixel);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    fn hparams() -> Hparams {
        Hparams {
            magnitude_std: 0.5,
            fill: [124, 116, 104],
            translate_const: 100.0,
            ..Hparams::default()
        }
    }

    fn spec<'a>(ops: &'a [TimmOp], hparams: &'a Hparams) -> RandAugmentSpec<'a> {
        RandAugmentSpec {
            ops,
            num_layers: 2,
            weights: None,
            prob: 0.5,
            magnitude: 9.0,
            hparams,
        }
    }

    #[test]
    fn each_layer_applies_with_probability_prob() {
        let (ops, hp) = ([TimmOp::Invert], hparams());
        let s = spec(&ops, &hp);
        let mut applied = 0;
        let n = 20_000;
        for i in 0..n {
            let mut rng = CounterRng::new(1, 0, i, Stream::Ops);
            let mut out = Vec::new();
            rand_augment(&mut rng, &s, (32, 32), &mut out);
            applied += out.len();
        }
        let rate = applied as f64 / (2 * n) as f64;
        assert!((rate - 0.5).abs() < 0.01, "{rate}");
    }

    #[test]
    fn increasing_posterize_at_the_clamped_top_keeps_no_bits() {
        let ops = [TimmOp::PosterizeIncreasing];
        let hp = Hparams::default();
        let mut s = spec(&ops, &hp);
        (s.prob, s.magnitude) = (1.0, 10.0);
        let mut out = Vec::new();
        rand_augment(
            &mut CounterRng::new(0, 0, 0, Stream::Ops),
            &s,
            (8, 8),
            &mut out,
        );
        assert_eq!(out, vec![PixelOp::Posterize(0), PixelOp::Posterize(0)]);
    }

    #[test]
    fn auto_augment_runs_one_sub_policy_in_order() {
        let p = |op, prob| PolicyOp {
            op,
            prob,
            magnitude: 5.0,
        };
        let policy = vec![
            vec![p(TimmOp::Invert, 1.0), p(TimmOp::Equalize, 1.0)],
            vec![p(TimmOp::AutoContrast, 1.0), p(TimmOp::Invert, 0.0)],
        ];
        let hp = hparams();
        let mut seen = [0; 2];
        for i in 0..400 {
            let mut out = Vec::new();
            auto_augment(
                &mut CounterRng::new(5, 1, i, Stream::Ops),
                &policy,
                &hp,
                (8, 8),
                &mut out,
            );
            match out.as_slice() {
                [PixelOp::Invert, PixelOp::Equalize] => seen[0] += 1,
                [PixelOp::PilAutoContrast] => seen[1] += 1,
                other => panic!("{other:?}"),
            }
        }
        assert!(seen.iter().all(|&n| n > 150), "{seen:?}");
    }

    /// `augmix-m3-w4` over `ops`, chains of 1 to 3, not blended.
    fn aug_mix_spec(ops: &[TimmOp]) -> AugMixSpec<'_> {
        AugMixSpec {
            ops,
            magnitude: 3.0,
            width: 4,
            depth: -1,
            alpha: 1.0,
            blended: false,
        }
    }

    #[test]
    fn aug_mix_weights_sum_to_one_and_chains_have_one_to_three_ops() {
        let ops = [TimmOp::Invert, TimmOp::Equalize];
        let spec = aug_mix_spec(&ops);
        let hp = hparams();
        let (mut depths, mut blends) = ([0usize; 4], Vec::new());
        for i in 0..500 {
            let plan = aug_mix(
                &mut CounterRng::new(9, 0, i, Stream::Ops),
                &spec,
                &hp,
                (8, 8),
            );
            let total: f32 = plan.weights.iter().sum();
            assert!(
                (total - 1.0).abs() < 1e-5 && plan.original == 0.0,
                "{total}"
            );
            assert_eq!(plan.chains.len(), 4);
            for c in &plan.chains {
                depths[c.len()] += 1;
            }
            blends.push(f64::from(plan.blend.unwrap()));
        }
        assert_eq!(depths[0], 0);
        assert!(depths[1..].iter().all(|&n| n > 550), "{depths:?}");
        // Beta(1, 1) is uniform: mean 1/2.
        let mean = blends.iter().sum::<f64>() / blends.len() as f64;
        assert!((mean - 0.5).abs() < 0.05, "{mean}");
    }

    #[test]
    fn blended_aug_mix_draws_as_the_basic_form_and_its_blends_give_each_chain_its_share() {
        let ops = [TimmOp::Invert, TimmOp::Equalize, TimmOp::AutoContrast];
        let mut spec = aug_mix_spec(&ops);
        let hp = hparams();
        for i in 0..200 {
            let rng = || CounterRng::new(5, 1, i, Stream::Ops);
            let basic = aug_mix(&mut rng(), &spec, &hp, (8, 8));
            spec.blended = true;
            let blended = aug_mix(&mut rng(), &spec, &hp, (8, 8));
            spec.blended = false;
            assert!(blended.blended && blended.blend.is_none());
            assert_eq!(blended.chains, basic.chains, "the same draws");
            // Blending in turn gives chain k the weight a_k * prod_{j>k} (1 - a_j), which must
            // be its Dirichlet share times the Beta draw; the original keeps 1 - m.
            let m = basic.blend.unwrap();
            let mut kept = 1.0f32;
            for (k, &a) in blended.weights.iter().enumerate().rev() {
                let share = a * kept;
                assert!((share - basic.weights[k] * m).abs() < 1e-5, "{share}");
                kept *= 1.0 - a;
            }
            assert!((kept - (1.0 - m)).abs() < 1e-5, "{kept} {m}");
        }
    }

    #[test]
    fn three_augments_blur_radius_is_uniform_from_a_tenth_to_two() {
        let hp = hparams();
        let radii: Vec<f64> = (0..2000)
            .map(|i| {
                let mut out = Vec::new();
                let mut rng = CounterRng::new(2, 0, i, Stream::Ops);
                op_at(
                    &mut rng,
                    &hp,
                    TimmOp::GaussianBlurRand,
                    10.0,
                    (8, 8),
                    &mut out,
                );
                match out[..] {
                    [PixelOp::PilGaussianBlur(r)] => r,
                    _ => panic!("{out:?}"),
                }
            })
            .collect();
        assert!(radii.iter().all(|r| (0.1..=2.0).contains(r)));
        let mean = radii.iter().sum::<f64>() / radii.len() as f64;
        assert!((mean - 1.05).abs() < 0.03, "{mean}");
        // Desaturate at magnitude 10 is fully grey: Color with factor 0.
        let mut out = Vec::new();
        let mut rng = CounterRng::new(2, 0, 0, Stream::Ops);
        op_at(&mut rng, &hp, TimmOp::Desaturate, 10.0, (8, 8), &mut out);
        assert_eq!(
            out,
            [PixelOp::PilEnhance {
                kind: Enhance::Color,
                factor: 0.0
            }]
        );
    }

    #[test]
    fn weighted_choice_draws_distinct_ops() {
        let ops = [TimmOp::Invert, TimmOp::Equalize, TimmOp::AutoContrast];
        let (weights, hp) = ([0.5, 0.3, 0.2], hparams());
        let mut s = spec(&ops, &hp);
        (s.prob, s.weights, s.num_layers) = (1.0, Some(&weights[..]), 3);
        for i in 0..200 {
            let mut out = Vec::new();
            rand_augment(
                &mut CounterRng::new(3, 0, i, Stream::Ops),
                &s,
                (8, 8),
                &mut out,
            );
            assert_eq!(out.len(), 3);
            assert!(out.contains(&PixelOp::Invert) && out.contains(&PixelOp::Equalize));
        }
    }
}
