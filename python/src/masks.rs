//! COCO masks from compressed RLE strings, for `hpuload/_detection.py` (the detection
//! reference's v1 path): `hpuload::source::coco::rle` decodes straight into row-major planes.

use hpuload::source::coco::rle;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;

/// The masks of `objects` (each a list of COCO compressed RLE `counts` strings, one per
/// polygon, as pycocotools' `frPyObjects` gives them), each the union of its strings' masks,
/// as `len(objects)` row-major planes of 0 and 1 in one bytearray; what `decode` and `any`
/// over the polygons give, without the column-major decode and transpose. With `flip`, each
/// plane mirrored left to right (`flip(-1)` of the stack). With `resize` `(height, width)`,
/// each plane resized first as torchvision's nearest resize of masks does (the reference's
/// `RandomShortestSize`), then mirrored. With `placement` `(resized, (top, left), content,
/// size)` (all pairs `(height, width)`; the reference's `ScaleJitter` then `FixedSizeCrop`),
/// each plane resized to `resized`, its `content` at `(top, left)` cut out and placed on a
/// `size` plane of zeros, then mirrored; `resize` is then ignored.
#[pyfunction]
#[pyo3(signature = (objects, height, width, flip=false, resize=None, placement=None))]
#[allow(clippy::type_complexity)] // the pairs are Python's tuples
pub fn coco_masks<'py>(
    py: Python<'py>,
    objects: Vec<Vec<Vec<u8>>>,
    height: usize,
    width: usize,
    flip: bool,
    resize: Option<(usize, usize)>,
    placement: Option<(
        (usize, usize),
        (usize, usize),
        (usize, usize),
        (usize, usize),
    )>,
) -> PyResult<Bound<'py, pyo3::types::PyByteArray>> {
    let size = |h: usize, w: usize| {
        h.checked_mul(w)
            .filter(|p| p.checked_mul(objects.len()).is_some())
            .ok_or_else(|| PyValueError::new_err("masks overflow"))
    };
    let plane = size(height, width)?;
    let placement = match (placement, resize) {
        (Some((resized, at, content, size)), _) => Some(rle::Placement {
            resized,
            at,
            content,
            size,
        }),
        (None, Some(out)) => Some(rle::Placement {
            resized: out,
            at: (0, 0),
            content: out,
            size: out,
        }),
        (None, None) => None,
    };
    let (out_h, out_w) = placement.map_or((height, width), |p| p.size);
    if let Some(p) = placement {
        let fits = p.at.0 + p.content.0 <= p.resized.0
            && p.at.1 + p.content.1 <= p.resized.1
            && p.content.0 <= p.size.0
            && p.content.1 <= p.size.1;
        if p.resized.0 == 0 || p.resized.1 == 0 || plane == 0 || !fits {
            return Err(PyValueError::new_err(format!(
                "masks of {height}x{width} cannot be resized, cut and placed as {p:?}"
            )));
        }
    }
    let out_plane = size(out_h, out_w)?;
    let fill = |out: &mut [u8]| -> Result<(), String> {
        let mut whole = vec![0u8; if placement.is_some() { plane } else { 0 }];
        for (k, strings) in objects.iter().enumerate() {
            let dst = &mut out[k * out_plane..(k + 1) * out_plane];
            let mask = if placement.is_some() {
                whole.fill(0);
                &mut whole[..]
            } else {
                &mut dst[..]
            };
            for s in strings {
                let counts = rle::counts(s).map_err(|e| format!("object {k}: {e}"))?;
                rle::union_into(&counts, height, width, flip && placement.is_none(), mask)
                    .map_err(|e| format!("object {k}: {e}"))?;
            }
            if let Some(p) = &placement {
                rle::resize_cut_place(&whole, (height, width), p, flip, dst);
            }
        }
        Ok(())
    };
    // Written straight into the bytearray, without the GIL (nothing else holds it yet).
    pyo3::types::PyByteArray::new_with(py, out_plane * objects.len(), |out| {
        py.detach(|| fill(out)).map_err(PyValueError::new_err)
    })
}

/// One COCO object: its class and its compressed RLE strings.
pub type CocoObject = (u8, Vec<Vec<u8>>);

/// Where a sample's segmentation mask comes from: a mask file (a palette or grey PNG), a COCO
/// image's objects (`(name, (height, width), [(class, [counts, ...]), ...])`: what names it
/// in errors, the image's size, each object's class and compressed RLE strings), made into the
/// segmentation reference's semantic mask, or a mask already read (`(name, (height, width),
/// values)`: one byte a pixel, row by row; `SBDataset`'s masks, which its own code reads from
/// MATLAB files), or a mask PNG's bytes (`(name, bytes)`: a `datasets` table's Image
/// column of masks).
#[derive(FromPyObject)]
pub enum MaskSource {
    /// The path of a mask PNG.
    File(String),
    /// A COCO image's objects.
    Coco((String, (u32, u32), Vec<CocoObject>)),
    /// A mask's values, read.
    Plane((String, (u32, u32), Vec<u8>)),
    /// A mask PNG's bytes.
    Encoded((String, PyBackedBytes)),
    /// A GIF mask's bytes made grey as Pillow's `.convert("L")` makes it (`(name, "gif-grey",
    /// bytes)`: the Carvana set's masks, as the U-Net tutorials read them), or its palette
    /// indices as stored (`"gif-indices"`: as milesial's U-Net reads them).
    GreyGif((String, String, PyBackedBytes)),
    /// A colour mask PNG's bytes (`(name, [0xRRGGBB, ...], bytes)`, the colours a list), each
    /// pixel made its colour's index in the list (255 for any other colour): a Dataset's
    /// code that compares RGB masks with colours. Last: the list must not be read as another
    /// variant's pair of integers.
    Colours((String, Vec<u32>, PyBackedBytes)),
}

impl MaskSource {
    /// The mask, or why not, named.
    fn mask(&self) -> Result<hpuload::augment::segment::Mask, String> {
        use hpuload::augment::segment;
        match self {
            Self::File(path) => {
                let named = |why: String| format!("{path}: {why}");
                let bytes = std::fs::read(path).map_err(|e| named(e.to_string()))?;
                segment::decode_mask(&bytes).map_err(named)
            }
            Self::Coco((name, (height, width), objects)) => {
                segment::coco_semantic_mask(*height, *width, objects)
                    .map_err(|why| format!("{name}: {why}"))
            }
            Self::Encoded((name, bytes)) => {
                segment::decode_mask(bytes).map_err(|why| format!("{name}: {why}"))
            }
            Self::GreyGif((name, kind, bytes)) if kind == "gif-grey" => {
                segment::decode_grey_gif(bytes).map_err(|why| format!("{name}: {why}"))
            }
            Self::GreyGif((name, kind, bytes)) if kind == "gif-indices" => {
                segment::decode_gif_indices(bytes).map_err(|why| format!("{name}: {why}"))
            }
            Self::GreyGif((name, kind, _)) => Err(format!("{name}: no mask source {kind:?}")),
            Self::Colours((name, colours, bytes)) => {
                segment::decode_colour_mask(bytes, colours).map_err(|why| format!("{name}: {why}"))
            }
            Self::Plane((name, (height, width), values)) => {
                let pixels = (*height as usize) * (*width as usize);
                if values.len() != pixels || pixels == 0 {
                    return Err(format!(
                        "{name}: {} values for a {height}x{width} mask",
                        values.len()
                    ));
                }
                Ok(segment::Mask {
                    width: *width,
                    height: *height,
                    values: values.iter().map(|&v| u16::from(v)).collect(),
                })
            }
        }
    }

    fn name(&self) -> &str {
        match self {
            Self::File(path) => path,
            Self::Coco((name, ..)) | Self::Plane((name, ..)) | Self::Encoded((name, _)) => name,
            Self::GreyGif((name, ..)) | Self::Colours((name, ..)) => name,
        }
    }
}

/// One sample's `resized_crop` from its plan, `((height, width), (top, left), hflip, vflip,
/// (padding above, padding to the left), (hflip, vflip) after the crop)`.
type Drawn = ((u32, u32), (u32, u32), bool, bool, (u32, u32), (bool, bool));

/// A segmentation mask per sample, moved as its image was (`drawn`: each sample's
/// [`Drawn`]): each of `sources` (see [`MaskSource`]) read or made, resized by Pillow's
/// nearest filter, flipped, padded (below and to the right, or centred) with `fill`, cut to
/// `height`x`width` and flipped as the flips after the crop fell, written as
/// `len(sources)` row-major planes of int64 at `out` (the data pointer of a contiguous int64
/// CPU tensor of that many values, which `hpuload/_segmentation.py` makes for the call and
/// holds through it): `np.array` of each PIL mask, as the segmentation reference's
/// `PILToTensor` makes it. Read and made without the GIL, on up to two threads; an
/// unreadable or unfit mask raises `ValueError` naming it. With `torch_nearest` the resize
/// takes torch's nearest positions instead of Pillow's (torchvision v2's resize of a
/// `tv_tensors.Mask`).
#[pyfunction]
#[pyo3(signature = (sources, drawn, height, width, fill, out, torch_nearest=false))]
#[allow(clippy::type_complexity, clippy::too_many_arguments)] // the pairs are Python's tuples
pub fn segmentation_masks(
    py: Python<'_>,
    sources: Vec<MaskSource>,
    drawn: Vec<Drawn>,
    height: u32,
    width: u32,
    fill: i64,
    out: usize,
    torch_nearest: bool,
) -> PyResult<()> {
    use hpuload::augment::segment;
    let nearest = if torch_nearest {
        segment::Nearest::Torch
    } else {
        segment::Nearest::Pillow
    };
    if sources.len() != drawn.len() {
        return Err(PyValueError::new_err("one drawn crop per mask"));
    }
    let plane = (height as usize) * (width as usize);
    let values = plane
        .checked_mul(sources.len())
        .filter(|v| v.checked_mul(8).is_some())
        .ok_or_else(|| PyValueError::new_err("masks overflow"))?;
    if values > 0 && (out == 0 || !out.is_multiple_of(std::mem::align_of::<i64>())) {
        return Err(PyValueError::new_err(format!(
            "{out:#x} is not the address of int64 values"
        )));
    }
    if values == 0 {
        return Ok(());
    }
    // SAFETY: `_segmentation.py` passes the data pointer of a contiguous int64 CPU tensor of
    // `len(sources) * height * width` values that it made for this call and holds through it
    // (nothing else reads or writes it meanwhile); the address was checked to be aligned.
    let dst = unsafe { std::slice::from_raw_parts_mut(out as *mut i64, values) };
    py.detach(|| {
        on_two_threads(&sources, &drawn, dst, plane, |source, drawn, dst| {
            cut_one(source, drawn, nearest, (height, width), fill, dst)
        })
    })
    .map_err(PyValueError::new_err)
}

/// One mask of [`segmentation_masks`], cut into `dst`, or why not, named.
fn cut_one(
    source: &MaskSource,
    &(resized, at, hflip, vflip, before, after): &Drawn,
    nearest: hpuload::augment::segment::Nearest,
    (height, width): (u32, u32),
    fill: i64,
    dst: &mut [i64],
) -> Result<(), String> {
    use hpuload::augment::segment;
    let mask = source.mask()?;
    let drawn = fitting(source, (resized, at, hflip, vflip, before), (height, width))?;
    segment::cut_mask(&mask, &drawn, nearest, (height, width), fill, after, dst);
    Ok(())
}

/// The drawn move as a `ResizedCrop`, or why a `height`x`width` crop cannot be cut so.
#[allow(clippy::type_complexity)] // Python's tuple
fn fitting(
    source: &MaskSource,
    (resized, at, hflip, vflip, before): ((u32, u32), (u32, u32), bool, bool, (u32, u32)),
    (height, width): (u32, u32),
) -> Result<hpuload::augment::ResizedCrop, String> {
    let drawn = hpuload::augment::ResizedCrop {
        resized,
        at,
        hflip,
        vflip,
        before,
    };
    // The padded resize: at its ends to the crop, or centred (as much after as before, or
    // one more).
    let padded =
        |side: u32, before: u32, out: u32| (side + 2 * before + u32::from(before > 0)).max(out);
    let fits = resized.0 > 0
        && resized.1 > 0
        && at.0 + height <= padded(resized.0, before.0, height)
        && at.1 + width <= padded(resized.1, before.1, width);
    if !fits {
        return Err(format!(
            "{}: cannot cut {height}x{width} as {drawn:?}",
            source.name()
        ));
    }
    Ok(drawn)
}

/// `make` of each of `sources` with its `drawn` into its `plane` values of `dst`, the masks
/// split over two threads (one where there is one mask).
fn on_two_threads<T: Send, D: Sync>(
    sources: &[MaskSource],
    drawn: &[D],
    dst: &mut [T],
    plane: usize,
    make: impl Fn(&MaskSource, &D, &mut [T]) -> Result<(), String> + Sync,
) -> Result<(), String> {
    let run = |sources: &[MaskSource], drawn: &[D], dst: &mut [T]| {
        sources
            .iter()
            .zip(drawn)
            .zip(dst.chunks_exact_mut(plane))
            .try_for_each(|((p, d), dst)| make(p, d, dst))
    };
    if sources.len() < 2 {
        // One mask (the evaluation preset's batches): no second thread to start.
        return run(sources, drawn, dst);
    }
    let half = sources.len().div_ceil(2);
    let (first, second) = dst.split_at_mut(half * plane);
    std::thread::scope(|s| {
        let other = s.spawn(|| run(&sources[half..], &drawn[half..], second));
        let mine = run(&sources[..half], &drawn[..half], first);
        mine.and(
            other
                .join()
                .unwrap_or_else(|_| Err("a mask thread panicked".into())),
        )
    })
}

/// A window of a mask, `(top, left, height, width)`.
type Window = (u32, u32, u32, u32);

/// What happens to a mask before its cut: its flips `(left to right, top to bottom)`, then
/// its window.
/// What comes before a mask's cut: its first flips, its window, and the Pillow filter its
/// resize blends it by (a grey mask Pillow's `.resize` or torchvision's `Resize` of a PIL
/// image blends: `Resampling`'s number, 1-5), 0 for nearest positions.
type Before = (Option<(bool, bool)>, Option<Window>, u8);

/// A move of a cut mask as `_segmentation.py` names it: `"hflip"`, `"vflip"`, `"transpose"`,
/// `"rot90_1"` to `"rot90_3"` (quarter turns), `(inverse, border)` (a nearest warp: the
/// image's `cv2_affine` op's float32 output-to-source matrix and OpenCV border, as the
/// sample's plan gives them), or one of the other warps below.
#[derive(FromPyObject)]
pub enum MoveArg {
    /// A flip, transpose or quarter turn.
    Named(String),
    /// A warp.
    Warp(([f32; 6], String)),
    /// A warp by OpenCV's fixed-point kernel (`("fixed", inverse in double, border)`), as it
    /// warps masks of int8, int16, int32 or float64 values.
    FixedPointWarp((String, [f64; 6], String)),
    /// torchvision v2's nearest warp of a mask (`("torch", rotate, angle, translate, scale,
    /// shear)`: the image's `warp` op's drawn parameters, about the mask's centre).
    TorchWarp((String, bool, f64, [f64; 2], f64, [f64; 2])),
}

impl MoveArg {
    fn to_move(&self) -> PyResult<hpuload::augment::segment::MaskMove> {
        use hpuload::augment::segment::MaskMove;
        match self {
            Self::Named(name) => match name.as_str() {
                "hflip" => Ok(MaskMove::HorizontalFlip),
                "vflip" => Ok(MaskMove::VerticalFlip),
                "transpose" => Ok(MaskMove::Transpose),
                "rot90_1" => Ok(MaskMove::Rot90(1)),
                "rot90_2" => Ok(MaskMove::Rot90(2)),
                "rot90_3" => Ok(MaskMove::Rot90(3)),
                other => Err(PyValueError::new_err(format!(
                    "no mask move named {other:?}"
                ))),
            },
            Self::Warp((inverse, border)) => Ok(MaskMove::Warp {
                inverse: *inverse,
                border: cv2_border(border)?,
            }),
            Self::FixedPointWarp((kind, inverse, border)) if kind == "fixed" => {
                Ok(MaskMove::FixedPointWarp {
                    inverse: *inverse,
                    border: cv2_border(border)?,
                })
            }
            Self::FixedPointWarp((kind, ..)) => Err(PyValueError::new_err(format!(
                "no mask warp named {kind:?}"
            ))),
            Self::TorchWarp((kind, rotate, angle, translate, scale, shear)) if kind == "torch" => {
                Ok(MaskMove::TorchWarp(hpuload::augment::Warp {
                    rotate: *rotate,
                    angle: *angle,
                    translate: *translate,
                    scale: *scale,
                    shear: *shear,
                    center: None,
                    nearest: true,
                    fill: None,
                    pil: false,
                }))
            }
            Self::TorchWarp((kind, ..)) => Err(PyValueError::new_err(format!(
                "no mask warp named {kind:?}"
            ))),
        }
    }
}

/// The OpenCV border named as hpuload's pipelines name it (`"constant"`, `"reflect101"`, ...).
fn cv2_border(name: &str) -> PyResult<hpuload::augment::Cv2Border> {
    serde_json::from_value(serde_json::Value::String(name.to_owned()))
        .map_err(|_| PyValueError::new_err(format!("no OpenCV border named {name:?}")))
}

/// [`segmentation_masks`] of masks of one byte a pixel written as bytes (`uint8`, what
/// albumentations' `ToTensorV2` hands out): each value mapped by `table` (256 bytes: a
/// `Lambda` on the mask), `fill` where the padding shows, at `out` (the data pointer of a
/// contiguous uint8 CPU tensor of `len(sources) * height * width` values that
/// `hpuload/_segmentation.py` makes for the call and holds through it). A mask of values
/// past 255 (a 16-bit grey PNG) raises `ValueError`, named. A resize takes `nearest`'s
/// positions: `"pillow"`, `"opencv"` (albumentations' `Resize` of a mask), `"torch"` (torch's
/// nearest: torchvision v2's resize of a `tv_tensors.Mask`) or `"torch_exact"` (torch's
/// nearest-exact, transformers' Segformer image processor). With
/// `moves` (one list per mask), each cut mask is then moved by its list in order (see
/// [`MoveArg`]; albumentations' warps of a mask after its resize or crop), `fill` where a
/// warp's constant border shows; the flips after the crop in `drawn` come before them. With
/// `windows` (one per mask, or None), each mask is first cut to its window `(top, left,
/// height, width)` (a `RandomResizedCrop`'s, before its resize). With `firsts` (one per mask,
/// or None), each mask is mirrored `(left to right, top to bottom)` before anything else (flips
/// drawn before the crop or resize). With `blends` (one Pillow filter per mask, `Resampling`'s
/// number, 0 for none; or None), a mask given one is resized as Pillow resizes a grey image
/// with it (`BILINEAR`: torchvision's `Resize` of a PIL mask in mode "L"), its edges' values
/// blended. With `wide`, `out` is the data
/// pointer of a contiguous int16 tensor instead, and `fill` may be 256: one call tells the
/// mask's values (0-255, mapped by `table`) from where the padding shows. With `values` (the
/// bytes of 257 values of one dtype of 1, 2, 4 or 8 bytes: what each byte, after `table`,
/// becomes, then what the padding holds), `out` is the data pointer of a contiguous tensor
/// of that dtype, each pixel written as its value there (`fill` unused): the mask in the
/// dtype the Dataset's code hands it out in, in one pass.
#[pyfunction]
#[pyo3(signature = (sources, drawn, height, width, fill, out, table=None, nearest="pillow", moves=None, windows=None, wide=false, firsts=None, blends=None, values=None))]
#[allow(clippy::too_many_arguments)] // the pairs are Python's tuples
pub fn byte_masks(
    py: Python<'_>,
    sources: Vec<MaskSource>,
    drawn: Vec<Drawn>,
    height: u32,
    width: u32,
    fill: u16,
    out: usize,
    table: Option<Vec<u8>>,
    nearest: &str,
    moves: Option<Vec<Vec<MoveArg>>>,
    windows: Option<Vec<Option<Window>>>,
    wide: bool,
    firsts: Option<Vec<Option<(bool, bool)>>>,
    blends: Option<Vec<u8>>,
    values: Option<Vec<u8>>,
) -> PyResult<()> {
    use hpuload::augment::segment;
    let nearest = match nearest {
        "pillow" => segment::Nearest::Pillow,
        "opencv" => segment::Nearest::OpenCv,
        "torch" => segment::Nearest::Torch,
        "torch_exact" => segment::Nearest::TorchExact,
        other => {
            return Err(PyValueError::new_err(format!(
                "no nearest positions named {other:?}"
            )))
        }
    };
    if sources.len() != drawn.len() {
        return Err(PyValueError::new_err("one drawn crop per mask"));
    }
    let moves = match moves {
        Some(m) if m.len() != sources.len() => {
            return Err(PyValueError::new_err("one list of moves per mask"))
        }
        Some(m) => m
            .iter()
            .map(|each| {
                each.iter()
                    .map(MoveArg::to_move)
                    .collect::<PyResult<Vec<_>>>()
            })
            .collect::<PyResult<Vec<_>>>()?,
        None => vec![Vec::new(); sources.len()],
    };
    let turns = |m: &segment::MaskMove| {
        matches!(
            m,
            segment::MaskMove::Transpose | segment::MaskMove::Rot90(_)
        )
    };
    if height != width && moves.iter().flatten().any(turns) {
        return Err(PyValueError::new_err(format!(
            "a transpose or quarter turn of {height}x{width} masks (square ones only)"
        )));
    }
    let windows = match windows {
        Some(w) if w.len() != sources.len() => {
            return Err(PyValueError::new_err("one window (or None) per mask"))
        }
        Some(w) => w,
        None => vec![None; sources.len()],
    };
    let firsts = match firsts {
        Some(f) if f.len() != sources.len() => {
            return Err(PyValueError::new_err(
                "one pair of first flips (or None) per mask",
            ))
        }
        Some(f) => f,
        None => vec![None; sources.len()],
    };
    let blends = match blends {
        Some(b) if b.len() != sources.len() => {
            return Err(PyValueError::new_err("one blending filter (or 0) per mask"))
        }
        Some(b) => b,
        None => vec![0; sources.len()],
    };
    let table: [u8; 256] = match table {
        Some(t) => t
            .try_into()
            .map_err(|_| PyValueError::new_err("the table maps 256 values"))?,
        None => std::array::from_fn(|v| v as u8),
    };
    let plane = (height as usize) * (width as usize);
    let count = plane
        .checked_mul(sources.len())
        .ok_or_else(|| PyValueError::new_err("masks overflow"))?;
    if count == 0 {
        return Ok(());
    }
    if out == 0 {
        return Err(PyValueError::new_err("no address for the masks"));
    }
    if wide && !out.is_multiple_of(std::mem::align_of::<u16>()) {
        return Err(PyValueError::new_err(format!(
            "{out:#x} is not the address of int16 values"
        )));
    }
    // Each mask's first flips and window, drawn cut and moves.
    let drawn: Vec<(Before, Drawn, &[segment::MaskMove])> = firsts
        .into_iter()
        .zip(windows)
        .zip(blends)
        .zip(drawn)
        .zip(&moves)
        .map(|((((f, w), b), d), m)| ((f, w, b), d, &m[..]))
        .collect();
    let size = (height, width);
    if let Some(values) = values {
        let each = values.len() / 257;
        return match (values.len() % 257, each) {
            (0, 1) => valued::<u8>(
                py, &sources, &drawn, size, nearest, &table, &values, out, count,
            ),
            (0, 2) => valued::<u16>(
                py, &sources, &drawn, size, nearest, &table, &values, out, count,
            ),
            (0, 4) => valued::<u32>(
                py, &sources, &drawn, size, nearest, &table, &values, out, count,
            ),
            (0, 8) => valued::<u64>(
                py, &sources, &drawn, size, nearest, &table, &values, out, count,
            ),
            _ => Err(PyValueError::new_err(format!(
                "{} bytes are no table of 257 values of 1, 2, 4 or 8 bytes",
                values.len()
            ))),
        };
    }
    if wide {
        // SAFETY: as below, of a contiguous int16 tensor of that many values; the address
        // was checked to be aligned.
        let dst = unsafe { std::slice::from_raw_parts_mut(out as *mut u16, count) };
        return py
            .detach(|| {
                cut_bytes(&sources, &drawn, size, nearest, fill, dst, |v| {
                    u16::from(table[v])
                })
            })
            .map_err(PyValueError::new_err);
    }
    let fill = u8::try_from(fill)
        .map_err(|_| PyValueError::new_err(format!("a fill of {fill} in bytes")))?;
    // SAFETY: `_segmentation.py` passes the data pointer of a contiguous uint8 CPU tensor of
    // `len(sources) * height * width` values that it made for this call and holds through it
    // (nothing else reads or writes it meanwhile); bytes need no alignment.
    let dst = unsafe { std::slice::from_raw_parts_mut(out as *mut u8, count) };
    py.detach(|| cut_bytes(&sources, &drawn, size, nearest, fill, dst, |v| table[v]))
        .map_err(PyValueError::new_err)
}

/// A value of one of the dtypes [`byte_masks`]' `values` holds, as its bits.
trait Bits: Copy + Send + Sync {
    fn from_ne(bytes: &[u8]) -> Self;
}

macro_rules! bits {
    ($($t:ty),*) => {$(
        impl Bits for $t {
            fn from_ne(bytes: &[u8]) -> Self {
                <$t>::from_ne_bytes(bytes.try_into().expect("one value's bytes"))
            }
        }
    )*};
}
bits!(u8, u16, u32, u64);

/// [`byte_masks`] with `values`: each pixel's byte (after `table`) written as its value of
/// `values` (257 of `T`'s size, the last the padding's), at `out`.
#[allow(clippy::too_many_arguments)]
fn valued<T: Bits>(
    py: Python<'_>,
    sources: &[MaskSource],
    drawn: &[(Before, Drawn, &[hpuload::augment::segment::MaskMove])],
    size: (u32, u32),
    nearest: hpuload::augment::segment::Nearest,
    table: &[u8; 256],
    values: &[u8],
    out: usize,
    count: usize,
) -> PyResult<()> {
    let lookup: Vec<T> = values
        .chunks_exact(std::mem::size_of::<T>())
        .map(T::from_ne)
        .collect();
    if !out.is_multiple_of(std::mem::align_of::<T>()) {
        return Err(PyValueError::new_err(format!(
            "{out:#x} is not the address of {}-byte values",
            std::mem::size_of::<T>()
        )));
    }
    let fill = lookup[256];
    // SAFETY: `_segmentation.py` passes the data pointer of a contiguous CPU tensor of
    // `count` values of `T`'s size (checked aligned above) that it holds through the call,
    // nothing else reading or writing it meanwhile; every bit pattern is a value of `T`.
    let dst = unsafe { std::slice::from_raw_parts_mut(out as *mut T, count) };
    py.detach(|| {
        cut_bytes(sources, drawn, size, nearest, fill, dst, |v| {
            lookup[usize::from(table[v])]
        })
    })
    .map_err(PyValueError::new_err)
}

/// [`byte_masks`]' work: each of `sources` read, flipped and cut to its window as first
/// asked, cut and moved as its
/// `drawn` says, each value written as `value` of it, `fill` where the padding shows, into its
/// plane of `dst`, on up to two threads without the GIL.
fn cut_bytes<T: Copy + Send + Sync>(
    sources: &[MaskSource],
    drawn: &[(Before, Drawn, &[hpuload::augment::segment::MaskMove])],
    (height, width): (u32, u32),
    nearest: hpuload::augment::segment::Nearest,
    fill: T,
    dst: &mut [T],
    value: impl Fn(usize) -> T + Sync,
) -> Result<(), String> {
    use hpuload::augment::segment;
    let plane = (height as usize) * (width as usize);
    on_two_threads(
        sources,
        drawn,
        dst,
        plane,
        |source, ((first, window, blend), drawn, moves), dst| {
            let mut mask = source.mask()?;
            if let Some(flips) = *first {
                mask.flip(flips);
            }
            if let Some((top, left, h, w)) = *window {
                mask = mask
                    .window((top, left), (h, w))
                    .map_err(|why| format!("{}: {why}", source.name()))?;
            }
            if let Some(v) = mask.values.iter().find(|&&v| v > 255) {
                return Err(format!(
                    "{}: a mask value of {v}, past a byte",
                    source.name()
                ));
            }
            let (resized, at, hflip, vflip, before, after) = *drawn;
            if *blend != 0 {
                // Resized here as Pillow blends a grey mask by that filter; the cut's
                // positions then read each pixel as it is.
                mask = mask
                    .pillow_resized(resized, *blend)
                    .map_err(|why| format!("{}: {why}", source.name()))?;
            }
            let cut = fitting(source, (resized, at, hflip, vflip, before), (height, width))?;
            segment::cut_mask_as(
                &mask,
                &cut,
                nearest,
                (height, width),
                fill,
                after,
                dst,
                |v| value(usize::from(v)),
            );
            segment::move_mask(dst, (height as usize, width as usize), moves, fill);
            Ok(())
        },
    )
}
