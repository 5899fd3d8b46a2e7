//! COCO masks from compressed RLE strings, for `hpuload/_detection.py` (the detection
//! reference's v1 path): `hpuload::source::coco::rle` decodes straight into row-major planes.

use hpuload::source::coco::rle;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The masks of `objects` (each a list of COCO compressed RLE `counts` strings, one per
/// polygon, as pycocotools' `frPyObjects` gives them), each the union of its strings' masks,
/// as `len(objects)` row-major `height` x `width` planes of 0 and 1 in one bytearray; what
/// `decode` and `any` over the polygons give, without the column-major decode and transpose.
/// With `flip`, each plane mirrored left to right (`flip(-1)` of the stack).
#[pyfunction]
#[pyo3(signature = (objects, height, width, flip=false))]
pub fn coco_masks<'py>(
    py: Python<'py>,
    objects: Vec<Vec<Vec<u8>>>,
    height: usize,
    width: usize,
    flip: bool,
) -> PyResult<Bound<'py, pyo3::types::PyByteArray>> {
    let plane = height
        .checked_mul(width)
        .ok_or_else(|| PyValueError::new_err("mask size overflows"))?;
    let total = plane
        .checked_mul(objects.len())
        .ok_or_else(|| PyValueError::new_err("masks overflow"))?;
    let planes = py.detach(|| -> Result<Vec<u8>, String> {
        let mut out = vec![0u8; total];
        for (k, strings) in objects.iter().enumerate() {
            let mask = &mut out[k * plane..(k + 1) * plane];
            for s in strings {
                let counts = rle::counts(s).map_err(|e| format!("object {k}: {e}"))?;
                rle::union_into(&counts, height, width, flip, mask)
                    .map_err(|e| format!("object {k}: {e}"))?;
            }
        }
        Ok(out)
    });
    let planes = planes.map_err(PyValueError::new_err)?;
    Ok(pyo3::types::PyByteArray::new(py, &planes))
}
