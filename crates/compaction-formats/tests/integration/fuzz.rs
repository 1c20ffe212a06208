//! Every reader over mutated inputs: no input makes the crate panic; each one it cannot read is
//! an error value.
//!
//! The corpus is `tests/data/fuzz/`: one small hand-made file (or a few) per format. Each seed is
//! read whole and cut at every prefix, then mutated with a fixed seed for a fixed number of cases
//! (`COMPACTION_FUZZ_CASES`, default 400; `COMPACTION_FUZZ_SEED` picks another sequence). Each
//! input goes through every way of reading it: told from the content, with each format named,
//! the full history, another conversation, line by line, the JSON Lines detection; and each
//! conversation read is written back unchanged, with a result pruned, with a message dropped, and
//! converted to each target. A panic fails the test, naming the input (kept under the test's
//! temporary folder) and the way it was read.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use compaction_formats::{Conversation, Format, LineReader, ReadOptions, Target};
use compaction_model::{Changes, Part, ToolResultContent};

/// A small xorshift: the cases are the same on every run and every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Bytes and words that steer a JSON reader somewhere else than the seed took it.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\"",
    b"\\",
    b"\n",
    b"\r\n",
    b" ",
    b"null",
    b"true",
    b"0",
    b"-1",
    b"1e999",
    b"1.5",
    b"\"\"",
    b"[]",
    b"{}",
    b"\\u",
    b"\\ud83d",
    b"\\u0000",
    b"\xEF\xBB\xBF",
    b"\xff",
    b"\xc3",
    b"NaN",
    b"\"type\"",
    b"\"role\"",
    b"\"content\"",
    b"\"messages\"",
    b"\"tool_calls\"",
    b"\"input\"",
    b"\"payload\"",
    b"\"output\"",
    b"\"call_id\"",
    b"\"action\"",
    b"\"history\"",
    b"\"tool_use\"",
    b"\"tool_result\"",
    b"\"user\"",
    b"\"assistant\"",
    b"\"tool\"",
];

/// One to four mutations of `seed`, some with a piece of `other`.
fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut bytes = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(bytes.len() + 1);
        match rng.below(7) {
            0 if at < bytes.len() => bytes[at] ^= 1 << rng.below(8),
            1 => {
                let token = TOKENS[rng.below(TOKENS.len())];
                bytes.splice(at..at, token.iter().copied());
            }
            2 if at < bytes.len() => {
                let end = (at + 1 + rng.below(16)).min(bytes.len());
                bytes.drain(at..end);
            }
            3 if at < bytes.len() => {
                let end = (at + 1 + rng.below(64)).min(bytes.len());
                let piece = bytes[at..end].to_vec();
                bytes.splice(end..end, piece);
            }
            4 if !other.is_empty() => {
                let from = rng.below(other.len());
                let end = (from + 1 + rng.below(128)).min(other.len());
                bytes.splice(at..at, other[from..end].iter().copied());
            }
            5 if at < bytes.len() => {
                let token = TOKENS[rng.below(TOKENS.len())];
                let end = (at + token.len()).min(bytes.len());
                bytes.splice(at..end, token.iter().copied());
            }
            _ => bytes.truncate(at),
        }
    }
    bytes
}

/// The seeds, by name, in a stable order.
fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz");
    let mut seeds: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            (path.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&path).unwrap())
        })
        .filter(|(name, _)| name != "README.md")
        .collect();
    seeds.sort();
    seeds
}

/// The ways of reading an input.
fn option_sets() -> Vec<ReadOptions> {
    let mut sets = vec![
        ReadOptions::named("fuzz"),
        ReadOptions::named("fuzz").with_full_history(true),
        ReadOptions::named("fuzz").with_conversation(1),
    ];
    for &format in Format::ALL {
        sets.push(ReadOptions::named("fuzz").with_format(format));
    }
    sets.push(ReadOptions::named("fuzz").with_format(Format::ClaudeCode).with_full_history(true));
    sets.push(ReadOptions::named("fuzz").with_format(Format::Codex).with_full_history(true));
    sets
}

/// Writes `conversation` every way a command does; errors are fine, panics are not.
fn write_every_way(conversation: &Conversation) {
    let messages = &conversation.messages;
    let mut out = Vec::new();
    let _ = compaction_formats::write(conversation, messages, None, &Changes::none(), &mut out);
    // A pruned-like change: the first tool result's text replaced.
    if let Some(index) = messages.iter().position(|m| m.tool_call_results().next().is_some()) {
        let mut changed = messages.clone();
        for part in &mut changed[index].parts {
            if let Part::ToolCallResult(result) = part {
                result.result = ToolResultContent::Text("[pruned]".into());
            }
        }
        changed[index].meta.insert("compaction".into(), serde_json::json!({"strategy": "fuzz"}));
        out.clear();
        let _ = compaction_formats::write(
            conversation,
            &changed,
            None,
            &Changes::in_place(vec![index]),
            &mut out,
        );
        out.clear();
        let _ = compaction_formats::write(conversation, &changed, None, &Changes::Unknown, &mut out);
    }
    // A message dropped, as a sliding window does.
    if messages.len() > 1 {
        let origin: Vec<Option<usize>> = (1..messages.len()).map(Some).collect();
        out.clear();
        let _ = compaction_formats::write(
            conversation,
            &messages[1..],
            None,
            &Changes::rewritten(origin),
            &mut out,
        );
    }
    for &target in Target::ALL {
        out.clear();
        let _ = compaction_formats::write(conversation, messages, Some(target), &Changes::Unknown, &mut out);
    }
}

/// Reads `bytes` with each of `sets` (and, given more than one, line by line too); the first
/// way that panics, if any.
fn exercise(bytes: &[u8], sets: &[ReadOptions]) -> Option<String> {
    for options in sets {
        let result =
            catch_unwind(AssertUnwindSafe(|| match compaction_formats::read(bytes.to_vec(), options) {
                Ok(conversation) => write_every_way(&conversation),
                Err(error) => assert!(!error.to_string().is_empty(), "an error with no words"),
            }));
        if result.is_err() {
            return Some(format!("read with {options:?}"));
        }
    }
    if sets.len() == 1 {
        return None;
    }
    for &format in Format::ALL {
        let options = ReadOptions::named("fuzz");
        let result = catch_unwind(AssertUnwindSafe(|| {
            let Some(mut reader) = LineReader::new(format, &options) else { return };
            for line in bytes.split(|&b| b == b'\n') {
                if reader.push(line).is_err() {
                    return;
                }
            }
            if let Ok(conversation) = reader.finish() {
                write_every_way(&conversation);
            }
            if let Some(mut reader) = LineReader::new(format, &options) {
                let _ = reader.push_lines(bytes).map(|()| reader.finish());
            }
        }));
        if result.is_err() {
            return Some(format!("LineReader of {format}"));
        }
    }
    catch_unwind(|| compaction_formats::detect_lines(bytes, "fuzz")).err().map(|_| "detect_lines".to_owned())
}

/// Where a panicking input is kept, to run it again.
fn keep(bytes: &[u8], number: usize) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-panics");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("case-{number}.bin"));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The message of the last panic caught.
static LAST_PANIC: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

fn number_from_env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn no_input_makes_a_reader_or_writer_panic() {
    let seeds = corpus();
    assert!(seeds.len() >= 8, "the fuzz corpus is missing");
    let cases = number_from_env("COMPACTION_FUZZ_CASES", 400) as usize;
    let mut rng = Rng(number_from_env("COMPACTION_FUZZ_SEED", 0x9E37_79B9_7F4A_7C15) | 1);
    let sets = option_sets();
    // Panics are caught and counted, each one's place and message kept instead of printed.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| *LAST_PANIC.lock().unwrap() = info.to_string()));
    let mut panics = Vec::new();
    let number = std::cell::Cell::new(0);
    let check = |bytes: &[u8], sets: &[ReadOptions], panics: &mut Vec<String>| {
        number.set(number.get() + 1);
        if let Some(way) = exercise(bytes, sets) {
            let path = keep(bytes, number.get());
            let what = LAST_PANIC.lock().unwrap().clone();
            panics.push(format!(
                "{what}\n  {} ({way}): {:?}",
                path.display(),
                String::from_utf8_lossy(bytes)
            ));
        }
    };
    let started = std::time::Instant::now();
    for (_, seed) in &seeds {
        check(seed, &sets, &mut panics);
        // Every prefix, a file cut short anywhere, read as the command reads it by default (the
        // format told from the content); the mutations below go every way.
        for end in 0..seed.len() {
            check(&seed[..end], &sets[..1], &mut panics);
        }
    }
    eprintln!("fuzz: {} inputs whole and cut in {:?}", number.get(), started.elapsed());
    for _ in 0..cases {
        let seed = &seeds[rng.below(seeds.len())].1;
        let other = &seeds[rng.below(seeds.len())].1;
        let bytes = mutate(&mut rng, seed, other);
        check(&bytes, &sets, &mut panics);
    }
    std::panic::set_hook(hook);
    eprintln!("fuzz: {} inputs in {:?}, {} panicked", number.get(), started.elapsed(), panics.len());
    assert!(
        panics.is_empty(),
        "{} inputs panicked; the first:\n{}",
        panics.len(),
        panics[..panics.len().min(5)].join("\n")
    );
}
