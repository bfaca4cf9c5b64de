package handlers

import (
	"context"
	"encoding/base64"
	"sort"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
)

// Page tokens name the last entry returned ("v1:" pool NUL id), not an
// offset: a volume created or deleted between two pages then neither
// repeats nor skips the others.
const tokenPrefix = "v1:"

func encodeToken(poolName, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(tokenPrefix + poolName + "\x00" + id))
}

func decodeToken(tok string) (poolName, id string, err error) {
	raw, derr := base64.RawURLEncoding.DecodeString(tok)
	s := string(raw)
	if derr != nil || !strings.HasPrefix(s, tokenPrefix) || !strings.Contains(s, "\x00") {
		return "", "", aborted("starting_token %q was not issued by this driver; restart the listing without a token", tok)
	}
	poolName, id, _ = strings.Cut(strings.TrimPrefix(s, tokenPrefix), "\x00")
	return poolName, id, nil
}

// page cuts one page out of entries, which are in (pool order, id) order
// with key naming each one's pool and id, after the token's position.
func page[T any](d *Driver, entries []T, key func(T) (poolName, id string), maxEntries int32, token string) ([]T, string, error) {
	if maxEntries < 0 {
		return nil, "", invalidArg("max_entries: %d must not be negative", maxEntries)
	}
	start := 0
	if token != "" {
		poolName, id, err := decodeToken(token)
		if err != nil {
			return nil, "", err
		}
		poolIdx := d.pools.Index(poolName)
		if poolIdx < 0 {
			return nil, "", aborted("starting_token names storage pool %q which this node no longer has", poolName)
		}
		start = sort.Search(len(entries), func(i int) bool {
			entryPool, entryID := key(entries[i])
			pi := d.pools.Index(entryPool)
			return pi > poolIdx || pi == poolIdx && entryID > id
		})
	}
	end := len(entries)
	if maxEntries > 0 && start+int(maxEntries) < end {
		end = start + int(maxEntries)
	}
	next := ""
	if end < len(entries) {
		next = encodeToken(key(entries[end-1]))
	}
	return entries[start:end], next, nil
}

func volumeKey(v pools.Volume) (string, string) { return v.Pool(), v.ID }

func (d *Driver) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	all, err := d.pools.Volumes(ctx)
	if err != nil {
		return nil, toStatus("ListVolumes", err)
	}
	entries, next, err := page(d, all, volumeKey, req.GetMaxEntries(), req.GetStartingToken())
	if err != nil {
		return nil, err
	}
	resp := &csi.ListVolumesResponse{NextToken: next}
	for _, e := range entries {
		resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{
			Volume: d.createResponse(e).GetVolume(),
			Status: &csi.ListVolumesResponse_VolumeStatus{},
		})
	}
	return resp, nil
}
