//! The ALSA backend's playback: a session's bursts through `pacer_linux::playback::Playback`,
//! which takes interleaved stereo `f32`. Session samples are converted into a stereo buffer
//! allocated at open (a mono session is written to both channels); more than two channels are
//! refused at open, since downmixing is a choice the manifest would have to make.
//!
//! `Playback` tells what the device granted only in its final report, so `open` opens the device
//! once to read the granted rate, closes it and refuses a rate other than the session's (the
//! mixer does not resample, §4.2), then opens it for the run and primes it with k bursts of
//! silence, as the Fig. 3 model's buffer starts full.
//!
//! Capture goes through `pacer_linux::capture::Capture` in the session's own format and channel
//! count (no conversion); a device that grants another rate is refused the same way.

use pacer_linux::capture::{Capture, CaptureConfig, CaptureFormat};
use pacer_linux::playback::{Playback, PlaybackConfig, PlaybackReport, CHANNELS};

use super::format::{sample_bytes, sample_f32};
use super::AudioError;
use crate::manifest::{AudioSession, SampleFormat};

pub struct AlsaOut {
    pcm: Playback,
    stereo: Vec<f32>,
    channels: usize,
    format: SampleFormat,
}

impl AlsaOut {
    pub fn open(session: &AudioSession, device: &str, bursts: u32) -> Result<AlsaOut, AudioError> {
        let cfg = PlaybackConfig {
            device: device.to_string(),
            rate: session.rate,
            burst_frames: session.burst_frames,
            bursts,
        };
        let alsa = |source| AudioError::Alsa {
            session: session.name.clone(),
            source,
        };
        let probe = Playback::open(&cfg).map_err(alsa)?.finish();
        if probe.rate != session.rate {
            return Err(AudioError::Session {
                session: session.name.clone(),
                field: "rate",
                expected: format!("a rate ALSA device {device:?} grants exactly"),
                found: format!("{} Hz, for which it granted {} Hz", session.rate, probe.rate),
            });
        }
        let mut pcm = Playback::open(&cfg).map_err(alsa)?;
        let stereo = vec![0.0f32; session.burst_frames as usize * CHANNELS as usize];
        pcm.prime(bursts, stereo.len());
        Ok(AlsaOut {
            pcm,
            stereo,
            channels: session.channels as usize,
            format: session.format,
        })
    }

    /// Writes one burst of session samples (`data`, then silence up to a burst).
    pub fn write(&mut self, data: &[u8]) {
        let frames = self.stereo.len() / CHANNELS as usize;
        let have = data.len() / sample_bytes(self.format) / self.channels;
        for f in 0..frames {
            let (l, r) = if f >= have {
                (0.0, 0.0)
            } else if self.channels == 1 {
                let x = sample_f32(self.format, data, f);
                (x, x)
            } else {
                (
                    sample_f32(self.format, data, 2 * f),
                    sample_f32(self.format, data, 2 * f + 1),
                )
            };
            self.stereo[2 * f] = l;
            self.stereo[2 * f + 1] = r;
        }
        self.pcm.write(&self.stereo);
    }

    pub fn finish(self) -> PlaybackReport {
        self.pcm.finish()
    }
}

/// Opens `device` for capture in the session's format, refusing a rate other than the session's.
pub fn open_capture(session: &AudioSession, device: &str, bursts: u32) -> Result<Capture, AudioError> {
    let cfg = CaptureConfig {
        device: device.to_string(),
        rate: session.rate,
        channels: session.channels,
        format: match session.format {
            SampleFormat::S16 => CaptureFormat::S16,
            SampleFormat::S32 => CaptureFormat::S32,
            SampleFormat::F32 => CaptureFormat::F32,
        },
        burst_frames: session.burst_frames,
        bursts,
    };
    let c = Capture::open(&cfg).map_err(|source| AudioError::AlsaCapture {
        session: session.name.clone(),
        source,
    })?;
    let granted = c.report().rate;
    if granted != session.rate {
        return Err(AudioError::Session {
            session: session.name.clone(),
            field: "rate",
            expected: format!("a rate ALSA capture device {device:?} grants exactly"),
            found: format!("{} Hz, for which it granted {granted} Hz", session.rate),
        });
    }
    Ok(c)
}
