//! EC2NodeClass rules: selector terms, AMI aliases, role/instanceProfile, tags, block devices,
//! network interfaces, metadata options, connection tracking and the kubelet map.

use std::collections::{BTreeMap, HashSet};
use std::sync::LazyLock;

use regex::Regex;

use super::kubelet::validate_kubelet;
use super::{FieldError, Path, Problems};
use crate::v1::EC2NodeClass;
use crate::v1::ec2nodeclass::{
    ALIAS_FAMILIES, AmiFamily, BlockDeviceMapping, InterfaceType, NetworkInterface,
    RESTRICTED_TAG_KEYS, RESTRICTED_TAG_PREFIX, VOLUME_SIZE_PATTERN,
};

fn re(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

static SUBNET_ID: LazyLock<Option<Regex>> = LazyLock::new(|| re("subnet-[0-9a-z]+"));
static SG_ID: LazyLock<Option<Regex>> = LazyLock::new(|| re("sg-[0-9a-z]+"));
static AMI_ID: LazyLock<Option<Regex>> = LazyLock::new(|| re("ami-[0-9a-z]+"));
static CR_ID: LazyLock<Option<Regex>> = LazyLock::new(|| re("^cr-[0-9a-z]+$"));
static PG_ID: LazyLock<Option<Regex>> = LazyLock::new(|| re("^pg-[0-9a-z]+$"));
static OWNER_ID: LazyLock<Option<Regex>> = LazyLock::new(|| re("^[0-9]{12}$"));
static ALIAS: LazyLock<Option<Regex>> = LazyLock::new(|| re("^[a-zA-Z0-9]+@.+$"));
static VOLUME_SIZE: LazyLock<Option<Regex>> = LazyLock::new(|| re(VOLUME_SIZE_PATTERN));
static CLUSTER_TAG: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"^kubernetes\.io/cluster/[0-9A-Za-z][A-Za-z0-9\-_]*$"));

fn matches(re: &Option<Regex>, s: &str) -> bool {
    re.as_ref().is_some_and(|re| re.is_match(s))
}

/// Validates an EC2NodeClass against the CRD rules and the controller's runtime validation.
pub fn validate_ec2nodeclass(nodeclass: &EC2NodeClass) -> Vec<FieldError> {
    let mut p = Problems::default();
    let spec = &nodeclass.spec;
    let path = Path::root().field("spec");

    // Exactly one of role / instanceProfile.
    match (&spec.role, &spec.instance_profile) {
        (Some(_), Some(_)) => {
            p.push(
                &path.field("role"),
                "must specify exactly one of ['role', 'instanceProfile']: both are set",
            );
            p.push(
                &path.field("instanceProfile"),
                "must specify exactly one of ['role', 'instanceProfile']: both are set",
            );
        }
        (None, None) => p.push(
            &path,
            "must specify exactly one of ['role', 'instanceProfile']: neither is set",
        ),
        _ => {}
    }
    if spec.role.as_deref() == Some("") {
        p.push(&path.field("role"), "role cannot be empty");
    }
    if spec.instance_profile.as_deref() == Some("") {
        p.push(
            &path.field("instanceProfile"),
            "instanceProfile cannot be empty",
        );
    }

    validate_subnets(nodeclass, &path.field("subnetSelectorTerms"), &mut p);
    validate_security_groups(nodeclass, &path.field("securityGroupSelectorTerms"), &mut p);
    validate_capacity_reservations(
        nodeclass,
        &path.field("capacityReservationSelectorTerms"),
        &mut p,
    );
    validate_amis(nodeclass, &path, &mut p);

    if let Some(pg) = &spec.placement_group_selector {
        let at = path.field("placementGroupSelector");
        if pg.name.is_some() == pg.id.is_some() {
            p.push(&at, "expected exactly one of ['name', 'id']");
        }
        if pg.name.as_deref() == Some("") {
            p.push(&at.field("name"), "must not be empty");
        }
        if let Some(id) = &pg.id
            && !matches(&PG_ID, id)
        {
            p.push(
                &at.field("id"),
                format!("{id:?} must look like pg-0123abcd"),
            );
        }
    }
    if let Some(count) = spec.ip_prefix_count
        && count < 0
    {
        p.push(
            &path.field("ipPrefixCount"),
            format!("must be non-negative, found {count}"),
        );
    }
    if let Some(tags) = &spec.tags {
        validate_tags(tags, &path.field("tags"), &mut p);
    }
    if let Some(bdms) = &spec.block_device_mappings {
        validate_block_devices(bdms, &path.field("blockDeviceMappings"), &mut p);
    }
    if let Some(nics) = &spec.network_interfaces {
        validate_network_interfaces(nics, &path.field("networkInterfaces"), &mut p);
    }
    if let Some(md) = &spec.metadata_options
        && !(1..=64).contains(&md.http_put_response_hop_limit)
    {
        p.push(
            &path
                .field("metadataOptions")
                .field("httpPutResponseHopLimit"),
            format!(
                "must be between 1 and 64, found {}",
                md.http_put_response_hop_limit
            ),
        );
    }
    if let Some(ct) = &spec.connection_tracking {
        let at = path.field("connectionTracking");
        if ct.tcp_established_timeout.is_none()
            && ct.udp_stream_timeout.is_none()
            && ct.udp_timeout.is_none()
        {
            p.push(
                &at,
                "at least one of tcpEstablishedTimeout, udpStreamTimeout, udpTimeout must be set",
            );
        }
        for (field, value, lo, hi) in [
            (
                "tcpEstablishedTimeout",
                ct.tcp_established_timeout,
                60,
                432_000,
            ),
            ("udpStreamTimeout", ct.udp_stream_timeout, 60, 180),
            ("udpTimeout", ct.udp_timeout, 30, 60),
        ] {
            if let Some(v) = value
                && !(lo..=hi).contains(&v)
            {
                p.push(
                    &at.field(field),
                    format!("must be between {lo} and {hi} seconds, found {v}"),
                );
            }
        }
    }
    if let Some(kubelet) = &spec.kubelet {
        validate_kubelet(kubelet, spec.resolved_ami_family(), &mut p);
    }
    p.into_vec()
}

fn check_selector_tags(tags: &Option<BTreeMap<String, String>>, at: &Path, p: &mut Problems) {
    let Some(tags) = tags else { return };
    if tags.len() > 20 {
        p.push(
            at,
            format!("at most 20 tags are allowed, found {}", tags.len()),
        );
    }
    if tags.iter().any(|(k, v)| k.is_empty() || v.is_empty()) {
        p.push(at, "empty tag keys or values aren't supported");
    }
}

fn check_term_count(len: usize, name: &str, at: &Path, p: &mut Problems) {
    if len == 0 {
        p.push(at, format!("{name} cannot be empty"));
    }
    if len > 30 {
        p.push(at, format!("at most 30 {name} are allowed, found {len}"));
    }
}

fn validate_subnets(nc: &EC2NodeClass, path: &Path, p: &mut Problems) {
    let terms = &nc.spec.subnet_selector_terms;
    check_term_count(terms.len(), "subnetSelectorTerms", path, p);
    for (i, term) in terms.iter().enumerate() {
        let at = path.index(i);
        match (&term.tags, &term.id) {
            (None, None) => p.push(&at, "expected at least one, got none, ['tags', 'id']"),
            (Some(_), Some(_)) => p.push(&at, "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"),
            _ => {}
        }
        check_selector_tags(&term.tags, &at.field("tags"), p);
        if let Some(id) = &term.id
            && !matches(&SUBNET_ID, id)
        {
            p.push(
                &at.field("id"),
                format!("{id:?} must look like subnet-0123abcd"),
            );
        }
    }
}

fn validate_security_groups(nc: &EC2NodeClass, path: &Path, p: &mut Problems) {
    let terms = &nc.spec.security_group_selector_terms;
    check_term_count(terms.len(), "securityGroupSelectorTerms", path, p);
    for (i, term) in terms.iter().enumerate() {
        let at = path.index(i);
        let set = [term.tags.is_some(), term.id.is_some(), term.name.is_some()];
        if set.iter().all(|s| !s) {
            p.push(
                &at,
                "expected at least one, got none, ['tags', 'id', 'name']",
            );
        }
        if term.id.is_some() && (term.tags.is_some() || term.name.is_some()) {
            p.push(&at, "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term");
        }
        if term.name.is_some() && term.tags.is_some() {
            p.push(&at, "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term");
        }
        check_selector_tags(&term.tags, &at.field("tags"), p);
        if let Some(id) = &term.id
            && !matches(&SG_ID, id)
        {
            p.push(
                &at.field("id"),
                format!("{id:?} must look like sg-0123abcd"),
            );
        }
    }
}

fn validate_capacity_reservations(nc: &EC2NodeClass, path: &Path, p: &mut Problems) {
    let Some(terms) = &nc.spec.capacity_reservation_selector_terms else {
        return;
    };
    if terms.len() > 30 {
        p.push(
            path,
            format!(
                "at most 30 capacityReservationSelectorTerms are allowed, found {}",
                terms.len()
            ),
        );
    }
    for (i, term) in terms.iter().enumerate() {
        let at = path.index(i);
        if term.tags.is_none() && term.id.is_none() && term.instance_match_criteria.is_none() {
            p.push(
                &at,
                "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",
            );
        }
        if term.id.is_some()
            && (term.tags.is_some()
                || term.owner_id.is_some()
                || term.instance_match_criteria.is_some())
        {
            p.push(&at, "'id' is mutually exclusive, cannot be set with a combination of other fields in a capacity reservation selector term");
        }
        check_selector_tags(&term.tags, &at.field("tags"), p);
        if let Some(id) = &term.id
            && !matches(&CR_ID, id)
        {
            p.push(
                &at.field("id"),
                format!("{id:?} must look like cr-0123abcd"),
            );
        }
        if let Some(owner) = &term.owner_id
            && !matches(&OWNER_ID, owner)
        {
            p.push(
                &at.field("ownerID"),
                format!("{owner:?} must be a 12-digit AWS account ID"),
            );
        }
    }
}

fn validate_amis(nc: &EC2NodeClass, spec_path: &Path, p: &mut Problems) {
    let spec = &nc.spec;
    let path = spec_path.field("amiSelectorTerms");
    let terms = &spec.ami_selector_terms;
    check_term_count(terms.len(), "amiSelectorTerms", &path, p);
    let mut alias_family = None;
    for (i, term) in terms.iter().enumerate() {
        let at = path.index(i);
        let others = term.tags.is_some() || term.name.is_some() || term.owner.is_some();
        if term.tags.is_none()
            && term.id.is_none()
            && term.name.is_none()
            && term.alias.is_none()
            && term.ssm_parameter.is_none()
        {
            p.push(
                &at,
                "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
            );
        }
        if term.id.is_some() && (term.alias.is_some() || others) {
            p.push(&at, "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms");
        }
        check_selector_tags(&term.tags, &at.field("tags"), p);
        if let Some(id) = &term.id
            && !matches(&AMI_ID, id)
        {
            p.push(
                &at.field("id"),
                format!("{id:?} must look like ami-0123abcd"),
            );
        }
        let Some(alias) = &term.alias else { continue };
        let alias_path = at.field("alias");
        if term.id.is_some() || others {
            p.push(&at, "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms");
        }
        if terms.len() != 1 {
            p.push(&alias_path, "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms");
        }
        if alias.len() > 30 {
            p.push(&alias_path, "must be at most 30 characters");
        }
        if !matches(&ALIAS, alias) {
            p.push(
                &alias_path,
                format!("{alias:?} must have the form family@version, e.g. al2023@latest"),
            );
            continue;
        }
        let (family, version) = alias.split_once('@').unwrap_or((alias, ""));
        let lower = family.to_ascii_lowercase();
        if family != lower && ALIAS_FAMILIES.contains(&lower.as_str()) {
            p.push(
                &alias_path,
                format!("family {family:?} must be lower case: use {:?} (`karpenter convert` lower-cases it)", format!("{lower}@{version}")),
            );
            continue;
        }
        let family = lower;
        if !ALIAS_FAMILIES.contains(&family.as_str()) {
            p.push(
                &alias_path,
                "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'",
            );
        } else if family.starts_with("windows") && version != "latest" {
            p.push(
                &alias_path,
                "windows families may only specify version 'latest'",
            );
        }
        alias_family = AmiFamily::from_alias_family(&family);
    }
    let has_alias = terms.iter().any(|t| t.alias.is_some());
    match spec.ami_family {
        None if !has_alias => p.push(
            &spec_path.field("amiFamily"),
            "amiFamily must be set if amiSelectorTerms does not contain an alias",
        ),
        Some(family) if family != AmiFamily::Custom => {
            if let Some(alias_family) = alias_family
                && alias_family != family
            {
                p.push(
                    &spec_path.field("amiFamily"),
                    format!(
                        "amiFamily {} must be 'Custom' or match the alias family ({})",
                        family.as_str(),
                        alias_family.as_str()
                    ),
                );
            }
        }
        _ => {}
    }
}

fn validate_tags(tags: &BTreeMap<String, String>, path: &Path, p: &mut Problems) {
    for key in tags.keys() {
        let at = path.key(key);
        if key.is_empty() {
            p.push(path, "empty tag keys aren't supported");
        } else if RESTRICTED_TAG_KEYS.contains(&key.as_str()) {
            p.push(
                &at,
                format!("tag contains a restricted tag matching {key} (Karpenter sets it)"),
            );
        } else if key.starts_with(RESTRICTED_TAG_PREFIX) || matches(&CLUSTER_TAG, key) {
            p.push(
                &at,
                "tag contains a restricted tag matching kubernetes.io/cluster/ (Karpenter sets it)",
            );
        }
    }
}

fn validate_block_devices(bdms: &[BlockDeviceMapping], path: &Path, p: &mut Problems) {
    if bdms.len() > 50 {
        p.push(
            path,
            format!(
                "at most 50 blockDeviceMappings are allowed, found {}",
                bdms.len()
            ),
        );
    }
    if bdms.iter().filter(|b| b.root_volume).count() > 1 {
        p.push(
            path,
            "must have only one blockDeviceMappings with rootVolume",
        );
    }
    for (i, bdm) in bdms.iter().enumerate() {
        let Some(ebs) = &bdm.ebs else { continue };
        let at = path.index(i).field("ebs");
        if ebs.snapshot_id.is_none() && ebs.volume_size.is_none() {
            p.push(&at, "snapshotID or volumeSize must be defined");
        }
        if let Some(rate) = ebs.volume_initialization_rate {
            if ebs.snapshot_id.is_none() {
                p.push(
                    &at.field("volumeInitializationRate"),
                    "volumeInitializationRate requires snapshotID",
                );
            }
            if !(100..=300).contains(&rate) {
                p.push(
                    &at.field("volumeInitializationRate"),
                    format!("must be between 100 and 300 MiB/s, found {rate}"),
                );
            }
        }
        if let Some(size) = &ebs.volume_size
            && !matches(&VOLUME_SIZE, &size.0)
        {
            p.push(
                &at.field("volumeSize"),
                format!("{:?} must be 1-59000Gi, 1-64000G, 1-58Ti or 1-64T", size.0),
            );
        }
        for (field, value) in [("iops", ebs.iops), ("throughput", ebs.throughput)] {
            if let Some(v) = value
                && v < 0
            {
                p.push(&at.field(field), format!("must be non-negative, found {v}"));
            }
        }
    }
}

fn validate_network_interfaces(nics: &[NetworkInterface], path: &Path, p: &mut Problems) {
    if nics.len() > 150 {
        p.push(
            path,
            format!(
                "at most 150 networkInterfaces are allowed, found {}",
                nics.len()
            ),
        );
    }
    if !nics.iter().any(|n| {
        n.network_card_index == 0
            && n.device_index == 0
            && n.interface_type == InterfaceType::Interface
    }) {
        p.push(path, "networkInterfaces must contain a primary interface (networkCardIndex 0, deviceIndex 0, interfaceType interface)");
    }
    let mut pairs = HashSet::new();
    let mut efa_cards = HashSet::new();
    for (i, nic) in nics.iter().enumerate() {
        let at = path.index(i);
        if nic.network_card_index < 0 {
            p.push(&at.field("networkCardIndex"), "must be non-negative");
        }
        if nic.device_index < 0 {
            p.push(&at.field("deviceIndex"), "must be non-negative");
        }
        if !pairs.insert((nic.network_card_index, nic.device_index)) {
            p.push(
                &at,
                "networkInterfaces must have unique (networkCardIndex, deviceIndex) pairs",
            );
        }
        if nic.interface_type == InterfaceType::EfaOnly && !efa_cards.insert(nic.network_card_index)
        {
            p.push(&at, "at most one efa-only interface per network card");
        }
    }
}
