// Package serve is hpp-csi's process plumbing: the CSI socket (endpoint
// parsing, listening, graceful stop), kubelet plugin registration, the
// /healthz and /metrics HTTP servers and their TLS. It knows nothing of
// CSI's semantics: the driver package builds the gRPC server (handlers,
// interceptors, metrics registry) and this package only serves it.
// Imports go one way: main wires driver into serve; neither driver nor
// serve imports the other.
package serve
