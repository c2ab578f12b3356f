//! Spark's order-independent row checksum (`RowBasedChecksum`, Spark 4.1
//! and later), computed over a map attempt's engine records in the pass
//! that hands them to the engine.
//!
//! Spark's shuffle writers feed every (key, value) pair of a map task to
//! the checksum of the pair's reduce partition; the map status carries one
//! value for the attempt, and the scheduler compares the values of two
//! attempts of one map partition to find output that changed on a rerun
//! (Spark 4.2 does so by default). For Spark SQL's rows (`UnsafeRowChecksum`)
//! a row's checksum is XXH64, seed 0, of the row's bytes (the key, the
//! partition id, is ignored); a partition keeps the XOR and the wrapping
//! SUM of its rows' checksums, so the order the rows came in does not
//! matter, and its value is `xor ^ rotate_left(sum, 27)`. The Java side
//! folds the partitions' values into the attempt's (`acc * 31 + value`, in
//! partition order), as Spark's `getAggregatedChecksumValue` does.
//!
//! Here each engine record is `klen:u32le vlen:u32le key value` with the
//! key starting with the partition id (u32le) and the value being what
//! Spark's `UnsafeRowSerializer` writes for a row: its size (a big-endian
//! u32) and its bytes. Lengths come from the JVM's buffer and are checked
//! all the same: a record that does not parse is an error, never skipped.

use xxhash_rust::xxh64::xxh64;

use crate::error::{BridgeError, BridgeResult};

/// Bytes of the two lengths in front of each engine record.
const LENGTHS_BYTES: usize = 8;
/// Bytes of the partition id that starts each record's key.
const PARTITION_BYTES: usize = 4;
/// Bytes of the row size (big-endian) in front of a row's bytes.
const ROW_SIZE_BYTES: usize = 4;
/// The seed of Spark's row checksum (`UnsafeRowChecksum`).
const ROW_HASH_SEED: u64 = 0;
/// The rotation mixing a partition's SUM into its XOR (`ROTATE_POSITIONS`
/// of Spark's `RowBasedChecksum`).
pub const SUM_ROTATION_BITS: u32 = 27;

/// One map attempt's row checksums: the XOR and the SUM of the row
/// checksums of each reduce partition.
#[derive(Debug, Clone)]
pub struct RowChecksums {
    xor: Vec<u64>,
    sum: Vec<u64>,
}

impl RowChecksums {
    /// Checksums for `partitions` reduce partitions, of no rows yet.
    pub fn new(partitions: u32) -> Self {
        let n = partitions as usize;
        RowChecksums { xor: vec![0; n], sum: vec![0; n] }
    }

    /// Adds the `count` engine records in `data` (see the module doc); an
    /// error names the record that does not parse, and adds nothing of the
    /// buffer's records after it.
    pub fn add_records(&mut self, data: &[u8], count: u32) -> BridgeResult<()> {
        let mut at = 0usize;
        for record in 0..count {
            let bad = |what: String| {
                BridgeError::Argument(format!(
                    "row checksum: record {record} of {count} at byte {at} of a \
                     {}-byte buffer: {what}",
                    data.len()
                ))
            };
            let lengths = data
                .get(at..at + LENGTHS_BYTES)
                .ok_or_else(|| bad("its lengths run past the buffer".into()))?;
            let klen = u32::from_le_bytes([lengths[0], lengths[1], lengths[2], lengths[3]]);
            let vlen = u32::from_le_bytes([lengths[4], lengths[5], lengths[6], lengths[7]]);
            let key_at = at + LENGTHS_BYTES;
            let value_at = key_at + klen as usize;
            let end = value_at + vlen as usize;
            if end > data.len() {
                return Err(bad(format!("a {klen}-byte key and a {vlen}-byte value run past it")));
            }
            if (klen as usize) < PARTITION_BYTES {
                return Err(bad(format!("a {klen}-byte key has no partition id")));
            }
            let k = &data[key_at..key_at + PARTITION_BYTES];
            let partition = u32::from_le_bytes([k[0], k[1], k[2], k[3]]) as usize;
            if partition >= self.xor.len() {
                return Err(bad(format!(
                    "partition {partition} of a shuffle of {} partitions",
                    self.xor.len()
                )));
            }
            let value = &data[value_at..end];
            if value.len() < ROW_SIZE_BYTES {
                return Err(bad(format!("a {vlen}-byte value has no row size")));
            }
            let size = u32::from_be_bytes([value[0], value[1], value[2], value[3]]) as usize;
            let row = &value[ROW_SIZE_BYTES..];
            if size != row.len() {
                return Err(bad(format!(
                    "a row size of {size} bytes in a value of {} row bytes",
                    row.len()
                )));
            }
            let h = xxh64(row, ROW_HASH_SEED);
            self.xor[partition] ^= h;
            self.sum[partition] = self.sum[partition].wrapping_add(h);
            at = end;
        }
        if at != data.len() {
            return Err(BridgeError::Argument(format!(
                "row checksum: {count} records end at byte {at} of a {}-byte buffer",
                data.len()
            )));
        }
        Ok(())
    }

    /// Each partition's XOR, then each partition's SUM.
    pub fn xor_then_sum(&self) -> Vec<u64> {
        self.xor.iter().chain(&self.sum).copied().collect()
    }

    /// Partition `p`'s value as Spark's `RowBasedChecksum.getValue` gives it.
    pub fn value(&self, p: usize) -> u64 {
        self.xor[p] ^ self.sum[p].rotate_left(SUM_ROTATION_BITS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(partition: u32, sort_key: &[u8], row: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&(4 + sort_key.len() as u32).to_le_bytes());
        r.extend_from_slice(&(4 + row.len() as u32).to_le_bytes());
        r.extend_from_slice(&partition.to_le_bytes());
        r.extend_from_slice(sort_key);
        r.extend_from_slice(&(row.len() as u32).to_be_bytes());
        r.extend_from_slice(row);
        r
    }

    #[test]
    fn a_partition_s_value_does_not_depend_on_row_order_or_buffers() {
        let rows: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; 8 + (i as usize % 3) * 8]).collect();
        let mut one = RowChecksums::new(3);
        let all: Vec<u8> =
            rows.iter().enumerate().flat_map(|(i, r)| record(i as u32 % 3, b"", r)).collect();
        one.add_records(&all, rows.len() as u32).expect("parses");
        let mut other = RowChecksums::new(3);
        for (i, r) in rows.iter().enumerate().rev() {
            other.add_records(&record(i as u32 % 3, b"key", r), 1).expect("parses");
        }
        for p in 0..3 {
            assert_eq!(one.value(p), other.value(p));
        }
        assert_ne!(one.value(0), one.value(1));
    }

    #[test]
    fn a_partition_s_value_is_spark_s_formula_over_xxh64() {
        let (a, b) = (vec![1u8; 16], vec![2u8; 24]);
        let mut c = RowChecksums::new(1);
        let mut data = record(0, b"", &a);
        data.extend(record(0, b"", &b));
        c.add_records(&data, 2).expect("parses");
        let (ha, hb) = (xxh64(&a, 0), xxh64(&b, 0));
        assert_eq!(c.value(0), (ha ^ hb) ^ ha.wrapping_add(hb).rotate_left(27));
        // Two equal rows: the XOR is 0, the SUM is not.
        let mut twice = RowChecksums::new(1);
        let mut data = record(0, b"", &a);
        data.extend(record(0, b"", &a));
        twice.add_records(&data, 2).expect("parses");
        assert_ne!(twice.value(0), 0);
    }

    #[test]
    fn a_record_that_does_not_parse_is_an_error() {
        let good = record(1, b"", &[7u8; 8]);
        let mut c = RowChecksums::new(2);
        // Truncated, a partition out of range, a row size that disagrees,
        // more bytes than the records claim.
        let mut short = good.clone();
        short.pop();
        let far = record(2, b"", &[7u8; 8]);
        let mut lying = good.clone();
        lying[15] = 9;
        let mut extra = good.clone();
        extra.push(0);
        for (bytes, n) in [(&short, 1), (&far, 1), (&lying, 1), (&extra, 1), (&good, 2)] {
            let e = c.add_records(bytes, n).expect_err("does not parse").to_string();
            assert!(e.starts_with("row checksum: "), "{e}");
        }
        c.add_records(&good, 1).expect("parses");
        assert_ne!(c.value(1), 0);
    }
}
