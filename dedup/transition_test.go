package dedup_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/retry"
)

func TestStates_NewStatesNamesTheBadField(t *testing.T) {
	good := dedup.StateTable{Table: "orders", KeyColumn: "order_no"}
	for field, mutate := range map[string]func(*dedup.StateTable){
		"Table":         func(s *dedup.StateTable) { s.Table = "orders;drop" },
		"KeyColumn":     func(s *dedup.StateTable) { s.KeyColumn = "" },
		"StatusColumn":  func(s *dedup.StateTable) { s.StatusColumn = "st-atus" },
		"VersionColumn": func(s *dedup.StateTable) { s.VersionColumn = "1version" },
	} {
		t.Run(field, func(t *testing.T) {
			st := good
			mutate(&st)
			_, err := dedup.NewStates(st)
			require.ErrorIs(t, err, dedupsql.ErrInvalidIdentifier)
			assert.Contains(t, err.Error(), "state table: "+field+": ")
		})
	}
}

func TestStates_NewStatesRefusesOneColumnForTwoRoles(t *testing.T) {
	for name, st := range map[string]dedup.StateTable{
		"StatusColumn":  {Table: "orders", KeyColumn: "order_no", StatusColumn: "ORDER_NO"},
		"VersionColumn": {Table: "orders", KeyColumn: "order_no", VersionColumn: "Status"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := dedup.NewStates(st)
			require.ErrorIs(t, err, dedupsql.ErrInvalidIdentifier)
			assert.Contains(t, err.Error(), "state table: "+name+": ")
		})
	}
}

func TestStates_DefaultsAreStatusAndVersion(t *testing.T) {
	s, err := dedup.NewStates(dedup.StateTable{Table: "orders", KeyColumn: "order_no"})
	require.NoError(t, err)
	// The defaults are columns the transition sets itself, so Set may not name them.
	for _, col := range []string{"status", "VERSION", "order_no"} {
		_, err := s.Transition(context.Background(), nil, dedup.Transition{
			Key: "o-1", From: []string{"WAIT_PAY"}, To: "PAID", Version: 2, Set: map[string]any{col: 1}})
		assert.True(t, retry.Classify(err) == retry.ClassPermanent, "Set %s: %v", col, err)
	}
}

// TestStates_InvalidTransitionIsPermanent: a handler's programming error must go to the DLQ, not loop;
// it is found before any statement runs (the transaction is nil here).
func TestStates_InvalidTransitionIsPermanent(t *testing.T) {
	s, err := dedup.NewStates(dedup.StateTable{Table: "orders", KeyColumn: "order_no"})
	require.NoError(t, err)
	valid := dedup.Transition{Key: "o-1", From: []string{"WAIT_PAY"}, To: "PAID", Version: 2}
	for name, c := range map[string]struct {
		mutate func(*dedup.Transition)
		says   string
	}{
		"nil key":         {func(tr *dedup.Transition) { tr.Key = nil }, "Key is nil"},
		"no from":         {func(tr *dedup.Transition) { tr.From = nil }, "From lists no status"},
		"empty from":      {func(tr *dedup.Transition) { tr.From = []string{"WAIT_PAY", ""} }, "empty status"},
		"empty to":        {func(tr *dedup.Transition) { tr.To = "" }, "To is empty"},
		"version 0":       {func(tr *dedup.Transition) { tr.Version = 0 }, "Version 0 is below 1"},
		"negative":        {func(tr *dedup.Transition) { tr.Version = -3 }, "Version -3"},
		"bad set column":  {func(tr *dedup.Transition) { tr.Set = map[string]any{"paid at": 1} }, "Set: "},
		"set the version": {func(tr *dedup.Transition) { tr.Set = map[string]any{"version": 9} }, "Set: \"version\""},
	} {
		t.Run(name, func(t *testing.T) {
			tr := valid
			c.mutate(&tr)
			_, err := s.Transition(context.Background(), nil, tr)
			require.Error(t, err)
			assert.True(t, retry.Classify(err) == retry.ClassPermanent, "%v", err)
			assert.Contains(t, err.Error(), c.says)
			assert.Contains(t, err.Error(), "orders")
		})
	}
}

func TestStates_ResultNames(t *testing.T) {
	for r, want := range map[dedup.TransitionResult]string{
		dedup.TransitionApplied: "applied", dedup.TransitionStale: "stale", dedup.TransitionIllegal: "illegal",
		dedup.TransitionAhead: "ahead", dedup.TransitionMissing: "missing", 0: "TransitionResult(0)",
	} {
		assert.Equal(t, want, r.String())
	}
}

func TestActions_NewActionsNamesTheBadField(t *testing.T) {
	for field, at := range map[string]dedup.ActionTable{
		"Table":     {Table: "", KeyColumn: "change_id"},
		"KeyColumn": {Table: "inventory_change", KeyColumn: "change id"},
		"KeyName":   {Table: "inventory_change", KeyColumn: "change_id", KeyName: "uk`x"},
	} {
		t.Run(field, func(t *testing.T) {
			_, err := dedup.NewActions(at)
			require.ErrorIs(t, err, dedupsql.ErrInvalidIdentifier)
			assert.Contains(t, err.Error(), "action table: "+field+": ")
		})
	}
}

func TestActions_InvalidRecordIsPermanent(t *testing.T) {
	a, err := dedup.NewActions(dedup.ActionTable{Table: "inventory_change", KeyColumn: "change_id"})
	require.NoError(t, err)
	for name, c := range map[string]struct {
		id   string
		cols map[string]any
		says string
	}{
		"empty id":       {"", nil, "action ID is empty"},
		"bad column":     {"c-1", map[string]any{"sku-id": "s"}, "columns: "},
		"the key column": {"c-1", map[string]any{"Change_ID": "c-2"}, "key column"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := a.Record(context.Background(), nil, c.id, c.cols)
			require.Error(t, err)
			assert.True(t, retry.Classify(err) == retry.ClassPermanent, "%v", err)
			assert.Contains(t, err.Error(), c.says)
			assert.Contains(t, err.Error(), "inventory_change")
		})
	}
}

func TestActions_ResultNames(t *testing.T) {
	assert.Equal(t, "applied", dedup.ActionApplied.String())
	assert.Equal(t, "already applied", dedup.ActionAlreadyApplied.String())
	assert.Equal(t, "ActionResult(7)", dedup.ActionResult(7).String())
}
