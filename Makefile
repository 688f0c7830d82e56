# rmqguard developer tasks.
#
# Services: `make up` starts MySQL (MariaDB without Docker), Redis and RocketMQ (name server + broker) on
# 127.0.0.1 with `docker compose` when a Docker engine answers, else with deploy/local/up.sh (no Docker needed),
# then creates the topics and probes the broker. `make down` stops them.
# Connection settings: `source deploy/local/env.sh` (defaults documented there and in deploy/local/README.md).

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c

GO      ?= go
COMPOSE ?= docker compose
RMQGUARD = $(GO) run ./cmd/rmqguard

# Services backend: "docker" when a Docker engine answers, else "local". Force one with
# `make up SERVICES_MODE=local`. Recursively expanded, so `docker info` runs only for targets that use it.
SERVICES_MODE ?= $(shell timeout 20 docker info >/dev/null 2>&1 && echo docker || echo local)

# Topics the demo and the tests use; created explicitly because the broker runs with autoCreateTopicEnable=false.
TOPICS = RMQGUARD_PROBE RMQGUARD_DEMO_ORDER RMQGUARD_TEST_ORDER

.PHONY: up down demo test test-unit bench bench-purge lint chaos

# ------------------------------------------------------------------------------------------------ services

up: ## start the services (idempotent), create the topics, probe the broker
	@if [[ "$(SERVICES_MODE)" == docker ]]; then \
		echo "+ $(COMPOSE) up -d --wait"; \
		$(COMPOSE) up -d --wait; \
		$(RMQGUARD) topic ensure --namesrv 127.0.0.1:9876 --broker 127.0.0.1:10911 --queues 4 --timeout 120s $(TOPICS); \
		$(RMQGUARD) probe --namesrv 127.0.0.1:9876 --topic RMQGUARD_PROBE; \
	else \
		deploy/local/up.sh; \
	fi

down: ## stop the services that `make up` started
	@if [[ "$(SERVICES_MODE)" == docker ]]; then \
		echo "+ $(COMPOSE) down"; \
		$(COMPOSE) down; \
	else \
		deploy/local/down.sh; \
	fi

# ------------------------------------------------------------------------------------------ build and test

# Test packages run one at a time (-p 1) so the end-to-end suite does not compete with the others for the
# two cores and the broker. -race is on for every package but e2e: rocketmq-client-go's pull consumer
# (used by dlq.Read) writes its consumer group field on every pull while its rebalance goroutine reads it
# (consumer/pull_consumer.go:521), a race in the client that -race reports; our own code is race-tested by
# the other packages, which drive it with the same handlers. internal/chaos reads the DLQ the same way and runs
# without -race too; its short chaos test (MariaDB restarted, read-only, stopped) runs the example consumer as
# processes of their own.
GOTEST_FLAGS ?= -count=1 -p 1 -timeout 15m

demo: up ## run the example consumer on the real services and verify exactly-once (last line is the verdict)
	@scripts/demo.sh $(DEMO_ARGS)

chaos: up ## faults under load on a stack of its own (MariaDB restart/read-only/stop, broker restart, kill -9): one verdict line per scenario
	@scripts/chaos.sh $(CHAOS_ARGS)

test: up ## unit, integration (MariaDB) and end-to-end (broker) tests; RMQGUARD_REQUIRE_SERVICES=1 turns skips into failures
	@source deploy/local/env.sh && \
		$(GO) test -race $(GOTEST_FLAGS) $$($(GO) list ./... | grep -v -e '/e2e$$' -e '/internal/chaos$$') && \
		$(GO) test $(GOTEST_FLAGS) ./e2e/ ./internal/chaos/

test-unit: ## the tests that need no services (the others skip unless RMQGUARD_REQUIRE_SERVICES=1)
	$(GO) test -race -count=1 ./consumer/ ./middleware/ ./retry/ ./dlq/ ./internal/shop/

BENCH_COUNT ?= 6
bench: up ## benchmarks: the chain without I/O, and transactional dedup on MariaDB; compare runs with benchstat
	@mkdir -p .local/bench
	@source deploy/local/env.sh && $(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) \
		./middleware/ ./dedup/ | tee .local/bench/latest.txt
	@echo "saved to .local/bench/latest.txt (go run golang.org/x/perf/cmd/benchstat@latest old.txt .local/bench/latest.txt)"

# PURGE_ARGS: -rows (1000000), -workers (8), -baseline (20s), -batch (1000), -pause (0); see internal/purgebench.
PURGE_ARGS ?=
bench-purge: up ## F22 figures: purge 1,000,000 old dedup rows while 8 goroutines claim; claim latency with/without, rows/s, 1205/1213
	@source deploy/local/env.sh && $(GO) run ./internal/purgebench $(PURGE_ARGS)

lint: ## gofmt and go vet
	@test -z "$$(gofmt -l . | grep -v '^.local/')" || { gofmt -l . | grep -v '^.local/'; exit 1; }
	$(GO) vet ./...
