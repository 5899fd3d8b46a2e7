//! MPEG-4 Part 2 (ISO/IEC 14496-2: Xvid, DivX, FFmpeg's `mpeg4`) headers, read as far as the
//! frame index needs them: the video object layer's (VOL) time resolution, and each video
//! object plane's (VOP) coding type and whether it is coded at all. The pictures themselves are
//! decoded by FFmpeg's libavcodec ([`super::libav`]).

/// A VOP's coding type (14496-2, 6.3.5, `vop_coding_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VopType {
    /// Intra: a keyframe.
    I,
    /// Predicted from the reference before it.
    P,
    /// Bidirectional: predicted from the references on both sides, never a reference itself.
    B,
    /// Sprite (global motion compensation): predicted like P, and a reference.
    S,
}

impl VopType {
    /// The type `vop_coding_type`'s two bits give.
    fn of(bits: u32) -> Self {
        match bits {
            0 => Self::I,
            1 => Self::P,
            2 => Self::B,
            _ => Self::S,
        }
    }
}

/// One VOP's header, as far as the index reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Vop {
    /// Its coding type.
    pub kind: VopType,
    /// `vop_coded`: false for an N-VOP, a placeholder with no picture (what a dropped frame
    /// or a "packed bitstream" writer's empty frame is).
    pub coded: bool,
}

/// The start codes' last bytes: a VOP, and the range a video object layer takes.
const VOP_START: u8 = 0xb6;
const VOL_STARTS: std::ops::RangeInclusive<u8> = 0x20..=0x2f;

/// The bits a VOP's `vop_time_increment` takes, from the first video object layer header in
/// `bytes` (a keyframe's first bytes, or the stream's configuration); `Ok(None)` when `bytes`
/// hold no VOL header.
///
/// # Errors
/// What makes the layer one hpuload does not read (a shape other than rectangular, a zero time
/// resolution), or a header cut off.
pub(crate) fn time_increment_bits(bytes: &[u8]) -> Result<Option<u32>, &'static str> {
    let Some(at) = start_code(bytes, |c| VOL_STARTS.contains(&c)) else {
        return Ok(None);
    };
    let cut = "the video object layer header is cut off";
    let mut r = Bits::new(&bytes[at..]);
    r.skip(1 + 8).ok_or(cut)?; // random_accessible_vol, video_object_type_indication
    if r.read(1).ok_or(cut)? == 1 {
        r.skip(4 + 3).ok_or(cut)?; // video_object_layer_verid, video_object_layer_priority
    }
    if r.read(4).ok_or(cut)? == 0xf {
        r.skip(16).ok_or(cut)?; // par_width, par_height
    }
    if r.read(1).ok_or(cut)? == 1 {
        r.skip(2 + 1).ok_or(cut)?; // chroma_format, low_delay
        if r.read(1).ok_or(cut)? == 1 {
            // vbv_parameters: bit rate, buffer size and occupancy, with their markers.
            r.skip(15 + 1 + 15 + 1 + 15 + 1 + 3 + 11 + 1 + 15 + 1)
                .ok_or(cut)?;
        }
    }
    let shape = r.read(2).ok_or(cut)?;
    if shape != 0 {
        return Err("the video object layer is not rectangular (a shape-coded MPEG-4 video)");
    }
    r.skip(1).ok_or(cut)?; // marker
    let resolution = r.read(16).ok_or(cut)?;
    if resolution == 0 {
        return Err("the video object layer's time resolution is zero");
    }
    // As FFmpeg counts them: enough bits for `resolution - 1`, at least one.
    Ok(Some((32 - (resolution - 1).leading_zeros()).max(1)))
}

/// The first VOP header in `bytes` (a frame's first bytes), read with `increment_bits` from
/// the stream's VOL; `None` when `bytes` hold no complete one.
pub(crate) fn vop(bytes: &[u8], increment_bits: u32) -> Option<Vop> {
    let at = start_code(bytes, |c| c == VOP_START)?;
    let mut r = Bits::new(&bytes[at..]);
    let kind = VopType::of(r.read(2)?);
    // modulo_time_base: a one for each whole second that passed, then a zero.
    while r.read(1)? == 1 {}
    r.skip(1 + increment_bits + 1)?; // marker, vop_time_increment, marker
    let coded = r.read(1)? == 1;
    Some(Vop { kind, coded })
}

/// The VOP's coding type in a whole frame's bytes, for the decoder's choice of frames to skip:
/// `None` when no VOP header is found (the frame is then decoded, and the decoder names what is
/// wrong with it).
pub(crate) fn vop_type(frame: &[u8]) -> Option<VopType> {
    let at = start_code(frame, |c| c == VOP_START)?;
    Some(VopType::of(u32::from(*frame.get(at)? >> 6)))
}

/// Whether `bytes` hold a video object layer header (a keyframe that carries its own).
pub(crate) fn holds_vol(bytes: &[u8]) -> bool {
    start_code(bytes, |c| VOL_STARTS.contains(&c)).is_some()
}

/// Where a second VOP's start code begins in a frame's bytes, and its coding type: a DivX-style
/// "packed bitstream" stores a B-frame in the chunk of the reference before it (which the
/// B-frame needs), so that each chunk gives one picture to show.
pub(crate) fn second_vop(frame: &[u8]) -> Option<(usize, VopType)> {
    let first = start_code(frame, |c| c == VOP_START)?;
    let body = first + start_code(&frame[first..], |c| c == VOP_START)?;
    Some((body - 4, VopType::of(u32::from(*frame.get(body)? >> 6))))
}

/// Where the body after the first start code `00 00 01 xx` with `wanted(xx)` begins.
fn start_code(bytes: &[u8], wanted: impl Fn(u8) -> bool) -> Option<usize> {
    bytes
        .windows(4)
        .position(|w| w[..3] == [0, 0, 1] && wanted(w[3]))
        .map(|at| at + 4)
}

/// A big-endian bit reader.
struct Bits<'a> {
    bytes: &'a [u8],
    /// Bits read so far.
    at: usize,
}

impl<'a> Bits<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    /// The next `n` bits (at most 32), or `None` past the end.
    fn read(&mut self, n: u32) -> Option<u32> {
        let mut value = 0u32;
        for _ in 0..n {
            let byte = *self.bytes.get(self.at / 8)?;
            value = value << 1 | u32::from(byte >> (7 - self.at % 8) & 1);
            self.at += 1;
        }
        Some(value)
    }

    /// Skips `n` bits, or `None` when fewer are left.
    fn skip(&mut self, n: u32) -> Option<()> {
        let to = self.at + n as usize;
        (to <= self.bytes.len() * 8).then(|| self.at = to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A VOL header as FFmpeg's encoder writes one (simple profile, 25 ticks a second), after
    /// a visual object sequence and a visual object header.
    const VOL: [u8; 30] = [
        0x00,
        0x00,
        0x01,
        0xb0,
        0x01, // VOS, simple profile level 1
        0x00,
        0x00,
        0x01,
        0xb5,
        0x89,
        0x13, // VO
        0x00,
        0x00,
        0x01,
        0x00, // video object 0
        0x00,
        0x00,
        0x01,
        0x20, // VOL
        // random_accessible 0, type 1, identifier 0, aspect 1, control 0, shape 00,
        // marker 1, resolution 25, marker 1, ...
        0b0000_0000,
        0b1000_0100,
        0b0100_0000,
        0b0000_0110,
        0b0110_0000,
        0,
        0,
        0,
        0,
        0,
        0,
    ];

    #[test]
    fn the_time_increment_takes_as_many_bits_as_the_resolution_needs() {
        assert_eq!(time_increment_bits(&VOL), Ok(Some(5)));
        assert_eq!(time_increment_bits(&VOL[..15]), Ok(None));
        assert!(holds_vol(&VOL) && !holds_vol(&VOL[..15]));
        assert!(time_increment_bits(&VOL[..21]).is_err());
    }

    #[test]
    fn a_vops_type_and_coded_flag_are_read_after_its_time_fields() {
        // B-VOP (10), one second passed (1 0), marker, 5 bits of increment, marker, coded.
        let b = [0, 0, 1, 0xb6, 0b1010_1000, 0b0011_1000];
        assert_eq!(
            vop(&b, 5),
            Some(Vop {
                kind: VopType::B,
                coded: true
            })
        );
        assert_eq!(vop_type(&b), Some(VopType::B));
        // A P-VOP not coded (an N-VOP).
        let n = [0, 0, 1, 0xb6, 0b0101_0000, 0b0100_0000];
        assert_eq!(
            vop(&n, 5),
            Some(Vop {
                kind: VopType::P,
                coded: false
            })
        );
        assert_eq!(vop(&n[..4], 5), None);
        // A P-VOP and a B-VOP packed in one chunk: the second starts at byte 6.
        let packed = [&n[..], &b[..]].concat();
        assert_eq!(second_vop(&packed), Some((6, VopType::B)));
        assert_eq!(second_vop(&b), None);
        assert_eq!(vop(&[1, 2, 3], 5), None);
    }
}
