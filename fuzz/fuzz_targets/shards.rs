//! WebDataset shards on arbitrary bytes, as a tar file (first byte's bit 0 clear) or as the
//! sidecar index of a small valid shard (bit 0 set); bit 1 opens the shard as one of videos
//! rather than images, bit 2 without labels. Opening must never panic or abort; when it
//! succeeds, reading every sample must return bytes or an error, and the index written along
//! the way must give the same samples when the shard is opened again.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use hpuload::source::shards::{index_path, Media, ShardOptions};
use hpuload::{ReadMode, Source, WebDataset};
use libfuzzer_sys::fuzz_target;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("hpuload-fuzz-shards-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    })
}

/// A valid two-sample shard of images or of videos, for index mode.
fn valid_shard(media: Media) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let (first, second) = match media {
        Media::Images => (
            ("a.jpg", &b"\xff\xd8\xff\xd9"[..]),
            ("b.png", &b"\x89PNG"[..]),
        ),
        Media::Videos => (
            ("a.mp4", &b"\0\0\0\x08ftyp"[..]),
            ("b.mov", &b"\0\0\0\x08moov"[..]),
        ),
    };
    for (name, data) in [first, ("a.cls", b"1"), second, ("b.cls", b"2")] {
        let mut h = tar::Header::new_ustar();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, name, data).unwrap();
    }
    b.into_inner().unwrap()
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let shard = dir().join("s.tar");
    let idx = index_path(&shard);
    let options = ShardOptions {
        media: if mode & 2 == 0 {
            Media::Images
        } else {
            Media::Videos
        },
        label_field: if mode & 4 == 0 { "cls" } else { "" }.into(),
        ..ShardOptions::default()
    };
    if mode & 1 == 0 {
        std::fs::write(&shard, rest).unwrap();
        let _ = std::fs::remove_file(&idx);
    } else {
        std::fs::write(&shard, valid_shard(options.media)).unwrap();
        std::fs::write(&idx, rest).unwrap();
    }
    let spec = shard.to_str().unwrap();
    let Ok(first) = WebDataset::open_with(spec, &options) else {
        return;
    };
    let mut buf = Vec::new();
    for i in 0..first.entries().len() {
        let _ = first.read(i, ReadMode::Read, &mut buf);
        // Where a video's bytes lie in its shard, as the loader finds them.
        let _ = first.span(i);
    }
    let again =
        WebDataset::open_with(spec, &options).expect("a shard that opened once opens again");
    assert_eq!(again.entries(), first.entries());
});
