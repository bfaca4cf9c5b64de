package handlers

import "github.com/hostpath-provisioner/hpp/internal/pool"

// The harness's pool options: each edits the --datadir pools the harness
// configures ("fast" and "slow") before the driver is built from them.

// editPools applies edit to every configured pool.
func editPools(c *Config, edit func(*pool.Pool)) {
	pools := c.Pools.All()
	for i := range pools {
		edit(&pools[i])
	}
	set, err := pool.NewSet(pools)
	if err != nil {
		panic(err)
	}
	c.Pools = set
}

// mountedFast marks the harness's "fast" pool as one hpp-mounter mounts.
func mountedFast(c *Config) {
	editPools(c, func(p *pool.Pool) { p.Mounted = p.Name == "fast" })
}

// sharedSlow makes the harness's "slow" pool a shared one.
func sharedSlow(c *Config) {
	editPools(c, func(p *pool.Pool) { p.Shared = p.Name == "slow" })
}

// enforcingFast makes "fast" enforce sizes with project IDs from ids (the
// zero range: the default).
func enforcingFast(ids pool.IDRange) func(*Config) {
	return func(c *Config) {
		editPools(c, func(p *pool.Pool) {
			if p.Name == "fast" {
				p.EnforceSize, p.ProjectIDs = true, ids
			}
		})
	}
}
