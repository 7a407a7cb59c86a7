//! Builders for test objects (pods and workloads), shared by this crate's tests.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// `PodBuilder::new("web-0").cpu("500m").memory("1Gi").build()`.
#[derive(Debug, Clone)]
pub struct PodBuilder {
    name: String,
    namespace: String,
    requests: BTreeMap<String, Quantity>,
}

impl PodBuilder {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            namespace: "default".to_string(),
            requests: BTreeMap::new(),
        }
    }

    pub fn cpu(mut self, amount: &str) -> Self {
        self.requests
            .insert("cpu".to_string(), Quantity(amount.to_string()));
        self
    }

    pub fn memory(mut self, amount: &str) -> Self {
        self.requests
            .insert("memory".to_string(), Quantity(amount.to_string()));
        self
    }

    pub fn build(self) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                uid: Some(format!("{}/{}", self.namespace, self.name)),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "main".to_string(),
                    resources: Some(ResourceRequirements {
                        requests: Some(self.requests),
                        ..ResourceRequirements::default()
                    }),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            status: None,
        }
    }
}
