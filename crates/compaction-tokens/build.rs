//! With the `tiktoken` feature: builds the byte-pair encodings of o200k_base and cl100k_base for
//! the bpe crate, keeping only what counting needs, compressed.
//!
//! bpe-openai embeds each encoding whole, prebuilt: 32 MB for o200k_base and 15 MB for
//! cl100k_base, most of it three Aho-Corasick automata, of which counting uses one. Building an
//! encoding from its token list takes over a second, too long for a command's start, so it is
//! done here, once: the two automata counting never touches are replaced by an empty one, and
//! the rest is compressed with zstd at level 9 (o200k_base 16.4 MB to 8.0 MB, cl100k_base 7.8 MB
//! to 3.8 MB, for about 0.3 s of this script's time). At run time the first count with an
//! encoding decompresses and reads it, in under a tenth of a second. (LZ4, used before, made
//! them 12.2 MB and 5.7 MB; zstd's level 19 saves another 0.9 MB but takes 16 s to compress.)
//!
//! The token lists come from tiktoken-rs (the same `.tiktoken` files, in rank order).

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    #[cfg(feature = "tiktoken")]
    encodings::build();
}

#[cfg(feature = "tiktoken")]
mod encodings {
    use std::path::PathBuf;

    use bpe::byte_pair_encoding::BytePairEncoding;

    /// The hash factor bpe-openai 0.3 builds both encodings with; it leaves no two tokens of
    /// either with the same hash.
    const HASH_FACTOR: u64 = 17846336922010275747;

    /// zstd's compression level for the encodings: most of what higher levels save (level 19 is
    /// 7% smaller) at a twentieth of their time; zstd undoes every level about as fast.
    const LEVEL: i32 = 9;

    /// The serialized encoding's fields that hold the two overlapping-match automata: the
    /// appendable, prependable and interval encoders use them, counting does not. Positions in
    /// bpe 0.2's `BytePairEncoding`, which serializes as an array of its fields.
    const UNUSED_AUTOMATA: [usize; 2] = [6, 7];

    pub(super) fn build() {
        let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
        let o200k = tiktoken_rs::o200k_base().expect("tiktoken-rs has o200k_base");
        write(&out.join("o200k_base.bpe"), &o200k, 199_998);
        let cl100k = tiktoken_rs::cl100k_base().expect("tiktoken-rs has cl100k_base");
        write(&out.join("cl100k_base.bpe"), &cl100k, 100_256);
    }

    fn write(path: &std::path::Path, encoding: &tiktoken_rs::CoreBPE, tokens: u32) {
        // Ordinary tokens have the ranks 0..tokens; the special ones come after a gap.
        let list: Vec<Vec<u8>> = (0..tokens)
            .map(|rank| encoding.decode_bytes(&[rank]).expect("every rank below the count is a token"))
            .collect();
        assert!(encoding.decode_bytes(&[tokens]).is_err(), "more ordinary tokens than expected");
        let bpe = BytePairEncoding::from_dictionary(list, Some(HASH_FACTOR));
        let bytes = rmp_serde::to_vec(&bpe).expect("the encoding serializes");
        let mut value = rmpv::decode::read_value(&mut bytes.as_slice()).expect("what rmp-serde wrote reads");
        let rmpv::Value::Array(fields) = &mut value else { panic!("bpe's encoding is no longer an array") };
        assert_eq!(fields.len(), 10, "bpe's encoding has changed its fields");
        let empty = aneubeck_daachorse::DoubleArrayAhoCorasick::<u32>::new(["\0"])
            .expect("an automaton of one pattern builds")
            .serialize();
        for field in UNUSED_AUTOMATA {
            assert!(
                matches!(fields[field], rmpv::Value::Binary(_)),
                "field {field} is no longer an automaton"
            );
            fields[field] = rmpv::Value::Binary(empty.clone());
        }
        let mut kept = Vec::new();
        rmpv::encode::write_value(&mut kept, &value).expect("writing to memory succeeds");
        // A zstd frame records its content's size, so the reader allocates exactly once.
        let compressed = zstd::bulk::compress(&kept, LEVEL).expect("compressing in memory succeeds");
        std::fs::write(path, compressed).expect("OUT_DIR is writable");
    }
}
