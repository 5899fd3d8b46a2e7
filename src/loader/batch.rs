//! A batch being filled: its slots in the pinned buffer, the samples routed to the media
//! engine, its skips and failure; completed, it goes to the epoch (as device tensors, or host
//! tensors lent from the pool), after the DMA engine sends its slots and the engine's jobs end.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;

use super::engine::{self, EngineJob};
use super::layout::{BatchLayout, EngineSlot, Slots};
use super::replace::Skips;
use super::route::HwSlot;
use super::{lock, Batch, Shared, Skip};
use crate::hpu::{CopyRegion, DeviceTensor, Hpu, HpuError};
use crate::pinned::{PinnedBuffer, PinnedPool};
use crate::sampler::BatchPlan;
use crate::tensor::{HostTensor, Lease, Placement, Tensor};
use crate::{Error, SampleError};

/// A finished batch (or why it failed), sent to the epoch iterator.
pub(crate) struct Finished {
    pub seq: usize,
    pub result: Result<Batch, Error>,
}

pub(crate) struct BatchSpec {
    pub seq: usize,
    pub epoch: u64,
    pub plan: BatchPlan,
    pub buffer: PinnedBuffer,
    pub images: DeviceTensor,
    pub labels: DeviceTensor,
    pub cancel: Arc<AtomicBool>,
    pub done: Sender<Finished>,
    pub pool: Sender<PinnedBuffer>,
    pub hpu: Hpu,
    pub placement: Placement,
}

/// A batch being filled. Workers write slots through `base`; the worker that fills the last
/// slot takes the buffer out and submits it to the DMA engine.
pub(crate) struct BatchWork {
    pub(super) seq: usize,
    pub(super) epoch: u64,
    pub(super) valid: usize,
    pub(super) indices: Vec<AtomicUsize>,
    pub(super) slots: Slots,
    pub(super) buffer: Mutex<Option<PinnedBuffer>>,
    pub(super) remaining: AtomicUsize,
    pub(super) hw: Mutex<Vec<HwSlot>>,
    pub(super) hw_remaining: AtomicUsize,
    pub(super) skips: Mutex<Vec<Skip>>,
    pub(super) failure: Mutex<Option<Error>>,
    pub(super) images: DeviceTensor,
    pub(super) labels: DeviceTensor,
    pub(super) cancel: Arc<AtomicBool>,
    pub(super) done: Sender<Finished>,
    pub(super) pool: Sender<PinnedBuffer>,
    pub(super) hpu: Hpu,
    pub(super) placement: Placement,
}

impl Skips for BatchWork {
    fn skip(&self, e: &SampleError) {
        tracing::warn!("skipping {}", e);
        lock(&self.skips).push(Skip {
            index: e.index,
            path: e.path.clone(),
            reason: e.reason(),
            message: e.to_string(),
        });
    }
}

impl BatchWork {
    pub fn new(mut spec: BatchSpec, layout: BatchLayout) -> Arc<Self> {
        let n = spec.plan.indices.len();
        // The slots point into the buffer's mapping, which stays in place when `spec.buffer`
        // moves into `buffer` below, for as long as the batch lives.
        let slots = Slots::new(&mut spec.buffer, layout, n);
        Arc::new(Self {
            seq: spec.seq,
            epoch: spec.epoch,
            valid: spec.plan.valid,
            indices: spec
                .plan
                .indices
                .iter()
                .map(|&i| AtomicUsize::new(i))
                .collect(),
            slots,
            buffer: Mutex::new(Some(spec.buffer)),
            remaining: AtomicUsize::new(n),
            hw: Mutex::new(Vec::new()),
            hw_remaining: AtomicUsize::new(0),
            skips: Mutex::new(Vec::new()),
            failure: Mutex::new(None),
            images: spec.images,
            labels: spec.labels,
            cancel: spec.cancel,
            done: spec.done,
            pool: spec.pool,
            hpu: spec.hpu,
            placement: spec.placement,
        })
    }

    pub(super) fn fail(&self, e: Error) {
        lock(&self.failure).get_or_insert(e);
    }

    /// Sends the batch (or its failure) to the epoch. A host batch takes its pinned buffer
    /// along, lent until its last tensor is dropped.
    pub(super) fn complete(&self, shared: &Shared) {
        let buffer = lock(&self.buffer).take();
        let failure = lock(&self.failure).take();
        let tensors = match (failure, self.placement, buffer) {
            (Some(e), _, buffer) => {
                if let Some(b) = buffer {
                    PinnedPool::give_back(&self.pool, b);
                }
                Err(e)
            }
            (None, Placement::Device, _) => Ok((
                Tensor::Device(self.images.clone()),
                Tensor::Device(self.labels.clone()),
            )),
            (None, Placement::Host, Some(buffer)) => {
                let lease = Lease::new(buffer, self.pool.clone());
                let images = self.images.shape().to_vec();
                let labels = self.labels.shape().to_vec();
                Ok((
                    Tensor::Host(HostTensor::new(
                        Arc::clone(&lease),
                        0,
                        images,
                        self.images.dtype(),
                    )),
                    Tensor::Host(HostTensor::new(
                        lease,
                        shared.layout.labels_offset,
                        labels,
                        self.labels.dtype(),
                    )),
                ))
            }
            (None, Placement::Host, None) => Err(Error::Hpu(HpuError::Dma(
                "a host batch lost its buffer".into(),
            ))),
        };
        let result = match tensors {
            Err(e) => Err(e),
            Ok((images, labels)) => Ok(Batch {
                images,
                labels,
                valid: self.valid,
                indices: self
                    .indices
                    .iter()
                    .map(|i| i.load(Ordering::Relaxed))
                    .collect(),
                epoch: self.epoch,
                step: self.seq,
                skipped: std::mem::take(&mut *lock(&self.skips)),
            }),
        };
        let _ = self.done.send(Finished {
            seq: self.seq,
            result,
        });
    }

    /// Called once, by the worker that completed the last slot: DMA the slots (decoded samples
    /// whole, bitstreams only as long as they are) and the labels, then start the engine jobs.
    pub(super) fn finish(self: Arc<Self>, shared: &Arc<Shared>) {
        let buffer = lock(&self.buffer).take().expect("finish runs once");
        if self.cancel.load(Ordering::Relaxed) && lock(&self.failure).is_none() {
            self.fail(Error::Cancelled);
        }
        if lock(&self.failure).is_some() {
            PinnedPool::give_back(&self.pool, buffer);
            return self.complete(shared);
        }
        let mut hw = std::mem::take(&mut *lock(&self.hw));
        hw.sort_by_key(|h| h.slot);
        let host = self.placement == Placement::Host;
        if host && hw.is_empty() {
            // Every sample was decoded into the buffer on the host: nothing crosses to the device.
            *lock(&self.buffer) = Some(buffer);
            return self.complete(shared);
        }
        let layout = self.slots.layout();
        let n = self.indices.len();
        let images = self.images.buffer();
        let engine_slot = |h: &HwSlot| EngineSlot {
            slot: h.slot,
            in_slot: h.own.is_none().then_some(h.len),
        };
        // A device batch crosses in parts of ENGINE_CHUNK engine samples, each part's jobs
        // started as soon as it is on the device, so that the engines are not idle while the
        // DMA engine sends the rest (the first batch's time, and a batch's after an idle
        // spell). A host batch crosses whole: its engine jobs write into the buffer the DMA
        // engine reads.
        let part = if host { hw.len().max(1) } else { ENGINE_CHUNK };
        let mut parts = Vec::with_capacity(hw.len().div_ceil(part).max(1));
        let mut hw = hw.into_iter().peekable();
        let mut from = 0;
        loop {
            let jobs: Vec<HwSlot> = hw.by_ref().take(part).collect();
            let to = hw.peek().map_or(n, |h| h.slot);
            let engine: Vec<EngineSlot> = jobs.iter().map(engine_slot).collect();
            let regions = if host {
                layout.bitstream_regions(&engine, images)
            } else {
                let labels = (to == n).then(|| (self.labels.buffer(), n));
                layout.upload_regions(from..to, &engine, images, labels)
            };
            parts.push(Part { regions, jobs });
            if to == n {
                break;
            }
            from = to;
        }
        let jobs = parts.iter().map(|p| p.jobs.len()).sum();
        if jobs > 0 {
            // Set before any job can end, so that the count reaches 0 only after the last part.
            self.hw_remaining.store(jobs, Ordering::Release);
        }
        send(self, Arc::clone(shared), buffer, parts.into_iter());
    }
}

/// Engine samples per part of a device batch sent by the DMA engine (see [`BatchWork::finish`]).
const ENGINE_CHUNK: usize = 32;

/// A part of a batch for the DMA engine: its regions, and the engine jobs that read them.
struct Part {
    regions: Vec<CopyRegion>,
    jobs: Vec<HwSlot>,
}

/// Sends the batch's next part, and on its arrival starts its engine jobs and sends the part
/// after it. The buffer goes back (to the pool, or to a host batch) after the last part, or
/// after a failed copy, whose part's and later parts' jobs are then counted down unrun.
fn send(
    work: Arc<BatchWork>,
    shared: Arc<Shared>,
    buffer: PinnedBuffer,
    mut parts: std::vec::IntoIter<Part>,
) {
    let Some(Part { regions, jobs }) = parts.next() else {
        // finish() makes at least one part; this only returns the buffer if it did not.
        PinnedPool::give_back(&work.pool, buffer);
        return work.complete(&shared);
    };
    let hpu = work.hpu.clone();
    hpu.dma()
        .host_to_device(buffer, regions, move |buffer, result| {
            let more = parts.len() > 0 && result.is_ok();
            let buffer = if more {
                Some(buffer)
            } else {
                if work.placement == Placement::Host {
                    *lock(&work.buffer) = Some(buffer);
                } else {
                    PinnedPool::give_back(&work.pool, buffer);
                }
                None
            };
            let guard = |h: &HwSlot| EngineJob {
                work: Arc::clone(&work),
                shared: Arc::clone(&shared),
                index: h.index,
                ran: false,
            };
            if let Err(e) = result {
                work.fail(e.into());
                let unrun: Vec<HwSlot> =
                    jobs.into_iter().chain(parts.flat_map(|p| p.jobs)).collect();
                if unrun.is_empty() {
                    return work.complete(&shared);
                }
                // Each guard counts the batch down as it drops; the last completes it.
                for h in &unrun {
                    drop(guard(h));
                }
                return;
            }
            if jobs.is_empty() && !more {
                return work.complete(&shared);
            }
            for h in jobs {
                if let Err(e) = engine::submit(guard(&h), h) {
                    // The job was dropped unrun, and its guard counted it down.
                    work.fail(e.into());
                }
            }
            if let Some(buffer) = buffer {
                send(Arc::clone(&work), Arc::clone(&shared), buffer, parts);
            }
        });
}
