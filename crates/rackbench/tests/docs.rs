//! The documentation stays true: every relative link in README.md and
//! docs/*.md resolves, and every `rackbench ...` command shown in a code
//! block names commands that exist (checked through the binary's own
//! parser: the command, and a benchmark's subcommand, answer `--help`).
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md and every page under docs/.
fn pages() -> Vec<PathBuf> {
    let mut v = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    assert!(!docs.is_empty(), "docs/ holds no page");
    v.extend(docs);
    v
}

/// The targets of the Markdown links `[text](target)` in `text`.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            out.push(rest[..end].to_string());
            rest = &rest[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_resolves() {
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
                continue;
            }
            let path = target.split('#').next().unwrap();
            let resolved = page.parent().unwrap().join(path);
            assert!(
                resolved.exists(),
                "{}: the link ({target}) points at {}, which does not exist",
                page.display(),
                resolved.display()
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 10,
        "only {checked} links found: is the parser broken?"
    );
}

/// The `rackbench` command lines inside the pages' code blocks.
fn documented_commands() -> Vec<(PathBuf, Vec<String>)> {
    let mut out = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let mut in_code = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
                continue;
            }
            if !in_code {
                continue;
            }
            let words: Vec<String> = line
                .split_whitespace()
                .take_while(|w| !w.starts_with('#'))
                .map(str::to_string)
                .collect();
            if words.first().map(String::as_str) == Some("rackbench") {
                out.push((page.clone(), words));
            }
        }
    }
    out
}

#[test]
fn every_documented_command_exists() {
    let bin = env!("CARGO_BIN_EXE_rackbench");
    // The command words of each documented line: `rackbench CMD [SUB]`,
    // skipping global flags, up to the first flag or placeholder.
    let mut seen = BTreeSet::new();
    let commands = documented_commands();
    assert!(
        commands.len() >= 10,
        "only {} commands found",
        commands.len()
    );
    for (page, words) in &commands {
        let mut path: Vec<&str> = Vec::new();
        let mut it = words[1..].iter().map(String::as_str).peekable();
        // Global flags before the command (`--report`, `--db PATH`).
        while let Some(w) = it.peek() {
            match *w {
                "--report" | "--no-store" => {
                    it.next();
                }
                "--db" | "--jobs-dir" | "--output-dir" => {
                    it.next();
                    it.next();
                }
                _ => break,
            }
        }
        for w in it {
            let word_like = w
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '_' || c == '-')
                && !w.starts_with('-');
            if !word_like || path.len() == 2 {
                break;
            }
            path.push(w);
        }
        if path.is_empty() || !seen.insert(path.clone()) {
            continue;
        }
        // `rackbench help [CMD]` is itself the help.
        let args: Vec<&str> = if path[0] == "help" {
            path.clone()
        } else {
            path.iter().copied().chain(["--help"]).collect()
        };
        let o = Command::new(bin)
            .args(&args)
            .env(
                "RACKBENCH_DB",
                std::env::temp_dir().join("rackbench-docs-test.db"),
            )
            .output()
            .unwrap();
        // A second word that is not a subcommand (`rackbench info JOB`'s
        // JOB, `rackbench run calibrate`) still answers --help through
        // its command; what must not happen is an unknown command.
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() && !err.contains("unknown command"),
            "{}: `rackbench {}` (from `{}`) is not a command: {err}",
            page.display(),
            path.join(" "),
            words.join(" ")
        );
    }
}
