//! A local HTTP proxy that compacts an agent's requests on their way to the provider.
//!
//! Agents that talk to OpenAI's or Anthropic's API (Claude Code, Codex, the OpenAI SDKs, apps
//! on a llama.cpp or vLLM server) can be pointed at this proxy instead
//! (`ANTHROPIC_BASE_URL=http://127.0.0.1:8787`, `OPENAI_BASE_URL=http://127.0.0.1:8787/v1`).
//! It forwards every request to the upstream the path belongs to (`/v1/messages…` to the
//! Anthropic upstream, every other path to the OpenAI one), with the client's own headers and
//! credentials, and relays the answer as it comes: status, headers, and the body chunk by chunk,
//! byte for byte, so a streamed (SSE) answer reaches the client event by event. A client that
//! goes cancels its upstream request.
//!
//! **Compaction.** With a hook ([`ProxySettings::with_compaction`]), or a hook per model
//! window ([`ProxySettings::with_compaction_by_model`]: the window of the model the request
//! names, from [`ProxySettings::with_model_window`] or a bundled table of the providers'
//! documented windows, dated snapshots included), each Chat Completions,
//! Responses and Messages request is read as a conversation (compaction-formats), run through
//! the hook, and written back in its own format: fields the proxy does not know are kept, and
//! only the messages the hook changed are written anew. A body that does not read goes through
//! unchanged with a warning, or is refused with 502
//! ([`ProxySettings::with_fail_closed`]). The proxy recognises a conversation across requests by
//! its prefix: once it has replaced a message, every later request carrying the same messages up
//! to it gets the same replacement before the hook runs, so the prefix the provider cached stays
//! byte for byte what it was, and the hook compacts again only once the conversation has grown
//! past its threshold. The estimate is anchored on the upstream's own count of the
//! conversation's previous request and its reply, read from the answer as it is relayed
//! (streamed or not), plus the messages that followed, as an agent loop anchors its hook.
//!
//! **What it did.** One log line per compaction (tokens before and after, results cleared,
//! earlier replacements kept), and `GET /metrics` answers the counters in Prometheus text:
//! requests by endpoint, compactions, tokens before and after, results cleared, replacements
//! recalled, errors by kind, upstream answers by status class.
//!
//! **Secure by default.** [`serve`] refuses a listener on anything but loopback unless remote
//! clients are allowed with a token they must present
//! ([`ProxySettings::with_remote_clients`]). The proxy never logs a credential, nor a body
//! unless asked to ([`ProxySettings::with_log_bodies`], with every key redacted).
//!
//! **Limits.** Request bodies over a size are answered 413, requests beyond a number in
//! flight 503, an upstream that does not answer in time 504; an upstream's own errors reach the
//! client with their status and body.
//!
//! # Example
//!
//! A proxy on a port the system picks, passing requests through to a local OpenAI-compatible
//! server:
//!
//! ```
//! use compaction_proxy::ProxySettings;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let address = listener.local_addr()?;
//! let settings = ProxySettings::default().with_openai_upstream("http://127.0.0.1:8080");
//! let server = tokio::spawn(compaction_proxy::serve(listener, settings));
//! println!("OPENAI_BASE_URL=http://{address}/v1");
//! server.abort();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Crate features
//!
//! None. The server is hyper's HTTP/1 on tokio; the client to the upstreams is reqwest on
//! rustls (ring, with the Mozilla roots compiled in), as compaction-llm's async client.
//!
//! ## Minimum supported Rust version
//!
//! 1.88, the workspace's: see its README for the policy. It is raised only in a minor version
//! (0.1 → 0.2), never in a patch release, and the changelog says so.
#![deny(missing_docs)]

mod bodylog;
mod compact;
mod error;
mod memory;
mod metrics;
mod models;
mod relay;
mod server;
mod settings;
mod usage;

pub use error::Error;
pub use server::{run, serve};
pub use settings::{ProxySettings, DEFAULT_REMEMBERED_BYTES};
