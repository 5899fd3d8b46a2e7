//! What `hpuload._options.LoaderOptions` holds, read attribute by attribute (a wrong type is a
//! `TypeError` naming the attribute), and the dataset its `source` names. The Python side
//! builds the object once per loader; nothing crosses as JSON text.

use std::path::PathBuf;
use std::time::Duration;

use hpuload::source::coco::{Categories, EmptyImages};
use hpuload::source::hf::ColumnChoice;
use hpuload::video::{ClipSampler, IndexCache, IndexClips, Policy, TimeClips, WindowClips};
use hpuload::{
    ArrowDataset, CacheOptions, CocoDataset, CocoOptions, Entry, FrameFolder, HfOptions,
    ImageArray, ImageFolder, Listing, Manifest, Media, ParquetDataset, ParquetOptions,
    RemoteOptions, ShardOptions, Source, VideoFolder, VideoManifest, VideoSpec, WebDataset,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// `LoaderOptions`, as its fields are named there.
#[derive(FromPyObject)]
pub(crate) struct Options<'py> {
    pub source: Bound<'py, PyAny>,
    pub pipeline: String,
    pub batch_size: usize,
    pub max_boxes: usize,
    pub shuffle: bool,
    pub seed: u64,
    pub workers: usize,
    pub prefetch: usize,
    pub dtype: String,
    pub layout: String,
    pub last_batch: String,
    pub rank: Option<usize>,
    pub world_size: Option<usize>,
    pub on_error: String,
    pub error_budget: f64,
    pub backend: String,
    pub resume: Option<String>,
    pub video: Option<Video>,
    pub exif_orientation: bool,
    pub exif_reader: String,
    pub image_of_sample: usize,
    pub draws_per_batch: bool,
}

/// `VideoOptions`: torchcodec's sampler parameters.
#[derive(FromPyObject)]
pub(crate) struct Video {
    sampler: String,
    num_clips: usize,
    num_frames_per_clip: usize,
    num_indices_between_frames: usize,
    seconds_between_frames: Option<f64>,
    sampling_range_start: Option<f64>,
    sampling_range_end: Option<f64>,
    policy: String,
    layout: String,
    index_cache: IndexCacheArg,
    frames_between_clips: usize,
    frame_rate: Option<f64>,
    clip_metadata: Option<Vec<(usize, f64)>>,
    leave_unreadable_videos: bool,
}

/// `VideoOptions.index_cache`: a flag (in the folder, or nowhere) or a file.
#[derive(FromPyObject)]
enum IndexCacheArg {
    Flag(bool),
    File(PathBuf),
}

impl Video {
    /// The loader's video spec, and where it keeps the videos' indexes.
    pub(crate) fn spec(self) -> PyResult<(VideoSpec, IndexCache)> {
        let policy = match self.policy.as_str() {
            "repeat_last" => Policy::RepeatLast,
            "wrap" => Policy::Wrap,
            "error" => Policy::Error,
            other => {
                return Err(PyValueError::new_err(format!(
                    "policy={other:?}: give 'repeat_last', 'wrap' or 'error'"
                )))
            }
        };
        let index = |v: Option<f64>, what: &str| -> PyResult<Option<i64>> {
            match v {
                None => Ok(None),
                Some(x) if x.fract() == 0.0 && x.abs() < 9e15 => Ok(Some(x as i64)),
                Some(x) => Err(PyValueError::new_err(format!(
                    "{what}={x}: an index sampler's range is in frames (an integer)"
                ))),
            }
        };
        let sampler = match self.sampler.as_str() {
            "random_indices" | "regular_indices" => {
                let p = IndexClips {
                    num_clips: self.num_clips,
                    frames_per_clip: self.num_frames_per_clip,
                    between: self.num_indices_between_frames,
                    range_start: index(self.sampling_range_start, "sampling_range_start")?
                        .unwrap_or(0),
                    range_end: index(self.sampling_range_end, "sampling_range_end")?,
                    policy,
                };
                if self.sampler == "random_indices" {
                    ClipSampler::RandomIndices(p)
                } else {
                    ClipSampler::RegularIndices(p)
                }
            }
            "random_timestamps" => ClipSampler::RandomTimestamps(TimeClips {
                num_clips: self.num_clips,
                frames_per_clip: self.num_frames_per_clip,
                seconds_between_frames: self.seconds_between_frames,
                range_start: self.sampling_range_start,
                range_end: self.sampling_range_end,
                policy,
            }),
            "video_clips" => ClipSampler::Windows(WindowClips {
                frames_per_clip: self.num_frames_per_clip,
                step: self.frames_between_clips,
                frame_rate: self.frame_rate,
                metadata: self.clip_metadata,
                leave_unreadable: self.leave_unreadable_videos,
            }),
            other => {
                return Err(PyValueError::new_err(format!(
                    "sampler={other:?}: give 'random_indices', 'regular_indices', \
                     'random_timestamps' (a batch needs the same number of clips per video) \
                     or 'video_clips' (torchvision's VideoClips: each clip a sample)"
                )))
            }
        };
        let channels_first = match self.layout.to_ascii_uppercase().as_str() {
            "TCHW" => false,
            "CTHW" => true,
            other => {
                return Err(PyValueError::new_err(format!(
                    "layout={other:?}: give 'TCHW' (a clip is [T, C, H, W]) or 'CTHW'"
                )))
            }
        };
        let cache = match self.index_cache {
            IndexCacheArg::Flag(true) => IndexCache::Beside,
            IndexCacheArg::Flag(false) => IndexCache::Off,
            IndexCacheArg::File(path) => IndexCache::At(path),
        };
        Ok((
            VideoSpec {
                sampler,
                channels_first,
            },
            cache,
        ))
    }
}

/// Opens the dataset (listing a folder, reading an index): run without the GIL.
pub(crate) type Opener = Box<dyn FnOnce() -> Result<Box<dyn Source>, hpuload::Error> + Send>;

/// The opener of the dataset a `*Source` object of `_options.py` describes, by its `kind`.
pub(crate) fn source(given: &Bound<'_, PyAny>) -> PyResult<Opener> {
    let kind: String = given.getattr("kind")?.extract()?;
    Ok(match kind.as_str() {
        "folder" => {
            let root: PathBuf = given.getattr("root")?.extract()?;
            Box::new(move || Ok(Box::new(ImageFolder::open(root)?) as Box<dyn Source>))
        }
        "manifest" => {
            let path: PathBuf = given.getattr("path")?.extract()?;
            Box::new(move || Ok(Box::new(Manifest::open(path)?) as Box<dyn Source>))
        }
        "samples" => {
            let list = given.extract::<Samples>()?.listing()?;
            Box::new(move || Ok(Box::new(list) as Box<dyn Source>))
        }
        "arrays" => {
            let a: Arrays = given.extract()?;
            // Copied once, here (the dataset keeps its own array).
            let pixels = a.pixels.as_bytes().to_vec();
            let Arrays {
                name,
                shape,
                labels,
                classes,
                ..
            } = a;
            Box::new(move || {
                let set = ImageArray::new(&name, pixels, shape, labels, classes)?;
                Ok(Box::new(set) as Box<dyn Source>)
            })
        }
        "shards" => {
            let Shards {
                spec,
                label_field,
                storage,
                media,
            } = given.extract()?;
            let media = match media.as_str() {
                "images" => Media::Images,
                "videos" => Media::Videos,
                other => {
                    return Err(PyValueError::new_err(format!(
                        "media {other:?}: give \"images\" or \"videos\""
                    )))
                }
            };
            let options = ShardOptions {
                label_field,
                media,
                remote: storage.remote()?,
            };
            Box::new(move || {
                Ok(Box::new(WebDataset::open_with(&spec, &options)?) as Box<dyn Source>)
            })
        }
        "arrow" => {
            let a: Arrow = given.extract()?;
            Box::new(move || a.open())
        }
        "parquet" => {
            let p: Parquet = given.extract()?;
            let options = ParquetOptions {
                columns: ColumnChoice {
                    image: p.image_column,
                    label: p.label_column,
                    unlabelled: false,
                },
                window_rows: p.window_rows.max(1),
                remote: p.storage.remote()?,
            };
            let spec = p.spec;
            Box::new(
                move || Ok(Box::new(ParquetDataset::open(&spec, &options)?) as Box<dyn Source>),
            )
        }
        "video_folder" => {
            let root: PathBuf = given.getattr("root")?.extract()?;
            Box::new(move || Ok(Box::new(VideoFolder::open(root)?) as Box<dyn Source>))
        }
        "frame_folder" => {
            let root: PathBuf = given.getattr("root")?.extract()?;
            let fps: f64 = given.getattr("fps")?.extract()?;
            Box::new(move || Ok(Box::new(FrameFolder::open(root, fps)?) as Box<dyn Source>))
        }
        "video_manifest" => {
            let path: PathBuf = given.getattr("path")?.extract()?;
            let videos: Option<PathBuf> = given.getattr("videos")?.extract()?;
            Box::new(move || {
                let m = VideoManifest::open(path, videos.as_deref())?;
                Ok(Box::new(m) as Box<dyn Source>)
            })
        }
        "coco" => {
            let c: Coco = given.extract()?;
            Box::new(move || Ok(Box::new(c.open()?) as Box<dyn Source>))
        }
        other => {
            return Err(PyTypeError::new_err(format!(
                "a dataset source of kind {other:?} (give one of hpuload._options' sources)"
            )))
        }
    })
}

/// `Storage`: how object storage is read.
#[derive(FromPyObject)]
struct Storage {
    cache_dir: Option<PathBuf>,
    cache: bool,
    cache_limit: Option<u64>,
    max_requests: usize,
    timeout: f64,
    retries: usize,
}

impl Storage {
    fn remote(self) -> PyResult<RemoteOptions> {
        if !(self.timeout.is_finite() && self.timeout > 0.0) {
            return Err(PyValueError::new_err(format!(
                "timeout={} is not a positive number of seconds",
                self.timeout
            )));
        }
        if self.max_requests == 0 {
            return Err(PyValueError::new_err("max_requests must be at least 1"));
        }
        let defaults = RemoteOptions::default();
        let cache = match (self.cache, self.cache_dir) {
            (false, _) => None,
            (true, Some(dir)) => Some(CacheOptions {
                dir,
                limit: self.cache_limit,
            }),
            (true, None) => defaults.cache.clone().map(|c| CacheOptions {
                limit: self.cache_limit,
                ..c
            }),
        };
        Ok(RemoteOptions {
            max_requests: self.max_requests,
            timeout: Duration::from_secs_f64(self.timeout),
            retries: self.retries,
            cache,
            ..defaults
        })
    }
}

/// `SamplesSource`: torchvision's `ImageFolder.samples`, so sample `i` here is its sample `i`.
#[derive(FromPyObject)]
struct Samples {
    samples: Vec<(PathBuf, i64)>,
    classes: Vec<String>,
}

impl Samples {
    fn listing(self) -> PyResult<Listing> {
        let Some((first, _)) = self.samples.first() else {
            return Err(PyValueError::new_err("dataset has no samples"));
        };
        // `root/<class>/<image>`: the root, for messages.
        let origin = first
            .parent()
            .and_then(std::path::Path::parent)
            .unwrap_or(std::path::Path::new("."))
            .to_path_buf();
        let entries = self
            .samples
            .into_iter()
            .map(|(path, label)| Entry { path, label })
            .collect();
        Ok(Listing::of_files(origin, entries, self.classes))
    }
}

/// `ArraySource`: images of one size in one array of bytes, channels last.
#[derive(FromPyObject)]
struct Arrays<'py> {
    name: String,
    pixels: Bound<'py, PyBytes>,
    shape: (u32, u32, u32),
    labels: Vec<i64>,
    classes: Vec<String>,
}

/// `ShardSource`.
#[derive(FromPyObject)]
struct Shards {
    spec: String,
    label_field: String,
    storage: Storage,
    media: String,
}

/// `ArrowSource`: `files` in order, or `spec` when there are none.
#[derive(FromPyObject)]
struct Arrow {
    files: Vec<PathBuf>,
    spec: String,
    rows: Option<Vec<u64>>,
    image_column: Option<String>,
    label_column: Option<String>,
    unlabelled: bool,
}

impl Arrow {
    fn open(self) -> Result<Box<dyn Source>, hpuload::Error> {
        let options = HfOptions {
            columns: ColumnChoice {
                image: self.image_column,
                label: self.label_column,
                unlabelled: self.unlabelled,
            },
            rows: self.rows,
        };
        Ok(Box::new(if self.files.is_empty() {
            ArrowDataset::open(&self.spec, &options)?
        } else {
            ArrowDataset::open_files(self.files, &options)?
        }))
    }
}

/// `ParquetSource`.
#[derive(FromPyObject)]
struct Parquet {
    spec: String,
    image_column: Option<String>,
    label_column: Option<String>,
    window_rows: usize,
    storage: Storage,
}

/// `CocoSource`: `images`, the folder (or shards, or URL) `file_name`s are relative to;
/// `annotations`, an `instances_*.json` file, unless the annotations come as `text` (what
/// torchvision's `CocoDetection` already holds in memory); `drop_empty` (the detection
/// reference's filter); `contiguous` (labels numbered from 1 by category id); `only`: the
/// image ids to keep (a `Subset`).
#[derive(FromPyObject)]
struct Coco {
    images: PathBuf,
    annotations: Option<PathBuf>,
    text: Option<String>,
    drop_empty: bool,
    contiguous: bool,
    only: Option<Vec<i64>>,
}

impl Coco {
    fn open(self) -> Result<CocoDataset, hpuload::Error> {
        let options = CocoOptions {
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
        match (self.annotations, self.text) {
            (Some(file), None) => CocoDataset::open(file, &self.images, &options),
            (origin, Some(text)) => {
                let origin = origin.unwrap_or_else(|| self.images.join("annotations.json"));
                CocoDataset::from_json(origin, text.as_bytes(), &self.images, &options)
            }
            (None, None) => Err(hpuload::Error::config(
                "coco",
                "give the annotation file or its text",
            )),
        }
    }
}
