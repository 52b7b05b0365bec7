//! `pacer sim --report FILE.html`: the run as a self-contained HTML page (crates/report): its
//! settings, the summary table the text output prints, per-task response-time CDFs, the
//! normalised-laxity distribution, deadline misses, migrations and context switches per task, and
//! a CPU timeline of the start of the run. Every figure is drawn from what [`Collector`] saw of
//! this run; what cannot be drawn is said in a note.

use pacer_model::Duration;
use pacer_report::{cdf, histogram, Bars, Plot, Report, Series, Span, Timeline};
use pacer_sim::output::summary::{SummaryReport, TaskSummary};
use pacer_sim::record::{JobRecord, Observer, ThreadId, TraceEvent};
use pacer_workload::jobs::summary::{set_rows, task_rows, TASK_COLUMNS};

use crate::sim::RunInfo;

/// The timeline shows at most this much of the start of the run (and at most 20 periods of the
/// shortest task): beyond it slices are thinner than a pixel and the figure says nothing.
pub const TIMELINE_CAP_NS: u64 = 100_000_000;
const TIMELINE_PERIODS: u64 = 20;
/// CDFs with more series than this are unreadable: the tasks with the largest p99 are drawn.
const MAX_CDF_SERIES: usize = 8;

/// One execution slice: `thread` ran on `cpu` over `[start, end)`, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slice {
    cpu: u32,
    thread: ThreadId,
    start: u64,
    end: u64,
}

/// An [`Observer`] keeping what the report draws: every finished job's response time and
/// normalised laxity, and the execution slices of the first [`TIMELINE_CAP_NS`] of the run
/// (from the engine's switch events, which it asks for only until then, so a long run pays for
/// tracing only at its start).
#[derive(Debug, Default)]
pub(crate) struct Collector {
    /// Per thread: response times, ns.
    responses: Vec<Vec<u64>>,
    /// Per job with a deadline, all threads: normalised laxity.
    laxities: Vec<f64>,
    /// Smallest period of a finished job, ns, and its thread.
    shortest_period: Option<(u64, ThreadId)>,
    running: Vec<Option<(ThreadId, u64)>>,
    slices: Vec<Slice>,
    /// Whether a switch past the cap was seen: no more events are needed.
    past_cap: bool,
}

impl Collector {
    pub(crate) fn new() -> Collector {
        Collector::default()
    }

    /// Closes the slices still running at `horizon` (the end of the run).
    fn close(&mut self, horizon: u64) {
        let end = horizon.min(TIMELINE_CAP_NS);
        for (cpu, r) in self.running.iter_mut().enumerate() {
            if let Some((thread, start)) = r.take() {
                if start < end {
                    self.slices.push(Slice {
                        cpu: cpu as u32,
                        thread,
                        start,
                        end,
                    });
                }
            }
        }
    }
}

impl Observer for Collector {
    fn job(&mut self, r: &JobRecord) {
        let t = r.thread as usize;
        if self.responses.len() <= t {
            self.responses.resize_with(t + 1, Vec::new);
        }
        self.responses[t].push(r.response_time());
        if r.has_deadline() && r.period > 0 {
            self.laxities.push(r.normalised_laxity());
        }
        if r.period > 0 && self.shortest_period.is_none_or(|(p, _)| r.period < p) {
            self.shortest_period = Some((r.period, r.thread));
        }
    }

    fn event(&mut self, e: &TraceEvent) {
        let &TraceEvent::Switch { t, cpu, next, .. } = e else {
            return;
        };
        let c = cpu as usize;
        if self.running.len() <= c {
            self.running.resize(c + 1, None);
        }
        if let Some((thread, start)) = self.running[c] {
            let end = t.min(TIMELINE_CAP_NS);
            if start < end {
                self.slices.push(Slice {
                    cpu,
                    thread,
                    start,
                    end,
                });
            }
        }
        self.running[c] = next.map(|n| (n, t));
        if t > TIMELINE_CAP_NS {
            self.past_cap = true;
        }
    }

    fn wants_events(&self) -> bool {
        !self.past_cap
    }
}

/// ns as ms for the axes.
fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The report of one run. `command` is the command line, `names` the threads' names.
pub(crate) fn build(
    mut c: Collector,
    summary: &SummaryReport,
    info: &RunInfo,
    names: &[String],
    command: &str,
) -> anyhow::Result<String> {
    c.close(info.simulated_ns);
    let name = |t: usize| pacer_workload::jobs::thread_name(names, t as u32).into_owned();
    let mut r = Report::new(&format!("pacer sim: {}", info.file));
    r.subtitle("A simulated run: every figure below is drawn from this run's own jobs and schedule.");
    let o = &info.overheads;
    r.meta("command", command)
        .meta("file", &info.file)
        .meta("seed", &info.seed.to_string())
        .meta(
            "policy",
            info.policy.as_deref().unwrap_or("as the rt-app file declares"),
        )
        .meta("CPUs", &info.cpus.to_string())
        .meta("simulated time", &Duration(info.simulated_ns).to_string())
        .meta(
            "overheads",
            &format!(
                "context switch {}, migration {}, wake-up latency {}, idle exit {}, work ×{}",
                Duration(o.context_switch_cost_ns),
                Duration(o.migration_cost_ns),
                Duration(o.wakeup_latency_ns),
                Duration(o.idle_exit_latency_ns),
                o.work_scale
            ),
        )
        .meta(
            "kernel",
            &format!(
                "fair class {}, tick {}, RT throttling {}, fair server {}",
                info.kernel.fair,
                Duration(info.kernel.tick_ns),
                if info.kernel.rt_throttling { "on" } else { "off" },
                if info.kernel.fair_server { "on" } else { "off" }
            ),
        )
        .meta(
            "cache model",
            &info
                .cache
                .as_ref()
                .map_or("off".to_string(), |c| c.profile.display().to_string()),
        )
        .meta(
            "jobs, events",
            &format!(
                "{} jobs, {} events in {:.3} s wall",
                info.jobs, info.events, info.wall_seconds
            ),
        );

    r.section("Summary").paragraph(
        "The table `pacer sim` prints: response times in µs (finish − release), normalised laxity \
         ((relative deadline − response) / period), measured utilisation, largest tardiness, \
         migrations, context switches and involuntary switches per task.",
    );
    r.table(&TASK_COLUMNS, &task_rows(summary));
    let set: Vec<Vec<String>> = set_rows(summary, "simulated time (s)")
        .into_iter()
        .map(|[k, v]| vec![k, v])
        .collect();
    r.table(&["set", "value"], &set);

    r.section("Response times");
    response_cdfs(&mut r, &c, summary, &name)?;

    r.section("Normalised laxity");
    if c.laxities.is_empty() {
        r.paragraph("No finished job has a deadline: there is no laxity to show.");
    } else {
        r.paragraph(&format!(
            "(relative deadline − response time) / period of each of the {} finished jobs with a \
             deadline, all tasks; below 0 is a missed deadline.",
            c.laxities.len()
        ));
        r.plot(
            &Plot::new("Normalised laxity, all jobs")
                .x_axis("normalised laxity", "")
                .y_axis("jobs", "")
                .series(Series::step("jobs", histogram(&c.laxities, 40))),
        )?;
    }

    r.section("Deadline misses");
    bars(&mut r, summary, "Deadline misses per task", "missed jobs", |t| {
        t.misses
    })?;

    r.section("Migrations and context switches");
    let secs = info.simulated_ns as f64 / 1e9;
    let rows: Vec<Vec<String>> = summary
        .per_task
        .iter()
        .map(|t| {
            vec![
                pacer_model::text::escape_control(&t.name),
                t.migrations.to_string(),
                format!("{:.1}", t.migrations as f64 / secs),
                t.switches.to_string(),
                format!("{:.1}", t.switches as f64 / secs),
                t.involuntary_switches.to_string(),
            ]
        })
        .collect();
    r.table(
        &[
            "task",
            "migrations",
            "migrations/s",
            "context switches",
            "switches/s",
            "involuntary",
        ],
        &rows,
    );
    bars(&mut r, summary, "Migrations per task", "migrations", |t| {
        t.migrations
    })?;
    bars(
        &mut r,
        summary,
        "Context switches per task",
        "times switched in",
        |t| t.switches,
    )?;

    r.section("CPU timeline");
    timeline(&mut r, &c, info, &name)?;
    Ok(r.to_html())
}

fn response_cdfs(
    r: &mut Report,
    c: &Collector,
    summary: &SummaryReport,
    name: &dyn Fn(usize) -> String,
) -> anyhow::Result<()> {
    let mut tasks: Vec<(usize, u64)> = c
        .responses
        .iter()
        .enumerate()
        .filter(|(_, v)| !v.is_empty())
        .map(|(t, _)| {
            let p99 = summary
                .per_task
                .get(t)
                .and_then(|s| s.response_ns.as_ref())
                .map_or(0, |p| p.p99);
            (t, p99)
        })
        .collect();
    if tasks.is_empty() {
        r.paragraph("No job finished within the simulated time: there are no response times to show.");
        return Ok(());
    }
    let all = tasks.len();
    if all > MAX_CDF_SERIES {
        tasks.sort_by_key(|&(t, p99)| (std::cmp::Reverse(p99), t));
        tasks.truncate(MAX_CDF_SERIES);
        tasks.sort_unstable();
    }
    let mut p = Plot::new("Response time, CDF per task")
        .x_axis("finish − release", "ms")
        .y_axis("fraction of jobs", "");
    for &(t, _) in &tasks {
        let v: Vec<f64> = c.responses[t].iter().map(|&ns| ms(ns)).collect();
        p.add_series(Series::step(&name(t), cdf(&v)));
    }
    r.plot(&p)?;
    if all > tasks.len() {
        r.paragraph(&format!(
            "The {} tasks with the largest p99 response time are drawn; {} other task{} with \
             finished jobs {} left out (all are in the summary table).",
            tasks.len(),
            all - tasks.len(),
            if all - tasks.len() == 1 { "" } else { "s" },
            if all - tasks.len() == 1 { "is" } else { "are" }
        ));
    }
    Ok(())
}

fn bars(
    r: &mut Report,
    summary: &SummaryReport,
    title: &str,
    axis: &str,
    value: fn(&TaskSummary) -> u64,
) -> anyhow::Result<()> {
    if summary.per_task.is_empty() {
        r.paragraph("No task ran: nothing to count.");
        return Ok(());
    }
    let mut b = Bars::new(title).x_axis(axis, "");
    for t in &summary.per_task {
        b.add_bar(&t.name, value(t) as f64);
    }
    r.bars(&b)?;
    Ok(())
}

fn timeline(
    r: &mut Report,
    c: &Collector,
    info: &RunInfo,
    name: &dyn Fn(usize) -> String,
) -> anyhow::Result<()> {
    let by_periods = c
        .shortest_period
        .map(|(p, t)| (p.saturating_mul(TIMELINE_PERIODS), t));
    let mut window = TIMELINE_CAP_NS.min(info.simulated_ns);
    let why = match by_periods {
        Some((w, t)) if w < window => {
            window = w;
            format!(
                "{TIMELINE_PERIODS} periods of the shortest-period task, {} ({})",
                name(t as usize),
                Duration(w / TIMELINE_PERIODS)
            )
        }
        _ if window == info.simulated_ns => "the whole run".to_string(),
        Some((w, t)) => format!(
            "at most {}; {TIMELINE_PERIODS} periods of the shortest-period task, {}, would be {}",
            Duration(TIMELINE_CAP_NS),
            name(t as usize),
            Duration(w)
        ),
        None => format!("at most {}", Duration(TIMELINE_CAP_NS)),
    };
    r.paragraph(&format!(
        "Which task ran on which CPU over the first {} of the run ({why}): one row per CPU, one \
         rectangle per execution slice, coloured by task; white is idle.",
        Duration(window)
    ));
    let slices: Vec<&Slice> = c.slices.iter().filter(|s| s.start < window).collect();
    if slices.is_empty() {
        r.paragraph("No task ran in this window: there is no schedule to draw.");
        return Ok(());
    }
    // Colours: one per task while they last; beyond eight tasks the seven with the most CPU
    // time in the window keep theirs and the rest share the last colour as "other".
    let mut busy: Vec<(ThreadId, u64)> = Vec::new();
    for s in &slices {
        let d = s.end.min(window) - s.start;
        match busy.iter_mut().find(|(t, _)| *t == s.thread) {
            Some(b) => b.1 += d,
            None => busy.push((s.thread, d)),
        }
    }
    busy.sort_by_key(|&(t, d)| (std::cmp::Reverse(d), t));
    let palette = pacer_report::PALETTE.len();
    let named = if busy.len() <= palette {
        busy.len()
    } else {
        palette - 1
    };
    let mut keys: Vec<String> = busy[..named].iter().map(|&(t, _)| name(t as usize)).collect();
    if busy.len() > named {
        keys.push(format!("other ({} tasks)", busy.len() - named));
    }
    let key_of = |t: ThreadId| busy[..named].iter().position(|&(x, _)| x == t).unwrap_or(named);
    let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let mut tl = Timeline::new(&format!("CPU timeline, first {}", Duration(window)))
        .x_axis("time", "ms")
        .x_range(0.0, ms(window))
        .keys(&key_refs);
    for cpu in 0..info.cpus {
        let spans: Vec<Span> = slices
            .iter()
            .filter(|s| s.cpu == cpu)
            .map(|s| Span {
                start: ms(s.start),
                end: ms(s.end.min(window)),
                key: key_of(s.thread),
            })
            .collect();
        tl.add_row(&format!("CPU {cpu}"), spans);
    }
    r.timeline(&tl)?;
    Ok(())
}
