//! [`Text`]: a string that knows its length in characters.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

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
#[derive(Clone, Default)]
pub struct Text {
    string: String,
    chars: usize,
}

// Compared, ordered and hashed as its string alone, so a `Text` and the `&str` it borrows as
// agree (as `Borrow<str>` requires): the count follows from the string.
impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        self.string == other.string
    }
}

impl Eq for Text {}

impl std::hash::Hash for Text {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.string.hash(state);
    }
}

impl PartialOrd for Text {
    fn partial_cmp(&self, other: &Text) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Text {
    fn cmp(&self, other: &Text) -> std::cmp::Ordering {
        self.string.cmp(&other.string)
    }
}

impl Text {
    /// `string` as a text; counts its characters.
    pub fn new(string: impl Into<String>) -> Self {
        let string = string.into();
        let chars = string.chars().count();
        Text { string, chars }
    }

    /// The text as a string slice.
    pub fn as_str(&self) -> &str {
        &self.string
    }

    /// Its length in characters (Unicode scalar values), without scanning it.
    pub fn char_len(&self) -> usize {
        self.chars
    }

    /// The underlying string.
    pub fn into_string(self) -> String {
        self.string
    }

    /// Changes the text through `change` and counts its characters again (also when `change`
    /// panics, should the panic be caught).
    pub fn edit<R>(&mut self, change: impl FnOnce(&mut String) -> R) -> R {
        struct Recount<'a>(&'a mut Text);
        impl Drop for Recount<'_> {
            fn drop(&mut self) {
                self.0.chars = self.0.string.chars().count();
            }
        }
        let guard = Recount(self);
        change(&mut guard.0.string)
    }
}

impl Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        &self.string
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        &self.string
    }
}

impl Borrow<str> for Text {
    fn borrow(&self) -> &str {
        &self.string
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
        text.string
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.string == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.string == *other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        &self.string == other
    }
}

impl PartialEq<Text> for str {
    fn eq(&self, other: &Text) -> bool {
        self == other.string
    }
}

impl PartialEq<Text> for &str {
    fn eq(&self, other: &Text) -> bool {
        *self == other.string
    }
}

impl PartialEq<Text> for String {
    fn eq(&self, other: &Text) -> bool {
        *self == other.string
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.string)
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.string, f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.string)
    }
}

#[cfg(test)]
mod tests {
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
    fn an_edit_counts_again() {
        let mut text = Text::new("abc");
        text.edit(|s| s.push_str("ünï"));
        assert_eq!(text.char_len(), 6);
        text.edit(String::clear);
        assert_eq!((text.char_len(), text.as_str()), (0, ""));
    }
}
