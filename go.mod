module github.com/microbox/microbox

go 1.26.0

require (
	github.com/cyphar/filepath-securejoin v0.7.0
	github.com/docker/go-units v0.5.0
	github.com/opencontainers/runtime-spec v1.3.0
	github.com/seccomp/libseccomp-golang v0.11.1
	github.com/spf13/cobra v1.10.2
	golang.org/x/sys v0.49.0
)

require (
	github.com/google/go-containerregistry v0.22.1
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
