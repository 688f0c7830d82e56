package dlq

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// F42: a census that does not read a broker where the last census counted waiting letters (a master that
// is down: the name server forgets it and the scan of the others is complete) is withheld, for at most
// missingBrokerLimit; a broker read again, or read with no waiting letter, is no longer missing.
func TestMonitorMissing_ABrokerThatHeldWaitingLettersAndIsNotReadWithholdsTheCount(t *testing.T) {
	m := &Monitor{held: map[string]time.Time{}}
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	census := func(waiting map[string]int) Census { return Census{WaitingByBroker: waiting} }

	assert.Empty(t, m.missing(census(map[string]int{"a": 1, "b": 2, "c": 0}), t0))
	assert.Equal(t, []string{"b"}, m.missing(census(map[string]int{"a": 1, "c": 0}), t0.Add(time.Minute)), "b down")
	assert.Equal(t, []string{"a", "b"}, m.missing(census(map[string]int{}), t0.Add(2*time.Minute)), "no DLQ listed (ErrNoDLQ)")
	assert.Empty(t, m.missing(census(map[string]int{"a": 1, "b": 2, "c": 0}), t0.Add(3*time.Minute)), "b back")

	assert.Equal(t, []string{"a", "b"}, m.missing(census(map[string]int{"c": 0}), t0.Add(4*time.Minute)))
	assert.Equal(t, []string{"a", "b"}, m.missing(census(map[string]int{"c": 0}), t0.Add(3*time.Minute+missingBrokerLimit-time.Second)))
	assert.Empty(t, m.missing(census(map[string]int{"c": 0}), t0.Add(3*time.Minute+missingBrokerLimit)), "forgotten after the limit")
	assert.Empty(t, m.missing(census(map[string]int{"a": 0, "b": 1}), t0.Add(2*time.Hour)))

	assert.Empty(t, m.missing(census(map[string]int{"a": 0, "b": 0}), t0.Add(3*time.Hour)), "b read with its letters replayed")
	assert.Empty(t, m.missing(census(map[string]int{"a": 0}), t0.Add(4*time.Hour)), "b held no waiting letter: its absence changes nothing")
}
