//! The MP4 frame index on arbitrary bytes (seeded with a small H.264 movie with B-frames and an
//! edit list). Opening must never panic or abort; when it succeeds, every frame lies inside the
//! file and the index's queries answer.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use hpuload::video::VideoIndex;
use libfuzzer_sys::fuzz_target;

fn path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| std::env::temp_dir().join(format!("hpuload-fuzz-video-{}.mp4", std::process::id())))
}

fuzz_target!(|data: &[u8]| {
    std::fs::write(path(), data).unwrap();
    if let Ok(index) = VideoIndex::open(path()) {
        for f in &index.frames {
            assert!(f.offset + u64::from(f.len) <= data.len() as u64);
        }
        let order = index.presentation_order();
        assert_eq!(order.len(), index.frames.len());
        for i in 0..index.frames.len() {
            if let Some(k) = index.keyframe_before(i) {
                assert!(k <= i && index.frames[k].keyframe);
            }
        }
        let _ = index.duration_seconds();
    }
});
