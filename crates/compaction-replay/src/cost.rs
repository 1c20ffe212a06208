//! Pricing a replay's calls with a provider's prompt cache.

use crate::error::Error;
use crate::prices::{CacheKind, PriceRow, PriceTable};
use crate::recorded::{Lifetime, Recorded};
use crate::replay::Step;

/// One model call to price: its prompt, what it shares with the previous call's prompt, its
/// reply, and what the log records of it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Call {
    /// Tokens of the prompt.
    pub prompt: u64,
    /// Tokens at the start of the prompt that are the previous call's prompt unchanged.
    pub shared: u64,
    /// Tokens of the reply.
    pub output: u64,
    /// Whether the provider compacted the recorded conversation just before this call.
    pub after_provider_compaction: bool,
    /// What the log records of the call.
    pub recorded: Option<Recorded>,
}

impl Call {
    /// A call with a prompt of `prompt` tokens, `shared` of them the previous prompt's, and a
    /// reply of `output` tokens.
    pub fn new(prompt: u64, shared: u64, output: u64) -> Self {
        Call { prompt, shared, output, ..Call::default() }
    }

    /// The same call with what the log records of it.
    #[must_use]
    pub fn with_recorded(mut self, recorded: Option<Recorded>) -> Self {
        self.recorded = recorded;
        self
    }

    /// The calls of a replay without compaction: each prompt is the recorded conversation so
    /// far, which holds the previous one whole.
    pub fn without_compaction(steps: &[Step]) -> Vec<Call> {
        let mut previous = 0;
        steps
            .iter()
            .map(|s| {
                let prompt = s.without as u64;
                let call = Call {
                    prompt,
                    shared: previous.min(prompt),
                    output: s.output as u64,
                    after_provider_compaction: s.after_provider_compaction,
                    recorded: s.recorded.as_deref().cloned(),
                };
                previous = prompt;
                call
            })
            .collect()
    }

    /// The calls as the log records them, for checking the cache model against what the log
    /// says they cost: each recorded prompt, sharing the previous recorded prompt. Calls without
    /// a record are left out.
    pub fn as_recorded(steps: &[Step]) -> Vec<Call> {
        let mut previous = 0;
        steps
            .iter()
            .filter_map(|s| {
                let recorded = s.recorded.as_deref().cloned()?;
                let prompt = recorded.prompt_tokens();
                let call = Call {
                    prompt,
                    shared: previous.min(prompt),
                    output: recorded.output_tokens,
                    // The provider's compaction happened to these calls: where it broke the
                    // cache, the log shows it, and the model keeps the break.
                    after_provider_compaction: false,
                    recorded: Some(recorded),
                };
                previous = prompt;
                Some(call)
            })
            .collect()
    }

    /// The calls of the replay with compaction: each prompt as sent, sharing what came before the
    /// first message a compaction changed.
    pub fn with_compaction(steps: &[Step]) -> Vec<Call> {
        steps
            .iter()
            .map(|s| Call {
                prompt: s.with as u64,
                shared: s.shared as u64,
                output: s.output as u64,
                after_provider_compaction: s.after_provider_compaction,
                recorded: s.recorded.as_deref().cloned(),
            })
            .collect()
    }
}

/// How to price: the table, the model where the log names none, the cache model when not the
/// price row's.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Pricing {
    /// The price table.
    pub table: PriceTable,
    /// The model of calls whose log names none.
    pub model: Option<String>,
    /// The cache model; the price row's when `None`.
    pub cache: Option<CacheKind>,
}

impl Pricing {
    /// Pricing by `table`.
    pub fn new(table: PriceTable) -> Self {
        Pricing { table, model: None, cache: None }
    }

    /// The same, with `model` for calls whose log names none.
    #[must_use]
    pub fn with_model(mut self, model: Option<String>) -> Self {
        self.model = model;
        self
    }

    /// The same, with `cache` in place of each row's cache model.
    #[must_use]
    pub fn with_cache(mut self, cache: Option<CacheKind>) -> Self {
        self.cache = cache;
        self
    }

    /// The row for call `step`: its model is the log's, else the one given, else the previous
    /// call's (a final call the log does not record is the same agent's).
    fn row<'a>(
        &'a self,
        step: usize,
        call: &'a Call,
        previous: &mut Option<&'a str>,
    ) -> Result<&'a PriceRow, Error> {
        let model =
            call.recorded.as_ref().and_then(|r| r.model.as_deref()).or(self.model.as_deref()).or(*previous);
        let model = model.ok_or(Error::NoModel { step })?;
        *previous = Some(model);
        self.table.find(model).ok_or_else(|| Error::NoPrice { model: model.to_owned(), step })
    }
}

/// What a run of calls costs: the prompt split by how it was billed, the reply, and the dollars.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Cost {
    /// Prompt tokens billed at the input price.
    pub uncached: u64,
    /// Prompt tokens read from the cache.
    pub cache_read: u64,
    /// Prompt tokens written to the cache (all lifetimes).
    pub cache_write: u64,
    /// Of `cache_write`, those written for an hour.
    pub cache_write_1h: u64,
    /// Reply tokens.
    pub output: u64,
    /// Dollars.
    pub dollars: f64,
    /// Calls priced with a cache lifetime the log does not show (five minutes assumed).
    pub lifetime_assumed: usize,
    /// Calls priced without a time (the cache assumed warm since the previous call).
    pub untimed: usize,
    /// Calls whose cache the log shows broken for a reason the messages do not explain (the
    /// agent changed what comes before them: its system prompt, its tools), kept broken there.
    pub unexplained_breaks: usize,
    /// The cache model used (the last call's).
    pub cache: Option<CacheKind>,
}

impl Cost {
    /// Prompt tokens in all.
    pub fn prompt(&self) -> u64 {
        self.uncached + self.cache_read + self.cache_write
    }
}

/// The first model the log names, for calls before it.
fn first_model(calls: &[Call]) -> Option<&str> {
    calls.iter().find_map(|c| c.recorded.as_ref()?.model.as_deref())
}

/// A cache entry: a prefix of `len` tokens, last used at `at`, living `lifetime`.
#[derive(Debug, Clone, Copy)]
struct Entry {
    len: u64,
    at: Option<i64>,
    lifetime: Lifetime,
}

/// Where the log shows the cache broken at a call for a reason the messages do not explain: the
/// call read less than the previous recorded prompt though it came within the cache's lifetime,
/// and not just after a provider compaction. The value is the prefix it did read.
fn unexplained_breaks(calls: &[Call]) -> Vec<Option<u64>> {
    let mut out = Vec::with_capacity(calls.len());
    let mut previous: Option<&Recorded> = None;
    let mut lifetime = Lifetime::FiveMinutes;
    for call in calls {
        let mut cap = None;
        if let Some(recorded) = &call.recorded {
            lifetime = recorded.lifetime().unwrap_or(lifetime);
            if let Some(before) = previous {
                let within = match (before.timestamp_ms, recorded.timestamp_ms) {
                    (Some(a), Some(b)) => b - a <= lifetime.millis(),
                    _ => true,
                };
                // A reply of a few tokens is not in the cache entry; 1,024 tokens of slack.
                if within
                    && !call.after_provider_compaction
                    && recorded.cache_read_tokens + 1_024 < before.prompt_tokens()
                {
                    cap = Some(recorded.cache_read_tokens);
                }
            }
            previous = Some(recorded);
        }
        out.push(cap);
    }
    out
}

/// Prices `calls` with the cache model: each call reads from the cache the longest live entry
/// that is a prefix of what it shares with the previous prompt, and (Anthropic) writes the rest
/// up to its whole prompt (a breakpoint at the end, as Claude Code sets it). The first call
/// reads what its record says it read (a system prompt cached by another session) when there is
/// a record. Breaks the log shows and the messages do not explain are kept.
pub fn estimate(calls: &[Call], pricing: &Pricing) -> Result<Cost, Error> {
    let breaks = unexplained_breaks(calls);
    let mut cost = Cost::default();
    let mut entries: Vec<Entry> = Vec::new();
    let mut lifetime = Lifetime::FiveMinutes;
    let mut lifetime_known = false;
    let mut model = first_model(calls);
    for (i, call) in calls.iter().enumerate() {
        let row = pricing.row(i + 1, call, &mut model)?;
        let kind = pricing.cache.unwrap_or(row.cache);
        cost.cache = Some(kind);
        let at = call.recorded.as_ref().and_then(|r| r.timestamp_ms);
        if at.is_none() {
            cost.untimed += 1;
        }
        if let Some(seen) = call.recorded.as_ref().and_then(Recorded::lifetime) {
            lifetime = seen;
            lifetime_known = true;
        }
        let mut shared = call.shared.min(call.prompt);
        // The log read this much: an entry (a breakpoint the agent set earlier in the prompt)
        // held it, whichever the model tracked.
        let mut logged_read = None;
        if let Some(cap) = breaks[i] {
            if cap <= shared {
                logged_read = Some(cap);
            }
            shared = shared.min(cap);
            cost.unexplained_breaks += 1;
        }
        if i == 0 {
            if let Some(read) = call.recorded.as_ref().map(|r| r.cache_read_tokens).filter(|&r| r > 0) {
                entries.push(Entry { len: read.min(call.prompt), at, lifetime });
                shared = read.min(call.prompt);
            }
        }
        // The conversation changed after `shared`: longer entries no longer match.
        entries.retain(|e| e.len <= shared);
        if let Some(len) = logged_read.filter(|&len| len > 0) {
            entries.push(Entry { len, at, lifetime });
        }
        let alive = |e: &Entry| match (e.at, at) {
            (Some(then), Some(now)) => now - then <= e.lifetime.millis(),
            _ => true,
        };
        let hit = entries.iter_mut().filter(|e| alive(e)).max_by_key(|e| e.len);
        let (read, write, uncached) = match kind {
            CacheKind::None => (0, 0, call.prompt),
            CacheKind::Anthropic => {
                if call.prompt < row.min_cache() {
                    (0, 0, call.prompt)
                } else {
                    let read = hit.map_or(0, |e| {
                        e.at = at.or(e.at);
                        e.len
                    });
                    entries.push(Entry { len: call.prompt, at, lifetime });
                    (read, call.prompt - read, 0)
                }
            }
            CacheKind::OpenAi => {
                let read = hit.map_or(0, |e| {
                    e.at = at.or(e.at);
                    e.len
                });
                let read = if read >= row.min_cache() { read / 128 * 128 } else { 0 };
                if call.prompt >= row.min_cache() {
                    entries.push(Entry { len: call.prompt / 128 * 128, at, lifetime: Lifetime::FiveMinutes });
                }
                (read, 0, call.prompt - read)
            }
        };
        if kind == CacheKind::Anthropic && write > 0 && !lifetime_known {
            cost.lifetime_assumed += 1;
        }
        let one_hour = kind == CacheKind::Anthropic && lifetime == Lifetime::OneHour;
        let write_price = if one_hour { row.cache_write_1h_price() } else { row.cache_write_5m_price() };
        cost.uncached += uncached;
        cost.cache_read += read;
        cost.cache_write += write;
        if one_hour {
            cost.cache_write_1h += write;
        }
        cost.output += call.output;
        cost.dollars += (uncached as f64 * row.input
            + read as f64 * row.cache_read_price()
            + write as f64 * write_price
            + call.output as f64 * row.output)
            / 1e6;
    }
    Ok(cost)
}

/// What the log itself records the calls cost: each call's recorded usage at the row's prices;
/// `None` when a call has no record. Writes the log does not split by lifetime are priced as
/// five-minute writes and counted in `lifetime_assumed`.
pub fn recorded(calls: &[Call], pricing: &Pricing) -> Option<Result<Cost, Error>> {
    if calls.is_empty() || calls.iter().any(|c| c.recorded.is_none()) {
        return None;
    }
    let mut cost = Cost::default();
    let mut model = first_model(calls);
    for (i, call) in calls.iter().enumerate() {
        let row = match pricing.row(i + 1, call, &mut model) {
            Ok(row) => row,
            Err(error) => return Some(Err(error)),
        };
        let r = call.recorded.as_ref()?;
        cost.cache = Some(pricing.cache.unwrap_or(row.cache));
        let unsplit = r.cache_write_tokens.saturating_sub(r.cache_write_5m_tokens + r.cache_write_1h_tokens);
        if unsplit > 0 {
            cost.lifetime_assumed += 1;
        }
        cost.uncached += r.input_tokens;
        cost.cache_read += r.cache_read_tokens;
        cost.cache_write += r.cache_write_tokens;
        cost.cache_write_1h += r.cache_write_1h_tokens;
        cost.output += r.output_tokens;
        cost.dollars += (r.input_tokens as f64 * row.input
            + r.cache_read_tokens as f64 * row.cache_read_price()
            + (r.cache_write_5m_tokens + unsplit) as f64 * row.cache_write_5m_price()
            + r.cache_write_1h_tokens as f64 * row.cache_write_1h_price()
            + r.output_tokens as f64 * row.output)
            / 1e6;
    }
    Some(Ok(cost))
}
