//! DLPack export of a host tensor: `__dlpack__` / `__dlpack_device__`, with the legacy
//! `dltensor` capsule (what torch before 2.9 accepts) unless the caller asks for version 1.0 or
//! later, then the versioned `dltensor_versioned` one.
//!
//! Ownership: the capsule owns one boxed [`Exported`], which holds a clone of the
//! [`HostTensor`] (and so a share of the pinned batch buffer). Whoever consumes the capsule
//! (torch renames it `used_dltensor`) calls the deleter when its tensor is freed; a capsule
//! nobody consumed is freed by its own destructor. Either way the box is dropped exactly once,
//! and the pinned buffer goes back to the loader's pool when its last share is gone.

use std::ffi::{c_void, CStr};

use hpuload::{Dtype, HostTensor};
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyAny;

const LEGACY: &CStr = c"dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";

/// `kDLCPU`. Page-locked memory is still CPU memory to a consumer without an accelerator
/// runtime (`kDLCUDAHost` would tie the tensor to CUDA).
const DEVICE_CPU: i32 = 1;

#[repr(C)]
#[derive(Clone, Copy)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

#[repr(C)]
struct DlPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DlManagedTensorVersioned {
    version: DlPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DlTensor,
}

/// What a capsule owns: the managed struct first (so a pointer to it is a pointer to this), then
/// the tensor share and the shape and strides the `DlTensor` points into.
#[repr(C)]
struct Exported<M> {
    managed: M,
    tensor: HostTensor,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

fn data_type(dtype: Dtype) -> DlDataType {
    let (code, bits) = match dtype {
        Dtype::U8 => (1, 8),    // kDLUInt
        Dtype::F16 => (2, 16),  // kDLFloat
        Dtype::Bf16 => (4, 16), // kDLBfloat
        Dtype::F32 => (2, 32),
        Dtype::I64 => (0, 64), // kDLInt
    };
    DlDataType {
        code,
        bits,
        lanes: 1,
    }
}

/// Shape and row-major strides (in elements) of a contiguous tensor.
fn layout(shape: &[usize]) -> (Vec<i64>, Vec<i64>) {
    let shape: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    (shape, strides)
}

/// Fills a `DlTensor` that points into `e`'s own shape and strides.
fn dl_tensor<M>(e: &mut Exported<M>) -> DlTensor {
    DlTensor {
        data: e.tensor.as_bytes().as_ptr().cast_mut().cast(),
        device: DlDevice {
            device_type: DEVICE_CPU,
            device_id: 0,
        },
        ndim: e.shape.len() as i32,
        dtype: data_type(e.tensor.dtype()),
        shape: e.shape.as_mut_ptr(),
        strides: e.strides.as_mut_ptr(),
        byte_offset: 0,
    }
}

unsafe extern "C" fn delete_legacy(managed: *mut DlManagedTensor) {
    if !managed.is_null() {
        // SAFETY: `managed` is the first field of a boxed `Exported<DlManagedTensor>` made by
        // `legacy_capsule` (repr(C)), and the DLPack protocol calls the deleter exactly once.
        drop(unsafe { Box::from_raw(managed.cast::<Exported<DlManagedTensor>>()) });
    }
}

unsafe extern "C" fn delete_versioned(managed: *mut DlManagedTensorVersioned) {
    if !managed.is_null() {
        // SAFETY: as in `delete_legacy`, for `versioned_capsule`'s box.
        drop(unsafe { Box::from_raw(managed.cast::<Exported<DlManagedTensorVersioned>>()) });
    }
}

/// Destructor of a capsule: frees the tensor only if nobody consumed the capsule (a consumer
/// renames it and takes over the deleter).
unsafe extern "C" fn drop_legacy_capsule(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the capsule being destroyed; `PyCapsule_IsValid` checks the
    // name without raising, and the pointer under that name is the one we stored.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, LEGACY.as_ptr()) == 1 {
            let p = ffi::PyCapsule_GetPointer(capsule, LEGACY.as_ptr()).cast::<DlManagedTensor>();
            delete_legacy(p);
        }
    }
}

unsafe extern "C" fn drop_versioned_capsule(capsule: *mut ffi::PyObject) {
    // SAFETY: as in `drop_legacy_capsule`.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, VERSIONED.as_ptr()) == 1 {
            let p = ffi::PyCapsule_GetPointer(capsule, VERSIONED.as_ptr())
                .cast::<DlManagedTensorVersioned>();
            delete_versioned(p);
        }
    }
}

fn legacy_capsule<'py>(py: Python<'py>, tensor: &HostTensor) -> PyResult<Bound<'py, PyAny>> {
    let (shape, strides) = layout(tensor.shape());
    let mut e = Box::new(Exported {
        managed: DlManagedTensor {
            dl_tensor: DlTensor {
                data: std::ptr::null_mut(),
                device: DlDevice {
                    device_type: DEVICE_CPU,
                    device_id: 0,
                },
                ndim: 0,
                dtype: data_type(tensor.dtype()),
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_legacy),
        },
        tensor: tensor.clone(),
        shape,
        strides,
    });
    e.managed.dl_tensor = dl_tensor(&mut e);
    let raw = Box::into_raw(e);
    // SAFETY: `raw` is a live box; storing its own address as the manager context is what
    // DLPack consumers pass back to nobody but us.
    unsafe { (*raw).managed.manager_ctx = raw.cast() };
    make_capsule(py, raw.cast(), LEGACY, drop_legacy_capsule, || {
        // SAFETY: the capsule was not made, so we still own the box.
        unsafe { delete_legacy(raw.cast()) }
    })
}

fn versioned_capsule<'py>(py: Python<'py>, tensor: &HostTensor) -> PyResult<Bound<'py, PyAny>> {
    let (shape, strides) = layout(tensor.shape());
    let mut e = Box::new(Exported {
        managed: DlManagedTensorVersioned {
            version: DlPackVersion { major: 1, minor: 0 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_versioned),
            // Writable and not a copy: the tensor is this batch's own buffer, lent to the caller.
            flags: 0,
            dl_tensor: DlTensor {
                data: std::ptr::null_mut(),
                device: DlDevice {
                    device_type: DEVICE_CPU,
                    device_id: 0,
                },
                ndim: 0,
                dtype: data_type(tensor.dtype()),
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        },
        tensor: tensor.clone(),
        shape,
        strides,
    });
    e.managed.dl_tensor = dl_tensor(&mut e);
    let raw = Box::into_raw(e);
    // SAFETY: as in `legacy_capsule`.
    unsafe { (*raw).managed.manager_ctx = raw.cast() };
    make_capsule(py, raw.cast(), VERSIONED, drop_versioned_capsule, || {
        // SAFETY: the capsule was not made, so we still own the box.
        unsafe { delete_versioned(raw.cast()) }
    })
}

fn make_capsule<'py>(
    py: Python<'py>,
    pointer: *mut c_void,
    name: &'static CStr,
    destructor: unsafe extern "C" fn(*mut ffi::PyObject),
    on_failure: impl FnOnce(),
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: `pointer` is non-null and owned by the capsule from here on; `name` is static, as
    // capsule names must outlive the capsule.
    let capsule = unsafe { ffi::PyCapsule_New(pointer, name.as_ptr(), Some(destructor)) };
    if capsule.is_null() {
        on_failure();
        return Err(PyErr::fetch(py));
    }
    // SAFETY: `PyCapsule_New` returned a new (owned) reference.
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) })
}

/// A batch tensor in pinned host memory. Hand it to `torch.from_dlpack` (or any DLPack
/// consumer): no copy is made, and the memory stays valid for as long as the consumer's tensor
/// lives, even after the loader is gone.
#[pyclass(frozen, module = "hpuload._hpuload")]
pub struct Tensor {
    inner: HostTensor,
}

impl Tensor {
    pub fn new(inner: HostTensor) -> Self {
        Self { inner }
    }
}

#[pymethods]
impl Tensor {
    /// The shape, outermost dimension first.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.inner.shape().to_vec()
    }

    /// The element type: `"u8"`, `"f16"`, `"bf16"`, `"f32"` or `"i64"`.
    #[getter]
    fn dtype(&self) -> String {
        serde_json::to_value(self.inner.dtype())
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// Whether the memory is page-locked.
    #[getter]
    fn pinned(&self) -> bool {
        self.inner.is_pinned()
    }

    /// Size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.nbytes()
    }

    /// `(kDLCPU, 0)`.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (DEVICE_CPU, 0)
    }

    /// A DLPack capsule of this tensor (the array API's protocol). `max_version` below
    /// `(1, 0)` or absent gives the legacy capsule; `copy=True` and other devices are refused
    /// (`BufferError`), as the protocol asks.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(s) = stream {
            if !s.is_none() && s.extract::<i64>().map_or(true, |v| v != -1) {
                return Err(PyBufferError::new_err(
                    "a CPU tensor takes no stream (stream must be None)",
                ));
            }
        }
        if dl_device.is_some_and(|d| d != (DEVICE_CPU, 0)) {
            return Err(PyBufferError::new_err(
                "hpuload tensors live in host memory (kDLCPU, 0); copy them with .to(device)",
            ));
        }
        if copy == Some(true) {
            return Err(PyBufferError::new_err(
                "hpuload exports its batch buffer without a copy (copy=True is not supported)",
            ));
        }
        match max_version {
            Some((major, _)) if major >= 1 => versioned_capsule(py, &self.inner),
            _ => legacy_capsule(py, &self.inner),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "hpuload.Tensor(shape={:?}, dtype={}, pinned={})",
            self.inner.shape(),
            self.dtype(),
            self.inner.is_pinned()
        )
    }
}
