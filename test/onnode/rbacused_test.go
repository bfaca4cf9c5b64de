package onnode

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/test/cluster"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// rarelyCalled are permissions a component holds for a path this test
// does not drive, each with that path. Anything else granted and never
// requested fails the test: a rule nobody calls is privilege for nothing.
var rarelyCalled = map[string]string{
	"hostpath-provisioner-admin-csi: get core/persistentvolumes":                 "csi-provisioner reads the source PVC's PV to clone it (pvcDataSource; test/e2e and the conformance tier clone, this test does not), and hpp-csi's peer transport and its sweep of uncollected copies read PVs (test/e2e's cross-node tiers)",
	"hostpath-provisioner-admin-csi: update core/persistentvolumeclaims":         "csi-provisioner puts its finalizer on a clone's source claim, and clears selected-node to reschedule a claim its node cannot provision",
	"hostpath-provisioner-admin-csi: patch core/events":                          "client-go's event recorder patches an event that repeats instead of creating it again",
	"hostpath-provisioner-admin: patch core/events":                              "client-go's event recorder patches an event that repeats instead of creating it again",
	"hostpath-provisioner-csi-resizer: patch core/events":                        "client-go's event recorder patches an event that repeats instead of creating it again (csi-resizer repeats Resizing events on a refused expansion)",
	"hostpath-provisioner-admin-csi: delete storage.k8s.io/csistoragecapacities": "csi-provisioner deletes the capacity objects of a StorageClass that goes away while it runs (this test's classes mostly go after the install)",
	"hostpath-provisioner-admin: update core/persistentvolumeclaims":             "hpp-legacy selects its node for an Immediate claim annotated for it, and the provisioner library clears selected-node to reschedule",
}

// grant is one (ServiceAccount, API group, resource, verb) a role gives.
type grant struct{ sa, group, resource, verb string }

func (g grant) String() string {
	return fmt.Sprintf("%s: %s %s/%s", g.sa, g.verb, nonEmptyGroup(g.group), g.resource)
}

func nonEmptyGroup(g string) string {
	if g == "" {
		return "core"
	}
	return g
}

// testEveryGrantUsed is the other half of testNoForbidden: every
// permission the csi-only and legacy overlays give their components
// (hpp-csi with csi-provisioner, hpp-legacy) was used by a request in the
// audit log, or is listed in rarelyCalled with the path that needs it.
// The operator renders the same roles (deploy/ is generated from its
// code), so this covers its installs too.
func (e *env) testEveryGrantUsed(t *testing.T) {
	ctx := t.Context()
	var granted []grant
	for _, overlay := range []string{"csi-only", "legacy"} {
		g, err := grantsIn(e.render(ctx, t, overlay, e.pools))
		if err != nil {
			t.Fatalf("overlay %s: %v", overlay, err)
		}
		granted = append(granted, g...)
	}
	if len(granted) == 0 {
		t.Fatal("no Role or ClusterRole bound to a ServiceAccount in the overlays")
	}
	used, err := requestsIn(e.c.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	var unused []string
	for _, g := range granted {
		// Informers list with a WATCH (streaming lists) and fall back to
		// LIST: a watched resource needs both.
		asWatch := grant{sa: g.sa, group: g.group, resource: g.resource, verb: "watch"}
		if used[g] || (g.verb == "list" && used[asWatch]) || rarelyCalled[g.String()] != "" {
			continue
		}
		unused = append(unused, g.String())
	}
	sort.Strings(unused)
	t.Logf("%d permissions granted to the components, %d listed as rarely called", len(granted), len(rarelyCalled))
	if len(unused) > 0 {
		t.Fatalf("%d permissions granted and never requested (drop them, or list them in rarelyCalled with the path that needs them):\n%s",
			len(unused), strings.Join(unused, "\n"))
	}
}

// grantsIn expands the rules of every role in the manifests to the
// ServiceAccounts their bindings name.
func grantsIn(manifests string) ([]grant, error) {
	rules := map[string][]rbacv1.PolicyRule{} // "Role/name" or "ClusterRole/name"
	var bindings []rbacv1.RoleBinding         // ClusterRoleBindings too: same shape
	dec := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifests)))
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		var head struct{ Kind string }
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return nil, err
		}
		switch head.Kind {
		case "Role", "ClusterRole":
			var r rbacv1.ClusterRole
			if err := yaml.Unmarshal(doc, &r); err != nil {
				return nil, err
			}
			rules[head.Kind+"/"+r.Name] = r.Rules
		case "RoleBinding", "ClusterRoleBinding":
			var b rbacv1.RoleBinding
			if err := yaml.Unmarshal(doc, &b); err != nil {
				return nil, err
			}
			bindings = append(bindings, b)
		}
	}
	var out []grant
	for _, b := range bindings {
		for _, s := range b.Subjects {
			if s.Kind != rbacv1.ServiceAccountKind {
				continue
			}
			for _, r := range rules[b.RoleRef.Kind+"/"+b.RoleRef.Name] {
				for _, group := range r.APIGroups {
					for _, res := range r.Resources {
						for _, verb := range r.Verbs {
							out = append(out, grant{sa: s.Name, group: group, resource: res, verb: verb})
						}
					}
				}
			}
		}
	}
	return out, nil
}

// requestsIn reads the audit log: every (ServiceAccount, group, resource,
// verb) of the install namespace's ServiceAccounts that reached
// authorization and was allowed.
func requestsIn(path string) (map[grant]bool, error) {
	prefix := "system:serviceaccount:" + namespace + ":"
	used := map[grant]bool{}
	err := cluster.ReadAuditLog(path, func(ev *cluster.AuditEvent) {
		sa, ok := strings.CutPrefix(ev.User.Username, prefix)
		if !ok || ev.ObjectRef.Resource == "" || ev.ResponseStatus.Code == 403 {
			return
		}
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		used[grant{sa: sa, group: ev.ObjectRef.APIGroup, resource: res, verb: ev.Verb}] = true
	})
	return used, err
}
