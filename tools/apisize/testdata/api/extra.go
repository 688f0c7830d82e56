package api

// Gauge is counted: a second file of the package.
type Gauge float64
