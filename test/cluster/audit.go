package cluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AuditEvent is the part of an audit.k8s.io/v1 Event the tests read.
type AuditEvent struct {
	Stage          string           `json:"stage"`
	StageTimestamp metav1.MicroTime `json:"stageTimestamp"`
	Verb           string           `json:"verb"`
	RequestURI     string           `json:"requestURI"`
	UserAgent      string           `json:"userAgent"`
	User           struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		APIGroup    string `json:"apiGroup"`
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Details struct {
			Causes []struct {
				Reason string `json:"reason"`
			} `json:"causes"`
		} `json:"details"`
	} `json:"responseStatus"`
}

// ReadAuditLog calls fn with each event of kube-apiserver's JSON-lines
// audit log (Options.AuditLog, AuditLogPath).
func ReadAuditLog(path string, fn func(*AuditEvent)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // read only: a failed close loses nothing
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("audit log %s: %w", path, err)
		}
		fn(&ev)
	}
	return sc.Err()
}

// Terminating is a 403 of the NamespaceLifecycle admission plugin (a write
// into a namespace being deleted, as an install's own removal makes), not
// of RBAC.
func (ev *AuditEvent) Terminating() bool {
	for _, c := range ev.ResponseStatus.Details.Causes {
		if c.Reason == "NamespaceTerminating" {
			return true
		}
	}
	return false
}

// Object names the request's object as "resource namespace/name" (or
// "resource name" for a cluster-scoped one).
func (ev *AuditEvent) Object() string {
	r := ev.ObjectRef
	if r.Namespace == "" {
		return r.Resource + " " + r.Name
	}
	return r.Resource + " " + r.Namespace + "/" + r.Name
}

// Deletes lists the objects (AuditEvent.Object) that requests whose user
// agent starts with userAgent deleted, successfully, between from and to:
// the API server's own record of what a component removed over a window,
// which a Get of a few objects afterwards cannot replace.
func Deletes(path, userAgent string, from, to time.Time) ([]string, error) {
	var out []string
	err := ReadAuditLog(path, func(ev *AuditEvent) {
		at := ev.StageTimestamp.Time
		if ev.Verb != "delete" && ev.Verb != "deletecollection" || !strings.HasPrefix(ev.UserAgent, userAgent) ||
			ev.ResponseStatus.Code >= 300 || at.Before(from) || at.After(to) {
			return
		}
		out = append(out, ev.Object())
	})
	return out, err
}

// Unexpected returns the entries of got that want does not hold, in order:
// the deletes a test did not ask for.
func Unexpected(got []string, want ...string) []string {
	allowed := map[string]bool{}
	for _, w := range want {
		allowed[w] = true
	}
	var out []string
	for _, g := range got {
		if !allowed[g] {
			out = append(out, g)
		}
	}
	return out
}

// writeVerbs are the verbs that change what the API server stores.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// ReadsAndWrites reads the requests since from whose user agent agent
// accepts: how many read, and each write ("verb URI (code)"). A dry run is
// not a write: it stores nothing.
func ReadsAndWrites(path string, from time.Time, agent func(string) bool) (reads int, writes []string, err error) {
	err = ReadAuditLog(path, func(ev *AuditEvent) {
		if ev.Stage != "ResponseComplete" || ev.StageTimestamp.Time.Before(from) || !agent(ev.UserAgent) {
			return
		}
		if !slices.Contains(writeVerbs, ev.Verb) {
			reads++
			return
		}
		if !strings.Contains(ev.RequestURI, "dryRun=") {
			writes = append(writes, fmt.Sprintf("%s %s (%d)", ev.Verb, ev.RequestURI, ev.ResponseStatus.Code))
		}
	})
	return reads, writes, err
}
