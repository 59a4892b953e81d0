//! `result`: after the job, copies each listed file that exists into the
//! metrics folder as `<job>_<file name>` (benchpress' ResultHook). The
//! options are the list of paths. benchpress skips a missing file without a
//! word; here the summary lists it under `missing`.

use super::{Error, Hook, HookContext};
use serde_json::{Value, json};
use std::path::Path;

/// The listed paths.
pub(crate) fn paths(o: &Value) -> Result<Vec<String>, String> {
    let Value::Array(a) = o else {
        return Err(format!(
            "the options must be a list of file paths, e.g. result:[\"/tmp/out.log\"]; got {o}"
        ));
    };
    a.iter()
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("the list must hold file paths (strings), got {v}"))
        })
        .collect()
}

pub struct ResultHook {
    paths: Vec<String>,
}

impl ResultHook {
    pub(crate) fn new(o: &Value) -> Result<Self, String> {
        Ok(ResultHook { paths: paths(o)? })
    }
}

impl Hook for ResultHook {
    fn before(&mut self, _ctx: &HookContext) -> Result<(), Error> {
        Ok(())
    }

    fn after(&mut self, ctx: &HookContext) -> Result<Value, Error> {
        let mut copied = Vec::new();
        let mut missing = Vec::new();
        for p in &self.paths {
            let src = Path::new(p);
            let Some(name) = src.file_name().filter(|_| src.is_file()) else {
                missing.push(p.clone());
                continue;
            };
            let to = format!("{}_{}", ctx.job, name.to_string_lossy());
            std::fs::copy(src, ctx.out_dir.join(&to))
                .map_err(|e| Error::Host(format!("cannot copy {p} to the metrics folder: {e}")))?;
            copied.push(to);
        }
        Ok(json!({ "copied": copied, "missing": missing }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_existing_files_with_the_job_prefix() {
        let src = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let f = src.path().join("stats.txt");
        std::fs::write(&f, "42").unwrap();
        let gone = src.path().join("none.txt");
        let mut h = ResultHook::new(&json!([f, gone])).unwrap();
        let ctx = HookContext {
            out_dir: out.path().into(),
            job: "feedsim_default".into(),
            iteration: 1,
        };
        h.before(&ctx).unwrap();
        let s = h.after(&ctx).unwrap();
        assert_eq!(s["copied"], json!(["feedsim_default_stats.txt"]));
        assert_eq!(s["missing"], json!([gone]));
        let copy = out.path().join("feedsim_default_stats.txt");
        assert_eq!(std::fs::read_to_string(copy).unwrap(), "42");
        assert!(ResultHook::new(&json!("a")).is_err());
        assert!(ResultHook::new(&json!([1])).is_err());
    }
}
