//! `hpuload._hpuload`: the loader as a Python extension module. The pure-Python package
//! `hpuload` (next to this crate) builds on it; `hpuload.torch` speaks torch's language.
//!
//! Batches stay in the pinned host buffer they were assembled in ([`Placement::Host`]) and
//! cross into torch through DLPack (`dlpack.rs`) without a copy: the buffer goes back to the
//! loader's pool when torch frees the last tensor that uses it.

mod dlpack;
mod errors;
mod masks;
mod mix;
mod options;
mod paste;

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hpuload::{
    Backend, Dtype, EpochOf, ExifReader, LastBatch, Layout, Loader as CoreLoader, LoaderState,
    OnError, Pipeline, Placement,
};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use serde::de::DeserializeOwned;

use errors::to_py;

/// Parses a snake_case setting (`"pad"`, `"bf16"`, ...) into the crate's enum, naming the
/// argument when it is not one of them.
fn setting<T: DeserializeOwned>(argument: &str, value: &str, choices: &str) -> PyResult<T> {
    serde_json::from_value(serde_json::Value::String(value.to_string()))
        .map_err(|_| PyValueError::new_err(format!("{argument}={value:?} is not one of {choices}")))
}

enum Run {
    Idle(CoreLoader),
    Epoch(EpochOf<CoreLoader>),
    /// Only while moving between the two; a panic there would leave it (never observed).
    Moving,
}

impl Run {
    fn loader(&self) -> PyResult<&CoreLoader> {
        match self {
            Self::Idle(l) => Ok(l),
            Self::Epoch(e) => Ok(e.loader()),
            Self::Moving => Err(PyRuntimeError::new_err(
                "the loader is in an unusable state",
            )),
        }
    }

    /// The loader back from a running epoch (cancelling what is outstanding).
    fn stop(&mut self) {
        *self = match std::mem::replace(self, Self::Moving) {
            Self::Epoch(e) => Self::Idle(e.into_loader()),
            other => other,
        };
    }
}

/// The Rust loader: reads, decodes and augments on its own threads and yields batches whose
/// tensors live in pinned host memory. Use `hpuload.torch.DataLoader` rather than this class.
#[pyclass(frozen, module = "hpuload._hpuload")]
struct Loader {
    run: Mutex<Run>,
    /// The process that built it: its threads exist only there.
    pid: u32,
}

/// A loader object dropped in a process forked from the one that built it (a worker of
/// torch's DataLoader, or of `multiprocessing` with fork, collecting the parent's garbage)
/// has none of its threads there: joining them would wait on threads that never run, or
/// abort. The child's copy is left as it is, for the child's exit to reclaim.
impl Drop for Loader {
    fn drop(&mut self) {
        if std::process::id() != self.pid {
            let run = std::mem::replace(
                self.run.get_mut().unwrap_or_else(|p| p.into_inner()),
                Run::Moving,
            );
            std::mem::forget(run);
        }
    }
}

#[pymethods]
impl Loader {
    /// Builds a loader from an `hpuload._options.LoaderOptions` (`hpuload.torch` makes one):
    /// its `source` names the dataset; `pipeline` is a built-in name (`"resnet50_train"`), the
    /// path of a pipeline TOML file, or JSON (`{"name": ..., "ops": [...]}`).
    #[new]
    fn new(py: Python<'_>, options: options::Options<'_>) -> PyResult<Self> {
        let options::Options {
            source,
            pipeline,
            batch_size,
            max_boxes,
            shuffle,
            seed,
            workers,
            prefetch,
            dtype,
            layout,
            last_batch,
            rank,
            world_size,
            on_error,
            error_budget,
            backend,
            resume,
            video,
            exif_orientation,
            exif_reader,
            image_of_sample,
            draws_per_batch,
        } = options;
        if batch_size == 0 {
            return Err(PyValueError::new_err("batch_size must be at least 1"));
        }
        if workers == 0 {
            return Err(PyValueError::new_err(
                "num_workers (threads) must be at least 1",
            ));
        }
        let dtype: Dtype = setting("dtype", &dtype, "u8, f16, bf16, f32")?;
        if dtype == Dtype::I64 {
            return Err(PyValueError::new_err(
                "dtype=\"i64\" is a label type, not an image type",
            ));
        }
        let layout: Layout = setting("layout", &layout, "nchw, nhwc")?;
        let last_batch: LastBatch = setting("last_batch", &last_batch, "pad, drop, partial")?;
        let on_error: OnError = setting("on_error", &on_error, "skip, fail")?;
        let backend: Backend = setting("backend", &backend, "auto, hw, cpu")?;
        let (mut pipeline, mut views) = parse_views(&pipeline)?;
        let exif_reader: ExifReader = setting("exif_reader", &exif_reader, "pillow, torchvision")?;
        if exif_orientation {
            if pipeline.exif_orientation && pipeline.exif_reader != exif_reader {
                return Err(PyValueError::new_err(
                    "the transform turns images by Pillow's reading of their EXIF orientation and the dataset by torchvision's",
                ));
            }
            for p in std::iter::once(&mut pipeline).chain(&mut views) {
                p.exif_orientation = true;
                p.exif_reader = exif_reader;
            }
        }
        let resume = resume
            .map(|text| {
                serde_json::from_str::<LoaderState>(&text).map_err(|e| {
                    PyValueError::new_err(format!("state_dict is not a loader state: {e}"))
                })
            })
            .transpose()?;
        let open = options::source(&source)?;
        let video = video.map(options::Video::spec).transpose()?;
        // Listing a folder and starting threads: no Python objects involved.
        let built = py.detach(move || {
            let builder = CoreLoader::builder_boxed(open()?)
                .batch_size(batch_size)
                .max_boxes(max_boxes)
                .seed(seed)
                .workers(workers)
                .prefetch(prefetch)
                .pipeline(pipeline)
                .views(views)
                .output(dtype, layout)
                .last_batch(last_batch)
                .on_error(on_error)
                .error_budget(error_budget)
                .backend(backend)
                .image_of_sample(image_of_sample)
                .draws_per_batch(draws_per_batch)
                .placement(Placement::Host);
            let builder = if shuffle {
                builder.shuffle(seed)
            } else {
                builder
            };
            let builder = match (rank, world_size) {
                (Some(r), Some(w)) => builder.shard(r, w),
                (None, None) => builder,
                _ => {
                    return Err(hpuload::Error::config(
                        "rank/world_size",
                        "give both rank and world_size, or neither",
                    ))
                }
            };
            let builder = match resume {
                Some(state) => builder.resume(state),
                None => builder,
            };
            let builder = match video {
                Some((spec, cache)) => builder.video(spec).video_index_cache(cache),
                None => builder,
            };
            builder.build()
        });
        Ok(Self {
            run: Mutex::new(Run::Idle(built.map_err(to_py)?)),
            pid: std::process::id(),
        })
    }

    /// Batches per epoch on this rank (the same on every rank).
    fn __len__(&self) -> PyResult<usize> {
        self.with_run(|run| Ok(run.loader()?.batches_per_epoch()))
    }

    /// Samples in the dataset (all ranks).
    #[getter]
    fn dataset_len(&self) -> PyResult<usize> {
        self.with_run(|run| Ok(run.loader()?.dataset_len()))
    }

    /// With torchvision's clip metadata, the videos torchvision's reader (torchcodec) gives
    /// other frames of than hpuload, which gives them as shown: MPEG-4 with B-frames in AVI.
    #[getter]
    fn misread_by_torchcodec(&self) -> PyResult<Vec<String>> {
        self.with_run(|run| {
            let loader = run.loader()?;
            let paths = loader.misread_by_torchcodec();
            Ok(paths.iter().map(|p| p.display().to_string()).collect())
        })
    }

    /// With torchvision's clip metadata and `leave_unreadable_videos`, the videos hpuload
    /// cannot read as the metadata counts them: (dataset index, path, why). Their clips'
    /// slots are zeros, for the caller to fill.
    #[getter]
    fn left_videos(&self) -> PyResult<Vec<(usize, String, String)>> {
        self.with_run(|run| {
            let loader = run.loader()?;
            let left = loader.left_videos();
            Ok(left
                .iter()
                .map(|(k, p, why)| (*k, p.display().to_string(), why.to_string()))
                .collect())
        })
    }

    /// Class names by label (an ImageFolder's sorted subfolders).
    #[getter]
    fn classes(&self) -> PyResult<Vec<String>> {
        self.with_run(|run| Ok(run.loader()?.classes().to_vec()))
    }

    /// `(rank, world_size)` this loader reads for.
    #[getter]
    fn shard(&self) -> PyResult<(usize, usize)> {
        self.with_run(|run| {
            let s = run.loader()?.shard();
            Ok((s.rank, s.world_size))
        })
    }

    /// Whether the batch buffers are page-locked (`mlock` succeeded).
    #[getter]
    fn pinned(&self) -> PyResult<bool> {
        self.with_run(|run| Ok(run.loader()?.is_pinned()))
    }

    /// Output `(dtype, layout, height, width)`; height and width are 0 when each image keeps
    /// its own size (a detection pipeline without a resize: its size is in its target record).
    #[getter]
    fn output(&self) -> PyResult<(String, String, u32, u32)> {
        self.with_run(|run| {
            let (dtype, layout, size) = run.loader()?.output();
            let [h, w] = match size {
                hpuload::OutputSize::Fixed(hw) => hw,
                hpuload::OutputSize::PerSample { .. } => [0, 0],
            };
            let layout = match layout {
                Layout::Nchw => "nchw",
                Layout::Nhwc => "nhwc",
            };
            Ok((dtype.name().to_string(), layout.to_string(), h, w))
        })
    }

    /// Each view's output `(height, width)`: one for a loader of one view, several for a
    /// loader of several views of each image (each sample's row holds them one after the
    /// other), none when each image keeps its own size.
    #[getter]
    fn views(&self) -> PyResult<Vec<(u32, u32)>> {
        self.with_run(|run| {
            Ok(run
                .loader()?
                .views()
                .into_iter()
                .map(|[h, w]| (h, w))
                .collect())
        })
    }

    /// Starts (or restarts) epoch `epoch`: outstanding work of a running epoch is cancelled.
    /// A loader built with `resume=` starts its saved epoch at the saved step. With `order`
    /// (a user's sampler's indices for this epoch), batches are cut from exactly that order.
    #[pyo3(signature = (epoch, order=None))]
    fn start_epoch(&self, py: Python<'_>, epoch: u64, order: Option<Vec<usize>>) -> PyResult<()> {
        // Cancelling waits for the batches being decoded: without the GIL.
        let mut guard = self.lock()?;
        let run: &mut Run = &mut guard;
        let mut failed = None;
        py.detach(|| {
            run.stop();
            *run = match std::mem::replace(&mut *run, Run::Moving) {
                Run::Idle(l) => match order {
                    None => Run::Epoch(l.into_epoch(epoch)),
                    Some(order) => match l.into_epoch_in_order(epoch, &order) {
                        Ok(e) => Run::Epoch(e),
                        Err((e, l)) => {
                            failed = Some(e);
                            Run::Idle(*l)
                        }
                    },
                },
                other => other,
            };
        });
        match failed {
            Some(e) => Err(errors::to_py(e)),
            None => Ok(()),
        }
    }

    /// The drawn plan of sample `index` of a `width`x`height` image in `epoch`, as JSON: crop
    /// window, interpolation, pixel ops with their parameters in order, the fused flip, the
    /// erase boxes (what both backends execute; tests compare it with torchvision).
    /// With `view`, that view's plan (0: the pipeline's own).
    #[pyo3(signature = (epoch, index, width, height, view=0))]
    fn sample_plan(
        &self,
        epoch: u64,
        index: usize,
        width: u32,
        height: u32,
        view: usize,
    ) -> PyResult<String> {
        self.with_run(|run| {
            let plan = run
                .loader()?
                .view_plan(view, epoch, index, width, height)
                .map_err(errors::to_py)?;
            serde_json::to_string(&plan).map_err(|e| PyValueError::new_err(e.to_string()))
        })
    }

    /// The next batch of the running epoch, or `None` at its end. Waits without the GIL and
    /// checks for Ctrl-C every 25 ms (raising `KeyboardInterrupt`); with `timeout` (seconds),
    /// a batch that takes longer raises `RuntimeError` as torch's DataLoader does. Either way
    /// the epoch ends and the state stays that after the last batch returned.
    #[pyo3(signature = (timeout=None))]
    fn next_batch(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Batch>> {
        let deadline = timeout
            .filter(|t| *t > 0.0)
            .map(|t| (t, Instant::now() + Duration::from_secs_f64(t)));
        let mut guard = self.lock()?;
        let run: &mut Run = &mut guard;
        let Run::Epoch(epoch) = run else {
            return Ok(None);
        };
        let mut interrupt: Option<PyErr> = None;
        let next = py.detach(|| {
            epoch.next_or_stop(|| {
                if deadline.is_some_and(|(_, at)| Instant::now() >= at) {
                    return true;
                }
                Python::attach(|py| match py.check_signals() {
                    Ok(()) => false,
                    Err(e) => {
                        interrupt = Some(e);
                        true
                    }
                })
            })
        });
        let result = match next {
            None => Ok(None),
            Some(Ok(batch)) => return Batch::new(py, batch).map(Some),
            Some(Err(hpuload::Error::Interrupted)) => Err(interrupt.unwrap_or_else(|| {
                let seconds = deadline.map_or(0.0, |(t, _)| t);
                PyRuntimeError::new_err(format!("DataLoader timed out after {seconds} seconds"))
            })),
            Some(Err(e)) => Err(to_py(e)),
        };
        py.detach(|| run.stop());
        result
    }

    /// Cancels the running epoch, if any (waits for the batches being decoded). In a process
    /// forked from the loader's, nothing: there is nothing there to wait for.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        if self.forked() {
            return Ok(());
        }
        let mut guard = self.lock()?;
        let run: &mut Run = &mut guard;
        py.detach(|| run.stop());
        Ok(())
    }

    /// The loader's state after the last batch returned, as JSON: pass it as `resume=` to
    /// continue exactly there.
    fn state(&self) -> PyResult<String> {
        self.with_run(|run| {
            serde_json::to_string(&run.loader()?.state())
                .map_err(|e| PyRuntimeError::new_err(e.to_string()))
        })
    }

    /// Cumulative statistics (images, bytes, stage times, skips, fallbacks), as JSON.
    fn report(&self) -> PyResult<String> {
        self.with_run(|run| {
            serde_json::to_string(&run.loader()?.report())
                .map_err(|e| PyRuntimeError::new_err(e.to_string()))
        })
    }

    /// The crop window `(top, left, height, width)` in source pixels and the flip that sample
    /// `index` of a `width`x`height` image gets in `epoch`, exactly as the loader applies them.
    fn sample_params(
        &self,
        epoch: u64,
        index: usize,
        width: u32,
        height: u32,
    ) -> PyResult<((f64, f64, f64, f64), bool)> {
        self.with_run(|run| {
            let (c, flip) = run
                .loader()?
                .sample_params(epoch, index, width, height)
                .map_err(to_py)?;
            Ok(((c.top, c.left, c.height, c.width), flip))
        })
    }
}

impl Loader {
    /// Whether this is a copy of the loader in a process forked from the one that built it.
    fn forked(&self) -> bool {
        std::process::id() != self.pid
    }

    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, Run>> {
        if self.forked() {
            return Err(PyRuntimeError::new_err(format!(
                "this loader was built in process {}, and this process was forked from it: its \
                 threads are not here (build a loader in this process)",
                self.pid
            )));
        }
        // Never block on the lock while holding the GIL: the holder may need the GIL to check
        // for Ctrl-C, and would wait for us forever.
        match self.run.try_lock() {
            Ok(g) => Ok(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => Err(PyRuntimeError::new_err(
                "the loader is in use by another thread; iterate it from one thread at a time",
            )),
        }
    }

    fn with_run<T>(&self, f: impl FnOnce(&Run) -> PyResult<T>) -> PyResult<T> {
        f(&*self.lock()?)
    }
}

/// Several views of each image (DINO's multi-crop), as JSON: `{"views": [pipeline, ...]}`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Views {
    views: Vec<Pipeline>,
}

/// The loader's pipeline and the views after it: a pipeline as JSON (`{"name": ..., "ops":
/// [...]}`), a built-in name, a TOML file, or several views as `{"views": [pipeline, ...]}`.
fn parse_views(text: &str) -> PyResult<(Pipeline, Vec<Pipeline>)> {
    if !text.contains("\"views\"") {
        return Ok((parse_pipeline(text)?, Vec::new()));
    }
    let Views { mut views } = serde_json::from_str(text)
        .map_err(|e| errors::PipelineError::new_err(format!("views: {e}")))?;
    if views.is_empty() {
        return Err(errors::PipelineError::new_err(
            "views: give at least one pipeline",
        ));
    }
    let first = views.remove(0);
    Ok((first, views))
}

/// A pipeline as JSON (`{"name": ..., "ops": [...]}`), a built-in name, or a TOML file.
fn parse_pipeline(text: &str) -> PyResult<Pipeline> {
    if text.trim_start().starts_with('{') {
        serde_json::from_str(text)
            .map_err(|e| errors::PipelineError::new_err(format!("pipeline: {e}")))
    } else {
        hpuload::pipelines::resolve(text).map_err(to_py)
    }
}

/// One batch: `images` and `labels` are DLPack-exportable host tensors (`torch.from_dlpack`).
#[pyclass(frozen, module = "hpuload._hpuload")]
struct Batch {
    /// Images, `[N, 3, H, W]` (or NHWC).
    #[pyo3(get)]
    images: Py<dlpack::Tensor>,
    /// Labels, `[N]` int64.
    #[pyo3(get)]
    labels: Py<dlpack::Tensor>,
    /// How many leading samples are real (the rest pad a static shape).
    #[pyo3(get)]
    valid: usize,
    /// Dataset index of each sample.
    #[pyo3(get)]
    indices: Vec<usize>,
    /// The epoch.
    #[pyo3(get)]
    epoch: u64,
    /// The batch's position in the epoch.
    #[pyo3(get)]
    step: usize,
    /// Samples that failed and were replaced: `(index, path, reason, message)`; the path as a
    /// string, since a `pathlib.Path` would fold the `//` of a URL (`s3://bucket/...`).
    #[pyo3(get)]
    skipped: Vec<(usize, String, String, String)>,
}

impl Batch {
    fn new(py: Python<'_>, b: hpuload::Batch) -> PyResult<Self> {
        let host = |t: hpuload::Tensor| match t {
            hpuload::Tensor::Host(h) => Py::new(py, dlpack::Tensor::new(h)),
            hpuload::Tensor::Device(_) => Err(PyRuntimeError::new_err(
                "a device batch reached Python (the binding asks for host placement)",
            )),
        };
        Ok(Self {
            images: host(b.images)?,
            labels: host(b.labels)?,
            valid: b.valid,
            indices: b.indices,
            epoch: b.epoch,
            step: b.step,
            skipped: b
                .skipped
                .into_iter()
                .map(|s| {
                    let path = s.path.to_string_lossy().into_owned();
                    (s.index, path, s.reason.to_string(), s.message)
                })
                .collect(),
        })
    }
}

/// Runs `hpuload`'s command line (`bench`, `make-dataset`, `preview`) with `argv`; returns its
/// exit code.
#[pyfunction]
fn cli(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.detach(|| hpuload::run_cli(argv))
}

/// The names of the built-in pipelines (`pipeline="..."`), aliases included: the Rust
/// registry's list, so Python never keeps a copy of its own.
#[pyfunction]
fn pipeline_names() -> Vec<&'static str> {
    hpuload::pipelines::all_names().collect()
}

/// Makes Pillow's resizes (`pil_bilinear`, `pil_bicubic`) run their two passes in the order
/// the installed Pillow does: `down_first_when_taller` for Pillow 13 and later (down the
/// columns first when the height shrinks by more than twice as many pixels as the width),
/// else across the rows first always.
#[pyfunction]
fn pillow_pass_order(down_first_when_taller: bool) {
    hpuload::augment::set_pillow_pass_order(if down_first_when_taller {
        hpuload::augment::PillowPassOrder::DownFirstWhenTaller
    } else {
        hpuload::augment::PillowPassOrder::AcrossFirst
    });
}

/// Makes v1's Gaussian kernels take their exponentials from the process's torch: `address`
/// is MKL's `vmsExp` as `hpuload._transforms` finds it in the loaded `libtorch_cpu` (and has
/// checked against `torch.exp`), 0 for the correctly rounded exponential again.
#[pyfunction]
fn use_torch_exp(address: usize) {
    let f = (address != 0).then(|| {
        // SAFETY: a nonzero `address` is `vmsExp`'s in the torch library this process has
        // loaded, found by its exported symbol and checked against `torch.exp` by the only
        // caller (`_transforms._use_torchs_exp`); torch is never unloaded, so it stays valid.
        unsafe { std::mem::transmute::<usize, hpuload::augment::VmlExp>(address) }
    });
    // SAFETY: as above: `f` is MKL's `vmsExp`, thread-safe and loaded for the process's life.
    unsafe { hpuload::augment::set_torch_exp(f) };
}

/// The kind of each op of a JSON list of pipeline ops (`"geometry"`, `"box_aware"`,
/// `"moving_pixel"`, `"pixel"`, `"normalize"`, `"erase"`), looking inside `random_apply`,
/// `random_choice`, `random_order` and the policies.
#[pyfunction]
fn op_kinds(ops: &str) -> PyResult<Vec<String>> {
    let ops: Vec<hpuload::Op> = serde_json::from_str(ops)
        .map_err(|e| errors::PipelineError::new_err(format!("ops: {e}")))?;
    Ok(ops
        .iter()
        .map(|op| {
            serde_json::to_value(op.kind())
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        })
        .collect())
}

/// The file extensions hpuload decodes, lower case without the dot (what an image folder
/// keeps).
#[pyfunction]
fn image_extensions() -> Vec<&'static str> {
    hpuload::IMAGE_EXTENSIONS.to_vec()
}

/// The EXIF orientation (1-8) an image file's bytes carry, as `reader` reads it: "pillow"
/// (what `ImageOps.exif_transpose` turns the image by) or "torchvision" (what its readers'
/// `apply_exif_orientation=True` turns it by); 1 for none. What a loader with
/// `exif_orientation` and that `exif_reader` turns each image by.
#[pyfunction]
#[pyo3(signature = (bytes, reader = "pillow"))]
fn exif_orientation(bytes: &[u8], reader: &str) -> PyResult<u8> {
    let reader: ExifReader = setting("reader", reader, "pillow, torchvision")?;
    Ok(reader.read(bytes).tag())
}

/// Frames of the video at `path` at presentation `positions`, decoded to RGB and shown
/// upright (turned by the display matrix, as torchcodec turns them): `(bytes, height, width)`,
/// the frames one after the other, each `height x width x 3`.
#[pyfunction]
fn read_video_frames(
    py: Python<'_>,
    path: PathBuf,
    positions: Vec<usize>,
) -> PyResult<(Py<pyo3::types::PyBytes>, u32, u32)> {
    let frames = py
        .detach(|| hpuload::video::read_frames(&path, &positions))
        .map_err(|e| PyValueError::new_err(format!("{}: {e}", path.display())))?;
    let bytes = pyo3::types::PyBytes::new(py, &frames.rgb).unbind();
    Ok((bytes, frames.height, frames.width))
}

/// The frame count, the average frame rate (frames over the stream's span, as torchcodec's
/// `average_fps`; None for a stream without one), the display and the edit of the video at
/// `path`, from its tables: `(count, fps, turns, cut)`, `turns` None for a video without a
/// display matrix, else the quarter turns counterclockwise that show its frames upright (as
/// torchcodec turns them; `read_video_frames` gives them turned); `cut` whether its edit
/// list leaves frames unshown or shows some twice (counted and read as FFmpeg shows them).
#[pyfunction]
fn video_outline(
    py: Python<'_>,
    path: PathBuf,
) -> PyResult<(usize, Option<f64>, Option<u8>, bool)> {
    let (count, fps, display, cut) = py
        .detach(|| hpuload::video::outline(&path))
        .map_err(|e| PyValueError::new_err(format!("{}: {e}", path.display())))?;
    Ok((count, fps, display.matrix.then_some(display.turns), cut))
}

/// 4:2:0 planes (`y` of `width x height`, `u` and `v` of half that each way, rounded up) to
/// RGB as the video path converts a decoded frame declaring `matrix` (H.273's
/// `matrix_coefficients`) and `full_range`: what the tests hold against libswscale.
#[pyfunction]
fn yuv420_to_rgb(
    py: Python<'_>,
    planes: (Vec<u8>, Vec<u8>, Vec<u8>),
    width: usize,
    height: usize,
    matrix: u8,
    full_range: bool,
) -> PyResult<Py<pyo3::types::PyBytes>> {
    let (y, u, v) = planes;
    let chroma = width.div_ceil(2) * height.div_ceil(2);
    if y.len() != width * height || u.len() != chroma || v.len() != chroma {
        return Err(PyValueError::new_err(format!(
            "planes of {}, {} and {} bytes for a {width}x{height} picture",
            y.len(),
            u.len(),
            v.len()
        )));
    }
    let picture = hpuload::video::Picture {
        frame: 0,
        width,
        height,
        y: &y,
        u: &u,
        v: &v,
        y_stride: width,
        uv_stride: width.div_ceil(2),
    };
    let mut rgb = Vec::new();
    let conversion = hpuload::video::colour::Conversion::of(matrix, full_range);
    hpuload::video::colour::to_rgb(&picture, &conversion, &mut rgb);
    Ok(pyo3::types::PyBytes::new(py, &rgb).unbind())
}

/// Each frame's presentation time and duration in seconds, in presentation order, from the
/// tables of the video at `path`: `(pts, durations)`.
#[pyfunction]
fn video_frame_times(py: Python<'_>, path: PathBuf) -> PyResult<(Vec<f64>, Vec<f64>)> {
    py.detach(|| hpuload::video::frame_times(&path))
        .map_err(|e| PyValueError::new_err(format!("{}: {e}", path.display())))
}

/// Which H.264 decoder the video path uses in this process, in words (FFmpeg's libavcodec
/// and where it was found, or OpenH264 and why no libavcodec is used).
#[pyfunction]
fn video_decoder() -> String {
    hpuload::video::h264_decoder()
}

#[pymodule]
fn _hpuload(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Loader>()?;
    m.add_class::<Batch>()?;
    m.add_class::<dlpack::Tensor>()?;
    m.add_function(wrap_pyfunction!(cli, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline_names, m)?)?;
    m.add_function(wrap_pyfunction!(op_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(pillow_pass_order, m)?)?;
    m.add_function(wrap_pyfunction!(use_torch_exp, m)?)?;
    m.add_function(wrap_pyfunction!(image_extensions, m)?)?;
    m.add_function(wrap_pyfunction!(exif_orientation, m)?)?;
    m.add_function(wrap_pyfunction!(read_video_frames, m)?)?;
    m.add_function(wrap_pyfunction!(video_outline, m)?)?;
    m.add_function(wrap_pyfunction!(video_frame_times, m)?)?;
    m.add_function(wrap_pyfunction!(yuv420_to_rgb, m)?)?;
    m.add_function(wrap_pyfunction!(video_decoder, m)?)?;
    m.add_function(wrap_pyfunction!(mix::mixup_f32, m)?)?;
    m.add_function(wrap_pyfunction!(mix::cutmix_f32, m)?)?;
    m.add_function(wrap_pyfunction!(mix::mix_u8, m)?)?;
    m.add_function(wrap_pyfunction!(masks::coco_masks, m)?)?;
    m.add_function(wrap_pyfunction!(masks::segmentation_masks, m)?)?;
    m.add_function(wrap_pyfunction!(masks::byte_masks, m)?)?;
    m.add_function(wrap_pyfunction!(paste::copy_paste, m)?)?;
    errors::register(m)?;
    Ok(())
}
