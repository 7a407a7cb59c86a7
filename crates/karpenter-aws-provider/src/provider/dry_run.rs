//! The authorization checks behind an EC2NodeClass's `ValidationSucceeded` (upstream's
//! validation controller): the launch template the first on-demand launch would use is made for
//! real, then `CreateFleet` and `RunInstances` are asked with `DryRun`.
//! [`karpenter_aws::nodeclass::dry_run`] says what each answer means.

use aws_sdk_ec2::types::{
    InstanceNetworkInterfaceSpecification, LaunchTemplateSpecification, ResourceType,
};
use karpenter_api::labels;
use karpenter_api::v1::{EC2NodeClass, NodeClaim, NodePool};
use karpenter_aws::launch::fleet;
use karpenter_aws::launch::plan;
use karpenter_aws::launch::tenancy;
use karpenter_aws::launch_template::{self, LaunchTemplateRequest};
use karpenter_aws::nodeclass::dry_run::{Check, Verdict, verdict};
use karpenter_cloud::pool_types::narrow;

use super::{AwsCloud, NodeClasses};
use crate::error::AwsError;

/// What the checks concluded.
#[derive(Debug, Clone, PartialEq)]
pub enum DryRun {
    /// Every check passed, or one refused (the verdict to keep for [`karpenter_aws::nodeclass::dry_run::TTL`]).
    Done(Verdict),
    /// Nothing to conclude now (throttled, an unexpected answer, no instance type to try):
    /// the condition stays as it was and the checks run again on the next reconcile.
    Retry(String),
}

/// The NodeClaim upstream's checks launch for: the class, the requirements of `pool` (if a
/// NodePool uses the class) but the capacity type, which is on-demand.
pub fn probe_claim(class: &EC2NodeClass, pool: Option<&NodePool>) -> Option<NodeClaim> {
    let mut requirements: Vec<serde_json::Value> = pool
        .map(|p| p.spec.template.spec.requirements.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|r| r.key != labels::CAPACITY_TYPE)
        .filter_map(|r| serde_json::to_value(r).ok())
        .collect();
    requirements.push(serde_json::json!(
        {"key": labels::CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}
    ));
    let spec = serde_json::from_value(serde_json::json!({
        "requirements": requirements,
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                         "name": class.metadata.name.clone().unwrap_or_default()},
    }))
    .ok()?;
    Some(NodeClaim::new("", spec))
}

/// A NodePool with no requirements of the class, for a class no NodePool uses yet.
fn open_pool(class: &EC2NodeClass) -> Option<NodePool> {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": ""},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                             "name": class.metadata.name.clone().unwrap_or_default()},
            "requirements": []}}}
    }))
    .ok()
}

fn answer(error: &AwsError) -> Option<(&str, &str)> {
    Some((error.code.as_str(), error.message.as_str()))
}

impl<L: NodeClasses> AwsCloud<L> {
    /// Upstream's authorization checks for `class` (its status resolved: subnets and AMIs),
    /// launching as `pool` would (the first NodePool that uses the class, if any).
    pub async fn authorization_dry_runs(
        &self,
        class: &EC2NodeClass,
        pool: Option<&NodePool>,
    ) -> DryRun {
        let Some(mut claim) = probe_claim(class, pool) else {
            return DryRun::Retry("the probe NodeClaim could not be made".to_owned());
        };
        let open;
        let pool = match pool {
            Some(pool) => pool,
            None => match open_pool(class) {
                Some(pool) => {
                    open = pool;
                    &open
                }
                None => return DryRun::Retry("no NodePool to launch as".to_owned()),
            },
        };
        let infos = match self.resolved(pool, class, None) {
            Ok(infos) => infos,
            Err(error) => return DryRun::Retry(format!("no instance type to try: {error}")),
        };
        // The types the probe may launch (upstream's getPrioritizedInstanceTypes): those of
        // the class the NodePool's requirements and on-demand allow, named in the claim as a
        // launch's NodeClaim names them.
        let allowed = narrow(
            &infos,
            &karpenter_scheduling::v1::node_claim_requirements(&claim),
        )
        .infos;
        if allowed.is_empty() {
            return DryRun::Retry("no instance type the NodePool allows on-demand".to_owned());
        }
        claim.spec.requirements.push(
            match serde_json::from_value(serde_json::json!({
                "key": labels::INSTANCE_TYPE, "operator": "In",
                "values": allowed.iter().map(|i| i.name.clone()).collect::<Vec<_>>(),
            })) {
                Ok(requirement) => requirement,
                Err(error) => return DryRun::Retry(format!("the probe's instance types: {error}")),
            },
        );
        let by_name: std::collections::HashMap<&str, &karpenter_cloud::InstanceTypeInfo> =
            allowed.iter().map(|i| (i.name.as_str(), i)).collect();
        let plan = match plan::plan(&claim, class, &|n| by_name.get(n).copied(), &|_, _| false) {
            Ok(plan) => plan,
            Err(error) => return DryRun::Retry(format!("no instance type to try: {error}")),
        };
        let Some(group) = plan.groups.first() else {
            return DryRun::Retry("no instance type to try".to_owned());
        };
        let Some(first) = group
            .instance_types
            .first()
            .and_then(|n| by_name.get(n.as_str()))
        else {
            return DryRun::Retry("no instance type to try".to_owned());
        };
        let family = class.spec.resolved_ami_family();
        let facts = match self
            .cluster_facts(family == Some(karpenter_api::v1::AmiFamily::AL2023))
            .await
        {
            Ok(facts) => facts,
            Err(error) => return DryRun::Retry(format!("the cluster's facts: {error}")),
        };
        let one = [(*first).clone()];
        let template = match launch_template::build(&LaunchTemplateRequest {
            node_class: class,
            node_claim: &claim,
            cluster: &facts,
            region: &self.clients.region,
            image_id: &group.image_id,
            instance_types: &one,
            capacity_type: "on-demand",
            tenancy: tenancy::for_claim(&claim),
            placement: None,
            capacity_reservation: self.reservation_launch(None),
        }) {
            Ok(template) => template,
            Err(error) => return DryRun::Retry(format!("the launch template: {error}")),
        };
        // 1. CreateLaunchTemplate, for real (it is the template a launch would use).
        if let Err(error) = self.templates.ensure(&self.clients, &template).await {
            // A refused DescribeLaunchTemplates says nothing about CreateLaunchTemplate.
            if error.operation != "ec2:CreateLaunchTemplate" {
                return DryRun::Retry(error.to_string());
            }
            return self.concluded(Check::CreateLaunchTemplate, &error);
        }
        let tags = launch_template::launch_tags(class, &claim, &self.settings.cluster_name);
        let subnets: Vec<String> = class
            .status
            .as_ref()
            .and_then(|s| s.subnets.as_ref())
            .map(|s| s.iter().map(|s| s.id.clone()).collect())
            .unwrap_or_default();
        // 2. CreateFleet, dry: the template for its instance type in every subnet.
        let mut probe = plan.clone();
        probe.groups.truncate(1);
        if let Some(g) = probe.groups.first_mut() {
            g.instance_types.truncate(1);
            let name = g.instance_types.first().cloned().unwrap_or_default();
            let image = g.image_id.clone();
            g.overrides = subnets
                .iter()
                .filter_map(|id| {
                    let zone = class
                        .status
                        .as_ref()?
                        .subnets
                        .as_ref()?
                        .iter()
                        .find(|s| &s.id == id)?
                        .zone
                        .clone();
                    Some(plan::Override {
                        instance_type: name.clone(),
                        zone,
                        subnet_id: id.clone(),
                        image_id: image.clone(),
                        priority: 0.0,
                    })
                })
                .collect();
        }
        let request = fleet::request(
            &probe,
            std::slice::from_ref(&template.name),
            tags.clone(),
            class.spec.context.clone(),
        );
        let fleet = crate::fleet::call(&self.clients.ec2, &request, 1)
            .dry_run(true)
            .send()
            .await;
        if let Err(error) = fleet {
            let error = AwsError::from_sdk("ec2:CreateFleet", &error);
            if let Verdict::Invalid { .. } | Verdict::Retry(_) =
                verdict(Check::CreateFleet, answer(&error))
            {
                return self.concluded(Check::CreateFleet, &error);
            }
        }
        // 3. RunInstances, dry, subnet by subnet until one would work; the first subnet's
        //    answer decides otherwise (authorization is not per subnet).
        let tag_spec = |kind| crate::fleet::tag_specification(&tags, kind);
        let mut first_error: Option<AwsError> = None;
        for subnet in &subnets {
            let run = self
                .clients
                .ec2
                .run_instances()
                .dry_run(true)
                .min_count(1)
                .max_count(1)
                .launch_template(
                    LaunchTemplateSpecification::builder()
                        .launch_template_name(&template.name)
                        .version("$Latest")
                        .build(),
                )
                .instance_type(first.name.as_str().into())
                .network_interfaces(
                    InstanceNetworkInterfaceSpecification::builder()
                        .device_index(0)
                        .subnet_id(subnet)
                        .build(),
                )
                .tag_specifications(tag_spec(ResourceType::Instance))
                .tag_specifications(tag_spec(ResourceType::Volume))
                .tag_specifications(tag_spec(ResourceType::NetworkInterface))
                .send()
                .await;
            match run {
                Ok(_) => return DryRun::Done(Verdict::Passed),
                Err(error) => {
                    let error = AwsError::from_sdk("ec2:RunInstances", &error);
                    if verdict(Check::RunInstances, answer(&error)) == Verdict::Passed {
                        return DryRun::Done(Verdict::Passed);
                    }
                    first_error.get_or_insert(error);
                }
            }
        }
        match first_error {
            Some(error) => self.concluded(Check::RunInstances, &error),
            None => DryRun::Retry("the class has no subnet to try".to_owned()),
        }
    }

    fn concluded(&self, check: Check, error: &AwsError) -> DryRun {
        match verdict(check, answer(error)) {
            Verdict::Retry(why) => DryRun::Retry(why),
            done => DryRun::Done(done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_launches_on_demand_with_the_pools_other_requirements() {
        let class: EC2NodeClass = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": [{"id": "subnet-1"}],
                     "securityGroupSelectorTerms": [{"id": "sg-1"}]}
        }))
        .expect("a class");
        let pool: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
                ]}}}
        }))
        .expect("a pool");
        let claim = probe_claim(&class, Some(&pool)).expect("a probe claim");
        let keys: Vec<(&str, &[String])> = claim
            .spec
            .requirements
            .iter()
            .map(|r| (r.key.as_str(), r.values.as_slice()))
            .collect();
        assert_eq!(
            keys,
            [
                ("kubernetes.io/arch", &["arm64".to_owned()][..]),
                ("karpenter.sh/capacity-type", &["on-demand".to_owned()][..]),
            ]
        );
        assert_eq!(claim.spec.node_class_ref.name, "default");
    }
}
