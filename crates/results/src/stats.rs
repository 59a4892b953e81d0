//! The statistics behind `rackbench results compare`: a side's mean and
//! sample standard deviation, Welch's t-test of equal means with its 95%
//! intervals, and how many runs per side a difference needs.
//!
//! The t distribution is statrs's; nothing here approximates a special
//! function. Every function answers `None` rather than panicking on input
//! it cannot judge (too few values, no variance, non-finite numbers).
//!
//! **The interval on the relative difference** `(mean B - mean A) / |mean A|`
//! is Fieller's interval for the ratio of the two means, with each mean's
//! variance estimated from its own side (as Welch's test does) and the t
//! quantile at the Welch–Satterthwaite degrees of freedom. Unlike dividing
//! the interval of the difference by mean A, it accounts for the noise of
//! mean A as well; it contains 0% exactly when Welch's test does not reject
//! equal means at the same level, so the interval and the p-value never
//! disagree. When mean A is not clearly away from 0 (its own interval
//! reaches 0) the ratio has no bounded interval, and none is given.

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// One side's values of one metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// The sample standard deviation (n - 1); `None` for a single value.
    pub stdev: Option<f64>,
}

impl Summary {
    /// `None` for no values or a non-finite one.
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n as f64;
        Some(Summary {
            n,
            mean,
            stdev: variance(values, mean).map(f64::sqrt),
        })
    }

    /// The variance of the mean, s^2 / n (`None` for a single value).
    fn var_of_mean(&self) -> Option<f64> {
        self.stdev.map(|s| s * s / self.n as f64)
    }
}

/// `x` rounded to two decimals, as reports store percentages and rates.
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The sample variance (n - 1) around `mean`; `None` below 2 values.
pub fn variance(values: &[f64], mean: f64) -> Option<f64> {
    (values.len() >= 2)
        .then(|| values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (values.len() - 1) as f64)
}

/// Above this many degrees of freedom t is the standard normal (they
/// differ by less than 1e-5 in the quantiles used here), and statrs's
/// incomplete beta function slows down badly for huge ones.
const NORMAL_DF: f64 = 1e5;

/// Student's t with `df` degrees of freedom, or the normal for a huge `df`.
fn t_dist(df: f64) -> Option<Box<dyn ContinuousCDF<f64, f64>>> {
    if !(df.is_finite() && df > 0.0) {
        return None;
    }
    Some(if df > NORMAL_DF {
        Box::new(Normal::new(0.0, 1.0).ok()?)
    } else {
        Box::new(StudentsT::new(0.0, 1.0, df).ok()?)
    })
}

/// The `q` quantile of Student's t with `df` degrees of freedom.
pub fn t_quantile(df: f64, q: f64) -> Option<f64> {
    if !(q > 0.0 && q < 1.0) {
        return None;
    }
    t_dist(df).map(|t| t.inverse_cdf(q))
}

/// The two-sided p-value of `t` under Student's t with `df` degrees of
/// freedom.
pub fn two_sided_p(t: f64, df: f64) -> Option<f64> {
    if !t.is_finite() {
        return None;
    }
    t_dist(df).map(|d| (2.0 * d.sf(t.abs())).min(1.0))
}

/// Welch's t-test of mean B = mean A and its intervals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Welch {
    /// mean B - mean A.
    pub diff: f64,
    /// Its standard error, sqrt(s_a^2/n_a + s_b^2/n_b).
    pub se: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    pub t: f64,
    /// Two-sided.
    pub p: f64,
    /// The confidence level of the intervals (0.95).
    pub level: f64,
    /// The interval of the difference: diff ± t_q * se.
    pub diff_ci: (f64, f64),
    /// Fieller's interval of (mean B - mean A) / |mean A| in percent; `None`
    /// when it is unbounded (mean A is within its own noise of 0).
    pub change_pct_ci: Option<(f64, f64)>,
}

/// Welch's test at confidence `level` (e.g. 0.95). `None` when a side has
/// fewer than 2 values or neither side varies (no noise to test against).
pub fn welch(a: &Summary, b: &Summary, level: f64) -> Option<Welch> {
    let (va, vb) = (a.var_of_mean()?, b.var_of_mean()?);
    let se2 = va + vb;
    if !(se2 > 0.0 && se2.is_finite()) {
        return None;
    }
    let se = se2.sqrt();
    // Welch–Satterthwaite; a side without variance adds nothing to the
    // denominator (then df is the other side's n - 1).
    let df = se2 * se2 / (va * va / (a.n - 1) as f64 + vb * vb / (b.n - 1) as f64);
    let diff = b.mean - a.mean;
    let t = diff / se;
    let p = two_sided_p(t, df)?;
    let tq = t_quantile(df, 0.5 + level / 2.0)?;
    Some(Welch {
        diff,
        se,
        df,
        t,
        p,
        level,
        diff_ci: (diff - tq * se, diff + tq * se),
        change_pct_ci: fieller_change(a.mean, va, b.mean, vb, tq)
            .map(|(lo, hi)| (lo * 100.0, hi * 100.0)),
    })
}

/// Fieller's interval of (mb - ma) / |ma| for independent means with
/// variances `va`, `vb` and the quantile `tq`: the ratios r with
/// (mb - r ma)^2 <= tq^2 (vb + r^2 va), less 1 (sign-corrected for a
/// negative ma). `None` when that set is not a bounded interval, i.e. when
/// tq^2 va >= ma^2.
pub fn fieller_change(ma: f64, va: f64, mb: f64, vb: f64, tq: f64) -> Option<(f64, f64)> {
    let t2 = tq * tq;
    let denom = ma * ma - t2 * va;
    if denom.is_nan() || denom <= 0.0 {
        return None;
    }
    // Non-negative when denom > 0: vb * denom + mb^2 va >= 0.
    let disc = ma * ma * vb + mb * mb * va - t2 * va * vb;
    let root = tq * disc.max(0.0).sqrt();
    let (r_lo, r_hi) = ((ma * mb - root) / denom, (ma * mb + root) / denom);
    let out = if ma > 0.0 {
        (r_lo - 1.0, r_hi - 1.0)
    } else {
        (1.0 - r_hi, 1.0 - r_lo)
    };
    (out.0.is_finite() && out.1.is_finite()).then_some(out)
}

/// Runs per side that a two-sided two-sample t-test at significance `alpha`
/// needs to detect a difference of `effect` standard deviations with
/// probability `power`: the smallest n >= 2 with
/// n >= 2 (t_{1-alpha/2, 2n-2} + t_{power, 2n-2})^2 / effect^2 (the usual
/// t-corrected normal formula; R's `power.t.test` gives the same n for the
/// textbook cases). `None` when more than `cap` runs would be needed, or for
/// a zero or non-finite effect.
pub fn runs_per_side(effect: f64, alpha: f64, power: f64, cap: u32) -> Option<u32> {
    let effect = effect.abs();
    if effect.is_nan() || effect == 0.0 {
        return None;
    }
    if effect.is_infinite() {
        return Some(2);
    }
    let need = |zt: f64| 2.0 * zt * zt / (effect * effect);
    // The normal quantiles give a lower bound: t's are larger.
    let normal = Normal::new(0.0, 1.0).ok()?;
    let lower = need(normal.inverse_cdf(1.0 - alpha / 2.0) + normal.inverse_cdf(power));
    if !lower.is_finite() || lower > cap as f64 {
        return None;
    }
    let mut n = (lower.ceil() as u32).max(2);
    while n <= cap {
        let df = (2 * n - 2) as f64;
        let zt = t_quantile(df, 1.0 - alpha / 2.0)? + t_quantile(df, power)?;
        if need(zt) <= n as f64 {
            return Some(n);
        }
        n += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn summaries() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[1.0, f64::NAN]), None);
        let s = Summary::of(&[4.0]).unwrap();
        assert_eq!((s.n, s.mean, s.stdev), (1, 4.0, None));
        let s = Summary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.mean, 5.0);
        // Sample variance 32 / 7.
        assert!(close(s.stdev.unwrap(), (32.0f64 / 7.0).sqrt(), 1e-12));
    }

    #[test]
    fn t_distribution_values() {
        // Textbook table values.
        assert!(close(t_quantile(10.0, 0.975).unwrap(), 2.228, 1e-3));
        assert!(close(t_quantile(4.0, 0.975).unwrap(), 2.776, 1e-3));
        assert!(close(t_quantile(1e9, 0.975).unwrap(), 1.960, 1e-3));
        assert!(close(t_quantile(9e4, 0.975).unwrap(), 1.960, 1e-3));
        assert!(close(two_sided_p(1.96, 1e9).unwrap(), 0.05, 1e-3));
        assert!(close(two_sided_p(2.228, 10.0).unwrap(), 0.05, 1e-4));
        assert!(close(two_sided_p(0.0, 3.0).unwrap(), 1.0, 1e-12));
        assert_eq!(t_quantile(0.0, 0.5), None);
        assert_eq!(two_sided_p(f64::NAN, 3.0), None);
    }

    /// Wikipedia's "Welch's t-test" worked examples (t 2.46, df 24.99, p
    /// 0.021; t 1.57, df 9.9, p 0.149), to more digits from the formulas and
    /// a numerical integral of the t density outside statrs.
    #[test]
    fn welch_matches_published_examples() {
        let a1 = [
            27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7,
            21.4,
        ];
        let a2 = [
            27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5,
            24.4,
        ];
        let w = welch(&Summary::of(&a1).unwrap(), &Summary::of(&a2).unwrap(), 0.95).unwrap();
        // A2 - A1, so t has the opposite sign of the page's A1 - A2.
        assert!(close(w.t, 2.45536, 1e-4), "{w:?}");
        assert!(close(w.df, 24.98853, 1e-4), "{w:?}");
        assert!(close(w.p, 0.021378, 1e-5), "{w:?}");
        let b1 = [17.2, 20.9, 22.6, 18.1, 21.7, 21.4, 23.5, 24.2, 14.7, 21.8];
        let b2 = [
            21.5, 22.8, 21.0, 23.0, 21.6, 23.6, 22.5, 20.7, 23.4, 21.8, 20.7, 21.7, 21.5, 22.5,
            23.6, 21.5, 22.5, 23.5, 21.5, 21.8,
        ];
        let w = welch(&Summary::of(&b1).unwrap(), &Summary::of(&b2).unwrap(), 0.95).unwrap();
        assert!(close(w.t, 1.56543, 1e-4), "{w:?}");
        assert!(close(w.df, 9.90474, 1e-4), "{w:?}");
        assert!(close(w.p, 0.148842, 1e-5), "{w:?}");
        // The interval and the test agree: p > 0.05, the interval holds 0.
        let (lo, hi) = w.change_pct_ci.unwrap();
        assert!(lo < 0.0 && hi > 0.0 && w.diff_ci.0 < 0.0 && w.diff_ci.1 > 0.0);
    }

    #[test]
    fn welch_needs_two_values_a_side_and_some_noise() {
        let one = Summary::of(&[1.0]).unwrap();
        let flat = Summary::of(&[1.0, 1.0, 1.0]).unwrap();
        let flat2 = Summary::of(&[2.0, 2.0]).unwrap();
        let noisy = Summary::of(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(welch(&one, &noisy, 0.95), None);
        assert_eq!(welch(&flat, &flat2, 0.95), None);
        // One flat side: df is the other side's n - 1.
        let w = welch(&flat, &noisy, 0.95).unwrap();
        assert!(close(w.df, 2.0, 1e-12), "{w:?}");
    }

    #[test]
    fn fieller_reduces_to_the_scaled_interval_when_a_is_exact() {
        // No variance in A: the ratio's interval is the difference's / A.
        let (lo, hi) = fieller_change(100.0, 0.0, 110.0, 4.0, 2.0).unwrap();
        assert!(close(lo, (10.0 - 4.0) / 100.0, 1e-12), "{lo}");
        assert!(close(hi, (10.0 + 4.0) / 100.0, 1e-12), "{hi}");
        // A negative A: the relative change is over |A|.
        let (lo, hi) = fieller_change(-100.0, 0.0, -90.0, 4.0, 2.0).unwrap();
        assert!(
            close(lo, 0.06, 1e-12) && close(hi, 0.14, 1e-12),
            "{lo} {hi}"
        );
        // Noise in A widens it, asymmetrically, and keeps the point inside.
        let (lo, hi) = fieller_change(100.0, 4.0, 110.0, 4.0, 2.0).unwrap();
        assert!(lo < 0.06 && hi > 0.14 && lo < 0.1 && hi > 0.1, "{lo} {hi}");
        // A within its noise of 0: no bounded interval.
        assert_eq!(fieller_change(1.0, 1.0, 5.0, 1.0, 2.0), None);
        assert_eq!(fieller_change(0.0, 0.0, 5.0, 1.0, 2.0), None);
    }

    /// R's `power.t.test(delta = d, sd = 1, power = 0.8)` gives n = 63.77,
    /// 25.52, 16.71 and 5.09 for d = 0.5, 0.8, 1 and 2 (Cohen's table).
    #[test]
    fn runs_needed_match_power_t_test() {
        let n = |d| runs_per_side(d, 0.05, 0.8, 10_000);
        assert_eq!(n(0.5), Some(64));
        assert_eq!(n(0.8), Some(26));
        assert_eq!(n(1.0), Some(17));
        assert_eq!(n(2.0), Some(6));
        assert_eq!(n(-1.0), Some(17));
        assert_eq!(n(f64::INFINITY), Some(2));
        assert_eq!(n(0.0), None);
        assert_eq!(runs_per_side(0.01, 0.05, 0.8, 1000), None);
    }
}
