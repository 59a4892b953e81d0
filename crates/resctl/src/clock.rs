//! Local wall-clock time for logs, reports and result headers.

use std::time::{SystemTime, UNIX_EPOCH};

/// A broken-down local time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Local {
    pub year: i32,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub min: u32,
    pub sec: u32,
    pub micros: u32,
    /// Seconds east of UTC.
    pub offset: i64,
}

impl Local {
    /// `t` in the local time zone.
    pub fn at(t: SystemTime) -> Local {
        let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = d.as_secs() as libc::time_t;
        // SAFETY: localtime_r fills the zeroed struct from a valid time.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are to live locals of the right types.
        unsafe { libc::localtime_r(&secs, &mut tm) };
        Local {
            year: tm.tm_year + 1900,
            month: (tm.tm_mon + 1) as u32,
            day: tm.tm_mday as u32,
            hour: tm.tm_hour as u32,
            min: tm.tm_min as u32,
            sec: tm.tm_sec as u32,
            micros: d.subsec_micros(),
            offset: tm.tm_gmtoff,
        }
    }

    pub fn now() -> Local {
        Local::at(SystemTime::now())
    }

    /// `2021-06-22 17:23:03`
    pub fn date_time(&self) -> String {
        format!("{} {}", self.date(), self.time())
    }

    /// `2021-06-22`
    pub fn date(&self) -> String {
        format!("{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }

    /// `17:23:03`
    pub fn time(&self) -> String {
        format!("{:02}:{:02}:{:02}", self.hour, self.min, self.sec)
    }

    /// RFC 3339 with microseconds and the offset.
    pub fn rfc3339(&self) -> String {
        let sign = if self.offset < 0 { '-' } else { '+' };
        let off = self.offset.abs();
        format!(
            "{}T{}.{:06}{sign}{:02}:{:02}",
            self.date(),
            self.time(),
            self.micros,
            off / 3600,
            off % 3600 / 60
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        let t = UNIX_EPOCH + std::time::Duration::from_micros(1_624_382_583_000_123);
        let l = Local::at(t);
        let s = l.rfc3339();
        assert_eq!(s.len(), "2021-06-22T17:23:03.000123+00:00".len(), "{s}");
        assert!(s.contains(".000123"), "{s}");
        assert_eq!(l.date_time().len(), 19);
    }
}
