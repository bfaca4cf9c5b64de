// Package records is the chaos tier's workload data (issue 31): writers
// append numbered, checksummed records to their volumes and fsync each
// before acknowledging it, and Verify checks afterwards that every
// acknowledged record is there, in order, intact. A record that was being
// written when its writer died may be torn or missing, but only after the
// last acknowledged one.
//
// Records have a fixed size, so record n lives at offset (n-1)*Size: the
// same layout serves a file on a Filesystem volume and a raw Block volume,
// and a record written over the wrong place is caught by its number.
package records

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Size is a record's length on disk.
const Size = 64

// magic opens every record, so a zeroed or foreign block is not a record.
var magic = [4]byte{'H', 'P', 'P', 'R'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one acknowledged write.
type Record struct {
	// Writer identifies the writer: two writers of a shared volume write
	// files of their own, and a volume handed to the wrong pod shows.
	Writer uint32
	// Seq numbers the writer's records from 1.
	Seq uint64
	// UnixNano is when it was written (for the timeline of a failure).
	UnixNano int64
}

// Encode is r as it is written.
func (r Record) Encode() [Size]byte {
	var b [Size]byte
	copy(b[:4], magic[:])
	binary.BigEndian.PutUint32(b[4:8], r.Writer)
	binary.BigEndian.PutUint64(b[8:16], r.Seq)
	binary.BigEndian.PutUint64(b[16:24], uint64(r.UnixNano))
	// The filler depends on the number: a block of another record copied
	// here (a misplaced write) cannot pass as this one.
	for i := 24; i < Size-4; i++ {
		b[i] = byte(r.Seq>>(8*(i%8))) ^ byte(i)
	}
	binary.BigEndian.PutUint32(b[Size-4:], crc32.Checksum(b[:Size-4], castagnoli))
	return b
}

// Errors of Decode.
var (
	ErrZero     = errors.New("never written (zeros)")
	ErrDamaged  = errors.New("damaged")
	ErrMismatch = errors.New("filler does not match its number")
)

// Decode reads a record, or says why b is not one.
func Decode(b []byte) (Record, error) {
	if len(b) != Size {
		return Record{}, fmt.Errorf("%w: %d bytes, a record has %d", ErrDamaged, len(b), Size)
	}
	if isZero(b) {
		return Record{}, ErrZero
	}
	if [4]byte(b[:4]) != magic || binary.BigEndian.Uint32(b[Size-4:]) != crc32.Checksum(b[:Size-4], castagnoli) {
		return Record{}, ErrDamaged
	}
	r := Record{
		Writer:   binary.BigEndian.Uint32(b[4:8]),
		Seq:      binary.BigEndian.Uint64(b[8:16]),
		UnixNano: int64(binary.BigEndian.Uint64(b[16:24])),
	}
	if r.Encode() != [Size]byte(b) {
		return Record{}, ErrMismatch
	}
	return r, nil
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
