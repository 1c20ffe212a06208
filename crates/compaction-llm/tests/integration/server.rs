//! A tiny HTTP/1.1 server on 127.0.0.1 that the tests start: it records every request and
//! answers as a handler says (a status, headers, a body, after a delay, or by hanging up). Real
//! sockets and real parsing on both sides: the clients under test run unchanged.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::Value;

/// One request as received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("the client sent JSON")
    }
}

/// How to answer a request.
#[derive(Debug, Clone)]
pub enum Answer {
    /// A reply.
    Reply { status: u16, headers: Vec<(String, String)>, body: String },
    /// Wait, then answer.
    After(Duration, Box<Answer>),
    /// Close the connection without a reply.
    HangUp,
    /// A 200 whose headers promise more body than ever comes: `start`, then nothing until the
    /// client gives up.
    Stall { start: String },
    /// A 200 whose body comes a byte every `every`, for as long as the client reads.
    Trickle { every: Duration },
}

impl Answer {
    pub fn json(status: u16, body: Value) -> Answer {
        Answer::Reply { status, headers: vec![], body: body.to_string() }
    }

    pub fn raw(status: u16, body: &str) -> Answer {
        Answer::Reply { status, headers: vec![], body: body.to_owned() }
    }

    pub fn with_header(self, name: &str, value: &str) -> Answer {
        match self {
            Answer::Reply { status, mut headers, body } => {
                headers.push((name.to_owned(), value.to_owned()));
                Answer::Reply { status, headers, body }
            }
            other => other,
        }
    }
}

type Handler = dyn Fn(&Recorded) -> Answer + Send + Sync;

/// A running server. It lives until the test process ends.
pub struct Server {
    address: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl Server {
    /// A server answering every request with `handler`.
    pub fn start(handler: impl Fn(&Recorded) -> Answer + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let address = listener.local_addr().expect("local address").to_string();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let recorded = Arc::clone(&requests);
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (handler, recorded) = (Arc::clone(&handler), Arc::clone(&recorded));
                thread::spawn(move || {
                    let _ = serve(stream, &*handler, &recorded);
                });
            }
        });
        Server { address, requests }
    }

    /// A server giving `answers` in order, then the last one again.
    pub fn scripted(answers: Vec<Answer>) -> Server {
        let next = AtomicUsize::new(0);
        Server::start(move |_| {
            let i = next.fetch_add(1, Ordering::SeqCst).min(answers.len() - 1);
            answers[i].clone()
        })
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(stream: TcpStream, handler: &Handler, recorded: &Mutex<Vec<Recorded>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut words = line.split_whitespace();
    let method = words.next().unwrap_or_default().to_owned();
    let path = words.next().unwrap_or_default().to_owned();
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
    let length =
        headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let request = Recorded { method, path, headers, body };
    recorded.lock().unwrap().push(request.clone());
    let mut answer = handler(&request);
    loop {
        match answer {
            Answer::After(delay, then) => {
                thread::sleep(delay);
                answer = *then;
            }
            Answer::HangUp => return Ok(()),
            Answer::Stall { start } => {
                let stream = reader.get_mut();
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    start.len() + 1000
                );
                stream.write_all(head.as_bytes())?;
                stream.write_all(start.as_bytes())?;
                stream.flush()?;
                // Until the client hangs up (a read returns), or long after any test's bound.
                let mut byte = [0; 1];
                stream.set_read_timeout(Some(Duration::from_secs(600)))?;
                let _ = stream.read(&mut byte);
                return Ok(());
            }
            Answer::Trickle { every } => {
                let stream = reader.get_mut();
                stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000000\r\n\r\n",
                )?;
                // Until a write fails: the client hung up.
                loop {
                    stream.write_all(b" ")?;
                    stream.flush()?;
                    thread::sleep(every);
                }
            }
            Answer::Reply { status, headers, body } => {
                let stream = reader.get_mut();
                let mut head = format!(
                    "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                    reason(status),
                    body.len()
                );
                for (name, value) in headers {
                    head.push_str(&format!("{name}: {value}\r\n"));
                }
                head.push_str("\r\n");
                stream.write_all(head.as_bytes())?;
                stream.write_all(body.as_bytes())?;
                return stream.flush();
            }
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// A port on which nothing listens: bound, then released.
pub fn closed_port_url(path: &str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let address = listener.local_addr().expect("local address");
    drop(listener);
    format!("http://{address}{path}")
}
