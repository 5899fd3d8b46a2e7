//! The per-sample compute kernels: crop + antialiased resize (fast_image_resize, which matches
//! Pillow's convolution resampling), then one pass that flips, normalizes, casts and lays out
//! the pixels straight into the batch slot through per-channel lookup tables.

use fast_image_resize::images::{CroppedImage, Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};

use serde::{Deserialize, Serialize};

use super::error::AugmentError;
use super::error::PipelineError;
use super::float_resample;
use super::geometry::{CropBox, Interpolation};
use super::pil;
use super::pixel::PixelOp;
use super::spec::{OpKind, OpSpec};
use super::{cv2_area, cv2_cubic, cv2_linear, two_tap};
use crate::dtype::{Dtype, Layout};
use crate::rng::CounterRng;
use hpuload_decoders::jpeg::Planes;
#[cfg(target_arch = "x86_64")]
use hpuload_decoders::jpeg::{ycc16, ycc32};

/// `ToTensor()` then `Normalize(mean, std)`: `(x / 255 - mean) / std` per channel, fused into
/// the output writer.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Normalize {
    /// Per-channel mean (RGB).
    pub mean: [f32; 3],
    /// Per-channel standard deviation (RGB).
    pub std: [f32; 3],
    /// How the bytes became floats before it. Default `divide` (`ToTensor`).
    #[serde(default)]
    pub to_float: ToFloat,
    /// Whether the conversion to the output dtype came first, so that, as torch does, every
    /// step runs in that dtype and is rounded to it (f16 or bf16: the mean and std rounded,
    /// then the difference, then the quotient). Default false: computed in f32 and rounded
    /// once, when written.
    #[serde(default)]
    pub in_output_dtype: bool,
    /// Whether it came before a resize of float values (`ToTensor(), Normalize(...),
    /// Resize(...)`, with `Pipeline::resize_floats`): the resize then takes the normalized
    /// floats, and nothing is normalized after it. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub before_resize: bool,
}

/// How a transform turns bytes into floats in `[0, 1]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToFloat {
    /// `x / 255` (`ToTensor`, v1's `ConvertImageDtype`).
    #[default]
    Divide,
    /// `x * (1 / 255)`, the reciprocal rounded to f32 (v2's `ToDtype(dtype, scale=True)`).
    Multiply,
    /// The bytes as they are, the mean and std scaled to them instead: `(x - mean * 255) *
    /// (1 / (std * 255))`, each step in f32 (albumentations' `Normalize` of a uint8 image,
    /// whose lookup table is computed so).
    ScaledStats,
    /// Each channel's value of each byte given whole ([`ByteValues`]: what a Dataset's own
    /// arithmetic makes of them, `x / 127.5 - 1` in float64 say); the mean and std are not
    /// used.
    Table(ByteValues),
}

/// The float a Dataset's own code makes of each byte of each channel (`values[c][v]`), for
/// arithmetic hpuload has no step for: NumPy's or torch's own operations, which hpuload's
/// Python side runs on every byte value and hands over as this table, so that any chain of
/// elementwise operations (`x / 127.5 - 1` in float64 then cast to float32, a mean and
/// deviation of its own) is written bit for bit.
///
/// Tables are interned for the life of the process (a pipeline's options are `Copy`): one
/// allocation of 3 KiB per distinct table, however many pipelines use it.
#[derive(Clone, Copy)]
pub struct ByteValues(&'static [[f32; 256]; 3]);

impl ByteValues {
    /// The interned table of `values`.
    pub fn new(values: [[f32; 256]; 3]) -> Self {
        static TABLES: std::sync::Mutex<Vec<&'static [[f32; 256]; 3]>> =
            std::sync::Mutex::new(Vec::new());
        let mut tables = TABLES
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(&known) = tables.iter().find(|t| same_bits(t, &values)) {
            return Self(known);
        }
        let table: &'static [[f32; 256]; 3] = Box::leak(Box::new(values));
        tables.push(table);
        Self(table)
    }

    /// Channel `c`'s value of byte `v`.
    pub fn get(&self, c: usize, v: u8) -> f32 {
        self.0[c][usize::from(v)]
    }
}

fn same_bits(a: &[[f32; 256]; 3], b: &[[f32; 256]; 3]) -> bool {
    a.iter()
        .flatten()
        .zip(b.iter().flatten())
        .all(|(x, y)| x.to_bits() == y.to_bits())
}

impl PartialEq for ByteValues {
    fn eq(&self, other: &Self) -> bool {
        same_bits(self.0, other.0)
    }
}

impl Eq for ByteValues {}

impl std::fmt::Debug for ByteValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ends = |c: usize| (self.0[c][0], self.0[c][255]);
        write!(f, "ByteValues({:?}, {:?}, {:?})", ends(0), ends(1), ends(2))
    }
}

impl Serialize for ByteValues {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|row| row.as_slice()))
    }
}

impl<'de> Deserialize<'de> for ByteValues {
    /// Three rows of 256 finite floats, or one row for every channel.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let rows = Vec::<Vec<f32>>::deserialize(deserializer)?;
        if !matches!(rows.len(), 1 | 3) || rows.iter().any(|r| r.len() != 256) {
            return Err(D::Error::custom(
                "a table of byte values is 1 or 3 rows of 256 floats",
            ));
        }
        if rows.iter().flatten().any(|x| !x.is_finite()) {
            return Err(D::Error::custom(
                "a table of byte values holds finite floats",
            ));
        }
        let row =
            |c: usize| -> [f32; 256] { std::array::from_fn(|v| rows[c.min(rows.len() - 1)][v]) };
        Ok(Self::new([row(0), row(1), row(2)]))
    }
}

impl Normalize {
    /// ImageNet's mean and standard deviation, as torchvision's reference scripts use.
    pub fn imagenet() -> Self {
        Self::new(IMAGENET_MEAN, IMAGENET_STD)
    }

    /// `(x / 255 - mean) / std` in f32.
    pub fn new(mean: [f32; 3], std: [f32; 3]) -> Self {
        Self {
            mean,
            std,
            to_float: ToFloat::Divide,
            in_output_dtype: false,
            before_resize: false,
        }
    }

    /// Channel `c`'s output for byte `v`, as an f32 holding the value that is written
    /// (already rounded to `dtype` where the steps run in it).
    fn value(&self, c: usize, v: u8, dtype: Dtype) -> f32 {
        let round = |x: f32| match dtype {
            Dtype::F16 if self.in_output_dtype => half::f16::from_f32(x).to_f32(),
            Dtype::Bf16 if self.in_output_dtype => half::bf16::from_f32(x).to_f32(),
            _ => x,
        };
        if let ToFloat::Table(values) = self.to_float {
            return round(values.get(c, v));
        }
        if self.to_float == ToFloat::ScaledStats {
            let (mean, scale) = (self.mean[c] * 255.0, 1.0 / (self.std[c] * 255.0));
            return round((f32::from(v) - mean) * scale);
        }
        self.of_float(c, to_float(v, self.to_float), dtype)
    }

    /// Channel `c`'s output for the float `x` (a byte already made a float, and perhaps
    /// resized as one): `(x - mean) / std` as torch computes it, as [`Normalize::value`]
    /// does (not for `ScaledStats`, whose steps start from the byte).
    fn of_float(&self, c: usize, x: f32, dtype: Dtype) -> f32 {
        let round = |x: f32| match dtype {
            Dtype::F16 if self.in_output_dtype => half::f16::from_f32(x).to_f32(),
            Dtype::Bf16 if self.in_output_dtype => half::bf16::from_f32(x).to_f32(),
            _ => x,
        };
        let x = round(x);
        round(round(x - round(self.mean[c])) / round(self.std[c]))
    }
}

/// A byte as a float in `[0, 1]`.
fn to_float(v: u8, how: ToFloat) -> f32 {
    match how {
        ToFloat::Divide => f32::from(v) / 255.0,
        ToFloat::Multiply => f32::from(v) * (1.0f64 / 255.0) as f32,
        ToFloat::ScaledStats => f32::from(v),
        ToFloat::Table(_) => {
            unreachable!("a table's values are read per channel (Normalize::value)")
        }
    }
}

/// ImageNet's per-channel mean, as torchvision's reference scripts use.
pub const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
/// ImageNet's per-channel standard deviation.
pub const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

impl OpSpec for Normalize {
    fn kind(&self) -> OpKind {
        OpKind::Normalize
    }
    fn check(&self) -> Result<(), PipelineError> {
        let Self { mean, std, .. } = self;
        if std.iter().any(|&s| !(s.is_finite() && s > 0.0)) || mean.iter().any(|m| !m.is_finite()) {
            return Err(PipelineError::Parameter(format!(
                "normalize std {std:?} must be positive and mean {mean:?} finite"
            )));
        }
        Ok(())
    }
    /// Normalize is the output writer's.
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

/// Crops and resizes RGB8 images into a reused buffer (antialiased bilinear, Pillow's
/// arithmetic). One per worker.
pub struct Resampler {
    resizer: Resizer,
    two_tap: two_tap::TwoTap,
    /// OpenCV's linear resize's rows.
    cv2: cv2_linear::Cv2Linear,
    cv2_area: cv2_area::Cv2Area,
    cv2_cubic: cv2_cubic::Cv2Cubic,
    /// Pillow's own resize's lines.
    pil: pil::resample::Scratch,
    /// torch's float resize's taps and rows.
    float: float_resample::Scratch,
    /// The horizontal pass's rows, for the filters run one axis after the other.
    across: Vec<u8>,
    out: Vec<u8>,
    /// A float resize's unrounded output ([`Resampler::run_values`]).
    floats: Vec<f32>,
    out_w: u32,
    out_h: u32,
    /// The images given have three equal channels ([`Resampler::set_grey`]).
    grey: bool,
}

/// The resampler's refusal, as its message.
fn resize_error(e: impl std::fmt::Display) -> AugmentError {
    AugmentError::Resize(e.to_string())
}

impl Resampler {
    /// A resampler to `out_h` x `out_w`.
    pub fn new(out_h: u32, out_w: u32) -> Self {
        Self {
            resizer: Resizer::new(),
            two_tap: two_tap::TwoTap::default(),
            cv2: cv2_linear::Cv2Linear::default(),
            cv2_area: cv2_area::Cv2Area::default(),
            cv2_cubic: cv2_cubic::Cv2Cubic::default(),
            pil: pil::resample::Scratch::default(),
            float: float_resample::Scratch::default(),
            across: Vec::new(),
            out: vec![0; out_w as usize * out_h as usize * 3],
            floats: Vec::new(),
            out_w,
            out_h,
            grey: false,
        }
    }

    /// Says whether the images given from now on are grey, each pixel's three channels equal
    /// (an image read grey, before any step that could make it colour): the kernels that can
    /// then compute one channel and copy it to the other two do (OpenCV's: two-tap, area and
    /// cubic; the same bytes). Off by default.
    pub fn set_grey(&mut self, grey: bool) {
        self.grey = grey;
    }

    /// Resamples to `out_h` x `out_w` from now on (the buffer grows when it must, and is
    /// kept).
    pub fn set_size(&mut self, out_h: u32, out_w: u32) {
        self.out.resize(out_w as usize * out_h as usize * 3, 0);
        (self.out_h, self.out_w) = (out_h, out_w);
    }

    /// Resamples `crop` of the `width`x`height` RGB8 image `src` to the output size with
    /// antialiased bilinear and returns the result (interleaved RGB8, row-major).
    ///
    /// # Errors
    /// The crop lies outside the image or `src` is shorter than `width * height * 3`.
    pub fn run(
        &mut self,
        src: &[u8],
        width: u32,
        height: u32,
        crop: &CropBox,
    ) -> Result<&[u8], AugmentError> {
        self.run_with(src, width, height, crop, Interpolation::Bilinear)
            .map(|out| &*out)
    }

    /// torch's float resize (`FloatBilinear` or `FloatBicubic`) of `crop` of the
    /// `width`x`height` RGB8 image `src`, its bytes taken as the floats
    /// `values[channel][byte]` (what `ToTensor()`, and perhaps `Normalize`, made of them
    /// before the resize), to the output size: the unrounded f32
    /// values torch gives a float image tensor, interleaved RGB, row-major. `None` for any
    /// other filter (one that copies pixels gives the bytes' floats: [`Resampler::run_with`]).
    ///
    /// # Errors
    /// The crop lies outside the image, `src` is short, or the window is no part of a resize
    /// of the whole image (none of torchvision's geometry makes one).
    pub fn run_values(
        &mut self,
        src: &[u8],
        (width, height): (u32, u32),
        values: &[[f32; 256]; 3],
        crop: &CropBox,
        interpolation: Interpolation,
    ) -> Result<Option<&mut [f32]>, AugmentError> {
        let kernel = match interpolation {
            Interpolation::FloatBilinear => pil::resample::Kernel::Bilinear,
            Interpolation::FloatBicubic => pil::resample::Kernel::Bicubic,
            _ => return Ok(None),
        };
        window_inside(src, width, height, crop)?;
        let (w, h) = (self.out_w, self.out_h);
        self.floats.resize(w as usize * h as usize * 3, 0.0);
        let done = float_resample::resize_values(
            (src, (width, height), values),
            crop,
            (w, h),
            kernel,
            &mut self.float,
            &mut self.floats,
        )?;
        if done.is_none() {
            return Err(AugmentError::Resize(
                "a float resize of a window that is no part of a resize of the whole image".into(),
            ));
        }
        Ok(Some(&mut self.floats))
    }

    /// [`Resampler::run`] with a chosen filter: antialiased bilinear or bicubic (Pillow's
    /// filters, which torchvision's antialiased resize reproduces), or torch's `nearest`
    /// (source pixel `floor(i * in / out)`, in f32). `Random` must have been drawn already.
    ///
    /// # Errors
    /// The crop lies outside the image, `src` is short, or the filter is `Random`.
    pub fn run_with(
        &mut self,
        src: &[u8],
        width: u32,
        height: u32,
        crop: &CropBox,
        interpolation: Interpolation,
    ) -> Result<&mut [u8], AugmentError> {
        use pil::resample::{Kernel, Weights};
        /// Whose arithmetic a filter is: torch's uint8 kernel (fast_image_resize's weights),
        /// Pillow's (a PIL image's resize), torch's float kernel (v1's of a tensor).
        enum Exact {
            Torch,
            TorchTwoTap,
            Pillow,
            Float,
        }
        let (filter, kernel, exact) = match interpolation {
            Interpolation::Bilinear => (FilterType::Bilinear, Kernel::Bilinear, Exact::Torch),
            Interpolation::Bicubic => (FilterType::CatmullRom, Kernel::Bicubic, Exact::Torch),
            Interpolation::PilBilinear => (FilterType::Bilinear, Kernel::Bilinear, Exact::Pillow),
            Interpolation::PilBicubic => (FilterType::CatmullRom, Kernel::Bicubic, Exact::Pillow),
            Interpolation::PilLanczos => (FilterType::Lanczos3, Kernel::Lanczos, Exact::Pillow),
            Interpolation::PilBox => (FilterType::Box, Kernel::Box, Exact::Pillow),
            Interpolation::PilHamming => (FilterType::Hamming, Kernel::Hamming, Exact::Pillow),
            Interpolation::FloatBilinear => (FilterType::Bilinear, Kernel::Bilinear, Exact::Float),
            Interpolation::FloatBicubic => (FilterType::CatmullRom, Kernel::Bicubic, Exact::Float),
            Interpolation::TorchBilinearNoAntialias => {
                (FilterType::Bilinear, Kernel::Bilinear, Exact::TorchTwoTap)
            }
            Interpolation::BilinearNoAntialias => {
                self.two_tap(src, width, height, crop)?;
                return Ok(&mut self.out);
            }
            Interpolation::Cv2Linear | Interpolation::Cv2Nearest | Interpolation::Cv2Area => {
                window_inside(src, width, height, crop)?;
                let stride = width as usize * 3;
                let (x, y) = self.cv2_axes(crop, width, height);
                if interpolation == Interpolation::Cv2Area && cv2_area::averages(&x, &y) {
                    let (w, h) = (self.out_w as usize, self.out_h as usize);
                    let grey = self.grey;
                    (self.cv2_area).run(src, stride, (&x, w), (&y, h), grey, &mut self.out);
                    return Ok(&mut self.out);
                }
                let rule = cv2_rule(interpolation);
                let xs = cv2_linear::taps_by(rule, &x, self.out_w, true);
                let ys = cv2_linear::taps_by(rule, &y, self.out_h, false);
                self.cv2
                    .run(src, stride, (&xs, &ys), self.grey, &mut self.out);
                return Ok(&mut self.out);
            }
            Interpolation::Cv2Cubic => {
                window_inside(src, width, height, crop)?;
                let (x, y) = self.cv2_axes(crop, width, height);
                let xs = cv2_cubic::taps(&x, self.out_w);
                let ys = cv2_cubic::taps(&y, self.out_h);
                let (stride, grey) = (width as usize * 3, self.grey);
                (self.cv2_cubic).run(src, stride, (&xs, &ys), grey, &mut self.out);
                return Ok(&mut self.out);
            }
            Interpolation::Nearest => {
                self.nearest(src, width, height, crop, false)?;
                return Ok(&mut self.out);
            }
            Interpolation::PilNearest => {
                self.nearest(src, width, height, crop, true)?;
                return Ok(&mut self.out);
            }
            Interpolation::Random => return Err(AugmentError::Undrawn),
        };
        if crop.view && (crop.width, crop.height) == (self.out_w.into(), self.out_h.into()) {
            // A window at its own size: every filter's weights are 1 on the pixel itself.
            self.copy_window(src, width, height, crop)?;
            return Ok(&mut self.out);
        }
        window_inside(src, width, height, crop)?;
        let size = (self.out_w, self.out_h);
        let (pil, float, out) = (&mut self.pil, &mut self.float, &mut self.out);
        let done = match (exact, crop.view) {
            (Exact::Pillow, _) => pil::resample::resize(
                src,
                width,
                height,
                crop,
                size,
                (kernel, Weights::Pillow),
                pil,
                out,
            )?,
            // A window of a whole resize (`Resize` then `CenterCrop`) takes torch's weights
            // at the whole resize's precision; fast_image_resize sets it from the window's
            // own weights (one level off in 0.03-0.3% of values). A view is a whole resize.
            (Exact::Torch, false) => pil::resample::resize(
                src,
                width,
                height,
                crop,
                size,
                (kernel, Weights::Torch),
                pil,
                out,
            )?,
            (Exact::Torch, true) => None,
            (Exact::TorchTwoTap, _) => pil::resample::resize(
                src,
                width,
                height,
                crop,
                size,
                (kernel, Weights::TorchTwoTap),
                pil,
                out,
            )?,
            (Exact::Float, _) => {
                float_resample::resize(src, (width, height), crop, size, kernel, float, out)?
            }
        };
        // A window that is no part of a resize of the whole image (none of torchvision's
        // makes one) falls to fast_image_resize's weights in Pillow's order.
        if done.is_some() {
            return Ok(&mut self.out);
        }
        self.across_then_down(src, width, height, crop, filter)?;
        Ok(&mut self.out)
    }

    /// The convolution of `crop` (checked inside the image by the caller) in Pillow's order:
    /// each needed source row resampled across and rounded to bytes first, then the columns of
    /// those rows down. fast_image_resize runs
    /// u8 images the other way round, which rounds at another place: for bilinear one level
    /// off in 16-20% of values against torchvision (its tensor resize and Pillow's), for
    /// bicubic several levels at hard edges (its overshoot past 0 or 255 clipped between the
    /// passes). In this order its bytes are those of torchvision's antialiased tensor resize
    /// (whose 16-bit weights it shares), and of Pillow's (22-bit weights) but for one level in
    /// about 1% of values.
    fn across_then_down(
        &mut self,
        src: &[u8],
        width: u32,
        height: u32,
        crop: &CropBox,
        filter: FilterType,
    ) -> Result<(), AugmentError> {
        let image = ImageRef::new(width, height, src, PixelType::U8x3).map_err(resize_error)?;
        // A view is cut out first: its edges are the image's, and the window is all of it.
        let (view_left, view_top, view_w, view_h) = if crop.view {
            (
                crop.left as u32,
                crop.top as u32,
                crop.width as u32,
                crop.height as u32,
            )
        } else {
            (0, 0, width, height)
        };
        let (left, top) = (
            crop.left - f64::from(view_left),
            crop.top - f64::from(view_top),
        );
        // The rows the downward pass reads: the window's, and the filter's reach beyond them
        // (its support, two pixels, scaled up when shrinking), with a margin, clipped to the
        // image, whose real edges then bound the taps as they bound Pillow's.
        let reach = 2.0 * (crop.height / f64::from(self.out_h.max(1))).max(1.0) + 2.0;
        let y0 = (top - reach).floor().max(0.0) as u32;
        let y1 = ((top + crop.height + reach).ceil() as u32).min(view_h);
        let rows = y1 - y0;
        let options = |b: (f64, f64, f64, f64)| {
            ResizeOptions::new()
                .resize_alg(ResizeAlg::Convolution(filter))
                .crop(b.0, b.1, b.2, b.3)
        };
        self.across
            .resize(self.out_w as usize * rows as usize * 3, 0);
        let mut across = Image::from_slice_u8(self.out_w, rows, &mut self.across, PixelType::U8x3)
            .map_err(resize_error)?;
        let view = CroppedImage::new(&image, view_left, view_top + y0, view_w, rows)
            .map_err(resize_error)?;
        // The window's whole rows at their own height: only the horizontal pass runs.
        self.resizer
            .resize(
                &view,
                &mut across,
                &options((left, 0.0, crop.width, f64::from(rows))),
            )
            .map_err(resize_error)?;
        let across =
            ImageRef::new(self.out_w, rows, &self.across, PixelType::U8x3).map_err(resize_error)?;
        let mut dst = Image::from_slice_u8(self.out_w, self.out_h, &mut self.out, PixelType::U8x3)
            .map_err(resize_error)?;
        // Their full width at its own width: only the vertical pass runs.
        self.resizer
            .resize(
                &across,
                &mut dst,
                &options((0.0, top - f64::from(y0), f64::from(self.out_w), crop.height)),
            )
            .map_err(resize_error)
    }

    /// The source pixels [`Resampler::run_with`] can read for `crop` of a `width`x`height`
    /// image at the output size last set, as a half-open rectangle `(x0, y0, x1, y1)`, with
    /// two pixels of margin beyond the filter's reach: a decoder need only produce these (the CPU path's region decode).
    /// Exactly the pixels read for `bilinear_no_antialias` (its taps' extent); the whole
    /// image for `nearest`, whose positions are computed in f32.
    pub fn footprint(
        &self,
        width: u32,
        height: u32,
        crop: &CropBox,
        interpolation: Interpolation,
    ) -> (u32, u32, u32, u32) {
        let whole = (0, 0, width, height);
        let support = match interpolation {
            Interpolation::Bilinear
            | Interpolation::PilBilinear
            | Interpolation::FloatBilinear
            | Interpolation::TorchBilinearNoAntialias => 1.0,
            Interpolation::Bicubic | Interpolation::PilBicubic | Interpolation::FloatBicubic => 2.0,
            Interpolation::PilLanczos => 3.0,
            Interpolation::PilBox => 0.5,
            Interpolation::PilHamming => 1.0,
            Interpolation::BilinearNoAntialias => {
                // Exactly the pixels `two_tap` reads: the same taps, their extent.
                let extent = |out, start, len, limit| {
                    let taps = two_tap::taps(out, start, len, limit, crop.view);
                    let lo = taps.iter().map(|t| t.0).min()?;
                    let hi = taps.iter().map(|t| t.1).max()?;
                    (hi < limit as usize).then_some((lo as u32, hi as u32 + 1))
                };
                return match (
                    extent(self.out_w, crop.left, crop.width, width),
                    extent(self.out_h, crop.top, crop.height, height),
                ) {
                    (Some((x0, x1)), Some((y0, y1))) => (x0, y0, x1, y1),
                    _ => whole,
                };
            }
            Interpolation::Cv2Cubic => {
                // Exactly the pixels the four taps read.
                let (x, y) = self.cv2_axes(crop, width, height);
                let extent = |taps: Vec<cv2_cubic::Tap>| {
                    let reads = taps.iter().flat_map(|t| t.at);
                    let lo = reads.clone().min()?;
                    Some((lo as u32, reads.max()? as u32 + 1))
                };
                return match (
                    extent(cv2_cubic::taps(&x, self.out_w)),
                    extent(cv2_cubic::taps(&y, self.out_h)),
                ) {
                    (Some((x0, x1)), Some((y0, y1))) => (x0, y0, x1, y1),
                    _ => whole,
                };
            }
            Interpolation::Cv2Linear | Interpolation::Cv2Nearest | Interpolation::Cv2Area => {
                // Exactly the pixels OpenCV reads: its two taps' or its cells'.
                let extent = |reads: Vec<(usize, usize)>| {
                    let lo = reads.iter().map(|r| r.0).min()?;
                    let hi = reads.iter().map(|r| r.1).max()?;
                    Some((lo as u32, hi as u32 + 1))
                };
                let (x, y) = self.cv2_axes(crop, width, height);
                let reads = |axis: &cv2_linear::Axis, out: u32, across: bool| {
                    if interpolation == Interpolation::Cv2Area && cv2_area::averages(&x, &y) {
                        let parts = cv2_area::parts(axis, out as usize);
                        return parts.iter().map(|p| (p.src, p.src)).collect();
                    }
                    let taps = cv2_linear::taps_by(cv2_rule(interpolation), axis, out, across);
                    taps.iter()
                        .map(|t| (t.lo.min(t.hi), t.lo.max(t.hi)))
                        .collect()
                };
                return match (
                    extent(reads(&x, self.out_w, true)),
                    extent(reads(&y, self.out_h, false)),
                ) {
                    (Some((x0, x1)), Some((y0, y1))) => (x0, y0, x1, y1),
                    _ => whole,
                };
            }
            _ => return whole,
        };
        // A view is cut out before resampling: nothing outside it is read. Otherwise the
        // convolution's taps reach `support` source pixels (scaled up when shrinking) beyond
        // the window's edges, clipped to the image.
        let axis = |lo: f64, len: f64, out: u32, size: u32| {
            let reach = if crop.view {
                0.0
            } else {
                support * (len / f64::from(out.max(1))).max(1.0)
            };
            let a = ((lo - reach).floor() - 2.0).max(0.0);
            let b = ((lo + len + reach).ceil() + 2.0).min(f64::from(size));
            (a < b).then_some((a as u32, b as u32))
        };
        match (
            axis(crop.left, crop.width, self.out_w, width),
            axis(crop.top, crop.height, self.out_h, height),
        ) {
            (Some((x0, x1)), Some((y0, y1))) => (x0, y0, x1, y1),
            _ => whole,
        }
    }

    /// The rows of [`Resampler::footprint`] that [`Resampler::run_with`] reads, in order, for
    /// a filter that reads only some of them (bilinear without antialias reads two source rows
    /// per output row, so a shrink passes over the rest); `None` for one that reads them all.
    pub fn rows_read(
        &self,
        height: u32,
        crop: &CropBox,
        interpolation: Interpolation,
    ) -> Option<Vec<usize>> {
        if interpolation != Interpolation::BilinearNoAntialias {
            return None;
        }
        let taps = two_tap::taps(self.out_h, crop.top, crop.height, height, crop.view);
        let mut rows: Vec<usize> = taps.iter().flat_map(|&(y0, y1, _)| [y0, y1]).collect();
        rows.sort_unstable();
        rows.dedup();
        Some(rows)
    }

    /// Copies the integer window `crop` of `src` (the output's size).
    fn copy_window(
        &mut self,
        src: &[u8],
        width: u32,
        height: u32,
        crop: &CropBox,
    ) -> Result<(), AugmentError> {
        let (left, top) = (crop.left as usize, crop.top as usize);
        let (w, h) = (self.out_w as usize, self.out_h as usize);
        if src.len() < width as usize * height as usize * 3
            || left + w > width as usize
            || top + h > height as usize
        {
            return Err(AugmentError::CropOutside);
        }
        let stride = width as usize * 3;
        for (row, line) in self
            .out
            .chunks_exact_mut(w * 3)
            .zip(src[top * stride..].chunks(stride))
        {
            row.copy_from_slice(&line[left * 3..(left + w) * 3]);
        }
        Ok(())
    }

    /// torch's `interpolate(mode="bilinear", align_corners=False, antialias=False)` of the
    /// window ([`two_tap`](super::two_tap)): output pixel `i` reads the two source pixels around
    /// `(i + 0.5) * scale - 0.5` (clamped at 0, the right one repeated at the last), per axis,
    /// weighted in f32 as torch weighs them, and is rounded once, at the end (no rounding
    /// between the passes: torch's reference resizes float frames). A fractional window is a
    /// resize of the whole image then a crop, so its positions are in the whole image; a view
    /// is cut first.
    fn two_tap(
        &mut self,
        src: &[u8],
        width: u32,
        height: u32,
        crop: &CropBox,
    ) -> Result<(), AugmentError> {
        window_inside(src, width, height, crop)?;
        let xs = two_tap::taps(self.out_w, crop.left, crop.width, width, crop.view);
        let ys = two_tap::taps(self.out_h, crop.top, crop.height, height, crop.view);
        self.two_tap
            .run(src, width as usize * 3, &xs, &ys, &mut self.out);
        Ok(())
    }

    /// OpenCV's axes of `crop` of a `width` x `height` image: across, then down, at the
    /// output size.
    fn cv2_axes(
        &self,
        crop: &CropBox,
        width: u32,
        height: u32,
    ) -> (cv2_linear::Axis, cv2_linear::Axis) {
        let x = cv2_linear::Axis::of(self.out_w, crop.left, crop.width, width, crop.view);
        let y = cv2_linear::Axis::of(self.out_h, crop.top, crop.height, height, crop.view);
        (x, y)
    }

    /// Nearest neighbour of the window: torch's `interpolate(mode="nearest")` (output pixel
    /// `i` reads source pixel `floor(i * in / out)`, in f32) or, with `pil`, Pillow's
    /// `resize(NEAREST)` (what torchvision's transforms do to a PIL image: the pixel under
    /// the output pixel's centre, `(i + 0.5) * in / out`, its position summed up step by step
    /// in f64 as Pillow's scaling loop does). A fractional window is a resize of the whole
    /// image then a crop: the position is the resized image's, whose size and the crop's
    /// offset in it (whole numbers) are recovered from the window.
    fn nearest(
        &mut self,
        src: &[u8],
        width: u32,
        height: u32,
        crop: &CropBox,
        pil: bool,
    ) -> Result<(), AugmentError> {
        window_inside(src, width, height, crop)?;
        let view = crop.view;
        let index = |out: u32, start: f64, len: f64, limit: u32| -> Vec<usize> {
            // The resized size and the crop's offset in it (a view: the window itself).
            let (first, full, offset, size) = if view {
                (start, f64::from(out), 0, len)
            } else {
                let full = (f64::from(limit) * f64::from(out) / len).round();
                let offset = (start * full / f64::from(limit)).round() as u32;
                (0.0, full, offset, f64::from(limit))
            };
            let last = (limit - 1) as usize;
            let at = |x: f64| ((first + x).max(0.0) as usize).min(last);
            if pil {
                // Pillow's `ImagingScaleAffine`: `xo = a[2] + a[0] * 0.5`, then `+= a[0]`.
                let step = size / full;
                let mut xo = step * 0.5;
                let mut positions = Vec::with_capacity(out as usize);
                for i in 0..offset + out {
                    if i >= offset {
                        // `COORD`: truncation, and -1 (then clamped) below zero.
                        positions.push(at(if xo < 0.0 { 0.0 } else { xo.trunc() }));
                    }
                    xo += step;
                }
                positions
            } else {
                let scale = (size as f32) / (full as f32);
                (offset..offset + out)
                    .map(|i| at(f64::from((i as f32 * scale).floor())))
                    .collect()
            }
        };
        let xs = index(self.out_w, crop.left, crop.width, width);
        let ys = index(self.out_h, crop.top, crop.height, height);
        let stride = width as usize * 3;
        for (row, &y) in self.out.chunks_exact_mut(self.out_w as usize * 3).zip(&ys) {
            let line = &src[y * stride..][..stride];
            for (px, &x) in row.chunks_exact_mut(3).zip(&xs) {
                px.copy_from_slice(&line[x * 3..][..3]);
            }
        }
        Ok(())
    }
}

/// Refuses a window that reaches outside the `width`x`height` image, or a short `src`.
fn window_inside(src: &[u8], width: u32, height: u32, crop: &CropBox) -> Result<(), AugmentError> {
    if src.len() < width as usize * height as usize * 3
        || crop.left < 0.0
        || crop.top < 0.0
        || crop.left + crop.width > f64::from(width) + 1e-6
        || crop.top + crop.height > f64::from(height) + 1e-6
    {
        return Err(AugmentError::CropOutside);
    }
    Ok(())
}

/// The two-tap rule of one of OpenCV's interpolations (`Cv2Area` where it enlarges).
fn cv2_rule(interpolation: Interpolation) -> cv2_linear::Rule {
    match interpolation {
        Interpolation::Cv2Nearest => cv2_linear::Rule::Nearest,
        Interpolation::Cv2Area => cv2_linear::Rule::AreaEnlarging,
        _ => cv2_linear::Rule::Linear,
    }
}

/// Writes an RGB8 image into a batch slot as the output dtype and layout, flipping
/// horizontally on request. Normalization is folded into per-channel 256-entry tables.
///
/// A writer for grey images of one channel ([`OutputWriter::one_channel`]) writes the first
/// channel alone: one `h`x`w` plane, the same in either layout.
#[derive(Clone, Debug)]
pub struct OutputWriter {
    dtype: Dtype,
    layout: Layout,
    /// 3, or 1 for grey images handed out as one channel.
    channels: usize,
    /// `table[c][v]`: the output bits for value `v` of channel `c` (u8/u16/u32 widened to u32).
    table: Box<[[u32; 256]; 3]>,
    /// For bf16 NCHW on a CPU with AVX2, when it reproduces `table` exactly: the same values
    /// computed 8 pixels at a time.
    affine: Option<Bf16Affine>,
    /// For f32 NCHW on a CPU with AVX-512 F and BW, when they reproduce `table` exactly: the
    /// float steps of the normalization, for the one-pass write from a decode's planes.
    f32_steps: Option<F32Steps>,
    /// The normalization, for values written as floats ([`OutputWriter::write_values`]).
    normalize: Option<Normalize>,
}

impl OutputWriter {
    /// A writer for `dtype` and `layout`, normalizing with `(mean, std)` when given.
    ///
    /// # Panics
    /// For [`Dtype::I64`], which is not an image type.
    pub fn new(dtype: Dtype, layout: Layout, normalize: Option<Normalize>) -> Self {
        let mut table = Box::new([[0u32; 256]; 3]);
        for (c, row) in table.iter_mut().enumerate() {
            for (v, out) in row.iter_mut().enumerate() {
                // torchvision: ToTensor() divides by 255 in f32, Normalize subtracts then divides.
                let x = match normalize {
                    Some(n) => n.value(c, v as u8, dtype),
                    None if dtype == Dtype::U8 => v as f32,
                    None => v as f32 / 255.0,
                };
                *out = match dtype {
                    Dtype::U8 => v as u32,
                    Dtype::F32 => x.to_bits(),
                    Dtype::F16 => u32::from(half::f16::from_f32(x).to_bits()),
                    Dtype::Bf16 => u32::from(half::bf16::from_f32(x).to_bits()),
                    Dtype::I64 => panic!("i64 is a label type, not an image dtype"),
                };
            }
        }
        let affine = (dtype == Dtype::Bf16 && layout == Layout::Nchw)
            .then(|| Bf16Affine::exact_for(&table, normalize))
            .flatten();
        let f32_steps = (dtype == Dtype::F32 && layout == Layout::Nchw && avx512())
            .then(|| F32Steps::exact_for(&table, normalize))
            .flatten();
        Self {
            dtype,
            layout,
            channels: 3,
            table,
            affine,
            f32_steps,
            normalize,
        }
    }

    /// This writer for grey images given as one channel (three equal ones in, the first out):
    /// each writes one `h`x`w` plane of the first channel's values.
    pub fn one_channel(self) -> Self {
        Self {
            channels: 1,
            ..self
        }
    }

    /// The channels each pixel is written as: 3, or 1 ([`OutputWriter::one_channel`]).
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// The float each byte of each channel becomes before a resize of float values
    /// (`ToTensor()` first): `x / 255`, or `x * (1 / 255)` when the normalization says the
    /// bytes were scaled so; normalized too when the normalization came before the resize.
    pub fn byte_values(&self) -> [[f32; 256]; 3] {
        let how = match self.normalize.map(|n| n.to_float) {
            Some(ToFloat::Multiply) => ToFloat::Multiply,
            _ => ToFloat::Divide,
        };
        std::array::from_fn(|c| {
            std::array::from_fn(|v| {
                let x = to_float(v as u8, how);
                match self.normalize {
                    Some(n) if n.before_resize => n.of_float(c, x, self.dtype),
                    _ => x,
                }
            })
        })
    }

    /// Writes the `h`x`w` image `values` (interleaved RGB floats: a resize's unrounded
    /// output, [`Resampler::run_values`]) into `slot` as [`OutputWriter::write`] writes bytes:
    /// normalized as torch normalizes a float tensor, cast to the dtype, flipped on request.
    ///
    /// # Panics
    /// When `slot` or `values` has the wrong size, or the dtype is u8 or i64 (a float image
    /// is not written as bytes: `Pipeline::validate` refuses it).
    pub fn write_values(
        &self,
        values: &[f32],
        (h, w): (usize, usize),
        flip: bool,
        slot: &mut [u8],
    ) {
        match self.dtype {
            Dtype::F32 => self.values_typed(values, (h, w), flip, slot, |x| x),
            Dtype::F16 => self.values_typed(values, (h, w), flip, slot, |x| {
                half::f16::from_f32(x).to_bits()
            }),
            Dtype::Bf16 => self.values_typed(values, (h, w), flip, slot, |x| {
                half::bf16::from_f32(x).to_bits()
            }),
            Dtype::U8 | Dtype::I64 => panic!("float values are written as a float dtype"),
        }
    }

    /// [`OutputWriter::write_values`] for the dtype's `bits`: the normalization picked once
    /// (none, `(x - mean) / std` in f32, or each step rounded to the dtype), then one loop
    /// over the pixels for it.
    fn values_typed<T: bytemuck::Pod>(
        &self,
        values: &[f32],
        size: (usize, usize),
        flip: bool,
        slot: &mut [u8],
        bits: impl Fn(f32) -> T + Copy,
    ) {
        match self.normalize {
            Some(n) if !n.before_resize && n.in_output_dtype => {
                let dtype = self.dtype;
                self.pixels_typed(values, size, flip, slot, move |c, x| {
                    bits(n.of_float(c, x, dtype))
                });
            }
            Some(n) if !n.before_resize => {
                let (mean, std) = (n.mean, n.std);
                self.pixels_typed(values, size, flip, slot, move |c, x| {
                    bits((x - mean[c]) / std[c])
                });
            }
            _ => self.pixels_typed(values, size, flip, slot, move |_, x| bits(x)),
        }
    }

    /// Each pixel of `values` (rows reversed when `flip`) through `value(channel, x)` into
    /// `slot` in the writer's layout.
    fn pixels_typed<T: bytemuck::Pod>(
        &self,
        values: &[f32],
        (h, w): (usize, usize),
        flip: bool,
        slot: &mut [u8],
        value: impl Fn(usize, f32) -> T + Copy,
    ) {
        let out: &mut [T] = bytemuck::cast_slice_mut(slot);
        assert_eq!(
            out.len(),
            h * w * self.channels,
            "slot size does not match the image"
        );
        let pixels: &[[f32; 3]] = bytemuck::cast_slice(&values[..h * w * 3]);
        let px = |p: &[f32; 3]| [value(0, p[0]), value(1, p[1]), value(2, p[2])];
        if self.channels == 1 {
            for (src, dst) in pixels.chunks_exact(w).zip(out.chunks_exact_mut(w)) {
                if flip {
                    src.iter()
                        .rev()
                        .zip(dst)
                        .for_each(|(p, d)| *d = value(0, p[0]));
                } else {
                    src.iter().zip(dst).for_each(|(p, d)| *d = value(0, p[0]));
                }
            }
            return;
        }
        match self.layout {
            Layout::Nchw => {
                let (r, rest) = out.split_at_mut(h * w);
                let (g, b) = rest.split_at_mut(h * w);
                let rows = pixels
                    .chunks_exact(w)
                    .zip(r.chunks_exact_mut(w))
                    .zip(g.chunks_exact_mut(w))
                    .zip(b.chunks_exact_mut(w));
                for (((src, r), g), b) in rows {
                    let mut put = |(((p, r), g), b): (((&[f32; 3], &mut T), &mut T), &mut T)| {
                        [*r, *g, *b] = px(p);
                    };
                    if flip {
                        src.iter().rev().zip(r).zip(g).zip(b).for_each(&mut put);
                    } else {
                        src.iter().zip(r).zip(g).zip(b).for_each(&mut put);
                    }
                }
            }
            Layout::Nhwc => {
                let dst: &mut [[T; 3]] = bytemuck::cast_slice_mut(out);
                for (src, dst) in pixels.chunks_exact(w).zip(dst.chunks_exact_mut(w)) {
                    if flip {
                        src.iter().rev().zip(dst).for_each(|(p, d)| *d = px(p));
                    } else {
                        src.iter().zip(dst).for_each(|(p, d)| *d = px(p));
                    }
                }
            }
        }
    }

    /// Writes the `h`x`w` RGB8 image `rgb` into `slot` (exactly `h * w * 3 * dtype.size()`
    /// bytes, aligned to the dtype).
    ///
    /// # Panics
    /// When `slot` has the wrong size or alignment for the dtype.
    pub fn write(&self, rgb: &[u8], h: usize, w: usize, flip: bool, slot: &mut [u8]) {
        let target = match self.layout {
            _ if self.channels == 1 => Target::Grey(slot),
            Layout::Nchw => {
                let plane = slot.len() / 3;
                let (r, rest) = slot.split_at_mut(plane);
                let (g, b) = rest.split_at_mut(plane);
                Target::Planes([r, g, b])
            }
            Layout::Nhwc => Target::Interleaved(slot),
        };
        self.write_to(rgb, h, w, flip, target);
    }

    /// [`OutputWriter::write`] in the planar layout into three planes that need not be
    /// adjacent (`h * w * dtype.size()` bytes each, aligned to the dtype): a frame of a
    /// `[C, T, H, W]` clip, whose channel planes lie `T` frames apart.
    ///
    /// # Panics
    /// When a plane has the wrong size or alignment for the dtype.
    pub fn write_planes(&self, rgb: &[u8], h: usize, w: usize, flip: bool, planes: [&mut [u8]; 3]) {
        assert_eq!(self.channels, 3, "three planes of a one-channel writer");
        self.write_to(rgb, h, w, flip, Target::Planes(planes));
    }

    fn write_to(&self, rgb: &[u8], h: usize, w: usize, flip: bool, target: Target<'_>) {
        match (self.dtype, &self.affine) {
            (Dtype::Bf16, Some(a)) if self.channels == 3 => {
                self.write_typed::<u16>(rgb, h, w, flip, target, |src, flip, r, g, b| {
                    a.lead(src, flip, r, g, b)
                })
            }
            (Dtype::U8, _) => self.write_typed::<u8>(rgb, h, w, flip, target, no_lead),
            (Dtype::F16 | Dtype::Bf16, _) => {
                self.write_typed::<u16>(rgb, h, w, flip, target, no_lead)
            }
            (Dtype::F32, _) => self.write_typed::<u32>(rgb, h, w, flip, target, no_lead),
            (Dtype::I64, _) => panic!("i64 is a label type, not an image dtype"),
        }
        // The bf16 vector and f32 planar writers may have streamed; one fence per sample
        // costs the others nothing that counts.
        stream_fence();
    }

    /// Writes an `h`x`w` image given as a JPEG decode's resampled planes, before their colour
    /// conversion, into `slot` (as [`OutputWriter::write`] takes it): the bytes that converting
    /// them to RGB ([`Planes::to_rgb`]) and
    /// writing that would give, in one pass instead of two (no RGB image in between). Only for
    /// NCHW: bf16 on a CPU with AVX-512 BF16, where `Bf16Affine::row_avx512` serves the
    /// two-pass write, and f32 on one with AVX-512 F and BW, where the normalization's float
    /// steps give the tables' bits (`F32Steps`); `false`, writing nothing, elsewhere.
    ///
    /// # Panics
    /// When a plane holds fewer than `h * w` bytes, or `slot` is not `h * w * 3` values of the
    /// dtype.
    pub fn write_resampled(
        &self,
        planes: Planes<'_>,
        h: usize,
        w: usize,
        flip: bool,
        slot: &mut [u8],
    ) -> bool {
        if self.channels == 1 {
            return self.grey_from_planes(planes, (h, w), flip, slot);
        }
        if let Some(steps) = self.f32_steps {
            self.rows_from_planes::<u32>(planes, (h, w), flip, slot, |row, grey, out| {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `f32_steps` is set only when AVX-512 F and BW and AVX2 were
                // detected at run time.
                return unsafe { steps.ycc_row_avx512(row, grey, flip, out) };
                #[cfg(not(target_arch = "x86_64"))]
                0
            });
            return true;
        }
        let Some(affine) = self
            .affine
            .filter(|a| a.convert && self.layout == Layout::Nchw)
        else {
            return false;
        };
        self.rows_from_planes::<u16>(planes, (h, w), flip, slot, |row, grey, [r, g, b]| {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `convert` is set only when AVX-512 F, BW, VL and BF16 and AVX2 were
            // detected at run time.
            return unsafe { affine.ycc_row_avx512(row, grey, flip, r, g, b) };
            #[cfg(not(target_arch = "x86_64"))]
            0
        });
        true
    }

    /// [`OutputWriter::write_resampled`] of a one-channel writer: a grey decode's plane (its
    /// bytes are the grey image's) through the first channel's table; `false` for a colour
    /// decode's planes.
    fn grey_from_planes(
        &self,
        planes: Planes<'_>,
        (h, w): (usize, usize),
        flip: bool,
        slot: &mut [u8],
    ) -> bool {
        let Planes::Grey(y) = planes else {
            return false;
        };
        assert!(y.len() >= h * w, "plane smaller than the image");
        match self.dtype {
            Dtype::U8 => grey_plane::<u8>(&self.narrowed(), y, (h, w), flip, slot),
            Dtype::F16 | Dtype::Bf16 => grey_plane::<u16>(&self.narrowed(), y, (h, w), flip, slot),
            Dtype::F32 => grey_plane::<u32>(&self.narrowed(), y, (h, w), flip, slot),
            Dtype::I64 => panic!("i64 is a label type, not an image dtype"),
        }
        true
    }

    /// [`OutputWriter::write_resampled`]'s rows: `lead` writes the first outputs of each row
    /// from its planes (a vector kernel, given Y, Cb and Cr, or with `grey` one plane three
    /// times) and returns how many, [`Self::tail_from_planes`] the rest.
    fn rows_from_planes<T: bytemuck::Pod + TryFrom<u32>>(
        &self,
        planes: Planes<'_>,
        (h, w): (usize, usize),
        flip: bool,
        slot: &mut [u8],
        lead: impl Fn([&[u8]; 3], bool, [&mut [T]; 3]) -> usize,
    ) {
        let (ycc, grey) = match planes {
            Planes::Ycc(ycc) => (ycc, false),
            Planes::Grey(y) => ([y; 3], true),
        };
        assert!(
            ycc.iter().all(|p| p.len() >= h * w),
            "planes smaller than the image"
        );
        let t = self.narrowed::<T>();
        let out: &mut [T] = bytemuck::cast_slice_mut(slot);
        assert_eq!(out.len(), h * w * 3, "slot size does not match the image");
        let (r, rest) = out.split_at_mut(h * w);
        let (g, b) = rest.split_at_mut(h * w);
        let rows = r
            .chunks_exact_mut(w)
            .zip(g.chunks_exact_mut(w))
            .zip(b.chunks_exact_mut(w));
        for (i, ((r, g), b)) in rows.enumerate() {
            let at = i * w..(i + 1) * w;
            let done = lead(
                ycc.map(|p| &p[at.clone()]),
                grey,
                [&mut *r, &mut *g, &mut *b],
            );
            tail_from_planes(&t, planes.slice(at), flip, done, [r, g, b]);
        }
        stream_fence();
    }

    /// The tables narrowed to the output type (3 KiB at most, once per sample), so the inner
    /// loops index a native type.
    fn narrowed<T: bytemuck::Pod + TryFrom<u32>>(&self) -> [[T; 256]; 3] {
        std::array::from_fn(|c| {
            std::array::from_fn(|v| {
                T::try_from(self.table[c][v])
                    .ok()
                    .expect("table entries fit the dtype")
            })
        })
    }

    /// `lead` may write the first outputs of each planar row (a vector kernel) and returns how
    /// many it wrote; the tables do the rest.
    fn write_typed<T: bytemuck::Pod + TryFrom<u32>>(
        &self,
        rgb: &[u8],
        h: usize,
        w: usize,
        flip: bool,
        target: Target<'_>,
        lead: impl Fn(&[[u8; 3]], bool, &mut [T], &mut [T], &mut [T]) -> usize,
    ) {
        let t = self.narrowed::<T>();
        let pixels: &[[u8; 3]] = bytemuck::cast_slice(&rgb[..h * w * 3]);
        // Each arm hands rows of pixels (reversed when flipping) to a loop with no bounds
        // checks, over zipped iterators.
        match target {
            Target::Planes(planes) => {
                let [r, g, b] = planes.map(|p| -> &mut [T] { bytemuck::cast_slice_mut(p) });
                for plane in [&r, &g, &b] {
                    assert_eq!(plane.len(), h * w, "plane size does not match the image");
                }
                let rows = pixels
                    .chunks_exact(w)
                    .zip(r.chunks_exact_mut(w))
                    .zip(g.chunks_exact_mut(w))
                    .zip(b.chunks_exact_mut(w));
                for (((src, r), g), b) in rows {
                    let done = lead(src, flip, r, g, b);
                    // The rest (when flipping, from the source pixels at the row's start).
                    let (r, g, b) = (&mut r[done..], &mut g[done..], &mut b[done..]);
                    if flip {
                        planar_row(&t, src[..w - done].iter().rev(), r, g, b);
                    } else {
                        planar_row(&t, src[done..].iter(), r, g, b);
                    }
                }
            }
            Target::Grey(slot) => {
                let out: &mut [T] = bytemuck::cast_slice_mut(slot);
                assert_eq!(out.len(), h * w, "slot size does not match the image");
                for (src, dst) in pixels.chunks_exact(w).zip(out.chunks_exact_mut(w)) {
                    grey_row(&t[0], src.iter().map(|p| p[0]), flip, dst);
                }
            }
            Target::Interleaved(slot) => {
                let out: &mut [T] = bytemuck::cast_slice_mut(slot);
                assert_eq!(out.len(), h * w * 3, "slot size does not match the image");
                let dst: &mut [[T; 3]] = bytemuck::cast_slice_mut(out);
                for (src, dst) in pixels.chunks_exact(w).zip(dst.chunks_exact_mut(w)) {
                    if flip {
                        interleaved_row(&t, src.iter().rev(), dst);
                    } else {
                        interleaved_row(&t, src.iter(), dst);
                    }
                }
            }
        }
    }
}

/// Where [`OutputWriter`] writes an image: three channel planes, one interleaved buffer, or
/// the one plane of a grey image's first channel.
enum Target<'a> {
    Planes([&'a mut [u8]; 3]),
    Interleaved(&'a mut [u8]),
    Grey(&'a mut [u8]),
}

/// The `h`x`w` grey plane `y` (rows mirrored when `flip`) through the table `t[0]` into `slot`.
fn grey_plane<T: bytemuck::Pod>(
    t: &[[T; 256]; 3],
    y: &[u8],
    (h, w): (usize, usize),
    flip: bool,
    slot: &mut [u8],
) {
    let out: &mut [T] = bytemuck::cast_slice_mut(slot);
    assert_eq!(out.len(), h * w, "slot size does not match the image");
    for (src, dst) in y[..h * w].chunks_exact(w).zip(out.chunks_exact_mut(w)) {
        grey_row(&t[0], src.iter().copied(), flip, dst);
    }
}

/// One row of a one-channel output: each source byte through `grey`, the row mirrored when
/// `flip`.
fn grey_row<T: Copy>(
    grey: &[T; 256],
    src: impl DoubleEndedIterator<Item = u8>,
    flip: bool,
    dst: &mut [T],
) {
    let put = |(v, d): (u8, &mut T)| *d = grey[usize::from(v)];
    if flip {
        src.rev().zip(dst).for_each(put);
    } else {
        src.zip(dst).for_each(put);
    }
}

/// The last `w - done` outputs of a row `row` written from its planes (fewer than 16; when
/// flipping, from the source pixels at the row's start): converted to RGB bytes as the
/// decoders convert them, then through the tables `t`.
fn tail_from_planes<T: bytemuck::Pod>(
    t: &[[T; 256]; 3],
    row: Planes<'_>,
    flip: bool,
    done: usize,
    [r, g, b]: [&mut [T]; 3],
) {
    let rest = r.len() - done;
    if rest == 0 {
        return;
    }
    let at = if flip { 0 } else { done };
    let mut rgb = [[0u8; 3]; 16];
    let tail = &mut rgb[..rest];
    row.slice(at..at + rest)
        .to_rgb(bytemuck::cast_slice_mut(tail));
    let (r, g, b) = (&mut r[done..], &mut g[done..], &mut b[done..]);
    if flip {
        planar_row(t, tail.iter().rev(), r, g, b);
    } else {
        planar_row(t, tail.iter(), r, g, b);
    }
}

/// The R, G and B of the 16 pixels of a row's planes from source pixel `s` (`row`: Y, Cb and
/// Cr, or with `grey` one plane three times), in output order (reversed when `flip`), as the
/// decoders compute them ([`ycc16`]) and clamp them to bytes (their saturating pack), in i16
/// lanes: what the one-pass writers convert.
///
/// # Safety
/// The CPU must support AVX2 (the callers are compiled for it).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn rgb16(
    row: [&[u8]; 3],
    s: usize,
    grey: bool,
    flip: bool,
) -> [std::arch::x86_64::__m256i; 3] {
    use std::arch::x86_64::*;
    // SAFETY: the caller promises AVX2; each load reads the 16 bytes sliced before it.
    unsafe {
        let reverse = _mm_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
        let load = |plane: &[u8]| {
            let p = &plane[s..s + 16];
            let v = _mm_loadu_si128(p.as_ptr().cast());
            if flip {
                _mm_shuffle_epi8(v, reverse)
            } else {
                v
            }
        };
        let rgb = if grey {
            [_mm256_cvtepu8_epi16(load(row[0])); 3]
        } else {
            ycc16(load(row[0]), load(row[1]), load(row[2]))
        };
        let (zero, max) = (_mm256_setzero_si256(), _mm256_set1_epi16(255));
        // Not `array::map`, compiled without AVX (see `sixteens`).
        let clamp = |v| _mm256_min_epi16(_mm256_max_epi16(v, zero), max);
        [clamp(rgb[0]), clamp(rgb[1]), clamp(rgb[2])]
    }
}

/// [`rgb16`] for the 32 pixels from source pixel `s`, in AVX-512's 32 i16 lanes
/// ([`ycc32`]): the same values, in output order.
///
/// # Safety
/// The CPU must support AVX-512 BW (the callers are compiled for it).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn rgb32(
    row: [&[u8]; 3],
    s: usize,
    grey: bool,
    flip: bool,
) -> [std::arch::x86_64::__m512i; 3] {
    use std::arch::x86_64::*;
    // SAFETY: the caller promises AVX-512 BW (and with it AVX2); each load reads the 32 bytes
    // sliced before it.
    unsafe {
        let reverse = _mm256_setr_epi8(
            15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8, 7,
            6, 5, 4, 3, 2, 1, 0,
        );
        let load = |plane: &[u8]| {
            let p = &plane[s..s + 32];
            let v = _mm256_loadu_si256(p.as_ptr().cast());
            if flip {
                // Each 16-byte half reversed, then the halves swapped.
                _mm256_permute4x64_epi64::<0x4E>(_mm256_shuffle_epi8(v, reverse))
            } else {
                v
            }
        };
        let rgb = if grey {
            [_mm512_cvtepu8_epi16(load(row[0])); 3]
        } else {
            ycc32(load(row[0]), load(row[1]), load(row[2]))
        };
        let (zero, max) = (_mm512_setzero_si512(), _mm512_set1_epi16(255));
        // Not `array::map`, compiled without AVX (see `sixteens`).
        let clamp = |v| _mm512_min_epi16(_mm512_max_epi16(v, zero), max);
        [clamp(rgb[0]), clamp(rgb[1]), clamp(rgb[2])]
    }
}

/// f32 output as the normalization's own float steps, per channel: the byte to a float
/// (`x / 255`, `x * k`, or as it is), then `(x - mean) / std` or `(x - mean) * k`, each an
/// IEEE operation on every lane, so 16 values are computed as the table's one is. Used only
/// where that gives the table's bits for all 256 values of every channel (checked when the
/// writer is made).
#[derive(Clone, Copy, Debug)]
struct F32Steps {
    to_float: F32Step,
    normalize: [[F32Step; 2]; 3],
}

/// One float step of [`F32Steps`].
#[derive(Clone, Copy, Debug, PartialEq)]
enum F32Step {
    Keep,
    Sub(f32),
    Mul(f32),
    Div(f32),
}

impl F32Step {
    fn apply(self, x: f32) -> f32 {
        match self {
            Self::Keep => x,
            Self::Sub(v) => x - v,
            Self::Mul(v) => x * v,
            Self::Div(v) => x / v,
        }
    }

    /// The step on 16 lanes.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn apply16(self, x: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
        use std::arch::x86_64::{_mm512_div_ps, _mm512_mul_ps, _mm512_set1_ps, _mm512_sub_ps};
        // SAFETY: the caller promises AVX-512 F.
        unsafe {
            match self {
                Self::Keep => x,
                Self::Sub(v) => _mm512_sub_ps(x, _mm512_set1_ps(v)),
                Self::Mul(v) => _mm512_mul_ps(x, _mm512_set1_ps(v)),
                Self::Div(v) => _mm512_div_ps(x, _mm512_set1_ps(v)),
            }
        }
    }
}

impl F32Steps {
    fn exact_for(table: &[[u32; 256]; 3], normalize: Option<Normalize>) -> Option<Self> {
        let steps = match normalize {
            None => Self {
                to_float: F32Step::Div(255.0),
                normalize: [[F32Step::Keep; 2]; 3],
            },
            Some(n) => {
                let to_float = match n.to_float {
                    ToFloat::Divide => F32Step::Div(255.0),
                    ToFloat::Multiply => F32Step::Mul((1.0f64 / 255.0) as f32),
                    ToFloat::ScaledStats => F32Step::Keep,
                    ToFloat::Table(_) => return None,
                };
                Self {
                    to_float,
                    normalize: std::array::from_fn(|c| match n.to_float {
                        ToFloat::ScaledStats => [
                            F32Step::Sub(n.mean[c] * 255.0),
                            F32Step::Mul(1.0 / (n.std[c] * 255.0)),
                        ],
                        _ => [F32Step::Sub(n.mean[c]), F32Step::Div(n.std[c])],
                    }),
                }
            }
        };
        let exact = (0..3).all(|c| {
            (0..256).all(|v| {
                let x = steps.to_float.apply(v as f32);
                let x = steps.normalize[c][1].apply(steps.normalize[c][0].apply(x));
                x.to_bits() == table[c][v]
            })
        });
        exact.then_some(steps)
    }

    /// The f32 outputs of one NCHW row given as planes before colour conversion (`row`: Y, Cb
    /// and Cr, or with `grey` one plane three times), 16 pixels a step: their R, G and B
    /// computed as the decoders compute them ([`ycc16`]), clamped to bytes as their pack
    /// clamps, then the steps; each plane gets a whole 64-byte line a step, streamed when the
    /// rows start on 64 bytes. Returns how many it wrote (the caller writes the rest).
    /// Safe: only calling it needs these features (`unsafe` at the call, where the CPU was
    /// checked); its loads read checked slices of the planes and its stores checked slices of
    /// the output rows.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,avx512f,avx512bw")]
    fn ycc_row_avx512(
        &self,
        row: [&[u8]; 3],
        grey: bool,
        flip: bool,
        planes: [&mut [u32]; 3],
    ) -> usize {
        use std::arch::x86_64::*;
        let w = row[0].len();
        assert!(planes.iter().all(|p| p.len() >= w));
        let stream = planes
            .iter()
            .all(|p| (p.as_ptr() as usize).is_multiple_of(64));
        let [r, g, b] = planes;
        let mut at = 0;
        while at + 16 <= w {
            let s = if flip { w - at - 16 } else { at };
            // SAFETY: AVX2 is enabled in this function.
            let rgb = unsafe { rgb16(row, s, grey, flip) };
            for (c, plane) in [&mut *r, &mut *g, &mut *b].into_iter().enumerate() {
                let x = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(rgb[c]));
                // SAFETY: AVX-512 F is enabled in this function.
                let x = unsafe {
                    let [sub, then] = self.normalize[c];
                    then.apply16(sub.apply16(self.to_float.apply16(x)))
                };
                let p = plane[at..at + 16].as_mut_ptr();
                // SAFETY: a 64-byte store of the 16 u32s sliced above; when `stream`, the row
                // starts on 64 bytes and `at` is a multiple of 16, so the store is aligned.
                unsafe {
                    if stream {
                        _mm512_stream_ps(p.cast(), x);
                    } else {
                        _mm512_storeu_ps(p.cast(), x);
                    }
                }
            }
            at += 16;
        }
        at
    }
}

/// bf16 output as `x * scale + bias` in f32 per channel, rounded to nearest even: two vector
/// operations instead of a table lookup per value. Used only where it gives exactly the bits of
/// the table (torchvision's `(x / 255 - mean) / std` in f32), which is checked for all 256
/// values of each channel when the writer is made (it holds for ImageNet's mean and std).
#[derive(Clone, Copy, Debug)]
struct Bf16Affine {
    scale: [f32; 3],
    bias: [f32; 3],
    /// The CPU converts to bf16 itself (AVX-512 BF16) and every output is zero or a normal
    /// float (the instruction flushes subnormals to zero, the table does not): 16 pixels a
    /// conversion ([`Self::row_avx512`]).
    convert: bool,
}

/// f32 to bf16 bits, rounding to nearest even (finite values), as the AVX2 code does it.
fn bf16_rne(x: f32) -> u16 {
    let b = x.to_bits();
    (b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16) as u16
}

/// Byte shuffles that gather channel `c` of 8 RGB pixels (24 bytes) into bytes 0..8:
/// `PICK[c][0]` from the first 16 bytes, `PICK[c][1]` from the last 8 (-1 gives a zero).
const PICK: [[[i8; 16]; 2]; 3] = {
    let mut pick = [[[-1i8; 16]; 2]; 3];
    let mut c = 0;
    while c < 3 {
        let mut i = 0;
        while i < 8 {
            let at = (c + 3 * i) as i8;
            if at < 16 {
                pick[c][0][i] = at;
            } else {
                pick[c][1][i] = at - 16;
            }
            i += 1;
        }
        c += 1;
    }
    pick
};

impl Bf16Affine {
    fn exact_for(table: &[[u32; 256]; 3], normalize: Option<Normalize>) -> Option<Self> {
        if !avx2() {
            return None;
        }
        let (mean, std) = normalize.map_or(([0.0; 3], [1.0; 3]), |n| (n.mean, n.std));
        let mut affine = Self {
            scale: std::array::from_fn(|c| (1.0 / (255.0 * f64::from(std[c]))) as f32),
            bias: std::array::from_fn(|c| (-f64::from(mean[c]) / f64::from(std[c])) as f32),
            convert: false,
        };
        let values = || {
            (0..3).flat_map(move |c| {
                (0..256).map(move |v| (c, v, v as f32 * affine.scale[c] + affine.bias[c]))
            })
        };
        let exact = values().all(|(c, v, x)| u32::from(bf16_rne(x)) == table[c][v]);
        affine.convert = avx512_bf16() && values().all(|(_, _, x)| x == 0.0 || x.is_normal());
        exact.then_some(affine)
    }

    /// Writes the outputs of one NCHW row in whole groups of 16 and returns how many.
    fn lead(
        &self,
        src: &[[u8; 3]],
        flip: bool,
        r: &mut [u16],
        g: &mut [u16],
        b: &mut [u16],
    ) -> usize {
        #[cfg(target_arch = "x86_64")]
        let done = {
            let bytes: &[u8] = bytemuck::cast_slice(src);
            if self.convert {
                // SAFETY: `convert` is set only when AVX-512 F, BW, VL and BF16 were detected
                // at run time (and AVX2 with them, which `exact_for` also checked).
                unsafe { self.row_avx512(bytes, flip, r, g, b) }
            } else {
                // SAFETY: `exact_for` returns an affine only when AVX2 was detected at run
                // time.
                unsafe { self.row_avx2(bytes, flip, r, g, b) }
            }
        };
        #[cfg(not(target_arch = "x86_64"))]
        let done = 0;
        done
    }

    /// [`Self::row_avx2`]'s outputs, bit for bit, with the CPU's own conversion to bf16
    /// (`vcvtneps2bf16`, round to nearest even, as [`bf16_rne`]): a channel of 16 pixels is one
    /// 512-bit product, sum and conversion instead of two 256-bit ones and the rounding done by
    /// hand in five integer operations each. 32 pixels a step (a whole line per plane, streamed
    /// as `row_avx2` streams), then 16; the table writes the rest.
    /// Safe: only calling it needs these features (`unsafe` at the call, where the CPU was
    /// checked); its loads read checked slices of `src`, and its stores are bounded by
    /// `sixteens`' assert on the planes' lengths.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512bf16")]
    fn row_avx512(
        &self,
        src: &[u8],
        flip: bool,
        r: &mut [u16],
        g: &mut [u16],
        b: &mut [u16],
    ) -> usize {
        use std::arch::x86_64::*;
        let picks = pick_vectors();
        let scale = self.scale.map(|s| _mm512_set1_ps(s));
        let bias = self.bias.map(|s| _mm512_set1_ps(s));
        let reverse = _mm_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
        // The bf16 bits of channel `c` of the 16 output pixels made from source pixels
        // `s..s + 16`, in output order.
        let sixteen = |s: usize, c: usize| {
            let px = &src[s * 3..s * 3 + 48];
            let mut bytes =
                _mm_unpacklo_epi64(gather8(&px[..24], picks[c]), gather8(&px[24..], picks[c]));
            if flip {
                bytes = _mm_shuffle_epi8(bytes, reverse);
            }
            let x = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes));
            let x = _mm512_add_ps(_mm512_mul_ps(x, scale[c]), bias[c]);
            // SAFETY: `__m256bh` and `__m256i` are both 256 bits of plain data.
            unsafe { std::mem::transmute::<__m256bh, __m256i>(_mm512_cvtneps_pbh(x)) }
        };
        let w = src.len() / 3;
        sixteens(w, flip, [r, g, b], |s| {
            [sixteen(s, 0), sixteen(s, 1), sixteen(s, 2)]
        })
    }

    /// [`Self::row_avx512`]'s outputs for a row given as planes before colour conversion
    /// (`row`: Y, Cb and Cr, or with `grey` one plane three times): 32 pixels a step (then
    /// 16), their R, G and B computed as the decoders compute them ([`ycc32`], [`ycc16`]),
    /// clamped to bytes as their saturating pack clamps, then the same product, sum and
    /// conversion to bf16. Returns the pixels written, in whole groups of 16 (the caller
    /// writes the rest).
    /// Safe: only calling it needs these features (`unsafe` at the call, where the CPU was
    /// checked); its loads read checked slices of the planes, and its stores are bounded by
    /// `sixteens`' assert on the planes' lengths.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512bf16")]
    fn ycc_row_avx512(
        &self,
        row: [&[u8]; 3],
        grey: bool,
        flip: bool,
        r: &mut [u16],
        g: &mut [u16],
        b: &mut [u16],
    ) -> usize {
        use std::arch::x86_64::*;
        let scale = self.scale.map(|s| _mm512_set1_ps(s));
        let bias = self.bias.map(|s| _mm512_set1_ps(s));
        // Channel `c`'s 16 values in i16 lanes to bf16.
        let convert = |v: __m256i, c: usize| {
            let x = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(v));
            let x = _mm512_add_ps(_mm512_mul_ps(x, scale[c]), bias[c]);
            // SAFETY: `__m256bh` and `__m256i` are both 256 bits of plain data.
            unsafe { std::mem::transmute::<__m256bh, __m256i>(_mm512_cvtneps_pbh(x)) }
        };
        let thirty_two = |s: usize| {
            // SAFETY: AVX-512 BW is enabled in this function.
            let rgb = unsafe { rgb32(row, s, grey, flip) };
            let channel = |c: usize| {
                let v = rgb[c];
                [
                    convert(_mm512_castsi512_si256(v), c),
                    convert(_mm512_extracti64x4_epi64::<1>(v), c),
                ]
            };
            [channel(0), channel(1), channel(2)]
        };
        let sixteen = |s: usize| {
            // SAFETY: AVX2 is enabled in this function.
            let rgb = unsafe { rgb16(row, s, grey, flip) };
            [convert(rgb[0], 0), convert(rgb[1], 1), convert(rgb[2], 2)]
        };
        groups(row[0].len(), flip, [r, g, b], thirty_two, sixteen)
    }

    /// The outputs of one row in whole groups of 16; returns how many it wrote (the table
    /// writes the rest): 32 pixels a step, then 16. A channel of 16 pixels is dealt from the
    /// 48 source bytes by three byte shuffles into its even pixels then its odd ones, so that
    /// each half widens to eight f32 lanes in place, and the odd half's bf16 bits (the high
    /// half of each rounded lane) are blended over the even half's, shifted down: the 16
    /// values come out in order, without packing or crossing lanes. The stores stream past the
    /// cache when the three rows are 32-byte aligned: a batch slot is written once and next
    /// read by the batch's consumer, long after, so reading each line in before writing it
    /// (what a plain store does) only adds memory traffic and evicts the decoder's working
    /// set. Each plane gets 64 consecutive bytes per step, a whole line when the rows are
    /// 64-byte aligned (a batch slot's are): streamed stores interleaved across the three
    /// planes 16 bytes at a time flushed partial lines and cost 11% of the engine path's
    /// throughput on a Zen 4 (BENCHMARKS.md, session 33).
    /// Safe: only calling it needs AVX2 (`unsafe` at the call, where the CPU was checked); its
    /// loads read checked slices of `src`, and its stores are bounded by `sixteens`' assert
    /// on the planes' lengths.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn row_avx2(
        &self,
        src: &[u8],
        flip: bool,
        r: &mut [u16],
        g: &mut [u16],
        b: &mut [u16],
    ) -> usize {
        use std::arch::x86_64::*;
        let w = src.len() / 3;
        let scale = self.scale.map(|s| _mm256_set1_ps(s));
        let bias = self.bias.map(|s| _mm256_set1_ps(s));
        let round = _mm256_set1_epi32(0x7FFF);
        let one = _mm256_set1_epi32(1);
        // SAFETY: plain loads of the 16-byte mask arrays.
        let deal = DEAL[usize::from(flip)]
            .map(|parts| parts.map(|m| unsafe { _mm_loadu_si128(m.as_ptr().cast()) }));
        // An f32 lane's bf16 bits, rounded to nearest even, in its high half.
        let rounded = |v: __m256i, c: usize| {
            let x = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(v), scale[c]), bias[c]);
            let bits = _mm256_castps_si256(x);
            let lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), one);
            _mm256_add_epi32(bits, _mm256_add_epi32(round, lsb))
        };
        // The bf16 bits of channel `c` of the 16 output pixels made from source pixels
        // `s..s + 16`, in output order.
        let sixteen = |s: usize, c: usize| {
            let px = &src[s * 3..s * 3 + 48];
            // SAFETY: three 16-byte loads inside the 48 bytes sliced above.
            let parts: [__m128i; 3] =
                std::array::from_fn(|q| unsafe { _mm_loadu_si128(px[16 * q..].as_ptr().cast()) });
            let dealt = _mm_or_si128(
                _mm_or_si128(
                    _mm_shuffle_epi8(parts[0], deal[c][0]),
                    _mm_shuffle_epi8(parts[1], deal[c][1]),
                ),
                _mm_shuffle_epi8(parts[2], deal[c][2]),
            );
            let even = rounded(_mm256_cvtepu8_epi32(dealt), c);
            let odd = rounded(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(dealt, dealt)), c);
            _mm256_blend_epi16(_mm256_srli_epi32(even, 16), odd, 0xAA)
        };
        sixteens(w, flip, [r, g, b], |s| {
            [sixteen(s, 0), sixteen(s, 1), sixteen(s, 2)]
        })
    }
}

/// Byte shuffles that deal channel `c` of 16 RGB pixels (48 bytes) in output order `j` into
/// its even outputs (bytes 0..8) then its odd ones (bytes 8..16): `DEAL[flip][c][q]` takes
/// what lies in source bytes `16q..16q + 16` (-1 gives a zero). With `flip`, output `j` is
/// source pixel `15 - j`.
const DEAL: [[[[i8; 16]; 3]; 3]; 2] = {
    let mut deal = [[[[-1i8; 16]; 3]; 3]; 2];
    let mut flip = 0;
    while flip < 2 {
        let mut c = 0;
        while c < 3 {
            let mut k = 0;
            while k < 16 {
                let j = if k < 8 { 2 * k } else { 2 * (k - 8) + 1 };
                let px = if flip == 1 { 15 - j } else { j };
                let at = 3 * px + c;
                deal[flip][c][at / 16][k] = (at % 16) as i8;
                k += 1;
            }
            c += 1;
        }
        flip += 1;
    }
    deal
};

/// [`PICK`]'s shuffles as vectors.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn pick_vectors() -> [(std::arch::x86_64::__m128i, std::arch::x86_64::__m128i); 3] {
    use std::arch::x86_64::_mm_loadu_si128;
    // SAFETY: plain loads of the 16-byte mask arrays.
    PICK.map(|[lo, hi]| unsafe {
        (
            _mm_loadu_si128(lo.as_ptr().cast()),
            _mm_loadu_si128(hi.as_ptr().cast()),
        )
    })
}

/// Channel `c` of the 8 RGB pixels that start `px` (24 bytes at least) in bytes 0..8, with
/// `pick` = `pick_vectors()[c]`: bytes 0..16 shuffled by one mask, 16..24 by the other.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn gather8(
    px: &[u8],
    pick: (std::arch::x86_64::__m128i, std::arch::x86_64::__m128i),
) -> std::arch::x86_64::__m128i {
    use std::arch::x86_64::{_mm_loadl_epi64, _mm_loadu_si128, _mm_or_si128, _mm_shuffle_epi8};
    // SAFETY: `px` has 24 bytes: 16 are loaded from its start and 8 from byte 16.
    let (lo, hi) = unsafe {
        (
            _mm_loadu_si128(px.as_ptr().cast()),
            _mm_loadl_epi64(px[16..24].as_ptr().cast()),
        )
    };
    _mm_or_si128(_mm_shuffle_epi8(lo, pick.0), _mm_shuffle_epi8(hi, pick.1))
}

/// The bf16 writers' whole steps: 32 output pixels a step, then 16, the three planes' 16
/// values of a group from `sixteen(first source pixel)` (in output order); returns the pixels
/// written. See [`groups`], which this runs with each 32 as two 16s.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn sixteens(
    w: usize,
    flip: bool,
    planes: [&mut [u16]; 3],
    sixteen: impl Fn(usize) -> [std::arch::x86_64::__m256i; 3],
) -> usize {
    let thirty_two = |s: usize| {
        let (x, y) = if flip { (s + 16, s) } else { (s, s + 16) };
        let (v0, v1) = (sixteen(x), sixteen(y));
        [[v0[0], v1[0]], [v0[1], v1[1]], [v0[2], v1[2]]]
    };
    groups(w, flip, planes, thirty_two, &sixteen)
}

/// The bf16 writers' whole steps: 32 output pixels a step, each plane's two groups of 16 from
/// `thirty_two(first source pixel)` (in output order), then 16 from `sixteen`; returns the
/// pixels written. Each plane gets 64 consecutive bytes a step, a whole cache line when the
/// rows are aligned to it, so a streamed line leaves the write-combining buffer whole; the
/// stores stream when the three rows start on 32 bytes. (A caller's closures list the three
/// channels as an array literal: `array::from_fn`, compiled without AVX, cannot inline a
/// closure compiled with it, and each channel's vector would go through memory.)
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn groups(
    w: usize,
    flip: bool,
    planes: [&mut [u16]; 3],
    thirty_two: impl Fn(usize) -> [[std::arch::x86_64::__m256i; 2]; 3],
    sixteen: impl Fn(usize) -> [std::arch::x86_64::__m256i; 3],
) -> usize {
    use std::arch::x86_64::{__m256i, _mm256_storeu_si256, _mm256_stream_si256};
    assert!(planes.iter().all(|p| p.len() >= w));
    let stream = planes
        .iter()
        .all(|p| (p.as_ptr() as usize).is_multiple_of(32));
    let store = |p: *mut u16, v: __m256i| {
        // SAFETY: every caller passes a pointer to 16 in-bounds u16s (32 bytes, sliced at the
        // call); when `stream`, each row starts on 32 bytes and the offset is a multiple of 16
        // u16s, so the store is 32-byte aligned as the stream requires.
        unsafe {
            if stream {
                _mm256_stream_si256(p.cast(), v);
            } else {
                _mm256_storeu_si256(p.cast(), v);
            }
        }
    };
    // Source pixel of output `at`'s group of `n` (reversed when flipping).
    let first = |at: usize, n: usize| if flip { w - at - n } else { at };
    let mut at = 0;
    let [r, g, b] = planes;
    while at + 32 <= w {
        let v = thirty_two(first(at, 32));
        for (c, plane) in [&mut *r, &mut *g, &mut *b].into_iter().enumerate() {
            let p = plane[at..at + 32].as_mut_ptr();
            store(p, v[c][0]);
            // SAFETY: 16 of the 32 u16s sliced above.
            store(unsafe { p.add(16) }, v[c][1]);
        }
        at += 32;
    }
    if at + 16 <= w {
        let v = sixteen(first(at, 16));
        for (c, plane) in [&mut *r, &mut *g, &mut *b].into_iter().enumerate() {
            store(plane[at..at + 16].as_mut_ptr(), v[c]);
        }
        at += 16;
    }
    at
}

/// Orders the writers' streaming stores before whatever this thread does next (handing the
/// slot on), as plain stores are ordered.
fn stream_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86_64's baseline; `sfence` has no operands.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// AVX-512 F, BW and VL with BF16 (Zen 4, Sapphire Rapids and later), and AVX2.
fn avx512_bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx512bf16")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512f")
        && avx2();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// AVX-512 F and BW, and AVX2.
fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && avx2();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx2");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// No vector kernel: the tables write every output.
fn no_lead<T>(_: &[[u8; 3]], _: bool, _: &mut [T], _: &mut [T], _: &mut [T]) -> usize {
    0
}

/// One output row of planar (NCHW) data: channel `c` of each pixel through `t[c]`.
///
/// Sixteen pixels at a time, so that each plane gets 64 consecutive bytes per group (a whole
/// cache line of f32s) instead of narrow stores interleaved across the planes (the stores,
/// not the lookups, bound this loop).
#[inline(always)]
fn planar_row<'a, T: bytemuck::Pod>(
    t: &[[T; 256]; 3],
    src: impl Iterator<Item = &'a [u8; 3]>,
    r: &mut [T],
    g: &mut [T],
    b: &mut [T],
) {
    let groups = r.len() / 16;
    let (r16, r1) = r.split_at_mut(groups * 16);
    let (g16, g1) = g.split_at_mut(groups * 16);
    let (b16, b1) = b.split_at_mut(groups * 16);
    let r16: &mut [[T; 16]] = as_sixteens(r16);
    let g16: &mut [[T; 16]] = as_sixteens(g16);
    let b16: &mut [[T; 16]] = as_sixteens(b16);
    // Sixteen f32s make a 64-byte group: aligned, it streams past the cache as one whole line
    // (see `Bf16Affine::row_avx2`). Only whole lines stream well: 16 u16s a group, half lines
    // interleaved across the planes, measured 9% slower than plain stores (BENCHMARKS.md,
    // session 33), so the narrower types store plainly.
    let stream = std::mem::size_of::<[T; 16]>() == 64
        && [r16.as_ptr(), g16.as_ptr(), b16.as_ptr()]
            .iter()
            .all(|p| (*p as usize).is_multiple_of(64));
    let mut src = src;
    for ((r, g), b) in r16.iter_mut().zip(g16).zip(b16) {
        let p: [&[u8; 3]; 16] = std::array::from_fn(|_| src.next().expect("a pixel per output"));
        put(
            r,
            std::array::from_fn(|i| t[0][usize::from(p[i][0])]),
            stream,
        );
        put(
            g,
            std::array::from_fn(|i| t[1][usize::from(p[i][1])]),
            stream,
        );
        put(
            b,
            std::array::from_fn(|i| t[2][usize::from(p[i][2])]),
            stream,
        );
    }
    for (((px, r), g), b) in src.zip(r1).zip(g1).zip(b1) {
        *r = t[0][usize::from(px[0])];
        *g = t[1][usize::from(px[1])];
        *b = t[2][usize::from(px[2])];
    }
}

/// `*dst = v`, through four consecutive 16-byte streaming stores when `stream` (which the
/// caller sets only for 64-byte groups at 64-byte aligned addresses).
#[inline(always)]
fn put<T: bytemuck::Pod>(dst: &mut [T; 16], v: [T; 16], stream: bool) {
    #[cfg(target_arch = "x86_64")]
    if stream && std::mem::size_of::<[T; 16]>() == 64 {
        use std::arch::x86_64::{_mm_loadu_si128, _mm_stream_si128};
        let (d, v) = (dst.as_mut_ptr().cast::<u8>(), v.as_ptr().cast::<u8>());
        // SAFETY: SSE2 is part of x86_64's baseline; `v` and `*dst` are 64 bytes each, the
        // loads are unaligned and the caller guarantees `dst` is 64-byte aligned, so each
        // quarter is 16-byte aligned for its store.
        unsafe {
            for k in 0..4 {
                _mm_stream_si128(d.add(16 * k).cast(), _mm_loadu_si128(v.add(16 * k).cast()));
            }
        }
        return;
    }
    *dst = v;
}

/// `s` (a multiple of 16 long) as groups of 16.
fn as_sixteens<T: bytemuck::Pod>(s: &mut [T]) -> &mut [[T; 16]] {
    bytemuck::cast_slice_mut(s)
}

/// One output row of interleaved (NHWC) data.
#[inline(always)]
fn interleaved_row<'a, T: Copy>(
    t: &[[T; 256]; 3],
    src: impl Iterator<Item = &'a [u8; 3]>,
    dst: &mut [[T; 3]],
) {
    for (px, out) in src.zip(dst) {
        *out = [
            t[0][usize::from(px[0])],
            t[1][usize::from(px[1])],
            t[2][usize::from(px[2])],
        ];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cv2_linear` gives OpenCV's own bytes (`tests/fixtures/cv2_linear`, written by OpenCV's
    /// `cv2.resize(..., INTER_LINEAR)`): whole resizes down and up, exact halves and doubles,
    /// crops resized (a view), and crops of a whole resize (a window resampled in place).
    #[test]
    fn cv2_linear_gives_opencvs_bytes() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cv2_linear");
        let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
        let cases: serde_json::Value = serde_json::from_slice(&read("cases.json")).unwrap();
        let (src, expected) = (read("src.rgb"), read("expected.rgb"));
        let at = |v: &serde_json::Value, k: usize| v[k].as_u64().unwrap() as u32;
        let dim = |k: &str| cases[k].as_u64().unwrap() as u32;
        let (w, h) = (dim("width"), dim("height"));
        let all = cases["cases"].as_array().unwrap();
        assert_eq!(all.len(), 15);
        for case in all {
            let (win, size) = (&case["window"], &case["size"]);
            let (ow, oh) = (at(size, 0), at(size, 1));
            let crop = match case["kind"].as_str().unwrap() {
                "view" => CropBox {
                    left: at(win, 0).into(),
                    top: at(win, 1).into(),
                    width: at(win, 2).into(),
                    height: at(win, 3).into(),
                    view: true,
                },
                // A `fw`x`fh` resize of the whole image, cut at (`ox`, `oy`): the window
                // in source pixels.
                _ => {
                    let (fw, fh, ox, oy) = (at(win, 0), at(win, 1), at(win, 2), at(win, 3));
                    let (sx, sy) = (f64::from(w) / f64::from(fw), f64::from(h) / f64::from(fh));
                    CropBox {
                        left: f64::from(ox) * sx,
                        top: f64::from(oy) * sy,
                        width: f64::from(ow) * sx,
                        height: f64::from(oh) * sy,
                        view: false,
                    }
                }
            };
            let start = case["offset"].as_u64().unwrap() as usize;
            let want = &expected[start..start + case["len"].as_u64().unwrap() as usize];
            let mut r = Resampler::new(oh, ow);
            let got = r
                .run_with(&src, w, h, &crop, Interpolation::Cv2Linear)
                .unwrap();
            assert!(got == want, "{case}");
        }
    }

    /// A grey image (three equal channels) resampled by OpenCV's rules (two-tap, area,
    /// cubic) with the resampler told it is grey (one channel computed, copied to the other two) gives the
    /// bytes of the three-channel arithmetic: shrinking and enlarging, views and windows of a
    /// whole resize, every rule.
    #[test]
    fn a_grey_image_resampled_as_grey_gives_the_bytes_of_its_three_channels() {
        let (w, h) = (97u32, 61u32);
        let grey: Vec<u8> = (0..w * h)
            .flat_map(|i| {
                let v = ((i * 37 + (i / w) * 11) % 251) as u8;
                [v, v, v]
            })
            .collect();
        let view = |left: u32, top: u32, width: u32, height: u32| CropBox {
            left: left.into(),
            top: top.into(),
            width: width.into(),
            height: height.into(),
            view: true,
        };
        let crops = [
            (CropBox::full(w, h), (40, 30)),
            (CropBox::full(w, h), (150, 90)),
            (
                CropBox {
                    left: 10.0,
                    top: 7.0,
                    width: 33.0,
                    height: 20.0,
                    view: true,
                },
                (64, 48),
            ),
            (
                CropBox {
                    left: 12.5,
                    top: 3.25,
                    width: 50.0,
                    height: 40.0,
                    view: false,
                },
                (25, 20),
            ),
            // Whole cells of 2x2 and 3x3 (OpenCV's integer sums for `INTER_AREA`).
            (view(4, 9, 60, 40), (30, 20)),
            (view(2, 1, 90, 60), (30, 20)),
        ];
        for interpolation in [
            Interpolation::Cv2Linear,
            Interpolation::Cv2Nearest,
            Interpolation::Cv2Area,
            Interpolation::Cv2Cubic,
        ] {
            for (crop, (ow, oh)) in &crops {
                let mut r = Resampler::new(*oh, *ow);
                let want = r
                    .run_with(&grey, w, h, crop, interpolation)
                    .unwrap()
                    .to_vec();
                r.set_grey(true);
                let got = r.run_with(&grey, w, h, crop, interpolation).unwrap();
                assert!(got == want, "{interpolation:?} {crop:?} to {ow}x{oh}");
            }
        }
    }

    /// The CPU path decodes only `footprint`'s pixels of a baseline JPEG into a buffer laid
    /// out as the whole image (the rest holds whatever the previous sample left): the
    /// resampled output must be exactly that of the whole image, for every filter that has a
    /// footprint, windows cut out or resampled in place, shrinking and enlarging.
    #[test]
    fn resampling_reads_nothing_outside_its_footprint_and_rows_read() {
        use hpuload_decoders::jpeg::Region;
        use hpuload_decoders::{Decode, JpegDecoder};
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("decoders/tests/fixtures");
        let mut jpeg = JpegDecoder::default();
        let mut state = 99u64;
        let mut next = |n: u32| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            ((state >> 33) % u64::from(n)) as u32
        };
        let mut checked = 0;
        for name in [
            "s420_256x200",
            "s422_123x77",
            "s440_256x200",
            "s444_61x47",
            "gray_256x200",
        ] {
            let bytes = std::fs::read(dir.join(format!("{name}.jpg"))).unwrap();
            let mut whole = Vec::new();
            let info = jpeg.decode(&bytes, &mut whole).unwrap();
            let (w, h) = (info.width, info.height);
            let (_, parsed) = jpeg.probe_parsed(&bytes).unwrap();
            let mut part = vec![0xA5u8; whole.len()];
            for round in 0..60 {
                let (cw, ch) = (1 + next(w), 1 + next(h));
                let view = round % 3 == 0;
                // A window resampled in place may start and end between pixels.
                let (fx, fy) = if view {
                    (0.0, 0.0)
                } else {
                    (f64::from(next(100)) / 100.0, f64::from(next(100)) / 100.0)
                };
                let (left, top) = (f64::from(next(w - cw + 1)), f64::from(next(h - ch + 1)));
                let crop = CropBox {
                    left: left + fx / 2.0,
                    top: top + fy / 2.0,
                    width: (f64::from(cw) - fx).max(0.5),
                    height: (f64::from(ch) - fy).max(0.5),
                    view,
                };
                let filter = [
                    Interpolation::Bilinear,
                    Interpolation::Bicubic,
                    Interpolation::BilinearNoAntialias,
                    Interpolation::Cv2Linear,
                ][(round / 3) % 4];
                let (ow, oh) = (
                    [224, 17, cw][next(3) as usize],
                    [224, 9, ch][next(3) as usize],
                );
                let mut r = Resampler::new(oh, ow);
                let want = r.run_with(&whole, w, h, &crop, filter).unwrap().to_vec();
                let (x0, y0, x1, y1) = r.footprint(w, h, &crop, filter);
                let region = Region {
                    x: x0,
                    y: y0,
                    width: x1 - x0,
                    height: y1 - y0,
                };
                jpeg.decode_region_in_place(&bytes, &parsed, region, &mut part)
                    .unwrap();
                let got = r.run_with(&part, w, h, &crop, filter).unwrap();
                assert_eq!(got, &want[..], "{name} {crop:?} to {ow}x{oh} {filter:?}");
                // Of the footprint, only the rows `rows_read` names (the video path converts
                // no others): the rest of it stale too.
                if let Some(rows) = r.rows_read(h, &crop, filter) {
                    let mut sparse = vec![0x5Au8; whole.len()];
                    let stride = w as usize * 3;
                    let columns = x0 as usize * 3..x1 as usize * 3;
                    for row in rows {
                        assert!((y0 as usize..y1 as usize).contains(&row), "{row} outside");
                        let line = row * stride..(row + 1) * stride;
                        sparse[line.clone()][columns.clone()]
                            .copy_from_slice(&whole[line][columns.clone()]);
                    }
                    let got = r.run_with(&sparse, w, h, &crop, filter).unwrap();
                    assert_eq!(got, &want[..], "{name} {crop:?} to {ow}x{oh}: rows read");
                }
                // The next round's stale pixels outside its footprint: a pattern, not this
                // image.
                part.iter_mut()
                    .step_by(7)
                    .for_each(|v| *v = v.wrapping_add(91));
                checked += 1;
            }
        }
        assert_eq!(checked, 300);
    }

    #[test]
    fn bilinear_without_antialias_gives_torchs_interpolate_rounded_shrinking_and_growing() {
        // One channel of a 4x3 image (the same values in R, G and B), and torch 2.15's
        // `interpolate(mode="bilinear", align_corners=False, antialias=False)`, rounded.
        let grey = [0u8, 100, 200, 50, 255, 0, 30, 90, 10, 20, 40, 80];
        let src: Vec<u8> = grey.iter().flat_map(|&v| [v, v, v]).collect();
        let whole = CropBox {
            left: 0.0,
            top: 0.0,
            width: 4.0,
            height: 3.0,
            view: false,
        };
        for (h, w, want) in [
            (2, 3, vec![66, 116, 76, 62, 26, 75]),
            (
                5,
                7,
                vec![
                    0, 36, 93, 150, 189, 104, 50, 102, 87, 63, 96, 127, 90, 66, 255, 164, 18, 15,
                    34, 69, 90, 108, 74, 19, 24, 39, 67, 84, 10, 14, 19, 30, 43, 66, 80,
                ],
            ),
        ] {
            let mut r = Resampler::new(h, w);
            let out = r
                .run_with(&src, 4, 3, &whole, Interpolation::BilinearNoAntialias)
                .unwrap();
            let got: Vec<u8> = out.chunks_exact(3).map(|p| p[0]).collect();
            assert_eq!(got, want, "{h}x{w}");
        }
    }

    #[test]
    fn nchw_flip_and_normalize_place_each_value() {
        // 1x2 image: pixel0 = (0, 51, 255), pixel1 = (255, 102, 0).
        let rgb = [0, 51, 255, 255, 102, 0];
        let w = OutputWriter::new(
            Dtype::F32,
            Layout::Nchw,
            Some(Normalize::new([0.5, 0.0, 0.0], [0.5, 1.0, 2.0])),
        );
        let mut slot = [0u8; 6 * 4];
        w.write(&rgb, 1, 2, true, &mut slot);
        let got: &[f32] = bytemuck::cast_slice(&slot);
        // Flipped: x=0 shows pixel1. R plane, G plane, B plane.
        assert_eq!(got, &[1.0, -1.0, 0.4, 0.2, 0.0, 0.5]);
    }

    /// `x / 127.5 - 1` in f64, then cast to f32, as NumPy computes diffusers' textual
    /// inversion images: no f32 steps give these floats for every byte.
    fn textual_inversion_values() -> [[f32; 256]; 3] {
        let row: [f32; 256] = std::array::from_fn(|v| (v as f64 / 127.5 - 1.0) as f32);
        [row; 3]
    }

    #[test]
    fn a_table_of_byte_values_is_written_as_given_in_every_layout_and_dtype() {
        let values = textual_inversion_values();
        let n = Normalize {
            to_float: ToFloat::Table(ByteValues::new(values)),
            ..Normalize::new([0.0; 3], [1.0; 3])
        };
        // ToTensor then Normalize(0.5, 0.5), the nearest torchvision steps, differ in the last
        // bit for some bytes: the table is what is written, not those.
        let steps = Normalize::new([0.5; 3], [0.5; 3]);
        assert!((0..=255u8).any(|v| steps.value(0, v, Dtype::F32) != values[0][usize::from(v)]));
        let rgb: Vec<u8> = (0..=255u8).flat_map(|v| [v, 255 - v, v / 2]).collect();
        for layout in [Layout::Nchw, Layout::Nhwc] {
            let writer = OutputWriter::new(Dtype::F32, layout, Some(n));
            let mut slot = vec![0u8; 256 * 3 * 4];
            writer.write(&rgb, 16, 16, false, &mut slot);
            let got: &[f32] = bytemuck::cast_slice(&slot);
            for (p, px) in rgb.chunks_exact(3).enumerate() {
                for (c, &v) in px.iter().enumerate() {
                    let at = match layout {
                        Layout::Nchw => c * 256 + p,
                        Layout::Nhwc => p * 3 + c,
                    };
                    assert_eq!(got[at].to_bits(), values[c][usize::from(v)].to_bits());
                }
            }
        }
        let writer = OutputWriter::new(Dtype::Bf16, Layout::Nchw, Some(n));
        let mut slot = vec![0u8; 256 * 3 * 2];
        writer.write(&rgb, 16, 16, false, &mut slot);
        let got: &[u16] = bytemuck::cast_slice(&slot);
        assert_eq!(got[255], half::bf16::from_f32(values[0][255]).to_bits());
    }

    #[test]
    fn byte_values_read_one_row_for_every_channel_and_refuse_other_shapes() {
        let row: Vec<f32> = textual_inversion_values()[0].to_vec();
        let one: ByteValues = serde_json::from_value(serde_json::json!([row])).unwrap();
        assert_eq!(one, ByteValues::new(textual_inversion_values()));
        // Interned: the same table is one allocation.
        assert!(std::ptr::eq(
            one.0,
            ByteValues::new(textual_inversion_values()).0
        ));
        let short = serde_json::json!([row[..255].to_vec()]);
        assert!(serde_json::from_value::<ByteValues>(short).is_err());
        let two = serde_json::json!([row.clone(), row.clone()]);
        assert!(serde_json::from_value::<ByteValues>(two).is_err());
        let n: Normalize = serde_json::from_value(serde_json::json!({
            "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0], "to_float": {"table": [row]}
        }))
        .unwrap();
        assert_eq!(n.value(2, 255, Dtype::F32), 1.0);
        assert_eq!(n.value(1, 0, Dtype::F32), -1.0);
    }

    /// A zeroed byte buffer whose start is `shift` bytes past a 64-byte boundary, so that a
    /// test can make the writers take their streamed (aligned) or their plain stores.
    struct AlignedSlot {
        storage: Vec<u8>,
        at: usize,
        len: usize,
    }

    impl AlignedSlot {
        fn new(len: usize, shift: usize) -> Self {
            let storage = vec![0u8; len + 64 + shift];
            let at = storage.as_ptr().align_offset(64) + shift;
            Self { storage, at, len }
        }

        fn bytes(&mut self) -> &mut [u8] {
            &mut self.storage[self.at..self.at + self.len]
        }
    }

    #[test]
    fn every_pixel_lands_in_place_for_widths_that_are_not_a_multiple_of_sixteen() {
        let (mean, std) = ([0.485f32, 0.456, 0.406], [0.229f32, 0.224, 0.225]);
        let sizes = [
            (3, 7),
            (2, 4),
            (1, 9),
            (4, 1),
            (2, 16),
            (3, 17),
            (2, 33),
            (2, 48),
        ];
        for (h, w) in sizes {
            let rgb: Vec<u8> = (0..h * w * 3).map(|i| (i * 37 % 251) as u8).collect();
            let cases = [Layout::Nchw, Layout::Nhwc]
                .into_iter()
                .flat_map(|l| [(l, false, 0), (l, true, 0), (l, false, 4), (l, true, 4)]);
            for (layout, flip, shift) in cases {
                let writer = OutputWriter::new(Dtype::F32, layout, Some(Normalize::new(mean, std)));
                let mut slot = AlignedSlot::new(h * w * 3 * 4, shift);
                writer.write(&rgb, h, w, flip, slot.bytes());
                let got: &[f32] = bytemuck::cast_slice(slot.bytes());
                for (y, x, c) in (0..h)
                    .flat_map(|y| (0..w).map(move |x| (y, x)))
                    .flat_map(|(y, x)| (0..3).map(move |c| (y, x, c)))
                {
                    let sx = if flip { w - 1 - x } else { x };
                    let v = f32::from(rgb[(y * w + sx) * 3 + c]);
                    let want = (v / 255.0 - mean[c]) / std[c];
                    let at = match layout {
                        Layout::Nchw => c * h * w + y * w + x,
                        Layout::Nhwc => (y * w + x) * 3 + c,
                    };
                    assert_eq!(
                        got[at], want,
                        "{h}x{w} {layout:?} flip={flip} shift={shift} at ({y},{x},{c})"
                    );
                }
            }
        }
    }

    #[test]
    fn vector_bf16_path_gives_the_table_bits_for_every_width_and_flip() {
        let norm = Some(Normalize::imagenet());
        let fast = OutputWriter::new(Dtype::Bf16, Layout::Nchw, norm);
        if fast.affine.is_none() {
            assert!(
                !avx2(),
                "ImageNet's mean and std are exact in the vector path"
            );
            return;
        }
        let table_only = OutputWriter {
            affine: None,
            ..fast.clone()
        };
        // The AVX2 writer, and the AVX-512 one where the CPU has it (its remainders go to the
        // AVX2 one).
        let affine = fast.affine.expect("checked above");
        let mut writers = vec![OutputWriter {
            affine: Some(Bf16Affine {
                convert: false,
                ..affine
            }),
            ..fast.clone()
        }];
        if affine.convert {
            writers.push(fast.clone());
        } else {
            assert!(!avx512_bf16(), "ImageNet's outputs are all normal floats");
        }
        for fast in &writers {
            // Widths that take each step (32 and 16 pixels, then the table), at a 64-byte
            // aligned slot (the streamed stores) and at one 2 bytes past it (plain stores).
            for w in [
                1, 7, 8, 9, 15, 16, 17, 23, 24, 31, 32, 33, 47, 48, 56, 57, 64, 224,
            ] {
                let h = 3;
                let rgb: Vec<u8> = (0..h * w * 3).map(|i| (i * 97 % 256) as u8).collect();
                for (flip, shift) in [(false, 0), (true, 0), (false, 2), (true, 2)] {
                    let mut a = AlignedSlot::new(h * w * 6, shift);
                    let mut b = vec![0u8; h * w * 6];
                    fast.write(&rgb, h, w, flip, a.bytes());
                    table_only.write(&rgb, h, w, flip, &mut b);
                    let convert = fast.affine.is_some_and(|a| a.convert);
                    assert_eq!(
                        a.bytes(),
                        &b[..],
                        "width {w}, flip {flip}, shift {shift}, AVX-512 {convert}"
                    );
                }
            }
            // Every value of every channel.
            let rgb: Vec<u8> = (0..=255u8).flat_map(|v| [v, v, v]).collect();
            let (mut a, mut b) = (vec![0u8; 256 * 6], vec![0u8; 256 * 6]);
            fast.write(&rgb, 1, 256, false, &mut a);
            table_only.write(&rgb, 1, 256, false, &mut b);
            assert_eq!(a, b);
        }
    }

    #[test]
    fn resampled_planes_write_the_bits_of_their_rgb_written_for_every_width_flip_and_grey() {
        let imagenet = Normalize::imagenet();
        let with = |to_float| {
            Some(Normalize {
                to_float,
                ..imagenet
            })
        };
        for (dtype, normalize) in [
            (Dtype::Bf16, Some(imagenet)),
            (Dtype::F32, Some(imagenet)),
            (Dtype::F32, None),
            (Dtype::F32, with(ToFloat::Multiply)),
            (Dtype::F32, with(ToFloat::ScaledStats)),
        ] {
            let fast = OutputWriter::new(dtype, Layout::Nchw, normalize);
            resampled_planes_write_their_rgb_written(&fast, dtype);
        }
    }

    /// The one-pass write from planes against the decoders' RGB bytes written by the tables.
    fn resampled_planes_write_their_rgb_written(fast: &OutputWriter, dtype: Dtype) {
        let size = dtype.size();
        let table_only = OutputWriter {
            affine: None,
            f32_steps: None,
            ..fast.clone()
        };
        // Two-pass reference: the decoders' RGB bytes, then the tables.
        let two_pass = |planes: Planes<'_>, h: usize, w: usize, flip: bool| {
            let mut rgb = vec![0u8; h * w * 3];
            planes.to_rgb(&mut rgb);
            let mut out = vec![0u8; h * w * 3 * size];
            table_only.write(&rgb, h, w, flip, &mut out);
            out
        };
        let fused = |planes: Planes<'_>, h: usize, w: usize, flip: bool, shift: usize| {
            let mut a = AlignedSlot::new(h * w * 3 * size, shift);
            let written = fast.write_resampled(planes, h, w, flip, a.bytes());
            written.then(|| a.bytes().to_vec())
        };
        if fused(Planes::Grey(&[0]), 1, 1, false, 0).is_none() {
            let wanted = match dtype {
                Dtype::Bf16 => avx512_bf16(),
                _ => avx512(),
            };
            assert!(
                !wanted,
                "{dtype:?}: the one-pass write is there wherever its CPU is"
            );
            return;
        }
        // Widths that take each step (32 and 16 pixels, then the tables), aligned slots (the
        // streamed stores) and unaligned ones, colour and grey.
        for w in [1, 7, 15, 16, 17, 31, 32, 33, 47, 48, 57, 64, 224] {
            let h = 3;
            let plane = |k: usize| -> Vec<u8> {
                (0..h * w)
                    .map(|i| ((i * (97 + 60 * k) + 31 * k) % 256) as u8)
                    .collect()
            };
            let (y, cb, cr) = (plane(0), plane(1), plane(2));
            for planes in [Planes::Ycc([&y, &cb, &cr]), Planes::Grey(&y)] {
                for (flip, shift) in [(false, 0), (true, 0), (false, size), (true, size)] {
                    assert_eq!(
                        fused(planes, h, w, flip, shift).expect("written above"),
                        two_pass(planes, h, w, flip),
                        "{dtype:?}, width {w}, flip {flip}, shift {shift}, {planes:?}"
                    );
                }
            }
        }
        // Every chroma pair at luma levels that take R, G and B past both ends of a byte.
        let (cb, cr): (Vec<u8>, Vec<u8>) = (0..=255u8)
            .flat_map(|b| (0..=255u8).map(move |r| (b, r)))
            .unzip();
        for level in [0u8, 1, 40, 128, 220, 255] {
            let y = vec![level; 256 * 256];
            let planes = Planes::Ycc([&y, &cb, &cr]);
            assert_eq!(
                fused(planes, 256, 256, false, 0).expect("written above"),
                two_pass(planes, 256, 256, false),
                "{dtype:?}, luma {level}"
            );
        }
    }

    #[test]
    fn nhwc_u8_is_a_copy_and_bf16_rounds_to_nearest() {
        let rgb = [1, 2, 3, 4, 5, 6];
        let mut slot = [0u8; 6];
        OutputWriter::new(Dtype::U8, Layout::Nhwc, None).write(&rgb, 1, 2, false, &mut slot);
        assert_eq!(slot, rgb);
        let mut slot = [0u8; 12];
        OutputWriter::new(Dtype::Bf16, Layout::Nhwc, None).write(&rgb, 1, 2, false, &mut slot);
        let got: &[u16] = bytemuck::cast_slice(&slot);
        assert_eq!(got[0], half::bf16::from_f32(1.0 / 255.0).to_bits());
    }

    fn load_png(path: &std::path::Path) -> (u32, u32, Vec<u8>) {
        let img = image::open(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .to_rgb8();
        (img.width(), img.height(), img.into_raw())
    }

    /// Compares against `Pillow: img.crop(box).resize(size, BILINEAR)` outputs made once by
    /// tests/fixtures/make_reference.py. On a mismatch the output is written next to the
    /// target folder for a look.
    #[test]
    fn crop_then_resize_matches_pillow_within_one_level() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let (sw, sh, src) = load_png(&dir.join("photo_160x120.png"));
        let mut tested = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let Some(spec) = name
                .strip_prefix("crop_")
                .and_then(|s| s.strip_suffix(".png"))
            else {
                continue;
            };
            // crop_L_T_W_H_to_OWxOH
            let (bx, out) = spec.split_once("_to_").unwrap();
            let b: Vec<u32> = bx.split('_').map(|v| v.parse().unwrap()).collect();
            let (ow, oh) = out
                .split_once('x')
                .map(|(w, h)| (w.parse::<u32>().unwrap(), h.parse::<u32>().unwrap()))
                .unwrap();
            let (_, _, want) = load_png(&dir.join(&name));
            let crop = CropBox {
                left: b[0].into(),
                top: b[1].into(),
                width: b[2].into(),
                height: b[3].into(),
                view: true,
            };
            let mut r = Resampler::new(oh, ow);
            let got = r.run(&src, sw, sh, &crop).unwrap();
            let worst = got
                .iter()
                .zip(&want)
                .map(|(a, b)| a.abs_diff(*b))
                .max()
                .unwrap();
            if worst > 1 {
                let path = std::env::temp_dir().join(format!("hpuload-mismatch-{name}"));
                image::save_buffer(&path, got, ow, oh, image::ExtendedColorType::Rgb8).unwrap();
                panic!(
                    "{name}: max difference {worst} from Pillow (ours written to {})",
                    path.display()
                );
            }
            tested += 1;
        }
        assert_eq!(tested, 4, "expected 4 crop fixtures");
    }

    #[test]
    fn resize_of_a_constant_image_stays_constant() {
        let src = vec![77u8; 50 * 40 * 3];
        let mut r = Resampler::new(7, 9);
        for crop in [
            CropBox::full(50, 40),
            CropBox {
                left: 3.5,
                top: 2.25,
                width: 20.0,
                height: 30.0,
                view: false,
            },
        ] {
            assert!(r.run(&src, 50, 40, &crop).unwrap().iter().all(|&v| v == 77));
        }
    }
}
