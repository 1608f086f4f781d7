//! One server per data directory: `ringgate.lock` in the directory, held with an exclusive
//! advisory lock (flock) for the server's lifetime and holding its pid as text, so a second
//! server on the same directory is refused with the pid of the one using it. The lock goes with
//! the process (also on `kill -9`); a stale file left behind is simply locked again.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file's name inside the data directory.
pub const LOCK_FILE: &str = "ringgate.lock";

/// A held data directory; the lock is released when it is dropped (or the process ends).
#[derive(Debug)]
pub struct DirLock {
    _file: File,
    /// The data directory, absolute.
    pub dir: PathBuf,
}

/// Creates the data directory if needed and locks it, with a message for each way this fails.
pub fn lock(dir: &Path) -> Result<DirLock, String> {
    if dir.exists() && !dir.is_dir() {
        return Err(format!(
            "data directory {} is a file, not a directory",
            dir.display()
        ));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create data directory {}: {e}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("cannot resolve data directory {}: {e}", dir.display()))?;
    let path = dir.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            let pid = pid.trim();
            return Err(format!(
                "data directory {} is in use by another ringgate process (pid {})",
                dir.display(),
                if pid.is_empty() { "unknown" } else { pid }
            ));
        }
        Err(TryLockError::Error(e)) => {
            return Err(format!("cannot lock {}: {e}", path.display()));
        }
    }
    file.set_len(0)
        .and_then(|_| file.rewind())
        .and_then(|_| write!(file, "{}", std::process::id()))
        .and_then(|_| file.flush())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(DirLock { _file: file, dir })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_holder_and_a_file_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let held = lock(&dir).unwrap();
        assert!(held.dir.is_absolute());
        let e = lock(&dir).unwrap_err();
        assert!(
            e.ends_with(&format!(
                "is in use by another ringgate process (pid {})",
                std::process::id()
            )),
            "{e}"
        );
        drop(held);
        assert!(lock(&dir).is_ok());
        let file = tmp.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let e = lock(&file).unwrap_err();
        assert!(e.ends_with("is a file, not a directory"), "{e}");
    }
}
