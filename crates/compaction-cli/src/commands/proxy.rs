//! `compaction proxy`: a local OpenAI- and Anthropic-compatible proxy that compacts each
//! request on its way to the provider (the server is compaction-proxy's; this file turns the
//! command line into its settings).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use compaction_hook::{CacheRule, CompactionHook, CompactionHookSettings};
use compaction_proxy::ProxySettings;

use crate::error::UsageError;
use crate::options::PruneOptions;
use crate::strategy::{CacheAwareOptions, Stage, Strategy, StrategyOptions};

/// Serve a local proxy that agents use as their provider's base URL: it compacts each Chat
/// Completions, Responses and Messages request with the compaction hook, forwards it, and relays
/// the answer, streamed or not, as the upstream sends it.
///
/// Point Claude Code at it with ANTHROPIC_BASE_URL=http://127.0.0.1:8787, an OpenAI SDK or
/// Codex with OPENAI_BASE_URL=http://127.0.0.1:8787/v1. Paths under /v1/messages go to
/// --anthropic-upstream, every other path to --openai-upstream (a llama.cpp or vLLM server
/// too), with the client's own headers and credentials and to no other host.
///
/// The hook decides as `prune --context-window` does: nothing below --compact-at of the window,
/// then down to --compact-to with --strategy (tool-result-pruning by default). The window is
/// --context-window when given; otherwise each request's model's, from --model-window or the
/// bundled table of the providers' documented windows (Claude, GPT, o-series, and their dated
/// snapshots). A request whose model has no window, or whose body cannot be read as a
/// conversation, is forwarded unchanged with a warning (once per model for an unknown model;
/// --fail-closed answers 502 instead). One line on standard error per compaction; credentials
/// are never logged, and bodies only with --log-bodies.
///
/// It listens on 127.0.0.1 only; another address needs --allow-remote, and then every client
/// must send `Proxy-Authorization: Bearer TOKEN` with the token in COMPACTION_PROXY_TOKEN.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    compaction proxy --compact-at 0.7 --compact-to 0.4\n  \
    ANTHROPIC_BASE_URL=http://127.0.0.1:8787 claude\n  \
    compaction proxy --openai-upstream http://127.0.0.1:8080 --model-window qwen2.5-coder=32768 --listen 127.0.0.1:9000\n  \
    compaction proxy --context-window 200000 --log-bodies 2> proxy.log")]
pub struct Args {
    /// The address to listen on.
    #[arg(long, value_name = "ADDRESS", default_value = "127.0.0.1:8787")]
    pub listen: SocketAddr,
    /// Where OpenAI-compatible requests go (every path but /v1/messages...).
    #[arg(long, value_name = "URL", default_value = "https://api.openai.com")]
    pub openai_upstream: String,
    /// Where Anthropic requests (/v1/messages...) go.
    #[arg(long, value_name = "URL", default_value = "https://api.anthropic.com")]
    pub anthropic_upstream: String,
    /// Listen on an address other than loopback; every client must then present the token in
    /// COMPACTION_PROXY_TOKEN as `Proxy-Authorization: Bearer TOKEN`.
    #[arg(long)]
    pub allow_remote: bool,
    /// The largest request body accepted, in bytes (413 beyond).
    #[arg(long, value_name = "N", default_value_t = 64 << 20)]
    pub max_body_bytes: usize,
    /// Seconds the upstream may take to answer, and then between two chunks of its body.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub upstream_timeout: u64,
    /// Requests in flight at once (503 beyond).
    #[arg(long, value_name = "N", default_value_t = 512)]
    pub max_concurrent: usize,
    /// Answer 502 instead of forwarding a request whose body cannot be compacted.
    #[arg(long)]
    pub fail_closed: bool,
    /// Decide and log each compaction, but forward every request unchanged.
    #[arg(long)]
    pub dry_run: bool,
    /// Compact every request for a context window of N tokens, whatever its model; without it,
    /// each request's model's window (--model-window, else the bundled table).
    #[arg(long, value_name = "N")]
    pub context_window: Option<usize>,
    /// A model's context window, before the bundled table: NAME=TOKENS (its dated snapshots,
    /// NAME-20250929 or NAME-2025-09-29, too). Repeat for more models.
    #[arg(long, value_name = "NAME=TOKENS", value_parser = parse_model_window, conflicts_with = "context_window")]
    pub model_window: Vec<(String, usize)>,
    /// Compact once a request reaches this fraction of the window.
    #[arg(long, value_name = "F", default_value_t = 0.7)]
    pub compact_at: f64,
    /// The fraction of the window to compact down to.
    #[arg(long, value_name = "F", default_value_t = 0.4)]
    pub compact_to: f64,
    /// Drop the thinking blocks of every assistant message of a Messages request but the last
    /// N, as Anthropic's clear_thinking_20251015 does.
    #[arg(long, value_name = "N")]
    pub clear_thinking: Option<usize>,
    /// How much the proxy remembers of the replacements it made, in MB (by an estimate of their
    /// size in memory), so that a conversation's later requests get them back and its prompt
    /// cache holds; beyond it, those used least recently are forgotten first. 0 remembers nothing.
    #[arg(long, value_name = "MB", default_value_t = compaction_proxy::DEFAULT_REMEMBERED_BYTES >> 20)]
    pub remember_mb: usize,
    /// Log each request's body as received and as forwarded (after compaction) on standard
    /// error, one line each, with credentials redacted (credential headers, and sk-..., sk-ant-...,
    /// bearer tokens and api_key-like fields in the body). For debugging an agent: bodies hold
    /// its user's code and data.
    #[arg(long)]
    pub log_bodies: bool,
    /// The counter: approximate, approximate:CHARS_PER_TOKEN, tiktoken, tiktoken:ENCODING_OR_MODEL,
    /// huggingface:PATH.
    #[arg(long, default_value = "approximate")]
    pub counter: String,
    #[command(flatten)]
    pub strategy: StrategyOptions,
    #[command(flatten)]
    pub prune: PruneOptions,
    #[command(flatten)]
    pub cache_aware: CacheAwareOptions,
}

/// Runs the command: serves until interrupted.
pub fn run(args: Args) -> Result<()> {
    let mut settings = ProxySettings::default()
        .with_openai_upstream(&args.openai_upstream)
        .with_anthropic_upstream(&args.anthropic_upstream)
        .with_max_body_bytes(args.max_body_bytes)
        .with_upstream_timeout(Duration::from_secs(args.upstream_timeout))
        .with_max_concurrent(args.max_concurrent)
        .with_remembered_bytes(args.remember_mb.saturating_mul(1 << 20))
        .with_log(crate::progress::say);
    if args.allow_remote {
        let token = std::env::var("COMPACTION_PROXY_TOKEN").ok().filter(|t| !t.trim().is_empty());
        let Some(token) = token else {
            return Err(UsageError(
                "--allow-remote needs a token for clients to present: set COMPACTION_PROXY_TOKEN".into(),
            )
            .into());
        };
        settings = settings.with_remote_clients(token);
    } else if !args.listen.ip().is_loopback() {
        return Err(UsageError(format!(
            "--listen {}: only loopback addresses without --allow-remote (and a token)",
            args.listen
        ))
        .into());
    }
    if args.fail_closed {
        settings = settings.with_fail_closed();
    }
    if args.dry_run {
        settings = settings.with_dry_run();
    }
    if let Some(keep) = args.clear_thinking {
        settings = settings.with_clear_thinking(keep);
    }
    if args.log_bodies {
        settings = settings.with_log_bodies();
    }
    // Before the options are checked against the strategy: its hint (`--offload-to`) would
    // name an option the proxy does not take.
    if let Some(strategy) = args.strategy.strategy.as_ref().filter(|s| s.has(Stage::Offload)) {
        return Err(UsageError(format!(
            "the proxy cannot run --strategy {strategy} yet: offloading writes results to a store the \
             proxy does not keep yet; it runs tool-result-pruning, sliding-window, summarization, \
             observation-masking and chains of those"
        ))
        .into());
    }
    let strategy = args.strategy.resolve(false)?;
    if strategy.has(Stage::Summarization) {
        // A summary waits on a model for seconds: one conversation's must not hold up the
        // compaction of every other request.
        settings = settings.with_compacting_at_once(args.max_concurrent);
    }
    let recipe = HookRecipe {
        strategy,
        options: args.strategy.clone(),
        prune: args.prune.clone(),
        counter: args.counter.clone(),
        compact_at: args.compact_at,
        compact_to: args.compact_to,
        cache: args.cache_aware.rule(false, false),
    };
    // A bad strategy, counter or fraction is said now, not at the first request.
    let first = recipe.hook(args.context_window.unwrap_or(200_000))?;
    let compacting = match args.context_window {
        Some(window) => {
            settings = settings.with_compaction(first);
            format!(
                "{} at {} of a {window}-token window, down to {}",
                recipe.strategy, args.compact_at, args.compact_to
            )
        }
        None => {
            let described = format!(
                "{} at {} of each request's model's window (--model-window, else the bundled table), down to {}",
                recipe.strategy, args.compact_at, args.compact_to
            );
            settings =
                settings.with_compaction_by_model(move |window| recipe.hook(window).map_err(Into::into));
            for (name, tokens) in &args.model_window {
                settings = settings.with_model_window(name, *tokens);
            }
            described
        }
    };
    let listener =
        std::net::TcpListener::bind(args.listen).with_context(|| format!("listening on {}", args.listen))?;
    let address = listener.local_addr().context("the listener's address")?;
    crate::progress::say(&format!(
        "compaction proxy on http://{address}: OpenAI → {}, Anthropic → {}; compaction: {compacting}{}{}",
        args.openai_upstream,
        args.anthropic_upstream,
        if args.dry_run { " (dry run)" } else { "" },
        if args.log_bodies { "; logging bodies (credentials redacted)" } else { "" }
    ));
    compaction_proxy::run(listener, settings)?;
    Ok(())
}

/// What every hook of the proxy is built from; only the window differs between them.
struct HookRecipe {
    strategy: Strategy,
    options: StrategyOptions,
    prune: PruneOptions,
    counter: String,
    compact_at: f64,
    compact_to: f64,
    cache: Option<CacheRule>,
}

impl HookRecipe {
    /// The hook for a window of `window` tokens.
    fn hook(&self, window: usize) -> Result<CompactionHook> {
        let counter = crate::strategy::counter(&self.counter, &self.options.client_settings())?;
        let mut built = self.options.build_live(&self.strategy, &self.prune, crate::progress::say)?;
        let mut hook_settings = CompactionHookSettings::new(window)
            .with_compact_at(self.compact_at)
            .with_compact_to(self.compact_to);
        // Anthropic's five-minute cache; the time since a conversation's previous answer
        // tells the rule when it has gone cold.
        if let Some(rule) = self.cache {
            hook_settings = hook_settings.with_cache(rule);
        }
        let hook = CompactionHook::new(built.take_compactor(), hook_settings)
            .map_err(|e| UsageError(e.to_string()))?
            .with_counter(counter);
        Ok(hook)
    }
}

/// `--model-window NAME=TOKENS`.
fn parse_model_window(text: &str) -> Result<(String, usize), String> {
    let expected = || format!("expected NAME=TOKENS, such as qwen2.5-coder=32768, found {text:?}");
    let (name, tokens) = text.rsplit_once('=').ok_or_else(expected)?;
    let tokens = tokens.trim().replace('_', "").parse::<usize>().map_err(|_| expected())?;
    match (name.trim(), tokens) {
        ("", _) | (_, 0) => Err(expected()),
        (name, tokens) => Ok((name.to_owned(), tokens)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_windows_read_as_name_and_tokens() {
        assert_eq!(parse_model_window("qwen2.5-coder=32768"), Ok(("qwen2.5-coder".to_owned(), 32_768)));
        assert_eq!(parse_model_window("hf.co/org/m:Q4=131_072"), Ok(("hf.co/org/m:Q4".to_owned(), 131_072)));
        for bad in ["qwen", "=100", "m=", "m=0", "m=-5", "m=12k"] {
            assert!(parse_model_window(bad).is_err(), "{bad}");
        }
    }
}
