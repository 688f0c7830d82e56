package dlqtool

import (
	"io"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/rmqguard/rmqguard/topics"
)

// Names the package keeps to itself, for its external tests.
var (
	ErrExportFormat    = errExportFormat
	ErrNoReadableRoute = errNoReadableRoute
	ErrNoStoreID       = errNoStoreID
	ErrOtherGroup      = errOtherGroup
	ReservedProperty   = reservedProperty
)

const (
	ExportFormat  = exportFormat
	ExportVersion = exportVersion
)

// Match is match, for the filter's tests.
func (f Filter) Match(l Letter) bool { return f.match(l) }

// Waiting is waiting, for the status tests.
func (s LetterStatus) Waiting() bool { return s.waiting() }

// PullConsumerOptionsOf is pullConsumerOptions, for the cluster's tests.
func PullConsumerOptionsOf(c topics.Cluster, group string) []rmq.Option {
	return pullConsumerOptions(c, group)
}

// ReadExport is ReadExportFile without the header, for the export's tests.
func ReadExport(r io.Reader) ([]Letter, error) {
	_, letters, err := ReadExportFile(r)
	return letters, err
}
