package dirvol

import (
	"errors"
	"fmt"
	"os"

	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
)

// Limits on Spec.Attributes: they live in the volume's record, which List
// reads for every volume and which must fit one extended attribute of a
// 4 KiB-block ext4 (about 4,000 bytes, the JSON around them included).
const (
	MaxAttributes     = 32
	MaxAttributeBytes = 2048 // keys and values together
)

func fieldErr(field, format string, args ...any) error {
	return &fieldrule.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// validatePath checks a path argument: absolute and clean, so that what we
// log and compare is what we touch.
func validatePath(field, p string) error { return fieldrule.CheckAbsPath(field, p, true) }

// Validate reports every problem with the spec at once, each as a
// *fieldrule.FieldError naming the spec field.
func (s Spec) Validate() error {
	var errs []error
	if s.Mode&^os.ModePerm != 0 {
		errs = append(errs, fieldErr("spec.mode", "%#o has bits outside the permission bits 0777 (setuid, setgid, sticky and file types are not allowed)", uint32(s.Mode)))
	}
	if s.UID < -1 {
		errs = append(errs, fieldErr("spec.uid", "%d is negative; use -1 to keep the process's uid", s.UID))
	}
	if s.GID < -1 {
		errs = append(errs, fieldErr("spec.gid", "%d is negative; use -1 to keep the process's gid", s.GID))
	}
	if s.CapacityBytes < 0 {
		errs = append(errs, fieldErr("spec.capacityBytes", "%d is negative", s.CapacityBytes))
	}
	switch s.Kind {
	case "", KindPersistent, KindEphemeral:
	default:
		errs = append(errs, fieldErr("spec.kind", "%q is unknown; use %q or %q", s.Kind, KindPersistent, KindEphemeral))
	}
	if err := validateAttributes(s.Attributes); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func validateAttributes(attrs map[string]string) error {
	if len(attrs) > MaxAttributes {
		return fieldErr("spec.attributes", "has %d entries; at most %d are allowed", len(attrs), MaxAttributes)
	}
	total := 0
	for k, v := range attrs {
		if k == "" {
			return fieldErr("spec.attributes", "has an empty key")
		}
		total += len(k) + len(v)
	}
	if total > MaxAttributeBytes {
		return fieldErr("spec.attributes", "hold %d bytes of keys and values; at most %d are allowed", total, MaxAttributeBytes)
	}
	return nil
}

// mode is the permission the volume directory gets.
func (o Ownership) mode() os.FileMode {
	if o.Mode == 0 {
		return DefaultMode
	}
	return o.Mode
}

func (s Spec) kind() string {
	if s.Kind == "" {
		return KindPersistent
	}
	return s.Kind
}
