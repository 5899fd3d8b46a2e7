//! Images held in memory as one array of pixels, all of one size: torchvision's `CIFAR10`,
//! `CIFAR100` and `SVHN` keep their whole set so (`N x H x W x 3` bytes), and hand
//! `Image.fromarray(data[i])` to the transform. Each sample is served as a Netpbm image of
//! its pixels (a binary PPM, or PGM for one channel), which the decoder reads as it is: the
//! rest of the loader sees an image file like any other, decoded on the host (the media
//! engine takes only JPEG).

use std::path::PathBuf;

use super::{Entry, Listing, ReadMode, SampleBytes, Source};
use crate::Error;

/// `N` images of `height x width x channels` bytes each (channels last), in one array.
#[derive(Debug)]
pub struct ImageArray {
    listing: Listing,
    pixels: Vec<u8>,
    /// The Netpbm header every sample starts with.
    header: Vec<u8>,
    /// One sample's pixel bytes.
    sample_len: usize,
}

impl ImageArray {
    /// The array `pixels` (`labels.len()` images, channels last) as a dataset named `name`
    /// (in messages, sample `i` is `name[i]`).
    ///
    /// # Errors
    /// [`Error::Config`] for an empty set, a size of 0, a number of channels other than 1 or
    /// 3, or an array whose length is not the images' bytes.
    pub fn new(
        name: &str,
        pixels: Vec<u8>,
        (height, width, channels): (u32, u32, u32),
        labels: Vec<i64>,
        classes: Vec<String>,
    ) -> Result<Self, Error> {
        let bad = |reason: String| Error::Config {
            setting: format!("image array {name}"),
            reason,
        };
        if labels.is_empty() {
            return Err(bad("no images".into()));
        }
        if height == 0 || width == 0 {
            return Err(bad(format!("images of {width}x{height} pixels")));
        }
        let kind = match channels {
            1 => 5,
            3 => 6,
            _ => return Err(bad(format!("{channels} channels (give 1 or 3)"))),
        };
        let sample_len = height as usize * width as usize * channels as usize;
        if Some(pixels.len()) != sample_len.checked_mul(labels.len()) {
            return Err(bad(format!(
                "{} bytes for {} images of {width}x{height}x{channels}",
                pixels.len(),
                labels.len()
            )));
        }
        let entries = labels
            .into_iter()
            .enumerate()
            .map(|(i, label)| Entry {
                path: PathBuf::from(format!("{name}[{i}]")),
                label,
            })
            .collect();
        Ok(Self {
            listing: Listing::of_records(name, entries, classes),
            pixels,
            header: format!("P{kind}\n{width} {height}\n255\n").into_bytes(),
            sample_len,
        })
    }
}

impl Source for ImageArray {
    fn listing(&self) -> &Listing {
        &self.listing
    }

    fn read<'a>(
        &self,
        index: usize,
        _: ReadMode,
        buf: &'a mut Vec<u8>,
    ) -> std::io::Result<SampleBytes<'a>> {
        let start = index * self.sample_len;
        let Some(pixels) = self.pixels.get(start..start + self.sample_len) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no image {index} in an array of {}", self.entries().len()),
            ));
        };
        buf.clear();
        buf.extend_from_slice(&self.header);
        buf.extend_from_slice(pixels);
        Ok(SampleBytes::Buffer(buf))
    }

    fn grey(&self) -> bool {
        // A PGM's header (`P5`), for one channel.
        self.header.starts_with(b"P5")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hpuload_decoders::{CpuDecoder, Decode};

    /// `bytes` decoded as the loader's host decoder does: RGB, width, height.
    fn decode_rgb(bytes: &[u8]) -> (Vec<u8>, u32, u32) {
        let mut rgb = Vec::new();
        let info = CpuDecoder::default().decode(bytes, &mut rgb).unwrap();
        (rgb, info.width, info.height)
    }

    #[test]
    fn each_sample_reads_as_an_image_of_its_own_pixels() {
        // Two 2x3 RGB images, then the same as one channel.
        let pixels: Vec<u8> = (0..36).collect();
        let set = ImageArray::new("cifar", pixels.clone(), (2, 3, 3), vec![4, 7], vec![]).unwrap();
        assert_eq!(set.entries()[1].path, PathBuf::from("cifar[1]"));
        assert_eq!(set.entries()[1].label, 7);
        let mut buf = Vec::new();
        let bytes = set.read(1, ReadMode::Read, &mut buf).unwrap();
        let (rgb, w, h) = decode_rgb(&bytes);
        assert_eq!((w, h), (3, 2));
        assert_eq!(rgb, pixels[18..36]);

        let grey = ImageArray::new(
            "mnist",
            pixels[..12].to_vec(),
            (2, 3, 1),
            vec![0, 1],
            vec![],
        )
        .unwrap();
        let bytes = grey.read(1, ReadMode::Read, &mut buf).unwrap();
        let (rgb, _, _) = decode_rgb(&bytes);
        let want: Vec<u8> = (6..12).flat_map(|v| [v, v, v]).collect();
        assert_eq!(rgb, want);
    }

    #[test]
    fn an_array_of_the_wrong_length_or_shape_is_refused_naming_it() {
        let err = ImageArray::new("cifar", vec![0; 10], (2, 2, 3), vec![0], vec![]).unwrap_err();
        assert!(err.to_string().contains("cifar") && err.to_string().contains("10 bytes"));
        let err = ImageArray::new("x", vec![0; 8], (2, 2, 2), vec![0], vec![]).unwrap_err();
        assert!(err.to_string().contains("2 channels"));
        assert!(ImageArray::new("x", vec![], (2, 2, 3), vec![], vec![]).is_err());
    }

    #[test]
    fn an_index_past_the_end_is_an_error_not_a_panic() {
        let set = ImageArray::new("cifar", vec![0; 12], (2, 2, 3), vec![0], vec![]).unwrap();
        let mut buf = Vec::new();
        assert!(set.read(1, ReadMode::Read, &mut buf).is_err());
    }
}
