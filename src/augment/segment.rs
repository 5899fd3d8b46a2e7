//! Segmentation masks that follow their image through its drawn resize and crop
//! ([`SamplePlan::resized_crop`](super::SamplePlan::resized_crop)), as the segmentation
//! reference moves a PIL mask: Pillow's nearest resize (`Image.resize` of a palette or grey
//! image, whatever filter is asked for), the flips, the padding below and to the right with
//! the ignore index, the crop. Each output value is the class index the mask file holds (a
//! palette PNG's index, a grey PNG's level), as `np.array` of the PIL image gives it.

use std::io::Cursor;

use hpuload_decoders::{ImageFormat, Limits};

use super::geometry::CropBox;
use super::plan::ResizedCrop;
use super::{Cv2Border, Warp};

/// A decoded mask: one value per pixel, row by row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mask {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `width * height` values: palette indices or grey levels (16-bit for a 16-bit grey PNG).
    pub values: Vec<u16>,
}

/// Decodes a mask PNG into the values Pillow reads from it: the indices of a palette image
/// (of 1, 2, 4 or 8 bits), the levels of an 8-bit or 16-bit grey one.
///
/// # Errors
/// The bytes are no PNG, are damaged, or hold a mask of another kind (colour, grey of fewer
/// than 8 bits, grey with alpha), named; or its header claims a size past the images' default
/// [`Limits`] (a decompression bomb), checked before anything that size is allocated.
pub fn decode_mask(bytes: &[u8]) -> Result<Mask, String> {
    let StoredPng { frame, buf, .. } = read_png(bytes)?;
    let (width, height) = (frame.width, frame.height);
    let (w, h) = (width as usize, height as usize);
    let values = match (frame.color_type, frame.bit_depth) {
        (png::ColorType::Indexed, _) => palette_indices(&frame, &buf),
        (png::ColorType::Grayscale, png::BitDepth::Eight) => {
            buf[..w * h].iter().map(|&v| u16::from(v)).collect()
        }
        (png::ColorType::Grayscale, png::BitDepth::Sixteen) => buf[..w * h * 2]
            .chunks_exact(2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .collect(),
        (colour, depth) => {
            return Err(format!(
                "a {colour:?} PNG of {depth:?} bits is no mask hpuload reads (palette, or grey of 8 or 16 bits)"
            ))
        }
    };
    Ok(Mask {
        width,
        height,
        values,
    })
}

/// A PNG's first frame as stored (no transformations).
struct StoredPng {
    /// Its size, colour type, bit depth and `line_size`.
    frame: png::OutputInfo,
    /// Its rows, of `line_size` bytes each.
    buf: Vec<u8>,
    /// Its palette's RGB bytes, if it has one.
    palette: Option<Vec<u8>>,
}

/// A PNG's first frame as stored, its size checked against the images' default [`Limits`]
/// before its pixels are allocated.
fn read_png(bytes: &[u8]) -> Result<StoredPng, String> {
    let mut decoder = png::Decoder::new(Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::IDENTITY);
    let mut reader = decoder.read_info().map_err(|e| e.to_string())?;
    let (width, height) = reader.info().size();
    Limits::default()
        .check(ImageFormat::Png, width, height)
        .map_err(|e| e.to_string())?;
    let size = reader
        .output_buffer_size()
        .ok_or("the PNG's size overflows memory")?;
    let mut buf = vec![0; size];
    let frame = reader.next_frame(&mut buf).map_err(|e| e.to_string())?;
    let palette = reader.info().palette.as_deref().map(<[u8]>::to_vec);
    Ok(StoredPng {
        frame,
        buf,
        palette,
    })
}

/// A palette PNG's indices (of 1, 2, 4 or 8 bits, packed most significant first, each row
/// starting on a byte), row by row.
fn palette_indices(frame: &png::OutputInfo, buf: &[u8]) -> Vec<u16> {
    let (w, h) = (frame.width as usize, frame.height as usize);
    let bits = frame.bit_depth as usize;
    let per_byte = 8 / bits;
    let mask = (1u16 << bits) - 1;
    let mut values = Vec::with_capacity(w * h);
    for row in buf.chunks_exact(frame.line_size).take(h) {
        values.extend((0..w).map(|x| {
            let byte = u16::from(row[x / per_byte]);
            let shift = 8 - bits * (x % per_byte + 1);
            (byte >> shift) & mask
        }));
    }
    values
}

/// The value of every colour [`decode_colour_mask`] is not given.
pub const OTHER_COLOUR: u16 = 255;

/// Decodes a colour mask PNG into each pixel's colour's index in `colours` (`0xRRGGBB` each,
/// at most [`OTHER_COLOUR`] of them; a colour given twice takes its first index),
/// [`OTHER_COLOUR`] for any other colour: the colours Pillow's `.convert("RGB")` gives of an
/// 8-bit RGB, RGBA, grey or grey-and-alpha PNG (alpha dropped, grey made three equal
/// channels) or of a palette one (each index's palette colour; black past the palette, as
/// Pillow pads it), as a Dataset's code compares them (`mask[(rgb == colour).all(-1)] = i`).
///
/// # Errors
/// As [`decode_mask`]'s; a PNG of another kind (16 bits, grey of fewer than 8) or more
/// colours than [`OTHER_COLOUR`]: named.
pub fn decode_colour_mask(bytes: &[u8], colours: &[u32]) -> Result<Mask, String> {
    if colours.len() > usize::from(OTHER_COLOUR) {
        return Err(format!(
            "{} colours for a colour mask (at most {OTHER_COLOUR})",
            colours.len()
        ));
    }
    let mut ranked: Vec<(u32, u16)> = (0u16..).zip(colours).map(|(i, &c)| (c, i)).collect();
    ranked.sort_unstable();
    ranked.dedup_by_key(|&mut (colour, _)| colour);
    let index_of = |rgb: &[u8]| {
        let colour = u32::from(rgb[0]) << 16 | u32::from(rgb[1]) << 8 | u32::from(rgb[2]);
        ranked
            .binary_search_by_key(&colour, |&(c, _)| c)
            .map_or(OTHER_COLOUR, |k| ranked[k].1)
    };
    let StoredPng {
        frame,
        buf,
        palette,
    } = read_png(bytes)?;
    let (width, height) = (frame.width, frame.height);
    let (w, h) = (width as usize, height as usize);
    let rows = || buf.chunks_exact(frame.line_size).take(h);
    // Each pixel's index, its colour's `channels` first bytes of `per_pixel`.
    let pixels = |per_pixel: usize, grey: bool| -> Vec<u16> {
        let mut values = Vec::with_capacity(w * h);
        let mut last = (None, OTHER_COLOUR); // runs of one colour are most of a mask
        for row in rows() {
            for px in row[..w * per_pixel].chunks_exact(per_pixel) {
                let rgb = if grey {
                    [px[0]; 3]
                } else {
                    [px[0], px[1], px[2]]
                };
                if last.0 != Some(rgb) {
                    last = (Some(rgb), index_of(&rgb));
                }
                values.push(last.1);
            }
        }
        values
    };
    let values = match (frame.color_type, frame.bit_depth) {
        (png::ColorType::Indexed, _) => {
            let palette = palette.ok_or("a palette PNG without its palette")?;
            let entries: Vec<u16> = (0..256)
                .map(|i| index_of(palette.get(3 * i..3 * i + 3).unwrap_or(&[0, 0, 0])))
                .collect();
            palette_indices(&frame, &buf)
                .into_iter()
                .map(|i| entries[usize::from(i)])
                .collect()
        }
        (png::ColorType::Rgb, png::BitDepth::Eight) => pixels(3, false),
        (png::ColorType::Rgba, png::BitDepth::Eight) => pixels(4, false),
        (png::ColorType::Grayscale, png::BitDepth::Eight) => pixels(1, true),
        (png::ColorType::GrayscaleAlpha, png::BitDepth::Eight) => pixels(2, true),
        (colour, depth) => {
            return Err(format!(
                "a {colour:?} PNG of {depth:?} bits is no colour mask hpuload reads (8 bits, or a palette)"
            ))
        }
    };
    Ok(Mask {
        width,
        height,
        values,
    })
}

/// Decodes a GIF mask into what Pillow's `np.array(Image.open(path).convert("L"))` gives of
/// it (the Carvana set's masks, as the U-Net tutorials read them): each pixel's palette colour
/// (the first frame's own palette, else the global one; an index past it is black, as Pillow
/// pads it) made grey by Pillow's fixed-point luma, `(19595 r + 38470 g + 7471 b + 32768) >>
/// 16`.
///
/// # Errors
/// As [`decode_gif_indices`]'s, and a GIF of no palette: named.
pub fn decode_grey_gif(bytes: &[u8]) -> Result<Mask, String> {
    let frame = first_gif_frame(bytes)?;
    let palette = frame.palette.as_deref().ok_or("a GIF of no palette")?;
    let grey: Vec<u16> = (0..256)
        .map(|i| match palette.get(i * 3..i * 3 + 3) {
            Some(&[r, g, b]) => {
                let luma = 19595 * u32::from(r) + 38470 * u32::from(g) + 7471 * u32::from(b);
                ((luma + 0x8000) >> 16) as u16
            }
            _ => 0,
        })
        .collect();
    Ok(Mask {
        width: frame.width,
        height: frame.height,
        values: frame
            .indices
            .iter()
            .map(|&i| grey[usize::from(i)])
            .collect(),
    })
}

/// Decodes a GIF mask into what Pillow's `np.array(Image.open(path))` gives of it as stored
/// (milesial's U-Net reads the Carvana set's masks so): its first frame's palette indices
/// (Pillow opens a GIF of a grey ramp in mode "L", whose values are those indices too).
///
/// # Errors
/// The bytes are no GIF or are damaged, its first frame does not cover its screen (Pillow
/// composes such frames on a background), or its screen claims a size past the images'
/// default [`Limits`]: named.
pub fn decode_gif_indices(bytes: &[u8]) -> Result<Mask, String> {
    let frame = first_gif_frame(bytes)?;
    Ok(Mask {
        width: frame.width,
        height: frame.height,
        values: frame.indices.iter().map(|&i| u16::from(i)).collect(),
    })
}

/// A GIF's first frame, which covers its screen: its palette indices, row by row, and the
/// palette they index (the frame's own, else the global one).
struct GifFrame {
    width: u32,
    height: u32,
    indices: Vec<u8>,
    palette: Option<Vec<u8>>,
}

fn first_gif_frame(bytes: &[u8]) -> Result<GifFrame, String> {
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::Indexed);
    let mut decoder = options
        .read_info(Cursor::new(bytes))
        .map_err(|e| e.to_string())?;
    let (width, height) = (u32::from(decoder.width()), u32::from(decoder.height()));
    // GIF is no format of the images' limits: its sizes are checked as a PNG's would be.
    Limits::default()
        .check(ImageFormat::Png, width, height)
        .map_err(|e| e.to_string())?;
    let global = decoder.global_palette().map(<[u8]>::to_vec);
    let frame = decoder
        .read_next_frame()
        .map_err(|e| e.to_string())?
        .ok_or("a GIF of no frame")?;
    let covers = frame.left == 0
        && frame.top == 0
        && u32::from(frame.width) == width
        && u32::from(frame.height) == height;
    if !covers {
        return Err(format!(
            "a GIF whose first frame ({}x{} at {}, {}) does not cover its {width}x{height} screen",
            frame.width, frame.height, frame.left, frame.top
        ));
    }
    let pixels = (width as usize) * (height as usize);
    if frame.buffer.len() < pixels {
        return Err("a GIF frame shorter than its screen".into());
    }
    Ok(GifFrame {
        width,
        height,
        indices: frame.buffer[..pixels].to_vec(),
        palette: frame.palette.clone().or(global),
    })
}

/// The value [`coco_semantic_mask`] gives a pixel that two or more objects cover (the loss's
/// ignore index, as the segmentation reference writes it).
pub const OVERLAP: u16 = 255;

/// The semantic mask of a COCO image, as the segmentation reference's
/// `ConvertCocoPolysToMask` makes it of its (filtered, remapped) annotations: each object's
/// mask the union of its compressed RLE `counts` strings (one per polygon, as pycocotools'
/// `frPyObjects` gives them for a `height` x `width` image), each pixel the largest class of
/// the objects covering it, [`OVERLAP`] where two or more do, 0 where none does. `objects`
/// holds each object's class and strings.
///
/// # Errors
/// A string is no RLE of a mask that size (named by its object's position).
pub fn coco_semantic_mask(
    height: u32,
    width: u32,
    objects: &[(u8, Vec<Vec<u8>>)],
) -> Result<Mask, String> {
    use crate::source::coco::rle;
    let (h, w) = (height as usize, width as usize);
    let pixels = h.checked_mul(w).ok_or("the mask's size overflows memory")?;
    let mut class = vec![0u8; if objects.is_empty() { 0 } else { pixels }];
    let mut covers = vec![0u8; class.len()];
    let mut union = Vec::new();
    for (k, (value, strings)) in objects.iter().enumerate() {
        let named = |e: rle::RleError| format!("object {k}: {e}");
        let mut cover = |i: usize| {
            let (c, n): (&mut u8, &mut u8) = (&mut class[i], &mut covers[i]);
            *c = (*c).max(*value);
            *n = n.saturating_add(1);
        };
        if let [one] = strings.as_slice() {
            // One string's runs never meet: each pixel is covered once.
            rle::for_each_one(&rle::counts(one).map_err(named)?, h, w, false, cover)
                .map_err(named)?;
        } else {
            union.clear();
            union.resize(pixels, 0u8);
            for s in strings {
                rle::union_into(&rle::counts(s).map_err(named)?, h, w, false, &mut union)
                    .map_err(named)?;
            }
            union
                .iter()
                .enumerate()
                .filter(|(_, &m)| m != 0)
                .for_each(|(i, _)| cover(i));
        }
    }
    let values = if objects.is_empty() {
        vec![0; pixels]
    } else {
        class
            .iter()
            .zip(&covers)
            .map(|(&c, &n)| if n > 1 { OVERLAP } else { u16::from(c) })
            .collect()
    };
    Ok(Mask {
        width,
        height,
        values,
    })
}

impl Mask {
    /// The mask mirrored `(left to right, top to bottom)`: a flip drawn before the crop or
    /// resize that moves its image (the plan's `pre` flips), which the window, crop and
    /// resize then see.
    pub fn flip(&mut self, (horizontal, vertical): (bool, bool)) {
        let w = self.width as usize;
        if w == 0 {
            return;
        }
        if horizontal {
            self.values.chunks_exact_mut(w).for_each(<[u16]>::reverse);
        }
        if vertical {
            let rows = self.values.len() / w;
            for r in 0..rows / 2 {
                let (top, bottom) = self.values.split_at_mut((rows - 1 - r) * w);
                top[r * w..(r + 1) * w].swap_with_slice(&mut bottom[..w]);
            }
        }
    }

    /// The `(height, width)` window of the mask at `(top, left)` (albumentations'
    /// `RandomResizedCrop` cuts it before its resize), or why not: it does not lie inside.
    pub fn window(
        &self,
        (top, left): (u32, u32),
        (height, width): (u32, u32),
    ) -> Result<Mask, String> {
        let fits = height > 0
            && width > 0
            && top.checked_add(height).is_some_and(|b| b <= self.height)
            && left.checked_add(width).is_some_and(|r| r <= self.width);
        if !fits {
            return Err(format!(
                "no {height}x{width} window at ({top}, {left}) of a {}x{} mask",
                self.height, self.width
            ));
        }
        let (w, l) = (self.width as usize, left as usize);
        let values = self
            .values
            .chunks_exact(w)
            .skip(top as usize)
            .take(height as usize)
            .flat_map(|row| &row[l..l + width as usize])
            .copied()
            .collect();
        Ok(Mask {
            width,
            height,
            values,
        })
    }

    /// The mask resized to `(height, width)` as Pillow resizes a grey image with `BILINEAR`
    /// (what torchvision's `Resize` does to a PIL mask in mode "L" unless told
    /// `NEAREST`: the values at its edges blended), or why not: a value past a byte.
    pub fn pillow_bilinear(&self, size: (u32, u32)) -> Result<Mask, String> {
        self.pillow_resized(size, 2)
    }

    /// The mask resized to `(height, width)` as Pillow's `Image.resize` resizes a grey image
    /// with the filter `filter` names as Pillow's `Resampling` does (1 `LANCZOS`, 2
    /// `BILINEAR`, 3 `BICUBIC`, 4 `BOX`, 5 `HAMMING`), or why not: a value past a byte,
    /// another filter.
    pub fn pillow_resized(&self, (height, width): (u32, u32), filter: u8) -> Result<Mask, String> {
        use super::pil::resample::{resize, Kernel, Scratch, Weights};
        let kernel = match filter {
            1 => Kernel::Lanczos,
            2 => Kernel::Bilinear,
            3 => Kernel::Bicubic,
            4 => Kernel::Box,
            5 => Kernel::Hamming,
            other => return Err(format!("no Pillow filter numbered {other} that blends")),
        };
        if (height, width) == (self.height, self.width) {
            return Ok(self.clone());
        }
        // Pillow resamples each band of an RGB image as it does a grey one (the same taps,
        // weights and rounding): the mask as three equal bands, resized, one band kept.
        let mut rgb = Vec::with_capacity(self.values.len() * 3);
        for &v in &self.values {
            let byte = u8::try_from(v).map_err(|_| format!("a mask value of {v}, past a byte"))?;
            rgb.extend_from_slice(&[byte; 3]);
        }
        let whole = CropBox {
            left: 0.0,
            top: 0.0,
            width: f64::from(self.width),
            height: f64::from(self.height),
            view: true,
        };
        let mut out = vec![0u8; height as usize * width as usize * 3];
        let resized = resize(
            &rgb,
            self.width,
            self.height,
            &whole,
            (width, height),
            (kernel, Weights::Pillow),
            &mut Scratch::default(),
            &mut out,
        )
        .map_err(|e| e.to_string())?;
        if resized.is_none() {
            return Err(format!(
                "no resize of a {}x{} mask to {height}x{width}",
                self.height, self.width
            ));
        }
        Ok(Mask {
            width,
            height,
            values: out.chunks_exact(3).map(|p| u16::from(p[0])).collect(),
        })
    }
}

/// Whose nearest-neighbour positions a mask's resize takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nearest {
    /// Pillow's `Image.resize` of a PIL mask (the segmentation reference's v1 transforms).
    Pillow,
    /// torch's `interpolate(mode="nearest")`, as torchvision v2 resizes a `tv_tensors.Mask`
    /// (the reference's `--use-v2` transforms).
    Torch,
    /// OpenCV's `cv2.resize(..., interpolation=INTER_NEAREST)`, as albumentations' `Resize`
    /// moves a mask.
    OpenCv,
    /// torch's `interpolate(mode="nearest-exact")`, as transformers' Segformer image
    /// processor resizes a segmentation map.
    TorchExact,
}

impl Nearest {
    /// The source position of each of `out` positions when `len` is resized to `out`.
    fn positions(self, len: u32, out: u32) -> Vec<usize> {
        match self {
            Self::Pillow => pil_nearest(len, out),
            Self::Torch => {
                // `floor(i * (len / out))`, the scale and the product in f32, at most len - 1.
                let scale = len as f32 / out as f32;
                (0..out)
                    .map(|i| ((i as f32 * scale).floor() as usize).min(len as usize - 1))
                    .collect()
            }
            Self::OpenCv => {
                // `floor(i * (1 / (out / len)))` in f64 (`resizeNN`'s inverse of the inverse
                // scale), at most len - 1.
                let step = 1.0 / (f64::from(out) / f64::from(len));
                (0..out)
                    .map(|i| ((f64::from(i) * step).floor() as usize).min(len as usize - 1))
                    .collect()
            }
            Self::TorchExact => {
                // `floorf((i + 0.5) * scale)`: the scale in f32, the product in f64 made f32.
                let scale = f64::from(len as f32 / out as f32);
                (0..out)
                    .map(|i| {
                        let at = ((f64::from(i) + 0.5) * scale) as f32;
                        (at.floor() as usize).min(len as usize - 1)
                    })
                    .collect()
            }
        }
    }
}

/// The source position of each of `out` positions when Pillow resizes `len` to `out` with its
/// nearest filter: the centre's position summed step by step in f64 and truncated
/// (`ImagingScaleAffine`), which a product of the index does not give in every case.
fn pil_nearest(len: u32, out: u32) -> Vec<usize> {
    let step = f64::from(len) / f64::from(out);
    let mut at = step * 0.5;
    (0..out)
        .map(|_| {
            let p = (at as usize).min(len as usize - 1);
            at += step;
            p
        })
        .collect()
}

/// The `(height, width)` `out` cut of `mask` as `drawn` moves its image (resized with
/// `nearest`'s positions), `fill` where the padding shows, then mirrored as `after` says
/// (`(left to right, top to bottom)`: flips drawn after the crop), into `dst` (row by row).
///
/// # Panics
/// `dst` does not hold `out`'s values, or the mask is empty.
pub fn cut_mask(
    mask: &Mask,
    drawn: &ResizedCrop,
    nearest: Nearest,
    out: (u32, u32),
    fill: i64,
    after: (bool, bool),
    dst: &mut [i64],
) {
    cut_mask_as(mask, drawn, nearest, out, fill, after, dst, i64::from);
}

/// [`cut_mask`] into any values: each mask value written as `value` gives it.
///
/// # Panics
/// As [`cut_mask`].
#[allow(clippy::too_many_arguments)] // cut_mask's, and the value's map
pub fn cut_mask_as<T: Copy>(
    mask: &Mask,
    drawn: &ResizedCrop,
    nearest: Nearest,
    out: (u32, u32),
    fill: T,
    after: (bool, bool),
    dst: &mut [T],
    value: impl Fn(u16) -> T,
) {
    let (oh, ow) = (out.0 as usize, out.1 as usize);
    assert_eq!(dst.len(), oh * ow, "the output holds {out:?}");
    let (rh, rw) = drawn.resized;
    let rows = nearest.positions(mask.height, rh);
    let cols = nearest.positions(mask.width, rw);
    let (top, left) = (drawn.at.0 as usize, drawn.at.1 as usize);
    let (before_y, before_x) = (drawn.before.0 as usize, drawn.before.1 as usize);
    let (rh, rw) = (rh as usize, rw as usize);
    // The output columns the resize shows, `start..start + columns.len()` (the padding
    // around them), with each one's source column.
    let start = before_x.saturating_sub(left).min(ow);
    let columns: Vec<usize> = (left + start..(left + ow).min(before_x + rw))
        .map(|x| x - before_x)
        .map(|x| cols[if drawn.hflip { rw - 1 - x } else { x }])
        .collect();
    let shown = start..start + columns.len();
    let width = mask.width as usize;
    let mut previous = None;
    for (k, y) in (top..top + oh).enumerate() {
        let (done, rest) = dst.split_at_mut(k * ow);
        let out_row = &mut rest[..ow];
        if y < before_y || y >= before_y + rh {
            out_row.fill(fill);
            previous = None;
            continue;
        }
        let y = y - before_y;
        let source = rows[if drawn.vflip { rh - 1 - y } else { y }];
        if previous == Some(source) {
            // An enlarged mask repeats rows: the row above, copied.
            out_row.copy_from_slice(&done[(k - 1) * ow..]);
            continue;
        }
        previous = Some(source);
        let row = &mask.values[source * width..][..width];
        out_row[..shown.start].fill(fill);
        for (o, &c) in out_row[shown.clone()].iter_mut().zip(&columns) {
            *o = value(row[c]);
        }
        out_row[shown.end..].fill(fill);
    }
    if after.0 {
        mirror_rows(dst, ow);
    }
    if after.1 {
        mirror_columns(dst, (oh, ow));
    }
}

/// Each row of the `w`-wide plane `values` mirrored (left to right).
fn mirror_rows<T>(values: &mut [T], w: usize) {
    values.chunks_exact_mut(w).for_each(<[T]>::reverse);
}

/// The rows of the `(h, w)` plane `values` in reverse order (top to bottom).
fn mirror_columns<T>(values: &mut [T], (h, w): (usize, usize)) {
    for k in 0..h / 2 {
        let (upper, lower) = values.split_at_mut((h - 1 - k) * w);
        upper[k * w..(k + 1) * w].swap_with_slice(&mut lower[..w]);
    }
}

/// A move of a mask already cut to its output's size, as its image's pixel ops moved it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MaskMove {
    /// Mirrored left to right.
    HorizontalFlip,
    /// Mirrored top to bottom.
    VerticalFlip,
    /// Rows become columns (albumentations' `Transpose` of a square mask).
    Transpose,
    /// `np.rot90(mask, k)`: `k` (1-3) counter-clockwise quarter turns (albumentations'
    /// `RandomRotate90` of a square mask).
    Rot90(u8),
    /// OpenCV's `warpAffine(..., INTER_NEAREST)` at its own size (albumentations' `Affine`,
    /// `ShiftScaleRotate` and `Rotate` of a mask): `inverse` maps each output pixel to its
    /// source point (float32, as the image's warp takes it), `border` says what is read
    /// outside the mask (the constant border reads the fill).
    Warp {
        /// Output pixel to source point, `(m0, m1, m2, m3, m4, m5)`.
        inverse: [f32; 6],
        /// What is read outside the mask.
        border: Cv2Border,
    },
    /// The same warp as OpenCV computes it for masks of int8, int16, int32 (albumentations'
    /// int64 masks) or float64 values: its fixed-point kernel, from the map in double.
    FixedPointWarp {
        /// Output pixel to source point, `(m0, m1, m2, m3, m4, m5)`, in double.
        inverse: [f64; 6],
        /// What is read outside the mask.
        border: Cv2Border,
    },
    /// torchvision v2's `rotate` / `affine` of a `tv_tensors.Mask` (its `RandomRotation`,
    /// `RandomAffine`): the image's drawn warp sampled nearest by its tensor kernel, the fill
    /// outside.
    TorchWarp(Warp),
}

/// The `(height, width)` plane `values` moved by each of `moves` in turn, `fill` where a warp's
/// constant border shows.
///
/// # Panics
/// `values` does not hold `size`'s values, or a transpose or quarter turn is asked of a plane
/// that is not square (or a quarter turn of other than 1-3 turns).
pub fn move_mask<T: Copy>(values: &mut [T], size: (usize, usize), moves: &[MaskMove], fill: T) {
    assert_eq!(values.len(), size.0 * size.1, "the plane holds {size:?}");
    let mut source = Vec::new();
    let n = size.0;
    for step in moves {
        if matches!(step, MaskMove::Transpose | MaskMove::Rot90(_)) {
            assert_eq!(
                size.0, size.1,
                "a transpose or quarter turn of a square plane"
            );
            source.clear();
            source.extend_from_slice(values);
        }
        match *step {
            MaskMove::HorizontalFlip => mirror_rows(values, size.1),
            MaskMove::VerticalFlip => mirror_columns(values, size),
            // Output (y, x) reads the source at the place each move names.
            MaskMove::Transpose => turn(&source, n, values, |y, x| (x, y)),
            MaskMove::Rot90(1) => turn(&source, n, values, |y, x| (x, n - 1 - y)),
            MaskMove::Rot90(2) => turn(&source, n, values, |y, x| (n - 1 - y, n - 1 - x)),
            MaskMove::Rot90(3) => turn(&source, n, values, |y, x| (n - 1 - x, y)),
            MaskMove::Rot90(k) => panic!("{k} quarter turns"),
            MaskMove::Warp { inverse, border } => {
                source.clear();
                source.extend_from_slice(values);
                warp_nearest(&source, size, &inverse, border, fill, values);
            }
            MaskMove::FixedPointWarp { inverse, border } => {
                source.clear();
                source.extend_from_slice(values);
                warp_nearest_fixed(&source, size, &inverse, border, fill, values);
            }
            MaskMove::TorchWarp(ref warp) => {
                source.clear();
                source.extend_from_slice(values);
                let reads = super::geometry::nearest_warp_sources(size.0, size.1, warp);
                for (out, read) in values.iter_mut().zip(reads) {
                    *out = read.map_or(fill, |i| source[i]);
                }
            }
        }
    }
}

/// The `n`x`n` plane `src` into `dst`, each output `(y, x)` reading the source at `at(y, x)`.
fn turn<T: Copy>(src: &[T], n: usize, dst: &mut [T], at: impl Fn(usize, usize) -> (usize, usize)) {
    for (y, row) in dst.chunks_exact_mut(n).enumerate() {
        for (x, out) in row.iter_mut().enumerate() {
            let (sy, sx) = at(y, x);
            *out = src[sy * n + sx];
        }
    }
}

/// OpenCV 5's `warpAffine(src, ..., INTER_NEAREST)` of the `(h, w)` plane `src` into `dst`, as
/// its x86-64 wheels compute it (checked against them on every pixel, for uint8 and float32
/// masks): each output pixel's source point `fma(m0, x, y * m1 + m2)`, `fma(m3, x, y * m4 +
/// m5)` in float32, rounded half to even; outside the plane, `border`'s pixel or `fill`.
fn warp_nearest<T: Copy>(
    src: &[T],
    size: (usize, usize),
    m: &[f32; 6],
    border: Cv2Border,
    fill: T,
    dst: &mut [T],
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has FMA (detected just above).
        return unsafe { warp_nearest_fma(src, size, m, border, fill, dst) };
    }
    warp_nearest_any(src, size, m, border, fill, dst);
}

/// [`warp_nearest`] built with FMA, so each `mul_add` is one instruction (not libm's call;
/// the same values).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
fn warp_nearest_fma<T: Copy>(
    src: &[T],
    size: (usize, usize),
    m: &[f32; 6],
    border: Cv2Border,
    fill: T,
    dst: &mut [T],
) {
    warp_nearest_any(src, size, m, border, fill, dst);
}

/// OpenCV's `warpAffine(src, ..., INTER_NEAREST)` of the `(h, w)` plane `src` into `dst` by its
/// fixed-point kernel (what it runs for other types than uint8, uint16 and float32): each
/// output pixel's source point in 1/1024ths of a pixel, `round(m0 * x * 1024)` added to
/// `round((m1 * y + m2) * 1024) + 512` (rounded half to even, in double), shifted down by 10
/// bits (the floor); outside the plane, `border`'s pixel or `fill`.
fn warp_nearest_fixed<T: Copy>(
    src: &[T],
    (h, w): (usize, usize),
    m: &[f64; 6],
    border: Cv2Border,
    fill: T,
    dst: &mut [T],
) {
    const SCALE: f64 = 1024.0;
    // `saturate_cast<int>` of a double: rounded half to even, clamped to int's range.
    let fixed = |v: f64| {
        v.round_ties_even()
            .clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i64
    };
    let across: Vec<(i64, i64)> = (0..w)
        .map(|x| {
            (
                fixed(m[0] * x as f64 * SCALE),
                fixed(m[3] * x as f64 * SCALE),
            )
        })
        .collect();
    // The point as the kernel stores it: a short.
    let short = |v: i64| (v >> 10).clamp(i64::from(i16::MIN), i64::from(i16::MAX));
    for (y, row) in dst.chunks_exact_mut(w).take(h).enumerate() {
        let y = y as f64;
        let x0 = fixed((m[1] * y + m[2]) * SCALE) + 512;
        let y0 = fixed((m[4] * y + m[5]) * SCALE) + 512;
        for (out, &(dx, dy)) in row.iter_mut().zip(&across) {
            let (sx, sy) = (short(x0 + dx), short(y0 + dy));
            *out = match (border.place(sy, h), border.place(sx, w)) {
                (Some(sy), Some(sx)) => src[sy * w + sx],
                _ => fill,
            };
        }
    }
}

#[inline(always)]
fn warp_nearest_any<T: Copy>(
    src: &[T],
    (h, w): (usize, usize),
    m: &[f32; 6],
    border: Cv2Border,
    fill: T,
    dst: &mut [T],
) {
    // Far outside: any index there reads the border.
    let index = |v: f32| v.round_ties_even().clamp(-1e9, 1e9) as i64;
    for (y, row) in dst.chunks_exact_mut(w).take(h).enumerate() {
        let yf = y as f32;
        let (row_x, row_y) = (yf * m[1] + m[2], yf * m[4] + m[5]);
        for (x, out) in row.iter_mut().enumerate() {
            let xf = x as f32;
            let (sx, sy) = (
                index(m[0].mul_add(xf, row_x)),
                index(m[3].mul_add(xf, row_y)),
            );
            *out = match (border.place(sy, h), border.place(sx, w)) {
                (Some(sy), Some(sx)) => src[sy * w + sx],
                _ => fill,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(
        colour: png::ColorType,
        depth: png::BitDepth,
        (w, h): (u32, u32),
        data: &[u8],
    ) -> Vec<u8> {
        let mut out = Vec::new();
        let mut e = png::Encoder::new(&mut out, w, h);
        e.set_color(colour);
        e.set_depth(depth);
        if colour == png::ColorType::Indexed {
            e.set_palette(vec![0u8; 3 * 256]);
        }
        e.write_header().unwrap().write_image_data(data).unwrap();
        out
    }

    #[test]
    fn a_palette_masks_indices_are_read_at_every_bit_depth_and_a_colour_mask_is_refused() {
        use png::{BitDepth, ColorType};
        // Three pixels a row, two rows: 4-bit indices 1, 2, 3 / 15, 0, 7 packed two a byte.
        let m = decode_mask(&png(
            ColorType::Indexed,
            BitDepth::Four,
            (3, 2),
            &[0x12, 0x30, 0xF0, 0x70],
        ))
        .unwrap();
        assert_eq!(
            (m.width, m.height, m.values),
            (3, 2, vec![1, 2, 3, 15, 0, 7])
        );
        let m = decode_mask(&png(
            ColorType::Indexed,
            BitDepth::One,
            (3, 1),
            &[0b1010_0000],
        ))
        .unwrap();
        assert_eq!(m.values, [1, 0, 1]);
        let m = decode_mask(&png(
            ColorType::Indexed,
            BitDepth::Eight,
            (2, 1),
            &[255, 21],
        ))
        .unwrap();
        assert_eq!(m.values, [255, 21]);
        let m = decode_mask(&png(
            ColorType::Grayscale,
            BitDepth::Sixteen,
            (2, 1),
            &[1, 2, 0, 9],
        ))
        .unwrap();
        assert_eq!(m.values, [258, 9]);
        let e = decode_mask(&png(ColorType::Rgb, BitDepth::Eight, (1, 1), &[1, 2, 3])).unwrap_err();
        assert!(e.contains("no mask"), "{e}");
        assert!(decode_mask(b"not a png").is_err());
    }

    #[test]
    fn a_colour_masks_pixels_become_their_colours_indices_from_every_kind_of_8_bit_png() {
        use png::{BitDepth, ColorType};
        let colours = [0x04_05_06, 0x01_02_03, 0x07_07_07, 0x01_02_03];
        // RGB and RGBA (alpha dropped, as Pillow's convert("RGB")): a colour given twice
        // takes its first index; any other colour 255.
        let rgb = [1, 2, 3, 4, 5, 6, 1, 2, 3, 9, 9, 9];
        let m = decode_colour_mask(
            &png(ColorType::Rgb, BitDepth::Eight, (2, 2), &rgb),
            &colours,
        )
        .unwrap();
        assert_eq!((m.width, m.height, m.values), (2, 2, vec![1, 0, 1, 255]));
        let rgba = [1, 2, 3, 0, 4, 5, 6, 255, 9, 9, 9, 7];
        let m = decode_colour_mask(
            &png(ColorType::Rgba, BitDepth::Eight, (3, 1), &rgba),
            &colours,
        )
        .unwrap();
        assert_eq!(m.values, [1, 0, 255]);
        // Grey, with alpha or not: three equal channels.
        let m = decode_colour_mask(
            &png(ColorType::Grayscale, BitDepth::Eight, (2, 1), &[7, 8]),
            &colours,
        )
        .unwrap();
        assert_eq!(m.values, [2, 255]);
        let m = decode_colour_mask(
            &png(
                ColorType::GrayscaleAlpha,
                BitDepth::Eight,
                (2, 1),
                &[8, 0, 7, 1],
            ),
            &colours,
        )
        .unwrap();
        assert_eq!(m.values, [255, 2]);
        // A palette of two colours in 2 bits: indices 0, 1, 3 (past it: black, as Pillow
        // pads it).
        let mut bytes = Vec::new();
        let mut e = png::Encoder::new(&mut bytes, 3, 1);
        e.set_color(ColorType::Indexed);
        e.set_depth(BitDepth::Two);
        e.set_palette(vec![4, 5, 6, 7, 7, 7]);
        e.write_header()
            .unwrap()
            .write_image_data(&[0b0001_1100])
            .unwrap();
        let m = decode_colour_mask(&bytes, &[0, 0x07_07_07, 0x04_05_06]).unwrap();
        assert_eq!(m.values, [2, 1, 0]);
        // No colour given: every pixel is another colour.
        let m =
            decode_colour_mask(&png(ColorType::Rgb, BitDepth::Eight, (2, 2), &rgb), &[]).unwrap();
        assert_eq!(m.values, [255; 4]);
        // 16 bits, or more colours than an index below 255 holds: refused, named.
        let e = decode_colour_mask(
            &png(ColorType::Rgb, BitDepth::Sixteen, (1, 1), &[0; 6]),
            &colours,
        )
        .unwrap_err();
        assert!(e.contains("no colour mask"), "{e}");
        let many: Vec<u32> = (0..256).collect();
        assert!(decode_colour_mask(
            &png(ColorType::Rgb, BitDepth::Eight, (1, 1), &[0; 3]),
            &many
        )
        .is_err());
        assert!(decode_colour_mask(b"not a png", &colours).is_err());
    }

    #[test]
    fn a_mask_whose_header_claims_a_bomb_s_size_is_refused_before_it_is_allocated() {
        // 30000 x 30000 16-bit grey: 1.8 GB claimed by a header of a few bytes.
        let mut bytes = Vec::new();
        let mut encoder = png::Encoder::new(&mut bytes, 30_000, 30_000);
        encoder.set_color(png::ColorType::Grayscale);
        encoder.set_depth(png::BitDepth::Sixteen);
        let mut writer = encoder.write_header().unwrap();
        // The start of a zlib stream: the data the header promises never comes.
        writer.write_chunk(png::chunk::IDAT, &[0x78, 0x9c]).unwrap();
        drop(writer);
        let e = decode_mask(&bytes).unwrap_err();
        assert!(e.contains("30000x30000"), "{e}");
    }

    #[test]
    fn a_coco_semantic_mask_takes_each_pixels_largest_class_and_marks_overlaps_of_objects_not_of_polygons(
    ) {
        // 2 rows, 3 columns; runs column-major, zeros first.
        // Object A (class 4): two polygons, (0, 0)-(1, 0) and (1, 0)-(0, 1): they meet at
        // (1, 0), which stays A's alone.
        // Object B (class 2): (0, 1)-(1, 1), meeting A at (0, 1): an overlap.
        let rle = |counts: &[u64]| {
            // The compressed string of `counts` (each a single 5-bit group, no deltas: the
            // counts here are small and the third's delta encoding is avoided by using two).
            counts.iter().map(|&c| 48 + c as u8).collect::<Vec<u8>>()
        };
        let objects = vec![
            (4u8, vec![rle(&[0, 2]), rle(&[1, 2])]),
            (2u8, vec![rle(&[2, 2])]),
        ];
        let m = coco_semantic_mask(2, 3, &objects).unwrap();
        assert_eq!(m.values, [4, OVERLAP, 0, 4, 2, 0]);
        assert_eq!((m.width, m.height), (3, 2));
        assert_eq!(coco_semantic_mask(2, 3, &[]).unwrap().values, [0; 6]);
        let e = coco_semantic_mask(2, 3, &[(1, vec![rle(&[2, 9])])]).unwrap_err();
        assert!(e.starts_with("object 0:"), "{e}");
    }

    #[test]
    fn a_bilinear_resize_of_a_grey_mask_blends_only_its_edges_and_refuses_wide_values() {
        // Two halves, 0 and 200, from 8 to 4 columns (and rows kept): the middle columns
        // blend them, the outer ones keep their values; the size kept is the mask itself.
        let mask = Mask {
            width: 8,
            height: 2,
            values: [[0u16; 4], [200; 4]].concat().repeat(2),
        };
        let half = mask.pillow_bilinear((2, 4)).unwrap();
        assert_eq!(&half.values[..4], &half.values[4..]);
        assert_eq!((half.values[0], half.values[3]), (0, 200));
        assert!(half.values[1] > 0 && half.values[2] < 200 && half.values[1] < half.values[2]);
        assert_eq!(mask.pillow_bilinear((2, 8)).unwrap(), mask);
        let wide = Mask {
            width: 2,
            height: 1,
            values: vec![0, 300],
        };
        assert!(wide.pillow_bilinear((1, 1)).unwrap_err().contains("300"));
    }

    #[test]
    fn pillows_other_filters_blend_a_grey_mask_as_pillow_does_and_others_are_refused() {
        // A step from 0 to 255 enlarged 3x: each filter's values as Pillow 13 gives them
        // (`Image.fromarray(np.array([[0, 0, 255, 255]], np.uint8)).resize((12, 1), f)`);
        // Lanczos' lobes reach the ends, clipped to a byte. Nearest (0) and numbers past
        // Hamming (5) are no blending filter.
        let mask = Mask {
            width: 4,
            height: 1,
            values: vec![0, 0, 255, 255],
        };
        let pillow: [(u8, [u16; 12]); 5] = [
            (1, [11, 0, 0, 0, 0, 77, 178, 255, 255, 255, 255, 244]),
            (2, [0, 0, 0, 0, 0, 85, 170, 255, 255, 255, 255, 255]),
            (3, [0, 0, 0, 0, 0, 76, 179, 255, 255, 255, 255, 255]),
            (4, [0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 255, 255]),
            (5, [0, 0, 0, 0, 0, 43, 212, 255, 255, 255, 255, 255]),
        ];
        for (filter, want) in pillow {
            let out = mask.pillow_resized((1, 12), filter).unwrap();
            assert_eq!(out.values, want, "filter {filter}");
        }
        for filter in [0, 6] {
            assert!(mask.pillow_resized((1, 12), filter).is_err());
        }
    }

    #[test]
    fn pillows_nearest_positions_are_its_summed_centres_not_a_product() {
        // 7 to 3: centres 7/6, 7/2, 35/6.
        assert_eq!(pil_nearest(7, 3), [1, 3, 5]);
        assert_eq!(pil_nearest(2, 4), [0, 0, 1, 1]);
        // 2 to 7: the fourth centre is 1 exactly as a product, just under it as Pillow sums
        // (Pillow 13 resizes [0, 1] to [0, 0, 0, 0, 1, 1, 1]).
        assert_eq!(pil_nearest(2, 7), [0, 0, 0, 0, 1, 1, 1]);
        assert_eq!((3.5f64 * 2.0 / 7.0) as usize, 1);
    }

    #[test]
    fn torchs_nearest_positions_are_the_floor_of_the_index_times_the_scale() {
        // 7 to 3: floor(0, 7/3, 14/3); 2 to 7: floor(i * 2/7) is 1 from i = 4 on.
        assert_eq!(Nearest::Torch.positions(7, 3), [0, 2, 4]);
        assert_eq!(Nearest::Torch.positions(2, 7), [0, 0, 0, 0, 1, 1, 1]);
        assert_eq!(Nearest::Torch.positions(3, 2), [0, 1]);
        assert_eq!(Nearest::Pillow.positions(3, 2), [0, 2]);
    }

    #[test]
    fn opencvs_nearest_positions_take_the_inverse_of_the_inverse_scale_in_doubles() {
        // cv2.resize of 2 columns to 82 and to 98 (INTER_NEAREST): position 41 of 82 reads
        // column 1 where torch's f32 product reads 0, and position 49 of 98 the other way.
        let (to_82, to_98) = (
            Nearest::OpenCv.positions(2, 82),
            Nearest::OpenCv.positions(2, 98),
        );
        assert_eq!((to_82[41], Nearest::Torch.positions(2, 82)[41]), (1, 0));
        assert_eq!((to_98[49], Nearest::Torch.positions(2, 98)[49]), (0, 1));
        assert_eq!(Nearest::OpenCv.positions(7, 3), [0, 2, 4]);
        assert_eq!(Nearest::OpenCv.positions(5, 5), [0, 1, 2, 3, 4]);
    }

    #[test]
    fn torchs_nearest_exact_positions_round_the_centres_product_to_f32_before_the_floor() {
        // torch's nearest-exact of 2 columns to 25: 12.5 * 0.08f32 is just below 1 in f64,
        // 1 once made f32, so position 12 reads column 1.
        assert_eq!(Nearest::TorchExact.positions(2, 25)[12], 1);
        assert_eq!(Nearest::TorchExact.positions(7, 3), [1, 3, 5]);
        assert_eq!(Nearest::TorchExact.positions(2, 7), [0, 0, 0, 1, 1, 1, 1]);
    }

    #[test]
    fn a_mask_is_resized_flipped_padded_with_the_fill_and_cut_as_its_image() {
        // A 2x3 mask doubled to 4x6, flipped, padded to 5x8 and cut 3x4 at (2, 4).
        let mask = Mask {
            width: 3,
            height: 2,
            values: vec![1, 2, 3, 4, 5, 6],
        };
        let drawn = ResizedCrop {
            resized: (4, 6),
            at: (2, 4),
            hflip: true,
            vflip: false,
            before: (0, 0),
        };
        let mut dst = vec![0; 12];
        cut_mask(
            &mask,
            &drawn,
            Nearest::Pillow,
            (3, 4),
            255,
            (false, false),
            &mut dst,
        );
        // The flipped resize's rows 2 and 3 are 6 6 5 5 4 4; columns 4 and 5 show 4 4.
        assert_eq!(dst, [4, 4, 255, 255, 4, 4, 255, 255, 255, 255, 255, 255]);
    }

    #[test]
    fn a_mask_padded_centred_is_cut_then_flipped_as_albumentations_moves_it() {
        // A 2x3 mask padded centred to 4x5 (one row above, one column to the left), cut 3x4
        // at (1, 1), then mirrored both ways (flips drawn after the crop).
        let mask = Mask {
            width: 3,
            height: 2,
            values: vec![1, 2, 3, 4, 5, 6],
        };
        let drawn = ResizedCrop {
            resized: (2, 3),
            at: (1, 1),
            hflip: false,
            vflip: false,
            before: (1, 1),
        };
        let mut dst = vec![0; 12];
        cut_mask(
            &mask,
            &drawn,
            Nearest::Pillow,
            (3, 4),
            9,
            (false, false),
            &mut dst,
        );
        assert_eq!(dst, [1, 2, 3, 9, 4, 5, 6, 9, 9, 9, 9, 9]);
        cut_mask(
            &mask,
            &drawn,
            Nearest::Pillow,
            (3, 4),
            9,
            (true, true),
            &mut dst,
        );
        assert_eq!(dst, [9, 9, 9, 9, 9, 6, 5, 4, 9, 3, 2, 1]);
        // The crop's left edge in the padding: the first column is the fill.
        let drawn = ResizedCrop {
            at: (0, 0),
            ..drawn
        };
        cut_mask(
            &mask,
            &drawn,
            Nearest::Pillow,
            (3, 4),
            9,
            (false, false),
            &mut dst,
        );
        assert_eq!(dst, [9, 9, 9, 9, 9, 1, 2, 3, 9, 4, 5, 6]);
    }

    #[test]
    fn a_cut_mask_is_moved_in_order_by_flips_and_a_nearest_warp_with_its_border() {
        // A shift right by one pixel: each output pixel reads the one to its left.
        let mut values = vec![1u8, 2, 3, 4, 5, 6];
        let shift = [1.0, 0.0, -1.0, 0.0, 1.0, 0.0];
        let warp = |border| MaskMove::Warp {
            inverse: shift,
            border,
        };
        move_mask(&mut values, (2, 3), &[warp(Cv2Border::Constant)], 9);
        assert_eq!(values, [9, 1, 2, 9, 4, 5]);
        let mut values = vec![1u8, 2, 3, 4, 5, 6];
        move_mask(&mut values, (2, 3), &[warp(Cv2Border::Reflect101)], 9);
        assert_eq!(values, [2, 1, 2, 5, 4, 5]);
        // A flip before the warp is not one after it.
        let mut values = vec![1u8, 2, 3, 4, 5, 6];
        let moves = [MaskMove::HorizontalFlip, warp(Cv2Border::Constant)];
        move_mask(&mut values, (2, 3), &moves, 9);
        assert_eq!(values, [9, 3, 2, 9, 6, 5]);
        let mut values = vec![1u8, 2, 3, 4, 5, 6];
        let moves = [
            warp(Cv2Border::Constant),
            MaskMove::HorizontalFlip,
            MaskMove::VerticalFlip,
        ];
        move_mask(&mut values, (2, 3), &moves, 9);
        assert_eq!(values, [5, 4, 9, 2, 1, 9]);
        // A source point halfway between two pixels rounds to the even one.
        let mut values = vec![1u8, 2, 3, 4];
        let half = MaskMove::Warp {
            inverse: [1.0, 0.0, 0.5, 0.0, 1.0, 0.0],
            border: Cv2Border::Replicate,
        };
        move_mask(&mut values, (1, 4), &[half], 0);
        assert_eq!(values, [1, 3, 3, 4]);
        // The fixed-point kernel floors the point plus half a pixel: halves round up.
        let mut values = vec![1u8, 2, 3, 4];
        let half = MaskMove::FixedPointWarp {
            inverse: [1.0, 0.0, 0.5, 0.0, 1.0, 0.0],
            border: Cv2Border::Replicate,
        };
        move_mask(&mut values, (1, 4), &[half], 0);
        assert_eq!(values, [2, 3, 4, 4]);
    }

    #[test]
    fn a_grey_gif_is_pillows_luma_of_each_palette_colour_black_past_its_palette() {
        // A 2x1 screen, a global palette of two colours, indices 0 and 3 (LZW, 2-bit codes).
        let mut gif = b"GIF89a".to_vec();
        gif.extend([2, 0, 1, 0, 0x80, 0, 0, 10, 20, 30, 40, 50, 60]);
        gif.extend([0x2c, 0, 0, 0, 0, 2, 0, 1, 0, 0, 2, 2, 0xC4, 0x0A, 0, 0x3b]);
        let mask = decode_grey_gif(&gif).unwrap();
        // Pillow: (10 * 19595 + 20 * 38470 + 30 * 7471 + 32768) >> 16 = 18; index 3 is black.
        assert_eq!((mask.width, mask.height, mask.values), (2, 1, vec![18, 0]));
        // As stored: the indices themselves, past the palette too.
        assert_eq!(decode_gif_indices(&gif).unwrap().values, [0, 3]);
        assert!(decode_gif_indices(&gif[..20]).is_err());
        assert!(decode_grey_gif(&gif[..20]).is_err());
        // A frame of 1x1 on a 2x1 screen.
        let mut small = gif.clone();
        small[24] = 1;
        assert!(decode_grey_gif(&small)
            .unwrap_err()
            .contains("does not cover"));
    }

    #[test]
    fn a_window_of_a_mask_is_its_values_there_and_one_past_its_edge_is_refused() {
        let mask = Mask {
            width: 3,
            height: 2,
            values: vec![1, 2, 3, 4, 5, 6],
        };
        assert_eq!(mask.window((0, 1), (2, 2)).unwrap().values, [2, 3, 5, 6]);
        assert_eq!(mask.window((1, 0), (1, 3)).unwrap().values, [4, 5, 6]);
        assert!(mask.window((1, 1), (2, 2)).unwrap_err().contains("2x2"));
        assert!(mask.window((0, 0), (0, 3)).is_err());
        assert!(mask.window((u32::MAX, 0), (2, 1)).is_err());
    }

    #[test]
    fn a_mask_flipped_before_its_cut_is_mirrored_as_numpy_mirrors_it() {
        // 1 2 3
        // 4 5 6
        // 7 8 9
        let flipped = |flips| {
            let mut mask = Mask {
                width: 3,
                height: 3,
                values: (1..=9).collect(),
            };
            mask.flip(flips);
            mask.values
        };
        assert_eq!(flipped((true, false)), [3, 2, 1, 6, 5, 4, 9, 8, 7]);
        assert_eq!(flipped((false, true)), [7, 8, 9, 4, 5, 6, 1, 2, 3]);
        assert_eq!(flipped((true, true)), [9, 8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(flipped((false, false)), (1..=9).collect::<Vec<u16>>());
    }

    #[test]
    fn a_square_mask_is_transposed_and_turned_as_numpy_turns_it() {
        // 1 2
        // 3 4
        let turned = |moves: &[MaskMove]| {
            let mut values = vec![1u8, 2, 3, 4];
            move_mask(&mut values, (2, 2), moves, 0);
            values
        };
        assert_eq!(turned(&[MaskMove::Transpose]), [1, 3, 2, 4]);
        // np.rot90 turns counter-clockwise: the right column becomes the top row.
        assert_eq!(turned(&[MaskMove::Rot90(1)]), [2, 4, 1, 3]);
        assert_eq!(turned(&[MaskMove::Rot90(2)]), [4, 3, 2, 1]);
        assert_eq!(turned(&[MaskMove::Rot90(3)]), [3, 1, 4, 2]);
        assert_eq!(
            turned(&[MaskMove::Rot90(1), MaskMove::Rot90(3)]),
            [1, 2, 3, 4]
        );
        assert_eq!(
            turned(&[MaskMove::Transpose, MaskMove::HorizontalFlip]),
            turned(&[MaskMove::Rot90(3)])
        );
    }
}
