//! An etcd process for one test: found through RINGGATE_ETCD_BIN, the env file that
//! scripts/install-cluster-deps writes (`.cluster-deps/env` in the project),
//! or `etcd` on PATH; started on free ports with `--unsafe-no-fsync` where it has it (tests
//! need no durability across power loss) and killed when dropped.

use ringgate::cluster::{Control, NodeLease};
use ringgate::etcd::{ClientOptions, EtcdClient};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Lease TTL of the tests (etcd's TTL unit is a second; its minimum is about 2 s). 3 s gives
/// renewals (every TTL/3) two misses of slack on a loaded machine.
pub const TTL_MS: u64 = 3000;

/// Starts of a new etcd, each on fresh ports, before a port collision fails the test.
const START_TRIES: u32 = 3;

fn etcd_binary() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("RINGGATE_ETCD_BIN") {
        return Some(PathBuf::from(p));
    }
    let env_file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".cluster-deps/env");
    if let Ok(text) = std::fs::read_to_string(env_file) {
        let bin = text
            .lines()
            .find_map(|l| l.strip_prefix("RINGGATE_ETCD_BIN="));
        if let Some(bin) = bin.filter(|b| PathBuf::from(b).exists()) {
            return Some(PathBuf::from(bin));
        }
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("etcd"))
        .find(|p| p.exists())
}

/// `--unsafe-no-fsync` where this etcd has it (3.5 does; Debian's 3.4 may not).
fn no_fsync_flag(bin: &PathBuf) -> Option<&'static str> {
    let help = Command::new(bin).arg("--help").output().ok()?;
    let text = [help.stdout, help.stderr].concat();
    let has = text.windows(17).any(|w| w == b"--unsafe-no-fsync");
    has.then_some("--unsafe-no-fsync")
}

// A test crate that includes several of these shared files loads it once per file: harmless.
#[allow(clippy::duplicate_mod)]
#[path = "../common/ports.rs"]
mod ports;
use ports::free_port;

pub struct Etcd {
    child: Option<Child>,
    bin: PathBuf,
    pub dir: tempfile::TempDir,
    pub client_port: u16,
    peer_port: u16,
}

impl Etcd {
    /// A running etcd, or None (after saying so) when there is no binary and
    /// RINGGATE_REQUIRE_ETCD is unset.
    pub async fn start(test: &str) -> Option<Etcd> {
        let Some(bin) = etcd_binary() else {
            if std::env::var_os("RINGGATE_REQUIRE_ETCD").is_some() {
                panic!("{test}: no etcd binary (run scripts/install-cluster-deps)");
            }
            eprintln!("SKIPPED {test}: no etcd binary (scripts/install-cluster-deps installs one)");
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("ringgate-etcd-")
            .tempdir()
            .unwrap();
        let mut etcd = Etcd {
            child: None,
            bin,
            dir,
            client_port: free_port(),
            peer_port: free_port(),
        };
        // A port taken between choosing and binding it (see `ports.rs`): fresh ports, a
        // fresh data directory (etcd keeps its peer URL there), bounded.
        for _ in 1..START_TRIES {
            match etcd.try_spawn().await {
                Err(log) if log.contains("address already in use") => {
                    let _ = std::fs::remove_dir_all(etcd.dir.path().join("data"));
                    etcd.client_port = free_port();
                    etcd.peer_port = free_port();
                }
                Err(log) => panic!("etcd did not start; log: {log}"),
                Ok(()) => return Some(etcd),
            }
        }
        etcd.spawn().await;
        Some(etcd)
    }

    /// Starts (or restarts) the process on the same ports and data directory; waits until it
    /// answers.
    pub async fn spawn(&mut self) {
        if let Err(log) = self.try_spawn().await {
            panic!("etcd did not start; log: {log}");
        }
    }

    /// As `spawn`; what it logged when the process exits or does not answer within 60 s.
    async fn try_spawn(&mut self) -> Result<(), String> {
        let logged = self.log().len();
        let client = format!("http://127.0.0.1:{}", self.client_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("etcd.log"))
            .unwrap();
        let child = Command::new(&self.bin)
            .args(["--name", "t", "--data-dir"])
            .arg(self.dir.path().join("data"))
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &format!("t={peer}")])
            .args(no_fsync_flag(&self.bin))
            .args(["--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start etcd");
        self.child = Some(child);
        let probe = self.client();
        let deadline = Instant::now() + Duration::from_secs(60);
        while probe.get(b"probe").await.is_err() {
            if Instant::now() >= deadline {
                return Err(format!("(no answer within 60 s) {}", &self.log()[logged..]));
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok()?) {
                self.child = None;
                return Err(format!("(exited: {status}) {}", &self.log()[logged..]));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default()
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    pub fn client(&self) -> Arc<EtcdClient> {
        Arc::new(EtcdClient::new(&[self.endpoint()], options()).unwrap())
    }

    pub fn control(&self, root: &str) -> Control {
        Control::new(self.client(), root)
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }

    pub fn signal(&self, sig: i32) {
        assert_eq!(unsafe { libc::kill(self.pid(), sig) }, 0);
    }

    /// kill -9, and reap.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        if let Some(c) = &self.child {
            unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
        }
        self.kill9();
    }
}

/// Short deadlines: a test of a dead etcd finishes in seconds.
pub fn options() -> ClientOptions {
    ClientOptions {
        request_timeout_ms: 2000,
        connect_timeout_ms: 300,
        ..ClientOptions::default()
    }
}

pub async fn lease(ctl: &Control) -> NodeLease {
    NodeLease::grant(ctl.client.clone(), TTL_MS)
        .await
        .expect("grant a lease")
}

/// Polls `f` every 100 ms until it is true; false after `limit`.
pub async fn eventually<F, Fut>(limit: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}
