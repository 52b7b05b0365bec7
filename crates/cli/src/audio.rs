//! `pacer sim audio`: the low-latency audio experiment of adaptive-deadline-audio-android.txt §6
//! (LatencyMark and the energy of Tables 4–5) on the simulator. The experiment lives in
//! `pacer_sim::audio`; this module reads the scenario, applies the command-line overrides and
//! prints what the run measured.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use pacer_model::Duration;
use pacer_sim::audio::{
    read_audio_scenario, run_audio, AudioReport, AudioScenario, ConfigResult, Configuration, MarginKind,
    Progress,
};
use pacer_workload::audio::{HintTiming, VoicePattern};

use crate::analyze::parse_duration;
use crate::output::{Outputs, Slot, Stdout};
use crate::table::Table;

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
pacer sim audio                                   # the paper's §6.3 run: 60 s, random voices\n  \
pacer sim audio --pattern square --duration 30s   # the §6.1–6.2 square wave 5 ↔ 185 voices\n  \
pacer sim audio scenario.toml --json              # docs/formats/audio-scenario.md\n  \
pacer sim audio --csv out/                        # per-configuration job and underrun CSVs\n  \
pacer sim audio --jitter 0.05                     # callbacks whose cost varies by 5 % (1 SD)\n  \
pacer sim audio --jitter 0.05 --margin fixed      # eq. 5's fixed margins, as published\n  \
pacer sim audio tests/audio/one-opp.toml --cost-from vm.json   # this machine's measured cost\n\n\
Configurations: fifo-walt (SCHED_FIFO + schedutil/WALT as on Android), fifo-max (SCHED_FIFO at the\n\
top OPP), adaptive (SCHED_DEADLINE sized by the proactive controller, GRUB-PA), clairvoyant (the\n\
lowest OPP that fits each callback, known in advance: a lower bound). Latency is LatencyMark's\n\
smallest glitch-free buffer; energy is the paper's E_N = Σ residency × normalised power / 1000.")]
pub struct AudioArgs {
    /// Scenario file (TOML, docs/formats/audio-scenario.md), `-` for standard input; without it,
    /// the built-in default:
    /// S = 48 kHz, b = 64, 60 s of random voices in [5, 185] every 3 s, seed 1, HiKey960 big CPU.
    pub scenario: Option<PathBuf>,
    /// Seed of the random voice pattern (recorded in the output).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Voice pattern: `square` (low ↔ high every step) or `random` (uniform in [low, high]).
    #[arg(long, value_parser = ["square", "random"])]
    pub pattern: Option<String>,
    /// Simulated time per configuration.
    #[arg(short = 'd', long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Execution-time noise: each callback's work is its voices' cost times a normal factor of
    /// mean 1 and this relative deviation (truncated at ±3 SD), in [0, 0.3]; 0 = the paper's exact
    /// linear cost. Its seed is the scenario's `jitter.seed` (default 1).
    #[arg(long, value_name = "SD")]
    pub jitter: Option<f64>,
    /// How the adaptive configuration sizes its budget's margin. `percentile` (the default): Q is
    /// a percentile (`adaptive.percentile`) of the current voice count's last N runtimes
    /// (`adaptive.percentile_window`), at least (1 + `adaptive.margin_floor`) × their median; eq. 5
    /// until the voice count has `adaptive.percentile_min_samples` runtimes; only an overrun
    /// beyond every recent runtime boosts Q, to that runtime. `fixed`: the paper's eq. 5,
    /// Q = m_m·C_e + m_o·T, × `adaptive.overload_boost` after any overrun. The report's header
    /// gives the values in force; defaults in docs/formats/audio-scenario.md.
    #[arg(long, value_name = "MODE", value_parser = parse_margin)]
    pub margin: Option<MarginKind>,
    /// The callback's cost measured on this machine: a `pacer audio voicemark --json` file. Its
    /// fixed cost per burst becomes the scenario's base cost and its burst-to-burst noise the
    /// --jitter (unless given); the voices stay the paper's, scaled as `pacer audio` plays them
    /// (210 fill the CPU), so the simulated run is the real run's pattern at this machine's cost.
    #[arg(long, value_name = "FILE")]
    pub cost_from: Option<PathBuf>,
    /// Configurations to run (comma-separated): fifo-walt, fifo-max, adaptive, clairvoyant.
    #[arg(long, value_delimiter = ',', value_parser = parse_configuration)]
    pub configurations: Option<Vec<Configuration>>,
    /// Write `<configuration>-jobs.csv` and `<configuration>-underruns.csv` into this directory
    /// (created if missing); the files replace earlier ones only if the whole run succeeds, all
    /// together (docs/output-files.md).
    #[arg(long, value_name = "DIR")]
    pub csv: Option<PathBuf>,
    /// Machine-readable JSON on standard output.
    #[arg(long)]
    pub json: bool,
}

fn parse_configuration(s: &str) -> Result<Configuration, String> {
    Configuration::ALL
        .into_iter()
        .find(|c| c.key() == s)
        .ok_or_else(|| {
            format!("unknown configuration `{s}`: expected fifo-walt, fifo-max, adaptive or clairvoyant")
        })
}

fn parse_margin(s: &str) -> Result<MarginKind, String> {
    [MarginKind::Fixed, MarginKind::Percentile]
        .into_iter()
        .find(|m| m.key() == s)
        .ok_or_else(|| format!("unknown margin mode `{s}`: expected fixed or percentile"))
}

/// The scenario after the command-line overrides, and where it came from.
pub fn scenario(a: &AudioArgs) -> Result<(AudioScenario, String)> {
    let (mut s, origin) = match &a.scenario {
        Some(p) if p.as_os_str() == "-" => (
            pacer_sim::audio::parse_audio_scenario(&crate::read_stdin()?, "<stdin>")?,
            "<stdin>".to_string(),
        ),
        Some(p) => (read_audio_scenario(p)?, p.display().to_string()),
        None => (AudioScenario::default(), "built-in scenario".to_string()),
    };
    let (lo, hi, seed) = match &s.pattern {
        VoicePattern::Square { low, high } => (*low, *high, None),
        VoicePattern::Random { min, max, seed } => (*min, *max, Some(*seed)),
        VoicePattern::List { voices } => (
            voices.iter().copied().min().unwrap_or(5),
            voices.iter().copied().max().unwrap_or(185),
            None,
        ),
    };
    match a.pattern.as_deref() {
        Some("square") => s.pattern = VoicePattern::Square { low: lo, high: hi },
        Some("random") => {
            s.pattern = VoicePattern::Random {
                min: lo,
                max: hi,
                seed: a.seed.or(seed).unwrap_or(1),
            }
        }
        _ => {}
    }
    if let Some(new) = a.seed {
        match &mut s.pattern {
            VoicePattern::Random { seed, .. } => *seed = new,
            _ => bail!("--seed: the voice pattern is not random (use --pattern random)"),
        }
    }
    if let Some(d) = a.duration {
        s.duration = d;
    }
    if let Some(c) = &a.configurations {
        s.configurations = c.clone();
    }
    if let Some(f) = &a.cost_from {
        let clock = pacer_workload::audio::AudioClock::new(s.sample_rate_hz, s.burst_frames)
            .map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
        let vm = crate::audio_bench::read_voicemark(f, Some(&clock))?;
        s.base_cost = Duration(vm.base_ns.max(0.0).round() as u64);
        s.jitter.sd = vm.cost_cv.clamp(0.0, pacer_sim::audio::JitterSettings::MAX_SD);
    }
    if let Some(sd) = a.jitter {
        s.jitter.sd = sd;
    }
    if let Some(m) = a.margin {
        s.adaptive.margin = m;
    }
    s.validate(&origin)?;
    Ok((s, origin))
}

pub fn run(a: AudioArgs) -> Result<()> {
    let mut out = Outputs::new(Stdout::Busy);
    if let Some(p) = &a.scenario {
        out.input(p);
    }
    if let Some(p) = &a.cost_from {
        out.input(p);
    }
    let (s, origin) = scenario(&a)?;
    // Per configuration: its job and underrun CSVs, declared before the run, written after it.
    let csvs = match &a.csv {
        Some(dir) => {
            out.dir("--csv", dir, true)?;
            s.configurations
                .iter()
                .map(|c| {
                    let slot = |out: &mut Outputs, what: &str| -> Result<(Slot, PathBuf)> {
                        let p = dir.join(format!("{}-{what}.csv", c.key()));
                        Ok((out.file("--csv", &p)?, p))
                    };
                    Ok((c.key(), slot(&mut out, "jobs")?, slot(&mut out, "underruns")?))
                })
                .collect::<Result<Vec<_>>>()?
        }
        None => Vec::new(),
    };
    let bar = (!a.json && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new(s.duration.ns() / 1_000_000);
        b.set_style(
            indicatif::ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} ms model time")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let mut last = usize::MAX;
    let report = run_audio(&s, &origin, &mut |p: Progress| {
        if let Some(b) = &bar {
            if p.index != last {
                last = p.index;
                b.set_message(format!("[{}/{}] {}", p.index + 1, p.of, p.configuration.key()));
            }
            b.set_position(p.simulated_ns / 1_000_000);
        }
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    for r in &report.results {
        if let Some((_, jobs, underruns)) = csvs.iter().find(|(k, ..)| *k == r.configuration.key()) {
            write_csvs(&mut out, jobs, underruns, &report, r)?;
        }
    }
    out.commit()?;
    if a.json {
        println!("{}", crate::output::json_text("pacer.sim.audio/1", &report)?);
    } else {
        print!("{}", render(&report, &origin));
    }
    Ok(())
}

fn write_csvs(
    out: &mut Outputs,
    jobs: &(Slot, PathBuf),
    underruns: &(Slot, PathBuf),
    report: &AudioReport,
    r: &ConfigResult,
) -> Result<()> {
    let path = &jobs.1;
    let mut w = BufWriter::new(out.open(jobs.0)?);
    let write = |w: &mut BufWriter<File>, p: &Path| -> Result<()> {
        w.flush().with_context(|| format!("{}: writing", p.display()))
    };
    writeln!(
        w,
        "job,release_ns,start_ns,finish_ns,response_ns,voices,work_ns,exec_ns,freq_khz,budget_ns,bursts_needed"
    )
    .with_context(|| format!("{}: writing", path.display()))?;
    for j in &r.jobs {
        writeln!(
            w,
            "{},{},{},{},{},{},{},{},{},{},{}",
            j.job,
            j.release_ns,
            j.start_ns,
            j.finish_ns,
            j.finish_ns.saturating_sub(j.release_ns),
            j.voices,
            j.work_ns,
            j.exec_ns,
            j.freq_khz,
            j.budget_ns.map(|b| b.to_string()).unwrap_or_default(),
            j.bursts_needed
        )
        .with_context(|| format!("{}: writing", path.display()))?;
    }
    write(&mut w, path)?;
    let path = &underruns.1;
    let mut w = BufWriter::new(out.open(underruns.0)?);
    writeln!(w, "bursts,latency_ms,underruns").with_context(|| format!("{}: writing", path.display()))?;
    let clock = report.scenario.clock();
    for (i, u) in r.underruns_by_bursts.iter().enumerate() {
        let k = i as u32 + 1;
        writeln!(w, "{k},{:.3},{u}", clock.latency_ms(k))
            .with_context(|| format!("{}: writing", path.display()))?;
    }
    write(&mut w, path)
}

fn pattern_text(p: &VoicePattern) -> String {
    match p {
        VoicePattern::Square { low, high } => format!("square wave {low} ↔ {high} voices"),
        VoicePattern::Random { min, max, seed } => format!("random voices in [{min}, {max}] (seed {seed})"),
        VoicePattern::List { voices } => format!("voices {voices:?}"),
    }
}

fn latency_text(r: &ConfigResult, max: u32) -> String {
    match (r.latency_bursts, r.latency_ms) {
        (Some(k), Some(ms)) => format!("{k} burst{} = {ms:.2} ms", if k == 1 { "" } else { "s" }),
        _ => format!("> {max} bursts"),
    }
}

/// The text report.
pub fn render(report: &AudioReport, origin: &str) -> String {
    let s = &report.scenario;
    let mut out = String::new();
    let ms = |ns: u64| ns as f64 / 1e6;
    out.push_str(&format!(
        "pacer sim audio ({origin}): S = {} Hz, b = {} frames (T = {:.3} ms), {} per configuration, {} every {}\n",
        s.sample_rate_hz,
        s.burst_frames,
        ms(report.period_ns),
        s.duration,
        pattern_text(&s.pattern),
        s.step
    ));
    let top = report.opps.last().map_or(0, |o| o.freq_khz / 1000);
    out.push_str(&format!(
        "callback cost {} ns + {} ns per voice ({} voices fill the CPU at {top} MHz){}; {} callbacks, {} per step\n",
        report.base_cost_ns,
        report.per_voice_ns,
        s.saturating_voices,
        if s.jitter.sd > 0.0 {
            format!(
                ", × N(1, {}) jitter (truncated at ±3 SD, seed {})",
                (s.jitter.sd * 1e4).round() / 1e4,
                s.jitter.seed
            )
        } else {
            String::new()
        },
        report.callbacks,
        report.callbacks_per_step
    ));
    let a = &s.adaptive;
    let eq5 = format!(
        "m_m = {}, m_o = {} of the period ({:.1} µs)",
        a.margin_mult,
        a.margin_offset,
        report.margin_offset_ns as f64 / 1e3
    );
    out.push_str(&format!(
        "adaptive: {}, budget updated every {} callbacks and at each workUnits hint ({})\n\n",
        match a.margin {
            MarginKind::Fixed => format!("fixed margins (eq. 5), {eq5}, overload boost × {}", a.overload_boost),
            MarginKind::Percentile => format!(
                "percentile margin: Q = P{} of each voice count's last {} runtimes, ≥ (1 + {}) × their median \
                 (eq. 5 with {eq5} until {} runtimes)",
                a.percentile * 100.0,
                a.percentile_window,
                a.margin_floor,
                a.percentile_min_samples
            ),
        },
        s.adaptive.update_every,
        match s.hint {
            HintTiming::Ahead => "announced at the end of the callback before the change",
            HintTiming::Inline => "announced at the start of the first changed callback",
        }
    ));
    let max_e = report
        .results
        .iter()
        .find(|r| r.configuration == Configuration::FifoMax)
        .map(|r| r.normalised_energy);
    let mut t = Table::new(&[
        "configuration",
        "latency (LatencyMark)",
        &format!("underruns at {}", s.target_bursts),
        "soft misses",
        "E_N",
        "vs max freq",
        "reserved bw",
        "used bw",
        "provisioned",
    ]);
    for r in &report.results {
        t.push(vec![
            r.label.clone(),
            latency_text(r, s.max_bursts),
            r.underruns_at_target.to_string(),
            r.soft_misses.to_string(),
            format!("{:.3}", r.normalised_energy),
            max_e
                .filter(|&m| m > 0.0)
                .map(|m| format!("{:+.1} %", (r.normalised_energy / m - 1.0) * 100.0))
                .unwrap_or_else(|| "–".into()),
            r.reserved_bandwidth
                .map(|b| format!("{b:.3}"))
                .unwrap_or_else(|| "–".into()),
            format!("{:.3}", r.used_bandwidth),
            format!("{:.3}", r.provisioned_capacity),
        ]);
    }
    out.push_str(&t.render());

    out.push_str("\nFrequency residency (s), the layout of the paper's Table 4:\n");
    let mut header: Vec<String> = vec!["frequency (MHz)".into(), "normalised power".into()];
    header.extend(report.results.iter().map(|r| r.label.clone()));
    let header_ref: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new(&header_ref);
    for (i, o) in report.opps.iter().enumerate() {
        let mut row = vec![(o.freq_khz / 1000).to_string(), format!("{}", o.power)];
        row.extend(
            report
                .results
                .iter()
                .map(|r| format!("{:.3}", r.residency_s.get(i).copied().unwrap_or(0.0))),
        );
        t.push(row);
    }
    let mut row = vec!["normalised energy".into(), String::new()];
    row.extend(
        report
            .results
            .iter()
            .map(|r| format!("{:.3}", r.normalised_energy)),
    );
    t.push(row);
    out.push_str(&t.render());

    for r in &report.results {
        for n in &r.notes {
            out.push_str(&format!("note: {}: {n}\n", r.configuration.key()));
        }
    }
    if let Some(g) = goal(report) {
        out.push_str(&format!("\n{g}\n"));
    }
    out
}

/// The goal, judged on this run: adaptive glitch-free at the target buffer, energy ≤ 5 %
/// above SCHED_FIFO + WALT and ≤ 15 % above the clairvoyant bound.
pub fn goal(report: &AudioReport) -> Option<String> {
    let find = |c| report.results.iter().find(|r| r.configuration == c);
    let a = find(Configuration::Adaptive)?;
    let k = report.scenario.target_bursts;
    let mut parts = vec![format!(
        "adaptive at {k} bursts: {} underruns ({})",
        a.underruns_at_target,
        if a.underruns_at_target == 0 {
            "met"
        } else {
            "missed"
        }
    )];
    if let Some(w) = find(Configuration::FifoWalt) {
        let d = (a.normalised_energy / w.normalised_energy - 1.0) * 100.0;
        parts.push(format!(
            "energy {d:+.1} % vs SCHED_FIFO + WALT (goal ≤ +5 %: {})",
            if d <= 5.0 { "met" } else { "missed" }
        ));
    }
    if let Some(c) = find(Configuration::Clairvoyant) {
        let d = (a.normalised_energy / c.normalised_energy - 1.0) * 100.0;
        parts.push(format!(
            "{d:+.1} % vs the clairvoyant bound (goal ≤ +15 %: {})",
            if d <= 15.0 { "met" } else { "missed" }
        ));
    }
    Some(format!("goal: {}", parts.join("; ")))
}
