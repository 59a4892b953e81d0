//! `file`: creates files and directories before the job and deletes them
//! after (benchpress' FileHook). The options are a list of
//! `{type: "file"|"dir", path}`. A directory that already exists is kept
//! with a warning, as benchpress; a file that exists is an error, as its
//! mknod. Unlike benchpress, which deletes every listed path afterwards, a
//! directory that existed before the job is not deleted: the hook removes
//! only what it created.

use super::{Error, Hook, HookContext};
use serde_json::{Value, json};
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    File,
    Dir,
}

/// The listed entries.
pub(crate) fn entries(o: &Value) -> Result<Vec<(Kind, PathBuf)>, String> {
    let Value::Array(a) = o else {
        return Err(format!(
            "the options must be a list of {{\"type\": \"file\"|\"dir\", \"path\": ...}}, got {o}"
        ));
    };
    a.iter()
        .enumerate()
        .map(|(i, v)| {
            let Value::Object(m) = v else {
                return Err(format!("entry {}: expected {{type, path}}, got {v}", i + 1));
            };
            if let Some(k) = m.keys().find(|k| *k != "type" && *k != "path") {
                return Err(format!(
                    "entry {}: unknown key '{k}' (expected 'type' and 'path')",
                    i + 1
                ));
            }
            let kind = match m.get("type").and_then(Value::as_str) {
                Some("file") => Kind::File,
                Some("dir") => Kind::Dir,
                _ => {
                    return Err(format!(
                        "entry {}: 'type' must be \"file\" or \"dir\", got {}",
                        i + 1,
                        m.get("type").unwrap_or(&Value::Null)
                    ));
                }
            };
            let path = m
                .get("path")
                .and_then(Value::as_str)
                .filter(|p| !p.is_empty())
                .ok_or_else(|| format!("entry {}: 'path' must be a non-empty string", i + 1))?;
            Ok((kind, PathBuf::from(path)))
        })
        .collect()
}

pub struct FileHook {
    entries: Vec<(Kind, PathBuf)>,
    created: Vec<(Kind, PathBuf)>,
    kept: Vec<PathBuf>,
}

impl FileHook {
    pub(crate) fn new(o: &Value) -> Result<Self, String> {
        Ok(FileHook {
            entries: entries(o)?,
            created: Vec::new(),
            kept: Vec::new(),
        })
    }
}

impl Hook for FileHook {
    fn before(&mut self, _ctx: &HookContext) -> Result<(), Error> {
        for (kind, path) in &self.entries {
            match kind {
                Kind::Dir if path.is_dir() => {
                    eprintln!(
                        "hook 'file': \"{}\" already exists, proceeding anyway",
                        path.display()
                    );
                    self.kept.push(path.clone());
                }
                Kind::Dir => std::fs::create_dir_all(path).map_err(|e| {
                    Error::Host(format!("cannot create directory {}: {e}", path.display()))
                })?,
                Kind::File => {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(path)
                        .map_err(|e| {
                            Error::Host(format!("cannot create file {}: {e}", path.display()))
                        })?;
                }
            }
            if !self.kept.contains(path) {
                self.created.push((kind.clone(), path.clone()));
            }
        }
        Ok(())
    }

    fn after(&mut self, _ctx: &HookContext) -> Result<Value, Error> {
        let mut deleted = Vec::new();
        let mut errors = Vec::new();
        for (kind, path) in self.created.drain(..).rev() {
            let r = match kind {
                Kind::Dir => std::fs::remove_dir_all(&path),
                Kind::File => std::fs::remove_file(&path),
            };
            match r {
                Ok(()) => deleted.push(path.display().to_string()),
                Err(e) => errors.push(format!("cannot delete {}: {e}", path.display())),
            }
        }
        if !errors.is_empty() {
            return Err(Error::Host(errors.join("; ")));
        }
        let kept: Vec<String> = self.kept.iter().map(|p| p.display().to_string()).collect();
        Ok(json!({ "deleted": deleted, "kept_existing": kept }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_then_deletes_only_what_it_created() {
        let d = tempfile::tempdir().unwrap();
        let (f, new_dir, old_dir) = (
            d.path().join("flag"),
            d.path().join("a/b"),
            d.path().join("old"),
        );
        std::fs::create_dir(&old_dir).unwrap();
        std::fs::write(old_dir.join("keep.txt"), "x").unwrap();
        let o = json!([
            {"type": "file", "path": f},
            {"type": "dir", "path": new_dir},
            {"type": "dir", "path": old_dir},
        ]);
        let mut h = FileHook::new(&o).unwrap();
        let ctx = HookContext {
            out_dir: d.path().into(),
            job: "j".into(),
            iteration: 1,
        };
        h.before(&ctx).unwrap();
        assert!(f.is_file() && new_dir.is_dir());
        let s = h.after(&ctx).unwrap();
        assert!(!f.exists() && !new_dir.exists());
        assert!(
            old_dir.join("keep.txt").exists(),
            "an existing directory is kept"
        );
        assert_eq!(s["deleted"].as_array().unwrap().len(), 2, "{s}");
        // A file that exists is an error, as benchpress' mknod.
        std::fs::write(&f, "").unwrap();
        let mut h = FileHook::new(&json!([{"type": "file", "path": f}])).unwrap();
        assert!(
            h.before(&ctx)
                .unwrap_err()
                .to_string()
                .contains("cannot create file")
        );
    }

    #[test]
    fn bad_entries_are_named() {
        for (o, want) in [
            (json!({"type": "file"}), "must be a list"),
            (json!([{"type": "link", "path": "/x"}]), "entry 1: 'type'"),
            (json!([{"type": "dir"}]), "entry 1: 'path'"),
            (
                json!([{"type": "dir", "path": "/x", "mode": 1}]),
                "unknown key 'mode'",
            ),
        ] {
            let e = entries(&o).unwrap_err();
            assert!(e.contains(want), "{o}: {e}");
        }
    }
}
