//! Backups: every key of both key spaces as of one point in time, and restoring them into a new
//! data directory.
//!
//! A backup is a directory holding `data.kv` and `meta.kv` (records `[key length u32 BE]
//! [value length u32 BE][key][value]` in key order, read from one fjall cross-keyspace snapshot,
//! so all tables, the schema, the partition maps and the size records are of the same instant:
//! every batch committed before the snapshot and none after) and, written last, `manifest.json`
//! (`{"format": "ringgate-backup", "version": 1, "created_at_ms", "spaces": {name: {"entries",
//! "bytes", "crc32"}}}`). A directory without a manifest is an unfinished backup; restore refuses
//! it, and refuses files whose count or CRC-32 differ from the manifest.
//!
//! Restore loads the records into a fresh store with fjall's bulk ingestion (keys are in order);
//! the server started on it rebuilds its in-memory accounting from the size records as after any
//! restart.

use super::{Result, StorageError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

pub const MANIFEST: &str = "manifest.json";
const FORMAT: &str = "ringgate-backup";
const VERSION: u32 = 1;
/// Progress is reported every this many entries.
const PROGRESS_EVERY: u64 = 100_000;

/// What a backup holds, per key space.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct SpaceSummary {
    pub entries: u64,
    pub bytes: u64,
    pub crc32: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub version: u32,
    pub created_at_ms: i64,
    pub spaces: BTreeMap<String, SpaceSummary>,
}

fn io(what: &str, path: &Path, e: std::io::Error) -> StorageError {
    StorageError::Io(format!("cannot {what} {}: {e}", path.display()))
}

/// Refuses a target that exists and is not an empty directory (nothing is overwritten).
pub fn require_empty_dir(dir: &Path) -> Result<()> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(StorageError::Io(format!(
                    "{} is not empty: give a new or empty directory",
                    dir.display()
                )));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|e| io("create", dir, e))
        }
        Err(e) => Err(io("read", dir, e)),
    }
}

/// Writes one key space's records to `path`; `progress` gets the running entry count.
pub fn write_space<I>(path: &Path, items: I, progress: &dyn Fn(u64)) -> Result<SpaceSummary>
where
    I: Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
{
    let file = std::fs::File::create(path).map_err(|e| io("create", path, e))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut sum = SpaceSummary::default();
    let mut crc = crc32fast::Hasher::new();
    for item in items {
        let (k, v) = item?;
        let head = [
            (k.len() as u32).to_be_bytes(),
            (v.len() as u32).to_be_bytes(),
        ]
        .concat();
        for part in [&head[..], &k, &v] {
            out.write_all(part).map_err(|e| io("write", path, e))?;
            crc.update(part);
            sum.bytes += part.len() as u64;
        }
        sum.entries += 1;
        if sum.entries % PROGRESS_EVERY == 0 {
            progress(sum.entries);
        }
    }
    let file = out
        .into_inner()
        .map_err(|e| io("write", path, e.into_error()))?;
    file.sync_all().map_err(|e| io("sync", path, e))?;
    sum.crc32 = crc.finalize();
    Ok(sum)
}

/// Writes the manifest last (its presence marks the backup complete) and syncs the directory.
pub fn write_manifest(dir: &Path, spaces: BTreeMap<String, SpaceSummary>) -> Result<Manifest> {
    let manifest = Manifest {
        format: FORMAT.into(),
        version: VERSION,
        created_at_ms: chrono::Utc::now().timestamp_millis(),
        spaces,
    };
    let path = dir.join(MANIFEST);
    let text = serde_json::to_vec_pretty(&manifest).expect("a manifest serializes");
    std::fs::write(&path, text).map_err(|e| io("write", &path, e))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(manifest)
}

/// Reads and checks a backup's manifest.
pub fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join(MANIFEST);
    let text = std::fs::read(&path)
        .map_err(|e| io("read (is this a complete ringgate backup?)", &path, e))?;
    let m: Manifest = serde_json::from_slice(&text)
        .map_err(|e| StorageError::Corrupt(format!("{}: {e}", path.display())))?;
    if m.format != FORMAT || m.version != VERSION {
        return Err(StorageError::Corrupt(format!(
            "{}: not a ringgate backup of version {VERSION}",
            path.display()
        )));
    }
    Ok(m)
}

/// Reads one key space's records, calling `put` for each, and checks them against `want`.
pub fn read_space(
    path: &Path,
    want: &SpaceSummary,
    put: &mut dyn FnMut(Vec<u8>, Vec<u8>) -> Result<()>,
) -> Result<()> {
    let file = std::fs::File::open(path).map_err(|e| io("open", path, e))?;
    let mut input = BufReader::with_capacity(1 << 20, file);
    let mut crc = crc32fast::Hasher::new();
    let (mut entries, mut bytes) = (0u64, 0u64);
    // Keys must ascend (the bulk load requires it): a file that breaks the order is refused.
    let mut last: Option<Vec<u8>> = None;
    let corrupt = |what: &str| StorageError::Corrupt(format!("{}: {what}", path.display()));
    loop {
        let mut head = [0u8; 8];
        match input.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(io("read", path, e)),
        }
        let klen = u32::from_be_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        let vlen = u32::from_be_bytes(head[4..].try_into().expect("4 bytes")) as usize;
        if klen > super::MAX_KEY_BYTES || (bytes + 8 + (klen + vlen) as u64) > want.bytes {
            return Err(corrupt("a record runs past the size in the manifest"));
        }
        let mut k = vec![0u8; klen];
        let mut v = vec![0u8; vlen];
        input
            .read_exact(&mut k)
            .and_then(|_| input.read_exact(&mut v))
            .map_err(|_| corrupt("truncated record"))?;
        for part in [&head[..], &k, &v] {
            crc.update(part);
        }
        if last.as_ref().is_some_and(|l| *l >= k) {
            return Err(corrupt("keys out of order"));
        }
        bytes += 8 + (klen + vlen) as u64;
        entries += 1;
        last = Some(k.clone());
        put(k, v)?;
    }
    if entries != want.entries || bytes != want.bytes || crc.finalize() != want.crc32 {
        return Err(corrupt("entries, size or CRC-32 differ from the manifest"));
    }
    Ok(())
}
