//! The DCT-domain scale of a decode: `n/8` of the image's size along each axis, `n` = 1..=8,
//! each 8x8 block inverse-transformed to `n`x`n` samples from its top-left `n`x`n`
//! coefficients (libjpeg's `scale_num/8`, which it offers for the same reason: a decoder
//! that will shrink the image anyway saves the transform, the upsampling and the resize of
//! samples it would only average away).
//!
//! The scaled image is `ceil(size * n / 8)` samples along an axis, as libjpeg sizes it, and
//! scaled sample `i` sits at full-size position `(i + 0.5) * 8 / n`: a point `x` of the
//! full-size image is `x * n / 8` in the scaled one.

use std::fmt;

/// A DCT-domain scale, `n/8` (see the module's text).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Scale(u8);

impl Scale {
    /// The image's own size (8/8): the only scale at which a decode is libjpeg's pixels.
    pub const FULL: Scale = Scale(8);

    /// Every scale, smallest first.
    pub const ALL: [Scale; 8] = [
        Scale(1),
        Scale(2),
        Scale(3),
        Scale(4),
        Scale(5),
        Scale(6),
        Scale(7),
        Scale(8),
    ];

    /// `n/8`, for `n` in 1..=8.
    pub const fn eighths(n: u32) -> Option<Scale> {
        match n {
            1..=8 => Some(Scale(n as u8)),
            _ => None,
        }
    }

    /// 1/8, 1/4, 1/2 and the full size, smallest first: the scales of a decoder that halves.
    pub const POWERS_OF_TWO: [Scale; 4] = [Scale(1), Scale(2), Scale(4), Scale(8)];

    /// `n`: the samples a side of each scaled block.
    pub const fn block(self) -> usize {
        self.0 as usize
    }

    /// Whether this is the image's own size.
    pub const fn is_full(self) -> bool {
        self.0 == 8
    }

    /// Full-size coordinate `v` at this scale, rounded down: the scaled sample it falls in.
    pub fn floor(self, v: usize) -> usize {
        v * self.block() / 8
    }

    /// Full-size length or end `v` at this scale, rounded up: the scaled samples it reaches
    /// into.
    pub fn ceil(self, v: usize) -> usize {
        (v * self.block()).div_ceil(8)
    }

    /// Full-size position `v` (fractional) at this scale. At `1/2`, `1/4` and `1/8` the
    /// product and the division by 8 are both exact, so this is `v / denom` to the bit.
    pub fn of(self, v: f64) -> f64 {
        v * self.block() as f64 / 8.0
    }
}

impl Default for Scale {
    fn default() -> Self {
        Self::FULL
    }
}

impl fmt::Display for Scale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/8", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_of_two_scales_map_positions_as_a_division_does() {
        for s in Scale::POWERS_OF_TWO {
            let denom = 8 / s.block() as u32;
            for v in [0.0, 0.5, 1.25, 7.0, 13.375, 299.999, 1e6 + 0.3] {
                assert_eq!(s.of(v).to_bits(), (v / f64::from(denom)).to_bits());
            }
            for v in [0usize, 1, 7, 8, 9, 15, 16, 17, 333] {
                assert_eq!(s.floor(v), v / denom as usize);
                assert_eq!(s.ceil(v), v.div_ceil(denom as usize));
            }
        }
    }

    #[test]
    fn scaled_sizes_round_up_as_libjpeg_sizes_them() {
        // libjpeg: jdiv_round_up(image_width * scale_num, 8).
        let s = Scale::eighths(6).unwrap();
        assert_eq!(s.ceil(500), 375);
        assert_eq!(s.ceil(333), 250);
        assert_eq!(s.floor(333), 249);
        assert_eq!(Scale::eighths(7).unwrap().ceil(1), 1);
        assert_eq!(Scale::eighths(0), None);
        assert_eq!(Scale::eighths(9), None);
        assert_eq!(Scale::FULL.to_string(), "8/8");
    }
}
