//! Hugging Face tables on arbitrary bytes: an Arrow IPC stream file (first byte even) or a
//! Parquet file (first byte odd), as `datasets` writes them. Opening must never panic or
//! abort; when it succeeds, every row must read as bytes or an error, an embedded row's bytes
//! must lie inside the file, and a Parquet file's block-shuffled order must be a permutation.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use hpuload::source::HfOptions;
use hpuload::{ArrowDataset, ParquetDataset, ParquetOptions, ReadMode, Source};
use libfuzzer_sys::fuzz_target;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("hpuload-fuzz-hf-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    })
}

fn read_all(source: &dyn Source, file_len: usize) {
    let mut buf = Vec::new();
    for i in 0..source.entries().len() {
        if let Ok(bytes) = source.read(i, ReadMode::Read, &mut buf) {
            assert!(bytes.len() <= file_len.max(1 << 20));
        }
        let mut slot = vec![0u8; 4096];
        let _ = source.read_into(i, ReadMode::Read, &mut slot);
    }
}

fuzz_target!(|data: &[u8]| {
    // libfuzzer-sys aborts on any panic from its hook, before unwinding. hpuload catches the
    // panics of the third-party decoders it runs on untrusted bytes and reports them as
    // errors, so a silent hook lets those be caught; a panic anywhere else still reaches
    // libfuzzer-sys's own catch and aborts.
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    let Some((&mode, bytes)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        let path = dir().join("t.arrow");
        std::fs::write(&path, bytes).unwrap();
        if let Ok(set) = ArrowDataset::open_files(vec![path], &HfOptions::default()) {
            read_all(&set, bytes.len());
        }
    } else {
        let path = dir().join("t.parquet");
        std::fs::write(&path, bytes).unwrap();
        let options = ParquetOptions {
            window_rows: 1 + usize::from(mode) % 7,
            ..ParquetOptions::default()
        };
        if let Ok(set) = ParquetDataset::open(&path.to_string_lossy(), &options) {
            let n = set.entries().len();
            let mut order = set.shuffled_order(1, 2).expect("a Parquet order");
            order.sort_unstable();
            assert!(order.iter().copied().eq(0..n as u32));
            set.plan_reads(&mut (0..n));
            read_all(&set, bytes.len());
        }
    }
});
