//! Device memory: a capacity, an allocator with a free-block cache (as device runtimes keep,
//! so steady-state batches reuse memory instead of faulting in fresh pages), and buffers that
//! only the DMA engine can read or write.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{HpuError, HpuInner};

/// A size class's free blocks, each with whether the host has backed it (it was written).
type FreeBlocks = Vec<(Box<[u8]>, bool)>;

/// Free blocks kept per size. Enough for a loader's prefetch depth plus batches in use.
const CACHED_PER_SIZE: usize = 8;

pub(crate) struct DeviceMemory {
    capacity: u64,
    used: AtomicU64,
    free: Mutex<HashMap<usize, FreeBlocks>>,
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
        let (cached, fresh) = match cached {
            Some((block, backed)) => (Some(block), !backed),
            None => (None, true),
        };
        let Some(mut block) = cached.or_else(|| zeroed_block(bytes)) else {
            mem.used.fetch_sub(requested, Ordering::Relaxed);
            return Err(HpuError::HostBacking { requested });
        };
        Ok(DeviceBuffer {
            inner: Arc::new(BufferInner {
                host: block.as_mut_ptr() as usize,
                bytes: Mutex::new(block),
                len: bytes,
                fresh,
                written: AtomicBool::new(false),
                hpu: Arc::clone(hpu),
            }),
        })
    }

    fn release(&self, block: Box<[u8]>, backed: bool) {
        let len = block.len();
        self.used.fetch_sub(len as u64, Ordering::Relaxed);
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let list = free.entry(len).or_default();
        if list.len() < CACHED_PER_SIZE {
            list.push((block, backed));
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
    /// Where `bytes` lies in host memory (a boxed slice's allocation does not move), for
    /// [`DeviceBuffer::prefault`], which must not wait for the lock.
    host: usize,
    len: usize,
    /// A block whose pages the host has not backed yet: new, or never written before.
    fresh: bool,
    /// Whether the DMA engine or an engine has had access to it.
    written: AtomicBool,
    hpu: Arc<HpuInner>,
}

impl Drop for BufferInner {
    fn drop(&mut self) {
        let block = std::mem::take(self.bytes.get_mut().unwrap_or_else(|p| p.into_inner()));
        let backed = !self.fresh || *self.written.get_mut();
        self.hpu.memory.release(block, backed);
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
        self.inner.written.store(true, Ordering::Relaxed);
        self.inner.bytes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// In a fresh block, brings in the host pages that back `offset..offset + len` (those
    /// wholly inside it) without writing them and without holding the buffer's lock. A fresh
    /// block is backed lazily, and a writer that faulted its pages in under the lock (about
    /// 2 us a page here) would keep the other engines from writing for that long. A device's
    /// own memory is there before use: this only keeps the emulation's cost off the lock.
    /// A block that was written before (by a batch, whole) is left alone.
    pub(crate) fn prefault(&self, offset: usize, len: usize) {
        #[cfg(target_os = "linux")]
        if self.inner.fresh {
            let page = crate::pinned::page_size();
            let base = self.inner.host;
            let Some(end) = offset.checked_add(len).filter(|&e| e <= self.inner.len) else {
                return;
            };
            let (start, end) = (
                (base + offset).next_multiple_of(page),
                (base + end) / page * page,
            );
            if end > start {
                // SAFETY: `start..end` lies inside this buffer's block, which stays allocated
                // while `self` lives. MADV_POPULATE_WRITE faults absent pages in as zeroed ones,
                // as a first write would, and changes no byte, so it cannot race with a writer
                // that holds the lock. Its failure (e.g. an older kernel) only leaves the pages
                // to be faulted in by the write.
                unsafe {
                    libc::madvise(
                        start as *mut libc::c_void,
                        end - start,
                        libc::MADV_POPULATE_WRITE,
                    )
                };
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (offset, len);
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

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use crate::hpu::{Hpu, HpuConfig};
    use crate::pinned::{page_size, resident_pages_in};

    /// Of the pages inside the buffer (not its first and last, which may hold the
    /// allocator's bookkeeping or other data): how many are in memory, and how many there are.
    fn resident(buffer: &super::DeviceBuffer) -> (usize, usize) {
        let pages = resident_pages_in(buffer.inner.host as *const u8, buffer.len());
        let inside = &pages[1..pages.len() - 1];
        (inside.iter().filter(|&&r| r).count(), inside.len())
    }

    #[test]
    fn prefaulting_a_fresh_block_brings_its_pages_in_and_leaves_it_zeroed() {
        let hpu = Hpu::emulated(HpuConfig::default()).unwrap();
        // Above glibc's largest mmap threshold (32 MiB), so that the block is a new mapping, not
        // heap memory that calloc has zeroed (as the loader's batches of 74 MiB are).
        let len = 40 << 20;
        let buffer = hpu.alloc(len).unwrap();
        assert!(resident(&buffer).0 < 16, "a new block is backed lazily");
        buffer.prefault(0, len);
        let (resident, inside) = resident(&buffer);
        assert!(inside >= len / page_size() - 1);
        assert_eq!(resident, inside, "every page inside is in");
        assert!(buffer.lock().iter().all(|&b| b == 0), "and nothing written");
    }

    #[test]
    fn only_a_block_never_written_counts_as_fresh_when_it_comes_back_from_the_cache() {
        let hpu = Hpu::emulated(HpuConfig::default()).unwrap();
        let len = 64 * page_size();
        // Allocated and freed unwritten (as the loader's reserve check does): still fresh.
        drop(hpu.alloc(len).unwrap());
        let again = hpu.alloc(len).unwrap();
        assert!(again.inner.fresh);
        again.lock()[0] = 1;
        drop(again);
        // Written, then freed: backed, so prefault leaves it alone.
        assert!(!hpu.alloc(len).unwrap().inner.fresh);
    }
}
