//! Secrets kept out of error messages: the user information of a base URL
//! (`http://user:pw@host`), and keys a server echoes in an error body: the client's own secrets
//! in every form a server could echo them (as sent, without a key's `sk-` prefix, percent- or
//! JSON-escaped, the URL's `user:pw` in base64 as a `Basic` header carries it), and anything
//! shaped like a key (`sk-…`, `Bearer …`, `Basic …`).

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::{alphabet, Engine as _};
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// What replaces a secret.
const HIDDEN: &str = "***";

/// Values shorter than this are not taken for secrets when found in a body: a local server's key
/// is often a word (`local`, `x`) that would hide every occurrence of it.
const SHORTEST_SECRET: usize = 8;

/// The prefixes a provider's key starts with; a server may echo the key without one.
const KEY_PREFIXES: [&str; 4] = ["sk-ant-api03-", "sk-ant-", "sk-proj-", "sk-"];

/// What a percent-encoder leaves as it is (RFC 3986's unreserved characters).
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// Base64 as `Authorization: Basic` carries it, read with or without its padding.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The secrets of one client, to take out of whatever it shows.
#[derive(Clone, Default)]
pub(crate) struct Secrets {
    values: Vec<String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} hidden)", self.values.len())
    }
}

impl Secrets {
    /// The API key and the user information of the base URL, if any, in every form a server
    /// could echo them.
    pub(crate) fn new(api_key: &str, base_url: &str) -> Self {
        let key = api_key.trim();
        let mut secrets: Vec<String> = vec![key.to_owned()];
        secrets.extend(KEY_PREFIXES.iter().filter_map(|prefix| key.strip_prefix(prefix)).map(str::to_owned));
        let mut values = Vec::new();
        if let Some(userinfo) = url_userinfo(base_url) {
            let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
            secrets.extend([userinfo, user, password].map(str::to_owned));
            // The `Authorization: Basic` header a client makes of them, from the text as written
            // or percent-decoded, with its padding or without.
            let decoded = format!("{}:{}", percent_decoded(user), percent_decoded(password));
            for pair in [userinfo, decoded.as_str()] {
                let encoded = BASE64.encode(pair);
                values.push(encoded.trim_end_matches('=').to_owned());
                values.push(encoded);
            }
        }
        for secret in &secrets {
            values.extend(echoed_forms(secret));
        }
        values.retain(|value| value.chars().count() >= SHORTEST_SECRET);
        // The longest first, so a key that holds another is hidden whole.
        values.sort_by_key(|value| std::cmp::Reverse(value.len()));
        values.dedup();
        Secrets { values }
    }

    /// `text` with every secret of this client, and anything shaped like a key, hidden.
    pub(crate) fn redact(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for value in &self.values {
            if text.contains(value.as_str()) {
                text = text.replace(value.as_str(), HIDDEN);
            }
        }
        redact_key_shapes(&text)
    }
}

/// `secret` as a server could echo it: as it is, percent-decoded, percent-encoded, and escaped
/// in a JSON string.
fn echoed_forms(secret: &str) -> Vec<String> {
    let mut forms =
        vec![secret.to_owned(), percent_decoded(secret), utf8_percent_encode(secret, UNRESERVED).to_string()];
    if let Ok(json) = serde_json::to_string(secret) {
        forms.push(json[1..json.len() - 1].to_owned());
    }
    forms
}

fn percent_decoded(text: &str) -> String {
    percent_decode_str(text).decode_utf8_lossy().into_owned()
}

/// Where the authority of `url` starts and ends: after `scheme://` (or whatever a malformed URL
/// has for it, `http:/` or nothing at all), up to the next `/`.
fn authority_span(url: &str) -> (usize, usize) {
    let scheme_end = url
        .find(':')
        .filter(|&colon| {
            let scheme = &url[..colon];
            !scheme.is_empty()
                && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        })
        .map(|colon| colon + 1)
        .filter(|&after| url[after..].starts_with('/'))
        .map_or(0, |after| after + (url[after..].len() - url[after..].trim_start_matches('/').len()));
    let end = url[scheme_end..].find('/').map_or(url.len(), |at| scheme_end + at);
    (scheme_end, end)
}

/// The user information of a `http://user:password@host` URL: everything before the last `@`
/// of its authority.
fn url_userinfo(url: &str) -> Option<&str> {
    let (start, end) = authority_span(url);
    let (userinfo, _) = url[start..end].rsplit_once('@')?;
    Some(userinfo).filter(|userinfo| !userinfo.is_empty())
}

/// `url` with the user information of its authority replaced by `***` (`http://***@host`),
/// whether the URL is well-formed or not: what is shown of a URL never holds a user or password.
pub(crate) fn redact_url(url: &str) -> String {
    let (start, end) = authority_span(url);
    match url[start..end].rfind('@') {
        Some(at) => format!("{}{HIDDEN}{}", &url[..start], &url[start + at..]),
        None => url.to_owned(),
    }
}

/// Characters a key or a bearer token is made of.
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~' | '+' | '/' | '=')
}

/// `sk-` followed by at least this many key characters is taken for a key.
const SHORTEST_SK_KEY: usize = 8;

/// `text` with OpenAI- and Anthropic-shaped keys (`sk-…`, `sk-ant-…`, `sk-proj-…`), bearer
/// tokens (`Bearer …`) and basic credentials (`Basic <base64 of user:password>`) hidden.
fn redact_key_shapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((at, word)) = next_key_start(rest) {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let (prefix, body) = if word == "sk-" {
            from.split_at(3)
        } else {
            // "Bearer" or "Basic" and the spaces after it, in any case.
            let after = &from[word.len()..];
            let spaces = after.len() - after.trim_start_matches(' ').len();
            from.split_at(word.len() + spaces)
        };
        let token_len = body.find(|c: char| !is_token_char(c)).unwrap_or(body.len());
        let is_key = match word {
            "sk-" => token_len >= SHORTEST_SK_KEY,
            // Only what decodes to `user:password`, so that "Basic authentication" stays.
            "basic" => BASE64.decode(&body[..token_len]).is_ok_and(|pair| pair.contains(&b':')),
            _ => token_len > 0,
        };
        out.push_str(prefix);
        if is_key {
            out.push_str(HIDDEN);
            rest = &body[token_len..];
        } else {
            rest = body;
        }
    }
    out.push_str(rest);
    out
}

/// Where the next `sk-` (at the start of a word), `Bearer ` or `Basic ` starts in `text`, and
/// which of them it is (`sk-`, `bearer` or `basic`).
fn next_key_start(text: &str) -> Option<(usize, &'static str)> {
    let bytes = text.as_bytes();
    let word_start = |at: usize| at == 0 || !is_token_char(char::from(bytes[at - 1]));
    let mut from = 0;
    loop {
        let found = [
            text[from..].find("sk-").map(|at| (at + from, "sk-")),
            find_ascii_case_insensitive(&text[from..], "bearer ").map(|at| (at + from, "bearer")),
            find_ascii_case_insensitive(&text[from..], "basic ").map(|at| (at + from, "basic")),
        ];
        let (at, word) = found.into_iter().flatten().min_by_key(|(at, _)| *at)?;
        if word_start(at) {
            return Some((at, word));
        }
        from = at + 1;
    }
}

fn find_ascii_case_insensitive(text: &str, needle: &str) -> Option<usize> {
    text.as_bytes().windows(needle.len()).position(|window| window.eq_ignore_ascii_case(needle.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_information_of_a_url_is_hidden_and_the_rest_kept() {
        let cases = [
            ("http://user:hunter2@127.0.0.1:8080/v1", "http://***@127.0.0.1:8080/v1"),
            ("https://user@host/v1", "https://***@host/v1"),
            ("https://host/v1/a@b", "https://host/v1/a@b"),
            ("http://u:p:q@host", "http://***@host"),
            ("http://u:p@q@host/v1", "http://***@host/v1"),
            ("http://me:pw@h/v1?x=1", "http://***@h/v1?x=1"),
            // Malformed URLs, refused with the URL in the error.
            ("user:Pw5ecret@127.0.0.1:1", "***@127.0.0.1:1"),
            ("http:/user:Pw5ecret@127.0.0.1:1/v1", "http:/***@127.0.0.1:1/v1"),
            ("http:///user:Pw5ecret@127.0.0.1:1/v1", "http:///***@127.0.0.1:1/v1"),
            ("ftp://user:Pw5ecret@h", "ftp://***@h"),
            ("http://user:Pw5 ecret?@h", "http://***@h"),
            ("127.0.0.1:8080/v1", "127.0.0.1:8080/v1"),
        ];
        for (index, (url, shown)) in cases.into_iter().enumerate() {
            // The expected text holds no secret; the URL given may.
            assert_eq!(redact_url(url), shown, "case {index}");
        }
        assert_eq!(url_userinfo("http://u:secret-pass@h/v1"), Some("u:secret-pass"));
        assert_eq!(url_userinfo("http://h/v1"), None);
    }

    /// The API key and base URL of a client, and one form in which a server echoes a secret of
    /// theirs, in a body such as `{"error": {"message": "… <form> …"}}`.
    const ECHOED: &[(&str, &str, &str)] = &[
        ("sk-KEYSECRET123", "http://h", "sk-KEYSECRET123"),
        // Without its prefix: neither the key nor the `sk-` shape matches it.
        ("sk-KEYSECRET123", "http://h", "KEYSECRET123"),
        ("sk-ant-api03-AbCdEf0123", "http://h", "AbCdEf0123"),
        ("sk-proj-AbCdEf0123", "http://h", "AbCdEf0123"),
        ("KEYSECRET123", "http://h", "KEYSECRET123"),
        // Percent-encoded, or escaped in a JSON string.
        ("key/with+odd&chars", "http://h", "key%2Fwith%2Bodd%26chars"),
        ("key\\with\"quotes\"", "http://h", r#"key\\with\"quotes\""#),
        // The base URL's password as written, with its user, and as the `Basic` header.
        ("x", "http://user:Pw5ecret@h/v1", "Pw5ecret"),
        ("x", "http://user:Pw5ecret@h/v1", "user:Pw5ecret"),
        ("x", "http://user:Pw5ecret@h/v1", "dXNlcjpQdzVlY3JldA=="),
        ("x", "http://user:Pw5ecret@h/v1", "dXNlcjpQdzVlY3JldA"),
        // A password written percent-encoded: echoed encoded, decoded, and in base64 of either.
        ("x", "http://me:p%40ss%2Fw0rd@h/v1", "p@ss/w0rd"),
        ("x", "http://me:p%40ss%2Fw0rd@h/v1", "p%40ss%2Fw0rd"),
        ("x", "http://me:p%40ss%2Fw0rd@h/v1", "bWU6cEBzcy93MHJk"),
        ("x", "http://me:p%40ss%2Fw0rd@h/v1", "bWU6cCU0MHNzJTJGdzByZA"),
        // A user alone can be the secret (`https://TOKEN@host`).
        ("x", "https://ghp_token0123456@h/v1", "ghp_token0123456"),
    ];

    #[test]
    fn every_form_of_a_secret_echoed_in_a_body_is_hidden() {
        for (index, (key, base_url, echoed)) in ECHOED.iter().enumerate() {
            for body in [format!("Incorrect key: {echoed}."), format!("headers={{'x': '{echoed}'}}")] {
                let shown = Secrets::new(key, base_url).redact(&body);
                // The message names the case, never what was shown: it may hold the secret.
                assert!(!shown.contains(echoed), "case {index}: the secret is shown");
                assert!(shown.contains(HIDDEN), "case {index}: nothing hidden");
            }
        }
    }

    #[test]
    fn keys_echoed_in_a_body_are_hidden() {
        let secrets = Secrets::new("local-key-1234", "http://me:correct-horse@h/v1");
        let body =
            "bad key local-key-1234; auth correct-horse; Bearer abc.DEF-123 and sk-proj-AbCdEf0123456789, \
                    sk-ant-api03-xyzxyzxyz; risk-assessment stays, sk-short stays, bearer";
        assert_eq!(
            secrets.redact(body),
            "bad key ***; auth ***; Bearer *** and sk-***, sk-***; risk-assessment stays, sk-short stays, bearer"
        );
        // A short local key is no secret worth hiding every word of.
        assert_eq!(Secrets::new("x", "http://h").redact("max tokens exceeded"), "max tokens exceeded");
        assert_eq!(Secrets::default().redact("héllo BEARER  tok"), "héllo BEARER  ***");
        // Words after "Basic" stay unless they are credentials.
        assert_eq!(
            Secrets::default().redact("Basic authentication needs Basic dTpwYXNzd29yZA=="),
            "Basic authentication needs Basic ***"
        );
    }
}
