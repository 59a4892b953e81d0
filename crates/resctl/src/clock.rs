//! Local wall-clock time for logs, reports and result headers.

use std::time::SystemTime;

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
    /// `t` in the local time zone (jiff: `TZ`, else /etc/localtime).
    pub fn at(t: SystemTime) -> Local {
        let ts = jiff::Timestamp::try_from(t).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let z = ts.to_zoned_datetime(jiff::tz::TimeZone::system());
        Local {
            year: i32::from(z.year()),
            month: z.month() as u32,
            day: z.day() as u32,
            hour: z.hour() as u32,
            min: z.minute() as u32,
            sec: z.second() as u32,
            micros: (z.subsec_nanosecond() / 1000) as u32,
            offset: i64::from(z.offset().seconds()),
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

    /// `06/22/21 17:23:03`: strftime's `%x %T` in the C locale, as
    /// upstream prints periods.
    pub fn x_t(&self) -> String {
        format!(
            "{:02}/{:02}/{:02} {}",
            self.month,
            self.day,
            self.year.rem_euclid(100),
            self.time()
        )
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

    use std::time::UNIX_EPOCH;

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
