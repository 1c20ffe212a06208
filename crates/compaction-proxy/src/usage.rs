//! The upstream's own count of a request and its reply, read from the answer as it is relayed
//! (a JSON body or an SSE stream, in OpenAI's or Anthropic's words), so that the next request of
//! the conversation is estimated from it, as an agent loop anchors its hook.

use serde_json::Value;

/// The largest plain (not streamed) answer read for its usage; a larger one is relayed unread.
const MAX_PLAIN: usize = 4 << 20;

/// What an answer said of its tokens; each field the last value seen.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    /// Every input token, cached or not.
    pub(crate) input: Option<u64>,
    pub(crate) cache_read: u64,
    pub(crate) cache_write: u64,
    pub(crate) output: Option<u64>,
}

impl Seen {
    /// The provider's count of the request and its reply: what the hook anchors on.
    pub(crate) fn context_tokens(&self) -> Option<u64> {
        Some(self.input? + self.output.unwrap_or(0))
    }

    /// Takes what `value` (an answer, or one event of a stream) says of usage.
    fn take(&mut self, value: &Value) {
        for usage in [&value["usage"], &value["message"]["usage"], &value["response"]["usage"]] {
            if !usage.is_object() {
                continue;
            }
            let n = |v: &Value| v.as_u64();
            if let Some(prompt) = n(&usage["prompt_tokens"]) {
                // OpenAI Chat Completions: the cached tokens are among the prompt's.
                self.input = Some(prompt);
                self.cache_read = n(&usage["prompt_tokens_details"]["cached_tokens"]).unwrap_or(0);
            } else if let Some(input) = n(&usage["input_tokens"]) {
                match usage.get("input_tokens_details") {
                    // OpenAI Responses: as Chat Completions, in other words.
                    Some(details) => {
                        self.input = Some(input);
                        self.cache_read = n(&details["cached_tokens"]).unwrap_or(0);
                    }
                    // Anthropic: the cached tokens are beside the input's.
                    None => {
                        let read = n(&usage["cache_read_input_tokens"]).unwrap_or(0);
                        let write = n(&usage["cache_creation_input_tokens"]).unwrap_or(0);
                        self.input = Some(input + read + write);
                        self.cache_read = read;
                        self.cache_write = write;
                    }
                }
            }
            if let Some(output) = n(&usage["completion_tokens"]).or_else(|| n(&usage["output_tokens"])) {
                self.output = Some(output);
            }
        }
    }
}

/// Reads usage from an answer's bytes as they pass.
#[derive(Debug)]
pub(crate) struct UsageReader {
    stream: bool,
    /// The plain answer so far, or the stream's unfinished line.
    pending: Vec<u8>,
    /// A plain answer too large to read.
    gave_up: bool,
    pub(crate) seen: Seen,
}

impl UsageReader {
    /// A reader for an answer of `content_type`; `None` for one it cannot read (compressed).
    pub(crate) fn new(content_type: &str, content_encoding: Option<&str>) -> Option<UsageReader> {
        if content_encoding.is_some_and(|e| !e.eq_ignore_ascii_case("identity")) {
            return None;
        }
        let stream = content_type.starts_with("text/event-stream");
        if !stream && !content_type.contains("json") {
            return None;
        }
        Some(UsageReader { stream, pending: Vec::new(), gave_up: false, seen: Seen::default() })
    }

    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        if !self.stream {
            if self.pending.len() + chunk.len() > MAX_PLAIN {
                self.gave_up = true;
                self.pending = Vec::new();
            }
            if !self.gave_up {
                self.pending.extend_from_slice(chunk);
            }
            return;
        }
        self.pending.extend_from_slice(chunk);
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            self.line(&line);
        }
        // A line with no end in sight is no event of usage; it is not kept whole.
        if self.pending.len() > MAX_PLAIN {
            self.pending.clear();
        }
    }

    fn line(&mut self, line: &[u8]) {
        let Some(data) = line.strip_prefix(b"data:") else { return };
        // Most events carry text, not usage: parsed only when they name it.
        if data.windows(7).any(|w| w == b"\"usage\"") {
            if let Ok(value) = serde_json::from_slice::<Value>(data) {
                self.seen.take(&value);
            }
        }
    }

    /// What the whole answer said, once it has ended.
    pub(crate) fn finish(mut self) -> Seen {
        if !self.stream && !self.gave_up {
            if let Ok(value) = serde_json::from_slice::<Value>(&self.pending) {
                self.seen.take(&value);
            }
        }
        self.seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(content_type: &str, chunks: &[&str]) -> Seen {
        let mut reader = UsageReader::new(content_type, None).expect("readable");
        chunks.iter().for_each(|chunk| reader.feed(chunk.as_bytes()));
        reader.finish()
    }

    #[test]
    fn usage_is_read_in_each_providers_words_streamed_or_not() {
        let anthropic = r#"{"id":"m","usage":{"input_tokens":10,"cache_read_input_tokens":1000,"cache_creation_input_tokens":200,"output_tokens":30}}"#;
        let seen = read("application/json", &[&anthropic[..20], &anthropic[20..]]);
        assert_eq!(seen, Seen { input: Some(1210), cache_read: 1000, cache_write: 200, output: Some(30) });
        assert_eq!(seen.context_tokens(), Some(1240));

        let stream = [
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"cache_read_input_tokens\":",
            "100,\"output_tokens\":1}}}\n\nevent: content_block_delta\ndata: {\"delta\":{\"text\":\"\\\"usage\\\"\"}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":42}}\n\n",
        ];
        let seen = read("text/event-stream; charset=utf-8", &stream);
        assert_eq!(seen, Seen { input: Some(105), cache_read: 100, cache_write: 0, output: Some(42) });

        let openai = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":900,\"completion_tokens\":9,\"prompt_tokens_details\":{\"cached_tokens\":800}}}\n\ndata: [DONE]\n\n";
        let seen = read("text/event-stream", &[openai]);
        assert_eq!(seen, Seen { input: Some(900), cache_read: 800, cache_write: 0, output: Some(9) });

        let responses = "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":700,\"input_tokens_details\":{\"cached_tokens\":600},\"output_tokens\":7}}}\n\n";
        let seen = read("text/event-stream", &[responses]);
        assert_eq!(seen, Seen { input: Some(700), cache_read: 600, cache_write: 0, output: Some(7) });

        assert!(UsageReader::new("application/json", Some("gzip")).is_none());
        assert_eq!(read("application/json", &["{not json"]).context_tokens(), None);
    }
}
