//! What a daemon refuses, spoken to over a raw socket: a wrong key, a
//! request before authentication, a forged frame (bad CRC, bad magic, a
//! length over the limit), a truncated frame. Each gets a typed error
//! frame before the connection closes, and none moves data. And what a
//! client refuses: a process at a daemon's address that cannot prove it
//! holds the node secret, found out before the client sends anything more.

mod common;

use std::time::Duration;

use common::{authed, handshake, node, open, refused_then_closed, secret, WAIT};
use sluice_service::auth::{app_key, daemon_proof, proof, Key, Nonces};
use sluice_service::protocol::{frame, ErrorCode, Message, Section};
use sluice_service::{Client, ClientError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn a_push() -> Message {
    Message::Push {
        shuffle: 0,
        generation: 0,
        map: 0,
        attempt: 1,
        seq: 0,
        sections: vec![Section { partition: 0, records: 1, data: b"r".to_vec() }],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_key_is_refused_before_any_data_moves() {
    let n = node("127.0.0.1", 64 << 20).await;
    let (mut s, nonce) = open(n.addr()).await;
    let wrong = app_key(&Key::secret(b"another node's secret!").expect("secret"), "app");
    let auth = Message::Auth {
        app: "app".into(),
        lease_ms: 1000,
        proof: proof(&wrong, &handshake(nonce, n.addr(), "app", 1000)),
        challenge: [3; 32],
        lease_only: false,
    };
    s.write_all(&frame::encode(&auth)).await.expect("write");
    let m = refused_then_closed(&mut s, ErrorCode::Unauthenticated).await;
    assert!(
        !m.contains(std::str::from_utf8(common::SECRET).expect("utf8")),
        "the secret in an error: {m}"
    );
    // Another application's key, presented as this application, fails too.
    let (mut s, nonce) = open(n.addr()).await;
    let auth = Message::Auth {
        app: "app".into(),
        lease_ms: 1000,
        proof: proof(&app_key(&secret(), "other"), &handshake(nonce, n.addr(), "app", 1000)),
        challenge: [3; 32],
        lease_only: false,
    };
    s.write_all(&frame::encode(&auth)).await.expect("write");
    refused_then_closed(&mut s, ErrorCode::Unauthenticated).await;
    assert_eq!(n.daemon.stats().held_bytes, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_before_authentication_is_refused() {
    let n = node("127.0.0.1", 64 << 20).await;
    let (mut s, _) = open(n.addr()).await;
    s.write_all(&frame::encode(&a_push())).await.expect("write");
    let m = refused_then_closed(&mut s, ErrorCode::Unauthenticated).await;
    assert!(m.contains("Push before authentication"), "{m}");
    assert_eq!(n.daemon.stats().held_bytes, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_truncated_frames_are_refused_with_where() {
    let n = node("127.0.0.1", 64 << 20).await;
    let register =
        frame::encode(&Message::RegisterShuffle { shuffle: 0, generation: 0, partitions: 1 });
    // A flipped payload bit: the CRC catches it.
    let mut s = authed(n.addr(), "app").await;
    let mut bad = frame::encode(&a_push());
    let last = bad.len() - 1;
    bad[last] ^= 1;
    s.write_all(&bad).await.expect("write");
    let m = refused_then_closed(&mut s, ErrorCode::Malformed).await;
    assert!(m.contains("frame 1") && m.contains("CRC32C"), "{m}");
    // Bad magic.
    let mut s = authed(n.addr(), "app").await;
    let mut bad = register.clone();
    bad[0] = b'X';
    s.write_all(&bad).await.expect("write");
    assert!(refused_then_closed(&mut s, ErrorCode::Malformed).await.contains("magic"));
    // A length over the limit is refused from the header alone.
    let mut s = authed(n.addr(), "app").await;
    let mut bad = register.clone();
    bad[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    s.write_all(&bad).await.expect("write");
    assert!(refused_then_closed(&mut s, ErrorCode::Malformed).await.contains("exceeds the limit"));
    // A frame cut short: the daemon sees the end and names the bytes.
    let mut s = authed(n.addr(), "app").await;
    let whole = frame::encode(&a_push());
    s.write_all(&whole[..whole.len() - 3]).await.expect("write");
    s.shutdown().await.expect("half close");
    let m = refused_then_closed(&mut s, ErrorCode::Malformed).await;
    assert!(m.contains(&format!("after {} of {} bytes", whole.len() - 3, whole.len())), "{m}");
    // A well-formed frame that is not a request.
    let mut s = authed(n.addr(), "app").await;
    s.write_all(&frame::encode(&Message::End { blocks: 0, records: 0, bytes: 0 }))
        .await
        .expect("write");
    match frame::read(&mut s, 2, WAIT, "answer").await.expect("frame") {
        Some((Message::Error { code: ErrorCode::BadRequest, .. }, _)) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(n.daemon.stats().held_bytes, 0, "no refused frame stored data");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_authentication_no_frame_larger_than_an_auth_is_read() {
    let n = node("127.0.0.1", 64 << 20).await;
    let (mut s, _) = open(n.addr()).await;
    // A well-formed push of 1 MB, sent instead of an Auth: refused from its
    // header, before the daemon reads or allocates its payload.
    let big = Message::Push {
        shuffle: 0,
        generation: 0,
        map: 0,
        attempt: 1,
        seq: 0,
        sections: vec![Section { partition: 0, records: 1, data: vec![7; 1 << 20] }],
    };
    let bytes = frame::encode(&big);
    s.write_all(&bytes[..64]).await.expect("write");
    let m = refused_then_closed(&mut s, ErrorCode::Malformed).await;
    assert!(m.contains("exceeds the limit of 331"), "{m}");
}

/// A process at a daemon's address that has not the node secret: it
/// challenges, reads the `Auth` and welcomes with `proof`'s answer (given
/// the `Auth` and its own address). Returns what it read after its welcome
/// (the client must send nothing more).
async fn impostor(
    listener: tokio::net::TcpListener,
    proof: fn(&Message, std::net::SocketAddr) -> [u8; 32],
) -> Vec<u8> {
    let at = listener.local_addr().expect("addr");
    let (mut s, _) = listener.accept().await.expect("accept");
    s.write_all(&frame::encode(&Message::Challenge { nonce: [1; 32] })).await.expect("write");
    let auth = match frame::read(&mut s, 0, WAIT, "auth").await.expect("frame") {
        Some((m @ Message::Auth { .. }, _)) => m,
        other => panic!("expected an auth, got {other:?}"),
    };
    let welcome = Message::Welcome { lease_ms: 60_000, proof: proof(&auth, at) };
    s.write_all(&frame::encode(&welcome)).await.expect("write");
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut rest)).await.expect("closed in time");
    rest
}

fn refused_as_impostor(r: Result<Client, ClientError>) {
    match r {
        Err(e @ ClientError::Impostor { .. }) => {
            assert!(e.to_string().contains("node secret"), "{e}")
        }
        other => panic!("expected the impostor found out, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_refuses_a_daemon_that_does_not_prove_itself() {
    let key = app_key(&secret(), "app");
    // Three impostors: one that answers with zeros, one that echoes the
    // client's own proof back, one that holds another cluster's secret and
    // answers correctly under it.
    let answers: [fn(&Message, std::net::SocketAddr) -> [u8; 32]; 3] = [
        |_, _| [0; 32],
        |m, _| match m {
            Message::Auth { proof, .. } => *proof,
            _ => unreachable!(),
        },
        |m, at| match m {
            Message::Auth { challenge, app, .. } => {
                let other = Key::secret(b"another node's secret!").expect("secret");
                let nonces = Nonces { daemon: [1; 32], client: *challenge };
                daemon_proof(&app_key(&other, app), &nonces, at, app)
            }
            _ => unreachable!(),
        },
    ];
    for answer in answers {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let fake = tokio::spawn(impostor(listener, answer));
        refused_as_impostor(Client::connect(addr, "app", &key, Duration::from_secs(60)).await);
        assert!(fake.await.expect("impostor").is_empty(), "the client sent more after the welcome");
    }
    // The real daemon's proof passes.
    let n = node("127.0.0.1", 64 << 20).await;
    Client::connect(n.addr(), "app", &key, Duration::from_secs(60)).await.expect("a real daemon");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impostor_that_relays_the_handshake_to_another_daemon_gets_no_session() {
    // A process at one node's address, without the secret, passes each
    // byte on to a real daemon of the cluster at another node: the client's
    // answer names the address it dialed, so that daemon refuses it (and
    // were it taken, the daemon's proof, naming its own address, would not
    // pass the client's check).
    let n = node("127.0.0.2", 64 << 20).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let real = n.addr();
    let relay = tokio::spawn(async move {
        let (mut client, _) = listener.accept().await.expect("accept");
        let mut daemon = TcpStream::connect(real).await.expect("connect");
        let _ = tokio::io::copy_bidirectional(&mut client, &mut daemon).await;
    });
    let key = app_key(&secret(), "app");
    match Client::connect(addr, "app", &key, Duration::from_secs(60)).await {
        Err(ClientError::Refused { code: ErrorCode::Unauthenticated, .. }) => {}
        other => panic!("expected the relayed answer refused, got {other:?}"),
    }
    tokio::time::timeout(WAIT, relay).await.expect("the relay ended").expect("join");
    assert_eq!(n.daemon.stats().held_bytes, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_refuses_a_clients_answer_relayed_from_another_address() {
    // A process that took one node's address passes a real daemon's
    // challenge (at another node) on to a client, and the client's answer
    // back: the answer names the address the client dialed, so the daemon
    // refuses it, and the relay gets no session as the application (with
    // one it could read the application's data, or end the application).
    let n = node("127.0.0.2", 64 << 20).await;
    let key = app_key(&secret(), "app");
    let mut legit = Client::connect(n.addr(), "app", &key, WAIT).await.expect("the app's own");
    legit.register_shuffle(0, 0, 1).await.expect("register");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let taken = listener.local_addr().expect("addr");
    let real = n.addr();
    let relay = tokio::spawn(async move {
        let (mut victim, _) = listener.accept().await.expect("accept");
        let (mut daemon, nonce) = open(real).await;
        victim.write_all(&frame::encode(&Message::Challenge { nonce })).await.expect("write");
        let auth = match frame::read(&mut victim, 0, WAIT, "auth").await.expect("frame") {
            Some((m @ Message::Auth { .. }, _)) => m,
            other => panic!("expected the client's auth, got {other:?}"),
        };
        daemon.write_all(&frame::encode(&auth)).await.expect("write");
        match frame::read(&mut daemon, 1, WAIT, "answer").await.expect("frame") {
            Some((m, _)) => m,
            None => panic!("the daemon closed without an answer"),
        }
    });
    // The client is left waiting for a welcome: it gives up when the relay
    // ends.
    let client = tokio::spawn(async move {
        let _ = Client::connect(taken, "app", &key, Duration::from_secs(60)).await;
    });
    let answer = tokio::time::timeout(WAIT, relay).await.expect("the relay ended").expect("join");
    match answer {
        Message::Error { code: ErrorCode::Unauthenticated, .. } => {}
        other => panic!("the daemon took a relayed answer: {other:?}"),
    }
    tokio::time::timeout(WAIT, client).await.expect("the client gave up").expect("join");
    // The application's shuffle is still there.
    legit.unregister_shuffle(0).await.expect("the shuffle survived");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_changed_on_the_way_is_refused() {
    // The answer names the lease asked for: one shortened on the way (which
    // would have the daemon delete the application's data at once) fails.
    let n = node("127.0.0.1", 64 << 20).await;
    let (mut s, nonce) = open(n.addr()).await;
    let auth = Message::Auth {
        app: "app".into(),
        lease_ms: 1,
        proof: proof(&app_key(&secret(), "app"), &handshake(nonce, n.addr(), "app", 60_000)),
        challenge: [3; 32],
        lease_only: false,
    };
    s.write_all(&frame::encode(&auth)).await.expect("write");
    refused_then_closed(&mut s, ErrorCode::Unauthenticated).await;
}
