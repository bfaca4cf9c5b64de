package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// The KubeVirt plugin's command line (cmd/plugin there) is Go's flag
// package plus klog's flags. Its DaemonSet passes
//
//	--drivername=... --v=3 --endpoint=... --nodeid=... --version=... --datadir=...
//
// and every one of those must start hpp-csi with the same meaning.

// printVersion is what a bare --version stores: print hpp's version and
// exit, as every hpp binary does. No vendor version looks like it, and
// --help shows it as --version string[="(print)"].
const printVersion = "(print)"

// maxVerbosity bounds --v; klog accepts any int32, but nothing above 10 is
// used anywhere.
const maxVerbosity = 10

// klogFlags are the flags klog.InitFlags registers in the KubeVirt plugin,
// with their types. hpp logs with zap to stderr, so they are accepted (a
// DaemonSet written for the plugin may pass them) and have no effect.
var klogFlags = []struct {
	name string
	kind string // "bool", "string" or "int"
}{
	{"logtostderr", "bool"}, {"alsologtostderr", "bool"}, {"add_dir_header", "bool"},
	{"one_output", "bool"}, {"skip_headers", "bool"}, {"skip_log_headers", "bool"},
	{"legacy_stderr_threshold_behavior", "bool"},
	{"log_dir", "string"}, {"log_file", "string"}, {"log_backtrace_at", "string"},
	{"stderrthreshold", "string"}, {"vmodule", "string"},
	{"log_file_max_size", "int"},
}

// addCompatFlags registers the KubeVirt plugin's flags that hpp did not
// have: the string --version, --v and klog's flags.
func (o *options) addCompatFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.vendorVersion, "version", "",
		"vendor version that GetPluginInfo reports, as the KubeVirt plugin's --version=<v> (default: hpp's version); a bare --version prints hpp's version and exits")
	fs.Lookup("version").NoOptDefVal = printVersion
	fs.IntVar(&o.verbosity, "v", 0,
		"log verbosity as the KubeVirt plugin's klog --v=<n>: 0-3 log at info level, 4 and more at debug (every CSI call); an explicit --log-level wins")
	for _, f := range klogFlags {
		usage := "accepted for compatibility with the KubeVirt plugin's klog flags; no effect (hpp logs to stderr with zap)"
		switch f.kind {
		case "bool":
			fs.Bool(f.name, false, usage)
		case "int":
			fs.Int(f.name, 0, usage)
		default:
			fs.String(f.name, "", usage)
		}
		_ = fs.MarkHidden(f.name)
	}
}

// applyVerbosity maps --v onto the zap level when --log-level is not given.
func (o *options) applyVerbosity(fs *pflag.FlagSet) error {
	if o.verbosity < 0 || o.verbosity > maxVerbosity {
		return fmt.Errorf("--v: %d must be between 0 and %d (0-3: info, 4 and more: debug)", o.verbosity, maxVerbosity)
	}
	if !fs.Changed("v") || fs.Changed("log-level") {
		return nil
	}
	o.logging.Level = "info"
	if o.verbosity >= 4 {
		o.logging.Level = "debug"
	}
	return nil
}

// goFlagArgs rewrites Go-flag spellings of long flags ("-v=3", "-nodeid x")
// to pflag's ("--v=3", "--nodeid x"): the KubeVirt plugin parses its command
// line with Go's flag package, which takes both. Only names of flags that fs
// defines are rewritten, values are never touched (the argument after a
// flag that takes one is skipped), and parsing stops at "--".
func goFlagArgs(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		out = append(out, a)
		if a == "--" {
			return append(out, args[i+1:]...)
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		if !strings.HasPrefix(a, "--") && (len(name) > 1 || fs.ShorthandLookup(name) == nil) {
			out[len(out)-1] = "-" + a
		}
		if !hasValue && f.NoOptDefVal == "" && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}
