//! The EXIF orientation readers (Pillow's and torchvision's) on arbitrary bytes (and on them
//! behind a JPEG's, a PNG's and a WebP's signature, so that their walks of each format's
//! segments and of the Exif directory are reached): they must never panic, and what it reads must turn an image into one of the
//! turned size with every pixel moved, none made up.
#![no_main]

use hpuload::decoders::orientation::{orientation, torchvision_orientation};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let signatures: [&[u8]; 5] = [
        b"",
        b"\xff\xd8",
        b"\xff\xd8\xff",
        b"\x89PNG\r\n\x1a\n",
        b"RIFF\0\0\0\0WEBP",
    ];
    for signature in signatures {
        let bytes = [signature, data].concat();
        for turn in [orientation(&bytes), torchvision_orientation(&bytes)] {
            // A 3x2 image of distinct pixels keeps its pixels, moved.
            let src: Vec<u8> = (0..6).collect();
            let mut dst = vec![0; 6];
            turn.turn(&src, 3, 2, 1, &mut dst);
            let mut sorted = dst.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, src);
            let (w, h) = turn.turned_size(3, 2);
            assert_eq!(w * h, 6);
        }
    }
});
