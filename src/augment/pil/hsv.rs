//! torchvision's `adjust_hue` of a PIL image: `img.convert("HSV")`, the hue byte shifted with
//! NumPy's uint8 wrap-around, and `convert("RGB")` back. Pillow's HSV is three bytes per pixel,
//! so this differs from the tensor kernel (float HSV, [`super::super::colour`]) by up to a
//! dozen levels; each conversion here is Pillow's own arithmetic: its float and double
//! widths, its truncations and its rounding.
//!
//! Pillow converts a pixel at a time through branches; here each step runs on a block of
//! pixels in lanes (every branch computed, the right one selected), which the compiler
//! vectorizes for the widest of AVX-512, AVX2 or the baseline the CPU runs. Each lane's
//! arithmetic is the scalar form's, operation for operation (no fused multiply-add), so every
//! width gives Pillow's bytes: a test holds the lanes equal to the scalar forms below for every
//! colour.

/// Pixels converted together: three planes of this many bytes in, three out.
const LANES: usize = 64;

/// `adjust_hue(img, factor)` on an RGB8 image, in place.
pub(crate) fn adjust_hue(rgb: &mut [u8], factor: f64) {
    // `np.int32(hue_factor * 255).astype(np.uint8)`: truncated toward zero, then modulo 256.
    let shift = (factor * 255.0) as i32 as u8;
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F (detected just above).
        return unsafe { adjust_hue_avx512(rgb, shift) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (detected just above).
        return unsafe { adjust_hue_avx2(rgb, shift) };
    }
    adjust_hue_any(rgb, shift);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn adjust_hue_avx512(rgb: &mut [u8], shift: u8) {
    adjust_hue_any(rgb, shift);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn adjust_hue_avx2(rgb: &mut [u8], shift: u8) {
    adjust_hue_any(rgb, shift);
}

/// Three planes of [`LANES`] bytes.
type Planes = [[u8; LANES]; 3];

#[inline(always)]
fn adjust_hue_any(rgb: &mut [u8], shift: u8) {
    let mut planes: Planes = [[0; LANES]; 3];
    for block in rgb.chunks_mut(3 * LANES) {
        let n = block.len() / 3;
        // Past the image's end in the last block, black: converted and dropped.
        for (k, px) in block.chunks_exact(3).enumerate() {
            planes[0][k] = px[0];
            planes[1][k] = px[1];
            planes[2][k] = px[2];
        }
        if n < LANES {
            for plane in &mut planes {
                plane[n..].fill(0);
            }
        }
        let mut hsv = to_hsv(&planes);
        for h in &mut hsv[0] {
            *h = h.wrapping_add(shift);
        }
        let out = to_rgb(&hsv);
        for (k, px) in block.chunks_exact_mut(3).enumerate() {
            px.copy_from_slice(&[out[0][k], out[1][k], out[2][k]]);
        }
    }
}

/// Pillow's `rgb2hsv_row` ([`rgb_to_hsv`]) on each lane.
#[inline(always)]
fn to_hsv([r, g, b]: &Planes) -> Planes {
    let mut hsv: Planes = [[0; LANES]; 3];
    for k in 0..LANES {
        let (r, g, b) = (i32::from(r[k]), i32::from(g[k]), i32::from(b[k]));
        let (maxc, minc) = (r.max(g).max(b), r.min(g).min(b));
        let grey = maxc == minc;
        // A grey's divisions are dropped below; made finite so no lane divides by zero.
        let cr = (maxc - minc).max(1) as f32;
        let s = cr / maxc.max(1) as f32;
        let rc = (maxc - r) as f32 / cr;
        let gc = (maxc - g) as f32 / cr;
        let bc = (maxc - b) as f32 / cr;
        let h_red = bc - gc;
        let h_green = (2.0 + f64::from(rc) - f64::from(bc)) as f32;
        let h_blue = (4.0 + f64::from(gc) - f64::from(rc)) as f32;
        let h = if r == maxc {
            h_red
        } else if g == maxc {
            h_green
        } else {
            h_blue
        };
        // Pillow divides by 6.0; the product with the reciprocal rounds otherwise in a few
        // lanes, but never into another byte (the test below runs every colour).
        let turn = f64::from(h) * (1.0 / 6.0) + 1.0;
        let h = (if turn >= 1.0 { turn - 1.0 } else { turn }) as f32;
        hsv[0][k] = if grey { 0 } else { byte(h) };
        hsv[1][k] = if grey { 0 } else { byte(s) };
        hsv[2][k] = maxc as u8;
    }
    hsv
}

/// Pillow's `hsv2rgb` ([`hsv_to_rgb`]) on each lane.
#[inline(always)]
fn to_rgb([h, s, v]: &Planes) -> Planes {
    let mut rgb: Planes = [[0; LANES]; 3];
    for k in 0..LANES {
        // Pillow's divisions by 255 as products (cheaper in lanes): the sixth and its
        // fraction, and the saturation's fraction, are the same for each of the 256 bytes
        // (the test below holds the lanes to the divisions for every triple).
        let sixths = f64::from(h[k]) * (6.0 / 255.0);
        let i = truncate(sixths);
        let f = (sixths - f64::from(i as f32)) as f32;
        // A saturation of 0 gives `v` in each channel below, as Pillow's early return does.
        let fs = (f64::from(s[k]) * (1.0 / 255.0)) as f32;
        let [p, q, t] = mix(f, fs, v[k]);
        let v = i32::from(v[k]);
        // Pillow's `switch (i % 6)`: which of `v, p, q, t` each channel takes.
        let sixth = i % 6;
        let pick = |takes: [i32; 6]| {
            let mut out = takes[0];
            for (at, &x) in takes.iter().enumerate().skip(1) {
                out = if sixth == at as i32 { x } else { out };
            }
            out as u8
        };
        rgb[0][k] = pick([v, q, p, p, t, v]);
        rgb[1][k] = pick([t, v, v, q, p, p]);
        rgb[2][k] = pick([p, p, t, v, v, q]);
    }
    rgb
}

/// `CLIP8((int)(x * 255.0))`, the product in double.
#[inline(always)]
fn byte(x: f32) -> u8 {
    truncate(f64::from(x) * 255.0).clamp(0, 255) as u8
}

/// C's `(int)x` for `0 <= x < 2^31`, which every value here is: `x as i32` in lanes. (Rust's
/// `as` saturates, which compilers do not vectorize: a scalar conversion per lane.) A whole
/// number below 2^52 added to 2^52 sits exactly in the sum's low mantissa bits.
#[inline(always)]
fn truncate(x: f64) -> i32 {
    const TWO_52: f64 = 4_503_599_627_370_496.0;
    (x.trunc() + TWO_52).to_bits() as u32 as i32
}

/// The values `p, q, t` of Pillow's `hsv2rgb` at fraction `f` into the sixth, saturation
/// fraction `fs` and value `v`.
#[inline(always)]
fn mix(f: f32, fs: f32, v: u8) -> [i32; 3] {
    let vf = f64::from(v);
    // `round` (half away from zero; the values are not negative), then `CLIP8`; without
    // libm's `round`, a call per value on the baseline x86-64 target.
    let round = |x: f64| {
        let t = truncate(x);
        (t + i32::from(x - f64::from(t) >= 0.5)).clamp(0, 255)
    };
    let p = round(vf * (1.0 - f64::from(fs)));
    // `fs * f` is a product of two floats, taken in float.
    let q = round(vf * (1.0 - f64::from(fs * f)));
    let t = round(vf * (1.0 - f64::from(fs) * (1.0 - f64::from(f))));
    [p, q, t]
}

/// Pillow's `rgb2hsv_row`, a pixel at a time: the reference the lanes are tested against.
#[cfg(test)]
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
    [byte(h), byte(s), maxc]
}

/// Pillow's `hsv2rgb`, a pixel at a time: the reference the lanes are tested against.
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
    let [p, q, t] = mix(f, fs, v).map(|x| x as u8);
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

    /// Every one of the 2^24 byte triples, a block of lanes at a time, as three planes.
    fn every_triple() -> impl Iterator<Item = Planes> {
        (0..(1usize << 24)).step_by(LANES).map(|start| {
            [16, 8, 0].map(|shift| std::array::from_fn(|k| ((start + k) >> shift) as u8))
        })
    }

    fn lane(planes: &Planes, k: usize) -> [u8; 3] {
        [planes[0][k], planes[1][k], planes[2][k]]
    }

    #[test]
    fn the_lanes_give_pillows_scalar_conversions_for_every_colour() {
        for planes in every_triple() {
            let (hsv, rgb) = (to_hsv(&planes), to_rgb(&planes));
            for k in 0..LANES {
                let c = lane(&planes, k);
                assert_eq!(lane(&hsv, k), rgb_to_hsv(c), "rgb {c:?}");
                // The way back from every triple, reachable from a colour or not.
                assert_eq!(lane(&rgb, k), hsv_to_rgb(c), "hsv {c:?}");
            }
        }
    }

    /// A width's name and `adjust_hue_any` compiled for it.
    type Width = (&'static str, fn(&mut [u8], u8));

    /// Each width this CPU runs.
    fn widths() -> Vec<Width> {
        let mut widths: Vec<Width> = vec![("baseline", adjust_hue_any)];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2 (detected just above).
                widths.push(("avx2", |rgb, shift| unsafe { adjust_hue_avx2(rgb, shift) }));
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has AVX-512F (detected just above).
                widths.push(("avx512", |rgb, shift| unsafe {
                    adjust_hue_avx512(rgb, shift)
                }));
            }
        }
        widths
    }

    #[test]
    fn every_width_shifts_every_colour_as_pillow_does() {
        // All 2^24 colours as one image, and 5 pixels more: the last block is partial.
        let image: Vec<u8> = (0..(1u32 << 24) + 5)
            .flat_map(|c| [(c >> 16) as u8, (c >> 8) as u8, c as u8])
            .collect();
        for factor in [-0.1, 0.33] {
            let shift = (factor * 255.0) as i32 as u8;
            let want: Vec<u8> = image
                .chunks_exact(3)
                .flat_map(|px| {
                    let [h, s, v] = rgb_to_hsv([px[0], px[1], px[2]]);
                    hsv_to_rgb([h.wrapping_add(shift), s, v])
                })
                .collect();
            for (name, width) in widths() {
                let mut got = image.clone();
                width(&mut got, shift);
                assert!(got == want, "{name}, factor {factor}");
            }
            // And through the dispatch.
            let mut got = image.clone();
            adjust_hue(&mut got, factor);
            assert!(got == want, "dispatched, factor {factor}");
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
