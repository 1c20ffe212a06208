//! How the commands write numbers and lists in their messages and tables: `1,234`, `3 results`,
//! `12.5%`, a comma-separated option. A leaf: it imports nothing of the crate.

/// `1,234`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `1 result`, `1,234 results`.
pub fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{} {noun}s", thousands(n))
    }
}

/// A comma-separated list; the empty string is the empty list.
pub fn list(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

/// `part` of `whole` as a percentage with one decimal, `-` of nothing.
pub fn percent(part: f64, whole: f64) -> String {
    if whole == 0.0 {
        return "-".to_owned();
    }
    format!("{:.1}%", 100.0 * part / whole)
}

/// A relative change as a signed percentage with one decimal (`+12.5%`), `-` when unknown.
pub fn signed_percent(change: Option<f64>) -> String {
    change.map_or_else(|| "-".into(), |f| format!("{:+.1}%", 100.0 * f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_lists_are_written_as_said() {
        assert_eq!(
            [thousands(0), thousands(999), thousands(1000), thousands(1234567)],
            ["0", "999", "1,000", "1,234,567"]
        );
        assert_eq!(
            [plural(1, "result"), plural(0, "result"), plural(1234, "token")],
            ["1 result", "0 results", "1,234 tokens"]
        );
        assert_eq!(list(" a, ,b,"), ["a", "b"]);
        assert!(list("").is_empty());
        assert_eq!([percent(1.0, 8.0), percent(1.0, 0.0)], ["12.5%", "-"]);
        assert_eq!(
            [signed_percent(Some(0.125)), signed_percent(Some(-0.5)), signed_percent(None)],
            ["+12.5%", "-50.0%", "-"]
        );
    }
}
