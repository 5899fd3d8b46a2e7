//! The manifest parser on arbitrary bytes: it must never panic, every entry it returns must
//! come from a non-comment line, and an error must name a line that exists.
#![no_main]

use std::path::Path;

use hpuload::Manifest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let base = Path::new("/data/root");
    match Manifest::parse(data, base) {
        Ok(entries) => {
            let lines = data.split(|&b| b == b'\n').count();
            assert!(entries.len() <= lines, "more entries than lines");
            for e in &entries {
                assert!(e.path.starts_with(base) || e.path.is_absolute());
            }
        }
        Err((line, reason)) => {
            let lines = data.split(|&b| b == b'\n').count();
            assert!(
                line >= 1 && line <= lines,
                "error on line {line} of {lines}"
            );
            assert!(!reason.is_empty());
        }
    }
});
