# Convenience targets; the README's two commands work without make too.
.PHONY: run test lint generate bench

run:
	go run ./cmd/gatehouse serve --demo

test:
	scripts/test

generate:
	go tool templ generate

lint:
	gofmt -l $$(git ls-files '*.go')
	go vet ./...
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
