package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// FlagsMarkdown renders the command line of cmd and of its subcommands as
// Markdown tables (flag, default, environment, meaning), from the flags
// themselves: `make generate` writes them into the component READMEs, so
// the docs say what the code parses.
func FlagsMarkdown(cmd *cobra.Command, env ...EnvVar) string {
	var b strings.Builder
	flagsMarkdown(&b, cmd, envOf(env), true)
	return b.String()
}

func flagsMarkdown(b *strings.Builder, cmd *cobra.Command, env map[string]string, root bool) {
	if !root {
		fmt.Fprintf(b, "\n`%s`", cmd.CommandPath())
		if cmd.Short != "" {
			fmt.Fprintf(b, ": %s", cmd.Short)
		}
		b.WriteString("\n\n")
	}
	var flags []*pflag.Flag
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Name != "help" {
			flags = append(flags, f)
		}
	})
	if len(flags) == 0 {
		b.WriteString("No flags of its own.\n")
	} else {
		b.WriteString("| flag | default | environment | meaning |\n|---|---|---|---|\n")
	}
	for _, f := range flags {
		name := "`--" + f.Name + "`"
		if f.Shorthand != "" {
			name = "`-" + f.Shorthand + "`, " + name
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", name, defaultOf(f), code(env[f.Name]), cell(f.Usage))
	}
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() && c.Name() != "help" && c.Name() != "completion" {
			flagsMarkdown(b, c, env, false)
		}
	}
}

func envOf(env []EnvVar) map[string]string {
	m := map[string]string{}
	for _, e := range env {
		m[e.Flag] = e.Env
	}
	return m
}

func defaultOf(f *pflag.Flag) string {
	switch {
	case f.Value.Type() == "stringSlice" && f.DefValue == "[]", f.DefValue == "":
		return ""
	case f.NoOptDefVal != "" && f.Value.Type() != "bool":
		return code(f.DefValue) + " (bare: " + code(f.NoOptDefVal) + ")"
	}
	return code(f.DefValue)
}

func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + strings.ReplaceAll(s, "`", "'") + "`"
}

// cell keeps a usage string inside one table cell, its <placeholders>
// shown rather than taken for HTML.
func cell(s string) string {
	s = strings.NewReplacer("|", `\|`, "<", `\<`).Replace(s)
	return strings.ReplaceAll(s, "\n", " ")
}
