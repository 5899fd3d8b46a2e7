//! Hugging Face `datasets` tables as Arrow IPC streams and as Parquet, written here with the
//! `arrow` and `parquet` crates in the layout `datasets` uses (an `Image` struct of `bytes` and
//! `path`, a `ClassLabel`, the `huggingface` schema metadata), read back by row and through
//! the loader with its guarantees. The Python tests check files the real `datasets` package
//! writes.

use crate::common;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::{host, small_train, TempDir};
use arrow_array::{ArrayRef, BinaryArray, Int64Array, RecordBatch, StringArray, StructArray};
use arrow_schema::{DataType, Field, Fields, Schema};
use hpuload::source::{data_kind, DataKind, HfOptions, Listing, ParquetOptions};
use hpuload::{ArrowDataset, LastBatch, Loader, OnError, ParquetDataset, ReadMode, Source};

/// One row: embedded bytes, a path, and a label (each may be null).
#[derive(Clone)]
struct Row {
    bytes: Option<Vec<u8>>,
    path: Option<String>,
    label: Option<i64>,
}

fn jpeg_row(i: u64) -> Row {
    Row {
        bytes: Some(hpuload::dataset::synth_jpeg(3, i)),
        path: None,
        label: Some((i % 3) as i64),
    }
}

fn schema() -> Arc<Schema> {
    let image = DataType::Struct(Fields::from(vec![
        Field::new("bytes", DataType::Binary, true),
        Field::new("path", DataType::Utf8, true),
    ]));
    let meta = r#"{"info": {"features": {"image": {"_type": "Image"}, "label": {"names": ["a", "b", "c"], "_type": "ClassLabel"}}}}"#;
    Arc::new(
        Schema::new(vec![
            Field::new("image", image, true),
            Field::new("label", DataType::Int64, true),
        ])
        .with_metadata(HashMap::from([("huggingface".into(), meta.into())])),
    )
}

fn batch(rows: &[Row]) -> RecordBatch {
    let bytes = BinaryArray::from(rows.iter().map(|r| r.bytes.as_deref()).collect::<Vec<_>>());
    let paths = StringArray::from(rows.iter().map(|r| r.path.clone()).collect::<Vec<_>>());
    let image = StructArray::from(vec![
        (
            Arc::new(Field::new("bytes", DataType::Binary, true)),
            Arc::new(bytes) as ArrayRef,
        ),
        (
            Arc::new(Field::new("path", DataType::Utf8, true)),
            Arc::new(paths) as ArrayRef,
        ),
    ]);
    let labels = Int64Array::from(rows.iter().map(|r| r.label).collect::<Vec<_>>());
    RecordBatch::try_new(schema(), vec![Arc::new(image), Arc::new(labels)]).unwrap()
}

/// An Arrow IPC stream file of `rows`, `per_batch` rows per record batch.
fn write_arrow(path: &Path, rows: &[Row], per_batch: usize) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = arrow_ipc::writer::StreamWriter::try_new(file, &schema()).unwrap();
    for chunk in rows.chunks(per_batch) {
        w.write(&batch(chunk)).unwrap();
    }
    w.finish().unwrap();
}

/// A Parquet file of `rows`, `per_group` rows per row group (snappy, as pyarrow writes).
fn write_parquet(path: &Path, rows: &[Row], per_group: usize) {
    let file = std::fs::File::create(path).unwrap();
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(per_group))
        .set_compression(parquet::basic::Compression::SNAPPY)
        .build();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, schema(), Some(props)).unwrap();
    for chunk in rows.chunks(per_group) {
        w.write(&batch(chunk)).unwrap();
        w.flush().unwrap();
    }
    w.close().unwrap();
}

fn bytes_of(source: &dyn Source, index: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    Ok(source.read(index, ReadMode::Read, &mut buf)?.to_vec())
}

fn loader(source: impl Source + 'static, workers: usize) -> hpuload::LoaderBuilder {
    Loader::builder(source)
        .batch_size(4)
        .shuffle(5)
        .workers(workers)
        .pipeline(small_train())
}

/// Three Parquet files of 10 rows in row groups of 3 (30 rows, 12 groups).
fn parquet_set(tag: &str) -> (TempDir, Vec<Row>, String) {
    let dir = TempDir::new(tag);
    let rows: Vec<Row> = (0..30).map(jpeg_row).collect();
    for (f, chunk) in rows.chunks(10).enumerate() {
        write_parquet(
            &dir.path().join(format!("train-{f:05}-of-00003.parquet")),
            chunk,
            3,
        );
    }
    let pattern = format!(
        "{}/train-{{00000..00002}}-of-00003.parquet",
        dir.path().display()
    );
    (dir, rows, pattern)
}

#[test]
fn arrow_rows_give_their_embedded_bytes_or_their_file_with_labels_and_class_names() {
    let dir = TempDir::new("hf-arrow-rows");
    let mut rows: Vec<Row> = (0..7).map(jpeg_row).collect();
    let external = dir.path().join("outside.jpg");
    std::fs::write(&external, hpuload::dataset::synth_jpeg(4, 0)).unwrap();
    rows[4] = Row {
        bytes: None,
        path: Some("outside.jpg".into()),
        label: Some(2),
    };
    write_arrow(&dir.path().join("data-00000-of-00002.arrow"), &rows[..4], 3);
    write_arrow(&dir.path().join("data-00001-of-00002.arrow"), &rows[4..], 2);
    let set = ArrowDataset::open(&dir.path().to_string_lossy(), &HfOptions::default()).unwrap();
    assert_eq!(set.entries().len(), 7);
    assert_eq!(set.classes(), ["a", "b", "c"]);
    for (i, row) in rows.iter().enumerate() {
        let want = row
            .bytes
            .clone()
            .unwrap_or_else(|| std::fs::read(&external).unwrap());
        assert_eq!(bytes_of(&set, i).unwrap(), want, "row {i}");
        let mut slot = vec![0; want.len() + 10];
        let n = set.read_into(i, ReadMode::Read, &mut slot).unwrap();
        assert_eq!(n, Some(want.len()), "row {i} read into a slot");
        assert_eq!(&slot[..want.len()], &want[..]);
        assert_eq!(set.entries()[i].label, row.label.unwrap());
    }
    assert_eq!(
        set.entries()[4].path,
        external,
        "a path row is named by its file"
    );
    assert!(set.entries()[5]
        .path
        .ends_with("data-00001-of-00002.arrow/row 1"));

    // An indices mapping (what `select` and `shuffle` leave) picks and orders rows.
    let picked = ArrowDataset::open(
        &dir.path().to_string_lossy(),
        &HfOptions {
            rows: Some(vec![6, 0, 6]),
            ..HfOptions::default()
        },
    )
    .unwrap();
    assert_eq!(picked.entries().len(), 3);
    assert_eq!(
        bytes_of(&picked, 0).unwrap(),
        rows[6].bytes.clone().unwrap()
    );
    assert_eq!(
        bytes_of(&picked, 1).unwrap(),
        rows[0].bytes.clone().unwrap()
    );
    let past = ArrowDataset::open(
        &dir.path().to_string_lossy(),
        &HfOptions {
            rows: Some(vec![7]),
            ..HfOptions::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(past.contains("row 7"), "{past}");
}

#[test]
fn arrow_rows_without_an_image_or_label_fail_by_name_and_a_truncated_file_is_named() {
    let dir = TempDir::new("hf-arrow-bad");
    let mut rows: Vec<Row> = (0..12).map(jpeg_row).collect();
    rows[1].bytes = None;
    rows[2].label = None;
    let file = dir.path().join("t.arrow");
    write_arrow(&file, &rows, 5);
    let set = ArrowDataset::open(&file.to_string_lossy(), &HfOptions::default()).unwrap();
    let null = bytes_of(&set, 1).unwrap_err().to_string();
    assert!(null.contains("null"), "{null}");
    let unlabelled = bytes_of(&set, 2).unwrap_err().to_string();
    assert!(unlabelled.contains("label is null"), "{unlabelled}");
    assert!(bytes_of(&set, 3).is_ok());

    // Through the loader: the two rows are skipped, named, and the epoch goes on.
    let mut l = loader(
        ArrowDataset::open(&file.to_string_lossy(), &HfOptions::default()).unwrap(),
        2,
    )
    .batch_size(2)
    .on_error(OnError::Skip)
    .error_budget(1.0)
    .build()
    .unwrap();
    assert_eq!(l.epoch(0).map(Result::unwrap).count(), 6);
    let skipped: Vec<String> = l
        .report()
        .skips
        .iter()
        .map(|s| s.path.display().to_string())
        .collect();
    assert!(
        skipped.iter().any(|p| p.ends_with("t.arrow/row 1")),
        "{skipped:?}"
    );

    let len = std::fs::metadata(&file).unwrap().len();
    let cut = dir.path().join("cut.arrow");
    std::fs::write(&cut, &std::fs::read(&file).unwrap()[..len as usize - 100]).unwrap();
    let why = ArrowDataset::open(&cut.to_string_lossy(), &HfOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        why.contains("cut.arrow") && why.contains("truncated"),
        "{why}"
    );
}

#[test]
fn parquet_rows_read_back_across_row_groups_and_files_with_their_labels() {
    let (_dir, rows, pattern) = parquet_set("hf-parquet-rows");
    let set = ParquetDataset::open(&pattern, &ParquetOptions::default()).unwrap();
    assert_eq!(set.row_groups(), 12);
    assert_eq!(set.classes(), ["a", "b", "c"]);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(
            bytes_of(&set, i).unwrap(),
            row.bytes.clone().unwrap(),
            "row {i}"
        );
        assert_eq!(set.entries()[i].label, row.label.unwrap());
    }
    assert!(set.entries()[13]
        .path
        .ends_with("train-00001-of-00003.parquet/row 3"));
    // Read in order without a plan, each group is decoded once.
    assert_eq!(set.groups_decoded(), 12);
    let glob = pattern.replace("{00000..00002}", "*");
    assert_eq!(
        ParquetDataset::open(&glob, &ParquetOptions::default())
            .unwrap()
            .entries()
            .len(),
        30
    );
}

#[test]
fn a_shuffled_parquet_epoch_visits_every_row_once_and_decodes_each_row_group_once() {
    let (_dir, _rows, pattern) = parquet_set("hf-parquet-epoch");
    let options = ParquetOptions {
        window_rows: 6,
        ..ParquetOptions::default()
    };
    let groups: Vec<(usize, usize)> = (0..12).map(|g| (g * 3, 3)).collect();
    let order = hpuload::source::parquet::block_order(&groups, 6, 5, 1);
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..36).collect::<Vec<u32>>());
    // Each window of two groups holds its 6 rows, whatever their order inside it.
    for w in order.chunks(6) {
        let mut g: Vec<u32> = w.iter().map(|&i| i / 3).collect();
        g.sort_unstable();
        g.dedup();
        assert_eq!(g.len(), 2, "{w:?}");
    }
    assert_ne!(
        order,
        hpuload::source::parquet::block_order(&groups, 6, 5, 2)
    );

    let set = Arc::new(ParquetDataset::open(&pattern, &options).unwrap());
    let mut l = Loader::builder(SharedParquet(Arc::clone(&set)))
        .batch_size(4)
        .shuffle(5)
        .workers(2)
        .last_batch(LastBatch::Partial)
        .pipeline(small_train())
        .build()
        .unwrap();
    for epoch in 0..2 {
        let mut seen: Vec<usize> = l
            .epoch(epoch)
            .flat_map(|b| {
                let b = b.unwrap();
                b.indices[..b.valid].to_vec()
            })
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..30).collect::<Vec<_>>());
        // 12 groups: each file's 10 rows are groups of 3, 3, 3 and 1.
        assert_eq!(set.groups_decoded(), 12 * (epoch + 1), "epoch {epoch}");
    }
}

/// A Parquet dataset shared with the test, to read its counters.
struct SharedParquet(Arc<ParquetDataset>);

impl Source for SharedParquet {
    fn listing(&self) -> &Listing {
        self.0.listing()
    }
    fn shuffled_order(&self, seed: u64, epoch: u64) -> Option<Vec<u32>> {
        self.0.shuffled_order(seed, epoch)
    }
    fn plan_reads(&self, indices: &mut dyn Iterator<Item = usize>) {
        self.0.plan_reads(indices);
    }
    fn read<'a>(
        &self,
        index: usize,
        mode: ReadMode,
        buf: &'a mut Vec<u8>,
    ) -> std::io::Result<hpuload::source::SampleBytes<'a>> {
        self.0.read(index, mode, buf)
    }
}

#[test]
fn parquet_batches_do_not_depend_on_worker_count_resume_exactly_and_cover_every_rank_set() {
    let (_dir, _rows, pattern) = parquet_set("hf-parquet-determinism");
    let open = || ParquetDataset::open(&pattern, &ParquetOptions::default()).unwrap();
    let a: Vec<_> = loader(open(), 1)
        .build()
        .unwrap()
        .epoch(3)
        .map(|b| host(&b.unwrap()))
        .collect();
    let b: Vec<_> = loader(open(), 3)
        .build()
        .unwrap()
        .epoch(3)
        .map(|b| host(&b.unwrap()))
        .collect();
    assert_eq!(a.len(), 8);
    assert!(a == b, "the same bytes with 1 and 3 workers");

    let mut stopped = loader(open(), 2).build().unwrap();
    let mut epoch = stopped.epoch(3);
    for _ in 0..4 {
        epoch.next().unwrap().unwrap();
    }
    let state = epoch.state();
    drop(epoch);
    let rest: Vec<_> = loader(open(), 2)
        .resume(state)
        .build()
        .unwrap()
        .epoch(3)
        .map(|b| host(&b.unwrap()))
        .collect();
    assert!(rest == a[4..], "resumed mid-epoch");

    for world in [1, 2, 4] {
        common::assert_ranks_cover(30, world, |_| loader(open(), 2));
    }
}

#[test]
fn damaged_parquet_rows_are_named_by_file_and_row_and_a_damaged_footer_by_file() {
    let dir = TempDir::new("hf-parquet-bad");
    let mut rows: Vec<Row> = (0..6).map(jpeg_row).collect();
    rows[1].bytes = Some(b"not a jpeg at all".to_vec());
    rows[4].bytes = None;
    let file = dir.path().join("train-00003-of-00009.parquet");
    write_parquet(&file, &rows, 3);
    let mut l = loader(
        ParquetDataset::open(&file.to_string_lossy(), &ParquetOptions::default()).unwrap(),
        2,
    )
    .batch_size(2)
    .on_error(OnError::Skip)
    .error_budget(1.0)
    .build()
    .unwrap();
    assert_eq!(l.epoch(0).map(Result::unwrap).count(), 3);
    let skipped: Vec<String> = l
        .report()
        .skips
        .iter()
        .map(|s| format!("{}: {}", s.path.display(), s.message))
        .collect();
    assert!(
        skipped
            .iter()
            .any(|s| s.contains("train-00003-of-00009.parquet/row 1")),
        "{skipped:?}"
    );
    assert!(
        skipped
            .iter()
            .any(|s| s.contains("train-00003-of-00009.parquet/row 4") && s.contains("null")),
        "{skipped:?}"
    );
    // A null image is the file's malformation, counted as "format", not as a failed read.
    let reasons: Vec<(String, &str)> = l
        .report()
        .skips
        .iter()
        .map(|s| (s.path.display().to_string(), s.reason))
        .collect();
    assert!(
        reasons
            .iter()
            .any(|(p, r)| p.ends_with("row 4") && *r == "format"),
        "{reasons:?}"
    );

    let bytes = std::fs::read(&file).unwrap();
    for (name, damaged) in [
        ("cut.parquet", bytes[..bytes.len() - 30].to_vec()),
        ("zeros.parquet", {
            let mut b = bytes.clone();
            let n = b.len();
            b[n - 200..n - 8].fill(0);
            b
        }),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, damaged).unwrap();
        let e =
            ParquetDataset::open(&path.to_string_lossy(), &ParquetOptions::default()).unwrap_err();
        assert!(matches!(e, hpuload::Error::Format { .. }), "{e:?}");
        let why = e.to_string();
        assert!(why.contains(name) && why.contains("footer"), "{why}");
    }
}

#[test]
fn data_names_are_told_apart_by_extension_and_by_what_a_folder_holds() {
    let dir = TempDir::new("hf-kinds");
    let (p, a, t) = (
        dir.path().join("pq"),
        dir.path().join("saved"),
        dir.path().join("tars"),
    );
    for d in [&p, &a, &t] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::create_dir_all(p.join("data")).unwrap();
    write_parquet(&p.join("data/train-0.parquet"), &[jpeg_row(0)], 1);
    write_arrow(&a.join("data-00000-of-00001.arrow"), &[jpeg_row(0)], 1);
    std::fs::write(t.join("shard-000000.tar"), [0u8; 1024]).unwrap();
    let s = |p: &PathBuf| p.to_string_lossy().into_owned();
    assert_eq!(data_kind(&s(&p)), DataKind::Parquet);
    assert_eq!(data_kind(&s(&a)), DataKind::Arrow);
    assert_eq!(data_kind(&s(&t)), DataKind::Shards);
    assert_eq!(data_kind("x/train-{0..3}.parquet"), DataKind::Parquet);
    assert_eq!(data_kind("x/data-*.arrow"), DataKind::Arrow);
    assert_eq!(
        data_kind(&s(&dir.path().join("nothing"))),
        DataKind::ImageFolder
    );
}

#[test]
fn parquet_over_http_gives_the_local_batches_and_later_epochs_read_the_cached_copies() {
    use common::http::HttpServer;
    let (dir, _rows, pattern) = parquet_set("hf-parquet-http");
    let server = HttpServer::start(dir.path().to_path_buf());
    let url = format!("{}/train-{{00000..00002}}-of-00003.parquet", server.url);
    let cache = TempDir::new("hf-parquet-cache");
    let options = |cache: Option<&Path>| ParquetOptions {
        remote: hpuload::RemoteOptions {
            timeout: std::time::Duration::from_secs(2),
            cache: cache.map(|dir| hpuload::CacheOptions {
                dir: dir.to_path_buf(),
                limit: None,
            }),
            ..hpuload::RemoteOptions::default()
        },
        ..ParquetOptions::default()
    };
    let local: Vec<_> = loader(ParquetDataset::open(&pattern, &options(None)).unwrap(), 2)
        .build()
        .unwrap()
        .epoch(1)
        .map(|b| host(&b.unwrap()))
        .collect();
    for cached in [None, Some(cache.path())] {
        let mut l = loader(ParquetDataset::open(&url, &options(cached)).unwrap(), 2)
            .build()
            .unwrap();
        let remote: Vec<_> = l.epoch(1).map(|b| host(&b.unwrap())).collect();
        assert!(
            remote == local,
            "the same batches over HTTP (cache: {cached:?})"
        );
        assert!(l.report().storage.unwrap().requests > 0);
    }
    // The cache filled in the background: a fresh dataset finds the copies and reads them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let cached = || {
        std::fs::read_dir(cache.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "parquet")
            })
            .count()
    };
    while cached() < 3 {
        assert!(std::time::Instant::now() < deadline, "cached in time");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let set = ParquetDataset::open(&url, &options(Some(cache.path()))).unwrap();
    let before = set.storage().unwrap().requests;
    let mut l = loader(set, 2).build().unwrap();
    let again: Vec<_> = l.epoch(1).map(|b| host(&b.unwrap())).collect();
    assert!(again == local);
    let report = l.report().storage.unwrap();
    assert_eq!(
        report.requests, before,
        "no request after opening: {report:?}"
    );
    assert!(report.cache_hits > 0);

    let missing = format!("{}/train-00009-of-00003.parquet", server.url);
    let why = ParquetDataset::open(&missing, &options(None))
        .unwrap_err()
        .to_string();
    assert!(why.contains("train-00009-of-00003.parquet"), "{why}");
}

#[test]
fn an_arrow_stream_whose_buffer_runs_past_its_body_is_an_error_naming_the_file() {
    // Found by the `hf_tables` fuzz target (crash-9da05c9a...): arrow-ipc slices the buffer
    // without a check and panics; hpuload reports it.
    let file = common::fixtures().join("hf/buffer-past-body.arrow");
    let why = ArrowDataset::open_files(vec![file], &HfOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        why.contains("buffer-past-body.arrow") && why.contains("malformed"),
        "{why}"
    );
}

#[test]
fn a_parquet_epoch_stopped_on_two_ranks_and_resumed_on_three_visits_the_rest_once() {
    let (_dir, _rows, pattern) = parquet_set("hf-parquet-elastic");
    let open = || ParquetDataset::open(&pattern, &ParquetOptions::default()).unwrap();
    common::assert_elastic_resume(30, 1, |_| loader(open(), 2).batch_size(3));
}

#[test]
fn a_parquet_footer_with_a_negative_chunk_size_is_an_error_naming_the_file() {
    // Found by the `hf_tables` fuzz target (crash-83af3148...): parquet's
    // `ColumnChunkMetaData::byte_range` asserts that offsets and sizes are not negative.
    let file = common::fixtures().join("hf/negative-chunk-size.parquet");
    let why = ParquetDataset::open(&file.to_string_lossy(), &ParquetOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        why.contains("negative-chunk-size.parquet") && why.contains("negative"),
        "{why}"
    );
}

#[test]
fn a_parquet_dictionary_claiming_more_values_than_its_bytes_hold_is_refused_before_allocating() {
    // Found by the `hf_tables` fuzz target (oom-e2d469be...): parquet sized the label
    // dictionary by its header's count, 2 GB, before reading a value.
    let file = common::fixtures().join("hf/huge-dictionary.parquet");
    let why = ParquetDataset::open(&file.to_string_lossy(), &ParquetOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        why.contains("huge-dictionary.parquet") && why.contains("column chunk 2: page 0's header"),
        "{why}"
    );
}

#[test]
fn a_parquet_page_claiming_gigabytes_decompressed_is_refused_before_allocating() {
    // Found by the `hf_tables` fuzz target (oom-256abda4...): parquet reserved a compressed
    // page's claimed decompressed size, 2 GB, before decompressing it. The walk over the page
    // headers stops at the first bad one (`source/pages.rs` pins each check on its own).
    let file = common::fixtures().join("hf/huge-page.parquet");
    let why = ParquetDataset::open(&file.to_string_lossy(), &ParquetOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        why.contains("huge-page.parquet") && why.contains("column chunk 2: page 0"),
        "{why}"
    );
}

#[test]
fn an_image_folder_with_a_parquet_file_deep_inside_is_still_an_image_folder() {
    let dir = TempDir::new("hf-kind-deep");
    let deep = dir.path().join("class_a/notes");
    std::fs::create_dir_all(&deep).unwrap();
    write_parquet(&deep.join("extra.parquet"), &[jpeg_row(0)], 1);
    assert_eq!(
        data_kind(&dir.path().to_string_lossy()),
        DataKind::ImageFolder
    );
}
