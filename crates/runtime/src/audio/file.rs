//! The file backend: a WAV file per session in a directory.
//!
//! Playback ([`FileSink`]): the real-time side copies each burst into a buffer taken from a pool
//! allocated at open and hands it over through a bounded lock-free queue; a writer thread (not
//! real-time) writes it and returns the buffer to the pool. A release therefore never waits for
//! the disk; when the pool is empty (the disk slower than the session for longer than the queue
//! lasts) the burst is dropped and counted. The writer polls the queue every few milliseconds
//! rather than being woken, so the real-time side makes no system call at all.
//!
//! The file is written as `.<session>.wav.<pid>.tmp` in the target directory (created with
//! `O_EXCL`, so never through an existing file or link) and renamed to `<session>.wav` only once
//! everything was written, its header completed and its data synced. A target that is a symbolic
//! link, a device or anything but a regular file is refused at open and again before the rename;
//! an existing regular file is replaced only by that final rename, so a failed run leaves it as
//! it was.
//!
//! Capture ([`FileSource`]): `<session>.wav`, read whole at open and checked against the session;
//! served one burst per period, from the start again after the last frame (a burst that crosses
//! the end continues with the first frames).

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_queue::ArrayQueue;
use serde::Serialize;

use super::{wav, AudioError};
use crate::manifest::AudioSession;

/// Largest WAV file read for capture.
pub const MAX_CAPTURE_FILE_BYTES: u64 = 1 << 30;

/// The file backend's side of a playback session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FileReport {
    /// The file written (present only if `complete`).
    pub path: String,
    /// Whether the file was completed and renamed into place.
    pub complete: bool,
    /// Frames in the file.
    pub frames: u64,
    /// Bursts in the file.
    pub bursts: u64,
    /// Bursts the real-time side dropped because the writer's queue was full.
    pub dropped_bursts: u64,
    /// Why the file is not complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn io_err(session: &AudioSession, file: &Path, what: &'static str, source: std::io::Error) -> AudioError {
    AudioError::Io {
        session: session.name.clone(),
        file: file.display().to_string(),
        what,
        source,
    }
}

/// Refuses a target that exists and is not a regular file (symlink, device, directory, fifo).
fn check_target(session: &AudioSession, path: &Path) -> Result<(), AudioError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(session, path, "inspect the target", e)),
        Ok(m) if m.file_type().is_file() => Ok(()),
        Ok(m) => Err(AudioError::Refused {
            session: session.name.clone(),
            file: path.display().to_string(),
            found: if m.file_type().is_symlink() {
                "a symbolic link"
            } else if m.file_type().is_dir() {
                "a directory"
            } else {
                "a device, fifo or socket"
            },
        }),
    }
}

struct Writer {
    file: BufWriter<File>,
    bursts: u64,
    error: Option<String>,
}

/// A session's WAV file being written.
pub struct FileSink {
    session: AudioSession,
    path: PathBuf,
    tmp: PathBuf,
    burst_bytes: usize,
    free: Arc<ArrayQueue<Vec<u8>>>,
    full: Arc<ArrayQueue<Vec<u8>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Writer>>,
    dropped: u64,
}

impl FileSink {
    /// Creates the temporary file, its pool of `queue_bursts` buffers and the writer thread.
    pub fn open(
        session: &AudioSession,
        dir: &Path,
        burst_bytes: usize,
        queue_bursts: usize,
        period_ns: u64,
    ) -> Result<FileSink, AudioError> {
        let meta =
            std::fs::metadata(dir).map_err(|e| io_err(session, dir, "open the output directory", e))?;
        if !meta.is_dir() {
            return Err(AudioError::Io {
                session: session.name.clone(),
                file: dir.display().to_string(),
                what: "use as the output directory",
                source: std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
            });
        }
        let path = dir.join(format!("{}.wav", session.name));
        check_target(session, &path)?;
        let tmp = dir.join(format!(".{}.wav.{}.tmp", session.name, std::process::id()));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| io_err(session, &tmp, "create the temporary file", e))?;
        let mut file = BufWriter::with_capacity(64 * 1024, file);
        let (h, n) = wav::header(session.format, session.channels as u16, session.rate, 0);
        if let Err(e) = file.write_all(&h[..n]) {
            let _ = std::fs::remove_file(&tmp);
            return Err(io_err(session, &tmp, "write the header", e));
        }
        let queue_bursts = queue_bursts.max(1);
        let free = Arc::new(ArrayQueue::new(queue_bursts));
        let full = Arc::new(ArrayQueue::new(queue_bursts));
        for _ in 0..queue_bursts {
            let _ = free.push(vec![0u8; burst_bytes]);
        }
        let stop = Arc::new(AtomicBool::new(false));
        // Half a period keeps the queue short without spinning; bounded so that a long period
        // does not delay finish() and a tiny one does not make the writer busy.
        let poll = std::time::Duration::from_nanos((period_ns / 2).clamp(1_000_000, 20_000_000));
        let writer = Writer {
            file,
            bursts: 0,
            error: None,
        };
        let thread = {
            let (free, full, stop) = (free.clone(), full.clone(), stop.clone());
            std::thread::Builder::new()
                .name(format!(
                    "audio-wr-{}",
                    session.name.chars().take(6).collect::<String>()
                ))
                .spawn(move || write_loop(writer, &free, &full, &stop, poll))
        };
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(io_err(session, &tmp, "start the writer thread", e));
            }
        };
        Ok(FileSink {
            session: session.clone(),
            path,
            tmp,
            burst_bytes,
            free,
            full,
            stop,
            thread: Some(thread),
            dropped: 0,
        })
    }

    /// Queues one burst: `data` then silence up to a burst. Never blocks or allocates; false if
    /// the queue was full and the burst was dropped.
    pub fn push(&mut self, data: &[u8]) -> bool {
        let Some(mut buf) = self.free.pop() else {
            self.dropped += 1;
            return false;
        };
        let n = data.len().min(self.burst_bytes);
        buf[..n].copy_from_slice(&data[..n]);
        buf[n..].fill(0);
        // Cannot fail: `full` holds as many as the pool has buffers.
        let _ = self.full.push(buf);
        true
    }

    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Stops the writer, completes the header and renames the file into place.
    pub fn finish(mut self) -> FileReport {
        let mut report = FileReport {
            path: self.path.display().to_string(),
            dropped_bursts: self.dropped,
            ..FileReport::default()
        };
        let Some(w) = self.stop_writer() else {
            report.error = Some("the writer thread panicked".into());
            let _ = std::fs::remove_file(&self.tmp);
            return report;
        };
        report.bursts = w.bursts;
        report.frames = w.bursts * u64::from(self.session.burst_frames);
        let result = w
            .error
            .map_or(Ok(()), Err)
            .and_then(|()| self.complete(w.file, report.frames));
        match result {
            Ok(()) => report.complete = true,
            Err(e) => {
                let _ = std::fs::remove_file(&self.tmp);
                report.error = Some(e);
            }
        }
        report
    }

    fn complete(&self, file: BufWriter<File>, frames: u64) -> Result<(), String> {
        let tmp = self.tmp.display();
        let mut file = file
            .into_inner()
            .map_err(|e| format!("{tmp}: write: {}", e.error()))?;
        let (h, n) = wav::header(
            self.session.format,
            self.session.channels as u16,
            self.session.rate,
            frames,
        );
        let data = frames * u64::from(self.session.channels) * self.session.format.bytes();
        if data & 1 == 1 {
            file.write_all(&[0]).map_err(|e| format!("{tmp}: pad: {e}"))?;
        }
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.write_all(&h[..n]))
            .map_err(|e| format!("{tmp}: complete the header: {e}"))?;
        file.sync_all().map_err(|e| format!("{tmp}: sync: {e}"))?;
        check_target(&self.session, &self.path).map_err(|e| e.to_string())?;
        std::fs::rename(&self.tmp, &self.path)
            .map_err(|e| format!("rename {tmp} to {}: {e}", self.path.display()))?;
        // The rename itself is durable once the directory is synced; failing that is not an
        // error of the recording.
        if let Some(dir) = self.path.parent() {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }

    fn stop_writer(&mut self) -> Option<Writer> {
        self.stop.store(true, Ordering::Release);
        self.thread.take().and_then(|t| t.join().ok())
    }
}

impl Drop for FileSink {
    /// A session dropped without `finish` (an open that failed later, a run abandoned) leaves
    /// nothing behind.
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.stop_writer();
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

fn write_loop(
    mut w: Writer,
    free: &ArrayQueue<Vec<u8>>,
    full: &ArrayQueue<Vec<u8>>,
    stop: &AtomicBool,
    poll: std::time::Duration,
) -> Writer {
    loop {
        // Read the flag before draining: whatever was pushed before it was set is then drained.
        let stopping = stop.load(Ordering::Acquire);
        while let Some(buf) = full.pop() {
            if w.error.is_none() {
                match w.file.write_all(&buf) {
                    Ok(()) => w.bursts += 1,
                    Err(e) => w.error = Some(format!("write: {e}")),
                }
            }
            let _ = free.push(buf);
        }
        if stopping {
            return w;
        }
        std::thread::sleep(poll);
    }
}

/// A WAV file served as a capture device.
pub struct FileSource {
    data: Vec<u8>,
    frame_bytes: usize,
    frames: usize,
    burst_frames: usize,
}

impl FileSource {
    pub fn open(session: &AudioSession, dir: &Path) -> Result<FileSource, AudioError> {
        let path = dir.join(format!("{}.wav", session.name));
        let file = path.display().to_string();
        let mismatch = |field: &'static str, expected: String, found: String| AudioError::WavMismatch {
            session: session.name.clone(),
            file: file.clone(),
            field,
            expected,
            found,
        };
        let meta =
            std::fs::metadata(&path).map_err(|e| io_err(session, &path, "open the capture file", e))?;
        if meta.len() > MAX_CAPTURE_FILE_BYTES {
            return Err(mismatch(
                "size",
                format!("at most {MAX_CAPTURE_FILE_BYTES} bytes (it is read into memory)"),
                format!("{} bytes", meta.len()),
            ));
        }
        let bytes = std::fs::read(&path).map_err(|e| io_err(session, &path, "read the capture file", e))?;
        let info = wav::parse(&bytes).map_err(|why| mismatch("header", "a RIFF/WAVE file".into(), why))?;
        if info.rate != session.rate {
            return Err(mismatch(
                "rate",
                format!("{} Hz", session.rate),
                format!("{} Hz", info.rate),
            ));
        }
        if u32::from(info.channels) != session.channels {
            return Err(mismatch(
                "channels",
                session.channels.to_string(),
                info.channels.to_string(),
            ));
        }
        if info.format != Some(session.format) {
            return Err(mismatch(
                "format",
                super::format_name(session.format).into(),
                info.format_name(),
            ));
        }
        let frame_bytes = session.channels as usize * session.format.bytes() as usize;
        let data = bytes[info.data].to_vec();
        let frames = data.len() / frame_bytes;
        if frames == 0 {
            return Err(mismatch("data", "at least one frame".into(), "none".into()));
        }
        Ok(FileSource {
            data,
            frame_bytes,
            frames,
            burst_frames: session.burst_frames as usize,
        })
    }

    /// Copies burst `j` (looping over the file) into `out`, one burst long.
    pub fn fill(&self, j: u64, out: &mut [u8]) {
        let start = ((j % self.frames as u64) * (self.burst_frames as u64 % self.frames as u64)
            % self.frames as u64) as usize;
        let mut frame = start;
        let mut o = 0;
        while o < out.len() {
            let n = (self.frames - frame).min((out.len() - o) / self.frame_bytes);
            if n == 0 {
                break;
            }
            let src = &self.data[frame * self.frame_bytes..(frame + n) * self.frame_bytes];
            out[o..o + src.len()].copy_from_slice(src);
            o += src.len();
            frame = (frame + n) % self.frames;
        }
    }
}
