//! `pacer demo`: the built-in default scenario (README's first command) — generate a task set with
//! the RM-vs-EDF multicore study's recipe and analyse it on 4 CPUs in clusters of 2.

use anyhow::{Context, Result};
use pacer_analysis::gen::{self, rm_vs_edf::RmVsEdfVariant, GenSpec};
use pacer_analysis::suite::SuiteConfig;

use crate::analyze::{report, Details};

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
    report("<generated>", &set, &cfg, Details::Auto, a.json)
}
