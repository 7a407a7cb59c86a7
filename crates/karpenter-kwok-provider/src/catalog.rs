//! Where the simulated cloud's instance types come from: the embedded catalog, a file in the
//! catalog format, or a file in upstream's KWOK format.

use std::sync::Arc;

use karpenter_cloud::{Catalog, InstanceTypeInfo};

/// Where the simulated cloud's instance types come from.
#[derive(Debug)]
pub enum TypeSource {
    /// The catalog, resolved for each NodePool's EC2NodeClass.
    Catalog(Box<Catalog>),
    /// Fixed types (upstream's KWOK file format), the same for every NodePool.
    Fixed(Arc<Vec<InstanceTypeInfo>>),
}

impl TypeSource {
    /// The embedded catalog, or the file at `path` in either format.
    pub fn load(path: Option<&std::path::Path>) -> Result<TypeSource, TypeSourceError> {
        let Some(path) = path else {
            return Ok(TypeSource::Catalog(Box::new(Catalog::embedded()?)));
        };
        let text = std::fs::read_to_string(path).map_err(|source| TypeSourceError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let origin = path.display().to_string();
        if crate::upstream_types::is_upstream_format(&text) {
            let types = crate::upstream_types::parse(&origin, &text)?;
            tracing::info!(
                cloud_provider = "kwok",
                path = %origin,
                count = types.len(),
                "instance types from a file in upstream's KWOK format: the same for every NodePool, EC2NodeClass settings do not apply"
            );
            return Ok(TypeSource::Fixed(Arc::new(types)));
        }
        Ok(TypeSource::Catalog(Box::new(Catalog::parse(
            &origin, &text,
        )?)))
    }
}

/// The instance types of the simulated cloud could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TypeSourceError {
    #[error("cannot read instance-type file {path}")]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Catalog(#[from] karpenter_cloud::CatalogError),
    #[error(transparent)]
    Upstream(#[from] crate::upstream_types::KwokTypesError),
}
