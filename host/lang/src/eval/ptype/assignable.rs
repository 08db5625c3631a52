//! Whether one type holds every value of another (Puppet's assignability): what
//! `Any > NotUndef`, `Integer[1, 3] < Integer` and `Type[Integer] =~ ...` compare.
//! Aliases and declared types are compared by name alone.

use super::PType;

impl PType {
    /// Whether every value of `other` is a value of `self`.
    pub(crate) fn holds(&self, other: &PType) -> bool {
        use PType as T;
        if self == other {
            return true;
        }
        match (self, other) {
            (T::Any, _) => true,
            // A union on the right: each of its members; on the left: one of them.
            (_, T::Variant(members)) => members.iter().all(|member| self.holds(member)),
            (_, T::Optional(inner)) => self.holds(&T::Undef) && self.holds(inner),
            (T::Variant(members), _) => members.iter().any(|member| member.holds(other)),
            (T::Optional(inner), T::Undef) => {
                let _ = inner;
                true
            }
            (T::Optional(inner), _) => inner.holds(other),
            (T::NotUndef(inner), _) => {
                !other.holds_undef() && inner.as_ref().is_none_or(|inner| inner.holds(other))
            }
            (T::Integer(min, max), T::Integer(from, to)) => min <= from && to <= max,
            (T::Float(min, max), T::Float(from, to)) => min <= from && to <= max,
            (T::Numeric, T::Integer(..) | T::Float(..)) => true,
            (T::String(min, max), T::String(from, to)) => min <= from && to <= max,
            (T::String(min, max), T::Enum(names)) => names.iter().all(|name| {
                let length = name.chars().count() as i64;
                *min <= length && length <= *max
            }),
            (T::String(0, i64::MAX), T::Pattern(_)) => true,
            (T::Enum(names), T::Enum(others)) => others.iter().all(|other| names.contains(other)),
            (T::Scalar, other) => {
                T::ScalarData.holds(other) || matches!(other, T::Regexp | T::Scalar)
            }
            (T::ScalarData, other) => matches!(
                other,
                T::Boolean
                    | T::Integer(..)
                    | T::Float(..)
                    | T::Numeric
                    | T::String(..)
                    | T::Enum(_)
                    | T::Pattern(_)
                    | T::ScalarData
            ),
            (T::Data, other) => {
                T::ScalarData.holds(other)
                    || matches!(other, T::Undef)
                    || matches!(other, T::Array(inner, ..) if T::Data.holds(inner))
                    || matches!(other, T::Hash(key, value, ..)
                        if T::String(0, i64::MAX).holds(key) && T::Data.holds(value))
                    || matches!(other, T::Tuple(members) if members.iter().all(|m| T::Data.holds(m)))
                    || matches!(other, T::Struct(fields) if fields.iter().all(|(_, _, t)| T::Data.holds(t)))
            }
            (T::Array(inner, min, max), T::Array(other, from, to)) => {
                min <= from && to <= max && inner.holds(other)
            }
            (T::Array(inner, min, max), T::Tuple(members)) => {
                let count = members.len() as i64;
                *min <= count && count <= *max && members.iter().all(|member| inner.holds(member))
            }
            (T::Hash(key, value, min, max), T::Hash(other_key, other_value, from, to)) => {
                min <= from && to <= max && key.holds(other_key) && value.holds(other_value)
            }
            (T::Hash(key, value, min, max), T::Struct(fields)) => {
                let count = fields.len() as i64;
                *min <= count
                    && count <= *max
                    && key.holds(&T::String(0, i64::MAX))
                    && fields.iter().all(|(_, _, field)| value.holds(field))
            }
            (T::Tuple(members), T::Tuple(others)) => {
                members.len() == others.len()
                    && members
                        .iter()
                        .zip(others)
                        .all(|(member, other)| member.holds(other))
            }
            (T::Collection, T::Array(..) | T::Hash(..) | T::Tuple(_) | T::Struct(_)) => true,
            (T::Iterable, other) => {
                T::Collection.holds(other)
                    || matches!(
                        other,
                        T::Collection | T::String(..) | T::Enum(_) | T::Pattern(_)
                    )
                    || matches!(other, T::Integer(min, max) if *min != i64::MIN && *max != i64::MAX)
            }
            (T::Sensitive(inner), T::Sensitive(other)) => inner.holds(other),
            (T::Type(None), T::Type(_)) => true,
            (T::Type(Some(inner)), T::Type(Some(other))) => inner.holds(other),
            (T::Resource(None), T::Resource(_)) => true,
            _ => false,
        }
    }

    /// Whether `undef` is a value of this type.
    fn holds_undef(&self) -> bool {
        match self {
            PType::Any | PType::Undef | PType::Optional(_) | PType::Data => true,
            PType::Variant(members) => members.iter().any(PType::holds_undef),
            _ => false,
        }
    }
}
