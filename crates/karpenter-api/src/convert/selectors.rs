//! v1alpha1 selector maps -> selector terms.
//!
//! Rules (upstream `karpenter-convert`): `aws-ids` / `aws::ids` become one `id` term per
//! comma-separated, trimmed id (and win over every other key); for AMIs `aws::name` becomes
//! `name` and `aws::owners` becomes `owner`; every other key is a tag whose comma-separated
//! values are alternatives, so the terms are the cartesian product of all alternatives
//! (terms are ORed, fields within a term ANDed).

use std::collections::BTreeMap;

use crate::v1::ec2nodeclass::{AmiSelectorTerm, SecurityGroupSelectorTerm, SubnetSelectorTerm};

use super::Notes;

const IDS_KEYS: &[&str] = &["aws-ids", "aws::ids"];
const AMI_NAME: &str = "aws::name";
const AMI_OWNERS: &str = "aws::owners";

fn split(values: &str) -> Vec<String> {
    values
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The ids of an `aws-ids`/`aws::ids` key, warning about keys they override.
fn ids(selector: &BTreeMap<String, String>, field: &str, notes: &mut Notes) -> Option<Vec<String>> {
    let ids: Vec<String> = IDS_KEYS
        .iter()
        .filter_map(|k| selector.get(*k))
        .flat_map(|v| split(v))
        .collect();
    if ids.is_empty() {
        return None;
    }
    for key in selector.keys().filter(|k| !IDS_KEYS.contains(&k.as_str())) {
        notes.warn(
            format!("{field}[{key}]"),
            "dropped: in v1 an id selector term cannot be combined with other fields, and the ids already select exactly",
        );
    }
    Some(ids)
}

/// Expands `key: "a,b"` tag entries into the cartesian product of single-valued tag maps.
fn tag_product<'a>(
    entries: impl Iterator<Item = (&'a String, &'a String)>,
) -> Vec<BTreeMap<String, String>> {
    let mut terms = vec![BTreeMap::new()];
    for (key, values) in entries {
        let alternatives = split(values);
        let alternatives = if alternatives.is_empty() {
            vec![values.clone()]
        } else {
            alternatives
        };
        terms = terms
            .into_iter()
            .flat_map(|term| {
                alternatives.iter().map(move |v| {
                    let mut next = term.clone();
                    next.insert(key.clone(), v.clone());
                    next
                })
            })
            .collect();
    }
    terms
}

fn non_empty(tags: BTreeMap<String, String>) -> Option<BTreeMap<String, String>> {
    (!tags.is_empty()).then_some(tags)
}

/// A selector term kind: what an id or a tag map alone makes of it.
trait Term: Default {
    fn with_id(id: String) -> Self;
    fn with_tags(tags: BTreeMap<String, String>) -> Self;
}

macro_rules! term {
    ($($kind:ty),*) => {$(
        impl Term for $kind {
            fn with_id(id: String) -> Self {
                Self { id: Some(id), ..Default::default() }
            }
            fn with_tags(tags: BTreeMap<String, String>) -> Self {
                Self { tags: non_empty(tags), ..Default::default() }
            }
        }
    )*};
}

term!(
    SubnetSelectorTerm,
    SecurityGroupSelectorTerm,
    AmiSelectorTerm
);

/// The rules every kind shares: the ids' terms when the selector has ids, none when it is
/// empty, else `rest` (the tag product, for AMIs with names and owners).
fn terms<T: Term>(
    selector: &BTreeMap<String, String>,
    field: &str,
    notes: &mut Notes,
    rest: impl FnOnce(&BTreeMap<String, String>) -> Vec<T>,
) -> Vec<T> {
    if let Some(ids) = ids(selector, field, notes) {
        return ids.into_iter().map(T::with_id).collect();
    }
    if selector.is_empty() {
        return Vec::new();
    }
    rest(selector)
}

/// One term per combination of the tags' alternatives.
fn tag_terms<T: Term>(selector: &BTreeMap<String, String>) -> Vec<T> {
    tag_product(selector.iter())
        .into_iter()
        .map(T::with_tags)
        .collect()
}

pub(crate) fn subnet_terms(
    selector: &BTreeMap<String, String>,
    field: &str,
    notes: &mut Notes,
) -> Vec<SubnetSelectorTerm> {
    terms(selector, field, notes, tag_terms)
}

pub(crate) fn security_group_terms(
    selector: &BTreeMap<String, String>,
    field: &str,
    notes: &mut Notes,
) -> Vec<SecurityGroupSelectorTerm> {
    terms(selector, field, notes, tag_terms)
}

pub(crate) fn ami_terms(
    selector: &BTreeMap<String, String>,
    field: &str,
    notes: &mut Notes,
) -> Vec<AmiSelectorTerm> {
    terms(selector, field, notes, named_ami_terms)
}

/// `aws::name` x `aws::owners` x the other keys' tag product.
fn named_ami_terms(selector: &BTreeMap<String, String>) -> Vec<AmiSelectorTerm> {
    let names = selector.get(AMI_NAME).map(|v| split(v)).unwrap_or_default();
    let owners = selector
        .get(AMI_OWNERS)
        .map(|v| split(v))
        .unwrap_or_default();
    let tags = tag_product(
        selector
            .iter()
            .filter(|(k, _)| k.as_str() != AMI_NAME && k.as_str() != AMI_OWNERS),
    );
    // No value is one alternative: the field left out.
    let alternatives = |values: Vec<String>| -> Vec<Option<String>> {
        if values.is_empty() {
            vec![None]
        } else {
            values.into_iter().map(Some).collect()
        }
    };
    let (names, owners) = (alternatives(names), alternatives(owners));
    let mut out = Vec::new();
    for name in &names {
        for owner in &owners {
            for tags in &tags {
                out.push(AmiSelectorTerm {
                    name: name.clone(),
                    owner: owner.clone(),
                    ..AmiSelectorTerm::with_tags(tags.clone())
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn ids_are_comma_split_and_trimmed_into_one_id_term_each() {
        let mut notes = Notes::default();
        for key in ["aws-ids", "aws::ids"] {
            let terms = subnet_terms(
                &map(&[(key, "subnet-1, subnet-2 ,subnet-3")]),
                "s",
                &mut notes,
            );
            let ids: Vec<_> = terms.iter().filter_map(|t| t.id.as_deref()).collect();
            assert_eq!(ids, ["subnet-1", "subnet-2", "subnet-3"], "{key}");
        }
        assert!(notes.0.is_empty());
    }

    #[test]
    fn ids_win_over_tags_with_a_warning() {
        let mut notes = Notes::default();
        let terms = security_group_terms(
            &map(&[("aws-ids", "sg-1"), ("team", "a")]),
            "spec.securityGroupSelector",
            &mut notes,
        );
        assert_eq!(
            terms,
            vec![SecurityGroupSelectorTerm {
                id: Some("sg-1".into()),
                ..Default::default()
            }]
        );
        assert_eq!(notes.0[0].field, "spec.securityGroupSelector[team]");
    }

    #[test]
    fn comma_separated_tag_values_expand_into_the_cartesian_product_of_terms() {
        let mut notes = Notes::default();
        let terms = subnet_terms(&map(&[("a", "1,2"), ("b", "x, y")]), "s", &mut notes);
        let got: Vec<_> = terms.into_iter().filter_map(|t| t.tags).collect();
        assert_eq!(
            got,
            vec![
                map(&[("a", "1"), ("b", "x")]),
                map(&[("a", "1"), ("b", "y")]),
                map(&[("a", "2"), ("b", "x")]),
                map(&[("a", "2"), ("b", "y")]),
            ]
        );
    }

    #[test]
    fn ami_name_and_owners_become_name_and_owner_terms_with_the_tags_on_each() {
        let mut notes = Notes::default();
        let terms = ami_terms(
            &map(&[
                ("aws::name", "my-ami-*"),
                ("aws::owners", "self, 123456789012"),
                ("env", "prod"),
            ]),
            "s",
            &mut notes,
        );
        assert_eq!(terms.len(), 2);
        for (term, owner) in terms.iter().zip(["self", "123456789012"]) {
            assert_eq!(term.name.as_deref(), Some("my-ami-*"));
            assert_eq!(term.owner.as_deref(), Some(owner));
            assert_eq!(term.tags, Some(map(&[("env", "prod")])));
        }
    }

    #[test]
    fn ami_ids_become_id_terms() {
        let mut notes = Notes::default();
        let terms = ami_terms(&map(&[("aws::ids", "ami-1,ami-2")]), "s", &mut notes);
        let ids: Vec<_> = terms.iter().filter_map(|t| t.id.as_deref()).collect();
        assert_eq!(ids, ["ami-1", "ami-2"]);
    }
}
