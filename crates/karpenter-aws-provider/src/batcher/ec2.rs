//! The EC2 batchers of [`crate::provider::AwsCloud`] (upstream's `batcher.EC2`):
//!
//! - `create_fleet`: launches with equal [`FleetRequest`]s become one `CreateFleet` for as many
//!   instances; each launch gets one instance and the answer's errors
//!   ([`karpenter_aws::batch::split_fleet`]). A failed call fails every launch of it.
//! - `describe_instances`: instances described by id become one `DescribeInstances` for all
//!   their ids (once each); ids the answer lacks, or all when it failed, are described one by
//!   one ([`karpenter_aws::batch::split_by_id`]).
//! - `terminate_instances`: terminations become one `TerminateInstances`; instances whose
//!   answer is not shutting down or terminated, or all when it failed, are terminated one by
//!   one, each caller getting its own instance's result.
//!
//! A batch of one id is its own one-by-one call (upstream would ask twice for an instance the
//! answer lacks). Every call is one the IAM contract already lists: batching needs no
//! permission a single call does not.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::join_all;
use karpenter_aws::batch::{self, FleetShare};
use karpenter_aws::launch::fleet::FleetRequest;

use super::{Batcher, Execute, NoAnswer};
use crate::clients::AwsClients;
use crate::error::AwsError;
use crate::fleet::{self, Launched};
use crate::instances::{self, Instance};

type FleetAnswer = Result<FleetShare<Launched>, AwsError>;
type Described = Result<Option<Instance>, AwsError>;
type Terminated = Result<(), AwsError>;

/// The provider's three EC2 batchers.
#[derive(Debug)]
pub struct Ec2Batchers {
    fleet: Batcher<FleetRequest, (), FleetAnswer>,
    describe: Batcher<(), String, Described>,
    terminate: Batcher<(), String, Terminated>,
}

/// `NoAnswer` as the failed call's error.
fn no_answer(operation: &'static str, error: NoAnswer) -> AwsError {
    AwsError::new(operation, "NoAnswer", error.to_string())
}

/// The distinct ids of `ids`, in order.
fn distinct(ids: &[String]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    ids.iter()
        .filter(|id| seen.insert(id.as_str()))
        .cloned()
        .collect()
}

impl Ec2Batchers {
    /// Starts the batchers (on the current tokio runtime) with upstream's windows.
    pub fn start(clients: &AwsClients) -> Self {
        Ec2Batchers {
            fleet: Batcher::start(batch::CREATE_FLEET, create_fleet(clients.clone())),
            describe: Batcher::start(
                batch::DESCRIBE_INSTANCES,
                describe_instances(clients.clone()),
            ),
            terminate: Batcher::start(
                batch::TERMINATE_INSTANCES,
                terminate_instances(clients.clone()),
            ),
        }
    }

    /// Launches one instance of `request` (whose target capacity is one), in a `CreateFleet`
    /// shared with the equal requests of the window: its instance, if it got one, and the
    /// answer's errors.
    pub async fn create_fleet(&self, request: &FleetRequest) -> FleetAnswer {
        self.fleet
            .add(request.clone(), ())
            .await
            .map_err(|e| no_answer("ec2:CreateFleet", e))?
    }

    /// The live instance `id`; `None` when EC2 no longer has it (or it is terminated).
    pub async fn describe(&self, id: &str) -> Described {
        self.describe
            .add((), id.to_owned())
            .await
            .map_err(|e| no_answer("ec2:DescribeInstances", e))?
    }

    /// Terminates the instance `id`.
    pub async fn terminate(&self, id: &str) -> Terminated {
        self.terminate
            .add((), id.to_owned())
            .await
            .map_err(|e| no_answer("ec2:TerminateInstances", e))?
    }
}

fn create_fleet(clients: AwsClients) -> Execute<FleetRequest, (), FleetAnswer> {
    Arc::new(move |request: FleetRequest, launches: Vec<()>| {
        let clients = clients.clone();
        async move {
            let count = launches.len();
            let capacity = i32::try_from(count).unwrap_or(i32::MAX);
            let out = match fleet::call(&clients.ec2, &request, capacity).send().await {
                Ok(out) => out,
                Err(error) => {
                    let error = AwsError::from_sdk("ec2:CreateFleet", &error);
                    return vec![Err(error); count];
                }
            };
            let (launched, errors) = fleet::answer(&out);
            let split = batch::split_fleet(count, launched, &errors);
            for extra in &split.surplus {
                tracing::warn!(instance = %extra.instance_id, launches = count, "CreateFleet launched more instances than asked; the garbage collector terminates it");
            }
            split.shares.into_iter().map(Ok).collect()
        }
        .boxed()
    })
}

fn describe_instances(clients: AwsClients) -> Execute<(), String, Described> {
    Arc::new(move |(), asked: Vec<String>| {
        let clients = clients.clone();
        async move {
            let ids = distinct(&asked);
            if let [id] = ids.as_slice() {
                let described = instances::get(&clients, id).await;
                return vec![described; asked.len()];
            }
            let found: Vec<(String, Instance)> = match instances::describe(&clients, &ids).await
            {
                Ok(found) => found.into_iter().map(|i| (i.id.clone(), i)).collect(),
                Err(error) => {
                    tracing::debug!(%error, ids = ids.len(), "describing instances together failed; describing them one by one");
                    Vec::new()
                }
            };
            let (parts, missing) = batch::split_by_id(&asked, &found);
            let retried = join_all(missing.iter().map(|id| instances::get(&clients, id))).await;
            asked
                .iter()
                .zip(parts)
                .map(|(id, part)| match part {
                    Some(instance) => Ok(Some(instance)),
                    None => missing
                        .iter()
                        .zip(&retried)
                        .find(|(m, _)| *m == id)
                        .map_or(Ok(None), |(_, r)| r.clone()),
                })
                .collect()
        }
        .boxed()
    })
}

fn terminate_instances(clients: AwsClients) -> Execute<(), String, Terminated> {
    Arc::new(move |(), asked: Vec<String>| {
        let clients = clients.clone();
        async move {
            let ids = distinct(&asked);
            if let [id] = ids.as_slice() {
                let terminated = instances::terminate(&clients, id).await;
                return vec![terminated; asked.len()];
            }
            let changes = match instances::terminate_all(&clients, &ids).await {
                Ok(changes) => changes,
                Err(error) => {
                    tracing::debug!(%error, ids = ids.len(), "terminating instances together failed; terminating them one by one");
                    Vec::new()
                }
            };
            let (parts, retry) = batch::split_by_id(&asked, &batch::terminating(&changes));
            let retried = join_all(retry.iter().map(|id| instances::terminate(&clients, id))).await;
            asked
                .iter()
                .zip(parts)
                .map(|(id, part)| match part {
                    Some(()) => Ok(()),
                    None => retry
                        .iter()
                        .zip(&retried)
                        .find(|(r, _)| *r == id)
                        .map_or(Ok(()), |(_, r)| r.clone()),
                })
                .collect()
        }
        .boxed()
    })
}
