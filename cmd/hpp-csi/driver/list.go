package driver

import (
	"context"
	"encoding/base64"
	"sort"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// listed is one volume with its pool, in the order pages are cut from.
type listed struct {
	pool *poolState
	vol  dirvol.Volume
}

// Page tokens name the last entry returned ("v1:" pool NUL id), not an
// offset: a volume created or deleted between two pages then neither
// repeats nor skips the others.
const tokenPrefix = "v1:"

func encodeToken(e listed) string {
	return base64.RawURLEncoding.EncodeToString([]byte(tokenPrefix + e.pool.name() + "\x00" + e.vol.ID))
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

// allVolumes lists every usable pool's volumes in (pool order, id) order.
func (d *Driver) allVolumes(ctx context.Context) ([]listed, error) {
	var out []listed
	for _, p := range d.pools {
		store, err := d.storeOf(p.own)
		if err != nil {
			continue
		}
		vols, err := store.List(ctx)
		if err != nil {
			return nil, toStatus("listing volumes of pool "+p.name(), err)
		}
		for _, v := range vols {
			out = append(out, listed{pool: p, vol: v})
		}
	}
	return out, nil
}

// page cuts one page out of entries after the token's position.
func (d *Driver) page(entries []listed, maxEntries int32, token string) ([]listed, string, error) {
	if maxEntries < 0 {
		return nil, "", invalidArg("max_entries: %d must not be negative", maxEntries)
	}
	start := 0
	if token != "" {
		poolName, id, err := decodeToken(token)
		if err != nil {
			return nil, "", err
		}
		poolIdx := d.poolIndex(poolName)
		if poolIdx < 0 {
			return nil, "", aborted("starting_token names storage pool %q which this node no longer has", poolName)
		}
		start = sort.Search(len(entries), func(i int) bool {
			pi := d.poolIndex(entries[i].pool.name())
			return pi > poolIdx || pi == poolIdx && entries[i].vol.ID > id
		})
	}
	end := len(entries)
	if maxEntries > 0 && start+int(maxEntries) < end {
		end = start + int(maxEntries)
	}
	next := ""
	if end < len(entries) {
		next = encodeToken(entries[end-1])
	}
	return entries[start:end], next, nil
}

func (d *Driver) poolIndex(name string) int {
	for i, p := range d.pools {
		if p.name() == name {
			return i
		}
	}
	return -1
}

func (d *Driver) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	all, err := d.allVolumes(ctx)
	if err != nil {
		return nil, err
	}
	entries, next, err := d.page(all, req.GetMaxEntries(), req.GetStartingToken())
	if err != nil {
		return nil, err
	}
	resp := &csi.ListVolumesResponse{NextToken: next}
	for _, e := range entries {
		resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{
			Volume: d.createResponse(e.pool, e.vol).GetVolume(),
			Status: &csi.ListVolumesResponse_VolumeStatus{},
		})
	}
	return resp, nil
}
