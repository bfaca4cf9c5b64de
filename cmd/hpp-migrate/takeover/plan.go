package takeover

import (
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// Action is what the switch does to an object.
type Action string

const (
	// Adopted: kept in place (name, uid), its fields handed to hpp.
	Adopted Action = "adopted"
	// Rolled: kept in place, its pods replaced one node at a time.
	Rolled Action = "rolled"
	// Replaced: deleted and made again by hpp (not on the data path).
	Replaced Action = "replaced"
	// Removed: upstream's, with no counterpart in hpp.
	Removed Action = "removed"
	// Left: not changed (the user's).
	Left Action = "left"
	// Created: hpp's, new.
	Created Action = "created"
)

// Item is one object and what happens to it.
type Item struct {
	Ref
	Action Action `json:"action"`
	Why    string `json:"why"`
}

// Plan is the preflight's verdict.
type Plan struct {
	Namespace string `json:"namespace"`
	Items     []Item `json:"items"`
	// PVs whose fs type or layout needs a look.
	PVs []string `json:"pvs,omitempty"`
	// CRFields hpp's validation would refuse on a change.
	CRFields []string `json:"crFields,omitempty"`
	// Collisions: hpp's names held by objects neither install made.
	Collisions []string `json:"collisions,omitempty"`
	// Managers: field managers whose fields the switch takes over.
	Managers []string `json:"fieldManagers,omitempty"`
	// NetworkPolicies: whether hpp's operator ports are reachable.
	NetworkPolicies []string `json:"networkPolicies,omitempty"`
	// NoGo are the reasons not to switch; none means go.
	NoGo []string `json:"noGo,omitempty"`
	// Resumed: hpp's operator already runs (a switch to finish).
	Resumed bool `json:"resumed,omitempty"`
}

// Go reports whether the switch may proceed.
func (p *Plan) Go() bool { return len(p.NoGo) == 0 }

// Count is the number of items with action a.
func (p *Plan) Count(a Action) int {
	n := 0
	for _, it := range p.Items {
		if it.Action == a {
			n++
		}
	}
	return n
}

// Assess classifies every object of upstream's install and the manifests.
func Assess(inv *Inventory) *Plan {
	p := &Plan{Namespace: inv.Namespace}
	p.Resumed = operatorIsHPPs(inv)
	crs := inv.Live["HostPathProvisioner"]
	switch {
	case !inv.Served["HostPathProvisioner"] || len(crs) == 0:
		p.NoGo = append(p.NoGo, "no HostPathProvisioner in the cluster: nothing to take over (install hpp as deploy/README.md says)")
	case len(crs) > 1:
		p.NoGo = append(p.NoGo, fmt.Sprintf("%d HostPathProvisioners: hpp runs from exactly one", len(crs)))
	default:
		p.assessCR(crs[0])
	}
	for _, r := range Resources {
		for _, o := range inv.Live[r.Kind] {
			if it, ok := classify(inv, o); ok {
				p.Items = append(p.Items, it)
			}
		}
	}
	for _, m := range inv.Manifests {
		if m.GetKind() == "Namespace" {
			continue
		}
		if inv.Get(m.GetKind(), m.GetNamespace(), m.GetName()) == nil {
			p.Items = append(p.Items, Item{Ref: refOf(m), Action: Created, Why: "hpp's install"})
		}
	}
	p.assessCollisions(inv)
	p.assessPVs(inv, crs)
	p.assessNetworkPolicies(inv)
	return p
}

// operatorIsHPPs: the live operator Deployment has hpp's selector.
func operatorIsHPPs(inv *Inventory) bool {
	live, want := inv.Get("Deployment", inv.Namespace, OperatorName), inv.Manifest("Deployment", OperatorName)
	return live != nil && want != nil && sameSelector(live, want)
}

func sameSelector(a, b *unstructured.Unstructured) bool {
	as, _, _ := unstructured.NestedFieldNoCopy(a.Object, "spec", "selector")
	bs, _, _ := unstructured.NestedFieldNoCopy(b.Object, "spec", "selector")
	return reflect.DeepEqual(as, bs)
}

// isUpstreams: made by upstream's operator or install (and not since
// taken over by hpp), or the CR and its CRD.
func isUpstreams(o *unstructured.Unstructured) bool {
	switch {
	case o.GetKind() == "HostPathProvisioner", o.GetKind() == "CustomResourceDefinition" && o.GetName() == CRDName:
		return true
	case madeByUpstreamOperator(o):
		return true
	}
	return isUpstreamInstallName(o.GetKind(), o.GetName()) && !madeByHPP(o)
}

func classify(inv *Inventory, o *unstructured.Unstructured) (Item, bool) {
	it := Item{Ref: refOf(o)}
	kind, name := o.GetKind(), o.GetName()
	switch {
	case kind == "StorageClass":
		if prov, _, _ := unstructured.NestedString(o.Object, "provisioner"); prov != CSIDriverName && prov != LegacyProvisionerName {
			return it, false
		}
		if madeByUpstreamOperator(o) {
			it.Action, it.Why = Adopted, "made by upstream's operator for a pool; hpp's operator makes the same"
		} else {
			it.Action, it.Why = Left, "the user's StorageClass: hpp takes the same provisioner and parameters"
		}
		return it, true
	case kind == "PersistentVolume":
		return it, false
	case !isUpstreams(o) && !madeByHPP(o):
		return it, false
	case !isUpstreams(o):
		if inv.Manifest(kind, name) != nil || madeByHPP(o) {
			it.Action, it.Why = Adopted, "already hpp's (a switch to finish)"
			return it, true
		}
		return it, false
	}
	m := inv.Manifest(kind, name)
	switch {
	case kind == "Deployment" && m != nil && !sameSelector(o, m):
		it.Action, it.Why = Replaced, "upstream's operator: hpp's operator Deployment has another selector (immutable), so it is deleted and hpp's created; the operator is not on the data path"
	case kind == "ValidatingWebhookConfiguration" && m != nil && !sameWebhooks(o, m):
		it.Action, it.Why = Replaced, "deleted before anything else (it sends CR changes and deletions to upstream's webhook, failurePolicy Fail), then hpp's made"
	case m != nil:
		it.Action, it.Why = Adopted, "applied over by hpp's install (server-side, forced); the fields kubectl create wrote are handed to kubectl's apply manager first"
	case isUpstreamInstallName(kind, name) && (kind == "Service" || kind == "Secret" || kind == "Issuer" || kind == "Certificate"):
		it.Action, it.Why = Removed, "upstream's webhook (cert-manager); hpp's operator serves its own webhook with its own certificate"
	case kind == "DaemonSet":
		it.Action, it.Why = Rolled, "kept with its uid and live selector; its pods roll one node at a time (maxUnavailable "+maxUnavailable(o)+")"
	case kind == "Deployment":
		it.Action, it.Why = Rolled, "pool mounter adopted in place: same name and selector, pod rolled, the pool stays mounted"
	case kind == "PersistentVolumeClaim":
		it.Action, it.Why = Adopted, "pool claim kept: same name (upstream's, shortened names included), uid and data"
	case kind == "HostPathProvisioner":
		it.Action, it.Why = Adopted, "reconciled by hpp's operator; upstream's finalizer replaced by hpp's"
	case kind == "Job":
		it.Action, it.Why = Left, "a pool cleanup Job of upstream's: it finishes on its own"
	case kind == "CSIDriver":
		it.Action, it.Why = Adopted, "same name; its immutable fields are kept as they are"
	default:
		it.Action, it.Why = Adopted, "hpp's operator makes the same object under the same name"
	}
	return it, true
}

func sameWebhooks(a, b *unstructured.Unstructured) bool {
	names := func(o *unstructured.Unstructured) []string {
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		var out []string
		for _, h := range hooks {
			if m, ok := h.(map[string]any); ok {
				out = append(out, fmt.Sprint(m["name"]))
			}
		}
		sort.Strings(out)
		return out
	}
	return slices.Equal(names(a), names(b))
}

func maxUnavailable(ds *unstructured.Unstructured) string {
	v, found, _ := unstructured.NestedFieldNoCopy(ds.Object, "spec", "updateStrategy", "rollingUpdate", "maxUnavailable")
	if !found {
		return "1"
	}
	return fmt.Sprint(v)
}

func (p *Plan) assessCR(cr *unstructured.Unstructured) {
	specMap, _, _ := unstructured.NestedMap(cr.Object, "spec")
	var spec hppv1.HostPathProvisionerSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(specMap, &spec); err != nil {
		p.NoGo = append(p.NoGo, fmt.Sprintf("HostPathProvisioner %s: spec does not decode: %v", cr.GetName(), err))
		return
	}
	for _, e := range hppv1.ValidateSpec(&spec) {
		p.CRFields = append(p.CRFields, fmt.Sprintf("HostPathProvisioner %s: %s (hpp keeps running the stored CR; a change is refused until this is fixed)", cr.GetName(), e.Error()))
	}
}

// assessCollisions: a live object under one of hpp's manifest names that
// neither upstream's install nor hpp's made.
func (p *Plan) assessCollisions(inv *Inventory) {
	for _, m := range inv.Manifests {
		if m.GetKind() == "Namespace" {
			continue
		}
		live := inv.Get(m.GetKind(), m.GetNamespace(), m.GetName())
		if live == nil {
			continue
		}
		var others []string
		for _, mgr := range managers(live) {
			if !slices.Contains(upstreamUpdateManagers, mgr) && mgr != UpstreamOperatorManager && mgr != ApplyManager && mgr != HPPOperatorManager && !systemManager(mgr) {
				others = append(others, mgr)
			}
		}
		switch {
		case !isUpstreams(live) && !madeByHPP(live):
			p.Collisions = append(p.Collisions, fmt.Sprintf("%s exists and neither upstream's install nor hpp's made it (field managers %v): the switch would take it over", refOf(live), managers(live)))
		case len(others) > 0:
			p.Managers = append(p.Managers, fmt.Sprintf("%s: fields of %v are overwritten (forced apply)", refOf(live), others))
		case isUpstreams(live) && hasManager(live, upstreamUpdateManagers...):
			p.Managers = append(p.Managers, fmt.Sprintf("%s: kubectl create's fields are handed to %q, then hpp's apply forces the conflicts a plain `kubectl apply --server-side` stops at", refOf(live), ApplyManager))
		}
	}
	if len(p.Collisions) > 0 {
		p.NoGo = append(p.NoGo, fmt.Sprintf("%d name collisions (see above)", len(p.Collisions)))
	}
}

// systemManager: Kubernetes' own controllers write status and defaults.
func systemManager(m string) bool {
	return strings.HasPrefix(m, "kube-") || m == "kubelet" || m == "before-first-apply"
}

// Driver and provisioner names of the compatibility contract.
const (
	CSIDriverName         = contract.DriverName
	LegacyProvisionerName = contract.LegacyProvisionerName
)

func (p *Plan) assessPVs(inv *Inventory, crs []*unstructured.Unstructured) {
	pools := map[string]bool{}
	legacyPath := false
	for _, cr := range crs {
		list, _, _ := unstructured.NestedSlice(cr.Object, "spec", "storagePools")
		for _, e := range list {
			if m, ok := e.(map[string]any); ok {
				pools[fmt.Sprint(m["name"])] = true
			}
		}
		_, legacyPath, _ = unstructured.NestedMap(cr.Object, "spec", "pathConfig")
	}
	if legacyPath {
		pools["legacy"] = true
	}
	fsTypes := map[string][]string{}
	var legacy []string
	for _, o := range inv.Live["PersistentVolume"] {
		var pv corev1.PersistentVolume
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &pv); err != nil {
			p.PVs = append(p.PVs, fmt.Sprintf("PV %s: does not decode: %v", o.GetName(), err))
			continue
		}
		if pv.Annotations[contract.AnnProvisionedBy] == LegacyProvisionerName && pv.Spec.HostPath != nil {
			legacy = append(legacy, pv.Name)
			continue
		}
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != CSIDriverName {
			continue
		}
		if fs := pv.Spec.CSI.FSType; fs != "" {
			fsTypes[fs] = append(fsTypes[fs], pv.Name)
		}
		if pool := pv.Spec.CSI.VolumeAttributes[contract.ParamStoragePool]; pool != "" && len(crs) > 0 && !pools[pool] {
			p.PVs = append(p.PVs, fmt.Sprintf("PV %s: pool %q is not in the CR: it cannot be mounted until the pool is back", pv.Name, pool))
		}
	}
	for _, fs := range sortedKeys(fsTypes) {
		names := fsTypes[fs]
		p.PVs = append(p.PVs, fmt.Sprintf("%d PVs carry fsType %q (upstream's csi-provisioner --default-fstype; immutable): hpp ignores the fs type of a directory volume, as upstream does: nothing to do (%s)", len(names), fs, sample(names)))
	}
	if len(legacy) > 0 {
		p.PVs = append(p.PVs, fmt.Sprintf("%d legacy hostPath PVs (%s): kept as they are (hpp-legacy serves pathConfig); `hpp-migrate plan` moves them onto the CSI driver later", len(legacy), sample(legacy)))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sample(names []string) string {
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:3], ", ") + fmt.Sprintf(" and %d more", len(names)-3)
}

// assessNetworkPolicies: can the API server reach hpp's webhook port and
// Prometheus its metrics port, given the namespace's NetworkPolicies?
func (p *Plan) assessNetworkPolicies(inv *Inventory) {
	dep := inv.Manifest("Deployment", OperatorName)
	policies := inv.Live["NetworkPolicy"]
	if dep == nil {
		return
	}
	if len(policies) == 0 {
		p.NetworkPolicies = append(p.NetworkPolicies, fmt.Sprintf("no NetworkPolicy in %s: every port of hpp's operator is reachable", inv.Namespace))
		return
	}
	podLabels, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "labels")
	var selecting []*unstructured.Unstructured
	for _, np := range policies {
		sel := &metav1.LabelSelector{}
		if m, found, _ := unstructured.NestedMap(np.Object, "spec", "podSelector"); found {
			_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, sel)
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil || !s.Matches(labels.Set(podLabels)) || !hasIngressType(np) {
			continue
		}
		selecting = append(selecting, np)
	}
	if len(selecting) == 0 {
		p.NetworkPolicies = append(p.NetworkPolicies, fmt.Sprintf("%d NetworkPolicies in %s, none restricts ingress to hpp's operator pods", len(policies), inv.Namespace))
		return
	}
	for _, port := range containerPorts(dep) {
		var allowed []string
		for _, np := range selecting {
			if allowsPort(np, port.name, port.number) {
				allowed = append(allowed, np.GetName())
			}
		}
		switch {
		case len(allowed) > 0:
			p.NetworkPolicies = append(p.NetworkPolicies, fmt.Sprintf("port %d (%s): allowed by %s", port.number, port.name, strings.Join(allowed, ", ")))
		case port.name == "webhook":
			p.NetworkPolicies = append(p.NetworkPolicies, fmt.Sprintf("port %d (webhook): no NetworkPolicy allows it", port.number))
			p.NoGo = append(p.NoGo, fmt.Sprintf("hpp's webhook port %d is not reachable under the NetworkPolicies of %s: every change of the CR would be refused (failurePolicy Fail)", port.number, inv.Namespace))
		default:
			p.NetworkPolicies = append(p.NetworkPolicies, fmt.Sprintf("port %d (%s): no NetworkPolicy allows it (not reachable from other pods)", port.number, port.name))
		}
	}
}

func hasIngressType(np *unstructured.Unstructured) bool {
	types, found, _ := unstructured.NestedStringSlice(np.Object, "spec", "policyTypes")
	return !found || slices.Contains(types, "Ingress")
}

type namedPort struct {
	name   string
	number int64
}

func containerPorts(dep *unstructured.Unstructured) []namedPort {
	var out []namedPort
	ctrs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	for _, c := range ctrs {
		cm, _ := c.(map[string]any)
		ports, _, _ := unstructured.NestedSlice(cm, "ports")
		for _, pt := range ports {
			pm, _ := pt.(map[string]any)
			n, _, _ := unstructured.NestedInt64(pm, "containerPort")
			name, _, _ := unstructured.NestedString(pm, "name")
			if name == "health" {
				continue // kubelet's probes are not subject to NetworkPolicies
			}
			out = append(out, namedPort{name, n})
		}
	}
	return out
}

// allowsPort: an ingress rule without ports, or with this port by number
// or name.
func allowsPort(np *unstructured.Unstructured, name string, number int64) bool {
	rules, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
	for _, r := range rules {
		rm, _ := r.(map[string]any)
		ports, found, _ := unstructured.NestedSlice(rm, "ports")
		if !found || len(ports) == 0 {
			return true
		}
		for _, pt := range ports {
			pm, _ := pt.(map[string]any)
			switch v := pm["port"].(type) {
			case nil:
				return true
			case string:
				if v == name {
					return true
				}
			default:
				if fmt.Sprint(v) == fmt.Sprint(number) {
					return true
				}
			}
		}
	}
	return false
}

// Print writes the plan for a person.
func (p *Plan) Print(w io.Writer) {
	fmt.Fprintf(w, "Taking over namespace %s from the KubeVirt hostpath-provisioner-operator\n", p.Namespace)
	if p.Resumed {
		fmt.Fprintln(w, "hpp's operator already runs there: the switch resumes where it stopped")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OBJECT\tACTION\tWHY")
	for _, it := range p.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", it.Ref, it.Action, it.Why)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%d objects: %d adopted, %d rolled, %d replaced, %d removed, %d left, %d created\n", len(p.Items),
		p.Count(Adopted), p.Count(Rolled), p.Count(Replaced), p.Count(Removed), p.Count(Left), p.Count(Created))
	section := func(title string, lines []string) {
		fmt.Fprintf(w, "\n%s:", title)
		if len(lines) == 0 {
			fmt.Fprintln(w, " none")
			return
		}
		fmt.Fprintln(w)
		for _, l := range lines {
			fmt.Fprintf(w, "  - %s\n", l)
		}
	}
	section("PVs needing attention", p.PVs)
	section("CR fields hpp would refuse", p.CRFields)
	section("Name collisions", p.Collisions)
	section("Field managers", p.Managers)
	section("NetworkPolicy reach", p.NetworkPolicies)
	fmt.Fprintln(w)
	if p.Go() {
		fmt.Fprintln(w, "GO: nothing stops the switch")
		return
	}
	fmt.Fprintf(w, "NO-GO:\n")
	for _, r := range p.NoGo {
		fmt.Fprintf(w, "  - %s\n", r)
	}
}
