//! The DMA engine: one thread that executes copies in submission order and signals completion.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::cpu_time::CpuClock;

use crossbeam_channel::{Receiver, Sender};

use super::{DeviceBuffer, HpuError};
use crate::pinned::PinnedBuffer;

/// Size of the pinned staging buffer that pageable sources are copied through.
const STAGING_BYTES: usize = 4 << 20;

/// One contiguous copy from a host buffer to a device buffer.
pub(crate) struct CopyRegion {
    pub host_offset: usize,
    pub device_offset: usize,
    pub len: usize,
    pub device: DeviceBuffer,
}

/// Completion of a transfer from a pinned buffer: gets the buffer back, and the outcome.
type PinnedDone = Box<dyn FnOnce(PinnedBuffer, Result<(), HpuError>) + Send>;

enum Job {
    HostToDevice {
        src: PinnedBuffer,
        regions: Vec<CopyRegion>,
        done: PinnedDone,
    },
    DeviceToHost {
        src: DeviceBuffer,
        done: Sender<Result<Vec<u8>, HpuError>>,
    },
}

/// Totals of the DMA engine's work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DmaStats {
    /// Bytes copied host to device.
    pub host_to_device_bytes: u64,
    /// Bytes copied device to host.
    pub device_to_host_bytes: u64,
    /// Bytes of pageable sources that went through the pinned staging buffer first.
    pub staged_bytes: u64,
    /// Time the engine spent copying (emulated device time: CPU time of its thread).
    pub busy: Duration,
}

#[derive(Default)]
struct Counters {
    h2d: AtomicU64,
    d2h: AtomicU64,
    staged: AtomicU64,
    busy_ns: AtomicU64,
}

/// Completion of an asynchronous transfer.
#[must_use = "a DMA event does nothing unless waited on"]
pub struct DmaEvent<T> {
    rx: Receiver<Result<T, HpuError>>,
}

impl<T> DmaEvent<T> {
    pub(crate) fn new(rx: Receiver<Result<T, HpuError>>) -> Self {
        Self { rx }
    }

    /// Blocks until the transfer completes.
    ///
    /// # Errors
    /// The transfer failed or the engine stopped before completing it.
    pub fn wait(self) -> Result<T, HpuError> {
        self.rx.recv().map_err(|_| HpuError::EngineStopped)?
    }
}

pub(crate) struct DmaEngine {
    tx: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    counters: Arc<Counters>,
}

impl DmaEngine {
    pub fn start(fail_after: Option<u64>, panic_at: Option<u64>) -> Result<Self, HpuError> {
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        let counters = Arc::new(Counters::default());
        let c = Arc::clone(&counters);
        let thread = std::thread::Builder::new()
            .name("hpu-dma".into())
            .spawn(move || run(rx, c, fail_after, panic_at))
            .map_err(|e| HpuError::Dma(format!("cannot start the DMA thread: {e}")))?;
        Ok(Self {
            tx: Some(tx),
            thread: Some(thread),
            counters,
        })
    }

    pub fn stats(&self) -> DmaStats {
        let c = &self.counters;
        DmaStats {
            host_to_device_bytes: c.h2d.load(Ordering::Relaxed),
            device_to_host_bytes: c.d2h.load(Ordering::Relaxed),
            staged_bytes: c.staged.load(Ordering::Relaxed),
            busy: Duration::from_nanos(c.busy_ns.load(Ordering::Relaxed)),
        }
    }

    /// Queues copies out of `src`; `done` runs on the DMA thread when they finish and gets `src`
    /// back, whether the copies succeeded or not. Only the regions' bytes are read, and they
    /// must not be written until `done` runs; the rest of `src` may be (a batch's later slots).
    pub fn host_to_device(
        &self,
        src: PinnedBuffer,
        regions: Vec<CopyRegion>,
        done: impl FnOnce(PinnedBuffer, Result<(), HpuError>) + Send + 'static,
    ) {
        let job = Job::HostToDevice {
            src,
            regions,
            done: Box::new(done),
        };
        if let Err(crossbeam_channel::SendError(Job::HostToDevice { src, done, .. })) =
            self.send(job)
        {
            done(src, Err(HpuError::EngineStopped));
        }
    }

    /// Queues a copy of a whole device buffer into a new host vector.
    pub fn device_to_host(&self, src: DeviceBuffer) -> DmaEvent<Vec<u8>> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        if let Err(crossbeam_channel::SendError(Job::DeviceToHost { done, .. })) =
            self.send(Job::DeviceToHost { src, done: tx })
        {
            let _ = done.send(Err(HpuError::EngineStopped));
        }
        DmaEvent { rx }
    }

    fn send(&self, job: Job) -> Result<(), crossbeam_channel::SendError<Job>> {
        match &self.tx {
            Some(tx) => tx.send(job),
            None => Err(crossbeam_channel::SendError(job)),
        }
    }
}

impl Drop for DmaEngine {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(thread) = self.thread.take() {
            // The last device buffer can be released on the DMA thread itself (in a completion
            // callback); that thread then exits on its own once the queue is closed.
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

fn run(rx: Receiver<Job>, counters: Arc<Counters>, fail_after: Option<u64>, panic_at: Option<u64>) {
    let mut staging: Option<PinnedBuffer> = None;
    let mut transfers = 0u64;
    for job in rx {
        // CPU time of this thread: on a busy host, wall time would count preemption as copying.
        let start = CpuClock::now();
        match job {
            Job::HostToDevice { src, regions, done } => {
                transfers += 1;
                let result = if fail_after.is_some_and(|n| transfers >= n) {
                    Err(HpuError::Dma(format!(
                        "injected failure on host-to-device transfer {transfers}"
                    )))
                } else {
                    // A panic while copying fails this transfer, not the engine: the source
                    // buffer is only borrowed, so it still goes back to its owner below.
                    catch_unwind(AssertUnwindSafe(|| {
                        if panic_at == Some(transfers) {
                            panic!("injected panic in host-to-device transfer {transfers}");
                        }
                        copy_regions(&src, &regions, &mut staging, &counters)
                    }))
                    .unwrap_or_else(|panic| {
                        staging = None;
                        Err(HpuError::Dma(format!(
                            "the DMA engine panicked: {}",
                            panic_message(panic.as_ref())
                        )))
                    })
                };
                counters
                    .busy_ns
                    .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
                drop(regions);
                // The completion is the caller's code; its own panics are its own to contain
                // (the loader's are), but none may end this thread.
                if let Err(panic) = catch_unwind(AssertUnwindSafe(|| done(src, result))) {
                    tracing::error!(
                        "a DMA completion panicked: {}",
                        panic_message(panic.as_ref())
                    );
                }
            }
            Job::DeviceToHost { src, done } => {
                let out = src.lock().to_vec();
                counters.d2h.fetch_add(out.len() as u64, Ordering::Relaxed);
                counters
                    .busy_ns
                    .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
                let _ = done.send(Ok(out));
            }
        }
    }
}

fn copy_regions(
    src: &PinnedBuffer,
    regions: &[CopyRegion],
    staging: &mut Option<PinnedBuffer>,
    counters: &Counters,
) -> Result<(), HpuError> {
    for r in regions {
        // The region's bytes alone: the loader's workers may be writing other slots of a batch.
        let Some(from) = src.range(r.host_offset, r.len) else {
            return Err(HpuError::OutOfBounds {
                offset: r.host_offset,
                len: r.len,
                size: src.len(),
            });
        };
        let size = r.device.len();
        if r.device_offset
            .checked_add(r.len)
            .is_none_or(|end| end > size)
        {
            return Err(HpuError::OutOfBounds {
                offset: r.device_offset,
                len: r.len,
                size,
            });
        }
        // The region's bytes alone: engines keep writing other slots of the batch meanwhile.
        let mut dst = r.device.lease(r.device_offset, r.len);
        if src.is_locked() {
            dst[..r.len].copy_from_slice(from);
        } else {
            // The device can only read page-locked memory: bounce through the staging buffer.
            let stage = match staging {
                Some(s) => s,
                None => staging.insert(
                    PinnedBuffer::new(STAGING_BYTES)
                        .map_err(|e| HpuError::Dma(format!("staging buffer: {e}")))?,
                ),
            };
            for (i, chunk) in from.chunks(STAGING_BYTES).enumerate() {
                let s = &mut stage.as_mut_slice()[..chunk.len()];
                s.copy_from_slice(chunk);
                dst[i * STAGING_BYTES..i * STAGING_BYTES + chunk.len()].copy_from_slice(s);
            }
            counters.staged.fetch_add(r.len as u64, Ordering::Relaxed);
        }
        counters.h2d.fetch_add(r.len as u64, Ordering::Relaxed);
    }
    Ok(())
}

/// The message of a caught panic, for errors.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}
