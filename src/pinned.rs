//! Page-locked ("pinned") host memory: page-aligned buffers locked with `mlock2(2)` (each page
//! from its first write), and a fixed pool of them that is reused for the whole run.
//!
//! Locking can fail: a non-root user's `RLIMIT_MEMLOCK` is often 8 MiB. Then the buffers stay
//! pageable, a warning is logged once per pool, [`PinnedPool::is_pinned`] reports `false`, and
//! the DMA engine copies through its own small pinned staging buffer.

use std::ptr::NonNull;

use crossbeam_channel::{Receiver, Sender};

/// A page-aligned host buffer, page-locked when the OS allows it.
pub struct PinnedBuffer {
    ptr: NonNull<u8>,
    len: usize,
    locked: bool,
    /// Locked page by page as first written, with pages not yet in (see [`Self::new`]).
    on_fault: bool,
    /// Times a [`PinnedPool`] handed it out.
    handed_out: u32,
}

// SAFETY: the buffer exclusively owns its mapping; moving it between threads moves that
// ownership, and shared references only give out `&[u8]`.
unsafe impl Send for PinnedBuffer {}
// SAFETY: `&PinnedBuffer` only allows reads of the mapping.
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
    /// Maps `len` bytes (at least one page) of zeroed memory and tries to lock it: each page is
    /// locked in RAM from when it is first written (Linux's `MLOCK_ONFAULT`; elsewhere, or on a
    /// kernel without it, every page is faulted in and locked now). Whatever the DMA engine
    /// reads was written first, so it is always resident and locked.
    ///
    /// Locking on fault is what makes a loader's first batch quick: populating a pool of three
    /// 74 MiB batch buffers up front took about 90 ms of the time to the first batch, while a
    /// batch of the engine path writes only its bitstreams into its buffer, a quarter of the
    /// pages. A [`PinnedPool`] brings all of a buffer's pages in when it hands the buffer out a
    /// second time (its first batch long done), so memory is flat from then on instead of
    /// creeping up as larger samples reach pages no sample had written yet.
    ///
    /// # Errors
    /// The memory cannot be mapped. A failure to *lock* is not an error: see [`Self::is_locked`].
    pub fn new(len: usize) -> std::io::Result<Self> {
        Self::map(len, true)
    }

    /// Maps `len` bytes of zeroed memory, neither populated nor locked: pages appear as they are
    /// first written. For buffers sized for a worst case that most uses never reach.
    ///
    /// # Errors
    /// The memory cannot be mapped.
    pub fn pageable(len: usize) -> std::io::Result<Self> {
        Self::map(len, false)
    }

    fn map(len: usize, pin: bool) -> std::io::Result<Self> {
        let map_len = len.max(1);
        // SAFETY: an anonymous private mapping with no address hint has no preconditions; the
        // result is checked against MAP_FAILED before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let (locked, on_fault) = if pin {
            lock(ptr, map_len)
        } else {
            (false, false)
        };
        let ptr = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| std::io::Error::other("mmap returned null"))?;
        Ok(Self {
            ptr,
            len,
            locked,
            on_fault,
            handed_out: 0,
        })
    }

    /// Whether the pages are locked in RAM (DMA can read them directly).
    pub fn is_locked(&self) -> bool {
        self.locked
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes owned by `self` for its whole lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// Bytes `offset..offset + len`, or `None` when they do not lie in the buffer. Only those
    /// bytes are borrowed: the DMA engine reads a batch's filled slots this way while workers
    /// still write its other slots (through [`Self::as_mut_ptr`]).
    pub(crate) fn range(&self, offset: usize, len: usize) -> Option<&[u8]> {
        let end = offset.checked_add(len)?;
        (end <= self.len).then(|| {
            // SAFETY: `offset..end` lies inside the mapping, which `self` owns for its whole
            // lifetime; no slice of the rest of the buffer is made.
            unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(offset), len) }
        })
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Counts a hand-out by a pool; at the second, brings every page of a buffer locked on fault
    /// in (see [`Self::new`]).
    fn hand_out(mut self) -> Self {
        self.handed_out = self.handed_out.saturating_add(1);
        if self.on_fault && self.handed_out == 2 {
            populate(self.ptr.as_ptr(), self.len.max(1));
            self.on_fault = false;
        }
        self
    }

    /// A raw pointer to the first byte, for writers that fill disjoint parts concurrently.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        // SAFETY: we own the mapping of `max(len, 1)` bytes; munmap also unlocks it.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len.max(1)) };
    }
}

impl std::fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PinnedBuffer({} bytes, locked: {})",
            self.len, self.locked
        )
    }
}

/// A fixed set of equally sized pinned buffers, handed out and returned for reuse.
pub struct PinnedPool {
    tx: Sender<PinnedBuffer>,
    rx: Receiver<PinnedBuffer>,
    count: usize,
    buffer_len: usize,
    pinned: bool,
    /// Buffers are [`PinnedBuffer::pageable`].
    pageable: bool,
    grown: std::sync::atomic::AtomicU64,
}

impl PinnedPool {
    /// Allocates `count` buffers of `buffer_len` bytes.
    ///
    /// # Errors
    /// The pool would take more than half the machine's RAM, or the memory cannot be mapped at
    /// all (pageable fallback is not an error).
    pub fn new(count: usize, buffer_len: usize) -> std::io::Result<Self> {
        Self::with(count, buffer_len, false)
    }

    /// Like [`PinnedPool::new`], of [`PinnedBuffer::pageable`] buffers: for batches whose
    /// samples are mostly much smaller than their slots (detection outputs at their own
    /// sizes), whose untouched pages then take no memory.
    ///
    /// # Errors
    /// As [`PinnedPool::new`].
    pub fn pageable(count: usize, buffer_len: usize) -> std::io::Result<Self> {
        Self::with(count, buffer_len, true)
    }

    fn with(count: usize, buffer_len: usize, pageable: bool) -> std::io::Result<Self> {
        let total = count.saturating_mul(buffer_len);
        if let Some(ram) = physical_memory() {
            // Populating (and locking) more would push the machine into swap or the OOM killer.
            if total as u64 > ram / 2 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::OutOfMemory,
                    format!(
                        "{count} batch buffers of {} MiB need {} MiB, more than half of this \
                         machine's {} MiB of RAM; lower the batch size, the output size or \
                         the prefetch depth",
                        buffer_len >> 20,
                        total >> 20,
                        ram >> 20
                    ),
                ));
            }
        }
        let (tx, rx) = crossbeam_channel::bounded(count);
        let mut pinned = !pageable;
        for _ in 0..count {
            let buf = PinnedBuffer::map(buffer_len, !pageable)?;
            pinned &= buf.is_locked();
            tx.send(buf).expect("the pool holds its own receiver");
        }
        if !pinned && !pageable {
            let limit =
                memlock_limit().map_or("unknown".to_string(), |l| format!("{} KiB", l / 1024));
            tracing::warn!(
                "could not page-lock {} MiB of batch buffers (RLIMIT_MEMLOCK is {limit}); using pageable memory, \
                 DMA will go through a staging copy (raise the limit with `ulimit -l` to pin)",
                (count * buffer_len) >> 20
            );
        }
        Ok(Self {
            tx,
            rx,
            count,
            buffer_len,
            pinned,
            pageable,
            grown: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Takes a buffer, waiting for one to be returned if all are out.
    pub fn take(&self) -> PinnedBuffer {
        self.rx
            .recv()
            .expect("the pool holds its own sender")
            .hand_out()
    }

    /// Takes a buffer, or maps a new one when all are out. For buffers lent to a consumer that
    /// decides when to give them back (tensors handed to Python): waiting would deadlock a
    /// training loop that keeps a batch, so the pool grows by what the consumer holds instead.
    /// Returned buffers beyond the pool's size are unmapped (see [`Self::give_back`]), so memory
    /// is the pool plus what the consumer still holds.
    ///
    /// # Errors
    /// A new buffer cannot be mapped.
    pub fn take_or_grow(&self) -> std::io::Result<PinnedBuffer> {
        match self.rx.try_recv() {
            Ok(buf) => Ok(buf.hand_out()),
            Err(_) => {
                self.grown
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                PinnedBuffer::map(self.buffer_len, !self.pageable)
            }
        }
    }

    /// Buffers mapped beyond the pool's size by [`Self::take_or_grow`] so far.
    pub fn grown(&self) -> u64 {
        self.grown.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Returns `buf` through `returner` (see [`Self::returner`]) if the pool has room for it;
    /// otherwise (a buffer mapped by [`Self::take_or_grow`], or the pool is gone) unmaps it.
    pub fn give_back(returner: &Sender<PinnedBuffer>, buf: PinnedBuffer) {
        // A full or closed pool hands the buffer back, and dropping it unmaps it.
        let _ = returner.try_send(buf);
    }

    /// A handle that returns buffers to this pool.
    pub fn returner(&self) -> Sender<PinnedBuffer> {
        self.tx.clone()
    }

    /// Whether every buffer is page-locked.
    pub fn is_pinned(&self) -> bool {
        self.pinned
    }

    /// Total bytes in the pool.
    pub fn bytes(&self) -> usize {
        self.count * self.buffer_len
    }

    /// Buffers currently in the pool (not handed out).
    pub fn available(&self) -> usize {
        self.rx.len()
    }
}

/// Locks the `len` bytes of our fresh mapping at `ptr`, each page from when it is first touched
/// where the kernel can (see [`PinnedBuffer::new`]), else all of them now. Whether it could,
/// and whether on fault.
fn lock(ptr: *mut libc::c_void, len: usize) -> (bool, bool) {
    #[cfg(all(target_os = "linux", any(target_env = "gnu", target_env = "musl")))]
    {
        // SAFETY: `ptr` is a live mapping of `len` bytes that we own; locking changes no byte.
        if unsafe { libc::mlock2(ptr, len, libc::MLOCK_ONFAULT as _) } == 0 {
            return (true, true);
        }
        let err = std::io::Error::last_os_error().raw_os_error();
        if err != Some(libc::ENOSYS) && err != Some(libc::EINVAL) {
            // Over the limit (ENOMEM, EPERM): locking everything now would fail the same way.
            return (false, false);
        }
    }
    // SAFETY: as above. Locking faults every page in.
    (unsafe { libc::mlock(ptr, len) == 0 }, false)
}

/// Brings every page of the `len` bytes at `ptr` (a mapping owned by the caller, which nothing
/// else writes meanwhile) into memory without changing a byte.
fn populate(ptr: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: the range is the caller's own mapping; MADV_POPULATE_WRITE faults its pages in
        // as writes would, and writes nothing.
        if unsafe { libc::madvise(ptr.cast(), len, libc::MADV_POPULATE_WRITE) } == 0 {
            return;
        }
    }
    // Kernels before 5.14: each page's first byte written back as it is.
    for at in (0..len).step_by(4096) {
        // SAFETY: `at < len`, inside the caller's mapping, which nothing else writes meanwhile.
        unsafe { ptr.add(at).write_volatile(ptr.add(at).read_volatile()) };
    }
}

/// The host's page size in bytes.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf only reads its argument and returns a number (-1 on error).
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page)
        .ok()
        .filter(|&p| p > 0)
        .unwrap_or(4096)
}

/// Whether each page that `ptr..ptr + len` touches is in memory, by `mincore`; for tests.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn resident_pages_in(ptr: *const u8, len: usize) -> Vec<bool> {
    let page = page_size();
    let start = ptr as usize / page * page;
    let end = (ptr as usize + len).next_multiple_of(page);
    let mut resident = vec![0u8; (end - start) / page];
    // SAFETY: `start..end` covers whole pages of the caller's live mapping; `resident` has a
    // byte for each of them.
    let ok = unsafe { libc::mincore(start as *mut _, end - start, resident.as_mut_ptr().cast()) };
    assert_eq!(ok, 0, "mincore: {}", std::io::Error::last_os_error());
    resident.iter().map(|p| p & 1 == 1).collect()
}

/// The machine's physical memory in bytes, if the OS says.
pub fn physical_memory() -> Option<u64> {
    // SAFETY: sysconf only reads its argument and returns a number (-1 on error).
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && page > 0).then(|| pages as u64 * page as u64)
}

/// The soft `RLIMIT_MEMLOCK` in bytes, if it can be read and is finite.
pub fn memlock_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass and has no other effect.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } == 0;
    (ok && lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_page_aligned_zeroed_and_recycled() {
        let pool = PinnedPool::new(2, 10_000).unwrap();
        let mut a = pool.take();
        assert_eq!(a.as_slice().as_ptr() as usize % 4096, 0);
        assert!(a.as_slice().iter().all(|&b| b == 0));
        a.as_mut_slice()[9_999] = 7;
        let _b = pool.take();
        assert_eq!(pool.available(), 0);
        pool.returner().send(a).unwrap();
        assert_eq!(
            pool.take().as_slice()[9_999],
            7,
            "the same buffer comes back"
        );
    }

    use super::{page_size, resident_pages_in};

    /// Whether each page of `buf` is in memory.
    #[cfg(target_os = "linux")]
    fn resident_pages(buf: &PinnedBuffer) -> Vec<bool> {
        resident_pages_in(buf.ptr.as_ptr(), buf.len())
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_pinned_buffer_takes_memory_only_for_the_pages_written() {
        let page = page_size();
        let mut buf = PinnedBuffer::new(256 * page).unwrap();
        buf.as_mut_slice()[0] = 1;
        buf.as_mut_slice()[100 * page] = 2;
        let resident = resident_pages(&buf);
        assert!(resident[0] && resident[100], "written pages are in memory");
        assert_eq!(
            resident.iter().filter(|&&r| r).count(),
            2,
            "no page but the written ones (locked: {})",
            buf.is_locked()
        );
        assert_eq!(
            buf.as_slice()[200 * page],
            0,
            "unwritten bytes read as zeros"
        );
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_pooled_buffer_has_all_its_pages_in_from_its_second_batch_on() {
        let page = page_size();
        let resident = |buf: &PinnedBuffer| resident_pages(buf).iter().filter(|&&r| r).count();
        let pool = PinnedPool::new(1, 64 * page).unwrap();
        let mut first = pool.take();
        if !first.on_fault {
            eprintln!(
                "not locked on fault here (RLIMIT_MEMLOCK, or an old kernel): nothing to check"
            );
            return;
        }
        first.as_mut_slice()[page] = 9;
        assert_eq!(
            resident(&first),
            1,
            "its first batch: only the page it wrote"
        );
        pool.returner().send(first).unwrap();
        let second = pool.take();
        assert_eq!(resident(&second), 64, "its second: every page");
        assert_eq!(second.as_slice()[page], 9, "and no byte changed");
        assert!(second
            .as_slice()
            .iter()
            .enumerate()
            .all(|(i, &b)| b == 0 || i == page));
    }

    #[test]
    fn an_empty_pool_grows_for_lent_buffers_and_shrinks_back_on_return() {
        let pool = PinnedPool::new(1, 4096).unwrap();
        let a = pool.take_or_grow().unwrap();
        let b = pool.take_or_grow().unwrap();
        assert_eq!(pool.grown(), 1, "the second buffer is mapped anew");
        let returner = pool.returner();
        PinnedPool::give_back(&returner, a);
        PinnedPool::give_back(&returner, b);
        assert_eq!(pool.available(), 1, "the pool keeps its own size, no more");
    }
}
