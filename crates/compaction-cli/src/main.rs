//! The `compaction` command: count, convert, prune, offload and replay LLM-agent transcripts.
//!
//! Every command reads a conversation from a file or standard input and writes its answer to
//! standard output or a file. Bad input is reported on one line of standard error, naming the
//! file, the message and the problem, with exit status 1, as is a provider call the command
//! cannot do without (a provider's count, a summary with `--raise-on-failure`); bad usage, and a
//! missing API key, exit with 2; a run that wrote its output but could not store every result it
//! was asked to offload exits with 3.
//! Output files are staged beside their targets and put in place together at the run's commit
//! point, once everything else has succeeded (see `output`): a failed run leaves every target as
//! it was, and a signal after the commit point does not fail a run that wrote everything.

mod allocator;
mod chart;
mod commands;
mod error;
mod input;
mod options;
mod output;
mod progress;
mod provider;
mod strategy;
mod text;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use error::{PartialFailure, UsageError};

/// Keep LLM-agent conversations inside a model's context window.
#[derive(Debug, Parser)]
#[command(name = "compaction", version, about, propagate_version = true)]
struct Cli {
    /// Nothing on standard error but errors and failures: no progress bar, notes or summary line.
    #[arg(long, short, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Count(commands::count::Args),
    Convert(commands::convert::Args),
    // Boxed: its many options would make every other variant as large.
    Prune(Box<commands::prune::Args>),
    Offload(Box<commands::offload::Args>),
    Simulate(Box<commands::simulate::Args>),
    Bench(Box<commands::bench::Args>),
    Proxy(Box<commands::proxy::Args>),
}

fn main() -> ExitCode {
    // No transparent huge pages (see the rustix dependency's comment in Cargo.toml). A kernel
    // that refuses changes nothing but the speed.
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
    let cli = Cli::parse();
    if matches!(cli.command, Command::Bench(_)) {
        allocator::hand_back_freed_memory_at_once();
    }
    output::clean_up_on_interrupt();
    progress::set_quiet(cli.quiet);
    let result = match cli.command {
        Command::Count(args) => commands::count::run(args),
        Command::Convert(args) => commands::convert::run(args),
        Command::Prune(args) => commands::prune::run(*args),
        Command::Offload(args) => commands::offload::run(*args),
        Command::Simulate(args) => commands::simulate::run(*args),
        Command::Bench(args) => commands::bench::run(*args),
        Command::Proxy(args) => commands::proxy::run(*args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let message = compaction_core::error_chain(error.as_ref()).replace('\n', " ");
            eprintln!("error: {message}");
            if error.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else if error.downcast_ref::<PartialFailure>().is_some() {
                ExitCode::from(3)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
