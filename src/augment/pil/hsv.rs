//! torchvision's `adjust_hue` of a PIL image: `img.convert("HSV")`, the hue byte shifted with
//! NumPy's uint8 wrap-around, and `convert("RGB")` back. Pillow's HSV is three bytes per pixel,
//! so this differs from the tensor kernel (float HSV, [`super::super::colour`]) by up to a
//! dozen levels; each conversion here is Pillow's own arithmetic: its float and double
//! widths, its truncations and its rounding.

/// `adjust_hue(img, factor)` on an RGB8 image, in place.
pub(crate) fn adjust_hue(rgb: &mut [u8], factor: f64) {
    // `np.int32(hue_factor * 255).astype(np.uint8)`: truncated toward zero, then modulo 256.
    let shift = (factor * 255.0) as i32 as u8;
    for px in rgb.chunks_exact_mut(3) {
        let [h, s, v] = rgb_to_hsv([px[0], px[1], px[2]]);
        px.copy_from_slice(&hsv_to_rgb([h.wrapping_add(shift), s, v]));
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
    let h = ((f64::from(h) / 6.0 + 1.0) % 1.0) as f32;
    // `CLIP8((int)(x * 255.0))`.
    let byte = |x: f32| ((f64::from(x) * 255.0) as i32).clamp(0, 255) as u8;
    [byte(h), byte(s), maxc]
}

/// Pillow's `hsv2rgb`.
fn hsv_to_rgb([h, s, v]: [u8; 3]) -> [u8; 3] {
    if s == 0 {
        return [v, v, v];
    }
    let sixths = f64::from(h) * 6.0 / 255.0;
    let i = sixths.floor() as i32;
    let f = (sixths - f64::from(i as f32)) as f32;
    let fs = (f64::from(s) / 255.0) as f32;
    let vf = f64::from(v);
    // `round` (half away from zero), then `CLIP8`.
    let byte = |x: f64| (x.round() as i32).clamp(0, 255) as u8;
    let p = byte(vf * (1.0 - f64::from(fs)));
    // `fs * f` is a product of two floats, taken in float.
    let q = byte(vf * (1.0 - f64::from(fs * f)));
    let t = byte(vf * (1.0 - f64::from(fs) * (1.0 - f64::from(f))));
    match i % 6 {
        0 => [v, t, p],
        1 => [q, v, p],
        2 => [p, v, t],
        3 => [p, q, v],
        4 => [t, p, v],
        _ => [v, p, q],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
