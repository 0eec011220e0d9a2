//! `turnstile serve` driven by a real MySQL client (the `mysql` crate) and by raw sockets,
//! with connections on a thread pool (`pool-of-threads`). Every test starts its own server on port 0 in its own data directory.

mod raw_client;

/// The thread handling every server of these tests runs (`raw_client::server_with`).
const THREAD_HANDLING: turnstile_server::ThreadHandling =
    turnstile_server::ThreadHandling::PoolOfThreads;

include!("cases/server.rs");
