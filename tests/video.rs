//! The video index and the H.264 decoder against FFmpeg: `tests/data/video/expected.json`
//! holds what FFmpeg (through PyAV, `make_fixtures.py`) reads from the x264 clips beside it:
//! each frame's presentation time, keyframe flag and a hash of each decoded plane. H.264
//! decoding is exact, so the planes must match bit for bit.

use std::fs::File;
use std::path::{Path, PathBuf};

use hpuload::video::{DecodePlan, H264Decoder, VideoIndex};
use serde_json::Value;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/video")
}

fn expected() -> Value {
    let text = std::fs::read_to_string(data().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

const CLIPS: [&str; 4] = [
    "high_bframes.mp4",
    "main_cabac.mp4",
    "baseline.mp4",
    "vfr.mp4",
];

fn fnv1a64(rows: impl Iterator<Item = u8>) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in rows {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    format!("{h:016x}")
}

fn plane(data: &[u8], stride: usize, width: usize, height: usize) -> String {
    fnv1a64((0..height).flat_map(|r| data[r * stride..r * stride + width].iter().copied()))
}

/// Decodes `wanted` (presentation positions) and returns each picture's position and its
/// planes' hashes, in the order they came out.
fn decode(index: &VideoIndex, wanted: &[usize]) -> Vec<(usize, [String; 3])> {
    let order = index.presentation_order();
    let position: Vec<usize> = {
        let mut p = vec![0; order.len()];
        for (pos, &frame) in order.iter().enumerate() {
            p[frame] = pos;
        }
        p
    };
    let frames: Vec<usize> = wanted.iter().map(|&p| order[p]).collect();
    let plan = DecodePlan::new(index, &frames);
    let mut decoder = H264Decoder::new(index).unwrap();
    let file = File::open(&index.path).unwrap();
    let mut out = Vec::new();
    decoder
        .decode(&file, index, &plan, &mut |p| {
            let (cw, ch) = (p.width.div_ceil(2), p.height.div_ceil(2));
            out.push((
                position[p.frame],
                [
                    plane(p.y, p.y_stride, p.width, p.height),
                    plane(p.u, p.uv_stride, cw, ch),
                    plane(p.v, p.uv_stride, cw, ch),
                ],
            ));
            Ok(())
        })
        .unwrap();
    out
}

fn hashes(frame: &Value) -> [String; 3] {
    ["y", "u", "v"].map(|k| frame[k].as_str().unwrap().to_string())
}

#[test]
fn the_index_gives_ffmpegs_presentation_times_durations_and_keyframes_edit_list_applied() {
    let expected = expected();
    for clip in CLIPS {
        let want = &expected[clip];
        let index = VideoIndex::open(data().join(clip)).unwrap();
        assert_eq!(
            index.size,
            (
                want["width"].as_u64().unwrap() as u32,
                want["height"].as_u64().unwrap() as u32
            ),
            "{clip}"
        );
        assert_eq!(
            index.timescale,
            want["time_base"][1].as_u64().unwrap(),
            "{clip}"
        );
        let frames = want["frames"].as_array().unwrap();
        let order = index.presentation_order();
        let pts: Vec<i64> = order.iter().map(|&i| index.frames[i].pts).collect();
        let want_pts: Vec<i64> = frames.iter().map(|f| f["pts"].as_i64().unwrap()).collect();
        assert_eq!(pts, want_pts, "{clip}");
        let keys: Vec<bool> = order.iter().map(|&i| index.frames[i].keyframe).collect();
        let want_keys: Vec<bool> = frames.iter().map(|f| f["key"].as_bool().unwrap()).collect();
        assert_eq!(keys, want_keys, "{clip}");
        let durations: Vec<i64> = order
            .iter()
            .map(|&i| i64::from(index.frames[i].duration))
            .collect();
        let want: Vec<i64> = frames
            .iter()
            .map(|f| f["duration"].as_i64().unwrap())
            .collect();
        assert_eq!(durations, want, "{clip}: durations");
    }
}

#[test]
fn every_frame_decodes_bit_exact_to_ffmpegs_in_presentation_order() {
    let expected = expected();
    for clip in CLIPS {
        let frames = expected[clip]["frames"].as_array().unwrap();
        let index = VideoIndex::open(data().join(clip)).unwrap();
        let all: Vec<usize> = (0..frames.len()).collect();
        let got = decode(&index, &all);
        let positions: Vec<usize> = got.iter().map(|(p, _)| *p).collect();
        assert_eq!(positions, all, "{clip}: pictures out of presentation order");
        for (pos, planes) in got {
            assert_eq!(planes, hashes(&frames[pos]), "{clip} frame {pos}");
        }
    }
}

#[test]
fn a_clip_from_the_middle_of_a_gop_decodes_only_from_its_keyframe_and_matches() {
    let expected = expected();
    let clip = "high_bframes.mp4";
    let frames = expected[clip]["frames"].as_array().unwrap();
    let index = VideoIndex::open(data().join(clip)).unwrap();
    // Positions 15, 17, 19, 21 and 27: two GOPs (keyframes at 12 and 24), B-frames among them.
    let wanted = [15, 17, 19, 21, 27];
    let order = index.presentation_order();
    let plan = DecodePlan::new(
        &index,
        &wanted.iter().map(|&p| order[p]).collect::<Vec<_>>(),
    );
    assert_eq!(plan.runs.len(), 2, "{plan:?}");
    assert!(plan.decoded() < frames.len() - 12);
    let got = decode(&index, &wanted);
    assert_eq!(got.len(), wanted.len());
    for (pos, planes) in got {
        assert!(wanted.contains(&pos));
        assert_eq!(planes, hashes(&frames[pos]), "frame {pos}");
    }
}

#[test]
fn one_decoder_decodes_clips_of_two_videos_in_turn() {
    let expected = expected();
    for clip in ["main_cabac.mp4", "baseline.mp4", "main_cabac.mp4"] {
        let frames = expected[clip]["frames"].as_array().unwrap();
        let index = VideoIndex::open(data().join(clip)).unwrap();
        let got = decode(&index, &[3, 4, 5]);
        for (pos, planes) in got {
            assert_eq!(planes, hashes(&frames[pos]), "{clip} frame {pos}");
        }
    }
}

#[test]
fn a_damaged_frame_is_an_error_naming_the_file_and_frame() {
    let dir = std::env::temp_dir().join(format!("hpuload-video-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("damaged.mp4");
    let mut bytes = std::fs::read(data().join("high_bframes.mp4")).unwrap();
    let index = VideoIndex::open(data().join("high_bframes.mp4")).unwrap();
    // Frame 3's first NAL length claims more bytes than the frame has.
    let f = index.frames[3];
    bytes[f.offset as usize..f.offset as usize + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let index = VideoIndex::open(&path).unwrap();
    let mut decoder = H264Decoder::new(&index).unwrap();
    let plan = DecodePlan::new(&index, &[5]);
    let err = decoder
        .decode(&File::open(&path).unwrap(), &index, &plan, &mut |_| Ok(()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("damaged.mp4"), "{err}");
    assert!(err.contains("frame 3"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
