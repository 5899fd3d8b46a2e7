//! A training loop that consumes device batches while a simulated training step runs, showing
//! that loading overlaps compute: with a step longer than the loader needs per batch, the loop
//! barely waits.
//!
//! ```text
//! cargo run --release --example train_loop -- [DATA_DIR] [STEP_MS]
//! ```
//! Without DATA_DIR it uses the built-in synthetic dataset.

use std::time::{Duration, Instant};

use hpuload::{pipelines, Dtype, Hpu, HpuConfig, ImageFolder, Layout, Loader};

fn main() -> Result<(), hpuload::Error> {
    let mut args = std::env::args().skip(1);
    let data = match args.next() {
        Some(d) => d.into(),
        None => hpuload::dataset::default_dataset()?,
    };
    let step = Duration::from_millis(args.next().and_then(|s| s.parse().ok()).unwrap_or(150));
    let hpu = Hpu::emulated(HpuConfig::default())?;
    let mut loader = Loader::builder(ImageFolder::open(&data)?)
        .batch_size(128)
        .shuffle(7)
        .prefetch(2)
        .pipeline(pipelines::resnet50_train())
        .output(Dtype::Bf16, Layout::Nchw)
        .device(&hpu)
        .build()?;
    println!(
        "{} batches per epoch, training step {step:?}",
        loader.batches_per_epoch()
    );
    for epoch in 0..2 {
        let (start, mut waited, mut seen) = (Instant::now(), Duration::ZERO, 0);
        let mut batches = loader.epoch(epoch);
        loop {
            let t = Instant::now();
            let Some(batch) = batches.next() else { break };
            waited += t.elapsed();
            let batch = batch?;
            assert_eq!(batch.images.shape(), &[128, 3, 224, 224]);
            seen += batch.valid;
            // The "training step": the accelerator works on the batch while the loader's workers
            // decode the next ones and the DMA engine copies them.
            std::thread::sleep(step);
        }
        let total = start.elapsed();
        println!(
            "epoch {epoch}: {seen} images in {:.2}s, waited for data {:.2}s ({:.0}% of the epoch)",
            total.as_secs_f64(),
            waited.as_secs_f64(),
            100.0 * waited.as_secs_f64() / total.as_secs_f64()
        );
    }
    let r = loader.report();
    println!(
        "skipped {}, pinned {}, DMA'd {} MiB",
        r.skipped,
        r.pinned,
        r.bytes_dma >> 20
    );
    Ok(())
}
