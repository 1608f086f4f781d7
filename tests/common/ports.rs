//! Free TCP ports for the processes tests start (ringgate, etcd, PostgreSQL).
//!
//! Why not simply bind port 0 and hand the port on: the kernel picks such a port from the
//! ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`, 32768-60999 by default), the same
//! range every outgoing connection's local port comes from. Between the test closing its probe
//! socket and the child binding the port, any client connection on the machine (pytest's
//! drivers run beside the Rust tests) may take it; a CI run once failed that way ("bind:
//! address already in use" from etcd). So ports come from below that range, where no outgoing
//! connection goes: a random one, checked free by binding it, never handed out twice by one
//! process. Two test processes picking the same port at once is left as the one (rare) race.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;
use std::sync::Mutex;

/// The lowest port handed out: above the well-known and most registered services' ports.
const LOW_PORT: u16 = 20000;

/// Candidates tried before giving up (each a bind).
const TRIES: u32 = 1000;

static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A port of 127.0.0.1 free now, below the ephemeral range, not handed out before by this
/// process.
pub fn free_port() -> u16 {
    let high = ephemeral_low().max(LOW_PORT + 1000);
    let seed = std::collections::hash_map::RandomState::new();
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let given = given.get_or_insert_with(HashSet::new);
    for attempt in 0..TRIES {
        let mut h = seed.build_hasher();
        h.write_u32(attempt);
        let port = LOW_PORT + (h.finish() % u64::from(high - LOW_PORT)) as u16;
        if given.contains(&port) || TcpListener::bind(("127.0.0.1", port)).is_err() {
            continue;
        }
        given.insert(port);
        return port;
    }
    panic!("no free port in [{LOW_PORT}, {high}) after {TRIES} tries");
}

/// The first port of the kernel's ephemeral range (32768 if it cannot be read).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768)
}
