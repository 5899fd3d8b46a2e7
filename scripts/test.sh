#!/usr/bin/env bash
# The whole test suite: the Rust workspace, then the Python package built from this checkout
# (`pip install ./python`, as the README says) and its pytest suite, in a virtual environment
# of its own. That environment holds torch and torchvision (several GB), so it is cached outside
# the checkout, keyed by python/requirements-test.txt:
#   $HPULOAD_TEST_VENV, else ${XDG_CACHE_HOME:-~/.cache}/hpuload/test-venv-<hash>.
# Needs: a Rust toolchain, python3 (3.10+) with venv, and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

req=python/requirements-test.txt
key=$(sha256sum "$req" | cut -c1-16)
venv=${HPULOAD_TEST_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/hpuload/test-venv-$key}
if [ ! -f "$venv/.complete" ]; then
    echo "creating the Python test environment in $venv (torch is large: minutes, once)"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
    "$venv/bin/pip" install --quiet -r "$req"
    touch "$venv/.complete"
fi

# The video tests decode H.264 with FFmpeg's libavcodec where the process finds one, and
# MPEG-4 Part 2 only with it; a machine without FFmpeg would pass those tests without
# decoding. The environment's PyAV wheel carries a libavcodec: the Rust tests load it
# (unless HPULOAD_LIBAVCODEC names another), then run the video tests again on the bundled
# OpenH264 alone. The Python package finds PyAV's by itself (`_libav.py`).
if [ -z "${HPULOAD_LIBAVCODEC:-}" ]; then
    HPULOAD_LIBAVCODEC=$("$venv/bin/python" -c 'import glob, os, av; print(min(glob.glob(os.path.join(os.path.dirname(av.__file__), os.pardir, "av.libs", "libavcodec-*.so*"))))')
    export HPULOAD_LIBAVCODEC
fi
echo "libavcodec for the tests: $HPULOAD_LIBAVCODEC"
cargo test --workspace
HPULOAD_LIBAVCODEC=off cargo test --workspace video
# The README's install command, into that environment, built with the dev profile instead of
# release: it has the test profile's settings (Cargo.toml), so maturin reuses every dependency
# `cargo test` just compiled (the same code at opt-level 2, with debug assertions) instead of
# compiling them all again at opt-level 3, which took a third of this script's time.
MATURIN_PEP517_ARGS="--profile dev" "$venv/bin/pip" install --quiet --force-reinstall --no-deps ./python
# From outside the source tree, so the tests import the installed package.
cd python/tests
"$venv/bin/python" -m pytest -q -p no:cacheprovider .
