//! A fault-injecting TCP proxy between shardrep and a MariaDB server on
//! loopback: it forwards both ways, reads the client's packets (MySQL
//! client/server protocol: 3-byte length, sequence id, payload; no TLS,
//! no compression, as shardrep connects on loopback), and can lose the
//! server's reply to a COMMIT on an apply channel's connection: the COMMIT
//! reaches the server and runs, the reply is read and thrown away, and
//! both sockets are closed, as when a network drops right after a commit.
//!
//! A connection counts as an apply channel's once it sends the channel's
//! session setup (`SET NAMES binary, time_zone = '+00:00', sql_mode =
//! 'NO_AUTO_VALUE_ON_ZERO'…`, `shardrep::applier::session`); the server's
//! handshake gives its connection id, so a test can also `KILL
//! CONNECTION` the channels' sessions ([`FaultProxy::channel_sessions`]).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The start of an apply channel's session setup.
const CHANNEL_SETUP: &[u8] =
    b"SET NAMES binary, time_zone = '+00:00', sql_mode = 'NO_AUTO_VALUE_ON_ZERO'";

#[derive(Default)]
struct Shared {
    /// Lose the reply of every channel COMMIT while set.
    lose_commit_replies: AtomicBool,
    /// Replies lost so far.
    lost: AtomicU32,
    /// Server connection ids of the open channel connections, with when
    /// each last sent a command.
    channels: Mutex<BTreeMap<u32, Instant>>,
}

/// The proxy: listening on 127.0.0.1 (a port of its own) until the test
/// process ends.
pub struct FaultProxy {
    port: u16,
    shared: Arc<Shared>,
}

impl FaultProxy {
    /// Starts a proxy to `target` (`127.0.0.1:PORT`).
    pub fn start(target: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared::default());
        let accepting = shared.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(target) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let shared = accepting.clone();
                std::thread::spawn(move || relay(client, server, shared));
            }
        });
        FaultProxy { port, shared }
    }

    /// The port shardrep connects to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Lose (`true`) or forward the reply of every COMMIT an apply
    /// channel sends from now on.
    pub fn lose_commit_replies(&self, on: bool) {
        self.shared.lose_commit_replies.store(on, Ordering::SeqCst);
    }

    /// How many COMMIT replies were lost so far.
    pub fn lost_replies(&self) -> u32 {
        self.shared.lost.load(Ordering::SeqCst)
    }

    /// The server connection ids of the apply channels' open sessions
    /// that sent a command within `within` (busy ones, not idle).
    pub fn busy_channel_sessions(&self, within: Duration) -> Vec<u32> {
        self.shared
            .channels
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, last)| last.elapsed() <= within)
            .map(|(id, _)| *id)
            .collect()
    }
}

/// Whether a COM_QUERY text commits: `COMMIT`, or a compound block that
/// ends with its COMMIT.
fn commits(text: &[u8]) -> bool {
    let text = String::from_utf8_lossy(text);
    let text = text.trim();
    text.eq_ignore_ascii_case("COMMIT") || text.ends_with("COMMIT;\nEND")
}

fn relay(client: TcpStream, server: TcpStream, shared: Arc<Shared>) {
    let lose_next_reply = Arc::new(AtomicBool::new(false));
    let session = Arc::new(AtomicU32::new(0));
    let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let replies = {
        let (lose, session, shared) = (lose_next_reply.clone(), session.clone(), shared.clone());
        std::thread::spawn(move || server_to_client(s2, c2, &lose, &session, &shared))
    };
    client_to_server(client, server, &lose_next_reply, &session, &shared);
    let _ = replies.join();
    let id = session.load(Ordering::SeqCst);
    shared.channels.lock().unwrap().remove(&id);
}

fn close(a: &TcpStream, b: &TcpStream) {
    let _ = a.shutdown(Shutdown::Both);
    let _ = b.shutdown(Shutdown::Both);
}

fn client_to_server(
    mut client: TcpStream,
    mut server: TcpStream,
    lose_next_reply: &AtomicBool,
    session: &AtomicU32,
    shared: &Shared,
) {
    let mut channel = false;
    loop {
        let mut header = [0u8; 4];
        if client.read_exact(&mut header).is_err() {
            break;
        }
        let len =
            usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
        let mut payload = vec![0u8; len];
        if client.read_exact(&mut payload).is_err() {
            break;
        }
        if payload.first() == Some(&0x03) {
            let text = &payload[1..];
            if text.starts_with(CHANNEL_SETUP) && !channel {
                channel = true;
            }
            if channel {
                shared
                    .channels
                    .lock()
                    .unwrap()
                    .insert(session.load(Ordering::SeqCst), Instant::now());
            }
            if channel && commits(text) && shared.lose_commit_replies.load(Ordering::SeqCst) {
                // Set before the COMMIT goes out: its reply is the next
                // thing the server sends on this connection.
                lose_next_reply.store(true, Ordering::SeqCst);
            }
        }
        // One write per packet (with TCP_NODELAY: no Nagle stall).
        let mut packet = header.to_vec();
        packet.extend_from_slice(&payload);
        if server.write_all(&packet).is_err() {
            break;
        }
    }
    close(&client, &server);
}

fn server_to_client(
    mut server: TcpStream,
    mut client: TcpStream,
    lose_next_reply: &AtomicBool,
    session: &AtomicU32,
    shared: &Shared,
) {
    // The handshake: protocol version (1 byte), the server version (NUL
    // terminated), then the connection id (4 bytes, little-endian).
    let mut header = [0u8; 4];
    if server.read_exact(&mut header).is_err() {
        close(&client, &server);
        return;
    }
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    let mut payload = vec![0u8; len];
    if server.read_exact(&mut payload).is_err() {
        close(&client, &server);
        return;
    }
    if let Some(nul) = payload.iter().skip(1).position(|&b| b == 0) {
        let at = 1 + nul + 1;
        if let Some(id) = payload.get(at..at + 4) {
            session.store(
                u32::from_le_bytes([id[0], id[1], id[2], id[3]]),
                Ordering::SeqCst,
            );
        }
    }
    let mut packet = header.to_vec();
    packet.extend_from_slice(&payload);
    if client.write_all(&packet).is_err() {
        close(&client, &server);
        return;
    }
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match server.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if lose_next_reply.load(Ordering::SeqCst) {
            shared.lost.fetch_add(1, Ordering::SeqCst);
            break;
        }
        if client.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    close(&client, &server);
}
