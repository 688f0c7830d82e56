package dlq

// NewLetter exposes newLetter to the external tests.
var NewLetter = newLetter
