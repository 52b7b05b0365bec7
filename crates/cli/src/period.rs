//! `pacer period`: the LFS++ period analyser (lfspp-legacy-multimedia.txt §5.1–5.2) on recorded
//! wake-up traces — timestamp lists, `perf script` or `trace-cmd report` output — printing the
//! detected period, its confidence and the candidate peaks, per file and optionally per
//! observation window (the statistics of the paper's Fig. 8).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::ValueEnum;
use pacer_adapt::period::{self, Analysis, AnalysisOptions, PeriodConfig, PeriodConfigError, PeriodEstimate};
use pacer_adapt::traceio::{self, ThreadWakeups, TraceFilter, TraceFormat, WakeupEvent, WakeupTrace};
use pacer_model::Duration;
use serde::Serialize;

use crate::analyze::parse_duration;
use crate::output::{Outputs, Slot, Stdout};
use crate::table::Table;

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
perf record -e sched:sched_wakeup -a -- sleep 2; perf script > wake.txt\n  \
pacer period wake.txt --comm mplayer\n  \
trace-cmd record -e sched_wakeup sleep 2; trace-cmd report > wake.txt\n  \
pacer period wake.txt --tid 4242 --window 1s\n  \
pacer period times.txt --spectrum spectrum.csv     # one wake-up time (s) per line\n\n\
In perf and trace-cmd traces the selected thread is the woken one (the event's comm=/pid=\n\
payload), not the waker that opens the line. The analysis is the paper's heuristic (spectrum of\n\
the wake-up times, peaks above α·mean, harmonic sums over k_max multiples within ±ε), then an\n\
octave check, a refinement below the grid step and a significance test (--paper: heuristic only).")]
pub struct Args {
    /// Trace files; `-` reads standard input.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Trace format (auto: detected from the content).
    #[arg(long, value_enum, default_value_t = Format::Auto)]
    pub format: Format,
    /// Woken thread's name (perf and trace-cmd traces; names are cut to 15 bytes by the kernel,
    /// longer ones also match their truncation).
    #[arg(long)]
    pub comm: Option<String>,
    /// Woken thread's id (perf and trace-cmd traces).
    #[arg(long)]
    pub tid: Option<u32>,
    /// Wake-up event used: auto (sched_wakeup if the trace has it, else sched_waking), wakeup or
    /// waking.
    #[arg(long, value_enum, default_value_t = Event::Auto)]
    pub event: Event,
    /// Lowest frequency of the spectrum, Hz.
    #[arg(long, default_value_t = PeriodConfig::default().f_min_hz)]
    pub fmin: f64,
    /// Highest frequency of the spectrum, Hz.
    #[arg(long, default_value_t = PeriodConfig::default().f_max_hz)]
    pub fmax: f64,
    /// Frequency step δf of the spectrum, Hz.
    #[arg(long, default_value_t = PeriodConfig::default().df_hz)]
    pub df: f64,
    /// Peaks below α times the mean amplitude are discarded.
    #[arg(long, default_value_t = PeriodConfig::default().alpha)]
    pub alpha: f64,
    /// Multiples summed per candidate (the paper: 10).
    #[arg(long, default_value_t = PeriodConfig::default().k_max)]
    pub kmax: usize,
    /// Tolerance ε of the harmonic sum, Hz.
    #[arg(long, default_value_t = PeriodConfig::default().eps_hz)]
    pub eps: f64,
    /// Also analyse consecutive windows of this length (e.g. 1s) and report their statistics.
    #[arg(long, value_parser = parse_duration)]
    pub window: Option<Duration>,
    /// Write the spectrum |S(f)| of each file's selected wake-ups as CSV `freq_hz,amplitude`
    /// (with several files, `NAME-1.csv`, `NAME-2.csv`, … in file order). Written only if every
    /// file is analysed, all together; an input or a device is refused (docs/output-files.md).
    #[arg(long)]
    pub spectrum: Option<PathBuf>,
    /// The paper's heuristic alone: no octave check, refinement or significance test.
    #[arg(long)]
    pub paper: bool,
    /// Machine-readable JSON on standard output instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Auto,
    Timestamps,
    Perf,
    TraceCmd,
}

impl From<Format> for TraceFormat {
    fn from(f: Format) -> Self {
        match f {
            Format::Auto => TraceFormat::Auto,
            Format::Timestamps => TraceFormat::Timestamps,
            Format::Perf => TraceFormat::Perf,
            Format::TraceCmd => TraceFormat::TraceCmd,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Event {
    Auto,
    Wakeup,
    Waking,
}

impl From<Event> for WakeupEvent {
    fn from(e: Event) -> Self {
        match e {
            Event::Auto => WakeupEvent::Auto,
            Event::Wakeup => WakeupEvent::Wakeup,
            Event::Waking => WakeupEvent::Waking,
        }
    }
}

/// One observation window of `--window`.
#[derive(Serialize)]
struct WindowRow {
    start_s: f64,
    events: usize,
    estimate: PeriodEstimate,
}

/// Statistics of the detected frequency over the periodic windows.
#[derive(Serialize)]
struct WindowStats {
    window_ns: u64,
    windows: usize,
    periodic: usize,
    mean_freq_hz: Option<f64>,
    std_freq_hz: Option<f64>,
}

#[derive(Serialize)]
struct FileReport {
    file: String,
    format: TraceFormat,
    event: Option<&'static str>,
    events_read: usize,
    events_used: usize,
    /// Woken threads of the trace, most wake-ups first (at most 10).
    threads: Vec<ThreadWakeups>,
    analysis: Analysis,
    #[serde(skip_serializing_if = "Option::is_none")]
    window_stats: Option<WindowStats>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    windows: Vec<WindowRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spectrum_csv: Option<String>,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    config: &'a PeriodConfig,
    options: &'a AnalysisOptions,
    filter: &'a TraceFilter,
    files: &'a [FileReport],
}

pub fn run(args: Args) -> Result<()> {
    let cfg = PeriodConfig {
        f_min_hz: args.fmin,
        f_max_hz: args.fmax,
        df_hz: args.df,
        alpha: args.alpha,
        k_max: args.kmax,
        eps_hz: args.eps,
    };
    cfg.validate().map_err(|e| {
        let flag = match e {
            PeriodConfigError::FMin(_) => "--fmin",
            PeriodConfigError::Band { .. } => "--fmax",
            PeriodConfigError::Step(_) | PeriodConfigError::TooManySamples { .. } => "--df",
            PeriodConfigError::Alpha(_) => "--alpha",
            PeriodConfigError::KMax => "--kmax",
            PeriodConfigError::Eps(_) => "--eps",
            _ => "analyser options",
        };
        anyhow!("{flag}: {e}")
    })?;
    let opts = if args.paper {
        AnalysisOptions::paper()
    } else {
        AnalysisOptions::default()
    };
    if args.window.is_some_and(|w| w.is_zero()) {
        bail!("--window 0: expected a positive duration (e.g. 1s)");
    }
    if args.files.iter().filter(|f| f.as_os_str() == "-").count() > 1 {
        bail!("standard input (`-`) can be given only once");
    }
    let filter = TraceFilter {
        comm: args.comm.clone(),
        tid: args.tid,
        event: args.event.into(),
    };

    let mut out = Outputs::new(Stdout::Busy);
    for f in &args.files {
        out.input(f);
    }
    let spectra = match &args.spectrum {
        Some(sp) => (0..args.files.len())
            .map(|i| {
                let p = spectrum_path(sp, i, args.files.len());
                Ok((out.file("--spectrum", &p)?, p))
            })
            .collect::<Result<Vec<_>>>()?,
        None => Vec::new(),
    };

    // Everything is read and analysed before anything is printed, so that an error in the last
    // file does not leave a partial report behind (nor, through `out`, any spectrum file).
    let mut reports = Vec::with_capacity(args.files.len());
    for (i, path) in args.files.iter().enumerate() {
        let trace = read_trace(path, args.format.into(), &filter)?;
        let label = label(path);
        if trace.timestamps_ns.is_empty() {
            bail!("{label}: {}", no_wakeups(&trace, &filter));
        }
        let analysis = period::analyse_detailed(&trace.timestamps_ns, &cfg, &opts)?;
        let (window_stats, windows) = match args.window {
            Some(w) => {
                let (stats, rows) = per_window(&label, &trace.timestamps_ns, w, &cfg, &opts)?;
                (Some(stats), rows)
            }
            None => (None, Vec::new()),
        };
        let spectrum_csv = match spectra.get(i) {
            Some((slot, p)) => {
                write_spectrum(&mut out, *slot, p, &trace.timestamps_ns, &cfg)?;
                Some(p.display().to_string())
            }
            None => None,
        };
        reports.push(FileReport {
            file: label,
            format: trace.format,
            event: trace.event,
            events_read: trace.events_read,
            events_used: trace.timestamps_ns.len(),
            threads: trace.threads.iter().take(10).cloned().collect(),
            analysis,
            window_stats,
            windows,
            spectrum_csv,
        });
    }

    out.commit()?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.json {
        let doc = JsonReport {
            config: &cfg,
            options: &opts,
            filter: &filter,
            files: &reports,
        };
        writeln!(out, "{}", crate::output::json_text("pacer.period/1", &doc)?)?;
    } else {
        for (i, r) in reports.iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            write!(out, "{}", render(r, &filter))?;
        }
    }
    Ok(())
}

fn label(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "<stdin>".into()
    } else {
        path.display().to_string()
    }
}

fn read_trace(path: &Path, format: TraceFormat, filter: &TraceFilter) -> Result<WakeupTrace> {
    if path.as_os_str() == "-" {
        Ok(traceio::parse_str(
            &crate::read_stdin()?,
            "<stdin>",
            format,
            filter,
        )?)
    } else {
        Ok(traceio::read_file(path, format, filter)?)
    }
}

/// Why a trace gave no wake-ups, and what the user can do about it.
fn no_wakeups(trace: &WakeupTrace, filter: &TraceFilter) -> String {
    if trace.format == TraceFormat::Timestamps {
        return "no timestamps in the file".into();
    }
    let event = trace.event.unwrap_or("sched_wakeup");
    if trace.threads.is_empty() {
        return format!(
            "no {event} events in this {} trace (record them with `perf record -e sched:sched_wakeup` \
             or `trace-cmd record -e sched_wakeup`)",
            trace.format
        );
    }
    format!(
        "no {event} events of {} (woken threads in the trace: {})",
        describe(filter),
        thread_list(&trace.threads, 8)
    )
}

fn describe(filter: &TraceFilter) -> String {
    match (&filter.comm, filter.tid) {
        (Some(c), Some(t)) => format!("{c} (tid {t})"),
        (Some(c), None) => c.clone(),
        (None, Some(t)) => format!("tid {t}"),
        (None, None) => "any thread".into(),
    }
}

fn thread_list(threads: &[ThreadWakeups], n: usize) -> String {
    let mut s: Vec<String> = threads
        .iter()
        .take(n)
        .map(|t| format!("{}/{} ×{}", t.comm, t.tid, t.wakeups))
        .collect();
    if threads.len() > n {
        s.push(format!("… {} more", threads.len() - n));
    }
    s.join(", ")
}

/// Consecutive windows `[t0 + i·W, t0 + (i+1)·W)` that fit in the trace.
fn per_window(
    label: &str,
    ts: &[u64],
    w: Duration,
    cfg: &PeriodConfig,
    opts: &AnalysisOptions,
) -> Result<(WindowStats, Vec<WindowRow>)> {
    let w = w.0;
    let (t0, t1) = (ts[0], ts[ts.len() - 1]);
    let n = (t1 - t0) / w;
    // Memory and time follow the number of windows: more windows than wake-ups means most are
    // empty (--window 1ns asked for 191 GB).
    if n > ts.len() as u64 {
        bail!(
            "{label}: --window {} cuts the {:.3} s of wake-ups into {n} windows, more than its {} \
             wake-ups: expected a window of at least {}",
            Duration(w),
            (t1 - t0) as f64 * 1e-9,
            ts.len(),
            Duration((t1 - t0).div_ceil(ts.len() as u64)).approx()
        );
    }
    let n = n as usize;
    if n == 0 {
        bail!(
            "{label}: the wake-ups span {:.3} s, less than one --window of {:.3} s",
            (t1 - t0) as f64 * 1e-9,
            w as f64 * 1e-9
        );
    }
    let mut rows = Vec::with_capacity(n);
    let mut lo = 0;
    for i in 0..n as u64 {
        let (start, end) = (t0 + i * w, t0 + (i + 1) * w);
        let hi = lo + ts[lo..].partition_point(|&t| t < end);
        let slice = &ts[lo..hi];
        rows.push(WindowRow {
            start_s: (start - t0) as f64 * 1e-9,
            events: slice.len(),
            estimate: period::analyse_detailed(slice, cfg, opts)?.estimate,
        });
        lo = hi;
    }
    let freqs: Vec<f64> = rows.iter().filter_map(|r| r.estimate.freq_hz()).collect();
    let mean = (!freqs.is_empty()).then(|| freqs.iter().sum::<f64>() / freqs.len() as f64);
    let std = mean.map(|m| (freqs.iter().map(|f| (f - m).powi(2)).sum::<f64>() / freqs.len() as f64).sqrt());
    let stats = WindowStats {
        window_ns: w,
        windows: n,
        periodic: freqs.len(),
        mean_freq_hz: mean,
        std_freq_hz: std,
    };
    Ok((stats, rows))
}

fn spectrum_path(out: &Path, index: usize, files: usize) -> PathBuf {
    if files <= 1 {
        return out.to_path_buf();
    }
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match out.extension() {
        Some(ext) => format!("{stem}-{}.{}", index + 1, ext.to_string_lossy()),
        None => format!("{stem}-{}", index + 1),
    };
    out.with_file_name(name)
}

fn write_spectrum(out: &mut Outputs, slot: Slot, path: &Path, ts: &[u64], cfg: &PeriodConfig) -> Result<()> {
    let spectrum = period::spectrum(ts, cfg)?;
    let mut w = BufWriter::new(out.open(slot)?);
    let write = |w: &mut BufWriter<File>| -> std::io::Result<()> {
        writeln!(w, "freq_hz,amplitude")?;
        for (f, a) in spectrum.iter() {
            writeln!(w, "{f:.6},{a:.6}")?;
        }
        w.flush()
    };
    write(&mut w).with_context(|| format!("writing {}", path.display()))
}

fn ms(ns: u64) -> String {
    format!("{:.4}", ns as f64 * 1e-6)
}

fn render(r: &FileReport, filter: &TraceFilter) -> String {
    let mut s = String::new();
    let selected = match (r.format, filter.is_empty()) {
        (TraceFormat::Timestamps, _) => String::new(),
        (_, true) => " of all threads".into(),
        (_, false) => format!(" of {}", describe(filter)),
    };
    let event = r.event.map(|e| format!(" {e}")).unwrap_or_default();
    s.push_str(&format!(
        "{}: {} trace, {} wake-up events read, {}{event}{selected} used over {:.3} s\n",
        r.file,
        r.format,
        r.events_read,
        r.events_used,
        r.analysis.window_ns as f64 * 1e-9,
    ));
    if r.format != TraceFormat::Timestamps && filter.is_empty() && r.threads.len() > 1 {
        s.push_str(&format!(
            "  note: several threads are woken in this trace ({}); select one with --comm or --tid\n",
            thread_list(&r.threads, 5)
        ));
    }
    match &r.analysis.estimate {
        PeriodEstimate::Periodic {
            period_ns,
            freq_hz,
            confidence,
            candidates,
        } => {
            // The chance that aperiodic wake-ups show such a harmonic series (f64 underflows
            // for the clear-cut traces).
            let p = match r.analysis.p_value {
                Some(p) if p < 1e-99 => ", p < 1e-99".to_string(),
                Some(p) => format!(", p = {p:.1e}"),
                None => String::new(),
            };
            s.push_str(&format!(
                "  period {} ms ({freq_hz:.4} Hz), confidence {confidence:.2}{p}\n\n",
                ms(*period_ns)
            ));
            let mut t = Table::new(&["", "freq (Hz)", "period (ms)", "|S|", "harmonic sum"]);
            for (i, c) in candidates.iter().enumerate() {
                t.push(vec![
                    if i == 0 {
                        "chosen".into()
                    } else {
                        format!("{}", i + 1)
                    },
                    format!("{:.2}", c.freq_hz),
                    ms(c.period_ns),
                    format!("{:.1}", c.amplitude),
                    format!("{:.1}", c.harmonic_sum),
                ]);
            }
            s.push_str(&t.render());
            s.push_str(&format!(
                "  ({} spectral peaks, {} above α·mean; candidates at grid frequencies)\n",
                r.analysis.peaks, r.analysis.candidates
            ));
        }
        PeriodEstimate::NotPeriodic { reason } => {
            s.push_str(&format!("  not periodic: {reason}\n"));
        }
    }
    if let Some(stats) = &r.window_stats {
        s.push_str(&format!(
            "\nper {:.3} s window: periodic in {}/{}",
            stats.window_ns as f64 * 1e-9,
            stats.periodic,
            stats.windows
        ));
        if let (Some(m), Some(sd)) = (stats.mean_freq_hz, stats.std_freq_hz) {
            s.push_str(&format!(
                ", frequency mean {m:.4} Hz, std {sd:.4} Hz (period {} ms)",
                ms((1e9 / m).round() as u64)
            ));
        }
        s.push('\n');
        let mut t = Table::new(&[
            "start (s)",
            "events",
            "period (ms)",
            "freq (Hz)",
            "confidence",
            "result",
        ]);
        for row in &r.windows {
            match &row.estimate {
                PeriodEstimate::Periodic {
                    period_ns,
                    freq_hz,
                    confidence,
                    ..
                } => t.push(vec![
                    format!("{:.3}", row.start_s),
                    row.events.to_string(),
                    ms(*period_ns),
                    format!("{freq_hz:.4}"),
                    format!("{confidence:.2}"),
                    "periodic".into(),
                ]),
                PeriodEstimate::NotPeriodic { reason } => t.push(vec![
                    format!("{:.3}", row.start_s),
                    row.events.to_string(),
                    String::new(),
                    String::new(),
                    String::new(),
                    format!("not periodic: {reason}"),
                ]),
            }
        }
        s.push_str(&t.render());
    }
    if let Some(path) = &r.spectrum_csv {
        s.push_str(&format!("spectrum written to {path}\n"));
    }
    s
}
