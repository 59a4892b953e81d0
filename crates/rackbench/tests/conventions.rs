//! Two conventions of docs/layout.md, checked over every crate's product
//! code (a file's `#[cfg(test)] mod tests` and everything after it left
//! out): no function is longer than 150 lines, and no public function or
//! trait method returns `Result<_, String>` (each library crate's errors
//! are its `error.rs` enum, whose variant says who can fix a failure).
//!
//! Functions are found by their `fn` line and end at the first line that
//! closes them at the same indent, as rustfmt lays code out.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

/// Longest function allowed outside tests, in lines.
const MAX_FN_LINES: usize = 150;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every crate's `src/` files, with their product lines (the test module
/// at the end of a file left out).
fn sources() -> Vec<(PathBuf, Vec<String>)> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for c in std::fs::read_dir(&crates).unwrap() {
        let src = c.unwrap().path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            let lines: Vec<String> = text.lines().map(str::to_string).collect();
            let end = lines
                .windows(2)
                .position(|w| {
                    w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod tests")
                })
                .unwrap_or(lines.len());
            (f, lines[..end].to_vec())
        })
        .collect()
}

/// The name of the function a line opens (`pub(crate) async fn name(`),
/// with the line's indent.
fn fn_start(line: &str) -> Option<(&str, &str)> {
    let body = line.trim_start();
    let indent = &line[..line.len() - body.len()];
    let mut rest = body;
    if let Some(r) = rest.strip_prefix("pub") {
        rest = match r.strip_prefix('(') {
            Some(r) => r.split_once(") ")?.1,
            None => r.strip_prefix(' ')?,
        };
    }
    for q in ["const ", "async ", "unsafe ", "extern \"C\" "] {
        rest = rest.strip_prefix(q).unwrap_or(rest);
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some((indent, &name[..end]))
}

/// `(file:line name, length)` of each function longer than the limit.
fn long_functions(files: &[(PathBuf, Vec<String>)]) -> Vec<String> {
    let mut out = Vec::new();
    for (f, lines) in files {
        for (i, l) in lines.iter().enumerate() {
            let Some((indent, name)) = fn_start(l) else {
                continue;
            };
            let close = format!("{indent}}}");
            if let Some(len) = lines[i + 1..].iter().position(|x| *x == close) {
                let n = len + 2;
                if n > MAX_FN_LINES {
                    out.push(format!("{}:{} {name}: {n} lines", f.display(), i + 1));
                }
            }
        }
    }
    out
}

/// A signature from its `fn` line to its body or `;`, on one line.
fn signature(lines: &[String], at: usize) -> String {
    let mut sig = String::new();
    for l in &lines[at..] {
        sig.push_str(l.trim());
        sig.push(' ');
        if l.contains('{') || l.trim_end().ends_with(';') {
            break;
        }
    }
    sig
}

/// Whether a signature returns a `Result` whose error is `String`.
fn returns_string_error(sig: &str) -> bool {
    let Some((_, ret)) = sig.split_once("->") else {
        return false;
    };
    let ret = ret.split(['{', ';']).next().unwrap_or_default();
    ret.contains("Result<") && ret.replace(' ', "").contains(",String>")
}

/// `file:line name` of each public function, each method of a public
/// trait, and each public type alias of a function (`pub type F = dyn
/// Fn(..) -> ..`), that returns `Result<_, String>`.
fn string_errors(files: &[(PathBuf, Vec<String>)]) -> Vec<String> {
    let mut out = Vec::new();
    for (f, lines) in files {
        // The indent of the public trait being read, if any.
        let mut in_trait: Option<String> = None;
        for (i, l) in lines.iter().enumerate() {
            let body = l.trim_start();
            let indent = &l[..l.len() - body.len()];
            if let Some(t) = &in_trait
                && l == &format!("{t}}}")
            {
                in_trait = None;
            }
            if body.starts_with("pub trait ") && l.trim_end().ends_with('{') {
                in_trait = Some(indent.to_string());
                continue;
            }
            if let Some(alias) = body.strip_prefix("pub type ")
                && returns_string_error(&signature(lines, i))
            {
                let name = alias.split(['<', ' ', '=']).next().unwrap_or_default();
                out.push(format!("{}:{} {name}", f.display(), i + 1));
                continue;
            }
            let Some((_, name)) = fn_start(l) else {
                continue;
            };
            let public = body.starts_with("pub fn ") || body.starts_with("pub async fn ");
            if (public || in_trait.is_some()) && returns_string_error(&signature(lines, i)) {
                out.push(format!("{}:{} {name}", f.display(), i + 1));
            }
        }
    }
    out
}

#[test]
fn the_checks_find_what_they_look_for() {
    let long: Vec<String> =
        std::iter::once("    pub(crate) async fn big(x: u8) -> u8 {".to_string())
            .chain((0..MAX_FN_LINES).map(|_| "        x;".to_string()))
            .chain(std::iter::once("    }".to_string()))
            .collect();
    let f = PathBuf::from("t.rs");
    assert_eq!(long_functions(&[(f.clone(), long.clone())]).len(), 1);
    assert!(long_functions(&[(f.clone(), long[..10].to_vec())]).is_empty());
    let code: Vec<String> = [
        "pub fn a(x: u8)",
        "    -> Result<u8, String> {",
        "}",
        "fn private() -> Result<(), String> {",
        "}",
        "pub fn typed() -> Result<(), Error> {",
        "}",
        "pub trait Hook {",
        "    fn before(&mut self) -> Result<(), String>;",
        "}",
        "pub type Save<'a> = dyn Fn(&str) -> Result<(), String> + 'a;",
        "pub type Typed<'a> = dyn Fn(&str) -> Result<(), Error> + 'a;",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let found = string_errors(&[(f, code)]);
    assert_eq!(
        found,
        ["t.rs:1 a", "t.rs:9 before", "t.rs:11 Save"],
        "{found:?}"
    );
}

#[test]
fn no_function_is_longer_than_150_lines() {
    let long = long_functions(&sources());
    assert!(
        long.is_empty(),
        "split these along setup, drive and render (docs/layout.md):\n{}",
        long.join("\n")
    );
}

#[test]
fn no_public_function_returns_a_string_error() {
    let found = string_errors(&sources());
    assert!(
        found.is_empty(),
        "return the crate's error.rs enum instead (docs/layout.md):\n{}",
        found.join("\n")
    );
}
