//! Times reading a COCO annotation file into a `CocoDataset` and reports the process's peak
//! resident memory against the file's size (the mapped file's pages count as resident):
//!
//! ```text
//! cargo run --release --example coco_load -- instances_train2017.json [IMAGES] [--repeat N]
//! ```
//!
//! With `--repeat N` the file is read N times and the median time printed (the page cache is
//! warm after the first).

use std::time::Instant;

use hpuload::{CocoDataset, CocoOptions, Source};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: coco_load ANNOTATIONS [IMAGES] [--repeat N]";
    let mut repeat = 1usize;
    let mut positional = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--repeat" {
            repeat = it.next().ok_or(usage)?.parse()?;
        } else {
            positional.push(a.clone());
        }
    }
    let annotations = positional.first().ok_or(usage)?;
    let images = positional.get(1).cloned().unwrap_or_else(|| ".".into());
    let bytes = std::fs::metadata(annotations)?.len();
    let mut times = Vec::new();
    let mut summary = String::new();
    for _ in 0..repeat.max(1) {
        let start = Instant::now();
        let set = CocoDataset::open(annotations, &images, &CocoOptions::default())?;
        times.push(start.elapsed().as_secs_f64());
        summary = format!(
            "{} images, {} boxes",
            set.entries().len(),
            set.object_count()
        );
    }
    times.sort_by(f64::total_cmp);
    let peak = peak_rss();
    println!(
        "{annotations}: {:.1} MB, {summary}; read in {:.3}s (median of {}; min {:.3}s, max {:.3}s); \
         peak RSS {:.1} MB = {:.2}x the file",
        bytes as f64 / 1e6,
        times[times.len() / 2],
        times.len(),
        times[0],
        times[times.len() - 1],
        peak as f64 / 1e6,
        peak as f64 / bytes.max(1) as f64
    );
    Ok(())
}

/// The process's peak resident set (`VmHWM`), in bytes; 0 where /proc is unavailable.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}
