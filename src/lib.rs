//! # hpuload
//!
//! A media data loader that feeds device-resident, fixed-shape batches to an HPU (an Intel
//! Gaudi-class accelerator, emulated here): read -> decode -> augment -> pinned batch buffer ->
//! DMA -> device tensor, behind one iterator.
//!
//! ```no_run
//! use hpuload::{pipelines, Dtype, Hpu, HpuConfig, ImageFolder, Layout, Loader};
//!
//! # fn main() -> Result<(), hpuload::Error> {
//! let hpu = Hpu::emulated(HpuConfig::default())?;
//! let mut loader = Loader::builder(ImageFolder::open("data/train")?)
//!     .batch_size(256)
//!     .shuffle(42)
//!     .workers(2)
//!     .prefetch(2)
//!     .pipeline(pipelines::resnet50_train())
//!     .output(Dtype::Bf16, Layout::Nchw)
//!     .device(&hpu)
//!     .build()?;
//! for epoch in 0..90 {
//!     for batch in loader.epoch(epoch) {
//!         let batch = batch?; // batch.images: [256, 3, 224, 224] bf16 on the device
//!         assert_eq!(batch.images.shape(), &[256, 3, 224, 224]);
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Everything random (crop window, flip, shuffle, replacement of a bad file) is a pure function
//! of `(seed, epoch, sample index)`, so batches are bit-identical whatever the worker count.
//! See `ARCHITECTURE.md` for how the pieces fit.

extern crate self as hpuload;

pub mod augment;
mod cli;
mod cpu_time;
pub mod dataset;
mod dtype;
mod error;
pub mod hpu;
mod loader;
pub mod pinned;
pub mod pipelines;
mod rng;
pub mod sampler;
pub mod source;
pub mod stage;
pub mod tensor;
pub mod video;

pub use augment::{ExifReader, Op, OpKind, Pipeline, Size};
pub use error::{Error, SampleError, SampleErrorKind};
pub use hpu::{DeviceTensor, Dtype, Hpu, HpuConfig, HpuError, Layout};
pub use hpuload_decoders as decoders;
pub use loader::{
    Backend, Batch, Epoch, EpochOf, Loader, LoaderBuilder, LoaderState, OnError, OutputSize,
    Report, Skip, StateConfig, TargetLayout, Targets, VideoSpec,
};
pub use sampler::{LastBatch, Shard};
pub use source::{
    ArrowDataset, CacheOptions, CocoDataset, CocoOptions, Entry, FileSpan, FrameFolder, HfOptions,
    ImageArray, ImageFolder, Listing, Manifest, Media, ParquetDataset, ParquetOptions, ReadMode,
    RemoteOptions, SampleBytes, ShardOptions, Source, StorageReport, VideoFolder, VideoManifest,
    WebDataset, IMAGE_EXTENSIONS, VIDEO_EXTENSIONS,
};
pub use stage::{RunsOn, Stage, StageTimes};
pub use tensor::{HostTensor, Placement, Tensor};

/// Runs the `hpuload` command line (`bench`, `make-dataset`, `preview`) with `args`, the
/// program name first, as the `hpuload` binary and `python -m hpuload` do. Returns the exit
/// code: 0 on success, 2 with a one-line message on stderr for an error.
pub fn run_cli<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    cli::run(args)
}
