//! The chart as monospace text, for terminals and plain-text reports:
//! [`Chart::to_text`].
//!
//! ```text
//! y label
//!  1.5 +                         ■■■■■■■■■■■■■■
//!      |                   ●■■■■■
//!  1.0 +     ■■■■■■■■■■■■■■
//!      +-----+-----+-----+-----+
//!      0     25    50    75    100
//!               x label
//!      ■ fitted  ● data
//! ```
//!
//! The face is `cols` x `rows` character cells. Each point of a series is
//! a marker (its [`Series::mark`], or `*` for a line and `o` for points)
//! in the cell it falls in; a line series is not joined, so the caller
//! samples it as densely as it wants it drawn. Later series are drawn over
//! earlier ones. Ticks are the same 1/2/5 steps as the bitmap charts'.

use crate::layout::{Axis, clean, data_bounds};
use crate::{Chart, Scale, Series, Style};

/// The smallest face, in cells.
pub const MIN_TEXT: (u32, u32) = (10, 4);
/// The largest face, in cells.
pub const MAX_TEXT: (u32, u32) = (400, 200);

impl Series {
    /// The character this series is marked with in text.
    pub fn text_mark(&self) -> char {
        self.mark.unwrap_or(match self.style {
            Style::Line => '*',
            Style::Points => 'o',
        })
    }
}

/// The cell of `frac` (0 at the low end, 1 at the high end) on an axis of
/// `n` cells, when it is inside.
fn cell(frac: f64, n: u32) -> Option<usize> {
    let c = (frac * (n - 1) as f64).round();
    (-0.5..=(n as f64 - 0.5)).contains(&c).then_some(c as usize)
}

impl Chart {
    /// The chart drawn in text with a face of `cols` x `rows` cells
    /// (clamped to [`MIN_TEXT`]..=[`MAX_TEXT`]): the title and y label
    /// above, y tick labels to the left, the x axis with its tick labels
    /// and the x label below, and a legend line of each series' mark and
    /// name. Lines end without trailing spaces.
    pub fn to_text(&self, cols: u32, rows: u32) -> String {
        let cols = cols.clamp(MIN_TEXT.0, MAX_TEXT.0);
        let rows = rows.clamp(MIN_TEXT.1, MAX_TEXT.1);
        let log = self.y_scale == Scale::Log10;
        let bounds = data_bounds(self);
        let x_ticks = (cols / 12).clamp(2, 10) as usize;
        let y_ticks = (rows / 4).clamp(2, 8) as usize;
        let xa = Axis::linear_ticked(
            bounds.map(|b| (b.0, b.1)),
            self.x_min,
            self.x_max,
            x_ticks,
            self.x_integer,
        );
        let y_data = bounds.map(|b| (b.2, b.3));
        let ya = if log {
            Axis::log10(y_data, self.y_min, self.y_max, y_ticks)
        } else {
            Axis::linear(y_data, self.y_min, self.y_max, y_ticks)
        };

        // The face, row 0 at the top.
        let (w, h) = (cols as usize, rows as usize);
        let mut face = vec![vec![' '; w]; h];
        for s in &self.series {
            let mark = s.text_mark();
            for &p in &s.points {
                let Some((x, y)) = clean(p, log) else {
                    continue;
                };
                let (Some(c), Some(r)) = (
                    xa.frac(x).and_then(|f| cell(f, cols)),
                    ya.frac(y).and_then(|f| cell(f, rows)),
                ) else {
                    continue;
                };
                face[h - 1 - r][c] = mark;
            }
        }
        if bounds.is_none() {
            let note = "no data";
            let (r, c) = (h / 2, w.saturating_sub(note.len()) / 2);
            for (i, ch) in note.chars().enumerate() {
                if let Some(cell) = face[r].get_mut(c + i) {
                    *cell = ch;
                }
            }
        }

        // y tick labels by row; the highest tick wins a shared row.
        let mut y_labels: Vec<Option<&str>> = vec![None; h];
        for (v, l) in ya.major.iter().zip(&ya.labels) {
            if let Some(r) = ya.frac(*v).and_then(|f| cell(f, rows)) {
                y_labels[h - 1 - r] = Some(l);
            }
        }
        let gutter = ya
            .labels
            .iter()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0);

        let mut out = String::new();
        let mut line = |s: String| {
            out.push_str(s.trim_end());
            out.push('\n');
        };
        if !self.title.trim().is_empty() {
            line(self.title.trim().to_string());
        }
        if !self.y_label.trim().is_empty() {
            line(self.y_label.trim().to_string());
        }
        for (r, row) in face.iter().enumerate() {
            let (label, axis) = match y_labels[r] {
                Some(l) => (l, '+'),
                None => ("", '|'),
            };
            line(format!(
                "{label:>gutter$} {axis}{}",
                row.iter().collect::<String>()
            ));
        }

        // The x axis: '+' at each tick, labels centred under them where
        // they do not run into the previous one.
        let mut axis: Vec<char> = vec!['-'; w];
        let mut labels: Vec<char> = vec![' '; w + gutter + 2];
        let mut free_from = 0usize;
        for (v, l) in xa.major.iter().zip(&xa.labels) {
            let Some(c) = xa.frac(*v).and_then(|f| cell(f, cols)) else {
                continue;
            };
            axis[c] = '+';
            let len = l.chars().count();
            let at = (gutter + 2 + c).saturating_sub(len / 2);
            if at < free_from {
                continue;
            }
            if labels.len() < at + len {
                labels.resize(at + len, ' ');
            }
            for (i, ch) in l.chars().enumerate() {
                labels[at + i] = ch;
            }
            free_from = at + len + 1;
        }
        line(format!(
            "{:>gutter$} +{}",
            "",
            axis.iter().collect::<String>()
        ));
        line(labels.iter().collect());
        let x_label = self.x_label.trim();
        if !x_label.is_empty() {
            let pad = (gutter + 2) + w.saturating_sub(x_label.chars().count()) / 2;
            line(format!("{:pad$}{x_label}", ""));
        }
        if !self.series.is_empty() {
            let legend: Vec<String> = self
                .series
                .iter()
                .map(|s| format!("{} {}", s.text_mark(), s.name.trim()))
                .collect();
            line(format!("{:>gutter$}  {}", "", legend.join("  ")));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::Chart;

    fn rows(t: &str) -> Vec<&str> {
        t.lines().collect()
    }

    #[test]
    fn points_land_in_their_cells_with_axes_and_legend() {
        // x 0..100 and y 0..10 with ticks at whole steps: the corners of a
        // 11x11 face are exact cells.
        let c = Chart::new("", "vrate", "MOF")
            .x_range(0.0, 100.0)
            .y_range(0.0, 10.0)
            .series("fitted", vec![(0.0, 0.0), (100.0, 10.0)])
            .mark('#')
            .points("data", vec![(50.0, 5.0), (100.0, 0.0)]);
        let t = c.to_text(11, 11);
        let r = rows(&t);
        assert_eq!(r[0], "MOF");
        // The top row holds the top tick's label and the fitted line's end.
        assert!(r[1].ends_with("+          #"), "{t}");
        assert!(r[1].trim_start().starts_with("10"), "{t}");
        // Middle row: the data point in the middle column.
        assert!(r[6].ends_with("     o"), "{t}");
        // Bottom row: the fitted start and the data point at x=100.
        assert!(r[11].ends_with("+#         o"), "{t}");
        // The x axis, its tick labels and the x label, then the legend.
        assert!(r[12].trim_start().starts_with('+'), "{t}");
        assert!(r[13].contains('0') && r[13].contains("100"), "{t}");
        assert_eq!(r[14].trim(), "vrate");
        assert_eq!(r[15].trim(), "# fitted  o data");
        // No trailing spaces, every row of the face has the same prefix
        // width.
        assert!(t.lines().all(|l| l == l.trim_end()));
        let axis_col = r[12].find('+').unwrap();
        for row in &r[1..12] {
            let c = row.chars().nth(axis_col).unwrap();
            assert!(c == '+' || c == '|', "{row:?} in\n{t}");
        }
    }

    #[test]
    fn later_series_draw_over_earlier_and_outside_points_are_dropped() {
        let c = Chart::new("title", "", "")
            .x_range(0.0, 10.0)
            .y_range(0.0, 10.0)
            .points("a", vec![(5.0, 5.0), (20.0, 5.0), (f64::NAN, 1.0)])
            .points("b", vec![(5.0, 5.0)])
            .mark('x');
        let t = c.to_text(11, 11);
        assert_eq!(t.lines().next(), Some("title"));
        assert_eq!(t.matches('x').count(), 2, "{t}"); // the face and the legend
        assert_eq!(t.matches('o').count(), 1, "{t}"); // the legend only
    }

    #[test]
    fn without_data_it_says_so_and_sizes_are_clamped() {
        let t = Chart::new("", "", "").to_text(0, 0);
        assert!(t.contains("no data"), "{t}");
        // The face is clamped to the smallest: 4 rows, 10 columns.
        let face: Vec<&str> = t.lines().take(4).collect();
        assert!(face.iter().all(|l| l.contains('|') || l.contains('+')));
        let axis = t.lines().nth(4).unwrap();
        assert_eq!(axis.trim_start().chars().count(), 11, "{t}");
    }
}
