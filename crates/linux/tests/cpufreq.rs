//! Tests of `pacer_linux::cpufreq` against a fake big.LITTLE-like sysfs tree, plus what the real
//! sysfs root of this machine reports.

use std::fs;
use std::path::Path;

use pacer_adapt::KernelError;
use pacer_linux::cpufreq::CpuFreq;
use pacer_linux::sched::LinuxError;

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// policy0: 4 LITTLE CPUs under schedutil; policy4: 4 big CPUs under userspace.
fn fake_tree(root: &Path) {
    let p0 = root.join("cpufreq/policy0");
    write(&p0.join("related_cpus"), "0 1 2 3\n");
    write(&p0.join("affected_cpus"), "0 1 2 3\n");
    write(
        &p0.join("scaling_available_frequencies"),
        "300000 576000 1017600 1420800 1804800 \n",
    );
    write(&p0.join("scaling_cur_freq"), "1017600\n");
    write(&p0.join("scaling_min_freq"), "300000\n");
    write(&p0.join("scaling_max_freq"), "1804800\n");
    write(&p0.join("scaling_governor"), "schedutil\n");
    write(&p0.join("scaling_setspeed"), "<unsupported>\n");
    let p4 = root.join("cpufreq/policy4");
    write(&p4.join("related_cpus"), "4 5 6 7\n");
    write(
        &p4.join("scaling_available_frequencies"),
        "2419200 710400 1113600 1497600\n",
    );
    write(&p4.join("scaling_cur_freq"), "710400\n");
    write(&p4.join("scaling_min_freq"), "710400\n");
    write(&p4.join("scaling_max_freq"), "2419200\n");
    write(&p4.join("scaling_governor"), "userspace\n");
    write(&p4.join("scaling_setspeed"), "710400\n");
    // Per-CPU directories and other entries must not be mistaken for policies.
    fs::create_dir_all(root.join("cpufreq/boost")).unwrap();
    fs::create_dir_all(root.join("cpu0")).unwrap();
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap().trim().to_string()
}

#[test]
fn lists_fake_policies() {
    let dir = tempfile::tempdir().unwrap();
    fake_tree(dir.path());
    let cf = CpuFreq::new(dir.path());
    let ps = cf.policies().unwrap();
    assert_eq!(ps.iter().map(|p| p.id).collect::<Vec<_>>(), vec![0, 4]);
    assert_eq!(ps[0].related_cpus, vec![0, 1, 2, 3]);
    assert_eq!(ps[1].related_cpus, vec![4, 5, 6, 7]);
    assert_eq!(ps[0].governor, "schedutil");
    assert_eq!(
        (ps[0].cur_khz, ps[0].min_khz, ps[0].max_khz),
        (1_017_600, 300_000, 1_804_800)
    );
    // Sorted ascending even when the file is not.
    assert_eq!(
        ps[1].available_khz,
        Some(vec![710_400, 1_113_600, 1_497_600, 2_419_200])
    );
    assert_eq!(ps[1].freq_state().cur_khz, 710_400);
    assert_eq!(ps[1].freq_state().available_khz.len(), 4);
    assert_eq!(cf.policy_of_cpu(6).unwrap().id, 4);
    assert_eq!(cf.policy_of_cpu(2).unwrap().id, 0);
    assert!(matches!(cf.policy_of_cpu(8), Err(LinuxError::InvalidInput(_))));
    assert_eq!(cf.cur_khz(0).unwrap(), 1_017_600);
}

#[test]
fn floor_and_target() {
    let dir = tempfile::tempdir().unwrap();
    fake_tree(dir.path());
    let cf = CpuFreq::new(dir.path());
    let p0 = dir.path().join("cpufreq/policy0");
    let p4 = dir.path().join("cpufreq/policy4");

    cf.set_floor(0, 576_000).unwrap();
    assert_eq!(read(&p0.join("scaling_min_freq")), "576000");
    assert_eq!(cf.policy(0).unwrap().min_khz, 576_000);
    // Not in the frequency table.
    assert!(matches!(
        cf.set_floor(0, 600_000),
        Err(LinuxError::InvalidInput(_))
    ));

    // schedutil ignores scaling_setspeed: refused, file untouched.
    let e = cf.set_target(0, 1_420_800).unwrap_err();
    assert!(matches!(e, LinuxError::Unsupported(_)), "{e}");
    assert!(matches!(KernelError::from(e), KernelError::Unsupported(_)));
    assert_eq!(read(&p0.join("scaling_setspeed")), "<unsupported>");

    cf.set_target(4, 1_497_600).unwrap();
    assert_eq!(read(&p4.join("scaling_setspeed")), "1497600");
    assert!(matches!(
        cf.set_target(4, 1_000_000),
        Err(LinuxError::InvalidInput(_))
    ));
    assert!(cf.set_floor(9, 576_000).is_err());
}

#[test]
fn no_frequency_table_uses_limits() {
    let dir = tempfile::tempdir().unwrap();
    fake_tree(dir.path());
    fs::remove_file(dir.path().join("cpufreq/policy0/scaling_available_frequencies")).unwrap();
    let cf = CpuFreq::new(dir.path());
    let p = cf.policy(0).unwrap();
    assert_eq!(p.available_khz, None);
    assert_eq!(p.freq_state().available_khz, vec![300_000, 1_804_800]);
    // Without a table any value within the limits may be requested as a floor.
    cf.set_floor(0, 600_000).unwrap();
    assert!(matches!(
        cf.set_floor(0, 2_000_000),
        Err(LinuxError::InvalidInput(_))
    ));
}

#[test]
fn malformed_files_name_the_file() {
    let cases = [
        ("scaling_cur_freq", "fast\n"),
        ("scaling_min_freq", "\n"),
        ("scaling_max_freq", "-1\n"),
        ("related_cpus", "0 x 2\n"),
        ("related_cpus", "\n"),
        ("scaling_available_frequencies", "300000 lots\n"),
        ("scaling_governor", "\n"),
    ];
    for (file, content) in cases {
        let dir = tempfile::tempdir().unwrap();
        fake_tree(dir.path());
        write(&dir.path().join("cpufreq/policy4").join(file), content);
        let cf = CpuFreq::new(dir.path());
        let e = cf.policies().unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, LinuxError::Parse { .. }), "{file}: {msg}");
        assert!(msg.contains(&format!("policy4/{file}")), "{file}: {msg}");
        assert!(cf.policy(0).is_ok(), "{file}: policy0 should still read");
    }
    // A missing mandatory file is an I/O error naming it.
    let dir = tempfile::tempdir().unwrap();
    fake_tree(dir.path());
    fs::remove_file(dir.path().join("cpufreq/policy4/scaling_cur_freq")).unwrap();
    let e = CpuFreq::new(dir.path()).policy(4).unwrap_err();
    assert!(
        matches!(e, LinuxError::Io { .. }) && e.to_string().contains("policy4/scaling_cur_freq"),
        "{e}"
    );
}

#[test]
fn no_cpufreq_is_unsupported() {
    let dir = tempfile::tempdir().unwrap();
    let cf = CpuFreq::new(dir.path());
    assert!(matches!(cf.policies(), Err(LinuxError::Unsupported(_))));
    assert!(matches!(cf.cur_khz(0), Err(LinuxError::Unsupported(_))));
    // An empty cpufreq directory (as on this VM) too.
    fs::create_dir_all(dir.path().join("cpufreq")).unwrap();
    let e = cf.policies().unwrap_err();
    assert!(matches!(e, LinuxError::Unsupported(_)), "{e}");
    assert!(matches!(KernelError::from(e), KernelError::Unsupported(_)));
}

#[test]
fn real_sysfs_root() {
    match CpuFreq::system().policies() {
        Ok(ps) => {
            assert!(!ps.is_empty());
            for p in &ps {
                eprintln!(
                    "real_sysfs_root: policy{} cpus {:?} governor {} cur {} kHz [{}, {}] available {:?}",
                    p.id, p.related_cpus, p.governor, p.cur_khz, p.min_khz, p.max_khz, p.available_khz
                );
            }
        }
        Err(LinuxError::Unsupported(why)) => eprintln!("real_sysfs_root: Unsupported: {why}"),
        Err(e) => panic!("real cpufreq tree unreadable: {e}"),
    }
}
