//! A Python counter handed the caller's own `ChatMessage` objects, as Haystack's compactors hand
//! theirs: [`ObjectCounter`].
//!
//! Rust counts selections and rewrites of the conversation it read from the caller's objects.
//! Each message of a count that is one of those it read (by address, or else equal to the next
//! one of them) is passed as the caller's object at that position; only a message Rust made (a
//! pruned result's stand-in, a rewritten call, a note) is built, with `build`'s constructors, or
//! from its JSON through `ChatMessage.from_dict` when `build` leaves it. No JSON text is written
//! or parsed for the caller's messages, so a count costs what Haystack's does.

use compaction_model::{messages_to_value, Message, ToolSpec};
use compaction_tokens::TokenCounter;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::build;
use crate::convert::Classes;

/// A Python counter called with `ChatMessage` objects: `count_messages(list)` returns the count
/// (the package's Python half wraps the user's `counter.count(messages=...)`). `objects` is the
/// caller's list, which Rust read as `originals`; `classes` as `convert` takes them. An exception
/// `count_messages` raises is the count's error ([`compaction_tokens::Error::Provider`], the
/// exception as its source), which [`crate::python_error`] finds again to raise it.
#[derive(Debug)]
pub(crate) struct ObjectCounter<'a> {
    pub(crate) originals: &'a [Message],
    pub(crate) objects: Py<PyAny>,
    pub(crate) classes: Py<PyTuple>,
    pub(crate) count_messages: Py<PyAny>,
}

/// One message of a count: the caller's object at an index, or a message Rust made.
enum Item<'m> {
    Own(usize),
    Made(&'m Message),
}

impl ObjectCounter<'_> {
    /// The index in `originals` of `message`, by address, else of the first original equal to it
    /// from `next` on (a count takes the conversation's messages in order); `next` moves past it.
    fn position(&self, message: &Message, next: &mut usize) -> Option<usize> {
        let size = std::mem::size_of::<Message>();
        let offset = (std::ptr::from_ref(message) as usize).wrapping_sub(self.originals.as_ptr() as usize);
        let at = if size > 0 && offset % size == 0 && offset / size < self.originals.len() {
            offset / size
        } else {
            *next + self.originals.get(*next..)?.iter().position(|original| original == message)?
        };
        *next = at + 1;
        Some(at)
    }

    /// `items` as `ChatMessage` objects, counted by `count_messages`.
    fn count_items(&self, items: &[Item<'_>]) -> Result<usize, compaction_tokens::Error> {
        Python::attach(|py| {
            let objects = self.objects.bind(py);
            let classes = Classes::from_tuple(self.classes.bind(py))?;
            let list = PyList::empty(py);
            for item in items {
                match item {
                    Item::Own(at) => list.append(objects.get_item(*at)?)?,
                    Item::Made(message) => list.append(made_object(py, message, &classes)?)?,
                }
            }
            self.count_messages.call1(py, (list,))?.extract::<usize>(py)
        })
        .map_err(|error| compaction_tokens::Error::Provider {
            counter: self.describe(),
            source: Box::new(error),
        })
    }
}

/// A message Rust made, as a new `ChatMessage`: built directly, or (when `build` leaves it, for an
/// image or a file) through `ChatMessage.from_dict` of its JSON, which validates it as Haystack
/// does.
fn made_object<'py>(
    py: Python<'py>,
    message: &Message,
    classes: &Classes<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    if let Some(built) = build::message_object(py, message, None, classes)? {
        return Ok(built);
    }
    let text = serde_json::to_string(&messages_to_value(std::slice::from_ref(message)))
        .map_err(|e| PyValueError::new_err(format!("could not write a message as JSON: {e}")))?;
    let dicts = py.import(pyo3::intern!(py, "json"))?.call_method1(pyo3::intern!(py, "loads"), (text,))?;
    classes.chat_message.call_method1(pyo3::intern!(py, "from_dict"), (dicts.get_item(0)?,))
}

impl TokenCounter for ObjectCounter<'_> {
    fn try_count(
        &self,
        messages: &[Message],
        _tools: &[ToolSpec],
    ) -> Result<usize, compaction_tokens::Error> {
        if messages.is_empty() {
            return Ok(0);
        }
        let mut next = 0;
        let items: Vec<Item<'_>> = messages
            .iter()
            .map(|message| self.position(message, &mut next).map_or(Item::Made(message), Item::Own))
            .collect();
        self.count_items(&items)
    }

    fn try_count_rewritten(
        &self,
        messages: &[Message],
        rewritten: &[(usize, &Message)],
        tools: &[ToolSpec],
    ) -> Result<usize, compaction_tokens::Error> {
        if messages.is_empty() || rewritten.is_empty() {
            return self.try_count(messages, tools);
        }
        // Not the default's copy of the conversation: its copies would be found by comparing.
        let mut next = 0;
        let mut replacements = rewritten.iter().peekable();
        let items: Vec<Item<'_>> = messages
            .iter()
            .enumerate()
            .map(|(index, message)| {
                while replacements.next_if(|(at, _)| *at < index).is_some() {}
                match replacements.next_if(|(at, _)| *at == index) {
                    Some((_, replacement)) => Item::Made(replacement),
                    None => self.position(message, &mut next).map_or(Item::Made(message), Item::Own),
                }
            })
            .collect();
        self.count_items(&items)
    }

    fn describe(&self) -> String {
        "python".to_owned()
    }
}
