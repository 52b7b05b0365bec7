//! RIFF/WAVE headers for the file backend: written for the three session formats, read back.
//!
//! Written: `WAVE_FORMAT_PCM` (1) with 16 or 32 bits per sample for s16 and s32, and
//! `WAVE_FORMAT_IEEE_FLOAT` (3) with 32 bits for f32; a float file carries the 18-byte `fmt `
//! chunk (cbSize = 0) and the `fact` chunk (frames per channel) that format requires. Multi-channel
//! files are not written as `WAVE_FORMAT_EXTENSIBLE` and carry no speaker mask; readers assign
//! channels in the usual order.
//!
//! Read: the same, plus `WAVE_FORMAT_EXTENSIBLE` (0xFFFE) whose sub-format is PCM or float; any
//! chunk other than `fmt ` and `data` is skipped, odd-sized chunks are padded, and a `data` chunk
//! whose size runs past the end of the file (an unfinished recording) is cut to the whole frames
//! present.

use std::ops::Range;

use crate::manifest::SampleFormat;

const TAG_PCM: u16 = 1;
const TAG_FLOAT: u16 = 3;
const TAG_EXTENSIBLE: u16 = 0xFFFE;

/// The longest header [`header`] writes (float: RIFF 12 + fmt 26 + fact 12 + data 8).
pub const MAX_HEADER: usize = 58;

/// The header of a file of `frames` frames. Returns the bytes and how many of them are used.
pub fn header(format: SampleFormat, channels: u16, rate: u32, frames: u64) -> ([u8; MAX_HEADER], usize) {
    let bytes_per_sample = format.bytes() as u16;
    let block = channels * bytes_per_sample;
    // RIFF sizes are 32-bit: a longer recording is cut in the header; the caller stops earlier.
    let data = (frames.saturating_mul(u64::from(block))).min(u64::from(u32::MAX - 64)) as u32;
    let float = format == SampleFormat::F32;
    let fmt_size: u32 = if float { 18 } else { 16 };
    let fact: u32 = if float { 12 } else { 0 };
    let pad = data & 1;
    let riff = 4 + (8 + fmt_size) + fact + 8 + data + pad;
    let mut h = [0u8; MAX_HEADER];
    let mut n = 0;
    let mut put = |b: &[u8]| {
        h[n..n + b.len()].copy_from_slice(b);
        n += b.len();
    };
    put(b"RIFF");
    put(&riff.to_le_bytes());
    put(b"WAVE");
    put(b"fmt ");
    put(&fmt_size.to_le_bytes());
    put(&(if float { TAG_FLOAT } else { TAG_PCM }).to_le_bytes());
    put(&channels.to_le_bytes());
    put(&rate.to_le_bytes());
    put(&(rate * u32::from(block)).to_le_bytes());
    put(&block.to_le_bytes());
    put(&(bytes_per_sample * 8).to_le_bytes());
    if float {
        put(&0u16.to_le_bytes());
        put(b"fact");
        put(&4u32.to_le_bytes());
        put(&(frames.min(u64::from(u32::MAX)) as u32).to_le_bytes());
    }
    put(b"data");
    put(&data.to_le_bytes());
    (h, n)
}

/// What a WAV file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WavInfo {
    /// `None` for an encoding the sessions do not use (the tag and bits say which).
    pub format: Option<SampleFormat>,
    pub tag: u16,
    pub bits: u16,
    pub channels: u16,
    pub rate: u32,
    /// The sample bytes, whole frames only.
    pub data: Range<usize>,
}

impl WavInfo {
    /// How the encoding is called in errors: `s16`, `s32`, `f32` or the raw tag and bits.
    pub fn format_name(&self) -> String {
        match self.format {
            Some(SampleFormat::S16) => "s16".into(),
            Some(SampleFormat::S32) => "s32".into(),
            Some(SampleFormat::F32) => "f32".into(),
            None => format!("format tag {:#06x} with {} bits per sample", self.tag, self.bits),
        }
    }
}

fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}

/// Reads a WAV file's header; the error says what is wrong with it.
pub fn parse(b: &[u8]) -> Result<WavInfo, String> {
    if b.len() < 12 || &b[0..4] != b"RIFF" || &b[8..12] != b"WAVE" {
        return Err("not a RIFF/WAVE file (no \"RIFF\"…\"WAVE\" header)".into());
    }
    let mut o = 12;
    let mut fmt: Option<(u16, u16, u32, u16, u16)> = None;
    while o + 8 <= b.len() {
        let id = &b[o..o + 4];
        let size = u32_at(b, o + 4).unwrap_or(0) as usize;
        let body = o + 8;
        if id == b"fmt " {
            let tag = u16_at(b, body).ok_or("truncated fmt chunk")?;
            let channels = u16_at(b, body + 2).ok_or("truncated fmt chunk")?;
            let rate = u32_at(b, body + 4).ok_or("truncated fmt chunk")?;
            let block = u16_at(b, body + 12).ok_or("truncated fmt chunk")?;
            let bits = u16_at(b, body + 14).ok_or("truncated fmt chunk")?;
            let tag = if tag == TAG_EXTENSIBLE {
                // WAVEFORMATEXTENSIBLE: cbSize, valid bits, channel mask, then the sub-format GUID
                // whose first two bytes are the plain format tag.
                if size < 40 {
                    return Err("WAVE_FORMAT_EXTENSIBLE fmt chunk shorter than 40 bytes".into());
                }
                u16_at(b, body + 24).ok_or("truncated fmt chunk")?
            } else {
                tag
            };
            fmt = Some((tag, channels, rate, block, bits));
        } else if id == b"data" {
            let (tag, channels, rate, block, bits) = fmt.ok_or("data chunk before the fmt chunk")?;
            if channels == 0 || block == 0 {
                return Err(format!(
                    "fmt chunk says {channels} channels, {block} bytes per frame"
                ));
            }
            let end = body.saturating_add(size).min(b.len());
            let whole = (end - body) / usize::from(block) * usize::from(block);
            let format = match (tag, bits) {
                (TAG_PCM, 16) => Some(SampleFormat::S16),
                (TAG_PCM, 32) => Some(SampleFormat::S32),
                (TAG_FLOAT, 32) => Some(SampleFormat::F32),
                _ => None,
            };
            if format.is_some_and(|f| usize::from(block) != usize::from(channels) * f.bytes() as usize) {
                return Err(format!(
                    "fmt chunk says {block} bytes per frame for {channels} channels of {bits} bits"
                ));
            }
            return Ok(WavInfo {
                format,
                tag,
                bits,
                channels,
                rate,
                data: body..body + whole,
            });
        }
        o = body.saturating_add(size).saturating_add(size & 1);
    }
    Err(if fmt.is_none() {
        "no fmt chunk".into()
    } else {
        "no data chunk".into()
    })
}
