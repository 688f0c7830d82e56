# rmqguard developer tasks.
#
# Services: `make up` starts MySQL (MariaDB without Docker), Redis, RocketMQ (name server + broker) and Prometheus
# on 127.0.0.1 with `docker compose` when a Docker engine answers, else with deploy/local/up.sh (no Docker needed),
# then creates the topics and probes the broker. One set per machine, shared by every clone: what already runs is
# reused, whoever started it. `make down` stops them (for every clone).
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

.PHONY: up down demo test test-unit test-rules interop-java screenshots bench bench-e2e bench-purge lint api-size layers mutate chaos

# ------------------------------------------------------------------------------------------------ services

# Docker: --no-recreate keeps containers that any clone started (their mounts name that clone's files);
# `make down && make up` takes this checkout's. Prometheus's targets/ folder is the local mode's.
up: ## start the services or reuse the running ones (idempotent), create the topics, probe the broker
	@if [[ "$(SERVICES_MODE)" == docker ]]; then \
		source deploy/local/env.sh; \
		mkdir -p "$$RMQGUARD_SERVICES_DIR/prometheus/targets"; \
		echo "+ $(COMPOSE) up -d --wait --no-recreate"; \
		$(COMPOSE) up -d --wait --no-recreate; \
		$(RMQGUARD) topic ensure --namesrv 127.0.0.1:9876 --broker 127.0.0.1:10911 --queues 4 --timeout 120s $(TOPICS); \
		$(RMQGUARD) probe --namesrv 127.0.0.1:9876 --topic RMQGUARD_PROBE; \
		deploy/local/chromium.sh install; \
	else \
		deploy/local/up.sh; \
	fi

down: ## stop the services that `make up` started (from any clone)
	@if [[ "$(SERVICES_MODE)" == docker ]]; then \
		source deploy/local/env.sh; \
		echo "+ $(COMPOSE) down"; \
		$(COMPOSE) down; \
	else \
		deploy/local/down.sh; \
	fi

# ------------------------------------------------------------------------------------------ build and test

# Test packages run one at a time (-p 1) so the end-to-end suite does not compete with the others for the
# two cores and the broker. -race is on for every package but e2e and tools/chaos, which drive the client
# and example-consumer processes end to end and would take several times longer under -race; our own code is
# race-tested by the other packages, which drive it with the same handlers (e2e/acl runs with -race). The DLQ
# reader assigns its queues (no rebalance), which avoids the client's pull-consumer race
# (consumer/pull_consumer.go:521) that once kept dlq out of the -race run. The short chaos test (MariaDB
# restarted, read-only, stopped) runs the example consumer as processes of their own.
GOTEST_FLAGS ?= -count=1 -p 1 -timeout 15m

demo: up ## run the example consumer on the real services and verify exactly-once (last line is the verdict)
	@scripts/demo.sh $(DEMO_ARGS)

chaos: up ## faults under load on a stack of its own (MariaDB restart/read-only/stop, broker restart, kill -9; outbox and effects in flight: kill -9, broker stopped, receiver down): one verdict line per scenario
	@scripts/chaos.sh $(CHAOS_ARGS)

# The e2e packages run without -race: the client's push consumer races with itself when a broker's
# rebalance notice arrives while it shuts down (rmqClient.Shutdown against InvokeSync), a race in the client.
# `make test` starts the services itself, so a test that cannot reach one fails instead of skipping:
# RMQGUARD_REQUIRE_SERVICES=1 is set here, not left to the caller. `make test-unit` is the no-service run.
# dedup/redisfast's Redis-down tests start a redis-server of their own on 16399 (testenv.StartRedis): the binary
# comes with `make up` in local mode (deploy/local/up.sh installs redis-server); in docker mode install it.
test: layers up test-rules interop-java ## unit, integration (MariaDB, Redis) and end-to-end (broker) tests, Prometheus rules, dedup's tests again on the caller's pool (no WithTxDSN); a missing service fails the run
	@command -v redis-server >/dev/null || { echo "make test: redis-server not found; dedup/redisfast's tests start their own (apt-get install redis-server)" >&2; exit 1; }
	@source deploy/local/env.sh && export RMQGUARD_REQUIRE_SERVICES=1 && \
		$(GO) test -race $(GOTEST_FLAGS) $$($(GO) list ./... | grep -v -e '/e2e$$' -e '/e2e/' -e '/tools/chaos$$') && \
		$(GO) test $(GOTEST_FLAGS) ./e2e/... ./tools/chaos/ && \
		RMQGUARD_TEST_DEDUP_TXPOOL=0 $(GO) test -race $(GOTEST_FLAGS) ./dedup/

# The Java producer of e2e's interop test (TestE2E_JavaProducer…): official RocketMQ Java client,
# built with Maven into interop/java-producer/target (git-ignored) when missing or older than its sources. The test
# runs the same script itself, so `go test -run JavaProducer ./e2e/` works alone; here a missing java or mvn
# fails `make test` before the long run starts.
interop-java: ## build the Java producer of the interop test (Maven; needs java 17+ and mvn)
	@scripts/interop-java.sh

# promtool comes with the Debian package prometheus, which `make up` installs in local mode; installed here
# when missing (e.g. in docker mode; the demo-ratio test in cmd/example-consumer runs the prometheus binary too).
PROMTOOL ?= promtool
test-rules: ## promtool: check deploy/prometheus (config and rules) and run the rule unit tests (rules_test.yml)
	@command -v $(PROMTOOL) >/dev/null || deploy/local/prometheus-instance.sh install
	$(PROMTOOL) check config deploy/prometheus/prometheus.yml
	$(PROMTOOL) check rules deploy/prometheus/rules.yml
	$(PROMTOOL) test rules deploy/prometheus/rules_test.yml

# The console's browser tests (headless Chromium, which `make up` installs) run in `make test` too, with their
# screenshots in temporary folders; here RMQGUARD_SCREENSHOTS=1 writes them to docs/images/console-*.png (replaced),
# the README's and docs/dlq-and-replay.md's pictures. Commit the new ones when the pages changed.
screenshots: up ## the console's browser tests, writing a screenshot of each page they visit to docs/images/console-*.png
	@source deploy/local/env.sh && export RMQGUARD_REQUIRE_SERVICES=1 RMQGUARD_SCREENSHOTS=1 && \
		$(GO) test -count=1 -run '^TestConsoleBrowser_' ./internal/console/

test-unit: layers ## the tests that need no services (the others skip unless RMQGUARD_REQUIRE_SERVICES=1)
	$(GO) test -race -count=1 ./consumer/ ./middleware/ ./retry/ ./dlq/ ./examples/shop/ ./internal/scrape/ ./internal/rmq/ ./tools/dashboards/ ./tools/layers/

BENCH_COUNT ?= 6
# The dedup and redisfast benchmarks need MariaDB and Redis (`up`); RMQGUARD_REQUIRE_SERVICES=1 makes a missing
# service fail the run instead of skipping those benchmarks.
bench: up ## benchmarks: the chain without I/O, transactional dedup on MariaDB, duplicates with and without the Redis fast path; compare runs with benchstat
	@mkdir -p .local/bench
	@source deploy/local/env.sh && export RMQGUARD_REQUIRE_SERVICES=1 && \
		$(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) \
		./middleware/ ./dedup/ ./dedup/redisfast/ | tee .local/bench/latest.txt
	@echo "saved to .local/bench/latest.txt (go run golang.org/x/perf/cmd/benchstat@latest old.txt .local/bench/latest.txt)"

# PURGE_ARGS: -rows (1000000), -workers (8), -baseline (20s), -batch (1000), -pause (0); see tools/purgebench.
PURGE_ARGS ?=
bench-purge: up ## F22 figures: purge 1,000,000 old dedup rows while 8 goroutines claim; claim latency with/without, rows/s, 1205/1213
	@source deploy/local/env.sh && $(GO) run ./tools/purgebench $(PURGE_ARGS)

# BENCH_E2E_ARGS: -messages (20000), -rounds (3), -variants (raw,baseline,rmqguard,rmqguard-outbox,rmqguard-batch,
# handwritten-batch,batch-ceiling,duplicates,duplicates-redis; handwritten-batch and batch-ceiling are hand-written
# one-transaction-per-32-message-callback references for rmqguard-batch, with and without dedup rows), -goroutines
# (20), -handler-timeout (10s; 0: the consumer's default 30s), -rss-backlog (100000; 0 skips it), -stall (1m), -redis
# (RMQGUARD_REDIS_ADDR: duplicates-redis), -redis-timeout (50ms); see tools/benche2e. Topics, tables, dedup rows and Redis keys of the
# run are removed at the end.
BENCH_E2E_ARGS ?=
bench-e2e: up ## drain a backlog on the real broker with raw/baseline/rmqguard/outbox/batch variants/hot rows/duplicates (with and without Redis), interleaved: msgs/s, ratios, lost batches and retries, RSS
	@source deploy/local/env.sh && $(GO) run ./tools/benche2e $(BENCH_E2E_ARGS)

layers: ## imports point one way: each package imports only its own layer or lower ones, no cycle between folders (tools/layers declares the layers)
	@$(GO) run ./tools/layers

# API_SIZE_ARGS: -all (also internal/, tools/, cmd/, examples/), -uses FILE (the names one Go file uses); see `go run ./tools/apisize -h`.
API_SIZE_ARGS ?=
api-size: ## the public API's size: exported identifiers per package (top-level names, methods of exported types) and the total
	@$(GO) run ./tools/apisize $(API_SIZE_ARGS)

lint: ## gofmt and go vet
	@test -z "$$(gofmt -l . | grep -v '^.local/')" || { gofmt -l . | grep -v '^.local/'; exit 1; }
	$(GO) vet ./...

# ------------------------------------------------------------------------------------------ mutation testing

# go-gremlins, pinned, installed with `go install` into .local/tools/ (git-ignored) on first use.
GREMLINS_VERSION ?= v0.6.0
GREMLINS_DIR      = $(CURDIR)/.local/tools/gremlins-$(GREMLINS_VERSION)
GREMLINS          = $(GREMLINS_DIR)/gremlins
# Packages whose own tests are run against each mutant. dedup's tests are integration tests on MariaDB,
# hence `up` and RMQGUARD_REQUIRE_SERVICES=1 (a mutant must never "survive" because the tests skipped).
MUTATE_PKGS      ?= consumer middleware retry dedup
MUTATE_WORKERS   ?= 2
# Each mutant's test run may take this many times the un-mutated run; small packages test in milliseconds,
# so gremlins' default cut-off counts the compile of a mutant as a timeout (neither killed nor lived).
MUTATE_TIMEOUT_COEFFICIENT ?= 20
MUTATE_THRESHOLD ?= 90

$(GREMLINS):
	@mkdir -p $(GREMLINS_DIR)
	GOBIN=$(GREMLINS_DIR) $(GO) install github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION)

# Slow (minutes per package): not part of `make test` or CI. Reports per package and a summary in
# .local/mutate/; fails when a package's efficacy is below MUTATE_THRESHOLD %.
mutate: up $(GREMLINS) ## mutation testing (go-gremlins) of consumer, middleware, retry and dedup; slow, not in CI
	@mkdir -p .local/mutate
	@source deploy/local/env.sh && export RMQGUARD_REQUIRE_SERVICES=1 && status=0 && \
	for pkg in $(MUTATE_PKGS); do \
		out=.local/mutate/$${pkg//\//-}; \
		echo "+ gremlins unleash ./$$pkg"; \
		$(GREMLINS) unleash --workers $(MUTATE_WORKERS) --timeout-coefficient $(MUTATE_TIMEOUT_COEFFICIENT) --output $$out.json ./$$pkg \
			> $$out.txt 2>&1 || status=1; \
		grep -E '^ +LIVED' $$out.txt || true; \
		eff=$$(sed -n 's/^Test efficacy: \([0-9.]*\)%.*/\1/p' $$out.txt); \
		echo "mutate: $$pkg efficacy=$${eff:-?}% ($$(grep -E '^Killed:' $$out.txt))"; \
		if [[ -z "$$eff" ]] || ! awk -v e="$$eff" -v m="$(MUTATE_THRESHOLD)" 'BEGIN { exit !(e >= m) }'; then status=1; fi; \
	done; \
	exit $$status
