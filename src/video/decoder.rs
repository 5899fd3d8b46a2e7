//! Video decoding on the host. H.264: through FFmpeg's libavcodec where the machine has one
//! (loaded at run time, [`super::libav`]), else through Cisco's OpenH264 (built from its
//! bundled source by the `openh264` crate: no system library). Both decode Constrained
//! Baseline, Main and High profile streams, CABAC and B-frames included, as x264 writes them,
//! and H.264 decoding is exact: they give the same planes bit for bit. MPEG-4 Part 2 (AVI
//! files: UCF101, HMDB51): through libavcodec only, each frame given as the file holds it.
//!
//! The container gives each frame as length-prefixed NAL units and the parameter sets in the
//! `avcC` record; both decoders are given an Annex B byte stream, so both are rewritten with
//! start codes. Each frame goes in tagged with its decode-order index as its timestamp, and every
//! picture that comes out (in presentation order, after B-frame reordering) carries the tag of
//! the frame it is, so the caller keeps the frames it wants without counting.

use std::cell::Cell;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::ptr::null_mut;
use std::time::Duration;

use openh264::decoder::{Decoder, DecoderConfig};
use openh264::OpenH264API;
use openh264_sys2::{SBufferInfo, DECODER_OPTION_NUM_OF_FRAMES_REMAINING_IN_BUFFER};

use super::libav::{self, Libav, LibavDecoder};
use super::mpeg4::{self, VopType};
use super::plan::DecodePlan;
use super::{Codec, VideoError, VideoFailure, VideoIndex};
use crate::cpu_time::CpuClock;
use crate::Error;

/// The `avcC` decoder configuration record: how long each NAL unit's length prefix is, and
/// the parameter sets as an Annex B stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AvcConfig {
    /// Bytes in each NAL unit's length prefix (1, 2 or 4).
    pub nal_length: usize,
    /// `profile_idc` (66 Baseline, 77 Main, 100 High, ...).
    pub profile: u8,
    /// The SPS and PPS NAL units, each after a start code.
    pub parameter_sets: Vec<u8>,
    /// The first SPS NAL unit alone.
    pub sps: Vec<u8>,
}

const START: [u8; 4] = [0, 0, 0, 1];

impl AvcConfig {
    /// Parses an `avcC` record (ISO/IEC 14496-15, 5.3.3.1).
    ///
    /// # Errors
    /// [`VideoError::Config`] for a record that is cut off or malformed.
    pub fn parse(record: &[u8]) -> Result<Self, VideoError> {
        let bad = |what| VideoError::Config(what);
        if record.len() < 7 || record[0] != 1 {
            return Err(bad("not a version 1 record"));
        }
        let profile = record[1];
        let nal_length = usize::from(record[4] & 3) + 1;
        if nal_length == 3 {
            return Err(bad("3-byte NAL length prefixes do not exist"));
        }
        let (mut parameter_sets, mut sps) = (Vec::new(), Vec::new());
        let mut at = 5;
        // The SPS count is the low five bits; the PPS count a whole byte.
        for mask in [0x1f, 0xff] {
            let count = *record
                .get(at)
                .ok_or(bad("the parameter sets are cut off"))?
                & mask;
            at += 1;
            for _ in 0..count {
                let len = record
                    .get(at..at + 2)
                    .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
                    .ok_or(bad("the parameter sets are cut off"))?;
                let nal = record
                    .get(at + 2..at + 2 + len)
                    .ok_or(bad("a parameter set runs past the record"))?;
                if mask == 0x1f && sps.is_empty() {
                    sps = nal.to_vec();
                }
                parameter_sets.extend_from_slice(&START);
                parameter_sets.extend_from_slice(nal);
                at += 2 + len;
            }
        }
        if parameter_sets.is_empty() {
            return Err(bad("no SPS or PPS"));
        }
        Ok(Self {
            nal_length,
            profile,
            parameter_sets,
            sps,
        })
    }
}

/// A decoded picture: 4:2:0 planes, borrowed from the decoder until its next call.
#[derive(Clone, Copy, Debug)]
pub struct Picture<'a> {
    /// The frame it is, in decode order (an index into the index's frames).
    pub frame: usize,
    /// Width in pixels (after the stream's cropping).
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// The luma plane, `y_stride` bytes a row.
    pub y: &'a [u8],
    /// The blue-difference plane, half size each way (rounded up), `uv_stride` bytes a row.
    pub u: &'a [u8],
    /// The red-difference plane.
    pub v: &'a [u8],
    /// Bytes from one luma row to the next.
    pub y_stride: usize,
    /// Bytes from one chroma row to the next.
    pub uv_stride: usize,
}

/// What decoding a plan cost, for the bench's stage breakdown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeCounts {
    /// Frames decoded.
    pub decoded: usize,
    /// Decoded frames nobody asked for (keyframe-to-frame lead-ins).
    pub discarded: usize,
    /// Frames of the runs not decoded at all: not kept, and no other frame refers to them
    /// (`nal_ref_idc` 0: most B-frames).
    pub skipped: usize,
    /// Compressed bytes read.
    pub bytes: u64,
    /// The decoding thread's CPU time spent on the discarded frames: each one's decode call,
    /// less any kept frame's hand-over that came out of it (the bench shows it as part of its
    /// decode stage).
    pub discarded_time: Duration,
}

/// A decoder for one video at a time. Not shared between threads: each worker holds its own.
pub struct VideoDecoder {
    decoder: Engine,
    /// H.264's configuration; `None` for MPEG-4 Part 2, whose frames go in as they are.
    avc: Option<AvcConfig>,
    /// What goes before a run's keyframe: H.264's parameter sets (for FFmpeg's decoder), or
    /// MPEG-4's headers when the file keeps them out of the stream.
    headers: Vec<u8>,
    /// The compressed bytes of the run being decoded.
    data: Vec<u8>,
    /// One frame rewritten to Annex B.
    annexb: Vec<u8>,
    /// Whether a stream was ended (drained): the next run needs a fresh decoder.
    ended: bool,
}

impl std::fmt::Debug for VideoDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VideoDecoder")
            .field("decoder", &self.name())
            .field("avc", &self.avc)
            .finish_non_exhaustive()
    }
}

/// The decoder underneath: FFmpeg's when a libavcodec was found, else OpenH264.
enum Engine {
    OpenH264(Decoder),
    Libav(LibavDecoder),
}

/// Which H.264 decoder the video path uses in this process, in words: "libavcodec 59.37.100
/// (libavcodec.so.59)", or "OpenH264 (built in): " and why no libavcodec is used.
pub fn h264_decoder() -> String {
    match libav::found() {
        Ok(lib) => lib.describe(),
        Err(why) => format!("{OPENH264}: {why}"),
    }
}

/// The keyframe before the one decoding starts at (`first`), not before the first frame of
/// its edit (`Frame::edit_start`); `None` when there is none.
fn earlier_start(index: &VideoIndex, first: usize) -> Option<usize> {
    if index.frames.get(first)?.edit_start {
        return None;
    }
    let earlier = index.keyframe_before(first.checked_sub(1)?)?;
    let crossed = (earlier + 1..=first).any(|k| index.frames[k].edit_start);
    (!crossed).then_some(earlier)
}

const OPENH264: &str = "OpenH264 (built in)";

/// Why a video in `codec` cannot be decoded in a process without a libavcodec.
pub(crate) fn needs_libavcodec(codec: Codec) -> String {
    needs_libavcodec_for(&format!("{} video", codec.name()))
}

/// Why `what` cannot be decoded in a process without a libavcodec.
fn needs_libavcodec_for(what: &str) -> String {
    let why = match libav::found() {
        Ok(_) => "it was not given one",
        Err(why) => why.as_str(),
    };
    format!(
        "{what} is decoded by FFmpeg's libavcodec, and this process has none ({why}; \
         installing PyAV, or a distribution's libavcodec, provides one)"
    )
}

/// Why OpenH264 cannot decode `index`'s video, when it cannot: MPEG-4 Part 2, and H.264 it
/// refuses (interlaced, lossless), said by the SPS. `None` for what it decodes.
pub(crate) fn openh264_cannot(index: &VideoIndex) -> Option<String> {
    let Codec::H264 = index.codec else {
        return Some(needs_libavcodec(index.codec));
    };
    let coding = super::sps::coding(&AvcConfig::parse(&index.config).ok()?.sps);
    let what = match coding {
        super::sps::Coding {
            interlaced: true, ..
        } => "interlaced H.264",
        super::sps::Coding { lossless: true, .. } => "lossless H.264",
        _ => return None,
    };
    Some(needs_libavcodec_for(what))
}

impl VideoDecoder {
    /// A decoder for `index`'s video: FFmpeg's when the process found a libavcodec
    /// ([`h264_decoder`] says which), else OpenH264.
    ///
    /// # Errors
    /// [`Error::Format`] naming the file when its `avcC` record is malformed or the decoder
    /// refuses its parameter sets.
    pub fn new(index: &VideoIndex) -> Result<Self, Error> {
        Self::new_typed(index).map_err(|e| named(index, e))
    }

    /// [`VideoDecoder::new`], with the failure typed.
    ///
    /// # Errors
    /// [`VideoError::Config`], [`VideoError::Decoder`] or [`VideoError::Decode`].
    pub fn new_typed(index: &VideoIndex) -> Result<Self, VideoError> {
        Self::with_library(index, libav::library())
    }

    /// A decoder for `index`'s video through `lib`, or OpenH264 when it is `None`.
    ///
    /// # Errors
    /// As [`VideoDecoder::new_typed`]; [`VideoError::Decoder`] when `lib` cannot open an
    /// H.264 decoder.
    pub fn with_library(
        index: &VideoIndex,
        lib: Option<&'static Libav>,
    ) -> Result<Self, VideoError> {
        let avc = match index.codec {
            Codec::H264 => Some(AvcConfig::parse(&index.config)?),
            Codec::Mpeg4 => None,
        };
        let headers = match &avc {
            Some(avc) => avc.parameter_sets.clone(),
            None => index.config.clone(),
        };
        let decoder = match (lib, index.codec) {
            (Some(lib), codec) => {
                Engine::Libav(LibavDecoder::new(lib, codec).map_err(VideoError::Decoder)?)
            }
            (None, Codec::H264) => match openh264_cannot(index) {
                Some(why) => return Err(VideoError::Decoder(why)),
                None => Engine::OpenH264(start()?),
            },
            (None, codec) => return Err(VideoError::Decoder(needs_libavcodec(codec))),
        };
        let mut this = Self {
            decoder,
            avc,
            headers,
            data: Vec::new(),
            annexb: Vec::new(),
            ended: false,
        };
        this.prime()?;
        Ok(this)
    }

    /// Which decoder this is, in words.
    pub fn name(&self) -> String {
        match &self.decoder {
            Engine::OpenH264(_) => OPENH264.to_string(),
            Engine::Libav(d) => d.library().describe(),
        }
    }

    /// Hands a fresh OpenH264 the parameter sets. (FFmpeg's is given them with each run's
    /// keyframe: alone, they are a packet with no picture, which it calls invalid data.)
    fn prime(&mut self) -> Result<(), VideoError> {
        if matches!(self.decoder, Engine::Libav(_)) {
            return Ok(());
        }
        let headers = std::mem::take(&mut self.headers);
        let fed = self.feed(&headers, None, &mut |_| {});
        self.headers = headers;
        fed
    }

    /// Decodes `plan`'s runs from `file` and hands each kept frame to `emit`, as the frame it
    /// is (`Picture::frame`), in the decoder's output order: presentation order within a run
    /// for a conforming stream.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be read; [`Error::Format`] naming the file and the
    /// frame when the decoder rejects a frame or a kept frame does not come out.
    pub fn decode(
        &mut self,
        file: &File,
        index: &VideoIndex,
        plan: &DecodePlan,
        emit: &mut dyn FnMut(Picture<'_>),
    ) -> Result<DecodeCounts, Error> {
        self.decode_typed(file, index, plan, emit)
            .map_err(|e| named(index, e))
    }

    /// [`VideoDecoder::decode`], with the failure typed. After a failure the decoder's state
    /// is unknown: start a new one.
    ///
    /// # Errors
    /// [`VideoFailure::Io`] when the file cannot be read, [`VideoFailure::Video`] when a frame
    /// is malformed or rejected, or a kept frame does not come out.
    pub fn decode_typed(
        &mut self,
        file: &File,
        index: &VideoIndex,
        plan: &DecodePlan,
        emit: &mut dyn FnMut(Picture<'_>),
    ) -> Result<DecodeCounts, VideoFailure> {
        self.decode_from(
            &mut |at, buf| file.read_exact_at(buf, at),
            index,
            plan,
            emit,
        )
    }

    /// [`VideoDecoder::decode_typed`] from the runs' bytes as [`DecodePlan::spans`] lays them
    /// out, one after the other in `bytes` (what the media engine is given in device memory).
    ///
    /// # Errors
    /// As [`VideoDecoder::decode_typed`]; bytes shorter than the spans are an I/O error.
    pub fn decode_spans(
        &mut self,
        bytes: &[u8],
        index: &VideoIndex,
        plan: &DecodePlan,
        emit: &mut dyn FnMut(Picture<'_>),
    ) -> Result<DecodeCounts, VideoFailure> {
        let mut at = 0usize;
        let mut next = |_: u64, buf: &mut [u8]| {
            let part = bytes.get(at..at + buf.len()).ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the runs' bytes end before the plan's spans",
                )
            })?;
            buf.copy_from_slice(part);
            at += buf.len();
            Ok(())
        };
        self.decode_runs(&mut next, index, plan, emit, false)
    }

    /// [`VideoDecoder::decode_typed`], each run's span read by `read(offset, buffer)` (a file, a
    /// shard member, bytes in memory).
    ///
    /// A run whose kept frames do not all come out is decoded again from the keyframe before
    /// its own (not before its edit's first frame), at most twice: a keyframe that is not an
    /// IDR picture (an open GOP's recovery point) may be followed by frames that refer, through
    /// its leading pictures, to the GOP before it, which FFmpeg 5 then does not give; OpenH264,
    /// which starts only at an IDR picture (it refuses the keyframe: "reference lost"), decodes
    /// again from the stream's first frame. Frames already given are not given again.
    ///
    /// # Errors
    /// As [`VideoDecoder::decode_typed`], with `read`'s errors as I/O errors.
    pub fn decode_from(
        &mut self,
        read: &mut dyn FnMut(u64, &mut [u8]) -> std::io::Result<()>,
        index: &VideoIndex,
        plan: &DecodePlan,
        emit: &mut dyn FnMut(Picture<'_>),
    ) -> Result<DecodeCounts, VideoFailure> {
        self.decode_runs(read, index, plan, emit, true)
    }

    /// [`VideoDecoder::decode_from`]; `again`: a run may be read again from further back
    /// (`read` takes any offset, not only the plan's spans in turn).
    fn decode_runs(
        &mut self,
        read: &mut dyn FnMut(u64, &mut [u8]) -> std::io::Result<()>,
        index: &VideoIndex,
        plan: &DecodePlan,
        emit: &mut dyn FnMut(Picture<'_>),
        again: bool,
    ) -> Result<DecodeCounts, VideoFailure> {
        let mut counts = DecodeCounts::default();
        for run in &plan.runs {
            let mut given = Vec::with_capacity(run.keep.len());
            let mut first = run.first;
            for attempt in 0.. {
                match self.decode_run(read, index, first, run, &mut given, emit, &mut counts) {
                    Err(VideoFailure::Video(
                        VideoError::Missing { .. } | VideoError::Decode { .. },
                    )) if again && attempt < 2 && first > 0 => {
                        // OpenH264 starts only at an IDR picture: from the stream's start,
                        // as FFmpeg's reader plays it (edits one after the other).
                        let back = match self.decoder {
                            Engine::OpenH264(_) => Some(0),
                            Engine::Libav(_) => earlier_start(index, first),
                        };
                        match back {
                            Some(earlier) if earlier < first => first = earlier,
                            _ => break,
                        }
                    }
                    done => {
                        done?;
                        break;
                    }
                }
            }
            if given.len() != run.keep.len() {
                return Err(VideoError::Missing {
                    wanted: run.keep.len(),
                    got: given.len(),
                }
                .into());
            }
        }
        Ok(counts)
    }

    /// Decodes frames `first..=run.last` (a fresh stream), passing on each of `run.keep` not
    /// in `given` (and adding it there); counts into `counts`.
    #[allow(clippy::too_many_arguments)]
    fn decode_run(
        &mut self,
        read: &mut dyn FnMut(u64, &mut [u8]) -> std::io::Result<()>,
        index: &VideoIndex,
        first: usize,
        run: &super::plan::Run,
        given: &mut Vec<usize>,
        emit: &mut dyn FnMut(Picture<'_>),
        counts: &mut DecodeCounts,
    ) -> Result<(), VideoFailure> {
        // OpenH264 does not take a new stream after the end of the last one (its picture
        // buffers stay held: "out of memory" a few frames in): a fresh decoder per run.
        // FFmpeg's is flushed, and given the parameter sets again with the keyframe.
        if self.ended {
            match &mut self.decoder {
                Engine::OpenH264(d) => {
                    *d = start()?;
                    self.prime()?;
                }
                Engine::Libav(d) => d.restart(),
            }
        }
        self.ended = true;
        let frames = &index.frames[first..=run.last];
        let (from, to) = super::plan::byte_span(index, first, run.last);
        self.data.clear();
        self.data.resize((to - from) as usize, 0);
        read(from, &mut self.data)?;
        counts.bytes += to - from;
        let keep = &run.keep;
        // While a discarded frame's decode is timed (`timing`), the CPU time of handing kept
        // pictures on, which is not that frame's (`handing`).
        let (timing, handing) = (Cell::new(false), Cell::new(Duration::ZERO));
        let mut pass = |p: Picture<'_>| {
            if keep.binary_search(&p.frame).is_ok() && !given.contains(&p.frame) {
                given.push(p.frame);
                let clock = timing.get().then(CpuClock::now);
                emit(p);
                if let Some(clock) = clock {
                    handing.set(handing.get() + clock.elapsed());
                }
            }
        };
        let key_pts = index.frames[first].pts;
        let mut skipped = 0;
        for (k, f) in frames.iter().enumerate() {
            let frame = first + k;
            let at = (f.offset - from) as usize;
            let sample = &self.data[at..at + f.len as usize];
            // A frame nobody keeps and nothing refers to need not be decoded at all.
            let reference = match &self.avc {
                Some(avc) => is_reference(sample, avc.nal_length),
                None => mpeg4::vop_type(sample) != Some(VopType::B),
            };
            if keep.binary_search(&frame).is_err() && !reference {
                skipped += 1;
                continue;
            }
            let mut annexb = std::mem::take(&mut self.annexb);
            let rewritten = match &self.avc {
                Some(avc) => to_annexb(sample, avc.nal_length, &mut annexb),
                None => {
                    annexb.clear();
                    annexb.extend_from_slice(sample);
                    Ok(())
                }
            };
            // The run's keyframe with the stream's headers before it, unless it holds its
            // own (an MPEG-4 keyframe usually does: FFmpeg warns of a second VOL header).
            if k == 0
                && matches!(self.decoder, Engine::Libav(_))
                && !(self.avc.is_none() && mpeg4::holds_vol(sample))
            {
                annexb.splice(0..0, self.headers.iter().copied());
            }
            // A discarded frame's decode is timed: what the call took, less the hand-over of
            // any kept picture the reordering gives out during it.
            let discarded = keep.binary_search(&frame).is_err();
            let (clock, handed) = (discarded.then(CpuClock::now), handing.get());
            timing.set(discarded);
            let fed = match rewritten {
                Ok(()) => self.feed(&annexb, Some(frame), &mut pass),
                Err(reason) => {
                    self.annexb = annexb;
                    return Err(VideoError::Sample { frame, reason }.into());
                }
            };
            timing.set(false);
            if let Some(clock) = clock {
                let spent = clock.elapsed().saturating_sub(handing.get() - handed);
                counts.discarded_time += spent;
            }
            self.annexb = annexb;
            // A leading picture of an open GOP decoded from its own keyframe refers to
            // the GOP before: its errors are expected, and it is never kept.
            let leading = f.pts < key_pts && keep.binary_search(&frame).is_err();
            if !leading {
                fed?;
            }
        }
        self.drain(&mut pass)?;
        counts.decoded += frames.len() - skipped;
        counts.discarded += frames.len() - skipped - keep.len().min(frames.len() - skipped);
        counts.skipped += skipped;
        if keep.iter().any(|f| !given.contains(f)) {
            return Err(VideoError::Missing {
                wanted: keep.len(),
                got: given.len(),
            }
            .into());
        }
        Ok(())
    }

    /// Hands the decoder one access unit tagged `frame` (`None`: the parameter sets alone);
    /// passes on each picture that is ready.
    fn feed(
        &mut self,
        annexb: &[u8],
        frame: Option<usize>,
        out: &mut dyn FnMut(Picture<'_>),
    ) -> Result<(), VideoError> {
        let decoder = match &mut self.decoder {
            Engine::Libav(d) => {
                let tag = frame.map_or(-1, |f| f as i64);
                return d
                    .decode(annexb, tag, out)
                    .map_err(|reason| VideoError::Libav { frame, reason });
            }
            Engine::OpenH264(d) => d,
        };
        let mut dst = [null_mut::<u8>(); 3];
        let mut info = SBufferInfo {
            uiInBsTimeStamp: frame.unwrap_or(0) as u64,
            ..SBufferInfo::default()
        };
        let len = i32::try_from(annexb.len()).unwrap_or(i32::MAX);
        // SAFETY: `annexb` is valid for `len` bytes for the call; `dst` and `info` are live
        // locals the decoder writes its output pointers and picture description into.
        let state = unsafe {
            decoder.raw_api().decode_frame_no_delay(
                annexb.as_ptr(),
                len,
                dst.as_mut_ptr(),
                &raw mut info,
            )
        };
        pass_on(&dst, &info, out);
        match state {
            0 => Ok(()),
            state => Err(VideoError::Decode { frame, state }),
        }
    }

    /// Ends the stream and passes on every picture still held for reordering.
    fn drain(&mut self, out: &mut dyn FnMut(Picture<'_>)) -> Result<(), VideoError> {
        let decoder = match &mut self.decoder {
            Engine::Libav(d) => {
                return d.drain(out).map_err(|reason| VideoError::Libav {
                    frame: None,
                    reason,
                });
            }
            Engine::OpenH264(d) => d,
        };
        let mut dst = [null_mut::<u8>(); 3];
        let mut info = SBufferInfo::default();
        // SAFETY: a null source of length 0 is the API's end-of-stream call; `dst` and `info`
        // are live locals it writes into.
        unsafe {
            decoder.raw_api().decode_frame_no_delay(
                std::ptr::null(),
                0,
                dst.as_mut_ptr(),
                &raw mut info,
            );
        }
        pass_on(&dst, &info, out);
        // Bounded: the decoder holds at most its reorder depth (16) of pictures.
        for _ in 0..32 {
            let mut left: i32 = 0;
            // SAFETY: the option writes one int into `left`.
            unsafe {
                decoder.raw_api().get_option(
                    DECODER_OPTION_NUM_OF_FRAMES_REMAINING_IN_BUFFER,
                    (&raw mut left).cast(),
                );
            }
            if left <= 0 {
                break;
            }
            let mut dst = [null_mut::<u8>(); 3];
            let mut info = SBufferInfo::default();
            // SAFETY: `dst` and `info` are live locals the decoder writes into.
            unsafe {
                decoder
                    .raw_api()
                    .flush_frame(dst.as_mut_ptr(), &raw mut info);
            }
            pass_on(&dst, &info, out);
        }
        Ok(())
    }
}

/// Passes on the picture OpenH264 described in `info`, if there is one.
fn pass_on(dst: &[*mut u8; 3], info: &SBufferInfo, out: &mut dyn FnMut(Picture<'_>)) {
    if info.iBufferStatus != 1 || dst.iter().any(|p| p.is_null()) {
        return;
    }
    // SAFETY: with `iBufferStatus == 1` the decoder filled the `sSystemBuffer` variant of
    // the union (the only one it has).
    let sys = unsafe { info.UsrData.sSystemBuffer };
    let (Ok(width), Ok(height), Ok(y_stride), Ok(uv_stride)) = (
        usize::try_from(sys.iWidth),
        usize::try_from(sys.iHeight),
        usize::try_from(sys.iStride[0]),
        usize::try_from(sys.iStride[1]),
    ) else {
        return;
    };
    if width == 0 || height == 0 || y_stride < width || uv_stride < width.div_ceil(2) {
        return;
    }
    let chroma_rows = height.div_ceil(2);
    // SAFETY: for a ready picture OpenH264 points `dst` at its planes, `height` rows of
    // `y_stride` bytes and `ceil(height / 2)` rows of `uv_stride` bytes, which stay valid
    // until the decoder's next call; the slices end before then (`out` returns first),
    // and the last row is taken only `width` (or half of it) long.
    let (y, u, v) = unsafe {
        (
            std::slice::from_raw_parts(dst[0], (height - 1) * y_stride + width),
            std::slice::from_raw_parts(dst[1], (chroma_rows - 1) * uv_stride + width.div_ceil(2)),
            std::slice::from_raw_parts(dst[2], (chroma_rows - 1) * uv_stride + width.div_ceil(2)),
        )
    };
    out(Picture {
        frame: info.uiOutYuvTimeStamp as usize,
        width,
        height,
        y,
        u,
        v,
        y_stride,
        uv_stride,
    })
}

/// A new OpenH264 decoder (error concealment off: a damaged frame is an error, not a guess).
fn start() -> Result<Decoder, VideoError> {
    Decoder::with_api_config(OpenH264API::from_source(), DecoderConfig::new())
        .map_err(|e| VideoError::Decoder(e.to_string()))
}

/// A typed failure as the crate's error, naming the file.
fn named(index: &VideoIndex, e: impl Into<VideoFailure>) -> Error {
    match e.into() {
        VideoFailure::Io(source) => Error::Io {
            path: index.path.clone(),
            source,
        },
        VideoFailure::Video(e) => Error::Format {
            path: index.path.clone(),
            reason: e.to_string(),
        },
    }
}

/// Whether a frame may be referred to by others: its first slice's `nal_ref_idc` is not zero
/// (H.264 7.4.1). Conservative: a frame whose slices cannot be found counts as a reference.
fn is_reference(sample: &[u8], nal_length: usize) -> bool {
    for nal in nal_units(sample, nal_length) {
        match nal.ok().and_then(|n| n.first()) {
            // Slice of a non-IDR (1) or IDR (5) picture.
            Some(&header) if matches!(header & 0x1f, 1 | 5) => return header & 0x60 != 0,
            Some(_) => {}
            // Malformed: decoded, so that the decoder names it.
            None => return true,
        }
    }
    true
}

/// The NAL units of one length-prefixed sample, each without its prefix.
fn nal_units(
    sample: &[u8],
    nal_length: usize,
) -> impl Iterator<Item = Result<&[u8], &'static str>> {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= sample.len() {
            return None;
        }
        let Some(prefix) = sample.get(at..at + nal_length) else {
            at = sample.len();
            return Some(Err("a NAL unit's length is cut off"));
        };
        let len = prefix
            .iter()
            .fold(0usize, |n, &b| (n << 8) | usize::from(b));
        let start = at + nal_length;
        let nal = start
            .checked_add(len)
            .and_then(|end| sample.get(start..end));
        at = nal.map_or(sample.len(), |n| start + n.len());
        Some(nal.ok_or("a NAL unit runs past its frame"))
    })
}

/// Rewrites one length-prefixed sample into an Annex B access unit in `out`.
fn to_annexb(sample: &[u8], nal_length: usize, out: &mut Vec<u8>) -> Result<(), &'static str> {
    out.clear();
    for nal in nal_units(sample, nal_length) {
        out.extend_from_slice(&START);
        out.extend_from_slice(nal?);
    }
    if out.is_empty() {
        return Err("an empty frame");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_avcc_record_gives_its_parameter_sets_with_start_codes() {
        // version 1, High, compat 0, level 31, 4-byte lengths, 1 SPS of 3 bytes, 1 PPS of 2.
        let record = [
            1, 100, 0, 31, 0xff, 0xe1, 0, 3, 0x67, 1, 2, 1, 0, 2, 0x68, 9,
        ];
        let c = AvcConfig::parse(&record).unwrap();
        assert_eq!(c.nal_length, 4);
        assert_eq!(c.profile, 100);
        assert_eq!(
            c.parameter_sets,
            [0, 0, 0, 1, 0x67, 1, 2, 0, 0, 0, 1, 0x68, 9]
        );
    }

    #[test]
    fn a_cut_off_avcc_record_is_refused() {
        let record = [1, 100, 0, 31, 0xff, 0xe1, 0, 9, 0x67, 1];
        assert_eq!(
            AvcConfig::parse(&record),
            Err(VideoError::Config("a parameter set runs past the record"))
        );
        assert!(AvcConfig::parse(&[0, 1, 2]).is_err());
    }

    #[test]
    fn a_frame_is_a_reference_unless_its_slice_says_nal_ref_idc_zero() {
        // An SEI (6) first, then a slice of a non-reference B-frame: nal_ref_idc 0.
        assert!(!is_reference(
            &[0, 0, 0, 2, 0x06, 5, 0, 0, 0, 2, 0x01, 0x9e],
            4
        ));
        // nal_ref_idc 2 on a P slice; an IDR slice.
        assert!(is_reference(&[0, 0, 0, 2, 0x41, 0x9a], 4));
        assert!(is_reference(&[0, 0, 0, 2, 0x65, 0x88], 4));
        // No slice found: counted as a reference.
        assert!(is_reference(&[0, 0, 0, 1, 0x06], 4));
        assert!(is_reference(&[], 4));
    }

    #[test]
    fn length_prefixed_nal_units_become_an_annexb_access_unit() {
        let mut out = Vec::new();
        to_annexb(&[0, 0, 0, 2, 0x65, 7, 0, 0, 0, 1, 0x06], 4, &mut out).unwrap();
        assert_eq!(out, [0, 0, 0, 1, 0x65, 7, 0, 0, 0, 1, 0x06]);
        assert_eq!(
            to_annexb(&[0, 0, 0, 9, 0x65], 4, &mut out),
            Err("a NAL unit runs past its frame")
        );
        assert_eq!(
            to_annexb(&[0, 0], 4, &mut out),
            Err("a NAL unit's length is cut off")
        );
    }
}
