package records

import (
	"errors"
	"fmt"
	"io"
)

// Report is what a volume holds.
type Report struct {
	// Valid is the number of intact records from the start, in order.
	Valid uint64
	// TornTail: the slot after them holds a partial write (allowed past
	// the last acknowledged record: that write was never acknowledged).
	TornTail bool
}

// Violation is a broken promise: an acknowledged record lost, damaged or
// out of place. Its text names the record and what was found.
type Violation struct{ Msg string }

func (v *Violation) Error() string { return "records: " + v.Msg }

// Verify reads writer's records from r (a file, or a block device of the
// given size) and checks them against acked, the highest number the writer
// acknowledged. It returns a *Violation when a promise was broken, another
// error when r could not be read.
func Verify(r io.ReaderAt, size int64, writer uint32, acked uint64) (Report, error) {
	var rep Report
	s := &slots{r: r, n: uint64(size / Size)}
	for i := uint64(0); i < s.n; i++ {
		b, err := s.at(i)
		if err != nil {
			return rep, err
		}
		rec, derr := Decode(b)
		switch {
		case derr == nil && (rec.Seq != i+1 || rec.Writer != writer):
			return rep, &Violation{fmt.Sprintf("slot %d holds record %d of writer %d, want record %d of writer %d", i+1, rec.Seq, rec.Writer, i+1, writer)}
		case derr == nil:
			rep.Valid++
			continue
		case !errors.Is(derr, ErrZero):
			rep.TornTail = true
		}
		// The end of the valid run: nothing acknowledged may lie beyond,
		// and nothing valid may follow the gap.
		if rep.Valid < acked {
			return rep, &Violation{fmt.Sprintf("record %d was acknowledged (up to %d) but its slot is %v", rep.Valid+1, acked, derr)}
		}
		for j := i + 1; j < s.n; j++ {
			b, err := s.at(j)
			if err != nil {
				return rep, err
			}
			if rec, err := Decode(b); err == nil {
				return rep, &Violation{fmt.Sprintf("record %d is on the volume after a hole at record %d", rec.Seq, i+1)}
			}
		}
		return rep, nil
	}
	if rep.Valid < acked {
		return rep, &Violation{fmt.Sprintf("%d records on the volume, %d acknowledged: records %d to %d lost", rep.Valid, acked, rep.Valid+1, acked)}
	}
	return rep, nil
}

// slots reads records a chunk at a time: a Block volume of a GiB holds 16
// million slots.
type slots struct {
	r     io.ReaderAt
	n     uint64
	buf   []byte
	first uint64 // slot number of buf[0]
}

const chunkSlots = 16384

func (s *slots) at(i uint64) ([]byte, error) {
	if s.buf == nil || i < s.first || i >= s.first+uint64(len(s.buf)/Size) {
		count := min(chunkSlots, s.n-i)
		s.buf = make([]byte, count*Size)
		if _, err := s.r.ReadAt(s.buf, int64(i)*Size); err != nil {
			return nil, fmt.Errorf("reading records %d to %d: %w", i+1, i+count, err)
		}
		s.first = i
	}
	off := (i - s.first) * Size
	return s.buf[off : off+Size], nil
}
