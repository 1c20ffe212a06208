//! Secrets kept out of error messages: the password of a base URL (`http://user:pw@host`), and
//! keys a server echoes in an error body (the client's own key, and anything shaped like a key:
//! `sk-…`, `Bearer …`).

/// What replaces a secret.
const HIDDEN: &str = "***";

/// Values shorter than this are not taken for secrets when found in a body: a local server's key
/// is often a word (`local`, `x`) that would hide every occurrence of it.
const SHORTEST_SECRET: usize = 8;

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
    /// The API key and the password of the base URL, if any.
    pub(crate) fn new(api_key: &str, base_url: &str) -> Self {
        let mut values: Vec<String> = [Some(api_key), url_password(base_url)]
            .into_iter()
            .flatten()
            .map(str::trim)
            .filter(|value| value.chars().count() >= SHORTEST_SECRET)
            .map(str::to_owned)
            .collect();
        // The longest first, so a key that holds another is hidden whole.
        values.sort_by_key(|value| std::cmp::Reverse(value.len()));
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

/// The password of an `http://user:password@host` URL.
fn url_password(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split('/').next().unwrap_or(rest);
    let (userinfo, _) = authority.rsplit_once('@')?;
    userinfo.split_once(':').map(|(_, password)| password).filter(|p| !p.is_empty())
}

/// `url` with the password of its user information replaced by `***` (`http://user:***@host`).
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:{HIDDEN}@{host}{path}"),
        None => url.to_owned(),
    }
}

/// Characters a key or a bearer token is made of.
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~' | '+' | '/' | '=')
}

/// `sk-` followed by at least this many key characters is taken for a key.
const SHORTEST_SK_KEY: usize = 8;

/// `text` with OpenAI- and Anthropic-shaped keys (`sk-…`, `sk-ant-…`, `sk-proj-…`) and bearer
/// tokens (`Bearer …`) hidden.
fn redact_key_shapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = next_key_start(rest) {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let (prefix, body) = if from.starts_with("sk-") {
            from.split_at(3)
        } else {
            // "Bearer" and the spaces after it, in any case.
            let spaces = from[6..].len() - from[6..].trim_start_matches(' ').len();
            from.split_at(6 + spaces)
        };
        let token_len = body.find(|c: char| !is_token_char(c)).unwrap_or(body.len());
        let is_key = match prefix {
            "sk-" => token_len >= SHORTEST_SK_KEY,
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

/// Where the next `sk-` (at the start of a word) or `Bearer ` starts in `text`.
fn next_key_start(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let word_start = |at: usize| at == 0 || !is_token_char(char::from(bytes[at - 1]));
    let mut from = 0;
    loop {
        let sk = text[from..].find("sk-").map(|at| at + from);
        let bearer = find_ascii_case_insensitive(&text[from..], "bearer ").map(|at| at + from);
        let at = match (sk, bearer) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        if word_start(at) {
            return Some(at);
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
    fn url_passwords_are_hidden_and_the_rest_kept() {
        assert_eq!(redact_url("http://user:hunter2@127.0.0.1:8080/v1"), "http://user:***@127.0.0.1:8080/v1");
        assert_eq!(redact_url("https://user@host/v1"), "https://user@host/v1");
        assert_eq!(redact_url("https://host/v1/a@b"), "https://host/v1/a@b");
        assert_eq!(redact_url("http://u:p:q@host"), "http://u:***@host");
        assert_eq!(url_password("http://u:secret-pass@h/v1"), Some("secret-pass"));
        assert_eq!(url_password("http://h/v1"), None);
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
    }
}
