//! COCO's compressed RLE `counts` strings (a segmentation in an annotation file, or what
//! pycocotools writes) on arbitrary bytes: decoding never panics, and a mask is only written
//! when the runs fit it, with nothing but 0 and 1; the mask resized, cut and placed as the
//! lsj augmentation moves masks keeps only 0 and 1, and zeros outside the cut. The strings
//! split at `,` into objects (`;` closing one, classes from the header bytes) make a
//! segmentation reference's semantic mask that holds only 0, their classes and 255, or an
//! error.
#![no_main]

use hpuload::source::coco::rle;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&[side, a, b, c], counts)) = data.split_first_chunk::<4>() else {
        return;
    };
    let (height, width) = (usize::from(side & 0x0f) + 1, usize::from(side >> 4) + 1);
    let objects: Vec<(u8, Vec<Vec<u8>>)> = counts
        .split(|&b| b == b';')
        .enumerate()
        .map(|(k, object)| {
            let class = [a, b, c][k % 3];
            (
                class,
                object.split(|&b| b == b',').map(<[u8]>::to_vec).collect(),
            )
        })
        .collect();
    if let Ok(m) =
        hpuload::augment::segment::coco_semantic_mask(height as u32, width as u32, &objects)
    {
        assert_eq!(m.values.len(), height * width);
        let classes = [0, 255, u16::from(a), u16::from(b), u16::from(c)];
        assert!(m.values.iter().all(|v| classes.contains(v)));
    }
    let Ok(runs) = rle::counts(counts) else {
        return;
    };
    let mut mask = vec![0u8; height * width];
    if rle::union_into(&runs, height, width, side & 1 == 1, &mut mask).is_err() {
        return;
    }
    assert!(runs.iter().sum::<u64>() <= (height * width) as u64);
    assert!(mask.iter().all(|&v| v <= 1));
    // A placement drawn from the next bytes, always a valid one.
    let resized = (usize::from(a & 0x1f) + 1, usize::from(b & 0x1f) + 1);
    let at = (
        usize::from(a >> 5) % resized.0,
        usize::from(b >> 5) % resized.1,
    );
    let content = (
        (resized.0 - at.0).min(usize::from(c & 0x0f) + 1),
        (resized.1 - at.1).min(usize::from(c >> 4) + 1),
    );
    let size = (
        content.0 + usize::from(c & 3),
        content.1 + usize::from(c >> 6),
    );
    let placement = rle::Placement {
        resized,
        at,
        content,
        size,
    };
    let mut out = vec![0u8; size.0 * size.1];
    rle::resize_cut_place(&mask, (height, width), &placement, side & 2 == 2, &mut out);
    assert!(out.iter().all(|&v| v <= 1));
    if side & 2 == 0 {
        for (r, row) in out.chunks_exact(size.1).enumerate() {
            assert!(r < content.0 || row.iter().all(|&v| v == 0));
            assert!(row[content.1..].iter().all(|&v| v == 0));
        }
    }
});
