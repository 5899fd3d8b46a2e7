//! The skip/replace policy around loading one sample: a sample that cannot be read or decoded
//! fails its batch (`OnError::Fail`), or is skipped, named, and replaced by a deterministic
//! draw from the counter-based generator keyed by (seed, epoch, original index), never a
//! sample that already failed in that slot, tried up to `MAX_REPLACEMENTS` times. The workers load through it, and so does the media engine's
//! fallback to the CPU.

use std::sync::atomic::Ordering;

use hpuload_decoders::DecodeError;

use super::cpu::{self, CpuScratch, Scratch};
use super::route::{route, Bitstream, HwSlot, Route};
use super::{Backend, OnError, Shared};
use crate::augment::{AugmentError, DetectPlan, SamplePlan};
use crate::cpu_time::{self, CpuClock};
use crate::hpu::Hpu;
use crate::rng::{CounterRng, Stream};
use crate::stage::Stage;
use crate::{Error, SampleError, SampleErrorKind};

/// Replacements tried for one failed slot before the batch fails.
const MAX_REPLACEMENTS: usize = 16;

/// Where a loaded sample went.
#[allow(clippy::large_enum_variant)] // one per sample, returned once to the batch's loop
pub(super) enum Filled {
    /// Decoded on the host into the slot.
    Cpu {
        index: usize,
        label: i64,
        /// A detection sample's plan: its boxes.
        detect: Option<DetectPlan>,
    },
    /// The bitstream is in the slot, for the media engine.
    Hw(HwSlot),
}

/// Where a sample's plan is drawn: its epoch, and the batch's key where the samples of a
/// batch share their draws ([`super::LoaderBuilder::draws_per_batch`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct At {
    pub epoch: u64,
    batch: Option<usize>,
}

impl At {
    /// A sample of the batch whose first slot is at global position `first` of epoch `epoch`.
    pub fn new(shared: &Shared, epoch: u64, first: usize) -> Self {
        Self {
            epoch,
            batch: shared.per_batch.then_some(first),
        }
    }

    /// The key sample `index`'s plan is drawn from: its own index, or its batch's.
    pub fn key(self, index: usize) -> usize {
        self.batch.unwrap_or(index)
    }
}

/// Where the policy reports a skipped sample (its batch, which names it in its report).
pub(super) trait Skips {
    /// Sample `e.index` failed and is replaced.
    fn skip(&self, e: &SampleError);
}

/// Loads sample `original` (or, under `OnError::Skip`, a deterministic replacement) into
/// `slot`: decoded on the CPU, or as a bitstream for the engine when `engine` allows. `given`:
/// `original`'s bytes and drawn plan, already in hand (the engine's fallback), instead of
/// reading and drawing them.
pub(super) fn fill(
    shared: &Shared,
    scratch: &mut Scratch,
    (at, skips): (At, &dyn Skips),
    original: usize,
    slot: &mut [u8],
    engine: Option<&Hpu>,
    mut given: Option<(&[u8], SamplePlan)>,
) -> Result<Filled, Error> {
    let n = shared.samples() as u64;
    let mut replace = CounterRng::new(shared.seed, at.epoch, original as u64, Stream::Replace);
    let mut index = original;
    // The samples that failed in this slot: a replacement is never one of them (each would
    // fail again, and count again against the epoch's error budget).
    let mut failed = [usize::MAX; MAX_REPLACEMENTS + 1];
    let mut last = None;
    for attempt in 0..=MAX_REPLACEMENTS {
        match load_sample(shared, scratch, index, at, slot, engine, given.take()) {
            Ok(filled) => return Ok(filled),
            Err(SampleError {
                kind: SampleErrorKind::Device(e),
                ..
            }) => return Err(Error::Hpu(e)),
            Err(e) if shared.on_error == OnError::Fail || is_engine_refusal(shared, &e) => {
                return Err(Error::Sample(e))
            }
            Err(e) => {
                skips.skip(&e);
                failed[attempt] = index;
                index = replacement(&mut replace, n, &failed[..=attempt]);
                last = Some(e);
            }
        }
    }
    let path = shared.entry(original).path.clone();
    Err(Error::Sample(SampleError {
        index: original,
        path,
        kind: SampleErrorKind::ReplacementsExhausted {
            tried: MAX_REPLACEMENTS,
            last: Box::new(last.expect("every attempt failed")),
        },
    }))
}

/// A replacement drawn from `rng`, uniform over the `n` samples but those in `failed` (as
/// long as any other is left; a bounded number of draws, deterministic).
fn replacement(rng: &mut CounterRng, n: u64, failed: &[usize]) -> usize {
    let mut index = rng.below(n) as usize;
    for _ in 0..64 {
        if !failed.contains(&index) || failed.len() as u64 >= n {
            break;
        }
        index = rng.below(n) as usize;
    }
    index
}

/// With `Backend::Hw`, a file the engine cannot take, or a step of the sample's plan it does
/// not run, is an error whatever the skip policy: a replacement would be refused for the same
/// reason, and the error would end up naming only the replacements' count.
fn is_engine_refusal(shared: &Shared, e: &SampleError) -> bool {
    shared.backend == Backend::Hw
        && matches!(
            e.kind,
            SampleErrorKind::Decode(DecodeError::Unsupported { .. })
                | SampleErrorKind::Augment(AugmentError::NotOnEngine(_))
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
    at: At,
    slot: &mut [u8],
    engine: Option<&Hpu>,
    given: Option<(&[u8], SamplePlan)>,
) -> Result<Filled, SampleError> {
    if let Some(v) = &shared.video {
        return super::video::load(
            shared,
            v,
            &mut s.video,
            &mut s.file,
            index,
            at.epoch,
            slot,
            engine,
        );
    }
    // Its stage clocks: read for this sample, or (cheap samples) for one in several.
    let _timing = cpu_time::Sample::start();
    let entry = &shared.source.entries()[index];
    let err = |kind| SampleError {
        index,
        path: entry.path.clone(),
        kind,
    };
    let c = &shared.counters;
    let cpu = |s: &mut CpuScratch, bytes: &[u8], slot: &mut [u8], plan: Option<SamplePlan>| {
        cpu::decode_into(shared, s, index, at, bytes, plan, slot)
            .map(|detect| Filled::Cpu {
                index,
                label: entry.label,
                detect,
            })
            .map_err(err)
    };
    // Several views are made from one decode on the host.
    let engine = match engine {
        Some(_) if !shared.views.is_empty() => {
            super::route::count_fallback(
                shared,
                "several views of one image (one decode on the host)",
            );
            None
        }
        engine => engine,
    };
    let t0 = CpuClock::now();
    let in_slot = match (engine, &given) {
        (Some(_), None) => shared
            .source
            .read_into(index, shared.read_mode, slot)
            .map_err(|e| err(read_error(e)))?,
        _ => None,
    };
    if let (Some(hpu), Some(len)) = (engine, in_slot) {
        c.add(Stage::Read, t0.elapsed());
        c.bytes_read.fetch_add(len as u64, Ordering::Relaxed);
        let bitstream = Bitstream::InSlot(&slot[..len]);
        let plan =
            match route(shared, &mut s.engine_probe, hpu, index, at, bitstream).map_err(err)? {
                Route::Engine(hw) => return Ok(Filled::Hw(hw)),
                Route::Cpu(plan) => plan,
            };
        // The CPU path decodes into the slot: the bytes move out of it first.
        s.file.clear();
        s.file.extend_from_slice(&slot[..len]);
        return cpu(&mut s.cpu, &s.file, slot, plan);
    }
    let read;
    let (bytes, given_plan): (&[u8], _) = match given {
        Some((bytes, plan)) => (bytes, Some(plan)),
        None => {
            read = shared
                .source
                .read(index, shared.read_mode, &mut s.file)
                .map_err(|e| err(read_error(e)))?;
            c.add(Stage::Read, t0.elapsed());
            c.bytes_read.fetch_add(read.len() as u64, Ordering::Relaxed);
            (&read, None)
        }
    };
    let routed = match engine {
        Some(hpu) => {
            let bitstream = Bitstream::Buffered {
                bytes,
                slot: &mut *slot,
            };
            route(shared, &mut s.engine_probe, hpu, index, at, bitstream)
        }
        None => Ok(Route::Cpu(given_plan)),
    };
    match routed.map_err(err)? {
        Route::Engine(hw) => Ok(Filled::Hw(hw)),
        Route::Cpu(plan) => cpu(&mut s.cpu, bytes, slot, plan),
    }
}

/// A source's read error: malformed bytes (`InvalidData`: the container is damaged there) or
/// an I/O failure.
fn read_error(e: std::io::Error) -> SampleErrorKind {
    if e.kind() == std::io::ErrorKind::InvalidData {
        SampleErrorKind::Format(e)
    } else {
        SampleErrorKind::Read(e)
    }
}

/// Writes sample `index`'s label into its label slot: the class label, or for a detection
/// pipeline its target record (the boxes its plan kept, with their objects' labels).
pub(super) fn write_label(
    shared: &Shared,
    index: usize,
    label: i64,
    detect: Option<&DetectPlan>,
    out: &mut [u8],
) {
    let (Some(layout), Some(plan)) = (shared.targets, detect) else {
        out[..8].copy_from_slice(&label.to_ne_bytes());
        return;
    };
    let objects = shared.source.objects(index);
    let image_id = objects.map_or(-1, |o| o.image_id);
    let labels = plan
        .kept
        .iter()
        .map(|&k| objects.map_or(-1, |o| o.labels[k as usize]));
    let left = layout.write(out, image_id, plan.size, &plan.boxes, labels);
    shared
        .counters
        .boxes
        .fetch_add((plan.boxes.len() - left) as u64, Ordering::Relaxed);
    if left > 0 {
        shared
            .counters
            .boxes_over_max
            .fetch_add(left as u64, Ordering::Relaxed);
        tracing::warn!(
            "{}: {left} boxes past max_boxes = {} left out of its targets",
            shared.source.entries()[index].path.display(),
            layout.max_boxes
        );
    }
}
