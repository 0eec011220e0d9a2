//! The CPU scheduler: run queues, dispatch onto cores, time slices, wake-ups (their latency and
//! the waker's cost), wake-up preemption and yield. It decides which thread runs where and when;
//! what a running thread does next is the caller's ([`super::Sim`]'s program and gate steps).

use super::*;

impl Sim {
    pub(super) fn runnable_per_core(&self) -> f64 {
        (self.busy_now as usize + self.runq.len() + self.runq_woken.len()) as f64
            / self.m.cores as f64
    }

    /// Latency from a signal (or, with `base` = the timer slack, a timed sleep's end) to the
    /// thread being runnable: the base plus the scheduler's work per runnable thread per core.
    /// The wait for a core behind other runnable threads comes after, in the run queue.
    pub(super) fn wake_latency(&mut self, base: u64) -> u64 {
        let mean = base as f64 + self.m.wake_per_runnable_ns as f64 * self.runnable_per_core();
        if mean <= 0.0 {
            return 0;
        }
        match self.m.wake_distribution {
            Distribution::Fixed => mean as u64,
            Distribution::Exponential => self.rng.exp(mean) as u64,
        }
    }

    /// Signals each waiter a hand-off released (by `by`, see [`Sim::signal`]).
    pub(super) fn signal_all(&mut self, by: Option<Tid>, out: Vec<Release<Tid>>) {
        for r in out {
            self.signal(by, r.waiter);
        }
    }

    /// Signals `tid`: runnable after a wake-up latency. The thread `by` that made the call
    /// (none for a device) pays its CPU: `wake_call_idle_ns` when a core is idle to take the
    /// woken thread (the call must wake that CPU), `wake_call_ns` otherwise; charged to its
    /// next CPU burst.
    pub(super) fn signal(&mut self, by: Option<Tid>, tid: Tid) {
        let idle = self.cores.iter().any(|c| c.is_none());
        if let Some(w) = by {
            let cost = if idle {
                self.m.wake_call_idle_ns
            } else {
                self.m.wake_call_ns
            };
            self.threads[w as usize].owed_ns =
                self.threads[w as usize].owed_ns.saturating_add(cost);
        }
        self.threads[tid as usize].signalled_at = self.now;
        // Onto an idle core the wake-up must wake that core; with every core busy the woken
        // thread is queued at once (its wait for a core is the run queue's).
        let base = match self.m.wake_busy_ns {
            Some(busy) if !idle => busy,
            _ => self.m.wake_base_ns,
        };
        let l = self.wake_latency(base);
        if l == 0 {
            self.make_runnable(tid);
        } else {
            self.push(self.now.saturating_add(l), Ev::Ready { tid });
        }
    }

    /// A thread woken from a block: its operations that need no CPU (recording a completion,
    /// thinking, queueing for the disk or a mutex, a ticket re-entry, an exit) happen at once;
    /// it queues for a core only when it needs CPU or a gate decision. (Queueing theory's
    /// customers leave a device for the next one directly; without this, an instantaneous
    /// `Done` after a disk read would wait for a busy core and inflate response times.)
    pub(super) fn make_runnable(&mut self, tid: Tid) {
        if self.threads[tid as usize].resume == Resume::Advance {
            self.advance(None, tid);
        } else {
            self.enqueue_for_core(tid);
        }
    }

    /// A woken thread asks for a core: an idle one, or a place among the woken.
    pub(super) fn enqueue_for_core(&mut self, tid: Tid) {
        if let Some(core) = self.cores.iter().position(|c| c.is_none()) {
            self.dispatch(core as u32, tid);
        } else {
            self.runq_woken.push_back((tid, self.now));
            self.wakeup_preempt();
        }
    }

    /// Wake-up preemption: a thread just woken takes the core of the thread that has run
    /// longest in its current slice, if that is at least `wake_preempt_ns` (the slice's
    /// protection is over) and the thread is in a CPU burst (not switching, not spinning,
    /// not inside a bare line's read-modify-write). The preempted thread keeps the rest of
    /// its burst and waits among the preempted.
    pub(super) fn wakeup_preempt(&mut self) {
        let Some(min_run) = self.m.wake_preempt_ns else {
            return;
        };
        let mut best: Option<(u64, usize)> = None;
        for (c, t) in self.cores.iter().enumerate() {
            let Some(tid) = *t else { continue };
            let th = &self.threads[tid as usize];
            // Only in a CPU burst (not switching, not spinning on the gate's mutex).
            if !self.in_burst[c] || th.cpu_left == 0 {
                continue;
            }
            let in_rmw = self
                .gate_mutex
                .as_ref()
                .is_some_and(|m| !m.sleeps && m.holder == Some(tid));
            if in_rmw {
                continue;
            }
            let ran = self.now - self.slice_began[c];
            if ran >= min_run && best.is_none_or(|(r, _)| ran > r) {
                best = Some((ran, c));
            }
        }
        let Some((_, c)) = best else { return };
        let tid = self.cores[c].expect("a running thread");
        let ran = self.now - self.burst_start[c];
        self.burst_gen[c] += 1;
        self.in_burst[c] = false;
        if self.m.time_slice_ns > 0 {
            self.slice_left[c] = self.slice_left[c].saturating_sub(ran);
        }
        self.threads[tid as usize].cpu_left -= ran;
        self.threads[tid as usize].resume = Resume::Cpu;
        self.runq.push_back((tid, self.now));
        self.wake_preemptions += 1;
        self.release_core(c as u32);
        self.holder_preempted(tid);
    }

    /// The next thread for a free core: a woken thread that has waited a whole time slice,
    /// else a preempted thread that has waited a whole scheduling period, else the oldest
    /// woken thread, else the oldest preempted one. (A woken thread is not passed by the
    /// preempted ones once it has waited a slice: `turnstile calibrate`'s sleeper sweep finds a
    /// thread back from a sleep onto a CPU shared with up to 64 busy threads running within a
    /// slice, behind none of their turns. Without the first rule, many overdue
    /// preempted slot holders could keep the woken threads off the cores for whole periods.)
    pub(super) fn pick_next(&mut self) -> Option<Tid> {
        let woken_overdue = self
            .runq_woken
            .front()
            .is_some_and(|&(_, at)| self.now - at >= self.m.time_slice_ns);
        if let Some(&(tid, at)) = self.runq.front() {
            if self.runq_woken.is_empty() || (!woken_overdue && self.now - at >= SCHED_LATENCY_NS) {
                self.runq.pop_front();
                return Some(tid);
            }
        }
        self.runq_woken.pop_front().map(|(t, _)| t)
    }

    pub(super) fn dispatch(&mut self, core: u32, tid: Tid) {
        let c = core as usize;
        self.cores[c] = Some(tid);
        self.account_busy();
        self.busy_now += 1;
        self.slice_left[c] = self.m.time_slice_ns;
        self.slice_began[c] = self.now;
        let mut cost = self.m.context_switch_ns;
        if self.last_ran[c] != Some(tid) {
            cost =
                self.switch_to_other_ns + self.refill_override_ns.unwrap_or(self.m.cache_refill_ns);
        }
        self.last_ran[c] = Some(tid);
        self.switch_ns += cost;
        if cost > 0 {
            self.push(self.now.saturating_add(cost), Ev::Switched { core, tid });
        } else {
            self.resume(core, tid);
        }
    }

    /// The core (if the thread had one) gives up its thread and takes the next runnable one.
    pub(super) fn release(&mut self, core: Option<u32>) {
        if let Some(c) = core {
            self.release_core(c);
        }
    }

    /// The core gives up `tid` (blocked or preempted) and takes the next runnable thread.
    pub(super) fn release_core(&mut self, core: u32) {
        self.cores[core as usize] = None;
        self.account_busy();
        self.busy_now -= 1;
        self.switches += 1;
        if let Some(next) = self.pick_next() {
            self.dispatch(core, next);
        }
    }

    pub(super) fn any_waiting_for_core(&self) -> bool {
        !self.runq.is_empty() || !self.runq_woken.is_empty()
    }

    /// Runs `tid`'s CPU work on `core` for the rest of its slice (the slice counts from the
    /// dispatch, across bursts); a thread whose slice is used up yields the core if anyone
    /// waits for it.
    pub(super) fn start_cpu(&mut self, core: u32, tid: Tid) {
        let t = &mut self.threads[tid as usize];
        t.cpu_left = t.cpu_left.saturating_add(std::mem::take(&mut t.owed_ns));
        let left = t.cpu_left;
        let run = if self.m.time_slice_ns == 0 {
            left
        } else {
            let c = core as usize;
            // A bare line's read-modify-write is one instruction: never preempted halfway.
            let in_rmw = self
                .gate_mutex
                .as_ref()
                .is_some_and(|m| !m.sleeps && m.holder == Some(tid));
            // Past its slice's protection, a thread gives the core to a woken one waiting.
            let protected_for = self
                .m
                .wake_preempt_ns
                .map(|p| (self.slice_began[c] + p).saturating_sub(self.now));
            let yield_to_woken = protected_for == Some(0) && !self.runq_woken.is_empty();
            // A thread that has just taken the gate's mutex runs its critical section (a few
            // hundred ns) before a preemption that falls due now: a real preemption lands at
            // an instant, inside the section only in proportion to its length, while this
            // model checks for one at every burst start, and a section's start is one right
            // after the lock is taken (left to itself, the model would preempt every holder
            // there, none mid-section). The yield is checked again when the section's burst
            // ends.
            let starts_section = self.gate_mutex.as_ref().is_some_and(|m| {
                m.sleeps
                    && m.holder == Some(tid)
                    && self.threads[tid as usize].after_cpu == Resume::GateCritical
            });
            if (self.slice_left[c] == 0 || yield_to_woken)
                && starts_section
                && self.any_waiting_for_core()
            {
                left
            } else {
                if self.slice_left[c] == 0 || yield_to_woken {
                    if !in_rmw && self.any_waiting_for_core() {
                        if self.slice_left[c] > 0 {
                            self.wake_preemptions += 1;
                        }
                        self.threads[tid as usize].resume = Resume::Cpu;
                        self.runq.push_back((tid, self.now));
                        self.release_core(core);
                        self.holder_preempted(tid);
                        return;
                    }
                    if self.slice_left[c] == 0 {
                        self.slice_left[c] = self.m.time_slice_ns;
                        self.slice_began[c] = self.now;
                    }
                }
                // A burst that would run past the protection's end stops there, so a woken
                // thread already waiting takes the core at that moment.
                match protected_for {
                    Some(p) if p > 0 => left.min(self.slice_left[c]).min(p),
                    _ => left.min(self.slice_left[c]),
                }
            }
        };
        let c = core as usize;
        self.burst_start[c] = self.now;
        self.in_burst[c] = true;
        self.push(
            self.now.saturating_add(run),
            Ev::SliceDone {
                core,
                tid,
                ran: run,
                gen: self.burst_gen[c],
            },
        );
    }

    pub(super) fn slice_done(&mut self, core: u32, tid: Tid, ran: u64) {
        if self.m.time_slice_ns > 0 {
            // A critical section run past its slice's end (see `start_cpu`) leaves it at 0.
            self.slice_left[core as usize] = self.slice_left[core as usize].saturating_sub(ran);
        }
        self.threads[tid as usize].cpu_left -= ran;
        if self.threads[tid as usize].cpu_left > 0 {
            self.start_cpu(core, tid);
            return;
        }
        let next = std::mem::replace(&mut self.threads[tid as usize].after_cpu, Resume::Advance);
        self.continue_with(core, tid, next);
    }

    pub(super) fn resume(&mut self, core: u32, tid: Tid) {
        let r = std::mem::replace(&mut self.threads[tid as usize].resume, Resume::Advance);
        self.continue_with(core, tid, r);
    }

    /// Goes on with `tid` running on `core`, as `r` says.
    pub(super) fn continue_with(&mut self, core: u32, tid: Tid, r: Resume) {
        match r {
            Resume::Cpu => self.start_cpu(core, tid),
            Resume::Advance => self.advance(Some(core), tid),
            Resume::RetryEnter => {
                if self.gate_call(Some(core), tid, GateAction::Enter) {
                    self.advance(Some(core), tid);
                }
            }
            Resume::FinishWait(id) => {
                let latency = self.now - self.threads[tid as usize].signalled_at;
                self.gate_counts.handoff_latency_sum += latency as f64;
                self.gate_counts.handoff_resumes += 1;
                if self.gate_call(Some(core), tid, GateAction::Finish(id)) {
                    self.advance(Some(core), tid);
                }
            }
            Resume::GateMutex => {
                let a = self.threads[tid as usize]
                    .pending
                    .take()
                    .expect("a thread back for the gate mutex has an action pending");
                if self.gate_call(Some(core), tid, a) {
                    self.advance(Some(core), tid);
                }
            }
            Resume::GateCritical => {
                let a = self.threads[tid as usize]
                    .pending
                    .take()
                    .expect("a critical section has its action");
                let go_on = self.gate_decide(core, tid, a);
                if self.gate_mutex.is_some() {
                    self.unlock_gate_mutex(tid);
                }
                if go_on {
                    self.advance(Some(core), tid);
                }
            }
        }
    }
}
