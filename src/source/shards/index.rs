//! A shard's sidecar index (`<shard>.idx`): where each sample's image lies and its label,
//! built by scanning the tar headers (the data is skipped by seeking), written atomically, and
//! trusted only while the shard's size and its first member still match.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::{Fields, Media, IMAGE_FIELDS, TRUNCATED};
use crate::Error;

/// The first line of an index file, before the shard's size and the label field.
const INDEX_MAGIC: &str = "hpuload-shard-index 1";

/// What follows the label field in the first line of a video shard's index.
const VIDEOS_TAG: &str = " videos";

/// One sample of a shard's index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexedSample {
    /// The sample's key (member path up to the first dot of the file name).
    pub key: String,
    /// The image member's name.
    pub member: String,
    /// Offset of the image member's data in the shard.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
    /// The label, or why there is none usable (no label member, not an integer, no image).
    pub label: Result<i64, String>,
}

/// The index file that belongs to `shard`.
pub fn index_path(shard: &Path) -> PathBuf {
    let mut name = shard.as_os_str().to_owned();
    name.push(".idx");
    PathBuf::from(name)
}

pub(super) fn load_or_build_index(
    shard: &Path,
    fields: Fields<'_>,
) -> Result<Vec<IndexedSample>, Error> {
    let io = |source| Error::Io {
        path: shard.to_path_buf(),
        source,
    };
    let size = std::fs::metadata(shard).map_err(io)?.len();
    match read_index(&index_path(shard), fields) {
        Some((indexed, samples)) if indexed == size => return Ok(samples),
        // Shorter than when it was indexed, and still the same shard where it begins: cut
        // short. Keep the index, so each sample past the cut fails by name when read instead
        // of vanishing from the dataset.
        Some((indexed, samples)) if indexed > size && starts_as_indexed(shard, &samples) => {
            tracing::warn!(
                "{} is {size} bytes, {indexed} when indexed: truncated; its samples past the cut \
                 will fail when read",
                shard.display()
            );
            return Ok(samples);
        }
        _ => {}
    }
    let samples = build_index(shard, fields)?;
    // Best effort: a read-only dataset folder still works, it only indexes again next time.
    if let Err(e) = write_index(&index_path(shard), size, fields, &samples) {
        tracing::debug!("could not save the index of {}: {e}", shard.display());
    }
    Ok(samples)
}

/// Scans a shard's tar headers (the data is skipped by seeking) and groups members into samples:
/// each sample's first member of one of `fields.media`'s fields is its image or video, and the
/// `fields.label` member its label.
///
/// # Errors
/// The shard cannot be read or is not a valid tar file.
pub fn build_index(shard: &Path, fields: Fields<'_>) -> Result<Vec<IndexedSample>, Error> {
    let label_field = fields.label;
    let media = fields.media.fields();
    let bad = |reason: String| Error::Format {
        path: shard.to_path_buf(),
        reason,
    };
    let file = File::open(shard).map_err(|source| Error::Io {
        path: shard.to_path_buf(),
        source,
    })?;
    let shard_len = file
        .metadata()
        .map_err(|source| Error::Io {
            path: shard.to_path_buf(),
            source,
        })?
        .len();
    let mut archive = tar::Archive::new(BufReader::new(file));
    let entries = archive
        .entries_with_seek()
        .map_err(|e| bad(format!("not a tar file: {e}")))?;
    let mut samples: Vec<IndexedSample> = Vec::new();
    let mut label_text: Option<Vec<u8>> = None;
    for entry in entries {
        let mut entry = match entry {
            Ok(entry) => entry,
            // Nothing readable at all: not a tar file. Past some samples: a damaged tail,
            // which fails the sample it cuts through, not the whole dataset.
            Err(e) if samples.is_empty() => return Err(bad(format!("not a valid tar file: {e}"))),
            Err(e) => {
                tracing::warn!(
                    "{}: unreadable after {} samples: {e}",
                    shard.display(),
                    samples.len()
                );
                break;
            }
        };
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let end = entry.raw_file_position().saturating_add(entry.size());
        if end > shard_len {
            let (key, _) = split_key(&name);
            if samples.last().is_none_or(|s| s.key != key) {
                samples.push(IndexedSample {
                    key: key.to_string(),
                    member: String::new(),
                    offset: 0,
                    len: 0,
                    label: Ok(-1),
                });
            }
            let last = samples.last_mut().expect("pushed above");
            last.label = Err(format!(
                "{TRUNCATED}: member {name} ends at byte {end}, past the shard's \
                 {shard_len} bytes"
            ));
            label_text = None;
            break;
        }
        let (key, field) = split_key(&name);
        if samples.last().is_none_or(|s| s.key != key) {
            if let Some(last) = samples.last_mut() {
                finish_label(last, label_text.take(), label_field);
            }
            samples.push(IndexedSample {
                key: key.to_string(),
                member: String::new(),
                offset: 0,
                len: 0,
                label: if label_field.is_empty() {
                    Ok(-1)
                } else {
                    Err(format!("the sample has no .{label_field} member"))
                },
            });
        }
        let sample = samples.last_mut().expect("pushed above");
        let field = field.to_ascii_lowercase();
        if !label_field.is_empty() && field == label_field {
            let mut text = Vec::new();
            std::io::Read::read_to_end(&mut std::io::Read::take(&mut entry, 64), &mut text)
                .map_err(|e| bad(format!("reading {name}: {e}")))?;
            label_text = Some(text);
        } else if media.contains(&field.as_str()) && sample.member.is_empty() {
            sample.member = name.clone();
            sample.offset = entry.raw_file_position();
            sample.len = entry.size();
        }
    }
    if let Some(last) = samples.last_mut() {
        if last
            .label
            .as_ref()
            .is_err_and(|why| why.starts_with(TRUNCATED))
        {
            return Ok(samples);
        }
        finish_label(last, label_text.take(), label_field);
    }
    Ok(samples)
}

fn finish_label(sample: &mut IndexedSample, text: Option<Vec<u8>>, label_field: &str) {
    if let Some(text) = text {
        let text = String::from_utf8_lossy(&text);
        sample.label = text.trim().parse::<i64>().map_err(|_| {
            format!(
                "the .{label_field} member is not an integer: {:?}",
                text.trim()
            )
        });
    }
}

/// Whether a member named `name` is a sample's image: its field (what follows the first dot
/// of its file name) is one of [`IMAGE_FIELDS`], in any case.
pub fn is_image_member(name: &str) -> bool {
    let field = split_key(name).1.to_ascii_lowercase();
    IMAGE_FIELDS.contains(&field.as_str())
}

/// `dir/abc.seg.jpg` -> (`dir/abc`, `seg.jpg`): the key ends at the first dot of the file name.
fn split_key(name: &str) -> (&str, &str) {
    let base = name.rfind('/').map_or(0, |i| i + 1);
    match name[base..].find('.') {
        Some(dot) => (&name[..base + dot], &name[base + dot + 1..]),
        None => (name, ""),
    }
}

/// Whether the shard's first indexed member is still where the index says (its tar header,
/// just before its data, names it).
fn starts_as_indexed(shard: &Path, samples: &[IndexedSample]) -> bool {
    let Some(first) = samples.iter().find(|s| !s.member.is_empty()) else {
        return false;
    };
    let mut header = [0u8; 100];
    let Some(at) = first.offset.checked_sub(512) else {
        return false;
    };
    let read = File::open(shard).and_then(|f| f.read_exact_at(&mut header, at));
    let name = first
        .member
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .as_bytes();
    // An empty name (a member "dir/") or one longer than the header's name field cannot be
    // checked this way: then the index is not trusted.
    read.is_ok()
        && (1..=header.len()).contains(&name.len())
        && header.windows(name.len()).any(|w| w == name)
}

/// The shard size an index was made for, and its samples.
pub(super) fn read_index(path: &Path, fields: Fields<'_>) -> Option<(u64, Vec<IndexedSample>)> {
    parse_index(BufReader::new(File::open(path).ok()?), fields)
}

/// [`read_index`] from the index's bytes; `None` for a damaged index, another label field or
/// other media. Without a label field (samples without labels) any index of the same media
/// serves, its labels dropped.
pub(super) fn parse_index(
    text: impl BufRead,
    fields: Fields<'_>,
) -> Option<(u64, Vec<IndexedSample>)> {
    let label_field = fields.label;
    let mut lines = text.lines();
    let header = lines.next()?.ok()?;
    let rest = header.strip_prefix(INDEX_MAGIC)?.trim_start();
    let (size, field) = rest.split_once(' ')?;
    // A video index says so after its label field; an image index says nothing (as before).
    let field = match (fields.media, field.strip_suffix(VIDEOS_TAG)) {
        (Media::Videos, Some(field)) => field,
        (Media::Images, None) => field,
        _ => return None,
    };
    let unlabelled = label_field.is_empty();
    if field != label_field && !unlabelled {
        return None;
    }
    let shard_size: u64 = size.parse().ok()?;
    let mut samples = Vec::new();
    for line in lines {
        let line = line.ok()?;
        let mut f = line.splitn(5, '\t');
        let (key, member, offset, len, label) =
            (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
        let label = match label.strip_prefix('!') {
            Some(why) => Err(unescape(why)?),
            None => Ok(label.parse().ok()?),
        };
        // Only a cut shard's failure is the image's; label failures are not.
        let label = match label {
            Err(why) if unlabelled && !why.starts_with(TRUNCATED) => Ok(-1),
            Ok(_) if unlabelled => Ok(-1),
            label => label,
        };
        let (offset, len): (u64, u64) = (offset.parse().ok()?, len.parse().ok()?);
        // An entry outside the shard it was made for is a damaged index: rebuild it (and never
        // size a read by it).
        if offset.checked_add(len)? > shard_size {
            return None;
        }
        samples.push(IndexedSample {
            key: unescape(key)?,
            member: unescape(member)?,
            offset,
            len,
            label,
        });
    }
    Some((shard_size, samples))
}

/// Writes `samples` as the index of a shard of `shard_size` bytes (atomically: a temporary
/// file renamed into place).
///
/// # Errors
/// The file cannot be written.
pub fn write_index(
    path: &Path,
    shard_size: u64,
    fields: Fields<'_>,
    samples: &[IndexedSample],
) -> std::io::Result<()> {
    let label_field = fields.label;
    let tag = match fields.media {
        Media::Images => "",
        Media::Videos => VIDEOS_TAG,
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let mut out = std::io::BufWriter::new(File::create(&tmp)?);
    writeln!(out, "{INDEX_MAGIC} {shard_size} {label_field}{tag}")?;
    for s in samples {
        let label = match &s.label {
            Ok(l) => l.to_string(),
            Err(why) => format!("!{}", escape(why)),
        };
        writeln!(
            out,
            "{}\t{}\t{}\t{}\t{label}",
            escape(&s.key),
            escape(&s.member),
            s.offset,
            s.len
        )?;
    }
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// A name as one field of an index line: `%`, tab, newline and carriage return as `%XX`, so
/// any member name (tar allows them all) comes back unchanged.
fn escape(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains(['%', '\t', '\n', '\r']) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '\t' => out.push_str("%09"),
            '\n' => out.push_str("%0A"),
            '\r' => out.push_str("%0D"),
            c => out.push(c),
        }
    }
    out.into()
}

/// The inverse of [`escape`]; `None` for an escape it never writes (a damaged index).
fn unescape(field: &str) -> Option<String> {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 3)?;
        out.push(match code {
            "25" => '%',
            "09" => '\t',
            "0A" => '\n',
            "0D" => '\r',
            _ => return None,
        });
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_whose_first_member_has_an_empty_name_is_not_trusted() {
        // Found by the `shards` fuzz target (crash-32b357ec...): a member named "x/" made the
        // header check search for an empty name, which panicked.
        let dir = std::env::temp_dir().join(format!("hpuload-empty-member-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let shard = dir.join("s.tar");
        std::fs::write(&shard, vec![0u8; 2048]).unwrap();
        let sample = IndexedSample {
            key: "x/".into(),
            member: "x/".into(),
            offset: 1024,
            len: 1,
            label: Ok(0),
        };
        assert!(!starts_as_indexed(&shard, &[sample]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn names_with_tabs_newlines_and_percents_round_trip_through_the_index() {
        // Found by the `shards` fuzz target (crash-d3f70011...): a tab in a member name was
        // written as a space, so the reopened shard named the sample differently.
        for name in [
            "plain.jpg",
            "a\tb.jpg",
            "line\nbreak%25.jpg",
            "100%.jpg",
            "\r%0A",
        ] {
            let escaped = escape(name);
            assert!(!escaped.contains(['\t', '\n', '\r']), "{escaped:?}");
            assert_eq!(unescape(&escaped).as_deref(), Some(name));
        }
        assert_eq!(unescape("bad%zz"), None);
        assert_eq!(unescape("cut%0"), None);
    }

    #[test]
    fn an_index_serves_only_shards_read_for_the_same_media() {
        let sample = IndexedSample {
            key: "a".into(),
            member: "a.mp4".into(),
            offset: 512,
            len: 10,
            label: Ok(3),
        };
        let dir = std::env::temp_dir().join(format!("hpuload-media-idx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let [images, videos, unlabelled] = [
            (Media::Images, "cls"),
            (Media::Videos, "cls"),
            (Media::Videos, ""),
        ]
        .map(|(media, label)| Fields { label, media });
        for written in [images, videos] {
            let path = dir.join("s.tar.idx");
            write_index(&path, 4096, written, std::slice::from_ref(&sample)).unwrap();
            for read in [images, videos, unlabelled] {
                let got = read_index(&path, read);
                assert_eq!(
                    got.is_some(),
                    read.media == written.media,
                    "{written:?} read as {read:?}"
                );
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn keys_end_at_the_first_dot_of_the_file_name() {
        assert_eq!(split_key("dir.v2/abc.seg.jpg"), ("dir.v2/abc", "seg.jpg"));
        assert_eq!(split_key("abc.cls"), ("abc", "cls"));
        assert_eq!(split_key("noext"), ("noext", ""));
        assert!(is_image_member("train2017/0009.JPG") && is_image_member("dir.v2/a.webp"));
        assert!(!is_image_member("a.v2.jpg") && !is_image_member("a.cls") && !is_image_member("a"));
    }
}
