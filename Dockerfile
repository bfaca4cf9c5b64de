# One Dockerfile for every component, built from the repository root:
#   docker build --build-arg COMPONENT=hpp-csi -t hpp-csi .
# (make images passes COMPONENT, VERSION and COMMIT). Only go.mod, go.sum,
# internal/ and the component's cmd/ directory are copied in (make
# build-standalone builds the same way); the binary links only the packages
# it imports, so an image carries its component's dependencies and nothing
# else (test/layout holds each component to its list). The version is
# stamped exactly as the Makefile stamps it. The last stage is the
# component's own: its base image, user and entrypoint.
ARG COMPONENT=hpp-csi

FROM golang:1.26 AS build
ARG COMPONENT
ARG VERSION=dev
ARG COMMIT=unknown
WORKDIR /src
COPY go.mod go.sum ./
COPY internal/ internal/
COPY cmd/${COMPONENT}/ cmd/${COMPONENT}/
RUN cd cmd/${COMPONENT} && CGO_ENABLED=0 go build -trimpath \
      -ldflags "-X github.com/hostpath-provisioner/hpp/internal/version.Version=${VERSION} -X github.com/hostpath-provisioner/hpp/internal/version.Commit=${COMMIT}" \
      -o /out/component .

# Runs as root: it creates and bind-mounts volume directories on the host.
FROM gcr.io/distroless/static-debian12 AS hpp-csi
COPY --from=build /out/component /usr/bin/hpp-csi
ENTRYPOINT ["/usr/bin/hpp-csi"]

# Runs as root: it creates volume directories on the host.
FROM gcr.io/distroless/static-debian12 AS hpp-legacy
COPY --from=build /out/component /usr/bin/hpp-legacy
ENTRYPOINT ["/usr/bin/hpp-legacy"]

# Needs no privilege: runs as distroless's nonroot user.
FROM gcr.io/distroless/static-debian12:nonroot AS hpp-operator
USER 65532:65532
COPY --from=build /out/component /usr/bin/hpp-operator
ENTRYPOINT ["/usr/bin/hpp-operator"]

# Needs no privilege: runs as distroless's nonroot user.
FROM gcr.io/distroless/static-debian12:nonroot AS hpp-migrate
USER 65532:65532
COPY --from=build /out/component /usr/bin/hpp-migrate
ENTRYPOINT ["/usr/bin/hpp-migrate"]

# The mounter probes and formats pool disks with the image's own tools, never
# the host's through a chroot: xfsprogs (mkfs.xfs) and util-linux (blkid).
# Mounts and mountinfo are done in Go. Runs as root: it formats and mounts
# devices on the host.
FROM debian:12-slim AS hpp-mounter
RUN apt-get update && apt-get install -y --no-install-recommends xfsprogs util-linux \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/component /usr/bin/hpp-mounter
# Upstream's operator starts its mounter as /usr/bin/mounter with the same
# flags; the link lets such a pod spec run hpp-mounter unchanged.
RUN ln -s hpp-mounter /usr/bin/mounter
ENTRYPOINT ["/usr/bin/hpp-mounter"]

FROM ${COMPONENT}
