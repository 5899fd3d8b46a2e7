//! The detection reference's copy-paste (`hpuload::augment::paste`), for
//! `hpuload/_copy_paste.py`: torch tensors cross as addresses, which that module takes from
//! tensors it has checked (contiguous CPU tensors of the dtype and size named here, the outputs
//! freshly allocated) and keeps alive for the call.

use hpuload::augment::paste::{self, MaskSummary};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// One region of memory: its address and its length in bytes.
struct Region {
    address: usize,
    bytes: usize,
}

impl Region {
    fn new(what: &str, address: usize, len: usize, size: usize) -> PyResult<Self> {
        let bytes = len
            .checked_mul(size)
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or_else(|| PyValueError::new_err(format!("{what}: {len} values is too many")))?;
        if bytes > 0 && (address == 0 || !address.is_multiple_of(size)) {
            return Err(PyValueError::new_err(format!(
                "{what}: {address:#x} is not the address of {size}-byte values"
            )));
        }
        Ok(Region { address, bytes })
    }

    fn overlaps(&self, other: &Region) -> bool {
        self.bytes > 0
            && other.bytes > 0
            && self.address < other.address + other.bytes
            && other.address < self.address + self.bytes
    }
}

/// The `len` values of `T` that `r` names (an empty slice when `len` is 0, whatever the address).
///
/// # Safety
/// Unless `len` is 0, `r.address` is the aligned address of `len` live values of `T` that
/// nothing writes while the slice lives.
unsafe fn slice<'a, T>(r: &Region, len: usize) -> &'a [T] {
    if len == 0 {
        return &[];
    }
    // SAFETY: as the caller promises.
    unsafe { std::slice::from_raw_parts(r.address as *const T, len) }
}

/// [`slice`], writable.
///
/// # Safety
/// As for [`slice`], and nothing else reads or writes the values while the slice lives.
unsafe fn slice_mut<'a, T>(r: &Region, len: usize) -> &'a mut [T] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: as the caller promises.
    unsafe { std::slice::from_raw_parts_mut(r.address as *mut T, len) }
}

/// A summary as Python takes it: `(sum, (x_min, y_min, x_max, y_max) or None)`.
type Summary = (u64, Option<[usize; 4]>);

/// The kept masks' indices and summaries, and the pasted masks' summaries.
type Done = (Vec<(usize, Summary)>, Vec<Summary>);

fn summary(m: MaskSummary) -> Summary {
    (m.sum, m.bounds)
}

/// The copy-paste of one image (`hpuload::augment::paste::copy_paste`): `out` (f32, `shape` =
/// `(planes, h, w)`) gets `image`'s values with the donor's (`donor`, the same shape) under the
/// paste mask of the `chosen` of the `donor_count` masks at `donor_masks` (u8, `h` x `w` each;
/// grown by two pixels with `blend`); `out_masks` (room for `count + len(chosen)` masks) gets
/// the `count` masks at `masks` that keep a pixel once cleared under the paste mask, then the
/// chosen ones. Returns the kept masks' indices with their summaries, and the chosen masks'
/// summaries.
#[pyfunction]
#[allow(clippy::too_many_arguments)] // addresses and sizes, as the caller holds them
pub fn copy_paste(
    py: Python<'_>,
    out: usize,
    image: usize,
    donor: usize,
    shape: (usize, usize, usize),
    donor_masks: usize,
    donor_count: usize,
    chosen: Vec<usize>,
    masks: usize,
    count: usize,
    out_masks: usize,
    blend: bool,
) -> PyResult<Done> {
    let (planes, h, w) = shape;
    let too_large = || PyValueError::new_err("the image is too large");
    let plane = h.checked_mul(w).ok_or_else(too_large)?;
    let pixels = plane.checked_mul(planes).ok_or_else(too_large)?;
    let of = |n: usize| n.checked_mul(plane).ok_or_else(too_large);
    if let Some(&i) = chosen.iter().find(|&&i| i >= donor_count) {
        return Err(PyValueError::new_err(format!(
            "mask {i} chosen of {donor_count}"
        )));
    }
    let out_r = Region::new("out", out, pixels, 4)?;
    let image_r = Region::new("image", image, pixels, 4)?;
    let donor_r = Region::new("donor", donor, pixels, 4)?;
    let donor_masks_r = Region::new("donor masks", donor_masks, of(donor_count)?, 1)?;
    let masks_r = Region::new("masks", masks, of(count)?, 1)?;
    let room = count.checked_add(chosen.len()).ok_or_else(too_large)?;
    let out_masks_r = Region::new("out masks", out_masks, of(room)?, 1)?;
    let inputs = [&image_r, &donor_r, &donor_masks_r, &masks_r];
    if inputs
        .iter()
        .any(|r| out_r.overlaps(r) || out_masks_r.overlaps(r))
        || out_r.overlaps(&out_masks_r)
    {
        return Err(PyValueError::new_err("an output overlaps an input"));
    }
    Ok(py.detach(|| {
        // SAFETY: `_copy_paste.py` passes the data pointers of live, contiguous CPU tensors
        // of the dtypes and sizes above (f32 images of `planes * h * w` values, u8 masks of
        // `h * w` bytes each), which it checks and holds for the call; each address is
        // non-null and aligned where its region is not empty (checked above), the two outputs
        // are freshly allocated and overlap nothing (checked above), and nothing else touches
        // them while this runs.
        let (out, image, donor_pixels, donor_masks, masks, out_masks) = unsafe {
            (
                slice_mut::<f32>(&out_r, pixels),
                slice::<f32>(&image_r, pixels),
                slice::<f32>(&donor_r, pixels),
                slice::<u8>(&donor_masks_r, donor_masks_r.bytes),
                slice::<u8>(&masks_r, masks_r.bytes),
                slice_mut::<u8>(&out_masks_r, out_masks_r.bytes),
            )
        };
        let donor = paste::Donor {
            pixels: donor_pixels,
            masks: donor_masks,
            chosen: &chosen,
        };
        let done = paste::copy_paste(image, masks, &donor, (h, w), blend, out, out_masks);
        (
            done.kept
                .into_iter()
                .map(|(i, m)| (i, summary(m)))
                .collect(),
            done.pasted.into_iter().map(summary).collect(),
        )
    }))
}
