//! The C ABI (`include/pacer.h`): thin wrappers over the Rust API. Functions returning `int`
//! give 0 (or a count) on success and a negative code on failure (`pacer_strerror`); those
//! returning a pointer give NULL on failure, with the code and a message for the calling thread
//! in `pacer_last_error()` / `pacer_last_error_message()`. No call lets a Rust panic cross into
//! C: a panic becomes a failure with code `-PACER_EPROTOCOL` (see `guard`).

use std::cell::RefCell;
use std::ffi::{c_char, c_double, c_int, CStr, CString};
use std::path::Path;

use crate::{strerror, Client, Controller, Error, Session, SessionOptions};

thread_local! {
    static LAST: RefCell<(c_int, CString)> = RefCell::new((0, CString::default()));
}

fn remember(e: &Error) -> c_int {
    let code = e.code();
    let msg = CString::new(e.to_string().replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = (code, msg));
    code
}

/// Runs `f`, turning a panic into an error instead of unwinding into C.
fn guard<T>(fallback: T, f: impl FnOnce() -> T + std::panic::UnwindSafe) -> T {
    std::panic::catch_unwind(f).unwrap_or_else(|_| {
        remember(&Error::Protocol("internal error (panic) in libpacer".into()));
        fallback
    })
}

fn status(r: Result<(), Error>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => remember(&e),
    }
}

/// Opaque client handle.
pub struct PacerClient(Client);
/// Opaque session handle.
pub struct PacerSession(Session);

/// Connects to the daemon at `socket_path`; NULL: `$PACER_SOCKET`, else the default socket,
/// else (no daemon, and the caller may set SCHED_DEADLINE itself) the in-process service.
///
/// # Safety
/// `socket_path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn pacer_connect(socket_path: *const c_char) -> *mut PacerClient {
    guard(std::ptr::null_mut(), || {
        let r = if socket_path.is_null() {
            Client::connect()
        } else {
            // SAFETY: the caller passes a NUL-terminated string.
            let p = unsafe { CStr::from_ptr(socket_path) };
            match p.to_str() {
                Ok("inprocess") => Client::in_process(Default::default()),
                Ok(s) => Client::connect_to(Path::new(s)),
                Err(_) => Err(Error::Invalid("the socket path is not UTF-8".into())),
            }
        };
        match r {
            Ok(c) => Box::into_raw(Box::new(PacerClient(c))),
            Err(e) => {
                remember(&e);
                std::ptr::null_mut()
            }
        }
    })
}

/// The in-process service, explicitly (needs root or CAP_SYS_NICE).
#[no_mangle]
pub extern "C" fn pacer_connect_in_process() -> *mut PacerClient {
    guard(std::ptr::null_mut(), || {
        match Client::in_process(Default::default()) {
            Ok(c) => Box::into_raw(Box::new(PacerClient(c))),
            Err(e) => {
                remember(&e);
                std::ptr::null_mut()
            }
        }
    })
}

/// Closes the handle. Open sessions keep the connection until they are closed.
///
/// # Safety
/// `c` is NULL or a handle from `pacer_connect` not yet disconnected.
#[no_mangle]
pub unsafe extern "C" fn pacer_disconnect(c: *mut PacerClient) {
    if !c.is_null() {
        // SAFETY: the caller gives back a pointer from Box::into_raw, once.
        drop(unsafe { Box::from_raw(c) });
    }
}

/// Whether the client runs the service in-process (1) or talks to a daemon (0); negative on a
/// NULL handle.
///
/// # Safety
/// `c` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn pacer_client_in_process(c: *const PacerClient) -> c_int {
    // SAFETY: the caller passes a live handle or NULL.
    match unsafe { c.as_ref() } {
        Some(c) => c_int::from(c.0.welcome().in_process),
        None => remember(&Error::Invalid("NULL client".into())),
    }
}

unsafe fn session_of<'a>(s: *const PacerSession) -> Result<&'a Session, Error> {
    // SAFETY: the caller passes a live handle or NULL.
    unsafe { s.as_ref() }
        .map(|s| &s.0)
        .ok_or_else(|| Error::Invalid("NULL session".into()))
}

/// A periodic session (deadline = period) of the proactive controller for `n_tids` threads.
///
/// # Safety
/// `c` is a live handle; `tids` points to `n_tids` thread ids.
#[no_mangle]
pub unsafe extern "C" fn pacer_session_create(
    c: *mut PacerClient,
    tids: *const libc::pid_t,
    n_tids: usize,
    period_ns: i64,
) -> *mut PacerSession {
    // SAFETY: forwarded under the same contract.
    unsafe { pacer_session_create_ex(c, tids, n_tids, period_ns, 0, 0.0) }
}

/// [`pacer_session_create`] with the controller (0 = proactive, 1 = job-based) and the
/// per-thread bandwidth ceiling (0 = the daemon's default for the caller).
///
/// # Safety
/// As [`pacer_session_create`].
#[no_mangle]
pub unsafe extern "C" fn pacer_session_create_ex(
    c: *mut PacerClient,
    tids: *const libc::pid_t,
    n_tids: usize,
    period_ns: i64,
    controller: c_int,
    max_bandwidth: c_double,
) -> *mut PacerSession {
    let fail = |e: Error| {
        remember(&e);
        std::ptr::null_mut()
    };
    // SAFETY: the caller passes a live handle or NULL.
    let Some(client) = (unsafe { c.as_ref() }) else {
        return fail(Error::Invalid("NULL client".into()));
    };
    if tids.is_null() || n_tids == 0 || n_tids > pacer_daemon::protocol::MAX_TIDS {
        return fail(Error::Invalid(format!(
            "a session names 1 to {} threads (tids={tids:?}, n_tids={n_tids})",
            pacer_daemon::protocol::MAX_TIDS
        )));
    }
    // SAFETY: the caller guarantees `n_tids` readable elements.
    let raw = unsafe { std::slice::from_raw_parts(tids, n_tids) };
    let mut list = Vec::with_capacity(n_tids);
    for &t in raw {
        match u32::try_from(t) {
            Ok(t) if t > 0 => list.push(t),
            _ => return fail(Error::Invalid(format!("thread id {t} is not valid"))),
        }
    }
    let Ok(period) = u64::try_from(period_ns) else {
        return fail(Error::Invalid(format!("period {period_ns} ns is negative")));
    };
    let kind = match controller {
        0 => Controller::Proactive,
        1 => Controller::Job,
        k => {
            return fail(Error::Invalid(format!(
                "controller {k} is not 0 (proactive) or 1 (job)"
            )))
        }
    };
    let mut o = SessionOptions::new(&list, period).controller(kind);
    if max_bandwidth != 0.0 {
        o = o.max_bandwidth(max_bandwidth);
    }
    let client = &client.0;
    guard(
        std::ptr::null_mut(),
        std::panic::AssertUnwindSafe(|| match client.session_with(&o) {
            Ok(s) => Box::into_raw(Box::new(PacerSession(s))),
            Err(e) => fail(e),
        }),
    )
}

/// The coming jobs do `work_units` units (notification: no reply, no allocation).
///
/// # Safety
/// `s` is a live session handle.
#[no_mangle]
pub unsafe extern "C" fn pacer_session_hint_work_units(s: *mut PacerSession, work_units: u32) -> c_int {
    // SAFETY: forwarded contract.
    status(unsafe { session_of(s) }.and_then(|s| s.hint_work_units(work_units)))
}

/// The calling thread begins a job (notification).
///
/// # Safety
/// `s` is a live session handle.
#[no_mangle]
pub unsafe extern "C" fn pacer_session_job_begin(s: *mut PacerSession) -> c_int {
    // SAFETY: forwarded contract.
    status(unsafe { session_of(s) }.and_then(|s| s.job_begin()))
}

/// The calling thread ends its job (notification).
///
/// # Safety
/// `s` is a live session handle.
#[no_mangle]
pub unsafe extern "C" fn pacer_session_job_end(s: *mut PacerSession) -> c_int {
    // SAFETY: forwarded contract.
    status(unsafe { session_of(s) }.and_then(|s| s.job_end()))
}

/// A job took `ns` nanoseconds of CPU time (ADPF style; notification).
///
/// # Safety
/// `s` is a live session handle.
#[no_mangle]
pub unsafe extern "C" fn pacer_session_report_actual_work_duration(s: *mut PacerSession, ns: i64) -> c_int {
    let Ok(ns) = u64::try_from(ns) else {
        return remember(&Error::Invalid(format!("duration {ns} ns is negative")));
    };
    // SAFETY: forwarded contract.
    status(unsafe { session_of(s) }.and_then(|s| s.report_actual_work_duration(ns)))
}

/// Waits until every notification sent so far is applied (round trip). Returns how many were
/// refused since the last sync (≥ 0), or a negative code.
///
/// # Safety
/// `s` is a live session handle.
#[no_mangle]
pub unsafe extern "C" fn pacer_session_sync(s: *mut PacerSession) -> c_int {
    // SAFETY: forwarded contract.
    match unsafe { session_of(s) }.and_then(|s| s.sync()) {
        Ok(r) => {
            if let Some(e) = r.last_error {
                remember(&Error::Refused(e));
            }
            c_int::try_from(r.failed).unwrap_or(c_int::MAX)
        }
        Err(e) => remember(&e),
    }
}

/// Gives the session's threads their original scheduling back and frees the handle (also
/// when it fails).
///
/// # Safety
/// `s` is NULL or a live session handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn pacer_session_close(s: *mut PacerSession) -> c_int {
    if s.is_null() {
        return remember(&Error::Invalid("NULL session".into()));
    }
    // SAFETY: a pointer from Box::into_raw, given back once.
    let b = unsafe { Box::from_raw(s) };
    status(b.0.close())
}

/// Interactive boost of `tid` for `duration_ns`.
///
/// # Safety
/// `c` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn pacer_boost(c: *mut PacerClient, tid: libc::pid_t, duration_ns: i64) -> c_int {
    // SAFETY: the caller passes a live handle or NULL.
    let Some(client) = (unsafe { c.as_ref() }) else {
        return remember(&Error::Invalid("NULL client".into()));
    };
    let (Ok(tid), Ok(d)) = (u32::try_from(tid), u64::try_from(duration_ns)) else {
        return remember(&Error::Invalid(format!(
            "tid {tid} / duration {duration_ns} out of range"
        )));
    };
    status(client.0.boost(tid, d).map(|_| ()))
}

/// A static description of a negative error code.
#[no_mangle]
pub extern "C" fn pacer_strerror(err: c_int) -> *const c_char {
    // The strings are static: build a NUL-terminated copy once per code.
    static TABLE: std::sync::OnceLock<Vec<(c_int, CString)>> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        (0..=40)
            .map(|c: c_int| (-c, CString::new(strerror(-c)).unwrap_or_default()))
            .collect()
    });
    t.iter()
        .find(|(c, _)| *c == err)
        .map_or(c"unknown error".as_ptr(), |(_, s)| s.as_ptr())
}

/// The code of the calling thread's last failure (0 if none).
#[no_mangle]
pub extern "C" fn pacer_last_error() -> c_int {
    LAST.with(|l| l.borrow().0)
}

/// The message of the calling thread's last failure, naming the limit, thread or field
/// (valid until the thread's next failing call).
#[no_mangle]
pub extern "C" fn pacer_last_error_message() -> *const c_char {
    LAST.with(|l| l.borrow().1.as_ptr())
}
