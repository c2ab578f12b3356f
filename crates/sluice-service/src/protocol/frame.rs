//! Frames: a 16-byte header (magic `SLSV`, version, kind, reserved flags,
//! payload length, CRC32C over the header's first 12 bytes and the
//! payload), then the payload. Decoding checks, in order: magic, version,
//! kind, flags, the length against [`MAX_FRAME_PAYLOAD_BYTES`] (before
//! the payload is read or allocated), the CRC, then the message.

use std::time::Duration;

use sluice_core::format::checksum::Crc32c;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::error::ProtocolError;
use super::limits::{FRAME_HEADER_BYTES, MAX_FRAME_PAYLOAD_BYTES};
use super::message::{kind, Message};

/// The first four bytes of every frame.
pub const MAGIC: [u8; 4] = *b"SLSV";

/// The protocol version this build speaks (2: the daemon proves itself in
/// `Welcome`; 3: a `Read` names the blocks to skip, so a read whose
/// connection broke resumes; 4: `StatsReply` counts the frames in flight;
/// 5: the client's proof names the daemon's address and the lease asked).
pub const VERSION: u8 = 5;

/// The CRC32C field of an encoded frame.
pub fn crc_of(encoded: &[u8]) -> u32 {
    u32::from_le_bytes([encoded[12], encoded[13], encoded[14], encoded[15]])
}

/// Encodes `m` as one frame. Panics if the payload exceeds the frame limit:
/// senders cut their data into chunks of about
/// [`PUSH_CHUNK_BYTES`](super::limits::PUSH_CHUNK_BYTES), so that is a bug
/// on this side.
pub fn encode(m: &Message) -> Vec<u8> {
    let mut out = Vec::with_capacity(FRAME_HEADER_BYTES + 64);
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(m.kind());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    m.encode_payload(&mut out);
    let len = out.len() - FRAME_HEADER_BYTES;
    assert!(
        len <= MAX_FRAME_PAYLOAD_BYTES as usize,
        "a {} frame of {len} bytes",
        Message::kind_name(m.kind())
    );
    out[8..12].copy_from_slice(&(len as u32).to_le_bytes());
    let crc = frame_crc(&out[..12], &out[FRAME_HEADER_BYTES..]);
    out[12..16].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Bytes of a `Data` frame's payload before its data: partition u32, map
/// u32, records u64, data length u32.
pub const DATA_FIELDS_BYTES: usize = 20;

/// The header and fixed fields of a `Data` frame carrying `data`; on the
/// wire `data` follows them unchanged. Together they are the bytes of
/// `encode(&Message::Data { .. })`, made without copying `data` (the
/// daemon streams the blocks it holds so). Panics, as `encode` does, if the
/// payload exceeds the frame limit.
pub fn data_frame_head(
    partition: u32,
    map: u32,
    records: u64,
    data: &[u8],
) -> [u8; FRAME_HEADER_BYTES + DATA_FIELDS_BYTES] {
    let len = DATA_FIELDS_BYTES + data.len();
    assert!(len <= MAX_FRAME_PAYLOAD_BYTES as usize, "a Data frame of {len} bytes");
    let mut head = [0u8; FRAME_HEADER_BYTES + DATA_FIELDS_BYTES];
    head[..4].copy_from_slice(&MAGIC);
    head[4] = VERSION;
    head[5] = kind::DATA;
    head[8..12].copy_from_slice(&(len as u32).to_le_bytes());
    let f = &mut head[FRAME_HEADER_BYTES..];
    f[..4].copy_from_slice(&partition.to_le_bytes());
    f[4..8].copy_from_slice(&map.to_le_bytes());
    f[8..16].copy_from_slice(&records.to_le_bytes());
    f[16..20].copy_from_slice(&(data.len() as u32).to_le_bytes());
    let mut c = Crc32c::new();
    c.update(&head[..12]);
    c.update(&head[FRAME_HEADER_BYTES..]);
    c.update(data);
    head[12..16].copy_from_slice(&c.value().to_le_bytes());
    head
}

fn frame_crc(head: &[u8], payload: &[u8]) -> u32 {
    let mut c = Crc32c::new();
    c.update(head);
    c.update(payload);
    c.value()
}

/// A checked header.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    pub kind: u8,
    pub len: u32,
    pub crc: u32,
}

/// Checks a header's fields (frame `frame` of its connection).
pub fn parse_header(h: &[u8; FRAME_HEADER_BYTES], frame: u64) -> Result<Header, ProtocolError> {
    let found = [h[0], h[1], h[2], h[3]];
    if found != MAGIC {
        return Err(ProtocolError::BadMagic { frame, found });
    }
    if h[4] != VERSION {
        return Err(ProtocolError::UnsupportedVersion { frame, found: h[4], supported: VERSION });
    }
    let kind = h[5];
    if kind == 0 || kind > kind::LAST {
        return Err(ProtocolError::UnknownKind { frame, kind });
    }
    let flags = u16::from_le_bytes([h[6], h[7]]);
    if flags != 0 {
        return Err(ProtocolError::ReservedFlags { frame, flags });
    }
    let len = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    if len > MAX_FRAME_PAYLOAD_BYTES {
        return Err(ProtocolError::TooLong {
            frame,
            what: "payload length",
            len: u64::from(len),
            limit: u64::from(MAX_FRAME_PAYLOAD_BYTES),
        });
    }
    Ok(Header { kind, len, crc: u32::from_le_bytes([h[12], h[13], h[14], h[15]]) })
}

/// Checks the payload's CRC and decodes the message.
pub fn decode_payload(
    h: &[u8; FRAME_HEADER_BYTES],
    header: Header,
    payload: &[u8],
    frame: u64,
) -> Result<Message, ProtocolError> {
    let actual = frame_crc(&h[..12], payload);
    if actual != header.crc {
        return Err(ProtocolError::Checksum { frame, expected: header.crc, actual });
    }
    Message::decode(header.kind, payload, frame)
}

/// Decodes one frame from the front of `bytes`: the message and the bytes
/// it took. A frame cut short is [`ProtocolError::Truncated`].
pub fn decode(bytes: &[u8], frame: u64) -> Result<(Message, usize), ProtocolError> {
    let Some(h) = bytes.first_chunk::<FRAME_HEADER_BYTES>() else {
        return Err(ProtocolError::Truncated {
            frame,
            read: bytes.len(),
            needed: FRAME_HEADER_BYTES,
        });
    };
    let header = parse_header(h, frame)?;
    let end = FRAME_HEADER_BYTES + header.len as usize;
    if bytes.len() < end {
        return Err(ProtocolError::Truncated { frame, read: bytes.len(), needed: end });
    }
    Ok((decode_payload(h, header, &bytes[FRAME_HEADER_BYTES..end], frame)?, end))
}

/// Reads one frame: the message and the frame's CRC32C (a push is
/// acknowledged with it). `Ok(None)` is a connection closed cleanly between
/// frames; closed inside one is [`ProtocolError::Truncated`]. `idle` bounds
/// the wait for the frame's first byte, [`FRAME_BODY_TIMEOUT`] the rest.
pub async fn read<R: AsyncRead + Unpin>(
    r: &mut R,
    frame: u64,
    idle: Duration,
    what: &'static str,
) -> Result<Option<(Message, u32)>, ProtocolError> {
    read_bounded(r, frame, idle, what, MAX_FRAME_PAYLOAD_BYTES).await
}

/// [`read`], refusing a payload longer than `max_payload` from the header
/// alone (before authentication a daemon takes no more than an `Auth`).
pub async fn read_bounded<R: AsyncRead + Unpin>(
    r: &mut R,
    frame: u64,
    idle: Duration,
    what: &'static str,
    max_payload: u32,
) -> Result<Option<(Message, u32)>, ProtocolError> {
    let Some(head) = read_header(r, frame, idle, what, max_payload).await? else {
        return Ok(None);
    };
    read_payload(r, &head, frame).await.map(Some)
}

/// A frame's header as read: its bytes and their checked fields.
#[derive(Debug, Clone, Copy)]
pub struct Head {
    pub bytes: [u8; FRAME_HEADER_BYTES],
    pub header: Header,
}

/// Reads and checks one frame's header, refusing a payload longer than
/// `max_payload`; nothing is allocated for the payload. `Ok(None)` is a
/// connection closed cleanly between frames. `idle` bounds the wait for
/// the first byte, [`FRAME_BODY_TIMEOUT`] the rest of the header.
pub async fn read_header<R: AsyncRead + Unpin>(
    r: &mut R,
    frame: u64,
    idle: Duration,
    what: &'static str,
    max_payload: u32,
) -> Result<Option<Head>, ProtocolError> {
    let mut h = [0u8; FRAME_HEADER_BYTES];
    let first = tokio::time::timeout(idle, r.read(&mut h))
        .await
        .map_err(|_| ProtocolError::Timeout { what, after_ms: idle.as_millis() as u64 })??;
    if first == 0 {
        return Ok(None);
    }
    let rest = async {
        let mut got = first;
        while got < FRAME_HEADER_BYTES {
            let n = r.read(&mut h[got..]).await?;
            if n == 0 {
                return Err(ProtocolError::Truncated {
                    frame,
                    read: got,
                    needed: FRAME_HEADER_BYTES,
                });
            }
            got += n;
        }
        let header = parse_header(&h, frame)?;
        if header.len > max_payload {
            return Err(ProtocolError::TooLong {
                frame,
                what: "payload length",
                len: u64::from(header.len),
                limit: u64::from(max_payload),
            });
        }
        Ok(Head { bytes: h, header })
    };
    within_body_timeout(rest).await.map(Some)
}

/// Reads the payload `head` announces and decodes it, the CRC first: the
/// message and the frame's CRC32C; within [`FRAME_BODY_TIMEOUT`].
pub async fn read_payload<R: AsyncRead + Unpin>(
    r: &mut R,
    head: &Head,
    frame: u64,
) -> Result<(Message, u32), ProtocolError> {
    let body = async {
        let total = head.header.len as usize;
        let mut payload = vec![0u8; total];
        fill(r, &mut payload, 0, frame, total).await?;
        Ok((decode_payload(&head.bytes, head.header, &payload, frame)?, head.header.crc))
    };
    within_body_timeout(body).await
}

/// Bytes of the buffer [`skip_payload`] reads through.
pub const SKIP_BUFFER_BYTES: usize = 64 << 10;

/// Reads the payload `head` announces without keeping it (a frame answered
/// unread): only its CRC is checked, so the connection's next frame starts
/// where it should; within [`FRAME_BODY_TIMEOUT`].
pub async fn skip_payload<R: AsyncRead + Unpin>(
    r: &mut R,
    head: &Head,
    frame: u64,
) -> Result<(), ProtocolError> {
    let body = async {
        let total = head.header.len as usize;
        let mut crc = Crc32c::new();
        crc.update(&head.bytes[..12]);
        let mut buf = vec![0u8; SKIP_BUFFER_BYTES.min(total)];
        let mut done = 0;
        while done < total {
            let n = buf.len().min(total - done);
            fill(r, &mut buf[..n], done, frame, total).await?;
            crc.update(&buf[..n]);
            done += n;
        }
        let actual = crc.value();
        if actual != head.header.crc {
            return Err(ProtocolError::Checksum { frame, expected: head.header.crc, actual });
        }
        Ok(())
    };
    within_body_timeout(body).await
}

/// Fills `buf` from `r`; `before` payload bytes were read already, of
/// `total` (for the error of a connection that ends first).
async fn fill<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut [u8],
    before: usize,
    frame: u64,
    total: usize,
) -> Result<(), ProtocolError> {
    let mut got = 0;
    while got < buf.len() {
        let n = r.read(&mut buf[got..]).await?;
        if n == 0 {
            return Err(ProtocolError::Truncated {
                frame,
                read: FRAME_HEADER_BYTES + before + got,
                needed: FRAME_HEADER_BYTES + total,
            });
        }
        got += n;
    }
    Ok(())
}

async fn within_body_timeout<T>(
    f: impl std::future::Future<Output = Result<T, ProtocolError>>,
) -> Result<T, ProtocolError> {
    tokio::time::timeout(FRAME_BODY_TIMEOUT, f).await.map_err(|_| ProtocolError::Timeout {
        what: "the rest of a frame",
        after_ms: FRAME_BODY_TIMEOUT.as_millis() as u64,
    })?
}

/// Writes one frame, bounded by [`FRAME_BODY_TIMEOUT`].
pub async fn write<W: AsyncWrite + Unpin>(w: &mut W, m: &Message) -> Result<(), ProtocolError> {
    write_within(w, m, FRAME_BODY_TIMEOUT).await
}

/// Writes one frame, bounded by `limit` (a read's stream waits on its
/// reader, which may take long over one segment: see the daemon's
/// `STREAM_STALL_TIMEOUT`).
pub async fn write_within<W: AsyncWrite + Unpin>(
    w: &mut W,
    m: &Message,
    limit: Duration,
) -> Result<(), ProtocolError> {
    let bytes = encode(m);
    tokio::time::timeout(limit, w.write_all(&bytes)).await.map_err(|_| {
        ProtocolError::Timeout { what: "a frame's write", after_ms: limit.as_millis() as u64 }
    })??;
    Ok(())
}

/// Writes one `Data` frame of `data` without copying it (see
/// [`data_frame_head`]), bounded by `limit` as [`write_within`] is.
pub async fn write_data_within<W: AsyncWrite + Unpin>(
    w: &mut W,
    partition: u32,
    map: u32,
    records: u64,
    data: &[u8],
    limit: Duration,
) -> Result<(), ProtocolError> {
    let head = data_frame_head(partition, map, records, data);
    tokio::time::timeout(limit, async {
        w.write_all(&head).await?;
        w.write_all(data).await
    })
    .await
    .map_err(|_| ProtocolError::Timeout {
        what: "a frame's write",
        after_ms: limit.as_millis() as u64,
    })??;
    Ok(())
}

/// How long the rest of a frame may take once its first byte arrived, and
/// how long a frame's write may take.
pub const FRAME_BODY_TIMEOUT: Duration = Duration::from_secs(60);
