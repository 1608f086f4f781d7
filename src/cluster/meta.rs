//! `storage::MetaStore` on etcd: schema, partition maps and server records as keys under
//! `<root>meta/`, so every node sees one copy; plus a compare-and-swap commit for changes that
//! must not be lost to a concurrent writer (two nodes creating the same table end with one).
//!
//! Compare-and-swap: [`EtcdMetaStore::meta_get_versioned`] returns a value with its etcd mod
//! revision (0: absent); [`EtcdMetaStore::meta_commit_if`]`(key, revision, writes)` applies the
//! writes only if the key is still at that revision, else `StorageError::Conflict` (nothing
//! written; read again, re-apply the change, retry). The schema layer will read the schema
//! document versioned, apply the DDL, and commit it if unchanged: the loser re-reads and sees
//! the table, answering AlreadyExists.
//!
//! Sizes: etcd refuses requests over `--max-request-bytes` (1.5 MiB by default), so a commit
//! carries at most [`MAX_META_COMMIT_BYTES`] of keys and values (1 MiB, leaving room for the
//! encoding) and at most 128 operations; larger ones are refused with an error naming the
//! size, not split (a split commit would not be atomic). The schema document (one JSON value,
//! `schema/catalog.rs`) grows by about 1.8 KB per table of 10 columns with default options
//! (measured: 200 such tables, 359 KB), so about 580 such tables fit; past that, DDL fails
//! with that error until the schema is kept as one key per keyspace or table (left for later).
//!
//! The trait is synchronous (fjall is): calls run on the store's own one-thread tokio runtime
//! and the caller blocks, as it does on disk I/O with the embedded store. Every request has a
//! deadline (`ClientOptions::request_timeout_ms`), so a call never hangs on a dead etcd; it
//! fails with `StorageError::Unavailable` (retryable).

use super::Control;
use crate::etcd::{prefix_end, Compare, EtcdClient, EtcdError, Op, Txn, MAX_TXN_OPS};
use crate::storage::{HexKey, MetaStore, Result, ScanIter, StorageError};
use bytes::Bytes;
use std::future::Future;
use std::ops::Bound;
use std::sync::Arc;

/// Keys plus values of one commit (etcd's request limit is 1.5 MiB by default).
pub const MAX_META_COMMIT_BYTES: usize = 1 << 20;
/// Keys per range request of a scan: with values of at most 1 MiB an answer stays well under
/// the client's response bound.
const SCAN_PAGE: i64 = 16;
/// A scan of more keys, or more bytes of keys and values, than this fails (metadata is small
/// by design; a scan is collected before it is returned, so that its pages read one revision
/// without holding the caller's iterator across requests).
pub const MAX_META_SCAN_KEYS: usize = 1_000_000;
pub const MAX_META_SCAN_BYTES: usize = 256 << 20;

pub struct EtcdMetaStore {
    client: Arc<EtcdClient>,
    prefix: Vec<u8>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for EtcdMetaStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdMetaStore")
            .field("prefix", &String::from_utf8_lossy(&self.prefix))
            .finish()
    }
}

fn storage_error(e: EtcdError) -> StorageError {
    if e.is_retryable() {
        StorageError::Unavailable(e.to_string())
    } else {
        StorageError::Io(e.to_string())
    }
}

impl EtcdMetaStore {
    pub fn new(ctl: &Control) -> std::io::Result<EtcdMetaStore> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("etcd-meta")
            .enable_all()
            .build()?;
        Ok(EtcdMetaStore {
            client: ctl.client.clone(),
            prefix: ctl.key("meta/"),
            runtime: Some(runtime),
        })
    }

    /// Runs `f` on the store's runtime and waits for it (callable from any thread, also from
    /// within another runtime's worker).
    fn block<T: Send + 'static>(&self, f: impl Future<Output = T> + Send + 'static) -> Result<T> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let rt = self.runtime.as_ref().expect("runtime lives until drop");
        rt.spawn(async move {
            let _ = tx.send(f.await);
        });
        rx.recv()
            .map_err(|_| StorageError::Unavailable("etcd metadata runtime stopped".into()))
    }

    fn full_key(&self, key: &[u8]) -> Vec<u8> {
        [&self.prefix[..], key].concat()
    }

    /// The value and its mod revision (the token for [`meta_commit_if`](Self::meta_commit_if)).
    pub fn meta_get_versioned(&self, key: &[u8]) -> Result<Option<(Bytes, i64)>> {
        let (client, key) = (self.client.clone(), self.full_key(key));
        let kv = self
            .block(async move { client.get(&key).await })?
            .map_err(storage_error)?;
        Ok(kv.map(|kv| (Bytes::from(kv.value), kv.mod_revision)))
    }

    /// The key's mod revision (0: absent), without reading its value.
    pub fn meta_revision(&self, key: &[u8]) -> Result<i64> {
        let (client, key) = (self.client.clone(), self.full_key(key));
        let r = self
            .block(async move { client.mod_revision(&key).await })?
            .map_err(storage_error)?;
        Ok(r.unwrap_or(0))
    }

    /// Applies `writes` atomically if `key` is still at `revision` (0: still absent);
    /// `Conflict` otherwise, with nothing written.
    pub fn meta_commit_if(
        &self,
        key: &[u8],
        revision: i64,
        writes: Vec<(Bytes, Option<Bytes>)>,
    ) -> Result<()> {
        let compare = vec![Compare::mod_revision(self.full_key(key), revision)];
        if self.commit(compare, writes)? {
            return Ok(());
        }
        Err(StorageError::Conflict {
            key: HexKey(Bytes::copy_from_slice(key)),
        })
    }

    fn commit(&self, compare: Vec<Compare>, writes: Vec<(Bytes, Option<Bytes>)>) -> Result<bool> {
        let bytes: usize = writes
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, |v| v.len()))
            .sum();
        if bytes > MAX_META_COMMIT_BYTES {
            return Err(StorageError::Io(format!(
                "metadata commit of {bytes} bytes exceeds the {MAX_META_COMMIT_BYTES}-byte limit \
                 of the etcd metadata store (etcd's request limit is 1.5 MiB)"
            )));
        }
        if writes.len() > MAX_TXN_OPS {
            return Err(StorageError::Io(format!(
                "metadata commit of {} writes exceeds etcd's {MAX_TXN_OPS} operations per transaction",
                writes.len()
            )));
        }
        let ops = (writes.into_iter())
            .map(|(k, v)| match v {
                Some(v) => Op::put(self.full_key(&k), v.to_vec(), 0),
                None => Op::delete(self.full_key(&k)),
            })
            .collect();
        let client = self.client.clone();
        let txn = Txn::when(compare).then(ops);
        let r = self
            .block(async move { client.txn(&txn).await })?
            .map_err(storage_error)?;
        Ok(r.succeeded)
    }

    fn bounds(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> (Vec<u8>, Vec<u8>) {
        let after = |k: &[u8]| [&self.full_key(k)[..], &[0]].concat();
        let from = match lower {
            Bound::Included(k) => self.full_key(k),
            Bound::Excluded(k) => after(k),
            Bound::Unbounded => self.prefix.clone(),
        };
        let to = match upper {
            Bound::Included(k) => after(k),
            Bound::Excluded(k) => self.full_key(k),
            Bound::Unbounded => prefix_end(&self.prefix),
        };
        (from, to)
    }

    /// Every entry in `[from, to)` at one revision, page by page.
    fn scan_all(&self, mut from: Vec<u8>, to: Vec<u8>) -> Result<Vec<(Bytes, Bytes)>> {
        let mut out = Vec::new();
        let mut revision = 0;
        let mut bytes = 0;
        loop {
            let (client, key, end) = (self.client.clone(), from.clone(), to.clone());
            let r = self
                .block(async move { client.range_at(&key, Some(&end), SCAN_PAGE, revision).await })?
                .map_err(storage_error)?;
            revision = r.revision;
            if let Some(last) = r.kvs.last() {
                from = [&last.key[..], &[0]].concat();
            }
            for kv in r.kvs {
                bytes += kv.key.len() + kv.value.len();
                let key = kv.key[self.prefix.len()..].to_vec();
                out.push((Bytes::from(key), Bytes::from(kv.value)));
            }
            if out.len() > MAX_META_SCAN_KEYS || bytes > MAX_META_SCAN_BYTES {
                return Err(StorageError::Io(format!(
                    "metadata scan of more than {MAX_META_SCAN_KEYS} keys or \
                     {MAX_META_SCAN_BYTES} bytes"
                )));
            }
            if !r.more {
                return Ok(out);
            }
        }
    }
}

impl MetaStore for EtcdMetaStore {
    fn meta_get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        Ok(self.meta_get_versioned(key)?.map(|(v, _)| v))
    }

    fn meta_scan(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> ScanIter {
        let (from, to) = self.bounds(lower, upper);
        if from >= to {
            return Box::new(std::iter::empty());
        }
        match self.scan_all(from, to) {
            Ok(entries) => Box::new(entries.into_iter().map(Ok)),
            Err(e) => Box::new(std::iter::once(Err(e))),
        }
    }

    fn meta_commit(&self, writes: Vec<(Bytes, Option<Bytes>)>) -> Result<()> {
        self.commit(Vec::new(), writes).map(|_| ())
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn meta_get_versioned(&self, key: &[u8]) -> Result<Option<(Bytes, i64)>> {
        EtcdMetaStore::meta_get_versioned(self, key)
    }

    fn meta_revision(&self, key: &[u8]) -> Result<i64> {
        EtcdMetaStore::meta_revision(self, key)
    }

    fn meta_commit_if(
        &self,
        key: &[u8],
        revision: i64,
        writes: Vec<(Bytes, Option<Bytes>)>,
    ) -> Result<()> {
        EtcdMetaStore::meta_commit_if(self, key, revision, writes)
    }
}

impl Drop for EtcdMetaStore {
    fn drop(&mut self) {
        // Dropping a runtime inside another runtime's context panics; this does not block.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}
