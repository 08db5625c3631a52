//! Expressions, by precedence climbing with Puppet's table: prefixes, primaries,
//! interpolation, calls and lambdas, selectors, `if`/`unless`/`case`, collectors and
//! their queries.

use super::*;

impl Parser<'_> {
    pub(super) fn expr(&mut self, min_bp: u8) -> PResult<Expr> {
        self.enter()?;
        let chain_depth = self.chain_depth;
        let result = self.expr_inner(min_bp);
        self.chain_depth = chain_depth;
        self.leave();
        result
    }

    pub(super) fn expr_inner(&mut self, min_bp: u8) -> PResult<Expr> {
        let mut lhs = self.prefix()?;
        // Operators chained to the left (`a + b + c`, `$x[0][1]`) nest the tree without
        // recursing here; they are counted instead (`expr` restores the count).
        loop {
            self.chain_depth += 1;
            if self.chain_depth > MAX_CHAIN {
                let span = self.span();
                return Err(self.chain_limit(span));
            }
            // Postfix operators bind tightest.
            if self.at(P::LBrack) && self.adjacent() {
                self.bump();
                let mut keys = Vec::new();
                loop {
                    if self.at(P::RBrack) {
                        break;
                    }
                    keys.push(self.expr(BP_ASSIGN)?);
                    if !self.eat(P::Comma) {
                        break;
                    }
                }
                self.expect(P::RBrack, "to close the access")?;
                if keys.is_empty() {
                    let span = lhs.span.to(self.previous_span());
                    return Err(self.error(
                        span,
                        "an access needs at least one key",
                        "write `$x[key]` or `File['title']`",
                    ));
                }
                let span = lhs.span.to(self.previous_span());
                lhs = Expr {
                    kind: ExprKind::Access(Box::new(lhs), keys),
                    span,
                };
                continue;
            }
            if self.at(P::Question) {
                self.bump();
                lhs = self.selector(lhs)?;
                continue;
            }
            if self.at(P::Dot) {
                self.bump();
                // `$node.default` and `$node.override`: the layers node attributes are
                // written to.
                if matches!(&lhs.kind, ExprKind::Var(name) if name == "node") {
                    let layer = match self.peek() {
                        Tok::Name(name) if name == "override" => Some(NodeLayer::Override),
                        Tok::Keyword(Kw::Default) => Some(NodeLayer::Default),
                        _ => None,
                    };
                    if let Some(layer) = layer {
                        self.bump();
                        let span = lhs.span.to(self.previous_span());
                        lhs = Expr {
                            kind: ExprKind::NodeLayer(layer),
                            span,
                        };
                        continue;
                    }
                }
                // `$x.type`: the function `type`, though `type` starts a declaration.
                let name = match self.peek().clone() {
                    Tok::Name(name) => name,
                    Tok::Keyword(Kw::Type) => "type".to_owned(),
                    _ => return Err(self.unexpected("a function name after `.`")),
                };
                self.bump();
                let mut args = vec![lhs];
                if self.at(P::LParen) && self.adjacent() {
                    args.extend(self.call_args()?);
                } else if name == "new" && self.at(P::LBrace) {
                    // `MyType.new { attr => value }`: the hash of the features.
                    args.push(self.primary()?);
                }
                let lambda = self.lambda()?;
                let span = args[0].span.to(self.previous_span());
                lhs = Expr {
                    kind: ExprKind::Call { name, args, lambda },
                    span,
                };
                continue;
            }
            let Some((op, bp)) = infix(self.peek()) else {
                break;
            };
            if bp < min_bp {
                break;
            }
            let op_span = self.bump();
            if op == Infix::Append
                || (op == Infix::Assign
                    && matches!(&lhs.kind, ExprKind::Access(target, keys)
                        if keys.len() == 1
                            && matches!(&target.kind, ExprKind::Var(name)
                                if name != "node" && name != "facts")))
            {
                // `$t[feature] = value` and `$t[feature] += value`: the lambda of `new`
                // initializing its object.
                let ExprKind::Access(target, mut keys) = lhs.kind else {
                    return Err(self.error(
                        op_span,
                        "`+=` appends only to a feature of an object that `new` initializes",
                        "write `new(MyType) |$t| { $t[groups] += 'wheel' }`",
                    ));
                };
                let ExprKind::Var(var) = target.kind else {
                    return Err(self.error(
                        op_span,
                        "`+=` appends only to a feature of an object that `new` initializes",
                        "write `new(MyType) |$t| { $t[groups] += 'wheel' }`",
                    ));
                };
                if keys.len() != 1 {
                    return Err(self.error(
                        op_span,
                        "a feature is written with one key",
                        "write `$t[feature] = value`",
                    ));
                }
                let key = keys.remove(0);
                let rhs = self.expr(bp)?;
                let span = lhs.span.to(rhs.span);
                lhs = Expr {
                    kind: ExprKind::FeatureWrite {
                        var,
                        key: Box::new(key),
                        append: op == Infix::Append,
                        value: Box::new(rhs),
                    },
                    span,
                };
                continue;
            }
            if op == Infix::Assign {
                if let Some((layer, keys)) = node_write_target(&lhs) {
                    if keys.is_empty() {
                        return Err(self.error(
                            lhs.span,
                            "a whole layer of node attributes cannot be assigned",
                            "write a key: `$node.default['app']['port'] = 8080`",
                        ));
                    }
                    let rhs = self.expr(bp)?;
                    let span = lhs.span.to(rhs.span);
                    lhs = Expr {
                        kind: ExprKind::NodeWrite {
                            layer,
                            keys,
                            value: Box::new(rhs),
                        },
                        span,
                    };
                    continue;
                }
                if let ExprKind::Array(targets) = &lhs.kind {
                    check_targets(self, targets)?;
                    let targets = targets.clone();
                    let rhs = self.expr(bp)?;
                    let span = lhs.span.to(rhs.span);
                    lhs = Expr {
                        kind: ExprKind::AssignList(targets, Box::new(rhs)),
                        span,
                    };
                    continue;
                }
                let ExprKind::Var(name) = &lhs.kind else {
                    let root = access_root(&lhs);
                    let (message, help) = match root {
                        Some("node") => (
                            "node attributes are written through a precedence",
                            "write `$node.default['key'] = value` (or `$node.override[...]`); \
                             `$node[...]` reads",
                        ),
                        Some("facts") => (
                            "`$facts` is read-only",
                            "facts come from the machine; keep your own values in a variable or \
                             a node attribute",
                        ),
                        _ => (
                            "only a variable can be assigned to",
                            "write `$name = value`",
                        ),
                    };
                    return Err(self.error(op_span, message, help));
                };
                if name.contains("::") {
                    return Err(self.error(
                        lhs.span,
                        format!("cannot assign to `${name}`, a variable of another scope"),
                        "assign to a simple name in this scope",
                    ));
                }
                let name = name.clone();
                let rhs = self.expr(bp)?; // right associative
                let span = lhs.span.to(rhs.span);
                lhs = Expr {
                    kind: ExprKind::Assign(name, Box::new(rhs)),
                    span,
                };
                continue;
            }
            let Infix::Binary(op) = op else {
                unreachable!("assignment handled above")
            };
            let rhs = self.expr(bp + 1)?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                span,
            };
        }
        Ok(lhs)
    }

    pub(super) fn prefix(&mut self) -> PResult<Expr> {
        let start = self.span();
        if self.eat(P::Not) {
            let operand = self.expr(BP_UNARY)?;
            let span = start.to(operand.span);
            return Ok(Expr {
                kind: ExprKind::Not(Box::new(operand)),
                span,
            });
        }
        if self.eat(P::Minus) {
            let operand = self.expr(BP_UNARY)?;
            let span = start.to(operand.span);
            return Ok(Expr {
                kind: ExprKind::Neg(Box::new(operand)),
                span,
            });
        }
        self.primary()
    }

    pub(super) fn primary(&mut self) -> PResult<Expr> {
        let span = self.span();
        let simple = |kind| Ok(Expr { kind, span });
        // `$r = file { '/a': }`: a resource expression as a value (its references).
        if matches!(self.peek(), Tok::Name(_) | Tok::Keyword(Kw::Class))
            && *self.peek_at(1) == Tok::Punct(P::LBrace)
            && self.resource_body_follows()
        {
            return self.resource(Form::Regular, span);
        }
        // Every arm that gets a token holding text moves past it.
        match self.take_text() {
            Tok::Int(value) => {
                self.bump();
                simple(ExprKind::Int(value))
            }
            Tok::Float(value) => {
                self.bump();
                simple(ExprKind::Float(value))
            }
            Tok::Str(value) => {
                self.bump();
                simple(ExprKind::Str(value))
            }
            Tok::Regex(value) => {
                self.bump();
                simple(ExprKind::Regex(value))
            }
            Tok::Keyword(Kw::True) => {
                self.bump();
                simple(ExprKind::Bool(true))
            }
            Tok::Keyword(Kw::False) => {
                self.bump();
                simple(ExprKind::Bool(false))
            }
            Tok::Keyword(Kw::Undef) => {
                self.bump();
                simple(ExprKind::Undef)
            }
            Tok::Keyword(Kw::Default) => {
                self.bump();
                simple(ExprKind::Default)
            }
            Tok::Var(name) => {
                self.bump();
                simple(ExprKind::Var(name))
            }
            Tok::Interp(parts) => {
                self.bump();
                let parts = self.interpolation(parts)?;
                simple(ExprKind::Interp(parts))
            }
            // `lazy { expr }`: where a value is expected, `lazy` before a brace is never a
            // resource declaration.
            Tok::Name(name) if name == "lazy" && *self.peek_at(1) == Tok::Punct(P::LBrace) => {
                self.bump();
                let open = self.bump();
                let inner = self.expr(BP_ASSIGN)?;
                self.expect_close(P::RBrace, "to close the lazy block", open)?;
                Ok(Expr {
                    kind: ExprKind::Lazy(Box::new(inner)),
                    span: span.to(self.previous_span()),
                })
            }
            // `type(...)`: Puppet's function, where `type Name` declares a type.
            Tok::Keyword(Kw::Type) if *self.peek_at(1) == Tok::Punct(P::LParen) => {
                self.bump();
                let args = self.call_args()?;
                let lambda = self.lambda()?;
                Ok(Expr {
                    kind: ExprKind::Call {
                        name: "type".to_owned(),
                        args,
                        lambda,
                    },
                    span: span.to(self.previous_span()),
                })
            }
            Tok::Name(name) => {
                self.bump();
                // `name(...)`, or `each ($list) |$x| { ... }`: a space before the
                // arguments, a lambda after them.
                if self.at(P::LParen) && (self.adjacent() || self.lambda_after_parentheses()) {
                    let args = self.call_args()?;
                    let lambda = self.lambda()?;
                    return Ok(Expr {
                        kind: ExprKind::Call { name, args, lambda },
                        span: span.to(self.previous_span()),
                    });
                }
                simple(ExprKind::Bare(name))
            }
            Tok::TypeRef(name) => {
                self.bump();
                if self.at(P::LCollect) || self.at(P::LLCollect) {
                    return self.collector(name, span);
                }
                // `Sensitive('secret')`, Puppet's way to mark a value sensitive, and the
                // conversions `Integer('0x10')`, `String(5)`, `Array($x)`...: `new` of
                // the type.
                let conversion = matches!(
                    name.as_str(),
                    "Integer"
                        | "Float"
                        | "Numeric"
                        | "String"
                        | "Boolean"
                        | "Array"
                        | "Hash"
                        | "Binary"
                        | "SemVer"
                        | "Semver"
                        | "Timespan"
                        | "Timestamp"
                );
                if (name == "Sensitive" || conversion) && self.at(P::LParen) && self.adjacent() {
                    let args = self.call_args()?;
                    let lambda = if conversion { self.lambda()? } else { None };
                    return Ok(Expr {
                        kind: ExprKind::Call {
                            name: if conversion {
                                format!("new_{}", name.to_ascii_lowercase())
                            } else {
                                "sensitive".to_owned()
                            },
                            args,
                            lambda,
                        },
                        span: span.to(self.previous_span()),
                    });
                }
                simple(ExprKind::TypeRef(name))
            }
            Tok::Punct(P::LBrack) => {
                self.bump();
                let mut items = Vec::new();
                loop {
                    if self.at(P::RBrack) {
                        break;
                    }
                    items.push(self.expr(BP_ASSIGN)?);
                    if !self.eat(P::Comma) {
                        break;
                    }
                }
                self.expect_close(P::RBrack, "to close the array", span)?;
                Ok(Expr {
                    kind: ExprKind::Array(items),
                    span: span.to(self.previous_span()),
                })
            }
            Tok::Punct(P::LBrace) => {
                self.bump();
                let mut entries = Vec::new();
                loop {
                    if self.at(P::RBrace) {
                        break;
                    }
                    let key = self.expr(BP_ASSIGN)?;
                    self.expect(P::FatArrow, "between a hash key and its value")?;
                    let value = self.expr(BP_ASSIGN)?;
                    entries.push((key, value));
                    if !self.eat(P::Comma) {
                        break;
                    }
                }
                self.expect_close(P::RBrace, "to close the hash", span)?;
                Ok(Expr {
                    kind: ExprKind::Hash(entries),
                    span: span.to(self.previous_span()),
                })
            }
            Tok::Punct(P::LParen) => {
                self.bump();
                let inner = self.expr(BP_ASSIGN)?;
                if matches!(
                    self.peek(),
                    Tok::Punct(P::InEdge | P::InEdgeSub | P::OutEdge | P::OutEdgeSub)
                ) {
                    let at = self.span();
                    return Err(self.error(
                        at,
                        "a relationship cannot be inside parentheses",
                        "write the relationship as a statement of its own",
                    ));
                }
                self.expect_close(P::RParen, "to close the parenthesis", span)?;
                Ok(Expr {
                    kind: inner.kind,
                    span: span.to(self.previous_span()),
                })
            }
            Tok::Keyword(Kw::If) => self.if_expr(false),
            Tok::Keyword(Kw::Unless) => self.if_expr(true),
            Tok::Keyword(Kw::Case) => self.case_expr(),
            _ => Err(self.unexpected("an expression")),
        }
    }

    pub(super) fn interpolation(&mut self, parts: Vec<Part>) -> PResult<Vec<InterpPart>> {
        let mut out = Vec::new();
        for part in parts {
            match part {
                Part::Lit(text) => out.push(InterpPart::Lit(text)),
                Part::Expr(mut tokens) => {
                    // `${name}` and `${name['k']}` name a variable, as in Puppet.
                    let is_call =
                        matches!(tokens.get(1).map(|t| &t.tok), Some(Tok::Punct(P::LParen)));
                    // `${1}` and `${1[0]}` (not `${5.then ...}`, a method call on 5).
                    let alone = matches!(
                        tokens.get(1).map(|t| &t.tok),
                        None | Some(Tok::Eof | Tok::Punct(P::LBrack))
                    );
                    if let Some(first) = tokens.first_mut()
                        && !is_call
                    {
                        match &first.tok {
                            Tok::Name(name) => first.tok = Tok::Var(name.clone()),
                            // `${node['app']['port']}`: the node's attributes.
                            Tok::Keyword(Kw::Node) => first.tok = Tok::Var("node".to_owned()),
                            // `${1}` is the regular expression's first group, not 1.
                            Tok::Int(_) => {
                                let digits = self
                                    .text
                                    .get(first.span.start as usize..first.span.end as usize)
                                    .unwrap_or_default();
                                // `${0755}` stays the number: match variables are
                                // written without leading zeros.
                                if alone
                                    && !digits.is_empty()
                                    && digits.bytes().all(|byte| byte.is_ascii_digit())
                                    && (digits == "0" || !digits.starts_with('0'))
                                {
                                    first.tok = Tok::Var(digits.to_owned());
                                }
                            }
                            _ => {}
                        }
                    }
                    let empty_span = tokens[0].span;
                    if tokens[0].tok == Tok::Eof {
                        return Err(self.error(
                            empty_span,
                            "empty interpolation `${}`",
                            "put an expression between the braces, or remove them",
                        ));
                    }
                    let mut inner =
                        Parser::new(self.text, tokens, None, self.program, self.diagnostics);
                    inner.depth = self.depth;
                    inner.context = vec![Context::Other];
                    inner.in_interpolation = true;
                    inner.chain_depth = self.chain_depth;
                    let expr = inner.expr(BP_ASSIGN)?;
                    if *inner.peek() != Tok::Eof {
                        return Err(inner.unexpected("`}` to end the interpolation"));
                    }
                    out.push(InterpPart::Expr(expr));
                }
            }
        }
        Ok(out)
    }

    pub(super) fn call_args(&mut self) -> PResult<Vec<Expr>> {
        self.expect(P::LParen, "to start the arguments")?;
        let mut args = Vec::new();
        loop {
            if self.at(P::RParen) {
                break;
            }
            let arg = self.expr(BP_ASSIGN)?;
            if !self.at(P::FatArrow) {
                args.push(arg);
                if !self.eat(P::Comma) {
                    break;
                }
                continue;
            }
            // `f(1, key => value, ...)`: the last argument, a hash without its braces.
            let start = arg.span;
            let mut entries = Vec::new();
            let mut key = arg;
            loop {
                self.expect(P::FatArrow, "between a hash key and its value")?;
                let value = self.expr(BP_ASSIGN)?;
                entries.push((key, value));
                if !self.eat(P::Comma) || self.at(P::RParen) {
                    break;
                }
                key = self.expr(BP_ASSIGN)?;
            }
            args.push(Expr {
                kind: ExprKind::Hash(entries),
                span: start.to(self.previous_span()),
            });
            break;
        }
        self.expect(P::RParen, "to close the arguments")?;
        Ok(args)
    }

    /// At `name {`: whether a resource body follows, a title and its `:` (where a
    /// value is expected, `foo {` may also be a bare word and a block: `if $x == foo {`).
    fn resource_body_follows(&mut self) -> bool {
        let mut depth = 0usize;
        for ahead in 2.. {
            match *self.peek_far(ahead) {
                Tok::Punct(P::LParen | P::LBrack | P::LBrace) => depth += 1,
                Tok::Punct(P::RParen | P::RBrack | P::RBrace) if depth == 0 => return false,
                Tok::Punct(P::RParen | P::RBrack | P::RBrace) => depth -= 1,
                Tok::Punct(P::Colon) if depth == 0 => return true,
                Tok::Punct(P::Semi | P::FatArrow) | Tok::Eof if depth == 0 => return false,
                Tok::Eof => return false,
                _ => {}
            }
        }
        false
    }

    /// At a `(`: whether its `)` is followed by a lambda's `|`.
    fn lambda_after_parentheses(&mut self) -> bool {
        let mut depth = 0usize;
        for ahead in 0.. {
            match *self.peek_far(ahead) {
                Tok::Punct(P::LParen) => depth += 1,
                Tok::Punct(P::RParen) => {
                    depth -= 1;
                    if depth == 0 {
                        return *self.peek_far(ahead + 1) == Tok::Punct(P::Pipe);
                    }
                }
                Tok::Eof => return false,
                _ => {}
            }
        }
        false
    }

    pub(super) fn lambda(&mut self) -> PResult<Option<Box<Lambda>>> {
        if !self.at(P::Pipe) {
            return Ok(None);
        }
        let span = self.span();
        self.bump();
        let params = self.param_list(P::Pipe)?;
        self.expect(P::Pipe, "to close the lambda parameters")?;
        let body = self.block(Context::Other)?;
        Ok(Some(Box::new(Lambda { span, params, body })))
    }

    pub(super) fn selector(&mut self, subject: Expr) -> PResult<Expr> {
        self.expect(P::LBrace, "to open the selector")?;
        self.enter()?;
        let mut arms = Vec::new();
        loop {
            if self.at(P::RBrace) {
                break;
            }
            let option = self.expr(BP_ASSIGN)?;
            self.expect(P::FatArrow, "between a selector option and its value")?;
            let value = self.expr(BP_ASSIGN)?;
            arms.push((option, value));
            if !self.eat(P::Comma) {
                break;
            }
        }
        self.leave();
        self.expect(P::RBrace, "to close the selector")?;
        let span = subject.span.to(self.previous_span());
        Ok(Expr {
            kind: ExprKind::Selector {
                subject: Box::new(subject),
                arms,
            },
            span,
        })
    }

    pub(super) fn if_expr(&mut self, unless: bool) -> PResult<Expr> {
        let start = self.bump();
        let cond = self.expr(BP_ASSIGN)?;
        let then = self.block(Context::Other)?;
        let otherwise = if self.at_kw(Kw::Elsif) {
            if unless {
                let span = self.span();
                return Err(self.error(
                    span,
                    "`unless` cannot have an `elsif`",
                    "rewrite it as an `if` with the condition negated",
                ));
            }
            // `elsif` is an `if` in the `else` branch.
            self.tokens[self.pos].tok = Tok::Keyword(Kw::If);
            let nested = self.if_expr(false)?;
            Some(vec![nested])
        } else if self.at_kw(Kw::Else) {
            self.bump();
            Some(self.block(Context::Other)?)
        } else {
            None
        };
        let span = start.to(self.previous_span());
        let kind = if unless {
            ExprKind::Unless {
                cond: Box::new(cond),
                then,
                otherwise,
            }
        } else {
            ExprKind::If {
                cond: Box::new(cond),
                then,
                otherwise,
            }
        };
        Ok(Expr { kind, span })
    }

    pub(super) fn case_expr(&mut self) -> PResult<Expr> {
        let start = self.bump();
        let subject = self.expr(BP_ASSIGN)?;
        self.expect(P::LBrace, "to open the case")?;
        self.enter()?;
        let mut arms = Vec::new();
        while !self.at(P::RBrace) && *self.peek() != Tok::Eof {
            let mut options = vec![self.expr(BP_ASSIGN)?];
            while self.eat(P::Comma) {
                options.push(self.expr(BP_ASSIGN)?);
            }
            self.expect(P::Colon, "after the case options")?;
            let body = self.block(Context::Other)?;
            arms.push(CaseArm { options, body });
        }
        self.leave();
        self.expect(P::RBrace, "to close the case")?;
        Ok(Expr {
            kind: ExprKind::Case {
                subject: Box::new(subject),
                arms,
            },
            span: start.to(self.previous_span()),
        })
    }

    pub(super) fn collector(&mut self, type_name: String, start: Span) -> PResult<Expr> {
        let exported = self.at(P::LLCollect);
        self.bump();
        let close = if exported { P::RRCollect } else { P::RCollect };
        let query = if self.at(close) {
            None
        } else {
            Some(self.query(0)?)
        };
        self.expect(close, "to close the collector's query")?;
        // `{ attr => value }` after a collector overrides what it collects.
        let ops = if self.at(P::LBrace) && self.looks_like_attributes() {
            self.attribute_block()?
        } else {
            Vec::new()
        };
        Ok(Expr {
            kind: ExprKind::Collector(Box::new(Collector {
                type_name: type_name.to_ascii_lowercase(),
                exported,
                query,
                ops,
            })),
            span: start.to(self.previous_span()),
        })
    }

    pub(super) fn looks_like_attributes(&self) -> bool {
        self.attributes_follow(0) && *self.peek_at(1) != Tok::Punct(P::RBrace)
    }

    /// Does the `{` at `offset` from here open attribute operations (or nothing), rather
    /// than resource bodies (`title: ...`)?
    pub(super) fn attributes_follow(&self, offset: usize) -> bool {
        *self.peek_at(offset + 1) == Tok::Punct(P::RBrace)
            || (matches!(
                self.peek_at(offset + 1),
                Tok::Name(_) | Tok::Keyword(_) | Tok::Punct(P::Star)
            ) && matches!(
                self.peek_at(offset + 2),
                Tok::Punct(P::FatArrow | P::PlusArrow)
            ))
    }

    pub(super) fn query(&mut self, min_bp: u8) -> PResult<Query> {
        self.enter()?;
        let result = self.query_inner(min_bp);
        self.leave();
        result
    }

    pub(super) fn query_inner(&mut self, min_bp: u8) -> PResult<Query> {
        let mut lhs = if self.eat(P::LParen) {
            let inner = self.query(0)?;
            self.expect(P::RParen, "to close the parenthesis")?;
            inner
        } else {
            let attribute = match self.peek().clone() {
                Tok::Name(name) => name,
                Tok::Keyword(Kw::True | Kw::False | Kw::Reserved) => {
                    return Err(self.unexpected("an attribute name"));
                }
                Tok::Keyword(_) => keyword_text(self.token()).to_owned(),
                _ => return Err(self.unexpected("an attribute name in the query")),
            };
            self.bump();
            let equal = match self.peek() {
                Tok::Punct(P::Eq) => true,
                Tok::Punct(P::Ne) => false,
                _ => {
                    return Err(
                        self.unexpected("`==` or `!=` (the only comparisons a query allows)")
                    );
                }
            };
            self.bump();
            let value_span = self.span();
            let value = match self.peek().clone() {
                Tok::Var(name) => ExprKind::Var(name),
                Tok::Str(text) => ExprKind::Str(text),
                Tok::Interp(parts) => ExprKind::Interp(self.interpolation(parts)?),
                Tok::Keyword(Kw::True) => ExprKind::Bool(true),
                Tok::Keyword(Kw::False) => ExprKind::Bool(false),
                Tok::Int(value) => ExprKind::Int(value),
                Tok::Float(value) => ExprKind::Float(value),
                Tok::Name(name) => ExprKind::Bare(name),
                _ => {
                    let span = self.span();
                    let found = describe(self.peek());
                    return Err(self.error(
                        span,
                        format!(
                            "a query compares with a string, number, boolean, name or variable, not {found}"
                        ),
                        "arrays, hashes and expressions cannot be query values; join one comparison per value with `or`",
                    ));
                }
            };
            self.bump();
            Query::Compare {
                attribute,
                equal,
                value: Expr {
                    kind: value,
                    span: value_span,
                },
            }
        };
        loop {
            let (is_and, bp) = match self.peek() {
                Tok::Keyword(Kw::Or) => (false, 1),
                Tok::Keyword(Kw::And) => (true, 2),
                _ => break,
            };
            if bp < min_bp {
                break;
            }
            self.bump();
            let rhs = self.query(bp + 1)?;
            lhs = if is_and {
                Query::And(Box::new(lhs), Box::new(rhs))
            } else {
                Query::Or(Box::new(lhs), Box::new(rhs))
            };
        }
        Ok(lhs)
    }
}

/// The variables of `[$a, [$b, $c]] = ...`: simple names, or lists of them.
fn check_targets(parser: &mut Parser<'_>, targets: &[Expr]) -> PResult<()> {
    for target in targets {
        match &target.kind {
            ExprKind::Var(name) if !name.contains("::") => {}
            ExprKind::Array(inner) => check_targets(parser, inner)?,
            _ => {
                return Err(parser.error(
                    target.span,
                    "only variables can be assigned to, in a list as alone",
                    "write `[$a, $b] = [1, 2]`, each element a variable of this scope",
                ));
            }
        }
    }
    Ok(())
}
