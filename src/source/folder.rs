use std::path::{Path, PathBuf};

use super::{sort_like_python, Entry, Listing, Source};
use crate::Error;

/// File extensions (compared case-insensitively) that ImageFolder picks up: those of
/// torchvision's `IMG_EXTENSIONS` that our decoders read. torchvision also lists .tif/.tiff;
/// those are not decoded here.
pub const IMAGE_EXTENSIONS: &[&str] = &["jpg", "jpeg", "png", "webp", "bmp", "ppm", "pgm"];

/// A torchvision-style image folder: `root/<class>/**/<image>`.
///
/// Classes are the sorted names of `root`'s subfolders and label `i` is the `i`-th class, as in
/// `torchvision.datasets.ImageFolder`; files are listed recursively (following links) in sorted
/// order and kept when their extension is one of [`IMAGE_EXTENSIONS`].
#[derive(Debug, Clone)]
pub struct ImageFolder {
    listing: Listing,
}

impl ImageFolder {
    /// Lists `root`.
    ///
    /// # Errors
    /// `root` cannot be listed, or holds no class folder with an image in it.
    pub fn open(root: impl AsRef<Path>) -> Result<Self, Error> {
        let listing = class_folders(
            root.as_ref(),
            IMAGE_EXTENSIONS,
            "class folders with .jpg/.jpeg/.png/.webp files",
        )?;
        Ok(Self { listing })
    }
}

/// Video file extensions (compared case-insensitively) that [`VideoFolder`] picks up: the
/// MP4/MOV family, and AVI (MPEG-4 Part 2: UCF101, HMDB51).
pub const VIDEO_EXTENSIONS: &[&str] = &["mp4", "m4v", "mov", "avi"];

/// A folder of videos in class folders (the Kinetics, UCF101 and HMDB51 layout, as
/// torchvision's video datasets list it): `root/<class>/**/<video>`, classes and labels as
/// [`ImageFolder`]'s, files kept when their extension is one of [`VIDEO_EXTENSIONS`].
#[derive(Debug, Clone)]
pub struct VideoFolder {
    listing: Listing,
}

impl VideoFolder {
    /// Lists `root`.
    ///
    /// # Errors
    /// `root` cannot be listed, or holds no class folder with a video in it.
    pub fn open(root: impl AsRef<Path>) -> Result<Self, Error> {
        let listing = class_folders(
            root.as_ref(),
            VIDEO_EXTENSIONS,
            "class folders with .mp4/.m4v/.mov files",
        )?;
        Ok(Self { listing })
    }
}

impl Source for VideoFolder {
    fn listing(&self) -> &Listing {
        &self.listing
    }
}

/// Lists `root`'s class folders and the files under each with one of `extensions`.
fn class_folders(root: &Path, extensions: &[&str], what: &'static str) -> Result<Listing, Error> {
    let root = root.to_path_buf();
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    let mut class_dirs = Vec::new();
    for entry in std::fs::read_dir(&root).map_err(io(&root))? {
        let entry = entry.map_err(io(&root))?;
        if entry.path().is_dir() {
            class_dirs.push(entry.path());
        }
    }
    sort_like_python(&mut class_dirs);
    let mut classes = Vec::with_capacity(class_dirs.len());
    let mut entries = Vec::new();
    for (label, dir) in class_dirs.iter().enumerate() {
        classes.push(
            dir.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
        );
        let mut files = Vec::new();
        let mut visited = std::collections::HashSet::new();
        list_files(dir, extensions, &mut files, &mut visited)?;
        sort_like_python(&mut files);
        entries.extend(files.into_iter().map(|path| Entry {
            path,
            label: label as i64,
        }));
    }
    if entries.is_empty() {
        return Err(Error::EmptyDataset { path: root, what });
    }
    Ok(Listing::of_files(root, entries, classes))
}

/// Lists the files under `dir` with one of `extensions`, recursively, following links; a
/// folder reached twice (a link loop, or two links to one folder) is listed once.
fn list_files(
    dir: &Path,
    extensions: &[&str],
    out: &mut Vec<PathBuf>,
    visited: &mut std::collections::HashSet<PathBuf>,
) -> Result<(), Error> {
    let io = |source| Error::Io {
        path: dir.to_path_buf(),
        source,
    };
    if !visited.insert(std::fs::canonicalize(dir).map_err(io)?) {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.is_dir() {
            list_files(&path, extensions, out, visited)?;
        } else if has_extension(&path, extensions) {
            out.push(path);
        }
    }
    Ok(())
}

fn has_extension(path: &Path, extensions: &[&str]) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| extensions.iter().any(|x| x.eq_ignore_ascii_case(e)))
}

impl Source for ImageFolder {
    fn listing(&self) -> &Listing {
        &self.listing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_sorted_folders_and_files_are_filtered_by_extension() {
        let dir = std::env::temp_dir().join(format!("hpuload-folder-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (f, body) in [
            ("b/2.JPG", "x"),
            ("b/1.png", "x"),
            ("a/sub/z.webp", "x"),
            ("a/y.jpeg", "x"),
            ("a/notes.txt", "x"),
            ("C/x.jpg", "x"),
        ] {
            let p = dir.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
        std::fs::create_dir_all(dir.join("a/dir.jpg")).unwrap();
        let folder = ImageFolder::open(&dir).unwrap();
        assert_eq!(folder.classes(), ["C", "a", "b"]);
        let got: Vec<(String, i64)> = folder
            .entries()
            .iter()
            .map(|e| {
                (
                    e.path
                        .strip_prefix(&dir)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                    e.label,
                )
            })
            .collect();
        let want = [
            ("C/x.jpg", 0),
            ("a/sub/z.webp", 1),
            ("a/y.jpeg", 1),
            ("b/1.png", 2),
            ("b/2.JPG", 2),
        ];
        assert_eq!(got, want.map(|(p, l)| (p.to_string(), l)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_folder_error_names_it() {
        let err = ImageFolder::open("/nonexistent/hpuload").unwrap_err();
        assert!(err.to_string().contains("/nonexistent/hpuload"), "{err}");
    }
}
