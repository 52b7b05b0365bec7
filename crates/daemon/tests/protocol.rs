//! The daemon's server on a real socket, without privileges: malformed, oversized and
//! out-of-order messages get error replies and the daemon keeps serving everyone, and random
//! byte streams never stop it (property test).

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use pacer_daemon::protocol::{self, ErrorCode, Frame, FrameReader, Reply, Request, MAX_REPLY, VERSION};
use pacer_daemon::{Config, Listener, Server, Service};
use proptest::prelude::*;

struct Running {
    path: PathBuf,
    stop: UnixStream,
    thread: Option<std::thread::JoinHandle<u64>>,
    _dir: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.stop.write_all(b"x");
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn start() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pacer.sock");
    let listener = Listener::bind(&path, 0o600).unwrap();
    let (stop, stop_rx) = UnixStream::pair().unwrap();
    let thread = std::thread::spawn(move || {
        let mut server = Server::new(Service::new(Config::default(), None, None), Some(listener));
        server.run(Some(stop_rx.as_raw_fd()), |_| {}).unwrap();
        server.messages()
    });
    Running {
        path,
        stop,
        thread: Some(thread),
        _dir: dir,
    }
}

fn read_reply(s: &mut UnixStream) -> Reply {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut r = FrameReader::new(MAX_REPLY);
    let mut buf = [0u8; 4096];
    loop {
        if let Some(Frame::Payload(p)) = r.next_frame() {
            return protocol::decode(p).unwrap();
        }
        let n = s.read(&mut buf[..r.want().min(4096)]).expect("a reply in time");
        assert!(n > 0, "the daemon closed the connection");
        r.push(&buf[..n]);
    }
}

fn send(s: &mut UnixStream, req: &Request) {
    s.write_all(&protocol::encode(req).unwrap()).unwrap();
}

fn error_code(r: Reply) -> ErrorCode {
    match r {
        Reply::Error(e) => e.code,
        other => panic!("expected an error, got {other:?}"),
    }
}

fn hello(s: &mut UnixStream) {
    send(s, &Request::Hello { version: VERSION });
    assert!(matches!(read_reply(s), Reply::Welcome { .. }));
}

#[test]
fn bad_messages_get_error_replies_and_the_connection_goes_on() {
    let d = start();
    let mut s = UnixStream::connect(&d.path).unwrap();
    // Anything before hello is out of order.
    send(&mut s, &Request::Status);
    assert_eq!(error_code(read_reply(&mut s)), ErrorCode::OutOfOrder);
    hello(&mut s);
    send(&mut s, &Request::Hello { version: VERSION });
    assert_eq!(error_code(read_reply(&mut s)), ErrorCode::OutOfOrder);
    // A frame that does not decode.
    s.write_all(&[3, 0, 0, 0, 0xff, 0xff, 0xff]).unwrap();
    assert_eq!(error_code(read_reply(&mut s)), ErrorCode::Malformed);
    // An oversized frame, skipped as it arrives.
    let big = 100_000u32;
    s.write_all(&big.to_le_bytes()).unwrap();
    s.write_all(&vec![0u8; big as usize]).unwrap();
    assert_eq!(error_code(read_reply(&mut s)), ErrorCode::TooLarge);
    // A notification for a session that is not ours: no reply, reported by the next sync.
    send(
        &mut s,
        &Request::WorkUnits {
            session: 42,
            units: 3,
        },
    );
    send(&mut s, &Request::Sync { seq: 7 });
    match read_reply(&mut s) {
        Reply::Synced {
            seq,
            failed,
            last_error,
        } => {
            assert_eq!((seq, failed), (7, 1));
            assert_eq!(last_error.unwrap().code, ErrorCode::NoSuchSession);
        }
        other => panic!("{other:?}"),
    }
    // Still served.
    send(&mut s, &Request::Status);
    match read_reply(&mut s) {
        Reply::Status { json } => {
            let v: serde_json::Value = serde_json::from_str(&json).unwrap();
            assert_eq!(v["version"], VERSION);
            assert!(v["refusals"].as_array().unwrap().len() >= 4, "{json}");
        }
        other => panic!("{other:?}"),
    }
    // A session with a thread id that cannot exist is refused with the field named.
    send(
        &mut s,
        &Request::CreateSession(protocol::SessionSpec {
            tids: vec![],
            period_ns: 10_000_000,
            controller: protocol::ControllerKind::Proactive,
            max_bandwidth: None,
        }),
    );
    match read_reply(&mut s) {
        Reply::Error(e) => {
            assert_eq!(e.code, ErrorCode::Invalid);
            assert!(e.message.contains("1 to 64 threads"), "{}", e.message);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_client_of_another_version_is_told_and_disconnected_while_others_are_served() {
    let d = start();
    let mut old = UnixStream::connect(&d.path).unwrap();
    let mut good = UnixStream::connect(&d.path).unwrap();
    send(&mut old, &Request::Hello { version: VERSION + 1 });
    match read_reply(&mut old) {
        Reply::Error(e) => {
            assert_eq!(e.code, ErrorCode::Version);
            assert!(e.message.contains(&format!("version {VERSION}")), "{}", e.message);
        }
        other => panic!("{other:?}"),
    }
    let mut rest = Vec::new();
    old.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(old.read_to_end(&mut rest).unwrap(), 0, "closed after the error");
    hello(&mut good);
    send(&mut good, &Request::Status);
    assert!(matches!(read_reply(&mut good), Reply::Status { .. }));
}

#[test]
fn a_second_daemon_on_the_same_socket_is_refused_and_other_files_are_never_replaced() {
    let d = start();
    let e = Listener::bind(&d.path, 0o600).unwrap_err();
    assert!(e.to_string().contains("another daemon is listening"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("precious");
    std::fs::write(&file, "data").unwrap();
    let e = Listener::bind(&file, 0o600).unwrap_err();
    assert!(e.to_string().contains("not a socket"), "{e}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "data");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    /// Whatever bytes a client sends, the daemon neither stops nor stalls: a well-behaved client
    /// connecting afterwards is served.
    #[test]
    fn random_streams_never_stop_the_daemon(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..8)) {
        let d = start();
        {
            let mut s = UnixStream::connect(&d.path).unwrap();
            for c in &chunks {
                let _ = s.write_all(c);
            }
            // Also a valid hello followed by more noise.
            let _ = s.write_all(&protocol::encode(&Request::Hello { version: VERSION }).unwrap());
            for c in &chunks {
                let _ = s.write_all(c);
            }
        }
        let mut good = UnixStream::connect(&d.path).unwrap();
        hello(&mut good);
        send(&mut good, &Request::Status);
        let served = matches!(read_reply(&mut good), Reply::Status { .. });
        prop_assert!(served);
    }
}
