use pretty_assertions::assert_eq;

use super::*;

fn ice(instance_type: &str, zone: &str) -> FleetError {
    FleetError {
        code: "InsufficientInstanceCapacity".into(),
        message: "none left".into(),
        instance_type: Some(instance_type.into()),
        zone: Some(zone.into()),
    }
}

fn ids(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn requests_with_equal_keys_share_a_group_in_order_of_arrival() {
    assert_eq!(
        group(["a", "b", "a", "c", "b"]),
        vec![("a", vec![0, 2]), ("b", vec![1, 4]), ("c", vec![3])]
    );
    assert_eq!(group(Vec::<u8>::new()), vec![]);
}

#[test]
fn a_fleet_of_as_many_instances_as_callers_gives_each_caller_one_and_the_errors_to_all() {
    let errors = vec![ice("m5.large", "us-west-2a")];
    let split = split_fleet(3, vec!["i-1", "i-2", "i-3"], &errors);
    assert_eq!(
        split.shares,
        vec![
            FleetShare {
                instance: Some("i-1"),
                errors: errors.clone()
            },
            FleetShare {
                instance: Some("i-2"),
                errors: errors.clone()
            },
            FleetShare {
                instance: Some("i-3"),
                errors: errors.clone()
            },
        ]
    );
    assert!(split.surplus.is_empty());
}

#[test]
fn callers_left_without_an_instance_get_the_answers_errors() {
    let errors = vec![ice("m5.large", "us-west-2a"), ice("c5.large", "us-west-2b")];
    let split = split_fleet(3, vec!["i-1"], &errors);
    assert_eq!(split.shares[0].instance, Some("i-1"));
    for share in &split.shares[1..] {
        assert_eq!(share.instance, None);
        assert_eq!(share.errors, errors);
    }
}

#[test]
fn callers_left_without_an_instance_and_without_an_error_are_told_too_few_were_launched() {
    let split = split_fleet(2, vec!["i-1"], &[]);
    assert!(split.shares[0].errors.is_empty());
    assert_eq!(split.shares[1].instance, None);
    assert_eq!(split.shares[1].errors.len(), 1);
    assert_eq!(split.shares[1].errors[0].code, TOO_FEW_INSTANCES);
    let nothing = split_fleet(2, Vec::<&str>::new(), &[]);
    assert!(
        nothing
            .shares
            .iter()
            .all(|s| s.instance.is_none() && s.errors[0].code == TOO_FEW_INSTANCES)
    );
}

#[test]
fn instances_beyond_one_per_caller_are_nobodys() {
    let split = split_fleet(1, vec!["i-1", "i-2"], &[]);
    assert_eq!(split.shares.len(), 1);
    assert_eq!(split.surplus, vec!["i-2"]);
}

#[test]
fn described_instances_go_to_the_callers_that_asked_for_their_ids() {
    let asked = ids(&["i-2", "i-1", "i-2", "i-9", "i-9"]);
    let found = vec![("i-1".to_owned(), 10), ("i-2".to_owned(), 20)];
    let (parts, missing) = split_by_id(&asked, &found);
    assert_eq!(parts, vec![Some(20), Some(10), Some(20), None, None]);
    assert_eq!(missing, ids(&["i-9"]));
}

#[test]
fn a_failed_combined_call_leaves_every_id_to_be_asked_again() {
    let (parts, missing) = split_by_id::<u8>(&ids(&["i-1", "i-2"]), &[]);
    assert_eq!(parts, vec![None, None]);
    assert_eq!(missing, ids(&["i-1", "i-2"]));
}

#[test]
fn only_instances_shutting_down_or_terminated_count_as_terminated() {
    let changes = vec![
        ("i-1".to_owned(), "shutting-down".to_owned()),
        ("i-2".to_owned(), "terminated".to_owned()),
        ("i-3".to_owned(), "running".to_owned()),
    ];
    let (parts, retry) = split_by_id(&ids(&["i-1", "i-2", "i-3", "i-4"]), &terminating(&changes));
    assert_eq!(parts, vec![Some(()), Some(()), None, None]);
    assert_eq!(retry, ids(&["i-3", "i-4"]));
}
