//! Function calls: the built-in catalog functions (`include`, `realize`, `tag`...),
//! functions written in the language, lambdas, and EPP templates.

use super::*;
use crate::diagnostic::DiagnosticCode;

impl Evaluator<'_> {
    /// The program being evaluated (its definitions).
    pub(crate) fn program_rc(&self) -> Rc<Program> {
        Rc::clone(&self.program)
    }

    /// A data type written in the language by wconverge itself (Stdlib's aliases),
    /// evaluated; it is a file of the compile of its own, so its errors have a place.
    pub(crate) fn builtin_type(
        &mut self,
        name: &str,
        text: &str,
        span: Span,
    ) -> Result<crate::eval::ptype::PType, String> {
        let file = u32::try_from(self.sources.len() + self.extra_sources.len()).unwrap_or(u32::MAX);
        let source = Source::new(format!("<built-in {}>", display_type_name(name)), text);
        self.line_starts
            .push(crate::diagnostic::LineStarts::new(&source.text));
        let mut diagnostics = Vec::new();
        let tokens = crate::lexer::lex(file, text, &mut diagnostics);
        let mut program = Program::default();
        let block = crate::parser::parse_file(text, tokens, &mut program, &mut diagnostics);
        self.extra_sources.push(source);
        if diagnostics.iter().any(Diagnostic::is_error) {
            return Err(format!(
                "the built-in type `{}` does not parse",
                display_type_name(name)
            ));
        }
        let saved = std::mem::replace(&mut self.ctx.scope, TOP);
        let value = block.first().map_or(Val::Undef, |expr| self.eval(expr));
        self.ctx.scope = saved;
        let _ = span;
        crate::eval::ptype::PType::of(&value).ok_or_else(|| {
            format!(
                "the built-in type `{}` is not a type",
                display_type_name(name)
            )
        })
    }

    /// A file of the compile: a source given, or one read while evaluating.
    pub(crate) fn source_of(&self, file: u32) -> &Source {
        let file = file as usize;
        match self.sources.get(file) {
            Some(source) => source,
            None => &self.extra_sources[file - self.sources.len()],
        }
    }

    /// Renders an EPP template: `key` identifies it (its path, or the text of an inline
    /// one), `name` is how messages call it, `source` reads it the first time, `given`
    /// are the parameters.
    pub(crate) fn render_epp(
        &mut self,
        key: &str,
        name: &str,
        source: impl FnOnce(&mut Self) -> Option<Source>,
        given: Vec<(Val, Val)>,
        span: Span,
    ) -> Val {
        let parsed = match self.templates.get(key) {
            Some(parsed) => parsed.clone(),
            None => {
                let parsed = source(self).and_then(|source| {
                    let file = u32::try_from(self.sources.len() + self.extra_sources.len())
                        .unwrap_or(u32::MAX);
                    self.line_starts
                        .push(crate::diagnostic::LineStarts::new(&source.text));
                    let mut diagnostics = Vec::new();
                    let parsed = crate::epp::parse(file, &source, &mut diagnostics);
                    self.extra_sources.push(source);
                    for diagnostic in diagnostics {
                        if diagnostic.is_error() {
                            self.errors += 1;
                        }
                        self.diagnostics.push(diagnostic);
                    }
                    parsed.map(|definition| (file, Rc::new(definition)))
                });
                self.templates.insert(key.to_owned(), parsed.clone());
                parsed
            }
        };
        let Some((_, template)) = parsed else {
            return Val::Undef;
        };
        if self.epp_output.len() >= crate::MAX_NESTING {
            self.error(
                DiagnosticCode::EppDepth,
                span,
                format!(
                    "templates render templates more than {} deep (the limit)",
                    crate::MAX_NESTING
                ),
            );
            return Val::Undef;
        }
        // The template sees its parameters and top scope, as in Puppet.
        let scope = self.new_scope(Some(TOP));
        let mut fits = true;
        if template.params.is_empty() {
            for (key, value) in given {
                match key {
                    Val::Str(key) => self.set_var(scope, &key, value, span),
                    other => {
                        self.error(
                            DiagnosticCode::EppParameters,
                            span,
                            format!(
                                "template parameters are named by strings, not {} `{}`",
                                other.type_name(),
                                other.to_display()
                            ),
                        );
                        fits = false;
                    }
                }
            }
        } else {
            for (key, _) in &given {
                if !template
                    .params
                    .iter()
                    .any(|param| Val::Str(param.name.clone()) == *key)
                {
                    let names: Vec<String> = template
                        .params
                        .iter()
                        .map(|param| format!("${}", param.name))
                        .collect();
                    self.error(
                        DiagnosticCode::EppParameters,
                        span,
                        format!(
                            "template `{name}` has no parameter `{}`",
                            key.to_interpolated()
                        ),
                    )
                    .help = Some(format!("its parameters: {}", names.join(", ")));
                    fits = false;
                }
            }
            let saved = std::mem::replace(&mut self.ctx.scope, scope);
            for param in &template.params {
                let value = Val::hash_get(&given, &Val::Str(param.name.clone())).cloned();
                let owner = format!("template `{name}`");
                let passed = format!("{{ '{}' => ... }}", param.name);
                let (value, fit) = self.parameter_value(param, value, &owner, &passed, span);
                fits &= fit;
                self.set_var(scope, &param.name, value, param.span);
            }
            self.ctx.scope = saved;
        }
        if !fits {
            return Val::Undef;
        }
        let saved = std::mem::replace(&mut self.ctx.scope, scope);
        self.epp_output.push(String::new());
        self.block(&template.body);
        let output = self.epp_output.pop().unwrap_or_default();
        self.ctx.scope = saved;
        Val::Str(output)
    }

    /// Prints into the template being rendered.
    pub(crate) fn epp_print(&mut self, value: &Val, span: Span) {
        let text = value.to_interpolated();
        let Some(output) = self.epp_output.last_mut() else {
            self.error(
                DiagnosticCode::EppOutside,
                span,
                "this prints into an EPP template, and none is being rendered",
            );
            return;
        };
        if output.len() + text.len() > MAX_STRING_BYTES {
            self.value_limit(
                span,
                format!(
                    "a template renders more than {MAX_STRING_BYTES} bytes (16 MiB), the limit"
                ),
            );
            return;
        }
        output.push_str(&text);
    }

    pub(super) fn call(
        &mut self,
        name: &str,
        args: &[Expr],
        lambda: Option<&Lambda>,
        span: Span,
    ) -> Val {
        let before = self.errors;
        let values: Vec<Val> = args.iter().map(|arg| self.eval(arg)).collect();
        // An argument that failed (an unknown variable) was reported: the call would
        // only report its consequences, as if the user had written them (`fail()` with
        // empty holes in its message).
        if self.errors > before {
            return Val::Undef;
        }
        // Functions the manifests define, and the module path's (always namespaced):
        // most calls are of built-ins, which need none of this.
        if !self.functions.is_empty() || name.contains("::") {
            let key = name.trim_start_matches("::").to_ascii_lowercase();
            if let Some(&idx) = self.functions.get(&key) {
                return self.call_function(idx, values, lambda, span);
            }
            if key.contains("::") && !crate::eval::functions::is_builtin(&key) {
                // A module's function: the module path may have it.
                self.missing.push(key);
            }
        }
        crate::eval::functions::call(self, name, values, lambda, span)
    }

    /// Calls the function `name` with values already evaluated: one the manifests
    /// define, else a built-in (`call('name', ...)`).
    pub(crate) fn call_by_name(
        &mut self,
        name: &str,
        args: Vec<Val>,
        lambda: Option<&Lambda>,
        span: Span,
    ) -> Val {
        let key = name.trim_start_matches("::").to_ascii_lowercase();
        if let Some(&idx) = self.functions.get(&key) {
            return self.call_function(idx, args, lambda, span);
        }
        crate::eval::functions::call(self, &key, args, lambda, span)
    }

    /// Whether a resource of this type and title is declared (or has this alias).
    pub(crate) fn is_declared(&self, type_name: &str, title: &str) -> bool {
        let key = (type_name.to_owned(), title.to_owned());
        self.index.contains_key(&key) || self.aliases.contains_key(&key)
    }

    /// Calls a function the manifests define: its parameters bound from the arguments
    /// in order (checked against their data types), its body evaluated in a scope of
    /// its own under top scope; the value of its last expression is the result.
    pub(super) fn call_function(
        &mut self,
        idx: FunctionId,
        args: Vec<Val>,
        lambda: Option<&Lambda>,
        span: Span,
    ) -> Val {
        let program = Rc::clone(&self.program);
        let function = program.function(idx);
        if lambda.is_some() {
            self.error(
                DiagnosticCode::UnexpectedLambda,
                span,
                format!("function `{}` does not take a lambda", function.name),
            );
            return Val::Undef;
        }
        let takes_rest = function
            .params
            .last()
            .is_some_and(|param| param.captures_rest);
        if !takes_rest && args.len() > function.params.len() {
            self.error(
                DiagnosticCode::BadArgument,
                span,
                format!(
                    "function `{}` takes at most {} argument{}, not {}",
                    function.name,
                    function.params.len(),
                    if function.params.len() == 1 { "" } else { "s" },
                    args.len()
                ),
            )
            .with_related_mut(function.span, "defined here");
            return Val::Undef;
        }
        if self.function_depth >= MAX_DEFINE_DEPTH {
            self.error(
                DiagnosticCode::FunctionDepthLimit,
                span,
                format!("functions call functions more than {MAX_DEFINE_DEPTH} deep (the limit)"),
            )
            .help = Some("a function that calls itself needs a condition that stops it".into());
            return Val::Undef;
        }
        let scope = self.new_scope(Some(TOP));
        let saved = std::mem::replace(&mut self.ctx.scope, scope);
        let owner = format!("function `{}`", function.name);
        let mut args = args.into_iter();
        let mut fits = true;
        for param in &function.params {
            if param.captures_rest {
                let rest = Val::Array(args.by_ref().collect());
                self.set_var(scope, &param.name, rest, param.span);
                continue;
            }
            let passed = format!("{}(...)", function.name);
            let (value, fit) = self.parameter_value(param, args.next(), &owner, &passed, span);
            fits &= fit;
            self.set_var(scope, &param.name, value, param.span);
        }
        let result = if fits {
            self.function_depth += 1;
            let saved_lambdas = std::mem::take(&mut self.lambda_depth);
            let mut result = self.block(&function.body);
            self.lambda_depth = saved_lambdas;
            self.function_depth -= 1;
            // `return(value)`, from the body or a lambda in it.
            if let Some(super::Jump::Return(value)) = self.jump.take() {
                result = value;
            }
            result
        } else {
            Val::Undef
        };
        self.ctx.scope = saved;
        result
    }

    pub(crate) fn report(
        &mut self,
        severity: Severity,
        code: DiagnosticCode,
        span: Span,
        message: String,
    ) -> &mut Diagnostic {
        if severity == Severity::Error {
            self.errors += 1;
        }
        self.diagnostics
            .push(Diagnostic::error(code, span, message).with_severity(severity));
        self.diagnostics.last_mut().expect("just pushed")
    }

    pub(crate) fn class_names(&mut self, values: Vec<Val>, span: Span) -> Vec<String> {
        let mut flat = Vec::new();
        for value in values {
            flatten_into(value, &mut flat);
        }
        let mut names = Vec::new();
        for value in flat {
            match value {
                Val::Str(name) => names.push(name),
                Val::Ref {
                    type_name,
                    title: Some(title),
                } if type_name == "class" => names.push(title),
                other => {
                    self.error(
                        DiagnosticCode::BadArgument,
                        span,
                        format!(
                            "expected a class name, got {} `{}`",
                            other.type_name(),
                            other.to_display()
                        ),
                    );
                }
            }
        }
        names
    }

    pub(crate) fn include(&mut self, names: Vec<String>, how: &str, span: Span) -> Vec<Val> {
        let mut refs = Vec::new();
        for name in names {
            let Some(idx) = self.declare_class(&name, None, span) else {
                continue;
            };
            let title = self.resources[idx].title.clone();
            match how {
                "contain" => {
                    if let Some(container) = self.ctx.container
                        && container != idx
                        && self.resources[idx].container.is_none()
                    {
                        self.resources[idx].container = Some(container);
                    }
                }
                "require" => {
                    if let Some(container) = self.ctx.container {
                        let target = (
                            self.resources[container].type_name.clone(),
                            self.resources[container].title.clone(),
                        );
                        self.relations.push(Relation {
                            lhs: Operand::Refs(vec![("class".to_owned(), title.clone())]),
                            rhs: Operand::Refs(vec![target]),
                            op: RelOp::Before,
                            span,
                        });
                    }
                }
                _ => {}
            }
            refs.push(Val::reference("class", &title));
        }
        refs
    }

    pub(crate) fn realize_refs(&mut self, values: Vec<Val>, span: Span) {
        let mut flat = Vec::new();
        for value in values {
            flatten_into(value, &mut flat);
        }
        for value in flat {
            match value {
                Val::Ref {
                    type_name,
                    title: Some(title),
                } => {
                    let key = (type_name, title);
                    match self.index.get(&key).copied() {
                        Some(idx) => self.realize(idx),
                        None => self.realizes.push((key, span)),
                    }
                }
                other => {
                    self.error(
                        DiagnosticCode::BadArgument,
                        span,
                        format!(
                            "`realize` takes resource references, not {} `{}`",
                            other.type_name(),
                            other.to_display()
                        ),
                    );
                }
            }
        }
    }

    pub(crate) fn add_tags(&mut self, tags: Vec<String>, span: Span) {
        for tag in &tags {
            self.check_tag(tag, span);
        }
        match self.ctx.container {
            Some(container) => self.resources[container].function_tags.extend(tags),
            None => self.main_tags.extend(tags),
        }
    }

    /// Whether the current class or defined type (and what contains it) carries every
    /// one of `wanted`: Puppet's `tagged()`.
    pub(crate) fn tagged(&self, wanted: &[String]) -> bool {
        let mut tags = Vec::new();
        self.container_tags(self.ctx.container, &mut tags);
        wanted.iter().all(|tag| tags.contains(tag))
    }

    pub(crate) fn is_defined(&self, value: &Val) -> bool {
        match value {
            // `defined('$x')`: is the variable assigned, here or in a scope seen from here?
            Val::Str(name) if name.starts_with('$') => self.variable_exists(&name[1..]),
            Val::Str(name) => {
                let name = name.trim_start_matches("::").to_ascii_lowercase();
                self.classes.contains_key(&name)
                    || self.defines.contains_key(&name)
                    || self.types.contains(&name)
            }
            Val::Ref {
                type_name,
                title: None,
            } => self.defines.contains_key(type_name) || self.types.contains(type_name),
            Val::Ref {
                type_name,
                title: Some(title),
            } => self.index.contains_key(&(type_name.clone(), title.clone())),
            _ => false,
        }
    }

    /// Runs a lambda with its parameters bound in a new local scope.
    pub(crate) fn run_lambda(&mut self, lambda: &Lambda, args: Vec<Val>) -> Val {
        // Every call costs (its scope lives until the end), so an empty loop in a loop
        // cannot run for ever.
        if self.budget.is_none() {
            let span = lambda
                .params
                .first()
                .map_or(Span::new(0, 0, 0), |param| param.span);
            if !self.work(LAMBDA_WORK, span) {
                return Val::Undef;
            }
        }
        if let Some(budget) = self.budget {
            let span = lambda
                .params
                .first()
                .map_or(Span::new(0, 0, 0), |param| param.span);
            let cost = 4 + args
                .iter()
                .map(|arg| lazy::size_capped(arg, budget))
                .sum::<u64>();
            if !self.spend(cost, span) {
                return Val::Undef;
            }
        }
        let scope = self.new_scope(Some(self.ctx.scope));
        let saved_scope = std::mem::replace(&mut self.ctx.scope, scope);
        if !self.bind_lambda(lambda, args) {
            self.ctx.scope = saved_scope;
            return Val::Undef;
        }
        self.lambda_depth += 1;
        let mut result = self.block(&lambda.body);
        self.lambda_depth -= 1;
        self.ctx.scope = saved_scope;
        // `next(value)` ends this call with its value; `break()` and `return()` go on
        // to the iteration and the function.
        if let Some(super::Jump::Next(_)) = self.jump
            && let Some(super::Jump::Next(value)) = self.jump.take()
        {
            result = value;
        }
        result
    }
    /// Binds a lambda's parameters in the current scope, as Puppet does: each parameter
    /// without a default needs an argument (arguments past the parameters are dropped,
    /// or gathered by `*$rest`), each checked against its data type; a default is
    /// evaluated where the earlier parameters are bound. False when they do not fit
    /// (reported).
    fn bind_lambda(&mut self, lambda: &Lambda, args: Vec<Val>) -> bool {
        if let Some(missing) = lambda
            .params
            .iter()
            .filter(|param| !param.captures_rest)
            .skip(args.len())
            .find(|param| param.default.is_none())
        {
            self.error(
                DiagnosticCode::BadArgument,
                missing.span,
                format!(
                    "lambda parameter `${}` is required, and no value is given for it ({} \
                     argument{} given)",
                    missing.name,
                    args.len(),
                    if args.len() == 1 { " is" } else { "s are" }
                ),
            )
            .help = Some(
                "give the lambda as many parameters as the function passes (`each` passes \
                 `|$value|` or `|$index, $value|`; a hash `|$key, $value|` or `|$pair|`), \
                 or a default to the ones it may not get"
                    .to_owned(),
            );
            return false;
        }
        let mut args = args.into_iter();
        let mut fits = true;
        for param in &lambda.params {
            let value = if param.captures_rest {
                Val::Array(args.by_ref().collect())
            } else {
                match (args.next(), &param.default) {
                    (Some(value), _) => value,
                    (None, Some(default)) => self.eval(default),
                    (None, None) => Val::Undef,
                }
            };
            let value = if param.captures_rest || param.type_expr.is_none() {
                Some(value)
            } else {
                self.check_parameter_type(param, value, param.span)
            };
            let Some(value) = value else {
                fits = false;
                continue;
            };
            self.set_var(self.ctx.scope, &param.name, value, param.span);
        }
        fits
    }
}
