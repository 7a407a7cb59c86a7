//! `ValidationSucceeded`'s authorization checks (upstream's validation controller): before a
//! class is Ready, the calls a launch makes are tried the way EC2 allows without launching —
//! `CreateLaunchTemplate` for real (one on-demand template for one instance type, the one the
//! first launch would use anyway), then `CreateFleet` and `RunInstances` with `DryRun` — so a
//! controller role that may not launch shows on the class, naming the call, instead of on every
//! NodeClaim after it was created.
//!
//! This module decides what each answer means ([`verdict`]) and when an answer may be reused
//! ([`cache_key`], [`TTL`]); the provider makes the calls.

use std::collections::BTreeMap;
use std::time::Duration;

use karpenter_api::v1::EC2NodeClass;
use serde::Serialize;

use super::status::Outcome;

/// How long a verdict is reused for an unchanged class (upstream's `ValidationTTL`).
pub const TTL: Duration = Duration::from_secs(30 * 60);

/// The reason when `CreateLaunchTemplate` refuses the user data's size.
pub const USER_DATA_TOO_LARGE: &str = "UserDataSizeLimitExceeded";

/// The checks, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    CreateLaunchTemplate,
    CreateFleet,
    RunInstances,
}

impl Check {
    /// The `ValidationSucceeded` reason when the call is refused.
    pub fn reason(self) -> &'static str {
        match self {
            Check::CreateLaunchTemplate => "CreateLaunchTemplateAuthCheckFailed",
            Check::CreateFleet => "CreateFleetAuthCheckFailed",
            Check::RunInstances => "RunInstancesAuthCheckFailed",
        }
    }

    /// `ec2:CreateFleet`.
    pub fn operation(self) -> &'static str {
        match self {
            Check::CreateLaunchTemplate => "ec2:CreateLaunchTemplate",
            Check::CreateFleet => "ec2:CreateFleet",
            Check::RunInstances => "ec2:RunInstances",
        }
    }
}

/// What one call answered: `None` (it would have worked: `DryRunOperation`, or the template
/// exists), else AWS's error code and message.
pub type Answer<'a> = Option<(&'a str, &'a str)>;

/// What an answer means for the class.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The call would work: go on to the next check.
    Passed,
    /// The class is not valid, for as long as the cache keeps the verdict.
    Invalid { reason: String, message: String },
    /// EC2 could not answer now (throttled, an internal error, an instance profile EC2 does
    /// not see yet): ask again on the next reconcile; the condition stays as it was.
    Retry(String),
}

const THROTTLED: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "InternalError",
    "InternalFailure",
    "ServiceUnavailable",
    "Unavailable",
    "Dispatch",
    "Timeout",
];

/// What `check`'s answer means.
pub fn verdict(check: Check, answer: Answer<'_>) -> Verdict {
    let Some((code, message)) = answer else {
        return Verdict::Passed;
    };
    if code == "DryRunOperation" {
        return Verdict::Passed;
    }
    if THROTTLED.contains(&code) {
        return Verdict::Retry(format!("{}: {code}: {message}", check.operation()));
    }
    let denied = matches!(
        code,
        "UnauthorizedOperation" | "AccessDenied" | "AccessDeniedException"
    );
    if check == Check::CreateLaunchTemplate
        && !denied
        && message.to_ascii_lowercase().contains("user data")
        && message.to_ascii_lowercase().contains("too large")
    {
        return Verdict::Invalid {
            reason: USER_DATA_TOO_LARGE.into(),
            message: format!(
                "ec2:CreateLaunchTemplate rejected the rendered user data as too large: {message}"
            ),
        };
    }
    if check == Check::RunInstances
        && code == "InvalidParameterValue"
        && message.contains("iamInstanceProfile")
    {
        // Upstream: most likely eventual consistency of a profile just made.
        return Verdict::Retry(format!("{}: {code}: {message}", check.operation()));
    }
    if denied {
        return Verdict::Invalid {
            reason: check.reason().into(),
            message: format!(
                "Controller isn't authorized to call {}: {code}: {message} (`karpenter iam policy` prints the policy it needs)",
                check.operation()
            ),
        };
    }
    // Upstream treats any other answer to a dry run as an unexpected state and retries.
    Verdict::Retry(format!(
        "{}: unexpected answer to a dry run: {code}: {message}",
        check.operation()
    ))
}

impl Verdict {
    /// As the `ValidationSucceeded` outcome, `None` while there is none to give.
    pub fn outcome(&self) -> Option<Outcome<()>> {
        match self {
            Verdict::Passed => Some(Outcome::Ready(())),
            Verdict::Invalid { reason, message } => Some(Outcome::not_ready(reason, message)),
            Verdict::Retry(_) => None,
        }
    }
}

#[derive(Serialize)]
struct KeyParts<'a> {
    spec: &'a karpenter_api::v1::EC2NodeClassSpec,
    status: Option<&'a karpenter_api::v1::EC2NodeClassStatus>,
    annotations: Option<&'a BTreeMap<String, String>>,
    tags: &'a BTreeMap<String, String>,
}

/// What a verdict depends on (upstream's cache key): the class's spec, annotations, resolved
/// subnets, security groups, AMIs and instance profile, and the tags a launch sets. Conditions
/// are left out: they are what the verdict writes.
pub fn cache_key(class: &EC2NodeClass, tags: &BTreeMap<String, String>) -> String {
    let status = class.status.as_ref().map(|s| {
        let mut s = s.clone();
        s.conditions = None;
        s
    });
    let parts = KeyParts {
        spec: &class.spec,
        status: status.as_ref(),
        annotations: class.metadata.annotations.as_ref(),
        tags,
    };
    let json = serde_json::to_string(&parts).unwrap_or_default();
    format!(
        "{}:{:016x}",
        class.metadata.name.as_deref().unwrap_or_default(),
        karpenter_api::hash::fnv1a64(json.as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dry_run_that_would_have_worked_passes() {
        assert_eq!(
            verdict(
                Check::CreateFleet,
                Some((
                    "DryRunOperation",
                    "Request would have succeeded, but DryRun flag is set."
                ))
            ),
            Verdict::Passed
        );
        assert_eq!(verdict(Check::CreateLaunchTemplate, None), Verdict::Passed);
    }

    #[test]
    fn a_refused_call_names_its_check_and_the_call() {
        for check in [
            Check::CreateLaunchTemplate,
            Check::CreateFleet,
            Check::RunInstances,
        ] {
            let Verdict::Invalid { reason, message } = verdict(
                check,
                Some(("UnauthorizedOperation", "You are not authorized")),
            ) else {
                panic!("{check:?}: a refusal is a verdict");
            };
            assert_eq!(reason, check.reason());
            assert!(
                message.starts_with(&format!(
                    "Controller isn't authorized to call {}",
                    check.operation()
                )),
                "{message}"
            );
        }
    }

    #[test]
    fn throttling_and_unexpected_answers_are_asked_again_without_a_verdict() {
        for code in ["RequestLimitExceeded", "InternalError", "InvalidParameter"] {
            let v = verdict(Check::RunInstances, Some((code, "x")));
            assert!(matches!(v, Verdict::Retry(_)), "{code}: {v:?}");
            assert_eq!(v.outcome(), None);
        }
        assert!(matches!(
            verdict(
                Check::RunInstances,
                Some((
                    "InvalidParameterValue",
                    "Value (x) for parameter iamInstanceProfile.name is invalid"
                ))
            ),
            Verdict::Retry(_)
        ));
    }

    #[test]
    fn user_data_too_large_is_its_own_reason() {
        let v = verdict(
            Check::CreateLaunchTemplate,
            Some((
                "InvalidParameterValue",
                "User data is too large: 20000 bytes",
            )),
        );
        assert!(
            matches!(&v, Verdict::Invalid { reason, .. } if reason == "UserDataSizeLimitExceeded"),
            "{v:?}"
        );
    }

    fn class(json: serde_json::Value) -> EC2NodeClass {
        serde_json::from_value(json).expect("a class")
    }

    #[test]
    fn the_key_moves_with_what_a_launch_uses_and_not_with_the_conditions() {
        let base = serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": [{"id": "subnet-1"}],
                     "securityGroupSelectorTerms": [{"id": "sg-1"}]},
            "status": {"subnets": [{"id": "subnet-1", "zone": "us-west-2a"}],
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                                       "lastTransitionTime": "2026-11-27T00:00:00Z"}]}
        });
        let tags = BTreeMap::from([("k".to_owned(), "v".to_owned())]);
        let key = cache_key(&class(base.clone()), &tags);
        assert!(key.starts_with("default:"), "{key}");
        let mut other_conditions = base.clone();
        other_conditions["status"]["conditions"][0]["status"] = "False".into();
        assert_eq!(cache_key(&class(other_conditions), &tags), key);
        let mut other_subnet = base.clone();
        other_subnet["status"]["subnets"][0]["id"] = "subnet-2".into();
        assert_ne!(cache_key(&class(other_subnet), &tags), key);
        let mut other_spec = base.clone();
        other_spec["spec"]["role"] = "r2".into();
        assert_ne!(cache_key(&class(other_spec), &tags), key);
        assert_ne!(cache_key(&class(base), &BTreeMap::new()), key);
    }
}
