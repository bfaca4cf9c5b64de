package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfilesStampTheMakefilesVersion: every image is built from the one
// Dockerfile with the same -X version variables as `make build`, and make
// images passes them and the component.
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
	if stray, _ := filepath.Glob(filepath.Join(root, "cmd", "*", "Dockerfile")); len(stray) > 0 {
		t.Errorf("component Dockerfiles %v: the one Dockerfile at the root builds every component", stray)
	}
	dockerfiles := []string{filepath.Join(root, "Dockerfile")}
	df, err := os.ReadFile(dockerfiles[0])
	if err != nil {
		t.Fatal(err)
	}
	components, _ := filepath.Glob(filepath.Join(root, "cmd", "hpp-*"))
	if len(components) < 5 {
		t.Fatalf("want the five components under cmd/, found %v", components)
	}
	for _, c := range components {
		if name := filepath.Base(c); !regexp.MustCompile(`(?m)^FROM \S+ AS ` + name + `$`).Match(df) {
			t.Errorf("Dockerfile: no final stage named %s (FROM <base> AS %s)", name, name)
		}
	}
	if !strings.Contains(string(images), `--build-arg "COMPONENT=`) {
		t.Error("hack/images.sh does not pass --build-arg COMPONENT")
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
