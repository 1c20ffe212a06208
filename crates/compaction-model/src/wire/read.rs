//! Reading a message from a `Value`: every shape `ChatMessage.from_dict` reads, and the errors
//! that name the message and the field.

use super::*;

pub(super) struct Reader {
    pub(super) index: usize,
}

/// An image part from its object, as [`Message::from_value`] reads one (checked, its MIME type
/// guessed when missing); `None` when that reading fails.
pub(crate) fn image_part(data: JsonObject) -> Option<ImagePart> {
    Reader { index: 0 }.image(data, "image").ok()
}

/// A file part from its object, as [`Message::from_value`] reads one; `None` when that fails.
pub(crate) fn file_part(data: JsonObject) -> Option<FilePart> {
    Reader { index: 0 }.file(data, "file").ok()
}

impl Reader {
    pub(super) fn wrong(&self, field: &str, expected: &'static str, found: &Value) -> Error {
        Error::WrongType { index: self.index, field: field.into(), expected, found: json_type(found) }
    }

    pub(super) fn missing(&self, field: String) -> Error {
        Error::MissingField { index: self.index, field }
    }

    pub(super) fn string(&self, data: &mut JsonObject, key: &str, path: &str) -> Result<String, Error> {
        match data.shift_remove(key) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(self.wrong(&format!("{path}.{key}"), "a string", &other)),
            None => Err(self.missing(format!("{path}.{key}"))),
        }
    }

    pub(super) fn opt_string(&self, value: Option<Value>, path: &str) -> Result<Option<String>, Error> {
        match value {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.wrong(path, "a string or null", &other)),
        }
    }

    pub(super) fn object(&self, value: Option<Value>, path: &str) -> Result<JsonObject, Error> {
        match value {
            None | Some(Value::Null) => Ok(JsonObject::new()),
            Some(Value::Object(o)) => Ok(o),
            Some(other) => Err(self.wrong(path, "an object", &other)),
        }
    }

    pub(super) fn flag(&self, value: Option<Value>, path: &str, default: bool) -> Result<bool, Error> {
        match value {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(b),
            Some(other) => Err(self.wrong(path, "true or false", &other)),
        }
    }

    pub(super) fn as_object(&self, value: Value, path: &str) -> Result<JsonObject, Error> {
        match value {
            Value::Object(o) => Ok(o),
            other => Err(self.wrong(path, "an object", &other)),
        }
    }

    /// One content part, wrapped (`{"tool_call": {...}}`) or flat (`{"tool_name": ...}`),
    /// checked in the order Haystack checks them.
    pub(super) fn part(&self, value: Value, path: &str) -> Result<Part, Error> {
        let mut data = self.as_object(value, path)?;
        if data.contains_key("text") {
            return self.text(data, path).map(Part::Text);
        }
        for key in ["tool_call", "tool_call_result", "image", "reasoning", "file"] {
            if let Some(inner) = data.shift_remove(key) {
                let inner_path = format!("{path}.{key}");
                let inner = self.as_object(inner, &inner_path)?;
                return match key {
                    "tool_call" => self.tool_call(inner, &inner_path).map(Part::ToolCall),
                    "tool_call_result" => self.tool_result(inner, &inner_path).map(Part::ToolCallResult),
                    "image" => self.image(inner, &inner_path).map(Part::Image),
                    "reasoning" => self.reasoning(inner, &inner_path).map(Part::Reasoning),
                    _ => self.file(inner, &inner_path).map(Part::File),
                };
            }
        }
        if data.contains_key("tool_name") && data.contains_key("arguments") {
            return self.tool_call(data, path).map(Part::ToolCall);
        }
        if data.contains_key("result") && data.contains_key("origin") {
            return self.tool_result(data, path).map(Part::ToolCallResult);
        }
        if data.contains_key("reasoning_text") {
            return self.reasoning(data, path).map(Part::Reasoning);
        }
        if data.contains_key("base64_image") {
            return self.image(data, path).map(Part::Image);
        }
        if data.contains_key("base64_data") {
            return self.file(data, path).map(Part::File);
        }
        Err(Error::UnknownPart { index: self.index, field: path.into(), keys: key_list(&data) })
    }

    pub(super) fn text(&self, mut data: JsonObject, path: &str) -> Result<TextPart, Error> {
        let text = self.string(&mut data, "text", path)?;
        Ok(TextPart { text: text.into(), unknown: data.into() })
    }

    pub(super) fn tool_call(&self, mut data: JsonObject, path: &str) -> Result<ToolCall, Error> {
        let tool_name = self.string(&mut data, "tool_name", path)?;
        // Arguments that were not a JSON object when they arrived are written as their text.
        let (arguments, raw_arguments) = match data.shift_remove("arguments") {
            Some(Value::Object(o)) => (o, None),
            Some(Value::String(raw)) => (JsonObject::new(), Some(raw)),
            Some(other) => {
                return Err(self.wrong(&format!("{path}.arguments"), "an object or a string", &other))
            }
            None => return Err(self.missing(format!("{path}.arguments"))),
        };
        let id = self.opt_string(data.shift_remove("id"), &format!("{path}.id"))?;
        let extra = match data.shift_remove("extra") {
            None | Some(Value::Null) => None,
            Some(Value::Object(o)) => Some(o),
            Some(other) => return Err(self.wrong(&format!("{path}.extra"), "an object or null", &other)),
        };
        Ok(ToolCall {
            tool_name,
            arguments: arguments.into(),
            raw_arguments,
            id,
            extra: extra.map(SharedObject::from),
            unknown: data.into(),
        })
    }

    pub(super) fn tool_result(&self, mut data: JsonObject, path: &str) -> Result<ToolCallResult, Error> {
        for key in ["result", "origin", "error"] {
            if !data.contains_key(key) {
                return Err(self.missing(format!("{path}.{key}")));
            }
        }
        let result_path = format!("{path}.result");
        let result = match data.shift_remove("result") {
            Some(Value::String(s)) => ToolResultContent::Text(s.into()),
            Some(Value::Array(items)) => ToolResultContent::Parts(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| self.result_part(item, &format!("{result_path}[{i}]")))
                    .collect::<Result<_, _>>()?,
            ),
            Some(other) => {
                return Err(Error::BadToolResult {
                    index: self.index,
                    field: result_path,
                    found: json_type(&other).into(),
                })
            }
            None => return Err(self.missing(result_path)),
        };
        let origin_path = format!("{path}.origin");
        let origin = data.shift_remove("origin").unwrap_or(Value::Null);
        let origin = self.tool_call(self.as_object(origin, &origin_path)?, &origin_path)?;
        let error = self.flag(data.shift_remove("error"), &format!("{path}.error"), false)?;
        Ok(ToolCallResult { result, origin: Box::new(origin), error, unknown: data.into() })
    }

    pub(super) fn result_part(&self, value: Value, path: &str) -> Result<ResultPart, Error> {
        match self.part(value, path)? {
            Part::Text(t) => Ok(ResultPart::Text(t)),
            Part::Image(i) => Ok(ResultPart::Image(i)),
            Part::File(f) => Ok(ResultPart::File(f)),
            other => Err(Error::BadToolResult {
                index: self.index,
                field: path.into(),
                found: format!("a {} part", other.kind()),
            }),
        }
    }

    pub(super) fn reasoning(&self, mut data: JsonObject, path: &str) -> Result<ReasoningPart, Error> {
        let reasoning_text = self.string(&mut data, "reasoning_text", path)?;
        let extra = self.object(data.shift_remove("extra"), &format!("{path}.extra"))?;
        Ok(ReasoningPart { reasoning_text, extra: extra.into(), unknown: data.into() })
    }

    pub(super) fn image(&self, mut data: JsonObject, path: &str) -> Result<ImagePart, Error> {
        let base64_image = self.string(&mut data, "base64_image", path)?;
        let mut mime_type = self.opt_string(data.shift_remove("mime_type"), &format!("{path}.mime_type"))?;
        let detail = self.opt_string(data.shift_remove("detail"), &format!("{path}.detail"))?;
        let meta = self.object(data.shift_remove("meta"), &format!("{path}.meta"))?;
        let validation = self.flag(data.shift_remove("validation"), &format!("{path}.validation"), true)?;
        if validation {
            let bytes = self.decode(&base64_image, path)?;
            if mime_type.as_deref().is_none_or(str::is_empty) {
                if let Some(guess) = sniff::guess_mime(&bytes) {
                    mime_type = Some(guess.to_owned());
                }
            }
            if let Some(mime) = mime_type.as_deref().filter(|m| !m.is_empty()) {
                if !sniff::is_image_mime(mime) {
                    return Err(Error::InvalidMedia {
                        index: self.index,
                        field: path.into(),
                        reason: format!("{mime} is not a valid image MIME type"),
                    });
                }
            }
        }
        Ok(ImagePart { base64_image, mime_type, detail, meta: meta.into(), validation, unknown: data.into() })
    }

    pub(super) fn file(&self, mut data: JsonObject, path: &str) -> Result<FilePart, Error> {
        let base64_data = self.string(&mut data, "base64_data", path)?;
        let mut mime_type = self.opt_string(data.shift_remove("mime_type"), &format!("{path}.mime_type"))?;
        let filename = self.opt_string(data.shift_remove("filename"), &format!("{path}.filename"))?;
        let extra = self.object(data.shift_remove("extra"), &format!("{path}.extra"))?;
        let validation = self.flag(data.shift_remove("validation"), &format!("{path}.validation"), true)?;
        if validation {
            let bytes = self.decode(&base64_data, path)?;
            if mime_type.as_deref().is_none_or(str::is_empty) {
                if let Some(guess) = sniff::guess_mime(&bytes) {
                    mime_type = Some(guess.to_owned());
                }
            }
        }
        Ok(FilePart {
            base64_data,
            mime_type,
            filename,
            extra: extra.into(),
            validation,
            unknown: data.into(),
        })
    }

    pub(super) fn decode(&self, base64: &str, path: &str) -> Result<Vec<u8>, Error> {
        sniff::decode_base64_strict(base64).map_err(|error| Error::InvalidMedia {
            index: self.index,
            field: path.into(),
            reason: format!("the base64 string is not valid ({error})"),
        })
    }
}

/// Python's truthiness for the values `data.get("meta") or {}` treats as absent.
pub(super) fn is_falsy(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
    }
}

/// The JSON type of a value, for error messages.
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The keys of an object for an error line: the first few, each cut short, and how many more.
pub(super) fn key_list(data: &Map<String, Value>) -> String {
    const SHOWN: usize = 12;
    if data.is_empty() {
        return "none".into();
    }
    let mut list = data.keys().take(SHOWN).map(|key| crate::error::cut(key)).collect::<Vec<_>>().join(", ");
    if data.len() > SHOWN {
        list.push_str(&format!(" and {} more", data.len() - SHOWN));
    }
    list
}
