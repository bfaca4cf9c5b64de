package conformance

import (
	"cmp"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2/reporters"
)

// Summary counts a run's specs from its JUnit report.
type Summary struct {
	// Passed, Failed and Skipped count the specs the focus selected;
	// Skipped are those the suite skipped itself at run time (a pattern
	// the driver does not support, e.g. block volumes).
	Passed, Failed, Skipped int
	// NotSelected are the specs of e2e.test that the focus and skip left
	// out (the JUnit report lists every spec of the suite).
	NotSelected int
	// Failures names every failed spec or suite node.
	Failures []string
	// SkipReasons counts the suite's own skips by their message, which
	// names the capability hpp-csi lacks or the pattern that cannot apply.
	SkipReasons map[string]int
	// Duration is the suite's run time as the report gives it.
	Duration time.Duration
}

// suiteNodes are the prefixes of report entries that are suite set-up and
// tear-down, not specs: counted only when they fail.
var suiteNodes = []string{
	"[SynchronizedBeforeSuite]", "[SynchronizedAfterSuite]", "[BeforeSuite]", "[AfterSuite]",
	"[ReportBeforeSuite]", "[ReportAfterSuite]", "[DeferCleanup (Suite)]",
}

// ReadSummary parses a ginkgo JUnit report.
func ReadSummary(path string) (Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return Summary{}, fmt.Errorf("junit report: %w", err)
	}
	defer func() { _ = f.Close() }()
	s, err := summarize(f)
	if err != nil {
		return Summary{}, fmt.Errorf("junit report %s: %w", path, err)
	}
	return s, nil
}

func summarize(r io.Reader) (Summary, error) {
	var suites reporters.JUnitTestSuites
	if err := xml.NewDecoder(r).Decode(&suites); err != nil {
		return Summary{}, err
	}
	s := Summary{Duration: time.Duration(suites.Time * float64(time.Second)), SkipReasons: map[string]int{}}
	for _, suite := range suites.TestSuites {
		for _, tc := range suite.TestCases {
			failed := tc.Failure != nil || tc.Error != nil
			if isSuiteNode(tc.Name) {
				if failed {
					s.Failures = append(s.Failures, tc.Name)
				}
				continue
			}
			switch {
			case failed:
				s.Failed++
				s.Failures = append(s.Failures, tc.Name)
			case tc.Skipped != nil && tc.Skipped.Message == "skipped":
				// Ginkgo's message for a spec that the filters left out;
				// a spec that skipped itself says "skipped - <reason>".
				s.NotSelected++
			case tc.Skipped != nil:
				s.Skipped++
				s.SkipReasons[strings.TrimPrefix(tc.Skipped.Message, "skipped - ")]++
			default:
				s.Passed++
			}
		}
	}
	return s, nil
}

func isSuiteNode(name string) bool {
	for _, p := range suiteNodes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Report is the summary line, then the suite's skip reasons (most
// frequent first) and every failure, one per line.
func (s Summary) Report() string {
	var b strings.Builder
	b.WriteString(s.String())
	reasons := slices.Collect(maps.Keys(s.SkipReasons))
	slices.SortFunc(reasons, func(a, b string) int {
		return cmp.Or(cmp.Compare(s.SkipReasons[b], s.SkipReasons[a]), cmp.Compare(a, b))
	})
	if len(reasons) > 0 {
		b.WriteString("\nskipped by the suite:")
	}
	for _, r := range reasons {
		fmt.Fprintf(&b, "\n  %d x %s", s.SkipReasons[r], r)
	}
	if len(s.Failures) > 0 {
		b.WriteString("\nfailed:\n  " + strings.Join(s.Failures, "\n  "))
	}
	return b.String()
}

// String is the summary line `make conformance` prints.
func (s Summary) String() string {
	return fmt.Sprintf("%d selected: %d passed, %d skipped by the suite, %d failed in %s (%d specs of e2e.test not selected)",
		s.Passed+s.Skipped+s.Failed, s.Passed, s.Skipped, s.Failed, s.Duration.Round(time.Second), s.NotSelected)
}
