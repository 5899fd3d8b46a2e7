//! What the worker threads do: fill one slot of a batch buffer per job (decoded on the CPU, or
//! the compressed bitstream for the media engine, through the skip/replace policy of
//! `replace.rs`); the worker that fills a batch's last slot finishes it (`batch.rs`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::Receiver;

use super::batch::BatchWork;
use super::cpu::Scratch;
use super::replace::{fill, write_label, Filled, Skips};
use super::route::HwSlot;
use super::{Backend, Shared};
use crate::stage::{Stage, StageTimes};
use crate::{Error, SampleError, SampleErrorKind};

/// A duration summed from many threads.
#[derive(Default)]
pub(crate) struct Nanos(AtomicU64);

impl Nanos {
    fn add(&self, d: Duration) {
        self.0.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }
    pub fn get(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

#[derive(Default)]
pub(crate) struct StageCounters {
    times: [Nanos; Stage::ALL.len()],
    pub samples: AtomicU64,
    pub hw_samples: AtomicU64,
    pub hw_scaled: AtomicU64,
    pub bytes_read: AtomicU64,
    /// Boxes left out of detection targets, past `max_boxes`.
    pub boxes_over_max: AtomicU64,
    /// Boxes written into detection targets.
    pub boxes: AtomicU64,
    /// Video frames decoded, and of those the ones no clip kept (keyframe lead-ins).
    pub frames_decoded: AtomicU64,
    pub frames_discarded: AtomicU64,
    /// CPU time spent decoding the discarded frames, nanoseconds: on the host, and on the
    /// emulated media engine.
    pub frames_discarded_ns: [AtomicU64; 2],
    /// Video frames passed over undecoded (not kept, not referred to).
    pub frames_skipped: AtomicU64,
    pub fallbacks: Mutex<std::collections::BTreeMap<&'static str, u64>>,
}

impl StageCounters {
    /// Adds `time` to `stage`.
    pub fn add(&self, stage: Stage, time: Duration) {
        self.times[stage as usize].add(time);
    }

    /// The time counted so far, per stage (zero for stages not timed by the workers).
    pub fn times(&self) -> StageTimes {
        let mut t = StageTimes::default();
        for stage in Stage::ALL {
            t.set(stage, self.times[stage as usize].get());
        }
        t
    }
}

/// One slot of one batch.
pub(crate) struct Job {
    pub batch: Arc<BatchWork>,
    pub slot: usize,
}

pub(crate) fn worker_main(shared: &Arc<Shared>, jobs: &Receiver<Job>) {
    let mut scratch = Scratch::new(shared);
    for job in jobs {
        let mut hw = None;
        if !job.batch.cancel.load(Ordering::Relaxed) {
            let outcome = catch_unwind(AssertUnwindSafe(|| fill_slot(shared, &mut scratch, &job)));
            match outcome {
                Ok(routed) => hw = routed,
                Err(panic) => {
                    let message = crate::hpu::panic_message(panic.as_ref());
                    let index = job.batch.indices[job.slot].load(Ordering::Relaxed);
                    let path = shared.entry(index).path.clone();
                    job.batch.fail(Error::Sample(SampleError {
                        index,
                        path,
                        kind: SampleErrorKind::Panic(message),
                    }));
                    scratch = Scratch::new(shared);
                }
            }
        }
        job.batch.filled(shared, job.slot, hw);
    }
}

/// Fills the job's slot; a sample routed to the media engine is returned, its bitstream in the
/// slot (or uploaded).
fn fill_slot(shared: &Shared, scratch: &mut Scratch, job: &Job) -> Option<HwSlot> {
    let batch = &job.batch;
    let original = batch.indices[job.slot].load(Ordering::Relaxed);
    let slot = batch.slots.slot_mut(job.slot);
    let engine = (shared.backend != Backend::Cpu).then_some(&batch.hpu);
    let skips = (batch.at(shared), &**batch as &dyn Skips);
    let (index, routed) = match fill(shared, scratch, skips, original, slot.sample, engine, None) {
        Ok(Filled::Cpu {
            index,
            label,
            detect,
        }) => {
            write_label(shared, index, label, detect.as_ref(), slot.label);
            (index, None)
        }
        Ok(Filled::Hw(h)) => {
            let (index, label) = (h.index, shared.entry(h.index).label);
            // The boxes are the plan's, whichever path decodes the pixels; the plan stays
            // whole with the sample, for a fallback.
            write_label(shared, index, label, h.detect(), slot.label);
            let routed = HwSlot {
                slot: job.slot,
                ..h
            };
            (index, Some(routed))
        }
        Err(e) => {
            batch.fail(e);
            return None;
        }
    };
    batch.indices[job.slot].store(index, Ordering::Relaxed);
    routed
}
