//! Dataset specs that name many files: brace patterns (`train-{000000..000146}.tar`) and
//! wildcards in file names (`train-*.parquet`).

use std::path::{Path, PathBuf};

use crate::Error;

/// Why a brace pattern does not expand.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatternError {
    /// A `{` without its `}`.
    #[error("an unclosed '{{'")]
    Unclosed,
    /// A range bound that is not a non-negative integer.
    #[error("range {which} {bound:?} is not a number")]
    NotANumber {
        /// `start` or `end`.
        which: &'static str,
        /// The bound as written.
        bound: String,
    },
    /// A range whose end is before its start.
    #[error("range {start}..{end} runs backwards")]
    Backwards {
        /// The start as written.
        start: String,
        /// The end as written.
        end: String,
    },
    /// A range naming more files than any dataset has.
    #[error("range {start}..{end} names more than 10 million shards")]
    TooMany {
        /// The start as written.
        start: String,
        /// The end as written.
        end: String,
    },
}

/// Expands brace patterns: `a-{00..03}.tar` -> `a-00.tar` .. `a-03.tar` (zero padding kept,
/// as wide as the first bound), `{x,y}` -> both; several braces multiply out, left to right.
///
/// # Errors
/// An unclosed brace or a range that is not two non-negative integers in increasing order.
pub fn expand_braces(pattern: &str) -> Result<Vec<String>, PatternError> {
    let Some(open) = pattern.find('{') else {
        return Ok(vec![pattern.to_string()]);
    };
    let close = pattern[open..]
        .find('}')
        .map(|i| open + i)
        .ok_or(PatternError::Unclosed)?;
    let (head, body, tail) = (
        &pattern[..open],
        &pattern[open + 1..close],
        &pattern[close + 1..],
    );
    let choices: Vec<String> = if let Some((a, b)) = body.split_once("..") {
        let (lo, hi) = (
            a.parse::<u64>().map_err(|_| PatternError::NotANumber {
                which: "start",
                bound: a.into(),
            })?,
            b.parse::<u64>().map_err(|_| PatternError::NotANumber {
                which: "end",
                bound: b.into(),
            })?,
        );
        let (start, end) = (a.to_string(), b.to_string());
        if lo > hi {
            return Err(PatternError::Backwards { start, end });
        }
        if hi - lo > 10_000_000 {
            return Err(PatternError::TooMany { start, end });
        }
        let width = a.len();
        (lo..=hi).map(|n| format!("{n:0width$}")).collect()
    } else {
        body.split(',').map(str::to_string).collect()
    };
    let rest = expand_braces(tail)?;
    Ok(choices
        .iter()
        .flat_map(|c| rest.iter().map(move |r| format!("{head}{c}{r}")))
        .collect())
}

/// Files matching `pattern`, whose wildcards (`*`, `?`) are in the file name only, sorted.
pub(crate) fn glob_files(pattern: &str) -> Result<Vec<PathBuf>, Error> {
    let path = Path::new(pattern);
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if dir.to_string_lossy().contains(['*', '?']) {
        return Err(Error::config(
            "data",
            format!("{pattern}: wildcards are read in file names only, not in folders"),
        ));
    }
    super::files_in(dir, |p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| wildcard_match(name.as_bytes(), n.as_bytes()))
    })
}

/// Whether `text` matches `pattern` (`*`: any run, `?`: any one byte).
pub fn wildcard_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces_expand_ranges_with_padding_and_lists() {
        assert_eq!(expand_braces("a.tar").unwrap(), ["a.tar"]);
        assert_eq!(
            expand_braces("s-{008..011}.tar").unwrap(),
            ["s-008.tar", "s-009.tar", "s-010.tar", "s-011.tar"]
        );
        assert_eq!(
            expand_braces("{a,b}/x-{1..2}").unwrap(),
            ["a/x-1", "a/x-2", "b/x-1", "b/x-2"]
        );
        assert!(expand_braces("x-{1..").is_err());
        assert!(expand_braces("x-{3..1}").is_err());
        assert!(expand_braces("x-{a..b}").is_err());
    }
}
