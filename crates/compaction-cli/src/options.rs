//! The options several commands share, as clap flattens them into each: the pruning
//! compactor's (`prune`, `simulate`, `bench`), the hook's and its counter (`simulate`, `bench`),
//! the price table (`simulate`, `bench`), and the offload policies (`offload`, `simulate`). Each knows what it builds; the commands hand each
//! step only what it needs.

use std::path::PathBuf;

use anyhow::{Context, Result};
use compaction_core::{PruningSettings, ToolResultPruningCompactor};
use compaction_hook::CompactionHookSettings;
use compaction_offload::{AlwaysOffload, NeverOffload, OffloadOverChars, OffloadStrategies, PolicyKey};
use compaction_replay::{CacheKind, PriceTable, Pricing};

use crate::error::UsageError;
use crate::text;

/// The pruning compactor's settings as options, shared by `prune` and `simulate`.
#[derive(Debug, Clone, clap::Args)]
pub struct PruneOptions {
    /// The number of most recent tool-calling steps never pruned, offloaded, summarized or
    /// dropped; 0 is allowed for sliding-window and summarization.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub min_keep_steps: usize,
    /// Only prune results larger than this many tokens.
    #[arg(long, default_value_t = 200, value_name = "N")]
    pub min_tokens: usize,
    /// The text left in place of a pruned result; `{tool_name}` is filled in.
    #[arg(long, value_name = "TEXT")]
    pub placeholder: Option<String>,
    /// Comma-separated meta keys whose results are left alone ("" for none).
    #[arg(long, value_name = "LIST", default_value = "tool_result_offloaded")]
    pub skip_meta_keys: String,
    /// Comma-separated tool names whose results are never pruned.
    #[arg(long, value_name = "LIST", default_value = "")]
    pub exclude_tools: String,
    /// Do nothing unless at least this many tokens would be freed.
    #[arg(long, value_name = "N")]
    pub clear_at_least: Option<usize>,
    /// Also replace the arguments of the calls whose results were pruned with `{}`.
    #[arg(long)]
    pub clear_tool_inputs: bool,
    /// Protect the N most recent tool results one by one, instead of whole steps.
    #[arg(long, value_name = "N")]
    pub keep_tool_results: Option<usize>,
    /// Keep the first and last N characters of each pruned result around the placeholder.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub preview_ends: usize,
}

impl PruneOptions {
    /// The compactor these options describe; invalid settings are usage errors.
    pub fn compactor(&self) -> Result<ToolResultPruningCompactor> {
        let mut settings = PruningSettings::default()
            .with_min_keep_steps(self.min_keep_steps)
            .with_min_tokens(self.min_tokens)
            .with_skip_meta_keys(text::list(&self.skip_meta_keys))
            .with_exclude_tools(text::list(&self.exclude_tools))
            .with_clear_at_least(self.clear_at_least)
            .with_clear_tool_inputs(self.clear_tool_inputs)
            .with_keep_tool_results(self.keep_tool_results)
            .with_preview_chars(self.preview_ends);
        if let Some(placeholder) = &self.placeholder {
            settings = settings.with_placeholder(placeholder.as_str());
        }
        ToolResultPruningCompactor::new(settings).map_err(|e| UsageError(e.to_string()).into())
    }
}

/// The hook a replay runs, and its counter: the options `simulate` and `bench` share.
#[derive(Debug, Clone, clap::Args)]
pub struct HookOptions {
    /// The model's context window, in tokens.
    #[arg(long, value_name = "N")]
    pub context_window: usize,
    /// Compact once the request reaches this fraction of the window.
    #[arg(long, value_name = "F", default_value_t = 0.7)]
    pub compact_at: f64,
    /// The fraction of the window to compact down to.
    #[arg(long, value_name = "F", default_value_t = 0.4)]
    pub compact_to: f64,
    /// The counter: approximate, approximate:CHARS_PER_TOKEN, tiktoken, tiktoken:ENCODING_OR_MODEL,
    /// huggingface:PATH, or a provider's own count: openai:MODEL or anthropic:MODEL.
    #[arg(long, default_value = "approximate")]
    pub counter: String,
}

impl HookOptions {
    /// The hook's settings these options give, with `compact_at` and `compact_to` as given.
    pub fn settings(&self, compact_at: f64, compact_to: f64) -> CompactionHookSettings {
        CompactionHookSettings::new(self.context_window)
            .with_compact_at(compact_at)
            .with_compact_to(compact_to)
    }
}

/// How the calls are priced: the options `simulate` and `bench` share.
#[derive(Debug, Clone, clap::Args)]
pub struct CostOptions {
    /// A price table (JSON: {"models": [{"match": "claude-sonnet-4*", "input": 3.0, "output": 15.0,
    /// "cache_read": 0.3, "cache_write_5m": 3.75, "cache_write_1h": 6.0, "cache": "anthropic"}]},
    /// dollars per million tokens) in place of the bundled one.
    #[arg(long, value_name = "FILE", help_heading = "Cost")]
    pub prices: Option<PathBuf>,
    /// The model the calls are priced by where the log names none.
    #[arg(long, value_name = "NAME", help_heading = "Cost")]
    pub price_model: Option<String>,
    /// The prompt cache to price with: anthropic, openai or none; the price row's when absent.
    #[arg(long, value_name = "KIND", value_parser = ["anthropic", "openai", "none"], help_heading = "Cost")]
    pub cache: Option<String>,
}

impl CostOptions {
    /// The price table and options --prices, --price-model and --cache give.
    pub fn pricing(&self) -> Result<Pricing> {
        let table = match &self.prices {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading the price table {}", path.display()))?;
                PriceTable::from_json(&path.display().to_string(), &text)?
            }
            None => PriceTable::bundled(),
        };
        Ok(Pricing::new(table)
            .with_model(self.price_model.clone())
            .with_cache(self.cache.as_deref().and_then(CacheKind::from_name)))
    }
}

/// The `--policy` options, shared by `offload` and `simulate`.
#[derive(Debug, Clone, clap::Args)]
pub struct Policies {
    /// Which tools' results to offload: TOOLS=always, TOOLS=never or TOOLS=over:N (more than N
    /// characters). TOOLS is a tool name, comma-joined names, or * for every other tool.
    /// Repeatable; `*=always` when none is given.
    #[arg(long = "policy", value_name = "TOOLS=POLICY", value_parser = parse_policy)]
    pub policies: Vec<Policy>,
}

impl Policies {
    /// The strategies the options describe.
    pub fn strategies(&self) -> OffloadStrategies {
        let mut strategies = OffloadStrategies::new();
        if self.policies.is_empty() {
            strategies.insert(PolicyKey::Any, Box::new(AlwaysOffload));
        }
        for policy in &self.policies {
            let boxed: Box<dyn compaction_offload::OffloadPolicy> = match policy.kind {
                PolicyKind::Always => Box::new(AlwaysOffload),
                PolicyKind::Never => Box::new(NeverOffload),
                PolicyKind::OverChars(n) => Box::new(OffloadOverChars::new(n)),
            };
            strategies.insert(policy.key.clone(), boxed);
        }
        strategies
    }
}

/// One `--policy TOOLS=POLICY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The tools it applies to.
    pub key: PolicyKey,
    /// What it does.
    pub kind: PolicyKind,
}

/// The reference's three policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    /// `always`.
    Always,
    /// `never`.
    Never,
    /// `over:N`.
    OverChars(usize),
}

/// Parses `TOOLS=POLICY`; clap turns an error into a usage error (exit status 2).
pub fn parse_policy(text: &str) -> Result<Policy, String> {
    // Split at the last `=`: a policy never contains one, a tool name might.
    let Some((tools, policy)) = text.rsplit_once('=') else {
        return Err("expected TOOLS=POLICY, such as '*=always' or 'read_file=over:2000'".into());
    };
    let tools = tools.trim();
    let key = if tools == "*" {
        PolicyKey::Any
    } else {
        let names: Vec<&str> = tools.split(',').map(str::trim).collect();
        if names.iter().any(|n| n.is_empty()) {
            return Err(format!("'{tools}': expected a tool name, comma-joined names, or *"));
        }
        if names.contains(&"*") {
            return Err(format!("'{tools}': * stands alone, it cannot be one of a set of names"));
        }
        match names.as_slice() {
            [one] => PolicyKey::Tool((*one).to_owned()),
            many => PolicyKey::tools(many.iter().copied()),
        }
    };
    let policy = policy.trim();
    let kind = match policy {
        "always" => PolicyKind::Always,
        "never" => PolicyKind::Never,
        _ => match policy.strip_prefix("over:") {
            Some(n) => PolicyKind::OverChars(n.trim().parse().map_err(|_| {
                format!("'{policy}': expected over:N with N a number of characters, such as over:2000")
            })?),
            None => return Err(format!("'{policy}': expected always, never or over:N")),
        },
    };
    Ok(Policy { key, kind })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse() {
        let p = parse_policy("*=always").unwrap();
        assert_eq!((p.key, p.kind), (PolicyKey::Any, PolicyKind::Always));
        let p = parse_policy("read_file=over:2000").unwrap();
        assert_eq!((p.key, p.kind), (PolicyKey::Tool("read_file".into()), PolicyKind::OverChars(2000)));
        let p = parse_policy("search, grep=never").unwrap();
        assert_eq!((p.key, p.kind), (PolicyKey::tools(["search", "grep"]), PolicyKind::Never));
        for bad in ["always", "=always", "a,,b=always", "a=sometimes", "a=over:", "a=over:-1", "a,*=never"] {
            assert!(parse_policy(bad).is_err(), "{bad}");
        }
    }
}
