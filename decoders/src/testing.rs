//! Small in-memory images for doctests and unit tests (not part of the stable API).

/// A 16x8 baseline JPEG (4:2:0) with a colour gradient, encoded by the image crate.
pub fn tiny_jpeg() -> Vec<u8> {
    gradient_jpeg(16, 8, 90)
}

/// A `width`x`height` RGB gradient encoded as a baseline JPEG at `quality`.
pub fn gradient_jpeg(width: u32, height: u32, quality: u8) -> Vec<u8> {
    let rgb = gradient_rgb(width, height);
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality)
        .encode(&rgb, width, height, image::ExtendedColorType::Rgb8)
        .expect("encoding an in-memory gradient cannot fail");
    out
}

/// A smooth RGB gradient, interleaved.
pub fn gradient_rgb(width: u32, height: u32) -> Vec<u8> {
    let mut rgb = Vec::with_capacity(width as usize * height as usize * 3);
    for y in 0..height {
        for x in 0..width {
            rgb.push((x * 255 / width.max(2).saturating_sub(1).max(1)).min(255) as u8);
            rgb.push((y * 255 / height.max(2).saturating_sub(1).max(1)).min(255) as u8);
            rgb.push(((x + y) * 7 % 256) as u8);
        }
    }
    rgb
}

/// Peak signal-to-noise ratio of two 8-bit images in dB (infinite when identical).
pub fn psnr(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len(), "images of different sizes");
    let mse = a
        .iter()
        .zip(b)
        .map(|(x, y)| (f64::from(*x) - f64::from(*y)).powi(2))
        .sum::<f64>()
        / a.len() as f64;
    if mse == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (255.0f64 * 255.0 / mse).log10()
    }
}
