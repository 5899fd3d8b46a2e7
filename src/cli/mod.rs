//! The subcommands, and what they share: where the data comes from and how a loader is built.

pub mod bench;
pub mod preview;
pub mod report;

use std::path::PathBuf;

use hpuload::{pipelines, Backend, Error, ImageFolder, LoaderBuilder, Manifest, Pipeline};

/// Where the samples come from, and how they are augmented.
#[derive(clap::Args, Clone, Debug)]
pub struct DataArgs {
    /// ImageFolder dataset (`DIR/<class>/<image>`). Default: the built-in synthetic dataset,
    /// generated on first use in $HPULOAD_CACHE_DIR (or ~/.cache/hpuload).
    #[arg(long, conflicts_with = "manifest")]
    pub data: Option<PathBuf>,
    /// Manifest file (`path<TAB>label` per line) instead of a folder.
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// Built-in pipeline (resnet50_train, resnet50_eval) or a pipeline TOML file.
    #[arg(long, default_value = "resnet50_train")]
    pub pipeline: String,
    /// Where samples are decoded: the emulated media engine when it can take the file (auto),
    /// only the engine (hw), or only the host CPU (cpu).
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
    /// Seed of the shuffle and of every random augmentation.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
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
        let pipeline = pipelines::resolve(&self.pipeline)?;
        let (builder, origin) = if let Some(m) = &self.manifest {
            (hpuload::Loader::builder(Manifest::open(m)?), m.clone())
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
            (hpuload::Loader::builder(ImageFolder::open(&dir)?), dir)
        };
        let builder = builder
            .shuffle(self.seed)
            .backend(self.backend.backend())
            .pipeline(pipeline.clone());
        Ok((pipeline, builder, origin))
    }
}
