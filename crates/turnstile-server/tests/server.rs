//! `turnstile serve` driven by a real MySQL client (the `mysql` crate) and by raw sockets,
//! with a thread per connection. Every test starts its own server on port 0 in its own data directory.

mod raw_client;

/// The thread handling every server of these tests runs (`raw_client::server_with`).
const THREAD_HANDLING: turnstile_server::ThreadHandling =
    turnstile_server::ThreadHandling::OneThreadPerConnection;

include!("cases/server.rs");
