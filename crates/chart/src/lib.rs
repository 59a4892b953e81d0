//! A small, dependable line-chart renderer that writes PNG files itself, for
//! benchmark reports (throughput, hit ratios, latency percentiles over time)
//! without gnuplot or Python.
//!
//! ```no_run
//! use chart::Chart;
//!
//! let p50: Vec<(f64, f64)> = (0..60).map(|t| (t as f64, 80.0 + t as f64)).collect();
//! let p99: Vec<(f64, f64)> = (0..60).map(|t| (t as f64, 900.0 + 10.0 * t as f64)).collect();
//! Chart::new("NVM read latency", "time (s)", "latency (us)")
//!     .series("p50", p50)
//!     .series("p99", p99)
//!     .log_y()
//!     .write_png(std::path::Path::new("nvm_read_latency.png"))?;
//! # Ok::<(), chart::ChartError>(())
//! ```
//!
//! What is drawn: a white background; the title centred on top at twice the
//! font size; the y-axis label horizontally above the top-left corner of the
//! plot area and the x-axis label centred below it; a framed plot area with
//! light grid lines, tick marks and compact tick labels (`0.25`, `1.5k`,
//! `2M`, `1e-3`) at 1/2/5 x 10^k steps, or at powers of ten on a
//! logarithmic y axis; each series as a 2-pixel polyline in its own colour
//! from [`PALETTE`] (points in the order given), or as unjoined square
//! markers for a [`Style::Points`] series ([`Chart::points`]); and a legend
//! to the right of the plot area.
//!
//! [`Chart::to_text`] draws the chart in monospace text (each point a
//! marker character in its cell), for terminals and plain-text reports.
//!
//! [`Chart::to_svg`] draws the same layout as an SVG document (text in the
//! viewer's monospace font, stretched to the bitmap font's widths), for
//! embedding in HTML pages.
//!
//! Rendering never panics: points with NaN or infinite coordinates (and with
//! y <= 0 on a log axis) break the line and are not drawn, isolated points
//! are drawn as small squares, a chart without drawable points shows its
//! axes and a "no data" note, equal values get a padded range, values are
//! clamped to +-1e300, and the image size is clamped to
//! [`MIN_SIZE`]..=[`MAX_SIZE`]. The same chart always gives the same bytes.
//!
//! Text uses a built-in 5x7 pixel font covering printable ASCII (plus `µ`);
//! other characters are drawn as `?`.
//!
//! # Why our own and not plotters
//!
//! Measured on the project's 2-core Debian 12 machine (2026-11-25), drawing
//! the same 900x500 chart (3 series of 300 points, title, axis labels,
//! legend) with this crate and with plotters 0.3.7 (`bitmap_backend`,
//! `bitmap_encoder`, `line_series`, and `ttf` or `ab_glyph` for text;
//! without one of those plotters draws no text at all), release builds:
//!
//! | | this crate | plotters + `ttf` | plotters + `ab_glyph` |
//! |---|---|---|---|
//! | clean build, user CPU | 15-16 s | 30-32 s | 27-28 s |
//! | crates new to the workspace | 0 | 18 | 10 |
//! | stripped binary | 597 KB | 894 KB | 1,688 KB (760 KB of it the font) |
//! | system packages | none | build: pkg-config, libfontconfig1-dev (the build fails without them), libfreetype-dev; run: fontconfig, freetype and an installed font | none, but a TTF file must be shipped in the binary |
//!
//! plotters' text is anti-aliased and nicer to look at; its lines are as
//! jagged as ours, and with its defaults the charts needed more code (tick
//! labels like `900.0`, a dense minor grid, the legend over the data). A
//! project whose promise is a clean build on a fresh machine keeps this
//! crate: half the build time, no C libraries, no font files. Rendering
//! time decides nothing (under 20 ms a chart either way).

pub mod bars;
mod font;
mod image;
mod layout;
mod svg;
mod text;
pub mod ticks;

use std::io::Write;
use std::path::{Path, PathBuf};

pub use bars::{Bar, BarChart, sparkline};
pub use image::{Image, Rect};
pub use layout::Layout;
pub use text::{MAX_TEXT, MIN_TEXT};

/// The smallest width or height of a rendered chart, in pixels.
pub const MIN_SIZE: u32 = 200;
/// The largest width or height of a rendered chart, in pixels.
pub const MAX_SIZE: u32 = 4000;

/// Series colours, in order; the n-th series gets `PALETTE[n % 10]`.
pub const PALETTE: [[u8; 3]; 10] = [
    [31, 119, 180],  // blue
    [255, 127, 14],  // orange
    [44, 160, 44],   // green
    [214, 39, 40],   // red
    [148, 103, 189], // purple
    [140, 86, 75],   // brown
    [227, 119, 194], // pink
    [127, 127, 127], // grey
    [188, 189, 34],  // olive
    [23, 190, 207],  // cyan
];

const WHITE: [u8; 3] = [255, 255, 255];
const TITLE: [u8; 3] = [0, 0, 0];
const TEXT: [u8; 3] = [40, 40, 40];
const FRAME: [u8; 3] = [30, 30, 30];
const GRID: [u8; 3] = [228, 228, 228];
const GRID_MINOR: [u8; 3] = [242, 242, 242];
const LEGEND_FRAME: [u8; 3] = [170, 170, 170];
const NOTE: [u8; 3] = [110, 110, 110];

/// One line of the chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Shown in the legend.
    pub name: String,
    /// `(x, y)` points, joined in this order.
    pub points: Vec<(f64, f64)>,
    /// A line through the points, or the points alone.
    pub style: Style,
    /// The character that marks each point in [`Chart::to_text`] (`None`:
    /// `*` for a line, `o` for points).
    pub mark: Option<char>,
    /// Its colour (`None`: the [`PALETTE`] colour of its position).
    pub color: Option<[u8; 3]>,
}

impl Series {
    pub fn new(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.to_string(),
            points,
            style: Style::Line,
            mark: None,
            color: None,
        }
    }
}

/// How a series is drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Style {
    /// A polyline through the points in order (isolated points as squares).
    #[default]
    Line,
    /// Each point as a marker, unjoined (a scatter plot).
    Points,
}

/// The scale of the y axis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scale {
    #[default]
    Linear,
    /// Logarithmic; points with y <= 0 are not drawn.
    Log10,
}

/// Why a chart could not be encoded or written.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("PNG encoding failed: {0}")]
    Encode(#[from] png::EncodingError),
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("not a file path: {}", .0.display())]
    InvalidPath(PathBuf),
}

/// A line chart. Build it with [`Chart::new`] and the builder methods, or
/// set the fields directly.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    pub y_scale: Scale,
    /// Image width in pixels, clamped to [`MIN_SIZE`]..=[`MAX_SIZE`] when drawn.
    pub width: u32,
    /// Image height in pixels, clamped to [`MIN_SIZE`]..=[`MAX_SIZE`] when drawn.
    pub height: u32,
    /// Fixed low end of the x axis (`None`: from the data, rounded to a tick).
    pub x_min: Option<f64>,
    /// Fixed high end of the x axis.
    pub x_max: Option<f64>,
    /// Fixed low end of the y axis (must be > 0 on a log axis to count).
    pub y_min: Option<f64>,
    /// Fixed high end of the y axis.
    pub y_max: Option<f64>,
    /// The x values are whole numbers (a run or probe number): ticks only
    /// at whole numbers.
    pub x_integer: bool,
}

impl Chart {
    /// A 900x500 chart with a linear y axis and no series.
    pub fn new(title: &str, x_label: &str, y_label: &str) -> Chart {
        Chart {
            title: title.to_string(),
            x_label: x_label.to_string(),
            y_label: y_label.to_string(),
            series: Vec::new(),
            y_scale: Scale::Linear,
            width: 900,
            height: 500,
            x_min: None,
            x_max: None,
            y_min: None,
            y_max: None,
            x_integer: false,
        }
    }

    /// Add a series.
    pub fn series(mut self, name: &str, points: Vec<(f64, f64)>) -> Chart {
        self.series.push(Series::new(name, points));
        self
    }

    /// Add a series drawn as unjoined markers (a scatter plot).
    pub fn points(mut self, name: &str, points: Vec<(f64, f64)>) -> Chart {
        let mut s = Series::new(name, points);
        s.style = Style::Points;
        self.series.push(s);
        self
    }

    /// Mark the last added series with `ch` in [`Chart::to_text`].
    pub fn mark(mut self, ch: char) -> Chart {
        if let Some(s) = self.series.last_mut() {
            s.mark = Some(ch);
        }
        self
    }

    /// Draw the last added series in `color` instead of its palette colour
    /// (e.g. red for failures, whatever their position).
    pub fn color(mut self, color: [u8; 3]) -> Chart {
        if let Some(s) = self.series.last_mut() {
            s.color = Some(color);
        }
        self
    }

    /// The colour series `i` is drawn in.
    pub fn series_color(&self, i: usize) -> [u8; 3] {
        self.series
            .get(i)
            .and_then(|s| s.color)
            .unwrap_or(PALETTE[i % PALETTE.len()])
    }

    /// The x values are whole numbers: tick the x axis at whole numbers
    /// only (never `0.5`).
    pub fn integer_x(mut self) -> Chart {
        self.x_integer = true;
        self
    }

    /// Use a logarithmic y axis.
    pub fn log_y(mut self) -> Chart {
        self.y_scale = Scale::Log10;
        self
    }

    /// Set the image size (clamped when drawn).
    pub fn size(mut self, width: u32, height: u32) -> Chart {
        self.width = width;
        self.height = height;
        self
    }

    /// Fix the x range instead of deriving it from the data.
    pub fn x_range(mut self, lo: f64, hi: f64) -> Chart {
        self.x_min = Some(lo);
        self.x_max = Some(hi);
        self
    }

    /// Fix the y range instead of deriving it from the data.
    pub fn y_range(mut self, lo: f64, hi: f64) -> Chart {
        self.y_min = Some(lo);
        self.y_max = Some(hi);
        self
    }

    /// Fix only the low end of the y axis (e.g. 0 for throughput).
    pub fn y_min(mut self, lo: f64) -> Chart {
        self.y_min = Some(lo);
        self
    }

    /// The points of series `i` as they are drawn: those a chart can show
    /// (finite, and y > 0 on a log axis), clamped as drawn.
    pub fn drawable(&self, i: usize) -> impl Iterator<Item = (f64, f64)> + '_ {
        let log = self.y_scale == Scale::Log10;
        self.series
            .get(i)
            .into_iter()
            .flat_map(|s| &s.points)
            .filter_map(move |p| layout::clean(*p, log))
    }

    /// Where [`Chart::render`] puts things.
    pub fn layout(&self) -> Layout {
        Layout::compute(self)
    }

    /// Draw the chart.
    pub fn render(&self) -> Image {
        let l = self.layout();
        let mut img = Image::new(l.width, l.height, WHITE);
        let p = l.plot;
        let (pl, pt, pr, pb) = (p.left as i64, p.top as i64, p.right as i64, p.bottom as i64);
        let text_h = font::text_height(1) as i64;

        // Grid lines, then the frame over them.
        for &v in &l.y.minor {
            if let Some(y) = l.row(v) {
                img.fill(pl, y, pr, y, GRID_MINOR);
            }
        }
        for &v in &l.y.major {
            if let Some(y) = l.row(v) {
                img.fill(pl, y, pr, y, GRID);
            }
        }
        for &v in &l.x.major {
            if let Some(x) = l.column(v) {
                img.fill(x, pt, x, pb, GRID);
            }
        }
        img.outline(p, FRAME);

        // Y ticks and labels, right-aligned left of the frame.
        for &v in &l.y.minor {
            if let Some(y) = l.row(v) {
                img.fill(pl - layout::TICK / 2 - 1, y, pl - 1, y, FRAME);
            }
        }
        let mut last_label_top = i64::MAX;
        for (v, label) in l.y.major.iter().zip(&l.y.labels) {
            let Some(y) = l.row(*v) else {
                continue;
            };
            img.fill(pl - layout::TICK, y, pl - 1, y, FRAME);
            let top = y - text_h / 2;
            if top + text_h + 2 > last_label_top {
                continue;
            }
            let tw = font::text_width(label, 1) as i64;
            img.text(
                pl - layout::TICK - layout::LABEL_GAP - tw,
                top,
                label,
                1,
                TEXT,
            );
            last_label_top = top;
        }

        // X ticks and labels, centred below the frame, skipping overlaps.
        let mut last_label_right = i64::MIN;
        for (v, label) in l.x.major.iter().zip(&l.x.labels) {
            let Some(x) = l.column(*v) else {
                continue;
            };
            img.fill(x, pb + 1, x, pb + layout::TICK, FRAME);
            let tw = font::text_width(label, 1) as i64;
            let left = (x - tw / 2).max(0);
            if left < last_label_right + 8 || left + tw > l.width as i64 {
                continue;
            }
            img.text(left, pb + layout::TICK + layout::LABEL_GAP, label, 1, TEXT);
            last_label_right = left + tw;
        }

        // Title and axis labels.
        if let Some(t) = &l.title_text {
            img.text(t.x, t.y, &t.text, 2, TITLE);
        }
        for t in [&l.x_label, &l.y_label].into_iter().flatten() {
            img.text(t.x, t.y, &t.text, 1, TEXT);
        }

        // The series, clipped to the plot area (frame included).
        let log = self.y_scale == Scale::Log10;
        for (i, s) in self.series.iter().enumerate() {
            let color = self.series_color(i);
            let pixels: Vec<Option<(f64, f64)>> = s
                .points
                .iter()
                .map(|&pt| {
                    let (x, y) = layout::clean(pt, log)?;
                    l.to_pixel(x, y)
                })
                .collect();
            for (j, cur) in pixels.iter().enumerate() {
                let Some(cur) = *cur else { continue };
                if s.style == Style::Points {
                    img.marker(cur, 3, p, color);
                    continue;
                }
                let prev = j.checked_sub(1).and_then(|k| pixels[k]);
                let next = pixels.get(j + 1).copied().flatten();
                match prev {
                    Some(prev) => img.line(prev, cur, p, color),
                    None if next.is_none() => img.marker(cur, 2, p, color),
                    None => {}
                }
            }
        }

        if !l.has_data {
            let note = "no data";
            let tw = font::text_width(note, 1) as i64;
            let (x, y) = ((pl + pr - tw) / 2, (pt + pb - text_h) / 2);
            img.fill(x - 4, y - 3, x + tw + 3, y + text_h + 2, WHITE);
            img.text(x, y, note, 1, NOTE);
        }

        // Legend.
        if let Some(r) = l.legend {
            img.fill(
                r.left as i64,
                r.top as i64,
                r.right as i64,
                r.bottom as i64,
                WHITE,
            );
            img.outline(r, LEGEND_FRAME);
            let x = r.left as i64 + layout::LEGEND_PAD;
            let mut y = r.top as i64 + layout::LEGEND_PAD;
            for (i, name) in &l.legend_rows {
                let color = self.series_color(*i);
                img.fill(x, y + 2, x + layout::SWATCH - 1, y + 4, color);
                img.text(x + layout::SWATCH + layout::LEGEND_PAD, y, name, 1, TEXT);
                y += layout::LEGEND_ROW;
            }
            if l.legend_more > 0 {
                img.text(x, y, &format!("+{} more", l.legend_more), 1, NOTE);
            }
        }
        img
    }

    /// The chart as PNG bytes (8-bit RGB).
    pub fn to_png(&self) -> Result<Vec<u8>, ChartError> {
        self.render().to_png()
    }

    /// Write the chart as a PNG file, atomically: the bytes go to a
    /// temporary file in the same directory, which is then renamed over
    /// `path`. On failure the temporary file is removed and `path` is left
    /// as it was.
    pub fn write_png(&self, path: &Path) -> Result<(), ChartError> {
        let bytes = self.to_png()?;
        write_atomic(path, &bytes)
    }
}

impl Layout {
    /// The pixel column of `x` when it is inside the plot area.
    fn column(&self, x: f64) -> Option<i64> {
        let t = self.x.frac(x)?;
        let p = self.plot;
        let px = p.left as f64 + t * p.right.saturating_sub(p.left) as f64;
        (px >= p.left as f64 - 0.5 && px <= p.right as f64 + 0.5).then(|| px.round() as i64)
    }

    /// The pixel row of `y` when it is inside the plot area.
    fn row(&self, y: f64) -> Option<i64> {
        let t = self.y.frac(y)?;
        let p = self.plot;
        let py = p.bottom as f64 - t * p.bottom.saturating_sub(p.top) as f64;
        (py >= p.top as f64 - 0.5 && py <= p.bottom as f64 + 0.5).then(|| py.round() as i64)
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ChartError> {
    if path.file_name().is_none() {
        return Err(ChartError::InvalidPath(path.to_path_buf()));
    }
    let io = |source| ChartError::Io {
        path: path.to_path_buf(),
        source,
    };
    // A failed rename would leave atomic-write-file's temporary file
    // behind; a directory in the way is the one failure known in advance.
    if path.is_dir() {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::IsADirectory,
            "is a directory",
        )));
    }
    let mut file = atomic_write_file::AtomicWriteFile::open(path).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.commit().map_err(io)
}
