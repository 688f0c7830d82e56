package console

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The registry keeps at most maxRuns runs: a new run drops the oldest finished one, and is refused while
// every kept run is still running.
func TestRuns_KeepAtMostMaxRunsDroppingTheOldestFinished(t *testing.T) {
	rs := newRuns()
	for i := range maxRuns {
		require.NoError(t, rs.add(strconv.Itoa(i), "g", 1))
	}
	assert.ErrorIs(t, rs.add("new", "g", 1), errTooManyRuns)
	rs.finish("3", replayData{ReplayID: "3"}, nil)
	rs.finish("5", replayData{ReplayID: "5"}, nil)
	require.NoError(t, rs.add("new", "g", 1))
	_, kept := rs.get("3", "g")
	assert.False(t, kept, "the oldest finished run is dropped")
	r, kept := rs.get("5", "g")
	assert.True(t, kept)
	assert.Equal(t, "5", r.data.ReplayID)
	_, kept = rs.get("new", "other-group")
	assert.False(t, kept, "a run is shown under its own group only")
}
