//! The `hpuload` command line: `bench`, `make-dataset` and `preview`.

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;
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
    Bench(cli::bench::BenchArgs),
    /// Write a synthetic ImageNet-like JPEG dataset (ImageFolder layout): textured content,
    /// ImageNet's size distribution, realistic file sizes.
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
    /// Write a contact sheet (PNG) of one augmented batch, de-normalized and labelled: what the
    /// model will see.
    Preview(cli::preview::PreviewArgs),
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
        Command::Bench(args) => cli::bench::run(&args),
        Command::Preview(args) => cli::preview::run(&args),
        Command::MakeDataset { out, images, seed } => make_dataset(&out, images, seed),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn make_dataset(out: &std::path::Path, images: usize, seed: u64) -> Result<(), hpuload::Error> {
    if images == 0 {
        return Err(hpuload::Error::Config("--images must be at least 1".into()));
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
