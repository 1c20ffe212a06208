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
