//! `/explain/node/{name}`, `/explain/pod/{namespace}/{name}`, `/explain/nodepool/{name}`,
//! `/explain/nodepools` (every NodePool), `/explain/disruption` and `/explain/consolidation/node/{name}`: the answers of
//! [`crate::explain::Explanations`] as JSON; `404` with a message when there is none (no pass
//! yet, a standby replica, a pod not in the last batch). The last one is computed on request
//! (a removal simulation over the last pass's snapshot, on a blocking thread).

use axum::Router;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::explain::model::NoAnswer;
use crate::explain::{Explanations, NotKnown};

fn json<T: serde::Serialize>(status: StatusCode, body: &T) -> Response {
    match serde_json::to_string(body) {
        Ok(text) => (status, [(header::CONTENT_TYPE, "application/json")], text).into_response(),
        Err(err) => (StatusCode::INTERNAL_SERVER_ERROR, err.to_string()).into_response(),
    }
}

fn respond<T: serde::Serialize>(answer: Result<T, NotKnown>) -> Response {
    match answer {
        Ok(answer) => json(StatusCode::OK, &answer),
        Err(why) => json(
            StatusCode::NOT_FOUND,
            &NoAnswer {
                message: why.to_string(),
            },
        ),
    }
}

/// The routes, reading `explanations`.
pub fn router(explanations: Explanations) -> Router {
    let node = explanations.clone();
    let pod = explanations.clone();
    let pool = explanations.clone();
    let pools = explanations.clone();
    let removal = explanations.clone();
    Router::new()
        .route(
            "/explain/node/{name}",
            get(move |Path(name): Path<String>| {
                let answer = node.node(&name);
                async move { respond(answer) }
            }),
        )
        .route(
            "/explain/pod/{namespace}/{name}",
            get(move |Path((namespace, name)): Path<(String, String)>| {
                let answer = pod.pod(&format!("{namespace}/{name}"));
                async move { respond(answer) }
            }),
        )
        .route(
            "/explain/nodepool/{name}",
            get(move |Path(name): Path<String>| {
                let answer = pool.node_pool(&name);
                async move { respond(answer) }
            }),
        )
        .route(
            "/explain/nodepools",
            get(move || {
                let answer = pools.node_pools();
                async move { respond(answer) }
            }),
        )
        .route(
            "/explain/consolidation/node/{name}",
            get(move |Path(name): Path<String>| {
                let removal = removal.clone();
                async move {
                    match tokio::task::spawn_blocking(move || removal.removal(&name)).await {
                        Ok(answer) => respond(answer),
                        Err(err) => {
                            (StatusCode::INTERNAL_SERVER_ERROR, err.to_string()).into_response()
                        }
                    }
                }
            }),
        )
        .route(
            "/explain/disruption",
            get(move || {
                let answer = explanations.disruption();
                async move { respond(answer) }
            }),
        )
}
