//! Segmentation masks on arbitrary bytes, read as a PNG (of indices and levels, or of colours
//! made their indices in a table) and as a GIF made grey or as stored: decoding never
//! panics, and a decoded mask has one value per pixel; cut as a drawn resize, flips, padding
//! and crop move it (flipped whole first, parameters from the first bytes, Pillow's or torch's
//! nearest positions, or blended as Pillow's bilinear resize blends a grey mask),
//! then moved by flips, a quarter turn and a nearest warp (of either kernel, any border),
//! every output value is one of the mask's or the fill.
#![no_main]

use hpuload::augment::{segment, Cv2Border, ResizedCrop};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&[a, b, c, d, e], bytes)) = data.split_first_chunk::<5>() else {
        return;
    };
    let decoded = if e & 0x80 != 0 {
        let grey = segment::decode_grey_gif(bytes);
        // The indices as stored are the same frame, and decode alike wherever it has a palette.
        let indices = segment::decode_gif_indices(bytes);
        if let (Ok(grey), Ok(indices)) = (&grey, &indices) {
            assert_eq!(grey.values.len(), indices.values.len());
        }
        assert!(grey.is_err() || indices.is_ok());
        if e & 0x20 != 0 {
            indices
        } else {
            grey
        }
    } else if e & 0x20 != 0 {
        // A colour mask: each value the index of its colour among those given (greys here, so
        // that grey and palette PNGs meet them too), or the other colours' value.
        let colours: Vec<u32> = [a, b, c, d].iter().map(|&x| u32::from(x) * 0x01_01_01).collect();
        let decoded = segment::decode_colour_mask(bytes, &colours);
        if let Ok(m) = &decoded {
            assert!(m
                .values
                .iter()
                .all(|&v| usize::from(v) < colours.len() || v == segment::OTHER_COLOUR));
        }
        decoded
    } else {
        segment::decode_mask(bytes)
    };
    let Ok(mut mask) = decoded else {
        return;
    };
    assert_eq!(mask.values.len(), (mask.width * mask.height) as usize);
    // Flipped whole first (a flip before the crop), as drawn: twice is the mask itself.
    let first = (c & 1 != 0, d & 1 != 0);
    let stored = mask.values.clone();
    mask.flip(first);
    let mut again = mask.clone();
    again.flip(first);
    assert_eq!(again.values, stored);
    let resized = (u32::from(a & 0x3f), u32::from(b & 0x3f));
    let side = u32::from(c & 0x1f) + 1;
    // A square output when the moves turn it.
    let out = if e & 0x40 != 0 {
        (side, side)
    } else {
        (side, u32::from(d & 0x1f) + 1)
    };
    let at = (
        u32::from(c >> 5) % (resized.0.max(out.0) - out.0 + 1),
        u32::from(d >> 5) % (resized.1.max(out.1) - out.1 + 1),
    );
    let drawn = ResizedCrop {
        resized,
        at,
        hflip: a & 0x40 != 0,
        vflip: b & 0x40 != 0,
        before: (0, 0),
    };
    if resized.0 == 0 || resized.1 == 0 {
        return;
    }
    let mut dst = vec![0i64; (out.0 * out.1) as usize];
    let nearest = if a & 0x80 != 0 {
        segment::Nearest::Torch
    } else {
        segment::Nearest::Pillow
    };
    segment::cut_mask(&mask, &drawn, nearest, out, -1, (b & 0x80 != 0, false), &mut dst);
    // Blended as Pillow's bilinear resize of a grey image: the size asked, each value between
    // the mask's least and greatest (the triangle's weights are positive); refused only for
    // values past a byte.
    match mask.pillow_bilinear(resized) {
        Ok(blended) => {
            assert_eq!(blended.values.len(), (resized.0 * resized.1) as usize);
            let least = mask.values.iter().min().copied().unwrap_or(0);
            let most = mask.values.iter().max().copied().unwrap_or(0);
            assert!(blended.values.iter().all(|v| (least..=most).contains(v)));
        }
        Err(_) => assert!(mask.values.is_empty() || mask.values.iter().any(|&v| v > 255)),
    }
    // By Pillow's other filters (Lanczos, bicubic, box, Hamming): the size asked, each value
    // a byte (the lobes' overshoot clipped), refused as bilinear is.
    match mask.pillow_resized(resized, 1 + (e % 5)) {
        Ok(blended) => {
            assert_eq!(blended.values.len(), (resized.0 * resized.1) as usize);
            assert!(blended.values.iter().all(|&v| v <= 255));
        }
        Err(_) => assert!(mask.values.is_empty() || mask.values.iter().any(|&v| v > 255)),
    }
    let angle = f64::from(e & 0x3f) / 10.0;
    let (sin, cos) = angle.sin_cos();
    let inverse = [cos, sin, f64::from(c) - 100.0, -sin, cos, f64::from(d) - 100.0];
    let border = [
        Cv2Border::Constant,
        Cv2Border::Replicate,
        Cv2Border::Reflect,
        Cv2Border::Reflect101,
    ][usize::from(e & 3)];
    let mut moves = vec![
        segment::MaskMove::VerticalFlip,
        segment::MaskMove::Warp {
            inverse: inverse.map(|v| v as f32),
            border,
        },
        segment::MaskMove::FixedPointWarp { inverse, border },
    ];
    if out.0 == out.1 {
        moves.extend([segment::MaskMove::Rot90(1 + e % 3), segment::MaskMove::Transpose]);
    }
    segment::move_mask(&mut dst, (out.0 as usize, out.1 as usize), &moves, -1);
    let held: std::collections::HashSet<i64> = mask.values.iter().map(|&v| i64::from(v)).collect();
    assert!(dst.iter().all(|v| *v == -1 || held.contains(v)));
});
