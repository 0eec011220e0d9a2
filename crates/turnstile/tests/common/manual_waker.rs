//! A task driven by hand for the async tests: a waker that counts its wakes, and a poll with
//! it. No runtime, no timing.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// A waker that counts its wakes.
#[derive(Default)]
pub struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// One hand-driven task: its waker and how often it was woken.
pub struct Task {
    count: Arc<Count>,
    waker: Waker,
}

impl Task {
    pub fn new() -> Task {
        let count = Arc::new(Count::default());
        Task {
            waker: count.clone().into(),
            count,
        }
    }

    pub fn wakes(&self) -> usize {
        self.count.0.load(Ordering::SeqCst)
    }

    pub fn poll<F: Future + Unpin>(&self, f: &mut F) -> Poll<F::Output> {
        Pin::new(f).poll(&mut Context::from_waker(&self.waker))
    }
}
