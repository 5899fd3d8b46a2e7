//! Hugging Face `datasets` tables stored as Arrow IPC streams: a `save_to_disk` folder
//! (`data-00000-of-00002.arrow`, ..., with `state.json` listing them) or the Arrow files of the
//! `datasets` cache (what `Dataset.cache_files` names).
//!
//! Opening scans each file's record batches once through a read-only map: only the schema, the
//! batches' metadata and the image column's offsets are touched, not the images. An embedded
//! image's bytes lie uncompressed and contiguous in the file (the IPC format's value buffer),
//! so the scan keeps, per row, the file, offset and length of its bytes, and a read is then one
//! positioned read, straight into the loader's slot, as for a tar shard. A row whose `bytes`
//! is null reads the file at its `path`.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_buffer::Buffer;
use arrow_ipc::reader::StreamDecoder;

use super::hf::{self, ColumnChoice, HfColumns, ImageCell, ImageColumn, TableError};
use super::pattern::expand_braces;
use super::shards::read_member;
use super::{read_file, read_file_into, Entry, Listing, ReadMode, SampleBytes, Source};
use crate::Error;

/// How a `datasets` table is opened.
#[derive(Clone, Debug, Default)]
pub struct HfOptions {
    /// Which columns hold the image and the label.
    pub columns: ColumnChoice,
    /// The table's rows the dataset consists of, in order (a `datasets` indices mapping, as
    /// `select`, `shuffle` and `train_test_split` leave it); `None`: every row.
    pub rows: Option<Vec<u64>>,
}

/// A `datasets` table in Arrow IPC stream files, read by row.
#[derive(Debug)]
pub struct ArrowDataset {
    listing: Listing,
    rows: Vec<Row>,
    files: Vec<PathBuf>,
}

/// Where one row's image is, or why it has none.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Row {
    Embedded { file: u32, offset: u64, len: u64 },
    External,
    Missing(TableError),
}

/// One row as the scan found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScannedRow {
    /// Where its image is: embedded bytes at `(offset, len)` of the file, a path, or why there
    /// is none.
    pub image: Result<ImageAt, TableError>,
    /// Its label, or why there is none.
    pub label: Result<i64, TableError>,
}

/// Why an Arrow IPC stream file cannot be scanned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScanError {
    /// arrow-ipc cannot decode the stream from `at`.
    #[error("not a readable Arrow IPC stream at byte {at}: {message}")]
    Stream {
        /// Where the message that failed starts.
        at: usize,
        /// arrow-ipc's message.
        message: String,
    },
    /// A record batch's image column is not what the schema says.
    #[error("record batch {batch}: {source}")]
    InBatch {
        /// The record batch.
        batch: usize,
        /// What is wrong with it.
        #[source]
        source: TableError,
    },
    /// The image bytes are not in the file as written (a compressed body).
    #[error("record batch {batch}: its image bytes are compressed; only uncompressed Arrow IPC (what `datasets` writes) is read")]
    Compressed {
        /// The record batch.
        batch: usize,
    },
    /// The file ends inside a message.
    #[error(
        "the file is truncated: it ends inside a message after record batch {batch} ({message})"
    )]
    Truncated {
        /// The last whole record batch.
        batch: usize,
        /// arrow-ipc's message.
        message: String,
    },
    /// No schema message: not an Arrow IPC stream.
    #[error("no schema: the file is not an Arrow IPC stream")]
    NoSchema,
    /// The table's columns.
    #[error(transparent)]
    Table(#[from] TableError),
}

/// Where a row's image is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageAt {
    /// Embedded: `len` bytes at `offset` of the Arrow file.
    Bytes {
        /// Offset in the file.
        offset: u64,
        /// Length in bytes.
        len: u64,
    },
    /// The file at this path.
    Path(PathBuf),
}

impl ArrowDataset {
    /// Opens `spec`: a `save_to_disk` folder, one `.arrow` file, or a brace pattern of them
    /// (`data-{00000..00003}-of-00004.arrow`).
    ///
    /// # Errors
    /// No Arrow files, a file that is not an Arrow IPC stream or is cut short (naming it and
    /// the record batch), no image or label column, files whose columns differ, a row in
    /// `options.rows` past the table's end, or no rows at all.
    pub fn open(spec: &str, options: &HfOptions) -> Result<Self, Error> {
        let files = arrow_files(spec)?;
        Self::open_files(files, options)
    }

    /// Opens these Arrow files, in this order, as one table (as `Dataset.cache_files` lists
    /// them).
    ///
    /// # Errors
    /// As [`ArrowDataset::open`].
    pub fn open_files(files: Vec<PathBuf>, options: &HfOptions) -> Result<Self, Error> {
        if u32::try_from(files.len()).is_err() {
            return Err(Error::config("data", "more than 2^32 Arrow files"));
        }
        let origin = files.first().cloned().unwrap_or_default();
        let (mut all, mut names, mut classes) = (Vec::new(), Vec::new(), None);
        for (f, path) in files.iter().enumerate() {
            let (found, scanned) = scan_file(path, &options.columns)?;
            let classes = classes.get_or_insert_with(|| found.classes.clone());
            if found.classes != *classes {
                return Err(Error::config(
                    "data",
                    format!(
                        "{}: its class names differ from those of {}",
                        path.display(),
                        origin.display()
                    ),
                ));
            }
            for (r, row) in scanned.into_iter().enumerate() {
                names.push((f as u32, r));
                all.push(row);
            }
        }
        let picked: Vec<usize> = match &options.rows {
            None => (0..all.len()).collect(),
            Some(rows) => rows
                .iter()
                .map(|&r| {
                    usize::try_from(r)
                        .ok()
                        .filter(|&r| r < all.len())
                        .ok_or_else(|| {
                            Error::config(
                                "rows",
                                format!("row {r} is past the table's {} rows", all.len()),
                            )
                        })
                })
                .collect::<Result<_, _>>()?,
        };
        let (mut entries, mut rows) = (Vec::with_capacity(picked.len()), Vec::new());
        for i in picked {
            let (file, r) = names[i];
            let ScannedRow { image, label } = &all[i];
            let in_file = files[file as usize].join(format!("row {r}"));
            let (path, row) = match image {
                Ok(ImageAt::Bytes { offset, len }) => (
                    in_file,
                    Row::Embedded {
                        file,
                        offset: *offset,
                        len: *len,
                    },
                ),
                Ok(ImageAt::Path(p)) => (p.clone(), Row::External),
                Err(why) => (in_file, Row::Missing(why.clone())),
            };
            let (label, row) = match (label, row) {
                (Ok(l), row) => (*l, row),
                (Err(why), _) => (-1, Row::Missing(why.clone())),
            };
            entries.push(Entry { path, label });
            rows.push(row);
        }
        if entries.is_empty() {
            return Err(Error::EmptyDataset {
                path: origin,
                what: "rows in the Arrow files",
            });
        }
        Ok(Self {
            listing: Listing::of_records(origin, entries, classes.unwrap_or_default()),
            rows,
            files,
        })
    }

    /// The Arrow files, in order.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }
}

/// The Arrow files `spec` names: a folder's (in `state.json`'s order when there is one, else
/// every `*.arrow` file sorted), one file, or a brace pattern.
fn arrow_files(spec: &str) -> Result<Vec<PathBuf>, Error> {
    let dir = Path::new(spec);
    if !dir.is_dir() {
        return expand_braces(spec)
            .map(|n| n.into_iter().map(PathBuf::from).collect())
            .map_err(|reason| Error::config("data", format!("pattern {spec:?}: {reason}")));
    }
    if let Ok(state) = std::fs::read(dir.join("state.json")) {
        let listed = serde_json::from_slice::<serde_json::Value>(&state)
            .ok()
            .and_then(|v| {
                v.get("_data_files")?
                    .as_array()?
                    .iter()
                    .map(|f| f.get("filename")?.as_str().map(|n| dir.join(n)))
                    .collect::<Option<Vec<_>>>()
            });
        return listed.ok_or_else(|| {
            Error::config(
                "data",
                format!(
                    "{}: no `_data_files` list of file names in it",
                    dir.join("state.json").display()
                ),
            )
        });
    }
    let files = super::files_in(dir, |p| p.extension().is_some_and(|e| e == "arrow"))?;
    if files.is_empty() {
        return Err(Error::EmptyDataset {
            path: dir.to_path_buf(),
            what: "Arrow files (*.arrow)",
        });
    }
    Ok(files)
}

/// Scans one Arrow IPC stream file: its columns, and where each row's image and label are.
///
/// # Errors
/// The file cannot be read, is not an Arrow IPC stream or ends inside a message, its columns
/// cannot be found, or its image buffers are compressed (not located in the file).
pub fn scan_file(
    path: &Path,
    choice: &ColumnChoice,
) -> Result<(HfColumns, Vec<ScannedRow>), Error> {
    let bad = |reason: String| Error::Format {
        path: path.to_path_buf(),
        reason,
    };
    let file = File::open(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if file.metadata().map(|m| m.len()).unwrap_or(0) == 0 {
        return Err(bad("the file is empty, not an Arrow IPC stream".into()));
    }
    // SAFETY: a read-only private map, used only during this scan; if another process
    // truncates the file meanwhile, touching the lost pages raises SIGBUS, as for
    // `ReadMode::Mmap`. Dataset files are not rewritten while a loader opens them.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let folder = path.parent().unwrap_or(Path::new("")).to_path_buf();
    let data = bytes::Bytes::from_owner(map);
    hf::guarded(|| scan_bytes(data, &folder, choice)).map_err(|e| bad(e.to_string()))
}

/// [`scan_file`] on the bytes of an Arrow IPC stream; external paths are relative to `folder`.
/// Reported offsets are offsets into `data`.
///
/// # Errors
/// As [`scan_file`], as a message.
pub fn scan_bytes(
    data: bytes::Bytes,
    folder: &Path,
    choice: &ColumnChoice,
) -> Result<(HfColumns, Vec<ScannedRow>), ScanError> {
    let base = data.as_ptr() as usize;
    let end = base + data.len();
    let mut buffer = Buffer::from(data);
    let mut decoder = StreamDecoder::new();
    let mut columns: Option<HfColumns> = None;
    let mut rows = Vec::new();
    let mut batch_no = 0usize;
    loop {
        let at = end - buffer.len() - base;
        let batch = match decoder.decode(&mut buffer) {
            Ok(Some(batch)) => batch,
            Ok(None) => break,
            Err(e) => {
                return Err(ScanError::Stream {
                    at,
                    message: e.to_string(),
                })
            }
        };
        let found = match &columns {
            Some(c) => c.clone(),
            None => {
                let c = hf::find_columns(&batch.schema(), choice)?;
                columns = Some(c.clone());
                c
            }
        };
        let image = ImageColumn::new(&batch, found.image).map_err(|source| ScanError::InBatch {
            batch: batch_no,
            source,
        })?;
        let labels = match found.label {
            Some(column) => hf::labels(&batch, column),
            None => vec![Ok(0); batch.num_rows()],
        };
        for (r, label) in labels.into_iter().enumerate() {
            let image = match image.cell(r) {
                ImageCell::Bytes(b) => {
                    let p = b.as_ptr() as usize;
                    if p < base || p + b.len() > end {
                        return Err(ScanError::Compressed { batch: batch_no });
                    }
                    Ok(ImageAt::Bytes {
                        offset: (p - base) as u64,
                        len: b.len() as u64,
                    })
                }
                ImageCell::Path(p) => Ok(ImageAt::Path(folder.join(p))),
                ImageCell::Null => Err(TableError::NullImage),
            };
            rows.push(ScannedRow { image, label });
        }
        batch_no += 1;
        if buffer.is_empty() {
            break;
        }
    }
    decoder.finish().map_err(|e| ScanError::Truncated {
        batch: batch_no,
        message: e.to_string(),
    })?;
    match columns {
        Some(c) => Ok((c, rows)),
        None => match decoder.schema() {
            Some(schema) => Ok((hf::find_columns(&schema, choice)?, rows)),
            None => Err(ScanError::NoSchema),
        },
    }
}

impl Source for ArrowDataset {
    fn listing(&self) -> &Listing {
        &self.listing
    }

    fn read<'a>(
        &self,
        index: usize,
        mode: ReadMode,
        buf: &'a mut Vec<u8>,
    ) -> std::io::Result<SampleBytes<'a>> {
        match &self.rows[index] {
            &Row::Embedded { file, offset, len } => {
                let n = usize::try_from(len).map_err(std::io::Error::other)?;
                buf.clear();
                buf.resize(n, 0);
                read_member(&self.files[file as usize], offset, buf, "Arrow file")?;
                Ok(SampleBytes::Buffer(buf))
            }
            Row::External => read_file(&self.listing.entries[index].path, mode, buf),
            Row::Missing(why) => Err(missing(why)),
        }
    }

    fn read_into(
        &self,
        index: usize,
        mode: ReadMode,
        dst: &mut [u8],
    ) -> std::io::Result<Option<usize>> {
        match &self.rows[index] {
            &Row::Embedded { file, offset, len } => match usize::try_from(len) {
                Ok(n) if n <= dst.len() => {
                    read_member(
                        &self.files[file as usize],
                        offset,
                        &mut dst[..n],
                        "Arrow file",
                    )?;
                    Ok(Some(n))
                }
                _ => Ok(None),
            },
            Row::External if mode == ReadMode::Read => {
                read_file_into(&self.listing.entries[index].path, dst)
            }
            Row::External => Ok(None),
            Row::Missing(why) => Err(missing(why)),
        }
    }
}

fn missing(why: &TableError) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, why.clone())
}

/// Whether `path` looks like a `save_to_disk` folder or Arrow files (for `--data`).
pub fn is_arrow_spec(spec: &str) -> bool {
    let path = Path::new(spec);
    if path.is_dir() {
        return path.join("state.json").is_file() && path.join("dataset_info.json").is_file()
            || std::fs::read_dir(path).is_ok_and(|mut d| {
                d.any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == "arrow")))
            });
    }
    spec.ends_with(".arrow")
}
