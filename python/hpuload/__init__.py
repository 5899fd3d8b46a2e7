"""hpuload: a fast media data loader for PyTorch training on an HPU (Gaudi-class; emulated here).

The loader runs in Rust on its own threads (no worker processes, no pickling, no /dev/shm) and
hands batches to torch without a copy, through DLPack. Most users want `hpuload.torch`:

    from hpuload.torch import DataLoader   # a drop-in for torch.utils.data.DataLoader
"""

from ._hpuload import ErrorBudgetExceeded, LoaderError, SampleError
from ._hpuload import Loader as _CoreLoader
from .sources import (
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
    "LoaderError",
    "SampleError",
    "ErrorBudgetExceeded",
    "bench",
]

__version__ = "0.1.0"


def bench(*args: str) -> int:
    """Runs `hpuload bench` with command-line arguments (e.g. `bench("--data", "imgs")`);
    returns the exit code. `python -m hpuload bench --help` lists them."""
    from ._hpuload import cli

    return cli(["hpuload", "bench", *args])
