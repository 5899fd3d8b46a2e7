//! What an output element and an image batch look like in memory: [`Dtype`] and [`Layout`].
//! A leaf: the augment ops write them, the device runtime allocates them, and neither needs
//! the other for it.

use serde::{Deserialize, Serialize};

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dtype {
    /// Unsigned 8-bit (raw pixels).
    U8,
    /// IEEE half precision.
    F16,
    /// bfloat16, the HPU's native training type. The default.
    #[default]
    Bf16,
    /// IEEE single precision.
    F32,
    /// Signed 64-bit integer (labels; not an image output type).
    I64,
}

impl Dtype {
    /// The short name (`"u8"`, `"f16"`, `"bf16"`, `"f32"`, `"i64"`), as settings spell it.
    pub fn name(self) -> &'static str {
        match self {
            Self::U8 => "u8",
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
            Self::F32 => "f32",
            Self::I64 => "i64",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Self::U8 => 1,
            Self::F16 | Self::Bf16 => 2,
            Self::F32 => 4,
            Self::I64 => 8,
        }
    }
}

/// A dtype name that is none of [`Dtype`]'s.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown dtype {0:?} (expected u8, f16, bf16 or f32)")]
pub struct UnknownDtype(pub String);

impl std::str::FromStr for Dtype {
    type Err = UnknownDtype;
    fn from_str(s: &str) -> Result<Self, UnknownDtype> {
        match s {
            "u8" | "uint8" => Ok(Self::U8),
            "f16" | "float16" => Ok(Self::F16),
            "bf16" | "bfloat16" => Ok(Self::Bf16),
            "f32" | "float32" => Ok(Self::F32),
            "i64" | "int64" => Ok(Self::I64),
            _ => Err(UnknownDtype(s.to_string())),
        }
    }
}

/// Memory layout of an image batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// `[N, C, H, W]`, PyTorch's default. The default.
    #[default]
    Nchw,
    /// `[N, H, W, C]`, channels last.
    Nhwc,
}
