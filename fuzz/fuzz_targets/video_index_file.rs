//! A loader's video index file on arbitrary bytes: reading it must never panic, abort or
//! reserve memory the bytes do not justify (every count is checked against what is left).
//! A file with the right magic and checksum is made from the fuzzer's bytes half the time, so
//! the entries' parsing is reached and not only the checksum's refusal.
#![no_main]

use hpuload::video::{parse_index_file, INDEX_MAGIC};
use libfuzzer_sys::fuzz_target;

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fuzz_target!(|data: &[u8]| {
    let _ = parse_index_file(data);
    let mut file = INDEX_MAGIC.to_vec();
    file.extend_from_slice(data);
    file.extend_from_slice(&fnv1a(data).to_le_bytes());
    let _ = parse_index_file(&file);
});
