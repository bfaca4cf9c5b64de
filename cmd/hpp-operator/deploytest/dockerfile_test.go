package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfilesStampTheMakefilesVersion: every image is built with the
// same -X version variables as `make build`, and make images passes them.
func TestDockerfilesStampTheMakefilesVersion(t *testing.T) {
	root := testenvRoot()
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	vars := regexp.MustCompile(`-X (\S+)=\$\((\w+)\)`).FindAllStringSubmatch(string(mk), -1)
	if len(vars) == 0 {
		t.Fatal("no -X flags found in the Makefile's LDFLAGS")
	}
	images, err := os.ReadFile(filepath.Join(root, "hack", "images.sh"))
	if err != nil {
		t.Fatal(err)
	}
	dockerfiles, _ := filepath.Glob(filepath.Join(root, "cmd", "*", "Dockerfile"))
	if len(dockerfiles) < 5 {
		t.Fatalf("want a Dockerfile per component, found %v", dockerfiles)
	}
	for _, v := range vars {
		flag, arg := "-X "+v[1]+"=${"+v[2]+"}", v[2]
		for _, df := range dockerfiles {
			b, err := os.ReadFile(df)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), flag) || !strings.Contains(string(b), "ARG "+arg) {
				t.Errorf("%s: lacks ARG %s and ldflags %q", df, arg, flag)
			}
		}
		if !strings.Contains(string(images), `--build-arg "`+arg+`=`) {
			t.Errorf("hack/images.sh does not pass --build-arg %s", arg)
		}
	}
}
