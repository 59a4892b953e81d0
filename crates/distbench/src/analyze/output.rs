//! The summary files of an analysis, held in memory until they are written
//! (each atomically) into the output folder, and what upstream's script
//! prints on stdout about them ([`UpstreamReport`]).

use super::format::{Options, Point};
use super::{AnalyzeError, SampleCounts};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::AddAssign;
use std::path::{Path, PathBuf};

/// Summary files by path relative to the output folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputTree {
    files: BTreeMap<PathBuf, String>,
}

impl OutputTree {
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

/// What upstream's script prints on stdout when it succeeds, with its
/// definitions. Its sample counts are not counts of distinct samples:
/// upstream adds a list of samples to them every time a summary includes
/// it, so a sample is counted once per summary it lands in (the test,
/// client, client instance, service, RPC, pairwise and overall summaries:
/// seven times in a plain tree). [`SampleCounts`] counts each sample once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamReport {
    /// The summaries left unwritten because they hold no sample, relative
    /// to the output folder, in the order they were made (the
    /// `Empty output ... skipped...` lines).
    pub empty: Vec<PathBuf>,
    /// `Total samples:` the successful RPC samples (warm-ups and samples
    /// without a trace context included), once per summary including them.
    pub total_samples: u64,
    /// `Warmup samples:` the warm-up ones among them, counted alike.
    pub warmup_samples: u64,
    /// `Skipped samples:` the warm-up samples again, printed only when
    /// warm-ups are left out (`None` with `--consider_warmups`).
    pub skipped_samples: Option<u64>,
}

impl UpstreamReport {
    /// Upstream's stdout for an output folder given as `output_directory`
    /// on the command line: each empty summary's path is that text as
    /// given, `/`, and the summary's path in the tree.
    pub fn stdout(&self, output_directory: &Path) -> String {
        let mut out = String::new();
        let dir = output_directory.display();
        // Writing into a String cannot fail.
        for path in &self.empty {
            let _ = writeln!(out, "Empty output {dir}/{} skipped...", path.display());
        }
        // Python's print puts a space between its two arguments, after the
        // one that ends the label.
        let _ = writeln!(out, "Total samples:  {}", self.total_samples);
        let _ = writeln!(out, "Warmup samples:  {}", self.warmup_samples);
        if let Some(skipped) = self.skipped_samples {
            let _ = writeln!(out, "Skipped samples:  {skipped}");
        }
        out
    }
}

/// The successful samples of some lists, as upstream's tally counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Every sample.
    pub samples: u64,
    /// The warm-up ones.
    pub warmup: u64,
}

impl AddAssign for Tally {
    fn add_assign(&mut self, other: Tally) {
        self.samples += other.samples;
        self.warmup += other.warmup;
    }
}

/// The contents of one summary: its points, in order, and the tally of the
/// sample lists they were selected from.
#[derive(Debug, Clone, Default)]
pub(crate) struct Summary {
    pub points: Vec<Point>,
    pub tally: Tally,
}

impl Summary {
    /// Appends a selected list of points and the tally of its samples.
    pub fn extend(&mut self, points: &[Point], tally: Tally) {
        self.points.extend_from_slice(points);
        self.tally += tally;
    }

    /// Appends another summary.
    pub fn append(&mut self, other: Summary) {
        let Summary { mut points, tally } = other;
        self.points.append(&mut points);
        self.tally += tally;
    }
}

/// An analysis being built: the files so far, upstream's report, and the
/// counts of distinct samples.
#[derive(Debug)]
pub(crate) struct Builder {
    pub opts: Options,
    pub tree: OutputTree,
    pub upstream: UpstreamReport,
    pub counts: SampleCounts,
}

impl Builder {
    pub fn new(opts: Options) -> Self {
        Builder {
            opts,
            tree: OutputTree::default(),
            upstream: UpstreamReport::default(),
            counts: SampleCounts::default(),
        }
    }

    /// Adds upstream's tally of a summary as it is made.
    fn count(&mut self, summary: &Summary) {
        self.upstream.total_samples += summary.tally.samples;
        self.upstream.warmup_samples += summary.tally.warmup;
    }

    /// Renders `summary` into the file at `path`, unless it holds no point:
    /// like upstream, an empty summary is not written, only reported. A
    /// later file of the same path replaces an earlier one, as upstream's
    /// later write would.
    pub fn add_summary(&mut self, path: PathBuf, summary: &Summary) {
        self.count(summary);
        if summary.points.is_empty() {
            self.upstream.empty.push(path);
        } else {
            let text = self.opts.render(&summary.points);
            self.tree.add(path, text);
        }
    }

    /// Adds `overall_summary.txt`, written even when empty, and closes the
    /// report.
    pub fn finish(mut self, overall: &Summary) -> (OutputTree, UpstreamReport, SampleCounts) {
        self.count(overall);
        let text = self.opts.render(&overall.points);
        self.tree.add(PathBuf::from("overall_summary.txt"), text);
        self.counts.used = overall.points.len() as u64;
        self.upstream.skipped_samples =
            (!self.opts.include_warmups).then_some(self.upstream.warmup_samples);
        (self.tree, self.upstream, self.counts)
    }
}
