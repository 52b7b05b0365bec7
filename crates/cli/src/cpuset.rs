//! `pacer cpuset`: run a command inside an exclusive CPU partition (its own SCHED_DEADLINE root
//! domain), then tear the partition down. The partitioning logic is `pacer_linux::cpuset`.

use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;

use anyhow::{bail, Context, Result};
use pacer_linux::cpuset::{self, CpusetHierarchy, PartitionSpec, Partitioning};
use pacer_linux::procfs::Pidfd;
use pacer_linux::signals::{self, SignalFd};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  pacer cpuset --cpus 1 -- pacer run workload.json     # a uniprocessor experiment on CPU 1
  pacer cpuset --cpus 1 -- sh -c 'pacer run hog.json & pacer exec -- pacer run trio.json; kill $!'
  pacer cpuset --cleanup                               # remove what a killed pacer left behind

The partition is a cpuset with only --cpus, exclusive, with load balancing inside it; the rest of \
the machine keeps the other CPUs (sched-deadline.rst §5). The command and everything it starts \
run inside, so SCHED_DEADLINE admission counts only the partition's CPUs (m·(0.95−0.05) of them) \
and reservations may be made with the partition's affinity. Signals (Ctrl-C, SIGTERM, SIGHUP) are \
passed on to the command; when it exits the partition is removed, every knob pacer changed is \
restored, and pacer exits with the command's status. Works with cgroup v1 and v2 cpusets; needs \
root.")]
pub struct Args {
    /// CPUs of the partition (a list as in cpuset.cpus: `1`, `2-3`, `0,2`).
    #[arg(long, value_name = "LIST", required_unless_present = "cleanup")]
    cpus: Option<String>,
    /// Remove partitions and restore knobs left by pacer processes that no longer exist, then exit.
    #[arg(long, conflicts_with = "cpus")]
    cleanup: bool,
    /// The command and its arguments (after `--`).
    #[arg(
        trailing_var_arg = true,
        value_name = "CMD",
        required_unless_present = "cleanup"
    )]
    command: Vec<String>,
}

pub fn run(a: Args) -> Result<u8> {
    crate::require_root(
        "pacer cpuset",
        "it creates and removes exclusive cpusets and changes the root cpuset's load balancing",
    )?;
    let hier = CpusetHierarchy::detect().context("pacer cpuset: finding the cpuset hierarchy")?;
    if a.cleanup {
        let r = hier.cleanup_stale().context("pacer cpuset --cleanup")?;
        if r.is_empty() {
            eprintln!(
                "pacer cpuset: nothing to clean up under {}",
                hier.root().display()
            );
        } else {
            eprintln!(
                "pacer cpuset: removed {} stale partition(s), moved {} task(s) back, restored {} knob(s)",
                r.removed.len(),
                r.tasks_moved,
                r.knobs_restored.len()
            );
        }
        return Ok(0);
    }
    let list = a.cpus.as_deref().unwrap_or_default();
    let Some(cpus) = cpuset::parse_cpu_list(list) else {
        bail!("--cpus: expected a CPU list such as `1`, `2-3` or `0,2`, got {list:?}");
    };
    if a.command.is_empty() {
        bail!("no command given: pacer cpuset --cpus LIST -- CMD [ARGS…]");
    }
    let sigs = SignalFd::new(&signals::TERMINATING).context("setting up signal handling")?;
    let parts = Partitioning::create(&hier, &[PartitionSpec::new("run", &cpus)])
        .with_context(|| format!("creating a partition on CPUs {list}"))?;
    let mut cmd = Command::new(&a.command[0]);
    cmd.args(&a.command[1..]);
    parts.join_on_spawn("run", &mut cmd)?;
    let status = (|| -> Result<std::process::ExitStatus> {
        let mut child =
            signals::spawn_unblocked(&mut cmd).with_context(|| format!("cannot run {:?}", a.command[0]))?;
        let pidfd = Pidfd::open(child.id())?;
        loop {
            signals::wait_readable(&[sigs.as_raw_fd(), pidfd.as_raw_fd()], 1_000_000_000)?;
            while let Some(s) = sigs.next() {
                // Passed on: the command decides how to end; we tear down once it has.
                let _ = pidfd.send_signal(s);
            }
            if let Some(st) = child.try_wait()? {
                return Ok(st);
            }
        }
    })();
    let torn = parts.teardown();
    let status = status?;
    torn.context("removing the partition (run `pacer cpuset --cleanup` to retry)")?;
    Ok(status
        .code()
        .map_or_else(|| 128 + status.signal().unwrap_or(0) as u8, |c| c as u8))
}
