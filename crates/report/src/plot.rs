//! Plots: a builder ([`Plot`]), data ([`Series`]) and their rendering to SVG with plotters.
//!
//! Rendering never panics on data: non-finite points are skipped, points a log axis cannot show
//! (≤ 0) are skipped, points outside a fixed y range are clamped to its edge, and a plot with
//! nothing left draws its axes with "no data" in the middle. Each of these is counted and
//! returned as a note ([`RenderedPlot::notes`]) that the report prints under the figure, so a
//! reader is never shown a cleaner picture than the data without being told.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::ReportError;

/// Okabe–Ito colours, distinguishable with the common colour-vision deficiencies. Yellow is
/// last because it is faint on white; series beyond eight reuse the colours in order.
pub const PALETTE: [&str; 8] = [
    "#0072B2", // blue
    "#E69F00", // orange
    "#009E73", // bluish green
    "#D55E00", // vermillion
    "#CC79A7", // reddish purple
    "#56B4E9", // sky blue
    "#000000", // black
    "#F0E442", // yellow
];

const PALETTE_RGB: [(u8, u8, u8); 8] = [
    (0x00, 0x72, 0xB2),
    (0xE6, 0x9F, 0x00),
    (0x00, 0x9E, 0x73),
    (0xD5, 0x5E, 0x00),
    (0xCC, 0x79, 0xA7),
    (0x56, 0xB4, 0xE9),
    (0x00, 0x00, 0x00),
    (0xF0, 0xE4, 0x42),
];

/// Points drawn per pixel column at most when a series is downsampled (first, min, max, last).
pub(crate) const POINTS_PER_COLUMN: usize = 4;

// Layout in pixels. plotters estimates text width without a font (0.7 em per character), so
// these leave room for labels as a browser's sans-serif actually sets them.
const TITLE_FONT: u32 = 20; // plotters divides by 1.24: about 16 px in the SVG
const LABEL_FONT: u32 = 15; // about 12 px
const LEGEND_ROW: u32 = 18;
const CHAR_WIDTH: f64 = 7.0; // 12 px sans-serif, generous
const MIN_SIZE: (u32, u32) = (240, 160);
const MAX_SIZE: (u32, u32) = (4000, 4000);

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Points joined by straight lines, in the order given (time series).
    Line,
    /// A staircase: each y holds until the next x, then jumps (CDFs, histograms).
    Step,
    /// Unjoined dots (scatter).
    Points,
    /// A dot at each mean with a whisker of ± its error ([`Series::error_bars`]): per-configuration
    /// means with their standard deviation. Never downsampled (a few points per category).
    ErrorBars,
}

/// One named set of (x, y) points in a plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Shown in the legend.
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub style: Style,
    /// Half-widths of the whiskers of [`Style::ErrorBars`], one per point (empty otherwise; a
    /// missing entry draws no whisker).
    pub errors: Vec<f64>,
}

impl Series {
    pub fn new(name: &str, points: Vec<(f64, f64)>, style: Style) -> Series {
        Series {
            name: name.to_string(),
            points,
            style,
            errors: Vec::new(),
        }
    }

    /// A [`Style::ErrorBars`] series from (x, mean, error) triples; the whisker spans
    /// mean ± error (a negative or non-finite error draws no whisker).
    pub fn error_bars(name: &str, bars: Vec<(f64, f64, f64)>) -> Series {
        Series {
            name: name.to_string(),
            points: bars.iter().map(|&(x, y, _)| (x, y)).collect(),
            style: Style::ErrorBars,
            errors: bars.iter().map(|&(_, _, e)| e).collect(),
        }
    }

    /// A [`Style::Line`] series.
    pub fn line(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series::new(name, points, Style::Line)
    }

    /// A [`Style::Step`] series, e.g. from [`cdf`](crate::cdf) or [`histogram`](crate::histogram).
    pub fn step(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series::new(name, points, Style::Step)
    }

    /// A [`Style::Points`] series.
    pub fn points(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series::new(name, points, Style::Points)
    }
}

/// A plot to render as SVG: title, labelled axes with units, size, scales and series.
///
/// Built by value:
///
/// ```
/// use pacer_report::{Plot, Series};
/// let plot = Plot::new("Callback duration")
///     .x_axis("time", "s")
///     .y_axis("duration", "µs")
///     .size(800, 360)
///     .y_range(0.0, 500.0)
///     .series(Series::line("callback", vec![(0.0, 120.0), (1.0, 131.0)]));
/// let rendered = plot.render().unwrap();
/// assert!(rendered.svg.starts_with("<svg"));
/// ```
///
/// # Downsampling
///
/// A series with more than four points per pixel column of the plot area (about 2 600 points at
/// the default size) is reduced before drawing, because the extra points cannot show and a 60 s
/// per-callback series (45 000 points) would otherwise make a report of megabytes:
///
/// - [`Style::Line`] and [`Style::Step`] keep, for each run of consecutive points falling in one
///   pixel column, the first, lowest, highest and last point, in their original order. Spikes
///   survive and the line between columns is the one the full series draws (this is the "M4"
///   reduction). If the x values are not sorted, runs are short and this cannot reach the bound;
///   such a series is then drawn as its per-column envelope (first, lowest, highest, last of each
///   column, columns left to right).
/// - [`Style::Points`] keeps the lowest and highest point of each pixel column.
///
/// Either way a series draws at most four points per pixel column, and the note under the plot
/// says how many points were drawn out of how many.
#[derive(Debug, Clone, PartialEq)]
pub struct Plot {
    title: String,
    x_label: String,
    y_label: String,
    width: u32,
    height: u32,
    log_x: bool,
    log_y: bool,
    y_range: Option<(f64, f64)>,
    series: Vec<Series>,
}

/// A plot rendered by [`Plot::render`].
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedPlot {
    /// One `<svg>` element, no XML declaration, ready to inline in HTML.
    pub svg: String,
    /// What was not drawn as given (skipped, clamped, downsampled), one sentence each.
    pub notes: Vec<String>,
    /// Points drawn over all series, after downsampling (steps count their corners).
    pub drawn_points: usize,
}

pub(crate) fn axis_text(label: &str, unit: &str) -> String {
    if unit.is_empty() {
        label.to_string()
    } else {
        format!("{label} ({unit})")
    }
}

/// Control characters are not allowed in XML text; a tab or newline becomes a space, anything
/// else the replacement character so the reader sees something was there.
pub(crate) fn clean_text(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => ' ',
            c if c.is_control() => '\u{FFFD}',
            c => c,
        })
        .collect()
}

/// A tick label: plain decimal with at most six significant digits (so 0.1 + 0.2 prints as 0.3),
/// or `2.5e-4` style outside [10⁻³, 10⁶).
pub(crate) fn fmt_tick(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v.is_finite() { "0".into() } else { v.to_string() };
    }
    let a = v.abs();
    let s = if !(1e-3..1e6).contains(&a) {
        let s = format!("{v:.3e}");
        match s.split_once('e') {
            Some((m, e)) => format!("{}e{e}", trim_zeros(m)),
            None => s,
        }
    } else {
        let decimals = (5 - a.log10().floor() as i32).clamp(0, 9) as usize;
        trim_zeros(&format!("{v:.decimals$}")).to_string()
    };
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// A series after cleaning: the points to draw and what happened to the others.
struct Prepared {
    name: String,
    style: Style,
    /// Runs of drawable points: a skipped point ends a line (a gap, not a line across it).
    /// Points series have one segment.
    segments: Vec<Vec<(f64, f64)>>,
    /// Whiskers of an error-bar series: (x, low, high), clamped like the points.
    whiskers: Vec<(f64, f64, f64)>,
    /// Points kept, before step corners and downsampling.
    kept: usize,
    non_finite: usize,
    non_positive: usize,
    clamped: usize,
}

impl Plot {
    /// A plot titled `title`, 720 × 400 pixels, linear axes, y range fitted to the data.
    pub fn new(title: &str) -> Plot {
        Plot {
            title: title.to_string(),
            x_label: String::new(),
            y_label: String::new(),
            width: 720,
            height: 400,
            log_x: false,
            log_y: false,
            y_range: None,
            series: Vec::new(),
        }
    }

    /// The x axis label, shown as "label (unit)"; an empty unit shows the label alone.
    pub fn x_axis(mut self, label: &str, unit: &str) -> Plot {
        self.x_label = axis_text(label, unit);
        self
    }

    /// The y axis label, shown as "label (unit)"; an empty unit shows the label alone.
    pub fn y_axis(mut self, label: &str, unit: &str) -> Plot {
        self.y_label = axis_text(label, unit);
        self
    }

    /// The SVG's size in pixels (it scales down to the page width in the report).
    pub fn size(mut self, width: u32, height: u32) -> Plot {
        self.width = width;
        self.height = height;
        self
    }

    /// A logarithmic x axis; points with x ≤ 0 are skipped and noted.
    pub fn log_x(mut self, on: bool) -> Plot {
        self.log_x = on;
        self
    }

    /// A logarithmic y axis; points with y ≤ 0 are skipped and noted.
    pub fn log_y(mut self, on: bool) -> Plot {
        self.log_y = on;
        self
    }

    /// A fixed y range instead of one fitted to the data; points outside are drawn on its edge
    /// and counted in a note.
    pub fn y_range(mut self, min: f64, max: f64) -> Plot {
        self.y_range = Some((min, max));
        self
    }

    /// Adds a series (colours follow [`PALETTE`] in the order series are added).
    pub fn series(mut self, series: Series) -> Plot {
        self.series.push(series);
        self
    }

    /// Adds a series in place, for building a plot in a loop.
    pub fn add_series(&mut self, series: Series) -> &mut Plot {
        self.series.push(series);
        self
    }

    pub fn title(&self) -> &str {
        &self.title
    }

    fn invalid(&self, reason: String) -> ReportError {
        ReportError::InvalidPlot {
            title: self.title.clone(),
            reason,
        }
    }

    fn validate(&self) -> Result<(), ReportError> {
        let (w, h) = (self.width, self.height);
        if w < MIN_SIZE.0 || h < MIN_SIZE.1 || w > MAX_SIZE.0 || h > MAX_SIZE.1 {
            return Err(self.invalid(format!(
                "size {w} × {h}: expected {}–{} × {}–{} pixels",
                MIN_SIZE.0, MAX_SIZE.0, MIN_SIZE.1, MAX_SIZE.1
            )));
        }
        if let Some((lo, hi)) = self.y_range {
            if !(lo.is_finite() && hi.is_finite() && lo < hi) {
                return Err(self.invalid(format!(
                    "y range [{lo}, {hi}]: expected finite bounds with min < max"
                )));
            }
            if self.log_y && lo <= 0.0 {
                return Err(self.invalid(format!("y range [{lo}, {hi}]: a log y axis needs min > 0")));
            }
        }
        Ok(())
    }

    fn prepare(&self) -> Vec<Prepared> {
        self.series
            .iter()
            .map(|s| {
                let mut p = Prepared {
                    name: clean_text(&s.name),
                    style: s.style,
                    segments: Vec::new(),
                    whiskers: Vec::new(),
                    kept: 0,
                    non_finite: 0,
                    non_positive: 0,
                    clamped: 0,
                };
                let x_ok = |x: f64| x.is_finite() && !(self.log_x && x <= 0.0);
                let mut current: Vec<(f64, f64)> = Vec::new();
                for (i, &(x, mut y)) in s.points.iter().enumerate() {
                    let finite = x.is_finite() && y.is_finite();
                    if !finite || (self.log_x && x <= 0.0) || (self.log_y && y <= 0.0) {
                        if finite {
                            p.non_positive += 1;
                        } else {
                            p.non_finite += 1;
                        }
                        if matches!(s.style, Style::Points | Style::ErrorBars) {
                            continue;
                        }
                        // A step holds its level until the next x even when the next y cannot
                        // be drawn (a histogram's empty bin on a log axis): keep the hold.
                        if let (Style::Step, Some(&(_, last_y)), true) = (s.style, current.last(), x_ok(x)) {
                            current.push((x, last_y));
                        }
                        if !current.is_empty() {
                            p.segments.push(std::mem::take(&mut current));
                        }
                        continue;
                    }
                    if let Some((lo, hi)) = self.y_range {
                        if y < lo || y > hi {
                            p.clamped += 1;
                            y = y.clamp(lo, hi);
                        }
                    }
                    if s.style == Style::ErrorBars {
                        let e = s.errors.get(i).copied().filter(|e| e.is_finite() && *e > 0.0);
                        if let Some(e) = e {
                            let mut lo = y - e;
                            let mut hi = y + e;
                            if self.log_y && lo <= 0.0 {
                                lo = y;
                            }
                            if let Some((a, b)) = self.y_range {
                                lo = lo.clamp(a, b);
                                hi = hi.clamp(a, b);
                            }
                            p.whiskers.push((x, lo, hi));
                        }
                    }
                    p.kept += 1;
                    current.push((x, y));
                }
                if !current.is_empty() {
                    p.segments.push(current);
                }
                p
            })
            .collect()
    }

    /// Renders the plot to one `<svg>` element plus notes on what was not drawn as given.
    pub fn render(&self) -> Result<RenderedPlot, ReportError> {
        self.validate()?;
        let prepared = self.prepare();
        let mut notes = Vec::new();
        for p in &prepared {
            if p.non_finite > 0 {
                notes.push(format!(
                    "“{}”: {} point{} skipped (NaN or infinite).",
                    p.name,
                    p.non_finite,
                    plural(p.non_finite)
                ));
            }
            if p.non_positive > 0 {
                notes.push(format!(
                    "“{}”: {} point{} ≤ 0 not shown on the log axis.",
                    p.name,
                    p.non_positive,
                    plural(p.non_positive)
                ));
            }
            if p.clamped > 0 {
                notes.push(format!(
                    "“{}”: {} point{} outside the y range drawn on its edge.",
                    p.name,
                    p.clamped,
                    plural(p.clamped)
                ));
            }
        }

        let all = || {
            prepared.iter().flat_map(|p| {
                p.segments
                    .iter()
                    .flat_map(|s| s.iter().copied())
                    .chain(p.whiskers.iter().flat_map(|&(x, lo, hi)| [(x, lo), (x, hi)]))
            })
        };
        let empty = all().next().is_none();
        if empty {
            notes.push(if self.series.is_empty() {
                "No series to plot.".to_string()
            } else {
                "No data: every series is empty after skipping the points above.".to_string()
            });
        }
        let (x0, x1) = if empty {
            default_range(self.log_x)
        } else {
            let (lo, hi) = all().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
                (lo.min(p.0), hi.max(p.0))
            });
            widen(lo, hi, self.log_x)
        };
        let (y0, y1) = match self.y_range {
            Some(r) => r,
            None if empty => default_range(self.log_y),
            None => {
                let (lo, hi) = all().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
                    (lo.min(p.1), hi.max(p.1))
                });
                pad(lo, hi, self.log_y)
            }
        };

        let mut svg = String::new();
        // The series, written by us rather than plotters (see `draw`), added after the axes.
        let mut layer = String::new();
        let drawn;
        {
            let root = SVGBackend::with_string(&mut svg, (self.width, self.height)).into_drawing_area();
            let r = match (self.log_x, self.log_y) {
                (false, false) => self.draw(&root, x0..x1, y0..y1, &prepared, empty, &mut layer),
                (true, false) => self.draw(&root, (x0..x1).log_scale(), y0..y1, &prepared, empty, &mut layer),
                (false, true) => self.draw(&root, x0..x1, (y0..y1).log_scale(), &prepared, empty, &mut layer),
                (true, true) => self.draw(
                    &root,
                    (x0..x1).log_scale(),
                    (y0..y1).log_scale(),
                    &prepared,
                    empty,
                    &mut layer,
                ),
            };
            drawn = r.map_err(|message| ReportError::Draw {
                title: self.title.clone(),
                message,
            })?;
            root.present().map_err(|e| ReportError::Draw {
                title: self.title.clone(),
                message: e.to_string(),
            })?;
        }
        for (p, &(n, reduced)) in prepared.iter().zip(&drawn) {
            if reduced {
                notes.push(format!(
                    "“{}”: {} points drawn as {n} (first, lowest, highest and last per pixel column).",
                    p.name, p.kept
                ));
            }
        }
        // plotters ends its document with "</svg>\n".
        let Some(end) = svg.rfind("</svg>") else {
            return Err(ReportError::Draw {
                title: self.title.clone(),
                message: "plotters wrote no </svg>".into(),
            });
        };
        svg.insert_str(end, &layer);
        // Screen readers announce the title; the SVG otherwise has no accessible name.
        let svg = svg.replacen(
            "<svg ",
            &format!(
                "<svg role=\"img\" aria-label=\"{}\" ",
                crate::html::escape(&clean_text(&self.title))
            ),
            1,
        );
        Ok(RenderedPlot {
            svg,
            notes,
            drawn_points: drawn.iter().map(|d| d.0).sum(),
        })
    }

    /// Lays out title, legend and chart (plotters) and writes every series into `layer` (see the
    /// crate documentation for why); returns per series the points drawn and whether
    /// downsampling dropped any. Generic over the axis types so linear and log axes share one body.
    fn draw<X, Y>(
        &self,
        root: &DrawingArea<SVGBackend<'_>, Shift>,
        x_spec: X,
        y_spec: Y,
        series: &[Prepared],
        empty: bool,
        layer: &mut String,
    ) -> Result<Vec<(usize, bool)>, String>
    where
        X: AsRangedCoord<Value = f64>,
        Y: AsRangedCoord<Value = f64>,
        X::CoordDescType: ValueFormatter<f64>,
        Y::CoordDescType: ValueFormatter<f64>,
    {
        let e = |e: DrawingAreaErrorKind<_>| e.to_string();
        root.fill(&WHITE).map_err(e)?;
        let area = root
            .titled(&clean_text(&self.title), ("sans-serif", TITLE_FONT))
            .map_err(e)?;

        let legend = legend_layout(series, self.width);
        let rows = legend.iter().map(|l| l.row + 1).max().unwrap_or(0);
        let (legend_area, chart_area) = area.split_vertically(rows * LEGEND_ROW + 4);
        for (item, s) in legend.iter().zip(series) {
            let colour = colour(item.index);
            let y = (item.row * LEGEND_ROW + LEGEND_ROW / 2) as i32;
            let x = item.x as i32;
            if matches!(s.style, Style::Points | Style::ErrorBars) {
                legend_area
                    .draw(&Circle::new((x + 10, y), 3, colour.filled()))
                    .map_err(e)?;
            } else {
                legend_area
                    .draw(&PathElement::new(
                        vec![(x, y), (x + 20, y)],
                        colour.stroke_width(2),
                    ))
                    .map_err(e)?;
            }
            legend_area
                .draw(&Text::new(
                    s.name.clone(),
                    (x + 26, y - 6),
                    ("sans-serif", LABEL_FONT),
                ))
                .map_err(e)?;
        }

        let mut chart = ChartBuilder::on(&chart_area)
            .margin_right(24)
            .margin_top(6)
            .x_label_area_size(44)
            .y_label_area_size(76)
            .build_cartesian_2d(x_spec, y_spec)
            .map_err(e)?;
        let fmt = |v: &f64| fmt_tick(*v);
        let grid = RGBColor(0xDD, 0xDD, 0xDD);
        chart
            .configure_mesh()
            .max_light_lines(0)
            .bold_line_style(grid)
            .axis_style(BLACK)
            .x_labels(8)
            .y_labels(7)
            .x_label_formatter(&fmt)
            .y_label_formatter(&fmt)
            .label_style(("sans-serif", LABEL_FONT))
            .axis_desc_style(("sans-serif", LABEL_FONT))
            .x_desc(clean_text(&self.x_label))
            .y_desc(clean_text(&self.y_label))
            .draw()
            .map_err(e)?;

        if empty {
            let (xr, yr) = chart.plotting_area().get_pixel_range();
            let centre = ((xr.start + xr.end) / 2, (yr.start + yr.end) / 2);
            let style = TextStyle::from(("sans-serif", 24).into_font())
                .color(&RGBColor(0x66, 0x66, 0x66))
                .pos(plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Center,
                    plotters::style::text_anchor::VPos::Center,
                ));
            // get_pixel_range is in backend pixels, which are the root's coordinates.
            root.draw(&Text::new("no data", centre, style)).map_err(e)?;
            return Ok(vec![(0, false); series.len()]);
        }

        let columns = {
            let (xr, _) = chart.plotting_area().get_pixel_range();
            (xr.end - xr.start).max(1) as usize
        };
        let mut drawn = Vec::with_capacity(series.len());
        for (i, s) in series.iter().enumerate() {
            let area = chart.plotting_area();
            let column = |p: &(f64, f64)| area.map_coordinate(p).0;
            let pixels = |path: &[(f64, f64)]| -> Vec<(i32, i32)> {
                let mut px: Vec<(i32, i32)> = path.iter().map(|p| area.map_coordinate(p)).collect();
                // Consecutive points on one pixel draw nothing more.
                px.dedup();
                px
            };
            let stroke = PALETTE[i % PALETTE.len()];
            let mut dots: Vec<(i32, i32)> = Vec::new();
            let mut count = 0;
            // Whether downsampling removed points (not merely pixel duplicates): noted.
            let reduced;
            match s.style {
                Style::Line | Style::Step => {
                    let paths: Vec<Vec<(f64, f64)>> = if s.style == Style::Step {
                        s.segments.iter().map(|p| steps(p)).collect()
                    } else {
                        s.segments.clone()
                    };
                    reduced = paths.iter().map(Vec::len).sum::<usize>() > POINTS_PER_COLUMN * columns;
                    for path in downsample_paths(paths, columns, column) {
                        let px = pixels(&path);
                        count += px.len();
                        if px.len() == 1 {
                            // A single point has no line; a dot shows it is there.
                            dots.push(px[0]);
                            continue;
                        }
                        let _ = write!(
                            layer,
                            "<polyline fill=\"none\" stroke=\"{stroke}\" stroke-width=\"2\" \
                             stroke-linejoin=\"round\" points=\""
                        );
                        for (k, (x, y)) in px.iter().enumerate() {
                            let sep = if k == 0 { "" } else { " " };
                            let _ = write!(layer, "{sep}{x},{y}");
                        }
                        layer.push_str("\"/>\n");
                    }
                }
                Style::ErrorBars => {
                    reduced = false;
                    let mut px: Vec<(i32, i32)> = s
                        .segments
                        .concat()
                        .iter()
                        .map(|p| area.map_coordinate(p))
                        .collect();
                    px.dedup();
                    count = px.len();
                    dots = px;
                    if !s.whiskers.is_empty() {
                        let _ = write!(
                            layer,
                            "<path fill=\"none\" stroke=\"{stroke}\" stroke-width=\"1.5\" d=\""
                        );
                        for &(x, lo, hi) in &s.whiskers {
                            let (px, py0) = area.map_coordinate(&(x, lo));
                            let (_, py1) = area.map_coordinate(&(x, hi));
                            let _ = write!(layer, "M{px} {py0}V{py1}M{} {py0}h8M{} {py1}h8", px - 4, px - 4);
                        }
                        layer.push_str("\"/>\n");
                    }
                }
                Style::Points => {
                    let all: Vec<(f64, f64)> = s.segments.concat();
                    reduced = all.len() > POINTS_PER_COLUMN * columns;
                    let mut px = pixels(&downsample_points(&all, columns, column));
                    px.sort_unstable();
                    px.dedup();
                    count = px.len();
                    dots = px;
                }
            }
            if !dots.is_empty() {
                // Zero-length segments with round caps draw dots at a tenth of the bytes of
                // one <circle> element each.
                let _ = write!(
                    layer,
                    "<path fill=\"none\" stroke=\"{stroke}\" stroke-width=\"4\" \
                     stroke-linecap=\"round\" d=\""
                );
                for (x, y) in &dots {
                    let _ = write!(layer, "M{x} {y}h0");
                }
                layer.push_str("\"/>\n");
            }
            drawn.push((count, reduced));
        }
        Ok(drawn)
    }
}

/// Where a legend entry goes: its row and left x in the legend strip.
struct LegendItem {
    index: usize,
    row: u32,
    x: u32,
}

/// Legend entries left to right, wrapping to a new row when the next one would not fit; the
/// legend sits between title and chart so it never hides data.
fn legend_layout(series: &[Prepared], width: u32) -> Vec<LegendItem> {
    let (left, right) = (16, width.saturating_sub(16));
    let (mut row, mut x) = (0, left);
    series
        .iter()
        .enumerate()
        .map(|(index, s)| {
            let w = 26 + (s.name.chars().count() as f64 * CHAR_WIDTH).ceil() as u32 + 18;
            if x > left && x + w > right {
                row += 1;
                x = left;
            }
            let item = LegendItem { index, row, x };
            x += w;
            item
        })
        .collect()
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn colour(i: usize) -> RGBColor {
    let (r, g, b) = PALETTE_RGB[i % PALETTE_RGB.len()];
    RGBColor(r, g, b)
}

fn default_range(log: bool) -> (f64, f64) {
    if log {
        (1.0, 10.0)
    } else {
        (0.0, 1.0)
    }
}

/// A range that has width: a single value gets a neighbourhood around it.
fn widen(lo: f64, hi: f64, log: bool) -> (f64, f64) {
    if lo < hi {
        (lo, hi)
    } else if log {
        (lo / 2.0, hi * 2.0)
    } else if lo == 0.0 {
        (-1.0, 1.0)
    } else {
        let d = lo.abs() * 0.1;
        (lo - d, hi + d)
    }
}

/// The data's y range with 5 % room above and below (multiplicative on a log axis), not
/// crossing zero when the data does not (a latency axis should not show negative times).
fn pad(lo: f64, hi: f64, log: bool) -> (f64, f64) {
    let (lo, hi) = widen(lo, hi, log);
    if log {
        let f = (hi / lo).powf(0.05);
        (lo / f, hi * f)
    } else {
        let d = (hi - lo) * 0.05;
        let a = if lo >= 0.0 { (lo - d).max(0.0) } else { lo - d };
        let b = if hi <= 0.0 { (hi + d).min(0.0) } else { hi + d };
        (a, b)
    }
}

fn step_len(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        2 * n - 1
    }
}

/// The corners of a staircase through `points`: y holds until the next x, then jumps.
fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(step_len(points.len()));
    for (i, &p) in points.iter().enumerate() {
        if i > 0 {
            out.push((p.0, points[i - 1].1));
        }
        out.push(p);
    }
    out
}

/// First, lowest, highest and last index of a group, in index order, without duplicates.
fn m4(group: &[usize], y: impl Fn(usize) -> f64, out: &mut Vec<usize>) {
    let (first, last) = (group[0], group[group.len() - 1]);
    let lowest = *group
        .iter()
        .min_by(|&&a, &&b| y(a).total_cmp(&y(b)))
        .expect("non-empty group");
    let highest = *group
        .iter()
        .max_by(|&&a, &&b| y(a).total_cmp(&y(b)))
        .expect("non-empty group");
    let mut keep = [first, lowest, highest, last];
    keep.sort_unstable();
    for (k, &i) in keep.iter().enumerate() {
        if k == 0 || keep[k - 1] != i {
            out.push(i);
        }
    }
}

/// First, lowest, highest and last point of each run of consecutive points in one column.
fn m4_runs(path: &[(f64, f64)], cols: &[i32], keep: &mut Vec<usize>) {
    let y = |i: usize| path[i].1;
    let mut start = 0;
    for i in 1..=path.len() {
        if i == path.len() || cols[i] != cols[start] {
            let run: Vec<usize> = (start..i).collect();
            m4(&run, y, keep);
            start = i;
        }
    }
}

/// Reduces paths (the segments of one series) to at most `POINTS_PER_COLUMN` points per pixel
/// column in all; see [`Plot`]'s documentation on downsampling. `column` maps a point to its
/// pixel column.
pub(crate) fn downsample_paths(
    paths: Vec<Vec<(f64, f64)>>,
    columns: usize,
    column: impl Fn(&(f64, f64)) -> i32,
) -> Vec<Vec<(f64, f64)>> {
    let bound = POINTS_PER_COLUMN * columns;
    if paths.iter().map(Vec::len).sum::<usize>() <= bound {
        return paths;
    }
    let reduced: Vec<Vec<(f64, f64)>> = paths
        .iter()
        .map(|path| {
            let cols: Vec<i32> = path.iter().map(&column).collect();
            let mut keep = Vec::new();
            m4_runs(path, &cols, &mut keep);
            keep.into_iter().map(|i| path[i]).collect()
        })
        .collect();
    if reduced.iter().map(Vec::len).sum::<usize>() <= bound {
        return reduced;
    }
    // Unsorted x or many short segments: one envelope, each column as a whole, left to right.
    let all: Vec<(f64, f64)> = paths.concat();
    let mut by_column: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    for (i, p) in all.iter().enumerate() {
        by_column.entry(column(p)).or_default().push(i);
    }
    let mut keep = Vec::new();
    for group in by_column.values() {
        m4(group, |i| all[i].1, &mut keep);
    }
    // Only points mapped outside the plot area (none, the range is fitted or clamped) could
    // make more columns than `columns`.
    keep.truncate(bound);
    vec![keep.into_iter().map(|i| all[i]).collect()]
}

/// Reduces a scatter to the lowest and highest point of each pixel column when it has more
/// than `POINTS_PER_COLUMN` points per column.
pub(crate) fn downsample_points(
    points: &[(f64, f64)],
    columns: usize,
    column: impl Fn(&(f64, f64)) -> i32,
) -> Vec<(f64, f64)> {
    if points.len() <= POINTS_PER_COLUMN * columns {
        return points.to_vec();
    }
    // Per column: (lowest, highest).
    type Extremes = ((f64, f64), (f64, f64));
    let mut extremes: BTreeMap<i32, Extremes> = BTreeMap::new();
    for p in points {
        extremes
            .entry(column(p))
            .and_modify(|(lo, hi)| {
                if p.1 < lo.1 {
                    *lo = *p;
                }
                if p.1 > hi.1 {
                    *hi = *p;
                }
            })
            .or_insert((*p, *p));
    }
    extremes
        .into_values()
        .flat_map(|(lo, hi)| if lo == hi { vec![lo] } else { vec![lo, hi] })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(fmt_tick(0.1 + 0.2), "0.3");
        assert_eq!(fmt_tick(0.0), "0");
        assert_eq!(fmt_tick(-0.0), "0");
        assert_eq!(fmt_tick(1500.0), "1500");
        assert_eq!(fmt_tick(2.5e-4), "2.5e-4");
        assert_eq!(fmt_tick(1e7), "1e7");
        assert_eq!(fmt_tick(-12.25), "-12.25");
        assert_eq!(fmt_tick(123456.7), "123457");
    }

    #[test]
    fn steps_hold_then_jump() {
        assert_eq!(
            steps(&[(1.0, 0.5), (2.0, 1.0)]),
            vec![(1.0, 0.5), (2.0, 0.5), (2.0, 1.0)]
        );
        assert!(steps(&[]).is_empty());
    }

    #[test]
    fn m4_keeps_spikes_and_order() {
        // 10 points per column over 100 columns, one spike in column 42.
        let path: Vec<(f64, f64)> = (0..1000)
            .map(|i| (i as f64, if i == 423 { 100.0 } else { (i % 10) as f64 }))
            .collect();
        let out = downsample_paths(vec![path], 100, |p| (p.0 / 10.0) as i32).concat();
        assert!(out.len() <= 400, "{}", out.len());
        assert!(out.contains(&(423.0, 100.0)));
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0), "order kept");
        assert_eq!(out.first(), Some(&(0.0, 0.0)));
        assert_eq!(out.last(), Some(&(999.0, 9.0)));
    }

    #[test]
    fn unsorted_path_still_meets_the_bound() {
        let path: Vec<(f64, f64)> = (0..10_000)
            .map(|i| (((i * 7919) % 10_000) as f64, (i % 13) as f64))
            .collect();
        let out = downsample_paths(vec![path], 50, |p| (p.0 / 200.0) as i32).concat();
        assert!(out.len() <= 200, "{}", out.len());
    }

    #[test]
    fn short_paths_are_untouched() {
        let path = vec![(0.0, 1.0), (0.0, 2.0), (0.0, 3.0)];
        assert_eq!(downsample_paths(vec![path.clone()], 1, |_| 0), vec![path]);
    }

    #[test]
    fn many_short_segments_still_meet_the_bound() {
        let paths: Vec<Vec<(f64, f64)>> = (0..5000).map(|i| vec![(i as f64, 1.0)]).collect();
        let out = downsample_paths(paths, 10, |p| (p.0 / 500.0) as i32);
        assert!(out.concat().len() <= 40, "{}", out.concat().len());
    }

    #[test]
    fn scatter_keeps_column_extremes() {
        let pts: Vec<(f64, f64)> = (0..1000).map(|i| ((i % 10) as f64, i as f64)).collect();
        let out = downsample_points(&pts, 10, |p| p.0 as i32);
        assert_eq!(out.len(), 20);
        assert!(out.contains(&(9.0, 999.0)) && out.contains(&(0.0, 0.0)));
    }

    #[test]
    fn invalid_settings_are_errors_not_panics() {
        for plot in [
            Plot::new("t").size(10, 10),
            Plot::new("t").y_range(1.0, 1.0),
            Plot::new("t").y_range(f64::NAN, 1.0),
            Plot::new("t").log_y(true).y_range(0.0, 1.0),
        ] {
            assert!(matches!(plot.render(), Err(ReportError::InvalidPlot { .. })));
        }
    }
}
