//! `--strategy` end to end: the sliding window and summarization through the binary, checked
//! against the reference's fixtures (compaction-core's `tests/data/window` and `summarize`),
//! summaries asked of a local OpenAI-compatible or Anthropic-style server that answers as the
//! fixtures' stand-in model did, provider counters against a local counting endpoint, chains,
//! write-back, and the usage errors.

use std::path::{Path, PathBuf};

use compaction_testkit::python_equal;
use serde_json::{json, Value};

use crate::standin::{Api, Server, StandIn};
use crate::{repo, roles, run, run_with_env, sample, Run};

fn fixtures(kind: &str) -> Vec<PathBuf> {
    let dir = repo().join("crates/compaction-core/tests/data").join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

fn load(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The `--counter` spec for a fixture's counter, when the command line can name it (the
/// default image and file charges).
fn counter_spec(counter: &Value) -> Option<String> {
    let charges = (counter["tokens_per_image"].as_u64(), counter["tokens_per_file"].as_u64());
    if charges != (Some(85), Some(1000)) {
        return None;
    }
    match counter["kind"].as_str()? {
        "approximate" => Some(format!("approximate:{}", counter["chars_per_token"].as_f64()?)),
        "tiktoken" => Some(format!("tiktoken:{}", counter["encoding"].as_str()?)),
        _ => None,
    }
}

/// A fixture's conversation as a Haystack file in `dir`; `None` for an empty one, which the
/// command refuses to read.
fn input_file(dir: &Path, fixture: &Value) -> Option<String> {
    let messages = fixture["messages"].as_array()?;
    if messages.is_empty() {
        return None;
    }
    let path = dir.join("input.json");
    std::fs::write(&path, serde_json::to_vec(messages).unwrap()).unwrap();
    Some(path.display().to_string())
}

/// The output the fixture expects: the reference's, or the input when it changed nothing.
fn expected_output(fixture: &Value) -> &Value {
    match &fixture["output"] {
        Value::Null => &fixture["messages"],
        output => output,
    }
}

/// Runs one summarize fixture through `prune --strategy summarization` against a stand-in
/// server speaking `api`; `Err` says what differs.
fn summarize_fixture(path: &Path, api: Api) -> Result<bool, String> {
    let fixture = load(path);
    let name = fixture["name"].as_str().unwrap().to_owned();
    let Some(counter) = counter_spec(&fixture["counter"]) else { return Ok(false) };
    let dir = tempfile::tempdir().unwrap();
    let Some(input) = input_file(dir.path(), &fixture) else { return Ok(false) };
    let server = Server::start(api, StandIn::new(&fixture["stand_in"]));
    let settings = &fixture["settings"];
    let output = dir.path().join("out.json").display().to_string();
    let report = dir.path().join("report.json").display().to_string();
    let (provider, key) = match api {
        Api::OpenAi => ("openai", "OPENAI_API_KEY"),
        Api::Anthropic => ("anthropic", "ANTHROPIC_API_KEY"),
    };
    let target = fixture["target_tokens"].to_string();
    let min_keep_steps = settings["min_keep_steps"].to_string();
    let summary_tokens = settings["approximate_summary_tokens"].to_string();
    let base_url = server.base_url(api);
    let mut args = vec![
        "prune",
        &input,
        "--strategy",
        "summarization",
        "--target-tokens",
        &target,
        "--counter",
        &counter,
        "--min-keep-steps",
        &min_keep_steps,
        "--approximate-summary-tokens",
        &summary_tokens,
        "--summary-instruction",
        settings["summary_instruction"].as_str().unwrap(),
        "--provider",
        provider,
        "--model",
        "stand-in",
        "--base-url",
        &base_url,
        "--max-retries",
        "0",
        "-o",
        &output,
        "--report",
        &report,
    ];
    let raise = settings["raise_on_failure"] == json!(true);
    if raise {
        args.push("--raise-on-failure");
    }
    let done = run_with_env(&args, None, &[(key, "sk-local")]);

    // The prompts: what the reference sent its stand-in, as the server received them.
    let chats = server.chats();
    let expected = fixture["requests"].as_array().unwrap();
    if chats.len() != expected.len() {
        return Err(format!(
            "{name}: {} requests, the reference made {}: {}",
            chats.len(),
            expected.len(),
            done.stderr
        ));
    }
    for (round, (chat, expected)) in chats.iter().zip(expected).enumerate() {
        let (system, user) = chat.prompt();
        let text = |i: usize| expected[i]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
        if (system, user) != (text(0), text(1)) {
            return Err(format!("{name}: prompt {round} differs from the reference's"));
        }
        if chat.body["model"] != "stand-in" {
            return Err(format!("{name}: the model sent is {}", chat.body["model"]));
        }
    }
    let error = fixture["error"].as_str();
    match (error, raise) {
        (Some(_), true) => {
            if done.code != 1 || Path::new(&output).exists() || !done.stderr.contains("nothing was written") {
                return Err(format!(
                    "{name}: expected exit 1 and no output, got {}: {}",
                    done.code, done.stderr
                ));
            }
        }
        _ => {
            if done.code != 0 {
                return Err(format!("{name}: exit {}: {}", done.code, done.stderr));
            }
            let written: Value = serde_json::from_slice(&std::fs::read(&output).unwrap()).unwrap();
            if !python_equal(&written, expected_output(&fixture)) {
                return Err(format!("{name}: the output differs from the reference's"));
            }
            // Every request either put a summary in or failed, and a failure ends the run: the
            // stand-in's (when it reached its failing round) or a summary that did not shrink.
            let report = load(Path::new(&report));
            let rounds = report["summary_rounds"].as_array().unwrap().len();
            let failed = report["summary_failures"].as_array().unwrap().len();
            let told_to_fail = StandIn::new(&fixture["stand_in"]).fail_round.is_some_and(|r| r < chats.len());
            if rounds + failed != chats.len() || failed > 1 || (told_to_fail && failed == 0) {
                return Err(format!(
                    "{name}: {rounds} rounds and {failed} failures in {} requests",
                    chats.len()
                ));
            }
            if (failed == 1) != done.stderr.contains("summarization: a summary failed") {
                return Err(format!("{name}: the failure is not said as it should be: {}", done.stderr));
            }
        }
    }
    Ok(true)
}

#[test]
fn summaries_from_an_openai_compatible_server_match_the_reference() {
    let (mut ran, mut failures) = (0, Vec::new());
    for path in fixtures("summarize") {
        match summarize_fixture(&path, Api::OpenAi) {
            Ok(done) => ran += usize::from(done),
            Err(failure) => failures.push(failure),
        }
    }
    assert!(failures.is_empty(), "{} fixtures differ: {failures:#?}", failures.len());
    assert!(ran > 100, "only {ran} summarize fixtures could be run");
}

#[test]
fn summaries_from_an_anthropic_style_server_match_the_reference() {
    // Every fourth fixture, and every failure kind of one conversation: the prompt and the
    // plan are the OpenAI test's; this checks the other API end to end.
    let (mut ran, mut failures) = (0, Vec::new());
    for (i, path) in fixtures("summarize").iter().enumerate() {
        let name = path.file_name().unwrap().to_string_lossy();
        if i % 4 != 0 && !name.starts_with("attachments__") {
            continue;
        }
        match summarize_fixture(path, Api::Anthropic) {
            Ok(done) => ran += usize::from(done),
            Err(failure) => failures.push(failure),
        }
    }
    assert!(failures.is_empty(), "{} fixtures differ: {failures:#?}", failures.len());
    assert!(ran > 40, "only {ran} summarize fixtures could be run");
}

#[test]
fn the_sliding_window_matches_the_reference() {
    let (mut ran, mut failures) = (0, Vec::new());
    for path in fixtures("window") {
        let fixture = load(&path);
        let name = fixture["name"].as_str().unwrap().to_owned();
        let Some(counter) = counter_spec(&fixture["counter"]) else { continue };
        let dir = tempfile::tempdir().unwrap();
        let Some(input) = input_file(dir.path(), &fixture) else { continue };
        let note = fixture["settings"]["omission_note"].as_str().unwrap_or_default();
        let (target, keep) =
            (fixture["target_tokens"].to_string(), fixture["settings"]["min_keep_steps"].to_string());
        let done = run(
            &[
                "prune",
                &input,
                "--strategy",
                "sliding-window",
                "--target-tokens",
                &target,
                "--counter",
                &counter,
                "--min-keep-steps",
                &keep,
                "--omission-note",
                note,
            ],
            None,
        );
        ran += 1;
        if done.code != 0 {
            failures.push(format!("{name}: exit {}: {}", done.code, done.stderr));
            continue;
        }
        let written = done.json();
        if python_equal(&written, expected_output(&fixture)) {
            continue;
        }
        // The one deviation: where the reference's output is not smaller than its input, the
        // window declines and the conversation stays as it was.
        let declined = python_equal(&written, &fixture["messages"]) && {
            let reference = dir.path().join("reference.json");
            std::fs::write(&reference, serde_json::to_vec(&fixture["output"]).unwrap()).unwrap();
            let reference = reference.display().to_string();
            run(&["count", &reference, "--counter", &counter], None).count()
                >= run(&["count", &input, "--counter", &counter], None).count()
        };
        if !declined {
            failures.push(format!("{name}: the output differs from the reference's"));
        }
    }
    assert!(failures.is_empty(), "{} fixtures differ: {failures:#?}", failures.len());
    assert!(ran > 50, "only {ran} window fixtures could be run");
}

/// A long Haystack run with tool results, as a file.
fn agent_run() -> String {
    sample("haystack/agent-run.json")
}

#[test]
fn a_chain_prunes_then_slides_and_reports_each_stage() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json").display().to_string();
    let done = run(
        &[
            "prune",
            &agent_run(),
            "--target-tokens",
            "10000",
            "--strategy",
            "chain:tool-result-pruning,sliding-window",
            "--report",
            &report,
        ],
        None,
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let report = load(Path::new(&report));
    let stages: Vec<&str> =
        report["stages"].as_array().unwrap().iter().map(|s| s["strategy"].as_str().unwrap()).collect();
    assert_eq!(stages, ["tool_result_pruning", "sliding_window"]);
    assert_eq!(report["strategy"], "chain");
    assert_eq!(report["target_reached"], true);
    assert!(report["removed"].as_array().is_some_and(|r| !r.is_empty()));
    assert!(
        done.stderr.contains("prune: chain:tool-result-pruning,sliding-window: pruned"),
        "{}",
        done.stderr
    );
    assert!(done.stderr.contains(", then removed"), "{}", done.stderr);

    // The output: the original's messages that were kept, as they were, and one note.
    let output = done.json();
    let messages = output.as_array().unwrap();
    assert_eq!(
        messages.iter().filter(|m| m["meta"]["context_compaction"]["strategy"] == "sliding_window").count(),
        1
    );
    let tokens = run(&["count", "-"], Some(&serde_json::to_vec(&output).unwrap())).count();
    assert!(tokens <= 10000, "{tokens}");

    // A dry run decides the same without writing the conversation: the report is the output.
    let planned = run(
        &[
            "prune",
            &agent_run(),
            "--target-tokens",
            "10000",
            "--strategy",
            "chain:tool-result-pruning,sliding-window",
            "--dry-run",
        ],
        None,
    );
    let planned = planned.json();
    assert_eq!(planned["stages"].as_array().unwrap().len(), 2);
    assert_eq!(planned["tokens_after"], report["tokens_after"]);
}

#[test]
fn a_window_writes_an_openai_file_back_with_its_kept_messages_as_they_were() {
    let input = sample("tau-bench/gpt-4o-airline-excerpt.json");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json").display().to_string();
    let done = run(
        &["prune", &input, "--target-tokens", "1500", "--strategy", "sliding-window", "--report", &report],
        None,
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(done.stderr.contains("only in its meta, which openai output cannot hold"), "{}", done.stderr);
    let report = load(Path::new(&report));
    let removed: Vec<usize> = serde_json::from_value(report["removed"].clone()).unwrap();
    let inserted: Vec<usize> = serde_json::from_value(report["inserted"].clone()).unwrap();
    assert!(!removed.is_empty() && inserted.len() == 1, "{report}");

    // The file is the same tau-bench file with only the first conversation's messages changed.
    let original: Value = serde_json::from_slice(&std::fs::read(&input).unwrap()).unwrap();
    let written: Value = serde_json::from_slice(&done.stdout).unwrap();
    let messages = |v: &Value| v[0]["traj"].as_array().cloned().expect("tau-bench's messages");
    let (before, after) = (messages(&original), messages(&written));
    let kept: Vec<&Value> =
        before.iter().enumerate().filter(|(i, _)| !removed.contains(i)).map(|(_, m)| m).collect();
    let left: Vec<&Value> =
        after.iter().enumerate().filter(|(i, _)| !inserted.contains(i)).map(|(_, m)| m).collect();
    assert_eq!(kept, left, "every kept message is written as it was read");
    assert_eq!(after[inserted[0]]["role"], "user");
    assert_eq!(
        original.as_array().unwrap()[1..],
        written.as_array().unwrap()[1..],
        "the other conversations stay"
    );
}

#[test]
fn an_event_log_is_not_rewritten_in_place_but_can_be_written_to_a_target() {
    let session = sample("claude-code/fa812bfe-excerpt.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.jsonl").display().to_string();
    let args = ["prune", &session, "--target-tokens", "1200", "--strategy", "sliding-window", "-o", &output];
    let refused = run(&args, None);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("a Claude Code log cannot take back"), "{}", refused.stderr);
    assert!(refused.stderr.contains("give --to anthropic, openai or haystack"), "{}", refused.stderr);
    assert!(!Path::new(&output).exists());

    let mut converted = args.to_vec();
    converted.extend(["--to", "anthropic"]);
    let done = run(&converted, None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(done.stderr.contains("prune: sliding-window: removed"), "{}", done.stderr);
    let written: Value = serde_json::from_slice(&std::fs::read(&output).unwrap()).unwrap();
    assert!(written["messages"].as_array().is_some_and(|m| !m.is_empty()));

    // Pruning edits a session in place, as before.
    let pruned = run(&["prune", &session, "--target-tokens", "1200"], None);
    assert_eq!(pruned.code, 0, "{}", pruned.stderr);
}

#[test]
fn a_responses_request_takes_a_sliding_windows_cut_back_without_a_target() {
    let mut input = vec![
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix it."}]}),
    ];
    for n in 0..12 {
        input.push(json!({"type": "reasoning", "id": format!("rs_{n}"), "summary": [], "encrypted_content": format!("gAAAAB{n}")}));
        input.push(json!({"type": "function_call", "call_id": format!("call_{n}"), "name": "shell", "arguments": "{}"}));
        input.push(json!({"type": "function_call_output", "call_id": format!("call_{n}"), "output": format!("line {n}\n").repeat(80)}));
    }
    let request = json!({"model": "gpt-5-codex", "instructions": "You are Codex.", "input": input,
                         "tools": [{"type": "function", "name": "shell"}], "store": false});
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("request.json");
    std::fs::write(&path, request.to_string()).unwrap();
    let path = path.display().to_string();
    let args =
        ["prune", &path, "--format", "responses", "--target-tokens", "1500", "--strategy", "sliding-window"];
    let done = run(&args, None);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let written: Value = serde_json::from_slice(&done.stdout).unwrap();
    let items = written["input"].as_array().expect("an input array");
    assert!(items.len() < input.len(), "{}", done.stderr);
    // Everything but `input` as it was; the window's note a user message; the last steps kept.
    let mut outside = written.clone();
    outside["input"] = request["input"].clone();
    assert_eq!(outside, request);
    assert!(items.iter().any(|item| item["role"] == "user" && item != &input[0]), "{written}");
    assert_eq!(items.last(), input.last());
}

#[test]
fn options_that_do_not_fit_the_strategy_are_usage_errors() {
    let input = agent_run();
    let cases: &[(&[&str], &str)] = &[
        (&["--strategy", "summarization"], "give --provider openai|anthropic and --model NAME"),
        (&["--strategy", "sliding-window", "--provider", "openai"], "--provider is a summarization option"),
        (&["--omission-note", "gone"], "--omission-note is a sliding-window option"),
        (&["--strategy", "offload"], "give --offload-to DIR"),
        (&["--strategy", "window"], "unknown strategy \"window\""),
        (&["--strategy", "chain:tool-result-pruning,,sliding-window"], "unknown strategy \"\""),
        (
            &["--strategy", "sliding-window", "--dry-run", "--offload-to", "x"],
            "--offload-to is for the offload strategy",
        ),
        (
            &["--strategy", "summarization", "--provider", "openai", "--model", "m", "--dry-run"],
            "--dry-run cannot be combined with --strategy summarization",
        ),
        (&["--min-keep-steps", "0"], "`min_keep_steps` must be at least 1"),
        (
            &["--strategy", "chain:sliding-window,tool-result-pruning", "--min-keep-steps", "0"],
            "`min_keep_steps` must be at least 1",
        ),
    ];
    for (extra, says) in cases {
        let mut args = vec!["prune", input.as_str(), "--target-tokens", "5000"];
        args.extend_from_slice(extra);
        let done = run_with_env(&args, None, &[("OPENAI_API_KEY", "sk-local")]);
        assert_eq!(done.code, 2, "{extra:?}: {}", done.stderr);
        assert!(done.stderr.contains(says), "{extra:?}: {}", done.stderr);
    }
    // 0 is allowed where the strategy allows it.
    let done = run(
        &[
            "prune",
            &input,
            "--target-tokens",
            "5000",
            "--strategy",
            "sliding-window",
            "--min-keep-steps",
            "0",
        ],
        None,
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let notes = |messages: &Value| {
        messages.as_array().unwrap().iter().filter(|m| m["meta"].get("context_compaction").is_some()).count()
    };
    assert_eq!(notes(&done.json()), 1);
    // An empty note is no note.
    let done = run(
        &["prune", &input, "--target-tokens", "5000", "--strategy", "sliding-window", "--omission-note", ""],
        None,
    );
    assert!(done.stderr.contains("and left no note"), "{}", done.stderr);
    assert_eq!(notes(&done.json()), 0);
}

#[test]
fn a_missing_key_names_its_variable_and_asks_nothing() {
    let server =
        Server::start(Api::OpenAi, StandIn { keep_chars: 10, fail_round: None, failure: String::new() });
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.json").display().to_string();
    let base_url = server.base_url(Api::OpenAi);
    for (provider, variable) in [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")] {
        let done = run(
            &[
                "prune",
                &agent_run(),
                "--target-tokens",
                "5000",
                "--strategy",
                "summarization",
                "--provider",
                provider,
                "--model",
                "m",
                "--base-url",
                &base_url,
                "-o",
                &output,
            ],
            None,
        );
        assert_eq!(done.code, 2, "{}", done.stderr);
        assert!(done.stderr.contains(&format!("set the {variable} environment variable")), "{}", done.stderr);
        assert!(!Path::new(&output).exists());
    }
    let done = run(&["count", &agent_run(), "--counter", "anthropic:claude-test"], None);
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(done.stderr.contains("ANTHROPIC_API_KEY"), "{}", done.stderr);
    assert!(server.requests().is_empty());
}

#[test]
fn provider_counters_count_with_the_local_endpoint() {
    let stand_in = StandIn { keep_chars: 10, fail_round: None, failure: String::new() };
    let server = Server::start(Api::OpenAi, stand_in.clone());
    let openai = server.base_url(Api::OpenAi);
    let input = sample("openai/weather.json");
    let done = run_with_env(
        &["count", &input, "--counter", "openai:gpt-test"],
        None,
        &[("OPENAI_API_KEY", "sk-local"), ("OPENAI_BASE_URL", &openai)],
    );
    let counted = done.count();
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/responses/input_tokens");
    assert_eq!(requests[0].header("authorization"), Some("Bearer sk-local"));
    assert_eq!(requests[0].body["model"], "gpt-test");
    assert_eq!(counted as usize, requests[0].body.to_string().len(), "the server's number is printed");

    let server = Server::start(Api::Anthropic, stand_in.clone());
    let anthropic = server.base_url(Api::Anthropic);
    let done = run_with_env(
        &["count", &sample("anthropic/search.json"), "--counter", "anthropic:claude-test"],
        None,
        &[("ANTHROPIC_API_KEY", "sk-local"), ("ANTHROPIC_BASE_URL", &anthropic)],
    );
    let counted = done.count();
    let requests = server.requests();
    assert_eq!(requests[0].path, "/v1/messages/count_tokens");
    assert_eq!(requests[0].header("x-api-key"), Some("sk-local"));
    assert_eq!(counted as usize, requests[0].body.to_string().len());

    // A strategy sizes the conversation with the provider's counts.
    let done = run_with_env(
        &[
            "prune",
            &agent_run(),
            "--target-tokens",
            "20000",
            "--strategy",
            "sliding-window",
            "--counter",
            "anthropic:claude-test",
            "--dry-run",
        ],
        None,
        &[("ANTHROPIC_API_KEY", "sk-local"), ("ANTHROPIC_BASE_URL", &anthropic)],
    );
    let report = done.json();
    let counts: Vec<usize> = server.requests()[1..].iter().map(|r| r.body.to_string().len()).collect();
    let before = report["tokens_before"].as_u64().unwrap() as usize;
    assert!(counts.contains(&before), "{before} is not one of the server's counts");
}

#[test]
fn a_provider_count_that_fails_is_an_error_naming_the_call() {
    let stand_in = StandIn { keep_chars: 10, fail_round: None, failure: String::new() };
    let server = Server::with_counts(Api::OpenAi, stand_in, |_| None);
    let base_url = server.base_url(Api::OpenAi);
    let env = [("OPENAI_API_KEY", "sk-local"), ("OPENAI_BASE_URL", base_url.as_str())];
    let call = format!("openai POST {base_url}/responses/input_tokens (model gpt-test)");

    let done = run_with_env(&["count", &agent_run(), "--counter", "openai:gpt-test"], None, &env);
    assert_eq!(done.code, 1, "{}", done.stderr);
    assert!(done.stderr.contains(&call) && done.stderr.contains("HTTP 400"), "{}", done.stderr);
    assert!(done.stdout.is_empty(), "no count is printed");

    // Pruning counts through the fallible counts: the failure is its error, before writing.
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.json").display().to_string();
    for strategy in ["tool-result-pruning", "sliding-window"] {
        let done = run_with_env(
            &[
                "prune",
                &agent_run(),
                "--target-tokens",
                "5000",
                "--strategy",
                strategy,
                "--counter",
                "openai:gpt-test",
                "-o",
                &output,
            ],
            None,
            &env,
        );
        assert_eq!(done.code, 1, "{strategy}: {}", done.stderr);
        assert!(done.stderr.contains(&call), "{strategy}: {}", done.stderr);
        assert!(!Path::new(&output).exists(), "{strategy}: nothing is written");
    }
    let done = run_with_env(
        &["simulate", &agent_run(), "--context-window", "20000", "--counter", "openai:gpt-test"],
        None,
        &env,
    );
    assert_eq!(done.code, 1, "{}", done.stderr);
    assert!(done.stderr.contains(&call), "{}", done.stderr);
}

#[test]
fn simulate_summarizes_with_the_model_at_each_compaction() {
    let stand_in = StandIn { keep_chars: 60, fail_round: None, failure: String::new() };
    let server = Server::start(Api::OpenAi, stand_in);
    let base_url = server.base_url(Api::OpenAi);
    let args = [
        "simulate",
        &agent_run(),
        "--context-window",
        "20000",
        "--strategy",
        "summarization",
        "--provider",
        "openai",
        "--model",
        "stand-in",
        "--base-url",
        &base_url,
        "--approximate-summary-tokens",
        "200",
    ];
    let done = run_with_env(&args, None, &[("OPENAI_API_KEY", "sk-local")]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let table = String::from_utf8(done.stdout).unwrap();
    let compacted = table.lines().filter(|l| l.ends_with("compacted")).count();
    assert!(compacted > 0, "{table}");
    assert!(server.chats().len() >= compacted, "a summary per compaction at least");

    // A model that fails, with --raise-on-failure: the replay fails, naming the call.
    let failing = StandIn { keep_chars: 60, fail_round: Some(0), failure: "raise".into() };
    let server = Server::start(Api::Anthropic, failing);
    let base_url = server.base_url(Api::Anthropic);
    let mut raising = args.to_vec();
    raising[7] = "anthropic";
    raising[11] = &base_url;
    raising.extend(["--raise-on-failure", "--max-retries", "0"]);
    let done = run_with_env(&raising, None, &[("ANTHROPIC_API_KEY", "sk-local")]);
    assert_eq!(done.code, 1, "{}", done.stderr);
    assert!(done.stderr.contains("HTTP 500") && done.stderr.contains("/v1/messages"), "{}", done.stderr);
    assert!(done.stdout.is_empty(), "no table");
    assert_eq!(server.chats().len(), 1, "the model is not asked again after a raised failure");
}

/// A conversation of ten short earlier turns and a task, as a Haystack file in `dir`: summaries
/// go a few turns at a time.
fn turns(dir: &Path) -> String {
    let text = |role: &str, text: String| json!({"role": role, "content": [{"text": text}], "meta": {}, "name": null});
    let mut messages = vec![text("system", "You answer questions.".into())];
    for turn in 0..10 {
        messages.push(text("user", format!("Question {turn}: {}", "details ".repeat(50))));
        messages.push(text("assistant", format!("Answer {turn}: {}", "findings ".repeat(45))));
    }
    messages.push(text("user", "And now?".into()));
    let path = dir.join("turns.json");
    std::fs::write(&path, serde_json::to_vec(&messages).unwrap()).unwrap();
    path.display().to_string()
}

#[test]
fn a_failed_summary_keeps_the_last_good_result_or_fails_whole() {
    let dir = tempfile::tempdir().unwrap();
    let input = turns(dir.path());
    // The second summary fails: the first is kept, or with --raise-on-failure nothing is.
    let stand_in = StandIn { keep_chars: 800, fail_round: Some(1), failure: "raise".into() };
    let server = Server::start(Api::OpenAi, stand_in.clone());
    let base_url = server.base_url(Api::OpenAi);
    let output = dir.path().join("out.json").display().to_string();
    let args = [
        "prune",
        &input,
        "--target-tokens",
        "1000",
        "--strategy",
        "summarization",
        "--provider",
        "openai",
        "--model",
        "stand-in",
        "--base-url",
        &base_url,
        "--max-retries",
        "0",
        "--approximate-summary-tokens",
        "1",
        "-o",
        &output,
    ];
    let done = run_with_env(&args, None, &[("OPENAI_API_KEY", "sk-local")]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(server.chats().len(), 2);
    assert!(
        done.stderr.contains("summarization: a summary failed, so the last good result is kept"),
        "{}",
        done.stderr
    );
    assert!(
        done.stderr.contains("HTTP 500") && done.stderr.contains("the stand-in was told to fail"),
        "{}",
        done.stderr
    );
    assert!(done.stderr.contains("not reached: a summary failed"), "{}", done.stderr);
    let written: Value = serde_json::from_slice(&std::fs::read(&output).unwrap()).unwrap();
    let summaries: Vec<&Value> = written
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["meta"]["context_compaction"]["strategy"] == "summarization")
        .collect();
    assert_eq!(summaries.len(), 1, "the first round's summary is kept");
    assert!(summaries[0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("<conversation_summary>\nSummary 0: "));
    std::fs::remove_file(&output).unwrap();

    let server = Server::start(Api::OpenAi, stand_in);
    let base_url = server.base_url(Api::OpenAi);
    let mut raising = args.to_vec();
    raising[11] = &base_url;
    raising.push("--raise-on-failure");
    let done: Run = run_with_env(&raising, None, &[("OPENAI_API_KEY", "sk-local")]);
    assert_eq!(done.code, 1, "{}", done.stderr);
    assert!(
        done.stderr
            .starts_with("error: summarization: the chat model failed to write a summary: openai POST"),
        "{}",
        done.stderr
    );
    assert!(done.stderr.contains("nothing was written"), "{}", done.stderr);
    assert!(!Path::new(&output).exists());
}

/// `--strategy observation-masking` masks all but the first observation (the task) and the
/// newest `--keep-observations`, each with SWE-agent's note, whatever the target, and says why
/// the target was not reached; its options are usage errors with another strategy.
#[test]
fn observation_masking_keeps_the_task_and_the_newest_observations() {
    let traj = sample("swe-agent/pandas-excerpt.traj");
    let done = run(
        &[
            "prune",
            &traj,
            "--target-tokens",
            "1",
            "--strategy",
            "observation-masking",
            "--keep-observations",
            "2",
        ],
        None,
    );
    let messages = done.json();
    let masked: Vec<usize> = (0..messages.as_array().unwrap().len())
        .filter(|&k| {
            messages[k]["content"].as_str().is_some_and(|c| c.starts_with("Old environment output: ("))
        })
        .collect();
    // The task is the user message; of the three tool observations the oldest is masked.
    assert_eq!(masked, [3], "{}", roles(messages.as_array().unwrap()));
    assert_eq!(messages[3]["content"], "Old environment output: (25 lines omitted)");
    assert!(done.stderr.contains("prune: masked 1 observation:"), "{}", done.stderr);
    assert!(done.stderr.contains("the newest 2 stay whole (--keep-observations)"), "{}", done.stderr);

    // With every observation kept, nothing changes.
    let kept = run(&["prune", &traj, "--target-tokens", "1", "--strategy", "observation-masking"], None);
    assert!(kept.json().to_string().find("Old environment output").is_none());

    // simulate counts masked observations apart from pruned results.
    let replay = run(
        &[
            "simulate",
            &traj,
            "--context-window",
            "2000",
            "--strategy",
            "observation-masking",
            "--keep-observations",
            "1",
        ],
        None,
    );
    assert_eq!(replay.code, 0, "{}", replay.stderr);
    let table = String::from_utf8(replay.stdout).unwrap();
    assert!(table.contains("results pruned       0\n"), "{table}");
    assert!(table.contains("observations masked  "), "{table}");

    let wrong = run(&["prune", &traj, "--target-tokens", "1", "--polling", "2"], None);
    assert_eq!(wrong.code, 2, "{}", wrong.stderr);
    assert!(wrong.stderr.contains("--polling is an observation-masking option"), "{}", wrong.stderr);
    let zero = run(
        &[
            "prune",
            &traj,
            "--target-tokens",
            "1",
            "--strategy",
            "observation-masking",
            "--keep-observations",
            "0",
        ],
        None,
    );
    assert_eq!(zero.code, 2, "{}", zero.stderr);
}
