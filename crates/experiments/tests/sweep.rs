//! The experiment pipeline end to end on small sweeps: shards merge to the tables of one run,
//! an interrupted experiment recomputes only what is missing, directories of other experiments
//! are refused, the report is well-formed with data in every plot, and the metrics of a tiny set
//! are the ones worked out by hand.

use pacer_experiments::sweep::aggregate::{render_csv, render_json, render_text};
use pacer_experiments::sweep::execute::Progress;
use pacer_experiments::sweep::runner::RunRequest;
use pacer_experiments::sweep::spec::{Configuration, Sched, Scope};
use pacer_experiments::sweep::{
    aggregate, collect, matrix, report, run, Bins, RunError, Runner, Shard, SimRunner, Spec, Store,
    StoreError,
};
use pacer_model::{Duration, Task, TaskSet};

const SPEC: &str = r#"
name = "tiny"
seed = 3
cpus = 4
duration = "300ms"
sets = 2
[generator]
recipe = "rm-vs-edf"
x = [2]
r = [0.6, 0.8]
"#;

fn spec() -> Spec {
    Spec::from_toml(SPEC, "tiny.toml").unwrap()
}

fn quiet(_: Progress) {}

fn tables(spec: &Spec, stores: &[Store]) -> (String, String, String) {
    let (recs, missing) = collect(spec, stores, &matrix(spec));
    assert!(missing.is_empty(), "missing {missing:?}");
    let a = aggregate(spec, &recs);
    (render_text(&a), render_json(&a), render_csv(&recs))
}

#[test]
fn shards_merge_to_the_tables_of_one_run() {
    let spec = spec();
    let tmp = tempfile::tempdir().unwrap();
    let whole = Store::create(&tmp.path().join("whole"), &spec).unwrap();
    let o = run(&spec, &whole, &[&SimRunner::default()], None, &quiet).unwrap();
    assert_eq!(o.ran.len(), 24);
    assert!(o.failed.is_empty());

    let mut shards = Vec::new();
    let mut ran = 0;
    for k in 1..=3 {
        let s = Store::create(&tmp.path().join(format!("shard{k}")), &spec).unwrap();
        let o = run(
            &spec,
            &s,
            &[&SimRunner::default()],
            Some(Shard { k, n: 3 }),
            &quiet,
        )
        .unwrap();
        ran += o.ran.len();
        // A shard alone is incomplete and says so.
        let (recs, missing) = collect(&spec, std::slice::from_ref(&s), &matrix(&spec));
        assert!(!missing.is_empty());
        assert!(render_text(&aggregate(&spec, &recs)).contains("incomplete"));
        shards.push(s);
    }
    assert_eq!(ran, 24, "the shards partition the matrix");
    let one = tables(&spec, std::slice::from_ref(&whole));
    let merged = tables(&spec, &shards);
    assert_eq!(one.0, merged.0);
    assert_eq!(one.1, merged.1);
    assert_eq!(one.2, merged.2);
    assert!(one.1.contains("\"schema\": \"pacer.experiment/1\""));
    assert!(one.1.contains("\"seed\": 3"));
}

#[test]
fn resume_recomputes_only_the_deleted_runs() {
    let spec = spec();
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::create(tmp.path(), &spec).unwrap();
    run(&spec, &store, &[&SimRunner::default()], None, &quiet).unwrap();
    let before = tables(&spec, std::slice::from_ref(&store));
    let keys = matrix(&spec);
    let deleted = [keys[1], keys[7], keys[20]];
    for k in &deleted {
        std::fs::remove_file(tmp.path().join("runs").join(k.file_name(&spec))).unwrap();
    }
    // A torn file (as a crash mid-write of a non-atomic writer would leave) counts as not done.
    let torn = keys[11];
    std::fs::write(
        tmp.path().join("runs").join(torn.file_name(&spec)),
        b"{\"schema\":",
    )
    .unwrap();
    let o = run(&spec, &store, &[&SimRunner::default()], None, &quiet).unwrap();
    let mut expect = deleted.to_vec();
    expect.push(torn);
    expect.sort();
    assert_eq!(o.ran, expect);
    assert_eq!(o.cached, keys.len() - 4);
    // Runs are deterministic, so the recomputed tables are the same.
    assert_eq!(before, tables(&spec, std::slice::from_ref(&store)));
}

#[test]
fn a_directory_of_another_experiment_is_refused() {
    let spec = spec();
    let tmp = tempfile::tempdir().unwrap();
    Store::create(tmp.path(), &spec).unwrap();
    let other = Spec::from_toml(&SPEC.replace("seed = 3", "seed = 4"), "other.toml").unwrap();
    let e = Store::create(tmp.path(), &other).unwrap_err();
    assert!(matches!(e, StoreError::OtherExperiment { .. }), "{e}");
    assert!(e.to_string().contains("different experiment"));
    // Same spec: reopened for resuming.
    Store::create(tmp.path(), &spec).unwrap();
}

/// A backend that cannot run here (the linux one without root, say).
struct Unavailable;

impl Runner for Unavailable {
    fn backend(&self) -> pacer_experiments::sweep::Backend {
        pacer_experiments::sweep::Backend::Linux
    }
    fn parallel(&self) -> bool {
        false
    }
    fn available(&self) -> Result<(), RunError> {
        Err(RunError::Setup("needs root".into()))
    }
    fn run(&self, _req: &RunRequest<'_>) -> Result<pacer_experiments::sweep::metrics::RunOutput, RunError> {
        panic!("an unavailable backend must not be asked to run")
    }
}

#[test]
fn an_unavailable_backend_stops_the_experiment_before_anything_runs() {
    let spec = Spec::from_toml(
        &SPEC.replace("sets = 2", "sets = 1\nbackends = [\"sim\", \"linux\"]"),
        "t.toml",
    )
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::create(tmp.path(), &spec).unwrap();
    let e = run(
        &spec,
        &store,
        &[&SimRunner::default(), &Unavailable],
        None,
        &quiet,
    )
    .unwrap_err();
    assert!(e.to_string().contains("needs root"), "{e}");
    assert_eq!(std::fs::read_dir(tmp.path().join("runs")).unwrap().count(), 0);
}

#[test]
fn the_report_is_well_formed_and_every_plot_has_data() {
    let spec = spec();
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::create(tmp.path(), &spec).unwrap();
    run(&spec, &store, &[&SimRunner::default()], None, &quiet).unwrap();
    let (recs, _) = collect(&spec, std::slice::from_ref(&store), &matrix(&spec));
    let a = aggregate(&spec, &recs);
    let html = report::build(&a, "pacer experiment tiny.toml").unwrap().to_html();
    let x = pacer_testkit::html::xhtml(&html);
    let doc = roxmltree::Document::parse(&x).unwrap_or_else(|e| panic!("report is not well-formed: {e}"));
    let svgs: Vec<_> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "svg")
        .collect();
    // 5 metrics × 2 utilisations of error bars, 2 CDFs of all tasks, 2 of extreme periods.
    assert_eq!(svgs.len(), 5 * 2 + 2 + 2, "{} plots", svgs.len());
    for svg in svgs {
        let data = svg
            .descendants()
            .filter(|n| {
                (n.tag_name().name() == "polyline" && n.attribute("points").is_some_and(|p| p.contains(' ')))
                    || (n.tag_name().name() == "path"
                        && n.attribute("d")
                            .is_some_and(|d| d.contains("h0") || d.contains('V')))
            })
            .count();
        assert!(data > 0, "a plot without data: {:?}", svg.attribute("aria-label"));
    }
    assert!(html.contains("Cache misses (L1D, L2; Tables 3 and 5): unavailable"));
    assert!(html.contains("G-EDF") && html.contains("P-RM"));
    assert!(!html.contains("NaN"));
}

fn task(name: &str, c_ms: u64, t_ms: u64) -> Task {
    Task::implicit(name, Duration::from_ms(c_ms), Duration::from_ms(t_ms))
}

/// Two tasks on one CPU, (C, T) = (2, 10) ms and (3, 20) ms, for 19 ms: under EDF and RM alike
/// the schedule is t0 [0, 2), t1 [2, 5), t0 [10, 12). Laxities (10 − 2)/10 = 0.8 (twice) and
/// (20 − 5)/20 = 0.75; the set's laxity is (0.8 + 0.75)/2; U = 2/10 + 3/20 = 0.35 on one CPU;
/// 3 switches / 2 tasks / 0.019 s; no migrations; cache misses unknown.
#[test]
fn metrics_of_a_tiny_set_match_the_hand_computed_schedule() {
    let set = TaskSet::new(vec![task("t0", 2, 10), task("t1", 3, 20)]);
    let placement = Bins {
        cpus: vec![vec![0]],
        bin_of: vec![0, 0],
    };
    for sched in [Sched::Edf, Sched::Rm] {
        let req = RunRequest {
            set: &set,
            config: Configuration::new(Scope::Partitioned, sched),
            cpus: 1,
            placement: &placement,
            duration_ns: Duration::from_ms(19).ns(),
            seed: 1,
            wss_bytes: None,
            reclaim: false,
            work: 1.0,
        };
        let out = SimRunner::default().run(&req).unwrap();
        let t = &out.tasks;
        assert_eq!((t[0].jobs, t[1].jobs), (2, 1));
        assert!((t[0].normalised_laxity.unwrap() - 0.8).abs() < 1e-12);
        assert!((t[1].normalised_laxity.unwrap() - 0.75).abs() < 1e-12);
        assert_eq!(t[0].context_switches + t[1].context_switches, 3);
        assert_eq!(t[0].l1d_miss_rate, None);
        let m = pacer_experiments::sweep::metrics::RunMetrics::of(t, out.duration_ns, 1);
        assert!((m.normalised_laxity.unwrap() - 0.775).abs() < 1e-12);
        assert!((m.utilisation_per_cpu.unwrap() - 0.35).abs() < 1e-12);
        assert!((m.context_switch_rate - 3.0 / 2.0 / 0.019).abs() < 1e-9);
        assert_eq!(m.migration_rate, 0.0);
        assert_eq!(m.misses, 0);
        assert_eq!((m.l1d_miss_rate, m.l2_miss_rate), (None, None));
        assert_eq!(out.laxity.all.jobs, 3);
        assert_eq!(out.laxity.min_period.jobs, 2);
        assert_eq!(out.laxity.max_period.jobs, 1);
        assert_eq!(out.laxity.all.negative, 0);
    }
}
