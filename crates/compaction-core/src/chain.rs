//! [`ChainCompactor`]: several strategies in order, each taking over where the last stopped,
//! until the conversation fits.

use std::borrow::Cow;

use compaction_model::Message;
use compaction_tokens::TokenCounter;

use crate::compactor::{CompactFuture, Compaction, CompactionReport, Compactor, Edits, Memo, Rewrite};
use crate::error::Error;

/// The strategy name a chain's report carries; each stage's own report is in `stages`.
pub const STRATEGY_CHAIN: &str = "chain";

/// Runs strategies in order until the conversation fits the target: the cheapest and least
/// lossy first, harsher ones only for what is left. The reference has none; it is the
/// pipeline OpenHands' condensers offer.
///
/// Each strategy is given the conversation the ones before it left, and the same target. A
/// strategy that declines is passed over; once the conversation fits, the rest do not run. The
/// report's `stages` hold the report of each strategy that compacted, in order. When every
/// stage rewrote messages in place, the chain's edits are in place too (and its `results`
/// list every rewritten result); once a stage removes or merges messages, the chain's edits are
/// the whole new conversation.
///
/// A stage that fails (see [`Compactor::try_compact`]) fails the chain.
///
/// ```
/// use compaction_core::{ChainCompactor, Compactor, SlidingWindowCompactor, ToolResultPruningCompactor};
/// use compaction_model::{Message, ToolCall};
/// use compaction_tokens::ApproximateTokenCounter;
///
/// let mut conversation = vec![Message::system("You research."), Message::user("Look into it.")];
/// for step in 0..6 {
///     let call = ToolCall::new("search", serde_json::Map::new()).with_id(format!("c{step}"));
///     conversation.push(Message::assistant_with_calls(Some("Searching. ".repeat(40)), vec![call.clone()]));
///     conversation.push(Message::tool("result ".repeat(300), call, false));
/// }
///
/// // Prune old results first; slide the window only if that is not enough.
/// let chain = ChainCompactor::new()
///     .then(ToolResultPruningCompactor::default())
///     .then(SlidingWindowCompactor::default());
/// let counter = ApproximateTokenCounter::default();
/// let compaction = chain.try_compact(&conversation, 1_000, &counter).unwrap().expect("too big");
/// let strategies: Vec<&str> = compaction.report.stages.iter().map(|s| s.strategy.as_str()).collect();
/// assert_eq!(strategies, ["tool_result_pruning", "sliding_window"]);
/// assert!(compaction.report.target_reached);
/// ```
#[derive(Debug, Default)]
pub struct ChainCompactor {
    stages: Vec<Box<dyn Compactor>>,
}

impl ChainCompactor {
    /// An empty chain, which never compacts; add stages with [`ChainCompactor::then`].
    pub fn new() -> Self {
        ChainCompactor::default()
    }

    /// A chain of `stages`, run in this order.
    pub fn from_stages(stages: Vec<Box<dyn Compactor>>) -> Self {
        ChainCompactor { stages }
    }

    /// The same chain with `stage` run after the others.
    pub fn then(mut self, stage: impl Compactor + 'static) -> Self {
        self.stages.push(Box::new(stage));
        self
    }

    /// The stages, in order.
    pub fn stages(&self) -> &[Box<dyn Compactor>] {
        &self.stages
    }
}

/// A chain run between stages.
struct Run<'a> {
    original_len: usize,
    counter: &'a dyn TokenCounter,
    target_tokens: usize,
    current: Cow<'a, [Message]>,
    tokens_before: usize,
    tokens: usize,
    /// The in-place rewrites of every stage so far, while all of them were in place.
    rewrites: Option<Vec<(usize, Rewrite)>>,
    /// For each message of `current`, its index in the original (`None` for one a stage put
    /// in), while the stages' reports say enough to follow them.
    origin: Option<Vec<Option<usize>>>,
    reports: Vec<CompactionReport>,
}

impl<'a> Run<'a> {
    fn start(
        messages: &'a [Message],
        target_tokens: usize,
        counter: &'a dyn TokenCounter,
    ) -> Result<Self, Error> {
        let tokens = counter.try_count(messages, &[]).map_err(Error::Count)?;
        Ok(Run {
            original_len: messages.len(),
            counter,
            target_tokens,
            current: Cow::Borrowed(messages),
            tokens_before: tokens,
            tokens,
            rewrites: Some(Vec::new()),
            origin: Some((0..messages.len()).map(Some).collect()),
            reports: Vec::new(),
        })
    }

    fn fits(&self) -> bool {
        self.tokens <= self.target_tokens
    }

    /// Takes in what a stage did; `last` says no stage follows, so the conversation it leaves
    /// is built only when needed.
    fn record(&mut self, compaction: Compaction, last: bool) -> Result<(), Error> {
        let next = if last && self.rewrites.is_some() && matches!(compaction.edits, Edits::Replace(_)) {
            None
        } else {
            Some(compaction.messages(&self.current))
        };
        if let (Some(messages), Some(origin)) = (&next, &self.origin) {
            self.origin = follow(origin, &compaction.report, messages.len());
        }
        match (&mut self.rewrites, compaction.edits) {
            (Some(rewrites), Edits::Replace(stage)) => rewrites.extend(stage),
            (rewrites, _) => *rewrites = None,
        }
        self.tokens = match &next {
            Some(messages) => self.counter.try_count(messages, &[]).map_err(Error::Count)?,
            None => compaction.report.tokens_after,
        };
        if let Some(messages) = next {
            self.current = Cow::Owned(messages);
        }
        self.reports.push(compaction.report);
        Ok(())
    }

    fn finish(self) -> Option<Compaction> {
        if self.reports.is_empty() {
            return None;
        }
        let mut report = CompactionReport::new(
            STRATEGY_CHAIN,
            self.tokens_before,
            self.tokens,
            self.target_tokens,
            Vec::new(),
        );
        if let Some(origin) = &self.origin {
            let mut present = vec![false; self.original_len];
            origin.iter().flatten().for_each(|&i| present[i] = true);
            report.removed = (0..self.original_len).filter(|&i| !present[i]).collect();
            report.inserted = (0..origin.len()).filter(|&i| origin[i].is_none()).collect();
        }
        let edits = match self.rewrites {
            Some(mut rewrites) => {
                report.results = self.reports.iter().flat_map(|r| r.results.iter().cloned()).collect();
                report.inputs_cleared =
                    self.reports.iter().flat_map(|r| r.inputs_cleared.iter().cloned()).collect();
                // A stable sort: two rewrites of one message keep the order their stages ran in,
                // which is the order they are applied in.
                rewrites.sort_by_key(|(index, _)| *index);
                Edits::Replace(rewrites)
            }
            None => Edits::Whole(match self.current {
                Cow::Owned(messages) => messages,
                Cow::Borrowed(messages) => messages.to_vec(),
            }),
        };
        report.stages = self.reports;
        Some(Compaction { edits, report })
    }
}

/// Where each message of a stage's output came from, given where each message of its input
/// came from and the stage's report of what it removed and put in; `None` when the report does
/// not account for the output (a strategy that says nothing of what it removed).
fn follow(
    origin: &[Option<usize>],
    report: &CompactionReport,
    output_len: usize,
) -> Option<Vec<Option<usize>>> {
    if origin.len() + report.inserted.len() != output_len + report.removed.len() {
        return None;
    }
    let mut removed = vec![false; origin.len()];
    for &i in &report.removed {
        *removed.get_mut(i)? = true;
    }
    let mut kept = origin.iter().zip(removed).filter(|(_, removed)| !removed).map(|(o, _)| *o);
    let mut inserted = vec![false; output_len];
    for &i in &report.inserted {
        *inserted.get_mut(i)? = true;
    }
    inserted.into_iter().map(|new| if new { Some(None) } else { kept.next() }).collect()
}

impl Compactor for ChainCompactor {
    fn try_compact(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> Result<Option<Compaction>, Error> {
        let mut run = Run::start(messages, target_tokens, counter)?;
        for (position, stage) in self.stages.iter().enumerate() {
            if run.fits() {
                break;
            }
            if let Some(compaction) = stage.try_compact(&run.current, target_tokens, counter)? {
                run.record(compaction, position + 1 == self.stages.len())?;
            }
        }
        Ok(run.finish())
    }

    /// Each stage gets a memo of its own. A stage sees the conversation the stages before it
    /// left, so what it had settled is forgotten from the first message an earlier stage
    /// rewrote in this call, and wholly when an earlier stage removed or inserted messages.
    fn compact_with_memo(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
        memo: &mut Memo,
    ) -> Result<Option<Compaction>, Error> {
        memo.stages.resize_with(self.stages.len(), Memo::default);
        let mut run = Run::start(messages, target_tokens, counter)?;
        for (position, stage) in self.stages.iter().enumerate() {
            if run.fits() {
                break;
            }
            let compaction =
                stage.compact_with_memo(&run.current, target_tokens, counter, &mut memo.stages[position])?;
            if let Some(compaction) = compaction {
                let changes = compaction.changes(&run.current);
                for later in &mut memo.stages[position + 1..] {
                    match changes.changed() {
                        Some(indices) => later.rewritten(indices.iter().copied()),
                        None => *later = Memo::default(),
                    }
                }
                run.record(compaction, position + 1 == self.stages.len())?;
            }
        }
        Ok(run.finish())
    }

    fn compact_async<'a>(
        &'a self,
        messages: &'a [Message],
        target_tokens: usize,
        counter: &'a dyn TokenCounter,
    ) -> CompactFuture<'a> {
        Box::pin(async move {
            let mut run = Run::start(messages, target_tokens, counter)?;
            for (position, stage) in self.stages.iter().enumerate() {
                if run.fits() {
                    break;
                }
                let compaction = stage.compact_async(&run.current, target_tokens, counter).await?;
                if let Some(compaction) = compaction {
                    run.record(compaction, position + 1 == self.stages.len())?;
                }
            }
            Ok(run.finish())
        })
    }

    fn name(&self) -> &str {
        "ChainCompactor"
    }
}
