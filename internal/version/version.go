// Package version carries the build's identity. The Makefile stamps the
// variables with -ldflags; a plain `go build` reports "dev".
package version

import (
	"fmt"
	"runtime"
)

// Set by -ldflags "-X github.com/hostpath-provisioner/hpp/internal/version.Version=...".
var (
	Version = "dev"
	Commit  = "unknown"
)

// Info is the identity of one binary, for --version and the startup log line.
type Info struct {
	Component string
	Version   string
	Commit    string
	GoVersion string
	Platform  string
}

// Get returns the build identity of the named component.
func Get(component string) Info {
	return Info{
		Component: component,
		Version:   Version,
		Commit:    Commit,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
}

func (i Info) String() string {
	return fmt.Sprintf("%s %s (commit %s, %s, %s)", i.Component, i.Version, i.Commit, i.GoVersion, i.Platform)
}
