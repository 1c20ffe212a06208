//! Progress on standard error for long work, shown only when standard error is a terminal and
//! `--quiet` was not given.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

static QUIET: AtomicBool = AtomicBool::new(false);

/// Silences every progress display of this run (`--quiet`).
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether `--quiet` was given.
pub fn is_quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// Says `line` on standard error, unless `--quiet` was given: notes and summaries a user should
/// see once, which are not the command's output.
pub fn say(line: &str) {
    if !is_quiet() {
        eprintln!("{line}");
    }
}

fn target() -> ProgressDrawTarget {
    if QUIET.load(Ordering::Relaxed) {
        ProgressDrawTarget::hidden()
    } else {
        // indicatif draws nothing here unless standard error is a terminal.
        ProgressDrawTarget::stderr()
    }
}

/// A spinner with a message, for work of unknown length (reading, parsing, compacting).
pub fn spinner(message: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, target());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(message.to_owned());
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

/// A bar over `total` steps.
pub fn bar(total: u64, message: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), target());
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} {elapsed}/{eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(message.to_owned());
    bar
}
