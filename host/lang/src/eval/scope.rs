//! Scopes and variables: lookup through the scope chain, qualified names, class
//! variables, assignment.

use super::*;
use crate::diagnostic::DiagnosticCode;

impl Evaluator<'_> {
    /// Binds a variable a lazy value captured (`name`, or `class::name` in the class's
    /// scope, as where the block was written) for its evaluation during the run.
    pub(super) fn bind_captured(&mut self, name: &str, value: Val, span: Span) {
        let name = name.strip_prefix("::").unwrap_or(name);
        let (scope, variable) = match name.rsplit_once("::") {
            Some((class, variable)) => {
                let scope = match self.class_scopes.get(class) {
                    Some(scope) => *scope,
                    None => {
                        let scope = self.new_scope(Some(TOP));
                        self.class_scopes.insert(class.to_owned(), scope);
                        scope
                    }
                };
                (scope, variable)
            }
            None => (TOP, name),
        };
        self.scopes[scope]
            .vars
            .insert(variable.to_owned(), (value, span));
    }

    pub(super) fn new_scope(&mut self, parent: Option<ScopeId>) -> ScopeId {
        self.scopes.push(Scope {
            parent,
            class: false,
            vars: HashMap::new(),
            failed: Vec::new(),
            defaults: Vec::new(),
        });
        ScopeId::new(self.scopes.len() - 1)
    }

    pub(super) fn lookup(&mut self, name: &str, span: Span) -> Val {
        let value = self.lookup_value(name, span);
        if !self.charge_copy(&value, span) {
            return Val::Undef;
        }
        value
    }

    pub(super) fn lookup_value(&mut self, name: &str, span: Span) -> Val {
        if let Ok(group) = name.parse::<usize>() {
            return self.captures.get(group).cloned().unwrap_or(Val::Undef);
        }
        let (scope, simple) = if let Some(top) = name.strip_prefix("::") {
            if top.contains("::") {
                return self.qualified(top, span);
            }
            (Some(TOP), top)
        } else if name.contains("::") {
            return self.qualified(name, span);
        } else {
            (Some(self.ctx.scope), name)
        };
        let mut current = scope;
        while let Some(id) = current {
            if let Some((value, _)) = self.scopes[id].vars.get(simple) {
                let value = value.clone();
                if self.scopes[id].failed.iter().any(|failed| failed == simple) {
                    self.errors += 1;
                }
                return value;
            }
            current = self.scopes[id].parent;
        }
        let in_define = self
            .ctx
            .container
            .is_some_and(|idx| matches!(self.resources[idx].kind, Kind::Define(_)));
        let help = if in_define {
            "a defined type's body sees its parameters, `$title`, `$name` and the top scope, not the scope that declared the instance; pass the value as a parameter"
        } else {
            "assign it before this line, or check its spelling; a class's variable is read as `$class::name` after the class is included"
        };
        self.error(
            DiagnosticCode::UnknownVariable,
            span,
            format!("unknown variable `${name}`"),
        )
        .help = Some(help.into());
        Val::Undef
    }

    /// The value of a simple variable visible here, without reporting anything.
    pub(crate) fn peek_variable(&self, name: &str) -> Option<Val> {
        if name.contains("::") {
            return None;
        }
        let mut current = Some(self.ctx.scope);
        while let Some(id) = current {
            if let Some((value, _)) = self.scopes[id].vars.get(name) {
                return Some(value.clone());
            }
            current = self.scopes[id].parent;
        }
        None
    }

    /// The value of a class's variable (`ntp::servers`, `::ntp::servers`), without
    /// reporting anything.
    pub(crate) fn peek_qualified(&self, name: &str) -> Option<Val> {
        let name = name.trim_start_matches("::");
        let (class, variable) = name.rsplit_once("::")?;
        self.class_variable(class, variable).cloned()
    }

    /// Evaluates `expr` in top scope (a type alias's definition).
    pub(crate) fn eval_at_top(&mut self, expr: &Expr) -> Val {
        let saved = std::mem::replace(&mut self.ctx.scope, TOP);
        let value = self.eval(expr);
        self.ctx.scope = saved;
        value
    }

    /// Whether the current scope is the node's or lies below it.
    pub(super) fn reaches_node_scope(&self) -> bool {
        let Some(node) = self.node_scope else {
            return false;
        };
        let mut current = Some(self.ctx.scope);
        let mut steps = 0;
        while let Some(id) = current {
            if id == node {
                return true;
            }
            steps += 1;
            if steps > self.scopes.len() {
                return false;
            }
            current = self.scopes[id].parent;
        }
        false
    }

    /// A top-scope variable (a fact, `$trusted`...), without reporting anything.
    pub(crate) fn top_variable(&self, name: &str) -> Option<Val> {
        self.scopes[TOP]
            .vars
            .get(name)
            .map(|(value, _)| value.clone())
    }

    /// Whether a variable is visible from here, without reporting anything.
    pub(super) fn variable_exists(&self, name: &str) -> bool {
        if let Ok(group) = name.parse::<usize>() {
            return group < self.captures.len();
        }
        if name == "facts" || name == "node" {
            return true;
        }
        let (start, name) = match name.strip_prefix("::") {
            Some(top) => (TOP, top),
            None => (self.ctx.scope, name),
        };
        match name.rsplit_once("::") {
            Some((class, variable)) => self.class_variable(class, variable).is_some(),
            None => {
                let mut current = Some(start);
                while let Some(id) = current {
                    if self.scopes[id].vars.contains_key(name) {
                        return true;
                    }
                    current = self.scopes[id].parent;
                }
                false
            }
        }
    }

    /// A variable of class `class` (included), or of a class it inherits from, as
    /// `$class::variable` reads it.
    pub(super) fn class_variable(&self, class: &str, variable: &str) -> Option<&Val> {
        let mut current = self.class_scopes.get(class).copied();
        while let Some(id) = current {
            if let Some((value, _)) = self.scopes[id].vars.get(variable) {
                return Some(value);
            }
            // Up through inherited classes only: not the node or top scope.
            current = self.scopes[id]
                .parent
                .filter(|parent| self.scopes[*parent].class);
        }
        None
    }

    pub(super) fn qualified(&mut self, name: &str, span: Span) -> Val {
        let (class, variable) = name.rsplit_once("::").unwrap_or(("", name));
        if let Some(value) = self.class_variable(class, variable) {
            return value.clone();
        }
        if !self.class_scopes.contains_key(class) {
            self.error(
                DiagnosticCode::UnknownVariable,
                span,
                format!("`${name}` reads a variable of class `{class}`, which is not included"),
            )
            .help = Some(format!("include `{class}` before this line"));
            return Val::Undef;
        }
        self.error(
            DiagnosticCode::UnknownVariable,
            span,
            format!("class `{class}` has no variable `${variable}`"),
        );
        Val::Undef
    }

    pub(super) fn assign(&mut self, name: &str, value: Val, span: Span) {
        if name.parse::<usize>().is_ok() {
            self.error(
                DiagnosticCode::AssignMatchVariable,
                span,
                format!("`${name}` holds a regular expression match and cannot be assigned"),
            );
            return;
        }
        let scope = self.ctx.scope;
        self.set_var(scope, name, value, span);
    }

    /// `[$a, [$b, $c]] = value`, as Puppet assigns it: from an array, each variable its
    /// element (as many of them as variables); from a hash, each variable the value
    /// under its name (which must be there).
    pub(super) fn assign_list(&mut self, targets: &[Expr], value: Val, span: Span) {
        let values: Vec<Val> = match value {
            Val::Array(items) if items.len() == targets.len() => items,
            Val::Array(items) => {
                self.error(
                    DiagnosticCode::BadArgument,
                    span,
                    format!(
                        "{} variables are assigned from an array of {} values",
                        targets.len(),
                        items.len()
                    ),
                )
                .help = Some("give as many variables as the array has values".into());
                return;
            }
            Val::Hash(entries) => {
                let mut values = Vec::new();
                for target in targets {
                    let ExprKind::Var(name) = &target.kind else {
                        self.error(
                            DiagnosticCode::BadArgument,
                            target.span,
                            "a hash is assigned to variables, not to a nested list",
                        );
                        return;
                    };
                    let Some((_, found)) = entries
                        .iter()
                        .find(|(key, _)| matches!(key, Val::Str(key) if key == name))
                    else {
                        self.error(
                            DiagnosticCode::BadArgument,
                            target.span,
                            format!("the hash assigned has no key '{name}' for `${name}`"),
                        );
                        return;
                    };
                    values.push(found.clone());
                }
                values
            }
            other => {
                self.error(
                    DiagnosticCode::BadArgument,
                    span,
                    format!(
                        "a list of variables is assigned from an array or a hash, not {} `{}`",
                        other.type_name(),
                        other.to_display()
                    ),
                );
                return;
            }
        };
        for (target, value) in targets.iter().zip(values) {
            match &target.kind {
                ExprKind::Var(name) => self.assign(name, value, target.span),
                ExprKind::Array(inner) => self.assign_list(inner, value, target.span),
                _ => {}
            }
        }
    }

    pub(super) fn set_var(&mut self, scope: ScopeId, name: &str, value: Val, span: Span) {
        if name == "node" {
            self.error(
                DiagnosticCode::AssignNode,
                span,
                "`$node` holds the node's attributes and cannot be assigned or shadowed",
            )
            .help = Some(
                "write an attribute with `$node.default['key'] = value`, or use another name"
                    .into(),
            );
            return;
        }
        // Not in any scope, as a parameter neither: it would hide the machine's facts.
        if matches!(name, "facts" | "trusted" | "server_facts") {
            self.error(
                DiagnosticCode::AssignFacts,
                span,
                format!("`${name}` holds facts about this node and cannot be assigned or shadowed"),
            )
            .help = Some("use another name".into());
            return;
        }
        if let Some((_, previous)) = self.scopes[scope].vars.get(name) {
            let previous = *previous;
            if previous == Span::new(0, 0, 0) {
                // Set before any manifest: a fact, or a variable `puppet apply` sets.
                self.error(
                    DiagnosticCode::ReassignedVariable,
                    span,
                    format!("`${name}` is a fact (or a variable set for every node) at top scope, and cannot be assigned there"),
                )
                .help = Some("use another name, or assign it inside a class".into());
                return;
            }
            self.error(
                DiagnosticCode::ReassignedVariable,
                span,
                format!("`${name}` is already assigned in this scope"),
            )
            .with_related_mut(previous, "first assigned here")
            .help = Some("variables are assigned once per scope; use a new name".into());
            return;
        }
        self.scopes[scope]
            .vars
            .insert(name.to_owned(), (value, span));
    }

    /// Replaces the value of `name` in the nearest scope that has it (the object the
    /// lambda of `new` initializes, after a feature is written).
    pub(crate) fn rebind(&mut self, name: &str, value: Val) {
        let mut scope = Some(self.ctx.scope);
        while let Some(id) = scope {
            if let Some(entry) = self.scopes[id].vars.get_mut(name) {
                entry.0 = value;
                return;
            }
            scope = self.scopes[id].parent;
        }
    }
}
