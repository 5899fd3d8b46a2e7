//! Colour ops on an interleaved RGB8 image, with the arithmetic of torchvision's v2 tensor
//! kernels on uint8: products in f32, clamped to `[0, 255]` and truncated back to bytes, as
//! `tensor.to(torch.uint8)` truncates.

/// `gray = floor(0.2989 r + 0.587 g + 0.114 b)` in f32, torchvision's `rgb_to_grayscale`
/// (the same value whether the caller keeps it as a float or converts it to a byte).
#[inline]
fn luma(p: &[u8]) -> f32 {
    let l = f32::from(p[0]) * 0.2989 + f32::from(p[1]) * 0.587 + f32::from(p[2]) * 0.114;
    l.floor()
}

/// torchvision's `.clamp_(0, 255).to(torch.uint8)`.
#[inline]
fn to_u8(x: f32) -> u8 {
    x.clamp(0.0, 255.0) as u8
}

/// `_blend(image, other, ratio)`: `image * ratio + other * (1 - ratio)`, the weights as f32.
#[inline]
fn blend(x: u8, other: f32, ratio: f32, rest: f32) -> u8 {
    to_u8(f32::from(x) * ratio + other * rest)
}

fn weights(ratio: f64) -> (f32, f32) {
    (ratio as f32, (1.0 - ratio) as f32)
}

/// `adjust_brightness(factor)`: `x * factor`.
pub(crate) fn brightness(rgb: &mut [u8], factor: f64) {
    let f = factor as f32;
    let table: [u8; 256] = std::array::from_fn(|v| to_u8(v as f32 * f));
    for v in rgb {
        *v = table[usize::from(*v)];
    }
}

/// `adjust_saturation(factor)`: blend with the pixel's own grey.
pub(crate) fn saturation(rgb: &mut [u8], factor: f64) {
    let (r, rest) = weights(factor);
    for p in rgb.chunks_exact_mut(3) {
        let g = luma(p);
        for v in p {
            *v = blend(*v, g, r, rest);
        }
    }
}

/// `adjust_contrast(factor)`: blend with the mean grey of the whole image.
pub(crate) fn contrast(rgb: &mut [u8], factor: f64) {
    let pixels = rgb.len() / 3;
    if pixels == 0 {
        return;
    }
    // Exact integer sum (torch sums the floored greys in f32, exact below 2^24).
    let sum: u64 = rgb.chunks_exact(3).map(|p| luma(p) as u64).sum();
    let mean = sum as f32 / pixels as f32;
    let (r, rest) = weights(factor);
    let other = mean * rest;
    let table: [u8; 256] = std::array::from_fn(|v| to_u8(v as f32 * r + other));
    for v in rgb {
        *v = table[usize::from(*v)];
    }
}

/// `rgb_to_grayscale(num_output_channels=3)`: every channel becomes the floored grey.
pub(crate) fn grayscale(rgb: &mut [u8]) {
    for p in rgb.chunks_exact_mut(3) {
        let g = luma(p) as u8;
        p.fill(g);
    }
}

/// `invert`: `255 - x`.
pub(crate) fn invert(rgb: &mut [u8]) {
    for v in rgb {
        *v = !*v;
    }
}

/// `posterize(bits)`: keep the top `bits` bits.
pub(crate) fn posterize(rgb: &mut [u8], bits: u8) {
    if bits >= 8 {
        return;
    }
    let mask = !(0xFFu8 >> bits);
    for v in rgb {
        *v &= mask;
    }
}

/// `solarize(threshold)`: invert every value `>= threshold` (compared in f32, as torch
/// compares a uint8 tensor with a float).
pub(crate) fn solarize(rgb: &mut [u8], threshold: f64) {
    let threshold = threshold as f32;
    for v in rgb {
        if f32::from(*v) >= threshold {
            *v = !*v;
        }
    }
}

/// `autocontrast`: stretch each channel from its own `[min, max]` to `[0, 255]` (a channel with
/// one value is left as it is).
pub(crate) fn autocontrast(rgb: &mut [u8]) {
    let (mut lo, mut hi) = ([255u8; 3], [0u8; 3]);
    for p in rgb.chunks_exact(3) {
        for c in 0..3 {
            lo[c] = lo[c].min(p[c]);
            hi[c] = hi[c].max(p[c]);
        }
    }
    let tables: [[u8; 256]; 3] = std::array::from_fn(|c| {
        let (min, max) = (f32::from(lo[c]), f32::from(hi[c]));
        let (min, inv_scale) = if min == max {
            (0.0, 1.0)
        } else {
            (min, (max - min) * (1.0 / 255.0))
        };
        std::array::from_fn(|v| to_u8((v as f32 - min) / inv_scale))
    });
    for p in rgb.chunks_exact_mut(3) {
        for c in 0..3 {
            p[c] = tables[c][usize::from(p[c])];
        }
    }
}

/// `equalize`: per-channel histogram equalization with Pillow's lookup table (which
/// torchvision's tensor kernel reproduces); a channel whose non-maximal pixels are fewer than
/// 255 is left as it is.
pub(crate) fn equalize(rgb: &mut [u8]) {
    let mut hist = [[0u32; 256]; 3];
    for p in rgb.chunks_exact(3) {
        for c in 0..3 {
            hist[c][usize::from(p[c])] += 1;
        }
    }
    let pixels = (rgb.len() / 3) as u32;
    let tables: [Option<[u8; 256]>; 3] = std::array::from_fn(|c| {
        let h = &hist[c];
        // The last non-empty bin holds the channel's largest value.
        let last = h.iter().rposition(|&n| n > 0)?;
        let step = (pixels - h[last]) / 255;
        if step == 0 {
            return None;
        }
        let mut lut = [0u8; 256];
        let mut cum = 0u32;
        for v in 1..256 {
            cum += h[v - 1];
            lut[v] = ((cum + step / 2) / step).min(255) as u8;
        }
        Some(lut)
    });
    for p in rgb.chunks_exact_mut(3) {
        for (c, table) in tables.iter().enumerate() {
            if let Some(t) = table {
                p[c] = t[usize::from(p[c])];
            }
        }
    }
}

/// `adjust_hue(factor)`: rotate the hue by `factor` turns, through torchvision's HSV
/// conversion in f32 (`factor` in `[-0.5, 0.5]`).
pub(crate) fn hue(rgb: &mut [u8], factor: f64) {
    let shift = factor as f32;
    for p in rgb.chunks_exact_mut(3) {
        let [r, g, b] = [p[0], p[1], p[2]].map(|v| f32::from(v) * (1.0 / 255.0));
        let out = hsv_to_rgb(rgb_to_hsv(r, g, b, shift));
        for (v, x) in p.iter_mut().zip(out) {
            // `to_dtype(uint8, scale=True)`: `x * (255 + 1 - 1e-3)`, truncated.
            *v = (x * 255.999) as u8;
        }
    }
}

/// torchvision's `_rgb_to_hsv`, with the hue shifted by `shift` (mod 1) at the end.
fn rgb_to_hsv(r: f32, g: f32, b: f32, shift: f32) -> [f32; 3] {
    let maxc = r.max(g).max(b);
    let minc = r.min(g).min(b);
    let eqc = maxc == minc;
    let range = maxc - minc;
    let s = range / if eqc { 1.0 } else { maxc };
    let div = if eqc { 1.0 } else { range };
    let (rc, gc, bc) = ((maxc - r) / div, (maxc - g) / div, (maxc - b) / div);
    let neq_r = maxc != r;
    let eq_g = maxc == g;
    let hg = if eq_g && neq_r { rc + 2.0 - bc } else { 0.0 };
    let hr = if neq_r { 0.0 } else { bc - gc };
    let hb = if neq_r && !eq_g { gc + 4.0 - rc } else { 0.0 };
    let h = ((hr + hg + hb) * (1.0 / 6.0) + 1.0) % 1.0;
    // `h.add_(factor).remainder_(1.0)`: Python's modulo, non-negative.
    let h = (h + shift).rem_euclid(1.0);
    [h, s, maxc]
}

/// torchvision's `_hsv_to_rgb`.
fn hsv_to_rgb([h, s, v]: [f32; 3]) -> [f32; 3] {
    let h6 = h * 6.0;
    let i = h6.floor();
    let f = h6 - i;
    let i = (i as i32).rem_euclid(6);
    let sxf = s * f;
    let one_minus_s = 1.0 - s;
    let q = ((1.0 - sxf) * v).clamp(0.0, 1.0);
    let t = ((sxf + one_minus_s) * v).clamp(0.0, 1.0);
    let p = (one_minus_s * v).clamp(0.0, 1.0);
    match i {
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
    fn brightness_and_contrast_of_one_are_identity_and_zero_is_black_or_grey() {
        let img: Vec<u8> = (0..=255u8).flat_map(|v| [v, 255 - v, v / 2]).collect();
        let mut a = img.clone();
        brightness(&mut a, 1.0);
        assert_eq!(a, img);
        brightness(&mut a, 0.0);
        assert!(a.iter().all(|&v| v == 0));
        let mut c = img.clone();
        contrast(&mut c, 1.0);
        assert_eq!(c, img);
        contrast(&mut c, 0.0);
        assert!(c.windows(2).all(|w| w[0] == w[1]), "a flat grey image");
    }

    #[test]
    fn hue_shift_by_a_third_turn_rotates_primaries() {
        let mut red = vec![255u8, 0, 0];
        hue(&mut red, 1.0 / 3.0);
        assert_eq!(red, [0, 255, 0]);
        let mut grey = vec![77u8, 77, 77];
        hue(&mut grey, 0.25);
        assert_eq!(grey, [77, 77, 77]);
    }

    #[test]
    fn equalize_spreads_a_two_value_image_and_leaves_a_flat_one() {
        let mut flat = vec![9u8; 300];
        equalize(&mut flat);
        assert!(flat.iter().all(|&v| v == 9));
        let mut two: Vec<u8> = (0..3600).map(|i| if i < 1800 { 10 } else { 20 }).collect();
        equalize(&mut two);
        assert_eq!((two[0], two[3599]), (0, 255));
    }

    #[test]
    fn solarize_posterize_invert_autocontrast_do_what_they_say() {
        let mut v = vec![10u8, 128, 200];
        solarize(&mut v, 128.0);
        assert_eq!(v, [10, 127, 55]);
        posterize(&mut v, 2);
        assert_eq!(v, [0, 64, 0]);
        invert(&mut v);
        assert_eq!(v, [255, 191, 255]);
        let mut s: Vec<u8> = [50u8, 60, 70, 150, 160, 170].to_vec();
        autocontrast(&mut s);
        // torchvision gives 254 too: 100 / (100 * (1/255)) is 254.99998 in f32, truncated.
        assert_eq!(s, [0, 0, 0, 254, 254, 254]);
    }
}
