//! `cpu-limit`: benchpress runs the job's binary under `taskset MASK`. The
//! workloads run in this process, so the hook sets the CPU affinity of the
//! thread that runs the job before it starts (every thread and process the
//! job starts inherits it) and restores it after. The options are the mask
//! itself, a hex string (`"3"`, `"0xf0"`); a number is read as benchpress
//! reads it (its decimal digits as hex). Hooks listed after this one start
//! their threads under the mask too.

use super::{Error, Hook, HookContext};
use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;
use serde_json::{Value, json};

/// The CPUs a mask selects, lowest first.
pub(crate) fn mask(o: &Value) -> Result<(String, Vec<usize>), String> {
    let text = match o {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) if n.is_u64() => n.to_string(),
        Value::Null => return Err("needs a CPU mask as its options, e.g. cpu-limit:\"3\"".into()),
        other => {
            return Err(format!(
                "the options must be a hex CPU mask string, got {other}"
            ));
        }
    };
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(&text);
    if digits.is_empty() {
        return Err(format!(
            "'{text}' is not a valid CPU mask (expected hex digits)"
        ));
    }
    let mut cpus = Vec::new();
    for (i, c) in digits.chars().rev().enumerate() {
        let v = c
            .to_digit(16)
            .ok_or_else(|| format!("'{text}' is not a valid CPU mask (expected hex digits)"))?;
        for bit in 0..4 {
            if v & (1 << bit) != 0 {
                cpus.push(i * 4 + bit);
            }
        }
    }
    if cpus.is_empty() {
        return Err(format!("the CPU mask '{text}' selects no CPU"));
    }
    Ok((text, cpus))
}

pub struct CpuLimit {
    text: String,
    cpus: Vec<usize>,
    saved: Option<CpuSet>,
    applied: Vec<usize>,
}

impl CpuLimit {
    pub(crate) fn new(o: &Value) -> Result<Self, String> {
        let (text, cpus) = mask(o)?;
        Ok(CpuLimit {
            text,
            cpus,
            saved: None,
            applied: Vec::new(),
        })
    }
}

impl Hook for CpuLimit {
    fn before(&mut self, _ctx: &HookContext) -> Result<(), Error> {
        let current = sched_getaffinity(Pid::from_raw(0))
            .map_err(|e| Error::Host(format!("cannot read this thread's CPU affinity: {e}")))?;
        let mut set = CpuSet::new();
        let mut applied = Vec::new();
        for &c in &self.cpus {
            if c < CpuSet::count() && current.is_set(c).unwrap_or(false) {
                set.set(c)
                    .map_err(|e| Error::Host(format!("CPU {c}: {e}")))?;
                applied.push(c);
            }
        }
        if applied.is_empty() {
            return Err(Error::Host(format!(
                "the CPU mask '{}' selects CPUs {:?}, none of which this process may run on",
                self.text, self.cpus
            )));
        }
        sched_setaffinity(Pid::from_raw(0), &set).map_err(|e| {
            Error::Host(format!(
                "cannot set the CPU affinity to '{}': {e}",
                self.text
            ))
        })?;
        self.saved = Some(current);
        self.applied = applied;
        Ok(())
    }

    fn after(&mut self, _ctx: &HookContext) -> Result<Value, Error> {
        if let Some(saved) = self.saved.take() {
            sched_setaffinity(Pid::from_raw(0), &saved)
                .map_err(|e| Error::Host(format!("cannot restore the CPU affinity: {e}")))?;
        }
        let ignored: Vec<usize> = self
            .cpus
            .iter()
            .copied()
            .filter(|c| !self.applied.contains(c))
            .collect();
        Ok(json!({
            "mask": self.text,
            "cpus": self.applied,
            "ignored_cpus": ignored,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_parse_as_taskset_reads_them() {
        assert_eq!(mask(&json!("3")).unwrap().1, vec![0, 1]);
        assert_eq!(mask(&json!("0xf0")).unwrap().1, vec![4, 5, 6, 7]);
        assert_eq!(mask(&json!("100000000")).unwrap().1, vec![32]);
        // A number: its decimal digits read as hex, as benchpress' str().
        assert_eq!(mask(&json!(10)).unwrap().1, vec![4]);
        for bad in [
            json!("xyz"),
            json!("0"),
            json!(""),
            json!(["1"]),
            json!(-1),
            Value::Null,
        ] {
            assert!(mask(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_job_thread_runs_on_the_mask_and_is_restored() {
        let ctx = HookContext {
            out_dir: std::env::temp_dir(),
            job: "j".into(),
            iteration: 1,
        };
        let before = sched_getaffinity(Pid::from_raw(0)).unwrap();
        let first = (0..CpuSet::count())
            .find(|&c| before.is_set(c).unwrap())
            .unwrap();
        let mut h = CpuLimit::new(&json!(format!("{:x}", 1u128 << first))).unwrap();
        h.before(&ctx).unwrap();
        // A thread started by the job inherits the mask.
        let inside = std::thread::spawn(|| {
            let s = sched_getaffinity(Pid::from_raw(0)).unwrap();
            (0..CpuSet::count())
                .filter(|&c| s.is_set(c).unwrap())
                .collect::<Vec<_>>()
        })
        .join()
        .unwrap();
        assert_eq!(inside, vec![first]);
        let s = h.after(&ctx).unwrap();
        assert_eq!(s["cpus"], json!([first]));
        assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), before);
        // A mask of CPUs this process cannot use fails the job.
        let mut h = CpuLimit::new(&json!(format!("{:x}", 1u128 << 100))).unwrap();
        assert!(
            h.before(&ctx)
                .unwrap_err()
                .to_string()
                .contains("none of which")
        );
    }
}
