//! `pacer demo`: the built-in default scenario (README's first command) — generate a task set with
//! the RM-vs-EDF multicore study's recipe, analyse it on 4 CPUs in clusters of 2, then simulate it
//! under global, clustered and partitioned EDF and RM and compare the run-time metrics.

use anyhow::{Context, Result};
use pacer_analysis::gen::{self, rm_vs_edf::RmVsEdfVariant, GenSpec};
use pacer_analysis::suite::SuiteConfig;

use crate::analyze::{report, report_json, Details};
use crate::sim::{simulate, Input, Sched, SchedPolicy, Scope};
use crate::table::Table;
use pacer_model::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// Seed of the generated task set.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of CPUs (tasks: 3 per CPU, utilisation 0.6 per CPU).
    #[arg(long, default_value_t = 4)]
    pub cpus: usize,
    /// Machine-readable JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> Result<()> {
    if a.cpus == 0 {
        anyhow::bail!("--cpus: expected at least 1");
    }
    let spec = GenSpec::rm_vs_edf(a.seed, a.cpus, 3, 0.6, RmVsEdfVariant::ExactTotal);
    let mut set = gen::generate(&spec).context("generating the demo task set")?;
    set.name = Some("demo: rm-vs-edf recipe, x = 3, R = 0.6".into());
    let mut cfg = SuiteConfig::new(a.cpus);
    cfg.cluster_size = (a.cpus.is_multiple_of(2) && a.cpus > 2).then_some(2);
    cfg.milp_time_limit = pacer_model::Duration::from_secs(5);
    if !a.json {
        println!(
            "pacer demo: generated {} tasks for {} CPUs (seed {}); analysing.\n",
            set.len(),
            a.cpus,
            a.seed
        );
    }
    let analysis = if a.json {
        Some(report_json("<generated>", &set, &cfg)?)
    } else {
        report("<generated>", &set, &cfg, Details::Auto, false)?;
        None
    };

    // The same set on the simulated kernel: what the analysis predicts, observed.
    let duration = Duration::from_secs(10);
    let mut policies = vec![
        SchedPolicy(Scope::Global, Sched::Edf),
        SchedPolicy(Scope::Global, Sched::Rm),
    ];
    if cfg.cluster_size.is_some() {
        policies.push(SchedPolicy(Scope::Clustered, Sched::Edf));
        policies.push(SchedPolicy(Scope::Clustered, Sched::Rm));
    }
    policies.push(SchedPolicy(Scope::Partitioned, Sched::Edf));
    policies.push(SchedPolicy(Scope::Partitioned, Sched::Rm));
    let mut rows = Vec::new();
    for p in policies {
        let args = crate::sim::Args::for_taskset(
            a.cpus as u32,
            p,
            cfg.cluster_size.map(|k| k as u32),
            duration,
            a.seed,
        );
        let (summary, info, _) = simulate(
            &args,
            Input::TaskSet(set.clone()),
            false,
            Default::default(),
            None,
        )
        .with_context(|| format!("simulating the demo set under {p}"))?;
        rows.push((p.to_string(), summary, info));
    }
    if a.json {
        let sims: Vec<serde_json::Value> = rows
            .iter()
            .map(|(p, s, i)| serde_json::json!({ "policy": p, "run": i, "summary": s }))
            .collect();
        let doc = serde_json::json!({ "taskset": set, "analysis": analysis, "simulations": sims });
        println!("{}", crate::output::json_text("pacer.demo/1", &doc)?);
        return Ok(());
    }
    println!("\nsimulated for {duration} of model time each (`pacer sim --help` for more):\n");
    let mut t = Table::new(&[
        "policy",
        "jobs",
        "misses",
        "miss ratio",
        "norm. laxity",
        "exp. U",
        "migr/task",
        "ctx sw/task",
        "wall",
    ]);
    let f = |x: Option<f64>, d: usize| x.map(|v| format!("{v:.d$}")).unwrap_or_else(|| "-".into());
    for (p, s, i) in &rows {
        t.push(vec![
            p.clone(),
            s.jobs.to_string(),
            s.misses.to_string(),
            f(s.miss_ratio, 4),
            f(s.normalised_laxity, 4),
            format!("{:.4}", s.utilisation),
            f(s.migration_rate, 1),
            f(s.context_switch_rate, 1),
            format!("{:.3}s", i.wall_seconds),
        ]);
    }
    print!("{}", t.render());
    Ok(())
}
