use std::path::Path;

use super::{Entry, Listing, Source};
use crate::Error;

/// A dataset listed in a text file: one `path<TAB>label` per line.
///
/// Relative paths are resolved against the manifest's folder. Blank lines and lines starting
/// with `#` are ignored. Labels are integers.
#[derive(Debug, Clone)]
pub struct Manifest {
    listing: Listing,
}

impl Manifest {
    /// Reads and parses the manifest at `path`.
    ///
    /// # Errors
    /// The file cannot be read, a line is malformed (the error gives the line number), or no
    /// entries are listed.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref().to_path_buf();
        let text = std::fs::read(&path).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let entries = Self::parse(&text, base).map_err(|(line, reason)| Error::Manifest {
            path: path.clone(),
            line,
            reason,
        })?;
        if entries.is_empty() {
            return Err(Error::EmptyDataset {
                path,
                what: "manifest lines",
            });
        }
        Ok(Self {
            listing: Listing::of_files(path, entries, Vec::new()),
        })
    }

    /// Parses manifest bytes (the whole file), resolving relative paths against `base`. On
    /// failure returns the 1-based line number and the reason. Never panics, whatever the bytes
    /// (fuzzed: `fuzz/fuzz_targets/manifest.rs`).
    ///
    /// # Errors
    /// The text is not UTF-8, or a line is not `path<TAB>integer`.
    pub fn parse(text: &[u8], base: &Path) -> Result<Vec<Entry>, (usize, String)> {
        parse(text, base)
    }
}

fn parse(text: &[u8], base: &Path) -> Result<Vec<Entry>, (usize, String)> {
    let text = std::str::from_utf8(text).map_err(|e| {
        let line = text[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        (line, "not valid UTF-8".to_string())
    })?;
    let mut entries = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let (file, label) = line
            .rsplit_once('\t')
            .ok_or((n + 1, "expected `path<TAB>label`".to_string()))?;
        if file.is_empty() {
            return Err((n + 1, "empty path".to_string()));
        }
        let label = label
            .trim()
            .parse::<i64>()
            .map_err(|_| (n + 1, format!("label {label:?} is not an integer")))?;
        entries.push(Entry {
            path: base.join(file),
            label,
        });
    }
    Ok(entries)
}

impl Source for Manifest {
    fn listing(&self) -> &Listing {
        &self.listing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_paths_relative_to_the_manifest_and_skips_comments() {
        let e = Manifest::parse(
            b"# header\na/1.jpg\t3\n\n/abs/2.png\t-1\r\n",
            Path::new("/data"),
        )
        .unwrap();
        assert_eq!(
            e,
            vec![
                Entry {
                    path: "/data/a/1.jpg".into(),
                    label: 3
                },
                Entry {
                    path: "/abs/2.png".into(),
                    label: -1
                },
            ]
        );
    }

    #[test]
    fn malformed_lines_are_reported_with_their_number() {
        assert_eq!(
            parse(b"a.jpg\t1\nb.jpg 2\n", Path::new(".")).unwrap_err().0,
            2
        );
        assert_eq!(parse(b"a.jpg\tcat\n", Path::new(".")).unwrap_err().0, 1);
        assert_eq!(parse(b"\t1\n", Path::new(".")).unwrap_err().0, 1);
        assert_eq!(parse(b"ok\t1\n\xff\t2\n", Path::new(".")).unwrap_err().0, 2);
    }
}
