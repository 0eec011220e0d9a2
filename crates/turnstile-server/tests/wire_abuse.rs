//! Hostile or broken clients, byte by byte, with a thread per connection: packets out of order, long data without
//! end, text that is not UTF-8, bad login packets. Each is answered as MySQL answers it, and
//! the server goes on serving other clients.

mod raw_client;

/// The thread handling every server of these tests runs (`raw_client::server_with`).
const THREAD_HANDLING: turnstile_server::ThreadHandling =
    turnstile_server::ThreadHandling::OneThreadPerConnection;

include!("cases/wire_abuse.rs");
