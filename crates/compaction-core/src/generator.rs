//! The seam to a chat model, for strategies that ask one to write (such as a summary).
//!
//! This crate does no I/O: it only says what a model call takes and gives. The clients that
//! talk to a provider live in their own crate (compaction-llm) and implement these traits; a
//! test can implement them with a closure-like stand-in. A strategy that needs a model exposes a
//! step API (the next request, then the reply) so that the caller drives the call, sync or
//! async; [`ChatGenerator`] and [`AsyncChatGenerator`] are the conveniences over that.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use compaction_model::Message;

/// Why a model call failed: the client's own error, kept whole as the source.
pub type GeneratorError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A future returned by [`AsyncChatGenerator::generate`].
pub type GenerateFuture<'a> = Pin<Box<dyn Future<Output = Result<Message, GeneratorError>> + Send + 'a>>;

/// A chat model that answers a conversation with one reply, blocking the calling thread.
///
/// Use it from synchronous code. An async agent uses [`AsyncChatGenerator`] instead, or drives a
/// strategy's step API itself, so that no runtime thread ever blocks on the network.
pub trait ChatGenerator: Send + Sync + fmt::Debug {
    /// The model's reply to `messages` (oldest first): an assistant message.
    ///
    /// # Errors
    ///
    /// Whatever kept the call from returning a reply (transport, provider, decoding).
    fn generate(&self, messages: &[Message]) -> Result<Message, GeneratorError>;
}

/// A chat model that answers a conversation with one reply, asynchronously.
///
/// Object safe: the future is boxed, so a strategy can hold `&dyn AsyncChatGenerator`.
pub trait AsyncChatGenerator: Send + Sync + fmt::Debug {
    /// The model's reply to `messages` (oldest first): an assistant message.
    ///
    /// # Errors
    ///
    /// Whatever kept the call from returning a reply (transport, provider, decoding).
    fn generate<'a>(&'a self, messages: &'a [Message]) -> GenerateFuture<'a>;
}

impl<T: ChatGenerator + ?Sized> ChatGenerator for &T {
    fn generate(&self, messages: &[Message]) -> Result<Message, GeneratorError> {
        (**self).generate(messages)
    }
}

impl<T: ChatGenerator + ?Sized> ChatGenerator for std::sync::Arc<T> {
    fn generate(&self, messages: &[Message]) -> Result<Message, GeneratorError> {
        (**self).generate(messages)
    }
}

impl<T: ChatGenerator + ?Sized> ChatGenerator for Box<T> {
    fn generate(&self, messages: &[Message]) -> Result<Message, GeneratorError> {
        (**self).generate(messages)
    }
}

impl<T: AsyncChatGenerator + ?Sized> AsyncChatGenerator for &T {
    fn generate<'a>(&'a self, messages: &'a [Message]) -> GenerateFuture<'a> {
        (**self).generate(messages)
    }
}

impl<T: AsyncChatGenerator + ?Sized> AsyncChatGenerator for std::sync::Arc<T> {
    fn generate<'a>(&'a self, messages: &'a [Message]) -> GenerateFuture<'a> {
        (**self).generate(messages)
    }
}

impl<T: AsyncChatGenerator + ?Sized> AsyncChatGenerator for Box<T> {
    fn generate<'a>(&'a self, messages: &'a [Message]) -> GenerateFuture<'a> {
        (**self).generate(messages)
    }
}
