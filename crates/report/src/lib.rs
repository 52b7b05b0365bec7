//! Self-contained HTML reports with inline SVG plots.
//!
//! A [`Report`] is one HTML file that opens in any browser with no network and no JavaScript:
//! the style sheet is inline, every plot is an inline `<svg>`, and a Content-Security-Policy
//! meta tag forbids scripts and external loads, so a report mailed around or archived with a
//! benchmark still shows the same thing years later. It prints sensibly (figures and tables are
//! not split across pages, the palette survives grey-scale printing reasonably well).
//!
//! Its first user is the real-time audio benchmark (`pacer audio`); the experiment pipeline is
//! the next one. Readers are kernel and audio engineers, so the plots favour exact numbers:
//! tick labels are plain decimals (or `1e-6` style beyond 10⁶/below 10⁻³), axis labels carry
//! their unit, and what was not drawn is said in a note under the plot (non-finite values,
//! values a log axis cannot show, points clamped to a fixed y range, downsampling).
//!
//! ```no_run
//! use pacer_report::{cdf, Plot, Report, Series};
//! # fn main() -> Result<(), pacer_report::ReportError> {
//! let latencies_us = [112.0, 98.5, 130.2, 101.7, 99.9];
//! let mut report = Report::new("pacer audio: 48 kHz, 64 frames");
//! report.meta("command", "pacer audio --seconds 60").meta("seed", "42");
//! report.section("Callback latency").paragraph("Wake-up to callback end, per callback.");
//! report.plot(
//!     &Plot::new("Latency CDF")
//!         .x_axis("latency", "µs")
//!         .y_axis("fraction of callbacks", "")
//!         .series(Series::step("SCHED_DEADLINE", cdf(&latencies_us))),
//! )?;
//! report.table(&["policy", "p99 (µs)"], &[vec!["SCHED_DEADLINE".into(), "130.2".into()]]);
//! report.write(std::path::Path::new("/tmp/latency.html"))?;
//! # Ok(())
//! # }
//! ```
//!
//! # Why plotters, and which parts of it
//!
//! Plots are drawn with `plotters` restricted to its SVG backend (`default-features = false,
//! features = ["svg_backend"]`): no bitmap encoders, no chrono, no `ttf`/`ab_glyph` fonts. The
//! SVG backend writes labels as `<text>` elements that the browser lays out with its own
//! `sans-serif` font; plotters only needs a text size for its own layout (label areas, centring),
//! and without a font feature it uses a built-in estimate (0.7 em per character) rather than
//! fontconfig or freetype. That estimate is crude, so label areas are sized with margin to spare;
//! nothing on the build or the reader's machine needs a font library.
//!
//! plotters draws the frame: title, legend, grid, ticks, tick labels and axis labels. The series
//! themselves are written by this crate into the same `<svg>`, at the pixel positions plotters'
//! axes give (`map_coordinate`), because plotters writes one `<circle>` element of about 100
//! bytes per point; here a line is one `<polyline>` of integer pixels (consecutive duplicates
//! dropped) and a scatter is one `<path>` of round-capped zero-length strokes, about 12 bytes a
//! point. With [downsampling](Plot#downsampling) bounding the points, the file size follows the
//! plot's width, not the length of the run.

mod html;
mod plot;
mod rows;
mod stats;
mod write;

use std::path::PathBuf;

pub use html::Report;
pub use plot::{Plot, RenderedPlot, Series, Style, PALETTE};
pub use rows::{Bars, Span, Timeline};
pub use stats::{cdf, histogram};
pub use write::write_atomic;

/// Why a report or a plot could not be produced or written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The plot's own settings are unusable (size, range, log axis with a non-positive range).
    #[error("plot {title:?}: {reason}")]
    InvalidPlot { title: String, reason: String },
    /// plotters refused to draw (it reports its errors as text).
    #[error("plot {title:?}: drawing failed: {message}")]
    Draw { title: String, message: String },
    /// The path to write names something that is not a regular file; replacing it could clobber
    /// a device, follow a symlink somewhere unexpected, or fail half-way on a directory.
    #[error("{path}: refusing to replace a {kind} (only a regular file is replaced)")]
    NotAFile { path: PathBuf, kind: &'static str },
    /// The path to write has no file name (`/`, `..`, empty).
    #[error("{path}: not a file path")]
    BadPath { path: PathBuf },
    /// Reading metadata, writing the temporary file, syncing or renaming failed.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
