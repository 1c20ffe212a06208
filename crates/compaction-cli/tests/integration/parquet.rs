//! `compaction bench` over Parquet datasets: a column of JSON text and a column of message
//! structs each give the figures the same conversations give as a JSON Lines dataset; the
//! column is picked, or named with --column; a missing or ambiguous column and a corrupt file
//! are errors naming the file. The Parquet files are written here, with the crate's writer,
//! from the bundled tau-bench and OpenAI transcripts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::Compression;
use parquet::column::writer::ColumnWriter;
use parquet::data_type::ByteArray;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use serde_json::Value;

use crate::{run, sample};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("compaction-parquet-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A column of the schema the test writes: its leaves are UTF-8 strings or 64-bit integers,
/// every field optional, lists in Parquet's three-level LIST shape.
enum Node {
    Str(&'static str),
    Int(&'static str),
    Struct(&'static str, Vec<Node>),
    /// A list of this element (named `element`).
    List(&'static str, Box<Node>),
}

impl Node {
    fn name(&self) -> &'static str {
        match self {
            Node::Str(n) | Node::Int(n) | Node::Struct(n, _) | Node::List(n, _) => n,
        }
    }

    fn leaves(&self) -> usize {
        match self {
            Node::Str(_) | Node::Int(_) => 1,
            Node::Struct(_, children) => children.iter().map(Node::leaves).sum(),
            Node::List(_, element) => element.leaves(),
        }
    }

    /// The schema text of this field.
    fn schema(&self, name: &str) -> String {
        match self {
            Node::Str(_) => format!("OPTIONAL BYTE_ARRAY {name} (UTF8);"),
            Node::Int(_) => format!("OPTIONAL INT64 {name};"),
            Node::Struct(_, children) => {
                let inner: String = children.iter().map(|c| c.schema(c.name())).collect();
                format!("OPTIONAL group {name} {{ {inner} }}")
            }
            Node::List(_, element) => {
                format!(
                    "OPTIONAL group {name} (LIST) {{ REPEATED group list {{ {} }} }}",
                    element.schema("element")
                )
            }
        }
    }

    /// Dremel's shredding of `value` into the leaves from `leaf` on: each gets its value (or
    /// none), its definition level and its repetition level.
    fn shred(&self, value: Option<&Value>, def: i16, rep: i16, depth: i16, leaf: usize, out: &mut [Leaf]) {
        let value = value.filter(|v| !v.is_null());
        match (self, value) {
            (Node::Str(_), Some(v)) => {
                let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                out[leaf].push(Some(Cell::Str(text)), def + 1, rep);
            }
            (Node::Int(_), Some(v)) => out[leaf].push(Some(Cell::Int(v.as_i64().unwrap())), def + 1, rep),
            (Node::Struct(_, children), Some(v)) => {
                let mut at = leaf;
                for child in children {
                    child.shred(v.get(child.name()), def + 1, rep, depth, at, out);
                    at += child.leaves();
                }
            }
            (Node::List(_, element), Some(Value::Array(items))) if !items.is_empty() => {
                for (k, item) in items.iter().enumerate() {
                    let rep = if k == 0 { rep } else { depth + 1 };
                    element.shred(Some(item), def + 2, rep, depth + 1, leaf, out);
                }
            }
            (Node::List(..), Some(Value::Array(_))) => self.nulls(def + 1, rep, leaf, out),
            (_, _) => self.nulls(def, rep, leaf, out),
        }
    }

    fn nulls(&self, def: i16, rep: i16, leaf: usize, out: &mut [Leaf]) {
        for column in &mut out[leaf..leaf + self.leaves()] {
            column.push(None, def, rep);
        }
    }
}

enum Cell {
    Str(String),
    Int(i64),
}

#[derive(Default)]
struct Leaf {
    values: Vec<Cell>,
    defs: Vec<i16>,
    reps: Vec<i16>,
}

impl Leaf {
    fn push(&mut self, value: Option<Cell>, def: i16, rep: i16) {
        self.values.extend(value);
        self.defs.push(def);
        self.reps.push(rep);
    }
}

/// Writes `rows` (JSON objects) with `columns` as a Parquet file, `per_group` rows a row group,
/// compressed with Snappy.
fn write_parquet(path: &Path, columns: &[Node], rows: &[Value], per_group: usize) {
    let fields: String = columns.iter().map(|c| c.schema(c.name())).collect();
    let schema = Arc::new(parse_message_type(&format!("message dataset {{ {fields} }}")).unwrap());
    let properties = Arc::new(WriterProperties::builder().set_compression(Compression::SNAPPY).build());
    let file = std::fs::File::create(path).unwrap();
    let mut writer = SerializedFileWriter::new(file, schema, properties).unwrap();
    for group in rows.chunks(per_group) {
        let mut leaves: Vec<Leaf> = Vec::new();
        leaves.resize_with(columns.iter().map(Node::leaves).sum(), Leaf::default);
        for row in group {
            let mut at = 0;
            for column in columns {
                column.shred(row.get(column.name()), 0, 0, 0, at, &mut leaves);
                at += column.leaves();
            }
        }
        let mut row_group = writer.next_row_group().unwrap();
        let mut leaves = leaves.into_iter();
        while let Some(mut column) = row_group.next_column().unwrap() {
            let leaf = leaves.next().unwrap();
            let (defs, reps) = (Some(&leaf.defs[..]), Some(&leaf.reps[..]));
            match column.untyped() {
                ColumnWriter::ByteArrayColumnWriter(typed) => {
                    let values: Vec<ByteArray> = leaf
                        .values
                        .iter()
                        .map(|v| match v {
                            Cell::Str(s) => ByteArray::from(s.as_str()),
                            Cell::Int(_) => unreachable!("a string column"),
                        })
                        .collect();
                    typed.write_batch(&values, defs, reps).unwrap();
                }
                ColumnWriter::Int64ColumnWriter(typed) => {
                    let values: Vec<i64> = leaf
                        .values
                        .iter()
                        .map(|v| match v {
                            Cell::Int(i) => *i,
                            Cell::Str(_) => unreachable!("an integer column"),
                        })
                        .collect();
                    typed.write_batch(&values, defs, reps).unwrap();
                }
                _ => unreachable!("the test writes strings and integers"),
            }
            column.close().unwrap();
        }
        row_group.close().unwrap();
    }
    writer.close().unwrap();
}

/// The conversations of the bundled tau-bench excerpt (each `{task_id, reward, info, traj,
/// trial}`), and the bundled OpenAI request.
fn conversations() -> (Vec<Value>, Value) {
    let tau: Value = serde_json::from_str(
        &std::fs::read_to_string(sample("tau-bench/gpt-4o-airline-excerpt.json")).unwrap(),
    )
    .unwrap();
    let openai: Value =
        serde_json::from_str(&std::fs::read_to_string(sample("openai/weather.json")).unwrap()).unwrap();
    (tau.as_array().unwrap().clone(), openai)
}

/// `bench` with the JSON report: the report.
fn bench(dir: &Path, inputs: &[&str], extra: &[&str]) -> Value {
    let json = dir.join("report.json");
    let _ = std::fs::remove_file(&json);
    let mut args = vec!["bench"];
    args.extend_from_slice(inputs);
    args.extend_from_slice(&[
        "--context-window",
        "4000",
        "--strategy",
        "tool-result-pruning,observation-masking",
        "--price-model",
        "gpt-4o",
        "--json",
        json.to_str().unwrap(),
    ]);
    args.extend_from_slice(extra);
    let out = run(&args, None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

/// The same conversations as a JSON Lines dataset, benchmarked.
fn bench_jsonl(dir: &Path, lines: &[Value]) -> Value {
    let path = dir.join("same.jsonl");
    let text: String = lines.iter().map(|v| serde_json::to_string(v).unwrap() + "\n").collect();
    std::fs::write(&path, text).unwrap();
    bench(dir, &["--jsonl", path.to_str().unwrap()], &[])
}

/// Each transcript's figures under every configuration equal, in the same order, with the
/// Parquet transcripts named by the file and their row.
fn assert_same_figures(parquet: &Value, file: &Path, jsonl: &Value) {
    let (got, want) = (parquet["transcripts"].as_array().unwrap(), jsonl["transcripts"].as_array().unwrap());
    assert_eq!(got.len(), want.len(), "{parquet}");
    for (row, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(g["error"].is_null() && w["error"].is_null(), "{g}\n{w}");
        assert_eq!(g["path"], file.display().to_string());
        assert_eq!(g["conversation"], row);
        assert_eq!(g["format"], w["format"]);
        let (g, w) = (g["results"].as_array().unwrap(), w["results"].as_array().unwrap());
        assert_eq!(g.len(), 3);
        for (g, w) in g.iter().zip(w) {
            assert_eq!(g["configuration"], w["configuration"]);
            assert!(g["tokens_sent"].as_u64().unwrap() > 0, "{g}");
            assert!(g["cost"].as_f64().is_some(), "priced: {g}");
            for key in ["calls", "peak_tokens", "tokens_sent", "cost", "compactions", "cache_read_tokens"] {
                assert_eq!(g[key], w[key], "row {row}, {}: {key}", g["configuration"]);
            }
        }
    }
    assert_eq!(parquet["totals"], jsonl["totals"]);
}

#[test]
fn a_column_of_json_text_gives_the_figures_of_the_same_lines() {
    let dir = scratch("text");
    let (tau, openai) = conversations();
    let texts: Vec<Value> = vec![tau[0].clone(), openai, tau[1].clone()];
    let rows: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(k, t)| serde_json::json!({"id": k, "trajectory": serde_json::to_string(t).unwrap()}))
        .collect();
    let file = dir.join("in").join("trajectories.parquet");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    // Two row groups: the second starts at row 2.
    write_parquet(&file, &[Node::Int("id"), Node::Str("trajectory")], &rows, 2);
    let jsonl = bench_jsonl(&dir, &texts);
    // The sole string column is picked; a folder's .parquet file is read.
    let report = bench(&dir, &[dir.join("in").to_str().unwrap()], &[]);
    assert_same_figures(&report, &file, &jsonl);
    assert_eq!(report["transcripts"][1]["format"], "openai");
}

/// tau-bench's conversations as rows of a list-of-struct column, beside a string column.
fn struct_rows(tau: &[Value]) -> (Vec<Node>, Vec<Value>) {
    let function = Node::Struct("function", vec![Node::Str("name"), Node::Str("arguments")]);
    let call = Node::Struct("element", vec![Node::Str("id"), Node::Str("type"), function]);
    let message = Node::Struct(
        "element",
        vec![
            Node::Str("role"),
            Node::Str("content"),
            Node::List("tool_calls", Box::new(call)),
            Node::Str("tool_call_id"),
            Node::Str("name"),
        ],
    );
    let columns = vec![Node::Str("task"), Node::List("messages", Box::new(message))];
    let rows = tau
        .iter()
        .map(|c| serde_json::json!({"task": c["task_id"].to_string(), "messages": c["traj"]}))
        .collect();
    (columns, rows)
}

#[test]
fn a_column_of_message_structs_gives_the_figures_of_the_same_messages() {
    let dir = scratch("structs");
    let (tau, _) = conversations();
    let (columns, rows) = struct_rows(&tau);
    let file = dir.join("messages.parquet");
    write_parquet(&file, &columns, &rows, 1);
    let messages: Vec<Value> = tau.iter().map(|c| c["traj"].clone()).collect();
    let jsonl = bench_jsonl(&dir, &messages);
    // The list of structs is picked over the string column.
    let report = bench(&dir, &[file.to_str().unwrap()], &[]);
    assert_same_figures(&report, &file, &jsonl);
    // Named, the same.
    let named = bench(&dir, &[file.to_str().unwrap()], &["--column", "messages"]);
    assert_same_figures(&named, &file, &jsonl);
}

#[test]
fn column_names_the_column_and_an_ambiguous_or_missing_one_is_an_error_naming_the_columns() {
    let dir = scratch("column");
    let (tau, openai) = conversations();
    let rows: Vec<Value> = (0..2)
        .map(|k| {
            serde_json::json!({
                "first": serde_json::to_string(&tau[k]).unwrap(),
                "second": serde_json::to_string(if k == 0 { &openai } else { &tau[0] }).unwrap(),
            })
        })
        .collect();
    let file = dir.join("two.parquet");
    write_parquet(&file, &[Node::Str("first"), Node::Str("second")], &rows, 10);
    let name = file.to_str().unwrap();
    for extra in [&[][..], &["--column", "third"][..]] {
        let mut args = vec!["bench", name, "--context-window", "4000"];
        args.extend_from_slice(extra);
        let out = run(&args, None);
        assert_eq!(out.code, 1, "nothing benchmarked: {}", out.stderr);
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
        assert!(out.stderr.contains(name), "names the file: {}", out.stderr);
        assert!(
            out.stderr.contains("first") && out.stderr.contains("second"),
            "names the columns: {}",
            out.stderr
        );
        if !extra.is_empty() {
            assert!(out.stderr.contains("third"), "{}", out.stderr);
        }
    }
    let jsonl = bench_jsonl(&dir, &[openai, tau[0].clone()]);
    let report = bench(&dir, &[name], &["--column", "second"]);
    assert_same_figures(&report, &file, &jsonl);
}

#[test]
fn a_corrupt_file_is_an_error_naming_it_and_the_run_goes_on() {
    let dir = scratch("corrupt");
    let (tau, _) = conversations();
    let (columns, rows) = struct_rows(&tau);
    let good = dir.join("good.parquet");
    write_parquet(&good, &columns, &rows, 1);
    let bytes = std::fs::read(&good).unwrap();
    // Cut short: no footer.
    let cut = dir.join("cut.parquet");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    // The footer kept, the pages overwritten.
    let mut garbled = bytes.clone();
    for b in &mut garbled[8..bytes.len() / 2] {
        *b = b.wrapping_mul(31).wrapping_add(7);
    }
    let scrambled = dir.join("scrambled.parquet");
    std::fs::write(&scrambled, &garbled).unwrap();
    let out = run(
        &[
            "bench",
            cut.to_str().unwrap(),
            scrambled.to_str().unwrap(),
            good.to_str().unwrap(),
            "--context-window",
            "4000",
        ],
        None,
    );
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    assert_eq!(out.code, 0, "the good file is benchmarked: {}", out.stderr);
    assert!(out.stderr.contains(cut.to_str().unwrap()), "names the cut file: {}", out.stderr);
    assert!(out.stderr.contains(scrambled.to_str().unwrap()), "names the scrambled file: {}", out.stderr);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("2 transcripts benchmarked"), "{table}");
}
