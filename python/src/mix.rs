//! MixUp and CutMix of a batch (`hpuload::augment::mix`), for `hpuload/_collate.py`: torch
//! tensors cross as addresses, which that module takes from tensors it has checked (contiguous
//! float32 on the CPU, `numel` values each) and keeps alive for the call.

use hpuload::augment::mix::{self, CutBox, U8Mix};
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

/// One job of [`mix_u8`]: `(row, kind, a, b, wa, wb, (x1, y1, x2, y2))`, kind 0 a copy of
/// sample `a`, 1 a blend of `a` and `b` with weights `wa` and `wb` (taken as f32, as torch
/// takes a Python scalar for a float32 tensor), 2 sample `a` with the box from sample `b`.
type Job = (
    usize,
    u8,
    usize,
    usize,
    f64,
    f64,
    (usize, usize, usize, usize),
);

/// timm's `FastCollateMixup` of the uint8 NCHW batch at `src` (`shape`) into the `rows`
/// samples at `dst`, one output sample per job (`hpuload::augment::mix::mix_u8`).
#[pyfunction]
pub fn mix_u8(
    py: Python<'_>,
    dst: usize,
    rows: usize,
    src: usize,
    shape: [usize; 4],
    jobs: Vec<Job>,
) -> PyResult<()> {
    let [n, c, h, w] = shape;
    let too_large = || PyValueError::new_err("the shape is too large");
    let len = c
        .checked_mul(h)
        .and_then(|v| v.checked_mul(w))
        .ok_or_else(too_large)?;
    let (src_len, dst_len) = (
        n.checked_mul(len).ok_or_else(too_large)?,
        rows.checked_mul(len).ok_or_else(too_large)?,
    );
    let mut mixes = Vec::with_capacity(jobs.len());
    for (row, kind, a, b, wa, wb, (x1, y1, x2, y2)) in jobs {
        if row >= rows || a >= n || b >= n {
            return Err(PyValueError::new_err(format!(
                "job ({row}, {a}, {b}) outside {n} samples into {rows}"
            )));
        }
        mixes.push((
            row,
            match kind {
                0 => U8Mix::Copy { from: a },
                1 => U8Mix::Blend {
                    a,
                    b,
                    wa: wa as f32,
                    wb: wb as f32,
                },
                2 if x1 <= x2 && x2 <= w && y1 <= y2 && y2 <= h => U8Mix::Cut {
                    from: a,
                    other: b,
                    cut: CutBox { x1, y1, x2, y2 },
                },
                _ => return Err(PyValueError::new_err(format!("bad job kind {kind} or box"))),
            },
        ));
    }
    for (address, bytes) in [(dst, dst_len), (src, src_len)] {
        if bytes > 0 && address == 0 || bytes > isize::MAX as usize {
            return Err(PyValueError::new_err("not the address of the batch"));
        }
    }
    if dst_len > 0 && src_len > 0 && dst < src + src_len && src < dst + dst_len {
        return Err(PyValueError::new_err("the output overlaps the batch"));
    }
    if dst_len == 0 || src_len == 0 {
        return Ok(());
    }
    py.detach(|| {
        // SAFETY: `_collate.py` passes the data pointers of two live, contiguous uint8 CPU
        // tensors (the batch of `n` samples and a fresh output of `rows`, each sample
        // `c * h * w` bytes), which it checks and holds for the call; both are non-null
        // (checked above) and do not overlap (checked above), and nothing else touches the
        // output while this runs.
        let (out, batch) = unsafe {
            (
                std::slice::from_raw_parts_mut(dst as *mut u8, dst_len),
                std::slice::from_raw_parts(src as *const u8, src_len),
            )
        };
        mix::mix_u8(out, batch, shape, &mixes);
    });
    Ok(())
}
