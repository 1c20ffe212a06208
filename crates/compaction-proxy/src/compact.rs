//! The request body on its way: a Chat Completions, Responses or Messages request read as a
//! conversation, run through the hook, and written back in its own format with only the
//! compacted messages changed; any other request as it came.

use std::sync::Arc;

use bytes::Bytes;
use compaction_formats::{Format, ReadOptions};
use compaction_hook::{AgentState, CompactionHook};
use compaction_model::Changes;
use hyper::{Method, Response, StatusCode};

use crate::error::Error;
use crate::relay::ProxyBody;
use crate::server::{answer, chain, Shared};

/// An endpoint whose requests carry a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    ChatCompletions,
    Responses,
    Messages,
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
            "/v1/messages" => Some(Endpoint::Messages),
            _ => None,
        }
    }

    pub(crate) fn path(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "/v1/chat/completions",
            Endpoint::Responses => "/v1/responses",
            Endpoint::Messages => "/v1/messages",
        }
    }

    fn format(self) -> Format {
        match self {
            Endpoint::ChatCompletions => Format::OpenAi,
            Endpoint::Responses => Format::Responses,
            Endpoint::Messages => Format::Anthropic,
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
}

/// Reads `body` as `endpoint`'s request, runs `hook` over it, and writes the compacted request
/// back in the same format: the envelope (model, tools, stream, settings the proxy does not
/// know) and every message the hook left alone come out as they came.
pub(crate) fn compact(hook: &CompactionHook, endpoint: Endpoint, body: &[u8]) -> Result<Compacted, Error> {
    let path = endpoint.path();
    let options = ReadOptions::named(path).with_format(endpoint.format());
    let mut conversation = compaction_formats::read(body.to_vec(), &options)
        .map_err(|source| Error::Read { endpoint: path, source })?;
    let messages = std::mem::take(&mut conversation.messages);
    let mut state = AgentState::new(messages).with_tools(conversation.tools.clone());
    let outcome = hook.try_run(&mut state).map_err(|source| Error::Compact { endpoint: path, source })?;
    let tokens_before = outcome.estimated_tokens;
    if !outcome.compacted {
        return Ok(Compacted { body: None, tokens_before, tokens_after: tokens_before, results_cleared: 0 });
    }
    let tokens_after =
        hook.try_estimate(&state).map_err(|source| Error::Compact { endpoint: path, source })?;
    let results_cleared = outcome.report.as_ref().map_or(0, |report| report.results.len());
    let changes = outcome.changes.unwrap_or(Changes::Unknown);
    let mut out = Vec::with_capacity(body.len());
    compaction_formats::write(&conversation, state.messages(), None, &changes, &mut out)
        .map_err(|source| Error::Write { endpoint: path, source })?;
    Ok(Compacted { body: Some(out), tokens_before, tokens_after, results_cleared })
}

/// The body to forward, or the proxy's answer instead (502, when a request that could not be
/// compacted must not go through).
pub(crate) async fn body(
    shared: &Arc<Shared>,
    parts: &hyper::http::request::Parts,
    body: Bytes,
) -> Result<Bytes, Box<Response<ProxyBody>>> {
    let settings = &shared.settings;
    let (Some(_), Some(endpoint)) = (&settings.hook, Endpoint::of(&parts.method, parts.uri.path())) else {
        return Ok(body);
    };
    // Reading, counting and writing a large request is work for a blocking thread, not for the
    // runtime's workers.
    let (task_shared, task_body) = (shared.clone(), body.clone());
    let done = tokio::task::spawn_blocking(move || {
        let hook = task_shared.settings.hook.as_ref().expect("checked above");
        compact(hook, endpoint, &task_body)
    })
    .await;
    let path = endpoint.path();
    let failure = match done {
        Ok(Ok(compacted)) => {
            let Some(compacted_body) = compacted.body else { return Ok(body) };
            (settings.log)(&format!(
                "proxy: {path}: compacted{}: {} → {} tokens estimated, {} tool result{} cleared",
                if settings.dry_run { " (dry run, forwarded unchanged)" } else { "" },
                compacted.tokens_before,
                compacted.tokens_after,
                compacted.results_cleared,
                if compacted.results_cleared == 1 { "" } else { "s" },
            ));
            return Ok(match settings.dry_run {
                true => body,
                false => Bytes::from(compacted_body),
            });
        }
        // The log says what failed, not the reader's words for it, which may quote the body;
        // the client, whose body it is, gets them all.
        Ok(Err(error)) => (error.to_string(), chain(&error)),
        Err(_) => {
            let failure = format!("the {path} request's compaction failed");
            (failure.clone(), failure)
        }
    };
    let (logged, whole) = failure;
    match settings.fail_closed {
        true => {
            (settings.log)(&format!("proxy: {logged}; answered 502 (fail closed)"));
            Err(Box::new(answer(StatusCode::BAD_GATEWAY, "compaction_error", &whole)))
        }
        false => {
            (settings.log)(&format!("proxy: warning: {logged}; forwarded unchanged"));
            Ok(body)
        }
    }
}
