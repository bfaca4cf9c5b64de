package logging

import (
	"strings"
	"testing"
)

func TestValidateNamesEveryBadFlag(t *testing.T) {
	o := Options{Level: "loud", Format: "xml"}
	errs := o.Validate()
	if len(errs) != 2 {
		t.Fatalf("Validate() = %v, want 2 errors", errs)
	}
	if !strings.Contains(errs[0].Error(), "--log-level") || !strings.Contains(errs[1].Error(), "--log-format") {
		t.Fatalf("errors do not name the flags: %v", errs)
	}
}

func TestBuildAcceptsDefaults(t *testing.T) {
	o := Options{Level: "debug", Format: "text"}
	if errs := o.Validate(); len(errs) != 0 {
		t.Fatalf("Validate() = %v", errs)
	}
	l, err := o.Build()
	if err != nil {
		t.Fatal(err)
	}
	if !l.Core().Enabled(-1) {
		t.Fatal("debug level not enabled")
	}
}
