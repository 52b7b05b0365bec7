//! Playback of the audio benchmark's bursts to an ALSA PCM device (`pacer audio --device`).
//!
//! The benchmark's callback keeps its own absolute timer and its virtual sink (the audio paper's
//! Fig. 3 model), so every configuration is measured the same way with or without a card; the
//! device gets a copy of each burst. The PCM is opened non-blocking with a period of one burst
//! and a buffer of k bursts (the sink's k), so a write never waits inside the callback: a full
//! device buffer (the device's clock slower than ours) drops the burst, and an empty one is an
//! xrun the device itself reports (`-EPIPE`), counted and recovered with `snd_pcm_prepare()`.
//! Those two counts are the card's view of the run, next to the sink's underruns.
//!
//! Samples are interleaved stereo `f32`; a device without a float format gets signed 16-bit,
//! converted into a buffer allocated at open, so the callback never allocates. ALSA's `null`
//! device accepts everything and has no clock: it exercises this path where there is no card
//! (tests, CI), and the report says that it does not pace anything.
//!
//! Built with the `alsa` feature (on by default; it links libasound, `libasound2-dev` to build).
//! Without it [`Playback::open`] returns [`PlaybackError::Unsupported`].

use serde::Serialize;

/// Why the device cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PlaybackError {
    #[error("ALSA device {device:?}: {what}: {why}{hint}")]
    Device {
        device: String,
        what: &'static str,
        why: String,
        /// Where the machine has no sound card, says so.
        hint: String,
    },
    #[error("this build of pacer has no ALSA output (built without the `alsa` feature)")]
    Unsupported,
}

/// What to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaybackConfig {
    /// ALSA PCM name: `default`, `hw:0,0`, `plughw:1`, `null`, …
    pub device: String,
    /// Frames per second.
    pub rate: u32,
    /// Frames per burst (the ALSA period).
    pub burst_frames: u32,
    /// Bursts in the device buffer (the sink's k).
    pub bursts: u32,
}

/// The device's side of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PlaybackReport {
    pub device: String,
    /// Sample format the device took (`FLOAT_LE` or `S16_LE`).
    pub format: String,
    /// What the device granted (it may round what was asked for).
    pub rate: u32,
    pub period_frames: u64,
    pub buffer_frames: u64,
    /// Frames the device accepted (silence primed at the start included).
    pub frames_written: u64,
    /// Underruns the device reported (`-EPIPE`), each recovered.
    pub xruns: u64,
    /// Bursts not written because the device buffer was full.
    pub dropped_bursts: u64,
    /// Writes that failed otherwise, with the last error.
    pub errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// False for ALSA's `null` device, which discards samples without a clock.
    pub clocked: bool,
}

/// Channels written: the synthesizer renders interleaved stereo.
pub const CHANNELS: u32 = 2;

/// Hint appended to open errors on a machine with no card.
#[cfg_attr(not(feature = "alsa"), allow(dead_code))]
fn no_card_hint() -> String {
    let cards = std::fs::read_to_string("/proc/asound/cards").unwrap_or_default();
    if cards.trim().is_empty() || cards.contains("no soundcards") {
        " (this machine has no sound card: /proc/asound/cards lists none; ALSA's `null` device \
         works anywhere, and without --device the virtual sink counts underruns the same way)"
            .to_string()
    } else {
        String::new()
    }
}

#[cfg(feature = "alsa")]
mod imp {
    use super::*;
    use alsa::pcm::{Access, Format, HwParams, PCM};
    use alsa::{Direction, ValueOr};

    enum Samples {
        F32,
        S16(Vec<i16>),
    }

    /// An open PCM, prepared, primed with silence.
    pub struct Playback {
        pcm: PCM,
        samples: Samples,
        report: PlaybackReport,
    }

    fn err(device: &str, what: &'static str, e: alsa::Error) -> PlaybackError {
        PlaybackError::Device {
            device: device.to_string(),
            what,
            why: e.to_string(),
            hint: no_card_hint(),
        }
    }

    impl Playback {
        /// Opens and configures `cfg.device`: interleaved stereo, float or 16-bit, the rate, a
        /// period of one burst and a buffer of `bursts` bursts (as near as the device allows;
        /// the report says what it granted).
        pub fn open(cfg: &PlaybackConfig) -> Result<Playback, PlaybackError> {
            let dev = cfg.device.as_str();
            let pcm = PCM::new(dev, Direction::Playback, true).map_err(|e| err(dev, "open", e))?;
            let format = {
                let hw = HwParams::any(&pcm).map_err(|e| err(dev, "read its parameters", e))?;
                hw.set_access(Access::RWInterleaved)
                    .map_err(|e| err(dev, "interleaved access", e))?;
                hw.set_channels(CHANNELS).map_err(|e| err(dev, "2 channels", e))?;
                let format = if hw.test_format(Format::float()).is_ok() {
                    Format::float()
                } else {
                    Format::s16()
                };
                hw.set_format(format)
                    .map_err(|e| err(dev, "a float or 16-bit sample format", e))?;
                hw.set_rate(cfg.rate, ValueOr::Nearest)
                    .map_err(|e| err(dev, "the sample rate", e))?;
                hw.set_period_size_near(cfg.burst_frames as alsa::pcm::Frames, ValueOr::Nearest)
                    .map_err(|e| err(dev, "a period of one burst", e))?;
                hw.set_buffer_size_near((cfg.burst_frames * cfg.bursts.max(2)) as alsa::pcm::Frames)
                    .map_err(|e| err(dev, "a buffer of k bursts", e))?;
                pcm.hw_params(&hw)
                    .map_err(|e| err(dev, "apply its parameters", e))?;
                format
            };
            let hw = pcm
                .hw_params_current()
                .map_err(|e| err(dev, "read back its parameters", e))?;
            let rate = hw.get_rate().map_err(|e| err(dev, "read its rate", e))?;
            let period = hw.get_period_size().map_err(|e| err(dev, "read its period", e))?;
            let buffer = hw.get_buffer_size().map_err(|e| err(dev, "read its buffer", e))?;
            drop(hw);
            {
                // Start as soon as anything is written; xruns are reported, not hidden.
                let sw = pcm
                    .sw_params_current()
                    .map_err(|e| err(dev, "software parameters", e))?;
                sw.set_start_threshold(period.max(1))
                    .map_err(|e| err(dev, "start threshold", e))?;
                pcm.sw_params(&sw)
                    .map_err(|e| err(dev, "apply software parameters", e))?;
            }
            let samples = if format == Format::float() {
                Samples::F32
            } else {
                Samples::S16(vec![0; (cfg.burst_frames * CHANNELS) as usize])
            };
            let info = pcm.info().ok();
            let clocked = !(dev == "null" || info.is_some_and(|i| i.get_id().is_ok_and(|id| id == "null")));
            Ok(Playback {
                pcm,
                samples,
                report: PlaybackReport {
                    device: dev.to_string(),
                    format: if format == Format::float() {
                        "FLOAT_LE"
                    } else {
                        "S16_LE"
                    }
                    .into(),
                    rate,
                    period_frames: period as u64,
                    buffer_frames: buffer as u64,
                    clocked,
                    ..PlaybackReport::default()
                },
            })
        }

        /// Writes `bursts` bursts of silence, so the device has the sink's head start.
        pub fn prime(&mut self, bursts: u32, burst_samples: usize) {
            let silence = vec![0.0f32; burst_samples];
            for _ in 0..bursts {
                self.write(&silence);
            }
        }

        /// Writes one burst (interleaved stereo) without waiting.
        pub fn write(&mut self, burst: &[f32]) {
            let frames = (burst.len() / CHANNELS as usize) as u64;
            for attempt in 0..2 {
                let r = match &mut self.samples {
                    // SAFETY: the device was configured with FLOAT_LE (native f32) above.
                    Samples::F32 => unsafe { self.pcm.io_unchecked::<f32>() }.writei(burst),
                    Samples::S16(buf) => {
                        for (d, s) in buf.iter_mut().zip(burst) {
                            *d = (s.clamp(-1.0, 1.0) * i16::MAX as f32) as i16;
                        }
                        // SAFETY: the device was configured with S16_LE (native i16) above.
                        unsafe { self.pcm.io_unchecked::<i16>() }.writei(&buf[..burst.len()])
                    }
                };
                match r {
                    Ok(n) => {
                        self.report.frames_written += n as u64;
                        if (n as u64) < frames {
                            self.report.dropped_bursts += 1;
                        }
                        return;
                    }
                    Err(e) if e.errno() == libc::EAGAIN => {
                        self.report.dropped_bursts += 1;
                        return;
                    }
                    Err(e) if e.errno() == libc::EPIPE && attempt == 0 => {
                        self.report.xruns += 1;
                        if let Err(e) = self.pcm.prepare() {
                            self.note_error(e);
                            return;
                        }
                    }
                    Err(e) => {
                        self.note_error(e);
                        return;
                    }
                }
            }
        }

        fn note_error(&mut self, e: alsa::Error) {
            self.report.errors += 1;
            self.report.last_error = Some(e.to_string());
        }

        /// Stops the device (what is queued is dropped) and returns what it saw.
        pub fn finish(self) -> PlaybackReport {
            let _ = self.pcm.drop();
            self.report
        }
    }
}

#[cfg(feature = "alsa")]
pub use imp::Playback;

/// Without ALSA support: [`Playback::open`] always fails.
#[cfg(not(feature = "alsa"))]
pub struct Playback(std::convert::Infallible);

#[cfg(not(feature = "alsa"))]
impl Playback {
    pub fn open(_cfg: &PlaybackConfig) -> Result<Playback, PlaybackError> {
        Err(PlaybackError::Unsupported)
    }
    pub fn prime(&mut self, _bursts: u32, _burst_samples: usize) {
        match self.0 {}
    }
    pub fn write(&mut self, _burst: &[f32]) {
        match self.0 {}
    }
    pub fn finish(self) -> PlaybackReport {
        match self.0 {}
    }
}

#[cfg(all(test, feature = "alsa"))]
mod tests {
    use super::*;

    fn null(rate: u32, burst: u32, k: u32) -> Playback {
        Playback::open(&PlaybackConfig {
            device: "null".into(),
            rate,
            burst_frames: burst,
            bursts: k,
        })
        .expect("ALSA's null device opens anywhere libasound is installed")
    }

    #[test]
    fn the_null_device_takes_every_burst_and_is_not_clocked() {
        let mut p = null(48_000, 64, 2);
        p.prime(2, 128);
        let burst: Vec<f32> = (0..128).map(|i| (i as f32 / 64.0).sin()).collect();
        for _ in 0..100 {
            p.write(&burst);
        }
        let r = p.finish();
        assert_eq!(r.rate, 48_000);
        assert_eq!(r.period_frames, 64);
        assert_eq!(r.buffer_frames, 128);
        assert_eq!(r.frames_written, 102 * 64, "{r:?}");
        assert_eq!((r.xruns, r.dropped_bursts, r.errors), (0, 0, 0), "{r:?}");
        assert!(!r.clocked);
    }

    #[test]
    fn a_missing_device_is_named_in_the_error() {
        let e = Playback::open(&PlaybackConfig {
            device: "hw:97,0".into(),
            rate: 48_000,
            burst_frames: 64,
            bursts: 2,
        })
        .err()
        .expect("no card 97");
        let msg = e.to_string();
        assert!(msg.contains("\"hw:97,0\"") && msg.contains("open"), "{msg}");
    }
}
