//! The free-space reserve: commits are refused while the data directory's file system has less
//! than `storage.min_free_bytes` available.
//!
//! Why: when fjall meets ENOSPC while flushing a memtable or compacting, it poisons the whole
//! store (every later write and the flush worker fail) and the server has to stop. Refusing
//! writes before the disk is full keeps room for the flushes and compactions already owed
//! (a memtable is at most 64 MiB), so acknowledged data stays safe, reads keep working, and
//! writes resume by themselves once space is freed. The figure comes from statvfs(2), read at
//! most every [`CHECK_EVERY`] so a commit costs no system call; between two reads writes can use
//! at most what they write in that time, which the reserve covers.

use super::{Result, StorageError};
use parking_lot::Mutex;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How stale the free-space figure may be.
const CHECK_EVERY: Duration = Duration::from_millis(100);

pub struct FreeSpaceGuard {
    dir: PathBuf,
    min_free_bytes: u64,
    /// When the figure was read, and the bytes then available (None: not read yet).
    last: Mutex<Option<(Instant, u64)>>,
}

impl FreeSpaceGuard {
    /// `min_free_bytes` 0 turns the check off.
    pub fn new(dir: PathBuf, min_free_bytes: u64) -> FreeSpaceGuard {
        FreeSpaceGuard {
            dir,
            min_free_bytes,
            last: Mutex::new(None),
        }
    }

    /// Ok when a commit may go ahead; the disk-full error otherwise.
    pub fn check(&self) -> Result<()> {
        if self.min_free_bytes == 0 {
            return Ok(());
        }
        let free_bytes = self.free_bytes();
        if free_bytes < self.min_free_bytes {
            return Err(StorageError::DiskFull {
                free_bytes,
                min_free_bytes: self.min_free_bytes,
            });
        }
        Ok(())
    }

    fn free_bytes(&self) -> u64 {
        let mut last = self.last.lock();
        if let Some((at, bytes)) = *last {
            if at.elapsed() < CHECK_EVERY {
                return bytes;
            }
        }
        // A failed statvfs must not stop writes: the store reports real I/O errors itself.
        let bytes = available_bytes(&self.dir).unwrap_or(u64::MAX);
        *last = Some((Instant::now(), bytes));
        bytes
    }
}

/// Bytes available to this (unprivileged) process on the file system holding `dir`.
fn available_bytes(dir: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is a valid NUL-terminated string and `st` is written by statvfs on success.
    let rc = unsafe { libc::statvfs(path.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    // The field types differ between platforms (u32 on some), hence the casts.
    #[allow(clippy::unnecessary_cast)]
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_when_zero_and_refuses_above_the_free_space() {
        let dir = std::env::temp_dir();
        assert!(FreeSpaceGuard::new(dir.clone(), 0).check().is_ok());
        assert!(FreeSpaceGuard::new(dir.clone(), 1).check().is_ok());
        let err = FreeSpaceGuard::new(dir, u64::MAX).check().unwrap_err();
        assert!(
            err.to_string().starts_with("No space left on device"),
            "{err}"
        );
    }
}
