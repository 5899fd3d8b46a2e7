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

/// The two managed-tensor structs DLPack defines, as one interface: the capsule name each is
/// exported under, how it wraps a `DlTensor`, and where its deleter and context go.
trait Managed: Sized {
    /// The capsule's name (a consumer renames it `used_<name>`).
    const NAME: &'static CStr;
    /// The struct around `dl_tensor`, with `delete::<Self>` as its deleter.
    fn wrap(dl_tensor: DlTensor) -> Self;
    fn dl_tensor_mut(&mut self) -> &mut DlTensor;
    fn set_context(&mut self, context: *mut c_void);
}

impl Managed for DlManagedTensor {
    const NAME: &'static CStr = c"dltensor";
    fn wrap(dl_tensor: DlTensor) -> Self {
        Self {
            dl_tensor,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete::<Self>),
        }
    }
    fn dl_tensor_mut(&mut self) -> &mut DlTensor {
        &mut self.dl_tensor
    }
    fn set_context(&mut self, context: *mut c_void) {
        self.manager_ctx = context;
    }
}

impl Managed for DlManagedTensorVersioned {
    const NAME: &'static CStr = c"dltensor_versioned";
    fn wrap(dl_tensor: DlTensor) -> Self {
        Self {
            version: DlPackVersion { major: 1, minor: 0 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete::<Self>),
            // Writable and not a copy: the tensor is this batch's own buffer, lent to the caller.
            flags: 0,
            dl_tensor,
        }
    }
    fn dl_tensor_mut(&mut self) -> &mut DlTensor {
        &mut self.dl_tensor
    }
    fn set_context(&mut self, context: *mut c_void) {
        self.manager_ctx = context;
    }
}

/// The deleter DLPack consumers call once, when they are done with the tensor.
unsafe extern "C" fn delete<M: Managed>(managed: *mut M) {
    if !managed.is_null() {
        // SAFETY: `managed` is the first field of a boxed `Exported<M>` made by `capsule`
        // (repr(C)), and the DLPack protocol calls the deleter exactly once.
        drop(unsafe { Box::from_raw(managed.cast::<Exported<M>>()) });
    }
}

/// Destructor of a capsule: frees the tensor only if nobody consumed the capsule (a consumer
/// renames it and takes over the deleter).
unsafe extern "C" fn drop_capsule<M: Managed>(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the capsule being destroyed; `PyCapsule_IsValid` checks the
    // name without raising, and the pointer under that name is the one `capsule` stored.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, M::NAME.as_ptr()) == 1 {
            delete::<M>(ffi::PyCapsule_GetPointer(capsule, M::NAME.as_ptr()).cast());
        }
    }
}

/// A capsule that owns a share of `tensor` until its consumer (or, unconsumed, the capsule's
/// destructor) deletes it.
fn capsule<'py, M: Managed>(py: Python<'py>, tensor: &HostTensor) -> PyResult<Bound<'py, PyAny>> {
    let (shape, strides) = layout(tensor.shape());
    let mut e = Box::new(Exported {
        managed: M::wrap(DlTensor {
            data: tensor.as_bytes().as_ptr().cast_mut().cast(),
            device: DlDevice {
                device_type: DEVICE_CPU,
                device_id: 0,
            },
            ndim: shape.len() as i32,
            dtype: data_type(tensor.dtype()),
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        }),
        tensor: tensor.clone(),
        shape,
        strides,
    });
    // The vectors' heap storage does not move with the box: the pointers stay valid.
    let (shape_ptr, strides_ptr) = (e.shape.as_mut_ptr(), e.strides.as_mut_ptr());
    let t = e.managed.dl_tensor_mut();
    t.shape = shape_ptr;
    t.strides = strides_ptr;
    let raw = Box::into_raw(e);
    // SAFETY: `raw` is a live box we own; the context is only ever given back to us.
    unsafe { (*raw).managed.set_context(raw.cast()) };
    // SAFETY: `raw` is non-null and owned by the capsule from here on; the name is static, as
    // capsule names must outlive their capsule.
    let made = unsafe { ffi::PyCapsule_New(raw.cast(), M::NAME.as_ptr(), Some(drop_capsule::<M>)) };
    if made.is_null() {
        // SAFETY: no capsule was made, so the box is still ours to free.
        unsafe { delete::<M>(raw.cast()) };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: `PyCapsule_New` returned a new (owned) reference.
    Ok(unsafe { Bound::from_owned_ptr(py, made) })
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
        self.inner.dtype().name().to_string()
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
            Some((major, _)) if major >= 1 => capsule::<DlManagedTensorVersioned>(py, &self.inner),
            _ => capsule::<DlManagedTensor>(py, &self.inner),
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
