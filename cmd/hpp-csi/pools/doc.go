// Package pools is hpp-csi's pool runtime: everything that owns a pool's
// state on disk. It opens and recovers the pools, makes, finds, measures,
// publishes and deletes their volumes and snapshots, enforces their sizes
// and reports their capacity, health and metrics, through the side effects
// it is given (Deps; the real ones are in package host). It knows nothing
// of gRPC: a refusal is an *Error of a Kind, which the CSI handlers turn
// into a code once.
package pools
