//! The annotation file's streaming parse: each record of `images`, `annotations` and
//! `categories` is read field by field into a small struct, and everything else
//! (segmentation polygons, `info`, `licenses`) is skipped without being built. Errors name the
//! record and the field (`annotations[17].bbox`), with serde_json's line and column.

use std::cell::Cell;
use std::fmt;
use std::path::Path;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

pub(super) struct ImageRecord {
    /// Position in `images`.
    pub(super) at: usize,
    pub(super) id: i64,
    pub(super) file_name: String,
    pub(super) width: u32,
    pub(super) height: u32,
}

pub(super) struct AnnotationRecord {
    pub(super) at: usize,
    pub(super) image_id: i64,
    pub(super) category_id: i64,
    pub(super) bbox: [f32; 4],
    /// The file writes all four numbers of `bbox` as integers (`[10, 20, 30, 40]`, not
    /// `[10.0, ...]`): Python's `json` then loads ints, and torchvision's v2 wrapper makes the
    /// boxes of an image whose every box is so an int64 tensor.
    pub(super) integer_bbox: bool,
    pub(super) iscrowd: u8,
    pub(super) area: f32,
}

pub(super) struct Category {
    pub(super) id: i64,
    pub(super) name: String,
}

pub(super) struct Parsed {
    pub(super) images_in: Vec<ImageRecord>,
    pub(super) annotations: Vec<AnnotationRecord>,
    pub(super) categories: Vec<Category>,
}

/// Where the parse is: the record and field, for messages.
#[derive(Clone, Copy, Default)]
struct At {
    array: &'static str,
    index: Option<usize>,
    field: &'static str,
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.array.is_empty() {
            return f.write_str("the top level");
        }
        f.write_str(self.array)?;
        if let Some(i) = self.index {
            write!(f, "[{i}]")?;
        }
        if !self.field.is_empty() {
            write!(f, ".{}", self.field)?;
        }
        Ok(())
    }
}

/// Why the annotation file does not parse: where (the record and field) and serde_json's
/// message (with its line and column).
#[derive(Debug, thiserror::Error)]
pub(crate) enum JsonError {
    /// The file ends inside a record.
    #[error("the file ends inside {at} (truncated?): {source}")]
    Truncated {
        at: String,
        #[source]
        source: serde_json::Error,
    },
    /// A record or field is not what COCO says.
    #[error("{at}: {source}")]
    Invalid {
        at: String,
        #[source]
        source: serde_json::Error,
    },
}

pub(super) fn parse(json: &[u8]) -> Result<Parsed, JsonError> {
    let at = Cell::new(At::default());
    let mut de = serde_json::Deserializer::from_slice(json);
    let parsed = (Top { at: &at })
        .deserialize(&mut de)
        .and_then(|p| de.end().map(|()| p));
    parsed.map_err(|source| {
        let at = at.get().to_string();
        match source.classify() {
            serde_json::error::Category::Eof => JsonError::Truncated { at, source },
            _ => JsonError::Invalid { at, source },
        }
    })
}

struct Top<'c> {
    at: &'c Cell<At>,
}

impl<'de> DeserializeSeed<'de> for Top<'_> {
    type Value = Parsed;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Parsed, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = Parsed;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a COCO annotation object with `images` and `annotations`")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parsed, A::Error> {
        let (mut images, mut annotations, mut categories) = (None, None, Vec::new());
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_str() {
                "images" => {
                    self.at.set(At {
                        array: "images",
                        ..At::default()
                    });
                    images = Some(map.next_value_seed(Records {
                        at: self.at,
                        array: "images",
                        record: ImageFn,
                    })?);
                }
                "annotations" => {
                    self.at.set(At {
                        array: "annotations",
                        ..At::default()
                    });
                    annotations = Some(map.next_value_seed(Records {
                        at: self.at,
                        array: "annotations",
                        record: AnnotationFn,
                    })?);
                }
                "categories" => {
                    self.at.set(At {
                        array: "categories",
                        ..At::default()
                    });
                    categories = map.next_value_seed(Records {
                        at: self.at,
                        array: "categories",
                        record: CategoryFn,
                    })?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            self.at.set(At::default());
        }
        let images = images.ok_or_else(|| de::Error::missing_field("images"))?;
        // A file of images alone (a test split) has no `annotations`.
        Ok(Parsed {
            images_in: images,
            annotations: annotations.unwrap_or_default(),
            categories,
        })
    }
}

/// A key, borrowed from the file where it has no escapes.
struct Key<'de>(std::borrow::Cow<'de, str>);

impl Key<'_> {
    fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(v.into()))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(v.to_owned().into()))
            }
        }
        d.deserialize_str(V)
    }
}

/// An array of records, each read by `record`.
struct Records<'c, F> {
    at: &'c Cell<At>,
    array: &'static str,
    record: F,
}

impl<'de, F: RecordFn<'de>> DeserializeSeed<'de> for Records<'_, F> {
    type Value = Vec<F::Out>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Vec<F::Out>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, F: RecordFn<'de>> Visitor<'de> for Records<'_, F> {
    type Value = Vec<F::Out>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an array of {} records", self.array)
    }
    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Vec<F::Out>, S::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        loop {
            let index = out.len();
            self.at.set(At {
                array: self.array,
                index: Some(index),
                field: "",
            });
            let one = Record {
                at: self.at,
                index,
                record: self.record,
            };
            match seq.next_element_seed(one)? {
                Some(v) => out.push(v),
                None => break,
            }
        }
        Ok(out)
    }
}

/// Something that reads one record from its map (the three record readers below).
trait RecordFn<'de>: Copy {
    type Out;
    fn read<A: MapAccess<'de>>(
        self,
        map: &mut A,
        at: &Cell<At>,
        index: usize,
    ) -> Result<Self::Out, A::Error>;
}

#[derive(Clone, Copy)]
struct ImageFn;
#[derive(Clone, Copy)]
struct AnnotationFn;
#[derive(Clone, Copy)]
struct CategoryFn;

struct Record<'c, F> {
    at: &'c Cell<At>,
    index: usize,
    record: F,
}

impl<'de, F: RecordFn<'de>> DeserializeSeed<'de> for Record<'_, F> {
    type Value = F::Out;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<F::Out, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, F: RecordFn<'de>> Visitor<'de> for Record<'_, F> {
    type Value = F::Out;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<F::Out, A::Error> {
        self.record.read(&mut map, self.at, self.index)
    }
}

/// Reads the value of `field` as `T`, after noting where the parse is.
fn value<'de, A: MapAccess<'de>, T: de::Deserialize<'de>>(
    map: &mut A,
    at: &Cell<At>,
    field: &'static str,
) -> Result<T, A::Error> {
    let mut now = at.get();
    now.field = field;
    at.set(now);
    map.next_value()
}

/// A JSON number, and whether the file wrote it as an integer (no fraction, no exponent).
#[derive(Clone, Copy)]
struct Number {
    value: f64,
    integer: bool,
}

impl<'de> de::Deserialize<'de> for Number {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Number;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Number, E> {
                Ok(Number {
                    value: v as f64,
                    integer: true,
                })
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Number, E> {
                Ok(Number {
                    value: v as f64,
                    integer: true,
                })
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Number, E> {
                Ok(Number {
                    value: v,
                    integer: false,
                })
            }
        }
        d.deserialize_any(V)
    }
}

fn missing<E: de::Error>(at: &Cell<At>, field: &'static str) -> E {
    let mut now = at.get();
    now.field = "";
    at.set(now);
    E::custom(format_args!("the record has no `{field}`"))
}

impl<'de> RecordFn<'de> for ImageFn {
    type Out = ImageRecord;
    fn read<A: MapAccess<'de>>(
        self,
        map: &mut A,
        at: &Cell<At>,
        index: usize,
    ) -> Result<ImageRecord, A::Error> {
        let (mut id, mut file_name, mut width, mut height) = (None, None, 0, 0);
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_str() {
                "id" => id = Some(value::<A, i64>(map, at, "id")?),
                "file_name" => file_name = Some(value::<A, String>(map, at, "file_name")?),
                "width" => width = value::<A, u32>(map, at, "width")?,
                "height" => height = value::<A, u32>(map, at, "height")?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let id = id.ok_or_else(|| missing(at, "id"))?;
        let file_name: String = file_name.ok_or_else(|| missing(at, "file_name"))?;
        let inside = Path::new(&file_name)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if file_name.is_empty() || !inside {
            let mut now = at.get();
            now.field = "file_name";
            at.set(now);
            return Err(de::Error::custom(format_args!(
                "{file_name:?} is not a path inside the image folder"
            )));
        }
        Ok(ImageRecord {
            at: index,
            id,
            file_name,
            width,
            height,
        })
    }
}

impl<'de> RecordFn<'de> for AnnotationFn {
    type Out = AnnotationRecord;
    fn read<A: MapAccess<'de>>(
        self,
        map: &mut A,
        at: &Cell<At>,
        index: usize,
    ) -> Result<AnnotationRecord, A::Error> {
        let (mut image_id, mut category_id, mut bbox) = (None, None, None);
        let mut integer_bbox = false;
        let (mut iscrowd, mut area) = (0u8, 0f32);
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_str() {
                "image_id" => image_id = Some(value::<A, i64>(map, at, "image_id")?),
                "category_id" => category_id = Some(value::<A, i64>(map, at, "category_id")?),
                "bbox" => {
                    let b = value::<A, [Number; 4]>(map, at, "bbox")?;
                    let b4 = b.map(|n| n.value);
                    if b4.iter().any(|v| !v.is_finite()) {
                        return Err(de::Error::custom(format_args!(
                            "{b4:?} is not four finite numbers"
                        )));
                    }
                    integer_bbox = b.iter().all(|n| n.integer);
                    // torchvision holds boxes in float32 (or int64, for integers).
                    bbox = Some(b4.map(|v| v as f32));
                }
                "iscrowd" => iscrowd = value::<A, u8>(map, at, "iscrowd")?,
                "area" => area = value::<A, f64>(map, at, "area")? as f32,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(AnnotationRecord {
            at: index,
            image_id: image_id.ok_or_else(|| missing(at, "image_id"))?,
            category_id: category_id.ok_or_else(|| missing(at, "category_id"))?,
            bbox: bbox.ok_or_else(|| missing(at, "bbox"))?,
            integer_bbox,
            iscrowd,
            area,
        })
    }
}

impl<'de> RecordFn<'de> for CategoryFn {
    type Out = Category;
    fn read<A: MapAccess<'de>>(
        self,
        map: &mut A,
        at: &Cell<At>,
        _index: usize,
    ) -> Result<Category, A::Error> {
        let (mut id, mut name) = (None, String::new());
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_str() {
                "id" => id = Some(value::<A, i64>(map, at, "id")?),
                "name" => name = value::<A, String>(map, at, "name")?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Category {
            id: id.ok_or_else(|| missing(at, "id"))?,
            name,
        })
    }
}
