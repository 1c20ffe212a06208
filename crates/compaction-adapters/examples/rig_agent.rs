//! Rig agents that prune old tool results with this project's compactor, two ways.
//!
//! The agents read files with a `read_file` tool, against an OpenAI-compatible server this
//! example starts on 127.0.0.1 (a script stands in for the model: it calls the tool, then
//! answers).
//!
//! 1. Memory: two agents run the same four prompts, one file each — one with rig's plain
//!    in-memory store, one with `pruning_memory`, the one line this crate adds. Before each
//!    prompt rig loads the conversation through the memory; the pruning one hands the model the
//!    old file contents as a one-line placeholder once the history passes its target, while
//!    the store keeps everything.
//! 2. Hook: one prompt reads all four files, one tool turn after another. A memory policy does
//!    not run between the turns of a prompt; `CompactionAgentHook` does, before every model call.
//!
//! ```sh
//! cargo run -p compaction-adapters --example rig_agent --features examples
//! ```

#[path = "support/mock_openai.rs"]
mod mock_openai;

use std::convert::Infallible;
use std::error::Error;
use std::sync::Arc;

use compaction_adapters::rig::{pruning_memory, CompactionAgentHook};
use mock_openai::{prompt_tokens, MockOpenAi, Reply};
use rig_agent::AgentBuilder;
use rig_core::memory::InMemoryConversationMemory;
use rig_core::providers::openai::OpenAIConfig;
use rig_core::tool::PortableTool;
use serde::Deserialize;
use serde_json::{json, Value};

/// Tokens the pruning memory keeps a loaded history under.
const TARGET_TOKENS: usize = 2_000;
const FILES: [&str; 4] = ["src/parser.rs", "src/lexer.rs", "src/eval.rs", "src/main.rs"];

/// A tool that returns a large file: about 2,000 tokens.
struct ReadFile;

#[derive(Deserialize)]
struct ReadFileArgs {
    path: String,
}

impl PortableTool for ReadFile {
    const NAME: &'static str = "read_file";
    type Args = ReadFileArgs;
    type Output = String;
    type Error = Infallible;

    fn description(&self) -> String {
        "Read a file of the project.".into()
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
    }

    async fn call(&self, args: ReadFileArgs) -> Result<String, Infallible> {
        let stem = args.path.trim_start_matches("src/").trim_end_matches(".rs").to_owned();
        Ok((0..160).map(|i| format!("pub fn {stem}_{i:03}() -> u32 {{ {i} }}\n")).collect())
    }
}

/// The model: asked to read a file, it calls `read_file`; given the result, it answers.
fn script(messages: &[Value]) -> Reply {
    let last = messages.last().cloned().unwrap_or_default();
    let text = match &last["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    };
    match last["role"].as_str() {
        Some("tool") => Reply::Text(format!("It defines {} functions.", text.matches("pub fn").count())),
        _ => {
            let path = FILES.iter().find(|file| text.contains(*file)).copied().unwrap_or("src/main.rs");
            let id = format!("call_{}", path.replace(['/', '.'], "_"));
            Reply::ToolCalls(vec![(id, "read_file".into(), json!({ "path": path }).to_string())])
        }
    }
}

/// The model of part 2: reads every file, one per turn, then answers.
fn script_all(messages: &[Value]) -> Reply {
    let read = messages.iter().filter(|m| m["role"] == "tool").count();
    match FILES.get(read) {
        Some(path) => Reply::ToolCalls(vec![(
            format!("call_{read}"),
            "read_file".into(),
            json!({ "path": path }).to_string(),
        )]),
        None => Reply::Text(format!("Read {read} files.")),
    }
}

/// How many tool results a request carries as pruning placeholders.
fn placeholders(request: &Value) -> usize {
    request["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter(|m| m["role"] == "tool" && m["content"].to_string().contains("Tool result removed"))
                .count()
        })
        .unwrap_or(0)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    // reqwest may be built with rustls and no crypto provider (see this crate's Cargo.toml);
    // the servers here are plain HTTP, but building a client needs a provider all the same.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let plain_server = MockOpenAi::start(script).await?;
    let pruning_server = MockOpenAi::start(script).await?;
    let model = |server: &MockOpenAi| {
        OpenAIConfig::new("no-key-needed")
            .with_base_url(server.base_url())
            .client()
            .chat("mock-model")
            .erase()
    };

    let plain = AgentBuilder::new(model(&plain_server))
        .preamble("You answer questions about the project's files.")
        .tool(ReadFile)
        .default_max_turns(4)
        .memory(InMemoryConversationMemory::new())
        .build();
    // The one line: a memory whose loads are pruned down to TARGET_TOKENS. (Shared, so this
    // example can read the policy's last report afterwards.)
    let memory = Arc::new(pruning_memory(TARGET_TOKENS));
    let pruning = AgentBuilder::new(model(&pruning_server))
        .preamble("You answer questions about the project's files.")
        .tool(ReadFile)
        .default_max_turns(4)
        .memory(memory.clone())
        .build();

    for file in FILES {
        let prompt = format!("Read {file} and tell me how many functions it defines.");
        let a = plain.prompt(prompt.as_str()).conversation("session").await?.output();
        let b = pruning.prompt(prompt.as_str()).conversation("session").await?.output();
        assert_eq!(a, b, "both agents answer the same");
        println!("{file}: {b}");
    }

    // Each prompt made two model calls; the first of each carries the history memory loaded.
    let plain_requests = plain_server.requests();
    let pruning_requests = pruning_server.requests();
    assert_eq!(plain_requests.len(), 2 * FILES.len());
    assert_eq!(pruning_requests.len(), 2 * FILES.len());
    println!("\nprompt  tokens sent (plain → pruning)  results pruned");
    for (i, file) in FILES.iter().enumerate() {
        let (p, q) = (&plain_requests[2 * i], &pruning_requests[2 * i]);
        println!(
            "{:>6}  {:>8} → {:<8}              {}   ({file})",
            i + 1,
            prompt_tokens(p),
            prompt_tokens(q),
            placeholders(q)
        );
    }

    let last = FILES.len() - 1;
    let (plain_last, pruning_last) = (&plain_requests[2 * last], &pruning_requests[2 * last]);
    assert!(placeholders(pruning_last) >= 2, "the older file contents were pruned");
    assert!(
        prompt_tokens(pruning_last) < prompt_tokens(plain_last) / 2,
        "the pruned history is much smaller"
    );
    assert_eq!(placeholders(plain_last), 0);
    let report = memory.policy().last_report().expect("the last load compacted");
    println!(
        "\nlast load: {} tokens → {} ({} results pruned); the store still holds all {} messages",
        report.tokens_before,
        report.tokens_after,
        report.results.len(),
        rig_core::memory::ConversationMemory::load(memory.inner(), &"session".into()).await?.len(),
    );

    // 2. One prompt, four tool turns, compacted before every model call.
    let hook_server = MockOpenAi::start(script_all).await?;
    let agent = AgentBuilder::new(model(&hook_server))
        .preamble("You answer questions about the project's files.")
        .tool(ReadFile)
        .default_max_turns(8)
        .add_hook(CompactionAgentHook::pruning(TARGET_TOKENS))
        .build();
    let answer = agent.prompt("Read every file of the project.").await?.output();
    println!("\none prompt with the hook: {answer}");
    println!("call  tokens sent  results pruned");
    let requests = hook_server.requests();
    for (i, request) in requests.iter().enumerate() {
        println!("{:>4}  {:>11}  {}", i + 1, prompt_tokens(request), placeholders(request));
    }
    assert_eq!(requests.len(), FILES.len() + 1);
    assert!(placeholders(&requests[FILES.len()]) >= 2, "pruned between the turns of one prompt");
    Ok(())
}
