//! Atomic replacement of a report file.
//!
//! A report is written to a new temporary file in the target's directory, synced, and renamed
//! over the target, so a reader (or a browser tab reloading it) sees the old report or the new
//! one, never half of one, and a failure part-way leaves the old file as it was. The temporary
//! file must be in the same directory because rename(2) is atomic only within one file system.
//!
//! Only a regular file (or nothing) is replaced: renaming over a symlink would replace the link
//! rather than what it points to, which surprises whoever made the link, and a device, FIFO,
//! socket or directory at the path is certainly not an old report.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::ReportError;

// Distinguishes temporary files of concurrent writes from one process (threads); the PID
// distinguishes processes. create_new makes a collision an error rather than a shared file.
static SEQUENCE: AtomicU32 = AtomicU32::new(0);

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ReportError + '_ {
    move |source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What kind of thing the existing `path` is, if it is not a regular file.
fn refused_kind(meta: &fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_symlink() {
        Some("symbolic link")
    } else if t.is_dir() {
        Some("directory")
    } else if t.is_block_device() || t.is_char_device() {
        Some("device")
    } else if t.is_fifo() {
        Some("FIFO")
    } else if t.is_socket() {
        Some("socket")
    } else {
        Some("special file")
    }
}

/// Replaces `path` with what `fill` writes, atomically; see the module documentation.
///
/// `fill` receives the temporary file; if it fails, the temporary file is removed and `path` is
/// untouched. Separate from [`crate::Report::write`] so tests can make the writing fail.
pub fn write_atomic(path: &Path, fill: impl FnOnce(&mut File) -> io::Result<()>) -> Result<(), ReportError> {
    let name = path
        .file_name()
        .ok_or_else(|| ReportError::BadPath {
            path: path.to_path_buf(),
        })?
        .to_owned();
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };

    // symlink_metadata: a symlink must be seen as one, not as its target.
    let existing = match fs::symlink_metadata(path) {
        Ok(meta) => {
            if let Some(kind) = refused_kind(&meta) {
                return Err(ReportError::NotAFile {
                    path: path.to_path_buf(),
                    kind,
                });
            }
            Some(meta)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err(path)(e)),
    };

    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(&name);
    tmp_name.push(format!(
        ".tmp-{}-{}",
        std::process::id(),
        SEQUENCE.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = dir.join(tmp_name);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(io_err(&tmp))?;

    let result = (|| {
        fill(&mut file).map_err(io_err(&tmp))?;
        file.flush().map_err(io_err(&tmp))?;
        // A replaced report keeps its mode (someone may have made it group-readable on purpose).
        if let Some(meta) = &existing {
            file.set_permissions(meta.permissions()).map_err(io_err(&tmp))?;
        }
        // Data on disk before the rename makes it visible: otherwise a crash can leave an empty
        // file under the report's name.
        file.sync_all().map_err(io_err(&tmp))?;
        // Checked again just before the rename: something may have appeared at the path since.
        if let Ok(meta) = fs::symlink_metadata(path) {
            if let Some(kind) = refused_kind(&meta) {
                return Err(ReportError::NotAFile {
                    path: path.to_path_buf(),
                    kind,
                });
            }
        }
        fs::rename(&tmp, path).map_err(io_err(path))
    })();
    if result.is_err() {
        // Best effort: the error being returned matters more than a leftover temporary file.
        let _ = fs::remove_file(&tmp);
        return result;
    }
    // The rename is durable once the directory entry is; failure here is reported because the
    // caller may rely on the report surviving a crash.
    File::open(&dir).and_then(|d| d.sync_all()).map_err(io_err(&dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pacer-report-test-{}-{}", std::process::id(), name));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_a_regular_file_and_leaves_no_temporary() {
        let dir = scratch("replace");
        let path = dir.join("r.html");
        fs::write(&path, "old").unwrap();
        write_atomic(&path, |f| f.write_all(b"new")).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(entries(&dir), vec!["r.html"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn failure_while_writing_leaves_the_old_file_intact() {
        let dir = scratch("fail");
        let path = dir.join("r.html");
        fs::write(&path, "old report").unwrap();
        let err = write_atomic(&path, |f| {
            f.write_all(b"half a rep")?;
            Err(io::Error::other("rendering failed"))
        })
        .unwrap_err();
        assert!(matches!(err, ReportError::Io { .. }), "{err}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "old report");
        assert_eq!(entries(&dir), vec!["r.html"], "temporary file left behind");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refuses_a_symlink_and_leaves_its_target_alone() {
        let dir = scratch("symlink");
        let target = dir.join("target.html");
        let link = dir.join("link.html");
        fs::write(&target, "target").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = write_atomic(&link, |f| f.write_all(b"new")).unwrap_err();
        assert!(
            matches!(
                err,
                ReportError::NotAFile {
                    kind: "symbolic link",
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(fs::read_to_string(&target).unwrap(), "target");
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(entries(&dir), vec!["link.html", "target.html"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refuses_a_directory_and_a_device() {
        let dir = scratch("dir");
        let sub = dir.join("sub");
        fs::create_dir(&sub).unwrap();
        let err = write_atomic(&sub, |_| Ok(())).unwrap_err();
        assert!(
            matches!(
                err,
                ReportError::NotAFile {
                    kind: "directory",
                    ..
                }
            ),
            "{err}"
        );
        fs::remove_dir_all(&dir).unwrap();
        // Refused before anything is created in /dev.
        let err = write_atomic(Path::new("/dev/null"), |_| Ok(())).unwrap_err();
        assert!(
            matches!(err, ReportError::NotAFile { kind: "device", .. }),
            "{err}"
        );
    }

    #[test]
    fn creates_a_new_file() {
        let dir = scratch("create");
        let path = dir.join("new.html");
        write_atomic(&path, |f| f.write_all(b"x")).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "x");
        fs::remove_dir_all(&dir).unwrap();
    }
}
