//! What the worker threads do: fill one slot of a batch buffer per job, and hand a completed
//! batch to the DMA engine.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use hpuload_decoders::{CpuDecoder, Decode};

use super::{Batch, OnError, Shared, Skip};
use crate::augment::Resampler;
use crate::hpu::{CopyRegion, DeviceTensor, Hpu};
use crate::pinned::PinnedBuffer;
use crate::rng::{CounterRng, Stream};
use crate::sampler::BatchPlan;
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
    pub read: Nanos,
    pub decode: Nanos,
    pub resize: Nanos,
    pub collate: Nanos,
    pub samples: AtomicU64,
    pub bytes_read: AtomicU64,
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
}

/// A batch being filled. Workers write slots through `base`; the worker that fills the last
/// slot takes the buffer out and submits it to the DMA engine.
pub(crate) struct BatchWork {
    seq: usize,
    epoch: u64,
    valid: usize,
    indices: Vec<AtomicUsize>,
    base: *mut u8,
    buffer: Mutex<Option<PinnedBuffer>>,
    remaining: AtomicUsize,
    skips: Mutex<Vec<Skip>>,
    failure: Mutex<Option<Error>>,
    images: DeviceTensor,
    labels: DeviceTensor,
    cancel: Arc<AtomicBool>,
    done: Sender<Finished>,
    pool: Sender<PinnedBuffer>,
    hpu: Hpu,
}

// SAFETY: `base` points into the pinned buffer owned by `buffer`, which stays in place until
// every slot is written (`remaining` reaches 0). Each slot is written by exactly one job, so
// the raw writes through `base` from several threads never overlap; everything else is behind
// atomics or mutexes.
unsafe impl Send for BatchWork {}
// SAFETY: as above.
unsafe impl Sync for BatchWork {}

impl BatchWork {
    pub fn new(mut spec: BatchSpec) -> Arc<Self> {
        let n = spec.plan.indices.len();
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
            base: spec.buffer.as_mut_ptr(),
            buffer: Mutex::new(Some(spec.buffer)),
            remaining: AtomicUsize::new(n),
            skips: Mutex::new(Vec::new()),
            failure: Mutex::new(None),
            images: spec.images,
            labels: spec.labels,
            cancel: spec.cancel,
            done: spec.done,
            pool: spec.pool,
            hpu: spec.hpu,
        })
    }

    fn fail(&self, e: Error) {
        let mut f = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        f.get_or_insert(e);
    }

    /// Called once, by the worker that completed the last slot.
    fn finish(self: Arc<Self>, shared: &Shared) {
        let buffer = self
            .buffer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .expect("finish runs once");
        let failure = self
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(e) = failure.or_else(|| {
            self.cancel
                .load(Ordering::Relaxed)
                .then_some(Error::Config("cancelled".into()))
        }) {
            let _ = self.pool.send(buffer);
            let _ = self.done.send(Finished {
                seq: self.seq,
                result: Err(e),
            });
            return;
        }
        let n = self.indices.len();
        let regions = vec![
            CopyRegion {
                src_offset: 0,
                len: n * shared.sample_bytes,
                dst: self.images.buffer().clone(),
            },
            CopyRegion {
                src_offset: shared.labels_offset,
                len: n * 8,
                dst: self.labels.buffer().clone(),
            },
        ];
        let work = Arc::clone(&self);
        self.hpu
            .dma()
            .host_to_device(buffer, regions, move |buffer, result| {
                let _ = work.pool.send(buffer);
                let result = result.map_err(Error::from).map(|()| Batch {
                    images: work.images.clone(),
                    labels: work.labels.clone(),
                    valid: work.valid,
                    indices: work
                        .indices
                        .iter()
                        .map(|i| i.load(Ordering::Relaxed))
                        .collect(),
                    epoch: work.epoch,
                    step: work.seq,
                    skipped: std::mem::take(
                        &mut *work.skips.lock().unwrap_or_else(|p| p.into_inner()),
                    ),
                });
                let _ = work.done.send(Finished {
                    seq: work.seq,
                    result,
                });
            });
    }
}

/// A worker's reusable memory: nothing is allocated per sample once these have grown.
struct Scratch {
    file: Vec<u8>,
    rgb: Vec<u8>,
    decoder: CpuDecoder,
    resampler: Resampler,
}

impl Scratch {
    fn new(shared: &Shared) -> Self {
        let (h, w) = shared.plan.out_hw();
        Self {
            file: Vec::new(),
            rgb: Vec::new(),
            decoder: CpuDecoder::with_limits(shared.limits),
            resampler: Resampler::new(h, w),
        }
    }
}

pub(crate) fn worker_main(shared: &Shared, jobs: &Receiver<Job>) {
    let mut scratch = Scratch::new(shared);
    for job in jobs {
        if !job.batch.cancel.load(Ordering::Relaxed) {
            let outcome = catch_unwind(AssertUnwindSafe(|| fill_slot(shared, &mut scratch, &job)));
            if let Err(panic) = outcome {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
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
            job.batch.finish(shared);
        }
    }
}

fn fill_slot(shared: &Shared, scratch: &mut Scratch, job: &Job) {
    let batch = &job.batch;
    let original = batch.indices[job.slot].load(Ordering::Relaxed);
    // SAFETY: see `BatchWork`: slot `job.slot` is inside the buffer and written by this job only.
    let slot = unsafe {
        std::slice::from_raw_parts_mut(
            batch.base.add(job.slot * shared.sample_bytes),
            shared.sample_bytes,
        )
    };
    let n = shared.source.entries().len() as u64;
    let mut replace = CounterRng::new(shared.seed, batch.epoch, original as u64, Stream::Replace);
    let mut index = original;
    for _ in 0..=MAX_REPLACEMENTS {
        match load_sample(shared, scratch, index, batch.epoch, slot) {
            Ok(()) => {
                let label = shared.source.entries()[index].label;
                // SAFETY: the label of slot `job.slot` is written by this job only.
                let label_slot = unsafe {
                    std::slice::from_raw_parts_mut(
                        batch.base.add(shared.labels_offset + job.slot * 8),
                        8,
                    )
                };
                label_slot.copy_from_slice(&label.to_ne_bytes());
                batch.indices[job.slot].store(index, Ordering::Relaxed);
                return;
            }
            Err(e) if shared.on_error == OnError::Fail => return batch.fail(Error::Sample(e)),
            Err(e) => {
                tracing::warn!("skipping {}", e);
                let skip = Skip {
                    index: e.index,
                    path: e.path.clone(),
                    reason: e.reason(),
                    message: e.to_string(),
                };
                batch
                    .skips
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(skip);
                index = replace.below(n) as usize;
            }
        }
    }
    let path = shared.source.entries()[original].path.clone();
    batch.fail(Error::Sample(SampleError {
        index: original,
        path,
        kind: SampleErrorKind::Augment(format!(
            "it and {MAX_REPLACEMENTS} replacements all failed"
        )),
    }));
}

fn load_sample(
    shared: &Shared,
    s: &mut Scratch,
    index: usize,
    epoch: u64,
    slot: &mut [u8],
) -> Result<(), SampleError> {
    let entry = &shared.source.entries()[index];
    let err = |kind| SampleError {
        index,
        path: entry.path.clone(),
        kind,
    };
    let c = &shared.counters;
    let t0 = Instant::now();
    let bytes = shared
        .source
        .read(index, shared.read_mode, &mut s.file)
        .map_err(|e| err(SampleErrorKind::Read(e)))?;
    let t1 = Instant::now();
    c.read.add(t1 - t0);
    c.bytes_read
        .fetch_add(bytes.len() as u64, Ordering::Relaxed);
    let info = s
        .decoder
        .probe(&bytes)
        .map_err(|e| err(SampleErrorKind::Decode(e)))?;
    let len = info.rgb_len();
    if s.rgb.len() < len {
        s.rgb.resize(len, 0);
    }
    s.decoder
        .decode_into(&bytes, &info, &mut s.rgb[..len])
        .map_err(|e| err(SampleErrorKind::Decode(e)))?;
    drop(bytes);
    let t2 = Instant::now();
    c.decode.add(t2 - t1);
    let params = shared
        .plan
        .params(shared.seed, epoch, index, info.width, info.height)
        .map_err(|m| err(SampleErrorKind::Augment(m)))?;
    let (oh, ow) = shared.plan.out_hw();
    let resized = s
        .resampler
        .run(&s.rgb[..len], info.width, info.height, &params.crop)
        .map_err(|m| err(SampleErrorKind::Augment(m)))?;
    let t3 = Instant::now();
    c.resize.add(t3 - t2);
    shared
        .writer
        .write(resized, oh as usize, ow as usize, params.flip, slot);
    c.collate.add(t3.elapsed());
    c.samples.fetch_add(1, Ordering::Relaxed);
    Ok(())
}
