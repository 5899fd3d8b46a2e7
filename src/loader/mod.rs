//! The loader: a pool of workers that fill pinned batch buffers in place, a DMA stage that
//! moves filled buffers to the device, and an iterator that yields device batches in order.

mod batch;
mod builder;
mod cpu;
mod engine;
mod epoch;
mod layout;
mod replace;
mod route;
mod state;
mod targets;
mod video;
mod views;
mod work;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Sender;
use serde::Serialize;

pub use builder::LoaderBuilder;
pub use epoch::{Epoch, EpochOf};
pub use targets::{TargetLayout, Targets};
pub use video::VideoSpec;

use crate::stage::{Stage, StageTimes};
pub use state::{LoaderState, StateConfig};

use crate::augment::{ExifReader, PixelStage, Plan, SampleBoxes};
use crate::hpu::{Dtype, Hpu, Layout};
use crate::pinned::PinnedPool;
use crate::sampler::{Sampler, Shard};
use crate::source::{ReadMode, Source};
use crate::tensor::{Placement, Tensor};
use crate::Error;

/// A mutex's guard, whether or not a thread panicked while holding it (the loader's state
/// stays consistent across a worker's panic: each value is replaced whole).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
use layout::{BatchLayout, LABEL_BYTES};
use state::{Fnv, Position};
use work::{Job, StageCounters};

/// What a sample that cannot be read or decoded does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    /// Replace it with another sample (chosen deterministically), log it with its path and
    /// reason, count it in the report; fail once the epoch's error budget is spent.
    #[default]
    Skip,
    /// End the epoch with an error that names the file.
    Fail,
}

/// Where samples are decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// Each sample goes to the media engine when it can take it (baseline JPEG within its
    /// capability set) and to the CPU otherwise; one batch may mix both. Every fallback is
    /// counted by reason in [`Report::fallbacks`]. The default.
    #[default]
    Auto,
    /// Only the media engine: a file it cannot take is an error that names the file, whatever
    /// the [`OnError`] policy.
    Hw,
    /// Only the host CPU.
    Cpu,
}

/// The size of the output images.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputSize {
    /// Every image is `[height, width]`: images are `[N, 3, H, W]` (NCHW) or `[N, H, W, 3]`
    /// (one channel for [`crate::Pipeline::single_channel`]).
    Fixed([u32; 2]),
    /// Each image keeps its detection window's size (a detection pipeline without a resize).
    /// Images are `[N, E]`: sample `i`'s `3 * h * w` values come first in row `i` (as
    /// `[3, h, w]` or `[h, w, 3]`), the rest of the row is unused, and its `(h, w)` is in its
    /// target record ([`Targets::size`]). Rows hold `max_pixels` pixels: the most any sample
    /// can have, from the image sizes the annotations give.
    PerSample {
        /// Pixels per row.
        max_pixels: u64,
    },
}

impl OutputSize {
    /// The most pixels one image can have.
    pub fn max_pixels(&self) -> u64 {
        match *self {
            Self::Fixed([h, w]) => u64::from(h) * u64::from(w),
            Self::PerSample { max_pixels } => max_pixels,
        }
    }
}

/// The most pixels an output of `plan` can have over `source`'s images, by the sizes their
/// annotations give.
fn largest_output(source: &dyn Source, plan: &Plan) -> Result<u64, Error> {
    let mut most = 0;
    for index in 0..source.entries().len() {
        let (w, h) = source.objects(index).map_or((0, 0), |o| o.size);
        if w == 0 || h == 0 {
            return Err(Error::config(
                "pipeline",
                format!(
                    "{}: the annotations give no width and height, which size the batches of a pipeline without a resize (add a resize [h, w], or the sizes)",
                    source.entries()[index].path.display()
                ),
            ));
        }
        most = most.max(plan.max_pixels(w, h));
    }
    Ok(most)
}

/// A batch, in device memory (or, with [`Placement::Host`], in a pinned host buffer).
#[derive(Debug)]
pub struct Batch {
    /// Images, `[N, 3, H, W]` (NCHW) or `[N, H, W, 3]` (NHWC), in the configured dtype.
    pub images: Tensor,
    /// Labels, `[N]`, `i64`.
    pub labels: Tensor,
    /// How many leading samples are real; the rest pad the batch to a static shape.
    pub valid: usize,
    /// Dataset index of each sample (after replacement of skipped ones).
    pub indices: Vec<usize>,
    /// The epoch.
    pub epoch: u64,
    /// The batch's position in the epoch, from 0.
    pub step: usize,
    /// Samples that failed and were replaced in this batch.
    pub skipped: Vec<Skip>,
}

/// A sample that failed and was replaced.
#[derive(Clone, Debug, Serialize)]
pub struct Skip {
    /// The failed sample's dataset index.
    pub index: usize,
    /// Its file.
    pub path: PathBuf,
    /// Short reason (see [`crate::SampleError::reason`]).
    pub reason: &'static str,
    /// The full message.
    pub message: String,
}

/// Cumulative statistics of a loader.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// Batches yielded.
    pub batches: u64,
    /// Real (valid) samples yielded.
    pub images: u64,
    /// Samples loaded, padding and replacements included.
    pub samples_loaded: u64,
    /// Compressed bytes read from files.
    pub bytes_read: u64,
    /// Bytes copied host to device.
    pub bytes_dma: u64,
    /// Samples decoded by the media engine.
    pub hw_samples: u64,
    /// Of those, samples decoded at a reduced DCT scale (1/2, 1/4 or 1/8).
    pub hw_dct_scaled: u64,
    /// Samples that could have gone to the media engine but fell back to the CPU, by reason.
    pub fallbacks: BTreeMap<String, u64>,
    /// Detection boxes written into the samples' targets (of every sample loaded).
    pub boxes: u64,
    /// Detection boxes left out of their sample's targets, past `max_boxes`.
    pub boxes_over_max: u64,
    /// Video: frames decoded (every sample loaded).
    pub frames_decoded: u64,
    /// Video: of those, frames decoded only to reach a kept one (from the keyframe before
    /// it), which no clip keeps.
    pub frames_discarded: u64,
    /// Video: the host's CPU time spent decoding those, seconds (part of the `decode_video`
    /// stage's time).
    pub frames_discarded_decode_sec: f64,
    /// Video: the media engine's time spent decoding those, seconds (part of the
    /// `decode_video_engine` stage's time).
    pub frames_discarded_engine_sec: f64,
    /// Video: frames between a keyframe and a kept frame passed over undecoded (not kept, and
    /// no frame refers to them).
    pub frames_skipped: u64,
    /// Samples skipped and replaced.
    pub skipped: u64,
    /// Skips counted by reason.
    pub skipped_by_reason: BTreeMap<String, u64>,
    /// The first skips, with paths (at most 100 are kept).
    pub skips: Vec<Skip>,
    /// Whether the batch buffers are page-locked.
    pub pinned: bool,
    /// Bytes of batch buffers.
    pub pinned_bytes: u64,
    /// Batch buffers mapped beyond the pool because the consumer held all of them (only with
    /// [`Placement::Host`], where a batch keeps its buffer until its tensors are dropped).
    pub extra_buffers: u64,
    /// Time per stage.
    pub stages: StageTimes,
    /// What object storage did (requests, bytes, cache hits), for shards read from a store;
    /// the wall time workers waited for it is the `storage` stage.
    pub storage: Option<crate::StorageReport>,
}

const KEPT_SKIPS: usize = 100;

/// Settings every worker reads.
pub(crate) struct Shared {
    source: Arc<dyn Source>,
    backend: Backend,
    plan: Plan,
    /// What runs after the decode on either path (pixel ops, output writer, erasing).
    stage: Arc<PixelStage>,
    read_mode: ReadMode,
    limits: hpuload_decoders::Limits,
    /// The order's and the replacements' seed.
    seed: u64,
    /// The seed the plans are drawn from: `seed`, or the image's own
    /// ([`LoaderBuilder::image_of_sample`]).
    draws: u64,
    /// The samples of a batch draw from the batch's key ([`LoaderBuilder::draws_per_batch`]).
    per_batch: bool,
    on_error: OnError,
    layout: BatchLayout,
    /// A detection pipeline's target records (the label slots hold them).
    targets: Option<TargetLayout>,
    counters: StageCounters,
    /// Reused by the media engine's fallbacks (rare): CPU scratch, and pinned staging for a
    /// device batch's replaced slot.
    spare: engine::Spare,
    /// A video loader's clips and the videos' indexes (`None`: images).
    video: Option<video::VideoShared>,
    /// The views of each image after the first (`plan`'s), each in its part of the slot;
    /// empty for one view.
    views: Vec<views::View>,
}

impl Shared {
    /// Samples in an epoch: the source's entries, or a video loader's clips when each clip is
    /// a sample of its own.
    pub(crate) fn samples(&self) -> usize {
        self.video
            .as_ref()
            .map_or(self.source.entries().len(), |v| v.samples())
    }

    /// The entry sample `index` reads (for a clip, its video).
    pub(crate) fn entry(&self, index: usize) -> &crate::source::Entry {
        let at = self.video.as_ref().map_or(index, |v| v.video_of(index));
        &self.source.entries()[at]
    }
}

/// Yields device-resident batches; see the crate docs for an example.
pub struct Loader {
    shared: Arc<Shared>,
    sampler: Sampler,
    hpu: Hpu,
    pool: PinnedPool,
    jobs: Option<Sender<Job>>,
    workers: Vec<JoinHandle<()>>,
    prefetch: usize,
    error_budget: f64,
    dtype: Dtype,
    layout: Layout,
    output: OutputSize,
    /// A video sample's shape (every axis but the batch's); `None` for images.
    sample_shape: Option<Vec<usize>>,
    placement: Placement,
    report: Mutex<Report>,
    wait: Duration,
    config: StateConfig,
    position: Position,
    resume: Option<Position>,
}

impl Loader {
    /// Starts configuring a loader over `source`.
    pub fn builder(source: impl Source + 'static) -> LoaderBuilder {
        LoaderBuilder::new(Arc::new(source))
    }

    /// [`Loader::builder`] over a source chosen at run time (as [`crate::source::open`]
    /// returns it).
    pub fn builder_boxed(source: Box<dyn Source>) -> LoaderBuilder {
        LoaderBuilder::new(Arc::from(source))
    }

    fn start(b: LoaderBuilder) -> Result<Self, Error> {
        let mut pipeline = b.pipeline.expect("checked by build");
        // Over images with boxes every pipeline moves them (a resize alone scales them).
        let boxes = !b.source.entries().is_empty() && b.source.objects(0).is_some();
        let over = crate::augment::Over {
            boxes,
            grey: b.source.grey(),
        };
        let mut plan = pipeline.plan_over(b.dtype, over)?;
        let shard = match b.shard {
            Some(s) => s,
            None => crate::sampler::Shard::from_env()?.unwrap_or_default(),
        };
        shard.validate()?;
        let (frames, video) = match b.video.clone() {
            None => (1, None),
            Some(spec) => {
                if plan.single_channel {
                    return Err(Error::config(
                        "video",
                        "single_channel is for images (a clip's frames keep three channels)",
                    ));
                }
                if spec.channels_first && b.layout == Layout::Nhwc {
                    return Err(Error::config(
                        "video",
                        "channels first ([C, T, H, W]) needs the NCHW layout",
                    ));
                }
                let frames = match spec.frames() {
                    Ok(0) => return Err(Error::config("video", "a clip needs at least one frame")),
                    Ok(n) => n,
                    Err(m) => return Err(Error::config("video", m)),
                };
                // A video loader indexes its videos now (each clip may be a sample of its own).
                let video =
                    video::VideoShared::new(spec, frames, b.source.as_ref(), &b.video_index)?;
                // A video pipeline without a crop or resize keeps the frames' size, which must
                // then be the same for every video: a centre crop of that size (the whole
                // frame) says so.
                if plan.fixed_out().is_none() {
                    let (width, height) = video
                        .common_size()
                        .map_err(|m| Error::config("pipeline", m))?;
                    pipeline.ops.insert(
                        0,
                        crate::augment::Op::CenterCrop(crate::augment::CenterCrop {
                            size: crate::augment::Size::HeightWidth([height, width]),
                            pad: false,
                            floor: false,
                        }),
                    );
                    plan = pipeline.plan(b.dtype)?;
                }
                (frames, Some(video))
            }
        };
        let targets = match &plan.detect {
            None => None,
            Some(_) if b.source.entries().is_empty() || b.source.objects(0).is_none() => {
                return Err(Error::config(
                    "pipeline",
                    if plan.fixed_out().is_some() {
                        "a detection pipeline needs a dataset with boxes (a COCO annotation file)"
                    } else {
                        "a pipeline without a crop or resize gives each image its own size, which needs a detection dataset (a COCO annotation file gives the sizes); add a crop or resize"
                    },
                ))
            }
            Some(_) if b.max_boxes == 0 => {
                return Err(Error::config("max_boxes", "must be at least 1"))
            }
            Some(_) => Some(TargetLayout {
                max_boxes: b.max_boxes,
            }),
        };
        if b.video.is_some() && targets.is_some() {
            return Err(Error::config(
                "pipeline",
                "a detection pipeline reads boxes from a COCO dataset, not video",
            ));
        }
        if b.video.is_some() && plan.reshapes_resize() {
            return Err(Error::config(
                "pipeline",
                "pixel ops between a resize and its crop (albu_affine after albu_smallest_max_size among them), and albu_pad_if_needed, are for images",
            ));
        }
        if b.video.is_some() && plan.resize_floats {
            return Err(Error::config(
                "pipeline",
                "resize_floats is for images: a clip's frames are resized as bytes",
            ));
        }
        if let Some(view) = b.views.iter().find(|v| v.resize_floats) {
            return Err(Error::config(
                "views",
                format!(
                    "view {:?} sets resize_floats: views are resized as bytes",
                    view.name
                ),
            ));
        }
        if b.video.is_some() && plan.grey_read {
            return Err(Error::config(
                "pipeline",
                "grey_read reads image files grey; a video's frames are decoded in colour",
            ));
        }
        if b.video.is_some() && plan.exif_orientation.is_some() {
            return Err(Error::config(
                "pipeline",
                "exif_orientation turns images; a video's frames carry no EXIF orientation",
            ));
        }
        if let Some(view) = b
            .views
            .iter()
            .find(|v| v.exif_orientation.then_some(v.exif_reader) != plan.exif_orientation)
        {
            return Err(Error::config(
                "views",
                format!(
                    "view {:?} sets exif_orientation otherwise than the pipeline: every view is made from the one decode, which the pipeline's setting turns or not",
                    view.name
                ),
            ));
        }
        let sampler = Sampler {
            len: video
                .as_ref()
                .map_or(b.source.entries().len(), |v| v.samples()),
            batch_size: b.batch_size,
            shuffle: b.shuffle.then_some(b.seed),
            shard,
            last_batch: b.last_batch,
        };
        if sampler.len == 0 {
            return Err(Error::EmptyDataset {
                path: b.source.origin().to_path_buf(),
                what: "entries",
            });
        }
        if sampler.batches_per_epoch() == 0 {
            return Err(Error::config(
                "last_batch",
                format!(
                    "{} samples over {} ranks give no full batch of {} with last_batch = drop",
                    sampler.len, shard.world_size, b.batch_size
                ),
            ));
        }
        let label_bytes = targets.map_or(LABEL_BYTES, |t| t.bytes());
        let (views, views_bytes) = if b.views.is_empty() {
            (Vec::new(), 0)
        } else {
            if b.video.is_some() {
                return Err(Error::config(
                    "views",
                    "several views are for images, not video",
                ));
            }
            if b.backend == Backend::Hw {
                return Err(Error::config(
                    "views",
                    "several views of an image are made from one decode on the host: use backend auto or cpu",
                ));
            }
            views::build(&plan, &b.views, b.dtype, b.layout, b.seed)?
        };
        if b.image != 0 && (b.video.is_some() || !views.is_empty()) {
            return Err(Error::config(
                "image_of_sample",
                "several images per sample are for images of one view, not video or several views",
            ));
        }
        if b.per_batch && (b.video.is_some() || !views.is_empty()) {
            return Err(Error::config(
                "draws_per_batch",
                "draws shared by a batch are for images of one view, not video or several views",
            ));
        }
        let output = match plan.fixed_out() {
            Some((h, w)) => OutputSize::Fixed([h, w]),
            None => OutputSize::PerSample {
                max_pixels: largest_output(b.source.as_ref(), &plan)?,
            },
        };
        let sample_bytes = match views_bytes {
            0 => usize::try_from(output.max_pixels())
                .ok()
                .and_then(|p| p.checked_mul(plan.channels() * b.dtype.size() * frames))
                .ok_or_else(|| {
                    Error::config("pipeline", "the largest output does not fit in memory")
                })?,
            all => all,
        };
        let (layout, buffer_len) = BatchLayout::new(b.batch_size, sample_bytes, label_bytes)
            .ok_or_else(|| {
                Error::config(
                    "batch_size",
                    format!(
                        "a batch of {} samples of {sample_bytes} bytes does not fit in memory",
                        b.batch_size
                    ),
                )
            })?;
        // A host batch keeps its buffer while the consumer holds it, and a training loop holds
        // the previous batch while it asks for the next one: one more buffer than in flight.
        let buffers = match b.placement {
            Placement::Device => b.prefetch + 1,
            Placement::Host => b.prefetch + 2,
        };
        // Slots sized for the largest output hold mostly smaller ones: pages only as used.
        let pool = match output {
            OutputSize::Fixed(_) => PinnedPool::new(buffers, buffer_len),
            OutputSize::PerSample { .. } => PinnedPool::pageable(buffers, buffer_len),
        };
        let pool = pool.map_err(|source| Error::HostMemory {
            what: "pinned batch buffers",
            source,
        })?;
        let hpu = b.device.expect("set by build");
        // Fail now, not mid-run, if the in-flight batches cannot fit on the device.
        let in_flight = b.prefetch + 1;
        let reserve: Vec<_> = (0..in_flight)
            .map(|_| {
                hpu.alloc(b.batch_size * sample_bytes)
                    .and_then(|i| Ok((i, hpu.alloc(b.batch_size * label_bytes)?)))
            })
            .collect::<Result<_, _>>()?;
        drop(reserve);
        let config = StateConfig {
            samples: sampler.len,
            batch_size: b.batch_size,
            shuffle: b.shuffle,
            seed: b.seed,
            rank: shard.rank,
            world_size: shard.world_size,
            last_batch: b.last_batch,
            backend: b.backend,
            dtype: b.dtype,
            layout: b.layout,
            fingerprint: fingerprint(b.source.as_ref(), &pipeline, &b.views, b.video.as_ref()),
        };
        let resume = match &b.resume {
            Some(state) => Some(state.resume_position(&config, &sampler)?),
            None => None,
        };
        // A video sample's shape: [clips,] T, C, H, W (or C, T, H, W); fixed size checked above.
        let sample_shape = b.video.as_ref().map(|spec| {
            let [h, w] = match output {
                OutputSize::Fixed(hw) => hw.map(|d| d as usize),
                OutputSize::PerSample { .. } => [0, 0],
            };
            match b.layout {
                Layout::Nchw => spec.sample_shape(&[3, h, w]),
                Layout::Nhwc => spec.sample_shape(&[h, w, 3]),
            }
        });
        let shared = Arc::new(Shared {
            stage: Arc::new(match plan.single_channel {
                true => PixelStage::new(b.dtype, b.layout, plan.normalize).one_channel(),
                false => PixelStage::new(b.dtype, b.layout, plan.normalize),
            }),
            source: b.source,
            backend: b.backend,
            plan,
            read_mode: b.read_mode,
            limits: b.limits,
            seed: b.seed,
            draws: crate::rng::image_seed(b.seed, b.image),
            per_batch: b.per_batch,
            on_error: b.on_error,
            layout,
            targets,
            counters: StageCounters::default(),
            spare: engine::Spare::default(),
            video,
            views,
        });
        let (jobs_tx, jobs_rx) = crossbeam_channel::bounded::<Job>(in_flight * b.batch_size);
        let workers = (0..b.workers)
            .map(|i| {
                let (shared, rx) = (Arc::clone(&shared), jobs_rx.clone());
                std::thread::Builder::new()
                    .name(format!("hpuload-worker-{i}"))
                    .spawn(move || work::worker_main(&shared, &rx))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| Error::ThreadStart {
                what: "loader worker",
                source,
            })?;
        let report = Report {
            pinned: pool.is_pinned(),
            pinned_bytes: pool.bytes() as u64,
            ..Report::default()
        };
        Ok(Self {
            shared,
            sampler,
            hpu,
            pool,
            jobs: Some(jobs_tx),
            workers,
            prefetch: b.prefetch,
            error_budget: b.error_budget,
            dtype: b.dtype,
            layout: b.layout,
            output,
            sample_shape,
            placement: b.placement,
            report: Mutex::new(report),
            wait: Duration::ZERO,
            config,
            position: resume.unwrap_or_default(),
            resume,
        })
    }

    /// A video loader's frame indexes: how many came from the index file, how many were
    /// built from the videos' tables, how many failed, and the time it took; `None` for images.
    pub fn video_index_stats(&self) -> Option<&crate::video::IndexStats> {
        self.shared.video.as_ref().map(|v| &v.stats)
    }

    /// With torchvision's clip metadata ([`crate::video::WindowClips`]), the videos whose
    /// frames torchvision's reader (torchcodec) gives otherwise than they are shown, which
    /// hpuload gives as shown: MPEG-4 with B-frames in AVI (torchcodec 0.17 gives their clips
    /// a frame early where they start between keyframes, and a packed bitstream's damaged or
    /// not at all). Empty otherwise.
    pub fn misread_by_torchcodec(&self) -> Vec<&std::path::Path> {
        let Some(video) = self.shared.video.as_ref() else {
            return Vec::new();
        };
        let entries = self.shared.source.entries();
        video
            .misread()
            .iter()
            .map(|&k| entries[k].path.as_path())
            .collect()
    }

    /// With torchvision's clip metadata and [`crate::video::WindowClips::leave_unreadable`],
    /// the videos left to the caller: (dataset entry, file, why hpuload cannot read it as the
    /// metadata counts it). Their clips' slots in each batch are zeros, for the caller to fill
    /// (their labels are written). Empty otherwise.
    pub fn left_videos(&self) -> Vec<(usize, &std::path::Path, &str)> {
        let Some(video) = self.shared.video.as_ref() else {
            return Vec::new();
        };
        let entries = self.shared.source.entries();
        video
            .left()
            .iter()
            .map(|(k, why)| (*k, entries[*k].path.as_path(), why.as_str()))
            .collect()
    }

    /// Where the loader stands: the next batch it will yield (after the last batch of an epoch,
    /// step 0 of the next epoch) and the settings its batches depend on. Save it with the
    /// model's checkpoint and pass it to [`LoaderBuilder::resume`] to continue exactly there.
    /// During an epoch, [`Epoch::state`] gives the same value.
    pub fn state(&self) -> LoaderState {
        LoaderState {
            version: LoaderState::VERSION,
            epoch: self.position.epoch,
            start: self.position.start,
            step: self.position.step,
            skipped: self.position.skipped,
            config: self.config.clone(),
        }
    }

    /// This process's rank, world size and local rank.
    pub fn shard(&self) -> Shard {
        self.sampler.shard
    }

    /// Iterates over the batches of `epoch` (the shuffle and all augmentation depend on it).
    ///
    /// A loader built with [`LoaderBuilder::resume`] starts its first call at the saved step
    /// when `epoch` is the saved epoch (`loader.state().epoch`); every other call starts at
    /// step 0.
    pub fn epoch(&mut self, epoch: u64) -> Epoch<'_> {
        EpochOf::start(self, epoch, None)
    }

    /// Like [`Loader::epoch`], but the iterator owns the loader (for bindings that cannot hold a
    /// borrow, such as Python's); [`EpochOf::into_loader`] gives it back.
    pub fn into_epoch(self, epoch: u64) -> EpochOf<Loader> {
        EpochOf::start(self, epoch, None)
    }

    /// Epoch `epoch` over exactly `order` (dataset indices, repeats allowed), as a user's
    /// sampler gave it (torchvision's `RASampler`, timm's `RepeatAugSampler`, any sampler):
    /// batches are cut from `order` in turn, on this loader's rank and world size, with its
    /// last-batch policy; augmentation is still keyed by `(seed, epoch, index)`. Exact resume
    /// holds when the same order is given again for the saved epoch (a sampler that is
    /// deterministic per epoch).
    ///
    /// # Errors
    /// As [`Loader::check_order`].
    pub fn epoch_in_order(&mut self, epoch: u64, order: &[usize]) -> Result<Epoch<'_>, Error> {
        let order = self.check_order(order)?;
        Ok(EpochOf::start(self, epoch, Some(order)))
    }

    /// [`Loader::epoch_in_order`] with the iterator owning the loader. On error the loader is
    /// handed back with it.
    ///
    /// # Errors
    /// As [`Loader::check_order`].
    #[allow(clippy::result_large_err)]
    pub fn into_epoch_in_order(
        self,
        epoch: u64,
        order: &[usize],
    ) -> Result<EpochOf<Loader>, (Error, Box<Loader>)> {
        match self.check_order(order) {
            Ok(order) => Ok(EpochOf::start(self, epoch, Some(order))),
            Err(e) => Err((e, Box::new(self))),
        }
    }

    /// Checks a given epoch order: every index names an entry, and the order gives at least
    /// one batch under the last-batch policy.
    ///
    /// # Errors
    /// [`Error::Config`] (`order`) naming the first bad index, or an order too short.
    pub fn check_order(&self, order: &[usize]) -> Result<Vec<u32>, Error> {
        let n = self.sampler.len;
        if let Some((at, &bad)) = order.iter().enumerate().find(|(_, &i)| i >= n) {
            return Err(Error::config(
                "order",
                format!("index {bad} at position {at} is past the dataset's {n} entries"),
            ));
        }
        let sampler = self.sampler.with_len(order.len());
        if sampler.batches_per_epoch() == 0 {
            return Err(Error::config(
                "order",
                format!(
                    "{} indices give no batch of {} on {} ranks",
                    order.len(),
                    sampler.batch_size,
                    sampler.shard.world_size
                ),
            ));
        }
        Ok(order.iter().map(|&i| i as u32).collect())
    }

    /// Where batches are left.
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// Batches per epoch on this rank (the same on every rank).
    pub fn batches_per_epoch(&self) -> usize {
        self.sampler.batches_per_epoch()
    }

    /// Samples in the dataset.
    pub fn dataset_len(&self) -> usize {
        self.sampler.len
    }

    /// Class names by label, when the source knows them.
    pub fn classes(&self) -> &[String] {
        self.shared.source.classes()
    }

    /// The device batches go to.
    pub fn device(&self) -> &Hpu {
        &self.hpu
    }

    /// The layout of each sample's target record in the labels tensor, for a detection
    /// pipeline (the labels are then `u8 [n, record bytes]`); `None`: i64 class labels.
    pub fn target_layout(&self) -> Option<TargetLayout> {
        self.shared.targets
    }

    /// Output `(dtype, layout, size)`.
    pub fn output(&self) -> (Dtype, Layout, OutputSize) {
        (self.dtype, self.layout, self.output)
    }

    /// The channels of each output pixel: 3, or 1 for grey images handed out as one
    /// ([`crate::Pipeline::single_channel`]): images `[N, 1, H, W]` (or `[N, H, W, 1]`).
    pub fn channels(&self) -> usize {
        self.shared.stage.channels()
    }

    /// The random choices for sample `index` of a `width`x`height` image in `epoch`: the crop
    /// window (in source pixels) and whether it is flipped. Both backends use exactly these, so
    /// a test can apply the same window with another library and compare pixels.
    ///
    /// # Errors
    /// The pipeline cannot process an image of that size (e.g. a crop larger than the image).
    pub fn sample_params(
        &self,
        epoch: u64,
        index: usize,
        width: u32,
        height: u32,
    ) -> Result<(crate::augment::CropBox, bool), Error> {
        let p = self.sample_plan(epoch, index, width, height)?;
        Ok((p.crop, p.pixels.flip))
    }

    /// Every random choice for sample `index` of a `width`x`height` image in `epoch`: the crop
    /// window and interpolation, the pixel ops with their drawn parameters in order, the flip
    /// fused into the output writer, and the erase boxes. Both backends execute exactly this,
    /// so a test can apply the same parameters with torchvision and compare pixels. A loader
    /// whose batches share their draws ([`LoaderBuilder::draws_per_batch`]) draws each sample's
    /// from its batch's key instead: give that key as `index`.
    ///
    /// # Errors
    /// The pipeline cannot process an image of that size (e.g. a crop larger than the image).
    pub fn sample_plan(
        &self,
        epoch: u64,
        index: usize,
        width: u32,
        height: u32,
    ) -> Result<crate::augment::SamplePlan, Error> {
        self.shared
            .plan
            .sample(
                self.shared.draws,
                epoch,
                index,
                (width, height),
                self.shared.source.objects(index).map(SampleBoxes::from),
            )
            .map_err(|e| Error::Pipeline {
                name: "sample_plan".into(),
                reason: e.into(),
            })
    }

    /// Each view's output `[height, width]`: the pipeline's, then those of the views given
    /// with [`LoaderBuilder::views`] (a sample's images lie one after the other in its row of
    /// the batch, `[3, h, w]` each in NCHW). One entry for a loader of one view; empty when
    /// each image keeps its own size.
    pub fn views(&self) -> Vec<[u32; 2]> {
        let first = match self.output {
            OutputSize::Fixed(hw) => hw,
            OutputSize::PerSample { .. } => return Vec::new(),
        };
        let rest = self.shared.views.iter().map(|v| [v.size.0, v.size.1]);
        std::iter::once(first).chain(rest).collect()
    }

    /// [`Loader::sample_plan`] of view `view` (0: the pipeline's; see [`LoaderBuilder::views`]).
    ///
    /// # Errors
    /// No such view, or the view's pipeline cannot process an image of that size.
    pub fn view_plan(
        &self,
        view: usize,
        epoch: u64,
        index: usize,
        width: u32,
        height: u32,
    ) -> Result<crate::augment::SamplePlan, Error> {
        if view == 0 {
            return self.sample_plan(epoch, index, width, height);
        }
        let v = self.shared.views.get(view - 1).ok_or_else(|| {
            Error::config(
                "view",
                format!("view {view} of {}", self.shared.views.len() + 1),
            )
        })?;
        v.sample(epoch, index, (width, height))
            .map_err(|e| Error::Pipeline {
                name: "view_plan".into(),
                reason: e.into(),
            })
    }

    /// Whether batch buffers are page-locked.
    pub fn is_pinned(&self) -> bool {
        self.pool.is_pinned()
    }

    /// Statistics so far.
    pub fn report(&self) -> Report {
        let mut r = self
            .report
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let c = &self.shared.counters;
        r.samples_loaded = c.samples.load(Ordering::Relaxed);
        r.bytes_read = c.bytes_read.load(Ordering::Relaxed);
        r.hw_samples = c.hw_samples.load(Ordering::Relaxed);
        r.hw_dct_scaled = c.hw_scaled.load(Ordering::Relaxed);
        r.boxes_over_max = c.boxes_over_max.load(Ordering::Relaxed);
        r.boxes = c.boxes.load(Ordering::Relaxed);
        r.frames_decoded = c.frames_decoded.load(Ordering::Relaxed);
        r.frames_discarded = c.frames_discarded.load(Ordering::Relaxed);
        let [host, engine] = &c.frames_discarded_ns;
        r.frames_discarded_decode_sec = host.load(Ordering::Relaxed) as f64 * 1e-9;
        r.frames_discarded_engine_sec = engine.load(Ordering::Relaxed) as f64 * 1e-9;
        r.frames_skipped = c.frames_skipped.load(Ordering::Relaxed);
        r.fallbacks = c
            .fallbacks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
        r.stages = c.times();
        r.stages.set(Stage::Dma, self.hpu.dma_stats().busy);
        r.stages.set(Stage::Wait, self.wait);
        r.stages.set(
            Stage::Storage,
            self.shared
                .source
                .storage()
                .map_or(Duration::ZERO, |s| s.wait),
        );
        r.bytes_dma = self.hpu.dma_stats().host_to_device_bytes;
        r.extra_buffers = self.pool.grown();
        r.storage = self.shared.source.storage();
        r
    }

    /// Worker threads still running (all of them unless one died).
    pub fn live_workers(&self) -> usize {
        self.workers.iter().filter(|w| !w.is_finished()).count()
    }
}

/// Hash of what the batches are made of beyond the plain settings: every entry (path and
/// label) and the pipeline.
fn fingerprint(
    source: &dyn Source,
    pipeline: &crate::Pipeline,
    views: &[crate::Pipeline],
    video: Option<&VideoSpec>,
) -> String {
    let mut h = Fnv::new();
    for e in source.entries() {
        h.write(e.path.as_os_str().as_encoded_bytes());
        h.write(&e.label.to_le_bytes());
    }
    h.write(
        serde_json::to_string(&pipeline.ops)
            .unwrap_or_default()
            .as_bytes(),
    );
    if pipeline.exif_orientation {
        // Turned images are other pixels (off adds nothing: earlier states still match).
        h.write(b"exif_orientation");
        if pipeline.exif_reader != ExifReader::Pillow {
            h.write(b"torchvision");
        }
    }
    if pipeline.resize_floats {
        h.write(b"resize_floats");
    }
    if pipeline.grey_read {
        h.write(b"grey_read");
    }
    if let Some(weights) = pipeline.grey_png_weights {
        h.write(b"grey_png_weights");
        for w in weights {
            h.write(&w.to_le_bytes());
        }
    }
    for view in views {
        h.write(b"view");
        h.write(
            serde_json::to_string(&view.ops)
                .unwrap_or_default()
                .as_bytes(),
        );
    }
    // A video loader's clips change every sample's contents.
    if let Some(spec) = video {
        h.write(format!("{:?}", spec.sampler).as_bytes());
    }
    h.hex()
}

impl std::fmt::Debug for Loader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loader")
            .field("origin", &self.shared.source.origin())
            .field("samples", &self.sampler.len)
            .field("batches_per_epoch", &self.batches_per_epoch())
            .field("workers", &self.workers.len())
            .field("pinned", &self.pool.is_pinned())
            .finish_non_exhaustive()
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.jobs = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}
