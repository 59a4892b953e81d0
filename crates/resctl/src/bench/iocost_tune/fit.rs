//! iocost-tune's curve fitting: how one figure of the iocost-qos runs (MOF,
//! aMOF, isolation, a read latency...) changes with vrate, as a few line
//! segments fitted to the noisy points.
//!
//! The shapes and the search are upstream's (resctl-bench 2.2's
//! iocost-tune): a flat line at the mean; a least-squares line; a flat part
//! then a slope or a slope then a flat part; two flat parts joined by a
//! slope; and for single-peak figures (aMOF) up to four hinges (flat, rise,
//! flat, fall, flat). Each candidate's error is the root of the summed
//! squared residuals over the point count, raised 2.5% per segment so that
//! fewer segments win a tie; a candidate that reaches zero or below, or
//! breaks the figure's shape (rising, falling, one peak), is not taken.
//! Hinges sit halfway between data points, at least 0.25 apart and 10
//! vrate points from each other and from the ends. Outliers are rejected
//! with Chauvenet's criterion on the squared residuals.
//!
//! [`Fit::Upstream`] (the default) is upstream's code as it runs, so that
//! a result solves to the solutions upstream stored. Where that code
//! departs from what its comments describe, [`Fit::Corrected`] follows the
//! description instead (`doc iocost-tune` says so, and the result records
//! which fit made it):
//! - the one-peak shape check compares the points' values (upstream's
//!   compares the points themselves, x first, so it never rejects);
//! - the slope anchored on a flat part is fitted to the points between the
//!   two hinges, and its far end is placed at that hinge's vrate
//!   (upstream's takes the data's first points, and evaluates the slope at
//!   the vrate between the data's first points).
//!
//! The serialized shapes (`DataPoint`, `DataLines`, `DataSeries`) are
//! upstream's, so that its iocost-tune results read as they are.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

/// One measurement: vrate (percent) and the figure's value.
#[derive(Debug, Clone, Copy, Default, PartialEq, PartialOrd, Serialize, Deserialize)]
pub struct DataPoint {
    pub x: f64,
    pub y: f64,
}

impl DataPoint {
    pub fn new(x: f64, y: f64) -> DataPoint {
        DataPoint { x, y }
    }
}

/// Connected line segments through `points` (x strictly increasing), over
/// `range` (the first and last x).
///
/// Upstream 2.1 wrote lines as `{range, left, right}`: flat at `left.y` up
/// to `left.x`, a slope to `right`, flat at `right.y` after. Such lines
/// keep `left` and `right` in `hinges` (and are written back in that
/// shape); they are evaluated as 2.1 evaluates them, and `points` holds
/// the same lines as points (for the graphs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DataLines {
    pub points: Vec<DataPoint>,
    pub range: (f64, f64),
    pub hinges: Option<(DataPoint, DataPoint)>,
}

/// The shapes a [`DataLines`] is written in: upstream 2.2's, and 2.1's.
#[derive(Serialize, Deserialize)]
struct LinesV22 {
    points: Vec<DataPoint>,
    range: (f64, f64),
}

#[derive(Serialize)]
struct LinesV21 {
    range: (f64, f64),
    left: DataPoint,
    right: DataPoint,
}

/// Either shape, read: which one it is decided by its fields.
#[derive(Deserialize)]
struct LinesAny {
    points: Option<Vec<DataPoint>>,
    range: (f64, f64),
    left: Option<DataPoint>,
    right: Option<DataPoint>,
}

impl Serialize for DataLines {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.hinges {
            Some((left, right)) => LinesV21 {
                range: self.range,
                left,
                right,
            }
            .serialize(s),
            None => LinesV22 {
                points: self.points.clone(),
                range: self.range,
            }
            .serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for DataLines {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let a = LinesAny::deserialize(d)?;
        match (a.points, a.left, a.right) {
            (Some(points), _, _) => Ok(DataLines {
                points,
                range: a.range,
                hinges: None,
            }),
            (None, Some(l), Some(r)) => Ok(DataLines::v21(a.range, l, r)),
            _ => Err(serde::de::Error::custom(
                "expected `points` (upstream 2.2's lines) or `left` and `right` (2.1's)",
            )),
        }
    }
}

impl DataLines {
    /// Lines through `points`; an error when x does not strictly increase.
    pub fn new(points: &[DataPoint]) -> Result<DataLines, crate::Error> {
        // NaN counts as out of order.
        if let Some(w) = points
            .windows(2)
            .find(|w| w[0].x.partial_cmp(&w[1].x) != Some(std::cmp::Ordering::Less))
        {
            return Err(crate::Error::Input(format!(
                "line points out of order: x {} then {}",
                w[0].x, w[1].x
            )));
        }
        Ok(DataLines {
            points: points.to_vec(),
            range: match (points.first(), points.last()) {
                (Some(a), Some(b)) => (a.x, b.x),
                _ => (0.0, 0.0),
            },
            hinges: None,
        })
    }

    /// Upstream 2.1's lines over `range`: flat at `left.y` to `left.x`, a
    /// slope to `right`, flat after.
    pub fn v21(range: (f64, f64), left: DataPoint, right: DataPoint) -> DataLines {
        let mut points = Vec::with_capacity(4);
        for p in [
            DataPoint::new(range.0, left.y),
            left,
            right,
            DataPoint::new(range.1, right.y),
        ] {
            if points.last().is_none_or(|q: &DataPoint| q.x < p.x) {
                points.push(p);
            }
        }
        DataLines {
            points,
            range,
            hinges: Some((left, right)),
        }
    }

    /// 2.1's slope between the hinges (0 when they share a vrate).
    pub fn slope_v21(&self) -> f64 {
        match self.hinges {
            Some((l, r)) if l.x != r.x => (r.y - l.y) / (r.x - l.x),
            _ => 0.0,
        }
    }

    /// The value at `x`; outside the range the nearest segment is
    /// extended. A flat segment and the points themselves give their exact
    /// values.
    pub fn eval_extrapolate(&self, x: f64) -> f64 {
        let seg = self
            .points
            .windows(2)
            .find(|w| x <= w[1].x)
            .or_else(|| self.points.windows(2).last());
        match seg {
            Some(w) => {
                let (a, b) = (w[0], w[1]);
                if x == a.x || a.y == b.y {
                    a.y
                } else if x == b.x {
                    b.y
                } else {
                    a.y + (x - a.x) * (b.y - a.y) / (b.x - a.x)
                }
            }
            None => self.points.first().map_or(0.0, |p| p.y),
        }
    }

    /// The value at `x`, held at the ends outside the range (2.1's lines:
    /// outside the hinges, as 2.1 evaluates them).
    pub fn eval(&self, x: f64) -> f64 {
        if let Some((l, r)) = self.hinges {
            return if x < l.x {
                l.y
            } else if x > r.x {
                r.y
            } else {
                l.y + self.slope_v21() * (x - l.x)
            };
        }
        // max/min rather than clamp: a range read from a file may be
        // reversed, which must not panic.
        self.eval_extrapolate(x.max(self.range.0).min(self.range.1))
    }

    /// The same lines over `range`, which may reach beyond the current one
    /// (the end segments are extended) or cut it short.
    pub fn with_range(&self, range: (f64, f64)) -> Result<DataLines, crate::Error> {
        if range.0 > range.1 {
            return Err(crate::Error::Input(format!(
                "invalid range [{}, {}]",
                range.0, range.1
            )));
        }
        match self.points.len() {
            0 => return DataLines::new(&[]),
            1 => {
                let y = self.points[0].y;
                return if range.0 == range.1 {
                    DataLines::new(&[DataPoint::new(range.0, y)])
                } else {
                    DataLines::new(&[DataPoint::new(range.0, y), DataPoint::new(range.1, y)])
                };
            }
            _ => {}
        }
        let inner = &self.points[1..self.points.len() - 1];
        let mut pts = vec![DataPoint::new(range.0, self.eval_extrapolate(range.0))];
        pts.extend(
            inner
                .iter()
                .filter(|p| p.x > range.0 && p.x < range.1)
                .copied(),
        );
        pts.push(DataPoint::new(range.1, self.eval_extrapolate(range.1)));
        if range.0 == range.1 {
            pts.truncate(1);
        }
        DataLines::new(&pts)
    }

    /// [`DataLines::with_range`] within the current range only; `None`
    /// when `range` does not overlap it.
    pub fn clamped(&self, range: (f64, f64)) -> Result<Option<DataLines>, crate::Error> {
        let r = (range.0.max(self.range.0), range.1.min(self.range.1));
        if r.0 <= r.1 {
            self.with_range(r).map(Some)
        } else {
            Ok(None)
        }
    }

    /// The lowest and highest value of the points ((0, 0) without any).
    pub fn min_max(&self) -> (f64, f64) {
        if self.points.is_empty() {
            return (0.0, 0.0);
        }
        self.points
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), p| {
                (lo.min(p.y), hi.max(p.y))
            })
    }
}

/// Which line fits iocost-tune makes: upstream's code as it runs (the
/// default: a result solves to upstream's solutions), or that code
/// corrected where it departs from its own description (see the module
/// doc). Written in the iocost-tune record as `fit` when not upstream's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fit {
    #[default]
    Upstream,
    Corrected,
}

impl Fit {
    /// The names `--tune-fit` takes.
    pub const NAMES: &'static [&'static str] = &["upstream", "corrected"];

    pub fn parse(s: &str) -> Result<Fit, crate::Error> {
        match s {
            "upstream" => Ok(Fit::Upstream),
            "corrected" => Ok(Fit::Corrected),
            _ => Err(crate::Error::Input(format!(
                "fit {s:?}: expected {}",
                Fit::NAMES.join(" or ")
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Fit::Upstream => "upstream",
            Fit::Corrected => "corrected",
        }
    }

    pub fn is_upstream(&self) -> bool {
        *self == Fit::Upstream
    }
}

/// What a figure is expected to do as vrate rises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Any,
    /// Never falls.
    Inc,
    /// Never rises.
    Dec,
    /// Rises, then falls.
    SinglePeak,
}

impl Shape {
    /// True when the values of `points` follow the shape. With
    /// [`Fit::Upstream`], one peak is judged as upstream's code does: on
    /// the points (x first, which always rises), so it always holds.
    fn holds(self, points: &[DataPoint], fit: Fit) -> bool {
        let ys = points.windows(2).map(|w| (w[0].y, w[1].y));
        match self {
            Shape::SinglePeak if fit.is_upstream() => {
                let mut rising = true;
                for w in points.windows(2) {
                    if rising && w[0] > w[1] {
                        rising = false;
                    } else if !rising && w[0] < w[1] {
                        return false;
                    }
                }
                true
            }
            Shape::Any => true,
            Shape::Inc => ys.clone().all(|(a, b)| a <= b),
            Shape::Dec => ys.clone().all(|(a, b)| a >= b),
            Shape::SinglePeak => {
                let mut rising = true;
                for (a, b) in ys {
                    if rising && a > b {
                        rising = false;
                    } else if !rising && a < b {
                        return false;
                    }
                }
                true
            }
        }
    }
}

/// Error growth per segment: fewer segments win a near tie.
const ERROR_MULTIPLIER: f64 = 1.025;
/// Hinges closer than this (vrate points) to the previous one are skipped.
const MIN_DIV_DIST: f64 = 0.25;
/// Each segment spans at least this many vrate points.
const MIN_SEG_DIST: f64 = 10.0;

/// One figure over vrate: the points used, those rejected as outliers (or
/// beyond where isolation holds), the fitted lines and their error.
/// `v21`: written by upstream 2.1 (`points` for `data`, lines as 2.1's),
/// and written back that way.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DataSeries {
    pub data: Vec<DataPoint>,
    pub outliers: Vec<DataPoint>,
    pub lines: DataLines,
    pub error: f64,
    pub v21: bool,
}

#[derive(Serialize)]
struct SeriesV22<'a> {
    data: &'a [DataPoint],
    outliers: &'a [DataPoint],
    lines: &'a DataLines,
    error: f64,
}

#[derive(Serialize)]
struct SeriesV21<'a> {
    points: &'a [DataPoint],
    outliers: &'a [DataPoint],
    lines: &'a DataLines,
    error: f64,
}

#[derive(Deserialize)]
struct SeriesAny {
    data: Option<Vec<DataPoint>>,
    points: Option<Vec<DataPoint>>,
    outliers: Vec<DataPoint>,
    lines: DataLines,
    error: f64,
}

impl Serialize for DataSeries {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.v21 {
            // 2.1's default lines are zero hinges.
            let mut lines = self.lines.clone();
            if lines.hinges.is_none() {
                let (l, r) = match (lines.points.first(), lines.points.last()) {
                    (Some(a), Some(b)) => (*a, *b),
                    _ => (DataPoint::default(), DataPoint::default()),
                };
                lines.hinges = Some((l, r));
            }
            SeriesV21 {
                points: &self.data,
                outliers: &self.outliers,
                lines: &lines,
                error: self.error,
            }
            .serialize(s)
        } else {
            SeriesV22 {
                data: &self.data,
                outliers: &self.outliers,
                lines: &self.lines,
                error: self.error,
            }
            .serialize(s)
        }
    }
}

impl<'de> Deserialize<'de> for DataSeries {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let a = SeriesAny::deserialize(d)?;
        let (data, v21) = match (a.data, a.points) {
            (Some(d), _) => (d, false),
            (None, Some(p)) => (p, true),
            (None, None) => {
                return Err(serde::de::Error::custom(
                    "expected `data` (upstream 2.2's series) or `points` (2.1's)",
                ));
            }
        };
        if v21 != a.lines.hinges.is_some() {
            return Err(serde::de::Error::custom(
                "the series and its lines are of different versions (2.1's `points` with 2.2's lines, or the reverse)",
            ));
        }
        Ok(DataSeries {
            data,
            outliers: a.outliers,
            lines: a.lines,
            error: a.error,
            v21,
        })
    }
}

fn mean_y(points: &[DataPoint]) -> f64 {
    points.iter().map(|p| p.y).sum::<f64>() / points.len() as f64
}

/// Least-squares line through `points` as (slope, intercept); `None` with
/// fewer than two distinct x.
fn regression(points: &[DataPoint]) -> Option<(f64, f64)> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.x).sum::<f64>() / n;
    let my = mean_y(points);
    let sxx: f64 = points.iter().map(|p| (p.x - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.x - mx) * (p.y - my)).sum();
    if sxx == 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    Some((slope, my - slope * mx))
}

/// The slope through `hinge` that best fits `points` (least squares with
/// the line held at the hinge), summed in order as upstream sums it; NaN
/// without a point off the hinge's vrate.
fn slope_raw(points: &[DataPoint], hinge: DataPoint) -> f64 {
    let top = points
        .iter()
        .fold(0.0, |a, p| a + (p.x - hinge.x) * (p.y - hinge.y));
    let bot = points.iter().fold(0.0, |a, p| a + (p.x - hinge.x).powi(2));
    top / bot
}

/// [`slope_raw`], `None` when it is not a finite number.
fn slope_through(points: &[DataPoint], hinge: DataPoint) -> Option<f64> {
    Some(slope_raw(points, hinge)).filter(|s| s.is_finite())
}

/// [`slope_through`], and `None` for a flat one: a flat part then a zero
/// slope is the mean line, already a candidate.
fn slope_at(points: &[DataPoint], hinge: DataPoint) -> Option<f64> {
    slope_through(points, hinge).filter(|s| *s != 0.0)
}

impl DataSeries {
    /// Every point back in `data`, sorted; no lines.
    pub fn reset(&mut self) {
        let mut data = std::mem::take(&mut self.data);
        data.append(&mut self.outliers);
        data.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        *self = DataSeries {
            data,
            v21: self.v21,
            ..DataSeries::default()
        };
    }

    /// The first and last x of the data.
    fn range(&self) -> (f64, f64) {
        match (self.data.first(), self.data.last()) {
            (Some(a), Some(b)) => (a.x, b.x),
            _ => (0.0, 0.0),
        }
    }

    /// Where a hinge before data point `idx` sits: halfway from the point
    /// before; the first or last point's x at the ends.
    fn div(&self, idx: usize) -> f64 {
        if idx > 0 && idx < self.data.len() {
            (self.data[idx - 1].x + self.data[idx].x) / 2.0
        } else {
            self.data[idx.min(self.data.len() - 1)].x
        }
    }

    /// The sum-of-squares error of `lines` over `points`: its root over the
    /// point count (0 without points).
    pub fn error_of<'a>(points: impl Iterator<Item = &'a DataPoint>, lines: &DataLines) -> f64 {
        let (sum, n) = points.fold((0.0, 0usize), |(s, n), p| {
            (s + (p.y - lines.eval(p.x)).powi(2), n + 1)
        });
        if n > 0 { sum.sqrt() / n as f64 } else { 0.0 }
    }

    fn line(&self) -> Option<DataLines> {
        let (slope, icpt) = regression(&self.data)?;
        let (a, b) = self.range();
        DataLines::new(&[
            DataPoint::new(a, slope * a + icpt),
            DataPoint::new(b, slope * b + icpt),
        ])
        .ok()
    }

    /// Flat up to the hinge before `idx`, then a slope.
    fn flat_then_slope(&self, idx: usize) -> Option<DataLines> {
        let (l, r) = self.data.split_at(idx);
        let hinge = DataPoint::new(self.div(idx), mean_y(l));
        let slope = slope_at(r, hinge)?;
        let (a, b) = self.range();
        DataLines::new(&[
            DataPoint::new(a, hinge.y),
            hinge,
            DataPoint::new(b, hinge.y + slope * (b - hinge.x)),
        ])
        .ok()
    }

    /// A slope up to the hinge before `idx`, then flat.
    fn slope_then_flat(&self, idx: usize) -> Option<DataLines> {
        let (l, r) = self.data.split_at(idx);
        let hinge = DataPoint::new(self.div(idx), mean_y(r));
        let slope = slope_at(l, hinge)?;
        let (a, b) = self.range();
        DataLines::new(&[
            DataPoint::new(a, hinge.y - slope * (hinge.x - a)),
            hinge,
            DataPoint::new(b, hinge.y),
        ])
        .ok()
    }

    /// Flat before `lidx`, flat from `ridx`, a slope between.
    fn flat_slope_flat(&self, lidx: usize, ridx: usize) -> Option<DataLines> {
        let left = DataPoint::new(self.div(lidx), mean_y(&self.data[..lidx]));
        let right = DataPoint::new(self.div(ridx), mean_y(&self.data[ridx..]));
        let (a, b) = self.range();
        DataLines::new(&[
            DataPoint::new(a, left.y),
            left,
            right,
            DataPoint::new(b, right.y),
        ])
        .ok()
    }

    /// One peak (or valley) with hinges before data points `idx` =
    /// [ll, l, r, rr]: flat before ll, a slope to l, flat from l to r, a
    /// slope to rr, flat after; any part may be empty.
    fn peak(&self, idx: [usize; 4], fit: Fit) -> Option<DataLines> {
        let n = self.data.len();
        let mut hinge: [Option<DataPoint>; 4] = [None; 4];
        // A hinge's value; hinges at the same data index are one point.
        let set = |hinge: &mut [Option<DataPoint>; 4], k: usize, y: f64| {
            for i in 0..4 {
                if idx[i] == idx[k] {
                    hinge[i] = Some(DataPoint::new(self.div(idx[k]), y));
                }
            }
        };
        if idx[0] > 0 {
            set(&mut hinge, 0, mean_y(&self.data[..idx[0]]));
        }
        if idx[3] < n {
            set(&mut hinge, 3, mean_y(&self.data[idx[3]..]));
        }
        if idx[1] < idx[2] {
            let h = mean_y(&self.data[idx[1]..idx[2]]);
            set(&mut hinge, 1, h);
            set(&mut hinge, 2, h);
        }
        // A slope whose one end is known: fitted to the points between
        // (upstream's code: to the data's points at the hinges' own
        // numbers, li..ri, its far end valued at the vrate between those
        // points; a slope that is not a number makes a line that is never
        // taken).
        let anchored = |hinge: &mut [Option<DataPoint>; 4], li: usize, ri: usize| {
            let (pts, lx, rx) = if fit.is_upstream() {
                (&self.data[li..ri], self.div(li), self.div(ri))
            } else {
                (
                    &self.data[idx[li]..idx[ri]],
                    self.div(idx[li]),
                    self.div(idx[ri]),
                )
            };
            let slope = |h| {
                let s = slope_raw(pts, h);
                (fit.is_upstream() || s.is_finite()).then_some(s)
            };
            match (hinge[li], hinge[ri]) {
                (Some(l), None) => {
                    if let Some(s) = slope(l) {
                        set(hinge, ri, l.y + s * (rx - l.x));
                    }
                }
                (None, Some(r)) => {
                    if let Some(s) = slope(r) {
                        set(hinge, li, r.y - s * (r.x - lx));
                    }
                }
                _ => {}
            }
        };
        // Left, right, then left again: the right slope can give the left
        // one its anchor.
        anchored(&mut hinge, 0, 1);
        anchored(&mut hinge, 2, 3);
        anchored(&mut hinge, 0, 1);
        let hinge: [DataPoint; 4] = match hinge.iter().filter(|h| h.is_some()).count() {
            4 => hinge.map(|h| h.unwrap_or_default()),
            0 => {
                // No flat part: two slopes only (or one).
                if idx[0] != 0 || idx[1] != idx[2] || idx[3] != n {
                    return None;
                }
                let l = idx[1];
                if l == 0 || l == n {
                    let line = self.line()?;
                    let (a, b) = (line.points[0], line.points[1]);
                    [a, b, b, b]
                } else {
                    let (sa, ia) = regression(&self.data[..l])?;
                    let (sb, ib) = regression(&self.data[l..])?;
                    if sa == sb {
                        return None;
                    }
                    let x = (ib - ia) / (sa - sb);
                    let y = (sa * ib - sb * ia) / (sa - sb);
                    if x < self.data[0].x || x > self.data[n - 1].x {
                        return None;
                    }
                    let (lx, rx) = (self.div(idx[0]), self.div(idx[3]));
                    [
                        DataPoint::new(lx, sa * lx + ia),
                        DataPoint::new(x, y),
                        DataPoint::new(x, y),
                        DataPoint::new(rx, sb * rx + ib),
                    ]
                }
            }
            // A slope without an anchor next to a flat part.
            _ => return None,
        };
        let mut pts = Vec::with_capacity(6);
        let (start, end) = (self.div(0), self.div(n));
        if hinge[0].x != start {
            pts.push(DataPoint::new(start, hinge[0].y));
        }
        for h in hinge {
            if pts.last().is_none_or(|p: &DataPoint| p.x != h.x) {
                pts.push(h);
            }
        }
        if hinge[3].x != end {
            pts.push(DataPoint::new(end, hinge[3].y));
        }
        DataLines::new(&pts).ok()
    }

    /// Fits `lines` to `data` with the best candidate of `shape` (see the
    /// module doc). One point gives a single point; none, nothing.
    pub fn fit_lines(&mut self, shape: Shape, fit: Fit) {
        let n = self.data.len();
        if n == 0 {
            return;
        }
        let (start, end) = self.range();
        let mean = mean_y(&self.data);
        if n == 1 {
            self.lines = DataLines {
                points: vec![DataPoint::new(start, mean)],
                range: (start, start),
                hinges: None,
            };
            return;
        }
        let mut best = DataLines {
            points: vec![DataPoint::new(start, mean), DataPoint::new(end, mean)],
            range: (start, end),
            hinges: None,
        };
        let mut best_err = Self::error_of(self.data.iter(), &best);
        let mut consider = |lines: Option<DataLines>| {
            let Some(lines) = lines else { return };
            if lines.min_max().0 <= 0.0 || !shape.holds(&lines.points, fit) {
                return;
            }
            let err = Self::error_of(self.data.iter(), &lines)
                * ERROR_MULTIPLIER.powi(lines.points.len() as i32 - 1);
            if err < best_err {
                best = lines;
                best_err = err;
            }
        };
        // Hinges to try, as data indices, each at least MIN_DIV_DIST past
        // the previous one tried and satisfying `ok`.
        let hinges = |from: usize, to: usize, ok: &dyn Fn(usize, f64) -> bool| {
            let mut out = Vec::new();
            let mut last = f64::MIN;
            for i in from..to {
                let d = self.div(i);
                if ok(i, d) && d >= last + MIN_DIV_DIST {
                    out.push(i);
                    last = d;
                }
            }
            out
        };
        if shape == Shape::SinglePeak && n > 3 {
            for ll in hinges(0, n + 1, &|i, d| i == 0 || d >= start + MIN_SEG_DIST) {
                let lld = self.div(ll);
                for l in hinges(ll, n + 1, &|i, d| i == ll || d - lld >= MIN_SEG_DIST) {
                    let ld = self.div(l);
                    for r in hinges(l, n + 1, &|i, d| i == l || d - ld >= MIN_SEG_DIST) {
                        let rd = self.div(r);
                        let ok = |i: usize, d: f64| {
                            i == r
                                || (d - rd >= MIN_SEG_DIST
                                    && (i >= n - 1 || d <= end - MIN_SEG_DIST))
                        };
                        // The last hinges (at and past the last point) are
                        // always tried, however close.
                        let mut last = f64::MIN;
                        for rr in r..=n {
                            let d = self.div(rr);
                            if !ok(rr, d) || (rr > r && rr < n - 1 && d < last + MIN_DIV_DIST) {
                                continue;
                            }
                            last = d;
                            consider(self.peak([ll, l, r, rr], fit));
                        }
                    }
                }
            }
        } else {
            if n > 3 {
                consider(self.line());
            }
            let inner = |_: usize, d: f64| d >= start + MIN_SEG_DIST && d <= end - MIN_SEG_DIST;
            for i in hinges(0, n, &inner) {
                consider(self.flat_then_slope(i));
                consider(self.slope_then_flat(i));
            }
            for l in hinges(0, n, &|_, d| d >= start + MIN_SEG_DIST) {
                let ld = self.div(l);
                let ok = |_: usize, d: f64| d - ld >= MIN_SEG_DIST && d <= end - MIN_SEG_DIST;
                for r in hinges(l, n, &ok) {
                    consider(self.flat_slope_flat(l, r));
                }
            }
        }
        self.lines = best;
    }

    /// Moves the points beyond vrate `thr` to the outliers.
    pub fn filter_beyond(&mut self, thr: f64) {
        let (keep, out): (Vec<DataPoint>, Vec<DataPoint>) = std::mem::take(&mut self.data)
            .into_iter()
            .partition(|p| p.x <= thr);
        self.data = keep;
        self.outliers.extend(out);
        self.outliers
            .sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    }

    /// Moves the points the fitted lines do not explain to the outliers:
    /// Chauvenet's criterion on the squared residuals (a point goes when
    /// fewer than half a point of the series is expected to be that far
    /// off). Nothing moves when the residuals do not vary.
    pub fn filter_outliers(&mut self) {
        let errs: Vec<f64> = self
            .data
            .iter()
            .map(|p| (p.y - self.lines.eval(p.x)).powi(2))
            .collect();
        let Some(keep) = chauvenet_keep(&errs) else {
            return;
        };
        let data = std::mem::take(&mut self.data);
        for (p, keep) in data.into_iter().zip(keep) {
            if keep {
                self.data.push(p);
            } else {
                self.outliers.push(p);
            }
        }
        self.outliers
            .sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    }
}

/// Chauvenet's criterion on the upper tail, as upstream applies it: which
/// of `vals` to keep (a value goes when fewer than half a value of the set
/// is expected to lie that far above the mean, under a normal distribution
/// with the set's mean and sample deviation). None when the criterion
/// cannot judge: fewer than two values, or no spread.
pub fn chauvenet_keep(vals: &[f64]) -> Option<Vec<bool>> {
    let n = vals.len();
    if n < 2 {
        return None;
    }
    let mean = vals.iter().sum::<f64>() / n as f64;
    let sd = (vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
    let dist = Normal::new(mean, sd).ok()?;
    Some(
        vals.iter()
            .map(|&v| (1.0 - dist.cdf(v)) * n as f64 >= 0.5)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn pts(v: &[(f64, f64)]) -> Vec<DataPoint> {
        v.iter().map(|&(x, y)| DataPoint::new(x, y)).collect()
    }

    /// vrate 5, 10, ... 125 with `f(x)` plus a fixed, alternating wobble of
    /// `noise`.
    fn series(f: impl Fn(f64) -> f64, noise: f64) -> DataSeries {
        DataSeries {
            data: (1..=25)
                .map(|i| {
                    let x = 5.0 * i as f64;
                    let w = if i % 2 == 0 { noise } else { -noise };
                    DataPoint::new(x, f(x) + w)
                })
                .collect(),
            ..DataSeries::default()
        }
    }

    #[test]
    fn lines_evaluate_extend_and_clamp() {
        assert!(DataLines::new(&pts(&[(1.0, 1.0), (1.0, 2.0)])).is_err());
        let l = DataLines::new(&pts(&[(10.0, 1.0), (20.0, 3.0), (40.0, 3.0)])).unwrap();
        assert_eq!(l.range, (10.0, 40.0));
        assert_eq!(l.eval(15.0), 2.0);
        assert_eq!(l.eval(30.0), 3.0);
        // Held at the ends, or extended by the end segments.
        assert_eq!(l.eval(0.0), 1.0);
        assert_eq!(l.eval_extrapolate(0.0), -1.0);
        assert_eq!(l.eval_extrapolate(50.0), 3.0);
        assert_eq!(l.min_max(), (1.0, 3.0));
        let w = l.with_range((0.0, 30.0)).unwrap();
        assert_eq!(w.points, pts(&[(0.0, -1.0), (20.0, 3.0), (30.0, 3.0)]));
        let c = l.clamped((0.0, 15.0)).unwrap().unwrap();
        assert_eq!(c.points, pts(&[(10.0, 1.0), (15.0, 2.0)]));
        assert_eq!(l.clamped((50.0, 60.0)).unwrap(), None);
        assert!(l.with_range((5.0, 1.0)).is_err());
        let one = DataLines::new(&pts(&[(10.0, 2.0)])).unwrap();
        assert_eq!(one.eval(99.0), 2.0);
        assert_eq!(
            one.with_range((0.0, 5.0)).unwrap().points,
            pts(&[(0.0, 2.0), (5.0, 2.0)])
        );
    }

    /// MOF-like: flat at 1.2 up to vrate 40, then rising; the fit finds the
    /// knee and keeps rising.
    #[test]
    fn a_knee_is_found_where_the_figure_starts_rising() {
        let mut s = series(
            |x| {
                if x < 40.0 {
                    1.2
                } else {
                    1.2 + (x - 40.0) * 0.005
                }
            },
            0.01,
        );
        s.fit_lines(Shape::Inc, Fit::Corrected);
        let p = &s.lines.points;
        assert!(Shape::Inc.holds(p, Fit::Corrected), "{p:?}");
        assert_eq!(s.lines.range, (5.0, 125.0));
        let knee = p.iter().find(|q| q.x > 5.0).unwrap();
        assert!((knee.x - 40.0).abs() <= 5.0, "{p:?}");
        assert!((s.lines.eval(5.0) - 1.2).abs() < 0.02, "{p:?}");
        assert!((s.lines.eval(125.0) - 1.625).abs() < 0.03, "{p:?}");
        // The same data as a falling figure: no rising fit is taken.
        let mut d = s.clone();
        d.fit_lines(Shape::Dec, Fit::Corrected);
        assert!(
            Shape::Dec.holds(&d.lines.points, Fit::Corrected),
            "{:?}",
            d.lines.points
        );
    }

    /// Isolation-like: high and flat, then falling past vrate 80.
    #[test]
    fn a_falling_figure_fits_falling_lines() {
        let mut s = series(
            |x| {
                if x < 80.0 {
                    0.95
                } else {
                    0.95 - (x - 80.0) * 0.01
                }
            },
            0.005,
        );
        s.fit_lines(Shape::Dec, Fit::Corrected);
        assert!(
            Shape::Dec.holds(&s.lines.points, Fit::Corrected),
            "{:?}",
            s.lines.points
        );
        assert!((s.lines.eval(50.0) - 0.95).abs() < 0.01);
        assert!(
            (s.lines.eval(120.0) - 0.55).abs() < 0.03,
            "{:?}",
            s.lines.points
        );
    }

    /// aMOF-like: rising, flat, then falling; the fit has one peak near the
    /// plateau.
    #[test]
    fn a_single_peak_is_fitted_with_one_peak() {
        let f = |x: f64| {
            if x < 40.0 {
                1.0 + x * 0.01
            } else if x < 80.0 {
                1.4
            } else {
                1.4 - (x - 80.0) * 0.01
            }
        };
        let mut s = series(f, 0.005);
        s.fit_lines(Shape::SinglePeak, Fit::Corrected);
        let p = &s.lines.points;
        assert!(Shape::SinglePeak.holds(p, Fit::Corrected), "{p:?}");
        assert!(p.len() >= 4, "{p:?}");
        let (lo, hi) = s.lines.min_max();
        assert!((hi - 1.4).abs() < 0.02, "{p:?}");
        assert!(lo > 0.9, "{p:?}");
        assert!((s.lines.eval(60.0) - 1.4).abs() < 0.02, "{p:?}");
        assert!((s.lines.eval(120.0) - 1.0).abs() < 0.05, "{p:?}");
    }

    /// Noise around a constant: the flat mean line wins (more segments pay
    /// for their extra error allowance).
    #[test]
    fn flat_noise_fits_the_mean_line() {
        let mut s = series(|_| 2.0, 0.01);
        s.fit_lines(Shape::Any, Fit::Corrected);
        assert_eq!(s.lines.points.len(), 2, "{:?}", s.lines.points);
        assert!((s.lines.points[0].y - 2.0).abs() < 0.001);
        // One point: a point; none: nothing.
        let mut one = DataSeries {
            data: pts(&[(50.0, 3.0)]),
            ..DataSeries::default()
        };
        one.fit_lines(Shape::Inc, Fit::Corrected);
        assert_eq!(one.lines.points, pts(&[(50.0, 3.0)]));
        let mut none = DataSeries::default();
        none.fit_lines(Shape::Inc, Fit::Corrected);
        assert_eq!(none.lines, DataLines::default());
    }

    /// A fit that dips to zero or below is not taken.
    #[test]
    fn lines_reaching_zero_are_not_taken() {
        let mut s = series(|x| 0.02 * (125.0 - x).max(0.0) + 0.01, 0.0);
        s.fit_lines(Shape::Dec, Fit::Corrected);
        assert!(s.lines.min_max().0 > 0.0, "{:?}", s.lines.points);
    }

    #[test]
    fn outliers_and_points_beyond_a_vrate_are_set_aside() {
        let mut s = series(|x| 1.0 + x * 0.01, 0.0);
        s.data[10].y += 5.0;
        let odd = s.data[10];
        s.fit_lines(Shape::Inc, Fit::Corrected);
        s.filter_outliers();
        assert_eq!(s.outliers, vec![odd]);
        assert_eq!(s.data.len(), 24);
        s.filter_beyond(100.0);
        assert_eq!(s.data.last().unwrap().x, 100.0);
        assert_eq!(s.outliers.len(), 6);
        assert!(s.outliers.windows(2).all(|w| w[0].x <= w[1].x));
        s.reset();
        assert_eq!(s.data.len(), 25);
        assert!(s.outliers.is_empty());
        assert!(s.data.windows(2).all(|w| w[0].x < w[1].x));
        // Residuals that do not vary: nothing is an outlier.
        let mut exact = series(|_| 2.0, 0.0);
        exact.fit_lines(Shape::Inc, Fit::Corrected);
        exact.filter_outliers();
        assert!(exact.outliers.is_empty());
    }

    /// Upstream's serialized series reads as it is.
    #[test]
    fn upstream_series_reads() {
        let s: DataSeries = serde_json::from_value(serde_json::json!({
            "data": [{"x": 10.0, "y": 1.1}, {"x": 20.0, "y": 1.3}],
            "outliers": [{"x": 30.0, "y": 9.0}],
            "lines": {"points": [{"x": 10.0, "y": 1.1}, {"x": 20.0, "y": 1.3}],
                      "range": [10.0, 20.0]},
            "error": 0.012
        }))
        .unwrap();
        assert_eq!(s.lines.eval(15.0), 1.2000000000000002);
        assert_eq!(s.outliers[0].y, 9.0);
    }
}
