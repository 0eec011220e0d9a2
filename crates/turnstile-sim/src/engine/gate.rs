//! Driving the gate: a thread's calls into the policy cores (`turnstile::sim`), the gate's
//! own mutex for the policies that have one, admission, yield and leaving — the same
//! decisions as the real gate, with their CPU cost charged on the simulated cores.

use super::*;

impl Sim {
    /// Runs gate action `a` for `tid` (on `core`, or needing one when `None`): at once if the
    /// gate has no mutex, else after taking the gate's mutex and running its critical section.
    /// Returns true if the thread goes on running its program now.
    pub(super) fn gate_call(&mut self, core: Option<u32>, tid: Tid, a: GateAction) -> bool {
        if self.gate_mutex.is_none() && self.gate_call_ns == 0 {
            return match core {
                Some(c) => self.gate_decide(c, tid, a),
                None => {
                    debug_assert_eq!(a, GateAction::Exit, "only exits need no core");
                    self.leave_gate(tid);
                    true
                }
            };
        }
        let Some(c) = core else {
            self.threads[tid as usize].pending = Some(a);
            self.threads[tid as usize].resume = Resume::GateMutex;
            self.enqueue_for_core(tid);
            return false;
        };
        self.threads[tid as usize].pending = Some(a);
        if self.threads[tid as usize].owed_ns > 0 {
            // What the thread owes for calls made after its last burst (waking a waiter its
            // exit released) is paid before it takes the gate's mutex: the real driver
            // signals after unlocking, not inside the next critical section, which the cost
            // (a µs against a section's tens of ns) would have stretched many times over.
            let t = &mut self.threads[tid as usize];
            t.after_cpu = Resume::GateMutex;
            self.start_cpu(c, tid);
            return false;
        }
        let Some(m) = self.gate_mutex.as_mut() else {
            let t = &mut self.threads[tid as usize];
            t.cpu_left = self.gate_call_ns;
            t.after_cpu = Resume::GateCritical;
            self.start_cpu(c, tid);
            return false;
        };
        match m.holder {
            None => self.take_gate_mutex(c, tid),
            Some(h)
                if !m.sleeps
                    || (self.cores.contains(&Some(h))
                        && (m.spinners.len() as u64 + 1)
                            * (self.m.mutex_handoff_ns + self.gate_call_ns)
                            <= SPIN_BUDGET_NS) =>
            {
                // The holder runs its short critical section: spin on this core.
                m.spinners.push_back((tid, c));
                self.gate_counts.mutex_spins += 1;
            }
            Some(_) => {
                m.sleepers.push_back(tid);
                self.gate_counts.mutex_waits += 1;
                self.threads[tid as usize].resume = Resume::GateMutex;
                self.release_core(c);
            }
        }
        false
    }

    /// `tid`, running on `core`, takes the free gate mutex and runs its critical section.
    pub(super) fn take_gate_mutex(&mut self, core: u32, tid: Tid) {
        let m = self.gate_mutex.as_mut().expect("a gate with a mutex");
        debug_assert!(m.holder.is_none());
        let line = if m.last_core == Some(core) {
            self.m.mutex_uncontended_ns
        } else {
            self.m.mutex_handoff_ns
        };
        m.holder = Some(tid);
        m.last_core = Some(core);
        self.gate_counts.mutex_acquisitions += 1;
        let t = &mut self.threads[tid as usize];
        t.cpu_left = self.gate_call_ns + line;
        t.after_cpu = Resume::GateCritical;
        self.start_cpu(core, tid);
    }

    /// `tid` was preempted: if it holds the gate's mutex, the threads spinning on it run out
    /// of spin budget and sleep (an adaptive mutex spins ~100 tries, not a time slice).
    pub(super) fn holder_preempted(&mut self, tid: Tid) {
        self.preemptions += 1;
        let Some(m) = self.gate_mutex.as_mut() else {
            return;
        };
        if m.holder != Some(tid) || m.spinners.is_empty() {
            return;
        }
        let spinners: Vec<(Tid, u32)> = m.spinners.drain(..).collect();
        m.sleepers.extend(spinners.iter().map(|&(t, _)| t));
        self.gate_counts.mutex_waits += spinners.len() as u64;
        for (t, core) in spinners {
            self.threads[t as usize].resume = Resume::GateMutex;
            self.release_core(core);
        }
    }

    pub(super) fn unlock_gate_mutex(&mut self, tid: Tid) {
        let m = self.gate_mutex.as_mut().expect("a gate with a mutex");
        debug_assert_eq!(m.holder, Some(tid));
        m.holder = None;
        if let Some((next, core)) = m.spinners.pop_front() {
            self.take_gate_mutex(core, next);
        } else if let Some(next) = m.sleepers.pop_front() {
            self.signal(Some(tid), next);
        }
    }

    /// The policy's decision for `a` (under the gate's mutex, if it has one). Returns true if
    /// the thread goes on running its program now.
    pub(super) fn gate_decide(&mut self, core: u32, tid: Tid, a: GateAction) -> bool {
        match a {
            GateAction::Enter => self.gate_step(core, tid),
            GateAction::Finish(id) => {
                let adm = match &mut self.gate {
                    Core::Queue(q) => q.finish_wait(id),
                    Core::Auto(_) => {
                        self.account_busy();
                        let cpu = self.busy_total as u64;
                        let Core::Auto(c) = &self.gate else {
                            unreachable!()
                        };
                        let (adm, out) = c.finish_wait(id, self.now, || Some(cpu));
                        self.signal_all(Some(tid), out);
                        adm
                    }
                    _ => unreachable!("only queue policies and auto wait"),
                };
                self.admitted(tid, adm);
                true
            }
            GateAction::Exit => {
                self.leave_gate(tid);
                true
            }
        }
    }

    /// `tid` calls `sched_yield` on `core`, then asks the gate again.
    pub(super) fn yield_core(&mut self, core: u32, tid: Tid) {
        let t = &mut self.threads[tid as usize];
        if self.runq.is_empty() && self.runq_woken.is_empty() {
            // Nobody to yield to: the call returns after its own cost.
            t.cpu_left = self.m.yield_ns;
            t.after_cpu = Resume::RetryEnter;
            self.start_cpu(core, tid);
            return;
        }
        // CFS's yield: the threads waiting for a core go first (the global run queues stand
        // for per-core ones: up to one thread per core), then this thread runs again. The
        // woken threads waiting go first as they would anyway; the rest of those places go
        // to the preempted threads waiting, ahead of which `pick_next` would otherwise have
        // put the yielder (it serves the woken queue first), giving it its core straight
        // back at the price of a switch.
        t.resume = Resume::RetryEnter;
        let cores = self.m.cores as usize;
        let woken = self.runq_woken.len();
        if woken >= cores || self.runq.is_empty() {
            self.runq_woken.insert(woken.min(cores), (tid, self.now));
        } else {
            let at = (cores - woken).min(self.runq.len());
            self.runq.insert(at, (tid, self.now));
        }
        self.release_core(core);
    }

    pub(super) fn admitted(&mut self, tid: Tid, a: Admission) {
        let counted = a.hold.kind() != HoldKind::Uncounted;
        let t = &mut self.threads[tid as usize];
        t.txn_admitted |= t.in_txn;
        t.tickets.grant(&a);
        let mut hold = a.hold;
        if t.long_stmt {
            if let Core::Auto(c) = &self.gate {
                c.mark_long(&mut hold);
            }
        }
        t.hold = Some(hold);
        t.attempt = Attempt::new(false);
        let c = &mut self.gate_counts;
        c.admissions += 1;
        match a.by {
            AdmittedBy::Lifo => c.lifo += 1,
            AdmittedBy::Forced => c.forced += 1,
            _ => {}
        }
        if counted {
            self.set_inside(1);
        }
    }

    /// One gate decision for `tid` on `core`; returns true if admitted (continue running).
    pub(super) fn gate_step(&mut self, core: u32, tid: Tid) -> bool {
        let mut at = std::mem::take(&mut self.threads[tid as usize].attempt);
        let step = match &mut self.gate {
            Core::Queue(q) => q.enter(&mut at, &tid),
            Core::Polling(p) => p.enter(&mut at),
            Core::Timer(t) => t.enter(&mut at),
            Core::Unlimited(u) => Step::Admitted(u.enter()),
            Core::Auto(c) => {
                let mut out = Vec::new();
                let now = self.now;
                // An open transaction admitted before comes back by the rule after a wait,
                // as the real session does.
                let t = &self.threads[tid as usize];
                let step = if t.in_txn && t.txn_admitted {
                    c.enter_after_wait(&tid, || {})
                } else {
                    c.enter(&mut at, &tid, || now, || {}, &mut out)
                };
                self.signal_all(Some(tid), out);
                step
            }
        };
        self.threads[tid as usize].attempt = at;
        match step {
            Step::Admitted(a) => {
                self.admitted(tid, a);
                true
            }
            Step::Sleep(d) if d.is_zero() => {
                // The real session yields for a zero sleep (`polling`'s delay halved to 0)
                // rather than arm a timer: no context switch when nobody else waits.
                self.gate_counts.sleeps += 1;
                self.yield_core(core, tid);
                false
            }
            Step::Sleep(d) => {
                self.gate_counts.sleeps += 1;
                self.threads[tid as usize].resume = Resume::RetryEnter;
                // A timed wake-up pays the timer's overshoot (which includes waking the
                // sleeper) and the scheduler's per-runnable work, as a signalled one does.
                let d = d.as_nanos() as u64 + self.wake_latency(self.m.timer_slack_ns);
                self.push(self.now.saturating_add(d), Ev::Ready { tid });
                self.release_core(core);
                false
            }
            Step::Yield => {
                self.gate_counts.yields += 1;
                self.yield_core(core, tid);
                false
            }
            Step::Reject(r) => unreachable!("the simulator sets no queue cap: {r:?}"),
            Step::Wait(id) => {
                self.gate_counts.queue_waits += 1;
                self.threads[tid as usize].resume = Resume::FinishWait(id);
                self.release_core(core);
                false
            }
        }
    }

    pub(super) fn leave_gate(&mut self, tid: Tid) {
        let t = &mut self.threads[tid as usize];
        t.tickets.clear();
        let Some(hold) = t.hold.take() else {
            return;
        };
        if hold.kind() != HoldKind::Uncounted {
            self.set_inside(-1);
        }
        let release = match &mut self.gate {
            Core::Auto(c) => {
                let now = self.now;
                let out = c.exit(hold, || now);
                self.gate_counts.handoffs += out.len() as u64;
                self.signal_all(Some(tid), out);
                None
            }
            Core::Queue(q) => q.exit(hold),
            Core::Polling(p) => {
                p.exit(hold);
                None
            }
            Core::Timer(t) => {
                t.exit(hold);
                None
            }
            Core::Unlimited(u) => {
                u.exit(hold);
                None
            }
        };
        if let Some(r) = release {
            // The core counts the released waiter inside already; this simulation counts it
            // (in `inside_now`) once it runs and takes the slot.
            self.gate_counts.handoffs += 1;
            self.signal(Some(tid), r.waiter);
        }
    }
}
