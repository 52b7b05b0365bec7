//! The audio manager (rtdroid-android-timeliness.txt, §4.2 "Real-Time Audio Framework in
//! RTDroid", Fig. 17 the audio session declaration): the manifest's audio sessions opened on a
//! backend before the application starts, and per-release calls for the periodic components
//! that serve them.
//!
//! RTDroid's audio manager is a real-time service whose "Audio Mixer" and "Multi-Channel
//! Recorder" are periodic tasks exchanging bursts with application components over real-time
//! channels; "if there are no applications writing audio data, the playback thread pads the PCM
//! card with silent frames", and sessions are declared statically so that everything is checked
//! and configured at boot. Here a session's serving component is that periodic task: each
//! release it mixes what its input channels delivered ([`Mixer`]) and plays the burst
//! ([`PlaybackHandle`]), or reads one burst ([`RecordHandle`]) and sends it on.
//!
//! Everything a session uses is allocated by [`AudioManager::open`]; the per-release calls
//! ([`PlaybackHandle::play`], [`PlaybackHandle::play_mixed`], [`Mixer`]'s methods,
//! [`RecordHandle::record`]) do not allocate, take no lock and make no system call on the null
//! and file backends (the ALSA backend makes ALSA's non-blocking write or read). Errors on that path are
//! counted, and reported by [`PlaybackHandle::finish`] / [`RecordHandle::finish`] at shutdown.
//!
//! Timing: integer nanoseconds on the caller's clock (CLOCK_MONOTONIC for the executor). Every
//! session's device starts at the `t0_ns` given to `open` and runs at T = burst_frames / rate
//! (rounded to the nanosecond as `pacer_workload::audio::AudioClock::period_ns`); see
//! [`clock`] for the playback model (the audio paper's Fig. 3, `AudioSink`) and its capture
//! counterpart. Formats and their conversions: [`mod@format`]. Docs: docs/runtime.md, "Audio manager".

pub mod clock;
pub mod file;
pub mod format;
pub mod mixer;
pub mod wav;

mod alsa;

use std::path::{Path, PathBuf};

use pacer_linux::capture::{Capture, CaptureError, CaptureReport};
use pacer_linux::playback::{PlaybackError, PlaybackReport};
use pacer_workload::audio::{AudioClock, AudioSink, SinkCount, MIN_PERIOD_NS};
use serde::Serialize;

pub use clock::{Delivery, PlayOutcome, ReadOutcome};
pub use file::FileReport;
pub use mixer::{AddOutcome, MixOutcome, MixStats, Mixer};
pub use pacer_workload::audio::BurstOutcome;

use crate::manifest::{AudioSession, Direction, SampleFormat};
use crate::validate::{MAX_AUDIO_CHANNELS, SUPPORTED_RATES};

/// Bursts in a device's buffer unless [`AudioOptions`] says otherwise (the Fig. 3 model's k).
pub const DEFAULT_DEVICE_BURSTS: u32 = 2;

/// Largest burst accepted, bytes (8 channels of 32-bit samples for 0.5 s at 96 kHz is 1.5 MiB).
pub const MAX_BURST_BYTES: u64 = 16 << 20;

/// Frequency of channel 0 of the null capture device's test signal; channel c carries
/// (c + 1) × this, a sine of amplitude [`TEST_TONE_AMPLITUDE`] starting at phase 0 at t₀.
pub const TEST_TONE_HZ: u32 = 440;

/// Amplitude of the null capture device's sines (−6 dBFS).
pub const TEST_TONE_AMPLITUDE: f64 = 0.5;

/// Why a session cannot be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum AudioError {
    #[error("audio session {session:?}: `{field}`: expected {expected}, found {found}")]
    Session {
        session: String,
        field: &'static str,
        expected: String,
        found: String,
    },
    #[error("audio session {session:?}: {file}: `{field}`: expected {expected}, found {found}")]
    WavMismatch {
        session: String,
        file: String,
        field: &'static str,
        expected: String,
        found: String,
    },
    #[error("audio session {session:?}: {file}: cannot {what}: {source}")]
    Io {
        session: String,
        file: String,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "audio session {session:?}: {file}: refusing to replace {found}; expected a regular file or nothing"
    )]
    Refused {
        session: String,
        file: String,
        found: &'static str,
    },
    #[error("audio session {session:?}: {source}")]
    Alsa {
        session: String,
        #[source]
        source: PlaybackError,
    },
    #[error("audio session {session:?}: {source}")]
    AlsaCapture {
        session: String,
        #[source]
        source: CaptureError,
    },
    #[error("audio sessions: `name`: expected distinct names, found {name:?} twice")]
    Duplicate { name: String },
    #[error("no {direction} audio session named {name:?} (sessions: {known})")]
    NoSession {
        name: String,
        direction: &'static str,
        known: String,
    },
    #[error("audio session {name:?}: its handle was already taken")]
    Taken { name: String },
}

/// A buffer of the wrong size passed on the real-time path (no allocation to report it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("expected a buffer of {expected} bytes (one burst), found {found}")]
pub struct SizeMismatch {
    pub expected: usize,
    pub found: usize,
}

/// Where the sessions go (chosen by the executor per run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// Virtual clocked devices: playback judged and discarded, capture a test signal.
    Null,
    /// `<dir>/<session>.wav` written (playback) or read (record).
    File(PathBuf),
    /// An ALSA PCM (`default`, `hw:0,0`, `null`, …).
    Alsa { device: String },
}

impl Backend {
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Null => "null",
            Backend::File(_) => "file",
            Backend::Alsa { .. } => "alsa",
        }
    }
}

/// Sizes chosen at open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AudioOptions {
    /// Bursts in each device's buffer (k ≥ 1).
    pub device_bursts: u32,
    /// Bursts the file backend's writer queue holds; `None`: half a second's worth (at least 8).
    pub file_queue_bursts: Option<usize>,
}

impl Default for AudioOptions {
    fn default() -> Self {
        AudioOptions {
            device_bursts: DEFAULT_DEVICE_BURSTS,
            file_queue_bursts: None,
        }
    }
}

/// `s16`, `s32` or `f32`, as the manifest spells them.
pub fn format_name(f: SampleFormat) -> &'static str {
    match f {
        SampleFormat::S16 => "s16",
        SampleFormat::S32 => "s32",
        SampleFormat::F32 => "f32",
    }
}

fn bad(
    s: &AudioSession,
    field: &'static str,
    expected: impl Into<String>,
    found: impl Into<String>,
) -> AudioError {
    AudioError::Session {
        session: s.name.clone(),
        field,
        expected: expected.into(),
        found: found.into(),
    }
}

/// Bytes of one burst, checked against [`MAX_BURST_BYTES`].
pub fn burst_bytes(s: &AudioSession) -> Result<usize, AudioError> {
    let b = s.burst_bytes();
    if b > MAX_BURST_BYTES {
        return Err(bad(
            s,
            "burst_frames",
            format!("a burst of at most {MAX_BURST_BYTES} bytes"),
            format!(
                "{} frames × {} channels × {} bytes = {b} bytes",
                s.burst_frames,
                s.channels,
                s.format.bytes()
            ),
        ));
    }
    Ok(b as usize)
}

/// The session's period T = burst_frames / rate, ns (rounded as the Fig. 3 model rounds it).
pub fn period_ns(s: &AudioSession) -> u64 {
    AudioClock {
        sample_rate_hz: s.rate,
        burst_frames: s.burst_frames,
    }
    .period_ns()
}

/// The checks every backend needs: a supported rate, 1 to [`MAX_AUDIO_CHANNELS`] channels, a
/// burst of at least 100 µs (the shortest SCHED_DEADLINE period) and at most
/// [`MAX_BURST_BYTES`]. The format is one of the three by construction.
pub fn check_session(s: &AudioSession) -> Result<(), AudioError> {
    if s.name.is_empty() {
        return Err(bad(s, "name", "a non-empty name", "\"\""));
    }
    if !SUPPORTED_RATES.contains(&s.rate) {
        return Err(bad(
            s,
            "rate",
            format!("one of {SUPPORTED_RATES:?} Hz"),
            format!("{} Hz", s.rate),
        ));
    }
    if !(1..=MAX_AUDIO_CHANNELS).contains(&s.channels) {
        return Err(bad(
            s,
            "channels",
            format!("1 to {MAX_AUDIO_CHANNELS} channels"),
            s.channels.to_string(),
        ));
    }
    if s.burst_frames == 0 || period_ns(s) < MIN_PERIOD_NS {
        let min_frames = (u64::from(s.rate) * MIN_PERIOD_NS).div_ceil(1_000_000_000);
        return Err(bad(
            s,
            "burst_frames",
            format!(
                "a burst of at least 100 µs ({min_frames} frames at {} Hz)",
                s.rate
            ),
            format!("{} frames ({} ns)", s.burst_frames, period_ns(s)),
        ));
    }
    burst_bytes(s)?;
    Ok(())
}

/// What a backend adds to [`check_session`]: the file backend needs a session name usable as a
/// file name; ALSA playback takes 1 or 2 channels (it writes stereo). The ALSA device's rate
/// (and, for capture, channels and format) are checked when it is opened.
pub fn check_backend(s: &AudioSession, backend: &Backend) -> Result<(), AudioError> {
    match backend {
        Backend::Null => Ok(()),
        Backend::File(_) => {
            if s.name == "." || s.name == ".." || s.name.contains(['/', '\0']) {
                return Err(bad(
                    s,
                    "name",
                    "a name usable as a file name (no '/', not \".\" or \"..\") for the file backend",
                    format!("{:?}", s.name),
                ));
            }
            Ok(())
        }
        Backend::Alsa { .. } => match s.direction {
            Direction::Record => Ok(()),
            Direction::Playback if !(1..=2).contains(&s.channels) => Err(bad(
                s,
                "channels",
                "1 or 2 channels for the ALSA backend (it writes interleaved stereo; mono is copied to both)",
                s.channels.to_string(),
            )),
            Direction::Playback => Ok(()),
        },
    }
}

/// Counts and backend reports of one session at shutdown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionReport {
    pub session: String,
    pub direction: Direction,
    pub backend: &'static str,
    pub rate: u32,
    pub channels: u32,
    pub burst_frames: u32,
    pub format: SampleFormat,
    pub period_ns: u64,
    /// Bursts in the device's buffer (k).
    pub device_bursts: u32,
    pub t0_ns: u64,
    /// Bursts played (playback: calls to `play`) or delivered (record).
    pub bursts: u64,
    /// Playback: bursts written after the device read them (it played silence).
    pub underruns: u64,
    /// Playback: bursts written after their soft deadline but in time.
    pub late: u64,
    /// Playback: the Fig. 3 model's counts (`AudioSink::count` for the same write times).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sink: Option<SinkCount>,
    /// Playback: bursts the mixer produced as silence because no stream delivered anything.
    pub silence_padded_bursts: u64,
    /// Playback: samples the mixer clipped.
    pub clipped_samples: u64,
    /// Playback: the mixer's counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mixer: Option<MixStats>,
    /// Playback: bursts passed to `play` shorter than a burst (padded with silence).
    pub short_bursts: u64,
    /// Playback: bursts passed to `play` longer than a burst (silence played instead).
    pub refused_bursts: u64,
    /// Playback, file backend: bursts dropped because the writer's queue was full.
    pub dropped_writes: u64,
    /// Record: reads that found the reader later than the device's buffer.
    pub overruns: u64,
    /// Record: bursts the device overwrote before they were read.
    pub dropped_bursts: u64,
    /// Record: reads before the next burst was complete.
    pub not_ready: u64,
    /// Calls with a buffer that was not one burst long.
    pub wrong_size: u64,
    /// File backend: the file written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<FileReport>,
    /// File backend, record: the file read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_file: Option<String>,
    /// ALSA backend, playback: the device's report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alsa: Option<PlaybackReport>,
    /// ALSA backend, record: the device's report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alsa_capture: Option<CaptureReport>,
}

impl SessionReport {
    fn new(s: &AudioSession, backend: &'static str, k: u32, t0: u64) -> SessionReport {
        SessionReport {
            session: s.name.clone(),
            direction: s.direction,
            backend,
            rate: s.rate,
            channels: s.channels,
            burst_frames: s.burst_frames,
            format: s.format,
            period_ns: period_ns(s),
            device_bursts: k,
            t0_ns: t0,
            bursts: 0,
            underruns: 0,
            late: 0,
            sink: None,
            silence_padded_bursts: 0,
            clipped_samples: 0,
            mixer: None,
            short_bursts: 0,
            refused_bursts: 0,
            dropped_writes: 0,
            overruns: 0,
            dropped_bursts: 0,
            not_ready: 0,
            wrong_size: 0,
            file: None,
            source_file: None,
            alsa: None,
            alsa_capture: None,
        }
    }
}

enum Out {
    Null,
    File(file::FileSink),
    Alsa(alsa::AlsaOut),
}

/// What a mixed release produced and what became of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MixedOutcome {
    pub mix: MixOutcome,
    pub play: PlayOutcome,
}

/// A playback session, owned by the component that serves it.
pub struct PlaybackHandle {
    session: AudioSession,
    backend: &'static str,
    k: u32,
    t0: u64,
    clock: clock::PlayClock,
    mixer: Mixer,
    /// The mixer's output, one burst.
    mixed: Vec<u8>,
    out: Out,
    short: u64,
    refused: u64,
    wrong_size: u64,
}

impl PlaybackHandle {
    pub fn session(&self) -> &AudioSession {
        &self.session
    }

    /// Bytes of one burst.
    pub fn burst_bytes(&self) -> usize {
        self.mixer.burst_bytes()
    }

    /// T = burst_frames / rate, ns.
    pub fn period_ns(&self) -> u64 {
        period_ns(&self.session)
    }

    /// The session's mixer: [`Mixer::begin`] and [`Mixer::add`] each stream's message, then
    /// [`PlaybackHandle::play_mixed`].
    pub fn mixer(&mut self) -> &mut Mixer {
        &mut self.mixer
    }

    /// Plays one burst, written at `now_ns` (when the release produced it). A shorter `burst` is
    /// padded with silence, a longer one refused (silence is played); both are counted.
    pub fn play(&mut self, now_ns: u64, burst: &[u8]) -> PlayOutcome {
        let bb = self.mixer.burst_bytes();
        let (data, mut delivery): (&[u8], Delivery) = if burst.len() > bb {
            self.refused += 1;
            (&[], Delivery::Refused)
        } else if burst.len() < bb {
            self.short += 1;
            (burst, Delivery::Padded)
        } else {
            (burst, Delivery::Whole)
        };
        let (j, play_at_ns, outcome) = self.clock.next(now_ns);
        let late = outcome == BurstOutcome::Underrun;
        match &mut self.out {
            Out::Null => {
                if late {
                    delivery = Delivery::Discarded;
                }
            }
            Out::File(f) => {
                // The file holds what the device played: silence in place of a late burst.
                let data = if late {
                    delivery = Delivery::Discarded;
                    &[][..]
                } else {
                    data
                };
                if !f.push(data) {
                    delivery = Delivery::QueueFull;
                }
            }
            // A real device keeps its own clock: the burst goes to it whatever the model says,
            // and the device's report counts what it did with it.
            Out::Alsa(a) => a.write(data),
        }
        PlayOutcome {
            burst: j,
            play_at_ns,
            outcome,
            delivery,
        }
    }

    /// Finishes the mixer's release and plays its burst.
    pub fn play_mixed(&mut self, now_ns: u64) -> MixedOutcome {
        // Taking the buffer out (and back) moves it; Vec::new() does not allocate.
        let mut buf = std::mem::take(&mut self.mixed);
        let mix = match self.mixer.finish(&mut buf) {
            Ok(m) => m,
            // The buffer is sized from the mixer at open; unreachable, but never a panic.
            Err(_) => {
                self.wrong_size += 1;
                buf.fill(0);
                MixOutcome {
                    silence: true,
                    ..MixOutcome::default()
                }
            }
        };
        let play = self.play(now_ns, &buf);
        self.mixed = buf;
        MixedOutcome { mix, play }
    }

    /// Closes the device (off the real-time path) and reports.
    pub fn finish(self) -> SessionReport {
        let mut r = SessionReport::new(&self.session, self.backend, self.k, self.t0);
        let count = self.clock.count();
        let stats = self.mixer.stats();
        r.bursts = self.clock.written();
        r.underruns = count.underruns;
        r.late = self.clock.late();
        r.sink = Some(count);
        r.silence_padded_bursts = stats.silent_releases;
        r.clipped_samples = stats.clipped_samples;
        r.mixer = Some(stats);
        r.short_bursts = self.short;
        r.refused_bursts = self.refused;
        r.wrong_size = self.wrong_size;
        match self.out {
            Out::Null => {}
            Out::File(f) => {
                r.dropped_writes = f.dropped();
                r.file = Some(f.finish());
            }
            Out::Alsa(a) => r.alsa = Some(a.finish()),
        }
        r
    }
}

enum Source {
    Null,
    File(file::FileSource, String),
    Alsa(Capture),
}

/// A record session, owned by the component that serves it.
pub struct RecordHandle {
    session: AudioSession,
    backend: &'static str,
    k: u32,
    t0: u64,
    burst_bytes: usize,
    clock: clock::CaptureClock,
    source: Source,
    bursts: u64,
    overruns: u64,
    dropped: u64,
    not_ready: u64,
    wrong_size: u64,
}

impl RecordHandle {
    pub fn session(&self) -> &AudioSession {
        &self.session
    }

    /// Bytes of one burst.
    pub fn burst_bytes(&self) -> usize {
        self.burst_bytes
    }

    /// T = burst_frames / rate, ns.
    pub fn period_ns(&self) -> u64 {
        period_ns(&self.session)
    }

    /// Reads the next burst into `buf` (one burst long) at `now_ns`. See [`ReadOutcome`]; when
    /// the burst is not complete yet `buf` is filled with silence and the same burst is
    /// returned by the next call.
    pub fn record(&mut self, now_ns: u64, buf: &mut [u8]) -> ReadOutcome {
        if buf.len() != self.burst_bytes {
            self.wrong_size += 1;
            return ReadOutcome::WrongSize {
                expected: self.burst_bytes,
                found: buf.len(),
            };
        }
        let o = self.clock.next(now_ns);
        let burst = match o {
            ReadOutcome::Fresh { burst, .. } => burst,
            ReadOutcome::Overrun { burst, dropped, .. } => {
                self.overruns += 1;
                self.dropped += dropped;
                burst
            }
            ReadOutcome::NotYet { .. } | ReadOutcome::WrongSize { .. } => {
                self.not_ready += 1;
                buf.fill(0);
                return o;
            }
        };
        self.bursts += 1;
        match &mut self.source {
            Source::Null => test_signal(&self.session, burst, buf),
            Source::File(f, _) => f.fill(burst, buf),
            // The device's own shortfalls (not ready, overrun) are in its report.
            Source::Alsa(c) => {
                c.read(buf);
            }
        }
        o
    }

    /// Reports (off the real-time path).
    pub fn finish(self) -> SessionReport {
        let mut r = SessionReport::new(&self.session, self.backend, self.k, self.t0);
        r.bursts = self.bursts;
        r.overruns = self.overruns;
        r.dropped_bursts = self.dropped;
        r.not_ready = self.not_ready;
        r.wrong_size = self.wrong_size;
        match self.source {
            Source::Null => {}
            Source::File(_, path) => r.source_file = Some(path),
            Source::Alsa(c) => r.alsa_capture = Some(c.finish()),
        }
        r
    }
}

/// The null capture device's burst `j`: channel c is a sine of (c + 1) × [`TEST_TONE_HZ`] Hz,
/// amplitude [`TEST_TONE_AMPLITUDE`], phase 0 at frame 0 (t₀). The phase of frame n is computed
/// as (f·n mod rate) / rate in integers, so the signal is exactly periodic and does not drift
/// however long the run.
pub fn test_signal(s: &AudioSession, j: u64, out: &mut [u8]) {
    let ch = s.channels as usize;
    let rate = u64::from(s.rate.max(1));
    let b = u64::from(s.burst_frames);
    let frames = out.len() / (ch * s.format.bytes() as usize);
    for i in 0..frames {
        let n = (j.wrapping_mul(b).wrapping_add(i as u64)) % rate;
        for c in 0..ch {
            let f = u64::from(TEST_TONE_HZ) * (c as u64 + 1);
            let phase = (f * n) % rate;
            let x = TEST_TONE_AMPLITUDE * (std::f64::consts::TAU * phase as f64 / rate as f64).sin();
            format::put_f32(s.format, out, i * ch + c, x as f32);
        }
    }
}

/// The sessions of one run, opened; hands each session's handle to the component serving it.
pub struct AudioManager {
    playback: Vec<(String, Option<PlaybackHandle>)>,
    record: Vec<(String, Option<RecordHandle>)>,
}

impl AudioManager {
    /// Checks and opens every session on `backend`, devices started at `t0_ns`, with the default
    /// [`AudioOptions`]. Nothing is left open or on disk if any session fails.
    pub fn open(
        sessions: &[AudioSession],
        backend: &Backend,
        t0_ns: u64,
    ) -> Result<AudioManager, AudioError> {
        AudioManager::open_with(sessions, backend, t0_ns, &AudioOptions::default())
    }

    pub fn open_with(
        sessions: &[AudioSession],
        backend: &Backend,
        t0_ns: u64,
        opts: &AudioOptions,
    ) -> Result<AudioManager, AudioError> {
        for (i, s) in sessions.iter().enumerate() {
            if sessions[..i].iter().any(|o| o.name == s.name) {
                return Err(AudioError::Duplicate { name: s.name.clone() });
            }
            check_session(s)?;
            check_backend(s, backend)?;
        }
        let k = opts.device_bursts.max(1);
        let mut m = AudioManager {
            playback: Vec::new(),
            record: Vec::new(),
        };
        // Handles opened before a failure are dropped with `m`: files removed, devices closed.
        for s in sessions {
            match s.direction {
                Direction::Playback => {
                    let h = open_playback(s, backend, t0_ns, k, opts)?;
                    m.playback.push((s.name.clone(), Some(h)));
                }
                Direction::Record => {
                    let h = open_record(s, backend, t0_ns, k)?;
                    m.record.push((s.name.clone(), Some(h)));
                }
            }
        }
        Ok(m)
    }

    /// Takes the handle of playback session `name`, once.
    pub fn take_playback(&mut self, name: &str) -> Result<PlaybackHandle, AudioError> {
        take(&mut self.playback, name, "playback")
    }

    /// Takes the handle of record session `name`, once.
    pub fn take_record(&mut self, name: &str) -> Result<RecordHandle, AudioError> {
        take(&mut self.record, name, "record")
    }

    /// Finishes the sessions whose handles were not taken (their files hold no burst).
    pub fn finish(self) -> Vec<SessionReport> {
        let mut out = Vec::new();
        for (_, h) in self.playback {
            out.extend(h.map(PlaybackHandle::finish));
        }
        for (_, h) in self.record {
            out.extend(h.map(RecordHandle::finish));
        }
        out
    }
}

fn take<H>(list: &mut [(String, Option<H>)], name: &str, direction: &'static str) -> Result<H, AudioError> {
    match list.iter_mut().find(|(n, _)| n == name) {
        Some((_, h)) => h.take().ok_or_else(|| AudioError::Taken { name: name.into() }),
        None => Err(AudioError::NoSession {
            name: name.into(),
            direction,
            known: if list.is_empty() {
                "none".into()
            } else {
                list.iter()
                    .map(|(n, _)| format!("{n:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        }),
    }
}

fn open_playback(
    s: &AudioSession,
    backend: &Backend,
    t0: u64,
    k: u32,
    opts: &AudioOptions,
) -> Result<PlaybackHandle, AudioError> {
    let bb = burst_bytes(s)?;
    let period = period_ns(s);
    let sink = AudioSink::new(period, k)
        .map_err(|e| bad(s, "burst_frames", "a valid device clock", e.to_string()))?;
    let out = match backend {
        Backend::Null => Out::Null,
        Backend::File(dir) => {
            let q = opts
                .file_queue_bursts
                .unwrap_or_else(|| (500_000_000 / period.max(1)).max(8) as usize);
            Out::File(file::FileSink::open(s, dir, bb, q, period)?)
        }
        Backend::Alsa { device } => Out::Alsa(alsa::AlsaOut::open(s, device, k)?),
    };
    Ok(PlaybackHandle {
        session: s.clone(),
        backend: backend.name(),
        k,
        t0,
        clock: clock::PlayClock::new(sink, t0),
        mixer: Mixer::new(s)?,
        mixed: vec![0; bb],
        out,
        short: 0,
        refused: 0,
        wrong_size: 0,
    })
}

fn open_record(s: &AudioSession, backend: &Backend, t0: u64, k: u32) -> Result<RecordHandle, AudioError> {
    let source = match backend {
        Backend::Null => Source::Null,
        Backend::File(dir) => Source::File(
            file::FileSource::open(s, dir)?,
            Path::new(dir)
                .join(format!("{}.wav", s.name))
                .display()
                .to_string(),
        ),
        Backend::Alsa { device } => Source::Alsa(alsa::open_capture(s, device, k)?),
    };
    Ok(RecordHandle {
        session: s.clone(),
        backend: backend.name(),
        k,
        t0,
        burst_bytes: burst_bytes(s)?,
        clock: clock::CaptureClock::new(period_ns(s), k, t0),
        source,
        bursts: 0,
        overruns: 0,
        dropped: 0,
        not_ready: 0,
        wrong_size: 0,
    })
}
