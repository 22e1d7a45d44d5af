// Package deploy holds what runs microbox past one host, and its tests:
// the systemd unit (systemd/), the image's pinned packages (image/), the
// container seccomp profile (seccomp/) and the Kubernetes manifests
// (kubernetes/: a Kustomize base, its no-cgroup component, and the eval
// Job apart in eval/). The tests decode the manifests strictly into the
// Kubernetes API types and build each kustomization, verify the unit with
// systemd-analyze, and, given an image (make test-image), run microbox
// inside it under exactly the permissions the manifests ask for, dropping
// each in turn. docs/deploy.md is the guide.
package deploy
