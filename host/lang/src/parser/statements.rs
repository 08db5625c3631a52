//! Statements: a file's or a block's statements with error recovery, and resource
//! declarations with their bodies and attributes.

use super::*;

impl Parser<'_> {
    pub(super) fn statements(&mut self, in_block: bool) -> Block {
        let mut block = Vec::new();
        loop {
            if !in_block {
                self.forget_parsed();
            }
            while self.eat(P::Semi) {}
            match self.peek() {
                Tok::Eof => break,
                Tok::Punct(P::RBrace) if in_block => break,
                _ => {}
            }
            let before = self.pos;
            let depth = self.depth;
            let chain_depth = self.chain_depth;
            let result = self.statement();
            self.chain_depth = chain_depth;
            match result {
                Ok(expr) => block.push(expr),
                Err(Stop) => {
                    // A failed statement may leave nesting levels entered.
                    self.depth = depth;
                    self.recover(before);
                }
            }
        }
        block
    }

    /// Skips the rest of a statement that failed to parse: first whatever brackets it
    /// opened, then to the next token that starts a line. A `}` that closes an
    /// enclosing block is left for that block.
    pub(super) fn recover(&mut self, before: usize) {
        let mut depth: usize = 0;
        for token in &self.tokens[before..self.pos] {
            match token.tok {
                Tok::Punct(P::LBrace | P::LBrack | P::LParen | P::LCollect | P::LLCollect) => {
                    depth += 1;
                }
                Tok::Punct(P::RBrace | P::RBrack | P::RParen | P::RCollect | P::RRCollect) => {
                    depth = depth.saturating_sub(1);
                }
                _ => {}
            }
        }
        let mut moved = self.pos != before;
        loop {
            let token = self.token();
            match token.tok {
                Tok::Eof => return,
                Tok::Punct(P::LBrace | P::LBrack | P::LParen | P::LCollect | P::LLCollect) => {
                    depth += 1;
                }
                Tok::Punct(P::RBrace | P::RBrack | P::RParen | P::RCollect | P::RRCollect) => {
                    if depth == 0 {
                        if token.tok == Tok::Punct(P::RBrace) && self.open_blocks > 0 && moved {
                            return;
                        }
                    } else {
                        depth -= 1;
                        if depth == 0 {
                            self.bump();
                            return;
                        }
                    }
                }
                _ if depth == 0 && token.line_start && moved => return,
                _ => {}
            }
            self.bump();
            moved = true;
        }
    }

    pub(super) fn block(&mut self, context: Context) -> PResult<Block> {
        let open = self.expect(P::LBrace, "to open a block")?;
        self.enter()?;
        self.context.push(context);
        self.open_blocks += 1;
        let block = self.statements(true);
        self.open_blocks -= 1;
        self.context.pop();
        self.leave();
        self.expect_close(P::RBrace, "to close the block", open)?;
        Ok(block)
    }

    pub(super) fn statement(&mut self) -> PResult<Expr> {
        match self.peek() {
            Tok::Keyword(Kw::Class) if matches!(self.peek_at(1), Tok::Name(_)) => {
                return self.class_definition();
            }
            Tok::Keyword(Kw::Define) => return self.define_definition(),
            Tok::Keyword(Kw::Node) => return self.node_definition(),
            Tok::Keyword(Kw::Type) if *self.peek_at(1) != Tok::Punct(P::LParen) => {
                return self.type_definition();
            }
            Tok::Keyword(Kw::Reserved)
                if self.source_word(self.span()) == "function"
                    && matches!(self.peek_at(1), Tok::Name(_)) =>
            {
                return self.function_definition();
            }
            _ => {}
        }
        let mut lhs = self.operand()?;
        loop {
            let op = match self.peek() {
                Tok::Punct(P::InEdge) => RelOp::Before,
                Tok::Punct(P::InEdgeSub) => RelOp::Notify,
                Tok::Punct(P::OutEdge) => RelOp::Require,
                Tok::Punct(P::OutEdgeSub) => RelOp::Subscribe,
                _ => break,
            };
            let op_span = self.bump();
            self.chain_depth += 1;
            if self.chain_depth > MAX_CHAIN {
                return Err(self.chain_limit(op_span));
            }
            let rhs = self.operand()?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Relation(Box::new(lhs), op, Box::new(rhs)),
                span,
            };
        }
        Ok(lhs)
    }

    /// One relationship operand: a resource, default or override expression, a
    /// statement-style call, or an ordinary expression.
    pub(super) fn operand(&mut self) -> PResult<Expr> {
        let start = self.span();
        match self.peek().clone() {
            Tok::Punct(P::At) => {
                self.bump();
                return self.resource(Form::Virtual, start);
            }
            Tok::Punct(P::AtAt) => {
                self.bump();
                return self.resource(Form::Exported, start);
            }
            Tok::Name(_) | Tok::Keyword(Kw::Class) if *self.peek_at(1) == Tok::Punct(P::LBrace) => {
                return self.resource(Form::Regular, start);
            }
            Tok::TypeRef(name) if *self.peek_at(1) == Tok::Punct(P::LBrace) => {
                let type_span = self.bump();
                // `File { mode => ... }` sets defaults; `File { '/a': ... }` declares.
                if !self.attributes_follow(0) {
                    return self.resource_bodies(
                        Form::Regular,
                        start,
                        name.to_ascii_lowercase(),
                        type_span,
                    );
                }
                let ops = self.attribute_block()?;
                return Ok(Expr {
                    kind: ExprKind::Defaults {
                        type_name: name.to_ascii_lowercase(),
                        ops,
                    },
                    span: start.to(self.previous_span()),
                });
            }
            Tok::Name(name)
                if STATEMENT_FUNCTIONS.contains(&name.as_str())
                    && !self.call_parenthesis_follows()
                    && !self.tokens[(self.pos + 1).min(self.tokens.len() - 1)].line_start =>
            {
                self.bump();
                let mut args = vec![self.expr(BP_ASSIGN)?];
                while self.eat(P::Comma) {
                    args.push(self.expr(BP_ASSIGN)?);
                }
                return Ok(Expr {
                    kind: ExprKind::Call {
                        name,
                        args,
                        lambda: None,
                    },
                    span: start.to(self.previous_span()),
                });
            }
            Tok::Keyword(Kw::Reserved) => {
                let span = self.span();
                let word = self.source_word(span).to_owned();
                return Err(self.error(
                    span,
                    format!("`{word}` is a reserved word that wconverge does not support here"),
                    "rename it; if it names a variable or attribute, quote it or use `$`",
                ));
            }
            Tok::Keyword(Kw::Class) => {
                return Err(self.unexpected("a class name or `{` after `class`"));
            }
            _ => {}
        }
        let expr = self.expr(BP_ASSIGN)?;
        let overridable = match &expr.kind {
            ExprKind::Var(_) => true,
            ExprKind::Access(target, _) => {
                matches!(target.kind, ExprKind::TypeRef(_) | ExprKind::Var(_))
            }
            _ => false,
        };
        // `Resource[File] { mode => ... }` sets defaults for the type given.
        if self.at(P::LBrace)
            && self.attributes_follow(0)
            && let ExprKind::Access(target, keys) = &expr.kind
            && target.kind == ExprKind::TypeRef("Resource".to_owned())
            && let [key] = keys.as_slice()
            && let ExprKind::TypeRef(name) | ExprKind::Str(name) | ExprKind::Bare(name) = &key.kind
        {
            let type_name = name.to_ascii_lowercase();
            let ops = self.attribute_block()?;
            return Ok(Expr {
                kind: ExprKind::Defaults { type_name, ops },
                span: start.to(self.previous_span()),
            });
        }
        if overridable && self.at(P::LBrace) && !self.attributes_follow(0) {
            // `Resource[File] { '/a': ... }` declares a resource of the type given.
            if let ExprKind::Access(target, keys) = &expr.kind
                && target.kind == ExprKind::TypeRef("Resource".to_owned())
                && let [key] = keys.as_slice()
            {
                let (type_name, type_expr) = match &key.kind {
                    ExprKind::TypeRef(name) | ExprKind::Str(name) | ExprKind::Bare(name) => {
                        (name.to_ascii_lowercase(), None)
                    }
                    _ => (String::new(), Some(Box::new(key.clone()))),
                };
                let mut resource =
                    self.resource_bodies(Form::Regular, start, type_name, key.span)?;
                if let ExprKind::Resource(declared) = &mut resource.kind {
                    declared.type_expr = type_expr;
                }
                return Ok(resource);
            }
        }
        if overridable && self.at(P::LBrace) {
            let ops = self.attribute_block()?;
            let span = expr.span.to(self.previous_span());
            return Ok(Expr {
                kind: ExprKind::Override {
                    target: Box::new(expr),
                    ops,
                },
                span,
            });
        }
        Ok(expr)
    }

    /// `name(` with no space: an ordinary call. `notice ("x")` is a statement call
    /// whose first argument is in parentheses.
    pub(super) fn call_parenthesis_follows(&self) -> bool {
        let next = &self.tokens[(self.pos + 1).min(self.tokens.len() - 1)];
        next.tok == Tok::Punct(P::LParen) && next.span.start == self.span().end
    }

    pub(super) fn source_word(&self, span: Span) -> &str {
        self.text
            .get(span.start as usize..span.end as usize)
            .unwrap_or_default()
    }

    pub(super) fn resource(&mut self, form: Form, start: Span) -> PResult<Expr> {
        let type_span = self.span();
        let type_name = match self.peek().clone() {
            Tok::Name(name) => name.trim_start_matches("::").to_owned(),
            Tok::Keyword(Kw::Class) => "class".to_owned(),
            Tok::TypeRef(name) => {
                return Err(self.error(
                    type_span,
                    format!("a resource type is written in lowercase: `{}`", name.to_ascii_lowercase()),
                    "`File { ... }` with a capital sets defaults; `file { 'title': ... }` declares a resource",
                ));
            }
            _ => return Err(self.unexpected("a resource type after `@`")),
        };
        self.bump();
        self.resource_bodies(form, start, type_name, type_span)
    }

    /// The bodies of a resource expression whose type has been read.
    pub(super) fn resource_bodies(
        &mut self,
        form: Form,
        start: Span,
        type_name: String,
        type_span: Span,
    ) -> PResult<Expr> {
        let open = self.expect(P::LBrace, "after the resource type")?;
        self.enter()?;
        let mut bodies = Vec::new();
        loop {
            if self.at(P::RBrace) {
                break;
            }
            let title = self.expr(BP_ASSIGN)?;
            self.expect(P::Colon, "after the title")?;
            let ops = self.attribute_ops(&[P::Semi, P::RBrace])?;
            bodies.push(Body { title, ops });
            if !self.eat(P::Semi) {
                break;
            }
        }
        self.leave();
        self.expect_close(P::RBrace, "to close the resource", open)?;
        bodies.shrink_to_fit();
        if bodies.is_empty() {
            return Err(self.error(
                start.to(self.previous_span()),
                "a resource expression needs at least one body",
                "write a title and its attributes: `file { '/etc/motd': ensure => file }`",
            ));
        }
        Ok(Expr {
            kind: ExprKind::Resource(Box::new(ResourceExpr {
                form,
                type_name,
                type_span,
                type_expr: None,
                bodies,
            })),
            span: start.to(self.previous_span()),
        })
    }

    /// `{ name => value, ... }` after a type, a reference or a collector.
    pub(super) fn attribute_block(&mut self) -> PResult<Vec<AttrOp>> {
        let open = self.expect(P::LBrace, "to open the attributes")?;
        self.enter()?;
        let ops = self.attribute_ops(&[P::RBrace])?;
        self.leave();
        self.expect_close(P::RBrace, "to close the attributes", open)?;
        Ok(ops)
    }

    pub(super) fn attribute_ops(&mut self, terminators: &[P]) -> PResult<Vec<AttrOp>> {
        let mut ops = Vec::new();
        loop {
            if terminators.iter().any(|t| self.at(*t)) {
                break;
            }
            let name_span = self.span();
            let name = match self.peek() {
                Tok::Name(name) if !name.contains("::") => match self.take() {
                    Tok::Name(name) => name,
                    // Just seen to be a name.
                    _ => String::new(),
                },
                Tok::Keyword(Kw::True | Kw::False) | Tok::Keyword(Kw::Reserved) => {
                    return Err(self.unexpected("an attribute name"));
                }
                Tok::Keyword(_) => keyword_text(&self.tokens[self.pos]).to_owned(),
                Tok::Punct(P::Star) => "*".to_owned(),
                _ => return Err(self.unexpected("an attribute name")),
            };
            self.bump();
            let kind = match self.peek() {
                Tok::Punct(P::FatArrow) if name == "*" => AttrOpKind::Splat,
                Tok::Punct(P::FatArrow) => AttrOpKind::Set,
                Tok::Punct(P::PlusArrow) if name != "*" => AttrOpKind::Append,
                _ => return Err(self.unexpected("`=>` after the attribute name")),
            };
            self.bump();
            let value = self.expr(BP_ASSIGN)?;
            let name = self.intern(name);
            ops.push(AttrOp {
                name,
                name_span,
                kind,
                value,
            });
            if !self.eat(P::Comma) {
                break;
            }
        }
        // Kept as long as the syntax tree: as long as it needs to be, no more.
        ops.shrink_to_fit();
        Ok(ops)
    }
}
