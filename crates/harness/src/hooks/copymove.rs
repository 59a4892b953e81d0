//! `copymove`: copies (or moves, with `is_move`) files matching the `before`
//! globs into the metrics folder before the job and the `after` globs after
//! it. A glob matching nothing is reported, not fatal.

use super::{Error, Hook, HookContext, boolean, strings};
use serde_json::{Map, Value, json};
use std::path::Path;

pub const OPTIONS: &[&str] = &["before", "after", "is_move"];

pub struct CopyMove {
    before: Vec<String>,
    after: Vec<String>,
    is_move: bool,
    done_before: Vec<String>,
    missing: Vec<String>,
}

impl CopyMove {
    pub(crate) fn new(o: &Map<String, Value>) -> Result<Self, String> {
        let before = strings(o, "before")?;
        let after = strings(o, "after")?;
        for g in before.iter().chain(&after) {
            glob::Pattern::new(g).map_err(|e| format!("invalid glob '{g}': {e}"))?;
        }
        Ok(CopyMove {
            before,
            after,
            is_move: boolean(o, "is_move")?,
            done_before: Vec::new(),
            missing: Vec::new(),
        })
    }

    fn transfer(&mut self, globs: &[String], dest: &Path) -> Result<Vec<String>, String> {
        let mut moved = Vec::new();
        for g in globs {
            let paths: Vec<_> = glob::glob(g)
                .map_err(|e| format!("invalid glob '{g}': {e}"))?
                .flatten()
                .collect();
            if paths.is_empty() {
                self.missing.push(g.clone());
            }
            for p in paths.into_iter().filter(|p| p.is_file()) {
                let name = p
                    .file_name()
                    .ok_or_else(|| format!("{} has no file name", p.display()))?;
                let to = dest.join(name);
                if self.is_move {
                    if std::fs::rename(&p, &to).is_err() {
                        std::fs::copy(&p, &to)
                            .map_err(|e| format!("cannot copy {}: {e}", p.display()))?;
                        std::fs::remove_file(&p)
                            .map_err(|e| format!("cannot remove {}: {e}", p.display()))?;
                    }
                } else {
                    std::fs::copy(&p, &to)
                        .map_err(|e| format!("cannot copy {}: {e}", p.display()))?;
                }
                moved.push(
                    to.file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .to_string(),
                );
            }
        }
        Ok(moved)
    }
}

impl Hook for CopyMove {
    fn before(&mut self, ctx: &HookContext) -> Result<(), Error> {
        let globs = self.before.clone();
        self.done_before = self.transfer(&globs, &ctx.out_dir).map_err(Error::Host)?;
        Ok(())
    }

    fn after(&mut self, ctx: &HookContext) -> Result<Value, Error> {
        let globs = self.after.clone();
        let after = self.transfer(&globs, &ctx.out_dir).map_err(Error::Host)?;
        Ok(json!({
            "mode": if self.is_move { "move" } else { "copy" },
            "before": self.done_before,
            "after": after,
            "unmatched_globs": self.missing,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_and_moves_matching_files() {
        let src = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("a.log"), "a").unwrap();
        std::fs::write(src.path().join("b.log"), "b").unwrap();
        let opts = json!({
            "before": format!("{}/a.*", src.path().display()),
            "after": [format!("{}/b.log", src.path().display()), format!("{}/none*", src.path().display())],
            "is_move": true,
        });
        let mut h = CopyMove::new(opts.as_object().unwrap()).unwrap();
        let ctx = HookContext {
            out_dir: out.path().into(),
            job: "j".into(),
            iteration: 1,
        };
        h.before(&ctx).unwrap();
        let s = h.after(&ctx).unwrap();
        assert_eq!(s["before"], json!(["a.log"]));
        assert_eq!(s["after"], json!(["b.log"]));
        assert_eq!(s["unmatched_globs"].as_array().unwrap().len(), 1);
        assert!(out.path().join("a.log").exists() && out.path().join("b.log").exists());
        assert!(!src.path().join("a.log").exists(), "moved");
    }
}
