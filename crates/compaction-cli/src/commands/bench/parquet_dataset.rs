//! Parquet datasets of trajectories for `bench`: one row a transcript, its messages in one column,
//! either JSON text or a list of structs (`{role, content, tool_calls, ...}`) turned into JSON.
//!
//! Read with the parquet crate's record API, one row group at a time and only the one column,
//! so that memory holds a row group's pages of that column and the row at hand, never the file.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use parquet::basic::{ConvertedType, LogicalType, Repetition, Type as Physical};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::reader::RowIter;
use parquet::record::{Field, Row};
use parquet::schema::types::Type;
use serde_json::{Map, Number, Value};

/// What a row's column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// JSON text: a whole trajectory, conversation or message list.
    Text,
    /// Structs (a list of them, or any nested value), written as JSON.
    Nested,
}

/// Reads the dataset at `path` row by row, calling `each` with the row's number (0 for the first)
/// and its transcript as JSON bytes, or why that row has none; `each` returns false to stop.
/// `column` names the column; without it, the sole column of message structs, else the sole
/// string column. An error (the file cannot be read, no or several columns fit, a page cannot
/// be decoded) names the file, and the row where reading stopped.
pub(super) fn rows(
    path: &Path,
    column: Option<&str>,
    mut each: impl FnMut(usize, Result<Vec<u8>, String>) -> bool,
) -> Result<(), String> {
    let name = path.display();
    let file = File::open(path).map_err(|e| format!("{name}: cannot read: {e}"))?;
    let reader =
        SerializedFileReader::new(file).map_err(|e| format!("{name}: not a readable Parquet file: {e}"))?;
    let root = reader.metadata().file_metadata().schema_descr().root_schema_ptr();
    let (field, kind) = choose(root.get_fields(), column).map_err(|e| format!("{name}: {e}"))?;
    let projection = Type::group_type_builder(root.name())
        .with_fields(vec![Arc::clone(field)])
        .build()
        .map_err(|e| format!("{name}: column {}: {e}", field.name()))?;
    let mut row = 0;
    for group in 0..reader.num_row_groups() {
        let at =
            |row: usize, e: parquet::errors::ParquetError| format!("{name}: row {row}: cannot read: {e}");
        let group = reader.get_row_group(group).map_err(|e| at(row, e))?;
        let iter =
            RowIter::from_row_group(Some(projection.clone()), group.as_ref()).map_err(|e| at(row, e))?;
        for read in iter {
            let read = read.map_err(|e| at(row, e))?;
            let transcript = transcript(&read, kind).map_err(|e| format!("{name}: row {row}: {e}"));
            if !each(row, transcript) {
                return Ok(());
            }
            row += 1;
        }
    }
    Ok(())
}

/// The column to read: the one named, or the one that looks like messages.
fn choose<'a>(fields: &'a [Arc<Type>], named: Option<&str>) -> Result<(&'a Arc<Type>, Kind), String> {
    let columns = || {
        let all: Vec<String> = fields.iter().map(|f| format!("{} ({})", f.name(), describe(f))).collect();
        if all.is_empty() {
            "none".to_owned()
        } else {
            all.join(", ")
        }
    };
    if let Some(named) = named {
        let Some(field) = fields.iter().find(|f| f.name() == named) else {
            return Err(format!("no column {named:?}; the columns: {}", columns()));
        };
        return match kind(field) {
            Some(kind) => Ok((field, kind)),
            None => Err(format!(
                "column {named:?} is {}, not JSON text or structs; the columns: {}",
                describe(field),
                columns()
            )),
        };
    }
    let structs: Vec<&Arc<Type>> = fields.iter().filter(|f| list_of_structs(f)).collect();
    let texts: Vec<&Arc<Type>> = fields.iter().filter(|f| is_text(f)).collect();
    match (structs.as_slice(), texts.as_slice()) {
        ([one], _) => Ok((one, Kind::Nested)),
        ([], [one]) => Ok((one, Kind::Text)),
        ([], []) => {
            Err(format!("no column of messages (JSON text or a list of structs); the columns: {}", columns()))
        }
        _ => Err(format!(
            "more than one column could hold the messages (name one with --column); the columns: {}",
            columns()
        )),
    }
}

/// How a column named with --column is read: text, or structs as JSON; `None` for a scalar
/// that is neither.
fn kind(field: &Type) -> Option<Kind> {
    if is_text(field) {
        Some(Kind::Text)
    } else if field.is_group() || field.get_basic_info().repetition() == Repetition::REPEATED {
        Some(Kind::Nested)
    } else {
        None
    }
}

/// A UTF-8 string (or JSON) column, not repeated.
fn is_text(field: &Type) -> bool {
    let info = field.get_basic_info();
    field.is_primitive()
        && field.get_physical_type() == Physical::BYTE_ARRAY
        && info.repetition() != Repetition::REPEATED
        && (matches!(info.logical_type_ref(), Some(LogicalType::String | LogicalType::Json))
            || matches!(info.converted_type(), ConvertedType::UTF8 | ConvertedType::JSON))
}

/// A list whose elements are structs: a LIST group (three levels, or the older two), or a
/// repeated group.
fn list_of_structs(field: &Type) -> bool {
    let info = field.get_basic_info();
    if !field.is_group() {
        return false;
    }
    if info.repetition() == Repetition::REPEATED {
        return true;
    }
    let list = matches!(info.logical_type_ref(), Some(LogicalType::List))
        || info.converted_type() == ConvertedType::LIST;
    let [repeated] = field.get_fields() else { return false };
    if !list || !repeated.is_group() {
        return false;
    }
    match repeated.get_fields() {
        // Three levels: `repeated group list { element }`.
        [element] => element.is_group(),
        // Two levels: the repeated group is the element.
        _ => true,
    }
}

/// A column's type in a few words, for errors.
fn describe(field: &Type) -> String {
    let info = field.get_basic_info();
    let repeated = if info.repetition() == Repetition::REPEATED { "repeated " } else { "" };
    if list_of_structs(field) {
        return "list of structs".into();
    }
    if field.is_group() {
        let list = matches!(info.logical_type_ref(), Some(LogicalType::List))
            || info.converted_type() == ConvertedType::LIST;
        let map = matches!(info.logical_type_ref(), Some(LogicalType::Map))
            || info.converted_type() == ConvertedType::MAP;
        return format!(
            "{repeated}{}",
            if list {
                "list"
            } else if map {
                "map"
            } else {
                "struct"
            }
        );
    }
    if is_text(field) {
        return "string".into();
    }
    match (field.get_physical_type(), info.logical_type_ref()) {
        (_, Some(logical)) => format!("{repeated}{logical:?}").to_lowercase(),
        (physical, None) => format!("{repeated}{physical}").to_lowercase(),
    }
}

/// One row's transcript as JSON bytes.
fn transcript(row: &Row, kind: Kind) -> Result<Vec<u8>, String> {
    let Some((column, field)) = row.get_column_iter().next() else {
        return Err("the row has no value".into());
    };
    match (kind, field) {
        (_, Field::Null) => Err(format!("column {column} is null")),
        (Kind::Text, Field::Str(text)) => Ok(text.clone().into_bytes()),
        (Kind::Text, other) => Err(format!("column {column} holds {}, not text", what(other))),
        (Kind::Nested, field) => {
            let value = json(field, column)?;
            serde_json::to_vec(&value).map_err(|e| format!("column {column}: {e}"))
        }
    }
}

/// A value as JSON: structs as objects with their fields' names, lists as arrays, nulls as null;
/// `at` is where it sits (`messages[3].content`), for the error a binary value gets.
fn json(field: &Field, at: &str) -> Result<Value, String> {
    let float = |f: f64| {
        Number::from_f64(f).map(Value::Number).ok_or_else(|| format!("{at}: {f} is not a JSON number"))
    };
    Ok(match field {
        Field::Null => Value::Null,
        Field::Bool(b) => Value::Bool(*b),
        Field::Byte(n) => Value::from(*n),
        Field::Short(n) => Value::from(*n),
        Field::Int(n) => Value::from(*n),
        Field::Long(n) => Value::from(*n),
        Field::UByte(n) => Value::from(*n),
        Field::UShort(n) => Value::from(*n),
        Field::UInt(n) => Value::from(*n),
        Field::ULong(n) => Value::from(*n),
        Field::Float16(f) => float(f64::from(f32::from(*f)))?,
        Field::Float(f) => float(f64::from(*f))?,
        Field::Double(f) => float(*f)?,
        Field::Str(s) => Value::String(s.clone()),
        Field::Bytes(_) => return Err(format!("{at} is binary, not text")),
        Field::Decimal(_)
        | Field::Date(_)
        | Field::TimeMillis(_)
        | Field::TimeMicros(_)
        | Field::TimestampMillis(_)
        | Field::TimestampMicros(_) => Value::String(field.to_string()),
        Field::Group(row) => {
            let mut object = Map::new();
            for (name, value) in row.get_column_iter() {
                object.insert(name.clone(), json(value, &format!("{at}.{name}"))?);
            }
            Value::Object(object)
        }
        Field::ListInternal(list) => Value::Array(
            list.elements()
                .iter()
                .enumerate()
                .map(|(k, v)| json(v, &format!("{at}[{k}]")))
                .collect::<Result<_, _>>()?,
        ),
        Field::MapInternal(map) => {
            let mut object = Map::new();
            for (key, value) in map.entries() {
                let Field::Str(key) = key else {
                    return Err(format!("{at}: a map whose keys are {}, not strings", what(key)));
                };
                object.insert(key.clone(), json(value, &format!("{at}.{key}"))?);
            }
            Value::Object(object)
        }
    })
}

/// A value's kind in a word, for errors.
fn what(field: &Field) -> &'static str {
    match field {
        Field::Null => "null",
        Field::Bool(_) => "a boolean",
        Field::Str(_) => "text",
        Field::Bytes(_) => "binary",
        Field::Group(_) => "a struct",
        Field::ListInternal(_) => "a list",
        Field::MapInternal(_) => "a map",
        _ => "a number",
    }
}
