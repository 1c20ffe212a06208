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

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use compaction_model::{Message, Role};
use serde_json::Value;

/// The prefix hashes of `messages`: the `i`th covers messages `0..=i`. A message is known by
/// its content, not by the cache breakpoints (`cache_control`) on it, which a client moves to
/// its newest messages with every request.
pub(crate) fn prefix_hashes(messages: &[Message]) -> Vec<u64> {
    let mut running = 0u64;
    messages
        .iter()
        .map(|message| {
            let mut value = message.to_value();
            without_breakpoints(&mut value);
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            running.hash(&mut hasher);
            value.to_string().hash(&mut hasher);
            running = hasher.finish();
            running
        })
        .collect()
}

fn without_breakpoints(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.shift_remove("cache_control");
            map.values_mut().for_each(without_breakpoints);
        }
        Value::Array(items) => items.iter_mut().for_each(without_breakpoints),
        _ => {}
    }
}

/// The replacements made, by the prefix hash of the message they replaced, the oldest
/// forgotten first beyond a number.
///
/// It also keeps the upstream's count of each request and its reply, by the prefix hash of the
/// request's last message, for the next request of the conversation to be anchored on.
#[derive(Debug)]
pub(crate) struct Memory {
    replaced: HashMap<u64, Message>,
    order: VecDeque<u64>,
    counted: HashMap<u64, (usize, Instant)>,
    counted_order: VecDeque<u64>,
    capacity: usize,
}

/// `message` with every text its own. A text the reader left in the request's bytes (see
/// [`compaction_model::Text`]) would keep the whole request alive for as long as the replacement
/// is remembered: a megabyte a request, over thousands of requests. Kept as it is when the copy
/// would differ (nothing the model writes is lost that way; the copy is only for memory).
fn owned(message: Message) -> Message {
    match Message::from_value(message.to_value(), 0) {
        Ok(copy) if copy == message => copy,
        _ => message,
    }
}

impl Memory {
    pub(crate) fn new(capacity: usize) -> Memory {
        Memory {
            replaced: HashMap::new(),
            order: VecDeque::new(),
            counted: HashMap::new(),
            counted_order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Puts the remembered replacements into `messages` (whose prefix hashes are `hashes`) and
    /// says at which indices.
    pub(crate) fn recall(&self, hashes: &[u64], messages: &mut [Message]) -> Vec<usize> {
        let mut recalled = Vec::new();
        for (index, hash) in hashes.iter().enumerate() {
            if let Some(replacement) = self.replaced.get(hash) {
                messages[index] = replacement.clone();
                recalled.push(index);
            }
        }
        recalled
    }

    /// Remembers `replacement` for the message that closed the prefix `hash`.
    pub(crate) fn remember(&mut self, hash: u64, replacement: Message) {
        if self.replaced.insert(hash, owned(replacement)).is_none() {
            self.order.push_back(hash);
        }
        while self.order.len() > self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.replaced.remove(&oldest);
            }
        }
    }

    /// Remembers the upstream's count of a request whose last message closed the prefix `hash`,
    /// plus its reply.
    pub(crate) fn remember_count(&mut self, hash: u64, context_tokens: usize) {
        if self.counted.insert(hash, (context_tokens, Instant::now())).is_none() {
            self.counted_order.push_back(hash);
        }
        while self.counted_order.len() > self.capacity {
            if let Some(oldest) = self.counted_order.pop_front() {
                self.counted.remove(&oldest);
            }
        }
    }

    /// The upstream's count of this conversation's previous request and its reply, when
    /// `messages` are that request, then its reply (one assistant message), then what followed:
    /// the hook adds what followed to it. With it, how long ago that answer ended (for the
    /// cache-aware rule, a cache gone cold).
    pub(crate) fn count(&self, hashes: &[u64], messages: &[Message]) -> Option<(usize, Duration)> {
        let last = (0..hashes.len()).rev().find(|&i| self.counted.contains_key(&hashes[i]))?;
        let replies = messages[last + 1..].iter().filter(|m| m.role == Role::Assistant).count();
        let answered = messages.get(last + 1).is_some_and(|m| m.role == Role::Assistant);
        let (count, at) = self.counted[&hashes[last]];
        (answered && replies == 1).then(|| (count, at.elapsed()))
    }

    /// How many replacements are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.replaced.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacement_comes_back_only_after_the_same_prefix() {
        let conversation = [Message::user("task"), Message::user("result a"), Message::user("result b")];
        let fork = [Message::user("another task"), Message::user("result a"), Message::user("result b")];
        let hashes = prefix_hashes(&conversation);
        let mut memory = Memory::new(10);
        memory.remember(hashes[1], Message::user("[pruned]"));

        let mut again = conversation.to_vec();
        again.push(Message::user("result c"));
        let again_hashes = prefix_hashes(&again);
        assert_eq!(again_hashes[..3], hashes[..]);
        assert_eq!(memory.recall(&again_hashes, &mut again), [1]);
        assert_eq!(again[1], Message::user("[pruned]"));

        let mut other = fork.to_vec();
        assert!(memory.recall(&prefix_hashes(&fork), &mut other).is_empty());
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
    fn a_remembered_replacement_does_not_keep_its_request_alive() {
        let request =
            br#"[{"role": "user", "meta": {}, "name": null, "content": [{"text": "a long tool result"}]}]"#;
        let source = compaction_model::JsonSource::new(request.to_vec());
        let read = Message::read_prefix_in(&source, 1).expect("a message").message;
        let mut memory = Memory::new(4);
        memory.remember(7, read.clone());
        drop(read);
        assert!(source.into_bytes().is_ok(), "the memory holds no text of the request's bytes");
        let mut messages = vec![Message::user("x")];
        assert_eq!(memory.recall(&[7], &mut messages), [0]);
        assert_eq!(messages[0].to_value()["content"][0]["text"], "a long tool result");
    }

    #[test]
    fn the_oldest_replacements_are_forgotten_beyond_the_capacity() {
        let mut memory = Memory::new(2);
        for hash in 0..5 {
            memory.remember(hash, Message::user("[pruned]"));
        }
        assert_eq!(memory.len(), 2);
        let mut messages = vec![Message::user("x"); 5];
        assert_eq!(memory.recall(&[0, 1, 2, 3, 4], &mut messages), [3, 4]);
    }
}
