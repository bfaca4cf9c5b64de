package cluster

import (
	"os"
	"path/filepath"
)

// auditPolicy logs every request's metadata (user, verb, resource,
// response code) once, when its response is complete.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// AuditLogPath is kube-apiserver's audit log (JSON lines) when
// Options.AuditLog is set.
func (c *Cluster) AuditLogPath() string { return filepath.Join(c.logDir(), "audit.jsonl") }

// apiserverExtraArgs are kube-apiserver's flags for the opt-in Options.
func (c *Cluster) apiserverExtraArgs() ([]string, error) {
	var args []string
	if c.opts.PodNetwork {
		// Pods reach it at the node IP, the kubernetes Service's endpoint
		// (kube-proxy routes the ClusterIP there). Webhooks are called
		// through their Service's ClusterIP, as on any cluster.
		args = append(args, "--bind-address=0.0.0.0")
	} else {
		args = append(args, "--bind-address=127.0.0.1")
	}
	if c.opts.AuditLog {
		policy := filepath.Join(c.Dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
			return nil, err
		}
		args = append(args, "--audit-policy-file="+policy, "--audit-log-path="+c.AuditLogPath(),
			"--audit-log-format=json", "--audit-log-mode=blocking")
	}
	return args, nil
}
