//! `simulate` counts refetches: calls the agent made again, same tool and arguments, after the
//! result of an earlier one was taken out of the context; the CSV has them and the chart marks
//! them.

use serde_json::json;

use crate::run;

/// An OpenAI chat: the task, then one `read` per `(path, lines)`, each answered with `lines`
/// lines, then the answer.
fn chat(reads: &[(&str, usize)]) -> Vec<u8> {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a coding agent."}),
        json!({"role": "user", "content": "Fix the bug."}),
    ];
    for (k, (path, lines)) in reads.iter().enumerate() {
        let id = format!("call_{k}");
        let arguments = json!({"path": path}).to_string();
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "read", "arguments": arguments}}]}));
        messages.push(
            json!({"role": "tool", "tool_call_id": id, "content": format!("{path} line\n").repeat(*lines)}),
        );
    }
    messages.push(json!({"role": "assistant", "content": "Fixed."}));
    serde_json::to_vec(&json!({"model": "gpt-4o", "messages": messages})).unwrap()
}

/// a.rs is read, pruned, and read again: one refetch, with the tokens of its second result;
/// b.rs, too small to prune, is read twice and is no refetch.
const READS: &[(&str, usize)] =
    &[("b.rs", 10), ("a.rs", 1_400), ("c.rs", 500), ("a.rs", 1_400), ("b.rs", 10)];

#[test]
fn a_result_pruned_and_read_again_is_a_refetch() {
    let dir = std::env::temp_dir().join(format!("compaction-refetch-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (csv, svg) = (dir.join("run.csv"), dir.join("run.svg"));
    let args = [
        "simulate",
        "-",
        "--context-window",
        "6000",
        "--csv",
        csv.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ];
    let done = run(&args, Some(&chat(READS)));
    assert_eq!(done.code, 0, "{}", done.stderr);
    let out = String::from_utf8(done.stdout).unwrap();
    let line = out.lines().find(|l| l.starts_with("refetches ")).unwrap_or_else(|| panic!("{out}"));
    // "refetches            1 (T tokens)": a.rs's 14,000 characters, about 3,500 tokens.
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!((words[1], words[3]), ("1", "tokens)"), "{line}");
    let tokens: usize = words[2].trim_start_matches('(').parse().unwrap();
    assert!((3_400..3_700).contains(&tokens), "{line}");
    assert!(line.starts_with("refetches            1 ("), "{line}");

    // The CSV's last column: the refetches so far, 1 from the call that read a.rs again (the
    // fourth).
    let csv = std::fs::read_to_string(&csv).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(header.ends_with(",refetches"), "{header}");
    let refetches: Vec<&str> = csv.lines().skip(1).map(|l| l.rsplit(',').next().unwrap()).collect();
    assert_eq!(refetches, ["0", "0", "0", "1", "1", "1"], "{csv}");
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("refetch (result taken out before)"), "the legend names the marks");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nothing_taken_out_says_nothing_of_refetches() {
    let done = run(&["simulate", "-", "--context-window", "1000000"], Some(&chat(READS)));
    assert_eq!(done.code, 0, "{}", done.stderr);
    let out = String::from_utf8(done.stdout).unwrap();
    assert!(!out.contains("refetches"), "{out}");
    assert!(out.contains("compaction           triggered 0 times, compacted 0"), "{out}");
}

#[test]
fn the_same_tool_with_other_arguments_is_no_refetch() {
    let reads: Vec<(&str, usize)> = vec![("a.rs", 1_400), ("c.rs", 500), ("d.rs", 1_400), ("e.rs", 10)];
    let done = run(&["simulate", "-", "--context-window", "6000"], Some(&chat(&reads)));
    assert_eq!(done.code, 0, "{}", done.stderr);
    let out = String::from_utf8(done.stdout).unwrap();
    assert!(out.contains("compacted 1") || out.contains("compacted 2"), "{out}");
    assert!(out.contains("refetches            0 (0 tokens)"), "{out}");
}
