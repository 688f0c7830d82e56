package main

import (
	"errors"
	"fmt"
)

// Exit codes of every rmqguard command: 0 success; 1 a failure, or a result that is incomplete or partly
// failed (a DLQ scan that could not read everything, a replay with failed letters); 2 a usage error (bad
// flag, missing argument, invalid value), detected before anything was read or sent.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// exitError carries the process exit code of a command's error up to main, which prints err (if any) and
// exits with code. Build one with usageError or failure; any other error exits with exitFailure.
type exitError struct {
	code int
	err  error // nil: the command already printed what went wrong; main prints nothing more
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit code %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageError returns an error that makes rmqguard exit with exitUsage (2), printing the formatted message.
func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// failure returns an error that makes rmqguard exit with exitFailure (1). With a nil err main prints
// nothing: use it when the command has already reported the problems itself (e.g. an incomplete scan).
func failure(err error) error { return &exitError{code: exitFailure, err: err} }

// exitCode returns the exit code for a command's error: exitOK for nil, the code of an exitError in the
// chain, else exitFailure. Flag parsing errors become usage errors through the root's FlagErrorFunc.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return exitFailure
}

// asExitError is errors.As for *exitError.
func asExitError(err error, target **exitError) bool { return errors.As(err, target) }
