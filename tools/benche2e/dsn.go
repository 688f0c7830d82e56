package main

import (
	"fmt"

	"github.com/go-sql-driver/mysql"
)

// appDSN returns the DSN of the run's application pool (environment.db: the hand-written variants'
// transactions, rmqguard's statements outside its own transaction pool): dsn with the driver's
// interpolateParams on when interpolate is true, as dedup.WithTxDSN sets it on rmqguard's own pool, so
// that both sides send the same statements (one round trip each, not a prepare, an execute and a close);
// dsn as given when false.
func appDSN(dsn string, interpolate bool) (string, error) {
	if !interpolate {
		return dsn, nil
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("-dsn: %w", err)
	}
	cfg.InterpolateParams = true
	return cfg.FormatDSN(), nil
}
