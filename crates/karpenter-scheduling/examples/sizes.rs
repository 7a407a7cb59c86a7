fn main() {
    use k8s_openapi::api::core::v1::*;
    println!(
        "Pod {} PodSpec {} Container {} ObjectMeta {} Affinity {} TSC {}",
        std::mem::size_of::<Pod>(),
        std::mem::size_of::<PodSpec>(),
        std::mem::size_of::<Container>(),
        std::mem::size_of::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>(),
        std::mem::size_of::<Affinity>(),
        std::mem::size_of::<TopologySpreadConstraint>()
    );
    println!(
        "PodInfo {}",
        std::mem::size_of::<karpenter_scheduling::pod::PodInfo>()
    );
}
