//! Videos kept as folders of frames, one JPEG file per frame (what frame-extraction scripts
//! write for UCF101, HMDB51, Something-Something and mmaction's "rawframes"):
//! `root/<class>/<video>/<frame>.jpg`. Each video folder is a sample; its frames are its JPEG
//! files in natural order (numbers in names compared as numbers, so `img_9` comes before
//! `img_10`), presented at the folder's frame rate.
//!
//! Names are kept compactly: a run of names that differ only by a counter (`img_00001.jpg`,
//! `img_00002.jpg`, ...) is kept as that pattern, so Kinetics-sized sets of frame folders
//! (tens of millions of frames) hold a few dozen bytes per video, not per frame.

use std::path::{Path, PathBuf};

use super::{sort_like_python, Entry, Listing, Source};
use crate::Error;

/// Frame files (JPEG) that a frame folder picks up.
pub const FRAME_EXTENSIONS: &[&str] = &["jpg", "jpeg"];

/// A folder of videos stored as frames, in class folders: `root/<class>/<video>/<frame>.jpg`.
#[derive(Debug, Clone)]
pub struct FrameFolder {
    listing: Listing,
    names: Vec<FrameNames>,
    fps: f64,
}

/// One video's frame files, in presentation order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameNames {
    /// `prefix`, the counter from `start` (zero-padded to `width` digits), `suffix`.
    Counted {
        /// What comes before the counter.
        prefix: String,
        /// The first frame's number.
        start: u64,
        /// Digits of each number (padded with zeros).
        width: usize,
        /// What comes after it (`.jpg`).
        suffix: String,
        /// How many frames.
        count: usize,
    },
    /// Names that follow no single counter.
    Listed(Box<[Box<str>]>),
}

impl FrameNames {
    /// The names `names` (already in order), kept as a counter where they follow one.
    pub fn of(names: &[String]) -> Self {
        counted(names)
            .unwrap_or_else(|| Self::Listed(names.iter().map(|n| n.as_str().into()).collect()))
    }

    /// How many frames.
    pub fn len(&self) -> usize {
        match self {
            Self::Counted { count, .. } => *count,
            Self::Listed(names) => names.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Frame `k`'s file name.
    pub fn name(&self, k: usize) -> String {
        match self {
            Self::Counted {
                prefix,
                start,
                width,
                suffix,
                ..
            } => format!("{prefix}{:0width$}{suffix}", start + k as u64),
            Self::Listed(names) => names[k].to_string(),
        }
    }
}

/// A video's frames as a source gives them ([`Source::frames`]).
#[derive(Clone, Copy, Debug)]
pub struct Frames<'a> {
    /// The video's folder.
    pub dir: &'a Path,
    /// Its frame files' names.
    pub names: &'a FrameNames,
    /// Frames per second.
    pub fps: f64,
}

impl Frames<'_> {
    /// How many frames.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Frame `k`'s file.
    pub fn path(&self, k: usize) -> PathBuf {
        self.dir.join(self.names.name(k))
    }
}

impl FrameFolder {
    /// Lists `root`'s class folders and the video folders in each, at `fps` frames per second.
    ///
    /// # Errors
    /// `root` cannot be listed, `fps` is not a positive number, or no class folder holds a
    /// folder with a JPEG in it.
    pub fn open(root: impl AsRef<Path>, fps: f64) -> Result<Self, Error> {
        let root = root.as_ref().to_path_buf();
        if !(fps.is_finite() && fps > 0.0) {
            return Err(Error::config(
                "fps",
                format!("{fps} is not a positive frame rate"),
            ));
        }
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        let mut class_dirs = subfolders(&root).map_err(io(&root))?;
        sort_like_python(&mut class_dirs);
        let (mut classes, mut entries, mut names) = (Vec::new(), Vec::new(), Vec::new());
        for (label, class) in class_dirs.iter().enumerate() {
            classes.push(file_name(class));
            let mut videos = subfolders(class).map_err(io(class))?;
            sort_like_python(&mut videos);
            for video in videos {
                let frames = frame_names(&video).map_err(io(&video))?;
                if frames.is_empty() {
                    continue;
                }
                names.push(FrameNames::of(&frames));
                entries.push(Entry {
                    path: video,
                    label: label as i64,
                });
            }
        }
        if entries.is_empty() {
            return Err(Error::EmptyDataset {
                path: root,
                what: "class folders of video folders with .jpg frames",
            });
        }
        Ok(Self {
            listing: Listing::of_records(root, entries, classes),
            names,
            fps,
        })
    }
}

impl Source for FrameFolder {
    fn listing(&self) -> &Listing {
        &self.listing
    }

    fn frames(&self, index: usize) -> Option<Frames<'_>> {
        Some(Frames {
            dir: &self.listing.entries[index].path,
            names: &self.names[index],
            fps: self.fps,
        })
    }

    /// A video folder is not one file: its frames are read one by one by the video path.
    fn read<'a>(
        &self,
        index: usize,
        _mode: super::ReadMode,
        _buf: &'a mut Vec<u8>,
    ) -> std::io::Result<super::SampleBytes<'a>> {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} is a folder of frames: read it with a video loader",
                self.listing.entries[index].path.display()
            ),
        ))
    }
}

/// Whether `root` looks like a [`FrameFolder`]: its first class folder (in order) holds a
/// folder with JPEG files directly in it.
pub(crate) fn holds_frame_folders(root: &Path) -> bool {
    let Ok(mut classes) = subfolders(root) else {
        return false;
    };
    sort_like_python(&mut classes);
    let Some(Ok(mut videos)) = classes.first().map(|c| subfolders(c)) else {
        return false;
    };
    sort_like_python(&mut videos);
    videos
        .first()
        .is_some_and(|v| frame_names(v).is_ok_and(|n| !n.is_empty()))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

fn subfolders(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            out.push(path);
        }
    }
    Ok(out)
}

/// The JPEG files directly in `dir`, in natural order.
fn frame_names(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let jpeg = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| FRAME_EXTENSIONS.iter().any(|x| x.eq_ignore_ascii_case(e)));
        if jpeg && path.is_file() {
            names.push(name);
        }
    }
    names.sort_by(|a, b| natural(a).cmp(&natural(b)).then_with(|| a.cmp(b)));
    Ok(names)
}

/// A name as a key of natural order: runs of digits compare as numbers (by length once
/// leading zeros are dropped, then by digits), the rest byte by byte.
fn natural(name: &str) -> Vec<(u8, &str)> {
    let mut key = Vec::new();
    let mut rest = name;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            let number = rest[..digits].trim_start_matches('0');
            key.push((1, "")); // a number sorts before text at the same place
            key.push((number.len().min(255) as u8, number));
            rest = &rest[digits..];
        } else {
            let text = rest.bytes().take_while(|b| !b.is_ascii_digit()).count();
            key.push((2, &rest[..text]));
            rest = &rest[text..];
        }
    }
    key
}

/// `names` as one counter, if they are `prefix + number + suffix` with consecutive numbers of
/// one width.
fn counted(names: &[String]) -> Option<FrameNames> {
    let split = |name: &str| -> Option<(usize, usize)> {
        let end = name.rfind(|c: char| c.is_ascii_digit())? + 1;
        let start = name[..end]
            .rfind(|c: char| !c.is_ascii_digit())
            .map_or(0, |i| i + 1);
        Some((start, end))
    };
    let first = names.first()?;
    let (s, e) = split(first)?;
    let (prefix, suffix) = (&first[..s], &first[e..]);
    let width = e - s;
    let start: u64 = first[s..e].parse().ok()?;
    let plain = format!("{start}").len() == width; // no padding: widths may grow
    for (k, name) in names.iter().enumerate() {
        let number = start.checked_add(k as u64)?;
        let want = if plain {
            format!("{prefix}{number}{suffix}")
        } else {
            format!("{prefix}{number:0width$}{suffix}")
        };
        if *name != want {
            return None;
        }
    }
    Some(FrameNames::Counted {
        prefix: prefix.to_string(),
        start,
        width: if plain { 0 } else { width },
        suffix: suffix.to_string(),
        count: names.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn names_following_a_counter_are_kept_as_it_and_give_the_same_names_back() {
        for names in [
            owned(&["img_00001.jpg", "img_00002.jpg", "img_00003.jpg"]),
            owned(&["8.jpg", "9.jpg", "10.jpg", "11.jpg"]),
            owned(&["frame0098.jpeg", "frame0099.jpeg", "frame0100.jpeg"]),
        ] {
            let kept = FrameNames::of(&names);
            assert!(matches!(kept, FrameNames::Counted { .. }), "{kept:?}");
            let back: Vec<String> = (0..kept.len()).map(|k| kept.name(k)).collect();
            assert_eq!(back, names);
        }
        let gaps = owned(&["a1.jpg", "a3.jpg"]);
        assert!(matches!(FrameNames::of(&gaps), FrameNames::Listed(_)));
        assert_eq!(FrameNames::of(&gaps).name(1), "a3.jpg");
    }

    #[test]
    fn frames_sort_in_natural_order() {
        let mut names = owned(&["img_10.jpg", "img_9.jpg", "img_100.jpg", "img_1.jpg"]);
        names.sort_by(|a, b| natural(a).cmp(&natural(b)));
        assert_eq!(
            names,
            ["img_1.jpg", "img_9.jpg", "img_10.jpg", "img_100.jpg"]
        );
    }
}
