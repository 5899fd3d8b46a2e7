//! A batch being filled: its slots in the pinned buffer, in parts that cross to the device as
//! soon as their slots are filled, the samples routed to the media engine, its skips and
//! failure; completed, it goes to the epoch (as device tensors, or host tensors lent from the
//! pool), after the DMA engine sends its parts and the engine's jobs end.

use std::ops::Range;
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
    pub live: Arc<()>,
    pub done: Sender<Finished>,
    pub pool: Sender<PinnedBuffer>,
    pub hpu: Hpu,
    pub placement: Placement,
}

/// A batch being filled. Workers write slots through `slots`; the worker that fills a part's
/// last slot sends the part to the DMA engine (when the parts before it have gone), whose
/// completion starts the part's engine jobs and sends the next part if it is filled.
pub(crate) struct BatchWork {
    pub(super) seq: usize,
    pub(super) epoch: u64,
    /// The global position of the batch's first slot ([`crate::sampler::BatchPlan::first`]).
    pub(super) first: usize,
    pub(super) valid: usize,
    pub(super) indices: Vec<AtomicUsize>,
    pub(super) slots: Slots,
    /// A host batch's buffer once its parts have crossed (lent out with its tensors).
    pub(super) buffer: Mutex<Option<PinnedBuffer>>,
    pub(super) parts: Vec<PartWork>,
    pub(super) sending: Mutex<Sending>,
    /// Parts not yet through the DMA engine plus engine jobs not yet ended: the batch is
    /// complete when it reaches 0. A part adds its jobs before it counts itself down, so the
    /// count cannot reach 0 while a part's jobs are still to start.
    pub(super) outstanding: AtomicUsize,
    pub(super) skips: Mutex<Vec<Skip>>,
    pub(super) failure: Mutex<Option<Error>>,
    pub(super) images: DeviceTensor,
    pub(super) labels: DeviceTensor,
    pub(super) cancel: Arc<AtomicBool>,
    pub(super) done: Sender<Finished>,
    pub(super) pool: Sender<PinnedBuffer>,
    pub(super) hpu: Hpu,
    pub(super) placement: Placement,
    /// The epoch's count of batches still held anywhere. Declared last, so it drops after
    /// the tensors: the epoch sees it fall only once their device memory is free.
    _live: Arc<()>,
}

/// A run of a batch's slots that crosses to the device in one DMA transfer.
pub(crate) struct PartWork {
    slots: Range<usize>,
    /// Slots of the part not filled yet.
    remaining: AtomicUsize,
    /// The part's samples routed to the media engine.
    hw: Mutex<Vec<HwSlot>>,
}

/// Which part goes next, and the pinned buffer while no part is with the DMA engine.
pub(crate) struct Sending {
    buffer: Option<PinnedBuffer>,
    next: usize,
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
        // moves into `sending` below, for as long as the batch lives.
        let slots = Slots::new(&mut spec.buffer, layout, n);
        // A batch crosses in parts of PART_SLOTS, each sent as soon as its slots are filled
        // and the parts before it have gone, its engine jobs started when it is on the device:
        // the engines start on a batch while the workers still read and route its later
        // samples (the first batch's time, and a batch's after an idle spell). A host batch's
        // engine jobs write their outputs into their own slots of the pinned buffer while the
        // DMA engine reads a later part's bitstreams: other slots.
        let parts: Vec<PartWork> = (0..n.div_ceil(PART_SLOTS).max(1))
            .map(|p| {
                let slots = p * PART_SLOTS..((p + 1) * PART_SLOTS).min(n);
                PartWork {
                    remaining: AtomicUsize::new(slots.len()),
                    slots,
                    hw: Mutex::new(Vec::new()),
                }
            })
            .collect();
        Arc::new(Self {
            seq: spec.seq,
            epoch: spec.epoch,
            first: spec.plan.first,
            valid: spec.plan.valid,
            indices: spec
                .plan
                .indices
                .iter()
                .map(|&i| AtomicUsize::new(i))
                .collect(),
            slots,
            buffer: Mutex::new(None),
            outstanding: AtomicUsize::new(parts.len()),
            parts,
            sending: Mutex::new(Sending {
                buffer: Some(spec.buffer),
                next: 0,
            }),
            skips: Mutex::new(Vec::new()),
            failure: Mutex::new(None),
            images: spec.images,
            labels: spec.labels,
            cancel: spec.cancel,
            done: spec.done,
            pool: spec.pool,
            hpu: spec.hpu,
            placement: spec.placement,
            _live: spec.live,
        })
    }

    /// Where its samples' plans are drawn.
    pub(super) fn at(&self, shared: &super::Shared) -> super::replace::At {
        super::replace::At::new(shared, self.epoch, self.first)
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

    /// Counts down a part that went through the DMA engine (or was passed over) or an engine
    /// job that ended; the last one completes the batch.
    pub(super) fn count_down(&self, shared: &Shared) {
        if self.outstanding.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.complete(shared);
        }
    }

    /// Slot `slot` is filled (its sample decoded, or its bitstream routed to the engine as
    /// `hw`). The worker that fills a part's last slot sends it, if the parts before it have
    /// gone.
    pub(super) fn filled(self: &Arc<Self>, shared: &Arc<Shared>, slot: usize, hw: Option<HwSlot>) {
        let part = &self.parts[self.part_of(slot)];
        if let Some(hw) = hw {
            lock(&part.hw).push(hw);
        }
        // AcqRel: the last decrement sees every other worker's writes to the part's slots.
        if part.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            send_ready(Arc::clone(self), Arc::clone(shared), None);
        }
    }

    /// What part `part` sends to the device: a device batch's slots (host-decoded samples
    /// whole, bitstreams as long as they are) and labels; a host batch's bitstreams alone.
    fn regions(&self, part: &PartWork, hw: &[HwSlot]) -> Vec<CopyRegion> {
        let layout = self.slots.layout();
        let images = self.images.buffer();
        let engine: Vec<EngineSlot> = hw
            .iter()
            .map(|h| EngineSlot {
                slot: h.slot,
                in_slot: h.own.is_none().then_some(h.len),
            })
            .collect();
        match self.placement {
            Placement::Host => layout.bitstream_regions(&engine, images),
            Placement::Device => {
                layout.upload_regions(part.slots.clone(), &engine, images, self.labels.buffer())
            }
        }
    }

    fn part_of(&self, slot: usize) -> usize {
        slot / PART_SLOTS
    }
}

/// Slots per part of a batch sent by the DMA engine (see [`BatchWork::new`]).
const PART_SLOTS: usize = 32;

/// Sends the batch's next part if its slots are filled and the buffer is not with the DMA
/// engine (`returned`: the buffer, back from the engine). The parts of a failed or cancelled
/// batch are passed over, their engine samples dropped unrun; a host batch's part with nothing
/// to send starts its jobs at once. After the last part the buffer is handed on.
fn send_ready(work: Arc<BatchWork>, shared: Arc<Shared>, returned: Option<PinnedBuffer>) {
    let mut sending = lock(&work.sending);
    if returned.is_some() {
        sending.buffer = returned;
    }
    loop {
        let Some(part) = work.parts.get(sending.next) else {
            return;
        };
        if sending.buffer.is_none() || part.remaining.load(Ordering::Acquire) != 0 {
            return;
        }
        sending.next += 1;
        let last = sending.next == work.parts.len();
        let mut hw = std::mem::take(&mut *lock(&part.hw));
        hw.sort_by_key(|h| h.slot);
        if work.cancel.load(Ordering::Relaxed) && lock(&work.failure).is_none() {
            work.fail(Error::Cancelled);
        }
        let failed = lock(&work.failure).is_some();
        let regions = if failed {
            Vec::new()
        } else {
            work.regions(part, &hw)
        };
        if regions.is_empty() {
            if !failed {
                start_jobs(&work, &shared, hw);
            }
            if last {
                hand_on(&work, sending.buffer.take().expect("checked above"));
            }
            work.count_down(&shared);
            continue;
        }
        let buffer = sending.buffer.take().expect("checked above");
        drop(sending);
        let (w, s) = (Arc::clone(&work), Arc::clone(&shared));
        return work
            .hpu
            .dma()
            .host_to_device(buffer, regions, move |buffer, result| {
                match result {
                    Ok(()) => start_jobs(&w, &s, hw),
                    // The part's engine samples never start; the batch fails with the DMA's error.
                    Err(e) => w.fail(e.into()),
                }
                if last {
                    hand_on(&w, buffer);
                } else {
                    send_ready(Arc::clone(&w), Arc::clone(&s), Some(buffer));
                }
                w.count_down(&s);
            });
    }
}

/// Starts a part's engine jobs, counted in the batch's outstanding work.
fn start_jobs(work: &Arc<BatchWork>, shared: &Arc<Shared>, hw: Vec<HwSlot>) {
    work.outstanding.fetch_add(hw.len(), Ordering::AcqRel);
    for h in hw {
        let guard = EngineJob {
            work: Arc::clone(work),
            shared: Arc::clone(shared),
            index: h.index,
            ran: false,
        };
        if let Err(e) = engine::submit(guard, h) {
            // The job was dropped unrun, and its guard counted it down.
            work.fail(e.into());
        }
    }
}

/// The buffer after a batch's last part: back to the pool, or kept by a host batch, whose
/// tensors lend it (a failed batch gives it back when it completes).
fn hand_on(work: &BatchWork, buffer: PinnedBuffer) {
    match work.placement {
        Placement::Host => *lock(&work.buffer) = Some(buffer),
        Placement::Device => PinnedPool::give_back(&work.pool, buffer),
    }
}
