// Command bench-upstream-scale runs upstream Karpenter's scheduler (sigs.k8s.io/karpenter
// v1.15.0) once over its scheduling benchmark's input at a given pod count: one NodePool,
// fake.InstanceTypes(400), makeDiversePods(N), a scheduler built exactly as
// scheduling_benchmark_test.go's setupScheduler builds it (an empty state.Cluster, so no
// existing nodes), and one Solve. It prints one JSON line: pods, scheduled, nodes, seconds of
// the solve (topology and scheduler construction included, as karpenter-bench counts the
// solver's construction), and the process's peak RSS (getrusage ru_maxrss) after the solve.
//
// The generator functions are copied from scheduling_benchmark_test.go (a _test file cannot be
// imported); it stays out of CI. scripts/bench-upstream-scale builds and runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	fakecr "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/logging"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	"sigs.k8s.io/karpenter/pkg/test"
)

//nolint:gosec
var r = rand.New(rand.NewSource(42))

func main() {
	pods := flag.Int("pods", 10000, "number of pending pods (upstream's diverse workload)")
	flag.Parse()
	log.SetLogger(logging.NopLogger)
	if err := run(*pods); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
}

func run(count int) error {
	ctx := options.ToContext(injection.WithControllerName(context.Background(), "provisioner"), test.Options())
	pods := makeDiversePods(count)
	start := time.Now()
	scheduler, err := setupScheduler(ctx, pods, scheduling.NumConcurrentReconciles(5))
	if err != nil {
		return fmt.Errorf("creating scheduler: %w", err)
	}
	results, err := scheduler.Solve(ctx, pods)
	if err != nil {
		return fmt.Errorf("solving: %w", err)
	}
	seconds := time.Since(start).Seconds()
	scheduled := 0
	for _, n := range results.NewNodeClaims {
		scheduled += len(n.Pods)
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	out, err := json.Marshal(map[string]any{
		"implementation": "upstream sigs.k8s.io/karpenter v1.15.0",
		"pods":           count,
		"scheduled":      scheduled,
		"pod_errors":     len(results.PodErrors),
		"nodes":          len(results.NewNodeClaims),
		"seconds":        seconds,
		"peak_rss_mb":    float64(ru.Maxrss) / 1024.0,
	})
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

// setupScheduler is scheduling_benchmark_test.go's.
func setupScheduler(ctx context.Context, pods []*corev1.Pod, opts ...scheduling.Options) (*scheduling.Scheduler, error) {
	nodePool := test.NodePool(v1.NodePool{
		Spec: v1.NodePoolSpec{
			Limits: v1.Limits{
				corev1.ResourceCPU:    resource.MustParse("10000000"),
				corev1.ResourceMemory: resource.MustParse("10000000Gi"),
			},
		},
	})
	cloudProvider := fake.NewCloudProvider()
	instanceTypes := fake.InstanceTypes(400)
	cloudProvider.InstanceTypes = instanceTypes
	client := fakecr.NewFakeClient()
	clk := &clock.RealClock{}
	cluster := state.NewCluster(clk, client, cloudProvider)
	topology, err := scheduling.NewTopology(ctx, client, cluster, nil, []*v1.NodePool{nodePool}, map[string][]*cloudprovider.InstanceType{
		nodePool.Name: instanceTypes,
	}, pods, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating topology, %w", err)
	}
	return scheduling.NewScheduler(
		ctx,
		client,
		[]*v1.NodePool{nodePool},
		cluster,
		nil,
		topology,
		map[string][]*cloudprovider.InstanceType{nodePool.Name: instanceTypes},
		nil,
		events.NewRecorder(&record.FakeRecorder{}),
		clk,
		nil, // volumeReqsByPod
		nil, // allocator
		opts...,
	), nil
}

// The workload generators below are scheduling_benchmark_test.go's.

func makeDiversePods(count int) []*corev1.Pod {
	var pods []*corev1.Pod
	numTypes := 5
	pods = append(pods, makeGenericPods(count/numTypes)...)
	pods = append(pods, makeTopologySpreadPods(count/numTypes, corev1.LabelTopologyZone)...)
	pods = append(pods, makeTopologySpreadPods(count/numTypes, corev1.LabelHostname)...)
	pods = append(pods, makePodAffinityPods(count/numTypes, corev1.LabelTopologyZone)...)
	pods = append(pods, makePodAntiAffinityPods(count/numTypes, corev1.LabelHostname)...)
	nRemaining := count - len(pods)
	pods = append(pods, makeGenericPods(nRemaining)...)
	return pods
}

func requests() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    randomCPU(),
			corev1.ResourceMemory: randomMemory(),
		},
	}
}

func makePodAntiAffinityPods(count int, key string) []*corev1.Pod {
	var pods []*corev1.Pod
	labels := map[string]string{"app": "nginx"}
	for i := 0; i < count; i++ {
		pods = append(pods, test.Pod(test.PodOptions{
			ObjectMeta: metav1.ObjectMeta{Labels: labels, UID: uuid.NewUUID()},
			PodAntiRequirements: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
				TopologyKey:   key,
			}},
			ResourceRequirements: requests(),
		}))
	}
	return pods
}

func makePodAffinityPods(count int, key string) []*corev1.Pod {
	var pods []*corev1.Pod
	for i := 0; i < count; i++ {
		labels := map[string]string{"my-affininity": randomLabelValue()}
		pods = append(pods, test.Pod(test.PodOptions{
			ObjectMeta: metav1.ObjectMeta{Labels: labels, UID: uuid.NewUUID()},
			PodRequirements: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
				TopologyKey:   key,
			}},
			ResourceRequirements: requests(),
		}))
	}
	return pods
}

func makeTopologySpreadPods(count int, key string) []*corev1.Pod {
	var pods []*corev1.Pod
	for i := 0; i < count; i++ {
		pods = append(pods, test.Pod(test.PodOptions{
			ObjectMeta: metav1.ObjectMeta{Labels: randomLabels(), UID: uuid.NewUUID()},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
				MaxSkew:           1,
				TopologyKey:       key,
				WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector:     &metav1.LabelSelector{MatchLabels: randomLabels()},
			}},
			ResourceRequirements: requests(),
		}))
	}
	return pods
}

func makeGenericPods(count int) []*corev1.Pod {
	var pods []*corev1.Pod
	for i := 0; i < count; i++ {
		pods = append(pods, test.Pod(test.PodOptions{
			ObjectMeta:           metav1.ObjectMeta{Labels: randomLabels(), UID: uuid.NewUUID()},
			ResourceRequirements: requests(),
		}))
	}
	return pods
}

func randomLabels() map[string]string {
	return map[string]string{"my-label": randomLabelValue()}
}

func randomLabelValue() string {
	labelValues := []string{"a", "b", "c", "d", "e", "f", "g"}
	return labelValues[r.Intn(len(labelValues))]
}

func randomMemory() resource.Quantity {
	mem := []int{100, 256, 512, 1024, 2048, 4096}
	return resource.MustParse(fmt.Sprintf("%dMi", mem[r.Intn(len(mem))]))
}

func randomCPU() resource.Quantity {
	cpu := []int{100, 250, 500, 1000, 1500}
	return resource.MustParse(fmt.Sprintf("%dm", cpu[r.Intn(len(cpu))]))
}
