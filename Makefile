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

.PHONY: up down

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
# demo, test, bench, lint go here (add each to .PHONY). Tests that need the services can depend on `up`
# and read the settings with: source deploy/local/env.sh
