//! What Hugging Face `datasets` tables have in common, whether they are stored as Arrow IPC
//! streams (`save_to_disk`, the `datasets` cache) or as Parquet (the hub): which column holds
//! the image and which the label, the class names, and each row's image and label.
//!
//! `datasets` writes its features as JSON under the `huggingface` key of the schema's metadata
//! (`{"info": {"features": {"image": {"_type": "Image"}, "label": {"_type": "ClassLabel",
//! "names": [...]}}}}`). An `Image` column is a struct of `bytes` (the encoded file, or null)
//! and `path` (where the file is when `bytes` is null, as `load_dataset("imagefolder")` leaves
//! it); a `ClassLabel` column holds integers.

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch, StructArray};
use arrow_schema::{DataType, Schema};

/// The columns of a table that the loader reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HfColumns {
    /// The image column's position among the schema's fields.
    pub image: usize,
    /// The label column's position; None for a table read without labels
    /// (`ColumnChoice::unlabelled`), whose rows all get label 0.
    pub label: Option<usize>,
    /// Class names by label (from a `ClassLabel` feature), or empty.
    pub classes: Vec<String>,
}

/// Which columns to read, when the schema's metadata does not say (or says otherwise).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ColumnChoice {
    /// The image column (default: the `Image` feature, else a column named `image`, `img`,
    /// `jpg` or `png`).
    pub image: Option<String>,
    /// The label column (default: the `ClassLabel` feature, else a column named `label`,
    /// `labels` or `cls`).
    pub label: Option<String>,
    /// Read the table without labels (a text-to-image table: an image and its captions):
    /// every row's label is 0, and `label` is not looked for.
    pub unlabelled: bool,
}

const IMAGE_NAMES: &[&str] = &["image", "img", "jpg", "jpeg", "png"];
const LABEL_NAMES: &[&str] = &["label", "labels", "cls", "class"];

/// Why a table's rows cannot be read as an image and a label (Arrow and Parquet tables).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TableError {
    /// The column the user named is not in the table.
    #[error("no column {name:?} (the columns: {columns})")]
    NoSuchColumn {
        /// The name given.
        name: String,
        /// The table's columns, comma-separated.
        columns: String,
    },
    /// No column is the image (or the label): no feature declares one, and none has a usual
    /// name.
    #[error("no {what} column: no {feature} feature and none named {names} (the columns: {columns}); name it")]
    NoColumn {
        /// `image` or `label`.
        what: &'static str,
        /// The `datasets` feature looked for.
        feature: &'static str,
        /// The usual names looked for, `/`-separated.
        names: String,
        /// The table's columns, comma-separated.
        columns: String,
    },
    /// The image column's type is not one `datasets` writes.
    #[error("column {name:?} holds {found}: {IMAGE_TYPES}")]
    ImageType {
        /// The column.
        name: String,
        /// Its Arrow type.
        found: String,
    },
    /// The image column's `Image` feature converts each image to another mode than RGB as
    /// `datasets` decodes it (`Image(mode="L")`), while the loader decodes every image to RGB.
    #[error("column {name:?} is an Image feature that converts each image to mode {mode} as datasets decodes it, while hpuload decodes images to RGB (cast the column to Image() to read them in colour)")]
    ImageMode {
        /// The column.
        name: String,
        /// The feature's mode.
        mode: String,
    },
    /// The label column does not hold integers.
    #[error("column {name:?} holds {found}, not integer labels")]
    LabelType {
        /// The column.
        name: String,
        /// Its Arrow type.
        found: String,
    },
    /// A row's label is null (or beyond `i64`).
    #[error("the label is null")]
    NullLabel,
    /// A row's image has neither bytes nor a path.
    #[error("the image is null (no bytes and no path)")]
    NullImage,
    /// The format's reader panicked on malformed bytes.
    #[error("malformed data: the decoder gave up ({0})")]
    DecoderGaveUp(String),
}

/// Finds the image and label columns of `schema`, as `choice` names them or as the
/// `huggingface` metadata declares them.
///
/// # Errors
/// A named column that is absent, no image or label column found, or a column of a type the
/// loader cannot read, each listing the table's columns.
pub fn find_columns(schema: &Schema, choice: &ColumnChoice) -> Result<HfColumns, TableError> {
    let features = schema
        .metadata()
        .get("huggingface")
        .and_then(|json| serde_json::from_str::<serde_json::Value>(json).ok())
        .and_then(|v| v.pointer("/info/features").cloned());
    let feature_type = |name: &str| {
        features
            .as_ref()
            .and_then(|f| f.get(name))
            .and_then(|f| f.get("_type"))
            .and_then(|t| t.as_str())
            .map(str::to_string)
    };
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let columns = || names.join(", ");
    let find =
        |named: &Option<String>, feature: &'static str, fallback: &[&str], what: &'static str| {
            if let Some(name) = named {
                return names.iter().position(|n| n == name).ok_or_else(|| {
                    TableError::NoSuchColumn {
                        name: name.clone(),
                        columns: columns(),
                    }
                });
            }
            names
                .iter()
                .position(|n| feature_type(n).as_deref() == Some(feature))
                .or_else(|| {
                    fallback
                        .iter()
                        .find_map(|f| names.iter().position(|n| n.eq_ignore_ascii_case(f)))
                })
                .ok_or_else(|| TableError::NoColumn {
                    what,
                    feature,
                    names: fallback.join("/"),
                    columns: columns(),
                })
        };
    let image = find(&choice.image, "Image", IMAGE_NAMES, "image")?;
    let mode = features
        .as_ref()
        .and_then(|f| f.get(names[image]))
        .filter(|f| f.get("_type").and_then(|t| t.as_str()) == Some("Image"))
        .and_then(|f| f.get("mode"))
        .and_then(|m| m.as_str());
    if let Some(mode) = mode.filter(|&m| m != "RGB") {
        return Err(TableError::ImageMode {
            name: names[image].into(),
            mode: mode.into(),
        });
    }
    image_kind(schema.field(image).data_type()).ok_or_else(|| TableError::ImageType {
        name: names[image].into(),
        found: schema.field(image).data_type().to_string(),
    })?;
    if choice.unlabelled {
        return Ok(HfColumns {
            image,
            label: None,
            classes: Vec::new(),
        });
    }
    let label = find(&choice.label, "ClassLabel", LABEL_NAMES, "label")?;
    if !schema.field(label).data_type().is_integer() {
        return Err(TableError::LabelType {
            name: names[label].into(),
            found: schema.field(label).data_type().to_string(),
        });
    }
    let classes = features
        .as_ref()
        .and_then(|f| f.get(names[label]))
        .and_then(|f| f.get("names"))
        .and_then(|n| n.as_array())
        .map(|n| {
            n.iter()
                .map(|s| s.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default();
    Ok(HfColumns {
        image,
        label: Some(label),
        classes,
    })
}

const IMAGE_TYPES: &str = "an image column is a struct of `bytes` (binary) and `path` (string), \
                           as datasets' Image feature writes it, or binary";

/// How an image column stores its images.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ImageKind {
    /// `struct<bytes: binary, path: string>` (either child may be absent).
    Struct,
    /// The encoded bytes themselves.
    Binary,
}

fn image_kind(t: &DataType) -> Option<ImageKind> {
    match t {
        DataType::Binary | DataType::LargeBinary => Some(ImageKind::Binary),
        DataType::Struct(fields) => {
            let typed = |name: &str, ok: fn(&DataType) -> bool| {
                fields
                    .iter()
                    .find(|f| f.name() == name)
                    .is_none_or(|f| ok(f.data_type()))
            };
            let has = |name: &str| fields.iter().any(|f| f.name() == name);
            let binary = |t: &DataType| matches!(t, DataType::Binary | DataType::LargeBinary);
            let string = |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8);
            ((has("bytes") || has("path")) && typed("bytes", binary) && typed("path", string))
                .then_some(ImageKind::Struct)
        }
        _ => None,
    }
}

/// One row's image: where its encoded bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageCell<'a> {
    /// Embedded in the table.
    Bytes(&'a [u8]),
    /// Not embedded: the file at this path (relative paths are relative to the table's
    /// folder).
    Path(&'a str),
    /// Neither (a null image, or a null `bytes` with a null `path`).
    Null,
}

/// The image cells of one column of a record batch.
pub struct ImageColumn {
    bytes: Option<ArrayRef>,
    paths: Option<ArrayRef>,
    nulls: Option<arrow_buffer::NullBuffer>,
}

impl ImageColumn {
    /// The image column `column` of `batch` (a column [`find_columns`] accepted).
    ///
    /// # Errors
    /// A column of another type than the schema said.
    pub fn new(batch: &RecordBatch, column: usize) -> Result<Self, TableError> {
        let array = batch.column(column);
        match image_kind(array.data_type()) {
            Some(ImageKind::Binary) => Ok(Self {
                bytes: Some(array.clone()),
                paths: None,
                nulls: None,
            }),
            Some(ImageKind::Struct) => {
                let s: &StructArray = array.as_struct();
                Ok(Self {
                    bytes: s.column_by_name("bytes").cloned(),
                    paths: s.column_by_name("path").cloned(),
                    nulls: s.nulls().cloned(),
                })
            }
            None => Err(TableError::ImageType {
                name: batch.schema().field(column).name().clone(),
                found: array.data_type().to_string(),
            }),
        }
    }

    /// Row `row`'s image.
    pub fn cell(&self, row: usize) -> ImageCell<'_> {
        if self.nulls.as_ref().is_some_and(|n| n.is_null(row)) {
            return ImageCell::Null;
        }
        if let Some(bytes) = self.bytes.as_deref().filter(|b| b.is_valid(row)) {
            let value = match bytes.data_type() {
                DataType::LargeBinary => bytes.as_binary::<i64>().value(row),
                _ => bytes.as_binary::<i32>().value(row),
            };
            return ImageCell::Bytes(value);
        }
        if let Some(paths) = self.paths.as_deref().filter(|p| p.is_valid(row)) {
            let value = match paths.data_type() {
                DataType::LargeUtf8 => paths.as_string::<i64>().value(row),
                _ => paths.as_string::<i32>().value(row),
            };
            return ImageCell::Path(value);
        }
        ImageCell::Null
    }
}

/// The labels of column `column` of `batch`: an integer each, or why there is none.
pub fn labels(batch: &RecordBatch, column: usize) -> Vec<Result<i64, TableError>> {
    let array = batch.column(column);
    let Some(cast) = arrow_cast_i64(array) else {
        let why = TableError::LabelType {
            name: batch.schema().field(column).name().clone(),
            found: array.data_type().to_string(),
        };
        return vec![Err(why); batch.num_rows()];
    };
    cast.into_iter()
        .map(|v| v.ok_or(TableError::NullLabel))
        .collect()
}

/// The integers of an integer column (`None` for a null or one beyond `i64`); `None` for a
/// column of another type.
fn arrow_cast_i64(array: &ArrayRef) -> Option<Vec<Option<i64>>> {
    use arrow_array::types::*;
    macro_rules! ints {
        ($($t:ty),*) => {
            match array.data_type() {
                $(d if d == &<$t as arrow_array::ArrowPrimitiveType>::DATA_TYPE => {
                    let a = array.as_primitive::<$t>();
                    Some((0..a.len())
                        .map(|i| {
                            a.is_valid(i).then(|| a.value(i)).and_then(|v| i64::try_from(v).ok())
                        })
                        .collect())
                })*
                _ => None,
            }
        };
    }
    ints!(Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type)
}

/// Runs third-party decoding of untrusted bytes (arrow-ipc, parquet) and turns a panic inside
/// it into an error: those crates assert on some malformed inputs (the `hf_tables` fuzz
/// target found a buffer length past the message body that arrow-ipc slices unchecked).
pub(crate) fn guarded<T, E: From<TableError>>(f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        Err(TableError::DecoderGaveUp(crate::hpu::panic_message(panic.as_ref())).into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{Field, Fields};
    use std::collections::HashMap;
    use std::sync::Arc;

    fn image_type() -> DataType {
        DataType::Struct(Fields::from(vec![
            Field::new("bytes", DataType::Binary, true),
            Field::new("path", DataType::Utf8, true),
        ]))
    }

    #[test]
    fn columns_and_class_names_come_from_the_huggingface_metadata() {
        let meta = r#"{"info": {"features": {"pic": {"_type": "Image"},
            "y": {"names": ["cat", "dog"], "_type": "ClassLabel"}}}}"#;
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("pic", image_type(), true),
            Field::new("y", DataType::Int64, true),
        ])
        .with_metadata(HashMap::from([("huggingface".into(), meta.into())]));
        let found = find_columns(&schema, &ColumnChoice::default()).unwrap();
        assert_eq!((found.image, found.label), (1, Some(2)));
        assert_eq!(found.classes, ["cat", "dog"]);
    }

    #[test]
    fn an_image_feature_converting_to_another_mode_than_rgb_is_refused_naming_it() {
        let table = |mode: &str| {
            let meta = format!(
                r#"{{"info": {{"features": {{"pic": {{"_type": "Image"{mode}}},
                "y": {{"_type": "ClassLabel", "names": ["a"]}}}}}}}}"#
            );
            Schema::new(vec![
                Field::new("pic", image_type(), true),
                Field::new("y", DataType::Int64, true),
            ])
            .with_metadata(HashMap::from([("huggingface".into(), meta)]))
        };
        let refused = find_columns(&table(r#", "mode": "L""#), &ColumnChoice::default());
        let Err(e @ TableError::ImageMode { .. }) = refused else {
            panic!("{refused:?}");
        };
        assert!(e.to_string().contains("\"pic\"") && e.to_string().contains("mode L"));
        for fine in ["", r#", "mode": "RGB""#, r#", "mode": null"#] {
            assert!(
                find_columns(&table(fine), &ColumnChoice::default()).is_ok(),
                "{fine}"
            );
        }
    }

    #[test]
    fn an_unlabelled_table_needs_no_label_column() {
        let schema = Schema::new(vec![
            Field::new("image", image_type(), true),
            Field::new("text", DataType::Utf8, true),
        ]);
        assert!(matches!(
            find_columns(&schema, &ColumnChoice::default()),
            Err(TableError::NoColumn { what: "label", .. })
        ));
        let choice = ColumnChoice {
            unlabelled: true,
            ..ColumnChoice::default()
        };
        let found = find_columns(&schema, &choice).unwrap();
        assert_eq!((found.image, found.label), (0, None));
    }

    #[test]
    fn without_metadata_columns_are_found_by_name_or_named_by_the_user() {
        let schema = Schema::new(vec![
            Field::new("image", image_type(), true),
            Field::new("label", DataType::Int32, true),
            Field::new("fine_label", DataType::Int32, true),
        ]);
        let found = find_columns(&schema, &ColumnChoice::default()).unwrap();
        assert_eq!((found.image, found.label), (0, Some(1)));
        let choice = ColumnChoice {
            label: Some("fine_label".into()),
            ..ColumnChoice::default()
        };
        assert_eq!(find_columns(&schema, &choice).unwrap().label, Some(2));
        let missing = ColumnChoice {
            label: Some("coarse".into()),
            ..ColumnChoice::default()
        };
        match find_columns(&schema, &missing).unwrap_err() {
            TableError::NoSuchColumn { name, columns } => {
                assert_eq!(name, "coarse");
                assert!(columns.contains("fine_label"), "{columns}");
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn a_column_of_the_wrong_type_is_refused_by_name() {
        let schema = Schema::new(vec![
            Field::new("image", DataType::Utf8, true),
            Field::new("label", DataType::Int64, true),
        ]);
        let why = find_columns(&schema, &ColumnChoice::default()).unwrap_err();
        assert!(
            matches!(&why, TableError::ImageType { name, .. } if name == "image"),
            "{why}"
        );
        let schema = Schema::new(vec![
            Field::new("image", DataType::Binary, true),
            Field::new("label", DataType::Utf8, true),
        ]);
        let why = find_columns(&schema, &ColumnChoice::default()).unwrap_err();
        assert!(why.to_string().contains("not integer labels"), "{why}");
    }

    #[test]
    fn image_cells_are_bytes_then_path_then_null() {
        use arrow_array::{BinaryArray, Int64Array, StringArray};
        let bytes = BinaryArray::from(vec![Some(&b"jpg"[..]), None, None]);
        let paths = StringArray::from(vec![Some("a.jpg"), Some("b.jpg"), None]);
        let image = StructArray::from(vec![
            (
                Arc::new(Field::new("bytes", DataType::Binary, true)),
                Arc::new(bytes) as ArrayRef,
            ),
            (
                Arc::new(Field::new("path", DataType::Utf8, true)),
                Arc::new(paths) as ArrayRef,
            ),
        ]);
        let labels_array = Int64Array::from(vec![Some(3), None, Some(1)]);
        let batch = RecordBatch::try_from_iter(vec![
            ("image", Arc::new(image) as ArrayRef),
            ("label", Arc::new(labels_array) as ArrayRef),
        ])
        .unwrap();
        let column = ImageColumn::new(&batch, 0).unwrap();
        assert_eq!(column.cell(0), ImageCell::Bytes(b"jpg"));
        assert_eq!(column.cell(1), ImageCell::Path("b.jpg"));
        assert_eq!(column.cell(2), ImageCell::Null);
        assert_eq!(
            labels(&batch, 1),
            [Ok(3), Err(TableError::NullLabel), Ok(1)]
        );
    }
}
