//! Files in Python's JSON dialect, in every format: lone surrogate escapes (`"\ud83d"`) and
//! `NaN` / `Infinity` / `-Infinity`, as Python's `json.dumps` and Node's `JSON.stringify` write
//! them. Each is read, counted as the reference counts it (`tests/data/dialect/reference-counts.json`),
//! written back unchanged when nothing changes, and pruned into output that keeps its escapes.

use std::path::PathBuf;

use serde_json::Value;

use crate::run;

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/dialect")
}

/// Each file of the data folder with the reference's counts of it.
fn files() -> Vec<(String, Value)> {
    let text = std::fs::read(data().join("reference-counts.json")).expect("the reference's counts");
    let doc: Value = serde_json::from_slice(&text).expect("JSON");
    let counts = doc["counts"].as_object().expect("counts by file").clone();
    assert_eq!(counts.len(), 9, "a file per format");
    counts.into_iter().map(|(name, counts)| (data().join(name).display().to_string(), counts)).collect()
}

#[test]
fn files_in_pythons_dialect_count_as_the_reference_counts_them() {
    for (path, counts) in files() {
        for (counter, expected) in counts.as_object().unwrap() {
            let ours = run(&["count", "-q", "--counter", counter, &path], None).count();
            assert_eq!(Some(ours), expected.as_u64(), "{path}: {counter}");
        }
    }
}

#[test]
fn files_in_pythons_dialect_are_written_back_unchanged() {
    for (path, _) in files() {
        let out = run(&["prune", "-q", &path, "--target-tokens", "100000000"], None);
        assert_eq!(out.code, 0, "{path}: {}", out.stderr);
        assert!(out.stdout == std::fs::read(&path).unwrap(), "{path}: not written back as it was");
    }
}

/// Whether `bytes` hold the UTF-8 of a lone surrogate's stand-in (U+10F000–U+10F7FF).
fn holds_a_stand_in(bytes: &[u8]) -> bool {
    bytes.windows(3).any(|w| w[0] == 0xF4 && w[1] == 0x8F && (0x80..=0x9F).contains(&w[2]))
}

#[test]
fn files_in_pythons_dialect_pruned_keep_their_escapes_and_floats() {
    for (path, _) in files() {
        let input = std::fs::read(&path).unwrap();
        let out = run(&["prune", "-q", &path, "--target-tokens", "1", "--min-tokens", "0"], None);
        assert_eq!(out.code, 0, "{path}: {}", out.stderr);
        assert!(!holds_a_stand_in(&out.stdout), "{path}: a stand-in written as a character");
        let text = String::from_utf8(out.stdout.clone()).expect("UTF-8");
        // Every value of the output reads as Python's json.loads reads it.
        if compaction_model::value_from_slice(&out.stdout).is_err() {
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                compaction_model::value_from_slice(line.as_bytes()).unwrap_or_else(|e| panic!("{path}: {e}"));
            }
        }
        for escape in ["\\ud83d", "\\ude00", "\\ud83dA"] {
            assert!(text.contains(escape), "{path}: {escape} lost");
        }
        let input_text = String::from_utf8(input).unwrap();
        // A file written back in its own format keeps its floats; SWE-agent's and OpenHands' are
        // written as their messages, without the record around them.
        if !path.ends_with(".traj") && !path.ends_with("openhands.jsonl") {
            for word in ["NaN", "Infinity"] {
                assert_eq!(text.matches(word).count(), input_text.matches(word).count(), "{path}: {word}");
            }
        }
        // An event log's lines that held no pruned result are as they were.
        if path.ends_with(".jsonl") && !path.ends_with("openhands.jsonl") {
            let kept = text.lines().filter(|line| input_text.lines().any(|l| l == *line)).count();
            assert!(kept > 0, "{path}: no line kept");
        }
        let again = run(&["count", "-q"], Some(&out.stdout));
        assert_eq!(again.code, 0, "{path}: the output does not count: {}", again.stderr);
    }
}

/// Converted to every format, each file gives output that reads (its stand-ins written as
/// escapes, its floats kept: `json!` would have panicked on them in the Anthropic writer).
#[test]
fn files_in_pythons_dialect_convert_to_every_format() {
    for (path, _) in files() {
        for target in ["haystack", "openai", "anthropic"] {
            let out = run(&["convert", "-q", &path, "--to", target], None);
            assert_eq!(out.code, 0, "{path} to {target}: {}", out.stderr);
            assert!(!holds_a_stand_in(&out.stdout), "{path} to {target}: a stand-in written as a character");
            let again = run(&["count", "-q", "--format", target], Some(&out.stdout));
            assert_eq!(again.code, 0, "{path} to {target}: the output does not count: {}", again.stderr);
        }
    }
}
