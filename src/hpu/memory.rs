//! Device memory: a capacity, an allocator with a free-block cache (as device runtimes keep,
//! so steady-state batches reuse memory instead of faulting in fresh pages), and buffers that
//! only the DMA engine and the media engines can read or write, each through a lease on the
//! bytes it works on ([`Lease`]): leases on disjoint ranges of one buffer are held at once (two
//! engines writing their own samples' slots of a batch), an overlapping one waits.

use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use super::{HpuError, HpuInner};

/// Free blocks kept per size. Enough for a loader's prefetch depth plus batches in use.
const CACHED_PER_SIZE: usize = 8;

pub(crate) struct DeviceMemory {
    capacity: u64,
    used: AtomicU64,
    free: Mutex<HashMap<usize, Vec<Block>>>,
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
        // A fresh block is zeroed lazily by the OS; a reused one keeps old contents, as on a
        // device. A fresh block's pages fault in as its writers (the DMA engine, the engines)
        // first write them, each under its own lease, so no writer waits on another's faults.
        let Some(block) = cached.or_else(|| Block::zeroed(bytes)) else {
            mem.used.fetch_sub(requested, Ordering::Relaxed);
            return Err(HpuError::HostBacking { requested });
        };
        Ok(DeviceBuffer {
            inner: Arc::new(BufferInner {
                host: block.start(),
                block: Some(block),
                len: bytes,
                leases: Mutex::new(Vec::new()),
                returned: Condvar::new(),
                hpu: Arc::clone(hpu),
            }),
        })
    }

    fn release(&self, block: Block) {
        let len = block.len;
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
    /// The block's first byte (`block`'s), read and written only through [`Lease`]s.
    host: NonNull<u8>,
    /// The block, given back to the cache when the buffer is dropped.
    block: Option<Block>,
    len: usize,
    /// The byte ranges `[start, end)` leased now, none overlapping another.
    leases: Mutex<Vec<(usize, usize)>>,
    /// Signalled whenever a lease ends.
    returned: Condvar,
    hpu: Arc<HpuInner>,
}

// SAFETY: the block is plain bytes owned by the buffer; threads reach them only through
// leases, which the lease list keeps from overlapping (so no byte is borrowed mutably by two
// threads, or mutably and shared at once).
unsafe impl Send for BufferInner {}
// SAFETY: as for `Send`: every shared access to the bytes goes through the lease list's lock.
unsafe impl Sync for BufferInner {}

impl Drop for BufferInner {
    fn drop(&mut self) {
        let Some(block) = self.block.take() else {
            return;
        };
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

    /// Whether `other` is this buffer (a clone of it).
    pub(crate) fn same(&self, other: &DeviceBuffer) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The device the buffer lives on.
    pub fn hpu(&self) -> super::Hpu {
        super::Hpu {
            inner: Arc::clone(&self.inner.hpu),
        }
    }

    /// Device-side access to the whole buffer (the DMA engine's copy of a batch to the host),
    /// once no other lease is held on it.
    pub(crate) fn lock(&self) -> Lease<'_> {
        self.lease(0, self.inner.len)
    }

    /// Device-side access to bytes `offset..offset + len` (a DMA region, an engine job's
    /// slot), once no lease on any of them is held: leases on disjoint ranges are held at once.
    /// A thread must not ask for a range that overlaps one it holds (it would wait for itself).
    ///
    /// # Panics
    /// When the range does not lie inside the buffer (as indexing it would).
    pub(crate) fn lease(&self, offset: usize, len: usize) -> Lease<'_> {
        let inner = &*self.inner;
        let end = offset
            .checked_add(len)
            .filter(|&end| end <= inner.len)
            .unwrap_or_else(|| {
                panic!(
                    "device range {offset}..{offset}+{len} outside a buffer of {} bytes",
                    inner.len
                )
            });
        let overlaps = |&(s, e): &(usize, usize)| offset < e && s < end;
        let mut leases = inner.leases.lock().unwrap_or_else(|p| p.into_inner());
        while len > 0 && leases.iter().any(overlaps) {
            leases = inner
                .returned
                .wait(leases)
                .unwrap_or_else(|p| p.into_inner());
        }
        if len > 0 {
            leases.push((offset, end));
        }
        drop(leases);
        Lease {
            inner,
            start: offset,
            len,
        }
    }
}

/// Bytes `start..start + len` of a device buffer, the holder's alone until it is dropped
/// ([`DeviceBuffer::lease`]).
pub(crate) struct Lease<'a> {
    inner: &'a BufferInner,
    start: usize,
    len: usize,
}

impl std::ops::Deref for Lease<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `start + len <= inner.len` (checked by `lease`), so the range lies in the
        // block, which lives while `inner` is borrowed; no other lease covers any of it while
        // this one lives, so nothing writes it meanwhile.
        unsafe { std::slice::from_raw_parts(self.inner.host.as_ptr().add(self.start), self.len) }
    }
}

impl std::ops::DerefMut for Lease<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `deref`; no other lease covers the range, and `&mut self` makes this
        // the only borrow of it.
        unsafe {
            std::slice::from_raw_parts_mut(self.inner.host.as_ptr().add(self.start), self.len)
        }
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        let range = (self.start, self.start + self.len);
        let mut leases = self.inner.leases.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = leases.iter().position(|&r| r == range) {
            leases.swap_remove(at);
        }
        drop(leases);
        self.inner.returned.notify_all();
    }
}

/// Alignment of a block's first byte: a device allocator's at least, and what the batch
/// writers need to stream whole cache lines into a slot's rows (they store through the cache
/// otherwise, reading each line in first).
const BLOCK_ALIGN: usize = 64;

/// A zeroed block of host memory standing for device memory: `len` bytes from a
/// [`BLOCK_ALIGN`]-aligned start, inside an allocation of `len + BLOCK_ALIGN` bytes from
/// `calloc` (through `alloc_zeroed` at byte alignment), which leaves a large block's pages to
/// the OS to back when first touched (an aligned `alloc_zeroed` would write every byte).
struct Block {
    alloc: NonNull<u8>,
    len: usize,
}

// SAFETY: a block owns its allocation and nothing else; `BufferInner` governs access to its
// bytes.
unsafe impl Send for Block {}

impl Block {
    /// A zeroed block of `len` bytes, or `None` when the host cannot provide it (instead of
    /// the abort a failed `vec![0; n]` would be).
    fn zeroed(len: usize) -> Option<Self> {
        let layout = Self::layout(len)?;
        // SAFETY: `layout` has a non-zero size (at least `BLOCK_ALIGN`).
        let alloc = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })?;
        Some(Self { alloc, len })
    }

    fn layout(len: usize) -> Option<std::alloc::Layout> {
        std::alloc::Layout::array::<u8>(len.checked_add(BLOCK_ALIGN)?).ok()
    }

    /// The block's first byte: the allocation's first on a `BLOCK_ALIGN` boundary, which
    /// leaves `len` bytes after it inside the allocation.
    fn start(&self) -> NonNull<u8> {
        let skip = self.alloc.as_ptr().align_offset(BLOCK_ALIGN);
        debug_assert!(skip < BLOCK_ALIGN);
        // SAFETY: `skip < BLOCK_ALIGN`, so the pointer stays inside the allocation of
        // `len + BLOCK_ALIGN` bytes, and is not null.
        unsafe { NonNull::new_unchecked(self.alloc.as_ptr().add(skip)) }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        let layout = Self::layout(self.len).expect("made when the block was");
        // SAFETY: `alloc` came from `alloc_zeroed` with this same layout, and is freed once.
        unsafe { std::alloc::dealloc(self.alloc.as_ptr(), layout) };
    }
}

#[cfg(test)]
mod lease_tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    use crate::hpu::{Hpu, HpuConfig};

    #[test]
    fn leases_on_disjoint_ranges_are_held_at_once_and_write_only_their_own_bytes() {
        let hpu = Hpu::emulated(HpuConfig::default()).unwrap();
        let buffer = hpu.alloc(64).unwrap();
        let mut first = buffer.lease(0, 32);
        let (got, second) = mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut lease = buffer.lease(32, 32);
                lease.fill(2);
                got.send(()).unwrap();
            });
            // The other thread's lease comes while this one is still held.
            second
                .recv_timeout(Duration::from_secs(10))
                .expect("a lease on other bytes does not wait");
            first.fill(1);
        });
        drop(first);
        let all = buffer.lock();
        assert_eq!(&all[..32], &[1; 32]);
        assert_eq!(&all[32..], &[2; 32]);
    }

    #[test]
    fn a_lease_on_bytes_already_leased_waits_until_they_are_given_back() {
        let hpu = Hpu::emulated(HpuConfig::default()).unwrap();
        let buffer = hpu.alloc(64).unwrap();
        let released = AtomicBool::new(false);
        let held = buffer.lease(16, 16);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                // Overlaps the held range by one byte at its end.
                let mut lease = buffer.lease(31, 8);
                lease[0] = 7;
                released.load(Ordering::SeqCst)
            });
            std::thread::sleep(Duration::from_millis(50));
            released.store(true, Ordering::SeqCst);
            drop(held);
            assert!(
                waiter.join().unwrap(),
                "the overlapping lease came after the release"
            );
        });
        // The whole buffer waits for every lease in the same way, and sees what they wrote.
        assert_eq!(buffer.lock()[31], 7);
    }

    #[test]
    fn every_block_starts_on_a_cache_line_so_the_batch_writers_can_stream_into_it() {
        let hpu = Hpu::emulated(HpuConfig::default()).unwrap();
        // Small blocks from the heap, a large one mapped on its own (glibc's threshold is at
        // most 32 MiB): both kinds start 16 bytes into their allocation.
        for len in [0, 1, 4096, 1 << 20, 40 << 20] {
            let buffer = hpu.alloc(len).unwrap();
            assert_eq!(
                buffer.inner.host.as_ptr() as usize % super::BLOCK_ALIGN,
                0,
                "{len} bytes"
            );
            assert!(buffer.lock().iter().all(|&b| b == 0), "{len} bytes zeroed");
        }
    }

    #[test]
    #[should_panic(expected = "outside a buffer of 64 bytes")]
    fn a_lease_past_the_buffers_end_panics_as_indexing_would() {
        let hpu = Hpu::emulated(HpuConfig::default()).unwrap();
        let buffer = hpu.alloc(64).unwrap();
        let _ = buffer.lease(60, 8);
    }
}
