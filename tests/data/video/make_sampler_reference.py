"""Writes `samplers.json`: what torchcodec's deterministic clip samplers and torchvision's
`VideoClips` / `UniformClipSampler` give over a grid of parameters, for the parity test in
`src/video/clips.rs`.

torchcodec's samplers are run as they are, on a stand-in decoder that answers `len()`, the
metadata, and returns the indices or timestamps it was asked for (the frames themselves do
not matter here). Needs torch, torchvision and the torchcodec package on the path (its
native libraries are not loaded by the samplers): `PYTHONPATH=<unpacked torchcodec wheel>`.
"""

import itertools
import json
from pathlib import Path
from types import SimpleNamespace

import torch
from torchcodec import FrameBatch
from torchcodec.samplers import clips_at_regular_indices, clips_at_regular_timestamps
from torchvision.datasets.samplers.clip_sampler import UniformClipSampler
from torchvision.datasets.video_utils import VideoClips

HERE = Path(__file__).resolve().parent


class StandIn:
    def __init__(self, n, begin=0.0, end=None, fps=None):
        self.n = n
        end = n / 25.0 if end is None else end
        fps = n / (end - begin) if fps is None else fps
        self.metadata = SimpleNamespace(
            average_fps=fps, begin_stream_seconds=begin, end_stream_seconds=end
        )

    def __len__(self):
        return self.n

    def _batch(self, values):
        t = torch.tensor(values, dtype=torch.float64)
        return FrameBatch(data=t.view(-1, 1, 1, 1), pts_seconds=t, duration_seconds=t)

    def get_frames_at(self, indices):
        return self._batch([float(i) for i in indices])

    def get_frames_played_at(self, seconds):
        return self._batch(list(seconds))


def run(f):
    try:
        out = f()
    except ValueError:
        return None
    return out.data.view(out.data.shape[0], out.data.shape[1]).tolist()


def main():
    out = {"indices": [], "timestamps": [], "video_clips": [], "uniform": []}
    for n, num_clips, fpc, between, start, end, policy in itertools.product(
        [1, 7, 30, 100],
        [1, 4, 13],
        [1, 5],
        [1, 3],
        [0, 5, -10],
        [None, 50, -1],
        ["repeat_last", "wrap", "error"],
    ):
        got = run(
            lambda: clips_at_regular_indices(
                StandIn(n),
                num_clips=num_clips,
                num_frames_per_clip=fpc,
                num_indices_between_frames=between,
                sampling_range_start=start,
                sampling_range_end=end,
                policy=policy,
            )
        )
        out["indices"].append([n, num_clips, fpc, between, start, end, policy, got])

    expected = json.loads((HERE / "expected.json").read_text())
    videos = []
    for name, v in expected.items():
        tb = v["time_base"][0] / v["time_base"][1]
        videos.append((name, len(v["frames"]), v["begin_stream_pts"] * tb, v["end_stream_pts"] * tb))
    for (name, n, begin, end), every, fpc, between, start, stop, policy in itertools.product(
        videos,
        [0.1, 0.37],
        [1, 4],
        [None, 0.13],
        [None, 0.2],
        [None, 0.9],
        ["repeat_last", "wrap", "error"],
    ):
        got = run(
            lambda: clips_at_regular_timestamps(
                StandIn(n, begin, end),
                seconds_between_clip_starts=every,
                num_frames_per_clip=fpc,
                seconds_between_frames=between,
                sampling_range_start=start,
                sampling_range_end=stop,
                policy=policy,
            )
        )
        out["timestamps"].append([name, every, fpc, between, start, stop, policy, got])

    for n, fps, rate, fpc, step in itertools.product(
        [5, 20, 97], [25.0, 30.0, 29.97, 24.0], [None, 15.0, 12.5, 30.0], [1, 4, 16], [1, 3, 5]
    ):
        clips, _ = VideoClips.compute_clips_for_video(torch.arange(n), fpc, step, fps, rate)
        out["video_clips"].append([n, fps, rate, fpc, step, clips.tolist()])
    for lengths, per in itertools.product([[5, 0, 3], [1], [2], [97, 13]], [1, 2, 4, 7]):
        stand_in = SimpleNamespace(clips=[[0] * k for k in lengths])
        sampler = UniformClipSampler.__new__(UniformClipSampler)
        sampler.video_clips, sampler.num_clips_per_video = stand_in, per
        out["uniform"].append([lengths, per, list(iter(sampler))])
    (HERE / "samplers.json").write_text(json.dumps(out, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
