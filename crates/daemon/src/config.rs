//! The daemon's configuration file (TOML, `docs/formats/daemon-config.md`): where it listens,
//! the Σ Q/P bound it keeps for all clients together, its own scheduling, and the per-user and
//! per-group quotas (RTKit's idea of per-user real-time limits, for bandwidth instead of
//! priority).

use std::collections::BTreeMap;
use std::path::PathBuf;

use pacer_model::reservation::{DEFAULT_PERIOD_MAX, DEFAULT_PERIOD_MIN};
use pacer_model::time::Duration;
use serde::{Deserialize, Serialize};

use crate::protocol::QuotaView;

/// Default socket path (`PACER_SOCKET` overrides it for clients).
pub const DEFAULT_SOCKET: &str = "/run/pacer/pacer.sock";

/// Why a configuration file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: {field}: {message}")]
    Field {
        path: String,
        field: String,
        message: String,
    },
}

/// Limits of one user or group. Omitted fields fall back to `[default]` (for users and groups)
/// or to the built-in defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Σ of the ceilings of the user's sessions (each thread's largest Q/P), CPUs.
    pub bandwidth: Option<f64>,
    /// Sessions open at once.
    pub sessions: Option<u32>,
    /// Shortest period a session may ask for.
    pub min_period: Option<Duration>,
    /// A thread's ceiling when the session names none.
    pub thread_bandwidth: Option<f64>,
    /// Whether the user may name threads of its other processes (same uid), not only of the
    /// process that connected.
    pub same_uid: Option<bool>,
    /// Whether the user may ask for interactive boosts.
    pub boost: Option<bool>,
}

/// Limits with every field decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Quota {
    /// `None`: unlimited (root without an entry).
    pub bandwidth: Option<f64>,
    pub sessions: Option<u32>,
    pub min_period_ns: u64,
    pub thread_bandwidth: f64,
    pub same_uid: bool,
    pub boost: bool,
    /// Where the limits came from (`default`, `user.alice`, `group.audio`, `root`).
    pub source: String,
}

impl Quota {
    pub fn view(&self) -> QuotaView {
        QuotaView {
            bandwidth: self.bandwidth,
            sessions: self.sessions,
            min_period_ns: self.min_period_ns,
            thread_bandwidth: self.thread_bandwidth,
        }
    }
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub socket: PathBuf,
    /// Socket file mode (octal string, e.g. "0666"): who may connect at all. Quotas decide what
    /// each may do.
    pub socket_mode: String,
    /// Σ Q/P the daemon grants over all clients, CPUs; default: the kernel's admission limit.
    pub bound: Option<f64>,
    /// The daemon's own SCHED_FIFO priority (1–99) so hints are applied promptly under load;
    /// 0 leaves it SCHED_OTHER.
    pub rt_priority: u32,
    /// A session none of whose threads sent anything for this long loses its reservations
    /// (its threads get their policy back) until it speaks again; 0 = never.
    pub idle_timeout: Duration,
    /// Limits for unprivileged users without their own entry.
    pub default: Limits,
    /// Per user, by name or numeric uid.
    pub user: BTreeMap<String, Limits>,
    /// Per group, by name or numeric gid.
    pub group: BTreeMap<String, Limits>,
    /// How the proactive controller of every session sizes its budgets.
    pub proactive: ProactiveSettings,
}

/// Which margin the proactive controller's budgets keep over the measured runtimes
/// (`pacer_adapt::controller::MarginMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MarginKind {
    /// Eq. 5 of the audio paper: Q = 1.1 × the EWMA of the runtimes (the library's default).
    Fixed,
    /// Q = a percentile of the last runtimes of the current workUnits value (LFS++ style).
    Percentile,
}

/// `[proactive]`: the budget rule of proactive sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProactiveSettings {
    pub margin: MarginKind,
    /// The percentile p ∈ (0, 1] (percentile margin).
    pub percentile: f64,
    /// Runtimes remembered per workUnits value.
    pub window: u32,
    /// Runtimes a workUnits value needs before its percentile is used (eq. 5 until then).
    pub min_samples: u32,
    /// Smallest margin over the median, as a fraction of it.
    pub floor: f64,
    /// m_m ≥ 1 of eq. 5 (fixed margin).
    pub margin_mult: f64,
    /// m_o of eq. 5 as a fraction of the session's period, in [0, 1): what a job consumes of its
    /// reservation outside its begin and end marks (the wake-up, the sleep, the marks
    /// themselves) and the budget's headroom against noise (the paper tuned 0.041).
    pub margin_offset: f64,
    /// GRUB reclaiming (SCHED_FLAG_RECLAIM): a callback longer than its budget runs on in
    /// bandwidth no other reservation uses instead of waiting for its next period.
    pub reclaim: bool,
    /// A thread whose jobs begin less than 0.9·T apart is behind its period: its budget goes to
    /// its ceiling until it has caught up (`ProactiveConfig::catch_up`).
    pub catch_up: bool,
}

impl Default for ProactiveSettings {
    fn default() -> Self {
        let d = pacer_adapt::controller::PercentileMargin::default();
        ProactiveSettings {
            margin: MarginKind::Fixed,
            percentile: d.p,
            window: d.window,
            min_samples: d.min_samples,
            floor: d.floor,
            margin_mult: pacer_adapt::controller::ProactiveConfig::default().margin_mult,
            margin_offset: 0.0,
            // Measured with `pacer audio` beside SCHED_FIFO noise (docs/experiments/audio-real.md):
            // without reclaiming, a callback a little over its budget waits for its next period
            // and the ones after it start late (0–124 underruns in 30 s); with it, 0–2.
            reclaim: true,
            // Measured neutral beside reclaiming, which already lets a backlog drain
            // (docs/experiments/audio-real.md): available, not the default.
            catch_up: false,
        }
    }
}

impl ProactiveSettings {
    /// The controller's margin mode.
    pub fn mode(&self) -> pacer_adapt::controller::MarginMode {
        use pacer_adapt::controller::{MarginMode, PercentileMargin};
        match self.margin {
            MarginKind::Fixed => MarginMode::Fixed,
            MarginKind::Percentile => MarginMode::Percentile(PercentileMargin {
                p: self.percentile,
                window: self.window,
                min_samples: self.min_samples,
                floor: self.floor,
            }),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            socket: PathBuf::from(DEFAULT_SOCKET),
            socket_mode: "0666".into(),
            bound: None,
            rt_priority: 50,
            idle_timeout: Duration::ZERO,
            default: Limits::default(),
            user: BTreeMap::new(),
            group: BTreeMap::new(),
            proactive: ProactiveSettings::default(),
        }
    }
}

/// Built-in limits of an unprivileged user: half a CPU in at most 4 sessions.
const BUILTIN_BANDWIDTH: f64 = 0.5;
const BUILTIN_SESSIONS: u32 = 4;
const BUILTIN_THREAD_BANDWIDTH: f64 = 0.25;
const BUILTIN_MIN_PERIOD_NS: u64 = 1_000_000;

impl Config {
    /// Parses and checks a configuration file's text; `path` names it in errors.
    pub fn parse(path: &str, text: &str) -> Result<Config, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        cfg.validate(path)?;
        Ok(cfg)
    }

    /// The socket mode as a number.
    pub fn mode(&self) -> Option<u32> {
        u32::from_str_radix(self.socket_mode.trim_start_matches("0o"), 8)
            .ok()
            .filter(|m| *m <= 0o777)
    }

    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let field = |field: &str, message: String| ConfigError::Field {
            path: path.to_string(),
            field: field.to_string(),
            message,
        };
        if self.mode().is_none() {
            return Err(field(
                "socket_mode",
                format!("{:?} is not an octal file mode like \"0666\"", self.socket_mode),
            ));
        }
        if let Some(b) = self.bound {
            if !(b.is_finite() && b > 0.0) {
                return Err(field("bound", format!("{b} must be a positive number of CPUs")));
            }
        }
        if self.rt_priority > 99 {
            return Err(field(
                "rt_priority",
                format!("{} is not in 0..=99", self.rt_priority),
            ));
        }
        let probe = pacer_adapt::controller::ProactiveConfig {
            margin: self.proactive.mode(),
            margin_mult: self.proactive.margin_mult,
            ..Default::default()
        };
        let mo = self.proactive.margin_offset;
        if !(mo.is_finite() && (0.0..1.0).contains(&mo)) {
            return Err(field(
                "proactive.margin_offset",
                format!("{mo} is not a fraction of the period in [0, 1)"),
            ));
        }
        if let Err(e) = probe.validate() {
            return Err(field("proactive", e.to_string()));
        }
        let sections = std::iter::once(("default".to_string(), &self.default))
            .chain(self.user.iter().map(|(k, v)| (format!("user.{k}"), v)))
            .chain(self.group.iter().map(|(k, v)| (format!("group.{k}"), v)));
        for (name, l) in sections {
            if let Some(b) = l.bandwidth {
                if !(b.is_finite() && b >= 0.0) {
                    return Err(field(
                        &format!("{name}.bandwidth"),
                        format!("{b} must be ≥ 0 CPUs"),
                    ));
                }
            }
            if let Some(b) = l.thread_bandwidth {
                if !(b.is_finite() && b > 0.0 && b <= 1.0) {
                    return Err(field(
                        &format!("{name}.thread_bandwidth"),
                        format!("{b} is not in (0, 1]"),
                    ));
                }
            }
            if let Some(p) = l.min_period {
                if p.0 > DEFAULT_PERIOD_MAX.0 {
                    return Err(field(
                        &format!("{name}.min_period"),
                        format!("{p} is longer than the kernel's longest period {DEFAULT_PERIOD_MAX}"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The limits of a peer: its `[user.X]` entry (name or uid), else the most generous of
    /// its groups' entries field by field, else `[default]`; root without an entry is
    /// unlimited (bounded by the daemon's Σ bound and admission control only).
    pub fn quota_for(&self, uid: u32, user_name: Option<&str>, groups: &[(u32, Option<String>)]) -> Quota {
        let by_user = self
            .user
            .get(&uid.to_string())
            .map(|l| (format!("user.{uid}"), l))
            .or_else(|| user_name.and_then(|n| self.user.get(n).map(|l| (format!("user.{n}"), l))));
        let mut chosen: Option<(String, Limits)> = by_user.map(|(s, l)| (s, l.clone()));
        if chosen.is_none() {
            for (gid, name) in groups {
                let entry = self
                    .group
                    .get(&gid.to_string())
                    .map(|l| (format!("group.{gid}"), l))
                    .or_else(|| {
                        name.as_deref()
                            .and_then(|n| self.group.get(n).map(|l| (format!("group.{n}"), l)))
                    });
                if let Some((s, l)) = entry {
                    chosen = Some(match chosen {
                        None => (s, l.clone()),
                        Some((s0, l0)) => (format!("{s0}+{s}"), most_generous(&l0, l)),
                    });
                }
            }
        }
        if chosen.is_none() && uid == 0 {
            return Quota {
                bandwidth: None,
                sessions: None,
                min_period_ns: DEFAULT_PERIOD_MIN.0,
                thread_bandwidth: self.default.thread_bandwidth.unwrap_or(BUILTIN_THREAD_BANDWIDTH),
                same_uid: true,
                boost: true,
                source: "root".into(),
            };
        }
        let (source, l) = chosen.unwrap_or_else(|| ("default".into(), Limits::default()));
        let d = &self.default;
        let bandwidth = l.bandwidth.or(d.bandwidth).unwrap_or(BUILTIN_BANDWIDTH);
        Quota {
            bandwidth: Some(bandwidth),
            sessions: Some(l.sessions.or(d.sessions).unwrap_or(BUILTIN_SESSIONS)),
            min_period_ns: l
                .min_period
                .or(d.min_period)
                .map_or(BUILTIN_MIN_PERIOD_NS, |p| p.0)
                .max(DEFAULT_PERIOD_MIN.0),
            thread_bandwidth: l
                .thread_bandwidth
                .or(d.thread_bandwidth)
                .unwrap_or(BUILTIN_THREAD_BANDWIDTH),
            same_uid: l.same_uid.or(d.same_uid).unwrap_or(false),
            boost: l.boost.or(d.boost).unwrap_or(true),
            source,
        }
    }
}

fn most_generous(a: &Limits, b: &Limits) -> Limits {
    fn max<T: PartialOrd + Copy>(x: Option<T>, y: Option<T>) -> Option<T> {
        match (x, y) {
            (Some(x), Some(y)) => Some(if y > x { y } else { x }),
            (x, y) => x.or(y),
        }
    }
    Limits {
        bandwidth: max(a.bandwidth, b.bandwidth),
        sessions: max(a.sessions, b.sessions),
        min_period: match (a.min_period, b.min_period) {
            (Some(x), Some(y)) => Some(Duration(x.0.min(y.0))),
            (x, y) => x.or(y),
        },
        thread_bandwidth: max(a.thread_bandwidth, b.thread_bandwidth),
        same_uid: max(a.same_uid, b.same_uid),
        boost: max(a.boost, b.boost),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_parses() {
        let text = r#"
socket = "/run/pacer/pacer.sock"
socket_mode = "0660"
bound = 1.5
rt_priority = 40
idle_timeout = "2s"

[default]
bandwidth = 0.3
sessions = 2
min_period = "2ms"

[user.alice]
bandwidth = 1.0
same_uid = true

[group.audio]
bandwidth = 0.8
sessions = 8
"#;
        let c = Config::parse("t.toml", text).unwrap();
        assert_eq!(c.mode(), Some(0o660));
        let q = c.quota_for(1000, Some("alice"), &[]);
        assert_eq!((q.bandwidth, q.sessions, q.same_uid), (Some(1.0), Some(2), true));
        assert_eq!(q.source, "user.alice");
        let q = c.quota_for(1001, Some("bob"), &[(29, Some("audio".into()))]);
        assert_eq!(
            (q.bandwidth, q.sessions, q.min_period_ns),
            (Some(0.8), Some(8), 2_000_000)
        );
        let q = c.quota_for(1002, None, &[]);
        assert_eq!((q.bandwidth, q.source.as_str()), (Some(0.3), "default"));
        assert_eq!(c.quota_for(0, Some("root"), &[]).bandwidth, None);
    }

    #[test]
    fn errors_name_the_file_and_field() {
        let e = Config::parse("d.toml", "[default]\nthread_bandwidth = 1.5\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "d.toml: default.thread_bandwidth: 1.5 is not in (0, 1]"
        );
        let e = Config::parse("d.toml", "[default]\nmin_period = 5\n").unwrap_err();
        assert!(e.to_string().contains("has no unit"), "{e}");
        let e = Config::parse("d.toml", "sokcet = \"x\"\n").unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
        let e = Config::parse("d.toml", "socket_mode = \"rw\"\n").unwrap_err();
        assert!(e.to_string().contains("socket_mode"), "{e}");
    }

    #[test]
    fn the_proactive_section_chooses_the_budget_rule() {
        use pacer_adapt::controller::MarginMode;
        let d = Config::parse("d.toml", "").unwrap();
        assert_eq!(d.proactive.mode(), MarginMode::Fixed);
        assert!(d.proactive.reclaim, "GRUB reclaiming by default");
        assert!(!d.proactive.catch_up);
        let c = Config::parse(
            "d.toml",
            "[proactive]\nmargin = \"percentile\"\npercentile = 0.95\nreclaim = false\nmargin_offset = 0.041\n",
        )
        .unwrap();
        match c.proactive.mode() {
            MarginMode::Percentile(m) => assert_eq!(m.p, 0.95),
            m => panic!("{m:?}"),
        }
        assert!(!c.proactive.reclaim);
        for (text, field) in [
            ("[proactive]\nmargin = \"guess\"\n", "unknown variant"),
            ("[proactive]\nmargin_offset = 1.5\n", "proactive.margin_offset"),
            ("[proactive]\nmargin_mult = 0.5\n", "proactive"),
            (
                "[proactive]\nmargin = \"percentile\"\npercentile = 2.0\n",
                "proactive",
            ),
        ] {
            let e = Config::parse("d.toml", text).unwrap_err().to_string();
            assert!(e.starts_with("d.toml") && e.contains(field), "{text}: {e}");
        }
    }
}
