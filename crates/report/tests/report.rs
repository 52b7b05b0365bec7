//! The report as a reader gets it: well-formed HTML, parseable SVG, escaped text, honest notes,
//! bounded size, and a write that never damages what was there.

use std::fs;
use std::path::PathBuf;

use pacer_report::{cdf, histogram, Plot, Report, ReportError, Series, Style};

const HOSTILE: &str = "<script>alert(\"x&y\")</script>";

/// Checks that every non-void element is closed in order. Not an HTML parser: enough to catch
/// an unclosed section, a table cell left open, or a figure closed twice.
fn assert_balanced(html: &str) {
    const VOID: [&str; 4] = ["meta", "br", "hr", "img"];
    let mut stack: Vec<String> = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find('<') {
        rest = &rest[start..];
        let end = rest.find('>').expect("unterminated tag");
        let tag = &rest[1..end];
        rest = &rest[end + 1..];
        if tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack.pop().unwrap_or_else(|| panic!("</{name}> closes nothing"));
            assert_eq!(open, name, "</{name}> closes <{open}>");
            continue;
        }
        let name: String = tag.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
        assert!(!name.is_empty(), "bad tag <{tag}>");
        if tag.ends_with('/') || VOID.contains(&name.as_str()) {
            continue;
        }
        if name == "style" {
            // CSS may contain '>' (child selectors); skip to the end tag.
            let close = rest.find("</style>").expect("unclosed <style>");
            rest = &rest[close + "</style>".len()..];
            continue;
        }
        stack.push(name);
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
}

fn svgs(html: &str) -> Vec<&str> {
    html.match_indices("<svg")
        .map(|(i, _)| {
            let end = html[i..].find("</svg>").expect("unclosed <svg>") + i + "</svg>".len();
            &html[i..end]
        })
        .collect()
}

fn sample_report() -> Report {
    let values: Vec<f64> = (0..500).map(|i| 100.0 + ((i * 37) % 91) as f64).collect();
    let mut r = Report::new("pacer audio");
    r.subtitle("demo")
        .meta("command", "pacer audio --seconds 60")
        .meta("seed", "7")
        .paragraph("before any section")
        .section("Latency")
        .paragraph("text");
    r.plot(
        &Plot::new("CDF")
            .x_axis("latency", "µs")
            .y_axis("fraction", "")
            .series(Series::step("a", cdf(&values)))
            .series(Series::line("b", vec![(100.0, 0.0), (190.0, 1.0)])),
    )
    .unwrap();
    r.section("Table").table(
        &["name", "value"],
        &[vec!["x".into(), "1.5".into()], vec!["y".into()]],
    );
    r.plot(
        &Plot::new("Histogram")
            .log_y(true)
            .series(Series::step("h", histogram(&values, 20))),
    )
    .unwrap();
    r
}

#[test]
fn html_is_balanced_and_every_svg_parses() {
    let html = sample_report().to_html();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_balanced(&html);
    let svgs = svgs(&html);
    assert_eq!(svgs.len(), 2);
    assert_eq!(html.matches("</svg>").count(), 2);
    for &svg in &svgs {
        let doc = roxmltree::Document::parse(svg).expect("SVG is well-formed XML");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        // Axis labels are real text the browser sets, not paths from a font library.
        let texts: Vec<&str> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .map(str::trim)
            .collect();
        assert!(texts.len() > 5, "{texts:?}");
    }
    let svg = svgs[0];
    for label in ["CDF", "latency (µs)", "fraction", "a", "b"] {
        assert!(svg.contains(&format!("\n{label}\n")), "{label} missing");
    }
}

#[test]
fn the_checker_catches_unbalanced_markup() {
    for bad in ["<p><b></p></b>", "<section><p></p>", "</p>"] {
        assert!(
            std::panic::catch_unwind(|| assert_balanced(bad)).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn no_scripts_and_no_external_resources() {
    let html = sample_report().to_html();
    assert!(!html.contains("<script"));
    assert!(!html.contains("http://") || html.contains("http://www.w3.org/2000/svg"));
    assert!(!html.contains("https://"));
    assert!(html.contains("Content-Security-Policy"));
}

#[test]
fn all_user_text_is_escaped() {
    let mut r = Report::new(HOSTILE);
    r.subtitle(HOSTILE)
        .meta(HOSTILE, HOSTILE)
        .section(HOSTILE)
        .paragraph(HOSTILE)
        .table(&[HOSTILE], &[vec![HOSTILE.to_string()]]);
    r.plot(
        &Plot::new(HOSTILE)
            .x_axis(HOSTILE, HOSTILE)
            .y_axis(HOSTILE, "")
            .series(Series::line(HOSTILE, vec![(0.0, 1.0), (1.0, 2.0)])),
    )
    .unwrap();
    let html = r.to_html();
    assert!(!html.contains("<script"), "raw markup leaked");
    assert!(!html.contains("\"x&y\""));
    // HTML parts use &quot;, the SVG (plotters) too.
    assert!(html.contains("&lt;script&gt;alert(&quot;x&amp;y&quot;)&lt;/script&gt;"));
    assert_balanced(&html);
    for svg in svgs(&html) {
        roxmltree::Document::parse(svg).expect("escaped SVG parses");
    }
}

#[test]
fn non_finite_values_are_skipped_and_counted() {
    let points = vec![
        (0.0, 1.0),
        (1.0, f64::NAN),
        (2.0, 3.0),
        (f64::INFINITY, 1.0),
        (4.0, f64::NEG_INFINITY),
        (5.0, 2.0),
    ];
    let r = Plot::new("nan")
        .series(Series::new("s", points, Style::Points))
        .render()
        .unwrap();
    assert_eq!(r.drawn_points, 3);
    assert_eq!(r.notes, vec!["“s”: 3 points skipped (NaN or infinite)."]);
    assert!(!r.svg.contains("NaN") && !r.svg.contains("inf"));
    roxmltree::Document::parse(&r.svg).unwrap();
}

#[test]
fn a_gap_in_a_line_is_a_gap() {
    let points = vec![(0.0, 1.0), (1.0, 2.0), (2.0, f64::NAN), (3.0, 2.0), (4.0, 1.0)];
    let r = Plot::new("gap")
        .series(Series::line("s", points))
        .render()
        .unwrap();
    // Two polylines of two points each, not one line across the missing value.
    assert_eq!(
        r.svg
            .matches("<polyline fill=\"none\" stroke=\"#0072B2\"")
            .count(),
        2,
        "{}",
        r.svg
    );
    assert_eq!(r.drawn_points, 4);
}

#[test]
fn empty_plots_say_no_data() {
    for plot in [
        Plot::new("none"),
        Plot::new("empty").series(Series::line("s", vec![])),
        Plot::new("all nan").series(Series::step("s", vec![(f64::NAN, 1.0)])),
        Plot::new("log")
            .log_x(true)
            .series(Series::line("s", vec![(0.0, 1.0), (-1.0, 2.0)])),
    ] {
        let r = plot.render().unwrap();
        assert!(r.svg.contains("\nno data\n"), "{}", plot.title());
        assert_eq!(r.drawn_points, 0);
        assert!(r
            .notes
            .iter()
            .any(|n| n.contains("o series") || n.contains("No data")));
        roxmltree::Document::parse(&r.svg).unwrap();
    }
}

#[test]
fn log_axes_skip_non_positive_values() {
    let r = Plot::new("log")
        .log_x(true)
        .log_y(true)
        .series(Series::points(
            "s",
            vec![(0.0, 1.0), (1.0, 0.0), (10.0, 100.0), (1000.0, 1.0)],
        ))
        .render()
        .unwrap();
    assert_eq!(r.drawn_points, 2);
    assert_eq!(r.notes, vec!["“s”: 2 points ≤ 0 not shown on the log axis."]);
}

#[test]
fn a_fixed_y_range_clamps_and_says_so() {
    let r = Plot::new("range")
        .y_range(0.0, 10.0)
        .series(Series::line("s", vec![(0.0, 5.0), (1.0, 50.0), (2.0, -1.0)]))
        .render()
        .unwrap();
    assert_eq!(r.drawn_points, 3);
    assert_eq!(
        r.notes,
        vec!["“s”: 2 points outside the y range drawn on its edge."]
    );
}

/// 60 s of callbacks at 750 Hz, with jitter so no two neighbours share a y.
fn per_callback_series() -> Vec<(f64, f64)> {
    (0..45_000)
        .map(|i| {
            let t = i as f64 / 750.0;
            (
                t,
                150.0 + ((i * 7919) % 97) as f64 + if i % 5000 == 17 { 400.0 } else { 0.0 },
            )
        })
        .collect()
}

#[test]
fn long_series_are_bounded_per_pixel_column_and_keep_spikes() {
    let width = 800;
    for style in [Style::Line, Style::Step, Style::Points] {
        let r = Plot::new("long")
            .size(width, 300)
            .series(Series::new("s", per_callback_series(), style))
            .render()
            .unwrap();
        assert!(
            r.drawn_points <= 4 * width as usize,
            "{style:?}: {} points drawn",
            r.drawn_points
        );
        assert!(r.drawn_points > 100, "{style:?}: {}", r.drawn_points);
        assert!(r.notes.iter().any(|n| n.contains("45000 points drawn as")));
        // The spikes (y = 550 + …) set the top of the fitted range: the highest y label is
        // above 500 only if they were kept.
        assert!(r.svg.contains("\n500\n"), "{style:?}: spike lost");
        assert!(r.svg.len() < 40_000, "{style:?}: {} bytes", r.svg.len());
    }
}

#[test]
fn short_series_are_drawn_whole() {
    let points: Vec<(f64, f64)> = (0..500).map(|i| (i as f64, (i % 7) as f64)).collect();
    let r = Plot::new("short")
        .series(Series::line("s", points))
        .render()
        .unwrap();
    assert_eq!(r.drawn_points, 500);
    assert!(r.notes.is_empty(), "{:?}", r.notes);
}

#[test]
fn legend_names_every_series_in_distinct_colours() {
    let mut plot = Plot::new("many");
    for i in 0..8 {
        plot.add_series(Series::line(
            &format!("series {i}"),
            vec![(0.0, i as f64), (1.0, 1.0)],
        ));
    }
    let r = plot.render().unwrap();
    for (i, colour) in pacer_report::PALETTE.iter().enumerate() {
        assert!(r.svg.contains(&format!("\nseries {i}\n")));
        assert!(r.svg.contains(&format!("stroke=\"{colour}\"")), "{colour}");
    }
}

#[test]
fn a_failed_plot_leaves_the_report_unchanged() {
    let mut r = Report::new("t");
    let before = r.to_html();
    let err = r.plot(&Plot::new("bad").size(1, 1)).unwrap_err();
    assert!(matches!(err, ReportError::InvalidPlot { .. }), "{err}");
    assert_eq!(r.to_html(), before);
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pacer-report-it-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn write_replaces_a_file_and_refuses_a_symlink() {
    let dir = scratch("write");
    let path = dir.join("report.html");
    fs::write(&path, "old").unwrap();
    let report = sample_report();
    report.write(&path).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), report.to_html());

    let link = dir.join("link.html");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let err = Report::new("other").write(&link).unwrap_err();
    assert!(matches!(err, ReportError::NotAFile { .. }), "{err}");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(fs::read_to_string(&path).unwrap(), report.to_html());
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn write_into_a_missing_directory_is_an_io_error() {
    let dir = scratch("missing");
    let err = Report::new("t")
        .write(&dir.join("no/such/dir/report.html"))
        .unwrap_err();
    assert!(matches!(err, ReportError::Io { .. }), "{err}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pixel_duplicates_are_dropped_without_a_downsampling_note() {
    // 2 000 points on 60 distinct positions: below the downsampling bound, but most coincide.
    let points: Vec<(f64, f64)> = (0..2000).map(|i| ((i % 20) as f64, (i % 3) as f64)).collect();
    let r = Plot::new("dups")
        .series(Series::points("s", points))
        .render()
        .unwrap();
    assert_eq!(r.drawn_points, 60);
    assert!(r.notes.is_empty(), "{:?}", r.notes);
}

#[test]
fn error_bars_draw_a_dot_and_a_whisker_per_value_within_the_axes() {
    let plot = Plot::new("laxity by configuration")
        .x_axis("tasks", "")
        .y_axis("normalised laxity", "")
        .series(Series::error_bars(
            "G-EDF",
            vec![(96.0, 0.6, 0.1), (144.0, 0.7, 0.0), (192.0, -1.0, 2.0)],
        ));
    let r = plot.render().unwrap();
    let doc = roxmltree::Document::parse(&r.svg).unwrap();
    let whiskers: Vec<&str> = doc
        .descendants()
        .filter_map(|n| n.attribute("d"))
        .filter(|d| d.contains('V'))
        .collect();
    assert_eq!(whiskers.len(), 1);
    // Two whiskers (a zero error draws none), each a vertical line and two caps.
    assert_eq!(whiskers[0].matches('V').count(), 2);
    assert_eq!(whiskers[0].matches("h8").count(), 4);
    let dots = doc
        .descendants()
        .filter_map(|n| n.attribute("d"))
        .find(|d| d.contains("h0"))
        .expect("dots");
    assert_eq!(dots.matches("h0").count(), 3);
    assert_eq!(r.drawn_points, 3);
    // The y axis covers the whiskers: -1 − 2 = -3 must be on it, so a tick at or below -3.
    assert!(r.svg.lines().any(|l| l.trim() == "-3"), "no tick at -3");
}
