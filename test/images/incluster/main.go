// Command incluster is what test/cluster's PodNetwork test runs in a pod:
// an in-cluster client, like the operator or csi-provisioner in their
// pods. It reads the kubernetes Service through the API server with
// rest.InClusterConfig (KUBERNETES_SERVICE_HOST, the ServiceAccount token
// and CA), prints its ClusterIP, then fetches the URL given as its only
// argument (a Service's ClusterIP), retrying for a minute while kube-proxy
// learns the Service's endpoint, and prints the body.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: incluster URL")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, url string) error {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return fmt.Errorf("in-cluster config: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	svc, err := client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get service default/kubernetes through %s: %w", cfg.Host, err)
	}
	fmt.Println("kubernetes " + svc.Spec.ClusterIP)
	var last error
	for ctx.Err() == nil {
		body, err := fetch(ctx, url)
		if err == nil {
			fmt.Println(strings.TrimSpace(body))
			return nil
		}
		last = err
		time.Sleep(time.Second)
	}
	return fmt.Errorf("get %s: %w", url, last)
}

func fetch(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return testutil.HTTPGetOK(ctx, url)
}
