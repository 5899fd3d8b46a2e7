//! What the worker threads do: fill one slot of a batch buffer per job (decoded on the CPU, or
//! the compressed bitstream for the media engine), hand a completed batch to the DMA engine,
//! then have the media engine decode the bitstreams in device memory.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use hpuload_decoders::DecodeError;

use super::cpu::{self, CpuScratch, Scratch};
use super::engine::{self, EngineJob, HwSlot};
use super::layout::{BatchLayout, EngineSlot, Slots};
use super::route::{route, Bitstream, Route};
use super::{Backend, Batch, OnError, Shared, Skip};
use crate::cpu_time::CpuClock;
use crate::hpu::{DeviceTensor, Hpu, HpuError};
use crate::pinned::{PinnedBuffer, PinnedPool};
use crate::rng::{CounterRng, Stream};
use crate::sampler::BatchPlan;
use crate::stage::{Stage, StageTimes};
use crate::tensor::{HostTensor, Lease, Placement, Tensor};
use crate::{Error, SampleError, SampleErrorKind};

/// Replacements tried for one failed slot before the batch fails.
const MAX_REPLACEMENTS: usize = 16;

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

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
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

    pub(super) fn skip(&self, e: &SampleError) {
        tracing::warn!("skipping {}", e);
        lock(&self.skips).push(Skip {
            index: e.index,
            path: e.path.clone(),
            reason: e.reason(),
            message: e.to_string(),
        });
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
                let labels = vec![self.indices.len()];
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
                        crate::Dtype::I64,
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
    fn finish(self: Arc<Self>, shared: &Arc<Shared>) {
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
        let engine: Vec<EngineSlot> = hw
            .iter()
            .map(|h| EngineSlot {
                slot: h.slot,
                in_slot: h.own.is_none().then_some(h.len),
            })
            .collect();
        let layout = self.slots.layout();
        let regions = if host {
            layout.bitstream_regions(&engine, self.images.buffer())
        } else {
            let n = self.indices.len();
            layout.upload_regions(n, &engine, self.images.buffer(), self.labels.buffer())
        };
        let work = Arc::clone(&self);
        let shared = Arc::clone(shared);
        self.hpu
            .dma()
            .host_to_device(buffer, regions, move |buffer, result| {
                if host {
                    *lock(&work.buffer) = Some(buffer);
                } else {
                    PinnedPool::give_back(&work.pool, buffer);
                }
                if let Err(e) = result {
                    work.fail(e.into());
                    return work.complete(&shared);
                }
                if hw.is_empty() {
                    return work.complete(&shared);
                }
                work.hw_remaining.store(hw.len(), Ordering::Release);
                for h in hw {
                    let guard = EngineJob {
                        work: Arc::clone(&work),
                        shared: Arc::clone(&shared),
                        index: h.index,
                        ran: false,
                    };
                    if let Err(e) = engine::submit(guard, h) {
                        // The job was dropped unrun, and its guard counted it down.
                        work.fail(e.into());
                    }
                }
            });
    }
}

pub(crate) fn worker_main(shared: &Arc<Shared>, jobs: &Receiver<Job>) {
    let mut scratch = Scratch::new(shared);
    for job in jobs {
        if !job.batch.cancel.load(Ordering::Relaxed) {
            let outcome = catch_unwind(AssertUnwindSafe(|| fill_slot(shared, &mut scratch, &job)));
            if let Err(panic) = outcome {
                let message = crate::hpu::panic_message(panic.as_ref());
                let index = job.batch.indices[job.slot].load(Ordering::Relaxed);
                let path = shared.source.entries()[index].path.clone();
                job.batch.fail(Error::Sample(SampleError {
                    index,
                    path,
                    kind: SampleErrorKind::Panic(message),
                }));
                scratch = Scratch::new(shared);
            }
        }
        // AcqRel: the last decrement sees every other worker's slot writes.
        if job.batch.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            Arc::clone(&job.batch).finish(shared);
        }
    }
}

pub(super) enum Filled {
    /// Decoded on the host into the slot.
    Cpu { index: usize, label: i64 },
    /// The bitstream is in the slot, for the media engine.
    Hw(HwSlot),
}

fn fill_slot(shared: &Shared, scratch: &mut Scratch, job: &Job) {
    let batch = &job.batch;
    let original = batch.indices[job.slot].load(Ordering::Relaxed);
    let slot = batch.slots.slot_mut(job.slot);
    let engine = (shared.backend != Backend::Cpu).then_some(&batch.hpu);
    let (index, label) = match fill(shared, scratch, batch, original, slot.sample, engine, None) {
        Ok(Filled::Cpu { index, label }) => (index, label),
        Ok(Filled::Hw(h)) => {
            let (index, label) = (h.index, shared.source.entries()[h.index].label);
            lock(&batch.hw).push(HwSlot {
                slot: job.slot,
                ..h
            });
            (index, label)
        }
        Err(e) => return batch.fail(e),
    };
    slot.label.copy_from_slice(&label.to_ne_bytes());
    batch.indices[job.slot].store(index, Ordering::Relaxed);
}

/// Loads sample `original` (or, under `OnError::Skip`, a deterministic replacement) into
/// `slot`: decoded on the CPU, or as a bitstream for the engine when `engine` allows. `given`:
/// `original`'s bytes, already in hand (the engine's fallback), instead of reading them.
pub(super) fn fill(
    shared: &Shared,
    scratch: &mut Scratch,
    batch: &BatchWork,
    original: usize,
    slot: &mut [u8],
    engine: Option<&Hpu>,
    mut given: Option<&[u8]>,
) -> Result<Filled, Error> {
    let n = shared.source.entries().len() as u64;
    let mut replace = CounterRng::new(shared.seed, batch.epoch, original as u64, Stream::Replace);
    let mut index = original;
    for _ in 0..=MAX_REPLACEMENTS {
        match load_sample(
            shared,
            scratch,
            index,
            batch.epoch,
            slot,
            engine,
            given.take(),
        ) {
            Ok(filled) => return Ok(filled),
            Err(SampleError {
                kind: SampleErrorKind::Device(e),
                ..
            }) => return Err(Error::Hpu(e)),
            Err(e) if shared.on_error == OnError::Fail || is_engine_refusal(shared, &e) => {
                return Err(Error::Sample(e))
            }
            Err(e) => {
                batch.skip(&e);
                index = replace.below(n) as usize;
            }
        }
    }
    let path = shared.source.entries()[original].path.clone();
    Err(Error::Sample(SampleError {
        index: original,
        path,
        kind: SampleErrorKind::ReplacementsExhausted {
            tried: MAX_REPLACEMENTS,
        },
    }))
}

/// With `Backend::Hw`, a file the engine cannot take is an error whatever the skip policy.
fn is_engine_refusal(shared: &Shared, e: &SampleError) -> bool {
    shared.backend == Backend::Hw
        && matches!(
            e.kind,
            SampleErrorKind::Decode(DecodeError::Unsupported { .. })
        )
}

/// Reads sample `index`, routes it, and fills `slot`: with its bitstream for the media engine,
/// or with the sample decoded and augmented on the CPU. A sample the engine may take is read
/// straight into its slot when it fits there (the pinned memory the batch's DMA sends), so its
/// bytes are not copied from a buffer.
fn load_sample(
    shared: &Shared,
    s: &mut Scratch,
    index: usize,
    epoch: u64,
    slot: &mut [u8],
    engine: Option<&Hpu>,
    given: Option<&[u8]>,
) -> Result<Filled, SampleError> {
    let entry = &shared.source.entries()[index];
    let err = |kind| SampleError {
        index,
        path: entry.path.clone(),
        kind,
    };
    let c = &shared.counters;
    let cpu = |s: &mut CpuScratch, bytes: &[u8], slot: &mut [u8]| {
        cpu::decode_into(shared, s, index, epoch, bytes, slot)
            .map(|()| Filled::Cpu {
                index,
                label: entry.label,
            })
            .map_err(err)
    };
    let t0 = CpuClock::now();
    let in_slot = match (engine, given) {
        (Some(_), None) => shared
            .source
            .read_into(index, shared.read_mode, slot)
            .map_err(|e| err(SampleErrorKind::Read(e)))?,
        _ => None,
    };
    if let (Some(hpu), Some(len)) = (engine, in_slot) {
        c.add(Stage::Read, t0.elapsed());
        c.bytes_read.fetch_add(len as u64, Ordering::Relaxed);
        let bitstream = Bitstream::InSlot(&slot[..len]);
        if let Route::Engine(hw) =
            route(shared, &mut s.engine_probe, hpu, index, epoch, bitstream).map_err(err)?
        {
            return Ok(Filled::Hw(hw));
        }
        // The CPU path decodes into the slot: the bytes move out of it first.
        s.file.clear();
        s.file.extend_from_slice(&slot[..len]);
        return cpu(&mut s.cpu, &s.file, slot);
    }
    let read;
    let bytes: &[u8] = match given {
        Some(bytes) => bytes,
        None => {
            read = shared
                .source
                .read(index, shared.read_mode, &mut s.file)
                .map_err(|e| err(SampleErrorKind::Read(e)))?;
            c.add(Stage::Read, t0.elapsed());
            c.bytes_read.fetch_add(read.len() as u64, Ordering::Relaxed);
            &read
        }
    };
    let routed = match engine {
        Some(hpu) => {
            let bitstream = Bitstream::Buffered {
                bytes,
                slot: &mut *slot,
            };
            route(shared, &mut s.engine_probe, hpu, index, epoch, bitstream)
        }
        None => Ok(Route::Cpu),
    };
    match routed.map_err(err)? {
        Route::Engine(hw) => Ok(Filled::Hw(hw)),
        Route::Cpu => cpu(&mut s.cpu, bytes, slot),
    }
}
