//! The service protocol: framed messages over TCP.
//!
//! ```text
//!  client                                 daemon
//!    ── connect ─────────────────────────►
//!    ◄──────────────── Challenge{nonce} ──   (nothing else is accepted
//!    ── Auth{app, lease, proof, challenge} ►  before a valid Auth)
//!    ◄───── Welcome{lease, proof} / Error ──   (the client checks the
//!                                              daemon's proof)
//!    ── RegisterShuffle / Push / Commit / Read / Unregister / Renew ─►
//!    ◄── Ok / PushAck / SlowDown / Committed / Data.. End / Error ───
//! ```
//! Every frame carries a CRC32C; every length is checked against a named
//! limit in [`limits`] before anything is allocated for it; a frame that
//! fails a check is a typed [`ProtocolError`] naming the frame, and the
//! daemon answers it with [`ErrorCode::Malformed`] and closes the
//! connection. `docs/wire-format.md` ("Service frames") has the layouts.

pub mod error;
pub mod frame;
pub mod limits;
pub mod message;

pub use error::ProtocolError;
pub use message::{
    acks_checksum, DaemonStats, ErrorCode, Message, ReduceOp, Section, Winner, REDUCED_MAP,
};
