//! Which hook a request runs under: the one given (a fixed window), or, compacting by model, a
//! hook for the window of the model the request names, found in a bundled table of the
//! providers' documented context windows.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use compaction_hook::CompactionHook;

use crate::error::Error;
use crate::settings::ProxySettings;

/// The context windows of the providers' models, in tokens, by the name a request gives in its
/// `model` field. Keep in sync with the providers' model pages (read 2026-12-06):
///
/// - Anthropic: <https://platform.claude.com/docs/en/about-claude/models/overview> and each
///   model's page, <https://platform.claude.com/docs/en/models/MODEL/overview>. Claude Sonnet 4
///   and 4.5 take 1M tokens only behind the `context-1m` beta header; the table gives their
///   200K default (give the window yourself for the beta).
/// - OpenAI: <https://platform.openai.com/docs/models> and each model's page,
///   <https://platform.openai.com/docs/models/MODEL>; gpt-oss: the model card,
///   <https://openai.com/index/gpt-oss-model-card/>.
///
/// A dated snapshot (`claude-sonnet-4-5-20250929`, `gpt-4o-2024-08-06`) or a `-latest` alias
/// of a name here has its window (see [`window_in`]). Local models (llama.cpp, vLLM, Ollama)
/// are named as their servers were started; their windows are given with
/// `ProxySettings::with_model_window`.
const WINDOWS: &[(&str, usize)] = &[
    // Anthropic, 1M tokens: the Claude 4.6 models and every later one.
    ("claude-fable-5-2", 1_000_000),
    ("claude-fable-5-1", 1_000_000),
    ("claude-fable-5", 1_000_000),
    ("claude-mythos-5", 1_000_000),
    ("claude-opus-5-5", 1_000_000),
    ("claude-sonnet-5-5", 1_000_000),
    ("claude-haiku-5-5", 1_000_000),
    ("claude-opus-5", 1_000_000),
    ("claude-sonnet-5", 1_000_000),
    ("claude-opus-4-8", 1_000_000),
    ("claude-opus-4-7", 1_000_000),
    ("claude-opus-4-6", 1_000_000),
    ("claude-sonnet-4-6", 1_000_000),
    // Anthropic, 200K tokens.
    ("claude-haiku-4-5", 200_000),
    ("claude-sonnet-4-5", 200_000),
    ("claude-opus-4-5", 200_000),
    ("claude-opus-4-1", 200_000),
    ("claude-opus-4-0", 200_000),
    ("claude-opus-4", 200_000),
    ("claude-sonnet-4-0", 200_000),
    ("claude-sonnet-4", 200_000),
    ("claude-3-7-sonnet", 200_000),
    ("claude-3-5-sonnet", 200_000),
    ("claude-3-5-haiku", 200_000),
    ("claude-3-opus", 200_000),
    ("claude-3-sonnet", 200_000),
    ("claude-3-haiku", 200_000),
    // OpenAI: GPT-5 (400K; the ChatGPT snapshots 128K).
    ("gpt-5", 400_000),
    ("gpt-5-mini", 400_000),
    ("gpt-5-nano", 400_000),
    ("gpt-5-codex", 400_000),
    ("gpt-5-pro", 400_000),
    ("gpt-5.1", 400_000),
    ("gpt-5.1-codex", 400_000),
    ("gpt-5.1-codex-mini", 400_000),
    ("gpt-5-chat-latest", 128_000),
    ("gpt-5.1-chat-latest", 128_000),
    // OpenAI: GPT-4.1 (1,047,576), GPT-4o and GPT-4 Turbo (128K), GPT-4, GPT-3.5 Turbo.
    ("gpt-4.1", 1_047_576),
    ("gpt-4.1-mini", 1_047_576),
    ("gpt-4.1-nano", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4o-mini", 128_000),
    ("chatgpt-4o-latest", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    // OpenAI: the o-series.
    ("o1", 200_000),
    ("o1-pro", 200_000),
    ("o1-mini", 128_000),
    ("o3", 200_000),
    ("o3-pro", 200_000),
    ("o3-mini", 200_000),
    ("o4-mini", 200_000),
    ("codex-mini-latest", 200_000),
    // OpenAI's open-weight models, as a local server names them.
    ("gpt-oss-120b", 131_072),
    ("gpt-oss-20b", 131_072),
];

/// The window of `model` in the bundled table: its exact name, else a name in the table followed
/// by a snapshot date or `-latest`.
pub(crate) fn bundled_window(model: &str) -> Option<usize> {
    window_in(WINDOWS.iter().map(|&(name, window)| (name, window)), model)
}

/// The window of `model` among `table`'s names: the exact name first; then a name followed by
/// `-YYYYMMDD` (Anthropic's snapshots), `-YYYY-MM-DD` (OpenAI's) or `-latest`. Nothing else is
/// stripped, so `gpt-4o-mini` never takes `gpt-4o`'s window, nor `gpt-5.1` `gpt-5`'s.
fn window_in<'a>(table: impl Iterator<Item = (&'a str, usize)> + Clone, model: &str) -> Option<usize> {
    if let Some((_, window)) = table.clone().find(|&(name, _)| name == model) {
        return Some(window);
    }
    table
        .filter_map(|(name, window)| model.strip_prefix(name).map(|rest| (rest, window)))
        .find(|&(rest, _)| is_snapshot_suffix(rest))
        .map(|(_, window)| window)
}

/// `-20250929`, `-2024-08-06` or `-latest`.
fn is_snapshot_suffix(rest: &str) -> bool {
    let Some(rest) = rest.strip_prefix('-') else { return false };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let dashed = rest.len() == 10
        && rest.as_bytes()[4] == b'-'
        && rest.as_bytes()[7] == b'-'
        && digits(&rest[..4])
        && digits(&rest[5..7])
        && digits(&rest[8..]);
    rest == "latest" || (rest.len() == 8 && digits(rest)) || dashed
}

/// What a hook is built from, for a window of so many tokens.
pub(crate) type MakeHook =
    Box<dyn Fn(usize) -> Result<CompactionHook, Box<dyn std::error::Error + Send + Sync>> + Send + Sync>;

/// How many unknown models are remembered as warned about: past it, the set starts again, and
/// a model may be warned about once more (a client naming ever new models gets a line for each,
/// as it would anyway; the proxy's memory stays bounded).
const WARNED: usize = 1_024;

/// How requests are compacted.
pub(crate) enum Compaction {
    /// Every request under one hook: the window was given.
    Fixed(Arc<CompactionHook>),
    /// Each request under a hook for its model's window.
    ByModel(ByModel),
}

/// Hooks by window, built on first use, for the windows the requests' models have.
pub(crate) struct ByModel {
    make: MakeHook,
    built: Mutex<HashMap<usize, Arc<CompactionHook>>>,
    /// The models warned about, each once, by a hash of the name (a name is the client's and may
    /// be of any length); at most [`WARNED`] of them.
    warned: Mutex<HashSet<u64>>,
}

impl ByModel {
    pub(crate) fn new(make: MakeHook) -> ByModel {
        ByModel { make, built: Mutex::default(), warned: Mutex::default() }
    }

    fn hook(&self, window: usize) -> Result<Arc<CompactionHook>, Error> {
        let mut built = self.built.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(hook) = built.get(&window) {
            return Ok(hook.clone());
        }
        let hook = Arc::new((self.make)(window).map_err(|source| Error::Hook { window, source })?);
        built.insert(window, hook.clone());
        Ok(hook)
    }
}

impl fmt::Debug for Compaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Compaction::Fixed(hook) => f.debug_tuple("Fixed").field(hook).finish(),
            Compaction::ByModel(by_model) => {
                let built = by_model.built.lock().map(|built| built.len()).unwrap_or_default();
                f.debug_struct("ByModel").field("hooks_built", &built).finish_non_exhaustive()
            }
        }
    }
}

/// The window of `model`: the user's windows first (the last given for a name wins), then the
/// bundled table.
pub(crate) fn window(own: &[(String, usize)], model: &str) -> Option<usize> {
    let own = own.iter().rev().map(|(name, window)| (name.as_str(), *window));
    window_in(own, model).or_else(|| bundled_window(model))
}

/// The hook a request to `endpoint` naming `model` (as its reader found it) runs under.
///
/// # Errors
///
/// Compacting by model: [`Error::UnknownModel`] for a model without a window (or no model),
/// [`Error::Hook`] when no hook could be built for the window.
pub(crate) fn hook_for(
    settings: &ProxySettings,
    endpoint: &'static str,
    model: Option<&str>,
) -> Result<Arc<CompactionHook>, Error> {
    let by_model = match settings.compaction.as_ref().expect("compaction is on") {
        Compaction::Fixed(hook) => return Ok(hook.clone()),
        Compaction::ByModel(by_model) => by_model,
    };
    match model.and_then(|model| window(&settings.model_windows, model)) {
        Some(window) => by_model.hook(window),
        None => Err(Error::UnknownModel { endpoint, model: model.map(str::to_owned) }),
    }
}

/// Whether `error` is worth a log line: an unknown model is said once per model, everything
/// else each time.
pub(crate) fn first_time(settings: &ProxySettings, error: &Error) -> bool {
    match (&settings.compaction, error) {
        (Some(Compaction::ByModel(by_model)), Error::UnknownModel { model, .. }) => {
            let mut warned = by_model.warned.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            model.hash(&mut hasher);
            let first = warned.insert(hasher.finish());
            if warned.len() > WARNED {
                warned.clear();
            }
            first
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_names_and_their_snapshots_have_windows() {
        let cases = [
            ("claude-sonnet-4-5", Some(200_000)),
            ("claude-sonnet-4-5-20250929", Some(200_000)),
            ("claude-haiku-4-5-20251001", Some(200_000)),
            ("claude-opus-4-1-20250805", Some(200_000)),
            ("claude-opus-4-20250514", Some(200_000)),
            ("claude-3-5-sonnet-latest", Some(200_000)),
            ("claude-3-7-sonnet-20250219", Some(200_000)),
            ("claude-opus-4-6", Some(1_000_000)),
            ("claude-sonnet-5", Some(1_000_000)),
            ("gpt-4o", Some(128_000)),
            ("gpt-4o-2024-08-06", Some(128_000)),
            ("gpt-4o-mini-2024-07-18", Some(128_000)),
            ("gpt-4.1-2025-04-14", Some(1_047_576)),
            ("gpt-5", Some(400_000)),
            ("gpt-5-2025-08-07", Some(400_000)),
            ("gpt-5-chat-latest", Some(128_000)),
            ("o3", Some(200_000)),
            ("o4-mini-2025-04-16", Some(200_000)),
            ("o1-mini", Some(128_000)),
        ];
        for (model, window) in cases {
            assert_eq!(bundled_window(model), window, "{model}");
        }
    }

    #[test]
    fn only_a_snapshot_suffix_borrows_a_window() {
        for model in [
            "gpt-5.4",
            "gpt-4o-audio-preview",
            "gpt-4o-2024",
            "gpt-4o-20240806x",
            "claude-sonnet-4-5-x",
            "claude-sonnet",
            "llama3.1:8b",
            "",
            "GPT-4O",
        ] {
            assert_eq!(bundled_window(model), None, "{model}");
        }
    }

    #[test]
    fn every_name_is_listed_once_and_no_name_is_another_ones_snapshot() {
        let mut seen = HashSet::new();
        for (name, window) in WINDOWS {
            assert!(seen.insert(name), "{name} twice");
            assert!(*window >= 4_096, "{name}");
            assert_eq!(bundled_window(name), Some(*window), "{name}");
        }
    }

    #[test]
    fn the_users_windows_come_before_the_table_and_the_last_given_wins() {
        let own = [("qwen2.5-coder", 32_768), ("gpt-4o", 64_000), ("gpt-4o", 100_000)]
            .map(|(name, window)| (name.to_owned(), window));
        assert_eq!(window(&own, "qwen2.5-coder"), Some(32_768));
        assert_eq!(window(&own, "gpt-4o"), Some(100_000));
        assert_eq!(window(&own, "gpt-4o-2024-08-06"), Some(100_000));
        assert_eq!(window(&own, "claude-opus-4-1"), Some(200_000));
    }

    #[test]
    fn unknown_models_are_warned_about_once_each_and_remembered_within_a_bound() {
        let settings = ProxySettings::default().with_compaction_by_model(|_| Err("no hook here".into()));
        let unknown = |model: String| Error::UnknownModel { endpoint: "/v1/messages", model: Some(model) };
        assert!(first_time(&settings, &unknown("mystery-7b".into())));
        assert!(!first_time(&settings, &unknown("mystery-7b".into())));
        assert!(first_time(&settings, &Error::UnknownModel { endpoint: "/v1/messages", model: None }));
        // A client naming a new model with every request, long names among them.
        for n in 0..10 * WARNED {
            let model =
                if n % 100 == 0 { format!("{n}{}", "x".repeat(1 << 16)) } else { format!("model-{n}") };
            assert!(first_time(&settings, &unknown(model)), "{n}");
        }
        let Some(Compaction::ByModel(by_model)) = &settings.compaction else { panic!("by model") };
        assert!(by_model.warned.lock().expect("not poisoned").len() <= WARNED);
    }

    #[test]
    fn the_hook_is_the_one_for_the_models_window() {
        let settings = ProxySettings::default().with_compaction_by_model(|_| Err("no hook here".into()));
        let unknown = hook_for(&settings, "/v1/messages", Some("mystery-7b"));
        assert!(
            matches!(unknown, Err(Error::UnknownModel { model: Some(ref m), .. }) if m == "mystery-7b"),
            "{unknown:?}"
        );
        let none = hook_for(&settings, "/v1/messages", None);
        assert!(matches!(none, Err(Error::UnknownModel { model: None, .. })), "{none:?}");
        let known = hook_for(&settings, "/v1/messages", Some("claude-sonnet-4-5-20250929"));
        assert!(matches!(known, Err(Error::Hook { window: 200_000, .. })), "{known:?}");
    }
}
