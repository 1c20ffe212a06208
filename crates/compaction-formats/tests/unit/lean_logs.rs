//! The lean log readers against the whole-tree reading they replace: on real Claude Code
//! sessions and on lines made to be awkward, reading only the fields a reader uses gives the
//! same messages, slots, usage, notes and compactions as parsing each line whole.
//!
//! These are unit tests (they reach the crate's private readers) kept outside `src/` because
//! they read files: the library's sources do no I/O. The real sessions are the shared corpus:
//! `$COMPACTION_CORPUS`, else `<repo>/../shared/transcripts/raw`; without it only the bundled
//! excerpt is compared.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::claude_code::{lean_event, lean_event_by, lean_event_in, walk_fields, Reader};
use crate::eventlog::{json_lines, Slot};
use compaction_json::dupkeys::scan_keys;
use compaction_json::splice::{find, find_unique};

/// The Claude Code sessions to compare: the bundled excerpt and the corpus's sessions.
fn claude_code_files() -> Vec<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![repo.join("examples/transcripts/claude-code/fa812bfe-excerpt.jsonl")];
    let corpus = std::env::var_os("COMPACTION_CORPUS")
        .map_or_else(|| repo.join("../shared/transcripts/raw"), PathBuf::from)
        .join("spotter-claude-code");
    match std::fs::read_dir(&corpus) {
        Ok(entries) => {
            let mut found: Vec<PathBuf> = entries
                .map(|entry| entry.unwrap().path())
                .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
                .collect();
            found.sort();
            assert!(!found.is_empty(), "no session in {}", corpus.display());
            files.extend(found);
        }
        Err(_) => eprintln!("skipped the corpus: no sessions at {}", corpus.display()),
    }
    files
}

/// How [`read`] reads each line.
#[derive(Clone, Copy, PartialEq)]
enum How {
    Whole,
    Lean,
    /// Lean, the tool results' texts left in the input.
    Left,
}

/// What a reader gives for `bytes`, each line read `how`: the messages, usage, notes and
/// compactions, and the bytes each tool result and input slot points at (the lean reading starts
/// its slots at the `message` it found); or the error's text.
fn read(bytes: &[u8], full_history: bool, how: How) -> String {
    let mut reader = Reader::new("t", full_history);
    let mut bases = Vec::new();
    let source = compaction_model::JsonSource::new(bytes.to_vec());
    for (base, (number, range)) in json_lines(bytes).enumerate() {
        let line = &bytes[range.clone()];
        bases.push(range.clone());
        let event = match how {
            How::Whole => crate::eventlog::Event::whole(serde_json::from_slice::<Value>(line).unwrap()),
            How::Lean => lean_event(line).expect("read lean").0,
            How::Left => lean_event_in(&source, range).expect("read lean").0,
        };
        if let Err(error) = reader.line(number, base as u32, event) {
            return format!("error: {error}");
        }
    }
    match reader.finish() {
        Ok(decoded) => {
            let place = |slot: &Option<Slot>| {
                slot.as_ref().map(|slot| {
                    let base = &bases[slot.base as usize];
                    let range =
                        find(&bytes[..base.end], base.start, &slot.path).expect("a slot points at a value");
                    // Where the reader saw the value, it is where the path leads.
                    if let Some([start, end]) = slot.span {
                        assert_eq!(base.start + start as usize..base.start + end as usize, range);
                    }
                    // Where no key repeats, the first occurrence on the path is the one.
                    let keys = scan_keys(&bytes[base.clone()]);
                    if keys.repeated.is_none() && !keys.escaped {
                        let unique = find_unique(&bytes[..base.end], base.start, &slot.path);
                        assert_eq!(unique, Some(range.clone()));
                    }
                    (range, slot.style)
                })
            };
            let slots: Vec<_> = decoded
                .slots
                .iter()
                .map(|m| {
                    (
                        m.results.iter().map(place).collect::<Vec<_>>(),
                        m.calls.iter().map(place).collect::<Vec<_>>(),
                    )
                })
                .collect();
            format!(
                "{:?}\n{:?}\n{:?}\n{:?}\n{slots:?}",
                decoded.messages, decoded.usage, decoded.notes, decoded.compactions
            )
        }
        Err(error) => format!("error: {error}"),
    }
}

#[test]
fn real_sessions_read_lean_as_they_read_whole() {
    for path in claude_code_files() {
        let bytes = std::fs::read(&path).unwrap();
        for full_history in [false, true] {
            let whole = read(&bytes, full_history, How::Whole);
            assert!(whole.starts_with("[Message"), "{}: {whole:.200}", path.display());
            for how in [How::Lean, How::Left] {
                assert!(
                    whole == read(&bytes, full_history, how),
                    "{} (full history: {full_history})",
                    path.display()
                );
            }
        }
    }
}

#[test]
fn awkward_lines_read_lean_as_they_read_whole() {
    let lines = [
        // An escaped key, a repeated `message` (the last counts), numbers kept as written.
        r#"{"typ\u0065":"user","message":{"role":"user","content":"first"},"message":{"role":"user","content":"Hi 1.50e3"}}"#,
        // `toolUseResult` and the envelope around an assistant reply with usage.
        r#"{"uuid":"u","toolUseResult":{"stdout":"x","nested":[1,{"a":[]}]},"type":"assistant","isSidechain":false,"message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"c1","name":"sh","input":{"n":1.0}}],"usage":{"input_tokens":3,"output_tokens":2}}}"#,
        r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"out"}]},"toolUseResult":"out"}"#,
        // `type` after `message`, then given twice (the last one counts).
        r#"{"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"late"}]},"type":"user"}"#,
        r#"{"type":"user","message":{"role":"user","content":"x"},"type":"progress"}"#,
        r#"{"type":"progress","message":{"role":"user","content":"y"},"type":"assistant"}"#,
        // Skipped: progress (with a `message` of its own), a subtype, an untyped line.
        r#"{"type":"progress","message":{"not":"read"},"data":{"message":{"role":"user"}}}"#,
        r#"{"type":"system","subtype":"informational","content":"note"}"#,
        r#"{"uuid":"x"}"#,
        // A sidechain line in the main conversation.
        r#"{"type":"user","isSidechain":true,"message":{"role":"user","content":"sub"}}"#,
        r#"{"type":"system","subtype":"compact_boundary","compactMetadata":{"preTokens":123}}"#,
        r#"{"type":"user","isCompactSummary":true,"message":{"role":"user","content":"This session is being continued"}}"#,
        // Tool results whose texts are left in the input, escaped or not, as a string or as text
        // blocks, beside blocks that are not text; an empty text; `type` after `content`.
        r#"{"type":"assistant","message":{"id":"m2","role":"assistant","content":[{"type":"tool_use","id":"c2","name":"sh","input":{}},{"type":"tool_use","id":"c3","name":"sh","input":{}},{"type":"tool_use","id":"c4","name":"sh","input":{}}]}}"#,
        r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"c2","content":"a \"quoted\" line\nand caf\u00e9 \ud83d\ude00 日本"},{"content":[{"type":"text","text":"first"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}},{"text":"","type":"text"}],"type":"tool_result","tool_use_id":"c3"}]}}"#,
        // Strings at a result's places in blocks that are not results, and a text in a result
        // block that is not text: read as they are, never lost.
        r#"{"type":"user","message":{"role":"user","content":[{"type":"compaction","content":"a summary \u00e9"},{"type":"tool_result","tool_use_id":"c4","content":[{"type":"mystery","text":"kept \n as is"}]},{"type":"text","text":"plain","content":"extra"}]}}"#,
        // A repeated key on the way to a result's text: the message is built by serde_json.
        r#"{"type":"assistant","message":{"id":"m3","role":"assistant","content":[{"type":"tool_use","id":"c5","name":"sh","input":{}}]}}"#,
        r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"c5","content":"gone","content":[{"type":"text","text":"kept","text":"last"}]}]}}"#,
    ];
    let bytes = lines.join("\n").into_bytes();
    for full_history in [false, true] {
        let whole = read(&bytes, full_history, How::Whole);
        assert_eq!(read(&bytes, full_history, How::Lean), whole);
        assert_eq!(read(&bytes, full_history, How::Left), whole);
    }
    // What is left in the input: the tool results' texts, and nothing else.
    let left = |k: usize| {
        let source = compaction_model::JsonSource::new(lines[k].as_bytes().to_vec());
        let mut left = lean_event_in(&source, 0..lines[k].len()).expect("read lean").0.found;
        let mut texts = Vec::new();
        for (block, item) in [(0, None), (1, Some(0)), (1, Some(1)), (1, Some(2)), (0, Some(0)), (1, None)] {
            texts.extend(left.take(block, item).map(|text| (block, item, text.to_string())));
        }
        texts
    };
    let results = vec![
        (0, None, "a \"quoted\" line\nand caf\u{e9} \u{1f600} 日本".to_owned()),
        (1, Some(0), "first".to_owned()),
        (1, Some(2), String::new()),
    ];
    assert_eq!(left(13), results);
    // And where each block's `content` lies.
    let source = compaction_model::JsonSource::new(lines[13].as_bytes().to_vec());
    let found = lean_event_in(&source, 0..lines[13].len()).expect("read lean").0.found;
    let span = |block| found.span(block).map(|[start, end]| &lines[13][start as usize..end as usize]);
    assert_eq!(span(0), Some(r#""a \"quoted\" line\nand caf\u00e9 \ud83d\ude00 日本""#));
    assert!(span(1).is_some_and(|content| content.starts_with(r#"[{"type":"text","text":"first"}"#)));
    assert_eq!(span(2), None);
    assert_eq!(left(14), []);
    assert_eq!(left(16), []);
    // Lines the lean reading leaves to the whole parse: it reads them, or fails, as before.
    for line in [&b"[1,2]"[..], b"{\"a\":\"\xFF\"}", b"{\"type\":\"user\"", b"{} x"] {
        assert!(lean_event(line).is_none(), "{}", String::from_utf8_lossy(line));
    }
    // A `type` that is not a string is read lean only when well-formed, and then errs as whole.
    let odd = br#"{"type":["user"],"message":{"role":"user","content":"x"}}"#;
    assert_eq!(read(odd, false, How::Lean), read(odd, false, How::Whole));
}

/// A log of about `bytes` bytes: the bundled sample at `relative`, again and again.
fn long_log(relative: &str, bytes: usize) -> Vec<u8> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let sample = std::fs::read(repo.join("examples/transcripts").join(relative)).unwrap();
    let mut log = Vec::new();
    while log.len() < bytes {
        log.extend_from_slice(&sample);
        if !log.ends_with(b"\n") {
            log.push(b'\n');
        }
    }
    log
}

#[test]
fn a_log_reads_alike_on_one_thread_and_two() {
    let logs = [
        ("claude-code/fa812bfe-excerpt.jsonl", crate::Format::ClaudeCode),
        ("codex/rollout-2025-10-04T09-00-00-0199a1b2.jsonl", crate::Format::Codex),
    ];
    for (relative, format) in logs {
        let log = long_log(relative, 3 * crate::pipeline::PARALLEL_LOG);
        let options = crate::ReadOptions::named("t");
        let read = |log: &[u8], parallel| {
            crate::pipeline::read_log_on(
                &compaction_model::JsonSource::new(log.to_vec()),
                &options,
                format,
                parallel,
            )
            .map(|c| format!("{:?} {:?} {:?} {:?} {:?}", c.messages, c.usage, c.notes, c.compactions, c.back))
            .map_err(|e| e.to_string())
        };
        let one = read(&log, false);
        assert!(one.as_ref().is_ok_and(|text| text.len() > 1000), "{relative}: {one:?}");
        assert_eq!(read(&log, true), one, "{relative}");
        // A broken line, and another after it, far into the file: the first one is the error, alike.
        let mut broken = log.clone();
        let at = broken.len() * 2 / 3;
        let line_start = at + broken[at..].iter().position(|&b| b == b'\n').unwrap() + 1;
        broken.splice(line_start..line_start, b"{\"type\": \"user\", oops}\n[1]\n".iter().copied());
        let error = read(&broken, false).unwrap_err();
        assert!(error.contains("line"), "{relative}: {error}");
        assert_eq!(read(&broken, true).unwrap_err(), error, "{relative}");
    }
}

#[test]
fn lines_pushed_in_blocks_read_as_lines_pushed_one_at_a_time() {
    let mut log = b"\xEF\xBB\xBF".to_vec();
    log.extend(long_log("claude-code/fa812bfe-excerpt.jsonl", 3 * crate::pipeline::PARALLEL_LOG));
    // A blank line, a line ended by `\r\n`, and a last line without a line break.
    let at = log.len() / 2 + log[log.len() / 2..].iter().position(|&b| b == b'\n').unwrap() + 1;
    log.splice(at..at, b"  \n\r\n".iter().copied());
    let last = log.len() - 1;
    log.insert(last, b'\r');
    log.pop();
    let options = crate::ReadOptions::named("t");
    let one_at_a_time = |log: &[u8]| -> Result<String, String> {
        let mut reader = crate::LineReader::new(crate::Format::ClaudeCode, &options).unwrap();
        for line in log.split(|&b| b == b'\n') {
            reader.push(line).map_err(|e| e.to_string())?;
        }
        let c = reader.finish().map_err(|e| e.to_string())?;
        Ok(format!("{:?} {:?} {:?} {:?}", c.messages, c.usage, c.notes, c.compactions))
    };
    let in_blocks = |log: &[u8], cuts: &[usize]| -> Result<String, String> {
        let mut reader = crate::LineReader::new(crate::Format::ClaudeCode, &options).unwrap();
        let mut start = 0;
        for &cut in cuts.iter().chain([&log.len()]) {
            // Blocks of whole lines.
            let end = cut.min(log.len());
            let end = log[..end].iter().rposition(|&b| b == b'\n').map_or(start, |k| (k + 1).max(start));
            reader.push_lines(&log[start..end]).map_err(|e| e.to_string())?;
            start = end;
        }
        reader.push_lines(&log[start..]).map_err(|e| e.to_string())?;
        let c = reader.finish().map_err(|e| e.to_string())?;
        Ok(format!("{:?} {:?} {:?} {:?}", c.messages, c.usage, c.notes, c.compactions))
    };
    let one = one_at_a_time(&log);
    assert!(one.as_ref().is_ok_and(|text| text.len() > 1000), "{one:?}");
    for cuts in
        [&[][..], &[1000, 5000], &[crate::pipeline::PARALLEL_LOG + 17, 2 * crate::pipeline::PARALLEL_LOG + 3]]
    {
        assert_eq!(in_blocks(&log, cuts), one, "{cuts:?}");
    }
    // A broken line far into the file: the same error, with the same line number.
    let mut broken = log.clone();
    let at = broken.len() * 2 / 3;
    let line_start = at + broken[at..].iter().position(|&b| b == b'\n').unwrap() + 1;
    broken.splice(line_start..line_start, b"{\"type\": \"user\", oops}\n[1]\n".iter().copied());
    let error = one_at_a_time(&broken).unwrap_err();
    assert!(error.contains("line"), "{error}");
    assert_eq!(in_blocks(&broken, &[]).unwrap_err(), error);
    assert_eq!(in_blocks(&broken, &[5000, crate::pipeline::PARALLEL_LOG + 1]).unwrap_err(), error);
}

#[test]
fn repeated_keys_are_looked_for_in_what_is_read() {
    let keys = |line: &str| {
        let keys = lean_event(line.as_bytes()).unwrap().1;
        (keys.repeated, keys.escaped)
    };
    let once = |key: &str| Some((1, key.to_owned()));
    // In the message read, and among the event's own keys.
    let text =
        r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"a","text":"b"}]}}"#;
    assert_eq!(keys(text), (once("text"), false));
    let uuid = r#"{"type":"user","uuid":"a","uuid":"b","message":{"role":"user","content":"x"}}"#;
    assert_eq!(keys(uuid), (once("uuid"), false));
    let late = r#"{"message":{"role":"user","role":"user","content":"x"},"type":"user"}"#;
    assert_eq!(keys(late), (once("role"), false));
    // Not in what is skipped unread: the tool's output again in `toolUseResult`, a progress
    // event's payload, a message a later `type` makes one the model never saw.
    let result = r#"{"type":"user","message":{"role":"user","content":"x"},"toolUseResult":{"a":1,"a":2}}"#;
    assert_eq!(keys(result), (None, false));
    assert_eq!(keys(r#"{"type":"progress","message":{"a":1,"a":2}}"#), (None, false));
    let unread = r#"{"type":"user","message":{"role":"user","role":"user","content":"x"},"type":"progress"}"#;
    assert_eq!(keys(unread), (once("type"), false));
    // Only the last `message` given is read.
    let twice = r#"{"type":"user","message":{"a":1,"a":2},"message":{"role":"user","content":"x"}}"#;
    assert_eq!(keys(twice), (once("message"), false));
    // A key written with an escape is told, in the event or in its message.
    assert_eq!(keys(r#"{"typ\u0065":"user","message":{"role":"user","content":"x"}}"#), (None, true));
    assert_eq!(keys(r#"{"type":"user","message":{"rol\u0065":"user","content":"x"}}"#), (None, true));
}

/// The event as [`lean_event_by`] reads it, walked or not, for comparing the two.
fn both_ways(line: &[u8]) -> (String, String) {
    let show = |walk| {
        format!(
            "{:?}",
            lean_event_by(line, walk, None).map(|(e, k)| (e.value, e.message_at, k.repeated, k.escaped))
        )
    };
    (show(true), show(false))
}

#[test]
fn walking_an_event_reads_what_serde_json_reads() {
    let mut lines: Vec<Vec<u8>> = Vec::new();
    for path in claude_code_files() {
        let bytes = std::fs::read(&path).unwrap();
        for (number, range) in json_lines(&bytes) {
            let line = &bytes[range];
            // Real events are walked: the walk is what reads a session.
            let text = std::str::from_utf8(line).unwrap();
            assert!(walk_fields(text, None).is_some(), "{}: line {number} was not walked", path.display());
            lines.push(line.to_vec());
        }
    }
    // Spoiled copies of real lines, and of lines made awkward: a byte put in, taken out or
    // changed, wherever it falls. The walk reads what serde_json reads, or leaves it.
    let awkward = [
        &br#"{"type":"user","message":{"role":"user","content":"x"},"toolUseResult":{"a":[1,2.5e3,-0,"\u00e9\n"],"b":null}}"#[..],
        br#"{"type":"assistant","isSidechain":false,"message":{"id":"m","role":"assistant","content":[{"type":"text","text":"t"}]}}"#,
        br#"{"message":{"role":"user","content":"late"},"type":"user","uuid":"u"}"#,
        br#"{"type":"system","subtype":"compact_boundary","compactMetadata":{"preTokens":5}}"#,
    ];
    let short: Vec<Vec<u8>> = lines.iter().filter(|l| l.len() < 4_000).take(200).cloned().collect();
    let mut state = 7u64;
    let mut next = |n: usize| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize % n
    };
    const BYTES: &[u8] = b"\"\\,:{}[]0-.eE+ \x01atfnu/x";
    let (mut walked, mut left) = (0, 0);
    for line in short.iter().map(Vec::as_slice).chain(awkward).cycle().take(6_000) {
        let mut spoiled = line.to_vec();
        let at = next(spoiled.len());
        match next(3) {
            0 => spoiled.insert(at, BYTES[next(BYTES.len())]),
            1 => {
                spoiled.remove(at);
            }
            _ => spoiled[at] = BYTES[next(BYTES.len())],
        }
        let (walk, parse) = both_ways(&spoiled);
        assert_eq!(walk, parse, "{}", String::from_utf8_lossy(&spoiled));
        match std::str::from_utf8(&spoiled).ok().and_then(|text| walk_fields(text, None)) {
            Some(_) => walked += 1,
            None => left += 1,
        }
    }
    assert!(walked > 1_000 && left > 1_000, "{walked} {left}");
    for line in &lines {
        let (walk, parse) = both_ways(line);
        assert_eq!(walk, parse);
    }
}
