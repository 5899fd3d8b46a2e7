//! Device memory: a capacity, an allocator with a free-block cache (as device runtimes keep,
//! so steady-state batches reuse memory instead of faulting in fresh pages), and buffers that
//! only the DMA engine can read or write.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{HpuError, HpuInner};

/// Free blocks kept per size. Enough for a loader's prefetch depth plus batches in use.
const CACHED_PER_SIZE: usize = 8;

pub(crate) struct DeviceMemory {
    capacity: u64,
    used: AtomicU64,
    free: Mutex<HashMap<usize, Vec<Box<[u8]>>>>,
}

impl DeviceMemory {
    pub fn new(capacity: u64) -> Self {
        Self {
            capacity,
            used: AtomicU64::new(0),
            free: Mutex::new(HashMap::new()),
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    pub fn alloc(hpu: &Arc<HpuInner>, bytes: usize) -> Result<DeviceBuffer, HpuError> {
        let mem = &hpu.memory;
        let requested = bytes as u64;
        let mut used = mem.used.load(Ordering::Relaxed);
        loop {
            if used.saturating_add(requested) > mem.capacity {
                return Err(HpuError::OutOfMemory {
                    requested,
                    used,
                    capacity: mem.capacity,
                });
            }
            match mem.used.compare_exchange_weak(
                used,
                used + requested,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => used = now,
            }
        }
        let cached = mem
            .free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&bytes)
            .and_then(Vec::pop);
        // A fresh block is zeroed lazily by the OS; a reused one keeps old contents, as on a device.
        let Some(block) = cached.or_else(|| zeroed_block(bytes)) else {
            mem.used.fetch_sub(requested, Ordering::Relaxed);
            return Err(HpuError::HostBacking { requested });
        };
        Ok(DeviceBuffer {
            inner: Arc::new(BufferInner {
                bytes: Mutex::new(block),
                len: bytes,
                hpu: Arc::clone(hpu),
            }),
        })
    }

    fn release(&self, block: Box<[u8]>) {
        let len = block.len();
        self.used.fetch_sub(len as u64, Ordering::Relaxed);
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let list = free.entry(len).or_default();
        if list.len() < CACHED_PER_SIZE {
            list.push(block);
        }
    }
}

/// A block of device memory. The host cannot read or write it directly; copies go through the
/// DMA engine ([`DeviceTensor::to_host`](super::DeviceTensor::to_host)). Clones share the block.
#[derive(Clone)]
pub struct DeviceBuffer {
    inner: Arc<BufferInner>,
}

struct BufferInner {
    bytes: Mutex<Box<[u8]>>,
    len: usize,
    hpu: Arc<HpuInner>,
}

impl Drop for BufferInner {
    fn drop(&mut self) {
        let block = std::mem::take(self.bytes.get_mut().unwrap_or_else(|p| p.into_inner()));
        self.hpu.memory.release(block);
    }
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer({} bytes)", self.inner.len)
    }
}

impl DeviceBuffer {
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The device the buffer lives on.
    pub fn hpu(&self) -> super::Hpu {
        super::Hpu {
            inner: Arc::clone(&self.inner.hpu),
        }
    }

    /// Device-side access, for the DMA engine only.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Box<[u8]>> {
        self.inner.bytes.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A zeroed heap block of `bytes`, or `None` when the host cannot provide it (instead of the
/// abort a failed `vec![0; n]` would be).
fn zeroed_block(bytes: usize) -> Option<Box<[u8]>> {
    if bytes == 0 {
        return Some(Box::default());
    }
    let layout = std::alloc::Layout::array::<u8>(bytes).ok()?;
    // SAFETY: `layout` has a non-zero size. `alloc_zeroed` returns null or a block of exactly
    // `bytes` zeroed bytes with `u8` alignment, which is what a `Box<[u8]>` of that length owns
    // and frees (with the same layout) when dropped.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout);
        if ptr.is_null() {
            return None;
        }
        Some(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            ptr, bytes,
        )))
    }
}
