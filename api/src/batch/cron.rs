//! Mirrors github.com/robfig/cron/v3 (parser.go, spec.go, constantdelay.go), the schedule
//! syntax Kubernetes' CronJob takes (`cron.ParseStandard`): five fields or a descriptor.
//!
//! A schedule is `minute hour day-of-month month day-of-week`, each field a comma-separated
//! list of `*`, `?`, `n`, `a-b`, optionally with `/step` (`n/step` runs from n to the field's
//! maximum); months and weekdays also take three-letter English names (`JAN`, `MON`), in any
//! case. Descriptors stand for common schedules: `@yearly` (`@annually`), `@monthly`,
//! `@weekly`, `@daily` (`@midnight`), `@hourly`, and `@every <duration>` a fixed interval.
//!
//! When both day fields are restricted a day matches if *either* does (cron's rule: `0 0 13 *
//! FRI` runs on every 13th and every Friday); when either is `*` only the other decides.
//!
//! [`Schedule::next_after`] finds the first activation strictly after a time, in UTC or
//! ([`Schedule::next_after_in`]) in a fixed UTC offset. Named time zones need the tz database,
//! which this crate does not carry: the CronJob's `timeZone` is validated by name only.

use chrono::{DateTime, Datelike, FixedOffset, NaiveDate, NaiveDateTime, TimeDelta, Timelike, Utc};

/// The fields of a five-field schedule, with the range each takes.
const MINUTES: Bounds = Bounds { min: 0, max: 59, names: &[] };
const HOURS: Bounds = Bounds { min: 0, max: 23, names: &[] };
const DOM: Bounds = Bounds { min: 1, max: 31, names: &[] };
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
};
const DOW: Bounds = Bounds { min: 0, max: 6, names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"] };

/// How far ahead [`Schedule::next_after`] looks before deciding a schedule never fires
/// (`0 0 30 2 *`): robfig's five years, which every real date pattern repeats within.
const SEARCH_YEARS: i32 = 5;

struct Bounds {
    min: u32,
    max: u32,
    /// Names for the values from `min` on, lower case.
    names: &'static [&'static str],
}

/// A parsed cron schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    /// Five fields, each a bit set of the values it allows.
    Spec(Spec),
    /// `@every <duration>`: a fixed interval, whole seconds of at least one.
    Every(TimeDelta),
}

/// The bit sets of a five-field schedule (bit n set: value n allowed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    minute: u64,
    hour: u64,
    dom: u64,
    month: u64,
    dow: u64,
    /// The day fields were `*` or `?` (with no step over 1): such a field does not take part in
    /// the either-day rule.
    dom_star: bool,
    dow_star: bool,
}

impl Schedule {
    /// cron.ParseStandard: a schedule, or the error naming what is wrong with it.
    pub fn parse(spec: &str) -> Result<Schedule, String> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err("empty spec string".to_string());
        }
        if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
            return Err("time zones in the schedule are not supported, use the timeZone field instead".to_string());
        }
        if spec.starts_with('@') {
            return parse_descriptor(spec);
        }
        let fields: Vec<&str> = spec.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!("expected exactly 5 fields, found {}: {spec}", fields.len()));
        }
        let (minute, _) = parse_field(fields[0], &MINUTES)?;
        let (hour, _) = parse_field(fields[1], &HOURS)?;
        let (dom, dom_star) = parse_field(fields[2], &DOM)?;
        let (month, _) = parse_field(fields[3], &MONTHS)?;
        let (dow, dow_star) = parse_field(fields[4], &DOW)?;
        Ok(Schedule::Spec(Spec { minute, hour, dom, month, dow, dom_star, dow_star }))
    }

    /// The first activation strictly after `t`, reading the schedule in UTC; `None` if the
    /// schedule never fires within five years (`0 0 30 2 *`).
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.next_after_in(t, FixedOffset::east_opt(0)?)
    }

    /// The first activation strictly after `t`, reading the schedule's hours and days in the
    /// fixed UTC `offset` (`0 9 * * *` at +02:00 fires at 07:00 UTC).
    pub fn next_after_in(&self, t: DateTime<Utc>, offset: FixedOffset) -> Option<DateTime<Utc>> {
        match self {
            // robfig drops the sub-second part, so activations fall on whole seconds.
            Schedule::Every(d) => Some(t - TimeDelta::nanoseconds(i64::from(t.nanosecond())) + *d),
            Schedule::Spec(s) => {
                let local = t.with_timezone(&offset).naive_local();
                let found = s.next_local(local)?;
                Some(found.and_local_timezone(offset).single()?.with_timezone(&Utc))
            }
        }
    }
}

impl Spec {
    fn day_matches(&self, d: NaiveDate) -> bool {
        let dom = has(self.dom, d.day());
        let dow = has(self.dow, d.weekday().num_days_from_sunday());
        if self.dom_star || self.dow_star { dom && dow } else { dom || dow }
    }

    /// The first matching minute strictly after `t`, wall-clock: skip a whole month, day or hour
    /// as soon as it cannot match, so a search takes at most a few thousand steps.
    fn next_local(&self, t: NaiveDateTime) -> Option<NaiveDateTime> {
        let start = t.date().and_hms_opt(t.hour(), t.minute(), 0)? + TimeDelta::minutes(1);
        let limit = start.year() + SEARCH_YEARS;
        let mut c = start;
        while c.year() <= limit {
            if !has(self.month, c.month()) {
                let (y, m) = if c.month() == 12 { (c.year() + 1, 1) } else { (c.year(), c.month() + 1) };
                c = NaiveDate::from_ymd_opt(y, m, 1)?.and_hms_opt(0, 0, 0)?;
            } else if !self.day_matches(c.date()) {
                c = c.date().succ_opt()?.and_hms_opt(0, 0, 0)?;
            } else if !has(self.hour, c.hour()) {
                c = c.date().and_hms_opt(c.hour(), 0, 0)? + TimeDelta::hours(1);
            } else if !has(self.minute, c.minute()) {
                c += TimeDelta::minutes(1);
            } else {
                return Some(c);
            }
        }
        None
    }
}

fn has(bits: u64, v: u32) -> bool {
    bits & (1 << v) != 0
}

/// parseDescriptor: the `@` forms.
fn parse_descriptor(spec: &str) -> Result<Schedule, String> {
    let five = match spec {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        _ => {
            let Some(d) = spec.strip_prefix("@every ") else {
                return Err(format!("unrecognized descriptor: {spec}"));
            };
            let nanos = parse_duration(d.trim()).ok_or_else(|| format!("failed to parse duration {spec}"))?;
            // Less than a second is a second; the rest is whole seconds.
            let secs = (nanos / 1_000_000_000).max(1);
            return Ok(Schedule::Every(TimeDelta::seconds(secs)));
        }
    };
    Schedule::parse(five)
}

/// Go's time.ParseDuration for non-negative durations (`1h30m`, `90s`, `1.5h`), in nanoseconds.
fn parse_duration(s: &str) -> Option<i64> {
    if s == "0" {
        return Some(0);
    }
    let mut total = 0f64;
    let mut rest = s;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        total += n * scale;
        rest = &rest[unit_len..];
    }
    (total <= i64::MAX as f64).then_some(total as i64)
}

/// getField: a comma-separated list of ranges, as a bit set, and whether it was a bare `*`/`?`.
fn parse_field(field: &str, b: &Bounds) -> Result<(u64, bool), String> {
    let mut bits = 0;
    let mut star = false;
    for expr in field.split(',') {
        let (r, s) = parse_range(expr, b)?;
        bits |= r;
        star |= s;
    }
    Ok((bits, star))
}

/// getRange: `*`, `?`, `n` or `a-b`, each with an optional `/step`.
fn parse_range(expr: &str, b: &Bounds) -> Result<(u64, bool), String> {
    let (range, step) = match expr.split('/').collect::<Vec<_>>()[..] {
        [r] => (r, None),
        [r, s] => (r, Some(s)),
        _ => return Err(format!("too many slashes: {expr}")),
    };
    let (mut start, mut end, mut star) = match range.split('-').collect::<Vec<_>>()[..] {
        ["*" | "?"] => (b.min, b.max, true),
        [one] => {
            let v = parse_value(one, b)?;
            (v, v, false)
        }
        [lo, hi] => (parse_value(lo, b)?, parse_value(hi, b)?, false),
        _ => return Err(format!("too many hyphens: {expr}")),
    };
    let step = match step {
        None => 1,
        Some(s) => {
            let step = parse_int(s)?;
            if step == 0 {
                return Err(format!("step of range should be a positive number: {expr}"));
            }
            // `n/step` means from n to the end of the field.
            if !star && !range.contains('-') {
                end = b.max;
            }
            if step > 1 {
                star = false;
            }
            step
        }
    };
    if start < b.min {
        return Err(format!("beginning of range ({start}) below minimum ({}): {expr}", b.min));
    }
    if end > b.max {
        return Err(format!("end of range ({end}) above maximum ({}): {expr}", b.max));
    }
    if start > end {
        return Err(format!("beginning of range ({start}) beyond end of range ({end}): {expr}"));
    }
    let mut bits = 0u64;
    while start <= end {
        bits |= 1 << start;
        start += step;
    }
    Ok((bits, star))
}

/// parseIntOrName: a number, or one of the field's names (any case).
fn parse_value(s: &str, b: &Bounds) -> Result<u32, String> {
    let lower = s.to_ascii_lowercase();
    match b.names.iter().position(|n| *n == lower) {
        Some(i) => Ok(b.min + i as u32),
        None => parse_int(s),
    }
}

/// mustParseInt: a non-negative decimal.
fn parse_int(s: &str) -> Result<u32, String> {
    s.parse::<u32>().map_err(|e| format!("failed to parse int from {s}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).expect("test time").with_timezone(&Utc)
    }

    /// The next `n` activations of `spec` after `from`, as RFC 3339 strings.
    fn next(spec: &str, from: &str, n: usize) -> Vec<String> {
        let s = Schedule::parse(spec).expect("test schedule parses");
        let mut t = at(from);
        let mut out = Vec::new();
        for _ in 0..n {
            t = s.next_after(t).expect("the schedule fires");
            out.push(t.to_rfc3339());
        }
        out
    }

    #[test]
    fn parses_fields_and_descriptors() {
        for ok in [
            "* * * * *", "*/5 * * * *", "0 0 1 1 *", "0-30/10 9-17 * * MON-FRI", "15 3 * jan,Jul sun",
            "0 0 ? * ?", "5/15 * * * *", "0 0 29 2 *", "0 12 1,15 * 1-5", "@hourly", "@daily", "@midnight",
            "@weekly", "@monthly", "@yearly", "@annually", "@every 1h30m", "@every 90s",
        ] {
            assert!(Schedule::parse(ok).is_ok(), "{ok}: {:?}", Schedule::parse(ok));
        }
        assert_eq!(Schedule::parse("@daily"), Schedule::parse("0 0 * * *"));
        assert_eq!(Schedule::parse("@every 1.5m"), Ok(Schedule::Every(TimeDelta::seconds(90))));
        assert_eq!(Schedule::parse("@every 10ms"), Ok(Schedule::Every(TimeDelta::seconds(1))));
        for (bad, err) in [
            ("", "empty spec string"),
            ("* * * *", "expected exactly 5 fields, found 4: * * * *"),
            ("0 0 * * * *", "expected exactly 5 fields, found 6: 0 0 * * * *"),
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            ("* 24 * * *", "end of range (24) above maximum (23): 24"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            ("* * * 13 *", "end of range (13) above maximum (12): 13"),
            ("* * * * 7", "end of range (7) above maximum (6): 7"),
            ("30-10 * * * *", "beginning of range (30) beyond end of range (10): 30-10"),
            ("*/0 * * * *", "step of range should be a positive number: */0"),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            ("*/2/3 * * * *", "too many slashes: */2/3"),
            ("@fortnightly", "unrecognized descriptor: @fortnightly"),
            ("@every fast", "failed to parse duration @every fast"),
        ] {
            assert_eq!(Schedule::parse(bad), Err(err.to_string()), "{bad}");
        }
        assert!(Schedule::parse("* * * FOO *").is_err_and(|e| e.starts_with("failed to parse int from FOO")));
        assert!(Schedule::parse("CRON_TZ=UTC 0 * * * *").is_err());
    }

    #[test]
    fn next_after_steps_ranges_and_names() {
        assert_eq!(next("*/15 * * * *", "2024-01-01T10:07:30Z", 3), ["2024-01-01T10:15:00+00:00", "2024-01-01T10:30:00+00:00", "2024-01-01T10:45:00+00:00"]);
        // Strictly after: a time on the schedule gives the next one.
        assert_eq!(next("0 * * * *", "2024-01-01T10:00:00Z", 1), ["2024-01-01T11:00:00+00:00"]);
        // 5/20: from 5 to the end of the hour.
        assert_eq!(next("5/20 * * * *", "2024-01-01T10:30:00Z", 3), ["2024-01-01T10:45:00+00:00", "2024-01-01T11:05:00+00:00", "2024-01-01T11:25:00+00:00"]);
        // Weekdays at 9, 13 and 17: after the last on Friday comes Monday.
        assert_eq!(next("0 9-17/4 * * MON-FRI", "2024-03-08T16:00:00Z", 3), ["2024-03-08T17:00:00+00:00", "2024-03-11T09:00:00+00:00", "2024-03-11T13:00:00+00:00"]);
        assert_eq!(next("30 6 1 jan,JUL *", "2024-02-10T00:00:00Z", 2), ["2024-07-01T06:30:00+00:00", "2025-01-01T06:30:00+00:00"]);
        assert_eq!(next("@yearly", "2024-12-31T23:59:59Z", 1), ["2025-01-01T00:00:00+00:00"]);
        assert_eq!(next("@weekly", "2024-03-06T12:00:00Z", 1), ["2024-03-10T00:00:00+00:00"]);
    }

    #[test]
    fn next_after_either_day_rule() {
        // Both restricted: the 13th or any Friday. 2024-09-01 is a Sunday.
        assert_eq!(next("0 0 13 * FRI", "2024-09-01T00:00:00Z", 3), ["2024-09-06T00:00:00+00:00", "2024-09-13T00:00:00+00:00", "2024-09-20T00:00:00+00:00"]);
        assert_eq!(next("0 0 13 * 1", "2024-09-01T00:00:00Z", 2), ["2024-09-02T00:00:00+00:00", "2024-09-09T00:00:00+00:00"]);
        // Day of week `*`: only the day of month decides, and the other way round.
        assert_eq!(next("0 0 13 * *", "2024-09-01T00:00:00Z", 1), ["2024-09-13T00:00:00+00:00"]);
        assert_eq!(next("0 0 * * 5", "2024-09-07T00:00:00Z", 1), ["2024-09-13T00:00:00+00:00"]);
        // A step over 1 on `*` restricts the field: every other day, or Sundays.
        assert_eq!(next("0 0 */2 * 0", "2024-09-01T12:00:00Z", 3), ["2024-09-03T00:00:00+00:00", "2024-09-05T00:00:00+00:00", "2024-09-07T00:00:00+00:00"]);
    }

    #[test]
    fn next_after_feb_29_and_never() {
        assert_eq!(next("0 0 29 2 *", "2024-03-01T00:00:00Z", 2), ["2028-02-29T00:00:00+00:00", "2032-02-29T00:00:00+00:00"]);
        assert_eq!(next("0 0 29 2 *", "2023-12-31T00:00:00Z", 1), ["2024-02-29T00:00:00+00:00"]);
        let never = Schedule::parse("0 0 30 2 *").expect("parses");
        assert_eq!(never.next_after(at("2024-01-01T00:00:00Z")), None);
        // Month ends: the 31st skips the short months.
        assert_eq!(next("0 0 31 * *", "2024-04-01T00:00:00Z", 2), ["2024-05-31T00:00:00+00:00", "2024-07-31T00:00:00+00:00"]);
    }

    #[test]
    fn next_after_in_an_offset_and_every() {
        let s = Schedule::parse("0 9 * * *").expect("parses");
        let plus2 = FixedOffset::east_opt(2 * 3600).expect("valid offset");
        assert_eq!(s.next_after_in(at("2024-05-01T06:00:00Z"), plus2), Some(at("2024-05-01T07:00:00Z")));
        assert_eq!(s.next_after_in(at("2024-05-01T07:00:00Z"), plus2), Some(at("2024-05-02T07:00:00Z")));
        let minus5 = FixedOffset::west_opt(5 * 3600).expect("valid offset");
        // 23:30 UTC on the 1st is 18:30 on the 1st at -05:00: 09:00 there on the 2nd.
        assert_eq!(s.next_after_in(at("2024-05-01T23:30:00Z"), minus5), Some(at("2024-05-02T14:00:00Z")));

        let every = Schedule::parse("@every 1h30m").expect("parses");
        assert_eq!(every.next_after(at("2024-05-01T06:00:00.250Z")), Some(at("2024-05-01T07:30:00Z")));
    }
}
