//! The API objects the index holds, as one enum, and how to name one for a delete.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttachment};
use karpenter_api::v1::{EC2NodeClass, NodeClaim, NodePool};
use karpenter_api::v1alpha1::NodeOverlay;

/// The kinds the index holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Node,
    NodeClaim,
    Pod,
    NodePool,
    DaemonSet,
    PodDisruptionBudget,
    PersistentVolumeClaim,
    PersistentVolume,
    StorageClass,
    Namespace,
    VolumeAttachment,
    EC2NodeClass,
    NodeOverlay,
}

/// One API object.
#[derive(Debug, Clone)]
#[allow(
    clippy::large_enum_variant,
    reason = "an Object only carries one object into the index, which stores the inner value"
)]
pub enum Object {
    Node(Node),
    NodeClaim(NodeClaim),
    Pod(Pod),
    NodePool(NodePool),
    DaemonSet(DaemonSet),
    PodDisruptionBudget(PodDisruptionBudget),
    PersistentVolumeClaim(PersistentVolumeClaim),
    PersistentVolume(PersistentVolume),
    StorageClass(StorageClass),
    Namespace(Namespace),
    VolumeAttachment(VolumeAttachment),
    EC2NodeClass(EC2NodeClass),
    NodeOverlay(NodeOverlay),
}

/// Names an object: kind, namespace (for namespaced kinds) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub kind: Kind,
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectRef {
    pub fn new(kind: Kind, namespace: Option<&str>, name: &str) -> Self {
        ObjectRef {
            kind,
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        }
    }
}

impl Object {
    pub fn kind(&self) -> Kind {
        match self {
            Object::Node(_) => Kind::Node,
            Object::NodeClaim(_) => Kind::NodeClaim,
            Object::Pod(_) => Kind::Pod,
            Object::NodePool(_) => Kind::NodePool,
            Object::DaemonSet(_) => Kind::DaemonSet,
            Object::PodDisruptionBudget(_) => Kind::PodDisruptionBudget,
            Object::PersistentVolumeClaim(_) => Kind::PersistentVolumeClaim,
            Object::PersistentVolume(_) => Kind::PersistentVolume,
            Object::StorageClass(_) => Kind::StorageClass,
            Object::Namespace(_) => Kind::Namespace,
            Object::VolumeAttachment(_) => Kind::VolumeAttachment,
            Object::EC2NodeClass(_) => Kind::EC2NodeClass,
            Object::NodeOverlay(_) => Kind::NodeOverlay,
        }
    }

    /// The object's metadata.
    pub fn metadata(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            Object::Node(o) => &o.metadata,
            Object::NodeClaim(o) => &o.metadata,
            Object::Pod(o) => &o.metadata,
            Object::NodePool(o) => &o.metadata,
            Object::DaemonSet(o) => &o.metadata,
            Object::PodDisruptionBudget(o) => &o.metadata,
            Object::PersistentVolumeClaim(o) => &o.metadata,
            Object::PersistentVolume(o) => &o.metadata,
            Object::StorageClass(o) => &o.metadata,
            Object::Namespace(o) => &o.metadata,
            Object::VolumeAttachment(o) => &o.metadata,
            Object::EC2NodeClass(o) => &o.metadata,
            Object::NodeOverlay(o) => &o.metadata,
        }
    }

    /// The object's reference; namespaced kinds without a namespace are in `default`.
    pub fn reference(&self) -> ObjectRef {
        let meta = self.metadata();
        let namespaced = matches!(
            self.kind(),
            Kind::Pod | Kind::DaemonSet | Kind::PodDisruptionBudget | Kind::PersistentVolumeClaim
        );
        ObjectRef {
            kind: self.kind(),
            namespace: namespaced
                .then(|| meta.namespace.clone().unwrap_or_else(|| "default".into())),
            name: meta.name.clone().unwrap_or_default(),
        }
    }
}
