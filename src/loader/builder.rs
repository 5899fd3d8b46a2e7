use std::sync::Arc;

use hpuload_decoders::Limits;

use super::{Backend, Loader, LoaderState, OnError};
use crate::augment::Pipeline;
use crate::hpu::{Dtype, Hpu, HpuConfig, Layout};
use crate::sampler::{LastBatch, Shard};
use crate::source::{ReadMode, Source};
use crate::tensor::Placement;
use crate::Error;

/// Configures a [`Loader`]. Every setter documents its default; [`build`](Self::build) checks
/// the whole configuration and reserves every buffer the loader will ever use.
#[must_use = "a builder does nothing until build() is called"]
pub struct LoaderBuilder {
    pub(super) source: Arc<dyn Source>,
    pub(super) batch_size: usize,
    pub(super) shuffle: bool,
    pub(super) seed: u64,
    pub(super) workers: usize,
    pub(super) prefetch: usize,
    pub(super) pipeline: Option<Pipeline>,
    pub(super) views: Vec<Pipeline>,
    pub(super) dtype: Dtype,
    pub(super) layout: Layout,
    pub(super) device: Option<Hpu>,
    pub(super) last_batch: LastBatch,
    pub(super) shard: Option<Shard>,
    pub(super) on_error: OnError,
    pub(super) backend: Backend,
    pub(super) error_budget: f64,
    pub(super) read_mode: ReadMode,
    pub(super) limits: Limits,
    pub(super) resume: Option<LoaderState>,
    pub(super) placement: Placement,
    pub(super) max_boxes: usize,
    pub(super) video: Option<super::VideoSpec>,
    pub(super) video_index: crate::video::IndexCache,
    pub(super) image: usize,
    pub(super) per_batch: bool,
}

impl LoaderBuilder {
    pub(super) fn new(source: Arc<dyn Source>) -> Self {
        Self {
            source,
            batch_size: 256,
            shuffle: false,
            seed: 0,
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            prefetch: 2,
            pipeline: None,
            views: Vec::new(),
            dtype: Dtype::Bf16,
            layout: Layout::Nchw,
            device: None,
            last_batch: LastBatch::Pad,
            shard: None,
            on_error: OnError::Skip,
            backend: Backend::Auto,
            error_budget: 0.01,
            read_mode: ReadMode::Read,
            limits: Limits::default(),
            resume: None,
            placement: Placement::Device,
            max_boxes: 200,
            video: None,
            video_index: crate::video::IndexCache::default(),
            image: 0,
            per_batch: false,
        }
    }

    /// Makes this a video loader: each entry of the source is a video (H.264 in MP4/MOV), and
    /// each sample is its clips as `spec`'s sampler draws them, every frame of a clip through
    /// one drawn plan of the pipeline. Batches are `[B, T, C, H, W]` (NCHW) or `[B, T, H, W,
    /// C]` (NHWC), with a clips axis after `B` when the sampler takes several. Video decodes on
    /// the host: `Backend::Hw` is refused. Default: images.
    pub fn video(mut self, spec: super::VideoSpec) -> Self {
        self.video = Some(spec);
        self
    }

    /// Where a video loader keeps its videos' frame indexes between runs (every video is
    /// indexed when the loader is built, on 16 threads or more, or read from this file). Default:
    /// [`IndexCache::Beside`](crate::video::IndexCache::Beside), a file in the dataset's folder.
    pub fn video_index_cache(mut self, cache: crate::video::IndexCache) -> Self {
        self.video_index = cache;
        self
    }

    /// Samples per batch. Default: 256.
    pub fn batch_size(mut self, n: usize) -> Self {
        self.batch_size = n;
        self
    }

    /// Shuffle every epoch, with `seed` for the order and for all random augmentation.
    /// Default: no shuffling, augmentation seed 0.
    pub fn shuffle(mut self, seed: u64) -> Self {
        self.shuffle = true;
        self.seed = seed;
        self
    }

    /// Seed for random augmentation without shuffling. Default: 0.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Worker threads that read, decode and augment. Default: the number of CPUs.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n;
        self
    }

    /// Batches prepared ahead of the one the training loop waits for. Host memory is
    /// `prefetch + 1` pinned batch buffers, whatever the epoch length. Default: 2.
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = n;
        self
    }

    /// The augmentation pipeline (required), e.g. [`crate::pipelines::resnet50_train`].
    pub fn pipeline(mut self, pipeline: Pipeline) -> Self {
        self.pipeline = Some(pipeline);
        self
    }

    /// More views of each image after the pipeline's own (DINO's multi-crop: two global crops
    /// and several local ones), each with a pipeline of its own that crops or resizes to a
    /// fixed size, and its own random draws. Each image is read and decoded once, on the host,
    /// and every view is made from it; a sample's row of the batch holds its views one after
    /// the other ([`Loader::views`] gives their sizes). Not for detection or video; the media
    /// engine takes no such sample (`Backend::Hw` is refused, `Auto` counts each as a
    /// fallback to the host). Default: none.
    pub fn views(mut self, views: Vec<Pipeline>) -> Self {
        self.views = views;
        self
    }

    /// Which image of each sample this loader makes, where each sample holds several images
    /// that loaders of their own make from the same source in the same order (a ControlNet
    /// table's image and its conditioning image, each column a loader): image `k` draws its
    /// random plans from a seed of its own, so that the images' draws are independent. The
    /// order and the replacements of skipped samples are the seed's alike. Not for video or
    /// several views. Default: 0, the loader's own seed.
    pub fn image_of_sample(mut self, image: usize) -> Self {
        self.image = image;
        self
    }

    /// Every sample of a batch draws its random plan from the batch's key (the global position
    /// of its first slot) instead of its own index, so that the samples of a batch share their
    /// draws: one flip for the whole batch, as a dataset function that hands the stacked batch
    /// to one random transform gives it (diffusers' InstructPix2Pix script). A replacement of
    /// a skipped sample draws the batch's too. Not for video or several views. Default: false.
    pub fn draws_per_batch(mut self, per_batch: bool) -> Self {
        self.per_batch = per_batch;
        self
    }

    /// Output dtype and layout of the image tensor. Default: `Bf16`, `Nchw`.
    pub fn output(mut self, dtype: Dtype, layout: Layout) -> Self {
        self.dtype = dtype;
        self.layout = layout;
        self
    }

    /// The device that receives batches. Default: a new emulated HPU with default settings.
    pub fn device(mut self, hpu: &Hpu) -> Self {
        self.device = Some(hpu.clone());
        self
    }

    /// What to do with an incomplete last batch. Default: [`LastBatch::Pad`].
    pub fn last_batch(mut self, policy: LastBatch) -> Self {
        self.last_batch = policy;
        self
    }

    /// This process's rank and the world size. Default: [`Shard::from_env`] (`RANK`,
    /// `WORLD_SIZE`, `LOCAL_RANK` as torchrun sets them, or mpirun's `OMPI_COMM_WORLD_*`), else
    /// rank 0 of 1.
    pub fn shard(mut self, rank: usize, world_size: usize) -> Self {
        self.shard = Some(Shard {
            rank,
            world_size,
            local_rank: 0,
        });
        self
    }

    /// What a sample that cannot be loaded does. Default: [`OnError::Skip`].
    pub fn on_error(mut self, policy: OnError) -> Self {
        self.on_error = policy;
        self
    }

    /// Where samples are decoded. Default: [`Backend::Auto`] (the media engine for what it
    /// can take, the CPU for the rest).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// With [`OnError::Skip`], the fraction of an epoch's samples that may fail before the
    /// loader gives up (rounded up, so at least one). Default: 0.01.
    pub fn error_budget(mut self, fraction: f64) -> Self {
        self.error_budget = fraction;
        self
    }

    /// How files are read. Default: [`ReadMode::Read`] (measured faster, see BENCHMARKS.md).
    pub fn read_mode(mut self, mode: ReadMode) -> Self {
        self.read_mode = mode;
        self
    }

    /// Decoder limits (decompression-bomb guard). Default: [`Limits::default`].
    pub fn decoder_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Where batches are left: in device memory, or in the pinned host buffer they were
    /// assembled in (for a consumer on the host, such as PyTorch CPU tensors). With
    /// [`Placement::Host`] each batch keeps its buffer until its tensors are dropped, and the
    /// pool maps another buffer rather than wait when the consumer holds them all.
    /// Default: [`Placement::Device`].
    pub fn placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// Boxes per sample in a detection batch's targets (see [`TargetLayout`]): a sample with
    /// more keeps its first `n`, and the rest are counted in [`Report::boxes_over_max`] and
    /// named in a warning. Default: 200, as Gaudi's SSD pads.
    ///
    /// [`TargetLayout`]: crate::TargetLayout
    /// [`Report::boxes_over_max`]: crate::Report::boxes_over_max
    pub fn max_boxes(mut self, n: usize) -> Self {
        self.max_boxes = n;
        self
    }

    /// Continue a run from a saved [`Loader::state`]: the first call to
    /// [`Loader::epoch`] with the saved epoch starts at the saved step, and yields exactly the
    /// batches the uninterrupted run would have. The worker count, prefetch depth and device
    /// may differ; everything that decides batch contents must not, and `build` says which
    /// setting differs when one does. Default: start from epoch 0, step 0.
    pub fn resume(mut self, state: LoaderState) -> Self {
        self.resume = Some(state);
        self
    }

    /// Validates the configuration, allocates the pinned pool, checks the device has room for
    /// the in-flight batches, and starts the workers.
    ///
    /// # Errors
    /// [`Error::Config`] or [`Error::Pipeline`] for invalid settings, [`Error::Hpu`] when the
    /// in-flight batches do not fit in device memory, [`Error::HostMemory`] when host memory
    /// cannot be mapped, [`Error::ThreadStart`] when the workers cannot be started.
    pub fn build(self) -> Result<Loader, Error> {
        let cfg = |setting: &str, m: String| Err(Error::config(setting, m));
        if self.batch_size == 0 {
            return cfg("batch_size", "batch size must be at least 1".into());
        }
        if self.workers == 0 {
            return cfg("workers", "workers must be at least 1".into());
        }
        if !(0.0..=1.0).contains(&self.error_budget) {
            return cfg(
                "error_budget",
                format!(
                    "error budget {} is not a fraction in [0, 1]",
                    self.error_budget
                ),
            );
        }
        if self.pipeline.is_none() {
            return cfg(
                "pipeline",
                "no pipeline: call .pipeline(...) (e.g. hpuload::pipelines::resnet50_train())"
                    .into(),
            );
        }
        if self.device.is_none() {
            let hpu = Hpu::emulated(HpuConfig::default())?;
            return Self {
                device: Some(hpu),
                ..self
            }
            .build();
        }
        Loader::start(self)
    }
}
