//! What the host's decoder takes beyond the media engine's baseline set: JPEGs in several scans
//! (progressive, and sequential with components in scans of their own), arithmetic coding,
//! RGB, CMYK and YCCK colour, any whole ratio of sampling factors, chroma at most two samples
//! wide; against
//! Pillow's libjpeg-turbo (exactly), on files made by libjpeg-turbo's cjpeg and jpegtran, Pillow
//! and imagecodecs (tests/fixtures/host/make_fixtures.sh).

use std::path::{Path, PathBuf};

use hpuload_decoders::jpeg::{scaled_region, Region, Scale};
use hpuload_decoders::{CpuDecoder, Decode, DecodeError, JpegDecoder, Limits};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/host")
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(name)).unwrap()
}

/// The fixtures with Pillow's decode: (name, width, height, FNV-1a 64 of the RGB bytes).
fn expected() -> Vec<(String, u32, u32, String)> {
    let table = std::fs::read_to_string(fixtures().join("libjpeg_turbo_rgb.txt")).unwrap();
    let rows: Vec<_> = table
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|line| {
            let [name, w, h, hash] = line.split(' ').collect::<Vec<_>>()[..] else {
                panic!("bad line {line:?}");
            };
            (
                name.into(),
                w.parse().unwrap(),
                h.parse().unwrap(),
                hash.into(),
            )
        })
        .collect();
    assert!(rows.len() >= 33, "too few fixtures: {}", rows.len());
    rows
}

fn fnv1a64(data: &[u8]) -> String {
    let h = data.iter().fold(0xCBF2_9CE4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
    });
    format!("{h:016x}")
}

fn decode(d: &mut impl Decode, bytes: &[u8]) -> Result<(u32, u32, Vec<u8>), DecodeError> {
    let info = d.probe(bytes)?;
    let mut out = vec![0; info.rgb_len()];
    d.decode_into(bytes, &info, &mut out)?;
    Ok((info.width, info.height, out))
}

/// Every progressive layout (sampling, odd sizes, 1x1, grey, restart intervals, optimized
/// tables, successive approximation in two steps, a baseline file transcoded), sequential
/// files with a scan per component, arithmetic coding (sequential, progressive with successive
/// approximation, restart intervals, grey), RGB (by Adobe's marker or by the component ids), CMYK,
/// YCCK, 4:1:1, 4x2 and chroma components sampled unlike each other, and chroma two samples
/// wide decode to exactly Pillow's bytes, by the exact decoder (not zune-jpeg's fallback: the
/// decoder alone is asked too).
#[test]
fn every_host_fixture_decodes_to_libjpeg_turbos_bytes() {
    for (name, w, h, hash) in expected() {
        let bytes = read(&name);
        let (ow, oh, ours) = decode(&mut CpuDecoder::default(), &bytes).unwrap();
        assert_eq!((ow, oh), (w, h), "{name}");
        assert_eq!(fnv1a64(&ours), hash, "{name}");
        let (_, _, exact) = decode(&mut JpegDecoder::for_host(Limits::default()), &bytes).unwrap();
        assert_eq!(exact, ours, "{name}: the exact decoder itself");
    }
}

/// The media engine takes baseline YCbCr JPEGs in its four samplings only, as the hardware it
/// stands for (narrow chroma it takes: its output stage resamples anyway).
#[test]
fn the_media_engine_still_refuses_what_only_the_host_decodes() {
    for (name, ..) in expected() {
        let want = match name.split('_').next().unwrap() {
            "narrow" => continue,
            "arith" if name.contains("prog") => "progressive JPEG",
            "arith" => "arithmetic coding",
            "seq" => "non-interleaved (multi-scan) baseline JPEG",
            "prog" | "transcoded" => "progressive JPEG",
            "cmyk" if name.contains("progressive") => "progressive JPEG",
            "cmyk" | "ycck" => "CMYK or YCCK colour",
            "rgb" => "RGB colour space (Adobe, no transform)",
            "s411" | "s4x2" | "s" => "chroma subsampling other than 4:4:4, 4:2:2, 4:2:0 or 4:4:0",
            other => panic!("a fixture of a kind the test does not know: {other}"),
        };
        match JpegDecoder::default().probe(&read(&name)) {
            Err(DecodeError::Unsupported { reason, .. }) => assert_eq!(reason, want, "{name}"),
            other => panic!("{name}: {other:?}"),
        }
    }
}

/// A region decode (what the CPU path does for a crop) writes exactly the full decode's pixels
/// inside the region, at every offset class, including regions that stop before the last row
/// (the scans are then decoded only down to the region's last MCU row).
#[test]
fn a_region_of_a_multi_scan_jpeg_is_the_crop_of_its_full_decode() {
    for (name, w, h, _) in expected() {
        let bytes = read(&name);
        let mut d = CpuDecoder::default();
        let (_, _, full) = decode(&mut d, &bytes).unwrap();
        let (info, parsed) = d.probe_region(&bytes).expect("the exact decoder takes it");
        for (x, y, rw, rh) in [
            (0, 0, w, h),
            (w / 3, h / 4, w / 2, h / 3),
            (w - 1, h - 1, 1, 1),
            (1, 0, w - 1, h.div_ceil(2)),
        ] {
            if x >= w || y >= h {
                continue; // a 1x1 image has only the first
            }
            let (rw, rh) = (rw.max(1).min(w - x), rh.max(1).min(h - y));
            let region = Region {
                x,
                y,
                width: rw,
                height: rh,
            };
            let mut image = vec![7u8; full.len()];
            d.decode_region_in_place(&bytes, &parsed, region, &mut image)
                .unwrap();
            let stride = (info.width * 3) as usize;
            for row in y..y + rh {
                let at = row as usize * stride + x as usize * 3;
                let len = rw as usize * 3;
                assert_eq!(
                    image[at..at + len],
                    full[at..at + len],
                    "{name} region {region:?} row {row}"
                );
            }
        }
    }
}

/// DCT-scaled decodes of multi-scan files (the host decoder's region decode at 1/2 to 1/8)
/// agree with the same decodes of the baseline file holding the same coefficients.
#[test]
fn a_transcoded_progressive_file_decodes_as_its_baseline_original_at_every_scale() {
    let baseline = std::fs::read(fixtures().join("../restart3_s420_123x77.jpg")).unwrap();
    let progressive = read("transcoded_restart3_s420_123x77.jpg");
    let mut d = JpegDecoder::for_host(Limits::default());
    let info = d.probe(&baseline).unwrap();
    for scale in Scale::ALL {
        let region = Region {
            x: 9,
            y: 17,
            width: 100,
            height: 50,
        };
        let sr = scaled_region(&info, region, scale);
        let len = (sr.width * sr.height * 3) as usize;
        let (mut a, mut b) = (vec![0; len], vec![1; len]);
        d.decode_region(&baseline, region, scale, &mut a).unwrap();
        d.decode_region(&progressive, region, scale, &mut b)
            .unwrap();
        assert_eq!(a, b, "{scale}");
    }
}

/// Scans that leave a low band short of its last bit are an image libjpeg smooths block by
/// block; the exact decoder refuses it with that reason, and the CPU decoder still decodes it
/// (zune-jpeg).
#[test]
fn an_incomplete_progressive_jpeg_is_refused_by_the_exact_decoder_and_still_decoded() {
    let bytes = read("incomplete_prog_s420_61x47.jpg");
    match decode(&mut JpegDecoder::for_host(Limits::default()), &bytes) {
        Err(DecodeError::Unsupported { reason, .. }) => assert_eq!(
            reason,
            "progressive JPEG whose scans leave low coefficients incomplete"
        ),
        other => panic!("{:?}", other.map(|(w, h, _)| (w, h))),
    }
    let (w, h, _) = decode(&mut CpuDecoder::default(), &bytes).unwrap();
    assert_eq!((w, h), (61, 47));
}

/// Only checks that damaged data never panics or hangs: prefixes and single-byte corruptions of
/// every fixture either decode or return an error.
#[test]
fn damaged_multi_scan_files_never_panic() {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    for (name, ..) in expected() {
        let bytes = read(&name);
        let mut d = JpegDecoder::for_host(Limits::default());
        for cut in (0..bytes.len()).step_by(11) {
            let _ = decode(&mut d, &bytes[..cut]);
        }
        for _ in 0..200 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let mut m = bytes.clone();
            let i = (seed >> 33) as usize % m.len();
            m[i] = (seed >> 20) as u8;
            let _ = decode(&mut d, &m);
        }
    }
}

/// A grey read (`CpuDecoder::set_luma`, OpenCV's `IMREAD_GRAYSCALE`) of every fixture whose
/// luma is at full resolution gives libjpeg-turbo's grey output exactly (its Y samples: Pillow's
/// `draft("L")`, which is what `cv2.imread` gives), each in three channels, by the exact
/// decoder, whole and by regions; RGB-coded, CMYK and YCCK files (whose grey libjpeg converts
/// from colours) are refused, naming why, and zune-jpeg never stands in for them.
#[test]
fn a_grey_read_gives_libjpegs_luma_and_refuses_what_libjpeg_converts_to_grey() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let table = std::fs::read_to_string(root.join("libjpeg_turbo_grey.txt")).unwrap();
    let mut taken = 0;
    let mut refused = Vec::new();
    for line in table.lines().filter(|l| !l.starts_with('#')) {
        let [name, w, h, hash] = line.split(' ').collect::<Vec<_>>()[..] else {
            panic!("bad line {line:?}");
        };
        let bytes = std::fs::read(root.join(name)).unwrap();
        let mut d = CpuDecoder::with_limits(Limits::default());
        d.set_luma(true);
        match decode(&mut d, &bytes) {
            Ok((width, height, grey)) => {
                assert_eq!(
                    (width.to_string(), height.to_string()),
                    (w.into(), h.into())
                );
                assert_eq!(fnv1a64(&grey), hash, "{name}: grey bytes differ");
                // The exact decoder's region decode, over the bottom-right quarter.
                let mut exact = JpegDecoder::for_host(Limits::default());
                exact.set_luma(true);
                let (info, parsed) = exact.probe_parsed(&bytes).unwrap();
                let region = Region {
                    x: info.width / 2,
                    y: info.height / 2,
                    width: info.width - info.width / 2,
                    height: info.height - info.height / 2,
                };
                let mut image = vec![0; info.rgb_len()];
                exact
                    .decode_region_in_place(&bytes, &parsed, region, &mut image)
                    .unwrap();
                let row = info.width as usize * 3;
                for y in region.y as usize..info.height as usize {
                    let at = y * row + region.x as usize * 3;
                    assert_eq!(image[at..(y + 1) * row], grey[at..(y + 1) * row], "{name}");
                }
                taken += 1;
            }
            Err(DecodeError::Unsupported { reason, .. }) => {
                assert!(reason.starts_with("a grey read of"), "{name}: {reason}");
                refused.push(name);
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
    refused.sort_unstable();
    assert_eq!(
        refused,
        [
            "host/rgb_61x47.jpg",
            "host/rgb_by_ids_61x47.jpg",
            "host/rgb_s420_61x47.jpg",
            "unsupported_rgb.jpg"
        ]
    );
    assert!(taken >= 55, "{taken} fixtures read grey");
    for name in ["cmyk_61x47.jpg", "ycck_61x47.jpg"] {
        let mut d = CpuDecoder::with_limits(Limits::default());
        d.set_luma(true);
        let err = decode(&mut d, &read(name)).unwrap_err();
        assert!(
            err.to_string()
                .contains("a grey read of an RGB, CMYK or YCCK JPEG"),
            "{name}: {err}"
        );
    }
}
