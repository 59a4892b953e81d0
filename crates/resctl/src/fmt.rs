//! Number formats and parsers in upstream resctl-demo's style.
//!
//! The formatters produce the short, fixed-width-friendly strings used all
//! over resctl-bench's text output: sizes such as `1.2M` or `477G`, durations
//! such as `885u` or `3.7m`, and percentages such as `45.50` or `882.5`.
//! Each `*_dashed` variant prints `-` instead of `0`, which the tables use for
//! empty cells.
//!
//! The parsers accept what users type on the command line and in job specs:
//! sizes (`16.5M`, `2G_16.5M`), durations (`150m`, `1M_30s`) and fractions
//! (`0.8`, `80%`). Their errors say what was given and what was expected.

/// Size units of [`format_size`], 1024 apart.
///
/// Upstream labels 2^40 as "P" and 2^50 as "E" (there is no "T"); the output
/// keeps that quirk so that it matches upstream's text byte for byte.
const SIZE_UNITS: [(f64, &str); 5] = [
    (1024.0, "K"),
    (1048576.0, "M"),
    (1073741824.0, "G"),
    (1099511627776.0, "P"),
    (1125899906842624.0, "E"),
];

/// Duration units of [`format_duration`]: (nanoseconds per unit, the value
/// from which the next unit is used, suffix).
const DURATION_UNITS: [(f64, f64, &str); 8] = [
    (1.0, 1000.0, "n"),
    (1e3, 1000.0, "u"),
    (1e6, 1000.0, "m"),
    (1e9, 60.0, "s"),
    (60e9, 60.0, "M"),
    (3600e9, 24.0, "H"),
    (86400e9, 365.0, "D"),
    (31536000e9, 1000.0, "Y"),
];

/// Shared ladder of [`format_size`] and [`format_duration`]: the first unit
/// where the value is below 99.95 is printed with one decimal (at least
/// `0.1`), one where it is below the unit's limit without decimals; otherwise
/// the next unit is tried. `INF` when no unit fits.
fn format_ladder(n: f64, units: impl Iterator<Item = (f64, f64, &'static str)>) -> String {
    for (unit, limit, suffix) in units {
        let v = n / unit;
        if v < 99.95 {
            return format!("{:.1}{}", v.max(0.1), suffix);
        }
        if v < limit {
            return format!("{v:.0}{suffix}");
        }
    }
    "INF".to_string()
}

fn format_size_inner(n: f64, zero: &str) -> String {
    if n.is_nan() {
        return "NaN".to_string();
    }
    if n < 0.0 {
        return format!("-{}", format_size_inner(-n, zero));
    }
    // Upstream takes the whole bytes (truncated) first.
    let n = n.trunc();
    if n == 0.0 {
        return zero.to_string();
    }
    if n < 9999.0 {
        return format!("{n:.0}");
    }
    format_ladder(n, SIZE_UNITS.iter().map(|&(u, s)| (u, 1024.0, s)))
}

/// Formats a byte count the way upstream does.
///
/// - The value is truncated to whole bytes, as upstream converts it.
/// - `0` prints `0`; below 9999 the plain integer is printed.
/// - Otherwise the value is scaled by K (2^10), M (2^20), G (2^30), "P"
///   (2^40; upstream's label for TiB) and "E" (2^50) in turn: below 99.95 it
///   is printed with one decimal (`1.2M`), below 1024 without (`477G`), and
///   otherwise the next unit is tried. `INF` if nothing fits.
/// - Negative values print as `-` followed by the format of their magnitude.
///
/// ```
/// use resctl::fmt::format_size;
/// assert_eq!(format_size(1258291.0), "1.2M");
/// assert_eq!(format_size(1100794.0), "1.0M");
/// assert_eq!(format_size(4096.0), "4096");
/// ```
pub fn format_size(n: f64) -> String {
    format_size_inner(n, "0")
}

/// Formats a count the way upstream does (truncated to a whole count):
/// `0` prints `0`, below 1000 the integer, otherwise scaled by k (10^3), m, g, p and e (10^15): one
/// decimal below 99.95, none below 1000, else the next unit; `INF` if
/// nothing fits.
///
/// ```
/// use resctl::fmt::format_count;
/// assert_eq!(format_count(999.0), "999");
/// assert_eq!(format_count(1234.0), "1.2k");
/// assert_eq!(format_count(250_000.0), "250k");
/// assert_eq!(format_count(3e9), "3.0g");
/// ```
pub fn format_count(n: f64) -> String {
    if n.is_nan() {
        return "NaN".to_string();
    }
    if n < 0.0 {
        return format!("-{}", format_count(-n));
    }
    // Truncated to a whole count, as upstream converts it.
    let n = n.trunc();
    if n == 0.0 {
        return "0".to_string();
    }
    if n < 1000.0 {
        return format!("{n:.0}");
    }
    format_ladder(
        n,
        [(1e3, "k"), (1e6, "m"), (1e9, "g"), (1e12, "p"), (1e15, "e")]
            .into_iter()
            .map(|(u, s)| (u, 1000.0, s)),
    )
}

/// [`format_size`], but `0` prints as `-`.
pub fn format_size_dashed(n: f64) -> String {
    format_size_inner(n, "-")
}

fn format_duration_inner(secs: f64, zero: &str) -> String {
    if secs.is_nan() {
        return "NaN".to_string();
    }
    if secs < 0.0 {
        return format!("-{}", format_duration_inner(-secs, zero));
    }
    let ns = (secs * 1e9).round();
    if ns == 0.0 {
        return zero.to_string();
    }
    format_ladder(ns, DURATION_UNITS.iter().copied())
}

/// Formats a duration given in seconds the way upstream does.
///
/// The value is rounded to whole nanoseconds (`0` prints `0`) and then scaled
/// by the units n (ns), u (µs), m (ms), s, M (minutes), H, D and Y (365
/// days): below 99.95 it is printed with one decimal (`3.9u`), below the
/// unit's limit (1000 for n/u/m/Y, 60 for s/M, 24 for H, 365 for D) without
/// decimals (`885u`), otherwise the next unit is tried. `INF` if nothing
/// fits. Note that as upstream, a value from 60 to 99.95 seconds prints as
/// seconds (`75.0s`), because the one-decimal rule comes first.
///
/// ```
/// use resctl::fmt::format_duration;
/// assert_eq!(format_duration(0.000003932), "3.9u");
/// assert_eq!(format_duration(0.3), "300m");
/// assert_eq!(format_duration(2042.0), "34.0M");
/// ```
pub fn format_duration(secs: f64) -> String {
    format_duration_inner(secs, "0")
}

/// [`format_duration`], but `0` prints as `-`.
pub fn format_duration_dashed(secs: f64) -> String {
    format_duration_inner(secs, "-")
}

fn format_pct_inner(ratio: f64, zero: &str) -> String {
    let p = ratio * 100.0;
    // As upstream, which falls through every comparison to `INF`.
    if p.is_nan() {
        return "INF".to_string();
    }
    if p < 0.0 {
        return "NEG".to_string();
    }
    if p == 0.0 {
        return zero.to_string();
    }
    if p < 99.995 {
        format!("{p:.2}")
    } else if p < 999.95 {
        format!("{p:.1}")
    } else if p < 99999.5 {
        format!("{p:.0}")
    } else {
        let k = p / 1000.0;
        if k < 99.995 {
            format!("{k:.1}k")
        } else if k < 9999.5 {
            format!("{k:.0}k")
        } else {
            "INF".to_string()
        }
    }
}

/// Formats a ratio as a percentage without the `%` sign, in at most five
/// characters where possible.
///
/// p = ratio × 100. Negative prints `NEG`, `0` prints `0`; below 99.995 two
/// decimals (`45.50`), below 999.95 one (`882.5`), below 99999.5 none
/// (`2848`); beyond that thousands with a `k` suffix (`99.9k` below 99.995k,
/// then `1235k`), and `INF` from 9999.5k (and for NaN, as upstream).
///
/// ```
/// use resctl::fmt::format_pct;
/// assert_eq!(format_pct(0.455), "45.50");
/// assert_eq!(format_pct(1.0), "100.0");
/// assert_eq!(format_pct(-0.1), "NEG");
/// ```
pub fn format_pct(ratio: f64) -> String {
    format_pct_inner(ratio, "0")
}

/// [`format_pct`], but `0` prints as `-`.
pub fn format_pct_dashed(ratio: f64) -> String {
    format_pct_inner(ratio, "-")
}

/// Formats a ratio as a percentage in at most four characters where
/// possible.
///
/// p = ratio × 100. Negative prints `NEG`, `0` prints `0`; below 99.95 one
/// decimal (`45.5`), below 9999.5 none (`883`), then thousands without
/// decimals and a `k` suffix (`12k`), and `INF` from 99.5k (as upstream).
pub fn format4_pct(ratio: f64) -> String {
    let p = ratio * 100.0;
    if p.is_nan() {
        return "INF".to_string();
    }
    if p < 0.0 {
        return "NEG".to_string();
    }
    if p == 0.0 {
        return "0".to_string();
    }
    if p < 99.95 {
        format!("{p:.1}")
    } else if p < 9999.5 {
        format!("{p:.0}")
    } else if p / 1000.0 < 99.5 {
        format!("{:.0}k", p / 1000.0)
    } else {
        "INF".to_string()
    }
}

/// True for a plain unsigned decimal: digits with at most one `.`, and at
/// least one digit. No sign, exponent, `inf` or `nan`.
fn is_plain_decimal(s: &str) -> bool {
    let mut dots = 0;
    let mut digits = 0;
    for c in s.chars() {
        match c {
            '0'..='9' => digits += 1,
            '.' => dots += 1,
            _ => return false,
        }
    }
    digits > 0 && dots <= 1
}

/// Turns a percentile key into a table label: `0` and `00` are `min`, `100`
/// is `max`, any other number gets a `p` prefix (`01` → `p01`, `99.9` →
/// `p99.9`), and anything else (`mean`, `stdev`, `cum`) is unchanged.
pub fn format_percentile(key: &str) -> String {
    match key {
        "0" | "00" => "min".to_string(),
        "100" => "max".to_string(),
        k if is_plain_decimal(k) => format!("p{k}"),
        k => k.to_string(),
    }
}

/// Splits a term such as `16.5M` into its numeric prefix and the suffix.
fn split_number(term: &str) -> (&str, &str) {
    let end = term
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(term.len());
    term.split_at(end)
}

const SIZE_EXPECTED: &str = "expected a byte count such as 4096, a number with a unit B, K, M, G, T, P \
     or E (powers of 1024, any case, decimals allowed) such as 16.5M, or a sum \
     joined by '_' such as 2G_16.5M";

/// Parses a size in bytes.
///
/// A size is one or more terms joined by `_` that are added up; each term is
/// a decimal number followed by an optional unit: `B` (bytes), `K`, `M`,
/// `G`, `T`, `P` or `E` (2^10 … 2^60), in either case. A plain number is a
/// byte count. Fractional results are rounded to whole bytes.
///
/// ```
/// use resctl::fmt::parse_size;
/// assert_eq!(parse_size("4096"), Ok(4096));
/// assert_eq!(parse_size("1.5k"), Ok(1536));
/// assert_eq!(parse_size("2G_16.5M"), Ok(2164785152));
/// ```
pub fn parse_size(s: &str) -> Result<u64, crate::Error> {
    let given = s;
    let s = s.trim();
    if s.is_empty() {
        return Err(crate::Error::Input(format!(
            "invalid size {given:?}: it is empty; {SIZE_EXPECTED}"
        )));
    }
    let mut total: u128 = 0;
    for term in s.split('_') {
        if term.is_empty() {
            return Err(crate::Error::Input(format!(
                "invalid size {given:?}: empty term around '_'; {SIZE_EXPECTED}"
            )));
        }
        let (num, unit) = split_number(term);
        let shift = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 0,
            "k" => 10,
            "m" => 20,
            "g" => 30,
            "t" => 40,
            "p" => 50,
            "e" => 60,
            _ => {
                return Err(crate::Error::Input(format!(
                    "invalid size {given:?}: unknown unit {unit:?} in {term:?}; {SIZE_EXPECTED}"
                )));
            }
        };
        if !is_plain_decimal(num) {
            return Err(crate::Error::Input(format!(
                "invalid size {given:?}: {num:?} in {term:?} is not a number; {SIZE_EXPECTED}"
            )));
        }
        let value: u128 = if num.contains('.') {
            let v = num
                .parse::<f64>()
                .map_err(|e| {
                    format!("invalid size {given:?}: {num:?} in {term:?}: {e}; {SIZE_EXPECTED}")
                })
                .map_err(crate::Error::Input)?
                * (1u128 << shift) as f64;
            if v > u64::MAX as f64 {
                u128::MAX
            } else {
                v.round() as u128
            }
        } else {
            match num.parse::<u128>() {
                Ok(v) => v.saturating_mul(1u128 << shift),
                Err(_) => u128::MAX,
            }
        };
        total = total.saturating_add(value);
        if total > u64::MAX as u128 {
            return Err(crate::Error::Input(format!(
                "invalid size {given:?}: larger than the maximum of {} bytes (16E)",
                u64::MAX
            )));
        }
    }
    Ok(total as u64)
}

const DURATION_EXPECTED: &str = "expected seconds such as 1.5, a number with a unit n, u, m, s, M, H, D \
     or Y (ns, µs, ms, s, minutes, hours, days, 365-day years) such as 150m, \
     or a sum joined by '_' such as 1M_30s";

/// Parses a duration into seconds.
///
/// A duration is one or more terms joined by `_` that are added up; each
/// term is a decimal number followed by an optional unit: `n`
/// (nanoseconds), `u` (microseconds), `m` (milliseconds), `s`, `M`
/// (minutes), `H` (hours), `D` (days) or `Y` (365 days). Units are case
/// sensitive (`m` is not `M`). A plain number is in seconds.
///
/// ```
/// use resctl::fmt::parse_duration;
/// assert_eq!(parse_duration("150m"), Ok(0.15));
/// assert_eq!(parse_duration("1M_30s"), Ok(90.0));
/// ```
pub fn parse_duration(s: &str) -> Result<f64, crate::Error> {
    let given = s;
    let s = s.trim();
    if s.is_empty() {
        return Err(crate::Error::Input(format!(
            "invalid duration {given:?}: it is empty; {DURATION_EXPECTED}"
        )));
    }
    let mut total = 0.0;
    for term in s.split('_') {
        if term.is_empty() {
            return Err(crate::Error::Input(format!(
                "invalid duration {given:?}: empty term around '_'; {DURATION_EXPECTED}"
            )));
        }
        let (num, unit) = split_number(term);
        let (mult, div) = match unit {
            // Sub-second units divide, so that "885u" is exactly 0.000885.
            "n" => (1.0, 1e9),
            "u" => (1.0, 1e6),
            "m" => (1.0, 1e3),
            "" | "s" => (1.0, 1.0),
            "M" => (60.0, 1.0),
            "H" => (3600.0, 1.0),
            "D" => (86400.0, 1.0),
            "Y" => (31536000.0, 1.0),
            _ => {
                return Err(crate::Error::Input(format!(
                    "invalid duration {given:?}: unknown unit {unit:?} in {term:?}; {DURATION_EXPECTED}"
                )));
            }
        };
        if !is_plain_decimal(num) {
            return Err(crate::Error::Input(format!(
                "invalid duration {given:?}: {num:?} in {term:?} is not a number; {DURATION_EXPECTED}"
            )));
        }
        let v = num
            .parse::<f64>()
            .map_err(|e| {
                format!("invalid duration {given:?}: {num:?} in {term:?}: {e}; {DURATION_EXPECTED}")
            })
            .map_err(crate::Error::Input)?;
        total += v * mult / div;
    }
    if !total.is_finite() {
        return Err(crate::Error::Input(format!(
            "invalid duration {given:?}: too large"
        )));
    }
    Ok(total)
}

/// Parses a fraction: a plain number (`0.8`) or a percentage with a
/// trailing `%` (`80%` → 0.8). Negative values are rejected; values above 1
/// (`150%`) are accepted, callers clamp where they need to.
pub fn parse_frac(s: &str) -> Result<f64, crate::Error> {
    const EXPECTED: &str = "expected a non-negative number such as 0.8 or a percentage such as 80%";
    let given = s;
    let s = s.trim();
    let (num, div) = match s.strip_suffix('%') {
        Some(n) => (n.trim_end(), 100.0),
        None => (s, 1.0),
    };
    if !is_plain_decimal(num) {
        return Err(crate::Error::Input(format!(
            "invalid fraction {given:?}: {EXPECTED}"
        )));
    }
    let v = num
        .parse::<f64>()
        .map_err(|e| crate::Error::Input(format!("invalid fraction {given:?}: {e}; {EXPECTED}")))?;
    Ok(v / div)
}

/// Underlines `s` with `c`: the text line, then a line with the same leading
/// spaces followed by `c` repeated for each remaining character (counted in
/// chars, not bytes), each line ending in `\n`.
///
/// ```
/// use resctl::fmt::custom_underline;
/// assert_eq!(custom_underline("Memory Hog", '='), "Memory Hog\n==========\n");
/// ```
pub fn custom_underline(s: &str, c: char) -> String {
    let lead = s.chars().take_while(|&ch| ch == ' ').count();
    let rest = s.chars().count() - lead;
    let mut out = String::with_capacity(s.len() * 2 + 2);
    out.push_str(s);
    out.push('\n');
    out.extend(std::iter::repeat_n(' ', lead));
    out.extend(std::iter::repeat_n(c, rest));
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: f64 = 1024.0;
    const M: f64 = K * 1024.0;
    const G: f64 = M * 1024.0;

    #[test]
    fn size_examples_from_notes() {
        assert_eq!(format_size(1258291.0), "1.2M");
        assert_eq!(format_size(1100794.0), "1.0M");
        // 477 GB (the conformance disk, 512e9 bytes) and 106G.
        assert_eq!(format_size(512110190592.0), "477G");
        assert_eq!(format_size(106.0 * G), "106G");
        // memory=63.9G, swap=32.0G, share=12.0G, mem_actual=16.1G.
        assert_eq!(format_size(63.9 * G), "63.9G");
        assert_eq!(format_size(32.0 * G), "32.0G");
        assert_eq!(format_size(12.0 * G), "12.0G");
        assert_eq!(format_size(333.0 * G), "333G");
    }

    #[test]
    fn size_small_and_zero() {
        assert_eq!(format_size(0.0), "0");
        assert_eq!(format_size_dashed(0.0), "-");
        assert_eq!(format_size(1.0), "1");
        assert_eq!(format_size_dashed(1.0), "1");
        assert_eq!(format_size(4096.0), "4096");
        assert_eq!(format_size(9998.0), "9998");
        // Truncated to whole bytes, as upstream.
        assert_eq!(format_size(4096.9), "4096");
        assert_eq!(format_size(0.9), "0");
        // 9999 is the first value that takes a unit.
        assert_eq!(format_size(9999.0), "9.8K");
        assert_eq!(format_size(10240.0), "10.0K");
    }

    #[test]
    fn size_unit_boundaries() {
        // Below 99.95 one decimal, then no decimals up to 1024.
        assert_eq!(format_size(99.94 * K), "99.9K");
        assert_eq!(format_size(99.96 * K), "100K");
        assert_eq!(format_size(1023.0 * K), "1023K");
        assert_eq!(format_size(1024.0 * K), "1.0M");
        assert_eq!(format_size(1023.0 * M), "1023M");
        assert_eq!(format_size(1024.0 * M), "1.0G");
        assert_eq!(format_size(1000.0 * G), "1000G");
    }

    #[test]
    fn size_upstream_p_and_e_labels() {
        // Upstream labels 2^40 "P" (there is no "T") and 2^50 "E".
        assert_eq!(format_size(1024.0 * G), "1.0P");
        assert_eq!(format_size(2.5 * 1024.0 * G), "2.5P");
        assert_eq!(format_size(1024.0 * 1024.0 * G), "1.0E");
        assert_eq!(format_size(1023.0 * 1024.0 * 1024.0 * G), "1023E");
        assert_eq!(format_size(1024.0 * 1024.0 * 1024.0 * G), "INF");
        assert_eq!(format_size(f64::INFINITY), "INF");
    }

    #[test]
    fn size_negative() {
        assert_eq!(format_size(-5.0), "-5");
        assert_eq!(format_size(-1258291.0), "-1.2M");
    }

    #[test]
    fn duration_examples_from_notes() {
        assert_eq!(format_duration(0.000003932), "3.9u");
        assert_eq!(format_duration(0.3), "300m");
        assert_eq!(format_duration(2042.0), "34.0M");
        assert_eq!(format_duration(0.000885), "885u");
        assert_eq!(format_duration(0.0037), "3.7m");
        assert_eq!(format_duration(0.150), "150m");
        assert_eq!(format_duration(0.0012), "1.2m");
        assert_eq!(format_duration(0.0696), "69.6m");
        assert_eq!(format_duration(0.000005), "5.0u");
        // Conformance table cells.
        assert_eq!(format_duration(0.000105), "105u");
        assert_eq!(format_duration(0.0495), "49.5m");
        assert_eq!(format_duration(0.106), "106m");
    }

    #[test]
    fn duration_zero_and_rounding() {
        assert_eq!(format_duration(0.0), "0");
        assert_eq!(format_duration_dashed(0.0), "-");
        // Rounds to 0 ns.
        assert_eq!(format_duration(0.4e-9), "0");
        assert_eq!(format_duration_dashed(0.4e-9), "-");
        assert_eq!(format_duration(1e-9), "1.0n");
        assert_eq!(format_duration(150e-9), "150n");
        assert_eq!(format_duration(999e-9), "999n");
        assert_eq!(format_duration(1e-6), "1.0u");
        assert_eq!(format_duration_dashed(0.3), "300m");
    }

    #[test]
    fn duration_large_units() {
        assert_eq!(format_duration(1.0), "1.0s");
        assert_eq!(format_duration(59.0), "59.0s");
        // One decimal wins while below 99.95, as upstream.
        assert_eq!(format_duration(75.0), "75.0s");
        assert_eq!(format_duration(100.0), "1.7M");
        assert_eq!(format_duration(3600.0), "60.0M");
        assert_eq!(format_duration(6000.0), "1.7H");
        assert_eq!(format_duration(86400.0 * 2.0), "48.0H");
        assert_eq!(format_duration(86400.0 * 100.0), "100D");
        assert_eq!(format_duration(86400.0 * 364.0), "364D");
        assert_eq!(format_duration(86400.0 * 365.0), "1.0Y");
        assert_eq!(format_duration(86400.0 * 365.0 * 2.0), "2.0Y");
        assert_eq!(format_duration(86400.0 * 365.0 * 999.0), "999Y");
        assert_eq!(format_duration(86400.0 * 365.0 * 1000.0), "INF");
        assert_eq!(format_duration(-0.3), "-300m");
    }

    #[test]
    fn pct_examples_from_notes() {
        assert_eq!(format_pct(0.455), "45.50");
        assert_eq!(format_pct(1.0), "100.0");
        assert_eq!(format_pct(8.825), "882.5");
        assert_eq!(format_pct(28.48), "2848");
        assert_eq!(format_pct(-0.01), "NEG");
        // Conformance cells.
        assert_eq!(format_pct(0.0049), "0.49");
        assert_eq!(format_pct(1.219), "121.9");
        assert_eq!(format_pct(0.3072), "30.72");
        assert_eq!(format_pct(0.0026), "0.26");
    }

    #[test]
    fn pct_zero_and_ranges() {
        assert_eq!(format_pct(0.0), "0");
        assert_eq!(format_pct_dashed(0.0), "-");
        assert_eq!(format_pct_dashed(0.455), "45.50");
        assert_eq!(format_pct_dashed(-1.0), "NEG");
        assert_eq!(format_pct(0.9999), "99.99");
        assert_eq!(format_pct(0.99996), "100.0");
        assert_eq!(format_pct(9.9994), "999.9");
        assert_eq!(format_pct(9.9996), "1000");
        assert_eq!(format_pct(999.99), "99999");
        assert_eq!(format_pct(999.0), "99900");
        assert_eq!(format_pct(1000.0), "100k");
        assert_eq!(format_pct(12346.0), "1235k");
        assert_eq!(format_pct(99995.0), "INF");
        assert_eq!(format_pct(f64::NAN), "INF");
        assert_eq!(format_pct(f64::INFINITY), "INF");
    }

    #[test]
    fn pct4() {
        assert_eq!(format4_pct(0.0), "0");
        assert_eq!(format4_pct(-0.5), "NEG");
        assert_eq!(format4_pct(0.455), "45.5");
        assert_eq!(format4_pct(0.9994), "99.9");
        assert_eq!(format4_pct(0.9996), "100");
        assert_eq!(format4_pct(8.825), "882");
        assert_eq!(format4_pct(99.99), "9999");
        assert_eq!(format4_pct(100.0), "10k");
        assert_eq!(format4_pct(995.0), "INF");
        assert_eq!(format4_pct(f64::INFINITY), "INF");
    }

    #[test]
    fn percentile_labels() {
        assert_eq!(format_percentile("0"), "min");
        assert_eq!(format_percentile("00"), "min");
        assert_eq!(format_percentile("100"), "max");
        assert_eq!(format_percentile("01"), "p01");
        assert_eq!(format_percentile("50"), "p50");
        assert_eq!(format_percentile("99.9"), "p99.9");
        assert_eq!(format_percentile("99.999"), "p99.999");
        assert_eq!(format_percentile("mean"), "mean");
        assert_eq!(format_percentile("stdev"), "stdev");
        assert_eq!(format_percentile("cum"), "cum");
        // Rust's f64 parser accepts these; they are not percentiles.
        assert_eq!(format_percentile("inf"), "inf");
        assert_eq!(format_percentile("nan"), "nan");
        assert_eq!(format_percentile(""), "");
    }

    #[test]
    fn parse_size_forms() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size(" 4096 "), Ok(4096));
        assert_eq!(parse_size("512B"), Ok(512));
        assert_eq!(parse_size("1k"), Ok(1024));
        assert_eq!(parse_size("1K"), Ok(1024));
        assert_eq!(parse_size("1.5K"), Ok(1536));
        assert_eq!(parse_size("16.5M"), Ok(17301504));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert_eq!(parse_size("1p"), Ok(1 << 50));
        assert_eq!(parse_size("1E"), Ok(1 << 60));
        assert_eq!(parse_size("2G_16.5M"), Ok((2 << 30) + 17301504));
        assert_eq!(parse_size("1G_1G_1"), Ok((2 << 30) + 1));
        assert_eq!(parse_size(".5K"), Ok(512));
        assert_eq!(parse_size("1.5"), Ok(2));
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
    }

    #[test]
    fn parse_size_round_trips_format_for_k_m_g() {
        for n in [1258291u64, 1100794, 17 << 30, 40960] {
            let s = format_size(n as f64);
            let back = parse_size(&s).unwrap();
            let err = (back as f64 - n as f64).abs() / n as f64;
            assert!(err < 0.05, "{n} -> {s} -> {back}");
        }
    }

    #[test]
    fn parse_size_errors() {
        let e = parse_size("").unwrap_err();
        assert!(
            e.to_string().contains("\"\"")
                && e.to_string().contains("empty")
                && e.to_string().contains("expected")
        );
        let e = parse_size("16X").unwrap_err();
        assert!(
            e.to_string().contains("\"16X\"")
                && e.to_string().contains("\"X\"")
                && e.to_string().contains("expected"),
            "{e}"
        );
        let e = parse_size("16GB").unwrap_err();
        assert!(e.to_string().contains("\"GB\""), "{e}");
        let e = parse_size("2G__1M").unwrap_err();
        assert!(e.to_string().contains("empty term"), "{e}");
        let e = parse_size("G").unwrap_err();
        assert!(e.to_string().contains("not a number"), "{e}");
        assert!(parse_size("-1K").is_err());
        assert!(parse_size("1e3").is_err());
        assert!(parse_size("1.2.3K").is_err());
        assert!(parse_size("inf").is_err());
        let e = parse_size("16E").unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
        assert!(parse_size("99999999999999999999999").is_err());
        assert!(parse_size("15E_1E").is_err());
    }

    #[test]
    fn parse_duration_forms() {
        assert_eq!(parse_duration("1.5"), Ok(1.5));
        assert_eq!(parse_duration("10s"), Ok(10.0));
        assert_eq!(parse_duration("150m"), Ok(0.15));
        assert_eq!(parse_duration("885u"), Ok(0.000885));
        assert_eq!(parse_duration("100n"), Ok(100e-9));
        assert_eq!(parse_duration("2M"), Ok(120.0));
        assert_eq!(parse_duration("1H"), Ok(3600.0));
        assert_eq!(parse_duration("1D"), Ok(86400.0));
        assert_eq!(parse_duration("1Y"), Ok(365.0 * 86400.0));
        assert_eq!(parse_duration("1M_30s"), Ok(90.0));
        assert_eq!(parse_duration("1H_1M_1"), Ok(3661.0));
        assert_eq!(parse_duration("0"), Ok(0.0));
    }

    #[test]
    fn parse_duration_formats_back() {
        for s in ["3.9u", "300m", "34.0M", "885u", "150m", "1.0s", "2.0Y"] {
            assert_eq!(format_duration(parse_duration(s).unwrap()), s);
        }
    }

    #[test]
    fn parse_duration_errors() {
        let e = parse_duration("100ms").unwrap_err();
        assert!(
            e.to_string().contains("\"100ms\"")
                && e.to_string().contains("\"ms\"")
                && e.to_string().contains("expected"),
            "{e}"
        );
        // Units are case sensitive: there is no "S" or "h".
        assert!(parse_duration("5S").is_err());
        assert!(parse_duration("1h").is_err());
        assert!(
            parse_duration("")
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        assert!(
            parse_duration("1M_")
                .unwrap_err()
                .to_string()
                .contains("empty term")
        );
        assert!(parse_duration("-1s").is_err());
        assert!(
            parse_duration("s")
                .unwrap_err()
                .to_string()
                .contains("not a number")
        );
    }

    #[test]
    fn parse_frac_forms() {
        assert_eq!(parse_frac("80%"), Ok(0.8));
        assert_eq!(parse_frac("0.8"), Ok(0.8));
        assert_eq!(parse_frac("1"), Ok(1.0));
        assert_eq!(parse_frac("150%"), Ok(1.5));
        assert_eq!(parse_frac("12.5%"), Ok(0.125));
        assert_eq!(parse_frac(" 25 % "), Ok(0.25));
        assert_eq!(parse_frac("0"), Ok(0.0));
    }

    #[test]
    fn parse_frac_errors() {
        for bad in ["", "%", "abc", "-0.5", "80%%", "1e-1", "nan", "0.8x"] {
            let e = parse_frac(bad).unwrap_err();
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
            assert!(e.to_string().contains("expected"), "{e}");
        }
    }

    #[test]
    fn underline() {
        assert_eq!(
            custom_underline("Memory Hog Summary", '='),
            "Memory Hog Summary\n==================\n"
        );
        assert_eq!(
            custom_underline("Scenario 1/2 - Memory Hog", '='),
            "Scenario 1/2 - Memory Hog\n=========================\n"
        );
        assert_eq!(custom_underline("  ab c", '-'), "  ab c\n  ----\n");
        // Chars, not bytes.
        assert_eq!(custom_underline("µs", '~'), "µs\n~~\n");
        assert_eq!(custom_underline("", '='), "\n\n");
    }
}
