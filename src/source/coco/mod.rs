//! COCO detection datasets: an `instances_*.json` annotation file and the folder of its
//! images, indexed as torchvision's `CocoDetection` indexes them (images by ascending id; an
//! image's objects in the file's order).
//!
//! The annotation file is memory-mapped and parsed in one streaming pass: each record of
//! `images`, `annotations` and `categories` is read field by field into compact arrays, and
//! everything else (segmentation polygons, which are most of a real file, `info`,
//! `licenses`) is skipped without being built. Memory is the map plus about 40 bytes per
//! object. Errors name the file, the record and the field (`annotations[17].bbox`), with
//! serde_json's line and column.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

mod json;
mod members;
pub mod rle;

use json::{parse, Category, Parsed};
use members::{locate_members, member, names_shards};

use super::{Entry, Listing, Source};
use crate::augment::SampleBoxes;
use crate::Error;

/// Which images a [`CocoDataset`] keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EmptyImages {
    /// Every image in the file, with or without objects (torchvision's `CocoDetection`).
    #[default]
    Keep,
    /// Drops images without an object, or whose every box has a side of at most 1 pixel:
    /// what torchvision's detection reference does for training
    /// (`_coco_remove_images_without_annotations`).
    Drop,
}

/// How category ids become labels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Categories {
    /// The file's `category_id`, as torchvision's `wrap_dataset_for_transforms_v2` gives it
    /// (COCO's ids run 1..=90 with gaps; the reference trains with `num_classes=91`).
    #[default]
    Raw,
    /// Categories sorted by id and numbered from 1 (0 is the background), as detection
    /// reference code remaps a subset of categories.
    Contiguous,
}

/// How a COCO dataset is opened.
#[derive(Clone, Debug, Default)]
pub struct CocoOptions {
    /// Which images are kept.
    pub empty: EmptyImages,
    /// How labels are numbered.
    pub categories: Categories,
    /// Only the images with these ids (a `Subset` of a `CocoDetection`), on top of
    /// [`empty`](Self::empty); `None`: all. The other images' annotations are still read and
    /// checked, so messages count records as the file does.
    pub images: Option<Vec<i64>>,
    /// How images on object storage are read: a folder URL (`s3://bucket/train2017`,
    /// `gs://...`, `az://...`, `http(s)://...`) is read one request per image (the shard
    /// cache setting does not apply), shards named by URL as [`super::WebDataset`] reads them.
    pub remote: super::RemoteOptions,
}

/// One image's objects, in the annotation file's order. Boxes are `[x1, y1, x2, y2]` in the
/// image's pixels, computed from COCO's `[x, y, w, h]` in `f32` as torchvision converts them
/// (so a box with a negative size stays inverted, for `SanitizeBoundingBoxes` to drop).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Objects<'a> {
    /// The image's COCO id.
    pub image_id: i64,
    /// The image's `(width, height)` as the annotation file gives it (0 when it leaves it out).
    pub size: (u32, u32),
    /// `[x1, y1, x2, y2]` per object.
    pub boxes: &'a [[f32; 4]],
    /// The label per object (see [`Categories`]).
    pub labels: &'a [i64],
    /// COCO's `iscrowd` per object.
    pub iscrowd: &'a [u8],
    /// COCO's `area` per object (0 when the file leaves it out).
    pub area: &'a [f32],
    /// Every box of the image is written as four integers in the file: torchvision's v2
    /// wrapper then holds them as int64, and its resize truncates the scaled coordinates.
    pub integer: bool,
}

impl<'a> From<Objects<'a>> for SampleBoxes<'a> {
    fn from(o: Objects<'a>) -> Self {
        SampleBoxes {
            boxes: o.boxes,
            integer: o.integer,
        }
    }
}

/// What is wrong with an annotation that the dataset keeps or drops instead of refusing the
/// file, counted by kind and named (the first few of each kind) in [`CocoDataset::issues`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AnnotationIssues {
    /// Annotations whose `image_id` names no image: left out, as torchvision never reads
    /// them either.
    pub unknown_image: usize,
    /// Boxes with a negative width or height: kept, inverted; `SanitizeBoundingBoxes` drops
    /// them, as torchvision's does.
    pub negative_size: usize,
    /// Boxes reaching outside their image: kept; a crop clamps them, and
    /// `SanitizeBoundingBoxes` drops what still reaches outside, as torchvision does.
    pub outside_image: usize,
    /// A description of the first few of each kind (file order).
    pub examples: Vec<String>,
}

impl AnnotationIssues {
    /// No issue at all.
    pub fn is_empty(&self) -> bool {
        self.unknown_image + self.negative_size + self.outside_image == 0
    }
}

impl fmt::Display for AnnotationIssues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} annotations name no image (left out), {} boxes have a negative size and {} reach \
             outside their image (kept: SanitizeBoundingBoxes drops what is still invalid after \
             the transforms)",
            self.unknown_image, self.negative_size, self.outside_image
        )?;
        for e in &self.examples {
            write!(f, "; {e}")?;
        }
        Ok(())
    }
}

/// Examples named per kind of issue.
const EXAMPLES_PER_KIND: usize = 3;

/// A COCO detection dataset. Sample `i` is the image with the `i`-th smallest id (after
/// [`EmptyImages::Drop`], of those kept), as in torchvision's `CocoDetection`.
#[derive(Debug)]
pub struct CocoDataset {
    listing: Listing,
    image_ids: Vec<i64>,
    /// `width, height` from the file, per sample.
    sizes: Vec<(u32, u32)>,
    /// Sample `i`'s objects are `starts[i]..starts[i + 1]`.
    starts: Vec<usize>,
    boxes: Vec<[f32; 4]>,
    labels: Vec<i64>,
    iscrowd: Vec<u8>,
    area: Vec<f32>,
    /// Per sample: it has objects, and every box is written as integers ([`Objects::integer`]).
    integer: Vec<bool>,
    issues: AnnotationIssues,
    /// Where the images are.
    images: Images,
}

/// Where a COCO set's images are.
#[derive(Debug)]
enum Images {
    /// Files under a local folder.
    Folder,
    /// One object each under a prefix on object storage.
    Files(super::remote::RemoteFiles),
    /// Members of tar shards, local or on object storage: sample `i` is the shards' sample
    /// `at[i]` (`None`: no shard holds it, and reading it fails naming the image).
    Shards {
        set: Box<super::WebDataset>,
        at: Vec<Option<usize>>,
    },
}

impl CocoDataset {
    /// Reads the annotation file `annotations`; image `file_name`s are relative to `images`,
    /// a folder or the URL of one on object storage (see [`CocoOptions::remote`]). `images`
    /// may also name tar shards (a `.tar` file or brace pattern, local or a URL, or a folder
    /// of `.tar` files): an image is then the member whose path inside its shard is its
    /// `file_name`, or else whose file name is (when only one member has it). An image that
    /// no shard holds is logged when the set is opened, and named when read.
    ///
    /// # Errors
    /// The file cannot be read, is not valid JSON, or a record lacks a field or has one of
    /// the wrong type (naming the record, the field and the position); two images share an
    /// id; no image is left.
    pub fn open(
        annotations: impl AsRef<Path>,
        images: impl AsRef<Path>,
        options: &CocoOptions,
    ) -> Result<Self, Error> {
        let path = annotations.as_ref().to_path_buf();
        let file = std::fs::File::open(&path).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        let len = file
            .metadata()
            .map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })?
            .len();
        let bad = |reason: String| Error::Format {
            path: path.clone(),
            reason,
        };
        if len == 0 {
            return Err(bad("the file is empty".into()));
        }
        // SAFETY: the map is read-only and dropped before this returns; an annotation file
        // truncated by another process while it is parsed raises SIGBUS, as any mapped read
        // would. Annotation files are not rewritten during training.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        let parsed = parse(&map).map_err(|e| bad(e.to_string()))?;
        drop(map);
        Self::assemble(path, images.as_ref(), parsed, options)
    }

    /// Parses annotations from `json` (for tests and in-memory annotation files); `origin`
    /// names them in messages.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn from_json(
        origin: impl AsRef<Path>,
        json: &[u8],
        images: impl AsRef<Path>,
        options: &CocoOptions,
    ) -> Result<Self, Error> {
        let path = origin.as_ref().to_path_buf();
        let parsed = parse(json).map_err(|e| Error::Format {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        Self::assemble(path, images.as_ref(), parsed, options)
    }

    fn assemble(
        path: PathBuf,
        images: &Path,
        parsed: Parsed,
        options: &CocoOptions,
    ) -> Result<Self, Error> {
        let bad = |reason: String| Error::Format {
            path: path.clone(),
            reason,
        };
        let Parsed {
            mut images_in,
            annotations,
            categories,
        } = parsed;
        // torchvision: `self.ids = list(sorted(self.coco.imgs.keys()))`.
        images_in.sort_by_key(|im| im.id);
        if let Some(w) = images_in.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(bad(format!(
                "images[{}] and images[{}] share the id {}",
                w[0].at, w[1].at, w[0].id
            )));
        }
        let position: HashMap<i64, usize> = images_in
            .iter()
            .enumerate()
            .map(|(k, im)| (im.id, k))
            .collect();
        let label_of: HashMap<i64, i64> = match options.categories {
            Categories::Raw => HashMap::new(),
            Categories::Contiguous => {
                let mut ids: Vec<i64> = categories.iter().map(|c| c.id).collect();
                ids.sort_unstable();
                ids.dedup();
                ids.into_iter().zip(1..).collect()
            }
        };
        let mut issues = AnnotationIssues::default();
        let mut examples = [0usize; 3];
        let mut note = |kind: usize, text: String, issues: &mut AnnotationIssues| {
            if examples[kind] < EXAMPLES_PER_KIND {
                examples[kind] += 1;
                issues.examples.push(text);
            }
        };
        // Objects per image, in file order: count, then place (a counting sort, stable).
        let mut counts = vec![0usize; images_in.len() + 1];
        let mut owner = Vec::with_capacity(annotations.len());
        for a in &annotations {
            match position.get(&a.image_id) {
                Some(&k) => {
                    counts[k + 1] += 1;
                    owner.push(Some(k));
                }
                None => {
                    issues.unknown_image += 1;
                    note(
                        0,
                        format!(
                            "annotations[{}] names image {}, which is not in `images`",
                            a.at, a.image_id
                        ),
                        &mut issues,
                    );
                    owner.push(None);
                }
            }
        }
        for k in 1..counts.len() {
            counts[k] += counts[k - 1];
        }
        let total = counts[images_in.len()];
        let mut next = counts.clone();
        let mut boxes = vec![[0f32; 4]; total];
        let mut labels = vec![0i64; total];
        let mut iscrowd = vec![0u8; total];
        let mut area = vec![0f32; total];
        let mut integer = vec![false; total];
        for (a, k) in annotations.iter().zip(&owner) {
            let Some(k) = *k else { continue };
            let [x, y, w, h] = a.bbox;
            if w < 0.0 || h < 0.0 {
                issues.negative_size += 1;
                note(
                    1,
                    format!(
                        "annotations[{}] (image {}) has a box of size {w}x{h}",
                        a.at, a.image_id
                    ),
                    &mut issues,
                );
            } else {
                let im = &images_in[k];
                let (iw, ih) = (im.width as f32, im.height as f32);
                if im.width > 0 && (x < 0.0 || y < 0.0 || x + w > iw || y + h > ih) {
                    issues.outside_image += 1;
                    note(
                        2,
                        format!(
                            "annotations[{}] (image {}, {}x{}) has the box [{x}, {y}, {w}, {h}]",
                            a.at, a.image_id, im.width, im.height
                        ),
                        &mut issues,
                    );
                }
            }
            let at = next[k];
            next[k] += 1;
            // torchvision converts XYWH to XYXY in the boxes' dtype, float32.
            boxes[at] = [x, y, x + w, y + h];
            labels[at] = match options.categories {
                Categories::Raw => a.category_id,
                Categories::Contiguous => *label_of.get(&a.category_id).ok_or_else(|| {
                    bad(format!(
                        "annotations[{}] has category_id {}, which is not in `categories`",
                        a.at, a.category_id
                    ))
                })?,
            };
            iscrowd[at] = a.iscrowd;
            area[at] = a.area;
            integer[at] = a.integer_bbox;
        }
        let chosen = options.images.as_ref().map(|ids| {
            let mut ids = ids.clone();
            ids.sort_unstable();
            ids
        });
        let keep: Vec<bool> = (0..images_in.len())
            .map(|k| {
                let chosen = chosen
                    .as_ref()
                    .is_none_or(|ids| ids.binary_search(&images_in[k].id).is_ok());
                chosen
                    && match options.empty {
                        EmptyImages::Keep => true,
                        // The reference: no annotation, or every box has a side of at most 1
                        // pixel (on COCO's `[x, y, w, h]`).
                        EmptyImages::Drop => boxes[counts[k]..counts[k + 1]]
                            .iter()
                            .any(|b| b[2] - b[0] > 1.0 && b[3] - b[1] > 1.0),
                    }
            })
            .collect();
        let mut set = Self {
            listing: Listing::of_files(
                path.clone(),
                Vec::new(),
                class_names(&categories, options.categories),
            ),
            image_ids: Vec::new(),
            sizes: Vec::new(),
            starts: vec![0],
            boxes: Vec::new(),
            labels: Vec::new(),
            iscrowd: Vec::new(),
            area: Vec::new(),
            integer: Vec::new(),
            issues,
            images: Images::Folder,
        };
        let mut names = Vec::new();
        for (k, im) in images_in.into_iter().enumerate() {
            if !keep[k] {
                continue;
            }
            let objects = counts[k]..counts[k + 1];
            set.listing.entries.push(Entry {
                path: images.join(&im.file_name),
                label: objects.len() as i64,
            });
            names.push(im.file_name);
            set.image_ids.push(im.id);
            set.sizes.push((im.width, im.height));
            set.boxes.extend_from_slice(&boxes[objects.clone()]);
            set.labels.extend_from_slice(&labels[objects.clone()]);
            set.iscrowd.extend_from_slice(&iscrowd[objects.clone()]);
            set.integer
                .push(!objects.is_empty() && integer[objects.clone()].iter().all(|&i| i));
            set.area.extend_from_slice(&area[objects]);
            set.starts.push(set.boxes.len());
        }
        if set.listing.entries.is_empty() {
            return Err(Error::EmptyDataset {
                path,
                what: match options.empty {
                    EmptyImages::Keep => "the annotation file lists no image",
                    EmptyImages::Drop => "no image has an object",
                },
            });
        }
        if names_shards(images) {
            let shards = super::ShardOptions {
                label_field: String::new(),
                remote: options.remote.clone(),
                ..super::ShardOptions::default()
            };
            let spec = images.to_string_lossy();
            let shard_set = if images.is_dir() {
                super::WebDataset::open_folder(images, &shards)?
            } else {
                super::WebDataset::open_with(&spec, &shards)?
            };
            let at = locate_members(&shard_set, &names);
            let missing = at.iter().filter(|j| j.is_none()).count();
            if missing > 0 {
                let first = at.iter().position(Option::is_none).expect("counted");
                tracing::warn!(
                    "{}: {missing} of the annotation file's {} images are in none of the shards                      of {spec} (the first: {}); each is named and skipped when read",
                    set.listing.origin.display(),
                    at.len(),
                    names[first]
                );
            }
            for (entry, j) in set.listing.entries.iter_mut().zip(&at) {
                if let Some(j) = *j {
                    entry.path.clone_from(&shard_set.entries()[j].path);
                }
            }
            set.images = Images::Shards {
                set: Box::new(shard_set),
                at,
            };
            set.listing.files = false;
        } else if let Some(url) = images.to_str().filter(|u| super::is_remote(u)) {
            let (files, urls) = super::remote::RemoteFiles::connect(
                url,
                names.iter().map(String::as_str),
                &options.remote,
            )?;
            for (entry, url) in set.listing.entries.iter_mut().zip(urls) {
                entry.path = PathBuf::from(url);
            }
            set.images = Images::Files(files);
            set.listing.files = false;
        }
        if !set.issues.is_empty() {
            tracing::warn!("{}: {}", set.listing.origin.display(), set.issues);
        }
        Ok(set)
    }

    /// Sample `index`'s objects.
    ///
    /// # Panics
    /// `index` is out of range.
    pub fn objects(&self, index: usize) -> Objects<'_> {
        let r = self.starts[index]..self.starts[index + 1];
        Objects {
            image_id: self.image_ids[index],
            size: self.sizes[index],
            boxes: &self.boxes[r.clone()],
            labels: &self.labels[r.clone()],
            iscrowd: &self.iscrowd[r.clone()],
            area: &self.area[r],
            integer: self.integer[index],
        }
    }

    /// Sample `index`'s `(width, height)` as the file gives it.
    pub fn size(&self, index: usize) -> (u32, u32) {
        self.sizes[index]
    }

    /// Objects over all samples.
    pub fn object_count(&self) -> usize {
        self.boxes.len()
    }

    /// Annotations kept or left out with something wrong (also logged when the file is read).
    pub fn issues(&self) -> &AnnotationIssues {
        &self.issues
    }
}

impl Source for CocoDataset {
    fn listing(&self) -> &Listing {
        &self.listing
    }
    fn objects(&self, index: usize) -> Option<Objects<'_>> {
        Some(CocoDataset::objects(self, index))
    }
    fn read_into(
        &self,
        index: usize,
        mode: super::ReadMode,
        dst: &mut [u8],
    ) -> std::io::Result<Option<usize>> {
        match &self.images {
            Images::Folder => super::read_entry_into(self, index, mode, dst),
            // Bytes from the network arrive in a buffer: `read` gives them.
            Images::Files(_) => Ok(None),
            Images::Shards { set, at } => set.read_into(member(at, index)?, mode, dst),
        }
    }
    fn read<'a>(
        &self,
        index: usize,
        mode: super::ReadMode,
        buf: &'a mut Vec<u8>,
    ) -> std::io::Result<super::SampleBytes<'a>> {
        let path = &self.listing.entries[index].path;
        match &self.images {
            Images::Folder => super::read_file(path, mode, buf),
            Images::Files(files) => {
                files.read(index, &path.to_string_lossy(), buf)?;
                Ok(super::SampleBytes::Buffer(buf))
            }
            Images::Shards { set, at } => set.read(member(at, index)?, mode, buf),
        }
    }
    fn prefetch(&self, indices: &[usize]) {
        match &self.images {
            Images::Folder => {}
            Images::Files(files) => files.prefetch(indices),
            Images::Shards { set, at } => {
                let members: Vec<usize> = indices.iter().filter_map(|&i| at[i]).collect();
                set.prefetch(&members);
            }
        }
    }
    fn storage(&self) -> Option<super::StorageReport> {
        match &self.images {
            Images::Folder => None,
            Images::Files(files) => Some(files.report()),
            Images::Shards { set, .. } => set.storage(),
        }
    }
}

/// Class names by label: for raw ids a name at each id (empty at gaps), for contiguous labels
/// `"__background__"` and then the names in id order.
fn class_names(categories: &[Category], mapping: Categories) -> Vec<String> {
    let mut sorted: Vec<&Category> = categories.iter().collect();
    sorted.sort_by_key(|c| c.id);
    match mapping {
        Categories::Contiguous => std::iter::once("__background__".to_string())
            .chain(sorted.iter().map(|c| c.name.clone()))
            .collect(),
        Categories::Raw => {
            // Ids past this are not worth a sparse table of names.
            let top = sorted.last().map_or(0, |c| c.id).clamp(0, 1 << 16) as usize;
            let mut names = vec![String::new(); top + 1];
            for c in sorted {
                if let Ok(i) = usize::try_from(c.id) {
                    if i <= top {
                        names[i].clone_from(&c.name);
                    }
                }
            }
            if names.iter().all(String::is_empty) {
                names.clear();
            }
            names
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"{
        "info": {"description": "test", "year": 2026},
        "licenses": [{"id": 1, "name": "x"}],
        "annotations": [
            {"id": 1, "image_id": 30, "category_id": 18, "bbox": [10, 20, 30, 40],
             "area": 1200.0, "iscrowd": 0, "segmentation": [[10, 20, 40, 20, 40, 60]]},
            {"id": 2, "image_id": 10, "category_id": 1, "bbox": [0.5, 1.5, 2.25, 3.0],
             "area": 6.75, "iscrowd": 1, "segmentation": {"counts": [1, 2], "size": [4, 4]}},
            {"id": 3, "image_id": 30, "category_id": 1, "bbox": [1, 1, 5, 5], "area": 25},
            {"id": 4, "image_id": 99, "category_id": 1, "bbox": [1, 1, 5, 5]},
            {"id": 5, "image_id": 20, "category_id": 18, "bbox": [1, 1, 0.5, 9]}
        ],
        "images": [
            {"id": 30, "file_name": "c.jpg", "width": 64, "height": 60, "coco_url": "u"},
            {"id": 10, "file_name": "sub/a.jpg", "width": 32, "height": 32},
            {"id": 20, "file_name": "b.jpg", "width": 16, "height": 16},
            {"id": 40, "file_name": "d.jpg", "width": 16, "height": 16}
        ],
        "categories": [{"id": 18, "name": "dog", "supercategory": "animal"},
                       {"id": 1, "name": "person"}]
    }"#;

    fn open(json: &str, options: &CocoOptions) -> Result<CocoDataset, Error> {
        CocoDataset::from_json("instances.json", json.as_bytes(), "/images", options)
    }

    fn error(json: &str) -> String {
        open(json, &CocoOptions::default()).unwrap_err().to_string()
    }

    #[test]
    fn an_image_whose_every_box_is_written_as_integers_is_marked_integer() {
        let set = open(FILE, &CocoOptions::default()).unwrap();
        // Image 30: `[10, 20, 30, 40]` and `[1, 1, 5, 5]`; 10 and 20 have fractions; 40 none.
        let integer: Vec<bool> = (0..4).map(|i| set.objects(i).integer).collect();
        assert_eq!(integer, [false, false, true, false]);
        let written = FILE.replace("[10, 20, 30, 40]", "[10, 20, 30, 40.0]");
        let set = open(&written, &CocoOptions::default()).unwrap();
        assert!(
            !set.objects(2).integer,
            "one number with a fraction makes the image's float32"
        );
    }

    #[test]
    fn images_come_in_ascending_id_order_with_their_objects_in_file_order() {
        let set = open(FILE, &CocoOptions::default()).unwrap();
        let ids: Vec<i64> = (0..4).map(|i| set.objects(i).image_id).collect();
        assert_eq!(ids, [10, 20, 30, 40]);
        assert_eq!(
            set.listing.entries()[0].path,
            Path::new("/images/sub/a.jpg")
        );
        assert_eq!(set.size(2), (64, 60));
        let c = set.objects(2);
        assert_eq!(c.boxes, [[10.0, 20.0, 40.0, 60.0], [1.0, 1.0, 6.0, 6.0]]);
        assert_eq!(c.labels, [18, 1]);
        assert_eq!(c.area, [1200.0, 25.0]);
        let a = set.objects(0);
        assert_eq!(a.boxes, [[0.5, 1.5, 2.75, 4.5]]);
        assert_eq!(a.iscrowd, [1]);
        assert!(set.objects(3).boxes.is_empty());
        assert_eq!(set.object_count(), 4);
        assert_eq!(set.classes()[18], "dog");
        assert_eq!(set.classes()[1], "person");
    }

    #[test]
    fn contiguous_categories_number_ids_in_order_from_one() {
        let options = CocoOptions {
            categories: Categories::Contiguous,
            ..CocoOptions::default()
        };
        let set = open(FILE, &options).unwrap();
        assert_eq!(set.objects(2).labels, [2, 1]);
        assert_eq!(set.classes(), ["__background__", "person", "dog"]);
    }

    fn image_ids(set: &CocoDataset) -> Vec<i64> {
        (0..set.listing.entries().len())
            .map(|i| set.objects(i).image_id)
            .collect()
    }

    #[test]
    fn only_the_chosen_images_are_kept_and_the_others_annotations_are_not_unknown() {
        let options = CocoOptions {
            images: Some(vec![30, 10]),
            ..CocoOptions::default()
        };
        let set = open(FILE, &options).unwrap();
        assert_eq!(image_ids(&set), [10, 30]);
        assert_eq!(
            set.issues().unknown_image,
            open(FILE, &CocoOptions::default())
                .unwrap()
                .issues()
                .unknown_image
        );
    }

    #[test]
    fn dropping_empty_images_follows_the_detection_reference() {
        // Image 40 has no object and image 20's only box is 0.5 wide: both go.
        let options = CocoOptions {
            empty: EmptyImages::Drop,
            ..CocoOptions::default()
        };
        let set = open(FILE, &options).unwrap();
        assert_eq!(image_ids(&set), [10, 30]);
        assert_eq!(set.objects(1).labels, [18, 1]);
    }

    #[test]
    fn annotations_of_unknown_images_and_odd_boxes_are_counted_and_named() {
        let json = FILE.replace("[1, 1, 5, 5], \"area\": 25", "[60, 1, 5, -5], \"area\": 25");
        let set = open(&json, &CocoOptions::default()).unwrap();
        let issues = set.issues();
        assert_eq!(issues.unknown_image, 1);
        assert_eq!(issues.negative_size, 1);
        assert_eq!(issues.outside_image, 0);
        let text = issues.to_string();
        assert!(text.contains("annotations[3] names image 99"), "{text}");
        assert!(
            text.contains("annotations[2] (image 30) has a box of size 5x-5"),
            "{text}"
        );
        // Kept, inverted, for SanitizeBoundingBoxes.
        assert_eq!(set.objects(2).boxes[1], [60.0, 1.0, 65.0, -4.0]);
        let json = FILE.replace("[10, 20, 30, 40]", "[50, 20, 30, 40]");
        let set = open(&json, &CocoOptions::default()).unwrap();
        assert_eq!(set.issues().outside_image, 1);
        assert!(set.issues().to_string().contains("[50, 20, 30, 40]"));
    }

    #[test]
    fn a_field_of_the_wrong_type_is_named_with_its_record() {
        let e = error(&FILE.replace("[0.5, 1.5, 2.25, 3.0]", "[0.5, \"1.5\", 2.25, 3.0]"));
        assert!(
            e.starts_with("instances.json: annotations[1].bbox: invalid type: string"),
            "{e}"
        );
        assert!(e.contains("line "), "{e}");
        let e = error(&FILE.replace("[0.5, 1.5, 2.25, 3.0]", "[0.5, 1.5, 2.25]"));
        assert!(e.contains("annotations[1].bbox: invalid length 3"), "{e}");
        let e = error(&FILE.replace("\"file_name\": \"b.jpg\"", "\"file_name\": 7"));
        assert!(
            e.contains("images[2].file_name: invalid type: integer"),
            "{e}"
        );
        let e = error(&FILE.replace("\"id\": 20, ", ""));
        assert!(e.contains("images[2]: the record has no `id`"), "{e}");
        let e = error(&FILE.replace("\"image_id\": 10, ", ""));
        assert!(
            e.contains("annotations[1]: the record has no `image_id`"),
            "{e}"
        );
        let e = error(&FILE.replace("\"sub/a.jpg\"", "\"../a.jpg\""));
        assert!(
            e.contains("images[1].file_name: \"../a.jpg\" is not a path inside"),
            "{e}"
        );
        let e = error(&FILE.replace("\"id\": 40", "\"id\": 20"));
        assert!(e.contains("share the id 20"), "{e}");
    }

    #[test]
    fn a_truncated_file_names_the_record_it_ends_in() {
        let cut = &FILE[..FILE.find("\"image_id\": 99").unwrap()];
        let e = error(cut);
        assert!(
            e.starts_with("instances.json: the file ends inside annotations[3]"),
            "{e}"
        );
        assert!(error("").contains("ends inside the top level"));
        assert!(error("[]").contains("the top level: invalid type: sequence"));
        assert!(error("{\"annotations\": []}").contains("missing field `images`"));
        assert!(error(&format!("{FILE} x")).contains("trailing characters"));
    }

    #[test]
    fn a_file_without_images_is_an_empty_dataset() {
        let e = error("{\"images\": [], \"annotations\": []}");
        assert!(e.contains("no images found"), "{e}");
    }
}
