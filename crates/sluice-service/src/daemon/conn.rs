//! One connection: a challenge, an authentication within
//! [`AUTH_TIMEOUT`] (a frame no larger than an `Auth`), then requests until
//! the client closes, idles past [`IDLE_TIMEOUT`], sends a frame that does
//! not decode (answered with [`ErrorCode::Malformed`], then closed) or the
//! daemon stops. A read's stream waits at most its stall limit
//! ([`Shared::stream_stall`], [`STREAM_STALL_TIMEOUT`] by default) per
//! frame on a reader that does not take it; the reader may then ask again
//! on a new connection for the blocks it did not get (`Read`'s `skip`).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::reduce::ReduceDir;
use super::store::{ChunkId, Pushed, Refusal, SLOW_DOWN_MS};
#[cfg(doc)]
use super::STREAM_STALL_TIMEOUT;
use super::{
    frames, shutting_down, trim, PendingAuth, Shared, AUTH_TIMEOUT, IDLE_TIMEOUT, LEASE_CONNECTIONS,
};
use crate::auth;
use crate::protocol::limits::{MAX_AUTH_PAYLOAD_BYTES, MAX_FRAME_PAYLOAD_BYTES};
use crate::protocol::message::kind;
use crate::protocol::{frame, ErrorCode, Message, ProtocolError, Section};
use sluice_engine::host_op;

type Out = BufWriter<OwnedWriteHalf>;

pub(super) async fn send(out: &mut Out, m: &Message) -> Result<(), ProtocolError> {
    frame::write(out, m).await
}

/// Flushes what was written, within `limit`.
pub(super) async fn flush(out: &mut Out, limit: Duration) -> Result<(), ProtocolError> {
    tokio::time::timeout(limit, out.flush()).await.map_err(|_| ProtocolError::Timeout {
        what: "a reply's write",
        after_ms: limit.as_millis() as u64,
    })??;
    Ok(())
}

pub(super) async fn refuse(out: &mut Out, (code, message): Refusal) -> Result<(), ProtocolError> {
    send(out, &Message::Error { code, message }).await?;
    flush(out, frame::FRAME_BODY_TIMEOUT).await
}

/// What a connection over the daemon's limit is told with
/// [`ErrorCode::Busy`].
pub(super) fn busy(max_connections: usize) -> String {
    format!(
        "the daemon serves {max_connections} tasks' connections and {LEASE_CONNECTIONS} leases', \
         its limits; try again"
    )
}

pub(super) async fn serve(
    stream: TcpStream,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    pending: PendingAuth,
) {
    // The address the client reached, which the daemon's proof names.
    let Ok(local) = stream.local_addr() else { return };
    let (mut rd, wr) = stream.into_split();
    let mut out = BufWriter::new(wr);
    let _ = async {
        let nonce = auth::nonce()?;
        send(&mut out, &Message::Challenge { nonce }).await?;
        flush(&mut out, AUTH_TIMEOUT).await?;
        // The whole Auth frame within AUTH_TIMEOUT, and no larger than one.
        let auth = tokio::time::timeout(
            AUTH_TIMEOUT,
            frame::read_bounded(&mut rd, 0, AUTH_TIMEOUT, "authentication", MAX_AUTH_PAYLOAD_BYTES),
        )
        .await
        .unwrap_or(Err(ProtocolError::Timeout {
            what: "authentication",
            after_ms: AUTH_TIMEOUT.as_millis() as u64,
        }));
        // The slot is held until the connection ends.
        let (app, _slot, lease_only) = match auth {
            Ok(Some((Message::Auth { app, lease_ms, proof, challenge, lease_only }, _)))
                if auth::verify(
                    &shared.secret,
                    &auth::Handshake {
                        nonces: auth::Nonces { daemon: nonce, client: challenge },
                        daemon: local,
                        app: &app,
                        lease_ms,
                        lease_only,
                    },
                    &proof,
                ) =>
            {
                let Some(slot) = shared.slot(lease_only) else {
                    let busy = busy(shared.max_connections);
                    return refuse(&mut out, (ErrorCode::Busy, busy)).await;
                };
                let lease = shared.store().open_app(&app, Duration::from_millis(lease_ms));
                let key = auth::app_key(&shared.secret, &app);
                let nonces = auth::Nonces { daemon: nonce, client: challenge };
                let proof = auth::daemon_proof(&key, &nonces, local, &app);
                let granted = lease.as_millis() as u64;
                send(&mut out, &Message::Welcome { lease_ms: granted, proof }).await?;
                flush(&mut out, AUTH_TIMEOUT).await?;
                ((app, Duration::from_millis(lease_ms)), slot, lease_only)
            }
            Ok(Some((Message::Auth { .. }, _))) => {
                return refuse(
                    &mut out,
                    (ErrorCode::Unauthenticated, "authentication failed".into()),
                )
                .await;
            }
            Ok(Some((other, _))) => {
                let what = Message::kind_name(other.kind());
                return refuse(
                    &mut out,
                    (ErrorCode::Unauthenticated, format!("{what} before authentication")),
                )
                .await;
            }
            Ok(None) => return Ok(()),
            Err(e) => return refuse(&mut out, (ErrorCode::Malformed, e.to_string())).await,
        };
        drop(pending);
        let mut n = 1u64;
        loop {
            // Between requests: wait for the next frame, the idle limit, or
            // the daemon stopping (a request already arriving is served).
            // (`peek` takes no bytes, so dropping it when the daemon stops
            // loses nothing.)
            let mut first = [0u8; 1];
            tokio::select! {
                r = tokio::time::timeout(IDLE_TIMEOUT, rd.peek(&mut first)) => match r {
                    Ok(Ok(0)) | Err(_) => return Ok(()),
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return Err(e.into()),
                },
                _ = stop.changed() => return Ok(()),
            }
            let head =
                frame::read_header(&mut rd, n, IDLE_TIMEOUT, "a request", MAX_FRAME_PAYLOAD_BYTES);
            let head = match head.await {
                Ok(Some(h)) => h,
                Ok(None) => return Ok(()),
                Err(e) => return refuse(&mut out, (ErrorCode::Malformed, e.to_string())).await,
            };
            // A request of one size whose header says another, and any
            // request but a renewal on a lease connection, are refused from
            // the header, before any frame memory is taken for it.
            let kind = head.header.kind;
            if Message::fixed_request_bytes(kind).is_some_and(|b| b != head.header.len) {
                let why = format!(
                    "frame {n}: a {} of {} payload bytes, which is {} bytes",
                    Message::kind_name(kind),
                    head.header.len,
                    Message::fixed_request_bytes(kind).unwrap_or_default()
                );
                return refuse(&mut out, (ErrorCode::Malformed, why)).await;
            }
            if lease_only && kind != kind::RENEW {
                if let Err(e) = frame::skip_payload(&mut rd, &head, n).await {
                    return refuse(&mut out, (ErrorCode::Malformed, e.to_string())).await;
                }
                n += 1;
                let what = Message::kind_name(kind);
                let why = format!("{what} on a lease connection, which sends only Renew");
                refuse(&mut out, (ErrorCode::BadRequest, why)).await?;
                continue;
            }
            // The payload's bytes (and what is decoded out of them) are
            // taken from the frame memory before they are allocated: a
            // push's until it is staged (then the store counts them), any
            // other's until it is decoded (a read that held them while it
            // waits for room for its blocks could wait on itself).
            let bytes = frames::request_bytes(head.header.len);
            let is_push = kind == kind::PUSH;
            let mut held = Some(if is_push {
                let Some(held) = shared.frames.try_take(bytes) else {
                    if let Err(e) = frame::skip_payload(&mut rd, &head, n).await {
                        return refuse(&mut out, (ErrorCode::Malformed, e.to_string())).await;
                    }
                    n += 1;
                    send(&mut out, &Message::SlowDown { retry_after_ms: SLOW_DOWN_MS }).await?;
                    flush(&mut out, shared.stream_stall).await?;
                    continue;
                };
                held
            } else {
                match shared.frames.take(bytes, shared.frame_wait, "frame memory").await {
                    Ok(held) => held,
                    Err(e) => {
                        // Read through (its CRC checked) and answered, so
                        // the client gets a typed answer, not a closed
                        // connection.
                        if let Err(e) = frame::skip_payload(&mut rd, &head, n).await {
                            return refuse(&mut out, (ErrorCode::Malformed, e.to_string())).await;
                        }
                        n += 1;
                        let why = format!("{e}: the daemon's frames in flight fill its memory");
                        refuse(&mut out, (ErrorCode::Busy, why)).await?;
                        continue;
                    }
                }
            });
            let (m, crc) = match frame::read_payload(&mut rd, &head, n).await {
                Ok(m) => m,
                Err(e) => return refuse(&mut out, (ErrorCode::Malformed, e.to_string())).await,
            };
            n += 1;
            if !is_push {
                held = None;
            }
            handle(&shared, &app, m, crc, &mut out).await?;
            drop(held);
            flush(&mut out, shared.stream_stall).await?;
        }
    }
    .await;
}

async fn handle(
    shared: &Shared,
    (app, lease): &(String, Duration),
    m: Message,
    crc: u32,
    out: &mut Out,
) -> Result<(), ProtocolError> {
    let stopping = || shared.stopping.load(Ordering::SeqCst);
    let reply: Result<Message, Refusal> = match m {
        Message::RegisterShuffle { .. } | Message::Push { .. } if stopping() => {
            Err(shutting_down())
        }
        Message::RegisterShuffle { shuffle, generation, partitions } => {
            shared.with_store(|s| s.register(app, shuffle, generation, partitions))
        }
        Message::Push { shuffle, generation, map, attempt, seq, mut sections } => {
            let bytes = sections.iter().map(|x| x.data.len() as u64).sum();
            let id = ChunkId { shuffle, generation, map, attempt, seq, crc };
            let r = push(shared, app, &id, &mut sections);
            // The frame the sections were read from is gone.
            trim::freed(bytes);
            r
        }
        Message::Commit { shuffle, generation, map, attempt, chunks, acks_crc, records } => shared
            .with_store(|s| {
                s.commit(app, shuffle, generation, map, attempt, chunks, acks_crc, records)
            }),
        Message::Read { shuffle, generation, start, end, skip, winners } => {
            let plan =
                shared.with_store(|s| s.read_plan(app, shuffle, generation, start, end, &winners));
            // The winners' memory (up to MAX_WINNERS_PER_READ of them) is
            // not kept while the blocks stream.
            drop(winners);
            return match plan.and_then(|plan| resumed(plan, skip)) {
                Ok(plan) => stream(plan, out, shared).await,
                Err(r) => refuse(out, r).await,
            };
        }
        Message::ReadReduced { shuffle, generation, start, end, op, winners } => {
            let spec = match host_op::reduce_spec(op.function, op.value_type) {
                Ok(spec) => spec,
                Err(e) => return refuse(out, (ErrorCode::BadRequest, e.to_string())).await,
            };
            let planned = shared.with_store(|store| {
                store
                    .read_plan(app, shuffle, generation, start, end, &winners)
                    .and_then(|plan| Ok((plan, store.reduce_dir(app)?)))
            });
            drop(winners);
            let (plan, dir) = match planned {
                Ok(p) => p,
                Err(r) => return refuse(out, r).await,
            };
            let made = tokio::task::block_in_place(|| super::spill::create_private_dir(&dir));
            if let Err(e) = made {
                let why = format!("creating {} for a reduced read: {e}", dir.display());
                return refuse(out, (ErrorCode::Storage, why)).await;
            }
            let dir = ReduceDir(dir);
            let r = super::reduce::stream(shared, shuffle, &spec, plan, &dir.0, out).await;
            let app_dir = dir.0.parent().map(Path::to_path_buf);
            tokio::task::block_in_place(|| drop(dir));
            if let Some(d) = app_dir.filter(|_| !shared.store().has_app(app)) {
                // The application ended during the read: its directory goes too.
                let _ = std::fs::remove_dir(d);
            }
            return r;
        }
        Message::Unregister { shuffle } => {
            let r = shared.with_store(|s| s.unregister(app, shuffle));
            trim::give_back();
            r
        }
        Message::DropAttempt { shuffle, generation, map, attempt } => {
            let r = shared.with_store(|s| s.drop_attempt(app, shuffle, generation, map, attempt));
            trim::give_back();
            r
        }
        Message::Renew => {
            if shared.store().renew(app, *lease) {
                Ok(Message::Ok)
            } else {
                Err((ErrorCode::Unauthenticated, format!("application {app}'s lease lapsed")))
            }
        }
        Message::EndApplication => {
            shared.with_store(|s| s.end_app(app));
            trim::give_back();
            Ok(Message::Ok)
        }
        Message::Stats => Ok(Message::StatsReply(shared.stats())),
        other => Err((
            ErrorCode::BadRequest,
            format!("{} is not a request", Message::kind_name(other.kind())),
        )),
    };
    match reply {
        Ok(m) => send(out, &m).await,
        Err(r) => refuse(out, r).await,
    }
}

/// Spills one push may write before it is answered `SlowDown` instead
/// (each frees an owner; other pushes may take the room meanwhile).
const MAX_SPILLS_PER_PUSH: u32 = 16;

/// Stages a push, first writing spills without the store's lock (the
/// runtime told this worker blocks) until it fits.
fn push(
    shared: &Shared,
    app: &str,
    id: &ChunkId,
    sections: &mut Vec<Section>,
) -> Result<Message, Refusal> {
    for _ in 0..MAX_SPILLS_PER_PUSH {
        let step = shared.store().push(app, id, sections)?;
        match step {
            Pushed::Reply(m) => return Ok(m),
            Pushed::Spill(mut job) => {
                let written = tokio::task::block_in_place(|| job.write());
                let freed = shared.with_store(|s| s.finish_spill(job, written))?;
                trim::freed(freed);
            }
        }
    }
    Ok(Message::SlowDown { retry_after_ms: SLOW_DOWN_MS })
}

/// The blocks of `plan` after its first `skip`, which a resumed read took
/// before its connection broke; a `skip` past the plan's end is refused (the
/// read asks for other partitions or winners than the one it resumes).
fn resumed(
    mut plan: Vec<super::store::BlockRef>,
    skip: u64,
) -> Result<Vec<super::store::BlockRef>, Refusal> {
    match usize::try_from(skip) {
        Ok(n) if n <= plan.len() => Ok(plan.split_off(n)),
        _ => Err((
            ErrorCode::BadRequest,
            format!("a read resumed after {skip} blocks has {} in all", plan.len()),
        )),
    }
}

async fn stream(
    plan: Vec<super::store::BlockRef>,
    out: &mut Out,
    shared: &Shared,
) -> Result<(), ProtocolError> {
    let stall = shared.stream_stall;
    let (mut blocks, mut records, mut bytes) = (0u64, 0u64, 0u64);
    for b in plan {
        // A block read back from disk is the frame memory's until it is sent.
        let _held = shared.frames.take(b.at.disk_bytes(), stall, "frame memory for a read").await?;
        let data = match tokio::task::block_in_place(|| b.at.fetch()) {
            Ok(d) => d,
            Err(r) => return refuse(out, r).await,
        };
        blocks += 1;
        records = records.saturating_add(b.records);
        bytes += data.len() as u64;
        if b.at.mem_bytes() == 0 {
            // Read back from disk for this stream only.
            trim::freed(data.len() as u64);
        }
        // The block's bytes go out as they are held (no frame built around a copy).
        frame::write_data_within(out, b.partition, b.map, b.records, &data, stall).await?;
    }
    send(out, &Message::End { blocks, records, bytes }).await
}
