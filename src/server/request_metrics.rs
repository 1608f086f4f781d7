//! Counts each statement request (QUERY, PREPARE, EXECUTE, BATCH) in the metrics registry by
//! operation and outcome, with its latency.

use crate::metrics::{global, Operation, Outcome};
use crate::protocol::request::Request;
use crate::protocol::response::{error_code, Response};
use std::time::Instant;

/// Records a request answered with `response`, started at `started`.
pub fn record(request: &Request, response: &Response, started: Instant) {
    let op = match request {
        Request::Query(_) => Operation::Query,
        Request::Prepare(_) => Operation::Prepare,
        Request::Execute(_) => Operation::Execute,
        Request::Batch(_) => Operation::Batch,
        _ => return,
    };
    global().request(op, outcome(response), started.elapsed());
}

fn outcome(response: &Response) -> Outcome {
    match response {
        Response::Error(e) => match e.code {
            error_code::OVERLOADED => Outcome::Throttled,
            error_code::READ_TIMEOUT | error_code::WRITE_TIMEOUT => Outcome::Timeout,
            _ => Outcome::Error,
        },
        Response::Relayed {
            opcode: crate::protocol::frame::Opcode::Error,
            ..
        } => Outcome::Error,
        _ => Outcome::Success,
    }
}
