package main

import (
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/cli"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// TestREADMEFlags: the flag tables in README.md are the commands' own
// (make generate writes them; a stale one fails here and in make lint).
func TestREADMEFlags(t *testing.T) {
	testutil.GeneratedSection(t, "README.md", "flags", cli.FlagsMarkdown(newRootCommand(&environment{})))
}
