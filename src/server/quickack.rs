//! Acknowledge a partly received request at once (TCP_QUICKACK), so clients that send a request
//! in pieces with Nagle's algorithm on do not wait for our delayed ACK.
//!
//! Why: the DataStax Python driver leaves Nagle on and writes a request above 4 KiB as 4 KiB
//! `send()`s. The kernel sends the first piece and holds the next until the first is ACKed,
//! while our side, which answers only after the whole frame, delays that ACK (Linux: 40 ms in
//! request/response "pingpong" mode). Every such request stalled ~44 ms. Setting TCP_QUICKACK
//! after a read that left a frame incomplete sends the pending ACK immediately; the kernel
//! clears the flag again on its own, so it is set per read, and only when a frame is partial
//! (small requests cost no extra system call).

#[cfg(unix)]
use std::os::unix::io::RawFd;

/// The socket of one connection, for `TCP_QUICKACK`.
#[derive(Clone, Copy, Debug)]
pub struct QuickAck {
    #[cfg(unix)]
    fd: RawFd,
}

impl QuickAck {
    /// `fd` must stay open as long as this value is used: the connection's reader holds it
    /// while its stream (which owns the descriptor) is alive.
    #[cfg(unix)]
    pub fn new(fd: RawFd) -> QuickAck {
        QuickAck { fd }
    }

    /// Sends any delayed ACK now. Errors (not a TCP socket, e.g. in tests) are ignored: the
    /// only cost of not acknowledging early is latency.
    #[cfg(target_os = "linux")]
    pub fn ack_now(&self) {
        let on: libc::c_int = 1;
        // SAFETY: `fd` is an open socket descriptor (see `new`); the option value is a c_int
        // that lives across the call and its size is passed with it.
        unsafe {
            libc::setsockopt(
                self.fd,
                libc::IPPROTO_TCP,
                libc::TCP_QUICKACK,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }

    /// Other systems have no TCP_QUICKACK.
    #[cfg(not(target_os = "linux"))]
    pub fn ack_now(&self) {}
}
