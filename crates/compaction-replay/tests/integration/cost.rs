//! Pricing cases: a few calls in, the tokens by kind and the dollars out.

use compaction_replay::{estimate, CacheKind, Call, Error, PriceTable, Pricing, Recorded};

fn table() -> PriceTable {
    PriceTable::from_json(
        "test",
        r#"{"models": [
            {"match": "claude-sonnet-4*", "input": 3.0, "output": 15.0, "cache_read": 0.3,
             "cache_write_5m": 3.75, "cache_write_1h": 6.0, "cache": "anthropic"},
            {"match": "gpt-4o*", "input": 2.5, "output": 10.0, "cache_read": 1.25, "cache": "openai"}]}"#,
    )
    .unwrap()
}

/// Calls of `model` a minute apart (or `gap` ms), each `(prompt, shared)`, replies of 100 tokens.
fn calls(model: &str, gap: i64, prompts: &[(u64, u64)]) -> Vec<Call> {
    prompts
        .iter()
        .enumerate()
        .map(|(i, &(prompt, shared))| {
            let at = Recorded::default().with_call(Some(i as i64 * gap), Some(model.to_owned()));
            Call::new(prompt, shared, 100).with_recorded(Some(at))
        })
        .collect()
}

#[test]
fn cases() {
    struct Case {
        name: &'static str,
        model: &'static str,
        gap: i64,
        cache: Option<CacheKind>,
        prompts: &'static [(u64, u64)],
        // uncached, read, write
        expected: (u64, u64, u64),
    }
    let minute = 60_000;
    let cases = [
        Case {
            name: "a growing conversation reads the previous prompt and writes the rest",
            model: "claude-sonnet-4-5",
            gap: minute,
            cache: None,
            prompts: &[(10_000, 0), (12_000, 10_000), (15_000, 12_000)],
            expected: (0, 22_000, 15_000),
        },
        Case {
            name: "a compaction breaks the cache at its first change: the rest is written again",
            model: "claude-sonnet-4-5",
            gap: minute,
            cache: None,
            prompts: &[(10_000, 0), (12_000, 10_000), (8_000, 2_000)],
            // The third call reads nothing: no entry is as short as 2,000 tokens.
            expected: (0, 10_000, 20_000),
        },
        Case {
            name: "a pause longer than five minutes finds the cache cold",
            model: "claude-sonnet-4-5",
            gap: 6 * minute,
            cache: None,
            prompts: &[(10_000, 0), (12_000, 10_000)],
            expected: (0, 0, 22_000),
        },
        Case {
            name: "a prompt under the minimum is not cached",
            model: "claude-sonnet-4-5",
            gap: minute,
            cache: None,
            prompts: &[(900, 0), (1_000, 900)],
            expected: (1_900, 0, 0),
        },
        Case {
            name: "OpenAI reads 128-token steps of the shared prefix, writes for free",
            model: "gpt-4o",
            gap: minute,
            cache: None,
            prompts: &[(2_000, 0), (3_000, 2_000)],
            // 1,920 of 2,000 in 128-token steps.
            expected: (3_080, 1_920, 0),
        },
        Case {
            name: "without a cache every prompt token is input",
            model: "claude-sonnet-4-5",
            gap: minute,
            cache: Some(CacheKind::None),
            prompts: &[(10_000, 0), (12_000, 10_000)],
            expected: (22_000, 0, 0),
        },
    ];
    for case in cases {
        let pricing = Pricing::new(table()).with_cache(case.cache);
        let cost = estimate(&calls(case.model, case.gap, case.prompts), &pricing).unwrap();
        assert_eq!((cost.uncached, cost.cache_read, cost.cache_write), case.expected, "{}", case.name);
    }
}

#[test]
fn fewer_tokens_can_cost_more() {
    // Without compaction: a conversation growing by 2,000 tokens a call, read from the cache.
    // With it: each call compacted back to 20,000 tokens, the cache broken at 1,000.
    let pricing = Pricing::new(table());
    let without: Vec<(u64, u64)> =
        (0..20).map(|i| (30_000 + 2_000 * i, if i == 0 { 0 } else { 28_000 + 2_000 * i })).collect();
    let with: Vec<(u64, u64)> = (0..20).map(|i| (20_000, if i == 0 { 0 } else { 1_000 })).collect();
    let without = estimate(&calls("claude-sonnet-4-5", 60_000, &without), &pricing).unwrap();
    let with = estimate(&calls("claude-sonnet-4-5", 60_000, &with), &pricing).unwrap();
    assert!(with.prompt() < without.prompt());
    assert!(with.dollars > without.dollars, "{with:?} {without:?}");
}

#[test]
fn a_model_without_a_price_or_a_name_is_an_error_naming_the_call() {
    let pricing = Pricing::new(table());
    let unknown = calls("mystery-1", 60_000, &[(1_000, 0)]);
    assert!(matches!(estimate(&unknown, &pricing), Err(Error::NoPrice { step: 1, .. })));
    let unnamed = [Call::new(1_000, 0, 10)];
    assert!(matches!(estimate(&unnamed, &pricing), Err(Error::NoModel { step: 1 })));
    let named = estimate(&unnamed, &pricing.clone().with_model(Some("gpt-4o".into()))).unwrap();
    assert_eq!(named.uncached, 1_000);
    // Calls the log does not record (the first request, the final one) are the same agent's.
    let mut mixed = vec![Call::new(1_000, 0, 10)];
    mixed.extend(calls("gpt-4o", 60_000, &[(1_100, 1_000)]));
    mixed.push(Call::new(1_200, 1_100, 10));
    let mixed = estimate(&mixed, &pricing).unwrap();
    // The third call reads the second's 1,024 cached tokens (1,100 in 128-token steps).
    assert_eq!((mixed.uncached, mixed.cache_read), (1_000 + 1_100 + 176, 1_024));
}

#[test]
fn bad_price_tables_are_named_errors() {
    for (text, says) in [
        ("{", "line 1"),
        (r#"{"models": [{"match": "x", "input": -1, "output": 1, "cache": "none"}]}"#, "negative"),
        (r#"{"models": [{"match": "x", "input": 1, "output": 1, "cache": "lru"}]}"#, "line 1"),
    ] {
        let error = PriceTable::from_json("prices.json", text).unwrap_err();
        let message = error.to_string();
        assert!(message.contains("prices.json") && message.contains(says), "{message}");
    }
}
