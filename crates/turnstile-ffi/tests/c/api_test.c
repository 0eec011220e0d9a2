/*
 * The C API from C: statuses for NULL and every misuse, tickets and slots, timeouts,
 * cancellation, the status text's truncation, ts_stats' size protocol, the mutex's owner
 * checks, and many pthreads entering and exiting gates while sharing a ts_mutex (the limit is
 * never exceeded, the counters add up). Built and run by tests/c_api.rs, under
 * AddressSanitizer (leaks included) when the compiler supports it.
 *
 * Exits 0 after printing "ok: N checks"; the first failed check prints its line and exits 1.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep, clock_gettime */
#include "turnstile.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_long checks;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        atomic_fetch_add(&checks, 1);                                               \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

#define CHECK_RC(expr, want)                                                          \
    do {                                                                              \
        int rc_ = (expr);                                                             \
        atomic_fetch_add(&checks, 1);                                                 \
        if (rc_ != (want)) {                                                          \
            fprintf(stderr, "%s:%d: %s returned %d (%s), expected %s (%d)\n", __FILE__, \
                    __LINE__, #expr, rc_, ts_strerror(rc_), #want, (int)(want));      \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

static ts_stats stats_of(ts_gate *g) {
    ts_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    CHECK_RC(ts_gate_stats(g, &s), TS_OK);
    CHECK(s.size == sizeof s);
    CHECK(s.version == TS_STATS_VERSION);
    return s;
}

static ts_gate *gate(const char *policy, uint32_t limit, uint32_t tickets) {
    int st = 12345;
    ts_gate *g = ts_gate_new(policy, limit, tickets, &st);
    CHECK_RC(st, TS_OK);
    CHECK(g != NULL);
    return g;
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void null_handles_give_ts_err_null_and_free_of_null_is_a_no_op(void) {
    int st = 0;
    CHECK(ts_gate_new(NULL, 4, 10, &st) == NULL);
    CHECK_RC(st, TS_ERR_NULL);
    CHECK_RC(ts_gate_set_limit(NULL, 1), TS_ERR_NULL);
    ts_stats s;
    s.size = sizeof s;
    CHECK_RC(ts_gate_stats(NULL, &s), TS_ERR_NULL);
    ts_gate *g = gate("classic", 4, 10);
    CHECK_RC(ts_gate_stats(g, NULL), TS_ERR_NULL);
    char buf[8] = "xxxxxxx";
    CHECK(ts_gate_status(NULL, buf, sizeof buf) == 0);
    CHECK(buf[0] == '\0');

    CHECK(ts_session_new(NULL, "x") == NULL);
    st = 0;
    CHECK(ts_session_new_with_status(NULL, "x", &st) == NULL);
    CHECK_RC(st, TS_ERR_NULL);
    CHECK_RC(ts_enter(NULL), TS_ERR_NULL);
    CHECK_RC(ts_exit(NULL), TS_ERR_NULL);
    CHECK_RC(ts_force_exit(NULL), TS_ERR_NULL);
    CHECK_RC(ts_wait_begin(NULL, TS_WAIT_ROW_LOCK), TS_ERR_NULL);
    CHECK_RC(ts_wait_end(NULL), TS_ERR_NULL);
    CHECK_RC(ts_set_wait_timeout_us(NULL, 10), TS_ERR_NULL);
    CHECK_RC(ts_session_cancel(NULL), TS_ERR_NULL);
    CHECK_RC(ts_mutex_lock(NULL), TS_ERR_NULL);
    CHECK_RC(ts_mutex_trylock(NULL), TS_ERR_NULL);
    CHECK_RC(ts_mutex_unlock(NULL), TS_ERR_NULL);

    ts_gate_free(NULL);
    ts_session_free(NULL);
    ts_mutex_free(NULL);
    ts_gate_free(g);
}

static void bad_names_settings_and_reasons_give_their_statuses(void) {
    int st = 0;
    CHECK(ts_gate_new("no-such-policy", 4, 10, &st) == NULL);
    CHECK_RC(st, TS_ERR_POLICY);
    CHECK(ts_gate_new("\xff\xfe", 4, 10, &st) == NULL);
    CHECK_RC(st, TS_ERR_UTF8);
    CHECK(ts_gate_new("classic", 1001, 10, &st) == NULL);
    CHECK_RC(st, TS_ERR_CONFIG);
    CHECK(ts_gate_new("classic", 1001, 10, NULL) == NULL); /* status may be NULL */

    ts_gate *g = gate("Polling", 4, 10); /* names are case-insensitive */
    CHECK(strcmp(stats_of(g).policy, "polling") == 0);
    CHECK_RC(ts_gate_set_limit(g, 1001), TS_ERR_CONFIG);
    CHECK(stats_of(g).limit == 4);
    CHECK_RC(ts_gate_set_limit(g, 7), TS_OK);
    CHECK(stats_of(g).limit == 7);

    CHECK(ts_session_new_with_status(g, "\xc3\x28", &st) == NULL);
    CHECK_RC(st, TS_ERR_UTF8);
    ts_session *s = ts_session_new_with_status(g, NULL, &st); /* NULL name: unnamed */
    CHECK_RC(st, TS_OK);
    CHECK(s != NULL);
    CHECK_RC(ts_wait_begin(s, 0), TS_ERR_REASON);
    CHECK_RC(ts_wait_begin(s, TS_WAIT_FILE_SORT + 1), TS_ERR_REASON);
    CHECK_RC(ts_wait_begin(s, -1), TS_ERR_REASON);
    CHECK(stats_of(g).step_outs == 0);
    ts_session_free(s);
    ts_gate_free(g);
}

static void strerror_names_every_status_with_a_distinct_static_string(void) {
    for (int a = TS_ERR_OVERLOADED; a <= TS_BUSY; a++) {  /* the lowest code */
        const char *ma = ts_strerror(a);
        CHECK(ma != NULL && ma[0] != '\0');
        CHECK(strcmp(ma, "unknown turnstile status") != 0);
        for (int b = a + 1; b <= TS_BUSY; b++) CHECK(strcmp(ma, ts_strerror(b)) != 0);
    }
    CHECK(strcmp(ts_strerror(TS_BUSY + 1), "unknown turnstile status") == 0);
    CHECK(strcmp(ts_strerror(TS_ERR_OVERLOADED - 1), "unknown turnstile status") == 0);
    CHECK(ts_strerror(TS_OK) == ts_strerror(TS_OK)); /* static: the same pointer */
}

static void calls_out_of_order_give_one_status_per_misuse_and_change_nothing(void) {
    ts_gate *g = gate("classic", 4, 10);
    ts_session *s = ts_session_new(g, "misuse");
    CHECK_RC(ts_exit(s), TS_ERR_EXIT_WITHOUT_ENTER);
    CHECK_RC(ts_wait_end(s), TS_ERR_WAIT_END_WITHOUT_BEGIN);
    CHECK_RC(ts_enter(s), TS_ADMITTED);
    CHECK_RC(ts_enter(s), TS_ERR_NESTED_ENTER);
    CHECK_RC(ts_wait_begin(s, TS_WAIT_DISK_IO), TS_OK);
    CHECK(stats_of(g).inside == 0); /* the slot is free during the wait */
    CHECK(stats_of(g).stepped_out == 1);
    CHECK_RC(ts_wait_begin(s, TS_WAIT_DISK_IO), TS_ERR_NESTED_WAIT);
    CHECK_RC(ts_enter(s), TS_ERR_CALL_DURING_WAIT);
    CHECK_RC(ts_exit(s), TS_ERR_CALL_DURING_WAIT);
    CHECK_RC(ts_wait_end(s), TS_OK); /* within the call: re-admitted */
    CHECK(stats_of(g).inside == 1);
    CHECK_RC(ts_wait_end(s), TS_ERR_WAIT_END_WITHOUT_BEGIN);
    CHECK_RC(ts_exit(s), TS_OK);
    CHECK_RC(ts_exit(s), TS_ERR_EXIT_WITHOUT_ENTER);
    ts_stats st = stats_of(g);
    CHECK(st.admissions == 2 && st.ticket_reentries == 0 && st.step_outs == 1);
    CHECK(st.stepped_out == 0);
    CHECK_RC(ts_force_exit(s), TS_OK);
    CHECK_RC(ts_force_exit(s), TS_OK); /* already outside: still fine */
    CHECK(stats_of(g).inside == 0);
    ts_session_free(s);
    ts_gate_free(g);
}

static void enter_admits_once_then_spends_tickets_and_exit_keeps_the_slot_until_they_run_out(
    void) {
    ts_gate *g = gate("classic", 1, 3);
    ts_session *a = ts_session_new(g, "a");
    CHECK_RC(ts_enter(a), TS_ADMITTED);
    CHECK_RC(ts_exit(a), TS_OK);
    CHECK(stats_of(g).inside == 1); /* kept between calls */
    for (int i = 0; i < 3; i++) {
        CHECK_RC(ts_enter(a), TS_OK); /* a ticket re-entry */
        CHECK_RC(ts_exit(a), TS_OK);
    }
    CHECK(stats_of(g).inside == 0); /* tickets spent: left at the last exit */
    CHECK_RC(ts_enter(a), TS_ADMITTED);
    CHECK_RC(ts_exit(a), TS_OK);

    /* The only slot is held between a's calls: b times out, with nothing counted. */
    ts_session *b = ts_session_new(g, "b");
    CHECK_RC(ts_set_wait_timeout_us(b, 2000), TS_OK);
    CHECK_RC(ts_enter(b), TS_ERR_TIMEOUT);
    CHECK_RC(ts_exit(b), TS_ERR_EXIT_WITHOUT_ENTER);
    ts_stats st = stats_of(g);
    CHECK(st.timeouts == 1 && st.admissions == 2 && st.ticket_reentries == 3);

    CHECK_RC(ts_force_exit(a), TS_OK); /* statement end frees the slot */
    CHECK(stats_of(g).inside == 0);
    CHECK_RC(ts_enter(b), TS_ADMITTED);
    CHECK_RC(ts_set_wait_timeout_us(a, 0), TS_OK); /* 0: no timeout */
    ts_session_free(b); /* freed in a call: it leaves the gate */
    CHECK(stats_of(g).inside == 0);
    CHECK(stats_of(g).sessions == 1);
    ts_session_free(a);
    CHECK(stats_of(g).sessions == 0);
    ts_gate_free(g);
}

static void free_of_a_session_inside_ends_its_statement_and_the_slot_passes_on(void) {
    ts_gate *g = gate("classic", 1, 100);
    /* Between calls, holding the slot with tickets left. */
    ts_session *a = ts_session_new(g, "a");
    CHECK_RC(ts_enter(a), TS_ADMITTED);
    CHECK_RC(ts_exit(a), TS_OK);
    CHECK(stats_of(g).inside == 1);
    ts_session_free(a);
    CHECK(stats_of(g).inside == 0);

    /* Inside a declared wait within a call. */
    ts_session *b = ts_session_new(g, "b");
    CHECK_RC(ts_enter(b), TS_ADMITTED);
    CHECK_RC(ts_wait_begin(b, TS_WAIT_COMMIT), TS_OK);
    CHECK(stats_of(g).stepped_out == 1);
    ts_session_free(b);
    ts_stats st = stats_of(g);
    CHECK(st.inside == 0 && st.stepped_out == 0 && st.sessions == 0);

    /* The next session gets the slot without waiting. */
    ts_session *c = ts_session_new(g, "c");
    CHECK_RC(ts_set_wait_timeout_us(c, 1000), TS_OK);
    CHECK_RC(ts_enter(c), TS_ADMITTED);

    /* A session outlives ts_gate_free: the gate's state lives until its last session. */
    ts_gate_free(g);
    CHECK_RC(ts_exit(c), TS_OK);
    CHECK_RC(ts_enter(c), TS_OK);
    CHECK_RC(ts_force_exit(c), TS_OK);
    ts_session_free(c);
}

static void a_row_lock_wait_re_enters_without_checking_the_limit(void) {
    ts_gate *g = gate("classic", 1, 10);
    ts_session *a = ts_session_new(g, "a");
    ts_session *b = ts_session_new(g, "b");
    CHECK_RC(ts_enter(a), TS_ADMITTED);
    CHECK_RC(ts_wait_begin(a, TS_WAIT_ROW_LOCK), TS_OK);
    CHECK_RC(ts_set_wait_timeout_us(b, UINT64_MAX), TS_OK); /* too far to matter: none */
    CHECK_RC(ts_enter(b), TS_ADMITTED); /* a's slot was freed for its wait */
    CHECK_RC(ts_wait_end(a), TS_OK);     /* back in, although b holds the only slot */
    ts_stats st = stats_of(g);
    CHECK(st.unchecked_reentries == 1 && st.step_outs == 1);
    ts_session_free(a);
    ts_session_free(b);
    CHECK(stats_of(g).inside == 0);
    ts_gate_free(g);
}

struct blocked {
    ts_session *s;
    int rc;
};

static void *enter_and_record(void *arg) {
    struct blocked *b = arg;
    b->rc = ts_enter(b->s);
    return NULL;
}

static void wait_until_waiting(ts_gate *g, uint32_t n) {
    for (int i = 0; i < 10000 && stats_of(g).waiting < n; i++) sleep_us(500);
    CHECK(stats_of(g).waiting >= n);
}

static void cancel_ends_a_blocked_enter_and_a_second_thread_on_the_session_gets_busy(void) {
    ts_gate *g = gate("classic", 1, 10);
    ts_session *holder = ts_session_new(g, "holder");
    CHECK_RC(ts_enter(holder), TS_ADMITTED);
    struct blocked b = {ts_session_new(g, "victim"), 12345};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, enter_and_record, &b) == 0);
    wait_until_waiting(g, 1);
    /* The waiting thread is inside ts_enter on this session: another thread is refused. */
    CHECK_RC(ts_exit(b.s), TS_ERR_BUSY);
    CHECK_RC(ts_enter(b.s), TS_ERR_BUSY);
    CHECK_RC(ts_force_exit(b.s), TS_ERR_BUSY);
    CHECK_RC(ts_session_cancel(b.s), TS_OK); /* KILL QUERY, from this thread */
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_RC(b.rc, TS_ERR_CANCELLED);
    ts_stats st = stats_of(g);
    CHECK(st.cancellations == 1 && st.waiting == 0 && st.inside == 1);
    /* The session is usable again, from this thread. */
    CHECK_RC(ts_exit(b.s), TS_ERR_EXIT_WITHOUT_ENTER);
    CHECK_RC(ts_force_exit(holder), TS_OK);
    CHECK_RC(ts_enter(b.s), TS_ADMITTED);
    ts_session_free(b.s);
    ts_session_free(holder);
    ts_gate_free(g);
}

static void gate_status_is_snprintf_like_nul_terminated_and_truncated_to_fit(void) {
    ts_gate *g = gate("classic", 4, 10);
    ts_session *s = ts_session_new(g, "conn-7");
    CHECK_RC(ts_enter(s), TS_ADMITTED);

    size_t need = ts_gate_status(g, NULL, 0);
    CHECK(need > 40);
    char *full = malloc(need + 1);
    CHECK(full != NULL);
    CHECK(ts_gate_status(g, full, need + 1) == need);
    CHECK(strlen(full) == need);
    CHECK(strstr(full, "1 queries inside") != NULL);
    CHECK(strstr(full, "conn-7") != NULL);

    char small[16];
    memset(small, 'X', sizeof small);
    CHECK(ts_gate_status(g, small, sizeof small) == need);
    CHECK(strlen(small) == sizeof small - 1);
    CHECK(memcmp(small, full, sizeof small - 1) == 0);

    char *exact = malloc(need); /* one byte short: loses the last character */
    CHECK(exact != NULL);
    CHECK(ts_gate_status(g, exact, need) == need);
    CHECK(strlen(exact) == need - 1);
    /* The session lines carry the time spent in a state, which moves between two calls:
     * only the text before them is the same in both. */
    const char *sessions = strstr(full, "---SESSION");
    CHECK(sessions != NULL);
    CHECK(memcmp(exact, full, (size_t)(sessions - full)) == 0);

    char one[2] = {'X', 'Y'};
    CHECK(ts_gate_status(g, one, 1) == need);
    CHECK(one[0] == '\0' && one[1] == 'Y');
    CHECK(ts_gate_status(g, one, 0) == need); /* len 0: nothing written */
    CHECK(one[0] == '\0' && one[1] == 'Y');

    free(exact);
    free(full);
    ts_session_free(s);
    ts_gate_free(g);
}

static void stats_fill_only_the_size_the_caller_states(void) {
    ts_gate *g = gate("flifo", 6, 10);
    union {
        ts_stats s;
        unsigned char bytes[sizeof(ts_stats)];
    } u;

    /* A caller built against an older, shorter ts_stats (up to `sessions`). */
    size_t old = offsetof(ts_stats, sleep_delay_ns);
    memset(&u, 0xAB, sizeof u);
    u.s.size = (uint32_t)old;
    CHECK_RC(ts_gate_stats(g, &u.s), TS_OK);
    CHECK(u.s.size == old);
    CHECK(u.s.version == TS_STATS_VERSION);
    CHECK(strcmp(u.s.policy, "flifo") == 0);
    CHECK(u.s.limit == 6 && u.s.tickets == 10 && u.s.inside == 0 && u.s.sessions == 0);
    for (size_t i = old; i < sizeof u; i++) CHECK(u.bytes[i] == 0xAB);

    /* Too small for even size and version: refused, nothing written. */
    memset(&u, 0xAB, sizeof u);
    u.s.size = TS_STATS_MIN_SIZE - 1;
    CHECK_RC(ts_gate_stats(g, &u.s), TS_ERR_SIZE);
    CHECK(u.s.size == TS_STATS_MIN_SIZE - 1);
    for (size_t i = sizeof u.s.size; i < sizeof u; i++) CHECK(u.bytes[i] == 0xAB);

    /* A caller built against version 1 (up to `taken_at_ns`): nothing of version 2. */
    size_t v1 = offsetof(ts_stats, lock_waiting);
    memset(&u, 0xAB, sizeof u);
    u.s.size = (uint32_t)v1;
    CHECK_RC(ts_gate_stats(g, &u.s), TS_OK);
    CHECK(u.s.size == v1);
    for (size_t i = v1; i < sizeof u; i++) CHECK(u.bytes[i] == 0xAB);

    /* A caller built against a newer, longer one: the library fills what it knows. */
    memset(&u, 0, sizeof u);
    u.s.size = sizeof(ts_stats) + 64;
    CHECK_RC(ts_gate_stats(g, &u.s), TS_OK);
    CHECK(u.s.size == sizeof(ts_stats));
    CHECK(u.s.sleep_delay_ns == 10000000); /* InnoDB's default 10 ms */
    CHECK(u.s.lock_waiting == 0);           /* nobody waits for flifo's lock */
    ts_gate_free(g);
}

struct mutex_probe {
    ts_mutex *m;
    int trylock_rc;
    int unlock_rc;
};

static void *probe_from_another_thread(void *arg) {
    struct mutex_probe *p = arg;
    p->trylock_rc = ts_mutex_trylock(p->m);
    p->unlock_rc = ts_mutex_unlock(p->m);
    return NULL;
}

static void mutex_refuses_relock_by_its_holder_and_unlock_by_anyone_else(void) {
    ts_mutex *m = ts_mutex_new();
    CHECK(m != NULL);
    CHECK_RC(ts_mutex_unlock(m), TS_ERR_NOT_OWNER); /* not locked */
    CHECK_RC(ts_mutex_lock(m), TS_OK);
    CHECK_RC(ts_mutex_lock(m), TS_ERR_DEADLOCK);
    CHECK_RC(ts_mutex_trylock(m), TS_BUSY);
    struct mutex_probe p = {m, 0, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, probe_from_another_thread, &p) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_RC(p.trylock_rc, TS_BUSY);
    CHECK_RC(p.unlock_rc, TS_ERR_NOT_OWNER);
    CHECK_RC(ts_mutex_unlock(m), TS_OK); /* still held by this thread until here */
    CHECK_RC(ts_mutex_unlock(m), TS_ERR_NOT_OWNER);
    CHECK_RC(ts_mutex_trylock(m), TS_OK);
    CHECK_RC(ts_mutex_unlock(m), TS_OK);
    /* Another thread may now take it. */
    CHECK(pthread_create(&t, NULL, probe_from_another_thread, &p) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_RC(p.trylock_rc, TS_OK);
    CHECK_RC(p.unlock_rc, TS_OK);
    ts_mutex_free(m);
}

/* Many threads through one gate, sharing one mutex. */
struct run {
    ts_gate *gate;
    ts_mutex *mutex;
    long counter;      /* guarded by mutex */
    atomic_int in_call; /* threads between ts_enter and ts_exit, by our own count */
    atomic_int max_in_call;
    uint32_t bound; /* the most the policy lets in at once; 0 = no bound */
    /* The most slots the gate's own `inside` gauge may count; 0 = not checked. For flifo the
     * count above (bound 2 x limit) rarely comes near its bound, so a gate letting one thread
     * too many in would pass it: the slot gauge, sampled while threads run, catches that. */
    uint32_t slot_bound;
    int calls;
    atomic_int ready; /* a start line: all threads begin together, so they contend */
    int threads;
    atomic_long admitted, reentered, readmitted, waits;
};

static void note_in_call(struct run *r) {
    int n = atomic_fetch_add(&r->in_call, 1) + 1;
    int max = atomic_load(&r->max_in_call);
    while (n > max && !atomic_compare_exchange_weak(&r->max_in_call, &max, n)) {
    }
    if (r->bound) CHECK((uint32_t)n <= r->bound);
}

static void *worker(void *arg) {
    struct run *r = arg;
    char name[32];
    snprintf(name, sizeof name, "worker-%p", (void *)&name);
    ts_session *s = ts_session_new(r->gate, name);
    CHECK(s != NULL);
    long admitted = 0, reentered = 0, readmitted = 0, waits = 0;
    atomic_fetch_add(&r->ready, 1);
    while (atomic_load(&r->ready) < r->threads) sched_yield();
    for (int i = 0; i < r->calls; i++) {
        int rc = ts_enter(s);
        CHECK(rc == TS_ADMITTED || rc == TS_OK);
        if (rc == TS_ADMITTED) admitted++;
        else reentered++;
        note_in_call(r);
        CHECK_RC(ts_mutex_lock(r->mutex), TS_OK);
        r->counter++;
        CHECK_RC(ts_mutex_unlock(r->mutex), TS_OK);
        if (i % 8 == 0) {
            if (r->slot_bound) CHECK(stats_of(r->gate).inside <= r->slot_bound);
            sched_yield(); /* let others run while this one is inside */
        }
        if (i % 100 == 50) {
            /* A disk read: the slot is freed for it, and taken again after it. */
            atomic_fetch_sub(&r->in_call, 1);
            CHECK_RC(ts_wait_begin(s, TS_WAIT_DISK_IO), TS_OK);
            sched_yield();
            CHECK_RC(ts_wait_end(s), TS_OK);
            waits++;
            readmitted++;
            note_in_call(r);
        }
        atomic_fetch_sub(&r->in_call, 1);
        CHECK_RC(ts_exit(s), TS_OK);
        if (i % 100 == 99) CHECK_RC(ts_force_exit(s), TS_OK); /* statement end */
    }
    ts_session_free(s);
    atomic_fetch_add(&r->admitted, admitted);
    atomic_fetch_add(&r->reentered, reentered);
    atomic_fetch_add(&r->readmitted, readmitted);
    atomic_fetch_add(&r->waits, waits);
    return NULL;
}

static void threads_never_exceed_the_limit_and_the_counters_add_up(const char *policy,
                                                                   int threads, int calls,
                                                                   uint32_t limit) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct run r;
    memset(&r, 0, sizeof r);
    if (strcmp(policy, "auto") == 0) {
        /* auto through ts_gate_new_with: its limit held where it is set, so the bound holds
         * a fixed number (the adaptive limit may otherwise grow on an idle machine). */
        ts_gate_options o;
        CHECK_RC(ts_gate_options_init_size(&o, sizeof o, "auto"), TS_OK);
        CHECK(o.size == sizeof o && o.size >= TS_GATE_OPTIONS_MIN_SIZE);
        o.limit = limit;
        o.adaptive_limit = 0;
        int st = 12345;
        r.gate = ts_gate_new_with(&o, &st);
        CHECK_RC(st, TS_OK);
        CHECK(r.gate != NULL);
    } else {
        r.gate = gate(policy, limit, 20);
    }
    r.mutex = ts_mutex_new();
    r.calls = calls;
    r.bound = strcmp(policy, "classic") == 0 || strcmp(policy, "polling") == 0 ? limit
              : strcmp(policy, "flifo") == 0                                  ? 2 * limit
              /* auto: FLIFO's extras (<= limit), and a thread parked on the turnstile mutex
               * lends its slot and may reclaim one above the limit: 3 x limit (ARCHITECTURE) */
              : strcmp(policy, "auto") == 0 ? 3 * limit
                                            : 0;
    /* polling and timer may count a thread mid-check in `inside` (see ts_stats). */
    r.slot_bound = strcmp(policy, "classic") == 0 || strcmp(policy, "flifo") == 0 ? limit : 0;
    r.threads = threads;
    pthread_t *ts = calloc((size_t)threads, sizeof *ts);
    CHECK(ts != NULL);
    for (int i = 0; i < threads; i++) CHECK(pthread_create(&ts[i], NULL, worker, &r) == 0);
    for (int i = 0; i < threads; i++) CHECK(pthread_join(ts[i], NULL) == 0);
    free(ts);

    long total = (long)threads * calls;
    CHECK(r.counter == total);
    CHECK(atomic_load(&r.in_call) == 0);
    CHECK(atomic_load(&r.max_in_call) >= 2); /* the threads did overlap inside */
    ts_stats st = stats_of(r.gate);
    CHECK(st.admissions == (uint64_t)(atomic_load(&r.admitted) + atomic_load(&r.readmitted)));
    CHECK(st.ticket_reentries == (uint64_t)atomic_load(&r.reentered));
    CHECK(st.admissions + st.ticket_reentries == (uint64_t)(total + atomic_load(&r.readmitted)));
    CHECK(st.step_outs == (uint64_t)atomic_load(&r.waits));
    CHECK(st.timeouts == 0 && st.cancellations == 0);
    CHECK(st.inside == 0 && st.waiting == 0 && st.stepped_out == 0 && st.sessions == 0);
    CHECK(st.wait_count == st.admissions);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    printf("%-9s %2d threads x %d calls, limit %u: at most %d in a call (bound %u), "
           "%llu admissions, %llu ticket re-entries, %llu sleeps, %llu queue waits, %.0f ms\n",
           policy, threads, calls, limit, atomic_load(&r.max_in_call), r.bound,
           (unsigned long long)st.admissions, (unsigned long long)st.ticket_reentries,
           (unsigned long long)st.sleeps, (unsigned long long)st.queue_waits, ms);
    ts_mutex_free(r.mutex);
    ts_gate_free(r.gate);
}

int main(void) {
    null_handles_give_ts_err_null_and_free_of_null_is_a_no_op();
    bad_names_settings_and_reasons_give_their_statuses();
    strerror_names_every_status_with_a_distinct_static_string();
    calls_out_of_order_give_one_status_per_misuse_and_change_nothing();
    enter_admits_once_then_spends_tickets_and_exit_keeps_the_slot_until_they_run_out();
    free_of_a_session_inside_ends_its_statement_and_the_slot_passes_on();
    a_row_lock_wait_re_enters_without_checking_the_limit();
    cancel_ends_a_blocked_enter_and_a_second_thread_on_the_session_gets_busy();
    gate_status_is_snprintf_like_nul_terminated_and_truncated_to_fit();
    stats_fill_only_the_size_the_caller_states();
    mutex_refuses_relock_by_its_holder_and_unlock_by_anyone_else();
    threads_never_exceed_the_limit_and_the_counters_add_up("classic", 16, 2000, 4);
    threads_never_exceed_the_limit_and_the_counters_add_up("polling", 16, 2000, 4);
    threads_never_exceed_the_limit_and_the_counters_add_up("flifo", 8, 500, 2);
    threads_never_exceed_the_limit_and_the_counters_add_up("timer", 8, 500, 2);
    threads_never_exceed_the_limit_and_the_counters_add_up("unlimited", 8, 500, 2);
    threads_never_exceed_the_limit_and_the_counters_add_up("auto", 8, 500, 2);
    printf("ok: %ld checks\n", atomic_load(&checks));
    return 0;
}
