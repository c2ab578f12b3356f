//! The messages, their kind codes and payload layouts (little-endian; a
//! string or byte run is a `u32` length, or `u16` for the application id,
//! then its bytes). `docs/wire-format.md` has the same table.

use sluice_core::format::checksum::Crc32c;

use super::error::ProtocolError;
use super::limits::{
    MAC_BYTES, MAX_APP_ID_BYTES, MAX_ERROR_MESSAGE_BYTES, MAX_FRAME_PAYLOAD_BYTES, MAX_PARTITIONS,
    MAX_SECTIONS_PER_PUSH, MAX_WINNERS_PER_READ, NONCE_BYTES,
};

/// One reduce partition's records in a pushed chunk: the records are the
/// map side's encoded blocks, opaque to the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub partition: u32,
    pub records: u64,
    pub data: Vec<u8>,
}

/// The map attempt whose output a read takes for one map index (the commit
/// authority's choice, Spark's map output tracker).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Winner {
    pub map: u32,
    pub attempt: u64,
}

/// A shuffle's reduce-side operator by the host's codes
/// (`sluice_engine::host_op`: an aggregate function and value type, or the
/// sort), for [`Message::ReadReduced`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReduceOp {
    pub function: i32,
    pub value_type: i32,
}

/// The map index a reduced read's `Data` frames name: the partition's
/// results over every winner, not one map's segment.
pub const REDUCED_MAP: u32 = u32::MAX;

/// Why a daemon refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum ErrorCode {
    /// No valid authentication: a wrong key, or a request before `Auth`.
    Unauthenticated = 1,
    /// A frame or message that did not decode.
    Malformed = 2,
    /// A shuffle this application did not register (or another's).
    UnknownShuffle = 3,
    /// A push or commit for an older generation of the shuffle.
    StaleGeneration = 4,
    /// A commit whose chunk count, acknowledgement checksum or records do
    /// not match what the daemon staged for the attempt.
    CommitMismatch = 5,
    /// A read names a map attempt that never committed here.
    MissingCommit = 6,
    /// The daemon could not store data (a full or failing disk), or keep
    /// the bookkeeping of a commit or a registration within its budget.
    Storage = 7,
    /// The daemon is shutting down and takes no new work.
    ShuttingDown = 8,
    /// A request that is well formed but invalid (a partition out of
    /// range, a second registration with other partitions).
    BadRequest = 9,
    /// Stored data failed its checksum.
    Corrupt = 10,
    /// The daemon serves as many connections as it may: the answer instead
    /// of a challenge to one over its limit, which it then closes. Try
    /// again later (the client waits and retries for a bounded time). Also
    /// the answer to a request other than a push that waited the daemon's
    /// frame wait (`FRAME_WAIT_TIMEOUT`) for room in its frame memory; its
    /// connection stays open.
    Busy = 11,
    /// A commit of a map attempt after a read here named another attempt
    /// of that map as its winner: this one's data would never be read, so
    /// it is not taken (under Spark the map task keeps its output on its
    /// executor, and its map status names the executor).
    Superseded = 12,
}

impl ErrorCode {
    /// Whether the refusal is of one request for what it names (an attempt,
    /// a shuffle, an argument) by a daemon that serves others: a client
    /// keeps sending it other work. The rest (a full disk, a shutdown, a key
    /// it does not take, a frame it could not read, stored data it found
    /// corrupt, no free connection, a newer generation) say something of the
    /// daemon or of the connection, or have their own handling.
    pub fn is_about_the_request(self) -> bool {
        use ErrorCode::*;
        matches!(self, UnknownShuffle | CommitMismatch | MissingCommit | BadRequest | Superseded)
    }

    fn from_u16(v: u16) -> Option<ErrorCode> {
        use ErrorCode::*;
        [
            Unauthenticated,
            Malformed,
            UnknownShuffle,
            StaleGeneration,
            CommitMismatch,
            MissingCommit,
            Storage,
            ShuttingDown,
            BadRequest,
            Corrupt,
            Busy,
            Superseded,
        ]
        .into_iter()
        .find(|c| *c as u16 == v)
    }
}

/// A service message. The kind codes are the `KIND_*` constants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Daemon to client, first on every connection.
    Challenge { nonce: [u8; NONCE_BYTES] },
    /// The client's answer: `proof` is `auth::proof` of the handshake (both
    /// nonces, the daemon's address, the app, `lease_ms` and `lease_only`);
    /// `challenge` is the client's own fresh nonce, for the daemon to answer;
    /// `lease_only` asks for one of the slots a daemon keeps for leases'
    /// connections, which send only `Renew`.
    Auth {
        app: String,
        lease_ms: u64,
        proof: [u8; MAC_BYTES],
        challenge: [u8; NONCE_BYTES],
        lease_only: bool,
    },
    /// Authenticated; the application's lease, as granted, and the daemon's
    /// answer to the client's challenge (`auth::daemon_proof`).
    Welcome { lease_ms: u64, proof: [u8; MAC_BYTES] },
    /// Registers generation `generation` of a shuffle (a newer generation
    /// drops the older one's data).
    RegisterShuffle { shuffle: u32, generation: u32, partitions: u32 },
    /// A request done.
    Ok,
    /// One chunk of a map attempt's output for this daemon's partitions.
    Push { shuffle: u32, generation: u32, map: u32, attempt: u64, seq: u32, sections: Vec<Section> },
    /// The chunk is staged; `crc` is the push frame's CRC32C.
    PushAck { seq: u32, crc: u32 },
    /// The attempt is done: `chunks` chunks (sequence numbers `0..chunks`),
    /// `acks_crc` is [`acks_checksum`] over their acknowledgements.
    Commit {
        shuffle: u32,
        generation: u32,
        map: u32,
        attempt: u64,
        chunks: u32,
        acks_crc: u32,
        records: u64,
    },
    /// Committed; `first` when no other attempt of the map index had.
    Committed { first: bool },
    /// Reduce partitions `start..end` as one stream, each map index's data
    /// from the attempt `winners` names, less its first `skip` blocks: a
    /// read resumed after its connection broke names the blocks it took
    /// (the same partitions and winners give the same blocks in the same
    /// order).
    Read { shuffle: u32, generation: u32, start: u32, end: u32, skip: u64, winners: Vec<Winner> },
    /// A read whose partitions the daemon runs the shuffle's reduce-side
    /// operator over first (`op`: an aggregate's final table, a sort's
    /// merge), each partition's results coming out as one segment of
    /// [`REDUCED_MAP`].
    ReadReduced {
        shuffle: u32,
        generation: u32,
        start: u32,
        end: u32,
        op: ReduceOp,
        winners: Vec<Winner>,
    },
    /// One stored block of the stream.
    Data { partition: u32, map: u32, records: u64, data: Vec<u8> },
    /// The stream's end, with its totals.
    End { blocks: u64, records: u64, bytes: u64 },
    /// Deletes a shuffle's data.
    Unregister { shuffle: u32 },
    /// Drops what a map attempt that will not commit staged (answered
    /// `Ok`, also when it staged nothing here); a committed attempt is
    /// refused.
    DropAttempt { shuffle: u32, generation: u32, map: u32, attempt: u64 },
    /// Extends the application's lease.
    Renew,
    /// Deletes all of the application's data.
    EndApplication,
    /// A refused request.
    Error { code: ErrorCode, message: String },
    /// Flow control: the daemon holds its memory budget; retry the push.
    SlowDown { retry_after_ms: u32 },
    /// Asks the daemon for its byte accounting.
    Stats,
    /// The daemon's own accounting (not the allocator's) and its work since
    /// it started.
    StatsReply(DaemonStats),
}

/// A daemon's byte accounting and the work it has done since it started,
/// summed over every application: what an operator or a benchmark reads
/// (`sluice stats`). The counts only grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DaemonStats {
    /// Bytes the store holds now: staged chunks and partition blocks in
    /// memory, and the bookkeeping below.
    pub held_bytes: u64,
    /// The most `held_bytes` has been.
    pub peak_bytes: u64,
    /// Bytes written to spill files.
    pub spilled_bytes: u64,
    /// The memory budget.
    pub budget_bytes: u64,
    /// Chunks staged (a repeated chunk counted once).
    pub chunks: u64,
    /// Map attempts committed (a repeated commit counted once).
    pub commits: u64,
    /// Reads served: one stream per request, whatever its partitions.
    pub reads: u64,
    /// Of those, reads whose partitions the daemon ran the reduce-side
    /// operator over ([`Message::ReadReduced`]).
    pub reduced_reads: u64,
    /// Records those reads took in (the winners' records) and handed out
    /// (the operator's results).
    pub reduced_in: u64,
    pub reduced_out: u64,
    /// The most connections served at once.
    pub peak_connections: u64,
    /// Connections refused over the limit ([`ErrorCode::Busy`]).
    pub busy_refusals: u64,
    /// The most bytes frames in flight held at once (`--frame-memory`).
    pub frames_peak_bytes: u64,
    /// Pushes answered [`Message::SlowDown`] because frames in flight held
    /// all of `--frame-memory`.
    pub frames_slow_downs: u64,
    /// Of `held_bytes`, the bookkeeping of what the store keeps (sections,
    /// blocks, shuffles, commits; `ENTRY_BYTES` each), in memory or not.
    pub bookkeeping_bytes: u64,
}

impl DaemonStats {
    /// The fields in wire order.
    fn fields(&self) -> [u64; 15] {
        [
            self.held_bytes,
            self.peak_bytes,
            self.spilled_bytes,
            self.budget_bytes,
            self.chunks,
            self.commits,
            self.reads,
            self.reduced_reads,
            self.reduced_in,
            self.reduced_out,
            self.peak_connections,
            self.busy_refusals,
            self.frames_peak_bytes,
            self.frames_slow_downs,
            self.bookkeeping_bytes,
        ]
    }
}

/// Kind codes, one per message.
pub mod kind {
    pub const CHALLENGE: u8 = 1;
    pub const AUTH: u8 = 2;
    pub const WELCOME: u8 = 3;
    pub const REGISTER_SHUFFLE: u8 = 4;
    pub const OK: u8 = 5;
    pub const PUSH: u8 = 6;
    pub const PUSH_ACK: u8 = 7;
    pub const COMMIT: u8 = 8;
    pub const COMMITTED: u8 = 9;
    pub const READ: u8 = 10;
    pub const DATA: u8 = 11;
    pub const END: u8 = 12;
    pub const UNREGISTER: u8 = 13;
    pub const RENEW: u8 = 14;
    pub const END_APPLICATION: u8 = 15;
    pub const ERROR: u8 = 16;
    pub const SLOW_DOWN: u8 = 17;
    pub const STATS: u8 = 18;
    pub const STATS_REPLY: u8 = 19;
    pub const READ_REDUCED: u8 = 20;
    pub const DROP_ATTEMPT: u8 = 21;
    /// The highest kind code.
    pub const LAST: u8 = DROP_ATTEMPT;
}

/// CRC32C over the acknowledgements of chunks `0..n` in order, each as
/// its sequence number and CRC (little-endian `u32`s): what a commit
/// proves it saw acknowledged.
pub fn acks_checksum(acks: impl IntoIterator<Item = (u32, u32)>) -> u32 {
    let mut c = Crc32c::new();
    for (seq, crc) in acks {
        c.update(&seq.to_le_bytes());
        c.update(&crc.to_le_bytes());
    }
    c.value()
}

fn encode_winners(out: &mut Vec<u8>, winners: &[Winner]) {
    for w in winners {
        out.extend_from_slice(&w.map.to_le_bytes());
        out.extend_from_slice(&w.attempt.to_le_bytes());
    }
}

impl Message {
    /// The kind code.
    pub fn kind(&self) -> u8 {
        match self {
            Message::Challenge { .. } => kind::CHALLENGE,
            Message::Auth { .. } => kind::AUTH,
            Message::Welcome { .. } => kind::WELCOME,
            Message::RegisterShuffle { .. } => kind::REGISTER_SHUFFLE,
            Message::Ok => kind::OK,
            Message::Push { .. } => kind::PUSH,
            Message::PushAck { .. } => kind::PUSH_ACK,
            Message::Commit { .. } => kind::COMMIT,
            Message::Committed { .. } => kind::COMMITTED,
            Message::Read { .. } => kind::READ,
            Message::Data { .. } => kind::DATA,
            Message::End { .. } => kind::END,
            Message::Unregister { .. } => kind::UNREGISTER,
            Message::Renew => kind::RENEW,
            Message::EndApplication => kind::END_APPLICATION,
            Message::Error { .. } => kind::ERROR,
            Message::SlowDown { .. } => kind::SLOW_DOWN,
            Message::Stats => kind::STATS,
            Message::StatsReply(_) => kind::STATS_REPLY,
            Message::ReadReduced { .. } => kind::READ_REDUCED,
            Message::DropAttempt { .. } => kind::DROP_ATTEMPT,
        }
    }

    /// The payload bytes of a request of `kind` whose payload has one size
    /// (no list, no string): a header that says otherwise is malformed
    /// before anything is read or taken for it. `None` for every other kind.
    pub fn fixed_request_bytes(kind: u8) -> Option<u32> {
        let sample = match kind {
            kind::REGISTER_SHUFFLE => {
                Message::RegisterShuffle { shuffle: 0, generation: 0, partitions: 1 }
            }
            kind::COMMIT => Message::Commit {
                shuffle: 0,
                generation: 0,
                map: 0,
                attempt: 0,
                chunks: 0,
                acks_crc: 0,
                records: 0,
            },
            kind::UNREGISTER => Message::Unregister { shuffle: 0 },
            kind::RENEW => Message::Renew,
            kind::END_APPLICATION => Message::EndApplication,
            kind::STATS => Message::Stats,
            kind::DROP_ATTEMPT => {
                Message::DropAttempt { shuffle: 0, generation: 0, map: 0, attempt: 0 }
            }
            _ => return None,
        };
        let mut payload = Vec::new();
        sample.encode_payload(&mut payload);
        Some(payload.len() as u32)
    }

    /// The kind's name, for errors and logs.
    pub fn kind_name(kind: u8) -> &'static str {
        [
            "?",
            "Challenge",
            "Auth",
            "Welcome",
            "RegisterShuffle",
            "Ok",
            "Push",
            "PushAck",
            "Commit",
            "Committed",
            "Read",
            "Data",
            "End",
            "Unregister",
            "Renew",
            "EndApplication",
            "Error",
            "SlowDown",
            "Stats",
            "StatsReply",
            "ReadReduced",
            "DropAttempt",
        ]
        .get(usize::from(kind))
        .copied()
        .unwrap_or("?")
    }

    /// Appends the payload to `out`.
    pub fn encode_payload(&self, out: &mut Vec<u8>) {
        let u32s = |out: &mut Vec<u8>, vs: &[u32]| {
            vs.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()))
        };
        match self {
            Message::Challenge { nonce } => out.extend_from_slice(nonce),
            Message::Auth { app, lease_ms, proof, challenge, lease_only } => {
                out.extend_from_slice(&(app.len() as u16).to_le_bytes());
                out.extend_from_slice(app.as_bytes());
                out.extend_from_slice(&lease_ms.to_le_bytes());
                out.extend_from_slice(proof);
                out.extend_from_slice(challenge);
                out.push(u8::from(*lease_only));
            }
            Message::Welcome { lease_ms, proof } => {
                out.extend_from_slice(&lease_ms.to_le_bytes());
                out.extend_from_slice(proof);
            }
            Message::RegisterShuffle { shuffle, generation, partitions } => {
                u32s(out, &[*shuffle, *generation, *partitions]);
            }
            Message::Ok | Message::Renew | Message::EndApplication | Message::Stats => {}
            Message::Push { shuffle, generation, map, attempt, seq, sections } => {
                u32s(out, &[*shuffle, *generation, *map]);
                out.extend_from_slice(&attempt.to_le_bytes());
                u32s(out, &[*seq, sections.len() as u32]);
                for s in sections {
                    out.extend_from_slice(&s.partition.to_le_bytes());
                    out.extend_from_slice(&s.records.to_le_bytes());
                    out.extend_from_slice(&(s.data.len() as u32).to_le_bytes());
                    out.extend_from_slice(&s.data);
                }
            }
            Message::PushAck { seq, crc } => u32s(out, &[*seq, *crc]),
            Message::Commit { shuffle, generation, map, attempt, chunks, acks_crc, records } => {
                u32s(out, &[*shuffle, *generation, *map]);
                out.extend_from_slice(&attempt.to_le_bytes());
                u32s(out, &[*chunks, *acks_crc]);
                out.extend_from_slice(&records.to_le_bytes());
            }
            Message::Committed { first } => out.push(u8::from(*first)),
            Message::Read { shuffle, generation, start, end, skip, winners } => {
                u32s(out, &[*shuffle, *generation, *start, *end]);
                out.extend_from_slice(&skip.to_le_bytes());
                u32s(out, &[winners.len() as u32]);
                encode_winners(out, winners);
            }
            Message::ReadReduced { shuffle, generation, start, end, op, winners } => {
                u32s(out, &[*shuffle, *generation, *start, *end]);
                out.extend_from_slice(&op.function.to_le_bytes());
                out.extend_from_slice(&op.value_type.to_le_bytes());
                u32s(out, &[winners.len() as u32]);
                encode_winners(out, winners);
            }
            Message::Data { partition, map, records, data } => {
                u32s(out, &[*partition, *map]);
                out.extend_from_slice(&records.to_le_bytes());
                out.extend_from_slice(&(data.len() as u32).to_le_bytes());
                out.extend_from_slice(data);
            }
            Message::End { blocks, records, bytes } => {
                for v in [blocks, records, bytes] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            Message::Unregister { shuffle } => u32s(out, &[*shuffle]),
            Message::DropAttempt { shuffle, generation, map, attempt } => {
                u32s(out, &[*shuffle, *generation, *map]);
                out.extend_from_slice(&attempt.to_le_bytes());
            }
            Message::Error { code, message } => {
                let mut end = message.len().min(MAX_ERROR_MESSAGE_BYTES);
                while !message.is_char_boundary(end) {
                    end -= 1;
                }
                out.extend_from_slice(&(*code as u16).to_le_bytes());
                out.extend_from_slice(&(end as u32).to_le_bytes());
                out.extend_from_slice(&message.as_bytes()[..end]);
            }
            Message::SlowDown { retry_after_ms } => u32s(out, &[*retry_after_ms]),
            Message::StatsReply(stats) => {
                for v in stats.fields() {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
    }

    /// Decodes the payload of a frame of kind `kind` (frame `frame` of its
    /// connection). Every count and length is checked against its limit
    /// and against the bytes left before anything is allocated for it.
    pub fn decode(kind: u8, payload: &[u8], frame: u64) -> Result<Message, ProtocolError> {
        let mut r = Cursor { buf: payload, at: 0, frame, kind: Message::kind_name(kind) };
        let m = match kind {
            kind::CHALLENGE => Message::Challenge { nonce: r.array("nonce")? },
            kind::AUTH => {
                let len = usize::from(r.u16("application id length")?);
                r.limit("application id", len as u64, MAX_APP_ID_BYTES as u64)?;
                let app = r.string(len, "application id")?;
                let (lease_ms, proof, challenge) =
                    (r.u64("lease")?, r.array("proof")?, r.array("challenge")?);
                let lease_only = match r.u8("lease only")? {
                    v @ 0..=1 => v == 1,
                    v => return Err(r.range("lease only", u64::from(v))),
                };
                Message::Auth { app, lease_ms, proof, challenge, lease_only }
            }
            kind::WELCOME => {
                Message::Welcome { lease_ms: r.u64("lease")?, proof: r.array("proof")? }
            }
            kind::REGISTER_SHUFFLE => {
                let (shuffle, generation) = (r.u32("shuffle")?, r.u32("generation")?);
                let partitions = r.u32("partitions")?;
                if partitions == 0 || partitions > MAX_PARTITIONS {
                    return Err(r.range("partitions", u64::from(partitions)));
                }
                Message::RegisterShuffle { shuffle, generation, partitions }
            }
            kind::OK => Message::Ok,
            kind::PUSH => {
                let (shuffle, generation, map) =
                    (r.u32("shuffle")?, r.u32("generation")?, r.u32("map")?);
                let (attempt, seq) = (r.u64("attempt")?, r.u32("sequence number")?);
                let n = r.u32("section count")?;
                r.limit("section count", u64::from(n), u64::from(MAX_SECTIONS_PER_PUSH))?;
                // A section takes at least 16 bytes; a count the payload
                // cannot hold is refused before the vector is sized by it.
                r.need(n as usize * 16, "sections")?;
                let mut sections = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let (partition, records) = (r.u32("partition")?, r.u64("records")?);
                    let len = r.u32("section length")? as usize;
                    sections.push(Section {
                        partition,
                        records,
                        data: r.bytes(len, "section data")?.to_vec(),
                    });
                }
                Message::Push { shuffle, generation, map, attempt, seq, sections }
            }
            kind::PUSH_ACK => {
                Message::PushAck { seq: r.u32("sequence number")?, crc: r.u32("crc")? }
            }
            kind::COMMIT => Message::Commit {
                shuffle: r.u32("shuffle")?,
                generation: r.u32("generation")?,
                map: r.u32("map")?,
                attempt: r.u64("attempt")?,
                chunks: r.u32("chunks")?,
                acks_crc: r.u32("acknowledgement checksum")?,
                records: r.u64("records")?,
            },
            kind::COMMITTED => match r.u8("first")? {
                v @ 0..=1 => Message::Committed { first: v == 1 },
                v => return Err(r.range("first", u64::from(v))),
            },
            kind::READ => {
                let (shuffle, generation, start, end) = r.read_range()?;
                let skip = r.u64("skip")?;
                let winners = r.winners()?;
                Message::Read { shuffle, generation, start, end, skip, winners }
            }
            kind::READ_REDUCED => {
                let (shuffle, generation, start, end) = r.read_range()?;
                let op =
                    ReduceOp { function: r.i32("function")?, value_type: r.i32("value type")? };
                let winners = r.winners()?;
                Message::ReadReduced { shuffle, generation, start, end, op, winners }
            }
            kind::DATA => {
                let (partition, map, records) =
                    (r.u32("partition")?, r.u32("map")?, r.u64("records")?);
                let len = r.u32("data length")? as usize;
                Message::Data { partition, map, records, data: r.bytes(len, "data")?.to_vec() }
            }
            kind::END => Message::End {
                blocks: r.u64("blocks")?,
                records: r.u64("records")?,
                bytes: r.u64("bytes")?,
            },
            kind::UNREGISTER => Message::Unregister { shuffle: r.u32("shuffle")? },
            kind::DROP_ATTEMPT => Message::DropAttempt {
                shuffle: r.u32("shuffle")?,
                generation: r.u32("generation")?,
                map: r.u32("map")?,
                attempt: r.u64("attempt")?,
            },
            kind::RENEW => Message::Renew,
            kind::END_APPLICATION => Message::EndApplication,
            kind::ERROR => {
                let code = r.u16("error code")?;
                let code = ErrorCode::from_u16(code)
                    .ok_or_else(|| r.range("error code", u64::from(code)))?;
                let len = r.u32("message length")? as usize;
                r.limit("error message", len as u64, MAX_ERROR_MESSAGE_BYTES as u64)?;
                Message::Error { code, message: r.string(len, "error message")? }
            }
            kind::SLOW_DOWN => Message::SlowDown { retry_after_ms: r.u32("retry after")? },
            kind::STATS => Message::Stats,
            kind::STATS_REPLY => Message::StatsReply(DaemonStats {
                held_bytes: r.u64("held bytes")?,
                peak_bytes: r.u64("peak bytes")?,
                spilled_bytes: r.u64("spilled bytes")?,
                budget_bytes: r.u64("budget bytes")?,
                chunks: r.u64("chunks")?,
                commits: r.u64("commits")?,
                reads: r.u64("reads")?,
                reduced_reads: r.u64("reduced reads")?,
                reduced_in: r.u64("reduced records in")?,
                reduced_out: r.u64("reduced records out")?,
                peak_connections: r.u64("peak connections")?,
                busy_refusals: r.u64("busy refusals")?,
                frames_peak_bytes: r.u64("frames' peak bytes")?,
                frames_slow_downs: r.u64("frames' slow-downs")?,
                bookkeeping_bytes: r.u64("bookkeeping bytes")?,
            }),
            other => return Err(ProtocolError::UnknownKind { frame, kind: other }),
        };
        r.finish()?;
        Ok(m)
    }
}

/// A bounds-checked reader over one payload.
struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
    frame: u64,
    kind: &'static str,
}

impl<'a> Cursor<'a> {
    fn need(&self, n: usize, what: &'static str) -> Result<(), ProtocolError> {
        if self.buf.len() - self.at < n {
            return Err(ProtocolError::ShortPayload {
                frame: self.frame,
                kind: self.kind,
                what,
                at: self.buf.len(),
                needed: n - (self.buf.len() - self.at),
            });
        }
        Ok(())
    }

    fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ProtocolError> {
        self.need(n, what)?;
        let s = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], ProtocolError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N, what)?);
        Ok(a)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, ProtocolError> {
        Ok(self.array::<1>(what)?[0])
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, ProtocolError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, ProtocolError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, ProtocolError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn i32(&mut self, what: &'static str) -> Result<i32, ProtocolError> {
        Ok(i32::from_le_bytes(self.array(what)?))
    }

    /// A read's shuffle, generation and partition range.
    fn read_range(&mut self) -> Result<(u32, u32, u32, u32), ProtocolError> {
        let (shuffle, generation) = (self.u32("shuffle")?, self.u32("generation")?);
        let (start, end) = (self.u32("start")?, self.u32("end")?);
        if start > end || end > MAX_PARTITIONS {
            return Err(self.range("partition range end", u64::from(end)));
        }
        Ok((shuffle, generation, start, end))
    }

    /// A read's winners: a count, then (map, attempt) each.
    fn winners(&mut self) -> Result<Vec<Winner>, ProtocolError> {
        let n = self.u32("winner count")?;
        self.limit("winner count", u64::from(n), u64::from(MAX_WINNERS_PER_READ))?;
        self.need(n as usize * 12, "winners")?;
        let mut winners = Vec::with_capacity(n as usize);
        for _ in 0..n {
            winners.push(Winner { map: self.u32("map")?, attempt: self.u64("attempt")? });
        }
        Ok(winners)
    }

    fn string(&mut self, n: usize, what: &'static str) -> Result<String, ProtocolError> {
        let (frame, kind) = (self.frame, self.kind);
        let b = self.bytes(n, what)?;
        std::str::from_utf8(b).map(str::to_owned).map_err(|_| ProtocolError::NotUtf8 {
            frame,
            kind,
            what,
        })
    }

    fn limit(&self, what: &'static str, len: u64, limit: u64) -> Result<(), ProtocolError> {
        if len > limit {
            return Err(ProtocolError::TooLong { frame: self.frame, what, len, limit });
        }
        Ok(())
    }

    fn range(&self, what: &'static str, value: u64) -> ProtocolError {
        ProtocolError::OutOfRange { frame: self.frame, kind: self.kind, what, value }
    }

    fn finish(&self) -> Result<(), ProtocolError> {
        if self.at != self.buf.len() {
            return Err(ProtocolError::TrailingBytes {
                frame: self.frame,
                kind: self.kind,
                extra: self.buf.len() - self.at,
            });
        }
        Ok(())
    }
}

const _: () = assert!(MAX_FRAME_PAYLOAD_BYTES as usize > super::limits::PUSH_CHUNK_BYTES * 2);
