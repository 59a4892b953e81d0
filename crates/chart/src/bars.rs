//! Horizontal bars with error bars, one per system, as benchmark result
//! viewers show one test across machines: each bar is a mean, its whisker
//! the spread (e.g. mean ± one standard deviation), and the text after it
//! the value, the spread and a note (e.g. the change against a reference).
//!
//! Drawn as SVG only (for the report page), in the same style as
//! [`crate::Chart::to_svg`]: the viewer's fonts, the [`crate::PALETTE`]
//! colours, all text escaped. Rendering never panics: non-finite values
//! are drawn as an empty bar with their text, a zero or negative scale
//! draws no bars.

use std::fmt::Write;

use html_escape::{encode_double_quoted_attribute as attr, encode_text as esc};

use crate::PALETTE;

/// One bar.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    /// The system (or whatever the bar stands for), left of the bar.
    pub label: String,
    /// The bar's length.
    pub value: f64,
    /// The whisker's ends (`None`: no whisker), e.g. mean ± sd.
    pub spread: Option<(f64, f64)>,
    /// The text after the bar (the value as it should read, its spread, a
    /// note).
    pub text: String,
    /// The bar's colour (`None`: the palette colour of its position).
    pub color: Option<[u8; 3]>,
}

/// A bar chart: a title, a line under it (e.g. "higher is better") and
/// the bars, top to bottom in the order given, all from 0.
#[derive(Clone, Debug, PartialEq)]
pub struct BarChart {
    pub title: String,
    pub subtitle: String,
    pub bars: Vec<Bar>,
    /// The chart's width; its height follows from the number of bars.
    pub width: u32,
    /// A vertical line at this value across all bars (e.g. 1.0 for a
    /// relative chart whose reference is 1).
    pub reference: Option<f64>,
}

/// Height of one bar's row.
pub const ROW_H: u32 = 26;
/// Height of a bar inside its row.
pub const BAR_H: u32 = 16;
const TOP: u32 = 48;
const PAD: u32 = 8;
/// Width of the label column (labels are cut to fit).
pub const LABEL_W: u32 = 170;
/// Width kept right of the longest bar for its text, at least.
pub const TEXT_W: u32 = 200;
/// The width of a character of the bars' text, in the viewer's 12 px sans
/// serif font, rounded up (so that the text is never cut).
const CHAR_W: f64 = 7.0;
/// The bars' length when the chart is as narrow as it gets.
const MIN_BARS: u32 = 240;
const WHISKER: [u8; 3] = [30, 30, 30];

/// Where a bar and its whisker are drawn, in SVG user units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BarBox {
    pub x0: f64,
    pub x1: f64,
    pub top: f64,
    pub bottom: f64,
    /// The whisker's ends, if it has one.
    pub whisker: Option<(f64, f64)>,
}

impl BarChart {
    pub fn new(title: &str, subtitle: &str) -> BarChart {
        BarChart {
            title: title.to_string(),
            subtitle: subtitle.to_string(),
            bars: Vec::new(),
            width: 760,
            reference: None,
        }
    }

    /// Add a bar.
    pub fn bar(mut self, label: &str, value: f64, spread: Option<(f64, f64)>, text: &str) -> Self {
        self.bars.push(Bar {
            label: label.to_string(),
            value,
            spread,
            text: text.to_string(),
            color: None,
        });
        self
    }

    /// The chart's height.
    pub fn height(&self) -> u32 {
        TOP + self.bars.len() as u32 * ROW_H + PAD
    }

    /// The largest value drawn (bar or whisker end): the scale's end.
    fn scale_end(&self) -> f64 {
        let mut m = self.reference.filter(|r| r.is_finite()).unwrap_or(0.0);
        for b in &self.bars {
            for v in [Some(b.value), b.spread.map(|s| s.1)].into_iter().flatten() {
                if v.is_finite() {
                    m = m.max(v);
                }
            }
        }
        m
    }

    fn x_of(&self, v: f64) -> f64 {
        let (left, span) = self.scale();
        let end = self.scale_end();
        if !(v.is_finite() && end > 0.0) {
            return left;
        }
        left + (v.clamp(0.0, end) / end) * span
    }

    /// The room kept right of the bars for their text.
    fn text_room(&self) -> u32 {
        let longest = self
            .bars
            .iter()
            .map(|b| b.text.trim().chars().count())
            .max()
            .unwrap_or(0);
        ((longest as f64 * CHAR_W) as u32 + 12).max(TEXT_W)
    }

    /// The chart's width: as asked, or wider where the bars' text needs it.
    pub fn drawn_width(&self) -> u32 {
        self.width.max(LABEL_W + PAD + MIN_BARS + self.text_room())
    }

    /// The bars' left edge and the length of the longest.
    fn scale(&self) -> (f64, f64) {
        let left = f64::from(LABEL_W + PAD);
        let span = (f64::from(self.drawn_width()) - left - f64::from(self.text_room())).max(1.0);
        (left, span)
    }

    /// Where bar `i` is drawn.
    pub fn bar_box(&self, i: usize) -> Option<BarBox> {
        let b = self.bars.get(i)?;
        let top = f64::from(TOP + i as u32 * ROW_H + (ROW_H - BAR_H) / 2);
        let (x0, _) = self.scale();
        Some(BarBox {
            x0,
            x1: self.x_of(b.value),
            top,
            bottom: top + f64::from(BAR_H),
            whisker: b
                .spread
                .filter(|(l, h)| l.is_finite() && h.is_finite())
                .map(|(l, h)| (self.x_of(l), self.x_of(h))),
        })
    }

    /// The chart as an SVG document.
    pub fn to_svg(&self) -> String {
        let (w, h) = (self.drawn_width(), self.height());
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" class="bars" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="system-ui,sans-serif" font-size="12" role="img" aria-label="{}">"#,
            attr(self.title.trim())
        );
        let _ = writeln!(out, "<title>{}</title>", esc(self.title.trim()));
        let _ = writeln!(
            out,
            r##"<rect width="{w}" height="{h}" fill="#ffffff"/><text x="{PAD}" y="18" font-size="15" font-weight="bold">{}</text><text x="{PAD}" y="36" fill="#555">{}</text>"##,
            esc(self.title.trim()),
            esc(self.subtitle.trim())
        );
        let (x0, _) = self.scale();
        let _ = writeln!(
            out,
            r##"<line x1="{x0}" y1="{TOP}" x2="{x0}" y2="{}" stroke="#999"/>"##,
            h - PAD
        );
        for (i, b) in self.bars.iter().enumerate() {
            let Some(bx) = self.bar_box(i) else { continue };
            let color = b.color.unwrap_or(PALETTE[i % PALETTE.len()]);
            let mid = (bx.top + bx.bottom) / 2.0;
            let label = crate::font::fit(b.label.trim(), LABEL_W * 6 / 7, 1);
            let _ = write!(
                out,
                r##"<g class="bar"><title>{}: {}</title><text x="{}" y="{}" text-anchor="end">{}</text>"##,
                esc(b.label.trim()),
                esc(b.text.trim()),
                LABEL_W,
                mid + 4.0,
                esc(&label),
            );
            let _ = write!(
                out,
                r##"<rect class="bar-fill" x="{}" y="{}" width="{:.1}" height="{BAR_H}" fill="#{:02x}{:02x}{:02x}"/>"##,
                bx.x0,
                bx.top,
                (bx.x1 - bx.x0).max(0.0),
                color[0],
                color[1],
                color[2]
            );
            let mut text_x = bx.x1;
            if let Some((l, r)) = bx.whisker {
                let c = format!("#{:02x}{:02x}{:02x}", WHISKER[0], WHISKER[1], WHISKER[2]);
                let _ = write!(
                    out,
                    r#"<g class="whisker" stroke="{c}" stroke-width="2"><line x1="{l:.1}" y1="{mid}" x2="{r:.1}" y2="{mid}"/><line x1="{l:.1}" y1="{}" x2="{l:.1}" y2="{}"/><line x1="{r:.1}" y1="{}" x2="{r:.1}" y2="{}"/></g>"#,
                    bx.top + 2.0,
                    bx.bottom - 2.0,
                    bx.top + 2.0,
                    bx.bottom - 2.0
                );
                text_x = text_x.max(r);
            }
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{}">{}</text></g>"#,
                text_x + 6.0,
                mid + 4.0,
                esc(b.text.trim())
            );
        }
        if let Some(r) = self.reference.filter(|r| r.is_finite() && *r > 0.0) {
            let x = self.x_of(r);
            let _ = writeln!(
                out,
                r##"<line class="reference" x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="#555" stroke-dasharray="4 3"/>"##,
                TOP - 4,
                h - PAD
            );
        }
        out.push_str("</svg>\n");
        out
    }
}

/// A sparkline: `values` in order as a polyline `w` x `h` with the last
/// point dotted, for a trend in a table cell. `None` below two finite
/// values (a single value has no trend to draw).
pub fn sparkline(values: &[f64], w: u32, h: u32, label: &str) -> Option<String> {
    let v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if v.len() < 2 {
        return None;
    }
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (fw, fh) = (f64::from(w) - 6.0, f64::from(h) - 6.0);
    let at = |i: usize, y: f64| {
        let x = 3.0 + fw * i as f64 / (v.len() - 1) as f64;
        let t = if hi > lo { (y - lo) / (hi - lo) } else { 0.5 };
        (x, 3.0 + fh * (1.0 - t))
    };
    let mut pts = String::new();
    for (i, y) in v.iter().enumerate() {
        let (x, y) = at(i, *y);
        let _ = write!(pts, "{x:.1},{y:.1} ");
    }
    let (lx, ly) = at(v.len() - 1, v[v.len() - 1]);
    Some(format!(
        r##"<svg class="spark" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{l}"><title>{t}</title><polyline points="{}" fill="none" stroke="#1f77b4" stroke-width="1.5"/><circle cx="{lx:.1}" cy="{ly:.1}" r="2.5" fill="#1f77b4"/></svg>"##,
        pts.trim_end(),
        l = attr(label),
        t = esc(label),
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn bars_scale_to_the_longest_whisker() {
        let c = BarChart::new("QPS", "higher is better")
            .bar("host-a", 100.0, Some((90.0, 110.0)), "100 ± 10")
            .bar("host-b", 200.0, Some((150.0, 250.0)), "200 ± 50 (+100%)");
        let (a, b) = (c.bar_box(0).unwrap(), c.bar_box(1).unwrap());
        let (x0, span) = c.scale();
        assert_eq!(a.x0, x0);
        // 250 is the end of the scale.
        assert!((b.whisker.unwrap().1 - (x0 + span)).abs() < 1e-9);
        assert!((b.x1 - (x0 + span * 0.8)).abs() < 1e-9);
        assert!((a.x1 - (x0 + span * 0.4)).abs() < 1e-9);
        assert!(a.bottom <= b.top);
        let svg = c.to_svg();
        assert_eq!(svg.matches("class=\"bar-fill\"").count(), 2);
        assert_eq!(svg.matches("class=\"whisker\"").count(), 2);
        assert!(svg.contains("200 ± 50 (+100%)"));
    }

    #[test]
    fn sparklines_need_two_values() {
        assert!(sparkline(&[1.0], 100, 20, "x").is_none());
        assert!(sparkline(&[1.0, f64::NAN], 100, 20, "x").is_none());
        let s = sparkline(&[1.0, 2.0, 2.0], 100, 20, "a <b>").unwrap();
        assert!(s.contains("3.0,17.0 ") && s.contains("a &lt;b&gt;"), "{s}");
        // Equal values: a flat line across the middle.
        assert!(
            sparkline(&[5.0, 5.0], 100, 20, "x")
                .unwrap()
                .contains("3.0,10.0 97.0,10.0")
        );
    }

    #[test]
    fn odd_values_draw_without_panicking() {
        let c = BarChart::new("<t>", "")
            .bar("nan", f64::NAN, Some((f64::NAN, 1.0)), "n/a")
            .bar("neg", -5.0, None, "-5");
        let svg = c.to_svg();
        assert!(svg.contains("&lt;t&gt;"));
        assert!(c.bar_box(1).unwrap().x1 == c.bar_box(1).unwrap().x0);
        assert!(BarChart::new("empty", "").to_svg().contains("</svg>"));
    }
}
