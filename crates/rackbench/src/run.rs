//! `rackbench run`: its jobs as an invocation of the harness's runner
//! (role input, extra hooks, iterations), and the exit code of a run.

use harness::job::HookSpec;
use harness::{Cancel, Catalogue, Invocation, Registry};
use std::process::ExitCode;

use crate::cli::{Cli, RunArgs, store_path};

/// `rackbench run`: the jobs of the invocation, each iteration's report
/// on stdout as JSON (or the jobs' summaries on a terminal).
pub(crate) fn run_jobs(
    cli: &Cli,
    reg: &Registry,
    cat: Catalogue,
    a: RunArgs,
) -> anyhow::Result<ExitCode> {
    let input = role_input(a.input)?;
    let extra_hooks = extra_hooks(cli, &a.hooks, a.hook_args)?;
    check_iterations(cli, a.iterations)?;
    let inv = Invocation {
        jobs: cat.select(&a.jobs)?,
        role: a.role,
        input,
        extra_hooks,
        disable_hooks: a.disable_hooks,
        dry_run: a.dry_run,
        iterations: a.iterations,
        out_root: cli.output_dir.clone(),
        store: (!cli.no_store).then(|| store_path(&cli.db)),
        run_id: cli.uuid.clone(),
        timestamp: cli.timestamp,
        iteration_label: cli.iteration_num.map(|n| n.to_string()),
        results_dir: Some(
            cli.results
                .clone()
                .unwrap_or_else(|| cli.output_dir.join("results")),
        ),
        stdout: if a.json || !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            harness::runner::Stdout::Json
        } else {
            harness::runner::Stdout::Summary
        },
    };
    finish(harness::runner::execute(
        &cat,
        reg,
        &inv,
        &Cancel::global(),
    )?)
}

/// `run -i/--role-input`: a JSON object as benchpress takes it, or
/// `NAME=VALUE[,NAME=VALUE...]` (values are text, as vars are; a value
/// cannot hold a comma, JSON can) (none: empty).
fn role_input(input: Option<String>) -> anyhow::Result<serde_json::Map<String, serde_json::Value>> {
    let Some(text) = input else {
        return Ok(serde_json::Map::new());
    };
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Object(m)) => return Ok(m),
        Ok(_) => anyhow::bail!(
            "-i/--role-input must be a JSON object, e.g. '{{\"server_ip\": \"::1\"}}', got: {text}"
        ),
        Err(e) if text.trim_start().starts_with('{') => {
            anyhow::bail!("-i/--role-input is not valid JSON ({e}): {text}")
        }
        Err(_) => {}
    }
    let mut m = serde_json::Map::new();
    for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
        let Some((k, v)) = pair.split_once('=').filter(|(k, _)| !k.trim().is_empty()) else {
            anyhow::bail!(
                "-i/--role-input takes a JSON object or NAME=VALUE pairs split by commas, \
                 e.g. '{{\"server_ip\": \"::1\"}}' or server_ip=::1; got {pair:?} in: {text}"
            );
        };
        m.insert(
            k.trim().to_string(),
            serde_json::Value::String(v.to_string()),
        );
    }
    Ok(m)
}

/// The hooks `run` adds to every job: `-k`'s (with `-a`'s arguments),
/// then benchpress' `-s/-d` user script.
fn extra_hooks(
    cli: &Cli,
    hooks: &[String],
    hook_args: Option<String>,
) -> anyhow::Result<Vec<HookSpec>> {
    let mut extra_hooks = hooks
        .iter()
        .map(|h| HookSpec::parse_cli(h))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    if let Some(text) = hook_args {
        apply_hook_args(&mut extra_hooks, &text)?;
    }
    // benchpress' -s/-d: the user-script hook on every job, after
    // the job's own and -k's.
    if let Some(path) = &cli.hook_path {
        let duration = cli.hook_bg_duration.clone().unwrap_or_else(|| "60".into());
        extra_hooks.push(HookSpec {
            hook: "user-script".into(),
            options: serde_json::json!({
                "hook_path": path,
                "background_mode": {"duration": duration},
            }),
        });
    }
    Ok(extra_hooks)
}

/// `run -a JSON`: options for the `-k` hooks by name (benchpress'
/// `--hook-args`). A name not given with -k, or a hook given options both
/// ways, are errors (benchpress ignores the first with a warning, which
/// would run a hook other than asked); each hook checks its own options.
fn apply_hook_args(hooks: &mut [HookSpec], text: &str) -> anyhow::Result<()> {
    let map = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(m)) => m,
        Ok(_) => anyhow::bail!(
            "-a/--hook-args must be a JSON object of hook name to options, e.g. '{{\"perf\": {{\"interval\": 5}}}}', got: {text}"
        ),
        Err(e) => anyhow::bail!("-a/--hook-args is not valid JSON ({e}): {text}"),
    };
    for (name, opts) in map {
        let Some(h) = hooks.iter_mut().find(|h| h.hook == name) else {
            let given: Vec<&str> = hooks.iter().map(|h| h.hook.as_str()).collect();
            anyhow::bail!(
                "-a/--hook-args names hook '{name}', which is not given with -k (given: {})",
                if given.is_empty() {
                    "none".to_string()
                } else {
                    given.join(", ")
                }
            );
        };
        if !h.options.is_null() {
            anyhow::bail!(
                "hook '{name}' has options both in -k {name}:{{...}} and in -a/--hook-args; give them once"
            );
        }
        h.options = opts;
    }
    Ok(())
}

/// `run -n` with `-i/--iteration_num`.
fn check_iterations(cli: &Cli, iterations: u32) -> anyhow::Result<()> {
    if iterations == 0 {
        anyhow::bail!("-n/--iterations must be at least 1");
    }
    if cli.iteration_num.is_some() && iterations > 1 {
        anyhow::bail!(
            "-i/--iteration_num names the one iteration a run writes (benchpress' _iter_N); with -n {iterations} each iteration is numbered: give one of them"
        );
    }
    Ok(())
}

pub(crate) fn finish(s: harness::runner::Summary) -> anyhow::Result<ExitCode> {
    if let Some(dir) = &s.out_dir {
        eprintln!("reports in {}", dir.display());
    }
    Ok(if s.interrupted {
        ExitCode::from(130)
    } else if s.all_succeeded {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
