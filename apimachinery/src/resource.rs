//! Mirrors apimachinery's pkg/api/resource: `resource.Quantity` strings as exact integers.

/// A `resource.Quantity` in billionths ("nano-units"), rounded up, or `None` if it does not parse
/// or does not fit. Grammar: `[+-]digits[.digits][suffix]`, the suffix one of the binary `Ki Mi Gi
/// Ti Pi Ei`, the decimal `n u m k M G T P E`, or an exponent `e3` / `E-2`.
pub fn parse_quantity_nanos(s: &str) -> Option<i128> {
    let (negative, rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let number_len = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_len);
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() || frac.contains('.') {
        return None;
    }
    let mut mantissa: i128 = 0;
    for d in whole.chars().chain(frac.chars()) {
        mantissa = mantissa
            .checked_mul(10)?
            .checked_add(i128::from(d.to_digit(10)?))?;
    }
    // value = mantissa · 2^binary · 10^decimal, in nano-units (hence the +9).
    let frac_len = i32::try_from(frac.len()).ok()?;
    let (binary, decimal): (u32, i32) = match suffix {
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "" => (0, 0),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        exp => {
            let digits = exp.strip_prefix(['e', 'E'])?;
            let unsigned = digits.strip_prefix(['+', '-']).unwrap_or(digits);
            if unsigned.is_empty() || !unsigned.chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            (0, digits.parse::<i32>().ok()?)
        }
    };
    let mut value = mantissa.checked_mul(1i128.checked_shl(binary)?)?;
    let exponent = decimal.checked_sub(frac_len)?.checked_add(9)?;
    if exponent >= 0 {
        value = value.checked_mul(10i128.checked_pow(u32::try_from(exponent).ok()?)?)?;
    } else {
        // Finer than a nano-unit: round up, as Kubernetes does.
        let divisor = 10i128.checked_pow(u32::try_from(-exponent).ok()?);
        value = match divisor {
            Some(d) => (value + d - 1) / d,
            None => i128::from(value > 0),
        };
    }
    Some(if negative { -value } else { value })
}

/// A quantity in units of `nanos_per_unit` nano-units, rounded up.
fn parse_quantity_in(s: &str, nanos_per_unit: i128) -> Option<i64> {
    let nanos = parse_quantity_nanos(s)?;
    let n = nanos.div_euclid(nanos_per_unit) + i128::from(nanos.rem_euclid(nanos_per_unit) != 0);
    i64::try_from(n).ok()
}

/// A quantity in milli-units, rounded up (cpu in millicores: "500m" → 500, "2" → 2000).
pub fn parse_quantity_milli(s: &str) -> Option<i64> {
    parse_quantity_in(s, 1_000_000)
}

/// A quantity in whole units, rounded up (memory in bytes: "1Ki" → 1024, "0.5" → 1).
pub fn parse_quantity_units(s: &str) -> Option<i64> {
    parse_quantity_in(s, 1_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantity_table() {
        let cases: &[(&str, Option<i128>)] = &[
            ("0", Some(0)),
            ("1", Some(1_000_000_000)),
            ("+1", Some(1_000_000_000)),
            ("-1", Some(-1_000_000_000)),
            ("500m", Some(500_000_000)),
            ("0.5", Some(500_000_000)),
            (".5", Some(500_000_000)),
            ("1.", Some(1_000_000_000)),
            ("100n", Some(100)),
            ("1u", Some(1_000)),
            ("1.5n", Some(2)),
            ("1k", Some(1_000_000_000_000)),
            ("1Ki", Some(1_024_000_000_000)),
            ("1Mi", Some(1_048_576_000_000_000)),
            ("1Gi", Some(1_073_741_824_000_000_000)),
            ("1024Mi", Some(1_073_741_824_000_000_000)),
            ("1G", Some(1_000_000_000_000_000_000)),
            ("1E", Some(1_000_000_000_000_000_000_000_000_000)),
            ("1e3", Some(1_000_000_000_000)),
            ("1E3", Some(1_000_000_000_000)),
            ("1e-3", Some(1_000_000)),
            ("1e+3", Some(1_000_000_000_000)),
            ("1e-12", Some(1)),
            ("0.5Ki", Some(512_000_000_000)),
            ("", None),
            (".", None),
            ("m", None),
            ("1x", None),
            ("1e", None),
            ("1e+", None),
            ("1.2.3", None),
            ("1 Gi", None),
            ("99999999999999999999999999999999999999999", None),
            ("1e100", None),
        ];
        for (s, want) in cases {
            assert_eq!(parse_quantity_nanos(s), *want, "{s:?}");
        }
    }

    #[test]
    fn milli_and_units_round_up() {
        assert_eq!(parse_quantity_milli("500m"), Some(500));
        assert_eq!(parse_quantity_milli("2"), Some(2000));
        assert_eq!(parse_quantity_milli("0.0001"), Some(1));
        assert_eq!(parse_quantity_units("1Ki"), Some(1024));
        assert_eq!(parse_quantity_units("1500m"), Some(2));
        assert_eq!(parse_quantity_units("bogus"), None);
    }
}
