//! Definitions: classes, defined types, functions, nodes and `type` declarations
//! (features, enums, code), with their parameters and where they may appear.

use super::*;

impl Parser<'_> {
    pub(super) fn params(&mut self) -> PResult<Vec<Param>> {
        if !self.eat(P::LParen) {
            return Ok(Vec::new());
        }
        let params = self.param_list(P::RParen)?;
        self.expect(P::RParen, "to close the parameter list")?;
        Ok(params)
    }

    /// Parameters up to `close` (not eaten): `Type $name = default`, the type and the
    /// default optional, and a last `*$rest` that captures the remaining arguments.
    pub(super) fn param_list(&mut self, close: P) -> PResult<Vec<Param>> {
        let mut params: Vec<Param> = Vec::new();
        loop {
            if self.at(close) {
                break;
            }
            // A data type before the name: a single name is enforced (a basic data type,
            // or a declared type the value is instantiated as); a parameterized one
            // (`Array[String]`) is accepted and not enforced yet.
            let (data_type, type_expr) = if matches!(self.peek(), Tok::TypeRef(_)) {
                let written = self.expr(BP_ASSIGN + 1)?;
                let name = match &written.kind {
                    ExprKind::TypeRef(name) => Some((name.clone(), written.span)),
                    _ => None,
                };
                (name, Some(written))
            } else {
                (None, None)
            };
            let captures_rest = self.eat(P::Star);
            let span = self.span();
            if let Some(rest) = params.iter().find(|param| param.captures_rest) {
                return Err(self.error(
                    span,
                    format!(
                        "`*${}` captures the rest: it must be the last parameter",
                        rest.name
                    ),
                    "move the parameter that captures the rest to the end",
                ));
            }
            let Tok::Var(name) = self.peek().clone() else {
                return Err(self.unexpected("a parameter like `$name`"));
            };
            self.bump();
            if name.contains("::") {
                return Err(self.error(
                    span,
                    format!("parameter `${name}` must be a simple name"),
                    "remove the `::` from the parameter name",
                ));
            }
            let default = if self.eat(P::Assign) {
                Some(self.expr(BP_ASSIGN + 1)?)
            } else {
                None
            };
            params.push(Param {
                name,
                span,
                data_type,
                type_expr,
                default,
                captures_rest,
            });
            if !self.eat(P::Comma) {
                break;
            }
        }
        Ok(params)
    }

    pub(super) fn definition_name(&mut self, what: &str) -> PResult<(String, Span)> {
        let span = self.span();
        match self.peek().clone() {
            Tok::Name(name) => {
                self.bump();
                let name = name.trim_start_matches("::").to_owned();
                let full = match self.namespace.last() {
                    Some(outer) if !name.contains("::") => format!("{outer}::{name}"),
                    _ => name,
                };
                Ok((full, span))
            }
            _ => Err(self.unexpected(&format!("a lowercase {what} name"))),
        }
    }

    pub(super) fn check_definition_place(
        &mut self,
        span: Span,
        what: &str,
        allowed_in_class: bool,
    ) -> PResult<()> {
        let context = *self.context.last().unwrap_or(&Context::Top);
        if context == Context::Top || (allowed_in_class && context == Context::Class) {
            return Ok(());
        }
        Err(self.error(
            span,
            format!(
                "a {what} definition may only appear at the top level of a file{}",
                if allowed_in_class {
                    " or inside a class"
                } else {
                    ""
                }
            ),
            "move the definition out of the block it is in",
        ))
    }

    pub(super) fn class_definition(&mut self) -> PResult<Expr> {
        let start = self.bump();
        self.check_definition_place(start, "class", true)?;
        let (name, name_span) = self.definition_name("class")?;
        let params = self.params()?;
        let parent = if self.at_kw(Kw::Inherits) {
            self.bump();
            let span = self.span();
            match self.peek().clone() {
                Tok::Name(parent) => {
                    self.bump();
                    Some((parent.trim_start_matches("::").to_owned(), span))
                }
                _ => return Err(self.unexpected("the name of the parent class")),
            }
        } else {
            None
        };
        self.namespace.push(name.clone());
        let body = self.block(Context::Class);
        self.namespace.pop();
        let body = body?;
        self.program.classes.push(ClassDef {
            name,
            span: name_span,
            params,
            parent,
            body: std::cell::RefCell::new(body),
        });
        Ok(Expr {
            kind: ExprKind::Definition,
            span: start,
        })
    }

    pub(super) fn define_definition(&mut self) -> PResult<Expr> {
        let (definition, start) = self.parameterized_definition("define", "defined type", true)?;
        self.program.defines.push(definition);
        Ok(Expr {
            kind: ExprKind::Definition,
            span: start,
        })
    }

    /// The keyword, name, parameters and body of a defined type or a function (whose
    /// `>> ReturnType` before the body is skipped: read, not checked).
    pub(super) fn parameterized_definition(
        &mut self,
        keyword: &str,
        what: &str,
        allowed_in_class: bool,
    ) -> PResult<(DefineDef, Span)> {
        let start = self.bump();
        self.check_definition_place(start, keyword, allowed_in_class)?;
        let (name, name_span) = self.definition_name(what)?;
        let params = self.params()?;
        if keyword == "function" && self.eat(P::RShift) {
            // The return type: skipped up to the body's `{`, brackets balanced.
            let mut depth = 0usize;
            loop {
                match self.peek() {
                    Tok::Eof => return Err(self.unexpected("the body's `{`")),
                    Tok::Punct(P::LBrace) if depth == 0 => break,
                    Tok::Punct(P::LBrack | P::LParen | P::LBrace) => depth += 1,
                    Tok::Punct(P::RBrack | P::RParen | P::RBrace) => {
                        depth = depth.saturating_sub(1);
                    }
                    _ => {}
                }
                self.bump();
            }
        }
        let body = self.block(Context::Other)?;
        Ok((
            DefineDef {
                name,
                span: name_span,
                params,
                body,
            },
            start,
        ))
    }

    /// `function name($a, Integer $b = 1) >> ReturnType { body }`: Puppet's functions
    /// in the language; the value of the body's last expression is the function's. The
    /// return type is read and not checked.
    pub(super) fn function_definition(&mut self) -> PResult<Expr> {
        let (definition, start) = self.parameterized_definition("function", "function", false)?;
        self.program.functions.push(definition);
        Ok(Expr {
            kind: ExprKind::Definition,
            span: start,
        })
    }

    /// `type Name inherits Parent { attr ...; has ...; invariant ...; abstract }`. Its
    /// words (`attr`, `has`, `invariant`, `abstract` and the settings) are keywords only
    /// here.
    pub(super) fn type_definition(&mut self) -> PResult<Expr> {
        let start = self.bump();
        self.check_definition_place(start, "type", false)?;
        let span = self.span();
        let Tok::TypeRef(name) = self.peek().clone() else {
            return Err(self.unexpected("a capitalized type name like `User` or `MyApp::Config`"));
        };
        self.bump();
        let name = name.trim_start_matches("::").to_owned();
        // `type Port = Integer[0, 65535]`: Puppet's type alias.
        if self.eat(P::Assign) {
            let value = self.expr(BP_ASSIGN + 1)?;
            let end = value.span;
            self.program.aliases.push(AliasDef { name, span, value });
            return Ok(Expr {
                kind: ExprKind::Definition,
                span: start.to(end),
            });
        }
        let parent = if self.at_kw(Kw::Inherits) {
            self.bump();
            let parent_span = self.span();
            let Tok::TypeRef(parent) = self.peek().clone() else {
                return Err(self.unexpected("the name of the type it inherits"));
            };
            self.bump();
            Some((parent.trim_start_matches("::").to_owned(), parent_span))
        } else {
            None
        };
        let open = self.expect(P::LBrace, "to open the type's body")?;
        self.enter()?;
        let mut def = TypeDef {
            name,
            span,
            parent,
            features: Vec::new(),
            invariants: Vec::new(),
            is_abstract: false,
        };
        loop {
            while self.eat(P::Semi) || self.eat(P::Comma) {}
            if self.at(P::RBrace) || matches!(self.peek(), Tok::Eof) {
                break;
            }
            let word_span = self.span();
            let Tok::Name(word) = self.peek().clone() else {
                return Err(self.unexpected("`attr`, `has`, `invariant` or `abstract`"));
            };
            match word.as_str() {
                "attr" | "has" => {
                    self.bump();
                    def.features.push(self.feature(word == "has")?);
                }
                "invariant" => {
                    self.bump();
                    let title = match self.peek().clone() {
                        Tok::Str(title) => {
                            self.bump();
                            Some(title)
                        }
                        _ => None,
                    };
                    let source = self.code()?;
                    def.invariants.push(InvariantDef {
                        title,
                        span: word_span,
                        source,
                    });
                }
                "abstract" => {
                    self.bump();
                    def.is_abstract = true;
                }
                _ => {
                    return Err(self.error(
                        word_span,
                        format!("`{word}` cannot start a statement in a type declaration"),
                        "a type's body holds `attr NAME, Type { ... }`, `has NAME, Type { ... }`, \
                         `invariant \"title\" { ... }` and `abstract`",
                    ));
                }
            }
        }
        self.leave();
        self.expect_close(P::RBrace, "to close the type's body", open)?;
        self.program.types.push(def);
        Ok(Expr {
            kind: ExprKind::Definition,
            span: start,
        })
    }

    /// `NAME (, Type)? ({ settings })?` after `attr` or `has`.
    pub(super) fn feature(&mut self, has: bool) -> PResult<FeatureDef> {
        let span = self.span();
        let name = match self.peek().clone() {
            Tok::Name(name) if !name.contains("::") => name,
            Tok::Keyword(Kw::True | Kw::False | Kw::Reserved) => {
                return Err(self.unexpected("a feature name"));
            }
            Tok::Keyword(_) => keyword_text(self.token()).to_owned(),
            _ => return Err(self.unexpected("a feature name")),
        };
        self.bump();
        let data_type = if self.eat(P::Comma) {
            let type_span = self.span();
            let spec = match self.peek().clone() {
                Tok::TypeRef(type_name) if type_name == "Enum" => {
                    self.bump();
                    TypeSpec::Enum(self.enum_cases()?)
                }
                Tok::TypeRef(type_name) => {
                    self.bump();
                    TypeSpec::Named(type_name.trim_start_matches("::").to_owned())
                }
                Tok::Name(word) if word == "enum" => {
                    self.bump();
                    TypeSpec::Enum(self.enum_cases()?)
                }
                _ => {
                    return Err(self.unexpected(
                        "a data type: `Integer`, `Float`, `String`, `Boolean`, `enum[a, b]` or \
                         a declared type",
                    ));
                }
            };
            Some((spec, type_span.to(self.previous_span())))
        } else {
            None
        };
        if has && data_type.is_none() {
            return Err(self.error(
                span,
                format!("`has {name}` needs the type it refers to"),
                "write `has roles, UserRole`",
            ));
        }
        let mut settings = Vec::new();
        if self.at(P::LBrace) {
            let open = self.bump();
            self.enter()?;
            loop {
                if self.at(P::RBrace) {
                    break;
                }
                let setting_span = self.span();
                let setting = match self.peek().clone() {
                    Tok::Name(setting) => setting,
                    Tok::Keyword(Kw::Default) => "default".to_owned(),
                    _ => {
                        return Err(
                            self.unexpected("a setting like `min`, `max`, `default` or `check`")
                        );
                    }
                };
                self.bump();
                self.expect(P::FatArrow, "after the setting's name")?;
                let value = if matches!(setting.as_str(), "check" | "validate" | "derived") {
                    SettingValue::Code(self.code()?)
                } else {
                    SettingValue::Expr(self.expr(BP_ASSIGN)?)
                };
                settings.push(Setting {
                    name: setting,
                    span: setting_span,
                    value,
                });
                if !self.eat(P::Comma) {
                    break;
                }
            }
            self.leave();
            self.expect_close(P::RBrace, "to close the feature's settings", open)?;
        }
        Ok(FeatureDef {
            has,
            name,
            span,
            data_type,
            settings,
        })
    }

    /// `[a, b, 'c']` after `enum`.
    pub(super) fn enum_cases(&mut self) -> PResult<Vec<String>> {
        self.expect(P::LBrack, "to open the enum's cases")?;
        let mut cases = Vec::new();
        loop {
            match self.peek().clone() {
                Tok::Name(case) | Tok::Str(case) => {
                    self.bump();
                    cases.push(case);
                }
                Tok::Punct(P::RBrack) => break,
                _ => return Err(self.unexpected("a case of the enum: a name or a string")),
            }
            if !self.eat(P::Comma) {
                break;
            }
        }
        self.expect(P::RBrack, "to close the enum's cases")?;
        if cases.is_empty() {
            let span = self.previous_span();
            return Err(self.error(
                span,
                "an enum needs at least one case",
                "write `enum[a, b]`",
            ));
        }
        Ok(cases)
    }

    /// A check, a derivation or an invariant: a block (`{ ... }`), a lambda
    /// (`|$x| { ... }`) or an expression; parsed now (so errors point here) and kept as
    /// its source text, which the host evaluates.
    pub(super) fn code(&mut self) -> PResult<String> {
        let start = self.span();
        if self.at(P::LBrace) {
            self.block(Context::Other)?;
        } else if self.at(P::Pipe) {
            self.lambda()?;
        } else {
            self.expr(BP_ASSIGN)?;
        }
        let span = start.to(self.previous_span());
        Ok(self.source_word(span).to_owned())
    }

    pub(super) fn node_definition(&mut self) -> PResult<Expr> {
        let start = self.bump();
        self.check_definition_place(start, "node", false)?;
        let mut matches = Vec::new();
        loop {
            let span = self.span();
            let host = match self.peek().clone() {
                Tok::Str(name) => {
                    self.bump();
                    HostMatch::Name(name)
                }
                Tok::Regex(pattern) => {
                    self.bump();
                    HostMatch::Regex(pattern)
                }
                Tok::Keyword(Kw::Default) => {
                    self.bump();
                    HostMatch::Default
                }
                Tok::Name(_) | Tok::Int(_) | Tok::Float(_) => {
                    // `web01.example.com` lexes as names, numbers and dots.
                    let mut name = String::new();
                    loop {
                        match self.peek().clone() {
                            Tok::Name(part) => name.push_str(&part),
                            Tok::Int(_) | Tok::Float(_) => {
                                let token = self.token().span;
                                name.push_str(self.source_word(token));
                            }
                            _ => break,
                        }
                        self.bump();
                        if !(self.at(P::Dot) && self.adjacent()) {
                            break;
                        }
                        self.bump();
                        name.push('.');
                    }
                    HostMatch::Name(name)
                }
                _ => return Err(self.unexpected("a node name, a regular expression or `default`")),
            };
            if let HostMatch::Name(name) = &host
                && !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            {
                return Err(self.error(
                    span,
                    format!("`{name}` is not a valid node name"),
                    "node names use only a-z, A-Z, 0-9, `_`, `-` and `.`; use a regular expression for patterns",
                ));
            }
            matches.push((host, span.to(self.previous_span())));
            if !self.eat(P::Comma) || self.at(P::LBrace) {
                break;
            }
        }
        if self.at_kw(Kw::Inherits) {
            let span = self.span();
            return Err(self.error(
                span,
                "node inheritance is not supported",
                "put what the nodes share in a class and `include` it in each node",
            ));
        }
        let body = self.block(Context::Other)?;
        self.program.nodes.push(NodeDef {
            matches,
            span: start,
            body,
        });
        Ok(Expr {
            kind: ExprKind::Definition,
            span: start,
        })
    }
}
