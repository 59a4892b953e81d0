//! iocost-tune's line fits as upstream resctl-bench 2.1 made them, for the
//! results 2.1 wrote (their series have `points` and their lines `left`
//! and `right`): `solve` and `merge` give such a result the solutions 2.1
//! gave it. 2.2 replaced these fits ([`crate::bench::iocost_tune::fit`]); the facts here
//! are 2.1's code (v2.1.2).
//!
//! A 2.1 fit is at most one slope between two flat parts: a flat line at
//! the mean; a least-squares line; a flat part then a slope from a hinge,
//! or a slope then a flat part; two flat parts joined by a slope. Hinges
//! are tried every `gran` vrate points (0.1 by default, the spec's `gran`),
//! at least 10 vrate points from the ends and from each other. A fit wins
//! only with a lower error than the best so far, and the best error is
//! discounted by 2.5% after the line and after the one-hinge fits that
//! improved it (fewer parts win a near tie). Fits reaching zero or below,
//! or against the figure's direction (rising, falling), are not taken.

use crate::bench::iocost_tune::fit::{DataLines, DataPoint, DataSeries, Shape};

/// 2.1's default hinge step (vrate points).
pub const DFL_GRAN: f64 = 0.1;
/// Each segment spans at least this many vrate points.
const MIN_SEG_DIST: f64 = 10.0;
/// The best error is discounted by this after each stage that improved it.
const ERROR_DISCOUNT: f64 = 0.975;

/// The points at or before `at`, and the rest; as 2.1's, when no point is
/// past `at` all the points are "the rest".
fn split_at(points: &[DataPoint], at: f64) -> (&[DataPoint], &[DataPoint]) {
    let idx = points.iter().position(|p| p.x > at).unwrap_or(0);
    points.split_at(idx)
}

/// The first and last x ((0, 0) without points).
fn vrange(points: &[DataPoint]) -> (f64, f64) {
    (
        points.first().map_or(0.0, |p| p.x),
        points.last().map_or(0.0, |p| p.x),
    )
}

/// The mean of the values (NaN without points), summed in order.
fn height(points: &[DataPoint]) -> f64 {
    points.iter().fold(0.0, |a, p| a + p.y) / points.len() as f64
}

/// The least-squares slope through `hinge`.
fn slope_at(points: &[DataPoint], hinge: DataPoint) -> f64 {
    let top = points
        .iter()
        .fold(0.0, |a, p| a + (p.x - hinge.x) * (p.y - hinge.y));
    let bot = points
        .iter()
        .fold(0.0, |a, p| a + (p.x - hinge.x) * (p.x - hinge.x));
    top / bot
}

/// Least-squares line as (slope, intercept), computed as the `linreg`
/// crate upstream uses computes it; `None` when it is not a number.
pub fn linreg(points: &[DataPoint]) -> Option<(f64, f64)> {
    if points.is_empty() {
        return None;
    }
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(sx, sy), p| (sx + p.x, sy + p.y));
    let (mx, my) = (sx / n, sy / n);
    let (xx, xy) = points.iter().fold((0.0, 0.0), |(xx, xy), p| {
        (xx + (p.x - mx) * (p.x - mx), xy + (p.x - mx) * (p.y - my))
    });
    let slope = xy / xx;
    if slope.is_nan() {
        return None;
    }
    Some((slope, my - slope * mx))
}

fn error_of(points: &[DataPoint], lines: &DataLines) -> f64 {
    DataSeries::error_of(points.iter(), lines)
}

/// 2.1's fit of `s` (see the module doc); `gran` is the hinge step. One
/// point (or a range narrower than a step) leaves the lines as they are.
pub fn fit_lines(s: &mut DataSeries, gran: f64, shape: Shape) {
    let pts = &s.data;
    let (Some(first), Some(last)) = (pts.first(), pts.last()) else {
        return;
    };
    let (start, end) = (first.x, last.x);
    let intvs = ((end - start) / gran).ceil() as u32 + 1;
    if intvs <= 1 {
        return;
    }
    let gran = (end - start) / f64::from(intvs - 1);
    let range = vrange(pts);
    let mean = height(pts);
    let mean_line = DataLines::v21(
        range,
        DataPoint::new(range.0, mean),
        DataPoint::new(range.1, mean),
    );
    let mut best = Best {
        err: error_of(pts, &mean_line) * ERROR_DISCOUNT,
        lines: mean_line,
    };
    if pts.len() > 3 && best.consider(pts, shape, line(pts)) {
        best.err *= ERROR_DISCOUNT;
    }
    let mut updated = false;
    for i in 0..intvs {
        let infl = start + f64::from(i) * gran;
        if infl < start + MIN_SEG_DIST || infl > end - MIN_SEG_DIST {
            continue;
        }
        updated |= best.consider(pts, shape, flat_then_slope(pts, infl));
        updated |= best.consider(pts, shape, slope_then_flat(pts, infl));
    }
    if updated {
        best.err *= ERROR_DISCOUNT;
    }
    for i in 0..intvs - 1 {
        let vleft = start + f64::from(i) * gran;
        if vleft < start + MIN_SEG_DIST {
            continue;
        }
        for j in i..intvs {
            let vright = start + f64::from(j) * gran;
            if vright - vleft < MIN_SEG_DIST || vright > end - MIN_SEG_DIST {
                continue;
            }
            best.consider(pts, shape, Some(flat_slope_flat(pts, vleft, vright)));
        }
    }
    s.lines = best.lines;
}

/// The best fit so far and its (discounted) error.
struct Best {
    lines: DataLines,
    err: f64,
}

impl Best {
    /// Takes `lines` when they stay above zero, follow `shape` and have a
    /// lower error than the best; true when taken.
    fn consider(&mut self, pts: &[DataPoint], shape: Shape, lines: Option<DataLines>) -> bool {
        let Some(lines) = lines else { return false };
        let Some((l, r)) = lines.hinges else {
            return false;
        };
        if l.y <= 0.0 || r.y <= 0.0 {
            return false;
        }
        match shape {
            Shape::Inc if l.y > r.y => return false,
            Shape::Dec if l.y < r.y => return false,
            _ => {}
        }
        let err = error_of(pts, &lines);
        if err < self.err {
            self.lines = lines;
            self.err = err;
            return true;
        }
        false
    }
}

fn line(pts: &[DataPoint]) -> Option<DataLines> {
    let (slope, icpt) = linreg(pts)?;
    let r = vrange(pts);
    Some(DataLines::v21(
        r,
        DataPoint::new(r.0, slope * r.0 + icpt),
        DataPoint::new(r.1, slope * r.1 + icpt),
    ))
}

fn flat_then_slope(pts: &[DataPoint], vleft: f64) -> Option<DataLines> {
    let (l, r) = split_at(pts, vleft);
    let left = DataPoint::new(vleft, height(l));
    let slope = slope_at(r, left);
    if slope == 0.0 {
        return None;
    }
    let range = vrange(pts);
    Some(DataLines::v21(
        range,
        left,
        DataPoint::new(range.1, left.y + slope * (range.1 - left.x)),
    ))
}

fn slope_then_flat(pts: &[DataPoint], vright: f64) -> Option<DataLines> {
    let (l, r) = split_at(pts, vright);
    let right = DataPoint::new(vright, height(r));
    let slope = slope_at(l, right);
    if slope == 0.0 {
        return None;
    }
    let range = vrange(pts);
    Some(DataLines::v21(
        range,
        DataPoint::new(range.0, right.y - slope * (right.x - range.0)),
        right,
    ))
}

fn flat_slope_flat(pts: &[DataPoint], vleft: f64, vright: f64) -> DataLines {
    let (l, center) = split_at(pts, vleft);
    let (_, r) = split_at(center, vright);
    DataLines::v21(
        vrange(pts),
        DataPoint::new(vleft, height(l)),
        DataPoint::new(vright, height(r)),
    )
}

/// 2.1's `fill_vrate_range`: a hinge at the data's first (last) vrate is
/// moved along its slope to `range`'s start (end), which becomes the
/// lines' range. Lines never fitted stay as they are.
pub fn fill_vrate_range(s: &mut DataSeries, range: (f64, f64)) {
    let Some((mut l, mut r)) = s.lines.hinges else {
        return;
    };
    if s.lines.range == (0.0, 0.0) && l == DataPoint::default() && r == DataPoint::default() {
        return;
    }
    let (vmin, vmax) = vrange(&s.data);
    let slope = s.lines.slope_v21();
    if l.x == vmin && vmin > range.0 {
        l.y -= slope * (vmin - range.0);
        l.x = range.0;
    }
    if r.x == vmax && vmax < range.1 {
        r.y += slope * (range.1 - vmax);
        r.x = range.1;
    }
    s.lines = DataLines::v21(range, l, r);
}

/// 2.1's `clamped`: the lines over `(vmin, vmax)` within their range,
/// hinges outside it moved to its ends; `None` when they do not overlap.
pub fn clamped(dl: &DataLines, vmin: f64, vmax: f64) -> Option<(DataLines, DataPoint, DataPoint)> {
    let (l0, r0) = dl.hinges?;
    let vmin = vmin.max(dl.range.0);
    let vmax = vmax.min(dl.range.1);
    if vmin > vmax {
        return None;
    }
    let at_min = DataPoint::new(vmin, dl.eval(vmin));
    let at_max = DataPoint::new(vmax, dl.eval(vmax));
    let (mut l, mut r) = (l0, r0);
    if l.x > vmax || r.x < vmin {
        l = at_min;
        r = at_max;
    } else {
        if l.x < vmin {
            l = at_min;
        }
        if r.x > vmax {
            r = at_max;
        }
    }
    Some((DataLines::v21((vmin, vmax), l, r), l, r))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn series(f: impl Fn(f64) -> f64) -> DataSeries {
        DataSeries {
            data: (0..24)
                .map(|i| {
                    let x = 8.61 + 5.0 * f64::from(i);
                    DataPoint::new(x, f(x))
                })
                .collect(),
            v21: true,
            ..DataSeries::default()
        }
    }

    /// A figure flat, then rising from 40, then flat from 80: the hinges
    /// land on the step grid near the knees, and the lines are 2.1's.
    #[test]
    fn two_flats_and_a_slope_are_found_on_the_grid() {
        let f = |x: f64| {
            if x < 40.0 {
                1.0
            } else if x < 80.0 {
                1.0 + (x - 40.0) * 0.01
            } else {
                1.4
            }
        };
        let mut s = series(f);
        fit_lines(&mut s, DFL_GRAN, Shape::Inc);
        let (l, r) = s.lines.hinges.unwrap();
        assert!(
            (l.x - 40.0).abs() < 5.0 && (r.x - 80.0).abs() < 5.0,
            "{l:?} {r:?}"
        );
        assert!(
            (l.y - 1.0).abs() < 0.02 && (r.y - 1.4).abs() < 0.02,
            "{l:?} {r:?}"
        );
        assert_eq!(s.lines.range, (8.61, 123.61));
        assert_eq!(s.lines.eval(0.0), l.y);
        assert_eq!(s.lines.eval(200.0), r.y);
        // A falling figure is not fitted rising.
        let mut d = series(|x| 2.0 - f(x));
        fit_lines(&mut d, DFL_GRAN, Shape::Inc);
        let (l, r) = d.lines.hinges.unwrap();
        assert_eq!(l.y, r.y, "only the flat mean rises: {l:?} {r:?}");
    }

    /// Hinges at the data's ends move to the wider range along the slope;
    /// 2.1's clamp moves hinges outside the window to its ends.
    #[test]
    fn fill_and_clamp_are_21s() {
        let mut s = series(|x| x / 100.0);
        fit_lines(&mut s, DFL_GRAN, Shape::Inc);
        let (l, r) = s.lines.hinges.unwrap();
        assert_eq!((l.x, r.x), (8.61, 123.61));
        fill_vrate_range(&mut s, (1.0, 130.0));
        let (l2, r2) = s.lines.hinges.unwrap();
        assert_eq!((l2.x, r2.x), (1.0, 130.0));
        assert!(
            (l2.y - 0.01).abs() < 1e-9 && (r2.y - 1.3).abs() < 1e-9,
            "{l2:?} {r2:?}"
        );
        let (c, cl, cr) = clamped(&s.lines, 20.0, 60.0).unwrap();
        assert_eq!((cl.x, cr.x), (20.0, 60.0));
        assert_eq!(c.range, (20.0, 60.0));
        assert!(clamped(&s.lines, 200.0, 300.0).is_none());
        // The split keeps 2.1's quirk: nothing past the vrate, all "after".
        let pts = [DataPoint::new(1.0, 1.0), DataPoint::new(2.0, 2.0)];
        assert_eq!(split_at(&pts, 5.0).1.len(), 2);
        assert_eq!(split_at(&pts, 1.5), (&pts[..1], &pts[1..]));
    }
}
