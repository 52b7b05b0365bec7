//! The daemon's state machine, free of sockets so it can be tested directly: connections and
//! their quotas, sessions and the controllers sizing their reservations, the kernel view over
//! every client's threads, and the guardian that restores them if the daemon dies.
//!
//! Every reservation goes through [`DaemonKernel`], which routes each thread to the
//! `LinuxKernel` of its process (so the exact-restore and "a thread that changed its own policy
//! wins" rules of `pacer exec` hold here too) and refuses a thread whose pidfd says it exited,
//! so a recycled TID is never touched.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use pacer_adapt::controller::{JobConfig, LegacyConfig, Phase, ProactiveConfig, ThreadOptions};
use pacer_adapt::kernel::Wakeup;
use pacer_adapt::{
    AppEvent, Compression, Controller, DlState, FreqState, JobController, Kernel, KernelError,
    LegacyController, Pool, ProactiveController, Tid,
};
use pacer_linux::boost::{Actuator, BoostConfig, BoostError, Booster, How};
use pacer_linux::control::{self, describe_attr, ThreadView};
use pacer_linux::guardian::Guardian;
use pacer_linux::kernel::LinuxKernel;
use pacer_linux::procfs::Pidfd;
use pacer_linux::sched::ThreadSched;
use pacer_model::reservation::{DEFAULT_PERIOD_MAX, DL_MIN_RUNTIME_NS};
use pacer_model::Policy;
use serde::Serialize;

use crate::config::{Config, Quota};
use crate::peer::{self, Peer, ThreadHandle};
use crate::protocol::{
    AttachSpec, BoostGrant, ControllerKind, ErrorCode, FrameError, JobMark, Reply, Request, SessionSpec,
    ThreadGrant, WireError, MAX_NAMES, MAX_TIDS, VERSION,
};

/// A connection, numbered by the server.
pub type ConnId = u64;

/// How many refusals `status` remembers.
const REFUSALS_KEPT: usize = 32;

/// The kernel as the daemon's controllers see it: the threads of every session, each answered
/// by the `LinuxKernel` of its process.
pub struct DaemonKernel {
    procs: BTreeMap<u32, LinuxKernel>,
    handles: BTreeMap<Tid, ThreadHandle>,
    clock: LinuxKernel,
}

impl Default for DaemonKernel {
    fn default() -> Self {
        DaemonKernel {
            procs: BTreeMap::new(),
            handles: BTreeMap::new(),
            clock: LinuxKernel::for_process(std::process::id()),
        }
    }
}

impl DaemonKernel {
    /// Takes a checked thread; `original` is its state before any change (the same snapshot the
    /// guardian holds).
    fn register(&mut self, h: ThreadHandle, original: ThreadSched) {
        let k = self
            .procs
            .entry(h.pid)
            .or_insert_with(|| LinuxKernel::for_process(h.pid));
        k.remember_original(h.tid, original);
        self.handles.insert(h.tid, h);
    }

    fn unregister(&mut self, tid: Tid) {
        if let Some(h) = self.handles.remove(&tid) {
            if let Some(k) = self.procs.get_mut(&h.pid) {
                k.forget(tid);
            }
            if !self.handles.values().any(|o| o.pid == h.pid) {
                self.procs.remove(&h.pid);
            }
        }
    }

    fn alive(&self, tid: Tid) -> bool {
        self.handles.get(&tid).is_some_and(|h| h.alive())
    }

    fn route(&self, t: Tid) -> Result<&LinuxKernel, KernelError> {
        let h = self.handles.get(&t).ok_or(KernelError::NoSuchThread(t))?;
        self.procs.get(&h.pid).ok_or(KernelError::NoSuchThread(t))
    }

    fn route_mut(&mut self, t: Tid) -> Result<&mut LinuxKernel, KernelError> {
        let h = self.handles.get(&t).ok_or(KernelError::NoSuchThread(t))?;
        if !h.alive() {
            return Err(KernelError::NoSuchThread(t));
        }
        let pid = h.pid;
        self.procs.get_mut(&pid).ok_or(KernelError::NoSuchThread(t))
    }
}

impl Kernel for DaemonKernel {
    fn now(&self) -> u64 {
        self.clock.now()
    }
    fn cpus(&self) -> usize {
        self.clock.cpus()
    }
    fn threads(&self) -> Vec<Tid> {
        self.handles.keys().copied().collect()
    }
    fn cpu_time(&self, t: Tid) -> Result<u64, KernelError> {
        self.route(t)?.cpu_time(t)
    }
    fn run_delay(&self, t: Tid) -> Result<Option<u64>, KernelError> {
        self.route(t)?.run_delay(t)
    }
    /// Traced by the tracefs instance of the thread's process (legacy sessions).
    fn trace_wakeups(&mut self, t: Tid, on: bool) -> Result<(), KernelError> {
        match self.route_mut(t) {
            Ok(k) => k.trace_wakeups(t, on),
            // Nothing left to stop tracing on an exited thread.
            Err(e) if on => Err(e),
            Err(_) => Ok(()),
        }
    }
    fn drain_wakeups(&mut self, t: Tid, out: &mut Vec<u64>) -> Result<(), KernelError> {
        self.route_mut(t)?.drain_wakeups(t, out)
    }
    fn drain_wakeups_marked(&mut self, t: Tid, out: &mut Vec<Wakeup>) -> Result<(), KernelError> {
        self.route_mut(t)?.drain_wakeups_marked(t, out)
    }
    fn dl_state(&self, t: Tid) -> Result<Option<DlState>, KernelError> {
        self.route(t)?.dl_state(t)
    }
    fn policy(&self, t: Tid) -> Result<Policy, KernelError> {
        self.route(t)?.policy(t)
    }
    fn set_policy(&mut self, t: Tid, p: Policy) -> Result<(), KernelError> {
        self.route_mut(t)?.set_policy(t, p)
    }
    fn dl_bandwidth_limit(&self, t: Option<Tid>) -> f64 {
        self.clock.dl_bandwidth_limit(t)
    }
    fn frequency(&self, cluster: usize) -> Result<FreqState, KernelError> {
        self.clock.frequency(cluster)
    }
    fn set_frequency(&mut self, _cluster: usize, _khz: u32) -> Result<(), KernelError> {
        Err(KernelError::Unsupported(
            "the daemon does not set frequencies".into(),
        ))
    }
}

enum Ctl {
    Proactive(ProactiveController),
    Job(JobController),
    Legacy(Box<LegacyController>),
}

impl Ctl {
    fn as_controller(&mut self) -> &mut dyn Controller {
        match self {
            Ctl::Proactive(c) => c,
            Ctl::Job(c) => c,
            Ctl::Legacy(c) => c.as_mut(),
        }
    }
    fn release(&mut self, k: &mut dyn Kernel) -> Vec<(Tid, Result<(), KernelError>)> {
        match self {
            Ctl::Proactive(c) => c.release(k),
            Ctl::Job(c) => c.release(k),
            Ctl::Legacy(c) => c.release(k),
        }
    }
    fn budget(&self, tid: Tid) -> Option<u64> {
        match self {
            Ctl::Proactive(c) => c.thread_status(tid).and_then(|s| s.budget_ns),
            Ctl::Job(c) => c.thread_status(tid).and_then(|s| s.budget_ns),
            Ctl::Legacy(c) => c.thread_status(tid).and_then(|s| s.budget_ns),
        }
    }
    fn status_json(&self) -> serde_json::Value {
        match self {
            Ctl::Proactive(c) => serde_json::to_value(c.status()).unwrap_or_default(),
            Ctl::Job(c) => serde_json::to_value(c.status()).unwrap_or_default(),
            Ctl::Legacy(c) => serde_json::to_value(c.status()).unwrap_or_default(),
        }
    }
    /// A legacy thread's own period, once known.
    fn thread_period(&self, tid: Tid) -> Option<u64> {
        match self {
            Ctl::Legacy(c) => c.thread_status(tid).and_then(|s| s.period_ns),
            _ => None,
        }
    }
    /// Q/P in place for a thread; a legacy thread has its own period.
    fn reserved_bandwidth(&self, tid: Tid, period_ns: u64) -> Option<f64> {
        match self {
            Ctl::Legacy(c) => c.thread_status(tid).and_then(|s| s.reserved_bandwidth),
            _ => self.budget(tid).map(|q| q as f64 / period_ns.max(1) as f64),
        }
    }
    fn period(&self) -> Option<u64> {
        match self {
            Ctl::Proactive(c) => c.period(),
            Ctl::Job(c) => c.period(),
            Ctl::Legacy(c) => c.period(),
        }
    }
}

/// The process a legacy session runs LFS++ on ([`Request::Attach`]): its threads are discovered
/// at every tick, as `pacer exec` does.
struct Watch {
    pidfd: Pidfd,
    names: Vec<String>,
    follow_new: bool,
    known_period: Option<u64>,
    /// Every thread seen: its name, and why it is left alone (`None`: taken).
    seen: BTreeMap<Tid, (String, Option<String>)>,
    /// Threads given back for a budget debt ([`control::indebted`]), and when to take them again.
    retake: BTreeMap<Tid, u64>,
    first: bool,
    exited: u64,
}

struct Session {
    conn: ConnId,
    pid: u32,
    uid: u32,
    tids: Vec<Tid>,
    period_ns: u64,
    kind: ControllerKind,
    /// Per-thread Q/P ceiling; the session counts `ceiling × tids` against its user's quota.
    ceiling: f64,
    ctl: Ctl,
    created_ns: u64,
    last_activity_ns: u64,
    /// Reservations given back because the session went idle; the next message takes them again.
    idle: bool,
    cpu_at_create: BTreeMap<Tid, u64>,
    hints: u64,
    jobs: u64,
    /// A legacy session's process.
    watch: Option<Watch>,
}

impl Session {
    /// A session of `peer` with no thread yet.
    fn new(
        conn: ConnId,
        peer: &Peer,
        kind: ControllerKind,
        ceiling: f64,
        ctl: Ctl,
        period_ns: u64,
        now: u64,
    ) -> Session {
        Session {
            conn,
            pid: peer.pid,
            uid: peer.uid,
            tids: Vec::new(),
            period_ns,
            kind,
            ceiling,
            ctl,
            created_ns: now,
            last_activity_ns: now,
            idle: false,
            cpu_at_create: BTreeMap::new(),
            hints: 0,
            jobs: 0,
            watch: None,
        }
    }

    fn charge(&self) -> f64 {
        self.ceiling * self.tids.len() as f64
    }
}

struct Conn {
    peer: Peer,
    user: Option<String>,
    quota: Quota,
    hello: bool,
    failed: u32,
    last_error: Option<WireError>,
    sessions: BTreeSet<u32>,
}

/// A refused request, kept for `pacer status`.
#[derive(Debug, Clone, Serialize)]
pub struct Refusal {
    pub t_ns: u64,
    pub pid: u32,
    pub uid: u32,
    pub code: ErrorCode,
    pub message: String,
}

/// Starts a new guardian (the daemon's binary in its hidden `guardian` mode).
pub type GuardianFactory = Box<dyn FnMut() -> Result<Guardian, pacer_linux::sched::LinuxError>>;

/// The daemon's state.
pub struct Service {
    cfg: Config,
    kernel: DaemonKernel,
    /// One supervisor for every session of every client: Σ Q/P within the bound, compression
    /// proportional across clients (each session's controller reserves through it).
    pool: Pool,
    conns: BTreeMap<ConnId, Conn>,
    sessions: BTreeMap<u32, Session>,
    next_session: u32,
    guardian: Option<Guardian>,
    respawn: Option<GuardianFactory>,
    refusals: VecDeque<Refusal>,
    notices: Vec<String>,
    start_ns: u64,
    /// In-process use (the client library without a daemon): the caller's own threads are
    /// allowed, since the "daemon" is the application itself.
    in_process: bool,
    next_tick_ns: u64,
    /// When the periodic part of the tick (threads, idle sessions, guardian) is due next.
    next_periodic_ns: u64,
    /// Interactive boosts (VT-CFS), started at the first boost request.
    booster: Option<Booster>,
    boosts: u64,
}

/// Longest interactive boost a client may ask for, ns.
pub const MAX_BOOST_NS: u64 = 5_000_000_000;
/// How often active boosts are checked for expiry or blocking, ns: a boost lasts milliseconds,
/// and the paper ends it as soon as the thread sleeps.
const BOOST_CHECK_NS: u64 = 1_000_000;

/// How often the service checks threads, idle sessions and its guardian, ns.
pub const TICK_NS: u64 = 100_000_000;

impl Service {
    /// A daemon's service; `guardian` is told about every thread before it is changed.
    pub fn new(cfg: Config, guardian: Option<Guardian>, respawn: Option<GuardianFactory>) -> Service {
        let kernel = DaemonKernel::default();
        let now = kernel.now();
        Service {
            pool: Pool::new(cfg.bound, Compression::Proportional),
            cfg,
            kernel,
            conns: BTreeMap::new(),
            sessions: BTreeMap::new(),
            next_session: 1,
            guardian,
            respawn,
            refusals: VecDeque::new(),
            notices: Vec::new(),
            start_ns: now,
            in_process: false,
            next_tick_ns: now + TICK_NS,
            next_periodic_ns: now + TICK_NS,
            booster: None,
            boosts: 0,
        }
    }

    /// The service a client library hosts in its own process.
    pub fn in_process(cfg: Config) -> Service {
        let mut s = Service::new(cfg, None, None);
        s.in_process = true;
        s
    }

    /// Messages for the operator since the last call.
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    /// A new connection from `peer`.
    pub fn accept(&mut self, conn: ConnId, peer: Peer) {
        let user = peer::user_name(peer.uid);
        let groups = peer::groups_of(peer.pid, peer.gid);
        let quota = self.cfg.quota_for(peer.uid, user.as_deref(), &groups);
        self.conns.insert(
            conn,
            Conn {
                peer,
                user,
                quota,
                hello: false,
                failed: 0,
                last_error: None,
                sessions: BTreeSet::new(),
            },
        );
    }

    /// A frame that could not be decoded: the reply to send (the connection goes on).
    pub fn frame_error(&mut self, conn: ConnId, e: &FrameError) -> Reply {
        let code = match e {
            FrameError::TooLarge { .. } => ErrorCode::TooLarge,
            _ => ErrorCode::Malformed,
        };
        let err = WireError::new(code, e.to_string());
        self.refuse(conn, &err);
        Reply::Error(err)
    }

    fn refuse(&mut self, conn: ConnId, e: &WireError) {
        let (pid, uid) = self.conns.get(&conn).map_or((0, 0), |c| (c.peer.pid, c.peer.uid));
        if self.refusals.len() == REFUSALS_KEPT {
            self.refusals.pop_front();
        }
        self.refusals.push_back(Refusal {
            t_ns: self.kernel.now(),
            pid,
            uid,
            code: e.code,
            message: e.message.clone(),
        });
    }

    /// Serves one request; `None` for notifications. A failed notification is remembered for
    /// the connection's next `Sync`.
    pub fn handle(&mut self, conn: ConnId, req: Request) -> Option<Reply> {
        let round_trip = req.is_round_trip();
        let result = self.serve(conn, req);
        match result {
            Ok(r) => r,
            Err(e) => {
                self.refuse(conn, &e);
                if round_trip {
                    Some(Reply::Error(e))
                } else {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.failed = c.failed.saturating_add(1);
                        c.last_error = Some(e);
                    }
                    None
                }
            }
        }
    }

    fn serve(&mut self, conn: ConnId, req: Request) -> Result<Option<Reply>, WireError> {
        let c = self
            .conns
            .get_mut(&conn)
            .ok_or_else(|| WireError::new(ErrorCode::OutOfOrder, "unknown connection"))?;
        match (&req, c.hello) {
            (Request::Hello { .. }, true) => {
                return Err(WireError::new(
                    ErrorCode::OutOfOrder,
                    "hello was already received",
                ))
            }
            (Request::Hello { version }, false) => {
                if *version != VERSION {
                    return Err(WireError::new(
                        ErrorCode::Version,
                        format!("the daemon speaks protocol version {VERSION}, the client {version}"),
                    ));
                }
                c.hello = true;
                return Ok(Some(Reply::Welcome {
                    version: VERSION,
                    daemon_pid: std::process::id(),
                    uid: c.peer.uid,
                    quota: c.quota.view(),
                }));
            }
            (_, false) => {
                return Err(WireError::new(
                    ErrorCode::OutOfOrder,
                    "the first request must be hello",
                ));
            }
            _ => {}
        }
        match req {
            Request::Hello { .. } => unreachable!("handled above"),
            Request::CreateSession(spec) => self.create(conn, spec).map(Some),
            Request::Attach(spec) => self.attach(conn, spec).map(Some),
            Request::WorkUnits { session, units } => {
                let t = self.kernel.now();
                let s = self.own_session(conn, session)?;
                s.hints += 1;
                let ev: Vec<AppEvent> = s
                    .tids
                    .iter()
                    .map(|&thread| AppEvent::WorkUnits {
                        thread,
                        t,
                        units: u64::from(units),
                    })
                    .collect();
                self.deliver(session, &ev);
                Ok(None)
            }
            Request::JobBegin(m) => {
                let ev = self.job_event(conn, &m, true)?;
                self.deliver(m.session, &[ev]);
                Ok(None)
            }
            Request::JobEnd(m) => {
                let ev = self.job_event(conn, &m, false)?;
                self.deliver(m.session, &[ev]);
                Ok(None)
            }
            Request::ActualWork { session, tid, ns } => {
                let t = self.kernel.now();
                let s = self.own_session(conn, session)?;
                if !s.tids.contains(&tid) {
                    return Err(WireError::new(
                        ErrorCode::Invalid,
                        format!("thread {tid} is not in session {session}"),
                    ));
                }
                // A job of `ns` CPU time, measured by the application (ADPF's actual work
                // duration): the controllers see it as a begin/end pair.
                let ev = [
                    AppEvent::JobBegin {
                        thread: tid,
                        t,
                        dl: None,
                        cpu_time: 0,
                    },
                    AppEvent::JobEnd {
                        thread: tid,
                        t,
                        dl: None,
                        cpu_time: ns,
                    },
                ];
                self.deliver(session, &ev);
                Ok(None)
            }
            Request::Sync { seq } => {
                let c = self.conns.get_mut(&conn).expect("checked above");
                let failed = std::mem::take(&mut c.failed);
                let last_error = c.last_error.take();
                Ok(Some(Reply::Synced {
                    seq,
                    failed,
                    last_error,
                }))
            }
            Request::CloseSession { session } => {
                self.own_session(conn, session)?;
                self.close_session(session);
                Ok(Some(Reply::Closed { session }))
            }
            Request::Boost { tid, duration_ns } => self
                .boost(conn, tid, duration_ns)
                .map(|g| Some(Reply::Boosted(g))),
            Request::Status => {
                let c = &self.conns[&conn];
                let viewer = if c.peer.uid == 0 { None } else { Some(c.peer.uid) };
                Ok(Some(Reply::Status {
                    json: serde_json::to_string(&self.status(viewer)).unwrap_or_default(),
                }))
            }
        }
    }

    fn boost(&mut self, conn: ConnId, tid: Tid, duration_ns: u64) -> Result<BoostGrant, WireError> {
        let c = &self.conns[&conn];
        if !c.quota.boost {
            return Err(WireError::new(
                ErrorCode::Quota,
                format!(
                    "uid {} may not ask for boosts (limits from {})",
                    c.peer.uid, c.quota.source
                ),
            ));
        }
        if duration_ns == 0 || duration_ns > MAX_BOOST_NS {
            return Err(WireError::new(
                ErrorCode::Invalid,
                format!("boost duration {duration_ns} ns is not in 1 ns ..= {MAX_BOOST_NS} ns"),
            ));
        }
        // The same ownership rule as for sessions; the handle only checks, the booster holds no
        // reservation.
        let _h = if self.in_process {
            ThreadHandle::open_own(tid)?
        } else {
            ThreadHandle::open_for(tid, &c.peer.clone(), c.quota.same_uid)?
        };
        if self.kernel.handles.contains_key(&tid) {
            return Err(WireError::new(
                ErrorCode::Invalid,
                format!("thread {tid} is in a reservation session: a boost is for SCHED_OTHER threads"),
            ));
        }
        if self.booster.is_none() {
            let mut b = Booster::new(BoostConfig::default());
            // Its own guardian: the boosts are undone if the daemon dies.
            if let Some(Ok(g)) = self.respawn.as_mut().map(|f| f()) {
                b = b.with_guardian(g);
            }
            self.booster = Some(b);
        }
        let b = self.booster.as_mut().expect("just made");
        let g = b.boost(tid, duration_ns, How::Auto).map_err(|e| {
            let code = match e {
                BoostError::NotFair { .. } | BoostError::Invalid(_) => ErrorCode::Invalid,
                BoostError::Unsupported(_) => ErrorCode::Unsupported,
                BoostError::NoSuchThread(_) => ErrorCode::NoSuchThread,
                BoostError::Sched(_) => ErrorCode::Kernel,
            };
            WireError::new(code, format!("boost of thread {tid}: {e}"))
        })?;
        self.boosts += 1;
        self.next_tick_ns = self.next_tick_ns.min(self.kernel.now() + BOOST_CHECK_NS);
        Ok(BoostGrant {
            tid,
            actuators: g
                .actuators
                .list()
                .into_iter()
                .map(|a| {
                    match a {
                        Actuator::Nice => "nice",
                        Actuator::Slice => "eevdf-slice",
                        Actuator::Uclamp => "uclamp",
                    }
                    .to_string()
                })
                .collect(),
            nice: g.actuators.contains(Actuator::Nice).then_some(g.nice),
            slice_ns: g.slice_ns,
            until_ns: g.until,
        })
    }

    fn own_session(&mut self, conn: ConnId, id: u32) -> Result<&mut Session, WireError> {
        match self.sessions.get_mut(&id) {
            Some(s) if s.conn == conn => Ok(s),
            _ => Err(WireError::new(
                ErrorCode::NoSuchSession,
                format!("no session {id} on this connection"),
            )),
        }
    }

    fn job_event(&mut self, conn: ConnId, m: &JobMark, begin: bool) -> Result<AppEvent, WireError> {
        let s = self.own_session(conn, m.session)?;
        if !s.tids.contains(&m.tid) {
            return Err(WireError::new(
                ErrorCode::Invalid,
                format!("thread {} is not in session {}", m.tid, m.session),
            ));
        }
        s.jobs += u64::from(!begin);
        let dl = match m.dl {
            Some(d) => Some(DlState {
                deadline: d.deadline,
                runtime: d.runtime,
            }),
            // The client could not read it: the daemon reads it now, close to the event.
            None => self.kernel.dl_state(m.tid).ok().flatten(),
        };
        Ok(if begin {
            AppEvent::JobBegin {
                thread: m.tid,
                t: m.t_ns,
                dl,
                cpu_time: m.cpu_ns,
            }
        } else {
            AppEvent::JobEnd {
                thread: m.tid,
                t: m.t_ns,
                dl,
                cpu_time: m.cpu_ns,
            }
        })
    }

    fn deliver(&mut self, id: u32, events: &[AppEvent]) {
        let now = self.kernel.now();
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        s.last_activity_ns = now;
        s.idle = false;
        for ev in events {
            s.ctl.as_controller().on_app_event(ev, &mut self.kernel);
        }
    }

    fn create(&mut self, conn: ConnId, spec: SessionSpec) -> Result<Reply, WireError> {
        let c = &self.conns[&conn];
        let quota = c.quota.clone();
        let peer = c.peer.clone();
        let invalid = |m: String| WireError::new(ErrorCode::Invalid, m);
        if spec.tids.is_empty() || spec.tids.len() > MAX_TIDS {
            return Err(invalid(format!(
                "a session names 1 to {MAX_TIDS} threads, not {}",
                spec.tids.len()
            )));
        }
        let mut seen = BTreeSet::new();
        if let Some(d) = spec.tids.iter().find(|t| !seen.insert(**t)) {
            return Err(invalid(format!("thread {d} is named twice")));
        }
        if spec.period_ns > DEFAULT_PERIOD_MAX.0 {
            return Err(invalid(format!(
                "period {} ns is longer than the kernel's longest SCHED_DEADLINE period ({} ns)",
                spec.period_ns, DEFAULT_PERIOD_MAX.0
            )));
        }
        if spec.period_ns < quota.min_period_ns {
            return Err(WireError::new(
                ErrorCode::Quota,
                format!(
                    "period {} ns is shorter than the minimum of {} ns for uid {} (limits from {})",
                    spec.period_ns, quota.min_period_ns, peer.uid, quota.source
                ),
            ));
        }
        let ceiling = spec.max_bandwidth.unwrap_or(quota.thread_bandwidth);
        if !(ceiling.is_finite() && ceiling > 0.0 && ceiling <= 1.0) {
            return Err(invalid(format!("max_bandwidth {ceiling} is not in (0, 1]")));
        }
        if (ceiling * spec.period_ns as f64) < DL_MIN_RUNTIME_NS as f64 {
            return Err(invalid(format!(
                "max_bandwidth {ceiling} of a {} ns period is below the kernel's minimum runtime of {DL_MIN_RUNTIME_NS} ns",
                spec.period_ns
            )));
        }
        self.check_session_count(&peer, &quota)?;
        let mine: Vec<&Session> = self.sessions.values().filter(|s| s.uid == peer.uid).collect();
        let charge = ceiling * spec.tids.len() as f64;
        if let Some(max) = quota.bandwidth {
            let held = mine.iter().fold(0.0, |a, s| a + s.charge());
            if held + charge > max + 1e-9 {
                return Err(WireError::new(
                    ErrorCode::Quota,
                    format!(
                        "bandwidth: this session's ceiling of {:.3} CPU ({} thread(s) × {:.3}) with {:.3} CPU already held by uid {} exceeds the quota of {:.3} CPU by {:.3} CPU (limits from {})",
                        charge,
                        spec.tids.len(),
                        ceiling,
                        held,
                        peer.uid,
                        max,
                        held + charge - max,
                        quota.source
                    ),
                ));
            }
        }
        if let Some(t) = spec.tids.iter().find(|t| self.kernel.handles.contains_key(t)) {
            return Err(invalid(format!("thread {t} is already in a session")));
        }
        let mut handles = Vec::new();
        for &tid in &spec.tids {
            let h = if self.in_process {
                ThreadHandle::open_own(tid)?
            } else {
                ThreadHandle::open_for(tid, &peer, quota.same_uid)?
            };
            handles.push(h);
        }
        let mut ctl = match spec.controller {
            ControllerKind::Legacy => {
                return Err(invalid(
                    "the legacy controller runs on a whole process: ask with Attach, not CreateSession"
                        .into(),
                ))
            }
            ControllerKind::Proactive => Ctl::Proactive(
                ProactiveController::new(ProactiveConfig {
                    max_bandwidth: ceiling,
                    bound: self.cfg.bound,
                    margin: self.cfg.proactive.mode(),
                    margin_mult: self.cfg.proactive.margin_mult,
                    margin_offset_ns: (self.cfg.proactive.margin_offset * spec.period_ns as f64).round()
                        as u64,
                    reclaim: self.cfg.proactive.reclaim,
                    catch_up: self.cfg.proactive.catch_up,
                    ..ProactiveConfig::default()
                })
                .and_then(|c| c.with_pool(&self.pool))
                .map_err(|e| invalid(e.to_string()))?,
            ),
            ControllerKind::Job => Ctl::Job(
                JobController::new(JobConfig {
                    max_bandwidth: ceiling,
                    bound: self.cfg.bound,
                    // GRUB: a job longer than its budget may use bandwidth nobody else uses
                    // instead of waiting for the next period (the percentile follows a step up
                    // within a few jobs; reclaiming keeps those jobs on time when there is room).
                    reclaim: true,
                    ..JobConfig::default()
                })
                .and_then(|c| c.with_pool(&self.pool))
                .map_err(|e| invalid(e.to_string()))?,
            ),
        };
        for h in &handles {
            let r = match &mut ctl {
                Ctl::Proactive(c) => c.add_thread(h.tid, spec.period_ns, ThreadOptions::default()),
                Ctl::Job(c) => c.add_thread(h.tid, spec.period_ns, ThreadOptions::default()),
                Ctl::Legacy(_) => unreachable!("refused above"),
            };
            r.map_err(|e| invalid(e.to_string()))?;
        }
        // Everything checked: now the threads are taken, the guardian told first.
        let now = self.kernel.now();
        let mut cpu_at_create = BTreeMap::new();
        for h in handles {
            let original = ThreadSched::read(h.tid)
                .map_err(|e| WireError::new(ErrorCode::NoSuchThread, format!("thread {}: {e}", h.tid)))?;
            if let Some(g) = self.guardian.as_mut() {
                g.track(h.pid, h.tid, &original);
            }
            let tid = h.tid;
            self.kernel.register(h, original);
            cpu_at_create.insert(tid, self.kernel.cpu_time(tid).unwrap_or(0));
        }
        // The first reservation: the controller's starting budget (its ceiling until it has
        // measured a job), so the session is reserved before its first job.
        ctl.as_controller().tick(&mut self.kernel);
        let threads = spec
            .tids
            .iter()
            .map(|&tid| ThreadGrant {
                tid,
                budget_ns: ctl.budget(tid),
                period_ns: spec.period_ns,
            })
            .collect();
        let mut session = Session::new(conn, &peer, spec.controller, ceiling, ctl, spec.period_ns, now);
        session.tids = spec.tids;
        session.cpu_at_create = cpu_at_create;
        let id = self.insert_session(session);
        Ok(Reply::Created { session: id, threads })
    }

    /// Files a new session under a fresh id and its connection; the id.
    fn insert_session(&mut self, s: Session) -> u32 {
        let id = self.next_session;
        self.next_session = self.next_session.wrapping_add(1).max(1);
        if let Some(c) = self.conns.get_mut(&s.conn) {
            c.sessions.insert(id);
        }
        self.sessions.insert(id, s);
        id
    }

    /// The user's limit on open sessions.
    fn check_session_count(&self, peer: &Peer, quota: &Quota) -> Result<(), WireError> {
        let open = self.sessions.values().filter(|s| s.uid == peer.uid).count();
        match quota.sessions {
            Some(max) if open as u64 >= u64::from(max) => Err(WireError::new(
                ErrorCode::Quota,
                format!(
                    "uid {} has {open} session(s) open; the limit is {max} (limits from {})",
                    peer.uid, quota.source
                ),
            )),
            _ => Ok(()),
        }
    }

    /// LFS++ on a whole process (`pacer exec --daemon`): checked like a session, then its
    /// threads are taken as they are discovered, each counted against the user's quota.
    fn attach(&mut self, conn: ConnId, spec: AttachSpec) -> Result<Reply, WireError> {
        let c = &self.conns[&conn];
        let quota = c.quota.clone();
        let peer = c.peer.clone();
        let invalid = |m: String| WireError::new(ErrorCode::Invalid, m);
        if self.in_process {
            return Err(WireError::new(
                ErrorCode::Unsupported,
                "in-process mode controls the caller's own threads: run pacer daemon to attach to a process",
            ));
        }
        if spec.names.len() > MAX_NAMES || spec.names.iter().any(|n| n.is_empty() || n.len() > 64) {
            return Err(invalid(format!(
                "names: at most {MAX_NAMES} thread names of 1 to 64 bytes"
            )));
        }
        if let Some(p) = spec.period_ns {
            if p == 0 || p > DEFAULT_PERIOD_MAX.0 {
                return Err(invalid(format!(
                    "period {p} ns is not in 1..={} ns (the kernel's longest SCHED_DEADLINE period)",
                    DEFAULT_PERIOD_MAX.0
                )));
            }
            if p < quota.min_period_ns {
                return Err(WireError::new(
                    ErrorCode::Quota,
                    format!(
                        "period {p} ns is shorter than the minimum of {} ns for uid {} (limits from {})",
                        quota.min_period_ns, peer.uid, quota.source
                    ),
                ));
            }
        }
        let ceiling = spec.max_bandwidth.unwrap_or(quota.thread_bandwidth);
        if !(ceiling.is_finite() && ceiling > 0.0 && ceiling <= 1.0) {
            return Err(invalid(format!("max_bandwidth {ceiling} is not in (0, 1]")));
        }
        self.check_session_count(&peer, &quota)?;
        crate::peer::may_attach(spec.pid, &peer, quota.same_uid)?;
        let pidfd = control::open_process(spec.pid)
            .map_err(|e| WireError::new(ErrorCode::NoSuchThread, e.to_string()))?;
        // Wake-up tracing needs tracefs; say so now rather than in every thread's status.
        if spec.period_ns.is_none() {
            pacer_linux::trace::tracefs_root()
                .map_err(|e| WireError::new(ErrorCode::Unsupported, format!("cannot trace wake-ups: {e}")))?;
        }
        let ctl = LegacyController::new(LegacyConfig {
            max_bandwidth: ceiling,
            bound: self.cfg.bound,
            ..LegacyConfig::default()
        })
        .and_then(|c| c.with_pool(&self.pool))
        .map_err(|e| invalid(e.to_string()))?;
        let now = self.kernel.now();
        let ctl = Ctl::Legacy(Box::new(ctl));
        let period = spec.period_ns.unwrap_or(0);
        let mut session = Session::new(conn, &peer, ControllerKind::Legacy, ceiling, ctl, period, now);
        session.watch = Some(Watch {
            pidfd,
            names: spec.names,
            follow_new: spec.follow_new,
            known_period: spec.period_ns,
            seen: BTreeMap::new(),
            retake: BTreeMap::new(),
            first: true,
            exited: 0,
        });
        let id = self.insert_session(session);
        self.watch_threads(id);
        let s = self.sessions.get_mut(&id).expect("inserted");
        s.ctl.as_controller().tick(&mut self.kernel);
        let threads = s
            .tids
            .iter()
            .map(|&tid| ThreadGrant {
                tid,
                budget_ns: s.ctl.budget(tid),
                period_ns: s.period_ns,
            })
            .collect();
        Ok(Reply::Created { session: id, threads })
    }

    /// A legacy session's thread discovery: takes new threads (name filter, policy, quota),
    /// forgets exited ones, and leaves alone those that changed their own policy.
    fn watch_threads(&mut self, id: u32) {
        let Service {
            sessions,
            kernel,
            guardian,
            conns,
            ..
        } = self;
        let held_by = |uid: u32, sessions: &BTreeMap<u32, Session>| {
            sessions
                .values()
                .filter(|s| s.uid == uid)
                .map(Session::charge)
                .sum::<f64>()
        };
        let Some(s) = sessions.get(&id) else { return };
        let (uid, ceiling) = (s.uid, s.ceiling);
        let quota = conns.get(&s.conn).map(|c| c.quota.clone());
        let mut held = held_by(uid, sessions);
        let s = sessions.get_mut(&id).expect("present");
        let (Some(w), Ctl::Legacy(ctl)) = (s.watch.as_mut(), &mut s.ctl) else {
            return;
        };
        let Ok(now) = w.pidfd.threads() else { return };
        let pid = w.pidfd.pid();
        let gone: Vec<Tid> = w.seen.keys().filter(|t| !now.contains(t)).copied().collect();
        for tid in gone {
            // A thread given back for a debt was pacer's, and its exit counts too.
            if w.retake.remove(&tid).is_some() {
                w.exited += 1;
            }
            if let Some((_, None)) = w.seen.remove(&tid) {
                w.exited += 1;
                // Exited: nothing to restore, the kernel released its bandwidth.
                let _ = ctl.remove_thread(kernel, tid);
                if let Some(g) = guardian.as_mut() {
                    g.untrack(tid);
                }
                kernel.unregister(tid);
                s.tids.retain(|t| *t != tid);
            }
        }
        // Budget debt: the original policy until the far deadline has passed.
        let clock = kernel.now();
        for d in control::indebted(ctl, kernel, clock) {
            if !matches!(w.seen.get(&d.tid), Some((_, None))) {
                continue;
            }
            match ctl.remove_thread(kernel, d.tid) {
                Ok(()) | Err(KernelError::NoSuchThread(_)) => {}
                Err(_) => continue,
            }
            if let Some(g) = guardian.as_mut() {
                g.untrack(d.tid);
            }
            kernel.unregister(d.tid);
            s.tids.retain(|t| *t != d.tid);
            held -= ceiling;
            if let Some(e) = w.seen.get_mut(&d.tid) {
                e.1 = Some(d.reason());
            }
            w.retake.insert(d.tid, d.retake_at());
        }
        // A thread that set its own policy after it was taken, before any change: that is its
        // original state (see `LinuxKernel::changed_before_applied`).
        let fresh = kernel
            .procs
            .get(&pid)
            .map(|k| k.changed_before_applied())
            .unwrap_or_default();
        let mut foreign: Vec<(Tid, String)> = Vec::new();
        for (tid, now) in fresh {
            if !matches!(now.policy(), Ok(Policy::Other { .. } | Policy::Idle)) {
                foreign.push((tid, describe_attr(&now.attr)));
                continue;
            }
            if let Some(g) = guardian.as_mut() {
                g.untrack(tid);
                g.track(pid, tid, &now);
            }
            if let Some(k) = kernel.procs.get_mut(&pid) {
                k.remember_original(tid, now);
            }
        }
        // Threads that chose their own scheduling are released to it and left alone.
        foreign.extend(
            kernel
                .procs
                .get_mut(&pid)
                .map(|k| k.take_foreign_changes())
                .unwrap_or_default()
                .into_iter()
                .map(|(t, a)| (t, describe_attr(&a))),
        );
        for (tid, what) in foreign {
            let _ = ctl.remove_thread(kernel, tid);
            if let Some(g) = guardian.as_mut() {
                g.untrack(tid);
            }
            kernel.unregister(tid);
            s.tids.retain(|t| *t != tid);
            if let Some(e) = w.seen.get_mut(&tid) {
                e.1 = Some(format!(
                    "changed its own policy to {what}: released and left alone"
                ));
            }
        }
        let first = std::mem::replace(&mut w.first, false);
        for tid in now {
            let name = w.pidfd.comm(tid).unwrap_or_default();
            // Offered again: renamed after a skip for its name, or its debt is over.
            let renamed = match w.seen.get(&tid) {
                None => false,
                Some(_) if w.retake.get(&tid).is_some_and(|&at| clock >= at) => {
                    w.retake.remove(&tid);
                    true
                }
                Some((old, skip)) if control::skipped_for_name(skip.as_deref()) && *old != name => true,
                Some(_) => continue,
            };
            let skip = if !first && !w.follow_new && !renamed {
                Some("appeared after the start (follow_new off)".to_string())
            } else if quota
                .as_ref()
                .and_then(|q| q.bandwidth)
                .is_some_and(|max| held + ceiling > max + 1e-9)
            {
                let q = quota.as_ref().expect("checked");
                Some(format!(
                    "over the quota: {held:.3} CPU held by uid {uid} + {ceiling:.3} per thread > {:.3} CPU (limits from {})",
                    q.bandwidth.unwrap_or(0.0),
                    q.source
                ))
            } else if kernel.handles.contains_key(&tid) {
                Some("already in another session".to_string())
            } else {
                match control::takeable(tid, &name, &w.names).and_then(|st| {
                    ThreadHandle::open_in(pid, tid)
                        .map(|h| (h, st))
                        .map_err(|e| e.message)
                }) {
                    Err(why) => Some(why),
                    Ok((h, original)) => {
                        let opts = ThreadOptions {
                            known_period: w.known_period,
                            ..ThreadOptions::default()
                        };
                        match ctl.add_thread(tid, opts) {
                            Err(e) => Some(e.to_string()),
                            Ok(()) => {
                                if let Some(g) = guardian.as_mut() {
                                    g.track(pid, tid, &original);
                                }
                                kernel.register(h, original);
                                s.tids.push(tid);
                                held += ceiling;
                                None
                            }
                        }
                    }
                }
            };
            w.seen.insert(tid, (name, skip));
        }
    }

    /// The `pacer exec` view of a legacy session (the same document `pacer exec --json` prints).
    fn exec_status(&self, s: &Session) -> Option<control::SessionStatus> {
        let (Some(w), Ctl::Legacy(ctl)) = (s.watch.as_ref(), &s.ctl) else {
            return None;
        };
        let pid = w.pidfd.pid();
        let mut by_tid: BTreeMap<Tid, _> = ctl.status().into_iter().map(|c| (c.tid, c)).collect();
        let threads = w
            .seen
            .iter()
            .map(|(&tid, (name, skipped))| ThreadView {
                tid,
                name: w.pidfd.comm(tid).unwrap_or_else(|_| name.clone()),
                skipped: skipped.clone(),
                control: by_tid.remove(&tid),
                context_switches: None,
                migrations: None,
            })
            .collect();
        let reserved_bandwidth = ctl
            .status()
            .iter()
            .filter(|c| c.phase != Phase::Gone)
            .filter_map(|c| c.reserved_bandwidth)
            .sum::<f64>()
            + 0.0;
        Some(control::SessionStatus {
            pid,
            elapsed_ns: self.kernel.now().saturating_sub(s.created_ns),
            reserved_bandwidth,
            bound: self.pool.supervisor(&self.kernel).effective_bound(),
            allocation: ctl.allocation_status(),
            lost_wakeups: self.kernel.procs.get(&pid).map_or(0, |k| k.lost_wakeups()),
            exited_threads: w.exited,
            threads,
        })
    }

    fn close_session(&mut self, id: u32) {
        self.end_session(id);
        // The freed share goes to the sessions left (their next grants).
        self.pool.reallocate(&mut self.kernel);
    }

    fn end_session(&mut self, id: u32) {
        let Some(mut s) = self.sessions.remove(&id) else {
            return;
        };
        for (tid, r) in s.ctl.release(&mut self.kernel) {
            if let Err(e) = r {
                if !matches!(e, KernelError::NoSuchThread(_)) {
                    self.notices.push(format!(
                        "session {id}: thread {tid}: could not restore its policy: {e}"
                    ));
                    // Still reserved: the guardian keeps it until it exits.
                    continue;
                }
            }
            if let Some(g) = self.guardian.as_mut() {
                g.untrack(tid);
            }
        }
        for tid in &s.tids {
            self.kernel.unregister(*tid);
        }
        if let Some(c) = self.conns.get_mut(&s.conn) {
            c.sessions.remove(&id);
        }
    }

    /// The connection closed (or its process died): its sessions are released at once.
    pub fn disconnect(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.remove(&conn) {
            let any = !c.sessions.is_empty();
            for id in c.sessions {
                self.end_session(id);
            }
            if any && !self.sessions.is_empty() {
                self.pool.reallocate(&mut self.kernel);
            }
        }
    }

    /// When [`Service::tick`] wants to run next (CLOCK_MONOTONIC ns).
    pub fn next_tick_ns(&self) -> u64 {
        self.next_tick_ns
    }

    /// Periodic work: threads that exited, idle sessions, controller ticks, the guardian.
    pub fn tick(&mut self) {
        let now = self.kernel.now();
        if now < self.next_tick_ns {
            return;
        }
        if now < self.next_periodic_ns {
            // Only the boosts are due.
            self.next_tick_ns = self.next_periodic_ns;
            self.tick_boosts(now);
            return;
        }
        let mut period = TICK_NS;
        // Threads that exited leave their session; a session with none left closes.
        let ids: Vec<u32> = self.sessions.keys().copied().collect();
        for id in ids {
            if let Some(w) = self.sessions[&id].watch.as_ref() {
                // A legacy session lives as long as its process.
                if !w.pidfd.is_alive().unwrap_or(false) {
                    self.close_session(id);
                    continue;
                }
                self.watch_threads(id);
            } else {
                let dead: Vec<Tid> = self.sessions[&id]
                    .tids
                    .iter()
                    .copied()
                    .filter(|t| !self.kernel.alive(*t))
                    .collect();
                if !dead.is_empty() && dead.len() == self.sessions[&id].tids.len() {
                    self.close_session(id);
                    continue;
                }
            }
            let idle_ns = self.cfg.idle_timeout.0;
            let s = self.sessions.get_mut(&id).expect("listed");
            // A legacy session's client only watches (its program does not talk to the daemon).
            let watched = s.watch.is_some();
            if idle_ns > 0 && !watched && !s.idle && now.saturating_sub(s.last_activity_ns) > idle_ns {
                // Silent too long: give the threads back; the next message takes them again.
                s.idle = true;
                for (tid, r) in s.ctl.release(&mut self.kernel) {
                    if let Err(e) = r {
                        self.notices
                            .push(format!("session {id}: idle release of {tid}: {e}"));
                    }
                }
                continue;
            }
            if let Some(p) = s.ctl.period() {
                period = period.min(p);
                if !s.idle {
                    s.ctl.as_controller().tick(&mut self.kernel);
                }
            }
        }
        self.check_guardian();
        self.next_periodic_ns = now + period;
        self.next_tick_ns = self.next_periodic_ns;
        self.tick_boosts(now);
    }

    /// Ends the boosts whose time is up or whose thread blocked; keeps checking often while any
    /// is active.
    fn tick_boosts(&mut self, now: u64) {
        let Some(b) = self.booster.as_mut() else { return };
        for e in b.tick(now) {
            if let pacer_linux::boost::Undone::Failed(why) = &e.undone {
                self.notices
                    .push(format!("boost of thread {}: undo failed: {why}", e.tid));
            }
        }
        if !b.active().is_empty() {
            self.next_tick_ns = self.next_tick_ns.min(now + BOOST_CHECK_NS);
        }
    }

    fn check_guardian(&mut self) {
        let Some(g) = self.guardian.as_mut() else { return };
        let Some(why) = g.broken() else { return };
        self.notices.push(format!("{why}; starting a new guardian"));
        let fresh = self.respawn.as_mut().map(|f| f());
        match fresh {
            Some(Ok(mut g)) => {
                let mut tracked = Vec::new();
                for h in self.kernel.handles.values() {
                    if let Some(orig) = self.kernel.procs.get(&h.pid).and_then(|k| k.original(h.tid)) {
                        tracked.push((h.pid, h.tid, orig.clone()));
                    }
                }
                g.replay(tracked.iter().map(|(p, t, o)| (*p, *t, o)));
                self.guardian = Some(g);
            }
            other => {
                let why = match other {
                    Some(Err(e)) => e.to_string(),
                    _ => "no way to start one".into(),
                };
                self.notices.push(format!(
                    "no guardian ({why}): every session is released so nothing stays reserved unguarded"
                ));
                self.guardian = None;
                let ids: Vec<u32> = self.sessions.keys().copied().collect();
                for id in ids {
                    self.close_session(id);
                }
            }
        }
    }

    /// Gives every thread back (daemon shutdown) and tells the guardian it is done.
    pub fn shutdown(&mut self) -> Vec<String> {
        let ids: Vec<u32> = self.sessions.keys().copied().collect();
        for id in ids {
            self.end_session(id);
        }
        self.conns.clear();
        if let Some(mut b) = self.booster.take() {
            for e in b.release_all() {
                if let pacer_linux::boost::Undone::Failed(why) = &e.undone {
                    self.notices
                        .push(format!("boost of thread {}: undo failed: {why}", e.tid));
                }
            }
            if let Some(g) = b.take_guardian() {
                g.finish();
            }
        }
        let failed = self.take_notices();
        if let Some(g) = self.guardian.take() {
            if failed.is_empty() {
                g.finish();
            }
            // Otherwise the guardian stays: pipe EOF without `done` makes it restore what is
            // left.
        }
        failed
    }

    /// The daemon's state; `viewer` limits it to one user's sessions (root sees everything).
    pub fn status(&self, viewer: Option<u32>) -> DaemonStatus {
        let now = self.kernel.now();
        let mut sessions = Vec::new();
        let mut reserved = 0.0;
        for (&id, s) in &self.sessions {
            let mut threads = Vec::new();
            for &tid in &s.tids {
                let budget = s.ctl.budget(tid);
                let bandwidth = s.ctl.reserved_bandwidth(tid, s.period_ns);
                reserved += bandwidth.unwrap_or(0.0);
                let used = self.kernel.cpu_time(tid).ok().map(|c| {
                    let base = s.cpu_at_create.get(&tid).copied().unwrap_or(0);
                    c.saturating_sub(base) as f64 / now.saturating_sub(s.created_ns).max(1) as f64
                });
                threads.push(ThreadStatus {
                    tid,
                    period_ns: s
                        .ctl
                        .thread_period(tid)
                        .or((s.period_ns > 0).then_some(s.period_ns)),
                    budget_ns: budget,
                    reserved_bandwidth: bandwidth,
                    used_bandwidth: used,
                });
            }
            if viewer.is_some_and(|u| u != s.uid) {
                continue;
            }
            sessions.push(SessionStatus {
                id,
                pid: s.pid,
                uid: s.uid,
                controller: s.kind,
                period_ns: s.period_ns,
                ceiling: s.ceiling,
                idle: s.idle,
                age_ns: now.saturating_sub(s.created_ns),
                hints: s.hints,
                jobs: s.jobs,
                threads,
                controller_status: s.ctl.status_json(),
                exec: self.exec_status(s),
            });
        }
        let mut users: BTreeMap<u32, UserStatus> = BTreeMap::new();
        for c in self.conns.values() {
            if viewer.is_some_and(|u| u != c.peer.uid) {
                continue;
            }
            let u = users.entry(c.peer.uid).or_insert_with(|| UserStatus {
                uid: c.peer.uid,
                name: c.user.clone(),
                quota: c.quota.clone(),
                sessions: 0,
                held_bandwidth: 0.0,
                connections: 0,
            });
            u.connections += 1;
        }
        for s in self.sessions.values() {
            if let Some(u) = users.get_mut(&s.uid) {
                u.sessions += 1;
                u.held_bandwidth += s.charge();
            }
        }
        DaemonStatus {
            version: VERSION,
            pid: std::process::id(),
            uptime_ns: now.saturating_sub(self.start_ns),
            bound: self
                .cfg
                .bound
                .unwrap_or_else(|| self.kernel.dl_bandwidth_limit(None)),
            allocation: self.pool.allocation_status(),
            reserved_bandwidth: reserved,
            connections: self.conns.len(),
            boosts: self.boosts,
            active_boosts: self.booster.as_ref().map_or(0, |b| b.active().len()),
            guardian: self.guardian.as_ref().map(|g| g.pid()),
            users: users.into_values().collect(),
            sessions,
            refusals: self
                .refusals
                .iter()
                .filter(|r| viewer.is_none_or(|u| u == r.uid))
                .cloned()
                .collect(),
        }
    }
}

/// `pacer status --json`.
#[derive(Debug, Clone, Serialize)]
pub struct DaemonStatus {
    pub version: u16,
    pub pid: u32,
    pub uptime_ns: u64,
    /// Σ Q/P the daemon grants over all clients, CPUs.
    pub bound: f64,
    /// Σ Q/P in place now.
    pub reserved_bandwidth: f64,
    /// The shared supervisor's verdict at its last allocation (full, compressed, infeasible).
    pub allocation: Option<pacer_adapt::supervisor::AllocationStatus>,
    pub connections: usize,
    /// Interactive boosts granted since start, and in force now.
    pub boosts: u64,
    pub active_boosts: usize,
    pub guardian: Option<u32>,
    pub users: Vec<UserStatus>,
    pub sessions: Vec<SessionStatus>,
    /// The most recent refused requests (newest last).
    pub refusals: Vec<Refusal>,
}

#[derive(Debug, Clone, Serialize)]
pub struct UserStatus {
    pub uid: u32,
    pub name: Option<String>,
    pub quota: Quota,
    pub sessions: usize,
    /// Σ of the user's session ceilings counted against `quota.bandwidth`.
    pub held_bandwidth: f64,
    pub connections: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct SessionStatus {
    pub id: u32,
    pub pid: u32,
    pub uid: u32,
    pub controller: ControllerKind,
    pub period_ns: u64,
    /// Per-thread Q/P ceiling.
    pub ceiling: f64,
    pub idle: bool,
    pub age_ns: u64,
    pub hints: u64,
    pub jobs: u64,
    pub threads: Vec<ThreadStatus>,
    /// The controller's own per-thread view (requested budget, estimate, overruns, refusals).
    pub controller_status: serde_json::Value,
    /// A legacy session ([`Request::Attach`]): the process and every thread seen, as `pacer
    /// exec --json` shows them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec: Option<control::SessionStatus>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ThreadStatus {
    pub tid: Tid,
    /// The reservation's period: the session's, or a legacy thread's detected one.
    pub period_ns: Option<u64>,
    pub budget_ns: Option<u64>,
    pub reserved_bandwidth: Option<f64>,
    /// CPU time / wall time since the session was created.
    pub used_bandwidth: Option<f64>,
}
