//! `pacer sim vt-cfs`: the VT-CFS paper's experiments (vt-cfs-interactivity-android.txt §VI,
//! Fig. 6 and 7) on the simulator, printed beside the paper's figures. The experiments live in
//! `pacer_sim::interactivity`.

use anyhow::{bail, Result};
use pacer_sim::interactivity::{
    fig6_point, fig6_setups, fig7_point, fig7_setups, Fig6Point, Fig7Point, FIG6_HOGS, FIG7_BACKGROUND,
    FIG7_INTERACTIVE,
};
use serde::Serialize;

use crate::table::Table;

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
pacer sim vt-cfs                 # both figures, 30 s per point (Fig. 7: 3 seeds)\n  \
pacer sim vt-cfs --seconds 10 --json\n\n\
Fig. 6: response time of the painting application (per touch: 30 bursts of 3 ms with 1 ms I/O\n\
waits) beside 0–8 CPU hogs, under CFS (the paper's Android tunables), CFS with framework-assisted\n\
boosting (eq. 6, C = 3 and 10 ms), VT-CFS with boosting, and EEVDF (Linux ≥ 6.6).\n\
Fig. 7: Interbench-style latency (release to start of each wake-up) of Audio, Video and X under\n\
no load, Video, X and Burn (4 hogs), under CFS, VT-CFS (preemption tick 3 ms) and EEVDF; jobs\n\
released before their predecessor finished are counted as late, not as wake-ups. One CPU, nice 0,\n\
tick 1 ms. The workload models are pacer's; docs/experiments/vt-cfs.md compares with the paper.")]
pub struct Args {
    /// Simulated seconds per point.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub seconds: u64,
    /// Seeds per Fig. 7 point (X's work is random).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub seeds: u64,
    /// Only this figure (6 or 7).
    #[arg(long, value_parser = clap::value_parser!(u8).range(6..=7))]
    pub figure: Option<u8>,
    /// Machine-readable JSON on standard output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct JsonOut {
    seconds: u64,
    seeds: u64,
    fig6: Vec<Fig6Point>,
    fig7: Vec<Fig7Point>,
}

fn ms(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e6)
}

pub fn run(a: Args) -> Result<()> {
    if a.seconds == 0 {
        bail!("--seconds: expected at least 1");
    }
    let (six, seven) = match a.figure {
        Some(6) => (true, false),
        Some(7) => (false, true),
        _ => (true, true),
    };
    let mut fig6 = Vec::new();
    if six {
        for s in fig6_setups() {
            for n in FIG6_HOGS {
                fig6.push(fig6_point(&s, n, a.seconds));
            }
        }
    }
    let mut fig7 = Vec::new();
    if seven {
        for s in fig7_setups() {
            for i in FIG7_INTERACTIVE {
                for b in FIG7_BACKGROUND {
                    fig7.push(fig7_point(&s, i, b, a.seconds, a.seeds));
                }
            }
        }
    }
    if a.json {
        let out = JsonOut {
            seconds: a.seconds,
            seeds: a.seeds,
            fig6,
            fig7,
        };
        println!("{}", crate::output::json_text("pacer.vtcfs/1", &out)?);
        return Ok(());
    }
    if six {
        println!(
            "Fig. 6: painting application, mean response time per touch (ms), {} s per point\n\
             (paper, two hogs: CFS 275.9, C = 3 ms 243.37, C = 10 ms 194.34, with VT-CFS 241.1 and 189.3)\n",
            a.seconds
        );
        let mut head = vec!["setup".to_string()];
        head.extend(FIG6_HOGS.iter().map(|n| format!("{n} hogs")));
        let head: Vec<&str> = head.iter().map(String::as_str).collect();
        let mut t = Table::new(&head);
        for s in fig6_setups() {
            let mut row = vec![s.name.to_string()];
            row.extend(
                fig6.iter()
                    .filter(|p| p.setup == s.name)
                    .map(|p| ms(p.mean_response_ns)),
            );
            t.push(row);
        }
        print!("{}", t.render());
        println!();
    }
    if seven {
        println!(
            "Fig. 7: latency from release to start, mean / max (ms), {} s × {} seeds per point\n\
             (paper: VT-CFS max 15.28 ms with a 3 ms preemption tick, beside system rt tasks)\n",
            a.seconds, a.seeds
        );
        let mut head = vec!["interactive".to_string(), "background".to_string()];
        head.extend(fig7_setups().iter().map(|s| s.name.to_string()));
        let head: Vec<&str> = head.iter().map(String::as_str).collect();
        let mut t = Table::new(&head);
        for i in FIG7_INTERACTIVE {
            for b in FIG7_BACKGROUND {
                let mut row = vec![i.name().to_string(), b.name().to_string()];
                for s in fig7_setups() {
                    if let Some(p) = fig7
                        .iter()
                        .find(|p| p.setup == s.name && p.interactive == i && p.background == b)
                    {
                        let late = if p.late_jobs > 0 {
                            format!(" ({} late)", p.late_jobs)
                        } else {
                            String::new()
                        };
                        if p.jobs == 0 {
                            row.push(format!("-{late}"));
                        } else {
                            row.push(format!(
                                "{} / {}{late}",
                                ms(p.mean_latency_ns),
                                ms(p.max_latency_ns)
                            ));
                        }
                    }
                }
                t.push(row);
            }
        }
        print!("{}", t.render());
    }
    Ok(())
}
