//! Atomic file writes: a reader sees the old file or the new one, never half.

pub use atomic_write_file::AtomicWriteFile;
use std::io::{self, Write};
use std::path::Path;

/// Writes `bytes` to `path` through a temporary file in the same directory,
/// fsynced, then renamed over the target (atomic-write-file; an existing
/// file's permissions are kept).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    // A failed rename would leave atomic-write-file's temporary file
    // behind; a directory in the way is the one failure known in advance.
    if path.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "is a directory",
        ));
    }
    let mut f = AtomicWriteFile::open(path)?;
    f.write_all(bytes)?;
    f.commit()
}

#[cfg(test)]
mod tests {
    #[test]
    fn replaces_whole_files() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        super::write_atomic(&p, b"one").unwrap();
        super::write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_directory_in_the_way_is_an_error_and_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let sub = d.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let e = super::write_atomic(&sub, b"x").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::IsADirectory);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn keeps_an_existing_files_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        super::write_atomic(&p, b"one").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        super::write_atomic(&p, b"two").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
