//! A PostgreSQL server for the contract tests: `initdb` into a temporary directory as an
//! unprivileged user (PostgreSQL refuses root; `RINGGATE_PG_USER`, default `ringgate-pg`,
//! created by `scripts/install-cluster-deps`), `pg_ctl start` on a free 127.0.0.1 port, one
//! server for the whole test binary and one database per test. A watchdog shell stops it
//! (`pg_ctl stop -m immediate`) and removes the directory once this process has exited, since
//! a Rust test binary has no "after all tests" hook.
//!
//! The binaries: `RINGGATE_PG_BIN`, else the `RINGGATE_PG_BIN` line of `.cluster-deps/env`
//! (written by `scripts/install-cluster-deps`), else Debian's `/usr/lib/postgresql/*/bin`.
//! Without them the PostgreSQL half of each test is skipped with a loud message, unless
//! `RINGGATE_REQUIRE_POSTGRES` is set (as `scripts/test` does): then the tests fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

pub struct PgServer {
    pub port: u16,
    bin: PathBuf,
    user: Option<String>,
    dbs: AtomicU32,
}

static SERVER: OnceLock<Option<PgServer>> = OnceLock::new();

/// The shared server, started on first use (None: no binaries, and not required).
pub fn server() -> Option<&'static PgServer> {
    SERVER.get_or_init(start).as_ref()
}

fn bin_dir() -> Option<PathBuf> {
    let from_file = || {
        let env = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cluster-deps/env");
        let text = std::fs::read_to_string(env).ok()?;
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("RINGGATE_PG_BIN="))?;
        Some(PathBuf::from(line.trim()))
    };
    let debian = || {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .collect();
        dirs.sort();
        dirs.pop()
    };
    let found = std::env::var_os("RINGGATE_PG_BIN")
        .map(PathBuf::from)
        .or_else(from_file)
        .or_else(debian);
    found.filter(|d| d.join("initdb").exists() && d.join("pg_ctl").exists())
}

fn start() -> Option<PgServer> {
    let Some(bin) = bin_dir() else {
        let msg = "no PostgreSQL server binaries (run scripts/install-cluster-deps)";
        if std::env::var_os("RINGGATE_REQUIRE_POSTGRES").is_some() {
            panic!("RINGGATE_REQUIRE_POSTGRES is set but there are {msg}");
        }
        eprintln!("\n!!!!! SKIPPING the PostgreSQL backend's contract tests: {msg} !!!!!\n");
        return None;
    };
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let user = root.then(|| std::env::var("RINGGATE_PG_USER").unwrap_or("ringgate-pg".into()));
    let dir = std::env::temp_dir().join(format!("ringgate-pg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    if let Some(u) = &user {
        run(Command::new("chown").arg(u).arg(&dir), "chown");
    }
    let port = free_port();
    let server = PgServer {
        port,
        bin,
        user,
        dbs: AtomicU32::new(0),
    };
    let data = dir.join("data");
    let mut initdb = server.cmd("initdb");
    initdb.args([
        "-U",
        "postgres",
        "-A",
        "trust",
        "--no-sync",
        "-E",
        "UTF8",
        "-D",
    ]);
    run(initdb.arg(&data), "initdb");
    let opts = format!(
        "-p {port} -h 127.0.0.1 -k {} -c fsync=off -c max_connections=200",
        dir.display()
    );
    let mut ctl = server.cmd("pg_ctl");
    ctl.args(["-w", "-o", &opts, "-l"]).arg(dir.join("log"));
    run(ctl.arg("-D").arg(&data).arg("start"), "pg_ctl start");
    let stop = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {pg_ctl} -D {data} stop -m immediate; \
         rm -rf {dir}",
        pid = std::process::id(),
        pg_ctl = server.shell_cmd("pg_ctl"),
        data = data.display(),
        dir = dir.display()
    );
    // Not waited for: it outlives this process on purpose.
    #[allow(clippy::zombie_processes)]
    Command::new("sh")
        .args(["-c", &stop])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start the PostgreSQL watchdog");
    Some(server)
}

impl PgServer {
    /// A PostgreSQL binary, run as the unprivileged user when we are root.
    fn cmd(&self, name: &str) -> Command {
        let exe = self.bin.join(name);
        match &self.user {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", u, "--"]).arg(exe);
                c
            }
            None => Command::new(exe),
        }
    }

    fn shell_cmd(&self, name: &str) -> String {
        let exe = self.bin.join(name).display().to_string();
        match &self.user {
            Some(u) => format!("runuser -u {u} -- {exe}"),
            None => exe,
        }
    }

    /// A new, empty database; its connection string.
    pub fn new_database(&self, name: &str) -> String {
        let n = self.dbs.fetch_add(1, Ordering::Relaxed);
        let db: String = format!("{name}_{n}")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let mut c = self.cmd("createdb");
        c.args([
            "-h",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-U",
            "postgres",
            &db,
        ]);
        run(&mut c, "createdb");
        format!(
            "host=127.0.0.1 port={} user=postgres dbname={db}",
            self.port
        )
    }
}

impl PgServer {
    /// Runs `sql` through psql in database `db`, as the superuser.
    pub fn sql(&self, db: &str, sql: &str) {
        self.query(db, sql);
    }

    /// Runs `sql` in database `db`; its output rows, one a line, columns split by `|`.
    pub fn query(&self, db: &str, sql: &str) -> String {
        let mut c = self.cmd("psql");
        c.args([
            "-h",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-U",
            "postgres",
        ])
        .args(["-d", db, "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql]);
        String::from_utf8_lossy(&run(&mut c, "psql")).into_owned()
    }
}

// A test crate that includes several of these shared files loads it once per file: harmless.
#[allow(clippy::duplicate_mod)]
#[path = "../common/ports.rs"]
mod ports;
use ports::free_port;

fn run(c: &mut Command, what: &str) -> Vec<u8> {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}
