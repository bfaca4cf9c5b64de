package main

import (
	"math"
	"slices"
	"time"
)

// series is the latencies of one kind of call or round trip.
type series struct {
	Name       string  `json:"name"`
	Pool       string  `json:"pool,omitempty"`
	Filesystem string  `json:"filesystem,omitempty"`
	Count      int     `json:"count"`
	PerSecond  float64 `json:"perSecond"`
	P50Ms      float64 `json:"p50Ms"`
	P99Ms      float64 `json:"p99Ms"`
	MaxMs      float64 `json:"maxMs"`
}

// summarize sorts d and reports rate (count over the summed time, as the
// calls ran one after another) and percentiles (nearest rank).
func summarize(name string, d []time.Duration) series {
	s := series{Name: name, Count: len(d)}
	if len(d) == 0 {
		return s
	}
	slices.Sort(d)
	var total time.Duration
	for _, x := range d {
		total += x
	}
	s.PerSecond = round(float64(len(d)) / total.Seconds())
	s.P50Ms = ms(percentile(d, 50))
	s.P99Ms = ms(percentile(d, 99))
	s.MaxMs = ms(d[len(d)-1])
	return s
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

func ms(d time.Duration) float64 { return round(float64(d) / float64(time.Millisecond)) }

// round keeps three significant decimals, enough for a table.
func round(f float64) float64 { return math.Round(f*1000) / 1000 }
