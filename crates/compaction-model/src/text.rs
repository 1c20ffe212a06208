//! [`Text`]: a string that knows its length in characters, and may still be JSON.

use std::borrow::Borrow;
use std::fmt;
use std::ops::{Deref, Range};
use std::sync::{Arc, OnceLock};

use serde::{Serialize, Serializer};

/// A string that knows how many characters it holds, as Python's `str` does.
///
/// Counters that work in characters (the approximate counter divides a length by a ratio) ask
/// every message for its length on every count. A Rust `String` knows only its length in bytes,
/// so each ask would scan the whole text; a `Text` counts its characters (Unicode scalar values,
/// as Python's `len` counts) once, when it is made, and answers [`Text::char_len`] at once after.
///
/// It reads as a `&str` (it derefs to one) and cannot be changed behind its count: the only
/// way to change it in place is [`Text::edit`], which counts again.
///
/// A text read with [`Message::read_prefix_in`](crate::Message::read_prefix_in) stays in its
/// [`JsonSource`], as written there, until something asks for its characters: then a text
/// written without escapes is a slice of the source, and one with escapes is decoded once and
/// kept. Counting in characters, pruning and writing the file back never ask, so a large
/// transcript is neither copied nor decoded for them. (A text written without escapes is
/// checked to be UTF-8 again each time it is asked for: cheap beside what asks.)
#[derive(Clone, Default)]
pub struct Text {
    repr: Repr,
    chars: usize,
}

#[derive(Clone)]
enum Repr {
    Owned(String),
    /// A string another owner holds, shared (see [`Text::shared`]).
    Shared(Arc<dyn AsRef<str> + Send + Sync>),
    /// A JSON string in `source`: `raw` is what lies between its quotes, checked by the reader
    /// to be valid JSON string contents (UTF-8, escapes included).
    Json {
        source: JsonSource,
        raw: Range<usize>,
        escaped: bool,
        decoded: OnceLock<String>,
    },
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Owned(String::new())
    }
}

/// The bytes of a JSON document, shared by the messages read from it with
/// [`Message::read_prefix_in`](crate::Message::read_prefix_in): their texts stay in it, as
/// written, until something asks for them (see [`Text`]). Cloning it is cheap.
///
/// The bytes need not be UTF-8 as a whole: the reader checks each string of each message it
/// reads, so a file is never checked in one pass on one core.
#[derive(Clone)]
pub struct JsonSource(Arc<Vec<u8>>);

impl JsonSource {
    /// `bytes` as a source to read messages from.
    pub fn new(bytes: Vec<u8>) -> Self {
        JsonSource(Arc::new(bytes))
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The bytes back when nothing read from them is left, else the source as it was.
    ///
    /// # Errors
    ///
    /// Gives the source back unchanged while a text read from it still shares its bytes.
    pub fn into_bytes(self) -> Result<Vec<u8>, JsonSource> {
        Arc::try_unwrap(self.0).map_err(JsonSource)
    }

    /// The string contents at `raw`, which the reader found to be UTF-8.
    fn str(&self, raw: &Range<usize>) -> &str {
        // Checked when read, so this cannot fail; checking again is what taking a `str` out of
        // bytes costs without unsafe code, and is quick beside anything that asks for text.
        std::str::from_utf8(&self.0[raw.clone()]).unwrap_or_default()
    }
}

impl fmt::Debug for JsonSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JsonSource({} bytes)", self.0.len())
    }
}

// Compared, ordered and hashed as its string alone, so a `Text` and the `&str` it borrows as
// agree (as `Borrow<str>` requires): the count follows from the string.
impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

impl std::hash::Hash for Text {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for Text {
    fn partial_cmp(&self, other: &Text) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Text {
    fn cmp(&self, other: &Text) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Text {
    /// `string` as a text; counts its characters.
    pub fn new(string: impl Into<String>) -> Self {
        let string = string.into();
        let chars = string.chars().count();
        Text { repr: Repr::Owned(string), chars }
    }

    /// The string `owner` holds, as a text, without copying it; counts its characters.
    ///
    /// For a string that lives in another owner already, such as a Python `str` (whose UTF-8
    /// bytes the Python package borrows): the text holds the owner, and copies of the text share
    /// it. `owner` must give the same string each time it is asked (as an immutable string does);
    /// the count is taken once, here.
    pub fn shared(owner: Arc<dyn AsRef<str> + Send + Sync>) -> Self {
        let chars = (*owner).as_ref().chars().count();
        Text { repr: Repr::Shared(owner), chars }
    }

    /// The string `owner` holds, as a text of `chars` characters, as [`Text::shared`] makes it
    /// but without counting: for an owner that knows its length in characters already (a
    /// Python `str` does, as `len`). The caller vouches for `chars`; it is checked in debug
    /// builds only.
    pub fn shared_with_char_len(owner: Arc<dyn AsRef<str> + Send + Sync>, chars: usize) -> Self {
        debug_assert_eq!((*owner).as_ref().chars().count(), chars, "{:?}", (*owner).as_ref());
        Text { repr: Repr::Shared(owner), chars }
    }

    /// `string` as a text whose characters the caller has already counted.
    pub(crate) fn counted(string: String, chars: usize) -> Self {
        debug_assert_eq!(string.chars().count(), chars, "{string:?}");
        Text { repr: Repr::Owned(string), chars }
    }

    /// The JSON string in `source` whose contents (between the quotes) are `raw`: valid JSON
    /// string contents, with escapes or not, of `chars` characters once decoded, as the reader
    /// checked while counting them.
    pub(crate) fn in_json(source: &JsonSource, raw: Range<usize>, escaped: bool, chars: usize) -> Self {
        let text = Text {
            repr: Repr::Json { source: source.clone(), raw, escaped, decoded: OnceLock::new() },
            chars,
        };
        debug_assert_eq!(text.as_str().chars().count(), chars, "{text:?}");
        text
    }

    /// The text as a string slice.
    pub fn as_str(&self) -> &str {
        match &self.repr {
            Repr::Owned(string) => string,
            Repr::Shared(owner) => (**owner).as_ref(),
            Repr::Json { source, raw, escaped: false, .. } => source.str(raw),
            Repr::Json { source, raw, decoded, .. } => {
                decoded.get_or_init(|| crate::prefix::unescape(source.str(raw)))
            }
        }
    }

    /// Hands the text as serde_json spells it between a JSON string's quotes (its canonical
    /// spelling: `"`, `\` and control characters escaped, nothing else) to `block`, in blocks
    /// of 512 bytes and then the rest (shorter, possibly empty). The blocks are the same however
    /// the text is held: owned, shared, or still in its source in any spelling. For hashing a
    /// text with a hasher whose result depends on how its input is cut, without decoding the
    /// text: one left in its source in the canonical spelling (most writers' output) is handed
    /// over as it lies there, and any other is spelled again as it goes, never kept.
    pub fn for_each_spelled_block(&self, block: impl FnMut(&[u8])) {
        let mut blocks = crate::spelled::Blocks::new(block);
        match &self.repr {
            Repr::Owned(string) => blocks.push_escaped(string.as_bytes()),
            Repr::Shared(owner) => blocks.push_escaped((**owner).as_ref().as_bytes()),
            Repr::Json { source, raw, decoded, .. } => {
                let raw = &source.as_bytes()[raw.clone()];
                match decoded.get() {
                    _ if compaction_json::string::is_canonical(raw) => blocks.push(raw),
                    Some(string) => blocks.push_escaped(string.as_bytes()),
                    None => crate::prefix::unescape_pieces(raw, &mut |piece| blocks.push_escaped(piece)),
                }
            }
        }
        blocks.finish();
    }

    /// Its length in characters (Unicode scalar values), without scanning it.
    pub fn char_len(&self) -> usize {
        self.chars
    }

    /// The underlying string.
    pub fn into_string(self) -> String {
        match self.repr {
            Repr::Owned(string) => string,
            Repr::Shared(owner) => (*owner).as_ref().to_owned(),
            Repr::Json { source, raw, escaped, decoded } => match decoded.into_inner() {
                Some(string) => string,
                None if !escaped => source.str(&raw).to_owned(),
                None => crate::prefix::unescape(source.str(&raw)),
            },
        }
    }

    /// Changes the text through `change` and counts its characters again (also when `change`
    /// panics, should the panic be caught).
    pub fn edit<R>(&mut self, change: impl FnOnce(&mut String) -> R) -> R {
        struct Recount<'a> {
            text: &'a mut Text,
            string: String,
        }
        impl Drop for Recount<'_> {
            fn drop(&mut self) {
                let string = std::mem::take(&mut self.string);
                self.text.chars = string.chars().count();
                self.text.repr = Repr::Owned(string);
            }
        }
        let string = std::mem::take(self).into_string();
        let mut guard = Recount { text: self, string };
        change(&mut guard.string)
    }
}

impl Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Text {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<String> for Text {
    fn from(string: String) -> Self {
        Text::new(string)
    }
}

impl From<&str> for Text {
    fn from(string: &str) -> Self {
        Text::new(string)
    }
}

impl From<&String> for Text {
    fn from(string: &String) -> Self {
        Text::new(string.as_str())
    }
}

impl From<Text> for String {
    fn from(text: Text) -> Self {
        text.into_string()
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<Text> for str {
    fn eq(&self, other: &Text) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Text> for &str {
    fn eq(&self, other: &Text) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Text> for String {
    fn eq(&self, other: &Text) -> bool {
        *self == other.as_str()
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use super::Text;

    #[test]
    fn counts_characters_as_python_len_does() {
        // (text, Python's len(text))
        let cases = [("", 0), ("abc", 3), ("café", 4), ("Straße ✓", 8), ("😀x", 2), ("e\u{301}", 2)];
        for (string, chars) in cases {
            let text = Text::new(string);
            assert_eq!(text.char_len(), chars, "{string:?}");
            assert_eq!(text.len(), string.len(), "{string:?} bytes");
            assert_eq!(text, string);
        }
    }

    #[test]
    fn hashes_and_compares_as_its_string() {
        let set: std::collections::HashSet<Text> = [Text::new("abc"), Text::new("café")].into();
        assert!(set.contains("abc") && set.contains("café") && !set.contains("ab"));
        assert!(Text::new("a") < Text::new("b"));
    }

    #[test]
    fn a_panicking_edit_still_counts_again() {
        let mut text = Text::new("abc");
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            text.edit(|s| {
                s.push_str("déf");
                panic!("stop");
            })
        }));
        assert!(caught.is_err());
        assert_eq!(text.char_len(), text.as_str().chars().count());
    }

    #[test]
    fn its_spelled_blocks_are_its_canonical_json_and_an_escaped_text_is_not_kept_decoded_for_them() {
        // The text as serde_json spells it, and the lengths of the blocks it comes in.
        let spelled = |text: &Text| {
            let (mut all, mut cuts) = (Vec::new(), Vec::new());
            text.for_each_spelled_block(|block| {
                all.extend_from_slice(block);
                cuts.push(block.len());
            });
            (String::from_utf8(all).expect("UTF-8"), cuts)
        };
        let canonical = |text: &str| {
            let json = serde_json::to_string(text).expect("a JSON string");
            let inner = json[1..json.len() - 1].to_owned();
            let mut cuts = vec![512; inner.len() / 512];
            cuts.push(inner.len() % 512);
            (inner, cuts)
        };
        // JSON string contents, as a source holds them.
        let cases = [
            r"plain",
            r"",
            r#"line\nbreak\ttab \"quoted\" back\\slash \/"#,
            r"d\u00e9j\u00e0 \ud83c\udf89 \u2728 caf\u00E9",
            r"\n",
            "déjà vu 🎉 raw",
            r"\u0001 ctl \u001f \u001F",
            &"a \\\"quoted\\\" line\\n".repeat(100),
            &r"caf\u00e9 \/ ".repeat(100),
        ];
        for raw in cases {
            let json = format!("\"{raw}\"");
            let expected: String = serde_json::from_str(&json).expect("a JSON string");
            let source = super::JsonSource::new(json.clone().into_bytes());
            let escaped = raw.contains('\\');
            // As `Text::in_json` makes it, but for its check, which decodes it in a debug build.
            let raw_range = 1..json.len() - 1;
            let repr = super::Repr::Json { source, raw: raw_range, escaped, decoded: OnceLock::new() };
            let text = Text { repr, chars: expected.chars().count() };
            assert_eq!(spelled(&text), canonical(&expected), "{raw}");
            let super::Repr::Json { decoded, .. } = &text.repr else { panic!("{raw}: left in its source") };
            assert!(decoded.get().is_none(), "{raw}: decoded and kept");
            // Once decoded, the decoded string is handed as it is.
            assert_eq!(text.as_str(), expected);
            assert_eq!(spelled(&text), canonical(&expected), "{raw}");
            assert_eq!(spelled(&Text::new(expected.as_str())), canonical(&expected), "{raw}");
        }
    }

    #[test]
    fn a_shared_string_reads_counts_and_edits_as_an_owned_one() {
        use std::sync::Arc;
        let owner: Arc<dyn AsRef<str> + Send + Sync> = Arc::new(String::from("Straße ✓"));
        let mut text = Text::shared(Arc::clone(&owner));
        assert_eq!((text.as_str(), text.char_len()), ("Straße ✓", 8));
        let mut spelled = Vec::new();
        text.for_each_spelled_block(|block| spelled.extend_from_slice(block));
        assert_eq!(spelled, "Straße ✓".as_bytes());
        assert_eq!(text.clone(), Text::new("Straße ✓"));
        assert_eq!(text.clone().into_string(), "Straße ✓");
        text.edit(|s| s.push('!'));
        assert_eq!((text.as_str(), text.char_len()), ("Straße ✓!", 9));
        let counted = Text::shared_with_char_len(Arc::clone(&owner), 8);
        assert_eq!((counted.as_str(), counted.char_len()), ("Straße ✓", 8));
        assert_eq!((*owner).as_ref(), "Straße ✓");
    }

    #[test]
    fn an_edit_counts_again() {
        let mut text = Text::new("abc");
        text.edit(|s| s.push_str("ünï"));
        assert_eq!(text.char_len(), 6);
        text.edit(String::clear);
        assert_eq!((text.char_len(), text.as_str()), (0, ""));
    }
}
