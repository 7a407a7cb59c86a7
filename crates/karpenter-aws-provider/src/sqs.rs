//! The interruption queue (`INTERRUPTION_QUEUE`): its URL resolved once (`GetQueueUrl`), long
//! polls of up to ten messages (`ReceiveMessage`, 20 s), and deletes (`DeleteMessage`). What a
//! message means is `karpenter_aws::interruption`'s to decide; the controller acts on it.

use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
use tokio::sync::OnceCell;

use crate::AwsError;

/// The SQS client type (the controller's tests hand one in for an emulator).
pub use aws_sdk_sqs::Client;

/// Messages one receive returns at most.
pub const MAX_MESSAGES: i32 = 10;
/// How long a receive waits for a message (a long poll).
pub const WAIT_SECONDS: i32 = 20;

/// One received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueMessage {
    /// SQS's id, for logs.
    pub id: Option<String>,
    pub body: String,
    /// What deleting it takes.
    pub receipt: Option<String>,
}

/// The queue of interruption events.
#[derive(Debug)]
pub struct InterruptionQueue {
    client: Client,
    name: String,
    url: OnceCell<String>,
}

impl InterruptionQueue {
    /// The queue `name` through `client`.
    pub fn new(client: Client, name: String) -> Self {
        InterruptionQueue {
            client,
            name,
            url: OnceCell::new(),
        }
    }

    /// The queue `name` through a client from the SDK's default chain (environment, IRSA web
    /// identity, instance metadata; `AWS_ENDPOINT_URL` honoured), over rustls (ring).
    pub async fn from_env(name: String) -> Self {
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .http_client(http)
            .load()
            .await;
        let mut conf = aws_sdk_sqs::config::Builder::from(&config);
        // Every request is counted and timed (`aws_sdk_go_request_*`).
        conf.push_interceptor(crate::clients::SdkMetrics::interceptor());
        Self::new(Client::from_conf(conf.build()), name)
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The queue's URL (`GetQueueUrl` the first time; a failure is asked again next time).
    pub async fn url(&self) -> Result<&str, AwsError> {
        self.url
            .get_or_try_init(|| async {
                let out = self
                    .client
                    .get_queue_url()
                    .queue_name(&self.name)
                    .send()
                    .await
                    .map_err(|e| AwsError::from_sdk("sqs:GetQueueUrl", &e))?;
                let url = out.queue_url.ok_or_else(|| {
                    AwsError::new("sqs:GetQueueUrl", "NoUrl", "the answer named no queue URL")
                })?;
                tracing::info!(queue = %self.name, %url, "handling interruption messages");
                Ok(url)
            })
            .await
            .map(String::as_str)
    }

    /// Waits up to [`WAIT_SECONDS`] for up to [`MAX_MESSAGES`] messages.
    pub async fn receive(&self) -> Result<Vec<QueueMessage>, AwsError> {
        let url = self.url().await?;
        let out = self
            .client
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(MAX_MESSAGES)
            .wait_time_seconds(WAIT_SECONDS)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("sqs:ReceiveMessage", &e))?;
        Ok(out
            .messages
            .unwrap_or_default()
            .into_iter()
            .map(|m| QueueMessage {
                id: m.message_id,
                body: m.body.unwrap_or_default(),
                receipt: m.receipt_handle,
            })
            .collect())
    }

    /// Deletes a handled message.
    pub async fn delete(&self, receipt: &str) -> Result<(), AwsError> {
        let url = self.url().await?;
        self.client
            .delete_message()
            .queue_url(url)
            .receipt_handle(receipt)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("sqs:DeleteMessage", &e))?;
        Ok(())
    }
}
