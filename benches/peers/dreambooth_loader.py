"""The data path of diffusers' (and optimum-habana's) `train_dreambooth.py`, without prior
preservation or with it (`--class-count N`: a class data root of N images, each sample also
holding a class image and the class prompt's ids, the collate_fn putting the class images after
the instance images), torch against hpuload: its `DreamBoothDataset` (each instance image opened, turned upright by
`exif_transpose`, converted to RGB when its mode is not, put through Resize(resolution)
bilinear, CenterCrop or RandomCrop, ToTensor, Normalize([0.5], [0.5]); the instance prompt
tokenized in `__getitem__`), its `collate_fn`, shuffled, as the script builds its loader. Only
the DataLoader differs.

The tokenizer is a real fast tokenizer (`PreTrainedTokenizerFast`, a byte-level BPE trained
here on the prompt, since CLIP's vocabulary cannot be downloaded offline), called as the
script's `tokenize_prompt` calls CLIP's (`max_length=77`, `padding="max_length"`,
`truncation=True`, `return_tensors="pt"`).

usage:
  python dreambooth_loader.py --loader torch|hpuload --images DIR [--count 100] [--class-count 0]
        [--resolution 512] [--center-crop] [--steps 200] [--workers 2] [--batch 4]
The class images are the corpus's photos after the instance images. Prints one JSON line:
images/s (instance and class images alike) over `--steps` steps after 10 warm-up steps, epochs repeated
as the script's training loop repeats them (a set of a few images is many short epochs)."""

import argparse
import glob
import json
import time
from pathlib import Path

import torch
from PIL import Image
from PIL.ImageOps import exif_transpose
from torch.utils.data import Dataset
from torchvision import transforms


def tokenizer_for(prompt):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel()
    bpe.train_from_iterator([prompt] * 10, trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", "<unk>"]))
    return PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<pad>", unk_token="<unk>")


def tokenize_prompt(tokenizer, prompt, tokenizer_max_length=None):
    max_length = tokenizer_max_length if tokenizer_max_length is not None else 77
    return tokenizer(prompt, truncation=True, padding="max_length", max_length=max_length, return_tensors="pt")


class DreamBoothDataset(Dataset):
    def __init__(self, instance_images, instance_prompt, tokenizer, class_images=None, class_prompt=None, size=512,
                 center_crop=False):
        self.size = size
        self.center_crop = center_crop
        self.tokenizer = tokenizer
        self.instance_images_path = [Path(p) for p in instance_images]
        self.num_instance_images = len(self.instance_images_path)
        self.instance_prompt = instance_prompt
        self._length = self.num_instance_images
        if class_images:
            self.class_images_path = [Path(p) for p in class_images]
            self.num_class_images = len(self.class_images_path)
            self._length = max(self.num_class_images, self.num_instance_images)
            self.class_prompt = class_prompt
        else:
            self.class_images_path = None
        self.image_transforms = transforms.Compose(
            [
                transforms.Resize(size, interpolation=transforms.InterpolationMode.BILINEAR),
                transforms.CenterCrop(size) if center_crop else transforms.RandomCrop(size),
                transforms.ToTensor(),
                transforms.Normalize([0.5], [0.5]),
            ]
        )

    def __len__(self):
        return self._length

    def __getitem__(self, index):
        example = {}
        instance_image = Image.open(self.instance_images_path[index % self.num_instance_images])
        instance_image = exif_transpose(instance_image)
        if not instance_image.mode == "RGB":
            instance_image = instance_image.convert("RGB")
        example["instance_images"] = self.image_transforms(instance_image)
        text_inputs = tokenize_prompt(self.tokenizer, self.instance_prompt)
        example["instance_prompt_ids"] = text_inputs.input_ids
        example["instance_attention_mask"] = text_inputs.attention_mask
        if self.class_images_path:
            class_image = Image.open(self.class_images_path[index % self.num_class_images])
            class_image = exif_transpose(class_image)
            if not class_image.mode == "RGB":
                class_image = class_image.convert("RGB")
            example["class_images"] = self.image_transforms(class_image)
            class_text_inputs = tokenize_prompt(self.tokenizer, self.class_prompt)
            example["class_prompt_ids"] = class_text_inputs.input_ids
            example["class_attention_mask"] = class_text_inputs.attention_mask
        return example


def collate_fn(examples, with_prior_preservation=False):
    has_attention_mask = "instance_attention_mask" in examples[0]
    input_ids = [example["instance_prompt_ids"] for example in examples]
    pixel_values = [example["instance_images"] for example in examples]
    if has_attention_mask:
        attention_mask = [example["instance_attention_mask"] for example in examples]
    if with_prior_preservation:
        input_ids += [example["class_prompt_ids"] for example in examples]
        pixel_values += [example["class_images"] for example in examples]
        if has_attention_mask:
            attention_mask += [example["class_attention_mask"] for example in examples]
    pixel_values = torch.stack(pixel_values)
    pixel_values = pixel_values.to(memory_format=torch.contiguous_format).float()
    input_ids = torch.cat(input_ids, dim=0)
    batch = {"input_ids": input_ids, "pixel_values": pixel_values}
    if has_attention_mask:
        batch["attention_mask"] = torch.cat(attention_mask, dim=0)
    return batch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--loader", choices=["torch", "hpuload"], required=True)
    p.add_argument("--images", required=True)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--class-count", type=int, default=0)
    p.add_argument("--resolution", type=int, default=512)
    p.add_argument("--center-crop", action="store_true")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=4)
    a = p.parse_args()
    if a.loader == "hpuload":
        from hpuload.torch import DataLoader
    else:
        from torch.utils.data import DataLoader
    torch.manual_seed(0)
    prompt = "a photo of sks dog"
    every = sorted(glob.glob(f"{a.images}/**/*.jpg", recursive=True))
    files, class_files = every[: a.count], every[a.count : a.count + a.class_count]
    prior = bool(class_files)
    dataset = DreamBoothDataset(files, prompt, tokenizer_for(prompt), class_files, "a photo of dog", size=a.resolution,
                                center_crop=a.center_crop)
    loader = DataLoader(
        dataset, batch_size=a.batch, shuffle=True, collate_fn=lambda examples: collate_fn(examples, prior),
        num_workers=a.workers,
    )
    step, n, start = 0, 0, None
    while step < a.steps + 10:
        for batch in loader:
            step += 1
            if step == 10:
                start = time.perf_counter()
            elif step > 10:
                n += batch["pixel_values"].shape[0]
            if step >= a.steps + 10:
                break
    rate = n / (time.perf_counter() - start)
    print(json.dumps({"loader": a.loader, "count": len(files), "class_count": len(class_files), "images_per_s": round(rate, 1),
                      "kind": type(loader).__name__}))


if __name__ == "__main__":
    main()
