// Package plan is the chaos tier's fault schedule (issue 31): which fault
// happens when, for how long, drawn from a seed. The same seed gives the
// same schedule, so a failed run is replayed by passing its printed seed
// (HPP_CHAOS_SEED); faults may overlap, as they do on real clusters.
package plan

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Kind is a fault's kind, e.g. "kill hpp-csi" or "apiserver cut".
type Kind string

// Spec is a kind the schedule may draw: how often relative to the others,
// and how long it lasts (a kill lasts 0: the component comes back on its
// own; a cut or a full pool lasts between Min and Max).
type Spec struct {
	Kind     Kind
	Weight   int
	Min, Max time.Duration
}

// Fault is one scheduled fault.
type Fault struct {
	At   time.Duration // from the start of the run
	For  time.Duration
	Kind Kind
}

// Plan is a run's schedule.
type Plan struct {
	Seed   uint64
	Length time.Duration
	Faults []Fault
}

// New draws faults over length with gaps of mean meanGap (exponential:
// bursts and lulls), each kind by its weight, and adds any kind the draw
// left out once at a random time.
func New(seed uint64, length, meanGap time.Duration, specs []Spec) (Plan, error) {
	total := 0
	for _, s := range specs {
		if s.Weight <= 0 || s.Min < 0 || s.Max < s.Min {
			return Plan{}, fmt.Errorf("fault %q: weight %d, duration %v to %v: the weight must be positive and the durations ordered", s.Kind, s.Weight, s.Min, s.Max)
		}
		total += s.Weight
	}
	if total == 0 || meanGap <= 0 {
		return Plan{}, fmt.Errorf("no fault kinds, or a mean gap of %v", meanGap)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := Plan{Seed: seed, Length: length}
	for at := time.Duration(rng.ExpFloat64() * float64(meanGap)); at < length; at += time.Duration(rng.ExpFloat64() * float64(meanGap)) {
		pick := rng.IntN(total)
		for _, s := range specs {
			if pick -= s.Weight; pick < 0 {
				d := s.Min
				if s.Max > s.Min {
					d += time.Duration(rng.Int64N(int64(s.Max - s.Min)))
				}
				p.Faults = append(p.Faults, Fault{At: at, For: d, Kind: s.Kind})
				break
			}
		}
	}
	// Every kind at least once, at a time of its own: a short run (the one
	// in make test) still shows each fault, whatever the draw.
	have := p.Counts()
	for _, s := range specs {
		if have[s.Kind] > 0 || length <= 0 {
			continue
		}
		d := s.Min
		if s.Max > s.Min {
			d += time.Duration(rng.Int64N(int64(s.Max - s.Min)))
		}
		p.Faults = append(p.Faults, Fault{At: time.Duration(rng.Int64N(int64(length))), For: d, Kind: s.Kind})
	}
	sort.SliceStable(p.Faults, func(i, j int) bool { return p.Faults[i].At < p.Faults[j].At })
	return p, nil
}

// Counts is the number of faults of each kind.
func (p Plan) Counts() map[Kind]int {
	out := map[Kind]int{}
	for _, f := range p.Faults {
		out[f.Kind]++
	}
	return out
}

// Overlaps counts faults that start while an earlier one still lasts.
func (p Plan) Overlaps() int {
	n := 0
	var until time.Duration
	for _, f := range p.Faults {
		if f.At < until {
			n++
		}
		until = max(until, f.At+f.For)
	}
	return n
}

// String is the schedule, one fault a line, with the seed to replay it.
func (p Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos plan: seed %d (replay: HPP_CHAOS_SEED=%d), %v, %d faults, %d overlapping\n", p.Seed, p.Seed, p.Length, len(p.Faults), p.Overlaps())
	for _, f := range p.Faults {
		fmt.Fprintf(&b, "  t+%-8v %s", f.At.Round(100*time.Millisecond), f.Kind)
		if f.For > 0 {
			fmt.Fprintf(&b, " for %v", f.For.Round(100*time.Millisecond))
		}
		b.WriteByte('\n')
	}
	counts := p.Counts()
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(&b, "  %d x %s\n", counts[Kind(k)], k)
	}
	return b.String()
}

// SeedFromEnv is HPP_CHAOS_SEED when set (a replay), else a new seed from
// the clock. A seed that does not parse is an error naming the variable.
func SeedFromEnv() (uint64, error) {
	v := os.Getenv("HPP_CHAOS_SEED")
	if v == "" {
		return uint64(time.Now().UnixNano()), nil
	}
	s, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("HPP_CHAOS_SEED=%q: not an unsigned integer: %w", v, err)
	}
	return s, nil
}
