//! The threads a read and a write-back start are the caller's to bound
//! (`compaction_model::parallel`): with one thread allowed none is started and the results are
//! the same; with two, a large file is read on two.

use std::num::NonZeroUsize;

use compaction_model::parallel;
use serde_json::{json, Value};

use crate::{first_result, lines, prune, read, written_back};

/// Steps of a call and its result, `steps` of them, about 1.2 KB each: over the size from which
/// the readers and writers split their work.
fn steps(steps: usize) -> Vec<Value> {
    let mut messages = vec![json!({"role": "user", "content": "fix the bug"})];
    for k in 0..steps {
        let id = format!("call_{k}");
        let arguments = format!("{{\"path\": \"src/{k}.rs\"}}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "read_file", "arguments": arguments}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": format!("{k:>1200}")}));
    }
    messages
}

/// Reads `text`, prunes its first result and writes it back: what a command does.
fn read_and_write_back(text: &str) -> (Vec<compaction_model::Message>, Vec<u8>) {
    let conversation = read(text);
    let mut messages = conversation.messages.clone();
    let first = first_result(&messages);
    prune(&mut messages, first, "[pruned]");
    let out = written_back(&conversation, &messages, &[first]);
    (conversation.messages, out)
}

#[test]
fn one_thread_allowed_starts_none_and_changes_nothing() {
    let messages = steps(2000);
    let files = [
        json!({"model": "gpt-4o", "messages": messages}).to_string(),
        Value::Array(messages.clone()).to_string(),
        lines(&messages),
    ];
    for text in &files {
        assert!(text.len() > 2 << 20, "the file is large enough to be split");
        let before = parallel::threads_started();
        let alone = parallel::with_max_threads(NonZeroUsize::MIN, || read_and_write_back(text));
        assert_eq!(parallel::threads_started(), before, "one thread allowed, none started");
        let two = NonZeroUsize::new(2).unwrap_or(NonZeroUsize::MIN);
        let spread = parallel::with_max_threads(two, || read_and_write_back(text));
        assert_eq!(alone, spread, "the same messages and the same bytes written");
        if std::thread::available_parallelism().map_or(1, NonZeroUsize::get) >= 2 && !text.starts_with('[') {
            assert!(parallel::threads_started() > before, "two allowed: the large file was split");
        }
    }
}
