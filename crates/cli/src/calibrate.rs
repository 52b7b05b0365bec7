//! `pacer calibrate`: measures this machine's working-set costs (warm, after a migration, after
//! an eviction) into a calibration profile for `pacer sim --cache-model` (the measuring is
//! `pacer_linux::cachecal`; the format docs/formats/calibration.md).

use std::io::IsTerminal;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context};
use pacer_linux::cachecal::{self, CalibrateOptions, Progress};
use pacer_workload::WssOrder;

#[derive(clap::Args)]
#[command(
    about = "Measure working-set pass times (warm, after a migration, after an eviction) into a calibration profile",
    long_about = "Measure, per working-set size and order, the time of one pass over a working set of \
64-byte lines (4 reads to 1 write, the test program of rm-vs-edf-multicore-linux.txt §5.2): warm, \
the first pass after migrating to another CPU, and the first pass after another buffer evicted it \
on the same CPU. Each figure is the median of --repeats rounds. The profile (schema \
pacer.calibration/1, docs/formats/calibration.md) feeds `pacer sim --cache-model`.\n\n\
Run it on a quiet machine with a release build: the figures are the cost of this binary's loop.",
    after_help = "Examples:\n  pacer calibrate -o profile.json\n  pacer calibrate --sizes 16K,256K --repeats 51 -o profile.json\n  pacer calibrate --json > profile.json\n  pacer sim set.json --policy g-edf --cache-model profile.json"
)]
pub struct Args {
    /// Write the profile to FILE (replaced atomically; a symlink or special file is refused).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Working-set sizes (bytes, or with K/M suffixes: 1K = 1024), comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = pacer_model::bytes::parse_bytes,
          default_value = "4K,8K,16K,32K,64K,128K,256K,512K,1M,2M,4M")]
    sizes: Vec<u64>,
    /// Access orders to measure.
    #[arg(long, value_delimiter = ',', value_parser = parse_order, default_value = "sequential,random")]
    orders: Vec<WssOrder>,
    /// Rounds per point (each figure is their median).
    #[arg(long, default_value_t = 31, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    repeats: u32,
    /// The CPU to warm on and the CPU to migrate to.
    #[arg(
        long,
        value_delimiter = ',',
        num_args = 1,
        default_value = "0,1",
        value_name = "A,B"
    )]
    cpus: Vec<usize>,
    /// Bytes of the evicting buffer (default: twice the largest shared cache, 64M without one).
    #[arg(long, value_parser = pacer_model::bytes::parse_bytes)]
    evict: Option<u64>,
    /// Seed of the random order.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print the profile as JSON on standard output (no table, no progress).
    #[arg(long)]
    json: bool,
}

fn parse_order(s: &str) -> Result<WssOrder, String> {
    match s.trim() {
        "sequential" => Ok(WssOrder::Sequential),
        "random" => Ok(WssOrder::Random),
        other => Err(format!(
            "`{other}` is not an order (expected sequential or random)"
        )),
    }
}

fn human(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let [cpu_a, cpu_b] = a.cpus[..] else {
        bail!(
            "--cpus takes two CPUs, A,B (warm on A, migrate to B), found {:?}",
            a.cpus
        );
    };
    if a.output.is_none() && !a.json {
        bail!("nowhere to put the profile: give -o FILE or --json");
    }
    let mut sizes = a.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let mut orders = a.orders.clone();
    orders.dedup();
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    if cfg!(debug_assertions) {
        eprintln!("pacer calibrate: warning: this is a debug build; its loop is slower than a release build's, and so are the figures");
    }
    let opts = CalibrateOptions {
        sizes,
        orders,
        repeats: a.repeats,
        cpus: (cpu_a, cpu_b),
        evict_bytes: a.evict,
        seed: a.seed,
        command,
    };
    let show = !a.json;
    let tty = std::io::stderr().is_terminal();
    if show {
        eprintln!(
            "pacer calibrate: {} points × {} rounds on CPUs {cpu_a} → {cpu_b}",
            opts.sizes.len() * opts.orders.len(),
            opts.repeats
        );
    }
    let profile = cachecal::calibrate(&opts, |p: Progress| {
        if show {
            let line = format!(
                "[{}/{}] {} {}: warm {} ns, migrated {} ns, evicted {} ns",
                p.done,
                p.total,
                p.point.order.name(),
                human(p.point.wss_bytes),
                p.point.warm_pass_ns,
                p.point.migrated_pass_ns,
                p.point.evicted_pass_ns
            );
            if tty {
                eprint!("\r\x1b[2K{line}");
                if p.done == p.total {
                    eprintln!();
                }
            } else {
                eprintln!("{line}");
            }
        }
    })?;
    let text = profile.to_json();
    if let Some(path) = &a.output {
        pacer_report::write_atomic(path, |f| f.write_all(text.as_bytes()))
            .with_context(|| format!("writing the profile to {}", path.display()))?;
        if show {
            eprintln!("pacer calibrate: wrote {}", path.display());
        }
    }
    if a.json {
        print!("{text}");
        return Ok(());
    }
    println!("order       size      warm ns  migrated ns  evicted ns");
    for p in &profile.points {
        println!(
            "{:<10} {:>8} {:>11} {:>12} {:>11}",
            p.order.name(),
            human(p.wss_bytes),
            p.warm_pass_ns,
            p.migrated_pass_ns,
            p.evicted_pass_ns
        );
    }
    println!(
        "private cache {}, shared cache {}, eviction buffer {}",
        human(profile.private_cache_bytes),
        human(profile.shared_cache_bytes),
        human(profile.evict_bytes)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_parse() {
        assert!(matches!(parse_order("random"), Ok(WssOrder::Random)));
        assert!(parse_order("diagonal").is_err());
    }
}
