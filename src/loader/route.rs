//! The router: which samples the media engine takes. One `match` on the backend; the engine's
//! own probe decides what it can decode, and the crop (drawn here, from the image's size)
//! decides the region and DCT scale it decodes at.

use std::sync::atomic::Ordering;

use hpuload_decoders::jpeg::{choose_scale, Filter};
use hpuload_decoders::{DecodeError, JpegDecoder};

use super::engine::{count_fallback, upload, HwSlot};
use super::{Backend, Shared};
use crate::cpu_time::CpuClock;
use crate::hpu::{Hpu, HpuError};
use crate::stage::Stage;
use crate::SampleErrorKind;

/// Where a sample goes. Lives for one call on the stack, so the engine's slot is not boxed.
#[allow(clippy::large_enum_variant)]
pub(super) enum Route {
    /// To the media engine: its bitstream is in the slot (or a device buffer of its own).
    Engine(HwSlot),
    /// To the CPU path.
    Cpu,
}

/// Where a sample's encoded bytes are when it is routed.
pub(super) enum Bitstream<'a> {
    /// Read straight into the start of the sample's slot, where the engine takes them from.
    InSlot(&'a [u8]),
    /// In a buffer: for the engine they are copied into `slot` (or uploaded, when larger).
    Buffered { bytes: &'a [u8], slot: &'a mut [u8] },
}

/// Routes sample `index`: for the engine, the crop is decided and the bitstream is in its slot
/// (or uploaded, when larger than a slot); the CPU path gets files the engine cannot take
/// (under `Backend::Auto`), and reports corrupt ones so that the reasons are the same on both
/// paths.
pub(super) fn route(
    shared: &Shared,
    probe: &mut JpegDecoder,
    hpu: &Hpu,
    index: usize,
    epoch: u64,
    bitstream: Bitstream<'_>,
) -> Result<Route, SampleErrorKind> {
    let only_engine = match shared.backend {
        Backend::Cpu => return Ok(Route::Cpu),
        Backend::Auto => false,
        Backend::Hw => true,
    };
    let c = &shared.counters;
    let t1 = CpuClock::now();
    let bytes = match &bitstream {
        Bitstream::InSlot(bytes) | Bitstream::Buffered { bytes, .. } => *bytes,
    };
    match probe.probe_parsed(bytes) {
        Ok((info, parsed)) => {
            let objects = shared.source.objects(index).map(|o| o.boxes);
            let plan = shared
                .plan
                .sample(
                    shared.seed,
                    epoch,
                    index,
                    (info.width, info.height),
                    objects,
                )
                .map_err(SampleErrorKind::Augment)?;
            // A detection sample goes to the engine when its window is a region of the image:
            // the engine has no fill canvas, and no device ops for photometric steps on the
            // whole image yet (the builder refuses `Backend::Hw` for detection).
            if let Some(d) = &plan.detect {
                let reason = if !plan.pre.is_empty() {
                    Some("detection: photometric steps on the whole image run on the CPU path")
                } else if !d.window_inside_image(info.width, info.height) {
                    Some("detection: windows that show the zoom-out's fill run on the CPU path")
                } else {
                    None
                };
                if let Some(reason) = reason {
                    c.add(Stage::Route, t1.elapsed());
                    count_fallback(shared, reason);
                    return Ok(Route::Cpu);
                }
            }
            super::cpu::fits(shared, &plan, (info.width, info.height))?;
            let (oh, ow) = plan.pixels.size;
            let filter = plan.interpolation.filter();
            let region = plan
                .crop
                .covering_region(info.width, info.height, ow, filter);
            // Nearest picks source pixels, which a DCT-scaled decode no longer has.
            let denom = if filter == Filter::Nearest {
                1
            } else {
                choose_scale(region, ow, oh)
            };
            let own = match bitstream {
                Bitstream::InSlot(_) => Ok(None),
                Bitstream::Buffered { bytes, slot } if bytes.len() <= slot.len() => {
                    slot[..bytes.len()].copy_from_slice(bytes);
                    Ok(None)
                }
                Bitstream::Buffered { bytes, .. } => upload(hpu, bytes).map(Some),
            };
            c.add(Stage::Route, t1.elapsed());
            match own {
                Ok(own) => {
                    c.samples.fetch_add(1, Ordering::Relaxed);
                    c.hw_samples.fetch_add(1, Ordering::Relaxed);
                    if denom > 1 {
                        c.hw_scaled.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Route::Engine(HwSlot {
                        slot: 0,
                        index,
                        len: bytes.len(),
                        own,
                        region,
                        denom,
                        plan,
                        parsed: Some(parsed),
                    }))
                }
                Err(HpuError::OutOfMemory { .. }) if !only_engine => {
                    count_fallback(shared, "no device memory for the bitstream");
                    Ok(Route::Cpu)
                }
                // A device fault, not a property of the file: `fill` fails the batch.
                Err(e) => Err(SampleErrorKind::Device(e)),
            }
        }
        Err(e @ DecodeError::Unsupported { .. }) if only_engine => Err(SampleErrorKind::Decode(e)),
        Err(DecodeError::Unsupported { reason, .. }) => {
            c.add(Stage::Route, t1.elapsed());
            count_fallback(shared, reason);
            Ok(Route::Cpu)
        }
        // Not an image, corrupt or truncated: the CPU decoder reports it, so the reasons are
        // the same on both paths.
        Err(_) => {
            c.add(Stage::Route, t1.elapsed());
            Ok(Route::Cpu)
        }
    }
}
