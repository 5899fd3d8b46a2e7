//! Detection end to end: a COCO annotation file over real JPEGs, torchvision's SSD preset with
//! a fixed resize, batches with padded target records.

use crate::common;
use std::path::Path;

use crate::common::TempDir;
use hpuload::{
    pipelines, Backend, CocoDataset, CocoOptions, Dtype, Layout, Loader, Placement, Source,
    TargetLayout,
};

/// A COCO file over `images` (an ImageFolder): per image, one box covering the whole image
/// (category 1) and one in its top-left quarter (category 2).
fn coco_over(images: &Path, out: &Path) {
    let folder = hpuload::ImageFolder::open(images).unwrap();
    let mut imgs = Vec::new();
    let mut anns = Vec::new();
    for (k, e) in folder.entries().iter().enumerate() {
        let (w, h) = image::image_dimensions(&e.path).unwrap();
        let id = k as i64 * 3 + 1;
        let name = e.path.strip_prefix(images).unwrap().to_string_lossy();
        imgs.push(format!(
            r#"{{"id": {id}, "file_name": "{name}", "width": {w}, "height": {h}}}"#
        ));
        anns.push(format!(
            r#"{{"id": {}, "image_id": {id}, "category_id": 1, "bbox": [0, 0, {w}, {h}], "iscrowd": 0}}"#,
            2 * k
        ));
        anns.push(format!(
            r#"{{"id": {}, "image_id": {id}, "category_id": 2, "bbox": [1, 1, {}, {}], "iscrowd": 0}}"#,
            2 * k + 1,
            w / 2,
            h / 2
        ));
    }
    let json = format!(
        r#"{{"images": [{}], "annotations": [{}], "categories": [{{"id": 1, "name": "all"}}, {{"id": 2, "name": "corner"}}]}}"#,
        imgs.join(","),
        anns.join(",")
    );
    std::fs::write(out, json).unwrap();
}

/// `n` generated images and a COCO file over them ([`coco_over`]): (images, the folder that
/// holds the file, the file).
fn coco_set(tag: &str, n: usize) -> (TempDir, TempDir, std::path::PathBuf) {
    let images = common::dataset(tag, n);
    let dir = TempDir::new(&format!("{tag}-json"));
    let annotations = dir.path().join("instances.json");
    coco_over(images.path(), &annotations);
    (images, dir, annotations)
}

/// A host-placed u8 loader of batches of 4 over the COCO set, at most 8 boxes per image.
fn coco_builder(
    images: &Path,
    annotations: &Path,
    pipeline: hpuload::Pipeline,
) -> hpuload::LoaderBuilder {
    let set = CocoDataset::open(annotations, images, &CocoOptions::default()).unwrap();
    builder_over(set, pipeline)
}

/// A host-placed loader of batches of 4 over `set`, at most 8 boxes per image.
fn builder_over(set: CocoDataset, pipeline: hpuload::Pipeline) -> hpuload::LoaderBuilder {
    Loader::builder(set)
        .pipeline(pipeline)
        .batch_size(4)
        .placement(Placement::Host)
        .max_boxes(8)
}

/// Epoch 0 of `builder` with 2 workers, u8 NHWC, and the report.
fn epoch_of(builder: hpuload::LoaderBuilder) -> (HostEpoch, hpuload::Report) {
    let mut l = builder
        .workers(2)
        .output(Dtype::U8, Layout::Nhwc)
        .build()
        .unwrap();
    let batches = host_epoch(&mut l, 0);
    (batches, l.report())
}

fn loader(images: &Path, annotations: &Path, workers: usize) -> Loader {
    coco_builder(
        images,
        annotations,
        pipelines::builtin("ssd300_train").unwrap(),
    )
    .shuffle(5)
    .workers(workers)
    .output(Dtype::U8, Layout::Nchw)
    .build()
    .unwrap()
}

#[test]
fn ssd_batches_hold_boxes_that_still_enclose_their_objects() {
    let (images, _dir, annotations) = coco_set("det-enclose", 24);
    let mut loader = loader(images.path(), &annotations, 2);
    let layout = TargetLayout { max_boxes: 8 };
    let fill = [123u8, 117, 104];
    let mut boxes_seen = 0;
    for batch in loader.epoch(0) {
        let batch = batch.unwrap();
        assert_eq!(batch.images.shape(), [4, 3, 300, 300]);
        assert_eq!(batch.labels.shape(), [4, layout.bytes()]);
        let pixels = batch.images.to_host().unwrap();
        let records = batch.labels.to_host().unwrap();
        for (s, record) in records.chunks(layout.bytes()).enumerate() {
            let t = layout.read(record);
            assert!(t.image_id > 0 && t.image_id % 3 == 1, "{t:?}");
            assert_eq!(t.boxes.len(), t.labels.len());
            for (b, &l) in t.boxes.iter().zip(&t.labels) {
                assert!(l == 1 || l == 2);
                assert!(b[0] >= 0.0 && b[1] >= 0.0 && b[2] <= 300.0 && b[3] <= 300.0);
                assert!(
                    b[2] - b[0] >= 1.0 && b[3] - b[1] >= 1.0,
                    "{b:?} is sanitized"
                );
                boxes_seen += 1;
            }
            // The whole-image box, when kept, encloses every pixel that is not the fill: the
            // image was moved, cropped, flipped and resized with it.
            let Some(whole) = t.labels.iter().position(|&l| l == 1) else {
                continue;
            };
            let [x1, y1, x2, y2] = t.boxes[whole];
            let plane = 300 * 300;
            let sample = &pixels[s * 3 * plane..(s + 1) * 3 * plane];
            let margin = 8.0;
            for y in 0..300 {
                for x in 0..300 {
                    let (fx, fy) = (x as f32 + 0.5, y as f32 + 0.5);
                    let outside = fx < x1 - margin
                        || fx > x2 + margin
                        || fy < y1 - margin
                        || fy > y2 + margin;
                    if outside {
                        let px: Vec<u8> = (0..3).map(|c| sample[c * plane + y * 300 + x]).collect();
                        assert_eq!(
                            px, fill,
                            "sample {s} pixel ({x}, {y}) outside {:?}",
                            t.boxes[whole]
                        );
                    }
                }
            }
        }
    }
    assert!(boxes_seen > 24, "{boxes_seen}");
}

#[test]
fn detection_batches_are_the_same_with_any_worker_count() {
    let (images, _dir, annotations) = coco_set("det-workers", 12);
    let run = |workers| host_epoch(&mut loader(images.path(), &annotations, workers), 1);
    assert_eq!(run(1), run(2));
}

#[test]
fn a_detection_pipeline_without_boxes_is_refused_and_the_ssd_preset_runs_on_the_engine_only() {
    let images = common::dataset("det-refuse", 4);
    let e = Loader::builder(hpuload::ImageFolder::open(images.path()).unwrap())
        .pipeline(pipelines::builtin("ssd300_train").unwrap())
        .build()
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("needs a dataset with boxes"), "{e}");
    let dir = TempDir::new("det-refuse-json");
    let annotations = dir.path().join("instances.json");
    coco_over(images.path(), &annotations);
    let open = || CocoDataset::open(&annotations, images.path(), &CocoOptions::default()).unwrap();
    // The engine runs the SSD preset's photometric steps and zoom-out fill too.
    let mut hw = Loader::builder(open())
        .pipeline(pipelines::builtin("ssd300_train").unwrap())
        .backend(Backend::Hw)
        .placement(Placement::Host)
        .batch_size(4)
        .build()
        .unwrap();
    for batch in hw.epoch(0) {
        batch.unwrap();
    }
    assert_eq!(hw.report().hw_samples, 4);
}

#[test]
fn a_pixel_moving_op_after_the_resize_of_a_detection_pipeline_is_refused() {
    let text = r#"
        name = "late-flip"
        [[ops]]
        op = "random_iou_crop"
        [[ops]]
        op = "resize"
        size = [64, 64]
        [[ops]]
        op = "random_horizontal_flip"
    "#;
    let (images, _dir, annotations) = coco_set("det-late-flip", 4);
    let set = CocoDataset::open(&annotations, images.path(), &CocoOptions::default()).unwrap();
    let e = Loader::builder(set)
        .pipeline(hpuload::Pipeline::from_toml(text, "late-flip").unwrap())
        .build()
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("random_horizontal_flip after the geometry of a detection pipeline would move pixels without their boxes"), "{e}");
}

#[test]
fn preview_draws_each_kept_box_outline_in_its_class_colour() {
    let (images, dir, annotations) = coco_set("det-preview", 4);
    let png = dir.path().join("sheet.png");
    let code = hpuload::run_cli(
        [
            "hpuload",
            "preview",
            "--coco",
            annotations.to_str().unwrap(),
            "--data",
            images.path().to_str().unwrap(),
            "--pipeline",
            "ssd300_train",
            "--batch",
            "4",
            "--out",
            png.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec(),
    );
    assert_eq!(code, 0);
    let sheet = image::open(&png).unwrap().to_rgb8();
    // Every image has a box around all of it (class 1, drawn green): after the zoom-out, crop
    // and resize it still encloses the image, so each cell shows a long green edge.
    let green = [64, 255, 64];
    let longest_run = |y: u32| {
        let (mut best, mut run) = (0, 0);
        for x in 0..sheet.width() {
            run = if sheet.get_pixel(x, y).0 == green {
                run + 1
            } else {
                0
            };
            best = best.max(run);
        }
        best
    };
    let rows_with_edges = (0..sheet.height())
        .filter(|&y| longest_run(y) >= 30)
        .count();
    assert!(
        rows_with_edges >= 4,
        "{rows_with_edges} rows with a box edge"
    );
}

/// SSDlite's training geometry (the reference's `ssdlite` preset) with a fixed resize: every
/// window is a region of the image, so the media engine can decode it.
fn ssdlite(size: u32) -> hpuload::Pipeline {
    hpuload::Pipeline::from_toml(
        &format!(
            r#"
            name = "ssdlite"
            [[ops]]
            op = "random_iou_crop"
            [[ops]]
            op = "random_horizontal_flip"
            [[ops]]
            op = "resize"
            size = [{size}, {size}]
            [[ops]]
            op = "sanitize_bounding_boxes"
            "#
        ),
        "ssdlite",
    )
    .unwrap()
}

/// Per batch: its images (u8 NHWC) and its target records.
type HostEpoch = Vec<(Vec<u8>, Vec<u8>)>;

/// Epoch `epoch` of `l`, on the host.
fn host_epoch(l: &mut Loader, epoch: u64) -> HostEpoch {
    l.epoch(epoch)
        .map(|b| {
            let b = b.unwrap();
            (b.images.to_host().unwrap(), b.labels.to_host().unwrap())
        })
        .collect()
}

/// One epoch's images (u8 NHWC) and target records on `backend`, with the report.
fn detection_epoch(
    images: &Path,
    annotations: &Path,
    pipeline: hpuload::Pipeline,
    backend: Backend,
) -> (HostEpoch, hpuload::Report) {
    epoch_of(
        coco_builder(images, annotations, pipeline)
            .shuffle(7)
            .backend(backend),
    )
}

#[test]
fn the_engine_decodes_detection_windows_inside_the_image_with_the_cpu_paths_boxes() {
    let (images, _dir, annotations) = coco_set("det-engine", 12);
    let (hw, hw_report) = detection_epoch(images.path(), &annotations, ssdlite(160), Backend::Auto);
    let (cpu, cpu_report) =
        detection_epoch(images.path(), &annotations, ssdlite(160), Backend::Cpu);
    assert_eq!(
        hw_report.hw_samples, hw_report.samples_loaded,
        "no fill, no pre-geometry ops: all on the engine"
    );
    assert_eq!(cpu_report.hw_samples, 0);
    let sample = 160 * 160 * 3;
    let mut worst = f64::INFINITY;
    for ((hi, ht), (ci, ct)) in hw.iter().zip(&cpu) {
        assert_eq!(ht, ct, "the same target records on both paths");
        for (a, b) in hi.chunks(sample).zip(ci.chunks(sample)) {
            worst = worst.min(hpuload::decoders::testing::psnr(a, b));
        }
    }
    // As for classification with DCT scaling (tests/backends.rs).
    assert!(worst >= 40.0, "worst sample PSNR {worst:.1} dB");
}

#[test]
fn the_lsj_preset_places_each_jittered_cut_on_the_fill_at_1024_on_the_engine_and_the_cpu_path() {
    let (images, _dir, annotations) = coco_set("det-lsj", 8);
    let lsj = || pipelines::builtin("lsj_train").unwrap();
    let (hw, hw_report) = detection_epoch(images.path(), &annotations, lsj(), Backend::Hw);
    let (cpu, _) = detection_epoch(images.path(), &annotations, lsj(), Backend::Cpu);
    assert_eq!(hw_report.hw_samples, 8, "{:?}", hw_report.fallbacks);
    let layout = TargetLayout { max_boxes: 8 };
    let side = 1024usize;
    let sample = side * side * 3;
    let (mut cut, mut padded, mut worst) = (0, 0, f64::INFINITY);
    for ((hi, ht), (ci, ct)) in hw.iter().zip(&cpu) {
        assert_eq!(ht, ct, "the same target records on both paths");
        assert_eq!(hi.len(), 4 * sample);
        for (s, record) in ct.chunks(layout.bytes()).enumerate() {
            let t = layout.read(record);
            assert_eq!(t.size, (1024, 1024));
            // The whole-image box, after the jitter, the cut and the flip, is the cut's place:
            // every pixel outside it is the fill on both paths.
            let whole = t.labels.iter().position(|&l| l == 1).expect("never empty");
            let [x1, y1, x2, y2] = t.boxes[whole].map(|v| v.round() as usize);
            assert_eq!(y1, 0, "{:?}", t.boxes[whole]);
            assert!(x1 == 0 || x2 == side, "{:?}", t.boxes[whole]);
            let (w, h) = (x2 - x1, y2 - y1);
            cut += usize::from(w == side || h == side);
            padded += usize::from(w < side || h < side);
            for pixels in [&hi[s * sample..][..sample], &ci[s * sample..][..sample]] {
                for (k, px) in pixels.chunks(3).enumerate() {
                    let (x, y) = (k % side, k / side);
                    if x < x1 || x >= x2 || y >= y2 {
                        assert_eq!(px, [123, 117, 104], "pixel ({x}, {y}) of sample {s}");
                    }
                }
            }
            let (a, b) = (&hi[s * sample..][..sample], &ci[s * sample..][..sample]);
            worst = worst.min(hpuload::decoders::testing::psnr(a, b));
        }
    }
    assert!(cut > 0 && padded > 0, "{cut} cut, {padded} padded");
    assert!(worst >= 32.0, "worst sample PSNR {worst:.1} dB");
}

#[test]
fn over_a_coco_dataset_a_resize_alone_scales_the_boxes_and_a_classification_crop_is_refused() {
    let (images, _dir, annotations) = coco_set("det-resize-alone", 4);
    let resize = hpuload::Pipeline::from_toml(
        "name = \"r\"\n[[ops]]\nop = \"resize\"\nsize = [50, 80]\n",
        "r",
    )
    .unwrap();
    let (batches, _) = detection_epoch(images.path(), &annotations, resize, Backend::Cpu);
    let layout = TargetLayout { max_boxes: 8 };
    let mut seen = 0;
    for (_, records) in &batches {
        for record in records.chunks(layout.bytes()) {
            let t = layout.read(record);
            assert_eq!(t.size, (50, 80));
            // The whole-image box becomes the whole output.
            let whole = t.labels.iter().position(|&l| l == 1).unwrap();
            let b = t.boxes[whole];
            assert!(
                (b[2] - 80.0).abs() < 1e-3 && (b[3] - 50.0).abs() < 1e-3,
                "{b:?}"
            );
            seen += 1;
        }
    }
    assert_eq!(seen, 4);
    let e = coco_builder(images.path(), &annotations, pipelines::resnet50_train())
        .build()
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("a detection pipeline ends its geometry"), "{e}");
}

/// The SSD preset's epoch on `auto` and on the CPU path: checks that their target records
/// are the same, and gives each sample's PSNR between the two (ascending) and `auto`'s report.
fn ssd_engine_against_cpu(images: &Path, annotations: &Path) -> (Vec<f64>, hpuload::Report) {
    let ssd = || pipelines::builtin("ssd300_train").unwrap();
    let (hw, report) = detection_epoch(images, annotations, ssd(), Backend::Auto);
    let (cpu, _) = detection_epoch(images, annotations, ssd(), Backend::Cpu);
    let sample = 300 * 300 * 3;
    let mut psnr = Vec::new();
    for ((hi, ht), (ci, ct)) in hw.iter().zip(&cpu) {
        assert_eq!(ht, ct, "the same target records on both paths");
        for (a, b) in hi.chunks(sample).zip(ci.chunks(sample)) {
            psnr.push(hpuload::decoders::testing::psnr(a, b));
        }
    }
    psnr.sort_by(f64::total_cmp);
    (psnr, report)
}

#[test]
fn the_engine_runs_the_ssd_presets_photometric_steps_and_zoom_out_fill_with_the_cpu_paths_boxes() {
    let (images, _dir, annotations) = coco_set("det-engine-ssd", 16);
    let (psnr, hw_report) = ssd_engine_against_cpu(images.path(), &annotations);
    assert_eq!(
        hw_report.hw_samples, hw_report.samples_loaded,
        "every sample on the engine: {:?}",
        hw_report.fallbacks
    );
    // The engine runs the photometric steps on the DCT-scaled decode before the resize, the
    // CPU path on the full-size image: their rounding and clamping meet the resize in
    // different places.
    let (worst, median) = (psnr[0], psnr[psnr.len() / 2]);
    eprintln!("engine against CPU path, SSD preset: worst {worst:.1} dB, median {median:.1} dB");
    assert!(
        worst >= 36.0 && median >= 45.0,
        "worst {worst:.1} dB, median {median:.1} dB"
    );
}

/// SSDlite's geometry without the resize: each image keeps its window's size.
fn ssdlite_own_size() -> hpuload::Pipeline {
    hpuload::Pipeline::from_toml(
        r#"
        name = "ssdlite_own_size"
        [[ops]]
        op = "random_iou_crop"
        [[ops]]
        op = "random_horizontal_flip"
        [[ops]]
        op = "sanitize_bounding_boxes"
        "#,
        "ssdlite_own_size",
    )
    .unwrap()
}

#[test]
fn without_a_resize_each_image_keeps_its_window_size_in_a_row_of_the_batch() {
    let (images, _dir, annotations) = coco_set("det-own-size", 12);
    let layout = TargetLayout { max_boxes: 8 };
    let mut sizes = std::collections::BTreeSet::new();
    let mut epochs = Vec::new();
    for backend in [Backend::Auto, Backend::Cpu] {
        let mut l = coco_builder(images.path(), &annotations, ssdlite_own_size())
            .shuffle(3)
            .workers(2)
            .backend(backend)
            .output(Dtype::U8, Layout::Nhwc)
            .build()
            .unwrap();
        let hpuload::OutputSize::PerSample { max_pixels } = l.output().2 else {
            panic!("a pipeline without a resize has per-sample sizes");
        };
        let mut epoch = Vec::new();
        for batch in l.epoch(0) {
            let batch = batch.unwrap();
            assert_eq!(batch.images.shape(), [4, max_pixels as usize * 3]);
            let pixels = batch.images.to_host().unwrap();
            let records = batch.labels.to_host().unwrap();
            for (s, record) in records.chunks(layout.bytes()).enumerate() {
                let t = layout.read(record);
                let (h, w) = t.size;
                assert!(h > 0 && w > 0 && u64::from(h) * u64::from(w) <= max_pixels);
                sizes.insert((h, w));
                for b in &t.boxes {
                    assert!(b[0] >= 0.0 && b[1] >= 0.0 && b[2] <= w as f32 && b[3] <= h as f32);
                }
                let row = &pixels[s * max_pixels as usize * 3..][..(h * w * 3) as usize];
                epoch.push((t, row.to_vec()));
            }
        }
        let report = l.report();
        if backend == Backend::Auto {
            assert_eq!(
                report.hw_samples, report.samples_loaded,
                "windows inside the image go to the engine"
            );
        }
        epochs.push(epoch);
    }
    assert!(sizes.len() > 3, "windows of several sizes: {sizes:?}");
    let mut worst = f64::INFINITY;
    for ((ht, hi), (ct, ci)) in epochs[0].iter().zip(&epochs[1]) {
        assert_eq!(ht, ct, "the same targets on both paths");
        worst = worst.min(hpuload::decoders::testing::psnr(hi, ci));
    }
    assert!(worst >= 32.0, "worst sample PSNR {worst:.1} dB");
}

/// COCO options for the loopback HTTP server: short timeouts, one retry, no shard cache.
fn loopback_options() -> CocoOptions {
    CocoOptions {
        remote: hpuload::RemoteOptions {
            timeout: std::time::Duration::from_secs(5),
            retries: 1,
            cache: None,
            ..hpuload::RemoteOptions::default()
        },
        ..CocoOptions::default()
    }
}

/// One epoch of SSDlite at 96x96 over `set` (batches of 4, shuffled by `seed`, u8 NHWC on
/// the host), with the report.
fn ssdlite_epoch(set: CocoDataset, seed: u64) -> (HostEpoch, hpuload::Report) {
    epoch_of(builder_over(set, ssdlite(96)).shuffle(seed))
}

#[test]
fn coco_images_on_object_storage_give_the_local_batches_and_a_missing_one_is_named() {
    use common::http::HttpServer;
    let (images, _dir, annotations) = coco_set("det-remote", 12);
    let epoch = |set: CocoDataset| ssdlite_epoch(set, 2);
    let options = loopback_options();
    let (local, _) = epoch(CocoDataset::open(&annotations, images.path(), &options).unwrap());
    let server = HttpServer::start(images.path().to_path_buf());
    let remote = CocoDataset::open(&annotations, format!("{}/", server.url), &options).unwrap();
    assert!(remote.entries()[0]
        .path
        .to_string_lossy()
        .starts_with(&server.url));
    let (fetched, report) = epoch(remote);
    assert_eq!(fetched, local, "the same batches from the store");
    let storage = report.storage.expect("a storage report");
    assert!(
        storage.requests >= 12 && storage.bytes_fetched > 0,
        "{storage:?}"
    );
    // An image gone from the store is named by its URL and replaced; the epoch goes on.
    let set = CocoDataset::open(&annotations, &server.url, &options).unwrap();
    let gone = set.entries()[5].path.clone();
    let name = gone
        .to_string_lossy()
        .trim_start_matches(&server.url)
        .to_string();
    std::fs::remove_file(images.path().join(name.trim_start_matches('/'))).unwrap();
    let (batches, report) = epoch(set);
    assert_eq!(batches.len(), 3);
    assert_eq!(report.skipped, 1);
    assert_eq!(report.skips[0].path, gone);
    assert!(
        report.skips[0].message.contains("not in the store"),
        "{:?}",
        report.skips[0]
    );
}

#[test]
fn detection_resumes_exactly_covers_every_rank_set_and_resumes_elastically() {
    let (images, _dir, annotations) = coco_set("det-resume", 15);
    let open = || CocoDataset::open(&annotations, images.path(), &CocoOptions::default()).unwrap();
    let builder = || {
        Loader::builder(open())
            .pipeline(pipelines::builtin("ssd300_train").unwrap())
            .batch_size(2)
            .placement(Placement::Host)
            .max_boxes(8)
            .shuffle(9)
            .workers(2)
            .output(Dtype::U8, Layout::Nhwc)
    };
    // Exact resume: images and target records byte-identical to the uninterrupted epoch.
    let whole = host_epoch(&mut builder().build().unwrap(), 2);
    let mut stopped = builder().build().unwrap();
    let mut epoch = stopped.epoch(2);
    for _ in 0..3 {
        epoch.next().unwrap().unwrap();
    }
    let state = epoch.state();
    drop(epoch);
    let rest = host_epoch(&mut builder().resume(state).build().unwrap(), 2);
    assert!(rest == whole[3..], "resumed mid-epoch");
    // Equal batch counts and every image once, on any number of ranks.
    for world in [2, 3] {
        common::assert_ranks_cover(15, world, |_| builder());
    }
    // Stopped on two ranks, resumed on three: the rest of the epoch, each image once.
    common::assert_elastic_resume(15, 1, |_| builder());
}

#[test]
fn coco_images_in_tar_shards_local_or_remote_give_the_folders_batches() {
    use common::http::HttpServer;
    let (images, dir, annotations) = coco_set("det-shards", 12);
    let shards = TempDir::new("det-shards-out");
    common::hpuload_ok([
        "make-shards".as_ref(),
        "--coco".as_ref(),
        annotations.as_os_str(),
        "--data".as_ref(),
        images.path().as_os_str(),
        "--out".as_ref(),
        shards.path().as_os_str(),
        "--shard-size".as_ref(),
        "100KB".as_ref(),
    ]);
    let count = hpuload::source::shards::tar_files(shards.path())
        .unwrap()
        .len();
    assert!(count >= 3, "several shards: {count}");
    let pattern = format!("shard-{{000000..{:06}}}.tar", count - 1);
    let options = loopback_options();
    let epoch = |annotations: &Path, images: &str| {
        ssdlite_epoch(CocoDataset::open(annotations, images, &options).unwrap(), 3)
    };
    let (folder, _) = epoch(&annotations, &images.path().to_string_lossy());
    let local = shards.path().join(&pattern);
    let (from_pattern, report) = epoch(&annotations, &local.to_string_lossy());
    assert_eq!(from_pattern, folder, "shards by pattern");
    assert_eq!(report.skipped, 0);
    let (from_folder, _) = epoch(&annotations, &shards.path().to_string_lossy());
    assert_eq!(from_folder, folder, "a folder of shards");
    let server = HttpServer::start(shards.path().to_path_buf());
    let (remote, report) = epoch(&annotations, &format!("{}/{pattern}", server.url));
    assert_eq!(remote, folder, "shards on object storage");
    assert!(report.storage.is_some_and(|s| s.requests >= 12));

    // An image no shard holds is named by its file_name, and replaced; the epoch goes on.
    let text = std::fs::read_to_string(&annotations).unwrap();
    let first = text.find(r#""file_name": ""#).unwrap() + r#""file_name": ""#.len();
    let end = first + text[first..].find('"').unwrap();
    let edited = format!("{}elsewhere/absent.jpg{}", &text[..first], &text[end..]);
    let absent = dir.path().join("absent.json");
    std::fs::write(&absent, edited).unwrap();
    let (batches, report) = epoch(&absent, &local.to_string_lossy());
    assert_eq!(batches.len(), 3);
    assert_eq!(report.skipped, 1);
    assert!(
        report.skips[0].path.ends_with("elsewhere/absent.jpg")
            && report.skips[0]
                .message
                .contains("no shard holds this image"),
        "{:?}",
        report.skips[0]
    );
}

#[test]
fn a_shard_member_is_found_by_its_file_name_under_another_folder_unless_two_share_it() {
    let (images, _dir, annotations) = coco_set("det-shard-names", 4);
    let set = CocoDataset::open(&annotations, images.path(), &CocoOptions::default()).unwrap();
    let files: Vec<_> = set.entries().iter().map(|e| e.path.clone()).collect();
    let name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
    // Every image under `train2017/`, and the first one also under `val2017/`.
    let shards = TempDir::new("det-shard-names-out");
    let shard = shards.path().join("images.tar");
    let mut tar = tar::Builder::new(std::fs::File::create(&shard).unwrap());
    let mut members: Vec<String> = files
        .iter()
        .map(|f| format!("train2017/{}", name(f)))
        .collect();
    members.push(format!("val2017/{}", name(&files[0])));
    for (member, file) in members.iter().zip(files.iter().chain([&files[0]])) {
        tar.append_path_with_name(file, member).unwrap();
    }
    tar.finish().unwrap();
    drop(tar);
    let found = CocoDataset::open(&annotations, &shard, &CocoOptions::default()).unwrap();
    let paths: Vec<_> = found.entries().iter().map(|e| e.path.clone()).collect();
    assert_eq!(
        paths[0],
        shard.join(set.entries()[0].path.strip_prefix(images.path()).unwrap())
    );
    for (k, path) in paths.iter().enumerate().skip(1) {
        assert_eq!(*path, shard.join(&members[k]), "found by file name");
    }
    let mut buf = Vec::new();
    let err = found
        .read(0, hpuload::ReadMode::Read, &mut buf)
        .map(|_| ())
        .unwrap_err();
    assert!(
        err.to_string().contains("no shard holds this image"),
        "{err}"
    );
    let bytes = found
        .read(1, hpuload::ReadMode::Read, &mut buf)
        .unwrap()
        .to_vec();
    assert_eq!(bytes, std::fs::read(&files[1]).unwrap());
}

/// The SSD preset on the engine against the CPU path over real photographs: `HPULOAD_AGREE_DIR`
/// (the images) and `HPULOAD_AGREE_COCO` (a COCO file over them, e.g. from
/// `benches/peers/coco_make.py`); run with `cargo test --test integration detection -- --ignored
/// --nocapture`. Prints the worst, 1st percentile and median PSNR.
#[test]
#[ignore = "needs HPULOAD_AGREE_DIR and HPULOAD_AGREE_COCO: real JPEGs and a COCO file over them"]
fn the_engine_agrees_with_the_cpu_path_on_the_ssd_preset_over_real_photographs() {
    let dir = std::env::var_os("HPULOAD_AGREE_DIR").expect("set HPULOAD_AGREE_DIR");
    let coco = std::env::var_os("HPULOAD_AGREE_COCO").expect("set HPULOAD_AGREE_COCO");
    let (dir, coco) = (Path::new(&dir), Path::new(&coco));
    let (psnr, report) = ssd_engine_against_cpu(dir, coco);
    println!(
        "{} of {} samples on the engine; fallbacks {:?}",
        report.hw_samples, report.samples_loaded, report.fallbacks
    );
    let at = |q: f64| psnr[((psnr.len() - 1) as f64 * q) as usize];
    println!(
        "SSD preset, engine against CPU path over {} samples: worst {:.1} dB, 1st percentile {:.1} dB, median {:.1} dB",
        psnr.len(),
        at(0.0),
        at(0.01),
        at(0.5)
    );
    assert!(at(0.0) >= 30.0 && at(0.5) >= 40.0);
}

#[test]
fn the_habana_ssd_preset_runs_on_the_engine_with_static_shapes_and_the_cpu_paths_targets() {
    let (images, _dir, annotations) = coco_set("det-habana", 12);
    let epoch = |backend: Backend| {
        let mut l = coco_builder(
            images.path(),
            &annotations,
            pipelines::builtin("ssd300_habana").unwrap(),
        )
        .shuffle(4)
        .workers(2)
        .backend(backend)
        .max_boxes(200)
        .output(Dtype::Bf16, Layout::Nchw)
        .build()
        .unwrap();
        let targets: Vec<Vec<u8>> = l
            .epoch(0)
            .map(|b| {
                let b = b.unwrap();
                assert_eq!(b.images.shape(), [4, 3, 300, 300]);
                b.labels.to_host().unwrap()
            })
            .collect();
        (targets, l.report())
    };
    let (hw, report) = epoch(Backend::Hw);
    let (cpu, _) = epoch(Backend::Cpu);
    assert_eq!(report.hw_samples, 12);
    assert_eq!(hw, cpu, "the same target records, padded to 200 boxes");
    let layout = TargetLayout { max_boxes: 200 };
    let kept: usize = hw
        .iter()
        .flat_map(|b| b.chunks(layout.bytes()))
        .map(|r| layout.read(r).boxes.len())
        .sum();
    assert!(kept >= 12, "{kept} boxes kept");
}

#[test]
fn make_shards_refuses_a_coco_image_whose_name_has_a_dot_before_its_extension() {
    let (images, _dir, annotations) = coco_set("det-dotted", 2);
    let set = CocoDataset::open(&annotations, images.path(), &CocoOptions::default()).unwrap();
    let first = set.entries()[0].path.clone();
    let dotted = first.with_file_name("photo.v2.jpg");
    std::fs::rename(&first, &dotted).unwrap();
    let relative = |p: &Path| {
        p.strip_prefix(images.path())
            .unwrap()
            .to_string_lossy()
            .into_owned()
    };
    let text = std::fs::read_to_string(&annotations)
        .unwrap()
        .replace(&relative(&first), &relative(&dotted));
    std::fs::write(&annotations, text).unwrap();
    let out = TempDir::new("det-dotted-out");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_hpuload"))
        .args(["make-shards", "--coco"])
        .arg(&annotations)
        .arg("--data")
        .arg(images.path())
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(
        stderr.contains("photo.v2.jpg") && stderr.contains("first dot"),
        "{stderr}"
    );
}
