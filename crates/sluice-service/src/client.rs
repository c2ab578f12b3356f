//! The client side: a connection to one daemon (authenticate both ways,
//! register, push, commit, read), and [`AttemptPusher`], which gathers a map
//! attempt's records per reduce partition into chunks of about
//! [`PUSH_CHUNK_BYTES`], pushes them while the map still runs, and commits
//! with the proof of what was acknowledged. A pusher keeps up to
//! [`PUSH_WINDOW`] chunks unacknowledged (the daemon answers a connection's
//! frames in order), so a chunk crosses the network while the daemon
//! stages the one before; a chunk slowed down is sent again after the wait.
//!
//! Every wait is bounded: connecting by [`CONNECT_TIMEOUT`], each reply by
//! [`REPLY_TIMEOUT`] (a reduced read's next frame by
//! [`REDUCED_READ_TIMEOUT`]), a push the daemon slows down is retried at most
//! [`MAX_SLOW_DOWNS`] times before it fails, and a daemon that answers a
//! new connection busy (it serves its limit) is tried again for at most
//! [`BUSY_WAIT`], the waits between tries doubling from
//! [`BUSY_RETRY_FIRST`] to [`BUSY_RETRY_MAX`], each drawn at random
//! between half and all of that so that clients turned away together do
//! not come back together.

use std::collections::{BTreeMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

use crate::auth::{self, Key};
use crate::protocol::limits::{MAX_WINNERS_PER_READ, PUSH_CHUNK_BYTES};
use crate::protocol::{
    acks_checksum, frame, DaemonStats, ErrorCode, Message, ProtocolError, ReduceOp, Section, Winner,
};

/// How long connecting to a daemon may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a reply (or the next frame of a read) may take.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(120);

/// How long the next frame of a reduced read may take: the daemon runs a
/// partition's reduce-side operator over all of its input (spilling, and
/// merging its runs back, where it runs short of memory) before it sends
/// the partition's first block, and a partition of tens of gigabytes takes
/// minutes. As long as the daemon waits on a reader
/// ([`STREAM_STALL_TIMEOUT`](crate::daemon::STREAM_STALL_TIMEOUT)); a
/// plain read's blocks are sent as they are found, within [`REPLY_TIMEOUT`].
pub const REDUCED_READ_TIMEOUT: Duration = crate::daemon::STREAM_STALL_TIMEOUT;

/// How many slow-down answers one push takes before it fails.
pub const MAX_SLOW_DOWNS: u32 = 500;

/// How long connecting keeps trying a daemon that answers busy.
pub const BUSY_WAIT: Duration = Duration::from_secs(30);

/// The first wait after a busy answer.
pub const BUSY_RETRY_FIRST: Duration = Duration::from_millis(50);

/// The longest wait between two tries of a busy daemon.
pub const BUSY_RETRY_MAX: Duration = Duration::from_secs(2);

/// Chunks an [`AttemptPusher`] sends before it waits for the oldest one's
/// acknowledgement (at most this many chunks' frames held per pusher).
pub const PUSH_WINDOW: usize = 4;

/// What went wrong talking to a daemon.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connecting to {addr}: {source}")]
    Connect { addr: SocketAddr, source: std::io::Error },
    #[error("connecting to {addr}: no answer within {}s", CONNECT_TIMEOUT.as_secs())]
    ConnectTimeout { addr: SocketAddr },
    #[error("daemon {addr}: {source}")]
    Protocol { addr: SocketAddr, source: ProtocolError },
    #[error("daemon {addr} refused ({code:?}): {message}")]
    Refused { addr: SocketAddr, code: ErrorCode, message: String },
    #[error(
        "{addr} welcomed the application without proving it holds the node secret: \
         not a daemon of this cluster"
    )]
    Impostor { addr: SocketAddr },
    #[error("daemon {addr} closed the connection while {what}")]
    Closed { addr: SocketAddr, what: &'static str },
    #[error("daemon {addr} answered {got} while {what}")]
    Unexpected { addr: SocketAddr, what: &'static str, got: &'static str },
    #[error("daemon {addr}: a push was slowed down {MAX_SLOW_DOWNS} times")]
    TooSlow { addr: SocketAddr },
    #[error("daemon {addr}: a read's end says {what} {said}, the stream carried {counted}")]
    StreamMismatch { addr: SocketAddr, what: &'static str, said: u64, counted: u64 },
    #[error("a read names {maps} map outputs, at most {limit} fit one request")]
    TooManyMaps { maps: usize, limit: u32 },
    #[error("daemon {addr}: chunk {seq} acknowledged with CRC {got:#010x}, sent {sent:#010x}")]
    BadAck { addr: SocketAddr, seq: u32, sent: u32, got: u32 },
}

impl ClientError {
    /// The daemon's refusal code, if it refused.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether the connection ended under a read (closed, cut inside a
    /// frame, reset): what a daemon does to a reader that left its stream
    /// waiting past the daemon's stall limit, and what a daemon that died
    /// does. Such a read may be resumed on a new connection
    /// ([`ReadMode::Plain`]'s `skip`): a live daemon serves the rest, a dead one
    /// cannot be reached. A timeout, a corrupt frame or a refusal is not
    /// this.
    pub fn connection_ended(&self) -> bool {
        use std::io::ErrorKind;
        match self {
            ClientError::Closed { .. } => true,
            ClientError::Protocol { source: ProtocolError::Truncated { .. }, .. } => true,
            ClientError::Protocol { source: ProtocolError::Io(e), .. } => matches!(
                e.kind(),
                ErrorKind::ConnectionReset
                    | ErrorKind::ConnectionAborted
                    | ErrorKind::BrokenPipe
                    | ErrorKind::UnexpectedEof
            ),
            _ => false,
        }
    }
}

/// One stored block of a read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub partition: u32,
    pub map: u32,
    pub records: u64,
    pub data: Vec<u8>,
}

/// What a read asks the daemon to send ([`Client::read_start`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMode {
    /// The winners' stored blocks ([`Message::Read`]), after the first
    /// `skip`: 0 for a new read, the blocks already taken for one resumed
    /// on a new connection after its connection broke (the end's totals
    /// then count only the blocks sent).
    Plain { skip: u64 },
    /// The results of the reduce-side operator the daemon runs over each
    /// partition ([`Message::ReadReduced`]): each partition comes as one
    /// segment of map [`REDUCED_MAP`](crate::protocol::REDUCED_MAP). Never
    /// resumed: the results are computed anew for each request.
    Reduced(ReduceOp),
}

/// An authenticated connection to one daemon.
#[derive(Debug)]
pub struct Client {
    addr: SocketAddr,
    rd: BufReader<OwnedReadHalf>,
    wr: BufWriter<OwnedWriteHalf>,
    frames: u64,
    lease: Duration,
    reading: Option<ReadState>,
    /// Pushes sent whose answers have not been read yet.
    unanswered: usize,
    /// A request failed on this connection: its stream may be anywhere.
    broken: bool,
}

/// Between half and all of `wait`, at random.
fn jittered(wait: Duration) -> Duration {
    let r = std::collections::hash_map::RandomState::new().build_hasher().finish();
    wait / 2 + wait.mul_f64((r >> 11) as f64 / (1u64 << 53) as f64 / 2.0)
}

impl Client {
    /// Connects and authenticates as `app` with its key, asking for `lease`;
    /// a daemon that answers busy is tried again for [`BUSY_WAIT`].
    pub async fn connect(
        addr: SocketAddr,
        app: &str,
        key: &Key,
        lease: Duration,
    ) -> Result<Client, ClientError> {
        Client::connect_within(addr, app, key, lease, BUSY_WAIT).await
    }

    /// As [`Client::connect`], trying a busy daemon again for `busy_wait`
    /// (zero: once); past it, the busy answer is the error.
    pub async fn connect_within(
        addr: SocketAddr,
        app: &str,
        key: &Key,
        lease: Duration,
        busy_wait: Duration,
    ) -> Result<Client, ClientError> {
        Client::connecting(addr, app, key, lease, busy_wait, false).await
    }

    /// As [`Client::connect_within`], for a connection that only renews the
    /// lease ([`Client::renew`]; the daemon refuses anything else on it):
    /// it takes one of the slots a daemon keeps for leases' connections, so
    /// that tasks filling the daemon do not keep it out, nor it them.
    pub async fn connect_lease(
        addr: SocketAddr,
        app: &str,
        key: &Key,
        lease: Duration,
        busy_wait: Duration,
    ) -> Result<Client, ClientError> {
        Client::connecting(addr, app, key, lease, busy_wait, true).await
    }

    async fn connecting(
        addr: SocketAddr,
        app: &str,
        key: &Key,
        lease: Duration,
        busy_wait: Duration,
        lease_only: bool,
    ) -> Result<Client, ClientError> {
        // No deadline past what an Instant can hold: waits as long as asked.
        let deadline = Instant::now().checked_add(busy_wait);
        let mut wait = BUSY_RETRY_FIRST;
        loop {
            let r = Client::connect_once(addr, app, key, lease, lease_only).await;
            let left =
                deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(Instant::now()));
            match r {
                Err(e) if e.code() == Some(ErrorCode::Busy) && !left.is_zero() => {
                    let pause = jittered(wait).min(left);
                    tokio::time::sleep(pause).await;
                    wait = (wait * 2).min(BUSY_RETRY_MAX);
                }
                r => return r,
            }
        }
    }

    async fn connect_once(
        addr: SocketAddr,
        app: &str,
        key: &Key,
        lease: Duration,
        lease_only: bool,
    ) -> Result<Client, ClientError> {
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| ClientError::ConnectTimeout { addr })?
            .map_err(|source| ClientError::Connect { addr, source })?;
        let _ = stream.set_nodelay(true);
        let (rd, wr) = stream.into_split();
        let mut c = Client {
            addr,
            rd: BufReader::new(rd),
            wr: BufWriter::new(wr),
            frames: 0,
            lease,
            reading: None,
            unanswered: 0,
            broken: false,
        };
        let nonce = match c.recv("waiting for the challenge").await? {
            Message::Challenge { nonce } => nonce,
            other => return Err(c.unexpected("waiting for the challenge", &other)),
        };
        let challenge = auth::nonce().map_err(|source| ClientError::Connect { addr, source })?;
        let nonces = auth::Nonces { daemon: nonce, client: challenge };
        let lease_ms = lease.as_millis() as u64;
        let handshake = auth::Handshake { nonces, daemon: addr, app, lease_ms, lease_only };
        let proof = auth::proof(key, &handshake);
        let auth = Message::Auth { app: app.to_owned(), lease_ms, proof, challenge, lease_only };
        match c.call(&auth, "authenticating").await? {
            Message::Welcome { lease_ms, proof }
                if auth::verify_daemon(key, &nonces, addr, app, &proof) =>
            {
                c.lease = Duration::from_millis(lease_ms)
            }
            Message::Welcome { .. } => return Err(ClientError::Impostor { addr }),
            other => return Err(c.unexpected("authenticating", &other)),
        }
        Ok(c)
    }

    /// The daemon's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The lease the daemon granted.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    fn unexpected(&self, what: &'static str, got: &Message) -> ClientError {
        match got {
            Message::Error { code, message } => {
                ClientError::Refused { addr: self.addr, code: *code, message: message.clone() }
            }
            other => ClientError::Unexpected {
                addr: self.addr,
                what,
                got: Message::kind_name(other.kind()),
            },
        }
    }

    async fn send_frame(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        let addr = self.addr;
        let io = |e: std::io::Error| ClientError::Protocol { addr, source: ProtocolError::Io(e) };
        let r = tokio::time::timeout(frame::FRAME_BODY_TIMEOUT, async {
            self.wr.write_all(bytes).await?;
            self.wr.flush().await
        })
        .await
        .map_err(|_| ClientError::Protocol {
            addr,
            source: ProtocolError::Timeout {
                what: "a frame's write",
                after_ms: frame::FRAME_BODY_TIMEOUT.as_millis() as u64,
            },
        })
        .and_then(|r| r.map_err(io));
        if r.is_err() {
            self.broken = true;
        }
        r
    }

    async fn recv(&mut self, what: &'static str) -> Result<Message, ClientError> {
        self.recv_within(what, REPLY_TIMEOUT).await
    }

    async fn recv_within(
        &mut self,
        what: &'static str,
        wait: Duration,
    ) -> Result<Message, ClientError> {
        let addr = self.addr;
        let r = frame::read(&mut self.rd, self.frames, wait, what).await;
        self.frames += 1;
        if !matches!(r, Ok(Some(_))) {
            self.broken = true;
        }
        match r {
            Ok(Some((m, _))) => Ok(m),
            Ok(None) => Err(ClientError::Closed { addr, what }),
            Err(source) => Err(ClientError::Protocol { addr, source }),
        }
    }

    async fn call(&mut self, m: &Message, what: &'static str) -> Result<Message, ClientError> {
        self.idle()?;
        self.send_frame(&frame::encode(m)).await?;
        self.recv(what).await
    }

    async fn expect_ok(&mut self, m: &Message, what: &'static str) -> Result<(), ClientError> {
        match self.call(m, what).await? {
            Message::Ok => Ok(()),
            other => Err(self.unexpected(what, &other)),
        }
    }

    /// Registers generation `generation` of shuffle `shuffle`.
    pub async fn register_shuffle(
        &mut self,
        shuffle: u32,
        generation: u32,
        partitions: u32,
    ) -> Result<(), ClientError> {
        self.expect_ok(
            &Message::RegisterShuffle { shuffle, generation, partitions },
            "registering a shuffle",
        )
        .await
    }

    /// Deletes a shuffle's data on this daemon.
    pub async fn unregister_shuffle(&mut self, shuffle: u32) -> Result<(), ClientError> {
        self.expect_ok(&Message::Unregister { shuffle }, "unregistering a shuffle").await
    }

    /// Drops what map attempt `attempt` of map `map` staged or committed on
    /// this daemon (no read will name it here); refused for the attempt a
    /// read named as the map's winner.
    pub async fn drop_attempt(
        &mut self,
        shuffle: u32,
        generation: u32,
        map: u32,
        attempt: u64,
    ) -> Result<(), ClientError> {
        let m = Message::DropAttempt { shuffle, generation, map, attempt };
        self.expect_ok(&m, "dropping a map attempt").await
    }

    /// Extends the application's lease.
    pub async fn renew(&mut self) -> Result<(), ClientError> {
        self.expect_ok(&Message::Renew, "renewing the lease").await
    }

    /// Deletes all of the application's data on this daemon.
    pub async fn end_application(&mut self) -> Result<(), ClientError> {
        self.expect_ok(&Message::EndApplication, "ending the application").await
    }

    /// The daemon's byte accounting and its work so far.
    pub async fn stats(&mut self) -> Result<DaemonStats, ClientError> {
        match self.call(&Message::Stats, "asking for statistics").await? {
            Message::StatsReply(stats) => Ok(stats),
            other => Err(self.unexpected("asking for statistics", &other)),
        }
    }

    /// Pushes one chunk, waiting out slow-downs; the acknowledged CRC.
    pub async fn push(&mut self, chunk: &Message) -> Result<u32, ClientError> {
        let Message::Push { seq, .. } = chunk else {
            return Err(ClientError::Unexpected {
                addr: self.addr,
                what: "pushing",
                got: "a message that is not a push",
            });
        };
        let seq = *seq;
        self.idle()?;
        let bytes = frame::encode(chunk);
        let sent = frame::crc_of(&bytes);
        for _ in 0..=MAX_SLOW_DOWNS {
            self.send_frame(&bytes).await?;
            match self.recv("pushing").await? {
                Message::PushAck { seq: s, crc } if s == seq && crc == sent => return Ok(crc),
                Message::PushAck { crc, .. } => {
                    return Err(ClientError::BadAck { addr: self.addr, seq, sent, got: crc })
                }
                Message::SlowDown { retry_after_ms } => {
                    tokio::time::sleep(Duration::from_millis(u64::from(retry_after_ms))).await;
                }
                other => return Err(self.unexpected("pushing", &other)),
            }
        }
        Err(ClientError::TooSlow { addr: self.addr })
    }

    /// Sends an encoded push frame without waiting for its answer
    /// ([`Client::push_answer`] reads the answers in order).
    async fn push_send(&mut self, frame: &[u8]) -> Result<(), ClientError> {
        self.not_reading()?;
        self.send_frame(frame).await?;
        self.unanswered += 1;
        Ok(())
    }

    /// The answer to the oldest push sent by [`Client::push_send`].
    async fn push_answer(&mut self) -> Result<Message, ClientError> {
        let m = self.recv("pushing").await?;
        self.unanswered -= 1;
        Ok(m)
    }

    /// Commits a map attempt; true when it was the first of its map index
    /// to commit here.
    #[allow(clippy::too_many_arguments)]
    pub async fn commit(
        &mut self,
        shuffle: u32,
        generation: u32,
        map: u32,
        attempt: u64,
        chunks: u32,
        acks_crc: u32,
        records: u64,
    ) -> Result<bool, ClientError> {
        let m = Message::Commit { shuffle, generation, map, attempt, chunks, acks_crc, records };
        match self.call(&m, "committing").await? {
            Message::Committed { first } => Ok(first),
            other => Err(self.unexpected("committing", &other)),
        }
    }

    /// Reads partitions `start..end` as one stream, each map index from the
    /// attempt `winners` names; checks the stream against its end's totals.
    pub async fn read(
        &mut self,
        shuffle: u32,
        generation: u32,
        start: u32,
        end: u32,
        winners: Vec<Winner>,
    ) -> Result<Vec<Block>, ClientError> {
        self.read_start((shuffle, generation), start, end, winners, ReadMode::Plain { skip: 0 })
            .await?;
        self.read_rest().await
    }

    /// [`Client::read`] with the daemon running the reduce-side operator
    /// `op` over each partition first (see [`Client::read_start`]).
    pub async fn read_reduced(
        &mut self,
        (shuffle, generation): (u32, u32),
        start: u32,
        end: u32,
        winners: Vec<Winner>,
        op: ReduceOp,
    ) -> Result<Vec<Block>, ClientError> {
        self.read_start((shuffle, generation), start, end, winners, ReadMode::Reduced(op)).await?;
        self.read_rest().await
    }

    /// Every block of the read in progress, checked against its end.
    async fn read_rest(&mut self) -> Result<Vec<Block>, ClientError> {
        let mut blocks = Vec::new();
        while let Some(b) = self.read_next().await? {
            blocks.push(b);
        }
        Ok(blocks)
    }

    /// Sends a read; its blocks come from [`Client::read_next`]. `mode`
    /// says what the daemon sends ([`ReadMode`]). Until the stream has
    /// ended, no other request may be sent on this connection.
    pub async fn read_start(
        &mut self,
        (shuffle, generation): (u32, u32),
        start: u32,
        end: u32,
        winners: Vec<Winner>,
        mode: ReadMode,
    ) -> Result<(), ClientError> {
        let m = match mode {
            ReadMode::Plain { skip } => {
                Message::Read { shuffle, generation, start, end, skip, winners }
            }
            ReadMode::Reduced(op) => {
                Message::ReadReduced { shuffle, generation, start, end, op, winners }
            }
        };
        self.send_read(m).await
    }

    async fn send_read(&mut self, m: Message) -> Result<(), ClientError> {
        let (start, end, reduced, winners) = match &m {
            Message::Read { start, end, winners, .. } => (*start, *end, false, winners.len()),
            Message::ReadReduced { start, end, winners, .. } => (*start, *end, true, winners.len()),
            other => return Err(self.unexpected("sending a read", other)),
        };
        self.idle()?;
        if winners > MAX_WINNERS_PER_READ as usize {
            return Err(ClientError::TooManyMaps { maps: winners, limit: MAX_WINNERS_PER_READ });
        }
        self.send_frame(&frame::encode(&m)).await?;
        self.reading = Some(ReadState { start, end, reduced, blocks: 0, records: 0, bytes: 0 });
        Ok(())
    }

    /// The next block of the read in progress, or `None` at its end (once
    /// the end's totals matched what the stream carried).
    pub async fn read_next(&mut self) -> Result<Option<Block>, ClientError> {
        let addr = self.addr;
        let Some(mut st) = self.reading.take() else {
            return Err(ClientError::Unexpected {
                addr,
                what: "reading",
                got: "no read in progress",
            });
        };
        let wait = if st.reduced { REDUCED_READ_TIMEOUT } else { REPLY_TIMEOUT };
        match self.recv_within("reading", wait).await? {
            Message::Data { partition, map, records, data } => {
                if partition < st.start || partition >= st.end {
                    self.broken = true;
                    return Err(ClientError::StreamMismatch {
                        addr,
                        what: "partition",
                        said: u64::from(st.end),
                        counted: u64::from(partition),
                    });
                }
                st.blocks += 1;
                st.records = st.records.saturating_add(records);
                st.bytes += data.len() as u64;
                self.reading = Some(st);
                Ok(Some(Block { partition, map, records, data }))
            }
            Message::End { blocks, records, bytes } => {
                for (what, said, counted) in [
                    ("blocks", blocks, st.blocks),
                    ("records", records, st.records),
                    ("bytes", bytes, st.bytes),
                ] {
                    if said != counted {
                        self.broken = true;
                        return Err(ClientError::StreamMismatch { addr, what, said, counted });
                    }
                }
                Ok(None)
            }
            other => Err(self.unexpected("reading", &other)),
        }
    }

    /// Whether the connection can take a new request: no read half done,
    /// and nothing failed on it (a refusal answered in full leaves it
    /// usable; a broken stream does not).
    pub fn is_idle(&self) -> bool {
        self.reading.is_none() && !self.broken && self.unanswered == 0
    }

    /// Whether this idle connection can still carry a request: nothing
    /// left unread in its buffer or on its socket. A daemon sends nothing
    /// unasked, so what a peek finds on an idle connection is its end: the
    /// end of stream or the reset of a daemon that exited, restarted or
    /// closed the connection. Checked without waiting (the socket is
    /// non-blocking: nothing there is `WouldBlock`), before a pooled
    /// connection is reused, so that a request does not meet a dead
    /// connection halfway and pass for the daemon's failure.
    pub fn still_open(&self) -> bool {
        if !self.is_idle() || !self.rd.buffer().is_empty() {
            return false;
        }
        let stream: &TcpStream = self.rd.get_ref().as_ref();
        let mut byte = [0u8; 1];
        let peeked = rustix::net::recv(
            stream,
            &mut byte[..],
            rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT,
        );
        matches!(peeked, Err(e) if e == rustix::io::Errno::AGAIN)
    }

    fn idle(&self) -> Result<(), ClientError> {
        if self.unanswered > 0 {
            return Err(ClientError::Unexpected {
                addr: self.addr,
                what: "sending a request",
                got: "pushes still unanswered on this connection",
            });
        }
        self.not_reading()
    }

    fn not_reading(&self) -> Result<(), ClientError> {
        if self.reading.is_some() {
            return Err(ClientError::Unexpected {
                addr: self.addr,
                what: "sending a request",
                got: "a read still in progress on this connection",
            });
        }
        Ok(())
    }
}

/// What a read in progress has carried so far.
#[derive(Debug)]
struct ReadState {
    start: u32,
    end: u32,
    /// The daemon reduces each partition before its first block.
    reduced: bool,
    blocks: u64,
    records: u64,
    bytes: u64,
}

/// A map attempt's output for one daemon: records gathered per reduce
/// partition, pushed as a chunk whenever about [`PUSH_CHUNK_BYTES`] are
/// pending, and a commit that proves every chunk was acknowledged.
#[derive(Debug)]
pub struct AttemptPusher {
    pub shuffle: u32,
    pub generation: u32,
    pub map: u32,
    pub attempt: u64,
    pending: BTreeMap<u32, (u64, Vec<u8>)>,
    pending_bytes: usize,
    /// The next chunk's sequence number.
    seq: u32,
    /// Chunks sent and not yet acknowledged, oldest first.
    in_flight: VecDeque<InFlight>,
    acks: Vec<(u32, u32)>,
    records: u64,
    /// Slow-down answers met so far, over every chunk.
    slow_downs: u32,
}

/// A chunk sent and not yet acknowledged: its frame (sent again if slowed
/// down), the frame's CRC, and how often it was slowed down.
#[derive(Debug)]
struct InFlight {
    seq: u32,
    frame: Vec<u8>,
    crc: u32,
    slowed: u32,
}

impl AttemptPusher {
    pub fn new(shuffle: u32, generation: u32, map: u32, attempt: u64) -> AttemptPusher {
        AttemptPusher {
            shuffle,
            generation,
            map,
            attempt,
            pending: BTreeMap::new(),
            pending_bytes: 0,
            seq: 0,
            in_flight: VecDeque::new(),
            acks: Vec::new(),
            records: 0,
            slow_downs: 0,
        }
    }

    /// Slow-down answers the attempt's chunks met so far (each chunk sent
    /// again after its wait).
    pub fn slow_downs(&self) -> u32 {
        self.slow_downs
    }

    /// Adds `records` records of partition `partition` (encoded bytes),
    /// pushing a chunk when enough is pending.
    pub async fn add(
        &mut self,
        client: &mut Client,
        partition: u32,
        records: u64,
        data: &[u8],
    ) -> Result<(), ClientError> {
        // Large data goes in pieces of at most a chunk; the records count
        // rides with the first piece (a read concatenates a map's pieces of
        // a partition in order, so where the bytes are cut does not matter).
        let mut records = records;
        let mut rest = data;
        loop {
            let room = PUSH_CHUNK_BYTES.saturating_sub(self.pending_bytes).max(1);
            let (piece, after) = rest.split_at(rest.len().min(room));
            let e = self.pending.entry(partition).or_default();
            e.0 += records;
            e.1.extend_from_slice(piece);
            self.pending_bytes += piece.len();
            self.records += records;
            records = 0;
            rest = after;
            if self.pending_bytes >= PUSH_CHUNK_BYTES {
                self.flush(client).await?;
            }
            if rest.is_empty() {
                break;
            }
        }
        Ok(())
    }

    /// Pushes what is pending as one chunk, waiting for the oldest chunk's
    /// answer when [`PUSH_WINDOW`] are unacknowledged.
    pub async fn flush(&mut self, client: &mut Client) -> Result<(), ClientError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let sections = std::mem::take(&mut self.pending)
            .into_iter()
            .map(|(partition, (records, data))| Section { partition, records, data })
            .collect();
        self.pending_bytes = 0;
        let seq = self.seq;
        self.seq += 1;
        let m = Message::Push {
            shuffle: self.shuffle,
            generation: self.generation,
            map: self.map,
            attempt: self.attempt,
            seq,
            sections,
        };
        let frame = frame::encode(&m);
        let crc = frame::crc_of(&frame);
        client.push_send(&frame).await?;
        self.in_flight.push_back(InFlight { seq, frame, crc, slowed: 0 });
        while self.in_flight.len() >= PUSH_WINDOW {
            self.settle(client).await?;
        }
        Ok(())
    }

    /// Flushes and waits for every chunk's acknowledgement (those slowed
    /// down sent again until acknowledged).
    pub async fn settle_all(&mut self, client: &mut Client) -> Result<(), ClientError> {
        self.flush(client).await?;
        while !self.in_flight.is_empty() {
            self.settle(client).await?;
        }
        Ok(())
    }

    /// Reads the oldest unacknowledged chunk's answer: its acknowledgement
    /// (checked against the CRC sent), or a slow-down (the chunk is sent
    /// again after the wait, at most [`MAX_SLOW_DOWNS`] times).
    async fn settle(&mut self, client: &mut Client) -> Result<(), ClientError> {
        let Some(mut f) = self.in_flight.pop_front() else { return Ok(()) };
        match client.push_answer().await? {
            Message::PushAck { seq, crc } if seq == f.seq && crc == f.crc => {
                self.acks.push((seq, crc));
            }
            Message::PushAck { crc, .. } => {
                return Err(ClientError::BadAck {
                    addr: client.addr,
                    seq: f.seq,
                    sent: f.crc,
                    got: crc,
                });
            }
            Message::SlowDown { retry_after_ms } => {
                f.slowed += 1;
                self.slow_downs += 1;
                if f.slowed > MAX_SLOW_DOWNS {
                    return Err(ClientError::TooSlow { addr: client.addr });
                }
                tokio::time::sleep(Duration::from_millis(u64::from(retry_after_ms))).await;
                client.push_send(&f.frame).await?;
                self.in_flight.push_back(f);
            }
            other => return Err(client.unexpected("pushing", &other)),
        }
        Ok(())
    }

    /// Flushes, waits for every chunk's acknowledgement and commits; true
    /// when first for its map index here.
    pub async fn commit(mut self, client: &mut Client) -> Result<bool, ClientError> {
        self.settle_all(client).await?;
        // A chunk sent again after a slow-down is acknowledged after later ones.
        self.acks.sort_unstable_by_key(|&(seq, _)| seq);
        let acks_crc = acks_checksum(self.acks.iter().copied());
        client
            .commit(
                self.shuffle,
                self.generation,
                self.map,
                self.attempt,
                self.acks.len() as u32,
                acks_crc,
                self.records,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jittered_wait_lies_between_half_and_all_of_it() {
        let wait = Duration::from_millis(400);
        let waits: Vec<Duration> = (0..200).map(|_| jittered(wait)).collect();
        assert!(waits.iter().all(|w| *w >= wait / 2 && *w <= wait), "{waits:?}");
        // Drawn, not fixed: 200 draws are not all alike.
        assert!(waits.iter().any(|w| *w != waits[0]), "{waits:?}");
    }
}
