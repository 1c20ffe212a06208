//! The one error type of compaction-proxy: a server that cannot start, and a request body the
//! proxy could not compact (which it forwards unchanged unless told to fail closed).

use std::net::SocketAddr;

/// What can go wrong in this crate.
///
/// [`serve`](crate::serve) returns the first three before it accepts a connection. The others
/// are why one request's body was not compacted; the proxy logs them (never the body) and
/// forwards the request unchanged, or answers 502 with
/// [`ProxySettings::with_fail_closed`](crate::ProxySettings::with_fail_closed).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The listener is on an address other than loopback, and remote clients were not allowed
    /// with a token to check.
    #[error(
        "refusing to listen on {address}: only loopback addresses are served unless remote clients are \
         allowed and a bearer token is set for them to present"
    )]
    RemoteWithoutToken {
        /// The listener's address.
        address: SocketAddr,
    },
    /// The listener's own address could not be read.
    #[error("the listener's address could not be read")]
    Listener(#[source] std::io::Error),
    /// The HTTP client to the upstreams could not be built (its TLS configuration).
    #[error("the HTTP client to the upstreams could not be built")]
    Client(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// An upstream URL is not an absolute `http` or `https` URL.
    #[error("upstream {url:?} is not an absolute http:// or https:// URL")]
    Upstream {
        /// The URL given.
        url: String,
    },
    /// The request body is not a conversation of the endpoint's format.
    #[error("the {endpoint} request body could not be read")]
    Read {
        /// The endpoint, such as `/v1/messages`.
        endpoint: &'static str,
        /// What the reader found.
        #[source]
        source: compaction_formats::Error,
    },
    /// Compacting by model, the request names a model whose context window is not known (or no
    /// model): the proxy does not guess one.
    #[error(
        "the {endpoint} request's model {} has no known context window",
        model.as_deref().map_or_else(|| "(none given)".to_owned(), |m| format!("{m:?}"))
    )]
    UnknownModel {
        /// The endpoint, such as `/v1/messages`.
        endpoint: &'static str,
        /// The model the request names, if it names one.
        model: Option<String>,
    },
    /// Compacting by model, no hook could be built for a model's window.
    #[error("no compaction hook could be built for a {window}-token window")]
    Hook {
        /// The model's window, in tokens.
        window: usize,
        /// What building it said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The hook failed to count or compact the conversation.
    #[error("the {endpoint} request could not be compacted")]
    Compact {
        /// The endpoint, such as `/v1/messages`.
        endpoint: &'static str,
        /// What the hook said.
        #[source]
        source: compaction_hook::Error,
    },
    /// The compacted conversation could not be written back in the request's format.
    #[error("the compacted {endpoint} request could not be written back")]
    Write {
        /// The endpoint, such as `/v1/messages`.
        endpoint: &'static str,
        /// What the writer said.
        #[source]
        source: compaction_formats::Error,
    },
}
