//! `hpuload bench`: runs a warm-up epoch and the measured epochs, and reports images/s, where
//! the time went, and (with `--step-ms`) whether the loader keeps a training step fed.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use hpuload::{Dtype, Error, Hpu, HpuConfig, LastBatch, Layout, OnError, OutputSize, ReadMode};
use indicatif::{ProgressBar, ProgressStyle};

use super::report::{BenchReport, EpochStats, EpochVideo, Settings};
use super::DataArgs;

/// `hpuload bench` options.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub data: DataArgs,
    /// Batch size (default 256; 8 clips with --video).
    #[arg(long)]
    pub batch: Option<usize>,
    /// Worker threads. Default: the number of CPUs.
    #[arg(long)]
    pub workers: Option<usize>,
    /// Measured epochs, after one warm-up epoch.
    #[arg(long, default_value_t = 3)]
    pub epochs: u64,
    /// Batches prepared ahead of the one the training loop waits for.
    #[arg(long, default_value_t = 2)]
    pub prefetch: usize,
    /// Simulate a training step of this many milliseconds per batch, and report whether the
    /// loader keeps up (how long the accelerator would sit idle).
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    pub step_ms: Option<f64>,
    /// Output dtype: u8, f16, bf16, f32.
    #[arg(long, default_value = "bf16")]
    pub dtype: Dtype,
    /// Output layout.
    #[arg(long, value_enum, default_value = "nchw")]
    pub layout: LayoutArg,
    /// How files are read.
    #[arg(long, value_enum, default_value = "read")]
    pub read_mode: ReadModeArg,
    /// Also write the report as JSON (schema: docs/bench-json.md) to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// What a file that cannot be loaded does: skip (replace it, count it, fail past the
    /// error budget) or fail (end with an error naming it).
    #[arg(long, value_enum, default_value = "skip")]
    pub on_error: OnErrorArg,
    /// With --on-error skip, the fraction of an epoch's samples that may fail before the run
    /// stops (a damaged dataset can be measured with a raised budget).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.01)]
    pub error_budget: f64,
    #[command(flatten)]
    pub video: super::VideoArgs,
}

/// `--layout`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum LayoutArg {
    /// `[N, 3, H, W]`.
    Nchw,
    /// `[N, H, W, 3]`.
    Nhwc,
}

/// `--on-error`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum OnErrorArg {
    /// Replace the sample, log and count it.
    Skip,
    /// End with an error that names the file.
    Fail,
}

/// `--read-mode`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ReadModeArg {
    /// `read(2)` into a reused buffer.
    Read,
    /// Memory-map each file.
    Mmap,
}

/// Runs the benchmark and prints (and optionally writes) its report.
pub fn run(args: &BenchArgs) -> Result<(), Error> {
    if args.epochs == 0 {
        return Err(Error::config("--epochs", "--epochs must be at least 1"));
    }
    let step = match args.step_ms {
        Some(ms) if !(ms.is_finite() && ms >= 0.0) => {
            return Err(Error::config(
                "--step-ms",
                format!("--step-ms {ms} is not a duration in milliseconds"),
            ))
        }
        Some(ms) => Some(Duration::from_secs_f64(ms / 1e3)),
        None => None,
    };
    let (pipeline, builder, origin) = if args.video.video {
        args.video.open(&args.data)?
    } else {
        args.data.open()?
    };
    let hpu = Hpu::emulated(HpuConfig::default())?;
    let layout = match args.layout {
        LayoutArg::Nchw => Layout::Nchw,
        LayoutArg::Nhwc => Layout::Nhwc,
    };
    let batch = args.batch.unwrap_or(if args.video.video { 8 } else { 256 });
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let started = Instant::now();
    let mut loader = builder
        .batch_size(batch)
        .workers(workers)
        .prefetch(args.prefetch)
        .output(args.dtype, layout)
        .device(&hpu)
        .last_batch(LastBatch::Pad)
        .on_error(match args.on_error {
            OnErrorArg::Skip => OnError::Skip,
            OnErrorArg::Fail => OnError::Fail,
        })
        .error_budget(args.error_budget)
        .read_mode(match args.read_mode {
            ReadModeArg::Read => ReadMode::Read,
            ReadModeArg::Mmap => ReadMode::Mmap,
        })
        .build()?;
    let (dtype, layout, size) = loader.output();
    let size = match size {
        OutputSize::Fixed([h, w]) => format!("{h}x{w}"),
        OutputSize::PerSample { max_pixels } => {
            format!("each image its own size (at most {max_pixels} pixels)")
        }
    };
    println!(
        "dataset {} ({} {}), pipeline {}, backend {}, batch {}, {} workers, {} batches/epoch, \
         output {dtype:?} {layout:?} {size}, pinned: {}",
        origin.display(),
        loader.dataset_len(),
        if args.video.video { "videos" } else { "images" },
        pipeline.name,
        args.data.backend.name(),
        batch,
        workers,
        loader.batches_per_epoch(),
        loader.is_pinned()
    );
    if args.video.video {
        println!("  H.264 decoder: {}", crate::video::h264_decoder());
    }
    if let Some(index) = loader.video_index_stats() {
        println!(
            "  video index: {} videos in {:.3} s ({} from the index file, {} indexed, {} failed{})",
            index.videos,
            index.seconds,
            index.cached,
            index.built,
            index.failed,
            index
                .saved
                .as_ref()
                .map_or(String::new(), |p| format!("; saved to {}", p.display()))
        );
    }
    let terminal = std::io::stderr().is_terminal();
    let mut epochs = Vec::new();
    let mut time_to_first_batch = None;
    let mut storage_before = None;
    for epoch in 0..=args.epochs {
        if epoch == 1 {
            storage_before = loader.report().storage;
        }
        let bar = progress_bar(terminal, epoch, loader.batches_per_epoch());
        let before = loader.report();
        let cpu_before = process_cpu();
        let start = Instant::now();
        let (mut images, mut batches, mut first) = (0u64, 0u64, None);
        for batch in loader.epoch(epoch) {
            let batch = batch?;
            first.get_or_insert(start.elapsed());
            time_to_first_batch.get_or_insert(started.elapsed());
            images += batch.valid as u64;
            batches += 1;
            bar.set_message(format!(
                "{:.0} images/s",
                images as f64 / start.elapsed().as_secs_f64()
            ));
            bar.inc(1);
            if let Some(step) = step {
                std::thread::sleep(step);
            }
        }
        let wall = start.elapsed();
        bar.finish_and_clear();
        let after = loader.report();
        let video = args.video.video.then(|| {
            let kept = images * (args.video.frames_per_clip * args.video.clips) as u64;
            let video = EpochVideo {
                clips_per_sec: images as f64 * args.video.clips as f64 / wall.as_secs_f64(),
                frames_kept_per_sec: kept as f64 / wall.as_secs_f64(),
                frames_decoded: after.frames_decoded - before.frames_decoded,
                frames_discarded: after.frames_discarded - before.frames_discarded,
                frames_skipped: after.frames_skipped - before.frames_skipped,
                discarded_decode_sec: (after.frames_discarded_decode_sec
                    - before.frames_discarded_decode_sec)
                    + (after.frames_discarded_engine_sec - before.frames_discarded_engine_sec),
            };
            println!("{}", video.line());
            video
        });
        let stats = EpochStats {
            epoch,
            warm_up: epoch == 0,
            images,
            batches,
            wall_sec: wall.as_secs_f64(),
            images_per_sec: images as f64 / wall.as_secs_f64(),
            first_batch_sec: first.unwrap_or_default().as_secs_f64(),
            process_cpu_sec: (process_cpu() - cpu_before).as_secs_f64(),
            rss_bytes: rss_bytes().0,
            stages: after.stages.since(&before.stages),
            samples_loaded: after.samples_loaded - before.samples_loaded,
            boxes: loader.target_layout().map(|_| after.boxes - before.boxes),
            video,
        };
        println!("{}", stats.line());
        epochs.push(stats);
    }
    let settings = Settings {
        backend: args.data.backend.name(),
        batch_size: batch,
        prefetch: args.prefetch,
        step_ms: args.step_ms,
    };
    let report = BenchReport::new(
        &settings,
        &origin,
        &pipeline.name,
        workers,
        &loader,
        epochs,
        time_to_first_batch.unwrap_or_default(),
        rss_bytes().1,
        loader
            .report()
            .storage
            .map(|now| now.since(&storage_before.unwrap_or_default())),
    );
    report.print();
    if let Some(path) = &args.json {
        std::fs::write(path, report.to_json()).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        println!("report written to {}", path.display());
    }
    Ok(())
}

/// A progress bar on a terminal (stderr); hidden otherwise, where the per-epoch lines suffice.
fn progress_bar(terminal: bool, epoch: u64, batches: usize) -> ProgressBar {
    if !terminal {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(batches as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix} {bar:40} {pos}/{len} batches  {msg}  ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(if epoch == 0 {
        "warm-up".to_string()
    } else {
        format!("epoch {epoch}")
    });
    bar
}

/// CPU time (user + system) of this whole process so far.
fn process_cpu() -> Duration {
    // SAFETY: getrusage fills the struct it is given; an all-zero rusage is a valid value.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// `(current, peak)` resident set size of this process, from /proc (0 where unavailable).
fn rss_bytes() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}
