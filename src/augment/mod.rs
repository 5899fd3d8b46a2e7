//! Augmentation: a declarative [`Pipeline`] of [`Op`]s with torchvision's semantics, validated
//! into a plan that draws each sample's [`SamplePlan`] once, from the counter-based generator
//! keyed by `(seed, epoch, index)`: the crop window and interpolation, then the pixel ops
//! (flips, colour, auto-augment, blur, warps) with their magnitudes and order, and the erase
//! boxes. Both paths execute that same plan: crop + resize to an RGB8 image, the pixel ops on
//! it ([`apply`]), then flip + normalize + cast + layout into the batch slot ([`OutputWriter`])
//! and the erase boxes on the written slot ([`PixelStage`]).
//!
//! Files: `op.rs` (the [`Op`] list, [`OpKind`], the wrappers, the pipeline file), `plan.rs`
//! (validation, the phase rules, `Plan::sample`), `pixel.rs` ([`PixelOp`], [`apply`],
//! [`PixelStage`]); each family file owns its ops' specs (fields, defaults, check, kind,
//! draw) and kernels: `geometry.rs` (crops, resizes, flips, warps), `colour.rs`, `blur.rs`
//! (Gaussian blur, sharpness), `autoaugment.rs` (torchvision's policies), `timm.rs` (timm's
//! policies, with Pillow's arithmetic from `pil/`), `detect.rs` (the box-aware ops),
//! `erase.rs`, `kernel.rs` (normalize, the resampler and the output writer), `two_tap.rs`
//! (torch's bilinear resize without antialias), `mix.rs`
//! (MixUp and CutMix, on whole batches), `paste.rs` (the detection reference's copy-paste of
//! objects between a batch's images), `albu.rs` (albumentations' own ops, with OpenCV's
//! warp and byte HSV), `albu_filter.rs` (albumentations' blurs and Gaussian noise).

mod albu;
mod albu_clahe;
mod albu_distort;
mod albu_filter;
mod albu_jpeg;
mod albu_tone;
mod autoaugment;
mod blur;
mod colour;
mod cv2_area;
mod cv2_cubic;
mod cv2_linear;
pub(crate) mod detect;
mod erase;
mod error;
mod float_resample;
mod geometry;
mod kernel;
pub mod mix;
mod op;
pub mod paste;
mod pil;
mod pixel;
mod plan;
mod run;
pub mod segment;
mod spec;
mod timm;
mod torch_f32;
mod two_tap;

pub use albu::{
    AlbuAffine, AlbuBrightnessContrast, AlbuChannelDropout, AlbuChannelShuffle, AlbuColorJitter,
    AlbuHueSaturationValue, AlbuLongestMaxSize, AlbuPadIfNeeded, AlbuRandomGamma,
    AlbuRandomRotate90, AlbuRgbShift, AlbuSmallestMaxSize, AlbuToGray, AlbuTranspose,
    CoarseDropout, Cv2Border, PermuteChannels,
};
pub use albu_clahe::AlbuClahe;
pub use albu_distort::{AlbuDownscale, AlbuGridDistortion, AlbuOpticalDistortion, GridMap};
pub use albu_filter::{
    AlbuBlur, AlbuEmboss, AlbuGaussNoise, AlbuGaussianBlur, AlbuMedianBlur, AlbuMotionBlur,
    AlbuSharpen, MotionKernel, Noise, MOTION_MAX_KERNEL,
};
pub use albu_jpeg::AlbuImageCompression;
pub use albu_tone::{AlbuEqualize, AlbuPosterize, AlbuSolarize, EqualizeMode};
pub use autoaugment::{AugMix, AutoAugment, AutoAugmentPolicy, RandAugment, TrivialAugmentWide};
pub use blur::{GaussianBlur, RandomAdjustSharpness};
pub use colour::{
    ColorJitter, RandomAutocontrast, RandomEqualize, RandomGrayscale, RandomInvert,
    RandomPhotometricDistort, RandomPosterize, RandomSolarize,
};
pub use detect::{
    CanvasJob, ClampBoundingBoxes, DetectPlan, FixedCrop, FixedSizeCrop, RandomIoUCrop,
    RandomShortestSize, RandomZoomOut, SampleBoxes, SanitizeBoundingBoxes, ScaleJitter,
};
pub use erase::{EraseBox, EraseValue, RandomErasing, RandomFill};
pub use error::{AugmentError, PipelineError};
pub(crate) use geometry::compose_padded;
pub use geometry::{
    CenterCrop, CenterSquare, CropBox, Interpolation, Padding, PaddingMode, RandomAffine,
    RandomCrop, RandomHorizontalFlip, RandomResize, RandomResizedCrop, RandomRotation,
    RandomVerticalFlip, Resize, Size,
};
pub use kernel::{
    ByteValues, Normalize, OutputWriter, Resampler, ToFloat, IMAGENET_MEAN, IMAGENET_STD,
};
pub use op::{ExifReader, Op, Pipeline, RandomApply, RandomChoice, RandomOrder};
pub use pil::resample::{set_pass_order as set_pillow_pass_order, PassOrder as PillowPassOrder};
pub use pixel::{AugMixPlan, PilEnhance, PilFilter, PixelOp, Scratch, Warp};
pub(crate) use plan::{Over, Plan};
pub use plan::{ResizedCrop, SamplePlan};
pub use run::{apply, Cut, PixelPlan, PixelStage, Placed, Warped};
pub use spec::OpKind;
pub use timm::{
    Hparams as TimmHparams, PolicyOp as TimmPolicyOp, TimmAugMix, TimmAutoAugment, TimmOp,
    TimmRandAugment,
};
pub use torch_f32::{set_torch_exp, VmlExp};
