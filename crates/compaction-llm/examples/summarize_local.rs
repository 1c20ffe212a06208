//! Summarization through an OpenAI-compatible server, and the server's own token count: the
//! blocking clients against a stand-in server this example starts on 127.0.0.1 (no network),
//! as vLLM, llama.cpp or Ollama would answer. Point `with_base_url` at a real server to use one.
//!
//! Run with `cargo run -p compaction-llm --example summarize_local`. It checks what it prints,
//! and `cargo test` runs it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc;
use std::sync::Arc;

use compaction_core::{Compactor, SummarizationCompactor, SummarizationSettings};
use compaction_llm::{ClientSettings, OpenAIChatGenerator, OpenAITokenCounter};
use compaction_model::Message;
use compaction_tokens::{ApproximateTokenCounter, TokenCounter};
use serde_json::{json, Value};

/// Answers `requests` requests on 127.0.0.1, one connection each, then stops: Chat Completions
/// with a fixed summary, input-token counts as a quarter of the request's bytes. Each request's
/// path and JSON body are sent back to the example.
fn start_server(requests: usize) -> std::io::Result<(SocketAddr, mpsc::Receiver<(String, Value)>)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let (seen, received) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(requests) {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(&mut stream);
            let (mut request_line, mut length) = (String::new(), 0);
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                    break;
                }
                if let Some((name, value)) = header.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let path = request_line.split_whitespace().nth(1).unwrap_or_default().to_owned();
            let request: Value = serde_json::from_slice(&body).unwrap_or_default();
            let reply = if path.ends_with("/chat/completions") {
                json!({
                    "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": request["model"],
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
                        "content": "- The user asked for a migration plan; the agent read the schema and the logs."}}],
                    "usage": {"prompt_tokens": length / 4, "completion_tokens": 18, "total_tokens": length / 4 + 18}
                })
            } else {
                json!({"object": "response.input_tokens", "input_tokens": length / 4})
            };
            let reply = reply.to_string();
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                reply.len()
            );
            let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(reply.as_bytes()));
            let _ = seen.send((path, request));
        }
    });
    Ok((address, received))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (address, received) = start_server(8)?;
    let settings = ClientSettings::default()
        .with_api_key("local") // a local server checks no key; a real one reads OPENAI_API_KEY
        .with_base_url(format!("http://{address}/v1"))
        .with_max_retries(0);

    let mut messages = vec![Message::system("You plan database migrations.")];
    for turn in 0..4 {
        messages
            .push(Message::user(format!("Question {turn}: ") + &"what about the orders table? ".repeat(30)));
        messages.push(Message::assistant("It has 40 columns and three indexes. ".repeat(30)));
    }
    messages.push(Message::user("Now write the plan."));
    let approximate = ApproximateTokenCounter::default();
    let before = approximate.count(&messages, &[]);

    // The model summarizes the oldest turns until the conversation fits half its size.
    let generator = OpenAIChatGenerator::new("qwen2.5-7b-instruct", settings.clone())?;
    let summarizer =
        SummarizationCompactor::new(SummarizationSettings::default())?.with_generator(Arc::new(generator));
    let compaction =
        summarizer.try_compact(&messages, before / 2, &approximate)?.ok_or("nothing to summarize")?;
    let compacted = compaction.messages(&messages);
    let after = approximate.count(&compacted, &[]);
    println!("{} messages, {before} tokens → {} messages, {after} tokens", messages.len(), compacted.len());
    let summary = compacted.iter().find_map(|m| m.text().filter(|t| t.starts_with("<conversation_summary>")));
    println!("{}", summary.ok_or("no summary in the conversation")?);
    assert!(after <= before / 2);

    // What the server was sent: the reference's instruction and a transcript of the old turns.
    let (path, request) = received.recv()?;
    println!(
        "the server got POST {path} for {} with {} messages",
        request["model"],
        request["messages"].as_array().map_or(0, Vec::len)
    );
    assert_eq!(path, "/v1/chat/completions");

    // The provider's own count, where the approximate one is only an estimate.
    let counter = OpenAITokenCounter::new("gpt-4o", settings)?;
    let provider_count = counter.try_count(&compacted, &[])?;
    println!("the server counts {provider_count} tokens (approximately {after})");
    let (path, _) = received.recv()?;
    assert_eq!(path, "/v1/responses/input_tokens");
    assert!(provider_count > 0);
    Ok(())
}
