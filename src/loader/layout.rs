//! How a batch lies in its pinned buffer, and what of it crosses to the device.
//!
//! ```text
//! offset 0                                   labels_offset (64-aligned)
//! | slot 0 | slot 1 | ... | slot n-1 | pad | label 0 | label 1 | ... | label n-1 |
//!   sample_bytes each: a decoded sample, or an engine sample's bitstream at its start
//! ```
//!
//! [`Slots`] hands each job the bytes of its own slot ([`Slots::slot_mut`], the only `unsafe`
//! of the batch buffer), and [`BatchLayout::upload_regions`] lists what the DMA engine copies.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::hpu::{CopyRegion, DeviceBuffer};
use crate::pinned::PinnedBuffer;

/// Bytes per label (`i64`).
pub(crate) const LABEL_BYTES: usize = 8;

/// Sizes and offsets of a batch buffer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BatchLayout {
    /// Bytes of one output sample.
    pub sample_bytes: usize,
    /// Where the labels start (after `batch_size` samples, 64-aligned).
    pub labels_offset: usize,
    /// Bytes of one label: [`LABEL_BYTES`], or a detection target record.
    pub label_bytes: usize,
}

/// What one slot sends to the device: a decoded sample (whole), or an engine sample's
/// bitstream (`len` bytes, or nothing when it went to a device buffer of its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EngineSlot {
    pub slot: usize,
    /// Bitstream bytes at the start of the slot; `None`: uploaded separately.
    pub in_slot: Option<usize>,
}

impl BatchLayout {
    /// The layout of batches of `batch_size` samples of `sample_bytes`, and the buffer length
    /// they need; `None` when that overflows.
    pub fn new(
        batch_size: usize,
        sample_bytes: usize,
        label_bytes: usize,
    ) -> Option<(Self, usize)> {
        let samples = batch_size.checked_mul(sample_bytes)?;
        let labels_offset = samples.checked_next_multiple_of(64)?;
        let len = labels_offset.checked_add(batch_size.checked_mul(label_bytes)?)?;
        Some((
            Self {
                sample_bytes,
                labels_offset,
                label_bytes,
            },
            len,
        ))
    }

    /// The bytes of slot `slot`'s sample.
    pub fn sample(&self, slot: usize) -> Range<usize> {
        slot * self.sample_bytes..(slot + 1) * self.sample_bytes
    }

    /// The bytes of slot `slot`'s label.
    pub fn label(&self, slot: usize) -> Range<usize> {
        let at = self.labels_offset + slot * self.label_bytes;
        at..at + self.label_bytes
    }

    /// Slots `slots` of a device batch (a part sent on its own): the host-decoded slots whole,
    /// the bitstreams only as long as they are, and the slots' labels. `engine` is sorted by
    /// slot and lies in `slots`.
    pub fn upload_regions(
        &self,
        slots: Range<usize>,
        engine: &[EngineSlot],
        images: &DeviceBuffer,
        labels: &DeviceBuffer,
    ) -> Vec<CopyRegion> {
        let sb = self.sample_bytes;
        let region = |host: usize, len: usize| CopyRegion {
            host_offset: host,
            device_offset: host,
            len,
            device: images.clone(),
        };
        let mut regions = Vec::with_capacity(engine.len() + 2);
        let mut next_slot = slots.start;
        for e in engine {
            if e.slot > next_slot {
                regions.push(region(next_slot * sb, (e.slot - next_slot) * sb));
            }
            if let Some(len) = e.in_slot {
                regions.push(region(e.slot * sb, len));
            }
            next_slot = e.slot + 1;
        }
        if slots.end > next_slot {
            regions.push(region(next_slot * sb, (slots.end - next_slot) * sb));
        }
        let lb = self.label_bytes;
        regions.push(CopyRegion {
            host_offset: self.labels_offset + slots.start * lb,
            device_offset: slots.start * lb,
            len: slots.len() * lb,
            device: labels.clone(),
        });
        regions
    }

    /// A host batch sends only the bitstreams that ride in their slots to the device.
    pub fn bitstream_regions(
        &self,
        engine: &[EngineSlot],
        images: &DeviceBuffer,
    ) -> Vec<CopyRegion> {
        engine
            .iter()
            .filter_map(|e| {
                e.in_slot.map(|len| CopyRegion {
                    host_offset: e.slot * self.sample_bytes,
                    device_offset: e.slot * self.sample_bytes,
                    len,
                    device: images.clone(),
                })
            })
            .collect()
    }
}

/// A batch buffer's slots, written by several threads at once, each slot by one job at a time.
pub(crate) struct Slots {
    base: *mut u8,
    len: usize,
    layout: BatchLayout,
    claimed: Vec<AtomicBool>,
}

// SAFETY: `base` points into a pinned buffer that the batch owns and keeps mapped (moving the
// `PinnedBuffer` value does not move its mapping) for as long as the batch exists; every access
// through it goes through `slot_mut`, which hands out each slot to one claimant at a time. The
// DMA engine reads a part's slots (and only theirs, `PinnedBuffer::range`) once every job that
// writes them has finished, while other parts' slots may still be written.
unsafe impl Send for Slots {}
// SAFETY: as above.
unsafe impl Sync for Slots {}

/// The bytes of one slot, claimed: the sample and its label. The slot is free again when this
/// drops.
pub(crate) struct SlotMut<'a> {
    pub sample: &'a mut [u8],
    pub label: &'a mut [u8],
    claimed: &'a AtomicBool,
}

impl Drop for SlotMut<'_> {
    fn drop(&mut self) {
        self.claimed.store(false, Ordering::Release);
    }
}

impl Slots {
    /// The slots of `buffer`, which must outlive this value; a slot must not be read until the
    /// job that writes it has finished (the batch's part countdowns order that).
    pub fn new(buffer: &mut PinnedBuffer, layout: BatchLayout, slots: usize) -> Self {
        let len = buffer.as_mut_slice().len();
        assert!(
            layout.label(slots.saturating_sub(1)).end <= len && layout.sample(slots).start <= len,
            "a batch of {slots} slots fits its buffer"
        );
        Self {
            base: buffer.as_mut_ptr(),
            len,
            layout,
            claimed: (0..slots).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    pub fn layout(&self) -> BatchLayout {
        self.layout
    }

    /// Claims slot `slot` for writing.
    ///
    /// # Panics
    /// The slot is out of range, or claimed by another job now (a bug: each slot has one job
    /// at a time).
    pub fn slot_mut(&self, slot: usize) -> SlotMut<'_> {
        let claimed = &self.claimed[slot];
        assert!(
            !claimed.swap(true, Ordering::Acquire),
            "slot {slot} is written by one job at a time"
        );
        let (sample, label) = (self.layout.sample(slot), self.layout.label(slot));
        debug_assert!(sample.end <= label.start && label.end <= self.len);
        // SAFETY: both ranges lie inside the buffer (checked in `new`, slot < slots here), the
        // sample range ends before the labels start, so the two slices do not overlap, and no
        // other slice of this slot exists: its claim flag was clear and is now ours until the
        // returned value drops. Other slots' ranges are disjoint from these. The buffer stays
        // mapped while `self` lives (see `new`).
        unsafe {
            SlotMut {
                sample: std::slice::from_raw_parts_mut(self.base.add(sample.start), sample.len()),
                label: std::slice::from_raw_parts_mut(self.base.add(label.start), label.len()),
                claimed,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_start_64_aligned_after_the_samples() {
        let (l, len) = BatchLayout::new(3, 10, LABEL_BYTES).unwrap();
        assert_eq!(l.labels_offset, 64);
        assert_eq!(len, 64 + 3 * LABEL_BYTES);
        assert_eq!(l.sample(2), 20..30);
        assert_eq!(l.label(1), 72..80);
        assert!(BatchLayout::new(usize::MAX, 2, LABEL_BYTES).is_none());
    }

    #[test]
    fn a_slot_is_claimed_by_one_job_at_a_time() {
        let (layout, len) = BatchLayout::new(2, 16, LABEL_BYTES).unwrap();
        let mut buffer = PinnedBuffer::new(len).unwrap();
        let slots = Slots::new(&mut buffer, layout, 2);
        let a = slots.slot_mut(0);
        a.sample.fill(7);
        a.label.copy_from_slice(&5i64.to_ne_bytes());
        let b = slots.slot_mut(1);
        drop(b);
        let taken = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| slots.slot_mut(0)));
        assert!(taken.is_err(), "slot 0 is still claimed");
        drop(a);
        drop(slots.slot_mut(0));
        assert_eq!(&buffer.as_mut_slice()[..16], &[7; 16]);
        assert_eq!(&buffer.as_mut_slice()[64..72], &5i64.to_ne_bytes());
    }
}
