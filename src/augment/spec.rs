//! What every op's spec says about itself ([`OpSpec`]: its [`OpKind`], its check, its draw),
//! and the small helpers the family files share to check and draw. A leaf of `augment/`: the
//! family files use it, and `op.rs` lists the families.

use serde::Serialize;

use super::error::PipelineError;
use super::pixel::PixelOp;
use crate::rng::CounterRng;

/// What an op does to a sample, which decides where in a pipeline it may stand and, in a
/// detection pipeline, whether the boxes can follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// Sets the output's size: a crop or a resize.
    Geometry,
    /// Moves a detection sample's boxes with its pixels, before the resize (zoom-out, IoU
    /// crop, sanitize).
    BoxAware,
    /// A pixel op that moves pixels (flips, warps, and the policies that rotate, shear or
    /// translate): boxes would have to follow.
    MovingPixel,
    /// A pixel op that leaves every pixel where it is (colour, blur, ...).
    Pixel,
    /// `normalize`.
    Normalize,
    /// `random_erasing`.
    Erase,
}

impl OpKind {
    /// Whether ops of this kind run on the RGB8 image as pixel ops.
    pub fn is_pixel(self) -> bool {
        matches!(self, Self::Pixel | Self::MovingPixel)
    }
}

/// What each op's spec struct says about itself. Every method is required, so the author of
/// a new op answers each.
pub(crate) trait OpSpec {
    /// What the op does to a sample. A wrapper is the kind of what it may run.
    fn kind(&self) -> OpKind;

    /// Checks the op's parameters (the ranges torchvision itself enforces); the message
    /// names the op.
    fn check(&self) -> Result<(), PipelineError>;

    /// Draws a pixel op's choices for one sample whose image is `size` (height, width) at
    /// this point, appending what runs to `out`. Ops of the other kinds draw nothing here:
    /// the plan draws the geometry, the boxes and the erase boxes itself.
    fn draw(&self, rng: &mut CounterRng, size: (u32, u32), out: &mut Vec<PixelOp>);

    /// For an op of kind [`OpKind::MovingPixel`] that holds others (a wrapper, a policy):
    /// the inner op that moves pixels, named, for messages. By default `None`: the op is
    /// itself the mover (or moves nothing).
    fn moving_inner(&self) -> Option<String> {
        None
    }

    /// Whether the op needs a square image (it swaps rows and columns). By default `false`;
    /// a wrapper answers for what it holds.
    fn needs_square(&self) -> bool {
        false
    }
}

/// Serde's default for every probability that defaults to a half.
pub(super) fn half() -> f64 {
    0.5
}

/// Serde's default for every parameter that defaults to 1.
pub(super) fn one() -> f64 {
    1.0
}

pub(super) fn probability(p: f64, what: &str) -> Result<(), PipelineError> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(PipelineError::Parameter(format!(
            "{what} p={p} is not a probability"
        )))
    }
}

/// A draw that comes up with probability `p`.
pub(super) fn coin(rng: &mut CounterRng, p: f64) -> bool {
    rng.uniform() < p
}

/// A uniform draw in `[r[0], r[1]]` as torchvision draws its factors, angles and sigmas
/// (`torch.empty(1).uniform_(lo, hi)`): a float32 value. A range of one value gives that value
/// rounded to f32 (`ColorJitter(brightness=(1.3, 1.3))` blends with 1.2999999523), which can
/// move a pixel: Pillow steps a scale-only affine's positions in f64 from it.
pub(super) fn torch_uniform(rng: &mut CounterRng, r: [f64; 2]) -> f64 {
    f64::from(rng.uniform_in(r[0], r[1]) as f32)
}

/// `torch.randperm`-like: a uniform permutation (Fisher–Yates).
pub(super) fn shuffle<T>(rng: &mut CounterRng, v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

/// `torch.linspace(start, end, steps)` in f32, with torch's arithmetic: from both ends, each
/// value one fused multiply-add (`start + step * i` rounded once, as torch's CPU kernel is
/// compiled for AVX2 and AVX-512; checked against torch for lengths up to 600).
pub(super) fn linspace_f32(start: f64, end: f64, steps: usize) -> impl Iterator<Item = f32> {
    let (a, b) = (start as f32, end as f32);
    let step = if steps > 1 {
        (b - a) / (steps - 1) as f32
    } else {
        0.0
    };
    let half = steps / 2;
    (0..steps).map(move |i| {
        if i < half {
            step.mul_add(i as f32, a)
        } else {
            (-step).mul_add((steps - i - 1) as f32, b)
        }
    })
}

/// An op that runs one resolved pixel op with probability `p` and draws nothing else: its
/// spec struct (the probability, with a default function's name) and its `OpSpec`. The
/// caller's module imports what the expansion names (`Serialize`, `Deserialize`, `OpSpec`,
/// `OpKind`, `probability`, `coin`, `CounterRng`, `PixelOp`).
macro_rules! coin_op {
    ($(#[$doc:meta])* $name:ident = $op_name:literal, p = $default:literal, $kind:ident, $op:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            /// Probability.
            #[serde(default = $default)]
            pub p: f64,
        }

        impl OpSpec for $name {
            fn kind(&self) -> OpKind {
                OpKind::$kind
            }
            fn check(&self) -> Result<(), PipelineError> {
                probability(self.p, $op_name)
            }
            fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
                if coin(rng, self.p) {
                    out.push($op);
                }
            }
        }
    };
}
pub(super) use coin_op;
