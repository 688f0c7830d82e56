package consumer

import (
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"go.uber.org/zap"
)

// BridgeClientLog routes the client's rlog output into logger, so one process has one log stream.
// rlog holds a single process-wide logger (a client behaviour), so the last call wins; call it once at
// start-up. The client's Info chatter is logged at zap's Debug level.
func BridgeClientLog(logger *zap.Logger) {
	rlog.SetLogger(&zapRlog{log: logger.Named("rocketmq").WithOptions(zap.AddCallerSkip(2))})
}

type zapRlog struct{ log *zap.Logger }

func fields(m map[string]interface{}) []zap.Field {
	out := make([]zap.Field, 0, len(m))
	for k, v := range m {
		out = append(out, zap.Any(k, v))
	}
	return out
}

func (z *zapRlog) Debug(msg string, f map[string]interface{})   { z.log.Debug(msg, fields(f)...) }
func (z *zapRlog) Info(msg string, f map[string]interface{})    { z.log.Debug(msg, fields(f)...) }
func (z *zapRlog) Warning(msg string, f map[string]interface{}) { z.log.Warn(msg, fields(f)...) }
func (z *zapRlog) Error(msg string, f map[string]interface{})   { z.log.Error(msg, fields(f)...) }
func (z *zapRlog) Fatal(msg string, f map[string]interface{})   { z.log.Error(msg, fields(f)...) }
func (z *zapRlog) Level(string)                                 {}
func (z *zapRlog) OutputPath(string) error                      { return nil }
