//! What the tests need from the host, in one place.
//!
//! * **Upstream conformance data** (CacheLib configs and traces, Distbench
//!   golden configs and results, resctl-bench outputs) is not part of the
//!   repository. It is found through one setting, `RACKBENCH_CONFORMANCE`
//!   (a directory), which defaults to `../shared/conformance` beside the
//!   workspace when that exists. A test that needs it and does not find it
//!   is skipped, visibly.
//! * **Skips are visible and counted.** [`skip`] writes one line,
//!   `rackbench-test skipped [KIND] TEST: WHY`, straight to the process's
//!   stderr (not through the test harness's capture, so `cargo test` shows
//!   it for a passing test), and appends it to the file named by
//!   `RACKBENCH_SKIP_LOG` when set, so that `.ci/run` can list them.
//!   When `RACKBENCH_REQUIRE_<KIND>=1` the skip is a failure instead:
//!   `.ci/run` sets it for every environment it provides.
//!
//! This crate is a dev-dependency only; nothing in it runs in the product.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The environment variable that names the conformance directory.
pub const CONFORMANCE_ENV: &str = "RACKBENCH_CONFORMANCE";

/// The environment variable of the file that collects skip lines.
pub const SKIP_LOG_ENV: &str = "RACKBENCH_SKIP_LOG";

/// `RACKBENCH_REQUIRE_<KIND>`: set to 1, a skip of that kind fails.
pub fn require_var(kind: &str) -> String {
    format!("RACKBENCH_REQUIRE_{}", kind.to_ascii_uppercase())
}

/// True when `RACKBENCH_REQUIRE_<KIND>=1`.
pub fn required(kind: &str) -> bool {
    std::env::var(require_var(kind)).as_deref() == Ok("1")
}

/// The current test's name (libtest names each test's thread after it).
fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("(unnamed test)")
        .to_string()
}

/// Reports that the current test cannot run here because `why`, and
/// returns so the caller can `return`. Panics instead (failing the test)
/// when `RACKBENCH_REQUIRE_<KIND>=1`.
pub fn skip(kind: &str, why: &str) {
    let kind = kind.to_ascii_uppercase();
    if required(&kind) {
        panic!("{}=1 but this test cannot run: {why}", require_var(&kind));
    }
    let line = format!("rackbench-test skipped [{kind}] {}: {why}\n", test_name());
    // std::io::stderr() is not redirected by libtest's output capture
    // (only the print macros are), so the line shows for a passing test.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    if let Some(log) = std::env::var_os(SKIP_LOG_ENV)
        && let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
    {
        let _ = f.write_all(line.as_bytes());
    }
}

/// The conformance directory, if there is one: `RACKBENCH_CONFORMANCE`
/// when set (it must then exist), else `../shared/conformance` beside the
/// workspace.
pub fn conformance_root() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(CONFORMANCE_ENV) {
        let dir = PathBuf::from(dir);
        return dir.is_dir().then_some(dir);
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance");
    dir.is_dir().then_some(dir)
}

/// `rel` under the conformance directory, or `None` after a visible skip
/// (kind `CONFORMANCE`) when the directory or `rel` in it is absent.
pub fn conformance(rel: &str) -> Option<PathBuf> {
    let Some(root) = conformance_root() else {
        skip(
            "conformance",
            &format!(
                "no upstream conformance data (set {CONFORMANCE_ENV}, or put shared/conformance beside the workspace)"
            ),
        );
        return None;
    };
    let path = root.join(rel);
    if path.exists() {
        return Some(path);
    }
    skip(
        "conformance",
        &format!("{} is not in the conformance data", path.display()),
    );
    None
}

/// `let dir = conformance_or_return!("distbench/x");`: the path, or a
/// visible skip and a return from the calling test.
#[macro_export]
macro_rules! conformance_or_return {
    ($rel:expr) => {
        match $crate::conformance($rel) {
            Some(p) => p,
            None => return,
        }
    };
}

/// `rackbench results show RUN_ID --text` of the store `db`: its stdout
/// (the run's upstream text, printed again from its stored record). Panics
/// with the command's stderr when it fails.
pub fn results_text(rackbench: &Path, db: &Path, run_id: &str) -> String {
    let o = std::process::Command::new(rackbench)
        .arg("--db")
        .arg(db)
        .args(["results", "show", run_id, "--text"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", rackbench.display()));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "results show {run_id} --text failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    text
}

/// Asserts that `text` is not empty and that each of its lines appears in
/// `live`, in the same order (other lines may sit between them): what a
/// stored run reprints is what the run printed.
pub fn assert_lines_in_order(text: &str, live: &str) {
    assert!(!text.trim().is_empty(), "nothing reprinted");
    let mut rest = live.lines();
    for want in text.lines() {
        assert!(
            rest.any(|l| l == want),
            "line {want:?} of the reprinted text is not in the run's output (in order):\n{live}\n--- reprinted:\n{text}"
        );
    }
}

/// A throwaway PostgreSQL server for a test: a fresh cluster (initdb, trust
/// auth) in its own temporary directory, listening on 127.0.0.1 on a free
/// port with its unix socket in that directory, run as the `postgres` OS
/// user when the test runs as root. Dropping it stops the server and
/// removes the directory.
pub struct Postgres {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    as_postgres: bool,
    /// The server's self-signed certificate (PEM), when started with TLS.
    ca: Option<PathBuf>,
}

/// A self-signed certificate for `names` (host names or IP addresses) and
/// its private key, both PEM: the server's certificate and its own CA.
pub fn self_signed_cert(names: &[&str]) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap_or_else(|e| panic!("cannot make a key: {e}"));
    let mut params =
        rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap_or_else(|e| panic!("bad certificate names {names:?}: {e}"));
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "rackbench test server");
    let cert = params
        .self_signed(&key)
        .unwrap_or_else(|e| panic!("cannot sign the certificate: {e}"));
    (cert.pem(), key.serialize_pem())
}

impl Postgres {
    /// The binaries' directory: `RACKBENCH_POSTGRES_BIN` (when it has
    /// initdb), else the newest `/usr/lib/postgresql/<version>/bin`
    /// (Debian's layout).
    fn bin_dir() -> Option<PathBuf> {
        if let Some(d) = std::env::var_os("RACKBENCH_POSTGRES_BIN") {
            let d = PathBuf::from(d);
            return d.join("initdb").is_file().then_some(d);
        }
        let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| {
                let e = e.ok()?;
                let v = e.file_name().to_str()?.parse::<u32>().ok()?;
                Some((v, e.path().join("bin")))
            })
            .filter(|(_, b)| b.join("initdb").is_file() && b.join("pg_ctl").is_file())
            .collect();
        versions.sort();
        versions.pop().map(|(_, b)| b)
    }

    /// Starts a server, or returns `None` after a visible skip (kind
    /// `POSTGRES`) when PostgreSQL is not installed. Panics when it is but
    /// the server does not start.
    pub fn start() -> Option<Postgres> {
        Self::start_with(false)
    }

    /// [`Postgres::start`] with `ssl=on` and a self-signed certificate for
    /// `localhost` and `127.0.0.1` (its PEM file: [`Postgres::ca_file`]).
    /// TCP connections must use TLS (`hostssl` only): a client that
    /// connects did so over TLS.
    pub fn start_tls() -> Option<Postgres> {
        Self::start_with(true)
    }

    /// The server certificate, which is its own CA (None without TLS).
    pub fn ca_file(&self) -> Option<&Path> {
        self.ca.as_deref()
    }

    fn start_with(tls: bool) -> Option<Postgres> {
        use std::os::unix::fs::MetadataExt;
        let Some(bin) = Self::bin_dir() else {
            skip(
                "postgres",
                "PostgreSQL's initdb and pg_ctl are not installed (apt-get install postgresql, or set RACKBENCH_POSTGRES_BIN)",
            );
            return None;
        };
        let as_postgres = std::fs::metadata("/proc/self").map(|m| m.uid()).ok() == Some(0);
        if as_postgres
            && !std::process::Command::new("id")
                .args(["-u", "postgres"])
                .output()
                .is_ok_and(|o| o.status.success())
        {
            skip(
                "postgres",
                "running as root and there is no `postgres` user to run the server as",
            );
            return None;
        }
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "rackbench-pg-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        let mut pg = Postgres {
            bin,
            dir,
            port: 0,
            as_postgres,
            ca: None,
        };
        if as_postgres {
            let st = std::process::Command::new("chown")
                .arg("postgres:")
                .arg(&pg.dir)
                .status();
            assert!(
                st.is_ok_and(|s| s.success()),
                "cannot chown {} to postgres",
                pg.dir.display()
            );
        }
        let data = pg.dir.join("data");
        pg.run(
            "initdb",
            &[
                "-D",
                &data.to_string_lossy(),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
        );
        let mut tls_opts = String::new();
        if tls {
            let (cert, key) = self_signed_cert(&["localhost", "127.0.0.1"]);
            let cert_file = pg.dir.join("server.crt");
            let key_file = pg.dir.join("server.key");
            let hba_file = pg.dir.join("pg_hba_ssl.conf");
            for (file, text, mode) in [
                (&cert_file, cert.as_str(), 0o644),
                (&key_file, key.as_str(), 0o600),
                (
                    &hba_file,
                    "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
                    0o644,
                ),
            ] {
                use std::os::unix::fs::PermissionsExt;
                std::fs::write(file, text)
                    .unwrap_or_else(|e| panic!("cannot write {}: {e}", file.display()));
                std::fs::set_permissions(file, std::fs::Permissions::from_mode(mode))
                    .unwrap_or_else(|e| panic!("cannot chmod {}: {e}", file.display()));
                if as_postgres {
                    let st = std::process::Command::new("chown")
                        .arg("postgres:")
                        .arg(file)
                        .status();
                    assert!(
                        st.is_ok_and(|s| s.success()),
                        "cannot chown {} to postgres",
                        file.display()
                    );
                }
            }
            tls_opts = format!(
                " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={} -c hba_file={}",
                cert_file.display(),
                key_file.display(),
                hba_file.display()
            );
            pg.ca = Some(cert_file);
        }
        // A free port can be taken between the probe and the start: try a
        // few.
        for attempt in 0..3 {
            pg.port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .unwrap_or_else(|e| panic!("no free port: {e}"));
            let opts = format!(
                "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off{tls_opts}",
                pg.port,
                pg.dir.display()
            );
            let log = pg.dir.join("server.log");
            let ok = pg.try_run(
                "pg_ctl",
                &[
                    "start",
                    "-w",
                    "-t",
                    "60",
                    "-D",
                    &data.to_string_lossy(),
                    "-l",
                    &log.to_string_lossy(),
                    "-o",
                    &opts,
                ],
            );
            match ok {
                Ok(()) => return Some(pg),
                Err(e) if attempt == 2 => panic!(
                    "PostgreSQL did not start: {e}\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                ),
                Err(_) => {}
            }
        }
        None
    }

    fn command(&self, tool: &str) -> std::process::Command {
        let path = self.bin.join(tool);
        let mut c = if self.as_postgres {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            std::process::Command::new(path)
        };
        c.current_dir(&self.dir).stdin(std::process::Stdio::null());
        c
    }

    fn try_run(&self, tool: &str, args: &[&str]) -> Result<(), String> {
        let o = self
            .command(tool)
            .args(args)
            .output()
            .map_err(|e| format!("cannot run {tool}: {e}"))?;
        if o.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{tool} {}: {}\n{}{}",
                args.join(" "),
                o.status,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ))
        }
    }

    fn run(&self, tool: &str, args: &[&str]) {
        if let Err(e) = self.try_run(tool, args) {
            panic!("{e}");
        }
    }

    /// The URL of its `postgres` database.
    pub fn url(&self) -> String {
        self.db_url("postgres")
    }

    /// The URL of database `name` (see [`Postgres::create_db`]).
    pub fn db_url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates an empty database `name` and returns its URL.
    pub fn create_db(&self, name: &str) -> String {
        self.run(
            "createdb",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                name,
            ],
        );
        self.db_url(name)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if self.port != 0 {
            let data = self.dir.join("data");
            let _ = self.try_run(
                "pg_ctl",
                &[
                    "stop",
                    "-w",
                    "-m",
                    "immediate",
                    "-D",
                    &data.to_string_lossy(),
                ],
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn require_var_is_upper_case() {
        assert_eq!(require_var("netns"), "RACKBENCH_REQUIRE_NETNS");
    }
}
