//! The emulated HPU runtime: device memory that the host cannot dereference, an asynchronous
//! DMA engine that copies only from pinned memory (pageable sources go through a pinned staging
//! buffer, as real drivers do), and device tensors.
//!
//! Device memory is host RAM behind an API that only lets the DMA engine touch it, so code
//! written against [`Hpu`] keeps the ownership and synchronisation rules of a real device.

mod dma;
mod media;
mod memory;
mod tensor;

pub use crate::dtype::{Dtype, Layout};
pub use dma::{DmaEvent, DmaStats};
pub use media::{
    Destination, DeviceOp, DeviceSlice, EngineError, EngineTimes, HostSlot, JobFailure, MediaJob,
    MediaWork,
};
pub use memory::DeviceBuffer;
pub use tensor::DeviceTensor;

use std::sync::Arc;

pub(crate) use dma::{panic_message, CopyRegion, DmaEngine};

/// Errors of the emulated device.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HpuError {
    /// A device allocation does not fit.
    #[error("HPU out of memory: {requested} bytes requested, {used} of {capacity} in use")]
    OutOfMemory {
        /// Bytes asked for.
        requested: u64,
        /// Bytes allocated at the time.
        used: u64,
        /// Device capacity.
        capacity: u64,
    },
    /// The emulation could not get host memory to back a device allocation.
    #[error("the emulated HPU cannot back {requested} bytes of device memory with host memory")]
    HostBacking {
        /// Bytes asked for.
        requested: u64,
    },
    /// A DMA transfer failed.
    #[error("DMA transfer failed: {0}")]
    Dma(String),
    /// The device's DMA engine or media engine has shut down (the device is being dropped).
    #[error("the HPU's DMA or media engine is not running")]
    EngineStopped,
    /// A copy's source or destination range is out of bounds.
    #[error("DMA range {offset}+{len} is outside a {size}-byte buffer")]
    OutOfBounds {
        /// Start of the range.
        offset: usize,
        /// Length of the range.
        len: usize,
        /// Size of the buffer.
        size: usize,
    },
}

/// Configuration of an emulated device.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct HpuConfig {
    /// Device memory in bytes. Default: 96 GiB (Gaudi2).
    pub memory_bytes: u64,
    /// Fail the `n`-th host-to-device DMA transfer (1-based), for fault-injection tests.
    /// Default: `None`.
    pub fail_dma_after: Option<u64>,
    /// Decoder engines of the media engine. Default: 8 (Gaudi2). The emulation runs them on at
    /// most as many host threads as the host has cores.
    pub media_engines: usize,
    /// Panic inside the `n`-th host-to-device DMA transfer (1-based), for fault-injection
    /// tests: the DMA thread must survive it and the transfer fail. Default: `None`.
    pub panic_dma_at: Option<u64>,
    /// Panic inside the `n`-th media-engine job (1-based, counted over all engines), for
    /// fault-injection tests: the engine must survive it and the job's batch fail. Default:
    /// `None`.
    pub panic_media_at: Option<u64>,
}

impl Default for HpuConfig {
    fn default() -> Self {
        Self {
            memory_bytes: 96 << 30,
            fail_dma_after: None,
            media_engines: 8,
            panic_dma_at: None,
            panic_media_at: None,
        }
    }
}

impl HpuConfig {
    /// Sets [`HpuConfig::memory_bytes`].
    #[must_use]
    pub fn memory_bytes(mut self, bytes: u64) -> Self {
        self.memory_bytes = bytes;
        self
    }

    /// Sets [`HpuConfig::media_engines`].
    #[must_use]
    pub fn media_engines(mut self, n: usize) -> Self {
        self.media_engines = n;
        self
    }

    /// Sets [`HpuConfig::panic_dma_at`].
    #[must_use]
    pub fn panic_dma_at(mut self, n: Option<u64>) -> Self {
        self.panic_dma_at = n;
        self
    }

    /// Sets [`HpuConfig::panic_media_at`].
    #[must_use]
    pub fn panic_media_at(mut self, n: Option<u64>) -> Self {
        self.panic_media_at = n;
        self
    }

    /// Sets [`HpuConfig::fail_dma_after`].
    #[must_use]
    pub fn fail_dma_after(mut self, n: Option<u64>) -> Self {
        self.fail_dma_after = n;
        self
    }
}

/// A handle to an (emulated) HPU. Cheap to clone; the device's DMA thread stops when the last
/// handle and the last device buffer are gone.
#[derive(Clone)]
pub struct Hpu {
    pub(crate) inner: Arc<HpuInner>,
}

pub(crate) struct HpuInner {
    pub memory: memory::DeviceMemory,
    pub dma: DmaEngine,
    pub media: media::MediaEngine,
}

impl std::fmt::Debug for Hpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hpu")
            .field("capacity", &self.inner.memory.capacity())
            .field("used", &self.inner.memory.used())
            .finish()
    }
}

impl Hpu {
    /// Starts an emulated device (spawns its DMA engine thread).
    ///
    /// # Errors
    /// The DMA thread cannot be spawned.
    pub fn emulated(config: HpuConfig) -> Result<Self, HpuError> {
        Ok(Self {
            inner: Arc::new(HpuInner {
                memory: memory::DeviceMemory::new(config.memory_bytes),
                dma: DmaEngine::start(config.fail_dma_after, config.panic_dma_at)?,
                media: media::MediaEngine::start(
                    config.media_engines.max(1),
                    hpuload_decoders::Limits::default(),
                    config.panic_media_at,
                )?,
            }),
        })
    }

    /// Allocates `bytes` of device memory.
    ///
    /// # Errors
    /// [`HpuError::OutOfMemory`] when the allocation does not fit.
    pub fn alloc(&self, bytes: usize) -> Result<DeviceBuffer, HpuError> {
        memory::DeviceMemory::alloc(&self.inner, bytes)
    }

    /// Device capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.inner.memory.capacity()
    }

    /// Device bytes currently allocated.
    pub fn memory_used(&self) -> u64 {
        self.inner.memory.used()
    }

    /// What the DMA engine has done so far.
    pub fn dma_stats(&self) -> DmaStats {
        self.inner.dma.stats()
    }

    /// Copies `src[..dst.len()]` into `dst` asynchronously; the event gives `src` back when done.
    /// A pageable `src` goes through the engine's pinned staging buffer.
    pub fn copy_to_device(
        &self,
        src: crate::pinned::PinnedBuffer,
        dst: &DeviceBuffer,
    ) -> DmaEvent<crate::pinned::PinnedBuffer> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let region = CopyRegion {
            host_offset: 0,
            device_offset: 0,
            len: dst.len(),
            device: dst.clone(),
        };
        self.dma()
            .host_to_device(src, vec![region], move |src, result| {
                let _ = tx.send(result.map(|()| src));
            });
        DmaEvent::new(rx)
    }

    /// Number of media-engine decoders.
    pub fn media_engines(&self) -> usize {
        self.inner.media.engines()
    }

    /// Queues a job on the media engine; it runs on the next free decoder engine.
    ///
    /// # Errors
    /// The engine has shut down.
    pub fn submit_media(&self, job: MediaJob) -> Result<(), HpuError> {
        self.inner.media.submit(job)
    }

    pub(crate) fn dma(&self) -> &DmaEngine {
        &self.inner.dma
    }
}
