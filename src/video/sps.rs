//! What an H.264 sequence parameter set says about its colours: its VUI's video signal type
//! (`video_full_range_flag`, and `matrix_coefficients` when it describes its colours), read
//! as FFmpeg's decoder reads it, which tags each decoded frame with them and so decides how
//! torchcodec, PyAV and decord convert the frame to RGB ([`super::colour::Conversion`]).
//!
//! Only the fields up to the colour description are read (whatever follows in the VUI, which
//! FFmpeg tolerates being malformed, is not): every count is bounded and every read checked.

/// The colour signal an SPS declares: each `None` where it says nothing (FFmpeg then keeps
/// the container's, or none: limited range, BT.601).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Signal {
    /// `video_full_range_flag`, when the VUI has a video signal type.
    pub full_range: Option<bool>,
    /// `matrix_coefficients`, when the video signal type describes its colours.
    pub matrix: Option<u8>,
}

impl Signal {
    /// What this signal says, each field where it says nothing taken from `fallback` (FFmpeg's
    /// decoder keeps the container's tags where the SPS is silent).
    pub fn or(self, fallback: Signal) -> Signal {
        Signal {
            full_range: self.full_range.or(fallback.full_range),
            matrix: self.matrix.or(fallback.matrix),
        }
    }
}

/// The colour signal of an MP4 sample entry's `colr` box in `head` (the movie's boxes), as
/// FFmpeg's MP4 reader takes it: `nclx` (ISO) gives the matrix and the range, `nclc`
/// (QuickTime) the matrix alone; the default where there is neither.
pub fn container_signal(head: &[u8]) -> Signal {
    let Some(at) = head
        .windows(8)
        .position(|w| &w[..4] == b"colr" && (&w[4..] == b"nclx" || &w[4..] == b"nclc"))
    else {
        return Signal::default();
    };
    let Some(body) = head.get(at + 8..) else {
        return Signal::default();
    };
    let field = |k: usize| body.get(k..k + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    // Primaries, transfer, matrix (16 bits each), then for `nclx` the range's bit.
    let matrix = field(4).map(|m| u8::try_from(m).unwrap_or(2));
    let full_range = if &head[at + 4..at + 8] == b"nclx" {
        body.get(6).map(|b| b >> 7 == 1)
    } else {
        None
    };
    Signal { full_range, matrix }
}

/// Reads the bits of a NAL unit's payload, emulation prevention bytes (`00 00 03`) dropped.
struct Bits {
    bytes: Vec<u8>,
    at: usize,
}

impl Bits {
    fn new(payload: &[u8]) -> Self {
        let mut bytes = Vec::with_capacity(payload.len());
        let mut zeros = 0;
        for &b in payload {
            if zeros >= 2 && b == 3 {
                zeros = 0;
                continue;
            }
            zeros = if b == 0 { zeros + 1 } else { 0 };
            bytes.push(b);
        }
        Self { bytes, at: 0 }
    }

    fn bit(&mut self) -> Option<u32> {
        let byte = *self.bytes.get(self.at / 8)?;
        let bit = (byte >> (7 - self.at % 8)) & 1;
        self.at += 1;
        Some(u32::from(bit))
    }

    fn bits(&mut self, n: u32) -> Option<u32> {
        (0..n).try_fold(0, |v, _| Some(v << 1 | self.bit()?))
    }

    /// An unsigned Exp-Golomb code (at most 32 bits of value).
    fn ue(&mut self) -> Option<u32> {
        let mut zeros = 0;
        while self.bit()? == 0 {
            zeros += 1;
            if zeros > 31 {
                return None;
            }
        }
        Some((1u32 << zeros) - 1 + self.bits(zeros)?)
    }

    /// A signed Exp-Golomb code.
    fn se(&mut self) -> Option<i64> {
        let k = i64::from(self.ue()?);
        Some(if k % 2 == 1 { (k + 1) / 2 } else { -(k / 2) })
    }
}

/// How the SPS NAL unit `nal` (its header byte first) samples its pictures:
/// `chroma_format_idc` (0 grey, 1 4:2:0, 2 4:2:2, 3 4:4:4) and the luma and chroma bit
/// depths; 4:2:0 at 8 bits for a profile without those fields, `None` for an SPS cut off
/// before them.
pub fn sampling(nal: &[u8]) -> Option<(u32, u32, u32)> {
    let mut r = Bits::new(nal.get(1..)?);
    let profile = r.bits(8)?;
    r.bits(16)?; // constraint flags, level
    r.ue()?; // seq_parameter_set_id
    if !HIGH_PROFILES.contains(&profile) {
        return Some((1, 8, 8));
    }
    let chroma_format = r.ue()?;
    if chroma_format == 3 {
        r.bit()?; // separate_colour_plane_flag
    }
    let luma = r.ue()?.checked_add(8)?;
    let chroma = r.ue()?.checked_add(8)?;
    Some((chroma_format, luma, chroma))
}

/// The profiles whose SPS carries its chroma format and bit depths.
const HIGH_PROFILES: [u32; 13] = [100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135];

/// The colour signal of the SPS NAL unit `nal` (its header byte first); the default (nothing
/// said) for one that ends or breaks before its VUI says anything.
pub fn signal(nal: &[u8]) -> Signal {
    nal.get(1..)
        .and_then(|payload| read(&mut Bits::new(payload), &mut Coding::default()))
        .unwrap_or_default()
}

/// What an SPS says of how its pictures are coded, beyond what every decoder takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Coding {
    /// `qpprime_y_zero_transform_bypass_flag`: lossless macroblocks (x264's `--qp 0`).
    pub lossless: bool,
    /// `frame_mbs_only_flag` 0: fields, or frames of field macroblock pairs (interlaced).
    pub interlaced: bool,
}

/// How the SPS NAL unit `nal` codes its pictures (as far as it reads; nothing said for one
/// cut off before).
pub fn coding(nal: &[u8]) -> Coding {
    let mut coding = Coding::default();
    if let Some(payload) = nal.get(1..) {
        read(&mut Bits::new(payload), &mut coding);
    }
    coding
}

fn read(r: &mut Bits, coding: &mut Coding) -> Option<Signal> {
    let profile = r.bits(8)?;
    r.bits(16)?; // constraint flags, level
    r.ue()?; // seq_parameter_set_id
    if HIGH_PROFILES.contains(&profile) {
        let chroma_format = r.ue()?;
        if chroma_format == 3 {
            r.bit()?; // separate_colour_plane_flag
        }
        r.ue()?; // bit_depth_luma_minus8
        r.ue()?; // bit_depth_chroma_minus8
        coding.lossless = r.bit()? == 1;
        if r.bit()? == 1 {
            // seq_scaling_matrix_present_flag: each list present is skipped.
            for i in 0..if chroma_format == 3 { 12 } else { 8 } {
                if r.bit()? == 1 {
                    let size = if i < 6 { 16 } else { 64 };
                    let (mut last, mut next) = (8i64, 8i64);
                    for _ in 0..size {
                        if next != 0 {
                            next = (last + r.se()? + 256).rem_euclid(256);
                        }
                        last = if next == 0 { last } else { next };
                    }
                }
            }
        }
    }
    r.ue()?; // log2_max_frame_num_minus4
    match r.ue()? {
        0 => {
            r.ue()?; // log2_max_pic_order_cnt_lsb_minus4
        }
        1 => {
            r.bit()?; // delta_pic_order_always_zero_flag
            r.se()?; // offset_for_non_ref_pic
            r.se()?; // offset_for_top_to_bottom_field
            let cycle = r.ue()?;
            if cycle > 255 {
                return None;
            }
            for _ in 0..cycle {
                r.se()?;
            }
        }
        _ => {}
    }
    r.ue()?; // max_num_ref_frames
    r.bit()?; // gaps_in_frame_num_value_allowed_flag
    r.ue()?; // pic_width_in_mbs_minus1
    r.ue()?; // pic_height_in_map_units_minus1
    if r.bit()? == 0 {
        coding.interlaced = true;
        r.bit()?; // mb_adaptive_frame_field_flag
    }
    r.bit()?; // direct_8x8_inference_flag
    if r.bit()? == 1 {
        for _ in 0..4 {
            r.ue()?; // frame_crop_*_offset
        }
    }
    if r.bit()? == 0 {
        return Some(Signal::default()); // no VUI
    }
    if r.bit()? == 1 && r.bits(8)? == 255 {
        r.bits(32)?; // sar_width, sar_height
    }
    if r.bit()? == 1 {
        r.bit()?; // overscan_appropriate_flag
    }
    if r.bit()? == 0 {
        return Some(Signal::default()); // no video signal type
    }
    r.bits(3)?; // video_format
    let full_range = Some(r.bit()? == 1);
    let matrix = if r.bit()? == 1 {
        r.bits(16)?; // colour_primaries, transfer_characteristics
        Some(r.bits(8)? as u8)
    } else {
        None
    };
    Some(Signal { full_range, matrix })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sps_without_a_vui_says_nothing_and_a_cut_or_empty_one_is_not_an_error() {
        assert_eq!(signal(&[]), Signal::default());
        assert_eq!(signal(&[0x67]), Signal::default());
        assert_eq!(signal(&[0x67, 0x64, 0x00]), Signal::default());
    }

    #[test]
    fn a_colr_box_gives_the_matrix_and_for_nclx_the_range() {
        let colr = |kind: &[u8; 4], tail: &[u8]| {
            let mut b = vec![0, 0, 0, 19];
            b.extend_from_slice(b"colr");
            b.extend_from_slice(kind);
            b.extend_from_slice(&[0, 1, 0, 1, 0, 1]);
            b.extend_from_slice(tail);
            b
        };
        assert_eq!(
            container_signal(&colr(b"nclx", &[0x80])),
            Signal {
                full_range: Some(true),
                matrix: Some(1)
            }
        );
        assert_eq!(
            container_signal(&colr(b"nclx", &[0])).full_range,
            Some(false)
        );
        assert_eq!(
            container_signal(&colr(b"nclc", &[])),
            Signal {
                full_range: None,
                matrix: Some(1)
            }
        );
        // An ICC profile says nothing FFmpeg converts by; a cut box nothing it cannot read.
        assert_eq!(container_signal(&colr(b"prof", &[0x80])), Signal::default());
        assert_eq!(container_signal(b"colrnclx\x00"), Signal::default());
        let sps = Signal {
            full_range: None,
            matrix: Some(9),
        };
        assert_eq!(
            sps.or(container_signal(&colr(b"nclx", &[0x80]))),
            Signal {
                full_range: Some(true),
                matrix: Some(9)
            }
        );
    }

    #[test]
    fn exp_golomb_codes_and_emulation_prevention_read_as_the_standard_writes_them() {
        // 1 | 010 | 011 | 00100 | 00101: 0, 1, 2, 3, 4 (ue); then se 1 -> 1, 2 -> -1.
        let mut r = Bits::new(&[0b1010_0110, 0b0100_0010, 0b1010_0110, 0]);
        assert_eq!(
            (0..5).map(|_| r.ue().unwrap()).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4]
        );
        let mut r = Bits::new(&[0b0100_1100]);
        assert_eq!((r.se(), r.se()), (Some(1), Some(-1)));
        // 00 00 03 01: the 03 is dropped.
        let mut r = Bits::new(&[0, 0, 3, 1]);
        assert_eq!(r.bits(24), Some(1));
    }

    #[test]
    fn the_sampling_of_each_profile_is_read_or_known() {
        // Baseline (66): no chroma format or depth fields, 8-bit 4:2:0.
        assert_eq!(sampling(&[0x67, 66, 0xc0, 0x1e, 0x80]), Some((1, 8, 8)));
        // High 4:4:4 Predictive (244): seq_parameter_set_id 0 (`1`), chroma_format_idc 3
        // (`00100`), separate planes 0, luma and chroma depths 8 (`1`, `1`).
        assert_eq!(
            sampling(&[0x67, 244, 0, 0x1e, 0b1001_0001, 0b1000_0000]),
            Some((3, 8, 8))
        );
        // High 10 (110): 4:2:0 (`010`), depths 10 (`011`, `011`).
        assert_eq!(
            sampling(&[0x67, 110, 0, 0x1e, 0b1010_0110, 0b1100_0000]),
            Some((1, 10, 10))
        );
        assert_eq!(sampling(&[0x67, 110, 0]), None, "cut off");
    }
}
