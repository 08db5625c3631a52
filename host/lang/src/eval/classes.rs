//! Classes, defined types and nodes: definitions loaded, parameters bound and
//! type-checked, classes declared once, defined types evaluated in rounds (`generate`).

use super::*;
use crate::diagnostic::DiagnosticCode;

impl Evaluator<'_> {
    pub(super) fn load_definitions(&mut self) {
        self.load_types();
        let program = Rc::clone(&self.program);
        let mut first: HashMap<String, Span> = HashMap::new();
        for (idx, class) in program.classes.iter().enumerate() {
            if let Some(previous) = first.insert(format!("class {}", class.name), class.span) {
                self.error(
                    DiagnosticCode::DuplicateDefinition,
                    class.span,
                    format!("class `{}` is defined twice", class.name),
                )
                .with_related_mut(previous, "first defined here")
                .help = Some("rename one of the classes, or merge them".into());
                continue;
            }
            self.classes.insert(class.name.clone(), ClassId::new(idx));
            self.check_params(&class.params, &format!("class `{}`", class.name));
        }
        for (idx, function) in program.functions.iter().enumerate() {
            if let Some(previous) =
                first.insert(format!("function {}", function.name), function.span)
            {
                self.error(
                    DiagnosticCode::DuplicateDefinition,
                    function.span,
                    format!("function `{}` is defined twice", function.name),
                )
                .with_related_mut(previous, "first defined here")
                .help = Some("rename one of the functions, or merge them".into());
                continue;
            }
            if crate::eval::functions::is_builtin(&function.name) {
                self.error(
                    DiagnosticCode::FunctionShadowsBuiltin,
                    function.span,
                    format!("`{}` is a built-in function", function.name),
                )
                .help = Some("give it a name of its module's namespace: `mymodule::name`".into());
                continue;
            }
            self.functions
                .insert(function.name.clone(), FunctionId::new(idx));
            self.check_params(&function.params, &format!("function `{}`", function.name));
        }
        for (idx, define) in program.defines.iter().enumerate() {
            if let Some(previous) = first.insert(format!("define {}", define.name), define.span) {
                self.error(
                    DiagnosticCode::DuplicateDefinition,
                    define.span,
                    format!("defined type `{}` is defined twice", define.name),
                )
                .with_related_mut(previous, "first defined here")
                .help = Some("rename one of the defined types, or merge them".into());
                continue;
            }
            if self.types.contains(&define.name) {
                self.error(
                    DiagnosticCode::DefineShadowsType,
                    define.span,
                    format!(
                        "defined type `{}` has the name of a type a plugin provides",
                        define.name
                    ),
                )
                .help = Some(
                    "the plugin's type would always be chosen; rename the defined type".into(),
                );
                continue;
            }
            self.defines.insert(define.name.clone(), DefineId::new(idx));
            self.check_params(&define.params, &format!("defined type `{}`", define.name));
        }
    }

    pub(super) fn check_params(&mut self, params: &[Param], owner: &str) {
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for param in params {
            if let Some(assign) = param.default.as_ref().and_then(find_assignment) {
                self.error(
                    DiagnosticCode::AssignmentInDefault,
                    assign,
                    format!(
                        "the default of `${}` in {owner} assigns a variable",
                        param.name
                    ),
                )
                .help = Some(
                    "a parameter's default may not create variables; compute the value without `=`"
                        .into(),
                );
            }
            if let Some(previous) = seen.insert(&param.name, param.span) {
                self.error(
                    DiagnosticCode::DuplicateParameter,
                    param.span,
                    format!("parameter `${}` of {owner} is declared twice", param.name),
                )
                .with_related_mut(previous, "first declared here");
            }
            if METAPARAMETERS.contains(&param.name.as_str())
                || ["title", "name"].contains(&param.name.as_str())
            {
                self.error(DiagnosticCode::ReservedParameter, param.span, format!("parameter `${}` of {owner} has a reserved name", param.name))
                    .help = Some("`title`, `name` and the metaparameters are set for every resource; rename the parameter".into());
            }
        }
    }

    pub(super) fn evaluate_node(&mut self) {
        let program = Rc::clone(&self.program);
        if program.nodes.is_empty() {
            return;
        }
        let mut seen: HashMap<String, Span> = HashMap::new();
        for definition in &program.nodes {
            for (host, span) in &definition.matches {
                let key = match host {
                    HostMatch::Name(name) => format!("name {}", name.to_ascii_lowercase()),
                    HostMatch::Regex(pattern) => format!("regex {pattern}"),
                    HostMatch::Default => "default".to_owned(),
                };
                if let Some(first) = seen.insert(key, *span) {
                    self.error(
                        DiagnosticCode::DuplicateNode,
                        *span,
                        "this node match is given twice",
                    )
                    .with_related_mut(first, "first given here")
                    .help = Some("merge the two node definitions".into());
                }
            }
        }
        let node = self.node.to_ascii_lowercase();
        let mut chosen = None;
        'exact: for definition in &program.nodes {
            for (host, _) in &definition.matches {
                if let HostMatch::Name(name) = host
                    && name.to_ascii_lowercase() == node
                {
                    chosen = Some(definition);
                    break 'exact;
                }
            }
        }
        if chosen.is_none() {
            'regex: for definition in &program.nodes {
                for (host, span) in &definition.matches {
                    // The match's groups are `$0`, `$1`... in the node's body.
                    if let HostMatch::Regex(pattern) = host
                        && self.regex_match(pattern, self.node, *span)
                    {
                        chosen = Some(definition);
                        break 'regex;
                    }
                }
            }
        }
        if chosen.is_none() {
            chosen = program.nodes.iter().find(|definition| {
                definition
                    .matches
                    .iter()
                    .any(|(host, _)| *host == HostMatch::Default)
            });
        }
        let Some(definition) = chosen else {
            let span = program.nodes[0].span;
            self.error(
                DiagnosticCode::NoNodeMatch,
                span,
                format!("no node definition matches the node `{}`", self.node),
            )
            .help = Some(
                "add a `node default { }` definition, or pass the node's name with `--node NAME`"
                    .into(),
            );
            return;
        };
        let scope = self.new_scope(Some(TOP));
        self.node_scope = Some(scope);
        let ctx = Ctx {
            scope,
            ..self.ctx.clone()
        };
        let saved = std::mem::replace(&mut self.ctx, ctx);
        self.block(&definition.body);
        self.end_body();
        self.ctx = saved;
    }

    pub(super) fn declare_class(
        &mut self,
        name: &str,
        given: Option<Vec<Op>>,
        span: Span,
    ) -> Option<ResourceId> {
        let name = name.trim_start_matches("::").to_ascii_lowercase();
        if self.class_stack.contains(&name) {
            let mut chain = self.class_stack.clone();
            chain.push(name.clone());
            self.error(DiagnosticCode::IncludeCycle, span, format!("class `{name}` is included while it is being evaluated: {}", chain.join(" → ")))
                .help = Some("classes that include each other in a loop never finish; move what both need into a third class".into());
            return None;
        }
        if let Some(&idx) = self.index.get(&("class".to_owned(), name.clone())) {
            if given.is_some() {
                let first = self.resources[idx].span;
                self.error(
                    DiagnosticCode::DuplicateClass,
                    span,
                    format!("class `{name}` is already declared"),
                )
                .with_related_mut(first, "first declared (or included) here")
                .help = Some(
                    "a class with parameters must be declared once, before any `include` of it"
                        .into(),
                );
            }
            return Some(idx);
        }
        if self.class_stack.len() >= MAX_CLASS_DEPTH {
            self.error(
                DiagnosticCode::ClassDepthLimit,
                span,
                format!("classes include each other more than {MAX_CLASS_DEPTH} deep (the limit)"),
            )
            .help = Some("flatten the chain of includes".into());
            return None;
        }
        let Some(&def_idx) = self.classes.get(&name) else {
            self.missing.push(name.clone());
            if let Some(why) = self.unreadable.get(&name).cloned() {
                self.error(
                    DiagnosticCode::UnknownClass,
                    span,
                    format!("class `{name}`: {why}"),
                )
                .help = Some("make the module's manifest readable".into());
                return None;
            }
            let mut known: Vec<&str> = self.classes.keys().map(String::as_str).collect();
            known.sort_unstable();
            let (module, file) = autoload_path(&name);
            self.error(
                DiagnosticCode::UnknownClass,
                span,
                format!("unknown class `{name}`"),
            )
            .help = Some(if known.is_empty() {
                format!(
                    "define it with `class {name} {{ ... }}`, or in `{file}.wcv` (or `{file}.pp`) of module `{module}` in the module path (`--modulepath`)"
                )
            } else {
                format!(
                    "define it, or in `{file}.wcv` (or `{file}.pp`) of module `{module}` in the module path (`--modulepath`); defined classes: {}",
                    known.join(", ")
                )
            });
            return None;
        };
        let program = Rc::clone(&self.program);
        let definition = program.class(def_idx);
        let mut parent_scope = TOP;
        if let Some((parent, parent_span)) = &definition.parent {
            if self.inherits(parent, &name) || *parent == name {
                self.error(
                    DiagnosticCode::CircularInheritance,
                    *parent_span,
                    format!("class `{name}` inherits from itself through `{parent}`"),
                )
                .help = Some("remove one `inherits` from the loop".into());
                return None;
            }
            // A parent already declared is not declared again, even while its body
            // runs: `class m { include m::config }` with `class m::config inherits m`
            // is Puppet's params pattern.
            let parent_key = (
                "class".to_owned(),
                parent.trim_start_matches("::").to_ascii_lowercase(),
            );
            if !self.index.contains_key(&parent_key) {
                self.class_stack.push(name.clone());
                let parent_idx = self.declare_class(parent, None, *parent_span);
                self.class_stack.pop();
                parent_idx?;
            }
            parent_scope = self
                .class_scopes
                .get(parent_key.1.as_str())
                .copied()
                .unwrap_or(TOP);
        } else if let Some(node_scope) = self.node_scope {
            // Declared from the node's body (top-level code ran before it): the node's
            // variables are visible, as in Puppet.
            parent_scope = node_scope;
        }
        let ops = given.unwrap_or_default();
        let kind = Kind::Class(def_idx);
        let mut attrs = Vec::new();
        for op in ops {
            if self.check_op(&name, kind, &op) {
                attrs.push(Attr {
                    name: op.name,
                    value: op.value,
                    span: op.span,
                    from_default: false,
                });
            }
        }
        let order = self.next_order();
        let idx = ResourceId::new(self.resources.len());
        self.resources.push(Res {
            type_name: "class".to_owned(),
            title: name.clone(),
            kind,
            status: Status::Realized,
            attrs,
            span,
            container: None,
            declared_in: None,
            order: order.clone(),
            function_tags: Vec::new(),
            evaluated: true,
            depth: self.ctx.depth,
            exported: false,
            horizon: self.ctx.horizon,
            below_node: false,
            foreign: None,
        });
        self.index.insert(("class".to_owned(), name.clone()), idx);
        let scope = self.new_scope(Some(parent_scope));
        self.scopes[scope].class = true;
        self.class_scopes.insert(name.clone(), scope);
        let ctx = Ctx {
            scope,
            container: Some(idx),
            class_name: Some(name.clone()),
            order,
            depth: self.ctx.depth,
            // A class is declared when it is included: every default set before that
            // applies, wherever the include is.
            horizon: u32::MAX,
        };
        let saved = std::mem::replace(&mut self.ctx, ctx);
        // A class's `$title` and `$name` are its name, as in Puppet.
        self.set_var(scope, "title", Val::Str(name.clone()), span);
        self.set_var(scope, "name", Val::Str(name.clone()), span);
        self.set_module_name(scope, definition.span);
        self.class_stack.push(name);
        // A body whose parameters are not what their types say is not evaluated: it
        // would only report the consequences.
        if self.bind_params(&definition.params, idx, scope) {
            // A class is evaluated once: its body is not needed again.
            let body = definition.body.take();
            self.block(&body);
            self.end_body();
        }
        self.class_stack.pop();
        self.ctx = saved;
        Some(idx)
    }

    /// The value a parameter of a class, defined type or template gets: the one given
    /// (unless `undef`), else its default, else an error naming `owner` and how a value
    /// is `passed`; then checked against its data type. False when it does not fit.
    pub(super) fn parameter_value(
        &mut self,
        param: &Param,
        given: Option<Val>,
        owner: &str,
        passed: &str,
        span: Span,
    ) -> (Val, bool) {
        let value = match (given, &param.default) {
            (Some(value), _) if value != Val::Undef => value,
            (_, Some(default)) => self.eval(default),
            (Some(value), None) => value,
            (None, None) => {
                self.error(
                    DiagnosticCode::MissingParameter,
                    span,
                    format!("{owner} needs a value for parameter `${}`", param.name),
                )
                .with_related_mut(param.span, "parameter declared here")
                .help = Some(format!("pass `{passed}`, or give the parameter a default"));
                return (Val::Undef, false);
            }
        };
        match self.check_parameter_type(param, value, span) {
            Some(value) => (value, true),
            None => (Val::Undef, false),
        }
    }

    /// Whether a lowercased type name is one of Puppet's data types or an alias of one
    /// (not a resource type, nor a type declared in the language).
    pub(super) fn is_data_type(&self, lower: &str) -> bool {
        crate::eval::ptype::CORE.contains(&lower)
            || crate::eval::ptype::STDLIB_ALIASES
                .iter()
                .any(|(name, _)| *name == lower)
            || self
                .program
                .aliases
                .iter()
                .any(|alias| alias.name.eq_ignore_ascii_case(lower))
    }

    /// A parameter's value checked against its data type: a basic type or a declared
    /// type (declared in the language) as `typed_parameter` does, any other Puppet data type
    /// (`Array[String]`, `Stdlib::Port`, an alias) by matching. `None` when it does not
    /// fit (reported).
    pub(super) fn check_parameter_type(
        &mut self,
        param: &Param,
        value: Val,
        span: Span,
    ) -> Option<Val> {
        if value == Val::Undef {
            return self.undef_parameter(param, span);
        }
        if let Some((type_name, type_span)) = &param.data_type {
            let basic = matches!(
                type_name.as_str(),
                "String" | "Integer" | "Float" | "Boolean"
            );
            if basic || !self.is_data_type(&type_name.to_ascii_lowercase()) {
                return self.typed_parameter(value, &param.name, type_name, *type_span, span);
            }
        }
        let Some(written) = &param.type_expr else {
            return Some(value);
        };
        let expected = self.eval_at_top(written);
        match self.value_matches_type(&value, &expected, written.span) {
            Some(true) => Some(value),
            Some(false) => {
                self.error(
                    DiagnosticCode::ParameterType,
                    span,
                    format!(
                        "parameter `${}` expects {}, got {} `{}`",
                        param.name,
                        expected.to_display(),
                        value.type_name(),
                        value.to_display()
                    ),
                )
                .with_related_mut(written.span, "the data type");
                None
            }
            None => None,
        }
    }

    /// A parameter left `undef` (by its default, or given so): kept if its data type
    /// takes `undef` (none, `Optional[...]`, `Any`...), an error as in Puppet otherwise
    /// (`Integer $x = undef`, used, is "expects Integer, got Undef").
    fn undef_parameter(&mut self, param: &Param, span: Span) -> Option<Val> {
        let Some((type_name, type_span)) = &param.data_type else {
            return Some(Val::Undef);
        };
        let basic = matches!(
            type_name.as_str(),
            "String" | "Integer" | "Float" | "Boolean"
        );
        let takes_undef = if basic {
            false
        } else if let Some(written) = param
            .type_expr
            .as_ref()
            .filter(|_| self.is_data_type(&type_name.to_ascii_lowercase()))
        {
            let expected = self.eval_at_top(written);
            self.value_matches_type(&Val::Undef, &expected, written.span)
                .unwrap_or(true)
        } else {
            // A type declared in the language: its own checks decide.
            true
        };
        if takes_undef {
            return Some(Val::Undef);
        }
        self.error(
            DiagnosticCode::ParameterType,
            span,
            format!("parameter `${}` expects {type_name}, got Undef", param.name),
        )
        .with_related_mut(*type_span, "its type is declared here")
        .help = Some(format!(
            "give `${}` a value, or declare it `Optional[{type_name}]` to allow undef",
            param.name
        ));
        None
    }

    /// `$module_name` in a class or defined type's scope: the module whose manifest
    /// defines it, or `undef` (as at top scope) for one the main manifests define.
    pub(super) fn set_module_name(&mut self, scope: ScopeId, definition: Span) {
        let module = self
            .module_files
            .get(&definition.file)
            .map_or(Val::Undef, |module| Val::Str(module.clone()));
        self.scopes[scope]
            .vars
            .insert("module_name".to_owned(), (module, definition));
    }

    /// Binds the parameters of a class or defined type; false when a value does not
    /// fit its declared type (reported).
    pub(super) fn bind_params(
        &mut self,
        params: &[Param],
        idx: ResourceId,
        scope: ScopeId,
    ) -> bool {
        let mut fits = true;
        for param in params {
            let given = self.resources[idx]
                .attr(&param.name)
                .map(|attr| (attr.value.clone(), attr.span));
            // A class parameter not given is looked up in Hiera (`ntp::servers`)
            // before its default, as Puppet's automatic parameter lookup does.
            let given = match given {
                None if matches!(self.resources[idx].kind, Kind::Class(_)) => {
                    let key = format!("{}::{}", self.resources[idx].title, param.name);
                    let span = self.resources[idx].span;
                    match self.hiera_lookup(&key, None, span) {
                        Ok(found) => found.map(|value| (value, span)),
                        Err(()) => Some((Val::Undef, span)),
                    }
                }
                given => given,
            };
            let reference = format!("`{}`", self.resources[idx].reference());
            let span = self.resources[idx].span;
            let passed = format!("{} => ...", param.name);
            let (value, fit) = self.parameter_value(
                param,
                given.map(|(value, _)| value),
                &reference,
                &passed,
                span,
            );
            fits &= fit;
            self.set_var(scope, &param.name, value, param.span);
        }
        fits
    }

    pub(super) fn evaluate_define(&mut self, idx: ResourceId) {
        let Kind::Define(def_idx) = self.resources[idx].kind else {
            return;
        };
        if self.resources[idx].evaluated {
            return;
        }
        self.resources[idx].evaluated = true;
        let depth = self.resources[idx].depth;
        if depth >= MAX_DEFINE_DEPTH {
            let span = self.resources[idx].span;
            let type_name = self.resources[idx].type_name.clone();
            self.error(DiagnosticCode::DefineDepthLimit, span, format!("defined type `{type_name}` is nested more than {MAX_DEFINE_DEPTH} deep (the limit)"))
                .help = Some("a defined type that declares an instance of itself never ends; give the recursion a condition that stops it".into());
            return;
        }
        let program = Rc::clone(&self.program);
        let definition = program.define(def_idx);
        // An instance declared from the node sees its variables, as a class does.
        let parent = match self.node_scope {
            Some(node) if self.resources[idx].below_node => node,
            _ => TOP,
        };
        let scope = self.new_scope(Some(parent));
        let title = self.resources[idx].title.clone();
        let span = self.resources[idx].span;
        let name = match self.resources[idx].attr("name") {
            Some(Attr {
                value: Val::Str(name),
                ..
            }) => name.clone(),
            _ => title.clone(),
        };
        self.set_var(scope, "title", Val::Str(title), span);
        self.set_var(scope, "name", Val::Str(name), span);
        self.set_module_name(scope, definition.span);
        let order = self.resources[idx].order.clone();
        let horizon = self.resources[idx].horizon;
        let saved = std::mem::replace(
            &mut self.ctx,
            Ctx {
                scope,
                container: Some(idx),
                class_name: None,
                order,
                depth: depth + 1,
                horizon,
            },
        );
        let reported = self.diagnostics.len();
        if self.bind_params(&definition.params, idx, scope) {
            self.block(&definition.body);
            self.end_body();
        }
        self.ctx = saved;
        // What the body reported is reported once per instance: each names its own.
        if self.diagnostics.len() > reported {
            let instance = format!(
                "in `{}`, declared here",
                wconverge_catalog::ResourceRef::new(
                    &self.resources[idx].type_name,
                    &self.resources[idx].title
                )
            );
            for diagnostic in &mut self.diagnostics[reported..] {
                let names_it =
                    diagnostic.span == span || diagnostic.related.iter().any(|(at, _)| *at == span);
                if !names_it {
                    diagnostic.related.push((span, instance.clone()));
                }
            }
        }
    }

    /// Defined types and collectors, in rounds until a round adds nothing.
    pub(super) fn generate(&mut self) {
        for round in 0.. {
            if round >= MAX_ROUNDS {
                let span = self.collectors.first().map_or_else(
                    || {
                        self.resources
                            .last()
                            .map_or(Span::new(0, 0, 0), |res| res.span)
                    },
                    |c| c.span,
                );
                self.error(DiagnosticCode::CollectorRoundLimit, span, format!("collectors and defined types kept producing new resources after {MAX_ROUNDS} rounds (the limit)"))
                    .help = Some("a collector realizes resources whose evaluation creates more for it to collect; narrow the collector's query".into());
                return;
            }
            // As Puppet does: collectors, then overrides and realizations waiting
            // for their resource, then defined types, so that a defined type's
            // parameters include everything set on its instance.
            let mut progress = false;
            for collector_idx in CollectorId::below(self.collectors.len()) {
                progress |= self.run_collector(collector_idx);
            }
            progress |= self.apply_pending_overrides();
            progress |= self.apply_pending_realizes();
            // Only the instances waiting at the start of the round: those their bodies
            // declare wait for the next round, after collectors and overrides.
            let batch: Vec<ResourceId> = self.pending_defines.drain(..).collect();
            for idx in batch {
                self.evaluate_define(idx);
                progress = true;
            }
            if !progress {
                return;
            }
        }
    }
}
