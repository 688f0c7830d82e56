package shop_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/examples/shop"
)

func TestWorkloadPlan_CountsMatchTheMessages(t *testing.T) {
	p, err := shop.Workload{RunID: "r1", Topic: "T", Messages: 2000, DuplicateShare: 0.1, FailOnce: 5, Poison: true}.Plan()
	require.NoError(t, err)
	assert.Equal(t, 200, p.Duplicates)
	assert.Equal(t, 1800, p.Events)
	assert.Len(t, p.Messages, 2001)
	perEvent := map[string]int{}
	for _, m := range p.Messages {
		perEvent[m.GetProperty("EVENT_ID")]++
	}
	assert.Len(t, perEvent, 1801, "1800 events and the poison one")
	assert.Equal(t, 1, perEvent["r1-poison"])
	twice := 0
	for _, n := range perEvent {
		require.LessOrEqual(t, n, 2)
		if n == 2 {
			twice++
		}
	}
	assert.Equal(t, 200, twice)
	_, err = shop.Decode(p.Messages[len(p.Messages)-1].Body)
	assert.Error(t, err, "the poison body does not decode")
}

func TestWorkloadPlan_RejectsBadInput(t *testing.T) {
	_, err := shop.Workload{Topic: "T", Messages: 10}.Plan()
	assert.Error(t, err)
	_, err = shop.Workload{RunID: "r", Topic: "T", Messages: 10, DuplicateShare: 0.9}.Plan()
	assert.Error(t, err)
}
