//! The syntax tree the parser builds and the evaluator walks.

use crate::diagnostic::Span;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expr {
    pub(crate) kind: ExprKind,
    pub(crate) span: Span,
}

pub(crate) type Block = Vec<Expr>;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ExprKind {
    Str(String),
    Interp(Vec<InterpPart>),
    Int(i64),
    Float(f64),
    Bool(bool),
    Undef,
    Default,
    Regex(String),
    /// A bare word: a string without quotes (`present`, `include foo`).
    Bare(String),
    /// A type: `File`, `Class`.
    TypeRef(String),
    Var(String),
    Array(Vec<Expr>),
    Hash(Vec<(Expr, Expr)>),
    /// `$x[k]`, `File['a', 'b']`.
    Access(Box<Expr>, Vec<Expr>),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Assign(String, Box<Expr>),
    /// `[$a, [$b, $c]] = value`: each variable of the list (an `Array` of `Var`s and of
    /// such lists) from the array's element at its place, or the hash's value under its
    /// name.
    AssignList(Vec<Expr>, Box<Expr>),
    If {
        cond: Box<Expr>,
        then: Block,
        otherwise: Option<Block>,
    },
    Unless {
        cond: Box<Expr>,
        then: Block,
        otherwise: Option<Block>,
    },
    Case {
        subject: Box<Expr>,
        arms: Vec<CaseArm>,
    },
    Selector {
        subject: Box<Expr>,
        arms: Vec<(Expr, Expr)>,
    },
    Call {
        name: String,
        args: Vec<Expr>,
        lambda: Option<Box<Lambda>>,
    },
    Resource(Box<ResourceExpr>),
    Defaults {
        type_name: String,
        ops: Vec<AttrOp>,
    },
    Override {
        target: Box<Expr>,
        ops: Vec<AttrOp>,
    },
    Collector(Box<Collector>),
    Relation(Box<Expr>, RelOp, Box<Expr>),
    /// A definition already hoisted into the program's tables.
    Definition,
    /// `lazy { expr }`.
    Lazy(Box<Expr>),
    /// `$node.default` or `$node.override`, which only a write may use.
    NodeLayer(NodeLayer),
    /// `$t[feature] = value` or `$t[feature] += value` in the lambda of `new`, which
    /// initializes the object `$t`.
    FeatureWrite {
        var: String,
        key: Box<Expr>,
        append: bool,
        value: Box<Expr>,
    },
    /// `$node.default['a']['b'] = value`.
    NodeWrite {
        layer: NodeLayer,
        keys: Vec<Expr>,
        value: Box<Expr>,
    },
}

/// The precedence of a node attribute write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeLayer {
    Default,
    Override,
}

impl NodeLayer {
    /// As a manifest writes it: `$node.default`, `$node.override`.
    pub(crate) fn keyword(self) -> &'static str {
        match self {
            NodeLayer::Default => "default",
            NodeLayer::Override => "override",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    LShift,
    RShift,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Match,
    NoMatch,
    In,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RelOp {
    /// `->`
    Before,
    /// `~>`
    Notify,
    /// `<-`
    Require,
    /// `<~`
    Subscribe,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum InterpPart {
    Lit(String),
    Expr(Expr),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CaseArm {
    pub(crate) options: Vec<Expr>,
    pub(crate) body: Block,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Lambda {
    /// Where its parameter list opens.
    pub(crate) span: Span,
    pub(crate) params: Vec<Param>,
    pub(crate) body: Block,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    Regular,
    Virtual,
    Exported,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResourceExpr {
    pub(crate) form: Form,
    /// `file`, `apache::vhost`, or `class`.
    pub(crate) type_name: String,
    pub(crate) type_span: Span,
    /// `Resource[$expr] { ... }`: the type, known when this is evaluated (`type_name`
    /// is empty until then).
    pub(crate) type_expr: Option<Box<Expr>>,
    pub(crate) bodies: Vec<Body>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Body {
    pub(crate) title: Expr,
    pub(crate) ops: Vec<AttrOp>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttrOpKind {
    Set,
    Append,
    /// `* => $hash`
    Splat,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AttrOp {
    pub(crate) name: std::rc::Rc<str>,
    pub(crate) name_span: Span,
    pub(crate) kind: AttrOpKind,
    pub(crate) value: Expr,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Collector {
    pub(crate) type_name: String,
    pub(crate) exported: bool,
    pub(crate) query: Option<Query>,
    pub(crate) ops: Vec<AttrOp>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Query {
    And(Box<Query>, Box<Query>),
    Or(Box<Query>, Box<Query>),
    Compare {
        attribute: String,
        equal: bool,
        value: Expr,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Param {
    pub(crate) name: String,
    pub(crate) span: Span,
    /// Its data type when written as one name (`String`, `MyApp::Config`); a
    /// parameterized one (`Array[String]`) is accepted and not enforced.
    pub(crate) data_type: Option<(String, Span)>,
    /// The data type as written, whatever it is (`Array[String]`, `Stdlib::Port`).
    pub(crate) type_expr: Option<Expr>,
    pub(crate) default: Option<Expr>,
    /// `*$rest`: the arguments past the others, as an array (functions and lambdas).
    pub(crate) captures_rest: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ClassDef {
    pub(crate) name: String,
    pub(crate) span: Span,
    pub(crate) params: Vec<Param>,
    pub(crate) parent: Option<(String, Span)>,
    /// Taken when the class is evaluated, which happens once per compile: the syntax
    /// tree of a class is freed as soon as it has given its resources.
    pub(crate) body: std::cell::RefCell<Block>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DefineDef {
    pub(crate) name: String,
    pub(crate) span: Span,
    pub(crate) params: Vec<Param>,
    pub(crate) body: Block,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum HostMatch {
    Name(String),
    Regex(String),
    Default,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NodeDef {
    pub(crate) matches: Vec<(HostMatch, Span)>,
    pub(crate) span: Span,
    pub(crate) body: Block,
}

/// `type Name inherits Parent { ... }` (Puppet's ARM "Puppet Types in the Puppet Language").
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TypeDef {
    /// As written: `MyApp::Config`.
    pub(crate) name: String,
    pub(crate) span: Span,
    pub(crate) parent: Option<(String, Span)>,
    pub(crate) features: Vec<FeatureDef>,
    pub(crate) invariants: Vec<InvariantDef>,
    pub(crate) is_abstract: bool,
}

/// `attr NAME, Type { settings }` or `has NAME, Type { settings }`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FeatureDef {
    /// `has`: a reference to another declared type.
    pub(crate) has: bool,
    pub(crate) name: String,
    pub(crate) span: Span,
    pub(crate) data_type: Option<(TypeSpec, Span)>,
    pub(crate) settings: Vec<Setting>,
}

/// The data type of a feature as written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TypeSpec {
    /// `Integer`, `String`, ..., or a declared type.
    Named(String),
    /// `enum[a, b]`.
    Enum(Vec<String>),
}

/// `name => value` in a feature's settings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Setting {
    pub(crate) name: String,
    pub(crate) span: Span,
    pub(crate) value: SettingValue,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SettingValue {
    /// A literal: `min => 1`, `default => 'x'`.
    Expr(Expr),
    /// Code kept as source (a `check`, `validate` or `derived`): a block, a lambda or an
    /// expression.
    Code(String),
}

/// `invariant "title" { ... }`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct InvariantDef {
    pub(crate) title: Option<String>,
    pub(crate) span: Span,
    pub(crate) source: String,
}

/// Everything parsed from all the files: top-level statements per file, and the
/// definitions hoisted out of them.
#[derive(Debug, Default)]
pub(crate) struct Program {
    pub(crate) files: Vec<Block>,
    pub(crate) classes: Vec<ClassDef>,
    pub(crate) defines: Vec<DefineDef>,
    pub(crate) nodes: Vec<NodeDef>,
    pub(crate) types: Vec<TypeDef>,
    /// `type Name = <data type>`: Puppet's type aliases.
    pub(crate) aliases: Vec<AliasDef>,
    /// `function name(params) { body }`: functions in the language.
    pub(crate) functions: Vec<DefineDef>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AliasDef {
    pub(crate) name: String,
    pub(crate) span: Span,
    pub(crate) value: Expr,
}
