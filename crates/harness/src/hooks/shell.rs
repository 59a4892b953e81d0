//! `shell`: commands run with `sh -c` before and after the job, with
//! `RACKBENCH_OUT_DIR` and `RACKBENCH_JOB` in their environment. Their output
//! goes to `<job>_shell_hook_iter_<n>.log` in the metrics folder. A failing
//! `before` command fails the job; a failing `after` command is reported.

use super::{Error, Hook, HookContext, strings};
use serde_json::{Map, Value, json};
use std::io::Write;
use std::process::Command;

pub const OPTIONS: &[&str] = &["before", "after"];

pub struct Shell {
    before: Vec<String>,
    after: Vec<String>,
}

impl Shell {
    pub(crate) fn new(o: &Map<String, Value>) -> Result<Self, String> {
        Ok(Shell {
            before: strings(o, "before")?,
            after: strings(o, "after")?,
        })
    }
}

fn run_all(cmds: &[String], ctx: &HookContext, phase: &str) -> Result<Vec<Value>, String> {
    let log = ctx
        .out_dir
        .join(format!("{}_shell_hook_iter_{}.log", ctx.job, ctx.iteration));
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
    let mut results = Vec::new();
    for c in cmds {
        let out = Command::new("sh")
            .arg("-c")
            .arg(c)
            .env("RACKBENCH_OUT_DIR", &ctx.out_dir)
            .env("RACKBENCH_JOB", &ctx.job)
            .output()
            .map_err(|e| format!("cannot run sh: {e}"))?;
        let _ = writeln!(f, "$ {c}   # {phase}");
        let _ = f.write_all(&out.stdout);
        let _ = f.write_all(&out.stderr);
        let code = out.status.code();
        results.push(json!({ "command": c, "exit_code": code }));
        if !out.status.success() {
            return Err(format!(
                "{phase} command `{c}` exited with {}; output in {}",
                code.map(|c| c.to_string())
                    .unwrap_or_else(|| "a signal".into()),
                log.display()
            ));
        }
    }
    Ok(results)
}

impl Hook for Shell {
    fn before(&mut self, ctx: &HookContext) -> Result<(), Error> {
        run_all(&self.before, ctx, "before")
            .map(|_| ())
            .map_err(Error::Host)
    }

    fn after(&mut self, ctx: &HookContext) -> Result<Value, Error> {
        let after = run_all(&self.after, ctx, "after").map_err(Error::Host)?;
        Ok(json!({ "before": self.before, "after": after }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_commands_with_the_environment_and_reports_failures() {
        let d = tempfile::tempdir().unwrap();
        let ctx = HookContext {
            out_dir: d.path().into(),
            job: "j".into(),
            iteration: 1,
        };
        let o = json!({"before": "echo hi > \"$RACKBENCH_OUT_DIR/$RACKBENCH_JOB.txt\"", "after": ["true", "exit 3"]});
        let mut h = Shell::new(o.as_object().unwrap()).unwrap();
        h.before(&ctx).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("j.txt")).unwrap(),
            "hi\n"
        );
        let e = h.after(&ctx).unwrap_err().to_string();
        assert!(e.contains("`exit 3` exited with 3"), "{e}");
    }
}
