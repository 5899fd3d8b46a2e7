//! The crate's error type. Every error that concerns one sample names its file.

use std::path::PathBuf;

use hpuload_decoders::DecodeError;

use crate::augment::AugmentError;
use crate::hpu::HpuError;

/// Anything that can go wrong building or running a loader.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A dataset file or folder could not be opened or listed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A manifest line is malformed.
    #[error("{}:{line}: {reason}", path.display())]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with the line.
        reason: String,
    },
    /// A data file is not what it claims to be: an Arrow IPC stream, a Parquet file, a tar
    /// shard or a COCO annotation file whose bytes are malformed (not JSON, a record without
    /// a field, a damaged footer, ...), named, with what is wrong and where. Not an I/O error:
    /// the file was read.
    #[error("{}: {reason}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        reason: String,
    },
    /// The dataset holds no images.
    #[error("{}: no images found ({what})", path.display())]
    EmptyDataset {
        /// The folder or manifest.
        path: PathBuf,
        /// What was looked for.
        what: &'static str,
    },
    /// The loader's configuration is invalid: which setting, and why.
    #[error("invalid configuration ({setting}): {reason}")]
    Config {
        /// The setting (builder method, CLI flag, environment variable or argument).
        setting: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The work was cancelled (its epoch was dropped before it finished).
    #[error("cancelled")]
    Cancelled,
    /// A thread the loader needs could not be started.
    #[error("cannot start the {what} threads: {source}")]
    ThreadStart {
        /// Which threads.
        what: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Host memory the loader needs could not be mapped.
    #[error("cannot map the {what}: {source}")]
    HostMemory {
        /// What the memory was for.
        what: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A pipeline definition is invalid.
    #[error("pipeline {name}: {reason}")]
    Pipeline {
        /// The pipeline's name or file.
        name: String,
        /// What is wrong.
        reason: crate::augment::PipelineError,
    },
    /// One sample failed (read, decode or augment) and the error policy made it fatal.
    #[error(transparent)]
    Sample(#[from] SampleError),
    /// More samples failed this epoch than the error budget allows.
    #[error("{skipped} samples failed this epoch, over the error budget of {budget}; the dataset looks misconfigured (last: {last})")]
    ErrorBudget {
        /// Samples skipped so far this epoch.
        skipped: usize,
        /// The budget.
        budget: usize,
        /// The failure that crossed the budget: its path and reason.
        last: String,
    },
    /// A worker thread ended without reporting (it should never happen: panics are caught).
    #[error("a loader worker thread exited unexpectedly")]
    WorkerLost,
    /// The caller asked the loader to stop waiting (e.g. Ctrl-C in the Python binding).
    #[error("interrupted while waiting for a batch")]
    Interrupted,
    /// The emulated device failed (out of memory, DMA failure).
    #[error(transparent)]
    Hpu(#[from] HpuError),
}

impl Error {
    /// A configuration error about `setting`.
    pub fn config(setting: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Config {
            setting: setting.into(),
            reason: reason.into(),
        }
    }
}

/// One sample that could not be loaded: which file, and why.
#[derive(Debug, thiserror::Error)]
#[error("sample {index} ({}): {kind}", path.display())]
pub struct SampleError {
    /// Index of the sample in the dataset.
    pub index: usize,
    /// Its file.
    pub path: PathBuf,
    /// What went wrong.
    #[source]
    pub kind: SampleErrorKind,
}

impl SampleError {
    /// A short stable name for the failure, for counting by reason
    /// (`read`, `format`, `empty`, `truncated`, `corrupt`, `too-large`, `unknown-format`, `unsupported`,
    /// `augment`, `panic`, `device`).
    pub fn reason(&self) -> &'static str {
        match &self.kind {
            SampleErrorKind::Read(_) => "read",
            SampleErrorKind::Format(_) => "format",
            SampleErrorKind::Decode(e) => e.reason(),
            SampleErrorKind::Augment(_) => "augment",
            SampleErrorKind::Video(_) => "video",
            SampleErrorKind::Panic(_) => "panic",
            SampleErrorKind::Device(_) => "device",
            SampleErrorKind::ReplacementsExhausted { .. } => "replacements-exhausted",
        }
    }
}

/// The stage at which a sample failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SampleErrorKind {
    /// Reading the file failed.
    #[error("cannot read: {0}")]
    Read(#[source] std::io::Error),
    /// The sample's bytes were read but its container is malformed there (a Parquet page that
    /// does not decode, a shard cut short, a row without its label).
    #[error("malformed: {0}")]
    Format(#[source] std::io::Error),
    /// Decoding failed.
    #[error("cannot decode: {0}")]
    Decode(#[source] DecodeError),
    /// The pipeline cannot process this image (e.g. smaller than a center crop).
    #[error("cannot augment: {0}")]
    Augment(#[source] AugmentError),
    /// The video cannot be indexed, has no clip for the sampler, or a frame does not decode
    /// (which frame, and why).
    #[error("video: {0}")]
    Video(#[source] crate::video::VideoError),
    /// A worker panicked while processing the sample.
    #[error("worker panicked: {0}")]
    Panic(String),
    /// The device could not take the sample (e.g. no memory for its bitstream).
    #[error("device: {0}")]
    Device(#[source] HpuError),
    /// Under `OnError::Skip`, the sample and every replacement tried for it failed.
    #[error("it and {tried} replacements all failed; the last, {last}")]
    ReplacementsExhausted {
        /// Replacements tried.
        tried: usize,
        /// The last replacement's failure (each one's is in the batch's report).
        last: Box<SampleError>,
    },
}
