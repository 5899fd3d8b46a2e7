//! The H.264 decode path on arbitrary bytes (seeded with the integration tests' x264 clips): an
//! MP4 that indexes is decoded whole through OpenH264, and through FFmpeg's libavcodec when
//! the machine has one (`HPULOAD_LIBAVCODEC` as for the loader). Neither may panic, abort or
//! hang: a frame that does not decode is an error naming it. When both decoders decode every
//! frame, the same frames come out. (In the same order and with the same planes for a
//! conforming stream, which the integration tests check; damage that neither detects may
//! decode differently.)
#![no_main]

use hpuload::video::{libavcodec, DecodePlan, Picture, VideoDecoder, VideoIndex};
use libfuzzer_sys::fuzz_target;

/// Each picture's frame and a hash of its planes, in the order they came out; `None` for an
/// error (which must say something).
fn decode(
    index: &VideoIndex,
    data: &[u8],
    lib: Option<&'static hpuload::video::Libav>,
) -> Option<Vec<(usize, u64)>> {
    let mut decoder = VideoDecoder::with_library(index, lib).ok()?;
    let all: Vec<usize> = (0..index.frames.len()).collect();
    let plan = DecodePlan::new(index, &all);
    let mut out = Vec::new();
    let mut emit = |p: Picture<'_>| {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let (cw, ch) = (p.width.div_ceil(2), p.height.div_ceil(2));
        let rows = (0..p.height)
            .map(|r| &p.y[r * p.y_stride..][..p.width])
            .chain((0..ch).map(|r| &p.u[r * p.uv_stride..][..cw]))
            .chain((0..ch).map(|r| &p.v[r * p.uv_stride..][..cw]));
        for b in rows.flatten() {
            h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
        out.push((p.frame, h));
    };
    let mut read = |at: u64, buf: &mut [u8]| {
        let at = at as usize;
        buf.copy_from_slice(&data[at..at + buf.len()]);
        Ok(())
    };
    match decoder.decode_from(&mut read, index, &plan, &mut emit) {
        Ok(_) => Some(out),
        Err(e) => {
            assert!(!e.to_string().is_empty());
            None
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(index) = VideoIndex::from_bytes("fuzz.mp4", data) else {
        return;
    };
    // Small pictures and few frames: the decoders' own speed is not what is fuzzed.
    if index.frames.len() > 64 || index.size.0 > 512 || index.size.1 > 512 {
        return;
    }
    let openh264 = decode(&index, data, None);
    if let Some(lib) = libavcodec() {
        let ffmpeg = decode(&index, data, Some(lib));
        if let (Some(a), Some(b)) = (&openh264, &ffmpeg) {
            // Damage neither decoder detects may decode to different pixels (the standard
            // defines only conforming streams' output: fuzzing found such a B-frame), or come
            // out in another order (their reordering differs when the stream's picture order
            // disagrees with the container's; hpuload places each picture by its frame, not
            // by its order), but the same frames come out.
            let frames = |d: &[(usize, u64)]| {
                let mut f: Vec<usize> = d.iter().map(|f| f.0).collect();
                f.sort_unstable();
                f
            };
            assert_eq!(
                frames(a),
                frames(b),
                "OpenH264 and {} differ",
                lib.describe()
            );
        }
    }
});
