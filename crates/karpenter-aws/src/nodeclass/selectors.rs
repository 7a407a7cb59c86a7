//! Selector terms into Describe* queries, and what the status keeps of the answers
//! (reference `karpenter-aws.md` 1.3).
//!
//! Terms are ORed, the conditions of one term ANDed. Every id term of a list collapses into
//! one query (`subnet-id`, `group-id`, `image-id`), every security-group name term into one
//! `group-name` query, and each tag term is a query of its own (`tag:<k>=<v>`, or `tag-key=<k>`
//! for the value `*`). Answers are de-duplicated by id.

use std::collections::BTreeMap;

use karpenter_api::v1::EC2NodeClass;
use karpenter_api::v1::ec2nodeclass::{
    AmiSelectorTerm, SecurityGroupSelectorTerm, SecurityGroupStatus, SubnetSelectorTerm,
    SubnetStatus,
};

/// One Describe* filter.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Filter {
    pub name: String,
    pub values: Vec<String>,
}

impl Filter {
    pub fn new(
        name: impl Into<String>,
        values: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Filter {
            name: name.into(),
            values: values.into_iter().map(Into::into).collect(),
        }
    }
}

/// One Describe* call: its filters and, for images, the owners.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    pub filters: Vec<Filter>,
    /// `DescribeImages` `Owners` (empty: any).
    pub owners: Vec<String>,
}

fn tag_filters(tags: Option<&BTreeMap<String, String>>) -> Vec<Filter> {
    tags.into_iter()
        .flatten()
        .map(|(key, value)| {
            if value == "*" {
                Filter::new("tag-key", [key.clone()])
            } else {
                Filter::new(format!("tag:{key}"), [value.clone()])
            }
        })
        .collect()
}

/// One query for the values of every term that has one (`subnet-id`, `group-id`,
/// `image-id`, `group-name`); `None` when no term has.
fn collapsed(filter: &str, values: impl Iterator<Item = Option<String>>) -> Option<Query> {
    let values: Vec<String> = values.flatten().collect();
    (!values.is_empty()).then(|| Query {
        filters: vec![Filter::new(filter, values)],
        owners: Vec::new(),
    })
}

/// The query of a tag term; `None` when it has no tags.
fn tag_query(tags: Option<&BTreeMap<String, String>>) -> Option<Query> {
    let filters = tag_filters(tags);
    (!filters.is_empty()).then(|| Query {
        filters,
        owners: Vec::new(),
    })
}

/// The `DescribeSubnets` queries of the class's `subnetSelectorTerms`.
pub fn subnet_queries(terms: &[SubnetSelectorTerm]) -> Vec<Query> {
    let ids = collapsed("subnet-id", terms.iter().map(|t| t.id.clone()));
    let tagged = terms.iter().filter(|t| t.id.is_none());
    ids.into_iter()
        .chain(tagged.filter_map(|t| tag_query(t.tags.as_ref())))
        .collect()
}

/// The `DescribeSecurityGroups` queries. A term with a name and tags uses only its name, as
/// upstream does.
pub fn security_group_queries(terms: &[SecurityGroupSelectorTerm]) -> Vec<Query> {
    let ids = collapsed("group-id", terms.iter().map(|t| t.id.clone()));
    let without_id = || terms.iter().filter(|t| t.id.is_none());
    let names = collapsed("group-name", without_id().map(|t| t.name.clone()));
    let tagged = without_id().filter(|t| t.name.is_none());
    ids.into_iter()
        .chain(names)
        .chain(tagged.filter_map(|t| tag_query(t.tags.as_ref())))
        .collect()
}

/// The `DescribeImages` queries of the non-alias, non-SSM terms. Every query asks for
/// available images only; a name without an owner looks in the account's own and Amazon's.
pub fn image_queries(terms: &[AmiSelectorTerm]) -> Vec<Query> {
    let available = || Filter::new("state", ["available"]);
    let mut out: Vec<Query> = collapsed("image-id", terms.iter().map(|t| t.id.clone()))
        .map(|mut ids| {
            ids.filters.push(available());
            ids
        })
        .into_iter()
        .collect();
    for term in terms
        .iter()
        .filter(|t| t.id.is_none() && t.alias.is_none() && t.ssm_parameter.is_none())
    {
        let mut filters = Vec::new();
        if let Some(name) = &term.name {
            filters.push(Filter::new("name", [name.clone()]));
        }
        filters.extend(tag_filters(term.tags.as_ref()));
        let owners = match (&term.owner, &term.name) {
            (Some(owner), _) => vec![owner.clone()],
            (None, Some(_)) => vec!["self".to_owned(), "amazon".to_owned()],
            (None, None) => Vec::new(),
        };
        if filters.is_empty() && owners.is_empty() {
            continue;
        }
        filters.push(available());
        out.push(Query { filters, owners });
    }
    out
}

/// A subnet as DescribeSubnets answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subnet {
    pub id: String,
    pub zone: String,
    pub zone_id: Option<String>,
    pub available_ips: i64,
}

/// The status `subnets`: de-duplicated, most free addresses first, then by id.
pub fn subnet_status(found: &[Subnet]) -> Vec<SubnetStatus> {
    let mut by_id: BTreeMap<&str, &Subnet> = BTreeMap::new();
    for subnet in found {
        by_id.insert(subnet.id.as_str(), subnet);
    }
    let mut subnets: Vec<&Subnet> = by_id.into_values().collect();
    subnets.sort_by(|a, b| {
        b.available_ips
            .cmp(&a.available_ips)
            .then_with(|| a.id.cmp(&b.id))
    });
    subnets
        .into_iter()
        .map(|s| SubnetStatus {
            id: s.id.clone(),
            zone: s.zone.clone(),
            zone_id: s.zone_id.clone(),
        })
        .collect()
}

/// The status `securityGroups`: de-duplicated, by id.
pub fn security_group_status(found: &[(String, Option<String>)]) -> Vec<SecurityGroupStatus> {
    let mut by_id: BTreeMap<&str, &Option<String>> = BTreeMap::new();
    for (id, name) in found {
        by_id.insert(id.as_str(), name);
    }
    by_id
        .into_iter()
        .map(|(id, name)| SecurityGroupStatus {
            id: id.to_owned(),
            name: name.clone(),
        })
        .collect()
}

/// The zones of the class's resolved subnets, sorted.
pub fn zones(node_class: &EC2NodeClass) -> Vec<String> {
    let mut zones: Vec<String> = node_class
        .status
        .as_ref()
        .and_then(|s| s.subnets.as_ref())
        .into_iter()
        .flatten()
        .map(|s| s.zone.clone())
        .collect();
    zones.sort();
    zones.dedup();
    zones
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
        )
    }

    #[test]
    fn id_terms_collapse_into_one_query_and_each_tag_term_is_its_own() {
        let terms = vec![
            SubnetSelectorTerm {
                id: Some("subnet-a".into()),
                tags: None,
            },
            SubnetSelectorTerm {
                tags: tags(&[("karpenter.sh/discovery", "demo"), ("tier", "*")]),
                id: None,
            },
            SubnetSelectorTerm {
                id: Some("subnet-b".into()),
                tags: None,
            },
        ];
        let queries = subnet_queries(&terms);
        assert_eq!(
            queries,
            [
                Query {
                    filters: vec![Filter::new("subnet-id", ["subnet-a", "subnet-b"])],
                    owners: vec![],
                },
                Query {
                    filters: vec![
                        Filter::new("tag:karpenter.sh/discovery", ["demo"]),
                        Filter::new("tag-key", ["tier"]),
                    ],
                    owners: vec![],
                },
            ]
        );
    }

    #[test]
    fn a_security_group_term_with_a_name_and_tags_uses_only_the_name() {
        let terms = vec![
            SecurityGroupSelectorTerm {
                name: Some("nodes".into()),
                tags: tags(&[("ignored", "yes")]),
                id: None,
            },
            SecurityGroupSelectorTerm {
                id: Some("sg-1".into()),
                ..Default::default()
            },
            SecurityGroupSelectorTerm {
                tags: tags(&[("karpenter.sh/discovery", "demo")]),
                ..Default::default()
            },
        ];
        let names: Vec<Vec<String>> = security_group_queries(&terms)
            .into_iter()
            .map(|q| q.filters.into_iter().map(|f| f.name).collect())
            .collect();
        assert_eq!(
            names,
            [
                vec!["group-id".to_owned()],
                vec!["group-name".to_owned()],
                vec!["tag:karpenter.sh/discovery".to_owned()],
            ]
        );
    }

    #[test]
    fn image_names_look_in_self_and_amazon_unless_an_owner_is_given() {
        let terms = vec![
            AmiSelectorTerm {
                name: Some("my-ami-*".into()),
                ..Default::default()
            },
            AmiSelectorTerm {
                name: Some("theirs".into()),
                owner: Some("123456789012".into()),
                ..Default::default()
            },
            AmiSelectorTerm {
                alias: Some("al2023@latest".into()),
                ..Default::default()
            },
        ];
        let queries = image_queries(&terms);
        assert_eq!(queries.len(), 2);
        assert_eq!(queries[0].owners, ["self", "amazon"]);
        assert_eq!(queries[1].owners, ["123456789012"]);
        assert!(
            queries
                .iter()
                .all(|q| q.filters.contains(&Filter::new("state", ["available"])))
        );
    }

    #[test]
    fn subnets_are_listed_most_free_addresses_first() {
        let subnet = |id: &str, ips| Subnet {
            id: id.into(),
            zone: "us-west-2a".into(),
            zone_id: Some("usw2-az1".into()),
            available_ips: ips,
        };
        let status = subnet_status(&[
            subnet("subnet-b", 10),
            subnet("subnet-a", 10),
            subnet("subnet-c", 99),
            subnet("subnet-a", 10),
        ]);
        let ids: Vec<&str> = status.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["subnet-c", "subnet-a", "subnet-b"]);
    }
}
