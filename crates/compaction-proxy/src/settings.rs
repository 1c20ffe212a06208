//! [`ProxySettings`]: where the upstreams are, who may connect, the limits, and the hook that
//! decides when to compact.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use compaction_hook::CompactionHook;

use crate::models::{ByModel, Compaction};

/// The bytes of replacements remembered by default: tens of thousands of pruned results (a few
/// hundred bytes to a kilobyte or two each), the dozens each of hundreds of conversations.
pub const DEFAULT_REMEMBERED_BYTES: usize = 32 << 20;

/// Where a log line goes: one line per compaction, per refused or failed request.
pub(crate) type LogSink = Arc<dyn Fn(&str) + Send + Sync>;

/// How the proxy runs. Build it with [`ProxySettings::default`] and the `with_*` methods.
///
/// Without [`with_compaction`](Self::with_compaction) or
/// [`with_compaction_by_model`](Self::with_compaction_by_model) the proxy only passes requests
/// through.
#[non_exhaustive]
pub struct ProxySettings {
    pub(crate) openai_upstream: String,
    pub(crate) anthropic_upstream: String,
    pub(crate) remote_token: Option<String>,
    pub(crate) max_body_bytes: usize,
    pub(crate) upstream_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) max_concurrent: usize,
    pub(crate) fail_closed: bool,
    pub(crate) dry_run: bool,
    pub(crate) clear_thinking: Option<usize>,
    pub(crate) remembered_bytes: usize,
    /// Requests compacted at once; `None`: as many as there are cores.
    pub(crate) compacting_at_once: Option<usize>,
    pub(crate) compaction: Option<Compaction>,
    /// The user's model windows, looked up before the bundled table.
    pub(crate) model_windows: Vec<(String, usize)>,
    pub(crate) log_bodies: bool,
    pub(crate) log: LogSink,
}

impl Default for ProxySettings {
    /// The providers' own APIs upstream, loopback clients only, 64 MiB bodies, 10 minutes for
    /// the upstream's headers and between two chunks of its body, 10 seconds to connect, 512
    /// requests in flight, fail open, no compaction, 32 MiB of replacements remembered, log
    /// lines on standard error.
    fn default() -> Self {
        ProxySettings {
            openai_upstream: "https://api.openai.com".to_owned(),
            anthropic_upstream: "https://api.anthropic.com".to_owned(),
            remote_token: None,
            max_body_bytes: 64 << 20,
            upstream_timeout: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(10),
            max_concurrent: 512,
            fail_closed: false,
            dry_run: false,
            clear_thinking: None,
            remembered_bytes: DEFAULT_REMEMBERED_BYTES,
            compacting_at_once: None,
            compaction: None,
            model_windows: Vec::new(),
            log_bodies: false,
            log: Arc::new(|line: &str| eprintln!("{line}")),
        }
    }
}

impl fmt::Debug for ProxySettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The token is a credential: only whether there is one.
        f.debug_struct("ProxySettings")
            .field("openai_upstream", &self.openai_upstream)
            .field("anthropic_upstream", &self.anthropic_upstream)
            .field("remote_token", &self.remote_token.as_ref().map(|_| "<redacted>"))
            .field("max_body_bytes", &self.max_body_bytes)
            .field("upstream_timeout", &self.upstream_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_concurrent", &self.max_concurrent)
            .field("fail_closed", &self.fail_closed)
            .field("dry_run", &self.dry_run)
            .field("clear_thinking", &self.clear_thinking)
            .field("remembered_bytes", &self.remembered_bytes)
            .field("compacting_at_once", &self.compacting_at_once)
            .field("compaction", &self.compaction)
            .field("model_windows", &self.model_windows)
            .field("log_bodies", &self.log_bodies)
            .finish_non_exhaustive()
    }
}

impl ProxySettings {
    /// Where OpenAI requests (every path but Anthropic's `/v1/messages…`) go: a base URL such as
    /// `https://api.openai.com` or `http://127.0.0.1:8080` (a llama.cpp or vLLM server). A base
    /// ending in `/v1` takes paths without their own `/v1`.
    #[must_use]
    pub fn with_openai_upstream(mut self, url: impl Into<String>) -> Self {
        self.openai_upstream = url.into();
        self
    }

    /// Where Anthropic requests (`/v1/messages` and the paths under it) go, such as
    /// `https://api.anthropic.com`.
    #[must_use]
    pub fn with_anthropic_upstream(mut self, url: impl Into<String>) -> Self {
        self.anthropic_upstream = url.into();
        self
    }

    /// Serves clients on any address the listener is bound to, and requires every client to
    /// present `token` as `Proxy-Authorization: Bearer TOKEN` (the header is not forwarded).
    /// Without it, a listener on anything but loopback is refused.
    #[must_use]
    pub fn with_remote_clients(mut self, token: impl Into<String>) -> Self {
        self.remote_token = Some(token.into());
        self
    }

    /// The largest request body read; a larger one is answered 413.
    #[must_use]
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// How long the upstream may take to answer with its headers, and then between two chunks
    /// of its body; past it the client gets 504 (or, mid-body, a cut connection).
    #[must_use]
    pub fn with_upstream_timeout(mut self, timeout: Duration) -> Self {
        self.upstream_timeout = timeout;
        self
    }

    /// How many requests may be in flight at once; one more is answered 503.
    #[must_use]
    pub fn with_max_concurrent(mut self, requests: usize) -> Self {
        self.max_concurrent = requests.max(1);
        self
    }

    /// Answers 502 instead of forwarding a request whose body could not be compacted.
    #[must_use]
    pub fn with_fail_closed(mut self) -> Self {
        self.fail_closed = true;
        self
    }

    /// Decides and logs each compaction, but forwards every request unchanged.
    #[must_use]
    pub fn with_dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }

    /// Runs `hook` over each Chat Completions, Responses and Messages request (and each request
    /// to count a Responses or Messages request's tokens) before it is forwarded, whatever model
    /// it names: the window is the hook's.
    #[must_use]
    pub fn with_compaction(mut self, hook: CompactionHook) -> Self {
        self.compaction = Some(Compaction::Fixed(Arc::new(hook)));
        self
    }

    /// Compacts each request as [`with_compaction`](Self::with_compaction) does, with a hook for
    /// the context window of the model the request names (its `model` field): `make` builds the
    /// hook for a window, once per window, on first use.
    ///
    /// The window is the one given with [`with_model_window`](Self::with_model_window), else the
    /// one in the proxy's bundled table of the providers' documented windows (Claude, GPT,
    /// o-series; exact names, and their dated snapshots such as `claude-sonnet-4-5-20250929` or
    /// `gpt-4o-2024-08-06`). A request whose model has no window goes through uncompacted with
    /// a warning, once per model ([`Error::UnknownModel`](crate::Error::UnknownModel)), or is
    /// refused with 502 under [`with_fail_closed`](Self::with_fail_closed).
    #[must_use]
    pub fn with_compaction_by_model(
        mut self,
        make: impl Fn(usize) -> Result<CompactionHook, Box<dyn std::error::Error + Send + Sync>>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.compaction = Some(Compaction::ByModel(ByModel::new(Box::new(make))));
        self
    }

    /// Compacting by model, gives `model` (and its dated snapshots) a window of `tokens`, before
    /// the bundled table: a local model, or a window the table has otherwise.
    #[must_use]
    pub fn with_model_window(mut self, model: impl Into<String>, tokens: usize) -> Self {
        self.model_windows.push((model.into(), tokens));
        self
    }

    /// Logs each request's body as it came and as it is forwarded, for debugging an agent, on
    /// the log ([`with_log`](Self::with_log)), with every credential redacted: the values of
    /// credential headers, and anything in the body that looks like a key (`sk-…`, `sk-ant-…`,
    /// a bearer token, …). Off by default: bodies hold the user's code and data.
    #[must_use]
    pub fn with_log_bodies(mut self) -> Self {
        self.log_bodies = true;
        self
    }

    /// With compaction, drops the thinking blocks of every assistant message of a Messages
    /// request but the last `keep`, before the hook runs, as Anthropic's `clear_thinking_20251015`
    /// context edit does (the last ones are never touched: the API needs them back unchanged).
    #[must_use]
    pub fn with_clear_thinking(mut self, keep: usize) -> Self {
        self.clear_thinking = Some(keep);
        self
    }

    /// With compaction, how much the proxy remembers of the replacements it made, in bytes (by
    /// an estimate of their size in memory): each conversation's later requests get the same
    /// replacements back, so its prompt cache holds. Beyond it, the replacements used least
    /// recently are forgotten first (a conversation whose replacements are forgotten is
    /// compacted afresh when it grows past the threshold again). By default
    /// [`DEFAULT_REMEMBERED_BYTES`]; 0 remembers nothing.
    #[must_use]
    pub fn with_remembered_bytes(mut self, bytes: usize) -> Self {
        self.remembered_bytes = bytes;
        self
    }

    /// How many requests are read, counted and compacted at once, the others waiting their turn
    /// in order. By default as many as there are cores: that work is the CPU's, and more at once
    /// would only hold more requests parsed in memory. A hook whose compaction waits on a model
    /// (summaries) should be given more, up to the requests in flight, or one conversation's
    /// summary would hold up every other request.
    #[must_use]
    pub fn with_compacting_at_once(mut self, requests: usize) -> Self {
        self.compacting_at_once = Some(requests.max(1));
        self
    }

    /// Sends the proxy's log lines (one per compaction, per failed or refused request; never a
    /// credential, and a body only with [`with_log_bodies`](Self::with_log_bodies)) to `log`
    /// instead of standard error.
    #[must_use]
    pub fn with_log(mut self, log: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.log = Arc::new(log);
        self
    }
}
