//! The `hpuload` command line: `bench` and `make-dataset`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use hpuload::{
    pipelines, Dtype, Error, Hpu, HpuConfig, ImageFolder, LastBatch, Layout, Loader, Manifest,
    ReadMode, Report,
};

#[derive(Parser)]
#[command(
    name = "hpuload",
    version,
    about = "Feed device-resident batches to an (emulated) HPU, and measure how fast"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure loader throughput (images/s) and where the time goes.
    Bench(BenchArgs),
    /// Write a synthetic ImageNet-like JPEG dataset (ImageFolder layout).
    MakeDataset {
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
        /// Number of images.
        #[arg(long, default_value_t = 1000)]
        images: usize,
        /// Seed; the same seed gives the same files.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
}

#[derive(clap::Args)]
struct BenchArgs {
    /// ImageFolder dataset. Default: the built-in synthetic dataset (generated on first use).
    #[arg(long, conflicts_with = "manifest")]
    data: Option<PathBuf>,
    /// Manifest file (`path<TAB>label` per line) instead of a folder.
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// Built-in pipeline name (resnet50_train, resnet50_eval) or a pipeline file.
    #[arg(long, default_value = "resnet50_train")]
    pipeline: String,
    /// Batch size.
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Worker threads. Default: the number of CPUs.
    #[arg(long)]
    workers: Option<usize>,
    /// Measured epochs, after one warm-up epoch.
    #[arg(long, default_value_t = 3)]
    epochs: u64,
    /// Batches prepared ahead.
    #[arg(long, default_value_t = 2)]
    prefetch: usize,
    /// Output dtype: u8, f16, bf16, f32.
    #[arg(long, default_value = "bf16")]
    dtype: Dtype,
    /// Output layout.
    #[arg(long, value_enum, default_value = "nchw")]
    layout: LayoutArg,
    /// How files are read.
    #[arg(long, value_enum, default_value = "read")]
    read_mode: ReadModeArg,
    /// Shuffle seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where samples are decoded: the emulated media engine when it can (auto), only the
    /// engine (hw), or only the host CPU (cpu).
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendArg,
    /// Write the report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LayoutArg {
    Nchw,
    Nhwc,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum BackendArg {
    Auto,
    Hw,
    Cpu,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ReadModeArg {
    Read,
    Mmap,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HPULOAD_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => bench(args),
        Command::MakeDataset { out, images, seed } => {
            let t = Instant::now();
            hpuload::dataset::make_dataset(&out, images, seed).map(|()| {
                println!(
                    "wrote {images} images to {} in {:.1}s",
                    out.display(),
                    t.elapsed().as_secs_f64()
                );
            })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn bench(args: BenchArgs) -> Result<(), Error> {
    let pipeline = pipelines::resolve(&args.pipeline)?;
    let layout = match args.layout {
        LayoutArg::Nchw => Layout::Nchw,
        LayoutArg::Nhwc => Layout::Nhwc,
    };
    let hpu = Hpu::emulated(HpuConfig::default())?;
    let builder = |b: hpuload::LoaderBuilder| {
        let b = b
            .batch_size(args.batch)
            .shuffle(args.seed)
            .prefetch(args.prefetch)
            .pipeline(pipeline.clone())
            .output(args.dtype, layout)
            .device(&hpu)
            .last_batch(LastBatch::Pad)
            .backend(match args.backend {
                BackendArg::Auto => hpuload::Backend::Auto,
                BackendArg::Hw => hpuload::Backend::Hw,
                BackendArg::Cpu => hpuload::Backend::Cpu,
            })
            .read_mode(match args.read_mode {
                ReadModeArg::Read => ReadMode::Read,
                ReadModeArg::Mmap => ReadMode::Mmap,
            });
        match args.workers {
            Some(w) => b.workers(w),
            None => b,
        }
    };
    let (origin, mut loader) = if let Some(m) = &args.manifest {
        (
            m.clone(),
            builder(Loader::builder(Manifest::open(m)?)).build()?,
        )
    } else {
        let dir = match &args.data {
            Some(d) => d.clone(),
            None => {
                eprintln!("no --data given: using the built-in synthetic dataset (generated on first use)");
                hpuload::dataset::default_dataset()?
            }
        };
        (
            dir.clone(),
            builder(Loader::builder(ImageFolder::open(&dir)?)).build()?,
        )
    };
    let (dtype, layout, [h, w]) = loader.output();
    println!(
        "dataset {} ({} images), pipeline {}, batch {}, {} batches/epoch, output {dtype:?} {layout:?} {h}x{w}, pinned: {}",
        origin.display(),
        loader.dataset_len(),
        pipeline.name,
        args.batch,
        loader.batches_per_epoch(),
        loader.is_pinned()
    );
    let mut rates = Vec::new();
    let mut ttfb = Vec::new();
    let mut before = loader.report();
    let mut measured = Report::default();
    for epoch in 0..=args.epochs {
        let start = Instant::now();
        let mut images = 0;
        let mut first = None;
        for batch in loader.epoch(epoch) {
            let batch = batch?;
            first.get_or_insert(start.elapsed());
            images += batch.valid;
        }
        let secs = start.elapsed().as_secs_f64();
        let after = loader.report();
        let rate = images as f64 / secs;
        let first = first.unwrap_or_default();
        let (rss, peak) = rss_bytes();
        println!(
            "epoch {epoch}{}: {images} images in {secs:.2}s = {rate:.0} images/s, first batch after {:.3}s, RSS {} MiB (peak {} MiB)",
            if epoch == 0 { " (warm-up)" } else { "" },
            first.as_secs_f64(),
            rss >> 20,
            peak >> 20
        );
        if epoch > 0 {
            rates.push(rate);
            ttfb.push(first);
            measured = accumulate(measured, &before, &after);
        }
        before = after;
    }
    let median = median(&mut rates);
    println!(
        "images/s (median of {} measured epochs): {median:.0}",
        rates.len()
    );
    print_stages(&measured);
    let r = loader.report();
    println!(
        "media engine decoded {} of {} samples; fallbacks to the CPU: {:?}; bytes DMA'd per image: {:.0}",
        r.hw_samples,
        r.samples_loaded,
        r.fallbacks,
        r.bytes_dma as f64 / r.samples_loaded.max(1) as f64
    );
    println!(
        "skipped: {} {:?}; pinned: {} ({} MiB)",
        r.skipped,
        r.skipped_by_reason,
        r.pinned,
        r.pinned_bytes >> 20
    );
    if let Some(path) = args.json.clone() {
        let json = serde_json::json!({
            "images_per_sec": median,
            "time_to_first_batch_sec": median_dur(&mut ttfb),
            "epochs": args.epochs,
            "images": measured.images,
            "batches": measured.batches,
            "backend": args.backend_name(),
            "workers": args.workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
            "batch_size": args.batch,
            "stages": measured.stages,
            "skipped": r.skipped,
            "fallbacks": r.fallbacks,
            "pinned": r.pinned,
            "peak_rss_bytes": rss_bytes().1,
            "report": r,
        });
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&json).expect("report serializes"),
        )
        .map_err(|source| Error::Io { path, source })?;
    }
    Ok(())
}

impl BenchArgs {
    fn backend_name(&self) -> &'static str {
        match self.backend {
            BackendArg::Auto => "auto",
            BackendArg::Hw => "hw",
            BackendArg::Cpu => "cpu",
        }
    }
}

fn accumulate(mut total: Report, before: &Report, after: &Report) -> Report {
    total.images += after.images - before.images;
    total.batches += after.batches - before.batches;
    let (s, a, b) = (&mut total.stages, &after.stages, &before.stages);
    s.read += a.read - b.read;
    s.decode_cpu += a.decode_cpu - b.decode_cpu;
    s.resize += a.resize - b.resize;
    s.collate += a.collate - b.collate;
    s.dma += a.dma - b.dma;
    s.route += a.route - b.route;
    s.engine += a.engine - b.engine;
    s.wait += a.wait - b.wait;
    total
}

fn print_stages(r: &Report) {
    let s = &r.stages;
    let host = [
        ("read", s.read),
        ("decode (cpu)", s.decode_cpu),
        ("crop+resize", s.resize),
        ("flip+normalize+cast into pinned", s.collate),
        ("route (engine probe + bitstream copy)", s.route),
    ];
    let total: Duration = host.iter().map(|(_, d)| *d).sum();
    let per = |d: Duration| d.as_secs_f64() * 1e3 / r.images.max(1) as f64;
    println!("host CPU time per image ({:.3} ms in all):", per(total));
    for (name, d) in host {
        println!(
            "  {name:<34} {:>7.3} ms  {:>5.1}%",
            per(d),
            100.0 * d.as_secs_f64() / total.as_secs_f64().max(1e-9)
        );
    }
    println!(
        "emulated device time per image: DMA {:.3} ms, media engine + device ops {:.3} ms; training loop waited {:.2}s in all",
        per(s.dma),
        per(s.engine),
        s.wait.as_secs_f64()
    );
    if s.engine > total {
        // The emulated engine runs on this host's cores: it is the bound here, where real
        // hardware would take that work off the host.
        println!(
            "bound by the emulated media engine: {:.3} ms of engine time per image vs {:.3} ms of host pipeline time",
            per(s.engine),
            per(total)
        );
    } else if let Some((name, d)) = host.iter().max_by_key(|(_, d)| *d) {
        println!(
            "bound by {name}: {:.0}% of host CPU time",
            100.0 * d.as_secs_f64() / total.as_secs_f64().max(1e-9)
        );
    }
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

fn median(xs: &mut [f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let m = xs.len() / 2;
    if xs.len() % 2 == 1 {
        xs[m]
    } else {
        (xs[m - 1] + xs[m]) / 2.0
    }
}

fn median_dur(xs: &mut [Duration]) -> f64 {
    let mut s: Vec<f64> = xs.iter().map(Duration::as_secs_f64).collect();
    median(&mut s)
}
