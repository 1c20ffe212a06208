//! The public surface: each library crate's count of public items, against a budget raised only
//! on purpose. Growing a crate's API is then a visible line in the same change.

use std::collections::BTreeMap;
use std::path::Path;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};
use syn::{Attribute, ForeignItem, ImplItem, Item, Visibility};

use super::layers::{BESIDE_THE_LAYERS, LAYERS};
use super::{parse_rust, visit};
use crate::project_root;

/// Public items per library crate, as [`count_public_items`] counts them over the crate's `src`.
/// A crate whose count differs fails `public_items_stay_within_their_budget`: raise the number
/// in the change that adds items (and say what they are in CHANGELOG.md), or lower it in the
/// change that removes some, so the next addition is seen.
const PUBLIC_ITEM_BUDGET: &[(&str, usize)] = &[
    ("compaction-json", 56),
    ("compaction-model", 132),
    ("compaction-formats", 52),
    ("compaction-tokens", 56),
    ("compaction-core", 158),
    ("compaction-llm", 81),
    ("compaction-hook", 78),
    ("compaction-offload", 110),
    ("compaction-replay", 49),
    ("compaction-adapters", 40),
    ("compaction-proxy", 21),
    ("compaction-python", 0),
];

/// Counts the items a crate's sources declare plainly `pub`: functions, structs, enums, unions,
/// traits, type aliases, constants, statics and modules, wherever they sit (free, in inherent
/// impls, in `extern` blocks, in function bodies), leaving out `pub(crate)` and narrower,
/// re-exports (`pub use`, which name items counted where they are declared), struct fields,
/// and `#[cfg(test)]` modules.
///
/// The sources are parsed with `syn`, so comments, doc comments and string literals are never
/// read as code. No macro is expanded, but one kind is followed: the `pub` items written in the
/// body of a crate's own `macro_rules!` count once for each invocation of it in item position in
/// the crate (`counter_api!(OpenAITokenCounter, ..)` declaring seven methods of each counter
/// type). Items a macro of another crate generates (a derive) are not the crate's to budget.
///
/// A source count rather than rustdoc's: rustdoc's JSON output needs a nightly toolchain. It
/// also counts a `pub` item inside a private module that nothing re-exports; such an item is
/// one re-export away from the surface, so it belongs in the budget too.
fn count_public_items(files: &[syn::File]) -> usize {
    let mut surface = Surface::default();
    for file in files {
        surface.visit_file(file);
    }
    let from_macros: usize =
        surface.invocations.iter().filter_map(|(name, times)| Some(surface.macros.get(name)? * times)).sum();
    surface.items + from_macros
}

/// The visitor behind [`count_public_items`]: the items counted so far, the crate's
/// `macro_rules!` (name → `pub` items in its body) and its macro invocations in item position
/// (name → how many).
#[derive(Default)]
struct Surface {
    items: usize,
    macros: BTreeMap<String, usize>,
    invocations: BTreeMap<String, usize>,
}

impl Surface {
    fn count(&mut self, vis: &Visibility) {
        if matches!(vis, Visibility::Public(_)) {
            self.items += 1;
        }
    }

    fn invoked(&mut self, mac: &syn::Macro) {
        if let Some(name) = mac.path.get_ident() {
            *self.invocations.entry(name.to_string()).or_default() += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Surface {
    fn visit_item(&mut self, item: &'ast Item) {
        match item {
            Item::Mod(module) if is_cfg_test(&module.attrs) => return,
            Item::Const(i) => self.count(&i.vis),
            Item::Enum(i) => self.count(&i.vis),
            Item::Fn(i) => self.count(&i.vis),
            Item::Mod(i) => self.count(&i.vis),
            Item::Static(i) => self.count(&i.vis),
            Item::Struct(i) => self.count(&i.vis),
            Item::Trait(i) => self.count(&i.vis),
            Item::TraitAlias(i) => self.count(&i.vis),
            Item::Type(i) => self.count(&i.vis),
            Item::Union(i) => self.count(&i.vis),
            Item::Macro(i) if i.mac.path.is_ident("macro_rules") => {
                if let Some(name) = &i.ident {
                    self.macros.insert(name.to_string(), public_items_in_tokens(i.mac.tokens.clone()));
                }
            }
            Item::Macro(i) => self.invoked(&i.mac),
            _ => {}
        }
        visit::visit_item(self, item);
    }

    fn visit_impl_item(&mut self, item: &'ast ImplItem) {
        match item {
            ImplItem::Const(i) => self.count(&i.vis),
            ImplItem::Fn(i) => self.count(&i.vis),
            ImplItem::Type(i) => self.count(&i.vis),
            ImplItem::Macro(i) => self.invoked(&i.mac),
            _ => {}
        }
        visit::visit_impl_item(self, item);
    }

    fn visit_foreign_item(&mut self, item: &'ast ForeignItem) {
        match item {
            ForeignItem::Fn(i) => self.count(&i.vis),
            ForeignItem::Static(i) => self.count(&i.vis),
            ForeignItem::Type(i) => self.count(&i.vis),
            _ => {}
        }
        visit::visit_foreign_item(self, item);
    }
}

/// The plainly `pub` items in a macro body's tokens, which do not parse as items until the
/// macro is expanded: `pub` (not `pub(..)`), the qualifiers `const`, `async`, `unsafe` and
/// `extern "ABI"`, then an item keyword.
fn public_items_in_tokens(tokens: TokenStream) -> usize {
    const KINDS: &[&str] = &["fn", "struct", "enum", "trait", "type", "const", "static", "mod", "union"];
    let word = |tree: Option<&TokenTree>| match tree {
        Some(TokenTree::Ident(ident)) => ident.to_string(),
        _ => String::new(),
    };
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut count = 0;
    for (at, tree) in trees.iter().enumerate() {
        if let TokenTree::Group(group) = tree {
            count += public_items_in_tokens(group.stream());
        }
        if word(Some(tree)) != "pub" {
            continue;
        }
        let mut next = at + 1;
        loop {
            match word(trees.get(next)).as_str() {
                // `const` before `fn` (`pub const unsafe fn`) qualifies; alone it is the item.
                "const"
                    if ["fn", "async", "unsafe", "extern"].contains(&word(trees.get(next + 1)).as_str()) => {}
                "async" | "unsafe" => {}
                "extern" => {
                    // The ABI string (`extern "C" fn`) belongs to the qualifier.
                    if matches!(trees.get(next + 1), Some(TokenTree::Literal(_))) {
                        next += 1;
                    }
                }
                kind => {
                    if KINDS.contains(&kind) {
                        count += 1;
                    }
                    break;
                }
            }
            next += 1;
        }
    }
    count
}

/// Whether the attributes hold `#[cfg(test)]`.
fn is_cfg_test(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg") && attr.parse_args::<syn::Ident>().is_ok_and(|arg| arg == "test")
    })
}

/// The public items of the `.rs` files under `dir` (a crate's `src`), or the files that do not
/// parse.
fn public_items_under(dir: &Path) -> Result<usize, Vec<String>> {
    let mut files = Vec::new();
    let mut unreadable = Vec::new();
    visit(dir, &mut |path| {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        match parse_rust(path, &text) {
            Ok(file) => files.push(file),
            Err(error) => unreadable.push(error),
        }
    });
    if unreadable.is_empty() {
        Ok(count_public_items(&files))
    } else {
        Err(unreadable)
    }
}

/// What is wrong with `counts` ((crate, public items)) against `budgets`: one line a crate whose
/// count is over or under its budget, saying which number to write.
fn budget_mismatches(counts: &[(&str, usize)], budgets: &[(&str, usize)]) -> Vec<String> {
    let mut wrong = Vec::new();
    for &(krate, count) in counts {
        let Some(&(_, budget)) = budgets.iter().find(|(name, _)| *name == krate) else { continue };
        if count > budget {
            wrong.push(format!(
                "{krate}: {count} public items, over its budget of {budget}; if the new items are \
                 meant to be public, raise the budget to {count} in xtask/src/tidy/public_api.rs \
                 and record them in CHANGELOG.md"
            ));
        } else if count < budget {
            wrong.push(format!(
                "{krate}: {count} public items, under its budget of {budget}; lower the budget to \
                 {count} in xtask/src/tidy/public_api.rs so the next addition is seen"
            ));
        }
    }
    wrong
}

#[test]
fn public_items_stay_within_their_budget() {
    let mut counts = Vec::new();
    let mut unreadable = Vec::new();
    for &(krate, _) in PUBLIC_ITEM_BUDGET {
        match public_items_under(&project_root().join("crates").join(krate).join("src")) {
            Ok(count) => counts.push((krate, count)),
            Err(errors) => unreadable.extend(errors),
        }
    }
    assert!(unreadable.is_empty(), "sources tidy cannot read:\n{}", unreadable.join("\n"));
    let wrong = budget_mismatches(&counts, PUBLIC_ITEM_BUDGET);
    assert!(wrong.is_empty(), "public item budget:\n{}", wrong.join("\n"));
}

#[test]
fn every_library_crate_has_a_public_item_budget() {
    for krate in LAYERS.iter().chain(BESIDE_THE_LAYERS.iter().map(|(name, _)| name)) {
        let is_library = project_root().join("crates").join(krate).join("src/lib.rs").exists();
        let exempt = matches!(*krate, "compaction-cli" | "compaction-testkit");
        if is_library && !exempt {
            assert!(
                PUBLIC_ITEM_BUDGET.iter().any(|(name, _)| name == krate),
                "{krate} has no line in PUBLIC_ITEM_BUDGET (xtask/src/tidy/public_api.rs)"
            );
        }
    }
}

fn count(source: &str) -> usize {
    count_public_items(&[syn::parse_file(source).expect("the test source parses")])
}

#[test]
fn public_items_are_counted_as_declared() {
    let source = r#"
//! A crate. `pub fn in_docs()` is not code.
use std::fmt;
pub use inner::Reexported;
pub mod inner {
    pub struct Reexported;
}
/// pub fn documented() {}
pub fn free() -> &'static str { "pub fn in_a_string() {" }
pub(crate) fn crate_only() {}
pub(super) struct Narrow;
pub const fn constant_fn() -> char { '{' }
pub const LIMIT: usize = 3;
pub static NAME: &str = "}";
pub unsafe fn risky<'a>(x: &'a str) -> &'a str { x }
pub async fn later() {}
pub type Alias = u8;
pub trait Trait { fn required(&self); }
pub enum Kind { A, B }
impl Kind {
    pub fn new() -> Self { Kind::A } // pub fn in_a_comment() {}
    fn private() {}
}
#[cfg(test)]
mod tests {
    pub fn helper() {}
    #[test]
    fn works() { if true { pub fn nested() {} } }
}
pub fn after_the_tests() {}
"#;
    // inner, Reexported, free, constant_fn, LIMIT, NAME, risky, later, Alias, Trait, Kind,
    // Kind::new, after_the_tests.
    assert_eq!(count(source), 13);
    assert_eq!(count("pub fn one() {}\npub fn two() {}\n"), 2);
    assert_eq!(count("pub(crate) fn hidden() {}\npub use a::b;\n"), 0);
    // What the line-by-line reading of old missed or took for code: a raw string spanning lines,
    // a block comment, an item after an attribute on its line, a field, a variant.
    let tricky = r##"
const TEXT: &str = r#"
pub fn in_a_raw_string() {}
"#;
/* pub fn in_a_block_comment() {} */
#[inline] pub fn after_an_attribute() {}
pub struct Fields { pub field: u8 }
pub(in crate::a) fn restricted() {}
extern "C" { pub fn foreign(); }
"##;
    // after_an_attribute, Fields, foreign.
    assert_eq!(count(tricky), 3);
}

/// A crate one item over its budget fails, naming the number to write; one under it too.
#[test]
fn a_crate_over_or_under_its_budget_is_named() {
    let budgets = [("compaction-example", 2)];
    let three = count("pub fn a() {}\npub struct B;\npub mod c {}\n");
    assert_eq!(three, 3);
    let over = budget_mismatches(&[("compaction-example", three)], &budgets);
    assert_eq!(over.len(), 1);
    assert!(
        over[0].starts_with("compaction-example: 3 public items, over its budget of 2; if the new items are")
            && over[0].contains("raise the budget to 3"),
        "{over:?}"
    );
    let under = budget_mismatches(&[("compaction-example", 1)], &budgets);
    assert!(under[0].contains("under its budget of 2; lower the budget to 1"), "{under:?}");
    assert!(budget_mismatches(&[("compaction-example", 2)], &budgets).is_empty());
}

/// A crate's own `macro_rules!` that declares `pub` items counts them once per invocation: the
/// items are in the crate's surface as many times as it is expanded.
#[test]
fn public_items_a_macro_declares_count_once_per_invocation() {
    let definition = r#"
macro_rules! api {
    ($ty:ident) => {
        impl $ty {
            pub fn new() -> Self { $ty }
            pub const unsafe fn raw(&self) {}
            pub(crate) fn internal(&self) {}
            fn private(&self) {}
            pub const LIMIT: usize = 1;
            pub extern "C" fn callback() {}
        }
    };
}
"#;
    let invocations = "pub struct A;\npub struct B;\napi!(A);\napi!(B);\nother_crates_macro!(A);\n";
    let files: Vec<syn::File> =
        [definition, invocations].iter().map(|s| syn::parse_file(s).expect("parses")).collect();
    // A and B, and new, raw, LIMIT and callback for each.
    assert_eq!(count_public_items(&files), 2 + 4 * 2);
    // Defined and never invoked: nothing is declared.
    assert_eq!(count(definition), 0);
}
