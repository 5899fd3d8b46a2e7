//! The MP4 frame index on arbitrary bytes (seeded with a small H.264 movie with B-frames and an
//! edit list). Opening must never panic or abort; when it succeeds, every frame lies inside the
//! file and the index's queries answer. The same bytes in memory (a shard member read whole
//! from object storage) and inside a larger file (a member of a local tar shard) give the same
//! index, or fail alike; how it is shown and the colours it declares read without a panic.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use hpuload::video::VideoIndex;
use libfuzzer_sys::fuzz_target;

fn path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::temp_dir().join(format!("hpuload-fuzz-video-{}.mp4", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    std::fs::write(path(), data).unwrap();
    let opened = VideoIndex::open(path()).ok();
    let in_memory = VideoIndex::from_bytes(path(), data).ok();
    assert_eq!(opened, in_memory);
    let mut member = b"tar head".to_vec();
    member.extend_from_slice(data);
    member.extend_from_slice(b"next member");
    std::fs::write(path(), &member).unwrap();
    let file = std::fs::File::open(path()).unwrap();
    let spanned = VideoIndex::open_span(path(), &file, 8, data.len() as u64).ok();
    assert_eq!(opened, spanned);
    if let Some(index) = opened {
        for f in &index.frames {
            assert!(f.offset + u64::from(f.len) <= data.len() as u64);
        }
        // Every shown frame once, in presentation order (an edit list may leave some unshown).
        let order = index.presentation_order();
        assert_eq!(order.len(), index.frames.iter().filter(|f| f.shown).count());
        assert!(order
            .windows(2)
            .all(|w| index.frames[w[0]].pts <= index.frames[w[1]].pts));
        for i in 0..index.frames.len() {
            if let Some(k) = index.keyframe_before(i) {
                assert!(k <= i && index.frames[k].keyframe);
            }
        }
        let _ = index.duration_seconds();
        // The display and the colours it declares (the SPS's video signal type, the `colr`
        // box): read without a panic whatever the bytes.
        assert!(index.display.turns < 4);
        let (w, h) = index.display_size();
        assert_eq!(
            u64::from(w) * u64::from(h),
            u64::from(index.size.0) * u64::from(index.size.1)
        );
        let _ = hpuload::video::colour::Conversion::of_video(&index);
    }
});
