//! The capacity reservations the EC2NodeClasses select (`ec2:DescribeCapacityReservations`,
//! gate `ReservedCapacity`) and their free slots, shared by the EC2NodeClass controller (which
//! reads them into the status and refreshes the counts) and the provider (which offers and
//! launches into them, and counts launches and terminations). What to ask and what the
//! answers mean is `karpenter_aws::capacity_reservation`.

use std::time::Instant;

use aws_sdk_ec2::types::Filter as Ec2Filter;
use karpenter_api::v1::ec2nodeclass::CapacityReservationSelectorTerm;
use karpenter_aws::capacity_reservation::{self, Availability, Described};

use crate::clients::AwsClients;
use crate::error::AwsError;

/// The reservations' free slots, and whether reservations are used at all.
#[derive(Debug)]
pub struct CapacityReservations {
    enabled: bool,
    availability: Availability<Instant>,
}

impl Default for CapacityReservations {
    fn default() -> Self {
        CapacityReservations::new(true)
    }
}

fn described(sdk: &aws_sdk_ec2::types::CapacityReservation) -> Option<Described> {
    Some(Described {
        id: sdk.capacity_reservation_id()?.to_owned(),
        owner_id: sdk.owner_id().unwrap_or_default().to_owned(),
        instance_type: sdk.instance_type()?.to_owned(),
        availability_zone: sdk.availability_zone()?.to_owned(),
        available_instance_count: sdk
            .available_instance_count()
            .and_then(|c| u32::try_from(c).ok())
            .unwrap_or_default(),
        instance_match_criteria: sdk
            .instance_match_criteria()
            .map(|c| c.as_str().to_owned())
            .unwrap_or_default(),
        reservation_type: sdk.reservation_type().map(|t| t.as_str().to_owned()),
        interruptible: sdk.interruptible().unwrap_or(false),
        end_date: sdk
            .end_date()
            .and_then(|d| chrono::DateTime::from_timestamp(d.secs(), d.subsec_nanos())),
    })
}

impl CapacityReservations {
    /// `enabled`: the `ReservedCapacity` feature gate.
    pub fn new(enabled: bool) -> Self {
        CapacityReservations {
            enabled,
            availability: Availability::new(),
        }
    }

    /// Whether the `ReservedCapacity` gate is on.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The free slots per reservation.
    pub fn availability(&self) -> &Availability<Instant> {
        &self.availability
    }

    /// Every reservation `terms` match, as EC2 describes them (active ones; an id EC2 does not
    /// know matches nothing), and their free slots from this answer on.
    pub async fn describe(
        &self,
        clients: &AwsClients,
        terms: &[CapacityReservationSelectorTerm],
    ) -> Result<Vec<Described>, AwsError> {
        let mut found = Vec::new();
        for query in capacity_reservation::queries(terms) {
            let filters: Vec<Ec2Filter> = query
                .filters
                .iter()
                .map(|f| {
                    Ec2Filter::builder()
                        .name(&f.name)
                        .set_values(Some(f.values.clone()))
                        .build()
                })
                .collect();
            let mut call = clients
                .ec2
                .describe_capacity_reservations()
                .set_filters(Some(filters));
            call = if query.ids.is_empty() {
                call.max_results(1000)
            } else {
                call.set_capacity_reservation_ids(Some(query.ids.clone()))
            };
            let mut pages = call.into_paginator().send();
            let mut answered = Vec::new();
            while let Some(page) = pages.next().await {
                let page = match page {
                    Ok(page) => page,
                    Err(error) => {
                        let error = AwsError::from_sdk("ec2:DescribeCapacityReservations", &error);
                        if error.is_not_found() {
                            break;
                        }
                        return Err(error);
                    }
                };
                answered.extend(page.capacity_reservations().iter().filter_map(described));
            }
            self.availability.sync(
                answered
                    .iter()
                    .map(|r| (r.id.clone(), r.available_instance_count)),
                Instant::now(),
            );
            found.extend(answered);
        }
        Ok(found)
    }
}
