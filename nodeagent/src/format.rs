//! Mirrors kubelet's pkg/kubelet/util/format: how values are written into the messages users
//! read (events, conditions), so that they read as kubelet's do.

use std::time::Duration;

/// Go's time.Duration formatting (`3m0.5s`, `1.5ms`), for messages users compare with kubelet's.
pub(crate) fn go_duration(d: Duration) -> String {
    fn with_fraction(n: u128, unit: u128) -> String {
        let (whole, rest) = (n / unit, n % unit);
        if rest == 0 {
            return whole.to_string();
        }
        let width = unit.ilog10() as usize;
        let frac = format!("{rest:0width$}");
        format!("{whole}.{}", frac.trim_end_matches('0'))
    }
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", with_fraction(nanos, 1_000));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", with_fraction(nanos, 1_000_000));
    }
    let secs = d.as_secs();
    let (h, m) = (secs / 3600, (secs % 3600) / 60);
    let s = with_fraction(u128::from(secs % 60) * 1_000_000_000 + u128::from(d.subsec_nanos()), 1_000_000_000);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, m) => format!("{m}m{s}s"),
        (h, m) => format!("{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(250), "250ns"),
            (Duration::from_micros(1500), "1.5ms"),
            (Duration::from_nanos(12_300), "12.3µs"),
            (Duration::from_millis(2500), "2.5s"),
            (Duration::from_secs(180), "3m0s"),
            (Duration::from_millis(180_500), "3m0.5s"),
            (Duration::from_secs(3723), "1h2m3s"),
        ];
        for (d, want) in cases {
            assert_eq!(go_duration(d), want);
        }
    }
}
