//! The cache model against what real Claude Code sessions recorded: per-call usage, times and
//! models taken from the four shared sessions (`tests/data/claude-code-calls.json`, its source
//! and licence beside it).

use compaction_replay::{estimate, recorded, Call, PriceTable, Pricing, Recorded};
use serde_json::Value;

fn sessions() -> Vec<(String, Vec<Call>)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/claude-code-calls.json");
    let data: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    data["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| {
            let model = session["model"].as_str().unwrap().to_owned();
            let mut previous = 0;
            let calls = session["calls"]
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
                .map(|(i, row)| {
                    let n = |k: usize| row[k].as_u64().unwrap();
                    let record = Recorded::new(2 * i + 1, n(1), n(2), n(3), n(6))
                        .with_write_lifetimes(n(4), n(5))
                        .with_call(row[0].as_i64(), Some(model.clone()));
                    let prompt = record.prompt_tokens();
                    let call = Call::new(prompt, previous.min(prompt), n(6)).with_recorded(Some(record));
                    previous = prompt;
                    call
                })
                .collect();
            (session["session"].as_str().unwrap().to_owned(), calls)
        })
        .collect()
}

fn off(estimate: f64, recorded: f64) -> f64 {
    (estimate - recorded).abs() / recorded
}

#[test]
fn the_cache_model_prices_each_session_within_5_percent_of_what_it_recorded() {
    let pricing = Pricing::new(PriceTable::bundled());
    let sessions = sessions();
    assert_eq!(sessions.len(), 4);
    for (name, calls) in sessions {
        let model = estimate(&calls, &pricing).unwrap();
        let logged = recorded(&calls, &pricing).unwrap().unwrap();
        assert!(off(model.dollars, logged.dollars) < 0.05, "{name}: {model:?} against {logged:?}");
        assert!(off(model.cache_read as f64, logged.cache_read as f64) < 0.05, "{name}: reads");
        assert!(off(model.cache_write as f64, logged.cache_write as f64) < 0.05, "{name}: writes");
        // The sessions show every call's cache lifetime and time.
        assert_eq!((model.lifetime_assumed, model.untimed), (0, 0), "{name}");
    }
}

#[test]
fn a_session_written_for_an_hour_survives_pauses_of_more_than_five_minutes() {
    // The first session's writes are one-hour writes; with its lifetimes hidden the model assumes
    // five minutes, says so, and takes its longer pauses for a cold cache.
    let pricing = Pricing::new(PriceTable::bundled());
    let (_, calls) = sessions().into_iter().next().unwrap();
    let hidden: Vec<Call> = calls
        .iter()
        .map(|c| {
            let r = c.recorded.clone().unwrap();
            let r = Recorded::new(
                r.message,
                r.input_tokens,
                r.cache_read_tokens,
                r.cache_write_tokens,
                r.output_tokens,
            )
            .with_call(r.timestamp_ms, r.model);
            Call::new(c.prompt, c.shared, c.output).with_recorded(Some(r))
        })
        .collect();
    let seen = estimate(&calls, &pricing).unwrap();
    let assumed = estimate(&hidden, &pricing).unwrap();
    assert!(assumed.lifetime_assumed > 0);
    assert!(assumed.cache_write > seen.cache_write, "{assumed:?} {seen:?}");
    assert_eq!(seen.cache_write_1h, seen.cache_write);
}
