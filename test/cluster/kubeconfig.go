package cluster

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig for one client certificate.
func writeKubeconfig(path, server string, caPEM []byte, user string, kp keyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hpp"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.CertPEM, ClientKeyData: kp.KeyPEM}
	cfg.Contexts["hpp"] = &clientcmdapi.Context{Cluster: "hpp", AuthInfo: user}
	cfg.CurrentContext = "hpp"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return nil
}
