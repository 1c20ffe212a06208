//! Every Rust file opens with a `//!` doc comment saying what it is for (STYLE.md).

use std::path::Path;

use super::{parse_rust, visit};
use crate::project_root;

/// Why `text` (the file at `path`) does not open with a doc comment, or `None` when it does.
///
/// Read as `rustc` reads it: `syn` turns `//!` (and `/*! */`) into `#![doc = "..."]`, so the file
/// opens with a doc comment when its first inner attribute is a `doc` one and it stands on the
/// file's first line that is not blank (nothing, not even a `//` comment, before it). A file that
/// does not parse is named with the parse error rather than passed over.
fn missing_header(path: &Path, text: &str) -> Option<String> {
    let file = match parse_rust(path, text) {
        Ok(file) => file,
        Err(error) => return Some(error),
    };
    let first_line = text.lines().position(|l| !l.trim().is_empty()).map(|at| at + 1);
    let opens_with_doc = file.attrs.first().is_some_and(|attr| {
        matches!(attr.style, syn::AttrStyle::Inner(_))
            && attr.path().is_ident("doc")
            && Some(attr.pound_token.spans[0].start().line) == first_line
    });
    (!opens_with_doc).then(|| path.display().to_string())
}

#[test]
fn every_rust_file_opens_with_a_doc_comment() {
    let mut missing = Vec::new();
    for dir in ["crates", "xtask/src", "benches"] {
        visit(&project_root().join(dir), &mut |path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            missing.extend(missing_header(path, &text));
        });
    }
    assert!(missing.is_empty(), "files without a `//!` header: {missing:?}");
}

#[test]
fn a_file_without_a_doc_header_is_named() {
    let path = Path::new("crates/example/src/lib.rs");
    for good in ["//! A crate.\n\npub fn f() {}\n", "\n\n//! After blank lines.\n#![deny(missing_docs)]\n"] {
        assert_eq!(missing_header(path, good), None, "{good:?}");
    }
    for bad in [
        "pub fn f() {}\n",
        "/// An item's doc, not the file's.\npub fn f() {}\n",
        "#![deny(missing_docs)]\n//! The doc after another attribute.\n",
        "// A comment first.\n//! Then the doc.\n",
        "",
    ] {
        assert_eq!(missing_header(path, bad).as_deref(), Some("crates/example/src/lib.rs"), "{bad:?}");
    }
    // A file that is not Rust is named with the reason, not taken for one without a header.
    let error = missing_header(path, "//! Docs.\npub fn f() -> {}\n").expect("a parse error");
    assert!(error.starts_with("crates/example/src/lib.rs:2:15: does not parse as Rust: "), "{error}");
    let error = missing_header(path, "//! Docs.\npub fn f( {}\n").expect("a parse error");
    assert!(error.starts_with("crates/example/src/lib.rs:2:9: does not parse as Rust: "), "{error}");
}
