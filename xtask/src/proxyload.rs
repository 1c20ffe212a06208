//! Section (m) of `cargo xtask bench-vs-reference` (`--only proxy-load`): the release
//! `compaction proxy` under load, on loopback only, bounded in count and time.
//!
//! A local upstream (std threads, HTTP/1.1 by hand, keep-alive) answers every request with a
//! streamed (SSE, chunked) reply that ends with a usage event (the body it received, at four
//! bytes a token), in the OpenAI Chat Completions or the Anthropic Messages shape by path, at
//! once or, when the client asks, at a model's pace; it records the size of each body it
//! received. Clients send ~1 MB bodies, generated deterministically from the transcript
//! generator (`gen-transcript --format openai`, and the same conversation as a Messages
//! request), to the upstream directly and through the proxy, and time each request to the last
//! byte of its answer: one at a time; as 200 conversations, each a thread sending its growing
//! requests one after the other on a connection it keeps, each once the answer to the one before
//! has streamed in; and as waves of 200 released at once (a fresh connection each). The proxy
//! runs as a user runs it, a child process, once with a window the bodies stay below (the hook
//! passes them unchanged) and once with one they exceed (the hook compacts them); its peak RSS
//! is `VmHWM` of `/proc/<pid>/status`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::gen;
use crate::logs::LogFormat;

/// Conversations at once in a concurrent wave.
pub const CONVERSATIONS: usize = 200;
/// Requests one at a time, each direct then through the proxy, before the waves.
const SEQUENTIAL: usize = 100;
/// Concurrent waves (each direct, then through the proxy) per proxy run, at most.
const ROUNDS: usize = 3;
/// The whole section stops starting new waves after this long.
const BUDGET: Duration = Duration::from_secs(180);
/// How long the proxy is left idle after a wave before its `VmRSS` is read.
const SETTLE: Duration = Duration::from_millis(300);
/// No socket waits longer than this.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(30);
/// The size the bodies are generated at.
const BODY_SIZE: &str = "1MB";
/// Stands in the first user message of the body template; each conversation writes its number
/// over it, so that no two conversations share a prefix.
const MARKER: &str = "conversation-000000";
/// The two proxy runs: the name in tables, `--context-window`.
const MODES: [(&str, &str); 2] = [("passed unchanged", "2000000"), ("compacted", "200000")];
/// Requests each conversation sends in the conversation load, one after the other, each the
/// one before plus the model's next turn (a call) and its results.
const TURNS: usize = 3;
/// Times the conversation load is run per proxy run, each with new conversations: its p50 and
/// p99 are the median of the loads' (one slow or one lucky load must not decide them).
const CONVERSATION_LOADS: usize = 3;
/// In the conversation load, how long the upstream takes before its first event (the model
/// reading the prompt) and then between two events (writing the answer): each answer takes
/// about 2 s, as a model's turn of a few dozen tokens does.
const FIRST_EVENT: Duration = Duration::from_millis(800);
const BETWEEN_EVENTS: Duration = Duration::from_millis(150);
/// In the conversation load, conversation `i` starts `i` × this after the first: the 200
/// start over one answer's time, as agents started at different times do.
const STAGGER: Duration = Duration::from_millis(10);
/// The upstream's usage event reports the body it received as this many bytes a token.
const BYTES_PER_TOKEN: usize = 4;

/// What one proxy run measured.
pub struct ModeRun {
    pub label: &'static str,
    pub window: &'static str,
    /// Milliseconds added per request, one at a time: through the proxy − directly.
    pub sequential_added: Vec<f64>,
    /// Milliseconds added per request in the concurrent waves (each request's time through the
    /// proxy − the same request's directly, in the wave before).
    pub concurrent_added: Vec<f64>,
    /// The waves' wall times, directly and through the proxy, in seconds.
    pub waves: Vec<(f64, f64)>,
    /// The proxy's CPU time (user and system) over each wave through it, in seconds.
    pub wave_cpu: Vec<f64>,
    /// Milliseconds added per request in each conversation load (each request's time through
    /// the proxy − the same request's directly, in the run before).
    pub conversation_added: Vec<Vec<f64>>,
    /// The conversation loads' wall times, directly and through the proxy, in seconds.
    pub conversation_wall: Vec<(f64, f64)>,
    /// Requests the upstream received through the proxy smaller than sent, in the
    /// conversation load, and how many it received.
    pub conversation_compacted: (usize, usize),
    /// `VmHWM` after the conversation load (before any wave), and `VmRSS` once it is over, in kB.
    pub conversation_peak_kib: u64,
    pub conversation_settled_kib: u64,
    /// Requests that failed (status, connection, or an answer not byte for byte the upstream's).
    pub errors: usize,
    pub first_error: Option<String>,
    pub requests: usize,
    /// Requests the upstream received through the proxy smaller than they were sent, and the
    /// mean size received.
    pub compacted: usize,
    pub received_mean: f64,
    /// `VmRSS` once started (the footprint), in kB.
    pub idle_kib: u64,
    /// After each wave: `VmHWM` (the peak so far), and `VmRSS` once the wave is over and the
    /// allocator has had [`SETTLE`] to hand freed pages back, in kB.
    pub peaks_kib: Vec<u64>,
    pub settled_kib: Vec<u64>,
    /// Compaction lines the proxy logged.
    pub logged: usize,
}

impl ModeRun {
    /// The median over the conversation loads of their `p`th percentile of added latency.
    fn conversation_median(&self, p: f64) -> f64 {
        let mut each: Vec<f64> = self.conversation_added.iter().map(|added| percentile(added, p)).collect();
        each.sort_by(f64::total_cmp);
        each.get(each.len() / 2).copied().unwrap_or(0.0)
    }
}

pub struct Run {
    pub openai_bytes: usize,
    pub anthropic_bytes: usize,
    pub modes: Vec<ModeRun>,
    pub seconds: f64,
    /// `/proc/loadavg`'s three load averages when the section ended: the machine is shared, and
    /// what else ran shows in the latencies.
    pub load: String,
}

/// Runs the section with the release CLI at `cli`.
pub fn run(cli: &Path) -> Result<Run> {
    let started = Instant::now();
    eprintln!("(m) compaction proxy under load: {CONVERSATIONS} conversations at once, {BODY_SIZE} bodies");
    let templates = Templates::new()?;
    let upstream = Upstream::start()?;
    let mut modes = Vec::new();
    let mut wave_number = 0usize;
    for (label, window) in MODES {
        eprintln!("  proxy --context-window {window} ({label})");
        let proxy = Proxy::start(cli, upstream.address, window)?;
        let result = measure(&templates, &upstream, &proxy, label, window, &mut wave_number, started);
        let logged = proxy.stop();
        let mut run = result?;
        run.logged = logged;
        modes.push(run);
    }
    upstream.stop();
    Ok(Run {
        openai_bytes: templates.openai.len(),
        anthropic_bytes: templates.anthropic.len(),
        modes,
        seconds: started.elapsed().as_secs_f64(),
        load: std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(", "))
            .unwrap_or_else(|_| "unknown".into()),
    })
}

fn measure(
    templates: &Templates,
    upstream: &Upstream,
    proxy: &Proxy,
    label: &'static str,
    window: &'static str,
    wave_number: &mut usize,
    started: Instant,
) -> Result<ModeRun> {
    let idle_kib = proxy.status("VmRSS:")?;
    let mut run = ModeRun {
        label,
        window,
        sequential_added: Vec::new(),
        concurrent_added: Vec::new(),
        waves: Vec::new(),
        wave_cpu: Vec::new(),
        conversation_added: Vec::new(),
        conversation_wall: Vec::new(),
        conversation_compacted: (0, 0),
        conversation_peak_kib: 0,
        conversation_settled_kib: 0,
        errors: 0,
        first_error: None,
        requests: 0,
        compacted: 0,
        received_mean: 0.0,
        idle_kib,
        peaks_kib: Vec::new(),
        settled_kib: Vec::new(),
        logged: 0,
    };
    let mut received = Vec::new();
    let note = |run: &mut ModeRun, outcome: &Outcome| {
        run.requests += 1;
        if let Err(e) = &outcome.result {
            run.errors += 1;
            run.first_error.get_or_insert_with(|| e.clone());
        }
    };
    // Warm-up (connections, pages), then one at a time.
    *wave_number += 1;
    for i in 0..2 + SEQUENTIAL {
        let conversation = *wave_number * 1000 + i;
        let body = templates.body(conversation);
        let direct = request(upstream.address, &body, conversation);
        let proxied = request(proxy.address, &body, conversation);
        note(&mut run, &direct);
        note(&mut run, &proxied);
        if i >= 2 {
            run.sequential_added.push(proxied.ms - direct.ms);
        }
    }
    // The conversation load: each conversation a loop of requests, each sent once the answer
    // to the one before has streamed in; first directly, then through the proxy. Run
    // [`CONVERSATION_LOADS`] times, each with conversations of its own.
    for _ in 0..CONVERSATION_LOADS {
        *wave_number += 1;
        let first = *wave_number * 1000;
        upstream.forget();
        let (direct_wall, direct) = conversations(upstream.address, templates, first);
        let (proxied_wall, proxied) = conversations(proxy.address, templates, first);
        let mut added = Vec::with_capacity(proxied.len());
        for (d, p) in direct.iter().zip(&proxied) {
            note(&mut run, d);
            note(&mut run, p);
            added.push(p.ms - d.ms);
        }
        run.conversation_added.push(added);
        run.conversation_wall.push((direct_wall, proxied_wall));
        let seen = upstream.received();
        for i in 0..CONVERSATIONS {
            if let Some(sizes) = seen.get(&(first + i)) {
                // Directly, then through the proxy: each turn's request twice.
                for turn in 0..TURNS {
                    if let (Some(&sent), Some(&through)) = (sizes.get(turn), sizes.get(TURNS + turn)) {
                        run.conversation_compacted.0 += usize::from(through < sent);
                        run.conversation_compacted.1 += 1;
                    }
                }
            }
        }
        eprintln!("    conversations: directly {direct_wall:.2} s, through the proxy {proxied_wall:.2} s");
    }
    run.conversation_peak_kib = proxy.status("VmHWM:")?;
    std::thread::sleep(SETTLE);
    run.conversation_settled_kib = proxy.status("VmRSS:")?;
    eprintln!(
        "    conversations: peak RSS {:.1} MB, then {:.1} MB",
        run.conversation_peak_kib as f64 / 1024.0,
        run.conversation_settled_kib as f64 / 1024.0,
    );
    // A wave through the proxy first, not timed: the proxy's pool of connections to the upstream
    // then holds as many as a wave needs, as a proxy that has been serving does.
    *wave_number += 1;
    let first = *wave_number * 1000;
    let bodies: Vec<Arc<Body>> = (0..CONVERSATIONS).map(|i| Arc::new(templates.body(first + i))).collect();
    let (_, warm) = wave(proxy.address, &bodies, first);
    drop(bodies);
    for outcome in &warm {
        note(&mut run, outcome);
    }
    for round in 0..ROUNDS {
        if round > 0 && started.elapsed() > BUDGET {
            break;
        }
        *wave_number += 1;
        let first = *wave_number * 1000;
        let bodies: Vec<Arc<Body>> =
            (0..CONVERSATIONS).map(|i| Arc::new(templates.body(first + i))).collect();
        upstream.forget();
        let (direct_wall, direct) = wave(upstream.address, &bodies, first);
        let cpu_before = proxy.cpu_seconds()?;
        let (proxied_wall, proxied) = wave(proxy.address, &bodies, first);
        run.wave_cpu.push(proxy.cpu_seconds()? - cpu_before);
        for (d, p) in direct.iter().zip(&proxied) {
            note(&mut run, d);
            note(&mut run, p);
            run.concurrent_added.push(p.ms - d.ms);
        }
        // What the upstream received through the proxy (the second of each conversation's two).
        let seen = upstream.received();
        for (i, body) in bodies.iter().enumerate() {
            if let Some(sizes) = seen.get(&(first + i)) {
                if let Some(&through) = sizes.get(1) {
                    received.push(through as f64);
                    run.compacted += usize::from(through < body.bytes.len());
                }
            }
        }
        run.waves.push((direct_wall, proxied_wall));
        let peak = proxy.status("VmHWM:")?;
        std::thread::sleep(SETTLE);
        let settled = proxy.status("VmRSS:")?;
        run.peaks_kib.push(peak);
        run.settled_kib.push(settled);
        eprintln!(
            "    wave {}: directly {direct_wall:.2} s, through the proxy {proxied_wall:.2} s, peak RSS {:.1} MB, then {:.1} MB",
            round + 1,
            peak as f64 / 1024.0,
            settled as f64 / 1024.0,
        );
    }
    run.received_mean = received.iter().sum::<f64>() / received.len().max(1) as f64;
    Ok(run)
}

/// One request's body, its conversation's API, and the answer it must get.
struct Body {
    bytes: Vec<u8>,
    anthropic: bool,
    /// Whether the upstream takes a model's time over its answer (the conversation load), or
    /// answers at once.
    paced: bool,
}

/// The two bodies, each with [`MARKER`] in its first user message, and the conversation's
/// last [`TURNS`] requests in both APIs (the last is the whole body).
struct Templates {
    openai: Vec<u8>,
    anthropic: Vec<u8>,
    /// Turn by turn: (Chat Completions, Messages).
    turns: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Templates {
    fn new() -> Result<Templates> {
        let text = gen::generate_in(BODY_SIZE, 1, LogFormat::OpenAi)?;
        let mut openai: Value = serde_json::from_str(&text).context("the generated OpenAI request")?;
        drop(text);
        let messages = openai["messages"].as_array_mut().context("the generated request's messages")?;
        let first_user = messages
            .iter_mut()
            .find(|m| m["role"] == "user" && m["content"].is_string())
            .context("a user message in the generated request")?;
        let content = first_user["content"].as_str().unwrap_or_default();
        first_user["content"] = json!(format!("[{MARKER}] {content}"));
        openai["stream"] = json!(true);
        openai["stream_options"] = json!({"include_usage": true});
        let turns = Self::turns(&openai)?;
        let (openai, anthropic) = turns.last().cloned().context("a turn")?;
        Ok(Templates { openai, anthropic, turns })
    }

    /// The last [`TURNS`] requests of the conversation `openai` is the last of: each ends with
    /// tool results, and the next adds one assistant message (its calls) and their results.
    fn turns(openai: &Value) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let messages = openai["messages"].as_array().context("the generated request's messages")?;
        let mut ends: Vec<usize> = (1..messages.len())
            .filter(|&i| messages[i]["role"] == "assistant" && messages[i - 1]["role"] == "tool")
            .collect();
        if messages.last().is_some_and(|m| m["role"] == "tool") {
            ends.push(messages.len());
        }
        if ends.len() < TURNS {
            bail!("the generated conversation has {} turns, fewer than {TURNS}", ends.len());
        }
        ends[ends.len() - TURNS..]
            .iter()
            .map(|&end| {
                let mut request = openai.clone();
                request["messages"] = Value::Array(messages[..end].to_vec());
                Ok((serde_json::to_vec(&request)?, serde_json::to_vec(&to_anthropic(&request))?))
            })
            .collect()
    }

    /// Conversation `n`'s body: even numbers OpenAI, odd ones Anthropic.
    fn body(&self, n: usize) -> Body {
        let anthropic = n % 2 == 1;
        let bytes = if anthropic { &self.anthropic } else { &self.openai };
        Body { bytes: numbered(bytes, n), anthropic, paced: false }
    }

    /// Conversation `n`'s request at `turn` (of [`TURNS`]), answered at a model's pace.
    fn turn(&self, n: usize, turn: usize) -> Body {
        let anthropic = n % 2 == 1;
        let (openai, messages) = &self.turns[turn];
        let bytes = if anthropic { messages } else { openai };
        Body { bytes: numbered(bytes, n), anthropic, paced: true }
    }
}

/// `template` with conversation `n`'s number over [`MARKER`]'s digits.
fn numbered(template: &[u8], n: usize) -> Vec<u8> {
    let mut bytes = template.to_vec();
    let digits = format!("{:06}", n % 1_000_000);
    if let Some(at) = bytes.windows(MARKER.len()).position(|w| w == MARKER.as_bytes()) {
        let end = at + MARKER.len();
        bytes[end - 6..end].copy_from_slice(digits.as_bytes());
    }
    bytes
}

/// The same conversation as an Anthropic Messages request: system apart, calls as `tool_use`
/// blocks, results as `tool_result` blocks of the next user turn.
fn to_anthropic(openai: &Value) -> Value {
    let mut system = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    let push_user = |messages: &mut Vec<Value>, block: Value| {
        if let Some(last) = messages.last_mut() {
            if last["role"] == "user" {
                if let Some(blocks) = last["content"].as_array_mut() {
                    blocks.push(block);
                    return;
                }
            }
        }
        messages.push(json!({"role": "user", "content": [block]}));
    };
    for message in openai["messages"].as_array().map(Vec::as_slice).unwrap_or_default() {
        match message["role"].as_str() {
            Some("system") => system.push(message["content"].as_str().unwrap_or_default().to_owned()),
            Some("user") => match &message["content"] {
                Value::String(text) => push_user(&mut messages, json!({"type": "text", "text": text})),
                Value::Array(parts) => {
                    for part in parts {
                        if let Some(text) = part["text"].as_str() {
                            push_user(&mut messages, json!({"type": "text", "text": text}));
                        } else if let Some(url) = part["image_url"]["url"].as_str() {
                            let (kind, data) = url.split_once(";base64,").unwrap_or(("data:image/png", url));
                            push_user(
                                &mut messages,
                                json!({"type": "image", "source": {"type": "base64",
                                    "media_type": kind.trim_start_matches("data:"), "data": data}}),
                            );
                        }
                    }
                }
                _ => {}
            },
            Some("assistant") => {
                let mut blocks = Vec::new();
                if let Some(text) = message["content"].as_str().filter(|t| !t.is_empty()) {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in message["tool_calls"].as_array().map(Vec::as_slice).unwrap_or_default() {
                    let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
                    let input: Value = serde_json::from_str(arguments).unwrap_or_else(|_| json!({}));
                    blocks.push(json!({"type": "tool_use", "id": call["id"],
                        "name": call["function"]["name"], "input": input}));
                }
                messages.push(json!({"role": "assistant", "content": blocks}));
            }
            Some("tool") => push_user(
                &mut messages,
                json!({"type": "tool_result", "tool_use_id": message["tool_call_id"],
                    "content": message["content"]}),
            ),
            _ => {}
        }
    }
    let tools: Vec<Value> = openai["tools"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|t| {
            json!({"name": t["function"]["name"], "description": t["function"]["description"],
                "input_schema": t["function"]["parameters"]})
        })
        .collect();
    json!({"model": "claude-sonnet-4-5", "max_tokens": 8192, "stream": true,
        "system": system.join("\n"), "tools": tools, "messages": messages})
}

/// The SSE events the upstream answers with, by API, its usage event reporting `input_tokens`.
fn events(anthropic: bool, input_tokens: usize) -> Vec<String> {
    if anthropic {
        let mut out = vec![format!(
            "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{{\"input_tokens\":{input_tokens},\"cache_read_input_tokens\":0,\"cache_creation_input_tokens\":0,\"output_tokens\":1}}}}}}\n\n"
        )];
        out.push("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n".into());
        for word in ["The ", "tests ", "pass ", "now."] {
            out.push(format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{word}\"}}}}\n\n"));
        }
        out.push("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n".into());
        out.push("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":5}}\n\n".into());
        out.push("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".into());
        out
    } else {
        let chunk = |delta: &str, finish: &str| {
            format!("data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"gpt-4o\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n")
        };
        let mut out = vec![chunk("{\"role\":\"assistant\",\"content\":\"\"}", "null")];
        for word in ["The ", "tests ", "pass ", "now."] {
            out.push(chunk(&format!("{{\"content\":\"{word}\"}}"), "null"));
        }
        out.push(chunk("{}", "\"stop\""));
        out.push(format!("data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"gpt-4o\",\"choices\":[],\"usage\":{{\"prompt_tokens\":{input_tokens},\"completion_tokens\":5,\"total_tokens\":{}}}}}\n\n", input_tokens + 5));
        out.push("data: [DONE]\n\n".into());
        out
    }
}

/// A request's time to the last byte of its answer, in milliseconds, and whether it succeeded.
struct Outcome {
    ms: f64,
    result: std::result::Result<(), String>,
}

/// Sends all `bodies` at once (one thread each, released together), conversation `first + i`.
fn wave(to: SocketAddr, bodies: &[Arc<Body>], first: usize) -> (f64, Vec<Outcome>) {
    let barrier = Arc::new(Barrier::new(bodies.len() + 1));
    let threads: Vec<_> = bodies
        .iter()
        .enumerate()
        .map(|(i, body)| {
            let (barrier, body) = (barrier.clone(), body.clone());
            std::thread::spawn(move || {
                // Connected before the release, so that the listeners' accept queues (128
                // connections on std's and on the proxy's listener) are not what is measured.
                let connected = connect(to);
                barrier.wait();
                match connected {
                    Ok(stream) => timed(&stream, to, &body, first + i),
                    Err(e) => Outcome { ms: f64::NAN, result: Err(format!("connecting: {e}")) },
                }
            })
        })
        .collect();
    barrier.wait();
    let started = Instant::now();
    let outcomes = threads
        .into_iter()
        .map(|t| t.join().unwrap_or(Outcome { ms: f64::NAN, result: Err("a client thread panicked".into()) }))
        .collect();
    (started.elapsed().as_secs_f64(), outcomes)
}

/// The conversation load: [`CONVERSATIONS`] conversations, conversation `first + i` starting
/// `i` × [`STAGGER`] after the first, each on a connection of its own (kept alive, as an SDK's
/// pool keeps it) sending its [`TURNS`] requests one after the other, each as soon as the
/// answer to the one before has streamed in whole. The outcomes conversation by conversation,
/// turn by turn, and the wall time of the whole.
fn conversations(to: SocketAddr, templates: &Templates, first: usize) -> (f64, Vec<Outcome>) {
    let started = Instant::now();
    let outcomes = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..CONVERSATIONS)
            .map(|i| {
                scope.spawn(move || {
                    std::thread::sleep(STAGGER * i as u32);
                    let n = first + i;
                    let failed = |e: String| {
                        (0..TURNS).map(|_| Outcome { ms: f64::NAN, result: Err(e.clone()) }).collect()
                    };
                    let stream = match connect(to) {
                        Ok(stream) => stream,
                        Err(e) => return failed(format!("connecting: {e}")),
                    };
                    let mut outcomes: Vec<Outcome> = Vec::with_capacity(TURNS);
                    for turn in 0..TURNS {
                        let body = templates.turn(n, turn);
                        let outcome = timed(&stream, to, &body, n);
                        let broken = outcome.result.is_err();
                        outcomes.push(outcome);
                        if broken {
                            // The connection is in an unknown state: the rest are not sent.
                            while outcomes.len() < TURNS {
                                outcomes.push(Outcome {
                                    ms: f64::NAN,
                                    result: Err("not sent after an error".into()),
                                });
                            }
                            break;
                        }
                    }
                    outcomes
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| {
                t.join().unwrap_or_else(|_| {
                    (0..TURNS)
                        .map(|_| Outcome { ms: f64::NAN, result: Err("a client thread panicked".into()) })
                        .collect()
                })
            })
            .collect::<Vec<_>>()
    });
    (started.elapsed().as_secs_f64(), outcomes)
}

/// One streamed request on a fresh connection, timed from its first byte sent to the last
/// byte of the answer.
fn request(to: SocketAddr, body: &Body, conversation: usize) -> Outcome {
    match connect(to) {
        Ok(stream) => timed(&stream, to, body, conversation),
        Err(e) => Outcome { ms: f64::NAN, result: Err(format!("connecting: {e}")) },
    }
}

fn connect(to: SocketAddr) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&to, SOCKET_TIMEOUT)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(SOCKET_TIMEOUT))?;
    stream.set_write_timeout(Some(SOCKET_TIMEOUT))?;
    Ok(stream)
}

fn timed(stream: &TcpStream, to: SocketAddr, body: &Body, conversation: usize) -> Outcome {
    let started = Instant::now();
    let result = exchange(stream, to, body, conversation);
    Outcome { ms: started.elapsed().as_secs_f64() * 1000.0, result: result.map_err(|e| format!("{e:#}")) }
}

fn exchange(stream: &TcpStream, to: SocketAddr, body: &Body, conversation: usize) -> Result<()> {
    let (path, auth) = if body.anthropic {
        ("/v1/messages", "x-api-key: sk-ant-bench\r\nanthropic-version: 2023-06-01")
    } else {
        ("/v1/chat/completions", "authorization: Bearer sk-bench")
    };
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {to}\r\ncontent-type: application/json\r\naccept: text/event-stream\r\n\
         {auth}\r\nx-conversation: {conversation}\r\n{}content-length: {}\r\n\r\n",
        if body.paced { "x-paced: 1\r\n" } else { "" },
        body.bytes.len()
    );
    let mut writer = stream;
    writer.write_all(head.as_bytes())?;
    writer.write_all(&body.bytes)?;
    let mut reader = BufReader::new(stream);
    let (first, headers) = read_head(&mut reader)?.context("the connection closed before an answer")?;
    // "HTTP/1.1 200 OK": the status is the second word.
    let status: u16 = first.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let answer = read_body(&mut reader, &headers)?;
    if status != 200 {
        bail!("status {status}: {}", String::from_utf8_lossy(&answer[..answer.len().min(200)]));
    }
    // The usage event reports what the upstream received (through the proxy, maybe compacted):
    // every other byte is known.
    let reported = reported_tokens(&answer).context("the answer's usage")?;
    if answer != events(body.anthropic, reported).concat().as_bytes() {
        bail!("the answer differs from the upstream's ({} bytes)", answer.len());
    }
    Ok(())
}

/// The input tokens an answer's usage event reports.
fn reported_tokens(answer: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(answer).ok()?;
    let at = text
        .find("\"input_tokens\":")
        .map(|i| i + 15)
        .or_else(|| text.find("\"prompt_tokens\":").map(|i| i + 16))?;
    let digits: String = text[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Reads a request or status line (returned trimmed) and the headers after it (names
/// lowercased); `None` at a clean end of the connection.
fn read_head(reader: &mut impl BufRead) -> Result<Option<(String, HashMap<String, String>)>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let first = line.trim_end().to_owned();
    let mut headers = HashMap::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            bail!("the connection closed in the headers");
        }
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    Ok(Some((first, headers)))
}

/// Reads a body framed by `content-length` or chunked.
fn read_body(reader: &mut impl BufRead, headers: &HashMap<String, String>) -> Result<Vec<u8>> {
    if headers.get("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        let mut body = Vec::new();
        let mut line = String::new();
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .with_context(|| format!("a chunk size, not {line:?}"))?;
            if size == 0 {
                // Trailers, then the empty line.
                loop {
                    line.clear();
                    if reader.read_line(&mut line)? == 0 || line.trim_end().is_empty() {
                        return Ok(body);
                    }
                }
            }
            let start = body.len();
            body.resize(start + size, 0);
            reader.read_exact(&mut body[start..])?;
            line.clear();
            reader.read_line(&mut line)?;
        }
    }
    let length: usize = headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(body)
}

/// The local upstream: a thread per connection, keep-alive, a streamed answer per request.
struct Upstream {
    address: SocketAddr,
    stopping: Arc<AtomicBool>,
    /// Conversation → the sizes of the bodies received for it, in order.
    received: Arc<Mutex<HashMap<usize, Vec<usize>>>>,
    acceptor: std::thread::JoinHandle<()>,
}

impl Upstream {
    fn start() -> Result<Upstream> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let address = listener.local_addr()?;
        let stopping = Arc::new(AtomicBool::new(false));
        let received = Arc::new(Mutex::new(HashMap::new()));
        let acceptor = {
            let (stopping, received) = (stopping.clone(), received.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let received = received.clone();
                    std::thread::spawn(move || {
                        let _ = serve(stream, &received);
                    });
                }
            })
        };
        Ok(Upstream { address, stopping, received, acceptor })
    }

    fn forget(&self) {
        self.received.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    fn received(&self) -> HashMap<usize, Vec<usize>> {
        self.received.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn stop(self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wakes the acceptor; each connection's thread ends when its client closes, or times out.
        let _ = TcpStream::connect(self.address);
        let _ = self.acceptor.join();
    }
}

fn serve(stream: TcpStream, received: &Mutex<HashMap<usize, Vec<usize>>>) -> Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(SOCKET_TIMEOUT))?;
    stream.set_write_timeout(Some(SOCKET_TIMEOUT))?;
    let mut reader = BufReader::new(&stream);
    let mut writer = &stream;
    while let Some((line, headers)) = read_head(&mut reader)? {
        let body = read_body(&mut reader, &headers)?;
        if let Some(n) = headers.get("x-conversation").and_then(|n| n.parse().ok()) {
            received.lock().unwrap_or_else(|e| e.into_inner()).entry(n).or_default().push(body.len());
        }
        let tokens = body.len() / BYTES_PER_TOKEN;
        drop(body);
        let anthropic = line.contains("/v1/messages");
        let paced = headers.contains_key("x-paced");
        if paced {
            std::thread::sleep(FIRST_EVENT);
        }
        writer.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n",
        )?;
        for (i, event) in events(anthropic, tokens).into_iter().enumerate() {
            if paced && i > 0 {
                std::thread::sleep(BETWEEN_EVENTS);
            }
            writer.write_all(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes())?;
        }
        writer.write_all(b"0\r\n\r\n")?;
    }
    Ok(())
}

/// The proxy as a child process, its standard error read by a thread.
struct Proxy {
    child: Child,
    address: SocketAddr,
    logged: Arc<Mutex<usize>>,
}

impl Proxy {
    fn start(cli: &Path, upstream: SocketAddr, window: &str) -> Result<Proxy> {
        let upstream = format!("http://{upstream}");
        let mut child = Command::new(cli)
            .args(["proxy", "--listen", "127.0.0.1:0", "--openai-upstream", &upstream])
            .args(["--anthropic-upstream", &upstream, "--context-window", window])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {} proxy", cli.display()))?;
        let stderr = child.stderr.take().context("the proxy's standard error")?;
        let (tx, rx) = std::sync::mpsc::channel();
        let logged = Arc::new(Mutex::new(0usize));
        {
            let logged = logged.clone();
            std::thread::spawn(move || {
                let mut sent = false;
                for line in BufReader::new(stderr).lines().map_while(std::result::Result::ok) {
                    if !sent {
                        // "compaction proxy on http://ADDRESS: ..."
                        if let Some(rest) = line.split("http://").nth(1) {
                            let address = rest.split(':').take(2).collect::<Vec<_>>().join(":");
                            let _ = tx.send(address);
                            sent = true;
                            continue;
                        }
                    }
                    if line.contains(": compacted") {
                        *logged.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                    }
                }
            });
        }
        let address = match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(address) => address,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                bail!("the proxy did not say where it listens within 10 s");
            }
        };
        let address = address.parse().with_context(|| format!("the proxy's address {address:?}"))?;
        Ok(Proxy { child, address, logged })
    }

    /// The CPU time the proxy has used so far, user and system, in seconds: fields 14 and 15
    /// of `/proc/<pid>/stat` (after its parenthesised name), in clock ticks of 1/100 s, Linux's
    /// `USER_HZ`.
    fn cpu_seconds(&self) -> Result<f64> {
        let path = format!("/proc/{}/stat", self.child.id());
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        let after_name = text.rsplit_once(')').map(|(_, rest)| rest).with_context(|| path.clone())?;
        // The fields after the name start at the third (the state): utime is the 14th.
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let ticks = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
        let (user, system) =
            ticks(14).zip(ticks(15)).with_context(|| format!("utime and stime in {path}"))?;
        Ok((user + system) as f64 / 100.0)
    }

    /// A `/proc/<pid>/status` field, in kB.
    fn status(&self, field: &str) -> Result<u64> {
        let path = format!("/proc/{}/status", self.child.id());
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        text.lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("{field} in {path}"))
    }

    /// Stops the proxy; the compaction lines it logged.
    fn stop(mut self) -> usize {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Let the reader thread see the end of the pipe.
        std::thread::sleep(Duration::from_millis(50));
        let logged = *self.logged.lock().unwrap_or_else(|e| e.into_inner());
        logged
    }
}

impl Drop for Proxy {
    /// However the section ends, the proxy does not outlive it.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `p`-th percentile (nearest rank) of `values`.
fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Run {
    /// Section (m)'s text and its Summary rows.
    pub fn write(&self, text: &mut String, summary: &mut Vec<String>) {
        let mb = |kib: u64| kib as f64 * 1024.0 / 1e6;
        let body_mb = (self.openai_bytes + self.anthropic_bytes) as f64 / 2.0 / 1e6;
        let in_flight = CONVERSATIONS as f64 * body_mb;
        let _ = writeln!(
            text,
            "## (m) `compaction proxy` under load: {CONVERSATIONS} concurrent streamed conversations, 1 MB bodies\n\n\
             The release binary as a user runs it, a child process on loopback:\n\n\
             ```sh\ntarget/release/compaction proxy --listen 127.0.0.1:0 --openai-upstream UPSTREAM \
             --anthropic-upstream UPSTREAM --context-window N\n```\n\n\
             in front of a local upstream (xtask's, std threads, HTTP/1.1 keep-alive) that answers each \
             request with a streamed reply (SSE, chunked, an event a chunk) ending with a usage event \
             (the body it received at {BYTES_PER_TOKEN} bytes a token), OpenAI Chat Completions chunks \
             or Anthropic Messages events by path. The bodies are the generator's conversation \
             (`gen-transcript --size 1MB --format openai`: tools, calls and their results) as a \
             streamed Chat Completions request ({:.2} MB) and the same conversation as a Messages \
             request (`tool_use` and `tool_result` blocks, {:.2} MB), each conversation's first \
             message numbered so no two share a prefix; half the conversations are each. Every \
             request is timed from its first byte sent to the last byte of its answer, which must be \
             the upstream's byte for byte (but the digits of the usage it reports, which tell what \
             it received). The same requests are sent directly to the upstream and through the \
             proxy; **added latency** is, per request, the time through the proxy − the time \
             directly. Three loads:\n\n\
             - **one at a time**: {SEQUENTIAL} requests (after two of warm-up), each on a fresh \
             connection, directly and then through the proxy, the upstream answering at once;\n\
             - **{CONVERSATIONS} conversations**, as agents load a proxy: each conversation a loop of \
             {TURNS} requests on a connection it keeps, each sent as soon as the answer to the one \
             before has streamed in, each the one before plus the model's next turn (one assistant \
             message of calls, and their results: the last is the whole body above); the upstream \
             takes a model's time over each answer ({} ms to its first event, then {} ms between \
             events: about 2 s), and the conversations start {} ms apart (all {CONVERSATIONS} within \
             one answer's time), so about {:.0} requests a second arrive while most conversations \
             wait for their answers; the whole load directly, then through the proxy, \
             {CONVERSATION_LOADS} times over with new conversations each time, its p50 and p99 the \
             median of the loads' (each load's are in the detail below);\n\
             - **{CONVERSATIONS} released at once**, the worst case: waves of {CONVERSATIONS} \
             requests, each on a fresh connection opened before the wave is released (std's \
             listeners and the proxy's queue 128 connections: 200 opened at once would time TCP's \
             one-second retry, not the proxy), answered at once, first directly, then through the \
             proxy, up to {ROUNDS} waves per proxy run, after one untimed wave through the proxy \
             (its pool of connections to the upstream then holds what a wave needs, as a proxy that \
             has been serving does).\n\n\
             The proxy runs twice: with a window the \
             bodies stay below (the hook reads and counts each request and passes it unchanged) and \
             with one they exceed (the hook compacts each new conversation with tool-result pruning, \
             from about 250,000 tokens to at most 80,000, 0.4 of the window; a conversation's later \
             turns get its earlier replacements back and are anchored on the upstream's count of \
             the turn before). Peak RSS is the proxy's `VmHWM` \
             (`/proc/<pid>/status`) after the conversation load (before any wave) and after each \
             wave, its footprint `VmRSS` once it listens, and `VmRSS` again {} ms after each load. \
             The lines logged are the proxy's one line per compaction on standard error, over all \
             its requests (warm-up, one at a time, conversations and waves). Everything (both proxy \
             runs) took {:.1} s; the load average when it ended: {}.\n\n\
             | the hook | `--context-window` | requests | errors | compacted in the timed waves | compaction lines logged | mean body at the upstream | added, one at a time, p50 / p99 | added, {CONVERSATIONS} conversations, p50 / p99 (median of the loads) | added, {CONVERSATIONS} released at once, p50 / p99 | each wave's wall, directly / through the proxy |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
            self.openai_bytes as f64 / 1e6,
            self.anthropic_bytes as f64 / 1e6,
            FIRST_EVENT.as_millis(),
            BETWEEN_EVENTS.as_millis(),
            STAGGER.as_millis(),
            1.0 / STAGGER.as_secs_f64(),
            SETTLE.as_millis(),
            self.seconds,
            self.load,
        );
        for m in &self.modes {
            let waves =
                m.waves.iter().map(|(d, p)| format!("{d:.2} s / {p:.2} s")).collect::<Vec<_>>().join("; ");
            let _ = writeln!(
                text,
                "| {} | {} | {} | {} | {} / {} | {} | {:.2} MB | {:.1} ms / {:.1} ms | {:.1} ms / {:.1} ms | {:.0} ms / {:.0} ms | {waves} |",
                m.label,
                m.window,
                m.requests,
                m.errors,
                m.compacted,
                m.concurrent_added.len(),
                m.logged,
                m.received_mean / 1e6,
                percentile(&m.sequential_added, 50.0),
                percentile(&m.sequential_added, 99.0),
                m.conversation_median(50.0),
                m.conversation_median(99.0),
                percentile(&m.concurrent_added, 50.0),
                percentile(&m.concurrent_added, 99.0),
            );
        }
        let _ = writeln!(
            text,
            "\nThe conversation load, in detail:\n\n\
             | the hook | requests through the proxy | compacted at the upstream | each load's added p50 / p99 | each load's wall, directly / through the proxy | peak RSS above the footprint | RSS {} ms after |\n\
             |---|---:|---:|---|---|---:|---:|",
            SETTLE.as_millis()
        );
        for m in &self.modes {
            let _ = writeln!(
                text,
                "| {} | {} | {} | {} | {} | {:.1} MB | {:.1} MB |",
                m.label,
                m.conversation_compacted.1,
                m.conversation_compacted.0,
                m.conversation_added
                    .iter()
                    .map(|added| format!(
                        "{:.1} ms / {:.1} ms",
                        percentile(added, 50.0),
                        percentile(added, 99.0)
                    ))
                    .collect::<Vec<_>>()
                    .join("; "),
                m.conversation_wall
                    .iter()
                    .map(|(direct, proxied)| format!("{direct:.2} s / {proxied:.2} s"))
                    .collect::<Vec<_>>()
                    .join("; "),
                mb(m.conversation_peak_kib) - mb(m.idle_kib),
                mb(m.conversation_settled_kib),
            );
        }
        let _ = writeln!(
            text,
            "\nThe proxy's memory (MB), with {CONVERSATIONS} × {body_mb:.2} MB = {in_flight:.0} MB of \
             requests in flight in each wave:\n\n\
             | the hook | footprint | peak RSS after each wave | RSS {} ms after each wave |\n|---|---:|---|---|",
            SETTLE.as_millis()
        );
        let series =
            |values: &[u64]| values.iter().map(|v| format!("{:.1}", mb(*v))).collect::<Vec<_>>().join(", ");
        for m in &self.modes {
            let _ = writeln!(
                text,
                "| {} | {:.1} | {} | {} |",
                m.label,
                mb(m.idle_kib),
                series(&m.peaks_kib),
                series(&m.settled_kib)
            );
        }
        let errors: usize = self.modes.iter().map(|m| m.errors).sum();
        let worst_p99_alone =
            self.modes.iter().map(|m| percentile(&m.sequential_added, 99.0)).fold(0.0, f64::max);
        let worst_p99_conversations =
            self.modes.iter().map(|m| m.conversation_median(99.0)).fold(0.0, f64::max);
        let worst_p99_load =
            self.modes.iter().map(|m| percentile(&m.concurrent_added, 99.0)).fold(0.0, f64::max);
        let last = |values: &[u64]| values.last().copied().unwrap_or(0);
        let first = |values: &[u64]| values.first().copied().unwrap_or(0);
        let worst_peak =
            self.modes.iter().map(|m| mb(last(&m.peaks_kib)) - mb(m.idle_kib)).fold(0.0, f64::max);
        // What stays once a wave is over, from the first wave to the last: memory the requests
        // served keep.
        let kept = self
            .modes
            .iter()
            .map(|m| mb(last(&m.settled_kib)) - mb(first(&m.settled_kib)))
            .fold(0.0, f64::max);
        let grew = kept > 0.1 * in_flight;
        let memory_met = worst_peak <= in_flight * 2.0 && !grew;
        let first_error = self.modes.iter().find_map(|m| m.first_error.as_deref());
        // The proxy's CPU over the waves, and the least time a wave can take through it on two
        // cores: what a request at the end of a wave waits for.
        let cpu: Vec<f64> = self.modes.iter().flat_map(|m| m.wave_cpu.iter().copied()).collect();
        let cpu_per_wave = cpu.iter().sum::<f64>() / cpu.len().max(1) as f64;
        let cpu_per_request_ms = cpu_per_wave * 1e3 / CONVERSATIONS as f64;
        let least_wave_ms = cpu_per_wave * 1e3 / 2.0;
        let _ = writeln!(
            text,
            "\nErrors: **{errors}**{} (goal 0: {}). Added latency, p99: **{worst_p99_alone:.1} ms** one \
             request at a time, **{worst_p99_conversations:.1} ms** with {CONVERSATIONS} conversations (the \
             median of {CONVERSATION_LOADS} loads) \
             (goal under 10 ms for a 1 MB body on this two-core machine: {} one at a time, {} with \
             {CONVERSATIONS} conversations, the issue's load). Released at once, the worst case, \
             **{worst_p99_load:.0} ms**: {CONVERSATIONS} requests of 1 MB are {in_flight:.0} MB for the \
             proxy to read, parse, hash, count (and compact) and forward in the same instant, which \
             took it {cpu_per_wave:.2} s of CPU a wave on average ({cpu_per_request_ms:.1} ms a \
             request, relaying included), so at least {least_wave_ms:.0} ms on two cores, while the \
             clients and the upstream share them: a request waits for those ahead of it, and the \
             p99 of a wave is the time to get through it, not one request's cost. No latency under \
             10 ms is possible there short of under {:.2} ms of CPU per 1 MB request; the figure \
             stays as the worst case. One at a time, the p99 of {SEQUENTIAL} requests is their second \
             slowest. Memory: the peak above the footprint is at most \
             **{worst_peak:.1} MB** for {in_flight:.0} MB of requests in flight in a wave ({:.2}× them), and \
             what stays once a wave is over {} from the first wave to the last (by {kept:.1} MB at \
             most; goal: bounded by the requests in flight, read here as a peak at most 2× their \
             bytes, and what stays after a wave not growing by more than a tenth of them as \
             requests are served: {}).\n",
            first_error.map(|e| format!(" (first: {e})")).unwrap_or_default(),
            crate::bench::verdict(errors == 0),
            crate::bench::verdict(worst_p99_alone < 10.0),
            crate::bench::verdict(worst_p99_conversations < 10.0),
            10.0 * 2.0 / CONVERSATIONS as f64,
            worst_peak / in_flight,
            if grew { "grows" } else { "does not grow" },
            crate::bench::verdict(memory_met),
        );
        summary.push(format!(
            "| (m) `compaction proxy`, {CONVERSATIONS} concurrent streamed conversations of 1 MB requests, errors | {errors} | 0 | {} |",
            crate::bench::verdict(errors == 0)
        ));
        let verdicts = [worst_p99_alone, worst_p99_conversations]
            .map(|p99| crate::bench::verdict(p99 < 10.0))
            .join(" / ");
        summary.push(format!(
            "| (m) the same, added latency p99: one at a time / {CONVERSATIONS} conversations (median of {CONVERSATION_LOADS} loads) | {worst_p99_alone:.1} ms / {worst_p99_conversations:.1} ms | < 10 ms | {verdicts} |",
        ));
        summary.push(format!(
            "| (m) worst case, {CONVERSATIONS} requests of 1 MB released at once: added latency p99 / the least a wave takes on two cores (the proxy's CPU for it ÷ 2) | {worst_p99_load:.0} ms / {least_wave_ms:.0} ms | (none: see (m)) | |",
        ));
        summary.push(format!(
            "| (m) the same, proxy peak RSS above its footprint / requests in flight | {worst_peak:.1} MB / {in_flight:.0} MB | ≤ 2×, not growing | {} |",
            crate::bench::verdict(memory_met)
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_answers_each_api_with_its_stream_and_records_the_body() {
        let upstream = Upstream::start().expect("upstream");
        // (API, body, conversation): two requests on fresh connections, each checked byte for byte.
        let cases =
            [(false, &br#"{"messages":[]}"#[..], 2), (true, &br#"{"messages":[],"max_tokens":1}"#[..], 3)];
        for (anthropic, bytes, conversation) in cases {
            let body = Body { bytes: bytes.to_vec(), anthropic, paced: false };
            let outcome = request(upstream.address, &body, conversation);
            assert_eq!(outcome.result, Ok(()), "{bytes:?}");
            assert_eq!(upstream.received().get(&conversation), Some(&vec![bytes.len()]));
        }
        upstream.stop();
    }

    #[test]
    fn a_messages_request_pairs_each_call_with_its_result() {
        let openai = json!({"messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "[conversation-000000] fix it"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\":\"ls\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.rs"},
        ], "tools": [{"type": "function", "function": {"name": "bash", "description": "d", "parameters": {}}}]});
        let anthropic = to_anthropic(&openai);
        assert_eq!(anthropic["system"], "be brief");
        assert_eq!(anthropic["messages"][1]["content"][0]["input"], json!({"cmd": "ls"}));
        assert_eq!(anthropic["messages"][2]["content"][0]["tool_use_id"], "c1");
        assert_eq!(anthropic["tools"][0]["name"], "bash");
        let templates = Templates {
            openai: serde_json::to_vec(&openai).expect("json"),
            anthropic: serde_json::to_vec(&anthropic).expect("json"),
            turns: Vec::new(),
        };
        let body = templates.body(1017);
        assert!(body.anthropic);
        assert!(String::from_utf8_lossy(&body.bytes).contains("[conversation-001017] fix it"));
    }

    #[test]
    fn a_conversations_turns_each_add_one_assistant_message_and_its_results() {
        let call = |id: &str| {
            json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "bash", "arguments": "{}"}}]})
        };
        let result = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "out"});
        let mut messages =
            vec![json!({"role": "system", "content": "s"}), json!({"role": "user", "content": "u"})];
        for id in ["a", "b", "c", "d"] {
            messages.push(call(id));
            messages.push(result(id));
            messages.push(result(id));
        }
        let openai = json!({"model": "m", "messages": messages, "stream": true});
        let turns = Templates::turns(&openai).expect("turns");
        assert_eq!(turns.len(), TURNS);
        let read = |bytes: &[u8]| serde_json::from_slice::<Value>(bytes).expect("json");
        let (last, _) = turns.last().expect("a turn");
        assert_eq!(read(last), openai, "the last turn is the whole conversation");
        for pair in turns.windows(2) {
            let (before, after) = (read(&pair[0].0), read(&pair[1].0));
            let (before, after) = (
                before["messages"].as_array().expect("messages"),
                after["messages"].as_array().expect("messages"),
            );
            assert_eq!(after[..before.len()], before[..], "each turn carries the one before");
            let added: Vec<&Value> = after[before.len()..].iter().map(|m| &m["role"]).collect();
            assert_eq!(added, ["assistant", "tool", "tool"]);
            let (before, after) = (read(&pair[0].1), read(&pair[1].1));
            let (before, after) = (
                before["messages"].as_array().expect("messages"),
                after["messages"].as_array().expect("messages"),
            );
            assert_eq!(after[..before.len()], before[..], "in the Messages API too");
            assert_eq!(after.len(), before.len() + 2, "a tool_use turn and a tool_result turn");
        }
    }

    #[test]
    fn the_upstream_reports_the_body_it_received_as_its_usage() {
        let upstream = Upstream::start().expect("upstream");
        for (anthropic, size) in [(false, 400), (true, 4000)] {
            let mut bytes = br#"{"messages":[],"x":""#.to_vec();
            bytes.resize(size - 2, b'x');
            bytes.extend_from_slice(br#""}"#);
            let path = if anthropic { "/v1/messages" } else { "/v1/chat/completions" };
            let mut stream = connect(upstream.address).expect("a connection");
            write!(stream, "POST {path} HTTP/1.1\r\ncontent-length: {}\r\n\r\n", bytes.len()).expect("sent");
            stream.write_all(&bytes).expect("sent");
            let mut reader = BufReader::new(&stream);
            let (_, headers) = read_head(&mut reader).expect("an answer").expect("a head");
            let answer = read_body(&mut reader, &headers).expect("a body");
            assert_eq!(reported_tokens(&answer), Some(size / BYTES_PER_TOKEN));
            assert_eq!(answer, events(anthropic, size / BYTES_PER_TOKEN).concat().as_bytes());
        }
        upstream.stop();
    }
}
