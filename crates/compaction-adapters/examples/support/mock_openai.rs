//! A scripted OpenAI-compatible Chat Completions server on 127.0.0.1, for the examples.
//!
//! It speaks just enough HTTP/1.1 for one request a connection (`Connection: close`), answers
//! `POST …/chat/completions` with the message a script picks from the request, streamed (SSE)
//! or not as the request asks, and reports `usage` the way OpenAI does: prompt tokens counted
//! from the request (four characters a token). Every request it served is kept for the example
//! to look at. Started with a context window, it refuses a longer request as OpenAI does: 400,
//! `context_length_exceeded`, naming the window and the count.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the model answers: plain text, or calls to tools.
pub enum Reply {
    /// The final answer of a turn.
    Text(String),
    /// Tool calls: (call id, tool name, arguments as JSON text).
    ToolCalls(Vec<(String, String, String)>),
}

/// Picks the reply to a request's `messages`.
pub type Script = dyn Fn(&[Value]) -> Reply + Send + Sync;

/// A running server.
pub struct MockOpenAi {
    /// Where it listens.
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<Value>>>,
    refused: Arc<Mutex<Vec<usize>>>,
}

/// What the server shares between connections.
struct Shared {
    script: Box<Script>,
    window: Option<u64>,
    requests: Arc<Mutex<Vec<Value>>>,
    refused: Arc<Mutex<Vec<usize>>>,
}

impl MockOpenAi {
    /// Starts a server that answers with `script`, on a free port of 127.0.0.1.
    #[allow(dead_code)] // each example uses one of the two starts
    pub async fn start(script: impl Fn(&[Value]) -> Reply + Send + Sync + 'static) -> std::io::Result<Self> {
        Self::start_with_window(script, None).await
    }

    /// Starts a server whose model has a context window of `window` prompt tokens, when given.
    pub async fn start_with_window(
        script: impl Fn(&[Value]) -> Reply + Send + Sync + 'static,
        window: Option<u64>,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let requests = Arc::new(Mutex::new(Vec::new()));
        let refused = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::new(Shared {
            script: Box::new(script),
            window,
            requests: requests.clone(),
            refused: refused.clone(),
        });
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let shared = shared.clone();
                tokio::spawn(async move {
                    if let Err(error) = serve(stream, &shared).await {
                        eprintln!("mock server: {error}");
                    }
                });
            }
        });
        Ok(MockOpenAi { addr, requests, refused })
    }

    /// The base URL to give a client (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The request bodies served so far, oldest first.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The positions in [`MockOpenAi::requests`] of the requests refused as too long.
    #[allow(dead_code)] // used by the examples that set a window
    pub fn refused(&self) -> Vec<usize> {
        self.refused.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

/// The tokens the server reports for a prompt: a character count of its messages over four.
pub fn prompt_tokens(body: &Value) -> u64 {
    let chars = body["messages"].to_string().chars().count();
    (chars / 4) as u64
}

async fn serve(mut stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    let body = read_request(&mut stream).await?;
    let request: Value = serde_json::from_slice(&body).map_err(std::io::Error::other)?;
    let prompt = prompt_tokens(&request);
    if let Some(window) = shared.window.filter(|&window| prompt > window) {
        if let (Ok(mut all), Ok(mut refused)) = (shared.requests.lock(), shared.refused.lock()) {
            refused.push(all.len());
            all.push(request);
        }
        let error = json!({"error": {
            "message": format!("This model's maximum context length is {window} tokens. However, your messages resulted in {prompt} tokens. Please reduce the length of the messages."),
            "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded",
        }});
        let response = http_response("400 Bad Request", "application/json", &error.to_string());
        stream.write_all(response.as_bytes()).await?;
        return stream.shutdown().await;
    }
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let reply = (shared.script)(&messages);
    let (message, finish) = match &reply {
        Reply::Text(text) => (json!({"role": "assistant", "content": text}), "stop"),
        Reply::ToolCalls(calls) => {
            let calls: Vec<Value> = calls
                .iter()
                .map(|(id, name, arguments)| {
                    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
                })
                .collect();
            (json!({"role": "assistant", "content": null, "tool_calls": calls}), "tool_calls")
        }
    };
    let completion = (message.to_string().chars().count() / 4) as u64;
    let usage = json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion});
    let streamed = request["stream"].as_bool().unwrap_or(false);
    if let Ok(mut all) = shared.requests.lock() {
        all.push(request);
    }
    let response = if streamed {
        let mut delta = message.clone();
        if let Some(calls) = delta.get_mut("tool_calls").and_then(Value::as_array_mut) {
            for (index, call) in calls.iter_mut().enumerate() {
                call["index"] = json!(index);
            }
        }
        let chunks = [
            json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": "mock",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": null}]}),
            json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": "mock",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
            json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": "mock",
                   "choices": [], "usage": usage}),
        ];
        let mut body: String = chunks.iter().map(|chunk| format!("data: {chunk}\n\n")).collect();
        body.push_str("data: [DONE]\n\n");
        http_response("200 OK", "text/event-stream", &body)
    } else {
        let body = json!({
            "id": "chatcmpl-mock", "object": "chat.completion", "created": 0, "model": "mock",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        });
        http_response("200 OK", "application/json", &body.to_string())
    };
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

fn http_response(status: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Reads one request and returns its body (the head must name a `Content-Length`).
async fn read_request(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed in the head",
            ));
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse::<usize>().ok())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "no content-length"))?;
    while buffer.len() < head_end + length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed in the body",
            ));
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    Ok(buffer[head_end..head_end + length].to_vec())
}
