//! A row group's image column, read and decoded once per epoch: the byte range of its column
//! chunks (one ranged request for a remote file), parquet's column readers over it, and the
//! cache that keeps each decoded group until its last planned read.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

use arrow_array::RecordBatch;
use bytes::Bytes;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};
use parquet::arrow::ProjectionMask;
use parquet::column::reader::ColumnReader;
use parquet::data_type::ByteArray;
use parquet::errors::ParquetError;
use parquet::file::metadata::page_index::RowGroupPageIndex;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::ReaderProperties;
use parquet::file::reader::{ChunkReader, Length, RowGroupReader};
use parquet::file::serialized_reader::SerializedRowGroupReader;

use super::pages::{self, PageError};
use crate::source::hf::{ImageCell, TableError};

/// Why a Parquet row group (or the file it is in) cannot be read. Cloned to every reader
/// waiting on the same group.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GroupError {
    /// What went wrong inside row group `group`.
    #[error("row group {group}: {source}")]
    InGroup {
        group: usize,
        #[source]
        source: Box<GroupError>,
    },
    /// A column chunk's page headers claim what no real file holds.
    #[error("column chunk {column}: {source}")]
    Pages {
        column: usize,
        #[source]
        source: PageError,
    },
    /// The footer describes chunks that cannot be there.
    #[error("{0}")]
    Footer(String),
    /// What was decoded disagrees with the footer, or the image column has another type.
    #[error("{0}")]
    Inconsistent(String),
    /// parquet's readers refused the bytes (their message: their error is not `Clone`).
    #[error("{0}")]
    Parquet(String),
    /// The file could not be opened, mapped or fetched.
    #[error("{0}")]
    Io(String),
    /// The image or label columns (shared with Arrow tables).
    #[error(transparent)]
    Table(#[from] TableError),
}

impl GroupError {
    /// This error, inside row group `group`.
    pub(super) fn in_group(self, group: usize) -> Self {
        Self::InGroup {
            group,
            source: Box::new(self),
        }
    }
}

impl From<ParquetError> for GroupError {
    fn from(e: ParquetError) -> Self {
        Self::Parquet(e.to_string())
    }
}

impl From<arrow_schema::ArrowError> for GroupError {
    fn from(e: arrow_schema::ArrowError) -> Self {
        Self::Parquet(e.to_string())
    }
}

impl From<std::io::Error> for GroupError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e.to_string())
    }
}

impl From<std::num::TryFromIntError> for GroupError {
    fn from(e: std::num::TryFromIntError) -> Self {
        Self::Inconsistent(e.to_string())
    }
}

/// A decoded row group's image column.
pub(super) struct Decoded {
    /// The image's embedded bytes (the `bytes` leaf, or the column itself when it is binary).
    bytes: Leaf,
    /// Its `path` leaf, when it has one.
    paths: Option<Leaf>,
}

/// One leaf column of a row group: its non-null values (slices of the page buffers, so of the
/// file's map when the pages are not compressed) and, per row, which value is its own.
pub(super) struct Leaf {
    values: Vec<ByteArray>,
    at: Vec<Option<u32>>,
}

impl Leaf {
    pub(super) fn get(&self, row: usize) -> Option<&[u8]> {
        let i = (*self.at.get(row)?)?;
        Some(self.values[i as usize].data())
    }
}

impl Decoded {
    pub(super) fn cell(&self, row: usize) -> Result<ImageCell<'_>, GroupError> {
        if let Some(b) = self.bytes.get(row) {
            return Ok(ImageCell::Bytes(b));
        }
        match self.paths.as_ref().and_then(|p| p.get(row)) {
            Some(p) => std::str::from_utf8(p)
                .map(ImageCell::Path)
                .map_err(|_| GroupError::Inconsistent("the image's path is not UTF-8".into())),
            None => Ok(ImageCell::Null),
        }
    }
}

/// Reads the image column (root `image`) of row group `g` from `span` with parquet's column
/// readers: values of uncompressed pages stay slices of `span` (no copy), compressed pages are
/// decompressed once.
pub(super) fn read_images(
    span: Span,
    meta: &ParquetMetaData,
    g: usize,
    image: usize,
) -> Result<Decoded, GroupError> {
    let schema = meta.file_metadata().schema_descr();
    let group = meta.row_group(g);
    let rows = usize::try_from(group.num_rows())?;
    check_pages(&span, meta, g, image)?;
    let reader = SerializedRowGroupReader::new(
        Arc::new(span),
        group,
        RowGroupPageIndex::new(g, None),
        Arc::new(ReaderProperties::builder().build()),
    )?;
    let (mut bytes, mut paths) = (None, None);
    for leaf in 0..schema.num_columns() {
        if schema.get_column_root_idx(leaf) != image {
            continue;
        }
        let column = schema.column(leaf);
        let parts = column.path().parts();
        let is_path = parts.len() > 1 && parts[parts.len() - 1] == "path";
        let read = read_leaf(&reader, leaf, column.max_def_level(), rows)?;
        if is_path {
            paths = Some(read);
        } else if parts.len() == 1 || parts[parts.len() - 1] == "bytes" {
            bytes = Some(read);
        }
    }
    let bytes = bytes.unwrap_or(Leaf {
        values: Vec::new(),
        at: vec![None; rows],
    });
    Ok(Decoded { bytes, paths })
}

pub(super) fn read_leaf(
    reader: &SerializedRowGroupReader<'_, Span>,
    leaf: usize,
    max_def: i16,
    rows: usize,
) -> Result<Leaf, GroupError> {
    let column = reader.get_column_reader(leaf)?;
    let ColumnReader::ByteArrayColumnReader(mut column) = column else {
        return Err(GroupError::Inconsistent(
            "the image column is not binary".into(),
        ));
    };
    let (mut defs, mut values) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
    let mut done = 0;
    while done < rows {
        let (records, _, _) =
            column.read_records(rows - done, Some(&mut defs), None, &mut values)?;
        if records == 0 {
            break;
        }
        done += records;
    }
    if done != rows {
        return Err(GroupError::Inconsistent(format!(
            "{done} rows decoded, {rows} in the footer"
        )));
    }
    let at: Vec<Option<u32>> = if max_def == 0 {
        (0..rows as u32).map(Some).collect()
    } else {
        let mut next = 0u32;
        defs.iter()
            .map(|&d| {
                (d == max_def).then(|| {
                    next += 1;
                    next - 1
                })
            })
            .collect()
    };
    if values.len() != at.iter().flatten().count() {
        return Err(GroupError::Inconsistent(
            "the definition levels and values of the image column disagree".into(),
        ));
    }
    Ok(Leaf { values, at })
}

/// A row group, decoded once by the first reader that needs it (the others wait for it).
pub(super) type GroupSlot = OnceLock<Result<Arc<Decoded>, GroupError>>;

/// Decoded row groups, each kept until its last planned read of the epoch.
#[derive(Default)]
pub(super) struct GroupCache {
    state: Mutex<CacheState>,
}

#[derive(Default)]
pub(super) struct CacheState {
    slots: HashMap<u32, Arc<GroupSlot>>,
    /// Planned reads left this epoch, per row group.
    left: HashMap<u32, usize>,
    /// Groups read without a plan (or past it), most recent last; at most `UNPLANNED` kept.
    unplanned: VecDeque<u32>,
}

/// Row groups kept for reads outside the epoch's plan (a sequential reader such as
/// `make-shards`, replacements).
pub(super) const UNPLANNED: usize = 4;

impl GroupCache {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, CacheState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn slot(&self, g: u32) -> Arc<GroupSlot> {
        Arc::clone(self.lock().slots.entry(g).or_default())
    }

    /// Counts one read of group `g`; drops the group after its last planned read.
    pub(super) fn read_one(&self, g: u32) {
        let mut state = self.lock();
        match state.left.get_mut(&g) {
            Some(left) if *left > 1 => *left -= 1,
            Some(_) => {
                state.left.remove(&g);
                state.slots.remove(&g);
            }
            None => {
                state.unplanned.retain(|&u| u != g);
                state.unplanned.push_back(g);
                while state.unplanned.len() > UNPLANNED {
                    let old = state.unplanned.pop_front().expect("not empty");
                    if !state.left.contains_key(&old) {
                        state.slots.remove(&old);
                    }
                }
            }
        }
    }

    pub(super) fn plan(&self, left: HashMap<u32, usize>) {
        let mut state = self.lock();
        state.slots.clear();
        state.unplanned.clear();
        state.left = left;
    }
}

/// The byte range of `columns`' chunks in row group `g` (all their leaves), from the footer's
/// offsets and sizes (checked: `ColumnChunkMetaData::byte_range` panics on negative ones).
pub(super) fn chunk_range(
    meta: &ParquetMetaData,
    g: usize,
    columns: &[usize],
) -> Result<(u64, u64), GroupError> {
    let schema = meta.file_metadata().schema_descr();
    let group = &meta.row_groups()[g];
    let (mut lo, mut hi) = (u64::MAX, 0);
    for leaf in 0..schema.num_columns() {
        if columns.contains(&schema.get_column_root_idx(leaf)) {
            let Some(c) = group.columns().get(leaf) else {
                return Err(GroupError::Footer(format!(
                    "the footer lists no column chunk {leaf}"
                )));
            };
            let start = c.dictionary_page_offset().unwrap_or(c.data_page_offset());
            let (Ok(start), Ok(len)) = (u64::try_from(start), u64::try_from(c.compressed_size()))
            else {
                return Err(GroupError::Footer(format!(
                    "the footer gives column chunk {leaf} a negative offset or size"
                )));
            };
            lo = lo.min(start);
            hi = hi.max(start.saturating_add(len));
        }
    }
    Ok((lo.min(hi), hi))
}

/// Most rows a row group may claim: far above any real one (Hugging Face writes hundreds to
/// thousands), and low enough that a damaged footer cannot make the loader allocate
/// gigabytes for levels and entries.
pub(super) const MAX_GROUP_ROWS: usize = 1 << 24;

/// Checks the page headers of every leaf of root column `column` in row group `g` before
/// parquet reads them ([`pages::check_chunk`]): parquet allocates what a header claims before
/// it reads the page.
pub(super) fn check_pages(
    span: &Span,
    meta: &ParquetMetaData,
    g: usize,
    column: usize,
) -> Result<(), GroupError> {
    use parquet::basic::Type;
    let schema = meta.file_metadata().schema_descr();
    let group = meta.row_group(g);
    for leaf in 0..schema.num_columns() {
        if schema.get_column_root_idx(leaf) != column {
            continue;
        }
        let Some(chunk) = group.columns().get(leaf) else {
            return Err(GroupError::Footer(format!(
                "the footer lists no column chunk {leaf}"
            )));
        };
        // A dictionary's values are PLAIN: a byte array's take its 4-byte length at least.
        let width: u64 = match chunk.column_type() {
            Type::BOOLEAN => 0,
            Type::INT32 | Type::FLOAT | Type::BYTE_ARRAY => 4,
            Type::INT64 | Type::DOUBLE => 8,
            Type::INT96 => 12,
            Type::FIXED_LEN_BYTE_ARRAY => {
                u64::try_from(schema.column(leaf).type_length()).unwrap_or(0)
            }
        };
        // `chunk_range` checked the offsets and sizes when the file was opened.
        let (start, len) = chunk.byte_range();
        let bytes = span.get_bytes(start, usize::try_from(len)?)?;
        pages::check_chunk(&bytes, width).map_err(|source| GroupError::Pages {
            column: leaf,
            source,
        })?;
    }
    Ok(())
}

/// Reads column `column` (a root) of row group `g` from `input` as one record batch.
pub(super) fn read_group(
    input: Span,
    metadata: &ArrowReaderMetadata,
    g: usize,
    column: usize,
) -> Result<RecordBatch, GroupError> {
    let schema = metadata.metadata().file_metadata().schema_descr();
    let rows = usize::try_from(metadata.metadata().row_group(g).num_rows()).unwrap_or(0);
    check_pages(&input, metadata.metadata(), g, column)?;
    let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(input, metadata.clone())
        .with_projection(ProjectionMask::roots(schema, [column]))
        .with_row_groups(vec![g])
        .with_batch_size(rows.max(1))
        .build()?;
    let batches = reader.collect::<Result<Vec<_>, _>>()?;
    // One batch: the batch size is the group's row count.
    let Some(batch) = batches.into_iter().next() else {
        return Err(GroupError::Inconsistent("no rows decoded".into()));
    };
    if batch.num_rows() != rows {
        return Err(GroupError::Inconsistent(format!(
            "{} rows decoded, {rows} in the footer",
            batch.num_rows()
        )));
    }
    Ok(batch)
}

/// What a damaged footer is reported as.
pub(super) fn footer_error(e: &ParquetError) -> GroupError {
    GroupError::Footer(format!(
        "not a readable Parquet file (damaged or truncated footer): {e}"
    ))
}

/// A byte range of a Parquet file held in memory, read as the file.
#[derive(Clone)]
pub(super) struct Span {
    pub(super) start: u64,
    pub(super) bytes: Bytes,
}

impl Length for Span {
    fn len(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }
}

impl ChunkReader for Span {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        let len = self.len().saturating_sub(start);
        let len = usize::try_from(len).map_err(|e| ParquetError::External(Box::new(e)))?;
        Ok(bytes::Buf::reader(self.get_bytes(start, len)?))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let outside = || {
            ParquetError::General(format!(
                "bytes {start}..{} are outside the row group's columns ({}..{})",
                start + length as u64,
                self.start,
                self.len()
            ))
        };
        let from = start.checked_sub(self.start).ok_or_else(outside)?;
        let from = usize::try_from(from).map_err(|_| outside())?;
        let to = from.checked_add(length).ok_or_else(outside)?;
        if to > self.bytes.len() {
            return Err(outside());
        }
        Ok(self.bytes.slice(from..to))
    }
}
