//! Resolving a job (and role) with user input into the benchmark's argv.
//!
//! Rules, as benchpress: user input overrides defaults; a required var without
//! input is an error naming the role and the var; an input key the job does
//! not declare is a warning (and an error, naming the closest var, when no
//! job of the run declares it: see `runner`); an arg that is empty after substitution
//! disappears; each arg is split shell-style into argv words.

use crate::job::{HookSpec, Job, VarDecl, placeholders};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Why a job could not be resolved.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ResolveError {
    #[error("job '{job}' has roles ({roles}): choose one with -r ROLE")]
    RoleRequired { job: String, roles: String },
    #[error("job '{job}' has no roles, but -r {role} was given")]
    NoRoles { job: String, role: String },
    #[error("job '{job}' has no role '{role}'; its roles are: {roles}")]
    UnknownRole {
        job: String,
        role: String,
        roles: String,
    },
    #[error("job '{job}'{role} requires var '{var}': pass it with -i '{{\"{var}\": \"...\"}}'")]
    MissingVar {
        job: String,
        role: String,
        var: String,
    },
    #[error("job '{job}': input var '{var}' must be a string, number or boolean, not {kind}")]
    BadValue {
        job: String,
        var: String,
        kind: String,
    },
    #[error("job '{job}': arg '{arg}' is not valid shell syntax after substitution ({why})")]
    BadArg {
        job: String,
        arg: String,
        why: String,
    },
}

/// A job ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// One string per arg template after substitution, empty ones kept
    /// (benchpress' `job.args`, its report's `benchmark_args`).
    pub args: Vec<String>,
    pub argv: Vec<String>,
    pub hooks: Vec<HookSpec>,
    /// Final var values.
    pub values: BTreeMap<String, String>,
    /// Input keys the job does not declare.
    pub warnings: Vec<String>,
}

fn value_string(job: &str, var: &str, v: &Value) -> Result<String, ResolveError> {
    Ok(match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => {
            let kind = match other {
                Value::Null => "null",
                Value::Array(_) => "an array",
                _ => "an object",
            };
            return Err(ResolveError::BadValue {
                job: job.into(),
                var: var.into(),
                kind: kind.into(),
            });
        }
    })
}

/// Substitutes `{name}` placeholders.
fn substitute(template: &str, values: &BTreeMap<String, String>) -> String {
    let mut out = template.to_string();
    for p in placeholders(template) {
        if let Some(v) = values.get(p) {
            out = out.replace(&format!("{{{p}}}"), v);
        }
    }
    out
}

/// Resolves `job` for `role` with `input`.
pub fn resolve(
    job: &Job,
    role: Option<&str>,
    input: &Map<String, Value>,
) -> Result<Resolved, ResolveError> {
    let role_names = || {
        job.roles
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let role = match (role, job.roles.is_empty()) {
        (None, false) => {
            return Err(ResolveError::RoleRequired {
                job: job.name.clone(),
                roles: role_names(),
            });
        }
        (Some(r), true) => {
            return Err(ResolveError::NoRoles {
                job: job.name.clone(),
                role: r.into(),
            });
        }
        (None, true) => None,
        (Some(r), false) => Some(job.role(r).ok_or_else(|| ResolveError::UnknownRole {
            job: job.name.clone(),
            role: r.into(),
            roles: role_names(),
        })?),
    };
    let mut decls: Vec<&VarDecl> = job.vars.iter().collect();
    if let Some(r) = role {
        for v in &r.vars {
            decls.retain(|d| d.name != v.name);
            decls.push(v);
        }
    }
    let mut values = BTreeMap::new();
    for d in &decls {
        let v = match input.get(&d.name) {
            Some(v) => value_string(&job.name, &d.name, v)?,
            None => match &d.default {
                Some(def) => def.clone(),
                None => {
                    return Err(ResolveError::MissingVar {
                        job: job.name.clone(),
                        role: role
                            .map(|r| format!(" (role '{}')", r.name))
                            .unwrap_or_default(),
                        var: d.name.clone(),
                    });
                }
            },
        };
        values.insert(d.name.clone(), v);
    }
    let warnings = input
        .keys()
        .filter(|k| !values.contains_key(*k))
        .map(|k| {
            format!(
                "job '{}' does not use input var '{k}'; it is ignored",
                job.name
            )
        })
        .collect();
    let templates = job
        .args
        .iter()
        .chain(role.iter().flat_map(|r| r.args.iter()));
    let mut args = Vec::new();
    let mut argv = Vec::new();
    for t in templates {
        let s = substitute(t, &values);
        args.push(s.clone());
        let words = shell_words::split(&s).map_err(|e| ResolveError::BadArg {
            job: job.name.clone(),
            arg: s.clone(),
            why: e.to_string(),
        })?;
        argv.extend(words.into_iter().filter(|w| !w.is_empty()));
    }
    let mut hooks = job.hooks.clone();
    if let Some(r) = role {
        hooks.extend(r.hooks.iter().cloned());
    }
    Ok(Resolved {
        args,
        argv,
        hooks,
        values,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::parse_file;
    use serde_json::json;
    use std::path::Path;

    fn jobs() -> Vec<Job> {
        parse_file(
            Path::new("t.toml"),
            r#"
[[job]]
name = "solo"
benchmark = "b"
args = ["-p {port}", "-o {output}", "{extra_args}", "--name '{label}'"]
vars = ["port=11222", "output=out.txt", "extra_args=", "label=a b"]

[[job]]
name = "duo"
benchmark = "b"
args = ["--common"]
vars = ["port=1"]
[[job.roles]]
role = "client"
args = ["--server {server_ip}", "--port {port}"]
vars = ["server_ip"]
[[job.roles]]
role = "server"
args = ["--port {port}"]
vars = ["port=2"]
"#,
        )
        .unwrap()
    }

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn defaults_overrides_and_empty_args() {
        let j = &jobs()[0];
        let r = resolve(j, None, &Map::new()).unwrap();
        assert_eq!(r.argv, ["-p", "11222", "-o", "out.txt", "--name", "a b"]);
        // benchpress' job.args: one string per template, the empty one kept.
        assert_eq!(r.args, ["-p 11222", "-o out.txt", "", "--name 'a b'"]);
        let r = resolve(
            j,
            None,
            &map(json!({"port": 9000, "extra_args": "-q 10,20"})),
        )
        .unwrap();
        assert_eq!(
            r.argv,
            [
                "-p", "9000", "-o", "out.txt", "-q", "10,20", "--name", "a b"
            ]
        );
    }

    #[test]
    fn unknown_input_is_a_warning() {
        let r = resolve(&jobs()[0], None, &map(json!({"prot": 1}))).unwrap();
        assert_eq!(r.warnings.len(), 1);
        assert!(r.warnings[0].contains("'prot'"));
    }

    #[test]
    fn roles_are_enforced() {
        let d = &jobs()[1];
        assert!(matches!(
            resolve(d, None, &Map::new()),
            Err(ResolveError::RoleRequired { .. })
        ));
        assert!(matches!(
            resolve(&jobs()[0], Some("client"), &Map::new()),
            Err(ResolveError::NoRoles { .. })
        ));
        let e = resolve(d, Some("proxy"), &Map::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("client, server"), "{e}");
        let e = resolve(d, Some("client"), &Map::new())
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "job 'duo' (role 'client') requires var 'server_ip': pass it with -i '{\"server_ip\": \"...\"}'"
        );
        let r = resolve(d, Some("client"), &map(json!({"server_ip": "::1"}))).unwrap();
        assert_eq!(r.argv, ["--common", "--server", "::1", "--port", "1"]);
        // A role's var default overrides the job's.
        let r = resolve(d, Some("server"), &Map::new()).unwrap();
        assert_eq!(r.argv, ["--common", "--port", "2"]);
    }

    #[test]
    fn non_scalar_input_is_rejected() {
        let e = resolve(&jobs()[0], None, &map(json!({"port": [1]}))).unwrap_err();
        assert!(matches!(e, ResolveError::BadValue { .. }));
    }
}
