package main

import (
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/cli"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// TestREADMEFlags: the flag table in README.md is the command's own, and
// the environment table is envVars (make generate writes both; a stale one
// fails here and in make lint).
func TestREADMEFlags(t *testing.T) {
	testutil.GeneratedSection(t, "README.md", "flags", cli.FlagsMarkdown(newCommand(&options{}, nil, nil)))
	testutil.GeneratedSection(t, "README.md", "environment", envMarkdown())
}
