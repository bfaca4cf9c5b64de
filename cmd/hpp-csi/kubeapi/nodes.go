package kubeapi

import (
	"context"
	"fmt"
	"net/url"
)

// NodeAddress is one of a Node's status.addresses.
type NodeAddress struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

// Node is what the peer transport reads of a Node: where to reach it.
type Node struct {
	Name      string
	Addresses []NodeAddress
}

// Node reads the Node name (get nodes: the client side of the peer
// transport looks up the address of the node that holds a source).
func (s *Sources) Node(ctx context.Context, name string) (*Node, error) {
	var n struct {
		Metadata objectMeta `json:"metadata"`
		Status   struct {
			Addresses []NodeAddress `json:"addresses"`
		} `json:"status"`
	}
	if err := s.get(ctx, "/api/v1/nodes/"+url.PathEscape(name), &n); err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	return &Node{Name: n.Metadata.Name, Addresses: n.Status.Addresses}, nil
}
