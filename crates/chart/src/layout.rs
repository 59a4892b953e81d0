//! Where everything goes: axis ranges and ticks, the plot area, the title,
//! axis labels and the legend.

use crate::font::{self, CELL_H};
use crate::image::Rect;
use crate::ticks;
use crate::{Chart, MAX_SIZE, MIN_SIZE, Scale, Style};

/// Data values are clamped to +-`LIMIT` (and log values to at least
/// `1 / LIMIT`), so that spans, steps and pixel positions stay finite.
const LIMIT: f64 = 1e300;
/// Outer margin.
pub(crate) const PAD: i64 = 10;
/// Length of a tick mark outside the frame.
pub(crate) const TICK: i64 = 5;
/// Gap between a tick mark and its label.
pub(crate) const LABEL_GAP: i64 = 4;
/// Gap between the plot frame and the legend.
const LEGEND_GAP: i64 = 12;
/// Inner padding of the legend box.
pub(crate) const LEGEND_PAD: i64 = 6;
/// Length of a legend colour swatch.
pub(crate) const SWATCH: i64 = 16;
/// Height of one legend row.
pub(crate) const LEGEND_ROW: i64 = 12;
/// The smallest plot area, whatever the labels.
const MIN_PLOT: i64 = 20;

/// One axis: its range (in log10 units for a log axis) and ticks.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
    pub(crate) major: Vec<f64>,
    pub(crate) labels: Vec<String>,
    pub(crate) minor: Vec<f64>,
}

impl Axis {
    /// Position of `v` along the axis: 0 at the low end, 1 at the high end
    /// (outside 0..1 for values out of range). `None` for values a log axis
    /// cannot show.
    pub(crate) fn frac(&self, v: f64) -> Option<f64> {
        if !v.is_finite() {
            return None;
        }
        let v = if self.log {
            if v <= 0.0 {
                return None;
            }
            v.clamp(1.0 / LIMIT, LIMIT).log10()
        } else {
            v.clamp(-LIMIT, LIMIT)
        };
        // Halved so that spans near 2 * LIMIT cannot overflow.
        let t = (v * 0.5 - self.lo * 0.5) / (self.hi * 0.5 - self.lo * 0.5);
        t.is_finite().then_some(t)
    }

    /// The shown range in data units.
    fn range(&self) -> (f64, f64) {
        if self.log {
            (10f64.powf(self.lo), 10f64.powf(self.hi))
        } else {
            (self.lo, self.hi)
        }
    }

    /// A linear axis over `data` (min, max), or 0..1 without data. Fixed
    /// ends are kept as given; the others are widened to whole ticks.
    pub(crate) fn linear(
        data: Option<(f64, f64)>,
        fixed_lo: Option<f64>,
        fixed_hi: Option<f64>,
        max_ticks: usize,
    ) -> Axis {
        Axis::linear_ticked(data, fixed_lo, fixed_hi, max_ticks, false)
    }

    /// [`Axis::linear`], with ticks at whole numbers only when `whole`
    /// (an axis of run or probe numbers never shows `0.5`).
    pub(crate) fn linear_ticked(
        data: Option<(f64, f64)>,
        fixed_lo: Option<f64>,
        fixed_hi: Option<f64>,
        max_ticks: usize,
        whole: bool,
    ) -> Axis {
        let finite = |v: &f64| v.is_finite();
        let mut fixed_lo = fixed_lo.filter(finite).map(|v| v.clamp(-LIMIT, LIMIT));
        let mut fixed_hi = fixed_hi.filter(finite).map(|v| v.clamp(-LIMIT, LIMIT));
        if let (Some(l), Some(h)) = (fixed_lo, fixed_hi)
            && l >= h
        {
            fixed_lo = None;
            fixed_hi = None;
        }
        let (dlo, dhi) = data.unwrap_or((0.0, 1.0));
        let mut lo = fixed_lo.unwrap_or(dlo);
        let mut hi = fixed_hi.unwrap_or(dhi);
        // Too narrow (all values equal, or a fixed end beyond the data; lo
        // and hi are finite here):
        // open up the ends that are free.
        let min_span = (lo.abs().max(hi.abs()) * 1e-9).max(1e-200);
        if hi - lo < min_span {
            match (fixed_lo.is_some(), fixed_hi.is_some()) {
                (true, false) => hi = lo + pad_for(lo),
                (false, true) => lo = hi - pad_for(hi),
                _ => {
                    let mid = lo * 0.5 + hi * 0.5;
                    let pad = pad_for(mid) * 0.5;
                    lo = mid - pad;
                    hi = mid + pad;
                }
            }
        }
        let mut step = ticks::linear(lo, hi, max_ticks).step;
        if whole && step < 1.0 {
            step = 1.0;
        }
        if fixed_lo.is_none() {
            let l = (lo / step).floor() * step;
            if l.is_finite() {
                lo = l;
            }
        }
        if fixed_hi.is_none() {
            let h = (hi / step).ceil() * step;
            if h.is_finite() {
                hi = h;
            }
        }
        let major = ticks::multiples(lo, hi, step);
        let labels = ticks::format_linear(&major, step);
        Axis {
            lo,
            hi,
            log: false,
            major,
            labels,
            minor: Vec::new(),
        }
    }

    /// Widen the ends so that a marker of `radius` pixels drawn at any
    /// value of `data` lies wholly inside an axis `pixels` long (a point at
    /// the data's edge is otherwise drawn half outside the plot area).
    /// Ticks stay where they are.
    pub(crate) fn keep_inside(&mut self, data: Option<(f64, f64)>, pixels: i64, radius: f64) {
        let Some((dlo, dhi)) = data else { return };
        let (dlo, dhi) = if self.log {
            if dlo <= 0.0 || dhi <= 0.0 {
                return;
            }
            (dlo.log10(), dhi.log10())
        } else {
            (dlo, dhi)
        };
        let room = pixels as f64 - 2.0 * radius;
        if room <= radius || !(dlo.is_finite() && dhi.is_finite()) {
            return;
        }
        // Data units per pixel once widened: the span grows by 2 radii'
        // worth of pixels at most.
        let per_px = (self.hi - self.lo).max(dhi - dlo) / room;
        let need = radius * per_px;
        if !need.is_finite() || need <= 0.0 {
            return;
        }
        if dlo - self.lo < need && dlo >= self.lo - need {
            self.lo = dlo - need;
        }
        if self.hi - dhi < need && dhi <= self.hi + need {
            self.hi = dhi + need;
        }
    }

    /// A log10 axis over the positive `data` (min, max), or 1..10 without
    /// data. Free ends are widened to whole decades.
    pub(crate) fn log10(
        data: Option<(f64, f64)>,
        fixed_lo: Option<f64>,
        fixed_hi: Option<f64>,
        max_ticks: usize,
    ) -> Axis {
        let exp = |v: Option<f64>| {
            v.filter(|v| v.is_finite() && *v > 0.0)
                .map(|v| v.clamp(1.0 / LIMIT, LIMIT).log10())
        };
        let mut fixed_lo = exp(fixed_lo);
        let mut fixed_hi = exp(fixed_hi);
        if let (Some(l), Some(h)) = (fixed_lo, fixed_hi)
            && l >= h
        {
            fixed_lo = None;
            fixed_hi = None;
        }
        let (dlo, dhi) = data
            .map(|(l, h)| (l.log10().floor(), h.log10().ceil()))
            .unwrap_or((0.0, 1.0));
        let mut lo = fixed_lo.unwrap_or(dlo);
        let mut hi = fixed_hi.unwrap_or(dhi);
        if hi - lo < 1e-6 {
            match (fixed_lo.is_some(), fixed_hi.is_some()) {
                (true, false) => hi = lo.floor() + 1.0,
                (false, true) => lo = hi.ceil() - 1.0,
                _ => {
                    lo = lo.floor();
                    hi = lo + 1.0;
                }
            }
        }
        let value = |e: f64| {
            if e.fract() == 0.0 {
                ticks::pow10(e as i32)
            } else {
                10f64.powf(e)
            }
        };
        let (vlo, vhi) = (value(lo), value(hi));
        let mut major = ticks::log(vlo, vhi, max_ticks);
        let mut labels: Vec<String> = major.iter().map(|&v| ticks::format_tick(v, v)).collect();
        let mut minor = Vec::new();
        if major.len() < 2 {
            // Less than a decade between fixed ends: plain nice ticks.
            let t = ticks::linear(vlo, vhi, max_ticks);
            major = t.values.into_iter().filter(|v| *v > 0.0).collect();
            labels = major
                .iter()
                .map(|&v| ticks::format_tick(v, t.step))
                .collect();
        } else if hi - lo <= 8.0 {
            for k in lo.floor() as i32..=hi.ceil() as i32 {
                for m in 2..=9 {
                    let v = m as f64 * ticks::pow10(k);
                    if (vlo..=vhi).contains(&v) {
                        minor.push(v);
                    }
                }
            }
        }
        Axis {
            lo,
            hi,
            log: true,
            major,
            labels,
            minor,
        }
    }
}

/// Half a marker's width and 3 pixels: how far inside the plot area's
/// edge a marker's centre must be to be drawn whole, clear of the frame.
const MARKER_ROOM: f64 = 7.0;

/// Whether any point is drawn as a marker: a [`Style::Points`] series, or
/// a line's isolated point.
fn has_markers(chart: &Chart) -> bool {
    chart
        .series
        .iter()
        .enumerate()
        .any(|(i, s)| s.style == Style::Points || chart.drawable(i).count() == 1)
}

/// The drawable points' (x min, x max, y min, y max), `None` without any.
pub(crate) fn data_bounds(chart: &Chart) -> Option<(f64, f64, f64, f64)> {
    let log = chart.y_scale == Scale::Log10;
    let mut bounds: Option<(f64, f64, f64, f64)> = None;
    for s in &chart.series {
        for &p in &s.points {
            if let Some((x, y)) = clean(p, log) {
                bounds = Some(match bounds {
                    None => (x, x, y, y),
                    Some((x0, x1, y0, y1)) => (x0.min(x), x1.max(x), y0.min(y), y1.max(y)),
                });
            }
        }
    }
    bounds
}

/// How wide a range to open around (or next to) a single value `v`: a
/// fifth of its size, or 2 for zero.
fn pad_for(v: f64) -> f64 {
    if v == 0.0 {
        2.0
    } else {
        (v.abs() * 0.2).max(1e-200)
    }
}

/// The data point `p` as drawn: `None` when it cannot be shown (NaN,
/// infinite, or y <= 0 on a log axis), otherwise clamped to +-1e300.
pub(crate) fn clean(p: (f64, f64), log: bool) -> Option<(f64, f64)> {
    let (x, y) = p;
    if !(x.is_finite() && y.is_finite()) || (log && y <= 0.0) {
        return None;
    }
    let y = if log {
        y.clamp(1.0 / LIMIT, LIMIT)
    } else {
        y.clamp(-LIMIT, LIMIT)
    };
    Some((x.clamp(-LIMIT, LIMIT), y))
}

/// A piece of text and the position of its top-left corner.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Placed {
    pub(crate) text: String,
    pub(crate) x: i64,
    pub(crate) y: i64,
}

/// The geometry of a rendered chart: where the plot area, title and legend
/// are, and the axis ticks. [`Chart::layout`] returns the exact layout that
/// [`Chart::render`] draws.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    /// Image width after clamping to `MIN_SIZE..=MAX_SIZE`.
    pub width: u32,
    /// Image height after clamping to `MIN_SIZE..=MAX_SIZE`.
    pub height: u32,
    /// The plot area; its edges are the frame. Series are drawn inside it
    /// (frame included) and nowhere else, except as legend swatches.
    pub plot: Rect,
    /// The legend box, when there are series and room for it.
    pub legend: Option<Rect>,
    /// Where the title is drawn (`None` for an empty title).
    pub title: Option<Rect>,
    /// Labelled x-axis tick values.
    pub x_ticks: Vec<f64>,
    /// Labelled y-axis tick values.
    pub y_ticks: Vec<f64>,
    /// Whether any series has a point that can be drawn.
    pub has_data: bool,
    pub(crate) x: Axis,
    pub(crate) y: Axis,
    pub(crate) title_text: Option<Placed>,
    pub(crate) x_label: Option<Placed>,
    pub(crate) y_label: Option<Placed>,
    /// Legend rows: series index and (shortened) name.
    pub(crate) legend_rows: Vec<(usize, String)>,
    /// Series that did not fit in the legend.
    pub(crate) legend_more: usize,
}

impl Layout {
    /// Pixel position (x, y; fractional) of data point `(x, y)`, possibly
    /// outside the plot area. `None` for points that cannot be shown.
    pub fn to_pixel(&self, x: f64, y: f64) -> Option<(f64, f64)> {
        let tx = self.x.frac(x)?;
        let ty = self.y.frac(y)?;
        let p = self.plot;
        let px = p.left as f64 + tx * p.right.saturating_sub(p.left) as f64;
        let py = p.bottom as f64 - ty * p.bottom.saturating_sub(p.top) as f64;
        (px.is_finite() && py.is_finite()).then_some((px, py))
    }

    /// The x range shown (data units).
    pub fn x_range(&self) -> (f64, f64) {
        self.x.range()
    }

    /// The y range shown (data units, also for a log axis).
    pub fn y_range(&self) -> (f64, f64) {
        self.y.range()
    }

    /// The x tick labels, as drawn (overlapping ones are skipped when drawing).
    pub fn x_tick_labels(&self) -> &[String] {
        &self.x.labels
    }

    /// The y tick labels, as drawn.
    pub fn y_tick_labels(&self) -> &[String] {
        &self.y.labels
    }

    pub(crate) fn compute(chart: &Chart) -> Layout {
        let w = chart.width.clamp(MIN_SIZE, MAX_SIZE) as i64;
        let h = chart.height.clamp(MIN_SIZE, MAX_SIZE) as i64;
        let log = chart.y_scale == Scale::Log10;
        let text_h = font::text_height(1) as i64;

        let bounds = data_bounds(chart);
        let has_data = bounds.is_some();

        // Top: title, then the y label, then the plot.
        let (mut top, title_text, title_rect, y_label) = top_texts(chart, w);
        // Room for the top tick label, centred on the top edge.
        top += text_h / 2 + 1;

        // Bottom: tick marks, tick labels, then the x label.
        let x_label_text = chart.x_label.trim();
        let mut bottom = h - 1 - PAD - text_h - LABEL_GAP - TICK;
        if !x_label_text.is_empty() {
            bottom -= text_h + 6;
        }
        if bottom - top < MIN_PLOT {
            top = (h / 2 - MIN_PLOT / 2).min(top);
            bottom = top + MIN_PLOT;
        }

        let y_ticks_wanted = ((bottom - top) / 50 + 1).clamp(2, 12) as usize;
        let y_data = bounds.map(|(_, _, y0, y1)| (y0, y1));
        let y_axis = if log {
            Axis::log10(y_data, chart.y_min, chart.y_max, y_ticks_wanted)
        } else {
            Axis::linear(y_data, chart.y_min, chart.y_max, y_ticks_wanted)
        };
        let y_label_w = y_axis
            .labels
            .iter()
            .map(|l| font::text_width(l, 1) as i64)
            .max()
            .unwrap_or(0);
        let left = (PAD + y_label_w + LABEL_GAP + TICK).min(w / 3);

        // Right: the legend, sized to the longest (shortened) name.
        let (mut legend_rows, mut legend_more, legend_w) = legend_rows(chart, w, top, bottom);
        let mut right = w
            - 1
            - PAD
            - if legend_w > 0 {
                legend_w + LEGEND_GAP
            } else {
                0
            };
        let mut legend = legend_w > 0;
        if right - left < MIN_PLOT.max(w / 3) {
            // No room: drop the legend rather than squash the plot.
            legend = false;
            right = w - 1 - PAD;
        }

        // The x axis, twice: the last tick label, centred on its tick, may
        // need the right edge pulled in.
        let x_data = bounds.map(|(x0, x1, _, _)| (x0, x1));
        let mut x_axis = x_axis(chart, x_data, left, &mut right, legend, w);
        let right = right.max(left + MIN_PLOT).min(w - 1);
        let bottom = bottom.min(h - 1);
        let mut y_axis = y_axis;
        if has_markers(chart) {
            x_axis.keep_inside(x_data, right - left, MARKER_ROOM);
            y_axis.keep_inside(y_data, bottom - top, MARKER_ROOM);
        }

        let plot = Rect {
            left: left.max(0) as u32,
            top: top.max(0) as u32,
            right: right.max(0) as u32,
            bottom: bottom.max(0) as u32,
        };

        let legend_rect = if legend {
            let rows = legend_rows.len() as i64 + i64::from(legend_more > 0);
            let l = right + LEGEND_GAP;
            let r = (l + legend_w - 1).min(w - 1);
            let t = top;
            let b = (t + 2 * LEGEND_PAD + rows * LEGEND_ROW - (LEGEND_ROW - text_h)).min(h - 1);
            Some(Rect {
                left: l as u32,
                top: t as u32,
                right: r as u32,
                bottom: b as u32,
            })
        } else {
            legend_rows.clear();
            legend_more = 0;
            None
        };

        let x_label = (!x_label_text.is_empty()).then(|| {
            let text = font::fit(x_label_text, (w - 2 * PAD) as u32, 1);
            let tw = font::text_width(&text, 1) as i64;
            let centre = (left + right) / 2;
            let x = (centre - tw / 2).clamp(0, (w - tw).max(0));
            Placed {
                text,
                x,
                y: bottom + TICK + LABEL_GAP + CELL_H as i64 + 6,
            }
        });

        Layout {
            width: w as u32,
            height: h as u32,
            plot,
            legend: legend_rect,
            title: title_rect,
            x_ticks: x_axis.major.clone(),
            y_ticks: y_axis.major.clone(),
            has_data,
            x: x_axis,
            y: y_axis,
            title_text,
            x_label,
            y_label,
            legend_rows,
            legend_more,
        }
    }
}

/// The texts above the plot: the title, then the y label; where the next
/// thing goes, and the title's placement and box.
fn top_texts(chart: &Chart, w: i64) -> (i64, Option<Placed>, Option<Rect>, Option<Placed>) {
    let text_h = font::text_height(1) as i64;
    let mut top = PAD;
    let title = chart.title.trim();
    let mut title_text = None;
    let mut title_rect = None;
    if !title.is_empty() {
        let text = font::fit(title, (w - 2 * PAD) as u32, 2);
        let tw = font::text_width(&text, 2) as i64;
        let x = ((w - tw) / 2).max(0);
        title_rect = Some(Rect {
            left: x as u32,
            top: top as u32,
            right: (x + tw - 1).max(x) as u32,
            bottom: (top + font::text_height(2) as i64 - 1) as u32,
        });
        title_text = Some(Placed { text, x, y: top });
        top += font::text_height(2) as i64 + 10;
    }
    let mut y_label = None;
    let y_label_text = chart.y_label.trim();
    if !y_label_text.is_empty() {
        let text = font::fit(y_label_text, (w - 2 * PAD) as u32, 1);
        y_label = Some(Placed {
            text,
            x: PAD,
            y: top,
        });
        top += text_h + 8;
    }
    (top, title_text, title_rect, y_label)
}

/// The legend's rows (series index, shortened name), how many series it
/// has no room for, and its width (0: no legend).
fn legend_rows(chart: &Chart, w: i64, top: i64, bottom: i64) -> (Vec<(usize, String)>, usize, i64) {
    let mut legend_rows = Vec::new();
    let mut legend_more = 0;
    let mut legend_w = 0;
    if !chart.series.is_empty() {
        let fixed = 3 * LEGEND_PAD + SWATCH;
        let max_text = ((w * 3 / 10) - fixed).max(font::CELL_W as i64 * 3);
        let max_rows = ((bottom - top + 1 - 2 * LEGEND_PAD) / LEGEND_ROW).max(1) as usize;
        let shown = if chart.series.len() > max_rows {
            max_rows.saturating_sub(1)
        } else {
            chart.series.len()
        };
        legend_more = chart.series.len() - shown;
        for (i, s) in chart.series.iter().take(shown).enumerate() {
            legend_rows.push((i, font::fit(s.name.trim(), max_text as u32, 1)));
        }
        // Names that differ only in their tails would read the same cut
        // at the end: cut those in the middle instead.
        let fitted: Vec<String> = legend_rows.iter().map(|(_, n)| n.clone()).collect();
        for (i, name) in legend_rows.iter_mut() {
            let original = chart.series[*i].name.trim();
            if *name != original && fitted.iter().filter(|f| *f == name).count() > 1 {
                *name = font::fit_middle(original, max_text as u32, 1);
            }
        }
        let more_w = if legend_more > 0 {
            font::text_width(&format!("+{legend_more} more"), 1) as i64 - SWATCH - LEGEND_PAD
        } else {
            0
        };
        let text_w = legend_rows
            .iter()
            .map(|(_, n)| font::text_width(n, 1) as i64)
            .max()
            .unwrap_or(0)
            .max(more_w);
        legend_w = fixed + text_w;
    }
    (legend_rows, legend_more, legend_w)
}

/// The x axis, twice: the last tick label, centred on its tick, may need
/// the plot's `right` edge pulled in.
fn x_axis(
    chart: &Chart,
    x_data: Option<(f64, f64)>,
    left: i64,
    right: &mut i64,
    legend: bool,
    w: i64,
) -> Axis {
    let whole = chart.x_integer;
    let mut x_axis = Axis::linear_ticked(x_data, chart.x_min, chart.x_max, 2, whole);
    for _ in 0..2 {
        let wanted = ((*right - left) / 90 + 1).clamp(2, 12) as usize;
        x_axis = Axis::linear_ticked(x_data, chart.x_min, chart.x_max, wanted, whole);
        let half_last = x_axis
            .labels
            .last()
            .map(|l| font::text_width(l, 1) as i64 / 2 + 1)
            .unwrap_or(0);
        let room = if legend {
            LEGEND_GAP - 2
        } else {
            w - 1 - *right
        };
        if half_last <= room {
            break;
        }
        *right -= half_last - room;
    }
    x_axis
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_axis_widens_free_ends_to_ticks() {
        let a = Axis::linear(Some((3.0, 97.0)), None, None, 8);
        assert_eq!((a.lo, a.hi), (0.0, 100.0));
        assert_eq!(a.major.first(), Some(&0.0));
        assert_eq!(a.major.last(), Some(&100.0));
        assert_eq!(a.labels.len(), a.major.len());
    }

    #[test]
    fn linear_axis_keeps_fixed_ends() {
        let a = Axis::linear(Some((3.0, 97.0)), Some(0.0), Some(10.0), 8);
        assert_eq!((a.lo, a.hi), (0.0, 10.0));
        let a = Axis::linear(Some((3.0, 97.0)), Some(1.0), None, 8);
        assert_eq!(a.lo, 1.0);
        assert_eq!(a.hi, 100.0);
        // A fixed end beyond all the data still gives a usable range.
        let a = Axis::linear(Some((-5.0, -1.0)), Some(0.0), None, 8);
        assert_eq!(a.lo, 0.0);
        assert!(a.hi > 0.0);
        // Reversed fixed ends are ignored.
        let a = Axis::linear(Some((3.0, 7.0)), Some(10.0), Some(0.0), 8);
        assert!(a.lo <= 3.0 && a.hi >= 7.0);
    }

    #[test]
    fn linear_axis_pads_equal_values() {
        for v in [0.0, 5.0, -5.0, 1e-250, 1e300, -1e300, 1e15 + 0.5] {
            let a = Axis::linear(Some((v, v)), None, None, 8);
            assert!(a.lo < a.hi, "{v}: {a:?}");
            assert!(a.lo <= v && v <= a.hi, "{v}: {a:?}");
            assert!(!a.major.is_empty(), "{v}: {a:?}");
            assert!(a.frac(v).is_some_and(|t| (0.0..=1.0).contains(&t)), "{v}");
        }
    }

    #[test]
    fn linear_axis_extremes() {
        let a = Axis::linear(Some((-1e300, 1e300)), None, None, 8);
        assert!(a.lo.is_finite() && a.hi.is_finite());
        assert!(a.frac(0.0).is_some());
        assert!(!a.major.is_empty());
        let a = Axis::linear(Some((1e-300, 3e-300)), None, None, 8);
        assert!(a.lo < a.hi);
        assert!(!a.major.is_empty());
    }

    #[test]
    fn log_axis() {
        let a = Axis::log10(Some((1.0, 1e5)), None, None, 10);
        assert_eq!(a.major, vec![1.0, 10.0, 100.0, 1e3, 1e4, 1e5]);
        assert_eq!(a.labels, ["1", "10", "100", "1k", "10k", "100k"]);
        assert_eq!(a.frac(1.0), Some(0.0));
        assert_eq!(a.frac(1e5), Some(1.0));
        assert_eq!(a.frac(0.0), None);
        assert_eq!(a.frac(-3.0), None);
        assert!(a.minor.contains(&20.0));
        let a = Axis::log10(Some((3.0, 70.0)), None, None, 10);
        assert_eq!(a.range(), (1.0, 100.0));
        // All equal: one decade.
        let a = Axis::log10(Some((5.0, 5.0)), None, None, 10);
        assert_eq!(a.range(), (1.0, 10.0));
        // Fixed ends inside one decade fall back to linear ticks.
        let a = Axis::log10(Some((3.0, 7.0)), Some(2.0), Some(8.0), 10);
        assert!(a.major.len() >= 2, "{a:?}");
        // No data.
        let a = Axis::log10(None, None, None, 10);
        assert_eq!(a.range(), (1.0, 10.0));
    }

    #[test]
    fn cleaning_points() {
        assert_eq!(clean((1.0, 2.0), false), Some((1.0, 2.0)));
        assert_eq!(clean((f64::NAN, 2.0), false), None);
        assert_eq!(clean((1.0, f64::INFINITY), false), None);
        assert_eq!(clean((1.0, 0.0), true), None);
        assert_eq!(clean((1.0, -1.0), true), None);
        assert_eq!(clean((1.0, -1.0), false), Some((1.0, -1.0)));
        assert_eq!(clean((f64::MAX, 1.0), false), Some((1e300, 1.0)));
    }

    /// Every marker's square (its centre +- 3.5 px) inside the plot area.
    fn markers_inside(c: &Chart) {
        let l = c.layout();
        let p = l.plot;
        for s in &c.series {
            for &(x, y) in &s.points {
                let (px, py) = l.to_pixel(x, y).unwrap();
                assert!(
                    px - 3.5 >= p.left as f64
                        && px + 3.5 <= p.right as f64
                        && py - 3.5 >= p.top as f64
                        && py + 3.5 <= p.bottom as f64,
                    "({x}, {y}) at ({px}, {py}) is not inside {p:?}"
                );
            }
        }
    }

    #[test]
    fn markers_at_the_data_edges_are_drawn_whole() {
        // Free ends that land on ticks, a fixed 0 the data touches, and a
        // log axis on whole decades.
        let c = Chart::new("t", "x", "y")
            .y_min(0.0)
            .points("a", vec![(200.0, 0.0), (800.0, 45.0), (500.0, 20.0)]);
        markers_inside(&c);
        let l = c.layout();
        assert!(l.x_tick_labels().contains(&"200".to_string()));
        let c = Chart::new("t", "x", "y")
            .log_y()
            .points("a", vec![(1.0, 10.0), (3.0, 1000.0)]);
        markers_inside(&c);
        // A single point of a line is a marker too.
        markers_inside(&Chart::new("t", "x", "y").series("one", vec![(5.0, 5.0)]));
        // Lines keep their tick-aligned ends.
        let l = Chart::new("t", "x", "y")
            .series("a", vec![(0.0, 0.0), (10.0, 10.0)])
            .layout();
        assert_eq!(l.x_range(), (0.0, 10.0));
    }

    #[test]
    fn integer_x_axes_tick_whole_numbers() {
        let pts = vec![(1.0, 3.0), (2.0, 4.0), (3.0, 2.0)];
        let plain = Chart::new("t", "run #", "y").series("a", pts.clone());
        assert!(
            plain
                .layout()
                .x_tick_labels()
                .iter()
                .any(|t| t.contains('.')),
            "the test needs fractional ticks by default"
        );
        let whole = plain.clone().integer_x().layout();
        assert!(!whole.x_tick_labels().is_empty());
        for t in whole.x_tick_labels() {
            assert!(t.parse::<i64>().is_ok(), "tick {t}");
        }
        assert!(
            Chart::new("t", "run #", "y")
                .series("a", pts)
                .integer_x()
                .to_text(60, 12)
                .contains('3')
        );
    }

    #[test]
    fn legend_names_cut_alike_are_cut_in_the_middle() {
        let long = "a_service_with_a_long_name -> another_service_with_a_long_name";
        let c = Chart::new("t", "x", "y")
            .size(600, 300)
            .points(&format!("{long}/0"), vec![(1.0, 1.0)])
            .points(&format!("{long}/1"), vec![(2.0, 1.0)])
            .points("short", vec![(3.0, 1.0)]);
        let l = c.layout();
        let names: Vec<&str> = l.legend_rows.iter().map(|(_, n)| n.as_str()).collect();
        assert_eq!(names.len(), 3);
        assert_ne!(names[0], names[1], "{names:?}");
        assert!(
            names[0].ends_with("/0") && names[1].ends_with("/1"),
            "{names:?}"
        );
        assert!(names[0].contains(".."));
        assert_eq!(names[2], "short");
    }

    #[test]
    fn a_series_can_have_its_own_colour() {
        let c = Chart::new("t", "x", "y")
            .points("ok", vec![(1.0, 1.0)])
            .points("failed", vec![(2.0, 1.0)])
            .color([200, 0, 0]);
        assert_eq!(c.series_color(0), crate::PALETTE[0]);
        assert_eq!(c.series_color(1), [200, 0, 0]);
        assert!(c.to_svg().contains("#c80000"));
    }
}
