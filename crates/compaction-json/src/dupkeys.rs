//! Finding objects that repeat a key. A JSON parser keeps the last value of a repeated key and
//! says nothing; a log with `{"role": "user", "role": "assistant"}` would then be read as
//! something it may not be. Readers report repeated keys once, as a note.

use std::sync::OnceLock;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

/// What [`scan_keys`] finds.
#[derive(Debug, Default)]
pub struct Keys {
    /// How many objects repeat a key, and the first key repeated.
    pub repeated: Option<(usize, String)>,
    /// Whether a key is written with an escape: two keys written differently may then be the
    /// same, which the comparison as written does not see.
    pub escaped: bool,
}

/// The objects in `json` that repeat a key, and whether any key is written with an escape. One
/// pass over the bytes; string contents are skipped, keys compared as written.
///
/// Strings hold most of a log's bytes, and logs escape often (a quote or a line break every few
/// dozen bytes of a tool's output): the bytes are taken 64 at a time (a `Strings` scan), which tells
/// where every string starts and ends without stopping at its escapes, and only the quotes and
/// the bytes between strings are looked at one by one.
///
/// On valid JSON it finds what a byte-by-byte scan finds. On bytes that are not JSON (a
/// backslash between strings, a string left open) the two may differ; every caller's parse
/// fails there, and what the scan found is dropped with the error.
pub fn scan_keys(json: &[u8]) -> Keys {
    let mut escaped = false;
    // The keys of the open objects, the innermost object's last, and per open container the
    // object's frame (where its keys start there) or `None` for an array: nothing is allocated
    // per object.
    let mut keys: Vec<&[u8]> = Vec::new();
    let mut stack: Vec<Option<Frame<'_>>> = Vec::new();
    let mut expect_key = false;
    // Where the key being crossed starts.
    let mut key_start = None;
    let mut count = 0;
    let mut first: Option<String> = None;
    let mut strings = Strings::default();
    for (base, chunk) in (0..).step_by(BLOCK).zip(json.chunks(BLOCK)) {
        let (inside, quotes) = match <&[u8; BLOCK]>::try_from(chunk) {
            Ok(block) => strings.next(block),
            Err(_) => {
                // The last few bytes, padded with blanks.
                let mut block = [b' '; BLOCK];
                block[..chunk.len()].copy_from_slice(chunk);
                strings.next(&block)
            }
        };
        // The bytes between strings, with the quotes that open and close strings; past the end
        // of `json` there are none.
        let mut events = (!inside | quotes) & (u64::MAX >> (BLOCK - chunk.len()));
        while events != 0 {
            let bit = events.trailing_zeros() as usize;
            events &= events - 1;
            let at = base + bit;
            match json[at] {
                b'"' if inside & (1 << bit) != 0 => {
                    // A string opens: a key, where one is expected in an object.
                    if expect_key && matches!(stack.last(), Some(Some(_))) {
                        key_start = Some(at + 1);
                    }
                    expect_key = false;
                }
                b'"' => {
                    let (Some(start), Some(Some(frame))) = (key_start.take(), stack.last_mut()) else {
                        continue;
                    };
                    let key = &json[start..at];
                    escaped |= key.contains(&b'\\');
                    if frame.insert(&mut keys, key) && !frame.repeated {
                        // Counted once per object.
                        frame.repeated = true;
                        count += 1;
                        first.get_or_insert_with(|| String::from_utf8_lossy(key).into_owned());
                    }
                }
                b'{' => {
                    stack.push(Some(Frame { start: keys.len(), set: None, repeated: false }));
                    expect_key = true;
                }
                b'[' => {
                    stack.push(None);
                    expect_key = false;
                }
                b'}' | b']' => {
                    if let Some(Some(frame)) = stack.pop() {
                        keys.truncate(frame.start);
                    }
                    expect_key = false;
                }
                b',' => expect_key = matches!(stack.last(), Some(Some(_))),
                b':' => expect_key = false,
                _ => {}
            }
        }
    }
    Keys { repeated: first.map(|key| (count, key)), escaped }
}

impl Keys {
    /// Records an object that repeats `key`; called once per object, at its first repeat.
    pub fn repeat(&mut self, key: &str) {
        match &mut self.repeated {
            Some((count, _)) => *count += 1,
            None => self.repeated = Some((1, key.to_owned())),
        }
    }

    /// Adds what was found in another part of the same input.
    pub fn merge(&mut self, other: Keys) {
        self.escaped |= other.escaped;
        if let Some((count, key)) = other.repeated {
            match &mut self.repeated {
                Some((mine, _)) => *mine += count,
                None => self.repeated = Some((count, key)),
            }
        }
    }
}

/// The second way to find repeated keys, for a reader that builds the values it reads anyway:
/// [`Tracked`] builds a `serde_json::Value` as serde_json's own `Value` does, and tells `keys` of
/// each object that repeats a key and of each key written with an escape. The parse is the
/// scan: nothing is read twice. Keys are compared decoded, so an escape hides no repeat (where
/// [`scan_keys`] compares them as written and can only say that an escape was seen).
///
/// A value nested deeper than [`Tracked::DEPTH`] is an error: it is left to a whole parse of its
/// text, which has serde_json's own limit.
#[derive(Debug)]
pub struct Tracked<'k> {
    keys: &'k mut Keys,
    /// How deep the value built is in the one the build started with.
    depth: usize,
}

impl<'k> Tracked<'k> {
    /// How deep a value is built; deeper is an error.
    pub const DEPTH: usize = 100;

    /// A build that tells `keys` what it finds.
    pub fn new(keys: &'k mut Keys) -> Self {
        Tracked { keys, depth: 0 }
    }

    /// The build of a value one level deeper; an error past [`Tracked::DEPTH`].
    fn inner<E: de::Error>(&mut self) -> Result<Tracked<'_>, E> {
        if self.depth == Self::DEPTH {
            return Err(E::custom("nested too deep"));
        }
        Ok(Tracked { keys: &mut *self.keys, depth: self.depth + 1 })
    }
}

/// `text`, one JSON value, built with [`Tracked`].
pub fn tracked_value(text: &str, keys: &mut Keys) -> serde_json::Result<Value> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = Tracked::new(keys).deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// The key serde_json's `arbitrary_precision` feature hands a number under, as a one-entry map
/// whose value is the number as written; `None` without the feature. Learned from serde_json
/// itself, by reading a number, rather than named: the name is private to serde_json, and a
/// release may change it.
fn number_key() -> Option<&'static str> {
    static KEY: OnceLock<Option<String>> = OnceLock::new();
    KEY.get_or_init(|| {
        /// The first key of the map a number is handed as, if it is handed as one.
        struct FirstKey;
        impl<'de> Visitor<'de> for FirstKey {
            type Value = Option<String>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number")
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let key = map.next_key::<String>()?;
                if key.is_some() {
                    map.next_value::<IgnoredAny>()?;
                }
                Ok(key)
            }
        }
        // A float: serde_json hands integers that fit a `u64` or `i64` as those.
        serde_json::Deserializer::from_str("0.5").deserialize_any(FirstKey).ok().flatten()
    })
    .as_deref()
}

impl<'de> DeserializeSeed<'de> for Tracked<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Tracked<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }
    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Number::from_f64(n).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        let mut this = self;
        while let Some(item) = seq.next_element_seed(this.inner()?)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        let mut repeated = false;
        let mut this = self;
        while let Some(key) = map.next_key_seed(KeySeed(&mut *this.keys))? {
            if object.is_empty() && Some(key.as_str()) == number_key() {
                // A number, kept as written: serde_json reads its text as it reads any number.
                let written: String = map.next_value()?;
                return serde_json::from_str(&written).map_err(de::Error::custom);
            }
            // A repeat is told at its key, before its value, as the scan tells it.
            match object.entry(key) {
                // The last value is kept where the first one was, as a parsed object keeps it.
                Entry::Occupied(mut entry) => {
                    if !repeated {
                        repeated = true;
                        this.keys.repeat(entry.key());
                    }
                    entry.insert(map.next_value_seed(this.inner()?)?);
                }
                Entry::Vacant(entry) => {
                    entry.insert(map.next_value_seed(this.inner()?)?);
                }
            }
        }
        Ok(Value::Object(object))
    }
}

/// A key, owned; one written with an escape (decoded by serde_json, not borrowed) is told.
struct KeySeed<'k>(&'k mut Keys);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = String;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a key")
    }
    fn visit_borrowed_str<E>(self, key: &'de str) -> Result<String, E> {
        Ok(key.to_owned())
    }
    fn visit_str<E>(self, key: &str) -> Result<String, E> {
        self.0.escaped = true;
        Ok(key.to_owned())
    }
}

/// How many bytes [`Strings`] takes at a time: one bit each in a `u64`.
const BLOCK: usize = 64;

/// Where the strings are in JSON taken [`BLOCK`] bytes at a time, carrying from one block to the
/// next whether a string is open and whether its last byte was an escaping backslash.
///
/// The bytes of a block become bit masks (a quote here, a backslash there); the quotes that
/// escapes do not take are those that open and close strings; the bits between an opening quote
/// and its closing one are those whose count of such quotes up to them is odd. The escapes are
/// found as simdjson finds them (backslash runs of odd length escape the byte after them).
#[derive(Default)]
struct Strings {
    /// 1 when the last block ended in a run of backslashes of odd length.
    escaping: u64,
    /// All ones when the last block ended inside a string.
    open: u64,
}

impl Strings {
    /// Of the next block: the bytes inside strings (an opening quote with them, the closing one
    /// not), and the quotes that open or close a string.
    fn next(&mut self, block: &[u8; BLOCK]) -> (u64, u64) {
        let (quotes, backslashes) = masks(block);
        let quotes = quotes & !self.escaped(backslashes);
        // Each bit the parity of the quotes up to it, the carried string counted.
        let mut inside = quotes;
        for shift in [1, 2, 4, 8, 16, 32] {
            inside ^= inside << shift;
        }
        inside ^= self.open;
        self.open = 0u64.wrapping_sub(inside >> 63);
        (inside, quotes)
    }

    /// The bytes escaped by a backslash run of odd length before them.
    fn escaped(&mut self, backslashes: u64) -> u64 {
        const EVEN: u64 = 0x5555_5555_5555_5555;
        const ODD: u64 = !EVEN;
        let starts = backslashes & !(backslashes << 1);
        // A run carried from the last block of odd length flips which starts are even.
        let even_start_mask = EVEN ^ self.escaping;
        let even_starts = starts & even_start_mask;
        let odd_starts = starts & !even_start_mask;
        let even_carries = backslashes.wrapping_add(even_starts);
        let (mut odd_carries, overflow) = backslashes.overflowing_add(odd_starts);
        odd_carries |= self.escaping;
        self.escaping = u64::from(overflow);
        let even_carry_ends = even_carries & !backslashes;
        let odd_carry_ends = odd_carries & !backslashes;
        (even_carry_ends & ODD) | (odd_carry_ends & EVEN)
    }
}

/// The quotes and the backslashes of a block, a bit for each byte. The comparisons are written
/// so that the compiler does them a vector at a time; each 8 bytes of 0 or 1 are then gathered
/// into 8 bits by one multiplication.
fn masks(block: &[u8; BLOCK]) -> (u64, u64) {
    let mut quotes = [0u8; BLOCK];
    let mut backslashes = [0u8; BLOCK];
    for ((byte, quote), backslash) in block.iter().zip(&mut quotes).zip(&mut backslashes) {
        *quote = u8::from(*byte == b'"');
        *backslash = u8::from(*byte == b'\\');
    }
    (gather(&quotes), gather(&backslashes))
}

/// Bit `k` set where `bytes[k]` is 1 (each byte is 0 or 1).
fn gather(bytes: &[u8; BLOCK]) -> u64 {
    let mut bits = 0;
    for (k, word) in bytes.chunks_exact(8).enumerate() {
        let word = u64::from_le_bytes(word.try_into().unwrap_or_default());
        // Byte j's bit lands on bit 56 + j; no two products overlap, so nothing carries.
        bits |= (word.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * k);
    }
    bits
}

/// One open object: where its keys start in the list of the open objects' keys, and once it has
/// many, a set of them instead.
struct Frame<'a> {
    start: usize,
    set: Option<std::collections::HashSet<&'a [u8]>>,
    repeated: bool,
}

impl<'a> Frame<'a> {
    /// Adds `key`, to `keys` (the open objects' keys, this object's last) or to the set; true
    /// when the object had it already.
    fn insert(&mut self, keys: &mut Vec<&'a [u8]>, key: &'a [u8]) -> bool {
        const SHORT: usize = 32;
        if let Some(set) = &mut self.set {
            return !set.insert(key);
        }
        let own = &keys[self.start..];
        if own.contains(&key) {
            return true;
        }
        keys.push(key);
        if keys.len() - self.start == SHORT {
            self.set = Some(keys[self.start..].iter().copied().collect());
        }
        false
    }
}

#[cfg(test)]
mod tests {
    /// The marker serde_json hands a number under is learned, not named: it is found, and a
    /// number built with it reads as serde_json reads it.
    #[test]
    fn the_number_marker_is_learned_from_serde_json() {
        assert!(super::number_key().is_some_and(|key| key.starts_with('$')));
        let mut keys = Keys::default();
        let value = super::tracked_value("[1.50e3, -0, 123456789012345678901234567890]", &mut keys).unwrap();
        assert_eq!(
            value,
            serde_json::from_str::<Value>("[1.50e3, -0, 123456789012345678901234567890]").unwrap()
        );
        assert!(value[0].is_number() && value[2].is_number());
    }

    use serde_json::Value;

    use super::{scan_keys, Keys};

    fn repeated_keys(json: &[u8]) -> Option<(usize, String)> {
        scan_keys(json).repeated
    }

    /// The scan this module made before [`scan_keys`] took 64 bytes at a time, a byte at a time
    /// (strings crossed with `memchr2`): what it finds, the new one must find.
    fn reference(json: &[u8]) -> Keys {
        let mut escaped = false;
        // Per open object: its keys so far and whether it repeated one; `None` for an array.
        let mut stack: Vec<Option<RefFrame<'_>>> = Vec::new();
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
                    stack.push(Some(RefFrame::default()));
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
    struct RefFrame<'a> {
        keys: Vec<&'a [u8]>,
        set: std::collections::HashSet<&'a [u8]>,
        repeated: bool,
    }

    impl<'a> RefFrame<'a> {
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

    /// JSON-like text with many strings holding escaped quotes and backslash runs of every length,
    /// across blocks: structure at random, every string closed.
    fn tricky(seed: u64, len: usize) -> Vec<u8> {
        let mut state = seed;
        let mut next = |n: usize| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as usize % n
        };
        let between: [&[u8]; 9] =
            [b"{", b"}", b"[", b"]", b", ", b": ", b"    ", b"1", br#"{"a": 0, "a": 1}"#];
        let within: [&[u8]; 6] = [b"a", b"b", b"\\\\", b"\\\"", b"\\n", b"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"];
        let mut out = Vec::new();
        while out.len() < len {
            if next(2) == 0 {
                out.extend_from_slice(between[next(between.len())]);
                continue;
            }
            out.push(b'"');
            for _ in 0..next(4) {
                out.extend_from_slice(within[next(within.len())]);
            }
            out.push(b'"');
        }
        out
    }

    /// Whether every backslash of `json` is in a string, and every string is closed.
    fn well_quoted(json: &[u8]) -> bool {
        let mut inside = false;
        let mut at = 0;
        while at < json.len() {
            match json[at] {
                b'\\' if !inside => return false,
                b'\\' => at += 1,
                b'"' => inside = !inside,
                _ => {}
            }
            at += 1;
        }
        !inside
    }

    #[test]
    fn the_block_scan_finds_what_the_byte_scan_found() {
        let (mut checked, mut repeated, mut escaped) = (0, 0, 0);
        for seed in 0..2000 {
            let json = tricky(seed, 40 + (seed as usize * 7) % 400);
            for start in [0, 1, 7, 31] {
                let json = &json[start.min(json.len())..];
                // Where JSON could not be (a backslash between strings, a string left open), the
                // scans may differ: a parse fails there, and the scan is not used.
                if !well_quoted(json) {
                    continue;
                }
                checked += 1;
                let (new, old) = (scan_keys(json), reference(json));
                repeated += usize::from(old.repeated.is_some());
                escaped += usize::from(old.escaped);
                assert_eq!(
                    (new.repeated, new.escaped),
                    (old.repeated, old.escaped),
                    "{}",
                    String::from_utf8_lossy(json)
                );
            }
        }
        assert!(checked > 1000 && repeated > 100 && escaped > 100, "{checked} {repeated} {escaped}");
    }

    /// Random JSON that repeats keys, writes some with an escape, and holds numbers of every
    /// spelling and strings with escapes, nested a few levels.
    fn random_json(seed: u64) -> String {
        fn value(next: &mut dyn FnMut(usize) -> usize, depth: usize, out: &mut String) {
            const KEYS: [&str; 5] = ["a", "b", "role", r"a\\", r"\u0061"];
            const LEAVES: [&str; 10] = [
                "1",
                "-0",
                "1.50e3",
                "12345678901234567890123",
                "0.1",
                "true",
                "null",
                r#""x\"y""#,
                r#""é""#,
                "2",
            ];
            match (depth, next(4)) {
                (3.., _) | (_, 0) => out.push_str(LEAVES[next(LEAVES.len())]),
                (_, 1) => {
                    out.push('[');
                    for k in 0..next(4) {
                        out.push_str(if k > 0 { ", " } else { "" });
                        value(next, depth + 1, out);
                    }
                    out.push(']');
                }
                _ => {
                    out.push('{');
                    for k in 0..next(5) {
                        out.push_str(if k > 0 { ", " } else { "" });
                        // Mostly plain keys, so repeats are not all hidden behind an escape.
                        let key = if next(4) == 0 { KEYS[next(KEYS.len())] } else { KEYS[next(3)] };
                        out.push_str(&format!("\"{key}\": "));
                        value(next, depth + 1, out);
                    }
                    out.push('}');
                }
            }
        }
        let mut state = seed;
        let mut next = |n: usize| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as usize % n
        };
        let mut out = String::new();
        value(&mut next, 0, &mut out);
        out
    }

    #[test]
    fn the_tracked_build_builds_what_serde_json_builds_and_finds_what_the_scan_finds() {
        let (mut repeated, mut escaped) = (0, 0);
        for seed in 0..3000 {
            let json = random_json(seed);
            let mut keys = Keys::default();
            let built = super::tracked_value(&json, &mut keys).unwrap();
            let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
            assert_eq!((&built, built.to_string()), (&parsed, parsed.to_string()), "{json}");
            let scanned = scan_keys(json.as_bytes());
            assert_eq!(keys.escaped, scanned.escaped, "{json}");
            escaped += usize::from(keys.escaped);
            // Compared as written, an escape can hide a repeat from the scan; otherwise the two
            // find the same objects and the same first key.
            if !keys.escaped {
                assert_eq!(keys.repeated, scanned.repeated, "{json}");
                repeated += usize::from(keys.repeated.is_some());
            }
        }
        assert!(repeated > 300 && escaped > 300, "{repeated} {escaped}");
        // A repeat hidden by an escape is found all the same.
        let mut keys = Keys::default();
        super::tracked_value(r#"{"a": 1, "\u0061": 2}"#, &mut keys).unwrap();
        assert_eq!((keys.repeated, keys.escaped), (Some((1, "a".to_owned())), true));
        // Bad JSON is an error, as serde_json's own parse gives it.
        for bad in [r#"{"a": }"#, "[1,]", r#"{"a": 1} x"#, "\"\\x\""] {
            let ours = super::tracked_value(bad, &mut Keys::default()).unwrap_err().to_string();
            let theirs = serde_json::from_str::<serde_json::Value>(bad).unwrap_err().to_string();
            assert_eq!(ours, theirs, "{bad}");
        }
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
        // Many keys (past the short list), with objects in between that use the same keys.
        let many: Vec<String> =
            (0..40).map(|k| format!("\"k{k}\": {{\"k{k}\": 1, \"x\": [{{\"k0\": 2}}]}}")).collect();
        let many = format!("{{{}}}", many.join(", "));
        assert_eq!(repeated_keys(many.as_bytes()), None);
        let again = format!("{}, \"k35\": 0, \"k3\": 1}}", many.strip_suffix('}').unwrap());
        assert_eq!(repeated_keys(again.as_bytes()), Some((1, "k35".to_owned())));
        // Keys written with an escape are told, values with one are not.
        assert!(scan_keys(br#"{"a\u0062": 1}"#).escaped);
        assert!(!scan_keys(br#"{"a": "\u0062", "b": ["\n"]}"#).escaped);
    }
}
