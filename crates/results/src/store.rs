//! The results store, one row per job run: an embedded SQLite database
//! (bundled with the binary, nothing to install) by default, or a
//! PostgreSQL server shared by a fleet when the store is named by a
//! `postgres://` or `postgresql://` URL. Both hold the same table with the
//! same columns (JSON kept as TEXT) and read back the same [`RunRow`]s.

use rusqlite::{Connection, params_from_iter};
use serde::Serialize;
use serde_json::Value;

use crate::record::Record;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// A store could not be opened or used; the message names the file (or
/// the server's URL, without its password).
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
    /// Wall time of the job's iteration, hooks included, in seconds (None
    /// for runs recorded before durations were kept, and rows built from
    /// metrics alone). Stored in milliseconds.
    pub duration_secs: Option<f64>,
}

impl RunRow {
    /// A successful run of `job` (benchmark `benchmark`) known only by its
    /// metrics: what the page draws from, for tests and tools that build
    /// rows themselves.
    pub fn from_metrics(job: &str, benchmark: &str, metrics: Value) -> RunRow {
        RunRow {
            id: 1,
            run_id: "r1".into(),
            job: job.into(),
            benchmark: benchmark.into(),
            role: None,
            iteration: 1,
            timestamp: 1_795_000_000,
            success: true,
            hostname: "h".into(),
            args: vec![],
            machine: Value::Object(Default::default()),
            metrics,
            report_path: None,
            artifacts_dir: None,
            record: None,
            duration_secs: None,
        }
    }
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

/// What [`Store::push_to`] did; `pushed + skipped` is the number of rows
/// the source has, however many pushes run at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PushCount {
    /// Rows copied into the target.
    pub pushed: usize,
    /// Rows the target already had (the same [`RUN_IDENTITY`]), or that a
    /// concurrent push copied first.
    pub skipped: usize,
}

/// The database.
pub struct Store {
    backend: Backend,
    /// The file, or the server's URL without its password.
    path: PathBuf,
}

enum Backend {
    Sqlite(Connection),
    /// The client needs `&mut` to query; the store's methods take `&self`.
    Postgres(Mutex<postgres::Client>),
}

/// A statement's parameter, bound the same way by both backends.
enum Arg {
    Text(String),
    OptText(Option<String>),
    Int(i64),
    OptInt(Option<i64>),
}

/// A row as both backends return it, before its JSON is parsed.
struct RawRow {
    id: i64,
    run_id: String,
    job: String,
    benchmark: String,
    role: Option<String>,
    iteration: i64,
    timestamp: i64,
    success: i64,
    hostname: String,
    args: String,
    machine: String,
    metrics: String,
    report_path: Option<String>,
    artifacts_dir: Option<String>,
    record: Option<String>,
    duration_ms: Option<i64>,
}

/// The table, in SQLite's types; [`postgres_schema`] is the same table in
/// PostgreSQL's (64-bit integers, as SQLite's INTEGER).
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
    record        TEXT,
    duration_ms   INTEGER
);
CREATE INDEX IF NOT EXISTS runs_run_id ON runs(run_id);
CREATE INDEX IF NOT EXISTS runs_job ON runs(job, timestamp);
";

/// [`SCHEMA`] for PostgreSQL: the same columns, INTEGER as BIGINT and the
/// row id from an identity column.
fn postgres_schema() -> String {
    SCHEMA
        .replace(
            "INTEGER PRIMARY KEY AUTOINCREMENT",
            "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
        )
        .replace("INTEGER", "BIGINT")
}

/// What makes a row one run of one job: the runner writes one row per job
/// and iteration of an invocation (run id) on one host, in one role, at
/// one time; a run id has several rows (jobs, iterations, roles, hosts).
/// The role is NULL when the run had none, and NULLs never clash in a
/// unique index, so it is indexed as `COALESCE(role, '')`.
pub const RUN_IDENTITY: &str = "run_id, job, COALESCE(role, ''), iteration, hostname, timestamp";

/// The migration that makes [`RUN_IDENTITY`] unique (so a push, however
/// many run at once, inserts a run once), the same statements on both
/// backends. A store made before it may hold duplicates (two pushes that
/// raced): of each set of rows with the same identity, the one with the
/// lowest id (the first recorded) is kept and the others are deleted, then
/// the index is made. Run in one transaction, once: only while the index
/// is missing.
fn identity_migration() -> String {
    format!(
        "DELETE FROM runs WHERE id NOT IN (SELECT MIN(id) FROM runs GROUP BY {RUN_IDENTITY});
         CREATE UNIQUE INDEX IF NOT EXISTS runs_identity ON runs({RUN_IDENTITY});"
    )
}

/// The migrations a store made by an older rackbench needs, as PostgreSQL
/// runs them (SQLite lacks `ADD COLUMN IF NOT EXISTS` and `DO`:
/// [`Store::open`] checks the schema first there).
fn postgres_migrations() -> String {
    format!(
        "ALTER TABLE runs ADD COLUMN IF NOT EXISTS record TEXT;
         ALTER TABLE runs ADD COLUMN IF NOT EXISTS duration_ms BIGINT;
         DO $$ BEGIN
           IF to_regclass('runs_identity') IS NULL THEN
             {}
           END IF;
         END $$;",
        identity_migration()
    )
}

/// The statement that records a row; [`Store::push_to`] adds `ON CONFLICT
/// DO NOTHING`.
const INSERT: &str = "INSERT INTO runs (run_id, job, benchmark, role, iteration, timestamp, success, hostname, args, machine, metrics, report_path, artifacts_dir, record, duration_ms)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

/// Rows a push inserts per transaction: one transaction per batch keeps a
/// big push from holding the target's locks for long.
const PUSH_BATCH: usize = 500;

/// Serialises schema creation between rackbench processes opening one
/// PostgreSQL store at once (an advisory lock key: "rackbench").
const POSTGRES_SCHEMA_LOCK: i64 = 0x7261_636b_6265_6e63;

/// True when `s` names a PostgreSQL store rather than a SQLite file.
pub fn is_postgres_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// `url` without its password (in the user part or a `password=`
/// parameter), for messages.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (main, query) = match rest.split_once('?') {
        Some((m, q)) => (m, Some(q)),
        None => (rest, None),
    };
    let authority_end = main.find('/').unwrap_or(main.len());
    let (authority, path) = main.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => {
            let user = user.split_once(':').map_or(user, |(u, _)| u);
            format!("{user}@{host}")
        }
        None => authority.to_string(),
    };
    let mut out = format!("{scheme}://{authority}{path}");
    if let Some(q) = query {
        let kept: Vec<&str> = q
            .split('&')
            .filter(|kv| !kv.to_ascii_lowercase().starts_with("password="))
            .collect();
        if !kept.is_empty() {
            out.push('?');
            out.push_str(&kept.join("&"));
        }
    }
    out
}

/// `?` placeholders as PostgreSQL's `$1, $2, ...` (the statements here
/// have no `?` inside literals).
fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push_str(&format!("${n}"));
        } else {
            out.push(c);
        }
    }
    out
}

/// `args` bound for SQLite.
fn sqlite_params(args: &[Arg]) -> rusqlite::ParamsFromIter<Vec<rusqlite::types::Value>> {
    use rusqlite::types::Value as Sql;
    params_from_iter(
        args.iter()
            .map(|a| match a {
                Arg::Text(s) => Sql::Text(s.clone()),
                Arg::OptText(o) => o.clone().map_or(Sql::Null, Sql::Text),
                Arg::Int(i) => Sql::Integer(*i),
                Arg::OptInt(o) => o.map_or(Sql::Null, Sql::Integer),
            })
            .collect::<Vec<_>>(),
    )
}

/// A PostgreSQL error with the server's message (the client's own text
/// is only "db error" for those).
fn pg_error(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => e.to_string(),
    }
}

/// `args` bound for PostgreSQL.
fn pg_params(args: &[Arg]) -> Vec<&(dyn postgres::types::ToSql + Sync)> {
    args.iter()
        .map(|a| match a {
            Arg::Text(s) => s as &(dyn postgres::types::ToSql + Sync),
            Arg::OptText(o) => o,
            Arg::Int(i) => i,
            Arg::OptInt(o) => o,
        })
        .collect()
}

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

    /// Opens (creating the table if needed) the store at `path`: a SQLite
    /// file, or a PostgreSQL database when `path` is a `postgres://` or
    /// `postgresql://` URL.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        match path.to_str() {
            Some(url) if is_postgres_url(url) => Self::open_postgres(url),
            _ => Self::open_sqlite(path),
        }
    }

    fn open_sqlite(path: &Path) -> Result<Self, StoreError> {
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
        // Stores made before records (then durations) were kept lack the
        // columns; add them (a parallel instance may have added one first).
        for (column, ty) in [("record", "TEXT"), ("duration_ms", "INTEGER")] {
            let has: bool = conn
                .query_row(
                    "SELECT COUNT(*) FROM pragma_table_info('runs') WHERE name = ?",
                    [column],
                    |r| r.get::<_, i64>(0),
                )
                .map(|n| n > 0)
                .map_err(|e| err(format!("cannot read the schema: {e}")))?;
            if !has
                && let Err(e) =
                    conn.execute(&format!("ALTER TABLE runs ADD COLUMN {column} {ty}"), [])
                && !e.to_string().contains("duplicate column")
            {
                return Err(err(format!("cannot add the {column} column: {e}")));
            }
        }
        let index_count = |conn: &Connection| {
            conn.query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'runs_identity'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_err(|e| err(format!("cannot read the schema: {e}")))
        };
        if index_count(&conn)? == 0 {
            // IMMEDIATE: a parallel instance migrating too waits, then
            // finds the index made and nothing left to delete.
            let migrate = conn.execute_batch(&format!(
                "BEGIN IMMEDIATE; {} COMMIT;",
                identity_migration()
            ));
            if let Err(e) = migrate {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(err(format!(
                    "cannot add the unique index on ({RUN_IDENTITY}): {e}"
                )));
            }
        }
        Ok(Store {
            backend: Backend::Sqlite(conn),
            path: path.to_path_buf(),
        })
    }

    fn open_postgres(url: &str) -> Result<Self, StoreError> {
        let shown = PathBuf::from(redact_url(url));
        let err = |message: String| StoreError {
            path: shown.clone(),
            message,
        };
        let (url, tls) = tls::TlsSettings::from_url(url).map_err(err)?;
        let mut config: postgres::Config = url
            .parse()
            .map_err(|e| err(format!("not a usable PostgreSQL URL: {e}")))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(std::time::Duration::from_secs(10));
        }
        let mut client = tls.connect(&mut config).map_err(err)?;
        let schema = format!(
            "SELECT pg_advisory_xact_lock({POSTGRES_SCHEMA_LOCK});\n{}\n{}",
            postgres_schema(),
            postgres_migrations()
        );
        client
            .transaction()
            .and_then(|mut tx| {
                tx.batch_execute(&schema)?;
                tx.commit()
            })
            .map_err(|e| err(format!("cannot create the schema: {}", pg_error(&e))))?;
        Ok(Store {
            backend: Backend::Postgres(Mutex::new(client)),
            path: shown,
        })
    }

    /// The file, or the URL (without its password) of a PostgreSQL store.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True when the store is on a PostgreSQL server.
    pub fn is_postgres(&self) -> bool {
        matches!(self.backend, Backend::Postgres(_))
    }

    fn err(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError {
            path: self.path.clone(),
            message: e.to_string(),
        }
    }

    fn client(m: &Mutex<postgres::Client>) -> MutexGuard<'_, postgres::Client> {
        // A panic elsewhere while holding it leaves the client as usable
        // as any: each statement stands alone.
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `sql` (with `?` placeholders) and returns each row's columns
    /// through `read`.
    fn rows<T>(
        &self,
        sql: &str,
        args: &[Arg],
        sqlite_read: impl Fn(&rusqlite::Row) -> rusqlite::Result<T>,
        pg_read: impl Fn(&postgres::Row) -> Result<T, postgres::Error>,
    ) -> Result<Vec<T>, StoreError> {
        match &self.backend {
            Backend::Sqlite(conn) => {
                let mut stmt = conn.prepare(sql).map_err(|e| self.err(e))?;
                let rows = stmt
                    .query_map(sqlite_params(args), |r| sqlite_read(r))
                    .map_err(|e| self.err(e))?;
                rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
            }
            Backend::Postgres(m) => {
                let rows = Self::client(m)
                    .query(&numbered(sql), &pg_params(args))
                    .map_err(|e| self.err(pg_error(&e)))?;
                rows.iter()
                    .map(&pg_read)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| self.err(pg_error(&e)))
            }
        }
    }

    /// The one integer a statement returns (a count, a new row's id).
    fn one_int(&self, sql: &str, args: &[Arg]) -> Result<i64, StoreError> {
        self.rows(sql, args, |r| r.get(0), |r| r.try_get(0))?
            .into_iter()
            .next()
            .ok_or_else(|| self.err(format!("no row from: {sql}")))
    }

    /// Records a run; returns its row id. A row of the same run (the same
    /// [`RUN_IDENTITY`]) already there is an error.
    pub fn record(&self, r: &RunRow) -> Result<i64, StoreError> {
        self.one_int(&format!("{INSERT} RETURNING id"), &self.insert_args(r)?)
    }

    /// The parameters of [`INSERT`] for `r`.
    fn insert_args(&self, r: &RunRow) -> Result<[Arg; 15], StoreError> {
        let json = |v: Result<String, serde_json::Error>| {
            v.map_err(|e| self.err(format!("cannot encode run {} as JSON: {e}", r.run_id)))
        };
        let args = [
            Arg::Text(r.run_id.clone()),
            Arg::Text(r.job.clone()),
            Arg::Text(r.benchmark.clone()),
            Arg::OptText(r.role.clone()),
            Arg::Int(i64::from(r.iteration)),
            Arg::Int(self.timestamp_arg(r.timestamp)?),
            Arg::Int(i64::from(r.success)),
            Arg::Text(r.hostname.clone()),
            Arg::Text(json(serde_json::to_string(&r.args))?),
            Arg::Text(r.machine.to_string()),
            Arg::Text(r.metrics.to_string()),
            Arg::OptText(r.report_path.clone()),
            Arg::OptText(r.artifacts_dir.clone()),
            Arg::OptText(
                r.record
                    .as_ref()
                    .map(|rec| json(serde_json::to_string(rec)))
                    .transpose()?,
            ),
            // Milliseconds: an integer, exact on both backends.
            Arg::OptInt(
                r.duration_secs
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(|s| (s * 1000.0).round() as i64),
            ),
        ];
        Ok(args)
    }

    /// Inserts those of `rows` the store lacks (by [`RUN_IDENTITY`]) in
    /// one transaction; returns how many it inserted. A concurrent push
    /// of the same rows waits for this one's transaction and then skips
    /// them (the unique index decides, not a prior look).
    fn insert_new(&self, rows: &[RunRow]) -> Result<usize, StoreError> {
        let sql = format!("{INSERT} ON CONFLICT DO NOTHING");
        let args = rows
            .iter()
            .map(|r| self.insert_args(r))
            .collect::<Result<Vec<_>, _>>()?;
        match &self.backend {
            Backend::Sqlite(conn) => {
                // IMMEDIATE: take the write lock now (waiting up to the
                // busy timeout), not at the first insert.
                conn.execute_batch("BEGIN IMMEDIATE")
                    .map_err(|e| self.err(format!("cannot start the push: {e}")))?;
                let inserted = (|| {
                    let mut stmt = conn.prepare(&sql)?;
                    let mut n = 0;
                    for a in &args {
                        n += stmt.execute(sqlite_params(a))?;
                    }
                    Ok::<_, rusqlite::Error>(n)
                })()
                .and_then(|n| conn.execute_batch("COMMIT").map(|()| n));
                inserted.map_err(|e| {
                    let _ = conn.execute_batch("ROLLBACK");
                    self.err(format!("cannot push: {e}"))
                })
            }
            Backend::Postgres(m) => {
                let sql = numbered(&sql);
                let mut client = Self::client(m);
                // Pushes of the same rows in different orders can deadlock;
                // PostgreSQL then aborts one, which tries its batch again.
                let mut attempts = 0;
                loop {
                    let inserted = (|| {
                        let mut tx = client.transaction()?;
                        let stmt = tx.prepare(&sql)?;
                        let mut n: u64 = 0;
                        for a in &args {
                            n += tx.execute(&stmt, &pg_params(a))?;
                        }
                        tx.commit()?;
                        Ok::<_, postgres::Error>(n)
                    })();
                    match inserted {
                        Ok(n) => return Ok(usize::try_from(n).unwrap_or(usize::MAX)),
                        Err(e)
                            if attempts < 3
                                && matches!(
                                    e.code(),
                                    Some(&postgres::error::SqlState::T_R_DEADLOCK_DETECTED)
                                        | Some(
                                            &postgres::error::SqlState::T_R_SERIALIZATION_FAILURE
                                        )
                                ) =>
                        {
                            attempts += 1;
                        }
                        Err(e) => return Err(self.err(format!("cannot push: {}", pg_error(&e)))),
                    }
                }
            }
        }
    }

    fn timestamp_arg(&self, t: u64) -> Result<i64, StoreError> {
        i64::try_from(t).map_err(|_| self.err(format!("timestamp {t} is too large to store")))
    }

    fn query(&self, sql: &str, args: &[Arg]) -> Result<Vec<RunRow>, StoreError> {
        let raw = self.rows(
            sql,
            args,
            |row| {
                Ok(RawRow {
                    id: row.get(0)?,
                    run_id: row.get(1)?,
                    job: row.get(2)?,
                    benchmark: row.get(3)?,
                    role: row.get(4)?,
                    iteration: row.get(5)?,
                    timestamp: row.get(6)?,
                    success: row.get(7)?,
                    hostname: row.get(8)?,
                    args: row.get(9)?,
                    machine: row.get(10)?,
                    metrics: row.get(11)?,
                    report_path: row.get(12)?,
                    artifacts_dir: row.get(13)?,
                    record: row.get(14)?,
                    duration_ms: row.get(15)?,
                })
            },
            |row| {
                Ok(RawRow {
                    id: row.try_get(0)?,
                    run_id: row.try_get(1)?,
                    job: row.try_get(2)?,
                    benchmark: row.try_get(3)?,
                    role: row.try_get(4)?,
                    iteration: row.try_get(5)?,
                    timestamp: row.try_get(6)?,
                    success: row.try_get(7)?,
                    hostname: row.try_get(8)?,
                    args: row.try_get(9)?,
                    machine: row.try_get(10)?,
                    metrics: row.try_get(11)?,
                    report_path: row.try_get(12)?,
                    artifacts_dir: row.try_get(13)?,
                    record: row.try_get(14)?,
                    duration_ms: row.try_get(15)?,
                })
            },
        )?;
        raw.into_iter().map(|r| self.decode(r)).collect()
    }

    fn decode(&self, r: RawRow) -> Result<RunRow, StoreError> {
        let iteration = u32::try_from(r.iteration).map_err(|_| {
            self.err(format!(
                "row {}: iteration {} is out of range",
                r.id, r.iteration
            ))
        })?;
        let timestamp = u64::try_from(r.timestamp).map_err(|_| {
            self.err(format!(
                "row {}: timestamp {} is negative",
                r.id, r.timestamp
            ))
        })?;
        Ok(RunRow {
            id: r.id,
            run_id: r.run_id,
            job: r.job,
            benchmark: r.benchmark,
            role: r.role,
            iteration,
            timestamp,
            success: r.success != 0,
            hostname: r.hostname,
            args: serde_json::from_str(&r.args).unwrap_or_default(),
            machine: serde_json::from_str(&r.machine).unwrap_or(Value::Null),
            metrics: serde_json::from_str(&r.metrics).unwrap_or(Value::Null),
            report_path: r.report_path,
            artifacts_dir: r.artifacts_dir,
            record: r.record.and_then(|rec| serde_json::from_str(&rec).ok()),
            duration_secs: r.duration_ms.map(|ms| ms as f64 / 1000.0),
        })
    }

    const COLS: &'static str = "id, run_id, job, benchmark, role, iteration, timestamp, success, hostname, args, machine, metrics, report_path, artifacts_dir, record, duration_ms";

    /// The most recent `limit` rows, newest first.
    pub fn recent(&self, limit: usize) -> Result<Vec<RunRow>, StoreError> {
        self.query(
            &format!("SELECT {} FROM runs ORDER BY id DESC LIMIT ?", Self::COLS),
            &[Arg::Int(i64::try_from(limit).unwrap_or(i64::MAX))],
        )
    }

    /// Every row of one invocation, in order.
    pub fn by_run_id(&self, run_id: &str) -> Result<Vec<RunRow>, StoreError> {
        self.query(
            &format!(
                "SELECT {} FROM runs WHERE run_id = ? ORDER BY id",
                Self::COLS
            ),
            &[Arg::Text(run_id.to_string())],
        )
    }

    /// Successful rows of a job, newest first.
    pub fn successes(&self, job: &str, limit: Option<usize>) -> Result<Vec<RunRow>, StoreError> {
        let mut args = vec![Arg::Text(job.to_string())];
        let mut sql = format!(
            "SELECT {} FROM runs WHERE job = ? AND success = 1 ORDER BY id DESC",
            Self::COLS
        );
        if let Some(l) = limit {
            sql.push_str(" LIMIT ?");
            args.push(Arg::Int(i64::try_from(l).unwrap_or(i64::MAX)));
        }
        self.query(&sql, &args)
    }

    /// The rows that pass `f`, oldest first.
    pub fn select(&self, f: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
        let mut clauses: Vec<String> = Vec::new();
        let mut args: Vec<Arg> = Vec::new();
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
                args.extend(values.iter().map(|v| Arg::Text(v.clone())));
            }
        }
        if let Some(t) = f.since {
            clauses.push("timestamp >= ?".into());
            args.push(Arg::Int(i64::try_from(t).unwrap_or(i64::MAX)));
        }
        if let Some(t) = f.until {
            clauses.push("timestamp < ?".into());
            args.push(Arg::Int(i64::try_from(t).unwrap_or(i64::MAX)));
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
            &args,
        )
    }

    /// True when some row has this run id.
    pub fn has_run(&self, run_id: &str) -> Result<bool, StoreError> {
        self.one_int(
            "SELECT COUNT(*) FROM runs WHERE run_id = ?",
            &[Arg::Text(run_id.to_string())],
        )
        .map(|n| n > 0)
    }

    /// A token that changes whenever a row is recorded or removed: the
    /// number of rows and the highest row id (`serve` reloads its page,
    /// and answers `304 Not Modified`, by it).
    pub fn version(&self) -> Result<String, StoreError> {
        let count = self.one_int("SELECT COUNT(*) FROM runs", &[])?;
        let max = self.one_int("SELECT COALESCE(MAX(id), 0) FROM runs", &[])?;
        Ok(format!("{count}.{max}"))
    }

    /// True when the store has a row of the same run as `r`: the same
    /// [`RUN_IDENTITY`] (its row id and results aside).
    pub fn contains(&self, r: &RunRow) -> Result<bool, StoreError> {
        self.one_int(
            "SELECT COUNT(*) FROM runs WHERE run_id = ? AND job = ? AND role IS NOT DISTINCT FROM ? AND iteration = ? AND hostname = ? AND timestamp = ?",
            &[
                Arg::Text(r.run_id.clone()),
                Arg::Text(r.job.clone()),
                Arg::OptText(r.role.clone()),
                Arg::Int(i64::from(r.iteration)),
                Arg::Text(r.hostname.clone()),
                Arg::Int(self.timestamp_arg(r.timestamp)?),
            ],
        )
        .map(|n| n > 0)
    }

    /// Copies this store's rows, oldest first, into `to` (which gives them
    /// its own row ids), skipping those it already [`contains`](Self::contains):
    /// pushing again copies nothing twice, and neither do pushes running at
    /// once (`INSERT ... ON CONFLICT DO NOTHING` against the unique index
    /// on [`RUN_IDENTITY`], [`PUSH_BATCH`] rows per transaction, counting
    /// the rows really inserted).
    pub fn push_to(&self, to: &Store) -> Result<PushCount, StoreError> {
        let mut count = PushCount::default();
        for batch in self.select(&RunFilter::default())?.chunks(PUSH_BATCH) {
            let pushed = to.insert_new(batch)?;
            count.pushed += pushed;
            count.skipped += batch.len().saturating_sub(pushed);
        }
        Ok(count)
    }
}

/// TLS to a PostgreSQL store, asked for as libpq users do: `sslmode=` and
/// `sslrootcert=` in the URL (rustls; no system OpenSSL).
mod tls {
    use postgres::config::SslMode;
    use rustls::client::WebPkiServerVerifier;
    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
    use std::path::PathBuf;
    use std::sync::Arc;

    /// The `sslmode` values understood, as libpq spells them.
    pub const ACCEPTED: &str = "disable, prefer, require, verify-ca, verify-full";

    /// How much of the server to trust.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Mode {
        /// No TLS (also when the URL has no `sslmode`).
        Disable,
        /// TLS when the server offers it, else plain; certificate unchecked.
        Prefer,
        /// TLS or fail; certificate unchecked unless `sslrootcert` is
        /// given (then checked as `verify-ca`, as libpq does).
        Require,
        /// TLS, certificate signed by the CA; any host name.
        VerifyCa,
        /// TLS, certificate signed by the CA and naming the host.
        VerifyFull,
    }

    #[derive(Debug)]
    pub struct TlsSettings {
        pub mode: Mode,
        pub sslmode: String,
        pub rootcert: Option<PathBuf>,
    }

    /// `%XX` escapes of a URL parameter decoded.
    fn percent_decode(s: &str) -> String {
        let b = s.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if b[i] == b'%'
                && i + 2 < b.len()
                && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
            {
                out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
                i += 3;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    impl TlsSettings {
        /// Takes `sslmode` and `sslrootcert` out of `url` (the client's
        /// parser knows neither `verify-*` nor `sslrootcert`): the URL left
        /// and the settings. An unknown `sslmode` is an error naming it.
        pub(crate) fn from_url(url: &str) -> Result<(String, TlsSettings), String> {
            let mut settings = TlsSettings {
                mode: Mode::Disable,
                sslmode: "disable".into(),
                rootcert: None,
            };
            let Some((base, query)) = url.split_once('?') else {
                return Ok((url.to_string(), settings));
            };
            let mut kept = Vec::new();
            for kv in query.split('&') {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                match k {
                    "sslmode" => {
                        let v = percent_decode(v);
                        settings.mode = match v.as_str() {
                            "disable" => Mode::Disable,
                            "prefer" => Mode::Prefer,
                            "require" => Mode::Require,
                            "verify-ca" => Mode::VerifyCa,
                            "verify-full" => Mode::VerifyFull,
                            _ => {
                                return Err(format!(
                                    "sslmode '{v}' is not supported; use one of: {ACCEPTED}"
                                ));
                            }
                        };
                        settings.sslmode = v;
                    }
                    "sslrootcert" => settings.rootcert = Some(PathBuf::from(percent_decode(v))),
                    _ => kept.push(kv),
                }
            }
            let url = if kept.is_empty() {
                base.to_string()
            } else {
                format!("{base}?{}", kept.join("&"))
            };
            Ok((url, settings))
        }

        /// The CA certificates to check the server's against: `sslrootcert`,
        /// else libpq's default `~/.postgresql/root.crt`.
        fn roots(&self) -> Result<(PathBuf, RootCertStore), String> {
            let file = match &self.rootcert {
                Some(f) => f.clone(),
                None => {
                    let default = std::env::var_os("HOME")
                        .map(|h| PathBuf::from(h).join(".postgresql/root.crt"));
                    match default.filter(|f| f.is_file()) {
                        Some(f) => f,
                        None => {
                            return Err(format!(
                                "sslmode={} checks the server's certificate and needs the CA's: add sslrootcert=FILE (a PEM file) to the URL, or put it in ~/.postgresql/root.crt",
                                self.sslmode
                            ));
                        }
                    }
                }
            };
            let bad = |e: String| format!("sslrootcert {}: {e}", file.display());
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(&file).map_err(|e| bad(e.to_string()))? {
                let cert = cert.map_err(|e| bad(format!("not a PEM certificate ({e})")))?;
                roots
                    .add(cert)
                    .map_err(|e| bad(format!("not a usable CA certificate ({e})")))?;
            }
            if roots.is_empty() {
                return Err(bad("holds no PEM certificate".into()));
            }
            Ok((file, roots))
        }

        fn client_config(&self) -> Result<ClientConfig, String> {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let builder = ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("TLS setup: {e}"))?;
            let check_ca = match self.mode {
                Mode::Disable | Mode::Prefer => false,
                Mode::Require => self.rootcert.is_some(),
                Mode::VerifyCa | Mode::VerifyFull => true,
            };
            if !check_ca {
                // `sslmode=require`/`prefer` without a CA, as libpq.
                let verifier = crate::tls::AnyCertificate::new(&provider);
                return Ok(builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(verifier))
                    .with_no_client_auth());
            }
            let (_, roots) = self.roots()?;
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("TLS setup: {e}"))?;
            Ok(if self.mode == Mode::VerifyFull {
                builder.with_webpki_verifier(webpki).with_no_client_auth()
            } else {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AnyName(webpki)))
                    .with_no_client_auth()
            })
        }

        /// Connects as the settings say. Errors say whether TLS was used.
        pub(crate) fn connect(
            &self,
            config: &mut postgres::Config,
        ) -> Result<postgres::Client, String> {
            if self.mode == Mode::Disable {
                config.ssl_mode(SslMode::Disable);
                return config
                    .connect(postgres::NoTls)
                    .map_err(|e| format!("cannot connect: {}", connect_error(&e, config)));
            }
            config.ssl_mode(if self.mode == Mode::Prefer {
                SslMode::Prefer
            } else {
                SslMode::Require
            });
            let tls = tokio_postgres_rustls::MakeRustlsConnect::new(self.client_config()?);
            config.connect(tls).map_err(|e| {
                let ca = self
                    .rootcert
                    .as_ref()
                    .map(|f| format!(", CA certificate {}", f.display()))
                    .unwrap_or_default();
                format!(
                    "cannot connect over TLS (sslmode={}{ca}): {}",
                    self.sslmode,
                    connect_error(&e, config)
                )
            })
        }
    }

    /// Why a connection failed, with the part of the URL to fix: the
    /// server's own message for a refusal (a database or role that does
    /// not exist, a wrong password), the host and port for a server that
    /// cannot be reached. The password is never named.
    fn connect_error(e: &postgres::Error, config: &postgres::Config) -> String {
        use postgres::error::SqlState;
        if let Some(db) = e.as_db_error() {
            let part = match db.code() {
                c if *c == SqlState::INVALID_CATALOG_NAME => config
                    .get_dbname()
                    .map(|d| format!(" (the URL's database '{d}')")),
                c if *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
                    || *c == SqlState::INVALID_PASSWORD =>
                {
                    config
                        .get_user()
                        .map(|u| format!(" (the URL's user '{u}')"))
                }
                _ => None,
            };
            return format!(
                "the server says: {} {}{}",
                db.severity(),
                db.message(),
                part.unwrap_or_default()
            );
        }
        let hosts: Vec<String> = config
            .get_hosts()
            .iter()
            .zip(config.get_ports().iter().chain(std::iter::repeat(&5432)))
            .map(|(h, p)| match h {
                postgres::config::Host::Tcp(h) => format!("{h}:{p}"),
                postgres::config::Host::Unix(d) => format!("{}:{p}", d.display()),
            })
            .collect();
        format!(
            "{} (the URL's host and port: {})",
            error_chain(e),
            hosts.join(", ")
        )
    }

    /// An error and its causes, as one line (a TLS failure's reason is in
    /// its cause).
    fn error_chain(e: &dyn std::error::Error) -> String {
        let mut out = e.to_string();
        let mut cur = e.source();
        while let Some(c) = cur {
            let s = c.to_string();
            if !out.contains(&s) {
                out.push_str(": ");
                out.push_str(&s);
            }
            cur = c.source();
        }
        out
    }

    /// `sslmode=verify-ca`: the chain is checked against the CA, the host
    /// name is not.
    #[derive(Debug)]
    struct AnyName(Arc<WebPkiServerVerifier>);

    impl ServerCertVerifier for AnyName {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            intermediates: &[CertificateDer<'_>],
            server_name: &ServerName<'_>,
            ocsp_response: &[u8],
            now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            match self.0.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            ) {
                Err(rustls::Error::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
                )) => Ok(ServerCertVerified::assertion()),
                other => other,
            }
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls12_signature(message, cert, dss)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls13_signature(message, cert, dss)
        }

        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            self.0.supported_verify_schemes()
        }
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
            duration_secs: None,
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
