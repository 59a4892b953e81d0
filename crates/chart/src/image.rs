//! The RGB raster and the drawing primitives (rectangles, clipped thick
//! lines, text).

use crate::ChartError;
use crate::font;

/// A rendered chart: 8-bit RGB pixels, row by row from the top left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub width: u32,
    pub height: u32,
    /// `width * height * 3` bytes, rows top to bottom, pixels left to right.
    pub rgb: Vec<u8>,
}

/// An axis-aligned rectangle of pixels; all four edges are inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    pub left: u32,
    pub top: u32,
    pub right: u32,
    pub bottom: u32,
}

impl Rect {
    /// Whether pixel `(x, y)` lies inside the rectangle (edges included).
    pub fn contains(&self, x: u32, y: u32) -> bool {
        (self.left..=self.right).contains(&x) && (self.top..=self.bottom).contains(&y)
    }

    /// Width in pixels, edges included.
    pub fn width(&self) -> u32 {
        self.right.saturating_sub(self.left) + 1
    }

    /// Height in pixels, edges included.
    pub fn height(&self) -> u32 {
        self.bottom.saturating_sub(self.top) + 1
    }
}

impl Image {
    /// An image filled with `color`.
    pub fn new(width: u32, height: u32, color: [u8; 3]) -> Image {
        let n = width as usize * height as usize;
        let mut rgb = Vec::with_capacity(n * 3);
        for _ in 0..n {
            rgb.extend_from_slice(&color);
        }
        Image { width, height, rgb }
    }

    /// The colour at `(x, y)`, or `None` outside the image.
    pub fn get(&self, x: u32, y: u32) -> Option<[u8; 3]> {
        if x >= self.width || y >= self.height {
            return None;
        }
        let i = (y as usize * self.width as usize + x as usize) * 3;
        let p = self.rgb.get(i..i + 3)?;
        Some([p[0], p[1], p[2]])
    }

    /// The colour at `(x, y)`.
    ///
    /// # Panics
    /// If `(x, y)` is outside the image (use [`Image::get`] to avoid that).
    pub fn pixel(&self, x: u32, y: u32) -> [u8; 3] {
        match self.get(x, y) {
            Some(p) => p,
            None => panic!(
                "pixel ({x}, {y}) outside a {}x{} image",
                self.width, self.height
            ),
        }
    }

    /// Encode as an 8-bit RGB PNG.
    pub fn to_png(&self) -> Result<Vec<u8>, ChartError> {
        let mut out = Vec::new();
        {
            let mut encoder = png::Encoder::new(&mut out, self.width, self.height);
            encoder.set_color(png::ColorType::Rgb);
            encoder.set_depth(png::BitDepth::Eight);
            encoder.set_compression(png::Compression::Default);
            let mut writer = encoder.write_header()?;
            writer.write_image_data(&self.rgb)?;
            writer.finish()?;
        }
        Ok(out)
    }

    /// Set one pixel; anything outside the image is ignored.
    pub(crate) fn set(&mut self, x: i64, y: i64, color: [u8; 3]) {
        if x < 0 || y < 0 || x >= self.width as i64 || y >= self.height as i64 {
            return;
        }
        let i = (y as usize * self.width as usize + x as usize) * 3;
        if let Some(p) = self.rgb.get_mut(i..i + 3) {
            p.copy_from_slice(&color);
        }
    }

    /// Fill the rectangle with corners `(x0, y0)` and `(x1, y1)` (inclusive).
    pub(crate) fn fill(&mut self, x0: i64, y0: i64, x1: i64, y1: i64, color: [u8; 3]) {
        let x0 = x0.max(0);
        let y0 = y0.max(0);
        let x1 = x1.min(self.width as i64 - 1);
        let y1 = y1.min(self.height as i64 - 1);
        for y in y0..=y1 {
            for x in x0..=x1 {
                self.set(x, y, color);
            }
        }
    }

    /// A one-pixel outline of `r`.
    pub(crate) fn outline(&mut self, r: Rect, color: [u8; 3]) {
        let (l, t, rt, b) = (r.left as i64, r.top as i64, r.right as i64, r.bottom as i64);
        self.fill(l, t, rt, t, color);
        self.fill(l, b, rt, b, color);
        self.fill(l, t, l, b, color);
        self.fill(rt, t, rt, b, color);
    }

    /// Draw `text` with its top-left corner at `(x, y)`, `scale` times the
    /// font size. Pixels outside the image are dropped.
    pub(crate) fn text(&mut self, x: i64, y: i64, text: &str, scale: u32, color: [u8; 3]) {
        let s = scale.max(1) as i64;
        let mut cx = x;
        for c in text.chars() {
            if cx >= self.width as i64 {
                break;
            }
            let glyph = font::glyph(c);
            let drop = if font::descends(c) {
                font::DESCENT as i64
            } else {
                0
            };
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..font::GLYPH_W as i64 {
                    if bits & (1 << (font::GLYPH_W as i64 - 1 - col)) != 0 {
                        let px = cx + col * s;
                        let py = y + (row as i64 + drop) * s;
                        self.fill(px, py, px + s - 1, py + s - 1, color);
                    }
                }
            }
            cx += font::CELL_W as i64 * s;
        }
    }

    /// A line from `a` to `b` (pixel coordinates, may lie far outside),
    /// clipped to `clip`, two pixels thick.
    pub(crate) fn line(&mut self, a: (f64, f64), b: (f64, f64), clip: Rect, color: [u8; 3]) {
        let Some((a, b)) = clip_segment(a, b, clip) else {
            return;
        };
        let (mut x, mut y) = (a.0.round() as i64, a.1.round() as i64);
        let (x1, y1) = (b.0.round() as i64, b.1.round() as i64);
        let dx = (x1 - x).abs();
        let dy = -(y1 - y).abs();
        let sx = if x < x1 { 1 } else { -1 };
        let sy = if y < y1 { 1 } else { -1 };
        // Thicken across the main direction of the line.
        let (tx, ty) = if dx >= -dy { (0, 1) } else { (1, 0) };
        let mut err = dx + dy;
        loop {
            self.set_clipped(x, y, clip, color);
            self.set_clipped(x + tx, y + ty, clip, color);
            if x == x1 && y == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// A filled square marker of side `2 * r + 1` around `c`, clipped.
    pub(crate) fn marker(&mut self, c: (f64, f64), r: i64, clip: Rect, color: [u8; 3]) {
        let inside = |v: f64, lo: u32, hi: u32| v >= lo as f64 - 0.5 && v <= hi as f64 + 0.5;
        if !(inside(c.0, clip.left, clip.right) && inside(c.1, clip.top, clip.bottom)) {
            return;
        }
        let (x, y) = (c.0.round() as i64, c.1.round() as i64);
        for py in y - r..=y + r {
            for px in x - r..=x + r {
                self.set_clipped(px, py, clip, color);
            }
        }
    }

    fn set_clipped(&mut self, x: i64, y: i64, clip: Rect, color: [u8; 3]) {
        if x >= clip.left as i64
            && x <= clip.right as i64
            && y >= clip.top as i64
            && y <= clip.bottom as i64
        {
            self.set(x, y, color);
        }
    }
}

/// Liang-Barsky: the part of segment `a`-`b` inside `r`, if any.
fn clip_segment(a: (f64, f64), b: (f64, f64), r: Rect) -> Option<((f64, f64), (f64, f64))> {
    if ![a.0, a.1, b.0, b.1].iter().all(|v| v.is_finite()) {
        return None;
    }
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let mut t0 = 0.0f64;
    let mut t1 = 1.0f64;
    let edges = [
        (-dx, a.0 - r.left as f64),
        (dx, r.right as f64 - a.0),
        (-dy, a.1 - r.top as f64),
        (dy, r.bottom as f64 - a.1),
    ];
    for (p, q) in edges {
        if p == 0.0 {
            if q < 0.0 {
                return None;
            }
        } else {
            let t = q / p;
            if p < 0.0 {
                t0 = t0.max(t);
            } else {
                t1 = t1.min(t);
            }
        }
    }
    if t0 > t1 || !t0.is_finite() || !t1.is_finite() {
        return None;
    }
    let at = |t: f64| {
        (
            (a.0 + t * dx).clamp(r.left as f64, r.right as f64),
            (a.1 + t * dy).clamp(r.top as f64, r.bottom as f64),
        )
    };
    Some((at(t0), at(t1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RED: [u8; 3] = [255, 0, 0];
    const WHITE: [u8; 3] = [255, 255, 255];

    fn count(img: &Image, color: [u8; 3]) -> usize {
        img.rgb.chunks(3).filter(|p| *p == color).count()
    }

    #[test]
    fn lines_are_clipped() {
        let mut img = Image::new(50, 50, WHITE);
        let clip = Rect {
            left: 10,
            top: 10,
            right: 39,
            bottom: 39,
        };
        img.line((-1e12, 25.0), (1e12, 25.0), clip, RED);
        for x in 0..50 {
            assert_eq!(img.pixel(x, 25) == RED, clip.contains(x, 25), "x {x}");
        }
        img.line((0.0, 0.0), (49.0, 49.0), clip, RED);
        for y in 0..50 {
            for x in 0..50 {
                if img.pixel(x, y) == RED {
                    assert!(clip.contains(x, y), "({x}, {y})");
                }
            }
        }
        assert_eq!(img.pixel(20, 20), RED);
        let before = img.clone();
        img.line((0.0, 0.0), (5.0, 49.0), clip, RED);
        img.line((f64::NAN, 0.0), (20.0, 20.0), clip, RED);
        assert_eq!(img, before);
    }

    #[test]
    fn steep_and_flat_lines_are_two_pixels_thick() {
        let clip = Rect {
            left: 0,
            top: 0,
            right: 99,
            bottom: 99,
        };
        let mut img = Image::new(100, 100, WHITE);
        img.line((10.0, 50.0), (89.0, 50.0), clip, RED);
        assert_eq!(count(&img, RED), 80 * 2);
        let mut img = Image::new(100, 100, WHITE);
        img.line((50.0, 10.0), (50.0, 89.0), clip, RED);
        assert_eq!(count(&img, RED), 80 * 2);
        let mut img = Image::new(100, 100, WHITE);
        img.line((30.0, 30.0), (30.0, 30.0), clip, RED);
        assert_eq!(count(&img, RED), 2);
    }

    #[test]
    fn text_and_pixels() {
        let mut img = Image::new(40, 20, WHITE);
        img.text(1, 1, "Hi", 1, RED);
        assert!(count(&img, RED) > 0);
        // 'H' has its full left column set.
        for y in 1..8 {
            assert_eq!(img.pixel(1, y), RED);
        }
        // Text running off the image is cut, not a panic.
        img.text(35, 15, "overflowing", 2, RED);
        img.text(-100, -100, "x", 3, RED);
        assert_eq!(img.get(40, 0), None);
        assert_eq!(img.get(0, 20), None);
    }

    #[test]
    #[should_panic(expected = "outside")]
    fn pixel_outside_panics() {
        Image::new(2, 2, WHITE).pixel(2, 0);
    }
}
