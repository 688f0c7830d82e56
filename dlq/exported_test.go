package dlq

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
