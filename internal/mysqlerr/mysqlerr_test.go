package mysqlerr_test

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/mysqlerr"
)

// wrapTwice wraps err twice with %w, as a store and a handler would.
func wrapTwice(err error) error {
	return fmt.Errorf("handler: reserve inventory: %w", fmt.Errorf("dedup: claim group cg event e-1: %w", err))
}

func TestDuplicateKey_F14_MySQL8WordingWrappedTwice(t *testing.T) {
	err := wrapTwice(&mysql.MySQLError{Number: 1062, Message: "Duplicate entry 'e-1' for key 'processed_event.PRIMARY'"})

	key, ok := mysqlerr.DuplicateKey(err)

	require.True(t, ok, "1062 wrapped twice must be found with errors.As")
	assert.Equal(t, "PRIMARY", key, "the table prefix of the MySQL 8 wording is dropped")
}

func TestDuplicateKey_F14_MariaDBWordingWrappedTwice(t *testing.T) {
	err := wrapTwice(&mysql.MySQLError{Number: 1062, Message: "Duplicate entry 'e-1' for key 'PRIMARY'"})

	key, ok := mysqlerr.DuplicateKey(err)

	require.True(t, ok)
	assert.Equal(t, "PRIMARY", key)
}

func TestDuplicateKey_F14_SecondaryKeyNameKept(t *testing.T) {
	err := wrapTwice(&mysql.MySQLError{Number: 1062, Message: "Duplicate entry 'c-7' for key 'inventory_change.uk_change_id'"})

	key, ok := mysqlerr.DuplicateKey(err)

	require.True(t, ok)
	assert.Equal(t, "uk_change_id", key, "a 1062 on a business key names that key, so it is not mistaken for the dedup row")
}

func TestDuplicateKey_F14_DecidedByNumberNotText(t *testing.T) {
	// A message that reads like a duplicate but carries another error number is not a duplicate.
	notDup := wrapTwice(&mysql.MySQLError{Number: 1213, Message: "Duplicate entry 'e-1' for key 'PRIMARY'"})
	_, ok := mysqlerr.DuplicateKey(notDup)
	assert.False(t, ok, "1213 must not be a duplicate whatever its text says")

	// A 1062 whose text carries no key is still a duplicate, with an empty key name.
	key, ok := mysqlerr.DuplicateKey(&mysql.MySQLError{Number: 1062, Message: "something else entirely"})
	assert.True(t, ok)
	assert.Empty(t, key)
}

func TestDuplicateKey_NonMySQLErrorsAreNotDuplicates(t *testing.T) {
	for name, err := range map[string]error{
		"nil":              nil,
		"plain":            errors.New("Duplicate entry 'e-1' for key 'PRIMARY'"),
		"other mysql code": &mysql.MySQLError{Number: 1146, Message: "Table 'x.processed_event' doesn't exist"},
	} {
		t.Run(name, func(t *testing.T) {
			key, ok := mysqlerr.DuplicateKey(err)
			assert.False(t, ok)
			assert.Empty(t, key)
		})
	}
}

func TestReadOnly_F20_OnlyTheReadOnlyNumbers(t *testing.T) {
	for _, n := range []uint16{1290, 1792, 1836} {
		assert.True(t, mysqlerr.ReadOnly(wrapTwice(&mysql.MySQLError{Number: n})), "MySQL %d", n)
	}
	for _, err := range []error{nil, errors.New("read only"), &mysql.MySQLError{Number: 1213},
		&mysql.MySQLError{Number: 1040}, driver.ErrBadConn} {
		assert.False(t, mysqlerr.ReadOnly(err), "%v", err)
	}
}

// The key name is the last quoted token after "for key", wherever that clause starts.
func TestDuplicateKey_F14_KeyClauseAtTheStartOfTheMessage(t *testing.T) {
	key, ok := mysqlerr.DuplicateKey(&mysql.MySQLError{Number: 1062, Message: "for key 'uk_order'"})

	assert.True(t, ok)
	assert.Equal(t, "uk_order", key)
}
