//! Legacy API versions, for reading only: `karpenter.sh/v1alpha5` Provisioner and Machine,
//! `karpenter.k8s.aws/v1alpha1` AWSNodeTemplate, `karpenter.sh/v1beta1` NodePool and NodeClaim,
//! and `karpenter.k8s.aws/v1beta1` EC2NodeClass.
//!
//! These are plain serde structs, not CRDs: no API server serves them any more, and this crate
//! only reads them so that [`crate::convert`] can migrate them to `v1`. Fields a later version
//! dropped or never had are kept in `unknown` maps so the converter can warn instead of
//! silently losing them. Sub-types whose shape did not change (taints, block devices, selector
//! terms) are the `v1` types.

pub mod v1alpha1_aws;
pub mod v1alpha5;
pub mod v1beta1;
pub mod v1beta1_aws;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// A legacy object: type meta, metadata and a spec (status is ignored).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Object<S> {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: S,
}

impl<S> Object<S> {
    /// The object's name (empty when unset).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }
}

/// Fields not modelled by a legacy struct, kept so that conversion can report them.
pub type Unknown = BTreeMap<String, serde_json::Value>;

/// The legacy `apiVersion`/`kind` pairs this module reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LegacyKind {
    ProvisionerV1alpha5,
    MachineV1alpha5,
    AwsNodeTemplateV1alpha1,
    NodePoolV1beta1,
    NodeClaimV1beta1,
    Ec2NodeClassV1beta1,
}

impl LegacyKind {
    pub fn from_type_meta(api_version: &str, kind: &str) -> Option<Self> {
        Some(match (api_version, kind) {
            ("karpenter.sh/v1alpha5", "Provisioner") => LegacyKind::ProvisionerV1alpha5,
            ("karpenter.sh/v1alpha5", "Machine") => LegacyKind::MachineV1alpha5,
            ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate") => {
                LegacyKind::AwsNodeTemplateV1alpha1
            }
            ("karpenter.sh/v1beta1", "NodePool") => LegacyKind::NodePoolV1beta1,
            ("karpenter.sh/v1beta1", "NodeClaim") => LegacyKind::NodeClaimV1beta1,
            ("karpenter.k8s.aws/v1beta1", "EC2NodeClass") => LegacyKind::Ec2NodeClassV1beta1,
            _ => return None,
        })
    }
}

/// Deserializes a map of quantities written as strings or as plain numbers (`cpu: 128`), as
/// the API server accepted them.
pub fn quantity_map<'de, D>(
    deserializer: D,
) -> Result<
    Option<BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    D::Error,
>
where
    D: serde::Deserializer<'de>,
{
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let raw: Option<BTreeMap<String, serde_json::Value>> = Option::deserialize(deserializer)?;
    raw.map(|map| {
        map.into_iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => Ok((k, Quantity(s))),
                serde_json::Value::Number(n) => Ok((k, Quantity(n.to_string()))),
                other => Err(serde::de::Error::custom(format!(
                    "{k}: expected a quantity (string or number), found {other}"
                ))),
            })
            .collect()
    })
    .transpose()
}
