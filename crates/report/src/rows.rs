//! Figures made of labelled rows on one horizontal axis, drawn as SVG rectangles: a
//! [`Timeline`] (which task ran on which CPU when: one row per CPU, one rectangle per execution
//! slice, coloured by task) and horizontal [`Bars`] (one count per task: deadline misses,
//! migrations).
//!
//! These are written directly rather than with plotters: a timeline's data is intervals, not
//! points, and categories on the vertical axis read better as their names than as numbers.
//! The same rules as [`Plot`](crate::Plot) hold: nothing panics on data, what was not drawn as
//! given (non-finite or empty intervals, intervals clipped to the range) is counted in a note,
//! and an empty figure says "no data".

use std::fmt::Write as _;

use crate::html::escape;
use crate::plot::{clean_text, fmt_tick, PALETTE};
use crate::{RenderedPlot, ReportError};

const ROW: f64 = 22.0;
const BAR: f64 = 16.0;
const TITLE: f64 = 30.0;
const LEGEND_ROW: f64 = 18.0;
const AXIS: f64 = 46.0;
const RIGHT: f64 = 24.0;
const CHAR_WIDTH: f64 = 7.0;
/// Row labels longer than this are cut (with an ellipsis) so the plot keeps its width.
const MAX_LABEL_CHARS: usize = 28;
const MIN_WIDTH: u32 = 240;
const MAX_WIDTH: u32 = 4000;

/// One interval of a [`Timeline`] row: `[start, end)` in axis units, coloured by `key` (an
/// index into the timeline's keys, which name the legend entries).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub start: f64,
    pub end: f64,
    pub key: usize,
}

/// Labelled rows of coloured intervals over a common x axis (a Gantt chart).
///
/// ```
/// use pacer_report::{Span, Timeline};
/// let t = Timeline::new("CPU timeline, first 10 ms")
///     .x_axis("time", "ms")
///     .keys(&["video", "audio"])
///     .row("CPU 0", vec![Span { start: 0.0, end: 2.5, key: 0 }, Span { start: 3.0, end: 4.0, key: 1 }])
///     .row("CPU 1", vec![]);
/// let r = t.render().unwrap();
/// assert_eq!(r.svg.matches("<rect").count(), 1 + 2 + 2); // background, 2 slices, 2 legend swatches
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    title: String,
    x_label: String,
    width: u32,
    range: Option<(f64, f64)>,
    keys: Vec<String>,
    rows: Vec<(String, Vec<Span>)>,
    /// Bars: each row's single span is a value, printed after it.
    values: bool,
}

/// Horizontal bars, one per labelled row, from 0 to its value (counts per task).
///
/// ```
/// use pacer_report::Bars;
/// let b = Bars::new("Deadline misses").x_axis("missed jobs", "").bar("t0", 3.0).bar("t1", 0.0);
/// assert!(b.render().unwrap().svg.contains("<rect"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Bars(Timeline);

impl Timeline {
    /// A timeline titled `title`, 720 pixels wide (the height follows the rows), x range fitted
    /// to the spans.
    pub fn new(title: &str) -> Timeline {
        Timeline {
            title: title.to_string(),
            x_label: String::new(),
            width: 720,
            range: None,
            keys: Vec::new(),
            rows: Vec::new(),
            values: false,
        }
    }

    /// The x axis label, shown as "label (unit)"; an empty unit shows the label alone.
    pub fn x_axis(mut self, label: &str, unit: &str) -> Timeline {
        self.x_label = crate::plot::axis_text(label, unit);
        self
    }

    pub fn width(mut self, width: u32) -> Timeline {
        self.width = width;
        self
    }

    /// A fixed x range; spans reaching outside it are clipped to it and counted in a note.
    pub fn x_range(mut self, min: f64, max: f64) -> Timeline {
        self.range = Some((min, max));
        self
    }

    /// Names of the colours (legend entries): a span with key `k` is drawn in
    /// `PALETTE[k % 8]` and named `keys[k]`. Keys beyond eight reuse colours, so a caller with
    /// more categories should say which ones it merged.
    pub fn keys(mut self, keys: &[&str]) -> Timeline {
        self.keys = keys.iter().map(|k| k.to_string()).collect();
        self
    }

    /// Adds a row at the bottom.
    pub fn row(mut self, label: &str, spans: Vec<Span>) -> Timeline {
        self.rows.push((label.to_string(), spans));
        self
    }

    /// Adds a row in place, for building a timeline in a loop.
    pub fn add_row(&mut self, label: &str, spans: Vec<Span>) -> &mut Timeline {
        self.rows.push((label.to_string(), spans));
        self
    }

    fn invalid(&self, reason: String) -> ReportError {
        ReportError::InvalidPlot {
            title: self.title.clone(),
            reason,
        }
    }

    /// Renders the figure to one `<svg>` element plus notes on what was not drawn as given.
    pub fn render(&self) -> Result<RenderedPlot, ReportError> {
        if !(MIN_WIDTH..=MAX_WIDTH).contains(&self.width) {
            return Err(self.invalid(format!(
                "width {}: expected {MIN_WIDTH}–{MAX_WIDTH} pixels",
                self.width
            )));
        }
        if let Some((lo, hi)) = self.range {
            if !(lo.is_finite() && hi.is_finite() && lo < hi) {
                return Err(self.invalid(format!(
                    "x range [{lo}, {hi}]: expected finite bounds with min < max"
                )));
            }
        }
        let mut notes = Vec::new();
        let mut skipped = 0usize;
        let valid = |s: &Span| s.start.is_finite() && s.end.is_finite() && s.start < s.end;
        let value_ok = |s: &Span| s.end.is_finite() && s.start.is_finite() && s.end >= s.start;
        for (_, spans) in &self.rows {
            skipped += spans
                .iter()
                .filter(|s| if self.values { !value_ok(s) } else { !valid(s) })
                .count();
        }
        let drawable = || self.rows.iter().flat_map(|(_, s)| s.iter()).filter(|s| valid(s));
        let (x0, x1) = match self.range {
            Some(r) => r,
            None => {
                let (lo, hi) = drawable().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), s| {
                    (lo.min(s.start), hi.max(s.end))
                });
                if lo < hi {
                    (lo, hi)
                } else {
                    (0.0, 1.0)
                }
            }
        };
        // A bar of 0 is data (no misses); a timeline row without slices is not.
        let empty = (self.rows.is_empty() || !self.values) && drawable().next().is_none();
        if skipped > 0 {
            notes.push(format!(
                "{skipped} interval{} skipped (NaN, infinite or empty).",
                if skipped == 1 { "" } else { "s" }
            ));
        }

        let label_chars = self
            .rows
            .iter()
            .map(|(l, _)| l.chars().count().min(MAX_LABEL_CHARS))
            .max()
            .unwrap_or(0);
        let left = (label_chars as f64 * CHAR_WIDTH + 16.0).max(48.0);
        // Bars print their value after the bar: keep room for it.
        let right = if self.values { RIGHT + 48.0 } else { RIGHT };
        let w = f64::from(self.width);
        let plot_w = (w - left - right).max(40.0);
        let legend = self.legend_layout(w);
        let legend_h =
            legend.last().map_or(0.0, |l| l.1 + LEGEND_ROW) + if legend.is_empty() { 0.0 } else { 4.0 };
        let top = TITLE + legend_h;
        let rows_h = ROW * self.rows.len().max(1) as f64;
        let h = top + rows_h + AXIS;
        let sx = |x: f64| left + (x - x0) / (x1 - x0) * plot_w;

        let mut svg = String::new();
        let title = escape(&clean_text(&self.title));
        // write! to a String cannot fail.
        let _ = writeln!(
            svg,
            "<svg role=\"img\" aria-label=\"{title}\" width=\"{}\" height=\"{h}\" viewBox=\"0 0 {} {h}\" \
             xmlns=\"http://www.w3.org/2000/svg\" font-family=\"sans-serif\" font-size=\"12\">\n\
             <rect x=\"0\" y=\"0\" width=\"{}\" height=\"{h}\" fill=\"#FFFFFF\"/>\n\
             <text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"16\">{title}</text>",
            self.width,
            self.width,
            self.width,
            w / 2.0
        );
        for &(k, y, x) in &legend {
            let _ = writeln!(
                svg,
                "<rect x=\"{x}\" y=\"{}\" width=\"14\" height=\"10\" fill=\"{}\"/>\
                 <text x=\"{}\" y=\"{}\">{}</text>",
                TITLE + y + 2.0,
                PALETTE[k % PALETTE.len()],
                x + 20.0,
                TITLE + y + 11.0,
                escape(&clean_text(&self.keys[k]))
            );
        }
        // Grid and ticks.
        let axis_y = top + rows_h;
        for t in ticks(x0, x1) {
            let x = sx(t);
            let _ = writeln!(
                svg,
                "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#DDDDDD\"/>\
                 <text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                axis_y + 5.0,
                axis_y + 18.0,
                fmt_tick(t)
            );
        }
        let _ = writeln!(
            svg,
            "<line x1=\"{left}\" y1=\"{axis_y}\" x2=\"{}\" y2=\"{axis_y}\" stroke=\"#000000\"/>\n\
             <line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{axis_y}\" stroke=\"#000000\"/>\n\
             <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            left + plot_w,
            left + plot_w / 2.0,
            axis_y + 38.0,
            escape(&clean_text(&self.x_label))
        );
        let mut clipped = 0usize;
        for (i, (label, spans)) in self.rows.iter().enumerate() {
            let y = top + i as f64 * ROW;
            let _ = writeln!(
                svg,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                left - 6.0,
                y + ROW / 2.0 + 4.0,
                escape(&clean_text(&short(label)))
            );
            for s in spans {
                if !(if self.values { value_ok(s) } else { valid(s) }) {
                    continue;
                }
                let (a, b) = (s.start.max(x0), s.end.min(x1));
                if a != s.start || b != s.end {
                    clipped += 1;
                }
                if a > b || (a == b && !self.values) {
                    continue;
                }
                let (px0, px1) = (sx(a), sx(b));
                // A slice shorter than a pixel still shows: at least a hairline.
                let width = (px1 - px0).max(0.6);
                let fill = PALETTE[s.key % PALETTE.len()];
                let _ = write!(
                    svg,
                    "<rect x=\"{px0:.1}\" y=\"{:.1}\" width=\"{width:.1}\" height=\"{BAR}\" fill=\"{fill}\"/>",
                    y + (ROW - BAR) / 2.0
                );
                if self.values {
                    let _ = write!(
                        svg,
                        "<text x=\"{:.1}\" y=\"{}\">{}</text>",
                        px0 + width + 4.0,
                        y + ROW / 2.0 + 4.0,
                        fmt_tick(s.end)
                    );
                }
            }
            svg.push('\n');
        }
        if empty {
            let _ = writeln!(
                svg,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"20\" fill=\"#666666\">no data</text>",
                left + plot_w / 2.0,
                top + rows_h / 2.0 + 7.0
            );
            notes.push(if self.rows.is_empty() {
                "No rows to draw.".to_string()
            } else {
                "No data: no interval to draw.".to_string()
            });
        }
        if clipped > 0 {
            notes.push(format!(
                "{clipped} interval{} reaching outside the x range drawn up to its edge.",
                if clipped == 1 { "" } else { "s" }
            ));
        }
        if self.rows.iter().any(|(l, _)| l.chars().count() > MAX_LABEL_CHARS) {
            notes.push(format!(
                "Row labels longer than {MAX_LABEL_CHARS} characters are shortened (…)."
            ));
        }
        svg.push_str("</svg>\n");
        let drawn_points = self.rows.iter().map(|(_, s)| s.len()).sum::<usize>() - skipped;
        Ok(RenderedPlot {
            svg,
            notes,
            drawn_points,
        })
    }

    /// Legend entries: (key, row offset, left x), wrapping like the plots' legends.
    fn legend_layout(&self, width: f64) -> Vec<(usize, f64, f64)> {
        let (left, right) = (16.0, width - 16.0);
        let (mut row, mut x) = (0.0, left);
        self.keys
            .iter()
            .enumerate()
            .map(|(k, name)| {
                let w = 20.0 + name.chars().count() as f64 * CHAR_WIDTH + 18.0;
                if x > left && x + w > right {
                    row += LEGEND_ROW;
                    x = left;
                }
                let item = (k, row, x);
                x += w;
                item
            })
            .collect()
    }
}

impl Bars {
    pub fn new(title: &str) -> Bars {
        Bars(Timeline {
            values: true,
            ..Timeline::new(title)
        })
    }

    /// The value axis label, shown as "label (unit)".
    pub fn x_axis(self, label: &str, unit: &str) -> Bars {
        Bars(self.0.x_axis(label, unit))
    }

    pub fn width(self, width: u32) -> Bars {
        Bars(self.0.width(width))
    }

    /// Adds a bar at the bottom; a negative or non-finite value is skipped and noted.
    pub fn bar(mut self, label: &str, value: f64) -> Bars {
        self.add_bar(label, value);
        self
    }

    /// Adds a bar in place.
    pub fn add_bar(&mut self, label: &str, value: f64) -> &mut Bars {
        self.0.add_row(
            label,
            vec![Span {
                start: 0.0,
                end: value,
                key: 0,
            }],
        );
        self
    }

    /// Renders like [`Timeline::render`]; the axis starts at 0 and ends at the largest value.
    pub fn render(&self) -> Result<RenderedPlot, ReportError> {
        let max = self
            .0
            .rows
            .iter()
            .flat_map(|(_, s)| s.iter().map(|s| s.end))
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        let mut t = self.0.clone();
        t.range = Some((0.0, if max > 0.0 { max } else { 1.0 }));
        t.render()
    }
}

fn short(label: &str) -> String {
    if label.chars().count() <= MAX_LABEL_CHARS {
        label.to_string()
    } else {
        let mut s: String = label.chars().take(MAX_LABEL_CHARS - 1).collect();
        s.push('…');
        s
    }
}

/// Tick positions on [lo, hi]: a step of 1, 2 or 5 × 10ⁿ giving fewer than eight intervals.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = hi - lo;
    if !(span.is_finite() && span > 0.0) {
        return Vec::new();
    }
    let raw = span / 6.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| span / s < 8.0)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(0.0, 10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 1.0).len(), 6);
        assert!(ticks(1.0, 1.0).is_empty());
        assert!(ticks(f64::NAN, 1.0).is_empty());
    }

    #[test]
    fn bad_spans_are_skipped_and_counted() {
        let r = Timeline::new("t")
            .x_range(0.0, 10.0)
            .row(
                "cpu",
                vec![
                    Span {
                        start: f64::NAN,
                        end: 1.0,
                        key: 0,
                    },
                    Span {
                        start: 2.0,
                        end: 2.0,
                        key: 0,
                    },
                    Span {
                        start: 8.0,
                        end: 12.0,
                        key: 1,
                    },
                ],
            )
            .render()
            .unwrap();
        assert!(
            r.notes.iter().any(|n| n.starts_with("2 intervals skipped")),
            "{:?}",
            r.notes
        );
        assert!(
            r.notes.iter().any(|n| n.contains("1 interval reaching outside")),
            "{:?}",
            r.notes
        );
        assert_eq!(r.svg.matches("<rect").count(), 2);
        roxmltree::Document::parse(&r.svg).expect("the SVG is well-formed XML");
        let tricky = Timeline::new("<&\"'>")
            .keys(&["a<b"])
            .row("c&d", vec![])
            .render()
            .unwrap();
        roxmltree::Document::parse(&tricky.svg).expect("escaped text parses");
    }

    #[test]
    fn empty_figures_say_no_data() {
        let r = Timeline::new("t").render().unwrap();
        assert!(r.svg.contains("no data"));
        let r = Bars::new("b").bar("zero", 0.0).render().unwrap();
        assert!(!r.svg.contains("no data"), "a zero bar is data");
        assert!(Timeline::new("t").width(10).render().is_err());
        assert!(Timeline::new("t").x_range(1.0, 0.0).render().is_err());
    }

    #[test]
    fn long_labels_are_shortened() {
        let long = "x".repeat(40);
        let r = Bars::new("b").bar(&long, 1.0).render().unwrap();
        assert!(!r.svg.contains(&long) && r.svg.contains('…'));
    }
}
