//! An async agent loop on tokio, in async-openai's types: long tool results offloaded to a store
//! after each tool step, compaction before each model call, and recovery when the server still
//! refuses a request as longer than its context window.
//!
//! The loop keeps the conversation as compaction's messages in an `AgentState` and talks to an
//! OpenAI-compatible server this example starts on 127.0.0.1, converting with
//! `to_chat_completions` / `from_chat_completions`. A script stands in for the model: it reads
//! the project's files two at a time with parallel `read_file` calls, reads back the start of an
//! offloaded one with the read-back tool, then answers. Each step of the loop:
//!
//! 1. **Compact before the call.** A `CompactionHook` estimates the request from the usage the
//!    server reported for the previous one (plus the tool results since) and prunes old results
//!    past 70% of its window, down to 40% (`run_async`).
//! 2. **Call, and recover from an overflow.** The hook was told the model's advertised window
//!    (8,000 tokens), but the server was started with 4,000, as a llama.cpp or vLLM server often
//!    is. When it answers 400 `context_length_exceeded`, `context_overflow` reads the error,
//!    `ContextOverflowRecovery` compacts below what was refused and the request is sent again,
//!    once; the hook is then rebuilt with the window the error stated.
//! 3. **Run the tools** concurrently; the read-back tool reads the store asynchronously.
//! 4. **Offload.** `ToolResultOffloadHook::plan` picks the step's results over 4,000 characters
//!    and returns the writes; `commit_async` writes them to a file-system store without
//!    blocking the runtime (each write on a thread of its own); `finish` puts a pointer in each
//!    result's place.
//!
//! ```sh
//! cargo run -p compaction-adapters --example async_openai_agent --features examples
//! ```

#[path = "support/mock_openai.rs"]
mod mock_openai;

use std::error::Error;
use std::sync::Arc;

use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::chat::{
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionTool, ChatCompletionTools, CreateChatCompletionRequestArgs,
    CreateChatCompletionResponse, FunctionObject,
};
use async_openai::Client;
use compaction_adapters::openai::{from_chat_completions, to_chat_completions};
use compaction_core::ToolResultPruningCompactor;
use compaction_hook::{
    context_overflow, AgentState, CompactionHook, CompactionHookSettings, ContextOverflowRecovery, Recovery,
};
use compaction_model::{Message, ToolCall, ToolSpec, CONTEXT_COMPACTION, TOOL_RESULT_OFFLOADED};
use compaction_offload::{
    commit_async, read_offloaded_result_async, read_tool_spec, AsyncToolResultStore,
    FileSystemToolResultStore, OffloadOverChars, OffloadStrategies, StoredContent, ToolResultOffloadHook,
    READ_TOOL_NAME,
};
use mock_openai::{prompt_tokens, MockOpenAi, Reply};
use serde_json::{json, Value};

/// The window the agent is told: the model's advertised one.
const ADVERTISED_WINDOW: usize = 8_000;
/// The window the server was started with.
const SERVER_WINDOW: u64 = 4_000;
/// Results longer than this go to the store.
const OFFLOAD_OVER_CHARS: usize = 4_000;
/// The project's files and their lengths in lines, in the order the model reads them, two a turn.
const FILES: [(&str, usize); 12] = [
    ("src/lexer.rs", 120),
    ("src/parser.rs", 120),
    ("src/ast.rs", 40),
    ("src/types.rs", 40),
    ("src/eval.rs", 120),
    ("src/main.rs", 40),
    ("src/env.rs", 40),
    ("src/ops.rs", 40),
    ("src/util.rs", 40),
    ("src/error.rs", 40),
    ("tests/eval.rs", 40),
    ("tests/parse.rs", 40),
];

/// The text of a file of the project.
fn file_text(path: &str) -> String {
    let lines = FILES.iter().find(|(p, _)| *p == path).map_or(0, |(_, lines)| *lines);
    (0..lines).map(|i| format!("// {path}, line {i}: fn item_{i}() {{ todo() }}\n")).collect()
}

/// The model: two `read_file` calls a turn until every file is read, then the read-back tool on
/// the first pointer it sees, then an answer quoting what it read back.
fn script(messages: &[Value]) -> Reply {
    let turn = messages.iter().filter(|m| m["role"] == "assistant").count();
    let call = |i: usize, name: &str, arguments: Value| {
        (format!("call_{turn}_{i}"), name.to_owned(), arguments.to_string())
    };
    if let Some(pair) = FILES.chunks(2).nth(turn) {
        return Reply::ToolCalls(
            pair.iter()
                .enumerate()
                .map(|(i, (path, _))| call(i, "read_file", json!({ "path": path })))
                .collect(),
        );
    }
    let texts: Vec<&str> =
        messages.iter().filter(|m| m["role"] == "tool").filter_map(|m| m["content"].as_str()).collect();
    if turn == FILES.len() / 2 {
        // A pointer quotes its reference: "Tool result offloaded to text (N characters) at 'REF'. …".
        let reference = texts
            .iter()
            .find_map(|text| {
                text.strip_prefix("Tool result offloaded to")?.split_once(" at '")?.1.split_once('\'')
            })
            .map(|(reference, _)| reference.to_owned());
        let Some(reference) = reference else { return Reply::Text("No pointer to follow.".into()) };
        return Reply::ToolCalls(vec![call(
            0,
            READ_TOOL_NAME,
            json!({"reference": reference, "start_line": 1, "end_line": 2}),
        )]);
    }
    let read_back = texts.last().and_then(|text| text.lines().next()).unwrap_or("nothing");
    Reply::Text(format!(
        "The interpreter has a lexer, a parser and an evaluator; the lexer begins `{read_back}`."
    ))
}

/// A hook pruning old tool results for a window of `window` tokens.
fn pruning_hook(window: usize) -> Result<CompactionHook, compaction_hook::Error> {
    CompactionHook::new(Box::new(ToolResultPruningCompactor::default()), CompactionHookSettings::new(window))
}

/// The tool schemas, in ours and in async-openai's types.
fn tools() -> (Vec<ToolSpec>, Vec<ChatCompletionTools>) {
    let read_file = ToolSpec::new(
        "read_file",
        "Read a file of the project.",
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    );
    let ours = vec![read_file, read_tool_spec()];
    let theirs = ours
        .iter()
        .map(|spec| {
            ChatCompletionTools::Function(ChatCompletionTool {
                function: FunctionObject {
                    name: spec.name.clone(),
                    description: Some(spec.description.clone()),
                    parameters: Some(spec.parameters.clone()),
                    strict: None,
                },
            })
        })
        .collect();
    (ours, theirs)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    // reqwest may be built with rustls and no crypto provider (see this crate's Cargo.toml);
    // the servers here are plain HTTP, but building a client needs a provider all the same.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = MockOpenAi::start_with_window(script, Some(SERVER_WINDOW)).await?;
    let client = Client::with_config(
        OpenAIConfig::new().with_api_base(server.base_url()).with_api_key("no-key-needed"),
    );
    // Opening the store is blocking I/O, done once before the loop; its writes and reads are not.
    let store_dir = tempfile::tempdir()?;
    let store = Arc::new(FileSystemToolResultStore::new(store_dir.path())?);
    let offload = ToolResultOffloadHook::without_store(
        OffloadStrategies::new().with("read_file", OffloadOverChars::new(OFFLOAD_OVER_CHARS)),
    );
    let mut hook = pruning_hook(ADVERTISED_WINDOW)?;
    let mut recovery = ContextOverflowRecovery::new();

    let (tool_specs, tools) = tools();
    let mut state = AgentState::new(vec![
        Message::system("You read the project's files and summarize them."),
        Message::user("What does this interpreter consist of?"),
    ])
    .with_tools(tool_specs);

    let (mut hook_compactions, mut recoveries, mut offloaded) = (0, 0, Vec::new());
    let answer = loop {
        // 1. Compact before the call, anchored on what the server reported for the last one.
        let outcome = hook.run_async(&mut state).await?;
        hook_compactions += usize::from(outcome.compacted);
        print!(
            "step {}: estimated {:>5} tokens of a {}-token window, compacted: {:<5}",
            state.step_count,
            outcome.estimated_tokens,
            hook.settings().context_window,
            outcome.compacted
        );

        // 2. The call; a refusal as too long is recovered from once.
        let response = loop {
            match send(&client, &state, &tools).await {
                Ok(response) => break response,
                Err(OpenAIError::ApiError(refused)) => {
                    let body = serde_json::to_string(&refused.api_error)?;
                    let Some(overflow) = context_overflow(refused.status_code.as_u16(), &body) else {
                        return Err(OpenAIError::ApiError(refused).into());
                    };
                    match recovery.recover_async(&hook, &mut state, &overflow).await? {
                        Recovery::Retry(outcome) => {
                            recoveries += 1;
                            print!(
                                "\n  refused: {} tokens > {} → pruned {} results, retrying",
                                overflow.requested.unwrap_or_default(),
                                overflow.limit.unwrap_or_default(),
                                outcome
                                    .changes
                                    .as_ref()
                                    .and_then(|changes| changes.changed())
                                    .map_or(0, <[usize]>::len),
                            );
                            // The error stated the real window: compact for it from now on.
                            if let Some(limit) =
                                overflow.limit.filter(|&l| l < hook.settings().context_window)
                            {
                                hook = pruning_hook(limit)?;
                            }
                        }
                        other => {
                            return Err(
                                format!("the request does not fit the server's window: {other:?}").into()
                            )
                        }
                    }
                }
                Err(other) => return Err(other.into()),
            }
        };
        let usage = response.usage.ok_or("the server reports usage")?;
        println!(" → server counted {:>5} prompt tokens", usage.prompt_tokens);
        let choice = response.choices.into_iter().next().ok_or("the server answers")?;
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
            break reply.text().unwrap_or_default().to_owned();
        }
        // 3. The tools, concurrently, as an async agent runs them.
        let results = join_all(calls.into_iter().map(|call| {
            let store = store.clone();
            async move {
                if call.tool_name == READ_TOOL_NAME {
                    return read_offloaded_result_async(&*store, &call.arguments.to_map())
                        .await
                        .into_message(call);
                }
                let path = call.arguments.get("path");
                Message::tool(
                    file_text(path.as_ref().and_then(Value::as_str).unwrap_or("?")),
                    call.clone(),
                    false,
                )
            }
        }))
        .await?;
        state.extend(results);
        state.step_count += 1;

        // 4. Offload the step's long results: decide, commit without blocking, finish.
        let edits = {
            let plan = offload.plan(&state, &AsyncToolResultStore::profile(&*store));
            let outcomes = commit_async(plan.writes(), &*store).await;
            plan.finish(outcomes)
        };
        let outcome = edits.apply(&mut state);
        if let Some(failure) = outcome.failures.first() {
            return Err(format!("offloading message {} failed: {}", failure.at.index, failure.error).into());
        }
        for result in &outcome.results {
            println!(
                "  offloaded the result of {} to {:?}",
                result.call_id.as_deref().unwrap_or("?"),
                result.references
            );
        }
        offloaded.extend(outcome.results);
    };
    println!("answer: {answer}");

    // What the run shows, checked.
    let requests = server.requests();
    let refused = server.refused();
    println!(
        "requests: {}; refused as too long and recovered: {}; compacted by the hook: {hook_compactions}; results offloaded: {}",
        requests.len(),
        refused.len(),
        offloaded.len()
    );
    // The big files were offloaded, and the store holds each word for word.
    assert_eq!(
        offloaded.len(),
        FILES.iter().filter(|(path, _)| file_text(path).len() > OFFLOAD_OVER_CHARS).count()
    );
    for result in &offloaded {
        let [reference] = &result.references[..] else { panic!("one block a result") };
        let stored = AsyncToolResultStore::read(&*store, reference).await?;
        let StoredContent::Text(text) = stored else { panic!("text was stored") };
        // Each file's text names the file on its first line.
        let path = text.strip_prefix("// ").and_then(|rest| rest.split(',').next()).unwrap_or_default();
        assert_eq!(text, file_text(path));
    }
    // The server refused one request; the recovery compacted it and the retry was accepted.
    assert_eq!((refused.len(), recoveries), (1, 1));
    assert!(!refused.contains(&(refused[0] + 1)), "the retry was accepted");
    assert!(prompt_tokens(&requests[refused[0] + 1]) <= SERVER_WINDOW);
    // After that, the hook compacted for the stated window, and no request was refused again.
    assert_eq!(hook.settings().context_window, SERVER_WINDOW as usize);
    assert!(hook_compactions >= 1, "the hook compacted before a call");
    for (i, request) in requests.iter().enumerate().filter(|(i, _)| !refused.contains(i)) {
        assert!(prompt_tokens(request) <= SERVER_WINDOW, "request {i} fits");
    }
    // The model read the start of the lexer back from the store.
    assert!(answer.contains("// src/lexer.rs, line 0:"), "{answer}");
    // Chat Completions messages have no `meta`: compaction's markers are all they lose.
    let losses = to_chat_completions(state.messages()).losses().to_vec();
    let markers = [format!("meta.{CONTEXT_COMPACTION}"), format!("meta.{TOOL_RESULT_OFFLOADED}")];
    assert!(losses.iter().all(|loss| markers.contains(&loss.field)), "{losses:?}");
    Ok(())
}

/// The conversation sent as a Chat Completions request.
async fn send(
    client: &Client<OpenAIConfig>,
    state: &AgentState,
    tools: &[ChatCompletionTools],
) -> Result<CreateChatCompletionResponse, OpenAIError> {
    let request = CreateChatCompletionRequestArgs::default()
        .model("mock-model")
        .messages(to_chat_completions(state.messages()).into_value())
        .tools(tools.to_vec())
        .build()?;
    client.chat().create(request).await
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
