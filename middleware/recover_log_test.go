package middleware_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/middleware"
)

// A panic's stack is written once, in Recover's "stack" field. With zap's production
// options (AddStacktrace at error level) the line gets no second, useless "stacktrace" of Recover's own
// frames.
func TestRecover_PanicLineCarriesItsStackOnceUnderProductionOptions(t *testing.T) {
	var buf bytes.Buffer
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&buf), zapcore.DebugLevel)
	log := zap.New(core, zap.AddStacktrace(zapcore.ErrorLevel))

	_, err := middleware.Recover(log).Wrap(consumer.HandlerFunc(panickingOrderHandler)).Handle(context.Background(), delivery("ORDER", "", nil))
	require.ErrorIs(t, err, middleware.ErrPanic)

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 1, "one line per panic: %s", buf.String())
	var line map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &line))
	assert.Equal(t, "error", line["level"])
	assert.Contains(t, line["stack"], "middleware_test.panickingOrderHandler", "the panicking goroutine's stack")
	assert.NotContains(t, line, "stacktrace", "no second stack from zap")
}
