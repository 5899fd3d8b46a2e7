//! The media engine: `N` fixed-function decoder engines (threads here) fed from one job queue.
//! Each engine owns its decoder state (the engine's JPEG decoder and SRAM-like scratch); a job
//! reads a compressed bitstream from device memory and writes a decoded, cropped, resized
//! image into device memory. What a job does is given by the runtime's user (the loader) as a
//! closure over [`EngineContext`], so the engine stays independent of any pipeline.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::Sender;
use hpuload_decoders::{JpegDecoder, Limits};

use super::HpuError;

/// Per-engine state a job may use.
pub struct EngineContext {
    /// The engine's fixed-function JPEG decoder.
    pub decoder: JpegDecoder,
    /// Input FIFO: the bitstream, copied out of device memory.
    pub bitstream: Vec<u8>,
    /// The engine's output: the decoded, cropped, resized image.
    pub pixels: Vec<u8>,
    /// Which engine this is.
    pub engine: usize,
}

type MediaJob = Box<dyn FnOnce(&mut EngineContext) + Send>;

pub(crate) struct MediaEngine {
    tx: Option<Sender<MediaJob>>,
    threads: Vec<JoinHandle<()>>,
}

impl MediaEngine {
    pub fn start(engines: usize, limits: Limits, panic_at: Option<u64>) -> Result<Self, HpuError> {
        let (tx, rx) = crossbeam_channel::unbounded::<MediaJob>();
        let jobs = Arc::new(AtomicU64::new(0));
        let threads = (0..engines)
            .map(|engine| {
                let (rx, jobs) = (rx.clone(), Arc::clone(&jobs));
                std::thread::Builder::new()
                    .name(format!("hpu-media-{engine}"))
                    .spawn(move || {
                        let fresh = || EngineContext {
                            decoder: JpegDecoder::with_limits(limits),
                            bitstream: Vec::new(),
                            pixels: Vec::new(),
                            engine,
                        };
                        let mut ctx = fresh();
                        for job in rx {
                            let n = jobs.fetch_add(1, Ordering::Relaxed) + 1;
                            // A panicking job ends that job, not the engine. The job is
                            // dropped while unwinding, which is how its submitter learns of
                            // it (the loader's jobs carry a guard that fails their batch).
                            let ran = catch_unwind(AssertUnwindSafe(|| {
                                if panic_at == Some(n) {
                                    panic!("injected panic in media-engine job {n}");
                                }
                                job(&mut ctx);
                            }));
                            if let Err(panic) = ran {
                                tracing::error!(
                                    "media engine {engine}: a job panicked: {}",
                                    super::panic_message(panic.as_ref())
                                );
                                ctx = fresh();
                            }
                        }
                    })
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| HpuError::Dma(format!("cannot start the media engine: {e}")))?;
        Ok(Self {
            tx: Some(tx),
            threads,
        })
    }

    /// Queues a job; it runs on the next free engine.
    ///
    /// # Errors
    /// The engine has shut down (the job is dropped without running).
    pub fn submit(
        &self,
        job: impl FnOnce(&mut EngineContext) + Send + 'static,
    ) -> Result<(), HpuError> {
        let tx = self.tx.as_ref().ok_or(HpuError::EngineStopped)?;
        tx.send(Box::new(job)).map_err(|_| HpuError::EngineStopped)
    }

    pub fn engines(&self) -> usize {
        self.threads.len()
    }
}

impl Drop for MediaEngine {
    fn drop(&mut self) {
        self.tx = None;
        let me = std::thread::current().id();
        for t in self.threads.drain(..) {
            // The last device handle may be dropped by a job on an engine thread itself.
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
    }
}
