//! The results store: an embedded SQLite database (bundled with the binary,
//! nothing to install) with one row per job run.

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;

use crate::record::Record;
use std::path::{Path, PathBuf};

/// A store could not be opened or used; the message names the file.
#[derive(Debug, thiserror::Error)]
#[error("results store {path}: {message}")]
pub struct StoreError {
    pub path: PathBuf,
    pub message: String,
}

/// One recorded run of one job (one iteration).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunRow {
    pub id: i64,
    pub run_id: String,
    pub job: String,
    pub benchmark: String,
    pub role: Option<String>,
    pub iteration: u32,
    pub timestamp: u64,
    pub success: bool,
    pub hostname: String,
    pub args: Vec<String>,
    pub machine: Value,
    pub metrics: Value,
    pub report_path: Option<String>,
    pub artifacts_dir: Option<String>,
    /// The workload's typed result (None for runs recorded before records
    /// were kept, and for a job that failed before its workload returned).
    pub record: Option<Record>,
}

/// Which rows [`Store::select`] returns: those matching every given
/// condition (a list matches any of its values; an empty one, anything).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFilter {
    pub run_ids: Vec<String>,
    pub jobs: Vec<String>,
    pub hosts: Vec<String>,
    /// Unix seconds, inclusive.
    pub since: Option<u64>,
    /// Unix seconds, exclusive.
    pub until: Option<u64>,
    pub success_only: bool,
}

/// The database.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id        TEXT    NOT NULL,
    job           TEXT    NOT NULL,
    benchmark     TEXT    NOT NULL,
    role          TEXT,
    iteration     INTEGER NOT NULL,
    timestamp     INTEGER NOT NULL,
    success       INTEGER NOT NULL,
    hostname      TEXT    NOT NULL,
    args          TEXT    NOT NULL,
    machine       TEXT    NOT NULL,
    metrics       TEXT    NOT NULL,
    report_path   TEXT,
    artifacts_dir TEXT,
    record        TEXT
);
CREATE INDEX IF NOT EXISTS runs_run_id ON runs(run_id);
CREATE INDEX IF NOT EXISTS runs_job ON runs(job, timestamp);
";

impl Store {
    /// `$RACKBENCH_DB`, else `$XDG_DATA_HOME/rackbench/results.db`, else
    /// `~/.local/share/rackbench/results.db`.
    pub fn default_path() -> PathBuf {
        if let Some(p) = std::env::var_os("RACKBENCH_DB") {
            return PathBuf::from(p);
        }
        let base = std::env::var_os("XDG_DATA_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
            .unwrap_or_else(|| PathBuf::from("."));
        base.join("rackbench").join("results.db")
    }

    /// Opens (creating if needed) the store at `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let err = |message: String| StoreError {
            path: path.to_path_buf(),
            message,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| err(format!("cannot create its directory: {e}")))?;
        }
        let conn = Connection::open(path).map_err(|e| err(e.to_string()))?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| err(e.to_string()))?;
        // WAL lets parallel instances (e.g. autoscale) record concurrently.
        let _: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(|e| err(format!("not a usable SQLite database ({e})")))?;
        conn.execute_batch(SCHEMA)
            .map_err(|e| err(format!("cannot create the schema: {e}")))?;
        // Stores made before records were kept lack the column; add it (a
        // parallel instance may have added it first).
        let has_record: bool = conn
            .query_row(
                "SELECT COUNT(*) FROM pragma_table_info('runs') WHERE name = 'record'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n > 0)
            .map_err(|e| err(format!("cannot read the schema: {e}")))?;
        if !has_record
            && let Err(e) = conn.execute("ALTER TABLE runs ADD COLUMN record TEXT", [])
            && !e.to_string().contains("duplicate column")
        {
            return Err(err(format!("cannot add the record column: {e}")));
        }
        Ok(Store {
            conn,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError {
            path: self.path.clone(),
            message: e.to_string(),
        }
    }

    /// Records a run; returns its row id.
    pub fn record(&self, r: &RunRow) -> Result<i64, StoreError> {
        self.conn
            .execute(
                "INSERT INTO runs (run_id, job, benchmark, role, iteration, timestamp, success, hostname, args, machine, metrics, report_path, artifacts_dir, record)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
                params![
                    r.run_id,
                    r.job,
                    r.benchmark,
                    r.role,
                    r.iteration,
                    r.timestamp as i64,
                    r.success,
                    r.hostname,
                    serde_json::to_string(&r.args).expect("json"),
                    r.machine.to_string(),
                    r.metrics.to_string(),
                    r.report_path,
                    r.artifacts_dir,
                    r.record
                        .as_ref()
                        .map(|rec| serde_json::to_string(rec).expect("json")),
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(self.conn.last_insert_rowid())
    }

    fn query(&self, sql: &str, p: impl rusqlite::Params) -> Result<Vec<RunRow>, StoreError> {
        let mut stmt = self.conn.prepare(sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(p, |row| {
                let args: String = row.get(9)?;
                let machine: String = row.get(10)?;
                let metrics: String = row.get(11)?;
                let record: Option<String> = row.get(14)?;
                Ok(RunRow {
                    id: row.get(0)?,
                    run_id: row.get(1)?,
                    job: row.get(2)?,
                    benchmark: row.get(3)?,
                    role: row.get(4)?,
                    iteration: row.get(5)?,
                    timestamp: row.get::<_, i64>(6)? as u64,
                    success: row.get(7)?,
                    hostname: row.get(8)?,
                    args: serde_json::from_str(&args).unwrap_or_default(),
                    machine: serde_json::from_str(&machine).unwrap_or(Value::Null),
                    metrics: serde_json::from_str(&metrics).unwrap_or(Value::Null),
                    report_path: row.get(12)?,
                    artifacts_dir: row.get(13)?,
                    record: record.and_then(|r| serde_json::from_str(&r).ok()),
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
    }

    const COLS: &'static str = "id, run_id, job, benchmark, role, iteration, timestamp, success, hostname, args, machine, metrics, report_path, artifacts_dir, record";

    /// The most recent `limit` rows, newest first.
    pub fn recent(&self, limit: usize) -> Result<Vec<RunRow>, StoreError> {
        self.query(
            &format!("SELECT {} FROM runs ORDER BY id DESC LIMIT ?1", Self::COLS),
            params![limit as i64],
        )
    }

    /// Every row of one invocation, in order.
    pub fn by_run_id(&self, run_id: &str) -> Result<Vec<RunRow>, StoreError> {
        self.query(
            &format!(
                "SELECT {} FROM runs WHERE run_id = ?1 ORDER BY id",
                Self::COLS
            ),
            params![run_id],
        )
    }

    /// Successful rows of a job, newest first.
    pub fn successes(&self, job: &str, limit: Option<usize>) -> Result<Vec<RunRow>, StoreError> {
        self.query(
            &format!(
                "SELECT {} FROM runs WHERE job = ?1 AND success = 1 ORDER BY id DESC LIMIT ?2",
                Self::COLS
            ),
            params![job, limit.map(|l| l as i64).unwrap_or(-1)],
        )
    }

    /// The rows that pass `f`, oldest first.
    pub fn select(&self, f: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
        use rusqlite::types::Value as Sql;
        let mut clauses: Vec<String> = Vec::new();
        let mut args: Vec<Sql> = Vec::new();
        for (column, values) in [
            ("run_id", &f.run_ids),
            ("job", &f.jobs),
            ("hostname", &f.hosts),
        ] {
            if !values.is_empty() {
                clauses.push(format!(
                    "{column} IN ({})",
                    vec!["?"; values.len()].join(", ")
                ));
                args.extend(values.iter().map(|v| Sql::Text(v.clone())));
            }
        }
        if let Some(t) = f.since {
            clauses.push("timestamp >= ?".into());
            args.push(Sql::Integer(t as i64));
        }
        if let Some(t) = f.until {
            clauses.push("timestamp < ?".into());
            args.push(Sql::Integer(t as i64));
        }
        if f.success_only {
            clauses.push("success = 1".into());
        }
        let filter = if clauses.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", clauses.join(" AND "))
        };
        self.query(
            &format!("SELECT {} FROM runs{filter} ORDER BY id", Self::COLS),
            rusqlite::params_from_iter(args),
        )
    }

    /// True when some row has this run id.
    pub fn has_run(&self, run_id: &str) -> Result<bool, StoreError> {
        self.conn
            .query_row(
                "SELECT 1 FROM runs WHERE run_id = ?1 LIMIT 1",
                params![run_id],
                |_| Ok(()),
            )
            .optional()
            .map(|o| o.is_some())
            .map_err(|e| self.err(e))
    }
}

/// Numeric leaves of a metrics object, keyed by dotted path (arrays skipped:
/// they are histories, not figures).
pub fn flatten_numbers(v: &Value) -> std::collections::BTreeMap<String, f64> {
    fn walk(prefix: &str, v: &Value, out: &mut std::collections::BTreeMap<String, f64>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, v, out);
                }
            }
            Value::Number(n) => {
                if let Some(f) = n.as_f64() {
                    out.insert(prefix.to_string(), f);
                }
            }
            _ => {}
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk("", v, &mut out);
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn row(run_id: &str, job: &str, qps: f64, success: bool) -> RunRow {
        RunRow {
            id: 0,
            run_id: run_id.into(),
            job: job.into(),
            benchmark: "calibrate".into(),
            role: None,
            iteration: 1,
            timestamp: 1,
            success,
            hostname: "h".into(),
            args: vec!["-x".into()],
            machine: json!({"hostname": "h"}),
            metrics: json!({"final_achieved_qps": qps, "nested": {"p99_ms": 2.0}, "history": [1, 2]}),
            report_path: None,
            artifacts_dir: Some("d".into()),
            record: None,
        }
    }

    #[test]
    fn records_and_reads_back_from_a_real_file() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("sub/results.db");
        let s = Store::open(&path).unwrap();
        s.record(&row("aaaaaaaa", "j", 10.0, true)).unwrap();
        s.record(&row("bbbbbbbb", "j", 12.0, false)).unwrap();
        drop(s);
        let s = Store::open(&path).unwrap();
        let got = s.by_run_id("aaaaaaaa").unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].args, vec!["-x"]);
        assert_eq!(got[0].metrics["final_achieved_qps"], 10.0);
        assert_eq!(s.successes("j", None).unwrap().len(), 1);
        assert_eq!(s.recent(10).unwrap()[0].run_id, "bbbbbbbb");
        assert!(s.has_run("bbbbbbbb").unwrap());
        assert!(!s.has_run("cccccccc").unwrap());
    }

    #[test]
    fn selects_by_run_job_host_time_and_success() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("r.db")).unwrap();
        for (run, job, host, ts, ok) in [
            ("r1", "j", "h1", 100, true),
            ("r1", "k", "h1", 100, true),
            ("r2", "j", "h2", 200, true),
            ("r3", "j", "h2", 300, false),
        ] {
            let mut r = row(run, job, 1.0, ok);
            r.hostname = host.into();
            r.timestamp = ts;
            s.record(&r).unwrap();
        }
        let ids = |f: RunFilter| {
            s.select(&f)
                .unwrap()
                .iter()
                .map(|r| format!("{}/{}", r.run_id, r.job))
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(RunFilter::default()).len(), 4);
        assert_eq!(
            ids(RunFilter {
                jobs: vec!["j".into()],
                hosts: vec!["h2".into()],
                ..Default::default()
            }),
            ["r2/j", "r3/j"]
        );
        assert_eq!(
            ids(RunFilter {
                jobs: vec!["j".into()],
                success_only: true,
                since: Some(150),
                ..Default::default()
            }),
            ["r2/j"]
        );
        assert_eq!(
            ids(RunFilter {
                run_ids: vec!["r1".into(), "r3".into()],
                until: Some(300),
                ..Default::default()
            }),
            ["r1/j", "r1/k"]
        );
    }

    #[test]
    fn keeps_records_and_upgrades_a_store_made_without_them() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("old.db");
        // A store as rackbench made it before records were kept.
        let old = SCHEMA.replace(",\n    record        TEXT", "");
        assert!(!old.contains("record"));
        let c = Connection::open(&path).unwrap();
        c.execute_batch(&old).unwrap();
        c.execute(
            "INSERT INTO runs (run_id, job, benchmark, iteration, timestamp, success, hostname, args, machine, metrics)
             VALUES ('oldrun00', 'j', 'calibrate', 1, 1, 1, 'h', '[]', '{}', '{}')",
            [],
        )
        .unwrap();
        drop(c);
        let s = Store::open(&path).unwrap();
        assert_eq!(s.by_run_id("oldrun00").unwrap()[0].record, None);
        let rec = Record::of("calibrate", 1, &json!({"qps": 3}));
        let mut r = row("newrun00", "j", 1.0, true);
        r.record = Some(rec.clone());
        s.record(&r).unwrap();
        drop(s);
        // Opening again (column present) changes nothing.
        let s = Store::open(&path).unwrap();
        assert_eq!(s.by_run_id("newrun00").unwrap()[0].record, Some(rec));
    }

    #[test]
    fn a_file_that_is_not_a_database_is_a_clear_error() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("results.db");
        std::fs::write(
            &path,
            "this is not sqlite, just some text that is long enough to matter",
        )
        .unwrap();
        let e = Store::open(&path).err().unwrap().to_string();
        assert!(e.contains("results.db"), "{e}");
    }

    #[test]
    fn flattening() {
        let f = flatten_numbers(&json!({"a": 1, "b": {"c": 2.5, "d": "x"}, "e": [1]}));
        assert_eq!(f.len(), 2);
        assert_eq!(f["b.c"], 2.5);
    }
}
