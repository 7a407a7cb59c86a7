//! AMIs of an EC2NodeClass: which SSM parameters an alias reads, what each image may run
//! (its requirements), which images the status keeps, and which AMI each instance type
//! launches with (reference `karpenter-aws.md` 1.4).
//!
//! The shell reads the parameters and describes the images; everything it decides on is here.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use karpenter_api::labels;
use karpenter_api::v1::ec2nodeclass::AmiStatus;
use karpenter_api::v1::{AmiFamily, NodeSelectorRequirementWithMinValues, Operator};
use karpenter_scheduling::RequirementSpec;

/// An alias that cannot be resolved for this cluster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AliasError {
    #[error("spec.amiSelectorTerms[{index}].alias: {alias:?} is not family@version")]
    Malformed { index: usize, alias: String },
    #[error(
        "spec.amiSelectorTerms[{index}].alias: unknown family {family:?} (al2, al2023, bottlerocket, windows2019, windows2022, windows2025)"
    )]
    UnknownFamily { index: usize, family: String },
    #[error(
        "spec.amiSelectorTerms[{index}].alias: AL2 is not published for Kubernetes {k8s} (1.33 and later); use al2023"
    )]
    Al2Deprecated { index: usize, k8s: String },
    #[error(
        "spec.amiSelectorTerms[{index}].alias: Windows Server 2025 needs Kubernetes 1.35 or later, the cluster runs {k8s}"
    )]
    Windows2025Unsupported { index: usize, k8s: String },
    #[error(
        "spec.amiSelectorTerms[{index}].alias: {family} only has version latest, not {version:?}"
    )]
    WindowsPinned {
        index: usize,
        family: String,
        version: String,
    },
}

impl AliasError {
    /// The `AMIsReady=False` reason.
    pub fn reason(&self) -> &'static str {
        match self {
            AliasError::Al2Deprecated { .. } | AliasError::Windows2025Unsupported { .. } => {
                "UnsupportedAlias"
            }
            _ => "InvalidAlias",
        }
    }
}

/// The image variants an EKS-optimized family publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Variant {
    /// No GPU, no accelerator.
    Standard,
    /// NVIDIA GPUs.
    Nvidia,
    /// AWS Neuron accelerators.
    Neuron,
}

impl Variant {
    /// What instance types an image of this variant may run on.
    pub fn requirements(self) -> Vec<NodeSelectorRequirementWithMinValues> {
        match self {
            Variant::Standard => vec![
                requirement(
                    labels::INSTANCE_ACCELERATOR_COUNT,
                    Operator::DoesNotExist,
                    &[],
                ),
                requirement(labels::INSTANCE_GPU_COUNT, Operator::DoesNotExist, &[]),
            ],
            Variant::Nvidia => vec![requirement(
                labels::INSTANCE_GPU_COUNT,
                Operator::Exists,
                &[],
            )],
            Variant::Neuron => vec![requirement(
                labels::INSTANCE_ACCELERATOR_COUNT,
                Operator::Exists,
                &[],
            )],
        }
    }
}

fn requirement(
    key: &str,
    operator: Operator,
    values: &[&str],
) -> NodeSelectorRequirementWithMinValues {
    NodeSelectorRequirementWithMinValues {
        key: key.to_owned(),
        operator,
        values: values.iter().map(|v| (*v).to_owned()).collect(),
        min_values: None,
    }
}

/// One SSM parameter an alias reads, and what the image it names may run on (beyond its
/// architecture, which comes from the image).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasParameter {
    pub path: String,
    /// One image serves every listed variant (the AL2 GPU image serves NVIDIA and Neuron).
    pub variants: Vec<Variant>,
    /// Windows: `kubernetes.io/os` and `node.kubernetes.io/windows-build`.
    pub extra: Vec<NodeSelectorRequirementWithMinValues>,
}

/// A parsed alias: `al2023@latest`, `bottlerocket@v1.40.0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alias {
    pub family: AmiFamily,
    /// `latest`, or the pinned release as written (a leading `v` kept).
    pub version: String,
}

impl Alias {
    /// Parses the alias of term `index`.
    pub fn parse(index: usize, alias: &str) -> Result<Alias, AliasError> {
        let Some((family, version)) = alias.split_once('@') else {
            return Err(AliasError::Malformed {
                index,
                alias: alias.to_owned(),
            });
        };
        if family.is_empty() || version.is_empty() {
            return Err(AliasError::Malformed {
                index,
                alias: alias.to_owned(),
            });
        }
        let Some(family) = AmiFamily::from_alias_family(family) else {
            return Err(AliasError::UnknownFamily {
                index,
                family: family.to_owned(),
            });
        };
        Ok(Alias {
            family,
            version: version.to_owned(),
        })
    }

    /// Whether the parameters move as new images are published (`latest`).
    pub fn is_mutable(&self) -> bool {
        self.version == "latest"
            || matches!(
                self.family,
                AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025
            )
    }
}

/// The Kubernetes minor version as SSM paths spell it (`1.36`), from a version such as
/// `v1.36.3` or `1.36`.
pub fn k8s_minor(version: &str) -> Option<String> {
    let trimmed = version.trim().trim_start_matches('v');
    let mut parts = trimmed.split('.');
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: String = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let minor: u32 = minor.parse().ok()?;
    Some(format!("{major}.{minor}"))
}

fn minor_number(k8s: &str) -> u32 {
    k8s.split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap_or(0)
}

/// The SSM parameters the alias of term `index` reads for Kubernetes `k8s` (`1.36`).
pub fn alias_parameters(
    index: usize,
    alias: &Alias,
    k8s: &str,
) -> Result<Vec<AliasParameter>, AliasError> {
    let eks = format!("/aws/service/eks/optimized-ami/{k8s}");
    let latest = alias.version == "latest";
    let plain = |path: String, variants: &[Variant]| AliasParameter {
        path,
        variants: variants.to_vec(),
        extra: Vec::new(),
    };
    Ok(match alias.family {
        AmiFamily::AL2 => {
            if minor_number(k8s) >= 33 {
                return Err(AliasError::Al2Deprecated {
                    index,
                    k8s: k8s.to_owned(),
                });
            }
            let release = |prefix: &str| {
                if latest {
                    "recommended".to_owned()
                } else {
                    format!("{prefix}-{k8s}-{}", alias.version)
                }
            };
            vec![
                plain(
                    format!(
                        "{eks}/amazon-linux-2/{}/image_id",
                        release("amazon-eks-node")
                    ),
                    &[Variant::Standard],
                ),
                plain(
                    format!(
                        "{eks}/amazon-linux-2-arm64/{}/image_id",
                        release("amazon-eks-arm64-node")
                    ),
                    &[Variant::Standard],
                ),
                plain(
                    format!(
                        "{eks}/amazon-linux-2-gpu/{}/image_id",
                        release("amazon-eks-gpu-node")
                    ),
                    &[Variant::Nvidia, Variant::Neuron],
                ),
            ]
        }
        AmiFamily::AL2023 => {
            let mut out = Vec::new();
            for (arch, variants) in [
                (
                    "x86_64",
                    &[Variant::Standard, Variant::Nvidia, Variant::Neuron][..],
                ),
                ("arm64", &[Variant::Standard, Variant::Nvidia][..]),
            ] {
                for variant in variants {
                    let name = match variant {
                        Variant::Standard => "standard",
                        Variant::Nvidia => "nvidia",
                        Variant::Neuron => "neuron",
                    };
                    let release = if latest {
                        "recommended".to_owned()
                    } else {
                        format!(
                            "amazon-eks-node-al2023-{arch}-{name}-{k8s}-{}",
                            alias.version
                        )
                    };
                    out.push(plain(
                        format!("{eks}/amazon-linux-2023/{arch}/{name}/{release}/image_id"),
                        &[*variant],
                    ));
                }
            }
            out
        }
        AmiFamily::Bottlerocket => {
            let version = if latest {
                "latest".to_owned()
            } else {
                alias.version.trim_start_matches('v').to_owned()
            };
            let base = "/aws/service/bottlerocket";
            vec![
                plain(
                    format!("{base}/aws-k8s-{k8s}/x86_64/{version}/image_id"),
                    &[Variant::Standard, Variant::Neuron],
                ),
                plain(
                    format!("{base}/aws-k8s-{k8s}/arm64/{version}/image_id"),
                    &[Variant::Standard],
                ),
                plain(
                    format!("{base}/aws-k8s-{k8s}-nvidia/x86_64/{version}/image_id"),
                    &[Variant::Nvidia],
                ),
                plain(
                    format!("{base}/aws-k8s-{k8s}-nvidia/arm64/{version}/image_id"),
                    &[Variant::Nvidia],
                ),
            ]
        }
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
            let (year, build) = match alias.family {
                AmiFamily::Windows2019 => ("2019", "10.0.17763"),
                AmiFamily::Windows2022 => ("2022", "10.0.20348"),
                _ => ("2025", "10.0.26100"),
            };
            if alias.version != "latest" {
                return Err(AliasError::WindowsPinned {
                    index,
                    family: alias.family.as_str().to_owned(),
                    version: alias.version.clone(),
                });
            }
            if alias.family == AmiFamily::Windows2025 && minor_number(k8s) < 35 {
                return Err(AliasError::Windows2025Unsupported {
                    index,
                    k8s: k8s.to_owned(),
                });
            }
            vec![AliasParameter {
                path: format!(
                    "/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id"
                ),
                variants: Vec::new(),
                extra: vec![
                    requirement(labels::OS, Operator::In, &["windows"]),
                    requirement(labels::WINDOWS_BUILD, Operator::In, &[build]),
                ],
            }]
        }
        AmiFamily::Custom => Vec::new(),
    })
}

/// What DescribeImages says of one image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub id: String,
    pub name: String,
    /// `x86_64`, `arm64`, ...
    pub architecture: String,
    pub creation_date: Option<DateTime<Utc>>,
    pub deprecation_time: Option<DateTime<Utc>>,
}

impl Image {
    fn deprecated(&self, now: DateTime<Utc>) -> bool {
        self.deprecation_time.is_some_and(|t| t <= now)
    }
}

/// An image found for a term, with the requirement sets it serves (one per variant; an image
/// of a non-alias term serves one set, its architecture only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub image: Image,
    pub requirement_sets: Vec<Vec<NodeSelectorRequirementWithMinValues>>,
}

/// The `kubernetes.io/arch` requirement of an image; `None` for architectures Kubernetes does
/// not schedule (`i386`, `x86_64_mac`, ...).
pub fn arch_requirement(architecture: &str) -> Option<NodeSelectorRequirementWithMinValues> {
    let arch = match architecture {
        "x86_64" => "amd64",
        "arm64" => "arm64",
        _ => return None,
    };
    Some(requirement(labels::ARCH, Operator::In, &[arch]))
}

/// The candidate for an image an alias parameter named.
pub fn alias_candidate(image: Image, parameter: &AliasParameter) -> Option<Candidate> {
    let arch = arch_requirement(&image.architecture)?;
    let sets = if parameter.variants.is_empty() {
        let mut set = vec![arch];
        set.extend(parameter.extra.iter().cloned());
        vec![set]
    } else {
        parameter
            .variants
            .iter()
            .map(|variant| {
                let mut set = vec![arch.clone()];
                set.extend(variant.requirements());
                set.extend(parameter.extra.iter().cloned());
                set
            })
            .collect()
    };
    Some(Candidate {
        image,
        requirement_sets: sets,
    })
}

/// The candidate for an image a non-alias term found (ids, names, tags, SSM parameters).
pub fn plain_candidate(image: Image) -> Option<Candidate> {
    let arch = arch_requirement(&image.architecture)?;
    Some(Candidate {
        image,
        requirement_sets: vec![vec![arch]],
    })
}

/// Requirements sorted as upstream writes them into the status: by key length, then key.
fn sorted(
    mut set: Vec<NodeSelectorRequirementWithMinValues>,
) -> Vec<NodeSelectorRequirementWithMinValues> {
    set.sort_by(|a, b| {
        a.key
            .len()
            .cmp(&b.key.len())
            .then_with(|| a.key.cmp(&b.key))
    });
    set
}

fn set_key(set: &[NodeSelectorRequirementWithMinValues]) -> String {
    sorted(set.to_vec())
        .iter()
        .map(|r| format!("{}|{:?}|{}", r.key, r.operator, r.values.join(",")))
        .collect::<Vec<_>>()
        .join(";")
}

/// Whether `a` should be kept over `b` for the same requirements: not deprecated first, then
/// the newest, then the lexically greater name.
fn better(a: &Image, b: &Image, now: DateTime<Utc>) -> bool {
    let (da, db) = (a.deprecated(now), b.deprecated(now));
    if da != db {
        return !da;
    }
    if a.creation_date != b.creation_date {
        return a.creation_date > b.creation_date;
    }
    a.name > b.name
}

/// The status `amis`: one image per distinct requirement set, sorted newest first, then by id.
pub fn select(candidates: &[Candidate], now: DateTime<Utc>) -> Vec<AmiStatus> {
    let mut best: BTreeMap<String, (&Image, &Vec<NodeSelectorRequirementWithMinValues>)> =
        BTreeMap::new();
    for candidate in candidates {
        for set in &candidate.requirement_sets {
            let key = set_key(set);
            match best.get(&key) {
                Some((kept, _)) if !better(&candidate.image, kept, now) => {}
                _ => {
                    best.insert(key, (&candidate.image, set));
                }
            }
        }
    }
    let mut chosen: Vec<(&Image, &Vec<NodeSelectorRequirementWithMinValues>)> =
        best.into_values().collect();
    chosen.sort_by(|(a, sa), (b, sb)| {
        b.creation_date
            .cmp(&a.creation_date)
            .then_with(|| a.id.cmp(&b.id))
            .then_with(|| set_key(sa).cmp(&set_key(sb)))
    });
    chosen
        .into_iter()
        .map(|(image, set)| AmiStatus {
            id: image.id.clone(),
            name: Some(image.name.clone()),
            deprecated: image.deprecated(now).then_some(true),
            requirements: sorted(set.clone()),
        })
        .collect()
}

/// Whether an instance type with these labels satisfies an AMI's requirements.
pub fn compatible(ami: &AmiStatus, instance_labels: &BTreeMap<String, String>) -> bool {
    ami.requirements.iter().all(|r| {
        RequirementSpec {
            key: r.key.clone(),
            operator: r.operator,
            values: r.values.clone(),
            min_values: None,
        }
        .matches(instance_labels.get(&r.key).map(String::as_str))
    })
}

/// The AMI an instance type launches with: the first status AMI it is compatible with.
pub fn ami_for<'a>(
    amis: &'a [AmiStatus],
    instance_labels: &BTreeMap<String, String>,
) -> Option<&'a AmiStatus> {
    amis.iter().find(|ami| compatible(ami, instance_labels))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(day: u32) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(&format!("2026-01-{day:02}T00:00:00Z"))
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default()
    }

    fn image(id: &str, arch: &str, day: u32) -> Image {
        Image {
            id: id.into(),
            name: format!("image-{id}"),
            architecture: arch.into(),
            creation_date: Some(at(day)),
            deprecation_time: None,
        }
    }

    #[test]
    fn al2023_latest_reads_the_recommended_parameter_of_every_published_variant() {
        let alias = Alias::parse(0, "al2023@latest").unwrap();
        let paths: Vec<String> = alias_parameters(0, &alias, "1.36")
            .unwrap()
            .into_iter()
            .map(|p| p.path)
            .collect();
        assert_eq!(
            paths,
            [
                "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id",
                "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
                "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/neuron/recommended/image_id",
                "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/arm64/standard/recommended/image_id",
                "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/arm64/nvidia/recommended/image_id",
            ]
        );
        assert!(alias.is_mutable());
    }

    #[test]
    fn pinned_aliases_name_the_release_in_the_path() {
        let al2023 = Alias::parse(0, "al2023@v20260101").unwrap();
        let first = &alias_parameters(0, &al2023, "1.36").unwrap()[0];
        assert_eq!(
            first.path,
            "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.36-v20260101/image_id"
        );
        let bottlerocket = Alias::parse(0, "bottlerocket@v1.40.0").unwrap();
        let first = &alias_parameters(0, &bottlerocket, "1.36").unwrap()[0];
        assert_eq!(
            first.path,
            "/aws/service/bottlerocket/aws-k8s-1.36/x86_64/1.40.0/image_id"
        );
        assert!(!bottlerocket.is_mutable());
        let al2 = Alias::parse(0, "al2@v20260101").unwrap();
        let gpu = &alias_parameters(0, &al2, "1.32").unwrap()[2];
        assert_eq!(
            gpu.path,
            "/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/amazon-eks-gpu-node-1.32-v20260101/image_id"
        );
        assert_eq!(gpu.variants, [Variant::Nvidia, Variant::Neuron]);
    }

    #[test]
    fn aliases_the_cluster_version_cannot_use_are_refused_with_upstreams_reason() {
        let al2 = Alias::parse(2, "al2@latest").unwrap();
        let error = alias_parameters(2, &al2, "1.33").unwrap_err();
        assert_eq!(error.reason(), "UnsupportedAlias");
        assert!(
            error
                .to_string()
                .starts_with("spec.amiSelectorTerms[2].alias")
        );
        let ws = Alias::parse(0, "windows2025@latest").unwrap();
        assert_eq!(
            alias_parameters(0, &ws, "1.34").unwrap_err().reason(),
            "UnsupportedAlias"
        );
        assert!(alias_parameters(0, &ws, "1.35").is_ok());
        assert!(matches!(
            Alias::parse(0, "windows2022@v1"),
            Ok(a) if alias_parameters(0, &a, "1.36").is_err()
        ));
        assert!(matches!(
            Alias::parse(1, "ubuntu@latest"),
            Err(AliasError::UnknownFamily { index: 1, .. })
        ));
        assert!(matches!(
            Alias::parse(0, "al2023"),
            Err(AliasError::Malformed { .. })
        ));
    }

    #[test]
    fn kubernetes_versions_become_the_minor_ssm_paths_use() {
        assert_eq!(k8s_minor("v1.36.3").as_deref(), Some("1.36"));
        assert_eq!(k8s_minor("1.29").as_deref(), Some("1.29"));
        assert_eq!(k8s_minor("v1.31.0-eks-1234").as_deref(), Some("1.31"));
        assert_eq!(k8s_minor("1.32+"), Some("1.32".into()));
        assert_eq!(k8s_minor("garbage"), None);
    }

    #[test]
    fn one_image_per_requirement_set_is_kept_preferring_current_then_newest() {
        let alias = Alias::parse(0, "bottlerocket@latest").unwrap();
        let params = alias_parameters(0, &alias, "1.36").unwrap();
        let mut deprecated = image("ami-new-but-deprecated", "x86_64", 9);
        deprecated.deprecation_time = Some(at(10));
        let candidates = vec![
            alias_candidate(image("ami-old", "x86_64", 1), &params[0]).unwrap(),
            alias_candidate(deprecated, &params[0]).unwrap(),
            alias_candidate(image("ami-arm", "arm64", 2), &params[1]).unwrap(),
            alias_candidate(image("ami-gpu", "x86_64", 3), &params[2]).unwrap(),
        ];
        let status = select(&candidates, at(20));
        let ids: Vec<&str> = status.iter().map(|a| a.id.as_str()).collect();
        // x86 standard and neuron both from ami-old (the newer one is deprecated), sorted
        // newest first.
        assert_eq!(ids, ["ami-gpu", "ami-arm", "ami-old", "ami-old"]);
        assert!(status.iter().all(|a| a.deprecated.is_none()));
        // Requirements sorted by key length, then key.
        let keys: Vec<&str> = status[2]
            .requirements
            .iter()
            .map(|r| r.key.as_str())
            .collect();
        assert_eq!(keys[0], labels::ARCH);
    }

    #[test]
    fn a_deprecated_image_is_kept_when_it_is_the_only_one_and_says_so() {
        let mut only = image("ami-dep", "x86_64", 1);
        only.deprecation_time = Some(at(2));
        let status = select(&[plain_candidate(only).unwrap()], at(3));
        assert_eq!(status.len(), 1);
        assert_eq!(status[0].deprecated, Some(true));
    }

    #[test]
    fn instance_types_take_the_first_compatible_ami() {
        let alias = Alias::parse(0, "al2023@latest").unwrap();
        let params = alias_parameters(0, &alias, "1.36").unwrap();
        let candidates: Vec<Candidate> = params
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let arch = if p.path.contains("arm64") {
                    "arm64"
                } else {
                    "x86_64"
                };
                alias_candidate(image(&format!("ami-{i}"), arch, 1), p).unwrap()
            })
            .collect();
        let status = select(&candidates, at(5));
        let labels_of = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect()
        };
        let m5 = labels_of(&[(labels::ARCH, "amd64")]);
        let g5 = labels_of(&[(labels::ARCH, "amd64"), (labels::INSTANCE_GPU_COUNT, "1")]);
        let inf2 = labels_of(&[
            (labels::ARCH, "amd64"),
            (labels::INSTANCE_ACCELERATOR_COUNT, "1"),
        ]);
        let m7g = labels_of(&[(labels::ARCH, "arm64")]);
        assert_eq!(ami_for(&status, &m5).map(|a| a.id.as_str()), Some("ami-0"));
        assert_eq!(ami_for(&status, &g5).map(|a| a.id.as_str()), Some("ami-1"));
        assert_eq!(
            ami_for(&status, &inf2).map(|a| a.id.as_str()),
            Some("ami-2")
        );
        assert_eq!(ami_for(&status, &m7g).map(|a| a.id.as_str()), Some("ami-3"));
        let s390 = labels_of(&[(labels::ARCH, "s390x")]);
        assert_eq!(ami_for(&status, &s390), None);
    }

    #[test]
    fn windows_images_require_windows_and_their_build() {
        let alias = Alias::parse(0, "windows2022@latest").unwrap();
        let params = alias_parameters(0, &alias, "1.36").unwrap();
        let candidate = alias_candidate(image("ami-win", "x86_64", 1), &params[0]).unwrap();
        let status = select(&[candidate], at(2));
        let linux: BTreeMap<String, String> =
            [(labels::ARCH.to_owned(), "amd64".to_owned())].into();
        assert_eq!(ami_for(&status, &linux), None);
        let mut windows = linux.clone();
        windows.insert(labels::OS.into(), "windows".into());
        windows.insert(labels::WINDOWS_BUILD.into(), "10.0.20348".into());
        assert!(ami_for(&status, &windows).is_some());
    }
}
