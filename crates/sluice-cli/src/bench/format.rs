//! `sluice bench format`: block encode and decode throughput per codec.
//!
//! # What is measured
//! For each data set (TeraGen 100-byte records, 16-byte tuples, and HiBench
//! text in the variable layout) the input is generated once and cut into
//! batches of `--block-kib`. Then, in the same run:
//!
//! - `memcpy`: every batch payload copied back to back into one buffer of the
//!   same size (the baseline: the least any encoder must do);
//! - `encode`: every batch encoded into one reused output buffer (header,
//!   codec, CRC32C);
//! - `decode`: every block of that output decoded (header checks, CRC32C,
//!   inflate, layout validation) and every record visited, reading its key,
//!   so a decoder that skipped work would show up in the checksum.
//!
//! Throughput is uncompressed payload bytes per second (GB = 10^9 bytes).
//! After one warm-up round, each of `--reps` rounds times the memcpy, the
//! encode and the decode back to back; the table shows the median of each
//! figure and the median of the per-round ratios (so a noisy neighbour that
//! slows one round slows its baseline too). `round trip` is
//! bytes / (encode time + decode time). The decoded records are checked
//! against the input (count and a key checksum) before a row is printed.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::json;
use sluice_core::datagen::{teragen, tuples, words::TextGen};
use sluice_core::{BlockDecoder, BlockEncoder, Codec, Layout, RecordBatch};

use super::measure::{copy_all, gbps, median_of, time, try_time};
use super::report::{write_json, Table};

/// Options of `sluice bench format`.
#[derive(Debug, Args)]
pub(crate) struct FormatArgs {
    /// Input size per data set, in MiB.
    #[arg(long, default_value_t = 256)]
    mib: usize,
    /// Uncompressed bytes per block, in KiB.
    #[arg(long, default_value_t = 1024)]
    block_kib: usize,
    /// Timed repetitions per measurement (the median is reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Codecs to measure, comma separated (none, lz4, zstd-N).
    #[arg(long, value_delimiter = ',', default_value = "none,lz4,zstd-1,zstd-3")]
    codecs: Vec<String>,
    /// Data sets, comma separated (teragen, tuple16, text).
    #[arg(long, value_delimiter = ',', default_value = "teragen,tuple16,text")]
    datasets: Vec<String>,
    /// Also write the rows as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// A generated data set, cut into batches of about one block each.
struct DataSet {
    name: &'static str,
    batches: Vec<RecordBatch>,
    records: usize,
    bytes: usize,
    key_sum: u64,
}

/// Folds a key into the validation checksum (its first 8 bytes, zero padded).
#[inline]
fn key_word(key: &[u8]) -> u64 {
    if let Some(head) = key.first_chunk::<8>() {
        return u64::from_le_bytes(*head);
    }
    if let Some(head) = key.first_chunk::<4>() {
        return u64::from(u32::from_le_bytes(*head));
    }
    let mut w = [0u8; 8];
    let n = key.len().min(8);
    w[..n].copy_from_slice(&key[..n]);
    u64::from_le_bytes(w)
}

fn generate(name: &str, total_bytes: usize, block_bytes: usize) -> Result<DataSet, String> {
    let mut batches = Vec::new();
    let (name, layout): (&'static str, Layout) = match name {
        "teragen" => ("teragen-100B", Layout::TERAGEN),
        "tuple16" => ("tuple-16B", Layout::TUPLE16),
        "text" => ("text-var", Layout::Variable),
        other => return Err(format!("unknown data set {other:?}: teragen, tuple16, text")),
    };
    let mut bytes = 0usize;
    let mut row = 0u64;
    let mut text = TextGen::new(7);
    let (mut k, mut v) = (Vec::new(), Vec::new());
    let mut scratch = Vec::new();
    while bytes < total_bytes {
        let mut b = RecordBatch::with_capacity(layout, block_bytes + 4096);
        match layout.fixed_record_bytes() {
            Some(width) => {
                let n = (block_bytes / width).max(1) as u64;
                scratch.clear();
                if layout == Layout::TERAGEN {
                    teragen::fill(1, row, n, &mut scratch);
                } else {
                    tuples::fill(1, 4, 12, row, n, &mut scratch);
                }
                b.extend_fixed(&scratch).map_err(|e| e.to_string())?;
                row += n;
            }
            None => {
                while b.payload_len() < block_bytes {
                    text.next_record(&mut k, &mut v);
                    b.push(&k, &v).map_err(|e| e.to_string())?;
                }
            }
        }
        bytes += b.payload_len();
        batches.push(b);
    }
    let records = batches.iter().map(RecordBatch::len).sum();
    let key_sum = batches
        .iter()
        .flat_map(|b| b.iter())
        .fold(0u64, |acc, r| acc.wrapping_add(key_word(r.key)));
    Ok(DataSet { name, batches, records, bytes, key_sum })
}

fn encode_all(
    enc: &mut BlockEncoder,
    batches: &[RecordBatch],
    out: &mut Vec<u8>,
) -> Result<(), sluice_core::FormatError> {
    out.clear();
    for b in batches {
        enc.encode(b, out)?;
    }
    Ok(())
}

/// Decodes every block in `stream`; returns (records, key checksum).
fn decode_all(
    dec: &mut BlockDecoder,
    stream: &[u8],
) -> Result<(usize, u64), sluice_core::FormatError> {
    let mut at = 0;
    let mut records = 0;
    let mut sum = 0u64;
    while at < stream.len() {
        let block = dec.decode(&stream[at..])?;
        for r in block.records.iter() {
            sum = sum.wrapping_add(key_word(r.key));
        }
        records += block.records.len();
        at += block.frame_len;
    }
    Ok((records, sum))
}

/// Times of one measurement round.
struct Round {
    t_copy: Duration,
    t_enc: Duration,
    t_dec: Duration,
}

/// Runs the benchmark and prints its table.
pub(crate) fn run(args: &FormatArgs) -> Result<(), Box<dyn std::error::Error>> {
    let codecs: Vec<Codec> =
        args.codecs.iter().map(|c| Codec::parse(c)).collect::<Result<_, _>>()?;
    let block_bytes = args.block_kib.max(1) << 10;
    let total = args.mib.max(1) << 20;
    println!(
        "sluice bench format: {} MiB per data set, {} KiB blocks, median of {} runs",
        args.mib, args.block_kib, args.reps
    );
    let table = Table::start(&[
        ("data set", 12),
        ("codec", 7),
        ("ratio", 5),
        ("encode GB/s", 11),
        ("decode GB/s", 11),
        ("round trip GB/s", 15),
        ("memcpy GB/s", 11),
        ("enc/memcpy", 10),
        ("dec/memcpy", 10),
        ("rt/memcpy", 9),
    ]);
    let mut rows = Vec::new();
    for name in &args.datasets {
        let data = generate(name, total, block_bytes)?;
        let chunks: Vec<&[u8]> = data.batches.iter().map(RecordBatch::payload).collect();
        let mut copy_dst = vec![0u8; data.bytes];
        let mut out = Vec::with_capacity(data.bytes + data.bytes / 64 + (1 << 20));
        for &codec in &codecs {
            let mut enc = BlockEncoder::new(codec)?;
            let mut dec = BlockDecoder::new();
            let mut seen = (0, 0);
            // One warm-up round (faults the buffers in), then `reps` rounds of
            // memcpy, encode, decode back to back, so the baseline and the
            // figures beside it see the same machine state.
            let mut rounds = Vec::with_capacity(args.reps);
            for round in 0..=args.reps.max(1) {
                let t_copy = time(|| copy_all(&chunks, &mut copy_dst));
                let t_enc = try_time(|| encode_all(&mut enc, &data.batches, &mut out))?;
                let t_dec = try_time(|| {
                    seen = black_box(decode_all(&mut dec, &out)?);
                    Ok::<(), sluice_core::FormatError>(())
                })?;
                if round > 0 {
                    rounds.push(Round { t_copy, t_enc, t_dec });
                }
            }
            if seen != (data.records, data.key_sum) {
                return Err(format!(
                    "{} {codec}: decoded {} records (checksum {:#x}), expected {} ({:#x})",
                    data.name, seen.0, seen.1, data.records, data.key_sum
                )
                .into());
            }
            let median = |f: &dyn Fn(&Round) -> f64| median_of(rounds.iter().map(f).collect());
            let b = data.bytes;
            let e = median(&|r| gbps(b, r.t_enc));
            let d = median(&|r| gbps(b, r.t_dec));
            let rt = median(&|r| gbps(b, r.t_enc + r.t_dec));
            let memcpy = median(&|r| gbps(b, r.t_copy));
            let enc_ratio = median(&|r| r.t_copy.as_secs_f64() / r.t_enc.as_secs_f64());
            let dec_ratio = median(&|r| r.t_copy.as_secs_f64() / r.t_dec.as_secs_f64());
            let rt_ratio = median(&|r| r.t_copy.as_secs_f64() / (r.t_enc + r.t_dec).as_secs_f64());
            let ratio = data.bytes as f64 / out.len() as f64;
            table.row(&[
                data.name.to_string(),
                codec.label(),
                format!("{ratio:.2}"),
                format!("{e:.2}"),
                format!("{d:.2}"),
                format!("{rt:.2}"),
                format!("{memcpy:.2}"),
                format!("{enc_ratio:.2}"),
                format!("{dec_ratio:.2}"),
                format!("{rt_ratio:.2}"),
            ]);
            rows.push(json!({
                "dataset": data.name,
                "codec": codec.label(),
                "block_bytes": block_bytes,
                "records": data.records,
                "input_bytes": data.bytes,
                "stored_bytes": out.len(),
                "compression_ratio": ratio,
                "encode_gbps": e,
                "decode_gbps": d,
                "roundtrip_gbps": rt,
                "memcpy_gbps": memcpy,
                "encode_vs_memcpy": enc_ratio,
                "decode_vs_memcpy": dec_ratio,
                "roundtrip_vs_memcpy": rt_ratio,
            }));
        }
    }
    if let Some(path) = &args.json {
        write_json(
            path,
            &json!({
                "bench": "format",
                "mib": args.mib,
                "block_kib": args.block_kib,
                "reps": args.reps,
                "rows": rows,
            }),
        )?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
