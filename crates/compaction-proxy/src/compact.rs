//! The request body on its way: a Chat Completions, Responses or Messages request read as a
//! conversation, run through the hook, and written back in its own format with only the
//! compacted messages changed; any other request as it came.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use compaction_formats::{Format, ReadOptions};
use compaction_hook::{AgentState, CompactionHook};
use compaction_model::{Changes, Message, Part, Role};
use hyper::{Method, Response, StatusCode};

use crate::error::Error;
use crate::memory::{message_hash, prefix_hashes, CountKey, Made, Memory, Rewrite, Slot};
use crate::metrics::Failure;
use crate::relay::ProxyBody;
use crate::server::{answer, chain, Shared};

/// An endpoint whose requests carry a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    ChatCompletions,
    Responses,
    /// `/v1/responses/input_tokens`: a Responses request counted, compacted as it would be sent.
    ResponsesInputTokens,
    Messages,
    /// `/v1/messages/count_tokens`: a Messages request counted, compacted as it would be sent.
    MessagesCountTokens,
}

impl Endpoint {
    /// The endpoint a request is for, when it carries a conversation.
    pub(crate) fn of(method: &Method, path: &str) -> Option<Endpoint> {
        if method != Method::POST {
            return None;
        }
        match path {
            "/v1/chat/completions" => Some(Endpoint::ChatCompletions),
            "/v1/responses" => Some(Endpoint::Responses),
            "/v1/responses/input_tokens" => Some(Endpoint::ResponsesInputTokens),
            "/v1/messages" => Some(Endpoint::Messages),
            "/v1/messages/count_tokens" => Some(Endpoint::MessagesCountTokens),
            _ => None,
        }
    }

    pub(crate) fn path(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "/v1/chat/completions",
            Endpoint::Responses => "/v1/responses",
            Endpoint::ResponsesInputTokens => "/v1/responses/input_tokens",
            Endpoint::Messages => "/v1/messages",
            Endpoint::MessagesCountTokens => "/v1/messages/count_tokens",
        }
    }

    fn format(self) -> Format {
        match self {
            Endpoint::ChatCompletions => Format::OpenAi,
            Endpoint::Responses | Endpoint::ResponsesInputTokens => Format::Responses,
            Endpoint::Messages | Endpoint::MessagesCountTokens => Format::Anthropic,
        }
    }
}

/// What the hook made of one request.
pub(crate) struct Compacted {
    /// The request to forward in its place, when the hook compacted it.
    pub(crate) body: Option<Vec<u8>>,
    /// The hook's estimate of the request as it came.
    pub(crate) tokens_before: usize,
    /// Its estimate of the request forwarded.
    pub(crate) tokens_after: usize,
    /// Tool results the compaction replaced.
    pub(crate) results_cleared: usize,
    /// Messages the compaction dropped, and put in (a window's note, a summary), when it did.
    pub(crate) dropped_and_put: Option<(usize, usize)>,
    /// Messages replaced as in an earlier request of the conversation, before the hook ran.
    pub(crate) recalled: usize,
    /// Whether the hook compacted (a request may change by recalled replacements alone).
    pub(crate) compacted: bool,
    /// Why the cache-aware rule kept the hook from compacting, when it did.
    pub(crate) declined: Option<String>,
    /// The prefix hash of the request's last message, under which the upstream's count of it
    /// is remembered.
    pub(crate) key: Option<CountKey>,
    /// The upstream's count of the previous request and its reply, when the estimate was
    /// anchored on it.
    pub(crate) anchored: Option<usize>,
    /// The conversation, for the log: the prefix hash through its first user message (the
    /// system prompt alone is shared by every conversation of an agent).
    pub(crate) conversation: u64,
    /// The first message the hook changed, from which the provider's cache is written again,
    /// and how many messages the request holds.
    pub(crate) first_change: Option<(usize, usize)>,
}

/// Reads `body` as `endpoint`'s request, takes the hook for the model it names from `hooks`,
/// puts in what `memory` holds for its prefix (the replacements of single messages, and the
/// messages forwarded in place of its first ones when an earlier compaction dropped or put some
/// in), runs the hook over it, remembers what the hook changed, and writes the request back in
/// the same format: the envelope (model, tools, stream, settings the proxy does not know) and
/// every message left alone come out as they came.
pub(crate) fn compact(
    hooks: impl FnOnce(Option<&str>) -> Result<Arc<CompactionHook>, Error>,
    memory: Option<&Mutex<Memory>>,
    clear_thinking: Option<usize>,
    endpoint: Endpoint,
    body: &[u8],
) -> Result<Compacted, Error> {
    let path = endpoint.path();
    let options = ReadOptions::named(path).with_format(endpoint.format());
    let mut conversation = compaction_formats::read(body.to_vec(), &options)
        .map_err(|source| Error::Read { endpoint: path, source })?;
    // The model as the reader found it in the envelope: the body is not read again for it.
    let hook = hooks(conversation.model.as_deref())?;
    let messages = std::mem::take(&mut conversation.messages);
    let (hashes, own) = prefix_hashes(&messages);
    let id = conversation_id(&hashes, &messages);
    let read_len = messages.len();
    // The messages the hook sees, each with the client's message it stands for.
    let mut recalled = Recalled::unchanged(messages);
    let mut anchor = None;
    if let Some(memory) = memory {
        let mut memory = memory.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        anchor = memory.count(&hashes, &recalled.messages);
        recalled = recalled.recall(&mut memory, &hashes);
    }
    // The previous request's count anchors this one only if it is made as that one was: with a
    // replacement or a rewrite forgotten since, this one is larger than what was counted.
    let anchor = anchor.filter(|anchor| recalled.made_through(&hashes, anchor.last) == anchor.made);
    let Recalled { mut messages, origin, mut changed, rewrite: applied, in_place: recalled_in_place } =
        recalled;
    let recalled_count = changed.len();
    if let (Some(keep), Format::Anthropic) = (clear_thinking, endpoint.format()) {
        changed.extend(clear_thinking_but_last(&mut messages, keep));
    }
    let mut state = AgentState::new(messages).with_tools(conversation.tools.clone());
    if let Some(anchor) = anchor {
        state = state.with_context_tokens(anchor.tokens);
        state.idle = Some(anchor.idle);
    }
    let outcome = hook.try_run(&mut state).map_err(|source| Error::Compact { endpoint: path, source })?;
    let tokens_before = outcome.estimated_tokens;
    let mut compacted = Compacted {
        body: None,
        tokens_before,
        tokens_after: tokens_before,
        results_cleared: 0,
        dropped_and_put: None,
        recalled: recalled_count,
        compacted: outcome.compacted,
        declined: outcome.declined.clone(),
        key: None,
        anchored: anchor.map(|anchor| anchor.tokens),
        conversation: id,
        first_change: None,
    };
    // For each message to forward, the client's message it stands for.
    let forwarded: Vec<Option<usize>> = match &outcome.changes {
        None => origin.clone(),
        Some(Changes::InPlace(by_hook)) => {
            changed.extend(by_hook);
            origin.clone()
        }
        Some(Changes::Rewritten(by_hook)) => {
            let kept = by_hook.iter().flatten().count();
            compacted.dropped_and_put = Some((origin.len().saturating_sub(kept), by_hook.len() - kept));
            by_hook
                .iter()
                .map(|&index| index.and_then(|index| origin.get(index).copied().flatten()))
                .collect()
        }
        Some(Changes::Unknown) => Vec::new(),
    };
    let in_place = forwarded.len() == read_len && forwarded.iter().enumerate().all(|(i, o)| *o == Some(i));
    // What to remember once the request is written, and what the request is then made of.
    let (remembered, made) = match (&outcome.changes, in_place) {
        // Nothing is known of where the messages came from: nothing is remembered, and the
        // next request runs the hook afresh, so the upstream's count of this one must not
        // anchor it either.
        (Some(Changes::Unknown), _) => (Remembered::Nothing, None),
        (None, _) => (
            Remembered::Nothing,
            Some(Made { rewrite: applied.map(|last| hashes[last]), replaced: recalled_in_place.len() }),
        ),
        (Some(Changes::InPlace(by_hook)), true) => {
            let mut replaced: Vec<usize> = recalled_in_place.iter().chain(by_hook).copied().collect();
            replaced.sort_unstable();
            replaced.dedup();
            let made = Made { rewrite: None, replaced: replaced.len() };
            (Remembered::InPlace(by_hook.clone()), Some(made))
        }
        // Messages dropped or put in, now or before: the whole request is remembered as a
        // rewrite of the conversation so far.
        _ => match hashes.last() {
            Some(&last) => (
                Remembered::Rewrite(last, rewrite_of(state.messages(), &forwarded, &own)),
                Some(Made { rewrite: Some(last), replaced: 0 }),
            ),
            None => (Remembered::Nothing, None),
        },
    };
    compacted.key = memory.and(hashes.last().copied()).zip(made).map(|(hash, made)| CountKey { hash, made });
    if outcome.changes.is_none() && changed.is_empty() && in_place {
        return Ok(compacted);
    }
    if outcome.compacted {
        compacted.tokens_after =
            hook.try_estimate(&state).map_err(|source| Error::Compact { endpoint: path, source })?;
        compacted.results_cleared = outcome.report.as_ref().map_or(0, |report| report.results.len());
        let first = outcome.report.as_ref().and_then(|report| report.first_changed());
        compacted.first_change = first.map(|first| (first, state.messages().len()));
    }
    let changes = match (in_place, &outcome.changes) {
        (_, Some(Changes::Unknown)) => Changes::Unknown,
        (true, _) => Changes::in_place(changed),
        (false, _) => Changes::rewritten(forwarded),
    };
    let mut out = Vec::with_capacity(body.len());
    compaction_formats::write(&conversation, state.messages(), None, &changes, &mut out)
        .map_err(|source| Error::Write { endpoint: path, source })?;
    // Remembered only now that the request is written as it will be forwarded: a request that
    // cannot be goes on unchanged, and must not be recalled as compacted.
    if let Some(memory) = memory {
        let mut memory = memory.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match remembered {
            Remembered::Nothing => {}
            Remembered::InPlace(indices) => {
                for index in indices {
                    memory.remember(hashes[index], state.messages()[index].clone());
                }
            }
            Remembered::Rewrite(hash, rewrite) => memory.remember_rewrite(hash, rewrite),
        }
    }
    compacted.body = Some(out);
    Ok(compacted)
}

/// What a compaction leaves to remember once its request is written.
enum Remembered {
    Nothing,
    /// The messages the hook changed, at these indices, each under its prefix hash.
    InPlace(Vec<usize>),
    /// The whole request as a rewrite, under the prefix hash of its last message.
    Rewrite(u64, Rewrite),
}

/// A request's messages with what memory gave back put in: for each, the index of the client's
/// message it stands for (`None` for one an earlier compaction put in), and the indices of
/// those memory changed.
struct Recalled {
    messages: Vec<Message>,
    origin: Vec<Option<usize>>,
    changed: Vec<usize>,
    /// The index of the client's last message the rewrite put back covers, when one was.
    rewrite: Option<usize>,
    /// The client's messages replaced one by one (after the rewrite), by index.
    in_place: Vec<usize>,
}

impl Recalled {
    /// The client's messages, as sent.
    fn unchanged(messages: Vec<Message>) -> Recalled {
        let origin = (0..messages.len()).map(Some).collect();
        Recalled { messages, origin, changed: Vec::new(), rewrite: None, in_place: Vec::new() }
    }

    /// What the request was made of through the client's message `last`: the rewrite put back
    /// (kept under the prefix hash of the last message it covers), and the messages up to `last`
    /// replaced one by one.
    fn made_through(&self, hashes: &[u64], last: usize) -> Made {
        Made {
            rewrite: self.rewrite.and_then(|covered| hashes.get(covered).copied()),
            replaced: self.in_place.iter().filter(|&&index| index <= last).count(),
        }
    }

    /// The latest rewrite remembered for a prefix of the conversation in place of the messages
    /// it covers, then the replacements remembered for each message after it.
    fn recall(self, memory: &mut Memory, hashes: &[u64]) -> Recalled {
        let Recalled { mut messages, .. } = self;
        let Some((last, rewrite)) = memory.rewrite(hashes) else {
            let changed = memory.recall(hashes, &mut messages);
            let origin = (0..messages.len()).map(Some).collect();
            return Recalled { origin, messages, in_place: changed.clone(), changed, rewrite: None };
        };
        let covered = last + 1;
        let later = memory.recall(&hashes[covered..], &mut messages[covered..]);
        let mut sent: Vec<Option<Message>> = messages.into_iter().map(Some).collect();
        let mut out = Recalled {
            messages: Vec::with_capacity(rewrite.slots.len() + sent.len() - covered),
            origin: Vec::new(),
            changed: Vec::new(),
            rewrite: Some(last),
            in_place: later.iter().map(|index| index + covered).collect(),
        };
        for slot in rewrite.slots {
            let message = match (slot.message, slot.origin) {
                (Some(message), _) => {
                    out.changed.push(out.messages.len());
                    message
                }
                (None, Some(index)) => match sent.get_mut(index).and_then(Option::take) {
                    Some(message) => message,
                    None => continue,
                },
                (None, None) => continue,
            };
            out.messages.push(message);
            out.origin.push(slot.origin);
        }
        for (index, message) in sent.into_iter().enumerate().skip(covered) {
            if later.binary_search(&(index - covered)).is_ok() {
                out.changed.push(out.messages.len());
            }
            out.messages.extend(message);
            out.origin.push(Some(index));
        }
        out
    }
}

/// The rewrite that gives `forwarded` messages again: each with the client's message it stands
/// for, and itself only when it is not that message as sent (its own hash in `own` differs).
fn rewrite_of(messages: &[Message], forwarded: &[Option<usize>], own: &[u64]) -> Rewrite {
    let slots = messages
        .iter()
        .zip(forwarded)
        .map(|(message, &origin)| {
            let as_sent =
                origin.and_then(|index| own.get(index)).is_some_and(|&hash| hash == message_hash(message));
            Slot { origin, message: (!as_sent).then(|| message.clone()) }
        })
        .collect();
    Rewrite { slots }
}

/// The prefix hash through the first user message, or of the whole when there is none.
fn conversation_id(hashes: &[u64], messages: &[Message]) -> u64 {
    let first_user = messages.iter().position(|m| m.role == Role::User);
    first_user.or(hashes.len().checked_sub(1)).and_then(|i| hashes.get(i)).copied().unwrap_or(0)
}

/// Drops the thinking blocks of every assistant message but the last `keep`, as Anthropic's
/// `clear_thinking_20251015` does, and says which messages changed. A message of thinking alone
/// keeps it (an assistant message cannot be empty); the last ones' blocks, which the API needs
/// back unchanged while a tool call is answered, are never touched.
fn clear_thinking_but_last(messages: &mut [Message], keep: usize) -> Vec<usize> {
    let assistants: Vec<usize> =
        messages.iter().enumerate().filter(|(_, m)| m.role == Role::Assistant).map(|(i, _)| i).collect();
    let mut cleared = Vec::new();
    for &index in &assistants[..assistants.len().saturating_sub(keep)] {
        let message = &mut messages[index];
        let thinking = |part: &Part| matches!(part, Part::Reasoning(_));
        if message.parts.iter().any(thinking) && !message.parts.iter().all(thinking) {
            message.parts.retain(|part| !thinking(part));
            cleared.push(index);
        }
    }
    cleared
}

/// The body to forward, or the proxy's answer instead (502, when a request that could not be
/// compacted must not go through).
///
/// With the body, the key under which to remember the upstream's count of the request.
pub(crate) async fn body(
    shared: &Arc<Shared>,
    parts: &hyper::http::request::Parts,
    body: Bytes,
) -> Result<(Bytes, Option<CountKey>), Box<Response<ProxyBody>>> {
    let settings = &shared.settings;
    let (Some(_), Some(endpoint)) = (&settings.compaction, Endpoint::of(&parts.method, parts.uri.path()))
    else {
        return Ok((body, None));
    };
    // Reading, counting and writing a large request is work for a blocking thread, not for the
    // runtime's workers; as many at once as there are cores, the others waiting their turn in
    // order (the semaphore is fair) with their bytes alone. The turn goes with the work, so a
    // client gone meanwhile does not free it while its request is still being read. (The
    // semaphore is never closed.)
    let turn = shared.compacting.clone().acquire_owned().await.ok();
    let (task_shared, task_body) = (shared.clone(), body.clone());
    let done = tokio::task::spawn_blocking(move || {
        let _turn = turn;
        let settings = &task_shared.settings;
        let hooks = |model: Option<&str>| crate::models::hook_for(settings, endpoint.path(), model);
        // A dry run forwards nothing compacted, so there is nothing to be consistent with.
        let memory = (!settings.dry_run).then_some(&task_shared.memory);
        compact(hooks, memory, settings.clear_thinking, endpoint, &task_body)
    })
    .await;
    let path = endpoint.path();
    let failure = match done {
        Ok(Ok(compacted)) => {
            let key = compacted.key;
            if let Some(why) = &compacted.declined {
                (settings.log)(&format!(
                    "proxy: {path}: not compacted under the cache-aware rule ({} tokens estimated): {why}",
                    compacted.tokens_before
                ));
            }
            let Some(compacted_body) = compacted.body else { return Ok((body, key)) };
            shared.metrics.recalled(compacted.recalled);
            if compacted.compacted {
                shared.metrics.compaction(
                    compacted.tokens_before,
                    compacted.tokens_after,
                    compacted.results_cleared,
                );
                (settings.log)(&format!(
                    "proxy: {path}: conversation {:08x}: compacted{}: {} → {} tokens estimated{}, {} tool result{} \
                     cleared{}{}{}",
                    compacted.conversation >> 32,
                    if settings.dry_run { " (dry run, forwarded unchanged)" } else { "" },
                    compacted.tokens_before,
                    compacted.tokens_after,
                    match compacted.anchored {
                        Some(count) => format!(" (from the upstream's count of {count})"),
                        None => String::new(),
                    },
                    compacted.results_cleared,
                    if compacted.results_cleared == 1 { "" } else { "s" },
                    match compacted.dropped_and_put {
                        Some((dropped, put)) => format!(", {dropped} messages dropped and {put} put in"),
                        None => String::new(),
                    },
                    match compacted.recalled {
                        0 => String::new(),
                        n => format!(", {n} earlier replacement{} kept", if n == 1 { "" } else { "s" }),
                    },
                    match compacted.first_change {
                        Some((first, of)) => format!("; the prompt cache is written again from message {first} of {of}"),
                        None => String::new(),
                    },
                ));
            }
            return Ok(match settings.dry_run {
                true => (body, key),
                false => (Bytes::from(compacted_body), key),
            });
        }
        // The log says what failed, not the reader's words for it, which may quote the body;
        // the client, whose body it is, gets them all.
        Ok(Err(error)) => {
            shared.metrics.failure(match error {
                Error::Read { .. } => Failure::BodyUnreadable,
                Error::UnknownModel { .. } => Failure::UnknownModel,
                _ => Failure::NotCompacted,
            });
            (error.to_string(), chain(&error), crate::models::first_time(settings, &error))
        }
        Err(_) => {
            shared.metrics.failure(Failure::NotCompacted);
            let failure = format!("the {path} request's compaction failed");
            (failure.clone(), failure, true)
        }
    };
    let (logged, whole, say) = failure;
    match settings.fail_closed {
        true => {
            if say {
                (settings.log)(&format!("proxy: {logged}; answered 502 (fail closed)"));
            }
            Err(Box::new(answer(StatusCode::BAD_GATEWAY, "compaction_error", &whole)))
        }
        false => {
            if say {
                (settings.log)(&format!("proxy: warning: {logged}; forwarded unchanged"));
            }
            Ok((body, None))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compaction_hook::CompactionHookSettings;
    use serde_json::json;

    /// A Messages request of `task` and `steps` tool calls, each result about 1,000 tokens.
    fn request(task: &str, steps: usize) -> Vec<u8> {
        let mut messages = vec![json!({"role": "user", "content": task})];
        for n in 0..steps {
            messages.push(json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": format!("toolu_{n}"), "name": "Read", "input": {"file_path": format!("f{n}.rs")}},
            ]}));
            let output = format!("line {n} of the output, with some text in it\n").repeat(90);
            messages.push(json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": format!("toolu_{n}"), "content": output},
            ]}));
        }
        serde_json::to_vec(&json!({"model": "m", "max_tokens": 100, "messages": messages})).expect("JSON")
    }

    /// A sliding window over an 8,000-token window.
    fn window() -> Arc<CompactionHook> {
        let window = compaction_core::SlidingWindowCompactor::new(Default::default());
        Arc::new(CompactionHook::new(Box::new(window), CompactionHookSettings::new(8_000)).expect("valid"))
    }

    fn run(memory: &Mutex<Memory>, body: &[u8]) -> Compacted {
        compact(|_| Ok(window()), Some(memory), None, Endpoint::Messages, body).expect("compacts")
    }

    /// The upstream's count of a compacted request anchors the conversation's next request only
    /// while what made it compacted is still remembered: once its rewrite is forgotten, the
    /// next request is whole again, and is estimated (and compacted) afresh.
    #[test]
    fn a_count_anchors_the_next_request_only_while_what_made_it_is_remembered() {
        let first = request("Fix the test.", 8);
        let next = request("Fix the test.", 9);
        let other = request("Another task.", 8);
        // What one cut weighs, to size a memory that holds one.
        let probe = Mutex::new(Memory::new(usize::MAX));
        run(&probe, &first);
        let one = probe.lock().expect("unpoisoned").bytes();

        for forgotten in [false, true] {
            let memory = Mutex::new(Memory::new(one + one / 2));
            let a = run(&memory, &first);
            assert!(a.compacted && a.dropped_and_put.is_some(), "the window cut the first request");
            // The upstream counts what it was sent.
            let key = a.key.expect("a key for the count");
            memory.lock().expect("unpoisoned").remember_count(key, a.tokens_after);
            if forgotten {
                // Another conversation's cut pushes this one's out of the budget.
                assert!(run(&memory, &other).compacted);
            }
            let b = run(&memory, &next);
            match forgotten {
                false => {
                    assert_eq!(b.anchored, Some(a.tokens_after), "anchored on the count");
                    assert!(!b.compacted, "the cut put back, the next request is under the threshold");
                }
                true => {
                    assert_eq!(b.anchored, None, "not anchored on a count of what is no longer made");
                    assert!(b.compacted, "compacted afresh, {} tokens estimated", b.tokens_before);
                }
            }
        }
    }

    /// Drops every step but the last and puts an assistant note after the first message, which
    /// is an assistant message too: two in a row, which a Responses request would read back as
    /// one, so it refuses to be written so.
    #[derive(Debug)]
    struct TwoRepliesInARow;

    impl compaction_core::Compactor for TwoRepliesInARow {
        fn try_compact(
            &self,
            messages: &[compaction_model::Message],
            target_tokens: usize,
            _counter: &dyn compaction_tokens::TokenCounter,
        ) -> Result<Option<compaction_core::Compaction>, compaction_core::Error> {
            let last = messages.len() - 2;
            let mut kept = vec![messages[0].clone(), compaction_model::Message::assistant("[note]")];
            kept.extend_from_slice(&messages[last..]);
            let mut report =
                compaction_core::CompactionReport::new("TwoRepliesInARow", 0, 0, target_tokens, Vec::new());
            report.removed = (1..last).collect();
            report.inserted = vec![1];
            Ok(Some(compaction_core::Compaction::whole(kept, report)))
        }

        fn name(&self) -> &str {
            "TwoRepliesInARow"
        }
    }

    /// A request that cannot be written back as compacted goes on unchanged, and nothing of its
    /// compaction is remembered.
    #[test]
    fn nothing_is_remembered_of_a_compaction_that_could_not_be_written() {
        let mut input = vec![json!({"type": "message", "role": "user", "content": "Fix the test."})];
        for n in 0..8 {
            input.push(json!({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": format!("c{n}")}));
            input.push(json!({"type": "function_call_output", "call_id": format!("c{n}"), "output": "x ".repeat(2_000)}));
        }
        let body = serde_json::to_vec(&json!({"model": "m", "input": input})).expect("JSON");
        let memory = Mutex::new(Memory::new(usize::MAX));
        let hook = Arc::new(
            CompactionHook::new(Box::new(TwoRepliesInARow), CompactionHookSettings::new(8_000))
                .expect("valid"),
        );
        let result = compact(|_| Ok(hook.clone()), Some(&memory), None, Endpoint::Responses, &body);
        match result {
            Err(Error::Write { source, .. }) => {
                assert!(source.to_string().contains("both assistant messages"), "{source}")
            }
            other => panic!("{:?}", other.err()),
        }
        assert_eq!(memory.lock().expect("unpoisoned").bytes(), 0);
    }
}
