//! `compaction proxy`'s own options: without `--context-window` each request is compacted for
//! its model's window (`--model-window`, else the bundled table), and `--log-bodies` logs bodies
//! with their credentials redacted. The proxy runs as the binary, against a one-request upstream
//! on 127.0.0.1.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::run;

const KEY: &str = "sk-proj-Qw3rTy8uIoP9aSdFgHjKl0ZxCv";

#[test]
fn a_model_window_must_read_as_name_and_tokens_and_is_not_given_with_a_fixed_window() {
    for args in [
        &["proxy", "--model-window", "qwen"][..],
        &["proxy", "--model-window", "qwen=0"],
        &["proxy", "--context-window", "1000", "--model-window", "qwen=32768"],
    ] {
        let run = run(args, None);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
    }
}

/// Offloading, which the proxy cannot run yet, is refused before anything listens, with the
/// reason and what runs instead, however it is asked for: never with a hint to give an option
/// the proxy does not take. Summarization runs, and asks for its model.
#[test]
fn a_strategy_the_proxy_cannot_run_is_refused_with_why() {
    for args in [
        &["proxy", "--strategy", "offload"][..],
        &["proxy", "--strategy", "chain:tool-result-pruning,offload"],
    ] {
        let run = run(args, None);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("the proxy cannot run"), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("offloading writes results"), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("tool-result-pruning, sliding-window, summarization"), "{}", run.stderr);
        assert!(!run.stderr.contains("--offload-to"), "{}", run.stderr);
    }
    let run = run(&["proxy", "--strategy", "summarization"], None);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("give --provider openai|anthropic and --model NAME"), "{}", run.stderr);
}

/// A Chat Completions request for `model` with ten tool results of about 250 tokens each.
fn request(model: &str) -> Vec<u8> {
    request_of(model, 10)
}

/// A Chat Completions request for `model` with `steps` tool results of about 250 tokens each.
fn request_of(model: &str, steps: usize) -> Vec<u8> {
    let mut messages = vec![json!({"role": "user", "content": "Fix the test."})];
    for n in 0..steps {
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{n}"), "type": "function", "function": {"name": "read", "arguments": "{}"}},
        ]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("call_{n}"), "content": format!("output {n} ").repeat(100)}));
    }
    serde_json::to_vec(&json!({"model": model, "messages": messages})).expect("serializes")
}

/// A request as the upstream received it: its `authorization` header and its body.
struct Received {
    authorization: String,
    body: Vec<u8>,
}

/// An upstream that answers one request with `{}` and hands back the body it received.
fn upstream() -> (String, mpsc::Receiver<Vec<u8>>) {
    let (url, received) = upstream_answering(1, |_| "{}".to_owned());
    let (send, bodies) = mpsc::channel();
    std::thread::spawn(move || {
        for request in received {
            let _ = send.send(request.body);
        }
    });
    (url, bodies)
}

/// An upstream on 127.0.0.1 that answers up to `requests` requests, a connection each, with
/// `answer(body)` as JSON, and hands back each request it received.
fn upstream_answering(requests: usize, answer: fn(&[u8]) -> String) -> (String, mpsc::Receiver<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for _ in 0..requests {
            let Ok((stream, _)) = listener.accept() else { return };
            let mut reader = BufReader::new(stream);
            let (mut length, mut authorization) = (0, String::new());
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).expect("a header line");
                if line.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().expect("a length");
                    } else if name.eq_ignore_ascii_case("authorization") {
                        authorization = value.trim().to_owned();
                    }
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).expect("the body");
            let json = answer(&body);
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                json.len()
            );
            reader.get_mut().write_all(head.as_bytes()).expect("answers");
            reader.get_mut().write_all(json.as_bytes()).expect("answers");
            let _ = send.send(Received { authorization, body });
        }
    });
    (url, receive)
}

/// The proxy running as the binary with `args` (and `env`), its address, the line it starts
/// with, and its log lines after that as they come.
fn start_proxy(
    args: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Child, String, String, mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_compaction"))
        .args(["proxy", "--listen", "127.0.0.1:0"])
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let (send, lines) = mpsc::channel();
    let stderr = child.stderr.take().expect("its standard error");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = send.send(line);
        }
    });
    let banner = lines.recv_timeout(Duration::from_secs(20)).expect("the banner in time");
    let address = banner
        .strip_prefix("compaction proxy on http://")
        .and_then(|rest| rest.split_once(": "))
        .map(|(address, _)| address.to_owned())
        .unwrap_or_else(|| panic!("the banner: {banner}"));
    (child, address, banner, lines)
}

/// Sends `body` to the proxy at `address` and reads its answer to the end.
fn post(address: &str, body: &[u8]) -> String {
    let mut stream = TcpStream::connect(address).expect("the proxy");
    stream.set_read_timeout(Some(Duration::from_secs(20))).expect("a timeout");
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {address}\r\nauthorization: Bearer {KEY}\r\ncontent-type: \
         application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).expect("sends");
    stream.write_all(body).expect("sends");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("an answer");
    answer
}

#[test]
fn without_a_fixed_window_the_models_window_decides_and_bodies_are_logged_redacted() {
    let (upstream, received) = upstream();
    let (mut child, address, banner, lines) = start_proxy(
        &["--openai-upstream", &upstream, "--model-window", "tiny-model=2000", "--log-bodies"],
        &[],
    );
    let next = || lines.recv_timeout(Duration::from_secs(20)).expect("a log line in time");
    assert!(banner.contains("each request's model's window"), "{banner}");
    assert!(banner.contains("logging bodies"), "{banner}");

    let body = request("tiny-model");
    let answer = post(&address, &body);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let forwarded = received.recv_timeout(Duration::from_secs(20)).expect("the upstream got the request");
    assert!(
        forwarded.len() < body.len() / 2,
        "compacted for a 2,000-token window: {} bytes",
        forwarded.len()
    );
    let forwarded: Value = serde_json::from_slice(&forwarded).expect("JSON");
    assert_eq!(forwarded["model"], "tiny-model");

    let log: Vec<String> = (0..3).map(|_| next()).collect();
    let _ = child.kill();
    let _ = child.wait();
    assert!(log.iter().all(|line| !line.contains(KEY) && !line.contains("Qw3rTy8")), "{log:?}");
    assert!(log
        .iter()
        .any(|l| l.contains(" received: POST /v1/chat/completions") && l.contains("output 3 output 3")));
    assert!(log.iter().any(|l| l.contains("authorization: [REDACTED]")), "{log:?}");
    assert!(log.iter().any(|l| l.contains(": compacted: ")), "{log:?}");
    assert!(log.iter().any(|l| l.contains(" forwarded, ")), "{log:?}");
}

/// The summarizer's answer, or `{}` for the requests the proxy forwards.
fn summary_or_nothing(body: &[u8]) -> String {
    let request: Value = serde_json::from_slice(body).expect("JSON");
    match request["model"].as_str() {
        Some("summarizer") => json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "summarizer",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "SUMMARY OF THE EARLIER WORK"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 6, "total_tokens": 106},
        })
        .to_string(),
        _ => "{}".to_owned(),
    }
}

/// `--strategy summarization`: the proxy asks the summarizer (with its own key, never the
/// client's) once per compaction, forwards the summary in place of what it summarizes, and
/// puts the same summary back in the conversation's later requests without asking again.
#[test]
fn a_summary_is_asked_for_once_and_kept_in_the_conversations_later_requests() {
    let (upstream, received) = upstream_answering(20, summary_or_nothing);
    let base = format!("{upstream}/v1");
    let (mut child, address, _, lines) = start_proxy(
        &[
            "--openai-upstream",
            &upstream,
            "--context-window",
            "3000",
            "--strategy",
            "summarization",
            "--provider",
            "openai",
            "--model",
            "summarizer",
            "--base-url",
            &base,
            "--approximate-summary-tokens",
            "50",
        ],
        &[("OPENAI_API_KEY", "sk-summarizer-Zx9Yw8Vu7Ts6")],
    );
    let mut forwarded = Vec::new();
    let mut summaries = Vec::new();
    for steps in [10, 11, 12] {
        let answer = post(&address, &request_of("m", steps));
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let asked = summaries.len();
        loop {
            let request = received.recv_timeout(Duration::from_secs(20)).expect("the upstream got a request");
            let body: Value = serde_json::from_slice(&request.body).expect("JSON");
            if body["model"] == "summarizer" {
                assert_eq!(request.authorization, "Bearer sk-summarizer-Zx9Yw8Vu7Ts6");
                summaries.push(steps);
            } else {
                assert_eq!(request.authorization, format!("Bearer {KEY}"), "the client's own key");
                forwarded.push(body["messages"].as_array().expect("messages").clone());
                break;
            }
        }
        if steps > 10 {
            assert_eq!(summaries.len(), asked, "no summary asked for again at {steps} steps");
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let log: Vec<String> = lines.try_iter().collect();
    assert!(!summaries.is_empty(), "the summarizer was asked: {log:?}");
    let text = |messages: &[Value]| serde_json::to_string(messages).expect("JSON");
    assert!(text(&forwarded[0]).contains("SUMMARY OF THE EARLIER WORK"), "{log:?}");
    assert!(forwarded[0].len() < 21, "messages were summarized away");
    for later in &forwarded[1..] {
        let n = forwarded[0].len();
        assert!(
            later.len() > n && later[..n] == forwarded[0][..],
            "a later request begins as the first was sent"
        );
    }
    assert_eq!(log.iter().filter(|line| line.contains(": compacted: ")).count(), 1, "{log:?}");
    assert!(log.iter().any(|line| line.contains(" messages dropped and 1 put in")), "{log:?}");
    assert!(log.iter().all(|line| !line.contains("Zx9Yw8") && !line.contains("Qw3rTy8")), "{log:?}");
}
