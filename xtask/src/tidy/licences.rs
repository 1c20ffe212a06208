//! Dependencies' licences and versions, against deny.toml: the allow-list of licences and the
//! `[bans] skip` list of duplicate versions, enforced offline with the lists where cargo-deny
//! reads them, so the two never disagree. deny.toml is read with `toml`, licence expressions
//! with `spdx`, as cargo-deny reads both.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::tree;
use crate::project_root;

/// What these checks read of deny.toml.
#[derive(Debug, Deserialize)]
struct DenyToml {
    licenses: Licenses,
    bans: Bans,
}

/// `[licenses]`: the licences a dependency may carry.
#[derive(Debug, Deserialize)]
struct Licenses {
    #[serde(default)]
    allow: Vec<String>,
}

/// `[bans]`: the older versions allowed beside a newer one.
#[derive(Debug, Deserialize)]
struct Bans {
    #[serde(default)]
    skip: Vec<Skip>,
}

/// One `[bans] skip` entry: `{ crate = "NAME@VERSION", reason = "..." }`, or the bare
/// `"NAME@VERSION"` cargo-deny also takes, which these checks refuse for giving no reason.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Skip {
    Entry {
        #[serde(rename = "crate")]
        krate: String,
        #[serde(default)]
        reason: String,
    },
    Bare(String),
}

/// deny.toml at the root of the workspace.
fn deny_toml() -> DenyToml {
    let text = std::fs::read_to_string(project_root().join("deny.toml")).expect("deny.toml is at the root");
    parse_deny_toml(&text).unwrap_or_else(|e| panic!("deny.toml: {e}"))
}

fn parse_deny_toml(text: &str) -> Result<DenyToml, toml::de::Error> {
    toml::from_str(text)
}

/// Whether an SPDX licence expression is satisfied by the allowed licences, as cargo-deny
/// decides it: `OR` needs one side, `AND` both, `WITH` names a licence with its exception
/// (allowed only as written, `Apache-2.0 WITH LLVM-exception`); the old `/` separator and other
/// spellings crates.io still holds read leniently (`spdx`'s lax mode). An expression that does
/// not parse is an error naming why.
fn licence_allowed(expression: &str, allowed: &[String]) -> Result<bool, String> {
    let licensees = allowed
        .iter()
        .map(|licence| {
            spdx::Licensee::parse(licence).map_err(|e| format!("deny.toml allows {licence:?}: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let expression =
        spdx::Expression::parse_mode(expression, spdx::ParseMode::LAX).map_err(|e| e.to_string())?;
    Ok(expression.evaluate(|requirement| licensees.iter().any(|licensee| licensee.satisfies(requirement))))
}

/// The packages ((name, version, licence)) whose licence deny.toml's allow-list does not cover,
/// one line each, with the reason when the licence does not read as SPDX.
fn refused_licences(packages: &[(String, String, String)], allowed: &[String]) -> Vec<String> {
    let mut refused = Vec::new();
    for (name, version, licence) in packages {
        match licence_allowed(licence, allowed) {
            Ok(true) => {}
            Ok(false) => refused.push(format!("{name} {version}: {licence}")),
            Err(error) => {
                refused.push(format!("{name} {version}: {licence:?} does not read as SPDX ({error})"))
            }
        }
    }
    refused
}

/// The `[bans] skip` entries as (name, version); an entry without a `crate`, a reason or a
/// version fails naming it.
fn skips(deny: &DenyToml) -> Vec<(String, String)> {
    deny.bans
        .skip
        .iter()
        .map(|entry| {
            let (krate, reason) = match entry {
                Skip::Entry { krate, reason } => (krate, reason),
                Skip::Bare(entry) => panic!("deny.toml skip without `crate`: {entry}"),
            };
            assert!(reason.len() > 5, "deny.toml skip of {krate} gives no reason");
            let (name, version) =
                krate.split_once('@').unwrap_or_else(|| panic!("deny.toml skip {krate} is not NAME@VERSION"));
            (name.to_owned(), version.to_owned())
        })
        .collect()
}

/// What Cargo.lock reads as: its packages' names and versions.
#[derive(Debug, Deserialize)]
struct CargoLock {
    #[serde(default)]
    package: Vec<LockedPackage>,
}

#[derive(Debug, Deserialize)]
struct LockedPackage {
    name: String,
    version: String,
}

/// The crates packages ((name, version, licence)) holds in more than one version, but for the
/// versions `skips` names: one line each, with every version.
fn duplicated(packages: &[(String, String, String)], skips: &[(String, String)]) -> Vec<String> {
    let mut versions: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, version, _) in packages {
        versions.entry(name).or_default().push(version);
    }
    let mut duplicated = Vec::new();
    for (name, list) in versions {
        let kept: Vec<&&str> =
            list.iter().filter(|v| !skips.iter().any(|(n, skipped)| n == name && skipped == **v)).collect();
        if kept.len() > 1 {
            duplicated.push(format!("{name}: {}", list.join(", ")));
        }
    }
    duplicated
}

#[test]
fn licence_expressions_are_read_as_spdx_reads_them() {
    let allowed = vec!["MIT".to_owned(), "Apache-2.0".to_owned(), "Unicode-3.0".to_owned()];
    for (expression, expected) in [
        ("MIT", true),
        ("GPL-3.0", false),
        ("MIT OR GPL-3.0", true),
        ("GPL-3.0 OR LGPL-2.1-or-later", false),
        ("(MIT OR Apache-2.0) AND Unicode-3.0", true),
        ("(MIT OR Apache-2.0) AND BSD-3-Clause", false),
        ("Apache-2.0 WITH LLVM-exception", false),
        ("Apache-2.0 WITH LLVM-exception OR Apache-2.0 OR MIT", true),
        ("MIT/Apache-2.0", true),
        ("Unlicense/GPL-3.0", false),
    ] {
        assert_eq!(licence_allowed(expression, &allowed), Ok(expected), "{expression}");
    }
    assert!(licence_allowed("MIT OR", &allowed).is_err());
    assert!(licence_allowed("(MIT", &allowed).is_err());
    assert!(licence_allowed("MIT Apache-2.0", &allowed).is_err());
}

/// Every dependency a build of ours can pull in (every feature, this machine's target) is
/// licensed under deny.toml's allow-list.
#[test]
fn dependency_licences_are_on_the_allow_list() {
    let allowed = deny_toml().licenses.allow;
    assert!(!allowed.is_empty(), "deny.toml has no [licenses] allow list");
    let refused = refused_licences(&tree(&["--workspace", "--all-features", "-e", "normal,build"]), &allowed);
    assert!(
        refused.is_empty(),
        "licences outside deny.toml's [licenses] allow (add one there with the reason, or drop the dependency):\n{}",
        refused.join("\n")
    );
}

/// No crate is built in two versions unless deny.toml's `[bans] skip` names the older ones with a
/// reason; and every skip still names a locked package, so the list does not outlive its reasons.
#[test]
fn no_duplicate_dependency_versions_but_the_skipped() {
    let skips = skips(&deny_toml());
    assert!(!skips.is_empty(), "deny.toml has no [bans] skip list");
    let lock = std::fs::read_to_string(project_root().join("Cargo.lock")).expect("Cargo.lock");
    let lock: CargoLock = toml::from_str(&lock).unwrap_or_else(|e| panic!("Cargo.lock: {e}"));
    for (name, version) in &skips {
        assert!(
            lock.package.iter().any(|p| p.name == *name && p.version == *version),
            "deny.toml skips {name}@{version}, which Cargo.lock no longer holds"
        );
    }
    let duplicated = duplicated(&tree(&["--workspace", "--all-features", "-e", "normal,build"]), &skips);
    assert!(
        duplicated.is_empty(),
        "crates built in more than one version (align the dependencies, or add the older to deny.toml's [bans] skip with the reason):\n{}",
        duplicated.join("\n")
    );
}

/// A small deny.toml, as the checks read it.
const DENY_TOML: &str = r#"
[licenses]
allow = [
    "MIT",
    "Apache-2.0", # with a comment, as ours has
]

[bans]
skip = [
    { crate = "base64@0.13.1", reason = "an old tokenizer pins it" },
]
"#;

fn package(name: &str, version: &str, licence: &str) -> (String, String, String) {
    (name.to_owned(), version.to_owned(), licence.to_owned())
}

#[test]
fn a_licence_deny_toml_does_not_allow_is_refused() {
    let allowed = parse_deny_toml(DENY_TOML).expect("the test deny.toml").licenses.allow;
    assert_eq!(allowed, ["MIT", "Apache-2.0"]);
    let packages = [
        package("fine", "1.0.0", "MIT OR Apache-2.0"),
        package("copyleft", "2.0.0", "GPL-3.0-only"),
        package("half", "0.1.0", "MIT AND MPL-2.0"),
        package("garbled", "0.2.0", "MIT OR OR Apache-2.0"),
    ];
    let refused = refused_licences(&packages, &allowed);
    assert_eq!(refused.len(), 3, "{refused:?}");
    assert_eq!(refused[0], "copyleft 2.0.0: GPL-3.0-only");
    assert_eq!(refused[1], "half 0.1.0: MIT AND MPL-2.0");
    assert!(
        refused[2].starts_with("garbled 0.2.0: \"MIT OR OR Apache-2.0\" does not read as SPDX ("),
        "{refused:?}"
    );
    // A misspelt licence in the allow-list itself is named.
    let error = licence_allowed("MIT", &["MTI".to_owned()]).expect_err("MTI is no licence");
    assert!(error.starts_with("deny.toml allows \"MTI\""), "{error}");
}

#[test]
fn a_second_version_not_skipped_is_refused() {
    let skips = skips(&parse_deny_toml(DENY_TOML).expect("the test deny.toml"));
    assert_eq!(skips, [("base64".to_owned(), "0.13.1".to_owned())]);
    let skipped = [package("base64", "0.13.1", "MIT"), package("base64", "0.22.1", "MIT")];
    assert!(duplicated(&skipped, &skips).is_empty());
    let twice = [
        package("base64", "0.13.1", "MIT"),
        package("base64", "0.22.1", "MIT"),
        package("itertools", "0.14.0", "MIT"),
        package("itertools", "0.15.0", "MIT"),
    ];
    assert_eq!(duplicated(&twice, &skips), ["itertools: 0.14.0, 0.15.0"]);
}

#[test]
#[should_panic(expected = "deny.toml skip of itertools@0.14.0 gives no reason")]
fn a_skip_without_a_reason_is_refused() {
    let deny =
        parse_deny_toml("[licenses]\n[bans]\nskip = [{ crate = \"itertools@0.14.0\" }]\n").expect("TOML");
    skips(&deny);
}

#[test]
#[should_panic(expected = "deny.toml skip without `crate`: itertools@0.14.0")]
fn a_bare_skip_is_refused() {
    let deny = parse_deny_toml("[licenses]\n[bans]\nskip = [\"itertools@0.14.0\"]\n").expect("TOML");
    skips(&deny);
}
