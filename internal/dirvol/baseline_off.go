//go:build !hpp_baseline

package dirvol

// baselineNoDurability is true only in the benchmark's baseline build (tag
// hpp_baseline): see baseline_on.go.
const baselineNoDurability = false

func (s *Store) baselineCreate(string, Spec) (Volume, bool, error) { panic("not the baseline build") }
func (s *Store) baselineDelete(string) error                       { panic("not the baseline build") }
