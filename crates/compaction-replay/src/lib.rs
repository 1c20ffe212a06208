//! Replay an agent's recorded conversation call by call with a compactor and the compaction
//! hook's rules, and price every call as the provider bills it, prompt cache included.
//!
//! Compaction makes each request smaller, but it rewrites the conversation from the first message
//! it changes, and a provider's prompt cache serves only an unchanged prefix: every compaction
//! turns cheap cache reads into cache writes. Tokens saved are not dollars saved. This crate
//! answers both: [`Replay`] runs a [`compaction_hook::CompactionHook`] (and optionally a
//! [`compaction_offload::ToolResultOffloadHook`]) before each recorded model call, as an agent
//! loop would, and records each call as a [`Step`]: its size without and with compaction, and
//! how much of the prompt is the previous call's prompt unchanged (from the compaction's changed
//! messages, so only the tail after the first change is counted again). [`estimate`] then prices
//! the calls with a cache model ([`CacheKind`]: Anthropic's breakpoints with five-minute and
//! one-hour lifetimes, OpenAI's automatic prefix caching, or none) and prices from a
//! [`PriceTable`] of model-name patterns (a bundled one, or the caller's JSON); [`recorded`]
//! prices what the log itself records, so the model can be checked against it.
//!
//! The crate does no I/O: the caller reads the log (the `compaction` command uses
//! compaction-formats), converts each call's record into a [`Recorded`], and prints. A
//! [`Replay`] only borrows its hooks, so one can run over many conversations.
//!
//! ```
//! use compaction_replay::{estimate, recorded, Call, CacheKind, PriceTable, Pricing, Recorded};
//!
//! // Two calls of a growing conversation, the second within the cache's lifetime.
//! let first = Recorded::new(1, 3, 0, 20_000, 100).with_write_lifetimes(20_000, 0)
//!     .with_call(Some(0), Some("claude-sonnet-4-5".into()));
//! let second = Recorded::new(3, 3, 20_000, 5_000, 100).with_write_lifetimes(5_000, 0)
//!     .with_call(Some(60_000), Some("claude-sonnet-4-5".into()));
//! let calls = vec![
//!     Call::new(20_003, 0, 100).with_recorded(Some(first)),
//!     Call::new(25_003, 20_003, 100).with_recorded(Some(second)),
//! ];
//! let pricing = Pricing::new(PriceTable::bundled());
//! let cost = estimate(&calls, &pricing).unwrap();
//! assert_eq!((cost.cache_read, cost.cache_write), (20_003, 25_003));
//! assert_eq!(cost.cache, Some(CacheKind::Anthropic));
//! let logged = recorded(&calls, &pricing).unwrap().unwrap();
//! assert!((cost.dollars - logged.dollars).abs() / logged.dollars < 0.01);
//!
//! // Without a cache every prompt token is billed as input.
//! let plain = estimate(&calls, &pricing.clone().with_cache(Some(CacheKind::None))).unwrap();
//! assert_eq!(plain.uncached, 45_006);
//! ```
//!
//! ## Crate features
//!
//! None.
//!
//! ## Minimum supported Rust version
//!
//! 1.88, the workspace's: see its README for the policy. It is raised only in a minor version
//! (0.1 → 0.2), never in a patch release, and the changelog says so.

#![deny(missing_docs)]

mod cost;
mod error;
mod prices;
mod recorded;
mod replay;

pub use cost::{estimate, recorded, Call, Cost, Pricing};
pub use error::Error;
pub use prices::{CacheKind, PriceRow, PriceTable};
pub use recorded::{Lifetime, Recorded};
pub use replay::{Recording, Replay, Replayed, Step};
