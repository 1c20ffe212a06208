//! Chat generators: a conversation in, the model's reply out, over Chat Completions or
//! Anthropic's Messages API, blocking or async.

#[cfg(feature = "blocking")]
use compaction_core::ChatGenerator;
#[cfg(any(feature = "blocking", feature = "async"))]
use compaction_core::GeneratorError;
#[cfg(feature = "async")]
use compaction_core::{AsyncChatGenerator, GenerateFuture};
use compaction_model::{JsonObject, Message};
use serde_json::Value;

use crate::client::Client;
use crate::error::Error;
use crate::provider::Provider;
use crate::retry::Target;
use crate::settings::ClientSettings;
use crate::{anthropic, openai};

/// Anthropic's API requires `max_tokens`; this is ours unless the generator is told otherwise.
pub const DEFAULT_ANTHROPIC_MAX_TOKENS: u32 = 4096;

/// A chat model behind OpenAI's Chat Completions API (`POST {base_url}/chat/completions`):
/// OpenAI itself or any compatible server.
///
/// Implements [`ChatGenerator`] (feature `blocking`) and [`AsyncChatGenerator`] (feature `async`).
#[derive(Debug, Clone)]
pub struct OpenAIChatGenerator {
    client: Client,
    model: String,
    generation_kwargs: JsonObject,
}

impl OpenAIChatGenerator {
    /// A generator for `model`. The key comes from the settings or `OPENAI_API_KEY`.
    ///
    /// # Errors
    ///
    /// [`Error::MissingApiKey`], [`Error::InvalidBaseUrl`], or [`Error::Client`] when TLS cannot be set up.
    pub fn new(model: impl Into<String>, settings: ClientSettings) -> Result<Self, Error> {
        Ok(OpenAIChatGenerator {
            client: Client::new(Provider::OpenAI, settings)?,
            model: model.into(),
            generation_kwargs: JsonObject::new(),
        })
    }

    /// The same generator sending these request fields too (`temperature`,
    /// `max_completion_tokens`, `seed`, ...). `model` and `messages` are never overridden.
    #[must_use]
    pub fn with_generation_kwargs(mut self, kwargs: JsonObject) -> Self {
        self.generation_kwargs = kwargs;
        self
    }

    /// The model asked.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The base URL posted to (without `/chat/completions`).
    pub fn base_url(&self) -> &str {
        self.client.base_url()
    }

    fn prepare(&self, messages: &[Message]) -> Result<(Target, Value), Error> {
        let body = openai::request(&self.model, messages, &self.generation_kwargs)?;
        Ok((self.client.target("/chat/completions", &self.model), body))
    }

    /// The reply to `messages`, blocking the calling thread.
    ///
    /// # Errors
    ///
    /// A message the API cannot take, or a failed call ([`Error::Status`], [`Error::Timeout`],
    /// [`Error::Transport`], [`Error::MalformedReply`], [`Error::UnexpectedReply`]).
    #[cfg(feature = "blocking")]
    pub fn generate_blocking(&self, messages: &[Message]) -> Result<Message, Error> {
        let (target, body) = self.prepare(messages)?;
        self.client.post(&target, &body, openai::reply)
    }

    /// The reply to `messages`, without blocking the runtime (needs tokio, with time enabled).
    ///
    /// # Errors
    ///
    /// As [`OpenAIChatGenerator::generate_blocking`].
    #[cfg(feature = "async")]
    pub async fn generate_async(&self, messages: &[Message]) -> Result<Message, Error> {
        let (target, body) = self.prepare(messages)?;
        self.client.post_async(&target, &body, openai::reply).await
    }
}

/// A Claude model behind Anthropic's Messages API (`POST {base_url}/v1/messages`).
///
/// Implements [`ChatGenerator`] (feature `blocking`) and [`AsyncChatGenerator`] (feature `async`).
#[derive(Debug, Clone)]
pub struct AnthropicChatGenerator {
    client: Client,
    model: String,
    max_tokens: u32,
    generation_kwargs: JsonObject,
}

impl AnthropicChatGenerator {
    /// A generator for `model`. The key comes from the settings or `ANTHROPIC_API_KEY`.
    ///
    /// # Errors
    ///
    /// [`Error::MissingApiKey`], [`Error::InvalidBaseUrl`], or [`Error::Client`] when TLS cannot be set up.
    pub fn new(model: impl Into<String>, settings: ClientSettings) -> Result<Self, Error> {
        Ok(AnthropicChatGenerator {
            client: Client::new(Provider::Anthropic, settings)?,
            model: model.into(),
            max_tokens: DEFAULT_ANTHROPIC_MAX_TOKENS,
            generation_kwargs: JsonObject::new(),
        })
    }

    /// The same generator with a reply limit ([`DEFAULT_ANTHROPIC_MAX_TOKENS`] otherwise).
    #[must_use]
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// The same generator sending these request fields too (`temperature`, `thinking`, ...).
    /// `model`, `system` and `messages` are never overridden; `max_tokens` here wins over
    /// [`AnthropicChatGenerator::with_max_tokens`].
    #[must_use]
    pub fn with_generation_kwargs(mut self, kwargs: JsonObject) -> Self {
        self.generation_kwargs = kwargs;
        self
    }

    /// The model asked.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The base URL posted to (without `/v1/messages`).
    pub fn base_url(&self) -> &str {
        self.client.base_url()
    }

    fn prepare(&self, messages: &[Message]) -> Result<(Target, Value), Error> {
        let body = anthropic::request(&self.model, self.max_tokens, messages, &self.generation_kwargs)?;
        Ok((self.client.target("/v1/messages", &self.model), body))
    }

    /// The reply to `messages`, blocking the calling thread.
    ///
    /// # Errors
    ///
    /// As [`OpenAIChatGenerator::generate_blocking`].
    #[cfg(feature = "blocking")]
    pub fn generate_blocking(&self, messages: &[Message]) -> Result<Message, Error> {
        let (target, body) = self.prepare(messages)?;
        self.client.post(&target, &body, anthropic::reply)
    }

    /// The reply to `messages`, without blocking the runtime (needs tokio, with time enabled).
    ///
    /// # Errors
    ///
    /// As [`OpenAIChatGenerator::generate_blocking`].
    #[cfg(feature = "async")]
    pub async fn generate_async(&self, messages: &[Message]) -> Result<Message, Error> {
        let (target, body) = self.prepare(messages)?;
        self.client.post_async(&target, &body, anthropic::reply).await
    }
}

/// A generator for whichever provider was named: what [`generator_from_provider`](crate::generator_from_provider)
/// builds for the command line.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ProviderChatGenerator {
    /// Chat Completions.
    OpenAI(OpenAIChatGenerator),
    /// Anthropic Messages.
    Anthropic(AnthropicChatGenerator),
}

impl ProviderChatGenerator {
    /// The provider.
    pub fn provider(&self) -> Provider {
        match self {
            ProviderChatGenerator::OpenAI(_) => Provider::OpenAI,
            ProviderChatGenerator::Anthropic(_) => Provider::Anthropic,
        }
    }

    /// The model asked.
    pub fn model(&self) -> &str {
        match self {
            ProviderChatGenerator::OpenAI(g) => g.model(),
            ProviderChatGenerator::Anthropic(g) => g.model(),
        }
    }

    /// The same generator sending these request fields too.
    #[must_use]
    pub fn with_generation_kwargs(self, kwargs: JsonObject) -> Self {
        match self {
            ProviderChatGenerator::OpenAI(g) => {
                ProviderChatGenerator::OpenAI(g.with_generation_kwargs(kwargs))
            }
            ProviderChatGenerator::Anthropic(g) => {
                ProviderChatGenerator::Anthropic(g.with_generation_kwargs(kwargs))
            }
        }
    }

    /// The reply to `messages`, blocking the calling thread.
    ///
    /// # Errors
    ///
    /// As [`OpenAIChatGenerator::generate_blocking`].
    #[cfg(feature = "blocking")]
    pub fn generate_blocking(&self, messages: &[Message]) -> Result<Message, Error> {
        match self {
            ProviderChatGenerator::OpenAI(g) => g.generate_blocking(messages),
            ProviderChatGenerator::Anthropic(g) => g.generate_blocking(messages),
        }
    }

    /// The reply to `messages`, without blocking the runtime.
    ///
    /// # Errors
    ///
    /// As [`OpenAIChatGenerator::generate_blocking`].
    #[cfg(feature = "async")]
    pub async fn generate_async(&self, messages: &[Message]) -> Result<Message, Error> {
        match self {
            ProviderChatGenerator::OpenAI(g) => g.generate_async(messages).await,
            ProviderChatGenerator::Anthropic(g) => g.generate_async(messages).await,
        }
    }
}

macro_rules! generator_traits {
    ($($ty:ty),*) => {$(
        #[cfg(feature = "blocking")]
        impl ChatGenerator for $ty {
            fn generate(&self, messages: &[Message]) -> Result<Message, GeneratorError> {
                self.generate_blocking(messages).map_err(GeneratorError::from)
            }
        }

        #[cfg(feature = "async")]
        impl AsyncChatGenerator for $ty {
            fn generate<'a>(&'a self, messages: &'a [Message]) -> GenerateFuture<'a> {
                Box::pin(async move { self.generate_async(messages).await.map_err(GeneratorError::from) })
            }
        }
    )*};
}

generator_traits!(OpenAIChatGenerator, AnthropicChatGenerator, ProviderChatGenerator);
