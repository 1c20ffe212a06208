//! The strategies `prune` and `simulate` compact with (`--strategy`), the options that set them
//! up, and the provider clients some of them need: a chat model for summaries, a provider's
//! token counter for `--counter openai:MODEL`; the offload store.
//!
//! Every strategy is built into one `Box<dyn Compactor>`, a chain being compaction-core's
//! `ChainCompactor` over the stages named, so `prune --target-tokens`, `prune --context-window`
//! and `simulate` run the same compactor. What a compactor cannot return (offload writes that
//! failed, summary rounds that failed while the last good result was kept) is kept beside it
//! for the command to report.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{anyhow, Result};
use compaction_core::{
    ChainCompactor, Compaction, Compactor, MaskingSettings, ObservationMaskingCompactor,
    SlidingWindowCompactor, SlidingWindowSettings, SummarizationCompactor, SummarizationSettings,
    SummaryRound, ToolResultPruningCompactor,
};
use compaction_hook::CacheRule;
use compaction_llm::{ClientSettings, ProviderChatGenerator};
use compaction_model::Message;
use compaction_offload::{
    FileSystemToolResultStore, OffloadCompactorSettings, OffloadFailure, ToolResultOffloadCompactor,
};
use compaction_tokens::TokenCounter;

use crate::error::UsageError;
use crate::options::PruneOptions;

/// One strategy, as `--strategy` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Old tool results give way to a placeholder.
    Pruning,
    /// The oldest turns and steps are dropped, and a note says how many.
    SlidingWindow,
    /// A chat model summarizes the oldest stretches.
    Summarization,
    /// Old tool results are written to files and leave a pointer.
    Offload,
    /// All but the first and the newest observations give way to a one-line note (SWE-agent's
    /// `LastNObservations`).
    ObservationMasking,
}

impl Stage {
    const ALL: [Stage; 5] = [
        Stage::Pruning,
        Stage::SlidingWindow,
        Stage::Summarization,
        Stage::Offload,
        Stage::ObservationMasking,
    ];

    /// The name `--strategy` takes.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Pruning => "tool-result-pruning",
            Stage::SlidingWindow => "sliding-window",
            Stage::Summarization => "summarization",
            Stage::Offload => "offload",
            Stage::ObservationMasking => "observation-masking",
        }
    }

    fn parse(name: &str) -> Result<Stage, String> {
        Stage::ALL.into_iter().find(|stage| stage.name() == name).ok_or_else(|| {
            format!(
                "unknown strategy {name:?}; expected tool-result-pruning, sliding-window, summarization, \
                 offload, observation-masking or chain:A,B,... of those"
            )
        })
    }
}

/// What `--strategy` names: one strategy, or a chain of them run in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Strategy {
    /// The strategies, in the order they run.
    pub stages: Vec<Stage>,
    /// Whether it was given as `chain:...` (a chain of one is still reported as a chain).
    pub chain: bool,
}

impl Strategy {
    fn single(stage: Stage) -> Self {
        Strategy { stages: vec![stage], chain: false }
    }

    /// Whether any stage is `stage`.
    pub fn has(&self, stage: Stage) -> bool {
        self.stages.contains(&stage)
    }

    /// Whether the strategy is tool-result pruning alone, the default.
    pub fn is_pruning(&self) -> bool {
        !self.chain && self.stages == [Stage::Pruning]
    }

    /// Whether it may drop messages or put new ones in (so the output is not an in-place edit).
    pub fn rewrites(&self) -> bool {
        self.has(Stage::SlidingWindow) || self.has(Stage::Summarization)
    }

    /// Why it cannot plan without I/O (for `--dry-run`), if it cannot.
    pub fn needs_io(&self) -> Option<&'static str> {
        if self.has(Stage::Summarization) {
            Some("summarization asks a model for each summary")
        } else if self.has(Stage::Offload) {
            Some("offloading writes files")
        } else {
            None
        }
    }
}

impl FromStr for Strategy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let Some(list) = text.strip_prefix("chain:") else {
            return Stage::parse(text).map(Strategy::single);
        };
        let stages = list.split(',').map(|name| Stage::parse(name.trim())).collect::<Result<Vec<_>, _>>()?;
        Ok(Strategy { stages, chain: true })
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.stages.iter().map(|stage| stage.name()).collect();
        if self.chain {
            write!(f, "chain:{}", names.join(","))
        } else {
            f.write_str(&names.join(","))
        }
    }
}

/// The options choosing and setting up the strategy, shared by `prune` and `simulate`.
#[derive(Debug, Clone, clap::Args)]
pub struct StrategyOptions {
    /// How to compact: tool-result-pruning (the default), sliding-window, summarization, offload
    /// (with --offload-to), observation-masking (SWE-agent's LastNObservations) or chain:A,B,...
    /// (those in order, each only while the target is not met). The reference's strategies,
    /// exactly.
    #[arg(long, value_name = "STRATEGY")]
    pub strategy: Option<Strategy>,
    /// The user message left where messages were removed; {num_removed} is
    /// replaced by how many. An empty TEXT leaves no note. The reference's note when absent.
    #[arg(long, value_name = "TEXT", help_heading = "Sliding window")]
    pub omission_note: Option<String>,
    /// The API of the model that writes the summaries: openai (Chat Completions;
    /// OpenAI or any compatible server) or anthropic (Messages). The key is read from
    /// OPENAI_API_KEY or ANTHROPIC_API_KEY.
    #[arg(long, value_name = "PROVIDER", value_parser = ["openai", "anthropic"], help_heading = "Summarization")]
    pub provider: Option<String>,
    /// The model that writes the summaries.
    #[arg(long, value_name = "NAME", help_heading = "Summarization")]
    pub model: Option<String>,
    /// The API's base URL as the provider's SDK takes it
    /// (`http://127.0.0.1:8080/v1` for a local OpenAI-compatible server,
    /// `https://api.anthropic.com` for Anthropic); OPENAI_BASE_URL or ANTHROPIC_BASE_URL, else the provider's, when absent.
    #[arg(long, value_name = "URL", help_heading = "Summarization")]
    pub base_url: Option<String>,
    /// About how long a summary comes out, in tokens, for planning how much each
    /// round summarizes (1024 when absent).
    #[arg(long, value_name = "N", help_heading = "Summarization")]
    pub approximate_summary_tokens: Option<usize>,
    /// The instruction the model is given; the reference's when absent.
    #[arg(long, value_name = "TEXT", help_heading = "Summarization")]
    pub summary_instruction: Option<String>,
    /// A failed summary (the model failed, wrote nothing, or wrote one that does
    /// not shrink the conversation) ends the command with exit status 1 and nothing written.
    /// Without it the failure is named on standard error and the last good result is kept.
    #[arg(long, help_heading = "Summarization")]
    pub raise_on_failure: bool,
    /// How many of the newest observations (tool results; in a text-action trajectory, the
    /// user messages carrying an action's output) stay whole; the first, the task, always does
    /// (SWE-agent's `n`). 5 when absent.
    #[arg(long, value_name = "N", help_heading = "Observation masking")]
    pub keep_observations: Option<usize>,
    /// Mask only every P observations, so the prompt's prefix stays the same for P calls
    /// (SWE-agent's `polling`). 1 when absent.
    #[arg(long, value_name = "P", help_heading = "Observation masking")]
    pub polling: Option<usize>,
    #[command(flatten)]
    pub calls: ProviderCalls,
}

/// The hook's cache-aware rule as options, shared by `prune --context-window` and `simulate`.
#[derive(Debug, Clone, clap::Args)]
pub struct CacheAwareOptions {
    /// Compact only when it pays for itself with the provider's prompt cache: the tokens freed,
    /// read at the cache-read price (0.1x the input price) on the calls expected to follow,
    /// must outweigh writing the prompt again from the first changed message at the cache-write
    /// price (1.25x for a five-minute cache, 2x for a one-hour one, as the log shows; 1x with
    /// --cache openai). A compaction is always made when the request would not fit the window,
    /// or (simulate, from the log's times) after a pause longer than the cache lives.
    #[arg(long, help_heading = "Prompt cache")]
    pub cache_aware: bool,
    /// With --cache-aware: how many calls, this one included, the freed tokens are expected to
    /// be saved on.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 10,
        requires = "cache_aware",
        help_heading = "Prompt cache"
    )]
    pub expected_calls: usize,
}

impl CacheAwareOptions {
    /// The rule asked for, if any: a one-hour cache (writes at 2x, living an hour) or a
    /// five-minute one, writes at the input price for a cache without a write surcharge.
    pub fn rule(&self, one_hour: bool, no_write_surcharge: bool) -> Option<CacheRule> {
        if !self.cache_aware {
            return None;
        }
        let mut rule = CacheRule::default().with_expected_calls(self.expected_calls);
        if one_hour {
            rule = rule.with_write(2.0).with_lifetime(Duration::from_secs(3600));
        }
        if no_write_surcharge {
            rule = rule.with_write(1.0);
        }
        Some(rule)
    }
}

/// How long a call to a provider may take (summaries, `--counter openai:MODEL` or
/// `anthropic:MODEL`): the options of every command that can make one.
#[derive(Debug, Clone, clap::Args)]
pub struct ProviderCalls {
    /// Calls to a provider (summaries, --counter openai:MODEL or anthropic:MODEL): how many
    /// times a call that failed on 408, 409, 429, 5xx, a timeout or a lost connection is tried
    /// again, after a growing wait (or the wait the provider asks, up to --timeout).
    #[arg(long, value_name = "N", default_value_t = 5, help_heading = "Provider calls")]
    pub max_retries: u32,
    /// Calls to a provider: how long one attempt may take, in seconds (decimals allowed),
    /// reading the whole reply included. A provider asking to retry after a longer wait fails
    /// the call at once. One call takes at most (--max-retries + 1) × --timeout, the waits
    /// between attempts included (6 × 60 s by default); after a count fails, no other is asked.
    #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = parse_seconds, help_heading = "Provider calls")]
    pub timeout: Duration,
}

impl Default for ProviderCalls {
    fn default() -> Self {
        ProviderCalls { max_retries: 5, timeout: Duration::from_secs(60) }
    }
}

impl ProviderCalls {
    /// The connection settings of every provider client the command builds.
    pub fn client_settings(&self) -> ClientSettings {
        ClientSettings::default().with_max_retries(self.max_retries).with_timeout(self.timeout)
    }
}

/// `--timeout SECONDS`: a positive number of seconds, decimals allowed, at most a day.
fn parse_seconds(text: &str) -> Result<Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(seconds) if seconds > 0.0 && seconds <= 86_400.0 => Ok(Duration::from_secs_f64(seconds)),
        _ => Err(format!("expected a number of seconds above 0 and at most 86400 (a day), found {text:?}")),
    }
}

impl StrategyOptions {
    /// The connection settings of every provider client the command builds.
    pub fn client_settings(&self) -> ClientSettings {
        self.calls.client_settings()
    }

    /// The strategy asked for, once the options fit it: `--strategy`, else offload when
    /// `offload_to` is given (as before `--strategy` existed), else pruning.
    pub fn resolve(&self, offload_to: bool) -> Result<Strategy> {
        let strategy = match &self.strategy {
            Some(strategy) => strategy.clone(),
            None if offload_to => Strategy::single(Stage::Offload),
            None => Strategy::single(Stage::Pruning),
        };
        let usage = |text: String| Err(UsageError(text).into());
        if strategy.has(Stage::Offload) && !offload_to {
            return usage(format!("--strategy {strategy} offloads results: give --offload-to DIR"));
        }
        if offload_to && !strategy.has(Stage::Offload) {
            return usage(format!(
                "--offload-to is for the offload strategy, and --strategy {strategy} has none; use \
                 --strategy offload or a chain with offload in it, or leave --offload-to out"
            ));
        }
        let summarizing = [
            ("--provider", self.provider.is_some()),
            ("--model", self.model.is_some()),
            ("--base-url", self.base_url.is_some()),
            ("--approximate-summary-tokens", self.approximate_summary_tokens.is_some()),
            ("--summary-instruction", self.summary_instruction.is_some()),
            ("--raise-on-failure", self.raise_on_failure),
        ];
        if strategy.has(Stage::Summarization) {
            if self.provider.is_none() || self.model.is_none() {
                return usage(format!(
                    "--strategy {strategy} summarizes with a model: give --provider openai|anthropic and \
                     --model NAME"
                ));
            }
        } else if let Some((option, _)) = summarizing.iter().find(|(_, given)| *given) {
            return usage(format!(
                "{option} is a summarization option, and --strategy {strategy} does not summarize"
            ));
        }
        let masking = [
            ("--keep-observations", self.keep_observations.is_some()),
            ("--polling", self.polling.is_some()),
        ];
        if let (false, Some((option, _))) =
            (strategy.has(Stage::ObservationMasking), masking.iter().find(|(_, given)| *given))
        {
            return usage(format!(
                "{option} is an observation-masking option, and --strategy {strategy} masks no observations"
            ));
        }
        if self.omission_note.is_some() && !strategy.has(Stage::SlidingWindow) {
            return usage(format!(
                "--omission-note is a sliding-window option, and --strategy {strategy} has no sliding window"
            ));
        }
        Ok(strategy)
    }

    /// Builds `strategy`'s compactor. Opens the offload store (`offload`: the folder and the
    /// characters kept in a pointer) and builds the model client, so that a folder that cannot
    /// be used or a missing key fails before the input is read.
    pub fn build(
        &self,
        strategy: &Strategy,
        prune: &PruneOptions,
        offload: Option<(&Path, usize)>,
    ) -> Result<Built> {
        self.build_with(strategy, prune, offload, None)
    }

    /// [`build`](Self::build) for a server that runs on (`compaction proxy`): a summary that
    /// fails is said through `say` as it happens, not kept for a report, and a failure raised
    /// (`--raise-on-failure`) fails that compaction alone, not every one after it.
    pub fn build_live(&self, strategy: &Strategy, prune: &PruneOptions, say: fn(&str)) -> Result<Built> {
        self.build_with(strategy, prune, None, Some(say))
    }

    fn build_with(
        &self,
        strategy: &Strategy,
        prune: &PruneOptions,
        offload: Option<(&Path, usize)>,
        live: Option<fn(&str)>,
    ) -> Result<Built> {
        let mut built = Built {
            compactor: Box::new(ChainCompactor::new()),
            pruning: None,
            offload: None,
            summaries: None,
        };
        let mut stages: Vec<Box<dyn Compactor>> = Vec::new();
        for stage in &strategy.stages {
            stages.push(match stage {
                Stage::Pruning => {
                    let compactor = prune.compactor()?;
                    built.pruning = Some(compactor.clone());
                    Box::new(compactor)
                }
                Stage::SlidingWindow => {
                    let note = match &self.omission_note {
                        None => SlidingWindowSettings::default().omission_note,
                        Some(text) if text.is_empty() => None,
                        Some(text) => Some(text.clone()),
                    };
                    let settings = SlidingWindowSettings::default()
                        .with_min_keep_steps(prune.min_keep_steps)
                        .with_omission_note(note);
                    Box::new(SlidingWindowCompactor::new(settings))
                }
                Stage::ObservationMasking => {
                    let mut settings = MaskingSettings::default();
                    if let Some(n) = self.keep_observations {
                        settings = settings.with_keep_observations(n);
                    }
                    if let Some(polling) = self.polling {
                        settings = settings.with_polling(polling);
                    }
                    let compactor =
                        ObservationMaskingCompactor::new(settings).map_err(|e| UsageError(e.to_string()))?;
                    Box::new(compactor)
                }
                Stage::Summarization => {
                    let summarizer = Arc::new(self.summarizer(prune.min_keep_steps, live)?);
                    built.summaries = Some(Arc::clone(&summarizer));
                    Box::new(summarizer)
                }
                Stage::Offload => {
                    let compactor = match &built.offload {
                        Some(compactor) => Arc::clone(compactor),
                        None => {
                            let (dir, preview_chars) = offload
                                .ok_or_else(|| UsageError("offloading needs --offload-to DIR".into()))?;
                            let store = Arc::new(open_store(dir)?);
                            let settings = OffloadCompactorSettings::default()
                                .with_min_keep_steps(prune.min_keep_steps)
                                .with_min_tokens(prune.min_tokens)
                                .with_preview_chars(preview_chars);
                            let compactor = ToolResultOffloadCompactor::new(store, settings)
                                .map_err(|e| UsageError(e.to_string()))?;
                            Arc::new(compactor)
                        }
                    };
                    built.offload = Some(Arc::clone(&compactor));
                    Box::new(compactor)
                }
            });
        }
        if !strategy.is_pruning() {
            // Only pruning alone has a dry run of its own (`plan`); the others run to plan.
            built.pruning = None;
        }
        built.compactor = if strategy.chain {
            Box::new(ChainCompactor::from_stages(stages))
        } else {
            stages.pop().ok_or_else(|| UsageError("--strategy names no strategy".into()))?
        };
        Ok(built)
    }

    fn summarizer(&self, min_keep_steps: usize, live: Option<fn(&str)>) -> Result<Summarizer> {
        let mut settings = SummarizationSettings::default()
            .with_min_keep_steps(min_keep_steps)
            .with_raise_on_failure(self.raise_on_failure);
        if let Some(tokens) = self.approximate_summary_tokens {
            settings = settings.with_approximate_summary_tokens(tokens);
        }
        if let Some(instruction) = &self.summary_instruction {
            settings = settings.with_summary_instruction(instruction.as_str());
        }
        let compactor = SummarizationCompactor::new(settings).map_err(|e| UsageError(e.to_string()))?;
        let mut client = self.client_settings();
        if let Some(url) = &self.base_url {
            client = client.with_base_url(url.as_str());
        }
        let (provider, model) =
            (self.provider.as_deref().unwrap_or_default(), self.model.as_deref().unwrap_or_default());
        let generator =
            compaction_llm::generator_from_provider(provider, model, client).map_err(llm_error)?;
        Ok(Summarizer { compactor, generator, log: Mutex::new(SummaryLog::default()), live })
    }
}

/// A provider client that could not be built: a missing key, a bad URL or name are usage
/// errors; a TLS stack that cannot be set up is not.
fn llm_error(error: compaction_llm::Error) -> anyhow::Error {
    match error {
        compaction_llm::Error::Client { .. } => anyhow!(chain(&error)),
        // The library's message also offers settings a command line has no place for.
        compaction_llm::Error::MissingApiKey { provider, variable } => UsageError(format!(
            "no API key for {provider}: set the {variable} environment variable (any non-empty value for a \
             local server that checks none)"
        ))
        .into(),
        other => UsageError(other.to_string()).into(),
    }
}

/// A strategy built: its compactor, and what the command reads from its parts afterwards.
pub struct Built {
    /// The whole strategy's compactor.
    pub compactor: Box<dyn Compactor>,
    /// The pruning compactor when the strategy is pruning alone, for its dry run.
    pub pruning: Option<ToolResultPruningCompactor>,
    /// The offload stage, whose failed writes are taken after the run.
    pub offload: Option<Arc<ToolResultOffloadCompactor>>,
    /// The summarization stage, which keeps its rounds and failures.
    pub summaries: Option<Arc<Summarizer>>,
}

impl Built {
    /// The compactor, to hand to a hook; an empty chain is left in its place.
    pub fn take_compactor(&mut self) -> Box<dyn Compactor> {
        std::mem::replace(&mut self.compactor, Box::new(ChainCompactor::new()))
    }

    /// The offload writes that failed since the last call.
    pub fn take_offload_failures(&self) -> Vec<OffloadFailure> {
        self.offload.as_ref().map(|c| c.take_failures()).unwrap_or_default()
    }

    /// The summary rounds done so far, and the failures, in words.
    pub fn summary_log(&self) -> SummaryLog {
        self.summaries.as_ref().map(|s| s.log()).unwrap_or_default()
    }
}

/// What the summarization stage did over a run: every round that put a summary in, every
/// failure (in words), and whether one ended the run with `--raise-on-failure`.
#[derive(Debug, Clone, Default)]
pub struct SummaryLog {
    /// The rounds that succeeded, in order.
    pub rounds: Vec<SummaryRound>,
    /// The failures, in order: rounds that failed (the last good result kept) or runs that failed.
    pub failures: Vec<String>,
    /// Whether a failure was raised (`--raise-on-failure`): later runs do not ask the model.
    pub raised: bool,
}

/// The summarization compactor with its model, keeping what the compactor's answer has no room
/// for: its rounds, and a failed round's reason when the last good result was kept.
#[derive(Debug)]
pub struct Summarizer {
    compactor: SummarizationCompactor,
    generator: ProviderChatGenerator,
    log: Mutex<SummaryLog>,
    /// Where a failure is said as it happens ([`StrategyOptions::build_live`]); then nothing is
    /// kept in `log`.
    live: Option<fn(&str)>,
}

impl Summarizer {
    fn log(&self) -> SummaryLog {
        self.log.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl Compactor for Summarizer {
    fn name(&self) -> &str {
        self.compactor.name()
    }

    fn try_compact(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> Result<Option<Compaction>, compaction_core::Error> {
        if let Some(say) = self.live {
            let summarized = self.compactor.summarize(messages, target_tokens, counter, &self.generator)?;
            if let Some(failure) = &summarized.failure {
                say(&format!("summary: a round failed, the last good result kept: {}", chain(failure)));
            }
            return Ok(summarized.compaction);
        }
        if self.log().raised {
            // A replay goes on after a hook's failure; with --raise-on-failure the command will
            // fail, so the model is not asked again.
            return Ok(None);
        }
        let result = self.compactor.summarize(messages, target_tokens, counter, &self.generator);
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        match result {
            Ok(summarized) => {
                log.rounds.extend(summarized.rounds);
                if let Some(failure) = &summarized.failure {
                    log.failures.push(chain(failure));
                }
                Ok(summarized.compaction)
            }
            Err(error) => {
                log.failures.push(chain(&error));
                log.raised = self.compactor.settings().raise_on_failure;
                Err(error)
            }
        }
    }
}

/// Opens the store folder `dir`, as a command's first step: one that cannot be created or
/// written is an error before any work.
pub fn open_store(dir: &Path) -> Result<FileSystemToolResultStore> {
    FileSystemToolResultStore::new(dir).map_err(|error| {
        anyhow::anyhow!("cannot use {} as the offload store: {}", dir.display(), chain(&error))
    })
}

/// An error and its causes on one line, each cause said once.
pub use compaction_core::error_chain as chain;

/// Whether a `--counter` spec names a provider's counter (`openai:MODEL`, `anthropic:MODEL`).
pub fn is_provider_spec(spec: &str) -> bool {
    spec.split_once(':')
        .is_some_and(|(kind, _)| matches!(kind.to_ascii_lowercase().as_str(), "openai" | "anthropic"))
}

/// Builds the counter a `--counter SPEC` names, a provider's with `client`'s settings (its key
/// and base URL from the environment); a bad spec or a missing key is a usage error.
pub fn counter(spec: &str, client: &ClientSettings) -> Result<Box<dyn TokenCounter>> {
    if is_provider_spec(spec) {
        let counter = compaction_llm::counter_from_provider_spec(spec, client.clone()).map_err(llm_error)?;
        return Ok(counter);
    }
    compaction_tokens::counter_from_spec(spec).map_err(|error| {
        // A tokenizer file that cannot be read is bad input, not bad usage.
        match error {
            compaction_tokens::Error::Tokenizer { .. } => anyhow::Error::new(error),
            other => anyhow::Error::new(UsageError(other.to_string())),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies_parse_and_print_as_given() {
        let chain: Strategy = "chain:tool-result-pruning, sliding-window".parse().unwrap();
        assert_eq!(chain.stages, [Stage::Pruning, Stage::SlidingWindow]);
        assert_eq!(chain.to_string(), "chain:tool-result-pruning,sliding-window");
        assert!(chain.rewrites() && chain.needs_io().is_none() && !chain.is_pruning());
        let one: Strategy = "summarization".parse().unwrap();
        assert_eq!(one.to_string(), "summarization");
        assert!(one.needs_io().is_some());
        assert!("tool-result-pruning".parse::<Strategy>().unwrap().is_pruning());
        for bad in ["", "prune", "chain:", "chain:offload,,sliding-window", "chain:chain:offload"] {
            let error = bad.parse::<Strategy>().unwrap_err();
            assert!(error.contains("expected tool-result-pruning"), "{bad}: {error}");
        }
    }

    #[test]
    fn a_chain_of_causes_says_each_once() {
        let error = compaction_core::Error::Generate("HTTP 500: down".into());
        assert_eq!(chain(&error), "the chat model failed to write a summary: HTTP 500: down");
    }
}
