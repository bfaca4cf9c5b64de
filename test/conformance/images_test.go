package conformance

import (
	"slices"
	"strings"
	"testing"
)

func TestNeededImagesFollowsTheSuitesTags(t *testing.T) {
	// Cut from the output of the v1.37.1 e2e.test.
	listed := strings.Join([]string{
		"localhost/e2e-test-images/busybox:1.37.0-2",
		"localhost/e2e-test-images/nginx:1.27.0-2",
		"registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
		"localhost/e2e-test-images/nginx:1.28.0-2",
		"localhost/e2e-test-images/agnhost:2.66.1",
		"localhost/e2e-test-images/agnhost:2.55",
		"gcr.io/k8s-authenticated-test/agnhost:2.6",
		"localhost/e2e-test-images/glibc-dns-testing:2.1.1",
		"localhost/e2e-test-images/volume/nfs:1.4",
		"localhost/e2e-test-images/agnhost:2.66.1",
	}, "\n")
	refs, err := neededImages(listed)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"localhost/e2e-test-images/busybox:1.37.0-2",
		"localhost/e2e-test-images/nginx:1.27.0-2",
		"localhost/e2e-test-images/nginx:1.28.0-2",
		"localhost/e2e-test-images/agnhost:2.66.1",
		"localhost/e2e-test-images/agnhost:2.55",
		"localhost/e2e-test-images/glibc-dns-testing:2.1.1",
	}
	if !slices.Equal(refs, want) {
		t.Errorf("refs\n%q\nwant\n%q", refs, want)
	}
}

func TestNeededImagesNamesWhatIsMissing(t *testing.T) {
	// Without KUBE_TEST_REPO_LIST the suite names registry.k8s.io.
	_, err := neededImages("registry.k8s.io/e2e-test-images/agnhost:2.66.1\nlocalhost/e2e-test-images/busybox:1.37.0-2\n")
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{"localhost/e2e-test-images/agnhost", "localhost/e2e-test-images/nginx", "KUBE_TEST_REPO_LIST"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %q", err, w)
		}
	}
}
