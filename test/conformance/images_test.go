package conformance

import (
	"strings"
	"testing"
)

func TestNeededImagesFollowsTheSuitesTags(t *testing.T) {
	listed := strings.Join([]string{
		"localhost/e2e-test-images/agnhost:2.66.1",
		"localhost/e2e-test-images/busybox:1.37.0-2",
		"localhost/e2e-test-images/glibc-dns-testing:2.1.1",
		"localhost/e2e-test-images/nginx:1.27.0-2",
		"registry.k8s.io/pause:3.10",
		"localhost/e2e-test-images/volume/nfs:1.4",
	}, "\n")
	refs, err := neededImages(listed)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"agnhost":           "localhost/e2e-test-images/agnhost:2.66.1",
		"busybox":           "localhost/e2e-test-images/busybox:1.37.0-2",
		"glibc-dns-testing": "localhost/e2e-test-images/glibc-dns-testing:2.1.1",
		"nginx":             "localhost/e2e-test-images/nginx:1.27.0-2",
	}
	if len(refs) != len(want) {
		t.Errorf("refs %v, want %v", refs, want)
	}
	for k, v := range want {
		if refs[k] != v {
			t.Errorf("%s: %q, want %q", k, refs[k], v)
		}
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
