package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nvdp-project/nvdp/progress"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// progressLogEvery is how often a long operation logs a progress line when
// no bar is drawn (stderr not a terminal, or --no-progress).
var progressLogEvery = 30 * time.Second

// newProgress is the one place that decides how progress is shown: a bar
// per stage on a terminal stderr without --no-progress, else a log line
// about every progressLogEvery (progress.Log).
func newProgress(cmd *cobra.Command, noProgress bool) progress.Func {
	w := cmd.ErrOrStderr()
	if f, ok := w.(*os.File); ok && !noProgress && term.IsTerminal(int(f.Fd())) {
		return barProgress(w)
	}
	return progress.Log(slog.Default(), progressLogEvery)
}

// barProgress draws one progressbar per stage on w.
func barProgress(w io.Writer) progress.Func {
	var mu sync.Mutex
	var bar *progressbar.ProgressBar
	stage := ""
	return func(e progress.Event) {
		mu.Lock()
		defer mu.Unlock()
		if bar == nil || e.Stage != stage {
			if bar != nil {
				_ = bar.Finish()
			}
			stage = e.Stage
			total := e.Total
			if total <= 0 {
				total = -1 // spinner
			}
			opts := []progressbar.Option{progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(e.Stage),
				progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetPredictTime(true),
				progressbar.OptionThrottle(250 * time.Millisecond), progressbar.OptionFullWidth(),
				progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) })}
			if e.Unit == "bytes" {
				opts = append(opts, progressbar.OptionShowBytes(true))
			} else if e.Unit != "" {
				opts = append(opts, progressbar.OptionSetItsString(e.Unit))
			}
			bar = progressbar.NewOptions64(total, opts...)
		}
		desc := e.Stage
		if e.Detail != "" {
			desc += " " + e.Detail
		}
		if e.HasLoss() {
			desc += fmt.Sprintf(" loss %.4f", e.Loss)
		}
		bar.Describe(desc)
		_ = bar.Set64(e.Done)
	}
}
