//! `pacer bench stalls`: how long this machine stops running a busy thread without its kernel
//! switching it out (`pacer_linux::stalls`): the host descheduling a vCPU, SMIs, long
//! interrupts. Run it before trusting a latency figure measured here.

use anyhow::{Context, Result};
use pacer_linux::stalls::{self, StallReport, StallSpec};
use pacer_model::Duration;

use crate::analyze::parse_duration;
use crate::table::Table;

#[derive(clap::Args)]
#[command(after_help = "\
One thread per CPU in --cpus (default: all online CPUs, all at once) reads CLOCK_MONOTONIC in a \
loop for --duration. A gap longer than --threshold during which the thread's context-switch \
counts did not change is a stall: the thread was not running, and this kernel did not run \
anything else in its place. On a virtual machine that is the host (its scheduler, or a CPU \
quota on the VM: stalls recurring every 100 ms, CFS bandwidth control's default period, are \
the sign of one); on bare metal, SMIs or long interrupt handlers. Gaps with a switch are this \
kernel's scheduler and are listed apart. 'steal' is what the hypervisor reported in /proc/stat \
over the same time; a quota throttle need not appear there.

Compare all CPUs busy with one (`--cpus 1`): a VM whose stalls appear only when all its vCPUs \
are busy is being held to less than its vCPU count. No root needed; the threads are SCHED_OTHER.

Examples:
  pacer bench stalls                       # 10 s, every CPU spinning
  pacer bench stalls --cpus 1 -d 30s       # one CPU busy, the rest idle
  sudo pacer bench stalls --cpus 1 --cpu-latency 0   # ... with idle CPUs kept polling
  pacer bench stalls --threshold 20us --json")]
pub struct StallArgs {
    /// How long to measure.
    #[arg(short = 'd', long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Shortest gap recorded.
    #[arg(long, default_value = "100us", value_parser = parse_duration)]
    threshold: Duration,
    /// CPUs that spin (a list such as `0-3,6`); the others stay idle.
    #[arg(long, value_name = "LIST", value_parser = parse_cpus)]
    cpus: Option<CpuList>,
    /// Hold a PM QoS request of this many µs of CPU wake-up latency while measuring
    /// (`/dev/cpu_dma_latency`, root; 0 keeps idle CPUs polling, as `pacer runtime run` does by
    /// default): on a VM held to a CPU quota, polling idle vCPUs can bring the stalls on.
    #[arg(long, value_name = "US")]
    cpu_latency: Option<u32>,
    /// Machine-readable JSON on stdout (schema `pacer.bench.stalls/1`).
    #[arg(long)]
    json: bool,
}

/// `--cpus` (a newtype: clap would read a bare `Vec` as repeated values).
#[derive(Clone, Debug)]
struct CpuList(Vec<usize>);

fn parse_cpus(s: &str) -> Result<CpuList, String> {
    match pacer_linux::sys::parse_cpu_list(s) {
        Some(v) if !v.is_empty() => Ok(CpuList(v)),
        _ => Err(format!("`{s}`: expected a CPU list such as 0,1 or 0-3")),
    }
}

pub fn run(a: StallArgs) -> Result<()> {
    if a.duration.0 == 0 {
        anyhow::bail!("--duration: expected more than 0");
    }
    let spec = StallSpec {
        cpus: a.cpus.map_or_else(pacer_linux::sys::online_cpus, |c| c.0),
        duration_ns: a.duration.0,
        threshold_ns: a.threshold.0.max(1),
        cpu_latency_us: a.cpu_latency,
    };
    if !a.json {
        eprintln!(
            "pacer bench stalls: spinning on CPU {} for {}…",
            pacer_linux::sys::format_cpu_list(&spec.cpus),
            a.duration.approx()
        );
    }
    let r = stalls::measure(&spec).context("pacer bench stalls")?;
    if a.json {
        println!("{}", crate::output::json_text("pacer.bench.stalls/1", &r)?);
    } else {
        print!("{}", render(&r));
    }
    Ok(())
}

fn ms(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e6)
}

fn render(r: &StallReport) -> String {
    let mut t = Table::new(&[
        "CPU",
        "READS/S",
        "STALLS",
        "STALLED MS",
        "LONGEST MS",
        "STALLED %",
        "GUEST PREEMPTIONS",
        "STEAL MS",
    ]);
    let secs = r.duration_ns as f64 / 1e9;
    for c in &r.cpus {
        t.push(vec![
            c.cpu.to_string(),
            format!("{:.0}", c.reads as f64 / secs),
            format!(
                "{}{}",
                c.stalls.len(),
                if c.dropped > 0 {
                    format!(" (+{} gaps not kept)", c.dropped)
                } else {
                    String::new()
                }
            ),
            ms(c.stalled_ns()),
            ms(c.longest_ns()),
            format!("{:.3}", 100.0 * c.stalled_ns() as f64 / r.duration_ns as f64),
            c.preemptions.len().to_string(),
            c.steal_ns.map_or("unreadable".into(), ms),
        ]);
    }
    let mut out = format!(
        "gaps over {} in {:.1} s (stall: not running and not switched out){}\n",
        Duration(r.threshold_ns).approx(),
        secs,
        r.cpu_latency_us
            .map(|us| format!(", CPU wake-up latency held at {us} µs"))
            .unwrap_or_default()
    );
    out.push_str(&t.render());
    match r.recurring {
        Some(p) => out.push_str(&format!(
            "stalls of 1 ms or more recur every {} ms ({} of {} intervals on its multiples){}\n",
            p.interval_ns / 1_000_000,
            p.on_grid,
            p.intervals,
            if p.interval_ns == 100_000_000 {
                ": the period of CFS bandwidth control, as a host CPU quota on this VM would give"
            } else {
                ""
            }
        )),
        None => out.push_str("stalls of 1 ms or more: no recurring interval\n"),
    }
    out
}
