use super::*;
use karpenter_scheduling::builders::PodBuilder;

fn at(millis: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(1_800_000_000_000 + millis).unwrap_or_default()
}

fn pod(name: &str, cpu: &str, memory: &str) -> PodRecord {
    PodBuilder::new(name).cpu(cpu).memory(memory).build().into()
}

/// The perf case's two shapes (upstream's `test/suites/performance`).
fn small(name: &str) -> PodRecord {
    pod(name, "900m", "3100Mi")
}

fn large(name: &str) -> PodRecord {
    pod(name, "3500m", "28Gi")
}

fn plan(pods: &[&PodRecord]) -> DrainPlan {
    DrainPlan {
        actions: pods.iter().map(|p| (p.key(), PodAction::Evict)).collect(),
        waiting: pods.len(),
        ..DrainPlan::default()
    }
}

fn keys(plan: &DrainPlan) -> Vec<&str> {
    plan.actions.iter().map(|(k, _)| k.as_str()).collect()
}

fn classes(pods: &[&PodRecord]) -> impl Fn(&str) -> Option<i32> + use<> {
    let by_key: BTreeMap<String, i32> = pods.iter().map(|p| (p.key(), size_class(p))).collect();
    move |key| by_key.get(key).copied()
}

#[test]
fn a_pod_is_classed_by_its_larger_request_in_powers_of_two() {
    assert_eq!(size_class(&pod("eighth", "125m", "0")), 0);
    assert_eq!(size_class(&pod("one", "1", "1Gi")), 3);
    // 3100Mi is 0.76 cpu at 4 GiB a cpu: the 900m of cpu is the larger.
    assert_eq!(size_class(&small("s")), 2);
    // 28Gi weighs as 7 cpus, more than its 3500m.
    assert_eq!(size_class(&large("l")), 5);
    assert_eq!(
        size_class(&pod("wide", "2", "0")),
        size_class(&pod("tall", "0", "8Gi"))
    );
    let bare: PodRecord = PodBuilder::new("bare").build().into();
    assert_eq!(size_class(&bare), i32::MIN);
}

#[test]
fn small_pods_wait_for_the_large_pods_of_every_node_draining_with_them_and_one_gap_more() {
    let (s, l) = (small("small"), large("large"));
    let class_of = classes(&[&s, &l]);
    let mut order = EvictionOrder::default();
    let mut node_a = plan(&[&s]);
    let mut node_b = plan(&[&l]);
    let front = order.front([size_class(&s), size_class(&l)], at(0));
    assert_eq!(front.class, Some(5));
    assert_eq!(order.admit(&mut node_a, &class_of, front, at(0), at(0)), 1);
    assert_eq!(order.admit(&mut node_b, &class_of, front, at(0), at(0)), 0);
    assert!(keys(&node_a).is_empty());
    assert_eq!(keys(&node_b), ["default/large"]);

    // The large pod is evicted (no longer awaiting): the small one waits out the gap.
    let front = order.front([size_class(&s)], at(400));
    assert_eq!(front.class, Some(5));
    assert_eq!(front.recheck, Some(Duration::from_millis(600)));
    let mut node_a = plan(&[&s]);
    assert_eq!(
        order.admit(&mut node_a, &class_of, front, at(0), at(400)),
        1
    );

    let front = order.front([size_class(&s)], at(1000));
    assert_eq!(front.class, Some(2));
    assert_eq!(front.recheck, None);
    let mut node_a = plan(&[&s]);
    assert_eq!(
        order.admit(&mut node_a, &class_of, front, at(0), at(1000)),
        0
    );
    assert_eq!(keys(&node_a), ["default/small"]);
}

#[test]
fn pods_of_one_class_go_together_and_a_node_alone_drains_largest_first() {
    let (s1, s2, l) = (small("s1"), small("s2"), large("l"));
    let class_of = classes(&[&s1, &s2, &l]);
    let mut order = EvictionOrder::default();
    let mut node = plan(&[&s1, &l, &s2]);
    let front = order.front([&s1, &l, &s2].map(size_class), at(0));
    assert_eq!(order.admit(&mut node, &class_of, front, at(0), at(0)), 2);
    assert_eq!(keys(&node), ["default/l"]);
    let front = order.front([&s1, &s2].map(size_class), at(1500));
    let mut node = plan(&[&s1, &s2]);
    assert_eq!(order.admit(&mut node, &class_of, front, at(0), at(1500)), 0);
    assert_eq!(keys(&node), ["default/s1", "default/s2"]);
}

#[test]
fn past_the_hold_a_node_evicts_whatever_waits_elsewhere() {
    // A PDB keeps refusing the large pod of a node that began draining with this one.
    let (s, l) = (small("small"), large("guarded"));
    let class_of = classes(&[&s, &l]);
    let mut order = EvictionOrder::default();
    let front = order.front([size_class(&s), size_class(&l)], at(9_000));
    let mut node = plan(&[&s]);
    assert_eq!(
        order.admit(&mut node, &class_of, front, at(0), at(9_000)),
        1
    );
    let front = order.front([size_class(&s), size_class(&l)], at(10_000));
    let mut node = plan(&[&s]);
    assert_eq!(
        order.admit(&mut node, &class_of, front, at(0), at(10_000)),
        0
    );
    assert_eq!(keys(&node), ["default/small"]);
    assert!(ordered(at(0), at(9_999)));
    assert!(!ordered(at(0), at(10_000)));
    // A drain that begins after `now` (clock skew) is ordered.
    assert!(ordered(at(5_000), at(0)));
}

#[test]
fn deletions_past_the_deadline_and_pods_of_unknown_size_are_never_held() {
    let (s, l) = (small("small"), large("large"));
    let class_of = classes(&[&l]);
    let mut order = EvictionOrder::default();
    let front = order.front([size_class(&l)], at(0));
    let mut node = DrainPlan {
        actions: vec![
            (
                s.key(),
                PodAction::ForceDelete {
                    grace_period_seconds: 1,
                },
            ),
            ("default/unknown".into(), PodAction::Evict),
        ],
        ..DrainPlan::default()
    };
    assert_eq!(order.admit(&mut node, &class_of, front, at(0), at(0)), 0);
    assert_eq!(keys(&node), ["default/small", "default/unknown"]);
}

#[test]
fn nothing_waiting_and_no_recent_eviction_holds_nothing() {
    let mut order = EvictionOrder::default();
    assert_eq!(
        order.front([], at(0)),
        Front {
            class: None,
            recheck: None
        }
    );
    order.evicted(5, at(0));
    order.evicted(2, at(900));
    // The large class's gap ends first; the small one's still holds anything smaller.
    assert_eq!(order.front([], at(1_000)).class, Some(2));
    assert_eq!(
        order.front([], at(1_000)).recheck,
        Some(Duration::from_millis(900))
    );
    assert_eq!(order.front([], at(1_900)).class, None);
    // Old gaps are forgotten as new evictions are recorded.
    order.evicted(1, at(5_000));
    assert_eq!(order.last.len(), 1);
}
