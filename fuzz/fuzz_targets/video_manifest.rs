//! The video CSV parser (`VideoManifest`) on arbitrary bytes: it must never panic, and an
//! error must name a line that exists (counted by line feeds, as the csv reader counts).
#![no_main]

use hpuload::VideoManifest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let lines = data.split(|&b| b == b'\n').count();
    match VideoManifest::parse(data) {
        Ok((rows, classes)) => {
            assert!(rows <= lines, "more rows than lines");
            assert!(classes <= rows, "more classes than rows");
        }
        Err((line, reason)) => {
            assert!(
                line >= 1 && line <= lines,
                "error on line {line} of {lines}"
            );
            assert!(!reason.is_empty());
        }
    }
});
