package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// With PodNetwork, kube-proxy routes ClusterIPs: a pod reaches the API
// server through the kubernetes Service with its ServiceAccount token (as
// in-cluster clients do) and another pod through that pod's Service; after
// Stop no kube-proxy process and no KUBE- chain remain.
func TestPodNetworkRoutesServices(t *testing.T) {
	bins := requireClusterTier(t)
	img, err := buildInClusterImage(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := startForTest(t, Options{Binaries: bins, Logf: t.Logf, PodNetwork: true, Images: []Image{img}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	proxy := c.Process("kube-proxy")
	if proxy == nil || !proxy.Running() {
		t.Fatal("kube-proxy is not running")
	}

	// The default ServiceAccount may read Services in its namespace, so
	// the reply proves the token was accepted, not only that TCP got
	// through.
	if _, err := c.Client.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "default-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: "default"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	server := busyboxPod("web", "mkdir /www && echo hello-through-service > /www/index.html && exec httpd -f -p 8080 -h /www")
	server.Labels = map[string]string{"app": "web"}
	server.Spec.RestartPolicy = corev1.RestartPolicyAlways
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, server, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := c.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	client := busyboxPod("client", "")
	client.Spec.Containers[0].Image = inClusterImage
	client.Spec.Containers[0].Command = []string{"/incluster", "http://" + svc.Spec.ClusterIP + "/"}
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var phase corev1.PodPhase
	if err := poll(ctx, 3*time.Minute, 500*time.Millisecond, "pod client finished", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "client", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	}); err != nil {
		t.Fatal(err)
	}
	logs, err := c.Client.CoreV1().Pods("default").GetLogs("client", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := "kubernetes " + kubernetesServiceIP + "\nhello-through-service"
	if got := strings.TrimSpace(string(logs)); phase != corev1.PodSucceeded || got != want {
		t.Fatalf("pod client %s, output %q; want Succeeded with %q", phase, got, want)
	}

	dir := c.Dir
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if left := processesMentioning(bins.KubeProxy); len(left) > 0 || proxy.Running() {
		t.Errorf("kube-proxy still running after Stop: %v", left)
	}
	if left := processesMentioning(dir); len(left) > 0 {
		t.Errorf("processes of the cluster left after Stop: %v", left)
	}
	for _, bin := range []string{"iptables", "ip6tables"} {
		for _, table := range iptablesTables() {
			for _, chain := range listChains(ctx, hostCommander{}, bin, table) {
				if strings.HasPrefix(chain, "KUBE-") {
					t.Errorf("%s %s chain %s left after Stop", bin, table, chain)
				}
			}
		}
	}
}

// inClusterImage runs test/images/incluster: an in-cluster client.
const inClusterImage = "localhost/hpp/incluster:test"

// buildInClusterImage builds test/images/incluster (static) into dir and
// wraps it as inClusterImage.
func buildInClusterImage(ctx context.Context, dir string) (Image, error) {
	bin := filepath.Join(dir, "incluster")
	if err := buildTestImageCommand(ctx, "incluster", bin); err != nil {
		return Image{}, fmt.Errorf("incluster image: %w", err)
	}
	return BinaryImage(inClusterImage, bin)
}

// busyboxPod is a pod of one busybox container running script, that
// never restarts and stops at once.
func busyboxPod(name, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "c", Image: BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", script},
			}},
		},
	}
}
