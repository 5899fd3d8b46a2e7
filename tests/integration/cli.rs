//! The `hpuload` binary as a user meets it: bad input gets one line and exit code 2, `bench
//! --json` writes the documented schema with numbers that agree with each other, and `preview`
//! writes a labelled sheet.

use std::process::Command;

use crate::common::{dataset, TempDir};

fn hpuload(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hpuload"))
        .args(args)
        .env(
            "HPULOAD_CACHE_DIR",
            std::env::temp_dir().join("hpuload-cli-cache"),
        )
        .output()
        .expect("the binary runs")
}

#[test]
fn bad_command_line_input_gets_one_clear_line_and_exit_code_2() {
    let data = dataset("cli-bad", 4);
    let empty = TempDir::new("cli-empty");
    let bad_pipeline = empty.path().join("bad.toml");
    std::fs::write(
        &bad_pipeline,
        "name = \"x\"\n[[ops]]\nop = \"resize\"\nsize = 10\nbogus = 1\n",
    )
    .unwrap();
    let d = data.path().to_str().unwrap();
    let cases: [(&[&str], &str); 8] = [
        (
            &["bench", "--data", "/nonexistent/folder"],
            "/nonexistent/folder",
        ),
        (
            &["bench", "--data", empty.path().to_str().unwrap()],
            "no images",
        ),
        (&["bench", "--data", d, "--pipeline", "nosuch"], "nosuch"),
        (
            &[
                "bench",
                "--data",
                d,
                "--pipeline",
                bad_pipeline.to_str().unwrap(),
            ],
            "unknown field `bogus`",
        ),
        (&["bench", "--data", d, "--batch", "0"], "batch size"),
        (&["bench", "--data", d, "--step-ms", "-1"], "--step-ms"),
        (&["bench", "--data", d, "--epochs", "0"], "--epochs"),
        (
            &["preview", "--data", d, "--batch", "0", "--out", "x.png"],
            "--batch",
        ),
    ];
    for (args, needle) in cases {
        let out = hpuload(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{args:?}: one line, got {stderr}");
        assert!(lines[0].starts_with("error: "), "{args:?}: {stderr}");
        assert!(lines[0].contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    // Usage errors come from clap: also exit code 2, never a panic.
    let out = hpuload(&["bench", "--batch", "many"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn bench_json_follows_the_schema_and_its_numbers_agree() {
    let data = dataset("cli-json", 22);
    let dir = TempDir::new("cli-json-out");
    let json = dir.path().join("report.json");
    let out = hpuload(&[
        "bench",
        "--data",
        data.path().to_str().unwrap(),
        "--pipeline",
        "resnet50_eval",
        "--batch",
        "8",
        "--epochs",
        "2",
        "--step-ms",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("images/s"), "{stdout}");
    assert!(
        stdout.contains("-bound"),
        "the bound stage in words: {stdout}"
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for field in [
        "images_per_sec",
        "time_to_first_batch_sec",
        "epochs",
        "images",
        "batches",
        "backend",
        "workers",
        "batch_size",
        "stages",
        "fallbacks",
        "skipped",
        "peak_rss_bytes",
        "pinned",
    ] {
        assert!(r.get(field).is_some(), "missing {field}");
    }
    assert_eq!(r["schema_version"], 1);
    // 22 images, batch 8, padded last batch: 3 batches and 22 real images per epoch.
    assert_eq!(r["epochs"], 2);
    assert_eq!(r["images"], 44);
    assert_eq!(r["batches"], 6);
    assert_eq!(r["backend"], "auto");
    assert_eq!(r["batch_size"], 8);
    let f = |k: &str| r[k].as_f64().unwrap();
    assert!(f("images_per_sec") > 0.0 && f("time_to_first_batch_sec") > 0.0);
    // Host and engine stages are CPU time of this process's threads: they fit in its CPU time,
    // which fits in wall time x cores.
    let slack = 0.05;
    assert!(
        f("host_cpu_sec") + f("device_sec") <= f("process_cpu_sec") * 1.1 + slack,
        "{r}"
    );
    assert!(
        f("process_cpu_sec") <= f("wall_sec") * f("cores") * 1.1 + slack,
        "{r}"
    );
    let stages = r["stages"].as_object().unwrap();
    let host: f64 = stages
        .values()
        .filter(|s| s["on"] == "host")
        .map(|s| s["seconds"].as_f64().unwrap())
        .sum();
    assert!((host - f("host_cpu_sec")).abs() < 1e-6);
    assert!(r["accelerator_idle_pct"].as_f64().is_some());
    assert!(r["pinned"].is_boolean());
    assert!(r["video"].is_null() && r["per_epoch"][0]["video"].is_null());
}

#[test]
fn preview_writes_a_sheet_with_one_cell_per_sample() {
    let data = dataset("cli-preview", 10);
    let dir = TempDir::new("cli-preview-out");
    let png = dir.path().join("grid.png");
    let out = hpuload(&[
        "preview",
        "--data",
        data.path().to_str().unwrap(),
        "--batch",
        "9",
        "--out",
        png.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sheet = image::open(&png).unwrap().to_rgb8();
    // 3 x 3 cells of 224 x (224 + 12-pixel label), 4-pixel gaps.
    assert_eq!(sheet.dimensions(), (3 * 228 + 4, 3 * 240 + 4));
    let distinct: std::collections::HashSet<_> = sheet.pixels().map(|p| p.0).collect();
    assert!(distinct.len() > 1000, "real images, not a blank sheet");
}

#[test]
fn bench_measures_a_damaged_folder_with_a_raised_error_budget_and_names_a_file_under_fail() {
    let data = dataset("cli-damaged", 30);
    let mut files: Vec<_> = walk(data.path());
    files.sort();
    // 3 of 30 files damaged: 10%, over the default 1% budget.
    for f in &files[..3] {
        std::fs::write(f, b"not a jpeg").unwrap();
    }
    let base = [
        "bench",
        "--data",
        data.path().to_str().unwrap(),
        "--pipeline",
        "resnet50_eval",
        "--batch",
        "8",
        "--epochs",
        "1",
    ];
    let default = hpuload(&base);
    assert_eq!(default.status.code(), Some(2), "over the default budget");
    assert!(String::from_utf8_lossy(&default.stderr).contains("error budget"));

    let raised = hpuload(&[&base[..], &["--error-budget", "0.2"]].concat());
    assert!(
        raised.status.success(),
        "{}",
        String::from_utf8_lossy(&raised.stderr)
    );
    let stdout = String::from_utf8_lossy(&raised.stdout);
    assert!(
        stdout.contains("skipped: 6"),
        "3 per epoch, 2 epochs: {stdout}"
    );

    let fail = hpuload(&[&base[..], &["--on-error", "fail"]].concat());
    assert_eq!(fail.status.code(), Some(2));
    let line = String::from_utf8_lossy(&fail.stderr);
    assert!(
        files[..3]
            .iter()
            .any(|f| line.contains(f.to_str().unwrap())),
        "{line}"
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn bench_help_lists_every_builtin_pipeline_name() {
    let help = hpuload(&["bench", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    for name in hpuload::pipelines::all_names() {
        assert!(
            text.contains(name),
            "`bench --help` does not list {name}: {text}"
        );
    }
}

#[test]
fn make_dataset_video_writes_clips_that_bench_video_loads_and_indexes_once() {
    let out = TempDir::new("cli-videos");
    let dir = out.path().join("clips");
    let d = dir.to_str().unwrap();
    let made = hpuload(&[
        "make-dataset",
        "--video",
        "--out",
        d,
        "--videos",
        "3",
        "--frames",
        "10",
    ]);
    assert!(made.status.success(), "{made:?}");
    for (class, clip) in [(0, 0), (1, 1), (2, 2)] {
        let path = dir.join(format!("class_{class:02}/clip_{clip:06}.mp4"));
        let index = hpuload::video::VideoIndex::open(&path).unwrap();
        assert_eq!((index.size, index.frames.len()), ((640, 360), 10));
    }
    let bench = |data: &str, expect: &str| {
        let run = hpuload(&[
            "bench",
            "--video",
            "--data",
            data,
            "--frames-per-clip",
            "4",
            "--batch",
            "3",
            "--epochs",
            "1",
            "--workers",
            "2",
        ]);
        let text = String::from_utf8_lossy(&run.stdout).into_owned();
        assert!(run.status.success(), "{run:?}");
        assert!(text.contains(expect), "{text}");
        assert!(text.contains("3 videos"), "{text}");
    };
    bench(d, "(0 from the index file, 3 indexed, 0 failed; saved to");
    bench(d, "(3 from the index file, 0 indexed, 0 failed)");

    // The JSON report's video numbers: the frames of the measured epochs, and the decoding
    // of the frames no clip keeps, part of the video decoding stage's time.
    let json = out.path().join("video.json");
    let run = hpuload(&[
        "bench",
        "--video",
        "--data",
        d,
        "--frames-per-clip",
        "4",
        "--batch",
        "3",
        "--epochs",
        "2",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{run:?}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let v = &r["video"];
    let n = |k: &str| v[k].as_f64().unwrap();
    let epochs: Vec<&serde_json::Value> = r["per_epoch"].as_array().unwrap()[1..]
        .iter()
        .map(|e| &e["video"])
        .collect();
    for k in ["frames_decoded", "frames_discarded", "frames_skipped"] {
        let sum: f64 = epochs.iter().map(|e| e[k].as_f64().unwrap()).sum();
        assert_eq!(n(k), sum, "{k}: {r}");
    }
    assert!(n("clips_per_sec") > 0.0 && n("frames_kept_per_sec") > n("clips_per_sec"));
    assert!(n("frames_discarded") <= n("frames_decoded"), "{r}");
    let decode = r["stages"]["decode_video"]["seconds"].as_f64().unwrap()
        + r["stages"]["decode_video_engine"]["seconds"]
            .as_f64()
            .unwrap();
    assert!(n("discarded_decode_sec") <= decode, "{r}");
    assert!((n("discarded_share_of_decode") - n("discarded_decode_sec") / decode).abs() < 1e-6);
    // (A worker times some samples only when they are cheap, so time may be zero for some
    // discarded frames, never the other way round.)
    assert!(
        n("frames_discarded") > 0.0 || n("discarded_decode_sec") == 0.0,
        "{r}"
    );

    // `make-shards --video`: the clips as tar shards, which `bench --video` reads as well.
    let shards = out.path().join("shards");
    let made = hpuload(&[
        "make-shards",
        "--video",
        "--data",
        d,
        "--out",
        shards.to_str().unwrap(),
        "--shard-size",
        "1",
    ]);
    assert!(made.status.success(), "{made:?}");
    let pattern = shards.join("shard-{000000..000002}.tar");
    bench(
        pattern.to_str().unwrap(),
        "(0 from the index file, 3 indexed",
    );
    bench(
        shards.to_str().unwrap(),
        "(3 from the index file, 0 indexed",
    );

    // `preview --video`: each clip a row of its frames.
    let png = out.path().join("clips.png");
    let shown = hpuload(&[
        "preview",
        "--video",
        "--data",
        d,
        "--frames-per-clip",
        "4",
        "--frame-step",
        "2",
        "--batch",
        "2",
        "--pipeline",
        "resnet50_eval",
        "--out",
        png.to_str().unwrap(),
    ]);
    assert!(shown.status.success(), "{shown:?}");
    let sheet = image::open(&png).unwrap().to_rgb8();
    // 2 rows of 4 cells of 224 x (224 + 12-pixel label), 4-pixel gaps.
    assert_eq!(sheet.dimensions(), (4 * 228 + 4, 2 * 240 + 4));
    // The camera moves: a clip's first and last frames differ.
    let cell = |k: u32| -> Vec<u8> {
        let x0 = 4 + k * 228;
        (4..228)
            .flat_map(|y| (x0..x0 + 224).flat_map(move |x| [x, y]))
            .collect::<Vec<u32>>()
            .chunks(2)
            .flat_map(|p| sheet.get_pixel(p[0], p[1]).0)
            .collect()
    };
    assert_ne!(cell(0), cell(3));
    let refused = hpuload(&["make-dataset", "--video", "--out", d, "--videos", "0"]);
    assert_eq!(refused.status.code(), Some(2));
}
