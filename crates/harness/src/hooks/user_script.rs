//! `user-script`: runs a script in the background while the job runs
//! (benchpress' UserScript). Options: `hook_path` (relative to the current
//! directory), `args` (a list), and `background_mode` with `duration`
//! (seconds, default 60) and `stdout_path` (default
//! `<job>_<script name>_hook_output_<iteration>` in the metrics folder). The
//! command is `hook_path ARGS... -a sleep DURATION`, as benchpress runs it;
//! after the job the script's process group gets SIGINT if it still runs.
//! benchpress runs nothing without `background_mode`; here that is refused,
//! so a job never silently loses the script it names. The default output
//! name uses the script's file name without its extension (benchpress cuts
//! the path at its first dot, which for `./x.sh` or `dir/x.sh` names a file
//! in a missing folder).

use super::{Error, Hook, HookContext, object, strings};
use serde_json::{Map, Value, json};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const OPTIONS: &[&str] = &["hook_path", "args", "background_mode"];

pub struct UserScript {
    hook_path: String,
    args: Vec<String>,
    duration: String,
    stdout_path: Option<PathBuf>,
    child: Option<(Child, PathBuf, Vec<String>)>,
}

impl UserScript {
    pub(crate) fn new(o: &Map<String, Value>) -> Result<Self, String> {
        let hook_path = match o.get("hook_path") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => return Err("option 'hook_path' (the script to run) is required".into()),
        };
        let args = strings(o, "args")?;
        let Some(bg) = o.get("background_mode") else {
            return Err("only background_mode is supported (benchpress runs nothing without it): give background_mode: {duration: SECS}".into());
        };
        let bg = object("user-script", bg)
            .map_err(|_| "option 'background_mode' must be an object {duration, stdout_path}")?;
        if let Some(k) = bg.keys().find(|k| *k != "duration" && *k != "stdout_path") {
            return Err(format!(
                "background_mode has no option '{k}'; its options are: duration, stdout_path"
            ));
        }
        let duration = match bg.get("duration") {
            None => "60".to_string(),
            Some(Value::Number(n)) if n.as_f64().is_some_and(|d| d > 0.0) => n.to_string(),
            Some(Value::String(s)) if s.parse::<f64>().is_ok_and(|d| d > 0.0) => s.clone(),
            Some(v) => {
                return Err(format!(
                    "background_mode.duration must be a positive number of seconds, got {v}"
                ));
            }
        };
        let stdout_path = match bg.get("stdout_path") {
            None => None,
            Some(Value::String(s)) if !s.is_empty() => Some(PathBuf::from(s)),
            Some(v) => {
                return Err(format!(
                    "background_mode.stdout_path must be a path, got {v}"
                ));
            }
        };
        Ok(UserScript {
            hook_path,
            args,
            duration,
            stdout_path,
            child: None,
        })
    }
}

impl Hook for UserScript {
    fn before(&mut self, ctx: &HookContext) -> Result<(), Error> {
        let script = Path::new(&self.hook_path);
        let stem = script
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| "script".into());
        let out = self.stdout_path.clone().unwrap_or_else(|| {
            ctx.out_dir.join(format!(
                "{}_{stem}_hook_output_{}",
                ctx.job.replace(' ', "_"),
                ctx.iteration
            ))
        });
        let file = std::fs::File::create(&out)
            .map_err(|e| Error::Host(format!("cannot create {}: {e}", out.display())))?;
        let err = file
            .try_clone()
            .map_err(|e| Error::Host(format!("cannot open {}: {e}", out.display())))?;
        let path = std::env::current_dir()
            .map_err(|e| Error::Host(format!("no current directory: {e}")))?
            .join(script);
        let mut argv = self.args.clone();
        argv.extend(["-a".into(), "sleep".into(), self.duration.clone()]);
        eprintln!(
            "Starting background Custom hook: {} {}",
            path.display(),
            argv.join(" ")
        );
        let child = Command::new(&path)
            .args(&argv)
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|e| Error::Host(format!("cannot run {}: {e}", path.display())))?;
        let mut command = vec![path.display().to_string()];
        command.extend(argv);
        self.child = Some((child, out, command));
        Ok(())
    }

    fn after(&mut self, _ctx: &HookContext) -> Result<Value, Error> {
        let Some((mut child, out, command)) = self.child.take() else {
            return Ok(Value::Null);
        };
        let mut interrupted = false;
        if child
            .try_wait()
            .map_err(|e| Error::Host(e.to_string()))?
            .is_none()
        {
            interrupted = true;
            let pg = nix::unistd::Pid::from_raw(-(child.id() as i32));
            let _ = nix::sys::signal::kill(pg, nix::sys::signal::Signal::SIGINT);
            let t0 = Instant::now();
            while child
                .try_wait()
                .map_err(|e| Error::Host(e.to_string()))?
                .is_none()
            {
                if t0.elapsed() > Duration::from_secs(5) {
                    let _ = nix::sys::signal::kill(pg, nix::sys::signal::Signal::SIGKILL);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let status = child.wait().map_err(|e| Error::Host(e.to_string()))?;
        Ok(json!({
            "command": command,
            "stdout_path": out.display().to_string(),
            "interrupted_after_job": interrupted,
            "exit_code": status.code(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_in_the_background_and_is_interrupted_after_the_job() {
        let d = tempfile::tempdir().unwrap();
        let script = d.path().join("probe.sh");
        std::fs::write(
            &script,
            "#!/bin/sh\necho \"args: $*\"\ntrap 'echo stopped; exit 0' INT\nwhile :; do sleep 0.05; done\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let o = json!({
            "hook_path": script,
            "args": ["-x", "1"],
            "background_mode": {"duration": 30},
        });
        let mut h = UserScript::new(o.as_object().unwrap()).unwrap();
        let ctx = HookContext {
            out_dir: d.path().into(),
            job: "my job".into(),
            iteration: 2,
        };
        h.before(&ctx).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let s = h.after(&ctx).unwrap();
        assert_eq!(s["interrupted_after_job"], true, "{s}");
        let out = std::fs::read_to_string(d.path().join("my_job_probe_hook_output_2")).unwrap();
        assert!(out.contains("args: -x 1 -a sleep 30"), "{out}");
    }

    #[test]
    fn options_are_checked() {
        for (o, want) in [
            (json!({}), "'hook_path'"),
            (json!({"hook_path": "x.sh"}), "only background_mode"),
            (
                json!({"hook_path": "x.sh", "background_mode": {"duration": 0}}),
                "positive",
            ),
            (
                json!({"hook_path": "x.sh", "background_mode": {"secs": 1}}),
                "no option 'secs'",
            ),
        ] {
            let e = UserScript::new(o.as_object().unwrap()).err().unwrap();
            assert!(e.contains(want), "{o}: {e}");
        }
    }
}
