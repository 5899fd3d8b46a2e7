//! The COCO annotation parser on arbitrary bytes, with each option: it must never panic, an
//! error must name the annotation file, and a dataset it returns must hold consistent objects
//! (boxes, labels, iscrowd and area per object; a label per category under the contiguous
//! mapping).
#![no_main]

use hpuload::source::coco::{Categories, EmptyImages};
use hpuload::{CocoDataset, CocoOptions, Error, Source};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, json)) = data.split_first() else {
        return;
    };
    let options = CocoOptions {
        empty: if flags & 1 == 0 {
            EmptyImages::Keep
        } else {
            EmptyImages::Drop
        },
        categories: if flags & 2 == 0 {
            Categories::Raw
        } else {
            Categories::Contiguous
        },
        images: (flags & 4 != 0).then(|| vec![1, 2, 3, -1]),
        ..CocoOptions::default()
    };
    match CocoDataset::from_json("instances.json", json, "/images", &options) {
        Ok(set) => {
            let mut objects = 0;
            for i in 0..set.entries().len() {
                let o = set.objects(i);
                assert_eq!(o.boxes.len(), o.labels.len());
                assert_eq!(o.boxes.len(), o.iscrowd.len());
                assert_eq!(o.boxes.len(), o.area.len());
                assert_eq!(set.entries()[i].label, o.boxes.len() as i64);
                if options.categories == Categories::Contiguous {
                    let classes = set.classes().len() as i64;
                    assert!(o.labels.iter().all(|&l| l >= 1 && l < classes));
                }
                objects += o.boxes.len();
            }
            assert_eq!(objects, set.object_count());
        }
        Err(Error::Format { path, reason }) => {
            assert_eq!(path, std::path::Path::new("instances.json"));
            assert!(!reason.is_empty());
        }
        Err(Error::EmptyDataset { .. }) => {}
        Err(e) => panic!("unexpected error kind: {e}"),
    }
});
