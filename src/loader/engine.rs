//! The media engine's side of a batch: a sample routed to it ([`HwSlot`]), the job that decodes
//! it on an engine ([`EngineJob`], whose drop counts the batch down however the job ends), and
//! the fallback to the CPU path when the engine fails on a file it had accepted.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use hpuload_decoders::jpeg::{DecodePlan, ResizeRequest};

use super::batch::BatchWork;
use super::cpu::Scratch;
use super::replace::{fill, write_label, Filled, Skips};
use super::route::{count_fallback, HwSlot, HwWork};
use super::{lock, Backend, Shared};
use crate::hpu::{
    CopyRegion, Destination, DeviceSlice, EngineError, HostSlot, HpuError, JobFailure, MediaJob,
    MediaWork,
};
use crate::pinned::PinnedBuffer;
use crate::stage::Stage;
use crate::tensor::Placement;
use crate::video::{ClipsError, DecodeCounts, VideoFailure};
use crate::{Error, SampleError, SampleErrorKind};

/// One media-engine job's share of its batch. Dropping it counts the batch down (the last one
/// completes the batch), however the job ended: a job that did not run to its end (it panicked
/// on the engine, or was dropped unrun) first fails the batch, naming the sample's file, so no
/// fault on an engine can leave an epoch waiting.
pub(super) struct EngineJob {
    pub work: Arc<BatchWork>,
    pub shared: Arc<Shared>,
    pub index: usize,
    pub ran: bool,
}

impl EngineJob {
    /// The job ran to its end (its slot holds a sample, or the batch holds its error).
    pub fn finished(&mut self) {
        self.ran = true;
    }
}

impl Drop for EngineJob {
    fn drop(&mut self) {
        if !self.ran {
            let path = self.shared.entry(self.index).path.clone();
            self.work.fail(Error::Sample(SampleError {
                index: self.index,
                path,
                kind: SampleErrorKind::Panic(
                    "the media engine's job for this sample did not finish".into(),
                ),
            }));
        }
        self.work.count_down(&self.shared);
    }
}

/// Submits sample `h`'s decode to the media engine. The job's output goes to the sample's slot
/// of the device tensor, or of the pinned buffer for a host batch; `guard` rides with it and
/// counts the batch down when the job is done (or dropped).
pub(super) fn submit(guard: EngineJob, mut h: HwSlot) -> Result<(), HpuError> {
    let (work, shared) = (Arc::clone(&guard.work), Arc::clone(&guard.shared));
    let sample = shared.layout.sample(h.slot);
    let source = match &h.own {
        Some(own) => DeviceSlice {
            buffer: own.clone(),
            offset: 0,
            len: h.len,
        },
        None => DeviceSlice {
            buffer: work.images.buffer().clone(),
            offset: sample.start,
            len: h.len,
        },
    };
    let destination = match work.placement {
        Placement::Device => Destination::Device(DeviceSlice {
            buffer: work.images.buffer().clone(),
            offset: sample.start,
            len: sample.len(),
        }),
        Placement::Host => Destination::Host(Box::new(PinnedSlot {
            work: Arc::clone(&work),
            slot: h.slot,
        })),
    };
    let media = match &mut h.work {
        HwWork::Jpeg {
            region,
            scale,
            window,
            turn,
            plan,
            parsed,
            canvas,
        } => {
            let (oh, ow) = plan.pixels.resampled();
            let (oh, ow) = if turn.swaps_axes() {
                (ow, oh)
            } else {
                (oh, ow)
            };
            MediaWork::Jpeg {
                decode: DecodePlan {
                    request: ResizeRequest {
                        region: *region,
                        scale: *scale,
                        window: *window,
                        out_w: ow,
                        out_h: oh,
                        filter: plan.interpolation.filter(),
                    },
                    parsed: parsed.take(),
                    limits: shared.limits,
                    luma: shared.plan.grey_read,
                },
                canvas: canvas.take().map(|c| *c),
                turn: *turn,
                augment: std::mem::take(&mut plan.pixels),
                op: Arc::clone(&shared.stage) as _,
            }
        }
        HwWork::Video(job) => MediaWork::Video {
            job: Arc::clone(job),
            stage: Arc::clone(&shared.stage),
        },
        HwWork::Frames(job) => MediaWork::Frames {
            job: Arc::clone(job),
            stage: Arc::clone(&shared.stage),
        },
    };
    let job = MediaJob {
        source,
        work: media,
        destination,
        done: Box::new(move |outcome| {
            let mut guard = guard;
            match outcome {
                Ok(times) => {
                    let stages = match times.frames {
                        Some(counts) => {
                            // The host read the runs' bytes (counted when it routed them).
                            let counts = DecodeCounts { bytes: 0, ..counts };
                            super::video::count(&guard.shared, &counts, true);
                            (Stage::DecodeVideoEngine, Stage::AugmentEngine)
                        }
                        None => (Stage::DecodeEngine, Stage::AugmentEngine),
                    };
                    guard.shared.counters.add(stages.0, times.decode);
                    guard.shared.counters.add(stages.1, times.op);
                    // The bitstream's own device copy goes before the batch can complete.
                    drop(h);
                    guard.finished();
                }
                Err(failure) => fallback(guard, h, failure),
            }
        }),
    };
    work.hpu.submit_media(job)
}

/// A host batch's slot, lent to the engine job that writes it.
struct PinnedSlot {
    work: Arc<BatchWork>,
    slot: usize,
}

impl HostSlot for PinnedSlot {
    fn write(&mut self, f: &mut dyn FnMut(&mut [u8])) {
        f(self.work.slots.slot_mut(self.slot).sample);
    }
}

/// What fallbacks reuse.
#[derive(Default)]
pub(crate) struct Spare {
    scratch: Mutex<Vec<Scratch>>,
    staging: Mutex<Vec<PinnedBuffer>>,
}

/// The engine failed on a file it had accepted. With `Backend::Hw` that fails the batch, naming
/// the file. Otherwise, decode the bytes it hands back on the CPU (with the usual skip/replace
/// policy) and put the sample where the engine's output goes: straight
/// into a host batch's pinned slot, or through a pinned staging buffer and the DMA engine into
/// a device batch (the loader writes no device memory itself).
fn fallback(mut guard: EngineJob, h: HwSlot, failure: JobFailure) {
    let (shared, work) = (Arc::clone(&guard.shared), Arc::clone(&guard.work));
    let path = &shared.entry(h.index).path;
    if shared.backend == Backend::Hw {
        // Only the engine: what it cannot decode is an error, whatever the skip policy (as for
        // a file it refuses at the router).
        let kind = match failure.error {
            EngineError::Jpeg(e) => SampleErrorKind::Decode(e),
            EngineError::Video(ClipsError::Video(VideoFailure::Video(e))) => {
                SampleErrorKind::Video(e)
            }
            EngineError::Video(ClipsError::Video(VideoFailure::Io(e))) => SampleErrorKind::Read(e),
            EngineError::Video(ClipsError::Augment(e)) => SampleErrorKind::Augment(e),
        };
        work.fail(Error::Sample(SampleError {
            index: h.index,
            path: path.clone(),
            kind,
        }));
        return guard.finished();
    }
    tracing::warn!(
        "media engine failed on {} ({}); decoding on the CPU",
        path.display(),
        failure.error
    );
    count_fallback(&shared, "engine decode error");
    let mut scratch = lock(&shared.spare.scratch)
        .pop()
        .unwrap_or_else(|| Scratch::new(&shared));
    // A JPEG's plan, whole again: the CPU path runs what the engine was to run on the bytes
    // handed back. A video's CPU path reads the file (or the frames) and draws the same clips
    // again.
    let given = match h.work {
        HwWork::Jpeg { mut plan, .. } => {
            plan.pixels = failure.augment;
            Some((&failure.bitstream[..], plan))
        }
        HwWork::Video(_) | HwWork::Frames(_) => None,
    };
    match work.placement {
        Placement::Host => {
            let slot = work.slots.slot_mut(h.slot);
            match fill(
                &shared,
                &mut scratch,
                (work.at(&shared), &*work),
                h.index,
                slot.sample,
                None,
                given,
            ) {
                Ok(Filled::Cpu {
                    index,
                    label,
                    detect,
                }) => {
                    write_label(&shared, index, label, detect.as_ref(), slot.label);
                    work.indices[h.slot].store(index, Ordering::Relaxed);
                }
                Ok(Filled::Hw(_)) => unreachable!("fill without the engine returns CPU samples"),
                Err(e) => work.fail(e),
            }
            lock(&shared.spare.scratch).push(scratch);
            guard.finished();
        }
        Placement::Device => {
            let (sb, lb) = (shared.layout.sample_bytes, shared.layout.label_bytes);
            let staging = match lock(&shared.spare.staging).pop() {
                Some(b) => Ok(b),
                None => PinnedBuffer::new(sb + lb),
            };
            let mut staging = match staging {
                Ok(b) => b,
                Err(source) => {
                    work.fail(Error::HostMemory {
                        what: "a staging buffer for the engine's fallback",
                        source,
                    });
                    lock(&shared.spare.scratch).push(scratch);
                    return guard.finished();
                }
            };
            let (sample, label) = staging.as_mut_slice().split_at_mut(sb);
            let skips = (work.at(&shared), &*work as &dyn Skips);
            let filled = fill(&shared, &mut scratch, skips, h.index, sample, None, given);
            lock(&shared.spare.scratch).push(scratch);
            let (index, label_value, detect) = match filled {
                Ok(Filled::Cpu {
                    index,
                    label,
                    detect,
                }) => (index, label, detect),
                Ok(Filled::Hw(_)) => unreachable!("fill without the engine returns CPU samples"),
                Err(e) => {
                    work.fail(e);
                    lock(&shared.spare.staging).push(staging);
                    return guard.finished();
                }
            };
            write_label(
                &shared,
                index,
                label_value,
                detect.as_ref(),
                &mut label[..lb],
            );
            work.indices[h.slot].store(index, Ordering::Relaxed);
            let regions = vec![
                CopyRegion {
                    host_offset: 0,
                    device_offset: shared.layout.sample(h.slot).start,
                    len: sb,
                    device: work.images.buffer().clone(),
                },
                CopyRegion {
                    host_offset: sb,
                    device_offset: h.slot * lb,
                    len: lb,
                    device: work.labels.buffer().clone(),
                },
            ];
            // The batch counts down when the copy is done (the guard rides with it).
            work.hpu
                .dma()
                .host_to_device(staging, regions, move |staging, copied| {
                    if let Err(e) = copied {
                        guard.work.fail(e.into());
                    }
                    lock(&guard.shared.spare.staging).push(staging);
                    guard.finished();
                });
        }
    }
}
