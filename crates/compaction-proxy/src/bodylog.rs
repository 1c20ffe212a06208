//! `--log-bodies`: each request's body on the log as it came and as it is forwarded, with every
//! credential redacted, for a user finding out what their agent sends and what the proxy made
//! of it. Off by default.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use hyper::header::HeaderMap;

use crate::settings::ProxySettings;

/// What stands in for a credential.
const REDACTED: &str = "[REDACTED]";

/// A request whose body was logged as it came, to log again as it is forwarded.
pub(crate) struct Logged {
    id: u64,
    received: Bytes,
}

/// Logs the request as it came (method, path, headers, body), when bodies are logged.
pub(crate) fn received(
    settings: &ProxySettings,
    parts: &hyper::http::request::Parts,
    body: &Bytes,
) -> Option<Logged> {
    if !settings.log_bodies {
        return None;
    }
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    (settings.log)(&format!(
        "proxy: body #{id} received: {} {}, headers {}, {} bytes: {}",
        parts.method,
        redact(target.as_bytes()),
        headers(&parts.headers),
        body.len(),
        redact(body),
    ));
    Some(Logged { id, received: body.clone() })
}

/// Logs the body forwarded for a request logged by [`received`].
pub(crate) fn forwarded(settings: &ProxySettings, logged: Option<Logged>, body: &Bytes) {
    let Some(Logged { id, received }) = logged else { return };
    let line = match received == *body {
        true => format!("proxy: body #{id} forwarded unchanged"),
        false => format!("proxy: body #{id} forwarded, {} bytes: {}", body.len(), redact(body)),
    };
    (settings.log)(&line);
}

/// The headers as `{name: value, …}`, a credential's value redacted.
fn headers(headers: &HeaderMap) -> String {
    let mut out = String::from("{");
    for (n, (name, value)) in headers.iter().enumerate() {
        let name = name.as_str();
        let value = match is_credential_header(name) {
            true => REDACTED.to_owned(),
            false => redact(value.as_bytes()),
        };
        let _ = write!(out, "{}{name}: {value}", if n == 0 { "" } else { ", " });
    }
    out.push('}');
    out
}

/// Headers that carry credentials: `authorization`, `x-api-key`, `api-key`, cookies, and any
/// whose name says key, token, secret or auth.
fn is_credential_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["auth", "key", "token", "secret", "cookie", "session", "signature"]
        .iter()
        .any(|word| name.contains(word))
}

/// Prefixes of the providers' and code hosts' keys, each followed by at least
/// [`MIN_SECRET`] key characters: OpenAI and Anthropic (`sk-`, `sk-ant-`), GitHub, GitLab,
/// Hugging Face, Google, AWS, Slack.
const KEY_PREFIXES: &[&str] = &[
    "sk-",
    "sk_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "hf_",
    "AIza",
    "AKIA",
    "xoxb-",
    "xoxp-",
    "xoxa-",
];

/// JSON keys whose string value is a credential, compared without case.
const SECRET_FIELDS: &[&str] = &[
    "api_key",
    "apikey",
    "api-key",
    "x-api-key",
    "authorization",
    "access_token",
    "refresh_token",
    "id_token",
    "client_secret",
    "secret",
    "password",
    "token",
];

/// The fewest key characters after a prefix for a word to be taken as a key.
const MIN_SECRET: usize = 16;

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._~+/=".contains(c)
}

/// `text` (lossy UTF-8) with every credential in it replaced by `[REDACTED]`: words that start
/// like a provider's key, the token after `Bearer`, and the string value of a JSON field named
/// like a credential (`"api_key": "…"`).
pub(crate) fn redact(text: &[u8]) -> String {
    let text = String::from_utf8_lossy(text);
    let mut out = String::with_capacity(text.len());
    let mut rest: &str = &text;
    while !rest.is_empty() {
        let boundary = !out.chars().next_back().is_some_and(is_key_char);
        if let Some(skip) = boundary.then(|| secret_at(rest)).flatten() {
            let (kept, secret_len) = skip;
            out.push_str(&rest[..kept]);
            out.push_str(REDACTED);
            rest = &rest[kept + secret_len..];
            continue;
        }
        let c = rest.chars().next().expect("not empty");
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// A credential starting at the beginning of `text`: how many bytes to keep before it (a key's
/// prefix, `Bearer `, a field's name and its opening quote) and how long it is.
fn secret_at(text: &str) -> Option<(usize, usize)> {
    for prefix in KEY_PREFIXES {
        if let Some(after) = text.strip_prefix(prefix) {
            let len = after.find(|c: char| !is_key_char(c)).unwrap_or(after.len());
            if len >= MIN_SECRET {
                return Some((prefix.len(), len));
            }
        }
    }
    // Bytes, not a `str` slice: the eighth byte may sit inside a character.
    if text.len() > 7 && text.as_bytes()[..7].eq_ignore_ascii_case(b"bearer ") {
        let after = &text[7..];
        let len = after.find(|c: char| !is_token_char(c)).unwrap_or(after.len());
        if len >= 8 {
            return Some((7, len));
        }
    }
    if text.starts_with('"') {
        return secret_field(text);
    }
    None
}

/// `"name": "value"` with a credential's name: the bytes through the value's opening quote,
/// and the value's length up to its closing quote.
fn secret_field(text: &str) -> Option<(usize, usize)> {
    let name_end = text[1..].find('"')? + 1;
    let name = &text[1..name_end];
    if !SECRET_FIELDS.iter().any(|field| field.eq_ignore_ascii_case(name)) {
        return None;
    }
    let after = &text[name_end + 1..];
    let colon = after.len() - after.trim_start().len();
    let after_colon = after.trim_start().strip_prefix(':')?;
    let space = after_colon.len() - after_colon.trim_start().len();
    let value = after_colon.trim_start().strip_prefix('"')?;
    let kept = name_end + 1 + colon + 1 + space + 1;
    let mut escaped = false;
    for (i, c) in value.char_indices() {
        match (escaped, c) {
            (true, _) => escaped = false,
            (false, '\\') => escaped = true,
            (false, '"') => return (i > 0).then_some((kept, i)),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_tokens_and_credential_fields_are_redacted() {
        let cases = [
            ("key sk-proj-abcdefghijklmnop1234 end", "key sk-[REDACTED] end"),
            ("\"sk-ant-api03-AAAAAAAAAAAAAAAAAAAA-BBBB\"", "\"sk-[REDACTED]\""),
            ("Authorization: Bearer eyJhbGciOi.J9x_y-z", "Authorization: Bearer [REDACTED]"),
            ("curl -H 'authorization: bearer abcdefgh123'", "curl -H 'authorization: bearer [REDACTED]'"),
            (r#"{"api_key": "0123456789abcdef", "n": 1}"#, r#"{"api_key": "[REDACTED]", "n": 1}"#),
            (r#"{"Password":"p\"w","x":"y"}"#, r#"{"Password":"[REDACTED]","x":"y"}"#),
            ("ghp_0123456789abcdefABCDEF0123", "ghp_[REDACTED]"),
        ];
        for (text, redacted) in cases {
            assert_eq!(redact(text.as_bytes()), redacted, "{text}");
        }
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        for text in [
            "a task-runner and sk-learn",
            "ask-abcdefghijklmnopqrstuvwxyz is one word",
            "the bearer of bad news",
            r#"{"model": "claude-sonnet-4-5", "tokens": 12, "token_count": "3"}"#,
            r#"{"token": ""}"#,
            "naïve UTF-8 — kept",
        ] {
            assert_eq!(redact(text.as_bytes()), text, "{text}");
        }
    }

    #[test]
    fn credential_headers_are_redacted_by_name() {
        let mut map = HeaderMap::new();
        for (name, value) in [
            ("authorization", "Bearer sk-abc"),
            ("x-api-key", "short"),
            ("api-key", "azure0123"),
            ("anthropic-version", "2023-06-01"),
            ("x-goog-api-key", "AIzaSomething"),
        ] {
            map.insert(
                hyper::header::HeaderName::from_static(name),
                hyper::header::HeaderValue::from_static(value),
            );
        }
        assert_eq!(
            headers(&map),
            "{authorization: [REDACTED], x-api-key: [REDACTED], api-key: [REDACTED], anthropic-version: \
             2023-06-01, x-goog-api-key: [REDACTED]}"
        );
    }
}
