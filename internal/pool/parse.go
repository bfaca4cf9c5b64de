package pool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

const docField = "datadir"

// knownFields are the JSON keys of Pool. Keys are matched exactly: the
// standard decoder's case-insensitive matching would let a typo such as
// "Path" through silently.
const knownFields = "name, path, snapshotPath, snapshotProvider, shared, reservedBytes, reservedPercent, legacyPath, mounted, enforceSize, projectIDs, cacheBytes"

// Parse reads the --datadir JSON array, e.g.
// [{"name":"legacy","path":"/var/hpvolumes"}], and returns every problem at
// once as errors.Join of *fieldrule.FieldError, so one restart fixes the whole config.
// Paths must be absolute; see ParseRelativeTo.
func Parse(data []byte) (*Set, error) {
	return ParseRelativeTo(data, "")
}

// ParseRelativeTo is Parse where a relative path or snapshotPath is taken
// relative to workDir, as the KubeVirt driver does (its operator writes
// "<mount>/csi" relative to the container's working directory "/"). An
// empty workDir refuses relative paths.
func ParseRelativeTo(data []byte, workDir string) (*Set, error) {
	pools, bad, errs := decode(data)
	errs = append(errs, resolveRelative(pools, bad, workDir)...)
	if len(errs) > 0 {
		// Problems of the entries that did decode are still worth
		// reporting alongside the decoding ones.
		errs = append(errs, validateEntries(pools, bad)...)
		return nil, errors.Join(errs...)
	}
	return NewSet(pools)
}

// decode splits the document into entries and decodes each one field by
// field, collecting problems instead of stopping at the first. bad marks the
// entries that had a decoding problem.
func decode(data []byte) (pools []Pool, bad map[int]bool, errs []error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, nil, []error{docError(data, err)}
	}
	if raw == nil {
		return nil, nil, []error{fieldErr(docField, "is null; it must be a JSON array of pools like %s", example)}
	}
	pools = make([]Pool, len(raw))
	bad = map[int]bool{}
	for i, entry := range raw {
		if entryErrs := decodeEntry(i, entry, &pools[i]); len(entryErrs) > 0 {
			errs = append(errs, entryErrs...)
			bad[i] = true
		}
	}
	return pools, bad, errs
}

const example = `[{"name":"legacy","path":"/var/hpvolumes"}]`

func docError(data []byte, err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field == "" {
		return fieldErr(docField, "is a JSON %s; it must be a JSON array of pools like %s", typeErr.Value, example)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return fieldErr(docField, "is empty; it must be a JSON array of pools like %s", example)
	}
	return fieldErr(docField, "is not valid JSON (%v); it must be a JSON array of pools like %s", err, example)
}

func decodeEntry(i int, entry json.RawMessage, p *Pool) []error {
	prefix := fmt.Sprintf("%s[%d]", docField, i)
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(entry, &obj); err != nil || obj == nil {
		return []error{fieldErr(prefix, "must be a JSON object with \"name\" and \"path\", got %s", jsonKind(entry))}
	}
	var errs []error
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		field := prefix + "." + k
		var err error
		switch k {
		case "name":
			err = decodeValue(field, obj[k], &p.Name, "a string")
		case "path":
			err = decodeValue(field, obj[k], &p.Path, "a string")
		case "snapshotPath":
			err = decodeValue(field, obj[k], &p.SnapshotPath, "a string")
		case "snapshotProvider":
			err = decodeValue(field, obj[k], &p.SnapshotProvider, "a string")
		case "shared":
			err = decodeValue(field, obj[k], &p.Shared, "true or false")
		case "reservedBytes":
			err = decodeValue(field, obj[k], &p.ReservedBytes, "a whole number of bytes")
		case "reservedPercent":
			err = decodeValue(field, obj[k], &p.ReservedPercent, "a number")
		case "legacyPath":
			err = decodeValue(field, obj[k], &p.LegacyPath, "a string")
		case "mounted":
			err = decodeValue(field, obj[k], &p.Mounted, "true or false")
		case "enforceSize":
			err = decodeValue(field, obj[k], &p.EnforceSize, "true or false")
		case "cacheBytes":
			err = decodeValue(field, obj[k], &p.CacheBytes, "a whole number of bytes")
		case "projectIDs":
			errs = append(errs, decodeIDRange(field, obj[k], &p.ProjectIDs)...)
			continue
		default:
			err = fieldErr(field, "is not a known field; allowed fields are %s", knownFields)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func decodeValue(field string, raw json.RawMessage, dst any, want string) error {
	if err := json.Unmarshal(raw, dst); err != nil {
		return fieldErr(field, "must be %s, got %s", want, jsonKind(raw))
	}
	return nil
}

// jsonKind names what a JSON value is, for messages that must not echo a
// possibly huge value.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "the number " + truncate(string(t), 32)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// decodeIDRange reads {"first":N,"last":M} with the same exact keys as a
// pool entry.
func decodeIDRange(field string, raw json.RawMessage, r *IDRange) []error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return []error{fieldErr(field, "must be an object like {\"first\":4000000,\"last\":4999999}, got %s", jsonKind(raw))}
	}
	var errs []error
	for _, k := range []string{"first", "last"} {
		v, ok := obj[k]
		if !ok {
			errs = append(errs, fieldErr(field+"."+k, "is required"))
			continue
		}
		dst := &r.First
		if k == "last" {
			dst = &r.Last
		}
		errs = appendErr(errs, decodeValue(field+"."+k, v, dst, fmt.Sprintf("a whole number from 1 to %d", uint32(MaxProjectID))))
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		if k != "first" && k != "last" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		errs = append(errs, fieldErr(field+"."+k, "is not a known field; allowed fields are first, last"))
	}
	return errs
}
