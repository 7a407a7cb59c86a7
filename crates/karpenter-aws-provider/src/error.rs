//! AWS errors as the provider reports them: the operation that failed, AWS's error code and
//! message, and whether trying again may help. An access denial names the IAM action, so an
//! operator can compare it with `karpenter iam policy`.

use std::fmt;

use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use karpenter_cloud::CloudError;

/// Error codes EC2, IAM and the other services use for "not permitted".
const DENIED_CODES: &[&str] = &[
    "AccessDenied",
    "AccessDeniedException",
    "UnauthorizedOperation",
    "AuthFailure",
];

/// Codes worth retrying as is.
const RETRYABLE_CODES: &[&str] = &[
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "InternalError",
    "InternalFailure",
    "ServiceUnavailable",
    "Unavailable",
];

/// A failed AWS call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsError {
    /// `ec2:CreateFleet`.
    pub operation: &'static str,
    /// AWS's code (`UnauthorizedOperation`), or `Dispatch`/`Timeout`/`Response` when no
    /// service error came back.
    pub code: String,
    pub message: String,
}

impl fmt::Display for AwsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.operation, self.detail())
    }
}

impl std::error::Error for AwsError {}

impl AwsError {
    /// From an SDK error of `operation`.
    pub fn from_sdk<E, R>(
        operation: &'static str,
        error: &aws_sdk_ec2::error::SdkError<E, R>,
    ) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: fmt::Debug,
    {
        use aws_sdk_ec2::error::SdkError;
        let (code, message) = match error {
            SdkError::ServiceError(service) => {
                let inner = service.err();
                (
                    inner.code().unwrap_or("Unknown").to_owned(),
                    inner.message().map_or_else(
                        || aws_smithy_types::error::display::DisplayErrorContext(error).to_string(),
                        str::to_owned,
                    ),
                )
            }
            SdkError::TimeoutError(_) => ("Timeout".to_owned(), "the request timed out".to_owned()),
            SdkError::DispatchFailure(failure) => (
                "Dispatch".to_owned(),
                format!("{:?}", failure.as_connector_error()),
            ),
            other => (
                "Response".to_owned(),
                aws_smithy_types::error::display::DisplayErrorContext(other).to_string(),
            ),
        };
        AwsError {
            operation,
            code,
            message,
        }
    }

    /// An error with a code and message of our own (a malformed answer).
    pub fn new(operation: &'static str, code: &str, message: impl Into<String>) -> Self {
        AwsError {
            operation,
            code: code.to_owned(),
            message: message.into(),
        }
    }

    /// What went wrong, without the operation: the code and AWS's message (an access denial
    /// also says what the policy must allow).
    pub fn detail(&self) -> String {
        if self.is_access_denied() {
            format!(
                "access denied ({}): {}; the controller's IAM policy must allow {} (`karpenter iam policy` prints the policy it needs)",
                self.code, self.message, self.operation
            )
        } else {
            format!("{}: {}", self.code, self.message)
        }
    }

    pub fn is_access_denied(&self) -> bool {
        DENIED_CODES.contains(&self.code.as_str())
    }

    pub fn is_retryable(&self) -> bool {
        RETRYABLE_CODES.contains(&self.code.as_str())
            || self.code == "Dispatch"
            || self.code == "Timeout"
    }

    /// `InvalidInstanceID.NotFound`, `NoSuchEntity`, `ParameterNotFound`, ...
    pub fn is_not_found(&self) -> bool {
        self.code.contains("NotFound")
            || self.code == "NoSuchEntity"
            || self.code == "ResourceNotFoundException"
    }

    /// As the controller's cloud error.
    pub fn into_cloud(self) -> CloudError {
        CloudError::Provider {
            operation: self.operation,
            retryable: self.is_retryable(),
            message: self.detail(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denial_names_the_operation_and_points_at_the_policy() {
        let error = AwsError::new(
            "ec2:CreateLaunchTemplate",
            "AccessDenied",
            "User: arn:aws:iam::123456789012:user/k is not authorized to perform: ec2:CreateLaunchTemplate",
        );
        let text = error.to_string();
        assert!(text.contains("access denied"), "{text}");
        assert!(
            text.contains("must allow ec2:CreateLaunchTemplate"),
            "{text}"
        );
        assert!(!error.is_retryable());
        assert!(
            AwsError::new("ec2:DescribeSubnets", "RequestLimitExceeded", "slow down")
                .is_retryable()
        );
        assert!(
            AwsError::new(
                "ec2:DescribeInstances",
                "InvalidInstanceID.NotFound",
                "gone"
            )
            .is_not_found()
        );
    }
}
