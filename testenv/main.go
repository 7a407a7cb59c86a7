// Command testenv is a multi-call binary holding the Kubernetes control plane
// used by karpenter-rs integration tests: kube-apiserver,
// kube-controller-manager and kube-scheduler built from the k8s.io/kubernetes
// Go module, plus an embedded etcd server.
//
// Usage:
//
//	testenv apiserver          [kube-apiserver flags]
//	testenv controller-manager [kube-controller-manager flags]
//	testenv scheduler          [kube-scheduler flags]
//	testenv etcd               [etcd flags]
//	testenv version
//
// Each sub-command runs the upstream cobra command (or etcdmain.Main)
// unchanged, exactly as the upstream main packages do. The binary may also
// be invoked through a symlink named kube-apiserver, kube-controller-manager,
// kube-scheduler or etcd.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	_ "time/tzdata" // for CronJob time zone support, as upstream

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as upstream
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as upstream
	"k8s.io/component-base/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

const usage = `usage: testenv <apiserver|controller-manager|scheduler|etcd|version> [flags]`

func main() {
	name := strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe")
	args := os.Args[1:]
	if name == "testenv" {
		if len(args) == 0 {
			fmt.Fprintln(os.Stderr, usage)
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	os.Exit(run(name, args))
}

func run(name string, args []string) int {
	var command *cobra.Command
	switch strings.TrimPrefix(name, "kube-") {
	case "apiserver":
		command = apiserver.NewAPIServerCommand()
	case "controller-manager":
		command = controllermanager.NewControllerManagerCommand()
	case "scheduler":
		command = scheduler.NewSchedulerCommand()
	case "etcd":
		// etcdmain parses args[1:] and exits the process itself on error.
		etcdmain.Main(append([]string{"etcd"}, args...))
		return 0
	case "version", "--version", "-version":
		fmt.Println(version.Get().String())
		return 0
	default:
		fmt.Fprintf(os.Stderr, "testenv: unknown command %q\n%s\n", name, usage)
		return 2
	}
	command.SetArgs(args)
	return cli.Run(command)
}
