//! Loading ordinary manifests into typed objects: files and directories of multi-document YAML
//! (or JSON), sorted by kind.
//!
//! NodePools and EC2NodeClasses are validated with the `karpenter validate` rules and fail the
//! load with the same errors (file, document, object, field). Other kinds are typed with their
//! Kubernetes types; one that does not fit fails the load naming the field. Every problem of
//! every file is reported, and nothing is simulated when there is any. Kinds the simulator does
//! not use (Services, ConfigMaps, ...) are listed as ignored.

use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use karpenter_api::v1::{EC2NodeClass, NodePool};
use karpenter_api::validation::{DocumentIdentity, Outcome, validate_document};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{LoadError, Problem, Problems};
use crate::workload::Workload;

/// An object the simulator does not use, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ignored {
    pub file: String,
    pub document: usize,
    /// `apiVersion kind/name`.
    pub object: String,
    pub reason: String,
}

/// Everything read from the manifests, by kind.
#[derive(Debug, Clone, Default)]
pub struct Manifests {
    pub node_pools: Vec<NodePool>,
    pub node_classes: Vec<EC2NodeClass>,
    /// Deployments, StatefulSets, ReplicaSets, Jobs, CronJobs and bare Pods, in file order.
    pub workloads: Vec<Workload>,
    pub daemonsets: Vec<DaemonSet>,
    pub persistent_volume_claims: Vec<PersistentVolumeClaim>,
    pub persistent_volumes: Vec<PersistentVolume>,
    pub storage_classes: Vec<StorageClass>,
    pub namespaces: Vec<Namespace>,
    /// Existing nodes (optional): pods with `spec.nodeName` naming one are bound to it.
    pub nodes: Vec<Node>,
    pub ignored: Vec<Ignored>,
}

impl Manifests {
    /// Loads files and directories (directories recursively: `*.yaml`, `*.yml`, `*.json`, in
    /// name order).
    pub fn load_paths(paths: &[PathBuf]) -> Result<Self, LoadError> {
        let texts = read_manifest_files(paths)?;
        Self::load_texts(
            texts
                .iter()
                .map(|(name, text)| (name.as_str(), text.as_str())),
        )
    }

    /// Loads `(file name, text)` pairs; all problems of all files are reported together.
    pub fn load_texts<'a>(
        texts: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, LoadError> {
        let mut manifests = Manifests::default();
        let mut problems = Vec::new();
        for (file, text) in texts {
            manifests.add_text(file, text, &mut problems);
        }
        if problems.is_empty() {
            Ok(manifests)
        } else {
            Err(LoadError::Invalid(Problems(problems)))
        }
    }

    /// Loads one text.
    pub fn load_text(file: &str, text: &str) -> Result<Self, LoadError> {
        Self::load_texts([(file, text)])
    }

    fn add_text(&mut self, file: &str, text: &str, problems: &mut Vec<Problem>) {
        let docs = match karpenter_api::yaml::parse_documents(text) {
            Ok(docs) => docs,
            Err(err) => {
                problems.push(Problem {
                    file: file.to_string(),
                    document: None,
                    object: None,
                    field: None,
                    message: format!("invalid YAML: {}", err.describe()),
                });
                return;
            }
        };
        for (index, doc) in docs.iter().enumerate() {
            let at = At {
                file,
                document: index + 1,
                id: DocumentIdentity::of(doc),
            };
            if let Err(problem) = self.add_document(&at, doc, problems) {
                problems.push(problem);
            }
        }
    }

    fn add_document(
        &mut self,
        at: &At<'_>,
        doc: &serde_json::Value,
        problems: &mut Vec<Problem>,
    ) -> Result<(), Problem> {
        let id = &at.id;
        match (id.api_version.as_str(), id.kind.as_str()) {
            ("karpenter.sh/v1", "NodePool") | ("karpenter.k8s.aws/v1", "EC2NodeClass") => {
                if let Outcome::Invalid(errors) = validate_document(doc) {
                    problems.extend(errors.into_iter().map(|error| Problem {
                        field: Some(error.path),
                        ..at.problem(error.message)
                    }));
                    return Ok(());
                }
                if id.kind == "NodePool" {
                    self.node_pools.push(at.typed(doc)?);
                } else {
                    self.node_classes.push(at.typed(doc)?);
                }
            }
            ("apps/v1", "Deployment") => {
                self.workloads
                    .push(Workload::Deployment(Box::new(at.typed::<Deployment>(doc)?)));
            }
            ("apps/v1", "StatefulSet") => {
                self.workloads.push(Workload::StatefulSet(Box::new(
                    at.typed::<StatefulSet>(doc)?,
                )));
            }
            ("apps/v1", "ReplicaSet") => {
                self.workloads
                    .push(Workload::ReplicaSet(Box::new(at.typed::<ReplicaSet>(doc)?)));
            }
            ("apps/v1", "DaemonSet") => self.daemonsets.push(at.typed(doc)?),
            ("batch/v1", "Job") => self
                .workloads
                .push(Workload::Job(Box::new(at.typed::<Job>(doc)?))),
            ("batch/v1", "CronJob") => {
                self.workloads
                    .push(Workload::CronJob(Box::new(at.typed::<CronJob>(doc)?)));
            }
            ("v1", "Pod") => self
                .workloads
                .push(Workload::Pod(Box::new(at.typed::<Pod>(doc)?))),
            ("v1", "PersistentVolumeClaim") => {
                self.persistent_volume_claims.push(at.typed(doc)?);
            }
            ("v1", "PersistentVolume") => self.persistent_volumes.push(at.typed(doc)?),
            ("v1", "Namespace") => self.namespaces.push(at.typed(doc)?),
            ("v1", "Node") => self.nodes.push(at.typed(doc)?),
            ("storage.k8s.io/v1", "StorageClass") => self.storage_classes.push(at.typed(doc)?),
            ("v1", "List") => {
                let items = doc
                    .get("items")
                    .and_then(serde_json::Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for item in &items {
                    let inner = At {
                        id: DocumentIdentity::of(item),
                        ..*at
                    };
                    if let Err(problem) = self.add_document(&inner, item, problems) {
                        problems.push(problem);
                    }
                }
            }
            (api_version, kind) => self.ignored.push(Ignored {
                file: at.file.to_string(),
                document: at.document,
                object: at.describe(),
                reason: ignore_reason(api_version, kind),
            }),
        }
        Ok(())
    }
}

/// Reads files and directories (directories recursively: `*.yaml`, `*.yml`, `*.json`, in name
/// order, timeline files excluded) into `(file name, text)` pairs.
pub fn read_manifest_files(paths: &[PathBuf]) -> Result<Vec<(String, String)>, LoadError> {
    let mut files = Vec::new();
    for path in paths {
        collect_files(path, &mut files)?;
    }
    files
        .into_iter()
        .map(|file| {
            std::fs::read_to_string(&file)
                .map(|text| (file.display().to_string(), text))
                .map_err(|source| LoadError::Read { path: file, source })
        })
        .collect()
}

fn ignore_reason(api_version: &str, kind: &str) -> String {
    if api_version.is_empty() || kind.is_empty() {
        return "not a Kubernetes object (apiVersion and kind are required)".to_string();
    }
    let group = api_version.split('/').next().unwrap_or_default();
    if (group == "karpenter.sh" || group == "karpenter.k8s.aws")
        && matches!(
            kind,
            "NodePool" | "EC2NodeClass" | "Provisioner" | "AWSNodeTemplate" | "EC2NodeClassList"
        )
    {
        return format!("{api_version} is not v1: convert it with `karpenter convert`");
    }
    "kind not used by the simulation".to_string()
}

/// Where a document is, for problems and typed parsing.
#[derive(Debug)]
struct At<'a> {
    file: &'a str,
    document: usize,
    id: DocumentIdentity,
}

impl At<'_> {
    fn describe(&self) -> String {
        let kind = if self.id.kind.is_empty() {
            "<no kind>"
        } else {
            self.id.kind.as_str()
        };
        if self.id.name.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}/{}", self.id.name)
        }
    }

    fn problem(&self, message: impl Into<String>) -> Problem {
        Problem {
            file: self.file.to_string(),
            document: Some(self.document),
            object: Some(self.describe()),
            field: None,
            message: message.into(),
        }
    }

    fn typed<T: DeserializeOwned>(&self, doc: &serde_json::Value) -> Result<T, Problem> {
        karpenter_api::yaml::from_value(doc).map_err(|error| Problem {
            field: Some(error.path),
            ..self.problem(error.message)
        })
    }
}

fn collect_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), LoadError> {
    let metadata = std::fs::metadata(path).map_err(|source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if !metadata.is_dir() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let before = out.len();
    walk(path, out)?;
    if out.len() == before {
        return Err(LoadError::NoManifests {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), LoadError> {
    let read_error = |source| LoadError::Read {
        path: dir.to_path_buf(),
        source,
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_error)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(read_error)?;
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            walk(&entry, out)?;
        } else if is_manifest(&entry) {
            out.push(entry);
        }
    }
    Ok(())
}

/// Manifest files by extension; a directory's timeline file (`timeline.yaml` or
/// `*.timeline.yaml`) is not a manifest.
fn is_manifest(path: &Path) -> bool {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let manifest_ext = [".yaml", ".yml", ".json"]
        .iter()
        .any(|ext| name.ends_with(ext));
    manifest_ext && !name.starts_with("timeline.") && !name.contains(".timeline.")
}
