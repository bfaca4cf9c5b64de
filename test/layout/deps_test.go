package layout

import (
	"slices"
	"sort"
	"strings"
	"testing"
)

// Third-party modules whose arrival in a part changes what it is: a
// Kubernetes client or framework in a node binary, gRPC where nothing
// speaks CSI, a test suite in the product.
const (
	clientGo      = "k8s.io/client-go"
	ctrlRuntime   = "sigs.k8s.io/controller-runtime"
	k8sAPI        = "k8s.io/api"
	apimachinery  = "k8s.io/apimachinery"
	apiextensions = "k8s.io/apiextensions-apiserver"
	kustomize     = "sigs.k8s.io/kustomize/api"
	openshift     = "github.com/openshift/api"
	libProvision  = "sigs.k8s.io/sig-storage-lib-external-provisioner/v10"
	grpc          = "google.golang.org/grpc"
	csiSpec       = "github.com/container-storage-interface/spec"
	csiTest       = "github.com/kubernetes-csi/csi-test/v5"
	ginkgo        = "github.com/onsi/ginkgo/v2"
	criAPI        = "k8s.io/cri-api"
)

var notable = []string{clientGo, ctrlRuntime, k8sAPI, apimachinery, apiextensions, kustomize,
	openshift, libProvision, grpc, csiSpec, csiTest, ginkgo, criAPI}

// mayReach lists, for each part, the notable modules its packages and
// their tests reach, directly or through internal/. It is exact: a part
// that reaches one more fails, and so does one that no longer reaches a
// module listed (drop it from the list, the rule gets stricter). What it
// keeps out, the part's own go.mod kept out until issue 29 made one module:
// internal/ is the floor every component shares (types, no client, no
// gRPC but in one test helper: grpcTest below); hpp-csi runs on every node
// and talks to the API server only for --check-binding-mode, through its
// own kubeapi package, so it has no Kubernetes client or types; hpp-legacy
// and hpp-migrate use client-go but no controller framework; only test/ has
// the test suites.
var mayReach = map[string][]string{
	"internal":         {k8sAPI, apimachinery},
	grpcTestPart:       {grpc},
	"cmd/hpp-csi":      {grpc, csiSpec},
	"cmd/hpp-legacy":   {clientGo, k8sAPI, apimachinery, libProvision},
	"cmd/hpp-migrate":  {clientGo, k8sAPI, apimachinery},
	"cmd/hpp-operator": {clientGo, ctrlRuntime, k8sAPI, apimachinery, apiextensions, kustomize, openshift},
	"cmd/hpp-mounter":  {},
	"test":             {clientGo, k8sAPI, apimachinery, grpc, csiSpec, csiTest, ginkgo, criAPI},
}

// grpcTest is the one package of internal/ held to a list of its own: the
// tests' check of a gRPC status (code and message). hpp-csi's tests and
// test/'s share it, and internal/ is the only place both may import, so it
// lives there and reaches gRPC. The rest of internal/ stays as strict as
// before: its list above has no gRPC, and the walk follows imports into
// grpctest, so another internal package that imports it fails too.
// TestPartsImportOnlyInternal lets only tests import it.
const (
	grpcTest     = module + "/internal/grpctest"
	grpcTestPart = "internal/grpctest"
)

// listOf names the list of mayReach a package of hpp is held to: its
// part's, or grpctest's own.
func listOf(name string) string {
	if strings.TrimSuffix(base(name), ".test") == grpcTest {
		return grpcTestPart
	}
	p, _ := part(name)
	return p
}

// mounterModules is every third-party module hpp-mounter may reach. It
// runs beside every pvcTemplate pool and formats disks: its image and its
// review stay small, so all of its dependencies are listed, not only the
// notable ones.
var mounterModules = []string{
	"github.com/moby/sys/mountinfo", "github.com/spf13/cobra", "github.com/spf13/pflag",
	"go.uber.org/multierr", "go.uber.org/zap", "golang.org/x/sys",
}

// TestPartsReachOnlyTheirDependencies holds each part to its list above.
// A failure names the chain of imports that reaches the module.
func TestPartsReachOnlyTheirDependencies(t *testing.T) {
	graph := loadGraph(t)
	roots := map[string][]string{}
	for name := range graph {
		if p, ours := part(name); ours && p != "" {
			l := listOf(name)
			roots[l] = append(roots[l], name)
		}
	}
	for p, names := range roots {
		allowed, known := mayReach[p]
		if !known {
			t.Errorf("%s is a part of its own: add it to mayReach with the notable modules it may reach", p)
			continue
		}
		reached := reach(graph, names)
		for _, m := range notable {
			chain, got := reached[m]
			switch want := slices.Contains(allowed, m); {
			case got && !want:
				t.Errorf("%s reaches %s, which it must not: %s", p, m, strings.Join(chain, " -> "))
			case want && !got:
				t.Errorf("%s no longer reaches %s: remove it from mayReach[%q]", p, m, p)
			}
		}
		if p == "cmd/hpp-mounter" {
			checkMounter(t, reached)
		}
	}
	for p := range mayReach {
		if _, found := roots[p]; !found {
			t.Errorf("mayReach names %s, which has no package", p)
		}
	}
}

func checkMounter(t *testing.T, reached map[string][]string) {
	t.Helper()
	var extra []string
	for m, chain := range reached {
		// A notable module is reported above already.
		if m != module && !slices.Contains(mounterModules, m) && !slices.Contains(notable, m) {
			extra = append(extra, m+" ("+strings.Join(chain, " -> ")+")")
		}
	}
	sort.Strings(extra)
	for _, e := range extra {
		t.Errorf("cmd/hpp-mounter reaches %s, which mounterModules does not list", e)
	}
}

// reach walks the imports from the given packages and returns, for each
// module reached, the shortest chain of packages that reaches it.
func reach(graph map[string]pkg, from []string) map[string][]string {
	sort.Strings(from)
	parent := map[string]string{}
	queue := slices.Clone(from)
	for _, n := range from {
		parent[n] = ""
	}
	chains := map[string][]string{}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if m := graph[n].module; m != "" {
			if _, seen := chains[m]; !seen {
				chains[m] = chainTo(parent, n)
			}
		}
		for _, imp := range graph[n].imports {
			if _, seen := parent[imp]; !seen {
				parent[imp] = n
				queue = append(queue, imp)
			}
		}
	}
	return chains
}

// chainTo is the import path from a root to n, test variants named plain.
func chainTo(parent map[string]string, n string) []string {
	var chain []string
	for ; n != ""; n = parent[n] {
		chain = append([]string{base(n)}, chain...)
	}
	return chain
}
