# shellcheck shell=bash
# Default connection settings of the local environment (deploy/local/up.sh or docker compose).
# Source it: `source deploy/local/env.sh`. A variable that is already set keeps its value.
#
#   RMQGUARD_SERVICES_DIR    ~/.local/state/rmqguard             state of the services `make up` runs, shared by every
#                                                                clone: data, logs, pid files, Prometheus targets/
#   RMQGUARD_NAMESRV         127.0.0.1:9876                      RocketMQ name server(s), comma-separated
#   RMQGUARD_BROKER_ADDR     127.0.0.1:10911                     master broker (remoting), for topic creation
#   RMQGUARD_DB_ADDR         127.0.0.1:3306                      MariaDB/MySQL (the DSNs' default address)
#   RMQGUARD_DB_USER         rmqguard                            MySQL/MariaDB user created by up.sh
#   RMQGUARD_DB_PASSWORD     rmqguard                            its password
#   RMQGUARD_MYSQL_DSN       rmqguard:rmqguard@tcp(127.0.0.1:3306)/rmqguard?parseTime=true       demo DB
#   RMQGUARD_TEST_MYSQL_DSN  rmqguard:rmqguard@tcp(127.0.0.1:3306)/rmqguard_test?parseTime=true  test DB
#   RMQGUARD_REDIS_ADDR      127.0.0.1:6379                      Redis
#   RMQGUARD_PROMETHEUS_ADDR 127.0.0.1:9090                      Prometheus (scrapes 127.0.0.1:9464, the example consumer,
#                                                                and the targets listed in $RMQGUARD_SERVICES_DIR/prometheus/targets)
# up.sh starts each server on the port of its address (on 127.0.0.1) unless something already answers there.

export RMQGUARD_SERVICES_DIR="${RMQGUARD_SERVICES_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/rmqguard}"
export RMQGUARD_NAMESRV="${RMQGUARD_NAMESRV:-127.0.0.1:9876}"
export RMQGUARD_BROKER_ADDR="${RMQGUARD_BROKER_ADDR:-127.0.0.1:10911}"
export RMQGUARD_DB_ADDR="${RMQGUARD_DB_ADDR:-127.0.0.1:3306}"
export RMQGUARD_DB_USER="${RMQGUARD_DB_USER:-rmqguard}"
export RMQGUARD_DB_PASSWORD="${RMQGUARD_DB_PASSWORD:-rmqguard}"
export RMQGUARD_MYSQL_DSN="${RMQGUARD_MYSQL_DSN:-${RMQGUARD_DB_USER}:${RMQGUARD_DB_PASSWORD}@tcp(${RMQGUARD_DB_ADDR})/rmqguard?parseTime=true}"
export RMQGUARD_TEST_MYSQL_DSN="${RMQGUARD_TEST_MYSQL_DSN:-${RMQGUARD_DB_USER}:${RMQGUARD_DB_PASSWORD}@tcp(${RMQGUARD_DB_ADDR})/rmqguard_test?parseTime=true}"
export RMQGUARD_REDIS_ADDR="${RMQGUARD_REDIS_ADDR:-127.0.0.1:6379}"
export RMQGUARD_PROMETHEUS_ADDR="${RMQGUARD_PROMETHEUS_ADDR:-127.0.0.1:9090}"
