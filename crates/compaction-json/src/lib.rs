//! JSON text at the byte level: the layer under the `compaction` workspace's readers and
//! writers, for the work a JSON parser does not offer.
//!
//! A parser turns text into a tree and back; transcripts need more. A reader wants to know where
//! a value ends without building it, and to build only the few values it uses; a writer wants
//! to replace one value inside a file of megabytes and leave every other byte as it was, so that
//! users can diff and resume the file. This crate holds that work, once:
//!
//! - [`scan`]: where a value ends, checked as strictly as serde_json checks it
//!   ([`scan::value_end`]) or by the quick scan of quotes and brackets ([`scan::skip_value`]),
//!   and the pieces of both (whitespace, strings, numbers, literals);
//! - [`string`]: decoding a string as serde_json decodes it, straight into one buffer;
//! - [`splice`]: the bytes of the value at a path ([`splice::find`]), an object's members and an
//!   array's elements as spans, and writing a text with some spans replaced
//!   ([`splice::write_edited`]);
//! - [`dupkeys`]: objects that repeat a key, found by a scan of the bytes 64 at a time
//!   ([`dupkeys::scan_keys`]) or while a `serde_json::Value` is built ([`dupkeys::Tracked`]);
//! - [`python`]: a `serde_json::Value` printed as Python's `json.dumps` prints it, with its
//!   options (`sort_keys`, `ensure_ascii`, separators, numbers as `repr(float)`), and the length
//!   of that text without building it.
//!
//! Everything here works on bytes that the caller has checked as UTF-8, and gives `None` (or an
//! [`Error`] naming the byte) where it is not sure, so the caller can leave the text to
//! serde_json, which reads it or words the error as ever. Nothing here panics on bad input.
//!
//! # Example
//!
//! ```
//! use compaction_json::scan::value_end;
//! use compaction_json::splice::{find, first_member, write_edited, Edit, Seg};
//!
//! let line = br#"{"type": "user", "message": {"content": [{"content": "long output"}]}, "n": 1}"#;
//! // Where the message starts and ends, checked as serde_json checks it.
//! let start = first_member(line, 0, "message").expect("a message");
//! assert_eq!(value_end(line, start), Some(line.len() - 9));
//!
//! // Replace one value, and only its bytes.
//! let path = [Seg::Key("message"), Seg::Key("content"), Seg::Index(0), Seg::Key("content")];
//! let range = find(line, 0, &path).expect("the path is there");
//! let mut out = Vec::new();
//! write_edited(line, vec![Edit { range, bytes: br#""[pruned]""#.to_vec() }], &mut out)?;
//! assert_eq!(out, br#"{"type": "user", "message": {"content": [{"content": "[pruned]"}]}, "n": 1}"#);
//!
//! // Strings decode as serde_json decodes them.
//! assert_eq!(compaction_json::string::decode(r#""caf\u00e9 \ud83d\ude00""#)?, "café 😀");
//!
//! // Printed as Python's `json.dumps(value, sort_keys=True)` prints it.
//! let value = serde_json::json!({"b": 1e-5, "a": "é"});
//! let python = compaction_json::python::PythonJson::new().sort_keys(true);
//! assert_eq!(python.dumps(&value), r#"{"a": "\u00e9", "b": 1e-05}"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Crate features
//!
//! None. The crate depends on serde_json (for the printer's `Value`, with the workspace's
//! `arbitrary_precision` and `preserve_order`) and thiserror; its tests hold every scan beside
//! serde_json's.
//!
//! ## Minimum supported Rust version
//!
//! 1.88, the workspace's: see its README for the policy. It is raised only in a minor version
//! (0.1 → 0.2), never in a patch release, and the changelog says so.
#![deny(missing_docs)]

pub mod dupkeys;
mod error;
pub mod python;
pub mod scan;
pub mod splice;
pub mod string;

pub use error::Error;
