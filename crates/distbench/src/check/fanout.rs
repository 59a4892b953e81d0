//! The `fanout_filter` of an RPC: which server instances one send reaches.

use crate::Error;
/// Filters without parameters (`""` means `all`).
const PLAIN: &[&str] = &[
    "",
    "all",
    "random",
    "random_single",
    "round_robin",
    "same_x",
    "same_y",
    "same_z",
    "same_xy",
    "same_xz",
    "same_yz",
    "same_xyz",
    "ring_x",
    "ring_y",
    "ring_z",
    "alternating_ring_x",
    "alternating_ring_y",
    "alternating_ring_z",
];

/// The valid forms, for error messages.
pub const VALID_FORMS: &str = "all, random, round_robin, same_x, same_y, same_z, same_xy, \
     same_xz, same_yz, same_xyz, ring_x, ring_y, ring_z, alternating_ring_x, \
     alternating_ring_y, alternating_ring_z, linear_x{D}, linear_y{D}, linear_z{D}, \
     stochastic{P:N,...}";

/// Checks a fan-out filter; the error says what is wrong with it.
pub fn check(filter: &str) -> Result<(), Error> {
    if PLAIN.contains(&filter) {
        return Ok(());
    }
    let Some((name, params)) = filter.split_once('{') else {
        return Err(Error::Input(format!(
            "unknown fanout_filter '{filter}' (valid: {VALID_FORMS})"
        )));
    };
    let Some(params) = params.strip_suffix('}') else {
        return Err(Error::Input(format!(
            "fanout_filter '{filter}' must end with '}}'"
        )));
    };
    match name {
        "linear_x" | "linear_y" | "linear_z" => {
            params.trim().parse::<i32>().map(|_| ()).map_err(|_| {
                Error::Input(format!(
                    "fanout_filter '{filter}': the distance in {name}{{D}} must be an integer"
                ))
            })
        }
        "stochastic" => check_stochastic(filter, params).map_err(Error::Input),
        _ => Err(Error::Input(format!(
            "unknown fanout_filter '{filter}' (valid: {VALID_FORMS})"
        ))),
    }
}

/// `stochastic{p:n,...}`: with probability p, send to n random instances.
fn check_stochastic(filter: &str, params: &str) -> Result<(), String> {
    if params.trim().is_empty() {
        return Err(format!(
            "fanout_filter '{filter}' needs at least one probability:count pair"
        ));
    }
    for pair in params.split(',') {
        let Some((p, n)) = pair.split_once(':') else {
            return Err(format!(
                "fanout_filter '{filter}': '{pair}' is not a probability:count pair"
            ));
        };
        match p.trim().parse::<f64>() {
            Ok(p) if (0.0..=1.0).contains(&p) => {}
            Ok(_) => {
                return Err(format!(
                    "fanout_filter '{filter}': probability '{p}' must be between 0 and 1"
                ));
            }
            Err(_) => {
                return Err(format!(
                    "fanout_filter '{filter}': probability '{p}' is not a number"
                ));
            }
        }
        match n.trim().parse::<i64>() {
            Ok(n) if n >= 0 => {}
            _ => {
                return Err(format!(
                    "fanout_filter '{filter}': count '{n}' must be an integer >= 0"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn accepts_every_upstream_form() {
        for f in [
            "",
            "all",
            "random",
            "round_robin",
            "same_xyz",
            "ring_y",
            "alternating_ring_z",
            "linear_x{2}",
            "linear_z{-1}",
            "stochastic{0.5:1,0.5:3}",
            "stochastic{1:0}",
        ] {
            assert_eq!(check(f), Ok(()), "{f}");
        }
    }

    #[test]
    fn rejects_with_a_reason() {
        let cases = [
            ("ring_w", "unknown fanout_filter 'ring_w'"),
            ("linear_q{1}", "unknown fanout_filter"),
            ("linear_x{a}", "must be an integer"),
            ("linear_x{1", "must end with '}'"),
            ("stochastic{}", "at least one probability:count pair"),
            ("stochastic{0.5}", "is not a probability:count pair"),
            ("stochastic{1.5:1}", "between 0 and 1"),
            ("stochastic{x:1}", "is not a number"),
            ("stochastic{0.5:-1}", "integer >= 0"),
        ];
        for (f, want) in cases {
            let err = check(f).unwrap_err();
            assert!(err.to_string().contains(want), "{f}: {err}");
        }
    }
}
