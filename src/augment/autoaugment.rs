//! The auto-augment family, with torchvision's v2 policies, augmentation spaces and sampling:
//! `AutoAugment` (ImageNet, CIFAR10, SVHN), `RandAugment`, `TrivialAugmentWide` and `AugMix`.
//! Each draws, per sample, a list of [`PixelOp`]s that the colour, blur and geometry kernels
//! then run.

use serde::{Deserialize, Serialize};

use super::error::PipelineError;
use super::geometry::{nearest, warp_interpolation, Interpolation};
use super::pixel::Warp;
use super::pixel::{AugMixPlan, PilEnhance, PixelOp};
use super::spec::{linspace_f32, one, OpKind, OpSpec};
use crate::rng::CounterRng;

/// `AutoAugmentPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AutoAugmentPolicy {
    /// The ImageNet policy (torchvision's default).
    Imagenet,
    /// The CIFAR10 policy.
    Cifar10,
    /// The SVHN policy.
    Svhn,
}

/// `AutoAugment(policy, interpolation, fill)`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutoAugment {
    /// Default ImageNet.
    #[serde(default = "imagenet")]
    pub policy: AutoAugmentPolicy,
    /// Nearest (default) or bilinear, for the warps.
    #[serde(default = "nearest")]
    pub interpolation: Interpolation,
    /// Fill for the warps.
    #[serde(default)]
    pub fill: Option<[f32; 3]>,
    /// The image is a PIL image (torchvision then warps with Pillow). Default false.
    #[serde(default)]
    pub pil: bool,
    /// The image is a tensor under torchvision v1 (its autocontrast's arithmetic is v1's).
    /// Default false.
    #[serde(default)]
    pub v1: bool,
}

/// `RandAugment(num_ops, magnitude, num_magnitude_bins, interpolation, fill)`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandAugment {
    /// Default 2.
    #[serde(default = "two")]
    pub num_ops: u32,
    /// Default 9.
    #[serde(default = "nine")]
    pub magnitude: u32,
    /// Default 31.
    #[serde(default = "bins")]
    pub num_magnitude_bins: u32,
    /// Nearest (default) or bilinear, for the warps.
    #[serde(default = "nearest")]
    pub interpolation: Interpolation,
    /// Fill for the warps.
    #[serde(default)]
    pub fill: Option<[f32; 3]>,
    /// The image is a PIL image (torchvision then warps with Pillow). Default false.
    #[serde(default)]
    pub pil: bool,
    /// The image is a tensor under torchvision v1 (its autocontrast's arithmetic is v1's).
    /// Default false.
    #[serde(default)]
    pub v1: bool,
}

/// `TrivialAugmentWide(num_magnitude_bins, interpolation, fill)`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrivialAugmentWide {
    /// Default 31.
    #[serde(default = "bins")]
    pub num_magnitude_bins: u32,
    /// Nearest (default) or bilinear, for the warps.
    #[serde(default = "nearest")]
    pub interpolation: Interpolation,
    /// Fill for the warps.
    #[serde(default)]
    pub fill: Option<[f32; 3]>,
    /// The image is a PIL image (torchvision then warps with Pillow). Default false.
    #[serde(default)]
    pub pil: bool,
    /// The image is a tensor under torchvision v1 (its autocontrast's arithmetic is v1's).
    /// Default false.
    #[serde(default)]
    pub v1: bool,
}

/// `AugMix(severity, mixture_width, chain_depth, alpha, all_ops, interpolation, fill)`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AugMix {
    /// 1..=10, default 3.
    #[serde(default = "three")]
    pub severity: u32,
    /// Default 3.
    #[serde(default = "three")]
    pub mixture_width: u32,
    /// Ops per chain; -1 (default): 1 to 3 at random.
    #[serde(default = "minus_one")]
    pub chain_depth: i32,
    /// Dirichlet/Beta concentration. Default 1.
    #[serde(default = "one")]
    pub alpha: f64,
    /// Include brightness, colour, contrast and sharpness. Default true.
    #[serde(default = "yes")]
    pub all_ops: bool,
    /// Bilinear (default) or nearest, for the warps.
    #[serde(default)]
    pub interpolation: Interpolation,
    /// Fill for the warps.
    #[serde(default)]
    pub fill: Option<[f32; 3]>,
    /// torchvision v1's AugMix (which converts a PIL image to a tensor first, as v2's does:
    /// the tensor kernels, its autocontrast v1's). Default false.
    #[serde(default)]
    pub v1: bool,
}

fn imagenet() -> AutoAugmentPolicy {
    AutoAugmentPolicy::Imagenet
}
pub(super) fn two() -> u32 {
    2
}
pub(super) fn three() -> u32 {
    3
}
fn nine() -> u32 {
    9
}
fn bins() -> u32 {
    31
}
pub(super) fn minus_one() -> i32 {
    -1
}
fn yes() -> bool {
    true
}

// torchvision's policies all hold shears, translations and rotations: each moves pixels.

impl OpSpec for AutoAugment {
    fn kind(&self) -> OpKind {
        OpKind::MovingPixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        warp_interpolation(self.interpolation, "auto_augment")
    }
    fn draw(&self, rng: &mut CounterRng, size: (u32, u32), out: &mut Vec<PixelOp>) {
        let style = WarpStyle::new(self.interpolation, self.fill, self.pil).v1(self.v1);
        auto_augment(rng, self.policy, size, style, out);
    }
}

impl OpSpec for RandAugment {
    fn kind(&self) -> OpKind {
        OpKind::MovingPixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        let (m, bins) = (self.magnitude, self.num_magnitude_bins);
        if m >= bins {
            return Err(PipelineError::Parameter(format!(
                "rand_augment magnitude {m} must be below num_magnitude_bins {bins}"
            )));
        }
        warp_interpolation(self.interpolation, "rand_augment")
    }
    fn draw(&self, rng: &mut CounterRng, size: (u32, u32), out: &mut Vec<PixelOp>) {
        rand_augment(
            rng,
            self.num_ops,
            self.magnitude,
            self.num_magnitude_bins,
            size,
            WarpStyle::new(self.interpolation, self.fill, self.pil).v1(self.v1),
            out,
        );
    }
}

impl OpSpec for TrivialAugmentWide {
    fn kind(&self) -> OpKind {
        OpKind::MovingPixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        warp_interpolation(self.interpolation, "trivial_augment_wide")
    }
    fn draw(&self, rng: &mut CounterRng, size: (u32, u32), out: &mut Vec<PixelOp>) {
        trivial_augment_wide(
            rng,
            self.num_magnitude_bins,
            size,
            WarpStyle::new(self.interpolation, self.fill, self.pil).v1(self.v1),
            out,
        );
    }
}

impl OpSpec for AugMix {
    fn kind(&self) -> OpKind {
        OpKind::MovingPixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        let a = self.alpha;
        if !(1..=10).contains(&self.severity) || self.mixture_width == 0 || a.is_nan() || a <= 0.0 {
            return Err(PipelineError::Parameter(
                "aug_mix needs severity in 1..=10, mixture_width >= 1 and alpha > 0".into(),
            ));
        }
        warp_interpolation(self.interpolation, "aug_mix")
    }
    fn draw(&self, rng: &mut CounterRng, size: (u32, u32), out: &mut Vec<PixelOp>) {
        let spec = AugMixSpec {
            severity: self.severity,
            mixture_width: self.mixture_width,
            chain_depth: self.chain_depth,
            alpha: self.alpha,
            all_ops: self.all_ops,
        };
        let style = WarpStyle::new(self.interpolation, self.fill, false).v1(self.v1);
        let plan = aug_mix(rng, &spec, size, style);
        out.push(PixelOp::AugMix(Box::new(plan)));
    }
}

/// One operation of the augmentation spaces (torchvision's `transform_id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Aug {
    Identity,
    ShearX,
    ShearY,
    TranslateX,
    TranslateY,
    Rotate,
    Brightness,
    Color,
    Contrast,
    Sharpness,
    Posterize,
    Solarize,
    AutoContrast,
    Equalize,
    Invert,
}

use Aug::*;

/// Which augmentation space (they differ in ranges and members).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Space {
    AutoAugment,
    RandAugment,
    TrivialWide,
    AugMix,
}

/// The members of each space, in torchvision's order (the random pick indexes this).
const RAND_AUGMENT: [Aug; 14] = [
    Identity,
    ShearX,
    ShearY,
    TranslateX,
    TranslateY,
    Rotate,
    Brightness,
    Color,
    Contrast,
    Sharpness,
    Posterize,
    Solarize,
    AutoContrast,
    Equalize,
];
const AUGMIX_ALL: [Aug; 13] = [
    ShearX,
    ShearY,
    TranslateX,
    TranslateY,
    Rotate,
    Posterize,
    Solarize,
    AutoContrast,
    Equalize,
    Brightness,
    Color,
    Contrast,
    Sharpness,
];
/// AugMix with `all_ops=False`: the first nine of `AUGMIX_ALL`.
const AUGMIX_PARTIAL: usize = 9;

/// The magnitude of `op` at bin `idx` of `bins` for an `h`x`w` image, as the space's
/// `magnitudes_fn(bins, h, w)[idx]` (f32 `linspace`, as torch computes it), and whether it
/// takes a random sign; `None` for ops without one.
fn magnitude(
    space: Space,
    op: Aug,
    bins: usize,
    idx: usize,
    h: u32,
    w: u32,
) -> Option<(f64, bool)> {
    let lin = |end: f64| linspace_f32(0.0, end, bins).nth(idx).map(f64::from);
    let (top, shear, translate_x, translate_y, rotate, posterize_div, posterize_from) = match space
    {
        Space::TrivialWide => (0.99, 0.99, 32.0, 32.0, 135.0, 6.0, 8.0),
        Space::AugMix => (
            0.9,
            0.3,
            f64::from(w) / 3.0,
            f64::from(h) / 3.0,
            30.0,
            4.0,
            4.0,
        ),
        Space::AutoAugment | Space::RandAugment => (
            0.9,
            0.3,
            150.0 / 331.0 * f64::from(w),
            150.0 / 331.0 * f64::from(h),
            30.0,
            4.0,
            8.0,
        ),
    };
    let signed = |v: Option<f64>| v.map(|v| (v, true));
    match op {
        Identity | AutoContrast | Equalize | Invert => None,
        ShearX | ShearY => signed(lin(shear)),
        TranslateX => signed(lin(translate_x)),
        TranslateY => signed(lin(translate_y)),
        Rotate => signed(lin(rotate)),
        Brightness | Color | Contrast | Sharpness => signed(lin(top)),
        Posterize => {
            // `posterize_from - (arange(bins) / ((bins - 1) / div)).round().int()`, in f32.
            let step = ((bins as f64 - 1.0) / posterize_div) as f32;
            let bits = posterize_from as f32 - (idx as f32 / step).round_ties_even();
            Some((f64::from(bits), false))
        }
        Solarize => linspace_f32(1.0, 0.0, bins)
            .nth(idx)
            .map(|v| (f64::from(v), false)),
    }
}

/// torchvision's `_apply_image_or_video_transform(op, magnitude)` as a resolved op.
fn resolve(op: Aug, magnitude: f64, style: WarpStyle) -> Option<PixelOp> {
    let affine = |translate: [f64; 2], shear: [f64; 2], corner: bool| Warp {
        rotate: false,
        angle: 0.0,
        translate,
        scale: 1.0,
        shear,
        center: corner.then_some([0.0, 0.0]),
        nearest: style.nearest,
        fill: style.fill,
        pil: style.pil,
    };
    let shear_deg = magnitude.atan().to_degrees();
    Some(match op {
        Identity => return None,
        ShearX => PixelOp::Warp(affine([0.0, 0.0], [shear_deg, 0.0], true)),
        ShearY => PixelOp::Warp(affine([0.0, 0.0], [0.0, shear_deg], true)),
        // `int(magnitude)`: truncated toward zero.
        TranslateX => PixelOp::Warp(affine([magnitude.trunc(), 0.0], [0.0, 0.0], false)),
        TranslateY => PixelOp::Warp(affine([0.0, magnitude.trunc()], [0.0, 0.0], false)),
        Rotate => PixelOp::Warp(Warp {
            rotate: true,
            angle: magnitude,
            ..affine([0.0, 0.0], [0.0, 0.0], false)
        }),
        // A PIL image's enhancers and autocontrast are Pillow's (torch's arithmetic is a level
        // off in a sixth of the values for colour and contrast); brightness is the same.
        Brightness => PixelOp::Brightness(1.0 + magnitude),
        Color if style.pil => pil_enhance(PilEnhance::Color, 1.0 + magnitude),
        Color => PixelOp::Saturation(1.0 + magnitude),
        Contrast if style.pil => pil_enhance(PilEnhance::Contrast, 1.0 + magnitude),
        Contrast => PixelOp::Contrast(1.0 + magnitude),
        Sharpness if style.pil => pil_enhance(PilEnhance::Sharpness, 1.0 + magnitude),
        Sharpness => PixelOp::Sharpness(1.0 + magnitude),
        Posterize => PixelOp::Posterize(magnitude as u8),
        Solarize => PixelOp::Solarize(255.0 * magnitude),
        AutoContrast if style.pil => PixelOp::PilAutoContrast,
        AutoContrast if style.v1 => PixelOp::AutoContrastV1,
        AutoContrast => PixelOp::AutoContrast,
        Equalize => PixelOp::Equalize,
        Invert => PixelOp::Invert,
    })
}

/// Pillow's enhancer `kind` at `factor`.
fn pil_enhance(kind: PilEnhance, factor: f64) -> PixelOp {
    PixelOp::PilEnhance { kind, factor }
}

/// Draws `op`'s magnitude at bin `idx` with its random sign and resolves it.
#[allow(clippy::too_many_arguments)]
fn draw_one(
    rng: &mut CounterRng,
    space: Space,
    op: Aug,
    bins: usize,
    idx: usize,
    size: (u32, u32),
    style: WarpStyle,
    out: &mut Vec<PixelOp>,
) {
    let magnitude = match magnitude(space, op, bins, idx, size.0, size.1) {
        Some((m, true)) if rng.uniform() <= 0.5 => -m,
        Some((m, _)) => m,
        None => 0.0,
    };
    out.extend(resolve(op, magnitude, style));
}

/// How a policy's warps sample: nearest or bilinear, the fill, and whether the image is a PIL
/// image (Pillow's warps) or a tensor.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WarpStyle {
    nearest: bool,
    fill: Option<[f32; 3]>,
    pil: bool,
    v1: bool,
}

impl WarpStyle {
    pub(crate) fn new(interpolation: Interpolation, fill: Option<[f32; 3]>, pil: bool) -> Self {
        Self {
            nearest: interpolation == Interpolation::Nearest,
            fill,
            pil,
            v1: false,
        }
    }

    /// The same, the ops torchvision v1's (on a tensor) when `v1`.
    pub(crate) fn v1(self, v1: bool) -> Self {
        Self { v1, ..self }
    }
}

/// `AutoAugment(policy)`: one of the policy's sub-policies, uniformly; each of its two ops
/// with its probability, at its fixed magnitude bin (of 10), with a random sign.
pub(crate) fn auto_augment(
    rng: &mut CounterRng,
    policy: AutoAugmentPolicy,
    size: (u32, u32),
    style: WarpStyle,
    out: &mut Vec<PixelOp>,
) {
    let table = policies(policy);
    let sub = &table[rng.below(table.len() as u64) as usize];
    for &(op, p, bin) in sub {
        if rng.uniform() > p {
            continue;
        }
        draw_one(
            rng,
            Space::AutoAugment,
            op,
            10,
            bin.unwrap_or(0) as usize,
            size,
            style,
            out,
        );
    }
}

/// `RandAugment(num_ops, magnitude, num_magnitude_bins)`: `num_ops` ops drawn uniformly (with
/// replacement), each at the fixed magnitude bin, with a random sign.
#[allow(clippy::too_many_arguments)]
pub(crate) fn rand_augment(
    rng: &mut CounterRng,
    num_ops: u32,
    magnitude: u32,
    bins: u32,
    size: (u32, u32),
    style: WarpStyle,
    out: &mut Vec<PixelOp>,
) {
    for _ in 0..num_ops {
        let op = RAND_AUGMENT[rng.below(RAND_AUGMENT.len() as u64) as usize];
        draw_one(
            rng,
            Space::RandAugment,
            op,
            bins as usize,
            magnitude as usize,
            size,
            style,
            out,
        );
    }
}

/// `TrivialAugmentWide(num_magnitude_bins)`: one op, uniformly, at a uniform magnitude bin,
/// with a random sign.
pub(crate) fn trivial_augment_wide(
    rng: &mut CounterRng,
    bins: u32,
    size: (u32, u32),
    style: WarpStyle,
    out: &mut Vec<PixelOp>,
) {
    let op = RAND_AUGMENT[rng.below(RAND_AUGMENT.len() as u64) as usize];
    let idx = if magnitude(Space::TrivialWide, op, bins as usize, 0, size.0, size.1).is_some() {
        rng.below(u64::from(bins)) as usize
    } else {
        0
    };
    draw_one(
        rng,
        Space::TrivialWide,
        op,
        bins as usize,
        idx,
        size,
        style,
        out,
    );
}

/// `AugMix`'s parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct AugMixSpec {
    pub severity: u32,
    pub mixture_width: u32,
    pub chain_depth: i32,
    pub alpha: f64,
    pub all_ops: bool,
}

/// A Gamma(`alpha`, 1) draw (Marsaglia and Tsang; boosted below 1).
pub(super) fn gamma(rng: &mut CounterRng, alpha: f64) -> f64 {
    if alpha < 1.0 {
        let u: f64 = 1.0 - rng.uniform();
        return gamma(rng, alpha + 1.0) * u.powf(1.0 / alpha);
    }
    let d = alpha - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = super::erase::normal(rng);
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u = 1.0 - rng.uniform();
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

/// A Dirichlet draw with all concentrations `alpha`.
pub(super) fn dirichlet(rng: &mut CounterRng, alpha: f64, n: usize) -> Vec<f64> {
    let g: Vec<f64> = (0..n).map(|_| gamma(rng, alpha)).collect();
    let sum: f64 = g.iter().sum();
    g.into_iter().map(|x| x / sum).collect()
}

/// `AugMix`: Beta(alpha, alpha) weights for the original and the mixture (as a two-way
/// Dirichlet), Dirichlet(alpha) weights over `mixture_width` chains, each chain of
/// `chain_depth` (or 1 to 3) ops drawn from the space at a bin below `severity`.
pub(crate) fn aug_mix(
    rng: &mut CounterRng,
    spec: &AugMixSpec,
    size: (u32, u32),
    style: WarpStyle,
) -> AugMixPlan {
    let m = dirichlet(rng, spec.alpha, 2);
    let combined: Vec<f32> = dirichlet(rng, spec.alpha, spec.mixture_width as usize)
        .into_iter()
        .map(|d| (d as f32) * (m[1] as f32))
        .collect();
    let ops = if spec.all_ops {
        &AUGMIX_ALL[..]
    } else {
        &AUGMIX_ALL[..AUGMIX_PARTIAL]
    };
    let chains = (0..spec.mixture_width)
        .map(|_| {
            let depth = if spec.chain_depth > 0 {
                spec.chain_depth as u32
            } else {
                1 + rng.below(3) as u32
            };
            let mut chain = Vec::new();
            for _ in 0..depth {
                let op = ops[rng.below(ops.len() as u64) as usize];
                let idx = rng.below(u64::from(spec.severity)) as usize;
                draw_one(rng, Space::AugMix, op, 10, idx, size, style, &mut chain);
            }
            chain
        })
        .collect();
    AugMixPlan {
        original: m[0] as f32,
        weights: combined,
        chains,
        blend: None,
        blended: false,
    }
}

/// A sub-policy: two `(op, probability, magnitude bin)`.
type SubPolicy = [(Aug, f64, Option<u8>); 2];

/// The AutoAugment paper's learned policies, as torchvision lists them.
fn policies(policy: AutoAugmentPolicy) -> &'static [SubPolicy] {
    match policy {
        AutoAugmentPolicy::Imagenet => &IMAGENET,
        AutoAugmentPolicy::Cifar10 => &CIFAR10,
        AutoAugmentPolicy::Svhn => &SVHN,
    }
}

const fn s(op: Aug, p: f64, bin: u8) -> (Aug, f64, Option<u8>) {
    (op, p, Some(bin))
}
const fn n(op: Aug, p: f64) -> (Aug, f64, Option<u8>) {
    (op, p, None)
}

#[rustfmt::skip]
static IMAGENET: [SubPolicy; 25] = [
    [s(Posterize, 0.4, 8), s(Rotate, 0.6, 9)],
    [s(Solarize, 0.6, 5), n(AutoContrast, 0.6)],
    [n(Equalize, 0.8), n(Equalize, 0.6)],
    [s(Posterize, 0.6, 7), s(Posterize, 0.6, 6)],
    [n(Equalize, 0.4), s(Solarize, 0.2, 4)],
    [n(Equalize, 0.4), s(Rotate, 0.8, 8)],
    [s(Solarize, 0.6, 3), n(Equalize, 0.6)],
    [s(Posterize, 0.8, 5), n(Equalize, 1.0)],
    [s(Rotate, 0.2, 3), s(Solarize, 0.6, 8)],
    [n(Equalize, 0.6), s(Posterize, 0.4, 6)],
    [s(Rotate, 0.8, 8), s(Color, 0.4, 0)],
    [s(Rotate, 0.4, 9), n(Equalize, 0.6)],
    [n(Equalize, 0.0), n(Equalize, 0.8)],
    [n(Invert, 0.6), n(Equalize, 1.0)],
    [s(Color, 0.6, 4), s(Contrast, 1.0, 8)],
    [s(Rotate, 0.8, 8), s(Color, 1.0, 2)],
    [s(Color, 0.8, 8), s(Solarize, 0.8, 7)],
    [s(Sharpness, 0.4, 7), n(Invert, 0.6)],
    [s(ShearX, 0.6, 5), n(Equalize, 1.0)],
    [s(Color, 0.4, 0), n(Equalize, 0.6)],
    [n(Equalize, 0.4), s(Solarize, 0.2, 4)],
    [s(Solarize, 0.6, 5), n(AutoContrast, 0.6)],
    [n(Invert, 0.6), n(Equalize, 1.0)],
    [s(Color, 0.6, 4), s(Contrast, 1.0, 8)],
    [n(Equalize, 0.8), n(Equalize, 0.6)],
];

#[rustfmt::skip]
static CIFAR10: [SubPolicy; 25] = [
    [n(Invert, 0.1), s(Contrast, 0.2, 6)],
    [s(Rotate, 0.7, 2), s(TranslateX, 0.3, 9)],
    [s(Sharpness, 0.8, 1), s(Sharpness, 0.9, 3)],
    [s(ShearY, 0.5, 8), s(TranslateY, 0.7, 9)],
    [n(AutoContrast, 0.5), n(Equalize, 0.9)],
    [s(ShearY, 0.2, 7), s(Posterize, 0.3, 7)],
    [s(Color, 0.4, 3), s(Brightness, 0.6, 7)],
    [s(Sharpness, 0.3, 9), s(Brightness, 0.7, 9)],
    [n(Equalize, 0.6), n(Equalize, 0.5)],
    [s(Contrast, 0.6, 7), s(Sharpness, 0.6, 5)],
    [s(Color, 0.7, 7), s(TranslateX, 0.5, 8)],
    [n(Equalize, 0.3), n(AutoContrast, 0.4)],
    [s(TranslateY, 0.4, 3), s(Sharpness, 0.2, 6)],
    [s(Brightness, 0.9, 6), s(Color, 0.2, 8)],
    [s(Solarize, 0.5, 2), n(Invert, 0.0)],
    [n(Equalize, 0.2), n(AutoContrast, 0.6)],
    [n(Equalize, 0.2), n(Equalize, 0.6)],
    [s(Color, 0.9, 9), n(Equalize, 0.6)],
    [n(AutoContrast, 0.8), s(Solarize, 0.2, 8)],
    [s(Brightness, 0.1, 3), s(Color, 0.7, 0)],
    [s(Solarize, 0.4, 5), n(AutoContrast, 0.9)],
    [s(TranslateY, 0.9, 9), s(TranslateY, 0.7, 9)],
    [n(AutoContrast, 0.9), s(Solarize, 0.8, 3)],
    [n(Equalize, 0.8), n(Invert, 0.1)],
    [s(TranslateY, 0.7, 9), n(AutoContrast, 0.9)],
];

#[rustfmt::skip]
static SVHN: [SubPolicy; 25] = [
    [s(ShearX, 0.9, 4), n(Invert, 0.2)],
    [s(ShearY, 0.9, 8), n(Invert, 0.7)],
    [n(Equalize, 0.6), s(Solarize, 0.6, 6)],
    [n(Invert, 0.9), n(Equalize, 0.6)],
    [n(Equalize, 0.6), s(Rotate, 0.9, 3)],
    [s(ShearX, 0.9, 4), n(AutoContrast, 0.8)],
    [s(ShearY, 0.9, 8), n(Invert, 0.4)],
    [s(ShearY, 0.9, 5), s(Solarize, 0.2, 6)],
    [n(Invert, 0.9), n(AutoContrast, 0.8)],
    [n(Equalize, 0.6), s(Rotate, 0.9, 3)],
    [s(ShearX, 0.9, 4), s(Solarize, 0.3, 3)],
    [s(ShearY, 0.8, 8), n(Invert, 0.7)],
    [n(Equalize, 0.9), s(TranslateY, 0.6, 6)],
    [n(Invert, 0.9), n(Equalize, 0.6)],
    [s(Contrast, 0.3, 3), s(Rotate, 0.8, 4)],
    [n(Invert, 0.8), s(TranslateY, 0.0, 2)],
    [s(ShearY, 0.7, 6), s(Solarize, 0.4, 8)],
    [n(Invert, 0.6), s(Rotate, 0.8, 4)],
    [s(ShearY, 0.3, 7), s(TranslateX, 0.9, 3)],
    [s(ShearX, 0.1, 6), n(Invert, 0.6)],
    [s(Solarize, 0.7, 2), s(TranslateY, 0.6, 7)],
    [s(ShearY, 0.8, 4), n(Invert, 0.8)],
    [s(ShearX, 0.7, 9), s(TranslateY, 0.8, 3)],
    [s(ShearY, 0.8, 5), n(AutoContrast, 0.7)],
    [s(ShearX, 0.7, 2), n(Invert, 0.1)],
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    #[test]
    fn magnitude_tables_match_torchvision_linspace_and_posterize_bins() {
        // TrivialAugmentWide, 31 bins: rotate bin 20 is 90 degrees; posterize bins 8..2.
        assert_eq!(
            magnitude(Space::TrivialWide, Rotate, 31, 20, 8, 8),
            Some((90.0, true))
        );
        let bits: Vec<f64> = (0..31)
            .map(|i| {
                magnitude(Space::TrivialWide, Posterize, 31, i, 8, 8)
                    .unwrap()
                    .0
            })
            .collect();
        assert_eq!((bits[0], bits[30]), (8.0, 2.0));
        // RandAugment's default: magnitude 9 of 31.
        let (shear, _) = magnitude(Space::RandAugment, ShearX, 31, 9, 8, 8).unwrap();
        assert!((shear - 0.09).abs() < 1e-6);
        let (bits, signed) = magnitude(Space::RandAugment, Posterize, 31, 9, 8, 8).unwrap();
        assert_eq!((bits, signed), (7.0, false));
        assert_eq!(
            magnitude(Space::AutoAugment, Solarize, 10, 9, 8, 8),
            Some((0.0, false))
        );
    }

    #[test]
    fn trivial_augment_draws_every_op_about_equally() {
        let mut counts = std::collections::HashMap::new();
        for i in 0..14_000 {
            let mut rng = CounterRng::new(1, 0, i, Stream::Crop);
            let mut out = Vec::new();
            trivial_augment_wide(
                &mut rng,
                31,
                (176, 176),
                WarpStyle::new(Interpolation::Nearest, None, false),
                &mut out,
            );
            let key = out.first().map_or("identity".to_string(), |op| {
                format!("{op:?}")
                    .split(['(', ' '])
                    .next()
                    .unwrap()
                    .to_string()
            });
            *counts.entry(key).or_insert(0) += 1;
        }
        // Warps: shear x2, translate x2, rotate, less the identity bins and right angles.
        assert!(
            counts["Brightness"] > 850 && counts["Brightness"] < 1150,
            "{counts:?}"
        );
        assert!(
            counts["Equalize"] > 850 && counts["Equalize"] < 1150,
            "{counts:?}"
        );
    }

    #[test]
    fn augmix_weights_sum_to_one() {
        for i in 0..200 {
            let mut rng = CounterRng::new(2, 0, i, Stream::Crop);
            let spec = AugMixSpec {
                severity: 3,
                mixture_width: 3,
                chain_depth: -1,
                alpha: 1.0,
                all_ops: true,
            };
            let style = WarpStyle::new(Interpolation::Bilinear, None, false);
            let plan = aug_mix(&mut rng, &spec, (32, 32), style);
            let total = plan.original + plan.weights.iter().sum::<f32>();
            assert!((total - 1.0).abs() < 1e-5, "{total}");
            assert!(plan.chains.iter().all(|c| c.len() <= 3));
        }
    }
}
