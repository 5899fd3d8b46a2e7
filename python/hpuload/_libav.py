"""Where hpuload's video path finds FFmpeg's H.264 decoder.

hpuload decodes H.264 with FFmpeg's libavcodec when one is on the machine (loaded when the
first video is decoded, about 3x faster than the built-in OpenH264, the same pixels), named by
the `HPULOAD_LIBAVCODEC` environment variable or found under the distribution's names. PyAV's
wheel carries its own libavcodec: when PyAV is installed and the variable is not set, this
points the variable at PyAV's copy, without importing PyAV.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

VARIABLE = "HPULOAD_LIBAVCODEC"


def pyav_libavcodec(package_dir: Path) -> Path | None:
    """The libavcodec a PyAV wheel installed at `package_dir` (the `av` package's folder)
    carries in its `av.libs` folder beside it, or None."""
    found = sorted((package_dir.parent / "av.libs").glob("libavcodec-*.so*"))
    return found[-1] if found else None


def use_pyav_libavcodec(environ=os.environ) -> None:
    """Sets `HPULOAD_LIBAVCODEC` to PyAV's libavcodec when it is unset and PyAV is installed."""
    if VARIABLE in environ:
        return
    try:
        spec = importlib.util.find_spec("av")
    except (ImportError, ValueError):
        return
    if spec is None or not spec.submodule_search_locations:
        return
    lib = pyav_libavcodec(Path(list(spec.submodule_search_locations)[0]))
    if lib is not None:
        environ[VARIABLE] = str(lib)
