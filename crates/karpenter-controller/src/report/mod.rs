//! What the controller tells people: [`events`] (Kubernetes events with upstream's reasons,
//! written by one task, repeats folded into series by [`event_series`]) and [`metrics`]
//! (upstream's metric names).

pub mod event_gate;
pub mod event_series;
pub mod events;
pub mod metrics;
#[cfg(test)]
mod parity;
pub mod pod_state;
pub mod runtime;
pub mod scheduler;
pub mod series;
pub mod status;
