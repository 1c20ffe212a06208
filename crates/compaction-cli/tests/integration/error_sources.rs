//! Every error of the workspace either prints its source in its message or returns it from
//! `source()`, never both: the command prints an error's chain, one cause after another, and a
//! cause printed twice reads as noise. Checked over the sources of every crate: no thiserror
//! `#[error("...")]` message names the field that is its variant's source (`#[source]`,
//! `#[from]`, or a field called `source`).

use std::path::{Path, PathBuf};

/// The `.rs` files under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text from `open` (an opening bracket) to its closing one, both excluded, skipping
/// brackets inside string and character literals; `None` when it is not closed.
fn bracketed(text: &str, open: usize) -> Option<&str> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = open;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'\'' if bytes.get(i + 2) == Some(&b'\'') => i += 2,
            b'(' | b'{' | b'[' | b'<' => depth += 1,
            b')' | b'}' | b']' | b'>' if !(bytes[i] == b'>' && i > 0 && bytes[i - 1] == b'-') => {
                depth -= 1;
                if depth == 0 {
                    return Some(&text[open + 1..i]);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// `text` split at the commas outside brackets and string literals.
fn top_level_parts(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let (mut parts, mut depth, mut start, mut i) = (Vec::new(), 0i32, 0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'(' | b'{' | b'[' | b'<' => depth += 1,
            b'>' if i > 0 && bytes[i - 1] == b'-' => {}
            b')' | b'}' | b']' | b'>' => depth -= 1,
            b',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(&text[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// The names a message refers to: `{name}`, `{0}`, `{source:?}`, and `.0` or `.source` in
/// the arguments after the format string.
fn referenced(attribute: &str) -> Vec<String> {
    let mut names = Vec::new();
    let (format, args) = match attribute.find("\",") {
        Some(end) => (&attribute[..end], &attribute[end + 2..]),
        None => (attribute, ""),
    };
    let mut rest = format;
    while let Some(open) = rest.find('{') {
        if rest[open + 1..].starts_with('{') {
            rest = &rest[open + 2..];
            continue;
        }
        let inner = &rest[open + 1..];
        let end = inner.find(['}', ':']).unwrap_or(inner.len());
        names.push(inner[..end].trim().to_owned());
        rest = &inner[end..];
    }
    for word in args.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.')) {
        if let Some(field) = word.strip_prefix('.') {
            names.push(field.split('.').next().unwrap_or(field).to_owned());
        }
    }
    names
}

/// The name (or tuple index) of the field that is a variant's source, if any.
fn source_field(fields: &str, tuple: bool) -> Option<String> {
    for (index, field) in top_level_parts(fields).into_iter().enumerate() {
        let marked = field.contains("#[source]") || field.contains("#[from]");
        // Strip attributes and doc comments to find the name.
        let code: String = field
            .lines()
            .map(str::trim)
            .filter(|line| !line.starts_with("///") && !line.starts_with("#["))
            .collect::<Vec<_>>()
            .join(" ");
        let code = code.trim_start_matches(|c: char| c == '#' || c.is_whitespace());
        let code = code.rsplit(']').next().unwrap_or(code).trim();
        let name =
            if tuple { index.to_string() } else { code.split(':').next().unwrap_or("").trim().to_owned() };
        if marked || (!tuple && name == "source") {
            return Some(name);
        }
    }
    None
}

/// Each `#[error(...)]` of `source` whose message names its variant's source, as
/// `line: message`.
fn doubled_sources(source: &str) -> Vec<String> {
    // Comment lines may hold unmatched brackets; blank them, keeping the line numbers.
    let source: String = source
        .lines()
        .map(|line| if line.trim_start().starts_with("//") { "" } else { line })
        .collect::<Vec<_>>()
        .join("\n");
    let source = source.as_str();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = source[from..].find("#[error(") {
        let start = from + at;
        from = start + 1;
        let Some(attribute) = bracketed(source, start + "#[error".len()) else { continue };
        if attribute.trim() == "transparent" {
            continue;
        }
        // The variant follows its attributes and doc comments.
        let after = start + "#[error".len() + attribute.len() + 3;
        let rest = &source[after..];
        let Some(body) = rest.find(['(', '{', ',', '}']) else { continue };
        let tuple = rest.as_bytes()[body] == b'(';
        if !tuple && rest.as_bytes()[body] != b'{' {
            continue;
        }
        let Some(fields) = bracketed(rest, body) else { continue };
        let Some(field) = source_field(fields, tuple) else { continue };
        if referenced(attribute).contains(&field) {
            let line = source[..start].lines().count() + 1;
            found.push(format!("{line}: #[error({attribute})] prints its source `{field}`"));
        }
    }
    found
}

#[test]
fn no_error_prints_the_source_it_returns() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    rust_files(&root.join("xtask/src"), &mut files);
    for krate in std::fs::read_dir(root.join("crates")).expect("crates").flatten() {
        rust_files(&krate.path().join("src"), &mut files);
    }
    let mut wrong = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable");
        for finding in doubled_sources(&text) {
            wrong.push(format!("{}:{finding}", path.strip_prefix(&root).unwrap_or(path).display()));
        }
    }
    assert!(files.len() > 100, "the workspace's sources are found ({} files)", files.len());
    assert!(wrong.is_empty(), "messages that print the source they also return:\n{}", wrong.join("\n"));
}

#[test]
fn the_check_sees_each_way_of_printing_a_source() {
    let printed = [
        "#[error(\"counting failed: {0}\")]\n    Count(#[source] Inner),",
        "#[error(\"hook: {0:?}\")]\n    Hook(#[from] Inner),",
        "#[error(\"io {}: {source}\", path.display())]\n    Io {\n        path: PathBuf,\n        #[source]\n        source: io::Error,\n    },",
        "#[error(\"bad: {source}\")]\n    Bad { source: io::Error },",
        "#[error(\"bad: {inner}\")]\n    Bad {\n        /// Why.\n        #[source]\n        inner: io::Error,\n    },",
        "#[error(\"bad: {}\", .0)]\n    Bad(#[source] Inner),",
    ];
    for case in printed {
        assert_eq!(doubled_sources(case).len(), 1, "{case}");
    }
    let fine = [
        "#[error(\"counting failed\")]\n    Count(#[source] Inner),",
        "#[error(transparent)]\n    Other(#[from] Inner),",
        "#[error(\"got {0}, not {1}\")]\n    Mismatch(usize, usize),",
        "#[error(\"io {}\", path.display())]\n    Io {\n        path: PathBuf,\n        #[source]\n        source: io::Error,\n    },",
        "#[error(\"{key}: {reason}\")]\n    Invalid { key: String, reason: String },",
        "#[error(\"part {index}\")]\n    Part {\n        index: usize,\n        #[source]\n        cause: Box<dyn Error + Send + Sync>,\n    },",
    ];
    for case in fine {
        assert_eq!(doubled_sources(case), Vec::<String>::new(), "{case}");
    }
}
