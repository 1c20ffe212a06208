//! The differential fuzz: random JSON text (escapes of every kind, surrogate pairs and lone
//! surrogates, numbers of every form, nesting up to and past the scans' depth, whitespace),
//! then perhaps spoiled by byte mutations, and every scan of the crate held beside serde_json:
//! where a value ends, whether it is accepted, the strings decoded, the values built, the
//! members found.

use compaction_json::dupkeys::{scan_keys, tracked_value, Keys};
use compaction_json::scan::{self, value_end, DEPTH};
use compaction_json::splice;
use compaction_json::string;
use proptest::prelude::*;
use serde::de::IgnoredAny;
use serde_json::Value;

/// Blank space between tokens, as JSON allows it.
fn space() -> impl Strategy<Value = String> {
    prop_oneof![Just(""), Just(""), Just(" "), Just("\n  "), Just("\t"), Just("\r\n")].prop_map(str::to_owned)
}

/// A number in every form JSON has: sign, zero or digits, fraction, exponent of either case and
/// sign; integers past `u64`, floats past `f64`.
fn number() -> impl Strategy<Value = String> {
    let int = prop_oneof![Just("0".to_owned()), "[1-9][0-9]{0,25}"];
    let frac = prop_oneof![Just(String::new()), "\\.[0-9]{1,20}"];
    let exp = prop_oneof![Just(String::new()), "[eE][+-]?[0-9]{1,3}"];
    (any::<bool>(), int, frac, exp)
        .prop_map(|(minus, i, f, e)| format!("{}{i}{f}{e}", if minus { "-" } else { "" }))
}

/// One piece of a string's contents: plain text, a character beyond ASCII, or an escape of any
/// kind (a surrogate pair, and half of one alone).
fn string_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z ]{0,12}",
        1 => "[é日本😀ключ]{1,3}",
        1 => prop_oneof![
            Just(r#"\""#), Just(r"\\"), Just(r"\/"), Just(r"\b"), Just(r"\f"), Just(r"\n"), Just(r"\r"),
            Just(r"\t"),
        ]
        .prop_map(str::to_owned),
        1 => (0u32..0xD800).prop_map(|u| format!("\\u{u:04x}")),
        1 => (0xD800u32..0xDC00, 0xDC00u32..0xE000).prop_map(|(h, l)| format!("\\u{h:04X}\\u{l:04x}")),
        1 => (0xD800u32..0xE000).prop_map(|u| format!("\\u{u:04x}")),
    ]
}

fn json_string() -> impl Strategy<Value = String> {
    prop::collection::vec(string_piece(), 0..6).prop_map(|pieces| format!("\"{}\"", pieces.concat()))
}

/// A JSON value's text, nested a few levels.
fn json_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        number(),
        json_string(),
        Just("true".to_owned()),
        Just("false".to_owned()),
        Just("null".to_owned()),
    ];
    leaf.prop_recursive(6, 64, 5, |inner| {
        prop_oneof![
            prop::collection::vec((space(), inner.clone(), space()), 0..5).prop_map(|items| {
                let items: Vec<String> = items.into_iter().map(|(a, v, b)| format!("{a}{v}{b}")).collect();
                format!("[{}]", items.join(","))
            }),
            prop::collection::vec(
                (
                    space(),
                    prop_oneof![Just(r#""k""#.to_owned()), Just(r#""a""#.to_owned()), json_string()],
                    space(),
                    inner,
                ),
                0..5
            )
            .prop_map(|members| {
                let members: Vec<String> =
                    members.into_iter().map(|(a, k, b, v)| format!("{a}{k}{b}:{a}{v}")).collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    })
}

/// A value, perhaps deep (around the scans' depth), perhaps spoiled by up to three byte
/// mutations; kept UTF-8 as the callers of the scans check it to be.
fn text() -> impl Strategy<Value = Vec<u8>> {
    const BYTES: &[u8] = b"\"\\,:{}[]0-.eE+ \x01\x1fatfnu/x\nD8";
    let deep = (DEPTH - 3..DEPTH + 3, any::<bool>()).prop_map(|(n, object)| {
        if object {
            format!("{}1{}", r#"{"a":"#.repeat(n), "}".repeat(n))
        } else {
            format!("{}{}", "[".repeat(n), "]".repeat(n))
        }
    });
    let base = prop_oneof![9 => json_value(), 1 => deep];
    // Escapes JSON does not have, and what only looks like one.
    const SNIPPETS: &[&str] = &[r"\x", r"\u12g4", r"\U0041", r"\'", r"\ud800", r"\", "\u{1}", r"\u00"];
    let mutation =
        (0..4u8, any::<prop::sample::Index>(), prop::sample::select(BYTES), prop::sample::select(SNIPPETS));
    (base, prop::collection::vec(mutation, 0..4)).prop_map(|(text, mutations)| {
        let mut bytes = text.into_bytes();
        for (kind, at, byte, snippet) in mutations {
            let at = at.index(bytes.len() + 1);
            match kind {
                0 => bytes.insert(at, byte),
                3 => {
                    bytes.splice(at..at, snippet.bytes());
                }
                1 if at < bytes.len() => {
                    bytes.remove(at);
                }
                _ if at < bytes.len() => bytes[at] = byte,
                _ => {}
            }
        }
        if std::str::from_utf8(&bytes).is_err() {
            bytes.retain(u8::is_ascii);
        }
        bytes
    })
}

/// What serde_json says of `text` as one value to ignore, and where it ends.
fn serde_end(text: &[u8]) -> Option<usize> {
    let mut stream = serde_json::Deserializer::from_slice(text).into_iter::<IgnoredAny>();
    stream.next()?.ok()?;
    Some(stream.byte_offset())
}

/// How deep `text` nests, counting brackets outside strings (enough for text serde_json reads).
fn nesting(text: &[u8]) -> usize {
    let (mut depth, mut deepest, mut inside, mut escaped) = (0usize, 0, false, false);
    for &b in text {
        match (inside, b) {
            (true, _) if escaped => escaped = false,
            (true, b'\\') => escaped = true,
            (_, b'"') => inside = !inside,
            (false, b'[' | b'{') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (false, b']' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, failure_persistence: None, ..ProptestConfig::default() })]

    /// The checked scan accepts only what serde_json accepts, ends where it ends, and refuses
    /// nothing serde_json accepts that fits its depth.
    #[test]
    fn the_checked_scan_agrees_with_serde_json(text in text()) {
        let ours = value_end(&text, 0);
        let theirs = serde_end(&text);
        let scalar = text.first().is_some_and(|b| matches!(b, b'-' | b'0'..=b'9' | b't' | b'f' | b'n'));
        match ours {
            // A number or literal alone, followed by what cannot follow it: serde_json looks at
            // the byte after it, where in a container the container refuses that byte.
            Some(end) if theirs.is_none() && scalar => {
                let delimited = matches!(text.get(end), None | Some(b',' | b']' | b'}' | b' ' | b'\n' | b'\t' | b'\r'));
                prop_assert!(!delimited, "{}", String::from_utf8_lossy(&text));
            }
            Some(end) => prop_assert_eq!(Some(end), theirs, "{}", String::from_utf8_lossy(&text)),
            None => {}
        }
        let container = text.first().is_some_and(|b| matches!(b, b'{' | b'[' | b'"'));
        if theirs.is_some() && container && nesting(&text) <= DEPTH {
            prop_assert!(ours.is_some(), "{}", String::from_utf8_lossy(&text));
        }
        // The whole-text check says the same as serde_json reading the whole text.
        let whole = serde_json::from_slice::<IgnoredAny>(&text).is_ok();
        if nesting(&text) <= DEPTH {
            prop_assert_eq!(scan::check(&text).is_ok(), whole);
        } else {
            prop_assert!(scan::check(&text).is_err() || whole);
        }
    }

    /// The quick scan ends where serde_json ends on every text serde_json accepts.
    #[test]
    fn the_quick_scan_ends_where_serde_json_ends(text in text()) {
        if let (Some(end), true) = (serde_end(&text), nesting(&text) <= DEPTH) {
            if text.first().is_some_and(|b| matches!(b, b'{' | b'[' | b'"')) {
                prop_assert_eq!(scan::skip_value(&text, 0), Some(end));
            }
        }
    }

    /// A string decodes to what serde_json decodes, and is refused where serde_json refuses it
    /// (a lone surrogate, a control character, a bad escape, text cut short).
    #[test]
    fn strings_decode_as_serde_json_decodes_them(
        pieces in prop::collection::vec(string_piece(), 0..8),
        spoil in prop::option::of((any::<prop::sample::Index>(), prop::sample::select(b"\"\\u\x01xD8".as_slice()))),
    ) {
        let mut literal = format!("\"{}\"", pieces.concat()).into_bytes();
        if let Some((at, byte)) = spoil {
            let at = at.index(literal.len());
            literal[at] = byte;
        }
        let Ok(literal) = String::from_utf8(literal) else { return Ok(()) };
        let ours = string::decode(&literal).ok();
        let theirs = serde_json::from_str::<String>(&literal).ok();
        prop_assert_eq!(ours, theirs, "{}", literal);
    }

    /// A value built while its repeated keys are tracked is the value serde_json builds, or
    /// refused as serde_json refuses it; the byte scan of keys finds the same repeats.
    #[test]
    fn the_tracked_build_and_the_key_scan_agree_with_serde_json(text in text()) {
        let Ok(text) = String::from_utf8(text) else { return Ok(()) };
        let mut keys = Keys::default();
        let ours = tracked_value(&text, &mut keys).ok();
        let theirs = serde_json::from_str::<Value>(&text).ok();
        if nesting(text.as_bytes()) <= DEPTH {
            prop_assert_eq!(&ours, &theirs, "{}", text);
        }
        if ours.is_some() && !keys.escaped {
            prop_assert_eq!(scan_keys(text.as_bytes()).repeated, keys.repeated, "{}", text);
        }
    }

    /// On text serde_json reads, an object's members and an array's elements are spans whose
    /// bytes read as its values, and the value at a key is the one serde_json keeps.
    #[test]
    fn spans_hold_the_values_serde_json_reads(text in json_value()) {
        let Ok(value) = serde_json::from_str::<Value>(&text) else { return Ok(()) };
        if nesting(text.as_bytes()) > DEPTH {
            return Ok(());
        }
        let read = |range: std::ops::Range<usize>| serde_json::from_str::<Value>(&text[range]).ok();
        match &value {
            Value::Object(map) => {
                let members = splice::members(text.as_bytes(), 0).expect("an object's members");
                for (key, span) in &members {
                    let key = string::decode(&text[key.clone()]).expect("a key");
                    prop_assert!(map.contains_key(&key));
                    prop_assert!(read(span.clone()).is_some());
                }
                for key in map.keys() {
                    if !key.is_ascii() || key.contains(['"', '\\']) {
                        continue;
                    }
                    let key: &'static str = Box::leak(key.clone().into_boxed_str());
                    let span = splice::find(text.as_bytes(), 0, &[splice::Seg::Key(key)]).expect("the key's value");
                    prop_assert_eq!(read(span), Some(map[key].clone()));
                }
            }
            Value::Array(items) => {
                let elements = splice::elements(text.as_bytes(), 0).expect("an array's elements");
                prop_assert_eq!(elements.len(), items.len());
                for (span, item) in elements.into_iter().zip(items) {
                    prop_assert_eq!(read(span), Some(item.clone()));
                }
            }
            _ => {}
        }
    }
}
