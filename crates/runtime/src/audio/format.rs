//! Interleaved little-endian samples in the manifest's formats, and their conversion to and from
//! `f32` without allocating.
//!
//! The scaling between integers and floats is the one ALSA's and libsndfile's converters use:
//! an integer sample `x` of `n` bits is `x / 2^(n-1)` as a float, so the most negative integer is
//! exactly −1.0 and the most positive one just under +1.0; a float is scaled by `2^(n-1)`,
//! rounded to the nearest integer and clamped to the integer range (+1.0 becomes `i16::MAX`, a
//! clip). A float sample outside [−1, 1] is clipped to it when written as float too, since the
//! device's full scale is ±1. NaN is written as 0 and counted as clipped: it cannot be played and
//! must not propagate into a mix.

use crate::manifest::SampleFormat;

const S16_SCALE: f32 = 32_768.0;
const S32_SCALE: f64 = 2_147_483_648.0;

/// Bytes of one sample.
pub fn sample_bytes(format: SampleFormat) -> usize {
    format.bytes() as usize
}

/// Reads sample `i` of an interleaved buffer as a float in [−1, 1) (f32 as stored).
///
/// Callers index within `bytes.len() / sample_bytes(format)`.
#[inline]
pub fn sample_f32(format: SampleFormat, bytes: &[u8], i: usize) -> f32 {
    match format {
        SampleFormat::S16 => {
            let o = i * 2;
            f32::from(i16::from_le_bytes([bytes[o], bytes[o + 1]])) / S16_SCALE
        }
        SampleFormat::S32 => {
            let o = i * 4;
            let x = i32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
            (f64::from(x) / S32_SCALE) as f32
        }
        SampleFormat::F32 => {
            let o = i * 4;
            f32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]])
        }
    }
}

/// Writes `x` as sample `i` of an interleaved buffer; returns whether it had to be clipped.
#[inline]
pub fn put_f32(format: SampleFormat, bytes: &mut [u8], i: usize, x: f32) -> bool {
    let (x, clipped) = clip_unit(x);
    match format {
        SampleFormat::S16 => {
            let v = (x * S16_SCALE).round();
            let (v, c) = if v > f32::from(i16::MAX) {
                (i16::MAX, true)
            } else {
                (v as i16, false)
            };
            bytes[i * 2..i * 2 + 2].copy_from_slice(&v.to_le_bytes());
            clipped || c
        }
        SampleFormat::S32 => {
            let v = (f64::from(x) * S32_SCALE).round();
            let (v, c) = if v > f64::from(i32::MAX) {
                (i32::MAX, true)
            } else {
                (v as i32, false)
            };
            bytes[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
            clipped || c
        }
        SampleFormat::F32 => {
            bytes[i * 4..i * 4 + 4].copy_from_slice(&x.to_le_bytes());
            clipped
        }
    }
}

/// Clamps to the device's full scale; NaN becomes 0. Returns whether the value changed.
#[inline]
fn clip_unit(x: f32) -> (f32, bool) {
    if x.is_nan() {
        (0.0, true)
    } else if x > 1.0 {
        (1.0, true)
    } else if x < -1.0 {
        (-1.0, true)
    } else {
        (x, false)
    }
}

/// Decodes an interleaved buffer into floats: `min(bytes / sample, out.len())` samples. Returns
/// how many were decoded.
pub fn to_f32(format: SampleFormat, bytes: &[u8], out: &mut [f32]) -> usize {
    let n = (bytes.len() / sample_bytes(format)).min(out.len());
    for (i, o) in out[..n].iter_mut().enumerate() {
        *o = sample_f32(format, bytes, i);
    }
    n
}

/// Encodes floats into an interleaved buffer: `min(samples, out / sample)` samples. Returns how
/// many samples had to be clipped.
pub fn from_f32(format: SampleFormat, samples: &[f32], out: &mut [u8]) -> u64 {
    let n = samples.len().min(out.len() / sample_bytes(format));
    let mut clipped = 0;
    for (i, &x) in samples[..n].iter().enumerate() {
        clipped += u64::from(put_f32(format, out, i, x));
    }
    clipped
}
