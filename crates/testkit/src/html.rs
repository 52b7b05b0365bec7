//! Checking HTML reports (crates/report) in tests: a report is HTML5, whose void `<meta>` tags
//! an XML parser rejects; [`xhtml`] closes them so the whole page can be parsed as XML (e.g. with
//! roxmltree), which proves every element is closed and every attribute quoted.

/// The page as XML: the doctype dropped, `<meta …>` closed as `<meta …/>`, `&nbsp;` numeric.
pub fn xhtml(html: &str) -> String {
    let mut s = html.replacen("<!DOCTYPE html>", "", 1);
    let mut out = String::new();
    while let Some(i) = s.find("<meta ") {
        let Some(len) = s[i..].find('>') else { break };
        let end = i + len;
        out.push_str(&s[..end]);
        if !s[..end].ends_with('/') {
            out.push('/');
        }
        out.push('>');
        s = s[end + 1..].to_string();
    }
    out.push_str(&s);
    out.replace("&nbsp;", "&#160;")
}
