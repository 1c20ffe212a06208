//! A local upstream on 127.0.0.1 that records what it receives and answers as the request's
//! `x-test` header asks: JSON, an error status, a stream released event by event, a stream that
//! ticks until its client goes, no answer at all, or a reset.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// One request as the upstream received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Names in lower case, in the order received.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// The events a `stream` answer sends, one chunk each.
pub const EVENTS: [&str; 3] = [
    "event: message_start\ndata: {\"type\":\"message_start\"}\n\n",
    "data: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"h\\u00e9\"}}\n\n",
    "data: [DONE]\n\n",
];

/// A streamed answer reporting 7,050 tokens for the request and its reply, 1,000 read from the
/// cache.
pub const USAGE_EVENTS: [&str; 3] = [
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":6000,\"cache_read_input_tokens\":1000,\"cache_creation_input_tokens\":0,\"output_tokens\":1}}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"ok\"}}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":50}}\n\n",
];

/// The JSON a plain answer carries.
pub const ANSWER: &str = r#"{"id":"msg_1","usage":{"input_tokens":12,"output_tokens":3}}"#;

#[derive(Debug)]
pub struct Upstream {
    pub address: SocketAddr,
    received: Arc<Mutex<Vec<Recorded>>>,
    /// Lets a `stream` answer send its next event.
    pub release: Arc<Notify>,
    /// Set when a client of a `hang` or `tick` answer went away.
    closed: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Upstream {
    pub async fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let address = listener.local_addr().expect("an address");
        let received = Arc::new(Mutex::new(Vec::new()));
        let release = Arc::new(Notify::new());
        let closed = Arc::new(AtomicBool::new(false));
        let (r, n, c) = (received.clone(), release.clone(), closed.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (r, n, c) = (r.clone(), n.clone(), c.clone());
                tokio::spawn(async move {
                    let _ = serve(stream, r, n, c).await;
                });
            }
        });
        Upstream { address, received, release, closed, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn received(&self) -> Vec<Recorded> {
        self.received.lock().expect("not poisoned").clone()
    }

    /// Waits up to five seconds for a client of a `hang` or `tick` answer to go away.
    pub async fn saw_client_go(&self) -> bool {
        for _ in 0..100 {
            if self.closed.load(Ordering::SeqCst) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }
}

async fn serve(
    mut stream: TcpStream,
    received: Arc<Mutex<Vec<Recorded>>>,
    release: Arc<Notify>,
    closed: Arc<AtomicBool>,
) -> std::io::Result<()> {
    let mut buffer = Vec::new();
    let head_end = loop {
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_owned();
    let path = request_line.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize =
        headers.iter().find(|(n, _)| n == "content-length").map_or(0, |(_, v)| v.parse().unwrap_or(0));
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let mut chunk = vec![0u8; length - body.len()];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let mode = headers.iter().find(|(n, _)| n == "x-test").map_or("json".to_owned(), |(_, v)| v.clone());
    received.lock().expect("not poisoned").push(Recorded { method, path, headers, body });
    match mode.as_str() {
        "json" => {
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{ANSWER}",
                ANSWER.len()
            );
            stream.write_all(answer.as_bytes()).await?;
        }
        redirect if redirect.starts_with("redirect:") => {
            // A redirect to another host: the proxy must hand it to its client, not follow it
            // with the client's credentials.
            let location = &redirect["redirect:".len()..];
            let answer = format!(
                "HTTP/1.1 307 Temporary Redirect\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
            stream.write_all(answer.as_bytes()).await?;
        }
        "cut" => {
            // One event, then the connection closes mid-stream.
            stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n")
                .await?;
            let event = EVENTS[0];
            stream.write_all(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes()).await?;
        }
        "429" => {
            let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
            let answer = format!(
                "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nretry-after: 7\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(answer.as_bytes()).await?;
        }
        "stream" => {
            stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n")
                .await?;
            for (i, event) in EVENTS.iter().enumerate() {
                if i > 0 {
                    release.notified().await;
                }
                stream.write_all(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes()).await?;
                stream.flush().await?;
            }
            stream.write_all(b"0\r\n\r\n").await?;
        }
        "usage-stream" => {
            // An Anthropic stream whose usage says the request was far larger than it looks.
            stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n")
                .await?;
            for event in USAGE_EVENTS {
                stream.write_all(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes()).await?;
            }
            stream.write_all(b"0\r\n\r\n").await?;
        }
        "tick-3" => {
            // Three events, a little apart.
            stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n")
                .await?;
            let event = "data: {\"tick\":true}\n\n";
            for _ in 0..3 {
                stream.write_all(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes()).await?;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            stream.write_all(b"0\r\n\r\n").await?;
        }
        "tick" => {
            stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n")
                .await?;
            let event = "data: {\"tick\":true}\n\n";
            loop {
                let sent = stream.write_all(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes()).await;
                if sent.is_err() {
                    closed.store(true, Ordering::SeqCst);
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        "hang" => {
            // No answer: wait for the client to go.
            let mut chunk = [0u8; 64];
            while let Ok(n) = stream.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
            }
            closed.store(true, Ordering::SeqCst);
        }
        _ => {
            // "reset": the connection closes with no answer.
        }
    }
    Ok(())
}
