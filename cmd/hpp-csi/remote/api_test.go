package remote

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/kubeapi"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/kubeapi/kubeapitest"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

const ns = "ns"

// apiObjects is the cluster of these tests: volumes on node-a (the one
// that serves), claims being created on node-b, and the broken links the
// resolver must name.
func apiObjects() map[string]string {
	claim := func(name, uid, selected, volumeName, source string) string {
		return kubeapitest.Claim(ns, name, uid, selected, volumeName, source)
	}
	pvcSource := kubeapitest.PVCSource
	snapSource := func(name string) string {
		return fmt.Sprintf(`,"dataSourceRef":{"apiGroup":"snapshot.storage.k8s.io","kind":"VolumeSnapshot","name":%q}`, name)
	}
	affinity := func(nodes ...string) string {
		var terms []string
		for _, n := range nodes {
			terms = append(terms, fmt.Sprintf(`{"matchExpressions":[{"key":"other","operator":"Exists"},{"key":%q,"operator":"In","values":[%q]}]}`, contract.TopologyKey, n))
		}
		if len(terms) == 0 {
			return ""
		}
		return `,"nodeAffinity":{"required":{"nodeSelectorTerms":[` + strings.Join(terms, ",") + `]}}`
	}
	pv := func(name, claimName, claimUID, driver string, nodes ...string) string {
		return fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"claimRef":{"namespace":%q,"name":%q,"uid":%q},"csi":{"driver":%q,"volumeHandle":%q}%s}}`,
			name, ns, claimName, claimUID, driver, name, affinity(nodes...))
	}
	snapshot := func(name, content string) string {
		status := ""
		if content != "" {
			status = fmt.Sprintf(`,"status":{"boundVolumeSnapshotContentName":%q}`, content)
		}
		return fmt.Sprintf(`{"metadata":{"namespace":%q,"name":%q,"uid":"uid-%s"}%s}`, ns, name, name, status)
	}
	content := func(name, snap, handle, sourceVolume, managedBy string) string {
		labels := "{}"
		if managedBy != "" {
			labels = fmt.Sprintf(`{%q:%q}`, ManagedByLabel, managedBy)
		}
		return fmt.Sprintf(`{"metadata":{"name":%q,"labels":%s},"spec":{"driver":%q,"source":{"volumeHandle":%q},`+
			`"volumeSnapshotRef":{"namespace":%q,"name":%q,"uid":"uid-%s"}},"status":{"snapshotHandle":%q}}`,
			name, labels, contract.DriverName, sourceVolume, ns, snap, snap, handle)
	}
	node := func(name string, addrs ...string) string {
		var list []string
		for i := 0; i+1 < len(addrs); i += 2 {
			list = append(list, fmt.Sprintf(`{"type":%q,"address":%q}`, addrs[i], addrs[i+1]))
		}
		return fmt.Sprintf(`{"metadata":{"name":%q},"status":{"addresses":[%s]}}`, name, strings.Join(list, ","))
	}
	claims := kubeapitest.ClaimsPath(ns)
	pvs := kubeapitest.PVsPath
	snaps := "/apis/snapshot.storage.k8s.io/v1/namespaces/" + ns + "/volumesnapshots/"
	contents := "/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents/"
	nodes := "/api/v1/nodes/"
	return map[string]string{
		// Sources.
		claims + "src":           claim("src", "uid-src", "node-a", "pvc-src", ""),
		pvs + "pvc-src":          pv("pvc-src", "src", "uid-src", contract.DriverName, "node-a", "node-a"),
		claims + "big":           claim("big", "uid-big", "node-a", "pvc-big", ""),
		pvs + "pvc-big":          pv("pvc-big", "big", "uid-big", contract.DriverName, "node-a"),
		claims + "gone":          claim("gone", "uid-gone", "node-a", "pvc-gone", ""), // bound to a volume node-a no longer holds
		pvs + "pvc-gone":         pv("pvc-gone", "gone", "uid-gone", contract.DriverName, "node-a"),
		claims + "pending":       claim("pending", "uid-pending", "", "", ""),
		claims + "shared":        claim("shared", "uid-shared", "", "pvc-shared", ""),
		pvs + "pvc-shared":       pv("pvc-shared", "shared", "uid-shared", contract.DriverName),
		claims + "split":         claim("split", "uid-split", "", "pvc-split", ""),
		pvs + "pvc-split":        pv("pvc-split", "split", "uid-split", contract.DriverName, "node-a", "node-c"),
		claims + "foreign":       claim("foreign", "uid-foreign", "", "pvc-foreign", ""),
		pvs + "pvc-foreign":      pv("pvc-foreign", "foreign", "uid-foreign", "other.csi.driver", "node-a"),
		claims + "on-b":          claim("on-b", "uid-on-b", "node-b", "pvc-on-b", ""),
		pvs + "pvc-on-b":         pv("pvc-on-b", "on-b", "uid-on-b", contract.DriverName, "node-b"),
		claims + "on-ghost":      claim("on-ghost", "uid-on-ghost", "", "pvc-on-ghost", ""),
		pvs + "pvc-on-ghost":     pv("pvc-on-ghost", "on-ghost", "uid-on-ghost", contract.DriverName, "node-ghost"),
		claims + "on-noaddr":     claim("on-noaddr", "uid-on-noaddr", "", "pvc-on-noaddr", ""),
		pvs + "pvc-on-noaddr":    pv("pvc-on-noaddr", "on-noaddr", "uid-on-noaddr", contract.DriverName, "node-noaddr"),
		snaps + "snap":           snapshot("snap", "content-1"),
		contents + "content-1":   content("content-1", "snap", "snap-1", "pvc-src", ""),
		snaps + "snap-label":     snapshot("snap-label", "content-2"),
		contents + "content-2":   content("content-2", "snap-label", "snap-2", "pvc-deleted", "node-a"),
		snaps + "snap-nolabel":   snapshot("snap-nolabel", "content-3"),
		contents + "content-3":   content("content-3", "snap-nolabel", "snap-3", "pvc-deleted", ""),
		snaps + "snap-badlabel":  snapshot("snap-badlabel", "content-4"),
		contents + "content-4":   content("content-4", "snap-badlabel", "snap-4", "pvc-deleted", "csi-snapshotter"),
		snaps + "snap-unbound":   snapshot("snap-unbound", ""),
		snaps + "snap-nocontent": snapshot("snap-nocontent", "content-missing"),
		// The claims being created, on node-b.
		claims + "clone":             claim("clone", "u1", "node-b", "", pvcSource("src")),
		claims + "clone-big":         claim("clone-big", "u14", "node-b", "", pvcSource("big")),
		claims + "clone-gone":        claim("clone-gone", "u2", "node-b", "", pvcSource("gone")),
		claims + "clone-pending":     claim("clone-pending", "u3", "node-b", "", pvcSource("pending")),
		claims + "clone-shared":      claim("clone-shared", "u4", "node-b", "", pvcSource("shared")),
		claims + "clone-split":       claim("clone-split", "u5", "node-b", "", pvcSource("split")),
		claims + "clone-foreign":     claim("clone-foreign", "u6", "node-b", "", pvcSource("foreign")),
		claims + "clone-local":       claim("clone-local", "u7", "node-b", "", pvcSource("on-b")),
		claims + "clone-ghost":       claim("clone-ghost", "u8", "node-b", "", pvcSource("on-ghost")),
		claims + "clone-noaddr":      claim("clone-noaddr", "u9", "node-b", "", pvcSource("on-noaddr")),
		claims + "clone-nosrc":       claim("clone-nosrc", "u10", "node-b", "", pvcSource("nosuch")),
		claims + "clone-apidown":     claim("clone-apidown", "u11", "node-b", "", pvcSource("apidown")),
		claims + "clone-crossns":     claim("clone-crossns", "u12", "node-b", "", `,"dataSourceRef":{"kind":"PersistentVolumeClaim","name":"src","namespace":"elsewhere"}`),
		claims + "plain":             claim("plain", "u13", "node-b", "", ""),
		claims + "restore":           claim("restore", "u20", "node-b", "", snapSource("snap")),
		claims + "restore-label":     claim("restore-label", "u21", "node-b", "", snapSource("snap-label")),
		claims + "restore-nolabel":   claim("restore-nolabel", "u22", "node-b", "", snapSource("snap-nolabel")),
		claims + "restore-badlabel":  claim("restore-badlabel", "u23", "node-b", "", snapSource("snap-badlabel")),
		claims + "restore-unbound":   claim("restore-unbound", "u24", "node-b", "", snapSource("snap-unbound")),
		claims + "restore-nocontent": claim("restore-nocontent", "u25", "node-b", "", snapSource("snap-nocontent")),
		nodes + "node-a":             node("node-a", "Hostname", "node-a", "ExternalIP", "203.0.113.1", "InternalIP", "127.0.0.1"),
		nodes + "node-b":             node("node-b", "InternalIP", "127.0.0.2"),
		nodes + "node-c":             node("node-c", "Hostname", "node-c.example"),
		nodes + "node-noaddr":        node("node-noaddr"),
	}
}

// fakeAPI serves apiObjects over plain HTTP; the claim "apidown" answers
// 500.
func fakeAPI(t *testing.T) *kubeapi.Sources {
	t.Helper()
	srv := kubeapitest.Server(t, apiObjects(), nil)
	return kubeapi.NewSourcesForHost(srv.URL, srv.Client())
}
