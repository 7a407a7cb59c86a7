//! `karpenter top`: the cluster's nodes (requests against allocatable per resource, pods,
//! instance type, capacity type, price, NodePool, Karpenter's disruption state, readiness and
//! age), its cost per hour and month, its NodePools (readiness, limits used), its pending
//! pods with kube-scheduler's reason and Karpenter's events, from the same index the controller
//! builds ([`karpenter_state::Cluster`]).
//!
//! - [`mod@list`]: reads Nodes, NodeClaims, Pods, NodePools and Karpenter's Events through a
//!   Kubernetes client (the only I/O here; it never writes).
//! - [`mod@watch`]: the live view's [`Listed`], kept current by watches after one list.
//! - [`mod@view`]: the pure part: the index, prices and `now` in, a [`view::View`] out.
//! - [`mod@render`]: a view as a text table of a given width (`--once`, CI logs).
//! - [`mod@ui`], [`mod@screen`]: the interactive view: the keys' state, and the view drawn
//!   with ratatui into a buffer (the binary owns the terminal and the event loop).
//! - [`mod@explained`]: what the running controller told, as values (this crate does not link
//!   the controller).

pub mod explained;
pub mod list;
pub mod render;
pub mod screen;
pub mod seen;
pub mod ui;
pub mod view;
pub mod watch;

pub use explained::Explained;
pub use list::{Kept, ListError, Listed, list};
pub use render::render;
pub use screen::Screen;
pub use ui::{Action, Key, Pane, Ui};
pub use view::{Options, Prices, Sort, View, view};
pub use watch::{Status, Watch};
