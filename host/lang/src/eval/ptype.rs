//! Puppet's data types as values: `String`, `Integer[1, 10]`, `Array[String]`,
//! `Hash[String, Integer]`, `Optional[...]`, `Variant[...]`, `Enum[...]`, `Pattern[...]`,
//! `Struct[{...}]`, `Tuple[...]`, `NotUndef`, `Sensitive[...]`..., type aliases
//! (`type Port = Integer[0, 65535]`, and Stdlib's, built in), and whether a value
//! matches one (`$x =~ Array[String]`, typed parameters, `assert_type`).

use crate::diagnostic::DiagnosticCode;
use crate::eval::value::Val;

mod assignable;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PType {
    Any,
    Undef,
    Default,
    NotUndef(Option<Box<PType>>),
    Boolean,
    Integer(i64, i64),
    Float(f64, f64),
    Numeric,
    String(i64, i64),
    Scalar,
    ScalarData,
    Data,
    Regexp,
    Enum(Vec<String>),
    Pattern(Vec<String>),
    Array(Box<PType>, i64, i64),
    Hash(Box<PType>, Box<PType>, i64, i64),
    Tuple(Vec<PType>),
    Struct(Vec<(String, bool, PType)>),
    Optional(Box<PType>),
    Variant(Vec<PType>),
    Sensitive(Box<PType>),
    Type(Option<Box<PType>>),
    Collection,
    Iterable,
    Callable,
    /// `Resource`, `File`, `Class`...: a type of resources (matches references).
    Resource(Option<String>),
    /// A type alias or a declared type, by its lowercased name.
    Named(String),
    /// Puppet's rich data: `Binary`, `SemVer`, `Timespan`, `Timestamp`.
    Rich(&'static str),
}

/// The data types built in, lowercased (a resource type is a type too).
pub(crate) const CORE: &[&str] = &[
    "any",
    "undef",
    "default",
    "notundef",
    "boolean",
    "integer",
    "float",
    "numeric",
    "string",
    "scalar",
    "scalardata",
    "data",
    "regexp",
    "enum",
    "pattern",
    "array",
    "hash",
    "tuple",
    "struct",
    "optional",
    "variant",
    "sensitive",
    "type",
    "collection",
    "iterable",
    "callable",
    "richdata",
    "runtime",
    "semver",
    "semverrange",
    "timestamp",
    "timespan",
    "binary",
];

/// Stdlib's type aliases modules use, written here (`Stdlib::Port`...): lowercased name,
/// then its definition in the language.
pub(crate) const STDLIB_ALIASES: &[(&str, &str)] = &[
    ("stdlib::port", "Integer[0, 65535]"),
    ("stdlib::port::privileged", "Integer[1, 1023]"),
    ("stdlib::port::unprivileged", "Integer[1024, 65535]"),
    ("stdlib::port::dynamic", "Integer[49152, 65535]"),
    ("stdlib::port::user", "Integer[1024, 49151]"),
    ("stdlib::unixpath", r"Pattern[/\A\/([^\/\x00]+\/*)*\z/]"),
    (
        "stdlib::windowspath",
        r"Pattern[/\A(([a-zA-Z]:[\\\/])|([\\\/][\\\/][^\\\/]+[\\\/][^\\\/]+)|([\\\/][\\\/]\?[\\\/][^\\\/]+))/]",
    ),
    (
        "stdlib::absolutepath",
        "Variant[Stdlib::Windowspath, Stdlib::Unixpath]",
    ),
    (
        "stdlib::filesource",
        r"Variant[Stdlib::Absolutepath, Pattern[/\A(puppet|file):\/\/.*/]]",
    ),
    (
        "stdlib::filemode",
        r"Pattern[/\A(([0-7]{1,4})|(([ugoa]*([-+=]([rwxXst]*|[ugo]))+|[-+=][0-7]+)(,([ugoa]*([-+=]([rwxXst]*|[ugo]))+|[-+=][0-7]+))*))\z/]",
    ),
    (
        "stdlib::fqdn",
        r"Pattern[/\A(([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])\.)*([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])\z/]",
    ),
    (
        "stdlib::dns::zone",
        r"Pattern[/\A((([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])\.)+|\.)\z/]",
    ),
    (
        "stdlib::ip::address::v4",
        r"Pattern[/\A((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(\/([0-9]|[12][0-9]|3[0-2]))?\z/]",
    ),
    (
        "stdlib::ip::address::v4::nosubnet",
        r"Pattern[/\A((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\z/]",
    ),
    (
        "stdlib::ip::address::v6",
        r"Pattern[/\A[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(\/([0-9]|[1-9][0-9]|1[01][0-9]|12[0-8]))?\z/]",
    ),
    (
        "stdlib::ip::address::v6::nosubnet",
        r"Pattern[/\A[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*\z/]",
    ),
    (
        "stdlib::ip::address",
        "Variant[Stdlib::IP::Address::V4, Stdlib::IP::Address::V6]",
    ),
    (
        "stdlib::ip::address::nosubnet",
        "Variant[Stdlib::IP::Address::V4::Nosubnet, Stdlib::IP::Address::V6::Nosubnet]",
    ),
    ("stdlib::host", "Variant[Stdlib::Fqdn, Stdlib::IP::Address]"),
    ("stdlib::httpurl", r"Pattern[/(?i)\Ahttps?:\/\/.*\z/]"),
    ("stdlib::httpsurl", r"Pattern[/(?i)\Ahttps:\/\/.*\z/]"),
    (
        "stdlib::http::method",
        "Enum['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH']",
    ),
    ("stdlib::ensure::service", "Enum['stopped', 'running']"),
    (
        "stdlib::ensure::file",
        "Enum['present', 'file', 'directory', 'link', 'absent']",
    ),
    (
        "stdlib::ensure::file::directory",
        "Enum['directory', 'absent']",
    ),
    ("stdlib::ensure::file::file", "Enum['file', 'absent']"),
    ("stdlib::ensure::file::link", "Enum['link', 'absent']"),
    (
        "stdlib::ensure::package",
        "Variant[Enum['present', 'absent', 'purged', 'disabled', 'installed', 'latest'], String[1]]",
    ),
    (
        "stdlib::email",
        r"Pattern[/\A[a-zA-Z0-9.!#$%&'*+\/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*\z/]",
    ),
    ("stdlib::base64", r"Pattern[/\A[a-zA-Z0-9\/\+]+={,2}\z/]"),
    (
        "stdlib::base32",
        r"Pattern[/\A[a-z2-7]+={,6}\z/, /\A[A-Z2-7]+={,6}\z/]",
    ),
    (
        "stdlib::mac",
        r"Pattern[/\A([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}\z/]",
    ),
    (
        "stdlib::compat::integer",
        "Variant[Integer, Pattern[/\\A-?\\d+\\z/]]",
    ),
    ("stdlib::datasize", r"Pattern[/\A\d+(?i:[kmgt]b?|b)?\z/]"),
    ("stdlib::yes_no", r"Pattern[/\A(?i:(yes|no))\z/]"),
    (
        "stdlib::syslogfacility",
        "Enum['kern', 'user', 'mail', 'daemon', 'auth', 'syslog', 'lpr', 'news', 'uucp', 'cron', 'authpriv', 'ftp', 'ntp', 'security', 'console', 'solaris-cron', 'local0', 'local1', 'local2', 'local3', 'local4', 'local5', 'local6', 'local7']",
    ),
];

impl PType {
    /// The type a type value stands for: a bare name (`Val::Ref` without a title) or a
    /// parameterized type.
    pub(crate) fn of(value: &Val) -> Option<PType> {
        match value {
            Val::Type(ptype) => Some((**ptype).clone()),
            Val::Ref {
                type_name,
                title: None,
            } => Some(
                PType::named(type_name, &[]).unwrap_or_else(|_| PType::Named(type_name.clone())),
            ),
            _ => None,
        }
    }

    /// `Name[args]` (or `Name` alone when `args` is empty); `Err` says what is wrong.
    pub(crate) fn named(name: &str, args: &[Val]) -> Result<PType, String> {
        let int = |value: Option<&Val>, fallback: i64| -> Result<i64, String> {
            match value {
                None | Some(Val::Default) => Ok(fallback),
                Some(Val::Int(i)) => Ok(*i),
                Some(other) => Err(format!(
                    "a bound is an integer or `default`, not {}",
                    other.type_name()
                )),
            }
        };
        let inner = |value: Option<&Val>| -> Result<PType, String> {
            match value {
                None => Ok(PType::Any),
                Some(value) => PType::of(value)
                    .ok_or_else(|| format!("`{}` is not a type", value.to_display())),
            }
        };
        let types = |values: &[Val]| -> Result<Vec<PType>, String> {
            values
                .iter()
                .map(|value| {
                    PType::of(value)
                        .ok_or_else(|| format!("`{}` is not a type", value.to_display()))
                })
                .collect()
        };
        Ok(match name {
            "any" => PType::Any,
            "undef" => PType::Undef,
            "default" => PType::Default,
            "notundef" => PType::NotUndef(
                args.first()
                    .map(|v| inner(Some(v)))
                    .transpose()?
                    .map(Box::new),
            ),
            "boolean" => PType::Boolean,
            "integer" => PType::Integer(int(args.first(), i64::MIN)?, int(args.get(1), i64::MAX)?),
            "float" => {
                let float = |value: Option<&Val>, fallback: f64| match value {
                    Some(Val::Int(i)) => *i as f64,
                    Some(Val::Float(f)) => *f,
                    _ => fallback,
                };
                PType::Float(
                    float(args.first(), f64::NEG_INFINITY),
                    float(args.get(1), f64::INFINITY),
                )
            }
            "numeric" => PType::Numeric,
            "string" => PType::String(int(args.first(), 0)?, int(args.get(1), i64::MAX)?),
            "scalar" => PType::Scalar,
            "scalardata" => PType::ScalarData,
            "data" | "richdata" => PType::Data,
            "regexp" => PType::Regexp,
            "enum" => PType::Enum(
                args.iter()
                    .map(|value| match value {
                        Val::Str(text) => Ok(text.clone()),
                        Val::Array(items) => Ok(items
                            .iter()
                            .map(Val::to_interpolated)
                            .collect::<Vec<_>>()
                            .join("\u{0}")),
                        other => Err(format!("`Enum` takes strings, not {}", other.type_name())),
                    })
                    .collect::<Result<Vec<_>, _>>()?
                    .into_iter()
                    .flat_map(|text| text.split('\u{0}').map(str::to_owned).collect::<Vec<_>>())
                    .collect(),
            ),
            "pattern" => PType::Pattern(
                args.iter()
                    .map(|value| match value {
                        Val::Regex(pattern) | Val::Str(pattern) => Ok(pattern.clone()),
                        other => Err(format!(
                            "`Pattern` takes regular expressions, not {}",
                            other.type_name()
                        )),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            "array" => PType::Array(
                Box::new(inner(args.first())?),
                int(args.get(1), 0)?,
                int(args.get(2), i64::MAX)?,
            ),
            "hash" => {
                if args.len() == 1 || args.len() > 4 {
                    return Err("`Hash` takes a key type and a value type (and bounds)".into());
                }
                PType::Hash(
                    Box::new(inner(args.first())?),
                    Box::new(inner(args.get(1))?),
                    int(args.get(2), 0)?,
                    int(args.get(3), i64::MAX)?,
                )
            }
            "tuple" => PType::Tuple(types(args)?),
            "struct" => match args.first() {
                Some(Val::Hash(entries)) => PType::Struct(
                    entries
                        .iter()
                        .map(|(key, value)| {
                            let (name, optional) = match key {
                                Val::Str(name) => (name.clone(), false),
                                Val::Type(ptype) => {
                                    match &**ptype {
                                        PType::Optional(key) => match &**key {
                                            PType::Enum(names) if names.len() == 1 => {
                                                (names[0].clone(), true)
                                            }
                                            _ => return Err(
                                                "a `Struct` key is a string or `Optional['key']`"
                                                    .into(),
                                            ),
                                        },
                                        _ => {
                                            return Err(
                                                "a `Struct` key is a string or `Optional['key']`"
                                                    .into(),
                                            );
                                        }
                                    }
                                }
                                _ => {
                                    return Err(
                                        "a `Struct` key is a string or `Optional['key']`".into()
                                    );
                                }
                            };
                            let ptype = PType::of(value)
                                .ok_or_else(|| format!("`{}` is not a type", value.to_display()))?;
                            // A key whose value may be undef may be left out.
                            let optional = optional || matches!(ptype, PType::Optional(_));
                            Ok((name, optional, ptype))
                        })
                        .collect::<Result<_, String>>()?,
                ),
                _ => return Err("`Struct` takes a hash of keys to types".into()),
            },
            "optional" => match args.first() {
                Some(Val::Str(text)) => PType::Optional(Box::new(PType::Enum(vec![text.clone()]))),
                other => PType::Optional(Box::new(inner(other)?)),
            },
            "variant" => PType::Variant(types(args)?),
            "sensitive" => PType::Sensitive(Box::new(inner(args.first())?)),
            "type" => PType::Type(
                args.first()
                    .map(|v| inner(Some(v)))
                    .transpose()?
                    .map(Box::new),
            ),
            "collection" => PType::Collection,
            "iterable" | "iterator" => PType::Iterable,
            "callable" => PType::Callable,
            "binary" if args.is_empty() => PType::Rich("Binary"),
            "semver" if args.is_empty() => PType::Rich("SemVer"),
            "timespan" if args.is_empty() => PType::Rich("Timespan"),
            "timestamp" if args.is_empty() => PType::Rich("Timestamp"),
            "resource" | "class" => PType::Resource(None),
            other => {
                if args.is_empty() {
                    PType::Named(other.to_owned())
                } else {
                    return Err(format!(
                        "`{}` takes no parameters",
                        crate::eval::value::Val::Ref {
                            type_name: other.to_owned(),
                            title: None
                        }
                        .to_display()
                    ));
                }
            }
        })
    }

    /// The type as it is written.
    pub(crate) fn written(&self) -> String {
        let bound = |b: i64, fallback: i64| {
            if b == fallback {
                "default".to_owned()
            } else {
                b.to_string()
            }
        };
        match self {
            PType::Rich(name) => (*name).to_owned(),
            PType::Any => "Any".into(),
            PType::Undef => "Undef".into(),
            PType::Default => "Default".into(),
            PType::NotUndef(None) => "NotUndef".into(),
            PType::NotUndef(Some(inner)) => format!("NotUndef[{}]", inner.written()),
            PType::Boolean => "Boolean".into(),
            PType::Integer(i64::MIN, i64::MAX) => "Integer".into(),
            PType::Integer(min, max) => format!(
                "Integer[{}, {}]",
                bound(*min, i64::MIN),
                bound(*max, i64::MAX)
            ),
            PType::Float(min, max) if min.is_infinite() && max.is_infinite() => "Float".into(),
            PType::Float(min, max) => format!(
                "Float[{}, {}]",
                crate::eval::value::float_text(*min),
                crate::eval::value::float_text(*max)
            ),
            PType::Numeric => "Numeric".into(),
            PType::String(0, i64::MAX) => "String".into(),
            PType::String(min, max) => format!("String[{}, {}]", min, bound(*max, i64::MAX)),
            PType::Scalar => "Scalar".into(),
            PType::ScalarData => "ScalarData".into(),
            PType::Data => "Data".into(),
            PType::Regexp => "Regexp".into(),
            PType::Enum(names) => format!(
                "Enum[{}]",
                names
                    .iter()
                    .map(|n| format!("'{n}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            PType::Pattern(patterns) => format!(
                "Pattern[{}]",
                patterns
                    .iter()
                    .map(|p| format!("/{p}/"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            PType::Array(inner, 0, i64::MAX) if **inner == PType::Any => "Array".into(),
            PType::Array(inner, 0, i64::MAX) => format!("Array[{}]", inner.written()),
            PType::Array(inner, min, max) => format!(
                "Array[{}, {}, {}]",
                inner.written(),
                min,
                bound(*max, i64::MAX)
            ),
            PType::Hash(key, value, 0, i64::MAX)
                if **key == PType::Any && **value == PType::Any =>
            {
                "Hash".into()
            }
            PType::Hash(key, value, 0, i64::MAX) => {
                format!("Hash[{}, {}]", key.written(), value.written())
            }
            PType::Hash(key, value, min, max) => format!(
                "Hash[{}, {}, {}, {}]",
                key.written(),
                value.written(),
                min,
                bound(*max, i64::MAX)
            ),
            PType::Tuple(types) => format!(
                "Tuple[{}]",
                types
                    .iter()
                    .map(PType::written)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            PType::Struct(fields) => format!(
                "Struct[{{{}}}]",
                fields
                    .iter()
                    .map(|(name, optional, ptype)| {
                        if *optional && !matches!(ptype, PType::Optional(_)) {
                            format!("Optional['{name}'] => {}", ptype.written())
                        } else {
                            format!("'{name}' => {}", ptype.written())
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            PType::Optional(inner) => format!("Optional[{}]", inner.written()),
            PType::Variant(types) => format!(
                "Variant[{}]",
                types
                    .iter()
                    .map(PType::written)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            PType::Sensitive(inner) => format!("Sensitive[{}]", inner.written()),
            PType::Type(None) => "Type".into(),
            PType::Type(Some(inner)) => format!("Type[{}]", inner.written()),
            PType::Collection => "Collection".into(),
            PType::Iterable => "Iterable".into(),
            PType::Callable => "Callable".into(),
            PType::Resource(_) => "Resource".into(),
            PType::Named(name) => wconverge_catalog::display_type_name(name),
        }
    }
}

/// Types reach through aliases at most this deep (an alias of itself never ends).
const MAX_ALIAS_DEPTH: usize = 64;

impl crate::eval::Evaluator<'_> {
    /// Whether `value` matches the type `expected` (a type value); `None` when
    /// `expected` is not a type or names an unknown one (reported).
    pub(crate) fn value_matches_type(
        &mut self,
        value: &Val,
        expected: &Val,
        span: crate::diagnostic::Span,
    ) -> Option<bool> {
        let Some(ptype) = PType::of(expected) else {
            self.report(
                crate::diagnostic::Severity::Error,
                DiagnosticCode::NotAType,
                span,
                format!("`{}` is not a data type", expected.to_display()),
            );
            return None;
        };
        match self.matches_type(value, &ptype, span, 0) {
            Ok(matched) => Some(matched),
            Err(message) => {
                self.report(crate::diagnostic::Severity::Error, DiagnosticCode::UnknownType, span, message)
                    .help = Some(
                    "declare it with `type Name = ...` (or in a module's types/), or check its spelling"
                        .into(),
                );
                None
            }
        }
    }

    /// The type an alias stands for: one the manifests declare (`type Port = ...`),
    /// else one of Stdlib's built in; `None` if there is no such alias.
    fn alias(
        &mut self,
        name: &str,
        span: crate::diagnostic::Span,
    ) -> Option<Result<PType, String>> {
        if let Some(resolved) = self.type_aliases.get(name) {
            return Some(resolved.clone());
        }
        let program = self.program_rc();
        let resolved = if let Some(alias) = program
            .aliases
            .iter()
            .find(|alias| alias.name.to_ascii_lowercase() == name)
        {
            // Evaluated in top scope, like a definition.
            self.type_aliases.insert(
                name.to_owned(),
                Err(format!("type alias `{}` refers to itself", alias.name)),
            );
            let value = self.eval_at_top(&alias.value);
            PType::of(&value).ok_or_else(|| {
                format!(
                    "type alias `{}` is not a type: `{}`",
                    alias.name,
                    value.to_display()
                )
            })
        } else if let Some((_, text)) = STDLIB_ALIASES.iter().find(|(alias, _)| *alias == name) {
            self.type_aliases.insert(
                name.to_owned(),
                Err(format!("type alias `{name}` refers to itself")),
            );
            self.builtin_type(name, text, span)
        } else {
            return None;
        };
        self.type_aliases.insert(name.to_owned(), resolved.clone());
        Some(resolved)
    }

    /// Does `value` match `ptype`? `Err` names a type that does not exist.
    pub(crate) fn matches_type(
        &mut self,
        value: &Val,
        ptype: &PType,
        span: crate::diagnostic::Span,
        depth: usize,
    ) -> Result<bool, String> {
        if depth > MAX_ALIAS_DEPTH {
            return Err(format!(
                "types nest more than {MAX_ALIAS_DEPTH} deep through aliases"
            ));
        }
        let all = |this: &mut Self, items: &[Val], inner: &PType| -> Result<bool, String> {
            for item in items {
                if !this.matches_type(item, inner, span, depth + 1)? {
                    return Ok(false);
                }
            }
            Ok(true)
        };
        let count_in = |len: usize, min: i64, max: i64| (len as i64) >= min && (len as i64) <= max;
        Ok(match (ptype, value) {
            (PType::Any, _) => true,
            (PType::Undef, value) => *value == Val::Undef,
            (PType::Default, value) => *value == Val::Default,
            (PType::NotUndef(inner), value) => {
                *value != Val::Undef
                    && match inner {
                        Some(inner) => self.matches_type(value, inner, span, depth + 1)?,
                        None => true,
                    }
            }
            (PType::Boolean, value) => matches!(value, Val::Bool(_)),
            (PType::Integer(min, max), Val::Int(i)) => i >= min && i <= max,
            (PType::Float(min, max), Val::Float(f)) => f >= min && f <= max,
            (PType::Numeric, value) => matches!(value, Val::Int(_) | Val::Float(_)),
            (PType::String(min, max), Val::Str(text)) => count_in(text.chars().count(), *min, *max),
            (PType::Scalar, value) => matches!(
                value,
                Val::Str(_) | Val::Int(_) | Val::Float(_) | Val::Bool(_) | Val::Regex(_)
            ),
            (PType::ScalarData, value) => matches!(
                value,
                Val::Str(_) | Val::Int(_) | Val::Float(_) | Val::Bool(_)
            ),
            (PType::Data, value) => match value {
                Val::Str(_) | Val::Int(_) | Val::Float(_) | Val::Bool(_) | Val::Undef => true,
                Val::Array(items) => all(self, items, &PType::Data)?,
                Val::Hash(entries) => {
                    let mut fits = true;
                    for (key, value) in entries {
                        fits &= matches!(key, Val::Str(_))
                            && self.matches_type(value, &PType::Data, span, depth + 1)?;
                    }
                    fits
                }
                _ => false,
            },
            (PType::Regexp, value) => matches!(value, Val::Regex(_)),
            (PType::Enum(names), Val::Str(text)) => names.iter().any(|name| name == text),
            (PType::Pattern(patterns), Val::Str(text)) => {
                let mut matched = false;
                for pattern in patterns {
                    if self
                        .regex(pattern, span)
                        .is_some_and(|regex| regex.is_match(text))
                    {
                        matched = true;
                        break;
                    }
                }
                matched
            }
            (PType::Array(inner, min, max), Val::Array(items)) => {
                count_in(items.len(), *min, *max) && all(self, items, inner)?
            }
            (PType::Hash(key, inner, min, max), Val::Hash(entries)) => {
                let mut fits = count_in(entries.len(), *min, *max);
                for (k, v) in entries {
                    if !fits {
                        break;
                    }
                    fits = self.matches_type(k, key, span, depth + 1)?
                        && self.matches_type(v, inner, span, depth + 1)?;
                }
                fits
            }
            (PType::Tuple(types), Val::Array(items)) => {
                let mut fits = items.len() == types.len();
                for (item, ptype) in items.iter().zip(types) {
                    fits = fits && self.matches_type(item, ptype, span, depth + 1)?;
                }
                fits
            }
            (PType::Struct(fields), Val::Hash(entries)) => {
                let mut fits = entries.iter().all(|(key, _)| {
                    matches!(key, Val::Str(key) if fields.iter().any(|(name, _, _)| name == key))
                });
                for (name, optional, ptype) in fields {
                    if !fits {
                        break;
                    }
                    fits = match Val::hash_get(entries, &Val::Str(name.clone())) {
                        Some(value) => self.matches_type(value, ptype, span, depth + 1)?,
                        None => *optional,
                    };
                }
                fits
            }
            (PType::Optional(inner), value) => {
                *value == Val::Undef || self.matches_type(value, inner, span, depth + 1)?
            }
            (PType::Variant(types), value) => {
                let mut fits = false;
                for ptype in types {
                    if self.matches_type(value, ptype, span, depth + 1)? {
                        fits = true;
                        break;
                    }
                }
                fits
            }
            (PType::Sensitive(inner), Val::Sensitive(value)) => {
                self.matches_type(value, inner, span, depth + 1)?
            }
            (PType::Type(inner), value) => match (PType::of(value), inner) {
                (Some(_), None) => true,
                (Some(of), Some(inner)) => inner.holds(&of),
                (None, _) => false,
            },
            (PType::Rich(name), Val::Rich(rich)) => rich.type_name() == *name,
            (PType::Collection, value) => matches!(value, Val::Array(_) | Val::Hash(_)),
            (PType::Iterable, value) => matches!(
                value,
                Val::Array(_) | Val::Hash(_) | Val::Str(_) | Val::Int(_)
            ),
            (PType::Resource(None), value) => matches!(value, Val::Ref { title: Some(_), .. }),
            (PType::Named(name), value) => match self.alias(name, span) {
                Some(resolved) => {
                    let resolved = resolved?;
                    self.matches_type(value, &resolved, span, depth + 1)?
                }
                None if self.is_defined(&Val::Ref {
                    type_name: name.clone(),
                    title: None,
                }) =>
                {
                    matches!(value, Val::Ref { type_name, title: Some(_) } if type_name == name)
                }
                None if self.declares_type(name) => {
                    matches!(value, Val::Hash(_))
                }
                None => {
                    return Err(format!(
                        "unknown data type `{}`",
                        wconverge_catalog::display_type_name(name)
                    ));
                }
            },
            _ => false,
        })
    }
}
