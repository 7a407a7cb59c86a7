//! Counts the AWS calls a set of clients makes, per service and operation (an SDK
//! interceptor): for `karpenter-bench ec2` and anything else that wants to know what a
//! launch costs in calls. It reads the operation's name only; it never changes or fails a call.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::{Intercept, SharedInterceptor};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

/// Calls by `service:Operation` (`ec2:CreateFleet`). Clones share the counts.
#[derive(Debug, Clone, Default)]
pub struct CallCounter(Arc<Mutex<BTreeMap<String, u64>>>);

impl CallCounter {
    pub fn interceptor(&self) -> SharedInterceptor {
        SharedInterceptor::new(self.clone())
    }

    /// The counts so far.
    pub fn counts(&self) -> BTreeMap<String, u64> {
        self.0.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// Starts again from zero.
    pub fn reset(&self) {
        if let Ok(mut map) = self.0.lock() {
            map.clear();
        }
    }
}

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "karpenter-aws-provider CallCounter"
    }

    // The operation's metadata is in the bag from serialization on (not before execution).
    fn read_before_serialization(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(metadata) = cfg.load::<Metadata>()
            && let Ok(mut map) = self.0.lock()
        {
            let key = format!(
                "{}:{}",
                metadata.service().to_ascii_lowercase(),
                metadata.name()
            );
            *map.entry(key).or_insert(0) += 1;
        }
        Ok(())
    }
}
