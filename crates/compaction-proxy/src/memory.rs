//! What the proxy remembers of the conversations it compacted, so that a compaction costs one
//! prompt-cache rewrite and not one per request.
//!
//! An agent sends its whole conversation with every request, as it has it: uncompacted. Run
//! afresh each time, the hook would find the request over its threshold again and again, and
//! compact a little differently each time as the conversation grows, so the provider's cached
//! prefix would break on every request. Instead, each message the hook replaced is remembered
//! under the prefix it closed (a hash of every message up to and including it, as the client
//! sent them); a later request carrying that same prefix gets the same replacement before the
//! hook runs, so its prefix is byte for byte the one forwarded before, and the hook, seeing the
//! request as the upstream will, compacts again only once it has grown past the threshold.
//! A conversation is thereby recognised by its prefix alone: a fork of it (the same messages up
//! to a point) shares its replacements up to that point, and no other conversation can.
//!
//! A compaction that drops messages or puts some in (a sliding window and its note, a summary)
//! is remembered whole, as a [`Rewrite`] under the prefix hash of the last message it covered:
//! each message forwarded, as the client's message it stands for or as what was sent instead.
//! A later request carrying that prefix gets the latest such rewrite in place of the messages
//! it covers, then the replacements of single messages after it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use compaction_model::{
    FilePart, ImagePart, Message, Part, ResultPart, Role, Text, TextPart, ToolCall, ToolCallResult,
    ToolResultContent,
};
use serde_json::Value;

/// The prefix hashes of `messages`: the `i`th covers messages `0..=i`. A message is known by
/// its content, not by the cache breakpoints (`cache_control`) on it, which a client moves to
/// its newest messages with every request.
///
/// Each message is hashed field by field as it is held, each hash continuing the one before:
/// nothing is serialised to be hashed (serialising each message of a megabyte request cost more
/// than reading it), and a text is hashed as it lies in the request (see [`hash_text`]). A text
/// hashes alike however it was read (escaped or not, left in the request or a string of its own).
///
/// The hasher is foldhash's, seeded at random once per process ([`HASHER`]): several times as
/// fast as std's SipHash over a megabyte of text, and the same for a conversation's every
/// request for as long as the proxy runs, which is as long as the memory is kept. A hash is
/// never stored beyond that (the log's conversation ids change with each run of the proxy), and
/// a client cannot aim a collision at a seed it does not know.
///
/// Returned beside them, each message's own hash ([`message_hash`]), which the `i`th prefix
/// hash combines with the one before it.
pub(crate) fn prefix_hashes(messages: &[Message]) -> (Vec<u64>, Vec<u64>) {
    let own: Vec<u64> = messages.iter().map(message_hash).collect();
    let mut running = 0u64;
    let prefix = own
        .iter()
        .map(|&own| {
            let mut hasher = HASHER.build_hasher();
            hasher.write_u64(running);
            hasher.write_u64(own);
            running = hasher.finish();
            running
        })
        .collect();
    (prefix, own)
}

/// The hash of `message` alone, as [`prefix_hashes`] knows it (its cache breakpoints aside).
pub(crate) fn message_hash(message: &Message) -> u64 {
    let mut hasher = HASHER.build_hasher();
    hash_message(message, &mut hasher);
    hasher.finish()
}

/// The hasher of the prefixes: seeded at random when the process first hashes, the same after.
static HASHER: LazyLock<foldhash::fast::RandomState> = LazyLock::new(Default::default);

/// Feeds everything `message` holds to `h`, but the cache breakpoints.
fn hash_message(message: &Message, h: &mut impl Hasher) {
    message.role.hash(h);
    message.name.hash(h);
    hash_object(&message.meta, h);
    h.write_usize(message.parts.len());
    for part in &message.parts {
        match part {
            Part::Text(text) => {
                h.write_u8(0);
                hash_text_part(text, h);
            }
            Part::ToolCall(call) => {
                h.write_u8(1);
                hash_call(call, h);
            }
            Part::ToolCallResult(result) => {
                h.write_u8(2);
                match &result.result {
                    ToolResultContent::Text(text) => {
                        h.write_u8(0);
                        hash_text(text, h);
                    }
                    ToolResultContent::Parts(parts) => {
                        h.write_u8(1);
                        h.write_usize(parts.len());
                        for part in parts {
                            match part {
                                ResultPart::Text(text) => {
                                    h.write_u8(0);
                                    hash_text_part(text, h);
                                }
                                ResultPart::Image(image) => {
                                    h.write_u8(1);
                                    hash_image(image, h);
                                }
                                ResultPart::File(file) => {
                                    h.write_u8(2);
                                    hash_file(file, h);
                                }
                                other => hash_value(&other_result_part(other), h),
                            }
                        }
                    }
                }
                hash_call(&result.origin, h);
                result.error.hash(h);
                hash_object(&result.unknown, h);
            }
            Part::Reasoning(reasoning) => {
                h.write_u8(3);
                reasoning.reasoning_text.hash(h);
                hash_object(&reasoning.extra, h);
                hash_object(&reasoning.unknown, h);
            }
            Part::Image(image) => {
                h.write_u8(4);
                hash_image(image, h);
            }
            Part::File(file) => {
                h.write_u8(5);
                hash_file(file, h);
            }
            // A kind this crate was not built for: by its value, as the message writes it.
            other => {
                h.write_u8(6);
                hash_value(&other_part(other), h);
            }
        }
    }
}

/// A text, fed as serde_json spells it in blocks of a fixed size ([`Text::for_each_spelled_block`]):
/// a text left in the request in that spelling, as most clients write, is hashed where it lies,
/// neither decoded nor copied, and the blocks are the same however the text was read (escaped
/// otherwise, or a string of its own), which a hash that depends on how its input is cut needs.
/// Led by its length in characters, which every text knows, so that the texts in a row cannot
/// run into one another.
fn hash_text(text: &Text, h: &mut impl Hasher) {
    h.write_usize(text.char_len());
    text.for_each_spelled_block(|block| h.write(block));
}

fn hash_text_part(part: &TextPart, h: &mut impl Hasher) {
    hash_text(&part.text, h);
    hash_object(&part.unknown, h);
}

fn hash_call(call: &ToolCall, h: &mut impl Hasher) {
    call.tool_name.hash(h);
    call.arguments.as_json().hash(h);
    call.raw_arguments.hash(h);
    call.id.hash(h);
    call.extra.is_some().hash(h);
    if let Some(extra) = &call.extra {
        hash_object(extra, h);
    }
    hash_object(&call.unknown, h);
}

fn hash_image(image: &ImagePart, h: &mut impl Hasher) {
    image.base64_image.hash(h);
    image.mime_type.hash(h);
    image.detail.hash(h);
    hash_object(&image.meta, h);
    image.validation.hash(h);
    hash_object(&image.unknown, h);
}

fn hash_file(file: &FilePart, h: &mut impl Hasher) {
    file.base64_data.hash(h);
    file.mime_type.hash(h);
    file.filename.hash(h);
    hash_object(&file.extra, h);
    file.validation.hash(h);
    hash_object(&file.unknown, h);
}

/// A part of a kind this crate does not know, as a message of it alone writes it.
fn other_part(part: &Part) -> Value {
    Message { role: Role::User, parts: vec![part.clone()], name: None, meta: Default::default() }.to_value()
}

/// A result part of a kind this crate does not know, as a result of it alone writes it.
fn other_result_part(part: &ResultPart) -> Value {
    let result = ToolCallResult {
        result: ToolResultContent::Parts(vec![part.clone()]),
        origin: Box::default(),
        error: false,
        unknown: Default::default(),
    };
    other_part(&Part::ToolCallResult(result))
}

/// An object's keys and values in order, less any `cache_control` at any depth.
fn hash_object(object: &serde_json::Map<String, Value>, h: &mut impl Hasher) {
    h.write_u8(b'{');
    for (key, value) in object {
        if key != "cache_control" {
            key.hash(h);
            hash_value(value, h);
        }
    }
    h.write_u8(b'}');
}

fn hash_value(value: &Value, h: &mut impl Hasher) {
    match value {
        Value::Null => h.write_u8(b'n'),
        Value::Bool(b) => {
            h.write_u8(b'b');
            b.hash(h);
        }
        Value::Number(n) => {
            h.write_u8(b'#');
            n.to_string().hash(h);
        }
        Value::String(s) => {
            h.write_u8(b's');
            s.hash(h);
        }
        Value::Array(items) => {
            h.write_u8(b'[');
            h.write_usize(items.len());
            items.iter().for_each(|item| hash_value(item, h));
        }
        Value::Object(map) => hash_object(map, h),
    }
}

/// The replacements made, by the prefix hash of the message they replaced, within a budget of
/// bytes: beyond it, the replacements used least recently (made or given back the longest ago)
/// are forgotten first, so the conversations going on keep theirs and those over give theirs up.
///
/// It also keeps the upstream's count of each request and its reply, by the prefix hash of the
/// request's last message, for the next request of the conversation to be anchored on (a few
/// bytes each, the oldest forgotten first beyond [`COUNTED`]).
#[derive(Debug)]
pub(crate) struct Memory {
    /// The replacements made, each under the prefix hash of the message it replaced, and the
    /// rewrites made (messages dropped or put in), each under that of the last message it covers.
    held: HashMap<Kept, Held>,
    /// What is held by when it was last used: the key is a tick of [`Memory::clock`].
    recency: BTreeMap<u64, Kept>,
    clock: u64,
    /// The estimated bytes of the replacements held ([`weight`]), at most `budget`.
    bytes: usize,
    budget: usize,
    counted: HashMap<u64, Counted>,
    counted_order: VecDeque<u64>,
}

/// What a forwarded request was made of beyond the client's messages: the rewrite it began with
/// (the prefix hash it is kept under) and how many of the client's messages after it were
/// replaced one by one. The upstream's count of a request anchors the next request of its
/// conversation only when that one is made of the same: with a replacement or a rewrite
/// forgotten in between, the next request goes out whole, and an estimate anchored on the count
/// of the compacted one would let it through uncompacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Made {
    pub(crate) rewrite: Option<u64>,
    pub(crate) replaced: usize,
}

/// Where the upstream's count of a forwarded request goes: the prefix hash of its last message,
/// and what the request was made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CountKey {
    pub(crate) hash: u64,
    pub(crate) made: Made,
}

/// The upstream's count of a request and its reply, when it came, and what the request was
/// made of.
#[derive(Debug, Clone, Copy)]
struct Counted {
    tokens: usize,
    at: Instant,
    made: Made,
}

/// The upstream's count a request may be anchored on ([`Memory::count`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Anchor {
    /// The count of the previous request and its reply.
    pub(crate) tokens: usize,
    /// How long ago that answer ended.
    pub(crate) idle: Duration,
    /// The index of the previous request's last message.
    pub(crate) last: usize,
    /// What the previous request was made of.
    pub(crate) made: Made,
}

/// What an entry of [`Memory::held`] is, and under which prefix hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kept {
    /// The replacement under this prefix hash.
    Replacement(u64),
    /// The rewrite under this prefix hash.
    Rewrite(u64),
}

/// The messages forwarded in place of a conversation's first messages, when a compaction
/// dropped messages or put some in (a sliding window and its note, a summary): a later request
/// of the conversation gets the same messages in their place before the hook runs, as it gets
/// the replacements of single messages.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rewrite {
    /// In order, each message forwarded.
    pub(crate) slots: Vec<Slot>,
}

/// One message of a [`Rewrite`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Slot {
    /// The index of the client's message it stands for; `None` for a message put in.
    pub(crate) origin: Option<usize>,
    /// What was forwarded, when it is not the client's message as sent (always for a message
    /// put in).
    pub(crate) message: Option<Message>,
}

/// A replacement or a rewrite held within the budget.
#[derive(Debug)]
struct Held {
    value: Entry,
    /// Its weight: a replacement's [`weight`]; a rewrite's, that of the messages it holds and
    /// its slots.
    bytes: usize,
    /// When it was last used, its key in [`Memory::recency`].
    tick: u64,
}

/// What [`Held`] holds.
#[derive(Debug)]
enum Entry {
    Replacement(Message),
    Rewrite(Rewrite),
}

/// How many upstream counts are kept, the oldest forgotten first: a few dozen bytes each.
const COUNTED: usize = 100_000;

/// What a remembered replacement costs beyond its message's own bytes: its place in the map and
/// in the recency order.
const ENTRY: usize = 96;

/// An estimate of the bytes `message` holds on the heap, with the entry that keeps it: each
/// string's length and each value's and part's size, plus what the allocator spends on each
/// allocation and a map on each entry. It need not be exact, only close and proportional, so
/// that a budget in bytes holds as many replacements as fit in about as much memory.
pub(crate) fn weight(message: &Message) -> usize {
    let text = |text: &TextPart| string(&text.text) + object_weight(&text.unknown);
    let call = |call: &ToolCall| {
        string(&call.tool_name)
            + string(call.arguments.as_json())
            + call.raw_arguments.as_deref().map_or(0, string)
            + call.id.as_deref().map_or(0, string)
            + call.extra.as_ref().map_or(0, |extra| object_weight(extra))
            + object_weight(&call.unknown)
    };
    let image = |image: &ImagePart| {
        string(&image.base64_image)
            + image.mime_type.as_deref().map_or(0, string)
            + image.detail.as_deref().map_or(0, string)
            + object_weight(&image.meta)
            + object_weight(&image.unknown)
    };
    let file = |file: &FilePart| {
        string(&file.base64_data)
            + file.mime_type.as_deref().map_or(0, string)
            + file.filename.as_deref().map_or(0, string)
            + object_weight(&file.extra)
            + object_weight(&file.unknown)
    };
    let parts: usize = message
        .parts
        .iter()
        .map(|part| {
            std::mem::size_of::<Part>()
                + match part {
                    Part::Text(part) => text(part),
                    Part::ToolCall(part) => call(part),
                    Part::ToolCallResult(result) => {
                        let content = match &result.result {
                            ToolResultContent::Text(text) => string(text),
                            ToolResultContent::Parts(parts) => {
                                ALLOCATION
                                    + parts
                                        .iter()
                                        .map(|part| {
                                            std::mem::size_of::<ResultPart>()
                                                + match part {
                                                    ResultPart::Text(part) => text(part),
                                                    ResultPart::Image(part) => image(part),
                                                    ResultPart::File(part) => file(part),
                                                    other => value_weight(&other_result_part(other)),
                                                }
                                        })
                                        .sum::<usize>()
                            }
                        };
                        // The call it answers is boxed.
                        content
                            + ALLOCATION
                            + std::mem::size_of::<ToolCall>()
                            + call(&result.origin)
                            + object_weight(&result.unknown)
                    }
                    Part::Reasoning(reasoning) => {
                        string(&reasoning.reasoning_text)
                            + object_weight(&reasoning.extra)
                            + object_weight(&reasoning.unknown)
                    }
                    Part::Image(part) => image(part),
                    Part::File(part) => file(part),
                    other => value_weight(&other_part(other)),
                }
        })
        .sum();
    ENTRY
        + std::mem::size_of::<Message>()
        + ALLOCATION
        + message.name.as_deref().map_or(0, string)
        + object_weight(&message.meta)
        + parts
}

/// What an allocation costs beyond the bytes asked for: the allocator's rounding up to its size
/// classes, on average, and its bookkeeping.
const ALLOCATION: usize = 32;

/// A map entry's overhead beside its key and value (its hash and index slots, and the room a
/// map grown by doubling keeps free).
const MAP_ENTRY: usize = 32;

/// A string of its own: its bytes in an allocation, or nothing when it is empty.
fn string(text: &str) -> usize {
    match text.len() {
        0 => 0,
        len => len + ALLOCATION,
    }
}

/// An object: nothing when it is empty (a shared object holds no allocation then), else its
/// shared allocation, its entries' and its index's, and each entry.
fn object_weight(object: &serde_json::Map<String, Value>) -> usize {
    match object.len() {
        0 => 0,
        _ => {
            3 * ALLOCATION
                + object
                    .iter()
                    .map(|(key, value)| MAP_ENTRY + string(key) + value_weight(value))
                    .sum::<usize>()
        }
    }
}

fn value_weight(value: &Value) -> usize {
    std::mem::size_of::<Value>()
        + match value {
            Value::Null | Value::Bool(_) | Value::Number(_) => 0,
            Value::String(s) => string(s),
            Value::Array(items) => ALLOCATION + items.iter().map(value_weight).sum::<usize>(),
            Value::Object(map) => object_weight(map),
        }
}

/// `message` with every text its own. A text the reader left in the request's bytes (see
/// [`compaction_model::Text`]) would keep the whole request alive for as long as the replacement
/// is remembered: a megabyte a request, over thousands of requests. Each text is copied where it
/// lies (texts are the only part of a message that can share the request's bytes); a part of a
/// kind this crate does not know goes through its value and back, and is kept as it is when the
/// copy would differ (nothing the model writes is lost that way; the copy is only for memory).
fn owned(mut message: Message) -> Message {
    let own = |text: &mut Text| *text = Text::new(text.as_str());
    for part in &mut message.parts {
        match part {
            Part::Text(text) => own(&mut text.text),
            Part::ToolCallResult(result) => match &mut result.result {
                ToolResultContent::Text(text) => own(text),
                ToolResultContent::Parts(parts) => {
                    for part in parts {
                        match part {
                            ResultPart::Text(text) => own(&mut text.text),
                            ResultPart::Image(_) | ResultPart::File(_) => {}
                            other => {
                                *other =
                                    owned_by_value(other_result_part(other), other.clone(), |m| {
                                        match m.parts.into_iter().next() {
                                            Some(Part::ToolCallResult(ToolCallResult {
                                                result: ToolResultContent::Parts(mut parts),
                                                ..
                                            })) if parts.len() == 1 => parts.pop(),
                                            _ => None,
                                        }
                                    })
                            }
                        }
                    }
                }
            },
            Part::ToolCall(_) | Part::Reasoning(_) | Part::Image(_) | Part::File(_) => {}
            other => {
                *other = owned_by_value(other_part(other), other.clone(), |m| m.parts.into_iter().next())
            }
        }
    }
    message
}

/// `kept` read again from `value` (which holds it alone) and taken out by `take`, when that
/// gives it back equal; else `kept` itself.
fn owned_by_value<T: PartialEq>(value: Value, kept: T, take: impl FnOnce(Message) -> Option<T>) -> T {
    match Message::from_value(value, 0).ok().and_then(take) {
        Some(copy) if copy == kept => copy,
        _ => kept,
    }
}

impl Memory {
    /// A memory holding at most `budget` bytes of replacements, by their [`weight`].
    pub(crate) fn new(budget: usize) -> Memory {
        Memory {
            held: HashMap::new(),
            recency: BTreeMap::new(),
            clock: 0,
            bytes: 0,
            budget,
            counted: HashMap::new(),
            counted_order: VecDeque::new(),
        }
    }

    /// Puts the remembered replacements into `messages` (whose prefix hashes are `hashes`) and
    /// says at which indices; they are the most recently used now.
    pub(crate) fn recall(&mut self, hashes: &[u64], messages: &mut [Message]) -> Vec<usize> {
        let mut recalled = Vec::new();
        for (index, &hash) in hashes.iter().enumerate() {
            if let Some(Entry::Replacement(message)) = self.touch(Kept::Replacement(hash)) {
                messages[index] = message.clone();
                recalled.push(index);
            }
        }
        recalled
    }

    /// What is held under `key`, the most recently used now.
    fn touch(&mut self, key: Kept) -> Option<&Entry> {
        let held = self.held.get_mut(&key)?;
        self.recency.remove(&held.tick);
        self.clock += 1;
        held.tick = self.clock;
        self.recency.insert(self.clock, key);
        Some(&held.value)
    }

    /// Holds `value` under `key` in place of what was, then forgets what was used least
    /// recently until what is held fits the budget. A value larger than the whole budget is not
    /// held at all: it would push out everything else and then itself.
    fn keep(&mut self, key: Kept, value: Entry, bytes: usize) {
        if let Some(old) = self.held.remove(&key) {
            self.recency.remove(&old.tick);
            self.bytes -= old.bytes;
        }
        if bytes > self.budget {
            return;
        }
        self.clock += 1;
        self.held.insert(key, Held { value, bytes, tick: self.clock });
        self.recency.insert(self.clock, key);
        self.bytes += bytes;
        while self.bytes > self.budget {
            let Some((_, oldest)) = self.recency.pop_first() else { break };
            self.bytes -= self.held.remove(&oldest).map_or(0, |held| held.bytes);
        }
    }

    /// The latest rewrite remembered for a prefix of the conversation whose prefix hashes are
    /// `hashes`: the index of the last message it covers, and the rewrite, the most recently
    /// used now.
    pub(crate) fn rewrite(&mut self, hashes: &[u64]) -> Option<(usize, Rewrite)> {
        let last = (0..hashes.len()).rev().find(|&i| self.held.contains_key(&Kept::Rewrite(hashes[i])))?;
        match self.touch(Kept::Rewrite(hashes[last]))? {
            Entry::Rewrite(rewrite) => Some((last, rewrite.clone())),
            Entry::Replacement(_) => None,
        }
    }

    /// Remembers `rewrite` for the conversation prefix `hash` closes (the last message it
    /// covers), within the budget as [`Memory::remember`] does.
    pub(crate) fn remember_rewrite(&mut self, hash: u64, mut rewrite: Rewrite) {
        for slot in &mut rewrite.slots {
            slot.message = slot.message.take().map(owned);
        }
        let bytes = ENTRY
            + rewrite.slots.len() * std::mem::size_of::<Slot>()
            + rewrite.slots.iter().filter_map(|slot| slot.message.as_ref()).map(weight).sum::<usize>();
        self.keep(Kept::Rewrite(hash), Entry::Rewrite(rewrite), bytes);
    }

    /// Remembers `replacement` for the message that closed the prefix `hash`, then forgets the
    /// replacements used least recently until what is held fits the budget (a replacement
    /// larger than the whole budget is not kept at all).
    pub(crate) fn remember(&mut self, hash: u64, replacement: Message) {
        let message = owned(replacement);
        let bytes = weight(&message);
        self.keep(Kept::Replacement(hash), Entry::Replacement(message), bytes);
    }

    /// Remembers the upstream's count of a request and its reply, under its [`CountKey`].
    pub(crate) fn remember_count(&mut self, key: CountKey, context_tokens: usize) {
        let counted = Counted { tokens: context_tokens, at: Instant::now(), made: key.made };
        if self.counted.insert(key.hash, counted).is_none() {
            self.counted_order.push_back(key.hash);
        }
        while self.counted_order.len() > COUNTED {
            if let Some(oldest) = self.counted_order.pop_front() {
                self.counted.remove(&oldest);
            }
        }
    }

    /// The upstream's count of this conversation's previous request and its reply, when
    /// `messages` are that request, then its reply (one assistant message), then what followed:
    /// the hook adds what followed to it. With it, how long ago that answer ended (for the
    /// cache-aware rule, a cache gone cold), and what that request was made of, which the
    /// caller checks this one is made of too.
    pub(crate) fn count(&self, hashes: &[u64], messages: &[Message]) -> Option<Anchor> {
        let last = (0..hashes.len()).rev().find(|&i| self.counted.contains_key(&hashes[i]))?;
        let replies = messages[last + 1..].iter().filter(|m| m.role == Role::Assistant).count();
        let answered = messages.get(last + 1).is_some_and(|m| m.role == Role::Assistant);
        let counted = self.counted[&hashes[last]];
        (answered && replies == 1).then(|| Anchor {
            tokens: counted.tokens,
            idle: counted.at.elapsed(),
            last,
            made: counted.made,
        })
    }

    /// How many replacements are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.held.keys().filter(|key| matches!(key, Kept::Replacement(_))).count()
    }

    /// The estimated bytes they hold.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacement_comes_back_only_after_the_same_prefix() {
        let conversation = [Message::user("task"), Message::user("result a"), Message::user("result b")];
        let fork = [Message::user("another task"), Message::user("result a"), Message::user("result b")];
        let hashes = prefix_hashes(&conversation).0;
        let mut memory = Memory::new(1 << 20);
        memory.remember(hashes[1], Message::user("[pruned]"));

        let mut again = conversation.to_vec();
        again.push(Message::user("result c"));
        let again_hashes = prefix_hashes(&again).0;
        assert_eq!(again_hashes[..3], hashes[..]);
        assert_eq!(memory.recall(&again_hashes, &mut again), [1]);
        assert_eq!(again[1], Message::user("[pruned]"));

        let mut other = fork.to_vec();
        assert!(memory.recall(&prefix_hashes(&fork).0, &mut other).is_empty());
        assert_eq!(other, fork);
    }

    #[test]
    fn a_cache_breakpoint_does_not_change_what_a_message_is() {
        let read = |value: serde_json::Value| Message::from_value(value, 0).expect("a message");
        let plain = read(serde_json::json!({"role": "user", "content": [{"text": "hi"}], "meta": {}}));
        let marked = read(
            serde_json::json!({"role": "user", "content": [{"text": "hi", "cache_control": {"type": "ephemeral"}}], "meta": {}}),
        );
        assert_ne!(plain.to_value(), marked.to_value(), "the breakpoint is kept in the message");
        assert_eq!(prefix_hashes(&[plain]), prefix_hashes(&[marked]));
    }

    #[test]
    fn a_message_hashes_alike_however_its_texts_were_read() {
        // The same message spelled with escapes and without, read leaving its texts in the
        // request's bytes, and made of strings of its own.
        let spellings: &[&[u8]] = &[
            br#"[{"role": "user", "meta": {}, "name": null, "content": [{"text": "d\u00e9j\u00e0\n\"vu\" \ud83c\udf89"}]}]"#,
            "[{\"role\": \"user\", \"meta\": {}, \"name\": null, \"content\": [{\"text\": \"déjà\\n\\\"vu\\\" 🎉\"}]}]"
                .as_bytes(),
        ];
        let owned = prefix_hashes(&[Message::user("déjà\n\"vu\" 🎉")]);
        for spelling in spellings {
            let source = compaction_model::JsonSource::new(spelling.to_vec());
            let read = Message::read_prefix_in(&source, 1).expect("a message").message;
            assert_eq!(
                prefix_hashes(std::slice::from_ref(&read)),
                owned,
                "{}",
                String::from_utf8_lossy(spelling)
            );
        }
        // Long texts, in runs longer than what is gathered before hashing and escapes between.
        for run in [1, 100, 511, 512, 513, 2_000] {
            let text = format!("{}\n\"", "é".repeat(run)).repeat(5);
            // As serde_json spells it (hashed where it lies), and with other escapes.
            let canonical = serde_json::to_string(&text).expect("a JSON string");
            for spelled in
                [canonical.clone(), canonical.replace('é', "\\u00e9"), canonical.replace('é', "\\u00E9")]
            {
                let json = format!(
                    r#"[{{"role": "user", "meta": {{}}, "name": null, "content": [{{"text": {spelled}}}]}}]"#
                );
                let source = compaction_model::JsonSource::new(json.into_bytes());
                let read = Message::read_prefix_in(&source, 1).expect("a message").message;
                assert_eq!(prefix_hashes(&[read]), prefix_hashes(&[Message::user(text.clone())]), "{run}");
            }
        }
        // Two texts in a row are not the same as their characters run together.
        let split = |a: &str, b: &str| Message {
            role: Role::User,
            parts: vec![Part::Text(TextPart::new(a)), Part::Text(TextPart::new(b))],
            name: None,
            meta: Default::default(),
        };
        assert_ne!(prefix_hashes(&[split("ab", "c")]), prefix_hashes(&[split("a", "bc")]));
    }

    /// A message with a part of each kind, and something in each field.
    fn every_kind() -> Message {
        let mut call = ToolCall::new(
            "bash",
            serde_json::from_value(serde_json::json!({"cmd": "ls"})).expect("an object"),
        )
        .with_id("c1");
        call.extra = Some(
            serde_json::from_value::<serde_json::Map<String, Value>>(serde_json::json!({"x": 1}))
                .expect("an object")
                .into(),
        );
        let result = ToolCallResult {
            result: ToolResultContent::Parts(vec![ResultPart::Text(TextPart::new("a.rs"))]),
            origin: Box::new(call.clone()),
            error: false,
            unknown: Default::default(),
        };
        let image = ImagePart {
            base64_image: "aGk=".into(),
            mime_type: Some("image/png".into()),
            detail: None,
            meta: Default::default(),
            validation: false,
            unknown: Default::default(),
        };
        let file = FilePart {
            base64_data: "aGk=".into(),
            mime_type: None,
            filename: Some("a.pdf".into()),
            extra: Default::default(),
            validation: false,
            unknown: Default::default(),
        };
        let reasoning =
            compaction_model::ReasoningPart { reasoning_text: "hmm".into(), ..Default::default() };
        Message {
            role: Role::Assistant,
            parts: vec![
                Part::Text(TextPart::new("hi")),
                Part::ToolCall(call),
                Part::ToolCallResult(result),
                Part::Reasoning(reasoning),
                Part::Image(image),
                Part::File(file),
            ],
            name: None,
            meta: Default::default(),
        }
    }

    fn object(value: Value) -> compaction_model::SharedObject {
        serde_json::from_value::<serde_json::Map<String, Value>>(value).expect("an object").into()
    }

    #[test]
    fn a_change_to_any_field_makes_another_message() {
        type Change = fn(&mut Message);
        // (what changes, the change)
        let changes: &[(&str, Change)] = &[
            ("role", |m| m.role = Role::User),
            ("name", |m| m.name = Some("bot".into())),
            ("meta", |m| m.meta = object(serde_json::json!({"k": "v"}))),
            ("a text", |m| m.parts[0] = Part::Text(TextPart::new("ho"))),
            ("a text's unknown field", |m| {
                if let Part::Text(t) = &mut m.parts[0] {
                    t.unknown = object(serde_json::json!({"citations": []}));
                }
            }),
            ("a call's name", |m| {
                if let Part::ToolCall(c) = &mut m.parts[1] {
                    c.tool_name = "sh".into();
                }
            }),
            ("a call's arguments", |m| {
                if let Part::ToolCall(c) = &mut m.parts[1] {
                    c.arguments = serde_json::from_value::<serde_json::Map<String, Value>>(
                        serde_json::json!({"cmd": "pwd"}),
                    )
                    .expect("an object")
                    .into();
                }
            }),
            ("a call's raw arguments", |m| {
                if let Part::ToolCall(c) = &mut m.parts[1] {
                    c.raw_arguments = Some("{".into());
                }
            }),
            ("a call's id", |m| {
                if let Part::ToolCall(c) = &mut m.parts[1] {
                    c.id = Some("c2".into());
                }
            }),
            ("a call's extra", |m| {
                if let Part::ToolCall(c) = &mut m.parts[1] {
                    c.extra = None;
                }
            }),
            ("a result's text", |m| {
                if let Part::ToolCallResult(r) = &mut m.parts[2] {
                    r.result = ToolResultContent::Parts(vec![ResultPart::Text(TextPart::new("b.rs"))]);
                }
            }),
            ("a result as one string", |m| {
                if let Part::ToolCallResult(r) = &mut m.parts[2] {
                    r.result = ToolResultContent::Text("a.rs".into());
                }
            }),
            ("a result's error", |m| {
                if let Part::ToolCallResult(r) = &mut m.parts[2] {
                    r.error = true;
                }
            }),
            ("a result's call", |m| {
                if let Part::ToolCallResult(r) = &mut m.parts[2] {
                    r.origin.id = Some("c9".into());
                }
            }),
            ("the reasoning", |m| {
                if let Part::Reasoning(r) = &mut m.parts[3] {
                    r.reasoning_text = "hm".into();
                }
            }),
            ("a thinking signature", |m| {
                if let Part::Reasoning(r) = &mut m.parts[3] {
                    r.extra = object(serde_json::json!({"signature": "s"}));
                }
            }),
            ("an image", |m| {
                if let Part::Image(i) = &mut m.parts[4] {
                    i.base64_image = "aG8=".into();
                }
            }),
            ("an image's detail", |m| {
                if let Part::Image(i) = &mut m.parts[4] {
                    i.detail = Some("low".into());
                }
            }),
            ("a file's name", |m| {
                if let Part::File(f) = &mut m.parts[5] {
                    f.filename = None;
                }
            }),
            ("a part less", |m| {
                m.parts.pop();
            }),
            ("the parts in another order", |m| m.parts.swap(0, 3)),
        ];
        let base = every_kind();
        let mut seen = vec![("nothing", prefix_hashes(std::slice::from_ref(&base)).0[0])];
        for (what, change) in changes {
            let mut message = base.clone();
            change(&mut message);
            assert_ne!(message, base, "{what}: the change changes the message");
            let hash = prefix_hashes(&[message]).0[0];
            if let Some((other, _)) = seen.iter().find(|(_, h)| *h == hash) {
                panic!("{what} hashes as {other}");
            }
            seen.push((what, hash));
        }
    }

    #[test]
    fn breakpoints_are_ignored_wherever_they_are() {
        type Change = fn(&mut Message);
        // (where the breakpoint is, the change)
        let changes: &[(&str, Change)] = &[
            ("on a text", |m| {
                if let Part::Text(t) = &mut m.parts[0] {
                    t.unknown = object(serde_json::json!({"cache_control": {"type": "ephemeral"}}));
                }
            }),
            ("on a tool result", |m| {
                if let Part::ToolCallResult(r) = &mut m.parts[2] {
                    r.unknown =
                        object(serde_json::json!({"cache_control": {"type": "ephemeral", "ttl": "1h"}}));
                }
            }),
            ("on a call", |m| {
                if let Part::ToolCall(c) = &mut m.parts[1] {
                    c.unknown = object(serde_json::json!({"cache_control": {"type": "ephemeral"}}));
                }
            }),
            ("deep in the metadata", |m| {
                m.meta = object(serde_json::json!({"k": [{"cache_control": {"type": "ephemeral"}}]}));
            }),
        ];
        for (where_, change) in changes {
            let (mut marked, mut plain) = (every_kind(), every_kind());
            change(&mut marked);
            if *where_ == "deep in the metadata" {
                plain.meta = object(serde_json::json!({"k": [{}]}));
            }
            assert_ne!(marked, plain);
            assert_eq!(prefix_hashes(&[marked]), prefix_hashes(&[plain]), "a breakpoint {where_}");
        }
    }

    #[test]
    fn a_remembered_replacement_does_not_keep_its_request_alive() {
        // Messages as a request holds them, each text left in its bytes (with escapes or not).
        let requests: &[&[u8]] = &[
            br#"[{"role": "user", "meta": {}, "name": null, "content": [{"text": "a long tool result"}]}]"#,
            br#"[{"role": "user", "meta": {}, "name": null, "content": [{"text": "a \"quoted\"\nresult"}]}]"#,
            br#"[{"role": "tool", "meta": {}, "name": null, "content": [{"tool_call_result": {"result": "a.rs\nb.rs",
                "origin": {"tool_name": "ls", "arguments": {}, "id": "c1", "extra": null}, "error": false}}]}]"#,
            br#"[{"role": "tool", "meta": {}, "name": null, "content": [{"tool_call_result": {"result": [{"text": "a\tb"}],
                "origin": {"tool_name": "ls", "arguments": {}, "id": "c1", "extra": null}, "error": false}}]}]"#,
        ];
        for request in requests {
            let source = compaction_model::JsonSource::new(request.to_vec());
            let read = Message::read_prefix_in(&source, 1)
                .unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(request)))
                .message;
            let mut memory = Memory::new(1 << 20);
            memory.remember(7, read.clone());
            assert!(source.into_bytes().is_err(), "the message read shares the request's bytes");
            let source = compaction_model::JsonSource::new(request.to_vec());
            let read = Message::read_prefix_in(&source, 1)
                .unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(request)))
                .message;
            memory.remember(8, read.clone());
            let mut messages = vec![Message::user("x")];
            assert_eq!(memory.recall(&[8], &mut messages), [0]);
            assert_eq!(messages[0], read, "{}", String::from_utf8_lossy(request));
            drop((read, messages));
            assert!(source.into_bytes().is_ok(), "the memory holds no text of the request's bytes");
        }
    }

    #[test]
    fn the_replacements_used_least_recently_are_forgotten_beyond_the_budget() {
        let pruned = |n: u64| Message::user(format!("[pruned {n}]"));
        let each = weight(&pruned(0));
        // Room for three.
        let mut memory = Memory::new(3 * each + each / 2);
        for hash in 0..3 {
            memory.remember(hash, pruned(hash));
        }
        assert_eq!(memory.len(), 3);
        // 0 is given back (a later request of its conversation): 1 is now the least recent.
        let mut messages = vec![Message::user("x")];
        assert_eq!(memory.recall(&[0], &mut messages), [0]);
        memory.remember(3, pruned(3));
        let mut messages = vec![Message::user("x"); 4];
        assert_eq!(memory.recall(&[0, 1, 2, 3], &mut messages), [0, 2, 3]);
        assert!(memory.bytes() <= 3 * each + each / 2);
        // Remembered again under the same prefix: replaced, not counted twice.
        memory.remember(3, pruned(3));
        assert_eq!((memory.len(), memory.bytes()), (3, 3 * each));
    }

    #[test]
    fn the_latest_rewrite_of_a_prefix_comes_back_and_shares_the_budget() {
        let note = |n: usize| Slot { origin: None, message: Some(Message::user(format!("[{n} omitted]"))) };
        let kept = |index: usize| Slot { origin: Some(index), message: None };
        let conversation: Vec<Message> = (0..6).map(|n| Message::user(format!("message {n}"))).collect();
        let hashes = prefix_hashes(&conversation).0;
        let mut memory = Memory::new(1 << 20);
        assert_eq!(memory.rewrite(&hashes), None);
        let first = Rewrite { slots: vec![kept(0), note(2), kept(3)] };
        memory.remember_rewrite(hashes[3], first.clone());
        assert_eq!(memory.rewrite(&hashes), Some((3, first.clone())));
        // A later cut of the same conversation covers more: it is the one given back.
        let second = Rewrite { slots: vec![kept(0), note(4), kept(5)] };
        memory.remember_rewrite(hashes[5], second.clone());
        assert_eq!(memory.rewrite(&hashes), Some((5, second)));
        assert_eq!(memory.rewrite(&hashes[..5]), Some((3, first)));
        // Another conversation gets none.
        let other: Vec<Message> = (0..6).map(|n| Message::user(format!("other {n}"))).collect();
        assert_eq!(memory.rewrite(&prefix_hashes(&other).0), None);

        // Rewrites and replacements share one budget, the least recently used forgotten first.
        let rewrite = Rewrite { slots: vec![kept(0), note(1)] };
        let mut probe = Memory::new(usize::MAX);
        probe.remember_rewrite(0, rewrite.clone());
        let each = probe.bytes();
        let mut memory = Memory::new(2 * each + each / 2);
        memory.remember_rewrite(0, rewrite.clone());
        memory.remember_rewrite(1, rewrite.clone());
        assert!(memory.rewrite(&[0]).is_some());
        memory.remember_rewrite(2, rewrite);
        assert!(memory.rewrite(&[1]).is_none(), "the least recently used is forgotten");
        assert!(memory.rewrite(&[0]).is_some() && memory.rewrite(&[2]).is_some());
        assert!(memory.bytes() <= 2 * each + each / 2);
    }

    #[test]
    fn an_entry_larger_than_the_budget_is_not_kept_and_pushes_nothing_out() {
        let mut memory = Memory::new(1 << 20);
        for hash in 0..3 {
            memory.remember(hash, Message::user(format!("[pruned {hash}]")));
        }
        let held = memory.bytes();
        let huge = || Message::user("x".repeat(2 << 20));
        memory.remember_rewrite(99, Rewrite { slots: vec![Slot { origin: None, message: Some(huge()) }] });
        memory.remember(98, huge());
        assert!(memory.rewrite(&[99]).is_none());
        let mut messages = vec![Message::user("x"); 4];
        assert_eq!(memory.recall(&[0, 1, 2, 98], &mut messages), [0, 1, 2]);
        assert_eq!((memory.len(), memory.bytes()), (3, held));
        // One remembered before under the same prefix is let go: it is no longer what was made.
        memory.remember(1, huge());
        assert_eq!(memory.len(), 2);
    }

    #[test]
    fn the_budget_holds_whatever_the_replacements_weigh() {
        let budget = 64 << 10;
        let mut memory = Memory::new(budget);
        for hash in 0..2_000u64 {
            // Small and large, a result's worth of text up to 20 kB.
            let text = "x".repeat(usize::try_from(hash % 7).unwrap_or(0) * 3_000);
            let result = ToolCallResult {
                result: ToolResultContent::Text(text.into()),
                origin: Box::new(ToolCall::new("bash", Default::default()).with_id(format!("c{hash}"))),
                error: false,
                unknown: Default::default(),
            };
            let message = Message {
                role: Role::Tool,
                parts: vec![Part::ToolCallResult(result)],
                name: None,
                meta: Default::default(),
            };
            assert!(weight(&message) > usize::try_from(hash % 7).unwrap_or(0) * 3_000);
            memory.remember(hash, message);
            assert!(memory.bytes() <= budget, "{} bytes held after {hash}", memory.bytes());
        }
        assert!(memory.len() > 3, "{}", memory.len());
        let held: usize = memory
            .held
            .values()
            .map(|held| match &held.value {
                Entry::Replacement(message) => weight(message),
                Entry::Rewrite(_) => 0,
            })
            .sum();
        assert_eq!(held, memory.bytes());
        // A replacement larger than the whole budget is not kept.
        let mut memory = Memory::new(10);
        memory.remember(1, Message::user("[pruned]"));
        assert_eq!((memory.len(), memory.bytes()), (0, 0));
    }
}
