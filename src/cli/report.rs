//! The bench report: printed for people, and written as JSON with a stable schema
//! (`docs/bench-json.md`; bump `SCHEMA_VERSION` on any incompatible change).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use hpuload::{Loader, RunsOn, Stage, StageTimes};
use serde::Serialize;

/// Version of the JSON schema.
pub const SCHEMA_VERSION: u32 = 1;

/// Below this share of wall time spent waiting, the loader "keeps up" with the training step.
const KEEPS_UP_IDLE_PCT: f64 = 5.0;

/// The width of the breakdown's column of stage descriptions: the longest one's.
const DESCRIBED: usize = {
    let (mut i, mut widest) = (0, 0);
    while i < Stage::ALL.len() {
        let n = Stage::ALL[i].description().len();
        if n > widest {
            widest = n;
        }
        i += 1;
    }
    widest
};

/// One epoch's measurements.
#[derive(Clone, Debug, Serialize)]
pub struct EpochStats {
    pub epoch: u64,
    pub warm_up: bool,
    pub images: u64,
    pub batches: u64,
    pub wall_sec: f64,
    pub images_per_sec: f64,
    pub first_batch_sec: f64,
    pub process_cpu_sec: f64,
    pub rss_bytes: u64,
    #[serde(skip)]
    pub stages: StageTimes,
    #[serde(skip)]
    pub samples_loaded: u64,
    /// Detection boxes in the targets of the samples loaded; `null` for classification.
    pub boxes: Option<u64>,
    /// Video (`--video`): clips, frames and the frames decoded only to reach kept ones;
    /// `null` for images.
    pub video: Option<EpochVideo>,
}

/// One epoch's video numbers.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct EpochVideo {
    pub clips_per_sec: f64,
    /// Frames of the clips (kept frames) per second.
    pub frames_kept_per_sec: f64,
    pub frames_decoded: u64,
    /// Of the frames decoded, those decoded only to reach a kept one (from its keyframe).
    pub frames_discarded: u64,
    /// Frames between a keyframe and a kept frame passed over undecoded (not kept, not
    /// referred to).
    pub frames_skipped: u64,
    /// CPU time (host and emulated engine) spent decoding the discarded frames: part of the
    /// `decode_video` and `decode_video_engine` stages.
    pub discarded_decode_sec: f64,
}

impl EpochVideo {
    /// The line printed after each epoch, before its [`EpochStats::line`].
    pub fn line(&self) -> String {
        format!(
            "  video: {:.1} clips/s, {:.0} frames/s kept; {} frames decoded, {} of them ({:.0}%) \
             only to reach a kept one, {:.2}s of decoding; {} passed over undecoded (not kept, \
             not referred to)",
            self.clips_per_sec,
            self.frames_kept_per_sec,
            self.frames_decoded,
            self.frames_discarded,
            100.0 * self.frames_discarded as f64 / self.frames_decoded.max(1) as f64,
            self.discarded_decode_sec,
            self.frames_skipped,
        )
    }
}

/// Video over the measured epochs (`--video`).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct VideoReport {
    /// The rates' medians over the measured epochs, the counts' and times' sums.
    #[serde(flatten)]
    pub measured: EpochVideo,
    /// The discarded frames' decoding per loaded sample, milliseconds.
    pub discarded_decode_ms_per_sample: f64,
    /// Its share of the video decoding stages' time (`decode_video` and
    /// `decode_video_engine`, which also hold the kept frames' decoding and RGB conversion).
    pub discarded_share_of_decode: f64,
}

impl EpochStats {
    /// The plain line printed after each epoch.
    pub fn line(&self) -> String {
        let boxes = self.boxes.map_or(String::new(), |b| {
            format!(", {:.0} boxes/s", b as f64 / self.wall_sec.max(1e-9))
        });
        format!(
            "epoch {}{}: {} images in {:.2}s = {:.0} images/s{boxes}, first batch after {:.3}s, \
             CPU {:.0}%, RSS {} MiB",
            self.epoch,
            if self.warm_up { " (warm-up)" } else { "" },
            self.images,
            self.wall_sec,
            self.images_per_sec,
            self.first_batch_sec,
            100.0 * self.process_cpu_sec / self.wall_sec.max(1e-9),
            self.rss_bytes >> 20
        )
    }
}

/// One stage's time over the measured epochs.
#[derive(Clone, Debug, Serialize)]
pub struct StageReport {
    /// `host` (CPU time of loader threads), `device` (emulated device time), `loop` (wall
    /// time of the training loop) or `storage` (wall time of workers waiting for storage).
    pub on: RunsOn,
    pub seconds: f64,
    pub ms_per_image: f64,
}

/// Which resource bounds throughput.
#[derive(Clone, Debug, Serialize)]
pub struct Bound {
    /// A stage name from `stages`, or `media_engine`.
    pub stage: String,
    /// That stage's share of host CPU time (of device time for device stages), 0..1.
    pub share: f64,
    pub summary: String,
}

/// The whole report; field meanings in docs/bench-json.md.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub schema_version: u32,
    pub hpuload_version: &'static str,
    pub dataset: String,
    pub dataset_images: usize,
    pub pipeline: String,
    pub backend: &'static str,
    pub workers: usize,
    pub batch_size: usize,
    pub prefetch: usize,
    pub dtype: hpuload::Dtype,
    pub layout: hpuload::Layout,
    pub output_hw: Option<[u32; 2]>,
    pub output_max_pixels: u64,
    pub batches_per_epoch: usize,
    pub epochs: u64,
    pub images: u64,
    pub batches: u64,
    pub images_per_sec: f64,
    pub images_per_sec_min: f64,
    pub images_per_sec_max: f64,
    /// Detection: boxes in the targets per second (median over the measured epochs).
    pub boxes_per_sec: Option<f64>,
    pub time_to_first_batch_sec: f64,
    pub wall_sec: f64,
    pub process_cpu_sec: f64,
    pub cores: usize,
    pub host_cpu_sec: f64,
    pub device_sec: f64,
    pub stages: BTreeMap<&'static str, StageReport>,
    pub bound: Bound,
    pub samples_loaded: u64,
    pub hw_samples: u64,
    pub hw_dct_scaled: u64,
    pub fallbacks: BTreeMap<String, u64>,
    pub skipped: u64,
    pub skipped_by_reason: BTreeMap<String, u64>,
    pub skips: Vec<hpuload::Skip>,
    pub bytes_read_per_image: f64,
    pub bytes_dma_per_image: f64,
    pub peak_rss_bytes: u64,
    pub pinned: bool,
    pub pinned_bytes: u64,
    pub step_ms: Option<f64>,
    pub accelerator_idle_pct: Option<f64>,
    pub keeps_up: Option<bool>,
    pub per_epoch: Vec<EpochStats>,
    /// Object storage over the measured epochs; `null` for local data.
    pub storage: Option<hpuload::StorageReport>,
    /// Video (`--video`) over the measured epochs; `null` for images.
    pub video: Option<VideoReport>,
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The run's settings the report states (from `bench`'s arguments).
pub struct Settings {
    /// The backend's name.
    pub backend: &'static str,
    pub batch_size: usize,
    pub prefetch: usize,
    /// The emulated training step, if any.
    pub step_ms: Option<f64>,
}

impl BenchReport {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        args: &Settings,
        origin: &Path,
        pipeline: &str,
        workers: usize,
        loader: &Loader,
        per_epoch: Vec<EpochStats>,
        time_to_first_batch: Duration,
        peak_rss_bytes: u64,
        storage: Option<hpuload::StorageReport>,
    ) -> Self {
        let measured: Vec<&EpochStats> = per_epoch.iter().filter(|e| !e.warm_up).collect();
        let sum = |f: &dyn Fn(&EpochStats) -> f64| measured.iter().map(|e| f(e)).sum::<f64>();
        let images = measured.iter().map(|e| e.images).sum::<u64>();
        let stage_times = measured
            .iter()
            .fold(StageTimes::default(), |total, e| total + e.stages);
        let loaded = measured
            .iter()
            .map(|e| e.samples_loaded)
            .sum::<u64>()
            .max(1);
        let stages = Stage::ALL
            .iter()
            .map(|&stage| {
                let d = stage_times.get(stage);
                let per = if stage.runs_on() == RunsOn::Loop {
                    images
                } else {
                    loaded
                };
                (
                    stage.name(),
                    StageReport {
                        on: stage.runs_on(),
                        seconds: d.as_secs_f64(),
                        ms_per_image: d.as_secs_f64() * 1e3 / per.max(1) as f64,
                    },
                )
            })
            .collect();
        let rates: Vec<f64> = measured.iter().map(|e| e.images_per_sec).collect();
        let video = measured
            .iter()
            .map(|e| e.video)
            .collect::<Option<Vec<EpochVideo>>>()
            .filter(|v| !v.is_empty())
            .map(|v| {
                let discarded: f64 = v.iter().map(|e| e.discarded_decode_sec).sum();
                let decode = (stage_times.get(Stage::DecodeVideo)
                    + stage_times.get(Stage::DecodeVideoEngine))
                .as_secs_f64();
                VideoReport {
                    measured: EpochVideo {
                        clips_per_sec: median(
                            &v.iter().map(|e| e.clips_per_sec).collect::<Vec<_>>(),
                        ),
                        frames_kept_per_sec: median(
                            &v.iter().map(|e| e.frames_kept_per_sec).collect::<Vec<_>>(),
                        ),
                        frames_decoded: v.iter().map(|e| e.frames_decoded).sum(),
                        frames_discarded: v.iter().map(|e| e.frames_discarded).sum(),
                        frames_skipped: v.iter().map(|e| e.frames_skipped).sum(),
                        discarded_decode_sec: discarded,
                    },
                    discarded_decode_ms_per_sample: discarded * 1e3 / loaded as f64,
                    discarded_share_of_decode: discarded / decode.max(1e-9),
                }
            });
        let wall_sec = sum(&|e| e.wall_sec);
        let r = loader.report();
        let step_ms = args.step_ms;
        let idle = step_ms
            .map(|_| 100.0 * stage_times.get(Stage::Wait).as_secs_f64() / wall_sec.max(1e-9));
        let (dtype, layout, size) = loader.output();
        Self {
            schema_version: SCHEMA_VERSION,
            hpuload_version: env!("CARGO_PKG_VERSION"),
            dataset: origin.display().to_string(),
            dataset_images: loader.dataset_len(),
            pipeline: pipeline.to_string(),
            backend: args.backend,
            workers,
            batch_size: args.batch_size,
            prefetch: args.prefetch,
            dtype,
            layout,
            output_hw: match size {
                hpuload::OutputSize::Fixed(hw) => Some(hw),
                hpuload::OutputSize::PerSample { .. } => None,
            },
            output_max_pixels: size.max_pixels(),
            batches_per_epoch: loader.batches_per_epoch(),
            epochs: measured.len() as u64,
            images,
            batches: measured.iter().map(|e| e.batches).sum(),
            images_per_sec: median(&rates),
            images_per_sec_min: rates.iter().copied().fold(f64::INFINITY, f64::min),
            images_per_sec_max: rates.iter().copied().fold(0.0, f64::max),
            boxes_per_sec: measured
                .iter()
                .map(|e| e.boxes.map(|b| b as f64 / e.wall_sec.max(1e-9)))
                .collect::<Option<Vec<f64>>>()
                .filter(|r| !r.is_empty())
                .map(|r| median(&r)),
            time_to_first_batch_sec: time_to_first_batch.as_secs_f64(),
            wall_sec,
            process_cpu_sec: sum(&|e| e.process_cpu_sec),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            host_cpu_sec: stage_times.host().as_secs_f64(),
            device_sec: stage_times.device().as_secs_f64(),
            stages,
            bound: bound(&stage_times, wall_sec * workers as f64),
            samples_loaded: r.samples_loaded,
            hw_samples: r.hw_samples,
            hw_dct_scaled: r.hw_dct_scaled,
            fallbacks: r.fallbacks.clone(),
            skipped: r.skipped,
            skipped_by_reason: r.skipped_by_reason.clone(),
            skips: r.skips.iter().take(10).cloned().collect(),
            bytes_read_per_image: r.bytes_read as f64 / r.samples_loaded.max(1) as f64,
            bytes_dma_per_image: r.bytes_dma as f64 / r.samples_loaded.max(1) as f64,
            peak_rss_bytes,
            pinned: r.pinned,
            pinned_bytes: r.pinned_bytes,
            step_ms,
            accelerator_idle_pct: idle,
            keeps_up: idle.map(|i| i < KEEPS_UP_IDLE_PCT),
            per_epoch,
            storage,
            video,
        }
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("the report is plain data")
    }

    /// Prints the report for a person.
    pub fn print(&self) {
        println!(
            "images/s: {:.0} (median of {} measured epochs; min {:.0}, max {:.0})",
            self.images_per_sec, self.epochs, self.images_per_sec_min, self.images_per_sec_max
        );
        if let Some(b) = self.boxes_per_sec {
            println!("boxes/s: {b:.0} (in the targets of the samples loaded; median)");
        }
        println!(
            "time to first batch: {:.3}s (from build() to the first device batch)",
            self.time_to_first_batch_sec
        );
        println!("where the time goes (measured epochs, per loaded sample):");
        let host_total = self.host_cpu_sec.max(1e-9);
        let device_total = self.device_sec.max(1e-9);
        for stage in Stage::ALL {
            let s = &self.stages[stage.name()];
            let share = match stage.runs_on() {
                RunsOn::Loop => continue,
                RunsOn::Storage if self.storage.is_none() => continue,
                RunsOn::Host => s.seconds / host_total,
                // Share of the workers' wall time.
                RunsOn::Storage => s.seconds / (self.wall_sec * self.workers as f64).max(1e-9),
                RunsOn::Device => s.seconds / device_total,
            };
            let on = match stage.runs_on() {
                RunsOn::Host => "host",
                RunsOn::Device => "device",
                RunsOn::Loop => "loop",
                RunsOn::Storage => "storage",
            };
            println!(
                "  {on:<6} {:<DESCRIBED$} {:>7.3} ms {:>5.1}%",
                stage.description(),
                s.ms_per_image,
                100.0 * share
            );
            // The decoding of frames no clip keeps, within the video decoding stage (the one
            // that holds most of it: the host's, or the engine's).
            if let Some(v) = &self.video {
                let other = match stage {
                    Stage::DecodeVideo => Stage::DecodeVideoEngine,
                    Stage::DecodeVideoEngine => Stage::DecodeVideo,
                    _ => continue,
                };
                if s.seconds >= self.stages[other.name()].seconds
                    && v.measured.discarded_decode_sec > 0.0
                {
                    let total = if on == "host" {
                        host_total
                    } else {
                        device_total
                    };
                    println!(
                        "  {:<6}   {:<width$} {:>7.3} ms {:>5.1}%",
                        "",
                        "of which frames decoded only to reach a kept one",
                        v.discarded_decode_ms_per_sample,
                        100.0 * v.measured.discarded_decode_sec / total,
                        width = DESCRIBED - 2
                    );
                }
            }
        }
        println!(
            "host CPU {:.2}s + emulated device {:.2}s over {:.2}s of wall time; the process used \
             {:.0}% of {} cores",
            self.host_cpu_sec,
            self.device_sec,
            self.wall_sec,
            100.0 * self.process_cpu_sec / (self.wall_sec * self.cores as f64).max(1e-9),
            self.cores
        );
        println!("{}", self.bound.summary);
        if let (Some(step), Some(idle)) = (self.step_ms, self.accelerator_idle_pct) {
            if self.keeps_up == Some(true) {
                println!(
                    "with a {step} ms training step the loader keeps up: the accelerator waits \
                     {idle:.1}% of the time"
                );
            } else {
                println!(
                    "with a {step} ms training step the loader does NOT keep up: the accelerator \
                     sits idle {idle:.1}% of the time"
                );
            }
        }
        let by = |m: &BTreeMap<String, u64>| {
            if m.is_empty() {
                "none".to_string()
            } else {
                m.iter()
                    .map(|(k, v)| format!("{v} {k}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        println!(
            "media engine decoded {} of {} samples ({} DCT-scaled); fallbacks to the CPU: {}",
            self.hw_samples,
            self.samples_loaded,
            self.hw_dct_scaled,
            by(&self.fallbacks)
        );
        println!(
            "skipped: {} ({})",
            self.skipped,
            by(&self.skipped_by_reason)
        );
        for s in &self.skips {
            println!("  {}", s.message);
        }
        println!(
            "bytes per image: {:.0} read, {:.0} DMA'd to the device",
            self.bytes_read_per_image, self.bytes_dma_per_image
        );
        if let Some(st) = &self.storage {
            let loaded = self
                .per_epoch
                .iter()
                .filter(|e| !e.warm_up)
                .map(|e| e.samples_loaded)
                .sum::<u64>()
                .max(1) as f64;
            println!(
                "object storage (measured epochs): {} requests ({:.2} per image), {:.1} MiB \
                 fetched, {:.0}% of samples from the local shard cache ({} shards cached, {} \
                 downloads failed), workers waited {:.2}s",
                st.requests,
                st.requests as f64 / loaded,
                st.bytes_fetched as f64 / f64::from(1 << 20),
                100.0 * st.cache_hits as f64 / loaded,
                st.shards_cached,
                st.download_failures,
                st.wait.as_secs_f64()
            );
        }
        println!(
            "peak RSS {} MiB; batch buffers {} MiB, page-locked: {}",
            self.peak_rss_bytes >> 20,
            self.pinned_bytes >> 20,
            if self.pinned {
                "yes"
            } else {
                "no (pageable: raise `ulimit -l`)"
            }
        );
    }
}

/// Names the bounding resource: the media engine when its (emulated) time exceeds the host
/// pipeline's, else DMA when that does, else the host stage with the most CPU time.
fn bound(s: &StageTimes, worker_wall_sec: f64) -> Bound {
    let host = s.host().as_secs_f64().max(1e-9);
    let storage = s.get(Stage::Storage).as_secs_f64() / worker_wall_sec.max(1e-9);
    if storage > 0.5 {
        return Bound {
            stage: Stage::Storage.name().into(),
            share: storage,
            summary: format!(
                "storage-bound: workers spent {:.0}% of their time waiting for object storage",
                100.0 * storage
            ),
        };
    }
    let engine = (s.get(Stage::DecodeEngine)
        + s.get(Stage::DecodeVideoEngine)
        + s.get(Stage::AugmentEngine))
    .as_secs_f64();
    let dma = s.get(Stage::Dma).as_secs_f64();
    if engine > host && engine >= dma {
        return Bound {
            stage: "media_engine".into(),
            share: engine / s.device().as_secs_f64().max(1e-9),
            summary: format!(
                "media-engine-bound: the emulated engine took {engine:.2}s against {host:.2}s of \
                 host pipeline CPU time (emulated here on the same cores; real hardware takes \
                 it off the host)"
            ),
        };
    }
    if dma > host {
        return Bound {
            stage: Stage::Dma.name().into(),
            share: dma / s.device().as_secs_f64().max(1e-9),
            summary: format!(
                "DMA-bound: {dma:.2}s of host-to-device copies against {host:.2}s of host CPU time"
            ),
        };
    }
    let stage = Stage::ALL
        .into_iter()
        .filter(|st| st.runs_on() == RunsOn::Host)
        .max_by_key(|&st| s.get(st))
        .expect("there are host stages");
    let share = s.get(stage).as_secs_f64() / host;
    Bound {
        stage: stage.name().into(),
        share,
        summary: format!(
            "{}-bound: {:.0}% of host CPU time in {}",
            stage.bound_word(),
            100.0 * share,
            stage.description()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_video_decoded_on_the_media_engine_makes_the_run_media_engine_bound() {
        let mut s = StageTimes::default();
        // The host's own work outweighs the device op alone, not the engine's decoding.
        s.set(Stage::Demux, Duration::from_secs(1));
        s.set(Stage::DecodeVideoEngine, Duration::from_secs(5));
        s.set(Stage::AugmentEngine, Duration::from_millis(700));
        s.set(Stage::Dma, Duration::from_millis(20));
        let b = bound(&s, 6.0);
        assert_eq!(b.stage, "media_engine", "{}", b.summary);
        assert!(b.summary.contains("5.70s"), "{}", b.summary);
    }

    #[test]
    fn the_breakdowns_description_column_holds_every_stage() {
        assert!(Stage::ALL
            .iter()
            .all(|s| s.description().len() <= DESCRIBED));
        assert!(Stage::ALL
            .iter()
            .any(|s| s.description().len() == DESCRIBED));
    }
}
