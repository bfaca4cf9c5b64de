package cluster

// ComponentImage is the local cluster's stand-in for a component's
// image (the root Dockerfile's <name> stage: a static binary on a distroless
// base, the binary as the entrypoint): binary at inImage, run as the
// entrypoint, and a writable /tmp. User and security settings come from
// the manifests, as they would with the real image.
func ComponentImage(ref, binary, inImage string) (Image, error) {
	img := Image{
		Ref:        ref,
		Entrypoint: []string{inImage},
		Files: []ImageFile{
			{Path: inImage, Source: binary, Mode: 0o755},
			{Path: "/tmp"}, // the layer writer makes it 1777
		},
	}
	return img, img.Validate()
}
