//! `pacer bench daemon`: what talking to `pacer daemon` costs, measured against a real daemon
//! started for the run on a private socket:
//! - the time a notification call takes in the calling thread (what a real-time loop pays);
//! - the round trip of a workUnits hint until the daemon has applied it (hint + sync), of a
//!   job begin/end pair (begin + end + sync), and of an empty sync, median and p99;
//! - the daemon's own CPU use while 1, 10, 100 … sessions each run a periodic job with
//!   begin/end marks and a hint every 30 jobs.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration as StdDuration, Instant};

use anyhow::{bail, Context, Result};
use pacer::{Client, SessionOptions};
use pacer_daemon::protocol::{Reply, Request};
use pacer_model::Duration;
use pacer_workload::jobs::compare::quantile;
use serde::Serialize;

use crate::analyze::parse_duration;
use crate::table::Table;

#[derive(clap::Args)]
#[command(
    after_help = "Needs root (it starts a daemon). Example: sudo pacer bench daemon --sessions 1,10,100"
)]
pub struct DaemonBenchArgs {
    /// Round trips measured per kind.
    #[arg(long, default_value_t = 2000, value_parser = crate::count_in::<10, 1_000_000>)]
    pub samples: usize,
    /// Session counts for the daemon CPU measurement.
    #[arg(long, default_value = "1,10,100", value_delimiter = ',')]
    pub sessions: Vec<usize>,
    /// Period of every session's job.
    #[arg(long, default_value = "20ms", value_parser = parse_duration)]
    pub period: Duration,
    /// CPU work of every job.
    #[arg(long, default_value = "50us", value_parser = parse_duration)]
    pub work: Duration,
    /// How long the daemon's CPU use is measured for each session count.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub measure: Duration,
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Latency {
    what: &'static str,
    samples: usize,
    median_ns: u64,
    p99_ns: u64,
    max_ns: u64,
}

#[derive(Serialize)]
struct CpuRow {
    sessions: usize,
    measured_ns: u64,
    daemon_cpu_ns: u64,
    cpu_fraction: f64,
    jobs_per_s: f64,
    messages_per_s: f64,
    refused: u64,
}

#[derive(Serialize)]
struct Report {
    daemon_priority: &'static str,
    latency: Vec<Latency>,
    daemon_cpu: Vec<CpuRow>,
}

struct DaemonChild {
    child: Child,
}

impl Drop for DaemonChild {
    fn drop(&mut self) {
        if let Ok(p) = pacer_linux::procfs::Pidfd::open(self.child.id()) {
            let _ = p.send_signal(pacer_linux::signals::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

fn start_daemon(socket: &Path) -> Result<DaemonChild> {
    let exe = std::env::current_exe().context("locating pacer's own binary")?;
    let child = Command::new(exe)
        .arg("daemon")
        .arg("--socket")
        .arg(socket)
        .stderr(Stdio::null())
        .spawn()
        .context("starting pacer daemon")?;
    let d = DaemonChild { child };
    let start = Instant::now();
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        if start.elapsed() > StdDuration::from_secs(10) {
            bail!("the daemon did not start listening within 10 s");
        }
        std::thread::sleep(StdDuration::from_millis(20));
    }
    Ok(d)
}

fn now() -> Instant {
    Instant::now()
}

fn summary(what: &'static str, mut v: Vec<u64>) -> Latency {
    v.sort_unstable();
    Latency {
        what,
        samples: v.len(),
        median_ns: quantile(&v, 0.5),
        p99_ns: quantile(&v, 0.99),
        max_ns: v.last().copied().unwrap_or(0),
    }
}

/// A thread that only sleeps: the sessions of the latency measurement name it, so the
/// measuring thread itself stays SCHED_OTHER and is never throttled by a reservation.
fn sleeper() -> (u32, std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        let _ = tid_tx.send(pacer::gettid());
        let _ = stop_rx.recv();
    });
    (tid_rx.recv().unwrap_or(0), stop_tx, h)
}

/// A raw protocol connection: job marks for a thread other than the caller, which the library
/// API does not allow (marks come from the job's own thread there).
struct Raw {
    s: std::os::unix::net::UnixStream,
    reader: pacer_daemon::protocol::FrameReader,
}

impl Raw {
    fn connect(socket: &Path) -> Result<Raw> {
        let mut r = Raw {
            s: std::os::unix::net::UnixStream::connect(socket)?,
            reader: pacer_daemon::protocol::FrameReader::new(pacer_daemon::protocol::MAX_REPLY),
        };
        r.call(&Request::Hello {
            version: pacer_daemon::protocol::VERSION,
        })?;
        Ok(r)
    }
    fn send(&mut self, req: &Request) -> Result<()> {
        use std::io::Write;
        let mut buf = [0u8; 128];
        let n = pacer_daemon::protocol::encode_into(req, &mut buf)?;
        self.s.write_all(&buf[..n])?;
        Ok(())
    }
    fn call(&mut self, req: &Request) -> Result<Reply> {
        use std::io::Read;
        let frame = pacer_daemon::protocol::encode(req)?;
        std::io::Write::write_all(&mut self.s, &frame)?;
        let mut buf = [0u8; 4096];
        loop {
            if let Some(pacer_daemon::protocol::Frame::Payload(p)) = self.reader.next_frame() {
                let r: Reply = pacer_daemon::protocol::decode(p)?;
                if let Reply::Error(e) = r {
                    bail!("the daemon refused: {e}");
                }
                return Ok(r);
            }
            let want = self.reader.want().min(buf.len());
            let n = self.s.read(&mut buf[..want])?;
            if n == 0 {
                bail!("the daemon closed the connection");
            }
            self.reader.push(&buf[..n]);
        }
    }
}

fn latency(client: &Client, socket: &Path, samples: usize) -> Result<Vec<Latency>> {
    let (tid_a, stop_a, h_a) = sleeper();
    let (tid_b, stop_b, h_b) = sleeper();
    let s = client
        .session_with(&SessionOptions::new(&[tid_a], 10_000_000).max_bandwidth(0.05))
        .context("creating the measuring session")?;
    let mut raw = Raw::connect(socket)?;
    let session = match raw.call(&Request::CreateSession(pacer_daemon::protocol::SessionSpec {
        tids: vec![tid_b],
        period_ns: 10_000_000,
        controller: pacer_daemon::protocol::ControllerKind::Proactive,
        max_bandwidth: Some(0.05),
    }))? {
        Reply::Created { session, .. } => session,
        other => bail!("unexpected reply {other:?}"),
    };
    let mut call = Vec::with_capacity(samples);
    let mut hint = Vec::with_capacity(samples);
    let mut job = Vec::with_capacity(samples);
    let mut sync = Vec::with_capacity(samples);
    let mark = |i: u64| pacer_daemon::protocol::JobMark {
        session,
        tid: tid_b,
        t_ns: i * 1000,
        cpu_ns: i * 1000,
        dl: None,
    };
    for i in 0..samples {
        let t0 = now();
        s.hint_work_units(1 + (i % 4) as u32)?;
        let t1 = now();
        s.sync()?;
        let t2 = now();
        raw.send(&Request::JobBegin(mark(2 * i as u64)))?;
        raw.send(&Request::JobEnd(mark(2 * i as u64 + 1)))?;
        raw.call(&Request::Sync { seq: i as u32 })?;
        let t3 = now();
        s.sync()?;
        let t4 = now();
        call.push((t1 - t0).as_nanos() as u64);
        hint.push((t2 - t0).as_nanos() as u64);
        job.push((t3 - t2).as_nanos() as u64);
        sync.push((t4 - t3).as_nanos() as u64);
    }
    s.close()?;
    raw.call(&Request::CloseSession { session })?;
    for (stop, h) in [(stop_a, h_a), (stop_b, h_b)] {
        let _ = stop.send(());
        let _ = h.join();
    }
    Ok(vec![
        summary("notification call (hint_work_units, caller side)", call),
        summary("hint applied (hint + sync round trip)", hint),
        summary("job_begin + job_end applied (+ sync)", job),
        summary("empty round trip (sync)", sync),
    ])
}

fn busy(ns: u64) {
    let start = cpu_now();
    while cpu_now() - start < ns {}
}

fn cpu_now() -> u64 {
    pacer_linux::sys::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The daemon's CPU time (all its threads, ns precision from schedstat), ns.
fn process_cpu(pid: u32) -> Result<u64> {
    let mut total = 0;
    for t in pacer_linux::procfs::threads_of(pid).context("listing the daemon's threads")? {
        total += pacer_linux::procfs::cpu_time(pid, t).unwrap_or(0);
    }
    Ok(total)
}

fn daemon_cpu(socket: &Path, pid: u32, n: usize, a: &DaemonBenchArgs) -> Result<CpuRow> {
    let period = a.period.0;
    let work = a.work.0;
    // Each session's ceiling leaves room for all of them in the admission limit.
    let ceiling = (1.0 / n as f64)
        .clamp(0.002, 0.25)
        .max(2.0 * work as f64 / period as f64);
    let run_start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(Barrier::new(n + 1));
    let mut handles = Vec::new();
    for _ in 0..n {
        // One connection per session, as separate applications would have.
        let client = Client::connect_to(socket)?;
        let stop = stop.clone();
        let ready = ready.clone();
        handles.push(std::thread::spawn(move || -> Result<(u64, u64)> {
            let s =
                client.session_with(&SessionOptions::new(&[pacer::gettid()], period).max_bandwidth(ceiling));
            ready.wait();
            let s = s?;
            let mut jobs = 0u64;
            let mut refused = 0u64;
            let mut next = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                if jobs.is_multiple_of(30) && s.hint_work_units(1 + (jobs / 30 % 3) as u32).is_err() {
                    refused += 1;
                }
                refused += u64::from(s.job_begin().is_err());
                busy(work);
                refused += u64::from(s.job_end().is_err());
                jobs += 1;
                next += StdDuration::from_nanos(period);
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                }
            }
            s.close()?;
            Ok((jobs, refused))
        }));
    }
    ready.wait();
    // Warm-up: the tables fill and the budgets settle.
    std::thread::sleep(StdDuration::from_millis(500));
    let c0 = process_cpu(pid)?;
    let t0 = Instant::now();
    std::thread::sleep(StdDuration::from_nanos(a.measure.0));
    let c1 = process_cpu(pid)?;
    let elapsed = t0.elapsed().as_nanos() as u64;
    stop.store(true, Ordering::Relaxed);
    let mut jobs = 0;
    let mut refused = 0;
    for h in handles {
        let (j, r) = h
            .join()
            .map_err(|_| anyhow::anyhow!("a session thread panicked"))??;
        jobs += j;
        refused += r;
    }
    let run_ns = run_start.elapsed().as_nanos() as u64;
    Ok(CpuRow {
        sessions: n,
        measured_ns: elapsed,
        daemon_cpu_ns: c1.saturating_sub(c0),
        cpu_fraction: c1.saturating_sub(c0) as f64 / elapsed.max(1) as f64,
        jobs_per_s: jobs as f64 * 1e9 / run_ns.max(1) as f64,
        // Two marks per job and a hint every 30 jobs.
        messages_per_s: jobs as f64 * (2.0 + 1.0 / 30.0) * 1e9 / run_ns.max(1) as f64,
        refused,
    })
}

pub fn run(a: DaemonBenchArgs) -> Result<()> {
    crate::require_root(
        "pacer bench daemon",
        "it starts a daemon that sets SCHED_DEADLINE",
    )?;
    if a.sessions.iter().any(|&n| n == 0 || n > 1000) {
        bail!("--sessions: expected counts between 1 and 1000");
    }
    if a.period.0 < 1_000_000 || a.work.0 == 0 || a.work.0 * 2 > a.period.0 {
        bail!("--period must be ≥ 1ms and --work between 1ns and half the period");
    }
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("pacer.sock");
    let d = start_daemon(&socket)?;
    let client = Client::connect_to(&socket)?;
    eprintln!("pacer bench daemon: {} round trips of each kind…", a.samples);
    let lat = latency(&client, &socket, a.samples)?;
    let mut cpu = Vec::new();
    for &n in &a.sessions {
        eprintln!("pacer bench daemon: {n} session(s) for {}…", a.measure);
        cpu.push(daemon_cpu(&socket, d.child.id(), n, &a)?);
    }
    let report = Report {
        daemon_priority: "SCHED_FIFO 50 (the default rt_priority)",
        latency: lat,
        daemon_cpu: cpu,
    };
    if a.json {
        println!("{}", crate::output::json_text("pacer.bench.daemon/1", &report)?);
        return Ok(());
    }
    let us = |ns: u64| format!("{:.1} µs", ns as f64 / 1e3);
    let mut t = Table::new(&["what", "samples", "median", "p99", "max"]);
    for l in &report.latency {
        t.push(vec![
            l.what.into(),
            l.samples.to_string(),
            us(l.median_ns),
            us(l.p99_ns),
            us(l.max_ns),
        ]);
    }
    println!(
        "Client calls against pacer daemon ({}):\n{}",
        report.daemon_priority,
        t.render()
    );
    let mut t = Table::new(&["sessions", "jobs/s", "messages/s", "daemon CPU", "refused"]);
    for r in &report.daemon_cpu {
        t.push(vec![
            r.sessions.to_string(),
            format!("{:.0}", r.jobs_per_s),
            format!("{:.0}", r.messages_per_s),
            format!("{:.2} %", 100.0 * r.cpu_fraction),
            r.refused.to_string(),
        ]);
    }
    println!(
        "\nThe daemon's CPU use while every session runs a {} job every {} with begin/end marks and a hint every 30 jobs:\n{}",
        a.work,
        a.period,
        t.render()
    );
    Ok(())
}
