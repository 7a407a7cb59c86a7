//! Asking a controller for an answer: directly at its metrics port, or through the API
//! server's service proxy. Used by `karpenter explain`; it only reads.

use kube::client::Body;

use super::model::NoAnswer;

/// Where the controller is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Its metrics port, e.g. `http://127.0.0.1:8080`.
    Url(http::Uri),
    /// Through the API server (the kubeconfig's): Service `service` (`name:port-name`) of
    /// `namespace`.
    ServiceProxy { namespace: String, service: String },
}

/// Why the controller could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("reading the kubeconfig (or give the controller's URL)")]
    Kubeconfig(#[source] kube::Error),
    #[error("a client for {0}")]
    Client(String, #[source] kube::Error),
    #[error("building the request for {0}")]
    Request(String, #[source] http::Error),
    #[error("asking the controller ({0})")]
    Send(String, #[source] kube::Error),
    #[error("the controller answered {uri} with HTTP {status}: {body}")]
    Status {
        uri: String,
        status: http::StatusCode,
        body: String,
    },
    #[error("the controller's answer to {0} is not an explanation")]
    Decode(String, #[source] serde_json::Error),
}

/// The request paths.
pub mod paths {
    /// Pod `namespace/name`.
    pub fn pod(namespace: &str, name: &str) -> String {
        format!("/explain/pod/{namespace}/{name}")
    }

    /// Node `name`.
    pub fn node(name: &str) -> String {
        format!("/explain/node/{name}")
    }

    /// NodePool `name`.
    pub fn node_pool(name: &str) -> String {
        format!("/explain/nodepool/{name}")
    }

    /// The last disruption pass.
    pub const DISRUPTION: &str = "/explain/disruption";

    /// Node `name`'s removal simulation over the last pass's snapshot.
    pub fn removal(name: &str) -> String {
        format!("/explain/consolidation/node/{name}")
    }
}

/// GETs `path` of the controller at `target`: its answer, or why it has none.
pub async fn ask<T: serde::de::DeserializeOwned>(
    target: &Target,
    path: &str,
) -> Result<Result<T, NoAnswer>, AskError> {
    let (client, uri) = match target {
        Target::Url(url) => {
            let client = kube::Client::try_from(kube::Config::new(url.clone()))
                .map_err(|e| AskError::Client(url.to_string(), e))?;
            (client, path.to_owned())
        }
        Target::ServiceProxy { namespace, service } => {
            let client = kube::Client::try_default()
                .await
                .map_err(AskError::Kubeconfig)?;
            let uri = format!("/api/v1/namespaces/{namespace}/services/{service}/proxy{path}");
            (client, uri)
        }
    };
    let request = http::Request::get(&uri)
        .body(Body::empty())
        .map_err(|e| AskError::Request(uri.clone(), e))?;
    let response = client
        .send(request)
        .await
        .map_err(|e| AskError::Send(uri.clone(), e))?;
    let status = response.status();
    let body = response
        .into_body()
        .collect_bytes()
        .await
        .map_err(|e| AskError::Send(uri.clone(), e))?;
    if status == http::StatusCode::NOT_FOUND
        && let Ok(none) = serde_json::from_slice::<NoAnswer>(&body)
    {
        return Ok(Err(none));
    }
    if !status.is_success() {
        return Err(AskError::Status {
            uri,
            status,
            body: String::from_utf8_lossy(&body).trim().to_owned(),
        });
    }
    serde_json::from_slice(&body)
        .map(Ok)
        .map_err(|e| AskError::Decode(uri, e))
}
