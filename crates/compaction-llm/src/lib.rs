//! Chat models and provider token counters for the compaction workspace: the one crate that
//! talks to the network.
//!
//! Everything below this crate (model, tokens, core) does no network I/O. A strategy that needs a
//! model, such as summarization, asks for one through compaction-core's
//! [`ChatGenerator`](compaction_core::ChatGenerator) and
//! [`AsyncChatGenerator`](compaction_core::AsyncChatGenerator); this crate implements them for
//! real providers:
//!
//! - [`OpenAIChatGenerator`]: OpenAI's Chat Completions API, and any server that speaks it
//!   (vLLM, llama.cpp, Ollama, LiteLLM...), at a base URL given as the OpenAI SDK takes it
//!   (`http://127.0.0.1:8080/v1`);
//! - [`AnthropicChatGenerator`]: Anthropic's Messages API (`x-api-key`, `anthropic-version`).
//!
//! and [`TokenCounter`](compaction_tokens::TokenCounter) for providers' own counts:
//!
//! - [`OpenAITokenCounter`]: `POST /responses/input_tokens`, with messages converted exactly as
//!   Haystack's `OpenAITokenCounter` converts them ([`to_responses_input`]);
//! - [`AnthropicTokenCounter`]: `POST /v1/messages/count_tokens`.
//!
//! A counter's `try_count` reports a failed call; its `count` is best effort (a warning, and the
//! approximate estimate). [`counter_from_provider_spec`] and [`generator_from_provider`] build
//! them from what a command line gives.
//!
//! Every client shares [`ClientSettings`]: the key (else `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`),
//! the base URL (else `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`, else the provider's), a connect
//! and a total timeout, and retries: 408, 409, 429, 5xx, timeouts and connection errors are tried
//! again, up to `max_retries` times, after an exponential backoff with jitter or the wait the
//! provider asks for (`Retry-After`, `retry-after-ms`). An [`Error`] says which call failed
//! (provider, URL, model, attempt) and why (status and the provider's message, or the transport
//! error as its source). A request the provider refuses as longer than the model's context
//! window is never retried as sent: [`Error::is_context_overflow`] says so, and
//! [`Error::context_overflow`] gives the window and count the provider stated, for
//! compaction-hook's `ContextOverflowRecovery` to compact and retry once.
//!
//! The conversions are public and need no network: [`to_chat_completions_messages`],
//! [`to_anthropic_messages`], [`to_responses_input`].
//!
//! # Example
//!
//! A summary asked of an OpenAI-compatible server; here a tiny one this example starts on
//! 127.0.0.1, answering one request as such a server does.
//!
//! ```
//! # #[cfg(feature = "blocking")] {
//! use std::io::{BufRead, BufReader, Read, Write};
//! use compaction_core::ChatGenerator;
//! use compaction_llm::{ClientSettings, OpenAIChatGenerator};
//! use compaction_model::Message;
//!
//! let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
//! let base_url = format!("http://{}/v1", listener.local_addr()?);
//! let server = std::thread::spawn(move || -> std::io::Result<String> {
//!     let (stream, _) = listener.accept()?;
//!     let mut reader = BufReader::new(stream);
//!     let (mut line, mut length) = (String::new(), 0);
//!     while reader.read_line(&mut line)? > 2 {
//!         if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
//!             length = value.trim().parse().unwrap_or(0);
//!         }
//!         line.clear();
//!     }
//!     let mut body = vec![0; length];
//!     reader.read_exact(&mut body)?;
//!     let reply = r#"{"model": "tiny", "choices": [{"index": 0, "finish_reason": "stop",
//!         "message": {"role": "assistant", "content": "The user greeted the assistant."}}],
//!         "usage": {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18}}"#;
//!     write!(reader.get_mut(), "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
//!         content-length: {}\r\nconnection: close\r\n\r\n{reply}", reply.len())?;
//!     Ok(String::from_utf8_lossy(&body).into_owned())
//! });
//!
//! let settings = ClientSettings::default().with_base_url(base_url).with_api_key("local");
//! let generator = OpenAIChatGenerator::new("tiny", settings)?;
//! let reply = generator.generate(&[Message::system("Summarize."), Message::user("Hello!")])?;
//! assert_eq!(reply.text(), Some("The user greeted the assistant."));
//! assert_eq!(reply.meta["usage"]["total_tokens"], 18);
//!
//! // What the server received: the model and the messages in Chat Completions' shape.
//! let sent: serde_json::Value = serde_json::from_str(&server.join().unwrap()?)?;
//! assert_eq!(sent["model"], "tiny");
//! assert_eq!(sent["messages"][1], serde_json::json!({"role": "user", "content": "Hello!"}));
//! # }
//! # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! ```
//!
//! ## Crate features
//!
//! - `blocking` (default): the blocking clients, over [ureq]: `ChatGenerator`, `TokenCounter`,
//!   `generate_blocking`, `count_blocking`, [`counter_from_provider_spec`]. No async runtime, so a
//!   blocking call is safe anywhere.
//! - `async`: the async clients, over [reqwest] on tokio: `AsyncChatGenerator`,
//!   `generate_async`, `count_async`. They need a tokio runtime with time enabled and never block
//!   its threads.
//!
//! Both use rustls on ring with the Mozilla root certificates compiled in: the crate builds with
//! the Rust toolchain and a C compiler alone (no OpenSSL, no cmake) and needs no system
//! certificate store. Proxies are taken from the usual environment variables.
//!
//! [ureq]: https://docs.rs/ureq
//! [reqwest]: https://docs.rs/reqwest
//!
//! ## Minimum supported Rust version
//!
//! 1.88, the workspace's: see its README for the policy. It is raised only in a minor version
//! (0.1 → 0.2), never in a patch release, and the changelog says so.
#![deny(missing_docs)]
// Without a transport only the conversions are of use; the request plumbing stays compiled.
#![cfg_attr(not(any(feature = "blocking", feature = "async")), allow(dead_code, unused_imports))]

mod anthropic;
mod client;
mod counter;
mod error;
mod generator;
#[cfg(feature = "async")]
mod join;
mod openai;
mod provider;
mod redact;
mod responses;
mod retry;
mod settings;
mod spec;

pub use anthropic::{to_anthropic_messages, AnthropicConversation};
pub use counter::{AnthropicTokenCounter, OpenAITokenCounter};
pub use error::{BoxError, CallInfo, Error, WaitLimit};
pub use generator::{
    AnthropicChatGenerator, OpenAIChatGenerator, ProviderChatGenerator, DEFAULT_ANTHROPIC_MAX_TOKENS,
};
pub use openai::to_chat_completions_messages;
pub use provider::Provider;
pub use responses::to_responses_input;
pub use settings::{ApiKey, ClientSettings};
#[cfg(feature = "blocking")]
pub use spec::counter_from_provider_spec;
pub use spec::{generator_from_provider, parse_provider_spec};

// The README's examples are compiled (and run, where they need no server) as doc tests.
#[cfg(all(doctest, feature = "blocking"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
