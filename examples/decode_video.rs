//! Decode speed of the video path's host decoder (FFmpeg's libavcodec where one is found, else
//! OpenH264; `HPULOAD_LIBAVCODEC` picks, see `hpuload::video::h264_decoder`) through the frame
//! index and the decode plan, one thread, over every video in a folder: every frame decoded, then the same
//! with the conversion to RGB. Prints frames per second per round and the median.
//!
//!     cargo run --release --example decode_video -- FOLDER [ROUNDS]
//!
//! `benches/peers/video_decode.py` measures FFmpeg's decoder (through PyAV) the same way.

use std::fs::File;
use std::time::Instant;

use hpuload::video::{colour, h264_decoder, DecodePlan, VideoDecoder, VideoIndex};
use hpuload::{Source, VideoFolder};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let folder = args.next().ok_or("usage: decode_video FOLDER [ROUNDS]")?;
    let rounds: usize = args.next().map_or(Ok(5), |r| r.parse())?;
    let videos = VideoFolder::open(&folder)?;
    let indexes = videos
        .entries()
        .iter()
        .map(|e| VideoIndex::open(&e.path))
        .collect::<Result<Vec<_>, _>>()?;
    let (w, h) = indexes[0].size;
    println!(
        "{} videos, first {w}x{h}; decoder: {}",
        indexes.len(),
        h264_decoder()
    );
    for rgb in [false, true] {
        let mut rates = Vec::new();
        for _ in 0..rounds {
            let start = Instant::now();
            let mut frames = 0usize;
            let mut out = Vec::new();
            for index in &indexes {
                let all: Vec<usize> = (0..index.frames.len()).collect();
                let plan = DecodePlan::new(index, &all);
                let mut decoder = VideoDecoder::new(index)?;
                let conversion = colour::Conversion::of_video(index);
                decoder.decode(&File::open(&index.path)?, index, &plan, &mut |p| {
                    if rgb {
                        colour::to_rgb(&p, &conversion, &mut out);
                    }
                    frames += 1;
                })?;
            }
            rates.push(frames as f64 / start.elapsed().as_secs_f64());
        }
        let mut sorted = rates.clone();
        sorted.sort_by(f64::total_cmp);
        println!(
            "{}: median {:.0} frames/s (rounds {:?})",
            if rgb { "decode + rgb" } else { "decode" },
            sorted[sorted.len() / 2],
            rates.iter().map(|r| r.round()).collect::<Vec<_>>()
        );
    }
    Ok(())
}
