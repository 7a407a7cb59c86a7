//! YAML manifests: CRDs applied to the real API server, fixtures created as
//! dynamic objects, and the `# key: value` comment directives fixtures carry.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::{self, Scope};
use kube::{Client, ResourceExt};

use crate::error::{Error, Result, kube_err};

/// The field manager used for server-side apply.
pub const FIELD_MANAGER: &str = "karpenter-testenv";

/// Reads a file.
pub fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The `*.yaml` files of a directory, sorted by name.
pub fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|source| Error::Io {
                path: dir.to_path_buf(),
                source,
            })?
            .path();
        if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Parses every YAML document of a file into JSON values (empty documents are skipped).
pub fn load_documents(path: &Path) -> Result<Vec<serde_json::Value>> {
    let text = read(path)?;
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).map_err(|source| Error::Yaml {
            path: path.to_path_buf(),
            source: Box::new(source),
        })?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// The values of `# <key>: <value>` comment lines, in order.
pub fn comment_directives(text: &str, key: &str) -> Vec<String> {
    let prefix = format!("{key}:");
    text.lines()
        .filter_map(|line| line.trim_start().strip_prefix('#'))
        .filter_map(|rest| rest.trim_start().strip_prefix(prefix.as_str()))
        .map(|value| value.trim().to_string())
        .collect()
}

/// Server-side applies every CRD in `dir` and waits until each is Established.
/// Returns the CRD names.
pub async fn apply_crds(client: &Client, dir: &Path) -> Result<Vec<String>> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut names = Vec::new();
    for path in yaml_files(dir)? {
        for doc in load_documents(&path)? {
            let crd: CustomResourceDefinition =
                serde_json::from_value(doc).map_err(|e| Error::Manifest {
                    path: path.clone(),
                    reason: format!("not a CustomResourceDefinition: {e}"),
                })?;
            let name = crd.name_any();
            api.patch(&name, &params, &Patch::Apply(&crd))
                .await
                .map_err(kube_err(format!(
                    "applying CRD {name} from {}",
                    path.display()
                )))?;
            names.push(name);
        }
    }
    for name in &names {
        wait_established(&api, name).await?;
    }
    Ok(names)
}

async fn wait_established(api: &Api<CustomResourceDefinition>, name: &str) -> Result<()> {
    let timeout = Duration::from_secs(30);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let crd = api
            .get(name)
            .await
            .map_err(kube_err(format!("reading CRD {name}")))?;
        let established = crd
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
        if established {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!("CRD {name} to be Established"),
                secs: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A manifest resolved against the API server's discovery.
#[derive(Clone, Debug)]
pub struct DynamicManifest {
    /// Where it came from.
    pub path: PathBuf,
    /// The object.
    pub object: DynamicObject,
    /// Its API resource (plural, version, ...).
    pub resource: ApiResource,
    /// Whether the kind is namespaced.
    pub namespaced: bool,
}

impl DynamicManifest {
    /// Resolves `apiVersion`/`kind` of a parsed document through discovery.
    pub async fn resolve(client: &Client, path: &Path, doc: serde_json::Value) -> Result<Self> {
        let object: DynamicObject = serde_json::from_value(doc).map_err(|e| Error::Manifest {
            path: path.to_path_buf(),
            reason: format!("not a Kubernetes object: {e}"),
        })?;
        let types = object.types.clone().ok_or_else(|| Error::Manifest {
            path: path.to_path_buf(),
            reason: "missing apiVersion or kind".into(),
        })?;
        let (group, version) = match types.api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), types.api_version.clone()),
        };
        let gvk = GroupVersionKind::gvk(&group, &version, &types.kind);
        let (resource, caps) = discovery::pinned_kind(client, &gvk)
            .await
            .map_err(|source| Error::Discovery {
                gvk: format!("{}/{}", types.api_version, types.kind),
                source,
            })?;
        Ok(Self {
            path: path.to_path_buf(),
            object,
            resource,
            namespaced: caps.scope == Scope::Namespaced,
        })
    }

    /// The API for this kind (in `namespace` when the kind is namespaced).
    pub fn api(&self, client: &Client, namespace: &str) -> Api<DynamicObject> {
        if self.namespaced {
            Api::namespaced_with(client.clone(), namespace, &self.resource)
        } else {
            Api::all_with(client.clone(), &self.resource)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comment_directives_are_read_from_comment_lines_only() {
        let text = "# apiserver-expect: first\n#apiserver-expect:  second \nkind: X\n# other: no\nvalue: apiserver-expect: no\n";
        assert_eq!(
            comment_directives(text, "apiserver-expect"),
            ["first", "second"]
        );
    }
}
