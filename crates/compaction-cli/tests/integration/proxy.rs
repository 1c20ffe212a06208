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

/// A strategy that calls a model or writes files is refused before anything listens, with the
/// reason and what runs instead, however it is asked for: never with a hint to give an option
/// the proxy does not take.
#[test]
fn a_strategy_the_proxy_cannot_run_is_refused_with_why() {
    for (args, why) in [
        (&["proxy", "--strategy", "offload"][..], "offloading writes files"),
        (&["proxy", "--strategy", "chain:tool-result-pruning,offload"], "offloading writes files"),
        (&["proxy", "--strategy", "summarization"], "asks a model"),
        (&["proxy", "--strategy", "summarization", "--provider", "openai", "--model", "m"], "asks a model"),
    ] {
        let run = run(args, None);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("the proxy cannot run"), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(why), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("tool-result-pruning, sliding-window"), "{args:?}: {}", run.stderr);
        assert!(
            !run.stderr.contains("--offload-to") && !run.stderr.contains("give --provider"),
            "{}",
            run.stderr
        );
    }
}

/// A Chat Completions request for `model` with ten tool results of about 250 tokens each.
fn request(model: &str) -> Vec<u8> {
    let mut messages = vec![json!({"role": "user", "content": "Fix the test."})];
    for n in 0..10 {
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{n}"), "type": "function", "function": {"name": "read", "arguments": "{}"}},
        ]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("call_{n}"), "content": format!("output {n} ").repeat(100)}));
    }
    serde_json::to_vec(&json!({"model": model, "messages": messages})).expect("serializes")
}

/// An upstream that answers one request with `{}` and hands back the body it received.
fn upstream() -> (String, mpsc::Receiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().expect("a connection");
        let mut reader = BufReader::new(stream);
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).expect("a header line");
            if line.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().expect("a length");
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).expect("the body");
        let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}";
        reader.get_mut().write_all(answer.as_bytes()).expect("answers");
        let _ = send.send(body);
    });
    (url, receive)
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
    let mut child = Command::new(env!("CARGO_BIN_EXE_compaction"))
        .args(["proxy", "--listen", "127.0.0.1:0", "--openai-upstream", &upstream])
        .args(["--model-window", "tiny-model=2000", "--log-bodies"])
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
    let next = || lines.recv_timeout(Duration::from_secs(20)).expect("a log line in time");
    let banner = next();
    let address = banner
        .strip_prefix("compaction proxy on http://")
        .and_then(|rest| rest.split_once(": "))
        .map(|(address, _)| address.to_owned())
        .unwrap_or_else(|| panic!("the banner: {banner}"));
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
