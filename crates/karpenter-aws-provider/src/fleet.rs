//! The `CreateFleet` call of a launch: [`karpenter_aws::launch::fleet::FleetRequest`] as the
//! SDK's request for a number of instances ([`call`]), and the answer as values ([`answer`]).
//! The launches that share one call are the `create_fleet` batcher's
//! ([`crate::batcher::ec2`]).

use std::collections::BTreeMap;

use aws_sdk_ec2::operation::create_fleet::CreateFleetOutput;
use aws_sdk_ec2::operation::create_fleet::builders::CreateFleetFluentBuilder;
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest,
    FleetOnDemandAllocationStrategy, FleetType, OnDemandOptionsRequest, ResourceType,
    SpotAllocationStrategy, SpotOptionsRequest, Tag, TagSpecification,
    TargetCapacitySpecificationRequest,
};
use karpenter_aws::launch::fleet::{FleetError, FleetRequest, Market};

/// The tags of a launch call's resources of `kind` (`TagSpecifications`).
pub fn tag_specification(tags: &BTreeMap<String, String>, kind: ResourceType) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(kind)
        .set_tags(Some(
            tags.iter()
                .map(|(k, v)| Tag::builder().key(k).value(v).build())
                .collect(),
        ))
        .build()
}

/// The `CreateFleet` call for `request` (instant, `instances` instances), ready to send.
pub fn call(
    ec2: &aws_sdk_ec2::Client,
    request: &FleetRequest,
    instances: i32,
) -> CreateFleetFluentBuilder {
    let configs = request
        .configs
        .iter()
        .map(|config| {
            FleetLaunchTemplateConfigRequest::builder()
                .launch_template_specification(
                    FleetLaunchTemplateSpecificationRequest::builder()
                        .launch_template_name(&config.launch_template_name)
                        .version("$Latest")
                        .build(),
                )
                .set_overrides(Some(
                    config
                        .overrides
                        .iter()
                        .map(|o| {
                            FleetLaunchTemplateOverridesRequest::builder()
                                .instance_type(o.instance_type.as_str().into())
                                .subnet_id(&o.subnet_id)
                                .image_id(&o.image_id)
                                .availability_zone(&o.zone)
                                .priority(o.priority)
                                .build()
                        })
                        .collect(),
                ))
                .build()
        })
        .collect();
    let tag_spec = |kind| tag_specification(&request.tags, kind);
    let market = request.market();
    let capacity = match market {
        Market::Spot => DefaultTargetCapacityType::Spot,
        // An ODCR is bought as on-demand capacity targeted at it (its launch template
        // names the reservation).
        Market::OnDemand => DefaultTargetCapacityType::OnDemand,
        Market::CapacityBlock => DefaultTargetCapacityType::CapacityBlock,
        Market::InterruptibleReservation => DefaultTargetCapacityType::ReservedCapacity,
    };
    let mut call = ec2
        .create_fleet()
        .r#type(FleetType::Instant)
        .target_capacity_specification(
            TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(instances)
                .default_target_capacity_type(capacity)
                .build(),
        )
        .set_launch_template_configs(Some(configs))
        .tag_specifications(tag_spec(ResourceType::Instance))
        .tag_specifications(tag_spec(ResourceType::Volume))
        .tag_specifications(tag_spec(ResourceType::Fleet))
        .set_context(request.context.clone());
    call = match market {
        Market::Spot => call.spot_options(
            SpotOptionsRequest::builder()
                .allocation_strategy(SpotAllocationStrategy::from(request.allocation_strategy))
                .build(),
        ),
        Market::OnDemand => call.on_demand_options(
            OnDemandOptionsRequest::builder()
                .allocation_strategy(FleetOnDemandAllocationStrategy::from(
                    request.allocation_strategy,
                ))
                .build(),
        ),
        Market::CapacityBlock => call,
        Market::InterruptibleReservation => call.reserved_capacity_options(
            aws_sdk_ec2::types::ReservedCapacityOptionsRequest::builder()
                .reservation_types(
                    aws_sdk_ec2::types::FleetReservationType::InterruptibleCapacityReservation,
                )
                .build(),
        ),
    };
    call
}

/// An instance of a `CreateFleet` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launched {
    pub instance_id: String,
    pub instance_type: String,
    /// The zone of the override it was launched with, when the answer names it.
    pub zone: Option<String>,
    /// Its lifecycle is `spot`.
    pub spot: bool,
}

/// The instances (one per instance id, in the answer's order) and errors of an answer.
pub fn answer(out: &CreateFleetOutput) -> (Vec<Launched>, Vec<FleetError>) {
    let mut launched = Vec::new();
    for instance in out.instances() {
        let instance_type = instance
            .instance_type()
            .map(|t| t.as_str().to_owned())
            .unwrap_or_default();
        let zone = instance
            .launch_template_and_overrides()
            .and_then(|l| l.overrides())
            .and_then(|o| o.availability_zone())
            .map(str::to_owned);
        let spot = instance.lifecycle().map(|l| l.as_str()) == Some("spot");
        // EC2 groups the instances of one override under one entry.
        for id in instance.instance_ids() {
            launched.push(Launched {
                instance_id: id.clone(),
                instance_type: instance_type.clone(),
                zone: zone.clone(),
                spot,
            });
        }
    }
    let errors = out
        .errors()
        .iter()
        .map(|e| {
            let overrides = e
                .launch_template_and_overrides()
                .and_then(|l| l.overrides());
            FleetError {
                code: e.error_code().unwrap_or("Unknown").to_owned(),
                message: e.error_message().unwrap_or_default().to_owned(),
                instance_type: overrides
                    .and_then(|o| o.instance_type())
                    .map(|t| t.as_str().to_owned()),
                zone: overrides
                    .and_then(|o| o.availability_zone())
                    .map(str::to_owned),
            }
        })
        .collect();
    (launched, errors)
}
