//! `--thread-handling pool-of-threads`: connections wait for their next command in epoll,
//! without a thread, and worker threads run one command at a time for whichever connection
//! has one (MariaDB's and Percona's thread pool, MySQL Enterprise's).
//!
//! A connection is its protocol future ([`crate::shim::connection`]). Its reader returns
//! `Pending` only between two commands, when no byte of the next one has arrived
//! ([`Idle::poll_ready`]): the connection is then armed in epoll (one-shot) and its worker
//! takes the next ready connection. Within a command everything stays blocking on the worker,
//! as with a thread per connection, so a statement runs start to end on one thread and the
//! gate sees that thread make every call.
//!
//! How many workers run is the gate's decision, not a setting: a connection with a command is
//! queued here, and a new worker starts only when no worker is idle and the gate would take
//! one more ([`gate_has_room`]): as many active as its limit, one more per worker stepped out
//! for a declared wait (row lock, commit), and one spare that waits at the gate, which is how
//! `auto` sees demand (a queue). A faithful policy then behaves as MariaDB's pool with
//! `thread_pool_size` = the limit. When every worker is stuck in an undeclared wait, the
//! gate's own stall watch raises the limit, and the poller's check (each millisecond while
//! the pool has workers) starts a worker for it. Idle workers wait in epoll themselves, so a
//! command wakes one thread, which runs it: no hand-off from a listener. Idle connections
//! cost no thread; idle workers leave after [`IDLE_TIMEOUT`].

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// A connection's protocol loop.
pub(crate) type ConnFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Run once when a connection's future ends; `true` when it panicked.
pub(crate) type Finish = Box<dyn FnOnce(bool) + Send>;

/// How long an idle worker waits for work before it leaves: MariaDB's
/// `thread_pool_idle_timeout` default.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The poller's tick while the pool has workers: how late a worker starts after a slot frees
/// for a declared wait, or a command is seen while every worker is busy. A millisecond is
/// below a row-lock wait worth stepping out for, and a wake-up per millisecond costs a few
/// microseconds of one CPU per millisecond.
const BACKLOG_TICK_MS: i32 = 1;

/// The poller's tick without workers (an idle server's): `wait_timeout` is set in seconds.
const IDLE_TICK_MS: i32 = 1000;

/// The token of the queue's eventfd; connections' tokens are their ids.
const QUEUE_TOKEN: u64 = u64::MAX;

thread_local! {
    /// Set while a worker wakes the connection it took from epoll, so that the wake-up hands
    /// the connection to this worker instead of queuing it for another.
    static CLAIM: std::cell::RefCell<Option<Option<Arc<Task>>>> =
        const { std::cell::RefCell::new(None) };
}

/// Whether a pool with `active` workers (not idle) should start another, from the gate's
/// occupancy: a worker runs a whole command, in the gate or not (reading, parsing, writing),
/// so the pool keeps as many active as the gate's limit, plus one for each stepped out for a
/// declared wait (its slot runs another), plus one spare — unless someone already waits at
/// the gate, which is then the spare: the queue `auto` reads as demand. An unlimited gate
/// takes any number.
pub(crate) fn gate_has_room(o: turnstile::Occupancy, active: usize) -> bool {
    o.limit == 0 || (o.waiting == 0 && active < (o.limit + o.stepped_out) as usize + 1)
}

/// The pool: the run queue, its workers and the poller.
pub(crate) struct Pool {
    /// Idle connections (one-shot) and `queue_fd`; idle workers wait in it.
    epoll: RawFd,
    /// An eventfd in `epoll`, written when a task is queued for an idle worker, and at stop.
    queue_fd: RawFd,
    /// The poller's own epoll set: `stop_fd` only, so that it sleeps its tick wakeably.
    timer_epoll: RawFd,
    /// An eventfd in `timer_epoll`, written at stop.
    stop_fd: RawFd,
    run: Mutex<RunQueue>,
    /// Connections waiting in epoll for their next command, by token.
    armed: Mutex<HashMap<u64, Armed>>,
    stopping: AtomicBool,
    /// Workers blocked now in a read or write on a client's socket that was not ready
    /// ([`ClientIo`]): they wait on the client, not on the engine, so they do not count as
    /// active — clients that connect and say nothing, or stop halfway through a packet or a
    /// result, cannot hold every worker.
    on_clients: AtomicUsize,
    /// Whether the gate would take another worker, given the workers active now
    /// ([`Pool::may_start`]).
    gate_has_room: Box<dyn Fn(usize) -> bool + Send + Sync>,
    max_threads: usize,
    stack: usize,
}

#[derive(Default)]
struct RunQueue {
    tasks: VecDeque<Arc<Task>>,
    workers: usize,
    /// Workers waiting in epoll for a connection's command or a queued task (each takes one
    /// of `tasks` when it wakes).
    idle: usize,
    /// Workers started that have not taken their first task yet: counted as the one waiting
    /// at the gate, so a burst of commands starts one worker at a time.
    starting: usize,
}

struct Armed {
    waker: Waker,
    deadline: Instant,
    woke: Arc<AtomicU8>,
}

/// Why an armed connection was woken ([`Idle::woke`]).
const WOKE_NOT: u8 = 0;
/// epoll saw its socket readable (a command's first byte, or the end of the stream).
const WOKE_READY: u8 = 1;
/// Its `wait_timeout` passed first.
const WOKE_TIMED_OUT: u8 = 2;

/// What an idle worker's wait in epoll brought.
enum Listened {
    /// A connection with a command, for this worker to run.
    Connection(Arc<Task>),
    /// A task may be queued.
    Queue,
    /// Nothing for [`IDLE_TIMEOUT`].
    Nothing,
}

/// One connection.
struct Task {
    pool: Arc<Pool>,
    future: Mutex<Option<ConnFuture>>,
    finish: Mutex<Option<Finish>>,
    /// In the run queue (or about to be): a second wake-up does not queue it twice.
    scheduled: AtomicBool,
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            self.pool.schedule(self.clone());
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Pool {
    /// A pool of at most `max_threads` workers with `stack` bytes of stack each;
    /// `gate_has_room(active)` says whether the gate would take another worker beside the
    /// `active` ones. Starts the poller.
    pub(crate) fn start(
        max_threads: usize,
        stack: usize,
        gate_has_room: Box<dyn Fn(usize) -> bool + Send + Sync>,
    ) -> io::Result<Arc<Pool>> {
        let mut fds = Vec::new();
        let made = (|| -> io::Result<()> {
            for _ in 0..2 {
                // SAFETY: a plain syscall with constant flags; checked before use.
                let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                fds.push(fd);
            }
            // The queue's eventfd counts signals (a semaphore): each wakes one idle worker, so a
            // worker that takes one cannot swallow another's, which would leave a task queued
            // beside a worker asleep.
            for semaphore in [libc::EFD_SEMAPHORE, 0] {
                // SAFETY: as above.
                let fd =
                    unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK | semaphore) };
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                fds.push(fd);
            }
            Ok(())
        })();
        if let Err(e) = made {
            for fd in fds {
                // SAFETY: each was opened above and is closed once.
                unsafe { libc::close(fd) };
            }
            return Err(e);
        }
        let pool = Arc::new(Pool {
            epoll: fds[0],
            timer_epoll: fds[1],
            queue_fd: fds[2],
            stop_fd: fds[3],
            run: Mutex::new(RunQueue::default()),
            armed: Mutex::new(HashMap::new()),
            stopping: AtomicBool::new(false),
            on_clients: AtomicUsize::new(0),
            gate_has_room,
            max_threads: max_threads.max(1),
            stack,
        });
        // Level-triggered: it stays readable until a worker reads it, and at stop it is never
        // read, so every worker waiting wakes.
        pool.ctl(
            pool.epoll,
            libc::EPOLL_CTL_ADD,
            pool.queue_fd,
            libc::EPOLLIN as u32,
            QUEUE_TOKEN,
        )?;
        pool.ctl(
            pool.timer_epoll,
            libc::EPOLL_CTL_ADD,
            pool.stop_fd,
            libc::EPOLLIN as u32,
            QUEUE_TOKEN,
        )?;
        let p = pool.clone();
        std::thread::Builder::new()
            .name("pool-poller".into())
            .spawn(move || p.poller())?;
        Ok(pool)
    }

    fn ctl(
        &self,
        epoll: RawFd,
        op: libc::c_int,
        fd: RawFd,
        events: u32,
        token: u64,
    ) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: both epoll sets are open for the pool's life; `fd` is open (the caller
        // holds it); `ev` lives across the call.
        if unsafe { libc::epoll_ctl(epoll, op, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Runs `future` (a connection) on the pool; `finish` runs once when it ends.
    pub(crate) fn spawn(self: &Arc<Pool>, future: ConnFuture, finish: Finish) {
        let task = Arc::new(Task {
            pool: self.clone(),
            future: Mutex::new(Some(future)),
            finish: Mutex::new(Some(finish)),
            scheduled: AtomicBool::new(true),
        });
        self.schedule(task);
    }

    /// The waiter a connection's reader uses between commands.
    pub(crate) fn idle_waiter(
        self: &Arc<Pool>,
        token: u32,
        fd: RawFd,
        wait_timeout: Duration,
    ) -> Idle {
        Idle {
            pool: self.clone(),
            token: token as u64,
            fd,
            wait_timeout,
            registered: false,
            woke: Arc::new(AtomicU8::new(WOKE_NOT)),
        }
    }

    fn schedule(self: &Arc<Pool>, task: Arc<Task>) {
        let task = match CLAIM.with(|c| match c.borrow_mut().as_mut() {
            Some(slot) if slot.is_none() => {
                *slot = Some(task);
                None
            }
            _ => Some(task),
        }) {
            Some(t) => t,
            None => return,
        };
        let mut q = lock(&self.run);
        q.tasks.push_back(task);
        if q.idle >= q.tasks.len() {
            self.signal(self.queue_fd);
        } else {
            self.may_start(&mut q);
        }
    }

    /// Takes one signal from the queue's eventfd, unless stopping (then it stays readable, so
    /// that every worker waiting wakes).
    fn take_queue_signal(&self) {
        if !self.stopping.load(Ordering::Acquire) {
            let mut count = 0u64;
            // SAFETY: an eventfd read takes exactly 8 bytes into `count` (1, as a semaphore);
            // non-blocking, so a thread that lost the race reads nothing.
            unsafe { libc::read(self.queue_fd, (&mut count as *mut u64).cast(), 8) };
        }
    }

    fn signal(&self, eventfd: RawFd) {
        let one: u64 = 1;
        // SAFETY: an open eventfd of the pool's; an eventfd write takes exactly 8 bytes.
        unsafe { libc::write(eventfd, (&one as *const u64).cast(), 8) };
    }

    /// Starts a worker if commands wait that no idle worker will take, the pool is below its
    /// bound, and the gate would take another thread (see [`gate_has_room`]).
    fn may_start(self: &Arc<Pool>, q: &mut RunQueue) {
        let active = q.workers - q.idle;
        if q.tasks.len() <= q.idle || q.workers >= self.max_threads || q.starting > 0 {
            return;
        }
        // While stopping, connections are drained whatever the gate says.
        let on_clients = self.on_clients.load(Ordering::Relaxed);
        if !(self.stopping.load(Ordering::Acquire)
            || (self.gate_has_room)(active.saturating_sub(on_clients)))
        {
            return;
        }
        let p = self.clone();
        let started = std::thread::Builder::new()
            .name("pool-worker".into())
            .stack_size(self.stack)
            .spawn(move || p.worker());
        match started {
            Ok(_) => {
                q.workers += 1;
                q.starting += 1;
            }
            // Out of threads: the workers there are take the commands in turn.
            Err(e) => eprintln!("turnstile serve: cannot start a pool worker: {e}"),
        }
    }

    fn worker(self: Arc<Pool>) {
        self.serve();
    }

    /// A worker's loop, until it leaves (idle for [`IDLE_TIMEOUT`], or the pool stops).
    fn serve(self: &Arc<Pool>) {
        let mut first = true;
        loop {
            let queued = {
                let mut q = lock(&self.run);
                if first {
                    q.starting -= 1;
                    first = false;
                }
                let t = q.tasks.pop_front();
                if t.is_none() {
                    if self.stopping.load(Ordering::Acquire) {
                        q.workers -= 1;
                        return;
                    }
                    q.idle += 1;
                }
                t
            };
            let task = match queued {
                Some(t) => t,
                None => {
                    let got = self.listen();
                    let mut q = lock(&self.run);
                    q.idle -= 1;
                    match got {
                        Listened::Connection(t) => t,
                        Listened::Queue => continue,
                        Listened::Nothing => {
                            if q.tasks.is_empty() && !self.stopping.load(Ordering::Acquire) {
                                q.workers -= 1;
                                return;
                            }
                            continue;
                        }
                    }
                }
            };
            self.poll_task(&task);
        }
    }

    /// An idle worker's wait: in epoll, for a connection's next command (which it then runs
    /// itself, with no hand-off to another thread) or a queued task.
    fn listen(&self) -> Listened {
        let mut ev = [libc::epoll_event { events: 0, u64: 0 }];
        // SAFETY: `ev` has room for the one entry asked for.
        let n = unsafe {
            libc::epoll_wait(
                self.epoll,
                ev.as_mut_ptr(),
                1,
                IDLE_TIMEOUT.as_millis() as i32,
            )
        };
        if n <= 0 {
            return Listened::Nothing;
        }
        let token = ev[0].u64;
        if token == QUEUE_TOKEN {
            self.take_queue_signal();
            return Listened::Queue;
        }
        let Some(armed) = lock(&self.armed).remove(&token) else {
            return Listened::Queue;
        };
        armed.woke.store(WOKE_READY, Ordering::Release);
        CLAIM.with(|c| *c.borrow_mut() = Some(None));
        armed.waker.wake();
        match CLAIM.with(|c| c.borrow_mut().take()).flatten() {
            Some(t) => Listened::Connection(t),
            // Already queued by another wake-up: take it from the queue.
            None => Listened::Queue,
        }
    }

    /// Polls a connection once: to its next idle point between commands, or to its end.
    fn poll_task(&self, task: &Arc<Task>) {
        // Cleared first: a wake-up from here on queues the connection again.
        task.scheduled.store(false, Ordering::Release);
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        let mut slot = lock(&task.future);
        let Some(fut) = slot.as_mut() else {
            return;
        };
        let polled =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.as_mut().poll(&mut cx)));
        let panicked = match polled {
            Ok(Poll::Pending) => return,
            Ok(Poll::Ready(())) => false,
            Err(_) => true,
        };
        // Dropping the connection rolls back its transaction and frees its slot; a panic
        // there (a bug) must not take the worker with it.
        let fut = slot.take();
        drop(slot);
        let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(fut)));
        if let Some(finish) = lock(&task.finish).take() {
            finish(panicked || dropped.is_err());
        }
    }

    /// Waits in epoll for `idle`'s socket to become readable, or its `wait_timeout`; `false`
    /// when the pool is stopping (nothing will wake it: the caller reads the socket's end).
    fn arm(&self, idle: &mut Idle, waker: Waker) -> io::Result<bool> {
        if self.stopping.load(Ordering::Acquire) {
            return Ok(false);
        }
        lock(&self.armed).insert(
            idle.token,
            Armed {
                waker,
                deadline: Instant::now() + idle.wait_timeout,
                woke: idle.woke.clone(),
            },
        );
        // One-shot: the connection is handed to one worker per readiness, and re-armed when
        // it is idle again. Level-triggered, so bytes that came before this call still count.
        let events = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLONESHOT) as u32;
        let op = if idle.registered {
            libc::EPOLL_CTL_MOD
        } else {
            libc::EPOLL_CTL_ADD
        };
        if let Err(e) = self.ctl(self.epoll, op, idle.fd, events, idle.token) {
            lock(&self.armed).remove(&idle.token);
            return Err(e);
        }
        idle.registered = true;
        Ok(true)
    }

    /// The pool's clock: closes connections silent for `wait_timeout`; when no worker waits
    /// in epoll, takes the connections with a command there to the queue (all busy: a look
    /// each tick, never a wait that a command would wake; no workers yet: a wait); and starts
    /// a worker when the gate has room — a slot freed by a declared wait or raised by the
    /// stall watch reaches the pool here, at the latest one tick later.
    fn poller(self: Arc<Pool>) {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        let mut next_expiry = Instant::now() + Duration::from_millis(IDLE_TICK_MS as u64);
        loop {
            let workers = {
                let mut q = lock(&self.run);
                self.may_start(&mut q);
                q.workers
            };
            let tick = if workers > 0 {
                BACKLOG_TICK_MS
            } else {
                IDLE_TICK_MS
            };
            if workers > 0 {
                let mut stop = [libc::epoll_event { events: 0, u64: 0 }];
                // SAFETY: `stop` has room for the one entry asked for.
                unsafe { libc::epoll_wait(self.timer_epoll, stop.as_mut_ptr(), 1, tick) };
                if self.stopping.load(Ordering::Acquire) {
                    break;
                }
            }
            // With workers, only a look at the backlog: a worker that finishes a command takes
            // the next ready connection from epoll itself, with no wake-up of this thread in
            // between. Without workers, this thread is the one that waits for a command.
            let look = if workers > 0 { 0 } else { tick };
            if workers == 0 || lock(&self.run).idle == 0 {
                // SAFETY: `events` has room for `events.len()` entries.
                let n = unsafe {
                    libc::epoll_wait(
                        self.epoll,
                        events.as_mut_ptr(),
                        events.len() as libc::c_int,
                        look,
                    )
                };
                if self.stopping.load(Ordering::Acquire) {
                    break;
                }
                let mut took_signal = false;
                let ready: Vec<Waker> = {
                    let mut armed = lock(&self.armed);
                    events[..n.max(0) as usize]
                        .iter()
                        .filter_map(|ev| match ev.u64 {
                            QUEUE_TOKEN => {
                                self.take_queue_signal();
                                took_signal = true;
                                None
                            }
                            t => armed.remove(&t).map(|a| {
                                a.woke.store(WOKE_READY, Ordering::Release);
                                a.waker
                            }),
                        })
                        .collect()
                };
                // The signal was meant for an idle worker (one may have gone idle after the
                // look above was decided, or while this thread waited): pass it on, or that
                // worker sleeps in epoll for its idle timeout beside a queued connection.
                if took_signal {
                    let q = lock(&self.run);
                    if q.idle > 0 && !q.tasks.is_empty() {
                        self.signal(self.queue_fd);
                    }
                }
                for w in ready {
                    w.wake();
                }
            }
            let now = Instant::now();
            if now >= next_expiry {
                next_expiry = now + Duration::from_millis(IDLE_TICK_MS as u64);
                let expired: Vec<Waker> = {
                    let mut armed = lock(&self.armed);
                    let gone: Vec<u64> = armed
                        .iter()
                        .filter(|(_, a)| a.deadline <= now)
                        .map(|(t, _)| *t)
                        .collect();
                    gone.into_iter()
                        .filter_map(|t| armed.remove(&t))
                        .map(|a| {
                            a.woke.store(WOKE_TIMED_OUT, Ordering::Release);
                            a.waker
                        })
                        .collect()
                };
                for w in expired {
                    w.wake();
                }
            }
        }
        // Stopping: every waiting connection is polled once more and finds its socket shut.
        let all: Vec<Waker> = lock(&self.armed).drain().map(|(_, a)| a.waker).collect();
        for w in all {
            w.wake();
        }
    }

    /// Stops the poller; workers finish the connections queued (their sockets are shut by
    /// then) and leave. Connections in a statement finish it on their own.
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.signal(self.stop_fd);
        // Never read once stopping: every worker waiting in epoll wakes and leaves.
        self.signal(self.queue_fd);
    }

    /// Worker threads now, and how many of them are idle (for status).
    pub(crate) fn workers(&self) -> (usize, usize) {
        let q = lock(&self.run);
        (q.workers, q.idle)
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for fd in [self.stop_fd, self.queue_fd, self.timer_epoll, self.epoll] {
            // SAFETY: the pool's own descriptors, closed once, here.
            unsafe { libc::close(fd) };
        }
    }
}

/// A pooled connection's socket calls: each tries the socket without blocking first, and only
/// a call that finds it not ready (nothing to read, no room to write) blocks, counted in
/// `Pool::on_clients` for as long as it does.
#[derive(Clone)]
pub(crate) struct ClientIo {
    pool: Arc<Pool>,
    /// The connection's socket; open while the connection's future, which owns the socket
    /// and this, is alive.
    fd: RawFd,
}

impl ClientIo {
    /// Reads into `buf`: what the socket has now, or else `blocking(buf)`, the socket's own
    /// read with its timeout, as a wait on the client.
    pub(crate) fn read(
        &self,
        buf: &mut [u8],
        blocking: impl FnOnce(&mut [u8]) -> io::Result<usize>,
    ) -> io::Result<usize> {
        // SAFETY: `buf` is valid for `buf.len()` bytes of writes; `fd` is open (the field).
        let now = || unsafe {
            libc::recv(
                self.fd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        match without_blocking(now) {
            Some(r) => r,
            None => self.waiting(|| blocking(buf)),
        }
    }

    /// Writes from `buf`: as much as the socket takes now, or else `blocking(buf)` as a wait
    /// on the client.
    pub(crate) fn write(
        &self,
        buf: &[u8],
        blocking: impl FnOnce(&[u8]) -> io::Result<usize>,
    ) -> io::Result<usize> {
        // SAFETY: `buf` is valid for `buf.len()` bytes of reads; `fd` is open (the field).
        // MSG_NOSIGNAL: a closed peer is an EPIPE error, as std's own writes make it.
        let now = || unsafe {
            libc::send(
                self.fd,
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        match without_blocking(now) {
            Some(r) => r,
            None => self.waiting(|| blocking(buf)),
        }
    }

    fn waiting<T>(&self, io: impl FnOnce() -> T) -> T {
        struct Done<'a>(&'a AtomicUsize);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.pool.on_clients.fetch_add(1, Ordering::Relaxed);
        // Undone on unwind too: a count left raised would let the pool past the gate for good.
        let _done = Done(&self.pool.on_clients);
        io()
    }
}

/// A non-blocking socket call's outcome: its byte count or error, or `None` when it would
/// block. An interrupted call is made again.
fn without_blocking(mut call: impl FnMut() -> isize) -> Option<io::Result<usize>> {
    loop {
        let n = call();
        if n >= 0 {
            return Some(Ok(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return None,
            _ => return Some(Err(e)),
        }
    }
}

/// A connection's wait for its next command, used by its reader ([`crate::wire`]).
pub(crate) struct Idle {
    pool: Arc<Pool>,
    token: u64,
    /// The connection's socket; open while the connection's future, which owns the socket,
    /// is alive, and this is part of that future.
    fd: RawFd,
    wait_timeout: Duration,
    /// Added to the epoll set once; re-armed with `EPOLL_CTL_MOD` after.
    registered: bool,
    /// Why the last wait in epoll ended, set before its wake-up.
    woke: Arc<AtomicU8>,
}

impl Idle {
    /// What the same connection's socket reads and writes go through.
    pub(crate) fn client_io(&self) -> ClientIo {
        ClientIo {
            pool: self.pool.clone(),
            fd: self.fd,
        }
    }

    /// Ready when epoll has seen a byte of the next command (or the end of the stream);
    /// otherwise arms the connection in epoll and returns `Pending`, freeing the worker. An
    /// error after `wait_timeout` of silence, as the blocking read's timeout is with a thread
    /// per connection.
    pub(crate) fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.woke.swap(WOKE_NOT, Ordering::AcqRel) {
            WOKE_READY => return Poll::Ready(Ok(())),
            WOKE_TIMED_OUT => {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "silent for wait_timeout ({} s)",
                        self.wait_timeout.as_secs()
                    ),
                )))
            }
            // First time here, or a wake-up that was not epoll's: look, then wait.
            _ => {}
        }
        // A look first: a client that answers at once has often sent its next command while
        // the worker wrote the last result, and then no wait in epoll is needed at all.
        loop {
            let mut byte = 0u8;
            // SAFETY: a one-byte peek into `byte`, which outlives the call; `fd` is open
            // (see the field).
            let n = unsafe {
                libc::recv(
                    self.fd,
                    (&mut byte as *mut u8).cast(),
                    1,
                    libc::MSG_PEEK | libc::MSG_DONTWAIT,
                )
            };
            if n >= 0 {
                return Poll::Ready(Ok(()));
            }
            match io::Error::last_os_error().kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => break,
                // The read that follows reports it.
                _ => return Poll::Ready(Ok(())),
            }
        }
        let pool = self.pool.clone();
        match pool.arm(self, cx.waker().clone()) {
            Ok(true) => Poll::Pending,
            // Stopping: the read that follows finds the socket shut.
            Ok(false) => Poll::Ready(Ok(())),
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

impl Drop for Idle {
    fn drop(&mut self) {
        // The socket may outlive the connection's future by a moment (the server's handle
        // for shutdown): take it out of the epoll set and the armed map now.
        if self.registered {
            let pool = &self.pool;
            let _ = pool.ctl(pool.epoll, libc::EPOLL_CTL_DEL, self.fd, 0, self.token);
        }
        lock(&self.pool.armed).remove(&self.token);
    }
}
