//! WebDataset shards on arbitrary bytes, as a tar file (first byte even) or as the sidecar
//! index of a small valid shard (first byte odd). Opening must never panic or abort; when it
//! succeeds, reading every sample must return bytes or an error, and the index written along
//! the way must give the same samples when the shard is opened again.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use hpuload::source::shards::index_path;
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

/// A valid two-sample shard, for index mode.
fn valid_shard() -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in [
        ("a.jpg", &b"\xff\xd8\xff\xd9"[..]),
        ("a.cls", b"1"),
        ("b.png", b"\x89PNG"),
        ("b.cls", b"2"),
    ] {
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
    if mode % 2 == 0 {
        std::fs::write(&shard, rest).unwrap();
        let _ = std::fs::remove_file(&idx);
    } else {
        std::fs::write(&shard, valid_shard()).unwrap();
        std::fs::write(&idx, rest).unwrap();
    }
    let spec = shard.to_str().unwrap();
    let Ok(first) = WebDataset::open(spec) else {
        return;
    };
    let mut buf = Vec::new();
    for i in 0..first.entries().len() {
        let _ = first.read(i, ReadMode::Read, &mut buf);
    }
    let again = WebDataset::open(spec).expect("a shard that opened once opens again");
    assert_eq!(again.entries(), first.entries());
});
