//! Behaviour of the counters beyond the fixtures: settings, specs, special tokens.

use compaction_model::Message;
use compaction_tokens::{counter_from_spec, ApproximateTokenCounter, Error, TokenCounter};

#[test]
fn chars_per_token_must_be_positive() {
    for bad in [0.0, -1.0, f64::NAN] {
        assert!(matches!(ApproximateTokenCounter::new(bad), Err(Error::InvalidCharsPerToken(_))));
    }
    assert!(counter_from_spec("approximate:0").is_err());
    assert!(counter_from_spec("approximate:abc").is_err());
}

#[test]
fn empty_input_counts_zero() {
    let counter = ApproximateTokenCounter::default();
    assert_eq!(counter.count(&[], &[]), 0);
}

#[test]
fn counters_are_shareable_trait_objects() {
    let counter: std::sync::Arc<dyn TokenCounter> = std::sync::Arc::new(ApproximateTokenCounter::default());
    let messages = vec![Message::user("x".repeat(400))];
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let counter = counter.clone();
            let messages = messages.clone();
            std::thread::spawn(move || counter.count(&messages, &[]))
        })
        .collect();
    for handle in handles {
        assert_eq!(handle.join().expect("no panic"), (400 + 7) / 4);
    }
}

#[test]
fn unknown_specs_are_rejected() {
    for spec in ["", "bogus", "huggingface", "huggingface:"] {
        assert!(counter_from_spec(spec).is_err(), "{spec:?} must be rejected");
    }
}

#[cfg(feature = "tiktoken")]
#[test]
fn special_token_strings_count_as_ordinary_text() {
    let counter = counter_from_spec("tiktoken:o200k_base").expect("builds");
    let messages = vec![Message::user("before <|endoftext|> after")];
    let count = counter.count(&messages, &[]);
    assert!(count > 5, "counted {count}");
    assert!(counter_from_spec("tiktoken:gpt-4o")
        .expect("model name maps")
        .describe()
        .ends_with("o200k_base"));
    assert!(counter_from_spec("tiktoken:gpt-4")
        .expect("model name maps")
        .describe()
        .ends_with("cl100k_base"));
    assert!(counter_from_spec("tiktoken:nonsense").is_err());
}

#[cfg(feature = "huggingface")]
#[test]
fn unreadable_tokenizer_is_a_clear_error() {
    let error = counter_from_spec("huggingface:/nonexistent/tokenizer.json").expect_err("missing file");
    assert!(error.to_string().contains("/nonexistent/tokenizer.json"), "{error}");
    let error = compaction_tokens::HuggingFaceTokenCounter::from_bytes(b"{not json").expect_err("invalid");
    assert!(error.to_string().contains("not a valid tokenizer.json"), "{error}");
}

/// A conversation big enough that counters spread `count_each` over threads.
fn large_conversation() -> Vec<Message> {
    use compaction_model::ToolCall;
    let mut messages = vec![Message::user("Find where the parser drops the last line.")];
    for step in 0..200 {
        let mut arguments = serde_json::Map::new();
        arguments.insert("path".into(), format!("src/module_{step}.rs").into());
        let call = ToolCall::new("read_file", arguments).with_id(format!("call_{step}"));
        messages
            .push(Message::assistant_with_calls(Some(format!("Step {step}: reading.")), vec![call.clone()]));
        let body: String =
            (0..40).map(|line| format!("{step:>4}:{line:>3}  let café_{line} = ✓ parse(line);\n")).collect();
        messages.push(Message::tool(body, call, step % 7 == 0));
    }
    messages
}

#[test]
fn count_each_agrees_with_counting_one_at_a_time_on_large_conversations() {
    let messages = large_conversation();
    let mut specs = vec!["approximate".to_owned()];
    if cfg!(feature = "tiktoken") {
        specs.extend(["tiktoken:o200k_base".to_owned(), "tiktoken:p50k_base".to_owned()]);
    }
    if cfg!(feature = "huggingface") {
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tokenizers");
        specs.extend(
            ["unigram_metaspace", "bytelevel_bpe"].map(|name| format!("huggingface:{data}/{name}.json")),
        );
    }
    for spec in specs {
        let counter = counter_from_spec(&spec).expect("spec is valid");
        let counts = counter.count_each(&messages);
        assert_eq!(counts.total, counter.count(&messages, &[]), "{spec}: total");
        let each: Vec<usize> = messages.iter().map(|m| counter.count(std::slice::from_ref(m), &[])).collect();
        assert_eq!(counts.each, each, "{spec}: each");
    }
}

/// Raw arguments are measured as the reference measures a string `arguments`: `json.dumps` of
/// the string, so a megabyte of malformed arguments counts as a megabyte, not as `{}`.
#[test]
fn raw_arguments_count_as_their_text() {
    use compaction_model::{Message, ToolCall};
    use compaction_tokens::{
        rendered_message, rendered_message_chars, ApproximateTokenCounter, TokenCounter,
    };
    let raw = format!("{{\"text\": \"{}", "x".repeat(1_000_000));
    let message = Message::assistant_with_calls(None, vec![ToolCall::with_raw_arguments("edit", raw)]);
    let rendered = rendered_message(&message);
    assert!(rendered.starts_with("[assistant -> tool_call] edit(\"{\\\"text\\\": \\\"xxx"));
    assert_eq!(rendered.chars().count(), rendered_message_chars(&message));
    let tokens = ApproximateTokenCounter::default().count(std::slice::from_ref(&message), &[]);
    assert!(tokens > 250_000, "counted {tokens}");
}

/// The approximate counter measures a long conversation on two threads when two are allowed, on
/// this one alone when one is (`compaction_model::parallel`), with the same counts.
#[test]
fn the_threads_a_count_starts_are_the_callers_to_bound() {
    use compaction_model::parallel;
    use std::num::NonZeroUsize;

    let messages: Vec<Message> = (0..5000)
        .map(|k| if k % 2 == 0 { Message::user(format!("{k:>300}")) } else { Message::assistant("ok") })
        .collect();
    let counter = ApproximateTokenCounter::default();
    let before = parallel::threads_started();
    let alone = parallel::with_max_threads(NonZeroUsize::MIN, || counter.count_each(&messages));
    assert_eq!(parallel::threads_started(), before, "one thread allowed: none started");
    let two = NonZeroUsize::new(2).unwrap_or(NonZeroUsize::MIN);
    let spread = parallel::with_max_threads(two, || counter.count_each(&messages));
    assert_eq!(alone.total, spread.total);
    assert_eq!(alone.each, spread.each);
    if std::thread::available_parallelism().map_or(1, NonZeroUsize::get) >= 2 {
        assert!(parallel::threads_started() > before, "two allowed: the conversation was split");
    }
}
