package plan

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

var specs = []Spec{
	{Kind: "kill hpp-csi", Weight: 4},
	{Kind: "restart kubelet", Weight: 1},
	{Kind: "apiserver cut", Weight: 1, Min: 30 * time.Second, Max: 30 * time.Second},
	{Kind: "pool full", Weight: 1, Min: 10 * time.Second, Max: time.Minute},
}

// The same seed replays the same run; another seed gives another.
func TestSeedReplays(t *testing.T) {
	a, err := New(42, 10*time.Minute, 15*time.Second, specs)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := New(42, 10*time.Minute, 15*time.Second, specs)
	c, _ := New(43, 10*time.Minute, 15*time.Second, specs)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("seed 42 gave two schedules")
	}
	if reflect.DeepEqual(a.Faults, c.Faults) {
		t.Fatal("seeds 42 and 43 gave the same schedule")
	}
	if n := len(a.Faults); n < 20 || n > 80 {
		t.Errorf("%d faults in 10 min at a mean gap of 15 s; want about 40", n)
	}
	for _, f := range a.Faults {
		if f.At < 0 || f.At >= a.Length {
			t.Errorf("fault %+v outside the run", f)
		}
		if f.Kind == "apiserver cut" && f.For != 30*time.Second {
			t.Errorf("cut lasts %v; want 30s", f.For)
		}
	}
	if a.Overlaps() == 0 {
		t.Error("no fault overlaps another in 10 min; they should, as on a real cluster")
	}
	out := a.String()
	if !strings.Contains(out, "seed 42 (replay: HPP_CHAOS_SEED=42)") || !strings.Contains(out, " x kill hpp-csi") {
		t.Errorf("the printed plan lacks the seed or the counts:\n%s", out)
	}
}

func TestShortRunHasEveryKind(t *testing.T) {
	for seed := range uint64(20) {
		p, err := New(seed, 2*time.Minute, time.Minute, specs)
		if err != nil {
			t.Fatal(err)
		}
		counts := p.Counts()
		for _, s := range specs {
			if counts[s.Kind] == 0 {
				t.Fatalf("seed %d: no %q in a 2 min run:\n%s", seed, s.Kind, p)
			}
		}
		for i := 1; i < len(p.Faults); i++ {
			if p.Faults[i].At < p.Faults[i-1].At {
				t.Fatalf("seed %d: faults out of order:\n%s", seed, p)
			}
		}
	}
}

func TestBadInput(t *testing.T) {
	if _, err := New(1, time.Minute, time.Second, []Spec{{Kind: "x", Weight: 0}}); err == nil || !strings.Contains(err.Error(), `fault "x"`) {
		t.Errorf("zero weight: %v", err)
	}
	t.Setenv("HPP_CHAOS_SEED", "abc")
	if _, err := SeedFromEnv(); err == nil || !strings.Contains(err.Error(), "HPP_CHAOS_SEED") {
		t.Errorf("bad seed: %v", err)
	}
	t.Setenv("HPP_CHAOS_SEED", "7")
	if s, err := SeedFromEnv(); err != nil || s != 7 {
		t.Errorf("seed 7: %d, %v", s, err)
	}
}
