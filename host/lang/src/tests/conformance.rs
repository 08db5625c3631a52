//! The conformance suite (`test_data/{ok,err}`, one named test per rule), and what
//! every fixture must survive: deep nesting, streamed lexing, truncation.

use super::*;

/// The conformance suite: `test_data/ok/NAME.wcv` must compile to `NAME.json` (the
/// catalog, then any warnings); `test_data/err/NAME.wcv` must fail with the
/// diagnostics in `NAME.txt`. `WCONVERGE_BLESS=1` rewrites the expectations; review
/// the diff before committing it.
#[expect(clippy::disallowed_methods, reason = "tests read their fixtures")]
pub(super) fn check_fixture(kind: &str, name: &str) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("test_data")
        .join(kind);
    let manifest = root.join(format!("{name}.wcv"));
    let text = std::fs::read_to_string(&manifest).expect("fixture exists");
    let sources = [Source::new(format!("{kind}/{name}.wcv"), text)];
    let compiled = compile(
        &sources,
        &CompileOptions::new("node1.example.com", &types()),
    );
    let mut all = sources.to_vec();
    all.extend(compiled.loaded.iter().cloned());
    let rendered: String = compiled
        .diagnostics
        .iter()
        .map(|diagnostic| render(diagnostic, &all))
        .collect::<Vec<_>>()
        .join("\n");
    let (actual, extension) = if kind == "ok" {
        let catalog = compiled
            .catalog
            .unwrap_or_else(|| panic!("{name} should compile:\n{rendered}"));
        let mut out = catalog.to_json();
        out.push('\n');
        if !rendered.is_empty() {
            out.push_str("---\n");
            out.push_str(&rendered);
        }
        (out, "json")
    } else {
        assert!(
            compiled.catalog.is_none(),
            "{name} should not compile (no partial catalog)"
        );
        assert!(!rendered.is_empty(), "{name} should report an error");
        (rendered, "txt")
    };
    let expected_path = root.join(format!("{name}.{extension}"));
    // `=1` only: `WCONVERGE_BLESS=0` (or an empty value) checks, as it reads.
    if std::env::var_os("WCONVERGE_BLESS").is_some_and(|value| value == "1") {
        std::fs::write(&expected_path, &actual).expect("write the expectation");
        return;
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_else(|_| {
        panic!(
            "{} is missing; run with WCONVERGE_BLESS=1 to create it",
            expected_path.display()
        )
    });
    assert_eq!(
        actual,
        expected,
        "{name}: output differs from {}",
        expected_path.display()
    );
}

macro_rules! conformance {
    ($kind:literal: $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                check_fixture($kind, stringify!($name));
            }
        )*
    };
}

mod ok {
    use super::check_fixture;
    conformance!("ok":
        functions_in_the_language,
        heredocs,
        data_types_and_core_functions,
        typed_parameters_with_puppet_data_types,
        epp_templates_inline,
        trusted_and_variables_set_for_every_node,
        regex_captures_in_strings_case_selector_and_node,
        interpolation_of_arrays_and_hashes,
        arithmetic_as_puppet_rounds_and_numeric_strings,
        defined_variables_and_resources,
        node_scope_seen_by_classes,
        class_variable_through_inheritance,
        params_pattern,
        tagged_asks_the_container,
        values_and_operators,
        strings_interpolation_and_escapes,
        variables_and_scopes,
        access_arrays_hashes_strings,
        conditionals_if_unless_case_selector,
        regex_match_and_captures,
        iteration_with_lambdas,
        resource_several_bodies,
        resource_array_titles,
        resource_nested_array_titles,
        resource_default_body_is_local_default,
        resource_local_default_does_not_extend_beyond_expression,
        resource_splat_sets_attributes,
        resource_undef_means_unset,
        resource_expression_returns_references,
        virtual_resource_is_not_in_catalog_until_realized,
        exported_resource_is_not_in_catalog_until_collected,
        defaults_apply_to_later_resources_only,
        defaults_append,
        defaults_follow_lexical_scope,
        defaults_several_expressions_merge,
        override_sets_unset_attribute,
        override_on_list_of_references,
        override_in_inheriting_class_replaces_and_appends,
        override_before_declaration,
        relationship_operators,
        relationship_chain,
        relationship_arrays_cartesian_product,
        relationship_collector_operand,
        relationship_string_means_class,
        relationship_empty_operand_is_noop,
        relationship_metaparameters,
        relationship_to_class_and_define_expands,
        relationship_between_ordered_sets_is_reduced,
        collector_realizes_virtual_resources,
        collector_query_operators,
        collector_overrides_attributes,
        collector_repeats_until_nothing_new,
        collector_exported,
        class_parameters_and_include,
        class_include_is_idempotent,
        core_library_functions_as_puppet_documents_them,
        break_next_and_return_as_puppet_has_them,
        syntax_puppet_has_that_was_missing,
        types_as_values_as_puppet_compares_them,
        expression_details_as_puppet_has_them,
        erb_templates_as_ruby_renders_them,
        data_types_called_as_functions,
        class_inherits,
        class_nested_definition_is_prefixed,
        class_contain_and_require,
        define_instances,
        define_title_and_name,
        node_exact_name_wins,
        node_regex_match,
        node_default,
        tags_automatic_and_explicit,
        metaparameters_carried,
        realize_function,
        manifest_order_with_defines,
        sensitive_values,
        nested_define_reached_by_collector_and_override,
        class_included_from_define_sees_earlier_defaults,
        override_on_define_instance_before_declaration,
        collector_overrides_define_parameters,
        realize_before_virtual_declaration,
        exported_collector_after_plain_collector,
        relationship_through_empty_class,
        noop_on_container_applies_to_contents,
        defaults_through_resource_type,
        class_title_and_name,
        filter_on_hash_returns_hash,
        node_ip_address_name,
        defaults_after_define_instance_do_not_apply,
        dollar_without_name_is_literal,
        resource_forms_with_capitalized_type,
        attribute_names_may_be_keywords,
        undef_parameter_value_rules,
        class_parameter_default_sees_inherited_variables,
        override_forms,
        relationship_has_lower_precedence_than_assignment,
        node_dotted_name_without_quotes,
        defaults_splat,
        lazy_guard,
        facts_variable,
        node_attributes,
        stale_node_read,
        harmful_refactoring,
        stale_node_read_in_defined_types,
        node_attribute_idioms,
        types_arm_user_and_user_role,
        types_multiplicity_and_settings,
        types_inheritance_invariants_and_new,
        types_typed_parameters,
    );
}

mod err {
    use super::check_fixture;
    conformance!("err":
        function_errors,
        heredoc_errors,
        parameters_of_the_wrong_data_type,
        epp_template_errors,
        top_scope_facts_cannot_be_assigned,
        errors_are_not_reported_again_as_consequences,
        type_where_a_value_was_expected,
        title_and_namevar_identify_a_resource,
        arithmetic_on_a_string_that_is_no_number,
        types_arm_check_messages,
        types_invariant_and_instantiation_errors,
        types_declaration_errors,
        types_typed_parameters,
        types_keyword_as_value,
        syntax_error_no_partial_catalog,
        several_syntax_errors_all_reported,
        several_evaluation_errors_all_reported,
        duplicate_title_names_both_places,
        duplicate_title_in_one_expression,
        unknown_attribute,
        unknown_type,
        append_in_resource_expression,
        splat_twice_in_one_body,
        splat_duplicates_explicit_attribute,
        defaults_redefined_in_same_scope,
        defaults_for_class,
        override_outside_inheriting_class,
        override_append_outside_inheriting_class,
        override_of_undeclared_resource,
        relationship_to_undeclared_resource,
        relationship_to_unrealized_virtual,
        variable_assigned_twice,
        unknown_variable,
        class_parameter_missing,
        class_circular_inheritance,
        class_include_cycle,
        class_declared_twice_with_parameters,
        unknown_class,
        define_instantiates_itself,
        collector_keeps_realizing,
        node_no_match,
        node_inherits,
        unsupported_metaparameter,
        fail_function,
        selector_without_match,
        type_mismatch,
        noop_must_be_boolean,
        tag_from_resource_default,
        noop_on_class_must_be_boolean,
        cycle_through_empty_class,
        ordering_through_empty_class_too_wide,
        invalid_unicode_escape,
        override_class_parameters,
        duplicate_node_definitions,
        bad_tag_from_function,
        interpolation_incomplete_expression,
        unknown_function_with_lambda,
        two_default_bodies,
        guard_on_defined_type_instance,
        provider_on_class,
        node_attribute_errors,
        node_assignment_errors,
        sort_mixed_types,
        iteration_count_limit,
        parameter_default_may_not_assign,
        parameter_must_be_simple_name,
        node_name_invalid_characters,
        class_definition_inside_block,
        define_named_like_a_plugin_type,
        define_does_not_see_the_calling_scope,
        define_error_names_its_instance,
        break_outside_a_lambda,
        lambda_and_function_arguments_that_do_not_fit,
        rest_parameter_not_last,
        checks_puppet_makes,
        heredoc_that_is_not_the_json_it_says,
        erb_outside_the_subset,
        typed_parameter_left_undef,
        attribute_set_twice_in_body,
        collector_inside_array,
        relationship_inside_parentheses,
        collector_query_value_must_be_simple,
        lazy_changes_catalog,
        facts_assigned,
    );
}

#[test]
fn every_fixture_is_listed() {
    let source = include_str!("conformance.rs");
    for kind in ["ok", "err"] {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("test_data")
            .join(kind);
        for entry in std::fs::read_dir(&root).expect("fixture directory") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|extension| extension == "wcv") {
                let stem = path
                    .file_stem()
                    .and_then(|stem| stem.to_str())
                    .expect("utf-8 name");
                assert!(
                    source.contains(&format!("        {stem},")),
                    "{} is not listed in the conformance tests",
                    path.display()
                );
            }
        }
    }
}

pub(super) fn first_error(text: &str) -> Diagnostic {
    let compiled = compile_one(text);
    assert!(
        compiled.catalog.is_none(),
        "expected an error for {text:.60}"
    );
    compiled
        .diagnostics
        .into_iter()
        .find(Diagnostic::is_error)
        .expect("an error")
}

#[test]
fn nesting_ten_thousand_deep_is_an_error_not_a_stack_overflow() {
    let depth = 10_000;
    let cases = [
        format!("$x = {}1{}\n", "[".repeat(depth), "]".repeat(depth)),
        format!("$x = {}1{}\n", "(".repeat(depth), ")".repeat(depth)),
        format!("$x = {}1\n", "-".repeat(depth)),
        format!("$x = {}1\n", "!".repeat(depth)),
        format!("$x = 1{}\n", " + (1".repeat(depth) + &")".repeat(depth)),
        format!(
            "$x = {}\n",
            "{'a' => ".repeat(depth) + "1" + &"}".repeat(depth)
        ),
        format!(
            "notify {{ {}'t'{}: }}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        ),
        format!(
            "{}notify {{ 'x': }}{}\n",
            "if true { ".repeat(depth),
            " }".repeat(depth)
        ),
        format!("$x = \"{}\"\n", "${\"".repeat(depth)),
    ];
    for case in cases {
        let error = first_error(&case);
        assert!(
            error.code.to_string() == "wcv::nesting-limit" || error.message.contains("nest"),
            "{case:.40}: {error:?}"
        );
    }
}

#[test]
fn nesting_below_the_limit_compiles() {
    let depth = MAX_NESTING / 2;
    let text = format!(
        "notify {{ {}'deep'{}: }}\n",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let compiled = compile_one(&text);
    assert!(compiled.catalog.is_some(), "{:?}", compiled.diagnostics);
}

/// Every fixture manifest (`test_data/ok`, `test_data/err`): its path and text.
#[expect(clippy::disallowed_methods, reason = "tests read their fixtures")]
pub(super) fn fixtures() -> Vec<(std::path::PathBuf, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data");
    let mut all = Vec::new();
    for kind in ["ok", "err"] {
        for entry in std::fs::read_dir(root.join(kind)).expect("fixtures") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|extension| extension == "wcv") {
                let text = std::fs::read_to_string(&path).expect("fixture");
                all.push((path, text));
            }
        }
    }
    all
}

/// Lexing as parsing goes (the tokens of one top-level statement at a time)
/// gives the tree and the problems of lexing the whole file first: on every fixture and
/// on broken prefixes of them. Only the order of the problems may differ (a lexing
/// problem now comes where it is, among the parser's).
#[test]
fn streamed_lexing_parses_as_lexing_the_whole_file_first() {
    let mut checked = 0;
    for (path, text) in fixtures() {
        for end in (0..=text.len())
            .rev()
            .step_by(13)
            .filter(|end| text.is_char_boundary(*end))
        {
            let text = &text[..end];
            let mut whole = (syntax::Program::default(), Vec::new());
            let tokens = lexer::lex(0, text, &mut whole.1);
            let whole_block = parser::parse_file(text, tokens, &mut whole.0, &mut whole.1);
            let mut streamed = (syntax::Program::default(), Vec::new());
            let streamed_block = parser::parse_text(0, text, &mut streamed.0, &mut streamed.1);
            assert_eq!(whole_block, streamed_block, "{}", path.display());
            assert_eq!(
                format!("{:?}", whole.0),
                format!("{:?}", streamed.0),
                "{}",
                path.display()
            );
            let sorted = |mut diagnostics: Vec<Diagnostic>| {
                diagnostics.sort_by(|a, b| (a.span, &a.message).cmp(&(b.span, &b.message)));
                diagnostics
            };
            assert_eq!(sorted(whole.1), sorted(streamed.1), "{}", path.display());
            checked += 1;
        }
    }
    assert!(checked > 100, "{checked}");
}

/// Every prefix of every fixture is a broken manifest; none may panic, and each either
/// compiles or reports an error with a span inside its text.
#[test]
fn truncated_fixtures_never_panic() {
    let types = types();
    for (path, text) in fixtures() {
        // Every prefix for the small files, every seventh for the large ones.
        let step = if text.len() > 600 { 7 } else { 1 };
        for end in (0..text.len())
            .step_by(step)
            .filter(|end| text.is_char_boundary(*end))
        {
            let sources = [Source::new("cut.wcv", &text[..end])];
            let compiled = compile(&sources, &CompileOptions::new("node1.example.com", &types));
            for diagnostic in &compiled.diagnostics {
                assert!(
                    diagnostic.span.end as usize <= end,
                    "{}: span past the end",
                    path.display()
                );
                render(diagnostic, &sources);
            }
        }
    }
}
