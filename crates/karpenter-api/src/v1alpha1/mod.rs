//! `karpenter.sh/v1alpha1`: the NodeOverlay (feature gate `NodeOverlay`), which adjusts the
//! price and extended-resource capacity the scheduling simulation assumes for the instance
//! types it matches.

#[allow(
    clippy::duplicated_attributes,
    reason = "kube derive takes repeated printcolumn(type_ = ...) arguments"
)]
pub mod nodeoverlay;

pub use nodeoverlay::{
    NodeOverlay, NodeOverlaySpec, NodeOverlayStatus, NodeSelectorRequirement, PriceChange,
    PriceChangeError,
};
