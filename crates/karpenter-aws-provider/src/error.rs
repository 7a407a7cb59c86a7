//! AWS errors as the provider reports them: the operation that failed, AWS's error code and
//! message, and whether trying again may help. An access denial names the IAM action, so an
//! operator can compare it with `karpenter iam policy`.

use std::fmt;

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
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

/// The code and message of an error answer the SDK could not parse (an error body in another
/// protocol than the service's, as a proxy or an emulator may send): `<Code>`/`<Message>` of an
/// XML body or `__type`/`message` of a JSON one, else the HTTP status's meaning (403 access
/// denied, 429 and 503 throttling, other 5xx an internal error). `None` for a status that says
/// nothing (a 2xx or 3xx the SDK failed to read).
fn unparsed(status: u16, body: &[u8]) -> Option<(String, String)> {
    let text = String::from_utf8_lossy(body);
    let between = |open: &str, close: &str| -> Option<String> {
        let start = text.find(open)? + open.len();
        let end = text[start..].find(close)? + start;
        Some(text[start..end].trim().to_owned())
    };
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let code = between("<Code>", "</Code>").or_else(|| {
        let kind = json.as_ref()?.get("__type")?.as_str()?;
        Some(kind.rsplit('#').next().unwrap_or(kind).to_owned())
    });
    let message = between("<Message>", "</Message>").or_else(|| {
        let value = json.as_ref()?;
        let message = value.get("message").or_else(|| value.get("Message"))?;
        Some(message.as_str()?.to_owned())
    });
    let by_status = match status {
        403 => "AccessDenied",
        429 | 503 => "Throttling",
        500..=599 => "InternalError",
        _ => return code.map(|c| (c, message.unwrap_or_default())),
    };
    Some((
        code.unwrap_or_else(|| by_status.to_owned()),
        message.unwrap_or_else(|| format!("HTTP {status}")),
    ))
}

impl AwsError {
    /// From an SDK error of `operation`.
    pub fn from_sdk<E>(
        operation: &'static str,
        error: &aws_sdk_ec2::error::SdkError<E, HttpResponse>,
    ) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        use aws_sdk_ec2::error::SdkError;
        let (code, message) = match error {
            SdkError::ServiceError(service) => {
                let inner = service.err();
                let raw = service.raw();
                match inner.code() {
                    Some(code) => (
                        code.to_owned(),
                        inner.message().map_or_else(
                            || {
                                aws_smithy_types::error::display::DisplayErrorContext(error)
                                    .to_string()
                            },
                            str::to_owned,
                        ),
                    ),
                    // The SDK read the answer as an error but found no code in it.
                    None => unparsed(
                        raw.status().as_u16(),
                        raw.body().bytes().unwrap_or_default(),
                    )
                    .unwrap_or_else(|| {
                        (
                            "Unknown".to_owned(),
                            aws_smithy_types::error::display::DisplayErrorContext(error)
                                .to_string(),
                        )
                    }),
                }
            }
            SdkError::TimeoutError(_) => ("Timeout".to_owned(), "the request timed out".to_owned()),
            SdkError::DispatchFailure(failure) => (
                "Dispatch".to_owned(),
                format!("{:?}", failure.as_connector_error()),
            ),
            SdkError::ResponseError(response) => {
                let raw = response.raw();
                unparsed(
                    raw.status().as_u16(),
                    raw.body().bytes().unwrap_or_default(),
                )
                .unwrap_or_else(|| {
                    (
                        "Response".to_owned(),
                        aws_smithy_types::error::display::DisplayErrorContext(error).to_string(),
                    )
                })
            }
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
    fn an_error_answer_in_another_protocol_is_still_read_for_its_code_and_message() {
        let xml = br#"<?xml version="1.0"?><ErrorResponse><Errors><Error><Code>AccessDenied</Code><Message>User: u is not authorized to perform: ssm:GetParameter</Message></Error></Errors></ErrorResponse>"#;
        assert_eq!(
            unparsed(403, xml),
            Some((
                "AccessDenied".to_owned(),
                "User: u is not authorized to perform: ssm:GetParameter".to_owned()
            ))
        );
        let json = br#"{"__type": "com.amazon#ThrottlingException", "message": "Rate exceeded"}"#;
        assert_eq!(
            unparsed(400, json),
            Some(("ThrottlingException".to_owned(), "Rate exceeded".to_owned()))
        );
        assert_eq!(
            unparsed(503, b"<html>busy</html>"),
            Some(("Throttling".to_owned(), "HTTP 503".to_owned()))
        );
        assert_eq!(unparsed(200, b"garbage"), None);
        let denied = AwsError::new("ssm:GetParameter", "AccessDenied", "no");
        assert!(denied.is_access_denied());
        assert!(AwsError::new("ec2:CreateFleet", "Throttling", "slow").is_retryable());
    }

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
