//! Counting a conversation that grows and is rewritten in place, without measuring it all again
//! at every step.

use std::ops::Range;

use compaction_model::{Message, ToolSpec};

use crate::counter::{Additive, Counts, Measure, TokenCounter};

/// The running measure of a conversation, for counters whose counts add up message by message
/// ([`TokenCounter::additive`] returns `Some`).
///
/// An agent loop appends messages, counts the whole conversation before every model call, and
/// now and then rewrites a few messages in place (a compaction). Counting from scratch makes a
/// long run quadratic. A `RunningCount` measures each message once: appended messages when they
/// are first counted, rewritten ones when the caller says which ([`RunningCount::rewritten`]).
/// It keeps each message's measure in a Fenwick tree, so the count of the whole conversation or
/// of any prefix of it costs a logarithm, not a walk; and each message's count on its own once it
/// has been asked for ([`RunningCount::own`]).
///
/// The caller promises that messages it has passed are unchanged, except those it names as
/// rewritten; after anything else (messages removed, inserted or reordered), call
/// [`RunningCount::clear`]. A counter whose counts do not add up is asked for the whole count
/// every time, through its infallible [`TokenCounter::count`]: the running count is for counters
/// that cannot fail.
///
/// ```
/// use compaction_model::Message;
/// use compaction_tokens::{ApproximateTokenCounter, RunningCount, TokenCounter};
///
/// let counter = ApproximateTokenCounter::default();
/// let mut messages = vec![Message::user("Hello")];
/// let mut running = RunningCount::default();
/// assert_eq!(running.count(&counter, &messages, &[]), counter.count(&messages, &[]));
/// messages.push(Message::assistant("Hi! How can I help?"));
/// assert_eq!(running.count(&counter, &messages, &[]), counter.count(&messages, &[]));
/// messages[0] = Message::user("Hello there, a longer greeting");
/// running.rewritten(&[0]);
/// assert_eq!(running.count(&counter, &messages, &[]), counter.count(&messages, &[]));
/// ```
#[derive(Debug, Clone, Default)]
pub struct RunningCount {
    /// Each measured message's joined measure, in order, as a Fenwick tree (1-based): prefix
    /// sums in a logarithm, and one message's measure as the difference of two (a long run
    /// holds millions of messages: the measures are not also kept one by one). This is the
    /// measures' text; their images and files are in `media`.
    tree: Vec<usize>,
    /// The images and files of the tree's nodes, by node; `None` while every measure so far has
    /// none, as a conversation of text has (two thirds of the memory).
    media: Option<Vec<[usize; 2]>>,
    /// Each measured message's count on its own once asked for, else [`UNKNOWN`].
    own: Vec<usize>,
    /// Messages rewritten since they were measured, to measure again before the next count.
    stale: Vec<usize>,
    /// The counter the measures were taken with.
    counter: Option<String>,
}

/// An own count not asked for yet (no message counts `usize::MAX` tokens).
const UNKNOWN: usize = usize::MAX;

impl RunningCount {
    /// Forgets everything measured, after the messages were rewritten other than in place.
    pub fn clear(&mut self) {
        *self = RunningCount::default();
    }

    /// How many leading messages are measured.
    pub fn measured(&self) -> usize {
        self.tree.len()
    }

    /// Notes that the messages at `indices` were rewritten in place: they are measured again
    /// (and their own counts forgotten) before the next count.
    pub fn rewritten(&mut self, indices: &[usize]) {
        for &index in indices {
            if index < self.tree.len() {
                self.stale.push(index);
                self.own[index] = UNKNOWN;
            }
        }
    }

    /// Tokens of `messages` sent with `tools`, equal to `counter.count(messages, tools)`,
    /// measuring only messages not measured before (and those rewritten since). Falls back to a
    /// full count for counters that do not add up, when the conversation got shorter, or when
    /// the counter changed.
    pub fn count(&mut self, counter: &dyn TokenCounter, messages: &[Message], tools: &[ToolSpec]) -> usize {
        self.count_range(counter, messages, 0..messages.len(), tools)
    }

    /// Tokens of the stretch `messages[range]` sent with `tools`, equal to
    /// `counter.count(&messages[range], tools)`, on the same terms as [`RunningCount::count`]:
    /// all of `messages` is kept measured, so any stretch costs a logarithm.
    pub fn count_range(
        &mut self,
        counter: &dyn TokenCounter,
        messages: &[Message],
        range: Range<usize>,
        tools: &[ToolSpec],
    ) -> usize {
        let range = range.start.min(messages.len())..range.end.min(messages.len());
        if range.is_empty() {
            return counter.count(&[], tools);
        }
        let Some(additive) = self.catch_up(counter, messages) else {
            return counter.count(&messages[range], tools);
        };
        let last = range.end - 1;
        let before = wrapping_sub(self.prefix_sum(last), self.prefix_sum(range.start));
        additive.count_after(before, &messages[last], tools)
    }

    /// Tokens of the stretch `messages[range]` with some of its messages rewritten, sent with
    /// `tools`: [`TokenCounter::try_count_rewritten`] of that stretch, `rewritten`'s indices counted
    /// from `range.start`. Only the rewritten messages are measured; the rest comes from the
    /// running measures, on the same terms as [`RunningCount::count`].
    ///
    /// A compaction that rewrites a few messages in place is counted this way before it is
    /// applied, at the cost of what it rewrites.
    pub fn count_rewritten_range(
        &mut self,
        counter: &dyn TokenCounter,
        messages: &[Message],
        range: Range<usize>,
        rewritten: &[(usize, &Message)],
        tools: &[ToolSpec],
    ) -> usize {
        let range = range.start.min(messages.len())..range.end.min(messages.len());
        if range.is_empty() || rewritten.is_empty() {
            return self.count_range(counter, messages, range, tools);
        }
        let Some(additive) = self.catch_up(counter, messages) else {
            let copy: Vec<Message> = (0..range.len())
                .map(|i| crate::counter::rewritten_at(&messages[range.clone()], rewritten, i).clone())
                .collect();
            return counter.count(&copy, tools);
        };
        let last = range.end - 1;
        let mut before = wrapping_sub(self.prefix_sum(last), self.prefix_sum(range.start));
        let mut last_message = &messages[last];
        for &(offset, message) in rewritten {
            match range.start.checked_add(offset) {
                Some(index) if index < last => {
                    let measure = additive.measure_joined(message);
                    before = wrapping_add(wrapping_sub(before, self.measure_at(index)), measure)
                }
                Some(index) if index == last => last_message = message,
                _ => {}
            }
        }
        additive.count_after(before, last_message, tools)
    }

    /// Tokens of `messages[index]` on its own (`counter.count(&messages[index..=index], &[])`),
    /// counted once and remembered until the message is rewritten.
    pub fn own(&mut self, counter: &dyn TokenCounter, messages: &[Message], index: usize) -> usize {
        let additive = match index < messages.len() {
            true => self.catch_up(counter, messages),
            false => None,
        };
        let Some(additive) = additive else {
            return messages.get(index).map_or(0, |m| counter.count(std::slice::from_ref(m), &[]));
        };
        if self.own[index] == UNKNOWN {
            self.own[index] = additive
                .count_alone(self.measure_at(index))
                .unwrap_or_else(|| counter.count(std::slice::from_ref(&messages[index]), &[]));
        }
        self.own[index]
    }

    /// [`TokenCounter::count_each`] of the stretch `messages[range]`. Own counts already known
    /// are reused; when most are missing they are asked for in one `count_each` (which a
    /// tokenizer spreads over every core).
    pub fn count_each_range(
        &mut self,
        counter: &dyn TokenCounter,
        messages: &[Message],
        range: Range<usize>,
    ) -> Counts {
        let range = range.start.min(messages.len())..range.end.min(messages.len());
        let additive = match range.is_empty() {
            true => None,
            false => self.catch_up(counter, messages),
        };
        let Some(additive) = additive else {
            return counter.count_each(&messages[range]);
        };
        let total = self.count_range(counter, messages, range.clone(), &[]);
        let missing: Vec<usize> = range.clone().filter(|&i| self.own[i] == UNKNOWN).collect();
        // A counter that tells a message's own count from its measure needs no second look.
        let told: Option<Vec<usize>> =
            missing.iter().map(|&i| additive.count_alone(self.measure_at(i))).collect();
        if let Some(told) = told {
            for (&index, count) in missing.iter().zip(told) {
                self.own[index] = count;
            }
        } else if missing.len() * 4 >= range.len() && !missing.is_empty() {
            let fresh = counter.count_each(&messages[range.clone()]).each;
            for (offset, count) in fresh.into_iter().enumerate() {
                self.own[range.start + offset] = count;
            }
        } else {
            for index in missing {
                self.own[index] = counter.count(std::slice::from_ref(&messages[index]), &[]);
            }
        }
        let each = self.own[range].iter().map(|&c| if c == UNKNOWN { 0 } else { c }).collect();
        Counts { total, each }
    }

    /// Brings the measures up to date with `messages`: measures appended and rewritten
    /// messages; the counter's additive measuring, or `None` when this counter cannot be
    /// counted incrementally (the caller counts the whole), after which nothing is kept.
    fn catch_up<'c>(
        &mut self,
        counter: &'c dyn TokenCounter,
        messages: &[Message],
    ) -> Option<&'c dyn Additive> {
        let Some(additive) = counter.additive() else {
            self.clear();
            return None;
        };
        let description = counter.describe();
        if self.counter.as_deref() != Some(description.as_str()) || self.tree.len() > messages.len() {
            *self = RunningCount { counter: Some(description), ..RunningCount::default() };
        }
        let stale = std::mem::take(&mut self.stale);
        for index in stale {
            let measure = additive.measure_joined(&messages[index]);
            let old = self.measure_at(index);
            self.add(index, measure, old);
        }
        let appended = &messages[self.tree.len()..];
        for measure in measure_all(additive, appended) {
            self.push(measure);
        }
        Some(additive)
    }

    /// Appends a message's measure to the tree.
    fn push(&mut self, measure: Measure) {
        self.own.push(UNKNOWN);
        // The new node covers the indices (i - lowbit(i), i]: its own measure plus the nodes
        // below it that end inside that range.
        let position = self.tree.len() + 1;
        let mut node = measure;
        let low = position & position.wrapping_neg();
        let mut child = 1;
        while child < low {
            node = wrapping_add(node, self.node(position - child - 1));
            child <<= 1;
        }
        if has_media(node) {
            self.hold_media();
        }
        self.tree.push(node.text);
        if let Some(media) = &mut self.media {
            media.push([node.images, node.files]);
        }
    }

    /// Node `at` of the tree (0-based), its images and files included.
    fn node(&self, at: usize) -> Measure {
        let [images, files] =
            self.media.as_ref().and_then(|media| media.get(at).copied()).unwrap_or_default();
        Measure { text: self.tree[at], images, files }
    }

    /// Sets node `at` of the tree (0-based): its images and files only when they are held (the
    /// caller holds them before it sets any).
    fn set_node(&mut self, at: usize, node: Measure) {
        self.tree[at] = node.text;
        if let Some(media) = self.media.as_mut().and_then(|media| media.get_mut(at)) {
            *media = [node.images, node.files];
        }
    }

    /// Holds the nodes' images and files from now on: all none so far.
    fn hold_media(&mut self) {
        if self.media.is_none() {
            self.media = Some(vec![[0, 0]; self.tree.len()]);
        }
    }

    /// Replaces measure `old` by `new` at `index` in the tree. Sums wrap: every prefix sum is a
    /// true count, so the wrapped arithmetic in between gives it exactly.
    fn add(&mut self, index: usize, new: Measure, old: Measure) {
        if has_media(new) || has_media(old) {
            self.hold_media();
        }
        let mut position = index + 1;
        while position <= self.tree.len() {
            let node = wrapping_add(wrapping_sub(self.node(position - 1), old), new);
            self.set_node(position - 1, node);
            position += position & position.wrapping_neg();
        }
    }

    /// The measure of message `index` (measured): what the tree adds for it.
    fn measure_at(&self, index: usize) -> Measure {
        wrapping_sub(self.prefix_sum(index + 1), self.prefix_sum(index))
    }

    /// The summed measure of the first `end` messages.
    fn prefix_sum(&self, end: usize) -> Measure {
        let mut sum = Measure::default();
        let mut position = end.min(self.tree.len());
        while position > 0 {
            sum = wrapping_add(sum, self.node(position - 1));
            position &= position - 1;
        }
        sum
    }
}

/// Every message's joined measure, in order: on all cores for a long conversation measured
/// the first time (a tokenizer's measure is its count), one by one for the few messages an
/// agent step appends.
fn measure_all(counter: &dyn Additive, messages: &[Message]) -> Vec<Measure> {
    #[cfg(any(feature = "tiktoken", feature = "huggingface"))]
    if messages.len() >= 256 {
        return crate::parallel::map(messages, crate::parallel::PARALLEL_THRESHOLD, |message| {
            counter.measure_joined(message)
        });
    }
    messages.iter().map(|message| counter.measure_joined(message)).collect()
}

/// Whether `measure` has images or files (wrapped sums included).
fn has_media(measure: Measure) -> bool {
    measure.images != 0 || measure.files != 0
}

fn wrapping_add(a: Measure, b: Measure) -> Measure {
    Measure {
        text: a.text.wrapping_add(b.text),
        images: a.images.wrapping_add(b.images),
        files: a.files.wrapping_add(b.files),
    }
}

fn wrapping_sub(a: Measure, b: Measure) -> Measure {
    Measure {
        text: a.text.wrapping_sub(b.text),
        images: a.images.wrapping_sub(b.images),
        files: a.files.wrapping_sub(b.files),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ApproximateTokenCounter;

    fn conversation(n: usize) -> Vec<Message> {
        (0..n).map(|i| Message::user("word ".repeat(i % 7 + 1))).collect()
    }

    #[test]
    fn prefixes_and_rewrites_count_as_from_scratch() {
        let counter = ApproximateTokenCounter::new(3.0).expect("valid");
        let mut messages = conversation(37);
        let mut running = RunningCount::default();
        for end in 0..=messages.len() {
            for start in [0, end / 2, end] {
                assert_eq!(
                    running.count_range(&counter, &messages, start..end, &[]),
                    counter.count(&messages[start..end], &[])
                );
            }
        }
        for (step, index) in [3, 0, 36, 17, 17, 8].into_iter().enumerate() {
            messages[index] = Message::assistant("x".repeat(step * 13 + 1));
            running.rewritten(&[index]);
            assert_eq!(running.count(&counter, &messages, &[]), counter.count(&messages, &[]));
            for end in [1, index + 1, messages.len()] {
                assert_eq!(
                    running.count_range(&counter, &messages, 0..end, &[]),
                    counter.count(&messages[..end], &[])
                );
            }
            assert_eq!(running.own(&counter, &messages, index), counter.count(&messages[index..=index], &[]));
        }
        messages.push(Message::user("one more"));
        assert_eq!(
            running.count_each_range(&counter, &messages, 30..38),
            counter.count_each(&messages[30..])
        );
        assert_eq!(running.count_each_range(&counter, &messages, 0..38), counter.count_each(&messages));
    }

    /// Memory (issue 31, item 13): each message's measure is read back from the tree, not kept
    /// apart, and stays the message's own through rewrites.
    #[test]
    fn each_measure_is_read_from_the_tree() {
        let counter = ApproximateTokenCounter::new(3.0).expect("valid");
        let mut messages = conversation(41);
        let mut running = RunningCount::default();
        running.count(&counter, &messages, &[]);
        for (step, index) in [40, 0, 17, 17, 31].into_iter().enumerate() {
            messages[index] = Message::user("y".repeat(step * 29 + 2));
            running.rewritten(&[index, index]);
            running.count(&counter, &messages, &[]);
            assert_eq!((running.tree.len(), running.own.len()), (messages.len(), messages.len()));
            for (i, message) in messages.iter().enumerate() {
                assert_eq!(
                    running.measure_at(i),
                    counter.measure_joined(message),
                    "message {i} after {step}"
                );
            }
        }
    }

    /// Memory (issue 31, item 13): a conversation of text keeps one number a message in the
    /// tree, its text; images and files are held once a measure has some, and count as from
    /// scratch through appends and rewrites that bring and take them away.
    #[test]
    fn images_and_files_are_held_only_once_a_message_has_some() {
        use compaction_model::{FilePart, ImagePart, Part, TextPart};
        let counter = ApproximateTokenCounter::new(3.0).expect("valid");
        let mut messages = conversation(29);
        let mut running = RunningCount::default();
        assert_eq!(running.count(&counter, &messages, &[]), counter.count(&messages, &[]));
        assert_eq!(std::mem::size_of_val(running.tree.as_slice()), 8 * messages.len());
        assert!(running.media.is_none());
        let with_image = |i: usize| {
            Message::user_parts(vec![
                Part::Text(TextPart::new(format!("look {i}"))),
                Part::Image(ImagePart::new("aGk=", Some("image/png".into()))),
            ])
        };
        let with_file = Message::user_parts(vec![Part::File(FilePart::new("aGk=", None, None))]);
        messages[11] = with_image(11);
        running.rewritten(&[11]);
        assert_eq!(running.count(&counter, &messages, &[]), counter.count(&messages, &[]));
        assert_eq!(running.media.as_ref().map(Vec::len), Some(messages.len()));
        messages.push(with_file.clone());
        messages.push(with_image(30));
        messages.extend(conversation(9));
        messages[11] = Message::user("no image now");
        running.rewritten(&[11]);
        for end in [1, 11, 12, 29, 30, 31, messages.len()] {
            for start in [0, 5, 12, end] {
                let start = start.min(end);
                assert_eq!(
                    running.count_range(&counter, &messages, start..end, &[]),
                    counter.count(&messages[start..end], &[]),
                    "{start}..{end}"
                );
            }
        }
        for (i, message) in messages.iter().enumerate() {
            assert_eq!(running.measure_at(i), counter.measure_joined(message), "message {i}");
        }
        let mut fresh = RunningCount::default();
        fresh.count(&counter, &conversation(3), &[]);
        fresh.count(&counter, &[conversation(3), vec![with_file.clone()]].concat(), &[]);
        assert_eq!((fresh.tree.len(), fresh.media.as_ref().map(Vec::len)), (4, Some(4)));
        // A first message with an image, and then more.
        let mut first = RunningCount::default();
        let mut messages = vec![with_image(0)];
        assert_eq!(first.count(&counter, &messages, &[]), counter.count(&messages, &[]));
        messages.extend([Message::user("and then"), with_file]);
        assert_eq!(first.count(&counter, &messages, &[]), counter.count(&messages, &[]));
        for (i, message) in messages.iter().enumerate() {
            assert_eq!(first.measure_at(i), counter.measure_joined(message), "message {i}");
        }
    }

    #[test]
    fn rewritten_stretches_count_as_the_rewritten_conversation() {
        let counter = ApproximateTokenCounter::new(3.0).expect("valid");
        let messages = conversation(23);
        let mut running = RunningCount::default();
        let long = Message::assistant("a much longer rewrite ".repeat(9));
        let short = Message::user("x");
        for rewrites in [vec![0], vec![22], vec![3, 9, 22], vec![0, 1, 2, 21], vec![5]] {
            let replacements: Vec<(usize, &Message)> = rewrites
                .iter()
                .enumerate()
                .map(|(n, &i)| (i, if n % 2 == 0 { &long } else { &short }))
                .collect();
            for range in [0..23, 0..10, 3..23, 5..6, 9..9] {
                let relative: Vec<(usize, &Message)> = replacements
                    .iter()
                    .filter(|(i, _)| range.contains(i))
                    .map(|&(i, m)| (i - range.start, m))
                    .collect();
                let mut copy = messages[range.clone()].to_vec();
                for &(i, m) in &relative {
                    copy[i] = m.clone();
                }
                for tools in
                    [&[][..], &[compaction_model::ToolSpec::new("t", "d", serde_json::json!({}))][..]]
                {
                    let expected = counter.count(&copy, tools);
                    assert_eq!(
                        running.count_rewritten_range(&counter, &messages, range.clone(), &relative, tools),
                        expected,
                        "{rewrites:?} in {range:?}"
                    );
                    assert_eq!(
                        counter.try_count_rewritten(&messages[range.clone()], &relative, tools).unwrap(),
                        expected
                    );
                }
            }
        }
    }

    #[test]
    fn counted_each_with_the_measures_of_all_but_the_last() {
        let counter = ApproximateTokenCounter::new(3.0).expect("valid");
        for len in [0, 1, 2, 9] {
            let messages = conversation(len);
            let (counts, measures) = counter.count_each_measured(&messages);
            assert_eq!(counts, counter.count_each(&messages));
            let joined: Vec<Measure> =
                messages.iter().take(len.saturating_sub(1)).map(|m| counter.measure_joined(m)).collect();
            assert_eq!(measures, Some(joined));
        }
    }

    #[test]
    fn a_message_alone_is_counted_from_its_measure() {
        use compaction_model::{FilePart, ImagePart, Part, TextPart, ToolCall};
        let image = || Part::Image(ImagePart::new("AAAA", Some("image/png".into())));
        let file = || Part::File(FilePart::new("AAAA", None, Some("a.pdf".into())));
        let call = ToolCall::new("read", serde_json::from_str(r#"{"path": "é/x", "n": [1, 2.5]}"#).unwrap());
        let messages = vec![
            Message::user(""),
            Message::user("x"),
            Message::user("seven c"),
            Message::user_parts(vec![image(), Part::Text(TextPart::new("look at ünïcode")), image(), file()]),
            Message::assistant_with_calls(Some("calling".into()), vec![call.clone()]),
            Message::tool("a result\nwith lines", call, false),
        ];
        for counter in [
            ApproximateTokenCounter::default(),
            ApproximateTokenCounter::new(3.0).expect("valid"),
            ApproximateTokenCounter::new(2.7).expect("valid").with_charges(7, 11),
        ] {
            for message in &messages {
                let joined = counter.measure_joined(message);
                let alone = counter.count(std::slice::from_ref(message), &[]);
                assert_eq!(counter.count_alone(joined), Some(alone), "{message:?}");
            }
            let mut running = RunningCount::default();
            assert_eq!(running.count_each_range(&counter, &messages, 0..6), counter.count_each(&messages));
        }
    }

    #[test]
    fn a_shorter_conversation_starts_over() {
        let counter = ApproximateTokenCounter::default();
        let messages = conversation(10);
        let mut running = RunningCount::default();
        running.count(&counter, &messages, &[]);
        assert_eq!(running.count(&counter, &messages[..4], &[]), counter.count(&messages[..4], &[]));
        assert_eq!(running.measured(), 4);
    }
}
