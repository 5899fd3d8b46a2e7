//! FFmpeg's H.264 decoder, loaded at run time where a libavcodec is already on the machine (a
//! distribution's `libavcodec.so.N`, or the copy PyAV's wheel carries): the reference decoder,
//! about 2.5x faster than OpenH264 built from C (BENCHMARKS.md, sessions 29 and 30). Nothing
//! is linked at build time, so hpuload still builds with cargo alone; without a libavcodec the
//! video path decodes with OpenH264, and H.264 decoding is exact, so both give the same
//! planes bit for bit.
//!
//! Which library: `HPULOAD_LIBAVCODEC` names one (a path), or `off` for OpenH264 only;
//! unset, or naming one that does not load, the distribution's sonames are tried, newest
//! first. The Python package sets the
//! variable to PyAV's copy when PyAV is installed and the variable is not set.
//!
//! Only five fields of FFmpeg's structures are read or written, at offsets that have not moved
//! from FFmpeg 4 (libavcodec 58) to FFmpeg 8 (libavcodec 62): a packet's `pts`, `dts`, `data`
//! and `size`, and a frame's planes, strides, size, format and `pts`. A library outside those
//! versions is not used. Everything else goes through functions and `AVOption`s.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;

use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};

use super::{Codec, Picture};

/// `AV_CODEC_ID_H264` and `AV_CODEC_ID_MPEG4`, the same in every version.
const CODEC_H264: c_int = 27;
const CODEC_MPEG4: c_int = 12;
/// `AVERROR(EAGAIN)`: the decoder wants the next packet first.
const EAGAIN: c_int = -libc::EAGAIN;
/// `AVERROR_EOF`: every picture has come out.
const EOF: c_int = -0x2046_4f45; // -MKTAG('E', 'O', 'F', ' ')
/// `AV_PIX_FMT_YUV420P` and `AV_PIX_FMT_YUVJ420P` (the same planes, full range flagged).
const YUV420P: c_int = 0;
const YUVJ420P: c_int = 12;
/// `AV_EF_CRCCHECK | AV_EF_EXPLODE`: a damaged frame is an error, not a concealed guess.
const ERR_DETECT: i64 = 1 | 8;

/// Offsets into `AVPacket` (libavcodec 58-62).
mod packet {
    pub const PTS: usize = 8;
    pub const DTS: usize = 16;
    pub const DATA: usize = 24;
    pub const SIZE: usize = 32;
}
/// Offsets into `AVFrame` (libavutil 56-60).
mod frame {
    pub const DATA: usize = 0;
    pub const LINESIZE: usize = 64;
    pub const WIDTH: usize = 104;
    pub const HEIGHT: usize = 108;
    pub const FORMAT: usize = 116;
    pub const PTS: usize = 136;
}
const CODEC_MAJORS: std::ops::RangeInclusive<u32> = 58..=62;
const UTIL_MAJORS: std::ops::RangeInclusive<u32> = 56..=60;

type Ptr = *mut c_void;

/// The functions used, resolved once.
struct Api {
    find_decoder: unsafe extern "C" fn(c_int) -> *const c_void,
    alloc_context: unsafe extern "C" fn(*const c_void) -> Ptr,
    open: unsafe extern "C" fn(Ptr, *const c_void, *mut Ptr) -> c_int,
    free_context: unsafe extern "C" fn(*mut Ptr),
    send_packet: unsafe extern "C" fn(Ptr, *const c_void) -> c_int,
    receive_frame: unsafe extern "C" fn(Ptr, Ptr) -> c_int,
    flush: unsafe extern "C" fn(Ptr),
    packet_alloc: unsafe extern "C" fn() -> Ptr,
    packet_free: unsafe extern "C" fn(*mut Ptr),
    frame_alloc: unsafe extern "C" fn() -> Ptr,
    frame_free: unsafe extern "C" fn(*mut Ptr),
    opt_set_int: unsafe extern "C" fn(Ptr, *const c_char, i64, c_int) -> c_int,
    strerror: unsafe extern "C" fn(c_int, *mut c_char, usize) -> c_int,
}

/// A loaded libavcodec: where it came from, its version, and its functions.
pub struct Libav {
    /// The file (or soname) it was loaded from.
    pub path: String,
    /// `avcodec_version()`: major << 16 | minor << 8 | micro.
    pub version: u32,
    api: Api,
    /// Kept loaded for the process's life (the functions above point into it).
    _library: Library,
}

impl std::fmt::Debug for Libav {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.describe())
    }
}

impl Libav {
    /// "libavcodec 59.37.100 (/usr/lib/...)".
    pub fn describe(&self) -> String {
        let v = self.version;
        format!(
            "libavcodec {}.{}.{} ({})",
            v >> 16,
            (v >> 8) & 0xff,
            v & 0xff,
            self.path
        )
    }

    /// Loads the library at `path` (a file or a soname), checking its versions.
    ///
    /// # Errors
    /// It does not load, lacks a function, or is a version whose layout is not known.
    pub fn load(path: &str) -> Result<Self, String> {
        // SAFETY: loading runs the library's initialisers; libavcodec's only set up its own
        // tables. RTLD_LOCAL keeps its symbols out of the global namespace, so a different
        // FFmpeg that another module loads (PyAV's, torchcodec's) is not disturbed.
        let library = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }
            .map_err(|e| e.to_string())?;
        macro_rules! get {
            ($name:literal) => {{
                // SAFETY: each name is FFmpeg's public function of the signature the field it
                // fills declares (the same in every version accepted below); the pointer is
                // used only while `library` stays loaded (it is kept in the returned value).
                let symbol = unsafe { library.get(concat!($name, "\0").as_bytes()) }
                    .map_err(|e| format!("{}: {e}", $name))?;
                *symbol
            }};
        }
        let codec_version: unsafe extern "C" fn() -> c_uint = get!("avcodec_version");
        let util_version: unsafe extern "C" fn() -> c_uint = get!("avutil_version");
        // SAFETY: both take nothing and return a number.
        let (version, util) = unsafe { (codec_version(), util_version()) };
        if !CODEC_MAJORS.contains(&(version >> 16)) || !UTIL_MAJORS.contains(&(util >> 16)) {
            return Err(format!(
                "libavcodec {} with libavutil {}: only libavcodec {}-{} (FFmpeg 4-8) are known",
                version >> 16,
                util >> 16,
                CODEC_MAJORS.start(),
                CODEC_MAJORS.end()
            ));
        }
        let api = Api {
            find_decoder: get!("avcodec_find_decoder"),
            alloc_context: get!("avcodec_alloc_context3"),
            open: get!("avcodec_open2"),
            free_context: get!("avcodec_free_context"),
            send_packet: get!("avcodec_send_packet"),
            receive_frame: get!("avcodec_receive_frame"),
            flush: get!("avcodec_flush_buffers"),
            packet_alloc: get!("av_packet_alloc"),
            packet_free: get!("av_packet_free"),
            frame_alloc: get!("av_frame_alloc"),
            frame_free: get!("av_frame_free"),
            opt_set_int: get!("av_opt_set_int"),
            strerror: get!("av_strerror"),
        };
        Ok(Self {
            path: path.to_string(),
            version,
            api,
            _library: library,
        })
    }

    /// FFmpeg's words for error `code`.
    fn error(&self, code: c_int) -> String {
        let mut buf = [0 as c_char; 128];
        // SAFETY: `buf` is writable for its length, which is passed; av_strerror always
        // terminates it.
        unsafe { (self.api.strerror)(code, buf.as_mut_ptr(), buf.len()) };
        // SAFETY: terminated above.
        let words = unsafe { CStr::from_ptr(buf.as_ptr()) };
        format!("{} (error {code})", words.to_string_lossy())
    }
}

/// The libavcodec the video path decodes with, found once per process (see the module's
/// documentation); `None` means OpenH264.
pub fn library() -> Option<&'static Libav> {
    found().as_ref().ok()
}

/// The search's outcome: the library, or why there is none.
pub(crate) fn found() -> &'static Result<Libav, String> {
    static FOUND: OnceLock<Result<Libav, String>> = OnceLock::new();
    FOUND.get_or_init(|| {
        let found = find(std::env::var("HPULOAD_LIBAVCODEC").ok().as_deref());
        match &found {
            Ok(lib) => tracing::debug!("H.264 decoding with {}", lib.describe()),
            Err(why) => tracing::debug!("H.264 decoding with OpenH264: {why}"),
        }
        found
    })
}

/// Finds the library `setting` (the environment variable's value) asks for: `off`, none; a
/// path, that one, else (with a warning naming why) the distribution's sonames as when unset.
fn find(setting: Option<&str>) -> Result<Libav, String> {
    let mut why = Vec::new();
    match setting.map(str::trim) {
        Some("off" | "0" | "openh264") => return Err("HPULOAD_LIBAVCODEC is off".into()),
        Some(path) if !path.is_empty() => match Libav::load(path) {
            Ok(lib) => return Ok(lib),
            Err(e) => {
                tracing::warn!("HPULOAD_LIBAVCODEC={path} does not load: {e}");
                why.push(e);
            }
        },
        _ => {}
    }
    for major in CODEC_MAJORS.rev() {
        match Libav::load(&format!("libavcodec.so.{major}")) {
            Ok(lib) => return Ok(lib),
            Err(e) => why.push(e),
        }
    }
    Err(format!("no libavcodec found ({})", why.join("; ")))
}

/// One FFmpeg H.264 decoder context (single-threaded: each worker holds its own).
pub struct LibavDecoder {
    lib: &'static Libav,
    context: Ptr,
    packet: Ptr,
    frame: Ptr,
    /// Whether the stream was ended: the next packet needs a flush first.
    drained: bool,
}

// SAFETY: the context, packet and frame are owned by this value alone and FFmpeg keeps no
// thread affinity for them: moving them to another thread between calls is allowed.
unsafe impl Send for LibavDecoder {}

impl Drop for LibavDecoder {
    fn drop(&mut self) {
        // SAFETY: each pointer came from its allocator and is freed once, here; the free
        // functions take null pointers too.
        unsafe {
            (self.lib.api.frame_free)(&raw mut self.frame);
            (self.lib.api.packet_free)(&raw mut self.packet);
            (self.lib.api.free_context)(&raw mut self.context);
        }
    }
}

impl LibavDecoder {
    /// An opened decoder context for `codec`.
    ///
    /// # Errors
    /// The library has no decoder for it or will not open one.
    pub fn new(lib: &'static Libav, wanted: Codec) -> Result<Self, String> {
        let api = &lib.api;
        let id = match wanted {
            Codec::H264 => CODEC_H264,
            Codec::Mpeg4 => CODEC_MPEG4,
        };
        // SAFETY: plain constructor calls; every pointer is checked before use.
        unsafe {
            let codec = (api.find_decoder)(id);
            if codec.is_null() {
                return Err(format!(
                    "{} has no {} decoder",
                    lib.describe(),
                    wanted.name()
                ));
            }
            let this = Self {
                lib,
                context: (api.alloc_context)(codec),
                packet: (api.packet_alloc)(),
                frame: (api.frame_alloc)(),
                drained: false,
            };
            if this.context.is_null() || this.packet.is_null() || this.frame.is_null() {
                return Err("libavcodec could not allocate a decoder".into());
            }
            // One thread: the loader runs one decoder per worker. Frame threading would
            // also delay every picture by a frame per thread.
            for (name, value) in [(c"threads", 1), (c"err_detect", ERR_DETECT)] {
                let code = (api.opt_set_int)(this.context, name.as_ptr(), value, 0);
                if code < 0 {
                    return Err(format!("setting {name:?}: {}", lib.error(code)));
                }
            }
            let code = (api.open)(this.context, codec, std::ptr::null_mut());
            if code < 0 {
                return Err(format!("opening the decoder: {}", lib.error(code)));
            }
            // Keep `this` only now that it is whole; its Drop frees it on the errors above.
            Ok(this)
        }
    }

    /// The library it runs in.
    pub fn library(&self) -> &'static Libav {
        self.lib
    }

    /// Forgets every picture and reference: the next packet starts a new stream (a run
    /// starting at a keyframe).
    pub fn restart(&mut self) {
        // SAFETY: the context is open.
        unsafe { (self.lib.api.flush)(self.context) };
        self.drained = false;
    }

    /// Decodes one Annex B access unit tagged `tag` (its frame's decode-order index), handing
    /// `out` each picture that comes out, as the frame its tag names. FFmpeg copies `data` into a padded buffer of its own during the call.
    ///
    /// # Errors
    /// FFmpeg's words for why the access unit does not decode.
    pub fn decode(
        &mut self,
        data: &[u8],
        tag: i64,
        out: &mut dyn FnMut(Picture<'_>),
    ) -> Result<(), String> {
        if self.drained {
            self.restart();
        }
        let size = c_int::try_from(data.len()).map_err(|_| "an access unit over 2 GiB")?;
        let p = self.packet.cast::<u8>();
        // SAFETY: `packet` is an AVPacket from av_packet_alloc; the offsets are its `pts`,
        // `dts`, `data` and `size` fields in every accepted version. With no `buf`, FFmpeg
        // copies the bytes it is given during the call, so `data` need outlive only the call;
        // the fields are reset before returning.
        let code = unsafe {
            p.add(packet::PTS).cast::<i64>().write_unaligned(tag);
            p.add(packet::DTS).cast::<i64>().write_unaligned(tag);
            p.add(packet::DATA)
                .cast::<*const u8>()
                .write_unaligned(data.as_ptr());
            p.add(packet::SIZE).cast::<c_int>().write_unaligned(size);
            let code = (self.lib.api.send_packet)(self.context, self.packet);
            p.add(packet::DATA)
                .cast::<*const u8>()
                .write_unaligned(std::ptr::null());
            p.add(packet::SIZE).cast::<c_int>().write_unaligned(0);
            code
        };
        if code < 0 {
            return Err(self.lib.error(code));
        }
        self.receive(out)
    }

    /// Ends the stream and hands `out` every picture still held for reordering.
    ///
    /// # Errors
    /// FFmpeg's words for a failure while draining.
    pub fn drain(&mut self, out: &mut dyn FnMut(Picture<'_>)) -> Result<(), String> {
        if self.drained {
            return Ok(());
        }
        // SAFETY: a null packet is the API's end-of-stream call.
        let code = unsafe { (self.lib.api.send_packet)(self.context, std::ptr::null()) };
        self.drained = true;
        if code < 0 && code != EOF {
            return Err(self.lib.error(code));
        }
        self.receive(out)
    }

    /// Hands `out` every picture ready now.
    fn receive(&mut self, out: &mut dyn FnMut(Picture<'_>)) -> Result<(), String> {
        // Bounded: each call returns a picture the decoder holds (at most its 16 references
        // and reorder depth for one packet), or stops.
        for _ in 0..64 {
            // SAFETY: an open context and a frame from av_frame_alloc (receive unrefs it
            // first).
            let code = unsafe { (self.lib.api.receive_frame)(self.context, self.frame) };
            if code == EAGAIN || code == EOF {
                return Ok(());
            }
            if code < 0 {
                return Err(self.lib.error(code));
            }
            let planes = self.planes()?;
            out(planes);
        }
        Err("libavcodec kept giving pictures for one packet".into())
    }

    /// The picture the frame holds, read at the accepted versions' offsets.
    fn planes(&self) -> Result<Picture<'_>, String> {
        let f = self.frame.cast::<u8>().cast_const();
        // SAFETY: `frame` is an AVFrame that receive_frame just filled; the offsets are its
        // `data`, `linesize`, `width`, `height`, `format` and `pts` fields in every accepted
        // version.
        let (data, linesize, width, height, format, tag) = unsafe {
            let data: [*const u8; 3] =
                std::array::from_fn(|i| f.add(frame::DATA + 8 * i).cast::<*const u8>().read());
            let linesize: [c_int; 3] =
                std::array::from_fn(|i| f.add(frame::LINESIZE + 4 * i).cast::<c_int>().read());
            (
                data,
                linesize,
                f.add(frame::WIDTH).cast::<c_int>().read(),
                f.add(frame::HEIGHT).cast::<c_int>().read(),
                f.add(frame::FORMAT).cast::<c_int>().read(),
                f.add(frame::PTS).cast::<i64>().read(),
            )
        };
        if format != YUV420P && format != YUVJ420P {
            return Err(format!(
                "a picture in pixel format {format} (only 8-bit 4:2:0 is read)"
            ));
        }
        let (Ok(width), Ok(height), Ok(y_stride), Ok(uv_stride), Ok(uv_stride2)) = (
            usize::try_from(width),
            usize::try_from(height),
            usize::try_from(linesize[0]),
            usize::try_from(linesize[1]),
            usize::try_from(linesize[2]),
        ) else {
            return Err("a picture with a negative size or stride".into());
        };
        let chroma = (width.div_ceil(2), height.div_ceil(2));
        if width == 0
            || height == 0
            || y_stride < width
            || uv_stride < chroma.0
            || uv_stride2 != uv_stride
            || data.iter().any(|p| p.is_null())
        {
            return Err(format!(
                "a picture hpuload cannot read ({width}x{height}, strides {linesize:?})"
            ));
        }
        // SAFETY: a yuv420p AVFrame holds `height` rows of `linesize[0]` bytes at `data[0]`
        // and `ceil(height / 2)` rows of `linesize[1]` (= `linesize[2]`) bytes at `data[1]`
        // and `data[2]`, valid until the frame is next unreferenced (the next receive, which
        // needs `&mut self`, so after these borrows end); the last row is taken only as long
        // as the picture is wide.
        let (y, u, v) = unsafe {
            (
                std::slice::from_raw_parts(data[0], (height - 1) * y_stride + width),
                std::slice::from_raw_parts(data[1], (chroma.1 - 1) * uv_stride + chroma.0),
                std::slice::from_raw_parts(data[2], (chroma.1 - 1) * uv_stride + chroma.0),
            )
        };
        Ok(Picture {
            // The tag is the frame's decode-order index; one that is no frame's (the -1 of
            // nothing sent) matches no kept frame.
            frame: usize::try_from(tag).unwrap_or(usize::MAX),
            width,
            height,
            y,
            u,
            v,
            y_stride,
            uv_stride,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpuload_libavcodec_off_means_openh264() {
        assert_eq!(find(Some("off")).unwrap_err(), "HPULOAD_LIBAVCODEC is off");
    }

    #[test]
    fn a_path_that_does_not_load_is_named_and_the_sonames_are_tried_next() {
        let bad = "/nonexistent/libavcodec.so.61";
        match (find(Some(bad)), find(None)) {
            (Err(e), Err(_)) => assert!(e.contains(bad), "{e}"),
            (Ok(lib), Ok(system)) => assert_eq!(lib.path, system.path),
            (got, system) => panic!("{got:?} against {system:?}"),
        }
    }
}
