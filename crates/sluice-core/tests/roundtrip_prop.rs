//! Property tests: random records, layouts and codecs survive a round trip,
//! alone and as a stream of blocks; arbitrary or mutated bytes never panic
//! the decoder.

use proptest::prelude::*;
use sluice_core::{BlockDecoder, BlockEncoder, BlockReader, Codec, Layout, RecordBatch};

fn codec() -> impl Strategy<Value = Codec> {
    prop_oneof![
        Just(Codec::None),
        Just(Codec::Lz4),
        (-7i8..=9)
            .prop_filter("0 is not a level", |l| *l != 0)
            .prop_map(|level| Codec::Zstd { level }),
        Just(Codec::Zstd { level: 19 }),
    ]
}

fn fixed_layout() -> impl Strategy<Value = Layout> {
    (prop_oneof![Just(4usize), Just(8), Just(10), Just(16), 1usize..=64], 0usize..=120)
        .prop_map(|(k, v)| Layout::fixed(k, v).expect("in range"))
}

/// A layout and records that fit it: fixed records share their widths,
/// variable ones have independent lengths (including empty keys and values).
fn batch() -> impl Strategy<Value = RecordBatch> {
    let fixed = fixed_layout().prop_flat_map(|layout| {
        let (k, v) = match layout {
            Layout::Fixed { key_width, value_width } => (key_width as usize, value_width as usize),
            Layout::Variable => unreachable!(),
        };
        let rec = (prop::collection::vec(any::<u8>(), k), prop::collection::vec(any::<u8>(), v));
        (Just(layout), prop::collection::vec(rec, 0..150))
    });
    let variable = prop::collection::vec(
        (prop::collection::vec(any::<u8>(), 0..40), prop::collection::vec(any::<u8>(), 0..300)),
        0..100,
    )
    .prop_map(|recs| (Layout::Variable, recs));
    prop_oneof![fixed, variable].prop_map(|(layout, recs)| {
        let mut b = RecordBatch::new(layout);
        for (k, v) in recs {
            b.push(&k, &v).expect("record fits its layout");
        }
        b
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn round_trip(b in batch(), codec in codec()) {
        let mut out = Vec::new();
        let header = BlockEncoder::new(codec)?.encode(&b, &mut out)?;
        prop_assert_eq!(header.frame_len(), out.len());
        let mut dec = BlockDecoder::new();
        let block = dec.decode(&out)?;
        prop_assert_eq!(block.records.len(), b.len());
        for (got, want) in block.records.iter().zip(b.iter()) {
            prop_assert_eq!(got, want);
        }
        prop_assert_eq!(block.records.to_batch(), b);
    }

    #[test]
    fn stream_of_blocks(batches in prop::collection::vec(batch(), 0..6), codec in codec()) {
        let mut enc = BlockEncoder::new(codec)?;
        let mut stream = Vec::new();
        for b in &batches {
            enc.encode(b, &mut stream)?;
        }
        let mut reader = BlockReader::new(&stream[..]);
        for b in &batches {
            let block = reader.next_block()?;
            prop_assert!(block.is_some());
            prop_assert_eq!(&block.map(|x| x.records.to_batch()), &Some(b.clone()));
        }
        prop_assert!(reader.next_block()?.is_none());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let mut dec = BlockDecoder::new();
        if let Ok(block) = dec.decode(&bytes) {
            prop_assert_eq!(block.records.iter().count(), block.records.len());
        }
        let mut reader = BlockReader::new(&bytes[..]);
        while let Ok(Some(_)) = reader.next_block() {}
    }

    #[test]
    fn mutated_blocks_are_rejected(
        b in batch(),
        codec in codec(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
    ) {
        let mut out = Vec::new();
        BlockEncoder::new(codec)?.encode(&b, &mut out)?;
        for (at, mask) in &edits {
            let i = at.index(out.len());
            out[i] ^= mask;
        }
        let mut dec = BlockDecoder::new();
        // Several edits can cancel out (same byte, same mask twice); only a
        // block whose bytes really changed must be rejected.
        let mut pristine = Vec::new();
        BlockEncoder::new(codec)?.encode(&b, &mut pristine)?;
        match dec.decode(&out) {
            Ok(block) => {
                prop_assert_eq!(&out, &pristine, "a changed block was accepted");
                prop_assert_eq!(block.records.to_batch(), b);
            }
            Err(e) => prop_assert!(out != pristine, "pristine block rejected: {}", e),
        }
    }
}
