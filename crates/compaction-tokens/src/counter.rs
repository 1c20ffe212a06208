//! The [`TokenCounter`] trait, and [`Additive`], the capability of a counter whose counts add up
//! message by message.

use std::fmt;

use compaction_model::{Message, ToolSpec};

use crate::ApproximateTokenCounter;

/// Measures how many tokens a conversation occupies.
///
/// A counter is object safe and `Send + Sync`, so it can be held as `&dyn TokenCounter` or
/// `Arc<dyn TokenCounter>`, shared between threads and swapped for another backend without
/// touching the code that uses it. Counters measure the text [`crate::rendered_text`] produces,
/// plus a flat charge per image and file.
///
/// A count depends on that rendering and those charges alone. What the rendering leaves out —
/// meta, call ids, the call a tool result answers apart from its tool name, reasoning — never
/// changes it, so a caller may count one message and reuse the count for another that renders
/// alike; the pruning compactor counts one placeholder per tool this way. An implementation of
/// this trait keeps that promise.
///
/// # Implementing a counter
///
/// Two methods are required: [`TokenCounter::try_count`] and [`TokenCounter::describe`]. A
/// counter whose backend counts many messages in one pass overrides
/// [`TokenCounter::try_count_each`]; a counter whose counts add up message by message (a local
/// tokenizer) implements [`Additive`] and returns itself from [`TokenCounter::additive`], which
/// lets callers count a growing or rewritten conversation at the cost of what changed. The other
/// methods are provided.
///
/// ```
/// use compaction_model::{Message, ToolSpec};
/// use compaction_tokens::{rendered_text, Error, TokenCounter};
///
/// /// One token a word of the rendering.
/// #[derive(Debug)]
/// struct Words;
///
/// impl TokenCounter for Words {
///     fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, Error> {
///         Ok(rendered_text(messages, tools).split_whitespace().count())
///     }
///
///     fn describe(&self) -> String {
///         "words".into()
///     }
/// }
///
/// // "[user] two words"
/// assert_eq!(Words.try_count(&[Message::user("two words")], &[])?, 3);
/// assert!(Words.additive().is_none());
/// # Ok::<(), Error>(())
/// ```
///
/// # Failures
///
/// The `try_` methods are the counts: a counter that asks a provider over the network returns
/// its failure there, and every caller that can report a failure (the compactors, the
/// compaction hook, the command line) counts through them. [`TokenCounter::count`] and
/// [`TokenCounter::count_each`] are conveniences for counters that cannot fail (every local
/// one): on a failure they return [`ApproximateTokenCounter::default`]'s estimate instead, and
/// the failure is lost, so code that must not take an estimate for a count never calls them.
pub trait TokenCounter: Send + Sync + fmt::Debug {
    /// Tokens that `messages`, sent with the tool schemas `tools`, occupy. `Ok(0)` when both are
    /// empty.
    ///
    /// # Errors
    ///
    /// [`Error::Provider`](crate::Error::Provider) when the count could not be had (a provider's
    /// counter); a local counter never fails.
    fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, crate::Error>;

    /// A short description such as `approximate:4` or `tiktoken:o200k_base`, for reports.
    fn describe(&self) -> String;

    /// Counts `messages` as a whole and each message on its own, in one pass where the backend
    /// allows it. `each[i]` equals `try_count(&messages[i..=i], &[])` and `total` equals
    /// `try_count(messages, &[])`. The default asks [`TokenCounter::try_count`] for each, and
    /// stops at the first failure.
    ///
    /// # Errors
    ///
    /// As [`TokenCounter::try_count`].
    fn try_count_each(&self, messages: &[Message]) -> Result<Counts, crate::Error> {
        let each = messages
            .iter()
            .map(|m| self.try_count(std::slice::from_ref(m), &[]))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Counts { total: self.try_count(messages, &[])?, each })
    }

    /// This counter's additive measuring, for a counter whose counts add up message by message;
    /// `None` (the default) for a counter that must see the whole text at once.
    fn additive(&self) -> Option<&dyn Additive> {
        None
    }

    /// Tokens of `messages` with some of them rewritten, sent with `tools`: equals `try_count` of
    /// the conversation in which `messages[i]` is `replacement` for every `(i, replacement)` of
    /// `rewritten` (indices in increasing order, each once; one out of range is ignored), without
    /// building that conversation.
    ///
    /// A compactor uses it to count what it made without copying the conversation. The default
    /// asks [`Additive::count_rewritten`] when the counts add up, and otherwise counts a copy. A
    /// counter that keeps the measures of a conversation (a running count) answers from them,
    /// measuring only the rewritten messages.
    ///
    /// # Errors
    ///
    /// As [`TokenCounter::try_count`].
    fn try_count_rewritten(
        &self,
        messages: &[Message],
        rewritten: &[(usize, &Message)],
        tools: &[ToolSpec],
    ) -> Result<usize, crate::Error> {
        if messages.is_empty() || rewritten.is_empty() {
            return self.try_count(messages, tools);
        }
        if let Some(additive) = self.additive() {
            return Ok(additive.count_rewritten(messages, rewritten, tools));
        }
        let copy: Vec<Message> =
            (0..messages.len()).map(|i| rewritten_at(messages, rewritten, i).clone()).collect();
        self.try_count(&copy, tools)
    }

    /// [`TokenCounter::try_count`], or [`ApproximateTokenCounter::default`]'s estimate when the
    /// count fails (the failure is lost). For counters that cannot fail; see the trait's
    /// "Failures".
    fn count(&self, messages: &[Message], tools: &[ToolSpec]) -> usize {
        self.try_count(messages, tools)
            .unwrap_or_else(|_| ApproximateTokenCounter::default().count(messages, tools))
    }

    /// [`TokenCounter::try_count_each`], or [`ApproximateTokenCounter::default`]'s estimates
    /// when a count fails (the failure is lost). For counters that cannot fail; see the trait's
    /// "Failures".
    fn count_each(&self, messages: &[Message]) -> Counts {
        self.try_count_each(messages)
            .unwrap_or_else(|_| ApproximateTokenCounter::default().count_each(messages))
    }
}

/// The measuring of a counter whose counts add up message by message (a local tokenizer, the
/// approximate counter), which [`TokenCounter::additive`] hands out.
///
/// Such a counter measures each message once, with the newline that joins it to the next, and
/// counts a conversation from the sum of its messages' measures and its last message: so a
/// caller that keeps the running sum for a conversation that only grows counts the whole
/// conversation by measuring just the new messages (see [`crate::RunningCount`]), and a
/// compactor counts what it made at the cost of the messages it rewrote. Measuring cannot fail.
///
/// Two methods are required, [`Additive::measure_joined`] and [`Additive::count_after`].
pub trait Additive: Send + Sync {
    /// What this counter measures of `message` when another message follows it (the joining
    /// newline included), in a form that adds up across messages.
    fn measure_joined(&self, message: &Message) -> Measure;

    /// Tokens of a conversation whose messages before the last add up to `before` (the sum of
    /// [`Additive::measure_joined`] over them), ending with `last`, sent with `tools`. Equals
    /// [`TokenCounter::try_count`] of the whole conversation.
    fn count_after(&self, before: Measure, last: &Message, tools: &[ToolSpec]) -> usize;

    /// Tokens of a message counted on its own, told from its joined measure alone, for a counter
    /// that can: then counting each message of a measured conversation costs no second look at
    /// any of them. `None` (the default) for a counter that must see the message again.
    fn count_alone(&self, joined: Measure) -> Option<usize> {
        let _ = joined;
        None
    }

    /// [`TokenCounter::try_count_each`] of `messages`, and the joined measure of every message but
    /// the last, from the same pass; the measures are `None` from a counter that answers the
    /// counts from elsewhere (a running count) without them. The default measures and counts
    /// message by message.
    fn count_each_measured(&self, messages: &[Message]) -> (Counts, Option<Vec<Measure>>) {
        let Some((last, rest)) = messages.split_last() else {
            return (Counts::default(), Some(Vec::new()));
        };
        let measures: Vec<Measure> = rest.iter().map(|m| self.measure_joined(m)).collect();
        let each = messages.iter().map(|m| self.count_after(Measure::default(), m, &[])).collect();
        let total = self.count_after(measures.iter().copied().sum(), last, &[]);
        (Counts { total, each }, Some(measures))
    }

    /// [`TokenCounter::try_count_rewritten`] for a non-empty `messages`, from the measures of the
    /// messages before the last (the rewritten ones in place of the originals) and the last.
    fn count_rewritten(
        &self,
        messages: &[Message],
        rewritten: &[(usize, &Message)],
        tools: &[ToolSpec],
    ) -> usize {
        let Some(last) = messages.len().checked_sub(1) else {
            return 0;
        };
        let before =
            (0..last).map(|index| self.measure_joined(rewritten_at(messages, rewritten, index))).sum();
        self.count_after(before, rewritten_at(messages, rewritten, last), tools)
    }
}

/// `messages[index]`, or its replacement in `rewritten` (sorted by index).
pub(crate) fn rewritten_at<'a>(
    messages: &'a [Message],
    rewritten: &[(usize, &'a Message)],
    index: usize,
) -> &'a Message {
    match rewritten.binary_search_by_key(&index, |(i, _)| *i) {
        Ok(at) => rewritten[at].1,
        Err(_) => &messages[index],
    }
}

/// An additive measurement of messages: text (characters or tokens, as the counter measures
/// it), and the images and files that carry a flat charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Measure {
    /// Text units: characters for the approximate counter, tokens for tiktoken.
    pub text: usize,
    /// Images.
    pub images: usize,
    /// Files.
    pub files: usize,
}

impl std::ops::Add for Measure {
    type Output = Measure;
    fn add(self, other: Measure) -> Measure {
        Measure {
            text: self.text + other.text,
            images: self.images + other.images,
            files: self.files + other.files,
        }
    }
}

impl std::ops::AddAssign for Measure {
    fn add_assign(&mut self, other: Measure) {
        *self = *self + other;
    }
}

impl std::iter::Sum for Measure {
    fn sum<I: Iterator<Item = Measure>>(iter: I) -> Measure {
        iter.fold(Measure::default(), |a, b| a + b)
    }
}

/// The result of [`TokenCounter::try_count_each`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Counts {
    /// Tokens of the whole conversation.
    pub total: usize,
    /// Tokens of each message counted on its own.
    pub each: Vec<usize>,
}

/// Forwards every method of [`TokenCounter`] to the counter behind a pointer, so that `&T`,
/// `Box<T>` and `Arc<T>` are counters wherever `T` is.
macro_rules! forward_token_counter {
    ($($pointer:ty),+) => {$(
        impl<T: TokenCounter + ?Sized> TokenCounter for $pointer {
            fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, crate::Error> {
                (**self).try_count(messages, tools)
            }
            fn describe(&self) -> String {
                (**self).describe()
            }
            fn try_count_each(&self, messages: &[Message]) -> Result<Counts, crate::Error> {
                (**self).try_count_each(messages)
            }
            fn additive(&self) -> Option<&dyn Additive> {
                (**self).additive()
            }
            fn try_count_rewritten(
                &self,
                messages: &[Message],
                rewritten: &[(usize, &Message)],
                tools: &[ToolSpec],
            ) -> Result<usize, crate::Error> {
                (**self).try_count_rewritten(messages, rewritten, tools)
            }
            fn count(&self, messages: &[Message], tools: &[ToolSpec]) -> usize {
                (**self).count(messages, tools)
            }
            fn count_each(&self, messages: &[Message]) -> Counts {
                (**self).count_each(messages)
            }
        }
    )+};
}

forward_token_counter!(&T, Box<T>, std::sync::Arc<T>);
