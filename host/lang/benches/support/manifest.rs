//! The manifest of the compile benchmark, shared by `compile` (in-process) and
//! `wconverge-cli`'s `floors` (the whole `wconverge compile` process).

use std::fmt::Write as _;

const N_CLASSES: usize = 400;
const PER_CLASS: usize = 100;
const N_DEFINES: usize = 5_000;
const N_VIRTUAL: usize = 5_000;

/// 400 classes of 100 files each (40,000), 5,000 defined type instances declaring one
/// file each, and 5,000 virtual files a collector realizes: 50,000 resources.
pub(crate) fn manifest() -> String {
    let mut text = String::with_capacity(11 << 20);
    text.push_str("File { owner => 'root', group => 'root', mode => '0644' }\n");
    text.push_str(
        "define site($port = 80, $docroot = '/srv/www') {\n  file { \"/srv/sites/${title}/site.conf\":\n    ensure  => file,\n    content => \"listen ${port}\\nroot ${docroot}/${title}\\n\",\n  }\n}\n",
    );
    for class_idx in 0..N_CLASSES {
        let _ = writeln!(text, "class app{class_idx} {{");
        let _ = writeln!(text, "  File {{ backup => false }}");
        for idx in 0..PER_CLASS {
            let path = format!("/srv/app{class_idx}/file{idx:03}.conf");
            let _ = write!(
                text,
                "  file {{ '{path}':\n    ensure  => file,\n    content => \"# generated for app{class_idx}\\nsetting_{idx} = value-{idx}-with-some-padding-text\\n\",\n    tag     => ['app{class_idx}', 'bench'],\n"
            );
            if idx > 0 {
                let _ = writeln!(
                    text,
                    "    require => File['/srv/app{class_idx}/file{:03}.conf'],",
                    idx - 1
                );
            }
            text.push_str("  }\n");
        }
        text.push_str("}\n");
        let _ = writeln!(text, "include app{class_idx}");
        if class_idx > 0 {
            let _ = writeln!(
                text,
                "Class['app{}'] -> Class['app{class_idx}']",
                class_idx - 1
            );
        }
    }
    for idx in 0..N_DEFINES {
        let _ = writeln!(
            text,
            "site {{ 'site{idx}': port => {} }}",
            8000 + idx % 1000
        );
    }
    for idx in 0..N_VIRTUAL {
        let _ = writeln!(
            text,
            "@file {{ '/srv/virtual/v{idx}': ensure => file, content => \"virtual {idx}\\n\", tag => 'virtual' }}"
        );
    }
    text.push_str("File <| tag == 'virtual' |> { mode => '0600' }\n");
    text
}
