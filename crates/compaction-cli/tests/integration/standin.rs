//! A model server on 127.0.0.1 that the tests start, answering as the reference fixtures'
//! stand-in generator does (`StandIn` in `xtask/reference/generate_family.py`; see "The stand-in
//! model" in `xtask/reference/README.md`), over OpenAI's Chat Completions or Anthropic's Messages
//! API, and counting tokens over `/responses/input_tokens` and `/messages/count_tokens`. Real
//! sockets and real HTTP on both sides: the command under test runs unchanged.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

use serde_json::{json, Value};

/// The API the server speaks for chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    OpenAi,
    Anthropic,
}

/// How the stand-in answers: a fixture's `stand_in` object.
#[derive(Debug, Clone)]
pub struct StandIn {
    pub keep_chars: usize,
    pub fail_round: Option<usize>,
    pub failure: String,
}

impl StandIn {
    pub fn new(spec: &Value) -> Self {
        StandIn {
            keep_chars: spec["keep_chars"].as_u64().expect("keep_chars") as usize,
            fail_round: spec["fail_round"].as_u64().map(|r| r as usize),
            failure: spec["failure"].as_str().unwrap_or_default().to_owned(),
        }
    }
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The system and user texts of a chat request, in either API's shape.
    pub fn prompt(&self) -> (String, String) {
        let text = |content: &Value| match content {
            Value::String(text) => text.clone(),
            Value::Array(blocks) => {
                blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("")
            }
            _ => String::new(),
        };
        let messages = self.body["messages"].as_array().expect("messages");
        let system = match self.body.get("system") {
            Some(system) => text(system),
            None => text(&messages[0]["content"]),
        };
        (system, text(&messages.last().expect("a user message")["content"]))
    }
}

/// A running server; it lives until the test process ends.
pub struct Server {
    address: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

/// What a chat request is answered with.
enum Reply {
    Text(String),
    ToolCallOnly,
    Fail,
}

impl Server {
    /// A server answering chat as `stand_in` does, in `api`'s shape; a count request is answered
    /// with `count` (the request body's length when `None`).
    pub fn start(api: Api, stand_in: StandIn) -> Server {
        Server::with_counts(api, stand_in, |body| Some(body.to_string().len()))
    }

    /// A server whose count endpoint answers `count(body)` tokens, or fails with 400 for `None`.
    pub fn with_counts(
        api: Api,
        stand_in: StandIn,
        count: impl Fn(&Value) -> Option<usize> + Send + Sync + 'static,
    ) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let address = listener.local_addr().expect("local address").to_string();
        let requests: Arc<Mutex<Vec<Recorded>>> = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&requests);
        let count = Arc::new(count);
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (recorded, stand_in, count) =
                    (Arc::clone(&recorded), stand_in.clone(), Arc::clone(&count));
                thread::spawn(move || {
                    let _ = serve(stream, api, &stand_in, &*count, &recorded);
                });
            }
        });
        Server { address, requests }
    }

    /// The base URL as the provider's SDK takes it: with `/v1` for OpenAI, without for Anthropic.
    pub fn base_url(&self, api: Api) -> String {
        match api {
            Api::OpenAi => format!("http://{}/v1", self.address),
            Api::Anthropic => format!("http://{}", self.address),
        }
    }

    /// The chat requests received, in order.
    pub fn chats(&self) -> Vec<Recorded> {
        self.requests().into_iter().filter(|r| !r.path.contains("token")).collect()
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(
    stream: TcpStream,
    api: Api,
    stand_in: &StandIn,
    count: &(dyn Fn(&Value) -> Option<usize> + Send + Sync),
    recorded: &Mutex<Vec<Recorded>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.trim_end().split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let length: usize =
        headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let request = Recorded { path: path.clone(), headers, body };
    let (status, reply) = if path.ends_with("/input_tokens") || path.ends_with("/count_tokens") {
        recorded.lock().unwrap().push(request.clone());
        match count(&request.body) {
            Some(tokens) => (200, json!({"input_tokens": tokens})),
            None => (
                400,
                json!({"error": {"type": "invalid_request_error", "message": "the stand-in cannot count"}}),
            ),
        }
    } else {
        let round = {
            let mut all = recorded.lock().unwrap();
            all.push(request.clone());
            all.iter().filter(|r| !r.path.contains("token")).count() - 1
        };
        chat(api, stand_in, &request, round)
    };
    let body = reply.to_string();
    let stream = reader.get_mut();
    write!(
        stream,
        "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        if status == 200 { "OK" } else { "Error" },
        body.len()
    )?;
    stream.flush()
}

/// The stand-in's answer to round `round`, in `api`'s shape.
fn chat(api: Api, stand_in: &StandIn, request: &Recorded, round: usize) -> (u16, Value) {
    let (_, prompt) = request.prompt();
    let transcript = prompt.strip_prefix("<conversation_to_summarize>\n").unwrap_or(&prompt);
    let reply = if Some(round) == stand_in.fail_round {
        match stand_in.failure.as_str() {
            "raise" => Reply::Fail,
            "empty" => Reply::Text(String::new()),
            "blank" => Reply::Text(" \n\t\u{1c}\u{3000} ".to_owned()),
            "no_text" => Reply::ToolCallOnly,
            "bloat" => Reply::Text(format!("{transcript}{transcript}")),
            other => panic!("unknown stand-in failure {other:?}"),
        }
    } else {
        let kept: String = transcript.chars().take(stand_in.keep_chars).collect();
        Reply::Text(format!(" \u{1f} Summary {round}: {kept} \n"))
    };
    let model = request.body["model"].clone();
    match (api, reply) {
        (_, Reply::Fail) => {
            (500, json!({"error": {"message": "the stand-in was told to fail", "type": "server_error"}}))
        }
        (Api::OpenAi, Reply::Text(text)) => (
            200,
            json!({
                "id": "chatcmpl-1", "object": "chat.completion", "model": model,
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
            }),
        ),
        (Api::OpenAi, Reply::ToolCallOnly) => (
            200,
            json!({
                "id": "chatcmpl-1", "object": "chat.completion", "model": model,
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                    "tool_calls": [{"id": "call_x", "type": "function", "function": {"name": "x", "arguments": "{}"}}]}}]
            }),
        ),
        (Api::Anthropic, Reply::Text(text)) => (
            200,
            json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 5}
            }),
        ),
        (Api::Anthropic, Reply::ToolCallOnly) => (
            200,
            json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "tool_use", "id": "toolu_x", "name": "x", "input": {}}], "stop_reason": "tool_use",
                "usage": {"input_tokens": 10, "output_tokens": 5}
            }),
        ),
    }
}
