//! COCO masks from compressed RLE strings, for `hpuload/_detection.py` (the detection
//! reference's v1 path): `hpuload::source::coco::rle` decodes straight into row-major planes.

use hpuload::source::coco::rle;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The masks of `objects` (each a list of COCO compressed RLE `counts` strings, one per
/// polygon, as pycocotools' `frPyObjects` gives them), each the union of its strings' masks,
/// as `len(objects)` row-major `height` x `width` planes of 0 and 1 in one bytearray; what
/// `decode` and `any` over the polygons give, without the column-major decode and transpose.
/// With `flip`, each plane mirrored left to right (`flip(-1)` of the stack). With `resize`
/// `(height, width)`, each plane resized first as torchvision's nearest resize of masks does
/// (the reference's `RandomShortestSize`), then mirrored.
#[pyfunction]
#[pyo3(signature = (objects, height, width, flip=false, resize=None))]
pub fn coco_masks<'py>(
    py: Python<'py>,
    objects: Vec<Vec<Vec<u8>>>,
    height: usize,
    width: usize,
    flip: bool,
    resize: Option<(usize, usize)>,
) -> PyResult<Bound<'py, pyo3::types::PyByteArray>> {
    let size = |h: usize, w: usize| {
        h.checked_mul(w)
            .filter(|p| p.checked_mul(objects.len()).is_some())
            .ok_or_else(|| PyValueError::new_err("masks overflow"))
    };
    let plane = size(height, width)?;
    let (out_h, out_w) = resize.unwrap_or((height, width));
    if resize.is_some() && (out_h == 0 || out_w == 0 || plane == 0) {
        return Err(PyValueError::new_err("masks resized to or from nothing"));
    }
    let out_plane = size(out_h, out_w)?;
    let planes = py.detach(|| -> Result<Vec<u8>, String> {
        let mut out = vec![0u8; out_plane * objects.len()];
        let mut whole = vec![0u8; if resize.is_some() { plane } else { 0 }];
        for (k, strings) in objects.iter().enumerate() {
            let dst = &mut out[k * out_plane..(k + 1) * out_plane];
            let mask = if resize.is_some() {
                whole.fill(0);
                &mut whole[..]
            } else {
                &mut dst[..]
            };
            for s in strings {
                let counts = rle::counts(s).map_err(|e| format!("object {k}: {e}"))?;
                rle::union_into(&counts, height, width, flip && resize.is_none(), mask)
                    .map_err(|e| format!("object {k}: {e}"))?;
            }
            if resize.is_some() {
                rle::resize_nearest(&whole, (height, width), (out_h, out_w), flip, dst);
            }
        }
        Ok(out)
    });
    let planes = planes.map_err(PyValueError::new_err)?;
    Ok(pyo3::types::PyByteArray::new(py, &planes))
}
