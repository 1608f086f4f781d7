//! The answers of the requests one read ran in the connection's read loop, encoded back to back
//! into one buffer and handed to the connection's writer as one message when the read is done.
//!
//! Why: handing each answer to the writer on its own cost an allocation, a copy and a channel
//! send per request (about 1,500 instructions of a prepared point request, a tenth of a read's).
//! The buffer is bounded: the read loop runs at most `INLINE_PER_READ` requests per read, it
//! hands the buffer over when it reaches `MAX_GATHERED_BYTES`, and its bytes count in the
//! connection's `OutBudget` from when they are encoded (so a client that leaves its answers
//! unread still stops the loop from running more). The read loop hands the buffer over before
//! it waits for anything (more bytes, a request slot, room for a body, the writer's queue) and
//! before the connection closes: no answer waits for another request's progress.

use super::out_budget::OutBudget;
use crate::protocol::compression::Compression;
use crate::protocol::response::ResponseExtras;
use bytes::{Bytes, BytesMut};

/// Gathered bytes after which the read loop hands them to the writer without waiting for the
/// read's end (one large answer, or many).
pub(super) const MAX_GATHERED_BYTES: usize = 256 * 1024;

/// Encoded answers not yet handed to the writer.
#[derive(Default)]
pub(super) struct Gathered {
    buf: BytesMut,
}

/// How an answer is framed: the request's version and stream, the connection's compression.
pub(super) struct Framing {
    pub(super) version: u8,
    pub(super) stream: i16,
    pub(super) compression: Compression,
}

impl Gathered {
    /// Encodes `resp` after the answers gathered so far and counts its bytes in `unsent`.
    pub(super) fn push(
        &mut self,
        framing: &Framing,
        resp: &crate::protocol::response::Response,
        extras: &ResponseExtras,
        unsent: &OutBudget,
    ) {
        let start = self.buf.len();
        let f = framing;
        super::connection::encode_into(
            &mut self.buf,
            f.version,
            f.stream,
            resp,
            extras,
            f.compression,
        );
        unsent.queued(self.buf.len() - start);
    }

    /// Whether the buffer should go to the writer now, without waiting for the read's end.
    pub(super) fn is_full(&self) -> bool {
        self.buf.len() >= MAX_GATHERED_BYTES
    }

    /// The gathered answers, if any; the buffer is empty afterwards.
    pub(super) fn take(&mut self) -> Option<Bytes> {
        (!self.buf.is_empty()).then(|| self.buf.split().freeze())
    }
}
