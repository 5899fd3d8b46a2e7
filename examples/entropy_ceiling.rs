//! The entropy-decoding ceiling of the engine path: over a dataset, the Huffman decoding each
//! sample of a pipeline needs (every MCU row up to the last one of the sample's crop region,
//! coefficients discarded, nothing else) on the loader's worker count, in images/s. No loader
//! of this design can decode baseline JPEGs faster on these cores; `hpuload bench --backend
//! auto` in the same sitting, divided by this, is the fraction of the ceiling reached.
//!
//!     cargo run --release --example entropy_ceiling -- DATA [PIPELINE] [WORKERS] [ROUNDS] [MODE]
//!
//! Each round reads every file (from the page cache after the first), draws each sample's crop
//! as the loader does for epoch 0 (seed 0), and times the entropy decoding alone. MODE
//! `engine` times the media engine's whole decode of each sample instead (the region at the
//! scale the router picks, inverse DCT, colour, resampled to the output in RGB: the engine's
//! `decode_planned`), still without the loader: between the two modes lies the decoding work
//! beyond the Huffman scan, between `engine` and `hpuload bench` the loader's own (reads,
//! uploads, scheduling, the device op's write).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use hpuload::decoders::jpeg::{choose_scale, Filter, ResizeRequest, Scale};
use hpuload::decoders::{Decode, JpegDecoder};
use hpuload::{pipelines, Backend, ImageFolder, Loader, Source};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let data = args
        .next()
        .ok_or("usage: entropy_ceiling DATA [PIPELINE] [WORKERS] [ROUNDS]")?;
    let pipeline = args.next().unwrap_or_else(|| "resnet50_train".into());
    let workers: usize = args.next().map_or(Ok(2), |w| w.parse())?;
    let rounds: usize = args.next().map_or(Ok(3), |r| r.parse())?;
    let engine = match args.next().as_deref() {
        None | Some("entropy") => false,
        Some("engine") => true,
        Some(other) => return Err(format!("MODE is entropy or engine, not {other:?}").into()),
    };
    let folder = ImageFolder::open(&data)?;
    let files: Vec<Vec<u8>> = folder
        .entries()
        .iter()
        .map(|e| std::fs::read(&e.path))
        .collect::<Result<_, _>>()?;
    // The loader draws each sample's plan; its crop's covering region is what the engine
    // decodes (the router's rule), so its last MCU row is where entropy decoding stops.
    let loader = Loader::builder(folder)
        .pipeline(pipelines::resolve(&pipeline)?)
        .backend(Backend::Auto)
        .build()?;
    let mut probe = JpegDecoder::default();
    let mut samples = Vec::with_capacity(files.len());
    for (index, bytes) in files.iter().enumerate() {
        let Ok(info) = probe.probe(bytes) else {
            continue; // the engine takes only what its probe reads; the rest go to the CPU
        };
        let plan = loader.sample_plan(0, index, info.width, info.height)?;
        // What the router asks of the engine for this sample (`loader/route.rs`, canvas
        // jobs aside): the covering region of the resampled output, and its scale.
        let (out_h, out_w) = plan.pixels.resampled();
        let filter = plan.interpolation.filter();
        let region = plan
            .crop
            .covering_region(info.width, info.height, out_w, filter);
        let scale = if filter == Filter::Nearest {
            Scale::FULL
        } else {
            choose_scale(region, out_w, out_h)
        };
        let request = ResizeRequest {
            region,
            scale,
            window: plan.crop.window(),
            out_w,
            out_h,
            filter,
        };
        samples.push((index, request));
    }
    println!(
        "{} of {} files on the engine path, pipeline {pipeline}, {workers} workers, {}",
        samples.len(),
        files.len(),
        if engine {
            "the engine's whole decode"
        } else {
            "entropy decoding alone"
        }
    );
    let mut rates = Vec::new();
    for round in 0..rounds {
        let next = AtomicUsize::new(0);
        let start = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| {
                    let mut decoder = JpegDecoder::default();
                    let mut out = Vec::new();
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        let Some((index, request)) = samples.get(k) else {
                            break;
                        };
                        if engine {
                            out.resize(request.out_w as usize * request.out_h as usize * 3, 0);
                            decoder
                                .decode_resized(&files[*index], request, &mut out)
                                .expect("the probe read it");
                        } else {
                            decoder
                                .entropy_decode_only(&files[*index], request.region)
                                .expect("the probe read it");
                        }
                    }
                });
            }
        });
        let rate = samples.len() as f64 / start.elapsed().as_secs_f64();
        println!("round {round}: {rate:.0} images/s");
        rates.push(rate);
    }
    rates.sort_by(f64::total_cmp);
    println!("median: {:.0} images/s", rates[rates.len() / 2]);
    Ok(())
}
