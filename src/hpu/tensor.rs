use super::{DeviceBuffer, HpuError};
use crate::dtype::Dtype;

/// A tensor in device memory: a buffer plus shape and dtype. Read it back with
/// [`to_host`](DeviceTensor::to_host), the emulated equivalent of `tensor.cpu()`.
#[derive(Clone, Debug)]
pub struct DeviceTensor {
    buffer: DeviceBuffer,
    shape: Vec<usize>,
    dtype: Dtype,
}

impl DeviceTensor {
    pub(crate) fn new(buffer: DeviceBuffer, shape: Vec<usize>, dtype: Dtype) -> Self {
        debug_assert_eq!(buffer.len(), shape.iter().product::<usize>() * dtype.size());
        Self {
            buffer,
            shape,
            dtype,
        }
    }

    /// The shape, outermost dimension first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// Size in bytes.
    pub fn nbytes(&self) -> usize {
        self.buffer.len()
    }

    /// The underlying device buffer.
    pub fn buffer(&self) -> &DeviceBuffer {
        &self.buffer
    }

    /// Copies the tensor to host memory through the DMA engine and waits for the copy. Bytes
    /// are in native endianness.
    ///
    /// # Errors
    /// The DMA engine has stopped or the transfer failed.
    pub fn to_host(&self) -> Result<Vec<u8>, HpuError> {
        self.buffer
            .hpu()
            .dma()
            .device_to_host(self.buffer.clone())
            .wait()
    }
}
