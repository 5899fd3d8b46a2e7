//! Segmentation mask PNGs on arbitrary bytes: decoding never panics, and a decoded mask has
//! one value per pixel; cut as a drawn resize, flips, padding and crop move it (parameters
//! from the first bytes, Pillow's or torch's nearest positions), every output value is one of
//! the mask's or the fill.
#![no_main]

use hpuload::augment::{segment, ResizedCrop};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&[a, b, c, d], png)) = data.split_first_chunk::<4>() else {
        return;
    };
    let Ok(mask) = segment::decode_mask(png) else {
        return;
    };
    assert_eq!(mask.values.len(), (mask.width * mask.height) as usize);
    let resized = (u32::from(a & 0x3f), u32::from(b & 0x3f));
    let out = (u32::from(c & 0x1f) + 1, u32::from(d & 0x1f) + 1);
    let at = (
        u32::from(c >> 5) % (resized.0.max(out.0) - out.0 + 1),
        u32::from(d >> 5) % (resized.1.max(out.1) - out.1 + 1),
    );
    let drawn = ResizedCrop {
        resized,
        at,
        hflip: a & 0x40 != 0,
        vflip: b & 0x40 != 0,
    };
    let mut dst = vec![0i64; (out.0 * out.1) as usize];
    let nearest = if a & 0x80 != 0 {
        segment::Nearest::Torch
    } else {
        segment::Nearest::Pillow
    };
    segment::cut_mask(&mask, &drawn, nearest, out, -1, &mut dst);
    let held: std::collections::HashSet<i64> = mask.values.iter().map(|&v| i64::from(v)).collect();
    assert!(dst.iter().all(|v| *v == -1 || held.contains(v)));
});
