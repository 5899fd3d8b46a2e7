"""hpuload's own dataset descriptions, for when there is no torchvision dataset to wrap."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any


def _pipeline(pipeline: Any) -> str:
    if isinstance(pipeline, str) and pipeline in ("resnet50_train", "resnet50_eval"):
        return pipeline
    if isinstance(pipeline, dict):
        return json.dumps(pipeline)
    if isinstance(pipeline, (str, os.PathLike)) and os.path.exists(pipeline):
        return os.fspath(pipeline)  # the Rust side parses (and validates) the TOML file
    raise ValueError(
        f"pipeline={pipeline!r}: give 'resnet50_train', 'resnet50_eval', a pipeline TOML file "
        "(see pipelines/ in the repository) or a dict of the same shape"
    )


class _WithPipeline:
    pipeline: Any

    def _pipeline_json(self) -> str:
        return _pipeline(self.pipeline)


@dataclass(frozen=True)
class ImageFolder(_WithPipeline):
    """A folder `root/<class>/<image>` (torchvision's layout and class order), with an hpuload
    pipeline: a built-in name, a TOML file or a dict `{"name": ..., "ops": [...]}`."""

    root: str | os.PathLike
    pipeline: Any = "resnet50_train"

    def _source_kwargs(self) -> dict:
        return {"root": os.fspath(self.root)}


@dataclass(frozen=True)
class Manifest(_WithPipeline):
    """A manifest file, `path<TAB>label` per line (relative paths are from its folder)."""

    path: str | os.PathLike
    pipeline: Any = "resnet50_train"

    def _source_kwargs(self) -> dict:
        return {"manifest": os.fspath(self.path)}


@dataclass(frozen=True)
class WebDataset(_WithPipeline):
    """WebDataset tar shards: one file or a brace pattern such as
    `/data/train-{000000..000146}.tar`; the image is the jpg/jpeg/png/webp member, the label
    the `cls` one. Each shard's sidecar index (`hpuload make-shards` writes it) is built on the
    fly when missing."""

    spec: str | os.PathLike
    pipeline: Any = "resnet50_train"

    def _source_kwargs(self) -> dict:
        return {"shards": os.fspath(self.spec)}
