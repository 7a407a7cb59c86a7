//! Where a policy applies: cluster, region, partition, account, queue and node role.
//!
//! The contract and the generator are written with placeholders (`{partition}`, `{region}`,
//! `{account}`, `{cluster}`, `{queue_arn}`, `{node_role_arn}`, `{ec2_principal}`); a [`Scope`]
//! fills them in, either with concrete values (for `karpenter iam policy` and the audit) or with
//! CloudFormation references (`${AWS::Region}`, `${ClusterName}`, ...) for the template.
//!
//! **Account default.** Without `--account-id` the account segment of generated ARNs is `*`:
//! the policy is valid as printed and still pinned by partition, region, cluster name, role name
//! and queue name; IAM roles, instance profiles, EKS clusters and SQS queues of other accounts
//! are not reachable through an identity policy alone. EC2 ARNs use `*` for the account in any
//! case (as upstream does), because shared AMIs, snapshots and subnets belong to other accounts.
//! Pass `--account-id` to pin the IAM, EKS and SQS ARNs to one account.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// An AWS partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Partition {
    #[serde(rename = "aws")]
    Aws,
    #[serde(rename = "aws-cn")]
    AwsCn,
    #[serde(rename = "aws-us-gov")]
    AwsUsGov,
}

impl Partition {
    pub fn name(self) -> &'static str {
        match self {
            Partition::Aws => "aws",
            Partition::AwsCn => "aws-cn",
            Partition::AwsUsGov => "aws-us-gov",
        }
    }

    /// The partition a region belongs to.
    pub fn of_region(region: &str) -> Partition {
        if region.starts_with("cn-") {
            Partition::AwsCn
        } else if region.starts_with("us-gov-") {
            Partition::AwsUsGov
        } else {
            Partition::Aws
        }
    }

    /// EC2's service principal, the value of `iam:PassedToService` when passing a role to EC2.
    pub fn ec2_principal(self) -> &'static str {
        match self {
            Partition::AwsCn => "ec2.amazonaws.com.cn",
            _ => "ec2.amazonaws.com",
        }
    }

    /// Another region of the same partition (probes use it for "outside the region").
    pub fn other_region(self, region: &str) -> &'static str {
        let (a, b) = match self {
            Partition::Aws => ("us-east-1", "eu-west-1"),
            Partition::AwsCn => ("cn-north-1", "cn-northwest-1"),
            Partition::AwsUsGov => ("us-gov-west-1", "us-gov-east-1"),
        };
        if region == a { b } else { a }
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Partition {
    type Err = ScopeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "aws" => Ok(Partition::Aws),
            "aws-cn" => Ok(Partition::AwsCn),
            "aws-us-gov" => Ok(Partition::AwsUsGov),
            other => Err(ScopeError::UnknownPartition(other.to_string())),
        }
    }
}

/// A scope that could not be built from the user's flags.
#[derive(Debug, thiserror::Error)]
pub enum ScopeError {
    #[error(
        "invalid cluster name {0:?}: EKS cluster names are 1-100 characters, start with a letter or digit and contain only letters, digits, '-' and '_'"
    )]
    ClusterName(String),
    #[error("invalid region {0:?}: expected a region code such as us-west-2")]
    Region(String),
    #[error("invalid account id {0:?}: expected 12 digits")]
    AccountId(String),
    #[error("unknown partition {0:?}: expected aws, aws-cn or aws-us-gov")]
    UnknownPartition(String),
    #[error("region {region} is in partition {expected}, not {given}")]
    PartitionMismatch {
        region: String,
        expected: Partition,
        given: Partition,
    },
    #[error("invalid {what} {value:?}: expected an ARN starting with arn:{partition}:")]
    Arn {
        what: &'static str,
        value: String,
        partition: Partition,
    },
}

/// Concrete (or CloudFormation) values for the contract's placeholders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Scope {
    pub cluster: String,
    pub region: String,
    pub partition: String,
    /// 12 digits, `*`, or `${AWS::AccountId}`.
    pub account: String,
    pub interruption_queue_arn: String,
    pub node_role_arn: String,
    /// `iam:PassedToService` value the controller's PassRole carries.
    pub ec2_principal: String,
    /// The partition as a value (CloudFormation scopes use `aws` for principals only).
    #[serde(skip)]
    pub partition_kind: Partition,
}

/// The account a scope uses when none is given: `*` (see the module docs).
pub const ANY_ACCOUNT: &str = "*";

impl Scope {
    /// A scope for a cluster in a region. `partition` defaults to the region's; an explicit one
    /// must agree with it.
    pub fn new(
        cluster: &str,
        region: &str,
        partition: Option<Partition>,
    ) -> Result<Scope, ScopeError> {
        validate_cluster(cluster)?;
        validate_region(region)?;
        let expected = Partition::of_region(region);
        let partition = partition.unwrap_or(expected);
        if partition != expected {
            return Err(ScopeError::PartitionMismatch {
                region: region.to_string(),
                expected,
                given: partition,
            });
        }
        let mut scope = Scope {
            cluster: cluster.to_string(),
            region: region.to_string(),
            partition: partition.name().to_string(),
            account: ANY_ACCOUNT.to_string(),
            interruption_queue_arn: String::new(),
            node_role_arn: String::new(),
            ec2_principal: partition.ec2_principal().to_string(),
            partition_kind: partition,
        };
        scope.reset_defaults();
        Ok(scope)
    }

    /// The placeholders of the getting-started CloudFormation template.
    pub fn cloudformation() -> Scope {
        Scope {
            cluster: "${ClusterName}".into(),
            region: "${AWS::Region}".into(),
            partition: "${AWS::Partition}".into(),
            account: "${AWS::AccountId}".into(),
            interruption_queue_arn: "${KarpenterInterruptionQueue.Arn}".into(),
            node_role_arn: "${KarpenterNodeRole.Arn}".into(),
            ec2_principal: "ec2.${AWS::URLSuffix}".into(),
            partition_kind: Partition::Aws,
        }
    }

    /// Pins the account (12 digits).
    pub fn with_account(mut self, account: &str) -> Result<Scope, ScopeError> {
        if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ScopeError::AccountId(account.to_string()));
        }
        let queue_default = self.interruption_queue_arn == self.default_queue_arn();
        let role_default = self.node_role_arn == self.default_node_role_arn();
        self.account = account.to_string();
        if queue_default {
            self.interruption_queue_arn = self.default_queue_arn();
        }
        if role_default {
            self.node_role_arn = self.default_node_role_arn();
        }
        Ok(self)
    }

    /// Sets the interruption queue ARN (default: the queue named after the cluster).
    pub fn with_interruption_queue_arn(mut self, arn: &str) -> Result<Scope, ScopeError> {
        self.check_arn("interruption queue ARN", arn, ":sqs:")?;
        self.interruption_queue_arn = arn.to_string();
        Ok(self)
    }

    /// Sets the node role ARN (default: `KarpenterNodeRole-<cluster>`).
    pub fn with_node_role_arn(mut self, arn: &str) -> Result<Scope, ScopeError> {
        self.check_arn("node role ARN", arn, ":iam::")?;
        self.node_role_arn = arn.to_string();
        Ok(self)
    }

    fn check_arn(&self, what: &'static str, arn: &str, service: &str) -> Result<(), ScopeError> {
        let prefix = format!("arn:{}:", self.partition);
        if !arn.starts_with(&prefix) || !arn.contains(service) {
            return Err(ScopeError::Arn {
                what,
                value: arn.to_string(),
                partition: self.partition_kind,
            });
        }
        Ok(())
    }

    fn default_queue_arn(&self) -> String {
        format!(
            "arn:{}:sqs:{}:{}:{}",
            self.partition, self.region, self.account, self.cluster
        )
    }

    fn default_node_role_arn(&self) -> String {
        format!(
            "arn:{}:iam::{}:role/KarpenterNodeRole-{}",
            self.partition, self.account, self.cluster
        )
    }

    fn reset_defaults(&mut self) {
        self.interruption_queue_arn = self.default_queue_arn();
        self.node_role_arn = self.default_node_role_arn();
    }

    /// Fills in the placeholders of a contract template.
    pub fn render(&self, template: &str) -> String {
        if !template.contains('{') {
            return template.to_string();
        }
        template
            .replace("{partition}", &self.partition)
            .replace("{region}", &self.region)
            .replace("{account}", &self.account)
            .replace("{cluster}", &self.cluster)
            .replace("{queue_arn}", &self.interruption_queue_arn)
            .replace("{node_role_arn}", &self.node_role_arn)
            .replace("{ec2_principal}", &self.ec2_principal)
    }
}

fn validate_cluster(name: &str) -> Result<(), ScopeError> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(ScopeError::ClusterName(name.to_string()))
    }
}

fn validate_region(region: &str) -> Result<(), ScopeError> {
    // <letters>(-<letters>)+-<digits>, e.g. us-west-2, ap-southeast-1, us-gov-west-1.
    let parts: Vec<&str> = region.split('-').collect();
    let ok = parts.len() >= 3
        && parts[..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
        && parts
            .last()
            .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if ok {
        Ok(())
    } else {
        Err(ScopeError::Region(region.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_partition_is_inferred_from_the_region_and_checked_when_given() {
        let s = Scope::new("c", "cn-north-1", None).unwrap();
        assert_eq!(s.partition, "aws-cn");
        assert_eq!(s.ec2_principal, "ec2.amazonaws.com.cn");
        assert!(matches!(
            Scope::new("c", "us-gov-west-1", Some(Partition::Aws)),
            Err(ScopeError::PartitionMismatch { .. })
        ));
    }

    #[test]
    fn defaults_follow_the_account_once_it_is_pinned() {
        let s = Scope::new("demo", "us-west-2", None).unwrap();
        assert_eq!(
            s.node_role_arn,
            "arn:aws:iam::*:role/KarpenterNodeRole-demo"
        );
        let s = s.with_account("111122223333").unwrap();
        assert_eq!(
            s.interruption_queue_arn,
            "arn:aws:sqs:us-west-2:111122223333:demo"
        );
        assert_eq!(
            s.node_role_arn,
            "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo"
        );
    }

    #[test]
    fn bad_flags_are_rejected() {
        assert!(Scope::new("", "us-west-2", None).is_err());
        assert!(Scope::new("a b", "us-west-2", None).is_err());
        assert!(Scope::new("c", "uswest2", None).is_err());
        let s = Scope::new("c", "us-west-2", None).unwrap();
        assert!(s.clone().with_account("12345").is_err());
        assert!(
            s.clone()
                .with_node_role_arn("arn:aws-cn:iam::1:role/x")
                .is_err()
        );
        assert!(s.with_interruption_queue_arn("my-queue").is_err());
    }
}
