package api

// NotCounted is in a test file.
const NotCounted = 0
