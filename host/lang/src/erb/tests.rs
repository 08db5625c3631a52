//! The interpreter against Ruby: each template here was rendered by Ruby 3.1's ERB
//! (trim mode `-`, as Puppet renders) with the same variables, and its output is what
//! Ruby printed. `scripts/erb-vs-ruby` measures the same against modules' templates.

use super::*;

/// The variables of every case, as Puppet would hand them to Ruby.
struct Vars;

impl Host for Vars {
    fn variable(&mut self, name: &str) -> Option<RVal> {
        let text = |s: &str| RVal::Str(s.to_owned());
        Some(match name {
            "servers" => RVal::Array(vec![text("b.pool"), text("a.pool")]),
            "port" => RVal::Int(22),
            "ratio" => RVal::Float(0.5),
            "big" => RVal::Float(1.0e20),
            "opts" => RVal::Hash(vec![
                (text("b"), RVal::Int(2)),
                (text("a"), RVal::Array(vec![RVal::Int(1), text("x")])),
                (text("c"), RVal::Nil),
            ]),
            "empty" => text(""),
            "flag" => RVal::Bool(true),
            "name" => text("web"),
            "nothing" => RVal::Nil,
            _ => return None,
        })
    }

    fn call(&mut self, name: &str, _args: Vec<RVal>) -> Result<RVal, String> {
        Err(format!("no function `{name}` in these tests"))
    }
}

/// Each template, and what Ruby's ERB printed for it.
const AS_RUBY_RENDERS_THEM: &[(&str, &str)] = &[
    (
        "<% @servers.each do |s| -%>\nserver <%= s %> iburst\n<% end -%>\n",
        "server b.pool iburst\nserver a.pool iburst\n",
    ),
    (
        "a\n  <%- if @flag -%>\n  yes\n  <%- end -%>\nb <%# gone -%>\nc <%% d %%>\n",
        "a\n  yes\nb c <% d %%>\n",
    ),
    (
        "<%= @opts.keys.sort.join(',') %>|<%= @opts.inspect %>|<%= @opts['a'] %>|<%= @servers %>\n",
        "a,b,c|{\"b\"=>2, \"a\"=>[1, \"x\"], \"c\"=>nil}|[1, \"x\"]|[\"b.pool\", \"a.pool\"]\n",
    ),
    (
        "<% @opts.sort_by { |k, v| k }.each do |k, v| -%>\n<%= k %>=<%= v.inspect %>\n<% end -%>",
        "a=[1, \"x\"]\nb=2\nc=nil\n",
    ),
    (
        "<% @servers.each_with_index do |s, i| %><%= i %>:<%= s.upcase %> <% end %>",
        "0:B.POOL 1:A.POOL ",
    ),
    (
        "<%= @port.is_a?(Integer) %> <%= @nothing.nil? %> <%= @empty.empty? %> <%= defined?(@nothing).inspect %> <%= defined?(@missing).inspect %>",
        "true true true \"instance-variable\" nil",
    ),
    (
        "<%= @ratio %> <%= @big %> <%= 10 / 4 %> <%= 10.0 / 4 %> <%= -7 % 3 %> <%= 1e-5 %> <%= 100.0 %>",
        "0.5 1.0e+20 2 2.5 2 1.0e-05 100.0",
    ),
    (
        "<% case @port when 22 then %>ssh<% when 80 then %>http<% else %>other<% end %>",
        "ssh",
    ),
    (
        "<%= @flag ? 'on' : 'off' %> <%= @nothing || 'default' %> <%= @name && @name.capitalize %>",
        "on default Web",
    ),
    (
        "<%= sprintf('%-8s|%05.2f|%3d', 'ab', 3.14159, 7) %> <%= '%s=%s' % ['k', 'v'] %> <%= 'x' * 3 %>",
        "ab      |03.14|  7 k=v xxx",
    ),
    (
        "<%= @servers.map { |s| s.split('.').first }.sort.join(' ') %> <%= @servers.inject(0) { |sum, s| sum + s.length } %>",
        "a b 12",
    ),
    (
        "<% total = 0 -%>\n<% @servers.each do |s| -%>\n<% next if s.start_with?('a') -%>\n<% total += 1 -%>\n<%= s %>\n<% end -%>\n<%= total %>\n",
        "b.pool\n1\n",
    ),
    (
        "<%- def yesno(v)\n  v ? 'yes' : 'no'\nend -%>\n<%= yesno(@flag) %> <%= yesno(@nothing) %>\n",
        "yes no\n",
    ),
    (
        "<% @list = Array(@servers) + ['c.pool'] -%><%= @list.length %> <%= @list.last %> <%= Array(nil).inspect %> <%= Array('x').inspect %>",
        "3 c.pool [] [\"x\"]",
    ),
    (
        "<%= scope['port'] %> <%= scope.lookupvar('::name') %> <%= scope['missing'].inspect %>",
        "22 web nil",
    ),
    (
        "<%= \":\" %> <%= 'a-b_c'.gsub(/[-_]/, '.') %> <%= 'Hello World'.downcase.sub('world', 'there') %> <%= '  x  '.strip %>|",
        ": a.b.c hello there x|",
    ),
    (
        "<%= [3, 1, 2].sort.reverse.inspect %> <%= [1, [2, [3, nil]]].flatten.compact.inspect %> <%= [1, 1, 2].uniq.inspect %> <%= %w{a b c}.include?('b') %>",
        "[3, 2, 1] [1, 2, 3] [1, 2] true",
    ),
    (
        "<%= {'x' => 1}.merge({'y' => 2}).to_a.inspect %> <%= @opts.select { |k, v| v }.keys.inspect %> <%= @opts.fetch('z', 'none') %> <%= @opts.key?('a') %>",
        "[[\"x\", 1], [\"y\", 2]] [\"b\", \"a\"] none true",
    ),
    (
        "<% unless @empty.empty? %>not empty<% else %>empty<% end %> <%= :sym.inspect %> <%= [nil, true, 1.5, 'q\"t'].inspect %>",
        "empty :sym [nil, true, 1.5, \"q\\\"t\"]",
    ),
    (
        "<%= 'abc'[1] %> <%= 'abcdef'[1, 3] %> <%= [1, 2, 3][-1] %> <%= [1, 2, 3].first(2).inspect %> <%= 'a,b,,c'.split(',').inspect %> <%= 'a b  c'.split.inspect %>",
        "b bcd 3 [1, 2] [\"a\", \"b\", \"\", \"c\"] [\"a\", \"b\", \"c\"]",
    ),
];

fn rendered(template: &str) -> Result<String, Error> {
    let program = parse_template(template)?;
    render(&program, &mut Vars)
}

#[test]
fn templates_render_byte_for_byte_as_rubys_erb_renders_them() {
    for (template, expected) in AS_RUBY_RENDERS_THEM {
        match rendered(template) {
            Ok(output) => assert_eq!(&output, expected, "template: {template:?}"),
            Err(error) => panic!(
                "template {template:?} failed at line {}: {}",
                error.line, error.message
            ),
        }
    }
}

#[test]
fn ruby_outside_the_subset_is_an_error_naming_it_and_its_line() {
    for (template, line, says) in [
        ("a\n<% require 'ipaddr' %>", 2, "`require` is Ruby outside"),
        (
            "<%= @port.frobnicate %>",
            1,
            "undefined method `frobnicate' for Integer",
        ),
        ("\n\n<%= @servers.each %>", 3, "`each` without a block"),
        ("<% while true %>x<% end %>", 1, "`while` is Ruby outside"),
        ("<%= $stdout %>", 1, "global variables"),
        (
            "<%= @nothing.upcase %>",
            1,
            "undefined method `upcase' for NilClass",
        ),
        ("<% if @flag %>unclosed", 1, "expected `end`"),
        ("<%= 1", 1, "never closed"),
    ] {
        let error = rendered(template).expect_err(template);
        assert_eq!(error.line, line, "{template:?}: {error:?}");
        assert!(
            error.message.contains(says),
            "{template:?}: {}",
            error.message
        );
    }
}

#[test]
fn a_template_that_loops_or_prints_without_end_stops_at_its_limits() {
    let error =
        rendered("<% (1..1000000).each do |i| %><% (1..1000000).each do |j| %><% end %><% end %>")
            .expect_err("too many steps");
    assert!(error.message.contains("steps"), "{}", error.message);
    let error = rendered("<% (1..100000).each do |i| %><%= 'x' * 1000 %><% end %>")
        .expect_err("too much output");
    assert!(error.message.contains("16 MiB"), "{}", error.message);
}

#[test]
fn a_template_cut_anywhere_is_rendered_or_refused_and_never_panics() {
    for (template, _) in AS_RUBY_RENDERS_THEM {
        for end in (0..=template.len()).filter(|end| template.is_char_boundary(*end)) {
            let _ = rendered(&template[..end]);
        }
    }
    for hostile in [
        "<%= 9223372036854775807 + 1 %>",
        "<%= -9223372036854775807 - 2 %>",
        "<%= (-9223372036854775807 - 1).abs %>",
        "<%= 9223372036854775807.succ %>",
        "<%= 'abc'[1, 9223372036854775807] %>",
        "<%= [1, 2][0..9223372036854775807] %>",
        "<%= (1...-9223372036854775807).to_a %>",
        "<%= (-9223372036854775807 - 1) / -1 %>",
        "<%= 5 % 0 %>",
        "<%= '%*s' % [-9223372036854775807, 'x'] %>",
    ] {
        let _ = rendered(hostile);
    }
}
