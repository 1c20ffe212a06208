//! The offloading family in Rust, for `compaction.haystack.offload`: Haystack's
//! `FileSystemToolResultStore`, `ToolResultOffloadHook` and `ToolResultOffloadCompactor`, backed
//! by compaction-offload.
//!
//! A store is either ours ([`FileSystemStore`], the Rust store behind the Python class) or any
//! Python object with Haystack's `ToolResultStore` protocol (`write(key=..., content=...)`,
//! `supports_binary_content`), which [`PyStore`] calls back per write. A policy is either one of
//! Haystack's three, given as data, or any object with `should_offload(tool_name=..., result=...,
//! state=...)`, which [`PyPolicy`] calls back with the caller's own `State`. With our store, our
//! policies and our counter, no Python is called per message and the work runs with the GIL
//! released.
//!
//! A callback's exception is raised as it was: a policy's before anything is written, a
//! counter's as the compaction's error. A store's is a failed write, as in Haystack: the result
//! stays in context and the failure comes back to the caller, which logs it.

use std::sync::{Arc, Mutex};

use compaction_core::error_chain;
use compaction_hook::AgentState;
use compaction_model::{lone_surrogate, messages_to_value, Message};
use compaction_offload::{
    commit, BuiltinPolicy, Content, Error, FileSystemToolResultStore, OffloadCompactorSettings,
    OffloadFailure, OffloadPolicy, OffloadStrategies, PolicyKey, StoreProfile, StoredContent,
    ToolResultOffloadCompactor, ToolResultOffloadHook, ToolResultStore,
};
use compaction_tokens::TokenCounter;
use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::convert::{messages_from_objects, Classes};
use crate::{build, counter_from, python_error, Entry, Plan, PyCounter};

/// The Python exception for a store error: Haystack's `ValueError` (and its message) for a key
/// or reference outside the root, `ValueError` for what the store refuses, the `OSError`
/// subclass of the system's error for I/O.
fn store_error(error: &Error) -> PyErr {
    match error {
        Error::KeyOutsideRoot { key, root } => PyValueError::new_err(format!(
            "Result key '{key}' resolves outside the store root '{}'.",
            root.display()
        )),
        Error::ReferenceOutsideRoot { reference, root } => PyValueError::new_err(format!(
            "Result reference '{reference}' resolves outside the store root '{}'.",
            root.display()
        )),
        Error::InvalidKey { .. } | Error::Refused { .. } => PyValueError::new_err(error_chain(error)),
        Error::NotFound(_) => {
            PyErr::from(std::io::Error::new(std::io::ErrorKind::NotFound, error_chain(error)))
        }
        Error::Io { source, .. } => PyErr::from(std::io::Error::new(source.kind(), error_chain(error))),
        Error::KeysExhausted { .. } => {
            PyErr::from(std::io::Error::new(std::io::ErrorKind::AlreadyExists, error_chain(error)))
        }
        _ => PyOSError::new_err(error_chain(error)),
    }
}

/// Whether `text` holds a lone surrogate's stand-in (see compaction-model's `lone_surrogate`):
/// all of them are encoded with a leading 0xF4 byte, which ordinary text rarely has.
fn has_stand_in(text: &str) -> bool {
    text.as_bytes().contains(&0xF4) && text.chars().any(|c| lone_surrogate(c).is_some())
}

/// `text` as a Python `str`, each stand-in turned back into the lone surrogate it holds.
fn py_text<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    if !has_stand_in(text) {
        return Ok(PyString::new(py, text).into_any());
    }
    // A surrogate in UTF-8's three-byte form, which Python's `surrogatepass` decodes.
    let mut bytes = Vec::with_capacity(text.len());
    for c in text.chars() {
        match lone_surrogate(c) {
            Some(unit) => bytes.extend_from_slice(&[
                0xE0 | (unit >> 12) as u8,
                0x80 | ((unit >> 6) & 0x3F) as u8,
                0x80 | (unit & 0x3F) as u8,
            ]),
            None => bytes.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    PyBytes::new(py, &bytes).call_method1("decode", ("utf-8", "surrogatepass"))
}

/// A Python `str` as Rust text, each lone surrogate held by its stand-in (read the JSON way).
fn rust_text(text: &Bound<'_, PyString>) -> PyResult<String> {
    if let Ok(text) = text.to_str() {
        return Ok(text.to_owned());
    }
    let json = text.py().import("json")?.call_method1("dumps", (text,))?;
    match compaction_model::value_from_slice(json.cast::<PyString>()?.to_str()?.as_bytes()) {
        Ok(serde_json::Value::String(text)) => Ok(text),
        _ => Err(PyValueError::new_err("a string Python's json.dumps wrote could not be read back")),
    }
}

/// JSON text with each stand-in written as the escape of its surrogate, as `json.dumps`
/// writes it, so that `json.loads` gives the surrogate back.
fn escape_stand_ins(json: String) -> String {
    if !has_stand_in(&json) {
        return json;
    }
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match lone_surrogate(c) {
            Some(unit) => out.push_str(&format!("\\u{unit:04x}")),
            None => out.push(c),
        }
    }
    out
}

/// Our file-system store as Haystack's writes text: a text or key holding a lone surrogate
/// (which UTF-8 cannot hold) is a failed write, so the result stays in context, where Haystack's
/// `write_text` raises `UnicodeEncodeError`.
#[derive(Debug)]
struct Utf8Store(FileSystemToolResultStore);

impl ToolResultStore for Utf8Store {
    fn write(&self, key: &str, content: Content<'_>) -> Result<String, Error> {
        // A key too: no file name holds a lone surrogate (Python's `os.fsencode` refuses it).
        let text = match content {
            Content::Text(text) => Some(text),
            Content::Bytes(_) => None,
        };
        for checked in [Some(key), text].into_iter().flatten() {
            let surrogate =
                checked.chars().enumerate().find_map(|(at, c)| lone_surrogate(c).map(|unit| (at, unit)));
            if let Some((at, unit)) = surrogate {
                let message = format!(
                    "'utf-8' codec can't encode character '\\u{unit:04x}' in position {at}: surrogates not allowed"
                );
                return Err(Error::Store { key: key.to_owned(), source: message.into() });
            }
        }
        self.0.write(key, content)
    }

    fn read(&self, reference: &str) -> Result<StoredContent, Error> {
        self.0.read(reference)
    }

    fn profile(&self) -> StoreProfile {
        self.0.profile()
    }
}

/// Our file-system store: the Rust store behind `FileSystemToolResultStore`.
#[pyclass(frozen, module = "compaction._native")]
struct FileSystemStore {
    store: FileSystemToolResultStore,
}

#[pymethods]
impl FileSystemStore {
    /// A store under `root`, created if missing and checked to be writable.
    #[new]
    fn new(py: Python<'_>, root: std::path::PathBuf) -> PyResult<Self> {
        let store = py.detach(|| FileSystemToolResultStore::new(root));
        store.map(|store| FileSystemStore { store }).map_err(|e| store_error(&e))
    }

    /// Writes `content` (`str` or `bytes`) under `key`; returns the file's absolute path.
    fn write(&self, py: Python<'_>, key: &str, content: &Bound<'_, PyAny>) -> PyResult<String> {
        let written = if let Ok(text) = content.cast::<PyString>() {
            let text = text.to_str()?;
            py.detach(|| self.store.write(key, Content::Text(text)))
        } else if let Ok(bytes) = content.cast::<PyBytes>() {
            let bytes = bytes.as_bytes();
            py.detach(|| self.store.write(key, Content::Bytes(bytes)))
        } else {
            return Err(PyTypeError::new_err(format!(
                "content must be str or bytes, not {}",
                content.get_type().name()?
            )));
        };
        written.map_err(|e| store_error(&e))
    }

    /// The content under `reference`: `str` when it is UTF-8, else `bytes`.
    fn read(&self, py: Python<'_>, reference: &str) -> PyResult<Py<PyAny>> {
        match py.detach(|| self.store.read(reference)).map_err(|e| store_error(&e))? {
            StoredContent::Text(text) => Ok(PyString::new(py, &text).into_any().unbind()),
            StoredContent::Bytes(bytes) => Ok(PyBytes::new(py, &bytes).into_any().unbind()),
        }
    }
}

/// A Python object with Haystack's `ToolResultStore` protocol, called back per write.
#[derive(Debug)]
struct PyStore {
    store: Py<PyAny>,
    binary: bool,
}

impl ToolResultStore for PyStore {
    fn write(&self, key: &str, content: Content<'_>) -> Result<String, Error> {
        Python::attach(|py| {
            let kwargs = PyDict::new(py);
            kwargs.set_item("key", py_text(py, key)?)?;
            match content {
                Content::Text(text) => kwargs.set_item("content", py_text(py, text)?)?,
                Content::Bytes(bytes) => kwargs.set_item("content", PyBytes::new(py, bytes))?,
            }
            let reference = self.store.bind(py).call_method("write", (), Some(&kwargs))?;
            // Haystack quotes whatever the store gives back (`f"'{reference}'"`).
            rust_text(&reference.str()?)
        })
        .map_err(|error| Error::Store { key: key.to_owned(), source: Box::new(error) })
    }

    fn read(&self, reference: &str) -> Result<StoredContent, Error> {
        Python::attach(|py| {
            let content = self.store.bind(py).call_method1("read", (reference,))?;
            if let Ok(bytes) = content.cast::<PyBytes>() {
                return Ok(StoredContent::Bytes(bytes.as_bytes().to_vec()));
            }
            Ok::<_, PyErr>(StoredContent::Text(content.extract::<String>()?))
        })
        .map_err(|error| Error::Store { key: reference.to_owned(), source: Box::new(error) })
    }

    fn profile(&self) -> StoreProfile {
        StoreProfile::new().with_binary_content(self.binary)
    }
}

/// The store a Python object stands for: ours when it is a [`FileSystemStore`], else the object.
enum Store {
    Ours(Utf8Store),
    Python(PyStore),
}

impl Store {
    fn from_object(object: &Bound<'_, PyAny>) -> PyResult<Self> {
        if let Ok(ours) = object.cast::<FileSystemStore>() {
            return Ok(Store::Ours(Utf8Store(ours.get().store.clone())));
        }
        // As Haystack reads it, per result: `getattr(store, "supports_binary_content", False)`.
        let binary = match object.getattr("supports_binary_content") {
            Ok(value) => value.is_truthy()?,
            Err(_) => false,
        };
        Ok(Store::Python(PyStore { store: object.clone().unbind(), binary }))
    }

    fn as_dyn(&self) -> &dyn ToolResultStore {
        match self {
            Store::Ours(store) => store,
            Store::Python(store) => store,
        }
    }
}

/// The first exception a Python policy raised in a run; the policies after it are not called.
type Raised = Arc<Mutex<Option<PyErr>>>;

/// A Python object with Haystack's `OffloadPolicy` protocol, called with the caller's `State`.
#[derive(Debug)]
struct PyPolicy {
    policy: Py<PyAny>,
    state: Py<PyAny>,
    raised: Raised,
}

impl OffloadPolicy for PyPolicy {
    fn should_offload(&self, tool_name: &str, result: &str, _state: &AgentState) -> bool {
        let lock = || self.raised.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if lock().is_some() {
            return false;
        }
        let answer = Python::attach(|py| {
            let kwargs = PyDict::new(py);
            kwargs.set_item("tool_name", py_text(py, tool_name)?)?;
            kwargs.set_item("result", py_text(py, result)?)?;
            kwargs.set_item("state", self.state.bind(py))?;
            self.policy.bind(py).call_method("should_offload", (), Some(&kwargs))?.is_truthy()
        });
        answer.unwrap_or_else(|error| {
            *lock() = Some(error);
            false
        })
    }
}

/// The strategies `(key, kind, threshold, policy)` describe: `key` a tool name, `"*"` or a list
/// of names; `kind` `always`, `never`, `over` (with `threshold`) or `python` (`policy`, called
/// back with `state`). Also whether every policy is ours.
fn strategies_from(
    entries: &Bound<'_, PyList>,
    state: &Bound<'_, PyAny>,
    raised: &Raised,
) -> PyResult<(OffloadStrategies, bool)> {
    let mut strategies = OffloadStrategies::new();
    let mut all_ours = true;
    for entry in entries.iter() {
        let (key, kind, threshold, policy): (Bound<'_, PyAny>, String, usize, Bound<'_, PyAny>) =
            entry.extract()?;
        let key = match key.extract::<String>() {
            Ok(name) => PolicyKey::from(name),
            Err(_) => PolicyKey::Tools(key.extract::<Vec<String>>()?),
        };
        let policy: Box<dyn OffloadPolicy> = match kind.as_str() {
            "always" => BuiltinPolicy::Always.into_policy(),
            "never" => BuiltinPolicy::Never.into_policy(),
            "over" => BuiltinPolicy::OverChars(threshold).into_policy(),
            "python" => {
                all_ours = false;
                Box::new(PyPolicy {
                    policy: policy.unbind(),
                    state: state.clone().unbind(),
                    raised: raised.clone(),
                })
            }
            other => return Err(PyValueError::new_err(format!("unknown policy kind {other:?}"))),
        };
        strategies.insert(key, policy);
    }
    Ok((strategies, all_ours))
}

/// A store failure as the Python side logs it: the tool and the error (a Python store's own
/// exception, as Haystack logs it, else the error and its causes).
fn failure_entry(py: Python<'_>, failure: &OffloadFailure) -> (String, String) {
    let text = match (python_error(py, &failure.error), &failure.error) {
        // `str(error)`, as Haystack logs it.
        (Some(raised), _) => match raised.value(py).str() {
            Ok(text) => text.to_string(),
            Err(_) => raised.to_string(),
        },
        (None, Error::Store { source, .. }) => source.to_string(),
        (None, error) => error_chain(error),
    };
    (failure.tool_name.clone(), text)
}

/// A changed message as [`Entry::Built`], or its JSON text for `ChatMessage.from_dict`.
fn entry(
    py: Python<'_>,
    message: &Message,
    original: Option<(&Message, &Bound<'_, PyAny>)>,
    classes: &Classes<'_>,
) -> PyResult<Entry> {
    let json = serde_json::to_string(&messages_to_value(std::slice::from_ref(message)))
        .map_err(|e| PyValueError::new_err(format!("could not write a message as JSON: {e}")))?;
    // A pointer quotes its result's text, which may hold a lone surrogate: the JSON way writes
    // it back as the surrogate's escape, which `json.loads` reads as the surrogate.
    if has_stand_in(&json) {
        return Ok(Entry::New(escape_stand_ins(json)));
    }
    match build::message_object(py, message, original, classes)? {
        Some(built) => Ok(Entry::Built(built.unbind())),
        None => Ok(Entry::New(json)),
    }
}

/// What one offload hook run did: the rewritten messages (index, message), the store failures
/// (tool, error) and the tools whose results hold binary content the store cannot take.
type HookRun = (Vec<(usize, Entry)>, Vec<(String, String)>, Vec<String>);

/// Haystack's `ToolResultOffloadHook.run` on the trailing tool-result messages `messages` (the
/// step's fresh results, Haystack `ChatMessage`s), at agent step `step_count`, writing to
/// `store` under `strategies` (see [`strategies_from`]); `state` is the caller's `State`, for
/// Python policies. Returns the messages to replace, by index in `messages`.
#[pyfunction]
#[pyo3(signature = (messages, classes, fallback, step_count, strategies, preview_chars, store, state))]
#[allow(clippy::too_many_arguments)]
fn offload_hook_run(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    classes: &Bound<'_, PyTuple>,
    fallback: &Bound<'_, PyAny>,
    step_count: usize,
    strategies: &Bound<'_, PyList>,
    preview_chars: usize,
    store: &Bound<'_, PyAny>,
    state: &Bound<'_, PyAny>,
) -> PyResult<HookRun> {
    let classes = Classes::from_tuple(classes)?;
    let raised: Raised = Arc::default();
    let (strategies, policies_ours) = strategies_from(strategies, state, &raised)?;
    let store = Store::from_object(store)?;
    let mut agent_state = AgentState::new(messages_from_objects(messages, &classes, fallback)?);
    agent_state.step_count = step_count;
    let hook = ToolResultOffloadHook::without_store(strategies).with_preview_chars(preview_chars);
    let agent_state = &agent_state;
    let work = || {
        let plan = hook.plan(agent_state, &store.as_dyn().profile());
        // A policy that raised ends the run before anything is written.
        if let Some(error) = raised.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take() {
            return Err(error);
        }
        let outcomes = commit(plan.writes(), store.as_dyn());
        Ok(plan.finish(outcomes))
    };
    let edits = if policies_ours && matches!(store, Store::Ours(_)) { py.detach(work) } else { work() }?;
    let originals = agent_state.messages();
    let mut rewritten = Vec::with_capacity(edits.edits.len());
    for (index, message) in &edits.edits {
        let object = messages.get_item(*index)?;
        rewritten.push((*index, entry(py, message, Some((&originals[*index], &object)), &classes)?));
    }
    let failures = edits.outcome.failures.iter().map(|f| failure_entry(py, f)).collect();
    let unsupported = edits
        .outcome
        .binary_unsupported
        .iter()
        .filter_map(|at| originals[at.index].tool_call_results().nth(at.position))
        .map(|result| result.origin.tool_name.clone())
        .collect();
    Ok((rewritten, failures, unsupported))
}

/// What one offload compaction did: the compacted conversation (`None` when nothing was
/// offloaded) and the store failures (tool, error).
type CompactRun = (Option<Vec<Entry>>, Vec<(String, String)>);

/// Haystack's `ToolResultOffloadCompactor.compact`: offloads older results of `messages` to
/// `store`, oldest first, until they fit `target_tokens`. The counter as `_native.compact`
/// takes it (`kind` and its settings, or `count_json`). Returns the compacted conversation as
/// [`Entry`]s (`None` when nothing was offloaded) and the store failures (tool, error).
#[pyfunction]
#[pyo3(signature = (messages, classes, fallback, target_tokens, min_keep_steps, min_tokens, preview_chars, store, kind, ratio_or_encoding, tokens_per_image, tokens_per_file, count_json))]
#[allow(clippy::too_many_arguments)]
fn offload_compact(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    classes: &Bound<'_, PyTuple>,
    fallback: &Bound<'_, PyAny>,
    target_tokens: usize,
    min_keep_steps: usize,
    min_tokens: usize,
    preview_chars: usize,
    store: &Bound<'_, PyAny>,
    kind: Option<&str>,
    ratio_or_encoding: &Bound<'_, PyAny>,
    tokens_per_image: usize,
    tokens_per_file: usize,
    count_json: Option<Py<PyAny>>,
) -> PyResult<CompactRun> {
    let settings = OffloadCompactorSettings::default()
        .with_min_keep_steps(min_keep_steps)
        .with_min_tokens(min_tokens)
        .with_preview_chars(preview_chars);
    let compactor = ToolResultOffloadCompactor::without_store(settings)
        .map_err(|e| PyValueError::new_err(error_chain(&e)))?;
    let classes = Classes::from_tuple(classes)?;
    let objects = messages;
    let messages = messages_from_objects(objects, &classes, fallback)?;
    let store = Store::from_object(store)?;
    let counter: Box<dyn TokenCounter> = match (kind, count_json) {
        (Some(kind), _) => counter_from(kind, ratio_or_encoding, tokens_per_image, tokens_per_file)?,
        (None, Some(count_json)) => Box::new(PyCounter { count_json }),
        (None, None) => {
            return Err(PyValueError::new_err("offload_compact needs a counter kind or a count callback"))
        }
    };
    let ours = kind.is_some() && matches!(store, Store::Ours(_));
    let store = &store;
    let work = move || {
        let done =
            compactor.offload_with_store(&messages, target_tokens, counter.as_ref(), store.as_dyn())?;
        let Some(compaction) = done.compaction else {
            return Ok::<_, compaction_core::Error>((messages, None, done.failures));
        };
        // As `_native.compact`: messages rewritten in place are named, the rest kept by index.
        let changes = compaction.changes(&messages);
        let planned = match changes.changed() {
            Some(indices) => {
                let originals: Vec<Message> = indices.iter().map(|&at| messages[at].clone()).collect();
                let mut compacted = messages;
                compaction.apply(&mut compacted)?;
                let mut plan: Vec<Plan> = (0..compacted.len()).map(Plan::Kept).collect();
                for (kept_at, (&at, old)) in indices.iter().zip(&originals).enumerate() {
                    if compacted[at] != *old {
                        plan[at] = Plan::Changed { original: Some((at, kept_at)) };
                    }
                }
                (compacted, plan, originals)
            }
            None => {
                let compacted = compaction.messages(&messages);
                let plan = crate::plan(&compacted, &messages);
                (compacted, plan, messages)
            }
        };
        Ok((planned.0, Some((planned.1, planned.2)), done.failures))
    };
    let done = if ours { py.detach(work) } else { work() };
    let (compacted, planned, failures) =
        done.map_err(|e| python_error(py, &e).unwrap_or_else(|| PyValueError::new_err(error_chain(&e))))?;
    let failures = failures.iter().map(|f| failure_entry(py, f)).collect();
    let Some((plan, originals)) = planned else {
        py.detach(|| drop(compacted));
        return Ok((None, failures));
    };
    let mut entries = Vec::with_capacity(plan.len());
    for (step, message) in plan.iter().zip(&compacted) {
        entries.push(match *step {
            Plan::Kept(at) => Entry::Kept(at),
            Plan::Changed { original: Some((at, kept_at)) } => {
                let object = objects.get_item(at)?;
                entry(py, message, Some((&originals[kept_at], &object)), &classes)?
            }
            Plan::Changed { original: None } => entry(py, message, None, &classes)?,
        });
    }
    py.detach(|| drop((compacted, originals)));
    Ok((Some(entries), failures))
}

/// Adds the offloading family to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<FileSystemStore>()?;
    m.add_function(wrap_pyfunction!(offload_hook_run, m)?)?;
    m.add_function(wrap_pyfunction!(offload_compact, m)?)?;
    Ok(())
}
