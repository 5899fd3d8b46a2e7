"""Why a loader goes to torch's DataLoader: the reasons, the warning, and the exception the
fast path's checks raise."""

from __future__ import annotations

import enum


class FallbackReason(enum.Enum):
    """Why the arguments went to torch's DataLoader: which of them hpuload cannot take."""

    DATASET = "dataset"
    TRANSFORM = "transform"
    SAMPLER = "sampler"
    BATCH_SAMPLER = "batch_sampler"
    ARGUMENT = "argument"


class FallbackWarning(UserWarning):
    """hpuload handed the arguments to torch's DataLoader; `.reason` is a `FallbackReason` and
    the message says what exactly."""

    def __init__(self, message: str, reason: FallbackReason = FallbackReason.ARGUMENT):
        super().__init__(message)
        self.reason = reason


class Unfit(Exception):
    """The arguments are outside what hpuload's fast path takes; the message says why."""

    def __init__(self, message: str, reason: FallbackReason = FallbackReason.ARGUMENT):
        super().__init__(message)
        self.reason = reason
