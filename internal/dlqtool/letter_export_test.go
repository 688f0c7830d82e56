package dlqtool

// NewLetter exposes newLetter to the external tests.
var NewLetter = newLetter
