//! Rough single-thread decode rate of both decoders over the JPEGs in a folder (recursively):
//! a quick check while developing; the criterion benches are the measurement of record.
use std::time::Instant;

use hpuload_decoders::jpeg::{choose_scale, scaled_region, Filter, Region, ResizeRequest, Window};
use hpuload_decoders::{CpuDecoder, Decode, JpegDecoder, Limits};
use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;

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
    // For profiling one decoder: DECODE_ONLY=zune|full|roi|rrc|host runs only that one, 10 rounds.
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
                let scale = choose_scale(r, 224, 224);
                let sr = scaled_region(&info, r, scale);
                d.decode_region(b, r, scale, &mut out[..(sr.width * sr.height * 3) as usize])
                    .unwrap();
            }
        }
        let roi = roi_n as f64 / t.elapsed().as_secs_f64();
        // The media engine's work for the ResNet-50 train pipeline: a RandomResizedCrop window
        // (the same seeded draws every round), decoded at its scale and resampled to 224x224.
        let t = Instant::now();
        let mut rrc_n = 0;
        let mut draws = Draws(0x9E37_79B9_7F4A_7C15);
        for b in data.iter().filter(|_| runs("rrc")) {
            if let Ok(info) = d.probe(b) {
                let request = draws.random_resized_crop(info.width, info.height);
                if d.decode_resized(b, &request, &mut out[..224 * 224 * 3])
                    .is_ok()
                {
                    rrc_n += 1;
                }
            }
        }
        let rrc = rrc_n as f64 / t.elapsed().as_secs_f64();
        println!("round {round}: CPU decoder {cpu:.0}/s, ours full {ours:.0}/s, ours ROI 40% {roi:.0}/s, engine RRC 224 {rrc:.0}/s ({supported} of {} supported)", data.len());
        // The files the engine refuses (progressive, CMYK, arithmetic-coded, ...): the host's
        // exact decoder against zune-jpeg called directly, whole images to RGB.
        let refused: Vec<&Vec<u8>> = data
            .iter()
            .filter(|b| runs("host") && JpegDecoder::default().probe(b).is_err())
            .collect();
        if !refused.is_empty() {
            let t = Instant::now();
            let mut host = JpegDecoder::for_host(Limits::default());
            let mut taken = 0;
            for b in &refused {
                if let Ok(info) = host.probe(b) {
                    if host
                        .decode_into(b, &info, &mut out[..info.rgb_len()])
                        .is_ok()
                    {
                        taken += 1;
                    }
                }
            }
            let ours = taken as f64 / t.elapsed().as_secs_f64();
            let t = Instant::now();
            let mut zune_n = 0;
            for b in &refused {
                let options = DecoderOptions::default().jpeg_set_out_colorspace(ColorSpace::RGB);
                let mut z = zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(&b[..]), options);
                if z.decode_headers().is_ok() {
                    let (w, h) = z.dimensions().expect("headers decoded");
                    if z.decode_into(&mut out[..w * h * 3]).is_ok() {
                        zune_n += 1;
                    }
                }
            }
            let zune = zune_n as f64 / t.elapsed().as_secs_f64();
            println!(
                "round {round}: of the {} the engine refuses, host decoder {ours:.0}/s ({taken}), zune-jpeg {zune:.0}/s ({zune_n})",
                refused.len()
            );
        }
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
    let mut draws = Draws(0x9E37_79B9_7F4A_7C15);
    let mut sum: u64 = 0xcbf2_9ce4_8422_2325;
    for b in &data {
        if let Ok(info) = d.probe(b) {
            let request = draws.random_resized_crop(info.width, info.height);
            let rgb = &mut out[..224 * 224 * 3];
            if d.decode_resized(b, &request, rgb).is_ok() {
                for &v in rgb.iter() {
                    sum = (sum ^ u64::from(v)).wrapping_mul(0x100_0000_01b3);
                }
            }
        }
    }
    println!("checksum of our RRC 224 decodes: {sum:016x}");
}

/// Seeded draws (xorshift) for the RRC windows: torchvision's RandomResizedCrop parameters
/// (area 8-100%, aspect ratio 3/4 to 4/3 log-uniform), clamped to the image instead of
/// retried.
struct Draws(u64);

impl Draws {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    fn random_resized_crop(&mut self, width: u32, height: u32) -> ResizeRequest {
        let (w, h) = (f64::from(width), f64::from(height));
        let area = w * h * (0.08 + 0.92 * self.unit());
        let (lo, hi) = ((3f64 / 4.0).ln(), (4f64 / 3.0).ln());
        let ratio = (lo + self.unit() * (hi - lo)).exp();
        let cw = (area * ratio).sqrt().round().clamp(1.0, w);
        let ch = (area / ratio).sqrt().round().clamp(1.0, h);
        let (x, y) = (
            ((w - cw) * self.unit()).floor(),
            ((h - ch) * self.unit()).floor(),
        );
        let region = Region {
            x: x as u32,
            y: y as u32,
            width: cw as u32,
            height: ch as u32,
        };
        ResizeRequest {
            region,
            scale: choose_scale(region, 224, 224),
            window: Window {
                left: x,
                top: y,
                width: cw,
                height: ch,
            },
            out_w: 224,
            out_h: 224,
            filter: Filter::Bilinear,
        }
    }
}
