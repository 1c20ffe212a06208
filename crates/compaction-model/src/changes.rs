//! [`Changes`]: what a command made of a conversation read, for writing it back over what was read.

/// What changed between the messages read and the messages written: the one description a
/// compaction gives (`compaction_core::Compaction::changes`) and a write-back takes
/// (`compaction_formats::write`).
///
/// Each message written either stands for a message read — as it was, or changed — or was put
/// in (a sliding window's note, a summary). When no message was dropped, added or moved, the
/// description is the indices of the messages that changed ([`Changes::changed`]); otherwise it
/// is, for each message written, the message read it stands for ([`Changes::origin`]).
///
/// Serialized as `{"in_place": [indices]}`, `{"rewritten": [index or null, …]}` or `"unknown"`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Changes {
    /// Every message is where it was read; those at these indices (increasing, each once) changed,
    /// every other one is the message read. Empty: nothing changed.
    InPlace(Vec<usize>),
    /// Messages were dropped or put in: for each message written, the index of the message read
    /// that it stands for (as it was or changed; increasing), or `None` for one put in.
    Rewritten(Vec<Option<usize>>),
    /// Anything may have changed: nothing is known of where the messages written came from.
    Unknown,
}

impl Changes {
    /// Nothing changed: every message is the one read.
    pub fn none() -> Changes {
        Changes::InPlace(Vec::new())
    }

    /// Messages changed in place at `indices`, which need not be sorted; an index given twice
    /// counts once.
    pub fn in_place(mut indices: Vec<usize>) -> Changes {
        indices.sort_unstable();
        indices.dedup();
        Changes::InPlace(indices)
    }

    /// Messages dropped or put in: `origin` holds, for each message written, the index of the
    /// message read it stands for, or `None` for one put in.
    pub fn rewritten(origin: Vec<Option<usize>>) -> Changes {
        Changes::Rewritten(origin)
    }

    /// The changes that turn `read_len` messages into `len` by dropping the messages read at
    /// `removed` and putting messages in at `inserted` (indices among those written), every other
    /// message kept in its order. [`Changes::Unknown`] when they do not account for `len`, or
    /// name a message that is not there.
    pub fn dropping_and_inserting(
        read_len: usize,
        len: usize,
        removed: &[usize],
        inserted: &[usize],
    ) -> Changes {
        Self::origin_of(read_len, len, removed, inserted).map_or(Changes::Unknown, Changes::Rewritten)
    }

    /// The origin [`Changes::dropping_and_inserting`] describes, if the indices account for `len`.
    fn origin_of(
        read_len: usize,
        len: usize,
        removed: &[usize],
        inserted: &[usize],
    ) -> Option<Vec<Option<usize>>> {
        if read_len + inserted.len() != len + removed.len() {
            return None;
        }
        let mut dropped = vec![false; read_len];
        for &index in removed {
            *dropped.get_mut(index)? = true;
        }
        let mut new = vec![false; len];
        for &index in inserted {
            *new.get_mut(index)? = true;
        }
        let mut kept = (0..read_len).filter(|&index| !dropped[index]);
        new.into_iter().map(|new| if new { Some(None) } else { kept.next().map(Some) }).collect()
    }

    /// Whether every message is the one read, where it was read.
    pub fn is_unchanged(&self) -> bool {
        matches!(self, Changes::InPlace(changed) if changed.is_empty())
    }

    /// The indices of the messages changed in place, in increasing order, when no message was
    /// dropped, added or moved; `None` otherwise.
    pub fn changed(&self) -> Option<&[usize]> {
        match self {
            Changes::InPlace(changed) => Some(changed),
            Changes::Rewritten(_) | Changes::Unknown => None,
        }
    }

    /// For each of the `len` messages written, the index of the message read it stands for (as
    /// it was or changed), or `None` for one put in; `None` when that is not known.
    pub fn origin(&self, len: usize) -> Option<Vec<Option<usize>>> {
        match self {
            Changes::InPlace(_) => Some((0..len).map(Some).collect()),
            Changes::Rewritten(origin) if origin.len() == len => Some(origin.clone()),
            Changes::Rewritten(_) | Changes::Unknown => None,
        }
    }

    /// Whether the message written at `index` may differ from the message read it stands for
    /// (always, for one put in or when nothing is known).
    pub fn may_differ(&self, index: usize) -> bool {
        match self {
            Changes::InPlace(changed) => changed.binary_search(&index).is_ok(),
            Changes::Rewritten(_) | Changes::Unknown => true,
        }
    }

    /// Whether these changes can describe `written` made from `read`: each message written that
    /// is said to be the one read (not [`Changes::may_differ`]) equals it, every index is in
    /// range, and the kept messages are in the order read.
    pub fn describes<T: PartialEq>(&self, read: &[T], written: &[T]) -> bool {
        match self {
            Changes::InPlace(changed) => {
                read.len() == written.len()
                    && changed.iter().all(|&index| index < read.len())
                    && changed.windows(2).all(|pair| pair[0] < pair[1])
                    && (0..read.len()).all(|index| self.may_differ(index) || read[index] == written[index])
            }
            Changes::Rewritten(origin) => {
                let kept: Vec<usize> = origin.iter().flatten().copied().collect();
                origin.len() == written.len()
                    && kept.iter().all(|&index| index < read.len())
                    && kept.windows(2).all(|pair| pair[0] < pair[1])
            }
            Changes::Unknown => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Changes;

    #[test]
    fn in_place_indices_are_sorted_once_each() {
        assert_eq!(Changes::in_place(vec![4, 1, 4, 0]), Changes::InPlace(vec![0, 1, 4]));
        assert!(Changes::none().is_unchanged());
        assert!(!Changes::in_place(vec![2]).is_unchanged());
        assert_eq!(Changes::in_place(vec![2]).changed(), Some(&[2][..]));
    }

    #[test]
    fn serialized_as_each_kind_named() {
        let json = |changes: Changes| serde_json::to_string(&changes).expect("serializes");
        assert_eq!(json(Changes::in_place(vec![2, 1])), r#"{"in_place":[1,2]}"#);
        assert_eq!(json(Changes::rewritten(vec![None, Some(3)])), r#"{"rewritten":[null,3]}"#);
        assert_eq!(json(Changes::Unknown), r#""unknown""#);
    }

    #[test]
    fn in_place_origin_is_each_message_its_own() {
        let changes = Changes::in_place(vec![1]);
        assert_eq!(changes.origin(3), Some(vec![Some(0), Some(1), Some(2)]));
        assert!(changes.describes(&["a", "b", "c"], &["a", "B", "c"]));
        assert!(!changes.describes(&["a", "b", "c"], &["A", "B", "c"]), "an unlisted change");
        assert!(!changes.describes(&["a", "b", "c"], &["a", "B"]), "a message dropped");
    }

    /// (messages read, removed, inserted, messages written, origin expected)
    type Case = (usize, &'static [usize], &'static [usize], usize, Option<&'static [Option<usize>]>);

    const CASES: &[Case] = &[
        (4, &[1, 2], &[1], 3, Some(&[Some(0), None, Some(3)])),
        (3, &[], &[0], 4, Some(&[None, Some(0), Some(1), Some(2)])),
        (3, &[0, 1, 2], &[0], 1, Some(&[None])),
        (3, &[0], &[], 2, Some(&[Some(1), Some(2)])),
        // The counts do not add up, or an index is out of range: nothing is known.
        (3, &[0], &[], 3, None),
        (3, &[5], &[], 2, None),
        (3, &[], &[7], 4, None),
    ];

    #[test]
    fn dropping_and_inserting_gives_each_message_its_origin() {
        for &(read, removed, inserted, len, expected) in CASES {
            let changes = Changes::dropping_and_inserting(read, len, removed, inserted);
            assert_eq!(changes.origin(len).as_deref(), expected, "{read} {removed:?} {inserted:?} {len}");
            assert_eq!(changes.changed(), None);
            if expected.is_none() {
                assert_eq!(changes, Changes::Unknown);
            }
        }
    }

    #[test]
    fn a_rewrite_describes_only_kept_messages_in_order() {
        let read = ["a", "b", "c"];
        assert!(Changes::rewritten(vec![None, Some(2)]).describes(&read, &["note", "c"]));
        assert!(!Changes::rewritten(vec![Some(2), Some(0)]).describes(&read, &["c", "a"]), "moved");
        assert!(!Changes::rewritten(vec![Some(3)]).describes(&read, &["d"]), "out of range");
        assert!(!Changes::rewritten(vec![Some(0)]).describes(&read, &["a", "b"]), "too short");
        assert_eq!(Changes::rewritten(vec![Some(0)]).origin(2), None);
    }
}
