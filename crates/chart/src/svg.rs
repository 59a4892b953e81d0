//! The chart as SVG: the layout of [`Chart::render`] drawn with SVG
//! elements instead of pixels, for pages that embed charts inline.
//!
//! Pixel `(x, y)` of the PNG is the unit square at `(x, y)` here, so
//! fills are rectangles on whole units and lines run through pixel centres
//! (`+ 0.5`). Text uses the viewer's monospace font, sized to the bitmap
//! font's cap height and stretched (`textLength`) to its width, so labels
//! take the room the layout gave them. The series are drawn in a nested
//! `<svg>` covering the plot area, which clips them without element ids
//! (several charts can share a page).

use std::fmt::Write;

use crate::font;
use crate::layout::{self, Layout};
use crate::{
    Chart, FRAME, GRID, GRID_MINOR, LEGEND_FRAME, NOTE, Rect, Scale, Style, TEXT, TITLE, WHITE,
};

fn rgb(c: [u8; 3]) -> String {
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

/// A filled rectangle over pixels `x0..=x1`, `y0..=y1`.
fn fill(out: &mut String, x0: i64, y0: i64, x1: i64, y1: i64, color: [u8; 3]) {
    let (x0, x1) = (x0.min(x1), x0.max(x1));
    let (y0, y1) = (y0.min(y1), y0.max(y1));
    let _ = writeln!(
        out,
        r#"<rect x="{x0}" y="{y0}" width="{}" height="{}" fill="{}"/>"#,
        x1 - x0 + 1,
        y1 - y0 + 1,
        rgb(color)
    );
}

/// A one-pixel frame along the edges of `r`.
fn outline(out: &mut String, r: Rect, color: [u8; 3]) {
    let _ = writeln!(
        out,
        r#"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="{}" stroke-width="1"/>"#,
        r.left as f64 + 0.5,
        r.top as f64 + 0.5,
        r.right.saturating_sub(r.left),
        r.bottom.saturating_sub(r.top),
        rgb(color)
    );
}

/// Text with its top-left corner at `(x, y)`, as wide as the bitmap font
/// would draw it at `scale`.
fn text(out: &mut String, x: i64, y: i64, s: &str, scale: u32, color: [u8; 3]) {
    if s.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        r#"<text x="{x}" y="{}" font-size="{}" textLength="{}" lengthAdjust="spacingAndGlyphs" fill="{}">{}</text>"#,
        y + font::text_height(scale) as i64,
        10 * scale,
        font::text_width(s, scale),
        rgb(color),
        html_escape::encode_text(s)
    );
}

/// A number for a path: two decimals at most.
fn num(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// The background's grid, the plot's frame, the ticks and their labels
/// (crisp edges).
fn axes(l: &Layout, out: &mut String) {
    let p = l.plot;
    let (pl, pt, pr, pb) = (p.left as i64, p.top as i64, p.right as i64, p.bottom as i64);
    let text_h = font::text_height(1) as i64;
    let _ = writeln!(out, r#"<g shape-rendering="crispEdges">"#);
    fill(out, 0, 0, l.width as i64 - 1, l.height as i64 - 1, WHITE);
    for &v in &l.y.minor {
        if let Some(y) = l.row(v) {
            fill(out, pl, y, pr, y, GRID_MINOR);
        }
    }
    for &v in &l.y.major {
        if let Some(y) = l.row(v) {
            fill(out, pl, y, pr, y, GRID);
        }
    }
    for &v in &l.x.major {
        if let Some(x) = l.column(v) {
            fill(out, x, pt, x, pb, GRID);
        }
    }
    outline(out, p, FRAME);
    for &v in &l.y.minor {
        if let Some(y) = l.row(v) {
            fill(out, pl - layout::TICK / 2 - 1, y, pl - 1, y, FRAME);
        }
    }
    let mut last_label_top = i64::MAX;
    for (v, label) in l.y.major.iter().zip(&l.y.labels) {
        let Some(y) = l.row(*v) else { continue };
        fill(out, pl - layout::TICK, y, pl - 1, y, FRAME);
        let top = y - text_h / 2;
        if top + text_h + 2 > last_label_top {
            continue;
        }
        let tw = font::text_width(label, 1) as i64;
        text(
            out,
            pl - layout::TICK - layout::LABEL_GAP - tw,
            top,
            label,
            1,
            TEXT,
        );
        last_label_top = top;
    }
    let mut last_label_right = i64::MIN;
    for (v, label) in l.x.major.iter().zip(&l.x.labels) {
        let Some(x) = l.column(*v) else { continue };
        fill(out, x, pb + 1, x, pb + layout::TICK, FRAME);
        let tw = font::text_width(label, 1) as i64;
        let left = (x - tw / 2).max(0);
        if left < last_label_right + 8 || left + tw > l.width as i64 {
            continue;
        }
        text(
            out,
            left,
            pb + layout::TICK + layout::LABEL_GAP,
            label,
            1,
            TEXT,
        );
        last_label_right = left + tw;
    }
    let _ = writeln!(out, "</g>");
}

impl Chart {
    /// The chart as an SVG document (UTF-8 text) with the layout of
    /// [`Chart::render`]: same plot area, ticks, labels, legend and colours.
    /// It can be embedded in HTML as is; all text is escaped.
    pub fn to_svg(&self) -> String {
        let l: Layout = self.layout();
        let p = l.plot;
        let (pl, pt, pr, pb) = (p.left as i64, p.top as i64, p.right as i64, p.bottom as i64);
        let text_h = font::text_height(1) as i64;
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="monospace" role="img" aria-label="{}">"#,
            html_escape::encode_double_quoted_attribute(self.title.trim()),
            w = l.width,
            h = l.height,
        );
        let _ = writeln!(
            out,
            "<title>{}</title>",
            html_escape::encode_text(self.title.trim())
        );
        axes(&l, &mut out);
        if let Some(t) = &l.title_text {
            text(&mut out, t.x, t.y, &t.text, 2, TITLE);
        }
        for t in [&l.x_label, &l.y_label].into_iter().flatten() {
            text(&mut out, t.x, t.y, &t.text, 1, TEXT);
        }

        self.series_svg(&l, &mut out);

        if !l.has_data {
            let note = "no data";
            let tw = font::text_width(note, 1) as i64;
            let (x, y) = ((pl + pr - tw) / 2, (pt + pb - text_h) / 2);
            fill(&mut out, x - 4, y - 3, x + tw + 3, y + text_h + 2, WHITE);
            text(&mut out, x, y, note, 1, NOTE);
        }

        if let Some(r) = l.legend {
            self.legend_svg(&l, r, &mut out);
        }
        out.push_str("</svg>\n");
        out
    }

    /// The series, clipped to the plot area by a nested viewport in the
    /// same coordinates.
    fn series_svg(&self, l: &Layout, out: &mut String) {
        let p = l.plot;
        let (pl, pt, pr, pb) = (p.left as i64, p.top as i64, p.right as i64, p.bottom as i64);
        let _ = writeln!(
            out,
            r#"<svg x="{pl}" y="{pt}" width="{}" height="{}" viewBox="{pl} {pt} {} {}" overflow="hidden">"#,
            pr - pl + 1,
            pb - pt + 1,
            pr - pl + 1,
            pb - pt + 1,
        );
        let log = self.y_scale == Scale::Log10;
        for (i, s) in self.series.iter().enumerate() {
            let color = rgb(self.series_color(i));
            let pixels: Vec<Option<(f64, f64)>> = s
                .points
                .iter()
                .map(|&pt| {
                    let (x, y) = layout::clean(pt, log)?;
                    l.to_pixel(x, y)
                })
                .map(|px| px.map(|(x, y)| (x.round() + 0.5, y.round() + 0.5)))
                .collect();
            let mut path = String::new();
            let mut marks = String::new();
            let r = if s.style == Style::Points { 3.5 } else { 2.5 };
            for (j, cur) in pixels.iter().enumerate() {
                let Some((x, y)) = *cur else { continue };
                let prev = j.checked_sub(1).and_then(|k| pixels[k]);
                let next = pixels.get(j + 1).copied().flatten();
                if s.style == Style::Points || (prev.is_none() && next.is_none()) {
                    let _ = write!(
                        marks,
                        r#"<rect x="{}" y="{}" width="{}" height="{}"/>"#,
                        num(x - r),
                        num(y - r),
                        2.0 * r,
                        2.0 * r
                    );
                    continue;
                }
                let cmd = if prev.is_none() { 'M' } else { 'L' };
                let _ = write!(path, "{cmd}{} {} ", num(x), num(y));
            }
            let _ = write!(
                out,
                r#"<g class="series" fill="{color}" stroke="{color}"><title>{}</title>"#,
                html_escape::encode_text(s.name.trim())
            );
            if !path.is_empty() {
                let _ = write!(
                    out,
                    r#"<path d="{}" fill="none" stroke-width="2" stroke-linejoin="round"/>"#,
                    path.trim_end()
                );
            }
            let _ = writeln!(out, r#"{marks}</g>"#);
        }
        let _ = writeln!(out, "</svg>");
    }

    /// The legend in its box `r`: a swatch and a name per row, then how
    /// many more series it had no room for.
    fn legend_svg(&self, l: &Layout, r: Rect, out: &mut String) {
        fill(
            out,
            r.left as i64,
            r.top as i64,
            r.right as i64,
            r.bottom as i64,
            WHITE,
        );
        outline(out, r, LEGEND_FRAME);
        let x = r.left as i64 + layout::LEGEND_PAD;
        let mut y = r.top as i64 + layout::LEGEND_PAD;
        for (i, name) in &l.legend_rows {
            let color = self.series_color(*i);
            if self.series.get(*i).map(|s| s.style) == Some(Style::Points) {
                let c = x + layout::SWATCH / 2;
                fill(out, c - 3, y, c + 3, y + 6, color);
            } else {
                fill(out, x, y + 2, x + layout::SWATCH - 1, y + 4, color);
            }
            text(
                out,
                x + layout::SWATCH + layout::LEGEND_PAD,
                y,
                name,
                1,
                TEXT,
            );
            y += layout::LEGEND_ROW;
        }
        if l.legend_more > 0 {
            text(out, x, y, &format!("+{} more", l.legend_more), 1, NOTE);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use crate::Chart;

    #[test]
    fn svg_has_the_layout_series_and_escaped_text() {
        let c = Chart::new("p99 <latency> & \"QPS\"", "time (s)", "ms")
            .series("p50", vec![(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)])
            .points("fail <x>", vec![(0.5, 2.5)])
            .size(600, 300);
        let svg = c.to_svg();
        let l = c.layout();
        assert!(svg.starts_with("<svg "), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains(r#"width="600" height="300""#));
        // The title, escaped, in the <title> and drawn.
        assert!(svg.contains("p99 &lt;latency&gt; &amp; \"QPS\""), "{svg}");
        assert!(!svg.contains("<latency>"));
        assert!(svg.contains("fail &lt;x&gt;"));
        // The line series is one path of three points; the scatter series
        // a marker.
        let path = svg.split("<path d=\"").nth(1).unwrap();
        let d = path.split('"').next().unwrap();
        assert_eq!(d.matches('M').count(), 1, "{d}");
        assert_eq!(d.matches('L').count(), 2, "{d}");
        // Its first point is where the layout puts (0, 1).
        let (x, y) = l.to_pixel(0.0, 1.0).unwrap();
        let first = format!("M{} {}", x.round() + 0.5, y.round() + 0.5);
        assert!(d.starts_with(&first), "{d} vs {first}");
        // The plot frame and every drawn tick label are in it.
        let frame = format!(
            r#"x="{}" y="{}""#,
            l.plot.left as f64 + 0.5,
            l.plot.top as f64 + 0.5
        );
        assert!(svg.contains(&frame), "{svg}");
        for label in l.y_tick_labels() {
            assert!(svg.contains(&format!(">{label}</text>")), "{label}");
        }
        // Opening and closing tags balance.
        assert_eq!(svg.matches("<svg").count(), svg.matches("</svg>").count());
        assert_eq!(svg.matches("<g").count(), svg.matches("</g>").count());
        assert_eq!(svg, c.to_svg(), "the same chart gives the same SVG");
    }

    #[test]
    fn svg_of_an_empty_chart_says_no_data() {
        let svg = Chart::new("", "", "").to_svg();
        assert!(svg.contains(">no data</text>"));
        assert!(!svg.contains("<path"));
        let nan = Chart::new("t", "x", "y")
            .series("s", vec![(f64::NAN, 1.0), (1.0, f64::INFINITY)])
            .to_svg();
        assert!(nan.contains(">no data</text>"));
        assert!(!nan.contains("NaN") && !nan.contains("inf"));
    }
}
