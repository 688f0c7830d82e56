package dlq

import (
	"errors"
	"io"
)

// WriteExport writes letters to w as an export file (one JSON Letter per line).
//
// SKELETON: replaced by the dlq-read work of issue 6.
func WriteExport(w io.Writer, letters []Letter) error {
	return errors.New("dlq: WriteExport: not built yet")
}

// ReadExport reads an export file written by WriteExport.
//
// SKELETON: replaced by the dlq-read work of issue 6.
func ReadExport(r io.Reader) ([]Letter, error) {
	return nil, errors.New("dlq: ReadExport: not built yet")
}
