//! The media engine's side of a batch: a sample routed to it ([`HwSlot`]), the job that decodes
//! it on an engine ([`EngineJob`], whose drop counts the batch down however the job ends), and
//! the fallback to the CPU path when the engine fails on a file it had accepted.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use hpuload_decoders::jpeg::{Region, Window};
use hpuload_decoders::{DecodeError, ImageInfo};

use super::cpu::Scratch;
use super::work::{fill, lock, BatchWork, Filled};
use super::Shared;
use crate::augment::{CropBox, SampleParams};
use crate::cpu_time::CpuClock;
use crate::hpu::{DeviceBuffer, EngineContext, Hpu, HpuError};
use crate::stage::Stage;
use crate::{Error, SampleError, SampleErrorKind};

/// A sample routed to the media engine. Its bitstream rides in its own slot of the batch buffer
/// when it fits there (one DMA for the whole batch); a larger one was copied to a device buffer
/// of its own (`own`).
pub(super) struct HwSlot {
    pub slot: usize,
    pub index: usize,
    pub len: usize,
    pub own: Option<DeviceBuffer>,
    pub region: Region,
    pub denom: u32,
    pub params: SampleParams,
}

/// One media-engine job's share of its batch. Dropping it counts the batch down (the last one
/// completes the batch), however the job ended: a job that did not run to its end (it panicked
/// on the engine, or was dropped unrun) first fails the batch, naming the sample's file, so no
/// fault on an engine can leave an epoch waiting.
pub(super) struct EngineJob {
    pub work: Arc<BatchWork>,
    pub shared: Arc<Shared>,
    pub index: usize,
    pub ran: bool,
}

impl EngineJob {
    /// The job ran to its end (its slot holds a sample, or the batch holds its error).
    pub fn finished(&mut self) {
        self.ran = true;
    }
}

impl Drop for EngineJob {
    fn drop(&mut self) {
        if !self.ran {
            let path = self.shared.source.entries()[self.index].path.clone();
            self.work.fail(Error::Sample(SampleError {
                index: self.index,
                path,
                kind: SampleErrorKind::Panic(
                    "the media engine's job for this sample did not finish".into(),
                ),
            }));
        }
        if self.work.hw_remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.work.complete(&self.shared);
        }
    }
}

/// On an engine: decode the slot's bitstream (region at scale) straight to the output size, and
/// run the device op (flip, normalize, cast, layout) into the slot of the device tensor.
pub(super) fn engine_decode(
    shared: &Shared,
    work: &BatchWork,
    h: &HwSlot,
    ctx: &mut EngineContext,
) -> Result<(), DecodeError> {
    {
        ctx.bitstream.clear();
        match &h.own {
            Some(own) => ctx.bitstream.extend_from_slice(&own.lock()[..h.len]),
            None => {
                let at = shared.layout.sample(h.slot).start;
                ctx.bitstream
                    .extend_from_slice(&work.images.buffer().lock()[at..at + h.len])
            }
        }
    }
    let t0 = CpuClock::now();
    let (oh, ow) = shared.plan.out_hw();
    let len = oh as usize * ow as usize * 3;
    if ctx.pixels.len() != len {
        ctx.pixels.resize(len, 0);
    }
    let c = h.params.crop;
    let window = Window {
        left: c.left,
        top: c.top,
        width: c.width,
        height: c.height,
    };
    let decoded = ctx.decoder.decode_resized(
        &ctx.bitstream,
        h.region,
        h.denom,
        window,
        ow,
        oh,
        &mut ctx.pixels,
    );
    let t1 = CpuClock::now();
    shared.counters.add(Stage::DecodeEngine, t1 - t0);
    decoded?;
    // The device op writes straight into the sample's slot of the batch tensor. Engines take
    // turns on the buffer's lock for the write alone (a few tens of microseconds), which costs
    // less than staging the slot elsewhere and copying it in.
    work.with_output_slot(h.slot, |slot| {
        shared
            .writer
            .write(&ctx.pixels, oh as usize, ow as usize, h.params.flip, slot);
    });
    shared.counters.add(Stage::AugmentEngine, t1.elapsed());
    Ok(())
}

/// The engine failed on a file it had accepted: redo the slot on the CPU path (with the usual
/// skip/replace policy) and write it where the engine's output goes.
pub(super) fn engine_fallback(shared: &Shared, work: &BatchWork, h: &HwSlot, e: DecodeError) {
    let path = shared.source.entries()[h.index].path.clone();
    tracing::warn!(
        "media engine failed on {} ({e}); decoding on the CPU",
        path.display()
    );
    count_fallback(shared, "engine decode error");
    let mut scratch = Scratch::new(shared);
    let mut out = vec![0u8; shared.layout.sample_bytes];
    match fill(shared, &mut scratch, work, h.index, &mut out, None) {
        Ok(Filled::Cpu { index, label }) => {
            work.with_output_slot(h.slot, |slot| slot.copy_from_slice(&out));
            work.set_label(h.slot, label);
            work.indices[h.slot].store(index, Ordering::Relaxed);
        }
        Ok(Filled::Hw(_)) => unreachable!("fill without the engine returns CPU samples"),
        Err(e) => work.fail(e),
    }
}

pub(super) fn count_fallback(shared: &Shared, reason: &'static str) {
    *lock(&shared.counters.fallbacks).entry(reason).or_default() += 1;
}

/// Copies a bitstream too large for its batch slot to a device buffer of its own (through a
/// host buffer of its own: the rare path, for files larger than a decoded sample).
pub(super) fn upload(hpu: &Hpu, bytes: &[u8]) -> Result<DeviceBuffer, HpuError> {
    let device = hpu.alloc(bytes.len())?;
    let mut host = crate::pinned::PinnedBuffer::new(bytes.len())
        .map_err(|e| HpuError::Dma(format!("host buffer for a bitstream: {e}")))?;
    host.as_mut_slice().copy_from_slice(bytes);
    hpu.copy_to_device(host, &device).wait()?;
    Ok(device)
}

/// The integer region of the image the engine must decode for `crop`: the crop itself for an
/// integer window; for a fractional window (resize-then-crop), the window plus the resampling
/// filter's reach on each side, so edge pixels see the same neighbours as a full decode.
pub(super) fn covering_region(crop: &CropBox, info: &ImageInfo, out_w: u32) -> Region {
    let margin = if crop.view {
        0.0
    } else {
        (crop.width / f64::from(out_w)).max(1.0).ceil() + 1.0
    };
    let x0 = (crop.left - margin).floor().max(0.0) as u32;
    let y0 = (crop.top - margin).floor().max(0.0) as u32;
    let x1 = ((crop.left + crop.width + margin).ceil() as u32)
        .min(info.width)
        .max(x0 + 1);
    let y1 = ((crop.top + crop.height + margin).ceil() as u32)
        .min(info.height)
        .max(y0 + 1);
    Region {
        x: x0,
        y: y0,
        width: x1 - x0,
        height: y1 - y0,
    }
}
