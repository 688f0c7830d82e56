// Package shoptest connects the example domain's tests, tools and end-to-end tests to the test database:
// internal/testenv's MySQL with the example's tables (shop.Migrate) applied too. internal/testenv itself
// knows nothing of the example, so the library's tests depend on nothing above the library.
package shoptest

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// MySQL opens the test database (testenv.MySQL: the dedup schema), applies the example domain's schema
// (shop.Migrate) and closes it when the test ends.
func MySQL(t testing.TB) *sqlx.DB {
	t.Helper()
	db := testenv.MySQL(t)
	if err := shop.Migrate(context.Background(), db.DB); err != nil {
		t.Fatalf("migrate the example domain: %v", err)
	}
	return db
}
