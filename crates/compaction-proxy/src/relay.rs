//! The body of a response: a fixed text the proxy writes, or the upstream's body relayed chunk
//! by chunk as it arrives, by a task that ends when the upstream does or the client goes.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use crate::usage::{Seen, UsageReader};

/// A usage reader over a relayed body, and what to do with what it read once the body ended.
pub(crate) type Tap = (UsageReader, Box<dyn FnOnce(Seen) + Send>);

/// Why a relayed body stopped short: the client then sees a cut connection, never a body that
/// looks whole.
pub(crate) type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// What the proxy answers with.
pub(crate) enum ProxyBody {
    /// A body the proxy has whole (its own answers, an empty one).
    Full(Option<Bytes>),
    /// The upstream's body, chunk by chunk, as the relay task receives it.
    Relayed(Relayed),
}

/// The relay task's chunks as a body, and the error that cuts it, held back one poll.
///
/// hyper buffers a data frame and writes it out when the body has nothing ready; an error frame
/// right behind it would close the connection with that chunk still in the buffer, and the
/// client would lose what the upstream did send. So the first poll that meets the error answers
/// "not yet" (and wakes itself), which lets hyper flush, and the next one gives the error.
pub(crate) struct Relayed {
    chunks: mpsc::Receiver<Result<Bytes, BodyError>>,
    cut: Option<BodyError>,
}

impl ProxyBody {
    pub(crate) fn full(bytes: impl Into<Bytes>) -> Self {
        ProxyBody::Full(Some(bytes.into()))
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.get_mut() {
            ProxyBody::Full(bytes) => Poll::Ready(bytes.take().map(|bytes| Ok(Frame::data(bytes)))),
            ProxyBody::Relayed(relayed) => {
                if let Some(error) = relayed.cut.take() {
                    return Poll::Ready(Some(Err(error)));
                }
                match relayed.chunks.poll_recv(cx) {
                    Poll::Ready(Some(Err(error))) => {
                        relayed.cut = Some(error);
                        cx.waker().wake_by_ref();
                        Poll::Pending
                    }
                    other => other.map(|chunk| chunk.map(|chunk| chunk.map(Frame::data))),
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, ProxyBody::Full(None))
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            ProxyBody::Full(Some(bytes)) => http_body::SizeHint::with_exact(bytes.len() as u64),
            ProxyBody::Full(None) => http_body::SizeHint::with_exact(0),
            ProxyBody::Relayed(_) => http_body::SizeHint::default(),
        }
    }
}

/// Relays `response`'s body into a [`ProxyBody`] from a task of its own. Each chunk goes on as
/// soon as it arrives (a channel of a few chunks holds back an upstream faster than its
/// client). The task ends, dropping the upstream response and so its connection, when the
/// upstream's body ends or fails, when no chunk comes within `idle`, or as soon as the client
/// is gone. `permit` (a request in flight) is held until then.
///
/// With `tap`, each chunk is also fed to a usage reader, and what it read is handed on once the
/// body has ended whole.
pub(crate) fn relay(
    mut response: reqwest::Response,
    idle: Duration,
    permit: OwnedSemaphorePermit,
    mut tap: Option<Tap>,
) -> ProxyBody {
    let (sender, receiver) = mpsc::channel::<Result<Bytes, BodyError>>(4);
    tokio::spawn(async move {
        let _permit = permit;
        loop {
            let chunk = tokio::select! {
                () = sender.closed() => break,
                chunk = tokio::time::timeout(idle, response.chunk()) => chunk,
            };
            let chunk = match chunk {
                Ok(Ok(Some(bytes))) => {
                    if let Some((reader, _)) = &mut tap {
                        reader.feed(&bytes);
                    }
                    Ok(bytes)
                }
                Ok(Ok(None)) => {
                    if let Some((reader, done)) = tap.take() {
                        done(reader.finish());
                    }
                    break;
                }
                Ok(Err(error)) => Err(BodyError::from(error.without_url())),
                Err(_) => Err(BodyError::from(format!("the upstream sent nothing for {} s", idle.as_secs()))),
            };
            let failed = chunk.is_err();
            if sender.send(chunk).await.is_err() || failed {
                break;
            }
        }
    });
    ProxyBody::Relayed(Relayed { chunks: receiver, cut: None })
}
