//! Frame-index speed over a folder of videos (class folders of `.mp4` or `.avi`): every video
//! indexed from its own tables on all cores, written to an index file, then read back from it,
//! as a video loader does when it is built. Prints both times per round and their medians.
//!
//!     cargo run --release --example index_videos -- FOLDER [ROUNDS] [THREADS]
//!
//! The index file is written to a temporary folder, not into FOLDER. To time reads from disk
//! rather than the page cache, drop the caches between runs (as root:
//! `echo 3 > /proc/sys/vm/drop_caches`) and run one round.

use std::time::Instant;

use hpuload::video::index_videos;
use hpuload::{Source, VideoFolder};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let folder = args
        .next()
        .ok_or("usage: index_videos FOLDER [ROUNDS] [THREADS]")?;
    let rounds: usize = args.next().map_or(Ok(3), |r| r.parse())?;
    let listed = Instant::now();
    let videos = VideoFolder::open(&folder)?;
    let paths: Vec<_> = videos
        .entries()
        .iter()
        .map(|e| hpuload::video::VideoAt::whole(&e.path))
        .collect();
    println!(
        "{} videos listed in {:.3} s",
        paths.len(),
        listed.elapsed().as_secs_f64()
    );
    let threads: usize = match args.next() {
        Some(t) => t.parse()?,
        None => hpuload::video::index_threads(),
    };
    let file =
        std::env::temp_dir().join(format!("hpuload-index-videos-{}.idx", std::process::id()));
    let (mut built, mut read) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let _ = std::fs::remove_file(&file);
        let (_, fresh) = index_videos(&paths, Some(&file), threads);
        let (_, again) = index_videos(&paths, Some(&file), threads);
        let bytes = std::fs::metadata(&file).map_or(0, |m| m.len());
        println!(
            "round {round}: built {} ({} failed) in {:.3} s on {threads} threads, {:.1} MiB \
             packed, index file {:.1} MiB; read back {} in {:.3} s",
            fresh.built,
            fresh.failed,
            fresh.seconds,
            fresh.packed_bytes as f64 / (1 << 20) as f64,
            bytes as f64 / (1 << 20) as f64,
            again.cached,
            again.seconds
        );
        built.push(fresh.seconds);
        read.push(again.seconds);
    }
    let _ = std::fs::remove_file(&file);
    println!(
        "median: built in {:.3} s, read back in {:.3} s",
        median(&mut built),
        median(&mut read)
    );
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
