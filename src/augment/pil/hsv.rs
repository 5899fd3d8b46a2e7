//! torchvision's `adjust_hue` of a PIL image: `img.convert("HSV")`, the hue byte shifted with
//! NumPy's uint8 wrap-around, and `convert("RGB")` back. Pillow's HSV is three bytes per pixel,
//! so this differs from the tensor kernel (float HSV, [`super::super::colour`]) by up to a
//! dozen levels; each conversion here is Pillow's own arithmetic: its float and double
//! widths, its truncations and its rounding.

use std::sync::OnceLock;

/// `adjust_hue(img, factor)` on an RGB8 image, in place.
pub(crate) fn adjust_hue(rgb: &mut [u8], factor: f64) {
    // `np.int32(hue_factor * 255).astype(np.uint8)`: truncated toward zero, then modulo 256.
    let shift = (factor * 255.0) as i32 as u8;
    let t = Tables::get();
    for px in rgb.chunks_exact_mut(3) {
        let [h, s, v] = t.rgb_to_hsv([px[0], px[1], px[2]]);
        px.copy_from_slice(&t.hsv_to_rgb([h.wrapping_add(shift), s, v]));
    }
}

/// The conversions' divisions, tabulated (built once, from the scalar forms below, which
/// stay the reference: a test holds the two equal for every colour).
///
/// A hue byte depends only on which channel is largest (in Pillow's order of tests), which
/// of the other two is smallest, the range `max - min` and the middle channel's distance
/// from the top: the two ratios of the other channels are then 0 or 1 exactly, and one
/// division fixes the third. The saturation byte depends on the range and the maximum. On
/// the way back, the sixth of the circle and its fraction depend on the hue byte alone and
/// the saturation's fraction on the saturation byte, leaving three products a pixel.
struct Tables {
    /// `[branch][smallest][range][distance]`, 6 x 256 x 256.
    hue: Box<[u8]>,
    /// `[max][range]`.
    saturation: Box<[u8]>,
    /// Per hue byte: `i % 6` and `f`.
    sixth: [(u8, f32); 256],
    /// Per saturation byte: `fs`.
    fraction: [f32; 256],
}

impl Tables {
    fn get() -> &'static Self {
        static TABLES: OnceLock<Tables> = OnceLock::new();
        TABLES.get_or_init(Self::build)
    }

    fn build() -> Self {
        let mut hue = vec![0u8; 6 * 256 * 256].into_boxed_slice();
        for branch in 0..3 {
            for smallest in 0..2 {
                for range in 1..=255u8 {
                    for distance in 0..=range {
                        // A colour of that key with minimum 0 (the hue does not depend on it).
                        let other = range - distance;
                        let (x, y) = if smallest == 0 {
                            (0, other)
                        } else {
                            (other, 0)
                        };
                        let rgb = match branch {
                            0 => [range, x, y],
                            1 => [x, range, y],
                            _ => [x, y, range],
                        };
                        let at = Self::hue_at(branch, smallest, range, distance);
                        hue[at] = rgb_to_hsv(rgb)[0];
                    }
                }
            }
        }
        let mut saturation = vec![0u8; 256 * 256].into_boxed_slice();
        for max in 1..=255u8 {
            for range in 1..=max {
                saturation[usize::from(max) * 256 + usize::from(range)] =
                    rgb_to_hsv([max, max - range, max - range])[1];
            }
        }
        let sixth = std::array::from_fn(|h| {
            let sixths = h as f64 * 6.0 / 255.0;
            let i = sixths as i32;
            ((i % 6) as u8, (sixths - f64::from(i as f32)) as f32)
        });
        let fraction = std::array::from_fn(|s| (s as f64 / 255.0) as f32);
        Self {
            hue,
            saturation,
            sixth,
            fraction,
        }
    }

    fn hue_at(branch: usize, smallest: usize, range: u8, distance: u8) -> usize {
        ((branch * 2 + smallest) * 256 + usize::from(range)) * 256 + usize::from(distance)
    }

    /// [`rgb_to_hsv`] by table.
    #[inline]
    fn rgb_to_hsv(&self, [r, g, b]: [u8; 3]) -> [u8; 3] {
        let (maxc, minc) = (r.max(g).max(b), r.min(g).min(b));
        if maxc == minc {
            return [0, 0, maxc];
        }
        let range = maxc - minc;
        // Pillow's order: red if it is largest, else green, else blue; then the other two
        // in the order its formula takes them. Picked by index rather than by branches,
        // which a photo's pixels would mispredict half the time.
        let branch = usize::from(r != maxc) * (1 + usize::from(g != maxc));
        let (x, y) = ([g, r, r][branch], [b, b, g][branch]);
        let smallest = usize::from(x != minc);
        let other = [y, x][smallest];
        let h = self.hue[Self::hue_at(branch, smallest, range, maxc - other)];
        let s = self.saturation[usize::from(maxc) * 256 + usize::from(range)];
        [h, s, maxc]
    }

    /// [`hsv_to_rgb`] with the divisions by table.
    #[inline]
    fn hsv_to_rgb(&self, [h, s, v]: [u8; 3]) -> [u8; 3] {
        if s == 0 {
            return [v, v, v];
        }
        let (i, f) = self.sixth[usize::from(h)];
        let fs = self.fraction[usize::from(s)];
        mix(i, f, fs, v)
    }
}

/// Pillow's `rgb2hsv_row`.
fn rgb_to_hsv([r, g, b]: [u8; 3]) -> [u8; 3] {
    let (maxc, minc) = (r.max(g).max(b), r.min(g).min(b));
    if maxc == minc {
        return [0, 0, maxc];
    }
    let cr = f32::from(maxc - minc);
    let s = cr / f32::from(maxc);
    let rc = f32::from(maxc - r) / cr;
    let gc = f32::from(maxc - g) / cr;
    let bc = f32::from(maxc - b) / cr;
    // `h` is a C float; the constants are doubles, so the sums are taken in double.
    let h: f32 = if r == maxc {
        bc - gc
    } else if g == maxc {
        (2.0 + f64::from(rc) - f64::from(bc)) as f32
    } else {
        (4.0 + f64::from(gc) - f64::from(rc)) as f32
    };
    // `fmod(h / 6.0 + 1.0, 1.0)`: the sum lies in [0, 2), so the remainder is the sum, or
    // the sum less one (exact there), without libm's `fmod`.
    let turn = f64::from(h) / 6.0 + 1.0;
    let h = (if turn >= 1.0 { turn - 1.0 } else { turn }) as f32;
    // `CLIP8((int)(x * 255.0))`.
    let byte = |x: f32| ((f64::from(x) * 255.0) as i32).clamp(0, 255) as u8;
    [byte(h), byte(s), maxc]
}

/// Pillow's `hsv2rgb`, the reference [`Tables::hsv_to_rgb`] is tested against.
#[cfg(test)]
fn hsv_to_rgb([h, s, v]: [u8; 3]) -> [u8; 3] {
    if s == 0 {
        return [v, v, v];
    }
    let sixths = f64::from(h) * 6.0 / 255.0;
    // `floor` of a non-negative value: its truncation.
    let i = sixths as i32;
    let f = (sixths - f64::from(i as f32)) as f32;
    let fs = (f64::from(s) / 255.0) as f32;
    mix((i % 6) as u8, f, fs, v)
}

/// The channels of sixth `i` of the circle, at fraction `f` into it, saturation fraction `fs`
/// and value `v` (the second half of Pillow's `hsv2rgb`).
#[inline]
fn mix(i: u8, f: f32, fs: f32, v: u8) -> [u8; 3] {
    let vf = f64::from(v);
    // `round` (half away from zero; the values are not negative), then `CLIP8`; without
    // libm's `round`, a call per value on the baseline x86-64 target.
    let byte = |x: f64| {
        let t = x as i32;
        (t + i32::from(x - f64::from(t) >= 0.5)).clamp(0, 255) as u8
    };
    let p = byte(vf * (1.0 - f64::from(fs)));
    // `fs * f` is a product of two floats, taken in float.
    let q = byte(vf * (1.0 - f64::from(fs * f)));
    let t = byte(vf * (1.0 - f64::from(fs) * (1.0 - f64::from(f))));
    // Which of `v, p, q, t` each channel takes, per sixth (Pillow's `switch (i % 6)`).
    const TAKES: [[usize; 3]; 6] = [
        [0, 3, 1],
        [2, 0, 1],
        [1, 0, 3],
        [1, 2, 0],
        [3, 1, 0],
        [0, 1, 2],
    ];
    let values = [v, p, q, t];
    TAKES[usize::from(i)].map(|k| values[k])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_give_the_scalar_conversions_for_every_colour() {
        let t = Tables::get();
        for r in 0..=255u8 {
            for g in 0..=255u8 {
                for b in 0..=255u8 {
                    let hsv = rgb_to_hsv([r, g, b]);
                    assert_eq!(t.rgb_to_hsv([r, g, b]), hsv, "rgb {r} {g} {b}");
                    // The way back from every reachable HSV and from the raw bytes too.
                    assert_eq!(
                        t.hsv_to_rgb([r, g, b]),
                        hsv_to_rgb([r, g, b]),
                        "hsv {r} {g} {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn greys_keep_their_value_and_a_whole_turn_is_the_round_trip() {
        for v in [0u8, 1, 128, 255] {
            assert_eq!(rgb_to_hsv([v, v, v]), [0, 0, v]);
        }
        // A shift of 0 still passes each pixel through Pillow's byte HSV (lossy).
        let mut px = [200u8, 40, 90];
        adjust_hue(&mut px, 0.0);
        assert_eq!(px, hsv_to_rgb(rgb_to_hsv([200, 40, 90])));
    }

    #[test]
    fn primaries_land_on_pillows_hue_bytes() {
        // Pillow: red 0, green 85, blue 170 (a third and two thirds of 255, truncated).
        assert_eq!(rgb_to_hsv([255, 0, 0]), [0, 255, 255]);
        assert_eq!(rgb_to_hsv([0, 255, 0]), [85, 255, 255]);
        assert_eq!(rgb_to_hsv([0, 0, 255]), [170, 255, 255]);
        assert_eq!(hsv_to_rgb([85, 255, 255]), [0, 255, 0]);
    }

    #[test]
    fn a_negative_shift_wraps_as_numpys_uint8() {
        // int(-0.1 * 255) = -25, 231 as uint8: red (hue 0) moves to hue 231.
        let mut px = [255u8, 0, 0];
        adjust_hue(&mut px, -0.1);
        assert_eq!(px, hsv_to_rgb([231, 255, 255]));
    }
}
