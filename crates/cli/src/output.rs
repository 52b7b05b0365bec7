//! Output files, one way for every command (docs/output-files.md): a careless command line must
//! not destroy data. Each command declares what it reads and what it writes before it starts
//! working; what is written goes to temporary files beside the targets, renamed over them only
//! once the command has succeeded, all together.
//!
//! What [`Outputs`] refuses, before anything is written:
//! - an output that is the same file as an input or as another output (canonical paths, and
//!   device and inode of existing files, so `./x` vs `x`, symbolic and hard links are caught);
//! - an output that exists and is not a regular file (device, FIFO, socket, directory): pacer
//!   would replace the node. Writing into a stream is asked for by naming it as one: `-`
//!   (standard output, where the command does not print its report there), `/dev/stdout`,
//!   `/dev/stderr`, `/dev/fd/N` (`--jobs /dev/fd/3 3>fifo`: the shell opens the FIFO or device),
//!   and `/dev/null`, which discards;
//! - an existing file whose owner a replacement could not keep.
//!
//! A symbolic link is followed: its target is replaced and the link kept (a note on standard error
//! says so). A replaced file keeps its mode and owner. Until the command succeeds the data is in
//! `.NAME.pacer-tmp-PID` beside the target; it is removed on an error, a panic, or SIGINT/SIGTERM/
//! SIGHUP, and stays only after SIGKILL or a crash, with whatever was flushed to it.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use pacer_linux::signals::{keep_on_termination, remove_on_termination};

/// Streaming writers push their rows to the temporary file at least this often, so that a
/// SIGKILL loses at most about a second of rows.
pub const FLUSH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(500);

/// Whether the command prints its own report on standard output (then `-` cannot name an output).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Stdout {
    Free,
    Busy,
}

/// An output declared with [`Outputs::file`], to open or write later.
#[derive(Clone, Copy, Debug)]
pub struct Slot(usize);

/// Where an output's bytes go.
#[derive(Debug)]
enum Dest {
    /// A regular file (existing or not) replaced by renaming a temporary file over it.
    File {
        /// Canonical path, symbolic links followed.
        target: PathBuf,
        /// Whether it existed when opened (a note then says "replaced", else "created").
        existing: bool,
        via_link: bool,
        temp: Option<PathBuf>,
        /// The replaced file's permission bits, given to the temporary file once it is complete
        /// (a read-only mode would keep pacer from syncing it).
        mode: Option<u32>,
    },
    /// An open descriptor the user named (`-`, /dev/stdout, /dev/fd/N): written as the command
    /// goes, never replaced.
    Stream {
        fd: i32,
    },
    Null,
}

#[derive(Debug)]
struct Output {
    flag: String,
    given: PathBuf,
    dest: Dest,
    /// Device and inode of the file behind it, if it is an existing regular file.
    id: Option<(u64, u64)>,
}

#[derive(Debug)]
struct Input {
    given: PathBuf,
    canonical: PathBuf,
    id: (u64, u64),
}

/// The files of one command run: inputs, outputs, and the temporary files to commit together.
/// Dropped without [`Outputs::commit`] (an error or a panic), it removes every temporary file
/// and every directory it created.
#[derive(Debug)]
pub struct Outputs {
    stdout: Stdout,
    inputs: Vec<Input>,
    outputs: Vec<Output>,
    created_dirs: Vec<PathBuf>,
}

impl Outputs {
    pub fn new(stdout: Stdout) -> Outputs {
        Outputs {
            stdout,
            inputs: Vec::new(),
            outputs: Vec::new(),
            created_dirs: Vec::new(),
        }
    }

    /// Declares a file the command reads. Declare inputs before outputs: each output is checked
    /// against what is declared when it is. `-` (standard input) and files that cannot be read
    /// are skipped (reading them fails with its own message).
    pub fn input(&mut self, path: &Path) {
        if path.as_os_str() == "-" {
            return;
        }
        if let (Ok(canonical), Ok(m)) = (fs::canonicalize(path), fs::metadata(path)) {
            self.inputs.push(Input {
                given: path.to_path_buf(),
                canonical,
                id: (m.dev(), m.ino()),
            });
        }
    }

    /// Declares an output file given by `flag` and checks it against the inputs and outputs
    /// declared so far; nothing is created yet.
    pub fn file(&mut self, flag: &str, path: &Path) -> Result<Slot> {
        let (dest, id) = self.classify(flag, path)?;
        let name = |p: &Path| format!("{flag} {}", p.display());
        let same = |dest_b: &Dest, id_b: Option<(u64, u64)>| match (&dest, dest_b) {
            (Dest::File { target: a, .. }, Dest::File { target: b, .. }) => {
                a == b || (id.is_some() && id == id_b)
            }
            (Dest::Stream { fd: a }, Dest::Stream { fd: b }) => a == b || (id.is_some() && id == id_b),
            (Dest::Null, _) | (_, Dest::Null) => false,
            _ => id.is_some() && id == id_b,
        };
        for i in &self.inputs {
            let same_path = matches!(&dest, Dest::File { target, .. } if *target == i.canonical);
            if same_path || id == Some(i.id) {
                bail!(
                    "{}: the same file as the input {}; writing it would destroy what pacer reads \
                     (choose another output path)",
                    name(path),
                    i.given.display()
                );
            }
        }
        for o in &self.outputs {
            if same(&o.dest, o.id) {
                bail!(
                    "{}: the same file as {} {}; two outputs cannot share a file",
                    name(path),
                    o.flag,
                    o.given.display()
                );
            }
        }
        self.outputs.push(Output {
            flag: flag.to_string(),
            given: path.to_path_buf(),
            dest,
            id,
        });
        Ok(Slot(self.outputs.len() - 1))
    }

    /// Declares an output directory (`--csv DIR`, `gen -o DIR`): an existing directory, or with
    /// `create`, a missing one that is created now and removed again if the command fails.
    /// Returns its canonical path.
    pub fn dir(&mut self, flag: &str, path: &Path, create: bool) -> Result<PathBuf> {
        let shown = || format!("{flag} {}", path.display());
        match fs::metadata(path) {
            Ok(m) if m.is_dir() => {}
            Ok(m) => bail!("{}: {}, not a directory", shown(), describe(&m)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
                let mut missing = Vec::new();
                let mut p = path;
                while !p.as_os_str().is_empty() && fs::symlink_metadata(p).is_err() {
                    missing.push(p.to_path_buf());
                    p = p.parent().unwrap_or(Path::new(""));
                }
                for d in missing.into_iter().rev() {
                    fs::create_dir(&d).with_context(|| {
                        format!("{}: cannot create the directory {}", shown(), d.display())
                    })?;
                    remove_on_termination(&d, true);
                    self.created_dirs.push(d);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bail!(
                    "{}: not a directory (it does not exist; create it first)",
                    shown()
                )
            }
            Err(e) => return Err(anyhow!(e).context(shown())),
        }
        fs::canonicalize(path).with_context(shown)
    }

    /// Opens a declared output for writing: a new temporary file beside a file target (with the
    /// target's mode and owner if it exists), or the stream itself.
    pub fn open(&mut self, slot: Slot) -> Result<File> {
        let o = &mut self.outputs[slot.0];
        let shown = format!("{} {}", o.flag, o.given.display());
        match &mut o.dest {
            Dest::Null => OpenOptions::new()
                .write(true)
                .open("/dev/null")
                .with_context(|| shown.clone()),
            Dest::Stream { fd: 1 } => Ok(File::from(std::io::stdout().as_fd().try_clone_to_owned()?)),
            Dest::Stream { fd: 2 } => Ok(File::from(std::io::stderr().as_fd().try_clone_to_owned()?)),
            // Append, so a descriptor the shell opened with `>>` is not overwritten from its start.
            Dest::Stream { fd } => OpenOptions::new()
                .append(true)
                .open(format!("/proc/self/fd/{fd}"))
                .with_context(|| format!("{shown}: cannot open descriptor {fd}")),
            Dest::File {
                target,
                existing,
                temp,
                mode,
                ..
            } => {
                if temp.is_some() {
                    bail!("{shown}: opened twice");
                }
                // Looked at again: what matters is the file being replaced now.
                let old = fs::metadata(target.as_path()).ok().filter(|m| m.is_file());
                *existing = old.is_some();
                let (path, file) = create_temp(target.as_path(), *existing)
                    .with_context(|| format!("{shown}: cannot create a temporary file beside it"))?;
                remove_on_termination(&path, false);
                *temp = Some(path);
                if let Some(m) = &old {
                    *mode = Some(m.mode() & 0o7777);
                    keep_owner(&file, m).with_context(|| {
                        format!(
                            "{shown}: a replacement cannot keep the file's owner (uid {}, gid {}); \
                             pacer replaces outputs by renaming a new file over them (remove the \
                             file first, or write elsewhere)",
                            m.uid(),
                            m.gid()
                        )
                    })?;
                }
                Ok(file)
            }
        }
    }

    /// Writes a whole output at once (see [`Outputs::open`]).
    pub fn write(&mut self, slot: Slot, bytes: &[u8]) -> Result<()> {
        let mut f = self.open(slot)?;
        let o = &self.outputs[slot.0];
        f.write_all(bytes)
            .with_context(|| format!("{} {}: writing", o.flag, o.given.display()))
    }

    /// The command succeeded: every temporary file is synced to disk, then renamed over its
    /// target, one after the other with nothing left to fail in between but the renames.
    pub fn commit(mut self) -> Result<()> {
        for o in &self.outputs {
            if let Dest::File {
                target,
                temp: Some(temp),
                mode,
                ..
            } = &o.dest
            {
                let shown = format!("{} {}", o.flag, o.given.display());
                File::open(temp)
                    .and_then(|f| f.sync_all())
                    .and_then(|()| match mode {
                        Some(m) => fs::set_permissions(temp, fs::Permissions::from_mode(*m)),
                        None => Ok(()),
                    })
                    .with_context(|| format!("{shown}: writing {}", temp.display()))?;
                if let Ok(m) = fs::symlink_metadata(target) {
                    if !m.is_file() {
                        bail!(
                            "{shown}: {} has become {} since pacer started; not replaced (the output is in {})",
                            target.display(),
                            describe(&m),
                            temp.display()
                        );
                    }
                }
            }
        }
        let mut dirs: Vec<PathBuf> = Vec::new();
        for o in &mut self.outputs {
            if let Dest::File {
                target,
                temp,
                via_link,
                existing,
                ..
            } = &mut o.dest
            {
                let Some(t) = temp.take() else { continue };
                if let Err(e) = fs::rename(&t, &*target) {
                    *temp = Some(t);
                    return Err(anyhow!(e).context(format!(
                        "{} {}: cannot rename the finished output over {}",
                        o.flag,
                        o.given.display(),
                        target.display()
                    )));
                }
                keep_on_termination(&t);
                if *via_link {
                    eprintln!(
                        "pacer: {} {} is a symbolic link: {} its target {}",
                        o.flag,
                        o.given.display(),
                        if *existing { "replaced" } else { "created" },
                        target.display()
                    );
                }
                if let Some(d) = target.parent() {
                    if !dirs.iter().any(|x| x == d) {
                        dirs.push(d.to_path_buf());
                    }
                }
            }
        }
        // The renames themselves reach the disk with their directories; a failure here loses
        // nothing that is not already in place, so it is not an error.
        for d in dirs {
            let _ = File::open(&d).and_then(|f| f.sync_all());
        }
        for d in self.created_dirs.drain(..) {
            keep_on_termination(&d);
        }
        Ok(())
    }

    /// What an output path names, or why it cannot be one.
    fn classify(&self, flag: &str, path: &Path) -> Result<(Dest, Option<(u64, u64)>)> {
        let shown = || format!("{flag} {}", path.display());
        if let Some(fd) = stream_fd(path) {
            if fd == 1 && self.stdout == Stdout::Busy {
                bail!(
                    "{}: standard output carries this command's report; give a file name, or \
                     another descriptor (`{flag} /dev/fd/3 3>&1` if the two may mix)",
                    shown()
                );
            }
            let m = fs::metadata(format!("/proc/self/fd/{fd}"))
                .map_err(|_| anyhow!("{}: descriptor {fd} is not open", shown()))?;
            let id = m.is_file().then(|| (m.dev(), m.ino()));
            return Ok((Dest::Stream { fd }, id));
        }
        if path.as_os_str().is_empty() || path.as_os_str().as_encoded_bytes().ends_with(b"/") {
            bail!("{}: expected a file name", shown());
        }
        let (target, via_link) = resolve(path).with_context(shown)?;
        match fs::metadata(&target) {
            Ok(m) if m.is_file() => {
                let id = Some((m.dev(), m.ino()));
                Ok((
                    Dest::File {
                        target,
                        existing: true,
                        via_link,
                        temp: None,
                        mode: None,
                    },
                    id,
                ))
            }
            Ok(m) if target == Path::new("/dev/null") && m.file_type().is_char_device() => {
                Ok((Dest::Null, None))
            }
            Ok(m) if m.is_dir() => bail!("{}: a directory; expected a file name", shown()),
            Ok(m) => bail!(
                "{}: {}, not a regular file; pacer replaces output files and leaves devices, FIFOs \
                 and sockets alone (to write into it anyway, let the shell open it: \
                 `{flag} /dev/fd/3 3>{}`)",
                shown(),
                describe(&m),
                path.display()
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((
                Dest::File {
                    target,
                    existing: false,
                    via_link,
                    temp: None,
                    mode: None,
                },
                None,
            )),
            Err(e) => Err(anyhow!(e).context(shown())),
        }
    }
}

impl Drop for Outputs {
    fn drop(&mut self) {
        for o in &mut self.outputs {
            if let Dest::File { temp, .. } = &mut o.dest {
                if let Some(t) = temp.take() {
                    let _ = fs::remove_file(&t);
                    keep_on_termination(&t);
                }
            }
        }
        // Newest first, so a parent is empty when its turn comes; a directory someone else
        // filled in the meantime stays.
        for d in self.created_dirs.drain(..).rev() {
            let _ = fs::remove_dir(&d);
            keep_on_termination(&d);
        }
    }
}

/// Paces the flushes of a streaming writer (see [`FLUSH_INTERVAL`]).
pub struct FlushClock {
    last: Instant,
}

impl FlushClock {
    pub fn new() -> FlushClock {
        FlushClock { last: Instant::now() }
    }

    /// Whether a flush is due (then the next one is due an interval from now).
    pub fn due(&mut self) -> bool {
        let now = Instant::now();
        if now.duration_since(self.last) >= FLUSH_INTERVAL {
            self.last = now;
            return true;
        }
        false
    }
}

/// The descriptor a path names as a stream: `-`, /dev/stdout, /dev/stderr, /dev/fd/N,
/// /proc/self/fd/N. These are matched by name, because opening them as files would reach
/// whatever the descriptor points to (a file the shell opened with `>` would be replaced).
fn stream_fd(path: &Path) -> Option<i32> {
    let s = path.to_str()?;
    match s {
        "-" | "/dev/stdout" => Some(1),
        "/dev/stderr" => Some(2),
        _ => s
            .strip_prefix("/dev/fd/")
            .or_else(|| s.strip_prefix("/proc/self/fd/"))
            .and_then(|n| n.parse().ok())
            .filter(|&n: &i32| n >= 0),
    }
}

/// The file a path finally names, symbolic links followed (the final target may not exist yet),
/// with its directory canonical; and whether a link was followed.
fn resolve(path: &Path) -> Result<(PathBuf, bool)> {
    let mut p = std::path::absolute(path)?;
    let mut via_link = false;
    for _ in 0..40 {
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                via_link = true;
                let to = fs::read_link(&p)?;
                p = p.parent().unwrap_or(Path::new("/")).join(to);
            }
            Ok(_) => return Ok((fs::canonicalize(&p)?, via_link)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let name = match p.components().next_back() {
                    Some(Component::Normal(n)) => n.to_os_string(),
                    _ => bail!("expected a file name"),
                };
                let parent = p.parent().unwrap_or(Path::new("/"));
                let dir = fs::canonicalize(parent).map_err(|e| {
                    if e.kind() == std::io::ErrorKind::NotFound {
                        anyhow!("the directory {} does not exist", parent.display())
                    } else {
                        anyhow!("{}: {e}", parent.display())
                    }
                })?;
                return Ok((dir.join(name), via_link));
            }
            Err(e) => return Err(e.into()),
        }
    }
    bail!("too many levels of symbolic links")
}

/// A new temporary file beside `target`: `.NAME.pacer-tmp-PID` (then `-2`, `-3`, … if a killed
/// run with a recycled pid left one; that data is not ours to remove). Created private when it
/// will replace an existing file, whose mode it gets afterwards.
fn create_temp(target: &Path, replaces: bool) -> std::io::Result<(PathBuf, File)> {
    let dir = target.parent().unwrap_or(Path::new("/"));
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    let pid = std::process::id();
    for k in 1..1000 {
        let suffix = if k == 1 { String::new() } else { format!("-{k}") };
        let path = dir.join(format!(".{name}.pacer-tmp-{pid}{suffix}"));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(if replaces { 0o600 } else { 0o666 })
            .open(&path)
        {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "too many leftover temporary files",
    ))
}

/// Gives the temporary file the owner of the file it will replace (its mode follows at commit,
/// after the owner: changing the owner clears set-id bits).
fn keep_owner(file: &File, m: &Metadata) -> std::io::Result<()> {
    let mine = file.metadata()?;
    if (mine.uid(), mine.gid()) != (m.uid(), m.gid()) {
        std::os::unix::fs::fchown(file, Some(m.uid()), Some(m.gid()))?;
    }
    Ok(())
}

fn describe(m: &Metadata) -> &'static str {
    let t = m.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a named pipe (FIFO)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, s: &str) {
        fs::write(p, s).unwrap();
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("pacer-tmp"))
            .collect()
    }

    #[test]
    fn nothing_replaced_until_commit() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("out.csv");
        write(&t, "old\n");
        let mut out = Outputs::new(Stdout::Busy);
        let s = out.file("--jobs", &t).unwrap();
        let mut f = out.open(s).unwrap();
        f.write_all(b"new\n").unwrap();
        assert_eq!(fs::read_to_string(&t).unwrap(), "old\n");
        assert_eq!(leftovers(d.path()).len(), 1);
        out.commit().unwrap();
        assert_eq!(fs::read_to_string(&t).unwrap(), "new\n");
        assert!(leftovers(d.path()).is_empty());
    }

    #[test]
    fn a_dropped_set_removes_its_temporary_files_and_directories() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("out.csv");
        write(&t, "old\n");
        {
            let mut out = Outputs::new(Stdout::Busy);
            let a = out.file("--jobs", &t).unwrap();
            let dir = out.dir("--csv", &d.path().join("new/deeper"), true).unwrap();
            let b = out.file("--csv", &dir.join("x.csv")).unwrap();
            out.write(a, b"new\n").unwrap();
            out.write(b, b"x\n").unwrap();
            // An error return or a panic drops the set here.
        }
        assert_eq!(fs::read_to_string(&t).unwrap(), "old\n");
        assert!(leftovers(d.path()).is_empty());
        assert!(!d.path().join("new").exists());
    }

    #[test]
    fn a_panic_removes_the_temporary_file() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("out.csv");
        let r = std::panic::catch_unwind(|| {
            let mut out = Outputs::new(Stdout::Busy);
            let s = out.file("--jobs", &t).unwrap();
            out.write(s, b"rows").unwrap();
            panic!("in the middle of the run");
        });
        assert!(r.is_err());
        assert!(!t.exists());
        assert!(leftovers(d.path()).is_empty());
    }

    #[test]
    fn same_file_is_refused_by_path_link_and_inode() {
        let d = tempfile::tempdir().unwrap();
        let input = d.path().join("in.json");
        write(&input, "{}");
        let hard = d.path().join("hard.json");
        fs::hard_link(&input, &hard).unwrap();
        let soft = d.path().join("soft.json");
        std::os::unix::fs::symlink(&input, &soft).unwrap();
        let dotted = d.path().join(".").join("in.json");
        for p in [&input, &hard, &soft, &dotted] {
            let mut out = Outputs::new(Stdout::Busy);
            out.input(&input);
            let e = out.file("--jobs", p).unwrap_err().to_string();
            assert!(
                e.contains("--jobs") && e.contains("the same file as the input"),
                "{e}"
            );
        }
        let mut out = Outputs::new(Stdout::Busy);
        let o = d.path().join("o");
        fs::create_dir(d.path().join("x")).unwrap();
        out.file("--jobs", &o).unwrap();
        let e = out
            .file("--trace", &d.path().join("x/../o"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--trace") && e.contains("the same file as --jobs"),
            "{e}"
        );
    }

    #[test]
    fn streams_and_devices() {
        let mut out = Outputs::new(Stdout::Busy);
        let e = out.file("--jobs", Path::new("-")).unwrap_err().to_string();
        assert!(e.contains("standard output carries"), "{e}");
        assert!(out.file("--jobs", Path::new("/dev/stdout")).is_err());
        let e = out
            .file("--jobs", Path::new("/dev/full"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("a character device, not a regular file"), "{e}");
        let e = out.file("--jobs", Path::new("/tmp")).unwrap_err().to_string();
        assert!(e.contains("a directory"), "{e}");
        let null = out.file("--jobs", Path::new("/dev/null")).unwrap();
        out.write(null, b"gone").unwrap();
        assert!(out.file("--trace", Path::new("/dev/null")).is_ok());
        let mut free = Outputs::new(Stdout::Free);
        assert!(free.file("-o", Path::new("-")).is_ok());
        let e = free
            .file("-o2", Path::new("/dev/stdout"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("the same file as -o"), "{e}");
        assert!(free.file("-o3", Path::new("/dev/fd/999")).is_err());
    }

    #[test]
    fn symlinks_are_followed_and_kept() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real.csv");
        let link = d.path().join("link.csv");
        std::os::unix::fs::symlink("real.csv", &link).unwrap();
        // Dangling: the target is created.
        let mut out = Outputs::new(Stdout::Busy);
        let s = out.file("--jobs", &link).unwrap();
        out.write(s, b"one").unwrap();
        out.commit().unwrap();
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(fs::read_to_string(&real).unwrap(), "one");
        let mut out = Outputs::new(Stdout::Busy);
        let s = out.file("--jobs", &link).unwrap();
        out.write(s, b"two").unwrap();
        out.commit().unwrap();
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(fs::read_to_string(&real).unwrap(), "two");
        let lp = d.path().join("loop");
        std::os::unix::fs::symlink("loop", &lp).unwrap();
        assert!(Outputs::new(Stdout::Busy).file("--jobs", &lp).is_err());
    }

    #[test]
    fn a_replaced_file_keeps_its_mode() {
        // Write-only and read-only modes too: the temporary file must stay usable until the end.
        for mode in [0o640, 0o200, 0o444] {
            let d = tempfile::tempdir().unwrap();
            let t = d.path().join("set.json");
            write(&t, "old");
            fs::set_permissions(&t, fs::Permissions::from_mode(mode)).unwrap();
            let mut out = Outputs::new(Stdout::Free);
            let s = out.file("-o", &t).unwrap();
            out.write(s, b"new").unwrap();
            out.commit().unwrap();
            assert_eq!(fs::metadata(&t).unwrap().mode() & 0o7777, mode);
            fs::set_permissions(&t, fs::Permissions::from_mode(0o600)).unwrap();
            assert_eq!(fs::read_to_string(&t).unwrap(), "new");
        }
    }

    #[test]
    fn missing_directories() {
        let e = Outputs::new(Stdout::Busy)
            .file("--jobs", Path::new("/nonexistent/dir/jobs.csv"))
            .unwrap_err();
        assert!(
            format!("{e:#}").contains("/nonexistent/dir does not exist"),
            "{e:#}"
        );
        let e = Outputs::new(Stdout::Busy)
            .dir("--log-dir", Path::new("/nonexistent/logs"), false)
            .unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
    }
}

/// A command's `--json` document: its schema name (`pacer.<command>/<version>`,
/// docs/formats/json.md) first, then the command's own fields. Every command prints its
/// document through [`json_text`], so no output goes without a schema.
#[derive(serde::Serialize)]
struct Schemed<'a, T: serde::Serialize> {
    schema: &'a str,
    #[serde(flatten)]
    body: &'a T,
}

/// The pretty-printed `--json` document of `body` under `schema`. `body` must serialise as an
/// object (a struct or a map) without a `schema` field of its own.
pub fn json_text<T: serde::Serialize>(schema: &str, body: &T) -> Result<String> {
    Ok(serde_json::to_string_pretty(&Schemed { schema, body })?)
}
