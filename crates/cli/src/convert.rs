//! `pacer convert`: a task set under one configuration → an rt-app JSON file, the same threads
//! `pacer sim` and `pacer run` make of it (`pacer_workload::placement`, written by
//! `pacer_workload::rtapp_out`).

use std::path::PathBuf;

use anyhow::{bail, Result};
use pacer_model::Duration;

use crate::analyze::parse_duration;
use crate::output::{Outputs, Stdout};
use crate::sim::{read_input, Input};
use crate::taskset_args::TaskSetArgs;

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
pacer convert set.json --policy p-edf --cpus 2 -o set-pedf.json\n  \
pacer gen --recipe rm-vs-edf --cpus 2 | pacer convert - --policy c-rm --cpus 2 --cluster-size 2\n  \
pacer convert set.json --policy g-edf --cpus 2 --duration 10s -o w.json && sudo pacer run w.json\n\n\
One rt-app thread per task, named after the task: `run` C, then an absolute `unique` timer of\n\
period T, forever (`loop: -1`), starting after the task's offset (`delay`). EDF is\n\
SCHED_DEADLINE (dl-runtime C, dl-deadline D, dl-period T), RM/DM SCHED_FIFO with rate- or\n\
deadline-monotonic priorities (99 for the highest); c-* and p-* give each thread its cluster's or\n\
CPU's `cpus`, placed by --assign. rt-app counts in whole microseconds (and `global.duration` in\n\
seconds): times in nanoseconds are rounded up and each rounding is listed on standard error. What\n\
rt-app cannot express is refused: --exec other than wcet (run the task set itself with `pacer run\n\
SET.json --exec …`) and --reclaim. A SCHED_FIFO thread has no deadline key, so a constrained\n\
D < T is noted as lost. The partitions' exclusive cpusets are not in the file: `pacer run SET.json`\n\
with the same options makes them (docs/linux.md, \"Task sets on Linux\").")]
pub struct Args {
    /// Task-set JSON (docs/formats/taskset.md); `-` reads standard input.
    pub file: PathBuf,
    /// Number of CPUs (c-* and p-* use CPUs 0..M-1).
    #[arg(short = 'm', long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub cpus: u32,
    #[command(flatten)]
    pub taskset: TaskSetArgs,
    /// `global.duration` of the file, rounded up to whole seconds [default: none, rt-app runs
    /// until stopped].
    #[arg(short = 'd', long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Write the rt-app file here (replaced only once it is complete; the input, devices and
    /// FIFOs are refused) [default: standard output].
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
}

pub fn run(a: Args) -> Result<()> {
    let mut out = Outputs::new(Stdout::Free);
    out.input(&a.file);
    let slot = a.output.as_deref().map(|p| out.file("--output", p)).transpose()?;
    let set = match read_input(&a.file, false)? {
        Input::TaskSet(s) => s,
        Input::RtApp(_) => bail!(
            "{}: this is an rt-app file already (a `tasks` object); `pacer convert` reads pacer task sets (a `tasks` array)",
            a.file.display()
        ),
    };
    if a.duration.is_some_and(|d| d.is_zero()) {
        bail!("--duration: expected a run time > 0");
    }
    let cfg = a.taskset.configuration(a.cpus)?;
    let placement = pacer_workload::placement::place(&set, &cfg)?;
    let file = pacer_workload::rtapp_out::to_rtapp(&placement.workload, a.duration)?;
    for n in &file.notes {
        eprintln!("pacer convert: note: {}", pacer_model::text::escape_control(n));
    }
    let text = file.text();
    match slot {
        Some(s) => {
            out.write(s, text.as_bytes())?;
            out.commit()?;
        }
        None => print!("{text}"),
    }
    Ok(())
}
