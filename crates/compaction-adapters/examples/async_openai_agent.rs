//! An async agent loop on tokio, in async-openai's types, compacted before every model call.
//!
//! The loop keeps the conversation as compaction's messages in an `AgentState`. Before each
//! call, a `CompactionHook` estimates the request from the usage the server reported for the
//! previous one (plus the tool results added since) and, past 70% of an 8,000-token window,
//! prunes old tool results down to 40%. The conversation goes to the server as async-openai
//! Chat Completions messages (`to_chat_completions`), and the reply comes back the same way
//! (`from_chat_completions`). The server is an OpenAI-compatible one this example starts on
//! 127.0.0.1; a script stands in for the model: it reads two files at a time with parallel
//! `read_file` calls, three times, then answers.
//!
//! ```sh
//! cargo run -p compaction-adapters --example async_openai_agent --features examples
//! ```

#[path = "support/mock_openai.rs"]
mod mock_openai;

use std::error::Error;

use async_openai::config::OpenAIConfig;
use async_openai::types::chat::{
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionTool, ChatCompletionTools, CreateChatCompletionRequestArgs,
    FunctionObject,
};
use async_openai::Client;
use compaction_adapters::openai::{from_chat_completions, to_chat_completions};
use compaction_core::ToolResultPruningCompactor;
use compaction_hook::{AgentState, CompactionHook, CompactionHookSettings};
use compaction_model::{Message, ToolCall, ToolSpec, CONTEXT_COMPACTION};
use mock_openai::{MockOpenAi, Reply};
use serde_json::{json, Value};

const CONTEXT_WINDOW: usize = 8_000;
const FILES: [&str; 6] =
    ["src/lexer.rs", "src/parser.rs", "src/ast.rs", "src/eval.rs", "src/types.rs", "src/main.rs"];

/// The model: two `read_file` calls per turn until every file is read, then an answer.
fn script(messages: &[Value]) -> Reply {
    let read = messages.iter().filter(|m| m["role"] == "tool").count();
    if read >= FILES.len() {
        return Reply::Text(format!(
            "Read {read} files; the interpreter has a lexer, a parser and an evaluator."
        ));
    }
    Reply::ToolCalls(
        FILES[read..(read + 2).min(FILES.len())]
            .iter()
            .map(|path| {
                (
                    format!("call_{read}_{}", path.len()),
                    "read_file".into(),
                    json!({ "path": path }).to_string(),
                )
            })
            .collect(),
    )
}

/// The tool: a file of about 1,500 tokens.
fn read_file(call: &ToolCall) -> Message {
    let path = call.arguments.get("path").and_then(Value::as_str).unwrap_or("?");
    let text: String =
        (0..120).map(|i| format!("// {path}, line {i}: fn item_{i}() {{ todo() }}\n")).collect();
    Message::tool(text, call.clone(), false)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    // reqwest may be built with rustls and no crypto provider (see this crate's Cargo.toml);
    // the servers here are plain HTTP, but building a client needs a provider all the same.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = MockOpenAi::start(script).await?;
    let client = Client::with_config(
        OpenAIConfig::new().with_api_base(server.base_url()).with_api_key("no-key-needed"),
    );

    let read_spec = ToolSpec::new(
        "read_file",
        "Read a file of the project.",
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    );
    let tools = vec![ChatCompletionTools::Function(ChatCompletionTool {
        function: FunctionObject {
            name: read_spec.name.clone(),
            description: Some(read_spec.description.clone()),
            parameters: Some(read_spec.parameters.clone()),
            strict: None,
        },
    })];
    let hook = CompactionHook::new(
        Box::new(ToolResultPruningCompactor::default()),
        CompactionHookSettings::new(CONTEXT_WINDOW),
    )?;
    let mut state = AgentState::new(vec![
        Message::system("You read the project's files and summarize them."),
        Message::user("What does this interpreter consist of?"),
    ])
    .with_tools(vec![read_spec]);

    let mut compactions = 0;
    for turn in 1.. {
        // Compact before the call, anchored on what the server reported for the last one.
        let outcome = hook.run(&mut state);
        compactions += usize::from(outcome.compacted);

        let converted = to_chat_completions(state.messages());
        // Chat Completions messages have no `meta`: compaction's markers are all they lose.
        assert!(converted.losses().iter().all(|loss| loss.field == format!("meta.{CONTEXT_COMPACTION}")));
        let request = CreateChatCompletionRequestArgs::default()
            .model("mock-model")
            .messages(converted.into_value())
            .tools(tools.clone())
            .build()?;
        let response = client.chat().create(request).await?;
        let usage = response.usage.ok_or("the server reports usage")?;
        let choice = response.choices.into_iter().next().ok_or("the server answers")?;
        println!(
            "turn {turn}: estimated {:>5} tokens, compacted: {:<5} → server counted {:>5} prompt tokens",
            outcome.estimated_tokens, outcome.compacted, usage.prompt_tokens
        );
        assert!((usage.prompt_tokens as usize) < CONTEXT_WINDOW, "every request fits the window");

        // The reply, as a request message, is one of ours.
        let reply = ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
            content: choice.message.content.map(ChatCompletionRequestAssistantMessageContent::Text),
            refusal: choice.message.refusal,
            tool_calls: choice.message.tool_calls,
            ..Default::default()
        });
        let reply = from_chat_completions(&[reply]).remove(0);
        state.push(reply.clone());
        state.context_tokens = usage.total_tokens as usize;

        let calls: Vec<ToolCall> = reply.tool_calls().cloned().collect();
        if calls.is_empty() {
            println!("answer: {}", reply.text().unwrap_or_default());
            break;
        }
        // Run the tools concurrently, as an async agent would.
        let results = join_all(calls.iter().cloned().map(|call| async move { read_file(&call) })).await?;
        state.extend(results);
        state.step_count += 1;
    }
    assert!(compactions >= 1, "the window filled and the hook compacted");
    let requests = server.requests();
    let pruned = requests
        .last()
        .and_then(|r| r["messages"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter(|m| m["role"] == "tool" && m["content"].to_string().contains("Tool result removed"))
        .count();
    println!(
        "{} requests, {compactions} compactions; the last request carried {pruned} pruned results",
        requests.len()
    );
    assert!(pruned >= 2);
    Ok(())
}

/// Runs every future as a task and awaits them all, in order.
async fn join_all<F>(futures: impl IntoIterator<Item = F>) -> Result<Vec<F::Output>, tokio::task::JoinError>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(handle.await?);
    }
    Ok(out)
}
