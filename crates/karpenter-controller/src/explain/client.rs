//! Asking a controller for an answer: directly at its metrics port, or through the API
//! server's service proxy. Used by `karpenter explain`; it only reads.

use std::path::PathBuf;

use kube::client::Body;

use super::model::NoAnswer;

/// Which kubeconfig, and which of its contexts, reaches the API server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Kubeconfig {
    /// The file (`None`: `$KUBECONFIG`, else `~/.kube/config`).
    pub path: Option<PathBuf>,
    /// The context (`None`: the current one).
    pub context: Option<String>,
}

impl Kubeconfig {
    /// A client for the API server this kubeconfig and context name.
    pub async fn client(&self) -> Result<kube::Client, AskError> {
        let options = kube::config::KubeConfigOptions {
            context: self.context.clone(),
            ..Default::default()
        };
        let config = match &self.path {
            Some(path) => {
                let kubeconfig = kube::config::Kubeconfig::read_from(path)
                    .map_err(|e| AskError::KubeconfigFile(path.clone(), e))?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &options).await
            }
            None => kube::Config::from_kubeconfig(&options).await,
        }
        .map_err(AskError::KubeconfigRead)?;
        kube::Client::try_from(config).map_err(AskError::Kubeconfig)
    }
}

/// Where the controller is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Its metrics port, e.g. `http://127.0.0.1:8080`.
    Url(http::Uri),
    /// Through the API server of `kubeconfig`: Service `service` (`name:port-name`) of
    /// `namespace`.
    ServiceProxy {
        namespace: String,
        service: String,
        kubeconfig: Kubeconfig,
    },
}

/// Why the controller could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("reading the kubeconfig {0} (or give the controller's URL)")]
    KubeconfigFile(PathBuf, #[source] kube::config::KubeconfigError),
    #[error("reading the kubeconfig (or give the controller's URL)")]
    KubeconfigRead(#[source] kube::config::KubeconfigError),
    #[error("a client for the kubeconfig (or give the controller's URL)")]
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

    /// Every NodePool.
    pub const NODE_POOLS: &str = "/explain/nodepools";

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
        Target::ServiceProxy {
            namespace,
            service,
            kubeconfig,
        } => {
            let client = kubeconfig.client().await?;
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

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// A kubeconfig whose current context names an API server nothing listens on, and whose
    /// context `other` names `server`.
    fn kubeconfig(server: &str) -> String {
        format!(
            "apiVersion: v1
kind: Config
current-context: default
clusters:
- name: nowhere
  cluster: {{server: \"http://127.0.0.1:1\"}}
- name: here
  cluster: {{server: \"{server}\"}}
contexts:
- name: default
  context: {{cluster: nowhere, user: me}}
- name: other
  context: {{cluster: here, user: me}}
users:
- name: me
  user: {{token: t}}
"
        )
    }

    #[tokio::test]
    async fn the_service_proxy_is_reached_through_the_given_kubeconfig_and_context() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binding");
        let addr = listener.local_addr().expect("address");
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("a request");
            let mut request = vec![0u8; 4096];
            let n = stream.read(&mut request).await.expect("reading");
            let body = r#"{"message":"from the proxy"}"#;
            let response = format!(
                "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            stream
                .write_all(response.as_bytes())
                .await
                .expect("writing");
            String::from_utf8_lossy(&request[..n]).into_owned()
        });
        let dir = std::env::temp_dir().join(format!("explain-client-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let path = dir.join("kubeconfig");
        std::fs::write(&path, kubeconfig(&format!("http://{addr}"))).expect("writing");
        let target = Target::ServiceProxy {
            namespace: "kube-system".into(),
            service: "karpenter:http-metrics".into(),
            kubeconfig: Kubeconfig {
                path: Some(path),
                context: Some("other".into()),
            },
        };
        let answer = ask::<NoAnswer>(&target, &paths::node("n1"))
            .await
            .expect("the controller is asked");
        assert_eq!(
            answer.err().map(|none| none.message).as_deref(),
            Some("from the proxy")
        );
        let request = server.await.expect("the server task");
        assert!(
            request.starts_with(
                "GET /api/v1/namespaces/kube-system/services/karpenter:http-metrics/proxy/explain/node/n1 "
            ),
            "{request}"
        );
        assert!(
            request.contains("Bearer t"),
            "the context's user: {request}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
