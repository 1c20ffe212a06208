//! What the proxy did, as counters, and their Prometheus text for `GET /metrics`.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// The endpoints requests are counted by.
pub(crate) const ENDPOINTS: [&str; 4] = ["chat_completions", "responses", "messages", "other"];

/// Why the proxy answered in the client's place, or forwarded a body it could not compact.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Failure {
    Unauthorized,
    Overloaded,
    BodyTooLarge,
    BodyUnreadable,
    NotCompacted,
    UnknownModel,
    UpstreamUnreachable,
    UpstreamTimeout,
}

const FAILURES: [&str; 8] = [
    "unauthorized",
    "overloaded",
    "body_too_large",
    "body_unreadable",
    "not_compacted",
    "unknown_model",
    "upstream_unreachable",
    "upstream_timeout",
];

/// The counters, shared by every connection.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    requests: [AtomicU64; 4],
    compactions: AtomicU64,
    tokens_before: AtomicU64,
    tokens_after: AtomicU64,
    results_cleared: AtomicU64,
    recalled: AtomicU64,
    failures: [AtomicU64; 8],
    /// Upstream answers by status class: 1xx to 5xx.
    statuses: [AtomicU64; 5],
    cache_read: AtomicU64,
    cache_write: AtomicU64,
}

fn add(counter: &AtomicU64, n: usize) {
    counter.fetch_add(n as u64, Ordering::Relaxed);
}

impl Metrics {
    /// A request for `endpoint` (an index into [`ENDPOINTS`]).
    pub(crate) fn request(&self, endpoint: usize) {
        add(&self.requests[endpoint.min(ENDPOINTS.len() - 1)], 1);
    }

    pub(crate) fn compaction(&self, tokens_before: usize, tokens_after: usize, results_cleared: usize) {
        add(&self.compactions, 1);
        add(&self.tokens_before, tokens_before);
        add(&self.tokens_after, tokens_after);
        add(&self.results_cleared, results_cleared);
    }

    pub(crate) fn recalled(&self, replacements: usize) {
        add(&self.recalled, replacements);
    }

    /// Tokens an upstream answer says it read from its prompt cache and wrote to it.
    pub(crate) fn cached(&self, read: u64, write: u64) {
        self.cache_read.fetch_add(read, Ordering::Relaxed);
        self.cache_write.fetch_add(write, Ordering::Relaxed);
    }

    pub(crate) fn failure(&self, failure: Failure) {
        add(&self.failures[failure as usize], 1);
    }

    pub(crate) fn upstream_status(&self, status: u16) {
        if let Some(counter) = self.statuses.get(usize::from(status / 100).wrapping_sub(1)) {
            add(counter, 1);
        }
    }

    /// The Prometheus text exposition of every counter.
    pub(crate) fn render(&self) -> String {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let mut text = String::new();
        let mut family = |name: &str, help: &str, samples: &[(String, u64)]| {
            let _ = writeln!(
                text,
                "# HELP compaction_proxy_{name} {help}\n# TYPE compaction_proxy_{name} counter"
            );
            for (labels, value) in samples {
                let _ = writeln!(text, "compaction_proxy_{name}{labels} {value}");
            }
        };
        let labelled = |label: &str, names: &[&str], counters: &[AtomicU64]| -> Vec<(String, u64)> {
            names.iter().zip(counters).map(|(name, c)| (format!("{{{label}=\"{name}\"}}"), get(c))).collect()
        };
        let one = |counter: &AtomicU64| vec![(String::new(), get(counter))];
        family(
            "requests_total",
            "Requests received, by endpoint.",
            &labelled("endpoint", &ENDPOINTS, &self.requests),
        );
        family("compactions_total", "Requests the hook compacted.", &one(&self.compactions));
        family(
            "tokens_before_total",
            "Estimated tokens of the compacted requests as they came.",
            &one(&self.tokens_before),
        );
        family(
            "tokens_after_total",
            "Estimated tokens of the compacted requests as forwarded.",
            &one(&self.tokens_after),
        );
        family("results_cleared_total", "Tool results the hook replaced.", &one(&self.results_cleared));
        family(
            "replacements_recalled_total",
            "Messages replaced as in an earlier request of their conversation.",
            &one(&self.recalled),
        );
        family(
            "upstream_cache_read_tokens_total",
            "Prompt tokens the upstreams' answers say they read from their cache.",
            &one(&self.cache_read),
        );
        family(
            "upstream_cache_write_tokens_total",
            "Prompt tokens the upstreams' answers say they wrote to their cache.",
            &one(&self.cache_write),
        );
        family(
            "errors_total",
            "Requests answered by the proxy or forwarded uncompacted, by kind.",
            &labelled("kind", &FAILURES, &self.failures),
        );
        family(
            "upstream_responses_total",
            "Upstream answers, by status class.",
            &labelled("class", &["1xx", "2xx", "3xx", "4xx", "5xx"], &self.statuses),
        );
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_render_as_prometheus_text() {
        let metrics = Metrics::default();
        metrics.request(2);
        metrics.compaction(8000, 2300, 6);
        metrics.failure(Failure::UpstreamTimeout);
        metrics.upstream_status(429);
        let text = metrics.render();
        for line in [
            "# TYPE compaction_proxy_requests_total counter",
            "compaction_proxy_requests_total{endpoint=\"messages\"} 1",
            "compaction_proxy_requests_total{endpoint=\"other\"} 0",
            "compaction_proxy_compactions_total 1",
            "compaction_proxy_tokens_before_total 8000",
            "compaction_proxy_tokens_after_total 2300",
            "compaction_proxy_results_cleared_total 6",
            "compaction_proxy_errors_total{kind=\"upstream_timeout\"} 1",
            "compaction_proxy_upstream_responses_total{class=\"4xx\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}
