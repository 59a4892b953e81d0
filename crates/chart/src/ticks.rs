//! Axis ticks: "nice" linear steps (1, 2 or 5 times a power of ten), powers
//! of ten for logarithmic axes, and compact tick labels (`1.5k`, `2M`,
//! `0.25`, `1e-3`).

/// Ticks of a linear axis.
#[derive(Clone, Debug, PartialEq)]
pub struct Ticks {
    /// Distance between neighbouring ticks (1, 2 or 5 times a power of ten).
    pub step: f64,
    /// Tick positions, ascending, each a whole multiple of `step`.
    pub values: Vec<f64>,
}

/// `10^k`, correctly rounded (so `pow10(-3) == 0.001`).
pub fn pow10(k: i32) -> f64 {
    format!("1e{k}").parse().unwrap_or(f64::NAN)
}

/// The smallest "nice" number (1, 2 or 5 times a power of ten) that is at
/// least `raw`. Returns 1 for non-positive or non-finite input.
pub fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let mut exp = raw.log10().floor() as i32;
    // log10 may be off by one ulp around exact powers of ten.
    if raw / pow10(exp) >= 10.0 {
        exp += 1;
    } else if raw / pow10(exp) < 1.0 {
        exp -= 1;
    }
    let fraction = raw / pow10(exp);
    const SLACK: f64 = 1e-9;
    let (mantissa, exp) = if fraction <= 1.0 + SLACK {
        (1, exp)
    } else if fraction <= 2.0 + SLACK {
        (2, exp)
    } else if fraction <= 5.0 + SLACK {
        (5, exp)
    } else {
        (1, exp + 1)
    };
    let step: f64 = format!("{mantissa}e{exp}").parse().unwrap_or(f64::NAN);
    if step.is_finite() && step > 0.0 {
        step
    } else {
        1.0
    }
}

/// Nice ticks inside `[lo, hi]`: the step (1, 2 or 5 times a power of ten)
/// whose number of ticks in the range is closest to `target` (at least 2;
/// on a tie the larger step). Empty if the range is empty or not finite.
pub fn linear(lo: f64, hi: f64, target: usize) -> Ticks {
    let empty = Ticks {
        step: 1.0,
        values: Vec::new(),
    };
    if !(lo.is_finite() && hi.is_finite() && lo < hi) {
        return empty;
    }
    let target = target.max(2) as f64;
    // Halved first so that the span of e.g. -MAX..MAX does not overflow.
    let raw = (hi * 0.5 - lo * 0.5) / (target - 1.0) * 2.0;
    if !(raw.is_finite() && raw > 0.0) {
        return empty;
    }
    let exp = raw.log10().floor() as i32;
    let mut best: Option<(f64, f64)> = None; // (distance from target, step)
    for k in exp - 1..=exp + 1 {
        for m in [1, 2, 5] {
            let step: f64 = format!("{m}e{k}").parse().unwrap_or(f64::NAN);
            if !(step.is_finite() && step > 0.0) {
                continue;
            }
            let count = (hi / step + 1e-9).floor() - (lo / step - 1e-9).ceil() + 1.0;
            let distance = (count - target).abs();
            if best.is_none_or(|(d, _)| distance <= d) {
                best = Some((distance, step));
            }
        }
    }
    let Some((_, step)) = best else {
        return empty;
    };
    Ticks {
        step,
        values: multiples(lo, hi, step),
    }
}

/// The whole multiples of `step` inside `[lo, hi]`, ascending (empty when
/// there would be more than 10 000 of them, or for a bad step).
pub fn multiples(lo: f64, hi: f64, step: f64) -> Vec<f64> {
    if !(step.is_finite() && step > 0.0) {
        return Vec::new();
    }
    let first = (lo / step - 1e-9).ceil();
    let last = (hi / step + 1e-9).floor();
    if !(first.is_finite() && last.is_finite()) || last - first > 10_000.0 {
        return Vec::new();
    }
    let mut values: Vec<f64> = Vec::new();
    let mut i = first;
    while i <= last {
        let v = i * step;
        let v = if v.abs() < step * 1e-9 { 0.0 } else { v };
        if values.last() != Some(&v) {
            values.push(v);
        }
        i += 1.0;
    }
    values
}

/// Powers of ten inside `[lo, hi]` (both > 0) for a logarithmic axis; when
/// there would be more than `max_ticks` of them, every k-th power (aligned on
/// multiples of k in the exponent, so 1 is kept when it is in range).
pub fn log(lo: f64, hi: f64, max_ticks: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite() && lo > 0.0 && lo <= hi) {
        return Vec::new();
    }
    let first = (lo.log10() - 1e-9).ceil() as i32;
    let last = (hi.log10() + 1e-9).floor() as i32;
    if first > last {
        return Vec::new();
    }
    let count = (last - first + 1) as usize;
    let stride = count.div_ceil(max_ticks.max(1)).max(1) as i32;
    let start = first.div_euclid(stride) * stride
        + if first.rem_euclid(stride) == 0 {
            0
        } else {
            stride
        };
    (start..=last)
        .step_by(stride as usize)
        .map(pow10)
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect()
}

/// Labels for the ticks of one linear axis: scientific notation for the
/// whole axis when its values are tiny (below 0.01) or huge (1e18 and up),
/// otherwise decimals with `k`/`M`/`G`/`T`/`P` suffixes from 1000 on.
pub fn format_linear(values: &[f64], step: f64) -> Vec<String> {
    let max_abs = values
        .iter()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let sci = max_abs > 0.0 && !(1e-2..1e18).contains(&max_abs);
    values.iter().map(|&v| format_value(v, step, sci)).collect()
}

/// A compact label for `v` on an axis whose ticks are `step` apart:
/// `0`, `0.25`, `15`, `1.5k`, `2M`, `1e-3`, `2.5e20`. Scientific notation
/// is used below 0.01 and from 1e18 on.
pub fn format_tick(v: f64, step: f64) -> String {
    let a = v.abs();
    format_value(v, step, a > 0.0 && !(1e-2..1e18).contains(&a))
}

fn format_value(v: f64, step: f64, sci: bool) -> String {
    if !v.is_finite() {
        return "?".to_string();
    }
    let a = v.abs();
    let step = if step.is_finite() && step > 0.0 {
        step
    } else {
        a
    };
    if a == 0.0 || a < step * 1e-6 {
        return "0".to_string();
    }
    if sci {
        return format_sci(v, step);
    }
    const UNITS: [(f64, &str); 5] = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    for (unit, suffix) in UNITS {
        if a >= unit {
            let d = decimals(step / unit);
            return format!("{}{suffix}", trim(format!("{:.*}", d, v / unit)));
        }
    }
    trim(format!("{:.*}", decimals(step), v))
}

fn format_sci(v: f64, step: f64) -> String {
    let a = v.abs();
    let mut exp = a.log10().floor() as i32;
    if a / pow10(exp) >= 10.0 {
        exp += 1;
    } else if a / pow10(exp) < 1.0 {
        exp -= 1;
    }
    let d = decimals(step / pow10(exp));
    let mut mantissa = trim(format!("{:.*}", d, v / pow10(exp)));
    if mantissa.trim_start_matches('-').starts_with("10") {
        // Rounding carried into the next power (9.99 -> 10).
        exp += 1;
        mantissa = trim(format!("{:.*}", d, v / pow10(exp)));
    }
    format!("{mantissa}e{exp}")
}

/// How many decimals are needed to write multiples of `step` (at most 12).
fn decimals(step: f64) -> usize {
    if !(step.is_finite() && step > 0.0) {
        return 0;
    }
    let mut scaled = step;
    for d in 0..12 {
        if (scaled - scaled.round()).abs() <= scaled * 1e-6 {
            return d;
        }
        scaled *= 10.0;
    }
    12
}

/// Remove trailing zeros after a decimal point (and the point), and the
/// sign of a negative zero.
fn trim(mut s: String) -> String {
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".to_string();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(1.0), 1.0);
        assert_eq!(nice_step(1.2), 2.0);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(7.0), 10.0);
        assert_eq!(nice_step(10.0), 10.0);
        assert_eq!(nice_step(12.1), 20.0);
        assert_eq!(nice_step(0.0004), 0.0005);
        assert_eq!(nice_step(0.00011), 0.0002);
        assert_eq!(nice_step(1000.0), 1000.0);
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(nice_step(f64::NAN), 1.0);
        assert_eq!(nice_step(-3.0), 1.0);
        assert_eq!(nice_step(4e299), 5e299);
    }

    #[test]
    fn linear_0_to_97() {
        for target in [5, 6, 8, 10, 11] {
            let t = linear(0.0, 97.0, target);
            assert!(t.step == 10.0 || t.step == 20.0, "target {target}: {t:?}");
            assert!(
                t.values.len().abs_diff(target) <= 2,
                "target {target}: {t:?}"
            );
            assert_eq!(t.values[0], 0.0);
            assert!(
                t.values
                    .windows(2)
                    .all(|w| (w[1] - w[0] - t.step).abs() < 1e-9)
            );
            assert!(*t.values.last().unwrap() <= 97.0);
        }
        assert_eq!(
            linear(0.0, 97.0, 11).values,
            vec![0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0]
        );
    }

    #[test]
    fn linear_small_values() {
        for target in [5, 8, 10] {
            let t = linear(0.001, 0.0042, target);
            assert!(
                t.step == 0.0005 || t.step == 0.001,
                "target {target}: {t:?}"
            );
            assert!((t.values[0] - 0.001).abs() < 1e-12, "{t:?}");
        }
        let t = linear(0.001, 0.0042, 8);
        assert_eq!(t.step, 0.0005);
        assert_eq!(t.values.len(), 7);
        let labels = format_linear(&t.values, t.step);
        assert_eq!(
            labels,
            ["1e-3", "1.5e-3", "2e-3", "2.5e-3", "3e-3", "3.5e-3", "4e-3"]
        );
    }

    #[test]
    fn linear_ends_on_exact_ticks() {
        // 0.3 / 0.1 is 2.9999999999999996: the last tick must still be there.
        let t = linear(0.0, 0.3, 4);
        assert_eq!(t.step, 0.1);
        assert_eq!(t.values.len(), 4);
        assert_eq!(format_linear(&t.values, t.step), ["0", "0.1", "0.2", "0.3"]);
        let t = linear(-1.0, 1.0, 5);
        assert_eq!(t.values, vec![-1.0, -0.5, 0.0, 0.5, 1.0]);
    }

    #[test]
    fn linear_degenerate() {
        assert!(linear(1.0, 1.0, 5).values.is_empty());
        assert!(linear(2.0, 1.0, 5).values.is_empty());
        assert!(linear(f64::NAN, 1.0, 5).values.is_empty());
        assert!(linear(0.0, f64::INFINITY, 5).values.is_empty());
        let t = linear(-f64::MAX, f64::MAX, 5);
        assert!(!t.values.is_empty() && t.values.len() <= 7, "{t:?}");
        assert_eq!(
            linear(0.0, 97.0, 5).values,
            vec![0.0, 20.0, 40.0, 60.0, 80.0]
        );
        let t = linear(0.0, 1.0, 0);
        assert_eq!(t.values, vec![0.0, 1.0]);
    }

    #[test]
    fn log_ticks() {
        assert_eq!(log(1.0, 1e5, 10), vec![1.0, 10.0, 100.0, 1e3, 1e4, 1e5]);
        assert_eq!(log(0.5, 150.0, 10), vec![1.0, 10.0, 100.0]);
        assert_eq!(log(1e-3, 1.0, 10), vec![0.001, 0.01, 0.1, 1.0]);
        assert_eq!(log(1e-6, 1e6, 5), vec![1e-6, 1e-3, 1.0, 1e3, 1e6]);
        assert_eq!(log(2.0, 8.0, 10), Vec::<f64>::new());
        assert!(log(0.0, 10.0, 10).is_empty());
        assert!(log(-1.0, 10.0, 10).is_empty());
        assert!(log(1e-300, 1e300, 8).len() <= 8);
    }

    #[test]
    fn labels() {
        assert_eq!(format_tick(0.0, 0.5), "0");
        assert_eq!(format_tick(0.25, 0.05), "0.25");
        assert_eq!(format_tick(15.0, 5.0), "15");
        assert_eq!(format_tick(1500.0, 500.0), "1.5k");
        assert_eq!(format_tick(2000.0, 500.0), "2k");
        assert_eq!(format_tick(400.0, 200.0), "400");
        assert_eq!(format_tick(2e6, 1e6), "2M");
        assert_eq!(format_tick(2.5e9, 5e8), "2.5G");
        assert_eq!(format_tick(-1500.0, 500.0), "-1.5k");
        assert_eq!(format_tick(0.001, 0.001), "1e-3");
        assert_eq!(format_tick(0.01, 0.01), "0.01");
        assert_eq!(format_tick(3e20, 1e20), "3e20");
        assert_eq!(format_tick(1e-300, 1e-300), "1e-300");
        assert_eq!(format_tick(f64::NAN, 1.0), "?");
        // 3 * 0.1 is 0.30000000000000004.
        assert_eq!(format_tick(3.0 * 0.1, 0.1), "0.3");
        // Float noise around zero.
        assert_eq!(format_tick(1e-17, 0.1), "0");
        assert_eq!(
            format_linear(&[0.0, 0.25, 0.5, 0.75, 1.0], 0.25),
            ["0", "0.25", "0.5", "0.75", "1"]
        );
        assert_eq!(
            format_linear(&[0.0, 500.0, 1000.0, 1500.0], 500.0),
            ["0", "500", "1k", "1.5k"]
        );
    }
}
