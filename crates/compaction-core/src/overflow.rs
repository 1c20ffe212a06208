//! Recognising a provider's "the request is longer than the context window" error, and the
//! numbers it states, from the reply's status and body.
//!
//! It sits beside the generator seam because it is about what a model call gives back, and
//! below both the network clients (compaction-llm, which classifies its own errors with it)
//! and the hook (whose reactive recovery acts on it); it does no I/O.
//!
//! Shapes recognised, as the providers send them (the phrases are matched without regard to
//! case, anywhere in the error's message, so a proxy that wraps the provider's error in its
//! own still matches):
//!
//! - OpenAI, Azure OpenAI, Groq, OpenRouter, vLLM, DeepSeek: `code: "context_length_exceeded"`,
//!   "This model's maximum context length is N tokens. However, your messages resulted in M
//!   tokens" (or "you requested M tokens (X in the messages, Y in the completion)"), "Input
//!   tokens exceed the configured limit of N tokens", and the Responses API's "Your input
//!   exceeds the context window of this model".
//! - Anthropic: `invalid_request_error` with "prompt is too long: M tokens > N maximum", or
//!   "input length and `max_tokens` exceed context limit: M + Y > N".
//! - Google Gemini: `INVALID_ARGUMENT` with "The input token count (M) exceeds the maximum number
//!   of tokens allowed (N)".
//! - llama.cpp's server: `type: "exceed_context_size_error"` with `n_prompt_tokens` and `n_ctx`,
//!   or "the request exceeds the available context size".
//! - Mistral: "Prompt contains M tokens … too large for model with N maximum context length";
//!   xAI: "maximum prompt length is N but the request contains M tokens"; Amazon Bedrock:
//!   "Input is too long for requested model".
//!
//! Errors about the *reply's* length (`max_tokens` above a model's output cap) are not
//! overflows: compacting the conversation would not help them, so they are not matched.

use serde_json::Value;

/// A provider refused a request because it does not fit the model's context window, and what
/// its error said about the sizes (each `None` when the error does not say).
///
/// The numbers are the provider's tokens, which a local counter may count differently.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ContextOverflow {
    /// The model's context window as the error states it.
    pub limit: Option<usize>,
    /// The input the provider counted in the refused request (without the reply's reserve).
    pub requested: Option<usize>,
    /// The tokens the request reserved for the reply (`max_tokens`) that the error counts
    /// against the window.
    pub reserved_output: Option<usize>,
}

impl ContextOverflow {
    /// An overflow whose error states no sizes; add what yours states with the `with_*` methods
    /// (for a client whose errors you classify yourself).
    pub fn new() -> Self {
        ContextOverflow::default()
    }

    /// The same overflow, stating the model's context window.
    #[must_use]
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// The same overflow, stating the input the provider counted.
    #[must_use]
    pub fn with_requested(mut self, requested: usize) -> Self {
        self.requested = Some(requested);
        self
    }

    /// The same overflow, stating the tokens reserved for the reply.
    #[must_use]
    pub fn with_reserved_output(mut self, reserved_output: usize) -> Self {
        self.reserved_output = Some(reserved_output);
        self
    }

    /// How much input fits, as the error states it: the limit less the tokens reserved for the
    /// reply. `None` when the error states no limit.
    pub fn input_limit(&self) -> Option<usize> {
        self.limit.map(|limit| limit.saturating_sub(self.reserved_output.unwrap_or(0)))
    }
}

/// Phrases that say the request did not fit the context window (lowercase).
const SIGNALS: &[&str] = &[
    "context_length_exceeded",
    "context length exceeded",
    "maximum context length",
    "exceeds the context window",
    "input tokens exceed the configured limit",
    "prompt is too long",
    "exceed context limit",
    "exceeds the maximum number of tokens allowed",
    "exceed_context_size_error",
    "exceeds the available context size",
    "too large for model with",
    "maximum prompt length",
    "input is too long",
];

/// Whether a reply with `status` and `body` says the request was longer than the model's
/// context window, and what it states of the sizes.
///
/// `body` is the reply's body as received (JSON or not); a client that keeps only the
/// provider's message can pass that, and one that has no status can pass 400. A success status
/// (2xx) is never an overflow. Other statuses are not required to be 400: llama.cpp's server
/// has answered an overflow with 500.
///
/// # Example
///
/// ```
/// use compaction_core::context_overflow;
///
/// let body = r#"{"type": "error", "error": {"type": "invalid_request_error",
///     "message": "prompt is too long: 208310 tokens > 200000 maximum"}}"#;
/// let overflow = context_overflow(400, body).expect("an overflow");
/// assert_eq!((overflow.requested, overflow.limit), (Some(208_310), Some(200_000)));
///
/// let other = r#"{"error": {"type": "invalid_request_error", "message": "max_tokens: 10000 > 4096,
///     which is the maximum allowed number of output tokens"}}"#;
/// assert_eq!(context_overflow(400, other), None);
/// ```
pub fn context_overflow(status: u16, body: &str) -> Option<ContextOverflow> {
    if (200..300).contains(&status) {
        return None;
    }
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error = parsed.as_ref().map(error_object);
    let structured = error.is_some_and(|error| {
        field(error, "code") == Some("context_length_exceeded")
            || field(error, "type") == Some("exceed_context_size_error")
    });
    // The message when there is one (xAI sends it as a bare `error` string); otherwise (a body
    // that is not JSON, or JSON without a message) the whole body.
    let message = error.and_then(|error| field(error, "message").or_else(|| field(error, "error")));
    let text = message.unwrap_or(body).to_lowercase();
    if !structured && !SIGNALS.iter().any(|signal| text.contains(signal)) {
        return None;
    }
    let mut overflow = sizes_in(&text);
    // llama.cpp states both sizes as fields.
    if let Some(error) = error {
        let number = |key: &str| error.get(key).and_then(Value::as_u64).and_then(|n| usize::try_from(n).ok());
        overflow.limit = overflow.limit.or(number("n_ctx"));
        overflow.requested = overflow.requested.or(number("n_prompt_tokens"));
    }
    overflow.limit = overflow.limit.filter(|&limit| limit > 0);
    Some(overflow)
}

/// The object holding the error's fields: `error` (OpenAI, Anthropic, Gemini, llama.cpp), the
/// first item of an array of such replies (Gemini through some clients), or the value itself.
fn error_object(value: &Value) -> &Value {
    let value = match value {
        Value::Array(items) => items.first().unwrap_or(value),
        _ => value,
    };
    match value.get("error") {
        Some(error) if error.is_object() => error,
        _ => value,
    }
}

fn field<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.get(key).and_then(Value::as_str)
}

/// The sizes a (lowercased) message states, by the phrasings of the module docs.
fn sizes_in(text: &str) -> ContextOverflow {
    let mut found = ContextOverflow::default();
    // Anthropic: "prompt is too long: M tokens > N maximum".
    if let [requested, limit, ..] = numbers_after(text, "prompt is too long")[..] {
        found.requested = Some(requested);
        found.limit = Some(limit);
    }
    // Anthropic: "input length and `max_tokens` exceed context limit: M + Y > N".
    if let [requested, reserved, limit, ..] = numbers_after(text, "exceed context limit")[..] {
        found.requested = Some(requested);
        found.reserved_output = Some(reserved);
        found.limit = Some(limit);
    }
    // Gemini: "the input token count (M) exceeds the maximum number of tokens allowed (N)".
    if let [requested, limit, ..] = numbers_after(text, "input token count")[..] {
        found.requested = Some(requested);
        found.limit = Some(limit);
    }
    // xAI: "maximum prompt length is N but the request contains M tokens".
    if let [limit, requested, ..] = numbers_after(text, "maximum prompt length")[..] {
        found.limit = Some(limit);
        found.requested = Some(requested);
    }
    // OpenAI and the servers that copy it.
    let first = |phrase: &str| numbers_after(text, phrase).first().copied();
    found.limit = found
        .limit
        .or_else(|| first("maximum context length is"))
        .or_else(|| first("configured limit of"))
        .or_else(|| first("too large for model with"));
    found.requested = found
        .requested
        .or_else(|| first("resulted in"))
        .or_else(|| first("your request has"))
        .or_else(|| first("prompt contains"));
    // "you requested M tokens (X in the messages, Y in the completion)": X is the input, Y the
    // reply's reserve; without the breakdown, M is all there is.
    if found.requested.is_none() {
        let numbers = numbers_after(text, "you requested");
        let broken_down =
            ["in the messages", "in your prompt", "of text input"].iter().any(|p| text.contains(p));
        match numbers[..] {
            [_, input, output, ..] if broken_down => {
                found.requested = Some(input);
                found.reserved_output = Some(output);
            }
            [total, ..] => found.requested = Some(total),
            [] => {}
        }
    }
    found
}

/// The whole numbers within a short stretch after `phrase` (up to the end of its sentence), in
/// order. Thousands separators (`128,000`) are read as part of the number.
fn numbers_after(text: &str, phrase: &str) -> Vec<usize> {
    let Some(at) = text.find(phrase) else { return Vec::new() };
    let rest = &text[at + phrase.len()..];
    // A sentence ends at ". " or at the end; the numbers of interest sit close to the phrase.
    // Bytes, not characters: only ASCII digits matter, so cutting inside a character is harmless.
    let end = rest.find(". ").unwrap_or(rest.len()).min(160);
    let stretch = &rest.as_bytes()[..end];
    let mut numbers = Vec::new();
    let mut i = 0;
    while i < stretch.len() {
        if !stretch[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let mut value: usize = 0;
        while i < stretch.len() {
            match stretch[i] {
                digit @ b'0'..=b'9' => {
                    value = value.saturating_mul(10).saturating_add(usize::from(digit - b'0'))
                }
                // A separator followed by three digits is a thousands separator.
                b',' if stretch.len() > i + 3 && stretch[i + 1..i + 4].iter().all(u8::is_ascii_digit) => {}
                _ => break,
            }
            i += 1;
        }
        numbers.push(value);
    }
    numbers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overflow(limit: Option<usize>, requested: Option<usize>, reserved: Option<usize>) -> ContextOverflow {
        ContextOverflow { limit, requested, reserved_output: reserved }
    }

    #[test]
    fn openai_chat_completions() {
        let body = r#"{"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 204308 tokens. Please reduce the length of the messages.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}"#;
        assert_eq!(context_overflow(400, body), Some(overflow(Some(128_000), Some(204_308), None)));
        // The older shape, with the completion's reserve broken out.
        let body = r#"{"error": {"message": "This model's maximum context length is 4097 tokens. However, you requested 4120 tokens (3120 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}"#;
        let found = context_overflow(400, body).unwrap();
        assert_eq!(found, overflow(Some(4_097), Some(3_120), Some(1_000)));
        assert_eq!(found.input_limit(), Some(3_097));
        // The newer models' wording, and the Responses API's, which states no numbers.
        let body = r#"{"error": {"message": "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 301233 tokens. Please reduce the length of the messages.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}"#;
        assert_eq!(context_overflow(400, body), Some(overflow(Some(272_000), Some(301_233), None)));
        let body = r#"{"error": {"message": "Your input exceeds the context window of this model. Please adjust your input and try again.", "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}}"#;
        assert_eq!(context_overflow(400, body), Some(ContextOverflow::default()));
    }

    #[test]
    fn the_code_alone_is_enough() {
        let body = r#"{"error": {"message": "Request too long.", "type": "invalid_request_error", "code": "context_length_exceeded"}}"#;
        assert_eq!(context_overflow(400, body), Some(ContextOverflow::default()));
    }

    #[test]
    fn anthropic() {
        let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 209353 tokens > 199999 maximum"}}"#;
        assert_eq!(context_overflow(400, body), Some(overflow(Some(199_999), Some(209_353), None)));
        let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 178959 + 64000 > 200000, decrease input length or `max_tokens` and try again"},"request_id":"req_011"}"#;
        let found = context_overflow(400, body).unwrap();
        assert_eq!(found, overflow(Some(200_000), Some(178_959), Some(64_000)));
        assert_eq!(found.input_limit(), Some(136_000));
    }

    #[test]
    fn gemini_llama_cpp_vllm_mistral_xai_bedrock() {
        let gemini = r#"{"error": {"code": 400, "message": "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}}"#;
        assert_eq!(context_overflow(400, gemini), Some(overflow(Some(1_048_576), Some(1_200_293), None)));
        // Some clients hand Gemini's replies over as an array.
        assert!(context_overflow(400, &format!("[{gemini}]")).is_some());
        let llama = r#"{"error":{"code":400,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"exceed_context_size_error","n_prompt_tokens":14429,"n_ctx":8192}}"#;
        assert_eq!(context_overflow(400, llama), Some(overflow(Some(8_192), Some(14_429), None)));
        // It has answered with 500 too.
        assert!(context_overflow(500, llama).is_some());
        let vllm = r#"{"object":"error","message":"This model's maximum context length is 6048 tokens. However, you requested 6616 tokens (568 in the messages, 6048 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#;
        assert_eq!(context_overflow(400, vllm), Some(overflow(Some(6_048), Some(568), Some(6_048))));
        let vllm_new = r#"{"object":"error","message":"'max_tokens' or 'max_completion_tokens' is too large: 1000. This model's maximum context length is 4096 tokens and your request has 3500 input tokens (1000 > 4096 - 3500).","type":"BadRequestError","code":400}"#;
        assert_eq!(context_overflow(400, vllm_new), Some(overflow(Some(4_096), Some(3_500), None)));
        let mistral = r#"{"object":"error","message":"Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length","type":"invalid_request_error","code":"3051"}"#;
        assert_eq!(context_overflow(400, mistral), Some(overflow(Some(32_768), Some(40_000), None)));
        let xai = r#"{"code":"Client specified an invalid argument","error":"This model's maximum prompt length is 131072 but the request contains 150000 tokens."}"#;
        assert_eq!(context_overflow(400, xai), Some(overflow(Some(131_072), Some(150_000), None)));
        let bedrock = r#"{"message":"Input is too long for requested model."}"#;
        assert_eq!(context_overflow(400, bedrock), Some(ContextOverflow::default()));
    }

    #[test]
    fn wrapped_and_plain_text_errors() {
        // A proxy (LiteLLM) that puts the provider's JSON inside its own message.
        let proxy = r#"{"error":{"message":"litellm.ContextWindowExceededError: AnthropicException - {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: 209353 tokens > 199999 maximum\"}}","type":null,"param":null,"code":"400"}}"#;
        assert_eq!(context_overflow(400, proxy), Some(overflow(Some(199_999), Some(209_353), None)));
        let plain = "400 the request exceeds the available context size, try increasing it";
        assert_eq!(context_overflow(400, plain), Some(ContextOverflow::default()));
        assert_eq!(
            context_overflow(400, "This model's maximum context length is 128,000 tokens."),
            Some(overflow(Some(128_000), None, None))
        );
    }

    #[test]
    fn other_errors_are_not_overflows() {
        for (status, body) in [
            (
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 10000 > 4096, which is the maximum allowed number of output tokens for claude-3-5-sonnet-20240620"}}"#,
            ),
            (
                400,
                r#"{"error": {"message": "max_tokens is too large: 50000. This model supports at most 16384 completion tokens, whereas you provided 50000.", "type": "invalid_request_error", "param": "max_tokens", "code": "invalid_value"}}"#,
            ),
            (
                400,
                r#"{"object":"error","message":"max_tokens must be at least 1, got -186.","type":"BadRequestError","param":null,"code":400}"#,
            ),
            (
                429,
                r#"{"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}}"#,
            ),
            (
                401,
                r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
            ),
            (500, "<html>bad gateway</html>"),
            (400, ""),
        ] {
            assert_eq!(context_overflow(status, body), None, "{body}");
        }
        // A success is never an overflow, whatever it says.
        let body = r#"{"error": {"message": "x", "code": "context_length_exceeded"}}"#;
        assert_eq!(context_overflow(200, body), None);
    }

    #[test]
    fn numbers_stay_near_their_phrase() {
        assert_eq!(numbers_after("limit of 12 tokens. later 99", "limit of"), vec![12]);
        assert_eq!(numbers_after("a 1,234,567 b 12,3", "a"), vec![1_234_567, 12, 3]);
        assert_eq!(numbers_after("no phrase here 5", "absent"), Vec::<usize>::new());
        // Huge numbers saturate rather than overflow.
        assert_eq!(numbers_after("n 99999999999999999999999999", "n"), vec![usize::MAX]);
        // Multi-byte text around the numbers is fine.
        assert_eq!(numbers_after(&format!("p {}7", "é".repeat(20)), "p"), vec![7]);
        assert!(numbers_after(&format!("p {}", "é".repeat(200)), "p").is_empty());
    }
}
