//! The HTML document: a [`Report`] collects blocks and writes them as one self-contained page.
//!
//! Everything a user passes in is escaped here (titles, metadata, paragraphs, table cells, plot
//! notes); plot SVG comes from plotters, which escapes its own text. The page carries its style
//! sheet inline and a Content-Security-Policy that allows nothing but that style sheet and
//! inline images, so even a hostile string that slipped through could not run a script or fetch
//! anything.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use crate::{Bars, Plot, RenderedPlot, ReportError, Timeline};

/// One self-contained HTML report. See the [crate documentation](crate) for an example.
#[derive(Debug, Clone, Default)]
pub struct Report {
    title: String,
    subtitle: Option<String>,
    meta: Vec<(String, String)>,
    blocks: Vec<Block>,
}

#[derive(Debug, Clone)]
enum Block {
    Section(String),
    Paragraph(String),
    Table {
        header: Vec<String>,
        rows: Vec<Vec<String>>,
    },
    Figure {
        svg: String,
        notes: Vec<String>,
    },
}

// Print: figures and tables stay on one page, the SVGs shrink to the page width, no dark
// backgrounds. Numbers use tabular figures so columns of digits line up.
const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;\
max-width:60rem;margin:1.5rem auto;padding:0 1rem;color:#111;line-height:1.45}\
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.25rem;margin-top:2rem;\
border-bottom:1px solid #ccc;padding-bottom:.2rem}\
.subtitle{color:#444;margin-top:0}\
dl.meta{display:grid;grid-template-columns:max-content auto;gap:.15rem 1rem;font-size:.9rem}\
dl.meta dt{font-weight:600}dl.meta dd{margin:0;font-family:ui-monospace,'DejaVu Sans Mono',monospace;\
overflow-wrap:anywhere}\
table{border-collapse:collapse;margin:1rem 0;font-size:.9rem}\
th,td{border:1px solid #ccc;padding:.25rem .6rem;text-align:left;vertical-align:top}\
th{background:#f3f3f3}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}\
figure{margin:1rem 0}svg{max-width:100%;height:auto;display:block}\
figcaption{font-size:.85rem;color:#444}figcaption p{margin:.2rem 0}\
footer{margin-top:3rem;font-size:.8rem;color:#666}\
@media print{body{max-width:none;margin:0}figure,table,dl.meta{break-inside:avoid}\
h2{break-after:avoid}}";

/// Escapes text for HTML element content and double- or single-quoted attributes; control
/// characters other than tab and newline (not allowed in HTML) become U+FFFD.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' => out.push(c),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// Whether a table cell reads as a number, possibly with a unit: `42`, `-1.5e3`, `12.5 %`,
/// `99.9%`, `130 µs`, `n/a` is not. Such columns are right-aligned so digits line up.
fn is_numeric(cell: &str) -> bool {
    let cell = cell.trim();
    // The number is the longest prefix without spaces or unit letters.
    let end = cell
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_digit()
                || matches!(c, '.' | '+' | '-' | '−' | ',')
                || ((c == 'e' || c == 'E')
                    && cell[i + 1..].starts_with(|d: char| d.is_ascii_digit() || d == '-' || d == '+')))
        })
        .map_or(cell.len(), |(i, _)| i);
    let (number, unit) = cell.split_at(end);
    let number = number.replace('−', "-").replace(',', "");
    if number.is_empty() || number.parse::<f64>().is_err() {
        return false;
    }
    let unit = unit.trim();
    unit.len() <= 8 && !unit.chars().any(|c| c.is_ascii_digit() || c.is_whitespace())
}

impl Report {
    pub fn new(title: &str) -> Report {
        Report {
            title: title.to_string(),
            ..Report::default()
        }
    }

    /// A line under the title (what was measured, in a sentence).
    pub fn subtitle(&mut self, text: &str) -> &mut Self {
        self.subtitle = Some(text.to_string());
        self
    }

    /// A key–value pair in the definition list at the top (command line, seed, date, machine),
    /// in the order added.
    pub fn meta(&mut self, key: &str, value: &str) -> &mut Self {
        self.meta.push((key.to_string(), value.to_string()));
        self
    }

    /// Starts a section; what follows belongs to it until the next section.
    pub fn section(&mut self, heading: &str) -> &mut Self {
        self.blocks.push(Block::Section(heading.to_string()));
        self
    }

    /// A paragraph of plain text (escaped; no markup is interpreted).
    pub fn paragraph(&mut self, text: &str) -> &mut Self {
        self.blocks.push(Block::Paragraph(text.to_string()));
        self
    }

    /// A table. A column whose non-empty cells all read as numbers (optionally with a unit, see
    /// the crate tests) is right-aligned with tabular figures. Rows shorter than the header are
    /// padded with empty cells.
    pub fn table(&mut self, header: &[&str], rows: &[Vec<String>]) -> &mut Self {
        self.blocks.push(Block::Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: rows.to_vec(),
        });
        self
    }

    /// Renders `plot` now and adds it as an inline SVG figure, with its notes (skipped points,
    /// downsampling) as the caption. On error the report is unchanged.
    pub fn plot(&mut self, plot: &Plot) -> Result<&mut Self, ReportError> {
        Ok(self.figure(plot.render()?))
    }

    /// Renders `timeline` now and adds it as an inline SVG figure, like [`Report::plot`].
    pub fn timeline(&mut self, timeline: &Timeline) -> Result<&mut Self, ReportError> {
        Ok(self.figure(timeline.render()?))
    }

    /// Renders `bars` now and adds it as an inline SVG figure, like [`Report::plot`].
    pub fn bars(&mut self, bars: &Bars) -> Result<&mut Self, ReportError> {
        Ok(self.figure(bars.render()?))
    }

    fn figure(&mut self, rendered: RenderedPlot) -> &mut Self {
        self.blocks.push(Block::Figure {
            svg: rendered.svg,
            notes: rendered.notes,
        });
        self
    }

    /// The whole document.
    pub fn to_html(&self) -> String {
        let mut h = String::new();
        let title = escape(&self.title);
        // write! to a String cannot fail; the results are ignored for that reason.
        let _ = write!(
            h,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
             style-src 'unsafe-inline'; img-src data:\">\n\
             <meta name=\"generator\" content=\"pacer-report {}\">\n\
             <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<header>\n\
             <h1>{title}</h1>\n",
            env!("CARGO_PKG_VERSION")
        );
        if let Some(sub) = &self.subtitle {
            let _ = writeln!(h, "<p class=\"subtitle\">{}</p>", escape(sub));
        }
        if !self.meta.is_empty() {
            h.push_str("<dl class=\"meta\">\n");
            for (k, v) in &self.meta {
                let _ = writeln!(h, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(v));
            }
            h.push_str("</dl>\n");
        }
        h.push_str("</header>\n<main>\n");
        let mut in_section = false;
        for block in &self.blocks {
            match block {
                Block::Section(heading) => {
                    if in_section {
                        h.push_str("</section>\n");
                    }
                    in_section = true;
                    let _ = writeln!(h, "<section>\n<h2>{}</h2>", escape(heading));
                }
                Block::Paragraph(text) => {
                    let _ = writeln!(h, "<p>{}</p>", escape(text));
                }
                Block::Table { header, rows } => table_html(&mut h, header, rows),
                Block::Figure { svg, notes } => {
                    h.push_str("<figure>\n");
                    h.push_str(svg);
                    if !svg.ends_with('\n') {
                        h.push('\n');
                    }
                    if !notes.is_empty() {
                        h.push_str("<figcaption>");
                        for n in notes {
                            let _ = write!(h, "<p>{}</p>", escape(n));
                        }
                        h.push_str("</figcaption>\n");
                    }
                    h.push_str("</figure>\n");
                }
            }
        }
        if in_section {
            h.push_str("</section>\n");
        }
        let _ = write!(
            h,
            "</main>\n<footer>Written by pacer-report {}; no scripts, no external resources.</footer>\n\
             </body>\n</html>\n",
            env!("CARGO_PKG_VERSION")
        );
        h
    }

    /// Writes the report to `path` atomically: a temporary file in the same directory, synced,
    /// then renamed over `path`. Refuses to replace a symlink, directory, device, FIFO or socket
    /// ([`ReportError::NotAFile`]); on any error an existing file at `path` is left as it was.
    pub fn write(&self, path: &Path) -> Result<(), ReportError> {
        let html = self.to_html();
        crate::write::write_atomic(path, |f| f.write_all(html.as_bytes()))
    }
}

fn table_html(h: &mut String, header: &[String], rows: &[Vec<String>]) {
    let width = rows.iter().map(Vec::len).chain([header.len()]).max().unwrap_or(0);
    let numeric: Vec<bool> = (0..width)
        .map(|c| {
            let mut cells = rows
                .iter()
                .filter_map(|r| r.get(c))
                .filter(|s| !s.trim().is_empty())
                .peekable();
            cells.peek().is_some() && cells.all(|s| is_numeric(s))
        })
        .collect();
    let class = |c: usize| if numeric[c] { " class=\"num\"" } else { "" };
    h.push_str("<table>\n");
    if !header.is_empty() {
        h.push_str("<thead><tr>");
        for (c, cell) in header.iter().enumerate() {
            let _ = write!(h, "<th scope=\"col\"{}>{}</th>", class(c), escape(cell));
        }
        h.push_str("</tr></thead>\n");
    }
    h.push_str("<tbody>\n");
    for row in rows {
        h.push_str("<tr>");
        for c in 0..width {
            let cell = row.get(c).map_or("", String::as_str);
            let _ = write!(h, "<td{}>{}</td>", class(c), escape(cell));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody>\n</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_controls() {
        assert_eq!(
            escape("<a href=\"x\">&'</a>\u{7}"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;\u{FFFD}"
        );
    }

    #[test]
    fn numbers_with_units_are_numeric() {
        for s in ["42", "-1.5e3", "12.5 %", "99.9%", "130 µs", "1,234", "−3", " 7 "] {
            assert!(is_numeric(s), "{s}");
        }
        for s in ["n/a", "", "SCHED_FIFO", "1 2", "e5", "10 ms 3", "v1.2.3", "-"] {
            assert!(!is_numeric(s), "{s}");
        }
    }

    #[test]
    fn numeric_columns_are_right_aligned() {
        let mut r = Report::new("t");
        r.table(
            &["policy", "p99 (µs)", "misses"],
            &[
                vec!["fifo".into(), "120.5".into(), "0".into()],
                vec!["deadline".into(), "98 µs".into(), "n/a".into()],
            ],
        );
        let html = r.to_html();
        assert!(html.contains("<th scope=\"col\">policy</th>"));
        assert!(html.contains("<th scope=\"col\" class=\"num\">p99 (µs)</th>"));
        assert!(html.contains("<td class=\"num\">98 µs</td>"));
        // "n/a" makes the third column text.
        assert!(html.contains("<td>n/a</td>") && html.contains("<td>0</td>"));
    }

    #[test]
    fn short_rows_are_padded() {
        let mut r = Report::new("t");
        r.table(&["a", "b"], &[vec!["1".into()]]);
        assert!(r.to_html().contains("<tr><td class=\"num\">1</td><td></td></tr>"));
    }
}
