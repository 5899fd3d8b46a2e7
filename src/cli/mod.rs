//! The `hpuload` command line (`bench`, `make-dataset`, `preview`), in the library so that the
//! binary and the Python module (`python -m hpuload`) run the same code; and what the
//! subcommands share: where the data comes from and how a loader is built.

pub mod bench;
pub mod make_shards;
pub mod preview;
pub mod report;

use hpuload::{
    pipelines, Backend, CacheOptions, Error, LoaderBuilder, Manifest, Pipeline, RemoteOptions,
    ShardOptions,
};

use std::path::PathBuf;
use std::time::Instant;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "hpuload",
    version,
    about = "Feed device-resident batches to an (emulated) HPU, and measure how fast",
    after_help = "Logging: HPULOAD_LOG=info (or debug, trace) on stderr. Errors exit with code 2."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure loader throughput (images/s), where the time goes, and whether the loader keeps
    /// a training step fed.
    Bench(bench::BenchArgs),
    /// Write a synthetic ImageNet-like JPEG dataset (ImageFolder layout): textured content,
    /// ImageNet's size distribution, realistic file sizes. With --video: H.264 clips in MP4
    /// files (class folders), a camera panning and zooming over such pictures.
    MakeDataset {
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
        /// Number of images.
        #[arg(long, default_value_t = 1000, conflicts_with = "video")]
        images: usize,
        /// Seed; the same seed gives the same files.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Videos instead of images: 640x360 clips at 24 fps, a keyframe every 2 s.
        #[arg(long)]
        video: bool,
        /// With --video: number of clips.
        #[arg(long, default_value_t = 40, requires = "video")]
        videos: usize,
        /// With --video: frames per clip.
        #[arg(long, default_value_t = 96, requires = "video")]
        frames: usize,
    },
    /// Write a contact sheet (PNG) of one augmented batch, de-normalized and labelled: what the
    /// model will see.
    Preview(preview::PreviewArgs),
    /// Write a folder (or manifest) as WebDataset tar shards of about --shard-size each, with
    /// a sidecar index per shard, for `--data 'DIR/shard-{000000..000009}.tar'`.
    MakeShards(make_shards::MakeShardsArgs),
}

/// Runs the command line with `args` (the program name first) and returns the exit code: 0 on
/// success, 2 with one line on stderr on error (clap's own codes for bad arguments).
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    // A second call in one process (the Python module) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HPULOAD_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return e.exit_code().clamp(0, 255) as u8;
        }
    };
    let result = match cli.command {
        Command::Bench(args) => bench::run(&args),
        Command::Preview(args) => preview::run(&args),
        Command::MakeShards(args) => make_shards::run(&args),
        Command::MakeDataset {
            out,
            seed,
            video: true,
            videos,
            frames,
            ..
        } => make_videos(&out, videos, frames, seed),
        Command::MakeDataset {
            out, images, seed, ..
        } => make_dataset(&out, images, seed),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

fn make_dataset(out: &std::path::Path, images: usize, seed: u64) -> Result<(), hpuload::Error> {
    if images == 0 {
        return Err(hpuload::Error::config(
            "--images",
            "--images must be at least 1",
        ));
    }
    let t = Instant::now();
    hpuload::dataset::make_dataset(out, images, seed)?;
    println!(
        "wrote {images} images to {} in {:.1}s",
        out.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Where the samples come from, and how they are augmented.
#[derive(clap::Args, Clone, Debug)]
pub struct DataArgs {
    /// ImageFolder dataset (`DIR/<class>/<image>`); WebDataset tar shards (`FILE.tar`, a
    /// brace pattern such as `DIR/shard-{000000..000009}.tar`, a URL, or a folder of `.tar`
    /// files); a Hugging Face `datasets` table (a `save_to_disk` folder or `.arrow` files);
    /// or Parquet files (a file, a brace pattern or `*` glob, or a folder). Default: the built-in
    /// synthetic dataset, generated on first use in $HPULOAD_CACHE_DIR (or ~/.cache/hpuload).
    #[arg(long, conflicts_with = "manifest")]
    pub data: Option<PathBuf>,
    /// The image column of a Hugging Face table (Arrow or Parquet); default: its `Image`
    /// feature, else a column named image/img/jpg/png.
    #[arg(long, value_name = "NAME")]
    pub image_column: Option<String>,
    /// The label column of a Hugging Face table; default: its `ClassLabel` feature, else a
    /// column named label/labels/cls.
    #[arg(long, value_name = "NAME")]
    pub label_column: Option<String>,
    /// Manifest file (`path<TAB>label` per line) instead of a folder.
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// A COCO annotation file (`instances_*.json`); `--data` is then its image folder (local
    /// or a URL) or the tar shards that hold its images. Use with a detection pipeline such as
    /// `ssd300_train` (alias `ssd300`), `ssd300_habana` or `lsj_train`.
    #[arg(long, value_name = "ANNOTATIONS", conflicts_with = "manifest")]
    pub coco: Option<PathBuf>,
    /// With `--coco`: leave out images without a usable box, as torchvision's detection
    /// reference does for training.
    #[arg(long, requires = "coco")]
    pub drop_empty: bool,
    /// Built-in pipeline (resnet50_train, resnet50_eval, resnet50_v2_train,
    /// resnet50_train_jitter, timm_train, timm_rand_augment_train, ssd300_train (alias
    /// ssd300), ssd300_habana, lsj_train) or a pipeline TOML file.
    #[arg(long, default_value = "resnet50_train")]
    pub pipeline: String,
    /// Turn each image upright by the EXIF orientation it carries before the pipeline, as
    /// Pillow's `ImageOps.exif_transpose` does: `auto` does for a Hugging Face table (as
    /// `datasets` decodes its images) and as the pipeline file says otherwise.
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
    pub exif_orientation: ExifArg,
    /// Where samples are decoded: the emulated media engine when it can take the file (auto),
    /// only the engine (hw), or only the host CPU (cpu).
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
    /// Seed of the shuffle and of every random augmentation.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub storage: StorageArgs,
}

/// How shards on object storage (`--data s3://...`, `gs://`, `az://`, `http(s)://`) are read.
/// Credentials come from the store's usual environment variables (`AWS_ACCESS_KEY_ID`,
/// `AWS_ENDPOINT_URL`, `GOOGLE_APPLICATION_CREDENTIALS`, `AZURE_STORAGE_ACCOUNT_NAME`, ...).
#[derive(clap::Args, Clone, Debug)]
pub struct StorageArgs {
    /// Local cache of whole shards, filled in the background so later epochs read from disk.
    /// Default: $HPULOAD_CACHE_DIR/shards (or ~/.cache/hpuload/shards).
    #[arg(long, value_name = "DIR", conflicts_with = "no_shard_cache")]
    pub shard_cache: Option<PathBuf>,
    /// Most bytes the shard cache may take for this dataset (e.g. 200GB). Default: half the
    /// free space of its filesystem.
    #[arg(long, value_name = "SIZE", value_parser = make_shards::parse_size)]
    pub shard_cache_limit: Option<u64>,
    /// Read every sample from the store; keep no local copies.
    #[arg(long)]
    pub no_shard_cache: bool,
    /// Most sample requests in flight at once.
    #[arg(long, default_value_t = 64)]
    pub max_requests: usize,
    /// Time limit of one request, in seconds (a stalled request is retried).
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub storage_timeout: f64,
    /// Retries of a failed request (connection errors, 5xx, timeouts), with backoff.
    #[arg(long, default_value_t = 5)]
    pub storage_retries: usize,
}

impl StorageArgs {
    /// The shard options these flags give.
    pub fn options(&self) -> Result<ShardOptions, Error> {
        if !(self.storage_timeout.is_finite() && self.storage_timeout > 0.0) {
            return Err(Error::config(
                "--storage-timeout",
                format!(
                    "{} is not a positive number of seconds",
                    self.storage_timeout
                ),
            ));
        }
        if self.max_requests == 0 {
            return Err(Error::config("--max-requests", "must be at least 1"));
        }
        let defaults = RemoteOptions::default();
        let cache = if self.no_shard_cache {
            None
        } else {
            Some(CacheOptions {
                dir: self
                    .shard_cache
                    .clone()
                    .or_else(|| defaults.cache.as_ref().map(|c| c.dir.clone()))
                    .unwrap_or_default(),
                limit: self.shard_cache_limit,
            })
        };
        Ok(ShardOptions {
            remote: RemoteOptions {
                max_requests: self.max_requests,
                timeout: std::time::Duration::from_secs_f64(self.storage_timeout),
                retries: self.storage_retries,
                cache,
                ..defaults
            },
            ..ShardOptions::default()
        })
    }
}

/// `--exif-orientation`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ExifArg {
    /// For Hugging Face tables (Arrow, Parquet); otherwise as the pipeline says.
    Auto,
    /// Always.
    On,
    /// Never.
    Off,
}

/// `--backend`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum BackendArg {
    /// The media engine for what it can take, the CPU for the rest.
    Auto,
    /// Only the media engine.
    Hw,
    /// Only the host CPU.
    Cpu,
}

impl BackendArg {
    pub fn backend(self) -> Backend {
        match self {
            Self::Auto => Backend::Auto,
            Self::Hw => Backend::Hw,
            Self::Cpu => Backend::Cpu,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Hw => "hw",
            Self::Cpu => "cpu",
        }
    }
}

impl DataArgs {
    /// The pipeline, and a builder over the chosen source with the backend and seed set;
    /// also the dataset's path for the report.
    pub fn open(&self) -> Result<(Pipeline, LoaderBuilder, PathBuf), Error> {
        let mut pipeline = pipelines::resolve(&self.pipeline)?;
        let (builder, origin) = if let Some(m) = &self.manifest {
            (hpuload::Loader::builder(Manifest::open(m)?), m.clone())
        } else if let Some(annotations) = &self.coco {
            let images = self
                .data
                .clone()
                .ok_or_else(|| Error::config("--coco", "give the image folder with --data"))?;
            let options = hpuload::CocoOptions {
                // Images on object storage: one request per image from a folder URL; shards
                // named by URL as `--data` shards are read.
                remote: self.storage.options()?.remote,
                empty: if self.drop_empty {
                    hpuload::source::coco::EmptyImages::Drop
                } else {
                    hpuload::source::coco::EmptyImages::Keep
                },
                ..Default::default()
            };
            let t = std::time::Instant::now();
            let set = hpuload::CocoDataset::open(annotations, &images, &options)?;
            eprintln!(
                "{}: {} images, {} boxes, read in {:.2}s",
                annotations.display(),
                hpuload::Source::entries(&set).len(),
                set.object_count(),
                t.elapsed().as_secs_f64()
            );
            (hpuload::Loader::builder(set), annotations.clone())
        } else {
            let dir = match &self.data {
                Some(d) => d.clone(),
                None => {
                    eprintln!(
                        "no --data given: using the built-in synthetic dataset (generated on first use)"
                    );
                    hpuload::dataset::default_dataset()?
                }
            };
            let options = hpuload::source::OpenOptions {
                shards: self.storage.options()?,
                columns: hpuload::source::hf::ColumnChoice {
                    image: self.image_column.clone(),
                    label: self.label_column.clone(),
                    unlabelled: false,
                },
                ..Default::default()
            };
            let spec = dir.to_string_lossy();
            if matches!(self.exif_orientation, ExifArg::Auto)
                && matches!(
                    hpuload::source::data_kind(&spec),
                    hpuload::source::DataKind::Arrow | hpuload::source::DataKind::Parquet
                )
            {
                pipeline.exif_orientation = true;
            }
            let source = hpuload::source::open(&spec, &options)?;
            (hpuload::Loader::builder_boxed(source), dir)
        };
        match self.exif_orientation {
            ExifArg::Auto => {}
            ExifArg::On => pipeline.exif_orientation = true,
            ExifArg::Off => pipeline.exif_orientation = false,
        }
        let builder = builder
            .shuffle(self.seed)
            .backend(self.backend.backend())
            .pipeline(pipeline.clone());
        Ok((pipeline, builder, origin))
    }
}

fn make_videos(
    out: &std::path::Path,
    videos: usize,
    frames: usize,
    seed: u64,
) -> Result<(), hpuload::Error> {
    if videos == 0 || frames == 0 {
        return Err(hpuload::Error::config(
            "--videos",
            "--videos and --frames must be at least 1",
        ));
    }
    let t = Instant::now();
    let spec = hpuload::video::VideoSetSpec {
        videos,
        frames,
        ..Default::default()
    };
    hpuload::video::make_video_dataset(out, spec, seed)?;
    println!(
        "wrote {videos} clips of {frames} frames to {} in {:.1}s",
        out.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The video flags `bench` and `preview` share.
#[derive(clap::Args, Debug)]
pub struct VideoArgs {
    /// Video: `--data` is a folder of class folders of H.264 MP4/MOV files (default: the
    /// built-in clips, `make-dataset --video`'s, made on first use), tar shards of them
    /// (`make-shards --video`; local or a URL), a CSV list of them, or class folders of
    /// folders of JPEG frames (at --fps); each sample is clips
    /// of one video (torchcodec's `clips_at_random_indices`), every frame of a clip through one
    /// drawn plan of the pipeline.
    #[arg(long)]
    pub video: bool,
    /// With --video over class folders of folders of JPEG frames: their frame rate.
    #[arg(long, default_value_t = 30.0, requires = "video")]
    pub fps: f64,
    /// With --video: frames per clip.
    #[arg(long, default_value_t = 16, requires = "video")]
    pub frames_per_clip: usize,
    /// With --video: frame indices from one frame of a clip to the next (torchcodec's
    /// `num_indices_between_frames`).
    #[arg(long, default_value_t = 1, requires = "video")]
    pub frame_step: usize,
    /// With --video: clips per video.
    #[arg(long, default_value_t = 1, requires = "video")]
    pub clips: usize,
}

impl VideoArgs {
    /// A video folder with clips as the flags say, the pipeline, backend and seed set from
    /// `data`: the pipeline, the builder and the folder.
    pub fn open(
        &self,
        data: &DataArgs,
    ) -> Result<(hpuload::Pipeline, hpuload::LoaderBuilder, PathBuf), Error> {
        use hpuload::video::{ClipSampler, IndexClips};
        // Without --data, the built-in clips (made on first use, as the built-in images are).
        let dir = match &data.data {
            Some(dir) => dir.clone(),
            None => hpuload::video::default_video_dataset()?,
        };
        let pipeline = hpuload::pipelines::resolve(&data.pipeline)?;
        let spec = hpuload::VideoSpec {
            sampler: ClipSampler::RandomIndices(IndexClips {
                num_clips: self.clips,
                frames_per_clip: self.frames_per_clip,
                between: self.frame_step,
                ..IndexClips::default()
            }),
            channels_first: false,
        };
        let options = hpuload::source::OpenOptions {
            shards: data.storage.options()?,
            ..Default::default()
        };
        let source = hpuload::source::open_videos(&dir.to_string_lossy(), &options, self.fps)?;
        let builder = hpuload::Loader::builder_boxed(source)
            .shuffle(data.seed)
            .backend(data.backend.backend())
            .pipeline(pipeline.clone())
            .video(spec);
        Ok((pipeline, builder, dir))
    }
}
