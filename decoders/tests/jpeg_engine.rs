//! The media engine's JPEG decoder against Pillow's libjpeg-turbo (exactly) and the image crate's
//! zune-jpeg (closely) on files made by libjpeg-turbo's cjpeg (tests/fixtures/make_fixtures.sh).

use hpuload_decoders::testing::psnr;
use std::path::{Path, PathBuf};

use hpuload_decoders::jpeg::{
    choose_scale, scaled_region, Filter, Region, ResizeRequest, Scale, Window,
};
use hpuload_decoders::{CpuDecoder, Decode, DecodeError, JpegDecoder};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Supported fixtures: every sampling at sizes that are not multiples of the MCU, 1x1,
/// grayscale and restart intervals.
fn supported() -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "jpg")
                && !p
                    .file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with("unsupported")
        })
        .map(|p| {
            (
                p.file_name().unwrap().to_str().unwrap().to_string(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    files.sort();
    assert!(
        files.len() >= 28,
        "test configuration resulted in too few files being tested"
    );
    files
}

fn decode(d: &mut impl Decode, bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let info = d.probe(bytes).unwrap();
    let mut out = vec![0; info.rgb_len()];
    d.decode_into(bytes, &info, &mut out).unwrap();
    (info.width, info.height, out)
}

fn mad(a: &[u8], b: &[u8]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| x.abs_diff(*y) as f64)
        .sum::<f64>()
        / a.len() as f64
}

fn crop(rgb: &[u8], w: u32, r: Region) -> Vec<u8> {
    (r.y..r.y + r.height)
        .flat_map(|y| {
            let start = ((y * w + r.x) * 3) as usize;
            rgb[start..start + (r.width * 3) as usize].to_vec()
        })
        .collect()
}

#[test]
fn full_decode_agrees_with_the_image_crate() {
    for (name, bytes) in supported() {
        let (w, h, ours) = decode(&mut JpegDecoder::default(), &bytes);
        let theirs = image::load_from_memory_with_format(&bytes, image::ImageFormat::Jpeg)
            .unwrap()
            .to_rgb8();
        assert_eq!((w, h), theirs.dimensions(), "{name}");
        let theirs = theirs.into_raw();
        let (p, m) = (psnr(&ours, &theirs), mad(&ours, &theirs));
        if p < 45.0 || m > 0.5 {
            let path = std::env::temp_dir().join(format!("hpuload-ours-{name}.png"));
            image::save_buffer(&path, &ours, w, h, image::ExtendedColorType::Rgb8).unwrap();
            panic!(
                "{name}: PSNR {p:.1} dB, mean abs diff {m:.3} (ours written to {})",
                path.display()
            );
        }
    }
}

fn fnv1a64(data: &[u8]) -> u64 {
    data.iter().fold(0xCBF2_9CE4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
    })
}

/// Every sampling, size and restart layout decodes to exactly Pillow's bytes
/// (`libjpeg_turbo_rgb.txt`, written by make_fixtures.sh): the accurate integer IDCT, fancy
/// upsampling and colour conversion all as libjpeg-turbo computes them.
#[test]
fn full_decode_is_byte_identical_to_libjpeg_turbo() {
    let table = std::fs::read_to_string(fixtures().join("libjpeg_turbo_rgb.txt")).unwrap();
    let mut checked = 0;
    for line in table.lines().filter(|l| !l.starts_with('#')) {
        let [name, w, h, hash] = line.split(' ').collect::<Vec<_>>()[..] else {
            panic!("bad line {line:?}");
        };
        let bytes = std::fs::read(fixtures().join(name)).unwrap();
        let (ow, oh, ours) = decode(&mut JpegDecoder::default(), &bytes);
        assert_eq!(
            (ow.to_string(), oh.to_string()),
            (w.into(), h.into()),
            "{name}"
        );
        assert_eq!(format!("{:016x}", fnv1a64(&ours)), hash, "{name}");
        checked += 1;
    }
    assert_eq!(checked, supported().len());
}

#[test]
fn region_decode_is_exactly_the_crop_of_a_full_decode() {
    for (name, bytes) in supported() {
        let mut d = JpegDecoder::default();
        let (w, h, full) = decode(&mut d, &bytes);
        let regions = [
            Region::full(w, h),
            Region {
                x: w / 3,
                y: h / 4,
                width: (w / 2).max(1),
                height: (h / 2).max(1),
            },
            Region {
                x: w - 1,
                y: h - 1,
                width: 1,
                height: 1,
            },
            Region {
                x: 0,
                y: h / 2,
                width: w,
                height: h - h / 2,
            },
        ];
        for r in regions {
            let mut out = vec![0; (r.width * r.height * 3) as usize];
            let got = d.decode_region(&bytes, r, Scale::FULL, &mut out).unwrap();
            assert_eq!(got, r, "{name}");
            assert!(
                out == crop(&full, w, r),
                "{name}: region {r:?} differs from the full decode"
            );
        }
    }
}

#[test]
fn region_decode_at_every_scale_and_offset_is_the_crop_of_the_scaled_full_decode() {
    // Regions whose edges fall at every position within an MCU, on every side, so the kept
    // MCU window (which adds chroma neighbours only where the upsampler needs them) is
    // exercised at each boundary case.
    let mut state = 0x2545_f491u32;
    let mut next = |m: u32| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state % m
    };
    for (name, bytes) in supported() {
        let mut d = JpegDecoder::default();
        let info = d.probe(&bytes).unwrap();
        let (w, h) = (info.width, info.height);
        for scale in Scale::ALL {
            let full_r = scaled_region(&info, Region::full(w, h), scale);
            let mut full = vec![0; (full_r.width * full_r.height * 3) as usize];
            d.decode_region(&bytes, Region::full(w, h), scale, &mut full)
                .unwrap();
            for _ in 0..60 {
                let x = next(w);
                let y = next(h);
                let r = Region {
                    x,
                    y,
                    width: 1 + next(w - x),
                    height: 1 + next(h - y),
                };
                let sr = scaled_region(&info, r, scale);
                let mut out = vec![0; (sr.width * sr.height * 3) as usize];
                assert_eq!(d.decode_region(&bytes, r, scale, &mut out).unwrap(), sr);
                assert!(
                    out == crop(&full, full_r.width, sr),
                    "{name}: region {r:?} at {scale} differs from the full decode"
                );
            }
        }
    }
}

/// Area-averages `rgb` to `scale` (the reference for a DCT-scaled decode): scaled sample `i`
/// is the mean of the source pixels `[8i/n, 8(i+1)/n)` covers, each weighted by the part of it
/// covered (whole pixels at `1/2`, `1/4` and `1/8`).
fn box_downscale(rgb: &[u8], w: u32, h: u32, scale: Scale) -> Vec<u8> {
    let n = scale.block() as f64;
    let (sw, sh) = (scale.ceil(w as usize), scale.ceil(h as usize));
    // Per scaled sample along an axis of `size` pixels: (pixel, covered part) pairs.
    let cover = |i: usize, size: u32| {
        let (lo, hi) = (
            i as f64 * 8.0 / n,
            ((i + 1) as f64 * 8.0 / n).min(f64::from(size)),
        );
        (lo.floor() as u32..hi.ceil() as u32)
            .map(move |p| (p, (f64::from(p + 1)).min(hi) - f64::from(p).max(lo)))
    };
    let mut out = Vec::with_capacity(sw * sh * 3);
    for sy in 0..sh {
        for sx in 0..sw {
            for c in 0..3 {
                let (mut sum, mut area) = (0.0, 0.0);
                for (y, wy) in cover(sy, h) {
                    for (x, wx) in cover(sx, w) {
                        sum += wy * wx * f64::from(rgb[((y * w + x) * 3 + c) as usize]);
                        area += wy * wx;
                    }
                }
                out.push((sum / area).round() as u8);
            }
        }
    }
    out
}

#[test]
fn dct_scaled_decodes_match_an_area_average_of_the_full_image() {
    for (name, bytes) in supported()
        .into_iter()
        .filter(|(n, _)| n.contains("256x200") || n.contains("123x77"))
    {
        let mut d = JpegDecoder::default();
        let (w, h, full) = decode(&mut d, &bytes);
        for scale in &Scale::ALL[..7] {
            let scale = *scale;
            let info = d.probe(&bytes).unwrap();
            let r = scaled_region(&info, Region::full(w, h), scale);
            let mut out = vec![0; (r.width * r.height * 3) as usize];
            d.decode_region(&bytes, Region::full(w, h), scale, &mut out)
                .unwrap();
            let p = psnr(&out, &box_downscale(&full, w, h, scale));
            assert!(
                p >= 28.0,
                "{name} at {scale}: PSNR {p:.1} dB against an area average"
            );
            // A region at scale is the crop of the scaled full decode.
            let sub = Region {
                x: w / 4,
                y: h / 3,
                width: w / 2,
                height: h / 2,
            };
            let sr = scaled_region(&info, sub, scale);
            let mut part = vec![0; (sr.width * sr.height * 3) as usize];
            d.decode_region(&bytes, sub, scale, &mut part).unwrap();
            assert!(
                part == crop(&out, r.width, sr),
                "{name} at {scale}: region differs from the scaled full decode"
            );
        }
    }
}

#[test]
fn scale_choice_leaves_the_resize_three_times_the_output() {
    let r = Region {
        x: 0,
        y: 0,
        width: 1000,
        height: 900,
    };
    let eighths = |n| Scale::eighths(n).unwrap();
    let square = |side| Region {
        width: side,
        height: side,
        ..r
    };
    // 900 / 2 = 450 rows is twice 224 but not three times: decoded whole, so the resize (not
    // the DCT's sharper cut) does the shrinking.
    assert_eq!(choose_scale(r, 224, 224), Scale::FULL);
    // 450 >= 3 * 112; 225 is not.
    assert_eq!(choose_scale(r, 112, 112), eighths(4));
    // 900 / 4 = 225 >= 3 * 64; 112 is not.
    assert_eq!(choose_scale(r, 64, 64), eighths(2));
    // The tighter axis decides: 1000 / 2 = 500 columns is short of 3 * 200.
    assert_eq!(choose_scale(r, 200, 100), Scale::FULL);
    assert_eq!(
        choose_scale(Region { width: 200, ..r }, 224, 224),
        Scale::FULL
    );
    // Exactly three times the output at a scale is enough.
    assert_eq!(choose_scale(square(1344), 224, 224), eighths(4));
    assert_eq!(choose_scale(square(1343), 224, 224), Scale::FULL);
    assert_eq!(choose_scale(square(2688), 224, 224), eighths(2));
    assert_eq!(choose_scale(square(5376), 224, 224), eighths(1));
}

#[test]
fn unsupported_files_are_refused_by_probe_with_a_reason() {
    for (file, reason) in [
        ("unsupported_progressive.jpg", "progressive JPEG"),
        ("unsupported_arithmetic.jpg", "arithmetic coding"),
        ("unsupported_cmyk.jpg", "CMYK or YCCK colour"),
        (
            "unsupported_rgb.jpg",
            "RGB colour space (Adobe, no transform)",
        ),
        (
            "unsupported_12bit.jpg",
            "sample precision other than 8 bits",
        ),
    ] {
        let bytes = std::fs::read(fixtures().join(file)).unwrap();
        match JpegDecoder::default().probe(&bytes) {
            Err(DecodeError::Unsupported { reason: got, .. }) => assert_eq!(got, reason, "{file}"),
            other => panic!("{file}: {other:?}"),
        }
        // The CPU decoder takes them (the host's exact decoder), but 12 bits, which Pillow does
        // not read either.
        if file != "unsupported_12bit.jpg" {
            decode(&mut CpuDecoder::default(), &bytes);
        }
    }
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
    assert!(matches!(
        JpegDecoder::default().probe(png),
        Err(DecodeError::Unsupported {
            reason: "not a JPEG",
            ..
        })
    ));
}

/// Antialiased bilinear (Pillow's filter) in f64, the reference for the engine's output stage:
/// for each output sample, a triangle of half-width max(scale, 1) around its centre, clipped to
/// `[lo, hi)` and normalized. Returns (first source index, weights) per output sample.
fn reference_taps(lo: f64, len: f64, out: u32, bounds: (u32, u32)) -> Vec<(usize, Vec<f64>)> {
    let scale = len / f64::from(out);
    let support = scale.max(1.0);
    (0..out)
        .map(|i| {
            let centre = lo + (f64::from(i) + 0.5) * scale;
            let first = ((centre - support).floor() as i64).max(i64::from(bounds.0)) as usize;
            let end = ((centre + support).ceil() as i64).min(i64::from(bounds.1)) as usize;
            let w: Vec<f64> = (first..end)
                .map(|p| (1.0 - ((p as f64 + 0.5 - centre) / support).abs()).max(0.0))
                .collect();
            let sum: f64 = w.iter().sum();
            (first, w.into_iter().map(|v| v / sum).collect())
        })
        .collect()
}

/// `window` of a `w`-wide RGB8 image resampled to `out_w`x`out_h`, reading only `region`.
fn reference_resize(
    rgb: &[u8],
    w: u32,
    region: Region,
    window: Window,
    (out_w, out_h): (u32, u32),
) -> Vec<u8> {
    let cols = reference_taps(
        window.left,
        window.width,
        out_w,
        (region.x, region.x + region.width),
    );
    let rows = reference_taps(
        window.top,
        window.height,
        out_h,
        (region.y, region.y + region.height),
    );
    let mut out = Vec::with_capacity((out_w * out_h * 3) as usize);
    for (y0, wy) in &rows {
        for (x0, wx) in &cols {
            for c in 0..3 {
                let mut v = 0.0;
                for (dy, a) in wy.iter().enumerate() {
                    for (dx, b) in wx.iter().enumerate() {
                        let px = ((y0 + dy) * w as usize + x0 + dx) * 3 + c;
                        v += a * b * f64::from(rgb[px]);
                    }
                }
                out.push(v.round().clamp(0.0, 255.0) as u8);
            }
        }
    }
    out
}

/// The output stage resamples Y, Cb and Cr at their own resolution and converts colour at the
/// output's: it must agree with the obvious way (a full RGB decode, chroma upsampled, then the
/// crop resampled) on every sampling, odd sizes, restart intervals, grayscale and 1x1, for
/// integer crops and fractional windows, shrinking and enlarging.
#[test]
fn resized_decode_agrees_with_resampling_a_full_decode() {
    for (name, bytes) in supported() {
        let mut d = JpegDecoder::default();
        let (w, h, full) = decode(&mut d, &bytes);
        let (fw, fh) = (f64::from(w), f64::from(h));
        let cases = [
            // (region, window, output size)
            (Region::full(w, h), (0.0, 0.0, fw, fh), (24, 17)),
            (Region::full(w, h), (0.0, 0.0, fw, fh), (w * 2 + 1, h + 3)),
            (
                Region {
                    x: w / 5,
                    y: h / 7,
                    width: (w / 2).max(1),
                    height: (h / 2).max(1),
                },
                (
                    f64::from(w / 5),
                    f64::from(h / 7),
                    f64::from((w / 2).max(1)),
                    f64::from((h / 2).max(1)),
                ),
                (40, 40),
            ),
            (
                Region::full(w, h),
                (fw * 0.13, fh * 0.21, fw * 0.71, fh * 0.62),
                (33, 29),
            ),
        ];
        for (region, (left, top, ww, wh), out) in cases {
            let window = Window {
                left,
                top,
                width: ww,
                height: wh,
            };
            let mut ours = vec![0; (out.0 * out.1 * 3) as usize];
            d.decode_resized(
                &bytes,
                &ResizeRequest {
                    filter: Filter::Bilinear,
                    region,
                    scale: Scale::FULL,
                    window,
                    out_w: out.0,
                    out_h: out.1,
                },
                &mut ours,
            )
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            let reference = reference_resize(&full, w, region, window, out);
            let p = psnr(&ours, &reference);
            assert!(
                p >= 40.0,
                "{name} {region:?} {window:?} -> {out:?}: PSNR {p:.1} dB"
            );
            // At a reduced DCT scale the decode itself differs from a full one, by no more
            // than the resize's rounding does once the resize after it shrinks at least 3x.
            let scale = choose_scale(region, out.0, out.1);
            if !scale.is_full() {
                d.decode_resized(
                    &bytes,
                    &ResizeRequest {
                        filter: Filter::Bilinear,
                        region,
                        scale,
                        window,
                        out_w: out.0,
                        out_h: out.1,
                    },
                    &mut ours,
                )
                .unwrap();
                let p = psnr(&ours, &reference);
                assert!(p >= 40.0, "{name} {scale}: PSNR {p:.1} dB");
            }
        }
    }
}

#[test]
fn a_window_outside_its_region_a_wrapping_region_or_a_wrong_output_buffer_is_an_error() {
    let bytes = hpuload_decoders::testing::gradient_jpeg(64, 48, 90);
    let mut d = JpegDecoder::default();
    let region = Region {
        x: 8,
        y: 8,
        width: 32,
        height: 24,
    };
    let inside = Window {
        left: 8.0,
        top: 8.0,
        width: 32.0,
        height: 24.0,
    };
    let mut decode = |region, window, out_h| {
        let request = ResizeRequest {
            filter: Filter::Bilinear,
            region,
            scale: Scale::FULL,
            window,
            out_w: 16,
            out_h,
        };
        d.decode_resized(&bytes, &request, &mut vec![0; 16 * 16 * 3])
    };
    decode(region, inside, 16).unwrap();
    let outside = Window {
        left: 4.0,
        ..inside
    };
    assert!(matches!(
        decode(region, outside, 16),
        Err(DecodeError::Parameter(_))
    ));
    assert!(matches!(
        decode(region, inside, 15),
        Err(DecodeError::BufferSize { .. })
    ));
    // A region whose end does not fit in 32 bits is outside the image, not a wrapped small one.
    let wrapping = Region {
        x: u32::MAX - 3,
        width: 8,
        ..region
    };
    assert!(matches!(
        decode(wrapping, inside, 16),
        Err(DecodeError::Parameter(_))
    ));
    let mut rgb = vec![0; 8 * 24 * 3];
    assert!(matches!(
        d.decode_region(&bytes, wrapping, Scale::FULL, &mut rgb),
        Err(DecodeError::Parameter(_))
    ));
}

/// Only checks that damaged data never panics: every prefix and many single-byte corruptions
/// of each file either decode or return an error.
#[test]
fn damaged_files_never_panic() {
    for (_, bytes) in supported().into_iter().take(12) {
        let mut d = JpegDecoder::default();
        for cut in (0..bytes.len()).step_by(7) {
            let prefix = &bytes[..cut];
            if let Ok(info) = d.probe(prefix) {
                let mut out = vec![0; info.rgb_len()];
                let _ = d.decode_into(prefix, &info, &mut out);
            }
        }
        let mut seed = 0x1234_5678u64;
        for _ in 0..300 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let mut m = bytes.clone();
            let i = (seed >> 33) as usize % m.len();
            m[i] = (seed >> 20) as u8;
            if let Ok(info) = d.probe(&m) {
                let mut out = vec![0; info.rgb_len()];
                let _ = d.decode_into(&m, &info, &mut out);
                for scale in [4, 1, 7].map(|n| Scale::eighths(n).unwrap()) {
                    let r = Region::full(info.width, info.height);
                    let sr = scaled_region(&info, r, scale);
                    let mut out = vec![0; (sr.width * sr.height * 3) as usize];
                    let _ = d.decode_region(&m, r, scale, &mut out);
                    let window = Window {
                        left: 0.0,
                        top: 0.0,
                        width: f64::from(info.width),
                        height: f64::from(info.height),
                    };
                    let mut out = vec![0; 9 * 7 * 3];
                    let _ = d.decode_resized(
                        &m,
                        &ResizeRequest {
                            filter: Filter::Bilinear,
                            region: r,
                            scale,
                            window,
                            out_w: 9,
                            out_h: 7,
                        },
                        &mut out,
                    );
                }
            }
        }
    }
}

#[test]
fn a_decode_from_the_probes_parsed_headers_equals_one_that_parses_them_again() {
    let bytes = hpuload_decoders::testing::gradient_jpeg(64, 48, 90);
    let other = hpuload_decoders::testing::gradient_jpeg(40, 40, 80);
    let mut d = JpegDecoder::default();
    let (info, parsed) = d.probe_parsed(&bytes).unwrap();
    assert_eq!((info.width, info.height), (64, 48));
    assert_eq!(d.probe(&bytes).unwrap(), info);
    let request = ResizeRequest {
        filter: Filter::Bilinear,
        region: Region {
            x: 5,
            y: 3,
            width: 40,
            height: 30,
        },
        scale: Scale::eighths(5).unwrap(),
        window: Window {
            left: 6.5,
            top: 4.0,
            width: 36.0,
            height: 25.5,
        },
        out_w: 20,
        out_h: 14,
    };
    let (mut again, mut once) = (vec![0; 20 * 14 * 3], vec![1; 20 * 14 * 3]);
    d.decode_resized(&bytes, &request, &mut again).unwrap();
    d.decode_resized_parsed(&bytes, &parsed, &request, &mut once)
        .unwrap();
    assert_eq!(again, once);
    assert!(matches!(
        d.decode_resized_parsed(&other, &parsed, &request, &mut once),
        Err(DecodeError::Parameter(_))
    ));
}

#[test]
fn a_grey_reads_resampled_decode_is_the_colour_decodes_luma_plane() {
    use hpuload_decoders::jpeg::{DecodePlan, Planes};
    let mut resampled = 0;
    for (name, bytes) in supported() {
        let mut d = JpegDecoder::default();
        let Ok(info) = d.probe(&bytes) else { continue };
        let (w, h) = (info.width, info.height);
        for scale in [Scale::FULL, Scale::eighths(4).unwrap()] {
            let region = Region::full(w, h);
            let sr = scaled_region(&info, region, scale);
            let request = ResizeRequest {
                filter: Filter::Bilinear,
                region,
                scale,
                window: Window {
                    left: 0.0,
                    top: 0.0,
                    width: f64::from(w),
                    height: f64::from(h),
                },
                out_w: sr.width.div_ceil(2).max(1),
                out_h: sr.height.div_ceil(3).max(1),
            };
            let plan = DecodePlan {
                request,
                parsed: None,
                limits: Default::default(),
                luma: false,
            };
            let Ok(colour) = d.decode_planned_planes(&bytes, &plan) else {
                continue;
            };
            let y = match colour {
                Planes::Ycc([y, ..]) | Planes::Grey(y) => y.to_vec(),
            };
            let grey = DecodePlan { luma: true, ..plan };
            match d.decode_planned_planes(&bytes, &grey) {
                Ok(Planes::Grey(luma)) => {
                    assert_eq!(luma, &y[..], "{name} at {scale:?}");
                    resampled += 1;
                }
                Ok(Planes::Ycc(_)) => panic!("{name}: a grey read gave colour planes"),
                // What libjpeg converts to grey (RGB-coded, luma sampled below chroma).
                Err(e) => assert!(e.to_string().contains("a grey read of"), "{name}: {e}"),
            }
        }
    }
    assert!(resampled >= 20, "{resampled} decodes compared");
}
