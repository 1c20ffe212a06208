//! The seam between deciding and writing: the writes an offloader needs ([`PendingWrite`]), and
//! committing them to a store, blocking ([`commit`]) or async ([`commit_async`]).
//!
//! The offload hook and compactor never write themselves. Their `plan` methods decide which
//! results go and return the writes that takes; the caller commits them to any store, in any
//! way, and hands the outcomes back to the plan's `finish`, which builds each pointer from the
//! reference the store gave. A result whose write failed stays in the conversation and is
//! reported. The `run`/`offload` methods are this sequence in one call.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::error::Error;
use crate::store::{AsyncToolResultStore, Content, StoreFuture, ToolResultStore};

/// What became of one pending write: the reference the store gave back, or why it failed.
pub type WriteOutcome = Result<String, Error>;

/// One store write an offloader needs: the key asked for and the content.
///
/// Text is borrowed from the conversation, not copied; an image's or file's bytes are decoded
/// from their base64 when the write is planned.
#[derive(Debug)]
pub struct PendingWrite<'a> {
    key: String,
    data: Data<'a>,
}

#[derive(Debug)]
enum Data<'a> {
    Text(&'a str),
    Bytes(Vec<u8>),
}

impl<'a> PendingWrite<'a> {
    pub(crate) fn text(key: String, text: &'a str) -> Self {
        PendingWrite { key, data: Data::Text(text) }
    }

    pub(crate) fn bytes(key: String, bytes: Vec<u8>) -> Self {
        PendingWrite { key, data: Data::Bytes(bytes) }
    }

    /// The key to write under. The store may choose another when it is taken; the pointer
    /// quotes the reference it gives back.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The content to write.
    pub fn content(&self) -> Content<'_> {
        match &self.data {
            Data::Text(text) => Content::Text(text),
            Data::Bytes(bytes) => Content::Bytes(bytes),
        }
    }
}

/// Commits `writes` to `store` one after another, blocking; the outcomes in the same order.
pub fn commit(writes: &[PendingWrite<'_>], store: &dyn ToolResultStore) -> Vec<WriteOutcome> {
    writes.iter().map(|write| store.write(write.key(), write.content())).collect()
}

/// Commits `writes` to `store` concurrently; the outcomes in the same order as `writes`.
pub async fn commit_async(
    writes: &[PendingWrite<'_>],
    store: &dyn AsyncToolResultStore,
) -> Vec<WriteOutcome> {
    let futures = writes.iter().map(|write| Some(store.write(write.key(), write.content()))).collect();
    JoinAll { futures, outcomes: writes.iter().map(|_| None).collect() }.await
}

/// Polls every write until all have answered.
struct JoinAll<'a> {
    futures: Vec<Option<StoreFuture<'a, String>>>,
    outcomes: Vec<Option<WriteOutcome>>,
}

impl Future for JoinAll<'_> {
    type Output = Vec<WriteOutcome>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        for (slot, outcome) in this.futures.iter_mut().zip(this.outcomes.iter_mut()) {
            if let Some(future) = slot {
                if let Poll::Ready(answer) = future.as_mut().poll(cx) {
                    *outcome = Some(answer);
                    *slot = None;
                }
            }
        }
        if this.futures.iter().any(Option::is_some) {
            return Poll::Pending;
        }
        Poll::Ready(this.outcomes.iter_mut().map(|o| o.take().unwrap_or_else(|| missing(""))).collect())
    }
}

/// The outcome of the write under `key` when none was handed back.
pub(crate) fn missing(key: &str) -> WriteOutcome {
    Err(Error::Store { key: key.to_owned(), source: "no outcome was handed back for this write".into() })
}
