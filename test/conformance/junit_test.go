package conformance

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// A report as ginkgo writes it, cut down: suite nodes, a pass, a failure,
// an error (interrupted), a runtime skip and a spec left out by the focus.
const report = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="7" disabled="3" errors="1" failures="1" time="402.5">
  <testsuite name="Kubernetes e2e suite" tests="7" failures="1" errors="1" time="402.5">
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="1.2"></testcase>
    <testcase name="[sig-storage] External Storage [Driver: x] [Testpattern: Dynamic PV (default fs)] subPath should support existing directory" status="passed" time="20"></testcase>
    <testcase name="[sig-storage] External Storage [Driver: x] [Testpattern: Dynamic PV (default fs)] volumes should store data" status="failed" time="60">
      <failure message="timed out" type="failed">boom</failure>
    </testcase>
    <testcase name="[sig-storage] External Storage [Driver: x] [Testpattern: Dynamic PV (default fs)] volumeIO should write files" status="interrupted" time="60">
      <error message="interrupted" type="interrupted">stop</error>
    </testcase>
    <testcase name="[sig-storage] External Storage [Driver: x] [Testpattern: Dynamic PV (block volmode)] volumes should store data" status="skipped" time="0.1">
      <skipped message="skipped - Driver x doesn&#39;t support Block -- skipping"></skipped>
    </testcase>
    <testcase name="[sig-apps] Deployment should work" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
    <testcase name="[SynchronizedAfterSuite]" classname="Kubernetes e2e suite" status="failed" time="0.5">
      <failure message="cleanup" type="failed">x</failure>
    </testcase>
  </testsuite>
</testsuites>`

func TestSummarizeCountsSelectedSpecsOnly(t *testing.T) {
	s, err := summarize(strings.NewReader(report))
	if err != nil {
		t.Fatal(err)
	}
	if s.Passed != 1 || s.Failed != 2 || s.Skipped != 1 || s.NotSelected != 1 {
		t.Errorf("passed %d failed %d skipped %d not selected %d, want 1 2 1 1", s.Passed, s.Failed, s.Skipped, s.NotSelected)
	}
	if s.Duration != 402500*time.Millisecond {
		t.Errorf("duration %s, want 6m42.5s", s.Duration)
	}
	want := []string{
		"[sig-storage] External Storage [Driver: x] [Testpattern: Dynamic PV (default fs)] volumes should store data",
		"[sig-storage] External Storage [Driver: x] [Testpattern: Dynamic PV (default fs)] volumeIO should write files",
		"[SynchronizedAfterSuite]",
	}
	if !slices.Equal(s.Failures, want) {
		t.Errorf("failures %q, want %q", s.Failures, want)
	}
	wantReport := `4 selected: 1 passed, 1 skipped by the suite, 2 failed in 6m43s (1 specs of e2e.test not selected)
skipped by the suite:
  1 x Driver x doesn't support Block -- skipping
failed:
  ` + strings.Join(want, "\n  ")
	if got := s.Report(); got != wantReport {
		t.Errorf("report\n%s\nwant\n%s", got, wantReport)
	}
}

func TestSummarizeRefusesAnotherFormat(t *testing.T) {
	if _, err := summarize(strings.NewReader(`{"not": "xml"}`)); err == nil {
		t.Fatal("no error for a JSON report")
	}
}
