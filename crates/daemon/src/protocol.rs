//! The wire protocol between applications (`pacer-client`, `libpacer`) and `pacer daemon`,
//! documented for other implementations in `docs/formats/protocol.md`.
//!
//! A connection is a byte stream (a Unix stream socket). Every message is one frame: a 4-byte
//! little-endian payload length, then the payload, a [`Request`] or [`Reply`] encoded with
//! postcard (serde's compact binary format: variant index and integers as LEB128 varints).
//! The first request must be [`Request::Hello`] carrying [`VERSION`].
//!
//! Requests are of two kinds. *Round trips* (hello, create/close a session, sync, boost,
//! status) get exactly one reply each, in order. *Notifications* (workUnits hints, job begin and
//! end, actual work durations) get no reply, so a real-time thread never waits for the daemon:
//! a refused notification is counted and its error kept, and the next [`Request::Sync`] reports
//! them. Because the stream is ordered, a `Sync` reply also proves every earlier notification
//! was applied (the round-trip time of a hint is measured that way).
//!
//! Encoding a notification needs no allocation ([`encode_into`] writes into a caller's buffer);
//! decoding is bounded: a client's frame may not exceed [`MAX_REQUEST`] bytes and names at most
//! [`MAX_TIDS`] threads.

use serde::{Deserialize, Serialize};

/// Protocol version spoken by this build; [`Request::Hello`] must carry the same.
pub const VERSION: u16 = 1;
/// Largest request payload the daemon accepts, bytes.
pub const MAX_REQUEST: usize = 1024;
/// Largest reply payload a client accepts, bytes (a status report of many sessions).
pub const MAX_REPLY: usize = 4 << 20;
/// Most threads one session may name.
pub const MAX_TIDS: usize = 64;
/// Frame header: the payload length, `u32` little-endian.
pub const HEADER: usize = 4;

/// Which controller sizes a session's reservations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerKind {
    /// The audio paper's proactive controller (workUnits table, eq. 3–5): budgets follow the
    /// hints before the jobs that need them. Without hints it learns one job cost.
    Proactive,
    /// The job-based adaptive reservation (LFS++ §7.3): a percentile of measured job times.
    Job,
    /// LFS++ for an unmodified process ([`Request::Attach`], `pacer exec --daemon`): periods
    /// detected from traced wake-ups, budgets from measured CPU time. Not valid in
    /// [`SessionSpec`].
    Legacy,
}

/// A session request: threads of the caller and their common period (= deadline).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionSpec {
    pub tids: Vec<u32>,
    pub period_ns: u64,
    pub controller: ControllerKind,
    /// Largest bandwidth (Q/P) any one thread of the session may be given; `None`: the
    /// daemon's per-thread default for this user. Counted against the user's quota.
    pub max_bandwidth: Option<f64>,
}

/// Most thread names an [`AttachSpec`] may select.
pub const MAX_NAMES: usize = 16;

/// A request to run LFS++ on a whole process (`pacer exec --daemon`, `pacer attach --daemon`):
/// the daemon discovers its threads, traces their wake-ups, detects their periods and reserves
/// them through the same supervisor as every other session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttachSpec {
    /// The process: the caller's own child, any process of its user when the configuration
    /// allows other processes of the same user, or any user process for root.
    pub pid: u32,
    /// Take only threads with one of these names (`comm`, at most [`MAX_NAMES`]); empty: all.
    pub names: Vec<String>,
    /// Reserve at this period instead of detecting it, ns.
    pub period_ns: Option<u64>,
    /// Also take threads created later.
    pub follow_new: bool,
    /// Largest bandwidth one thread may be given; `None`: the user's per-thread default.
    /// Counted against the user's quota for every thread taken.
    pub max_bandwidth: Option<f64>,
}

/// A reservation's state read by the thread itself (`/proc/self/task/TID/sched`), if the
/// client could read it; the daemon reads it otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireDl {
    pub deadline: u64,
    pub runtime: i64,
}

/// A job boundary of one thread of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobMark {
    pub session: u32,
    pub tid: u32,
    /// CLOCK_MONOTONIC, ns.
    pub t_ns: u64,
    /// The thread's CPU time (CLOCK_THREAD_CPUTIME_ID), ns.
    pub cpu_ns: u64,
    pub dl: Option<WireDl>,
}

/// Client to daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// Round trip; must come first.
    Hello { version: u16 },
    /// Round trip: reserve for these threads; reply [`Reply::Created`].
    CreateSession(SessionSpec),
    /// Notification: the coming jobs do `units` work units (the audio paper's hint).
    WorkUnits { session: u32, units: u32 },
    /// Notification.
    JobBegin(JobMark),
    /// Notification.
    JobEnd(JobMark),
    /// Notification (Android ADPF style): a job of `tid` took `ns` of CPU time.
    ActualWork { session: u32, tid: u32, ns: u64 },
    /// Round trip: every earlier notification has been applied; reports refused ones.
    Sync { seq: u32 },
    /// Round trip: give the session's threads their original scheduling back.
    CloseSession { session: u32 },
    /// Round trip: interactive boost of one of the caller's threads for `duration_ns`.
    Boost { tid: u32, duration_ns: u64 },
    /// Round trip: the daemon's state (sessions of the caller's user; all of them for root).
    Status,
    /// Round trip: LFS++ on a process; reply [`Reply::Created`] with the threads taken so far.
    /// (Last, so the other variants keep their wire numbers.)
    Attach(AttachSpec),
}

impl Request {
    /// Whether the request gets a reply.
    pub fn is_round_trip(&self) -> bool {
        !matches!(
            self,
            Request::WorkUnits { .. }
                | Request::JobBegin(_)
                | Request::JobEnd(_)
                | Request::ActualWork { .. }
        )
    }
}

/// What a thread of a session holds now.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ThreadGrant {
    pub tid: u32,
    /// Runtime in force, ns; `None` before the first reservation.
    pub budget_ns: Option<u64>,
    pub period_ns: u64,
}

/// Why a request failed. The numeric values are the C API's negative error codes
/// (`-(code as i32)`), so they never change meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[repr(i32)]
pub enum ErrorCode {
    /// The client speaks another protocol version.
    Version = 1,
    /// The frame could not be decoded.
    Malformed = 2,
    /// The frame exceeds [`MAX_REQUEST`].
    TooLarge = 3,
    /// A request before `Hello`, or a second `Hello`.
    OutOfOrder = 4,
    /// A named thread does not belong to the caller.
    NotYours = 5,
    NoSuchThread = 6,
    NoSuchSession = 7,
    /// A per-user or per-group limit (bandwidth, sessions, minimum period).
    Quota = 8,
    /// Admission control (the root domain is full).
    Admission = 9,
    /// A parameter out of range.
    Invalid = 10,
    /// The kernel or the daemon's configuration cannot do it here.
    Unsupported = 11,
    /// A kernel operation failed.
    Kernel = 12,
}

impl ErrorCode {
    pub fn from_i32(v: i32) -> Option<ErrorCode> {
        use ErrorCode::*;
        Some(match v {
            1 => Version,
            2 => Malformed,
            3 => TooLarge,
            4 => OutOfOrder,
            5 => NotYours,
            6 => NoSuchThread,
            7 => NoSuchSession,
            8 => Quota,
            9 => Admission,
            10 => Invalid,
            11 => Unsupported,
            12 => Kernel,
            _ => return None,
        })
    }

    /// A short description (the message of `pacer_strerror`).
    pub fn describe(self) -> &'static str {
        use ErrorCode::*;
        match self {
            Version => "the daemon speaks another protocol version",
            Malformed => "malformed message",
            TooLarge => "message too large",
            OutOfOrder => "request out of order (hello first, once)",
            NotYours => "the thread does not belong to the caller",
            NoSuchThread => "no such thread",
            NoSuchSession => "no such session",
            Quota => "over the caller's quota",
            Admission => "admission control refused the reservation (root domain full)",
            Invalid => "invalid argument",
            Unsupported => "not supported here",
            Kernel => "a kernel operation failed",
        }
    }
}

/// An error reply: a code and a message naming the limit, thread or field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct WireError {
    pub code: ErrorCode,
    pub message: String,
}

impl WireError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> WireError {
        WireError {
            code,
            message: message.into(),
        }
    }
}

/// A user's limits as the daemon applies them to this connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaView {
    /// Σ of the user's session ceilings, CPUs; `None` = unlimited.
    pub bandwidth: Option<f64>,
    pub sessions: Option<u32>,
    pub min_period_ns: u64,
    /// Per-thread ceiling when a session names none.
    pub thread_bandwidth: f64,
}

/// The interactive boost given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoostGrant {
    pub tid: u32,
    /// Which kernel mechanisms were used (e.g. "nice", "eevdf-slice", "uclamp").
    pub actuators: Vec<String>,
    pub nice: Option<i32>,
    pub slice_ns: Option<u64>,
    /// CLOCK_MONOTONIC ns at which the boost ends unless the thread blocks first.
    pub until_ns: u64,
}

/// Daemon to client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    Welcome {
        version: u16,
        daemon_pid: u32,
        uid: u32,
        quota: QuotaView,
    },
    Created {
        session: u32,
        threads: Vec<ThreadGrant>,
    },
    Synced {
        seq: u32,
        /// Notifications refused since the previous `Sync`.
        failed: u32,
        last_error: Option<WireError>,
    },
    Closed {
        session: u32,
    },
    Boosted(BoostGrant),
    /// The daemon's state as JSON (the same document `pacer status --json` prints), so the
    /// status can grow fields without a protocol version.
    Status {
        json: String,
    },
    Error(WireError),
}

/// Encoding or decoding failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("message of {len} bytes exceeds the limit of {max}")]
    TooLarge { len: usize, max: usize },
    #[error("malformed message: {0}")]
    Malformed(String),
    #[error("buffer of {0} bytes too small for the message")]
    BufferTooSmall(usize),
}

/// Encodes one frame (header + payload) into `buf`, returning its length; no allocation.
pub fn encode_into<T: Serialize>(msg: &T, buf: &mut [u8]) -> Result<usize, FrameError> {
    if buf.len() < HEADER {
        return Err(FrameError::BufferTooSmall(buf.len()));
    }
    let size = buf.len();
    let n = postcard::to_slice(msg, &mut buf[HEADER..])
        .map_err(|_| FrameError::BufferTooSmall(size))?
        .len();
    let len = u32::try_from(n).map_err(|_| FrameError::TooLarge {
        len: n,
        max: u32::MAX as usize,
    })?;
    buf[..HEADER].copy_from_slice(&len.to_le_bytes());
    Ok(HEADER + n)
}

/// Encodes one frame into a new vector.
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, FrameError> {
    let payload = postcard::to_allocvec(msg).map_err(|e| FrameError::Malformed(e.to_string()))?;
    let len = u32::try_from(payload.len()).map_err(|_| FrameError::TooLarge {
        len: payload.len(),
        max: u32::MAX as usize,
    })?;
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&payload);
    Ok(out)
}

/// Decodes one payload (without header).
pub fn decode<'a, T: Deserialize<'a>>(payload: &'a [u8]) -> Result<T, FrameError> {
    let (v, rest): (T, &[u8]) =
        postcard::take_from_bytes(payload).map_err(|e| FrameError::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(FrameError::Malformed(format!(
            "{} bytes after the message",
            rest.len()
        )));
    }
    Ok(v)
}

/// What [`FrameReader::next_frame`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A complete payload.
    Payload(&'a [u8]),
    /// A frame whose header announced `len` > the limit: its payload is skipped as it arrives
    /// and reported once, so the stream stays in step and the peer gets an error reply.
    Oversized(usize),
}

/// Splits a byte stream into frames, bounded: it holds what one read brought plus at most one
/// incomplete frame of at most `max` bytes, however much a peer sends.
#[derive(Debug)]
pub struct FrameReader {
    buf: Vec<u8>,
    max: usize,
    /// Bytes of an oversized payload still to discard.
    skip: usize,
    /// Consumed bytes at the start of `buf` (compacted on the next push).
    consumed: usize,
}

impl FrameReader {
    pub fn new(max: usize) -> FrameReader {
        FrameReader {
            buf: Vec::new(),
            max,
            skip: 0,
            consumed: 0,
        }
    }

    /// Room to read into: at most what completes the current frame (or its header), so a fast
    /// peer cannot make the reader buffer more than one frame.
    pub fn want(&self) -> usize {
        if self.skip > 0 {
            return self.skip.min(64 * 1024);
        }
        let have = self.buf.len() - self.consumed;
        if have < HEADER {
            return HEADER - have;
        }
        let len = u32::from_le_bytes(
            self.buf[self.consumed..self.consumed + HEADER]
                .try_into()
                .unwrap(),
        ) as usize;
        (HEADER + len.min(self.max)).saturating_sub(have).max(1)
    }

    /// Appends bytes read from the stream.
    pub fn push(&mut self, mut data: &[u8]) {
        if self.consumed > 0 {
            self.buf.drain(..self.consumed);
            self.consumed = 0;
        }
        if self.skip > 0 {
            let n = self.skip.min(data.len());
            self.skip -= n;
            data = &data[n..];
        }
        self.buf.extend_from_slice(data);
    }

    /// The next complete frame, if one is buffered.
    pub fn next_frame(&mut self) -> Option<Frame<'_>> {
        if self.consumed > 0 && self.consumed == self.buf.len() {
            self.buf.clear();
            self.consumed = 0;
        }
        let have = &self.buf[self.consumed..];
        if have.len() < HEADER {
            return None;
        }
        let len = u32::from_le_bytes(have[..HEADER].try_into().unwrap()) as usize;
        if len > self.max {
            // Discard what is buffered of it now and the rest as it arrives.
            let buffered = (have.len() - HEADER).min(len);
            self.skip = len - buffered;
            self.consumed += HEADER + buffered;
            return Some(Frame::Oversized(len));
        }
        if have.len() < HEADER + len {
            return None;
        }
        let start = self.consumed + HEADER;
        self.consumed = start + len;
        Some(Frame::Payload(&self.buf[start..start + len]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(r: &mut FrameReader) -> Vec<Result<Request, String>> {
        let mut out = Vec::new();
        while let Some(f) = r.next_frame() {
            out.push(match f {
                Frame::Payload(p) => decode::<Request>(p).map_err(|e| e.to_string()),
                Frame::Oversized(n) => Err(format!("oversized {n}")),
            });
        }
        out
    }

    #[test]
    fn notifications_encode_without_allocating_into_a_small_buffer() {
        let mut buf = [0u8; 64];
        let req = Request::JobBegin(JobMark {
            session: 7,
            tid: 123456,
            t_ns: u64::MAX,
            cpu_ns: 1 << 40,
            dl: Some(WireDl {
                deadline: u64::MAX,
                runtime: i64::MIN,
            }),
        });
        let n = encode_into(&req, &mut buf).unwrap();
        assert!(n <= 48, "{n} bytes");
        assert_eq!(decode::<Request>(&buf[HEADER..n]).unwrap(), req);
        assert_eq!(encode(&req).unwrap(), buf[..n].to_vec());
    }

    #[test]
    fn a_stream_cut_anywhere_gives_the_same_frames() {
        let msgs = [
            Request::Hello { version: VERSION },
            Request::WorkUnits { session: 1, units: 4 },
            Request::Sync { seq: 9 },
        ];
        let bytes: Vec<u8> = msgs.iter().flat_map(|m| encode(m).unwrap()).collect();
        for cut in 0..bytes.len() {
            let mut r = FrameReader::new(MAX_REQUEST);
            r.push(&bytes[..cut]);
            let mut got = frames(&mut r);
            r.push(&bytes[cut..]);
            got.extend(frames(&mut r));
            let want: Vec<_> = msgs.iter().cloned().map(Ok).collect();
            assert_eq!(got, want, "cut at {cut}");
        }
    }

    #[test]
    fn an_oversized_frame_is_reported_once_and_skipped() {
        let mut bytes = (5000u32).to_le_bytes().to_vec();
        bytes.extend(std::iter::repeat_n(0xAB, 5000));
        bytes.extend(encode(&Request::Status).unwrap());
        let mut r = FrameReader::new(MAX_REQUEST);
        let mut got = Vec::new();
        for chunk in bytes.chunks(700) {
            r.push(chunk);
            got.extend(frames(&mut r));
        }
        assert_eq!(got, vec![Err("oversized 5000".into()), Ok(Request::Status)]);
    }

    #[test]
    fn trailing_bytes_are_malformed() {
        let mut p = postcard::to_allocvec(&Request::Status).unwrap();
        p.push(0);
        assert!(matches!(decode::<Request>(&p), Err(FrameError::Malformed(_))));
    }

    #[test]
    fn error_codes_round_trip() {
        for v in 1..=12 {
            let c = ErrorCode::from_i32(v).unwrap();
            assert_eq!(c as i32, v);
            assert!(!c.describe().is_empty());
        }
        assert_eq!(ErrorCode::from_i32(0), None);
        assert_eq!(ErrorCode::from_i32(13), None);
    }
}
