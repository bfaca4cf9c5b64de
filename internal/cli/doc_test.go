package cli

import (
	"testing"

	"github.com/spf13/cobra"
)

func TestFlagsMarkdown(t *testing.T) {
	root := NewRoot("tool", "a tool")
	root.Flags().String("node-name", "", "this node (a | b)")
	root.Flags().Int("workers", 4, "parallel\nwork")
	sub := &cobra.Command{Use: "sub", Short: "does a thing", RunE: func(*cobra.Command, []string) error { return nil }}
	sub.Flags().StringP("output", "o", "table", "table or json")
	root.AddCommand(sub)
	got := FlagsMarkdown(root, EnvVar{Flag: "node-name", Env: "NODE_NAME"})
	want := "| flag | default | environment | meaning |\n|---|---|---|---|\n" +
		"| `--node-name` |  | `NODE_NAME` | this node (a \\| b) |\n" +
		"| `--workers` | `4` |  | parallel work |\n" +
		"\n`tool sub`: does a thing\n\n" +
		"| flag | default | environment | meaning |\n|---|---|---|---|\n" +
		"| `-o`, `--output` | `table` |  | table or json |\n"
	if got != want {
		t.Fatalf("FlagsMarkdown =\n%s\nwant\n%s", got, want)
	}
}
