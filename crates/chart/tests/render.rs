//! End-to-end tests through the public API: rendered pixels, PNG bytes and
//! files.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use chart::{Chart, Image, MAX_SIZE, MIN_SIZE, PALETTE, Rect, Scale, Series};

const WHITE: [u8; 3] = [255, 255, 255];

fn decode(bytes: &[u8]) -> (png::OutputInfo, Vec<u8>) {
    let decoder = png::Decoder::new(bytes);
    let mut reader = decoder.read_info().expect("PNG header");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("PNG frame");
    buf.truncate(info.buffer_size());
    (info, buf)
}

/// Pixels of `color` in `img`, as (x, y).
fn pixels_of(img: &Image, color: [u8; 3]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for y in 0..img.height {
        for x in 0..img.width {
            if img.pixel(x, y) == color {
                out.push((x, y));
            }
        }
    }
    out
}

fn count_in(img: &Image, r: Rect, color: [u8; 3]) -> usize {
    let mut n = 0;
    for y in r.top..=r.bottom {
        for x in r.left..=r.right {
            if img.pixel(x, y) == color {
                n += 1;
            }
        }
    }
    n
}

/// A fresh, empty directory for one test.
fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("chart-test-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the test directory");
    dir
}

fn sample() -> Chart {
    Chart::new("CacheBench throughput", "time (s)", "ops/s")
        .series(
            "get",
            (0..100)
                .map(|t| (t as f64, 1000.0 + 30.0 * t as f64))
                .collect(),
        )
        .series(
            "set",
            (0..100)
                .map(|t| (t as f64, 400.0 + (t % 7) as f64 * 50.0))
                .collect(),
        )
}

#[test]
fn png_decodes_with_requested_size_and_rgb() {
    let c = sample().size(640, 360);
    let bytes = c.to_png().unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let (info, data) = decode(&bytes);
    assert_eq!((info.width, info.height), (640, 360));
    assert_eq!(info.color_type, png::ColorType::Rgb);
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    assert_eq!(data, c.render().rgb);

    let (info, _) = decode(&Chart::new("t", "x", "y").to_png().unwrap());
    assert_eq!((info.width, info.height), (900, 500));
}

#[test]
fn horizontal_series_lands_on_its_row_inside_the_frame() {
    let c = Chart::new("flat", "x", "y")
        .series("five", vec![(0.0, 5.0), (10.0, 5.0)])
        .x_range(0.0, 10.0)
        .y_range(0.0, 10.0);
    let l = c.layout();
    let img = c.render();
    let color = PALETTE[0];
    let (_, py) = l.to_pixel(5.0, 5.0).unwrap();
    let row = py.round() as u32;
    // Halfway down the plot area.
    let mid = (l.plot.top + l.plot.bottom) / 2;
    assert!(row.abs_diff(mid) <= 1, "row {row}, plot {:?}", l.plot);
    for x in l.plot.left..=l.plot.right {
        assert_eq!(img.pixel(x, row), color, "x {x}");
    }
    // Nothing of that colour far from the row, or outside the frame except
    // in the legend.
    let legend = l.legend.expect("legend");
    for (x, y) in pixels_of(&img, color) {
        if legend.contains(x, y) {
            continue;
        }
        assert!(l.plot.contains(x, y), "({x}, {y}) outside {:?}", l.plot);
        assert!(y.abs_diff(row) <= 1, "({x}, {y}) not on row {row}");
    }
}

#[test]
fn series_outside_a_fixed_range_is_clipped_to_the_frame() {
    let c = Chart::new("clip", "x", "y")
        .series(
            "wild",
            vec![
                (-50.0, -1e9),
                (5.0, 5.0),
                (50.0, 1e9),
                (5.0, 1e300),
                (-1e300, 3.0),
            ],
        )
        .series(
            "diag",
            (0..=20).map(|i| (i as f64 - 5.0, i as f64 - 5.0)).collect(),
        )
        .x_range(0.0, 10.0)
        .y_range(0.0, 10.0);
    let l = c.layout();
    let img = c.render();
    let legend = l.legend.unwrap();
    for color in [PALETTE[0], PALETTE[1]] {
        let px = pixels_of(&img, color);
        assert!(px.iter().filter(|(x, y)| l.plot.contains(*x, *y)).count() > 50);
        for (x, y) in px {
            assert!(l.plot.contains(x, y) || legend.contains(x, y), "({x}, {y})");
        }
    }
    // The diagonal passes through the centre of the plot area.
    let (cx, cy) = l.to_pixel(5.0, 5.0).unwrap();
    let near = (-1i64..=1).any(|d| {
        img.pixel(cx.round() as u32, (cy.round() as i64 + d) as u32) == PALETTE[1]
            || img.pixel(cx.round() as u32, (cy.round() as i64 + d) as u32) == PALETTE[0]
    });
    assert!(near);
}

#[test]
fn legend_shows_every_series_colour() {
    let mut c = Chart::new("legend", "x", "y");
    for i in 0..8 {
        c = c.series(
            &format!("series {i}"),
            vec![(0.0, i as f64), (1.0, i as f64 + 1.0)],
        );
    }
    let l = c.layout();
    let img = c.render();
    let legend = l.legend.expect("legend");
    assert!(legend.left > l.plot.right);
    for (i, color) in PALETTE.iter().take(8).enumerate() {
        assert!(
            count_in(&img, legend, *color) >= 16,
            "series {i} colour missing from legend"
        );
    }
    // The legend also has text (the names).
    let dark = (legend.top..=legend.bottom)
        .flat_map(|y| (legend.left..=legend.right).map(move |x| (x, y)))
        .filter(|&(x, y)| img.pixel(x, y).iter().all(|&c| c < 100))
        .count();
    assert!(dark > 50);
}

#[test]
fn palette_colours_are_distinct() {
    for (i, a) in PALETTE.iter().enumerate() {
        for b in &PALETTE[i + 1..] {
            let d: i32 = a
                .iter()
                .zip(b)
                .map(|(&x, &y)| (x as i32 - y as i32).abs())
                .sum();
            assert!(d >= 60, "{a:?} vs {b:?}");
        }
        assert_ne!(*a, WHITE);
    }
}

#[test]
fn too_many_series_for_the_legend() {
    let mut c = Chart::new("many", "x", "y").size(400, 200);
    for i in 0..40 {
        c = c.series(&format!("s{i}"), vec![(0.0, i as f64), (1.0, i as f64)]);
    }
    let l = c.layout();
    let legend = l.legend.expect("legend");
    assert!(legend.bottom < l.height);
    assert!(legend.bottom <= l.plot.bottom);
    c.render();
}

#[test]
fn title_is_drawn_in_the_top_band() {
    let c = sample();
    let l = c.layout();
    let img = c.render();
    let t = l.title.expect("title rect");
    assert!(t.bottom < l.plot.top);
    let dark = (t.top..=t.bottom)
        .flat_map(|y| (t.left..=t.right).map(move |x| (x, y)))
        .filter(|&(x, y)| img.pixel(x, y) != WHITE)
        .count();
    assert!(dark > 100, "{dark} dark pixels in the title");
    // Centred.
    let centre = (t.left + t.right) / 2;
    assert!(centre.abs_diff(l.width / 2) <= 2);
    // Title pixels are black.
    assert!(img.pixel(t.left, t.top) == WHITE || img.pixel(t.left, t.top) == [0, 0, 0]);

    // Without title (and y label) the band above the plot stays white.
    let c = Chart::new("", "x", "").series("a", vec![(0.0, 1.0), (1.0, 2.0)]);
    let l = c.layout();
    assert!(l.title.is_none());
    let img = c.render();
    let top_label = (l.plot.top as i64 - 5).max(0) as u32;
    for y in 0..top_label {
        for x in 0..l.width {
            assert_eq!(img.pixel(x, y), WHITE, "({x}, {y})");
        }
    }
    // And the plot moves up.
    assert!(l.plot.top < sample().layout().plot.top);
}

#[test]
fn axis_labels_and_ticks_are_drawn() {
    let c = sample();
    let l = c.layout();
    let img = c.render();
    assert!(l.x_ticks.len() >= 3 && l.y_ticks.len() >= 3, "{l:?}");
    assert_eq!(l.x_tick_labels().len(), l.x_ticks.len());
    // Text left of the frame (y tick labels) and below it (x tick labels and
    // the x label).
    let left_band = Rect {
        left: 0,
        top: l.plot.top,
        right: l.plot.left - 1,
        bottom: l.plot.bottom,
    };
    let below = Rect {
        left: 0,
        top: l.plot.bottom + 1,
        right: l.width - 1,
        bottom: l.height - 1,
    };
    for band in [left_band, below] {
        let dark = (band.top..=band.bottom)
            .flat_map(|y| (band.left..=band.right).map(move |x| (x, y)))
            .filter(|&(x, y)| img.pixel(x, y) != WHITE)
            .count();
        assert!(dark > 50, "{band:?}");
    }
    // The y range covers the data, and the x labels read 0..100-ish.
    let (lo, hi) = l.y_range();
    assert!(lo <= 400.0 && hi >= 1000.0 + 30.0 * 99.0);
    assert_eq!(l.x_tick_labels().first().map(String::as_str), Some("0"));
    assert!(
        l.y_tick_labels().iter().any(|s| s.ends_with('k')),
        "{:?}",
        l.y_tick_labels()
    );
}

#[test]
fn log_axis_spaces_decades_evenly() {
    let c = Chart::new("latency", "t", "us")
        .series(
            "p99",
            vec![
                (0.0, 1.0),
                (1.0, 10.0),
                (2.0, 100.0),
                (3.0, 0.0),
                (4.0, -5.0),
                (5.0, 1000.0),
            ],
        )
        .log_y();
    assert_eq!(c.y_scale, Scale::Log10);
    let l = c.layout();
    assert_eq!(l.y_ticks, vec![1.0, 10.0, 100.0, 1000.0]);
    assert_eq!(l.y_tick_labels(), ["1", "10", "100", "1k"]);
    let rows: Vec<f64> = [1.0, 10.0, 100.0, 1000.0]
        .iter()
        .map(|&v| l.to_pixel(0.0, v).unwrap().1)
        .collect();
    let gaps: Vec<f64> = rows.windows(2).map(|w| w[0] - w[1]).collect();
    assert!(
        gaps.iter().all(|g| (g - gaps[0]).abs() < 1e-6 && *g > 10.0),
        "{gaps:?}"
    );
    assert_eq!(l.to_pixel(0.0, 0.0), None);
    assert_eq!(l.to_pixel(0.0, -1.0), None);
    c.render();
}

#[test]
fn nan_breaks_the_line_and_order_is_kept() {
    let c = Chart::new("gap", "x", "y")
        .series(
            "s",
            vec![
                (0.0, 5.0),
                (1.0, 5.0),
                (2.0, f64::NAN),
                (3.0, 5.0),
                (4.0, 5.0),
            ],
        )
        .x_range(0.0, 4.0)
        .y_range(0.0, 10.0);
    let l = c.layout();
    let img = c.render();
    let at = |x: f64| {
        let (px, py) = l.to_pixel(x, 5.0).unwrap();
        img.pixel(px.round() as u32, py.round() as u32)
    };
    assert_eq!(at(0.5), PALETTE[0]);
    assert_eq!(at(3.5), PALETTE[0]);
    assert_ne!(at(2.0), PALETTE[0]);

    // Unsorted x: drawn in the given order, right to left and back.
    let c = Chart::new("order", "x", "y")
        .series("s", vec![(10.0, 0.0), (0.0, 10.0), (10.0, 10.0)])
        .x_range(0.0, 10.0)
        .y_range(0.0, 10.0);
    let l = c.layout();
    let img = c.render();
    let (px, py) = l.to_pixel(5.0, 5.0).unwrap();
    let hit = (-1i64..=1)
        .any(|d| img.pixel(px.round() as u32, (py.round() as i64 + d) as u32) == PALETTE[0]);
    assert!(hit, "diagonal from (10, 0) to (0, 10) missing");
}

#[test]
fn single_point_is_visible() {
    let c = Chart::new("one", "x", "y").series("only", vec![(3.0, 7.0)]);
    let l = c.layout();
    let img = c.render();
    let (px, py) = l.to_pixel(3.0, 7.0).unwrap();
    assert!(l.plot.contains(px.round() as u32, py.round() as u32));
    assert_eq!(img.pixel(px.round() as u32, py.round() as u32), PALETTE[0]);
    let (x0, x1) = l.x_range();
    let (y0, y1) = l.y_range();
    assert!(x0 < 3.0 && 3.0 < x1 && y0 < 7.0 && 7.0 < y1);
}

#[test]
fn empty_chart_shows_axes_and_a_note() {
    for c in [
        Chart::new("empty", "x", "y"),
        Chart::new("empty", "x", "y").series("nothing", vec![]),
        Chart::new("empty", "x", "y").series("nan", vec![(f64::NAN, 1.0), (1.0, f64::INFINITY)]),
        Chart::new("empty", "x", "y")
            .series("neg", vec![(1.0, -1.0), (2.0, 0.0)])
            .log_y(),
    ] {
        let l = c.layout();
        assert!(!l.has_data);
        let img = c.render();
        // Frame corners drawn.
        assert_ne!(img.pixel(l.plot.left, l.plot.top), WHITE);
        assert_ne!(img.pixel(l.plot.right, l.plot.bottom), WHITE);
        // The note sits in the middle of the plot area.
        let cx = (l.plot.left + l.plot.right) / 2;
        let cy = (l.plot.top + l.plot.bottom) / 2;
        let mid = Rect {
            left: cx - 25,
            top: cy - 6,
            right: cx + 25,
            bottom: cy + 6,
        };
        let grey = (mid.top..=mid.bottom)
            .flat_map(|y| (mid.left..=mid.right).map(move |x| (x, y)))
            .filter(|&(x, y)| img.pixel(x, y) == [110, 110, 110])
            .count();
        assert!(grey > 20, "no note in {mid:?}");
        assert!(!l.y_ticks.is_empty() && !l.x_ticks.is_empty());
    }
    assert!(
        Chart::new("has", "x", "y")
            .series("a", vec![(0.0, 0.0)])
            .layout()
            .has_data
    );
}

#[test]
fn degenerate_inputs_do_not_panic() {
    let big = f64::MAX;
    let tiny = f64::MIN_POSITIVE;
    let mut charts = vec![
        Chart::new("", "", ""),
        Chart::new("equal", "x", "y").series("eq", vec![(1.0, 5.0), (2.0, 5.0), (3.0, 5.0)]),
        Chart::new("zeros", "x", "y").series("z", vec![(0.0, 0.0), (0.0, 0.0)]),
        Chart::new("same x", "x", "y").series("v", vec![(2.0, 1.0), (2.0, 9.0)]),
        Chart::new("huge", "x", "y").series("h", vec![(-big, -big), (big, big), (0.0, 1e308)]),
        Chart::new("tiny", "x", "y")
            .series("t", vec![(0.0, tiny), (1e-310, 2.0 * tiny), (5e-324, 0.0)]),
        Chart::new("tiny log", "x", "y")
            .series("t", vec![(0.0, tiny), (1.0, 5e-324), (2.0, big)])
            .log_y(),
        Chart::new("near equal", "x", "y")
            .series("n", vec![(1e15, 1e15), (1e15 + 1.0, 1e15 + 0.5)]),
        Chart::new("mixed", "x", "y").series(
            "m",
            vec![
                (f64::NAN, f64::NAN),
                (f64::NEG_INFINITY, 1.0),
                (1.0, 2.0),
                (f64::INFINITY, f64::INFINITY),
            ],
        ),
        Chart::new("width 0", "x", "y")
            .series("a", vec![(0.0, 1.0), (1.0, 2.0)])
            .size(0, 0),
        Chart::new("max", "x", "y")
            .series("a", vec![(0.0, 1.0), (1.0, 2.0)])
            .size(u32::MAX, 1),
        Chart::new(
            &"very long title ".repeat(40),
            &"x".repeat(500),
            &"y".repeat(500),
        )
        .series(&"long name ".repeat(30), vec![(0.0, 1.0), (1.0, 2.0)])
        .size(200, 200),
        Chart::new("non-ascii: µs ☃ 日本", "Zeit (µs)", "\t\n").series("ünïcødé", vec![(0.0, 1.0)]),
        Chart::new("bad ranges", "x", "y")
            .series("a", vec![(0.0, 1.0), (1.0, 2.0)])
            .x_range(f64::NAN, f64::INFINITY)
            .y_range(5.0, 5.0),
        Chart::new("reversed", "x", "y")
            .series("a", vec![(0.0, 1.0), (1.0, 2.0)])
            .x_range(10.0, 0.0),
        Chart::new("log range", "x", "y")
            .series("a", vec![(0.0, 3.0), (1.0, 4.0)])
            .y_range(-1.0, 0.0)
            .log_y(),
        Chart::new("log narrow", "x", "y")
            .series("a", vec![(0.0, 3.0), (1.0, 4.0)])
            .y_range(2.0, 8.0)
            .log_y(),
        Chart::new("min only", "x", "y")
            .series("a", vec![(0.0, -3.0), (1.0, -4.0)])
            .y_min(0.0),
    ];
    let mut many = Chart::new("many points", "x", "y");
    many.series.push(Series::new(
        "sine",
        (0..100_000)
            .map(|i| (i as f64, (i as f64 / 1000.0).sin() * 1e6))
            .collect(),
    ));
    charts.push(many);
    for c in &charts {
        let img = c.render();
        assert!((MIN_SIZE..=MAX_SIZE).contains(&img.width), "{}", c.title);
        assert!((MIN_SIZE..=MAX_SIZE).contains(&img.height), "{}", c.title);
        assert_eq!(img.rgb.len(), img.width as usize * img.height as usize * 3);
        let l = c.layout();
        assert!(
            l.plot.left < l.plot.right && l.plot.top < l.plot.bottom,
            "{}: {:?}",
            c.title,
            l.plot
        );
        assert!(
            l.plot.right < l.width && l.plot.bottom < l.height,
            "{}: {:?}",
            c.title,
            l.plot
        );
        for r in [l.legend, l.title].into_iter().flatten() {
            assert!(
                r.right < l.width && r.bottom < l.height,
                "{}: {r:?}",
                c.title
            );
        }
        let (info, _) = decode(&c.to_png().unwrap());
        assert_eq!((info.width, info.height), (img.width, img.height));
    }
    let sized = Chart::new("w0", "x", "y").size(0, 0).render();
    assert_eq!((sized.width, sized.height), (MIN_SIZE, MIN_SIZE));
    let sized = Chart::new("big", "x", "y").size(100_000, 3000).render();
    assert_eq!((sized.width, sized.height), (MAX_SIZE, 3000));
}

#[test]
fn equal_values_get_a_padded_range() {
    let c = Chart::new("equal", "x", "y").series("eq", vec![(1.0, 5.0), (2.0, 5.0), (3.0, 5.0)]);
    let l = c.layout();
    let (lo, hi) = l.y_range();
    assert!(lo < 5.0 && hi > 5.0, "{lo}..{hi}");
    let img = c.render();
    let (px, py) = l.to_pixel(2.0, 5.0).unwrap();
    assert_eq!(img.pixel(px.round() as u32, py.round() as u32), PALETTE[0]);
}

#[test]
fn write_png_is_atomic_and_leaves_no_temp_file() {
    let dir = temp_dir("write");
    let path = dir.join("chart.png");
    sample().write_png(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(bytes, sample().to_png().unwrap());
    // Overwriting replaces the file.
    let other = Chart::new("other", "x", "y");
    other.write_png(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), other.to_png().unwrap());
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["chart.png"]);

    // A missing directory is an error, and nothing is left behind.
    let missing = dir.join("no-such-dir").join("chart.png");
    let err = sample().write_png(&missing).unwrap_err();
    assert!(matches!(err, chart::ChartError::Io { .. }), "{err}");
    assert!(err.to_string().contains("no-such-dir"), "{err}");
    // Writing onto a directory fails, and no temp file is left.
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("keep"), b"x").unwrap();
    assert!(sample().write_png(&sub).is_err());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["chart.png", "sub"]);
    assert!(matches!(
        sample().write_png(std::path::Path::new("")),
        Err(chart::ChartError::InvalidPath(_))
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn output_is_deterministic() {
    let a = sample().to_png().unwrap();
    let b = sample().to_png().unwrap();
    assert_eq!(a, b);
    assert_eq!(sample().clone().render(), sample().render());
    let log = || sample().log_y().size(700, 300).to_png().unwrap();
    assert_eq!(log(), log());
    assert_ne!(a, log());
}
