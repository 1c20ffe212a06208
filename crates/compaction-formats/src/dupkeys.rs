//! Finding objects that repeat a key. A JSON parser keeps the last value of a repeated key and
//! says nothing; a log with `{"role": "user", "role": "assistant"}` would then be read as
//! something it may not be. Readers report repeated keys once, as a note.

/// What [`scan_keys`] finds.
#[derive(Debug, Default)]
pub(crate) struct Keys {
    /// How many objects repeat a key, and the first key repeated.
    pub repeated: Option<(usize, String)>,
    /// Whether a key is written with an escape: two keys written differently may then be the
    /// same, which the comparison as written does not see.
    pub escaped: bool,
}

/// The objects in `json` that repeat a key, and whether any key is written with an escape. One
/// pass over the bytes; string contents are skipped, keys compared as written.
pub(crate) fn scan_keys(json: &[u8]) -> Keys {
    let mut escaped = false;
    // Per open object: its keys so far and whether it repeated one; `None` for an array.
    let mut stack: Vec<Option<Frame<'_>>> = Vec::new();
    let mut expect_key = false;
    let mut count = 0;
    let mut first: Option<String> = None;
    let mut at = 0;
    while at < json.len() {
        match json[at] {
            b'"' => {
                let start = at + 1;
                let end = string_end(json, start);
                if expect_key {
                    if let Some(Some(frame)) = stack.last_mut() {
                        let key = &json[start..end];
                        escaped |= key.contains(&b'\\');
                        if frame.insert(key) && !frame.repeated {
                            // Counted once per object.
                            frame.repeated = true;
                            count += 1;
                            first.get_or_insert_with(|| String::from_utf8_lossy(key).into_owned());
                        }
                    }
                    expect_key = false;
                }
                at = end + 1;
                continue;
            }
            b'{' => {
                stack.push(Some(Frame::default()));
                expect_key = true;
            }
            b'[' => {
                stack.push(None);
                expect_key = false;
            }
            b'}' | b']' => {
                stack.pop();
                expect_key = false;
            }
            b',' => expect_key = matches!(stack.last(), Some(Some(_))),
            b':' => expect_key = false,
            _ => {}
        }
        at += 1;
    }
    Keys { repeated: first.map(|key| (count, key)), escaped }
}

/// Where the string whose contents start at `start` ends (its closing quote, or the end of
/// `json`). Strings hold most of a log's bytes: they are crossed a vector at a time.
fn string_end(json: &[u8], start: usize) -> usize {
    let mut at = start;
    while let Some(k) = memchr::memchr2(b'"', b'\\', &json[at..]) {
        at += k;
        if json[at] == b'"' {
            return at;
        }
        // An escape: the next byte is never the end.
        at += 2;
        if at >= json.len() {
            return json.len();
        }
    }
    json.len()
}

/// The keys of one open object: a short list, or a set once the object has many.
#[derive(Default)]
struct Frame<'a> {
    keys: Vec<&'a [u8]>,
    set: std::collections::HashSet<&'a [u8]>,
    repeated: bool,
}

impl<'a> Frame<'a> {
    /// Adds `key`; true when the object had it already.
    fn insert(&mut self, key: &'a [u8]) -> bool {
        const SHORT: usize = 32;
        if self.keys.len() < SHORT {
            if self.keys.contains(&key) {
                return true;
            }
            self.keys.push(key);
            if self.keys.len() == SHORT {
                self.set.extend(self.keys.iter().copied());
            }
            return false;
        }
        !self.set.insert(key)
    }
}

#[cfg(test)]
mod tests {
    use super::scan_keys;

    fn repeated_keys(json: &[u8]) -> Option<(usize, String)> {
        scan_keys(json).repeated
    }

    #[test]
    fn repeated_keys_are_found_once_per_object() {
        assert_eq!(repeated_keys(br#"{"a": 1, "b": {"a": 2}, "c": "\"a\": 3"}"#), None);
        assert_eq!(
            repeated_keys(
                br#"[{"role": "user", "role": "assistant", "role": "x"}, {"k": [1, {"k": 2, "k": 3}]}]"#
            ),
            Some((2, "role".to_owned()))
        );
        // Escaped quotes and backslashes inside strings, a key at the very end.
        assert_eq!(repeated_keys(br#"{"a\\": "\"", "a\\": "x\\\"", "b": 1}"#), Some((1, "a\\\\".to_owned())));
        assert_eq!(repeated_keys(br#"{"a": "\"#), None);
        // Keys written with an escape are told, values with one are not.
        assert!(scan_keys(br#"{"a\u0062": 1}"#).escaped);
        assert!(!scan_keys(br#"{"a": "\u0062", "b": ["\n"]}"#).escaped);
    }
}
