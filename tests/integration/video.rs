//! The video index and the H.264 decoder against FFmpeg: `tests/data/video/expected.json`
//! holds what FFmpeg (through PyAV, `make_fixtures.py`) reads from the x264 clips beside it:
//! each frame's presentation time, keyframe flag and a hash of each decoded plane. H.264
//! decoding is exact, so the planes must match bit for bit: from OpenH264 and from the
//! libavcodec the machine has (if any), each checked.

use std::fs::File;
use std::path::{Path, PathBuf};

use hpuload::video::{libavcodec, DecodePlan, Libav, VideoDecoder, VideoIndex};
use serde_json::Value;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/video")
}

fn expected() -> Value {
    let text = std::fs::read_to_string(data().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

const CLIPS: [&str; 15] = [
    "high_bframes.mp4",
    "main_cabac.mp4",
    "baseline.mp4",
    "vfr.mp4",
    "fragmented.mp4",
    // An edit list cutting frames before and after (a stream copy cut between keyframes).
    "cut.mp4",
    // An empty edit first (a start delay), two edits showing two pieces of the media, and a
    // fragmented file's edit list (which moves its times only).
    "delayed.mp4",
    "two_edits.mp4",
    "delayed_fragmented.mp4",
    // Negative composition offsets (`ctts` version 1) under an edit list.
    "negative_cts.mp4",
    // Fragmented with the first GOP in the movie's own tables, and as CMAF (negative
    // composition offsets in the fragments).
    "frag_moov.mp4",
    "cmaf.mp4",
    // An `avc3` entry: the parameter sets in the stream only.
    "avc3.mp4",
    // Open GOPs (keyframes that are recovery points, not IDR pictures), with one edit and
    // with two.
    "open_gop.mp4",
    "open_gop_edits.mp4",
];

/// The clip of `CLIPS` only libavcodec decodes: OpenH264 cannot follow its second edit,
/// which starts at an open GOP's keyframe (not an IDR picture).
const LIBAVCODEC_ONLY: &str = "open_gop_edits.mp4";

/// MPEG-4 Part 2 in AVI, as UCF101's and HMDB51's files are: Xvid with a PCM track
/// interleaved, and DivX with B-frames (open GOPs: the B-frames after a keyframe are shown
/// before it); and in MP4 (`mp4v`) with B-frames, its VOL header in the `esds` descriptor
/// only. Only libavcodec decodes them.
const MPEG4_CLIPS: [&str; 3] = ["xvid.avi", "divx_bframes.avi", "mp4v_bframes.mp4"];

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

/// The decoders to check: OpenH264, and FFmpeg's when the machine has a libavcodec.
fn decoders() -> Vec<Option<&'static Libav>> {
    match libavcodec() {
        Some(lib) => vec![None, Some(lib)],
        None => {
            eprintln!("no libavcodec on this machine: only OpenH264 is checked");
            vec![None]
        }
    }
}

/// Decodes `wanted` (presentation positions) with each decoder, checks that they agree, and
/// returns each picture's position and its planes' hashes, in the order they came out.
fn decode(index: &VideoIndex, wanted: &[usize]) -> Vec<(usize, [String; 3])> {
    let mut outs = decoders()
        .into_iter()
        .filter(|lib| lib.is_some() || !index.path.ends_with(LIBAVCODEC_ONLY))
        .map(|lib| decode_with(lib, index, wanted));
    let first = outs.next().unwrap();
    for other in outs {
        assert_eq!(other, first, "libavcodec and OpenH264 differ");
    }
    first
}

fn decode_with(
    lib: Option<&'static Libav>,
    index: &VideoIndex,
    wanted: &[usize],
) -> Vec<(usize, [String; 3])> {
    let order = index.presentation_order();
    let position: Vec<usize> = {
        // (A frame the edit list cuts has no position: it is never asked for.)
        let mut p = vec![usize::MAX; index.frames.len()];
        for (pos, &frame) in order.iter().enumerate() {
            p[frame] = pos;
        }
        p
    };
    let frames: Vec<usize> = wanted.iter().map(|&p| order[p]).collect();
    let plan = DecodePlan::new(index, &frames);
    let mut decoder = VideoDecoder::with_library(index, lib).unwrap();
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
        })
        .unwrap();
    out
}

fn hashes(frame: &Value) -> [String; 3] {
    ["y", "u", "v"].map(|k| frame[k].as_str().unwrap().to_string())
}

/// Checks that a decode (`got`) gave the pictures at `wanted`, in that order, each with the
/// planes FFmpeg decoded there (`frames`).
fn assert_pictures(got: Vec<(usize, [String; 3])>, wanted: &[usize], frames: &[Value], what: &str) {
    let positions: Vec<usize> = got.iter().map(|(p, _)| *p).collect();
    assert_eq!(
        positions, wanted,
        "{what}: pictures missing or out of order"
    );
    for (pos, planes) in got {
        assert_eq!(planes, hashes(&frames[pos]), "{what} frame {pos}");
    }
}

#[test]
fn the_index_gives_ffmpegs_presentation_times_durations_and_keyframes_edit_list_applied_fragmented_or_not(
) {
    let expected = expected();
    for clip in CLIPS.into_iter().chain(MPEG4_CLIPS) {
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
        if clip == LIBAVCODEC_ONLY && libavcodec().is_none() {
            continue;
        }
        let frames = expected[clip]["frames"].as_array().unwrap();
        let index = VideoIndex::open(data().join(clip)).unwrap();
        let all: Vec<usize> = (0..frames.len()).collect();
        assert_pictures(decode(&index, &all), &all, frames, clip);
    }
}

#[test]
fn mpeg4_part_2_in_avi_and_mp4_decodes_bit_exact_to_ffmpegs_whole_or_from_a_gops_middle() {
    let expected = expected();
    let Some(lib) = libavcodec() else {
        // Without a libavcodec the decoder says what it needs, naming the file.
        let index = VideoIndex::open(data().join("xvid.avi")).unwrap();
        let err = VideoDecoder::new(&index).unwrap_err().to_string();
        assert!(
            err.contains("xvid.avi") && err.contains("libavcodec"),
            "{err}"
        );
        return;
    };
    for clip in MPEG4_CLIPS {
        let frames = expected[clip]["frames"].as_array().unwrap();
        let index = VideoIndex::open(data().join(clip)).unwrap();
        let all: Vec<usize> = (0..frames.len()).collect();
        // Whole; a clip across a keyframe (11, 12, 13: B-frames on either side of it in the
        // file with B-frames); one GOP's last frames.
        for wanted in [&all[..], &[11, 12, 13, 17], &[21, 23]] {
            assert_pictures(decode_with(Some(lib), &index, wanted), wanted, frames, clip);
        }
    }
}

#[test]
fn a_packed_bitstream_gives_the_unpacked_files_frames_times_and_pictures() {
    // `divx_packed.avi` holds `divx_bframes.avi`'s pictures as DivX packs them: a reference
    // and a B-frame in one chunk, an N-VOP where the reference is shown.
    let packed = VideoIndex::open(data().join("divx_packed.avi")).unwrap();
    let plain = VideoIndex::open(data().join("divx_bframes.avi")).unwrap();
    let shown = |index: &VideoIndex| -> Vec<(i64, bool, u32)> {
        let order = index.presentation_order();
        order
            .iter()
            .map(|&i| {
                let f = index.frames[i];
                (f.pts, f.keyframe, f.duration)
            })
            .collect()
    };
    assert_eq!(shown(&packed), shown(&plain));
    // A B-frame taken out of its reference's chunk starts where the reference ends, with no
    // chunk header between.
    let inside = packed
        .frames
        .windows(2)
        .filter(|w| w[1].offset == w[0].offset + u64::from(w[0].len))
        .count();
    assert!(inside >= 5, "{inside} B-frames were packed");
    let Some(lib) = libavcodec() else {
        eprintln!("no libavcodec on this machine: MPEG-4 Part 2 is not decoded");
        return;
    };
    let expected = expected();
    let frames = expected["divx_bframes.avi"]["frames"].as_array().unwrap();
    let all: Vec<usize> = (0..frames.len()).collect();
    for wanted in [&all[..], &[11, 12, 13, 17], &[2, 21, 23]] {
        assert_pictures(
            decode_with(Some(lib), &packed, wanted),
            wanted,
            frames,
            "packed",
        );
    }
}

#[test]
fn a_packed_b_frame_whose_n_vop_is_missing_is_dropped_and_every_other_picture_decodes_exactly() {
    // `divx_packed.avi` runs I | P+B | B | N-VOP | P+B | B | N-VOP ...: the first N-VOP made a
    // `JUNK` chunk (a cut stream), the B-frame waiting for that place is still waiting when
    // the next packed one comes. It is dropped (as FFmpeg's `mpeg4_unpack_bframes` drops it);
    // nothing refers to a B-frame, so every other picture is the unpacked file's, bit for bit.
    let mut bytes = std::fs::read(data().join("divx_packed.avi")).unwrap();
    let movi = bytes.windows(4).position(|w| w == b"movi").unwrap() + 4;
    let mut at = movi;
    let n_vop = loop {
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        if &bytes[at..at + 4] == b"00dc" && len < 8 {
            break at;
        }
        at += 8 + len + (len & 1);
    };
    bytes[n_vop..n_vop + 4].copy_from_slice(b"JUNK");
    let dir = TempDir::new("avi-missing-nvop");
    let path = dir.path().join("cut.avi");
    std::fs::write(&path, &bytes).unwrap();
    let cut = VideoIndex::open(&path).unwrap();
    let plain = VideoIndex::open(data().join("divx_bframes.avi")).unwrap();
    assert_eq!(cut.frames.len(), plain.frames.len() - 1);
    let order = cut.presentation_order();
    let pts: Vec<i64> = order.iter().map(|&i| cut.frames[i].pts).collect();
    assert!(pts.windows(2).all(|w| w[0] < w[1]), "{pts:?}");
    let Some(lib) = libavcodec() else {
        eprintln!("no libavcodec on this machine: MPEG-4 Part 2 is not decoded");
        return;
    };
    let all: Vec<usize> = (0..cut.frames.len()).collect();
    let got: Vec<[String; 3]> = decode_with(Some(lib), &cut, &all)
        .into_iter()
        .map(|(_, planes)| planes)
        .collect();
    let expected = expected();
    let want: Vec<[String; 3]> = expected["divx_bframes.avi"]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(hashes)
        .collect();
    // The unpacked file's pictures with one left out: a B-frame of the first group.
    let missing = (0..want.len())
        .find(|&p| got[..p] == want[..p] && got[p..] == want[p + 1..])
        .expect("every picture but one, in order, bit-exact");
    let plain_order = plain.presentation_order();
    assert!(missing < 4 && !plain.frames[plain_order[missing]].keyframe);
}

#[test]
fn a_dropped_frame_in_avi_is_a_gap_in_the_timeline_not_an_error() {
    let dir = TempDir::new("avi-dropped");
    let good = std::fs::read(data().join("xvid.avi")).unwrap();
    let index = VideoIndex::open(data().join("xvid.avi")).unwrap();
    let scale = i64::from(index.frames[1].duration);
    // Frame 7 dropped: its chunk emptied, or made an N-VOP (a P-VOP not coded), the rest of
    // its bytes left as a `JUNK` chunk.
    let (at, len) = (
        index.frames[7].offset as usize - 8,
        index.frames[7].len as usize,
    );
    let n_vop = [0, 0, 1, 0xb6, 0b0101_0000, 0b0100_0000];
    for (name, kept) in [("empty.avi", &[][..]), ("nvop.avi", &n_vop[..])] {
        let mut bytes = good.clone();
        let k = kept.len();
        bytes[at + 4..at + 8].copy_from_slice(&(k as u32).to_le_bytes());
        bytes[at + 8..at + 8 + k].copy_from_slice(kept);
        bytes[at + 8 + k..at + 12 + k].copy_from_slice(b"JUNK");
        let junk = len - k - 8 + ((len - k) & 1);
        bytes[at + 12 + k..at + 16 + k].copy_from_slice(&(junk as u32).to_le_bytes());
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let dropped = VideoIndex::open(&path).unwrap();
        let times: Vec<i64> = dropped.frames.iter().map(|f| f.pts / scale).collect();
        let want: Vec<i64> = (0..index.frames.len() as i64).filter(|&t| t != 7).collect();
        assert_eq!(times, want, "{name}");
        assert_eq!(dropped.frames[7].offset, index.frames[8].offset, "{name}");
    }
}

#[test]
fn a_b_frame_nobody_keeps_is_passed_over_in_mpeg4_part_2() {
    let Some(lib) = libavcodec() else {
        eprintln!("no libavcodec on this machine: MPEG-4 Part 2 is not decoded");
        return;
    };
    let index = VideoIndex::open(data().join("divx_bframes.avi")).unwrap();
    let order = index.presentation_order();
    // Every third frame shown: the B-frames between are neither kept nor referred to.
    let wanted: Vec<usize> = (0..30).step_by(3).map(|p| order[p]).collect();
    let plan = DecodePlan::new(&index, &wanted);
    let mut decoder = VideoDecoder::with_library(&index, Some(lib)).unwrap();
    let file = File::open(&index.path).unwrap();
    let counts = decoder.decode(&file, &index, &plan, &mut |_| {}).unwrap();
    assert!(counts.skipped >= 10, "{counts:?}");
    assert_eq!(counts.decoded + counts.skipped, plan.decoded());
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
fn only_the_discarded_frames_decoding_is_counted_as_their_time() {
    let index = VideoIndex::open(data().join("high_bframes.mp4")).unwrap();
    let order = index.presentation_order();
    let file = File::open(&index.path).unwrap();
    let key = index.frames.iter().position(|f| f.keyframe).unwrap();
    for lib in decoders() {
        let mut decoder = VideoDecoder::with_library(&index, lib).unwrap();
        // The keyframe alone: nothing decoded but what is kept, so no time either, however
        // long the hand-over takes.
        let plan = DecodePlan::new(&index, &[key]);
        let counts = decoder
            .decode(&file, &index, &plan, &mut |_| {
                std::thread::sleep(std::time::Duration::from_millis(2))
            })
            .unwrap();
        assert_eq!((counts.decoded, counts.discarded), (1, 0), "{counts:?}");
        assert_eq!(counts.discarded_time, std::time::Duration::ZERO);
        // Positions 15 to 17 (a GOP from 12): the frames from the keyframe are decoded to
        // reach them, and their decoding took time.
        let wanted: Vec<usize> = (15..18).map(|p| order[p]).collect();
        let plan = DecodePlan::new(&index, &wanted);
        let counts = decoder.decode(&file, &index, &plan, &mut |_| {}).unwrap();
        assert!(counts.discarded > 0, "{counts:?}");
        assert!(
            counts.discarded_time > std::time::Duration::ZERO,
            "{counts:?}"
        );
        // A kept picture can come out of the reordering during a later frame's decode, a
        // discarded one's (FFmpeg gives the P-frame shown at 16 while the B-frames after it in
        // decode order go in, on the way to 20): a hand-over that burns 30 ms of CPU is not
        // that frame's time.
        let wanted = [order[16], order[20]];
        let plan = DecodePlan::new(&index, &wanted);
        let burn = |_: hpuload::video::Picture<'_>| {
            let start = std::time::Instant::now();
            while start.elapsed() < std::time::Duration::from_millis(30) {}
        };
        let counts = decoder.decode(&file, &index, &plan, &mut { burn }).unwrap();
        assert!(
            counts.discarded_time < std::time::Duration::from_millis(30),
            "{counts:?}"
        );
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
fn one_decoder_decodes_run_after_run_and_video_after_video() {
    // The loader keeps a worker's decoder while videos share their parameter sets.
    let expected = expected();
    let clip = "high_bframes.mp4";
    let frames = expected[clip]["frames"].as_array().unwrap();
    let index = VideoIndex::open(data().join(clip)).unwrap();
    let order = index.presentation_order();
    let file = File::open(&index.path).unwrap();
    for lib in decoders() {
        let mut decoder = VideoDecoder::with_library(&index, lib).unwrap();
        for wanted in [
            &[3usize, 4, 5, 20][..],
            &[3, 4, 5, 20],
            &[28, 29],
            &[0, 13, 27],
        ] {
            let decode_order: Vec<usize> = wanted.iter().map(|&p| order[p]).collect();
            let plan = DecodePlan::new(&index, &decode_order);
            let mut got = Vec::new();
            decoder
                .decode(&file, &index, &plan, &mut |p| {
                    let pos = order.iter().position(|&f| f == p.frame).unwrap();
                    let (cw, ch) = (p.width.div_ceil(2), p.height.div_ceil(2));
                    got.push((
                        pos,
                        [
                            plane(p.y, p.y_stride, p.width, p.height),
                            plane(p.u, p.uv_stride, cw, ch),
                            plane(p.v, p.uv_stride, cw, ch),
                        ],
                    ));
                })
                .unwrap();
            assert_eq!(got.len(), wanted.len(), "{wanted:?}");
            for (pos, planes) in got {
                assert_eq!(planes, hashes(&frames[pos]), "frame {pos} of {wanted:?}");
            }
        }
    }
}

/// Each decoder's error for decoding the frames `wanted` (decode order) of the video at
/// `path`, which must fail.
fn errors_decoding(path: &Path, wanted: &[usize]) -> Vec<String> {
    let index = VideoIndex::open(path).unwrap();
    let plan = DecodePlan::new(&index, wanted);
    decoders()
        .into_iter()
        .map(|lib| {
            VideoDecoder::with_library(&index, lib)
                .unwrap()
                .decode(&File::open(path).unwrap(), &index, &plan, &mut |_| {})
                .unwrap_err()
                .to_string()
        })
        .collect()
}

#[test]
fn a_damaged_frame_is_an_error_naming_the_file_and_frame() {
    let dir = std::env::temp_dir().join(format!("hpuload-video-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("damaged.mp4");
    let mut bytes = std::fs::read(data().join("high_bframes.mp4")).unwrap();
    let index = VideoIndex::open(data().join("high_bframes.mp4")).unwrap();
    // Frame 5's first NAL length claims more bytes than the frame has.
    let f = index.frames[5];
    bytes[f.offset as usize..f.offset as usize + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    std::fs::write(&path, &bytes).unwrap();
    for err in errors_decoding(&path, &[5]) {
        assert!(err.contains("damaged.mp4"), "{err}");
        assert!(err.contains("frame 5"), "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_metadata_tag_claiming_gigabytes_is_not_read_and_the_video_indexes() {
    // A title tag (`udta/meta/ilst/©nam/data`) at the movie's end whose data claims 4 GiB
    // (the `video_decode` fuzz target's find: mp4parse reserved what it claimed).
    let good = std::fs::read(data().join("high_bframes.mp4")).unwrap();
    let mut at = 0;
    let moov = loop {
        let size = u32::from_be_bytes(good[at..at + 4].try_into().unwrap()) as usize;
        if &good[at + 4..at + 8] == b"moov" {
            assert_eq!(at + size, good.len(), "the movie box comes last");
            break at;
        }
        at += size;
    };
    let boxed = |kind: &[u8], body: Vec<u8>| -> Vec<u8> {
        let mut b = ((body.len() + 8) as u32).to_be_bytes().to_vec();
        b.extend_from_slice(kind);
        b.extend(body);
        b
    };
    let mut tag = 0xffff_fff0u32.to_be_bytes().to_vec();
    tag.extend_from_slice(b"data\0\0\0\x01\0\0\0\0title");
    let title = boxed(b"\xa9nam", tag);
    let ilst = boxed(b"ilst", title);
    let meta = boxed(b"meta", [vec![0; 4], ilst].concat());
    let udta = boxed(b"udta", meta);
    let mut bytes = [&good[..], &udta[..]].concat();
    let size = (good.len() - moov + udta.len()) as u32;
    bytes[moov..moov + 4].copy_from_slice(&size.to_be_bytes());
    let dir = TempDir::new("mp4-tag");
    let path = dir.path().join("tagged.mp4");
    std::fs::write(&path, bytes).unwrap();
    let tagged = VideoIndex::open(&path).unwrap();
    let plain = VideoIndex::open(data().join("high_bframes.mp4")).unwrap();
    assert_eq!(tagged.frames, plain.frames);
}

#[test]
fn a_damaged_avi_file_is_refused_naming_the_file_the_frame_and_the_reason() {
    let dir = TempDir::new("avi");
    let good = std::fs::read(data().join("xvid.avi")).unwrap();
    let index = VideoIndex::open(data().join("xvid.avi")).unwrap();
    let chunk = |k: usize| index.frames[k].offset as usize - 8;
    let mut cases: Vec<(&str, Vec<u8>, &str)> = Vec::new();
    // Cut off in the middle of its frames (a download that stopped).
    let cut = chunk(20) + 40;
    cases.push((
        "cut.avi",
        good[..cut].to_vec(),
        "frame 20's bytes lie past the end",
    ));
    // Another codec in the stream format.
    let mut mjpg = good.clone();
    let at = mjpg.windows(4).position(|w| w == b"strf").unwrap() + 8 + 16;
    mjpg[at..at + 4].copy_from_slice(b"MJPG");
    cases.push(("mjpg.avi", mjpg, "Motion JPEG"));
    // Frame 4's VOP header gone.
    let mut headless = good.clone();
    let at = index.frames[4].offset as usize;
    headless[at..at + 4].copy_from_slice(&[0xff; 4]);
    cases.push(("headless.avi", headless, "no MPEG-4 picture (VOP) header"));
    // The stream headers' list claiming no bytes, not even its kind's (the `video_index`
    // fuzz target's find: a length that went below zero).
    let mut empty_headers = good.clone();
    let at = empty_headers.windows(4).position(|w| w == b"hdrl").unwrap() - 8;
    empty_headers[at + 4..at + 8].copy_from_slice(&0u32.to_le_bytes());
    cases.push(("empty_hdrl.avi", empty_headers, "no video track"));
    // Not an AVI after its first bytes.
    let mut riff = good[..12].to_vec();
    riff.extend_from_slice(&[0xab; 100]);
    cases.push(("riff.avi", riff, "no video track"));
    for (name, bytes, reason) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let err = VideoIndex::open(&path).unwrap_err().to_string();
        assert!(err.contains(name) && err.contains(reason), "{name}: {err}");
    }
}

#[test]
fn a_corrupt_mpeg4_frame_is_an_error_naming_the_file_and_frame() {
    let Some(lib) = libavcodec() else {
        eprintln!("no libavcodec on this machine: MPEG-4 Part 2 is not decoded");
        return;
    };
    let dir = TempDir::new("avi");
    let mut bytes = std::fs::read(data().join("xvid.avi")).unwrap();
    let index = VideoIndex::open(data().join("xvid.avi")).unwrap();
    // Frame 1's macroblocks (after its VOP header) replaced by noise.
    let f = index.frames[1];
    let mut x = 0x9e37_79b9u32;
    for b in &mut bytes[f.offset as usize + 8..(f.offset + u64::from(f.len)) as usize] {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    let path = dir.path().join("noise.avi");
    std::fs::write(&path, &bytes).unwrap();
    let index = VideoIndex::open(&path).unwrap();
    let plan = DecodePlan::new(&index, &[1, 2]);
    let err = VideoDecoder::with_library(&index, Some(lib))
        .unwrap()
        .decode(&File::open(&path).unwrap(), &index, &plan, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("noise.avi") && err.contains("frame 1"),
        "{err}"
    );
}

use crate::common::{host, TempDir};
use hpuload::video::{colour, ClipSampler, IndexCache, IndexClips, Policy, INDEX_FILE};
use hpuload::{Dtype, Layout, Loader, Pipeline, Source, VideoFolder, VideoSpec};

/// A Kinetics-style folder: class `a` holds two clips, class `b` two.
fn video_folder() -> TempDir {
    let dir = TempDir::new("videos");
    for (class, clip) in [
        ("a", "high_bframes.mp4"),
        ("a", "vfr.mp4"),
        ("b", "main_cabac.mp4"),
        ("b", "baseline.mp4"),
    ] {
        std::fs::create_dir_all(dir.path().join(class)).unwrap();
        std::fs::copy(data().join(clip), dir.path().join(class).join(clip)).unwrap();
    }
    std::fs::write(dir.path().join("a/notes.txt"), "not a video").unwrap();
    dir
}

fn pipeline(toml: &str) -> Pipeline {
    Pipeline::from_toml(toml, "test").unwrap()
}

const TRAIN: &str = r#"
name = "video_train"
[[ops]]
op = "random_resized_crop"
size = 32
[[ops]]
op = "random_horizontal_flip"
[[ops]]
op = "color_jitter"
brightness = [0.6, 1.4]
"#;

fn clips(frames_per_clip: usize, between: usize) -> VideoSpec {
    VideoSpec {
        sampler: ClipSampler::RandomIndices(IndexClips {
            frames_per_clip,
            between,
            ..IndexClips::default()
        }),
        channels_first: false,
    }
}

#[test]
fn a_video_folder_gives_static_btchw_batches_with_its_class_labels() {
    let dir = video_folder();
    let folder = VideoFolder::open(dir.path()).unwrap();
    assert_eq!(folder.entries().len(), 4, "the .txt file is not a video");
    let mut loader = Loader::builder(folder)
        .batch_size(2)
        .workers(2)
        .shuffle(5)
        .pipeline(pipeline(TRAIN))
        .output(Dtype::U8, Layout::Nchw)
        .video(clips(4, 2))
        .build()
        .unwrap();
    let mut labels_seen = Vec::new();
    for batch in loader.epoch(0) {
        let batch = batch.unwrap();
        assert_eq!(batch.images.shape(), &[2, 4, 3, 32, 32]);
        let (_, labels, indices, _) = host(&batch);
        for (label, index) in labels.iter().zip(&indices) {
            assert_eq!(*label, if *index < 2 { 0 } else { 1 });
        }
        labels_seen.extend(labels);
    }
    labels_seen.sort_unstable();
    assert_eq!(labels_seen, vec![0, 0, 1, 1]);
}

/// A class folder of copies of the test clips: `(class, clip)` each.
fn class_folder(tag: &str, clips: &[(&str, &str)]) -> TempDir {
    let dir = TempDir::new(tag);
    for (class, clip) in clips {
        std::fs::create_dir_all(dir.path().join(class)).unwrap();
        std::fs::copy(data().join(clip), dir.path().join(class).join(clip)).unwrap();
    }
    dir
}

/// Each video's first three frames, one clip.
fn first_three_frames() -> VideoSpec {
    VideoSpec {
        sampler: ClipSampler::RegularIndices(IndexClips {
            frames_per_clip: 3,
            num_clips: 1,
            ..IndexClips::default()
        }),
        channels_first: false,
    }
}

/// Epoch 0 of the folder at `dir`: batches of 2 of each video's first three frames as decoded,
/// `[B, T, H, W, C]` uint8.
fn first_clips_as_decoded(dir: &Path) -> hpuload::EpochOf<Loader> {
    let loader = Loader::builder(VideoFolder::open(dir).unwrap())
        .batch_size(2)
        .workers(1)
        .pipeline(Pipeline::new("as_decoded"))
        .output(Dtype::U8, Layout::Nhwc)
        .video(first_three_frames())
        .build()
        .unwrap();
    loader.into_epoch(0)
}

#[test]
fn a_pipeline_without_a_crop_or_resize_keeps_the_frames_when_every_video_has_one_size() {
    // Two videos of 96x72: the clips as decoded, [B, T, H, W, C] uint8.
    let dir = class_folder(
        "videos-one-size",
        &[("a", "high_bframes.mp4"), ("b", "fragmented.mp4")],
    );
    let batch = first_clips_as_decoded(dir.path()).next().unwrap().unwrap();
    assert_eq!(batch.images.shape(), &[2, 3, 72, 96, 3]);
    let (images, _, indices, _) = host(&batch);
    let path = dir.path().join("a/high_bframes.mp4");
    let want = hpuload::video::read_frames(&path, &[0, 1, 2]).unwrap().rgb;
    let row = indices.iter().position(|&i| i == 0).unwrap();
    assert_eq!(&images[row * want.len()..(row + 1) * want.len()], &want[..]);
    // Videos of different sizes need a crop or resize, and the error names two.
    let err = Loader::builder(VideoFolder::open(video_folder().path()).unwrap())
        .batch_size(2)
        .pipeline(Pipeline::new("as_decoded"))
        .output(Dtype::U8, Layout::Nhwc)
        .video(first_three_frames())
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("video 0 is 96x72") && err.contains("add a crop or resize"),
        "{err}"
    );
}

#[test]
fn a_second_loader_reads_every_index_from_the_folders_index_file_and_gives_the_same_clips() {
    let dir = video_folder();
    let build = |cache: IndexCache| {
        Loader::builder(VideoFolder::open(dir.path()).unwrap())
            .batch_size(4)
            .workers(2)
            .seed(3)
            .pipeline(pipeline(TRAIN))
            .output(Dtype::U8, Layout::Nchw)
            .video(clips(4, 2))
            .video_index_cache(cache)
            .build()
            .unwrap()
    };
    let clips_of = |loader: &mut Loader| host(&loader.epoch(0).next().unwrap().unwrap()).0;
    let file = dir.path().join(INDEX_FILE);
    let mut off = build(IndexCache::Off);
    assert_eq!(off.video_index_stats().unwrap().built, 4);
    assert!(!file.exists(), "Off writes nothing");
    let mut first = build(IndexCache::Beside);
    let stats = first.video_index_stats().unwrap().clone();
    assert_eq!((stats.cached, stats.built, stats.failed), (0, 4, 0));
    assert_eq!(stats.saved.as_deref(), Some(file.as_path()));
    let mut second = build(IndexCache::Beside);
    let stats = second.video_index_stats().unwrap();
    assert_eq!((stats.cached, stats.built), (4, 0));
    let elsewhere = TempDir::new("video-index-elsewhere");
    let at = elsewhere.path().join("kinetics.idx");
    let mut third = build(IndexCache::At(at.clone()));
    assert_eq!(third.video_index_stats().unwrap().built, 4);
    assert!(at.exists());
    let want = clips_of(&mut off);
    for loader in [&mut first, &mut second, &mut third] {
        assert_eq!(clips_of(loader), want);
    }
    // The folder still lists its four videos: the index file is not one.
    assert_eq!(VideoFolder::open(dir.path()).unwrap().entries().len(), 4);
}

#[test]
fn video_batches_are_reproducible_from_the_seed_and_change_with_the_epoch() {
    let dir = video_folder();
    let run = |epoch| {
        let mut loader = Loader::builder(VideoFolder::open(dir.path()).unwrap())
            .batch_size(4)
            .workers(2)
            .seed(11)
            .pipeline(pipeline(TRAIN))
            .output(Dtype::U8, Layout::Nhwc)
            .video(clips(3, 1))
            .build()
            .unwrap();
        let batch = loader.epoch(epoch).next().unwrap().unwrap();
        assert_eq!(batch.images.shape(), &[4, 3, 32, 32, 3]);
        host(&batch).0
    };
    assert_eq!(run(0), run(0));
    assert_ne!(run(0), run(1));
}

#[test]
fn each_frame_of_a_clip_is_its_decoded_picture_when_the_pipeline_keeps_the_whole_frame() {
    // A centre crop of the whole 64x48 frame resamples nothing: the clip's frames must be the
    // decoded pictures, in the sampler's order, converted to RGB.
    let dir = TempDir::new("one-video");
    std::fs::create_dir_all(dir.path().join("c")).unwrap();
    std::fs::copy(data().join("baseline.mp4"), dir.path().join("c/v.mp4")).unwrap();
    let sampler = ClipSampler::RegularIndices(IndexClips {
        num_clips: 2,
        frames_per_clip: 3,
        between: 4,
        ..IndexClips::default()
    });
    let mut loader = Loader::builder(VideoFolder::open(dir.path()).unwrap())
        .batch_size(1)
        .workers(1)
        .pipeline(pipeline(
            "name = \"whole\"\n[[ops]]\nop = \"center_crop\"\nsize = [48, 64]\n",
        ))
        .output(Dtype::U8, Layout::Nhwc)
        .video(VideoSpec {
            sampler: sampler.clone(),
            channels_first: false,
        })
        .build()
        .unwrap();
    let batch = loader.epoch(0).next().unwrap().unwrap();
    assert_eq!(batch.images.shape(), &[1, 2, 3, 48, 64, 3]);
    let got = host(&batch).0;

    let index = VideoIndex::open(dir.path().join("c/v.mp4")).unwrap();
    let timeline = hpuload::video::Timeline::of(&index);
    let clips = sampler.sample(&timeline, 0, 0, 0).unwrap();
    // 16 frames, span 9: starts linspace(0, 7, 2) = 0 and 7.
    assert_eq!(clips, vec![vec![0, 4, 8], vec![7, 11, 15]]);
    let order = index.presentation_order();
    let mut decoder = VideoDecoder::new(&index).unwrap();
    let mut rgb = std::collections::HashMap::new();
    let all: Vec<usize> = (0..index.frames.len()).collect();
    decoder
        .decode(
            &File::open(&index.path).unwrap(),
            &index,
            &DecodePlan::new(&index, &all),
            &mut |p| {
                let mut out = Vec::new();
                colour::to_rgb(&p, &colour::Conversion::of_video(&index), &mut out);
                rgb.insert(p.frame, out);
            },
        )
        .unwrap();
    let frame_bytes = 48 * 64 * 3;
    for (k, position) in clips.iter().flatten().enumerate() {
        let want = &rgb[&order[*position]];
        assert!(
            got[k * frame_bytes..(k + 1) * frame_bytes] == want[..],
            "frame {k} (position {position}) differs"
        );
    }
}

#[test]
fn a_video_too_short_for_its_clip_and_a_damaged_one_are_named_and_skipped() {
    let dir = video_folder();
    // Damage the baseline clip's frame 1 (its NAL length runs past the frame).
    let path = dir.path().join("b/baseline.mp4");
    let index = VideoIndex::open(&path).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let f = index.frames[1];
    bytes[f.offset as usize..f.offset as usize + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    std::fs::write(&path, &bytes).unwrap();
    // Good videos enough for the replacements to find one.
    for k in 0..6 {
        std::fs::copy(
            data().join("main_cabac.mp4"),
            dir.path().join(format!("b/copy{k}.mp4")),
        )
        .unwrap();
    }
    let mut loader = Loader::builder(VideoFolder::open(dir.path()).unwrap())
        .batch_size(4)
        .workers(2)
        .error_budget(1.0)
        .pipeline(pipeline(TRAIN))
        .output(Dtype::U8, Layout::Nchw)
        // 14 frames, and the policy `error` for clips past the end: the VFR clip (12
        // frames) has none; the baseline one (16) has, and every clip of it needs frame 1.
        .video(VideoSpec {
            sampler: ClipSampler::RandomIndices(IndexClips {
                frames_per_clip: 14,
                policy: Policy::Error,
                ..IndexClips::default()
            }),
            channels_first: false,
        })
        .build()
        .unwrap();
    let batch = loader.epoch(0).next().unwrap().unwrap();
    assert_eq!(batch.images.shape(), &[4, 14, 3, 32, 32]);
    let skips = loader.report().skips;
    let about = |name: &str| {
        skips
            .iter()
            .find(|s| s.path.ends_with(name))
            .unwrap_or_else(|| panic!("{name} not skipped: {skips:?}"))
            .clone()
    };
    let short = about("vfr.mp4");
    assert_eq!(short.reason, "video");
    assert!(short.message.contains("no clip"), "{}", short.message);
    let damaged = about("baseline.mp4");
    assert_eq!(damaged.reason, "video");
    assert!(damaged.message.contains("frame 1"), "{}", damaged.message);
}

#[test]
fn each_frame_of_an_open_gop_decodes_alone_as_ffmpeg_decodes_it_in_turn() {
    // A random clip's first frame after a keyframe that is a recovery point, not an IDR
    // picture: the frames after it may refer, through its leading pictures, to the GOP
    // before. FFmpeg 5 then gives nothing and OpenH264 refuses to start there; the run is
    // decoded again from further back. Each frame alone, with each decoder (OpenH264 only
    // where a single edit: it cannot follow a second edit's open GOP).
    let expected = expected();
    for (clip, openh264) in [("open_gop.mp4", true), (LIBAVCODEC_ONLY, false)] {
        let frames = expected[clip]["frames"].as_array().unwrap();
        let index = VideoIndex::open(data().join(clip)).unwrap();
        for lib in decoders() {
            if lib.is_none() && !openh264 {
                continue;
            }
            for position in 0..frames.len() {
                let got = decode_with(lib, &index, &[position]);
                assert_pictures(got, &[position], frames, &format!("{clip} alone"));
            }
        }
    }
}

#[test]
fn interlaced_and_lossless_h264_decode_bit_exact_with_libavcodec_and_are_named_without_it() {
    // OpenH264 refuses both SPSs ("no parameter sets"): without a libavcodec the decoder
    // says what the video is and what decodes it, before any frame.
    let expected = expected();
    for (clip, what) in [
        (
            "interlaced.mp4",
            "interlaced H.264 is decoded by FFmpeg's libavcodec",
        ),
        (
            "lossless.mp4",
            "lossless H.264 is decoded by FFmpeg's libavcodec",
        ),
    ] {
        let index = VideoIndex::open(data().join(clip)).unwrap();
        let e = VideoDecoder::with_library(&index, None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(what), "{e}");
        let Some(lib) = libavcodec() else {
            eprintln!("no libavcodec on this machine: {clip} is not decoded");
            continue;
        };
        let frames = expected[clip]["frames"].as_array().unwrap();
        let wanted: Vec<usize> = (0..frames.len()).collect();
        let got = decode_with(Some(lib), &index, &wanted);
        assert_pictures(got, &wanted, frames, clip);
    }
}

#[test]
fn h264_that_is_not_8_bit_4_2_0_is_named_when_indexed_not_at_its_first_frame() {
    // x264's 4:4:4 (what it makes of RGB images unless told otherwise) and 10-bit 4:2:0:
    // FFmpeg decodes them to pixel formats hpuload does not convert.
    for (clip, what) in [
        ("yuv444.mp4", "H.264 with 4:4:4 chroma"),
        ("high10.mp4", "H.264 with 10-bit 4:2:0 chroma"),
    ] {
        let e = VideoIndex::open(data().join(clip)).unwrap_err().to_string();
        assert!(
            e.contains(clip) && e.contains(what) && e.contains("hpuload decodes 8-bit 4:2:0"),
            "{e}"
        );
    }
}

#[test]
fn rgb_frames_are_ffmpegs_swscale_conversion_bit_for_bit() {
    // FFmpeg's rgb24 of frames 0, 5 and 11 of the baseline clip (make_fixtures.py).
    let theirs = std::fs::read(data().join("baseline_rgb_0_5_11.bin")).unwrap();
    let index = VideoIndex::open(data().join("baseline.mp4")).unwrap();
    let order = index.presentation_order();
    let wanted: Vec<usize> = [0, 5, 11].iter().map(|&p| order[p]).collect();
    let mut decoder = VideoDecoder::new(&index).unwrap();
    let mut ours = std::collections::HashMap::new();
    decoder
        .decode(
            &File::open(&index.path).unwrap(),
            &index,
            &DecodePlan::new(&index, &wanted),
            &mut |p| {
                let mut out = Vec::new();
                colour::to_rgb(&p, &colour::Conversion::of_video(&index), &mut out);
                ours.insert(p.frame, out);
            },
        )
        .unwrap();
    let frame_bytes = 64 * 48 * 3;
    for (k, frame) in wanted.iter().enumerate() {
        let ffmpeg = &theirs[k * frame_bytes..(k + 1) * frame_bytes];
        assert!(ours[frame] == ffmpeg, "frame {k} differs from FFmpeg's RGB");
    }
}

#[test]
fn a_video_loader_resumed_mid_epoch_yields_the_clips_of_the_uninterrupted_run() {
    let dir = video_folder();
    let build = |state: Option<hpuload::LoaderState>| {
        let b = Loader::builder(VideoFolder::open(dir.path()).unwrap())
            .batch_size(1)
            .workers(2)
            .shuffle(9)
            .pipeline(pipeline(TRAIN))
            .output(Dtype::U8, Layout::Nchw)
            .video(clips(3, 2));
        match state {
            Some(s) => b.resume(s),
            None => b,
        }
        .build()
        .unwrap()
    };
    let mut whole = build(None);
    let all: Vec<Vec<u8>> = whole.epoch(1).map(|b| host(&b.unwrap()).0).collect();
    assert_eq!(all.len(), 4);
    let mut first = build(None);
    let mut epoch = first.epoch(1);
    let _ = epoch.next().unwrap().unwrap();
    let state = epoch.state();
    drop(epoch);
    // Another settings' state is refused: the clips are part of what a batch depends on.
    let other = Loader::builder(VideoFolder::open(dir.path()).unwrap())
        .batch_size(1)
        .shuffle(9)
        .pipeline(pipeline(TRAIN))
        .output(Dtype::U8, Layout::Nchw)
        .video(clips(4, 2))
        .resume(state.clone())
        .build();
    assert!(
        other.is_err(),
        "a state of 3-frame clips resumed with 4-frame clips"
    );
    let mut resumed = build(Some(state));
    let rest: Vec<Vec<u8>> = resumed.epoch(1).map(|b| host(&b.unwrap()).0).collect();
    assert_eq!(rest, all[1..]);
}

#[test]
fn channels_first_clips_hold_each_frames_planes_at_their_time_position() {
    // The same clips as [T, C, H, W] and as [C, T, H, W]: a transpose of each other.
    let dir = video_folder();
    let run = |channels_first| {
        let mut loader = Loader::builder(VideoFolder::open(dir.path()).unwrap())
            .batch_size(2)
            .workers(1)
            .seed(4)
            .pipeline(pipeline(TRAIN))
            .output(Dtype::U8, Layout::Nchw)
            .video(VideoSpec {
                channels_first,
                ..clips(3, 2)
            })
            .build()
            .unwrap();
        let batch = loader.epoch(0).next().unwrap().unwrap();
        (batch.images.shape().to_vec(), host(&batch).0)
    };
    let (tchw_shape, tchw) = run(false);
    let (cthw_shape, cthw) = run(true);
    assert_eq!(tchw_shape, [2, 3, 3, 32, 32]);
    assert_eq!(cthw_shape, [2, 3, 3, 32, 32]);
    let plane = 32 * 32;
    for b in 0..2 {
        for t in 0..3 {
            for c in 0..3 {
                let from = ((b * 3 + t) * 3 + c) * plane;
                let to = ((b * 3 + c) * 3 + t) * plane;
                assert!(
                    tchw[from..from + plane] == cthw[to..to + plane],
                    "b {b} t {t} c {c}"
                );
            }
        }
    }
}

#[test]
fn the_media_engine_gives_the_host_paths_clips_byte_for_byte_on_device_and_host_batches() {
    // Gaudi's VideoDecoder: the runs' compressed bytes cross to the device and the engine
    // decodes, resizes and crops there. Same clips, same bytes as the host path.
    use hpuload::{Backend, Placement, Stage};
    let dir = video_folder();
    let run = |backend, placement| {
        let mut loader = Loader::builder(VideoFolder::open(dir.path()).unwrap())
            .batch_size(2)
            .workers(2)
            .seed(8)
            .backend(backend)
            .placement(placement)
            .pipeline(pipeline(TRAIN))
            .output(Dtype::F32, Layout::Nchw)
            .video(VideoSpec {
                channels_first: true,
                ..clips(4, 2)
            })
            .build()
            .unwrap();
        let batches: Vec<_> = loader
            .epoch(1)
            .map(|b| {
                let (images, labels, indices, _) = host(&b.unwrap());
                (images, labels, indices)
            })
            .collect();
        (batches, loader.report())
    };
    let (cpu, cpu_report) = run(Backend::Cpu, Placement::Device);
    assert_eq!(cpu_report.hw_samples, 0);
    for placement in [Placement::Device, Placement::Host] {
        let (hw, report) = run(Backend::Hw, placement);
        assert_eq!(hw, cpu, "{placement:?}");
        assert_eq!(report.hw_samples, 4, "every clip on the engine");
        assert!(report.stages.get(Stage::DecodeVideoEngine) > std::time::Duration::ZERO);
        assert_eq!(
            report.stages.get(Stage::DecodeVideo),
            std::time::Duration::ZERO
        );
        assert_eq!(report.frames_decoded, cpu_report.frames_decoded);
    }
}

#[test]
fn an_mpeg4_part_2_folder_decodes_on_the_host_under_the_engine_backends_with_the_host_paths_clips()
{
    // The media engine decodes H.264 only: MPEG-4 Part 2 (in AVI files, and in MP4) decodes
    // in the worker under `Auto` (counted as a fallback, the same clips as the host path) and
    // is refused under `Hw`.
    use hpuload::{Backend, OnError, Placement};
    if libavcodec().is_none() {
        eprintln!("no libavcodec on this machine: MPEG-4 Part 2 is not decoded");
        return;
    }
    let dir = TempDir::new("avi-folder");
    let videos = [
        ("a", "xvid.avi"),
        ("b", "divx_bframes.avi"),
        ("c", "mp4v_bframes.mp4"),
    ];
    for (class, clip) in videos {
        std::fs::create_dir_all(dir.path().join(class)).unwrap();
        std::fs::copy(data().join(clip), dir.path().join(class).join(clip)).unwrap();
    }
    let run = |backend| {
        let mut loader = Loader::builder(VideoFolder::open(dir.path()).unwrap())
            .batch_size(3)
            .workers(2)
            .seed(3)
            .backend(backend)
            .on_error(OnError::Fail)
            .placement(Placement::Device)
            .pipeline(pipeline(TRAIN))
            .output(Dtype::U8, Layout::Nchw)
            .video(clips(4, 3))
            .build()
            .unwrap();
        let batches: Vec<_> = loader.epoch(0).map(|b| b.map(|b| host(&b).0)).collect();
        (batches, loader.report())
    };
    let (cpu, _) = run(Backend::Cpu);
    let cpu: Vec<_> = cpu.into_iter().map(Result::unwrap).collect();
    assert_eq!(cpu.len(), 1);
    let (auto, report) = run(Backend::Auto);
    assert_eq!(
        auto.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        cpu
    );
    assert_eq!(report.hw_samples, 0);
    assert_eq!(
        report.fallbacks.values().sum::<u64>(),
        3,
        "{:?}",
        report.fallbacks
    );
    let (hw, _) = run(Backend::Hw);
    let err = hw
        .into_iter()
        .find_map(Result::err)
        .expect("refused on the engine");
    assert!(err.to_string().contains("H.264"), "{err}");
}

/// A loader of the class folder `dir` with torchvision's windows, batches of `batch`, 32x32
/// uint8 NCHW clips.
fn windows_loader(
    dir: &Path,
    windows: &hpuload::video::WindowClips,
    batch: usize,
) -> Result<Loader, hpuload::Error> {
    Loader::builder(VideoFolder::open(dir).unwrap())
        .batch_size(batch)
        .workers(2)
        .pipeline(pipeline(TRAIN))
        .output(Dtype::U8, Layout::Nchw)
        .video(VideoSpec {
            sampler: ClipSampler::Windows(windows.clone()),
            channels_first: false,
        })
        .build()
}

#[test]
fn torchvisions_video_clips_make_each_window_a_sample_labelled_by_its_video() {
    use hpuload::video::WindowClips;
    let dir = video_folder();
    let windows = WindowClips {
        frames_per_clip: 4,
        step: 3,
        frame_rate: Some(15.0),
        metadata: None,
        leave_unreadable: false,
    };
    let mut loader = windows_loader(dir.path(), &windows, 3).unwrap();
    // Each video's windows at its own average rate (the index's), laid end to end.
    let mut want_labels = Vec::new();
    for (k, entry) in VideoFolder::open(dir.path())
        .unwrap()
        .entries()
        .iter()
        .enumerate()
    {
        let index = VideoIndex::open(&entry.path).unwrap();
        let timeline = hpuload::video::Timeline::of(&index);
        let n = windows.count(timeline.len(), timeline.average_fps().unwrap());
        want_labels.extend(std::iter::repeat_n(if k < 2 { 0 } else { 1 }, n));
    }
    assert_eq!(loader.dataset_len(), want_labels.len());
    let mut labels = vec![-1; want_labels.len()];
    for batch in loader.epoch(0) {
        let (_, got, indices, valid) = host(&batch.unwrap());
        for (label, index) in got.iter().zip(&indices).take(valid) {
            labels[*index] = *label;
        }
    }
    assert_eq!(labels, want_labels);

    // Metadata that disagrees with a video's tables is refused, naming the video.
    let wrong = WindowClips {
        metadata: Some(vec![(30, 25.0), (11, 25.0), (16, 25.0), (20, 25.0)]),
        ..windows.clone()
    };
    let refused = windows_loader(dir.path(), &wrong, 1)
        .err()
        .unwrap()
        .to_string();
    assert!(
        refused.contains("vfr.mp4") && refused.contains("counts 11 frames"),
        "{refused}"
    );

    // A video the user's reader counted but hpuload cannot read is refused naming the video
    // and why (the user's loader then takes the dataset).
    let cabac = dir.path().join("b/main_cabac.mp4");
    let bytes = std::fs::read(&cabac).unwrap();
    std::fs::write(&cabac, &bytes[..bytes.len() - 600]).unwrap();
    let right = WindowClips {
        metadata: Some(vec![(30, 25.0), (12, 25.0), (16, 25.0), (20, 25.0)]),
        ..windows
    };
    let refused = windows_loader(dir.path(), &right, 1)
        .err()
        .unwrap()
        .to_string();
    assert!(
        refused.contains("main_cabac.mp4: hpuload cannot read this video: ")
            && refused.contains("past the file's"),
        "{refused}"
    );
}

#[test]
fn a_video_the_metadata_counts_but_hpuload_cannot_read_is_left_to_the_caller_as_zeros_and_named() {
    // With `leave_unreadable`, the loader is built anyway: the video's clips keep their places
    // among the samples (the user's metadata counts them), their slots zero and their labels
    // written, for the caller (the Python drop-in: the user's own dataset) to fill.
    use hpuload::video::WindowClips;
    let dir = video_folder();
    let cabac = dir.path().join("b/main_cabac.mp4");
    let bytes = std::fs::read(&cabac).unwrap();
    std::fs::write(&cabac, &bytes[..bytes.len() - 600]).unwrap();
    let windows = WindowClips {
        frames_per_clip: 4,
        step: 3,
        frame_rate: None,
        metadata: Some(vec![(30, 25.0), (12, 25.0), (16, 25.0), (20, 25.0)]),
        leave_unreadable: true,
    };
    let mut loader = windows_loader(dir.path(), &windows, 4).unwrap();
    let left = loader.left_videos();
    assert_eq!(left.len(), 1, "{left:?}");
    let (video, path, why) = left[0];
    assert_eq!((video, path), (3, cabac.as_path()));
    assert!(why.contains("past the file's"), "{why}");
    // Samples per video: 9, 3, 5 and 6 windows of 4 frames, 3 apart.
    let counts: Vec<usize> = [(30, 25.0), (12, 25.0), (16, 25.0), (20, 25.0)]
        .iter()
        .map(|&(n, fps)| windows.count(n, fps))
        .collect();
    assert_eq!(counts, [9, 3, 5, 6]);
    assert_eq!(loader.dataset_len(), 23);
    let first_left = 9 + 3 + 5;
    let sample = 4 * 3 * 32 * 32;
    let mut seen = 0;
    for batch in loader.epoch(0) {
        let (images, labels, indices, valid) = host(&batch.unwrap());
        for (k, &index) in indices.iter().enumerate().take(valid) {
            let pixels = &images[k * sample..(k + 1) * sample];
            let zeros = pixels.iter().all(|&b| b == 0);
            assert_eq!(zeros, index >= first_left, "sample {index}");
            assert_eq!(labels[k], if index < 12 { 0 } else { 1 }, "sample {index}");
            seen += 1;
        }
    }
    assert_eq!(seen, 23);
}

#[test]
fn a_manifest_rows_segment_is_all_its_clips_are_drawn_from() {
    // baseline.mp4: 16 frames at 25 fps. The row's segment [0.2, 0.4) s holds frames 5 to 9:
    // one regular clip of 5 frames is exactly those, in order.
    let dir = TempDir::new("video-manifest");
    std::fs::copy(data().join("baseline.mp4"), dir.path().join("v.mp4")).unwrap();
    std::fs::write(
        dir.path().join("list.csv"),
        "path,label,start,end\nv.mp4,7,0.2,0.4\nv.mp4,3,,\n",
    )
    .unwrap();
    let manifest = hpuload::VideoManifest::open(dir.path().join("list.csv"), None).unwrap();
    let sampler = ClipSampler::RegularIndices(IndexClips {
        frames_per_clip: 5,
        ..IndexClips::default()
    });
    let mut loader = Loader::builder(manifest)
        .batch_size(2)
        .workers(1)
        .pipeline(pipeline(
            "name = \"whole\"\n[[ops]]\nop = \"center_crop\"\nsize = [48, 64]\n",
        ))
        .output(Dtype::U8, Layout::Nhwc)
        .video(VideoSpec {
            sampler,
            channels_first: false,
        })
        .build()
        .unwrap();
    let (got, labels, _, _) = host(&loader.epoch(0).next().unwrap().unwrap());
    assert_eq!(labels, vec![7, 3]);
    let frames = |positions: &[usize]| {
        hpuload::video::read_frames(&dir.path().join("v.mp4"), positions)
            .unwrap()
            .rgb
    };
    let clip = 5 * 48 * 64 * 3;
    assert!(
        got[..clip] == frames(&[5, 6, 7, 8, 9])[..],
        "the segment's frames"
    );
    // The whole video: 5 frames evenly spread from the first (torchcodec's regular clip of
    // one starts at 0).
    assert!(
        got[clip..] == frames(&[0, 1, 2, 3, 4])[..],
        "the whole video's first clip"
    );
}

/// `videos`' files as one tar shard in `dir`, sample `k` the members `{k:03}.mp4` and
/// `{k:03}.cls`, and sample 0 a thumbnail `000.jpg` before its video: a shard of videos
/// reads the video member, whatever else a sample holds.
fn video_shard(dir: &std::path::Path, videos: &[hpuload::Entry]) -> std::path::PathBuf {
    let shard = dir.join("videos-000.tar");
    let mut tar = tar::Builder::new(std::fs::File::create(&shard).unwrap());
    let mut add = |name: String, bytes: &[u8]| {
        let mut header = tar::Header::new_ustar();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        tar.append_data(&mut header, name, bytes).unwrap();
    };
    for (k, entry) in videos.iter().enumerate() {
        if k == 0 {
            add(
                format!("{k:03}.jpg"),
                b"a thumbnail, not the sample's video",
            );
        }
        add(format!("{k:03}.mp4"), &std::fs::read(&entry.path).unwrap());
        add(format!("{k:03}.cls"), entry.label.to_string().as_bytes());
    }
    tar.into_inner().unwrap();
    shard
}

#[test]
fn tar_shards_of_videos_give_the_folders_clips_from_disk_and_over_http_on_both_paths() {
    use crate::common::http::HttpServer;
    use hpuload::{Backend, Media, ShardOptions, WebDataset};
    let dir = video_folder();
    let folder = VideoFolder::open(dir.path()).unwrap();
    let out = TempDir::new("video-shards");
    let shard = video_shard(out.path(), folder.entries());
    let server = HttpServer::start(out.path().to_path_buf());
    let videos = ShardOptions {
        media: Media::Videos,
        ..ShardOptions::default()
    };
    let run = |source: Box<dyn Source>, backend| {
        let mut loader = Loader::builder_boxed(source)
            .batch_size(2)
            .workers(2)
            .shuffle(4)
            .backend(backend)
            .pipeline(pipeline(TRAIN))
            .output(Dtype::U8, Layout::Nchw)
            .video(clips(4, 2))
            .build()
            .unwrap();
        let batches: Vec<_> = (0..2)
            .flat_map(|e| {
                loader
                    .epoch(e)
                    .map(|b| host(&b.unwrap()))
                    .collect::<Vec<_>>()
            })
            .collect();
        (batches, loader)
    };
    let (want, _) = run(Box::new(folder), Backend::Cpu);
    let local = || WebDataset::open_with(&shard.to_string_lossy(), &videos).unwrap();
    let remote = || {
        let url = format!("{}/videos-000.tar", server.url);
        let no_cache = ShardOptions {
            remote: hpuload::RemoteOptions {
                cache: None,
                ..hpuload::RemoteOptions::default()
            },
            ..videos.clone()
        };
        WebDataset::open_with(&url, &no_cache).unwrap()
    };
    // Local members are indexed when the loader is built, into a file beside the shard that
    // the next loader reads; members over HTTP are read whole and indexed when first read.
    let (got, loader) = run(Box::new(local()), Backend::Cpu);
    assert_eq!(got, want, "local shard, host path");
    let stats = loader.video_index_stats().unwrap();
    assert_eq!((stats.built, stats.failed), (4, 0));
    assert!(out
        .path()
        .join(".videos-000.tar.hpuload-video.idx")
        .exists());
    let (got, loader) = run(Box::new(local()), Backend::Hw);
    assert_eq!(got, want, "local shard, media engine");
    assert_eq!(loader.video_index_stats().unwrap().cached, 4);
    assert_eq!(loader.report().hw_samples, 8);
    for backend in [Backend::Cpu, Backend::Hw] {
        let (got, loader) = run(Box::new(remote()), backend);
        assert_eq!(got, want, "over HTTP, {backend:?}");
        assert_eq!(loader.video_index_stats().unwrap().videos, 0);
    }
}

#[test]
fn a_shard_sample_without_a_video_member_is_named_and_skipped() {
    use hpuload::{Media, ShardOptions, WebDataset};
    let dir = video_folder();
    let folder = VideoFolder::open(dir.path()).unwrap();
    let out = TempDir::new("video-shard-missing");
    // Sample 1 loses its video: only its label (and sample 0's thumbnail) remain.
    let mut entries = folder.entries().to_vec();
    entries[1].path = dir.path().join("a/notes.txt");
    let shard = video_shard(out.path(), &entries);
    let bytes = std::fs::read(&shard).unwrap();
    let mut tar = tar::Archive::new(&bytes[..]);
    let mut rebuilt = tar::Builder::new(std::fs::File::create(&shard).unwrap());
    for member in tar.entries().unwrap() {
        let mut member = member.unwrap();
        let name = member.path().unwrap().to_string_lossy().into_owned();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut member, &mut data).unwrap();
        let name = if name == "001.mp4" {
            "001.txt".into()
        } else {
            name
        };
        let mut header = tar::Header::new_ustar();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        rebuilt.append_data(&mut header, name, &data[..]).unwrap();
    }
    rebuilt.into_inner().unwrap();
    let videos = ShardOptions {
        media: Media::Videos,
        ..ShardOptions::default()
    };
    let source = WebDataset::open_with(&shard.to_string_lossy(), &videos).unwrap();
    let mut loader = Loader::builder(source)
        .batch_size(4)
        .workers(1)
        .pipeline(pipeline(TRAIN))
        .output(Dtype::U8, Layout::Nchw)
        .video(clips(4, 2))
        .error_budget(1.0)
        .build()
        .unwrap();
    let batch = loader.epoch(0).next().unwrap().unwrap();
    assert_eq!(batch.images.shape(), &[4, 4, 3, 32, 32]);
    let skips = loader.report().skips;
    assert_eq!(skips.len(), 1, "{skips:?}");
    assert!(
        skips[0].path.ends_with("videos-000.tar/001"),
        "{:?}",
        skips[0]
    );
    assert!(
        skips[0].message.contains("no video member"),
        "{}",
        skips[0].message
    );
}

/// Class folders of videos kept as frames: `a/v0` (9 frames, `img_00001.jpg`...), `a/v1` (12,
/// `1.jpg`...`12.jpg`, whose natural order is not the byte order), `b/v2` (10). Frame `k` of
/// video `v` is a gradient with a square at `k`, 48x32, as a JPEG.
fn frame_folder() -> TempDir {
    let dir = TempDir::new("frames");
    for (v, (class, count, counted)) in [("a", 9, true), ("a", 12, false), ("b", 10, true)]
        .into_iter()
        .enumerate()
    {
        let video = dir.path().join(class).join(format!("v{v}"));
        std::fs::create_dir_all(&video).unwrap();
        for k in 0..count {
            let (w, h) = (48u32, 32u32);
            let mut rgb = Vec::with_capacity((w * h * 3) as usize);
            for y in 0..h {
                for x in 0..w {
                    let inside = (x as usize).abs_diff(3 * k + 4) < 4 && y > 10 && y < 20;
                    let r = if inside { 250 } else { (x * 5) as u8 };
                    rgb.extend([r, (y * 7) as u8, (40 * v as u32 + 20) as u8]);
                }
            }
            let mut jpeg = Vec::new();
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 92)
                .encode(&rgb, w, h, image::ExtendedColorType::Rgb8)
                .unwrap();
            let name = if counted {
                format!("img_{:05}.jpg", k + 1)
            } else {
                format!("{}.jpg", k + 1)
            };
            std::fs::write(video.join(name), jpeg).unwrap();
        }
    }
    std::fs::write(dir.path().join("a/v0/notes.txt"), "not a frame").unwrap();
    dir
}

const WHOLE_FRAME: &str = r#"
name = "whole_frame"
[[ops]]
op = "center_crop"
size = [32, 48]
"#;

#[test]
fn a_folder_of_frames_gives_each_clip_the_jpegs_its_sampler_draws() {
    use hpuload::decoders::{CpuDecoder, Decode};
    use hpuload::source::FrameFolder;
    use hpuload::video::Timeline;
    let dir = frame_folder();
    let folder = FrameFolder::open(dir.path(), 25.0).unwrap();
    assert_eq!(folder.entries().len(), 3);
    assert_eq!(folder.classes(), ["a", "b"]);
    let spec = clips(4, 2);
    let mut loader = Loader::builder(FrameFolder::open(dir.path(), 25.0).unwrap())
        .batch_size(3)
        .workers(2)
        .shuffle(7)
        .backend(hpuload::Backend::Cpu)
        .pipeline(pipeline(WHOLE_FRAME))
        .output(Dtype::U8, Layout::Nhwc)
        .video(spec.clone())
        .build()
        .unwrap();
    let mut decoder = CpuDecoder::with_limits(Default::default());
    for epoch in 0..2 {
        let batch = loader.epoch(epoch).next().unwrap().unwrap();
        assert_eq!(batch.images.shape(), &[3, 4, 32, 48, 3]);
        let (images, labels, indices, _) = host(&batch);
        for (row, (&index, &label)) in indices.iter().zip(&labels).enumerate() {
            let frames = folder.frames(index).unwrap();
            assert_eq!(label, if index < 2 { 0 } else { 1 });
            let timeline = Timeline::uniform(frames.len(), 25.0);
            let drawn = spec
                .sampler
                .sample(&timeline, 7, epoch, index as u64)
                .unwrap();
            assert_eq!(drawn[0].len(), 4);
            for (t, &k) in drawn[0].iter().enumerate() {
                let mut rgb = Vec::new();
                let jpeg = std::fs::read(frames.path(k)).unwrap();
                decoder.decode(&jpeg, &mut rgb).unwrap();
                let at = (row * 4 + t) * 32 * 48 * 3;
                assert!(
                    images[at..at + 32 * 48 * 3] == rgb[..32 * 48 * 3],
                    "video {index}, clip frame {t}: not the decoded {}",
                    frames.path(k).display()
                );
            }
        }
    }
    // Natural order: `2.jpg` is the second frame, not `10.jpg`.
    assert!(folder.frames(1).unwrap().path(1).ends_with("a/v1/2.jpg"));
}

#[test]
fn the_jpeg_engine_decodes_frame_folder_clips_within_rounding_of_the_host_path() {
    use hpuload::source::FrameFolder;
    use hpuload::{Backend, Placement, Stage};
    let dir = frame_folder();
    let run = |backend, placement| {
        let mut loader = Loader::builder(FrameFolder::open(dir.path(), 30.0).unwrap())
            .batch_size(3)
            .workers(2)
            .seed(2)
            .backend(backend)
            .placement(placement)
            .pipeline(pipeline(TRAIN))
            .output(Dtype::U8, Layout::Nchw)
            .video(VideoSpec {
                channels_first: true,
                ..clips(3, 3)
            })
            .build()
            .unwrap();
        let batches: Vec<_> = loader.epoch(0).map(|b| host(&b.unwrap())).collect();
        (batches, loader.report())
    };
    let (cpu, cpu_report) = run(Backend::Cpu, Placement::Device);
    assert_eq!(cpu_report.hw_samples, 0);
    for placement in [Placement::Device, Placement::Host] {
        let (hw, report) = run(Backend::Hw, placement);
        assert_eq!(report.hw_samples, 3, "every video on the engine");
        assert!(report.stages.get(Stage::DecodeEngine) > std::time::Duration::ZERO);
        assert_eq!(hw.len(), cpu.len());
        for (h, c) in hw.iter().zip(&cpu) {
            assert_eq!((&h.1, &h.2), (&c.1, &c.2), "labels and indices");
            let mse =
                h.0.iter()
                    .zip(&c.0)
                    .map(|(&a, &b)| (f64::from(a) - f64::from(b)).powi(2))
                    .sum::<f64>()
                    / h.0.len() as f64;
            let psnr = 10.0 * (255.0f64.powi(2) / mse.max(1e-9)).log10();
            assert!(psnr > 35.0, "{placement:?}: {psnr:.1} dB");
        }
    }
}

#[test]
fn a_damaged_frame_file_is_named_and_its_video_skipped() {
    use hpuload::source::FrameFolder;
    let dir = frame_folder();
    let bad = dir.path().join("b/v2/img_00002.jpg");
    std::fs::write(&bad, b"\xff\xd8 not the rest of a JPEG").unwrap();
    for backend in [hpuload::Backend::Cpu, hpuload::Backend::Auto] {
        let mut loader = Loader::builder(FrameFolder::open(dir.path(), 30.0).unwrap())
            .batch_size(3)
            .workers(1)
            .error_budget(1.0)
            .backend(backend)
            .pipeline(pipeline(TRAIN))
            .output(Dtype::U8, Layout::Nchw)
            // Every clip of 9 consecutive frames of a 10-frame video holds its frame 1.
            .video(clips(9, 1))
            .build()
            .unwrap();
        let batch = loader.epoch(0).next().unwrap().unwrap();
        assert_eq!(batch.images.shape(), &[3, 9, 3, 32, 32]);
        let skips = loader.report().skips;
        assert_eq!(skips.len(), 1, "{backend:?}: {skips:?}");
        assert!(skips[0].path.ends_with("b/v2"), "{:?}", skips[0]);
        assert!(
            skips[0].message.contains("img_00002.jpg"),
            "{}",
            skips[0].message
        );
    }
}

#[test]
fn torchvisions_windows_over_a_manifest_row_lie_in_its_segment() {
    // baseline.mp4: 16 frames at 25 fps. Row 0's segment [0.2, 0.4) s holds frames 5 to 9:
    // windows of 3 frames, 2 apart, are frames 5-7 and 7-9; row 1 (the whole video) gives 7.
    let dir = TempDir::new("video-manifest-windows");
    std::fs::copy(data().join("baseline.mp4"), dir.path().join("v.mp4")).unwrap();
    std::fs::write(
        dir.path().join("list.csv"),
        "path,label,start,end\nv.mp4,7,0.2,0.4\nv.mp4,3,,\n",
    )
    .unwrap();
    let manifest = hpuload::VideoManifest::open(dir.path().join("list.csv"), None).unwrap();
    let sampler = ClipSampler::Windows(hpuload::video::WindowClips {
        frames_per_clip: 3,
        step: 2,
        frame_rate: None,
        metadata: None,
        leave_unreadable: false,
    });
    let mut loader = Loader::builder(manifest)
        .batch_size(9)
        .workers(1)
        .pipeline(pipeline(
            "name = \"whole\"\n[[ops]]\nop = \"center_crop\"\nsize = [48, 64]\n",
        ))
        .output(Dtype::U8, Layout::Nhwc)
        .last_batch(hpuload::LastBatch::Partial)
        .video(VideoSpec {
            sampler,
            channels_first: false,
        })
        .build()
        .unwrap();
    assert_eq!(loader.dataset_len(), 2 + 7);
    let (got, labels, _, _) = host(&loader.epoch(0).next().unwrap().unwrap());
    assert_eq!(labels, [7, 7, 3, 3, 3, 3, 3, 3, 3]);
    let frames = |positions: &[usize]| {
        hpuload::video::read_frames(&dir.path().join("v.mp4"), positions)
            .unwrap()
            .rgb
    };
    let clip = 3 * 48 * 64 * 3;
    assert!(got[..clip] == frames(&[5, 6, 7])[..]);
    assert!(got[clip..2 * clip] == frames(&[7, 8, 9])[..]);
    assert!(got[2 * clip..3 * clip] == frames(&[0, 1, 2])[..]);
}

#[test]
fn damaged_slice_data_is_an_error_naming_the_frame_on_either_decoder_not_a_concealed_picture() {
    let dir = TempDir::new("video-slice");
    let path = dir.path().join("damaged.mp4");
    let mut bytes = std::fs::read(data().join("high_bframes.mp4")).unwrap();
    let index = VideoIndex::open(data().join("high_bframes.mp4")).unwrap();
    // The keyframe's last NAL unit (its slice): its payload scrambled, its length intact.
    let f = index.frames[0];
    let (mut at, end) = (f.offset as usize, (f.offset + u64::from(f.len)) as usize);
    let mut slice = (0, 0);
    while at < end {
        let n = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        slice = (at + 4, at + 4 + n);
        at += 4 + n;
    }
    assert_eq!(bytes[slice.0] & 0x1f, 5, "an IDR slice");
    for b in &mut bytes[slice.0 + 8..slice.1 - 8] {
        *b ^= 0x5a;
    }
    std::fs::write(&path, &bytes).unwrap();
    for err in errors_decoding(&path, &[0, 1, 2]) {
        assert!(err.contains("damaged.mp4"), "{err}");
        assert!(err.contains("frame 0 does not decode"), "{err}");
    }
}

/// The clips shown turned (`make_fixtures.py --turned`): `high_bframes.mp4` with display
/// matrices, and the quarter turns counterclockwise torchcodec gives each.
const TURNED: [(&str, u8); 4] = [
    ("turned_cw.mp4", 3),
    ("turned_half.mp4", 2),
    ("turned_ccw.mp4", 1),
    ("turned_movie.mp4", 1),
];

#[test]
fn a_display_matrix_turns_the_frames_by_ffmpegs_angle_rounded_as_torchcodec_rounds_it() {
    let want = expected();
    for (clip, turns) in TURNED {
        // FFmpeg's angle (PyAV's), rounded to a quarter turn: +90 counterclockwise.
        let degrees = want[clip]["rotation"].as_f64().unwrap();
        let rounded = ((degrees / 90.0).round() as i64).rem_euclid(4) as u8;
        assert_eq!(rounded, turns, "{clip}");
        let index = VideoIndex::open(data().join(clip)).unwrap();
        assert_eq!(index.display.turns, turns, "{clip}");
        assert!(index.display.matrix);
        assert_eq!(index.size, (96, 72), "{clip}: the coded size");
        let shown = if turns % 2 == 1 { (72, 96) } else { (96, 72) };
        assert_eq!(index.display_size(), shown, "{clip}");
        // The same pictures as the clip without a matrix, each turned as torch.rot90 turns it.
        let positions = [0, 7, 29];
        let upright =
            hpuload::video::read_frames(&data().join("high_bframes.mp4"), &positions).unwrap();
        let got = hpuload::video::read_frames(&data().join(clip), &positions).unwrap();
        assert_eq!((got.width, got.height), shown, "{clip}");
        let frame = upright.rgb.len() / positions.len();
        let mut turned = Vec::new();
        for (k, picture) in upright.rgb.chunks_exact(frame).enumerate() {
            hpuload::video::turn(picture, (96, 72), turns, &mut turned);
            assert!(
                got.rgb[k * frame..(k + 1) * frame] == turned[..],
                "{clip} frame {}",
                positions[k]
            );
        }
    }
    for clip in CLIPS.iter().chain(&MPEG4_CLIPS) {
        assert_eq!(want[clip]["rotation"].as_f64(), Some(0.0), "{clip}");
        let index = VideoIndex::open(data().join(clip)).unwrap();
        assert_eq!(index.display, hpuload::video::Display::default(), "{clip}");
    }
}

#[test]
fn a_video_shown_turned_gives_upright_clips_on_both_paths_and_draws_from_the_shown_size() {
    use hpuload::{Backend, Placement};
    let dir = class_folder(
        "turned-videos",
        &[("a", "turned_cw.mp4"), ("b", "turned_ccw.mp4")],
    );
    // Without a crop or resize, the clips are the frames as shown: 72 wide, 96 high.
    let batch = first_clips_as_decoded(dir.path()).next().unwrap().unwrap();
    assert_eq!(batch.images.shape(), &[2, 3, 96, 72, 3]);
    let (images, _, indices, _) = host(&batch);
    for (row, &i) in indices.iter().enumerate() {
        let clip = ["a/turned_cw.mp4", "b/turned_ccw.mp4"][i];
        let want = hpuload::video::read_frames(&dir.path().join(clip), &[0, 1, 2])
            .unwrap()
            .rgb;
        assert!(
            images[row * want.len()..(row + 1) * want.len()] == want[..],
            "{clip}"
        );
    }
    // Cropped and resized from the shown frame, the media engine's clips are the host's.
    let run = |backend| {
        let mut loader = Loader::builder(VideoFolder::open(dir.path()).unwrap())
            .batch_size(2)
            .workers(2)
            .seed(4)
            .backend(backend)
            .placement(Placement::Device)
            .pipeline(pipeline(TRAIN))
            .output(Dtype::U8, Layout::Nchw)
            .video(clips(4, 2))
            .build()
            .unwrap();
        let batches: Vec<_> = loader.epoch(0).map(|b| host(&b.unwrap()).0).collect();
        (batches, loader.report().hw_samples)
    };
    let (cpu, _) = run(Backend::Cpu);
    let (hw, on_engine) = run(Backend::Hw);
    assert_eq!(on_engine, 2);
    assert!(hw == cpu, "the engine's clips differ from the host's");
}

/// Clips whose SPS declares their colours (`make_fixtures.py --colours`), and one whose
/// container alone does (`colr`).
const TAGGED: [&str; 4] = [
    "bt709.mp4",
    "full_range.mp4",
    "full_range_bt709.mp4",
    "colr_only.mp4",
];

#[test]
fn a_video_declaring_bt709_or_full_range_converts_to_ffmpegs_rgb_bit_for_bit() {
    // FFmpeg tags each frame with the SPS's matrix and range (the container's where the SPS
    // is silent), and swscale converts by them
    // (torchcodec, PyAV and decord alike): `<clip>.rgb_0_5.bin` is PyAV's RGB of frames 0 and
    // 5. The untagged clips convert as before (BT.601, limited).
    let want = expected();
    for clip in TAGGED {
        let index = VideoIndex::open(data().join(clip)).unwrap();
        let matrix = want[clip]["colorspace"].as_u64().unwrap() as u8;
        let full = want[clip]["color_range"].as_u64() == Some(2);
        assert_eq!(
            colour::Conversion::of_video(&index),
            colour::Conversion::of(matrix, full),
            "{clip}"
        );
        assert_ne!(
            colour::Conversion::of_video(&index),
            colour::Conversion::DEFAULT
        );
        let rgb = hpuload::video::read_frames(&data().join(clip), &[0, 5])
            .unwrap()
            .rgb;
        let ffmpegs = std::fs::read(data().join(clip).with_extension("rgb_0_5.bin")).unwrap();
        assert!(rgb == ffmpegs, "{clip}: not FFmpeg's RGB");
    }
    for clip in CLIPS.iter().chain(&MPEG4_CLIPS) {
        let index = VideoIndex::open(data().join(clip)).unwrap();
        assert_eq!(want[clip]["color_range"].as_u64(), Some(0), "{clip}");
        assert_eq!(
            colour::Conversion::of_video(&index),
            colour::Conversion::DEFAULT,
            "{clip}"
        );
    }
}
