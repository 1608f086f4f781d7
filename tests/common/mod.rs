//! Starts a real `ringgate` server process for integration tests.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    child: Option<Child>,
    pub addr: String,
    pub data: tempfile::TempDir,
    pub log: PathBuf,
    extra: Vec<String>,
}

mod ports;
pub use ports::free_port;

impl Server {
    pub fn start(extra: &[&str]) -> Server {
        let data = tempfile::tempdir().expect("tempdir");
        let addr = format!("127.0.0.1:{}", free_port());
        let log = data.path().join("server.log");
        let mut s = Server {
            child: None,
            addr,
            data,
            log,
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_ringgate"))
            .arg("serve")
            .arg("--listen")
            .arg(&self.addr)
            .arg("--data-dir")
            .arg(self.data.path().join("db"))
            // Driver tests load data into tables without throughput: account RU, never throttle
            // (the throttle is tested by tests/python/test_throughput.py).
            .args(["--set", "throughput.enforce=false"])
            // Tests start servers in parallel: no HTTP listener on the shared default port.
            .args(["--set", "http.enabled=false"])
            .args(&self.extra)
            .stdout(Stdio::from(log.try_clone().expect("log")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start ringgate");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if TcpStream::connect(&self.addr).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("server did not start:\n{}", self.log_text());
    }

    pub fn log_text(&self) -> String {
        let f = std::fs::File::open(&self.log).expect("log");
        BufReader::new(f)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// `kill -9` and start again on the same data directory and port.
    pub fn kill9_restart(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.spawn();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
