//! Rough single-thread decode rate of both decoders over the JPEGs in a folder (recursively):
//! a quick check while developing; the criterion benches are the measurement of record.
use std::time::Instant;

use hpuload_decoders::jpeg::{choose_scale, scaled_region, Region};
use hpuload_decoders::{CpuDecoder, Decode, JpegDecoder};

fn files(dir: &std::path::Path, out: &mut Vec<Vec<u8>>, limit: usize) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("folder")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if out.len() >= limit {
            return;
        }
        if p.is_dir() {
            files(&p, out, limit);
        } else if p.extension().is_some_and(|e| e == "jpg") {
            out.push(std::fs::read(&p).expect("file"));
        }
    }
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .expect("usage: decode_speed DIR [N]");
    let n = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    let mut data = Vec::new();
    files(dir.as_ref(), &mut data, n);
    // For profiling one decoder: DECODE_ONLY=zune|full|roi runs only that one, 10 rounds.
    let only = std::env::var("DECODE_ONLY").ok().filter(|o| !o.is_empty());
    let runs = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let rounds = if only.is_some() { 10 } else { 3 };
    let mut out = vec![0u8; 64 << 20];
    for round in 0..rounds {
        let t = Instant::now();
        let mut d = CpuDecoder::default();
        for b in data.iter().filter(|_| runs("zune")) {
            let info = d.probe(b).unwrap();
            d.decode_into(b, &info, &mut out[..info.rgb_len()]).unwrap();
        }
        let cpu = data.iter().filter(|_| runs("zune")).count() as f64 / t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut d = JpegDecoder::default();
        let mut supported = 0;
        for b in data.iter().filter(|_| runs("full")) {
            if let Ok(info) = d.probe(b) {
                d.decode_into(b, &info, &mut out[..info.rgb_len()]).unwrap();
                supported += 1;
            }
        }
        let ours = supported as f64 / t.elapsed().as_secs_f64();
        // ROI: a centred crop of 40% of the area, at the scale a 224 output allows.
        let t = Instant::now();
        let mut roi_n = 0;
        for b in data.iter().filter(|_| runs("roi")) {
            if let Ok(info) = d.probe(b) {
                roi_n += 1;
                let (w, h) = (
                    (info.width as f64 * 0.63) as u32,
                    (info.height as f64 * 0.63) as u32,
                );
                let r = Region {
                    x: (info.width - w) / 2,
                    y: (info.height - h) / 2,
                    width: w,
                    height: h,
                };
                let denom = choose_scale(r, 224, 224);
                let sr = scaled_region(&info, r, denom);
                d.decode_region(b, r, denom, &mut out[..(sr.width * sr.height * 3) as usize])
                    .unwrap();
            }
        }
        let roi = roi_n as f64 / t.elapsed().as_secs_f64();
        println!("round {round}: image crate (zune) {cpu:.0}/s, ours full {ours:.0}/s, ours ROI 40% {roi:.0}/s ({supported} of {} supported)", data.len());
    }
    // A checksum of every full and ROI decode, to confirm a speed change left the output alone.
    let mut d = JpegDecoder::default();
    let mut sum: u64 = 0xcbf2_9ce4_8422_2325;
    for b in &data {
        if let Ok(info) = d.probe(b) {
            let rgb = &mut out[..info.rgb_len()];
            d.decode_into(b, &info, rgb).unwrap();
            for &v in rgb.iter() {
                sum = (sum ^ u64::from(v)).wrapping_mul(0x100_0000_01b3);
            }
        }
    }
    println!("checksum of our full decodes: {sum:016x}");
}
