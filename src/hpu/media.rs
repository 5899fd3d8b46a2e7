//! The media engine: `N` fixed-function decoder engines fed from one job queue, emulated by at
//! most as many host threads as the host has cores (see [`host_threads`]). Each thread owns its
//! decoder state (the engine's JPEG decoder and SRAM-like scratch). A job
//! ([`MediaJob`]) names a compressed bitstream in device memory, the region and DCT scale to
//! decode, the crop window and output size, the flip, the device op to run on the result and
//! where the result goes; the engine reads the bitstream, decodes, runs the op into the
//! destination and reports the outcome. On failure it hands the bitstream back, so that whoever
//! submitted the job can decode those bytes another way without reading them again.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Sender;
use hpuload_decoders::jpeg::{scaled_region, DecodePlan, Planes};
use hpuload_decoders::orientation::Orientation;
use hpuload_decoders::{DecodeError, ImageFormat, ImageInfo, JpegDecoder, Limits};

use super::{DeviceBuffer, HpuError};
use crate::augment::{CanvasJob, PixelPlan, PixelStage, Resampler, Scratch};
use crate::cpu_time::CpuClock;
use crate::video::{Bitstream, ClipsError, ClipsJob, ClipsScratch, DecodeCounts, FramesJob};

/// Bytes in device memory: `len` bytes of `buffer` from `offset`.
#[derive(Clone, Debug)]
pub struct DeviceSlice {
    /// The device buffer.
    pub buffer: DeviceBuffer,
    /// Where the bytes start in it.
    pub offset: usize,
    /// How many.
    pub len: usize,
}

/// Page-locked host memory lent to one engine job, which the device writes over the bus (a
/// host batch's slot).
pub trait HostSlot: Send {
    /// Calls `f` with the slot's bytes.
    fn write(&mut self, f: &mut dyn FnMut(&mut [u8]));
}

/// Where a job's output goes.
pub enum Destination {
    /// Device memory (a sample's slot in a device tensor).
    Device(DeviceSlice),
    /// Page-locked host memory.
    Host(Box<dyn HostSlot>),
}

/// The device ops run on an engine's decoded output (RGB8 at the output size): the sample's
/// pixel ops in place, then flip, normalize, cast, layout and erasing into the destination.
pub trait DeviceOp: Send + Sync {
    /// Runs `plan`'s pixel ops on `rgb`, in place (in the engine's own memory).
    fn transform(&self, rgb: &mut [u8], plan: &PixelPlan, scratch: &mut Scratch);
    /// Writes `rgb` into `out` as `plan` says (flip, erase boxes).
    fn write(&self, rgb: &[u8], plan: &PixelPlan, out: &mut [u8]);
    /// [`DeviceOp::transform`] then [`DeviceOp::write`] of the decode's output given as its
    /// resampled planes, before their conversion to RGB, when the op can do it in one pass
    /// with the same result; `false`, writing nothing, when it cannot (the engine then
    /// converts them and runs the two).
    fn write_resampled(&self, planes: Planes<'_>, plan: &PixelPlan, out: &mut [u8]) -> bool;
}

impl DeviceOp for PixelStage {
    fn transform(&self, rgb: &mut [u8], plan: &PixelPlan, scratch: &mut Scratch) {
        self.ops(rgb, plan, scratch);
    }

    fn write(&self, rgb: &[u8], plan: &PixelPlan, out: &mut [u8]) {
        PixelStage::write(self, rgb, plan, out);
    }

    fn write_resampled(&self, planes: Planes<'_>, plan: &PixelPlan, out: &mut [u8]) -> bool {
        PixelStage::write_resampled(self, planes, plan, out)
    }
}

/// One decode on the media engine.
pub struct MediaJob {
    /// The compressed bitstream.
    pub source: DeviceSlice,
    /// What to decode it into.
    pub work: MediaWork,
    /// Where the output goes.
    pub destination: Destination,
    /// Called with the outcome on the engine, once the output is in place. A job dropped
    /// without running (a panic on the engine, the engine stopped) drops this unrun.
    pub done: Box<dyn FnOnce(Result<EngineTimes, JobFailure>) + Send>,
}

/// What a job decodes: one JPEG image, or a video sample's clips.
#[allow(clippy::large_enum_variant)] // one per job, moved once into the engine
pub enum MediaWork {
    /// A JPEG image's region, resampled to the output size, then the pixel ops.
    Jpeg {
        /// The decode: region, DCT scale, crop window, output size, filter, the headers if
        /// already parsed, the decoder's limits (the decoders crate's plan, opaque here).
        decode: DecodePlan,
        /// Steps between the decode and the resize (a detection sample's photometric steps on
        /// the image, the zoom-out's fill): the decode then gives the plan's region at its
        /// scale, and these steps make the output-size image from it.
        canvas: Option<CanvasJob>,
        /// How the decoded image (the request's output size) is turned upright, before the
        /// pixel plan: an image shown turned by its EXIF orientation, whose window of the
        /// image as stored was decoded.
        turn: Orientation,
        /// The sample's pixel plan, run by `op` after the decode.
        augment: PixelPlan,
        /// The device ops run on the decoded pixels into the destination.
        op: Arc<dyn DeviceOp>,
    },
    /// A video sample's clips (Gaudi's `VideoDecoder`): the bitstream is the runs' spans
    /// ([`crate::video::DecodePlan::spans`]); the engine decodes them with its H.264 decoder,
    /// then resizes, crops and runs each clip's plan on every frame of the clip, through
    /// `stage`, straight into the destination (`write_out`).
    Video {
        /// The drawn clips.
        job: Arc<ClipsJob>,
        /// The output stage (pixel ops, flip, normalize, cast, layout).
        stage: Arc<PixelStage>,
    },
    /// A folder of frames' clips: the bitstream is the kept frames' JPEG files one after the
    /// other; the engine's JPEG decoder decodes each frame's clip window at its DCT scale,
    /// resampled to the output size, and `stage` runs the clip's plan, written as a video
    /// sample's are (`write_out`).
    Frames {
        /// The drawn clips.
        job: Arc<FramesJob>,
        /// The output stage.
        stage: Arc<PixelStage>,
    },
}

/// Runs `write` on a sample's `len` output bytes, straight in the destination: a host slot
/// (the job's alone while it runs), or the job's slot of device memory under a lease on those
/// bytes alone (the other engines write their own slots of the batch meanwhile). A `write`
/// that fails leaves the slot part written: the host path that reruns a failed job writes all
/// of it.
fn write_out<T, E>(
    len: usize,
    destination: &mut Destination,
    write: impl FnOnce(&mut [u8]) -> Result<T, E>,
) -> Result<T, E> {
    lend(destination, Some(len), write)
}

/// Runs `f` on the destination's first `len` bytes (all of it for `None`): a host slot's, or
/// a device slot's under a lease on those bytes alone.
fn lend<R>(destination: &mut Destination, len: Option<usize>, f: impl FnOnce(&mut [u8]) -> R) -> R {
    match destination {
        Destination::Host(slot) => {
            let (mut f, mut result) = (Some(f), None);
            slot.write(&mut |out| {
                if let Some(f) = f.take() {
                    let len = len.unwrap_or(out.len());
                    result = Some(f(&mut out[..len]));
                }
            });
            result.expect("a host slot calls back with its bytes")
        }
        Destination::Device(d) => {
            let len = len.unwrap_or(d.len);
            f(&mut d.buffer.lease(d.offset, len))
        }
    }
}

/// Whether a JPEG job's output may go from the decoder's resampled planes straight into its
/// destination ([`DeviceOp::write_resampled`]): nothing between the decode and the device op
/// (the image needs no turn upright), and the plan's size is the decode's output size.
fn fuses(decode: &DecodePlan, turn: Orientation, augment: &PixelPlan) -> bool {
    let request = &decode.request;
    turn == Orientation::Upright && augment.size == (request.out_h, request.out_w)
}

/// Whether `source` lies inside the device slot `destination` (the loader's JPEG jobs: the
/// bitstream is uploaded into the sample's own slot), so that one lease covers both.
fn within(source: &DeviceSlice, destination: &Destination) -> bool {
    match destination {
        Destination::Device(d) => {
            d.buffer.same(&source.buffer)
                && source.offset >= d.offset
                && source.offset + source.len <= d.offset + d.len
        }
        Destination::Host(_) => false,
    }
}

/// Engine time a job took, by stage.
#[derive(Clone, Copy, Debug)]
pub struct EngineTimes {
    /// Reading the bitstream and decoding the region, resampled to the output size (a video's
    /// frames, to RGB).
    pub decode: Duration,
    /// The device op (a video's resizes and crops, and the output stage).
    pub op: Duration,
    /// A video job's frames: decoded, discarded, skipped.
    pub frames: Option<DecodeCounts>,
}

/// Why the engine failed on a job.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A JPEG's decode.
    #[error(transparent)]
    Jpeg(#[from] DecodeError),
    /// A video's decode or a frame's resize.
    #[error(transparent)]
    Video(#[from] ClipsError),
}

/// A job the engine could not decode, with what it was given back (for a decode elsewhere).
#[derive(Debug)]
pub struct JobFailure {
    /// Why.
    pub error: EngineError,
    /// The compressed bytes the job named.
    pub bitstream: Vec<u8>,
    /// A JPEG job's pixel plan, unrun (empty for a video).
    pub augment: PixelPlan,
}

/// An engine's own state.
struct Engine {
    decoder: JpegDecoder,
    /// Input FIFO: the bitstream, copied out of device memory.
    bitstream: Vec<u8>,
    /// The engine's output: the decoded, cropped, resized image.
    pixels: Vec<u8>,
    /// The device ops' working memory.
    scratch: Scratch,
    /// A canvas job's decoded region, its canvas and its resize.
    region: Vec<u8>,
    canvas: Vec<u8>,
    resampler: Resampler,
    /// The video decoder and its frames.
    clips: ClipsScratch,
}

impl Engine {
    fn run(&mut self, job: MediaJob) {
        let MediaJob {
            source,
            work,
            mut destination,
            done,
        } = job;
        let outcome = self.execute(&source, work, &mut destination);
        // The job's handles on device memory go before the batch learns it is done: the
        // consumer may drop the last batch and the loader as soon as `done` runs, and must
        // then find none of their memory still allocated.
        drop((source, destination));
        done(outcome)
    }

    #[allow(clippy::result_large_err)] // one per job, moved once into its `done`
    fn execute(
        &mut self,
        source: &DeviceSlice,
        work: MediaWork,
        destination: &mut Destination,
    ) -> Result<EngineTimes, JobFailure> {
        let t0 = CpuClock::now();
        let (decode, canvas, turn, augment, op) = match work {
            MediaWork::Jpeg {
                decode,
                canvas: None,
                turn,
                augment,
                op,
            } if within(source, destination) => {
                let Destination::Device(slot) = &*destination else {
                    unreachable!("`within` holds for a device slot only")
                };
                let job = (&decode, turn, augment, &*op);
                return self.run_in_slot(source, slot, job, t0);
            }
            MediaWork::Jpeg {
                decode,
                canvas,
                turn,
                augment,
                op,
            } => (decode, canvas, turn, augment, op),
            MediaWork::Video { job, stage } => {
                self.copy_out(source);
                return self.run_video(&job, &stage, destination, t0);
            }
            MediaWork::Frames { job, stage } => {
                self.copy_out(source);
                return self.run_frames(&job, &stage, destination, t0);
            }
        };
        self.copy_out(source);
        self.size_pixels(&decode);
        let decoded = match &canvas {
            None => {
                let fused = fuses(&decode, turn, &augment);
                match self.decoder.decode_planned_planes(&self.bitstream, &decode) {
                    Ok(planes) => {
                        let t1 = CpuClock::now();
                        if fused
                            && lend(destination, None, |out| {
                                op.write_resampled(planes, &augment, out)
                            })
                        {
                            return Ok(EngineTimes {
                                decode: t1 - t0,
                                op: t1.elapsed(),
                                frames: None,
                            });
                        }
                        planes.to_rgb(&mut self.pixels);
                        Ok(())
                    }
                    Err(error) => Err(error),
                }
            }
            Some(canvas) => self.decode_canvas(&decode, canvas),
        };
        let t1 = CpuClock::now();
        if let Err(error) = decoded {
            return Err(JobFailure {
                error: error.into(),
                bitstream: std::mem::take(&mut self.bitstream),
                augment,
            });
        }
        self.transform(&decode, turn, &augment, &*op);
        let pixels = &self.pixels;
        lend(destination, None, |out| op.write(pixels, &augment, out));
        Ok(EngineTimes {
            decode: t1 - t0,
            op: t1.elapsed(),
            frames: None,
        })
    }

    /// Copies the job's bitstream out of device memory into the engine's own: the output
    /// overwrites the slot that holds it, or the decode reads it as the output is written.
    fn copy_out(&mut self, source: &DeviceSlice) {
        self.bitstream.clear();
        self.bitstream
            .extend_from_slice(&source.buffer.lease(source.offset, source.len));
    }

    /// The decoded sample's steps in the engine's own memory (at the output size, in RGB8),
    /// before the write into its slot: its turn upright (`decode`'s output is the image as
    /// stored), its placement on a canvas, then `op`'s pixel ops.
    fn transform(
        &mut self,
        decode: &DecodePlan,
        turn: Orientation,
        augment: &PixelPlan,
        op: &dyn DeviceOp,
    ) {
        if turn != Orientation::Upright {
            let (w, h) = (decode.request.out_w as usize, decode.request.out_h as usize);
            self.canvas.resize(self.pixels.len(), 0);
            turn.turn(&self.pixels, w, h, 3, &mut self.canvas);
            std::mem::swap(&mut self.pixels, &mut self.canvas);
        }
        if let Some(placed) = &augment.placed {
            placed.place(&self.pixels, augment.size, &mut self.canvas);
            std::mem::swap(&mut self.pixels, &mut self.canvas);
        }
        op.transform(&mut self.pixels, augment, &mut self.scratch);
    }

    /// Makes the engine's output pixels the plan's output size (RGB8).
    fn size_pixels(&mut self, decode: &DecodePlan) {
        let len = decode.request.out_h as usize * decode.request.out_w as usize * 3;
        if self.pixels.len() != len {
            self.pixels.resize(len, 0);
        }
    }

    /// A JPEG job whose bitstream lies in its own destination slot (as the loader places
    /// them): the slot is leased once, the decode reads the bitstream where it lies, and the
    /// output then overwrites it. The bitstream is copied only for a failure, to hand it back.
    #[allow(clippy::result_large_err)] // the failure hands the bitstream back
    fn run_in_slot(
        &mut self,
        source: &DeviceSlice,
        slot: &DeviceSlice,
        (decode, turn, augment, op): (&DecodePlan, Orientation, PixelPlan, &dyn DeviceOp),
        t0: CpuClock,
    ) -> Result<EngineTimes, JobFailure> {
        self.size_pixels(decode);
        let mut out = slot.buffer.lease(slot.offset, slot.len);
        let bytes = source.offset - slot.offset..source.offset - slot.offset + source.len;
        let t1 = match self
            .decoder
            .decode_planned_planes(&out[bytes.clone()], decode)
        {
            Ok(planes) => {
                // The bitstream has been read: the output may overwrite it now.
                let t1 = CpuClock::now();
                if fuses(decode, turn, &augment) && op.write_resampled(planes, &augment, &mut out) {
                    return Ok(EngineTimes {
                        decode: t1 - t0,
                        op: t1.elapsed(),
                        frames: None,
                    });
                }
                planes.to_rgb(&mut self.pixels);
                CpuClock::now()
            }
            Err(error) => {
                return Err(JobFailure {
                    error: error.into(),
                    bitstream: out[bytes].to_vec(),
                    augment,
                })
            }
        };
        self.transform(decode, turn, &augment, op);
        op.write(&self.pixels, &augment, &mut out);
        Ok(EngineTimes {
            decode: t1 - t0,
            op: t1.elapsed(),
            frames: None,
        })
    }

    /// A video job: the runs' frames decoded from the bitstream, each clip's frames resized,
    /// cropped and written through `stage` straight into the destination ([`write_out`]).
    #[allow(clippy::result_large_err)] // the failure hands the bitstream back, as a JPEG's does
    fn run_video(
        &mut self,
        job: &ClipsJob,
        stage: &PixelStage,
        destination: &mut Destination,
        t0: CpuClock,
    ) -> Result<EngineTimes, JobFailure> {
        let fail = |error: ClipsError, bitstream: &mut Vec<u8>| JobFailure {
            error: error.into(),
            bitstream: std::mem::take(bitstream),
            augment: PixelPlan::default(),
        };
        let len = job.frames * job.drawn.first().map_or(0, |d| stage.bytes(&d.pixels));
        let (bitstream, clips) = (&self.bitstream, &mut self.clips);
        let rendered = write_out(len, destination, |out| {
            job.render(Bitstream::Spans(bitstream), stage, clips, out)
        })
        .map_err(|e| fail(e, &mut self.bitstream))?;
        let t1 = CpuClock::now();
        Ok(EngineTimes {
            decode: (t1 - t0).saturating_sub(rendered.write),
            op: rendered.write + t1.elapsed(),
            frames: Some(rendered.counts),
        })
    }

    /// A folder of frames' job: each kept frame decoded by the engine's JPEG decoder and
    /// written through its clip's plan ([`write_out`]).
    #[allow(clippy::result_large_err)] // the failure hands the bitstream back, as a JPEG's does
    fn run_frames(
        &mut self,
        job: &FramesJob,
        stage: &PixelStage,
        destination: &mut Destination,
        t0: CpuClock,
    ) -> Result<EngineTimes, JobFailure> {
        let len = job.frames * job.drawn.first().map_or(0, |d| stage.bytes(&d.pixels));
        let (bitstream, decoder, frames) = (&self.bitstream, &mut self.decoder, &mut self.clips);
        let written = write_out(len, destination, |out| {
            job.write_engine(bitstream, stage, decoder, frames.frames(), out)
        });
        if let Err(e) = written {
            return Err(JobFailure {
                error: e.into(),
                bitstream: std::mem::take(&mut self.bitstream),
                augment: PixelPlan::default(),
            });
        }
        let t1 = CpuClock::now();
        Ok(EngineTimes {
            decode: t1 - t0,
            op: t1.elapsed(),
            frames: None,
        })
    }

    /// A canvas job's decode: the plan's region at its scale, then the canvas job's steps
    /// into the output.
    fn decode_canvas(
        &mut self,
        decode: &DecodePlan,
        canvas: &CanvasJob,
    ) -> Result<(), DecodeError> {
        let request = &decode.request;
        self.decoder.set_limits(decode.limits);
        let (width, height) = canvas.image;
        let info = ImageInfo {
            format: ImageFormat::Jpeg,
            width,
            height,
        };
        let rect = scaled_region(&info, request.region, request.scale);
        self.region
            .resize(rect.width as usize * rect.height as usize * 3, 0);
        self.decoder.decode_region(
            &self.bitstream,
            request.region,
            request.scale,
            &mut self.region,
        )?;
        self.resampler.set_size(request.out_h, request.out_w);
        let out = canvas
            .run(
                &mut self.region,
                [rect.x, rect.y, rect.width, rect.height],
                request.scale,
                &mut self.canvas,
                &mut self.resampler,
                &mut self.scratch,
            )
            .map_err(|_| DecodeError::Parameter("the canvas window could not be resampled"))?;
        self.pixels.copy_from_slice(out);
        Ok(())
    }
}

pub(crate) struct MediaEngine {
    tx: Option<Sender<MediaJob>>,
    threads: Vec<JoinHandle<()>>,
    engines: usize,
}

/// Host threads that emulate `engines` decoder engines: one per engine, but no more than the
/// host's cores. The engines' work runs on the host's cores whatever the thread count; threads
/// beyond the cores only take turns on them, and each turn evicts the previous thread's decoder
/// state (Huffman tables, planes, the H.264 decoder's frames) from the core's caches. On 2
/// cores, 2 threads instead of 8 measured 6-7% more images/s on the engine path and 10% more
/// clips/s on the video path (BENCHMARKS.md, session 34). Jobs never wait on each other, so
/// fewer threads than engines changes only how many run at once, not what they produce.
pub(crate) fn host_threads(engines: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    engines.clamp(1, cores.max(1))
}

impl MediaEngine {
    /// Starts `engines` decoder engines (at least one) on [`host_threads`] threads.
    pub fn start(engines: usize, limits: Limits, panic_at: Option<u64>) -> Result<Self, HpuError> {
        let engines = engines.max(1);
        let (tx, rx) = crossbeam_channel::unbounded::<MediaJob>();
        let jobs = Arc::new(AtomicU64::new(0));
        let threads = (0..host_threads(engines))
            .map(|engine| {
                let (rx, jobs) = (rx.clone(), Arc::clone(&jobs));
                std::thread::Builder::new()
                    .name(format!("hpu-media-{engine}"))
                    .spawn(move || {
                        let fresh = || Engine {
                            decoder: JpegDecoder::with_limits(limits),
                            bitstream: Vec::new(),
                            pixels: Vec::new(),
                            scratch: Scratch::default(),
                            region: Vec::new(),
                            canvas: Vec::new(),
                            resampler: Resampler::new(1, 1),
                            clips: ClipsScratch::default(),
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
                                ctx.run(job);
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
            engines,
        })
    }

    /// Queues a job; it runs on the next free engine.
    ///
    /// # Errors
    /// The engine has shut down (the job is dropped without running).
    pub fn submit(&self, job: MediaJob) -> Result<(), HpuError> {
        let tx = self.tx.as_ref().ok_or(HpuError::EngineStopped)?;
        tx.send(job).map_err(|_| HpuError::EngineStopped)
    }

    /// The decoder engines emulated (not the host threads running them).
    pub fn engines(&self) -> usize {
        self.engines
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

#[cfg(test)]
mod tests {
    use super::host_threads;

    #[test]
    fn engines_run_on_at_least_one_thread_and_never_more_than_the_host_has_cores() {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        assert_eq!(host_threads(0), 1);
        assert_eq!(host_threads(1), 1);
        assert_eq!(host_threads(cores), cores);
        assert_eq!(host_threads(cores + 7), cores);
        assert_eq!(host_threads(8), 8.min(cores));
    }
}
