//! Puppet's rich data types as values: `Binary`, `SemVer`, `Timespan` and `Timestamp`,
//! made by calling the type (`Binary('aGk=')`, `SemVer('1.2.3')`, `Timespan(3600)`,
//! `Timestamp('2020-01-01T00:00:00Z')`), compared, added where Puppet adds them, and
//! written as Puppet writes them (`aGk=`, `1.2.3`, `0-01:00:00.0`,
//! `2020-01-01T00:00:00.000000000 UTC`). In a catalog each is its text.

use crate::calendar::{civil_from_days, days_from_civil};
use std::cmp::Ordering;

/// Nanoseconds in a second.
const NANOS: i128 = 1_000_000_000;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Rich {
    Binary(Vec<u8>),
    SemVer(SemVer),
    /// A duration, in nanoseconds.
    Timespan(i128),
    /// A moment, in nanoseconds since 1970-01-01T00:00:00 UTC.
    Timestamp(i128),
}

/// A semantic version: `1.2.3-rc.1+build.5`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SemVer {
    numbers: [u64; 3],
    pre: Vec<String>,
    build: String,
}

impl Rich {
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Rich::Binary(_) => "Binary",
            Rich::SemVer(_) => "SemVer",
            Rich::Timespan(_) => "Timespan",
            Rich::Timestamp(_) => "Timestamp",
        }
    }

    /// As Puppet writes the value (interpolation, `String()`, the catalog).
    pub(crate) fn text(&self) -> String {
        match self {
            Rich::Binary(bytes) => crate::eval::stdlib::base64_encode(bytes),
            Rich::SemVer(version) => version.to_string(),
            Rich::Timespan(nanos) => format_timespan(*nanos, "%D-%H:%M:%S.%-N"),
            Rich::Timestamp(nanos) => format_timestamp(*nanos, "%Y-%m-%dT%H:%M:%S.%N %Z"),
        }
    }

    /// Puppet's order of two values of one type (none for two binaries, or two kinds).
    pub(crate) fn compare(&self, other: &Rich) -> Option<Ordering> {
        match (self, other) {
            (Rich::SemVer(a), Rich::SemVer(b)) => Some(a.precedence(b)),
            (Rich::Timespan(a), Rich::Timespan(b)) | (Rich::Timestamp(a), Rich::Timestamp(b)) => {
                Some(a.cmp(b))
            }
            _ => None,
        }
    }
}

impl SemVer {
    /// Parses `MAJOR.MINOR.PATCH[-PRE][+BUILD]`, as semver.org's grammar has it.
    pub(crate) fn parse(text: &str) -> Result<SemVer, String> {
        let bad =
            || format!("`{text}` is not a semantic version (MAJOR.MINOR.PATCH[-pre][+build])");
        let (rest, build) = text.split_once('+').unwrap_or((text, ""));
        let (core, pre) = rest.split_once('-').unwrap_or((rest, ""));
        let parts: Vec<&str> = core.split('.').collect();
        let [major, minor, patch] = parts.as_slice() else {
            return Err(bad());
        };
        let number = |part: &str| {
            if part.is_empty()
                || (part.len() > 1 && part.starts_with('0'))
                || !part.bytes().all(|b| b.is_ascii_digit())
            {
                return Err(bad());
            }
            part.parse::<u64>().map_err(|_| bad())
        };
        let identifiers_ok = |idents: &str| {
            idents.split('.').all(|ident| {
                !ident.is_empty()
                    && ident
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            })
        };
        if (text.contains('-') && !pre.is_empty() && !identifiers_ok(pre))
            || (rest.contains('-') && pre.is_empty())
            || (text.contains('+') && !identifiers_ok(build))
        {
            return Err(bad());
        }
        Ok(SemVer {
            numbers: [number(major)?, number(minor)?, number(patch)?],
            pre: if pre.is_empty() {
                Vec::new()
            } else {
                pre.split('.').map(str::to_owned).collect()
            },
            build: build.to_owned(),
        })
    }

    pub(crate) fn from_numbers(major: u64, minor: u64, patch: u64) -> SemVer {
        SemVer {
            numbers: [major, minor, patch],
            pre: Vec::new(),
            build: String::new(),
        }
    }

    /// semver.org's precedence: the numbers, then a pre-release before the release,
    /// pre-release identifiers numerically or by text (numbers first); build ignored.
    fn precedence(&self, other: &SemVer) -> Ordering {
        self.numbers.cmp(&other.numbers).then_with(|| {
            match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => {
                    for (a, b) in self.pre.iter().zip(&other.pre) {
                        let order = match (a.parse::<u64>(), b.parse::<u64>()) {
                            (Ok(a), Ok(b)) => a.cmp(&b),
                            (Ok(_), Err(_)) => Ordering::Less,
                            (Err(_), Ok(_)) => Ordering::Greater,
                            (Err(_), Err(_)) => a.cmp(b),
                        };
                        if order != Ordering::Equal {
                            return order;
                        }
                    }
                    self.pre.len().cmp(&other.pre.len())
                }
            }
        })
    }
}

impl std::fmt::Display for SemVer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [major, minor, patch] = self.numbers;
        write!(f, "{major}.{minor}.{patch}")?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre.join("."))?;
        }
        if !self.build.is_empty() {
            write!(f, "+{}", self.build)?;
        }
        Ok(())
    }
}

/// `Timespan(seconds)`, `Timespan('D-HH:MM:SS.frac')` or `Timespan('HH:MM:SS')`.
pub(crate) fn parse_timespan(text: &str) -> Result<i128, String> {
    let bad = || format!("`{text}` is not a timespan (`D-HH:MM:SS`, `HH:MM:SS` or seconds)");
    let (negative, text_body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (days, clock) = match text_body.split_once('-') {
        Some((days, clock)) => (days.parse::<i128>().map_err(|_| bad())?, clock),
        None => (0, text_body),
    };
    let parts: Vec<&str> = clock.split(':').collect();
    let (hours, minutes, seconds) = match parts.as_slice() {
        [h, m, s] => (*h, *m, *s),
        [m, s] => ("0", *m, *s),
        _ => return Err(bad()),
    };
    let hours: i128 = hours.parse().map_err(|_| bad())?;
    let minutes: i128 = minutes.parse().map_err(|_| bad())?;
    let seconds = parse_seconds(seconds).ok_or_else(bad)?;
    let total = ((days * 24 + hours) * 60 + minutes) * 60 * NANOS + seconds;
    Ok(if negative { -total } else { total })
}

/// `12.5` as nanoseconds.
fn parse_seconds(text: &str) -> Option<i128> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let whole: i128 = whole.parse().ok()?;
    let mut digits = fraction.to_owned();
    digits.truncate(9);
    while digits.len() < 9 {
        digits.push('0');
    }
    Some(whole * NANOS + digits.parse::<i128>().ok()?)
}

/// A number of seconds (integer or float) as nanoseconds.
pub(crate) fn seconds_to_nanos(seconds: f64) -> Option<i128> {
    let nanos = (seconds * 1e9).round();
    (nanos.is_finite() && nanos.abs() < 1e30).then_some(nanos as i128)
}

/// `Timestamp('2020-01-01T10:20:30.5Z')`, with an offset (`+01:00`), ` UTC`, or a date
/// alone.
pub(crate) fn parse_timestamp(text: &str) -> Result<i128, String> {
    let bad = || format!("`{text}` is not a timestamp (`YYYY-MM-DDTHH:MM:SS[.frac][Z|+HH:MM]`)");
    let trimmed = text.trim();
    let (date, rest) = match trimmed.find(['T', ' ']) {
        Some(at) => (&trimmed[..at], trimmed[at + 1..].trim()),
        None => (trimmed, ""),
    };
    let date_parts: Vec<&str> = date.split('-').collect();
    let [year, month, day] = date_parts.as_slice() else {
        return Err(bad());
    };
    let year: i64 = year.parse().map_err(|_| bad())?;
    let month: u32 = month.parse().map_err(|_| bad())?;
    let day: u32 = day.parse().map_err(|_| bad())?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return Err(bad());
    }
    let (clock, offset) = if rest.is_empty() {
        ("00:00:00", 0i128)
    } else if let Some(clock) = rest
        .strip_suffix('Z')
        .or_else(|| rest.strip_suffix(" UTC"))
        .or_else(|| rest.strip_suffix("UTC"))
    {
        (clock.trim(), 0)
    } else if let Some(at) = rest.rfind(['+', '-']).filter(|at| *at > 0) {
        let (clock, zone) = rest.split_at(at);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let zone = &zone[1..].replace(':', "");
        if zone.len() != 4 {
            return Err(bad());
        }
        let hours: i128 = zone[..2].parse().map_err(|_| bad())?;
        let minutes: i128 = zone[2..].parse().map_err(|_| bad())?;
        (clock, sign * (hours * 60 + minutes) * 60 * NANOS)
    } else {
        (rest, 0)
    };
    let clock_parts: Vec<&str> = clock.split(':').collect();
    let (hours, minutes, seconds) = match clock_parts.as_slice() {
        [h, m, s] => (
            h.parse::<i128>().map_err(|_| bad())?,
            m.parse::<i128>().map_err(|_| bad())?,
            parse_seconds(s).ok_or_else(bad)?,
        ),
        [h, m] => (
            h.parse::<i128>().map_err(|_| bad())?,
            m.parse::<i128>().map_err(|_| bad())?,
            0,
        ),
        _ => return Err(bad()),
    };
    let days = i128::from(days_from_civil(year, month, day));
    Ok(((days * 24 + hours) * 60 + minutes) * 60 * NANOS + seconds - offset)
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// A timestamp formatted as Ruby's `strftime` (in UTC): `%Y %m %d %e %H %I %M %S %L %N
/// %p %y %j %a %A %b %B %z %Z %s %F %T %D %%`.
pub(crate) fn format_timestamp(nanos: i128, format: &str) -> String {
    let seconds = nanos.div_euclid(NANOS);
    let fraction = nanos.rem_euclid(NANOS);
    let days = i64::try_from(seconds.div_euclid(86_400)).unwrap_or(0);
    let in_day = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let (hour, minute, second) = (in_day / 3600, (in_day / 60) % 60, in_day % 60);
    let weekday = (days + 4).rem_euclid(7) as usize;
    let day_of_year = days - days_from_civil(year, 1, 1) + 1;
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&year.to_string()),
            Some('y') => out.push_str(&format!("{:02}", year.rem_euclid(100))),
            Some('m') => out.push_str(&format!("{month:02}")),
            Some('d') => out.push_str(&format!("{day:02}")),
            Some('e') => out.push_str(&format!("{day:2}")),
            Some('j') => out.push_str(&format!("{day_of_year:03}")),
            Some('H') => out.push_str(&format!("{hour:02}")),
            Some('I') => out.push_str(&format!(
                "{:02}",
                if hour % 12 == 0 { 12 } else { hour % 12 }
            )),
            Some('M') => out.push_str(&format!("{minute:02}")),
            Some('S') => out.push_str(&format!("{second:02}")),
            Some('L') => out.push_str(&format!("{:03}", fraction / 1_000_000)),
            Some('N') => out.push_str(&format!("{fraction:09}")),
            Some('p') => out.push_str(if hour < 12 { "AM" } else { "PM" }),
            Some('a') => out.push_str(&DAYS[weekday][..3]),
            Some('A') => out.push_str(DAYS[weekday]),
            Some('b') => out.push_str(&MONTHS[month as usize - 1][..3]),
            Some('B') => out.push_str(MONTHS[month as usize - 1]),
            Some('z') => out.push_str("+0000"),
            Some('Z') => out.push_str("UTC"),
            Some('s') => out.push_str(&seconds.to_string()),
            Some('F') => out.push_str(&format!("{year}-{month:02}-{day:02}")),
            Some('T') => out.push_str(&format!("{hour:02}:{minute:02}:{second:02}")),
            Some('D') => out.push_str(&format!("{month:02}/{day:02}/{:02}", year.rem_euclid(100))),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// A timespan formatted as Puppet's `Timespan` format: `%D` days, `%H` hours, `%M`
/// minutes, `%S` seconds (each the whole span in it when no larger unit is asked for),
/// `%L` milliseconds, `%N` nanoseconds (`%-N` without trailing zeros), `%%`.
pub(crate) fn format_timespan(nanos: i128, format: &str) -> String {
    let negative = nanos < 0;
    let nanos = nanos.abs();
    let total_seconds = nanos / NANOS;
    let fraction = nanos % NANOS;
    let has =
        |unit: char| format.contains(&format!("%{unit}")) || format.contains(&format!("%-{unit}"));
    let days = total_seconds / 86_400;
    let hours = if has('D') {
        (total_seconds / 3600) % 24
    } else {
        total_seconds / 3600
    };
    let minutes = if has('D') || has('H') {
        (total_seconds / 60) % 60
    } else {
        total_seconds / 60
    };
    let seconds = if has('D') || has('H') || has('M') {
        total_seconds % 60
    } else {
        total_seconds
    };
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let trim = chars.peek() == Some(&'-');
        if trim {
            chars.next();
        }
        match chars.next() {
            Some('D') => out.push_str(&days.to_string()),
            Some('H') => out.push_str(&format!("{hours:02}")),
            Some('M') => out.push_str(&format!("{minutes:02}")),
            Some('S') => out.push_str(&format!("{seconds:02}")),
            Some('L') => out.push_str(&format!("{:03}", fraction / 1_000_000)),
            Some('N') if trim => {
                let digits = format!("{fraction:09}");
                let digits = digits.trim_end_matches('0');
                out.push_str(if digits.is_empty() { "0" } else { digits });
            }
            Some('N') => out.push_str(&format!("{fraction:09}")),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// `Binary(...)`, `SemVer(...)`, `Timespan(...)`, `Timestamp(...)`: the value, or what
/// is wrong with the arguments.
pub(crate) fn construct(
    name: &str,
    args: Vec<crate::eval::value::Val>,
) -> Result<crate::eval::value::Val, String> {
    use crate::eval::value::Val;
    let rich = match (name, args.as_slice()) {
        // Base64 by default (`%B` strict, `%b` lenient, `%u` URL-safe), `%s` a string's
        // UTF-8 bytes, `%r` its raw bytes; or an array of byte values.
        ("new_binary", [Val::Str(text), rest @ ..]) => {
            let format = match rest {
                [Val::Str(format)] => format.as_str(),
                [] => "%B",
                _ => return Err("takes a string and a format such as '%s' or '%B'".into()),
            };
            Rich::Binary(match format {
                "%s" | "%r" => text.as_bytes().to_vec(),
                "%B" | "%b" => crate::eval::stdlib::base64_decode(text)
                    .ok_or_else(|| format!("`{text}` is not base64"))?,
                "%u" => {
                    crate::eval::stdlib::base64_decode(&text.replace('-', "+").replace('_', "/"))
                        .ok_or_else(|| format!("`{text}` is not URL-safe base64"))?
                }
                other => {
                    return Err(format!(
                        "`{other}` is not a format of Binary ('%B', '%b', '%u', '%s', '%r')"
                    ));
                }
            })
        }
        ("new_binary", [Val::Array(items)]) => Rich::Binary(
            items
                .iter()
                .map(|item| match item {
                    Val::Int(byte) => {
                        u8::try_from(*byte).map_err(|_| format!("{byte} is not a byte"))
                    }
                    other => Err(format!("a byte is an integer, not {}", other.type_name())),
                })
                .collect::<Result<_, _>>()?,
        ),
        ("new_binary", [Val::Rich(rich)]) if matches!(**rich, Rich::Binary(_)) => (**rich).clone(),
        ("new_semver", [Val::Str(text)]) => Rich::SemVer(SemVer::parse(text)?),
        ("new_semver", [Val::Int(major), Val::Int(minor), Val::Int(patch), ..]) => {
            let number = |n: &i64| u64::try_from(*n).map_err(|_| format!("{n} is negative"));
            Rich::SemVer(SemVer::from_numbers(
                number(major)?,
                number(minor)?,
                number(patch)?,
            ))
        }
        ("new_timespan", [Val::Int(seconds)]) => Rich::Timespan(i128::from(*seconds) * NANOS),
        ("new_timespan", [Val::Float(seconds)]) => Rich::Timespan(
            seconds_to_nanos(*seconds).ok_or("the number of seconds is out of range")?,
        ),
        ("new_timespan", [Val::Str(text)]) => Rich::Timespan(parse_timespan(text)?),
        (
            "new_timespan",
            [
                Val::Int(days),
                Val::Int(hours),
                Val::Int(minutes),
                Val::Int(seconds),
                rest @ ..,
            ],
        ) => {
            let extra = match rest {
                [Val::Int(millis)] => i128::from(*millis) * 1_000_000,
                [] => 0,
                _ => return Err("takes days, hours, minutes, seconds and milliseconds".into()),
            };
            Rich::Timespan(
                (((i128::from(*days) * 24 + i128::from(*hours)) * 60 + i128::from(*minutes)) * 60
                    + i128::from(*seconds))
                    * NANOS
                    + extra,
            )
        }
        ("new_timestamp", []) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_err(|_| "the clock is before 1970")?;
            Rich::Timestamp(i128::try_from(now.as_nanos()).unwrap_or(0))
        }
        ("new_timestamp", [Val::Int(seconds)]) => Rich::Timestamp(i128::from(*seconds) * NANOS),
        ("new_timestamp", [Val::Float(seconds)]) => Rich::Timestamp(
            seconds_to_nanos(*seconds).ok_or("the number of seconds is out of range")?,
        ),
        ("new_timestamp", [Val::Str(text)]) => Rich::Timestamp(parse_timestamp(text)?),
        (_, [other, ..]) => {
            return Err(format!(
                "cannot make one from {} `{}`",
                other.type_name(),
                other.to_display()
            ));
        }
        (_, []) => return Err("takes a value to make one from".into()),
    };
    Ok(Val::Rich(Box::new(rich)))
}

/// `strftime(timestamp_or_timespan, format)`, and the legacy `strftime(format)` of now.
pub(crate) fn strftime(args: Vec<crate::eval::value::Val>) -> Result<String, String> {
    use crate::eval::value::Val;
    match args.as_slice() {
        [Val::Rich(rich), Val::Str(format), ..] => match &**rich {
            Rich::Timestamp(nanos) => Ok(format_timestamp(*nanos, format)),
            Rich::Timespan(nanos) => Ok(format_timespan(*nanos, format)),
            other => Err(format!(
                "takes a Timestamp or a Timespan, not {}",
                other.type_name()
            )),
        },
        [Val::Str(format), ..] => {
            let Val::Rich(now) = construct("new_timestamp", Vec::new())? else {
                return Err("no clock".into());
            };
            match *now {
                Rich::Timestamp(nanos) => Ok(format_timestamp(nanos, format)),
                _ => Err("no clock".into()),
            }
        }
        _ => Err("takes a Timestamp (or a Timespan) and a format".into()),
    }
}

/// `+` and `-` of times: a timestamp and a span (or seconds), two spans, two timestamps
/// (their distance); `None` when the operands are not times.
pub(crate) fn arithmetic(
    add: bool,
    left: &crate::eval::value::Val,
    right: &crate::eval::value::Val,
) -> Option<Result<crate::eval::value::Val, String>> {
    use crate::eval::value::Val;
    let seconds = |value: &Val| match value {
        Val::Int(i) => Some(i128::from(*i) * NANOS),
        Val::Float(f) => seconds_to_nanos(*f),
        Val::Rich(rich) => match **rich {
            Rich::Timespan(nanos) => Some(nanos),
            _ => None,
        },
        _ => None,
    };
    let Val::Rich(rich) = left else {
        return None;
    };
    let result = match (&**rich, right) {
        (Rich::Timestamp(a), Val::Rich(b)) if !add && matches!(**b, Rich::Timestamp(_)) => {
            let Rich::Timestamp(b) = **b else { return None };
            Rich::Timespan(a - b)
        }
        (Rich::Timestamp(a), right) => {
            let span = seconds(right)?;
            Rich::Timestamp(if add { a + span } else { a - span })
        }
        (Rich::Timespan(a), right) => {
            let span = seconds(right)?;
            Rich::Timespan(if add { a + span } else { a - span })
        }
        _ => return None,
    };
    Some(Ok(Val::Rich(Box::new(result))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semantic_versions_order_as_semver_org_says() {
        let order = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "2.0.0",
        ];
        for pair in order.windows(2) {
            let (a, b) = (
                SemVer::parse(pair[0]).expect("valid"),
                SemVer::parse(pair[1]).expect("valid"),
            );
            assert_eq!(
                a.precedence(&b),
                Ordering::Less,
                "{} < {}",
                pair[0],
                pair[1]
            );
        }
        for bad in ["1.2", "01.2.3", "1.2.3-", "1.2.x", "1.2.3+"] {
            assert!(SemVer::parse(bad).is_err(), "{bad}");
        }
    }
}
