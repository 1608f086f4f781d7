//! The bounded run of every fuzz target, inside `cargo test`: each target's body
//! (`fuzz/bodies/`, the code the libFuzzer targets of `scripts/fuzz` run) gets its committed
//! seed corpus (`fuzz/corpus/TARGET`), then mutations of it for `RINGGATE_FUZZ_SECONDS` (default
//! 2) per target.
//!
//! Why here and not libFuzzer: the instrumented build of the targets compiles every dependency
//! once more (about 11 CPU-minutes from a clean clone, a fifth of the whole gate's work on two
//! cores); this run reuses the test build. What it lacks is coverage guidance, which is what
//! `scripts/fuzz SECONDS` is for. The mutations are seeded (`RINGGATE_FUZZ_SEED`, default
//! fixed), so a failure repeats; a failing input is saved as
//! `fuzz/artifacts/TARGET/bounded-<hash>`, which the libFuzzer target reproduces:
//! `fuzz/target/<host>/release/TARGET fuzz/artifacts/TARGET/bounded-<hash>`.

#[path = "../fuzz/bodies/cql.rs"]
mod cql;
#[path = "../fuzz/bodies/frame.rs"]
mod frame;
#[path = "../fuzz/bodies/literal.rs"]
mod literal;
#[path = "../fuzz/bodies/paging.rs"]
mod paging;
#[path = "../fuzz/bodies/request.rs"]
mod request;
#[path = "../fuzz/bodies/row.rs"]
mod row;
#[path = "../fuzz/bodies/segment.rs"]
mod segment;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// libFuzzer's `-max_len` in `scripts/fuzz`.
const MAX_INPUT_BYTES: usize = 65536;
/// Mutations stacked on one corpus entry before the next is picked.
const MAX_STACKED: u32 = 8;
/// The unoptimized test build recurses with bigger frames than the release server: the run
/// gets a stack to match (a stack overflow aborts the whole test binary, a finding too).
const STACK_BYTES: usize = 64 << 20;

/// Values that sit on boundaries of lengths, counts and kinds.
const INTERESTING_U32: [u32; 8] = [
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
];

/// xorshift64*: small, seeded, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in 0..n (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("seed corpus {}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .collect();
    files.sort();
    let seeds: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(f).expect("corpus file"))
        .collect();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    seeds
}

/// One mutation of `input` in place (it may grow up to `MAX_INPUT_BYTES`).
fn mutate(input: &mut Vec<u8>, seeds: &[Vec<u8>], rng: &mut Rng) {
    let len = input.len();
    match rng.below(8) {
        0 if len > 0 => {
            let i = rng.below(len);
            input[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            input[i] = rng.next() as u8;
        }
        2 if len >= 4 => {
            let i = rng.below(len - 3);
            let v = INTERESTING_U32[rng.below(INTERESTING_U32.len())];
            input[i..i + 4].copy_from_slice(&v.to_be_bytes());
        }
        3 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(16));
            input.drain(at..at + n);
        }
        4 => {
            let at = rng.below(len + 1);
            let n = 1 + rng.below(16);
            let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            input.splice(at..at, bytes);
        }
        5 if len > 0 => {
            input.truncate(rng.below(len));
        }
        6 if len > 0 => {
            // A copy of a stretch of itself (repeated fields, nested values).
            let from = rng.below(len);
            let n = 1 + rng.below((len - from).min(64));
            let piece = input[from..from + n].to_vec();
            let at = rng.below(len + 1);
            input.splice(at..at, piece);
        }
        _ => {
            // Splice: a prefix of this input, then a suffix of another seed.
            let other = &seeds[rng.below(seeds.len())];
            let keep = rng.below(len + 1);
            let from = rng.below(other.len() + 1);
            input.truncate(keep);
            input.extend_from_slice(&other[from..]);
        }
    }
    input.truncate(MAX_INPUT_BYTES);
}

/// The environment variable `name` parsed, or `default` when it is unset or does not parse.
fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Runs `body` on `input`; a panic saves the input and fails the test with where it is.
fn check(target: &str, body: fn(&[u8]), input: &[u8]) {
    if std::panic::catch_unwind(|| body(input)).is_ok() {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/artifacts")
        .join(target);
    let hash = crc32fast::hash(input);
    let path = dir.join(format!("bounded-{hash:08x}"));
    let saved = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, input));
    panic!(
        "fuzz target {target} panicked on an input of {} bytes, saved as {} ({saved:?})",
        input.len(),
        path.display()
    );
}

/// The seeds, then mutations until the time is up; returns the inputs run.
fn bounded(target: &'static str, body: fn(&[u8])) -> u64 {
    let run = move || {
        let seeds = corpus(target);
        for s in &seeds {
            check(target, body, s);
        }
        let seed: u64 = setting("RINGGATE_FUZZ_SEED", 0x5eed_f022);
        let mut rng = Rng(seed ^ crc32fast::hash(target.as_bytes()) as u64 | 1);
        let seconds: f64 = setting("RINGGATE_FUZZ_SECONDS", 2.0);
        let deadline = Instant::now() + Duration::from_secs_f64(seconds);
        let mut runs = seeds.len() as u64;
        while Instant::now() < deadline {
            let mut input = seeds[rng.below(seeds.len())].clone();
            for _ in 0..1 + rng.below(MAX_STACKED as usize) {
                mutate(&mut input, &seeds, &mut rng);
                check(target, body, &input);
                runs += 1;
            }
        }
        runs
    };
    let runs = std::thread::Builder::new()
        .name(format!("fuzz-{target}"))
        .stack_size(STACK_BYTES)
        .spawn(run)
        .expect("spawn")
        .join()
        .unwrap_or_else(|_| panic!("fuzz target {target} failed (above)"));
    eprintln!("fuzz target {target}: {runs} inputs");
    runs
}

/// One test per target, named after it (`cargo test --test fuzz_bounded row`).
macro_rules! bounded_tests {
    ($($target:ident),*) => {$(
        #[test]
        fn $target() {
            assert!(bounded(stringify!($target), $target::run) > 0);
        }
    )*};
}

bounded_tests!(cql, frame, literal, paging, request, row, segment);

/// The mutator itself: it stays within its bound and, from one seed, reaches many inputs.
#[test]
fn mutations_vary_and_stay_bounded() {
    let seeds = vec![b"SELECT * FROM ks.t WHERE id = 1".to_vec()];
    let mut rng = Rng(7);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..1000 {
        let mut input = seeds[0].clone();
        mutate(&mut input, &seeds, &mut rng);
        assert!(input.len() <= MAX_INPUT_BYTES);
        seen.insert(input);
    }
    assert!(seen.len() > 500, "{} distinct inputs of 1000", seen.len());
}

/// A body that panics fails the run, with its input saved where the message says.
#[test]
fn a_finding_is_saved_and_fails() {
    fn picky(data: &[u8]) {
        assert!(!data.starts_with(b"boom"), "found it");
    }
    let input = b"boom: the input that breaks it";
    let outcome = std::panic::catch_unwind(|| check("selftest", picky, input));
    let message = *outcome
        .expect_err("the finding must fail the run")
        .downcast::<String>()
        .expect("a message");
    let saved = message
        .split("saved as ")
        .nth(1)
        .and_then(|s| s.split(" (").next())
        .expect("the saved path in the message");
    assert_eq!(std::fs::read(saved).expect("the saved input"), input);
    std::fs::remove_dir_all(Path::new(saved).parent().expect("its directory")).expect("clean up");
    check("selftest", picky, b"fine");
}
