//! The playback mixer (§4.2, "Audio Mixer"): the streams a playback session's component received
//! this release, summed into one burst.
//!
//! Integer formats are summed exactly in `i64` and saturated once, at the end, to the format's
//! range, so the result does not depend on the order of the streams and a peak that cancels out
//! in the sum is not clipped. `f32` streams are summed in `f64` in the order they were added and
//! clipped to ±1 at the end (the device's full scale); NaN samples count as clipped and become 0.
//! The same messages added in the same order always give the same bytes.
//!
//! RTDroid's playback thread "pads the PCM card with silent frames" when no application writes
//! (§4.2): a release in which no stream delivered anything produces a burst of silence, counted
//! as a source underrun ([`MixStats::silent_releases`]), so the device keeps its clock.

use serde::Serialize;

use super::format::{put_f32, sample_bytes, sample_f32};
use super::SizeMismatch;
use crate::manifest::{AudioSession, SampleFormat};

/// What [`Mixer::add`] did with one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AddOutcome {
    /// A whole burst, mixed.
    Mixed,
    /// Shorter than a burst: what it had was mixed, the rest is silence from this stream.
    Padded { missing_bytes: usize },
    /// Longer than a burst: not a burst of this session, ignored.
    Rejected { found_bytes: usize },
}

/// What one release's mix was.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MixOutcome {
    /// Messages mixed (whole or padded).
    pub streams: u32,
    /// Of those, shorter than a burst.
    pub padded: u32,
    /// Messages ignored because they were longer than a burst.
    pub rejected: u32,
    /// Samples of the result that had to be clipped to the format's range.
    pub clipped: u32,
    /// No stream delivered anything: the burst is silence (a source underrun).
    pub silence: bool,
}

/// A mixer's counts since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MixStats {
    /// Bursts produced by [`Mixer::finish`].
    pub releases: u64,
    /// Bursts that were silence because no stream delivered anything (source underruns).
    pub silent_releases: u64,
    /// Messages mixed.
    pub messages: u64,
    /// Messages shorter than a burst, padded with silence.
    pub short_messages: u64,
    /// Messages longer than a burst, ignored.
    pub rejected_messages: u64,
    /// Output samples clipped to the format's range.
    pub clipped_samples: u64,
}

enum Acc {
    Int(Vec<i64>),
    Float(Vec<f64>),
}

/// One playback session's mixer, allocated once for its burst.
pub struct Mixer {
    format: SampleFormat,
    burst_bytes: usize,
    acc: Acc,
    /// Messages that delivered at least one sample this release.
    delivered: u32,
    release: MixOutcome,
    stats: MixStats,
}

impl Mixer {
    /// A mixer for `session`'s bursts (its format, channels and burst size).
    pub fn new(session: &AudioSession) -> Result<Mixer, super::AudioError> {
        super::check_session(session)?;
        let burst_bytes = super::burst_bytes(session)?;
        let samples = burst_bytes / sample_bytes(session.format);
        Ok(Mixer::with_size(session.format, samples))
    }

    /// A mixer of bursts of `samples` interleaved samples in `format`.
    pub fn with_size(format: SampleFormat, samples: usize) -> Mixer {
        let acc = match format {
            SampleFormat::S16 | SampleFormat::S32 => Acc::Int(vec![0; samples]),
            SampleFormat::F32 => Acc::Float(vec![0.0; samples]),
        };
        Mixer {
            format,
            burst_bytes: samples * sample_bytes(format),
            acc,
            delivered: 0,
            release: MixOutcome::default(),
            stats: MixStats::default(),
        }
    }

    /// Bytes of one burst: what [`Mixer::add`] expects and [`Mixer::finish`] writes.
    pub fn burst_bytes(&self) -> usize {
        self.burst_bytes
    }

    pub fn format(&self) -> SampleFormat {
        self.format
    }

    /// Starts a release: forgets whatever was added and not finished.
    pub fn begin(&mut self) {
        match &mut self.acc {
            Acc::Int(a) => a.fill(0),
            Acc::Float(a) => a.fill(0.0),
        }
        self.delivered = 0;
        self.release = MixOutcome::default();
    }

    /// Adds one stream's message (a burst in the session's format). A shorter message is mixed
    /// as far as it has whole samples and padded with silence; a longer one is ignored.
    pub fn add(&mut self, msg: &[u8]) -> AddOutcome {
        if msg.len() > self.burst_bytes {
            self.release.rejected += 1;
            self.stats.rejected_messages += 1;
            return AddOutcome::Rejected {
                found_bytes: msg.len(),
            };
        }
        let n = msg.len() / sample_bytes(self.format);
        match &mut self.acc {
            Acc::Int(a) => match self.format {
                SampleFormat::S16 => {
                    for (i, x) in a[..n].iter_mut().enumerate() {
                        *x += i64::from(i16::from_le_bytes([msg[2 * i], msg[2 * i + 1]]));
                    }
                }
                _ => {
                    for (i, x) in a[..n].iter_mut().enumerate() {
                        let o = 4 * i;
                        *x += i64::from(i32::from_le_bytes([msg[o], msg[o + 1], msg[o + 2], msg[o + 3]]));
                    }
                }
            },
            Acc::Float(a) => {
                for (i, x) in a[..n].iter_mut().enumerate() {
                    *x += f64::from(sample_f32(self.format, msg, i));
                }
            }
        }
        if n > 0 {
            self.delivered += 1;
        }
        self.release.streams += 1;
        self.stats.messages += 1;
        if msg.len() < self.burst_bytes {
            self.release.padded += 1;
            self.stats.short_messages += 1;
            AddOutcome::Padded {
                missing_bytes: self.burst_bytes - msg.len(),
            }
        } else {
            AddOutcome::Mixed
        }
    }

    /// Writes the release's burst into `out` (exactly [`Mixer::burst_bytes`] long) and starts the
    /// next release. A wrong-sized `out` is refused before anything is written or forgotten.
    pub fn finish(&mut self, out: &mut [u8]) -> Result<MixOutcome, SizeMismatch> {
        if out.len() != self.burst_bytes {
            return Err(SizeMismatch {
                expected: self.burst_bytes,
                found: out.len(),
            });
        }
        let mut clipped = 0u32;
        if self.delivered == 0 {
            out.fill(0);
            self.release.silence = true;
            self.stats.silent_releases += 1;
        } else {
            match &self.acc {
                Acc::Int(a) => match self.format {
                    SampleFormat::S16 => {
                        for (i, &x) in a.iter().enumerate() {
                            let v = x.clamp(i64::from(i16::MIN), i64::from(i16::MAX));
                            clipped += u32::from(v != x);
                            out[2 * i..2 * i + 2].copy_from_slice(&(v as i16).to_le_bytes());
                        }
                    }
                    _ => {
                        for (i, &x) in a.iter().enumerate() {
                            let v = x.clamp(i64::from(i32::MIN), i64::from(i32::MAX));
                            clipped += u32::from(v != x);
                            out[4 * i..4 * i + 4].copy_from_slice(&(v as i32).to_le_bytes());
                        }
                    }
                },
                Acc::Float(a) => {
                    for (i, &x) in a.iter().enumerate() {
                        clipped += u32::from(put_f32(self.format, out, i, x as f32));
                    }
                }
            }
        }
        self.release.clipped = clipped;
        self.stats.clipped_samples += u64::from(clipped);
        self.stats.releases += 1;
        let outcome = self.release;
        self.begin();
        Ok(outcome)
    }

    /// Counts since creation.
    pub fn stats(&self) -> MixStats {
        self.stats
    }
}
