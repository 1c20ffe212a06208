//! The commit point: a run's outputs (the conversation, the report) are put in place together,
//! once everything that can fail has succeeded. Any non-zero exit leaves every target as it was,
//! and no temporary file; a signal after the commit point does not fail the run. One
//! conversation of a file holding several is never written over that file when the output
//! cannot hold the others. A target that is a symbolic link is written where it leads.

use std::path::{Path, PathBuf};

use crate::{run, sample};

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

fn text(path: &Path) -> String {
    path.display().to_string()
}

/// `prune` of the bundled Haystack run down to 30,000 tokens (it holds about 48,000), to `out`
/// with the report at `report`.
fn prune(input: &str, out: &Path, report: &Path) -> crate::Run {
    run(&["prune", input, "--target-tokens", "30000", "-o", &text(out), "--report", &text(report)], None)
}

/// A report that cannot be written (its folder missing, a folder in its place, a full disk)
/// fails the run, exit 1, with the output as it was and nothing left beside it.
#[test]
fn a_report_that_cannot_be_written_leaves_the_output_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let out = path(dir.path(), "out.json");
    std::fs::create_dir(dir.path().join("folder")).unwrap();
    let mut reports = vec![
        (path(dir.path(), "missing_dir/r.json"), "No such file or directory"),
        (path(dir.path(), "folder"), "it is a folder"),
    ];
    // A full disk: every write fails with ENOSPC.
    if Path::new("/dev/full").exists() {
        reports.push((PathBuf::from("/dev/full"), "No space left on device"));
    }
    for (report, why) in reports {
        std::fs::write(&out, "OLD\n").unwrap();
        let done = prune(&sample("haystack/agent-run.json"), &out, &report);
        assert_eq!(done.code, 1, "{}: {}", report.display(), done.stderr);
        let line = format!("error: writing the report: {}", report.display());
        assert!(done.stderr.starts_with(&line), "{}", done.stderr);
        assert!(done.stderr.contains(why), "{}", done.stderr);
        assert!(std::fs::read(&out).unwrap() == b"OLD\n", "the output was replaced");
        assert_eq!(names(dir.path()), ["folder", "out.json"]);
    }
}

/// With `-o` the input itself, a report that cannot be written leaves the input as it was; one
/// that can is written with it.
#[test]
fn an_input_written_over_is_kept_when_the_report_fails() {
    let dir = tempfile::tempdir().unwrap();
    let input = path(dir.path(), "run.json");
    let original = std::fs::read(sample("haystack/agent-run.json")).unwrap();
    std::fs::write(&input, &original).unwrap();
    let done = prune(&text(&input), &input, &path(dir.path(), "missing/r.json"));
    assert_eq!(done.code, 1, "{}", done.stderr);
    assert_eq!(std::fs::read(&input).unwrap(), original, "the input was replaced by a run that failed");
    assert_eq!(names(dir.path()), ["run.json"]);

    let report = path(dir.path(), "r.json");
    let done = prune(&text(&input), &input, &report);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_ne!(std::fs::read(&input).unwrap(), original);
    let written: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(written["target_reached"], true);
    assert_eq!(names(dir.path()), ["r.json", "run.json"]);
}

/// `-o` and `--report` naming one file: one would replace the other; refused, nothing written.
#[test]
fn the_output_and_the_report_cannot_be_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = path(dir.path(), "out.json");
    let done = prune(&sample("haystack/agent-run.json"), &out, &out);
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(done.stderr.contains("-o and --report name the same file"), "{}", done.stderr);
    assert_eq!(names(dir.path()), Vec::<String>::new());
}

/// A copy of a bundled sample in `dir`.
fn copy(dir: &Path, relative: &str, name: &str) -> (PathBuf, Vec<u8>) {
    let bytes = std::fs::read(sample(relative)).unwrap();
    let copy = dir.join(name);
    std::fs::write(&copy, &bytes).unwrap();
    (copy, bytes)
}

/// An OpenHands evaluation file (one instance a line) is written as OpenAI, which holds one
/// conversation: written over itself the others would be lost, so `prune`, `convert` and
/// `offload` refuse (exit 2) before anything is written or stored, naming the others. Written
/// elsewhere, a note says the output holds that conversation alone.
#[test]
fn one_conversation_is_never_written_over_a_file_of_several() {
    let dir = tempfile::tempdir().unwrap();
    let (oh, original) = copy(dir.path(), "openhands/multi-swe-bench-excerpt.jsonl", "oh.jsonl");
    let oh = text(&oh);
    std::fs::create_dir(path(dir.path(), "store")).unwrap();
    let store = text(&path(dir.path(), "store"));
    let runs: [&[&str]; 4] = [
        &["prune", &oh, "--conversation", "1", "--target-tokens", "5000", "-o", &oh],
        &["prune", &oh, "--target-tokens", "5000", "--min-tokens", "0", "-o", &oh, "--offload-to", &store],
        &["convert", &oh, "--conversation", "1", "-o", &oh],
        &["offload", &oh, "--store", &store, "-o", &oh],
    ];
    for args in runs {
        let done = run(args, None);
        assert_eq!(done.code, 2, "{args:?}: {}", done.stderr);
        let selected = if args.contains(&"--conversation") { 1 } else { 0 };
        let other = 1 - selected;
        let expected = format!(
            "error: {oh}: the file holds 2 conversations and the output one (OpenHands is written as \
             OpenAI): writing conversation {selected} over {oh} would lose conversation {other}; write it \
             to another file with -o FILE\n"
        );
        assert!(done.stderr.ends_with(&expected), "{args:?}: {}", done.stderr);
        assert_eq!(std::fs::read(&oh).unwrap(), original, "{args:?} wrote over the file");
        // No result stored, no temporary file.
        assert_eq!(names(dir.path()), ["oh.jsonl", "store"], "{args:?}");
        assert_eq!(names(&path(dir.path(), "store")), Vec::<String>::new(), "{args:?}");
    }
    // Through a link to it, too.
    let link = path(dir.path(), "link.jsonl");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("oh.jsonl", &link).unwrap();
        let done = run(&["convert", &oh, "-o", &text(&link)], None);
        assert_eq!(done.code, 2, "{}", done.stderr);
        assert_eq!(std::fs::read(&oh).unwrap(), original);
        std::fs::remove_file(&link).unwrap();
    }
    // Elsewhere: written, with a note.
    let one = path(dir.path(), "one.json");
    let done =
        run(&["prune", &oh, "--conversation", "1", "--target-tokens", "5000", "-o", &text(&one)], None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let note = format!(
        "note: the output holds conversation 1 alone of the 2 in {oh} (OpenHands is written as OpenAI)"
    );
    assert!(done.stderr.contains(&note), "{}", done.stderr);
    assert!(one.exists());
}

/// A tau-bench file written back in its own format keeps every trajectory, so it may be written
/// over itself; converted to another format it could not, and is refused.
#[test]
fn a_file_of_several_written_back_whole_may_be_written_over_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (tau, original) = copy(dir.path(), "tau-bench/gpt-4o-airline-excerpt.json", "tau.json");
    let tau = text(&tau);
    let done = run(
        &["prune", &tau, "--conversation", "0", "--target-tokens", "1000", "--min-tokens", "0", "-o", &tau],
        None,
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(!done.stderr.contains("note: the output holds"), "{}", done.stderr);
    let before: serde_json::Value = serde_json::from_slice(&original).unwrap();
    let after: serde_json::Value = serde_json::from_slice(&std::fs::read(&tau).unwrap()).unwrap();
    assert_eq!(after.as_array().map(Vec::len), Some(2));
    assert!(after[1] == before[1], "the other trajectory changed");
    assert!(after[0] != before[0], "the trajectory chosen was not pruned");

    let kept = std::fs::read(&tau).unwrap();
    let done = run(&["convert", &tau, "--conversation", "1", "--to", "anthropic", "-o", &tau], None);
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(done.stderr.contains("(--to anthropic writes Anthropic)"), "{}", done.stderr);
    assert!(done.stderr.contains("would lose conversation 0;"), "{}", done.stderr);
    assert_eq!(std::fs::read(&tau).unwrap(), kept);
}

/// A SWE-agent trajectory is written as OpenAI messages: written over itself, without `--to`
/// asking for that, it would lose everything beside the messages (its trajectory, its info), so
/// `prune` refuses before writing; `--to openai` or another file is what the user asked for.
#[test]
fn a_trajectory_is_not_replaced_by_its_messages_unasked() {
    let dir = tempfile::tempdir().unwrap();
    let (traj, original) = copy(dir.path(), "swe-agent/pandas-excerpt.traj", "run.traj");
    let traj = text(&traj);
    let done = run(&["prune", &traj, "--target-tokens", "1000", "-o", &traj], None);
    assert_eq!(done.code, 2, "{}", done.stderr);
    let expected = format!(
        "error: {traj}: SWE-agent is written as OpenAI, which holds only the messages: writing it over {traj} \
         would lose the rest of the file; write it to another file with -o FILE\n"
    );
    assert!(done.stderr.ends_with(&expected), "{}", done.stderr);
    assert_eq!(std::fs::read(&traj).unwrap(), original);
    assert_eq!(names(dir.path()), ["run.traj"]);
    // Asked for in so many words, it is done.
    let done = run(&["convert", &traj, "--to", "openai", "-o", &traj], None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(std::fs::read(&traj).unwrap() != original);
}

/// The OpenHands evaluation file of the corpus, three instances: written over itself, refused,
/// naming the two others.
#[test]
fn the_corpus_openhands_file_keeps_its_three_instances() {
    let Some(corpus) = crate::corpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let oh = path(dir.path(), "oh.jsonl");
    let original = std::fs::read(corpus.join("openhands/multi_swe_bench_examples_output.jsonl")).unwrap();
    std::fs::write(&oh, &original).unwrap();
    let oh = text(&oh);
    let done = run(&["prune", &oh, "--conversation", "1", "--target-tokens", "5000", "-o", &oh], None);
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(done.stderr.contains("would lose conversations 0 and 2;"), "{}", done.stderr);
    assert_eq!(std::fs::read(&oh).unwrap(), original);
}

/// `-o` on a symbolic link writes the file it leads to and keeps the link: a link to a file, a
/// relative link from another folder, a dangling link (the file it names is created).
#[cfg(unix)]
#[test]
fn an_output_link_is_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let sub = path(dir.path(), "sub");
    std::fs::create_dir(&sub).unwrap();
    let file = path(&sub, "file.json");
    std::fs::write(&file, "OLD\n").unwrap();
    let link = path(dir.path(), "link.json");
    std::os::unix::fs::symlink("sub/file.json", &link).unwrap();
    let back = path(&sub, "back.json");
    std::os::unix::fs::symlink("../link.json", &back).unwrap();
    let dangling = path(dir.path(), "dangling.json");
    std::os::unix::fs::symlink("sub/new.json", &dangling).unwrap();
    let expected = run(&["convert", &sample("haystack/agent-run.json"), "--to", "openai"], None);
    assert_eq!(expected.code, 0, "{}", expected.stderr);
    for (output, lands) in [(&link, &file), (&back, &file), (&dangling, &path(&sub, "new.json"))] {
        std::fs::write(&file, "OLD\n").unwrap();
        let done = run(
            &["convert", &sample("haystack/agent-run.json"), "--to", "openai", "-o", &text(output)],
            None,
        );
        assert_eq!(done.code, 0, "{}", done.stderr);
        assert!(std::fs::symlink_metadata(output).unwrap().file_type().is_symlink(), "the link was replaced");
        assert_eq!(std::fs::read(lands).unwrap(), expected.stdout, "{} was not written", lands.display());
    }
    assert_eq!(names(dir.path()), ["dangling.json", "link.json", "sub"]);
    assert_eq!(names(&sub), ["back.json", "file.json", "new.json"]);
    // A dangling link into a missing folder: an error naming both, nothing written.
    let nowhere = path(dir.path(), "nowhere.json");
    std::os::unix::fs::symlink("missing/x.json", &nowhere).unwrap();
    let done = run(&["convert", &sample("haystack/agent-run.json"), "-o", &text(&nowhere)], None);
    assert_eq!(done.code, 1, "{}", done.stderr);
    let line = format!(
        "error: {} (a link to {}): cannot create: ",
        nowhere.display(),
        dir.path().join("missing/x.json").display()
    );
    assert!(done.stderr.starts_with(&line), "{}", done.stderr);
}

/// A signal that comes once the output and the report are in place does not fail the run: the
/// process ends with 0, not 130. The command is held just after its commit point by its standard
/// error, a pipe filled beforehand, where it then writes its summary line.
#[cfg(target_os = "linux")]
#[test]
fn an_interrupt_after_the_commit_point_does_not_fail_the_run() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let dir = tempfile::tempdir().unwrap();
    let (out, report) = (path(dir.path(), "out.json"), path(dir.path(), "r.json"));
    std::fs::write(&out, "OLD\n").unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    // Filled until a write would wait, then made to wait again.
    rustix::io::ioctl_fionbio(&writer, true).unwrap();
    for chunk in [&[b'x'; 4096][..], b"x"] {
        loop {
            match (&writer).write(chunk) {
                Ok(_) => {}
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(error) => panic!("filling the pipe: {error}"),
            }
        }
    }
    rustix::io::ioctl_fionbio(&writer, false).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_compaction"))
        .args(["prune", &sample("haystack/agent-run.json"), "--target-tokens", "30000", "-o"])
        .arg(&out)
        .arg("--report")
        .arg(&report)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(writer)
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !(report.exists() && std::fs::read(&out).unwrap() != b"OLD\n") {
        assert!(child.try_wait().unwrap().is_none(), "the command ended before its outputs were in place");
        assert!(started.elapsed() < Duration::from_secs(60), "the outputs were never put in place");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(child.try_wait().unwrap().is_none(), "nothing held the command after its commit point");
    let killed = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the command did not end");
        std::thread::sleep(Duration::from_millis(5));
    };
    drop(reader);
    assert_eq!(status.code(), Some(0), "a signal after the commit point failed the run: {status}");
    let written: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(written["target_reached"], true);
    assert_eq!(names(dir.path()), ["out.json", "r.json"]);
}

/// `simulate` puts its CSV and its SVG in place together: a chart that cannot be written leaves
/// the table's file as it was.
#[test]
fn a_chart_that_cannot_be_written_leaves_the_table_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let table = path(dir.path(), "t.csv");
    std::fs::write(&table, "OLD\n").unwrap();
    let chart = path(dir.path(), "missing/x.svg");
    let args = ["simulate", &sample("haystack/agent-run.json"), "--context-window", "20000"];
    let done = run(&[&args[..], &["--csv", &text(&table), "--svg", &text(&chart)]].concat(), None);
    assert_eq!(done.code, 1, "{}", done.stderr);
    assert!(done.stderr.contains("error: writing the SVG: "), "{}", done.stderr);
    assert_eq!(std::fs::read_to_string(&table).unwrap(), "OLD\n", "the table was replaced");
    assert_eq!(names(dir.path()), ["t.csv"]);
    let chart = path(dir.path(), "x.svg");
    let done = run(&[&args[..], &["--csv", &text(&table), "--svg", &text(&chart)]].concat(), None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(std::fs::read_to_string(&table).unwrap().starts_with("step,"));
    assert_eq!(names(dir.path()), ["t.csv", "x.svg"]);
}
