//! Capture from an ALSA PCM device, for the runtime's record sessions (the counterpart of
//! [`crate::playback`]).
//!
//! The PCM is opened non-blocking in the session's own sample format (interleaved, little-endian
//! s16, s32 or float: no conversion, so a read is one copy into the caller's buffer), with a
//! period of one burst and a buffer of k bursts. A read never waits: a burst not complete yet is
//! reported as such (`-EAGAIN`), and an overrun the device reports (`-EPIPE`, the reader was later
//! than its buffer) is counted and recovered with `snd_pcm_prepare()` and a restart, losing what
//! the device overwrote.
//!
//! ALSA's `null` device returns every read at once without a clock and without writing the
//! caller's buffer (its samples are whatever the buffer held); the report says it is not clocked.
//!
//! Built with the `alsa` feature (on by default); without it [`Capture::open`] returns
//! [`CaptureError::Unsupported`].

use serde::Serialize;

/// Why the device cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("ALSA capture device {device:?}: {what}: {why}")]
    Device {
        device: String,
        what: &'static str,
        why: String,
    },
    #[error("this build of pacer has no ALSA capture (built without the `alsa` feature)")]
    Unsupported,
}

/// Sample format to capture in (interleaved, little-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureFormat {
    S16,
    S32,
    F32,
}

/// What to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureConfig {
    /// ALSA PCM name: `default`, `hw:0,0`, `null`, …
    pub device: String,
    pub rate: u32,
    pub channels: u32,
    pub format: CaptureFormat,
    /// Frames per burst (the ALSA period).
    pub burst_frames: u32,
    /// Bursts in the device buffer.
    pub bursts: u32,
}

/// The device's side of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CaptureReport {
    pub device: String,
    /// What the device granted (it may round what was asked for).
    pub rate: u32,
    pub period_frames: u64,
    pub buffer_frames: u64,
    /// Frames read.
    pub frames_read: u64,
    /// Reads that found less than a burst ready.
    pub not_ready: u64,
    /// Overruns the device reported (`-EPIPE`), each recovered.
    pub xruns: u64,
    /// Reads that failed otherwise, with the last error.
    pub errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// False for ALSA's `null` device, which returns at once without a clock or samples.
    pub clocked: bool,
}

/// What one read got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// The whole buffer was filled.
    Burst,
    /// Fewer frames were ready than the buffer holds: this many were read, the rest is silence.
    Partial(usize),
    /// Nothing was ready; the buffer is silence.
    NotReady,
    /// The device had overrun (counted, recovered); the buffer is silence.
    Overrun,
    /// The read failed (counted); the buffer is silence.
    Error,
}

#[cfg(feature = "alsa")]
mod imp {
    use super::*;
    use alsa::pcm::{Access, Format, HwParams, PCM};
    use alsa::{Direction, ValueOr};

    /// An open capture PCM, prepared and started.
    pub struct Capture {
        pcm: PCM,
        frame_bytes: usize,
        report: CaptureReport,
    }

    fn err(device: &str, what: &'static str, e: alsa::Error) -> CaptureError {
        CaptureError::Device {
            device: device.to_string(),
            what,
            why: e.to_string(),
        }
    }

    impl Capture {
        /// Opens, configures and starts `cfg.device`. The granted rate may differ from the one
        /// asked for: the report says what it is, the caller decides.
        pub fn open(cfg: &CaptureConfig) -> Result<Capture, CaptureError> {
            let dev = cfg.device.as_str();
            let pcm = PCM::new(dev, Direction::Capture, true).map_err(|e| err(dev, "open", e))?;
            let (format, bytes) = match cfg.format {
                CaptureFormat::S16 => (Format::S16LE, 2),
                CaptureFormat::S32 => (Format::S32LE, 4),
                CaptureFormat::F32 => (Format::FloatLE, 4),
            };
            {
                let hw = HwParams::any(&pcm).map_err(|e| err(dev, "read its parameters", e))?;
                hw.set_access(Access::RWInterleaved)
                    .map_err(|e| err(dev, "interleaved access", e))?;
                hw.set_channels(cfg.channels)
                    .map_err(|e| err(dev, "the channel count", e))?;
                hw.set_format(format)
                    .map_err(|e| err(dev, "the sample format", e))?;
                hw.set_rate(cfg.rate, ValueOr::Nearest)
                    .map_err(|e| err(dev, "the sample rate", e))?;
                hw.set_period_size_near(cfg.burst_frames as alsa::pcm::Frames, ValueOr::Nearest)
                    .map_err(|e| err(dev, "a period of one burst", e))?;
                hw.set_buffer_size_near((cfg.burst_frames * cfg.bursts.max(2)) as alsa::pcm::Frames)
                    .map_err(|e| err(dev, "a buffer of k bursts", e))?;
                pcm.hw_params(&hw)
                    .map_err(|e| err(dev, "apply its parameters", e))?;
            }
            let hw = pcm
                .hw_params_current()
                .map_err(|e| err(dev, "read back its parameters", e))?;
            let rate = hw.get_rate().map_err(|e| err(dev, "read its rate", e))?;
            let period = hw.get_period_size().map_err(|e| err(dev, "read its period", e))?;
            let buffer = hw.get_buffer_size().map_err(|e| err(dev, "read its buffer", e))?;
            drop(hw);
            pcm.start().map_err(|e| err(dev, "start", e))?;
            let info = pcm.info().ok();
            let clocked = !(dev == "null" || info.is_some_and(|i| i.get_id().is_ok_and(|id| id == "null")));
            Ok(Capture {
                pcm,
                frame_bytes: cfg.channels as usize * bytes,
                report: CaptureReport {
                    device: dev.to_string(),
                    rate,
                    period_frames: period as u64,
                    buffer_frames: buffer as u64,
                    clocked,
                    ..CaptureReport::default()
                },
            })
        }

        /// The device's parameters and counts so far.
        pub fn report(&self) -> &CaptureReport {
            &self.report
        }

        /// Reads up to `buf.len()` bytes of whole frames without waiting.
        pub fn read(&mut self, buf: &mut [u8]) -> Read {
            let frames = buf.len() / self.frame_bytes.max(1);
            let r = self.pcm.io_bytes().readi(&mut buf[..frames * self.frame_bytes]);
            match r {
                Ok(n) if n >= frames => {
                    self.report.frames_read += n as u64;
                    Read::Burst
                }
                Ok(n) => {
                    self.report.frames_read += n as u64;
                    self.report.not_ready += 1;
                    buf[n * self.frame_bytes..].fill(0);
                    Read::Partial(n)
                }
                Err(e) if e.errno() == libc::EAGAIN => {
                    self.report.not_ready += 1;
                    buf.fill(0);
                    Read::NotReady
                }
                Err(e) if e.errno() == libc::EPIPE => {
                    self.report.xruns += 1;
                    buf.fill(0);
                    if let Err(e) = self.pcm.prepare().and_then(|()| self.pcm.start()) {
                        self.note_error(e);
                    }
                    Read::Overrun
                }
                Err(e) => {
                    self.note_error(e);
                    buf.fill(0);
                    Read::Error
                }
            }
        }

        fn note_error(&mut self, e: alsa::Error) {
            self.report.errors += 1;
            self.report.last_error = Some(e.to_string());
        }

        /// Stops the device and returns what it saw.
        pub fn finish(self) -> CaptureReport {
            let _ = self.pcm.drop();
            self.report
        }
    }
}

#[cfg(feature = "alsa")]
pub use imp::Capture;

/// Without ALSA support: [`Capture::open`] always fails.
#[cfg(not(feature = "alsa"))]
pub struct Capture(std::convert::Infallible);

#[cfg(not(feature = "alsa"))]
impl Capture {
    pub fn open(_cfg: &CaptureConfig) -> Result<Capture, CaptureError> {
        Err(CaptureError::Unsupported)
    }
    pub fn report(&self) -> &CaptureReport {
        match self.0 {}
    }
    pub fn read(&mut self, _buf: &mut [u8]) -> Read {
        match self.0 {}
    }
    pub fn finish(self) -> CaptureReport {
        match self.0 {}
    }
}

#[cfg(all(test, feature = "alsa"))]
mod tests {
    use super::*;

    #[test]
    fn the_null_device_reads_bursts_and_is_not_clocked() {
        let mut c = Capture::open(&CaptureConfig {
            device: "null".into(),
            rate: 48_000,
            channels: 2,
            format: CaptureFormat::S16,
            burst_frames: 480,
            bursts: 2,
        })
        .expect("ALSA's null device opens anywhere libasound is installed");
        let mut buf = vec![0xAAu8; 480 * 4];
        let mut got = 0;
        for _ in 0..20 {
            if c.read(&mut buf) == Read::Burst {
                got += 1;
            }
        }
        let r = c.finish();
        assert_eq!(r.rate, 48_000);
        assert_eq!(r.frames_read, got * 480, "{r:?}");
        assert!(got > 0 && !r.clocked, "{r:?}");
        assert_eq!(r.errors, 0, "{r:?}");
    }

    #[test]
    fn a_missing_device_is_named_in_the_error() {
        let e = Capture::open(&CaptureConfig {
            device: "hw:97,0".into(),
            rate: 48_000,
            channels: 2,
            format: CaptureFormat::S16,
            burst_frames: 480,
            bursts: 2,
        })
        .err()
        .expect("no card 97");
        assert!(e.to_string().contains("\"hw:97,0\""), "{e}");
    }
}
