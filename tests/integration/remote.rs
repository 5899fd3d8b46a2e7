//! Shards on object storage, against a plain HTTP server on the loopback address (S3 through
//! moto is tested from Python, in python/tests/test_object_store.py): the same batches as from
//! disk, with and without the local shard cache; transient faults retried without losing a
//! sample; permanent ones, missing and truncated shards named; requests in flight bounded.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::http::{Fault, HttpServer};
use crate::common::{epoch_bytes, sharded, small_train, train_at, TempDir};
use hpuload::{
    CacheOptions, Loader, OnError, Pipeline, ReadMode, RemoteOptions, ShardOptions, Source,
    StorageReport, WebDataset,
};

fn options(cache: Option<&Path>) -> ShardOptions {
    ShardOptions {
        remote: RemoteOptions {
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            retries: 4,
            cache: cache.map(|dir| CacheOptions {
                dir: dir.to_path_buf(),
                limit: None,
            }),
            ..RemoteOptions::default()
        },
        ..ShardOptions::default()
    }
}

/// The shards of a fresh dataset, served over HTTP: (shards folder, server, local pattern,
/// remote pattern).
fn served(tag: &str) -> (TempDir, HttpServer, String, String) {
    let (_data, out, pattern) = sharded(tag);
    let server = HttpServer::start(out.path().to_path_buf());
    let name = pattern.rsplit('/').next().unwrap().to_string();
    let url = format!("{}/{name}", server.url);
    (out, server, pattern, url)
}

fn loader(source: impl Source + 'static) -> Loader {
    loader_at(source, small_train())
}

fn loader_at(source: impl Source + 'static, pipeline: Pipeline) -> Loader {
    Loader::builder(source)
        .batch_size(4)
        .shuffle(5)
        .workers(2)
        .pipeline(pipeline)
        .build()
        .unwrap()
}

/// Waits (at most 20 s) until the cache holds all `shards` of `loader`'s dataset, and returns
/// the storage report then.
fn wait_until_cached(loader: &Loader, shards: u64) -> StorageReport {
    let deadline = Instant::now() + Duration::from_secs(20);
    while loader.report().storage.unwrap().shards_cached < shards && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let report = loader.report().storage.unwrap();
    assert_eq!(report.shards_cached, shards, "{report:?}");
    report
}

#[test]
fn shards_over_http_give_the_same_batches_as_on_disk_with_and_without_the_cache() {
    let (_out, server, pattern, url) = served("remote-same");
    let cache = TempDir::new("remote-same-cache");
    let mut local = loader(WebDataset::open(&pattern).unwrap());
    let mut direct = loader(WebDataset::open_with(&url, &options(None)).unwrap());
    let mut cached = loader(WebDataset::open_with(&url, &options(Some(cache.path()))).unwrap());
    for epoch in 0..2 {
        let want = epoch_bytes(&mut local, epoch);
        assert_eq!(epoch_bytes(&mut direct, epoch), want, "epoch {epoch}");
        assert_eq!(epoch_bytes(&mut cached, epoch), want, "epoch {epoch}");
    }
    let samples = local.dataset_len() as u64;
    let st = direct
        .report()
        .storage
        .expect("remote data reports storage");
    assert!(st.requests >= samples, "one request per sample: {st:?}");
    assert_eq!(st.cache_hits, 0);
    assert!(local.report().storage.is_none());

    // The cache fills in the background; once it holds every shard, an epoch sends nothing.
    let shards = WebDataset::open(&pattern).unwrap().shards().len() as u64;
    let before = wait_until_cached(&cached, shards);
    let served_before = server.requests();
    assert_eq!(epoch_bytes(&mut cached, 2), epoch_bytes(&mut local, 2));
    let after = cached.report().storage.unwrap();
    assert_eq!(after.requests, before.requests, "{after:?}");
    assert_eq!(server.requests(), served_before);
    assert!(after.cache_hits >= before.cache_hits + samples);

    // A new dataset over the same cache starts from the shards already there.
    let again = WebDataset::open_with(&url, &options(Some(cache.path()))).unwrap();
    assert_eq!(again.storage().unwrap().shards_cached, shards);
}

#[test]
fn members_of_cached_shards_are_read_into_their_slots_and_match_local_shards() {
    let (_out, server, pattern, url) = served("remote-in-slot");
    let cache = TempDir::new("remote-in-slot-cache");
    // 112x112 bf16 output: 75,264-byte slots, which some of these members fit and some do not.
    let local_source = WebDataset::open(&pattern).unwrap();
    let samples = local_source.entries().len();
    let fit = (0..samples)
        .filter(|&i| {
            let mut buf = Vec::new();
            local_source
                .read(i, ReadMode::Read, &mut buf)
                .unwrap()
                .len()
                < 75_264
        })
        .count();
    assert!(fit > 0 && fit < samples, "{fit} of {samples} fit");
    let shards = local_source.shards().len() as u64;
    let mut local = loader_at(local_source, train_at(112));
    let remote = WebDataset::open_with(&url, &options(Some(cache.path()))).unwrap();
    let mut cached = loader_at(remote, train_at(112));
    assert!(epoch_bytes(&mut cached, 0) == epoch_bytes(&mut local, 0));
    let before = wait_until_cached(&cached, shards);
    let served_before = server.requests();
    assert!(epoch_bytes(&mut cached, 1) == epoch_bytes(&mut local, 1));
    let after = cached.report().storage.unwrap();
    assert_eq!(after.requests, before.requests, "{after:?}");
    assert_eq!(server.requests(), served_before);
    // Every slot (the last batch is padded to full size) read once from the cache, whether
    // into its slot or into a buffer.
    let slots = cached.batches_per_epoch() as u64 * 4;
    assert_eq!(after.cache_hits, before.cache_hits + slots);
}

#[test]
fn dropped_connections_500s_and_stalls_are_retried_and_lose_nothing() {
    let (_out, server, pattern, url) = served("remote-faults");
    let mut local = loader(WebDataset::open(&pattern).unwrap());
    let want = epoch_bytes(&mut local, 0);
    let mut remote = loader(WebDataset::open_with(&url, &options(None)).unwrap());
    let stall = Fault::Stall(Duration::from_millis(2500));
    let faults = [
        Fault::Drop,
        Fault::Status500,
        stall,
        Fault::Drop,
        Fault::Status500,
        stall,
    ];
    server.inject("shard-000001.tar", &faults);
    let start = Instant::now();
    assert_eq!(epoch_bytes(&mut remote, 0), want);
    assert_eq!(server.faults_left(), 0, "every fault was hit");
    assert_eq!(server.faults_served(), faults.len());
    assert!(remote.report().skipped == 0);
    // Each stall costs one timeout (1 s) before its retry, not the stall's 2.5 s.
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn a_permanent_error_is_not_retried_and_names_the_url_and_member() {
    let (_out, server, _pattern, url) = served("remote-403");
    let remote = WebDataset::open_with(&url, &options(None)).unwrap();
    let shard = remote.shards()[2].to_string_lossy().into_owned();
    // One 403: if it were retried, the retry would succeed and the epoch would not fail.
    server.inject("shard-000002.tar", &[Fault::Forbidden]);
    let mut l = Loader::builder(remote)
        .batch_size(4)
        .workers(2)
        .on_error(OnError::Fail)
        .pipeline(small_train())
        .build()
        .unwrap();
    let err = l
        .epoch(0)
        .find_map(Result::err)
        .expect("the forbidden sample fails the epoch")
        .to_string();
    assert!(
        err.contains(&format!("{shard}/")),
        "names the member: {err}"
    );
    assert!(err.contains("403"), "{err}");
    assert_eq!(server.faults_served(), 1);
}

#[test]
fn a_missing_remote_shard_is_an_error_naming_its_url() {
    let (_out, server, _pattern, _url) = served("remote-missing");
    let spec = format!("{}/shard-{{000000..000099}}.tar", server.url);
    let err = WebDataset::open_with(&spec, &options(None))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&server.url) && err.contains("shard-0000"),
        "{err}"
    );
    assert!(err.to_lowercase().contains("not found"), "{err}");
}

#[test]
fn a_truncated_remote_shard_fails_only_the_samples_past_the_cut_and_names_them() {
    let (_out, server, pattern, url) = served("remote-cut");
    let local = WebDataset::open(&pattern).unwrap();
    let last = local.shards().last().unwrap().clone();
    let size = std::fs::metadata(&last).unwrap().len();
    // Cut the shard (its index stays whole), then serve it.
    let cut = size * 6 / 10;
    let last_url = format!(
        "{}/{}",
        server.url,
        last.file_name().unwrap().to_string_lossy()
    );
    let f = std::fs::OpenOptions::new().write(true).open(&last).unwrap();
    f.set_len(cut).unwrap();
    drop(f);
    let cache = TempDir::new("remote-cut-cache");
    for cache in [None, Some(cache.path())] {
        let remote = WebDataset::open_with(&url, &options(cache)).unwrap();
        let tail = |e: &hpuload::Entry| {
            let p = e.path.to_string_lossy().into_owned();
            (p[p.rfind(".tar/").unwrap()..].to_string(), e.label)
        };
        let (r, l): (Vec<_>, Vec<_>) = (
            remote.entries().iter().map(tail).collect(),
            local.entries().iter().map(tail).collect(),
        );
        assert_eq!(r, l);
        let (mut ok, mut failed) = (0, 0);
        for i in 0..remote.entries().len() {
            let mut want = Vec::new();
            let mut got = Vec::new();
            let path = &remote.entries()[i].path;
            match (
                local.read(i, ReadMode::Read, &mut want).map(|b| b.to_vec()),
                remote.read(i, ReadMode::Read, &mut got).map(|b| b.to_vec()),
            ) {
                (Ok(w), Ok(g)) => {
                    assert_eq!(w, g, "{}", path.display());
                    ok += 1;
                }
                (Err(_), Err(e)) => {
                    assert!(
                        e.to_string().contains("truncated"),
                        "{}: {e}",
                        path.display()
                    );
                    assert!(path.starts_with(&last_url), "{}", path.display());
                    failed += 1;
                }
                (w, g) => panic!(
                    "{}: local {:?}, remote {:?}",
                    path.display(),
                    w.err(),
                    g.err()
                ),
            }
        }
        assert!(ok > 0 && failed > 0, "{ok} loaded, {failed} failed");
    }
}

#[test]
fn requests_in_flight_never_exceed_the_limit() {
    let (_out, server, _pattern, url) = served("remote-limit");
    server.delay(15);
    let mut opts = options(None);
    opts.remote.max_requests = 3;
    let mut remote = loader(WebDataset::open_with(&url, &opts).unwrap());
    let batches = epoch_bytes(&mut remote, 0);
    assert_eq!(batches.len(), remote.batches_per_epoch());
    let peak = server.max_in_flight();
    assert!((2..=3).contains(&peak), "peak requests in flight: {peak}");
}

#[test]
fn an_s3_url_reads_through_the_s3_client_and_never_shows_the_secret() {
    // The S3 client signs requests; a plain file server does not check them, so it stands in
    // for a bucket (path-style: /<bucket>/<key>).
    let (_data, out, pattern) = sharded("remote-s3");
    let root = TempDir::new("remote-s3-root");
    std::fs::create_dir(root.path().join("bucket")).unwrap();
    for e in std::fs::read_dir(out.path()).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, root.path().join("bucket").join(p.file_name().unwrap())).unwrap();
    }
    let server = HttpServer::start(root.path().to_path_buf());
    let secret = "hpuload-test-secret-3f9a";
    // SAFETY (of the test): no other test in this binary reads these variables.
    std::env::set_var("AWS_ACCESS_KEY_ID", "AKIDHPULOADTEST");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", secret);
    std::env::set_var("AWS_REGION", "us-east-1");
    std::env::set_var("AWS_ENDPOINT_URL", &server.url);
    let name = pattern.rsplit('/').next().unwrap();
    let remote = WebDataset::open_with(&format!("s3://bucket/{name}"), &options(None)).unwrap();
    assert!(!format!("{remote:?}").contains(secret));
    let local = WebDataset::open(&pattern).unwrap();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    assert_eq!(
        remote.read(3, ReadMode::Read, &mut a).unwrap().to_vec(),
        local.read(3, ReadMode::Read, &mut b).unwrap().to_vec()
    );
    let missing = WebDataset::open_with("s3://bucket/none-{0..1}.tar", &options(None))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("s3://bucket/none-0.tar"), "{missing}");
    assert!(!missing.contains(secret), "{missing}");
}
