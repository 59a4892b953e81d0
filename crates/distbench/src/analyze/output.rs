//! The summary files of an analysis, held in memory until they are written
//! (each atomically) into the output folder.

use super::AnalyzeError;
use super::format::{Options, Point};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Summary files by path relative to the output folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputTree {
    files: BTreeMap<PathBuf, String>,
}

impl OutputTree {
    /// Renders `points` into the file at `path`, unless there are none: like
    /// upstream, empty summaries are not written. A later file of the same
    /// path replaces an earlier one, as upstream's later write would.
    pub(crate) fn add_summary(&mut self, path: PathBuf, points: &[Point], opts: &Options) {
        if !points.is_empty() {
            self.add(path, opts.render(points));
        }
    }

    /// Adds (or replaces) the file at `path`.
    pub(crate) fn add(&mut self, path: PathBuf, text: String) {
        self.files.insert(path, text);
    }

    /// The files in path order, relative to the output folder.
    pub fn files(&self) -> impl Iterator<Item = (&Path, &str)> {
        self.files.iter().map(|(p, t)| (p.as_path(), t.as_str()))
    }

    /// The text of the file at `path` (relative to the output folder).
    pub fn get(&self, path: impl AsRef<Path>) -> Option<&str> {
        self.files.get(path.as_ref()).map(String::as_str)
    }

    /// How many files there are.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether there are no files.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Writes every file under `dir`, creating folders as needed. Each file
    /// is written to a temporary file beside it and renamed into place, so a
    /// reader never sees half a summary. Files already in `dir` that the
    /// analysis does not produce are left alone.
    pub fn write_to(&self, dir: &Path) -> Result<(), AnalyzeError> {
        let write_error = |path: &Path, error| AnalyzeError::Write {
            path: path.to_path_buf(),
            error,
        };
        std::fs::create_dir_all(dir).map_err(|e| write_error(dir, e))?;
        for (relative, text) in &self.files {
            let path = dir.join(relative);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| write_error(parent, e))?;
            }
            harness::fsutil::write_atomic(&path, text.as_bytes())
                .map_err(|e| write_error(&path, e))?;
        }
        Ok(())
    }
}
