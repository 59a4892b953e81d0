//! Value parsers for benchmark flags (clap `value_parser`s): each refuses
//! a number that has no meaning for its flag while the arguments are parsed,
//! so a bad value stops the command before anything runs (exit 2) and the
//! error names the flag. Whole numbers are read with their sign, so `-d -5`
//! is a value the flag refuses, not an unknown flag.
//!
//! Kept here rather than in each benchmark: FeedSim, calibrate and AdSim
//! share them, and the harness is the crate they all depend on. Every
//! error is the user's ([`Error::Input`]).

use crate::error::Error;

/// A whole number, sign included (so a negative one can be named).
pub fn int(s: &str) -> Result<i128, Error> {
    s.trim()
        .parse()
        .map_err(|_| Error::Input(format!("expected a whole number, got '{s}'")))
}

/// `n` as the flag's type.
pub fn fit<T: TryFrom<u64>>(n: i128) -> Result<T, Error> {
    u64::try_from(n)
        .ok()
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| Error::Input(format!("{n} is too large")))
}

/// A whole number, 0 included.
pub fn whole<T: TryFrom<u64>>(s: &str) -> Result<T, Error> {
    match int(s)? {
        n if n < 0 => Err(Error::Input("must not be negative".into())),
        n => fit(n),
    }
}

/// A whole number of at least 1.
pub fn at_least_one<T: TryFrom<u64>>(s: &str) -> Result<T, Error> {
    match int(s)? {
        n if n < 1 => Err(Error::Input("must be at least 1".into())),
        n => fit(n),
    }
}

/// Whole seconds, at least 1.
pub fn positive_whole_secs(s: &str) -> Result<u64, Error> {
    match int(s)? {
        n if n < 1 => Err(Error::Input("must be a positive number of seconds".into())),
        n => fit(n),
    }
}

/// A finite number (NaN and infinities refused).
pub fn finite(s: &str) -> Result<f64, Error> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(Error::Input(format!("expected a finite number, got '{s}'"))),
    }
}

/// A finite number more than 0, else `what`.
fn above_zero(s: &str, what: &str) -> Result<f64, Error> {
    match finite(s)? {
        v if v > 0.0 => Ok(v),
        _ => Err(Error::Input(format!("must be a positive number{what}"))),
    }
}

/// A finite number of at least 0, else `what`.
fn zero_or_more(s: &str, what: &str) -> Result<f64, Error> {
    match finite(s)? {
        v if v >= 0.0 => Ok(v),
        _ => Err(Error::Input(format!("must be a non-negative number{what}"))),
    }
}

/// Seconds, more than 0.
pub fn positive_secs(s: &str) -> Result<f64, Error> {
    above_zero(s, " of seconds")
}

/// Seconds, 0 included.
pub fn non_negative_secs(s: &str) -> Result<f64, Error> {
    zero_or_more(s, " of seconds")
}

/// Milliseconds, 0 included.
pub fn non_negative_ms(s: &str) -> Result<f64, Error> {
    zero_or_more(s, " of milliseconds")
}

/// Milliseconds, more than 0.
pub fn positive_ms(s: &str) -> Result<f64, Error> {
    above_zero(s, " of milliseconds")
}

/// A request rate, more than 0.
pub fn positive_rate(s: &str) -> Result<f64, Error> {
    above_zero(s, " of requests per second")
}

/// A factor, more than 0.
pub fn positive_factor(s: &str) -> Result<f64, Error> {
    above_zero(s, "")
}

/// A fraction in [0, 1).
pub fn fraction(s: &str) -> Result<f64, Error> {
    match finite(s)? {
        v if (0.0..1.0).contains(&v) => Ok(v),
        _ => Err(Error::Input("must be in [0, 1)".into())),
    }
}

/// A search's relative tolerance, in (0, 0.5).
pub fn search_tolerance(s: &str) -> Result<f64, Error> {
    match finite(s)? {
        v if v > 0.0 && v < 0.5 => Ok(v),
        _ => Err(Error::Input("must be in (0, 0.5), e.g. 0.03".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_keep_their_sign_and_fit_the_type() {
        assert_eq!(whole::<u32>("0"), Ok(0));
        assert_eq!(
            whole::<u32>("-1").map_err(String::from),
            Err("must not be negative".into())
        );
        assert_eq!(
            at_least_one::<usize>("0").map_err(String::from),
            Err("must be at least 1".into())
        );
        assert_eq!(at_least_one::<u8>("255"), Ok(255));
        assert_eq!(
            at_least_one::<u8>("256").map_err(String::from),
            Err("256 is too large".into())
        );
        assert!(
            whole::<u32>("1.5")
                .unwrap_err()
                .to_string()
                .contains("whole number")
        );
        assert_eq!(
            positive_whole_secs("0").unwrap_err().to_string(),
            "must be a positive number of seconds"
        );
    }

    #[test]
    fn reals_are_finite_and_in_range() {
        for bad in ["NaN", "inf", "-inf", "x"] {
            assert!(positive_secs(bad).is_err(), "{bad}");
        }
        assert!(
            positive_secs("0")
                .unwrap_err()
                .to_string()
                .contains("seconds")
        );
        assert_eq!(non_negative_secs("0"), Ok(0.0));
        assert!(non_negative_ms("-0.5").is_err());
        assert!(
            positive_rate("-3")
                .unwrap_err()
                .to_string()
                .contains("requests per second")
        );
        assert_eq!(fraction("0"), Ok(0.0));
        assert!(fraction("1").is_err());
        assert!(search_tolerance("0").is_err() && search_tolerance("0.5").is_err());
        assert_eq!(search_tolerance("0.03"), Ok(0.03));
        assert_eq!(positive_factor("2"), Ok(2.0));
        assert!(positive_ms("0").is_err());
    }
}
