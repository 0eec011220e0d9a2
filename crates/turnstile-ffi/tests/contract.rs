//! The C API's documented contract, checked from Rust through the rlib: each promise of the
//! header that an implementation could easily break.

use std::ffi::CStr;

use turnstile_ffi::*;

const OK: i32 = ts_status::TS_OK as i32;
const ADMITTED: i32 = ts_status::TS_ADMITTED as i32;

fn gate(policy: &CStr, limit: u32, tickets: u32) -> *mut ts_gate {
    let mut st = 12345;
    // SAFETY: a NUL-terminated policy name and a writable status.
    let g = unsafe { ts_gate_new(policy.as_ptr(), limit, tickets, &mut st) };
    assert_eq!(st, OK);
    assert!(!g.is_null());
    g
}

/// `ts_session_cancel`: "a cancel no wait consumed is dropped at the statement's end", and
/// `ts_force_exit` ends the statement. A cancel made while the session was not waiting, in a
/// statement that then ended without waiting, must not cancel a wait in a later statement.
#[test]
fn a_cancel_no_wait_consumed_is_dropped_at_the_statement_end() {
    let g = gate(c"classic", 1, 10);
    // SAFETY: live handles from ts_*_new, used from this thread only, freed once at the end.
    unsafe {
        let holder = ts_session_new(g, c"holder".as_ptr());
        let s = ts_session_new(g, c"s".as_ptr());

        // Statement 1 of `s`: a KILL QUERY arrives while it is not waiting, and the statement
        // ends without ever waiting (admitted at once: the gate is empty).
        assert_eq!(ts_session_cancel(s), OK);
        assert_eq!(ts_enter(s), ADMITTED);
        assert_eq!(ts_exit(s), OK);
        assert_eq!(ts_force_exit(s), OK); // statement end: the unused cancel is dropped

        // Statement 2: the gate is full, so `s` waits, and times out; it was not cancelled.
        assert_eq!(ts_enter(holder), ADMITTED);
        assert_eq!(ts_set_wait_timeout_us(s, 30_000), OK);
        assert_eq!(
            ts_enter(s),
            ts_status::TS_ERR_TIMEOUT as i32,
            "a stale cancel from an ended statement cancelled a later statement's wait"
        );

        // The same with no call at all in the first statement: cancel, then statement end.
        assert_eq!(ts_session_cancel(s), OK);
        assert_eq!(ts_force_exit(s), OK);
        assert_eq!(ts_enter(s), ts_status::TS_ERR_TIMEOUT as i32);

        ts_session_free(s);
        ts_session_free(holder);
        ts_gate_free(g);
    }
}

/// `tickets` 0 is refused with `TS_ERR_CONFIG`, and the status's documentation and message say
/// which settings that covers (they named only the limit's range).
#[test]
fn zero_tickets_is_a_config_error_that_strerror_names() {
    let mut st = 12345;
    // SAFETY: a NUL-terminated policy name and a writable status.
    let g = unsafe { ts_gate_new(c"classic".as_ptr(), 4, 0, &mut st) };
    assert!(g.is_null());
    assert_eq!(st, ts_status::TS_ERR_CONFIG as i32);
    // SAFETY: ts_strerror returns a static NUL-terminated string.
    let msg = unsafe { CStr::from_ptr(ts_strerror(st)) }.to_str().unwrap();
    assert!(msg.contains("tickets"), "TS_ERR_CONFIG's message: {msg:?}");
}

/// `auto` grants no tickets: 0 is "none given", and any other count is refused rather than
/// ignored.
#[test]
fn auto_takes_zero_tickets_and_refuses_a_ticket_count() {
    let mut st = 12345;
    // SAFETY: a NUL-terminated policy name and a writable status.
    let g = unsafe { ts_gate_new(c"auto".as_ptr(), 0, 0, &mut st) };
    assert!(!g.is_null());
    assert_eq!(st, ts_status::TS_OK as i32);
    // SAFETY: a gate from ts_gate_new, freed once.
    unsafe { ts_gate_free(g) };
    // SAFETY: as above.
    let g = unsafe { ts_gate_new(c"auto".as_ptr(), 0, 100, &mut st) };
    assert!(g.is_null());
    assert_eq!(st, ts_status::TS_ERR_CONFIG as i32);
    let mut buf = [0 as std::ffi::c_char; 128];
    // SAFETY: a writable buffer of its length.
    let n = unsafe { ts_config_error(buf.as_mut_ptr(), buf.len()) };
    // SAFETY: NUL-terminated by ts_config_error.
    let text = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
    assert_eq!(n, text.len());
    assert!(text.contains("tickets") && text.contains("auto"), "{text}");
}

/// `ts_gate_options`: `ts_gate_options_init` gives the policy's defaults, `ts_gate_new_with`
/// builds exactly that gate, and a refused setting is a status with nothing built.
#[test]
fn gate_options_build_every_policy_and_refuse_bad_sizes_and_settings() {
    use std::mem::MaybeUninit;
    // SAFETY: `o` is a writable ts_gate_options; the policy strings are NUL-terminated
    // literals that outlive every call; every gate built is freed once.
    unsafe {
        let mut o = MaybeUninit::<ts_gate_options>::uninit();
        assert_eq!(ts_gate_options_init(o.as_mut_ptr(), std::ptr::null()), OK);
        let mut o = o.assume_init();
        assert_eq!(o.size, TS_GATE_OPTIONS_MIN_SIZE);
        let quantum_us = turnstile::GateConfig::default().quantum.as_micros() as u64;
        assert_eq!(
            (o.adaptive_limit, o.quantum_us, o.max_waiting),
            (1, quantum_us, 0)
        );
        assert_eq!(
            quantum_us, 10_000,
            "the header documents a 10,000 µs default"
        );

        // auto with overload protection: one slot, nobody may queue.
        o.limit = 1;
        o.adaptive_limit = 0;
        o.max_waiting = 1;
        let mut st = 12345;
        let g = ts_gate_new_with(&o, &mut st);
        assert_eq!(st, OK);
        assert!(!g.is_null());
        let a = ts_session_new(g, c"a".as_ptr());
        let b = ts_session_new(g, c"b".as_ptr());
        let c = ts_session_new(g, c"c".as_ptr());
        assert_eq!(ts_enter(a), ADMITTED);
        // `b` queues (the one place allowed) on another thread; `c` is refused at once.
        let b_addr = b as usize;
        let waiter = std::thread::spawn(move || ts_enter(b_addr as *mut ts_session));
        let mut stats = MaybeUninit::<ts_stats>::zeroed().assume_init();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            stats.size = std::mem::size_of::<ts_stats>() as u32;
            assert_eq!(ts_gate_stats(g, &mut stats), OK);
            if stats.waiting == 1 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "b never queued");
            std::thread::yield_now();
        }
        assert_eq!(ts_enter(c), ts_status::TS_ERR_OVERLOADED as i32);
        let msg = CStr::from_ptr(ts_strerror(ts_status::TS_ERR_OVERLOADED as i32));
        assert!(msg.to_str().unwrap().contains("overloaded"), "{msg:?}");
        assert_eq!(ts_exit(a), OK);
        assert_eq!(ts_force_exit(a), OK);
        assert_eq!(waiter.join().unwrap(), ADMITTED);
        assert_eq!(ts_force_exit(b), OK);
        for s in [a, b, c] {
            ts_session_free(s);
        }
        ts_gate_free(g);

        // Every named policy builds from its own defaults.
        for name in [
            c"classic",
            c"polling",
            c"timer",
            c"flifo",
            c"unlimited",
            c"AUTO",
        ] {
            let mut o = MaybeUninit::<ts_gate_options>::uninit();
            assert_eq!(ts_gate_options_init(o.as_mut_ptr(), name.as_ptr()), OK);
            let g = ts_gate_new_with(o.as_ptr(), &mut st);
            assert_eq!(st, OK, "{name:?}");
            ts_gate_free(g);
        }

        // Refusals: nothing built, the status names why.
        let refused = |o: &ts_gate_options, want: ts_status| {
            let mut st = 12345;
            assert!(ts_gate_new_with(o, &mut st).is_null());
            assert_eq!(st, want as i32, "{o:?}");
        };
        let mut o = MaybeUninit::<ts_gate_options>::uninit();
        assert_eq!(
            ts_gate_options_init(o.as_mut_ptr(), c"classic".as_ptr()),
            OK
        );
        let good = o.assume_init();
        refused(&ts_gate_options { size: 8, ..good }, ts_status::TS_ERR_SIZE);
        refused(
            &ts_gate_options {
                size: good.size + 8,
                ..good
            },
            ts_status::TS_ERR_SIZE,
        );
        refused(
            &ts_gate_options {
                limit: 1001,
                ..good
            },
            ts_status::TS_ERR_CONFIG,
        );
        refused(
            &ts_gate_options { tickets: 0, ..good },
            ts_status::TS_ERR_CONFIG,
        );
        refused(
            &ts_gate_options {
                quantum_us: 0,
                ..good
            },
            ts_status::TS_ERR_CONFIG,
        );
        refused(
            &ts_gate_options {
                adaptive_limit: 2,
                ..good
            },
            ts_status::TS_ERR_CONFIG,
        );
        refused(
            &ts_gate_options {
                reserved: 1,
                ..good
            },
            ts_status::TS_ERR_CONFIG,
        );
        refused(
            &ts_gate_options {
                policy: {
                    let mut n = [0; TS_POLICY_NAME_LEN];
                    for (d, s) in n.iter_mut().zip(b"fifo") {
                        *d = *s as std::ffi::c_char;
                    }
                    n
                },
                ..good
            },
            ts_status::TS_ERR_POLICY,
        );
        assert!(ts_gate_new_with(std::ptr::null(), &mut st).is_null());
        assert_eq!(st, ts_status::TS_ERR_NULL as i32);
        assert_eq!(
            ts_gate_options_init(std::ptr::null_mut(), std::ptr::null()),
            ts_status::TS_ERR_NULL as i32
        );
    }
}

/// `ts_gate_options_init` writes the first version's members only, and
/// `ts_gate_options_init_size` the members both sides know: a caller's larger struct (built
/// against a later header) is never written past, nor past what this library knows; a size
/// below the first version's is refused with nothing written.
#[test]
fn gate_options_init_writes_no_byte_past_the_size_both_sides_know() {
    use std::mem::size_of;
    const SENTINEL: u8 = 0xA5;
    let own = size_of::<ts_gate_options>();
    assert_eq!(own, TS_GATE_OPTIONS_MIN_SIZE as usize);
    // A caller's struct 32 bytes larger than this library's (a later header's), aligned.
    #[repr(C, align(8))]
    struct Bigger([u8; TS_GATE_OPTIONS_MIN_SIZE as usize + 32]);
    // SAFETY: each call gets a pointer to at least the size it is told (or to the first
    // version's size, for the unsized form), and a NUL-terminated policy name.
    unsafe {
        let mut big = Bigger([SENTINEL; TS_GATE_OPTIONS_MIN_SIZE as usize + 32]);
        let p = big.0.as_mut_ptr().cast::<ts_gate_options>();
        assert_eq!(
            ts_gate_options_init_size(p, big.0.len(), c"classic".as_ptr()),
            OK
        );
        assert!(
            big.0[own..].iter().all(|&b| b == SENTINEL),
            "nothing past {own}"
        );
        let o = p.read();
        assert_eq!(o.size as usize, own, "the extent both sides know");
        assert_eq!(o.tickets, 500);
        let mut st = 12345;
        let g = ts_gate_new_with(&o, &mut st);
        assert_eq!(st, OK);
        ts_gate_free(g);

        let mut big = Bigger([SENTINEL; TS_GATE_OPTIONS_MIN_SIZE as usize + 32]);
        let p = big.0.as_mut_ptr().cast::<ts_gate_options>();
        assert_eq!(ts_gate_options_init(p, c"auto".as_ptr()), OK);
        assert!(big.0[TS_GATE_OPTIONS_MIN_SIZE as usize..]
            .iter()
            .all(|&b| b == SENTINEL));
        assert_eq!(p.read().size, TS_GATE_OPTIONS_MIN_SIZE);

        let mut small = Bigger([SENTINEL; TS_GATE_OPTIONS_MIN_SIZE as usize + 32]);
        let p = small.0.as_mut_ptr().cast::<ts_gate_options>();
        assert_eq!(
            ts_gate_options_init_size(p, own - 1, c"auto".as_ptr()),
            ts_status::TS_ERR_SIZE as i32
        );
        assert!(small.0.iter().all(|&b| b == SENTINEL), "nothing written");
        assert_eq!(
            ts_gate_options_init_size(std::ptr::null_mut(), own, std::ptr::null()),
            ts_status::TS_ERR_NULL as i32
        );
    }
}

/// `ts_set_in_transaction`: under `auto`, an open transaction admitted once comes back ahead
/// (here as an extra admission, at once, with the only slot taken); an autocommit session
/// waits its turn (and times out).
#[test]
fn an_open_transaction_comes_back_ahead_through_the_c_api() {
    // SAFETY: a writable options struct, live handles from ts_*_new used from this thread
    // only, each freed once.
    unsafe {
        let mut o = std::mem::MaybeUninit::<ts_gate_options>::uninit();
        assert_eq!(ts_gate_options_init(o.as_mut_ptr(), c"auto".as_ptr()), OK);
        let mut o = o.assume_init();
        o.limit = 1;
        o.adaptive_limit = 0;
        let mut st = 12345;
        let g = ts_gate_new_with(&o, &mut st);
        assert_eq!(st, OK);
        let a = ts_session_new(g, c"a".as_ptr());
        let h = ts_session_new(g, c"holder".as_ptr());
        let c = ts_session_new(g, c"c".as_ptr());
        assert_eq!(
            ts_set_in_transaction(std::ptr::null_mut(), 1),
            ts_status::TS_ERR_NULL as i32
        );

        assert_eq!(ts_set_in_transaction(a, 1), OK);
        assert_eq!(ts_enter(a), ADMITTED);
        assert_eq!(ts_exit(a), OK);
        assert_eq!(ts_force_exit(a), OK);
        assert_eq!(ts_enter(h), ADMITTED);
        // `a`'s next statement does not wait behind the holder.
        assert_eq!(ts_enter(a), ADMITTED);
        let mut stats = std::mem::MaybeUninit::<ts_stats>::zeroed().assume_init();
        stats.size = std::mem::size_of::<ts_stats>() as u32;
        assert_eq!(ts_gate_stats(g, &mut stats), OK);
        assert_eq!(stats.unchecked_reentries, 1);
        // `c` (autocommit) waits its turn.
        assert_eq!(ts_set_wait_timeout_us(c, 20_000), OK);
        assert_eq!(ts_enter(c), ts_status::TS_ERR_TIMEOUT as i32);

        assert_eq!(ts_exit(a), OK);
        assert_eq!(ts_force_exit(a), OK);
        assert_eq!(ts_set_in_transaction(a, 0), OK);
        assert_eq!(ts_force_exit(h), OK);
        for s in [a, h, c] {
            ts_session_free(s);
        }
        ts_gate_free(g);
    }
}
