//! Plain-text tables: columns padded to their widest cell (by characters, not bytes, since
//! cells contain µ, ≤ and Greek letters).

pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row. Cells are escaped ([`pacer_model::text::escape_control`]): they carry names
    /// from input files, and a name holding an escape sequence must not drive the terminal.
    pub fn push(&mut self, row: Vec<String>) {
        self.rows
            .push(row.iter().map(|c| pacer_model::text::escape_control(c)).collect());
    }

    pub fn render(&self) -> String {
        let width = |s: &str| s.chars().count();
        let mut w: Vec<usize> = self.header.iter().map(|h| width(h)).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                if i < w.len() {
                    w[i] = w[i].max(width(c));
                }
            }
        }
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                s.push_str(c);
                if i + 1 < cells.len() {
                    s.extend(std::iter::repeat_n(' ', w[i] - width(c) + 2));
                }
            }
            s.trim_end().to_string() + "\n"
        };
        let mut out = line(&self.header);
        out.push_str(&line(&w.iter().map(|&n| "-".repeat(n)).collect::<Vec<_>>()));
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}
