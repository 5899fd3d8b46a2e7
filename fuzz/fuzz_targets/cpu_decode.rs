//! The CPU decoder (baseline JPEG by our decoder, other JPEGs and damaged ones by zune-jpeg, the
//! `image` crate for PNG and WebP) on arbitrary bytes, reading colour and reading grey
//! (`set_luma`): the one-call decode, which parses the headers once, must agree with probe then
//! decode_into, which parse them twice: the same verdict, the same error reason, the same pixels.
//! A grey read (colour PNGs by OpenCV's weights) that succeeds gives equal channels. Neither
//! may panic or use unbounded memory.
#![no_main]

use hpuload_decoders::{CpuDecoder, Decode, Limits};
use libfuzzer_sys::fuzz_target;

/// Decodes `file` in one call and in two steps, checks they agree and returns the pixels.
fn agreed(decoder: &mut CpuDecoder, file: &[u8]) -> Option<Vec<u8>> {
    let mut once = Vec::new();
    let one_call = decoder.decode(file, &mut once);
    let two_step = decoder.probe(file).and_then(|info| {
        let mut out = vec![0u8; info.rgb_len()];
        decoder
            .decode_into(file, &info, &mut out)
            .map(|()| (info, out))
    });
    match (one_call, two_step) {
        (Ok(info), Ok((probed, pixels))) => {
            assert_eq!(info, probed);
            assert_eq!(&once[..info.rgb_len()], &pixels[..], "pixels differ");
            Some(pixels)
        }
        (Err(a), Err(b)) => {
            assert_eq!(a.reason(), b.reason(), "{a} / {b}");
            None
        }
        (a, b) => panic!(
            "one call {:?}, two steps {:?}",
            a.map(|_| ()),
            b.map(|_| ())
        ),
    }
}

fuzz_target!(|file: &[u8]| {
    // A small pixel limit keeps each run fast; the limit logic itself is what is exercised.
    let mut limits = Limits::default();
    limits.max_pixels = 4_000_000;
    let mut colour = CpuDecoder::with_limits(limits);
    agreed(&mut colour, file);
    let mut grey = CpuDecoder::with_limits(limits);
    grey.set_luma(true);
    grey.set_png_grey(Some([9797, 19234, 3737]));
    if let Some(pixels) = agreed(&mut grey, file) {
        for px in pixels.chunks_exact(3) {
            assert!(px[0] == px[1] && px[1] == px[2], "a grey read gave colour");
        }
    }
});
