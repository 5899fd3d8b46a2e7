"""hpuload: a fast media data loader for PyTorch training on an HPU (Gaudi-class; emulated here).

The loader runs in Rust on its own threads (no worker processes, no pickling, no /dev/shm) and
hands batches to torch without a copy, through DLPack. Most users want `hpuload.torch`:

    from hpuload.torch import DataLoader   # a drop-in for torch.utils.data.DataLoader
"""

from ._libav import use_pyav_libavcodec as _use_pyav_libavcodec

# Before any video is decoded: FFmpeg's decoder from PyAV's wheel when PyAV is installed.
_use_pyav_libavcodec()

from ._hpuload import ErrorBudgetExceeded, LoaderError, PipelineError, SampleError  # noqa: E402
from ._hpuload import Loader as _CoreLoader  # noqa: E402
from ._hpuload import video_decoder  # noqa: E402
from ._reader import VideoReader  # noqa: E402
from .sources import (  # noqa: E402
    FrameFolder,
    HFDataset,
    ImageFolder,
    Manifest,
    Parquet,
    VideoFolder,
    VideoManifest,
    VideoShards,
    WebDataset,
)

__all__ = [
    "ImageFolder",
    "Manifest",
    "WebDataset",
    "HFDataset",
    "Parquet",
    "VideoFolder",
    "VideoManifest",
    "VideoShards",
    "FrameFolder",
    "VideoReader",
    "LoaderError",
    "SampleError",
    "ErrorBudgetExceeded",
    "PipelineError",
    "bench",
    "video_decoder",
]

__version__ = "0.1.0"


def bench(*args: str) -> int:
    """Runs `hpuload bench` with command-line arguments (e.g. `bench("--data", "imgs")`);
    returns the exit code. `python -m hpuload bench --help` lists them."""
    from ._hpuload import cli

    return cli(["hpuload", "bench", *args])
