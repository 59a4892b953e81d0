//! The numbers of the `statistics` format, computed the way upstream's
//! Python tool computes them (NumPy percentiles, NumPy rounding, Python's
//! float printing), so that the text matches digit for digit.

/// The `q`-th percentile (0..=100) of `sorted` (ascending, non-empty) with
/// NumPy's default `linear` method: the value at fractional index
/// `(n - 1) * q / 100`, interpolated between its two neighbours.
///
/// The interpolation follows NumPy's `_lerp` exactly (`a + (b - a) * t`
/// below the midpoint, `b - (b - a) * (1 - t)` from it on), because the two
/// forms differ in the last bits and those bits can survive rounding.
pub(crate) fn percentile(sorted: &[i64], q: f64) -> f64 {
    let Some(&last) = sorted.last() else {
        return f64::NAN;
    };
    let top = (sorted.len() - 1) as f64;
    let index = top * (q / 100.0);
    if index >= top {
        return last as f64;
    }
    if index <= 0.0 {
        return sorted[0] as f64;
    }
    let below = index.floor();
    let gamma = index - below;
    // `below` is in 0..len-1 here, so the cast and `+ 1` stay in bounds.
    let i = below as usize;
    lerp(sorted[i], sorted[i + 1], gamma)
}

/// NumPy's `_lerp` on int64 inputs: the difference is taken in integers
/// (exact), the rest in f64.
fn lerp(a: i64, b: i64, t: f64) -> f64 {
    let diff = (i128::from(b) - i128::from(a)) as f64;
    if t >= 0.5 {
        b as f64 - diff * (1.0 - t)
    } else {
        a as f64 + diff * t
    }
}

/// `numpy.round(x, 2)`: scale by 100, round half to even, scale back.
pub(crate) fn np_round2(x: f64) -> f64 {
    (x * 100.0).round_ties_even() / 100.0
}

/// How Python prints a float with `str()`/`format()`: the shortest digits
/// that read back as the same value, always with a fractional part or an
/// exponent, switching to exponent notation below 1e-4 and from 1e16 on
/// (`340420.0`, `1048086.33`, `1e+16`, `1e-05`).
pub(crate) fn python_float(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    // Rust's `{:e}` and `{}` both print the shortest round-trip digits, as
    // Python's repr does; only the layout differs.
    let scientific = format!("{x:e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .and_then(|(m, e)| Some((m, e.parse::<i32>().ok()?)))
        .unwrap_or((scientific.as_str(), 0));
    if (-4..16).contains(&exponent) {
        let fixed = format!("{x}");
        if fixed.contains('.') {
            fixed
        } else {
            fixed + ".0"
        }
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_match_numpy_linear() {
        // Values checked against numpy.percentile.
        assert_eq!(percentile(&[1, 2, 3, 4], 90.0), 3.7);
        assert_eq!(percentile(&[1, 2, 3, 4], 50.0), 2.5);
        assert_eq!(percentile(&[7], 99.99), 7.0);
        assert_eq!(percentile(&[10, 20], 0.0), 10.0);
        assert_eq!(percentile(&[10, 20], 100.0), 20.0);
        assert!(percentile(&[], 50.0).is_nan());
        // Below and from the midpoint the two interpolation forms are used.
        assert_eq!(percentile(&[0, 1000], 25.0), 250.0);
        assert_eq!(percentile(&[0, 1000], 75.0), 750.0);
    }

    #[test]
    fn rounding_is_half_to_even_on_the_scaled_value() {
        assert_eq!(np_round2(1.005), 1.0); // 100.49999.. after scaling
        assert_eq!(np_round2(0.125), 0.12);
        assert_eq!(np_round2(0.375), 0.38);
        assert_eq!(np_round2(1048086.3333), 1048086.33);
    }

    #[test]
    fn floats_print_like_python() {
        for (x, text) in [
            (340420.0, "340420.0"),
            (1048086.33, "1048086.33"),
            (0.0001, "0.0001"),
            (1e-5, "1e-05"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (9.999999999999998e15, "9999999999999998.0"),
            (123456789012345.67, "123456789012345.67"),
            (-2.5, "-2.5"),
            (-0.0, "-0.0"),
            (1e100, "1e+100"),
        ] {
            assert_eq!(python_float(x), text, "{x:e}");
        }
    }
}
