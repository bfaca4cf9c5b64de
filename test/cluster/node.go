package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// Node is one node of the cluster: the real one (kubelet and containerd,
// pods run) or a simulated one (a Node object the harness keeps Ready;
// the scheduler places pods there, they never start). Either can run host
// processes "on" it, e.g. a CSI driver and its sidecars, with the node's
// environment.
type Node struct {
	// Name is the Node object's name.
	Name string
	// Simulated is true for a node without kubelet.
	Simulated bool

	c   *Cluster
	dir string

	// internalIP is a simulated node's address in its Node status (nil:
	// none); hpp-csi's peers dial it.
	internalIP net.IP
	// metricsURL is the node's hpp-csi /metrics (StartHPPCSI).
	metricsURL string

	mu       sync.Mutex
	procs    []*Process
	hbCancel context.CancelFunc
	hbDone   chan struct{}
}

// RealNode returns the node where kubelet runs.
func (c *Cluster) RealNode() *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.realNode
}

// Node returns a node by name, or nil.
func (c *Cluster) Node(name string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[name]
}

// Nodes returns every node, the real one first, then in creation order.
func (c *Cluster) Nodes() []*Node {
	names := c.sortedNodeNames()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Node, 0, len(names))
	for _, n := range names {
		out = append(out, c.nodes[n])
	}
	return out
}

// Dir is a scratch directory for this node (pools, sockets), inside the
// cluster directory so teardown sweeps its mounts and loop devices.
func (n *Node) Dir() string { return n.dir }

// Env is the environment of a process on this node: NODE_NAME and an
// admin KUBECONFIG.
func (n *Node) Env() []string {
	return []string{"NODE_NAME=" + n.Name, "KUBECONFIG=" + n.c.Kubeconfig}
}

// Cluster returns the cluster the node belongs to.
func (n *Node) Cluster() *Cluster { return n.c }

// StartProcess starts a host process on this node: spec.Env is added to
// the node's Env, and the process is named "<spec.Name>@<node>" (its log
// file too). Stop stops it after the pods, before the control plane.
func (n *Node) StartProcess(spec ProcessSpec) (*Process, error) {
	if strings.ContainsAny(spec.Name, "@/") || spec.Name == "" {
		return nil, fmt.Errorf("process name %q: must be non-empty without '@' or '/'", spec.Name)
	}
	if n.Process(spec.Name) != nil {
		return nil, fmt.Errorf("process %s@%s: already exists (restart it with Process.Restart)", spec.Name, n.Name)
	}
	spec.Name = spec.Name + "@" + n.Name
	spec.Env = append(n.Env(), spec.Env...)
	p, err := startProcess(spec, n.c.logDir(), n.dir)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.procs = append(n.procs, p)
	n.mu.Unlock()
	return p, nil
}

// Process returns the node's process with the short name given to
// StartProcess, or nil.
func (n *Node) Process(name string) *Process {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.procs {
		if p.Name() == name+"@"+n.Name || p.Name() == name {
			return p
		}
	}
	return nil
}

// Processes returns the node's processes in start order.
func (n *Node) Processes() []*Process {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*Process(nil), n.procs...)
}

// StopProcess stops and forgets one of the node's processes.
func (n *Node) StopProcess(ctx context.Context, name string) error {
	p := n.Process(name)
	if p == nil {
		return fmt.Errorf("process %s@%s: not found", name, n.Name)
	}
	err := p.Stop(ctx)
	n.mu.Lock()
	for i, q := range n.procs {
		if q == p {
			n.procs = append(n.procs[:i], n.procs[i+1:]...)
			break
		}
	}
	n.mu.Unlock()
	return err
}

// stopProcesses stops the node's processes in reverse start order.
func (n *Node) stopProcesses(ctx context.Context) error {
	procs := n.Processes()
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		if err := procs[i].Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SimulatedLabel is set to "true" on every simulated node, so a pod can
// be kept off (or on) them with a node selector or affinity.
const SimulatedLabel = "hpp.test/simulated"

// CSINodeDriver is a CSI driver a simulated node reports in its CSINode
// object, as kubelet does after the driver registered.
type CSINodeDriver struct {
	Name         string
	NodeID       string
	TopologyKeys []string
}

// SimulatedNodeOptions describe a simulated node.
type SimulatedNodeOptions struct {
	// Labels are added to kubernetes.io/hostname=<name>; put a CSI
	// driver's topology label here (kubelet does that for a real node).
	Labels map[string]string
	// CSIDrivers go into the node's CSINode object.
	CSIDrivers []CSINodeDriver
	// Pods is the node's pod capacity; 500 when zero.
	Pods int
	// InternalIP is the address in the node's status (none when nil):
	// a loopback address of its own (127.0.0.2, ...) lets each simulated
	// node's hpp-csi listen for peers on the same port (peer.go).
	InternalIP net.IP
}

// AddSimulatedNode creates a Ready node without kubelet: a Node object
// with capacity and labels, a CSINode, and a heartbeat (lease and status)
// that keeps the node controller from marking it NotReady until the node
// is removed or the cluster stops.
func (c *Cluster) AddSimulatedNode(ctx context.Context, name string, opts SimulatedNodeOptions) (*Node, error) {
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return nil, fmt.Errorf("simulated node name %q: %v", name, msgs)
	}
	if c.Node(name) != nil {
		return nil, fmt.Errorf("simulated node %s: already exists", name)
	}
	if opts.Pods < 0 {
		return nil, fmt.Errorf("simulated node %s pods %d: must not be negative", name, opts.Pods)
	}
	for i, d := range opts.CSIDrivers {
		if d.Name == "" || d.NodeID == "" {
			return nil, fmt.Errorf("simulated node %s csiDrivers[%d]: name and node id are required", name, i)
		}
	}
	if opts.Pods == 0 {
		opts.Pods = 500
	}
	labels := map[string]string{corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64", SimulatedLabel: "true"}
	for k, v := range opts.Labels {
		labels[k] = v
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	created, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("simulated node %s: %w", name, err)
	}
	n := &Node{Name: name, Simulated: true, c: c, dir: filepath.Join(c.nodesDir(), name), internalIP: opts.InternalIP}
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return nil, err
	}
	if err := n.setStatus(ctx, opts.Pods); err != nil {
		return nil, err
	}
	if len(opts.CSIDrivers) > 0 {
		csiNode := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node", Name: name, UID: created.UID,
		}}}}
		for _, d := range opts.CSIDrivers {
			csiNode.Spec.Drivers = append(csiNode.Spec.Drivers, storagev1.CSINodeDriver{Name: d.Name, NodeID: d.NodeID, TopologyKeys: d.TopologyKeys})
		}
		if _, err := c.Client.StorageV1().CSINodes().Create(ctx, csiNode, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("simulated node %s csinode: %w", name, err)
		}
	}
	hbCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.hbCancel, n.hbDone = cancel, make(chan struct{})
	go n.heartbeat(hbCtx, opts.Pods)
	c.mu.Lock()
	c.nodes[name] = n
	c.nodeOrder = append(c.nodeOrder, name)
	c.mu.Unlock()
	c.opts.Logf("simulated node %s added", name)
	return n, nil
}

// setStatus writes the node's status on the latest version of the Node:
// the node controller updates it too (taints, annotations), so a write
// may conflict and is retried.
func (n *Node) setStatus(ctx context.Context, pods int) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := n.c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return n.updateStatus(ctx, node, pods)
	})
}

// updateStatus sets the conditions and capacity a kubelet would report.
func (n *Node) updateStatus(ctx context.Context, node *corev1.Node, pods int) error {
	now := metav1.Now()
	res := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("8"),
		corev1.ResourceMemory:           resource.MustParse("32Gi"),
		corev1.ResourcePods:             *resource.NewQuantity(int64(pods), resource.DecimalSI),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	node.Status.Capacity, node.Status.Allocatable = res, res
	node.Status.Phase = corev1.NodeRunning
	if n.internalIP != nil {
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.internalIP.String()}, {Type: corev1.NodeHostName, Address: n.Name}}
	}
	node.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "simulated by the hpp test harness", LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", LastHeartbeatTime: now, LastTransitionTime: now},
	}
	_, err := n.c.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// heartbeat renews the node's lease and status every 10 s, as kubelet does.
func (n *Node) heartbeat(ctx context.Context, pods int) {
	defer close(n.hbDone)
	leases := n.c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		now := metav1.NewMicroTime(time.Now())
		lease, err := leases.Get(ctx, n.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, _ = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: n.Name},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(n.Name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now},
			}, metav1.CreateOptions{})
		case err == nil:
			lease.Spec.RenewTime = &now
			_, _ = leases.Update(ctx, lease, metav1.UpdateOptions{})
		}
		_ = n.setStatus(ctx, pods)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (n *Node) stopHeartbeat() {
	if n.hbCancel != nil {
		n.hbCancel()
		<-n.hbDone
		n.hbCancel = nil
	}
}

// RemoveSimulatedNode stops the node's processes and heartbeat, deletes
// the pods bound to it (at once: no kubelet will confirm), its CSINode,
// lease and Node object, and its directory.
func (c *Cluster) RemoveSimulatedNode(ctx context.Context, name string) error {
	n := c.Node(name)
	if n == nil || !n.Simulated {
		return fmt.Errorf("simulated node %s: not found", name)
	}
	n.stopHeartbeat()
	var errs []error
	if err := n.stopProcesses(ctx); err != nil {
		errs = append(errs, err)
	}
	pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String()})
	if err != nil {
		errs = append(errs, err)
	} else {
		for _, p := range pods.Items {
			err := c.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	for _, del := range []func() error{
		func() error { return c.Client.StorageV1().CSINodes().Delete(ctx, name, metav1.DeleteOptions{}) },
		func() error {
			return c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, name, metav1.DeleteOptions{})
		},
		func() error { return c.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}) },
	} {
		if err := del(); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if err := unmountAll(n.dir); err != nil {
		errs = append(errs, err)
	} else if err := detachLoops(ctx, c.cmd, n.dir); err != nil {
		errs = append(errs, err)
	} else if err := os.RemoveAll(n.dir); err != nil {
		errs = append(errs, err)
	}
	c.mu.Lock()
	delete(c.nodes, name)
	for i, o := range c.nodeOrder {
		if o == name {
			c.nodeOrder = append(c.nodeOrder[:i], c.nodeOrder[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("remove simulated node %s: %w", name, errors.Join(errs...))
	}
	return nil
}
