//! One module per subcommand.

pub mod bench;
pub mod convert;
pub mod count;
pub mod offload;
pub mod proxy;
pub mod prune;
pub mod simulate;

use std::path::Path;

use anyhow::Result;
use compaction_formats::{Conversation, Format, Target};
use compaction_model::{Changes, Message};

use crate::error::UsageError;
use crate::input::{InputArgs, Source};
use crate::output::{Output, Ready};

/// Writes `messages` of `conversation` to `output`, back in the format read or as `to`, and says
/// once on standard error what the output could not hold. `changes` says how `messages` came from
/// those read, so that each is written over its own original. A file is then ready to be
/// committed.
pub fn write_conversation(
    output: Output,
    conversation: &Conversation,
    messages: &[Message],
    to: Option<Target>,
    changes: &Changes,
) -> Result<Option<Ready>> {
    let mut losses = Vec::new();
    let ready = output.write_with(|out| {
        losses = compaction_formats::write(conversation, messages, to, changes, out)?;
        Ok(())
    })?;
    for loss in losses {
        crate::progress::say(&format!("note: {loss}"));
    }
    Ok(ready)
}

/// Whether `conversation`, written to `to` (back in its own format when `None`), comes out with
/// the other conversations of its file: only a file written back in its own format keeps them
/// (a tau-bench array, a JSON Lines file of conversations); written as another format, it holds
/// the one conversation read. (As `compaction_formats::write` decides, from
/// `Format::writes_back` and the format's own target.)
fn keeps_other_conversations(conversation: &Conversation, to: Option<Target>) -> bool {
    let format = conversation.format;
    match to {
        None => format.writes_back(),
        Some(to) => matches!(
            (format, to),
            (Format::Haystack, Target::Haystack)
                | (Format::OpenAi, Target::OpenAi)
                | (Format::Anthropic, Target::Anthropic)
        ),
    }
}

/// Refuses (a usage error, before anything is done or written) to write one conversation of a
/// file holding several over that very file when the output cannot hold the others: they would
/// be lost. Written elsewhere, a note says the output holds that conversation alone. A file of
/// one conversation that is written as another format (a SWE-agent or OpenHands file) is not
/// written over itself either, unless `--to` asks for that format.
pub fn refuse_dropping_conversations(
    input: &InputArgs,
    output: Option<&Path>,
    conversation: &Conversation,
    to: Option<Target>,
) -> Result<()> {
    let count = conversation.conversations;
    if keeps_other_conversations(conversation, to) {
        return Ok(());
    }
    let name = Source::from_arg(input.input.as_deref()).name();
    let over_input = match (&input.input, output) {
        (Some(input), Some(output)) if output.as_os_str() != "-" => same_file(input, output),
        _ => false,
    };
    // A trajectory written as another format without being asked to (`--to`) would lose, over
    // its own file, everything it holds beyond the messages: refused, whatever it holds.
    if over_input && to.is_none() && count < 2 {
        return Err(UsageError(format!(
            "{name}: {} is written as {}, which holds only the messages: writing it over {name} would lose the \
             rest of the file; write it to another file with -o FILE",
            conversation.format.label(),
            label(conversation.format.default_target())
        ))
        .into());
    }
    if count < 2 {
        return Ok(());
    }
    let selected = conversation.selected;
    let written = match to {
        Some(to) => format!("--to {} writes {}", to.as_str(), label(to)),
        None => {
            format!(
                "{} is written as {}",
                conversation.format.label(),
                label(conversation.format.default_target())
            )
        }
    };
    if over_input {
        let others: Vec<usize> = (0..count).filter(|&k| k != selected).collect();
        return Err(UsageError(format!(
            "{name}: the file holds {count} conversations and the output one ({written}): writing \
             conversation {selected} over {name} would lose {}; write it to another file with -o FILE",
            conversations(&others)
        ))
        .into());
    }
    crate::progress::say(&format!(
        "note: the output holds conversation {selected} alone of the {count} in {name} ({written})"
    ));
    Ok(())
}

/// A target's name as the messages say it.
fn label(target: Target) -> &'static str {
    match target {
        Target::Haystack => "Haystack",
        Target::OpenAi => "OpenAI",
        Target::Anthropic => "Anthropic",
        other => other.as_str(),
    }
}

/// `conversation 0`, `conversations 0 and 2`, `conversations 0, 2-9 and 11`: runs of
/// consecutive numbers joined.
fn conversations(numbers: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &n in numbers {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == n => *last = n,
            _ => runs.push((n, n)),
        }
    }
    let runs: Vec<String> = runs
        .iter()
        .map(|&(first, last)| match last - first {
            0 => first.to_string(),
            1 => format!("{first}, {last}"),
            _ => format!("{first}-{last}"),
        })
        .collect();
    let noun = if numbers.len() == 1 { "conversation" } else { "conversations" };
    match runs.split_last() {
        Some((last, [])) => format!("{noun} {last}"),
        Some((last, rest)) => format!("{noun} {} and {last}", rest.join(", ")),
        None => format!("no {noun}"),
    }
}

/// Whether `a` and `b` are the same file (through links, or hard links); `false` when either
/// does not exist.
pub(crate) fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::conversations;

    #[test]
    fn numbers_are_named_in_runs() {
        assert_eq!(conversations(&[1]), "conversation 1");
        assert_eq!(conversations(&[0, 2]), "conversations 0 and 2");
        assert_eq!(conversations(&[0, 1]), "conversations 0, 1");
        assert_eq!(conversations(&[0, 2, 3, 4, 5, 7]), "conversations 0, 2-5 and 7");
    }
}
