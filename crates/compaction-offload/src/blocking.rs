//! Running a blocking store operation off the caller's thread, for async callers, without tying
//! the crate to a runtime.
//!
//! The operation runs on a thread of its own and wakes the waiting task when it is done; the
//! future is plain `std`, so it works under tokio, async-std, smol or a hand-written executor. A
//! thread costs some tens of microseconds to start, next to a write that syncs a file and its
//! directory to disk (milliseconds), and offloading writes a handful of results per step.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::error::Error;

/// The answer, and the task waiting for it.
struct Slot<T> {
    answer: Option<Result<T, Error>>,
    waker: Option<Waker>,
}

/// Fills the slot once; if the thread ends without an answer (it panicked), it answers with
/// [`Error::WorkerStopped`] so that the waiting task never hangs.
struct Sender<T> {
    slot: Arc<Mutex<Slot<T>>>,
    key: String,
    sent: bool,
}

impl<T> Sender<T> {
    fn send(mut self, answer: Result<T, Error>) {
        self.fill(answer);
        self.sent = true;
    }

    fn fill(&self, answer: Result<T, Error>) {
        let mut slot = self.slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        slot.answer = Some(answer);
        if let Some(waker) = slot.waker.take() {
            waker.wake();
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if !self.sent {
            let key = std::mem::take(&mut self.key);
            self.fill(Err(Error::WorkerStopped { key }));
        }
    }
}

/// The future of an operation running on its own thread.
pub(crate) struct Blocking<T> {
    slot: Arc<Mutex<Slot<T>>>,
}

impl<T> Future for Blocking<T> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = self.slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match slot.answer.take() {
            Some(answer) => Poll::Ready(answer),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Runs `operation` (about `key`) on a new thread; the future resolves to its answer.
pub(crate) fn run<T, F>(key: &str, operation: F) -> Blocking<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, Error> + Send + 'static,
{
    let slot = Arc::new(Mutex::new(Slot { answer: None, waker: None }));
    let sender = Sender { slot: Arc::clone(&slot), key: key.to_owned(), sent: false };
    let spawned = std::thread::Builder::new()
        .name("compaction-offload-store".into())
        .spawn(move || sender.send(operation()));
    if let Err(source) = spawned {
        // The closure, and the sender in it, were dropped: the slot holds `WorkerStopped`.
        // Say why instead.
        let mut guard = slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        guard.answer = Some(Err(Error::Io { action: "starting a thread for", path: key.into(), source }));
    }
    Blocking { slot }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Polls a future to completion on this thread.
    fn block_on<F: Future>(future: F) -> F::Output {
        struct Unpark(std::thread::Thread);
        impl std::task::Wake for Unpark {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut future = std::pin::pin!(future);
        loop {
            if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
                return output;
            }
            std::thread::park();
        }
    }

    #[test]
    fn answers_arrive_and_panics_do_not_hang() {
        assert_eq!(block_on(run("k", || Ok(42))).ok(), Some(42));
        let stopped = block_on(run::<(), _>("k", || panic!("worker fails")));
        assert!(matches!(stopped, Err(Error::WorkerStopped { key }) if key == "k"));
    }
}
