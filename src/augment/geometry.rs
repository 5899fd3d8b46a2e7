//! Crop windows with torchvision's exact arithmetic (Python's round-half-to-even included).

use crate::rng::CounterRng;

/// A window of the decoded image to resample to the output size, in source pixels.
///
/// `view == true`: the window is an integer rectangle cut out first, so resampling sees only
/// pixels inside it (torchvision's crop-then-resize, RandomResizedCrop). `view == false`: the
/// window is fractional and resampling may read pixels around it, which is exactly a resize of
/// the whole image followed by a crop (torchvision's Resize then CenterCrop).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CropBox {
    /// Left edge, in source pixels.
    pub left: f64,
    /// Top edge, in source pixels.
    pub top: f64,
    /// Width, in source pixels.
    pub width: f64,
    /// Height, in source pixels.
    pub height: f64,
    /// Whether the window is cut out before resampling (integer box) or resampled in place.
    pub view: bool,
}

impl CropBox {
    /// The media engine's name for the same window (the decoders' geometry vocabulary).
    pub fn window(&self) -> hpuload_decoders::jpeg::Window {
        hpuload_decoders::jpeg::Window {
            left: self.left,
            top: self.top,
            width: self.width,
            height: self.height,
        }
    }

    /// The integer region of a `width` x `height` image that the engine must decode for this
    /// crop at `out_w` output columns: the crop itself for an integer window; for a fractional
    /// window (resize-then-crop), the window plus the resampling filter's reach on each side,
    /// so edge pixels see the same neighbours as a full decode.
    pub fn covering_region(
        &self,
        width: u32,
        height: u32,
        out_w: u32,
    ) -> hpuload_decoders::jpeg::Region {
        let margin = if self.view {
            0.0
        } else {
            (self.width / f64::from(out_w)).max(1.0).ceil() + 1.0
        };
        let x0 = (self.left - margin).floor().max(0.0) as u32;
        let y0 = (self.top - margin).floor().max(0.0) as u32;
        let x1 = ((self.left + self.width + margin).ceil() as u32)
            .min(width)
            .max(x0 + 1);
        let y1 = ((self.top + self.height + margin).ceil() as u32)
            .min(height)
            .max(y0 + 1);
        hpuload_decoders::jpeg::Region {
            x: x0,
            y: y0,
            width: x1 - x0,
            height: y1 - y0,
        }
    }

    /// The whole `width`x`height` image.
    pub fn full(width: u32, height: u32) -> Self {
        Self {
            left: 0.0,
            top: 0.0,
            width: width.into(),
            height: height.into(),
            view: true,
        }
    }

    /// An integer rectangle, cut out before resampling.
    pub fn rect(left: u32, top: u32, width: u32, height: u32) -> Self {
        Self {
            left: left.into(),
            top: top.into(),
            width: width.into(),
            height: height.into(),
            view: true,
        }
    }
}

/// Python 3's `round()`: halves go to the even neighbour.
pub(crate) fn round_half_even(x: f64) -> f64 {
    x.round_ties_even()
}

/// `torchvision.transforms.RandomResizedCrop.get_params`: up to 10 random tries, then the
/// central-crop fallback clamped to the ratio range.
pub(crate) fn random_resized_crop(
    width: u32,
    height: u32,
    scale: [f64; 2],
    ratio: [f64; 2],
    rng: &mut CounterRng,
) -> CropBox {
    let (wf, hf) = (f64::from(width), f64::from(height));
    let area = wf * hf;
    let (log_lo, log_hi) = (ratio[0].ln(), ratio[1].ln());
    for _ in 0..10 {
        let target_area = area * rng.uniform_in(scale[0], scale[1]);
        let aspect = rng.uniform_in(log_lo, log_hi).exp();
        let w = round_half_even((target_area * aspect).sqrt());
        let h = round_half_even((target_area / aspect).sqrt());
        if 0.0 < w && w <= wf && 0.0 < h && h <= hf {
            let (w, h) = (w as u32, h as u32);
            let top = rng.below(u64::from(height - h) + 1) as u32;
            let left = rng.below(u64::from(width - w) + 1) as u32;
            return CropBox::rect(left, top, w, h);
        }
    }
    let in_ratio = wf / hf;
    let (w, h) = if in_ratio < ratio[0] {
        (
            width,
            (round_half_even(wf / ratio[0]) as u32).clamp(1, height),
        )
    } else if in_ratio > ratio[1] {
        (
            (round_half_even(hf * ratio[1]) as u32).clamp(1, width),
            height,
        )
    } else {
        (width, height)
    };
    CropBox::rect((width - w) / 2, (height - h) / 2, w, h)
}

/// torchvision's `Resize(short)` output size: the shorter side becomes `short`, the longer side
/// `int(short * long / short_side)` (truncated).
pub(crate) fn resized_size(width: u32, height: u32, short: u32) -> (u32, u32) {
    let (w, h) = (u64::from(width), u64::from(height));
    let s = u64::from(short);
    if w <= h {
        (short, ((s * h) / w).max(1) as u32)
    } else {
        (((s * w) / h).max(1) as u32, short)
    }
}

/// `Resize(short)` (optional) then `CenterCrop(out)`, as a window of the original image.
pub(crate) fn resize_center_crop(
    width: u32,
    height: u32,
    resize_short: Option<u32>,
    out: (u32, u32),
) -> Result<CropBox, String> {
    let (rw, rh) = match resize_short {
        Some(s) => resized_size(width, height, s),
        None => (width, height),
    };
    let (oh, ow) = out;
    if ow > rw || oh > rh {
        return Err(format!(
            "the {rw}x{rh} image is smaller than the {ow}x{oh} center crop"
        ));
    }
    let top = round_half_even(f64::from(rh - oh) / 2.0);
    let left = round_half_even(f64::from(rw - ow) / 2.0);
    let (sx, sy) = (
        f64::from(width) / f64::from(rw),
        f64::from(height) / f64::from(rh),
    );
    if resize_short.is_none() {
        return Ok(CropBox::rect(left as u32, top as u32, ow, oh));
    }
    Ok(CropBox {
        left: left * sx,
        top: top * sy,
        width: f64::from(ow) * sx,
        height: f64::from(oh) * sy,
        view: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    #[test]
    fn round_half_even_matches_python() {
        for (x, want) in [
            (0.5, 0.0),
            (1.5, 2.0),
            (2.5, 2.0),
            (3.5, 4.0),
            (2.4, 2.0),
            (2.6, 3.0),
            (-0.5, 0.0),
            (7.0, 7.0),
        ] {
            assert_eq!(round_half_even(x), want, "round({x})");
        }
    }

    #[test]
    fn rrc_fallback_clamps_extreme_aspect_ratios_like_torchvision() {
        // Scale range impossible to satisfy in 10 tries -> fallback. 1000x100: in_ratio 10 > 4/3,
        // so h = 100, w = round(100 * 4/3) = 133, centered: left = (1000 - 133) // 2 = 433.
        let mut rng = CounterRng::new(0, 0, 0, Stream::Crop);
        let b = random_resized_crop(1000, 100, [1.0, 1.0], [3.0 / 4.0, 4.0 / 3.0], &mut rng);
        assert_eq!(
            (b.left, b.top, b.width, b.height),
            (433.0, 0.0, 133.0, 100.0)
        );
        // 100x1000: in_ratio 0.1 < 3/4: w = 100, h = round(100 / 0.75) = 133, top = 433.
        let b = random_resized_crop(100, 1000, [1.0, 1.0], [3.0 / 4.0, 4.0 / 3.0], &mut rng);
        assert_eq!(
            (b.left, b.top, b.width, b.height),
            (0.0, 433.0, 100.0, 133.0)
        );
    }

    #[test]
    fn rrc_windows_respect_scale_ratio_and_bounds() {
        for i in 0..2000u64 {
            let mut rng = CounterRng::new(9, 0, i, Stream::Crop);
            let (w, h) = (200 + (i as u32 * 37) % 400, 150 + (i as u32 * 53) % 400);
            let b = random_resized_crop(w, h, [0.08, 1.0], [0.75, 4.0 / 3.0], &mut rng);
            assert!(
                b.view
                    && b.left + b.width <= w as f64
                    && b.top + b.height <= h as f64
                    && b.width >= 1.0
                    && b.height >= 1.0
            );
            let frac = b.width * b.height / (w as f64 * h as f64);
            assert!((0.07..=1.0).contains(&frac), "area fraction {frac}");
        }
    }

    #[test]
    fn resize_then_center_crop_is_a_window_of_the_original() {
        // 500x375 -> Resize(256) -> 341x256 (int(256*500/375) = 341) -> CenterCrop 224:
        // left = round((341-224)/2) = round(58.5) = 58 (half to even), top = round(16) = 16.
        assert_eq!(resized_size(500, 375, 256), (341, 256));
        let b = resize_center_crop(500, 375, Some(256), (224, 224)).unwrap();
        let (sx, sy) = (500.0 / 341.0, 375.0 / 256.0);
        assert!(!b.view);
        assert_eq!(
            (b.left, b.top, b.width, b.height),
            (58.0 * sx, 16.0 * sy, 224.0 * sx, 224.0 * sy)
        );
        assert!(resize_center_crop(100, 100, None, (224, 224)).is_err());
    }
}
