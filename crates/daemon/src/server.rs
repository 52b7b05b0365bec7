//! The daemon's event loop: one thread waiting (epoll) on the listening socket, every connection and a
//! stop descriptor (the signalfd of `pacer daemon`, or the in-process client's end), feeding
//! decoded frames to the [`Service`] and writing its replies back.
//!
//! One thread on purpose: the service's state (sessions, the shared supervisor) is changed by
//! one hand, in the order messages arrive, and a hint is applied before the next message is
//! read. Sockets are non-blocking; a client that does not read its replies cannot stall
//! anyone (its pending output is bounded, then it is disconnected).

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use pacer_linux::epoll::Epoll;

use crate::peer::{peer_cred, Peer};
use crate::protocol::{decode, encode, Frame, FrameError, FrameReader, Reply, Request, MAX_REQUEST};
use crate::service::{ConnId, Service};

/// Pending output a client may leave unread before it is disconnected, bytes.
const MAX_PENDING_OUT: usize = 8 << 20;

/// Why the daemon could not start serving.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("{path}: {message}")]
    Socket { path: PathBuf, message: String },
    #[error("poll: {0}")]
    Poll(io::Error),
}

/// A listening socket that removes its file when dropped (only if the file is still ours).
#[derive(Debug)]
pub struct Listener {
    sock: UnixListener,
    path: PathBuf,
    ino: u64,
}

impl Drop for Listener {
    fn drop(&mut self) {
        use std::os::unix::fs::MetadataExt;
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.ino) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Listener {
    /// Binds `path` with file mode `mode`. An existing socket with a daemon behind it is an
    /// error; a stale one (nobody listening) is replaced; any other file is never touched.
    pub fn bind(path: &Path, mode: u32) -> Result<Listener, ServerError> {
        use std::os::unix::fs::MetadataExt;
        let err = |message: String| ServerError::Socket {
            path: path.to_path_buf(),
            message,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                std::fs::create_dir_all(dir).map_err(|e| err(format!("creating its directory: {e}")))?;
                let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
            }
        }
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_socket() => {
                if UnixStream::connect(path).is_ok() {
                    return Err(err("another daemon is listening there (stop it first)".into()));
                }
                std::fs::remove_file(path).map_err(|e| err(format!("removing the stale socket: {e}")))?;
            }
            Ok(_) => return Err(err("exists and is not a socket: refusing to replace it".into())),
            Err(_) => {}
        }
        let sock = UnixListener::bind(path).map_err(|e| err(format!("bind: {e}")))?;
        sock.set_nonblocking(true).map_err(|e| err(e.to_string()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| err(format!("chmod {mode:o}: {e}")))?;
        let ino = std::fs::symlink_metadata(path).map(|m| m.ino()).unwrap_or(0);
        Ok(Listener {
            sock,
            path: path.to_path_buf(),
            ino,
        })
    }
}

/// Event tokens: the stop descriptor, the listener, then connection `id` as `CONN_BASE + id`.
const STOP: u64 = 0;
const LISTENER: u64 = 1;
const CONN_BASE: u64 = 2;

fn token(id: ConnId) -> u64 {
    CONN_BASE + id
}

struct Connection {
    stream: UnixStream,
    reader: FrameReader,
    out: Vec<u8>,
    /// Close once `out` is written (after a fatal error reply).
    closing: bool,
    /// Whether the connection is registered for writability (it has output pending).
    want_out: bool,
}

/// The event loop.
pub struct Server {
    service: Service,
    listener: Option<Listener>,
    conns: BTreeMap<ConnId, Connection>,
    next: ConnId,
    /// Stop when no connection is left and there is no listener (the in-process server).
    stop_when_alone: bool,
    messages: u64,
    epoll: Option<Epoll>,
}

/// What ended [`Server::run`].
#[derive(Debug, PartialEq, Eq)]
pub enum Stopped {
    /// The stop descriptor became readable.
    Signal,
    /// The last connection of an in-process server closed.
    Alone,
}

impl Server {
    pub fn new(service: Service, listener: Option<Listener>) -> Server {
        let stop_when_alone = listener.is_none();
        Server {
            service,
            listener,
            conns: BTreeMap::new(),
            next: 1,
            stop_when_alone,
            messages: 0,
            epoll: None,
        }
    }

    /// Messages served so far.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// Serves an already connected stream whose peer is `peer` (the in-process client).
    pub fn add_connection(&mut self, stream: UnixStream, peer: Peer) -> io::Result<()> {
        stream.set_nonblocking(true)?;
        let id = self.next;
        self.next += 1;
        self.service.accept(id, peer);
        self.conns.insert(
            id,
            Connection {
                stream,
                reader: FrameReader::new(MAX_REQUEST),
                out: Vec::new(),
                closing: false,
                want_out: false,
            },
        );
        if let (Some(ep), Some(c)) = (self.epoll.as_ref(), self.conns.get(&id)) {
            ep.add(c.stream.as_raw_fd(), token(id), libc::EPOLLIN as u32)?;
        }
        Ok(())
    }

    /// Serves until `stop` is readable (or, in-process, the last client leaves); then every
    /// session is released. `on_notice` receives messages for the operator.
    pub fn run(
        &mut self,
        stop: Option<RawFd>,
        mut on_notice: impl FnMut(&str),
    ) -> Result<Stopped, ServerError> {
        let ep = Epoll::new().map_err(ServerError::Poll)?;
        if let Some(fd) = stop {
            ep.add(fd, STOP, libc::EPOLLIN as u32)
                .map_err(ServerError::Poll)?;
        }
        if let Some(l) = self.listener.as_ref() {
            ep.add(l.sock.as_raw_fd(), LISTENER, libc::EPOLLIN as u32)
                .map_err(ServerError::Poll)?;
        }
        for (&id, c) in &self.conns {
            ep.add(c.stream.as_raw_fd(), token(id), libc::EPOLLIN as u32)
                .map_err(ServerError::Poll)?;
        }
        self.epoll = Some(ep);
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
        loop {
            let now = pacer_linux::sys::monotonic_ns();
            let wait_ms = self
                .service
                .next_tick_ns()
                .saturating_sub(now)
                .div_ceil(1_000_000)
                .min(1000) as i32;
            let n = match self.epoll.as_ref().expect("set above").wait(&mut events, wait_ms) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ServerError::Poll(e)),
            };
            for ev in &events[..n] {
                let (tok, re) = (ev.u64, ev.events);
                match tok {
                    STOP => {
                        self.finish(&mut on_notice);
                        return Ok(Stopped::Signal);
                    }
                    LISTENER => self.accept_all(&mut on_notice),
                    t => {
                        let id = t - CONN_BASE;
                        if re & libc::EPOLLOUT as u32 != 0 {
                            self.flush(id);
                        }
                        if re & (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
                            self.read(id);
                        }
                    }
                }
            }
            self.service.tick();
            for n in self.service.take_notices() {
                on_notice(&n);
            }
            if self.stop_when_alone && self.conns.is_empty() {
                self.finish(&mut on_notice);
                return Ok(Stopped::Alone);
            }
        }
    }

    fn finish(&mut self, on_notice: &mut impl FnMut(&str)) {
        for n in self.service.shutdown() {
            on_notice(&n);
        }
        self.conns.clear();
    }

    fn accept_all(&mut self, on_notice: &mut impl FnMut(&str)) {
        loop {
            let Some(l) = self.listener.as_ref() else { return };
            match l.sock.accept() {
                Ok((stream, _)) => {
                    let peer = match peer_cred(stream.as_raw_fd()) {
                        Ok(p) => p,
                        Err(e) => {
                            on_notice(&format!("a connection without credentials was dropped: {e}"));
                            continue;
                        }
                    };
                    if let Err(e) = self.add_connection(stream, peer) {
                        on_notice(&format!("accept: {e}"));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    on_notice(&format!("accept: {e}"));
                    return;
                }
            }
        }
    }

    fn read(&mut self, id: ConnId) {
        let mut buf = [0u8; 4096];
        // Bounded per round, so one flooding client cannot starve the others.
        for _ in 0..64 {
            let Some(c) = self.conns.get_mut(&id) else { return };
            if c.closing {
                // Stop reading; the error reply still goes out below.
                break;
            }
            // Whatever is there, up to 4 KiB: one recv for many small frames (they are all served
            // before the next read, so the reader never holds more than 4 KiB + one frame).
            match c.stream.read(&mut buf) {
                Ok(0) => {
                    self.drop_conn(id);
                    return;
                }
                Ok(n) => {
                    c.reader.push(&buf[..n]);
                    self.serve_frames(id);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.drop_conn(id);
                    return;
                }
            }
        }
        self.flush(id);
    }

    fn serve_frames(&mut self, id: ConnId) {
        loop {
            let Some(c) = self.conns.get_mut(&id) else { return };
            let decoded: Result<Request, FrameError> = match c.reader.next_frame() {
                None => return,
                Some(Frame::Oversized(len)) => Err(FrameError::TooLarge {
                    len,
                    max: MAX_REQUEST,
                }),
                Some(Frame::Payload(p)) => decode(p),
            };
            self.messages += 1;
            let reply = match decoded {
                Ok(req) => self.service.handle(id, req),
                Err(e) => Some(self.service.frame_error(id, &e)),
            };
            if let Some(r) = reply {
                let fatal = matches!(&r, Reply::Error(e) if e.code == crate::protocol::ErrorCode::Version);
                self.queue(id, &r);
                if fatal {
                    if let Some(c) = self.conns.get_mut(&id) {
                        c.closing = true;
                    }
                    return;
                }
            }
        }
    }

    fn queue(&mut self, id: ConnId, r: &Reply) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        match encode(r) {
            Ok(bytes) => c.out.extend_from_slice(&bytes),
            Err(_) => {
                // A status too large to encode cannot happen with the bounded state; drop the
                // connection rather than send half a frame.
                self.drop_conn(id);
                return;
            }
        }
        if c.out.len() > MAX_PENDING_OUT {
            self.drop_conn(id);
        }
    }

    fn flush(&mut self, id: ConnId) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        while !c.out.is_empty() {
            match c.stream.write(&c.out) {
                Ok(0) => break,
                Ok(n) => {
                    c.out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.drop_conn(id);
                    return;
                }
            }
        }
        if c.out.is_empty() && c.closing {
            self.drop_conn(id);
            return;
        }
        self.watch_output(id);
    }

    /// Registers for writability exactly while output is pending.
    fn watch_output(&mut self, id: ConnId) {
        let (Some(ep), Some(c)) = (self.epoll.as_ref(), self.conns.get_mut(&id)) else {
            return;
        };
        let want = !c.out.is_empty();
        if want != c.want_out {
            let mut ev = libc::EPOLLIN as u32;
            if want {
                ev |= libc::EPOLLOUT as u32;
            }
            if ep.modify(c.stream.as_raw_fd(), token(id), ev).is_ok() {
                c.want_out = want;
            }
        }
    }

    fn drop_conn(&mut self, id: ConnId) {
        if let (Some(ep), Some(c)) = (self.epoll.as_ref(), self.conns.get(&id)) {
            ep.delete(c.stream.as_raw_fd());
        }
        self.conns.remove(&id);
        self.service.disconnect(id);
    }
}
