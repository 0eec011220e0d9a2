//! A tower middleware that admits each request through a turnstile gate.
//!
//! `GateLayer` wraps any `tower_service::Service`: each request gets an async session, enters
//! the gate (waiting in its queue while `limit` requests are inside), runs the inner service,
//! and leaves when the inner future completes — or is dropped: a request cancelled while it
//! waits (a client gone, a timeout) gives up its place, and a slot handed to it in that
//! instant passes to the next request.
//!
//! ```text
//! cargo run -p turnstile --example async_layer --features async
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower_layer::Layer;
use tower_service::Service;
use turnstile::{Gate, GateConfig, GateError, Policy, SleepFuture, Sleeper};

/// Admits every request of the wrapped service through `gate`.
#[derive(Clone)]
pub struct GateLayer {
    gate: Gate,
    sleeper: Sleeper,
}

impl GateLayer {
    /// A layer over `gate`; its sessions sleep on tokio's timer when the policy says so.
    pub fn new(gate: Gate) -> GateLayer {
        GateLayer {
            gate,
            sleeper: Sleeper::new(|d| Box::pin(tokio::time::sleep(d)) as SleepFuture),
        }
    }
}

impl<S> Layer<S> for GateLayer {
    type Service = Gated<S>;

    fn layer(&self, inner: S) -> Gated<S> {
        Gated {
            layer: self.clone(),
            inner,
        }
    }
}

/// The service `GateLayer` makes.
#[derive(Clone)]
pub struct Gated<S> {
    layer: GateLayer,
    inner: S,
}

/// The inner service's error, or the gate's.
#[derive(Debug)]
pub enum GatedError<E> {
    /// Not admitted.
    Gate(GateError),
    /// Admitted; the inner service failed.
    Inner(E),
}

impl<S, Req> Service<Req> for Gated<S>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    Req: Send + 'static,
{
    type Response = S::Response;
    type Error = GatedError<S::Error>;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(GatedError::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        // The service that was made ready goes with the request (tower's usual clone swap).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let layer = self.layer.clone();
        Box::pin(async move {
            // One session per request here; a server with connections would keep one per
            // connection, so that its tickets carry over between the connection's requests.
            let mut session = layer
                .gate
                .async_session_with_sleeper("request", layer.sleeper.clone());
            let call = session.enter().await.map_err(GatedError::Gate)?;
            let r = inner.call(req).await.map_err(GatedError::Inner);
            drop(call);
            r
        })
    }
}

/// The "engine": counts the requests running in it at once.
#[derive(Clone, Default)]
struct Engine {
    running: Arc<AtomicU32>,
    most: Arc<AtomicU32>,
}

impl Service<u32> for Engine {
    type Response = u32;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<u32, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, row: u32) -> Self::Future {
        let (running, most) = (self.running.clone(), self.most.clone());
        Box::pin(async move {
            // Counted out when the query ends or its request is dropped mid-way.
            struct Running(Arc<AtomicU32>);
            impl Drop for Running {
                fn drop(&mut self) {
                    self.0.fetch_sub(1, Ordering::SeqCst);
                }
            }
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            let _running = Running(running);
            most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(1)).await; // the query's work
            Ok(row * 2)
        })
    }
}

/// Waits until `svc` is ready, then calls it.
async fn oneshot<S: Service<R>, R>(mut svc: S, req: R) -> Result<S::Response, S::Error> {
    std::future::poll_fn(|cx| svc.poll_ready(cx)).await?;
    svc.call(req).await
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let limit = 4;
    let gate = Gate::new(GateConfig::new(Policy::Classic).limit(limit).tickets(1))?;
    let engine = Engine::default();
    let service = GateLayer::new(gate.clone()).layer(engine.clone());

    let mut requests = Vec::new();
    for i in 0..200u32 {
        let svc = service.clone();
        requests.push(tokio::spawn(async move {
            if i % 10 == 0 {
                // An impatient client: gives up after 2 ms, possibly while queued.
                tokio::time::timeout(Duration::from_millis(2), oneshot(svc, i))
                    .await
                    .ok()
            } else {
                Some(oneshot(svc, i).await)
            }
        }));
    }
    let (mut served, mut gave_up) = (0, 0);
    for r in requests {
        match r.await? {
            Some(Ok(_)) => served += 1,
            Some(Err(e)) => return Err(format!("request failed: {e:?}").into()),
            None => gave_up += 1,
        }
    }

    let st = gate.stats();
    println!(
        "{served} requests served, {gave_up} gave up; at most {} in the engine at once (limit \
         {limit})",
        engine.most.load(Ordering::SeqCst)
    );
    println!(
        "gate: {} admissions, {} queue waits, {} cancellations; now {} inside, {} queued",
        st.counters.admissions,
        st.counters.queue_waits,
        st.counters.cancellations,
        st.inside,
        st.queued
    );
    assert!(engine.most.load(Ordering::SeqCst) <= limit);
    assert_eq!((st.inside, st.queued, st.waiting), (0, 0, 0));
    // A client that gave up was either cancelled while it waited or admitted and dropped in
    // the engine: every request is one or the other.
    assert_eq!(st.counters.admissions + st.counters.cancellations, 200);
    Ok(())
}
