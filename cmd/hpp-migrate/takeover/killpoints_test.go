package takeover

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// The writes of an uninterrupted switch and way back from
// killPointInstall, in order. Each is a kill point: the tests below kill
// the run right after it and run the command again. A write the code
// gains fails the test until it is listed here, so it cannot go
// untested.
var (
	switchWrites = []string{
		"create secrets hpp-takeover-backup",
		"delete deployments hostpath-provisioner-operator",
		"delete validatingwebhookconfigurations hostpathprovisioner.kubevirt.io",
		"delete services hostpath-provisioner-operator-webhook-service",
		"delete secrets hostpath-provisioner-operator-webhook-service-cert",
		"patch serviceaccounts hostpath-provisioner-operator (json)",
		"patch clusterroles hostpath-provisioner-operator (json)",
		"patch customresourcedefinitions hostpathprovisioners.hostpathprovisioner.kubevirt.io (json)",
		"patch deployments hostpath-provisioner-operator (json): NotFound",
		"patch validatingwebhookconfigurations hostpathprovisioner.kubevirt.io (json): NotFound",
		"patch customresourcedefinitions hostpathprovisioners.hostpathprovisioner.kubevirt.io (apply)",
		"patch serviceaccounts hostpath-provisioner-operator (apply)",
		"patch clusterroles hostpath-provisioner-operator (apply)",
		"patch deployments hostpath-provisioner-operator (apply)",
		"patch services hostpath-provisioner-operator-webhook (apply)",
		"patch validatingwebhookconfigurations hostpathprovisioner.kubevirt.io (apply)",
	}
	backWrites = []string{
		"delete deployments hostpath-provisioner-operator",
		"delete validatingwebhookconfigurations hostpathprovisioner.kubevirt.io",
		"patch hostpathprovisioners hostpath-provisioner (json)",
		"update daemonsets hostpath-provisioner-csi",
		"update deployments hpp-pool-653b815e",
		"update customresourcedefinitions hostpathprovisioners.hostpathprovisioner.kubevirt.io",
		"patch hostpathprovisioners hostpath-provisioner (merge)",
		"patch hostpathprovisioners/status hostpath-provisioner (merge)",
		"create services hostpath-provisioner-operator-webhook-service",
		"create secrets hostpath-provisioner-operator-webhook-service-cert",
		"update serviceaccounts hostpath-provisioner-operator",
		"update clusterroles hostpath-provisioner-operator",
		"create deployments hostpath-provisioner-operator",
		"create validatingwebhookconfigurations hostpathprovisioner.kubevirt.io",
		"delete services hostpath-provisioner-operator-webhook",
		"delete secrets hpp-takeover-backup",
	}
)

// killPointInstall is upstream's install as the switch finds it: its
// operator, webhook (cert-manager's Service and Secret), CRD, CR with
// hpp's versions in its status only after a switch, CSI DaemonSet and a
// pool's mounter and claim.
func killPointInstall() []runtime.Object {
	var out []runtime.Object
	for i, o := range upstreamInstall() {
		u := o.(*unstructured.Unstructured)
		if u.GetKind() == "HostPathProvisioner" { // upstream's CR has one valid pool
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "local", "path": "/var/hpvolumes"}}, "spec", "storagePools")
		}
		u.SetUID(types.UID(fmt.Sprintf("uid-%d", i)))
		mfs := u.GetManagedFields()
		for j := range mfs { // csaupgrade reads the field sets
			mfs[j].FieldsType, mfs[j].FieldsV1 = "FieldsV1", metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`)
		}
		u.SetManagedFields(mfs)
		out = append(out, u)
	}
	return out
}

// killPointManifests is hpp's install: its operator pods keep upstream's
// `name` label beside the selector's (deploy/base/operator does).
func killPointManifests() []*unstructured.Unstructured {
	ms := hppManifests()
	for _, m := range ms {
		if m.GetKind() == "Deployment" {
			_ = unstructured.SetNestedStringMap(m.Object, map[string]string{"k8s-app": OperatorName, "name": OperatorName}, "spec", "template", "metadata", "labels")
		}
	}
	return ms
}

func simRunner(s *simCluster, out *bytes.Buffer) *Runner {
	return &Runner{Client: s.client, Namespace: ns, Out: out, Timeout: 2 * time.Second, Interval: time.Millisecond}
}

// runSwitch is `hpp-migrate takeover -f -` once: read the cluster, plan,
// switch. wasKilled reports a simulated kill.
func runSwitch(t *testing.T, s *simCluster) (out string, wasKilled bool, err error) {
	t.Helper()
	return untilKilled(func(buf *bytes.Buffer) error {
		inv, err := Collect(context.Background(), s.client, ns, killPointManifests())
		if err != nil {
			t.Fatal(err)
		}
		plan := Assess(inv)
		if !plan.Go() {
			return fmt.Errorf("no-go: %v", plan.NoGo)
		}
		return simRunner(s, buf).Switch(context.Background(), inv, plan)
	})
}

// runBack is `hpp-migrate takeover --back` once.
func runBack(t *testing.T, s *simCluster) (out string, wasKilled bool, err error) {
	return untilKilled(func(buf *bytes.Buffer) error { return simRunner(s, buf).Back(context.Background()) })
}

// untilKilled runs a command, with its output in a buffer, and reports a
// simulated kill instead of its panic.
func untilKilled(run func(*bytes.Buffer) error) (out string, wasKilled bool, err error) {
	var buf bytes.Buffer
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(killed); !ok {
				panic(v)
			}
			out, wasKilled = buf.String(), true
		}
	}()
	err = run(&buf)
	return buf.String(), false, err
}

// checkWrites fails unless the uninterrupted run made exactly the listed
// writes: a new one needs its kill point.
func checkWrites(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("the uninterrupted %s wrote%s\nthe kill points listed are%s\nlist every write (each one gets its kill point)", what, joinLines(got), joinLines(want))
	}
}

// TestSwitchKilledAtEveryWriteThenRunAgain: the switch killed right after
// each of its writes, then run again, ends in the state of an
// uninterrupted switch; a third run on the switched cluster says so,
// writes nothing and waits for nothing.
func TestSwitchKilledAtEveryWriteThenRunAgain(t *testing.T) {
	checkKillPoints(t, killPoints{what: "switch", writes: switchWrites, run: runSwitch, finished: "already switched",
		start: func() *simCluster { return newSimCluster(t, killPointInstall()...) }})
}

// TestBackKilledAtEveryWriteThenRunAgain: the way back, from a switched
// cluster, killed right after each of its writes, then run again, ends in
// the state of an uninterrupted way back; a third run says so and writes
// nothing.
func TestBackKilledAtEveryWriteThenRunAgain(t *testing.T) {
	checkKillPoints(t, killPoints{what: "way back", writes: backWrites, run: runBack, finished: "already back",
		start: func() *simCluster {
			s := newSimCluster(t, killPointInstall()...)
			if out, _, err := runSwitch(t, s); err != nil {
				t.Fatalf("switch: %v\n%s", err, out)
			}
			operatorRan(t, s)
			s.writes = nil
			return s
		}})
}

// killPoints is one command's kill-point test: the cluster it starts
// from, the command, its writes when uninterrupted, and what it says when
// run on the cluster it has finished.
type killPoints struct {
	what, finished string
	writes         []string
	start          func() *simCluster
	run            func(*testing.T, *simCluster) (string, bool, error)
}

func checkKillPoints(t *testing.T, k killPoints) {
	whole := k.start()
	if out, _, err := k.run(t, whole); err != nil {
		t.Fatalf("uninterrupted %s: %v\n%s", k.what, err, out)
	}
	checkWrites(t, k.what, whole.writes, k.writes)
	want := whole.state()
	for at := range k.writes {
		t.Run(fmt.Sprintf("killed-after-%d-%s", at+1, strings.ReplaceAll(k.writes[at], " ", "_")), func(t *testing.T) {
			s := k.start()
			s.killAt = at + 1
			if out, wasKilled, err := k.run(t, s); !wasKilled {
				t.Fatalf("not killed after write %d (%v)\n%s", at+1, err, out)
			}
			s.killAt = 0
			if out, _, err := k.run(t, s); err != nil {
				t.Fatalf("second run: %v\n%s", err, out)
			}
			if d := diffStates(want, s.state()); len(d) > 0 {
				t.Fatalf("after the second run, not the state of an uninterrupted %s:%s", k.what, joinLines(d))
			}
			checkNothingToDo(t, s, k.run, k.finished)
		})
	}
	checkNothingToDo(t, whole, k.run, k.finished)
}

// checkNothingToDo runs the command once more on a finished cluster: it
// must succeed, write nothing and say why.
func checkNothingToDo(t *testing.T, s *simCluster, run func(*testing.T, *simCluster) (string, bool, error), says string) {
	t.Helper()
	before := len(s.writes)
	out, _, err := run(t, s)
	if err != nil {
		t.Fatalf("run on a finished cluster: %v\n%s", err, out)
	}
	if w := s.writes[before:]; len(w) > 0 {
		t.Errorf("run on a finished cluster wrote%s", joinLines(w))
	}
	if !strings.Contains(out, says) {
		t.Errorf("run on a finished cluster printed\n%s\nwant it to say %q", out, says)
	}
}

// operatorRan writes what hpp's operator writes once it runs: its
// finalizer and versions on the CR, its image and label on the node
// workloads.
func operatorRan(t *testing.T, s *simCluster) {
	t.Helper()
	edit := func(r Resource, name string, f func(*unstructured.Unstructured)) {
		o, err := s.tracker().Get(r.GVR, map[bool]string{true: ns}[r.Namespaced], name)
		if err != nil {
			t.Fatal(err)
		}
		u := o.(*unstructured.Unstructured)
		f(u)
		if err := s.tracker().Update(r.GVR, u, u.GetNamespace()); err != nil {
			t.Fatal(err)
		}
	}
	edit(rCR, "hostpath-provisioner", func(u *unstructured.Unstructured) {
		u.SetFinalizers([]string{HPPFinalizer})
		_ = unstructured.SetNestedField(u.Object, "v0.9.0", "status", "observedVersion")
	})
	for _, w := range []struct {
		r    Resource
		name string
	}{{rDaemonSet, CSIDaemonSetName}, {rDeployment, "hpp-pool-653b815e"}} {
		edit(w.r, w.name, func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{ManagedByLabel: hppManagedBy})
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "c", "image": "hpp"}}, "spec", "template", "spec", "containers")
		})
	}
}

// TestPlanWritesNothing: `takeover --plan` reads the cluster and writes
// nothing, on upstream's install and on a switch interrupted half-way.
func TestPlanWritesNothing(t *testing.T) {
	half := newSimCluster(t, killPointInstall()...)
	half.killAt = len(switchWrites) / 2
	if _, wasKilled, _ := runSwitch(t, half); !wasKilled {
		t.Fatal("the switch was not interrupted")
	}
	half.killAt, half.writes = 0, nil
	for name, s := range map[string]*simCluster{"upstream's install": newSimCluster(t, killPointInstall()...), "a half-done switch": half} {
		inv, err := Collect(context.Background(), s.client, ns, killPointManifests())
		if err != nil {
			t.Fatal(err)
		}
		Assess(inv).Print(io.Discard)
		if len(s.writes) > 0 {
			t.Errorf("%s: the plan wrote%s", name, joinLines(s.writes))
		}
	}
}
