// Package handlers is hpp-csi's CSI face: the Identity, Controller and
// Node services, one shape each (validate the request, ask the pool
// runtime, map its answer to a gRPC code once), the gRPC server with its
// interceptors, and the call metrics. The pools themselves, and every
// side effect on the node, are package pools' (which uses package host);
// a handler never touches a disk or a mount itself.
package handlers
