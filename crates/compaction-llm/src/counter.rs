//! Token counters that ask the provider: OpenAI's `POST /responses/input_tokens` and Anthropic's
//! `POST /v1/messages/count_tokens`.
//!
//! Both implement [`TokenCounter`](compaction_tokens::TokenCounter) (feature `blocking`): `try_count`
//! and `try_count_each` report a failed call as
//! [`compaction_tokens::Error::Provider`] with this crate's [`Error`] as the source. `count` and
//! `count_each` are the trait's provided ones: on failure they return
//! [`ApproximateTokenCounter`](compaction_tokens::ApproximateTokenCounter)'s estimate
//! (characters / 4) and the failure is lost, so every caller that can report a failure (the
//! compactors, the hook, the command line) counts through `try_count`. Nothing is cached: every
//! count asks.
//!
//! A provider answers with one number per request, so counting each message on its own takes a
//! request per message (plus one for the whole). Messages that would send the same request are
//! asked about once, and up to [`ClientSettings::max_concurrent_requests`] requests run at once.

use std::collections::HashMap;

use compaction_model::{Message, ToolSpec};
use compaction_tokens::Counts;
#[cfg(feature = "blocking")]
use compaction_tokens::TokenCounter;
use serde_json::{json, Value};

use crate::client::Client;
use crate::error::Error;
use crate::provider::Provider;
use crate::retry::Target;
use crate::settings::ClientSettings;
use crate::{anthropic, responses};

/// Counts with OpenAI's input-token counting API, `POST {base_url}/responses/input_tokens`: the
/// exact number of input tokens the model will bill for these messages and tools, images and
/// files included.
///
/// Messages are sent as the reference's `OpenAITokenCounter` sends them (see
/// [`to_responses_input`](crate::to_responses_input)). When `count` cannot get a number it logs
/// a warning and returns the approximate estimate (characters / 4); `try_count` says why.
#[derive(Debug, Clone)]
pub struct OpenAITokenCounter {
    client: Client,
    model: String,
}

/// Counts with Anthropic's token counting API, `POST {base_url}/v1/messages/count_tokens`.
///
/// Messages are sent as [`to_anthropic_messages`](crate::to_anthropic_messages) converts them.
/// When `count` cannot get a number it logs a warning and returns the approximate estimate
/// (characters / 4); `try_count` says why.
#[derive(Debug, Clone)]
pub struct AnthropicTokenCounter {
    client: Client,
    model: String,
}

fn input_tokens(reply: &Value) -> Result<usize, String> {
    reply
        .get("input_tokens")
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| "no whole number `input_tokens` in the reply".to_owned())
}

/// What the two counters share: building a request, and the path it goes to.
trait Endpoint: Sync {
    fn client(&self) -> &Client;
    fn model(&self) -> &str;
    fn path(&self) -> &'static str;
    fn body(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<Value, Error>;

    fn target(&self) -> Target {
        self.client().target(self.path(), self.model())
    }

    /// The distinct request bodies for counting each message alone, and which one each message uses.
    fn each_bodies(&self, messages: &[Message]) -> Result<(Vec<Value>, Vec<usize>), Error> {
        let mut distinct: Vec<Value> = Vec::new();
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut which = Vec::with_capacity(messages.len());
        for (index, message) in messages.iter().enumerate() {
            let body = self.body(std::slice::from_ref(message), &[]).map_err(|e| reindex(e, index))?;
            let key = body.to_string();
            let slot = *seen.entry(key).or_insert_with(|| {
                distinct.push(body);
                distinct.len() - 1
            });
            which.push(slot);
        }
        Ok((distinct, which))
    }

    #[cfg(feature = "blocking")]
    fn count_blocking(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, Error> {
        if messages.is_empty() && tools.is_empty() {
            return Ok(0);
        }
        let body = self.body(messages, tools)?;
        self.client().post(&self.target(), &body, input_tokens)
    }

    #[cfg(feature = "blocking")]
    fn count_each_blocking(&self, messages: &[Message]) -> Result<Counts, Error> {
        if messages.is_empty() {
            return Ok(Counts::default());
        }
        let (mut bodies, which) = self.each_bodies(messages)?;
        bodies.push(self.body(messages, &[])?);
        let target = self.target();
        let client = self.client();
        let mut counts = run_bounded(bodies.len(), client.settings().max_concurrent_requests, |i| {
            client.post(&target, &bodies[i], input_tokens)
        })?;
        let total = counts.pop().unwrap_or_default();
        Ok(Counts { total, each: which.into_iter().map(|slot| counts[slot]).collect() })
    }

    #[cfg(feature = "async")]
    async fn count_async(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, Error> {
        if messages.is_empty() && tools.is_empty() {
            return Ok(0);
        }
        let body = self.body(messages, tools)?;
        self.client().post_async(&self.target(), &body, input_tokens).await
    }

    #[cfg(feature = "async")]
    async fn count_each_async(&self, messages: &[Message]) -> Result<Counts, Error> {
        if messages.is_empty() {
            return Ok(Counts::default());
        }
        let (mut bodies, which) = self.each_bodies(messages)?;
        bodies.push(self.body(messages, &[])?);
        let target = self.target();
        let client = self.client();
        let calls = bodies.iter().map(|body| client.post_async(&target, body, input_tokens)).collect();
        let results = crate::join::join_bounded(calls, client.settings().max_concurrent_requests).await;
        let mut counts = results.into_iter().collect::<Result<Vec<_>, _>>()?;
        let total = counts.pop().unwrap_or_default();
        Ok(Counts { total, each: which.into_iter().map(|slot| counts[slot]).collect() })
    }
}

/// A conversion error of a message counted alone carries index 0; give it its real index.
fn reindex(error: Error, index: usize) -> Error {
    match error {
        Error::UnsupportedMessage { provider, reason, .. } => {
            Error::UnsupportedMessage { provider, index, reason }
        }
        other => other,
    }
}

/// Runs `job(0..n)` on up to `limit` threads: every result in order, or the first error (by
/// index). Workers stop taking jobs after a failure.
#[cfg(feature = "blocking")]
fn run_bounded<T: Send, E: Send>(
    n: usize,
    limit: usize,
    job: impl Fn(usize) -> Result<T, E> + Sync,
) -> Result<Vec<T>, E> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Mutex, PoisonError};

    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<Option<Result<T, E>>>> = Mutex::new((0..n).map(|_| None).collect());
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n || failed.load(Ordering::Relaxed) {
            break;
        }
        let result = job(i);
        if result.is_err() {
            failed.store(true, Ordering::Relaxed);
        }
        results.lock().unwrap_or_else(PoisonError::into_inner)[i] = Some(result);
    };
    let workers = limit.clamp(1, n.max(1));
    if workers == 1 {
        work();
    } else {
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(work);
            }
        });
    }
    let mut values = Vec::with_capacity(n);
    let mut first_error = None;
    for result in results.into_inner().unwrap_or_else(PoisonError::into_inner) {
        match result {
            Some(Ok(value)) => values.push(value),
            Some(Err(error)) => {
                first_error.get_or_insert(error);
            }
            // Only jobs after a failure are left untaken.
            None => {}
        }
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(values),
    }
}

impl Endpoint for OpenAITokenCounter {
    fn client(&self) -> &Client {
        &self.client
    }
    fn model(&self) -> &str {
        &self.model
    }
    fn path(&self) -> &'static str {
        "/responses/input_tokens"
    }
    fn body(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<Value, Error> {
        let mut body = json!({"model": self.model, "input": responses::to_responses_input(messages)?});
        if !tools.is_empty() {
            body["tools"] = Value::Array(responses::tools(tools));
        }
        Ok(body)
    }
}

impl Endpoint for AnthropicTokenCounter {
    fn client(&self) -> &Client {
        &self.client
    }
    fn model(&self) -> &str {
        &self.model
    }
    fn path(&self) -> &'static str {
        "/v1/messages/count_tokens"
    }
    fn body(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<Value, Error> {
        anthropic::count_request(&self.model, messages, tools)
    }
}

macro_rules! counter_api {
    ($ty:ident, $provider:expr, $variable:literal) => {
        impl $ty {
            #[doc = concat!("A counter for `model`. The key comes from the settings or `", $variable, "`.")]
            ///
            /// # Errors
            ///
            /// [`Error::MissingApiKey`], [`Error::InvalidBaseUrl`], or [`Error::Client`].
            pub fn new(model: impl Into<String>, settings: ClientSettings) -> Result<Self, Error> {
                Ok($ty { client: Client::new($provider, settings)?, model: model.into() })
            }

            /// The model whose tokenizer counts.
            pub fn model(&self) -> &str {
                &self.model
            }

            /// The request this counter sends for `messages` and `tools`.
            ///
            /// # Errors
            ///
            /// [`Error::UnsupportedMessage`] for a message the API cannot take.
            pub fn request_body(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<Value, Error> {
                self.body(messages, tools)
            }

            /// Tokens of `messages` sent with `tools`, asked of the provider; `0` for nothing,
            /// without a request.
            ///
            /// # Errors
            ///
            /// A message the API cannot take, or a failed call.
            #[cfg(feature = "blocking")]
            pub fn count_blocking(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, Error> {
                Endpoint::count_blocking(self, messages, tools)
            }

            /// The whole and each message alone, asked of the provider.
            ///
            /// # Errors
            ///
            /// A message the API cannot take, or a failed call.
            #[cfg(feature = "blocking")]
            pub fn count_each_blocking(&self, messages: &[Message]) -> Result<Counts, Error> {
                Endpoint::count_each_blocking(self, messages)
            }

            /// [`Self::count_blocking`] without blocking the runtime (needs tokio, with time enabled).
            ///
            /// # Errors
            ///
            /// A message the API cannot take, or a failed call.
            #[cfg(feature = "async")]
            pub async fn count_async(
                &self,
                messages: &[Message],
                tools: &[ToolSpec],
            ) -> Result<usize, Error> {
                Endpoint::count_async(self, messages, tools).await
            }

            /// [`Self::count_each_blocking`] without blocking the runtime; requests run concurrently.
            ///
            /// # Errors
            ///
            /// A message the API cannot take, or a failed call.
            #[cfg(feature = "async")]
            pub async fn count_each_async(&self, messages: &[Message]) -> Result<Counts, Error> {
                Endpoint::count_each_async(self, messages).await
            }
        }

        #[cfg(feature = "blocking")]
        impl compaction_tokens::TokenCounter for $ty {
            fn describe(&self) -> String {
                format!("{}:{}", $provider, self.model)
            }

            fn try_count(
                &self,
                messages: &[Message],
                tools: &[ToolSpec],
            ) -> Result<usize, compaction_tokens::Error> {
                Endpoint::count_blocking(self, messages, tools).map_err(|e| self.provider_error(e))
            }

            fn try_count_each(&self, messages: &[Message]) -> Result<Counts, compaction_tokens::Error> {
                Endpoint::count_each_blocking(self, messages).map_err(|e| self.provider_error(e))
            }
        }

        #[cfg(feature = "blocking")]
        impl $ty {
            fn provider_error(&self, error: Error) -> compaction_tokens::Error {
                compaction_tokens::Error::Provider { counter: self.describe(), source: Box::new(error) }
            }
        }
    };
}

counter_api!(OpenAITokenCounter, Provider::OpenAI, "OPENAI_API_KEY");
counter_api!(AnthropicTokenCounter, Provider::Anthropic, "ANTHROPIC_API_KEY");
