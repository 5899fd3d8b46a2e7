//! The stages a sample goes through, named once: the workers' counters, [`StageTimes`] in the
//! loader's report, and `hpuload bench`'s printed report and JSON all index by [`Stage`].

use std::time::Duration;

/// One stage of the pipeline (or of the training loop, for [`Stage::Wait`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// Host: reading a sample's bytes (file, shard member, or a cached shard).
    Read,
    /// Host: decoding on the CPU.
    DecodeCpu,
    /// Host: a video's frame index (built once per video) and its clips' decode plan.
    Demux,
    /// Host: video decoding (kept frames and the frames before them from their keyframe) and
    /// the kept frames' conversion to RGB.
    DecodeVideo,
    /// Host: crop and resize on the CPU.
    Augment,
    /// Host: flip, normalize, cast and layout into the pinned batch buffer.
    Collate,
    /// Host: the router's probe (can the media engine take the file?) and, for a bitstream not
    /// read straight into its slot, the copy there.
    Route,
    /// Device: the media engine's region (and DCT-scaled) decode, resampled to the output size.
    DecodeEngine,
    /// Device: the media engine's H.264 decoding of a video sample's runs, and the kept
    /// frames' conversion to RGB.
    DecodeVideoEngine,
    /// Device: the device op after an engine decode (flip, normalize, cast, layout; for a
    /// video, each frame's crop and resize too).
    AugmentEngine,
    /// Device: host-to-device copies.
    Dma,
    /// The training loop: wall time spent waiting for a batch.
    Wait,
    /// Workers: wall time spent waiting for object storage.
    Storage,
}

/// Where a stage's time is spent, which says what its time is measured against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunsOn {
    /// CPU time of the loader's host threads.
    Host,
    /// Emulated device time (the media and DMA engines).
    Device,
    /// Wall time of the training loop.
    Loop,
    /// Wall time of workers blocked on object storage.
    Storage,
}

impl Stage {
    /// Every stage, in report order.
    pub const ALL: [Stage; 13] = [
        Stage::Read,
        Stage::DecodeCpu,
        Stage::Demux,
        Stage::DecodeVideo,
        Stage::Augment,
        Stage::Collate,
        Stage::Route,
        Stage::DecodeEngine,
        Stage::DecodeVideoEngine,
        Stage::AugmentEngine,
        Stage::Dma,
        Stage::Wait,
        Stage::Storage,
    ];

    /// The stage's name in reports and JSON (`decode_cpu`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Stage::Read => "read",
            Stage::DecodeCpu => "decode_cpu",
            Stage::Demux => "demux",
            Stage::DecodeVideo => "decode_video",
            Stage::Augment => "augment",
            Stage::Collate => "collate",
            Stage::Route => "route",
            Stage::DecodeEngine => "decode_engine",
            Stage::DecodeVideoEngine => "decode_video_engine",
            Stage::AugmentEngine => "augment_engine",
            Stage::Dma => "dma",
            Stage::Wait => "wait",
            Stage::Storage => "storage",
        }
    }

    /// Where it runs.
    pub const fn runs_on(self) -> RunsOn {
        match self {
            Stage::Read
            | Stage::DecodeCpu
            | Stage::Demux
            | Stage::DecodeVideo
            | Stage::Augment
            | Stage::Collate
            | Stage::Route => RunsOn::Host,
            Stage::DecodeEngine | Stage::DecodeVideoEngine | Stage::AugmentEngine | Stage::Dma => {
                RunsOn::Device
            }
            Stage::Wait => RunsOn::Loop,
            Stage::Storage => RunsOn::Storage,
        }
    }

    /// What it does, in a few words for people.
    pub const fn description(self) -> &'static str {
        match self {
            Stage::Read => "reading files",
            Stage::DecodeCpu => "JPEG decoding on the CPU",
            Stage::Demux => "video index and decode plan",
            Stage::DecodeVideo => "video decoding (H.264, MPEG-4) and RGB conversion",
            Stage::Augment => "crop and resize",
            Stage::Collate => "flip, normalize and cast into pinned memory",
            Stage::Route => "routing (engine probe, bitstream into its slot)",
            Stage::DecodeEngine => "region decode, crop and resize on the media engine",
            Stage::DecodeVideoEngine => "H.264 decoding on the media engine",
            Stage::AugmentEngine => "device ops after the engine",
            Stage::Dma => "host-to-device DMA",
            Stage::Wait => "the training loop waiting for batches",
            Stage::Storage => "workers waiting for object storage (wall)",
        }
    }

    /// The word for a pipeline bound by this stage ("decode-bound").
    pub const fn bound_word(self) -> &'static str {
        match self {
            Stage::DecodeCpu | Stage::DecodeVideo => "decode",
            Stage::Route => "routing",
            Stage::DecodeEngine | Stage::DecodeVideoEngine | Stage::AugmentEngine => "media-engine",
            other => other.name(),
        }
    }

    const fn slot(self) -> usize {
        self as usize
    }
}

/// Time per stage. Host stages are CPU time of the loader's worker threads (so they add up to
/// at most wall time x cores); engine stages are CPU time of the emulated media engine's
/// threads and DMA is CPU time of the emulated DMA engine's thread (device time, which real
/// hardware spends off the host); `wait` is wall time the training loop spent waiting for
/// batches, and `storage` wall time the workers spent waiting for object storage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageTimes([Duration; Stage::ALL.len()]);

impl StageTimes {
    /// The time of `stage`.
    pub fn get(&self, stage: Stage) -> Duration {
        self.0[stage.slot()]
    }

    /// Sets the time of `stage`.
    pub fn set(&mut self, stage: Stage, time: Duration) {
        self.0[stage.slot()] = time;
    }

    /// The sum over the stages that run on `on`.
    pub fn on(&self, on: RunsOn) -> Duration {
        Stage::ALL
            .iter()
            .filter(|s| s.runs_on() == on)
            .map(|&s| self.get(s))
            .sum()
    }

    /// Host CPU time of all host stages.
    pub fn host(&self) -> Duration {
        self.on(RunsOn::Host)
    }

    /// Emulated device time of all device stages.
    pub fn device(&self) -> Duration {
        self.on(RunsOn::Device)
    }

    /// `self - earlier`, stage by stage (for the time of an interval).
    pub fn since(&self, earlier: &Self) -> Self {
        Self(std::array::from_fn(|i| {
            self.0[i].saturating_sub(earlier.0[i])
        }))
    }
}

impl std::ops::Add for StageTimes {
    type Output = Self;

    /// Stage by stage (to total several intervals).
    fn add(self, other: Self) -> Self {
        Self(std::array::from_fn(|i| self.0[i] + other.0[i]))
    }
}

impl serde::Serialize for StageTimes {
    /// A map from stage name to its duration.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(Stage::ALL.len()))?;
        for stage in Stage::ALL {
            map.serialize_entry(stage.name(), &self.get(stage))?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stage_has_its_own_slot_and_name() {
        for (i, s) in Stage::ALL.iter().enumerate() {
            assert_eq!(s.slot(), i);
        }
        let names: std::collections::BTreeSet<_> = Stage::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(names.len(), Stage::ALL.len());
    }

    #[test]
    fn host_and_device_sums_take_only_their_stages() {
        let mut t = StageTimes::default();
        for (i, s) in Stage::ALL.iter().enumerate() {
            t.set(*s, Duration::from_millis(1 << i));
        }
        // Host: read, decode_cpu, demux, decode_video, augment, collate, route.
        assert_eq!(
            t.host(),
            Duration::from_millis(1 + 2 + 4 + 8 + 16 + 32 + 64)
        );
        // Device: decode_engine, decode_video_engine, augment_engine, dma.
        assert_eq!(t.device(), Duration::from_millis(128 + 256 + 512 + 1024));
        assert_eq!((t + t).since(&t), t);
    }
}
