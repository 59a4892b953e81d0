//! The workspace's shape: no module of any crate imports a module that
//! imports it back, directly or through others (an import circle).
//!
//! A module's imports are the `crate::`, `super::` and `self::` paths in
//! its code outside `#[cfg(test)]` (uses, qualified names and intra-doc
//! links alike), and the bare paths that start with one of its own child
//! modules (`use driver::Peer` in `engine/mod.rs`, `client::Rpc` in
//! `kernels/mod.rs`), resolved to the longest prefix that names one of
//! the crate's modules. A path from a module to one of its own ancestors
//! is not an import: a child lives inside its parent (`super::Hook` in
//! `hooks/shell.rs` while `hooks/mod.rs` builds a `shell::Shell` is the
//! usual shape, not a circle). Modules are files: `a/b.rs` and
//! `a/b/mod.rs` are `a::b`.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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

/// `src/a/b.rs` and `src/a/b/mod.rs` -> `["a", "b"]`; `lib.rs` -> `[]`;
/// binaries are left out.
fn module_of(src: &Path, file: &Path) -> Option<Vec<String>> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    if parts
        .last()
        .is_some_and(|l| l == "mod" || l == "lib" || l == "main")
    {
        parts.pop();
    }
    Some(parts)
}

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths of a `{...}` use group (`text` starts after its `{`), each
/// prefixed with `prefix`; nested groups are followed.
fn group(text: &str, prefix: &[String], emit: &mut dyn FnMut(Vec<String>)) {
    let mut depth = 0;
    let mut start = 0;
    let mut items = Vec::new();
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&text[start..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    for item in items {
        let mut path = prefix.to_vec();
        let mut rest = item.trim();
        loop {
            if let Some(inner) = rest.strip_prefix('{') {
                group(inner, &path, emit);
                break;
            }
            let id: String = rest.chars().take_while(|c| ident_char(*c)).collect();
            if id.is_empty() {
                if path.len() > prefix.len() {
                    emit(path);
                }
                break;
            }
            rest = &rest[id.len()..];
            path.push(id);
            match rest.strip_prefix("::") {
                Some(r) => rest = r,
                None => {
                    emit(path);
                    break;
                }
            }
        }
    }
}

/// Reads the path going on at `code[from..]` after the identifiers in
/// `path` (a `{...}` group yields each of its paths) and records it under
/// `base`, with the prefix before a group.
fn rest_of_path(
    code: &str,
    from: usize,
    mut path: Vec<String>,
    base: &str,
    out: &mut Vec<(String, Vec<String>)>,
) {
    let mut j = from;
    loop {
        let rest = &code[j..];
        if let Some(inner) = rest.strip_prefix('{') {
            group(inner, &path, &mut |p| out.push((base.to_string(), p)));
            break;
        }
        let id: String = rest.chars().take_while(|c| ident_char(*c)).collect();
        if id.is_empty() {
            break;
        }
        j += id.len();
        path.push(id);
        if code[j..].starts_with("::") {
            j += 2;
        } else {
            break;
        }
    }
    if !path.is_empty() {
        out.push((base.to_string(), path));
    }
}

/// The paths after `crate::`, `super::` or `self::` in `code`: the base
/// and the path's identifiers; a `{...}` group yields each top-level
/// first identifier.
fn paths(code: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for base in ["crate", "super", "self"] {
        let pat = format!("{base}::");
        let mut from = 0;
        while let Some(i) = code[from..].find(&pat) {
            let at = from + i;
            from = at + pat.len();
            if at > 0 && ident_char(bytes[at - 1] as char) {
                continue;
            }
            rest_of_path(code, from, Vec::new(), base, &mut out);
        }
    }
    // Bare paths (base ""): an identifier followed by `::` that is not
    // itself the tail of a path; `graph` keeps those naming a child.
    let mut from = 0;
    while let Some(i) = code[from..].find("::") {
        let end = from + i;
        from = end + 2;
        let start = code[..end]
            .char_indices()
            .rev()
            .take_while(|(_, c)| ident_char(*c))
            .last()
            .map_or(end, |(k, _)| k);
        if start == end
            || (start > 0 && matches!(bytes[start - 1], b':' | b'$'))
            || bytes[start].is_ascii_digit()
        {
            continue;
        }
        let head = &code[start..end];
        if ["crate", "super", "self", "Self"].contains(&head) {
            continue;
        }
        rest_of_path(code, from, vec![head.to_string()], "", &mut out);
    }
    out
}

/// Each module's imports of other modules of the crate at `src`.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mods: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .filter_map(|f| module_of(src, f).map(|m| (m, f.clone())))
        .collect();
    let mut g = BTreeMap::new();
    for (m, file) in &mods {
        let text = std::fs::read_to_string(file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        let mut deps = BTreeSet::new();
        for (base, path) in paths(code) {
            let mut cand: Vec<String> = match base.as_str() {
                "crate" => Vec::new(),
                "super" => m[..m.len().saturating_sub(1)].to_vec(),
                "" => {
                    // Only a path that starts with a child module of `m`.
                    let mut child = m.clone();
                    child.push(path[0].clone());
                    if !mods.contains_key(&child) {
                        continue;
                    }
                    m.clone()
                }
                _ => m.clone(),
            };
            cand.extend(path);
            if let Some(k) = (1..=cand.len())
                .rev()
                .find(|k| mods.contains_key(&cand[..*k]))
                && cand[..k] != m[..]
                && !m.starts_with(&cand[..k])
            {
                deps.insert(cand[..k].join("::"));
            }
        }
        g.insert(m.join("::"), deps);
    }
    g
}

/// The cycles of `g`: its strongly connected components of more than one
/// module (Tarjan's algorithm).
fn cycles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in &t.g[v] {
            let w = w.as_str();
            if !t.g.contains_key(w) {
                continue;
            }
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn the_detector_finds_a_circle() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path();
    std::fs::create_dir_all(src.join("cache")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod cache;\npub mod other;\n").unwrap();
    std::fs::write(src.join("cache/mod.rs"), "pub mod dram;\npub mod hybrid;\n").unwrap();
    // dram -> hybrid by a qualified name; its test module's import does
    // not count.
    std::fs::write(
        src.join("cache/dram.rs"),
        "pub struct S { n: Option<super::hybrid::N> }\n#[cfg(test)]\nmod t { use crate::other::X; }\n",
    )
    .unwrap();
    // hybrid -> dram and other through one use group.
    std::fs::write(
        src.join("cache/hybrid.rs"),
        "use crate::{other, cache::dram::S};\npub struct N;\n",
    )
    .unwrap();
    // other -> hybrid by an intra-doc link.
    std::fs::write(
        src.join("other.rs"),
        "/// [`crate::cache::hybrid::N`]\npub struct X;\n",
    )
    .unwrap();
    let g = graph(src);
    assert_eq!(
        g["cache::dram"],
        BTreeSet::from(["cache::hybrid".to_string()])
    );
    assert_eq!(
        g["cache::hybrid"],
        BTreeSet::from(["cache::dram".to_string(), "other".to_string()])
    );
    assert_eq!(
        cycles(&g),
        vec![vec!["cache::dram", "cache::hybrid", "other"]]
    );
    // A bare path to a child module counts (`use driver::Peer` in a
    // mod.rs), an external crate's path of the same shape does not.
    std::fs::write(
        src.join("cache/mod.rs"),
        "pub mod dram;\npub mod hybrid;\nuse hybrid::N;\nuse serde::Serialize;\n",
    )
    .unwrap();
    assert_eq!(
        graph(src)["cache"],
        BTreeSet::from(["cache::hybrid".to_string()])
    );
    // Break it: the circle is gone.
    std::fs::write(src.join("other.rs"), "pub struct X;\n").unwrap();
    std::fs::write(src.join("cache/dram.rs"), "pub struct S;\n").unwrap();
    assert!(cycles(&graph(src)).is_empty());
}

#[test]
fn no_crate_has_an_import_circle() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut found = Vec::new();
    for e in std::fs::read_dir(crates).unwrap() {
        let src = e.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        for c in cycles(&graph(&src)) {
            found.push(format!("{}: {}", src.display(), c.join(" <-> ")));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}
