"""Random `set_transform` / `with_transform` functions over a Hugging Face imagefolder table
(the shapes of transformers' `run_image_classification.py` and of the notebooks that copy it),
each closing over a random torchvision composition of transform_fuzz.py's grammar (every draw
pinned), run through hpuload.torch.DataLoader (CPU path) and through torch's DataLoader with
the same collate_fn, compared value by value: the search of transform_fuzz.py (session 81)
for the Hugging Face path (session 82).

usage: python hf_fuzz.py FOLDER [CASES=200] [SEED=0]
  FOLDER  transform_sweep_images.py's set (class folders of PNGs), as for transform_fuzz.py
Outcomes as transform_fuzz.py's; every value of each batch is compared (images within a level,
labels exactly).
"""
import os
import sys
import tempfile

import torch
from torch.utils.data import DataLoader as TorchLoader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dataset_fuzz  # noqa: E402
import transform_fuzz  # noqa: E402

from hpuload.torch import DataLoader  # noqa: E402

ROOT = sys.argv[1] if __name__ == "__main__" else None


def function(rng, tf):
    """(name, fn): a random function over a batch of examples, closing over `tf`."""
    kind = rng.choice(["example", "example", "del", "no_convert", "new_dict", "loop", "relabel", "key"])

    def example(batch):
        batch["pixel_values"] = [tf(im.convert("RGB")) for im in batch["image"]]
        return batch

    def delete(batch):
        batch["pixel_values"] = [tf(im.convert("RGB")) for im in batch["image"]]
        del batch["image"]
        return batch

    def no_convert(batch):
        batch["pixel_values"] = [tf(im) for im in batch["image"]]
        return batch

    def new_dict(batch):
        return {"pixel_values": [tf(im.convert("RGB")) for im in batch["image"]], "labels": batch["label"]}

    def loop(batch):
        out = []
        for im in batch["image"]:
            im = im.convert("RGB")
            out.append(tf(im))
        batch["pixel_values"] = out
        return batch

    def relabel(batch):
        batch["pixel_values"] = [tf(im.convert("RGB")) for im in batch["image"]]
        batch["label"] = [t + 1 for t in batch["label"]]
        return batch

    def key(batch):
        batch["image"] = [tf(im.convert("RGB")) for im in batch["image"]]
        return batch

    fns = {"example": example, "del": delete, "no_convert": no_convert, "new_dict": new_dict, "loop": loop, "relabel": relabel, "key": key}
    return kind, fns[kind]


def collate_of(kind, rng):
    image_key = "image" if kind == "key" else "pixel_values"
    label_key = "labels" if kind == "new_dict" else "label"
    choice = rng.choice(["example", "example", "default"])
    if choice == "default":
        return "default", None

    def collate_fn(examples):
        return {"pixel_values": torch.stack([e[image_key] for e in examples]), "labels": torch.tensor([e[label_key] for e in examples])}

    return "example", collate_fn


def run(table, fn, collate, how, normalized):
    ds = table.with_transform(fn) if how == "with" else table
    if how == "set":
        ds.set_transform(fn)
    kw = {} if collate is None else {"collate_fn": collate}
    try:
        ref = list(TorchLoader(ds, batch_size=1, **kw))
        again = list(TorchLoader(ds, batch_size=1, **kw))
    except Exception as e:
        return "torch raises", f"{type(e).__name__}: {str(e)[:100]}"
    if not all(dataset_fuzz._exact(a, b) for a, b in zip(ref, again)):
        return "torch varies", ""
    try:
        list(TorchLoader(ds, batch_size=len(ds), **kw))
    except Exception:
        return "torch raises", "torch's collate refuses the samples together"
    return dataset_fuzz.judged(lambda: list(DataLoader(ds, batch_size=1, shuffle=False, backend="cpu", **kw)), ref, normalized)


def main():
    import datasets

    cases, rng = transform_fuzz.arguments(200)
    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory(prefix="hf_fuzz") as cache:
        table = datasets.load_dataset("imagefolder", data_dir=ROOT, split="train", cache_dir=cache)
        search(table, rng, cases)


def search(table, rng, cases):
    tally = {}
    for i in range(cases):
        tname, tf = transform_fuzz.composition(rng)
        kind, fn = function(rng, tf)
        cname, collate = collate_of(kind, rng)
        how = rng.choice(["set", "with"])
        name = f"[fn={kind} collate={cname} {how}_transform] {tname}"
        try:
            outcome, detail = run(table, fn, collate, how, "Normalize" in tname)
        except Exception as e:
            outcome, detail = "HARNESS", f"{type(e).__name__}: {e}"
        transform_fuzz.count(tally, i, outcome, detail, name)
    print(tally)


if __name__ == "__main__":
    main()
