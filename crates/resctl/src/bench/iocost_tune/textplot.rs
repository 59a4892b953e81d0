//! iocost-tune's text graphs as upstream prints them: upstream draws them
//! with the plotlib crate (0.5.1) as text, and `format` must print the
//! same characters, so this reproduces that crate's text layout (written
//! here from its observable rules, not with the crate itself):
//!
//! - Ticks: at most 6 per axis, the step the smallest of 1, 2, 4 and 5
//!   times a power of ten that gives no more than 6, then the largest step
//!   giving as many; tick values rounded to 5 decimals, printed as Rust
//!   prints an f64 (`0.5`, `100`).
//! - A value's cell: `round((v - min) / ((max - min) / cells))`; a point
//!   shows in columns and lines 1..=cells only.
//! - The y axis: the label written down its left column (centred over
//!   the face's height plus one), the tick values right-aligned, `-` at a
//!   tick, `|` and `+` at the origin; the x axis below: `+---`, `|` at the
//!   ticks, the tick values centred on theirs, the label centred.
//! - Layers are laid over one another with plotlib's overlay, which
//!   measures widths in bytes but lays characters: a line holding the
//!   3-byte point markers counts as wider than it is, so lines can lose
//!   or keep their last blank columns. The graphs inherit this, so it is
//!   kept: it is what makes upstream's lines end where they do.
//!
//! The whole layout is private to upstream's output; rackbench's own
//! graphs (the pdf's SVGs) are drawn by the chart crate.

/// A plot: the axes' ranges and labels, and the point series (their
/// marker), drawn in order.
pub struct TextPlot {
    pub x_range: (f64, f64),
    pub y_range: (f64, f64),
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<(Vec<(f64, f64)>, char)>,
}

/// The most ticks on an axis.
const MAX_TICKS: usize = 6;

/// The steps 1, 2, 4, 5 times the power of ten of `v`.
fn steps_around(v: f64) -> [f64; 4] {
    let scale = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 4.0, 5.0].map(|s| s * scale)
}

/// The tick steps from the first at or above `start`, ever larger.
fn steps_from(start: f64) -> impl Iterator<Item = f64> {
    let around = steps_around(start);
    let first = around
        .iter()
        .copied()
        .find(|s| *s >= start)
        .unwrap_or(around[0] * 10.0);
    std::iter::successors(Some(first), |&cur| {
        let around = steps_around(cur);
        Some(
            around
                .iter()
                .copied()
                .find(|s| *s > cur)
                .unwrap_or(around[0] * 10.0),
        )
    })
}

/// The ticks of `[min, max]` every `step`, through 0 when the range holds
/// it, each rounded to 5 decimals.
fn ticks_every(min: f64, max: f64, step: f64) -> Vec<f64> {
    let fix = |x: f64| (x * 100_000.0).round() / 100_000.0;
    let mut out = Vec::new();
    if min <= 0.0 {
        if max >= 0.0 {
            let mut neg: Vec<f64> = (1..)
                .map(|n| -fix(f64::from(n) * step))
                .take_while(|v| *v >= min)
                .collect();
            neg.reverse();
            out.extend(neg);
            out.push(0.0);
            out.extend(
                (1..)
                    .map(|n| fix(f64::from(n) * step))
                    .take_while(|v| *v <= max),
            );
        } else {
            let mut neg: Vec<f64> = (0..)
                .map(|n| -fix(f64::from(n) * step - max))
                .take_while(|v| *v >= min)
                .collect();
            neg.reverse();
            out.extend(neg);
        }
    } else {
        out.extend(
            (0..)
                .map(|n| fix(f64::from(n) * step + min))
                .take_while(|v| *v <= max),
        );
    }
    out
}

/// The axis' ticks (see the module doc).
pub fn ticks(min: f64, max: f64) -> Vec<f64> {
    let count = |step: f64| ticks_every(min, max, step).len();
    let least = (max - min) / MAX_TICKS as f64;
    // Steps grow tenfold every four; a range that is not a number finds
    // none within a few hundred.
    let Some(first) = steps_from(least).take(400).find(|s| count(*s) <= MAX_TICKS) else {
        return vec![min];
    };
    let n = count(first);
    let step = steps_from(first)
        .take(400)
        .take_while(|s| count(*s) == n)
        .fold(f64::NEG_INFINITY, f64::max);
    ticks_every(min, max, step)
}

/// The cell of `v` on an axis over `range` drawn in `cells` cells.
fn cell(v: f64, (min, max): (f64, f64), cells: u32) -> i32 {
    ((v - min) / ((max - min) / f64::from(cells))).round() as i32
}

/// Tick cell → tick value (the last tick wins a cell, as a map would).
fn tick_cells(range: (f64, f64), cells: u32) -> Vec<(i32, f64)> {
    let mut out: Vec<(i32, f64)> = Vec::new();
    for t in ticks(range.0, range.1) {
        let c = cell(t, range, cells);
        match out.iter_mut().find(|(k, _)| *k == c) {
            Some(e) => e.1 = t,
            None => out.push((c, t)),
        }
    }
    out
}

fn tick_at(map: &[(i32, f64)], c: i32) -> Option<f64> {
    map.iter().find(|(k, _)| *k == c).map(|(_, v)| *v)
}

/// `s` centred in `width` (Rust's `{:^}`: the odd space on the right);
/// longer text is kept whole.
fn centre(s: &str, width: usize) -> String {
    format!("{s:^width$}")
}

/// The y axis, one line per face line from the top (`height + 1` lines),
/// and the widest tick label.
fn y_axis(range: (f64, f64), label: &str, height: u32) -> (String, usize) {
    let map = tick_cells(range, height);
    let width = map
        .iter()
        .map(|(_, t)| t.to_string().len())
        .max()
        .unwrap_or(0);
    let label: Vec<char> = centre(label, height as usize + 1).chars().collect();
    let lines: Vec<String> = (0..=height as i32)
        .rev()
        .filter_map(|line| {
            // The label's last character sits on the bottom line.
            let ch = label.get(label.len().checked_sub(1 + line as usize)?)?;
            let (value, mark) = match tick_at(&map, line) {
                Some(t) => (t.to_string(), '-'),
                None => (String::new(), ' '),
            };
            let axis = if line == 0 { '+' } else { '|' };
            Some(format!("{ch} {value:>width$}{mark}{axis}"))
        })
        .collect();
    (lines.join("\n"), width)
}

/// The x axis (its line, tick marks, tick values and label) and where its
/// tick values start relative to the axis (negative: left of it).
fn x_axis(range: (f64, f64), label: &str, width: u32) -> (String, i32) {
    let mut map = tick_cells(range, width);
    map.sort_by_key(|(c, _)| *c);
    let marks: String = (0..=width as i32)
        .map(|c| if tick_at(&map, c).is_some() { '|' } else { ' ' })
        .collect();
    // Each value takes an odd width, centred on its tick.
    let labels: Vec<(String, usize, i32)> = map
        .iter()
        .map(|(c, t)| {
            let text = t.to_string();
            let foot = if text.len() % 2 == 0 {
                text.len() + 1
            } else {
                text.len()
            };
            let start = c - (foot / 2) as i32;
            (text, foot, start)
        })
        .collect();
    let start = labels.iter().map(|l| l.2).min().unwrap_or(0);
    let mut values = String::new();
    for (text, foot, s) in &labels {
        let gap = s - start - values.len() as i32;
        if gap > 0 {
            values.extend(std::iter::repeat_n(' ', gap as usize));
        } else {
            for _ in 0..gap.unsigned_abs() {
                values.pop();
            }
        }
        values.push_str(&centre(text, *foot));
    }
    let line: String = std::iter::once('+')
        .chain(std::iter::repeat_n('-', width as usize))
        .collect();
    let label = centre(label, width as usize);
    let text = if start > 0 {
        let pad = " ".repeat(start as usize);
        format!("{line}\n{marks}\n{pad}{values}\n{label}")
    } else {
        let pad = " ".repeat(start.unsigned_abs() as usize);
        format!("{pad}{line}\n{pad}{marks}\n{values}\n{pad}{label}")
    };
    (text, start)
}

/// `over` laid on `under` at column `x`, line `y`, as plotlib's overlay
/// does it (see the module doc): widths in bytes, characters laid one for
/// one, a blank of `over` showing `under`, each line as long (in
/// characters) as the shorter of the two.
fn overlay(under: &str, over: &str, x: i32, y: i32) -> String {
    let under: Vec<&str> = under.split('\n').collect();
    let under_width = under.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut over: Vec<String> = over.split('\n').map(str::to_string).collect();
    let width = |v: &[String]| v.iter().map(String::len).max().unwrap_or(0);
    let w = width(&over);
    if y < 0 {
        over = over.into_iter().skip(y.unsigned_abs() as usize).collect();
    } else if y > 0 {
        let blank = " ".repeat(w);
        over = std::iter::repeat_n(blank, y as usize).chain(over).collect();
    }
    if x < 0 {
        over = over
            .iter()
            .map(|l| l.chars().skip(x.unsigned_abs() as usize).collect())
            .collect();
    } else if x > 0 {
        let pad = " ".repeat(x as usize);
        over = over.iter().map(|l| format!("{pad}{l}")).collect();
    }
    let w = width(&over);
    if under.len() > over.len() {
        let blank = " ".repeat(w);
        over.extend(std::iter::repeat_n(blank, under.len() - over.len()));
    }
    if under_width > w {
        let pad = " ".repeat(under_width - w);
        for l in &mut over {
            l.push_str(&pad);
        }
    }
    under
        .iter()
        .zip(&over)
        .map(|(u, o)| {
            u.chars()
                .zip(o.chars())
                .map(|(a, b)| if b == ' ' { a } else { b })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A face of `width` x `height` blanks.
fn blank_face(width: u32, height: u32) -> String {
    vec![" ".repeat(width as usize); height as usize].join("\n")
}

/// The points' face: `marker` in each cell a point falls in (columns and
/// lines from 1), top line first.
fn points_face(
    points: &[(f64, f64)],
    marker: char,
    x: (f64, f64),
    y: (f64, f64),
    width: u32,
    height: u32,
) -> String {
    let cells: Vec<(i32, i32)> = points
        .iter()
        .map(|&(px, py)| (cell(px, x, width), cell(py, y, height)))
        .collect();
    (1..=height as i32)
        .rev()
        .map(|line| {
            (1..=width as i32)
                .map(|col| {
                    if cells.contains(&(col, line)) {
                        marker
                    } else {
                        ' '
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl TextPlot {
    /// The plot on a face of `width` x `height` cells, as upstream prints
    /// it; an error for an empty range.
    pub fn render(&self, width: u32, height: u32) -> Result<String, crate::Error> {
        for (name, r) in [("x", self.x_range), ("y", self.y_range)] {
            // Also refuses NaN.
            if r.0.partial_cmp(&r.1) != Some(std::cmp::Ordering::Less) {
                return Err(crate::Error::Input(format!(
                    "empty {name} range: {} >= {}",
                    r.0, r.1
                )));
            }
        }
        let (yaxis, ywidth) = y_axis(self.y_range, &self.y_label, height);
        let (xaxis, start) = x_axis(self.x_range, &self.x_label, width);
        let gutter = (ywidth as i32 + 3).max(-start);
        let view_width = width + 1 + gutter as u32 + 1;
        let mut view = blank_face(view_width, height + 4);
        for (points, marker) in &self.series {
            let face = overlay(
                &blank_face(width, height),
                &points_face(points, *marker, self.x_range, self.y_range, width, height),
                0,
                0,
            );
            view = overlay(&view, &face, gutter + 1, 0);
        }
        let view = overlay(&view, &yaxis, gutter - 2 - ywidth as i32, 0);
        Ok(overlay(&view, &xaxis, gutter, height as i32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tick steps: 1, 2, 4, 5 times powers of ten, as few ticks as fit in
    /// six, the widest step with that count.
    #[test]
    fn ticks_take_the_widest_step_of_the_fewest() {
        assert_eq!(ticks(0.0, 3.0), [0.0, 1.0, 2.0, 3.0]);
        assert_eq!(ticks(0.0, 6.0), [0.0, 2.0, 4.0, 6.0]);
        assert_eq!(ticks(0.0, 14.0), [0.0, 4.0, 8.0, 12.0]);
        assert_eq!(ticks(0.0, 15.0), [0.0, 5.0, 10.0, 15.0]);
        assert_eq!(ticks(-7.93, 15.58), [-5.0, 0.0, 5.0, 10.0, 15.0]);
        assert_eq!(ticks(0.0, 0.06), [0.0, 0.02, 0.04, 0.06]);
        assert_eq!(ticks(0.0, 137.5), [0.0, 40.0, 80.0, 120.0]);
        assert_eq!(ticks(1.0, 1.5), [1.0, 1.1, 1.2, 1.3, 1.4, 1.5]);
        assert_eq!(
            steps_from(3.0).take(4).collect::<Vec<_>>(),
            [4.0, 5.0, 10.0, 20.0]
        );
    }

    /// Widths are bytes and characters are laid one for one: a line of
    /// 3-byte markers counts as wider than it is, so the blank columns
    /// past it are not padded in and the line ends with it.
    #[test]
    fn overlay_counts_bytes_and_lays_characters() {
        assert_eq!(overlay("abc\ndef", " x", 0, 1), "abc\ndxf");
        assert_eq!(overlay("....", " x", 0, 0), ".x..");
        // " ●" is 4 bytes, as wide as "....": no padding, 2 characters.
        assert_eq!(overlay("....", "●", 1, 0), ".●");
        assert_eq!(overlay("....", "x", -1, 0), "....");
    }

    /// A small plot, line for line: the y label down the left, the tick
    /// values (6 at most, 8 and 10 running together as upstream's do),
    /// the point, the axes and the x label centred.
    #[test]
    fn a_plot_is_laid_out_as_upstreams() {
        let p = TextPlot {
            x_range: (0.0, 10.0),
            y_range: (0.0, 4.0),
            x_label: "x".into(),
            y_label: "yy".into(),
            series: vec![(vec![(5.0, 2.0)], '●')],
        };
        let want = "   4-|         \n y 3-|         \n y 2-|   ●     \n   1-|         \n   \
                    0+---------- \n    | | | | | | \n    0 2 4 6 810 \n        x      ";
        assert_eq!(p.render(10, 4).unwrap(), want);
        let bad = TextPlot {
            x_range: (1.0, 1.0),
            ..p
        };
        assert!(bad.render(10, 4).is_err());
    }
}
