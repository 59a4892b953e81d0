//! `pack`: upstream's tarball of a result file and its report files.
//!
//! Upstream writes `STEM.tar.gz` in the current directory (STEM: the
//! result file's name without `.gz` and `.json`) holding the result file
//! under its own name and rd-agent's per-second report files of the jobs'
//! periods under `STEM-report.d/`. rackbench runs no rd-agent and keeps no
//! report files: what a job measured each second is in its `record`, inside
//! the result file. So the tarball holds the result file alone, and the
//! lines on stderr say so. The tarball is written atomically.

use crate::journal::Journal;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What `pack` wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Packed {
    pub tarball: PathBuf,
    /// The jobs' periods, overlapping ones merged, as upstream lists them.
    pub periods: Vec<(u64, u64)>,
}

/// `STEM.tar.gz` for `result`, as upstream names it.
pub fn tarball_name(result: &Path) -> Result<String, crate::Error> {
    let fname = result
        .file_name()
        .ok_or_else(|| crate::Error::Input(format!("{}: not a file name", result.display())))?
        .to_string_lossy()
        .to_string();
    let stem = fname.trim_end_matches(".gz").trim_end_matches(".json");
    Ok(format!("{stem}.tar.gz"))
}

/// The non-empty periods, sorted, with overlapping ones merged (upstream
/// lists the report periods it packs this way).
pub fn merged_periods(mut pers: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    pers.retain(|p| p.0 < p.1);
    pers.sort();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for p in pers {
        match out.last_mut() {
            Some(cur) if p.0 <= cur.1 => cur.1 = cur.1.max(p.1),
            _ => out.push(p),
        }
    }
    out
}

/// Upstream's `format_period`: `11/27/26 18:42:46 - 11/27/26 18:45:01
/// (START-END)`, in local time.
pub fn format_period(p: (u64, u64)) -> String {
    let t = |s: u64| {
        crate::clock::Local::at(std::time::UNIX_EPOCH + std::time::Duration::from_secs(s)).x_t()
    };
    format!("{} - {} ({}-{})", t(p.0), t(p.1), p.0, p.1)
}

/// Packs `result` into `dir/STEM.tar.gz`.
pub fn pack(result: &Path, dir: &Path) -> Result<Packed, crate::Error> {
    if !result.exists() {
        return Err(crate::Error::Input(format!(
            "result file {} does not exist",
            result.display()
        )));
    }
    // Refuses a file that is not a journal, as format does.
    let journal = Journal::open(result).map_err(|e| crate::Error::Input(e.to_string()))?;
    let periods = merged_periods(journal.jobs.iter().map(|j| j.period).collect());
    let name = tarball_name(result)?;
    let tarball = dir.join(&name);
    eprintln!("Creating {name:?} containing the following report periods");
    for (i, p) in periods.iter().enumerate() {
        eprintln!("[{i:02}] {}", format_period(*p));
    }
    let fname = result
        .file_name()
        .ok_or_else(|| crate::Error::Input(format!("{}: not a file name", result.display())))?;
    let err = |e: std::io::Error| format!("{}: {e}", tarball.display());
    let f = atomic_write_file::AtomicWriteFile::open(&tarball)
        .map_err(err)
        .map_err(crate::Error::Host)?;
    let mut tgz = tar::Builder::new(flate2::write::GzEncoder::new(
        f,
        flate2::Compression::default(),
    ));
    tgz.append_path_with_name(result, fname)
        .map_err(|e| crate::Error::Host(format!("packing {}: {e}", result.display())))?;
    let gz = tgz.into_inner().map_err(err).map_err(crate::Error::Host)?;
    let mut f = gz.finish().map_err(err).map_err(crate::Error::Host)?;
    f.flush().map_err(err).map_err(crate::Error::Host)?;
    f.commit().map_err(err).map_err(crate::Error::Host)?;
    eprintln!(
        "Packed 0/0 reports: rackbench keeps no per-second report files (each job's \
         samples are in its record in {})",
        fname.to_string_lossy()
    );
    Ok(Packed { tarball, periods })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_periods_as_upstream() {
        assert_eq!(
            tarball_name(Path::new("/x/res.json.gz")).unwrap(),
            "res.tar.gz"
        );
        assert_eq!(tarball_name(Path::new("res.json")).unwrap(), "res.tar.gz");
        assert_eq!(tarball_name(Path::new("res")).unwrap(), "res.tar.gz");
        assert_eq!(
            merged_periods(vec![(30, 40), (10, 20), (15, 25), (5, 5), (40, 50)]),
            vec![(10, 25), (30, 50)]
        );
        let p = format_period((0, 60));
        assert!(p.ends_with(" (0-60)"), "{p}");
        assert_eq!(p.matches('/').count(), 4, "{p}");
    }

    #[test]
    fn packs_the_result_file_under_its_name() {
        let d = tempfile::tempdir().unwrap();
        let res = d.path().join("r.json");
        let mut j = Journal::open(&res).unwrap();
        j.upsert(crate::journal::JobData {
            spec: crate::spec::parse("storage").unwrap(),
            period: (100, 200),
            sysinfo: serde_json::Value::Null,
            record: None,
            result: None,
        });
        j.save().unwrap();
        let out = d.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let p = pack(&res, &out).unwrap();
        assert_eq!(p.tarball, out.join("r.tar.gz"));
        let mut a = tar::Archive::new(flate2::read::GzDecoder::new(
            std::fs::File::open(&p.tarball).unwrap(),
        ));
        let mut names = Vec::new();
        for e in a.entries().unwrap() {
            let mut e = e.unwrap();
            names.push(e.path().unwrap().display().to_string());
            let mut body = String::new();
            std::io::Read::read_to_string(&mut e, &mut body).unwrap();
            assert_eq!(body, std::fs::read_to_string(&res).unwrap());
        }
        assert_eq!(names, vec!["r.json"]);
        assert!(
            pack(&d.path().join("none.json"), &out)
                .unwrap_err()
                .to_string()
                .contains("does not exist")
        );
    }
}
