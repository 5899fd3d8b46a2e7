//! A COCO set whose images are members of tar shards: which member holds each image.

use std::collections::HashMap;
use std::path::Path;

/// The shard sample that holds sample `index`'s image.
pub(super) fn member(at: &[Option<usize>], index: usize) -> std::io::Result<usize> {
    at[index].ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no shard holds this image: no image member has its file_name as its path, or as \
             its file name (unique among the shards)",
        )
    })
}

/// Whether a COCO set's image location names tar shards: a `.tar` file or brace pattern of
/// them (local or a URL), or a local folder that holds `.tar` files.
pub(super) fn names_shards(images: &Path) -> bool {
    let spec = images.to_string_lossy();
    let first = crate::source::pattern::expand_braces(&spec)
        .ok()
        .and_then(|n| n.into_iter().next())
        .unwrap_or_else(|| spec.to_string());
    Path::new(&first).extension().is_some_and(|x| x == "tar")
        || (!crate::source::is_remote(&spec)
            && images.is_dir()
            && crate::source::shards::tar_files(images).is_ok_and(|t| !t.is_empty()))
}

/// Each image's sample in `shards`, by its `file_name`: the image member whose path inside its
/// shard is `file_name`, else the one whose file name is `file_name`'s, when only one is.
pub(super) fn locate_members(
    shards: &crate::source::WebDataset,
    names: &[String],
) -> Vec<Option<usize>> {
    let mut by_path: HashMap<&Path, usize> = HashMap::new();
    // `None`: more than one member has that file name.
    let mut by_name: HashMap<&std::ffi::OsStr, Option<usize>> = HashMap::new();
    for (i, member) in shards.image_members() {
        by_path.entry(member).or_insert(i);
        if let Some(name) = member.file_name() {
            by_name
                .entry(name)
                .and_modify(|v| *v = None)
                .or_insert(Some(i));
        }
    }
    names
        .iter()
        .map(|name| {
            let path = Path::new(name);
            by_path.get(path).copied().or_else(|| {
                path.file_name()
                    .and_then(|n| by_name.get(n).copied().flatten())
            })
        })
        .collect()
}
