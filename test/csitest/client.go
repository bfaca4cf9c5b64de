package csitest

import (
	"fmt"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Client speaks all three CSI services over one connection, as kubelet and
// the sidecars do.
type Client struct {
	Conn *grpc.ClientConn
	csi.IdentityClient
	csi.ControllerClient
	csi.NodeClient
}

// Connect dials the driver's unix socket.
func Connect(socket string) (*Client, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", socket, err)
	}
	return &Client{
		Conn:             conn,
		IdentityClient:   csi.NewIdentityClient(conn),
		ControllerClient: csi.NewControllerClient(conn),
		NodeClient:       csi.NewNodeClient(conn),
	}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.Conn.Close() }

// Client returns a client of d closed at the test's cleanup. gRPC reconnects
// by itself, so one client survives driver restarts.
func (d *Driver) Client(t testing.TB) *Client {
	t.Helper()
	c, err := Connect(d.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
