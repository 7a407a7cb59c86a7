//! RBAC is really on: a ServiceAccount can do what its Role allows and nothing else.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use karpenter_testenv::{KubeEnv, wait_for};
use kube::api::{Api, ListParams, PostParams};

fn is_forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(ref s)) if s.code == 403)
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment: run scripts/test-integration"]
async fn a_service_account_can_do_what_its_role_allows_and_is_forbidden_the_rest() {
    let env = KubeEnv::connect()
        .await
        .expect("connecting to the test environment");
    let scope = env.scope("rbac").await.expect("creating a test scope");
    let ns = scope.namespace().to_string();
    let admin = env.client();

    Api::<ServiceAccount>::namespaced(admin.clone(), &ns)
        .create(
            &PostParams::default(),
            &ServiceAccount {
                metadata: scope.namespaced_meta("reader"),
                ..Default::default()
            },
        )
        .await
        .expect("creating the service account");
    let role = Role {
        metadata: scope.namespaced_meta("configmap-reader"),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".into()]),
            verbs: vec!["get".into(), "list".into(), "watch".into()],
            ..PolicyRule::default()
        }]),
    };
    Api::<Role>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &role)
        .await
        .expect("creating the role");
    let binding = RoleBinding {
        metadata: scope.namespaced_meta("reader-reads-configmaps"),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: "configmap-reader".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "reader".into(),
            namespace: Some(ns.clone()),
            ..Subject::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &binding)
        .await
        .expect("creating the role binding");

    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), &ns)
        .create_token_request("reader", &PostParams::default(), &request)
        .await
        .expect("requesting a service account token")
        .status
        .expect("token status")
        .token
        .expect("a token");
    let reader = env
        .client_with_token(&token)
        .await
        .expect("a client with the token");

    // Allowed. The RBAC cache may take a moment to see the new binding, and the
    // controller-manager a moment to publish kube-root-ca.crt into the namespace.
    let configmaps: Api<ConfigMap> = Api::namespaced(reader.clone(), &ns);
    wait_for(
        "the reader to get kube-root-ca.crt",
        Duration::from_secs(30),
        || async { Ok(configmaps.get("kube-root-ca.crt").await.ok().map(|_| ())) },
    )
    .await
    .expect("the reader may get a configmap in its namespace");
    configmaps
        .list(&ListParams::default())
        .await
        .expect("the reader may list configmaps in its namespace");

    // Forbidden: verbs, resources and namespaces the role does not grant.
    let new_cm = ConfigMap {
        metadata: scope.namespaced_meta("written-by-reader"),
        ..Default::default()
    };
    assert!(
        is_forbidden(configmaps.create(&PostParams::default(), &new_cm).await),
        "create configmap must be forbidden"
    );
    assert!(
        is_forbidden(
            configmaps
                .delete("kube-root-ca.crt", &Default::default())
                .await
        ),
        "delete configmap must be forbidden"
    );
    assert!(
        is_forbidden(
            Api::<Secret>::namespaced(reader.clone(), &ns)
                .list(&ListParams::default())
                .await
        ),
        "list secrets must be forbidden"
    );
    assert!(
        is_forbidden(
            Api::<ConfigMap>::namespaced(reader.clone(), "default")
                .list(&ListParams::default())
                .await
        ),
        "configmaps of another namespace must be forbidden"
    );
    assert!(
        is_forbidden(
            Api::<Node>::all(reader.clone())
                .list(&ListParams::default())
                .await
        ),
        "list nodes must be forbidden"
    );

    scope.cleanup().await.expect("cleaning up");
}
