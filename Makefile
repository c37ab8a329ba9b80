# Convenience targets; the README's two commands work without make too.
.PHONY: run test lint generate bench mutate

run:
	scripts/demo

test:
	scripts/test

generate:
	go tool templ generate

lint:
	gofmt -l $$(git ls-files '*.go')
	go vet ./...
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	scripts/lint-openapi

# End-to-end benchmark (docs/BENCHMARKS.md); e.g. make bench BENCH_FLAGS='-duration 2s -reps 1'.
bench:
	go run ./scripts/bench $(BENCH_FLAGS)

# Mutation testing of the money and fairness packages (docs/TESTING.md); slow, not in CI.
# e.g. make mutate MUTATE_PKGS='usage store'
mutate:
	scripts/mutate $(MUTATE_PKGS)
