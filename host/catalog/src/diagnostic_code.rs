//! The registry of diagnostic codes: every problem a user can be shown before a run
//! (the language's, the catalog's, the checks against the plugins' schemas, the graph's,
//! the policy's) has one of these, printed as `error[wcv::NAME]`. Each is explained in
//! `docs/diagnostics.md`, and a test keeps the two lists the same.
//!
//! A code, once released, keeps its name: scripts and editors match on it.

use std::fmt;

macro_rules! registry {
    ($($variant:ident = $name:literal,)*) => {
        /// What kind of problem a diagnostic is; see `docs/diagnostics.md`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum DiagnosticCode {
            $($variant,)*
        }

        impl DiagnosticCode {
            /// Every code, in the registry's order.
            pub const ALL: &[DiagnosticCode] = &[$(DiagnosticCode::$variant,)*];

            /// The code's name, without the `wcv::` prefix: `duplicate-title`.
            pub fn name(self) -> &'static str {
                match self {
                    $(DiagnosticCode::$variant => $name,)*
                }
            }
        }
    };
}

registry! {
    // The language (host/lang): syntax, names, values, lazy values, templates.
    Syntax = "syntax",
    NestingLimit = "nesting-limit",
    TooLarge = "too-large",
    ResourceLimit = "resource-limit",
    ValueLimit = "value-limit",
    WorkLimit = "work-limit",
    IterationLimit = "iteration-limit",
    ClassDepthLimit = "class-depth-limit",
    DefineDepthLimit = "define-depth-limit",
    FunctionDepthLimit = "function-depth-limit",
    CollectorRoundLimit = "collector-round-limit",
    EdgeLimit = "edge-limit",
    EmptyContainerOrdering = "empty-container-ordering",
    ModuleLimit = "module-limit",
    ModuleTopLevelCode = "module-top-level-code",
    UnknownVariable = "unknown-variable",
    ReassignedVariable = "reassigned-variable",
    AssignFacts = "assign-facts",
    AssignNode = "assign-node",
    AssignMatchVariable = "assign-match-variable",
    UnknownClass = "unknown-class",
    UnknownFunction = "unknown-function",
    UnknownType = "unknown-type",
    NotAType = "not-a-type",
    UnknownResource = "unknown-resource",
    UnknownReference = "unknown-reference",
    VirtualReference = "virtual-reference",
    UnknownAttribute = "unknown-attribute",
    UnknownSetting = "unknown-setting",
    UnsupportedSetting = "unsupported-setting",
    UnsupportedMetaparameter = "unsupported-metaparameter",
    DuplicateTitle = "duplicate-title",
    DuplicateAttribute = "duplicate-attribute",
    DuplicateClass = "duplicate-class",
    DuplicateDefinition = "duplicate-definition",
    DuplicateNode = "duplicate-node",
    DuplicateParameter = "duplicate-parameter",
    DuplicateFeature = "duplicate-feature",
    DuplicateDefaultBody = "duplicate-default-body",
    DuplicateExport = "duplicate-export",
    DefaultRedefined = "default-redefined",
    MissingParameter = "missing-parameter",
    ReservedParameter = "reserved-parameter",
    ParameterType = "parameter-type",
    AssignmentInDefault = "assignment-in-default",
    DefineShadowsType = "define-shadows-type",
    FunctionShadowsBuiltin = "function-shadows-builtin",
    TypeShadowsBuiltin = "type-shadows-builtin",
    TypeShadowsResource = "type-shadows-resource",
    CircularInheritance = "circular-inheritance",
    IncludeCycle = "include-cycle",
    NoNodeMatch = "no-node-match",
    VirtualClass = "virtual-class",
    ClassDefaults = "class-defaults",
    TypeMismatch = "type-mismatch",
    BadOperand = "bad-operand",
    BadType = "bad-type",
    BadArgument = "bad-argument",
    BadTitle = "bad-title",
    BadTag = "bad-tag",
    BadValue = "bad-value",
    BadReference = "bad-reference",
    BadMetaparameter = "bad-metaparameter",
    BadDefault = "bad-default",
    BadSetting = "bad-setting",
    BadMultiplicity = "bad-multiplicity",
    AttrNeedsDataType = "attr-needs-data-type",
    HasNeedsType = "has-needs-type",
    InvalidObject = "invalid-object",
    NotInitializing = "not-initializing",
    BadExport = "bad-export",
    BadExportQuery = "bad-export-query",
    NotImported = "not-imported",
    StoreUnavailable = "store-unavailable",
    Access = "access",
    Arithmetic = "arithmetic",
    Regex = "regex",
    NoSelectorMatch = "no-selector-match",
    CollectorValue = "collector-value",
    UnexpectedLambda = "unexpected-lambda",
    SplatNotHash = "splat-not-hash",
    SplatTwice = "splat-twice",
    AppendInResource = "append-in-resource",
    OverrideAppend = "override-append",
    OverrideClass = "override-class",
    OverrideSet = "override-set",
    OverrideTarget = "override-target",
    OverrideTooLate = "override-too-late",
    Cycle = "cycle",
    LazyInString = "lazy-in-string",
    LazyInLazy = "lazy-in-lazy",
    LazyVariable = "lazy-variable",
    LazyChangesCatalog = "lazy-changes-catalog",
    LazyBudget = "lazy-budget",
    NodeAttributeKey = "node-attribute-key",
    NodeAttributeLazy = "node-attribute-lazy",
    NodeAttributeNotHash = "node-attribute-not-hash",
    NodeAttributeValue = "node-attribute-value",
    NodeLayerRead = "node-layer-read",
    NodeWriteAtRunTime = "node-write-at-run-time",
    StaleNodeRead = "stale-node-read",
    Epp = "epp",
    EppSyntax = "epp-syntax",
    EppDepth = "epp-depth",
    EppOutside = "epp-outside",
    EppParameters = "epp-parameters",
    Erb = "erb",
    Hiera = "hiera",
    Lookup = "lookup",
    Validate = "validate",
    Deprecated = "deprecated",
    Fail = "fail",
    Notice = "notice",
    Info = "info",
    Debug = "debug",
    Warning = "warning",
    Err = "err",
    // Before the run (host/catalog, host/engine): the catalog, the plugins' schemas and
    // checks, guards, the graph.
    Catalog = "catalog",
    NoProvider = "no-provider",
    ProviderUnavailable = "provider-unavailable",
    ReadOnlyAttribute = "read-only-attribute",
    RequiredAttribute = "required-attribute",
    AttributeValue = "attribute-value",
    LazyAttribute = "lazy-attribute",
    Invariant = "invariant",
    ProviderCheck = "provider-check",
    RequiresProgram = "requires-program",
    SameNamevar = "same-namevar",
    DependencyCycle = "dependency-cycle",
    ModuleSource = "module-source",
    Guard = "guard",
    GuardInterpreter = "guard-interpreter",
    CatalogSyntax = "catalog-syntax",
    NotGranted = "not-granted",
    // The policy (host/policy), read before anything else.
    PolicySyntax = "policy-syntax",
    PolicyEntry = "policy-entry",
}

/// `wcv::NAME`, as it is printed.
impl fmt::Display for DiagnosticCode {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "wcv::{}", self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The codes `docs/diagnostics.md` explains: its `### `wcv::NAME`` headings.
    fn documented() -> Vec<String> {
        // Read when the test is built: the catalog does no IO.
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/diagnostics.md"
        ));
        text.lines()
            .filter_map(|line| line.strip_prefix("### `wcv::"))
            .map(|rest| rest.trim_end_matches('`').to_owned())
            .collect()
    }

    #[test]
    fn every_diagnostic_code_is_documented_and_every_documented_code_exists() {
        let documented = documented();
        let registered: Vec<&str> = DiagnosticCode::ALL.iter().map(|code| code.name()).collect();
        let undocumented: Vec<&&str> = registered
            .iter()
            .filter(|name| !documented.iter().any(|doc| doc == *name))
            .collect();
        assert!(
            undocumented.is_empty(),
            "codes without a `### `wcv::NAME`` section in docs/diagnostics.md: {undocumented:?}"
        );
        let stale: Vec<&String> = documented
            .iter()
            .filter(|doc| !registered.contains(&doc.as_str()))
            .collect();
        assert!(
            stale.is_empty(),
            "documented codes no longer in the registry: {stale:?}"
        );
        let unique: BTreeSet<&str> = registered.iter().copied().collect();
        assert_eq!(unique.len(), registered.len(), "a name is registered twice");
        assert_eq!(
            BTreeSet::from_iter(documented.iter()).len(),
            documented.len(),
            "a code is documented twice"
        );
    }

    #[test]
    fn a_code_prints_with_its_prefix_and_names_are_lowercase_words() {
        assert_eq!(
            DiagnosticCode::DuplicateTitle.to_string(),
            "wcv::duplicate-title"
        );
        assert!(
            DiagnosticCode::ALL.iter().all(|code| code
                .name()
                .bytes()
                .all(|byte| byte.is_ascii_lowercase() || byte == b'-')),
            "names are lowercase words joined by `-`"
        );
    }
}
