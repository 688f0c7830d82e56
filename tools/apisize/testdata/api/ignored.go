//go:build ignore

package api

// AlsoNotCounted is in a file excluded from every build.
const AlsoNotCounted = 0
