//! Type declarations (`type Name inherits Parent { ... }`) turned into the schema model,
//! and `new(Type, { ... })`, which instantiates one.

use super::{DiagnosticExt, Evaluator};
use crate::diagnostic::DiagnosticCode;
use crate::diagnostic::Span;
use crate::eval::types::Declared;
use crate::eval::value::Val;
use crate::syntax::{ExprKind, FeatureDef, SettingValue, TypeDef, TypeSpec};
use std::collections::HashMap;
use wconverge_catalog::{
    AttributeSchema, Behaviour, DataType, Invariant, PathAccess, TypeSchema, Value,
};

/// Names a declared type may not take: the language's own data types.
const BUILTIN_TYPES: &[&str] = &[
    "Any",
    "Array",
    "Boolean",
    "Class",
    "Data",
    "Default",
    "Enum",
    "Float",
    "Hash",
    "Integer",
    "Node",
    "Numeric",
    "Optional",
    "Pattern",
    "Regexp",
    "Resource",
    "Scalar",
    "Sensitive",
    "String",
    "Struct",
    "Tuple",
    "Type",
    "Undef",
    "Variant",
];

impl Evaluator<'_> {
    /// Checks every type declaration and turns it into a schema with its ancestors'
    /// features folded in, in `declared_types`.
    pub(super) fn load_types(&mut self) {
        let program = std::rc::Rc::clone(&self.program);
        let mut by_name: HashMap<String, &TypeDef> = HashMap::new();
        for def in &program.types {
            let key = def.name.to_ascii_lowercase();
            if let Some(previous) = by_name.get(&key) {
                let previous = previous.span;
                self.error(
                    DiagnosticCode::DuplicateDefinition,
                    def.span,
                    format!("type `{}` is declared twice", def.name),
                )
                .with_related_mut(previous, "first declared here")
                .help = Some("rename one of the types, or merge them".into());
                continue;
            }
            if BUILTIN_TYPES.contains(&def.name.as_str()) {
                self.error(
                    DiagnosticCode::TypeShadowsBuiltin,
                    def.span,
                    format!("`{}` is a built-in data type", def.name),
                )
                .help = Some("give the type a name of its own, like `MyApp::Config`".into());
                continue;
            }
            if self.types.contains(&key) {
                self.error(
                    DiagnosticCode::TypeShadowsResource,
                    def.span,
                    format!(
                        "`{}` is the name of a resource type a plugin provides",
                        def.name
                    ),
                )
                .help = Some("give the type a name of its own, like `MyApp::Config`".into());
                continue;
            }
            by_name.insert(key, def);
        }
        let mut schemas = Vec::new();
        for def in &program.types {
            if by_name
                .get(&def.name.to_ascii_lowercase())
                .is_none_or(|known| !std::ptr::eq(*known, def))
            {
                continue;
            }
            if let Some(schema) = self.type_schema(def, &by_name) {
                schemas.push(schema);
            }
        }
        self.declared_types = schemas;
    }

    /// The chain of `def`'s ancestors, nearest last, or `None` after reporting a
    /// missing or circular parent.
    fn ancestors<'d>(
        &mut self,
        def: &'d TypeDef,
        by_name: &HashMap<String, &'d TypeDef>,
    ) -> Option<Vec<&'d TypeDef>> {
        let mut chain: Vec<&TypeDef> = Vec::new();
        let mut current = def;
        while let Some((parent, parent_span)) = &current.parent {
            let Some(next) = by_name.get(&parent.to_ascii_lowercase()).copied() else {
                self.error(
                    DiagnosticCode::UnknownType,
                    *parent_span,
                    format!(
                        "type `{}` inherits `{parent}`, which no manifest declares",
                        current.name
                    ),
                )
                .help = Some(format!(
                    "declare `type {parent} {{ ... }}`, or fix the name"
                ));
                return None;
            };
            if std::ptr::eq(next, def) || chain.iter().any(|seen| std::ptr::eq(*seen, next)) {
                let names: Vec<&str> = std::iter::once(def.name.as_str())
                    .chain(chain.iter().map(|seen| seen.name.as_str()))
                    .chain(std::iter::once(next.name.as_str()))
                    .collect();
                self.error(
                    DiagnosticCode::CircularInheritance,
                    def.span,
                    format!(
                        "type `{}` inherits itself: {}",
                        def.name,
                        names.join(" -> ")
                    ),
                )
                .help = Some("break the cycle: one of these types must not inherit".into());
                return None;
            }
            chain.push(next);
            current = next;
        }
        chain.reverse();
        Some(chain)
    }

    fn type_schema(
        &mut self,
        def: &TypeDef,
        by_name: &HashMap<String, &TypeDef>,
    ) -> Option<TypeSchema> {
        let chain = self.ancestors(def, by_name)?;
        let mut attributes: Vec<AttributeSchema> = Vec::new();
        let mut declared_at: HashMap<String, (Span, String)> = HashMap::new();
        let mut invariants = Vec::new();
        let mut ok = true;
        for owner in chain.iter().copied().chain(std::iter::once(def)) {
            for feature in &owner.features {
                if let Some((previous, previous_owner)) = declared_at.get(&feature.name) {
                    // Reported once, for the type that declares it.
                    if std::ptr::eq(owner, def) {
                        let previous = *previous;
                        let message = if *previous_owner == def.name {
                            format!(
                                "feature `{}` is declared twice in `{}`",
                                feature.name, def.name
                            )
                        } else {
                            format!(
                                "feature `{}` of `{}` is already a feature of `{previous_owner}`, \
                                 which it inherits",
                                feature.name, def.name
                            )
                        };
                        self.error(DiagnosticCode::DuplicateFeature, feature.span, message)
                            .with_related_mut(previous, "declared here")
                            .help = Some(
                            "feature names are unique along the inheritance chain: rename it"
                                .into(),
                        );
                    }
                    ok = false;
                    continue;
                }
                declared_at.insert(feature.name.clone(), (feature.span, owner.name.clone()));
                match self.feature_schema(feature, by_name) {
                    Some(attribute) => attributes.push(attribute),
                    None => ok = false,
                }
            }
            for invariant in &owner.invariants {
                invariants.push(Invariant {
                    title: invariant.title.clone(),
                    source: invariant.source.clone(),
                });
            }
        }
        let location = self.location(def.span);
        ok.then(|| TypeSchema {
            name: def.name.clone(),
            doc: String::new(),
            attributes,
            invariants,
            refreshable: false,
            context: Vec::new(),
            batch_state: false,
            concurrency: wconverge_catalog::Concurrency::OneAtATime,
            watches: Vec::new(),
            parent: def.parent.as_ref().map(|(parent, _)| {
                by_name
                    .get(&parent.to_ascii_lowercase())
                    .map_or_else(|| parent.clone(), |known| known.name.clone())
            }),
            is_abstract: def.is_abstract,
            origin: Some(format!("{}:{}", location.file, location.line)),
        })
    }

    fn feature_schema(
        &mut self,
        feature: &FeatureDef,
        by_name: &HashMap<String, &TypeDef>,
    ) -> Option<AttributeSchema> {
        let keyword = if feature.has { "has" } else { "attr" };
        let data_type = match &feature.data_type {
            None => DataType::Any,
            Some((TypeSpec::Enum(cases), _)) => DataType::Enum(cases.clone()),
            Some((TypeSpec::Named(name), span)) => {
                let basic = match name.as_str() {
                    "Integer" => Some(DataType::Integer),
                    "Float" => Some(DataType::Float),
                    "String" => Some(DataType::String),
                    "Boolean" => Some(DataType::Boolean),
                    "Any" => Some(DataType::Any),
                    _ => None,
                };
                match (basic, feature.has) {
                    (Some(basic), false) => basic,
                    (Some(_), true) => {
                        self.error(
                            DiagnosticCode::HasNeedsType,
                            *span,
                            format!(
                                "`has {}` refers to `{name}`, a data type, not a declared type",
                                feature.name
                            ),
                        )
                        .help = Some(format!("write `attr {}, {name}`", feature.name));
                        return None;
                    }
                    (None, _) => match by_name.get(&name.to_ascii_lowercase()) {
                        Some(known) if feature.has => DataType::Named(known.name.clone()),
                        Some(_) => {
                            self.error(
                                DiagnosticCode::AttrNeedsDataType,
                                *span,
                                format!("`attr {}` has the declared type `{name}`; an attribute holds a data type", feature.name),
                            )
                            .help = Some(format!("refer to another type with `has {}, {name}`", feature.name));
                            return None;
                        }
                        None => {
                            self.error(
                                DiagnosticCode::UnknownType,
                                *span,
                                format!("`{name}` is not a data type nor a declared type"),
                            )
                            .help = Some(
                                "the data types are Integer, Float, String, Boolean and \
                                 enum[...]; or declare the type with `type Name { ... }`"
                                    .into(),
                            );
                            return None;
                        }
                    },
                }
            }
        };
        let mut attribute = AttributeSchema {
            behaviour: Behaviour::Property,
            path_access: PathAccess::None,
            containment: feature.has.then_some(true),
            ..AttributeSchema::new(&feature.name, data_type)
        };
        let mut min: Option<u32> = None;
        let mut max: Option<Option<u32>> = None;
        let mut transient = None;
        let mut ok = true;
        for setting in &feature.settings {
            let name = setting.name.as_str();
            let expr = match &setting.value {
                SettingValue::Code(code) => {
                    match name {
                        "check" | "validate" => attribute.checks.push(code.clone()),
                        _ => attribute.derived = Some(code.clone()),
                    }
                    continue;
                }
                SettingValue::Expr(expr) => expr,
            };
            let bad = |evaluator: &mut Self, what: &str| {
                evaluator.error(
                    DiagnosticCode::BadSetting,
                    expr.span,
                    format!("`{name}` of `{keyword} {}` must be {what}", feature.name),
                );
                false
            };
            match name {
                "min" => match &expr.kind {
                    ExprKind::Int(n) if (0..=i64::from(u32::MAX)).contains(n) => {
                        min = u32::try_from(*n).ok();
                    }
                    _ => ok = bad(self, "a number of at least 0"),
                },
                "max" => match &expr.kind {
                    ExprKind::Int(n) if (1..=i64::from(u32::MAX)).contains(n) => {
                        max = Some(u32::try_from(*n).ok());
                    }
                    ExprKind::Bare(word) if word == "unbound" => max = Some(None),
                    _ => ok = bad(self, "a number of at least 1, or `unbound`"),
                },
                "unsettable" | "transient" | "containment" => {
                    let ExprKind::Bool(flag) = expr.kind else {
                        ok = bad(self, "`true` or `false`");
                        continue;
                    };
                    match name {
                        "unsettable" => attribute.unsettable = flag,
                        "transient" => transient = Some(flag),
                        _ if feature.has => attribute.containment = Some(flag),
                        _ => ok = bad(self, "used on a `has` reference only; `containment`"),
                    }
                }
                "default" if !feature.has => {
                    let value = self.eval(expr);
                    match value.to_catalog() {
                        Ok(value) => {
                            attribute.default = Some(literal_as(&attribute.data_type, value))
                        }
                        Err(message) => ok = bad(self, &format!("a literal value ({message})")),
                    }
                }
                "set" | "get" | "setable" => {
                    self.error(
                        DiagnosticCode::UnsupportedSetting,
                        setting.span,
                        format!("`{name}` is not supported yet"),
                    )
                    .help = Some(
                        "compute a value with `derived => |...| { ... }`, or check one with \
                         `check`"
                            .into(),
                    );
                    ok = false;
                }
                _ => {
                    self.error(
                        DiagnosticCode::UnknownSetting,
                        setting.span,
                        format!("`{keyword} {}` has no setting `{name}`", feature.name),
                    )
                    .help = Some(
                        "the settings are min, max, unsettable, default, check, derived, \
                         transient and (for `has`) containment"
                            .into(),
                    );
                    ok = false;
                }
            }
        }
        // The ARM's rules: min 0 and max 1 unless said; min 1 means max 1; a minimum
        // above 1 means no maximum.
        attribute.min = min.unwrap_or(0);
        attribute.max = match max {
            Some(max) => max,
            None if attribute.min > 1 => None,
            None => Some(1),
        };
        if attribute.max.is_some_and(|max| max < attribute.min) {
            self.error(
                DiagnosticCode::BadMultiplicity,
                feature.span,
                format!(
                    "`{}` has `max` {} below `min` {}",
                    feature.name,
                    attribute.max.unwrap_or_default(),
                    attribute.min
                ),
            )
            .help = Some("raise `max`, or write `max => unbound`".into());
            ok = false;
        }
        attribute.transient = transient.unwrap_or(false);
        if let Some(default) = &attribute.default
            && let Err(message) = attribute.check(default)
        {
            self.error(
                DiagnosticCode::BadDefault,
                feature.span,
                format!("the default of `{}` {message}", feature.name),
            );
            ok = false;
        }
        if attribute.derived.is_some() && attribute.default.is_some() {
            self.error(
                DiagnosticCode::BadSetting,
                feature.span,
                format!(
                    "`{}` is derived and cannot also have a default",
                    feature.name
                ),
            );
            ok = false;
        }
        ok.then_some(attribute)
    }

    /// `new(Type, { ... })`, `Type.new { ... }`: an object of a declared type.
    pub(crate) fn instantiate(
        &mut self,
        args: Vec<Val>,
        lambda: Option<&crate::syntax::Lambda>,
        span: Span,
    ) -> Val {
        let mut args = args.into_iter();
        let type_name = match args.next() {
            Some(Val::Ref {
                type_name,
                title: None,
            }) => type_name,
            other => {
                self.error(
                    DiagnosticCode::BadArgument,
                    span,
                    format!(
                        "`new` takes a declared type first, not {}",
                        other.map_or("nothing", |value| value.type_name())
                    ),
                )
                .help =
                    Some("write `new(MyType, { attr => value })` or `MyType.new { ... }`".into());
                return Val::Undef;
            }
        };
        let given = match args.next() {
            None => Vec::new(),
            Some(Val::Hash(entries)) => {
                let mut given = Vec::new();
                for (key, value) in entries {
                    let Some(key) = self.feature_name(key, span) else {
                        return Val::Undef;
                    };
                    given.push((key, value));
                }
                match self.catalog_values(given, span) {
                    Some(given) => given,
                    None => return Val::Undef,
                }
            }
            Some(other) => {
                self.error(
                    DiagnosticCode::BadArgument,
                    span,
                    format!(
                        "`new` takes a hash of the features, not {}",
                        other.type_name()
                    ),
                );
                return Val::Undef;
            }
        };
        let mut given = given;
        if let Some(lambda) = lambda {
            // The lambda initializes the object: `$t[feature] = value` sets a feature,
            // `$t[feature] += value` appends to one; `$t` reads what is set so far.
            let Some(param) = lambda.params.first().map(|param| &param.name) else {
                self.error(
                    DiagnosticCode::BadArgument,
                    span,
                    "the lambda of `new` takes the object: `|$t| { $t[attr] = value }`",
                );
                return Val::Undef;
            };
            let settings: Vec<(String, Val)> = given
                .iter()
                .map(|(key, value)| (key.clone(), Val::from_catalog(value)))
                .collect();
            self.initializing.push((param.clone(), settings.clone()));
            let object = Val::Hash(
                settings
                    .into_iter()
                    .map(|(key, value)| (Val::Str(key), value))
                    .collect(),
            );
            self.run_lambda(lambda, vec![object]);
            let (_, settings) = self.initializing.pop().unwrap_or_default();
            given = match self.catalog_values(settings, span) {
                Some(given) => given,
                None => return Val::Undef,
            };
        }
        let declared_types = std::mem::take(&mut self.declared_types);
        let result = {
            let declared = Declared::new(&declared_types);
            match declared.get(&type_name) {
                None => Err(None),
                Some(schema) => crate::eval::types::instantiate(schema, &declared, &given)
                    .map_err(|errors| Some((schema.name.clone(), errors))),
            }
        };
        self.declared_types = declared_types;
        match result {
            Ok(object) => Val::from_catalog(&object),
            Err(None) => {
                let shown = display_name(&type_name);
                let help = if self.types.contains(&type_name) {
                    format!(
                        "`{shown}` is a resource type: declare a resource with `{type_name} {{ 'title': ... }}`"
                    )
                } else {
                    format!("declare it with `type {shown} {{ ... }}`")
                };
                self.error(
                    DiagnosticCode::UnknownType,
                    span,
                    format!("`{shown}` is not a declared type"),
                )
                .help = Some(help);
                Val::Undef
            }
            Err(Some((name, errors))) => {
                for error in errors {
                    self.error(
                        DiagnosticCode::InvalidObject,
                        span,
                        format!("new({name}): {error}"),
                    );
                }
                Val::Undef
            }
        }
    }
}

impl Evaluator<'_> {
    /// A feature's name, which is a string; `None` after reporting anything else.
    fn feature_name(&mut self, key: Val, span: Span) -> Option<String> {
        match key {
            Val::Str(key) => Some(key),
            other => {
                self.error(
                    DiagnosticCode::BadArgument,
                    span,
                    format!("a feature name is a string, not {}", other.type_name()),
                );
                None
            }
        }
    }

    /// Features given to `new` as catalog values; `None` after reporting one that cannot
    /// be (a regular expression, a type).
    fn catalog_values(
        &mut self,
        features: Vec<(String, Val)>,
        span: Span,
    ) -> Option<Vec<(String, Value)>> {
        let mut values = Vec::with_capacity(features.len());
        for (key, value) in features {
            match value.to_catalog() {
                Ok(value) => values.push((key, value)),
                Err(message) => {
                    self.error(
                        DiagnosticCode::BadArgument,
                        span,
                        format!("the value of `{key}` {message}"),
                    );
                    return None;
                }
            }
        }
        Some(values)
    }

    /// The value of a parameter declared with a data type: checked against a basic
    /// data type, or instantiated as a declared type (so `MyApp::Config $config` turns
    /// a hash into a checked object with its defaults). `None` after reporting an error.
    pub(super) fn typed_parameter(
        &mut self,
        value: Val,
        param: &str,
        type_name: &str,
        type_span: Span,
        span: Span,
    ) -> Option<Val> {
        let basic = match type_name {
            "Integer" => Some(DataType::Integer),
            "Float" => Some(DataType::Float),
            "String" => Some(DataType::String),
            "Boolean" => Some(DataType::Boolean),
            _ => None,
        };
        if basic.is_none() && BUILTIN_TYPES.contains(&type_name) {
            // Other built-in types (`Hash`, `Optional`...) are not enforced yet.
            return Some(value);
        }
        let Ok(catalog_value) = value.to_catalog() else {
            if basic.is_none() {
                return Some(value);
            }
            // A regular expression, a type or a reference is no string, number or boolean.
            self.error(
                DiagnosticCode::ParameterType,
                span,
                format!(
                    "parameter `${param}` expects {type_name}, got {} `{}`",
                    value.type_name(),
                    value.to_display()
                ),
            )
            .with_related_mut(type_span, "its type is declared here");
            return None;
        };
        if let Some(basic) = basic {
            if let Err(message) = basic.check(&catalog_value) {
                self.error(
                    DiagnosticCode::ParameterType,
                    span,
                    format!("parameter `${param}` {message}"),
                )
                .with_related_mut(type_span, "its type is declared here");
                return None;
            }
            return Some(value);
        }
        let declared_types = std::mem::take(&mut self.declared_types);
        let result = {
            let declared = Declared::new(&declared_types);
            declared
                .get(type_name)
                .map(|schema| match catalog_value.unwrap_sensitive() {
                    Value::Hash(entries) => {
                        crate::eval::types::instantiate(schema, &declared, entries)
                    }
                    other => Err(vec![format!(
                        "expects a hash of the features of a `{}`, got {}",
                        schema.name,
                        other.type_name()
                    )]),
                })
        };
        self.declared_types = declared_types;
        match result {
            None => {
                self.error(
                    DiagnosticCode::UnknownType,
                    type_span,
                    format!("`{type_name}` is not a data type nor a declared type"),
                )
                .help = Some(format!("declare it with `type {type_name} {{ ... }}`"));
                None
            }
            Some(Ok(object)) => Some(Val::from_catalog(&object)),
            Some(Err(errors)) => {
                for error in errors {
                    self.error(
                        DiagnosticCode::ParameterType,
                        span,
                        format!("parameter `${param}` as a `{type_name}`: {error}"),
                    )
                    .with_related_mut(type_span, "its type is declared here");
                }
                None
            }
        }
    }

    /// `$t[feature] = value` or `+= value` inside the lambda of `new`.
    pub(super) fn feature_write(
        &mut self,
        var: &str,
        key: &crate::syntax::Expr,
        append: bool,
        value: &crate::syntax::Expr,
        span: Span,
    ) -> Val {
        let key = self.eval(key);
        let value = self.eval(value);
        let Some(frame) = self
            .initializing
            .iter()
            .rposition(|(param, _)| param == var)
        else {
            self.error(
                DiagnosticCode::NotInitializing,
                span,
                format!("`${var}` is not an object being initialized, so it cannot be written"),
            )
            .help = Some(
                "values are immutable; features are set in the lambda of `new`: \
                 `new(MyType) |$t| { $t[attr] = value }`"
                    .into(),
            );
            return Val::Undef;
        };
        let Some(key) = self.feature_name(key, span) else {
            return Val::Undef;
        };
        let settings = &mut self.initializing[frame].1;
        let position = settings.iter().position(|(name, _)| *name == key);
        let new_value = match (append, position) {
            (false, _) | (true, None) => value.clone(),
            (true, Some(at)) => {
                // `+=` appends to the feature's values (a new array in ordinary logic).
                let mut items = match std::mem::replace(&mut settings[at].1, Val::Undef) {
                    Val::Array(items) => items,
                    Val::Undef => Vec::new(),
                    single => vec![single],
                };
                match value.clone() {
                    Val::Array(more) => items.extend(more),
                    single => items.push(single),
                }
                Val::Array(items)
            }
        };
        match position {
            Some(at) => settings[at].1 = new_value.clone(),
            None => settings.push((key, new_value.clone())),
        }
        // `$t` reads what is set so far.
        let object = Val::Hash(
            settings
                .iter()
                .map(|(name, value)| (Val::Str(name.clone()), value.clone()))
                .collect(),
        );
        self.rebind(var, object);
        new_value
    }
}

/// A lowercase type value's name as a user writes it: `myapp::config` -> `Myapp::Config`.
fn display_name(lowercase: &str) -> String {
    wconverge_catalog::display_type_name(lowercase)
}

/// A default written as a string, in the attribute's data type (the ARM: "in string
/// form, converted to datatype").
fn literal_as(data_type: &DataType, value: Value) -> Value {
    let Value::String(text) = &value else {
        return value;
    };
    match data_type {
        DataType::Integer => text.parse().map_or(value.clone(), Value::Integer),
        DataType::Float => text.parse().map_or(value.clone(), Value::Float),
        DataType::Boolean => match text.as_str() {
            "true" => Value::Boolean(true),
            "false" => Value::Boolean(false),
            _ => value,
        },
        _ => value,
    }
}
