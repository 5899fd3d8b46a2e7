//! Several views of each image (multi-crop): one decode, each view's own plan, the views of a
//! sample one after the other in its row of the batch.

use crate::common::{dataset, small_train, train_at, TempDir};
use hpuload::{pipelines, Backend, Dtype, Error, ImageFolder, Layout, Loader};

/// A loader of a 24x24 view and two 16x16 ones, and its dataset's folder.
fn multi_view(backend: Backend) -> (Result<Loader, Error>, TempDir) {
    let data = dataset("views", 12);
    let loader = Loader::builder(ImageFolder::open(data.path()).unwrap())
        .batch_size(4)
        .seed(9)
        .workers(2)
        .pipeline(train_at(24))
        .views(vec![train_at(16), train_at(16)])
        .output(Dtype::F32, Layout::Nchw)
        .backend(backend)
        .on_error(hpuload::OnError::Fail)
        .build();
    (loader, data)
}

#[test]
fn each_row_holds_every_view_and_the_first_is_the_one_view_loaders_sample() {
    let (loader, _data) = multi_view(Backend::Auto);
    let mut loader = loader.unwrap();
    assert_eq!(loader.views(), vec![[24, 24], [16, 16], [16, 16]]);
    // f32: four bytes a value.
    let row = 3 * (24 * 24 + 2 * 16 * 16);
    let (big, small) = (4 * 3 * 24 * 24, 4 * 3 * 16 * 16);
    let data = dataset("views-one", 12);
    let mut one = Loader::builder(ImageFolder::open(data.path()).unwrap())
        .batch_size(4)
        .seed(9)
        .workers(1)
        .pipeline(train_at(24))
        .output(Dtype::F32, Layout::Nchw)
        .backend(Backend::Cpu)
        .build()
        .unwrap();
    assert_eq!(one.views(), vec![[24, 24]]);
    let singles: Vec<Vec<u8>> = one
        .epoch(0)
        .map(|b| b.unwrap().images.to_host().unwrap())
        .collect();
    for (batch, single) in loader.epoch(0).zip(&singles) {
        let batch = batch.unwrap();
        assert_eq!(batch.images.shape(), &[4, row]);
        let bytes = batch.images.to_host().unwrap();
        for (s, sample) in bytes.chunks(4 * row).enumerate() {
            let first = &single[s * big..(s + 1) * big];
            assert_eq!(&sample[..big], first, "view 0 of slot {s}");
            let (a, b) = sample[big..].split_at(small);
            assert_ne!(a, b, "the two small views of slot {s} are one crop");
        }
    }
    let report = loader.report();
    assert_eq!(report.hw_samples, 0);
    assert_eq!(report.samples_loaded, 12);
}

#[test]
fn views_draw_their_own_plans_repeatably() {
    let (loader, _data) = multi_view(Backend::Cpu);
    let loader = loader.unwrap();
    let plan = |view, index| {
        let p = loader.view_plan(view, 0, index, 320, 240).unwrap();
        format!("{:?}", p.crop)
    };
    assert_ne!(plan(1, 3), plan(2, 3));
    assert_eq!(plan(2, 3), plan(2, 3));
    assert_eq!(
        plan(0, 3),
        format!("{:?}", loader.sample_plan(0, 3, 320, 240).unwrap().crop)
    );
    assert!(loader.view_plan(3, 0, 0, 320, 240).is_err());
}

#[test]
fn views_need_fixed_sizes_and_the_host() {
    let data = dataset("views-bad", 4);
    let build = |views, backend| {
        Loader::builder(ImageFolder::open(data.path()).unwrap())
            .batch_size(2)
            .pipeline(small_train())
            .views(views)
            .backend(backend)
            .build()
    };
    let refused = |r: Result<Loader, Error>| match r {
        Err(Error::Config { setting, reason }) => format!("{setting}: {reason}"),
        other => panic!("expected a config error, got {other:?}"),
    };
    assert!(refused(build(vec![small_train()], Backend::Hw)).contains("backend auto or cpu"));
    let mut free = pipelines::resnet50_train();
    free.ops.remove(0); // no crop: each image its own size
    let reason = refused(build(vec![free], Backend::Auto));
    assert!(reason.contains("view 1 has no crop or resize"), "{reason}");
}

/// A loader of one image of each sample (`image_of_sample`), shuffled with seed 5.
fn image_loader(data: &TempDir, image: usize) -> Loader {
    Loader::builder(ImageFolder::open(data.path()).unwrap())
        .batch_size(4)
        .shuffle(5)
        .workers(2)
        .pipeline(train_at(16))
        .output(Dtype::F32, Layout::Nchw)
        .backend(Backend::Cpu)
        .image_of_sample(image)
        .build()
        .unwrap()
}

#[test]
fn each_image_of_a_sample_draws_its_own_plans_over_the_same_order() {
    let data = dataset("images-of-sample", 12);
    let (mut first, mut second) = (image_loader(&data, 0), image_loader(&data, 1));
    let crop = |loader: &Loader, index| {
        format!("{:?}", loader.sample_plan(0, index, 320, 240).unwrap().crop)
    };
    // Image 0 draws what a loader of one image draws; image 1 from a seed of its own.
    let plain = Loader::builder(ImageFolder::open(data.path()).unwrap())
        .batch_size(4)
        .shuffle(5)
        .pipeline(train_at(16))
        .backend(Backend::Cpu)
        .build()
        .unwrap();
    assert_eq!(crop(&first, 3), crop(&plain, 3));
    let differ = (0..12)
        .filter(|&i| crop(&first, i) != crop(&second, i))
        .count();
    assert!(differ >= 10, "{differ} of 12 crops differ");
    // The same samples in the same slots, each image through its own draws.
    let orders = |loader: &mut Loader| -> Vec<Vec<usize>> {
        loader
            .epoch(0)
            .map(|b| b.unwrap().indices.clone())
            .collect()
    };
    assert_eq!(orders(&mut first), orders(&mut second));
}

#[test]
fn several_images_per_sample_are_for_one_view_of_images() {
    let data = dataset("images-of-sample-bad", 4);
    let built = Loader::builder(ImageFolder::open(data.path()).unwrap())
        .batch_size(2)
        .pipeline(train_at(16))
        .views(vec![train_at(16)])
        .image_of_sample(1)
        .build();
    match built {
        Err(Error::Config { setting, .. }) => assert_eq!(setting, "image_of_sample"),
        other => panic!("expected a config error, got {other:?}"),
    }
}

/// An ImageFolder of `n` copies of one photo: samples differ only by their draws.
fn copies(tag: &str, n: usize) -> TempDir {
    let one = dataset(tag, 1);
    let photo = walk(one.path()).remove(0);
    let dir = TempDir::new(tag);
    std::fs::create_dir_all(dir.path().join("a")).unwrap();
    for k in 0..n {
        std::fs::copy(&photo, dir.path().join("a").join(format!("{k:02}.jpg"))).unwrap();
    }
    dir
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// Each batch's samples as bytes, over one epoch of a loader of `copies`.
fn samples_of_batches(data: &TempDir, per_batch: bool, image: usize) -> Vec<Vec<Vec<u8>>> {
    let mut loader = Loader::builder(ImageFolder::open(data.path()).unwrap())
        .batch_size(4)
        .shuffle(5)
        .workers(2)
        .pipeline(train_at(16))
        .output(Dtype::F32, Layout::Nchw)
        .backend(Backend::Cpu)
        .image_of_sample(image)
        .draws_per_batch(per_batch)
        .build()
        .unwrap();
    loader
        .epoch(0)
        .map(|b| {
            let bytes = b.unwrap().images.to_host().unwrap();
            bytes.chunks(bytes.len() / 4).map(<[u8]>::to_vec).collect()
        })
        .collect()
}

#[test]
fn draws_per_batch_give_every_sample_of_a_batch_its_batchs_plan() {
    let data = copies("per-batch", 12);
    let batches = samples_of_batches(&data, true, 0);
    assert_eq!(batches.len(), 3);
    for samples in &batches {
        assert!(
            samples.iter().all(|s| s == &samples[0]),
            "one plan per batch"
        );
    }
    assert!(
        batches[0][0] != batches[1][0] || batches[1][0] != batches[2][0],
        "batches draw their own plans"
    );
    // Another image of each sample (`image_of_sample` 1) draws from its own seed, still one
    // plan per batch; per sample, each sample its own.
    let other = samples_of_batches(&data, true, 1);
    assert!(other.iter().all(|s| s.iter().all(|x| x == &s[0])));
    assert_ne!(other, batches);
    let per_sample = samples_of_batches(&data, false, 0);
    assert!(per_sample.iter().any(|s| s.iter().any(|x| x != &s[0])));
}

#[test]
fn draws_per_batch_are_for_one_view_of_images() {
    let data = dataset("per-batch-views", 4);
    let built = Loader::builder(ImageFolder::open(data.path()).unwrap())
        .batch_size(2)
        .pipeline(train_at(16))
        .views(vec![train_at(16)])
        .draws_per_batch(true)
        .build();
    match built {
        Err(Error::Config { setting, .. }) => assert_eq!(setting, "draws_per_batch"),
        other => panic!("expected a config error, got {:?}", other.map(|_| ())),
    }
}
