//! Where a batch's tensors live: in device memory ([`DeviceTensor`], the default) or in the
//! pinned host buffer the batch was assembled in ([`HostTensor`], for consumers on the host such
//! as PyTorch CPU tensors). A host batch lends its pinned buffer: the buffer goes back to the
//! loader's pool only when the last tensor that shares it is dropped.

use std::sync::Arc;

use crossbeam_channel::Sender;

use crate::hpu::{DeviceTensor, Dtype, HpuError};
use crate::pinned::{PinnedBuffer, PinnedPool};

/// Where a loader leaves its batches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// In device memory, as [`DeviceTensor`]s. The default.
    #[default]
    Device,
    /// In the pinned host buffer the batch was assembled in, as [`HostTensor`]s: what a consumer
    /// on the host (a CPU tensor of PyTorch) reads without a copy. Samples the media engine
    /// decoded come back from the device by DMA; samples decoded on the CPU never leave it.
    Host,
}

/// A batch tensor, on the device or on the host (see [`Placement`]).
#[derive(Clone, Debug)]
pub enum Tensor {
    /// In device memory.
    Device(DeviceTensor),
    /// In a pinned host buffer lent by the loader.
    Host(HostTensor),
}

impl Tensor {
    /// The shape, outermost dimension first.
    pub fn shape(&self) -> &[usize] {
        match self {
            Self::Device(t) => t.shape(),
            Self::Host(t) => t.shape(),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        match self {
            Self::Device(t) => t.dtype(),
            Self::Host(t) => t.dtype(),
        }
    }

    /// Size in bytes.
    pub fn nbytes(&self) -> usize {
        match self {
            Self::Device(t) => t.nbytes(),
            Self::Host(t) => t.nbytes(),
        }
    }

    /// A host copy of the bytes (native endianness): a DMA from the device, or a plain copy.
    ///
    /// # Errors
    /// The device transfer failed.
    pub fn to_host(&self) -> Result<Vec<u8>, HpuError> {
        match self {
            Self::Device(t) => t.to_host(),
            Self::Host(t) => Ok(t.as_bytes().to_vec()),
        }
    }

    /// The device tensor, if the batch is on the device.
    pub fn as_device(&self) -> Option<&DeviceTensor> {
        match self {
            Self::Device(t) => Some(t),
            Self::Host(_) => None,
        }
    }

    /// The host tensor, if the batch is on the host.
    pub fn as_host(&self) -> Option<&HostTensor> {
        match self {
            Self::Device(_) => None,
            Self::Host(t) => Some(t),
        }
    }
}

/// A pinned batch buffer lent to the consumer; back to the pool when dropped.
pub(crate) struct Lease {
    buffer: Option<PinnedBuffer>,
    pool: Sender<PinnedBuffer>,
}

impl Lease {
    pub fn new(buffer: PinnedBuffer, pool: Sender<PinnedBuffer>) -> Arc<Self> {
        Arc::new(Self {
            buffer: Some(buffer),
            pool,
        })
    }

    fn bytes(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .expect("present until dropped")
            .as_slice()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            PinnedPool::give_back(&self.pool, buffer);
        }
    }
}

/// A tensor in a pinned host buffer that the loader lent out. Cheap to clone (clones share the
/// buffer); the buffer returns to the loader's pool when the last clone is dropped, and stays
/// valid after the loader itself is gone.
#[derive(Clone)]
pub struct HostTensor {
    lease: Arc<Lease>,
    offset: usize,
    shape: Vec<usize>,
    dtype: Dtype,
}

impl HostTensor {
    pub(crate) fn new(lease: Arc<Lease>, offset: usize, shape: Vec<usize>, dtype: Dtype) -> Self {
        let t = Self {
            lease,
            offset,
            shape,
            dtype,
        };
        assert!(
            t.offset + t.nbytes() <= t.lease.bytes().len(),
            "a host tensor lies inside its buffer"
        );
        t
    }

    /// The shape, outermost dimension first (contiguous, row-major).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// Size in bytes.
    pub fn nbytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size()
    }

    /// The bytes, in native endianness.
    pub fn as_bytes(&self) -> &[u8] {
        &self.lease.bytes()[self.offset..self.offset + self.nbytes()]
    }

    /// Whether the buffer is page-locked (DMA to an accelerator reads it directly).
    pub fn is_pinned(&self) -> bool {
        self.lease
            .buffer
            .as_ref()
            .is_some_and(PinnedBuffer::is_locked)
    }
}

impl std::fmt::Debug for HostTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostTensor")
            .field("shape", &self.shape)
            .field("dtype", &self.dtype)
            .field("pinned", &self.is_pinned())
            .finish()
    }
}
