//! COCO's compressed RLE `counts` strings (a segmentation in an annotation file, or what
//! pycocotools writes) on arbitrary bytes: decoding never panics, and a mask is only written
//! when the runs fit it, with nothing but 0 and 1.
#![no_main]

use hpuload::source::coco::rle;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&side, counts)) = data.split_first() else {
        return;
    };
    let (height, width) = (usize::from(side & 0x0f) + 1, usize::from(side >> 4) + 1);
    let Ok(runs) = rle::counts(counts) else {
        return;
    };
    let mut mask = vec![0u8; height * width];
    if rle::union_into(&runs, height, width, side & 1 == 1, &mut mask).is_ok() {
        assert!(runs.iter().sum::<u64>() <= (height * width) as u64);
        assert!(mask.iter().all(|&v| v <= 1));
    }
});
