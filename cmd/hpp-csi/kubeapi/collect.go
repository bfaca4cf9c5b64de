package kubeapi

import (
	"context"
	"fmt"
)

// ClaimUID reads the UID of the claim namespace/name, for the sweep of
// copies no CreateVolume collected (cmd/hpp-csi/pools, uncollected.go):
// found is false when the API server says the claim does not exist, and
// only then; any other failure is an error, on which the sweep keeps the
// volume. Same GET (get persistentvolumeclaims) as Claim.
func (s *Sources) ClaimUID(ctx context.Context, namespace, name string) (uid string, found bool, err error) {
	c, err := s.Claim(ctx, namespace, name)
	switch {
	case IsNotFound(err):
		return "", false, nil
	case err != nil:
		return "", false, err
	case c.UID == "":
		// A claim always has a UID: an answer without one is not one
		// to delete a volume on.
		return "", false, fmt.Errorf("claim %s/%s: the API server's answer has no metadata.uid", namespace, name)
	}
	return c.UID, true, nil
}

// PersistentVolumeExists reports whether the PersistentVolume name exists
// (get persistentvolumes, as Volume); false only when the API server says
// it does not.
func (s *Sources) PersistentVolumeExists(ctx context.Context, name string) (bool, error) {
	_, err := s.Volume(ctx, name)
	switch {
	case IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}
