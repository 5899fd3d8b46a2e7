//! Videos listed in a CSV file: Kinetics' annotation files as they are published
//! (`label,youtube_id,time_start,time_end,split`) or any list of `path,label[,start,end]`.

use std::path::{Path, PathBuf};

use super::{Entry, Listing, Source};
use crate::Error;

/// Videos listed in a CSV file with a header row. Columns, by name:
///
/// - `path`: the video (relative to the videos folder), or `youtube_id`: Kinetics' id, found
///   under the videos folder as the trimmed clip a Kinetics download holds,
///   `[<label>/]<id>_<start>_<end>.mp4` (start and end in whole seconds, six digits), or else as
///   the whole video `[<label>/]<id>.mp4`, cut to the row's times. A row whose video is not
///   there (Kinetics downloads lack the videos YouTube no longer has) is left out and counted;
/// - `label`: an integer, or a class name (then the classes sorted by name, as torchvision
///   sorts class folders, and each label its class's position);
/// - `time_start` / `time_end` (or `start` / `end`): the segment, in seconds, that the clips
///   are drawn from (the row's video is cut to the frames presented in it).
///
/// Other columns (`split`, `is_cc`) are ignored.
#[derive(Debug, Clone)]
pub struct VideoManifest {
    listing: Listing,
    segments: Vec<Option<(f64, f64)>>,
    missing: usize,
}

impl VideoManifest {
    /// Reads the CSV file at `csv`, finding the videos under `videos` (default: the CSV's
    /// folder).
    ///
    /// # Errors
    /// The file cannot be read, a row is malformed (the error gives its line), or no listed
    /// video is there.
    pub fn open(csv: impl AsRef<Path>, videos: Option<&Path>) -> Result<Self, Error> {
        let path = csv.as_ref().to_path_buf();
        let text = std::fs::read(&path).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        let base = videos
            .map(Path::to_path_buf)
            .unwrap_or_else(|| path.parent().unwrap_or(Path::new(".")).to_path_buf());
        let (rows, classes) = parse(&text).map_err(|(line, reason)| Error::Manifest {
            path: path.clone(),
            line,
            reason,
        })?;
        let mut entries = Vec::with_capacity(rows.len());
        let mut segments = Vec::with_capacity(rows.len());
        let mut missing = 0;
        for row in rows {
            match row.locate(&base, &classes) {
                Some((file, segment)) => {
                    entries.push(Entry {
                        path: file,
                        label: row.label,
                    });
                    segments.push(segment);
                }
                None => missing += 1,
            }
        }
        if entries.is_empty() {
            return Err(Error::EmptyDataset {
                path,
                what: "videos found for the CSV's rows",
            });
        }
        if missing > 0 {
            tracing::warn!(
                "{}: {missing} of {} listed videos are not under {} and are left out",
                path.display(),
                missing + entries.len(),
                base.display()
            );
        }
        Ok(Self {
            listing: Listing::of_files(path, entries, classes),
            segments,
            missing,
        })
    }

    /// Rows left out because their video is not there.
    pub fn missing(&self) -> usize {
        self.missing
    }

    /// Parses a CSV file's bytes (no file is looked for): the number of rows and of classes.
    /// Never panics, whatever the bytes (fuzzed: `fuzz/fuzz_targets/video_manifest.rs`).
    ///
    /// # Errors
    /// The 1-based line of the first malformed row (1 for the header) and the reason.
    pub fn parse(text: &[u8]) -> Result<(usize, usize), (usize, String)> {
        parse(text).map(|(rows, classes)| (rows.len(), classes.len()))
    }
}

impl Source for VideoManifest {
    fn listing(&self) -> &Listing {
        &self.listing
    }

    fn segment(&self, index: usize) -> Option<(f64, f64)> {
        self.segments[index]
    }
}

/// One row, parsed.
struct Row {
    video: Video,
    label: i64,
    class: Option<String>,
    times: Option<(f64, f64)>,
}

enum Video {
    Path(PathBuf),
    YouTube(String),
}

impl Row {
    /// The row's file and the segment to cut it to.
    fn locate(&self, base: &Path, classes: &[String]) -> Option<(PathBuf, Option<(f64, f64)>)> {
        match &self.video {
            Video::Path(p) => Some((base.join(p), self.times)),
            Video::YouTube(id) => {
                let class = self.class.clone().or_else(|| {
                    usize::try_from(self.label)
                        .ok()
                        .and_then(|l| classes.get(l).cloned())
                });
                let dirs: Vec<PathBuf> = class
                    .iter()
                    .map(|c| base.join(c))
                    .chain([base.to_path_buf()])
                    .collect();
                if let Some((s, e)) = self.times {
                    let trimmed = format!("{id}_{:06}_{:06}.mp4", s as i64, e as i64);
                    if let Some(f) = dirs.iter().map(|d| d.join(&trimmed)).find(|f| f.is_file()) {
                        return Some((f, None));
                    }
                }
                let whole = format!("{id}.mp4");
                dirs.iter()
                    .map(|d| d.join(&whole))
                    .find(|f| f.is_file())
                    .map(|f| (f, self.times))
            }
        }
    }
}

/// The rows and the class names (empty when the labels are integers). On failure, the 1-based
/// line and the reason.
fn parse(text: &[u8]) -> Result<(Vec<Row>, Vec<String>), (usize, String)> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .flexible(false)
        .from_reader(text);
    let header = reader
        .headers()
        .map_err(|e| (1, format!("the header row does not parse: {e}")))?
        .clone();
    let column = |names: &[&str]| {
        header
            .iter()
            .position(|h| names.iter().any(|n| h.eq_ignore_ascii_case(n)))
    };
    let path = column(&["path", "video", "filename"]);
    let youtube = column(&["youtube_id"]);
    let label = column(&["label"]).ok_or((1, "no `label` column".to_string()))?;
    let start = column(&["time_start", "start"]);
    let end = column(&["time_end", "end"]);
    if path.is_none() && youtube.is_none() {
        return Err((1, "no `path` or `youtube_id` column".into()));
    }
    let mut raw = Vec::new();
    for record in reader.records() {
        // The file's line (a quoted field may hold line breaks), as the csv reader counts it.
        let record = record.map_err(|e| {
            let line = e.position().map_or(0, |p| p.line() as usize);
            (line.max(1), format!("the row does not parse: {e}"))
        })?;
        let line = record.position().map_or(1, |p| p.line() as usize).max(1);
        let field = |i: usize| record.get(i).unwrap_or("");
        let video = match (path, youtube) {
            (Some(p), _) if !field(p).is_empty() => Video::Path(PathBuf::from(field(p))),
            (_, Some(y)) if !field(y).is_empty() => Video::YouTube(field(y).to_string()),
            _ => return Err((line, "no path or youtube_id".into())),
        };
        let seconds = |i: Option<usize>, what: &str| -> Result<Option<f64>, (usize, String)> {
            match i.map(field) {
                None | Some("") => Ok(None),
                Some(v) => v
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .map(Some)
                    .ok_or((line, format!("{what} {v:?} is not a time in seconds"))),
            }
        };
        let times = match (seconds(start, "start")?, seconds(end, "end")?) {
            (Some(s), Some(e)) if e > s => Some((s, e)),
            (Some(s), Some(e)) => {
                return Err((line, format!("the segment [{s}, {e}) is empty")));
            }
            (None, None) => None,
            _ => {
                return Err((
                    line,
                    "a start without an end, or an end without a start".into(),
                ))
            }
        };
        raw.push((video, field(label).to_string(), times, line));
    }
    // Integer labels as they are; otherwise class names, sorted.
    let numeric = raw.iter().all(|(_, l, _, _)| l.parse::<i64>().is_ok());
    let mut classes: Vec<String> = Vec::new();
    if !numeric {
        classes = raw.iter().map(|(_, l, _, _)| l.clone()).collect();
        classes.sort();
        classes.dedup();
    }
    let rows = raw
        .into_iter()
        .map(|(video, l, times, line)| {
            if l.is_empty() {
                return Err((line, "an empty label".to_string()));
            }
            let (label, class) = if numeric {
                (l.parse::<i64>().expect("checked"), None)
            } else {
                let at = classes.binary_search(&l).expect("listed") as i64;
                (at, Some(l))
            };
            Ok(Row {
                video,
                label,
                class,
                times,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((rows, classes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("hpuload-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn kinetics_annotations_find_trimmed_clips_whole_videos_and_leave_out_missing_ones() {
        let dir = folder("kinetics-csv");
        std::fs::create_dir_all(dir.join("abseiling")).unwrap();
        std::fs::write(dir.join("abseiling/aaa_000010_000020.mp4"), b"x").unwrap();
        std::fs::write(dir.join("bbb.mp4"), b"x").unwrap();
        std::fs::write(
            dir.join("train.csv"),
            "label,youtube_id,time_start,time_end,split,is_cc\n\
             abseiling,aaa,10,20,train,0\n\
             \"zumba, dancing\",bbb,3,13,train,0\n\
             abseiling,ccc,0,10,train,0\n",
        )
        .unwrap();
        let m = VideoManifest::open(dir.join("train.csv"), None).unwrap();
        assert_eq!(m.classes(), ["abseiling", "zumba, dancing"]);
        assert_eq!(m.missing(), 1);
        let e = m.entries();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].path, dir.join("abseiling/aaa_000010_000020.mp4"));
        assert_eq!(
            (e[0].label, m.segment(0)),
            (0, None),
            "a trimmed clip is whole"
        );
        assert_eq!(e[1].path, dir.join("bbb.mp4"));
        assert_eq!((e[1].label, m.segment(1)), (1, Some((3.0, 13.0))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn paths_with_integer_labels_and_segments_and_the_rows_errors_by_line() {
        let (rows, classes) = parse(b"path,label,start,end\na.mp4,3,,\nb.mp4,0,1.5,4\n").unwrap();
        assert!(classes.is_empty());
        assert_eq!(rows[0].label, 3);
        assert_eq!(rows[0].times, None);
        assert_eq!(rows[1].times, Some((1.5, 4.0)));
        for (text, line, why) in [
            (&b"path,start\na.mp4,1\n"[..], 1, "no `label`"),
            (b"label,start\n1,2\n", 1, "no `path` or `youtube_id`"),
            (b"path,label,start,end\na.mp4,1,5,2\n", 2, "is empty"),
            (b"path,label,start,end\na.mp4,1,x,2\n", 2, "not a time"),
            (b"path,label,start\na.mp4,1,2\n", 2, "without an end"),
            (b"path,label\na.mp4,1\nb.mp4\n", 3, "does not parse"),
            (b"path,label\na.mp4,\n", 2, "empty label"),
        ] {
            let Err((at, reason)) = parse(text) else {
                panic!("{}", String::from_utf8_lossy(text))
            };
            assert_eq!(at, line, "{reason}");
            assert!(reason.contains(why), "{reason}");
        }
    }
}
