//! Marks: why a run's result cannot be fully trusted.
//!
//! A workload names them from its record ([`crate::Workload::marks`]): a
//! host that was busy or changed speed during the run, a figure outside
//! what the job can vouch for. The harness prints each on stderr, keeps
//! them in the report's metrics under [`KEY`] (so the results store has
//! them too) and shows them wherever a run's result is shown: `results
//! list` and the report page say `ok, marked` instead of `ok`.

use serde_json::Value;

/// The metrics key the harness keeps a run's marks under (absent when the
/// run has none, so unmarked reports keep their shape).
pub const KEY: &str = "marks";

/// The marks kept in a run's metrics.
pub fn of(metrics: &Value) -> Vec<String> {
    metrics
        .get(KEY)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|m| m.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The result as shown: `ok`, `FAILED`, or either followed by `, marked`.
pub fn result_text(success: bool, metrics: &Value) -> String {
    let base = if success { "ok" } else { "FAILED" };
    if of(metrics).is_empty() {
        base.to_string()
    } else {
        format!("{base}, marked")
    }
}

/// The stderr line of one mark.
pub fn line(job: &str, mark: &str) -> String {
    format!("warning: {job}: result marked: {mark}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn marks_are_read_from_the_metrics_and_shown_with_the_result() {
        let none = json!({"qps": 1.0});
        assert!(of(&none).is_empty());
        assert_eq!(result_text(true, &none), "ok");
        assert_eq!(result_text(false, &none), "FAILED");
        let marked = json!({"qps": 1.0, "marks": ["host busy before the run"]});
        assert_eq!(of(&marked), vec!["host busy before the run".to_string()]);
        assert_eq!(result_text(true, &marked), "ok, marked");
        assert_eq!(result_text(false, &marked), "FAILED, marked");
        assert_eq!(
            line("calibrate", "x"),
            "warning: calibrate: result marked: x"
        );
    }
}
