//! The low-latency audio experiment (adaptive-deadline-audio-android.txt §6) end to end: the
//! workUnits step under adaptive SCHED_DEADLINE vs SCHED_FIFO + WALT (§6.1–6.2, Fig. 7), the
//! shape of the random-workload results (§6.3, Tables 4–5), the clairvoyant bound and the
//! scenario file's errors.

use pacer_model::Duration;
use pacer_sim::audio::{
    lowest_fitting_opp, parse_audio_scenario, run_audio, AudioReport, AudioScenario, ConfigResult,
    Configuration, JitterSettings, MarginKind, OppInfo,
};
use pacer_workload::audio::{HintTiming, VoicePattern};

fn run(s: &AudioScenario) -> AudioReport {
    run_audio(s, "test", &mut |_| {}).unwrap()
}

fn result(r: &AudioReport, c: Configuration) -> &ConfigResult {
    r.results.iter().find(|x| x.configuration == c).unwrap()
}

/// 0.5 s of 5 voices, then 185.
fn step_scenario() -> AudioScenario {
    AudioScenario {
        duration: Duration::from_secs(1),
        step: Duration::from_ms(500),
        pattern: VoicePattern::paper_square(),
        configurations: vec![Configuration::Adaptive, Configuration::FifoWalt],
        ..AudioScenario::default()
    }
}

#[test]
fn a_workunits_step_raises_the_opp_before_the_heavier_job_only_under_adaptive_deadline() {
    let s = step_scenario();
    let r = run(&s);
    let step = r.callbacks_per_step as usize; // index of the first 185-voice callback
    let t = r.period_ns;
    let mhz = |k: u32| k / 1000;
    // The heavy callback needs 88 % of the top OPP: 2112 MHz is the lowest that fits it.
    let heavy_opp = lowest_fitting_opp(&r.opps, 185 * r.per_voice_ns, t);
    let needed = r.opps[heavy_opp].freq_khz;
    assert_eq!(mhz(needed), 2112);

    let a = result(&r, Configuration::Adaptive);
    assert_eq!(a.jobs[step].voices, 185);
    assert_eq!(a.jobs[step - 1].voices, 5);
    // Before the step the light callback runs at the lowest OPP; the hint at the end of the last
    // light callback raises the reservation, GRUB-PA the OPP, and the switch completes before
    // the heavy callback is released.
    assert_eq!(mhz(a.jobs[step - 1].freq_khz), 903);
    assert!(
        a.jobs[step].freq_khz >= needed,
        "adaptive: first heavy callback started at {} MHz",
        mhz(a.jobs[step].freq_khz)
    );
    let q = a.jobs[step].budget_ns.unwrap();
    assert!(
        q >= 185 * r.per_voice_ns,
        "budget {q} below the heavy callback's work"
    );
    assert!(
        a.jobs[step..step + 50].iter().all(|j| j.bursts_needed == 1),
        "adaptive: a heavy callback finished after its period"
    );

    let w = result(&r, Configuration::FifoWalt);
    // WALT sees the heavier load only as its windows fill: the first heavy callbacks run at the
    // lowest OPP and the OPP that fits them comes at least one 20 ms window later.
    assert_eq!(
        mhz(w.jobs[step].freq_khz),
        903,
        "WALT raised the OPP before the load arrived"
    );
    let caught_up = w.jobs[step..]
        .iter()
        .position(|j| j.freq_khz >= needed)
        .expect("WALT never reached the OPP the load needs");
    let window_jobs = (20_000_000 / t) as usize;
    assert!(
        caught_up >= window_jobs,
        "WALT reached {} MHz after {caught_up} callbacks, within one window",
        mhz(needed)
    );
    assert!(w.jobs[step..step + caught_up].iter().any(|j| j.bursts_needed > 2));
    eprintln!(
        "step: adaptive at {} MHz for the first heavy callback; WALT at {} MHz, {} MHz after {caught_up} callbacks ({:.1} ms)",
        mhz(a.jobs[step].freq_khz),
        mhz(w.jobs[step].freq_khz),
        mhz(w.jobs[step + caught_up].freq_khz),
        caught_up as f64 * t as f64 / 1e6
    );
}

#[test]
fn the_random_workload_has_the_papers_shape() {
    // The paper's §6.3 run: S = 48 kHz, b = 64, random voices in [5, 185] every 3 s for 60 s.
    let s = AudioScenario::default();
    assert_eq!(s.seed(), Some(1));
    let r = run(&s);
    let walt = result(&r, Configuration::FifoWalt);
    let max = result(&r, Configuration::FifoMax);
    let adaptive = result(&r, Configuration::Adaptive);
    let bound = result(&r, Configuration::Clairvoyant);
    for x in &r.results {
        eprintln!(
            "{:<24} latency {:?} bursts, E_N {:.3}, residency {:?}",
            x.label, x.latency_bursts, x.normalised_energy, x.residency_s
        );
    }
    // Latency: the adaptive reservation is glitch-free at 2 bursts (2.67 ms), as at the top OPP;
    // WALT needs many more (the paper: 20 bursts, 26.67 ms).
    assert_eq!(adaptive.underruns_at_target, 0);
    assert!(adaptive.latency_bursts.unwrap() <= 2);
    assert!(max.latency_bursts.unwrap() <= 2);
    let wk = walt.latency_bursts.unwrap();
    assert!(wk >= 8, "WALT glitch-free at {wk} bursts");
    assert!(walt.underruns_at_target > 0);
    // Energy: the adaptive reservation well below the top OPP (the paper: −40 %), above the bound.
    assert!(adaptive.normalised_energy < 0.75 * max.normalised_energy);
    assert!(bound.normalised_energy <= adaptive.normalised_energy);
    assert!(bound.normalised_energy <= walt.normalised_energy);
    // Every configuration covers the whole run, and max frequency is exactly 60 s at 2848.
    for x in &r.results {
        let total: f64 = x.residency_s.iter().sum();
        assert!((total - 60.0).abs() < 1e-6, "{}: {total} s of residency", x.label);
        assert_eq!(x.jobs_finished, x.jobs_expected, "{}", x.label);
    }
    assert!((max.normalised_energy - 60.0 * 2.848).abs() < 1e-9);
    // The reservation follows the demand with its margin: above the used bandwidth, by less than
    // eq. 5's m_o = 0.041 plus m_m's 0.5 % (the percentile margin's floor is 1 % of the median runtime).
    let (res, used) = (adaptive.reserved_bandwidth.unwrap(), adaptive.used_bandwidth);
    assert!(res > used && res < used + 0.08, "reserved {res} vs used {used}");
    // Deterministic: the same seed gives the same figures; another seed another pattern.
    assert_eq!(run(&s), r);
    let mut other = s.clone();
    other.pattern = VoicePattern::paper_random(2);
    other.configurations = vec![Configuration::Clairvoyant];
    assert_ne!(run(&other).voices, r.voices);
}

/// The default scenario's adaptive configuration at execution-time noise `sd`: its result and
/// the clairvoyant bound's E_N. Only these two configurations run: the others do not influence
/// them (each configuration is its own simulation of the same callbacks).
fn adaptive_vs_bound(sd: f64) -> (ConfigResult, f64) {
    let s = AudioScenario {
        jitter: JitterSettings {
            sd,
            ..JitterSettings::default()
        },
        configurations: vec![Configuration::Adaptive, Configuration::Clairvoyant],
        ..AudioScenario::default()
    };
    let r = run(&s);
    let bound = result(&r, Configuration::Clairvoyant).normalised_energy;
    (result(&r, Configuration::Adaptive).clone(), bound)
}

#[test]
fn the_percentile_margin_keeps_adaptive_energy_near_the_bound_under_noise() {
    // Issue 17, item 5, on the default scenario (random voices, seed 1): the margin sized from
    // each voice count's measured dispersion keeps the adaptive configuration within 8 % of the
    // clairvoyant bound without noise and within 15 % at SD = 0.05, glitch-free at the paper's
    // 2 bursts. Eq. 5's fixed margins (`margin = "fixed"`) give +6.0 % and +21.8 %.
    let s = AudioScenario::default();
    assert_eq!(s.adaptive.margin, MarginKind::Percentile);
    assert_eq!((s.seed(), s.jitter.seed), (Some(1), 1));
    for (sd, within) in [
        (0.0, 0.08),
        (0.02, f64::INFINITY),
        (0.05, 0.15),
        (0.1, f64::INFINITY),
    ] {
        let (a, bound) = adaptive_vs_bound(sd);
        let excess = a.normalised_energy / bound - 1.0;
        eprintln!(
            "SD {sd}: adaptive {} bursts, {} underruns at 2, {} soft misses, {} overruns, E_N {:.3} vs bound {bound:.3} ({:+.1} %)",
            a.latency_bursts.unwrap_or(0),
            a.underruns_at_target,
            a.soft_misses,
            a.overruns,
            a.normalised_energy,
            excess * 100.0
        );
        assert_eq!(a.underruns_at_target, 0, "SD {sd}: glitches at 2 bursts");
        assert!(
            a.latency_bursts.is_some_and(|k| k <= 2),
            "SD {sd}: {:?}",
            a.latency_bursts
        );
        assert!(
            excess <= within,
            "SD {sd}: adaptive E_N {:.3} is {:+.1} % above the bound {bound:.3} (goal ≤ {:+.0} %)",
            a.normalised_energy,
            excess * 100.0,
            within * 100.0
        );
    }
}

#[test]
fn the_clairvoyant_bound_picks_the_lowest_fitting_opp() {
    let opps: Vec<OppInfo> = [(903, 391, 404.0), (1421, 616, 861.0), (2362, 1024, 2848.0)]
        .iter()
        .map(|&(f, c, p)| OppInfo {
            freq_khz: f * 1000,
            capacity: c,
            power: p,
        })
        .collect();
    let t = 1_024_000;
    assert_eq!(lowest_fitting_opp(&opps, 0, t), 0);
    assert_eq!(lowest_fitting_opp(&opps, 391_000, t), 0); // exactly fits
    assert_eq!(lowest_fitting_opp(&opps, 391_001, t), 1);
    assert_eq!(lowest_fitting_opp(&opps, 616_001, t), 2);
    assert_eq!(lowest_fitting_opp(&opps, 2 * t, t), 2); // nothing fits: the top

    // Only the bound: residency is the jobs' periods at their OPPs.
    let s = AudioScenario {
        duration: Duration::from_secs(6),
        pattern: VoicePattern::List { voices: vec![5, 185] },
        configurations: vec![Configuration::Clairvoyant],
        ..AudioScenario::default()
    };
    let r = run(&s);
    let b = &r.results[0];
    // 3 s at 903 MHz (5 voices), 3 s at 2112 MHz (185 voices: 88 % of the top OPP, 2112 gives 89.4 %).
    assert!((b.residency_s[0] - 3.0).abs() < 1e-5, "{:?}", b.residency_s);
    assert!((b.residency_s[3] - 3.0).abs() < 1e-5, "{:?}", b.residency_s);
    let e = (3.0 * 404.0 + 3.0 * 2200.0) / 1000.0;
    assert!(
        (b.normalised_energy - e).abs() < 1e-3,
        "{} vs {e}",
        b.normalised_energy
    );
    assert_eq!(b.latency_bursts, Some(1));
}

#[test]
fn an_inline_hint_still_meets_two_bursts() {
    // The hint at the start of the heavier callback (as SynthMark's harness changes its voices):
    // the running job keeps its old budget (sched_setattr keeps the current runtime), so the
    // first heavy callback overruns into the next period, but GRUB-PA has already raised the OPP.
    let s = AudioScenario {
        hint: HintTiming::Inline,
        configurations: vec![Configuration::Adaptive],
        ..step_scenario()
    };
    let r = run(&s);
    let a = &r.results[0];
    assert!(
        a.overruns > 0,
        "the first heavy callback should exhaust its light budget"
    );
    assert_eq!(a.underruns_at_target, 0, "{:?}", a.underruns_by_bursts);
}

#[test]
fn scenario_files_parse_and_bad_ones_name_the_field() {
    let s = parse_audio_scenario(
        r#"
duration = "10s"
sample_rate_hz = 44100
burst_frames = 96
configurations = ["adaptive", "clairvoyant"]

[pattern]
kind = "square"
low = 10
high = 150

[adaptive]
margin_mult = 1.1
margin_offset = 0.05
"#,
        "s.toml",
    )
    .unwrap();
    assert_eq!(s.duration, Duration::from_secs(10));
    assert_eq!(s.pattern, VoicePattern::Square { low: 10, high: 150 });
    assert_eq!(s.adaptive.margin_mult, 1.1);
    assert_eq!(
        s.adaptive.update_every, 30,
        "defaults fill what the file leaves out"
    );
    assert_eq!(s.clock().period_ns(), 2_176_871);
    assert_eq!(
        parse_audio_scenario("", "empty.toml").unwrap(),
        AudioScenario::default()
    );

    let err = |text: &str| parse_audio_scenario(text, "bad.toml").unwrap_err().to_string();
    let e = err("sample_rate_hz = 0");
    assert!(e.starts_with("bad.toml: sample_rate_hz: "), "{e}");
    assert!(e.contains("> 0"), "{e}");
    let e = err("duration = \"ten seconds\"");
    assert!(e.starts_with("bad.toml: duration: "), "{e}");
    let e = err("[adaptive]\nmargin_mult = 0.5");
    assert!(
        e.starts_with("bad.toml: adaptive.margin_mult: expected m_m ≥ 1"),
        "{e}"
    );
    let e = err("[adaptive]\nmargins = 1");
    assert!(e.starts_with("bad.toml: adaptive"), "{e}");
    assert!(e.contains("margins"), "{e}");
    let e = err("[pattern]\nkind = \"random\"\nmin = 9\nmax = 1\nseed = 3");
    assert!(e.starts_with("bad.toml: pattern: "), "{e}");
    assert!(e.contains("min ≤ max"), "{e}");
    let e = err("[pattern]\nkind = \"sine\"");
    assert!(e.starts_with("bad.toml: pattern"), "{e}");
    let e = err("configurations = [\"walt\"]");
    assert!(e.starts_with("bad.toml: configurations"), "{e}");
    let e = err("[platform]\npreset = \"pixel\"");
    assert!(
        e.starts_with("bad.toml: platform.preset: unknown preset `pixel`"),
        "{e}"
    );
    let e = err("[platform]\npreset = \"\"\nopps = []");
    assert!(e.contains("not both"), "{e}");
    let e = err("[platform]\nopps = [{ freq_khz = 2000000, power = 9 }, { freq_khz = 1000000, power = 1 }]");
    assert!(e.starts_with("bad.toml: platform.opps[1].freq_khz"), "{e}");
    let e = err("duration = [");
    assert!(e.starts_with("bad.toml: (syntax): line 1"), "{e}");
    let e = err("fifo_priority = 0");
    assert!(
        e.starts_with("bad.toml: fifo_priority: expected a SCHED_FIFO priority in 1..=99"),
        "{e}"
    );
    let m = parse_audio_scenario(
        "[adaptive]\nmargin = \"fixed\"\npercentile = 0.95\npercentile_window = 32\n\
         percentile_min_samples = 8\nmargin_floor = 0.01\n",
        "m.toml",
    )
    .unwrap();
    assert_eq!(m.adaptive.margin, MarginKind::Fixed);
    assert_eq!(
        (
            m.adaptive.percentile,
            m.adaptive.percentile_window,
            m.adaptive.percentile_min_samples,
            m.adaptive.margin_floor
        ),
        (0.95, 32, 8, 0.01)
    );
    let e = err("[adaptive]\nmargin = \"median\"");
    assert!(e.starts_with("bad.toml: adaptive.margin"), "{e}");
    let e = err("[adaptive]\npercentile = 0");
    assert!(e.starts_with("bad.toml: adaptive.percentile: expected"), "{e}");
    let e = err("[adaptive]\npercentile_window = 8\npercentile_min_samples = 9");
    assert!(e.starts_with("bad.toml: adaptive.percentile_min_samples"), "{e}");
    let e = err("[adaptive]\nmargin_floor = -0.1");
    assert!(e.starts_with("bad.toml: adaptive.margin_floor"), "{e}");
    let e = err("duration = \"1ms\"");
    assert!(
        e.starts_with("bad.toml: duration: expected at least one callback period"),
        "{e}"
    );
}

#[test]
fn jitter_varies_each_callback_reproducibly() {
    let scenario = |sd: f64, seed: u64| AudioScenario {
        duration: Duration::from_secs(2),
        step: Duration::from_secs(1),
        pattern: VoicePattern::List { voices: vec![5, 100] },
        configurations: vec![Configuration::FifoMax, Configuration::Clairvoyant],
        jitter: JitterSettings { sd, seed },
        ..AudioScenario::default()
    };
    let works = |r: &AudioReport, c| -> Vec<u64> { result(r, c).jobs.iter().map(|j| j.work_ns).collect() };
    let exact = run(&scenario(0.0, 1));
    let per_voice = exact.per_voice_ns;
    assert!(works(&exact, Configuration::Clairvoyant)
        .iter()
        .zip(&result(&exact, Configuration::Clairvoyant).jobs)
        .all(|(&w, j)| w == j.voices * per_voice));

    let r = run(&scenario(0.1, 7));
    let w = works(&r, Configuration::Clairvoyant);
    // Both configurations run the same jittered callbacks, and the simulated one executes them
    // (at the top OPP, CPU time = work).
    assert_eq!(works(&r, Configuration::FifoMax), w);
    assert!(result(&r, Configuration::FifoMax)
        .jobs
        .iter()
        .all(|j| j.exec_ns.abs_diff(j.work_ns) <= 1));
    let jobs = &result(&r, Configuration::Clairvoyant).jobs;
    let ratios: Vec<f64> = jobs
        .iter()
        .map(|j| j.work_ns as f64 / (j.voices * per_voice) as f64)
        .collect();
    let (lo, hi) = ratios
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &f| (a.min(f), b.max(f)));
    // Rounding to whole nanoseconds moves a 5-voice (≈30 µs) job by up to 2e-5 of itself.
    assert!(
        lo >= 0.7 - 1e-4 && hi <= 1.3 + 1e-4,
        "truncated at ±3 SD: {lo}..{hi}"
    );
    let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
    let sd = (ratios.iter().map(|f| (f - mean).powi(2)).sum::<f64>() / ratios.len() as f64).sqrt();
    assert!(
        (mean - 1.0).abs() < 0.01 && (sd - 0.1).abs() < 0.01,
        "mean {mean}, sd {sd}"
    );
    // Seeded: the same seed repeats the factors, another seed changes them.
    assert_eq!(works(&run(&scenario(0.1, 7)), Configuration::Clairvoyant), w);
    assert_ne!(works(&run(&scenario(0.1, 8)), Configuration::Clairvoyant), w);

    let e = parse_audio_scenario("[jitter]\nsd = 0.5\n", "j.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("j.toml") && e.contains("jitter.sd") && e.contains("0.5"),
        "{e}"
    );
}
