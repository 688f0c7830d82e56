package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/spf13/cobra"
)

func newDLQExportCmd(g *globalOptions) *cobra.Command {
	var (
		f      scanFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "export --group G [filters] -o letters.jsonl",
		Short: "Save the letters of a group's DLQ to a file, before the broker's retention drops them",
		Long: "Export the selected letters of %DLQ%<group> on every master broker (body, properties, reason, origin) to a JSON Lines file:\n" +
			"a header line (format rmqguard-dlq-export, version 2, group, exported_at, complete, problems, count),\n" +
			"then one letter per line, the body base64-encoded. The file is written to a temporary file in the\n" +
			"same directory and renamed, so it is never seen half-written; -o - writes to stdout.\n" +
			"`dlq replay --from-file` replays such a file. An incomplete scan is still exported, marked\n" +
			"complete=false with its problems, and the command exits 1.",
		Args: exactArgs(0, "no argument"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output == "" {
				return usageError("-o FILE is required (-o - for stdout)")
			}
			res, err := f.scan(cmd, g, time.Now())
			if err != nil {
				return err
			}
			h := dlqtool.ExportHeader{Group: f.group, Complete: res.Complete, Problems: res.Problems}
			if err := writeExport(cmd.OutOrStdout(), output, h, res.Letters); err != nil {
				return failure(err)
			}
			state := "complete"
			if !res.Complete {
				state = "INCOMPLETE"
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "exported %d letters of %s to %s (%s)\n", len(res.Letters), res.Topic, output, state)
			return reportIncomplete(cmd.ErrOrStderr(), res)
		},
	}
	f.addScanFlags(cmd.Flags(), true)
	cmd.Flags().StringVarP(&output, "output", "o", "", "export file to write (replaced atomically), or - for stdout")
	return cmd
}

// writeExport writes the export to stdout ("-") or atomically to path: a temporary file in the same
// directory, synced, then renamed over path. On an error the temporary file is removed and path untouched.
func writeExport(stdout io.Writer, path string, h dlqtool.ExportHeader, letters []dlqtool.Letter) (err error) {
	if path == "-" {
		return dlqtool.WriteExport(stdout, h, letters)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("export to %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := dlqtool.WriteExport(tmp, h, letters); err != nil {
		return fmt.Errorf("export to %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("export to %s: sync: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("export to %s: close: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("export to %s: rename: %w", path, err)
	}
	return nil
}
