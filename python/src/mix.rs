//! MixUp and CutMix of a batch (`hpuload::augment::mix`), for `hpuload/_collate.py`: torch
//! tensors cross as addresses, which that module takes from tensors it has checked (contiguous
//! float32 on the CPU, `numel` values each) and keeps alive for the call.

use hpuload::augment::mix::{self, CutBox};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// `len` f32 at `address`, checked for null and alignment.
fn check(address: usize, len: usize) -> PyResult<()> {
    if address == 0 || !address.is_multiple_of(std::mem::align_of::<f32>()) {
        return Err(PyValueError::new_err(format!(
            "not the address of float32 values: {address:#x}"
        )));
    }
    if len.checked_mul(4).is_none_or(|b| b > isize::MAX as usize) {
        return Err(PyValueError::new_err(format!("{len} values is too many")));
    }
    Ok(())
}

/// Runs `f` on the `numel` f32 values at `src` and at `dst`, without the GIL.
fn with_slices(
    py: Python<'_>,
    dst: usize,
    src: usize,
    numel: usize,
    f: impl FnOnce(&mut [f32], &[f32]) + Send,
) -> PyResult<()> {
    check(dst, numel)?;
    check(src, numel)?;
    let (lo, hi) = (src.min(dst), src.max(dst));
    if hi < lo + numel * 4 {
        return Err(PyValueError::new_err("the output overlaps the batch"));
    }
    py.detach(|| {
        // SAFETY: `_collate.py` passes the data pointers of two live, contiguous float32 CPU
        // tensors of `numel` values each (it checks dtype, device, contiguity and size, and
        // holds both tensors for the call); the addresses are non-null and aligned (checked
        // above), the two ranges do not overlap (checked above), and nothing else touches the
        // freshly allocated output while this runs.
        let (dst, src) = unsafe {
            (
                std::slice::from_raw_parts_mut(dst as *mut f32, numel),
                std::slice::from_raw_parts(src as *const f32, numel),
            )
        };
        f(dst, src);
    });
    Ok(())
}

/// torchvision's MixUp of the float32 batch at `src` (`numel` values, samples of `sample_len`)
/// into `dst`, with weight `lam`.
#[pyfunction]
pub fn mixup_f32(
    py: Python<'_>,
    dst: usize,
    src: usize,
    numel: usize,
    sample_len: usize,
    lam: f64,
) -> PyResult<()> {
    if sample_len == 0 || !numel.is_multiple_of(sample_len) {
        return Err(PyValueError::new_err("the batch is not whole samples"));
    }
    with_slices(py, dst, src, numel, |d, s| {
        mix::mixup(d, s, sample_len, lam)
    })
}

/// torchvision's CutMix of the float32 NCHW batch at `src` (`shape`) into `dst`, pasting the
/// box `(x1, y1, x2, y2)`.
#[pyfunction]
pub fn cutmix_f32(
    py: Python<'_>,
    dst: usize,
    src: usize,
    shape: [usize; 4],
    cut: (usize, usize, usize, usize),
) -> PyResult<()> {
    let [n, c, h, w] = shape;
    let numel = n
        .checked_mul(c)
        .and_then(|v| v.checked_mul(h))
        .and_then(|v| v.checked_mul(w))
        .ok_or_else(|| PyValueError::new_err("the shape is too large"))?;
    let (x1, y1, x2, y2) = cut;
    if !(x1 <= x2 && x2 <= w && y1 <= y2 && y2 <= h) {
        return Err(PyValueError::new_err(format!(
            "the box {cut:?} leaves the {h}x{w} image"
        )));
    }
    let cut = CutBox { x1, y1, x2, y2 };
    with_slices(py, dst, src, numel, |d, s| mix::cutmix(d, s, shape, cut))
}
