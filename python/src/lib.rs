//! `hpuload._hpuload`: the loader as a Python extension module. The pure-Python package
//! `hpuload` (next to this crate) builds on it; `hpuload.torch` speaks torch's language.
//!
//! Batches stay in the pinned host buffer they were assembled in ([`Placement::Host`]) and
//! cross into torch through DLPack (`dlpack.rs`) without a copy: the buffer goes back to the
//! loader's pool when torch frees the last tensor that uses it.

mod dlpack;
mod errors;
mod mix;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hpuload::{
    Backend, Dtype, Entry, EpochOf, ImageFolder, LastBatch, Layout, Loader as CoreLoader,
    LoaderState, Manifest, OnError, Pipeline, Placement, ReadMode, Source, WebDataset,
};
use hpuload::{CacheOptions, RemoteOptions, ShardOptions};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use serde::de::DeserializeOwned;

use errors::to_py;

/// A dataset given as a list of `(path, label)` pairs (torchvision's `ImageFolder.samples`), so
/// sample `i` here is sample `i` of the torchvision dataset.
struct ListSource {
    entries: Vec<Entry>,
    classes: Vec<String>,
    origin: PathBuf,
}

impl Source for ListSource {
    fn entries(&self) -> &[Entry] {
        &self.entries
    }
    fn classes(&self) -> &[String] {
        &self.classes
    }
    fn origin(&self) -> &Path {
        &self.origin
    }
    fn read_into(
        &self,
        index: usize,
        mode: ReadMode,
        dst: &mut [u8],
    ) -> std::io::Result<Option<usize>> {
        hpuload::source::read_entry_into(self, index, mode, dst)
    }
}

/// The settings of `hpuload.WebDataset` (JSON from `sources.py`): `label_field`, `cache`
/// (a folder, `null` for the default one, `false` for none), `cache_limit` (bytes),
/// `max_requests`, `timeout` (seconds), `retries`.
fn parse_shard_options(text: &str) -> PyResult<ShardOptions> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Given {
        label_field: String,
        cache: serde_json::Value,
        cache_limit: Option<u64>,
        max_requests: usize,
        timeout: f64,
        retries: usize,
    }
    let g: Given = serde_json::from_str(text)
        .map_err(|e| PyValueError::new_err(format!("WebDataset settings: {e}")))?;
    if !(g.timeout.is_finite() && g.timeout > 0.0) {
        return Err(PyValueError::new_err(format!(
            "timeout={} is not a positive number of seconds",
            g.timeout
        )));
    }
    if g.max_requests == 0 {
        return Err(PyValueError::new_err("max_requests must be at least 1"));
    }
    let defaults = RemoteOptions::default();
    let cache = match g.cache {
        serde_json::Value::Bool(false) => None,
        serde_json::Value::Null => defaults.cache.clone().map(|c| CacheOptions {
            limit: g.cache_limit,
            ..c
        }),
        serde_json::Value::String(dir) => Some(CacheOptions {
            dir: dir.into(),
            limit: g.cache_limit,
        }),
        other => {
            return Err(PyValueError::new_err(format!(
                "cache_dir={other}: give a folder, None (the default folder) or False (no cache)"
            )))
        }
    };
    Ok(ShardOptions {
        label_field: g.label_field,
        remote: RemoteOptions {
            max_requests: g.max_requests,
            timeout: std::time::Duration::from_secs_f64(g.timeout),
            retries: g.retries,
            cache,
            ..defaults
        },
    })
}

/// A `datasets` table (JSON from `sources.py` or `torch.py`): `kind` (`"arrow"`: `files`, the
/// Arrow files in order, and `rows`, an indices mapping or null; `"parquet"`: `spec`, files,
/// a pattern or a folder, and `window_rows`), `image_column` and `label_column` (null: as the
/// table's metadata says).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    kind: String,
    #[serde(default)]
    files: Vec<PathBuf>,
    #[serde(default)]
    spec: String,
    #[serde(default)]
    rows: Option<Vec<u64>>,
    #[serde(default)]
    image_column: Option<String>,
    #[serde(default)]
    label_column: Option<String>,
    #[serde(default)]
    window_rows: Option<usize>,
    /// For URLs: `hpuload.WebDataset`'s storage settings (without `label_field`).
    #[serde(default)]
    remote: Option<serde_json::Value>,
}

fn parse_table(text: &str) -> PyResult<Table> {
    let t: Table = serde_json::from_str(text)
        .map_err(|e| PyValueError::new_err(format!("table settings: {e}")))?;
    if t.kind != "arrow" && t.kind != "parquet" {
        return Err(PyValueError::new_err(format!(
            "table kind {:?}: give \"arrow\" or \"parquet\"",
            t.kind
        )));
    }
    Ok(t)
}

impl Table {
    fn open(self) -> Result<Box<dyn hpuload::Source>, hpuload::Error> {
        let columns = hpuload::source::hf::ColumnChoice {
            image: self.image_column,
            label: self.label_column,
        };
        if self.kind == "arrow" {
            let options = hpuload::HfOptions {
                columns,
                rows: self.rows,
            };
            let set = if self.files.is_empty() {
                hpuload::ArrowDataset::open(&self.spec, &options)?
            } else {
                hpuload::ArrowDataset::open_files(self.files, &options)?
            };
            return Ok(Box::new(set));
        }
        let defaults = hpuload::ParquetOptions::default();
        let remote = match self.remote {
            Some(serde_json::Value::Object(mut m)) => {
                m.insert("label_field".into(), "cls".into());
                parse_shard_options(&serde_json::Value::Object(m).to_string())
                    .map_err(|e| hpuload::Error::config("remote", e.to_string()))?
                    .remote
            }
            _ => defaults.remote.clone(),
        };
        let options = hpuload::ParquetOptions {
            columns,
            window_rows: self.window_rows.unwrap_or(defaults.window_rows),
            remote,
        };
        Ok(Box::new(hpuload::ParquetDataset::open(
            &self.spec, &options,
        )?))
    }
}

/// A COCO detection set (JSON from `torch.py`): `images`, the folder `file_name`s are relative
/// to; `annotations`, an `instances_*.json` file, unless the annotations come as text
/// (`coco_json=`, what torchvision's `CocoDetection` already holds in memory); `drop_empty`
/// (the detection reference's filter); `contiguous` (labels numbered from 1 by category id);
/// `only`: the image ids to keep (a `Subset`).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Coco {
    images: PathBuf,
    #[serde(default)]
    annotations: Option<PathBuf>,
    #[serde(default)]
    drop_empty: bool,
    #[serde(default)]
    contiguous: bool,
    /// Only these image ids (a `Subset`).
    #[serde(default)]
    only: Option<Vec<i64>>,
}

impl Coco {
    fn open(self, json: Option<String>) -> Result<hpuload::CocoDataset, hpuload::Error> {
        use hpuload::source::coco::{Categories, EmptyImages};
        let options = hpuload::CocoOptions {
            empty: if self.drop_empty {
                EmptyImages::Drop
            } else {
                EmptyImages::Keep
            },
            categories: if self.contiguous {
                Categories::Contiguous
            } else {
                Categories::Raw
            },
            images: self.only,
            // An image folder given as a URL (torchvision's CocoDetection keeps its root as
            // given): each image is one request, with the storage defaults.
            ..Default::default()
        };
        match (self.annotations, json) {
            (Some(file), None) => hpuload::CocoDataset::open(file, &self.images, &options),
            (origin, Some(text)) => {
                let origin = origin.unwrap_or_else(|| self.images.join("annotations.json"));
                hpuload::CocoDataset::from_json(origin, text.as_bytes(), &self.images, &options)
            }
            (None, None) => Err(hpuload::Error::config(
                "coco",
                "give the annotation file or its text (coco_json=)",
            )),
        }
    }
}

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
}

#[pymethods]
impl Loader {
    /// Builds a loader. `samples` is a list of `(path, label)` pairs; `root` (an ImageFolder),
    /// `manifest` (a `path<TAB>label` file) or `shards` (WebDataset tar shards: a file or a
    /// brace pattern) are the alternatives. `pipeline` is a built-in
    /// name (`"resnet50_train"`), the path of a pipeline TOML file, or JSON
    /// (`{"name": ..., "ops": [...]}`).
    #[new]
    #[pyo3(signature = (
        *, pipeline, root=None, manifest=None, samples=None, shards=None, shard_options=None,
        table=None, coco=None, coco_json=None, classes=None,
        batch_size=256, max_boxes=200,
        shuffle=false, seed=0, workers=2, prefetch=2, dtype="f32", layout="nchw",
        last_batch="pad", rank=None, world_size=None, on_error="skip", error_budget=0.01,
        backend="auto", resume=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        pipeline: &str,
        root: Option<PathBuf>,
        manifest: Option<PathBuf>,
        samples: Option<Vec<(PathBuf, i64)>>,
        shards: Option<String>,
        shard_options: Option<&str>,
        table: Option<&str>,
        coco: Option<&str>,
        coco_json: Option<String>,
        classes: Option<Vec<String>>,
        batch_size: usize,
        max_boxes: usize,
        shuffle: bool,
        seed: u64,
        workers: usize,
        prefetch: usize,
        dtype: &str,
        layout: &str,
        last_batch: &str,
        rank: Option<usize>,
        world_size: Option<usize>,
        on_error: &str,
        error_budget: f64,
        backend: &str,
        resume: Option<&str>,
    ) -> PyResult<Self> {
        if batch_size == 0 {
            return Err(PyValueError::new_err("batch_size must be at least 1"));
        }
        if workers == 0 {
            return Err(PyValueError::new_err(
                "num_workers (threads) must be at least 1",
            ));
        }
        let dtype: Dtype = setting("dtype", dtype, "u8, f16, bf16, f32")?;
        if dtype == Dtype::I64 {
            return Err(PyValueError::new_err(
                "dtype=\"i64\" is a label type, not an image type",
            ));
        }
        let layout: Layout = setting("layout", layout, "nchw, nhwc")?;
        let last_batch: LastBatch = setting("last_batch", last_batch, "pad, drop, partial")?;
        let on_error: OnError = setting("on_error", on_error, "skip, fail")?;
        let backend: Backend = setting("backend", backend, "auto, hw, cpu")?;
        let pipeline = parse_pipeline(pipeline)?;
        let resume = resume
            .map(|text| {
                serde_json::from_str::<LoaderState>(text).map_err(|e| {
                    PyValueError::new_err(format!("state_dict is not a loader state: {e}"))
                })
            })
            .transpose()?;
        let source: Box<dyn FnOnce() -> Result<CoreLoaderBuilderSource, hpuload::Error> + Send> =
            match (root, manifest, samples, shards, table, coco) {
                (None, None, None, None, None, Some(coco)) => {
                    let coco: Coco = serde_json::from_str(coco)
                        .map_err(|e| PyValueError::new_err(format!("coco settings: {e}")))?;
                    Box::new(move || {
                        coco.open(coco_json)
                            .map(|s| CoreLoaderBuilderSource::Table(Box::new(s)))
                    })
                }
                (Some(root), None, None, None, None, None) => {
                    Box::new(move || ImageFolder::open(root).map(CoreLoaderBuilderSource::Folder))
                }
                (None, Some(m), None, None, None, None) => {
                    Box::new(move || Manifest::open(m).map(CoreLoaderBuilderSource::Manifest))
                }
                (None, None, None, None, Some(table), None) => {
                    let table = parse_table(table)?;
                    Box::new(move || table.open().map(CoreLoaderBuilderSource::Table))
                }
                (None, None, None, Some(spec), None, None) => {
                    let options = shard_options
                        .map(parse_shard_options)
                        .transpose()?
                        .unwrap_or_default();
                    Box::new(move || {
                        WebDataset::open_with(&spec, &options)
                            .map(|s| CoreLoaderBuilderSource::Shards(Box::new(s)))
                    })
                }
                (None, None, Some(samples), None, None, None) => {
                    if samples.is_empty() {
                        return Err(PyValueError::new_err("dataset has no samples"));
                    }
                    let origin = samples[0]
                        .0
                        .parent()
                        .and_then(Path::parent)
                        .unwrap_or(Path::new("."))
                        .to_path_buf();
                    let list = ListSource {
                        entries: samples
                            .into_iter()
                            .map(|(path, label)| Entry { path, label })
                            .collect(),
                        classes: classes.unwrap_or_default(),
                        origin,
                    };
                    Box::new(move || Ok(CoreLoaderBuilderSource::List(list)))
                }
                _ => {
                    return Err(PyTypeError::new_err(
                        "give exactly one of root=, manifest=, samples=, shards=, table= or coco=",
                    ))
                }
            };
        // Listing a folder and starting threads: no Python objects involved.
        let built = py.detach(move || {
            let source = source()?;
            let builder = source
                .builder()
                .batch_size(batch_size)
                .max_boxes(max_boxes)
                .seed(seed)
                .workers(workers)
                .prefetch(prefetch)
                .pipeline(pipeline)
                .output(dtype, layout)
                .last_batch(last_batch)
                .on_error(on_error)
                .error_budget(error_budget)
                .backend(backend)
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
            builder.build()
        });
        Ok(Self {
            run: Mutex::new(Run::Idle(built.map_err(to_py)?)),
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
    fn sample_plan(&self, epoch: u64, index: usize, width: u32, height: u32) -> PyResult<String> {
        self.with_run(|run| {
            let plan = run
                .loader()?
                .sample_plan(epoch, index, width, height)
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

    /// Cancels the running epoch, if any (waits for the batches being decoded).
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
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

/// Where the builder's source came from.
enum CoreLoaderBuilderSource {
    Folder(ImageFolder),
    Manifest(Manifest),
    List(ListSource),
    Shards(Box<WebDataset>),
    Table(Box<dyn hpuload::Source>),
}

impl CoreLoaderBuilderSource {
    fn builder(self) -> hpuload::LoaderBuilder {
        match self {
            Self::Folder(s) => CoreLoader::builder(s),
            Self::Manifest(s) => CoreLoader::builder(s),
            Self::List(s) => CoreLoader::builder(s),
            Self::Shards(s) => CoreLoader::builder(*s),
            Self::Table(s) => CoreLoader::builder_boxed(s),
        }
    }
}

impl Loader {
    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, Run>> {
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

#[pymodule]
fn _hpuload(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Loader>()?;
    m.add_class::<Batch>()?;
    m.add_class::<dlpack::Tensor>()?;
    m.add_function(wrap_pyfunction!(cli, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline_names, m)?)?;
    m.add_function(wrap_pyfunction!(op_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(image_extensions, m)?)?;
    m.add_function(wrap_pyfunction!(mix::mixup_f32, m)?)?;
    m.add_function(wrap_pyfunction!(mix::cutmix_f32, m)?)?;
    errors::register(m)?;
    Ok(())
}
