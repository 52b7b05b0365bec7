//! The library applications link to get adaptive SCHED_DEADLINE reservations from pacer: a Rust
//! API (this module) and a C ABI ([`ffi`], `include/pacer.h`, `libpacer.so`/`libpacer.a`).
//!
//! A [`Client`] talks to `pacer daemon` over its socket (for unprivileged programs), or hosts the
//! daemon's service on a thread of its own process ([`Client::in_process`], for embedded use by
//! programs that may set SCHED_DEADLINE themselves). Both speak the same protocol
//! (`pacer_daemon::protocol`), so an application behaves the same either way.
//!
//! **Real-time safety.** Hints, job begin/end and actual-work reports are *notifications*: one
//! non-blocking `send(2)` of a frame encoded into a stack buffer, no allocation, no lock, no
//! waiting for the daemon (a full socket buffer gives [`Error::WouldBlock`] and the hint is
//! dropped). Job marks also read the thread's CPU clock and, under SCHED_DEADLINE, its deadline
//! state (`/proc/self/task/TID/sched`, opened at the thread's first mark, then one `pread` into a
//! stack buffer).
//! The other calls are *round trips*: they allocate and wait for one reply (bounded by
//! [`Client::set_timeout`]), so make them outside the real-time loop, except [`Session::sync`]
//! when a budget must be in place before the next job.
//!
//! See `docs/client.md` for the whole API, a C and a Rust example, and in-process vs daemon.

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use pacer_daemon::peer::Peer;
use pacer_daemon::protocol::{
    self, encode_into, ControllerKind, ErrorCode, Frame, FrameReader, JobMark, QuotaView, Reply, Request,
    SessionSpec, ThreadGrant, WireError, MAX_REPLY, VERSION,
};
pub use pacer_daemon::protocol::{AttachSpec, BoostGrant, ControllerKind as Controller};
use pacer_daemon::{Config, Server, Service, DEFAULT_SOCKET};

pub mod ffi;

/// `PACER_SOCKET`: the daemon's socket for clients; the value `inprocess` asks for the
/// in-process service.
pub const SOCKET_ENV: &str = "PACER_SOCKET";

/// Why a call failed. [`Error::code`] gives the C API's negative code.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The daemon (or the in-process service) refused the request.
    #[error("{0}")]
    Refused(#[from] WireError),
    #[error("cannot connect to pacer at {path}: {source} (is `pacer daemon` running? PACER_SOCKET names another socket)")]
    Connect { path: PathBuf, source: io::Error },
    #[error("talking to pacer: {0}")]
    Io(io::Error),
    #[error("pacer did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the connection to pacer is closed")]
    Closed,
    /// A notification could not be queued without blocking (the socket buffer is full).
    #[error("the notification was dropped: the connection's buffer is full")]
    WouldBlock,
    #[error("unexpected reply from pacer: {0}")]
    Protocol(String),
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("in-process mode: {0}")]
    InProcess(String),
}

/// The C API's codes for errors that are the client's own (daemon codes are 1–12).
pub mod codes {
    pub const CONNECT: i32 = 20;
    pub const IO: i32 = 21;
    pub const TIMEOUT: i32 = 22;
    pub const CLOSED: i32 = 23;
    pub const WOULD_BLOCK: i32 = 24;
    pub const PROTOCOL: i32 = 25;
    pub const IN_PROCESS: i32 = 26;
}

impl Error {
    /// The negative error code of the C API.
    pub fn code(&self) -> i32 {
        -match self {
            Error::Refused(w) => w.code as i32,
            Error::Connect { .. } => codes::CONNECT,
            Error::Io(_) => codes::IO,
            Error::Timeout(_) => codes::TIMEOUT,
            Error::Closed => codes::CLOSED,
            Error::WouldBlock => codes::WOULD_BLOCK,
            Error::Protocol(_) => codes::PROTOCOL,
            Error::Invalid(_) => ErrorCode::Invalid as i32,
            Error::InProcess(_) => codes::IN_PROCESS,
        }
    }

    /// The daemon's error code, if the daemon refused.
    pub fn wire_code(&self) -> Option<ErrorCode> {
        match self {
            Error::Refused(w) => Some(w.code),
            _ => None,
        }
    }
}

/// A static description of a negative error code (`pacer_strerror`).
pub fn strerror(code: i32) -> &'static str {
    if code == 0 {
        return "success";
    }
    let c = code.checked_neg().unwrap_or(0);
    if let Some(w) = ErrorCode::from_i32(c) {
        return w.describe();
    }
    match c {
        codes::CONNECT => "cannot connect to the pacer daemon",
        codes::IO => "input/output error on the connection to pacer",
        codes::TIMEOUT => "pacer did not answer in time",
        codes::CLOSED => "the connection to pacer is closed",
        codes::WOULD_BLOCK => "the notification was dropped: the connection's buffer is full",
        codes::PROTOCOL => "unexpected reply from pacer",
        codes::IN_PROCESS => "the in-process service could not start",
        _ => "unknown error",
    }
}

/// What `Sync` reported.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncReport {
    /// Notifications refused since the previous sync.
    pub failed: u32,
    pub last_error: Option<WireError>,
}

struct RoundTrip {
    reader: FrameReader,
    seq: u32,
}

struct Inner {
    stream: UnixStream,
    rt: Mutex<RoundTrip>,
    timeout: Mutex<Duration>,
    welcome: Welcome,
    service: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The in-process service releases every session when our end closes; wait for it so a
        // dropped client has given its threads back by the time drop returns.
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        if let Some(h) = self.service.lock().ok().and_then(|mut s| s.take()) {
            let _ = h.join();
        }
    }
}

/// What the daemon said at connection.
#[derive(Debug, Clone, PartialEq)]
pub struct Welcome {
    pub daemon_pid: u32,
    pub uid: u32,
    pub quota: QuotaView,
    pub in_process: bool,
}

/// A connection to pacer. Cheap to clone (shared); usable from several threads.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("welcome", &self.inner.welcome)
            .finish()
    }
}

/// The socket a client uses by default: `$PACER_SOCKET`, else [`DEFAULT_SOCKET`].
pub fn default_socket() -> PathBuf {
    std::env::var_os(SOCKET_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET))
}

/// Whether this process may set SCHED_DEADLINE itself (root or CAP_SYS_NICE).
pub fn privileged() -> bool {
    pacer_linux::cred::may_set_deadline()
}

impl Client {
    /// Connects to the daemon at `path`.
    pub fn connect_to(path: &Path) -> Result<Client, Error> {
        let stream = UnixStream::connect(path).map_err(|source| Error::Connect {
            path: path.to_path_buf(),
            source,
        })?;
        Client::handshake(stream, None)
    }

    /// The default connection: `$PACER_SOCKET` (or the default socket); `PACER_SOCKET=inprocess`
    /// or, when no daemon listens and this process may set SCHED_DEADLINE itself, the
    /// in-process service.
    pub fn connect() -> Result<Client, Error> {
        let path = default_socket();
        if path.as_os_str() == "inprocess" {
            return Client::in_process(Config::default());
        }
        match Client::connect_to(&path) {
            Err(Error::Connect { source, .. })
                if matches!(
                    source.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
                ) && privileged() =>
            {
                Client::in_process(Config::default())
            }
            r => r,
        }
    }

    /// Hosts the daemon's service on a thread of this process and connects to it: no daemon,
    /// same API; needs the privilege to set SCHED_DEADLINE (root or CAP_SYS_NICE). `cfg`'s bound
    /// applies; quotas do not (the application is its own user).
    pub fn in_process(cfg: Config) -> Result<Client, Error> {
        let (mine, theirs) = UnixStream::pair().map_err(Error::Io)?;
        let peer = Peer::this_process();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("pacer-service".into())
            .spawn(move || {
                let mut cfg = cfg;
                // The application is the only user: its own quota would only get in the way.
                cfg.default = Default::default();
                let mut server = Server::new(Service::in_process(cfg), None);
                let r = server.add_connection(theirs, peer);
                let _ = ready_tx.send(r.map_err(|e| e.to_string()));
                let _ = server.run(None, |n| eprintln!("pacer (in-process): {n}"));
            })
            .map_err(|e| Error::InProcess(format!("starting the service thread: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(Error::InProcess(e)),
            Err(_) => return Err(Error::InProcess("the service thread ended at start".into())),
        }
        Client::handshake(mine, Some(handle))
    }

    fn handshake(stream: UnixStream, service: Option<JoinHandle<()>>) -> Result<Client, Error> {
        let in_process = service.is_some();
        let mut inner = Inner {
            stream,
            rt: Mutex::new(RoundTrip {
                reader: FrameReader::new(MAX_REPLY),
                seq: 0,
            }),
            timeout: Mutex::new(Duration::from_secs(5)),
            welcome: Welcome {
                daemon_pid: 0,
                uid: 0,
                quota: QuotaView {
                    bandwidth: None,
                    sessions: None,
                    min_period_ns: 0,
                    thread_bandwidth: 0.0,
                },
                in_process,
            },
            service: Mutex::new(service),
        };
        match Client::round_trip_on(&inner, &Request::Hello { version: VERSION })? {
            Reply::Welcome {
                daemon_pid,
                uid,
                quota,
                ..
            } => {
                inner.welcome = Welcome {
                    daemon_pid,
                    uid,
                    quota,
                    in_process,
                };
            }
            other => return Err(unexpected(&other)),
        }
        Ok(Client {
            inner: Arc::new(inner),
        })
    }

    /// What the daemon said at connection (its PID, the caller's quota).
    pub fn welcome(&self) -> &Welcome {
        &self.inner.welcome
    }

    /// Longest wait for a reply (default 5 s).
    pub fn set_timeout(&self, t: Duration) {
        if let Ok(mut g) = self.inner.timeout.lock() {
            *g = t;
        }
    }

    fn round_trip_on(inner: &Inner, req: &Request) -> Result<Reply, Error> {
        let frame = protocol::encode(req).map_err(|e| Error::Invalid(e.to_string()))?;
        let timeout = inner.timeout.lock().map(|g| *g).unwrap_or(Duration::from_secs(5));
        let mut rt = inner
            .rt
            .lock()
            .map_err(|_| Error::Protocol("a previous call panicked".into()))?;
        write_all(&inner.stream, &frame, timeout)?;
        let deadline = std::time::Instant::now() + timeout;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match rt.reader.next_frame() {
                Some(Frame::Payload(p)) => {
                    let reply: Reply = protocol::decode(p).map_err(|e| Error::Protocol(e.to_string()))?;
                    return match reply {
                        Reply::Error(e) => Err(Error::Refused(e)),
                        r => Ok(r),
                    };
                }
                Some(Frame::Oversized(n)) => {
                    return Err(Error::Protocol(format!(
                        "a reply of {n} bytes exceeds {MAX_REPLY}"
                    )))
                }
                None => {}
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout(timeout));
            }
            let ready =
                pacer_linux::signals::wait_readable(&[inner.stream.as_raw_fd()], left.as_nanos() as u64)
                    .map_err(|e| Error::Io(io::Error::other(e.to_string())))?;
            if !ready[0] {
                // Timed out or interrupted: the deadline check above decides.
                continue;
            }
            let want = rt.reader.want().min(buf.len());
            match (&inner.stream).read(&mut buf[..want]) {
                Ok(0) => return Err(Error::Closed),
                Ok(n) => rt.reader.push(&buf[..n]),
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {}
                Err(e) => return Err(Error::Io(e)),
            }
        }
    }

    fn round_trip(&self, req: &Request) -> Result<Reply, Error> {
        Client::round_trip_on(&self.inner, req)
    }

    /// A notification: one non-blocking send of a frame built on the stack.
    fn notify(&self, req: &Request) -> Result<(), Error> {
        let mut buf = [0u8; 96];
        let n = encode_into(req, &mut buf).map_err(|e| Error::Invalid(e.to_string()))?;
        match pacer_linux::sys::send_nowait(self.inner.stream.as_raw_fd(), &buf[..n]) {
            Ok(sent) if sent == n => Ok(()),
            // A Unix stream socket queues a frame this small whole or not at all; a partial send
            // would corrupt the stream, so say so rather than carry on.
            Ok(sent) => Err(Error::Protocol(format!("partial send of {sent} of {n} bytes"))),
            Err(e) => Err(match e.kind() {
                io::ErrorKind::WouldBlock => Error::WouldBlock,
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => Error::Closed,
                _ => Error::Io(e),
            }),
        }
    }

    /// A periodic session of proactive reservations for `tids` (deadline = period). See
    /// [`Client::session_with`] for the other options.
    pub fn session(&self, tids: &[u32], period_ns: u64) -> Result<Session, Error> {
        self.session_with(&SessionOptions::new(tids, period_ns))
    }

    /// A session with every option.
    pub fn session_with(&self, o: &SessionOptions) -> Result<Session, Error> {
        let spec = SessionSpec {
            tids: o.tids.clone(),
            period_ns: o.period_ns,
            controller: o.controller,
            max_bandwidth: o.max_bandwidth,
        };
        match self.round_trip(&Request::CreateSession(spec))? {
            Reply::Created { session, threads } => Ok(Session {
                client: self.clone(),
                id: session,
                tids: o.tids.clone(),
                period_ns: o.period_ns,
                granted: threads,
                closed: false,
            }),
            other => Err(unexpected(&other)),
        }
    }

    /// Every earlier notification applied; reports the refused ones.
    pub fn sync(&self) -> Result<SyncReport, Error> {
        let seq = {
            let mut rt = self
                .inner
                .rt
                .lock()
                .map_err(|_| Error::Protocol("poisoned".into()))?;
            rt.seq = rt.seq.wrapping_add(1);
            rt.seq
        };
        match self.round_trip(&Request::Sync { seq })? {
            Reply::Synced {
                seq: s,
                failed,
                last_error,
            } if s == seq => Ok(SyncReport { failed, last_error }),
            other => Err(unexpected(&other)),
        }
    }

    /// Interactive boost of `tid` (a thread serving the user) for `duration_ns`, undone early
    /// when the thread blocks (VT-CFS, framework-assisted).
    pub fn boost(&self, tid: u32, duration_ns: u64) -> Result<BoostGrant, Error> {
        match self.round_trip(&Request::Boost { tid, duration_ns })? {
            Reply::Boosted(g) => Ok(g),
            other => Err(unexpected(&other)),
        }
    }

    /// LFS++ by the daemon on a whole process (`pacer exec --daemon`): its threads are traced,
    /// their periods detected and reserved under the daemon's one supervisor. Returns the
    /// session id, closed with [`Client::close_session`] or when this connection closes.
    pub fn attach(&self, spec: &AttachSpec) -> Result<u32, Error> {
        match self.round_trip(&Request::Attach(spec.clone()))? {
            Reply::Created { session, .. } => Ok(session),
            other => Err(unexpected(&other)),
        }
    }

    /// Closes a session by id (round trip): its threads get their original scheduling back.
    pub fn close_session(&self, session: u32) -> Result<(), Error> {
        match self.round_trip(&Request::CloseSession { session })? {
            Reply::Closed { .. } => Ok(()),
            other => Err(unexpected(&other)),
        }
    }

    /// The daemon's state as JSON (what `pacer status --json` prints).
    pub fn status_json(&self) -> Result<String, Error> {
        match self.round_trip(&Request::Status)? {
            Reply::Status { json } => Ok(json),
            other => Err(unexpected(&other)),
        }
    }
}

fn unexpected(r: &Reply) -> Error {
    Error::Protocol(format!("{r:?}"))
}

fn write_all(mut s: &UnixStream, mut data: &[u8], timeout: Duration) -> Result<(), Error> {
    s.set_write_timeout(Some(timeout)).map_err(Error::Io)?;
    while !data.is_empty() {
        match s.write(data) {
            Ok(0) => return Err(Error::Closed),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Err(Error::Timeout(timeout)),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Err(Error::Closed),
            Err(e) => return Err(Error::Io(e)),
        }
    }
    Ok(())
}

/// The options of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionOptions {
    pub tids: Vec<u32>,
    pub period_ns: u64,
    pub controller: ControllerKind,
    /// Per-thread Q/P ceiling; `None`: the daemon's default for the caller.
    pub max_bandwidth: Option<f64>,
}

impl SessionOptions {
    pub fn new(tids: &[u32], period_ns: u64) -> SessionOptions {
        SessionOptions {
            tids: tids.to_vec(),
            period_ns,
            controller: ControllerKind::Proactive,
            max_bandwidth: None,
        }
    }
    pub fn controller(mut self, c: ControllerKind) -> Self {
        self.controller = c;
        self
    }
    pub fn max_bandwidth(mut self, b: f64) -> Self {
        self.max_bandwidth = Some(b);
        self
    }
}

/// The calling thread's id.
pub fn gettid() -> u32 {
    pacer_linux::sched::gettid()
}

thread_local! {
    /// The calling thread's own `sched` file, opened at its first job mark (the one allocation),
    /// read without allocating afterwards; `None` inside if it cannot be opened.
    static OWN_DL: std::cell::RefCell<Option<Option<pacer_linux::dlstate::DlStateReader>>> =
        const { std::cell::RefCell::new(None) };
}

/// The calling thread's CPU time and, under SCHED_DEADLINE, its deadline state (eq. 3 of the
/// audio paper needs both at job begin and end), read in that order.
fn own_state() -> (u64, Option<protocol::WireDl>) {
    OWN_DL.with(|cell| {
        let mut cell = cell.borrow_mut();
        let reader = cell.get_or_insert_with(|| pacer_linux::dlstate::DlStateReader::open_self().ok());
        match reader.as_ref().map(|r| r.read_own()) {
            Some(Ok((cpu, dl))) => (
                cpu,
                dl.map(|d| protocol::WireDl {
                    deadline: d.deadline,
                    runtime: d.runtime,
                }),
            ),
            _ => (clock(libc::CLOCK_THREAD_CPUTIME_ID), None),
        }
    })
}

fn clock(id: libc::clockid_t) -> u64 {
    pacer_linux::sys::clock_ns(id)
}

/// A session: threads whose reservations pacer sizes. Closing it (or dropping it) gives the
/// threads their original scheduling back.
#[derive(Debug)]
pub struct Session {
    client: Client,
    id: u32,
    tids: Vec<u32>,
    period_ns: u64,
    granted: Vec<ThreadGrant>,
    closed: bool,
}

impl Session {
    pub fn id(&self) -> u32 {
        self.id
    }
    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }
    pub fn tids(&self) -> &[u32] {
        &self.tids
    }
    /// The reservations granted when the session was created.
    pub fn initial_grants(&self) -> &[ThreadGrant] {
        &self.granted
    }

    /// The coming jobs do `units` work units (notification; real-time safe).
    pub fn hint_work_units(&self, units: u32) -> Result<(), Error> {
        self.client.notify(&Request::WorkUnits {
            session: self.id,
            units,
        })
    }

    fn mark(&self) -> Result<JobMark, Error> {
        let tid = gettid();
        if !self.tids.contains(&tid) {
            return Err(Error::Invalid(format!(
                "job marks come from the session's threads; thread {tid} is not in session {}",
                self.id
            )));
        }
        let t_ns = clock(libc::CLOCK_MONOTONIC);
        let (cpu_ns, dl) = own_state();
        Ok(JobMark {
            session: self.id,
            tid,
            t_ns,
            cpu_ns,
            dl,
        })
    }

    /// The calling thread starts a job (notification; real-time safe).
    pub fn job_begin(&self) -> Result<(), Error> {
        let m = self.mark()?;
        self.client.notify(&Request::JobBegin(m))
    }

    /// The calling thread finished its job (notification; real-time safe).
    pub fn job_end(&self) -> Result<(), Error> {
        let m = self.mark()?;
        self.client.notify(&Request::JobEnd(m))
    }

    /// A job of the calling thread took `ns` (Android ADPF's actual work duration; notification).
    pub fn report_actual_work_duration(&self, ns: u64) -> Result<(), Error> {
        let tid = gettid();
        let tid = if self.tids.contains(&tid) {
            tid
        } else {
            self.tids[0]
        };
        self.client.notify(&Request::ActualWork {
            session: self.id,
            tid,
            ns,
        })
    }

    /// Waits until every notification sent so far is applied (round trip).
    pub fn sync(&self) -> Result<SyncReport, Error> {
        self.client.sync()
    }

    /// Gives the threads back (round trip).
    pub fn close(mut self) -> Result<(), Error> {
        self.closed = true;
        match self
            .client
            .round_trip(&Request::CloseSession { session: self.id })?
        {
            Reply::Closed { .. } => Ok(()),
            other => Err(unexpected(&other)),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if !self.closed {
            let _ = self
                .client
                .round_trip(&Request::CloseSession { session: self.id });
        }
    }
}
