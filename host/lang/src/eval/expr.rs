//! Expressions: evaluation by kind, operators and arithmetic, access to values and
//! types, regular expressions.

use super::*;
use crate::diagnostic::DiagnosticCode;

impl Evaluator<'_> {
    pub(super) fn eval(&mut self, expr: &Expr) -> Val {
        let span = expr.span;
        if self.budget.is_some() {
            if !self.spend(1, span) {
                return Val::Undef;
            }
        } else if !self.work(1, span) {
            return Val::Undef;
        }
        let value = self.eval_kind(expr);
        // What an expression builds is bounded: a string doubled in a loop, an array of
        // itself, cannot take the machine's memory.
        match &expr.kind {
            ExprKind::Array(_)
            | ExprKind::Hash(_)
            | ExprKind::Interp(_)
            | ExprKind::Binary(..)
            | ExprKind::Call { .. } => self.bounded(value, span),
            _ => value,
        }
    }

    pub(super) fn eval_kind(&mut self, expr: &Expr) -> Val {
        let span = expr.span;
        match &expr.kind {
            ExprKind::Str(text) | ExprKind::Bare(text) => Val::Str(text.clone()),
            ExprKind::Interp(parts) => {
                let mut out = String::new();
                for part in parts {
                    match part {
                        InterpPart::Lit(text) => out.push_str(text),
                        InterpPart::Expr(inner) => {
                            let value = self.eval(inner);
                            if let Val::Lazy(_) = value {
                                self.error(
                                    DiagnosticCode::LazyInString,
                                    inner.span,
                                    "a lazy value has no text until the run",
                                )
                                .help = Some("interpolate inside the lazy block instead".into());
                            }
                            // Measured before it is written out: the estimate is at most
                            // twice the text, plus a little.
                            let room = MAX_STRING_BYTES.saturating_sub(out.len());
                            let most = 2 * room + 64;
                            let estimate = value.display_len_capped(most);
                            if estimate > room
                                && (estimate >= most || value.to_interpolated().len() > room)
                            {
                                self.value_limit(
                                    span,
                                    format!(
                                        "this builds a string of more than {MAX_STRING_BYTES} \
                                         bytes (16 MiB), the limit"
                                    ),
                                );
                                return Val::Undef;
                            }
                            out.push_str(&value.to_interpolated());
                        }
                    }
                }
                Val::Str(out)
            }
            ExprKind::Int(value) => Val::Int(*value),
            ExprKind::Float(value) => Val::Float(*value),
            ExprKind::Bool(value) => Val::Bool(*value),
            ExprKind::Undef => Val::Undef,
            ExprKind::Default => Val::Default,
            ExprKind::Regex(pattern) => {
                self.regex(pattern, span);
                Val::Regex(pattern.clone())
            }
            ExprKind::TypeRef(name) => {
                let type_name = name.to_ascii_lowercase();
                // A capitalized name that names no type is an error, as in Puppet
                // ("Resource type not found"), not a value.
                if !self.names_a_type(&type_name) {
                    // A defined type of a module may name it: the module path is searched.
                    self.missing.push(type_name.clone());
                    self.error(
                        DiagnosticCode::UnknownType,
                        span,
                        format!("`{name}` names no type (Puppet: \"Resource type not found\")"),
                    )
                    .help = Some(format!(
                        "declare it (`type {name} = ...` for a data type, `type {name} {{ ... }}` \
                         for objects, `define {type_name}` for resources), or, for a value, \
                         write it in lower case or quoted: `{type_name}`"
                    ));
                    return Val::Undef;
                }
                Val::Ref {
                    type_name,
                    title: None,
                }
            }
            ExprKind::Var(name) if name == "node" => self.node_read(&[], span),
            ExprKind::Var(name) => self.lookup(name, span),
            ExprKind::Array(items) => {
                let mut total = 0;
                let mut built = Vec::with_capacity(items.len());
                for item in items {
                    let value = self.eval(item);
                    if !self.grow(&mut total, &value, span) {
                        return Val::Undef;
                    }
                    built.push(value);
                }
                Val::Array(built)
            }
            ExprKind::Hash(entries) => {
                // Each key is compared with the ones before it.
                let n = entries.len() as u64;
                if self.budget.is_none() && !self.work(n * n.saturating_sub(1) / 2, span) {
                    return Val::Undef;
                }
                let mut out: Vec<(Val, Val)> = Vec::with_capacity(entries.len());
                let mut total = 0;
                for (key, value) in entries {
                    let key = self.eval(key);
                    let value = self.eval(value);
                    if !self.grow(&mut total, &key, span) || !self.grow(&mut total, &value, span) {
                        return Val::Undef;
                    }
                    match out.iter_mut().find(|(existing, _)| *existing == key) {
                        Some((_, existing)) => *existing = value,
                        None => out.push((key, value)),
                    }
                }
                Val::Hash(out)
            }
            ExprKind::Access(target, keys) => {
                if let Some(path) = node::read_keys(expr) {
                    self.node_read(&path, span)
                } else if let Some(layer) = node::layer_root(expr) {
                    self.node_layer_read(layer, span)
                } else {
                    self.access(target, keys, span)
                }
            }
            ExprKind::Not(operand) => Val::Bool(!self.eval(operand).truthy()),
            ExprKind::Neg(operand) => match (self.errors, self.eval(operand)) {
                (before, Val::Undef) if self.errors > before => Val::Undef,
                (_, operand) => self.negate(operand, span),
            },
            ExprKind::Binary(BinOp::And, lhs, rhs) => {
                Val::Bool(self.eval(lhs).truthy() && self.eval(rhs).truthy())
            }
            ExprKind::Binary(BinOp::Or, lhs, rhs) => {
                Val::Bool(self.eval(lhs).truthy() || self.eval(rhs).truthy())
            }
            ExprKind::Binary(op, lhs, rhs) => {
                let before = self.errors;
                let left = self.eval(lhs);
                let right = self.eval(rhs);
                if self.errors > before {
                    // Reported: not again as `undef + 1`.
                    return Val::Undef;
                }
                self.binary(*op, left, right, span)
            }
            ExprKind::Assign(name, value) => {
                let before = self.errors;
                let value = self.eval(value);
                let failed = self.errors > before;
                self.assign(name, value.clone(), span);
                if failed && !name.contains("::") {
                    let scope = self.ctx.scope;
                    self.scopes[scope].failed.push(name.clone());
                }
                value
            }
            ExprKind::AssignList(targets, value) => {
                let value = self.eval(value);
                self.assign_list(targets, value.clone(), span);
                value
            }
            ExprKind::If {
                cond,
                then,
                otherwise,
            } => {
                if self.eval(cond).truthy() {
                    self.block(then)
                } else if let Some(otherwise) = otherwise {
                    self.block(otherwise)
                } else {
                    Val::Undef
                }
            }
            ExprKind::Unless {
                cond,
                then,
                otherwise,
            } => {
                if !self.eval(cond).truthy() {
                    self.block(then)
                } else if let Some(otherwise) = otherwise {
                    self.block(otherwise)
                } else {
                    Val::Undef
                }
            }
            ExprKind::Case { subject, arms } => {
                let subject = self.eval(subject);
                let mut default_arm = None;
                for arm in arms {
                    for option in &arm.options {
                        if matches!(option.kind, ExprKind::Default) {
                            default_arm.get_or_insert(arm);
                            continue;
                        }
                        let option_value = self.eval(option);
                        if self.matches_option(&subject, &option_value, option.span) {
                            return self.block(&arm.body);
                        }
                    }
                }
                match default_arm {
                    Some(arm) => self.block(&arm.body),
                    None => Val::Undef,
                }
            }
            ExprKind::Selector { subject, arms } => {
                let subject = self.eval(subject);
                let mut default_value = None;
                for (option, value) in arms {
                    if matches!(option.kind, ExprKind::Default) {
                        default_value.get_or_insert(value);
                        continue;
                    }
                    let option_value = self.eval(option);
                    if self.matches_option(&subject, &option_value, option.span) {
                        return self.eval(value);
                    }
                }
                match default_value {
                    Some(value) => self.eval(value),
                    None => {
                        self.error(
                            DiagnosticCode::NoSelectorMatch,
                            span,
                            format!(
                                "no option of the selector matches `{}`",
                                subject.to_display()
                            ),
                        )
                        .help = Some("add a `default => value` option".into());
                        Val::Undef
                    }
                }
            }
            ExprKind::Call { name, args, lambda } => self.call(name, args, lambda.as_deref(), span),
            ExprKind::Resource(resource) => self.resource_expr(resource, span),
            ExprKind::Defaults { type_name, ops } => {
                self.defaults_expr(type_name, ops, span);
                Val::Undef
            }
            ExprKind::Override { target, ops } => {
                self.override_expr(target, ops, span);
                Val::Undef
            }
            ExprKind::Collector(_) => {
                self.error(DiagnosticCode::CollectorValue, span, "a collector has no value here")
                    .help = Some("a collector stands alone as a statement, or as a whole side of a relationship (`Package <| |> -> Service['x']`), never inside an array or an expression".into());
                Val::Undef
            }
            ExprKind::Relation(..) => match self.operand(expr) {
                Operand::Refs(refs) => Val::Array(
                    refs.into_iter()
                        .map(|(t, title)| Val::reference(&t, &title))
                        .collect(),
                ),
                Operand::Collector(_) => Val::Undef,
            },
            ExprKind::Definition => Val::Undef,
            ExprKind::Lazy(inner) => self.lazy(inner, span),
            ExprKind::NodeLayer(layer) => self.node_layer_read(*layer, span),
            ExprKind::NodeWrite { layer, keys, value } => {
                self.node_write(*layer, keys, value, span)
            }
            ExprKind::FeatureWrite {
                var,
                key,
                append,
                value,
            } => self.feature_write(var, key, *append, value, span),
        }
    }

    pub(super) fn matches_option(&mut self, subject: &Val, option: &Val, span: Span) -> bool {
        match option {
            // `case $x { String: ... }`: a data type matches the values of that type.
            Val::Type(_) | Val::Ref { title: None, .. } => {
                self.value_matches_type(subject, option, span) == Some(true)
            }
            Val::Regex(pattern) => match subject {
                Val::Str(text) => self.regex_match(pattern, text, span),
                _ => false,
            },
            // As in Puppet 4: an array option matches an array of as many elements, each
            // matching its own (a value, a type, a regular expression), not any element
            // (list the values with commas for that); a hash option matches a hash that
            // has each of its keys, with a value matching.
            Val::Array(options) => match subject {
                Val::Array(items) if items.len() == options.len() => items
                    .iter()
                    .zip(options)
                    .all(|(item, option)| self.matches_option(item, option, span)),
                _ => false,
            },
            Val::Hash(options) => match subject {
                Val::Hash(entries) => options.iter().all(|(key, option)| {
                    entries
                        .iter()
                        .find(|(other, _)| other.equals(key))
                        .is_some_and(|(_, value)| self.matches_option(value, option, span))
                }),
                _ => false,
            },
            other => subject.equals(other),
        }
    }

    pub(crate) fn regex(&mut self, pattern: &str, span: Span) -> Option<regex::Regex> {
        if let Some(cached) = self.regexes.get(pattern) {
            return cached.clone();
        }
        // The checks of types run one small evaluator per value, each compiling the same
        // few patterns: this thread keeps the valid ones it compiled.
        if let Some(shared) = COMPILED.with_borrow(|compiled| compiled.get(pattern).cloned()) {
            self.regexes
                .insert(pattern.to_owned(), Some(shared.clone()));
            return Some(shared);
        }
        // Each pattern compiled costs time and up to a MiB, kept to the end.
        if self.budget.is_none() && !self.work(REGEX_WORK, span) {
            self.regexes.insert(pattern.to_owned(), None);
            return None;
        }
        let compiled = match regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
        {
            Ok(regex) => {
                COMPILED.with_borrow_mut(|compiled| {
                    if compiled.len() >= SHARED_REGEXES {
                        compiled.clear();
                    }
                    compiled.insert(pattern.to_owned(), regex.clone());
                });
                Some(regex)
            }
            Err(error) => {
                let message = error.to_string();
                let first = message.lines().last().unwrap_or_default().trim().to_owned();
                self.error(
                    DiagnosticCode::Regex,
                    span,
                    format!("invalid regular expression `/{pattern}/`: {first}"),
                )
                .help = Some(
                    "fix the pattern; the syntax is Rust's `regex` crate, close to Perl's".into(),
                );
                None
            }
        };
        self.regexes.insert(pattern.to_owned(), compiled.clone());
        compiled
    }

    pub(super) fn regex_match(&mut self, pattern: &str, text: &str, span: Span) -> bool {
        let Some(regex) = self.regex(pattern, span) else {
            return false;
        };
        match regex.captures(text) {
            Some(captures) => {
                self.captures = captures
                    .iter()
                    .map(|group| group.map_or(Val::Undef, |m| Val::Str(m.as_str().to_owned())))
                    .collect();
                true
            }
            None => {
                self.captures.clear();
                false
            }
        }
    }

    pub(super) fn access(&mut self, target: &Expr, keys: &[Expr], span: Span) -> Val {
        let before = self.errors;
        let target = self.eval(target);
        let keys: Vec<Val> = keys.iter().map(|key| self.eval(key)).collect();
        if self.errors > before {
            // Reported: not again as "cannot index undef".
            return Val::Undef;
        }
        match target {
            Val::Ref {
                type_name,
                title: None,
            } => self.type_access(&type_name, keys, span),
            Val::Ref {
                type_name,
                title: Some(title),
            } => {
                // `File['/etc/motd']['mode']` reads an attribute of a declared resource.
                let [Val::Str(attribute)] = keys.as_slice() else {
                    self.error(
                        DiagnosticCode::Access,
                        span,
                        "a resource's attribute is read with one name: `File['a']['mode']`",
                    );
                    return Val::Undef;
                };
                match self.index.get(&(type_name.clone(), title.clone())) {
                    Some(&idx) => match self.resources[idx].attr(attribute) {
                        Some(attr) => attr.value.clone(),
                        // Not set: `undef`, if the type has such an attribute at all.
                        None => {
                            if let Some(kind) = self.kind_of(&type_name) {
                                self.check_attribute(&type_name, kind, attribute, span);
                            }
                            Val::Undef
                        }
                    },
                    None => {
                        self.error(
                            DiagnosticCode::UnknownResource,
                            span,
                            format!(
                                "`{}` is not declared (yet)",
                                Val::reference(&type_name, &title).to_display()
                            ),
                        );
                        Val::Undef
                    }
                }
            }
            Val::Array(items) => {
                match select(items.len(), &keys) {
                    Some(Selection::One(at)) => items.get(at).cloned().unwrap_or(Val::Undef),
                    Some(Selection::Range(from, to)) => Val::Array(items[from..to].to_vec()),
                    None => {
                        self.error(DiagnosticCode::Access, span, "an array is indexed by an integer: `$list[0]`, or sliced: `$list[1, 2]`");
                        Val::Undef
                    }
                }
            }
            Val::Hash(entries) => {
                if keys.len() == 1 {
                    Val::hash_get(&entries, &keys[0])
                        .cloned()
                        .unwrap_or(Val::Undef)
                } else {
                    Val::Array(
                        keys.iter()
                            .map(|key| Val::hash_get(&entries, key).cloned().unwrap_or(Val::Undef))
                            .collect(),
                    )
                }
            }
            Val::Str(text) => {
                let chars: Vec<char> = text.chars().collect();
                match select(chars.len(), &keys) {
                    Some(Selection::One(at)) => chars
                        .get(at)
                        .map_or(Val::Undef, |c| Val::Str(c.to_string())),
                    Some(Selection::Range(from, to)) => Val::Str(chars[from..to].iter().collect()),
                    None => {
                        self.error(
                            DiagnosticCode::Access,
                            span,
                            "a string is indexed by an integer: `$text[0]`",
                        );
                        Val::Undef
                    }
                }
            }
            other => {
                self.error(DiagnosticCode::Access, span, format!("cannot index {} `{}`", other.type_name(), other.to_display()))
                    .help = Some("only arrays, hashes, strings and types can be indexed; check the variable holds what you expect".into());
                Val::Undef
            }
        }
    }

    /// `File['a', 'b']`, `Class['foo']`, `Resource['file', 'a']`.
    pub(super) fn type_access(&mut self, type_name: &str, keys: Vec<Val>, span: Span) -> Val {
        // A data type with parameters (`Array[String]`, `Integer[1, 10]`) is a value.
        if self.is_data_type(type_name) {
            return match crate::eval::ptype::PType::named(type_name, &keys) {
                Ok(ptype) => Val::Type(Box::new(ptype)),
                Err(message) => {
                    self.error(DiagnosticCode::BadType, span, message).help =
                        Some("see Puppet's data types in docs/language.md, Types".into());
                    Val::Undef
                }
            };
        }
        let (type_name, keys) = if type_name == "resource" {
            let mut keys = keys.into_iter();
            match keys.next() {
                Some(Val::Str(name)) => (name.to_ascii_lowercase(), keys.collect::<Vec<_>>()),
                Some(Val::Ref {
                    type_name,
                    title: None,
                }) => (type_name, keys.collect()),
                _ => {
                    self.error(
                        DiagnosticCode::Access,
                        span,
                        "`Resource[...]` takes a type first: `Resource['file', '/tmp/a']`",
                    );
                    return Val::Undef;
                }
            }
        } else {
            (type_name.to_owned(), keys)
        };
        let mut titles = Vec::new();
        for key in keys {
            flatten_into(key, &mut titles);
        }
        let mut refs = Vec::new();
        for title in titles {
            match title {
                Val::Str(title) if !title.is_empty() => {
                    let title = if type_name == "class" {
                        title.trim_start_matches("::").to_ascii_lowercase()
                    } else {
                        title
                    };
                    refs.push(Val::reference(&type_name, &title));
                }
                other => {
                    self.error(
                        DiagnosticCode::Access,
                        span,
                        format!(
                            "a title must be a non-empty string, not {} `{}`",
                            other.type_name(),
                            other.to_display()
                        ),
                    );
                }
            }
        }
        if refs.len() == 1 {
            refs.pop().expect("one element")
        } else {
            Val::Array(refs)
        }
    }

    pub(super) fn binary(&mut self, op: BinOp, left: Val, right: Val, span: Span) -> Val {
        use BinOp::*;
        // Comparing, searching and matching walk both operands (a regex over 16 MiB takes
        // a good part of a second), and `+` and `<<` copy them.
        if self.budget.is_none() {
            let cap = MAX_COMPILE_WORK.saturating_sub(self.work) / COPY_WORK + 1;
            let cost = lazy::size_capped(&left, cap) + lazy::size_capped(&right, cap);
            if !self.work(cost.saturating_mul(COPY_WORK), span) {
                return Val::Undef;
            }
        }
        let mismatch = |this: &mut Self, verb: &str| {
            this.error(
                DiagnosticCode::TypeMismatch,
                span,
                format!(
                    "cannot {verb} {} `{}` and {} `{}`",
                    left.type_name(),
                    left.to_display(),
                    right.type_name(),
                    right.to_display()
                ),
            );
            Val::Undef
        };
        match op {
            Eq => Val::Bool(left.equals(&right)),
            Ne => Val::Bool(!left.equals(&right)),
            // Types compare by what they hold: `Integer[1, 3] < Integer`, `Any > NotUndef`.
            Lt | Le | Gt | Ge
                if let (Some(a), Some(b)) =
                    (self.type_of_value(&left), self.type_of_value(&right)) =>
            {
                Val::Bool(match op {
                    Lt => b.holds(&a) && a != b,
                    Le => b.holds(&a),
                    Gt => a.holds(&b) && a != b,
                    _ => a.holds(&b),
                })
            }
            Lt | Le | Gt | Ge => match left.compare(&right) {
                Ok(ordering) => Val::Bool(match op {
                    Lt => ordering.is_lt(),
                    Le => ordering.is_le(),
                    Gt => ordering.is_gt(),
                    _ => ordering.is_ge(),
                }),
                Err(message) => {
                    self.error(DiagnosticCode::TypeMismatch, span, message);
                    Val::Undef
                }
            },
            Match | NoMatch if matches!(right, Val::Type(_) | Val::Ref { title: None, .. }) => {
                match self.value_matches_type(&left, &right, span) {
                    Some(matched) => Val::Bool(matched == (op == Match)),
                    None => Val::Undef,
                }
            }
            Match | NoMatch => {
                let Val::Str(text) = &left else {
                    return mismatch(self, "match");
                };
                let pattern = match &right {
                    Val::Regex(pattern) | Val::Str(pattern) => pattern.clone(),
                    _ => return mismatch(self, "match"),
                };
                let matched = self.regex_match(&pattern, text, span);
                Val::Bool(matched == (op == Match))
            }
            In => Val::Bool(match (&left, &right) {
                (Val::Str(needle), Val::Str(haystack)) => {
                    haystack.to_lowercase().contains(&needle.to_lowercase())
                }
                (Val::Regex(pattern), Val::Str(haystack)) => {
                    let pattern = pattern.clone();
                    self.regex_match(&pattern, haystack, span)
                }
                (Val::Regex(pattern), Val::Array(items)) => {
                    let pattern = pattern.clone();
                    items.iter().any(|item| matches!(item, Val::Str(text) if self.regex_match(&pattern, text, span)))
                }
                // A type on the left: is an element (a hash's key) of that type.
                (Val::Type(_) | Val::Ref { title: None, .. }, Val::Array(_) | Val::Hash(_)) => {
                    let candidates: Vec<Val> = match &right {
                        Val::Array(items) => items.clone(),
                        Val::Hash(entries) => entries.iter().map(|(key, _)| key.clone()).collect(),
                        _ => Vec::new(),
                    };
                    candidates
                        .iter()
                        .any(|item| self.value_matches_type(item, &left, span) == Some(true))
                }
                (Val::Regex(pattern), Val::Hash(entries)) => {
                    let pattern = pattern.clone();
                    entries.iter().any(|(key, _)| matches!(key, Val::Str(text) if self.regex_match(&pattern, text, span)))
                }
                (needle, Val::Array(items)) => items.iter().any(|item| needle.equals(item)),
                (needle, Val::Hash(entries)) => entries.iter().any(|(key, _)| needle.equals(key)),
                // Puppet: nothing is in a value that is no string or collection.
                _ => false,
            }),
            Add | Sub | Mul | Div | Rem | LShift | RShift => self.arithmetic(op, left, right, span),
            And | Or => unreachable!("short-circuited in eval"),
        }
    }

    pub(super) fn arithmetic(&mut self, op: BinOp, left: Val, right: Val, span: Span) -> Val {
        use BinOp::*;
        // Times: a timestamp and a span, two spans, the distance of two timestamps.
        if matches!(op, Add | Sub)
            && let Some(result) = crate::eval::rich::arithmetic(op == Add, &left, &right)
        {
            return match result {
                Ok(value) => value,
                Err(message) => {
                    self.error(DiagnosticCode::Arithmetic, span, message);
                    Val::Undef
                }
            };
        }
        // Merging compares every key of one hash with every key of the other.
        if let (Add, Val::Hash(a), Val::Hash(b)) = (op, &left, &right)
            && self.budget.is_none()
            && !self.work((a.len() as u64).saturating_mul(b.len() as u64), span)
        {
            return Val::Undef;
        }
        // Strings that are numbers are numbers here, as in Puppet (`'5' + 2` is 7);
        // not where `+`, `-` and `<<` work on an array or a hash.
        let collection = matches!(left, Val::Array(_) | Val::Hash(_));
        let (left, right) = if collection {
            (left, right)
        } else {
            let symbol = op_symbol(op);
            let Some(left) = self.numeric_operand(left, symbol, span) else {
                return Val::Undef;
            };
            let Some(right) = self.numeric_operand(right, symbol, span) else {
                return Val::Undef;
            };
            (left, right)
        };
        let result: Result<Val, String> = match (op, left, right) {
            (op, Val::Int(a), Val::Int(b)) => {
                let value = match op {
                    Add => a.checked_add(b),
                    Sub => a.checked_sub(b),
                    Mul => a.checked_mul(b),
                    Div if b == 0 => {
                        self.error(DiagnosticCode::Arithmetic, span, "division by zero");
                        return Val::Undef;
                    }
                    // Rounded down, and the remainder takes the divisor's sign, as
                    // Puppet's (Ruby's) integers do: -7 / 2 is -4, -7 % 3 is 2.
                    Div => a.checked_div(b).map(|quotient| {
                        if a % b != 0 && ((a < 0) != (b < 0)) {
                            quotient - 1
                        } else {
                            quotient
                        }
                    }),
                    Rem if b == 0 => {
                        self.error(DiagnosticCode::Arithmetic, span, "division by zero");
                        return Val::Undef;
                    }
                    Rem => a.checked_rem(b).map(|remainder| {
                        if remainder != 0 && ((remainder < 0) != (b < 0)) {
                            remainder + b
                        } else {
                            remainder
                        }
                    }),
                    LShift => u32::try_from(b).ok().and_then(|b| a.checked_shl(b)),
                    _ => u32::try_from(b).ok().and_then(|b| a.checked_shr(b)),
                };
                value
                    .map(Val::Int)
                    .ok_or_else(|| "integer overflow".to_owned())
            }
            // Puppet's `%` is of integers only.
            (Rem, a @ (Val::Int(_) | Val::Float(_)), b @ (Val::Int(_) | Val::Float(_))) => {
                let _ = (a, b);
                Err(
                    "`%` takes integers; Puppet does not apply it to a Float (use \
                     `Integer($x) % n`, or `$x - $n * floor($x / $n)`)"
                        .to_owned(),
                )
            }
            (
                op @ (Add | Sub | Mul | Div),
                a @ (Val::Int(_) | Val::Float(_)),
                b @ (Val::Int(_) | Val::Float(_)),
            ) => {
                let (a, b) = (num(&a), num(&b));
                let value = match op {
                    Add => a + b,
                    Sub => a - b,
                    Mul => a * b,
                    _ => a / b,
                };
                if value.is_finite() {
                    Ok(Val::Float(value))
                } else {
                    Err("the result is not a finite number".to_owned())
                }
            }
            (Add, Val::Array(mut a), Val::Array(b)) => {
                a.extend(b);
                Ok(Val::Array(a))
            }
            (Add | LShift, Val::Array(mut a), other) => {
                a.push(other);
                Ok(Val::Array(a))
            }
            (Add, Val::Hash(mut a), Val::Hash(b)) => {
                for (key, value) in b {
                    match a.iter_mut().find(|(existing, _)| *existing == key) {
                        Some((_, existing)) => *existing = value,
                        None => a.push((key, value)),
                    }
                }
                Ok(Val::Hash(a))
            }
            (Sub, Val::Array(a), Val::Array(b)) => Ok(Val::Array(
                a.into_iter()
                    .filter(|item| !b.iter().any(|other| other.equals(item)))
                    .collect(),
            )),
            // An array minus a hash: minus the hash's `[key, value]` pairs, as Puppet.
            (Sub, Val::Array(a), Val::Hash(b)) => Ok(Val::Array(
                a.into_iter()
                    .filter(|item| {
                        !b.iter().any(|(key, value)| {
                            item.equals(&Val::Array(vec![key.clone(), value.clone()]))
                        })
                    })
                    .collect(),
            )),
            (Sub, Val::Array(a), other) => Ok(Val::Array(
                a.into_iter().filter(|item| !item.equals(&other)).collect(),
            )),
            (Sub, Val::Hash(a), Val::Array(keys)) => Ok(Val::Hash(
                a.into_iter()
                    .filter(|(key, _)| !keys.contains(key))
                    .collect(),
            )),
            (Sub, Val::Hash(a), Val::Hash(b)) => Ok(Val::Hash(
                a.into_iter()
                    .filter(|(key, _)| !b.iter().any(|(other, _)| other == key))
                    .collect(),
            )),
            (Sub, Val::Hash(a), key) => Ok(Val::Hash(
                a.into_iter()
                    .filter(|(existing, _)| *existing != key)
                    .collect(),
            )),
            (op, left, right) => Err(format!(
                "cannot apply `{}` to {} `{}` and {} `{}`{}",
                op_symbol(op),
                left.type_name(),
                left.to_display(),
                right.type_name(),
                right.to_display(),
                if matches!((&left, &right), (Val::Str(_), _) | (_, Val::Str(_))) {
                    "; join strings with interpolation: \"${a}${b}\""
                } else {
                    ""
                }
            )),
        };
        match result {
            Ok(value) => value,
            Err(message) => {
                self.error(DiagnosticCode::Arithmetic, span, message);
                Val::Undef
            }
        }
    }

    pub(super) fn negate(&mut self, operand: Val, span: Span) -> Val {
        let Some(operand) = self.numeric_operand(operand, "-", span) else {
            return Val::Undef;
        };
        match operand {
            Val::Int(value) => value.checked_neg().map_or_else(
                || {
                    self.error(
                        DiagnosticCode::Arithmetic,
                        span,
                        "integer overflow in negation",
                    );
                    Val::Undef
                },
                Val::Int,
            ),
            Val::Float(value) => Val::Float(-value),
            other => {
                self.error(
                    DiagnosticCode::TypeMismatch,
                    span,
                    format!(
                        "cannot negate {} `{}`",
                        other.type_name(),
                        other.to_display()
                    ),
                );
                Val::Undef
            }
        }
    }

    /// An operand of arithmetic: a string that is a number becomes that number; a
    /// string that is not one is an error naming it.
    pub(super) fn numeric_operand(&mut self, value: Val, symbol: &str, span: Span) -> Option<Val> {
        let Val::Str(text) = &value else {
            return Some(value);
        };
        match numeric_string(text) {
            Some(number) => Some(number),
            None => {
                self.error(
                    DiagnosticCode::Arithmetic,
                    span,
                    format!("`{symbol}` needs numbers, and the string `{text}` is not one"),
                )
                .help = Some(
                    "join strings with interpolation (\"${a}${b}\"); a number in a string is \
                     written as in the language (`42`, `0x2A`, `4.2`)"
                        .into(),
                );
                None
            }
        }
    }

    // ---- resources ----

    /// Relationship operands: references, strings naming classes, arrays of them, or a
    /// collector.
    pub(super) fn operand(&mut self, expr: &Expr) -> Operand {
        match &expr.kind {
            ExprKind::Relation(lhs, op, rhs) => {
                let left = self.operand(lhs);
                let right = self.operand(rhs);
                self.relations.push(Relation {
                    lhs: left,
                    rhs: right.clone(),
                    op: *op,
                    span: expr.span,
                });
                right
            }
            ExprKind::Collector(collector) => {
                Operand::Collector(self.collector(collector, expr.span))
            }
            _ => {
                let value = self.eval(expr);
                let mut flat = Vec::new();
                flatten_into(value, &mut flat);
                let mut refs = Vec::new();
                for item in flat {
                    match item {
                        Val::Undef => {}
                        Val::Ref {
                            type_name,
                            title: Some(title),
                        } => refs.push((type_name, title)),
                        Val::Str(name) => refs.push((
                            "class".to_owned(),
                            name.trim_start_matches("::").to_ascii_lowercase(),
                        )),
                        other => {
                            self.error(DiagnosticCode::BadOperand, expr.span, format!("a relationship operand must be a resource reference, a class name or a collector, not {} `{}`", other.type_name(), other.to_display()));
                        }
                    }
                }
                Operand::Refs(refs)
            }
        }
    }

    /// Whether a lowercased capitalized name names a type: a data type or alias, a
    /// resource type or defined type, a type declared in the language, or one of
    /// Puppet's own (`Class`, `Resource`, `Node`...).
    fn names_a_type(&self, lower: &str) -> bool {
        matches!(
            lower,
            "class"
                | "resource"
                | "node"
                | "stage"
                | "binary"
                | "object"
                | "typeset"
                | "error"
                | "init"
                | "uri"
                | "deferred"
                | "catalogentry"
        ) || self.is_data_type(lower)
            || self.kind_of(lower).is_some()
            || self
                .program
                .types
                .iter()
                .any(|declared| declared.name.eq_ignore_ascii_case(lower))
    }

    /// The type a type value stands for, a resource type's name as a resource type.
    fn type_of_value(&self, value: &Val) -> Option<crate::eval::ptype::PType> {
        use crate::eval::ptype::PType;
        match PType::of(value)? {
            PType::Named(name) if self.kind_of(&name).is_some() => {
                Some(PType::Resource(Some(name)))
            }
            PType::Named(name) if name == "resource" => Some(PType::Resource(None)),
            other => Some(other),
        }
    }
}
