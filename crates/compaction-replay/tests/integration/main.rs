//! compaction-replay's integration tests: the cache model against real logs, pricing cases as
//! data, and the replay's shared prefixes.

mod cost;
mod logs;
mod refetch;
mod replay;
