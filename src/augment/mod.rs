//! Augmentation: a declarative [`Pipeline`] of ops, validated into a plan that the workers
//! run per sample as one fused pass (crop + resize, then flip + normalize + cast + layout
//! straight into the batch slot).

mod geometry;
mod kernel;

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use geometry::CropBox;
pub use kernel::{OutputWriter, Resampler};

use crate::hpu::Dtype;
use crate::rng::{CounterRng, Stream};
use crate::Error;

/// An output size: one number for a square, or `[height, width]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Size {
    /// `size x size`.
    Square(u32),
    /// `[height, width]`.
    HeightWidth([u32; 2]),
}

impl Size {
    /// `(height, width)`.
    pub fn hw(self) -> (u32, u32) {
        match self {
            Self::Square(s) => (s, s),
            Self::HeightWidth([h, w]) => (h, w),
        }
    }
}

/// One augmentation step, with torchvision's semantics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum Op {
    /// `RandomResizedCrop(size, scale, ratio)`: a random window of `scale` times the area and
    /// aspect ratio in `ratio` (log-uniform), resized to `size` with antialiased bilinear.
    RandomResizedCrop {
        /// Output size.
        size: Size,
        /// Range of the window's area as a fraction of the image. Default `[0.08, 1.0]`.
        #[serde(default = "default_scale")]
        scale: [f64; 2],
        /// Range of the window's aspect ratio (width / height). Default `[3/4, 4/3]`.
        #[serde(default = "default_ratio")]
        ratio: [f64; 2],
    },
    /// `Resize(size)`: a single number resizes the shorter side to it (keeping the aspect
    /// ratio, the longer side truncated as torchvision does); `[h, w]` resizes to exactly that.
    Resize {
        /// Target size.
        size: Size,
    },
    /// `CenterCrop(size)`.
    CenterCrop {
        /// Output size.
        size: Size,
    },
    /// `RandomHorizontalFlip(p)`.
    RandomHorizontalFlip {
        /// Probability of flipping. Default 0.5.
        #[serde(default = "default_p")]
        p: f64,
    },
    /// `ToTensor()` then `Normalize(mean, std)`: `(x / 255 - mean) / std` per channel.
    Normalize {
        /// Per-channel mean (RGB).
        mean: [f32; 3],
        /// Per-channel standard deviation (RGB).
        std: [f32; 3],
    },
}

fn default_scale() -> [f64; 2] {
    [0.08, 1.0]
}
fn default_ratio() -> [f64; 2] {
    [3.0 / 4.0, 4.0 / 3.0]
}
fn default_p() -> f64 {
    0.5
}

/// ImageNet's per-channel mean, as torchvision's reference scripts use.
pub const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
/// ImageNet's per-channel standard deviation.
pub const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

/// A named, ordered list of ops. Load one from a TOML file (see `pipelines/`) or build it in code.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pipeline {
    /// A name for messages and reports.
    pub name: String,
    /// The ops, applied in order.
    pub ops: Vec<Op>,
}

impl Pipeline {
    /// An empty pipeline named `name`; add ops with [`Pipeline::then`].
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ops: Vec::new(),
        }
    }

    /// Appends `op`.
    #[must_use]
    pub fn then(mut self, op: Op) -> Self {
        self.ops.push(op);
        self
    }

    /// Parses a pipeline from TOML text (`name = "..."` and an `[[ops]]` table per op).
    ///
    /// # Errors
    /// [`Error::Pipeline`] for malformed TOML, an unknown op or an unknown field.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, Error> {
        toml::from_str(text).map_err(|e: toml::de::Error| {
            // One line: the message and where, without the source snippet toml would draw.
            let at = e.span().map_or(String::new(), |span| {
                let before = &text.as_bytes()[..span.start.min(text.len())];
                let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
                format!(" (line {line})")
            });
            Error::Pipeline {
                name: origin.to_string(),
                reason: format!("{}{at}", e.message().trim_end()),
            }
        })
    }

    /// Reads a pipeline file.
    ///
    /// # Errors
    /// The file cannot be read or does not parse.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml(&text, &path.display().to_string())
    }

    /// Validates the ops and resolves them into a per-sample plan for `dtype`.
    pub(crate) fn plan(&self, dtype: Dtype) -> Result<Plan, Error> {
        let err = |reason: String| Error::Pipeline {
            name: self.name.clone(),
            reason,
        };
        let mut geometry = None;
        let mut resize_short = None;
        let mut flip_p = 0.0;
        let mut normalize = None;
        for op in &self.ops {
            let geometry_done = geometry.is_some();
            match *op {
                Op::RandomResizedCrop { size, scale, ratio } => {
                    if geometry_done || resize_short.is_some() {
                        return Err(err(
                            "random_resized_crop must be the only geometric op".into()
                        ));
                    }
                    if !(0.0 < scale[0] && scale[0] <= scale[1] && scale[1] <= 1.0) {
                        return Err(err(format!(
                            "random_resized_crop scale {scale:?} must satisfy 0 < min <= max <= 1"
                        )));
                    }
                    if !(0.0 < ratio[0] && ratio[0] <= ratio[1]) {
                        return Err(err(format!(
                            "random_resized_crop ratio {ratio:?} must satisfy 0 < min <= max"
                        )));
                    }
                    geometry = Some(Geometry::RandomResizedCrop {
                        out: nonzero(size, &err)?,
                        scale,
                        ratio,
                    });
                }
                Op::Resize {
                    size: Size::Square(s),
                } if !geometry_done && resize_short.is_none() => {
                    resize_short = Some(nonzero(Size::Square(s), &err)?.0);
                }
                Op::Resize {
                    size: size @ Size::HeightWidth(_),
                } if !geometry_done && resize_short.is_none() => {
                    geometry = Some(Geometry::Resize {
                        out: nonzero(size, &err)?,
                    });
                }
                Op::CenterCrop { size } if !geometry_done => {
                    let out = nonzero(size, &err)?;
                    if let Some(s) = resize_short {
                        if out.0 > s || out.1 > s {
                            return Err(err(format!(
                                "center_crop {out:?} is larger than the resized shorter side {s}"
                            )));
                        }
                    }
                    geometry = Some(Geometry::CenterCrop {
                        resize_short: resize_short.take(),
                        out,
                    });
                }
                Op::Resize { .. } | Op::CenterCrop { .. } => {
                    return Err(err("supported geometry: random_resized_crop, or resize then center_crop, or resize to [h, w]".into()));
                }
                Op::RandomHorizontalFlip { p } => {
                    if !(0.0..=1.0).contains(&p) {
                        return Err(err(format!(
                            "random_horizontal_flip p={p} is not a probability"
                        )));
                    }
                    flip_p = p;
                }
                Op::Normalize { mean, std } => {
                    if std.iter().any(|&s| !(s.is_finite() && s > 0.0))
                        || mean.iter().any(|m| !m.is_finite())
                    {
                        return Err(err(format!(
                            "normalize std {std:?} must be positive and mean {mean:?} finite"
                        )));
                    }
                    normalize = Some((mean, std));
                }
            }
        }
        if resize_short.is_some() {
            return Err(err("resize of the shorter side alone gives a different shape per image; add center_crop (batch shapes must be static)".into()));
        }
        let geometry = geometry.ok_or_else(|| {
            err(
                "no op sets the output size (random_resized_crop, center_crop or resize [h, w])"
                    .into(),
            )
        })?;
        if dtype == Dtype::I64 {
            return Err(err(
                "i64 is a label type; choose u8, f16, bf16 or f32 for images".into(),
            ));
        }
        if dtype == Dtype::U8 && normalize.is_some() {
            return Err(err("u8 output cannot hold normalized values: remove normalize or choose f32, f16 or bf16".into()));
        }
        Ok(Plan {
            geometry,
            flip_p,
            normalize,
        })
    }
}

fn nonzero(size: Size, err: &impl Fn(String) -> Error) -> Result<(u32, u32), Error> {
    match size.hw() {
        (0, _) | (_, 0) => Err(err(format!("size {size:?} has a zero side"))),
        hw => Ok(hw),
    }
}

/// The geometric part of a pipeline, resolved.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Geometry {
    RandomResizedCrop {
        out: (u32, u32),
        scale: [f64; 2],
        ratio: [f64; 2],
    },
    /// Optional shorter-side resize, then a center crop of `out`.
    CenterCrop {
        resize_short: Option<u32>,
        out: (u32, u32),
    },
    Resize {
        out: (u32, u32),
    },
}

/// A validated pipeline: what every sample goes through.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Plan {
    pub geometry: Geometry,
    pub flip_p: f64,
    pub normalize: Option<([f32; 3], [f32; 3])>,
}

/// The per-sample random choices, a pure function of `(seed, epoch, index)` and the image size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SampleParams {
    pub crop: CropBox,
    pub flip: bool,
}

impl Plan {
    /// Output `(height, width)`.
    pub fn out_hw(&self) -> (u32, u32) {
        match self.geometry {
            Geometry::RandomResizedCrop { out, .. }
            | Geometry::CenterCrop { out, .. }
            | Geometry::Resize { out } => out,
        }
    }

    /// Draws the sample's parameters for a `width`x`height` image.
    pub fn params(
        &self,
        seed: u64,
        epoch: u64,
        index: usize,
        width: u32,
        height: u32,
    ) -> Result<SampleParams, String> {
        let crop = match self.geometry {
            Geometry::RandomResizedCrop { scale, ratio, .. } => {
                let mut rng = CounterRng::new(seed, epoch, index as u64, Stream::Crop);
                geometry::random_resized_crop(width, height, scale, ratio, &mut rng)
            }
            Geometry::CenterCrop { resize_short, out } => {
                geometry::resize_center_crop(width, height, resize_short, out)?
            }
            Geometry::Resize { .. } => CropBox::full(width, height),
        };
        let flip = self.flip_p > 0.0
            && CounterRng::new(seed, epoch, index as u64, Stream::Flip).uniform() < self.flip_p;
        Ok(SampleParams { crop, flip })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_style_pipelines_validate() {
        let train = Pipeline::new("t")
            .then(Op::RandomResizedCrop {
                size: Size::Square(224),
                scale: default_scale(),
                ratio: default_ratio(),
            })
            .then(Op::RandomHorizontalFlip { p: 0.5 })
            .then(Op::Normalize {
                mean: IMAGENET_MEAN,
                std: IMAGENET_STD,
            });
        assert_eq!(train.plan(Dtype::Bf16).unwrap().out_hw(), (224, 224));
        let eval = Pipeline::new("e")
            .then(Op::Resize {
                size: Size::Square(256),
            })
            .then(Op::CenterCrop {
                size: Size::Square(224),
            });
        assert_eq!(
            eval.plan(Dtype::U8).unwrap().geometry,
            Geometry::CenterCrop {
                resize_short: Some(256),
                out: (224, 224)
            }
        );
    }

    #[test]
    fn shapes_that_would_vary_are_rejected() {
        let e = Pipeline::new("x")
            .then(Op::Resize {
                size: Size::Square(256),
            })
            .plan(Dtype::F32)
            .unwrap_err();
        assert!(e.to_string().contains("static"), "{e}");
        let e = Pipeline::new("x")
            .then(Op::RandomHorizontalFlip { p: 0.5 })
            .plan(Dtype::F32)
            .unwrap_err();
        assert!(e.to_string().contains("output size"), "{e}");
    }

    #[test]
    fn u8_output_with_normalize_is_rejected() {
        let p = Pipeline::new("x")
            .then(Op::CenterCrop {
                size: Size::Square(8),
            })
            .then(Op::Normalize {
                mean: IMAGENET_MEAN,
                std: IMAGENET_STD,
            });
        assert!(p.plan(Dtype::U8).is_err());
        assert!(p.plan(Dtype::F16).is_ok());
    }

    #[test]
    fn toml_with_unknown_field_or_op_is_rejected_with_the_name() {
        let e = Pipeline::from_toml(
            "name='a'\n[[ops]]\nop='center_crop'\nsize=4\ncolour=1\n",
            "f.toml",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("f.toml") && e.to_string().contains("colour"),
            "{e}"
        );
        let e = Pipeline::from_toml("name='a'\n[[ops]]\nop='rotate'\n", "f.toml").unwrap_err();
        assert!(e.to_string().contains("rotate"), "{e}");
    }

    #[test]
    fn flip_probability_is_respected() {
        let p = Pipeline::new("x")
            .then(Op::CenterCrop {
                size: Size::Square(8),
            })
            .then(Op::RandomHorizontalFlip { p: 0.5 })
            .plan(Dtype::U8)
            .unwrap();
        let flips = (0..10_000)
            .filter(|&i| p.params(1, 0, i, 10, 10).unwrap().flip)
            .count();
        assert!((4_700..5_300).contains(&flips), "{flips}");
        let never = Plan {
            flip_p: 0.0,
            ..p.clone()
        };
        assert!((0..100).all(|i| !never.params(1, 0, i, 10, 10).unwrap().flip));
    }
}
