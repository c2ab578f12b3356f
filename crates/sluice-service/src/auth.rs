//! Authentication: a node secret, per-application keys derived from it,
//! and a challenge answered with an HMAC.
//!
//! Each daemon holds the node secret (a file only it reads). An
//! application is given its own key, `HMAC-SHA256(secret, "sluice app key
//! v1" 0 app)` (`sluice daemon app-key` prints it), never the secret, so
//! a leaked executor key opens one application's data and no other's. On
//! connect the daemon sends a fresh random nonce; the client answers with
//! `HMAC-SHA256(app key, "sluice auth v2" 0 daemon nonce, client nonce,
//! address, lease_ms, lease_only, app)`, the address being the daemon's the
//! client dialed, which the daemon recomputes from the secret with the
//! address the connection reached and compares in constant time. Nothing
//! else is accepted before that, and a wrong proof closes the connection.
//! Naming the address keeps a client's answer from opening a session at
//! any other daemon: a process that took one daemon's address and passed
//! another daemon's challenge on to a client gets an answer that daemon
//! refuses; naming the lease keeps it from being shortened on the way.
//!
//! The daemon proves itself in turn: the `Auth` carries a fresh nonce of
//! the client's, and the `Welcome` answers it with `HMAC-SHA256(app key,
//! "sluice daemon v1" 0 client nonce, daemon nonce, address, app)`, the
//! address being the one the connection reached (`ip:port`, an IPv4-mapped
//! address as IPv4). Only a holder of the node secret (or of this
//! application's key) can compute it, and a daemon computes it for its own
//! address only, so a process that took a daemon's address is found out
//! before the client pushes or reads anything, even one that relays the
//! handshake to another daemon of the cluster; the distinct label keeps one
//! side's proof from being replayed as the other's. The secret and keys are
//! never logged or sent.

use std::net::SocketAddr;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::protocol::limits::{MAC_BYTES, NONCE_BYTES};

type HmacSha256 = Hmac<Sha256>;

const APP_KEY_LABEL: &[u8] = b"sluice app key v1\0";
const PROOF_LABEL: &[u8] = b"sluice auth v2\0";
const DAEMON_PROOF_LABEL: &[u8] = b"sluice daemon v1\0";

/// The shortest node secret accepted, in bytes.
pub const MIN_SECRET_BYTES: usize = 16;

/// A key (the node secret or an application's key). Its `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct Key(Vec<u8>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key(<{} bytes, hidden>)", self.0.len())
    }
}

/// Why a key could not be made.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("the secret is {0} bytes, at least {MIN_SECRET_BYTES} are needed")]
    TooShort(usize),
    #[error("an application key is {MAC_BYTES} bytes as 64 hex digits")]
    BadHex,
}

impl Key {
    /// A node secret from its bytes (a secret file's contents, trailing
    /// whitespace removed).
    pub fn secret(bytes: &[u8]) -> Result<Key, KeyError> {
        let trimmed = bytes.trim_ascii_end();
        if trimmed.len() < MIN_SECRET_BYTES {
            return Err(KeyError::TooShort(trimmed.len()));
        }
        Ok(Key(trimmed.to_vec()))
    }

    /// An application key from the hex `app_key` prints.
    pub fn from_hex(hex: &str) -> Result<Key, KeyError> {
        let hex = hex.trim();
        if hex.len() != MAC_BYTES * 2 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(KeyError::BadHex);
        }
        let bytes = (0..MAC_BYTES)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| KeyError::BadHex))
            .collect::<Result<Vec<u8>, KeyError>>()?;
        Ok(Key(bytes))
    }

    /// The key as hex, for handing to an application.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC takes keys of any length.
        #[allow(clippy::unwrap_used)]
        HmacSha256::new_from_slice(&self.0).unwrap()
    }
}

/// Application `app`'s key under node secret `secret`.
pub fn app_key(secret: &Key, app: &str) -> Key {
    let mut m = secret.mac();
    m.update(APP_KEY_LABEL);
    m.update(app.as_bytes());
    Key(m.finalize().into_bytes().to_vec())
}

/// What a client's proof names: the connection's nonces, the daemon's
/// address (the one the client dialed; the daemon checks it against the one
/// the connection reached), the application and what its `Auth` asks.
#[derive(Debug, Clone, Copy)]
pub struct Handshake<'a> {
    pub nonces: Nonces,
    pub daemon: SocketAddr,
    pub app: &'a str,
    pub lease_ms: u64,
    pub lease_only: bool,
}

/// `addr` as both sides name it: an IPv4-mapped address as IPv4, its length
/// first.
fn update_addr(m: &mut HmacSha256, addr: SocketAddr) {
    let addr = SocketAddr::new(addr.ip().to_canonical(), addr.port()).to_string();
    m.update(&(addr.len() as u16).to_le_bytes());
    m.update(addr.as_bytes());
}

fn proof_mac(key: &Key, h: &Handshake<'_>) -> HmacSha256 {
    let mut m = key.mac();
    m.update(PROOF_LABEL);
    m.update(&h.nonces.daemon);
    m.update(&h.nonces.client);
    update_addr(&mut m, h.daemon);
    m.update(&h.lease_ms.to_le_bytes());
    m.update(&[u8::from(h.lease_only)]);
    m.update(h.app.as_bytes());
    m
}

/// The client's answer to the handshake `h` for its application, holding
/// the application's `key`.
pub fn proof(key: &Key, h: &Handshake<'_>) -> [u8; MAC_BYTES] {
    proof_mac(key, h).finalize().into_bytes().into()
}

/// Whether `proof` answers the handshake `h` (the daemon's address being
/// the one the connection reached) under node secret `secret`, compared
/// in constant time.
pub fn verify(secret: &Key, h: &Handshake<'_>, proof: &[u8; MAC_BYTES]) -> bool {
    proof_mac(&app_key(secret, h.app), h).verify_slice(proof).is_ok()
}

/// The nonces of a connection: the daemon's challenge and the client's.
#[derive(Debug, Clone, Copy)]
pub struct Nonces {
    pub daemon: [u8; NONCE_BYTES],
    pub client: [u8; NONCE_BYTES],
}

fn daemon_proof_mac(key: &Key, nonces: &Nonces, daemon: SocketAddr, app: &str) -> HmacSha256 {
    let mut m = key.mac();
    m.update(DAEMON_PROOF_LABEL);
    m.update(&nonces.client);
    m.update(&nonces.daemon);
    update_addr(&mut m, daemon);
    m.update(app.as_bytes());
    m
}

/// The daemon's answer to the client's nonce on a connection that reached
/// it at `daemon`, for application `app` (the daemon derives `key` from its
/// secret with [`app_key`]).
pub fn daemon_proof(key: &Key, nonces: &Nonces, daemon: SocketAddr, app: &str) -> [u8; MAC_BYTES] {
    daemon_proof_mac(key, nonces, daemon, app).finalize().into_bytes().into()
}

/// Whether `proof` is the answer of a daemon at `daemon` (the address the
/// client dialed) to the client's nonce under application `app`'s key
/// `key`, compared in constant time: the client's check that it speaks to
/// the daemon it meant, and that it holds the node secret.
pub fn verify_daemon(
    key: &Key,
    nonces: &Nonces,
    daemon: SocketAddr,
    app: &str,
    proof: &[u8; MAC_BYTES],
) -> bool {
    daemon_proof_mac(key, nonces, daemon, app).verify_slice(proof).is_ok()
}

/// A fresh random nonce from the operating system.
pub fn nonce() -> std::io::Result<[u8; NONCE_BYTES]> {
    let mut n = [0u8; NONCE_BYTES];
    getrandom::getrandom(&mut n).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_verifies_only_for_its_handshake_and_secret() {
        let secret = Key::secret(b"0123456789abcdef0123\n").expect("secret");
        let other = Key::secret(b"fedcba9876543210fedc").expect("secret");
        let h = Handshake {
            nonces: Nonces { daemon: nonce().expect("nonce"), client: nonce().expect("nonce") },
            daemon: "127.0.0.2:7337".parse().expect("addr"),
            app: "app-1",
            lease_ms: 60_000,
            lease_only: false,
        };
        let p = proof(&app_key(&secret, "app-1"), &h);
        assert!(verify(&secret, &h, &p));
        // The same address reached over an IPv4-mapped IPv6 socket.
        let mapped = Handshake { daemon: "[::ffff:127.0.0.2]:7337".parse().expect("addr"), ..h };
        assert!(verify(&secret, &mapped, &p));
        assert!(!verify(&other, &h, &p));
        // Every part of the handshake counts: another app, nonce, daemon
        // address (another node's, another port), lease or kind.
        let mut changed = h.nonces;
        changed.daemon[0] ^= 1;
        let swapped = Nonces { daemon: h.nonces.client, client: h.nonces.daemon };
        for bad in [
            Handshake { app: "app-2", ..h },
            Handshake { nonces: changed, ..h },
            Handshake { nonces: swapped, ..h },
            Handshake { daemon: "127.0.0.1:7337".parse().expect("addr"), ..h },
            Handshake { daemon: "127.0.0.2:7338".parse().expect("addr"), ..h },
            Handshake { lease_ms: 1, ..h },
            Handshake { lease_only: true, ..h },
        ] {
            assert!(!verify(&secret, &bad, &p), "{bad:?}");
        }
        // An application's key does not open another's connection.
        let as_other = Handshake { app: "app-2", ..h };
        assert!(!verify(&secret, &as_other, &proof(&app_key(&secret, "app-1"), &as_other)));
    }

    #[test]
    fn a_daemon_proof_verifies_only_under_its_key_nonces_address_and_app() {
        let secret = Key::secret(b"0123456789abcdef0123").expect("secret");
        let key = app_key(&secret, "app-1");
        let n = Nonces { daemon: nonce().expect("nonce"), client: nonce().expect("nonce") };
        let at: SocketAddr = "127.0.0.2:7337".parse().expect("addr");
        let p = daemon_proof(&key, &n, at, "app-1");
        assert!(verify_daemon(&key, &n, at, "app-1", &p));
        // The same address reached over an IPv4-mapped IPv6 socket.
        let mapped: SocketAddr = "[::ffff:127.0.0.2]:7337".parse().expect("addr");
        assert!(verify_daemon(&key, &n, mapped, "app-1", &p));
        // Another node secret, another daemon's address, the nonces swapped
        // or changed, another app.
        let other = app_key(&Key::secret(b"fedcba9876543210fedc").expect("secret"), "app-1");
        assert!(!verify_daemon(&other, &n, at, "app-1", &p));
        for elsewhere in ["127.0.0.1:7337", "127.0.0.2:7338"] {
            let e: SocketAddr = elsewhere.parse().expect("addr");
            assert!(!verify_daemon(&key, &n, e, "app-1", &p), "{elsewhere}");
        }
        let swapped = Nonces { daemon: n.client, client: n.daemon };
        assert!(!verify_daemon(&key, &swapped, at, "app-1", &p));
        let mut changed = n;
        changed.client[31] ^= 1;
        assert!(!verify_daemon(&key, &changed, at, "app-1", &p));
        assert!(!verify_daemon(&key, &n, at, "app-2", &p));
        // The client's own proof of the same handshake is no daemon proof.
        let h = Handshake { nonces: n, daemon: at, app: "app-1", lease_ms: 0, lease_only: false };
        assert!(!verify_daemon(&key, &n, at, "app-1", &proof(&key, &h)));
    }

    #[test]
    fn keys_round_trip_as_hex_and_hide_in_debug() {
        let k = app_key(&Key::secret(b"0123456789abcdef").expect("secret"), "a");
        assert_eq!(Key::from_hex(&k.to_hex()).expect("hex"), k);
        assert!(!format!("{k:?}").contains(&k.to_hex()[..8]));
        assert!(matches!(Key::secret(b"short"), Err(KeyError::TooShort(5))));
        assert!(Key::from_hex("zz").is_err());
    }
}
