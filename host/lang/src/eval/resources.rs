//! Resources: declarations with their attributes and metaparameters, resource defaults
//! (lexical), overrides and the chains of relationship operators.

use super::*;
use crate::diagnostic::DiagnosticCode;

impl Evaluator<'_> {
    pub(super) fn next_order(&mut self) -> Vec<u32> {
        self.seq += 1;
        let mut order = self.ctx.order.clone();
        order.push(self.seq);
        order
    }

    // ---- expressions ----

    /// stdlib's `ensure_resource`: declares `type_name[title]` with `attributes` unless
    /// it is declared already (with other attributes, that is a duplicate, as in
    /// stdlib).
    pub(crate) fn ensure_resource(
        &mut self,
        type_name: &str,
        title: &str,
        attributes: Vec<(Val, Val)>,
        span: Span,
    ) {
        let key = (type_name.to_owned(), title.to_owned());
        if let Some(&existing) = self.index.get(&key).or(self.aliases.get(&key)) {
            let differs = attributes.iter().find(|(name, value)| {
                self.resources[existing]
                    .attr(&name.to_interpolated())
                    .is_none_or(|attr| !attr.value.equals(value))
            });
            if let Some((name, _)) = differs {
                let reference = self.resources[existing].reference();
                let first = self.resources[existing].span;
                self.error(
                    DiagnosticCode::DuplicateTitle,
                    span,
                    format!(
                        "`{reference}` is declared already, without `{}` as given here",
                        name.to_interpolated()
                    ),
                )
                .with_related_mut(first, "declared here")
                .help = Some("declare it once, with the attributes both need".into());
            }
            return;
        }
        let Some(kind) = self.kind_of(type_name) else {
            self.unknown_type(type_name, span);
            return;
        };
        let ops = attributes
            .into_iter()
            .map(|(name, value)| Op {
                name: name.to_interpolated().into(),
                value,
                span,
                append: false,
            })
            .collect();
        self.create(type_name, title, kind, ops, Status::Realized, span);
    }

    pub(super) fn kind_of(&self, type_name: &str) -> Option<Kind> {
        if type_name == "class" {
            return None;
        }
        if self.types.contains(type_name) {
            return Some(Kind::Plugin);
        }
        self.defines.get(type_name).map(|idx| Kind::Define(*idx))
    }

    pub(super) fn unknown_type(&mut self, type_name: &str, span: Span) {
        self.missing.push(type_name.to_owned());
        let mut known: Vec<&str> = self.types.names().collect();
        known.extend(self.defines.keys().map(String::as_str));
        known.sort_unstable();
        self.error(
            DiagnosticCode::UnknownType,
            span,
            format!("unknown resource type `{type_name}`"),
        )
        .help = Some(format!(
            "no plugin of the policy provides it and no `define {type_name}` exists; known types: {}",
            known.join(", ")
        ));
    }

    /// Evaluates attribute operations; `* =>` is expanded, duplicates are reported.
    pub(super) fn eval_ops(&mut self, ops: &[AttrOp], allow_append: bool, where_: &str) -> Vec<Op> {
        let mut out: Vec<Op> = Vec::with_capacity(ops.len());
        let mut splat_seen: Option<Span> = None;
        for op in ops {
            let value = self.eval(&op.value);
            match op.kind {
                AttrOpKind::Splat => {
                    if let Some(first) = splat_seen {
                        self.error(
                            DiagnosticCode::SplatTwice,
                            op.name_span,
                            format!("`* =>` may appear only once in {where_}"),
                        )
                        .with_related_mut(first, "first used here")
                        .help = Some("merge the hashes with `+` into one `* =>`".into());
                        continue;
                    }
                    splat_seen = Some(op.name_span);
                    let entries = match value {
                        Val::Hash(entries) => entries,
                        Val::Undef => Vec::new(),
                        other => {
                            self.error(
                                DiagnosticCode::SplatNotHash,
                                op.value.span,
                                format!(
                                    "`* =>` needs a hash of attributes, not {} `{}`",
                                    other.type_name(),
                                    other.to_display()
                                ),
                            );
                            continue;
                        }
                    };
                    for (key, value) in entries {
                        let Val::Str(name) = key else {
                            self.error(
                                DiagnosticCode::SplatNotHash,
                                op.value.span,
                                format!(
                                    "`* =>` hash key `{}` is not an attribute name",
                                    key.to_display()
                                ),
                            );
                            continue;
                        };
                        self.push_op(
                            &mut out,
                            Op {
                                name: name.into(),
                                value,
                                span: op.value.span,
                                append: false,
                            },
                        );
                    }
                }
                AttrOpKind::Append if !allow_append => {
                    self.error(
                        DiagnosticCode::AppendInResource,
                        op.name_span,
                        format!("`+>` cannot be used in {where_}"),
                    )
                    .help = Some(format!(
                        "write `{} => ...`; `+>` appends only in defaults, overrides and collectors",
                        op.name
                    ));
                }
                kind => self.push_op(
                    &mut out,
                    Op {
                        name: op.name.clone(),
                        value,
                        span: op.name_span,
                        append: kind == AttrOpKind::Append,
                    },
                ),
            }
        }
        out
    }

    pub(super) fn push_op(&mut self, out: &mut Vec<Op>, op: Op) {
        if let Some(first) = out.iter().find(|existing| existing.name == op.name) {
            let first = first.span;
            self.error(
                DiagnosticCode::DuplicateAttribute,
                op.span,
                format!("attribute `{}` is set twice", op.name),
            )
            .with_related_mut(first, "first set here")
            .help = Some("keep one of the two settings".into());
            return;
        }
        out.push(op);
    }

    /// Is `name` an attribute of the type? Reports it if not.
    pub(super) fn check_attribute(
        &mut self,
        type_name: &str,
        kind: Kind,
        name: &str,
        span: Span,
    ) -> bool {
        if matches!(kind, Kind::Class(_) | Kind::Define(_))
            && [
                "only_if",
                "not_if",
                "guard_interpreter",
                "requires",
                "provider",
            ]
            .contains(&name)
        {
            self.error(
                DiagnosticCode::UnsupportedMetaparameter,
                span,
                format!("`{name}` on a class or defined type instance is not supported"),
            )
            .help = Some(if name == "provider" {
                "put `provider` on the resources it should apply to, or in a resource default \
                 such as `Package { provider => 'apt' }`"
                    .to_owned()
            } else {
                format!("put `{name}` on the resources it should guard")
            });
            return false;
        }
        if METAPARAMETERS.contains(&name) {
            return true;
        }
        if UNSUPPORTED_METAPARAMETERS.contains(&name) {
            self.error(
                DiagnosticCode::UnsupportedMetaparameter,
                span,
                format!("`{name}` is a Puppet metaparameter that wconverge does not support"),
            )
            .help = Some(format!(
                "remove `{name}`; supported metaparameters: {}",
                METAPARAMETERS.join(", ")
            ));
            return false;
        }
        let program = Rc::clone(&self.program);
        let valid: Vec<&str> = match kind {
            Kind::Plugin => self
                .types
                .attributes(type_name)
                .map(|names| names.iter().map(String::as_str).collect())
                .unwrap_or_default(),
            Kind::Define(idx) => std::iter::once("name")
                .chain(
                    program
                        .define(idx)
                        .params
                        .iter()
                        .map(|param| param.name.as_str()),
                )
                .collect(),
            Kind::Class(idx) => program
                .class(idx)
                .params
                .iter()
                .map(|param| param.name.as_str())
                .collect(),
        };
        if valid.contains(&name) {
            return true;
        }
        let what = match kind {
            Kind::Class(_) => format!("class `{type_name}`"),
            _ => format!("type `{}`", display_type_name(type_name)),
        };
        self.error(
            DiagnosticCode::UnknownAttribute,
            span,
            format!("{what} has no attribute `{name}`"),
        )
        .with_label_mut("unknown attribute")
        .help = Some(if valid.is_empty() {
            format!("{what} takes no attributes besides the metaparameters")
        } else {
            format!("valid attributes: {}", valid.join(", "))
        });
        false
    }

    pub(super) fn resource_expr(&mut self, resource: &ResourceExpr, _span: Span) -> Val {
        if let Some(written) = &resource.type_expr {
            // `Resource[$type] { ... }`: the type named by a value, then as if written.
            let named = match self.eval(written) {
                Val::Str(name) => name,
                Val::Ref {
                    type_name,
                    title: None,
                } => type_name,
                Val::Undef => return Val::Undef,
                other => {
                    self.error(
                        DiagnosticCode::BadArgument,
                        written.span,
                        format!(
                            "`Resource[...]` takes a resource type or its name, not {} `{}`",
                            other.type_name(),
                            other.to_display()
                        ),
                    );
                    return Val::Undef;
                }
            };
            let mut concrete = resource.clone();
            concrete.type_name = named.trim_start_matches("::").to_ascii_lowercase();
            concrete.type_expr = None;
            return self.resource_expr(&concrete, _span);
        }
        let kind = if resource.type_name == "class" {
            None
        } else {
            match self.kind_of(&resource.type_name) {
                Some(kind) => Some(kind),
                None => {
                    self.unknown_type(&resource.type_name, resource.type_span);
                    return Val::Undef;
                }
            }
        };
        if kind.is_none() && resource.form != Form::Regular {
            self.error(
                DiagnosticCode::VirtualClass,
                resource.type_span,
                "a class cannot be virtual or exported",
            )
            .help = Some("remove the `@`".into());
            return Val::Undef;
        }
        struct Evaluated {
            titles: Vec<Val>,
            title_span: Span,
            ops: Vec<Op>,
        }
        let mut bodies = Vec::with_capacity(resource.bodies.len());
        for body in &resource.bodies {
            let before = self.errors;
            let title = self.eval(&body.title);
            if self.errors > before {
                // The title's error is reported; the resource would only add its own.
                continue;
            }
            let mut titles = Vec::new();
            flatten_into(title, &mut titles);
            let ops = self.eval_ops(&body.ops, false, "a resource body");
            bodies.push(Evaluated {
                titles,
                title_span: body.title.span,
                ops,
            });
        }
        let default_bodies: Vec<&Evaluated> = bodies
            .iter()
            .filter(|body| body.titles.contains(&Val::Default))
            .collect();
        if let [first, second, ..] = default_bodies.as_slice() {
            self.error(
                DiagnosticCode::DuplicateDefaultBody,
                second.title_span,
                "a resource expression has two `default:` bodies",
            )
            .with_related_mut(first.title_span, "the first")
            .help = Some("merge them into one `default:` body".into());
        }
        let local_defaults: Vec<Op> = default_bodies
            .iter()
            .flat_map(|body| body.ops.iter().cloned())
            .collect();
        let mut refs = Vec::new();
        let mut seen_titles: HashMap<String, Span> = HashMap::new();
        for body in &bodies {
            for title in &body.titles {
                let title = match title {
                    Val::Default => continue,
                    Val::Str(title) if !title.is_empty() => title.clone(),
                    other => {
                        self.error(
                            DiagnosticCode::BadTitle,
                            body.title_span,
                            format!(
                                "a title must be a non-empty string, not {} `{}`",
                                other.type_name(),
                                other.to_display()
                            ),
                        )
                        .help = Some("quote the title: `'name'`".into());
                        continue;
                    }
                };
                if let Some(first) = seen_titles.insert(title.clone(), body.title_span) {
                    self.error(
                        DiagnosticCode::DuplicateTitle,
                        body.title_span,
                        format!("title `{title}` appears twice in one resource expression"),
                    )
                    .with_related_mut(first, "first given here")
                    .help = Some("remove one of the two titles".into());
                    continue;
                }
                let mut ops: Vec<Op> = local_defaults
                    .iter()
                    .filter(|default| !body.ops.iter().any(|op| op.name == default.name))
                    .cloned()
                    .collect();
                ops.extend(body.ops.iter().cloned());
                match kind {
                    None => {
                        if let Some(idx) = self.declare_class(&title, Some(ops), body.title_span) {
                            refs.push(Val::reference("class", &self.resources[idx].title.clone()));
                        }
                    }
                    Some(kind) => {
                        let status = match resource.form {
                            Form::Regular => Status::Realized,
                            Form::Virtual => Status::Virtual,
                            Form::Exported => Status::Exported,
                        };
                        if self
                            .create(
                                &resource.type_name,
                                &title,
                                kind,
                                ops,
                                status,
                                body.title_span,
                            )
                            .is_some()
                        {
                            refs.push(Val::reference(&resource.type_name, &title));
                        }
                    }
                }
            }
        }
        Val::Array(refs)
    }

    pub(super) fn create(
        &mut self,
        type_name: &str,
        title: &str,
        kind: Kind,
        ops: Vec<Op>,
        status: Status,
        span: Span,
    ) -> Option<ResourceId> {
        let key = (type_name.to_owned(), title.to_owned());
        if let Some(&first) = self.aliases.get(&key) {
            self.alias_conflict(first, span, title);
            return None;
        }
        if let Some(&first) = self.index.get(&key) {
            let first_span = self.resources[first].span;
            let reference = self.resources[first].reference();
            self.error(
                DiagnosticCode::DuplicateTitle,
                span,
                format!("`{reference}` is declared twice"),
            )
            .with_label_mut("declared again here")
            .with_related_mut(first_span, "first declared here")
            .help = Some(
                "rename one of the two, or merge their attributes into one declaration".into(),
            );
            return None;
        }
        let mut attrs: Vec<Attr> = self
            .visible_defaults(type_name, self.ctx.scope)
            .into_iter()
            .map(|(name, value, span)| Attr {
                name,
                value,
                span,
                from_default: true,
            })
            .collect();
        for op in ops {
            if !self.check_op(type_name, kind, &op) {
                continue;
            }
            match attrs.iter_mut().find(|attr| attr.name == op.name) {
                Some(attr) => {
                    *attr = Attr {
                        name: op.name,
                        value: op.value,
                        span: op.span,
                        from_default: false,
                    }
                }
                None => attrs.push(Attr {
                    name: op.name,
                    value: op.value,
                    span: op.span,
                    from_default: false,
                }),
            }
        }
        if self.resources.len() >= MAX_RESOURCES {
            if !self.resource_limit_reported {
                self.resource_limit_reported = true;
                self.error(DiagnosticCode::ResourceLimit, span, format!("the manifests declare more than {MAX_RESOURCES} resources (the limit)"))
                    .help = Some("a defined type that declares several instances of itself multiplies without end; check the recursion".into());
            }
            return None;
        }
        // The namevar identifies a resource as its title does (Puppet's alias): two
        // resources may not share either. Not `exec`'s command, which may repeat.
        let namevar = match kind {
            Kind::Define(_) => Some("name"),
            Kind::Plugin => self
                .types
                .namevar(type_name)
                .filter(|namevar| *namevar != "command"),
            Kind::Class(_) => None,
        };
        let alias = namevar.and_then(|namevar| match attrs.iter().find(|a| &*a.name == namevar) {
            Some(Attr {
                value: Val::Str(value),
                span,
                ..
            }) if value != title => Some((value.clone(), *span)),
            _ => None,
        });
        if let Some((value, value_span)) = &alias {
            let alias_key = (type_name.to_owned(), value.clone());
            if let Some(&first) = self.index.get(&alias_key).or(self.aliases.get(&alias_key)) {
                self.alias_conflict(first, *value_span, value);
                return None;
            }
        }
        // Kept until the catalog is built: exactly as many as it has.
        attrs.shrink_to_fit();
        let order = self.next_order();
        let horizon = self.ctx.horizon.min(order.last().copied().unwrap_or(0));
        let idx = ResourceId::new(self.resources.len());
        if let Some((value, _)) = alias {
            self.aliases.insert((type_name.to_owned(), value), idx);
        }
        self.resources.push(Res {
            type_name: type_name.to_owned(),
            title: title.to_owned(),
            kind,
            status,
            attrs,
            span,
            container: self.ctx.container,
            declared_in: self.ctx.class_name.clone(),
            order,
            function_tags: Vec::new(),
            evaluated: false,
            depth: self.ctx.depth,
            exported: status == Status::Exported,
            horizon,
            below_node: self.reaches_node_scope(),
            foreign: None,
        });
        self.index.insert(key, idx);
        self.index_by_type(type_name, idx);
        if status == Status::Realized && matches!(kind, Kind::Define(_)) {
            self.pending_defines.push_back(idx);
        }
        Some(idx)
    }

    /// Files resource `idx` under its type, for the collectors.
    pub(super) fn index_by_type(&mut self, type_name: &str, idx: ResourceId) {
        // Look up before inserting: `entry` would allocate the key for every resource.
        match self.by_type.get_mut(type_name) {
            Some(list) => list.push(idx),
            None => {
                self.by_type.insert(type_name.to_owned(), vec![idx]);
            }
        }
    }

    /// A resource identified by `identity` (its title or its namevar) like the earlier
    /// resource `first`.
    pub(super) fn alias_conflict(&mut self, first: ResourceId, span: Span, identity: &str) {
        let first_span = self.resources[first].span;
        let reference = self.resources[first].reference();
        let namevar = match self.resources[first].kind {
            Kind::Plugin => self
                .types
                .namevar(&self.resources[first].type_name)
                .unwrap_or("name")
                .to_owned(),
            _ => "name".to_owned(),
        };
        self.error(
            DiagnosticCode::DuplicateTitle,
            span,
            format!(
                "`{identity}` already identifies `{reference}`, by its title or its `{namevar}`"
            ),
        )
        .with_label_mut("identified again here")
        .with_related_mut(first_span, "first declared here")
        .help = Some(format!(
            "a resource's title and its `{namevar}` both identify it (Puppet's \"Cannot alias\"): \
             declare the thing once"
        ));
    }

    /// The defaults for `type_name` visible from `scope`, the nearest first.
    pub(super) fn visible_defaults(
        &self,
        type_name: &str,
        scope: ScopeId,
    ) -> Vec<(std::rc::Rc<str>, Val, Span)> {
        let mut out: Vec<(std::rc::Rc<str>, Val, Span)> = Vec::new();
        let mut current = Some(scope);
        while let Some(id) = current {
            for entry in &self.scopes[id].defaults {
                // A defined type is evaluated after the main code: the top-scope
                // defaults set after its instance was declared are not for it.
                let too_late = id == TOP && entry.seq > self.ctx.horizon;
                if entry.type_name == type_name
                    && !too_late
                    && !out.iter().any(|(name, _, _)| *name == entry.attribute)
                {
                    out.push((entry.attribute.clone(), entry.value.clone(), entry.span));
                }
            }
            current = self.scopes[id].parent;
        }
        out
    }

    pub(super) fn defaults_expr(&mut self, type_name: &str, ops: &[AttrOp], span: Span) {
        if type_name == "class" {
            self.error(
                DiagnosticCode::ClassDefaults,
                span,
                "defaults cannot be set for classes",
            )
            .help = Some("pass parameters to the class instead".into());
            return;
        }
        let Some(kind) = self.kind_of(type_name) else {
            self.unknown_type(type_name, span);
            return;
        };
        let ops = self.eval_ops(ops, true, "resource defaults");
        let scope = self.ctx.scope;
        for op in ops {
            if !self.check_op(type_name, kind, &op) {
                continue;
            }
            if let Some(first) = self.scopes[scope]
                .defaults
                .iter()
                .find(|entry| entry.type_name == type_name && entry.attribute == op.name)
            {
                let first = first.span;
                self.error(
                    DiagnosticCode::DefaultRedefined,
                    op.span,
                    format!(
                        "the default for `{}` of `{}` is already set in this scope",
                        op.name,
                        display_type_name(type_name)
                    ),
                )
                .with_related_mut(first, "first set here")
                .help = Some(
                    "set each default once per scope; use `+>` in a nested scope to add to it"
                        .into(),
                );
                continue;
            }
            let value = if op.append {
                let outer = self.scopes[scope].parent.and_then(|parent| {
                    self.visible_defaults(type_name, parent)
                        .into_iter()
                        .find(|(name, _, _)| *name == op.name)
                        .map(|(_, value, _)| value)
                });
                append(outer, op.value)
            } else {
                op.value
            };
            self.seq += 1;
            self.scopes[scope].defaults.push(DefaultEntry {
                type_name: type_name.to_owned(),
                attribute: op.name,
                value,
                span: op.span,
                seq: self.seq,
            });
        }
    }

    pub(super) fn override_expr(&mut self, target: &Expr, ops: &[AttrOp], span: Span) {
        let target_value = self.eval(target);
        let mut items = Vec::new();
        flatten_into(target_value, &mut items);
        let ops = self.eval_ops(ops, true, "an override");
        for item in items {
            let Val::Ref {
                type_name,
                title: Some(title),
            } = item
            else {
                self.error(
                    DiagnosticCode::OverrideTarget,
                    target.span,
                    format!(
                        "an override needs references to resources, like `File['a']`, not {} `{}`",
                        item.type_name(),
                        item.to_display()
                    ),
                );
                continue;
            };
            let key = (type_name, title);
            let class_name = self.ctx.class_name.clone();
            match self.index.get(&key).copied() {
                Some(idx) => self.apply_override(idx, &ops, class_name.as_deref(), false),
                None => self.overrides.push(PendingOverride {
                    target: key,
                    ops: ops.clone(),
                    class_name,
                    span,
                }),
            }
        }
    }

    /// Does `class` inherit (directly or not) from `ancestor`?
    pub(super) fn inherits(&self, class: &str, ancestor: &str) -> bool {
        let mut current = class.to_owned();
        for _ in 0..=self.program.classes.len() {
            let Some(&idx) = self.classes.get(&current) else {
                return false;
            };
            let Some((parent, _)) = &self.program.class(idx).parent else {
                return false;
            };
            if parent == ancestor {
                return true;
            }
            current.clone_from(parent);
        }
        false
    }

    pub(super) fn apply_override(
        &mut self,
        idx: ResourceId,
        ops: &[Op],
        class_name: Option<&str>,
        by_collector: bool,
    ) {
        let may_replace = by_collector
            || class_name.is_some_and(|class| {
                self.resources[idx]
                    .declared_in
                    .as_deref()
                    .is_some_and(|declared| self.inherits(class, declared))
            });
        let type_name = self.resources[idx].type_name.clone();
        let kind = self.resources[idx].kind;
        if let Some(first) = ops.first() {
            let reference = self.resources[idx].reference();
            match kind {
                Kind::Class(_) => {
                    self.error(
                        DiagnosticCode::OverrideClass,
                        first.span,
                        format!("`{reference}` is a class; its parameters cannot be overridden"),
                    )
                    .help = Some(
                        "declare the class with its parameters: `class { 'name': param => value }`"
                            .into(),
                    );
                    return;
                }
                Kind::Define(_) if self.resources[idx].evaluated => {
                    self.error(DiagnosticCode::OverrideTooLate, first.span, format!("`{reference}` was already evaluated when this override was applied, so its body would not see it"))
                        .help = Some("set the value where the instance is declared, or override it from the main manifest".into());
                    return;
                }
                _ => {}
            }
        }
        for op in ops {
            if !self.check_op(&type_name, kind, op) {
                continue;
            }
            let existing = self.resources[idx].attr(&op.name).cloned();
            let reference = self.resources[idx].reference();
            let value = if op.append {
                if !may_replace {
                    self.error(DiagnosticCode::OverrideAppend, op.span, format!("`+>` cannot append to `{}` of `{reference}` here", op.name))
                        .help = Some("outside a class that inherits the class declaring the resource, an override may only set attributes that have no value; `+>` would change one".into());
                    continue;
                }
                append(existing.map(|attr| attr.value), op.value.clone())
            } else {
                if let Some(existing) = &existing
                    && !existing.from_default
                    && existing.value != Val::Undef
                    && !may_replace
                {
                    self.error(DiagnosticCode::OverrideSet, op.span, format!("`{reference}` already has `{}` set", op.name))
                        .with_related_mut(existing.span, "set here")
                        .help = Some("outside a class that inherits the class declaring the resource, an override may only set attributes that have no value; move the override into an inheriting class or change the declaration".into());
                    continue;
                }
                op.value.clone()
            };
            let attr = Attr {
                name: op.name.clone(),
                value,
                span: op.span,
                from_default: false,
            };
            let attrs = &mut self.resources[idx].attrs;
            match attrs.iter_mut().find(|existing| existing.name == op.name) {
                Some(existing) => *existing = attr,
                None => attrs.push(attr),
            }
        }
    }

    /// Reports a tag that is not made of the characters tags allow.
    pub(super) fn check_tag(&mut self, tag: &str, span: Span) {
        if !catalog_output::valid_tag(tag) {
            self.error(DiagnosticCode::BadTag, span, format!("`{tag}` is not a valid tag"))
                .help = Some("tags are made of letters, digits, `_`, `-`, `.` and `:`, and start with a letter, digit or `_`".into());
        }
    }

    /// Is the operation's attribute one of the type's? Metaparameter values that no
    /// later step reads as such (tags, `noop` on containers) are checked here, where
    /// they are given.
    pub(super) fn check_op(&mut self, type_name: &str, kind: Kind, op: &Op) -> bool {
        if !self.check_attribute(type_name, kind, &op.name, op.span) {
            return false;
        }
        match &*op.name {
            "tag" => self.check_tag_attribute(&op.value, op.span),
            "noop" => self.check_noop(&op.value, op.span),
            _ => {}
        }
        true
    }

    /// `noop` on a class or defined type instance decides for what it contains; a
    /// value that is not a boolean must not be read as `false`.
    pub(super) fn check_noop(&mut self, value: &Val, span: Span) {
        if !matches!(value, Val::Bool(_) | Val::Undef) {
            self.error(
                DiagnosticCode::BadMetaparameter,
                span,
                format!(
                    "`noop` must be true or false, not {} `{}`",
                    value.type_name(),
                    value.to_display()
                ),
            );
        }
    }

    /// Checks the values of a `tag` attribute where it is set.
    pub(super) fn check_tag_attribute(&mut self, value: &Val, span: Span) {
        let mut flat = Vec::new();
        flatten_into(value.clone(), &mut flat);
        for item in flat {
            match item {
                Val::Str(tag) => self.check_tag(&tag, span),
                Val::Undef => {}
                other => {
                    self.error(
                        DiagnosticCode::BadTag,
                        span,
                        format!(
                            "a tag is a string, not {} `{}`",
                            other.type_name(),
                            other.to_display()
                        ),
                    );
                }
            }
        }
    }
}
