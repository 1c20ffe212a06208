//! Reading a message straight from its JSON text, whichever way the text is spelled.
//!
//! Transcripts come from two writers. serde_json (our own output) writes compact JSON with
//! non-ASCII characters as they are; Python's `json.dump`, which is how a Haystack user saves a
//! conversation, puts `", "` and `": "` between items and by default writes every non-ASCII
//! character as a `\uXXXX` escape (surrogate pairs above U+FFFF). This reader takes a message in
//! Haystack's current shape in any spelling: whitespace between tokens, every escape JSON has.
//! It goes through the text once, decoding each string as it goes and counting its characters
//! on the way, and notes whether the text is *canonical*: exactly the bytes writing the message
//! gives (no whitespace, only the escapes serde_json writes).
//!
//! Canonical or not, what it accepts is a faithful spelling of the message: a JSON reader gets
//! from the text the very value writing the message gives, keys in the same order and none
//! twice. A writer may therefore copy the text in place of encoding the message again.
//!
//! Anything else (unknown fields, older shapes, a key twice in nested JSON, an image whose MIME
//! type had to be guessed, bad input) is `None`: the other readers of `wire/` take it, and word
//! any error.

use std::ops::Range;

use serde_json::Value;

use crate::message::{
    JsonObject, Message, Part, ReasoningPart, ResultPart, Role, TextPart, ToolCall, ToolCallResult,
    ToolResultContent,
};
use crate::object::SharedObject;
use crate::text::{JsonSource, Text};
use crate::wire::{encodes_as, file_part, image_part};
use compaction_json::scan::skip_string;

/// A message read from the start of a JSON text by [`Message::read_prefix`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Prefix {
    /// The message.
    pub message: Message,
    /// How many bytes of the text it took, from its opening `{` to its closing `}`.
    pub len: usize,
    /// Whether those bytes are exactly what writing the message gives (serde_json's compact
    /// encoding). When not, they are still a faithful spelling of it: another spacing, other
    /// escapes, the same JSON value.
    pub canonical: bool,
}

impl Message {
    /// Reads the message at the start of `json` when it is in Haystack's current shape (the
    /// shape `ChatMessage.to_dict` writes), however the JSON is spaced and escaped; `None` for
    /// anything else.
    ///
    /// What this accepts, [`Message::from_slice`] reads the same, and the text it took is a
    /// faithful spelling of the message (see [`Prefix::canonical`]): a caller can keep the text
    /// in place of encoding the message again. Text after the message is not looked at.
    ///
    /// ```
    /// use compaction_model::Message;
    ///
    /// // As Python's json.dump writes it: spaced out, non-ASCII escaped.
    /// let text = r#"{"role": "user", "meta": {}, "name": null, "content": [{"text": "caf\u00e9 \ud83d\ude80"}]} ,"#;
    /// let read = Message::read_prefix(text).expect("current shape");
    /// assert_eq!(read.message.text(), Some("café 🚀"));
    /// assert_eq!(&text[read.len..], " ,");
    /// assert!(!read.canonical);
    /// assert_eq!(serde_json::to_string(&read.message)?, r#"{"role":"user","meta":{},"name":null,"content":[{"text":"café 🚀"}]}"#);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn read_prefix(json: &str) -> Option<Prefix> {
        let mut reader =
            Reader { bytes: json.as_bytes(), at: 0, canonical: true, source: None, whole: false };
        let message = reader.message()?;
        Some(Prefix { message, len: reader.at, canonical: reader.canonical })
    }

    /// As [`Message::read_prefix`], for the message starting at byte `at` of `source`, and
    /// without copying its texts: each text part and tool result stays in `source`, as written
    /// there, until something asks for its characters (see [`Text`]). Their lengths in
    /// characters are known at once.
    ///
    /// ```
    /// use compaction_model::{JsonSource, Message, Part};
    ///
    /// let source = JsonSource::new(br#"[{"role": "user", "meta": {}, "name": null, "content": [{"text": "caf\u00e9"}]}]"#.to_vec());
    /// let read = Message::read_prefix_in(&source, 1).expect("current shape");
    /// assert_eq!(read.len, source.as_bytes().len() - 2);
    /// assert!(matches!(&read.message.parts[0], Part::Text(part) if part.text.char_len() == 4 && part.text == "café"));
    /// ```
    pub fn read_prefix_in(source: &JsonSource, at: usize) -> Option<Prefix> {
        let mut reader =
            Reader { bytes: source.as_bytes(), at, canonical: true, source: Some(source), whole: false };
        let message = reader.message()?;
        Some(Prefix { message, len: reader.at - at, canonical: reader.canonical })
    }
}

impl JsonSource {
    /// The JSON string whose opening quote is byte `at` of the source, checked as JSON (valid
    /// UTF-8, escapes and all) and left where it is: a [`Text`] that knows its characters and is
    /// decoded only when asked for, and the index just past the closing quote. `None` when no
    /// valid JSON string starts at `at`.
    ///
    /// Readers of other formats use it to keep the large strings of a message (a tool's output)
    /// in the input, as [`Message::read_prefix_in`] does for Haystack's.
    ///
    /// ```
    /// use compaction_model::JsonSource;
    ///
    /// let source = JsonSource::new(br#"{"content": "caf\u00e9 ok", "n": 1}"#.to_vec());
    /// let (text, end) = source.string_at(12).expect("a string");
    /// assert_eq!((text.as_str(), text.char_len()), ("café ok", 7));
    /// assert_eq!(&source.as_bytes()[end..], br#", "n": 1}"#);
    /// assert!(source.string_at(11).is_none());
    /// ```
    pub fn string_at(&self, at: usize) -> Option<(Text, usize)> {
        if self.as_bytes().get(at) != Some(&b'"') {
            return None;
        }
        let mut reader =
            Reader { bytes: self.as_bytes(), at, canonical: true, source: Some(self), whole: false };
        let text = reader.text()?;
        Some((text, reader.at))
    }
}

/// How deep JSON nested in a message (meta, arguments, extra) is read here. serde_json refuses
/// text nested more than 128 levels deep, counted from the top of the file; deeper JSON is left
/// to the other readers, which refuse it or not exactly as before.
const NESTING: usize = 100;

/// The reader: a position in the text, and whether everything read so far was canonical.
struct Reader<'a> {
    /// The text, which need not be UTF-8 outside what is read: strings are checked as they are.
    bytes: &'a [u8],
    at: usize,
    canonical: bool,
    /// Where texts are left undecoded, when reading from a shared source.
    source: Option<&'a JsonSource>,
    /// Reading a whole document as Python's `json.loads` does ([`python_value`]): a key given
    /// twice keeps its last value, as there, where a message read here refuses it.
    whole: bool,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    /// Skips whitespace, which serde_json never writes.
    fn space(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.at += 1;
            self.canonical = false;
        }
    }

    /// Whether the next token is `byte`, taking it if so.
    fn eat(&mut self, byte: u8) -> bool {
        self.space();
        if self.peek() == Some(byte) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn token(&mut self, byte: u8) -> Option<()> {
        self.eat(byte).then_some(())
    }

    /// Takes `word` (`null`, `true`, `false`) when it comes next.
    fn word(&mut self, word: &[u8]) -> bool {
        self.space();
        if self.bytes.get(self.at..).is_some_and(|rest| rest.starts_with(word)) {
            self.at += word.len();
            true
        } else {
            false
        }
    }

    /// A key and its colon, spelled without escapes (as every writer spells these keys).
    fn any_key(&mut self) -> Option<&'a [u8]> {
        self.token(b'"')?;
        let start = self.at;
        let len = self.bytes.get(start..)?.iter().position(|&b| !(b.is_ascii_lowercase() || b == b'_'))?;
        self.at += len;
        if self.peek() != Some(b'"') {
            return None;
        }
        self.at += 1;
        self.token(b':')?;
        Some(&self.bytes[start..start + len])
    }

    /// Exactly the key `name` and its colon.
    fn key(&mut self, name: &str) -> Option<()> {
        (self.any_key()? == name.as_bytes()).then_some(())
    }

    fn message(&mut self) -> Option<Message> {
        self.token(b'{')?;
        self.key("role")?;
        self.token(b'"')?;
        let role = [Role::Tool, Role::Assistant, Role::User, Role::System].into_iter().find(|role| {
            let name = role.as_str().as_bytes();
            self.bytes
                .get(self.at..self.at + name.len() + 1)
                .is_some_and(|r| r.starts_with(name) && r[name.len()] == b'"')
        })?;
        self.at += role.as_str().len() + 1;
        self.token(b',')?;
        self.key("meta")?;
        let meta = self.object()?;
        self.token(b',')?;
        self.key("name")?;
        let name = self.string_or_null()?;
        self.token(b',')?;
        self.key("content")?;
        self.token(b'[')?;
        let mut parts = Vec::with_capacity(1);
        if !self.eat(b']') {
            loop {
                parts.push(self.part()?);
                if !self.eat(b',') {
                    self.token(b']')?;
                    break;
                }
            }
        }
        self.token(b'}')?;
        // A part is large and a vector grows to four at once; most messages have one part.
        parts.shrink_to_fit();
        Some(Message { role, parts, name, meta: meta.into() })
    }

    fn part(&mut self) -> Option<Part> {
        self.token(b'{')?;
        let part = match self.any_key()? {
            b"text" => Part::Text(TextPart::new(self.text()?)),
            b"tool_call" => Part::ToolCall(self.tool_call()?),
            b"tool_call_result" => Part::ToolCallResult(self.tool_result()?),
            b"reasoning" => {
                self.token(b'{')?;
                self.key("reasoning_text")?;
                let reasoning_text = self.string()?.0;
                self.token(b',')?;
                self.key("extra")?;
                let extra = self.object()?;
                self.token(b'}')?;
                Part::Reasoning(ReasoningPart {
                    reasoning_text,
                    extra: extra.into(),
                    unknown: SharedObject::new(),
                })
            }
            b"image" => Part::Image(self.media(image_part)?),
            b"file" => Part::File(self.media(file_part)?),
            _ => return None,
        };
        self.token(b'}')?;
        Some(part)
    }

    /// An image or file part: its object read as any nested JSON, then made a part as the
    /// other readers make it (its data checked, a missing MIME type guessed). The part must be
    /// written back as that very object, so a guessed MIME type, a key out of order or missing
    /// leaves the message to the other readers.
    fn media<T: serde::Serialize>(&mut self, make: fn(JsonObject) -> Option<T>) -> Option<T> {
        self.space();
        if self.peek() != Some(b'{') {
            return None;
        }
        let Value::Object(object) = self.value(NESTING)? else { return None };
        let written = serde_json::to_vec(&object).ok()?;
        let part = make(object)?;
        encodes_as(&part, &written).then_some(part)
    }

    fn tool_result(&mut self) -> Option<ToolCallResult> {
        self.token(b'{')?;
        self.key("result")?;
        let result = if self.eat(b'[') {
            let mut parts = Vec::with_capacity(1);
            if !self.eat(b']') {
                loop {
                    self.token(b'{')?;
                    parts.push(match self.any_key()? {
                        b"text" => ResultPart::Text(TextPart::new(self.text()?)),
                        b"image" => ResultPart::Image(self.media(image_part)?),
                        b"file" => ResultPart::File(self.media(file_part)?),
                        _ => return None,
                    });
                    self.token(b'}')?;
                    if !self.eat(b',') {
                        self.token(b']')?;
                        break;
                    }
                }
            }
            parts.shrink_to_fit();
            ToolResultContent::Parts(parts)
        } else {
            ToolResultContent::Text(self.text()?)
        };
        self.token(b',')?;
        self.key("origin")?;
        let origin = self.tool_call()?;
        self.token(b',')?;
        self.key("error")?;
        let error = if self.word(b"true") {
            true
        } else if self.word(b"false") {
            false
        } else {
            return None;
        };
        self.token(b'}')?;
        Some(ToolCallResult { result, origin: Box::new(origin), error, unknown: SharedObject::new() })
    }

    fn tool_call(&mut self) -> Option<ToolCall> {
        self.token(b'{')?;
        self.key("tool_name")?;
        let tool_name = self.string()?.0;
        self.token(b',')?;
        self.key("arguments")?;
        self.space();
        // Arguments that were not a JSON object when they arrived are kept as their text.
        let (arguments, raw_arguments) = if self.peek() == Some(b'"') {
            (JsonObject::new(), Some(self.string()?.0))
        } else {
            (self.object()?, None)
        };
        self.token(b',')?;
        self.key("id")?;
        let id = self.string_or_null()?;
        self.token(b',')?;
        self.key("extra")?;
        let extra = if self.word(b"null") { None } else { Some(self.object()?) };
        self.token(b'}')?;
        Some(ToolCall {
            tool_name,
            arguments: arguments.into(),
            raw_arguments,
            id,
            extra: extra.map(SharedObject::from),
            unknown: SharedObject::new(),
        })
    }

    /// A JSON object (meta, arguments, extra): the value serde_json would read from the text,
    /// read here so that its strings are decoded and its spelling noted as the message's are.
    /// The text must give back the same object, so no key may come twice (serde_json keeps the
    /// last, and a writer copying the text would keep both).
    fn object(&mut self) -> Option<JsonObject> {
        self.space();
        if self.peek() != Some(b'{') {
            return None;
        }
        match self.value(NESTING)? {
            Value::Object(object) => Some(object),
            _ => None,
        }
    }

    /// Any JSON value, nested at most `depth` deep.
    fn value(&mut self, depth: usize) -> Option<Value> {
        self.space();
        Some(match self.peek()? {
            b'{' => {
                let depth = depth.checked_sub(1)?;
                self.at += 1;
                // Gathered first, so the map is made at its size: a map grown one key at a
                // time keeps room for several more, and messages hold thousands of small ones.
                let mut pairs = Vec::new();
                if !self.eat(b'}') {
                    loop {
                        self.space();
                        if self.peek() != Some(b'"') {
                            return None;
                        }
                        let (key, _) = self.string()?;
                        // serde_json reads an object with one of its marker keys as something
                        // else (a number, with arbitrary precision; a raw value): left to it.
                        // Its markers are private and start with `$`; any key that does is left
                        // to it, so none is named here and a renamed one is still left.
                        if key.starts_with('$') {
                            return None;
                        }
                        self.token(b':')?;
                        pairs.push((key, self.value(depth)?));
                        if !self.eat(b',') {
                            self.token(b'}')?;
                            break;
                        }
                    }
                }
                let mut object = JsonObject::with_capacity(pairs.len());
                for (key, value) in pairs {
                    if object.insert(key, value).is_some() && !self.whole {
                        return None;
                    }
                }
                Value::Object(object)
            }
            b'[' => {
                let depth = depth.checked_sub(1)?;
                self.at += 1;
                let mut items = Vec::new();
                if !self.eat(b']') {
                    loop {
                        items.push(self.value(depth)?);
                        if !self.eat(b',') {
                            self.token(b']')?;
                            break;
                        }
                    }
                }
                Value::Array(items)
            }
            b'"' => Value::String(self.string()?.0),
            b't' if self.word(b"true") => Value::Bool(true),
            b'f' if self.word(b"false") => Value::Bool(false),
            b'n' if self.word(b"null") => Value::Null,
            // Python's non-finite floats, which `json.dumps` writes and serde_json cannot.
            b'N' | b'I' | b'-' if self.non_finite().is_some() => {
                let word = self.non_finite()?;
                self.at += word.len();
                self.canonical = false;
                Value::Number(crate::dialect::non_finite(word))
            }
            b'-' | b'0'..=b'9' => {
                let rest = &self.bytes[self.at..];
                let len = rest
                    .iter()
                    .position(|b| !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                    .unwrap_or(rest.len());
                let text = std::str::from_utf8(&rest[..len]).ok()?;
                // serde_json's own reading of a number, which with arbitrary precision keeps its
                // digits (and writes `1E5` back as `1e+5`).
                let number: serde_json::Number = text.parse().ok()?;
                if !encodes_as(&number, text.as_bytes()) {
                    self.canonical = false;
                }
                self.at += len;
                Value::Number(number)
            }
            _ => return None,
        })
    }

    /// `NaN`, `Infinity` or `-Infinity`, when one comes next.
    fn non_finite(&self) -> Option<&'static str> {
        let rest = self.bytes.get(self.at..)?;
        ["NaN", "Infinity", "-Infinity"].into_iter().find(|word| rest.starts_with(word.as_bytes()))
    }

    fn string_or_null(&mut self) -> Option<Option<String>> {
        if self.word(b"null") {
            return Some(None);
        }
        self.string().map(|(string, _)| Some(string))
    }

    fn text(&mut self) -> Option<Text> {
        let (raw, chars, escaped) = self.raw_string()?;
        if let Some(source) = self.source {
            return Some(Text::in_json(source, raw, escaped, chars));
        }
        let raw = std::str::from_utf8(&self.bytes[raw]).ok()?;
        Some(Text::counted(if escaped { unescape(raw) } else { raw.to_owned() }, chars))
    }

    /// A string, unescaped, with its length in characters.
    fn string(&mut self) -> Option<(String, usize)> {
        let (raw, chars, escaped) = self.raw_string()?;
        let raw = std::str::from_utf8(&self.bytes[raw]).ok()?;
        Some((if escaped { unescape(raw) } else { raw.to_owned() }, chars))
    }

    /// A string checked and counted, not decoded: where its contents lie (between the quotes),
    /// how many characters they stand for, and whether they hold escapes. The end is found
    /// first, eight bytes at a time ([`ascii_stop`]); then contents that are not all ASCII are
    /// checked as UTF-8 in one call (simdutf8) and their characters counted, less the bytes each
    /// escape takes beyond the one character it stands for.
    fn raw_string(&mut self) -> Option<(Range<usize>, usize, bool)> {
        self.token(b'"')?;
        let start = self.at;
        let mut extra = 0;
        let mut escaped = false;
        let mut high = 0;
        loop {
            let stop = ascii_stop(self.bytes, self.at, &mut high)?;
            self.at = stop + 1;
            match self.bytes[stop] {
                b'"' => break,
                b'\\' => {}
                // A raw control character: not JSON.
                _ => return None,
            }
            self.skip_escape()?;
            extra += self.at - stop - 1;
            escaped = true;
        }
        let contents = start..self.at - 1;
        let chars = match high {
            // ASCII: a character a byte.
            0 => contents.len(),
            _ => simdutf8::basic::from_utf8(&self.bytes[contents.clone()]).ok()?.chars().count(),
        };
        Some((contents, chars - extra, escaped))
    }

    /// Checks the escape after a backslash (taken) as [`Reader::escape`] does, noting one
    /// serde_json would not write, without making its character.
    fn skip_escape(&mut self) -> Option<()> {
        let escape = self.peek()?;
        self.at += 1;
        match escape {
            b'"' | b'\\' | b'n' | b't' | b'r' | b'b' | b'f' => Some(()),
            b'/' => {
                self.canonical = false;
                Some(())
            }
            b'u' => {
                let (unit, lowercase) = self.hex4()?;
                if !(lowercase && unit < 0x20 && !matches!(unit, 0x08..=0x0a | 0x0c | 0x0d)) {
                    self.canonical = false;
                }
                if (0xD800..=0xDFFF).contains(&unit) {
                    self.surrogate(unit);
                }
                Some(())
            }
            _ => None,
        }
    }

    /// The character an escape stands for; the backslash is taken. Notes escapes serde_json
    /// would not write.
    fn escape(&mut self) -> Option<char> {
        let escape = self.peek()?;
        self.at += 1;
        Some(match escape {
            b'"' => '"',
            b'\\' => '\\',
            b'n' => '\n',
            b't' => '\t',
            b'r' => '\r',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'/' => {
                self.canonical = false;
                '/'
            }
            b'u' => {
                let (unit, lowercase) = self.hex4()?;
                // serde_json writes `\u00XX`, lowercase, for the control characters that have no
                // short escape, and every other character as it is.
                if !(lowercase && unit < 0x20 && !matches!(unit, 0x08..=0x0a | 0x0c | 0x0d)) {
                    self.canonical = false;
                }
                match unit {
                    0xD800..=0xDFFF => self.surrogate(unit),
                    unit => char::from_u32(unit)?,
                }
            }
            _ => return None,
        })
    }

    /// The character a surrogate escape `unit` (taken) stands for: with the low surrogate escape
    /// that follows a high one (taken too), the character the pair encodes; alone, as Python's
    /// `json.loads` keeps it, its stand-in (see `dialect.rs`), which serde_json cannot write.
    fn surrogate(&mut self, unit: u32) -> char {
        if unit < 0xDC00 && self.bytes.get(self.at..self.at + 2) == Some(b"\\u") {
            let before = self.at;
            self.at += 2;
            match self.hex4() {
                Some((low @ 0xDC00..=0xDFFF, _)) => {
                    return char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
                        .unwrap_or(char::REPLACEMENT_CHARACTER);
                }
                // Not its low half: the next escape is read on its own.
                _ => self.at = before,
            }
        }
        self.canonical = false;
        crate::dialect::stand_in(unit)
    }

    /// Four hex digits, and whether all its letters were lowercase.
    fn hex4(&mut self) -> Option<(u32, bool)> {
        let digits = self.bytes.get(self.at..self.at + 4)?;
        self.at += 4;
        let hex = |k: usize| HEX[usize::from(digits[k])];
        let (a, b, c, d) = (hex(0), hex(1), hex(2), hex(3));
        if (a | b | c | d) == INVALID {
            return None;
        }
        let value =
            u32::from(a & 15) << 12 | u32::from(b & 15) << 8 | u32::from(c & 15) << 4 | u32::from(d & 15);
        Some((value, (a | b | c | d) & UPPERCASE == 0))
    }
}

/// Not a hex digit, in [`HEX`].
const INVALID: u8 = 0xFF;
/// An uppercase hex letter, in [`HEX`].
const UPPERCASE: u8 = 0x10;

/// Each byte's value as a hex digit (with [`UPPERCASE`] for `A`–`F`), or [`INVALID`].
static HEX: [u8; 256] = {
    let mut table = [INVALID; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = match b as u8 {
            digit @ b'0'..=b'9' => digit - b'0',
            letter @ b'a'..=b'f' => letter - b'a' + 10,
            letter @ b'A'..=b'F' => (letter - b'A' + 10) | UPPERCASE,
            _ => INVALID,
        };
        b += 1;
    }
    table
};

/// How deep [`python_value`] reads nesting: serde_json's limit, so that the dialect refuses no
/// text for depth that serde_json would read.
const DOCUMENT_NESTING: usize = 128;

/// The value of the whole JSON text `json` as Python's `json.loads` reads it (see `dialect.rs`):
/// strict JSON, lone surrogate escapes and `NaN` / `Infinity` / `-Infinity`; `None` for anything
/// else, whose error serde_json words.
pub(crate) fn python_value(json: &[u8]) -> Option<Value> {
    let mut reader = Reader { bytes: json, at: 0, canonical: true, source: None, whole: true };
    let value = reader.value(DOCUMENT_NESTING)?;
    reader.space();
    (reader.at == json.len()).then_some(value)
}

/// The characters of `raw`, the contents of a JSON string (what lies between its quotes) that
/// the reader has checked.
pub(crate) fn unescape(raw: &str) -> String {
    let mut reader = Reader { bytes: raw.as_bytes(), at: 0, canonical: true, source: None, whole: false };
    // No escape is shorter than what it stands for.
    let mut out = String::with_capacity(raw.len());
    loop {
        let stop = ascii_stop(reader.bytes, reader.at, &mut 0).unwrap_or(raw.len());
        out.push_str(&raw[reader.at..stop]);
        if stop == raw.len() {
            break;
        }
        reader.at = stop + 1;
        match reader.escape() {
            Some(c) => out.push(c),
            // Checked when read; should an escape be bad after all, it is kept as written
            // rather than lost.
            None => {
                out.push_str(&raw[stop..]);
                break;
            }
        }
    }
    // `\uXXXX` escapes of non-ASCII text take twice their characters' bytes.
    if out.capacity() - out.len() > out.len() / 8 {
        out.shrink_to_fit();
    }
    out
}

/// [`unescape`] a piece at a time, without a string of its own: each run between escapes as it
/// lies in `raw`, and each escape's character, handed to `piece` in order (joined, they are
/// `unescape(raw)`'s bytes).
pub(crate) fn unescape_pieces(raw: &[u8], piece: &mut dyn FnMut(&[u8])) {
    let mut reader = Reader { bytes: raw, at: 0, canonical: true, source: None, whole: false };
    loop {
        let stop = ascii_stop(reader.bytes, reader.at, &mut 0).unwrap_or(raw.len());
        if stop > reader.at {
            piece(&raw[reader.at..stop]);
        }
        if stop == raw.len() {
            break;
        }
        reader.at = stop + 1;
        match reader.escape() {
            Some(c) => piece(c.encode_utf8(&mut [0; 4]).as_bytes()),
            // As `unescape` keeps a bad escape.
            None => {
                piece(&raw[stop..]);
                break;
            }
        }
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The eight bytes at `at` as a word, the first in the lowest byte.
#[inline(always)]
fn word(bytes: &[u8], at: usize) -> Option<u64> {
    let mut eight = [0; 8];
    eight.copy_from_slice(bytes.get(at..at + 8)?);
    Some(u64::from_le_bytes(eight))
}

/// The bytes of a word that end a run of string contents (`"`, `\`, control characters), each
/// flagged by its high bit. Only the lowest flag is exact: a borrow can flag bytes after the
/// first true one, never before it.
#[inline(always)]
fn stops(x: u64) -> u64 {
    let below = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x;
    (below(x ^ (ONES * u64::from(b'"')), 1) | below(x ^ (ONES * u64::from(b'\\')), 1) | below(x, 0x20)) & HIGH
}

/// The position of the first `"`, `\` or control character at or after `from`; `None` at the
/// end of the text. Looks at eight bytes at a time: string contents are most of a transcript.
/// Bytes that are not ASCII pass here, each marked in `high` (a byte or two past the stop may
/// be marked too); a string with any is checked as UTF-8 as a whole once its end is found, which
/// costs less than checking each run of them as it comes (a run is mostly a character or two,
/// between ASCII), and one with none is ASCII. (Sixteen bytes at a time measured slower: in
/// code and logs an escape comes every few dozen bytes.)
#[inline(always)]
fn ascii_stop(bytes: &[u8], from: usize, high: &mut u64) -> Option<usize> {
    let mut at = from;
    while let Some(x) = word(bytes, at) {
        *high |= x & HIGH;
        let stops = stops(x);
        if stops != 0 {
            return Some(at + (stops.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    for (k, &b) in bytes.get(at..)?.iter().enumerate() {
        if b == b'"' || b == b'\\' || b < 0x20 {
            return Some(at + k);
        }
        *high |= u64::from(b & 0x80);
    }
    None
}

/// The key–value pairs written in the JSON text of an object, nested ones included: its colons
/// outside strings.
pub(crate) fn pairs_in(text: &[u8]) -> usize {
    let mut pairs = 0;
    let mut at = 0;
    while let Some(&b) = text.get(at) {
        match b {
            b'"' => match skip_string(text, at + 1) {
                Some(end) => at = end,
                None => return usize::MAX,
            },
            b':' => {
                pairs += 1;
                at += 1;
            }
            _ => at += 1,
        }
    }
    pairs
}

/// The key–value pairs a value holds, nested ones included.
pub(crate) fn pairs_of(value: &Value) -> usize {
    match value {
        Value::Object(object) => object.len() + object.values().map(pairs_of).sum::<usize>(),
        Value::Array(items) => items.iter().map(pairs_of).sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the reader ends the string whose contents start `text` (an offset into `text`), and
    /// how many characters the contents stand for.
    fn counted(text: &[u8]) -> Option<(usize, usize)> {
        let quoted = [b"\"", text].concat();
        let mut reader = Reader { bytes: &quoted, at: 0, canonical: true, source: None, whole: false };
        let (contents, chars, _) = reader.raw_string()?;
        Some((contents.end - 1, chars))
    }

    /// What Python's `json.loads` reads of the same: where the contents end and their
    /// characters. serde_json's reading where it reads the string; where it refuses one, the
    /// string decoded to UTF-16 code units by hand and counted as Python's `len` counts them (a
    /// lone surrogate is one character, as is a pair).
    fn serde_counted(text: &[u8]) -> Option<(usize, usize)> {
        let quoted = [b"\"", text].concat();
        let mut stream = serde_json::Deserializer::from_slice(&quoted).into_iter::<String>();
        if let Some(Ok(decoded)) = stream.next() {
            return Some((stream.byte_offset() - 2, decoded.chars().count()));
        }
        let mut units: Vec<u16> = Vec::new();
        let mut at = 0;
        loop {
            let rest = std::str::from_utf8(text.get(at..)?)
                .unwrap_or_else(|e| std::str::from_utf8(&text[at..at + e.valid_up_to()]).unwrap_or_default());
            let c = rest.chars().next()?;
            match c {
                '"' => break,
                '\\' => {
                    let escape = *text.get(at + 1)?;
                    at += 2;
                    match escape {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => units.push(1),
                        b'u' => {
                            let hex = std::str::from_utf8(text.get(at..at + 4)?).ok()?;
                            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                                return None;
                            }
                            units.push(u16::from_str_radix(hex, 16).ok()?);
                            at += 4;
                        }
                        _ => return None,
                    }
                }
                c if u32::from(c) < 0x20 => return None,
                c => {
                    let mut buf = [0; 2];
                    units.extend_from_slice(c.encode_utf16(&mut buf));
                    at += c.len_utf8();
                }
            }
        }
        Some((at, char::decode_utf16(units).count()))
    }

    #[test]
    fn strings_end_and_are_counted_as_python_reads_them() {
        let long = "x".repeat(70);
        let mixed = "日本語😀 and more text than one word holds, ok\\n and on\"";
        let cases = [
            "",
            "abc\"",
            "é\"",
            "\u{1}",
            &long,
            mixed,
            "ab日本語😀cdefé😀😀日\"",
            "abcdefgh\u{1f}",
            "😀😀😀😀\\",
            "a\\nb\\t\"",
            "\\u00e9 and \\u00E9\"",
            "\\ud83d\\ude00x\"",
            "\\ud83dx\"",
            "\\ude00\"",
            "\\ud83d\\ud83d\\u0041\"",
            "\\ude00\\ud83d\\ude00\\ud83d\"",
            "\\udbff\\udfff\\udbff\"",
            "\\x\"",
            "日本語\\t😀 the rest of it, long enough for eight at a time\\/\"",
        ];
        for text in cases {
            assert_eq!(counted(text.as_bytes()), serde_counted(text.as_bytes()), "{text:?}");
        }
    }

    /// Strings of stops close together, escapes across the eight bytes looked at together, and
    /// what JSON refuses, at every offset: ended and counted as serde_json reads them.
    #[test]
    fn strings_of_many_stops_end_and_are_counted_as_python_reads_them() {
        let pieces: [&str; 18] = [
            "a",
            "bcdefg",
            "\\\"",
            "\\\\",
            "\\n",
            "\\/",
            "\\u00e9",
            "\\uD83D\\uDE00",
            "é",
            "日本",
            "😀",
            "\"",
            "\\",
            "\n",
            "\\x",
            "\\ud800",
            "\\u12",
            "\u{1f}",
        ];
        let mut state = 7u64;
        let mut next = |n: usize| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as usize % n
        };
        for _ in 0..20_000 {
            let mut text = String::new();
            for _ in 0..next(24) {
                // Mostly what a string holds; now and then what ends or spoils it.
                let piece = if next(6) == 0 { pieces[11 + next(7)] } else { pieces[next(11)] };
                text.push_str(piece);
            }
            text.push('"');
            text.push_str(" tail");
            assert_eq!(counted(text.as_bytes()), serde_counted(text.as_bytes()), "{text:?}");
        }
    }

    #[test]
    fn strings_that_are_not_utf8_are_refused() {
        for bytes in [&b"abc\xff\""[..], b"\xe6\x97\"", b"abcdefgh\xc3\x28abcdefgh\"", b"\xed\xa0\x80\""] {
            assert_eq!(counted(bytes), None, "{bytes:?}");
        }
        assert_eq!(counted("abcdefgh日本語abcdefgh\"".as_bytes()), Some((25, 19)));
    }

    /// The contents are checked exactly as `std::str::from_utf8` checks them.
    #[test]
    fn contents_are_checked_as_std_checks_them() {
        let interesting: Vec<u8> = [
            0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED,
            0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF,
        ]
        .to_vec();
        let mut sequences = vec![Vec::new()];
        for _ in 0..4 {
            sequences = sequences
                .iter()
                .flat_map(|s| interesting.iter().map(move |&b| [s.as_slice(), &[b]].concat()))
                .collect();
            for sequence in &sequences {
                let text = [b"a", sequence.as_slice(), b"\""].concat();
                let expected = std::str::from_utf8(&text).ok().map(|t| (t.len() - 1, t.chars().count() - 1));
                assert_eq!(counted(&text), expected, "{sequence:02x?}");
                // And where eight bytes at a time cross it, with more text after the string.
                let longer = [&text[..], b" and after"].concat();
                assert_eq!(counted(&longer), expected, "{sequence:02x?} in a longer text");
            }
        }
    }

    #[test]
    fn pairs_are_counted_outside_strings() {
        assert_eq!(pairs_in(br#"{"a": 1, "b:": {"c": [{"d": ":"}]}}"#), 4);
        let object: Value = serde_json::from_str(r#"{"a": 1, "b:": {"c": [{"d": ":"}]}}"#).unwrap();
        assert_eq!(pairs_of(&object), 4);
        let twice: Value = serde_json::from_str(r#"{"a": 1, "a": 2}"#).unwrap();
        assert_eq!((pairs_in(br#"{"a": 1, "a": 2}"#), pairs_of(&twice)), (2, 1));
    }
}
